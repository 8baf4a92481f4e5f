/*
 * gguf.h - internal side of the GGUF reader (the public API is in sift.h, section GGUF)
 * and the GGUF writer used by `sift quantize` and by tests that generate files.
 *
 * The writer collects metadata pairs and tensors in memory and writes a GGUF v3 file the
 * way ggml's gguf_write_to_file does: header, pairs in insertion order, tensor infos with
 * offsets assigned back to back (each padded to the alignment), zero padding to the
 * alignment, then the data, each tensor padded with zeros to the alignment. Tensor data
 * is borrowed (not copied) until the file is written. A file written from a sift_gguf with
 * every pair copied and every tensor added in order is byte-identical to the original
 * when the original was written by ggml.
 */
#ifndef SIFT_GGUF_GGUF_H
#define SIFT_GGUF_GGUF_H

#include <stdint.h>

#include "sift.h"

#define SIFT_GGUF_DEFAULT_ALIGNMENT 32
#define SIFT_GGUF_MAX_NAME 64  /* tensor names are shorter than this (ggml's GGML_MAX_NAME) */
#define SIFT_GGUF_MAX_DEPTH 8  /* arrays may nest this many levels (the spec sets no limit) */

/* Open for inspection (`sift info`): as sift_gguf_open, except that a tensor whose rows are
 * not whole blocks of its type (which sift_gguf_open refuses, as ggml does) is kept with its
 * name, type, shape and offset but no data (nb[0] = 0, size 0, data NULL), so the rest of
 * the file can be shown. The model loader never uses this. */
sift_gguf *sift__gguf_open_inspect(const char *path, sift_error *err);
/* How many tensors inspection mode kept without data, and the first one's message. */
int64_t sift__gguf_problems(const sift_gguf *g, const char **first);

/* The raw file bytes (the mapping or the caller's buffer). */
const uint8_t *sift__gguf_bytes(const sift_gguf *g);
/* The open file behind the mapping (offsets as in sift__gguf_bytes), for reading its bytes
 * with pread instead of through the mapping; -1 for sift_gguf_open_buffer. Owned by g. */
int sift__gguf_fd(const sift_gguf *g);

/* ---- writer ---- */
typedef struct sift__gguf_writer sift__gguf_writer;

sift__gguf_writer *sift__gguf_writer_new(void);
void sift__gguf_writer_free(sift__gguf_writer *w);

/* Scalars: `value` points at one value of `type` (a C bool for SIFT_GGUF_BOOL). Setting a
 * key that is already set replaces its value (the pair keeps its position). */
int sift__gguf_writer_set(sift__gguf_writer *w, const char *key, sift_gguf_type type, const void *value);
int sift__gguf_writer_set_u32(sift__gguf_writer *w, const char *key, uint32_t v);
int sift__gguf_writer_set_f32(sift__gguf_writer *w, const char *key, float v);
int sift__gguf_writer_set_str(sift__gguf_writer *w, const char *key, const char *s);
/* An array of n numbers/bools of elem_type, copied (bools as uint8_t 0/1). */
int sift__gguf_writer_set_arr(sift__gguf_writer *w, const char *key, sift_gguf_type elem_type, const void *data,
                             uint64_t n);
/* An array of n NUL-terminated strings, copied. */
int sift__gguf_writer_set_arr_str(sift__gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* The same with each string's length given (lens NULL: strlen), so a string may hold NUL bytes. */
int sift__gguf_writer_set_arr_strn(sift__gguf_writer *w, const char *key, const char *const *strs, const size_t *lens,
                                  uint64_t n);
/* Copy any value (nested arrays included) from an open file. */
int sift__gguf_writer_set_value(sift__gguf_writer *w, const char *key, const sift_gguf_value *v);
/* Remove a key if present. */
void sift__gguf_writer_remove(sift__gguf_writer *w, const char *key);

/* A tensor: name (< 64 bytes, unique), type, n_dims (1..4) and ne[], and `size` bytes of
 * data, which must equal the size the shape implies. `data` is borrowed until the write. */
int sift__gguf_writer_add_tensor(sift__gguf_writer *w, const char *name, sift_tensor_type type, uint32_t n_dims,
                                const int64_t *ne, const void *data, uint64_t size, sift_error *err);

/* Write the file (GGUF v3). The alignment is general.alignment when set (a u32 power of
 * two), else 32. */
int sift__gguf_writer_write_file(const sift__gguf_writer *w, const char *path, sift_error *err);
/* Write into a malloc'ed buffer the caller frees. */
int sift__gguf_writer_write_buffer(const sift__gguf_writer *w, uint8_t **out, size_t *size, sift_error *err);

#endif
