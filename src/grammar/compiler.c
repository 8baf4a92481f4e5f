/*
 * compiler.c - the grammar compiler: one object per vocabulary that owns what every grammar
 * over it shares, and a cache of compiled grammars (sift.h, "the grammar compiler").
 *
 * Why. A grammar's cost before its first mask is (1) the vocabulary trie (25 ms at 102k
 * tokens), (2) parsing, (3) the mask engine's precompute (about a millisecond by budget).
 * (1) does not depend on the grammar and was kept in a process-global 4-slot cache
 * (vocab_cache.c), configured by environment variables; (2) and (3) were redone for every
 * sampler, so a server answering the same json_schema twice, or one request with n = 4
 * choices, compiled it each time. XGrammar splits this into GrammarCompiler (per tokenizer:
 * compile, with a cache) -> CompiledGrammar (immutable, shared) -> GrammarMatcher (per
 * sequence); llguidance's ParserFactory (per tokenizer: the token trie, the options) creates
 * per-sequence parsers. Ours is the same three levels:
 *
 *   sift_grammar_compiler   the vocabulary (trie, flags, the grammar-independent mask entries
 *                           of share.h), the precompute budget, the share bound, the cache;
 *   sift_compiled_grammar   a mask engine (mask.h): the parsed grammar, what it accepts fixed,
 *                           plus its token-set cache (filled on demand behind the engine's
 *                           lock, which is why it can be shared by threads);
 *   the grammar sampler     the matcher: parse state, triggers, mask buffer
 *                           (grammar_sampler.c, sift_sampler_init_grammar_compiled).
 *
 * The cache is keyed by (kind, flags, root, text) compared in full (the hash only picks
 * the candidates), least recently used first out, bounded in count: an engine's memory is
 * mostly what it learned, which is what a repeated grammar wants kept. A grammar in the cache
 * is held by the cache; one evicted lives on in the samplers that use it.
 *
 * Lifetimes: the compiler is reference counted - its owner's handle plus one per engine - so
 * sift_grammar_compiler_free may come before the last sampler is freed. The cache holds
 * compiled grammars, which hold engines, which hold the compiler: free drops the cache first,
 * so the cycle never outlives the handle.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/status.h"
#include "grammar/compiler.h"
#include "grammar/share.h"
#include "grammar/stacks.h"

#define DEFAULT_CACHE_GRAMMARS 32u
/* Ahead-of-time work beyond the first mask (trie nodes walked, see sift__gx_engine_precompute).
 * Small on purpose: a json_schema request should pay about a millisecond before its first
 * mask (issue 12). Everything the first mask needs is computed when a sampler is made
 * (grammar_sampler.c, warm first mask); deeper entries are made on first use, which the
 * slices (trie.h) keep cheap even inside free strings. The budget goes to the entries dearest
 * on demand first (sift__gx_engine_precompute), and an entry copied from the vocabulary's
 * share (share.h) counts the walk it saved. MaskBench, every 5th schema, by budget (TTFM p50
 * / TBM p99.9): 12Ki 0.62-0.77 ms / 401-506 us, 24Ki 1.12-1.73 ms / 358-434 us, 48Ki 2.1-2.6
 * ms / 287-392 us: 20Ki keeps both well inside their targets (2 ms, 500 us). */
#define DEFAULT_PRECOMPUTE_BUDGET ((uint64_t)5 << 12)

/* The ambiguity probe before anything else is built (stacks.h, sift__gx_stacks_probe): 64
 * characters along the most ambiguous path, at most 2^20 stacks stepped (a few ms for the
 * worst grammar, microseconds for the usual ones). A grammar that multiplies its stacks is
 * then refused by its compile - a 400 before a slot is taken - instead of failing on the
 * engine thread at its first token, a step that costs every other slot its time. */
#define PROBE_DEPTH 64
#define PROBE_WORK ((uint64_t)1 << 20)

