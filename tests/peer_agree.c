/*
 * peer_agree.c - sift's files and sift's logits next to llama.cpp's, in one process:
 * llama.cpp is the peer's prebuilt libllama (../shared/peer, linked, declarations from its
 * model_ref_api.h), sift is libsift.
 *
 *   quant  a F32 model (a small random llama written here, or --source FILE) is quantized
 *          by sift_model_quantize to a llama-quantize mixture (Q4_K_M unless --mix). llama.cpp
 *          must load sift's file; both engines then decode the same prompt with logits at
 *          every position, and the share of positions where the two argmaxes agree (top-1
 *          agreement) must reach --min-agree (default 0.9). Quantized logits differ a
 *          little between engines (the dot products round in another order), so near-ties
 *          may flip: the figure, not bit equality, is the check.
 *   cvec   (F32 model) a control vector written with sift's GGUF writer
 *          (direction.<layer>), loaded by sift_control_vector_load, applied by sift and by
 *          llama_set_adapter_cvec with a layer range: the logits must agree to 1e-4, as
 *          without a vector, and the vector must change them.
 *
 * usage: peer_agree [--source F32.gguf] [--mix q4_k_m|q4_k_s|q5_k_m|q5_k_s] [--min-agree X]
 *                   [--n-prompt N] [--threads N] [--no-cvec] [--keep]
 * Built only when the peer's libllama exists at configure time (tests/model.cmake).
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "model_ref_api.h"
#include "peer_backend.h"

/* not in model_ref_api.h: llama.h's llama_set_adapter_cvec (checked against this .so's
 * llama_context::set_adapter_cvec(float const*, unsigned long, int, int, int)) */
int32_t llama_set_adapter_cvec(struct llama_context *ctx, const float *data, size_t len, int32_t n_embd,
                               int32_t il_start, int32_t il_end);

#include "gguf/gguf.h"
#include "mkmodel.h"
#include "refdata.h"
#include "sift.h"

static int failures;

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static void quiet_log(int level, const char *text, void *user)
{
    (void)user;
    if (level == 4) fputs(text, stderr); /* GGML_LOG_LEVEL_ERROR */
}

/* llama.cpp's logits of toks[0..n) at every position, [n][n_vocab]; NULL on failure. A
 * control vector (data, len) is applied over [il0, il1] when data is not NULL. */
