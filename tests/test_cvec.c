/*
 * test_cvec.c - control vectors (sift_control_vector_load, sift_context_set_control_vector).
 *
 * 1. Semantics on stories260K (5 layers, n_embd 64): a zero vector and a cleared vector
 *    leave the logits bit for bit; a vector only for a layer outside the range changes
 *    nothing; inside the range it changes the logits; the layout is llama.cpp's (layer 1's
 *    values first), checked by a buffer with only layer 4's slot set and ranges [4, 4] /
 *    [1, 3]. Two files with scales add up: (f, 0.5) + (f, 0.5) == (f, 1).
 * 2. Bad input gives a status and a message naming the problem, never a crash: a missing
 *    or corrupt file, direction.0, a name that is not direction.<n>, an F16 or 2-D tensor,
 *    n_embd that differs between files, a file with no directions, a non-finite scale,
 *    and a vector whose n_embd is not the model's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gguf/gguf.h"
#include "refdata.h"
#include "sift.h"

static char tmpdir[256];
static sift_model *model;
static int E, NL, NV;

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sift_test_cvec_XXXXXX");
    if (!mkdtemp(tmpdir)) return -1;
    char path[1024];
    model = sift_model_load(ref_model_path("stories260K", path, sizeof path), NULL);
    if (!model) return -1;
    sift_model_info mi;
    sift_model_get_info(model, &mi);
    E = mi.n_embd, NL = mi.n_layer, NV = mi.n_vocab;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sift_model_free(model);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The logits of a fixed prompt's last token with the given vector (data NULL: none). */
static void logits(const float *data, size_t len, int l0, int l1, float *out)
{
    sift_context_params cp = sift_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    sift_context *ctx = sift_context_new(model, cp, NULL);
    assert_non_null(ctx);
    if (data) assert_int_equal(sift_context_set_control_vector(ctx, data, len, E, l0, l1, NULL), SIFT_OK);
    const int32_t toks[] = {1, 403, 407, 261, 378, 301, 290, 260};
    sift_batch b;
    sift_batch_init(&b, 8, 1);
    const int s0 = 0;
    for (int i = 0; i < 8; i++) sift_batch_add(&b, toks[i], i, &s0, 1, i == 7);
    assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
    memcpy(out, sift_get_logits_ith(ctx, -1), sizeof(float) * (size_t)NV);
    sift_batch_free(&b);
    sift_context_free(ctx);
}

/* Write a control-vector file: n tensors named names[i], type, shape ne0 x ne1, filled with
 * value * (i + 1). */
static void write_cvec(const char *path, int n, const char *const *names, sift_tensor_type type, int ne0, int ne1,
                       float value)
{
    sift__gguf_writer *w = sift__gguf_writer_new();
    sift__gguf_writer_set_str(w, "general.architecture", "controlvector");
    static float buf[8][4096];
    static uint16_t hbuf[8][4096];
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < ne0 * ne1; j++) buf[i][j] = value * (float)(i + 1), hbuf[i][j] = 0x3c00;
        const int64_t ne[4] = {ne0, ne1, 1, 1};
        const bool f16 = type == SIFT_TYPE_F16;
        assert_int_equal(sift__gguf_writer_add_tensor(w, names[i], type, ne1 > 1 ? 2 : 1, ne, f16 ? (void *)hbuf[i] : buf[i],
                                                      (uint64_t)ne0 * ne1 * (f16 ? 2 : 4), NULL),
                         SIFT_OK);
    }
    assert_int_equal(sift__gguf_writer_write_file(w, path, NULL), SIFT_OK);
    sift__gguf_writer_free(w);
}

static void test_semantics(void **state)
{
    (void)state;
    float *a = malloc(sizeof(float) * NV), *b = malloc(sizeof(float) * NV);
    logits(NULL, 0, 0, 0, a);
    const size_t len = (size_t)(NL - 1) * E;
    float *v = calloc(len, sizeof(float));
    logits(v, len, 1, NL, b);
    assert_memory_equal(a, b, sizeof(float) * NV); /* zero vector: +0 changes nothing */

    /* only layer 4's slot (index 3) */
    for (int j = 0; j < E; j++) v[(size_t)3 * E + j] = 0.5f * (float)((j % 7) - 3);
    logits(v, len, 1, 3, b);
    assert_memory_equal(a, b, sizeof(float) * NV);
    logits(v, len, 4, 4, b);
    double d = 0;
    for (int i = 0; i < NV; i++) d = fmax(d, fabs(a[i] - b[i]));
    assert_true(d > 1e-3);
    /* a shorter buffer (layers 1..3 only) never reaches layer 4 */
    logits(v, (size_t)3 * E, 1, NL, b);
    assert_memory_equal(a, b, sizeof(float) * NV);

    /* cleared */
    sift_context_params cp = sift_context_default_params();
    sift_context *ctx = sift_context_new(model, cp, NULL);
    assert_int_equal(sift_context_set_control_vector(ctx, v, len, E, 1, NL, NULL), SIFT_OK);
    assert_int_equal(sift_context_set_control_vector(ctx, NULL, 0, 0, 0, 0, NULL), SIFT_OK);
    sift_context_free(ctx);

    /* files: (f, 0.5) + (f, 0.5) == (f, 1) */
    char path[512];
    snprintf(path, sizeof path, "%s/ok.gguf", tmpdir);
    const char *names[] = {"direction.1", "direction.3", "direction.2"};
    write_cvec(path, 3, names, SIFT_TYPE_F32, E, 1, 0.25f);
    sift_control_vector *c1 = NULL, *c2 = NULL;
    const char *paths[] = {path, path};
    const float half[] = {0.5f, 0.5f};
    assert_int_equal(sift_control_vector_load(paths, half, 2, &c1, NULL), SIFT_OK);
    assert_int_equal(sift_control_vector_load(paths, NULL, 1, &c2, NULL), SIFT_OK);
    assert_int_equal(sift_control_vector_n_embd(c1), E);
    assert_int_equal(sift_control_vector_len(c1), (size_t)3 * E);
    assert_memory_equal(sift_control_vector_data(c1), sift_control_vector_data(c2), sizeof(float) * 3 * E);
    const float *dd = sift_control_vector_data(c2);
    assert_true(dd[0] == 0.25f && dd[(size_t)2 * E] == 0.5f && dd[E] == 0.75f); /* layer 3 holds the second tensor */
    logits(dd, sift_control_vector_len(c2), 1, NL, b);
    d = 0;
    for (int i = 0; i < NV; i++) d = fmax(d, fabs(a[i] - b[i]));
    assert_true(d > 1e-3);
    sift_control_vector_free(c1);
    sift_control_vector_free(c2);
    free(v), free(a), free(b);
}

