/*
 * dry.c - DRY, "don't repeat yourself" (pi6am, koboldcpp PR 982; llama.cpp's port):
 * penalize tokens that would extend a sequence already repeated in the context, by
 * multiplier * base^(length - allowed_length), where a repetition may not reach across a
 * sequence breaker.
 *
 * Per apply (llama.cpp's steps, on the last min(history, last_n) accepted tokens):
 *   1. walking back from the newest token, the first complete sequence breaker limits the
 *      usable repetition length (rep_limit);
 *   2. a reverse Z-algorithm gives, for every position, how long the suffix ending there
 *      matches the suffix of the whole context (capped at rep_limit);
 *   3. each token that follows such a match of length >= allowed_length records the
 *      longest one;
 *   4. those tokens (unless they are single-token breakers) lose
 *      multiplier * pow(base, length - allowed_length) (double pow, float result, the
 *      exponent capped so it cannot overflow).
 * Step 4 touches only the recorded tokens (found directly when the array is in vocabulary
 * order) instead of looking up every candidate.
 *
 * Sequence breakers are stored as (head token, tail tokens): a breaker matches when its
 * head is followed by its tail. From strings (sift_sampler_init_dry) they are derived as
 * llama.cpp does: every token whose text contains the breaker is a one-token breaker, and
 * every token whose text ENDS with a proper prefix of the breaker becomes a head whose tail
 * is the tokenization of the rest of the breaker (at most 20 tokens; breakers longer than
 * 40 bytes are cut). Token texts come from the vocabulary view (its `piece`, i.e.
 * token_to_piece with special tokens rendered). llama.cpp takes them from
 * detokenize({id}, special), which differs from the piece in two corner cases: it drops
 * one leading space for SentencePiece vocabularies that add a space prefix, and it cleans
 * up spaces for the few vocabularies that ask for it. Only breakers that begin with a
 * space (or rely on that clean-up) can come out differently.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "samplers/history.h"
#include "samplers/samplers.h"
#include "samplers/tokmap.h"

#define DRY_MAX_CHAR_LEN 40
#define DRY_MAX_SEQ_LEN 20

typedef struct dry_breaker {
    sift_token head;
    uint32_t tail_off, tail_len; /* into the tail pool */
} dry_breaker;

typedef struct dry_ctx {
    float multiplier, base;
    int32_t allowed_length, last_n;
    dry_breaker *br;  /* sorted by head */
    size_t n_br;
    sift_token *pool; /* breaker tails */
    size_t n_pool;
    sift__history hist;
    int32_t *repeat_count; /* [rc_cap] >= the history's capacity */
    int32_t rc_cap;
    sift__tokmap max_repeat; /* room for every token of the history */
} dry_ctx;

static const char *dry_name(const sift_sampler *smpl)
{
    (void)smpl;
    return "dry";
}

/* i-th most recent token (0 = newest), as ring_buffer::rat */
static inline sift_token rat(const dry_ctx *ctx, int32_t i) { return sift__history_rat(&ctx->hist, i); }

static void dry_accept(sift_sampler *smpl, sift_token token)
{
    dry_ctx *ctx = smpl->ctx;
    sift_token old;
    sift__history_push(&ctx->hist, token, &old);
    /* the per-apply scratch follows the history's capacity (grows only past 4096 tokens) */
    if (ctx->hist.cap > ctx->rc_cap) {
        int32_t *rc = realloc(ctx->repeat_count, (size_t)ctx->hist.cap * sizeof *rc);
        if (rc) ctx->repeat_count = rc, ctx->rc_cap = ctx->hist.cap;
    }
    sift__tokmap_reserve(&ctx->max_repeat, (size_t)ctx->hist.count);
}

/* first breaker with this head, or n_br */
static size_t breaker_lower(const dry_ctx *ctx, sift_token head)
{
    size_t lo = 0, hi = ctx->n_br;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ctx->br[mid].head < head) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static bool is_single_token_breaker(const dry_ctx *ctx, sift_token t)
{
    for (size_t b = breaker_lower(ctx, t); b < ctx->n_br && ctx->br[b].head == t; b++)
        if (ctx->br[b].tail_len == 0) return true;
    return false;
}

