/*
 * verify.c - sift_spec: one target decode checks a whole draft (llama.cpp's
 * common_sampler_sample_and_accept_n, with the stream kept identical to plain generation).
 *
 * A step decodes [last, d_0 .. d_{k-1}] at pos .. pos + k with logits for every entry. Row i
 * holds the target's logits after last, d_0 .. d_{i-1}: exactly what a plain generation
 * would have after accepting those tokens, bit for bit, because every kernel computes a
 * token's values alone whatever its batch (model/kernels.h; tests/test_spec.c checks the
 * logits and the ctest spec_same_tokens the streams). Row by row the caller's chain samples
 * (one apply, one RNG draw, one accept per row, in order) and the step goes on while the
 * sample is the draft's token; the first sample that differs, or the one after the last
 * draft token, ends it. So every sampled token is an output token and the chain's state
 * (penalty windows, DRY, grammar stacks, mirostat, RNG) advances exactly as without
 * speculation; rows after the end are never sampled. The cache then loses what follows the
 * last accepted position (sift_kv_seq_rm), and the draft source learns the accepted tokens
 * and how many of its guesses survived (adaptive depth, draft.c).
 *
 * With no draft (no source, no guess, or no room) a step is a one-token decode and a sample:
 * plain generation, so a caller needs only this loop.
 *
 * How deep to draft (with the draft's adaptive flag; else n_max). A draft of k tokens that
 * the target accepts token by token with probability a yields E(k) = 1 + a + ... + a^k
 * tokens per pass and costs C(k) = V(k + 1) + k * c: the verification of k + 1 tokens and
 * drafting k. The step drafts the k <= n_max that maximizes E(k) / C(k), measured on this
 * machine: V(n) = b + (n - 1) * s is fitted by least squares to the steps' own times (decayed,
 * so it follows a machine whose load changes), c is the draft's time per drafted token
 * (near zero for prompt lookup, a decode of the draft model otherwise), a the draft's
 * estimate (draft.c). Batched verification is nearly free where decoding is bound by memory
 * (one weight pass for all k + 1 tokens) and costs almost k + 1 passes where it is bound by
 * compute, as on a loaded two-core machine; a draft model that costs more than its accepted
 * tokens save gets k = 0, i.e. plain generation, with a probe of k = 1 after PROBE_EVERY
 * steps to notice when that changes; a probe the target refuses doubles the wait (up to
 * PROBE_MAX), because a draft model that has sat out must first catch up on every token
 * since its last draft. Until the fit has data, the draft's own rule decides.
 */
#include <stdlib.h>
#include <time.h>

#include "core/status.h"
#include "spec/spec.h"

#define COST_DECAY 0.95
#define COST_WARMUP 6   /* steps before the cost model decides */
#define PROBE_EVERY 16  /* a one-token draft after this many steps without drafting, */
#define PROBE_MAX 512   /* doubled after each refused probe up to this */

