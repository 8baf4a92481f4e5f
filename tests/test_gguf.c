/*
 * test_gguf.c - the GGUF reader: the shared model files, hand-built files covering every
 * value type (nested arrays included) and tensor layout, and one hand-built file per
 * validation rule, each of which must be refused with a message naming the problem.
 *
 * The hand-built files are assembled byte by byte here (struct bb), independently of
 * sift's own writer, so a bug shared by reader and writer cannot hide.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf/gguf.h"
#include "sift.h"

static const char *shared_path(const char *rel)
{
    static char buf[4][1024];
    static int k;
    const char *root = getenv("SIFT_SHARED");
    char *b = buf[k++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", root ? root : "../shared", rel);
    return b;
}

/* ---- a byte builder ------------------------------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} bb;

static void bb_put(bb *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void bb_u8(bb *b, uint8_t v) { bb_put(b, &v, 1); }
static void bb_u32(bb *b, uint32_t v) { bb_put(b, &v, 4); }
static void bb_u64(bb *b, uint64_t v) { bb_put(b, &v, 8); }
static void bb_strn(bb *b, const char *s, size_t n)
{
    bb_u64(b, n);
    bb_put(b, s, n);
}
static void bb_str(bb *b, const char *s) { bb_strn(b, s, strlen(s)); }
static void bb_header(bb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    bb_put(b, "GGUF", 4);
    bb_u32(b, version);
    bb_u64(b, n_tensors);
    bb_u64(b, n_kv);
}
static void bb_key(bb *b, const char *key, uint32_t type)
{
    bb_str(b, key);
    bb_u32(b, type);
}
static void bb_pad(bb *b, size_t align)
{
    while (b->n % align) bb_u8(b, 0);
}
static void bb_tensor(bb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset)
{
    bb_str(b, name);
    bb_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) bb_u64(b, ne[i]);
    bb_u32(b, type);
    bb_u64(b, offset);
}

static sift_gguf *open_bb(const bb *b, sift_error *e)
{
    memset(e, 0, sizeof *e);
    return sift_gguf_open_buffer(b->p, b->n, e);
}

/* ---- the shared files ------------------------------------------------------------------- */

