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
 */
#include <stdlib.h>
#include <time.h>

#include "core/status.h"
#include "spec/spec.h"

struct sift_spec {
    sift_context *ctx;
    sift_seq_id seq;
    sift_draft *d;
    sift_batch batch;
    sift_token *draft;
    int32_t n_vocab;
    sift_spec_stats st;
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
    if (s->d && cap > 0) {
        const double t0 = now_ms();
        k = sift_draft_propose(s->d, s->draft, cap, err);
        s->st.t_draft_ms += now_ms() - t0;
        if (k < 0) return k;
    }
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
    s->st.t_verify_ms += now_ms() - t0;
    if (s->d) {
        sift_error e2 = {0};
        if (n && sift_draft_push(s->d, out, n, &e2) != SIFT_OK) {
            if (err) *err = e2;
            return e2.status;
        }
        sift__draft_feedback(s->d, k, acc);
    }
    res->n_tokens = n, res->n_drafted = k, res->n_accepted = acc;
    s->st.n_steps++;
    s->st.n_tokens += n;
    s->st.n_drafted += k;
    s->st.n_accepted += acc;
    return SIFT_OK;
}