static void expect_load_error(const char *path, float scale, int status, const char *needle)
{
    sift_control_vector *cv = (sift_control_vector *)1;
    sift_error err = {0};
    const char *paths[] = {path};
    assert_int_equal(sift_control_vector_load(paths, &scale, 1, &cv, &err), status);
    assert_null(cv);
    if (!strstr(err.msg, needle)) fprintf(stderr, "message '%s' lacks '%s'\n", err.msg, needle);
    assert_non_null(strstr(err.msg, needle));
}

static void test_bad_input(void **state)
{
    (void)state;
    char p[512];
    snprintf(p, sizeof p, "%s/missing.gguf", tmpdir);
    expect_load_error(p, 1, SIFT_E_IO, "missing.gguf");
    snprintf(p, sizeof p, "%s/corrupt.gguf", tmpdir);
    FILE *f = fopen(p, "wb");
    fputs("GGUF\3\0\0\0garbage", f);
    fclose(f);
    expect_load_error(p, 1, SIFT_E_FORMAT, "corrupt.gguf");

    const char *zero[] = {"direction.0"}, *odd[] = {"direction.x1"}, *other[] = {"token_embd.weight"},
               *one[] = {"direction.1"}, *two[] = {"direction.1", "direction.2"}, *huge[] = {"direction.99999999999"};
    snprintf(p, sizeof p, "%s/bad.gguf", tmpdir);
    write_cvec(p, 1, zero, SIFT_TYPE_F32, E, 1, 1);
    expect_load_error(p, 1, SIFT_E_FORMAT, "layer 0");
    write_cvec(p, 1, odd, SIFT_TYPE_F32, E, 1, 1);
    expect_load_error(p, 1, SIFT_E_FORMAT, "direction.<layer>");
    write_cvec(p, 1, other, SIFT_TYPE_F32, E, 1, 1);
    expect_load_error(p, 1, SIFT_E_FORMAT, "token_embd.weight");
    write_cvec(p, 1, huge, SIFT_TYPE_F32, E, 1, 1);
    expect_load_error(p, 1, SIFT_E_FORMAT, "direction.<layer>");
    write_cvec(p, 1, one, SIFT_TYPE_F16, E, 1, 1);
    expect_load_error(p, 1, SIFT_E_FORMAT, "expected f32");
    write_cvec(p, 1, one, SIFT_TYPE_F32, E, 2, 1);
    expect_load_error(p, 1, SIFT_E_FORMAT, "one dimension");
    write_cvec(p, 1, one, SIFT_TYPE_F32, E, 1, INFINITY);
    expect_load_error(p, 1, SIFT_E_FORMAT, "not finite");
    write_cvec(p, 0, NULL, SIFT_TYPE_F32, E, 1, 1);
    expect_load_error(p, 1, SIFT_E_FORMAT, "no direction");
    write_cvec(p, 2, two, SIFT_TYPE_F32, E, 1, 1);
    expect_load_error(p, NAN, SIFT_E_INVAL, "scale");

    /* n_embd differs between two files */
    char q[512];
    snprintf(q, sizeof q, "%s/other.gguf", tmpdir);
    write_cvec(q, 1, one, SIFT_TYPE_F32, E * 2, 1, 1);
    sift_control_vector *cv = NULL;
    sift_error err = {0};
    const char *both[] = {p, q};
    assert_int_equal(sift_control_vector_load(both, NULL, 2, &cv, &err), SIFT_E_FORMAT);
    assert_non_null(strstr(err.msg, "n_embd differs"));
    assert_null(cv);

    /* a vector for another model: n_embd 128 on a 64-wide model */
    assert_int_equal(sift_control_vector_load(both + 1, NULL, 1, &cv, NULL), SIFT_OK);
    sift_context *ctx = sift_context_new(model, sift_context_default_params(), NULL);
    err = (sift_error){0};
    assert_int_equal(sift_context_set_control_vector(ctx, sift_control_vector_data(cv), sift_control_vector_len(cv),
                                                     sift_control_vector_n_embd(cv), 1, NL, &err),
                     SIFT_E_INVAL);
    assert_non_null(strstr(err.msg, "does not match the model's 64"));
    const float nan1[1] = {NAN};
    float *v = calloc((size_t)E, sizeof(float));
    v[3] = nan1[0];
    assert_int_equal(sift_context_set_control_vector(ctx, v, (size_t)E, E, 1, NL, &err), SIFT_E_INVAL);
    assert_int_equal(sift_context_set_control_vector(NULL, v, (size_t)E, E, 1, NL, &err), SIFT_E_INVAL);
    sift_control_vector_free(cv);
    assert_int_equal(sift_control_vector_load(NULL, NULL, 1, &cv, &err), SIFT_E_INVAL);
    assert_null(cv);
    free(v);
    sift_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_semantics),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
