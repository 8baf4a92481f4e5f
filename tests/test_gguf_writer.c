/*
 * test_gguf_writer.c - the GGUF writer: byte-identical rewrites of the shared files, a
 * round trip of every value type (nested arrays included), a Q8_0/Q4_0 quantization of
 * stories260K written and read back, and the writer's refusals.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gguf/ggml_types.h"
#include "gguf/gguf.h"
#include "sift.h"

static const char *shared_path(const char *rel)
{
    static char buf[2][1024];
    static int k;
    const char *root = getenv("SIFT_SHARED");
    char *b = buf[k++ & 1];
    snprintf(b, sizeof buf[0], "%s/%s", root ? root : "../shared", rel);
    return b;
}

/* A writer holding every pair and tensor of g, in file order. */
static sift__gguf_writer *copy_all(const sift_gguf *g)
{
    sift__gguf_writer *w = sift__gguf_writer_new();
    assert_non_null(w);
    for (int64_t i = 0; i < sift_gguf_n_kv(g); i++)
        assert_int_equal(sift__gguf_writer_set_value(w, sift_gguf_key(g, i), sift_gguf_kv_value(g, i)), SIFT_OK);
    sift_error e = {0};
    for (int64_t i = 0; i < sift_gguf_n_tensors(g); i++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
        assert_int_equal(sift__gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size, &e),
                         SIFT_OK);
    }
    return w;
}

static void test_rewrite_identical(void **state)
{
    (void)state;
    const char *files[] = {"models/stories260K.gguf", "models/llama-2-tiny-random.gguf",
                           "models/vocab/ggml-vocab-llama-spm.gguf", "models/vocab/ggml-vocab-gpt-2.gguf",
                           "models/vocab/ggml-vocab-bert-bge.gguf"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        sift_error e = {0};
        sift_gguf *g = sift_gguf_open(shared_path(files[f]), &e);
        if (!g) fail_msg("%s", e.msg);
        sift__gguf_writer *w = copy_all(g);
        uint8_t *buf;
        size_t n;
        assert_int_equal(sift__gguf_writer_write_buffer(w, &buf, &n, &e), SIFT_OK);
        /* the originals were written by ggml/gguf-py; ours must be the same bytes, except
         * that vocab-only files carry no padding after the metadata */
        uint64_t want = sift_gguf_file_size(g);
        if (sift_gguf_n_tensors(g) == 0) assert_true(n >= want && n - want < sift_gguf_alignment(g));
        else assert_int_equal(n, want);
        if (memcmp(buf, sift__gguf_bytes(g), n < want ? n : want) != 0) fail_msg("%s: rewrite differs", files[f]);
        free(buf);
        sift__gguf_writer_free(w);
        sift_gguf_close(g);
    }
}

