/*
 * gguf_corrupt.c - corrupted GGUF files generated from the shared models, at test time.
 *
 * usage: gguf_corrupt [--sift PATH] [--cli-every N] [--random N] [--v2-quant] [--refused] MODEL.gguf
 *
 * From one valid base file it derives, in memory, every corruption in the list below whose
 * detection is guaranteed (so each one must be refused), opens each from an exact-size
 * heap copy (so AddressSanitizer sees any read past the end) and checks the refusal: NULL,
 * status SIFT_E_FORMAT or SIFT_E_UNSUPPORTED, a message starting "gguf: ". Every N-th
 * variant (default 20; and every header variant) is also written to a temporary file and given to
 * `sift info`, which must exit with 1, print the reader's message, and print no sanitizer
 * report. Finally --random N single/multi-byte mutations at random places (detection not
 * guaranteed) must not crash; the ones that still open are walked through the whole API.
 *
 *   header:  each magic byte; version 0, 1, 4, 2^32-1, big-endian 3; tensor and metadata
 *            counts 2^62 and 2^64-1
 *   cuts:    the file cut at every field boundary of the header, every pair (key length,
 *            key, type, array header, value) and every tensor info (name, n_dims, each ne,
 *            type, offset), at the data section start, and at the start, middle and last
 *            byte of every tensor's data
 *   pairs:   key length 0, 2^64-1 and one past the end; a key made a duplicate of an
 *            earlier key of the same length; value type 13 and 2^32-1; string length 2^64-1;
 *            array element type 13; array count 2^62 and 2^64-1; a bool set to 2
 *   tensors: name length 2^64-1; a name made a duplicate; n_dims 5 and 2^32-1; a dimension
 *            2^63 (negative) and 2^40; type 4 (removed), 43 and 2^32-1; a type with twice the
 *            bytes per element (overlap / past the end); offset +1, +16, 2^64-32 and the file
 *            size rounded up; the offset of another tensor (overlap)
 *   rewritten through sift's writer: general.alignment as u64, 0, 48 and 64 (misaligned)
 *
 * --v2-quant turns the base into a GGUF v2 file whose matrices are Q8_0 (rows permitting),
 * adding: a row length that is not a multiple of the block (ne[0] = 48 on a 64-wide Q8_0
 * matrix). --refused: the base itself is refused (the v1 file): only cuts and header
 * variants, all of which must be refused too.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/ggml_types.h"
#include "gguf/gguf.h"
#include "sift.h"

/* ---- the base file and its field map -------------------------------------------------- */

typedef struct {
    uint64_t key_len_at, key_at, type_at, value_at, end; /* value_at: the value (or array header) */
    uint64_t key_len;
    uint32_t type, elem_type;
} kv_map;

typedef struct {
    uint64_t name_len_at, name_at, ndims_at, ne_at, type_at, off_at, end, name_len;
    uint32_t n_dims, type;
    uint64_t offset, size;
} tensor_map;

typedef struct {
    uint8_t *p;
    size_t n;
    uint64_t n_kv, n_tensors, data_at;
    kv_map *kv;
    tensor_map *t;
} base_file;

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t skip_value(const uint8_t *p, uint64_t at, uint32_t type)
{
    static const int sz[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == SIFT_GGUF_STRING) return at + 8 + rd64(p + at);
    if (type != SIFT_GGUF_ARRAY) return at + (uint64_t)sz[type];
    uint32_t et = rd32(p + at);
    uint64_t n = rd64(p + at + 4);
    at += 12;
    for (uint64_t i = 0; i < n; i++) {
        if (et == SIFT_GGUF_STRING) at += 8 + rd64(p + at);
        else if (et == SIFT_GGUF_ARRAY) at = skip_value(p, at, SIFT_GGUF_ARRAY);
        else at += (uint64_t)sz[et];
    }
    return at;
}

