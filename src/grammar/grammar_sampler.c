/*
 * grammar_sampler.c - the grammar sampler: llama.cpp's llama_sampler_init_grammar[_lazy_*]
 * semantics on top of the mask engine (mask.c) and the reference matcher (stacks.c).
 *
 *   apply   every candidate whose text cannot continue the grammar gets logit -inf; an
 *           end-of-generation token is allowed exactly when the grammar can end. A full
 *           array takes the engine's token bitset (one masking pass, SIMD); a short array
 *           (the rejection strategy's single pick) checks each candidate directly.
 *   accept  advances the parse by the token: its id against token elements (<[id]>), its
 *           bytes against everything else; a UTF-8 character may be split across tokens.
 *           An EOG token where the grammar can end changes nothing (llama.cpp); a token the
 *           grammar cannot take (apply would have masked it) puts the sampler in a "dead"
 *           state where only EOG is allowed - llama.cpp aborts the process there.
 *   reset   back to the start (and, when lazy, to waiting for a trigger).
 *   lazy    until a trigger appears, apply does nothing and accept only collects the output
 *           text. Triggers, as llama.cpp: a trigger token (the grammar then starts with that
 *           token), a trigger word (literal text anywhere; the grammar starts at the word),
 *           a trigger pattern (a regex searched in the output so far; one that starts with
 *           '^' and ends with '$' must match all of it; the grammar starts at the first
 *           non-empty capturing group, or at the match). On a trigger the tokens from that
 *           point are replayed into the grammar, the first one cut where the trigger starts.
 *
 * The rejection strategy (llama.cpp's common_sampler_sample with grammar_first = false) is
 * sift_grammar_chain_sample(): sample with the chain alone, keep the pick if the grammar
 * allows it, otherwise refill, apply the grammar, and sample again.
 *
 * Clones share the engine (and its caches) and copy the parse state.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <math.h>
#include <pcre2.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/candidates.h" /* SIFT__CAND_IDS_KEPT */
#include "core/status.h"
#include "grammar/compiler.h"
#include "grammar/mask.h"
#include "grammar/mask_apply.h"

#define SMALL_APPLY 32 /* at most this many candidates: check each one, no bitset */

/* Trigger configuration, immutable and shared by clones. */
typedef struct {
    _Atomic int refs;
    char **words;
    size_t *word_len;
    size_t n_words;
    pcre2_code **pats;
    bool *pat_full;
    size_t n_pats;
    sift_token *toks;
    size_t n_toks;
    uint32_t max_groups;
} triggers;

typedef struct {
    sift_token tok;
    uint32_t start, end; /* byte range in the trigger buffer */
} buf_tok;

typedef struct {
    sift__gx_engine *eng;
    triggers *trig;
    const sift__gx_mask_ops *mops; /* the masking pass at this CPU's level */
    sift__gx_arena ra;
    sift__gx_state st, t1, t2, t3;
    uint64_t *mask;
    bool lazy, awaiting, dead;
    bool over; /* the parse stacks outgrew GX_MAX_STACKS: nothing is allowed (dead is set too) */
    bool keep_banned; /* sift_grammar_params.keep_banned: never remove, always -inf */
    /* lazy: output collected while waiting */
    char *buf;
    size_t buf_n, buf_cap;
    buf_tok *toks;
    size_t n_toks, cap_toks;
    pcre2_match_data *md;
} grammar_ctx;

/* ---- triggers ------------------------------------------------------------------------------ */

static void triggers_release(triggers *t)
{
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1) return;
    for (size_t i = 0; i < t->n_words; i++) sift__gx_free(t->words[i]);
    sift__gx_free(t->words);
    sift__gx_free(t->word_len);
    for (size_t i = 0; i < t->n_pats; i++) pcre2_code_free(t->pats[i]);
    sift__gx_free(t->pats);
    sift__gx_free(t->pat_full);
    sift__gx_free(t->toks);
    sift__gx_free(t);
}

