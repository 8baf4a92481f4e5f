/*
 * gguf.c - the GGUF reader: map, validate everything once, then answer lookups.
 *
 * File layout (GGUF v2/v3, little-endian; v1 differed in using 32-bit counts and lengths):
 *
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x  { string key | u32 type | value }
 *   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml type | u64 offset }
 *   zero padding up to a multiple of the alignment (general.alignment, default 32)
 *   tensor data: each tensor at data_offset + offset, offset a multiple of the alignment
 *
 *   string = u64 length | bytes (no terminator)
 *   value  = the scalar's bytes | string | array
 *   array  = u32 element type | u64 n | n elements (an element may itself be an array)
 *
 * Design.
 *  - One pass over the bytes with a bounds-checked cursor (struct rd). Every read checks the
 *    bytes left first; every count is checked against what the bytes left could possibly
 *    hold *before* anything is allocated for it (a 2^60-element array in a 100-byte file is
 *    refused, not malloc'ed), so memory use stays proportional to the file size. Products
 *    and sums of sizes use overflow-checked arithmetic. Nesting of arrays is capped
 *    (SIFT_GGUF_MAX_DEPTH) so recursion depth is bounded.
 *  - Errors carry the place ("kv 3 'general.name'", "tensor 12 'output.weight'"), what was
 *    wrong, and the byte offset of the offending field.
 *  - After validation nothing can fail: metadata is copied into an arena owned by the
 *    handle (strings NUL-terminated, numeric arrays as aligned native arrays, string arrays
 *    as one block of characters plus an offset table), so accessors are O(1) and never
 *    touch unaligned or unterminated file bytes. Tensor data stays in the mapping.
 *  - Keys and tensor names are found through open-addressing hash tables (FNV-1a), which
 *    also detect duplicates in O(n) - a quadratic duplicate check would let a crafted file
 *    with a million keys stall the loader.
 *  - Stricter than ggml where ggml would only misbehave later: keys and tensor names may not
 *    contain NUL bytes (sift hands them out as C strings), bools must be 0 or 1, tensor
 *    data regions may not overlap. Like ggml: empty keys, names of 64+ bytes, more than 4
 *    dimensions, negative dimensions, unknown types, rows that are not a whole number of
 *    blocks, and misaligned or out-of-file data are refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/status.h"
#include "gguf/ggml_types.h"
#include "gguf/gguf.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

/* ---- arena: bump allocation in chunks, freed all at once -------------------------------- */

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_chunk;

typedef struct {
    arena_chunk *head;
} arena;

#define ARENA_CHUNK (1u << 20)

static void *arena_alloc(arena *a, size_t size, size_t align)
{
    arena_chunk *c = a->head;
    if (c) {
        size_t at = (c->used + align - 1) & ~(align - 1);
        if (at <= c->cap && size <= c->cap - at) {
            c->used = at + size;
            return c->data + at;
        }
    }
    size_t cap = size > ARENA_CHUNK ? size : ARENA_CHUNK;
    if (cap > SIZE_MAX - sizeof(arena_chunk)) return NULL;
    c = malloc(sizeof(arena_chunk) + cap);
    if (!c) return NULL;
    c->cap = cap;
    c->used = size;
    c->next = a->head;
    a->head = c;
    return c->data;
}

static void arena_free(arena *a)
{
    for (arena_chunk *c = a->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    a->head = NULL;
}

/* ---- string hash table (index + 1 per slot, 0 = empty) ------------------------------- */

typedef struct {
    int64_t *slot;
    uint64_t mask;
} strhash;

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static int strhash_init(strhash *h, int64_t n)
{
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap <<= 1;
    h->slot = calloc(cap, sizeof *h->slot);
    h->mask = cap - 1;
    return h->slot ? 0 : -1;
}

/* Index of `s` among names[], or -1. */
static int64_t strhash_find(const strhash *h, const char *const *names, size_t stride, const char *s)
{
    if (!h->slot) return -1;
    for (uint64_t i = fnv1a(s) & h->mask;; i = (i + 1) & h->mask) {
        int64_t v = h->slot[i];
        if (v == 0) return -1;
        const char *name = *(const char *const *)((const char *)names + (size_t)(v - 1) * stride);
        if (strcmp(name, s) == 0) return v - 1;
    }
}

/* Insert index `idx` (whose name is s); returns the index already holding s, or -1. */
static int64_t strhash_insert(strhash *h, const char *const *names, size_t stride, const char *s, int64_t idx)
{
    for (uint64_t i = fnv1a(s) & h->mask;; i = (i + 1) & h->mask) {
        int64_t v = h->slot[i];
        if (v == 0) {
            h->slot[i] = idx + 1;
            return -1;
        }
        const char *name = *(const char *const *)((const char *)names + (size_t)(v - 1) * stride);
        if (strcmp(name, s) == 0) return v - 1;
    }
}

/* ---- the handle ----------------------------------------------------------------------- */

struct sift_gguf_value {
    uint32_t type;      /* sift_gguf_type */
    uint32_t elem_type; /* arrays: element type */
    uint64_t n;         /* arrays: element count; strings: byte length */
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
        bool b;
        const char *str;              /* STRING: n bytes + NUL */
        const void *data;             /* arrays of numbers/bools: n native elements */
        const sift_gguf_value *elems; /* arrays of arrays */
        struct {                      /* arrays of strings: element i is chars + off[i], */
            const char *chars;        /* length off[i+1] - off[i] - 1, NUL-terminated */
            const uint64_t *off;
        } strs;
    } u;
};