static float *llama_logits(const char *path, const int32_t *toks, int n, int n_threads, const float *cv, size_t cv_len,
                           int il0, int il1, int *n_vocab)
{
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model) {
        printf("FAIL llama.cpp cannot load %s\n", path);
        return NULL;
    }
    const int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = (uint32_t)(n < 64 ? 64 : n);
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = n_threads;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    float *out = NULL;
    if (!ctx) {
        printf("FAIL llama.cpp cannot make a context for %s\n", path);
        llama_model_free(model);
        return NULL;
    }
    if (cv && llama_set_adapter_cvec(ctx, cv, cv_len, llama_model_n_embd(model), il0, il1) != 0) {
        printf("FAIL llama_set_adapter_cvec refused the vector\n");
        goto done;
    }
    struct llama_batch b = llama_batch_init(n, 0, 1);
    b.n_tokens = n;
    for (int i = 0; i < n; i++) {
        b.token[i] = toks[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    if (llama_decode(ctx, b) == 0) {
        out = malloc(sizeof(float) * (size_t)n * (size_t)nv);
        for (int i = 0; i < n; i++) memcpy(out + (size_t)i * nv, llama_get_logits_ith(ctx, i), sizeof(float) * (size_t)nv);
        *n_vocab = nv;
    } else {
        printf("FAIL llama_decode failed on %s\n", path);
    }
    llama_batch_free(b);
done:
    llama_free(ctx);
    llama_model_free(model);
    return out;
}

/* sift's logits of toks[0..n), [n][n_vocab]; the control vector as above. */
static float *sift_logits(const char *path, const int32_t *toks, int n, int n_threads, const float *cv, size_t cv_len,
                          int n_embd_cv, int il0, int il1, int *n_vocab)
{
    sift_error err = {0};
    sift_model *m = sift_model_load(path, &err);
    if (!m) {
        printf("FAIL sift cannot load %s: %s\n", path, err.msg);
        return NULL;
    }
    const int nv = sift_model_n_vocab(m);
    sift_context_params cp = sift_context_default_params();
    cp.n_ctx = cp.n_batch = n < 64 ? 64 : n;
    cp.n_threads = cp.n_threads_batch = n_threads;
    sift_context *ctx = sift_context_new(m, cp, &err);
    float *out = NULL;
    if (ctx && cv && sift_context_set_control_vector(ctx, cv, cv_len, n_embd_cv, il0, il1, &err) != SIFT_OK) {
        printf("FAIL sift_context_set_control_vector: %s\n", err.msg);
    } else if (ctx) {
        sift_batch b;
        sift_batch_init(&b, n, 1);
        const int s0 = 0;
        for (int i = 0; i < n; i++) sift_batch_add(&b, toks[i], i, &s0, 1, true);
        if (sift_decode(ctx, &b, &err) == SIFT_OK) {
            out = malloc(sizeof(float) * (size_t)n * (size_t)nv);
            for (int i = 0; i < n; i++) memcpy(out + (size_t)i * nv, sift_get_logits_ith(ctx, i), sizeof(float) * (size_t)nv);
            *n_vocab = nv;
        } else {
            printf("FAIL sift_decode: %s\n", err.msg);
        }
        sift_batch_free(&b);
    } else {
        printf("FAIL sift_context_new: %s\n", err.msg);
    }
    sift_context_free(ctx);
    sift_model_free(m);
    return out;
}

static double max_delta(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

static void check_quant(const char *src, const char *dir, const char *mix_name, sift_quantize_mix mix,
                        sift_tensor_type base, const int32_t *toks, int n, int n_threads, double min_agree)
{
    char out[1200];
    snprintf(out, sizeof out, "%s/%s.gguf", dir, mix_name);
    sift_quantize_params qp = sift_quantize_default_params();
    qp.type = base;
    qp.mix = mix;
    qp.n_threads = n_threads;
    sift_error err = {0};
    if (sift_model_quantize(src, out, &qp, NULL, &err) != SIFT_OK) {
        printf("FAIL quantize %s: %s\n", mix_name, err.msg);
        failures++;
        return;
    }
    int nv_l = 0, nv_s = 0;
    float *L = llama_logits(out, toks, n, n_threads, NULL, 0, 0, 0, &nv_l);
    float *S = sift_logits(out, toks, n, n_threads, NULL, 0, 0, 0, 0, &nv_s);
    if (!L || !S || nv_l != nv_s) {
        failures++;
    } else {
        int same = 0, ties = 0;
        for (int i = 0; i < n; i++) {
            const float *l = L + (size_t)i * nv_l, *s = S + (size_t)i * nv_l;
            const int a = argmax(l, nv_l), b = argmax(s, nv_l);
            same += a == b;
            /* a disagreement where llama.cpp's own top two are within 1e-2 is a near-tie */
            ties += a != b && fabsf(l[a] - l[b]) < 1e-2f;
        }
        const double agree = (double)same / n;
        const bool ok = agree >= min_agree;
        printf("%s quant %-6s llama.cpp loads sift's file; top-1 agreement %d/%d = %.1f%% (%d of the rest near-ties "
               "< 1e-2), logits max|delta| %.3g (min %.0f%%)\n",
               ok ? "ok  " : "FAIL", mix_name, same, n, 100 * agree, ties, max_delta(L, S, (size_t)n * nv_l),
               100 * min_agree);
        failures += !ok;
    }
    free(L);
    free(S);
}

/* Write a control vector file with a direction for each layer 1..n_layer-1, and check both
 * engines agree with it (loaded twice, scaled 0.75 and 0.5) applied over [1, n_layer - 2]. */
static void check_cvec(const char *src, const char *dir, const int32_t *toks, int n, int n_threads)
{
    sift_error err = {0};
    sift_model *m = sift_model_load(src, &err);
    if (!m) {
        printf("FAIL cvec: %s\n", err.msg);
        failures++;
        return;
    }
    sift_model_info mi;
    sift_model_get_info(m, &mi);
    const int E = mi.n_embd, NL = mi.n_layer;
    sift_model_free(m);
    char path[1200];
    snprintf(path, sizeof path, "%s/cvec.gguf", dir);
    sift__gguf_writer *w = sift__gguf_writer_new();
    sift__gguf_writer_set_str(w, "general.architecture", "controlvector");
    sift__gguf_writer_set_str(w, "controlvector.model_hint", "llama");
    sift__gguf_writer_set_u32(w, "controlvector.layer_count", (uint32_t)(NL - 1));
    float *dirs = malloc(sizeof(float) * (size_t)E * (size_t)NL); /* borrowed by the writer until the write */
    uint64_t st = 77;
    for (int il = 1; il < NL; il++) {
        float *dirv = dirs + (size_t)il * E;
        for (int i = 0; i < E; i++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            dirv[i] = (float)((double)(st >> 40) / (double)(1 << 24) - 0.5) * 0.8f;
        }
        char name[64];
        snprintf(name, sizeof name, "direction.%d", il);
        const int64_t ne[4] = {E, 1, 1, 1};
        if (sift__gguf_writer_add_tensor(w, name, SIFT_TYPE_F32, 1, ne, dirv, sizeof(float) * (size_t)E, &err) != SIFT_OK)
            break;
    }
    if (err.status || sift__gguf_writer_write_file(w, path, &err) != SIFT_OK) {
        printf("FAIL cvec: cannot write %s: %s\n", path, err.msg);
        sift__gguf_writer_free(w);
        free(dirs);
        failures++;
        return;
    }
    sift__gguf_writer_free(w);
    free(dirs);

    sift_control_vector *cv = NULL;
    const char *paths[2] = {path, path};
    const float scales[2] = {0.75f, 0.5f}; /* the same file twice: the sum, 1.25 x */
    if (sift_control_vector_load(paths, scales, 2, &cv, &err) != SIFT_OK) {
        printf("FAIL cvec: sift_control_vector_load: %s\n", err.msg);
        failures++;
        return;
    }
    const float *data = sift_control_vector_data(cv);
    const size_t len = sift_control_vector_len(cv);
    const int il0 = 1, il1 = NL - 2;
    int nv_l = 0, nv_s = 0, nv_0 = 0;
    float *L = llama_logits(src, toks, n, n_threads, data, len, il0, il1, &nv_l);
    float *S = sift_logits(src, toks, n, n_threads, data, len, sift_control_vector_n_embd(cv), il0, il1, &nv_s);
    float *Z = sift_logits(src, toks, n, n_threads, NULL, 0, 0, 0, 0, &nv_0);
    float *LZ = llama_logits(src, toks, n, n_threads, NULL, 0, 0, 0, &nv_0);
    if (!L || !S || !Z || !LZ || nv_l != nv_s) {
        failures++;
    } else {
        /* the engines' F32 logits differ by rounding; with the vector they must differ no more */
        const double base = max_delta(LZ, Z, (size_t)n * nv_l);
        const double d = max_delta(L, S, (size_t)n * nv_l), moved = max_delta(S, Z, (size_t)n * nv_l);
        const bool ok = d <= fmax(1e-4, 2 * base) && moved > 1e-1;
        printf("%s cvec  %d directions x 1.25 over layers [%d, %d]: logits max|delta| vs llama.cpp %.3g (without the "
               "vector %.3g), moved by the vector %.3g\n",
               ok ? "ok  " : "FAIL", NL - 1, il0, il1, d, base, moved);
        failures += !ok;
    }
    free(L);
    free(S);
    free(Z);
    free(LZ);
    sift_control_vector_free(cv);
}

int main(int argc, char **argv)
{
    const char *source = NULL, *mix_name = "q4_k_m";
    double min_agree = 0.9;
    int n = 128, n_threads = 1;
    bool keep = false, cvec = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--source") && i + 1 < argc) source = argv[++i];
        else if (!strcmp(argv[i], "--mix") && i + 1 < argc) mix_name = argv[++i];
        else if (!strcmp(argv[i], "--min-agree") && i + 1 < argc) min_agree = atof(argv[++i]);
        else if (!strcmp(argv[i], "--n-prompt") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--keep")) keep = true;
        else if (!strcmp(argv[i], "--no-cvec")) cvec = false;
        else {
            fprintf(stderr, "usage: peer_agree [--source F32.gguf] [--mix q4_k_m|q4_k_s|q5_k_m|q5_k_s] [--min-agree X] "
                            "[--n-prompt N] [--threads N] [--no-cvec] [--keep]\n");
            return 2;
        }
    }
    if (n < 1 || n > 4096 || n_threads < 1) return fprintf(stderr, "peer_agree: bad --n-prompt / --threads\n"), 2;
    const struct {
        const char *name;
        sift_quantize_mix mix;
        sift_tensor_type base;
    } mixes[] = {{"q4_k_m", SIFT_QUANT_MIX_Q4_K_M, SIFT_TYPE_Q4_K},
                 {"q4_k_s", SIFT_QUANT_MIX_Q4_K_S, SIFT_TYPE_Q4_K},
                 {"q5_k_m", SIFT_QUANT_MIX_Q5_K_M, SIFT_TYPE_Q5_K},
                 {"q5_k_s", SIFT_QUANT_MIX_Q5_K_S, SIFT_TYPE_Q5_K}};
    int k = -1;
    for (int i = 0; i < 4; i++)
        if (!strcasecmp(mix_name, mixes[i].name)) k = i;
    if (k < 0) return fprintf(stderr, "peer_agree: unknown --mix '%s'\n", mix_name), 2;

    llama_log_set(quiet_log, NULL);
    if (peer_load_cpu_backend(NULL, NULL) != 0) {
        fprintf(stderr, "peer_agree: no CPU backend for libllama\n");
        return 1;
    }
    llama_backend_init();

    char dir[] = "/tmp/sift_peer_agree_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char src[1200];
    if (source) {
        snprintf(src, sizeof src, "%s", source);
    } else {
        /* 256-wide rows (K-quant blocks), 8 layers (use_more_bits picks 0, 3, 6, 7), GQA 4:1 */
        char vocab[1024];
        ref_model_path("stories260K", vocab, sizeof vocab);
        const mk_spec sp = {.arch = "llama", .n_embd = 256, .n_ff = 512, .n_layer = 8, .n_head = 4, .n_head_kv = 1,
                            .out_scale = 4, .seed = 21};
        snprintf(src, sizeof src, "%s/f32.gguf", dir);
        if (mk_write_model(src, vocab, &sp) != 0) return 1;
    }
    /* the prompt: a BOS then pseudo-random ids (a random model has no favourite text) */
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)n);
    {
        sift_error err = {0};
        sift_model *m = sift_model_load(src, &err);
        if (!m) return fprintf(stderr, "peer_agree: %s\n", err.msg), 1;
        const int nv = sift_model_n_vocab(m);
        sift_model_free(m);
        uint64_t st = 12345;
        toks[0] = 1;
        for (int i = 1; i < n; i++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            toks[i] = 3 + (int32_t)((st >> 33) % (uint64_t)(nv - 3));
        }
    }
    check_quant(src, dir, mixes[k].name, mixes[k].mix, mixes[k].base, toks, n, n_threads, min_agree);
    if (cvec) check_cvec(src, dir, toks, n < 64 ? n : 64, n_threads);
    free(toks);
    llama_backend_free();
    if (!keep && !failures) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) return 1;
    } else {
        printf("files kept in %s\n", dir);
    }
    printf("%s\n", failures ? "FAILED" : "sift and llama.cpp agree");
    return failures ? 1 : 0;
}
