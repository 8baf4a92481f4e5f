/*
 * seeds_gguf.c - writes the small seed files of fuzz/corpus/gguf/ from the shared models.
 *
 * usage: seeds_gguf SHARED_DIR OUT_DIR
 *
 * The shared models are 0.3-4 MB, too large to fuzz efficiently or to commit, so each seed
 * keeps a model's structure in a few KB: every metadata pair with arrays cut to 12
 * elements, and tensors cut to a few rows. stories260K also gives one small tensor of each
 * type sift computes with (quantized from its real weights) so the dequantizers run on
 * fuzzed blocks; one seed has nested arrays and every value type; two are headers of the
 * refused files (v1, and the Q8_0 file with 172-wide rows).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/ggml_types.h"
#include "gguf/gguf.h"
#include "sift.h"

#define ARR_KEEP 12

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "seeds_gguf: %s: %s\n", what, msg);
    exit(1);
}

/* Copy pairs of g, arrays cut to ARR_KEEP elements. */
static void copy_meta(sift__gguf_writer *w, const sift_gguf *g)
{
    for (int64_t i = 0; i < sift_gguf_n_kv(g); i++) {
        const char *key = sift_gguf_key(g, i);
        const sift_gguf_value *v = sift_gguf_kv_value(g, i);
        int et = sift_gguf_array_type(v);
        uint64_t n = sift_gguf_array_n(v);
        if (et < 0 || n <= ARR_KEEP || et == SIFT_GGUF_ARRAY) {
            sift__gguf_writer_set_value(w, key, v);
        } else if (et == SIFT_GGUF_STRING) {
            const char *s[ARR_KEEP];
            for (int k = 0; k < ARR_KEEP; k++) s[k] = sift_gguf_array_str(v, (uint64_t)k, NULL);
            sift__gguf_writer_set_arr_str(w, key, s, ARR_KEEP);
        } else {
            sift__gguf_writer_set_arr(w, key, (sift_gguf_type)et, sift_gguf_array_data(v), ARR_KEEP);
        }
    }
}

static void write_out(sift__gguf_writer *w, const char *dir, const char *name)
{
    char path[1024];
    sift_error e = {0};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (sift__gguf_writer_write_file(w, path, &e)) die(path, e.msg);
    sift_gguf *check = sift_gguf_open(path, &e);
    if (!check) die(path, e.msg);
    sift_gguf_close(check);
    printf("%s\n", path);
}

static sift_gguf *open_shared(const char *shared, const char *rel)
{
    char path[1024];
    sift_error e = {0};
    snprintf(path, sizeof path, "%s/%s", shared, rel);
    sift_gguf *g = sift_gguf_open(path, &e);
    if (!g) die(path, e.msg);
    return g;
}

static void model_seed(const char *shared, const char *out)
{
    sift_gguf *g = open_shared(shared, "models/stories260K.gguf");
    sift__gguf_writer *w = sift__gguf_writer_new();
    copy_meta(w, g);
    sift_error e = {0};
    /* the first 2 rows of a few real tensors */
    const char *names[] = {"token_embd.weight", "output_norm.weight", "blk.0.ffn_down.weight"};
    for (int k = 0; k < 3; k++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_by_name(g, names[k]);
        int64_t ne[2] = {t->ne[0], t->n_dims > 1 ? 2 : 1};
        if (sift__gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, t->data, t->nb[1] * (uint64_t)ne[1], &e))
            die(names[k], e.msg);
    }
    /* one small tensor of each computable type, from the real embedding values */
    static const int types[] = {SIFT_TYPE_F16,  SIFT_TYPE_BF16, SIFT_TYPE_Q4_0, SIFT_TYPE_Q4_1,
                                SIFT_TYPE_Q5_0, SIFT_TYPE_Q5_1, SIFT_TYPE_Q8_0, SIFT_TYPE_Q4_K,
                                SIFT_TYPE_Q5_K, SIFT_TYPE_Q6_K};
    static float x[256];
    static uint8_t q[sizeof types / sizeof types[0]][1024];
    memcpy(x, sift_gguf_tensor_by_name(g, "token_embd.weight")->data, sizeof x);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        int64_t n = sift_type_block_size(types[k]) == 256 ? 256 : 64;
        char name[32];
        snprintf(name, sizeof name, "t.%s", sift_type_name(types[k]));
        sift__quantize_row(types[k], x, q[k], n);
        if (sift__gguf_writer_add_tensor(w, name, types[k], 1, &n, q[k], sift__type_row_bytes(types[k], n), &e))
            die(name, e.msg);
    }
    write_out(w, out, "stories260K-mini.gguf");
    sift__gguf_writer_free(w);
    sift_gguf_close(g);
}