/* Map the fields of a file the reader accepted (so the walk needs no checks). */
static void map_base(base_file *b, const sift_gguf *g)
{
    const uint8_t *p = b->p;
    b->n_tensors = rd64(p + 8);
    b->n_kv = rd64(p + 16);
    b->kv = calloc(b->n_kv + 1, sizeof *b->kv);
    b->t = calloc(b->n_tensors + 1, sizeof *b->t);
    uint64_t at = 24;
    for (uint64_t i = 0; i < b->n_kv; i++) {
        kv_map *k = &b->kv[i];
        k->key_len_at = at;
        k->key_len = rd64(p + at);
        k->key_at = at + 8;
        k->type_at = k->key_at + k->key_len;
        k->type = rd32(p + k->type_at);
        k->value_at = k->type_at + 4;
        if (k->type == SIFT_GGUF_ARRAY) k->elem_type = rd32(p + k->value_at);
        k->end = at = skip_value(p, k->value_at, k->type);
    }
    for (uint64_t i = 0; i < b->n_tensors; i++) {
        tensor_map *t = &b->t[i];
        t->name_len_at = at;
        t->name_len = rd64(p + at);
        t->name_at = at + 8;
        t->ndims_at = t->name_at + t->name_len;
        t->n_dims = rd32(p + t->ndims_at);
        t->ne_at = t->ndims_at + 4;
        t->type_at = t->ne_at + 8ull * t->n_dims;
        t->type = rd32(p + t->type_at);
        t->off_at = t->type_at + 4;
        t->offset = rd64(p + t->off_at);
        t->end = at = t->off_at + 8;
        t->size = sift_gguf_tensor_at(g, (int64_t)i)->size;
    }
    b->data_at = sift_gguf_data_offset(g);
}

/* ---- running the variants ----------------------------------------------------------------- */

static const char *sift_exe;
static int cli_every = 20, n_variants, n_cli, n_failed;
static char tmpdir[64];

static void failf(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failf(const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL [%s]: ", what);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    n_failed++;
}

/* `sift info FILE` must exit 1 with the reader's message and no sanitizer report. */
static void check_cli(const char *what, const uint8_t *data, size_t n)
{
    char path[128], errpath[128];
    snprintf(path, sizeof path, "%s/v.gguf", tmpdir);
    snprintf(errpath, sizeof errpath, "%s/stderr", tmpdir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f)) {
        failf(what, "cannot write %s", path);
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen(errpath, "w", stderr)) _exit(127);
        execl(sift_exe, sift_exe, "info", path, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    char err[4096] = {0};
    FILE *e = fopen(errpath, "r");
    if (e) {
        size_t k = fread(err, 1, sizeof err - 1, e);
        err[k] = 0;
        fclose(e);
    }
    n_cli++;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 1)
        failf(what, "sift info: exit status %d (signal %d), stderr: %.300s", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0, err);
    else if (strstr(err, "Sanitizer") || strstr(err, "runtime error"))
        failf(what, "sift info: sanitizer report: %.300s", err);
    else if (!strstr(err, "sift info: ") || !strstr(err, "gguf: "))
        failf(what, "sift info: no reader message: %.300s", err);
}

/* A variant that must be refused. force_cli: always also run the CLI on it. */
static void expect_refused(const char *what, const uint8_t *data, size_t n, bool force_cli)
{
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, data, n);
    sift_error e = {0};
    sift_gguf *g = sift_gguf_open_buffer(copy, n, &e);
    n_variants++;
    if (g) {
        failf(what, "the corrupted file was accepted");
        sift_gguf_close(g);
    } else if ((e.status != SIFT_E_FORMAT && e.status != SIFT_E_UNSUPPORTED) || strncmp(e.msg, "gguf: ", 6) != 0) {
        failf(what, "status %d, message '%s'", e.status, e.msg);
    }
    free(copy);
    if (sift_exe && (force_cli || n_variants % cli_every == 0)) check_cli(what, data, n);
}