typedef struct {
    int kind;
    uint32_t flags;
    char *root; /* NULL for kinds without one */
    char *text;
    size_t len;
    uint64_t hash, stamp;
    sift_compiled_grammar *cg;
} cache_slot;

struct sift_grammar_compiler {
    _Atomic int refs; /* the owner's handle, plus one per engine */
    sift__gx_vocab voc;
    sift_vocab_view view; /* over voc's texts: what GBNF is parsed with (<text> references) */
    const char **piece;
    uint32_t *piece_len;
    uint8_t *attr;
    sift_grammar_compiler_params p;
    pthread_mutex_t lock; /* the cache and the counters */
    cache_slot *slot;
    uint32_t n_slot;
    uint64_t tick;
    sift_grammar_compiler_stats st;
};

struct sift_compiled_grammar {
    _Atomic int refs;
    sift__gx_engine *eng;
    char *gbnf; /* the text it was compiled from (NULL for the legacy entry points: not kept) */
};

sift_grammar_compiler_params sift_grammar_compiler_default_params(void)
{
    sift_grammar_compiler_params p;
    memset(&p, 0, sizeof p);
    return p;
}

static void compiler_destroy(sift_grammar_compiler *c)
{
    sift__gx_vocab_free(&c->voc);
    sift__gx_free(c->piece);
    sift__gx_free(c->piece_len);
    sift__gx_free(c->attr);
    sift__gx_free(c->slot);
    pthread_mutex_destroy(&c->lock);
    sift__gx_free(c);
}

sift_grammar_compiler *sift__gx_compiler_make(const sift_vocab_view *view, const sift_grammar_compiler_params *params,
                                              sift_error *err)
{
    if (!view || view->n_tokens <= 0 || !view->piece || !view->piece_len) {
        sift__error_set(err, SIFT_E_INVAL, "grammar compiler: the vocabulary view is empty");
        return NULL;
    }
    sift_grammar_compiler *c = sift__gx_calloc(1, sizeof *c);
    if (!c) {
        sift__error_set(err, SIFT_E_NOMEM, "out of memory");
        return NULL;
    }
    atomic_init(&c->refs, 1);
    pthread_mutex_init(&c->lock, NULL);
    c->p = params ? *params : sift_grammar_compiler_default_params();
    if (!c->p.precompute_budget) c->p.precompute_budget = DEFAULT_PRECOMPUTE_BUDGET;
    if (!c->p.cache_grammars) c->p.cache_grammars = DEFAULT_CACHE_GRAMMARS;
    if (c->p.no_cache) c->p.cache_grammars = 0;
    if (sift__gx_vocab_build(&c->voc, view, err) != SIFT_OK) {
        sift__gx_free(c->piece); /* nothing else made yet; vocab_build cleaned up after itself */
        pthread_mutex_destroy(&c->lock);
        sift__gx_free(c);
        return NULL;
    }
    if (c->p.no_share) sift__gx_share_set_limit(c->voc.share, 0);
    else if (c->p.share_bytes) sift__gx_share_set_limit(c->voc.share, c->p.share_bytes);
    /* the parsing view: texts as the trie keeps them (a text the trie counts as empty is
     * empty here too), the attributes copied */
    const int32_t n = view->n_tokens;
    c->piece = sift__gx_malloc((size_t)n * sizeof *c->piece);
    c->piece_len = sift__gx_malloc((size_t)n * sizeof *c->piece_len);
    c->attr = view->attr ? sift__gx_malloc((size_t)n) : NULL;
    if (!c->piece || !c->piece_len || (view->attr && !c->attr)) {
        compiler_destroy(c);
        sift__error_set(err, SIFT_E_NOMEM, "out of memory");
        return NULL;
    }
    for (int32_t t = 0; t < n; t++) {
        uint32_t len;
        c->piece[t] = (const char *)sift__gx_vocab_text(&c->voc, (uint32_t)t, &len);
        c->piece_len[t] = len;
    }
    if (c->attr) memcpy(c->attr, view->attr, (size_t)n);
    c->view = (sift_vocab_view){.n_tokens = n, .piece = c->piece, .piece_len = c->piece_len, .attr = c->attr,
                                .tokenize = view->tokenize, .tokenize_ctx = view->tokenize_ctx, .identity = view->identity};
    /* the tokenizer callback is the caller's and may not outlive the view: GBNF parsing does
     * not use it, so it is not kept */
    c->view.tokenize = NULL;
    c->view.tokenize_ctx = NULL;
    return c;
}

