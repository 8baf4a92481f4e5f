/*
 * test_model.c - the runtime against llama.cpp's own outputs (../shared/reference/model):
 *
 *   - prompt logits at every stored position (one batch per prompt, logits everywhere):
 *     max |delta| <= 1e-4 on stories260K (F32) and <= 1e-2 on llama-2-tiny-random (F16);
 *   - 64-token greedy continuations (token by token) identical, step logits within the
 *     same tolerance;
 *   - the seeded sampled continuation (top_k 40 -> top_p 0.95 -> min_p 0.05 -> temp 0.8 ->
 *     dist 42, built with the core's chain spec) identical;
 *   - all prompts of a model decoded together as separate sequences of one batch, then
 *     continued greedily in lockstep (one batch per step): the same ids, and logits
 *     bitwise identical to the one-sequence runs;
 *   - the same logits bit for bit with 1 and 2 threads; the scalar kernels within
 *     tolerance of the SIMD ones, with the same greedy ids;
 *   - the KV cache operations (rm, cp, keep, add) and the batch errors, which must leave
 *     the cache as it was.
 *
 * The measured deltas are printed, so the test log doubles as the report.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/mkmodel.h"
#include "model/model.h"
#include "model/repack.h"
#include "refdata.h"
#include "sift.h"

typedef struct fixture {
    const char *stem;
    double tol; /* the acceptance tolerance on logits */
    ref_model ref;
    sift_model *model;
} fixture;

static fixture fx[2] = {{.stem = "stories260K", .tol = 1e-4}, {.stem = "llama-2-tiny-random", .tol = 1e-2}};

/* under valgrind: two prompts per model (once, lily) and fewer steps */
static int n_steps = REF_N_GEN;

static int setup(void **state)
{
    (void)state;
    if (ref_under_valgrind()) n_steps = 8;
    for (int i = 0; i < 2; i++) {
        char path[1024];
        if (ref_load(fx[i].stem, &fx[i].ref) != 0) {
            fprintf(stderr, "cannot read the reference of %s (SIFT_SHARED=%s)\n", fx[i].stem, ref_shared());
            return -1;
        }
        sift_error err = {0};
        if (ref_under_valgrind()) {
            fx[i].ref.prompts[1] = fx[i].ref.prompts[2];
            fx[i].ref.n_prompts = 2;
        }
        fx[i].model = sift_model_load(ref_model_path(fx[i].stem, path, sizeof path), &err);
        if (!fx[i].model) {
            fprintf(stderr, "load %s: %s\n", path, err.msg);
            return -1;
        }
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++) sift_model_free(fx[i].model);
    return 0;
}

static sift_context *mkctx(const sift_model *m, int n_seq, int n_threads, sift_isa isa)
{
    sift_context_params p = sift_context_default_params();
    p.n_ctx = 512u * (uint32_t)n_seq;
    p.n_batch = 1024;
    p.n_seq_max = (uint32_t)n_seq;
    p.n_threads = n_threads;
    p.isa = isa;
    sift_error err = {0};
    sift_context *ctx = sift_context_new(m, p, &err);
    if (!ctx) fprintf(stderr, "context: %s\n", err.msg);
    assert_non_null(ctx);
    return ctx;
}

/* The prompt as one batch in sequence seq, logits at every position. */
static void decode_prompt(sift_context *ctx, const ref_prompt *rp, int seq)
{
    sift_batch b;
    assert_int_equal(sift_batch_init(&b, rp->n_tokens, 1), SIFT_OK);
    for (int i = 0; i < rp->n_tokens; i++) assert_int_equal(sift_batch_add(&b, rp->tokens[i], i, &seq, 1, true), SIFT_OK);
    sift_error err = {0};
    int rc = sift_decode(ctx, &b, &err);
    if (rc) fprintf(stderr, "decode: %s\n", err.msg);
    assert_int_equal(rc, SIFT_OK);
    sift_batch_free(&b);
}

static void decode_one(sift_context *ctx, sift_token tok, int pos, int seq)
{
    sift_batch b;
    assert_int_equal(sift_batch_init(&b, 1, 1), SIFT_OK);
    sift_batch_add(&b, tok, pos, &seq, 1, true);
    assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
    sift_batch_free(&b);
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static double max_abs_diff(const float *a, const float *b, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; /* NaN propagates */
    }
    return m;
}

/* ---- prompt logits ------------------------------------------------------------------------ */

static void test_prompt_logits(void **state)
{
    (void)state;
    for (int f = 0; f < 2; f++) {
        const ref_model *R = &fx[f].ref;
        double worst = 0;
        for (int p = 0; p < R->n_prompts; p++) {
            const ref_prompt *rp = &R->prompts[p];
            int nv, nr;
            float *ref = ref_slog(R->stem, rp->id, "prompt", &nv, &nr);
            assert_non_null(ref);
            assert_int_equal(nv, R->n_vocab);
            assert_int_equal(nr, rp->logits_last - rp->logits_first + 1);
            sift_context *ctx = mkctx(fx[f].model, 1, 1, SIFT_ISA_AUTO);
            decode_prompt(ctx, rp, 0);
            assert_int_equal(sift_n_outputs(ctx), rp->n_tokens);
            double d = 0;
            for (int pos = rp->logits_first; pos <= rp->logits_last; pos++) {
                const float *lg = sift_get_logits_ith(ctx, pos);
                assert_non_null(lg);
                double dd = max_abs_diff(lg, ref + (size_t)(pos - rp->logits_first) * nv, nv);
                if (dd > d) d = dd;
            }
            printf("  prompt logits  %-20s %-8s %3d tokens  max|delta| = %.3g\n", R->stem, rp->id, rp->n_tokens, d);
            if (d > worst) worst = d;
            sift_context_free(ctx);
            free(ref);
        }
        assert_true(worst <= fx[f].tol);
    }
}

/* ---- greedy, token by token ---------------------------------------------------------------- */

static void test_greedy(void **state)
{
    (void)state;
    for (int f = 0; f < 2; f++) {
        const ref_model *R = &fx[f].ref;
        for (int p = 0; p < R->n_prompts; p++) {
            const ref_prompt *rp = &R->prompts[p];
            int nv, nr;
            float *ref = ref_slog(R->stem, rp->id, "greedy", &nv, &nr);
            assert_non_null(ref);
            sift_context *ctx = mkctx(fx[f].model, 1, 1, SIFT_ISA_AUTO);
            decode_prompt(ctx, rp, 0);
            const float *lg = sift_get_logits_ith(ctx, -1);
            double d = 0;
            int same = 0;
            for (int s = 0; s < n_steps; s++) {
                if (s > 0) {
                    decode_one(ctx, rp->greedy[s - 1], rp->n_tokens + s - 1, 0);
                    lg = sift_get_logits_ith(ctx, -1);
                }
                if (s < nr) {
                    double dd = max_abs_diff(lg, ref + (size_t)s * nv, nv);
                    if (dd > d) d = dd;
                }
                int tok = argmax(lg, nv);
                if (tok == rp->greedy[s]) same++;
                else
                    printf("  greedy %s/%s step %d: sift %d, llama.cpp %d (reference margin %.3g)\n", R->stem, rp->id, s, tok,
                           rp->greedy[s], rp->greedy_margin[s]);
            }
            printf("  greedy         %-20s %-8s %d/%d ids identical, step logits max|delta| = %.3g (%d rows)\n", R->stem,
                   rp->id, same, n_steps, d, nr < n_steps ? nr : n_steps);
            assert_int_equal(same, n_steps);
            assert_true(d <= fx[f].tol);
            sift_context_free(ctx);
            free(ref);
        }
    }
}

/* ---- sampled: top_k 40 -> top_p 0.95 -> min_p 0.05 -> temp 0.8 -> dist 42 ------------------- */

static void test_sampled(void **state)
{
    (void)state;
    const char *spec = "top_k(40);top_p(0.95,1);min_p(0.05,1);temp(0.8);dist(42)";
    for (int f = 0; f < 2; f++) {
        const ref_model *R = &fx[f].ref;
        for (int p = 0; p < R->n_prompts; p++) {
            const ref_prompt *rp = &R->prompts[p];
            sift_chain_env env = {.n_vocab = R->n_vocab, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 42};
            sift_error err = {0};
            sift_chain *chain = sift_chain_from_spec(spec, &env, &err);
            assert_non_null(chain);
            sift_context *ctx = mkctx(fx[f].model, 1, 1, SIFT_ISA_AUTO);
            decode_prompt(ctx, rp, 0);
            int same = 0;
            for (int s = 0; s < n_steps; s++) {
                if (s > 0) decode_one(ctx, rp->sampled[s - 1], rp->n_tokens + s - 1, 0);
                sift_token tok = sift_chain_sample(chain, sift_get_logits_ith(ctx, -1), R->n_vocab);
                if (tok == rp->sampled[s]) same++;
                else
                    printf("  sampled %s/%s step %d: sift %d, llama.cpp %d\n", R->stem, rp->id, s, tok, rp->sampled[s]);
            }
            printf("  sampled        %-20s %-8s %d/%d ids identical\n", R->stem, rp->id, same, n_steps);
            assert_int_equal(same, n_steps);
            sift_context_free(ctx);
            sift_chain_free(chain);
        }
    }
}