static void dry_apply(sift_sampler *smpl, sift_candidates *cand)
{
    dry_ctx *ctx = smpl->ctx;
    int32_t last_n_repeat = ctx->hist.count < ctx->last_n ? ctx->hist.count : ctx->last_n;
    if (last_n_repeat > ctx->rc_cap) last_n_repeat = ctx->rc_cap; /* only after a failed allocation */
    if (last_n_repeat <= ctx->allowed_length) return;

    int32_t *rc = ctx->repeat_count;
    memset(rc, 0, (size_t)last_n_repeat * sizeof *rc);
    sift__tokmap_clear(&ctx->max_repeat);

    /* step 1: the newest complete sequence breaker limits the repetition length */
    int32_t rep_limit = last_n_repeat;
    for (int32_t i = 0; i < last_n_repeat; ++i) {
        const sift_token token = rat(ctx, i);
        size_t b = breaker_lower(ctx, token);
        if (b == ctx->n_br || ctx->br[b].head != token) continue;
        int32_t longest = -1;
        for (; b < ctx->n_br && ctx->br[b].head == token; b++) {
            const int32_t seq_len = (int32_t)ctx->br[b].tail_len;
            if (seq_len > longest && seq_len <= i) {
                bool match = true;
                for (int32_t off = 0; off < seq_len; ++off) {
                    if (ctx->pool[ctx->br[b].tail_off + (uint32_t)off] != rat(ctx, i - off - 1)) {
                        match = false;
                        break;
                    }
                }
                if (match) longest = seq_len;
            }
        }
        if (longest >= 0) {
            rep_limit = i - longest;
            break;
        }
    }
    if (rep_limit < ctx->allowed_length) return;

    /* step 2: reverse Z-algorithm; rc[last - k] = match length of the suffix at k */
    {
        const int32_t last = last_n_repeat - 1;
        int32_t rt = 0, lt = 0;
        for (int32_t k = 1; k < last_n_repeat; ++k) {
            if (k > rt) {
                int32_t n = 0;
                while (n + k < last_n_repeat && rat(ctx, n) == rat(ctx, n + k)) ++n;
                rc[last - k] = n < rep_limit ? n : rep_limit;
                if (n > 0) {
                    lt = k;
                    rt = k + n - 1;
                }
            } else {
                const int32_t p = k - lt;
                const int32_t right_part_len = rt - k + 1;
                if (rc[last - p] < right_part_len) {
                    const int32_t n = rc[last - p] < rep_limit ? rc[last - p] : rep_limit;
                    rc[last - k] = n;
                } else {
                    int32_t i = rt + 1;
                    while (i < last_n_repeat && rat(ctx, i) == rat(ctx, i - k)) i += 1;
                    const int32_t n = i - k < rep_limit ? i - k : rep_limit;
                    rc[last - k] = n;
                    lt = k;
                    rt = i - 1;
                }
            }
        }
    }

    /* step 3: the token after each long enough match, with its longest match */
    for (int32_t i = 0; i < last_n_repeat - 1; ++i) {
        const int32_t repeat_len = rc[i];
        if (repeat_len >= ctx->allowed_length) {
            const sift_token token = rat(ctx, last_n_repeat - 2 - i);
            int32_t *v = sift__tokmap_find(&ctx->max_repeat, token);
            if (!v) {
                if (ctx->max_repeat.n + 1 > ctx->max_repeat.mask) continue; /* full (allocation failed) */
                *sift__tokmap_get(&ctx->max_repeat, token) = repeat_len;
            } else if (*v < repeat_len) {
                *v = repeat_len;
            }
        }
    }

    /* step 4: penalties */
    const float float_max_log = 88.7228391f;
    int max_exponent = 0;
    if (ctx->base > 1.000001f) max_exponent = (int)(float_max_log / logf(ctx->base));

    const sift__tokmap *m = &ctx->max_repeat;
    bool missed = false, changed = false;
    for (uint32_t s = 0; s <= m->mask; s++) {
        const sift_token t = m->key[s];
        if (t == SIFT__TOKMAP_EMPTY || is_single_token_breaker(ctx, t)) continue;
        int repeat_exp = m->val[s] - ctx->allowed_length;
        if (max_exponent > 0 && repeat_exp > max_exponent) repeat_exp = max_exponent;
        const float penalty = (float)((double)ctx->multiplier * pow((double)ctx->base, (double)repeat_exp));
        if (t >= 0 && (size_t)t < cand->size && cand->id[t] == t) {
            cand->logit[t] -= penalty;
            changed = true;
        } else {
            missed = true;
        }
    }
    if (missed) {
        for (size_t i = 0; i < cand->size; i++) {
            const sift_token t = cand->id[i];
            if (t >= 0 && (size_t)t < cand->size && cand->id[t] == t) continue; /* done above */
            const int32_t *v = sift__tokmap_find(m, t);
            if (!v || is_single_token_breaker(ctx, t)) continue;
            int repeat_exp = *v - ctx->allowed_length;
            if (max_exponent > 0 && repeat_exp > max_exponent) repeat_exp = max_exponent;
            cand->logit[i] -= (float)((double)ctx->multiplier * pow((double)ctx->base, (double)repeat_exp));
            changed = true;
        }
    }
    if (changed) cand->flags &= ~SIFT_CAND_PROBS;
    cand->sorted = false;
}