/* Overwrite `len` bytes at `at` in a copy of the base and expect a refusal. */
static void patch(const base_file *b, const char *what, uint64_t at, const void *bytes, size_t len, bool force_cli)
{
    uint8_t *v = malloc(b->n);
    memcpy(v, b->p, b->n);
    memcpy(v + at, bytes, len);
    expect_refused(what, v, b->n, force_cli);
    free(v);
}
static void patch32(const base_file *b, const char *what, uint64_t at, uint32_t x, bool cli)
{
    patch(b, what, at, &x, 4, cli);
}
static void patch64(const base_file *b, const char *what, uint64_t at, uint64_t x, bool cli)
{
    patch(b, what, at, &x, 8, cli);
}
static void cut(const base_file *b, const char *what, uint64_t at)
{
    if (at < b->n) expect_refused(what, b->p, at, false);
}

/* ---- the variants ------------------------------------------------------------------------- */

static void header_variants(const base_file *b)
{
    char what[64];
    for (int i = 0; i < 4; i++) {
        uint8_t x = b->p[i] ^ 0xFF;
        snprintf(what, sizeof what, "magic byte %d", i);
        patch(b, what, (uint64_t)i, &x, 1, true);
    }
    const uint32_t versions[] = {0, 1, 4, UINT32_MAX, 0x03000000};
    for (size_t i = 0; i < 5; i++) {
        snprintf(what, sizeof what, "version %" PRIu32, versions[i]);
        patch32(b, what, 4, versions[i], true);
    }
    patch64(b, "tensor count 2^62", 8, 1ull << 62, true);
    patch64(b, "tensor count 2^64-1", 8, UINT64_MAX, true);
    patch64(b, "kv count 2^62", 16, 1ull << 62, true);
    patch64(b, "kv count 2^64-1", 16, UINT64_MAX, true);
}

static void cut_variants(const base_file *b)
{
    char what[96];
    for (uint64_t at = 0; at < 24; at += 4) {
        snprintf(what, sizeof what, "cut in the header at %" PRIu64, at);
        cut(b, what, at);
    }
    for (uint64_t i = 0; i < b->n_kv; i++) {
        const kv_map *k = &b->kv[i];
        const uint64_t at[] = {k->key_len_at, k->key_len_at + 4, k->key_at, k->key_at + k->key_len / 2, k->type_at,
                               k->value_at, k->value_at + 1, k->end - 1};
        for (size_t j = 0; j < sizeof at / sizeof at[0]; j++) {
            snprintf(what, sizeof what, "cut in kv %" PRIu64 " at %" PRIu64, i, at[j]);
            cut(b, what, at[j]);
        }
        if (k->type == SIFT_GGUF_ARRAY) {
            snprintf(what, sizeof what, "cut in kv %" PRIu64 " array header", i);
            cut(b, what, k->value_at + 6);
            cut(b, what, k->value_at + 12);
            cut(b, what, k->value_at + 12 + (k->end - k->value_at - 12) / 2);
        }
    }
    for (uint64_t i = 0; i < b->n_tensors; i++) {
        const tensor_map *t = &b->t[i];
        const uint64_t at[] = {t->name_len_at, t->name_at, t->ndims_at, t->ne_at, t->ne_at + 8, t->type_at, t->off_at,
                               t->end - 1};
        for (size_t j = 0; j < sizeof at / sizeof at[0]; j++) {
            snprintf(what, sizeof what, "cut in tensor info %" PRIu64 " at %" PRIu64, i, at[j]);
            cut(b, what, at[j]);
        }
    }
    if (b->n_tensors == 0) return;
    cut(b, "cut at the data section", b->data_at);
    for (uint64_t i = 0; i < b->n_tensors; i++) {
        const tensor_map *t = &b->t[i];
        if (t->size == 0) continue;
        uint64_t start = b->data_at + t->offset;
        snprintf(what, sizeof what, "cut in the data of tensor %" PRIu64, i);
        cut(b, what, start);
        cut(b, what, start + t->size / 2);
        cut(b, what, start + t->size - 1);
    }
}

