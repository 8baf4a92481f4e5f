/*
 * chain.c - sift_cuda_chain: the device chain's memory, runs and CPU tails (sift-cuda.h).
 *
 * Creation plans the chain's items (plan.c: a spec parsed once, or sampling params), sizes
 * every device buffer once for n_seq_max rows of n_vocab logits (static shapes: a run never
 * allocates), and builds one CPU tail chain per row from the tail items when there are any
 * (each row its own samplers: own state, own random seed). The rows' parameters live in
 * pinned host memory and are copied to the device at the start of a run when they changed
 * (sift_cuda_chain_set_seq), so a run is: [parameter upload] + the kernels of the pass
 * list. fetch copies the small per-row results and, when there is a CPU tail, the handoff
 * buffers (sizes fixed at creation, so the copies are capturable too). finish waits,
 * unpacks each row's candidates exactly as the CPU chain would hold them (handoff.c), runs
 * the row's tail, accepts the token into the tail and enqueues the device-side accept
 * (penalty windows).
 *
 * CUDA errors become SIFT_E_STATE with cudaGetErrorString's text; the chain remembers
 * that its device state may be inconsistent and clears it at the next run. Every entry
 * point makes the chain's device current and restores the caller's afterwards.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/status.h"
#include "gpu/handoff.h"
#include "gpu/kernels.h"
#include "gpu/plan.h"
#include "sift-cuda.h"

struct sift_cuda_chain {
    sift_cuda_params params;
    sift__gpu_plan plan;
    sift_chain_env env;
    sift__gpu_rowspec *rows;       /* [n_seq_max] host parameters */
    const sift__gpu_rowspec **rowp;
    sift_chain **tails;           /* [n_seq_max] CPU tails (NULL without one) */
    sift_candidates *cand;        /* [n_seq_max] what a tail runs on */
    sift_candidates *cand_base;   /* the same as allocated (xtc may advance cand's pointers) */
    sift_candidates view;         /* sift_cuda_chain_candidates() */
    uint64_t *scratch;            /* [cap] sort keys for unpacking */
    int32_t cap;                  /* handoff entries per row (0 when the device selects) */
    int32_t cap_auto;             /* cap came from the rows' top_k bound */

    sift__gpu_dev dev;             /* device buffers (dev.in, ld, n_seq set per run) */
    int32_t bias_cap;             /* entries the device bias pool holds */
    sift__gpu_bias *d_bias;
    sift__gpu_param *d_prm;
    int32_t *d_accept;

    /* pinned host mirrors */
    sift__gpu_param *h_prm;        /* [n_ops][n_seq_max] */
    sift__gpu_bias *h_bias;        /* [bias_cap] */
    sift__gpu_out *h_out;          /* [n_seq_max] */
    int32_t *h_hid;               /* [n_seq_max][cap] */
    float *h_hlg, *h_hp;
    int32_t *h_accept;            /* [n_seq_max] */
    sift_token *chosen;           /* [n_seq_max] tokens of the last finish (host memory) */

    int dirty;                    /* host parameters changed since the last upload */
    int broken;                   /* a CUDA error left device state unknown */
    int ran, fetched;             /* the last run / its fetch */
    int32_t n_seq;                /* rows of the last run */
};

/* ---- small helpers ---------------------------------------------------------------------- */

sift_cuda_params sift_cuda_default_params(void)
{
    sift_cuda_params p = {.n_vocab = 0, .n_seq_max = 1, .device = 0, .handoff_cap = 0, .cpu_dist = false};
    return p;
}

int sift_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

int sift_cuda_device_name(int device, char *buf, size_t cap)
{
    struct cudaDeviceProp prop;
    if (device < 0 || device >= sift_cuda_device_count() || cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return snprintf(buf, cap, "%s", "");
    }
    return snprintf(buf, cap, "%s", prop.name);
}

static sift_status cuda_fail(sift_cuda_chain *c, sift_error *err, cudaError_t e, const char *what)
{
    if (c) c->broken = 1;
    (void)cudaGetLastError();
    return sift__error_set(err, SIFT_E_STATE, "device chain: %s: %s", what, cudaGetErrorString(e));
}

typedef struct dev_guard {
    int old;
    int ok;
} dev_guard;

static dev_guard enter(int device)
{
    dev_guard g = {0, 0};
    if (cudaGetDevice(&g.old) != cudaSuccess) g.old = -1;
    g.ok = cudaSetDevice(device) == cudaSuccess;
    if (!g.ok) (void)cudaGetLastError();
    return g;
}

