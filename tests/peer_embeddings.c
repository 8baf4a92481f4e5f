/*
 * peer_embeddings.c - sift's embeddings against llama.cpp's own (libllama from the peer
 * build, ../shared/peer/README.md, loaded with dlopen):
 *
 * For each model and each pooling type (none, mean, cls, last), the same token ids (a
 * prompt tokenized by sift) are decoded once by llama.cpp, with llama_context_params
 * embeddings = true and that pooling_type (KV cache F32, flash attention off, one thread),
 * and once by sift with sift_set_embeddings. Compared: every token's vector
 * (llama_get_embeddings_ith vs sift_get_embeddings_ith) for none, the sequence's vector
 * (llama_get_embeddings_seq vs sift_get_embeddings_seq) for the others; also after L2
 * normalization, what llama-server's /v1/embeddings returns. Prints max |delta| and the
 * smallest cosine per case; fails above the tolerance of the model's logits test
 * (1e-4 for stories260K in F32, 1e-2 for llama-2-tiny-random in F16).
 *
 * The struct layouts are those of this one libllama build (llama.cpp 0ad4a86, as
 * ../shared/peer/model_ref_api.h derives them from its disassembly); the program checks
 * the defaults it relies on before use.
 *
 * usage: peer_embeddings LIBDIR MODELS_DIR
 * Registered as CTest `embeddings_peer` only when the peer library exists at configure
 * time (the suite must pass without it).
 */
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

struct llama_model_params { /* 80 bytes */
    void *devices;
    const void *tensor_buft_overrides;
    int32_t n_gpu_layers, split_mode, load_mode, lazy_mode, main_gpu;
    const float *tensor_split;
    void *progress_callback, *progress_callback_user_data;
    const void *kv_overrides;
    bool vocab_only, check_tensors, use_extra_bufts, no_host, no_alloc, load_mtp;
};
struct llama_context_params { /* 160 bytes */
    uint32_t n_ctx, n_batch, n_ubatch, n_seq_max, n_rs_seq, n_outputs_max, n_outputs_max_per_seq;
    int32_t n_threads, n_threads_batch, ctx_type, rope_scaling_type, pooling_type, attention_type, flash_attn_type;
    float rope_freq_base, rope_freq_scale, yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow;
    uint32_t yarn_orig_ctx;
    float defrag_thold;
    void *cb_eval, *cb_eval_user_data;
    int32_t type_k, type_v;
    void *abort_callback, *abort_callback_data;
    bool embeddings, offload_kqv, no_perf, op_offload, swa_full, kv_unified;
    void *samplers;
    size_t n_samplers;
    void *ctx_other;
};
struct llama_batch {
    int32_t n_tokens;
    int32_t *token;
    float *embd;
    int32_t *pos;
    int32_t *n_seq_id;
    int32_t **seq_id;
    int8_t *logits;
};
_Static_assert(sizeof(struct llama_model_params) == 80, "llama_model_params size");
_Static_assert(sizeof(struct llama_context_params) == 160, "llama_context_params size");
_Static_assert(offsetof(struct llama_context_params, pooling_type) == 44, "pooling_type offset");
_Static_assert(offsetof(struct llama_context_params, type_k) == 104, "type_k offset");
_Static_assert(offsetof(struct llama_context_params, embeddings) == 128, "embeddings offset");
_Static_assert(sizeof(struct llama_batch) == 56, "llama_batch size");

static struct {
    void (*backend_init)(void);
    void (*load_all_from_path)(const char *);
    void (*log_set)(void (*)(int, const char *, void *), void *);
    struct llama_model_params (*model_default_params)(void);
    struct llama_context_params (*context_default_params)(void);
    void *(*model_load)(const char *, struct llama_model_params);
    void (*model_free)(void *);
    void *(*init_from_model)(void *, struct llama_context_params);
    void (*free_ctx)(void *);
    struct llama_batch (*batch_init)(int32_t, int32_t, int32_t);
    void (*batch_free)(struct llama_batch);
    int32_t (*decode)(void *, struct llama_batch);
    float *(*get_embeddings_ith)(void *, int32_t);
    float *(*get_embeddings_seq)(void *, int32_t);
    int32_t (*model_n_embd)(const void *);
} L;

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "peer_embeddings: %s not found: %s\n", name, dlerror());
        exit(1);
    }
    return p;
}