static int triggers_new(triggers **out, const sift_grammar_params *p, int32_t n_tokens, sift_error *err)
{
    triggers *t = sift__gx_calloc(1, sizeof *t);
    if (!t) return sift__error_set(err, SIFT_E_NOMEM, "out of memory");
    atomic_init(&t->refs, 1);
    int rc = SIFT_OK;
    if (p->n_trigger_words) {
        t->words = sift__gx_calloc(p->n_trigger_words, sizeof *t->words);
        t->word_len = sift__gx_calloc(p->n_trigger_words, sizeof *t->word_len);
        if (!t->words || !t->word_len) goto nomem;
        for (size_t i = 0; i < p->n_trigger_words; i++) {
            const char *w = p->trigger_words[i];
            if (!w || !*w) {
                rc = sift__error_set(err, SIFT_E_INVAL, "grammar trigger word %zu is empty", i);
                goto fail;
            }
            size_t n = strlen(w);
            if (!(t->words[i] = sift__gx_malloc(n + 1))) goto nomem;
            memcpy(t->words[i], w, n + 1);
            t->word_len[i] = n;
            t->n_words++;
        }
    }
    if (p->n_trigger_patterns) {
        t->pats = sift__gx_calloc(p->n_trigger_patterns, sizeof *t->pats);
        t->pat_full = sift__gx_calloc(p->n_trigger_patterns, sizeof *t->pat_full);
        if (!t->pats || !t->pat_full) goto nomem;
        for (size_t i = 0; i < p->n_trigger_patterns; i++) {
            const char *s = p->trigger_patterns[i];
            if (!s) {
                rc = sift__error_set(err, SIFT_E_INVAL, "grammar trigger pattern %zu is NULL", i);
                goto fail;
            }
            size_t n = strlen(s);
            int ec;
            PCRE2_SIZE eo;
            /* byte mode, like llama.cpp's std::regex over std::string: the output may end
             * inside a UTF-8 character */
            pcre2_code *c = pcre2_compile((PCRE2_SPTR)s, n, PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
            if (!c) {
                PCRE2_UCHAR m[128];
                pcre2_get_error_message(ec, m, sizeof m);
                rc = sift__error_set(err, SIFT_E_PARSE, "grammar trigger pattern %zu, offset %zu: %s", i, (size_t)eo, (char *)m);
                goto fail;
            }
            t->pats[i] = c;
            t->pat_full[i] = n >= 2 && s[0] == '^' && s[n - 1] == '$';
            uint32_t groups = 0;
            pcre2_pattern_info(c, PCRE2_INFO_CAPTURECOUNT, &groups);
            if (groups + 1 > t->max_groups) t->max_groups = groups + 1;
            t->n_pats++;
        }
    }
    if (p->n_trigger_tokens) {
        if (!(t->toks = sift__gx_malloc(p->n_trigger_tokens * sizeof *t->toks))) goto nomem;
        for (size_t i = 0; i < p->n_trigger_tokens; i++) {
            if (p->trigger_tokens[i] < 0 || p->trigger_tokens[i] >= n_tokens) {
                rc = sift__error_set(err, SIFT_E_INVAL, "grammar trigger token %d is not in the vocabulary", p->trigger_tokens[i]);
                goto fail;
            }
            t->toks[i] = p->trigger_tokens[i];
        }
        t->n_toks = p->n_trigger_tokens;
    }
    *out = t;
    return SIFT_OK;
nomem:
    rc = sift__error_set(err, SIFT_E_NOMEM, "out of memory");
fail:
    triggers_release(t);
    return rc;
}

/* Where in buf[0..n) the grammar starts, or SIZE_MAX if no trigger matched. */
static size_t trigger_find(grammar_ctx *c)
{
    triggers *t = c->trig;
    for (size_t i = 0; i < t->n_pats; i++) {
        uint32_t opts = t->pat_full[i] ? PCRE2_ANCHORED | PCRE2_ENDANCHORED : 0;
        int r = pcre2_match(t->pats[i], (PCRE2_SPTR)c->buf, c->buf_n, 0, opts, c->md, NULL);
        if (r <= 0) continue;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        for (int g = 1; g < r; g++)
            if (ov[2 * g] != PCRE2_UNSET && ov[2 * g + 1] > ov[2 * g]) return ov[2 * g];
        return ov[0];
    }
    /* words: the earliest occurrence of any (first listed wins a tie) */
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < t->n_words; i++) {
        const char *hit = memmem(c->buf, c->buf_n, t->words[i], t->word_len[i]);
        if (hit && (size_t)(hit - c->buf) < best) best = (size_t)(hit - c->buf);
    }
    return best;
}