static void dry_reset(sift_sampler *smpl)
{
    dry_ctx *ctx = smpl->ctx;
    sift__history_clear(&ctx->hist);
    sift__tokmap_clear(&ctx->max_repeat);
}

static void dry_free(sift_sampler *smpl)
{
    dry_ctx *ctx = smpl->ctx;
    if (!ctx) return;
    free(ctx->br);
    free(ctx->pool);
    sift__history_free(&ctx->hist);
    free(ctx->repeat_count);
    sift__tokmap_free(&ctx->max_repeat);
    free(ctx);
}

static const sift_sampler_i dry_iface;

/* a DRY sampler with room for its history, no breakers yet */
static sift_sampler *dry_new(float multiplier, float base, int32_t allowed_length, int32_t last_n)
{
    sift_sampler *s = sift__sampler_new(&dry_iface, sizeof(dry_ctx));
    if (!s) return NULL;
    dry_ctx *ctx = s->ctx;
    ctx->multiplier = multiplier;
    ctx->base = base;
    ctx->allowed_length = allowed_length;
    ctx->last_n = last_n;
    if (sift__history_init(&ctx->hist, last_n) != 0) {
        sift_sampler_free(s);
        return NULL;
    }
    ctx->rc_cap = ctx->hist.cap;
    ctx->repeat_count = malloc((size_t)ctx->rc_cap * sizeof *ctx->repeat_count);
    if (!ctx->repeat_count || sift__tokmap_init(&ctx->max_repeat, (size_t)ctx->hist.cap) != 0) {
        sift_sampler_free(s);
        return NULL;
    }
    return s;
}

static sift_sampler *dry_clone(const sift_sampler *smpl)
{
    const dry_ctx *src = smpl->ctx;
    sift_sampler *s = dry_new(src->multiplier, src->base, src->allowed_length, src->last_n);
    if (!s) return NULL;
    dry_ctx *ctx = s->ctx;
    ctx->br = malloc((src->n_br ? src->n_br : 1) * sizeof *ctx->br);
    ctx->pool = malloc((src->n_pool ? src->n_pool : 1) * sizeof *ctx->pool);
    if (!ctx->br || !ctx->pool) {
        sift_sampler_free(s);
        return NULL;
    }
    if (src->n_br) memcpy(ctx->br, src->br, src->n_br * sizeof *ctx->br);
    if (src->n_pool) memcpy(ctx->pool, src->pool, src->n_pool * sizeof *ctx->pool);
    ctx->n_br = src->n_br;
    ctx->n_pool = src->n_pool;
    sift__history_free(&ctx->hist);
    free(ctx->repeat_count);
    sift__tokmap_free(&ctx->max_repeat);
    ctx->repeat_count = malloc((size_t)src->rc_cap * sizeof *ctx->repeat_count);
    ctx->rc_cap = src->rc_cap;
    if (sift__history_copy(&ctx->hist, &src->hist) != 0 || !ctx->repeat_count ||
        sift__tokmap_init(&ctx->max_repeat, (size_t)src->max_repeat.mask / 2) != 0) {
        sift_sampler_free(s);
        return NULL;
    }
    return s;
}

static const sift_sampler_i dry_iface = {
    .name = dry_name,
    .accept = dry_accept,
    .apply = dry_apply,
    .reset = dry_reset,
    .clone = dry_clone,
    .free = dry_free,
};

/* ---- building the breaker table -------------------------------------------------------- */

typedef struct breaker_builder {
    dry_breaker *br;
    size_t n_br, cap_br;
    sift_token *pool;
    size_t n_pool, cap_pool;
} breaker_builder;

static int builder_add(breaker_builder *b, sift_token head, const sift_token *tail, size_t n)
{
    if (b->n_br == b->cap_br) {
        size_t cap = b->cap_br ? 2 * b->cap_br : 16;
        dry_breaker *nb = realloc(b->br, cap * sizeof *nb);
        if (!nb) return -1;
        b->br = nb, b->cap_br = cap;
    }
    if (n && b->n_pool + n > b->cap_pool) {
        size_t cap = b->cap_pool ? 2 * b->cap_pool : 64;
        while (cap < b->n_pool + n) cap *= 2;
        sift_token *np = realloc(b->pool, cap * sizeof *np);
        if (!np) return -1;
        b->pool = np, b->cap_pool = cap;
    }
    if (n) memcpy(b->pool + b->n_pool, tail, n * sizeof *tail); /* a one-token breaker has no tail (and pool may be NULL) */
    b->br[b->n_br++] = (dry_breaker){head, (uint32_t)b->n_pool, (uint32_t)n};
    b->n_pool += n;
    return 0;
}

/* does token `head` already have a breaker with exactly this tail? (entries of one head
 * are contiguous while building: tokens are processed in order) */