static void leave(dev_guard g)
{
    if (g.old >= 0) cudaSetDevice(g.old);
}

static int dmalloc(void **p, size_t bytes)
{
    *p = NULL;
    if (bytes == 0) return 0;
    return cudaMalloc(p, bytes) == cudaSuccess ? 0 : -1;
}

static int hmalloc(void **p, size_t bytes)
{
    *p = NULL;
    return cudaMallocHost(p, bytes ? bytes : 16) == cudaSuccess ? 0 : -1;
}

/* ---- creation ------------------------------------------------------------------------------ */

static void free_all(sift_cuda_chain *c)
{
    sift__gpu_dev *d = &c->dev;
    void *dp[] = {d->rows, c->d_prm, c->d_bias, d->lid[0], d->lid[1], d->llg[0], d->llg[1], d->hcnt, d->hmass,
                  d->pa,   d->pb,    d->pd,     d->pk,     d->ring,   d->ring_first, d->ring_count, d->pen_tok,
                  d->pen_cnt, d->pen_n, d->rng, d->hid, d->hlg, d->hp, d->out, d->tokens, c->d_accept};
    for (size_t i = 0; i < sizeof dp / sizeof *dp; i++)
        if (dp[i]) cudaFree(dp[i]);
    void *hp[] = {c->h_prm, c->h_bias, c->h_out, c->h_hid, c->h_hlg, c->h_hp, c->h_accept};
    for (size_t i = 0; i < sizeof hp / sizeof *hp; i++)
        if (hp[i]) cudaFreeHost(hp[i]);
    (void)cudaGetLastError();
}

void sift_cuda_chain_free(sift_cuda_chain *c)
{
    if (!c) return;
    const dev_guard g = enter(c->params.device);
    cudaDeviceSynchronize(); /* work in flight may still use the buffers */
    free_all(c);
    leave(g);
    for (int32_t r = 0; c->rows && r < c->params.n_seq_max; r++) {
        sift__gpu_rowspec_free(&c->rows[r]);
        if (c->tails) sift_chain_free(c->tails[r]);
        if (c->cand_base) sift_candidates_free(&c->cand_base[r]);
    }
    sift_candidates_free(&c->view);
    free(c->rows);
    free(c->rowp);
    free(c->tails);
    free(c->cand);
    free(c->cand_base);
    free(c->chosen);
    free(c->scratch);
    free(c);
}