/* ---- several sequences in one batch ---------------------------------------------------------- */

/* Greedy of every prompt alone: the logits of each step, [prompt][step][n_vocab]. */
static float *greedy_alone(const fixture *F, int steps, int n_threads, sift_isa isa)
{
    const ref_model *R = &F->ref;
    float *out = malloc((size_t)R->n_prompts * steps * R->n_vocab * sizeof(float));
    for (int p = 0; p < R->n_prompts; p++) {
        const ref_prompt *rp = &R->prompts[p];
        sift_context *ctx = mkctx(F->model, 1, n_threads, isa);
        decode_prompt(ctx, rp, 0);
        for (int s = 0; s < steps; s++) {
            if (s > 0) decode_one(ctx, rp->greedy[s - 1], rp->n_tokens + s - 1, 0);
            memcpy(out + ((size_t)p * steps + s) * R->n_vocab, sift_get_logits_ith(ctx, -1), (size_t)R->n_vocab * 4);
        }
        sift_context_free(ctx);
    }
    return out;
}

static void test_batched_sequences(void **state)
{
    (void)state;
    for (int f = 0; f < 2; f++) {
        const ref_model *R = &fx[f].ref;
        const int NP = R->n_prompts, NS = n_steps < 24 ? n_steps : 24;
        float *alone = greedy_alone(&fx[f], NS, 1, SIFT_ISA_AUTO);
        sift_context *ctx = mkctx(fx[f].model, NP, 1, SIFT_ISA_AUTO);
        /* every prompt in one batch, sequence p; logits only at each prompt's last token */
        int total = 0;
        for (int p = 0; p < NP; p++) total += R->prompts[p].n_tokens;
        sift_batch b;
        assert_int_equal(sift_batch_init(&b, total, 1), SIFT_OK);
        int last_idx[REF_MAX_PROMPTS];
        for (int p = 0; p < NP; p++)
            for (int i = 0; i < R->prompts[p].n_tokens; i++) {
                const bool last = i == R->prompts[p].n_tokens - 1;
                if (last) last_idx[p] = b.n_tokens;
                sift_batch_add(&b, R->prompts[p].tokens[i], i, &p, 1, last);
            }
        assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
        assert_int_equal(sift_n_outputs(ctx), NP);
        int bitwise = 1, same_ids = 1;
        for (int s = 0; s < NS; s++) {
            if (s > 0) {
                /* one batch per step: every sequence's previous greedy token */
                sift_batch_clear(&b);
                for (int p = 0; p < NP; p++) {
                    last_idx[p] = b.n_tokens;
                    sift_batch_add(&b, R->prompts[p].greedy[s - 1], R->prompts[p].n_tokens + s - 1, &p, 1, true);
                }
                assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
            }
            for (int p = 0; p < NP; p++) {
                const float *lg = sift_get_logits_ith(ctx, last_idx[p]);
                assert_non_null(lg);
                if (memcmp(lg, alone + ((size_t)p * NS + s) * R->n_vocab, (size_t)R->n_vocab * 4) != 0) bitwise = 0;
                if (argmax(lg, R->n_vocab) != R->prompts[p].greedy[s]) same_ids = 0;
            }
        }
        printf("  batched        %-20s %d sequences in one batch, %d lockstep steps: ids %s, logits %s\n", R->stem, NP, NS,
               same_ids ? "identical" : "DIFFER", bitwise ? "bitwise identical to one-by-one" : "DIFFER");
        assert_true(same_ids);
        assert_true(bitwise);
        sift_batch_free(&b);
        sift_context_free(ctx);
        free(alone);
    }
}

/* ---- threads and kernels ----------------------------------------------------------------------- */

static void test_threads_bitwise(void **state)
{
    (void)state;
    for (int f = 0; f < 2; f++) {
        const int NS = n_steps < 8 ? n_steps : 8, NP = fx[f].ref.n_prompts, NV = fx[f].ref.n_vocab;
        float *a = greedy_alone(&fx[f], NS, 1, SIFT_ISA_AUTO);
        float *b = greedy_alone(&fx[f], NS, 2, SIFT_ISA_AUTO);
        const int same = memcmp(a, b, (size_t)NP * NS * NV * 4) == 0;
        printf("  threads        %-20s 1 vs 2 threads: %s\n", fx[f].stem, same ? "bitwise identical" : "DIFFER");
        assert_true(same);
        free(a);
        free(b);
    }
}

static void test_scalar_kernels(void **state)
{
    (void)state;
    for (int f = 0; f < 2; f++) {
        const int NS = n_steps < 16 ? n_steps : 16, NP = fx[f].ref.n_prompts, NV = fx[f].ref.n_vocab;
        float *a = greedy_alone(&fx[f], NS, 1, SIFT_ISA_AUTO);
        float *b = greedy_alone(&fx[f], NS, 1, SIFT_ISA_SCALAR);
        double d = max_abs_diff(a, b, NP * NS * NV);
        int ids = 1;
        for (int r = 0; r < NP * NS; r++)
            if (argmax(a + (size_t)r * NV, NV) != argmax(b + (size_t)r * NV, NV)) ids = 0;
        printf("  kernels        %-20s %s vs scalar: max|delta| = %.3g, greedy ids %s\n", fx[f].stem,
               sift_isa_name(sift_isa_best()), d, ids ? "identical" : "DIFFER");
        assert_true(d <= fx[f].tol);
        assert_true(ids);
        free(a);
        free(b);
    }
}

/* The matrices are placed at load (model/weights.c): mapped in place, or copied into
 * huge-page memory (and repacked where that pays). SIFT_MMAP=1 maps all of them, SIFT_COPY=1
 * copies all of them: placement moves bytes, never changes a result, so every load must give
 * the same logits bit for bit as the default one, through the SIMD and the scalar kernels. */
static void test_weights_mmap_same(void **state)
{
    (void)state;
    static const char *const envs[] = {"SIFT_MMAP", "SIFT_COPY"};
    for (int f = 0; f < 2; f++)
        for (int e = 0; e < 2; e++) {
            const int NS = n_steps < 8 ? n_steps : 8, NP = fx[f].ref.n_prompts, NV = fx[f].ref.n_vocab;
            char path[1024];
            sift_error err = {0};
            setenv(envs[e], "1", 1);
            fixture placed = fx[f];
            placed.model = sift_model_load(ref_model_path(fx[f].stem, path, sizeof path), &err);
            unsetenv(envs[e]);
            assert_non_null(placed.model);
            for (int scalar = 0; scalar < 2; scalar++) {
                const sift_isa isa = scalar ? SIFT_ISA_SCALAR : SIFT_ISA_AUTO;
                float *a = greedy_alone(&fx[f], NS, 1, isa);
                float *b = greedy_alone(&placed, NS, 1, isa);
                const int same = memcmp(a, b, (size_t)NP * NS * NV * 4) == 0;
                printf("  weights        %-20s %s default vs %s=1: %s\n", fx[f].stem,
                       sift_isa_name(scalar ? SIFT_ISA_SCALAR : sift_isa_best()), envs[e],
                       same ? "bitwise identical" : "DIFFER");
                assert_true(same);
                free(a);
                free(b);
            }
            sift_model_free(placed.model);
        }
}

/* The logits of the last of five tokens decoded in one batch through a new context of m. */
static float *decode_logits(sift_model *m)
{
    const sift_token toks[] = {1, 17, 42, 99, 3};
    const sift_seq_id seq = 0;
    sift_error err = {0};
    sift_context_params cp = sift_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 8;
    sift_context *ctx = sift_context_new(m, cp, &err);
    assert_non_null(ctx);
    sift_batch b;
    assert_int_equal(sift_batch_init(&b, 5, 1), SIFT_OK);
    for (int i = 0; i < 5; i++) assert_int_equal(sift_batch_add(&b, toks[i], i, &seq, 1, i == 4), SIFT_OK);
    assert_int_equal(sift_decode(ctx, &b, &err), SIFT_OK);
    sift_batch_free(&b);
    const int nv = sift_model_n_vocab(m);
    float *lg = malloc((size_t)nv * sizeof(float));
    memcpy(lg, sift_get_logits_ith(ctx, -1), (size_t)nv * sizeof(float));
    sift_context_free(ctx);
    return lg;
}