static bool builder_has(const breaker_builder *b, size_t from, sift_token head, const sift_token *tail, size_t n)
{
    for (size_t i = from; i < b->n_br; i++)
        if (b->br[i].head == head && b->br[i].tail_len == n &&
            (n == 0 || memcmp(b->pool + b->br[i].tail_off, tail, n * sizeof *tail) == 0))
            return true;
    return false;
}

static int cmp_breaker(const void *a, const void *b)
{
    const dry_breaker *x = a, *y = b;
    if (x->head != y->head) return x->head < y->head ? -1 : 1;
    return x->tail_off < y->tail_off ? -1 : x->tail_off > y->tail_off;
}

static void builder_finish(dry_ctx *ctx, breaker_builder *b)
{
    if (b->n_br) qsort(b->br, b->n_br, sizeof *b->br, cmp_breaker);
    ctx->br = b->br;
    ctx->n_br = b->n_br;
    ctx->pool = b->pool;
    ctx->n_pool = b->n_pool;
}

/* llama.cpp's get_overlapping_token_sequences for one breaker string */
static int add_string_breaker(breaker_builder *b, const sift_vocab_view *vocab, const char *str, size_t str_len)
{
    sift_token tail[DRY_MAX_SEQ_LEN];
    for (sift_token id = 0; id < vocab->n_tokens; id++) {
        const char *word = vocab->piece[id];
        const size_t word_len = vocab->piece_len[id];
        const size_t from = b->n_br;
        if (word_len >= str_len && memmem(word, word_len, str, str_len)) {
            if (builder_add(b, id, NULL, 0) != 0) return -1;
            continue;
        }
        /* every position where the word's end overlaps the breaker's beginning */
        for (size_t pos = 0; pos < word_len; pos++) {
            if (word[pos] != str[0]) continue;
            bool match = true;
            size_t i;
            for (i = 1; i < str_len && i + pos < word_len; ++i) {
                if (word[pos + i] != str[i]) {
                    match = false;
                    break;
                }
            }
            if (!match) continue;
            sift_token tmp[256];
            int32_t n = vocab->tokenize(vocab->tokenize_ctx, str + i, str_len - i, tmp, 256);
            if (n < 0) n = 0; /* cannot happen for <= 40 bytes; be safe */
            if (n > DRY_MAX_SEQ_LEN) n = DRY_MAX_SEQ_LEN;
            memcpy(tail, tmp, (size_t)n * sizeof *tail);
            if (!builder_has(b, from, id, tail, (size_t)n) && builder_add(b, id, tail, (size_t)n) != 0) return -1;
        }
    }
    return 0;
}

sift_sampler *sift_sampler_init_dry(const sift_vocab_view *vocab, float multiplier, float base, int32_t allowed_length,
                                    int32_t last_n, const char *const *breakers, size_t n_breakers)
{
    if (!(multiplier != 0.0f && base >= 1.0f && last_n > 0)) return sift__sampler_noop("?dry");
    bool any = false;
    for (size_t i = 0; breakers && i < n_breakers; i++) any |= breakers[i] && breakers[i][0];
    if (any && (!vocab || !vocab->piece || !vocab->piece_len || !vocab->tokenize)) return NULL;

    sift_sampler *s = dry_new(multiplier, base, allowed_length, last_n);
    if (!s) return NULL;
    breaker_builder b = {0};
    for (size_t i = 0; breakers && i < n_breakers; i++) {
        if (!breakers[i] || !breakers[i][0]) continue; /* llama.cpp skips empty breakers */
        size_t len = strlen(breakers[i]);
        if (len > DRY_MAX_CHAR_LEN) len = DRY_MAX_CHAR_LEN;
        if (add_string_breaker(&b, vocab, breakers[i], len) != 0) {
            free(b.br), free(b.pool);
            sift_sampler_free(s);
            return NULL;
        }
    }
    builder_finish(s->ctx, &b);
    return s;
}

sift_sampler *sift_sampler_init_dry_tokens(float multiplier, float base, int32_t allowed_length, int32_t last_n,
                                           const sift_token *const *seqs, const size_t *lens, size_t n_seqs)
{
    if (!(multiplier != 0.0f && base >= 1.0f && last_n > 0)) return sift__sampler_noop("?dry");
    sift_sampler *s = dry_new(multiplier, base, allowed_length, last_n);
    if (!s) return NULL;
    breaker_builder b = {0};
    for (size_t i = 0; seqs && lens && i < n_seqs; i++) {
        if (!seqs[i] || lens[i] == 0) continue;
        if (builder_add(&b, seqs[i][0], seqs[i] + 1, lens[i] - 1) != 0) {
            free(b.br), free(b.pool);
            sift_sampler_free(s);
            return NULL;
        }
    }
    builder_finish(s->ctx, &b);
    return s;
}
