/*
 * gguf_writer.c - writes GGUF v3 files (for `sift quantize` and for tests).
 *
 * Design. Each metadata pair is encoded to its file bytes (u32 type + value) as soon as
 * it is set, so the writer holds a list of (key, encoded bytes) in insertion order and a
 * list of tensors with borrowed data; writing is then a single sequential pass. Values
 * copied from an open file go through the public sift_gguf_* accessors only, so anything
 * the reader accepts (nested arrays included) can be written back. Layout follows ggml's
 * gguf_write_to_file: tensor offsets are assigned back to back in the order the tensors
 * were added, each tensor's data padded with zeros to the alignment, and the data section
 * starts at the first multiple of the alignment after the tensor infos.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "gguf/ggml_types.h"
#include "gguf/gguf.h"

typedef struct {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} wbuf;

static void wb_put(wbuf *b, const void *d, size_t n)
{
    if (b->oom) return;
    if (n > SIZE_MAX - b->n) {
        b->oom = true;
        return;
    }
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n) cap = cap > SIZE_MAX / 2 ? b->n + n : cap * 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void wb_u32(wbuf *b, uint32_t v) { wb_put(b, &v, 4); }
static void wb_u64(wbuf *b, uint64_t v) { wb_put(b, &v, 8); }
static void wb_str(wbuf *b, const char *s, size_t n)
{
    wb_u64(b, n);
    wb_put(b, s, n);
}

typedef struct {
    char *key;
    wbuf val; /* u32 type + encoded value */
} wkv;

typedef struct {
    char *name;
    sift_tensor_type type;
    uint32_t n_dims;
    int64_t ne[4];
    const void *data;
    uint64_t size;
} wtensor;

struct sift__gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
};

sift__gguf_writer *sift__gguf_writer_new(void) { return calloc(1, sizeof(sift__gguf_writer)); }

void sift__gguf_writer_free(sift__gguf_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) free(w->kv[i].key), free(w->kv[i].val.p);
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

static size_t scalar_bytes(int type)
{
    switch (type) {
    case SIFT_GGUF_UINT8: case SIFT_GGUF_INT8: case SIFT_GGUF_BOOL: return 1;
    case SIFT_GGUF_UINT16: case SIFT_GGUF_INT16: return 2;
    case SIFT_GGUF_UINT32: case SIFT_GGUF_INT32: case SIFT_GGUF_FLOAT32: return 4;
    case SIFT_GGUF_UINT64: case SIFT_GGUF_INT64: case SIFT_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* Install an encoded value under key (replacing an existing one in place). Takes `val`. */
static int put_kv(sift__gguf_writer *w, const char *key, wbuf *val)
{
    if (val->oom || !key || !*key) {
        free(val->p);
        return val->oom ? SIFT_E_NOMEM : SIFT_E_INVAL;
    }
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) {
            free(w->kv[i].val.p);
            w->kv[i].val = *val;
            return SIFT_OK;
        }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
        wkv *kv = realloc(w->kv, cap * sizeof *kv);
        if (!kv) {
            free(val->p);
            return SIFT_E_NOMEM;
        }
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(val->p);
        return SIFT_E_NOMEM;
    }
    w->kv[w->n_kv].key = k;
    w->kv[w->n_kv].val = *val;
    w->n_kv++;
    return SIFT_OK;
}

int sift__gguf_writer_set(sift__gguf_writer *w, const char *key, sift_gguf_type type, const void *value)
{
    size_t n = scalar_bytes(type);
    wbuf b = {0};
    if (type == SIFT_GGUF_STRING) {
        wb_u32(&b, type);
        wb_str(&b, value, strlen(value));
        return put_kv(w, key, &b);
    }
    if (n == 0) return SIFT_E_INVAL;
    wb_u32(&b, type);
    if (type == SIFT_GGUF_BOOL) {
        uint8_t v = *(const bool *)value ? 1 : 0;
        wb_put(&b, &v, 1);
    } else {
        wb_put(&b, value, n);
    }
    return put_kv(w, key, &b);
}