/* Is packed (the x8 layout of w's type) the plain rows at plain, row by row? */
static void assert_x8_rows(const sift__weight *w, const void *packed, const void *plain)
{
    const bool q8 = w->type == SIFT_TYPE_Q8_0;
    const int64_t nb = w->n_in / (q8 ? SIFT_QK8_0 : SIFT_QK_K);
    for (int64_t r = 0; r < w->n_out; r++) {
        const char *g = (const char *)packed + r / 8 * 8 * w->row_bytes, *want = (const char *)plain + r * w->row_bytes;
        for (int64_t k = 0; k < nb; k++) {
            if (q8) {
                sift__block_q8_0 got;
                sift__q8_0_x8_get((const sift_block_q8_0x8 *)g + k, (int)(r % 8), &got);
                assert_memory_equal(&got, want + k * sizeof got, sizeof got);
            } else {
                sift_block_q4_K got;
                sift__q4_K_x8_get((const sift_block_q4_Kx8 *)g + k, (int)(r % 8), &got);
                assert_memory_equal(&got, want + k * sizeof got, sizeof got);
            }
        }
    }
}

/* A model with 12 MB of matrices, copied (SIFT_COPY=1): the copy runs in several 4 MiB
 * chunks, on two threads where there are two CPUs, and chunk edges fall inside matrices.
 * Every copied matrix must hold its file bytes (those of a SIFT_MMAP=1 load), and sit in
 * the one huge-page block. A default load keeps the matrices' plain rows in the file
 * mapping and packs nothing (Q8_0's x8 layout is repacked only on request); with
 * SIFT_PACK_LATE=1, where the probe chose Q8_0's x8 layout, it packs them after load
 * (x8_late): every row taken back out of its group is the file's. */