static void test_all_types_round_trip(void **state)
{
    (void)state;
    sift__gguf_writer *w = sift__gguf_writer_new();
    uint8_t u8 = 250;
    int8_t i8 = -100;
    uint16_t u16 = 65535;
    int16_t i16 = -2;
    int32_t i32 = INT32_MIN;
    uint64_t u64 = 1ull << 63;
    int64_t i64 = INT64_MIN;
    double f64 = 1e300;
    bool t = true;
    assert_int_equal(sift__gguf_writer_set(w, "u8", SIFT_GGUF_UINT8, &u8), SIFT_OK);
    assert_int_equal(sift__gguf_writer_set(w, "i8", SIFT_GGUF_INT8, &i8), SIFT_OK);
    assert_int_equal(sift__gguf_writer_set(w, "u16", SIFT_GGUF_UINT16, &u16), SIFT_OK);
    assert_int_equal(sift__gguf_writer_set(w, "i16", SIFT_GGUF_INT16, &i16), SIFT_OK);
    assert_int_equal(sift__gguf_writer_set(w, "i32", SIFT_GGUF_INT32, &i32), SIFT_OK);
    assert_int_equal(sift__gguf_writer_set(w, "u64", SIFT_GGUF_UINT64, &u64), SIFT_OK);
    assert_int_equal(sift__gguf_writer_set(w, "i64", SIFT_GGUF_INT64, &i64), SIFT_OK);
    assert_int_equal(sift__gguf_writer_set(w, "f64", SIFT_GGUF_FLOAT64, &f64), SIFT_OK);
    assert_int_equal(sift__gguf_writer_set(w, "bool", SIFT_GGUF_BOOL, &t), SIFT_OK);
    assert_int_equal(sift__gguf_writer_set_u32(w, "u32", 7), SIFT_OK);
    assert_int_equal(sift__gguf_writer_set_u32(w, "u32", 8), SIFT_OK); /* replaces in place */
    assert_int_equal(sift__gguf_writer_set_f32(w, "f32", -0.5f), SIFT_OK);
    assert_int_equal(sift__gguf_writer_set_str(w, "str", "caf\xc3\xa9"), SIFT_OK);
    const float fa[3] = {1, 2, 3};
    assert_int_equal(sift__gguf_writer_set_arr(w, "arr.f32", SIFT_GGUF_FLOAT32, fa, 3), SIFT_OK);
    const uint8_t ba[3] = {1, 0, 5}; /* non-zero -> true */
    assert_int_equal(sift__gguf_writer_set_arr(w, "arr.bool", SIFT_GGUF_BOOL, ba, 3), SIFT_OK);
    const char *sa[] = {"a", "", "ccc"};
    assert_int_equal(sift__gguf_writer_set_arr_str(w, "arr.str", sa, 3), SIFT_OK);
    assert_int_equal(sift__gguf_writer_set_u32(w, "general.alignment", 64), SIFT_OK);
    assert_int_equal(sift__gguf_writer_set_str(w, "gone", "x"), SIFT_OK);
    sift__gguf_writer_remove(w, "gone");
    assert_int_equal(sift__gguf_writer_set(w, "bad", SIFT_GGUF_ARRAY, fa), SIFT_E_INVAL);
    assert_int_equal(sift__gguf_writer_set_u32(w, "", 1), SIFT_E_INVAL);

    float data[2 * 64];
    for (int i = 0; i < 128; i++) data[i] = (float)i / 8;
    uint8_t q[2 * 2 * 34];
    sift__quantize_row_q8_0(data, q, 128);
    sift_error e = {0};
    int64_t ne_f[2] = {64, 2}, ne_q[2] = {64, 2};
    assert_int_equal(sift__gguf_writer_add_tensor(w, "f", SIFT_TYPE_F32, 2, ne_f, data, sizeof data, &e), SIFT_OK);
    assert_int_equal(sift__gguf_writer_add_tensor(w, "q", SIFT_TYPE_Q8_0, 2, ne_q, q, sizeof q, &e), SIFT_OK);
    /* refusals */
    assert_int_equal(sift__gguf_writer_add_tensor(w, "q", SIFT_TYPE_Q8_0, 2, ne_q, q, sizeof q, &e), SIFT_E_INVAL);
    assert_non_null(strstr(e.msg, "duplicate"));
    assert_int_equal(sift__gguf_writer_add_tensor(w, "x", SIFT_TYPE_Q8_0, 2, ne_q, q, sizeof q - 1, &e), SIFT_E_INVAL);
    assert_non_null(strstr(e.msg, "135 bytes of data given, the shape needs 136"));
    int64_t ne_bad[1] = {48};
    assert_int_equal(sift__gguf_writer_add_tensor(w, "y", SIFT_TYPE_Q8_0, 1, ne_bad, q, 51, &e), SIFT_E_INVAL);
    assert_non_null(strstr(e.msg, "not a multiple"));

    /* nested arrays come in through a copy from a reader value: take them from a file
     * built here by hand */
    uint8_t nested[] = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
                        1, 0, 0, 0, 0, 0, 0, 0, 'n', 9, 0, 0, 0, /* key "n", type array */
                        9, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,      /* of 2 arrays */
                        0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 42,  /* [u8 42] */
                        8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 'z'}; /* ["z"] */
    sift_gguf *src = sift_gguf_open_buffer(nested, sizeof nested, &e);
    if (!src) fail_msg("%s", e.msg);
    assert_int_equal(sift__gguf_writer_set_value(w, "nested", sift_gguf_get(src, "n")), SIFT_OK);
    sift_gguf_close(src);

    uint8_t *buf;
    size_t n;
    assert_int_equal(sift__gguf_writer_write_buffer(w, &buf, &n, &e), SIFT_OK);
    sift__gguf_writer_free(w);
    sift_gguf *g = sift_gguf_open_buffer(buf, n, &e);
    if (!g) fail_msg("%s", e.msg);
    assert_int_equal(sift_gguf_n_kv(g), 17);
    assert_int_equal(sift_gguf_alignment(g), 64);
    assert_string_equal(sift_gguf_key(g, 9), "u32"); /* replacement kept the position */
    uint32_t u32;
    assert_int_equal(sift_gguf_get_u32(g, "u32", &u32, &e), SIFT_OK);
    assert_int_equal(u32, 8);
    assert_int_equal(sift_gguf_find_key(g, "gone"), -1);
    uint8_t r8;
    int8_t ri8;
    uint16_t r16;
    int16_t ri16;
    int32_t ri32;
    uint64_t r64;
    int64_t ri64;
    double rf64;
    bool rb;
    float rf32;
    assert_int_equal(sift_gguf_value_u8(sift_gguf_get(g, "u8"), &r8), SIFT_OK);
    assert_int_equal(r8, 250);
    assert_int_equal(sift_gguf_value_i8(sift_gguf_get(g, "i8"), &ri8), SIFT_OK);
    assert_int_equal(ri8, -100);
    assert_int_equal(sift_gguf_value_u16(sift_gguf_get(g, "u16"), &r16), SIFT_OK);
    assert_int_equal(r16, 65535);
    assert_int_equal(sift_gguf_value_i16(sift_gguf_get(g, "i16"), &ri16), SIFT_OK);
    assert_int_equal(ri16, -2);
    assert_int_equal(sift_gguf_value_i32(sift_gguf_get(g, "i32"), &ri32), SIFT_OK);
    assert_true(ri32 == INT32_MIN);
    assert_int_equal(sift_gguf_value_u64(sift_gguf_get(g, "u64"), &r64), SIFT_OK);
    assert_true(r64 == 1ull << 63);
    assert_int_equal(sift_gguf_value_i64(sift_gguf_get(g, "i64"), &ri64), SIFT_OK);
    assert_true(ri64 == INT64_MIN);
    assert_int_equal(sift_gguf_value_f64(sift_gguf_get(g, "f64"), &rf64), SIFT_OK);
    assert_true(rf64 == 1e300);
    assert_int_equal(sift_gguf_value_bool(sift_gguf_get(g, "bool"), &rb), SIFT_OK);
    assert_true(rb);
    assert_int_equal(sift_gguf_value_f32(sift_gguf_get(g, "f32"), &rf32), SIFT_OK);
    assert_true(rf32 == -0.5f);
    assert_string_equal(sift_gguf_value_str(sift_gguf_get(g, "str"), NULL), "caf\xc3\xa9");
    assert_memory_equal(sift_gguf_array_data(sift_gguf_get(g, "arr.f32")), fa, sizeof fa);
    assert_memory_equal(sift_gguf_array_data(sift_gguf_get(g, "arr.bool")), "\1\0\1", 3);
    const sift_gguf_value *as = sift_gguf_get(g, "arr.str");
    assert_string_equal(sift_gguf_array_str(as, 2, NULL), "ccc");
    const sift_gguf_value *nv = sift_gguf_get(g, "nested");
    assert_int_equal(sift_gguf_array_n(nv), 2);
    assert_int_equal(*(const uint8_t *)sift_gguf_array_data(sift_gguf_array_elem(nv, 0)), 42);
    assert_string_equal(sift_gguf_array_str(sift_gguf_array_elem(nv, 1), 0, NULL), "z");

    const sift_gguf_tensor *tf = sift_gguf_tensor_by_name(g, "f"), *tq = sift_gguf_tensor_by_name(g, "q");
    assert_int_equal(tf->offset, 0);
    assert_int_equal(tq->offset, 512); /* 512 bytes of f32, already a multiple of 64 */
    assert_int_equal(tq->file_offset % 64, 0);
    assert_memory_equal(tf->data, data, sizeof data);
    assert_memory_equal(tq->data, q, sizeof q);
    sift_gguf_close(g);
    free(buf);

    /* a bad alignment is refused at write time */
    w = sift__gguf_writer_new();
    sift__gguf_writer_set_u32(w, "general.alignment", 24);
    assert_int_equal(sift__gguf_writer_write_buffer(w, &buf, &n, &e), SIFT_E_INVAL);
    assert_non_null(strstr(e.msg, "not a power of 2"));
    assert_int_equal(sift__gguf_writer_write_file(w, "/nonexistent-dir/x.gguf", &e), SIFT_E_INVAL);
    sift__gguf_writer_remove(w, "general.alignment");
    assert_int_equal(sift__gguf_writer_write_file(w, "/nonexistent-dir/x.gguf", &e), SIFT_E_IO);
    sift__gguf_writer_free(w);
}