static void test_stories260k(void **state)
{
    (void)state;
    sift_error e = {0};
    sift_gguf *g = sift_gguf_open(shared_path("models/stories260K.gguf"), &e);
    assert_non_null(g);
    assert_int_equal(sift_gguf_version(g), 3);
    assert_int_equal(sift_gguf_n_kv(g), 19);
    assert_int_equal(sift_gguf_n_tensors(g), 48);
    assert_int_equal(sift_gguf_alignment(g), 32);
    assert_int_equal(sift_gguf_data_offset(g) % 32, 0);
    assert_int_equal(sift_gguf_file_size(g), 1185376);

    const char *arch = NULL;
    assert_int_equal(sift_gguf_get_str(g, "general.architecture", &arch, &e), SIFT_OK);
    assert_string_equal(arch, "llama");
    uint32_t u = 0;
    assert_int_equal(sift_gguf_get_u32(g, "llama.embedding_length", &u, &e), SIFT_OK);
    assert_int_equal(u, 64);
    assert_int_equal(sift_gguf_get_u32(g, "llama.feed_forward_length", &u, &e), SIFT_OK);
    assert_int_equal(u, 172);
    float eps = 0;
    assert_int_equal(sift_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps, &e), SIFT_OK);
    assert_true(eps > 9.99e-6f && eps < 1.001e-5f);
    int64_t sep = 0;
    assert_int_equal(sift_gguf_get_int(g, "tokenizer.ggml.seperator_token_id", &sep, &e), SIFT_OK);
    assert_int_equal(sep, 4294967295LL);

    /* wrong type / absent key: an error naming the key */
    assert_int_equal(sift_gguf_get_f32(g, "llama.embedding_length", &eps, &e), SIFT_E_FORMAT);
    assert_non_null(strstr(e.msg, "llama.embedding_length"));
    assert_non_null(strstr(e.msg, "u32"));
    assert_int_equal(sift_gguf_get_u32(g, "no.such.key", &u, &e), SIFT_E_FORMAT);
    assert_non_null(strstr(e.msg, "not found"));
    assert_int_equal(sift_gguf_find_key(g, "no.such.key"), -1);
    assert_null(sift_gguf_get(g, "no.such.key"));

    /* the vocabulary arrays */
    const sift_gguf_value *tok = sift_gguf_get(g, "tokenizer.ggml.tokens");
    assert_non_null(tok);
    assert_int_equal(sift_gguf_value_type(tok), SIFT_GGUF_ARRAY);
    assert_int_equal(sift_gguf_array_type(tok), SIFT_GGUF_STRING);
    assert_int_equal(sift_gguf_array_n(tok), 512);
    size_t len = 0;
    assert_string_equal(sift_gguf_array_str(tok, 0, &len), "<unk>");
    assert_int_equal(len, 5);
    assert_string_equal(sift_gguf_array_str(tok, 3, &len), "<0x00>");
    assert_null(sift_gguf_array_str(tok, 512, &len));
    assert_null(sift_gguf_array_data(tok));
    const sift_gguf_value *tt = sift_gguf_get(g, "tokenizer.ggml.token_type");
    assert_int_equal(sift_gguf_array_type(tt), SIFT_GGUF_INT32);
    const int32_t *types = sift_gguf_array_data(tt);
    assert_non_null(types);
    assert_int_equal(types[0], 2);
    assert_int_equal(types[1], 3);
    assert_int_equal(types[3], 6);
    const sift_gguf_value *scores = sift_gguf_get(g, "tokenizer.ggml.scores");
    assert_int_equal(sift_gguf_array_type(scores), SIFT_GGUF_FLOAT32);
    assert_int_equal(sift_gguf_array_n(scores), 512);

    /* keys by index round-trip through the hash */
    for (int64_t i = 0; i < sift_gguf_n_kv(g); i++) assert_int_equal(sift_gguf_find_key(g, sift_gguf_key(g, i)), i);
    assert_null(sift_gguf_key(g, -1));
    assert_null(sift_gguf_key(g, 19));

    /* tensors */
    const sift_gguf_tensor *t = sift_gguf_tensor_by_name(g, "token_embd.weight");
    assert_non_null(t);
    assert_int_equal(sift_gguf_find_tensor(g, "token_embd.weight"), 0);
    assert_int_equal(t->type, SIFT_TYPE_F32);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 64);
    assert_int_equal(t->ne[1], 512);
    assert_int_equal(t->ne[2], 1);
    assert_int_equal(t->nb[0], 4);
    assert_int_equal(t->nb[1], 256);
    assert_int_equal(t->size, 64 * 512 * 4);
    assert_int_equal(t->offset, 0);
    assert_int_equal(t->file_offset, sift_gguf_data_offset(g));
    assert_ptr_equal(t->data, sift__gguf_bytes(g) + t->file_offset);
    t = sift_gguf_tensor_by_name(g, "output_norm.weight");
    assert_non_null(t);
    assert_int_equal(t->n_dims, 1);
    assert_int_equal(t->offset, 131072);
    uint64_t total = 0;
    for (int64_t i = 0; i < sift_gguf_n_tensors(g); i++) {
        const sift_gguf_tensor *ti = sift_gguf_tensor_at(g, i);
        assert_int_equal(sift_gguf_find_tensor(g, ti->name), i);
        assert_int_equal(ti->file_offset % 32, 0);
        assert_true(ti->file_offset + ti->size <= sift_gguf_file_size(g));
        total += (uint64_t)(ti->ne[0] * ti->ne[1] * ti->ne[2] * ti->ne[3]);
    }
    assert_int_equal(total, 292800); /* 2 x 64x512 embeddings + 64 + 5 layers x 45440 */
    assert_null(sift_gguf_tensor_at(g, 48));
    assert_null(sift_gguf_tensor_by_name(g, "nope"));
    assert_int_equal(sift_gguf_find_tensor(g, "nope"), -1);
    sift_gguf_close(g);
}

static void test_llama2_tiny(void **state)
{
    (void)state;
    sift_error e = {0};
    sift_gguf *g = sift_gguf_open(shared_path("models/llama-2-tiny-random.gguf"), &e);
    assert_non_null(g);
    assert_int_equal(sift_gguf_array_n(sift_gguf_get(g, "tokenizer.ggml.tokens")), 32000);
    int n_f16 = 0;
    for (int64_t i = 0; i < sift_gguf_n_tensors(g); i++) n_f16 += sift_gguf_tensor_at(g, i)->type == SIFT_TYPE_F16;
    assert_true(n_f16 > 0);
    sift_gguf_close(g);
}

static void test_v1_refused(void **state)
{
    (void)state;
    sift_error e = {0};
    assert_null(sift_gguf_open(shared_path("models/stories260K-gguf-v1.gguf"), &e));
    assert_int_equal(e.status, SIFT_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "version 1"));
}

static void test_q8_0_partial_rows_refused(void **state)
{
    (void)state;
    sift_error e = {0};
    assert_null(sift_gguf_open(shared_path("models/tinyllamas-stories-260k-q8_0.gguf"), &e));
    assert_int_equal(e.status, SIFT_E_FORMAT);
    assert_non_null(strstr(e.msg, "ffn_down.weight"));
    assert_non_null(strstr(e.msg, "has 172 elements per row, not a multiple of block size (32)"));
}

static void test_missing_file(void **state)
{
    (void)state;
    sift_error e = {0};
    assert_null(sift_gguf_open("/nonexistent/x.gguf", &e));
    assert_int_equal(e.status, SIFT_E_IO);
    assert_non_null(strstr(e.msg, "/nonexistent/x.gguf"));
    assert_null(sift_gguf_open("/", &e));
    assert_int_equal(e.status, SIFT_E_IO);
}