int sift__gguf_writer_set_u32(sift__gguf_writer *w, const char *key, uint32_t v)
{
    return sift__gguf_writer_set(w, key, SIFT_GGUF_UINT32, &v);
}

int sift__gguf_writer_set_f32(sift__gguf_writer *w, const char *key, float v)
{
    return sift__gguf_writer_set(w, key, SIFT_GGUF_FLOAT32, &v);
}

int sift__gguf_writer_set_str(sift__gguf_writer *w, const char *key, const char *s)
{
    return sift__gguf_writer_set(w, key, SIFT_GGUF_STRING, s);
}

int sift__gguf_writer_set_arr(sift__gguf_writer *w, const char *key, sift_gguf_type elem_type, const void *data,
                             uint64_t n)
{
    size_t es = scalar_bytes(elem_type);
    if (es == 0 || (n && !data) || n > SIZE_MAX / es) return SIFT_E_INVAL;
    wbuf b = {0};
    wb_u32(&b, SIFT_GGUF_ARRAY);
    wb_u32(&b, elem_type);
    wb_u64(&b, n);
    if (elem_type == SIFT_GGUF_BOOL) {
        for (uint64_t i = 0; i < n; i++) {
            uint8_t v = ((const uint8_t *)data)[i] ? 1 : 0;
            wb_put(&b, &v, 1);
        }
    } else {
        wb_put(&b, data, (size_t)n * es);
    }
    return put_kv(w, key, &b);
}

int sift__gguf_writer_set_arr_str(sift__gguf_writer *w, const char *key, const char *const *strs, uint64_t n)
{
    return sift__gguf_writer_set_arr_strn(w, key, strs, NULL, n);
}

int sift__gguf_writer_set_arr_strn(sift__gguf_writer *w, const char *key, const char *const *strs, const size_t *lens,
                                  uint64_t n)
{
    wbuf b = {0};
    wb_u32(&b, SIFT_GGUF_ARRAY);
    wb_u32(&b, SIFT_GGUF_STRING);
    wb_u64(&b, n);
    for (uint64_t i = 0; i < n; i++) wb_str(&b, strs[i], lens ? lens[i] : strlen(strs[i]));
    return put_kv(w, key, &b);
}

/* Encode an array (element type, count, elements) from a reader value. */
static void enc_array(wbuf *b, const sift_gguf_value *v)
{
    int et = sift_gguf_array_type(v);
    uint64_t n = sift_gguf_array_n(v);
    wb_u32(b, (uint32_t)et);
    wb_u64(b, n);
    if (et == SIFT_GGUF_STRING) {
        for (uint64_t i = 0; i < n; i++) {
            size_t len;
            const char *s = sift_gguf_array_str(v, i, &len);
            wb_str(b, s, len);
        }
    } else if (et == SIFT_GGUF_ARRAY) {
        for (uint64_t i = 0; i < n; i++) enc_array(b, sift_gguf_array_elem(v, i));
    } else if (n) {
        wb_put(b, sift_gguf_array_data(v), (size_t)n * scalar_bytes(et));
    }
}

int sift__gguf_writer_set_value(sift__gguf_writer *w, const char *key, const sift_gguf_value *v)
{
    if (!v) return SIFT_E_INVAL;
    int type = sift_gguf_value_type(v);
    wbuf b = {0};
    wb_u32(&b, (uint32_t)type);
    if (type == SIFT_GGUF_ARRAY) {
        enc_array(&b, v);
    } else if (type == SIFT_GGUF_STRING) {
        size_t len;
        const char *s = sift_gguf_value_str(v, &len);
        wb_str(&b, s, len);
    } else {
        const void *scalar = sift_gguf_value_scalar(v);
        if (!scalar) {
            free(b.p);
            return SIFT_E_INVAL;
        }
        wb_put(&b, scalar, scalar_bytes(type));
    }
    return put_kv(w, key, &b);
}