static void kv_variants(const base_file *b)
{
    char what[96];
    for (uint64_t i = 0; i < b->n_kv; i++) {
        const kv_map *k = &b->kv[i];
        snprintf(what, sizeof what, "kv %" PRIu64 ": key length", i);
        patch64(b, what, k->key_len_at, 0, false);
        patch64(b, what, k->key_len_at, UINT64_MAX, false);
        patch64(b, what, k->key_len_at, b->n - k->key_at + 1, false);
        snprintf(what, sizeof what, "kv %" PRIu64 ": value type", i);
        patch32(b, what, k->type_at, 13, false);
        patch32(b, what, k->type_at, UINT32_MAX, false);
        for (uint64_t j = 0; j < i; j++) /* duplicate of an earlier key of the same length */
            if (b->kv[j].key_len == k->key_len && k->key_len > 0) {
                snprintf(what, sizeof what, "kv %" PRIu64 ": duplicate of kv %" PRIu64, i, j);
                patch(b, what, k->key_at, b->p + b->kv[j].key_at, (size_t)k->key_len, false);
                break;
            }
        if (k->type == SIFT_GGUF_STRING) {
            snprintf(what, sizeof what, "kv %" PRIu64 ": string length", i);
            patch64(b, what, k->value_at, UINT64_MAX, false);
        }
        if (k->type == SIFT_GGUF_BOOL) {
            uint8_t two = 2;
            snprintf(what, sizeof what, "kv %" PRIu64 ": bool 2", i);
            patch(b, what, k->value_at, &two, 1, false);
        }
        if (k->type == SIFT_GGUF_ARRAY) {
            snprintf(what, sizeof what, "kv %" PRIu64 ": array", i);
            patch32(b, what, k->value_at, 13, false);
            patch64(b, what, k->value_at + 4, 1ull << 62, false);
            patch64(b, what, k->value_at + 4, UINT64_MAX, false);
            if (k->elem_type == SIFT_GGUF_STRING && rd64(b->p + k->value_at + 4) > 0) {
                snprintf(what, sizeof what, "kv %" PRIu64 ": first string length", i);
                patch64(b, what, k->value_at + 12, UINT64_MAX, false);
            }
        }
    }
}

static void tensor_variants(const base_file *b)
{
    char what[96];
    for (uint64_t i = 0; i < b->n_tensors; i++) {
        const tensor_map *t = &b->t[i];
        snprintf(what, sizeof what, "tensor %" PRIu64 ": name length", i);
        patch64(b, what, t->name_len_at, UINT64_MAX, false);
        for (uint64_t j = 0; j < i; j++)
            if (b->t[j].name_len == t->name_len && t->name_len > 0) {
                snprintf(what, sizeof what, "tensor %" PRIu64 ": duplicate name of tensor %" PRIu64, i, j);
                patch(b, what, t->name_at, b->p + b->t[j].name_at, (size_t)t->name_len, false);
                break;
            }
        snprintf(what, sizeof what, "tensor %" PRIu64 ": n_dims", i);
        patch32(b, what, t->ndims_at, 5, false);
        patch32(b, what, t->ndims_at, UINT32_MAX, false);
        for (uint32_t d = 0; d < t->n_dims; d++) {
            snprintf(what, sizeof what, "tensor %" PRIu64 ": ne[%u]", i, d);
            patch64(b, what, t->ne_at + 8ull * d, 1ull << 63, false);
            patch64(b, what, t->ne_at + 8ull * d, 1ull << 40, false);
        }
        snprintf(what, sizeof what, "tensor %" PRIu64 ": type", i);
        patch32(b, what, t->type_at, 4, false);
        patch32(b, what, t->type_at, SIFT_TYPE_COUNT, false);
        patch32(b, what, t->type_at, UINT32_MAX, false);
        /* twice the bytes: the data then overlaps the next tensor or runs past the end */
        uint32_t wider = t->type == SIFT_TYPE_F32 ? SIFT_TYPE_F64 : t->type == SIFT_TYPE_F16 ? SIFT_TYPE_F32 : 0;
        if (wider && t->size >= 64) {
            snprintf(what, sizeof what, "tensor %" PRIu64 ": type %s -> %s", i, sift_type_name((int)t->type),
                     sift_type_name((int)wider));
            patch32(b, what, t->type_at, wider, false);
        }
        if (t->type == SIFT_TYPE_Q8_0 && t->n_dims == 2 && rd64(b->p + t->ne_at) == 64) {
            snprintf(what, sizeof what, "tensor %" PRIu64 ": q8_0 row of 48", i);
            patch64(b, what, t->ne_at, 48, false);
        }
        snprintf(what, sizeof what, "tensor %" PRIu64 ": offset", i);
        patch64(b, what, t->off_at, t->offset + 1, false);
        patch64(b, what, t->off_at, t->offset + 16, false);
        patch64(b, what, t->off_at, UINT64_MAX - 31, false);
        patch64(b, what, t->off_at, (b->n + 31) / 32 * 32, false);
        if (t->size > 0) /* the offset of another non-empty tensor: overlap */
            for (uint64_t j = 0; j < b->n_tensors; j++)
                if (j != i && b->t[j].size > 0) {
                    snprintf(what, sizeof what, "tensor %" PRIu64 ": offset of tensor %" PRIu64, i, j);
                    patch64(b, what, t->off_at, b->t[j].offset, false);
                    break;
                }
    }
}