typedef struct {
    const char *key;
    sift_gguf_value value;
    uint64_t value_at; /* file offset of the value (for messages) */
} gguf_kv;

struct sift_gguf {
    const uint8_t *base;
    uint64_t size;
    void *map; /* non-NULL when sift mapped the file itself */
    int fd;    /* the mapped file, kept open for sift__gguf_fd (-1 for a caller's buffer) */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    gguf_kv *kv;
    int64_t n_tensors;
    sift_gguf_tensor *tensors;
    strhash kv_hash, tensor_hash;
    arena mem;
    /* inspection mode (sift__gguf_open_inspect): tensors whose rows are not whole blocks are
     * kept, described but without data (nb[0] = 0, size 0, data NULL), and counted here */
    bool inspect;
    int64_t n_problems;
    char problem[SIFT_ERROR_MSG_MAX]; /* the first one */
};

/* ---- the cursor --------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    uint64_t size, pos;
    sift_gguf *g;
    sift_error *err;
    char where[112]; /* "kv 3 'general.name'": prefixed to every message */
} rd;

static int rd_fail(rd *r, int status, uint64_t at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int rd_fail(rd *r, int status, uint64_t at, const char *fmt, ...)
{
    char msg[SIFT_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sift__error_set(r->err, status, "gguf: %s%s%s (at offset %llu)", r->where, r->where[0] ? ": " : "",
                          msg, (unsigned long long)at);
}

static void rd_where(rd *r, const char *what, int64_t i, const char *name)
{
    if (!name) {
        snprintf(r->where, sizeof r->where, "%s %lld", what, (long long)i);
        return;
    }
    size_t len = strlen(name);
    if (len > 60)
        snprintf(r->where, sizeof r->where, "%s %lld '%.48s...'", what, (long long)i, name);
    else
        snprintf(r->where, sizeof r->where, "%s %lld '%s'", what, (long long)i, name);
}

static uint64_t rd_left(const rd *r) { return r->size - r->pos; }

static int rd_need(rd *r, uint64_t n, const char *field)
{
    if (rd_left(r) >= n) return SIFT_OK;
    return rd_fail(r, SIFT_E_FORMAT, r->pos, "%s: the file ends after %llu more bytes, %llu needed", field,
                   (unsigned long long)rd_left(r), (unsigned long long)n);
}

static int rd_u32(rd *r, uint32_t *v, const char *field)
{
    int st = rd_need(r, 4, field);
    if (st) return st;
    memcpy(v, r->p + r->pos, 4);
    r->pos += 4;
    return SIFT_OK;
}

static int rd_u64(rd *r, uint64_t *v, const char *field)
{
    int st = rd_need(r, 8, field);
    if (st) return st;
    memcpy(v, r->p + r->pos, 8);
    r->pos += 8;
    return SIFT_OK;
}

/* A string's length and bytes (in the file, not terminated). */
static int rd_str(rd *r, const uint8_t **s, uint64_t *len, const char *field)
{
    uint64_t at = r->pos;
    int st = rd_u64(r, len, field);
    if (st) return st;
    if (*len > rd_left(r))
        return rd_fail(r, SIFT_E_FORMAT, at, "%s: string length %llu runs past the end of the file (%llu bytes left)",
                       field, (unsigned long long)*len, (unsigned long long)rd_left(r));
    *s = r->p + r->pos;
    r->pos += *len;
    return SIFT_OK;
}

/* A copy of a name (key or tensor name): NUL-terminated, no NUL bytes inside. */
static int rd_name(rd *r, const char **out, uint64_t max_len, const char *field)
{
    uint64_t at = r->pos, len = 0;
    const uint8_t *s = NULL;
    int st = rd_str(r, &s, &len, field);
    if (st) return st;
    if (len > max_len)
        return rd_fail(r, SIFT_E_FORMAT, at, "%s is too long: %llu >= %llu bytes", field, (unsigned long long)len,
                       (unsigned long long)max_len + 1);
    if (memchr(s, 0, len)) return rd_fail(r, SIFT_E_FORMAT, at, "%s contains a NUL byte", field);
    char *c = arena_alloc(&r->g->mem, len + 1, 1);
    if (!c) return rd_fail(r, SIFT_E_NOMEM, at, "out of memory");
    memcpy(c, s, len);
    c[len] = 0;
    *out = c;
    return SIFT_OK;
}

/* ---- metadata values ------------------------------------------------------------------------ */

static const uint8_t scalar_size[SIFT_GGUF_TYPE_COUNT] = {
    [SIFT_GGUF_UINT8] = 1,   [SIFT_GGUF_INT8] = 1,   [SIFT_GGUF_UINT16] = 2, [SIFT_GGUF_INT16] = 2,
    [SIFT_GGUF_UINT32] = 4,  [SIFT_GGUF_INT32] = 4,  [SIFT_GGUF_FLOAT32] = 4, [SIFT_GGUF_BOOL] = 1,
    [SIFT_GGUF_STRING] = 0,  [SIFT_GGUF_ARRAY] = 0,  [SIFT_GGUF_UINT64] = 8, [SIFT_GGUF_INT64] = 8,
    [SIFT_GGUF_FLOAT64] = 8,
};

const char *sift_gguf_type_name(int type)
{
    static const char *const names[SIFT_GGUF_TYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
    };
    return type >= 0 && type < SIFT_GGUF_TYPE_COUNT ? names[type] : "?";
}

static int parse_value(rd *r, uint32_t type, sift_gguf_value *v, int depth, const char *field);

/* The smallest encoding of one element of `type` (for bounding counts by the bytes left). */
static uint64_t min_elem_size(uint32_t type)
{
    if (type == SIFT_GGUF_STRING) return 8;  /* length */
    if (type == SIFT_GGUF_ARRAY) return 12;  /* element type + count */
    return scalar_size[type];
}

static int parse_array(rd *r, sift_gguf_value *v, int depth, const char *field)
{
    uint64_t at = r->pos;
    uint32_t et;
    uint64_t n;
    int st = rd_u32(r, &et, field);
    if (st) return st;
    if (et >= SIFT_GGUF_TYPE_COUNT)
        return rd_fail(r, SIFT_E_FORMAT, at, "%s: invalid array element type %u", field, et);
    if (et == SIFT_GGUF_ARRAY && depth + 1 >= SIFT_GGUF_MAX_DEPTH)
        return rd_fail(r, SIFT_E_FORMAT, at, "%s: arrays nested deeper than %d levels", field, SIFT_GGUF_MAX_DEPTH);
    uint64_t at_n = r->pos;
    if ((st = rd_u64(r, &n, field))) return st;
    uint64_t esz = min_elem_size(et);
    if (n > rd_left(r) / esz)
        return rd_fail(r, SIFT_E_FORMAT, at_n, "%s: array of %llu %s elements cannot fit in the %llu bytes left", field,
                       (unsigned long long)n, sift_gguf_type_name((int)et), (unsigned long long)rd_left(r));
    v->type = SIFT_GGUF_ARRAY;
    v->elem_type = et;
    v->n = n;
    v->u.data = NULL;
    if (n == 0 && et != SIFT_GGUF_STRING) return SIFT_OK;

    if (et == SIFT_GGUF_STRING) {
        /* pass 1: validate the lengths and total them; pass 2: copy into one block */
        uint64_t start = r->pos, total = 0;
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *s;
            uint64_t len;
            if ((st = rd_str(r, &s, &len, field))) return st;
            total += len + 1; /* cannot overflow: every len fits in the file */
        }
        char *chars = arena_alloc(&r->g->mem, total ? total : 1, 1);
        uint64_t *off = arena_alloc(&r->g->mem, (n + 1) * sizeof *off, _Alignof(uint64_t));
        if (!chars || !off) return rd_fail(r, SIFT_E_NOMEM, at, "out of memory");
        r->pos = start;
        uint64_t o = 0;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t len;
            memcpy(&len, r->p + r->pos, 8);
            memcpy(chars + o, r->p + r->pos + 8, len);
            chars[o + len] = 0;
            off[i] = o;
            o += len + 1;
            r->pos += 8 + len;
        }
        off[n] = o;
        v->u.strs.chars = chars;
        v->u.strs.off = off;
        return SIFT_OK;
    }
    if (et == SIFT_GGUF_ARRAY) {
        sift_gguf_value *elems = arena_alloc(&r->g->mem, n * sizeof *elems, _Alignof(sift_gguf_value));
        if (!elems) return rd_fail(r, SIFT_E_NOMEM, at, "out of memory");
        for (uint64_t i = 0; i < n; i++)
            if ((st = parse_array(r, &elems[i], depth + 1, field))) return st;
        v->u.elems = elems;
        return SIFT_OK;
    }
    /* numbers and bools: copied to an aligned native array */
    uint64_t bytes = n * esz;
    void *data = arena_alloc(&r->g->mem, bytes, 8);
    if (!data) return rd_fail(r, SIFT_E_NOMEM, at, "out of memory");
    memcpy(data, r->p + r->pos, bytes);
    if (et == SIFT_GGUF_BOOL) {
        const uint8_t *bv = data;
        for (uint64_t i = 0; i < n; i++)
            if (bv[i] > 1)
                return rd_fail(r, SIFT_E_FORMAT, r->pos + i, "%s: bool element %llu is %u, not 0 or 1", field,
                               (unsigned long long)i, bv[i]);
    }
    r->pos += bytes;
    v->u.data = data;
    return SIFT_OK;
}