/* ---- the matcher parts --------------------------------------------------------------------- */

static bool token_allowed(grammar_ctx *c, sift_token tok)
{
    const sift__gx_vocab *v = sift__gx_engine_vocab(c->eng);
    if (tok < 0 || tok >= v->n_tokens) return false;
    if (c->over) return false; /* over a limit: the generation ends with an error, not a token */
    if (c->dead) return (v->flags[tok] & GX_TOK_EOG) != 0; /* a dead grammar only lets generation end */
    const int r = sift__gx_token_verdict(&c->ra, &c->st, v, (uint32_t)tok, &c->t1, &c->t2);
    if (r == GX_E_STACKS) c->over = c->dead = true; /* the token's text multiplies the stacks past the limit */
    return r == 1; /* unknown: no */
}

#define ARENA_COMPACT_NODES (1u << 20) /* rebuild the stack arena past this many nodes */

static void feed_token(grammar_ctx *c, sift_token tok, const uint8_t *bytes, size_t len)
{
    if (c->dead) return;
    const int rc = sift__gx_state_accept_token(&c->ra, &c->st, (uint32_t)tok, bytes, len, &c->t1, &c->t2, &c->t3);
    if (rc != SIFT_OK) c->dead = true;
    if (rc == GX_E_STACKS) c->over = true;
    /* a very long generation keeps creating stacks; keep only the live ones now and then */
    if (!c->dead && c->ra.n > ARENA_COMPACT_NODES && sift__gx_state_compact(&c->ra, &c->st) != SIFT_OK) c->dead = true;
}

static int restart(grammar_ctx *c)
{
    c->dead = c->over = false;
    c->awaiting = c->lazy;
    c->buf_n = c->n_toks = 0;
    /* the real-stack arena only grows with distinct stacks; start afresh if it got big */
    if (c->ra.n > (1u << 20)) sift__gx_arena_clear(&c->ra);
    int rc = sift__gx_state_start(&c->ra, &c->st);
    if (rc != SIFT_OK) c->dead = true;
    if (rc == GX_E_STACKS) c->over = true;
    return rc;
}

/* ---- vtable -------------------------------------------------------------------------------- */

static const char *g_name(const sift_sampler *s)
{
    (void)s;
    return "grammar";
}

/* Remove banned candidates rather than write -inf over them when at most 1 in COMPACT_DIV
 * tokens is allowed (mask_apply.h): the removal costs about 12 bytes moved per allowed
 * token, the -inf pass about 4 bytes written per banned one plus the reads of every mask
 * word, so the removal wins well before this point; the margin keeps dense masks (free
 * strings) on the pass that writes nothing for allowed tokens. */
#define COMPACT_DIV 8

static void g_apply(sift_sampler *s, sift_candidates *cand)
{
    grammar_ctx *c = s->ctx;
    if (c->awaiting || !cand->size) {
        cand->flags |= SIFT__CAND_IDS_KEPT;
        return;
    }
    const sift__gx_vocab *v = sift__gx_engine_vocab(c->eng);
    size_t kept;
    if (cand->size <= SMALL_APPLY) {
        kept = 0;
        for (size_t i = 0; i < cand->size; i++) {
            if (token_allowed(c, cand->id[i])) kept++;
            else cand->logit[i] = -INFINITY;
        }
    } else {
        if (c->dead) { /* only EOG (over a limit: nothing) */
            memset(c->mask, 0, (size_t)v->n_words * sizeof *c->mask);
            for (uint32_t k = 0; k < v->n_eog && !c->over; k++) c->mask[v->eog[k] >> 6] |= (uint64_t)1 << (v->eog[k] & 63);
        } else if (sift__gx_engine_fill_mask(c->eng, &c->ra, &c->st, c->mask) != SIFT_OK) {
            /* out of memory in the cache: fall back to checking every candidate */
            for (size_t i = 0; i < cand->size; i++)
                if (!token_allowed(c, cand->id[i])) cand->logit[i] = -INFINITY;
            sift_candidates_logits_changed(cand);
            cand->sorted = false;
            return;
        }
        const bool ident = (cand->flags & SIFT_CAND_IDENTITY) && cand->size <= (size_t)v->n_tokens;
        if (ident && !c->keep_banned && cand->selected < 0) {
            const size_t n_ok = c->mops->count(c->mask, cand->size, cand->size / COMPACT_DIV);
            /* never down to nothing: a mask no candidate passes keeps llama.cpp's all -inf
             * array, which the callers' "no token left" checks read (sample_ex.c) */
            if (n_ok > 0 && n_ok <= cand->size / COMPACT_DIV) {
                cand->size = c->mops->compact(cand->id, cand->logit, cand->size, c->mask);
                sift_candidates_logits_changed(cand); /* p was not moved; the order was kept */
                return;
            }
        }
        kept = c->mops->apply(cand->id, cand->logit, cand->size, c->mask, (uint32_t)v->n_tokens, ident);
    }
    cand->flags |= SIFT__CAND_IDS_KEPT;
    if (kept < cand->size) {
        sift_candidates_logits_changed(cand);
        cand->sorted = false; /* -inf in the middle breaks a descending order */
    }
}