static void quiet(int level, const char *text, void *ud)
{
    (void)ud;
    if (level >= 4) fputs(text, stderr); /* GGML_LOG_LEVEL_ERROR */
}

static void l2(float *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)v[i] * v[i];
    const double k = s > 0 ? 1.0 / sqrt(s) : 0;
    for (int i = 0; i < n; i++) v[i] = (float)(v[i] * k);
}

/* max |a - b| and the cosine; also of the L2-normalized vectors */
static void compare(const float *a, const float *b, int n, double *maxd, double *maxd_norm, double *cosmin)
{
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    double dot = 0, na = 0, nb = 0;
    for (int i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - b[i]);
        if (d > *maxd) *maxd = d;
        dot += (double)a[i] * b[i];
        na += (double)a[i] * a[i];
        nb += (double)b[i] * b[i];
        x[i] = a[i];
        y[i] = b[i];
    }
    l2(x, n);
    l2(y, n);
    for (int i = 0; i < n; i++) {
        const double d = fabs((double)x[i] - y[i]);
        if (d > *maxd_norm) *maxd_norm = d;
    }
    const double c = dot / sqrt(na * nb);
    if (c < *cosmin) *cosmin = c;
    free(x);
    free(y);
}

static int run_model(const char *models, const char *stem, double tol)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s.gguf", models, stem);
    sift_error err = {0};
    sift_model *sm = sift_model_load(path, &err);
    if (!sm) {
        fprintf(stderr, "peer_embeddings: sift cannot load %s: %s\n", path, err.msg);
        return 1;
    }
    void *lm = L.model_load(path, L.model_default_params());
    if (!lm) {
        fprintf(stderr, "peer_embeddings: llama.cpp cannot load %s\n", path);
        return 1;
    }
    const int E = L.model_n_embd(lm);
    const char *text = "Once upon a time, there was a little girl named Lily. She loved to play outside.";
    sift_token toks[128];
    const int32_t n = sift_tokenize(sift_model_vocab(sm), text, strlen(text), toks, 128, true, false);
    int fails = 0;
    static const char *const names[4] = {"none", "mean", "cls", "last"};
    for (int pool = 0; pool < 4; pool++) {
        struct llama_context_params cp = L.context_default_params();
        if (cp.pooling_type != -1 || cp.embeddings || cp.n_seq_max != 1) {
            fprintf(stderr, "peer_embeddings: unexpected llama_context_default_params (layout?)\n");
            return 1;
        }
        cp.n_ctx = cp.n_batch = cp.n_ubatch = 256;
        cp.n_threads = cp.n_threads_batch = 1;
        cp.flash_attn_type = 0;
        cp.type_k = cp.type_v = 0; /* F32 */
        cp.embeddings = true;
        cp.pooling_type = pool;
        void *lc = L.init_from_model(lm, cp);
        if (!lc) {
            fprintf(stderr, "peer_embeddings: llama_init_from_model failed (pooling %s)\n", names[pool]);
            return 1;
        }
        struct llama_batch lb = L.batch_init(256, 0, 1);
        lb.n_tokens = n;
        for (int i = 0; i < n; i++) {
            lb.token[i] = toks[i];
            lb.pos[i] = i;
            lb.n_seq_id[i] = 1;
            lb.seq_id[i][0] = 0;
            lb.logits[i] = 1;
        }
        if (L.decode(lc, lb) != 0) {
            fprintf(stderr, "peer_embeddings: llama_decode failed\n");
            return 1;
        }

        sift_context_params sp = sift_context_default_params();
        sp.n_ctx = 256;
        sp.n_batch = 256;
        sp.n_threads = 1;
        sift_context *sc = sift_context_new(sm, sp, &err);
        sift_batch sb;
        if (!sc || sift_batch_init(&sb, 256, 1) != SIFT_OK ||
            sift_set_embeddings(sc, true, (sift_pooling_type)pool) != SIFT_OK) {
            fprintf(stderr, "peer_embeddings: sift context: %s\n", err.msg);
            return 1;
        }
        const sift_seq_id s0 = 0;
        for (int i = 0; i < n; i++) sift_batch_add(&sb, toks[i], i, &s0, 1, true);
        if (sift_decode(sc, &sb, &err) != SIFT_OK) {
            fprintf(stderr, "peer_embeddings: sift_decode: %s\n", err.msg);
            return 1;
        }
        double maxd = 0, maxdn = 0, cosmin = 1;
        int rows = 0;
        if (pool == 0) {
            for (int i = 0; i < n; i++) {
                const float *a = L.get_embeddings_ith(lc, i), *b = sift_get_embeddings_ith(sc, i);
                if (!a || !b) {
                    fprintf(stderr, "peer_embeddings: no embedding for token %d (llama %p, sift %p)\n", i, (void *)a,
                            (void *)b);
                    return 1;
                }
                compare(a, b, E, &maxd, &maxdn, &cosmin);
                rows++;
            }
        } else {
            const float *a = L.get_embeddings_seq(lc, 0), *b = sift_get_embeddings_seq(sc, 0);
            if (!a || !b) {
                fprintf(stderr, "peer_embeddings: no pooled embedding (llama %p, sift %p)\n", (void *)a, (void *)b);
                return 1;
            }
            compare(a, b, E, &maxd, &maxdn, &cosmin);
            rows = 1;
        }
        const bool ok = maxd <= tol && maxdn <= tol;
        printf("%-20s pooling %-4s  %2d vector(s) of %d: max |delta| %.3g, normalized %.3g, min cosine %.9f  %s\n", stem,
               names[pool], rows, E, maxd, maxdn, cosmin, ok ? "ok" : "FAIL");
        fails += !ok;
        sift_batch_free(&sb);
        sift_context_free(sc);
        L.batch_free(lb);
        L.free_ctx(lc);
    }
    L.model_free(lm);
    sift_model_free(sm);
    return fails;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: peer_embeddings LIBDIR MODELS_DIR\n");
        return 2;
    }
    char p[4096];
    static const char *const libs[3] = {"libggml-base.so", "libggml.v0.5.0.so", "libllama.v0.5.0.so"};
    void *lib = NULL, *ggml = NULL;
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", argv[1], libs[i]);
        lib = dlopen(p, RTLD_NOW | RTLD_GLOBAL);
        if (!lib) {
            fprintf(stderr, "peer_embeddings: cannot load %s: %s\n", p, dlerror());
            return 1;
        }
        if (i == 1) ggml = lib;
    }
    L.load_all_from_path = sym(ggml, "ggml_backend_load_all_from_path");
    L.backend_init = sym(lib, "llama_backend_init");
    L.log_set = sym(lib, "llama_log_set");
    L.model_default_params = sym(lib, "llama_model_default_params");
    L.context_default_params = sym(lib, "llama_context_default_params");
    L.model_load = sym(lib, "llama_model_load_from_file");
    L.model_free = sym(lib, "llama_model_free");
    L.init_from_model = sym(lib, "llama_init_from_model");
    L.free_ctx = sym(lib, "llama_free");
    L.batch_init = sym(lib, "llama_batch_init");
    L.batch_free = sym(lib, "llama_batch_free");
    L.decode = sym(lib, "llama_decode");
    L.get_embeddings_ith = sym(lib, "llama_get_embeddings_ith");
    L.get_embeddings_seq = sym(lib, "llama_get_embeddings_seq");
    L.model_n_embd = sym(lib, "llama_model_n_embd");
    L.log_set(quiet, NULL);
    L.backend_init();
    L.load_all_from_path(argv[1]);
    int fails = run_model(argv[2], "stories260K", 1e-4);
    fails += run_model(argv[2], "llama-2-tiny-random", 1e-2);
    printf("%s\n", fails ? "FAIL" : "all within tolerance of llama.cpp");
    return fails ? 1 : 0;
}