static int parse_value(rd *r, uint32_t type, sift_gguf_value *v, int depth, const char *field)
{
    uint64_t at = r->pos;
    int st;
    memset(v, 0, sizeof *v);
    v->type = type;
    switch (type) {
    case SIFT_GGUF_STRING: {
        const uint8_t *s;
        uint64_t len;
        if ((st = rd_str(r, &s, &len, field))) return st;
        char *c = arena_alloc(&r->g->mem, len + 1, 1);
        if (!c) return rd_fail(r, SIFT_E_NOMEM, at, "out of memory");
        memcpy(c, s, len);
        c[len] = 0;
        v->n = len;
        v->u.str = c;
        return SIFT_OK;
    }
    case SIFT_GGUF_ARRAY:
        return parse_array(r, v, depth, field);
    default:
        if (type >= SIFT_GGUF_TYPE_COUNT) return rd_fail(r, SIFT_E_FORMAT, at, "%s: invalid value type %u", field, type);
        if ((st = rd_need(r, scalar_size[type], field))) return st;
        memcpy(&v->u, r->p + r->pos, scalar_size[type]);
        if (type == SIFT_GGUF_BOOL && v->u.u8 > 1)
            return rd_fail(r, SIFT_E_FORMAT, at, "%s: bool value is %u, not 0 or 1", field, v->u.u8);
        r->pos += scalar_size[type];
        return SIFT_OK;
    }
}