/* Device and pinned buffers for the plan (see kernels.h for each one's shape). */
static sift_status alloc_buffers(sift_cuda_chain *c, sift_error *err)
{
    sift__gpu_dev *d = &c->dev;
    const size_t S = (size_t)c->params.n_seq_max, V = (size_t)c->plan.n_vocab;
    const size_t stride = (V + 3) & ~(size_t)3, nc = (V + SIFT_GPU_CHUNK - 1) / SIFT_GPU_CHUNK;
    const size_t w = c->plan.window > 0 ? (size_t)c->plan.window : 1, cap = c->cap > 0 ? (size_t)c->cap : 1;
    const size_t n_ops = c->plan.n_ops > 0 ? (size_t)c->plan.n_ops : 1;
    const int lists = V > SIFT_GPU_SMALL && c->plan.n_ops > 0;
    d->n_vocab = c->plan.n_vocab;
    d->n_seq_max = c->params.n_seq_max;
    d->n_chunks = (int32_t)nc;
    d->n_ops = c->plan.n_ops;
    d->stride = (int64_t)stride;
    d->window = (int32_t)w;
    d->cap = (int32_t)cap;
    for (int32_t i = 0; i < c->plan.n_ops; i++) d->kinds[i] = (int8_t)c->plan.ops[i].kind;
    c->bias_cap = 64;
    for (size_t r = 0; r < S; r++)
        if (c->rows[r].n_bias > c->bias_cap) c->bias_cap = c->rows[r].n_bias;
    int bad = 0;
    bad |= dmalloc((void **)&d->rows, S * sizeof *d->rows);
    bad |= dmalloc((void **)&c->d_prm, n_ops * S * sizeof *c->d_prm);
    bad |= dmalloc((void **)&c->d_bias, (size_t)c->bias_cap * sizeof *c->d_bias);
    if (lists)
        for (int b = 0; b < 2; b++) {
            bad |= dmalloc((void **)&d->lid[b], S * stride * sizeof(int32_t));
            bad |= dmalloc((void **)&d->llg[b], S * stride * sizeof(float));
        }
    if (lists) {
        bad |= dmalloc((void **)&d->hcnt, S * SIFT_GPU_NBINS * sizeof *d->hcnt);
        bad |= dmalloc((void **)&d->hmass, S * SIFT_GPU_NBINS * sizeof *d->hmass);
    }
    bad |= dmalloc((void **)&d->pa, S * nc * sizeof *d->pa);
    bad |= dmalloc((void **)&d->pb, S * nc * sizeof *d->pb);
    bad |= dmalloc((void **)&d->pd, S * nc * sizeof *d->pd);
    bad |= dmalloc((void **)&d->pk, S * nc * sizeof *d->pk);
    bad |= dmalloc((void **)&d->ring, S * w * sizeof *d->ring);
    bad |= dmalloc((void **)&d->ring_first, S * sizeof *d->ring_first);
    bad |= dmalloc((void **)&d->ring_count, S * sizeof *d->ring_count);
    bad |= dmalloc((void **)&d->pen_tok, S * w * sizeof *d->pen_tok);
    bad |= dmalloc((void **)&d->pen_cnt, S * w * sizeof *d->pen_cnt);
    bad |= dmalloc((void **)&d->pen_n, S * sizeof *d->pen_n);
    bad |= dmalloc((void **)&d->rng, S * sizeof *d->rng);
    bad |= dmalloc((void **)&d->hid, S * cap * sizeof *d->hid);
    bad |= dmalloc((void **)&d->hlg, S * cap * sizeof *d->hlg);
    bad |= dmalloc((void **)&d->hp, S * cap * sizeof *d->hp);
    bad |= dmalloc((void **)&d->out, S * sizeof *d->out);
    bad |= dmalloc((void **)&d->tokens, S * sizeof *d->tokens);
    bad |= dmalloc((void **)&c->d_accept, S * sizeof *c->d_accept);
    bad |= hmalloc((void **)&c->h_prm, n_ops * S * sizeof *c->h_prm);
    bad |= hmalloc((void **)&c->h_bias, (size_t)c->bias_cap * sizeof *c->h_bias);
    bad |= hmalloc((void **)&c->h_out, S * sizeof *c->h_out);
    bad |= hmalloc((void **)&c->h_hid, S * cap * sizeof *c->h_hid);
    bad |= hmalloc((void **)&c->h_hlg, S * cap * sizeof *c->h_hlg);
    bad |= hmalloc((void **)&c->h_hp, S * cap * sizeof *c->h_hp);
    bad |= hmalloc((void **)&c->h_accept, S * sizeof *c->h_accept);
    d->accept = c->d_accept;
    d->prm = c->d_prm;
    d->bias = c->d_bias;
    if (bad) {
        (void)cudaGetLastError();
        return sift__error_set(err, SIFT_E_NOMEM, "device chain: out of device or pinned memory (%zu rows of %zu logits)", S, V);
    }
    /* zero state: histograms must start (and are always left) zero; windows empty */
    cudaError_t e = cudaSuccess;
    if (lists) {
        if (e == cudaSuccess) e = cudaMemset(d->hcnt, 0, S * SIFT_GPU_NBINS * sizeof *d->hcnt);
        if (e == cudaSuccess) e = cudaMemset(d->hmass, 0, S * SIFT_GPU_NBINS * sizeof *d->hmass);
    }
    if (e == cudaSuccess) e = cudaMemset(d->rows, 0, S * sizeof *d->rows);
    if (e == cudaSuccess) e = cudaMemset(d->ring_first, 0, S * sizeof *d->ring_first);
    if (e == cudaSuccess) e = cudaMemset(d->ring_count, 0, S * sizeof *d->ring_count);
    if (e == cudaSuccess) e = cudaMemset(d->rng, 0, S * sizeof *d->rng);
    if (e == cudaSuccess) e = cudaMemset(d->pen_n, 0, S * sizeof *d->pen_n);
    if (e == cudaSuccess) e = (cudaError_t)sift__gpu_prepare();
    if (e != cudaSuccess) return cuda_fail(c, err, e, "initializing device memory");
    return SIFT_OK;
}