static void g_accept(sift_sampler *s, sift_token tok)
{
    grammar_ctx *c = s->ctx;
    const sift__gx_vocab *v = sift__gx_engine_vocab(c->eng);
    if (tok < 0 || tok >= v->n_tokens) {
        c->dead = true;
        return;
    }
    uint32_t len;
    const uint8_t *piece = sift__gx_vocab_text(v, (uint32_t)tok, &len);
    if (c->awaiting) {
        for (size_t i = 0; i < c->trig->n_toks; i++)
            if (c->trig->toks[i] == tok) {
                c->awaiting = false;
                c->buf_n = c->n_toks = 0;
                feed_token(c, tok, piece, len);
                return;
            }
        if (c->buf_n + len + 1 > c->buf_cap) {
            size_t ncap = (c->buf_n + len + 1) * 2;
            char *nb = sift__gx_realloc(c->buf, ncap);
            if (!nb) return; /* out of memory: this token is not seen by the triggers */
            c->buf = nb;
            c->buf_cap = ncap;
        }
        if (c->n_toks == c->cap_toks) {
            size_t ncap = c->cap_toks ? c->cap_toks * 2 : 64;
            buf_tok *nt = sift__gx_realloc(c->toks, ncap * sizeof *nt);
            if (!nt) return;
            c->toks = nt;
            c->cap_toks = ncap;
        }
        c->toks[c->n_toks++] = (buf_tok){tok, (uint32_t)c->buf_n, (uint32_t)(c->buf_n + len)};
        memcpy(c->buf + c->buf_n, piece, len);
        c->buf_n += len;
        c->buf[c->buf_n] = 0;
        size_t start = trigger_find(c);
        if (start == SIZE_MAX) return;
        c->awaiting = false;
        for (size_t i = 0; i < c->n_toks; i++) {
            const buf_tok *bt = &c->toks[i];
            if (bt->end <= start) continue;
            size_t from = bt->start < start ? start : bt->start;
            feed_token(c, bt->tok, (const uint8_t *)c->buf + from, bt->end - from);
        }
        c->buf_n = c->n_toks = 0;
        return;
    }
    if (v->flags[tok] & GX_TOK_EOG) {
        if (!sift__gx_state_can_end(&c->st)) c->dead = true;
        return;
    }
    if (v->flags[tok] & GX_TOK_EXCLUDED) {
        c->dead = true;
        return;
    }
    feed_token(c, tok, piece, len);
}

static void g_reset(sift_sampler *s) { restart(s->ctx); }

static void ctx_free(grammar_ctx *c)
{
    if (!c) return;
    sift__gx_state_free(&c->st);
    sift__gx_state_free(&c->t1);
    sift__gx_state_free(&c->t2);
    sift__gx_state_free(&c->t3);
    sift__gx_arena_free(&c->ra);
    sift__gx_free(c->mask);
    sift__gx_free(c->buf);
    sift__gx_free(c->toks);
    if (c->md) pcre2_match_data_free(c->md);
    triggers_release(c->trig);
    if (c->eng) sift__gx_engine_release(c->eng);
    sift__gx_free(c);
}