static void vocab_seed(const char *shared, const char *out, const char *rel, const char *name)
{
    sift_gguf *g = open_shared(shared, rel);
    sift__gguf_writer *w = sift__gguf_writer_new();
    copy_meta(w, g);
    write_out(w, out, name);
    sift__gguf_writer_free(w);
    sift_gguf_close(g);
}

/* every value type and nested arrays, with alignment 64 */
static void types_seed(const char *out)
{
    static const uint8_t nested[] = {
        'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
        1, 0, 0, 0, 0, 0, 0, 0, 'n', 9, 0, 0, 0, 9, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 42,
        9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 'z'};
    sift_error e = {0};
    sift_gguf *src = sift_gguf_open_buffer(nested, sizeof nested, &e);
    if (!src) die("nested", e.msg);
    sift__gguf_writer *w = sift__gguf_writer_new();
    sift__gguf_writer_set_u32(w, "general.alignment", 64);
    sift__gguf_writer_set_value(w, "nested", sift_gguf_get(src, "n"));
    uint8_t u8 = 1;
    int8_t i8 = -1;
    uint16_t u16 = 2;
    int16_t i16 = -2;
    int32_t i32 = -3;
    uint64_t u64 = 4;
    int64_t i64 = -4;
    double f64 = 0.5;
    bool b = true;
    sift__gguf_writer_set(w, "u8", SIFT_GGUF_UINT8, &u8);
    sift__gguf_writer_set(w, "i8", SIFT_GGUF_INT8, &i8);
    sift__gguf_writer_set(w, "u16", SIFT_GGUF_UINT16, &u16);
    sift__gguf_writer_set(w, "i16", SIFT_GGUF_INT16, &i16);
    sift__gguf_writer_set_u32(w, "u32", 3);
    sift__gguf_writer_set(w, "i32", SIFT_GGUF_INT32, &i32);
    sift__gguf_writer_set_f32(w, "f32", 1.5f);
    sift__gguf_writer_set(w, "bool", SIFT_GGUF_BOOL, &b);
    sift__gguf_writer_set_str(w, "str", "text");
    sift__gguf_writer_set(w, "u64", SIFT_GGUF_UINT64, &u64);
    sift__gguf_writer_set(w, "i64", SIFT_GGUF_INT64, &i64);
    sift__gguf_writer_set(w, "f64", SIFT_GGUF_FLOAT64, &f64);
    const int16_t arr[3] = {1, -2, 3};
    sift__gguf_writer_set_arr(w, "arr.i16", SIFT_GGUF_INT16, arr, 3);
    float f[64] = {0};
    int64_t ne[2] = {32, 2};
    if (sift__gguf_writer_add_tensor(w, "f", SIFT_TYPE_F32, 2, ne, f, sizeof f, &e)) die("f", e.msg);
    int64_t ne0 = 0;
    if (sift__gguf_writer_add_tensor(w, "empty", SIFT_TYPE_F16, 1, &ne0, NULL, 0, &e)) die("empty", e.msg);
    write_out(w, out, "all-types.gguf");
    sift__gguf_writer_free(w);
    sift_gguf_close(src);
}

/* the first bytes of a file the reader refuses */
static void head_seed(const char *shared, const char *out, const char *rel, size_t n, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", shared, rel);
    FILE *f = fopen(path, "rb");
    if (!f) die(path, "cannot open");
    uint8_t *buf = malloc(n);
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/%s", out, name);
    f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, got, f) != got || fclose(f)) die(path, "cannot write");
    free(buf);
    printf("%s\n", path);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: seeds_gguf SHARED_DIR OUT_DIR\n");
        return 2;
    }
    model_seed(argv[1], argv[2]);
    vocab_seed(argv[1], argv[2], "models/llama-2-tiny-random.gguf", "llama2-tiny-meta.gguf");
    vocab_seed(argv[1], argv[2], "models/vocab/ggml-vocab-gpt-2.gguf", "vocab-gpt2-mini.gguf");
    vocab_seed(argv[1], argv[2], "models/vocab/ggml-vocab-bert-bge.gguf", "vocab-bert-mini.gguf");
    vocab_seed(argv[1], argv[2], "models/vocab/ggml-vocab-phi-3.gguf", "vocab-phi3-mini.gguf");
    types_seed(argv[2]);
    head_seed(argv[1], argv[2], "models/stories260K-gguf-v1.gguf", 1024, "v1-head.bin");
    head_seed(argv[1], argv[2], "models/tinyllamas-stories-260k-q8_0.gguf", 12288, "q8_0-172-head.bin");
    return 0;
}