/* Rewrite the base through sift's writer (general.alignment = 32, same layout) and make
 * that pair bad: type i32, 0, 48, or a power of two that some tensor offset is not a
 * multiple of. */
static void alignment_variants(const base_file *b, const sift_gguf *g)
{
    sift__gguf_writer *w = sift__gguf_writer_new();
    for (int64_t i = 0; i < sift_gguf_n_kv(g); i++) sift__gguf_writer_set_value(w, sift_gguf_key(g, i), sift_gguf_kv_value(g, i));
    sift__gguf_writer_set_u32(w, "general.alignment", 32);
    sift_error e = {0};
    for (int64_t i = 0; i < sift_gguf_n_tensors(g); i++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
        sift__gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size, &e);
    }
    uint8_t *buf;
    size_t n;
    int st = sift__gguf_writer_write_buffer(w, &buf, &n, &e);
    sift__gguf_writer_free(w);
    if (st) {
        failf("alignment", "writer: %s", e.msg);
        return;
    }
    uint8_t *k = memmem(buf, n, "general.alignment", 17);
    uint64_t type_at = (uint64_t)(k - buf) + 17, val_at = type_at + 4;
    base_file w32 = {.p = buf, .n = n};
    patch32(&w32, "general.alignment of type i32", type_at, SIFT_GGUF_INT32, true);
    patch32(&w32, "general.alignment 0", val_at, 0, true);
    patch32(&w32, "general.alignment 48", val_at, 48, true);
    /* the smallest power of two that some tensor offset is not a multiple of */
    uint64_t any = 0;
    for (uint64_t i = 0; i < b->n_tensors; i++) any |= b->t[i].offset;
    if (any) {
        uint32_t a = 64;
        while (any % a == 0) a <<= 1;
        char what[64];
        snprintf(what, sizeof what, "general.alignment %u over 32-aligned offsets", a);
        patch32(&w32, what, val_at, a, true);
    }
    free(buf);
}