sift_grammar_compiler *sift_grammar_compiler_new(const sift_vocab_view *vocab, const sift_grammar_compiler_params *params,
                                                 sift_error *err)
{
    return sift__gx_compiler_make(vocab, params, err);
}

void sift__gx_compiler_retain(sift_grammar_compiler *c) { atomic_fetch_add(&c->refs, 1); }

void sift__gx_compiler_release(sift_grammar_compiler *c)
{
    if (c && atomic_fetch_sub(&c->refs, 1) == 1) compiler_destroy(c);
}

const sift__gx_vocab *sift__gx_compiler_vocab(const sift_grammar_compiler *c) { return &c->voc; }
const sift_vocab_view *sift__gx_compiler_view(const sift_grammar_compiler *c) { return &c->view; }
uint64_t sift__gx_compiler_budget(const sift_grammar_compiler *c) { return c->p.precompute_budget; }

void sift_compiled_grammar_free(sift_compiled_grammar *g)
{
    if (!g || atomic_fetch_sub(&g->refs, 1) != 1) return;
    sift__gx_engine_release(g->eng);
    sift__gx_free(g->gbnf);
    sift__gx_free(g);
}

sift_compiled_grammar *sift_compiled_grammar_ref(sift_compiled_grammar *g)
{
    if (g) atomic_fetch_add(&g->refs, 1);
    return g;
}

sift__gx_engine *sift__gx_compiled_engine(const sift_compiled_grammar *cg) { return cg->eng; }

const char *sift_compiled_grammar_gbnf(const sift_compiled_grammar *g) { return g && g->gbnf ? g->gbnf : ""; }

static void slot_clear(cache_slot *s)
{
    sift__gx_free(s->root);
    sift__gx_free(s->text);
    sift_compiled_grammar_free(s->cg);
    memset(s, 0, sizeof *s);
}

void sift_grammar_compiler_free(sift_grammar_compiler *c)
{
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    cache_slot *slots = c->slot;
    uint32_t n = c->n_slot;
    c->slot = NULL;
    c->n_slot = 0;
    pthread_mutex_unlock(&c->lock);
    /* outside the lock: dropping a grammar releases its engine, which releases c (never the
     * last reference here: the handle's is still held) */
    for (uint32_t k = 0; k < n; k++) slot_clear(&slots[k]);
    sift__gx_free(slots);
    sift__gx_compiler_release(c);
}

void sift_grammar_compiler_get_stats(const sift_grammar_compiler *c, sift_grammar_compiler_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!c) return;
    pthread_mutex_t *lk = (pthread_mutex_t *)&c->lock; /* the counters change under the lock */
    pthread_mutex_lock(lk);
    *st = c->st;
    st->cached = c->n_slot;
    pthread_mutex_unlock(lk);
}

/* The key's hash. A schema can be a megabyte (MaskBench's largest Kubernetes schemas), and
 * a byte-at-a-time FNV runs one dependent multiply per byte: 1.5 ms there, the whole cost of
 * a cache hit. So four independent lanes take a word each (8 bytes per multiply, the lanes'
 * multiplies overlapping), then the tail and the root byte by byte: about 0.1 ms for the
 * megabyte. The hash only picks candidates - key_equal compares the whole text - so its
 * quality needs to be good, not cryptographic. Not sift__gx_hash_bytes (one lane, a dependent
 * multiply per word, made for short names): with it MaskBench's repeated-schema TTFM p99 was
 * 43.8 us against 16.2 with these lanes (--every 5 --repeat), and 325 against 197 us for the
 * megabyte schema. */