/* ---- the whole file ------------------------------------------------------------------------- */

static int parse_header(rd *r, uint64_t *n_tensors, uint64_t *n_kv)
{
    sift_gguf *g = r->g;
    snprintf(r->where, sizeof r->where, "header");
    if (r->size < 4) return rd_fail(r, SIFT_E_FORMAT, 0, "file of %llu bytes is too small to be GGUF", (unsigned long long)r->size);
    if (memcmp(r->p, "GGUF", 4) != 0) {
        char m[5];
        for (int i = 0; i < 4; i++) m[i] = r->p[i] >= 0x20 && r->p[i] < 0x7f ? (char)r->p[i] : '?';
        m[4] = 0;
        /* legacy ggml magics, stored as little-endian u32s: "lmgg", "fmgg", "tjgg" */
        if (!memcmp(r->p, "lmgg", 4) || !memcmp(r->p, "fmgg", 4) || !memcmp(r->p, "tjgg", 4))
            return rd_fail(r, SIFT_E_UNSUPPORTED, 0, "magic '%s': a legacy GGML/GGMF/GGJT file, not GGUF", m);
        return rd_fail(r, SIFT_E_FORMAT, 0, "bad magic '%s', expected 'GGUF'", m);
    }
    r->pos = 4;
    int st = rd_u32(r, &g->version, "version");
    if (st) return st;
    if (g->version == 1)
        return rd_fail(r, SIFT_E_UNSUPPORTED, 4,
                       "GGUF version 1 is not supported (the obsolete v1 layout with 32-bit counts and lengths); "
                       "convert the model again with a current llama.cpp");
    if (g->version != 0 && (g->version & 0xFFFF) == 0)
        return rd_fail(r, SIFT_E_UNSUPPORTED, 4, "version 0x%08x: a big-endian GGUF file (this host is little-endian)",
                       g->version);
    if (g->version == 0 || g->version > 3)
        return rd_fail(r, SIFT_E_UNSUPPORTED, 4, "GGUF version %u is not supported (sift reads versions 2 and 3)",
                       g->version);
    uint64_t at_t = r->pos;
    if ((st = rd_u64(r, n_tensors, "tensor count"))) return st;
    uint64_t at_k = r->pos;
    if ((st = rd_u64(r, n_kv, "metadata count"))) return st;
    /* a pair takes at least 13 bytes (8 key length, 4 type, 1 value); a tensor
     * info at least 24 (8 name length, 4 n_dims, 4 type, 8 offset) */
    if (*n_kv > rd_left(r) / 13)
        return rd_fail(r, SIFT_E_FORMAT, at_k, "metadata count %llu cannot fit in the %llu bytes left",
                       (unsigned long long)*n_kv, (unsigned long long)rd_left(r));
    if (*n_tensors > rd_left(r) / 24)
        return rd_fail(r, SIFT_E_FORMAT, at_t, "tensor count %llu cannot fit in the %llu bytes left",
                       (unsigned long long)*n_tensors, (unsigned long long)rd_left(r));
    return SIFT_OK;
}

static int parse_kv(rd *r, uint64_t n_kv)
{
    sift_gguf *g = r->g;
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    if (!g->kv || strhash_init(&g->kv_hash, (int64_t)n_kv)) return rd_fail(r, SIFT_E_NOMEM, r->pos, "out of memory");
    for (uint64_t i = 0; i < n_kv; i++) {
        rd_where(r, "kv", (int64_t)i, NULL);
        uint64_t at = r->pos;
        int st = rd_name(r, &g->kv[i].key, UINT64_MAX - 1, "key");
        if (st) return st;
        rd_where(r, "kv", (int64_t)i, g->kv[i].key);
        if (g->kv[i].key[0] == 0) return rd_fail(r, SIFT_E_FORMAT, at, "empty key");
        int64_t dup = strhash_insert(&g->kv_hash, &g->kv[0].key, sizeof(gguf_kv), g->kv[i].key, (int64_t)i);
        if (dup >= 0) return rd_fail(r, SIFT_E_FORMAT, at, "duplicate key (also kv %lld)", (long long)dup);
        g->n_kv = (int64_t)i + 1;
        uint32_t type;
        uint64_t at_type = r->pos;
        if ((st = rd_u32(r, &type, "value type"))) return st;
        if (type >= SIFT_GGUF_TYPE_COUNT) return rd_fail(r, SIFT_E_FORMAT, at_type, "invalid value type %u", type);
        g->kv[i].value_at = r->pos;
        if ((st = parse_value(r, type, &g->kv[i].value, 0, "value"))) return st;
    }
    r->where[0] = 0;
    g->alignment = SIFT_GGUF_DEFAULT_ALIGNMENT;
    int64_t ai = strhash_find(&g->kv_hash, &g->kv[0].key, sizeof(gguf_kv), "general.alignment");
    if (ai >= 0) {
        const sift_gguf_value *v = &g->kv[ai].value;
        rd_where(r, "kv", ai, "general.alignment");
        uint64_t at = g->kv[ai].value_at;
        if (v->type != SIFT_GGUF_UINT32)
            return rd_fail(r, SIFT_E_FORMAT, at, "must be of type u32, not %s", sift_gguf_type_name((int)v->type));
        if (v->u.u32 == 0 || (v->u.u32 & (v->u.u32 - 1)) != 0)
            return rd_fail(r, SIFT_E_FORMAT, at, "alignment %u is not a power of 2", v->u.u32);
        g->alignment = v->u.u32;
        r->where[0] = 0;
    }
    return SIFT_OK;
}

