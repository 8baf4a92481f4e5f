/*
 * sample_ex.c - sift_chain_sample_ex: one sampling step with grammar and probabilities on
 * the chain's fast path (what `sift serve` runs per slot and token).
 *
 * The chain's pick comes from sift__chain_pick, the fast step of sift_chain_sample when the
 * chain allows one: greedy, dist, top_k, min_p or top_p straight on the logits, so the
 * common step copies nothing. With a grammar in the rejection mode the pick is checked
 * against the grammar; only a refused pick costs a fill, the grammar's apply and a second
 * apply of the chain (llama.cpp's common_sampler_sample; the fast step consumes the RNG
 * exactly as the general path, so the tokens are sift_grammar_chain_sample's). The
 * grammar-first mode always fills.
 *
 * Probabilities, only when asked for: after the chain, sift_candidates_top of what the chain
 * left (a lazy fast step builds its candidates then); or llama-server's default, the softmax
 * of the raw logits, computed here on the logits themselves with sift_candidates_top's
 * selection (best first, the lower id winning ties) and sums, so the figures are the same
 * as filling a candidate array first, without the copy.
 */
#include <math.h>
#include <stdlib.h>

#include "core/chain.h"
#include "sift.h"

/* sift_candidates_top on unsorted candidates filled from lg, without the fill. */
static int32_t raw_top(const float *lg, int32_t nv, int32_t n, sift_token *ids, float *probs, sift_token tok,
                       float *p_tok)
{
    if (n > nv) n = nv;
    int32_t have = 0;
    for (int32_t i = 0; i < nv; i++) {
        const float v = lg[i];
        if (have == n && !(v > lg[ids[n - 1]])) continue;
        int32_t j = have < n ? have++ : n - 1;
        while (j > 0 && v > lg[ids[j - 1]]) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = i;
    }
    /* the maximum for the sums: the best entry (NaN-free logits), as sift_candidates_top */
    float mx = lg[0];
    for (int32_t i = 1; i < nv; i++) mx = lg[i] > mx ? lg[i] : mx;
    double sum = 0.0;
    for (int32_t i = 0; i < nv; i++) sum += expf(lg[i] - mx);
    const float top = have ? lg[ids[0]] : mx;
    double sum_top = sum;
    if (have && top != mx) { /* only with NaNs: keep sift_candidates_top's reference point */
        sum_top = 0.0;
        for (int32_t i = 0; i < nv; i++) sum_top += expf(lg[i] - top);
    }
    for (int32_t j = 0; j < have; j++) probs[j] = (float)((double)expf(lg[ids[j]] - top) / sum_top);
    *p_tok = tok >= 0 && tok < nv ? (float)((double)expf(lg[tok] - mx) / sum) : 0.0f;
    return have;
}

/* The probability of the selected candidate under the candidates' current logits. */
static float cand_selected_p(const sift_candidates *c)
{
    if (c->selected < 0 || (size_t)c->selected >= c->size) return 0.0f;
    if (c->flags & SIFT_CAND_PROBS) return c->p[c->selected];
    float mx = -INFINITY;
    for (size_t i = 0; i < c->size; i++) mx = c->logit[i] > mx ? c->logit[i] : mx;
    double sum = 0;
    for (size_t i = 0; i < c->size; i++) sum += expf(c->logit[i] - mx);
    return sum > 0 ? (float)((double)expf(c->logit[c->selected] - mx) / sum) : 0.0f;
}

sift_token sift_chain_sample_ex(sift_chain *chain, sift_sampler *grammar, const float *logits, int32_t n_vocab,
                                sift_grammar_mode mode, sift_sample_probs *pr)
{
    if (pr) pr->n_out = 0, pr->p_selected = 0.0f, pr->refused = false;
    if (!chain || !logits || n_vocab < 1) return SIFT_TOKEN_NULL;
    sift_token tok;
    if (grammar && mode == SIFT_GRAMMAR_FIRST) {
        if (sift_chain_fill(chain, logits, n_vocab, NULL) != SIFT_OK) return SIFT_TOKEN_NULL;
        sift_candidates *cand = sift_chain_candidates(chain);
        sift_sampler_apply(grammar, cand);
        sift__chain_trace(chain, sift_chain_n(chain), grammar, cand);
        tok = sift_chain_apply(chain, cand);
    } else {
        tok = sift__chain_pick(chain, logits, n_vocab);
        if (grammar && (tok == SIFT_TOKEN_NULL || !sift_grammar_sampler_allows(grammar, tok))) {
            if (pr) pr->refused = true;
            if (sift_chain_fill(chain, logits, n_vocab, NULL) != SIFT_OK) return SIFT_TOKEN_NULL;
            sift_candidates *cand = sift_chain_candidates(chain);
            sift_sampler_apply(grammar, cand);
            sift__chain_trace(chain, sift_chain_n(chain), grammar, cand);
            tok = sift_chain_apply(chain, cand);
            }
    }
    if (tok == SIFT_TOKEN_NULL) return tok;
    /* a grammar with the chain may leave nothing but -inf (the pick is then arbitrary): a
     * forbidden token is never returned (sift_grammar_chain_sample's rule) */
    if (grammar) {
        const float l = sift__chain_selected_logit(chain);
        if (l == -INFINITY || isnan(l) || !sift_grammar_sampler_allows(grammar, tok)) return SIFT_TOKEN_NULL;
    }
    if (pr && pr->n > 0 && pr->ids && pr->probs) {
        if (pr->post_sampling) {
            const sift_candidates *cand = sift_chain_candidates(chain); /* builds a lazy pick's */
            pr->n_out = (int32_t)sift_candidates_top(cand, (size_t)pr->n, pr->ids, NULL, pr->probs);
            pr->p_selected = cand_selected_p(cand);
        } else {
            pr->n_out = raw_top(logits, n_vocab, pr->n, pr->ids, pr->probs, tok, &pr->p_selected);
        }
    }
    if (grammar) sift_sampler_accept(grammar, tok);
    sift_chain_accept(chain, tok);
    return tok;
}