static uint64_t mix64(uint64_t h, uint64_t w)
{
    h ^= w;
    h *= 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

static uint64_t key_hash(int kind, uint32_t flags, const char *root, const char *text, size_t len)
{
    uint64_t lane[4] = {0xcbf29ce484222325ull ^ ((uint64_t)(uint32_t)kind << 32 | flags), 0x84222325cbf29ce4ull,
                        0x100000001b3ull, (uint64_t)len};
    size_t i = 0;
    for (; i + 32 <= len; i += 32)
        for (int l = 0; l < 4; l++) {
            uint64_t w;
            memcpy(&w, text + i + 8 * l, 8);
            lane[l] = mix64(lane[l], w);
        }
    uint64_t h = mix64(mix64(lane[0], lane[1]), mix64(lane[2], lane[3]));
    for (; i < len; i++) h = (h ^ (uint8_t)text[i]) * 0x100000001b3ull;
    for (const char *r = root; r && *r; r++) h = (h ^ (uint8_t)*r) * 0x100000001b3ull;
    return h;
}

static bool key_equal(const cache_slot *s, uint64_t h, int kind, uint32_t flags, const char *root, const char *text,
                      size_t len)
{
    if (s->hash != h || s->kind != kind || s->flags != flags || s->len != len) return false;
    if ((s->root == NULL) != (root == NULL) || (root && strcmp(s->root, root))) return false;
    return memcmp(s->text, text, len) == 0;
}

/* the slot holding the key, or -1; under the lock */
static int slot_find(const sift_grammar_compiler *c, uint64_t h, int kind, uint32_t flags, const char *root,
                     const char *text, size_t len)
{
    for (uint32_t k = 0; k < c->n_slot; k++)
        if (key_equal(&c->slot[k], h, kind, flags, root, text, len)) return (int)k;
    return -1;
}

sift_compiled_grammar *sift__gx_compiler_find(sift_grammar_compiler *c, int kind, uint32_t flags, const char *root,
                                              const char *text, size_t len)
{
    uint64_t h = key_hash(kind, flags, root, text, len);
    pthread_mutex_lock(&c->lock);
    int k = slot_find(c, h, kind, flags, root, text, len);
    sift_compiled_grammar *cg = NULL;
    if (k >= 0) {
        c->slot[k].stamp = ++c->tick;
        c->st.cache_hits++;
        cg = sift_compiled_grammar_ref(c->slot[k].cg);
    }
    pthread_mutex_unlock(&c->lock);
    return cg;
}

sift_compiled_grammar *sift__gx_compiler_build(sift_grammar_compiler *c, sift_grammar *g, const char *gbnf, size_t len,
                                               uint64_t budget, sift_error *err)
{
    sift_compiled_grammar *cg = sift__gx_calloc(1, sizeof *cg);
    if (cg && gbnf && (cg->gbnf = sift__gx_malloc(len + 1))) {
        memcpy(cg->gbnf, gbnf, len);
        cg->gbnf[len] = 0;
    }
    if (!cg || (gbnf && !cg->gbnf)) {
        if (cg) sift__gx_free(cg);
        sift_grammar_free(g);
        sift__error_set(err, SIFT_E_NOMEM, "out of memory");
        return NULL;
    }
    atomic_init(&cg->refs, 1);
    uint32_t peak = 0;
    const int probe = sift__gx_stacks_probe(g, PROBE_DEPTH, PROBE_WORK, &peak);
    if (probe != SIFT_OK) {
        if (probe == GX_E_STACKS)
            sift__error_set(err, SIFT_E_UNSUPPORTED, "grammar: some text of at most %d characters needs more than %d parse "
                            "stacks (SIFT_GRAMMAR_MAX_STACKS): the grammar is too ambiguous to follow", PROBE_DEPTH, GX_MAX_STACKS);
        else
            sift__error_set(err, SIFT_E_NOMEM, "out of memory");
        sift_grammar_free(g);
        sift__gx_free(cg->gbnf);
        sift__gx_free(cg);
        return NULL;
    }
    if (sift__gx_engine_new_in(&cg->eng, g, c, err) != SIFT_OK) {
        sift__gx_free(cg->gbnf);
        sift__gx_free(cg);
        return NULL;
    }
    if (sift__gx_engine_precompute(cg->eng, budget ? budget : c->p.precompute_budget) != SIFT_OK) {
        sift__error_set(err, SIFT_E_NOMEM, "out of memory precomputing grammar masks");
        sift_compiled_grammar_free(cg);
        return NULL;
    }
    pthread_mutex_lock(&c->lock);
    c->st.compiles++;
    pthread_mutex_unlock(&c->lock);
    return cg;
}

sift_compiled_grammar *sift__gx_compiler_keep(sift_grammar_compiler *c, int kind, uint32_t flags, const char *root,
                                              const char *text, size_t len, sift_compiled_grammar *cg)
{
    if (!c->p.cache_grammars) return cg;
    uint64_t h = key_hash(kind, flags, root, text, len);
    cache_slot ns = {.kind = kind, .flags = flags, .len = len, .hash = h, .cg = cg};
    ns.text = sift__gx_malloc(len ? len : 1);
    ns.root = root ? sift__gx_malloc(strlen(root) + 1) : NULL;
    if (!ns.text || (root && !ns.root)) { /* not kept: the caller still has its grammar */
        sift__gx_free(ns.text);
        sift__gx_free(ns.root);
        return cg;
    }
    memcpy(ns.text, text, len);
    if (root) memcpy(ns.root, root, strlen(root) + 1);
    cache_slot old = {0};
    pthread_mutex_lock(&c->lock);
    int k = slot_find(c, h, kind, flags, root, text, len);
    if (k >= 0) { /* another thread filed it first: use that one */
        sift_compiled_grammar *kept = sift_compiled_grammar_ref(c->slot[k].cg);
        pthread_mutex_unlock(&c->lock);
        ns.cg = NULL;
        slot_clear(&ns);
        sift_compiled_grammar_free(cg);
        return kept;
    }
    if (c->n_slot < c->p.cache_grammars) {
        if (!c->slot && !(c->slot = sift__gx_calloc(c->p.cache_grammars, sizeof *c->slot))) {
            pthread_mutex_unlock(&c->lock);
            ns.cg = NULL;
            slot_clear(&ns);
            return cg;
        }
        k = (int)c->n_slot++;
    } else { /* full: the least recently used leaves */
        k = 0;
        for (uint32_t i = 1; i < c->n_slot; i++)
            if (c->slot[i].stamp < c->slot[k].stamp) k = (int)i;
        old = c->slot[k];
        c->st.evictions++;
    }
    ns.stamp = ++c->tick;
    ns.cg = sift_compiled_grammar_ref(cg); /* the cache's reference; the caller keeps its own */
    c->slot[k] = ns;
    pthread_mutex_unlock(&c->lock);
    if (old.cg) slot_clear(&old);
    return cg;
}

sift_compiled_grammar *sift_grammar_compile(sift_grammar_compiler *c, const char *gbnf, size_t len, const char *root,
                                            sift_error *err)
{
    if (!c || !gbnf || !len) {
        sift__error_set(err, SIFT_E_INVAL, "grammar compile: %s", c ? "the grammar text is empty" : "no compiler");
        return NULL;
    }
    if (!root) root = "root";
    sift_compiled_grammar *cg = sift__gx_compiler_find(c, GX_KIND_GBNF, 0, root, gbnf, len);
    if (cg) return cg;
    sift_grammar *g = sift_grammar_parse(gbnf, len, root, &c->view, err);
    if (!g) return NULL;
    if (!(cg = sift__gx_compiler_build(c, g, gbnf, len, 0, err))) return NULL;
    return sift__gx_compiler_keep(c, GX_KIND_GBNF, 0, root, gbnf, len, cg);
}