struct sift_spec {
    sift_context *ctx;
    sift_seq_id seq;
    sift_draft *d;
    sift_batch batch;
    sift_token *draft;
    int32_t n_vocab;
    sift_spec_stats st;
    /* cost model: decayed least-squares sums of (x = batch size - 1, y = ms), draft ms and tokens */
    double w, sx, sxx, sy, sxy, dt, dn;
    int64_t n_obs;
    int32_t idle;     /* steps since the last draft */
    int32_t probe_at; /* idle steps before the next probe */
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

sift_spec *sift_spec_new(sift_context *target, sift_seq_id seq, sift_draft *d, sift_error *err)
{
    if (!target || seq < 0 || (uint32_t)seq >= sift_n_seq_max(target)) {
        sift__error_set(err, SIFT_E_INVAL, "spec: no target context, or sequence %d out of range", seq);
        return NULL;
    }
    if (sift_model_is_recurrent(sift_context_model(target))) { /* rejected drafts are rolled back with sift_kv_seq_rm */
        sift__error_set(err, SIFT_E_UNSUPPORTED, "spec: the target keeps a recurrent state (qwen35), which cannot take back "
                        "rejected draft tokens");
        return NULL;
    }
    sift_spec *s = calloc(1, sizeof *s);
    const int32_t nb = (int32_t)sift_n_batch(target);
    if (!s || !(s->draft = malloc((size_t)nb * sizeof *s->draft)) || sift_batch_init(&s->batch, nb, 1) != SIFT_OK) {
        if (s) free(s->draft);
        free(s);
        sift__error_set(err, SIFT_E_NOMEM, "spec: out of memory");
        return NULL;
    }
    s->ctx = target, s->seq = seq, s->d = d;
    s->n_vocab = sift_model_n_vocab(sift_context_model(target));
    return s;
}

void sift_spec_free(sift_spec *s)
{
    if (!s) return;
    sift_batch_free(&s->batch);
    free(s->draft);
    free(s);
}

sift_spec_stats sift_spec_get_stats(const sift_spec *s)
{
    return s ? s->st : (sift_spec_stats){0};
}

/* Record a step: n tokens verified in ms; draft_ms spent drafting k tokens. */
static void cost_observe(sift_spec *s, int32_t n, double ms, int32_t k, double draft_ms)
{
    const double x = n - 1;
    s->w = COST_DECAY * s->w + 1;
    s->sx = COST_DECAY * s->sx + x;
    s->sxx = COST_DECAY * s->sxx + x * x;
    s->sy = COST_DECAY * s->sy + ms;
    s->sxy = COST_DECAY * s->sxy + x * ms;
    if (k > 0) {
        s->dt = COST_DECAY * s->dt + draft_ms;
        s->dn = COST_DECAY * s->dn + k;
    }
    s->n_obs++;
}

/* The draft length with the best expected tokens per unit of time, 0..cap. */
static int32_t cost_depth(const sift_spec *s, int32_t cap)
{
    const double a = sift__draft_acceptance(s->d);
    const double var = s->w * s->sxx - s->sx * s->sx;
    double slope, base;
    if (var > 1e-6 * s->w * s->w) {
        slope = (s->w * s->sxy - s->sx * s->sy) / var;
        base = (s->sy - slope * s->sx) / s->w;
    } else { /* one batch size so far: assume each extra token costs a quarter of a pass */
        base = s->sy / (s->w + 0.25 * s->sx);
        slope = 0.25 * base;
    }
    if (slope < 0) slope = 0;
    if (base <= 0) return cap;
    const double c = s->dn > 0 ? s->dt / s->dn : 0;
    int32_t best = 0;
    double best_rate = 1.0 / base, e = 1, ak = 1;
    for (int32_t k = 1; k <= cap; k++) {
        ak *= a;
        e += ak;
        const double rate = e / (base + k * (slope + c));
        if (rate > best_rate) best = k, best_rate = rate;
    }
    return best;
}

sift_status sift_spec_step(sift_spec *s, sift_pos pos, sift_token last, int32_t room, const sift_spec_sampling *sampling,
                           sift_token *out, sift_spec_result *res, sift_error *err)
{
    if (!s || !sampling || !sampling->chain || !out || !res || room < 1 || pos < 0)
        return sift__error_set(err, SIFT_E_INVAL, "spec step: bad arguments");
    *res = (sift_spec_result){0};
    /* the draft: room for it in the output, the batch and the sequence's cells */
    int32_t cap = room - 1;
    if (cap > s->batch.capacity - 1) cap = s->batch.capacity - 1;
    const int32_t cells = (int32_t)sift_n_ctx_seq(s->ctx) - pos - 1;
    if (cap > cells) cap = cells;
    int32_t k = 0;
    double t_draft = 0;
    if (s->d && cap > 0) {
        const sift_draft_params *dp = &s->d->p;
        int32_t want = cap < dp->n_max ? cap : dp->n_max;
        if (dp->adaptive) {
            if (s->n_obs < COST_WARMUP) {
                const int32_t depth = sift_draft_depth(s->d);
                if (want > depth) want = depth;
            } else {
                want = cost_depth(s, want);
                if (want == 0 && s->idle >= (s->probe_at ? s->probe_at : PROBE_EVERY)) want = 1;
            }
        }
        const double t0 = now_ms();
        k = want > 0 ? sift__draft_propose_n(s->d, s->draft, want, err) : 0;
        t_draft = now_ms() - t0;
        s->st.t_draft_ms += t_draft;
        if (k < 0) return k;
    }
    s->idle = k > 0 ? 0 : s->idle + 1;
    const double t0 = now_ms();
    sift_batch_clear(&s->batch);
    sift_batch_add(&s->batch, last, pos, &s->seq, 1, true);
    for (int32_t i = 0; i < k; i++) sift_batch_add(&s->batch, s->draft[i], pos + 1 + i, &s->seq, 1, true);
    const sift_status st = sift_decode(s->ctx, &s->batch, err);
    if (st != SIFT_OK) return st;
    int32_t n = 0, acc = 0;
    for (int32_t i = 0; i <= k; i++) {
        const float *logits = sift_get_logits_ith(s->ctx, i);
        const sift_token t = sampling->grammar ? sift_grammar_chain_sample(sampling->grammar, sampling->chain, logits,
                                                                           s->n_vocab, sampling->mode, NULL)
                                               : sift_chain_sample(sampling->chain, logits, s->n_vocab);
        if (t == SIFT_TOKEN_NULL) {
            res->no_token = true;
            break;
        }
        out[n++] = t;
        const bool same = i < k && t == s->draft[i];
        acc += same;
        if (sampling->on_token && !sampling->on_token(sampling->user, t)) {
            res->stopped = true;
            break;
        }
        if (!same) break;
    }
    /* the cache keeps last and the accepted tokens but the newest (positions < pos + n) */
    sift_kv_seq_rm(s->ctx, s->seq, pos + n, -1);
    const double t_verify = now_ms() - t0;
    s->st.t_verify_ms += t_verify;
    cost_observe(s, k + 1, t_verify, k, t_draft);
    if (s->d) {
        sift_error e2 = {0};
        if (n && sift_draft_push(s->d, out, n, &e2) != SIFT_OK) {
            if (err) *err = e2;
            return e2.status;
        }
        sift__draft_feedback(s->d, k, acc);
        if (k > 0) { /* a probe (or any draft) that the target refused makes the next probe wait longer */
            const int32_t wait = s->probe_at ? s->probe_at : PROBE_EVERY;
            s->probe_at = acc > 0 ? PROBE_EVERY : wait * 2 > PROBE_MAX ? PROBE_MAX : wait * 2;
        }
    }
    res->n_tokens = n, res->n_drafted = k, res->n_accepted = acc;
    s->st.n_steps++;
    s->st.n_tokens += n;
    s->st.n_drafted += k;
    s->st.n_accepted += acc;
    return SIFT_OK;
}