/* What `sift quantize` will do: stories260K's matrices to Q8_0 / Q4_0 where the rows allow
 * it (ffn_down's rows of 172 stay F32), written to a file, read back, compared. */
static void quantize_model(int qtype, float tol)
{
    sift_error e = {0};
    sift_gguf *g = sift_gguf_open(shared_path("models/stories260K.gguf"), &e);
    assert_non_null(g);
    sift__gguf_writer *w = sift__gguf_writer_new();
    for (int64_t i = 0; i < sift_gguf_n_kv(g); i++)
        assert_int_equal(sift__gguf_writer_set_value(w, sift_gguf_key(g, i), sift_gguf_kv_value(g, i)), SIFT_OK);
    int64_t n = sift_gguf_n_tensors(g), n_quant = 0;
    void **owned = calloc((size_t)n, sizeof *owned);
    for (int64_t i = 0; i < n; i++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
        int64_t nel = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        if (t->n_dims == 2 && t->ne[0] % sift_type_block_size(qtype) == 0) {
            uint64_t bytes = sift__type_row_bytes(qtype, t->ne[0]) * (uint64_t)(nel / t->ne[0]);
            owned[i] = malloc(bytes);
            float *row = malloc((size_t)nel * sizeof *row);
            memcpy(row, t->data, (size_t)nel * sizeof *row);
            assert_int_equal(sift__quantize_row(qtype, row, owned[i], nel), SIFT_OK);
            free(row);
            assert_int_equal(sift__gguf_writer_add_tensor(w, t->name, qtype, 2, t->ne, owned[i], bytes, &e), SIFT_OK);
            n_quant++;
        } else {
            assert_int_equal(sift__gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size, &e),
                             SIFT_OK);
        }
    }
    assert_int_equal(n_quant, 2 + 5 * 6); /* token_embd, output, and per layer q k v o gate up */
    char path[] = "/tmp/sift-test-quant-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(sift__gguf_writer_write_file(w, path, &e), SIFT_OK);
    sift__gguf_writer_free(w);
    sift_gguf *q = sift_gguf_open(path, &e);
    if (!q) fail_msg("%s", e.msg);
    assert_int_equal(sift_gguf_n_kv(q), sift_gguf_n_kv(g));
    for (int64_t i = 0; i < n; i++) {
        const sift_gguf_tensor *a = sift_gguf_tensor_at(g, i), *b = sift_gguf_tensor_at(q, i);
        assert_string_equal(a->name, b->name);
        assert_int_equal(b->type, owned[i] ? qtype : SIFT_TYPE_F32);
        int64_t nel = a->ne[0] * a->ne[1] * a->ne[2] * a->ne[3];
        float *x = malloc((size_t)nel * sizeof *x), *y = malloc((size_t)nel * sizeof *y);
        memcpy(x, a->data, (size_t)nel * sizeof *x);
        assert_int_equal(sift__dequantize_row(b->type, b->data, y, nel), SIFT_OK);
        double err2 = 0, norm2 = 0;
        for (int64_t k = 0; k < nel; k++) err2 += (x[k] - y[k]) * (double)(x[k] - y[k]), norm2 += x[k] * (double)x[k];
        if (owned[i]) assert_true(sqrt(err2 / norm2) < tol);
        else assert_true(err2 == 0);
        free(x), free(y), free(owned[i]);
    }
    free(owned);
    sift_gguf_close(q);
    sift_gguf_close(g);
    unlink(path);
    close(fd);
}