static void g_free(sift_sampler *s) { ctx_free(s->ctx); }

static grammar_ctx *ctx_new(sift__gx_engine *eng, triggers *trig, bool lazy, bool keep_banned)
{
    grammar_ctx *c = sift__gx_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->eng = eng;
    sift__gx_engine_retain(eng);
    c->trig = trig;
    if (trig) atomic_fetch_add(&trig->refs, 1);
    c->lazy = lazy;
    c->keep_banned = keep_banned;
    c->mops = sift__gx_mask_ops_best();
    const sift__gx_vocab *v = sift__gx_engine_vocab(eng);
    c->mask = sift__gx_malloc((size_t)v->n_words * sizeof *c->mask);
    if (!c->mask || sift__gx_arena_init(&c->ra, sift__gx_engine_grammar(eng)) != SIFT_OK) goto fail;
    if (trig && trig->n_pats && !(c->md = pcre2_match_data_create(trig->max_groups, NULL))) goto fail;
    return c;
fail:
    ctx_free(c);
    return NULL;
}

static sift_sampler *g_clone(const sift_sampler *s);

static const sift_sampler_i grammar_iface = {
    .name = g_name,
    .accept = g_accept,
    .apply = g_apply,
    .reset = g_reset,
    .clone = g_clone,
    .free = g_free,
};

static sift_sampler *g_clone(const sift_sampler *s)
{
    const grammar_ctx *o = s->ctx;
    grammar_ctx *c = ctx_new(o->eng, o->trig, o->lazy, o->keep_banned);
    if (!c) return NULL;
    /* the parse state: same stacks in a copy of the arena */
    bool ok = sift__gx_arena_copy(&c->ra, &o->ra) == SIFT_OK && sift__gx_state_copy(&c->st, &o->st) == SIFT_OK;
    c->awaiting = o->awaiting;
    c->dead = o->dead;
    c->over = o->over;
    if (ok && o->buf_n) {
        c->buf = sift__gx_malloc(o->buf_cap);
        c->toks = sift__gx_malloc(o->cap_toks * sizeof *c->toks);
        ok = c->buf && c->toks;
        if (ok) {
            memcpy(c->buf, o->buf, o->buf_n + 1);
            memcpy(c->toks, o->toks, o->n_toks * sizeof *c->toks);
            c->buf_n = o->buf_n;
            c->buf_cap = o->buf_cap;
            c->n_toks = o->n_toks;
            c->cap_toks = o->cap_toks;
        }
    }
    sift_sampler *out = ok ? sift_sampler_init(&grammar_iface, c) : NULL;
    if (!out) ctx_free(c);
    return out;
}

/* ---- public API ---------------------------------------------------------------------------- */

sift_grammar_params sift_grammar_default_params(void)
{
    sift_grammar_params p;
    memset(&p, 0, sizeof p);
    p.root = "root";
    return p;
}

/* A sampler that does nothing (llama.cpp: an empty grammar text gives no constraint). */
static const char *noop_name(const sift_sampler *s)
{
    (void)s;
    return "?grammar";
}
static void noop_apply(sift_sampler *s, sift_candidates *c)
{
    (void)s;
    (void)c;
}
static const sift_sampler_i noop_iface = {.name = noop_name, .apply = noop_apply};

/* A sampler over engine eng (the caller keeps its reference): triggers, the matcher state,
 * and the start state's cache entries, so that the first mask is a cache hit (an
 * out-of-memory there is not an error: apply falls back, as for any later mask). */