void sift__gguf_writer_remove(sift__gguf_writer *w, const char *key)
{
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) {
            free(w->kv[i].key);
            free(w->kv[i].val.p);
            memmove(&w->kv[i], &w->kv[i + 1], (w->n_kv - i - 1) * sizeof *w->kv);
            w->n_kv--;
            return;
        }
}

int sift__gguf_writer_add_tensor(sift__gguf_writer *w, const char *name, sift_tensor_type type, uint32_t n_dims,
                                const int64_t *ne, const void *data, uint64_t size, sift_error *err)
{
    if (!name || strlen(name) >= SIFT_GGUF_MAX_NAME)
        return sift__error_set(err, SIFT_E_INVAL, "gguf writer: tensor name '%s' is missing or %d bytes or longer",
                              name ? name : "(null)", SIFT_GGUF_MAX_NAME);
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name))
            return sift__error_set(err, SIFT_E_INVAL, "gguf writer: duplicate tensor '%s'", name);
    const sift__type_traits *tt = sift__type_traits_get(type);
    if (!tt) return sift__error_set(err, SIFT_E_INVAL, "gguf writer: tensor '%s': unknown type %d", name, (int)type);
    if (n_dims > 4) return sift__error_set(err, SIFT_E_INVAL, "gguf writer: tensor '%s': %u dimensions", name, n_dims);
    wtensor t = {.type = type, .n_dims = n_dims, .ne = {1, 1, 1, 1}, .data = data, .size = size};
    int64_t nel = 1;
    for (uint32_t j = 0; j < n_dims; j++) {
        if (ne[j] < 0 || __builtin_mul_overflow(nel, ne[j], &nel))
            return sift__error_set(err, SIFT_E_INVAL, "gguf writer: tensor '%s': bad dimension %u", name, j);
        t.ne[j] = ne[j];
    }
    uint64_t want = sift__type_row_bytes(type, t.ne[0]);
    if (t.ne[0] % tt->block_size != 0)
        return sift__error_set(err, SIFT_E_INVAL, "gguf writer: tensor '%s': row of %lld is not a multiple of %s's block size %lld",
                              name, (long long)t.ne[0], tt->name, (long long)tt->block_size);
    if (t.ne[0] > 0 && __builtin_mul_overflow(want, (uint64_t)(nel / t.ne[0]), &want))
        return sift__error_set(err, SIFT_E_INVAL, "gguf writer: tensor '%s': size overflows", name);
    if (nel == 0) want = 0;
    if (want != size || (size && !data))
        return sift__error_set(err, SIFT_E_INVAL, "gguf writer: tensor '%s': %llu bytes of data given, the shape needs %llu",
                              name, (unsigned long long)size, (unsigned long long)want);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? w->cap_t * 2 : 16;
        wtensor *nt = realloc(w->t, cap * sizeof *nt);
        if (!nt) return sift__error_set(err, SIFT_E_NOMEM, "gguf writer: out of memory");
        w->t = nt;
        w->cap_t = cap;
    }
    if (!(t.name = strdup(name))) return sift__error_set(err, SIFT_E_NOMEM, "gguf writer: out of memory");
    w->t[w->n_t++] = t;
    return SIFT_OK;
}

/* ---- output ---------------------------------------------------------------------------------- */

typedef struct {
    FILE *f;      /* either a file ... */
    uint8_t *buf; /* ... or a buffer of the exact final size */
    size_t pos;
    bool failed;
} sink;

static void sink_put(sink *s, const void *d, size_t n)
{
    if (s->failed || n == 0) return;
    if (s->f) {
        if (fwrite(d, 1, n, s->f) != n) s->failed = true;
    } else {
        memcpy(s->buf + s->pos, d, n);
    }
    s->pos += n;
}

static void sink_zeros(sink *s, size_t n)
{
    static const uint8_t zeros[64];
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        sink_put(s, zeros, k);
        n -= k;
    }
}

static uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static int writer_alignment(const sift__gguf_writer *w, uint32_t *align, sift_error *err)
{
    *align = SIFT_GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment")) continue;
        uint32_t type, a;
        memcpy(&type, w->kv[i].val.p, 4);
        if (type != SIFT_GGUF_UINT32)
            return sift__error_set(err, SIFT_E_INVAL, "gguf writer: general.alignment must be a u32");
        memcpy(&a, w->kv[i].val.p + 4, 4);
        if (a == 0 || (a & (a - 1)))
            return sift__error_set(err, SIFT_E_INVAL, "gguf writer: general.alignment %u is not a power of 2", a);
        *align = a;
    }
    return SIFT_OK;
}

/* Everything before the data section, padded: header, pairs, tensor infos. */
static int write_meta(const sift__gguf_writer *w, uint32_t align, wbuf *m, uint64_t *data_size, sift_error *err)
{
    wb_put(m, "GGUF", 4);
    wb_u32(m, 3);
    wb_u64(m, w->n_t);
    wb_u64(m, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        wb_str(m, w->kv[i].key, strlen(w->kv[i].key));
        wb_put(m, w->kv[i].val.p, w->kv[i].val.n);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        wb_str(m, t->name, strlen(t->name));
        wb_u32(m, t->n_dims);
        for (uint32_t j = 0; j < t->n_dims; j++) wb_u64(m, (uint64_t)t->ne[j]);
        wb_u32(m, (uint32_t)t->type);
        wb_u64(m, off);
        off += pad_to(t->size, align);
    }
    static const uint8_t zeros[1] = {0};
    while (!m->oom && m->n % align) wb_put(m, zeros, 1);
    if (m->oom) return sift__error_set(err, SIFT_E_NOMEM, "gguf writer: out of memory");
    *data_size = off;
    return SIFT_OK;
}

static void write_data(const sift__gguf_writer *w, uint32_t align, sink *s)
{
    for (size_t i = 0; i < w->n_t; i++) {
        sink_put(s, w->t[i].data, (size_t)w->t[i].size);
        sink_zeros(s, (size_t)(pad_to(w->t[i].size, align) - w->t[i].size));
    }
}

int sift__gguf_writer_write_file(const sift__gguf_writer *w, const char *path, sift_error *err)
{
    uint32_t align;
    uint64_t data_size;
    wbuf m = {0};
    int st = writer_alignment(w, &align, err);
    if (!st) st = write_meta(w, align, &m, &data_size, err);
    if (st) {
        free(m.p);
        return st;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        st = sift__error_set(err, SIFT_E_IO, "gguf writer: cannot create '%s': %s", path, strerror(errno));
        free(m.p);
        return st;
    }
    sink s = {.f = f};
    sink_put(&s, m.p, m.n);
    write_data(w, align, &s);
    free(m.p);
    if (fclose(f) != 0) s.failed = true;
    if (s.failed) return sift__error_set(err, SIFT_E_IO, "gguf writer: writing '%s' failed: %s", path, strerror(errno));
    return SIFT_OK;
}

int sift__gguf_writer_write_buffer(const sift__gguf_writer *w, uint8_t **out, size_t *size, sift_error *err)
{
    uint32_t align;
    uint64_t data_size;
    wbuf m = {0};
    int st = writer_alignment(w, &align, err);
    if (!st) st = write_meta(w, align, &m, &data_size, err);
    if (st) {
        free(m.p);
        return st;
    }
    if (data_size > SIZE_MAX - m.n) {
        free(m.p);
        return sift__error_set(err, SIFT_E_NOMEM, "gguf writer: file too large for memory");
    }
    sink s = {.buf = malloc(m.n + data_size ? m.n + data_size : 1)};
    if (!s.buf) {
        free(m.p);
        return sift__error_set(err, SIFT_E_NOMEM, "gguf writer: out of memory");
    }
    sink_put(&s, m.p, m.n);
    write_data(w, align, &s);
    free(m.p);
    *out = s.buf;
    *size = s.pos;
    return SIFT_OK;
}