static void test_quantize_q8_0(void **state)
{
    (void)state;
    quantize_model(SIFT_TYPE_Q8_0, 0.01f);
}

static void test_quantize_q4_0(void **state)
{
    (void)state;
    quantize_model(SIFT_TYPE_Q4_0, 0.12f);
}

/* sift_model_chat_template: the GGUF's tokenizer.chat_template and its named variants
 * (tokenizer.chat_template.<name>), as llama_model_chat_template reads them; NULL for a file
 * without one, a name it lacks, or a name too long for a key. */
static void test_model_chat_template(void **state)
{
    (void)state;
    sift_error e = {0};
    sift_gguf *g = sift_gguf_open(shared_path("models/stories260K.gguf"), &e);
    if (!g) fail_msg("%s", e.msg);
    sift__gguf_writer *w = copy_all(g);
    static const char tmpl[] = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}";
    static const char tool[] = "{{ tools | tojson }}";
    assert_int_equal(sift__gguf_writer_set_str(w, "tokenizer.chat_template", tmpl), SIFT_OK);
    assert_int_equal(sift__gguf_writer_set_str(w, "tokenizer.chat_template.tool_use", tool), SIFT_OK);
    char path[] = "/tmp/sift-test-tmpl-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(sift__gguf_writer_write_file(w, path, &e), SIFT_OK);
    sift__gguf_writer_free(w);
    sift_model *m = sift_model_load(path, &e);
    if (!m) fail_msg("%s", e.msg);
    assert_string_equal(sift_model_chat_template(m, NULL), tmpl);
    assert_string_equal(sift_model_chat_template(m, ""), tmpl);
    assert_string_equal(sift_model_chat_template(m, "tool_use"), tool);
    assert_null(sift_model_chat_template(m, "rag"));
    char long_name[300];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    assert_null(sift_model_chat_template(m, long_name));
    assert_null(sift_model_chat_template(NULL, NULL));
    sift_model_free(m);
    sift_model *plain = sift_model_load(shared_path("models/stories260K.gguf"), &e);
    if (!plain) fail_msg("%s", e.msg);
    assert_null(sift_model_chat_template(plain, NULL));
    sift_model_free(plain);
    sift_gguf_close(g);
    unlink(path);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rewrite_identical),
        cmocka_unit_test(test_all_types_round_trip),
        cmocka_unit_test(test_quantize_q8_0),
        cmocka_unit_test(test_quantize_q4_0),
        cmocka_unit_test(test_model_chat_template),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