/* ---- random mutations: no crash, and whatever opens is fully walkable --------------------- */

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint64_t walk_value(const sift_gguf_value *v)
{
    uint64_t h = (uint64_t)sift_gguf_value_type(v);
    size_t len;
    if (sift_gguf_value_type(v) == SIFT_GGUF_STRING) return h + strlen(sift_gguf_value_str(v, &len)) + len;
    if (sift_gguf_value_type(v) != SIFT_GGUF_ARRAY) return h;
    uint64_t n = sift_gguf_array_n(v);
    for (uint64_t i = 0; i < n; i++) {
        if (sift_gguf_array_type(v) == SIFT_GGUF_STRING) h += len + strlen(sift_gguf_array_str(v, i, &len));
        else if (sift_gguf_array_type(v) == SIFT_GGUF_ARRAY) h += walk_value(sift_gguf_array_elem(v, i));
    }
    const uint8_t *d = sift_gguf_array_data(v);
    if (d && n) h += d[0] + d[n - 1];
    return h;
}

static void random_variants(const base_file *b, int count, int *opened)
{
    uint8_t *v = malloc(b->n);
    static const uint64_t interesting[] = {0, 1, 2, 4, 5, 8, 13, 31, 32, 63, 64, 255, 0x7FFFFFFF, 0xFFFFFFFF,
                                           1ull << 62, UINT64_MAX, 0x8000000000000000ull};
    for (int r = 0; r < count; r++) {
        memcpy(v, b->p, b->n);
        int k = 1 + (int)(next_rand() % 4);
        /* most mutations land in the metadata, where the structure is */
        uint64_t span = b->data_at > 24 ? b->data_at : b->n;
        for (int j = 0; j < k; j++) {
            uint64_t at = next_rand() % span;
            if (next_rand() & 1) {
                v[at] = (uint8_t)next_rand();
            } else {
                uint64_t x = interesting[next_rand() % (sizeof interesting / sizeof interesting[0])];
                size_t w = (next_rand() & 1) ? 8 : 4;
                if (at + w <= b->n) memcpy(v + at, &x, w);
            }
        }
        size_t n = (next_rand() % 8 == 0) ? (size_t)(next_rand() % b->n) : b->n;
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, v, n);
        sift_error e = {0};
        sift_gguf *g = sift_gguf_open_buffer(copy, n, &e);
        if (g) {
            (*opened)++;
            uint64_t h = 0;
            for (int64_t i = 0; i < sift_gguf_n_kv(g); i++) {
                h += walk_value(sift_gguf_kv_value(g, i));
                if (sift_gguf_find_key(g, sift_gguf_key(g, i)) != i) failf("random", "key lookup mismatch");
            }
            for (int64_t i = 0; i < sift_gguf_n_tensors(g); i++) {
                const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
                if (t->size) h += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->size - 1];
                if (sift_gguf_find_tensor(g, t->name) != i) failf("random", "tensor lookup mismatch");
            }
            (void)h;
            sift_gguf_close(g);
        } else if (strncmp(e.msg, "gguf: ", 6) != 0) {
            failf("random", "refusal without a reader message: '%s'", e.msg);
        }
        free(copy);
    }
    free(v);
}

/* ---- main ------------------------------------------------------------------------------------- */

static int load(const char *path, base_file *b)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b->p = malloc((size_t)n);
    b->n = (size_t)n;
    size_t got = fread(b->p, 1, b->n, f);
    fclose(f);
    return got == b->n ? 0 : -1;
}

