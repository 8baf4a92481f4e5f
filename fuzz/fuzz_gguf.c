/*
 * fuzz_gguf.c - libFuzzer target for the GGUF reader (and, through it, the writer and the
 * dequantizers).
 *
 * For every input:
 *   1. open it from an exact-size buffer (libFuzzer's own allocation: ASan sees any read
 *      past its end). A refusal must carry a reader message ("gguf: ...").
 *   2. If it opens, check the reader's promises on every pair and tensor: every string is
 *      NUL-terminated at its stated length, nested arrays are walkable, lookups by key and
 *      by name find the same index, tensor data lies inside the input and is aligned, and
 *      the first row of each tensor of a type sift computes with dequantizes without fault.
 *   3. Round trip: copy every pair and tensor into the writer, write a file, open it again:
 *      it must open, with the same keys, value types, tensor names, shapes and bytes.
 * A broken promise calls __builtin_trap(), which libFuzzer reports as a crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/ggml_types.h"
#include "gguf/gguf.h"
#include "sift.h"

#define CHECK(c)                       \
    do {                               \
        if (!(c)) __builtin_trap();    \
    } while (0)

static void walk(const sift_gguf_value *v, int depth)
{
    CHECK(v && depth <= SIFT_GGUF_MAX_DEPTH);
    int type = sift_gguf_value_type(v);
    size_t len;
    if (type == SIFT_GGUF_STRING) {
        const char *s = sift_gguf_value_str(v, &len);
        CHECK(s && s[len] == 0);
        return;
    }
    if (type != SIFT_GGUF_ARRAY) {
        int64_t i;
        double d;
        (void)sift_gguf_value_int(v, &i);
        (void)sift_gguf_value_float(v, &d);
        return;
    }
    int et = sift_gguf_array_type(v);
    uint64_t n = sift_gguf_array_n(v);
    const uint8_t *data = sift_gguf_array_data(v);
    if (et == SIFT_GGUF_STRING) {
        for (uint64_t i = 0; i < n; i++) {
            const char *s = sift_gguf_array_str(v, i, &len);
            CHECK(s && s[len] == 0);
        }
        CHECK(sift_gguf_array_str(v, n, &len) == NULL);
    } else if (et == SIFT_GGUF_ARRAY) {
        for (uint64_t i = 0; i < n; i++) walk(sift_gguf_array_elem(v, i), depth + 1);
        CHECK(sift_gguf_array_elem(v, n) == NULL);
    } else if (n) {
        static const uint8_t esize[SIFT_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
        CHECK(data != NULL && esize[et] > 0);
        volatile uint8_t sink = data[0];
        sink = data[n * esize[et] - 1]; /* the last byte of the last element */
        (void)sink;
    }
}

static void check_tensors(const sift_gguf *g, size_t size)
{
    static float row[4096];
    for (int64_t i = 0; i < sift_gguf_n_tensors(g); i++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
        CHECK(t && sift_gguf_find_tensor(g, t->name) == i);
        CHECK(strlen(t->name) < SIFT_GGUF_MAX_NAME);
        CHECK(t->file_offset <= size && t->size <= size - t->file_offset);
        CHECK(t->file_offset % sift_gguf_alignment(g) == 0);
        CHECK((const uint8_t *)t->data == sift__gguf_bytes(g) + t->file_offset);
        const sift__type_traits *tt = sift__type_traits_get(t->type);
        CHECK(tt && t->ne[0] % tt->block_size == 0);
        /* dequantize the first row (when it is short enough for the scratch row) */
        if (tt->dequantize && t->size >= t->nb[1] && t->ne[0] > 0 && t->ne[0] <= 4096)
            CHECK(sift__dequantize_row(t->type, t->data, row, t->ne[0]) == SIFT_OK);
    }
}

static void round_trip(const sift_gguf *g)
{
    sift__gguf_writer *w = sift__gguf_writer_new();
    CHECK(w);
    sift_error e = {0};
    for (int64_t i = 0; i < sift_gguf_n_kv(g); i++)
        CHECK(sift__gguf_writer_set_value(w, sift_gguf_key(g, i), sift_gguf_kv_value(g, i)) == SIFT_OK);
    for (int64_t i = 0; i < sift_gguf_n_tensors(g); i++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
        CHECK(sift__gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size, &e) == SIFT_OK);
    }
    uint8_t *buf = NULL;
    size_t n = 0;
    CHECK(sift__gguf_writer_write_buffer(w, &buf, &n, &e) == SIFT_OK);
    sift__gguf_writer_free(w);
    sift_gguf *h = sift_gguf_open_buffer(buf, n, &e);
    CHECK(h != NULL);
    CHECK(sift_gguf_n_kv(h) == sift_gguf_n_kv(g) && sift_gguf_n_tensors(h) == sift_gguf_n_tensors(g));
    CHECK(sift_gguf_alignment(h) == sift_gguf_alignment(g));
    for (int64_t i = 0; i < sift_gguf_n_kv(g); i++) {
        CHECK(strcmp(sift_gguf_key(g, i), sift_gguf_key(h, i)) == 0);
        const sift_gguf_value *a = sift_gguf_kv_value(g, i), *b = sift_gguf_kv_value(h, i);
        CHECK(sift_gguf_value_type(a) == sift_gguf_value_type(b));
        CHECK(sift_gguf_array_type(a) == sift_gguf_array_type(b) && sift_gguf_array_n(a) == sift_gguf_array_n(b));
    }
    for (int64_t i = 0; i < sift_gguf_n_tensors(g); i++) {
        const sift_gguf_tensor *a = sift_gguf_tensor_at(g, i), *b = sift_gguf_tensor_at(h, i);
        CHECK(strcmp(a->name, b->name) == 0 && a->type == b->type && a->n_dims == b->n_dims);
        CHECK(memcmp(a->ne, b->ne, sizeof a->ne) == 0 && a->size == b->size);
        CHECK(a->size == 0 || memcmp(a->data, b->data, a->size) == 0);
    }
    sift_gguf_close(h);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sift_error e = {0};
    sift_gguf *g = sift_gguf_open_buffer(data, size, &e);
    if (!g) {
        CHECK(e.status < 0 && strncmp(e.msg, "gguf: ", 6) == 0);
        return 0;
    }
    CHECK(sift_gguf_version(g) == 2 || sift_gguf_version(g) == 3);
    CHECK(sift_gguf_data_offset(g) <= size);
    for (int64_t i = 0; i < sift_gguf_n_kv(g); i++) {
        const char *k = sift_gguf_key(g, i);
        CHECK(k && k[0] && sift_gguf_find_key(g, k) == i);
        walk(sift_gguf_kv_value(g, i), 0);
    }
    CHECK(sift_gguf_key(g, sift_gguf_n_kv(g)) == NULL);
    check_tensors(g, size);
    round_trip(g);
    sift_gguf_close(g);
    return 0;
}