static int parse_tensor_info(rd *r, int64_t i, sift_gguf_tensor *t)
{
    sift_gguf *g = r->g;
    rd_where(r, "tensor", i, NULL);
    uint64_t at = r->pos;
    int st = rd_name(r, &t->name, SIFT_GGUF_MAX_NAME - 1, "name");
    if (st) return st;
    rd_where(r, "tensor", i, t->name);
    int64_t dup = strhash_insert(&g->tensor_hash, &g->tensors[0].name, sizeof(sift_gguf_tensor), t->name, i);
    if (dup >= 0) return rd_fail(r, SIFT_E_FORMAT, at, "duplicate tensor name (also tensor %lld)", (long long)dup);

    uint64_t at_dims = r->pos;
    if ((st = rd_u32(r, &t->n_dims, "n_dims"))) return st;
    if (t->n_dims > 4) return rd_fail(r, SIFT_E_FORMAT, at_dims, "%u dimensions, at most 4 allowed", t->n_dims);
    for (int j = 0; j < 4; j++) t->ne[j] = 1;
    for (uint32_t j = 0; j < t->n_dims; j++) {
        uint64_t at_ne = r->pos, ne;
        if ((st = rd_u64(r, &ne, "dimension"))) return st;
        if (ne > (uint64_t)INT64_MAX)
            return rd_fail(r, SIFT_E_FORMAT, at_ne, "dimension %u has a negative number of elements (%lld)", j,
                           (long long)ne);
        t->ne[j] = (int64_t)ne;
    }
    uint64_t at_type = r->pos;
    uint32_t type;
    if ((st = rd_u32(r, &type, "type"))) return st;
    const sift__type_traits *tt = sift__type_traits_get((int)type);
    if (!tt) return rd_fail(r, SIFT_E_FORMAT, at_type, "invalid ggml type %u", type);
    t->type = (sift_tensor_type)type;

    int64_t nel = 1;
    for (int j = 0; j < 4; j++)
        if (__builtin_mul_overflow(nel, t->ne[j], &nel))
            return rd_fail(r, SIFT_E_FORMAT, at_dims, "shape [%lld, %lld, %lld, %lld] has more than 2^63 elements",
                           (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    if (t->ne[0] % tt->block_size != 0) {
        if (!r->g->inspect)
            return rd_fail(r, SIFT_E_FORMAT, at_dims,
                           "type %s has %lld elements per row, not a multiple of block size (%lld)", tt->name,
                           (long long)t->ne[0], (long long)tt->block_size);
        /* inspection: describe it, flag it, give it no data (its size cannot be known) */
        if (r->g->n_problems++ == 0)
            snprintf(r->g->problem, sizeof r->g->problem,
                     "%s: type %s has %lld elements per row, not a multiple of block size (%lld) (at offset %llu)",
                     r->where, tt->name, (long long)t->ne[0], (long long)tt->block_size, (unsigned long long)at_dims);
        t->size = 0;
        memset(t->nb, 0, sizeof t->nb);
        return rd_u64(r, &t->offset, "data offset");
    }
    uint64_t size;
    if (__builtin_mul_overflow((uint64_t)(nel / tt->block_size), (uint64_t)tt->block_bytes, &size))
        return rd_fail(r, SIFT_E_FORMAT, at_dims, "size in bytes overflows 64 bits");
    t->size = size;
    /* strides; they can exceed the size (and 2^64) only when a later dimension is 0 */
    t->nb[0] = tt->block_bytes;
    bool nb_overflow = __builtin_mul_overflow(t->nb[0], (uint64_t)(t->ne[0] / tt->block_size), &t->nb[1]);
    for (int j = 2; j < 4; j++)
        nb_overflow |= __builtin_mul_overflow(t->nb[j - 1], (uint64_t)t->ne[j - 1], &t->nb[j]);
    if (nb_overflow) return rd_fail(r, SIFT_E_FORMAT, at_dims, "byte strides overflow 64 bits");

    if ((st = rd_u64(r, &t->offset, "data offset"))) return st;
    return SIFT_OK;
}

static int cmp_by_offset(const void *a, const void *b)
{
    const sift_gguf_tensor *x = *(const sift_gguf_tensor *const *)a, *y = *(const sift_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : 0;
}

static int parse_tensors(rd *r, uint64_t n)
{
    sift_gguf *g = r->g;
    g->tensors = calloc(n ? n : 1, sizeof *g->tensors);
    if (!g->tensors || strhash_init(&g->tensor_hash, (int64_t)n)) return rd_fail(r, SIFT_E_NOMEM, r->pos, "out of memory");
    uint64_t *info_at = calloc(n ? n : 1, sizeof *info_at);
    if (!info_at) return rd_fail(r, SIFT_E_NOMEM, r->pos, "out of memory");
    int st = SIFT_OK;
    for (uint64_t i = 0; i < n && !st; i++) {
        info_at[i] = r->pos;
        st = parse_tensor_info(r, (int64_t)i, &g->tensors[i]);
        if (!st) g->n_tensors = (int64_t)i + 1;
    }
    if (st) goto out;

    /* the data section starts at the next multiple of the alignment */
    r->where[0] = 0;
    uint64_t a = g->alignment;
    g->data_offset = (r->pos + a - 1) / a * a;
    if (n > 0 && g->data_offset > r->size) {
        st = rd_fail(r, SIFT_E_FORMAT, r->pos, "the tensor data section would start at %llu, past the end of the file (%llu bytes)",
                     (unsigned long long)g->data_offset, (unsigned long long)r->size);
        goto out;
    }
    if (n == 0) g->data_offset = r->pos; /* nothing follows; no padding is required */
    uint64_t room = r->size - g->data_offset;
    for (uint64_t i = 0; i < n; i++) {
        sift_gguf_tensor *t = &g->tensors[i];
        rd_where(r, "tensor", (int64_t)i, t->name);
        uint64_t at = info_at[i];
        if (t->nb[0] == 0) { /* flagged in inspection mode: no data */
            t->file_offset = g->data_offset + t->offset;
            t->data = NULL;
            continue;
        }
        if (t->offset % a != 0) {
            st = rd_fail(r, SIFT_E_FORMAT, at, "data offset %llu is not a multiple of the alignment (%u)",
                         (unsigned long long)t->offset, g->alignment);
            goto out;
        }
        if (t->offset > room || t->size > room - t->offset) {
            st = rd_fail(r, SIFT_E_FORMAT, at, "data [%llu, +%llu bytes) lies past the end of the file (%llu bytes)",
                         (unsigned long long)(g->data_offset + t->offset), (unsigned long long)t->size,
                         (unsigned long long)r->size);
            goto out;
        }
        t->file_offset = g->data_offset + t->offset;
        t->data = r->p + t->file_offset;
    }
    /* no two tensors' data may overlap */
    if (n > 1) {
        const sift_gguf_tensor **by = malloc(n * sizeof *by);
        if (!by) {
            st = rd_fail(r, SIFT_E_NOMEM, 0, "out of memory");
            goto out;
        }
        for (uint64_t i = 0; i < n; i++) by[i] = &g->tensors[i];
        qsort(by, n, sizeof *by, cmp_by_offset);
        const sift_gguf_tensor *prev = NULL;
        for (uint64_t i = 0; i < n && !st; i++) {
            const sift_gguf_tensor *t = by[i];
            if (t->size == 0) continue;
            if (prev && prev->offset + prev->size > t->offset) {
                int64_t ti = t - g->tensors;
                rd_where(r, "tensor", ti, t->name);
                st = rd_fail(r, SIFT_E_FORMAT, info_at[ti], "data at %llu overlaps the data of tensor '%s' [%llu, %llu)",
                             (unsigned long long)t->file_offset, prev->name, (unsigned long long)prev->file_offset,
                             (unsigned long long)(prev->file_offset + prev->size));
            }
            prev = t;
        }
        free(by);
    }
out:
    free(info_at);
    return st;
}

static int parse(sift_gguf *g, sift_error *err)
{
    rd r = {.p = g->base, .size = g->size, .pos = 0, .g = g, .err = err};
    uint64_t n_tensors = 0, n_kv = 0; /* set by parse_header; zero keeps -Wmaybe-uninitialized quiet at -O3 */
    int st = parse_header(&r, &n_tensors, &n_kv);
    if (!st) st = parse_kv(&r, n_kv);
    if (!st) st = parse_tensors(&r, n_tensors);
    return st;
}

/* ---- open / close ------------------------------------------------------------------------------ */

void sift_gguf_close(sift_gguf *g)
{
    if (!g) return;
    if (g->map) munmap(g->map, (size_t)g->size);
    if (g->fd >= 0) close(g->fd);
    free(g->kv);
    free(g->tensors);
    free(g->kv_hash.slot);
    free(g->tensor_hash.slot);
    arena_free(&g->mem);
    free(g);
}

sift_gguf *sift_gguf_open_buffer(const void *data, size_t size, sift_error *err)
{
    if (!data && size) {
        sift__error_set(err, SIFT_E_INVAL, "gguf: NULL buffer");
        return NULL;
    }
    sift_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        sift__error_set(err, SIFT_E_NOMEM, "gguf: out of memory");
        return NULL;
    }
    g->fd = -1;
    g->base = data;
    g->size = size;
    if (parse(g, err) != SIFT_OK) {
        sift_gguf_close(g);
        return NULL;
    }
    return g;
}

static sift_gguf *open_file(const char *path, bool inspect, sift_error *err);

sift_gguf *sift_gguf_open(const char *path, sift_error *err) { return open_file(path, false, err); }

sift_gguf *sift__gguf_open_inspect(const char *path, sift_error *err) { return open_file(path, true, err); }

int64_t sift__gguf_problems(const sift_gguf *g, const char **first)
{
    if (first) *first = g && g->n_problems ? g->problem : NULL;
    return g ? g->n_problems : 0;
}

static sift_gguf *open_file(const char *path, bool inspect, sift_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        sift__error_set(err, SIFT_E_IO, "gguf: cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        sift__error_set(err, SIFT_E_IO, "gguf: '%s' is not a regular file", path);
        close(fd);
        return NULL;
    }
    if (sb.st_size == 0) {
        sift__error_set(err, SIFT_E_FORMAT, "gguf: '%s' is empty", path);
        close(fd);
        return NULL;
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int mmap_errno = errno;
    if (map == MAP_FAILED) {
        close(fd);
        sift__error_set(err, SIFT_E_IO, "gguf: cannot map '%s': %s", path, strerror(mmap_errno));
        return NULL;
    }
    sift_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        munmap(map, (size_t)sb.st_size);
        close(fd);
        sift__error_set(err, SIFT_E_NOMEM, "gguf: out of memory");
        return NULL;
    }
    g->fd = fd;
    g->map = map;
    g->base = map;
    g->size = (uint64_t)sb.st_size;
    g->inspect = inspect;
    if (parse(g, err) != SIFT_OK) {
        sift_gguf_close(g);
        return NULL;
    }
    return g;
}

/* ---- accessors ----------------------------------------------------------------------------------- */

uint32_t sift_gguf_version(const sift_gguf *g) { return g->version; }
uint64_t sift_gguf_file_size(const sift_gguf *g) { return g->size; }
uint32_t sift_gguf_alignment(const sift_gguf *g) { return g->alignment; }
uint64_t sift_gguf_data_offset(const sift_gguf *g) { return g->data_offset; }
const uint8_t *sift__gguf_bytes(const sift_gguf *g) { return g->base; }
int sift__gguf_fd(const sift_gguf *g) { return g->fd; }

int64_t sift_gguf_n_kv(const sift_gguf *g) { return g->n_kv; }

int64_t sift_gguf_find_key(const sift_gguf *g, const char *key)
{
    if (!key || g->n_kv == 0) return -1;
    return strhash_find(&g->kv_hash, &g->kv[0].key, sizeof(gguf_kv), key);
}

const char *sift_gguf_key(const sift_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_kv ? g->kv[i].key : NULL;
}

const sift_gguf_value *sift_gguf_kv_value(const sift_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_kv ? &g->kv[i].value : NULL;
}

const sift_gguf_value *sift_gguf_get(const sift_gguf *g, const char *key)
{
    return sift_gguf_kv_value(g, sift_gguf_find_key(g, key));
}

sift_gguf_type sift_gguf_value_type(const sift_gguf_value *v) { return (sift_gguf_type)v->type; }

#define SCALAR_GETTER(fn, ctype, tag, field)                       \
    int fn(const sift_gguf_value *v, ctype *out)                   \
    {                                                              \
        if (!v || v->type != (tag)) return SIFT_E_INVAL;           \
        *out = v->u.field;                                         \
        return SIFT_OK;                                            \
    }
SCALAR_GETTER(sift_gguf_value_u8, uint8_t, SIFT_GGUF_UINT8, u8)
SCALAR_GETTER(sift_gguf_value_i8, int8_t, SIFT_GGUF_INT8, i8)
SCALAR_GETTER(sift_gguf_value_u16, uint16_t, SIFT_GGUF_UINT16, u16)
SCALAR_GETTER(sift_gguf_value_i16, int16_t, SIFT_GGUF_INT16, i16)
SCALAR_GETTER(sift_gguf_value_u32, uint32_t, SIFT_GGUF_UINT32, u32)
SCALAR_GETTER(sift_gguf_value_i32, int32_t, SIFT_GGUF_INT32, i32)
SCALAR_GETTER(sift_gguf_value_u64, uint64_t, SIFT_GGUF_UINT64, u64)
SCALAR_GETTER(sift_gguf_value_i64, int64_t, SIFT_GGUF_INT64, i64)
SCALAR_GETTER(sift_gguf_value_f32, float, SIFT_GGUF_FLOAT32, f32)
SCALAR_GETTER(sift_gguf_value_f64, double, SIFT_GGUF_FLOAT64, f64)
SCALAR_GETTER(sift_gguf_value_bool, bool, SIFT_GGUF_BOOL, b)
#undef SCALAR_GETTER

const void *sift_gguf_value_scalar(const sift_gguf_value *v)
{
    if (!v || v->type == SIFT_GGUF_STRING || v->type == SIFT_GGUF_ARRAY) return NULL;
    return &v->u; /* every scalar member starts the union; bool is stored as a 0/1 byte */
}

sift_status sift_gguf_value_int(const sift_gguf_value *v, int64_t *out)
{
    if (!v) return SIFT_E_INVAL;
    switch (v->type) {
    case SIFT_GGUF_UINT8: *out = v->u.u8; return SIFT_OK;
    case SIFT_GGUF_INT8: *out = v->u.i8; return SIFT_OK;
    case SIFT_GGUF_UINT16: *out = v->u.u16; return SIFT_OK;
    case SIFT_GGUF_INT16: *out = v->u.i16; return SIFT_OK;
    case SIFT_GGUF_UINT32: *out = v->u.u32; return SIFT_OK;
    case SIFT_GGUF_INT32: *out = v->u.i32; return SIFT_OK;
    case SIFT_GGUF_INT64: *out = v->u.i64; return SIFT_OK;
    case SIFT_GGUF_BOOL: *out = v->u.u8; return SIFT_OK;
    case SIFT_GGUF_UINT64:
        if (v->u.u64 > (uint64_t)INT64_MAX) return SIFT_E_INVAL;
        *out = (int64_t)v->u.u64;
        return SIFT_OK;
    default: return SIFT_E_INVAL;
    }
}

sift_status sift_gguf_value_float(const sift_gguf_value *v, double *out)
{
    if (v && v->type == SIFT_GGUF_FLOAT32) *out = v->u.f32;
    else if (v && v->type == SIFT_GGUF_FLOAT64) *out = v->u.f64;
    else return SIFT_E_INVAL;
    return SIFT_OK;
}

const char *sift_gguf_value_str(const sift_gguf_value *v, size_t *len)
{
    if (!v || v->type != SIFT_GGUF_STRING) return NULL;
    if (len) *len = (size_t)v->n;
    return v->u.str;
}

int sift_gguf_array_type(const sift_gguf_value *v)
{
    return v && v->type == SIFT_GGUF_ARRAY ? (int)v->elem_type : -1;
}

uint64_t sift_gguf_array_n(const sift_gguf_value *v)
{
    return v && v->type == SIFT_GGUF_ARRAY ? v->n : 0;
}

const void *sift_gguf_array_data(const sift_gguf_value *v)
{
    if (!v || v->type != SIFT_GGUF_ARRAY || v->elem_type == SIFT_GGUF_STRING || v->elem_type == SIFT_GGUF_ARRAY)
        return NULL;
    return v->u.data;
}

const char *sift_gguf_array_str(const sift_gguf_value *v, uint64_t i, size_t *len)
{
    if (!v || v->type != SIFT_GGUF_ARRAY || v->elem_type != SIFT_GGUF_STRING || i >= v->n) return NULL;
    if (len) *len = (size_t)(v->u.strs.off[i + 1] - v->u.strs.off[i] - 1);
    return v->u.strs.chars + v->u.strs.off[i];
}

const sift_gguf_value *sift_gguf_array_elem(const sift_gguf_value *v, uint64_t i)
{
    if (!v || v->type != SIFT_GGUF_ARRAY || v->elem_type != SIFT_GGUF_ARRAY || i >= v->n) return NULL;
    return &v->u.elems[i];
}

static const sift_gguf_value *get_typed(const sift_gguf *g, const char *key, int type, sift_error *err)
{
    const sift_gguf_value *v = sift_gguf_get(g, key);
    if (!v) {
        sift__error_set(err, SIFT_E_FORMAT, "gguf: key '%s' not found", key);
        return NULL;
    }
    if (type >= 0 && (int)v->type != type) {
        sift__error_set(err, SIFT_E_FORMAT, "gguf: key '%s' has type %s, expected %s", key,
                       sift_gguf_type_name((int)v->type), sift_gguf_type_name(type));
        return NULL;
    }
    return v;
}

sift_status sift_gguf_get_u32(const sift_gguf *g, const char *key, uint32_t *out, sift_error *err)
{
    const sift_gguf_value *v = get_typed(g, key, SIFT_GGUF_UINT32, err);
    return v ? sift_gguf_value_u32(v, out) : SIFT_E_FORMAT;
}

sift_status sift_gguf_get_f32(const sift_gguf *g, const char *key, float *out, sift_error *err)
{
    const sift_gguf_value *v = get_typed(g, key, SIFT_GGUF_FLOAT32, err);
    return v ? sift_gguf_value_f32(v, out) : SIFT_E_FORMAT;
}

sift_status sift_gguf_get_int(const sift_gguf *g, const char *key, int64_t *out, sift_error *err)
{
    const sift_gguf_value *v = get_typed(g, key, -1, err);
    if (!v) return SIFT_E_FORMAT;
    if (sift_gguf_value_int(v, out) != SIFT_OK)
        return sift__error_set(err, SIFT_E_FORMAT, "gguf: key '%s' has type %s, expected an integer in int64 range", key,
                              sift_gguf_type_name((int)v->type));
    return SIFT_OK;
}

sift_status sift_gguf_get_str(const sift_gguf *g, const char *key, const char **out, sift_error *err)
{
    const sift_gguf_value *v = get_typed(g, key, SIFT_GGUF_STRING, err);
    if (!v) return SIFT_E_FORMAT;
    *out = v->u.str;
    return SIFT_OK;
}

int64_t sift_gguf_n_tensors(const sift_gguf *g) { return g->n_tensors; }

const sift_gguf_tensor *sift_gguf_tensor_at(const sift_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

int64_t sift_gguf_find_tensor(const sift_gguf *g, const char *name)
{
    if (!name || g->n_tensors == 0) return -1;
    return strhash_find(&g->tensor_hash, &g->tensors[0].name, sizeof(sift_gguf_tensor), name);
}

const sift_gguf_tensor *sift_gguf_tensor_by_name(const sift_gguf *g, const char *name)
{
    return sift_gguf_tensor_at(g, sift_gguf_find_tensor(g, name));
}