/* The chain of a spec (items NULL) or of items already made from sampling params. */
static sift_cuda_chain *create(const char *spec, sift__chain_items *items, const sift_chain_env *env,
                               const sift_cuda_params *params, sift_error *err)
{
    if (!params) {
        sift__error_set(err, SIFT_E_INVAL, "device chain: no params");
        return NULL;
    }
    if (params->n_seq_max < 1 || params->n_seq_max > 65535) {
        sift__error_set(err, SIFT_E_INVAL, "device chain: n_seq_max %d out of range [1, 65535]", (int)params->n_seq_max);
        return NULL;
    }
    if (params->handoff_cap < 0 || params->handoff_cap > params->n_vocab) {
        sift__error_set(err, SIFT_E_INVAL, "device chain: handoff_cap %d out of range [0, n_vocab]", (int)params->handoff_cap);
        return NULL;
    }
    const int n_dev = sift_cuda_device_count();
    if (n_dev == 0) {
        sift__error_set(err, SIFT_E_UNSUPPORTED, "device chain: no CUDA device (or no driver) is available");
        return NULL;
    }
    if (params->device < 0 || params->device >= n_dev) {
        sift__error_set(err, SIFT_E_INVAL, "device chain: device %d does not exist (%d device%s)", (int)params->device, n_dev,
                       n_dev == 1 ? "" : "s");
        return NULL;
    }
    sift_cuda_chain *c = calloc(1, sizeof *c);
    if (!c) {
        sift__error_set(err, SIFT_E_NOMEM, "device chain: out of memory");
        return NULL;
    }
    c->params = *params;
    c->env = env ? *env : (sift_chain_env){.n_vocab = 0, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    c->env.n_vocab = params->n_vocab;
    const int32_t S = params->n_seq_max;
    c->rows = calloc((size_t)S, sizeof *c->rows);
    c->rowp = calloc((size_t)S, sizeof *c->rowp);
    c->tails = calloc((size_t)S, sizeof *c->tails);
    c->cand = calloc((size_t)S, sizeof *c->cand);
    c->cand_base = calloc((size_t)S, sizeof *c->cand_base);
    c->chosen = calloc((size_t)S, sizeof *c->chosen);
    if (!c->rows || !c->rowp || !c->tails || !c->cand || !c->cand_base || !c->chosen) {
        sift__error_set(err, SIFT_E_NOMEM, "device chain: out of memory");
        goto fail;
    }
    sift__gpu_rowspec base;
    if ((items ? sift__gpu_plan_items(items, &c->env, params->n_vocab, params->cpu_dist, &c->plan, &base, err)
               : sift__gpu_plan_spec(spec, &c->env, params->n_vocab, params->cpu_dist, &c->plan, &base, err)) != SIFT_OK)
        goto fail;
    c->rows[0] = base;
    for (int32_t r = 0; r < S; r++) {
        c->rowp[r] = &c->rows[r];
        if (r > 0) { /* every row starts with the spec's parameters (its tail items stay in row 0) */
            c->rows[r] = base;
            c->rows[r].bias = NULL;
            memset(&c->rows[r].tail, 0, sizeof c->rows[r].tail);
            if (base.n_bias) {
                c->rows[r].bias = malloc((size_t)base.n_bias * sizeof *base.bias);
                if (!c->rows[r].bias) {
                    sift__error_set(err, SIFT_E_NOMEM, "device chain: out of memory");
                    goto fail;
                }
                memcpy(c->rows[r].bias, base.bias, (size_t)base.n_bias * sizeof *base.bias);
            }
        }
        /* each row's own samplers (own state, own random seeds), from the base's tail items */
        if (sift__gpu_tail_chain(&base, &c->env, &c->tails[r], err) != SIFT_OK) goto fail;
    }
    c->cap_auto = params->handoff_cap == 0;
    c->cap = c->plan.selects ? 0 : params->handoff_cap > 0 ? params->handoff_cap : sift__gpu_row_bound(&c->plan, &base);
    if (!c->plan.selects) {
        for (int32_t r = 0; r < S; r++) {
            if (sift_candidates_init(&c->cand_base[r], (size_t)c->cap) != SIFT_OK) {
                sift__error_set(err, SIFT_E_NOMEM, "device chain: out of memory");
                goto fail;
            }
            c->cand[r] = c->cand_base[r];
        }
        c->scratch = malloc((size_t)c->cap * sizeof *c->scratch);
        if (!c->scratch || sift_candidates_init(&c->view, (size_t)c->cap) != SIFT_OK) {
            sift__error_set(err, SIFT_E_NOMEM, "device chain: out of memory");
            goto fail;
        }
    }
    {
        const dev_guard g = enter(params->device);
        sift_status st = g.ok ? alloc_buffers(c, err) : sift__error_set(err, SIFT_E_STATE, "device chain: cannot use device %d", params->device);
        leave(g);
        if (st != SIFT_OK) goto fail;
    }
    c->dirty = 1;
    return c;
fail:
    sift_cuda_chain_free(c);
    return NULL;
}

sift_cuda_chain *sift_cuda_chain_from_spec(const char *spec, const sift_chain_env *env, const sift_cuda_params *params,
                                           sift_error *err)
{
    return create(spec, NULL, env, params, err);
}

sift_cuda_chain *sift_cuda_chain_from_params(const sift_sampling_params *sp, const sift_chain_env *env,
                                             const sift_cuda_params *params, sift_error *err)
{
    sift__chain_items items;
    if (sift__chain_items_from_params(sp, env, &items, err) != SIFT_OK) return NULL;
    sift_cuda_chain *c = create(NULL, &items, env, params, err);
    sift__chain_items_free(&items);
    return c;
}

/* ---- shape ---------------------------------------------------------------------------------- */

int32_t sift_cuda_chain_n_device(const sift_cuda_chain *c) { return c ? c->plan.n_dev_items : 0; }
int32_t sift_cuda_chain_n_cpu(const sift_cuda_chain *c) { return c ? c->plan.n_items - c->plan.n_dev_items : 0; }
bool sift_cuda_chain_selects(const sift_cuda_chain *c) { return c && c->plan.selects; }

int sift_cuda_chain_describe(const sift_cuda_chain *c, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%s", c ? c->plan.desc : "");
}

/* ---- per sequence --------------------------------------------------------------------------- */

static sift_status reset_device_row(sift_cuda_chain *c, int32_t seq, sift_error *err)
{
    const dev_guard g = enter(c->params.device);
    cudaError_t e = cudaMemset(c->dev.ring_first + seq, 0, sizeof(int32_t));
    if (e == cudaSuccess) e = cudaMemset(c->dev.ring_count + seq, 0, sizeof(int32_t));
    if (e == cudaSuccess) e = cudaMemset(c->dev.rng + seq, 0, sizeof(unsigned long long));
    leave(g);
    return e == cudaSuccess ? SIFT_OK : cuda_fail(c, err, e, "resetting a sequence");
}

sift_status sift_cuda_chain_set_seq(sift_cuda_chain *c, int32_t seq, const char *spec, const sift_chain_env *env,
                                    sift_error *err)
{
    if (!c || !spec) return sift__error_set(err, SIFT_E_INVAL, "device chain: no %s", !c ? "chain" : "spec");
    if (seq < 0 || seq >= c->params.n_seq_max)
        return sift__error_set(err, SIFT_E_INVAL, "device chain: sequence %d out of range [0, %d)", (int)seq, (int)c->params.n_seq_max);
    sift_chain_env e = env ? *env : c->env;
    e.n_vocab = c->params.n_vocab;
    sift__gpu_rowspec row;
    sift_status st = sift__gpu_plan_row(&c->plan, spec, &e, &row, err);
    if (st != SIFT_OK) return st;
    if (!c->plan.selects && sift__gpu_row_bound(&c->plan, &row) > c->cap) {
        sift__gpu_rowspec_free(&row);
        return sift__error_set(err, SIFT_E_INVAL,
                              "device chain: this sequence can hand %d candidates to its CPU tail; the chain holds %d (a smaller top_k, or create it with a larger handoff_cap)",
                              (int)sift__gpu_row_bound(&c->plan, &row), (int)c->cap);
    }
    sift_chain *tail = NULL;
    if ((st = sift__gpu_tail_chain(&row, &e, &tail, err)) != SIFT_OK) {
        sift__gpu_rowspec_free(&row);
        return st;
    }
    sift__gpu_rowspec_free(&c->rows[seq]);
    c->rows[seq] = row;
    sift_chain_free(c->tails[seq]);
    c->tails[seq] = tail;
    c->dirty = 1;
    return reset_device_row(c, seq, err);
}

sift_status sift_cuda_chain_set_seed(sift_cuda_chain *c, int32_t seq, uint32_t seed)
{
    if (!c || seq < 0 || seq >= c->params.n_seq_max) return SIFT_E_INVAL;
    const uint32_t s = sift__seed_resolve(seed);
    for (int32_t i = 0; i < c->plan.n_ops; i++)
        if (c->plan.ops[i].kind == SIFT_GPU_OP_DIST) c->rows[seq].prm[i].seed = s;
    c->dirty = 1;
    const dev_guard g = enter(c->params.device);
    const cudaError_t e = cudaMemset(c->dev.rng + seq, 0, sizeof(unsigned long long));
    leave(g);
    return e == cudaSuccess ? SIFT_OK : cuda_fail(c, NULL, e, "reseeding");
}

sift_status sift_cuda_chain_reset_seq(sift_cuda_chain *c, int32_t seq)
{
    if (!c || seq < 0 || seq >= c->params.n_seq_max) return SIFT_E_INVAL;
    if (c->tails[seq]) sift_chain_reset(c->tails[seq]);
    return reset_device_row(c, seq, NULL);
}

/* ---- running ---------------------------------------------------------------------------------- */

/* the rows' parameters into the pinned mirror and onto the device (op-major) */
static sift_status upload_params(sift_cuda_chain *c, cudaStream_t st, sift_error *err)
{
    const int32_t S = c->params.n_seq_max, n_ops = c->plan.n_ops;
    /* the pinned mirror may still feed the previous upload: let it finish (parameters
     * change rarely; this is the one wait a run can have, and never inside a capture) */
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(st, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) {
        (void)cudaGetLastError();
        return sift__error_set(err, SIFT_E_STATE,
                              "device chain: parameters changed since the last run; run once outside the capture first");
    }
    cudaError_t e0 = cudaDeviceSynchronize();
    if (e0 != cudaSuccess) return cuda_fail(c, err, e0, "waiting before a parameter upload");
    int32_t total = 0;
    for (int32_t r = 0; r < S; r++) total += c->rows[r].n_bias;
    if (total > c->bias_cap) { /* a larger pool (nothing in flight uses the old one now) */
        cudaFree(c->d_bias);
        cudaFreeHost(c->h_bias);
        c->d_bias = NULL;
        c->h_bias = NULL;
        if (dmalloc((void **)&c->d_bias, (size_t)total * sizeof *c->d_bias) || hmalloc((void **)&c->h_bias, (size_t)total * sizeof *c->h_bias)) {
            c->bias_cap = 0;
            c->dev.bias = NULL;
            (void)cudaGetLastError();
            return sift__error_set(err, SIFT_E_NOMEM, "device chain: out of memory for %d logit biases", (int)total);
        }
        c->bias_cap = total;
        c->dev.bias = c->d_bias;
    }
    int32_t off = 0;
    for (int32_t r = 0; r < S; r++) {
        const sift__gpu_rowspec *row = &c->rows[r];
        for (int32_t op = 0; op < n_ops; op++) {
            sift__gpu_param pm = row->prm[op];
            if (c->plan.ops[op].kind == SIFT_GPU_OP_BIAS) pm.off += off; /* into the shared pool */
            c->h_prm[(size_t)op * (size_t)S + (size_t)r] = pm;
        }
        if (row->n_bias) memcpy(c->h_bias + off, row->bias, (size_t)row->n_bias * sizeof *row->bias);
        off += row->n_bias;
    }
    cudaError_t e = cudaSuccess;
    if (n_ops) e = cudaMemcpyAsync(c->d_prm, c->h_prm, (size_t)n_ops * (size_t)S * sizeof *c->h_prm, cudaMemcpyHostToDevice, st);
    if (e == cudaSuccess && off) e = cudaMemcpyAsync(c->d_bias, c->h_bias, (size_t)off * sizeof *c->h_bias, cudaMemcpyHostToDevice, st);
    if (e != cudaSuccess) return cuda_fail(c, err, e, "uploading parameters");
    c->dirty = 0;
    return SIFT_OK;
}

sift_status sift_cuda_chain_run(sift_cuda_chain *c, const float *d_logits, int64_t ld, int32_t n_seq,
                                sift_cuda_stream stream, sift_error *err)
{
    if (!c || !d_logits) return sift__error_set(err, SIFT_E_INVAL, "device chain: no %s", !c ? "chain" : "logits");
    if (n_seq < 1 || n_seq > c->params.n_seq_max)
        return sift__error_set(err, SIFT_E_INVAL, "device chain: n_seq %d out of range [1, %d]", (int)n_seq, (int)c->params.n_seq_max);
    if (ld < c->params.n_vocab)
        return sift__error_set(err, SIFT_E_INVAL, "device chain: row stride %lld is shorter than n_vocab (%d)", (long long)ld,
                              (int)c->params.n_vocab);
    cudaStream_t st = (cudaStream_t)stream;
    const dev_guard g = enter(c->params.device);
    sift_status status = SIFT_OK;
    if (c->broken) { /* a failed run may have left histograms or counters half-written */
        const size_t S = (size_t)c->params.n_seq_max;
        cudaError_t e = cudaSuccess;
        if (c->dev.hcnt) e = cudaMemsetAsync(c->dev.hcnt, 0, S * SIFT_GPU_NBINS * sizeof *c->dev.hcnt, st);
        if (e == cudaSuccess && c->dev.hmass) e = cudaMemsetAsync(c->dev.hmass, 0, S * SIFT_GPU_NBINS * sizeof *c->dev.hmass, st);
        if (e != cudaSuccess) {
            status = cuda_fail(c, err, e, "clearing after an error");
            goto out;
        }
        c->broken = 0;
    }
    if (c->dirty && (status = upload_params(c, st, err)) != SIFT_OK) goto out;
    c->dev.in = d_logits;
    c->dev.ld = ld;
    c->dev.in_vec = ((uintptr_t)d_logits % 16 == 0) && (ld % 4 == 0);
    c->dev.n_seq = n_seq;
    {
        sift__gpu_step steps[SIFT_GPU_MAX_STEPS];
        const int32_t n_steps = sift__gpu_steps(&c->plan, c->rowp, n_seq, steps);
        c->dev.tail_cap = sift__gpu_tail_cap(&c->plan, c->rowp, n_seq);
        const int e = sift__gpu_launch(&c->dev, steps, n_steps, st);
        if (e != 0) {
            status = cuda_fail(c, err, (cudaError_t)e, "launching");
            goto out;
        }
    }
    c->ran = 1;
    c->fetched = 0;
    c->n_seq = n_seq;
out:
    leave(g);
    return status;
}

sift_status sift_cuda_chain_fetch(sift_cuda_chain *c, sift_cuda_stream stream, sift_error *err)
{
    if (!c) return sift__error_set(err, SIFT_E_INVAL, "device chain: no chain");
    if (!c->ran) return sift__error_set(err, SIFT_E_STATE, "device chain: nothing was run");
    cudaStream_t st = (cudaStream_t)stream;
    const dev_guard g = enter(c->params.device);
    const size_t n = (size_t)c->n_seq, cap = (size_t)c->cap;
    cudaError_t e = cudaMemcpyAsync(c->h_out, c->dev.out, n * sizeof *c->h_out, cudaMemcpyDeviceToHost, st);
    if (cap && e == cudaSuccess) e = cudaMemcpyAsync(c->h_hid, c->dev.hid, n * cap * sizeof *c->h_hid, cudaMemcpyDeviceToHost, st);
    if (cap && e == cudaSuccess) e = cudaMemcpyAsync(c->h_hlg, c->dev.hlg, n * cap * sizeof *c->h_hlg, cudaMemcpyDeviceToHost, st);
    if (cap && e == cudaSuccess) e = cudaMemcpyAsync(c->h_hp, c->dev.hp, n * cap * sizeof *c->h_hp, cudaMemcpyDeviceToHost, st);
    leave(g);
    if (e != cudaSuccess) return cuda_fail(c, err, e, "copying results");
    c->fetched = 1;
    return SIFT_OK;
}

sift_status sift_cuda_chain_accept(sift_cuda_chain *c, const sift_token *tokens, int32_t n_seq, sift_cuda_stream stream,
                                   sift_error *err)
{
    if (!c || !tokens) return sift__error_set(err, SIFT_E_INVAL, "device chain: no %s", !c ? "chain" : "tokens");
    if (n_seq < 1 || n_seq > c->params.n_seq_max)
        return sift__error_set(err, SIFT_E_INVAL, "device chain: n_seq %d out of range [1, %d]", (int)n_seq, (int)c->params.n_seq_max);
    if (c->plan.window == 0) return SIFT_OK; /* no device state depends on accepted tokens */
    cudaStream_t st = (cudaStream_t)stream;
    const dev_guard g = enter(c->params.device);
    /* the pinned buffer may still feed a copy of the previous accept */
    cudaError_t e = cudaStreamSynchronize(st);
    if (e == cudaSuccess) {
        memcpy(c->h_accept, tokens, (size_t)n_seq * sizeof *tokens);
        e = cudaMemcpyAsync(c->d_accept, c->h_accept, (size_t)n_seq * sizeof *tokens, cudaMemcpyHostToDevice, st);
    }
    if (e == cudaSuccess) {
        sift__gpu_dev d = c->dev;
        d.n_seq = n_seq;
        e = (cudaError_t)sift__gpu_accept(&d, st);
    }
    leave(g);
    return e == cudaSuccess ? SIFT_OK : cuda_fail(c, err, e, "accepting tokens");
}

sift_status sift_cuda_chain_finish(sift_cuda_chain *c, sift_cuda_stream stream, sift_token *tokens, sift_error *err)
{
    if (!c) return sift__error_set(err, SIFT_E_INVAL, "device chain: no chain");
    /* fetched: also after replaying a captured run + fetch, which the host cannot see */
    if (!c->ran && !c->fetched) return sift__error_set(err, SIFT_E_STATE, "device chain: nothing was run");
    sift_status st = SIFT_OK;
    if (!c->fetched && (st = sift_cuda_chain_fetch(c, stream, err)) != SIFT_OK) return st;
    const dev_guard g = enter(c->params.device);
    const cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    leave(g);
    if (e != cudaSuccess) return cuda_fail(c, err, e, "running");
    int any_cpu = 0;
    for (int32_t r = 0; r < c->n_seq; r++) {
        const sift__gpu_out *o = &c->h_out[r];
        sift_token tok = o->token;
        if (tok < 0 && c->tails[r]) {
            c->cand[r] = c->cand_base[r];
            st = sift__gpu_handoff_unpack(o, c->h_hid + (size_t)r * (size_t)c->cap, c->h_hlg + (size_t)r * (size_t)c->cap,
                                          c->h_hp + (size_t)r * (size_t)c->cap, c->scratch, &c->cand[r]);
            if (st != SIFT_OK) return sift__error_set(err, st, "device chain: row %d handed over %d candidates (capacity %d)", (int)r,
                                                     (int)o->n, (int)c->cap);
            tok = sift_chain_apply(c->tails[r], &c->cand[r]);
            if (tok != SIFT_TOKEN_NULL) sift_chain_accept(c->tails[r], tok);
            any_cpu = 1;
        }
        /* a token the device chose is in its windows already */
        c->chosen[r] = o->token >= 0 ? SIFT_TOKEN_NULL : tok;
        if (tokens) tokens[r] = tok;
    }
    /* the CPU's choices into the device's penalty windows */
    if (any_cpu) st = sift_cuda_chain_accept(c, c->chosen, c->n_seq, stream, err);
    return st;
}

sift_status sift_cuda_chain_sample(sift_cuda_chain *c, const float *d_logits, int64_t ld, int32_t n_seq,
                                   sift_cuda_stream stream, sift_token *tokens, sift_error *err)
{
    sift_status st = sift_cuda_chain_run(c, d_logits, ld, n_seq, stream, err);
    if (st == SIFT_OK) st = sift_cuda_chain_fetch(c, stream, err);
    if (st == SIFT_OK) st = sift_cuda_chain_finish(c, stream, tokens, err);
    return st;
}

const int32_t *sift_cuda_chain_tokens_device(const sift_cuda_chain *c) { return c ? c->dev.tokens : NULL; }

sift_status sift_cuda_chain_candidates(sift_cuda_chain *c, int32_t seq, sift_candidates *view)
{
    if (!c || !view || seq < 0 || seq >= c->params.n_seq_max) return SIFT_E_INVAL;
    if (!c->fetched || seq >= c->n_seq || c->plan.selects || c->h_out[seq].token >= 0) return SIFT_E_STATE;
    const size_t at = (size_t)seq * (size_t)c->cap;
    const sift_status st = sift__gpu_handoff_unpack(&c->h_out[seq], c->h_hid + at, c->h_hlg + at, c->h_hp + at, c->scratch, &c->view);
    if (st == SIFT_OK) *view = c->view;
    return st;
}