static sift_sampler *sampler_over(sift__gx_engine *eng, const sift_grammar_params *params, sift_error *err)
{
    triggers *trig = NULL;
    bool lazy = params->lazy;
    if (lazy && triggers_new(&trig, params, sift__gx_engine_vocab(eng)->n_tokens, err) != SIFT_OK) return NULL;
    grammar_ctx *c = ctx_new(eng, trig, lazy, params->keep_banned);
    triggers_release(trig);
    if (c && restart(c) == SIFT_OK && !c->dead) (void)sift__gx_engine_fill_mask(c->eng, &c->ra, &c->st, c->mask);
    if (c && c->over) {
        ctx_free(c);
        sift__error_set(err, SIFT_E_UNSUPPORTED, "grammar: its start has more than %d parse stacks (SIFT_GRAMMAR_MAX_STACKS); "
                        "it is too ambiguous", GX_MAX_STACKS);
        return NULL;
    }
    if (!c || c->dead) {
        ctx_free(c);
        sift__error_set(err, SIFT_E_NOMEM, "out of memory");
        return NULL;
    }
    sift_sampler *s = sift_sampler_init(&grammar_iface, c);
    if (!s) {
        ctx_free(c);
        sift__error_set(err, SIFT_E_NOMEM, "out of memory");
    }
    return s;
}

sift_sampler *sift_sampler_init_grammar_compiled(sift_compiled_grammar *g, const sift_grammar_params *params,
                                                 sift_error *err)
{
    if (!g) {
        sift__error_set(err, SIFT_E_INVAL, "grammar sampler: no compiled grammar");
        return NULL;
    }
    sift_grammar_params dp = sift_grammar_default_params();
    return sampler_over(sift__gx_compiled_engine(g), params ? params : &dp, err);
}

/* The legacy entry point: the process's default compiler for the view (vocab_cache.c), this
 * grammar compiled for this sampler alone (with the caller's budget), as it always was. */
sift_sampler *sift_sampler_init_grammar_ex(const sift_vocab_view *vocab, const char *gbnf, size_t len,
                                           const sift_grammar_params *params, sift_error *err)
{
    sift_grammar_params dp = sift_grammar_default_params();
    if (!params) params = &dp;
    if (!gbnf || len == 0) return sift_sampler_init(&noop_iface, NULL);
    if (!vocab || vocab->n_tokens <= 0) {
        sift__error_set(err, SIFT_E_INVAL, "grammar sampler: a vocabulary is required");
        return NULL;
    }
    sift_grammar *g = sift_grammar_parse(gbnf, len, params->root ? params->root : "root", vocab, err);
    if (!g) return NULL;
    sift_grammar_compiler *comp = sift__gx_compiler_acquire(vocab, err);
    if (!comp) {
        sift_grammar_free(g);
        return NULL;
    }
    sift_compiled_grammar *cg = sift__gx_compiler_build(comp, g, NULL, 0, params->precompute_budget, err);
    sift__gx_compiler_release(comp);
    if (!cg) return NULL;
    sift_sampler *s = sampler_over(sift__gx_compiled_engine(cg), params, err);
    sift_compiled_grammar_free(cg);
    return s;
}

sift_sampler *sift_sampler_init_grammar(const sift_vocab_view *vocab, const char *gbnf, const char *root, sift_error *err)
{
    sift_grammar_params p = sift_grammar_default_params();
    if (root) p.root = root;
    return sift_sampler_init_grammar_ex(vocab, gbnf, gbnf ? strlen(gbnf) : 0, &p, err);
}

static grammar_ctx *as_grammar(const sift_sampler *s)
{
    return s && s->iface == &grammar_iface ? s->ctx : NULL;
}

bool sift_grammar_sampler_allows(sift_sampler *smpl, sift_token token)
{
    grammar_ctx *c = as_grammar(smpl);
    if (!c) return smpl != NULL; /* the no-op grammar allows everything */
    if (c->awaiting) return true;
    return token_allowed(c, token);
}

sift_grammar_status sift_grammar_sampler_status(const sift_sampler *smpl)
{
    const grammar_ctx *c = as_grammar(smpl);
    if (!c) return SIFT_GRAMMAR_ACTIVE;
    if (c->awaiting) return SIFT_GRAMMAR_AWAITING_TRIGGER;
    if (c->over) return SIFT_GRAMMAR_OVER_LIMIT;
    if (c->dead) return SIFT_GRAMMAR_DEAD;
    if (sift__gx_state_can_end(&c->st)) return c->st.tops.n ? SIFT_GRAMMAR_CAN_END : SIFT_GRAMMAR_DONE;
    return SIFT_GRAMMAR_ACTIVE;
}

bool sift__gx_grammar_sampler_stats(const sift_sampler *smpl, sift__gx_engine_stats *st)
{
    const grammar_ctx *c = as_grammar(smpl);
    if (!c) return false;
    sift__gx_engine_get_stats(c->eng, st);
    return true;
}