static void test_buffer_same_as_file(void **state)
{
    (void)state;
    const char *path = shared_path("models/vocab/ggml-vocab-gpt-2.gguf");
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    sift_error e = {0};
    sift_gguf *a = sift_gguf_open(path, &e), *b = sift_gguf_open_buffer(buf, (size_t)n, &e);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(sift_gguf_n_kv(a), sift_gguf_n_kv(b));
    const sift_gguf_value *ma = sift_gguf_get(a, "tokenizer.ggml.merges"), *mb = sift_gguf_get(b, "tokenizer.ggml.merges");
    assert_int_equal(sift_gguf_array_n(ma), sift_gguf_array_n(mb));
    assert_true(sift_gguf_array_n(ma) > 40000);
    for (uint64_t i = 0; i < sift_gguf_array_n(ma); i += 997) {
        size_t la, lb;
        const char *sa = sift_gguf_array_str(ma, i, &la), *sb = sift_gguf_array_str(mb, i, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(sa, sb, la);
        assert_int_equal(strlen(sa), la);
    }
    sift_gguf_close(a);
    sift_gguf_close(b);
    free(buf);
}

/* ---- a hand-built file with every value type ---------------------------------------------- */

static void build_full(bb *b, uint32_t alignment)
{
    bb_header(b, 3, 3, 18);
    bb_key(b, "general.alignment", SIFT_GGUF_UINT32);
    bb_u32(b, alignment);
    bb_key(b, "v.u8", SIFT_GGUF_UINT8);
    bb_u8(b, 200);
    bb_key(b, "v.i8", SIFT_GGUF_INT8);
    bb_u8(b, (uint8_t)-5);
    bb_key(b, "v.u16", SIFT_GGUF_UINT16);
    uint16_t u16 = 60000;
    bb_put(b, &u16, 2);
    bb_key(b, "v.i16", SIFT_GGUF_INT16);
    int16_t i16 = -30000;
    bb_put(b, &i16, 2);
    bb_key(b, "v.i32", SIFT_GGUF_INT32);
    bb_u32(b, (uint32_t)-123456);
    bb_key(b, "v.f32", SIFT_GGUF_FLOAT32);
    float f = 1.5f;
    bb_put(b, &f, 4);
    bb_key(b, "v.bool", SIFT_GGUF_BOOL);
    bb_u8(b, 1);
    bb_key(b, "v.str", SIFT_GGUF_STRING);
    bb_strn(b, "a\0b", 3); /* a string holding a NUL byte */
    bb_key(b, "v.u64", SIFT_GGUF_UINT64);
    bb_u64(b, 0xFFFFFFFFFFFFFFFFull);
    bb_key(b, "v.i64", SIFT_GGUF_INT64);
    bb_u64(b, (uint64_t)-9000000000LL);
    bb_key(b, "v.f64", SIFT_GGUF_FLOAT64);
    double d = -2.25;
    bb_put(b, &d, 8);
    bb_key(b, "a.u16", SIFT_GGUF_ARRAY); /* an odd-sized array first: later arrays are unaligned in the file */
    bb_u32(b, SIFT_GGUF_UINT8);
    bb_u64(b, 3);
    bb_u8(b, 7), bb_u8(b, 8), bb_u8(b, 9);
    bb_key(b, "a.f32", SIFT_GGUF_ARRAY);
    bb_u32(b, SIFT_GGUF_FLOAT32);
    bb_u64(b, 2);
    float fs[2] = {0.25f, -4.0f};
    bb_put(b, fs, 8);
    bb_key(b, "a.str", SIFT_GGUF_ARRAY);
    bb_u32(b, SIFT_GGUF_STRING);
    bb_u64(b, 3);
    bb_str(b, "hello"), bb_str(b, ""), bb_str(b, "w\xc3\xb6rld");
    bb_key(b, "a.bool", SIFT_GGUF_ARRAY);
    bb_u32(b, SIFT_GGUF_BOOL);
    bb_u64(b, 2);
    bb_u8(b, 0), bb_u8(b, 1);
    /* [[1, 2], [], [[ "x" ]]] - arrays of arrays with different element types */
    bb_key(b, "a.nested", SIFT_GGUF_ARRAY);
    bb_u32(b, SIFT_GGUF_ARRAY);
    bb_u64(b, 3);
    bb_u32(b, SIFT_GGUF_INT32), bb_u64(b, 2), bb_u32(b, 1), bb_u32(b, 2);
    bb_u32(b, SIFT_GGUF_INT64), bb_u64(b, 0);
    bb_u32(b, SIFT_GGUF_ARRAY), bb_u64(b, 1);
    bb_u32(b, SIFT_GGUF_STRING), bb_u64(b, 1), bb_str(b, "x");
    bb_key(b, "a.empty", SIFT_GGUF_ARRAY);
    bb_u32(b, SIFT_GGUF_STRING);
    bb_u64(b, 0);

    /* tensors: f32 [4, 2] (32 bytes), q8_0 [64] (2 blocks, 68 bytes), f16 [0] (empty) */
    uint64_t a = alignment;
    uint64_t ne_a[2] = {4, 2}, ne_b[1] = {64}, ne_c[1] = {0};
    uint64_t off_b = (32 + a - 1) / a * a, off_c = off_b + (68 + a - 1) / a * a;
    bb_tensor(b, "t.f32", 2, ne_a, SIFT_TYPE_F32, 0);
    bb_tensor(b, "t.q8_0", 1, ne_b, SIFT_TYPE_Q8_0, off_b);
    bb_tensor(b, "t.empty", 1, ne_c, SIFT_TYPE_F16, off_c);
    bb_pad(b, alignment);
    for (int i = 0; i < 8; i++) {
        float v = (float)i;
        bb_put(b, &v, 4);
    }
    bb_pad(b, alignment);
    for (int i = 0; i < 68; i++) bb_u8(b, (uint8_t)i);
    bb_pad(b, alignment);
}

static void test_all_value_types(void **state)
{
    (void)state;
    bb b = {0};
    build_full(&b, 64);
    sift_error e;
    sift_gguf *g = open_bb(&b, &e);
    if (!g) fail_msg("%s", e.msg);
    assert_int_equal(sift_gguf_alignment(g), 64);
    assert_int_equal(sift_gguf_n_kv(g), 18);

    uint8_t u8;
    int8_t i8;
    uint16_t u16;
    int16_t i16;
    int32_t i32;
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    bool bl;
    assert_int_equal(sift_gguf_value_u8(sift_gguf_get(g, "v.u8"), &u8), SIFT_OK);
    assert_int_equal(u8, 200);
    assert_int_equal(sift_gguf_value_i8(sift_gguf_get(g, "v.i8"), &i8), SIFT_OK);
    assert_int_equal(i8, -5);
    assert_int_equal(sift_gguf_value_u16(sift_gguf_get(g, "v.u16"), &u16), SIFT_OK);
    assert_int_equal(u16, 60000);
    assert_int_equal(sift_gguf_value_i16(sift_gguf_get(g, "v.i16"), &i16), SIFT_OK);
    assert_int_equal(i16, -30000);
    assert_int_equal(sift_gguf_value_i32(sift_gguf_get(g, "v.i32"), &i32), SIFT_OK);
    assert_int_equal(i32, -123456);
    assert_int_equal(sift_gguf_value_f32(sift_gguf_get(g, "v.f32"), &f32), SIFT_OK);
    assert_true(f32 == 1.5f);
    assert_int_equal(sift_gguf_value_bool(sift_gguf_get(g, "v.bool"), &bl), SIFT_OK);
    assert_true(bl);
    assert_int_equal(sift_gguf_value_u64(sift_gguf_get(g, "v.u64"), &u64), SIFT_OK);
    assert_true(u64 == 0xFFFFFFFFFFFFFFFFull);
    assert_int_equal(sift_gguf_value_i64(sift_gguf_get(g, "v.i64"), &i64), SIFT_OK);
    assert_true(i64 == -9000000000LL);
    assert_int_equal(sift_gguf_value_f64(sift_gguf_get(g, "v.f64"), &f64), SIFT_OK);
    assert_true(f64 == -2.25);
    size_t len;
    const char *s = sift_gguf_value_str(sift_gguf_get(g, "v.str"), &len);
    assert_int_equal(len, 3);
    assert_memory_equal(s, "a\0b", 4);

    /* exact types: no silent conversions */
    assert_int_equal(sift_gguf_value_u32(sift_gguf_get(g, "v.u8"), &u32), SIFT_E_INVAL);
    assert_int_equal(sift_gguf_value_f64(sift_gguf_get(g, "v.f32"), &f64), SIFT_E_INVAL);
    assert_null(sift_gguf_value_str(sift_gguf_get(g, "v.u8"), &len));
    assert_int_equal(sift_gguf_array_type(sift_gguf_get(g, "v.u8")), -1);
    assert_int_equal(sift_gguf_array_n(sift_gguf_get(g, "v.u8")), 0);
    /* the raw scalar view: the bytes of any scalar type, NULL for strings */
    assert_int_equal(*(const int16_t *)sift_gguf_value_scalar(sift_gguf_get(g, "v.i16")), -30000);
    assert_true(*(const double *)sift_gguf_value_scalar(sift_gguf_get(g, "v.f64")) == -2.25);
    assert_int_equal(*(const uint8_t *)sift_gguf_value_scalar(sift_gguf_get(g, "v.bool")), 1);
    assert_null(sift_gguf_value_scalar(sift_gguf_get(g, "v.str")));
    assert_null(sift_gguf_value_scalar(NULL));
    /* ... except through the lenient ones */
    assert_int_equal(sift_gguf_value_int(sift_gguf_get(g, "v.i16"), &i64), SIFT_OK);
    assert_int_equal(i64, -30000);
    assert_int_equal(sift_gguf_value_int(sift_gguf_get(g, "v.u64"), &i64), SIFT_E_INVAL); /* > INT64_MAX */
    assert_int_equal(sift_gguf_value_int(sift_gguf_get(g, "v.f32"), &i64), SIFT_E_INVAL);
    assert_int_equal(sift_gguf_value_float(sift_gguf_get(g, "v.f32"), &f64), SIFT_OK);
    assert_true(f64 == 1.5);

    const sift_gguf_value *a = sift_gguf_get(g, "a.u16");
    assert_int_equal(sift_gguf_array_type(a), SIFT_GGUF_UINT8);
    assert_memory_equal(sift_gguf_array_data(a), "\x07\x08\x09", 3);
    a = sift_gguf_get(g, "a.f32");
    const float *fa = sift_gguf_array_data(a);
    assert_int_equal(((uintptr_t)fa) % _Alignof(float), 0);
    assert_true(fa[0] == 0.25f && fa[1] == -4.0f);
    a = sift_gguf_get(g, "a.str");
    assert_int_equal(sift_gguf_array_n(a), 3);
    assert_string_equal(sift_gguf_array_str(a, 0, &len), "hello");
    assert_string_equal(sift_gguf_array_str(a, 1, &len), "");
    assert_int_equal(len, 0);
    assert_string_equal(sift_gguf_array_str(a, 2, &len), "w\xc3\xb6rld");
    assert_int_equal(len, 6);
    assert_null(sift_gguf_array_elem(a, 0));
    a = sift_gguf_get(g, "a.bool");
    assert_memory_equal(sift_gguf_array_data(a), "\0\1", 2);

    a = sift_gguf_get(g, "a.nested");
    assert_int_equal(sift_gguf_array_type(a), SIFT_GGUF_ARRAY);
    assert_int_equal(sift_gguf_array_n(a), 3);
    assert_null(sift_gguf_array_data(a));
    const sift_gguf_value *a0 = sift_gguf_array_elem(a, 0), *a1 = sift_gguf_array_elem(a, 1),
                          *a2 = sift_gguf_array_elem(a, 2);
    assert_null(sift_gguf_array_elem(a, 3));
    assert_int_equal(sift_gguf_array_type(a0), SIFT_GGUF_INT32);
    const int32_t *ia = sift_gguf_array_data(a0);
    assert_int_equal(ia[0], 1);
    assert_int_equal(ia[1], 2);
    assert_int_equal(sift_gguf_array_type(a1), SIFT_GGUF_INT64);
    assert_int_equal(sift_gguf_array_n(a1), 0);
    assert_int_equal(sift_gguf_array_type(a2), SIFT_GGUF_ARRAY);
    assert_string_equal(sift_gguf_array_str(sift_gguf_array_elem(a2, 0), 0, &len), "x");
    a = sift_gguf_get(g, "a.empty");
    assert_int_equal(sift_gguf_array_n(a), 0);
    assert_null(sift_gguf_array_str(a, 0, &len));

    /* tensors */
    assert_int_equal(sift_gguf_n_tensors(g), 3);
    assert_int_equal(sift_gguf_data_offset(g) % 64, 0);
    const sift_gguf_tensor *t = sift_gguf_tensor_by_name(g, "t.f32");
    assert_int_equal(t->size, 32);
    assert_int_equal(t->nb[1], 16);
    assert_int_equal(t->nb[2], 32);
    float v;
    memcpy(&v, (const uint8_t *)t->data + 5 * 4, 4);
    assert_true(v == 5.0f);
    t = sift_gguf_tensor_by_name(g, "t.q8_0");
    assert_int_equal(t->type, SIFT_TYPE_Q8_0);
    assert_int_equal(t->offset, 64);
    assert_int_equal(t->size, 68);
    assert_int_equal(t->nb[0], 34);
    assert_int_equal(t->nb[1], 68);
    assert_int_equal(((const uint8_t *)t->data)[67], 67);
    t = sift_gguf_tensor_by_name(g, "t.empty");
    assert_int_equal(t->size, 0);
    assert_int_equal(t->ne[0], 0);
    sift_gguf_close(g);
    free(b.p);
}

/* ---- one broken file per rule --------------------------------------------------------------- */

typedef void (*build_fn)(bb *b);

static void expect_refusal(build_fn build, int status, const char *needle)
{
    bb b = {0};
    build(&b);
    sift_error e;
    sift_gguf *g = open_bb(&b, &e);
    if (g) fail_msg("opened a broken file (expected: %s)", needle);
    if (e.status != status || !strstr(e.msg, needle))
        fail_msg("status %d message '%s'; expected status %d and '%s'", e.status, e.msg, status, needle);
    free(b.p);
}

static void b_magic(bb *b) { bb_put(b, "GGUX\3\0\0\0", 8); }
static void b_legacy(bb *b) { bb_put(b, "tjgg\3\0\0\0", 8); }
static void b_tiny(bb *b) { bb_put(b, "GG", 2); }
static void b_v0(bb *b) { bb_header(b, 0, 0, 0); }
static void b_v4(bb *b) { bb_header(b, 4, 0, 0); }
static void b_bigendian(bb *b) { bb_header(b, 0x03000000, 0, 0); }
static void b_cut_header(bb *b)
{
    bb_header(b, 3, 0, 0);
    b->n -= 3;
}
static void b_huge_kv(bb *b) { bb_header(b, 3, 0, 1ull << 62); }
static void b_huge_tensors(bb *b) { bb_header(b, 3, UINT64_MAX, 0); }
static void b_key_len(bb *b)
{
    bb_header(b, 3, 0, 1);
    bb_u64(b, 1000);
    bb_put(b, "abcdefghijklmnopqrstuvwxyz", 26);
}
static void b_empty_key(bb *b)
{
    bb_header(b, 3, 0, 1);
    bb_key(b, "", SIFT_GGUF_UINT8);
    bb_u8(b, 0);
}
static void b_nul_key(bb *b)
{
    bb_header(b, 3, 0, 1);
    bb_strn(b, "a\0b", 3);
    bb_u32(b, SIFT_GGUF_UINT8);
    bb_u8(b, 0);
}
static void b_dup_key(bb *b)
{
    bb_header(b, 3, 0, 2);
    bb_key(b, "k", SIFT_GGUF_UINT8);
    bb_u8(b, 0);
    bb_key(b, "k", SIFT_GGUF_UINT8);
    bb_u8(b, 0);
}
static void b_bad_type(bb *b)
{
    bb_header(b, 3, 0, 1);
    bb_key(b, "k", 13);
    bb_u64(b, 0);
}
static void b_bad_bool(bb *b)
{
    bb_header(b, 3, 0, 1);
    bb_key(b, "k", SIFT_GGUF_BOOL);
    bb_u8(b, 2);
}
static void b_cut_value(bb *b)
{
    bb_header(b, 3, 0, 1);
    bb_key(b, "k", SIFT_GGUF_UINT64);
    bb_u32(b, 0);
}
static void b_str_len(bb *b)
{
    bb_header(b, 3, 0, 1);
    bb_key(b, "k", SIFT_GGUF_STRING);
    bb_u64(b, UINT64_MAX);
}
static void b_arr_count(bb *b)
{
    bb_header(b, 3, 0, 1);
    bb_key(b, "k", SIFT_GGUF_ARRAY);
    bb_u32(b, SIFT_GGUF_UINT32);
    bb_u64(b, 1ull << 61); /* * 4 bytes would wrap to 0 */
    bb_u32(b, 0);
}
static void b_arr_type(bb *b)
{
    bb_header(b, 3, 0, 1);
    bb_key(b, "k", SIFT_GGUF_ARRAY);
    bb_u32(b, 99);
    bb_u64(b, 0);
}
static void b_arr_str_len(bb *b)
{
    bb_header(b, 3, 0, 1);
    bb_key(b, "k", SIFT_GGUF_ARRAY);
    bb_u32(b, SIFT_GGUF_STRING);
    bb_u64(b, 2);
    bb_str(b, "ok");
    bb_u64(b, 1ull << 40);
}
static void b_arr_bool(bb *b)
{
    bb_header(b, 3, 0, 1);
    bb_key(b, "k", SIFT_GGUF_ARRAY);
    bb_u32(b, SIFT_GGUF_BOOL);
    bb_u64(b, 2);
    bb_u8(b, 1), bb_u8(b, 7);
}
static void b_deep(bb *b)
{
    bb_header(b, 3, 0, 1);
    bb_key(b, "k", SIFT_GGUF_ARRAY);
    for (int i = 0; i < 40; i++) bb_u32(b, SIFT_GGUF_ARRAY), bb_u64(b, 1);
    bb_u32(b, SIFT_GGUF_UINT8), bb_u64(b, 0);
}
static void b_align_type(bb *b)
{
    bb_header(b, 3, 0, 1);
    bb_key(b, "general.alignment", SIFT_GGUF_UINT64);
    bb_u64(b, 32);
}
static void b_align_pow2(bb *b)
{
    bb_header(b, 3, 0, 1);
    bb_key(b, "general.alignment", SIFT_GGUF_UINT32);
    bb_u32(b, 48);
}
static void b_align_zero(bb *b)
{
    bb_header(b, 3, 0, 1);
    bb_key(b, "general.alignment", SIFT_GGUF_UINT32);
    bb_u32(b, 0);
}
/* a file with one f32 [8] tensor, broken by the caller's tweak of its info */
static void b_tensor(bb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off,
                     size_t data_bytes)
{
    bb_header(b, 3, 1, 0);
    bb_tensor(b, name, n_dims, ne, type, off);
    bb_pad(b, 32);
    for (size_t i = 0; i < data_bytes; i++) bb_u8(b, 0);
}
static const uint64_t ne8[4] = {8, 1, 1, 1};
static void b_t_long_name(bb *b)
{
    char name[65];
    memset(name, 'n', 64);
    name[64] = 0;
    b_tensor(b, name, 1, ne8, SIFT_TYPE_F32, 0, 32);
}
static void b_t_dims(bb *b)
{
    uint64_t ne[5] = {8, 1, 1, 1, 1};
    b_tensor(b, "t", 5, ne, SIFT_TYPE_F32, 0, 32);
}
static void b_t_negative(bb *b)
{
    uint64_t ne[2] = {8, (uint64_t)-1};
    b_tensor(b, "t", 2, ne, SIFT_TYPE_F32, 0, 32);
}
static void b_t_overflow(bb *b)
{
    uint64_t ne[4] = {1ull << 32, 1ull << 32, 1, 1};
    b_tensor(b, "t", 4, ne, SIFT_TYPE_F32, 0, 32);
}
static void b_t_strides_overflow(bb *b)
{
    uint64_t ne[4] = {1ull << 62, 1, 1, 0}; /* no elements, but 4 * 2^62 bytes per row */
    b_tensor(b, "t", 4, ne, SIFT_TYPE_F32, 0, 32);
}
static void b_t_bytes_overflow(bb *b)
{
    uint64_t ne[1] = {1ull << 62}; /* 2^62 elements fit int64, 2^64 bytes do not */
    b_tensor(b, "t", 1, ne, SIFT_TYPE_F32, 0, 32);
}
static void b_t_type(bb *b) { b_tensor(b, "t", 1, ne8, 4 /* removed Q4_2 */, 0, 32); }
static void b_t_type_big(bb *b) { b_tensor(b, "t", 1, ne8, 1000, 0, 32); }
static void b_t_block(bb *b)
{
    uint64_t ne[2] = {48, 2};
    b_tensor(b, "t", 2, ne, SIFT_TYPE_Q4_K, 0, 256);
}
static void b_t_misaligned(bb *b) { b_tensor(b, "t", 1, ne8, SIFT_TYPE_F32, 16, 64); }
static void b_t_past_end(bb *b) { b_tensor(b, "t", 1, ne8, SIFT_TYPE_F32, 0, 31); }
static void b_t_far_offset(bb *b) { b_tensor(b, "t", 1, ne8, SIFT_TYPE_F32, UINT64_MAX - 31, 32); }
static void b_t_dup(bb *b)
{
    bb_header(b, 3, 2, 0);
    bb_tensor(b, "t", 1, ne8, SIFT_TYPE_F32, 0);
    bb_tensor(b, "t", 1, ne8, SIFT_TYPE_F32, 32);
    bb_pad(b, 32);
    for (int i = 0; i < 64; i++) bb_u8(b, 0);
}
static void b_t_overlap(bb *b)
{
    uint64_t ne16[1] = {16};
    bb_header(b, 3, 2, 0);
    bb_tensor(b, "a", 1, ne16, SIFT_TYPE_F32, 0);
    bb_tensor(b, "b", 1, ne8, SIFT_TYPE_F32, 32);
    bb_pad(b, 32);
    for (int i = 0; i < 96; i++) bb_u8(b, 0);
}
static void b_t_no_data(bb *b)
{
    bb_header(b, 3, 1, 0);
    bb_tensor(b, "t", 1, ne8, SIFT_TYPE_F32, 0); /* the data section would start past the end */
}
static void b_t_cut(bb *b)
{
    bb_header(b, 3, 1, 0);
    bb_str(b, "abcdefghijklmnop");
    bb_u32(b, 4);
    bb_u64(b, 8);
}

static void test_refusals(void **state)
{
    (void)state;
    expect_refusal(b_magic, SIFT_E_FORMAT, "bad magic 'GGUX'");
    expect_refusal(b_legacy, SIFT_E_UNSUPPORTED, "legacy");
    expect_refusal(b_tiny, SIFT_E_FORMAT, "too small");
    expect_refusal(b_v0, SIFT_E_UNSUPPORTED, "version 0");
    expect_refusal(b_v4, SIFT_E_UNSUPPORTED, "version 4");
    expect_refusal(b_bigendian, SIFT_E_UNSUPPORTED, "big-endian");
    expect_refusal(b_cut_header, SIFT_E_FORMAT, "metadata count: the file ends");
    expect_refusal(b_huge_kv, SIFT_E_FORMAT, "metadata count 4611686018427387904 cannot fit");
    expect_refusal(b_huge_tensors, SIFT_E_FORMAT, "tensor count 18446744073709551615 cannot fit");
    expect_refusal(b_key_len, SIFT_E_FORMAT, "kv 0: key: string length 1000 runs past the end");
    expect_refusal(b_empty_key, SIFT_E_FORMAT, "empty key");
    expect_refusal(b_nul_key, SIFT_E_FORMAT, "NUL byte");
    expect_refusal(b_dup_key, SIFT_E_FORMAT, "kv 1 'k': duplicate key (also kv 0)");
    expect_refusal(b_bad_type, SIFT_E_FORMAT, "invalid value type 13");
    expect_refusal(b_bad_bool, SIFT_E_FORMAT, "bool value is 2");
    expect_refusal(b_cut_value, SIFT_E_FORMAT, "the file ends");
    expect_refusal(b_str_len, SIFT_E_FORMAT, "string length 18446744073709551615 runs past the end");
    expect_refusal(b_arr_count, SIFT_E_FORMAT, "array of 2305843009213693952 u32 elements cannot fit");
    expect_refusal(b_arr_type, SIFT_E_FORMAT, "invalid array element type 99");
    expect_refusal(b_arr_str_len, SIFT_E_FORMAT, "string length 1099511627776 runs past the end");
    expect_refusal(b_arr_bool, SIFT_E_FORMAT, "bool element 1 is 7");
    expect_refusal(b_deep, SIFT_E_FORMAT, "nested deeper than");
    expect_refusal(b_align_type, SIFT_E_FORMAT, "'general.alignment': must be of type u32, not u64 (at offset 53)");
    expect_refusal(b_align_pow2, SIFT_E_FORMAT, "alignment 48 is not a power of 2");
    expect_refusal(b_align_zero, SIFT_E_FORMAT, "alignment 0 is not a power of 2");
    expect_refusal(b_t_long_name, SIFT_E_FORMAT, "name is too long: 64 >= 64");
    expect_refusal(b_t_dims, SIFT_E_FORMAT, "5 dimensions, at most 4");
    expect_refusal(b_t_negative, SIFT_E_FORMAT, "dimension 1 has a negative number of elements (-1)");
    expect_refusal(b_t_overflow, SIFT_E_FORMAT, "more than 2^63 elements");
    expect_refusal(b_t_bytes_overflow, SIFT_E_FORMAT, "size in bytes overflows");
    expect_refusal(b_t_strides_overflow, SIFT_E_FORMAT, "byte strides overflow");
    expect_refusal(b_t_type, SIFT_E_FORMAT, "invalid ggml type 4");
    expect_refusal(b_t_type_big, SIFT_E_FORMAT, "invalid ggml type 1000");
    expect_refusal(b_t_block, SIFT_E_FORMAT, "type q4_K has 48 elements per row, not a multiple of block size (256)");
    expect_refusal(b_t_misaligned, SIFT_E_FORMAT, "data offset 16 is not a multiple of the alignment (32)");
    expect_refusal(b_t_past_end, SIFT_E_FORMAT, "lies past the end of the file");
    expect_refusal(b_t_far_offset, SIFT_E_FORMAT, "lies past the end of the file");
    expect_refusal(b_t_dup, SIFT_E_FORMAT, "tensor 1 't': duplicate tensor name (also tensor 0)");
    expect_refusal(b_t_overlap, SIFT_E_FORMAT, "tensor 1 'b': data at 128 overlaps the data of tensor 'a' [96, 160)");
    expect_refusal(b_t_no_data, SIFT_E_FORMAT, "past the end of the file");
    expect_refusal(b_t_cut, SIFT_E_FORMAT, "tensor 0 'abcdefghijklmnop': dimension: the file ends");
}

/* every prefix of a valid file is refused (never read past its end: ASan checks) */
static void test_every_truncation(void **state)
{
    (void)state;
    bb b = {0};
    build_full(&b, 32);
    for (size_t n = 0; n < b.n; n++) {
        uint8_t *cut = malloc(n ? n : 1); /* an exact-size copy, so ASan sees any overread */
        memcpy(cut, b.p, n);
        sift_error e = {0};
        sift_gguf *g = sift_gguf_open_buffer(cut, n, &e);
        /* the last tensor is empty and the padding after the data is optional */
        if (g) {
            assert_true(n >= b.n - 32);
            sift_gguf_close(g);
        } else {
            assert_true(e.status == SIFT_E_FORMAT);
            assert_true(strncmp(e.msg, "gguf: ", 6) == 0);
        }
        free(cut);
    }
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories260k),
        cmocka_unit_test(test_llama2_tiny),
        cmocka_unit_test(test_v1_refused),
        cmocka_unit_test(test_q8_0_partial_rows_refused),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_buffer_same_as_file),
        cmocka_unit_test(test_all_value_types),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_every_truncation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