static void test_weights_copy_chunks(void **state)
{
    (void)state;
    char dir[] = "/tmp/sift_test_model_XXXXXX", path[1100], vocab[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/q8.gguf", dir);
    const sift__mkmodel_spec spec = {.arch = "llama", .n_embd = 512, .n_ff = 1536, .n_layer = 4, .n_head = 8,
                                     .n_head_kv = 4, .type = SIFT_TYPE_Q8_0};
    sift_error err = {0};
    assert_int_equal(sift__mkmodel_write(path, ref_model_path("stories260K", vocab, sizeof vocab), &spec, &err), SIFT_OK);
    setenv("SIFT_COPY", "1", 1);
    sift_model *copied = sift_model_load(path, &err);
    unsetenv("SIFT_COPY");
    setenv("SIFT_MMAP", "1", 1);
    sift_model *mapped = sift_model_load(path, &err);
    unsetenv("SIFT_MMAP");
    sift_model *plain = sift_model_load(path, &err);
    assert_non_null(plain);
    assert_null(plain->k_auto.x8_pack[SIFT_TYPE_Q8_0]);
    assert_null(plain->packer);
    assert_null(plain->wmem);
    sift_model_free(plain);
    setenv("SIFT_PACK_LATE", "1", 1);
    sift_model *placed = sift_model_load(path, &err);
    unsetenv("SIFT_PACK_LATE");
    assert_non_null(copied);
    assert_non_null(mapped);
    assert_non_null(placed);
    const bool x8 = placed->k_auto.x8_pack[SIFT_TYPE_Q8_0] != NULL;
    assert_null(placed->wmem);
    assert_true((placed->packer != NULL) == x8);
    sift__weights_wait(placed);
    for (int l = 0; l < spec.n_layer; l++) {
        const sift__layer *A = &placed->layers[l], *B = &mapped->layers[l];
        const sift__weight *wa[] = {&A->wq, &A->wk, &A->wv, &A->wo, &A->w_gate, &A->w_up, &A->w_down};
        const sift__weight *wb[] = {&B->wq, &B->wk, &B->wv, &B->wo, &B->w_gate, &B->w_up, &B->w_down};
        for (int i = 0; i < 7; i++) {
            assert_false(wa[i]->huge_pages || wa[i]->x8);
            assert_int_equal((const uint8_t *)wa[i]->data - sift__gguf_bytes(placed->gguf),
                             (const uint8_t *)wb[i]->data - sift__gguf_bytes(mapped->gguf));
            assert_true((wa[i]->x8_late != NULL) == x8);
            if (x8) assert_x8_rows(wa[i], wa[i]->x8_late, wb[i]->data);
        }
    }
    float *lg[2] = {decode_logits(placed), decode_logits(mapped)};
    assert_memory_equal(lg[0], lg[1], (size_t)sift_model_n_vocab(placed) * sizeof(float));
    for (int v = 0; v < 2; v++) free(lg[v]);
    sift_model_free(placed);
    assert_non_null(copied->wmem);
    assert_null(mapped->wmem);
    assert_true(copied->wmem_size >= (size_t)12 << 20);
    int n = 0;
    size_t bytes = 0;
    for (int l = 0; l < spec.n_layer; l++) {
        const sift__layer *A = &copied->layers[l], *B = &mapped->layers[l];
        const sift__weight *wa[] = {&A->wq, &A->wk, &A->wv, &A->wo, &A->w_gate, &A->w_up, &A->w_down};
        const sift__weight *wb[] = {&B->wq, &B->wk, &B->wv, &B->wo, &B->w_gate, &B->w_up, &B->w_down};
        for (int i = 0; i < 7; i++) {
            const size_t nb = wa[i]->row_bytes * (size_t)wa[i]->n_out;
            const char *d = wa[i]->data, *mem = copied->wmem;
            assert_true(wa[i]->huge_pages && !wb[i]->huge_pages);
            assert_true(d >= mem && d + nb <= mem + copied->wmem_size);
            if (wa[i]->x8) /* packed on the way (Q8_0's x8 layout, where the probe chose it) */
                assert_x8_rows(wa[i], d, wb[i]->data);
            else
                assert_memory_equal(d, wb[i]->data, nb);
            bytes += nb;
            n++;
        }
    }
    printf("  weights        q8_0 512x1536x4: %d matrices, %zu bytes copied in %zu MiB, equal to the file's\n", n, bytes,
           copied->wmem_size >> 20);
    sift_model_free(copied);
    sift_model_free(mapped);
    unlink(path);
    rmdir(dir);
}

/* A Q4_K model (7 MB of matrices, two 4 MiB chunks, groups straddling the chunk edge):
 * where the probe chose the x8 layout, the matrices are packed while they are copied; every
 * row read back out of its group (sift__q4_K_x8_get) must be the file's row, and the logits
 * of a decode must be those of the file-mapped model, bit for bit. Where the probe keeps
 * the plain layout, the matrices stay mapped (checked the same way). */
static void test_weights_pack_on_copy(void **state)
{
    (void)state;
    char dir[] = "/tmp/sift_test_model_XXXXXX", path[1100], vocab[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/q4k.gguf", dir);
    const sift__mkmodel_spec spec = {.arch = "llama", .n_embd = 512, .n_ff = 1536, .n_layer = 4, .n_head = 8,
                                     .n_head_kv = 4, .type = SIFT_TYPE_Q4_K};
    sift_error err = {0};
    assert_int_equal(sift__mkmodel_write(path, ref_model_path("stories260K", vocab, sizeof vocab), &spec, &err), SIFT_OK);
    sift_model *placed = sift_model_load(path, &err);
    setenv("SIFT_MMAP", "1", 1);
    sift_model *mapped = sift_model_load(path, &err);
    unsetenv("SIFT_MMAP");
    assert_non_null(placed);
    assert_non_null(mapped);
    int n_x8 = 0, n = 0;
    for (int l = 0; l < spec.n_layer; l++) {
        const sift__layer *A = &placed->layers[l], *B = &mapped->layers[l];
        const sift__weight *wa[] = {&A->wq, &A->wk, &A->wv, &A->wo, &A->w_gate, &A->w_up, &A->w_down};
        const sift__weight *wb[] = {&B->wq, &B->wk, &B->wv, &B->wo, &B->w_gate, &B->w_up, &B->w_down};
        for (int i = 0; i < 7; i++, n++) {
            assert_true(wa[i]->x8 == (placed->k_auto.x8_pack[SIFT_TYPE_Q4_K] != NULL));
            assert_true(wa[i]->huge_pages == wa[i]->x8);
            if (!wa[i]->x8) { /* in place: the same offset into each load's own mapping of the file */
                assert_int_equal((const uint8_t *)wa[i]->data - sift__gguf_bytes(placed->gguf),
                                 (const uint8_t *)wb[i]->data - sift__gguf_bytes(mapped->gguf));
                continue;
            }
            n_x8++;
            assert_x8_rows(wa[i], wa[i]->data, wb[i]->data);
        }
    }
    /* one decode of a few tokens through each: the same logits */
    float *lg[2] = {decode_logits(placed), decode_logits(mapped)};
    assert_memory_equal(lg[0], lg[1], (size_t)sift_model_n_vocab(placed) * sizeof(float));
    printf("  weights        q4_K 512x1536x4: %d of %d matrices packed x8 while copied, rows and logits equal to the file's\n",
           n_x8, n);
    for (int v = 0; v < 2; v++) free(lg[v]);
    sift_model_free(placed);
    sift_model_free(mapped);
    unlink(path);
    rmdir(dir);
}

/* The copy's reader: pread as far as the file goes, the mapping's bytes for the rest (a
 * short read, or no file at all), never a byte wrong. */
static void test_weights_short_read(void **state)
{
    (void)state;
    char dir[] = "/tmp/sift_test_model_XXXXXX", full[1100], part[1100];
    assert_non_null(mkdtemp(dir));
    snprintf(full, sizeof full, "%s/full", dir);
    snprintf(part, sizeof part, "%s/part", dir);
    enum { N = 3 * 4096 + 100, PART = 4096 + 7 };
    unsigned char *data = malloc(N), *dst = malloc(N);
    for (int i = 0; i < N; i++) data[i] = (unsigned char)(i * 131 + 7);
    FILE *f = fopen(full, "wb");
    assert_int_equal(fwrite(data, 1, N, f), N);
    fclose(f);
    f = fopen(part, "wb");
    assert_int_equal(fwrite(data, 1, PART, f), PART);
    fclose(f);
    const int fd_full = open(full, O_RDONLY), fd_part = open(part, O_RDONLY);
    assert_true(fd_full >= 0 && fd_part >= 0);
    const char *map = mmap(NULL, N, PROT_READ, MAP_PRIVATE, fd_full, 0);
    assert_true(map != MAP_FAILED);
    const int fds[] = {fd_full, fd_part, -1};
    const uint64_t offs[] = {0, 100, 4000};
    for (int k = 0; k < 3; k++)
        for (int o = 0; o < 3; o++) {
            const size_t n = N - offs[o];
            memset(dst, 0, N);
            sift__weights_read((char *)dst, fds[k], offs[o], map + offs[o], n);
            assert_memory_equal(dst, data + offs[o], n);
        }
    munmap((void *)map, N);
    close(fd_full);
    close(fd_part);
    free(data);
    free(dst);
    unlink(full);
    unlink(part);
    rmdir(dir);
}

/* ---- KV cache operations ------------------------------------------------------------------------ */

static void expect_logits(sift_context *ctx, int i, const float *want, int nv, const char *what)
{
    const float *lg = sift_get_logits_ith(ctx, i);
    if (!lg) fprintf(stderr, "%s: no logits for batch index %d\n", what, i);
    assert_non_null(lg);
    if (memcmp(lg, want, (size_t)nv * 4) != 0) {
        fprintf(stderr, "%s: logits differ (max %.3g)\n", what, max_abs_diff(lg, want, nv));
        fail();
    }
}

static void test_kv_ops(void **state)
{
    (void)state;
    const fixture *F = &fx[0];
    const ref_prompt *rp = &F->ref.prompts[F->ref.n_prompts == 2 ? 1 : 2]; /* lily, 14 tokens */
    const int nv = F->ref.n_vocab, n = rp->n_tokens;
    float *want = malloc((size_t)n * nv * 4);
    sift_context *ctx = mkctx(F->model, 3, 1, SIFT_ISA_AUTO);
    decode_prompt(ctx, rp, 0);
    memcpy(want, sift_get_logits(ctx), (size_t)n * nv * 4);
    assert_int_equal(sift_kv_seq_pos_min(ctx, 0), 0);
    assert_int_equal(sift_kv_seq_pos_max(ctx, 0), n - 1);
    assert_int_equal(sift_kv_seq_pos_max(ctx, 1), -1);
    assert_int_equal(sift_kv_n_used(ctx), n);

    /* rm of the tail, then the same tokens again: the same logits */
    assert_int_equal(sift_kv_seq_rm(ctx, 0, 5, -1), SIFT_OK);
    assert_int_equal(sift_kv_seq_pos_max(ctx, 0), 4);
    sift_batch b;
    sift_batch_init(&b, 64, 2);
    int s0 = 0, s1 = 1, s2 = 2;
    for (int i = 5; i < n; i++) sift_batch_add(&b, rp->tokens[i], i, &s0, 1, true);
    assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
    for (int i = 5; i < n; i++) expect_logits(ctx, i - 5, want + (size_t)i * nv, nv, "rm tail + redecode");

    /* cp to sequences 1 and 2 (fork), then the last token in each: identical to sequence 0 */
    assert_int_equal(sift_kv_seq_cp(ctx, 0, 1, -1, n - 1), SIFT_OK);
    assert_int_equal(sift_kv_seq_cp(ctx, 0, 2, 0, n - 1), SIFT_OK);
    assert_int_equal(sift_kv_seq_pos_max(ctx, 1), n - 2);
    sift_batch_clear(&b);
    sift_batch_add(&b, rp->tokens[n - 1], n - 1, &s1, 1, true);
    sift_batch_add(&b, rp->tokens[n - 1], n - 1, &s2, 1, true);
    assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
    expect_logits(ctx, 0, want + (size_t)(n - 1) * nv, nv, "cp fork seq 1");
    expect_logits(ctx, 1, want + (size_t)(n - 1) * nv, nv, "cp fork seq 2");

    /* a token shared by two sequences (n_seq_id 2) lands in both */
    sift_seq_id both[2] = {1, 2};
    sift_batch_clear(&b);
    sift_batch_add(&b, rp->greedy[0], n, both, 2, true);
    assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
    assert_int_equal(sift_kv_seq_pos_max(ctx, 1), n);
    assert_int_equal(sift_kv_seq_pos_max(ctx, 2), n);

    /* keep: only sequence 2 survives */
    assert_int_equal(sift_kv_seq_keep(ctx, 2), SIFT_OK);
    assert_int_equal(sift_kv_seq_pos_max(ctx, 0), -1);
    assert_int_equal(sift_kv_seq_pos_max(ctx, 1), -1);
    assert_int_equal(sift_kv_n_used(ctx), n + 1);

    /* a hole in the middle: positions 3..5 removed; decoding goes on after the end */
    assert_int_equal(sift_kv_seq_rm(ctx, 2, 3, 6), SIFT_OK);
    assert_int_equal(sift_kv_seq_pos_max(ctx, 2), n);
    assert_int_equal(sift_kv_n_used(ctx), n + 1 - 3);
    sift_batch_clear(&b);
    sift_batch_add(&b, rp->greedy[1], n + 1, &s2, 1, true);
    assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);

    /* clear */
    sift_kv_clear(ctx);
    assert_int_equal(sift_kv_n_used(ctx), 0);
    assert_int_equal(sift_kv_seq_rm(ctx, 7, -1, -1), SIFT_E_INVAL);
    assert_int_equal(sift_kv_seq_cp(ctx, 0, 9, -1, -1), SIFT_E_INVAL);
    sift_batch_free(&b);
    sift_context_free(ctx);
    free(want);
}

/* A file for sift_state_seq_load_file: bytes as given. */
static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* One sequence's state to a file and back (sift_state_seq_save_file / _load_file): the
 * restored sequence, in another slot of another context, continues with the same logits bit
 * for bit; a corrupt file (wrong magic, cut, one byte longer, another model's shape, a token
 * id out of the vocabulary) is refused and leaves the sequence as it was. */
static void test_state_seq_file(void **state)
{
    (void)state;
    const fixture *F = &fx[0];
    const ref_prompt *rp = &F->ref.prompts[F->ref.n_prompts == 2 ? 1 : 2];
    const int nv = F->ref.n_vocab, n = rp->n_tokens;
    char path[] = "/tmp/sift-state-XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    sift_context *a = mkctx(F->model, 2, 1, SIFT_ISA_AUTO), *b = mkctx(F->model, 3, 1, SIFT_ISA_AUTO);
    decode_prompt(a, rp, 1);
    sift_error err = {0};
    const size_t wrote = sift_state_seq_save_file(a, path, 1, rp->tokens, (size_t)n, &err);
    assert_true(wrote > 0);
    sift_token toks[512];
    size_t nt = 0;
    assert_int_equal(sift_state_seq_load_file(b, path, 2, toks, 512, &nt, &err), wrote);
    assert_int_equal(nt, n);
    assert_memory_equal(toks, rp->tokens, (size_t)n * sizeof *toks);
    assert_int_equal(sift_kv_seq_pos_max(b, 2), n - 1);
    /* the next token in both: the same logits */
    sift_batch bt;
    sift_batch_init(&bt, 4, 1);
    int s1 = 1, s2 = 2;
    sift_batch_add(&bt, rp->greedy[0], n, &s1, 1, true);
    assert_int_equal(sift_decode(a, &bt, NULL), SIFT_OK);
    float *want = malloc((size_t)nv * 4);
    memcpy(want, sift_get_logits_ith(a, 0), (size_t)nv * 4);
    sift_batch_clear(&bt);
    sift_batch_add(&bt, rp->greedy[0], n, &s2, 1, true);
    assert_int_equal(sift_decode(b, &bt, NULL), SIFT_OK);
    expect_logits(b, 0, want, nv, "restored sequence");

    /* corrupt files: each refused, sequence 2 of b unchanged */
    FILE *f = fopen(path, "rb");
    unsigned char *good = malloc(wrote + 1);
    assert_int_equal(fread(good, 1, wrote, f), wrote);
    fclose(f);
    unsigned char *bad = malloc(wrote + 1);
    struct { size_t len; size_t at; unsigned char val; const char *what; } cases[] = {
        {wrote, 0, 'X', "magic"},      {wrote - 1, (size_t)-1, 0, "truncated"}, {wrote + 1, wrote, 0, "longer"},
        {wrote, 8, 0x7f, "shape"},     {wrote, 28 + 3, 0x7f, "token id"},      {wrote, 24, 0xff, "token count"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        memcpy(bad, good, wrote);
        bad[wrote] = 0;
        if (cases[i].at != (size_t)-1) bad[cases[i].at] = cases[i].val;
        write_bytes(path, bad, cases[i].len);
        err = (sift_error){0};
        assert_int_equal(sift_state_seq_load_file(b, path, 2, toks, 512, &nt, &err), 0);
        if (err.status != SIFT_E_FORMAT) fprintf(stderr, "%s: %d %s\n", cases[i].what, err.status, err.msg);
        assert_int_equal(err.status, SIFT_E_FORMAT);
        assert_int_equal(sift_kv_seq_pos_max(b, 2), n); /* (the prompt and the one token after it) */
    }
    write_bytes(path, good, wrote); /* a buffer too small */
    assert_int_equal(sift_state_seq_load_file(b, path, 0, toks, (size_t)n - 1, &nt, &err), 0);
    assert_int_equal(err.status, SIFT_E_INVAL);
    assert_int_equal(sift_state_seq_load_file(b, "/nonexistent/x", 0, toks, 512, &nt, &err), 0);
    assert_int_equal(err.status, SIFT_E_IO);
    assert_int_equal(sift_state_seq_save_file(b, path, 7, NULL, 0, &err), 0);
    unlink(path);
    free(good);
    free(bad);
    free(want);
    sift_batch_free(&bt);
    sift_context_free(a);
    sift_context_free(b);
}

/* Shifting positions (sift_kv_seq_add). Attention with RoPE depends only on relative
 * positions, so a prompt decoded at positions 100.. and then moved back by 100 must behave
 * like the same prompt decoded at 0.., up to the rounding of rotating the keys twice. Then
 * llama-cli's context shift (remove a middle part, move the tail back) on the same cache. */
static void test_kv_shift(void **state)
{
    (void)state;
    const fixture *F = &fx[0];
    ref_model full; /* long200 (the fixture may have been cut down) */
    assert_int_equal(ref_load(F->stem, &full), 0);
    const ref_prompt *rp = &full.prompts[4];
    const int nv = F->ref.n_vocab, n = 60, k = 20, off = 100;
    sift_context *a = mkctx(F->model, 1, 1, SIFT_ISA_AUTO), *c = mkctx(F->model, 1, 1, SIFT_ISA_AUTO);
    sift_batch b;
    sift_batch_init(&b, n, 1);
    int s0 = 0;
    for (int i = 0; i < n; i++) sift_batch_add(&b, rp->tokens[i], i, &s0, 1, false);
    assert_int_equal(sift_decode(a, &b, NULL), SIFT_OK);
    for (int i = 0; i < n; i++) b.pos[i] += off;
    assert_int_equal(sift_decode(c, &b, NULL), SIFT_OK);
    assert_int_equal(sift_kv_seq_pos_min(c, 0), off);
    assert_int_equal(sift_kv_seq_add(c, 0, off, -1, -off), SIFT_OK);
    assert_int_equal(sift_kv_seq_pos_min(c, 0), 0);
    assert_int_equal(sift_kv_seq_pos_max(c, 0), n - 1);
    assert_int_equal(sift_kv_n_used(c), n);
    sift_batch_clear(&b);
    sift_batch_add(&b, rp->tokens[n], n, &s0, 1, true);
    assert_int_equal(sift_decode(a, &b, NULL), SIFT_OK);
    assert_int_equal(sift_decode(c, &b, NULL), SIFT_OK);
    double d = max_abs_diff(sift_get_logits_ith(a, 0), sift_get_logits_ith(c, 0), nv);
    printf("  kv shift       stories260K: decoded at +%d and shifted back vs decoded in place: max|delta| = %.3g\n", off, d);
    assert_true(d < 1e-4);
    assert_int_equal(argmax(sift_get_logits_ith(a, 0), nv), argmax(sift_get_logits_ith(c, 0), nv));

    /* context shift: drop [1, 1+k), move [1+k, n+1) back by k, go on at n+1-k */
    assert_int_equal(sift_kv_seq_rm(a, 0, 1, 1 + k), SIFT_OK);
    assert_int_equal(sift_kv_seq_add(a, 0, 1 + k, -1, -k), SIFT_OK);
    assert_int_equal(sift_kv_seq_pos_max(a, 0), n - k);
    assert_int_equal(sift_kv_n_used(a), n + 1 - k);
    sift_batch_clear(&b);
    sift_batch_add(&b, rp->tokens[n + 1], n + 1 - k, &s0, 1, true);
    assert_int_equal(sift_decode(a, &b, NULL), SIFT_OK);
    const float *lg = sift_get_logits_ith(a, 0);
    for (int i = 0; i < nv; i++) assert_true(isfinite(lg[i]));
    /* moving onto occupied cells replaces them; a shift past the end is refused */
    assert_int_equal(sift_kv_seq_add(a, 0, 0, -1, 512), SIFT_E_STATE);
    assert_int_equal(sift_kv_seq_add(a, 0, 0, 10, -10), SIFT_OK); /* all below 0: removed */
    assert_int_equal(sift_kv_seq_pos_min(a, 0), 10);
    sift_batch_free(&b);
    sift_context_free(a);
    sift_context_free(c);
}

/* A gemma4 mkmodel model of 4 layers (S F S F, the last two sharing K/V) at dir/g4.gguf (dir
 * made from its XXXXXX template), window n_swa, weights from seed; other[] gets dir/name. */
static void mk_gemma4(char *dir, char *path, size_t cap, int n_swa, uint64_t seed, const char *name, char *other)
{
    char vocab[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(path, cap, "%s/g4.gguf", dir);
    snprintf(other, cap, "%s/%s", dir, name);
    const sift__mkmodel_spec spec = {.arch = "gemma4", .n_embd = 64, .n_ff = 128, .n_layer = 4, .n_head = 4, .n_head_kv = 2,
                                     .head_dim = 16, .n_swa = n_swa, .out_scale = 1.5f, .seed = seed};
    sift_error err = {0};
    assert_int_equal(sift__mkmodel_write(path, ref_model_path("stories260K", vocab, sizeof vocab), &spec, &err), SIFT_OK);
}

/* gemma4's cache (a mkmodel model: sliding layers of head size 16 and 2 KV heads, full ones of
 * 32 and 1 with proportional RoPE, the last two layers reading earlier layers' K/V): the
 * shift re-rotates each layer's keys with its own RoPE (dimensions, base, factors), so a
 * prompt decoded at +100 and moved back agrees with one decoded in place; a saved sequence
 * restores the same logits bit for bit. */
/* qwen35's recurrent state beside the KV cache (a mkmodel model: 4 layers, DeltaNet on 0-2,
 * gated attention on 3). What a recurrent state can do gives the same logits as decoding from
 * scratch: a prompt in one batch or token by token, two sequences in one batch or apart, a whole
 * sequence copied, a sequence emptied and decoded again. What it cannot do (cut a sequence back,
 * shift it, copy a part, save it to a file, share a token between sequences, speculative
 * decoding) is refused and leaves the sequence as it was: decoding on gives the logits of the
 * untouched sequence. */
static void decode_toks(sift_context *ctx, sift_batch *b, const sift_token *t, int n, int pos0, int seq)
{
    sift_batch_clear(b);
    for (int i = 0; i < n; i++) sift_batch_add(b, t[i], pos0 + i, &seq, 1, i == n - 1);
    sift_error err = {0};
    if (sift_decode(ctx, b, &err) != SIFT_OK) fprintf(stderr, "decode: %s\n", err.msg);
    assert_int_equal(err.status, SIFT_OK);
}

static void test_qwen35_state(void **state)
{
    (void)state;
    char dir[] = "/tmp/sift_test_model_XXXXXX", path[1100], spath[1100], vocab[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/q35.gguf", dir);
    snprintf(spath, sizeof spath, "%s/seq.bin", dir);
    const sift__mkmodel_spec spec = {.arch = "qwen35", .n_embd = 64, .n_ff = 128, .n_layer = 4, .n_head = 4, .n_head_kv = 2,
                                     .head_dim = 16, .n_nextn = 1, .out_scale = 1.5f, .seed = 7};
    sift_error err = {0};
    assert_int_equal(sift__mkmodel_write(path, ref_model_path("stories260K", vocab, sizeof vocab), &spec, &err), SIFT_OK);
    sift_model *m = sift_model_load(path, &err);
    assert_non_null(m);
    assert_true(sift_model_is_recurrent(m));
    assert_int_equal(m->hp.n_layer, 4); /* the MTP layer is not run */
    assert_int_equal(m->hp.n_layer_rs, 3);
    assert_int_equal(m->hp.n_layer_kv, 1);
    const int nv = sift_model_n_vocab(m), n = 12;
    sift_token t[13];
    for (int i = 0; i < 13; i++) t[i] = 3 + (i * 41) % 500;
    sift_batch b;
    sift_batch_init(&b, 32, 2);
    float *want = malloc((size_t)nv * 4), *want2 = malloc((size_t)nv * 4);
    assert_non_null(want);
    assert_non_null(want2);

    /* the reference: prompt, then one token, in a context of its own (one batch each) */
    sift_context *ref = mkctx(m, 1, 1, SIFT_ISA_AUTO);
    decode_toks(ref, &b, t, n, 0, 0);
    memcpy(want2, sift_get_logits_ith(ref, -1), (size_t)nv * 4); /* after the prompt */
    decode_toks(ref, &b, t + n, 1, n, 0);
    memcpy(want, sift_get_logits_ith(ref, -1), (size_t)nv * 4); /* after prompt + 1 */

    /* token by token gives the prompt's logits (other kernels for one token: close, not bitwise) */
    sift_context *c = mkctx(m, 2, 1, SIFT_ISA_AUTO);
    for (int i = 0; i < n; i++) decode_toks(c, &b, t + i, 1, i, 1);
    const double d1 = max_abs_diff(sift_get_logits_ith(c, -1), want2, nv);
    printf("  qwen35 state   token by token vs one batch: max|delta| = %.3g\n", d1);
    assert_true(d1 < 1e-4);
    sift_kv_clear(c);

    /* two sequences in one batch, interleaved, equal each decoded alone */
    sift_batch_clear(&b);
    for (int i = 0; i < n; i++)
        for (int s = 0; s < 2; s++) sift_batch_add(&b, t[i], i, &s, 1, i == n - 1);
    assert_int_equal(sift_decode(c, &b, &err), SIFT_OK);
    expect_logits(c, 2 * n - 2, want2, nv, "qwen35 seq 0 of two in one batch");
    expect_logits(c, 2 * n - 1, want2, nv, "qwen35 seq 1 of two in one batch");

    /* refused, nothing changed */
    assert_int_equal(sift_kv_seq_rm(c, 0, 5, -1), SIFT_E_STATE);      /* cut back */
    assert_int_equal(sift_kv_seq_rm(c, 0, 2, 4), SIFT_E_STATE);       /* a hole */
    assert_int_equal(sift_kv_seq_rm(c, -1, 5, -1), SIFT_E_STATE);     /* every sequence cut back */
    assert_int_equal(sift_kv_seq_add(c, 0, 4, -1, -2), SIFT_E_STATE); /* a shift */
    assert_int_equal(sift_kv_seq_add(c, 0, -1, -1, 3), SIFT_E_STATE);
    assert_int_equal(sift_kv_seq_cp(c, 0, 1, 0, 6), SIFT_E_STATE);    /* a part */
    assert_int_equal(sift_kv_seq_pos_max(c, 0), n - 1);
    assert_int_equal(sift_kv_seq_rm(c, 0, n, -1), SIFT_OK); /* nothing past the end: fine */
    assert_int_equal(sift_state_seq_save_file(c, spath, 0, t, (size_t)n, &err), 0);
    assert_int_equal(err.status, SIFT_E_UNSUPPORTED);
    err = (sift_error){0};
    assert_int_equal(sift_state_seq_load_file(c, spath, 0, t, 13, NULL, &err), 0);
    assert_int_equal(err.status, SIFT_E_UNSUPPORTED);
    sift_batch_clear(&b);
    int both[2] = {0, 1};
    sift_batch_add(&b, t[n], n, both, 2, true); /* one token in two sequences */
    assert_int_equal(sift_decode(c, &b, &err), SIFT_E_UNSUPPORTED);
    sift_draft *dr = sift_draft_lookup_new(3, sift_draft_default_params(), NULL);
    assert_non_null(dr);
    assert_null(sift_spec_new(c, 0, dr, &err));
    assert_int_equal(err.status, SIFT_E_UNSUPPORTED);
    sift_draft_free(dr);
    decode_toks(c, &b, t + n, 1, n, 0);
    expect_logits(c, 0, want, nv, "qwen35 after the refusals");

    /* a whole copy: sequence 1 (its own state replaced) goes on as 0 did */
    assert_int_equal(sift_kv_seq_rm(c, 1, -1, -1), SIFT_OK);
    assert_int_equal(sift_kv_seq_pos_max(c, 1), -1);
    assert_int_equal(sift_kv_seq_rm(c, 0, n, -1), SIFT_E_STATE); /* the token after the prompt cannot be taken back */
    sift_kv_clear(c);
    decode_toks(c, &b, t, n, 0, 0);
    decode_toks(c, &b, t + 5, 3, 0, 1);
    assert_int_equal(sift_kv_seq_cp(c, 0, 1, -1, -1), SIFT_OK);
    assert_int_equal(sift_kv_seq_pos_max(c, 1), n - 1);
    decode_toks(c, &b, t + n, 1, n, 1);
    expect_logits(c, 0, want, nv, "qwen35 copied sequence");

    /* emptied and decoded again: the state starts from zero */
    assert_int_equal(sift_kv_seq_rm(c, 1, -1, -1), SIFT_OK);
    decode_toks(c, &b, t, n, 0, 1);
    expect_logits(c, n - 1, want2, nv, "qwen35 sequence emptied and decoded again");
    assert_int_equal(sift_kv_seq_keep(c, 0), SIFT_OK); /* keep clears sequence 1's state too */
    decode_toks(c, &b, t, n, 0, 1);
    expect_logits(c, n - 1, want2, nv, "qwen35 sequence emptied by keep and decoded again");

    free(want);
    free(want2);
    sift_batch_free(&b);
    sift_context_free(ref);
    sift_context_free(c);
    sift_model_free(m);
    unlink(path);
    rmdir(dir);
}

static void test_gemma4_cache(void **state)
{
    (void)state;
    char dir[] = "/tmp/sift_test_model_XXXXXX", path[1100], spath[1100];
    mk_gemma4(dir, path, sizeof path, 16, 5, "seq.bin", spath);
    sift_error err = {0};
    sift_model *m = sift_model_load(path, &err);
    assert_non_null(m);
    assert_int_equal(m->hp.n_layer_kv, 2);
    assert_int_equal(m->layers[3].kv_layer, 1);
    assert_int_equal(m->layers[2].kv_layer, 0);
    const int nv = sift_model_n_vocab(m), n = 40, off = 100;
    sift_context *a = mkctx(m, 1, 1, SIFT_ISA_AUTO), *c = mkctx(m, 1, 1, SIFT_ISA_AUTO), *r = mkctx(m, 1, 1, SIFT_ISA_AUTO);
    sift_batch b;
    sift_batch_init(&b, n, 1);
    int s0 = 0;
    sift_token toks[40];
    for (int i = 0; i < n; i++) toks[i] = 3 + (i * 37) % 500;
    for (int i = 0; i < n; i++) sift_batch_add(&b, toks[i], i, &s0, 1, false);
    assert_int_equal(sift_decode(a, &b, NULL), SIFT_OK);
    for (int i = 0; i < n; i++) b.pos[i] += off;
    assert_int_equal(sift_decode(c, &b, NULL), SIFT_OK);
    assert_int_equal(sift_kv_seq_add(c, 0, off, -1, -off), SIFT_OK);
    const size_t wrote = sift_state_seq_save_file(a, spath, 0, toks, (size_t)n, &err);
    assert_true(wrote > 0);
    sift_token back[64];
    size_t nt = 0;
    assert_int_equal(sift_state_seq_load_file(r, spath, 0, back, 64, &nt, &err), wrote);
    assert_int_equal(nt, n);
    sift_batch_clear(&b);
    sift_batch_add(&b, 77, n, &s0, 1, true);
    assert_int_equal(sift_decode(a, &b, NULL), SIFT_OK);
    assert_int_equal(sift_decode(c, &b, NULL), SIFT_OK);
    assert_int_equal(sift_decode(r, &b, NULL), SIFT_OK);
    const double d = max_abs_diff(sift_get_logits_ith(a, 0), sift_get_logits_ith(c, 0), nv);
    printf("  kv shift       gemma4 (mkmodel): decoded at +%d and shifted back vs decoded in place: max|delta| = %.3g\n", off, d);
    /* rotating twice rounds differently, and ggml's fp16 GELU table can turn that into one
     * fp16 step (peer_model_arch.c): a looser bound than stories260K's */
    assert_true(d < 5e-3);
    assert_int_equal(argmax(sift_get_logits_ith(a, 0), nv), argmax(sift_get_logits_ith(c, 0), nv));
    expect_logits(r, 0, sift_get_logits_ith(a, 0), nv, "gemma4 restored sequence");
    sift_batch_free(&b);
    sift_context_free(a);
    sift_context_free(c);
    sift_context_free(r);
    sift_model_free(m);
    unlink(spath);
    unlink(path);
    rmdir(dir);
}

/* A gemma4 file with one key made wrong: each refused at load with a message naming it. */
static void test_gemma4_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/sift_test_model_XXXXXX", path[1100], bad[1100];
    mk_gemma4(dir, path, sizeof path, 0, 1, "bad.gguf", bad);
    sift_error err = {0};
    sift_gguf *g = sift_gguf_open(path, &err);
    assert_non_null(g);
    const uint8_t pat3[3] = {1, 0, 1};
    const uint32_t kv_bad[4] = {2, 3, 2, 1};
    const char *const strs[4] = {"a", "b", "c", "d"};
    static const struct {
        const char *key, *want;
    } cases[] = {
        {"gemma4.attention.sliding_window_pattern", "has 3 values for 4 layers"},
        {"gemma4.attention.shared_kv_layers", "shares the K/V of layer"},
        {"gemma4.expert_count", "missing key 'gemma4.expert_used_count'"}, /* experts need their count used */
        {"gemma4.attention.head_count_kv", "not a multiple of 3 KV heads (layer 1)"},
        {"gemma4.rope.dimension_count_swa", "out of range"},
        {"gemma4.feed_forward_length", "not an array of integers"},
        {"gemma4.attention.key_length_swa", "missing key 'gemma4.attention.key_length_swa'"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        sift__gguf_writer *w = sift__gguf_writer_new();
        for (int64_t i = 0; i < sift_gguf_n_kv(g); i++)
            if (c != 6 || strcmp(sift_gguf_key(g, i), cases[c].key) != 0)
                sift__gguf_writer_set_value(w, sift_gguf_key(g, i), sift_gguf_kv_value(g, i));
        switch (c) {
        case 0: sift__gguf_writer_set_arr(w, cases[c].key, SIFT_GGUF_BOOL, pat3, 3); break;
        case 1: sift__gguf_writer_set_u32(w, cases[c].key, 3); break; /* one layer left: no sliding one to share */
        case 2: sift__gguf_writer_set_u32(w, cases[c].key, 4); break;
        case 3: sift__gguf_writer_set_arr(w, cases[c].key, SIFT_GGUF_UINT32, kv_bad, 4); break;
        case 4: sift__gguf_writer_set_u32(w, cases[c].key, 200); break; /* the sliding heads are 16 wide */
        case 5: sift__gguf_writer_set_arr_str(w, cases[c].key, strs, 4); break;
        default: break;
        }
        for (int64_t i = 0; i < sift_gguf_n_tensors(g); i++) {
            const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
            assert_int_equal(sift__gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size, &err), SIFT_OK);
        }
        assert_int_equal(sift__gguf_writer_write_file(w, bad, &err), SIFT_OK);
        sift__gguf_writer_free(w);
        sift_error e = {0};
        sift_model *m = sift_model_load(bad, &e);
        printf("  gemma4 refused %s: %s\n", cases[c].key, e.msg);
        assert_null(m);
        assert_non_null(strstr(e.msg, cases[c].want));
    }
    sift_gguf_close(g);
    unlink(bad);
    unlink(path);
    rmdir(dir);
}

/* ---- errors leave the cache untouched ----------------------------------------------------------- */

static void test_decode_errors(void **state)
{
    (void)state;
    const fixture *F = &fx[0];
    const ref_prompt *rp = &F->ref.prompts[0];
    sift_context_params p = sift_context_default_params();
    p.n_ctx = 32;
    p.n_batch = 16;
    p.n_seq_max = 2;
    p.n_threads = 1;
    sift_context *ctx = sift_context_new(F->model, p, NULL);
    assert_non_null(ctx);
    assert_int_equal(sift_n_ctx_seq(ctx), 16);
    decode_prompt(ctx, rp, 0);
    const int n = rp->n_tokens;
    float *before = malloc((size_t)F->ref.n_vocab * 4);
    memcpy(before, sift_get_logits_ith(ctx, -1), (size_t)F->ref.n_vocab * 4);

    sift_batch b;
    sift_batch_init(&b, 32, 2);
    int s0 = 0, s1 = 1, s5 = 5;
    sift_error err;
    struct {
        const char *what;
        int status;
        void (*fill)(sift_batch *b);
    } dummy = {0};
    (void)dummy;
#define EXPECT_ERR(code, ...)                                                                 \
    do {                                                                                       \
        sift_batch_clear(&b);                                                                  \
        __VA_ARGS__;                                                                           \
        memset(&err, 0, sizeof err);                                                           \
        assert_int_equal(sift_decode(ctx, &b, &err), code);                                    \
        printf("  decode error   %s\n", err.msg);                                              \
        assert_int_equal(sift_kv_seq_pos_max(ctx, 0), n - 1);                                  \
        assert_int_equal(sift_kv_seq_pos_max(ctx, 1), -1);                                     \
        assert_memory_equal(sift_get_logits_ith(ctx, -1), before, (size_t)F->ref.n_vocab * 4); \
    } while (0)
    EXPECT_ERR(SIFT_E_INVAL, (void)0);                                                         /* empty */
    EXPECT_ERR(SIFT_E_INVAL, sift_batch_add(&b, 512, n, &s0, 1, true));                        /* token id */
    EXPECT_ERR(SIFT_E_INVAL, sift_batch_add(&b, -1, n, &s0, 1, true));                         /* token id */
    EXPECT_ERR(SIFT_E_INVAL, sift_batch_add(&b, 5, n, &s5, 1, true));                          /* seq id */
    EXPECT_ERR(SIFT_E_INVAL, sift_batch_add(&b, 5, -3, &s1, 1, true));                         /* position */
    EXPECT_ERR(SIFT_E_STATE, sift_batch_add(&b, 5, 2, &s0, 1, true));                          /* rewrite */
    EXPECT_ERR(SIFT_E_STATE, sift_batch_add(&b, 5, 16, &s1, 1, true));                         /* full */
    EXPECT_ERR(SIFT_E_STATE, sift_batch_add(&b, 5, 0, &s1, 1, true); sift_batch_add(&b, 6, 0, &s1, 1, true)); /* twice */
    EXPECT_ERR(SIFT_E_STATE, sift_batch_add(&b, 5, 7, &s1, 1, true); sift_batch_add(&b, 6, 3, &s1, 1, true)); /* order */
    for (int i = 0; i < 17; i++) sift_batch_add(&b, 5, i, &s1, 1, false);
    assert_int_equal(sift_decode(ctx, &b, &err), SIFT_E_INVAL); /* more than n_batch */
    /* pos NULL: positions continue each sequence */
    sift_batch_clear(&b);
    sift_batch_add(&b, 5, 0, &s1, 1, false);
    sift_batch_add(&b, 6, 0, &s0, 1, true);
    sift_pos *keep = b.pos;
    b.pos = NULL;
    assert_int_equal(sift_decode(ctx, &b, NULL), SIFT_OK);
    b.pos = keep;
    assert_int_equal(sift_kv_seq_pos_max(ctx, 1), 0);
    assert_int_equal(sift_kv_seq_pos_max(ctx, 0), n);
    assert_null(sift_get_logits_ith(ctx, 0));
    assert_non_null(sift_get_logits_ith(ctx, 1));
    assert_null(sift_get_logits_ith(ctx, 2));
    assert_null(sift_get_logits_ith(ctx, -2));
    assert_int_equal(sift_batch_add(&b, 1, 0, NULL, 1, false), SIFT_E_INVAL);
    sift_batch_free(&b);
    sift_context_free(ctx);
    free(before);

    /* bad context parameters and files */
    p = sift_context_default_params();
    p.n_seq_max = 0;
    assert_null(sift_context_new(F->model, p, &err));
    assert_int_equal(err.status, SIFT_E_INVAL);
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K-gguf-v1.gguf", ref_shared());
    assert_null(sift_model_load(path, &err));
    printf("  load error     %s\n", err.msg);
    snprintf(path, sizeof path, "%s/models/tinyllamas-stories-260k-q8_0.gguf", ref_shared());
    assert_null(sift_model_load(path, &err));
    printf("  load error     %s\n", err.msg);
    snprintf(path, sizeof path, "%s/models/vocab/ggml-vocab-llama-spm.gguf", ref_shared());
    assert_null(sift_model_load(path, &err));
    printf("  load error     %s\n", err.msg);
}

static void test_model_info(void **state)
{
    (void)state;
    sift_model_info info;
    sift_model_get_info(fx[0].model, &info);
    assert_string_equal(info.arch, "llama");
    assert_int_equal(info.n_vocab, 512);
    assert_int_equal(info.n_embd, 64);
    assert_int_equal(info.n_layer, 5);
    assert_int_equal(info.n_head, 8);
    assert_int_equal(info.n_head_kv, 4);
    assert_int_equal(info.n_ff, 172);
    assert_false(info.tied_output);
    assert_int_equal(info.n_params, 292800);
    char desc[64];
    sift_model_desc(fx[0].model, desc, sizeof desc);
    printf("  model          %s\n", desc);
    sift_model_get_info(fx[1].model, &info);
    assert_int_equal(info.n_vocab, 32000);
    assert_int_equal(info.n_rot, 4);
    assert_false(info.tied_output);
    assert_int_equal(info.main_type, SIFT_TYPE_F16);
    assert_int_equal(sift_vocab_n_tokens(sift_model_vocab(fx[1].model)), 32000);
}

/* `sift mkmodel --fim --from`: stories260K with the six FIM tokens after its 512. The vocabulary
 * names them (control tokens, pad/rep/sep end generation as llama.cpp makes them), the text
 * parses to them only with parse_special, and the copy's logits are the original's, bit for
 * bit, with the mean logit for the new tokens; a second --fim is refused. A random model with spec.fim
 * gets the same vocabulary. */
static void test_fim_copy(void **state)
{
    (void)state;
    char dir[] = "/tmp/sift_test_model_XXXXXX", path[1100], again[1100], rnd[1100], src[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/fim.gguf", dir);
    snprintf(again, sizeof again, "%s/fim2.gguf", dir);
    snprintf(rnd, sizeof rnd, "%s/rnd.gguf", dir);
    ref_model_path("stories260K", src, sizeof src);
    sift_error err = {0};
    assert_int_equal(sift__mkmodel_add_fim(path, src, SIFT__FIM_QWEN, &err), SIFT_OK);
    assert_int_equal(sift__mkmodel_add_fim(again, path, SIFT__FIM_CODELLAMA, &err), SIFT_E_INVAL);
    printf("  fim again      %s\n", err.msg);
    sift_model *m = sift_model_load(path, &err);
    assert_non_null(m);
    const sift_vocab *v = sift_model_vocab(m);
    assert_int_equal(sift_model_n_vocab(m), 518);
    const sift_token ids[6] = {sift_vocab_fim_pre(v), sift_vocab_fim_suf(v), sift_vocab_fim_mid(v),
                               sift_vocab_fim_pad(v), sift_vocab_fim_rep(v), sift_vocab_fim_sep(v)};
    for (int k = 0; k < 6; k++) {
        assert_int_equal(ids[k], 512 + k);
        assert_true(sift_vocab_is_control(v, ids[k]));
        assert_int_equal(sift_vocab_is_eog(v, ids[k]), k >= 3);
        sift_token t[16];
        int nf;
        const char *text = sift__mkmodel_fim_tokens(SIFT__FIM_QWEN, &nf)[k].text;
        assert_int_equal(sift_tokenize(v, text, strlen(text), t, 16, false, true), 1);
        assert_int_equal(t[0], ids[k]);
        const int32_t n = sift_tokenize(v, text, strlen(text), t, 16, false, false);
        for (int32_t i = 0; i < n; i++) assert_true(t[i] < 512);
    }
    assert_int_equal(sift_vocab_fim_pre(sift_model_vocab(fx[0].model)), SIFT_TOKEN_NULL);
    const ref_prompt *rp = &fx[0].ref.prompts[0];
    sift_context *a = mkctx(fx[0].model, 1, 1, SIFT_ISA_AUTO), *b = mkctx(m, 1, 1, SIFT_ISA_AUTO);
    decode_prompt(a, rp, 0);
    decode_prompt(b, rp, 0);
    for (int pos = 0; pos < rp->n_tokens; pos++) {
        const float *la = sift_get_logits_ith(a, pos), *lb = sift_get_logits_ith(b, pos);
        assert_memory_equal(la, lb, 512 * sizeof(float));
        double mean = 0; /* the new tokens' logit: the mean one (their head rows are the mean row) */
        for (int k = 0; k < 512; k++) mean += lb[k];
        mean /= 512;
        for (int k = 512; k < 518; k++) {
            assert_true(lb[k] == lb[512]);
            assert_true(fabs(lb[k] - mean) < 1e-3 * (1 + fabs(mean)));
            assert_true(lb[k] < lb[argmax(lb, 512)]);
        }
    }
    sift_context_free(a);
    sift_context_free(b);
    sift_model_free(m);
    const sift__mkmodel_spec spec = {.arch = "llama", .n_embd = 64, .n_ff = 128, .n_layer = 1, .n_head = 4, .n_head_kv = 2, .fim = SIFT__FIM_QWEN};
    assert_int_equal(sift__mkmodel_write(rnd, src, &spec, &err), SIFT_OK);
    sift_vocab *rv = sift_vocab_load(rnd, &err);
    assert_non_null(rv);
    assert_int_equal(sift_vocab_n_tokens(rv), 518);
    assert_int_equal(sift_vocab_fim_mid(rv), 514);
    assert_int_equal(sift_vocab_fim_sep(rv), 517);
    sift_vocab_free(rv);
    /* CodeLlama's four with the older keys: prefix/suffix/middle are FIM pre/suf/mid, EOT the
     * end of turn; no pad, repository or file tokens */
    assert_int_equal(sift__mkmodel_add_fim(again, src, SIFT__FIM_CODELLAMA, &err), SIFT_OK);
    rv = sift_vocab_load(again, &err);
    assert_non_null(rv);
    assert_int_equal(sift_vocab_n_tokens(rv), 516);
    assert_int_equal(sift_vocab_fim_pre(rv), 512);
    assert_int_equal(sift_vocab_fim_suf(rv), 513);
    assert_int_equal(sift_vocab_fim_mid(rv), 514);
    assert_int_equal(sift_vocab_eot(rv), 515);
    assert_true(sift_vocab_is_eog(rv, 515) && !sift_vocab_is_eog(rv, 512));
    assert_int_equal(sift_vocab_fim_rep(rv), SIFT_TOKEN_NULL);
    assert_int_equal(sift_vocab_fim_sep(rv), SIFT_TOKEN_NULL);
    sift_vocab_free(rv);
    unlink(again);
    unlink(path);
    unlink(rnd);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_info),
        cmocka_unit_test(test_prompt_logits),
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_sampled),
        cmocka_unit_test(test_batched_sequences),
        cmocka_unit_test(test_threads_bitwise),
        cmocka_unit_test(test_scalar_kernels),
        cmocka_unit_test(test_weights_mmap_same),
        cmocka_unit_test(test_weights_copy_chunks),
        cmocka_unit_test(test_weights_pack_on_copy),
        cmocka_unit_test(test_weights_short_read),
        cmocka_unit_test(test_kv_ops),
        cmocka_unit_test(test_kv_shift),
        cmocka_unit_test(test_gemma4_cache),
        cmocka_unit_test(test_qwen35_state),
        cmocka_unit_test(test_gemma4_refused),
        cmocka_unit_test(test_state_seq_file),
        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_fim_copy),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