/* Append to buf[0 .. cap) at *n, cut at the end (the count goes on, as snprintf's). A function
 * with vsnprintf, not a snprintf macro: the cut is the point here, and gcc's Release
 * -Wformat-truncation flags every snprintf whose output can be cut. */
static void put(char *buf, size_t cap, size_t *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t cap, size_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int w = vsnprintf(buf + (*n < cap ? *n : cap - 1), *n < cap ? cap - *n : 1, fmt, ap);
    va_end(ap);
    if (w > 0) *n += (size_t)w;
}

/* A one-line picture of the matcher state for diagnostics (bench --maskbench's slow-mask
 * log): the number of stacks, then up to four stacks as rule names from the top down (at
 * most six frames each, "..." when deeper). */
bool sift__gx_grammar_sampler_describe(const sift_sampler *smpl, char *buf, size_t cap)
{
    const grammar_ctx *c = as_grammar(smpl);
    if (!c || !cap) return false;
    const sift_grammar *g = sift__gx_engine_grammar(c->eng);
    size_t n = 0;
#define PUT(...) put(buf, cap, &n, __VA_ARGS__)
    PUT("stacks=%u utf8=%u", c->st.tops.n, (unsigned)c->st.utf8.need);
    for (uint32_t k = 0; k < c->st.tops.n && k < 4; k++) {
        uint32_t depth = 0, f = c->st.tops.v[k];
        for (uint32_t q = f; q; q = c->ra.parent[q]) depth++;
        PUT(" [d%u", depth);
        uint32_t shown = 0;
        for (; f && shown < 6; f = c->ra.parent[f], shown++) PUT(" %s@%u", g->rule_name[g->rule_of[c->ra.pos[f]]], c->ra.pos[f]);
        PUT("%s]", f ? " ..." : "");
    }
#undef PUT
    return true;
}

sift_token sift_grammar_chain_sample(sift_sampler *grammar, sift_chain *chain, const float *logits, int32_t n_vocab,
                                     sift_grammar_mode mode, bool *refused)
{
    if (refused) *refused = false;
    if (!chain || !logits || n_vocab < 1) return SIFT_TOKEN_NULL;
    if (sift_chain_fill(chain, logits, n_vocab, NULL) != SIFT_OK) return SIFT_TOKEN_NULL;
    sift_candidates *cand = sift_chain_candidates(chain);
    sift_token tok;
    if (mode == SIFT_GRAMMAR_FIRST || !grammar) {
        if (grammar) sift_sampler_apply(grammar, cand);
        tok = sift_chain_apply(chain, cand);
    } else {
        tok = sift_chain_apply(chain, cand);
        if (tok == SIFT_TOKEN_NULL || !sift_grammar_sampler_allows(grammar, tok)) {
            if (refused) *refused = true;
            if (sift_chain_fill(chain, logits, n_vocab, NULL) != SIFT_OK) return SIFT_TOKEN_NULL;
            sift_sampler_apply(grammar, cand);
            tok = sift_chain_apply(chain, cand);
        }
    }
    if (tok == SIFT_TOKEN_NULL) return tok;
    /* The grammar and the chain together may leave no token at all (a grammar no token can
     * continue; a complete grammar whose end-of-generation tokens the chain suppresses, as
     * --ignore-eos does): every logit is -inf and the pick is arbitrary. A forbidden token
     * is never returned: SIFT_TOKEN_NULL, and sift_grammar_sampler_status says which. */
    if (grammar && !sift__gx_pick_allowed(grammar, cand, tok)) return SIFT_TOKEN_NULL;
    if (grammar) sift_sampler_accept(grammar, tok);
    sift_chain_accept(chain, tok);
    return tok;
}

bool sift__gx_pick_allowed(sift_sampler *grammar, const sift_candidates *cand, sift_token tok)
{
    if (cand->selected < 0 || (size_t)cand->selected >= cand->size) return false;
    if (cand->logit[cand->selected] == -INFINITY || isnan(cand->logit[cand->selected])) return false;
    return sift_grammar_sampler_allows(grammar, tok);
}