/* stories260K as a GGUF v2 file with Q8_0 matrices where the rows are whole blocks */
static int make_v2_quant(base_file *b)
{
    sift_error e = {0};
    sift_gguf *g = sift_gguf_open_buffer(b->p, b->n, &e);
    if (!g) return -1;
    sift__gguf_writer *w = sift__gguf_writer_new();
    for (int64_t i = 0; i < sift_gguf_n_kv(g); i++) sift__gguf_writer_set_value(w, sift_gguf_key(g, i), sift_gguf_kv_value(g, i));
    int64_t nt = sift_gguf_n_tensors(g);
    void **owned = calloc((size_t)nt + 1, sizeof *owned);
    int n_q = 0;
    for (int64_t i = 0; i < nt; i++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
        int64_t nel = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        if (t->type == SIFT_TYPE_F32 && t->n_dims == 2 && t->ne[0] % 32 == 0) {
            uint64_t bytes = sift__type_row_bytes(SIFT_TYPE_Q8_0, nel);
            float *x = malloc((size_t)nel * sizeof *x);
            memcpy(x, t->data, (size_t)nel * sizeof *x);
            owned[i] = malloc(bytes);
            sift__quantize_row_q8_0(x, owned[i], nel);
            free(x);
            sift__gguf_writer_add_tensor(w, t->name, SIFT_TYPE_Q8_0, t->n_dims, t->ne, owned[i], bytes, &e);
            n_q++;
        } else {
            sift__gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size, &e);
        }
    }
    uint8_t *buf;
    size_t n;
    int st = sift__gguf_writer_write_buffer(w, &buf, &n, &e);
    sift__gguf_writer_free(w);
    for (int64_t i = 0; i < nt; i++) free(owned[i]);
    free(owned);
    sift_gguf_close(g);
    if (st) return -1;
    uint32_t two = 2;
    memcpy(buf + 4, &two, 4);
    printf("base: GGUF v2, %d of %lld tensors as q8_0\n", n_q, (long long)nt);
    free(b->p);
    b->p = buf;
    b->n = n;
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int random_n = 2000;
    bool v2_quant = false, refused = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sift") && i + 1 < argc) sift_exe = argv[++i];
        else if (!strcmp(argv[i], "--cli-every") && i + 1 < argc) cli_every = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--random") && i + 1 < argc) random_n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--v2-quant")) v2_quant = true;
        else if (!strcmp(argv[i], "--refused")) refused = true;
        else path = argv[i];
    }
    if (!path || cli_every < 1) {
        fprintf(stderr, "usage: gguf_corrupt [--sift PATH] [--cli-every N] [--random N] [--v2-quant] [--refused] MODEL.gguf\n");
        return 2;
    }
    base_file b = {0};
    if (load(path, &b)) {
        fprintf(stderr, "gguf_corrupt: cannot read %s\n", path);
        return 1;
    }
    if (v2_quant && make_v2_quant(&b)) {
        fprintf(stderr, "gguf_corrupt: cannot build the v2/Q8_0 base from %s\n", path);
        return 1;
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sift-corrupt-XXXXXX");
    if (sift_exe && !mkdtemp(tmpdir)) {
        fprintf(stderr, "gguf_corrupt: cannot make a temporary folder\n");
        return 1;
    }
    sift_error e = {0};
    sift_gguf *g = sift_gguf_open_buffer(b.p, b.n, &e);
    int opened = 0;
    if (refused) {
        if (g) {
            fprintf(stderr, "gguf_corrupt: %s was expected to be refused\n", path);
            return 1;
        }
        header_variants(&b);
        for (uint64_t at = 0; at < b.n; at += b.n / 97 + 1) cut(&b, "cut", at);
        random_variants(&b, random_n, &opened);
    } else {
        if (!g) {
            fprintf(stderr, "gguf_corrupt: the base %s is refused: %s\n", path, e.msg);
            return 1;
        }
        map_base(&b, g);
        header_variants(&b);
        cut_variants(&b);
        kv_variants(&b);
        tensor_variants(&b);
        alignment_variants(&b, g);
        random_variants(&b, random_n, &opened);
        sift_gguf_close(g);
    }
    if (sift_exe) {
        char f1[128], f2[128];
        snprintf(f1, sizeof f1, "%s/v.gguf", tmpdir);
        snprintf(f2, sizeof f2, "%s/stderr", tmpdir);
        unlink(f1), unlink(f2), rmdir(tmpdir);
    }
    printf("%s%s: %d corrupted variants refused (%d also through `sift info`), %d random mutations without a crash "
           "(%d of them still valid and walked), %d failures\n",
           path, v2_quant ? " (as v2 with Q8_0 matrices)" : "", n_variants, n_cli, random_n, opened, n_failed);
    free(b.p);
    free(b.kv);
    free(b.t);
    return n_failed ? 1 : 0;
}
