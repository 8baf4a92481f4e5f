/*
 * engine.c - slots and continuous batching: the one thread that runs the model.
 *
 * The engine owns the sift_context. Its KV cache holds n_parallel independent sequences
 * (sequence i = slot i, n_ctx / n_parallel cells each), so every slot is a llama-server
 * slot: one request at a time, with its own sampler chain, seed and grammar. One step of
 * the loop:
 *
 *   1. take the queue: drop tasks whose client went away, give waiting tasks to idle slots
 *      (FIFO; the idle slot whose cached tokens share the longest prefix with the prompt,
 *      so a repeated prompt is not decoded again: llama-server's cache_prompt);
 *   2. drop running tasks whose client went away (the slot is free for the next step);
 *   3. build ONE batch: the last sampled token of every generating slot, then prompt
 *      tokens of slots still reading their prompt, up to n_batch tokens in all (slots
 *      reading the same prompt from the same place, the n choices of one request, share
 *      the entries: each token goes into all their sequences);
 *   4. sift_decode once;
 *   5. for every slot whose logits came out: sample with its chain (and grammar), publish
 *      the token, the visible text, n_probs and the chain trace to the task, and check the
 *      stop conditions (end of generation, stop string, n_predict, the slot's context).
 *
 * New requests therefore join the running batch at the next step, and a request's output
 * does not depend on what else runs: the runtime computes each sequence's logits bit for
 * bit as it would alone (sift.h: column-independent kernels, per-sequence cells at fixed
 * positions, thread-count-independent reductions), whatever the batch holds or how the
 * prompt was chunked, and each slot samples with its own chain and RNG. The integration
 * test checks exactly that: the same seed gives the same tokens alone and under load.
 *
 * Sampling is one library call per slot and token, sift_chain_sample_ex: the chain's fast
 * path (no copy of the vocabulary when the chain starts with greedy, dist, top_k, min_p or
 * top_p), llama.cpp common_sampler_sample's grammar rejection mode, the n_probs figures;
 * the grammar appears as a stage in the trace through the chain's trace hook. Its time per
 * token is /metrics' sift_sampling_us_per_token.
 *
 * Locks: e->mu guards the queue, the stop flag and the public snapshot (stats, slots); a
 * task's mu guards its output. The engine never holds both except to publish. The
 * connection threads only ever read a task's output and set its cancelled flag.
 */
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

typedef enum { SLOT_IDLE = 0, SLOT_PROMPT, SLOT_GEN } slot_state;

typedef struct slot {
    int id;
    slot_state state;
    srv_task *task;
    sift_token *cache;        /* the tokens in this sequence's KV cells, [0, n_cache) */
    int32_t n_cache;
    int32_t i_prompt;         /* next prompt token to decode */
    int32_t n_in_batch;       /* tokens of this slot in the current batch */
    int32_t batch_idx;        /* its logits row in the current batch, -1 */
    sift_token last;          /* sampled, not yet decoded */
    int32_t n_decoded, n_limit;
    bool has_run;             /* a task has run here: /slots shows its params, as llama-server its task_prev's */
    sift_draft_params last_spec; /* that task's speculative.* */
    sbuf gen;                 /* the generated text (pieces), before holds and cuts */
    size_t n_released;        /* bytes of gen already published */
    double t_start, t_first;
    uint64_t last_used;
    /* trace scratch (filled by the chain's trace hook during one sampling step) */
    srv_stage *st;
    size_t n_st, cap_st;
    srv_prob *top;
    size_t n_top, cap_top;
    bool trace_oom;
    /* n_probs scratch */
    sift_token *pid;
    float *pp;
    /* --reasoning-budget (think_step): where the reply is in its thinking, the thinking tokens
     * so far, and the closing tag's tokens being forced */
    int think;                /* THINK_UNKNOWN, THINK_IN, THINK_OUT (harmony: THINK_UNKNOWN between analysis messages) */
    int32_t n_think;
    size_t think_at;          /* harmony: the generated text is read from here on (past the last analysis' header or end) */
    size_t think_scan;        /* harmony: where the next search starts (the text before it, past think_at, was read) */
    sift_token *forced;
    int32_t n_forced, i_forced;
    bool shifted;             /* --context-shift moved this request's cells at least once */
    /* speculative decoding: the slot's draft source (NULL: none), its history the request's
     * prompt and every token accepted so far; the draft in the current batch */
    sift_draft *draft;
    sift_token *dtok;         /* [SRV_MAX_DRAFT] */
    int32_t n_draft;
    double d_ms, d_n;         /* decayed drafting time and drafted tokens: the draft's cost per token */
    int32_t idle;             /* steps since the slot last drafted (the probe) */
} slot;

enum { THINK_UNKNOWN, THINK_IN, THINK_OUT };


struct srv_engine {
    srv_server *s;
    sift_context *ctx;
    sift_batch batch;
    sift_seq_id *share_ids;   /* [n_slots]: the sequences one prompt chunk goes into (twins) */
    slot *slots;
    int n_slots;
    int32_t n_ctx_slot;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_task **queue;         /* waiting tasks, FIFO, at most cfg.max_queue */
    srv_task **running;       /* under mu: the task of each slot (srv_engine_stop_by fails them when the
                                 thread does not stop in time) */
    int q_n, q_cap;
    bool stop;
    int64_t next_id;
    uint64_t tick;
    srv_engine_stats stats;   /* under mu */
    double t_sampling_ms;     /* engine thread only: time in slot_sample, since the last publish */
    long long n_sampled;
    double t_draft_ms;        /* engine thread only: time drafting, since the last publish */
    /* speculative decoding's cost model: decayed least-squares sums of (batch tokens, decode ms) */
    double cw, cx, cxx, cy, cxy;
    long long n_drafted, n_draft_accepted; /* engine thread only: since the last publish */
    srv_slot_info *pub;       /* under mu: the slots as of the last step */
    struct slot_op *op;       /* under mu: a slot action waiting for this thread (srv_engine_slot_action) */
};

/* A slot action (save, restore, erase), posted by a connection thread and run by the engine
 * thread between two steps: the engine owns the context and the slots' token records. */
typedef struct slot_op {
    srv_slot_action action;
    int slot;
    const char *path;
    bool taken, done;         /* under mu */
    pthread_cond_t cv;        /* done */
    srv_slot_result res;
    srv_error err;
} slot_op;

double srv_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---- histograms (/metrics) ---- */

const double srv_hist_bounds[SRV_HIST_N] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60};

void srv_hist_add(srv_hist *h, double seconds)
{
    h->count++;
    h->sum += seconds;
    for (int i = 0; i < SRV_HIST_N; i++)
        if (seconds <= srv_hist_bounds[i]) h->le[i]++;
}

/* ---- tasks ------------------------------------------------------------------------------------- */

srv_task *srv_task_new(srv_request *req, sift_chain *chain, sift_sampler *grammar)
{
    srv_task *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    const int n_chain = sift_chain_n(chain);
    t->stage_names = calloc((size_t)n_chain + 2, sizeof *t->stage_names);
    if (!t->stage_names) {
        free(t);
        return NULL;
    }
    t->n_stage_names = n_chain + 2;
    t->stage_names[0] = strdup("(logits)");
    for (int i = 0; i < n_chain; i++) t->stage_names[i + 1] = strdup(sift_sampler_name(sift_chain_get(chain, i)));
    t->stage_names[n_chain + 1] = strdup("grammar");
    for (int i = 0; i < t->n_stage_names; i++) {
        if (!t->stage_names[i]) {
            for (int k = 0; k < t->n_stage_names; k++) free(t->stage_names[k]);
            free(t->stage_names);
            free(t);
            return NULL;
        }
    }
    atomic_init(&t->refs, 1);
    atomic_init(&t->cancelled, false);
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    t->req = *req;
    memset(req, 0, sizeof *req);
    t->chain = chain;
    t->grammar = grammar;
    t->created = time(NULL);
    t->id_slot = -1;
    t->seed_used = sift_chain_get_seed(chain);
    /* an id in OpenAI's style: a prefix and random letters */
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const char *prefix = t->req.kind == SRV_OAI_CHAT ? "chatcmpl-" : "cmpl-";
    uint64_t x = (uint64_t)(uintptr_t)t ^ ((uint64_t)srv_now_ms() << 20) ^ (uint64_t)rand();
    size_t k = strlen(prefix);
    memcpy(t->oai_id, prefix, k);
    for (int i = 0; i < 24; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        t->oai_id[k++] = abc[x % (sizeof abc - 1)];
    }
    t->oai_id[k] = 0;
    return t;
}

void srv_task_ref(srv_task *t) { atomic_fetch_add(&t->refs, 1); }

void srv_task_unref(srv_task *t)
{
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1) return;
    srv_request_free(&t->req);
    sift_chain_free(t->chain);
    sift_sampler_free(t->grammar);
    for (int i = 0; i < t->n_stage_names; i++) free(t->stage_names[i]);
    free(t->stage_names);
    free(t->recs);
    sbuf_free(&t->text);
    free(t->probs);
    free(t->stages);
    free(t->tops);
    free(t->prog);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

/* Grow an array of elements of size sz to hold n more; false on out of memory. */
static bool grow(void **p, size_t *cap, size_t have, size_t more, size_t sz)
{
    if (have + more <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < have + more) c *= 2;
    void *q = realloc(*p, c * sz);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

/* Finish a task with an error (under its lock). */
static void task_fail(srv_task *t, int status, const char *msg)
{
    pthread_mutex_lock(&t->mu);
    if (!t->done) {
        srv_errorf(&t->err, status, "%s", msg);
        t->done = true;
    }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* ---- the trace hook: what each sampler left -------------------------------------------------- */

static void stage_add(slot *sl, int name, const sift_candidates *cand)
{
    srv_task *t = sl->task;
    const size_t k = (size_t)t->req.trace_top;
    if (!grow((void **)&sl->st, &sl->cap_st, sl->n_st, 1, sizeof *sl->st) ||
        !grow((void **)&sl->top, &sl->cap_top, sl->n_top, k, sizeof *sl->top)) {
        sl->trace_oom = true;
        return;
    }
    sift_token ids[SRV_MAX_TRACE_TOP];
    float probs[SRV_MAX_TRACE_TOP];
    const size_t n = sift_candidates_top(cand, k, ids, NULL, probs);
    srv_stage *s = &sl->st[sl->n_st++];
    s->name = (int16_t)name;
    s->n = (uint32_t)cand->size;
    s->has_selected = cand->selected >= 0 && (size_t)cand->selected < cand->size;
    s->selected = s->has_selected ? cand->id[cand->selected] : SIFT_TOKEN_NULL;
    s->top_off = (uint32_t)sl->n_top;
    s->n_top = (uint32_t)n;
    for (size_t i = 0; i < n; i++) sl->top[sl->n_top++] = (srv_prob){ids[i], probs[i]};
}

static void trace_hook(void *user, int32_t index, const sift_sampler *smpl, const sift_candidates *cand)
{
    slot *sl = user;
    if (index < 0) sl->n_st = sl->n_top = 0; /* a (re)fill starts the step's trace over */
    else if (sift_sampler_name(smpl)[0] == '?') return; /* a disabled no-op: nothing to show */
    stage_add(sl, index + 1, cand);
}

/* ---- slots --------------------------------------------------------------------------------------- */

/* Whether slots a and b would decode the same prompt tokens at the same positions next,
 * over the same cached history (a slot's cache below i_prompt is its prompt's prefix). */
static bool same_prompt_at(const slot *a, const slot *b)
{
    const srv_request *ra = &a->task->req, *rb = &b->task->req;
    return a->i_prompt == b->i_prompt && a->n_cache == b->n_cache && ra->n_prompt == rb->n_prompt &&
           !memcmp(ra->prompt, rb->prompt, (size_t)ra->n_prompt * sizeof *ra->prompt);
}

static int32_t common_prefix(const sift_token *a, int32_t na, const sift_token *b, int32_t nb)
{
    int32_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

static void slot_release(srv_engine *e, slot *sl)
{
    srv_task *t = sl->task;
    pthread_mutex_lock(&e->mu);
    e->running[sl->id] = NULL;
    pthread_mutex_unlock(&e->mu);
    if (t) {
        sift_chain_set_trace(t->chain, NULL, NULL);
        srv_task_unref(t);
    }
    sl->task = NULL;
    sl->state = SLOT_IDLE;
    sl->batch_idx = -1;
    sl->n_in_batch = 0;
    sbuf_free(&sl->gen);
    free(sl->forced);
    sl->forced = NULL;
    sl->n_forced = sl->i_forced = 0;
    sl->last_used = ++e->tick;
}

/* Put task t into idle slot sl: reuse the cached prefix, drop the rest of the cells. */
/* return_progress (a stream's): one report when the slot takes the prompt (what the cache
 * holds), then one after each chunk of it is read, as llama-server sends them. */
static void report_progress(slot *sl)
{
    srv_task *t = sl->task;
    if (!t->req.return_progress || !t->req.stream) return;
    pthread_mutex_lock(&t->mu);
    if (grow((void **)&t->prog, &t->cap_prog, t->n_prog, 1, sizeof *t->prog)) {
        t->prog[t->n_prog++] = (srv_progress){.total = t->req.n_prompt, .cache = t->n_cached, .processed = sl->i_prompt,
                                              .ms = srv_now_ms() - sl->t_start};
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
}

static void slot_start(srv_engine *e, slot *sl, srv_task *t)
{
    const srv_request *r = &t->req;
    int32_t keep = r->cache_prompt ? common_prefix(sl->cache, sl->n_cache, r->prompt, r->n_prompt) : 0;
    if (keep >= r->n_prompt) keep = r->n_prompt - 1; /* the last prompt token is decoded again for its logits */
    if (sift_kv_seq_rm(e->ctx, sl->id, keep, -1) != SIFT_OK) {
        /* a recurrent state (qwen35) holds the whole cached sequence and cannot be cut back to the
         * common prefix: the prompt is decoded again from its start */
        sift_kv_seq_rm(e->ctx, sl->id, -1, -1);
        keep = 0;
    }
    sl->n_cache = keep;
    sl->i_prompt = keep;
    sl->task = t;
    sl->state = SLOT_PROMPT;
    sl->n_decoded = 0;
    sl->has_run = true;
    sl->last_spec = r->spec;
    const int32_t want = r->n_predict >= 0 ? r->n_predict : e->s->cfg.max_n_predict;
    sl->n_limit = want;
    sl->n_released = 0;
    sl->gen = (sbuf){0};
    sl->batch_idx = -1;
    sl->t_start = srv_now_ms();
    sl->t_first = 0;
    sl->trace_oom = false;
    sl->shifted = false;
    /* a reasoning budget counts from the first token when the prompt opened the thinking */
    sl->think = !r->rs || r->reasoning_budget < 0 ? THINK_OUT : r->think_forced_open ? THINK_IN : THINK_UNKNOWN;
    sl->n_think = 0;
    sl->think_at = 0;
    sl->think_scan = 0;
    if (r->trace) sift_chain_set_trace(t->chain, trace_hook, sl);
    sl->n_draft = 0;
    sl->idle = 0;
    if (sl->draft) { /* a new history: the prompt; a request that turns drafting off (n_max 0) keeps it */
        sift_error err = {0};
        sift_draft_reset(sl->draft);
        if ((r->spec.n_max > 0 && sift_draft_set_params(sl->draft, r->spec, &err) != SIFT_OK) ||
            sift_draft_push(sl->draft, r->prompt, r->n_prompt, &err) != SIFT_OK)
            fprintf(stderr, "sift serve: slot %d: draft: %s\n", sl->id, err.msg);
    }
    pthread_mutex_lock(&t->mu);
    t->started = true;
    t->id_slot = sl->id;
    t->n_cached = keep;
    pthread_mutex_unlock(&t->mu);
    report_progress(sl);
}

/* ---- sampling and publishing ---------------------------------------------------------------------- */

/* llama-server's context shift (--context-shift), when the next token would have no cell:
 * keep the first n_keep tokens (the request's; -1: the whole prompt; the BOS counted in, as
 * llama-server), drop the next n_discard (the request's, else half of the rest), and move
 * the remainder back: its keys are rotated to their new positions (sift_kv_seq_add), and the
 * reply goes on. false when nothing can be dropped. */
static bool ctx_shift(srv_engine *e, slot *sl)
{
    const srv_request *r = &sl->task->req;
    int32_t n_keep = r->n_keep < 0 ? r->n_prompt : r->n_keep;
    if (sift_vocab_add_bos(e->s->vocab)) n_keep += 1;
    if (n_keep > e->n_ctx_slot - 4) n_keep = e->n_ctx_slot - 4;
    if (n_keep < 0) n_keep = 0;
    const int32_t n_left = sl->n_cache - n_keep;
    int32_t n_discard = r->n_discard > 0 ? r->n_discard : n_left / 2;
    if (n_discard > n_left) n_discard = n_left;
    if (n_discard <= 0) return false;
    if (sift_kv_seq_rm(e->ctx, sl->id, n_keep, n_keep + n_discard) != SIFT_OK ||
        sift_kv_seq_add(e->ctx, sl->id, n_keep + n_discard, sl->n_cache, -n_discard) != SIFT_OK)
        return false;
    memmove(sl->cache + n_keep, sl->cache + n_keep + n_discard, (size_t)(sl->n_cache - n_keep - n_discard) * sizeof *sl->cache);
    sl->n_cache -= n_discard;
    sl->shifted = true;
    return true;
}

/* One sampling step of slot sl on logits: one library call, sift_chain_sample_ex, on the
 * chain's fast path (the grammar in llama.cpp's rejection mode, the n_probs figures, the
 * accepts). The token, or SIFT_TOKEN_NULL. Its cost goes to the engine's sampling clock. */
static sift_token slot_sample(srv_engine *e, slot *sl, const float *logits, float *p_sel, size_t *n_probs)
{
    srv_task *t = sl->task;
    const double t0 = srv_now_ms();
    sift_sample_probs pr = {.n = t->req.n_probs, .post_sampling = t->req.post_sampling_probs, .ids = sl->pid, .probs = sl->pp};
    const sift_token tok = sift_chain_sample_ex(t->chain, t->grammar, logits, e->s->n_vocab, SIFT_GRAMMAR_REJECTION, &pr);
    e->t_sampling_ms += srv_now_ms() - t0;
    e->n_sampled++;
    *n_probs = (size_t)pr.n_out;
    *p_sel = pr.p_selected;
    return tok;
}

/* --reasoning-budget on gpt-oss's channels, as llama-server's budget sampler with that format's
 * tags: an analysis message's header (<|channel|>analysis<|message|>, anywhere in the reply, or
 * the prompt's continued analysis) starts the count, its <|end|> stops it; after the budget's
 * tokens <|end|> is forced, and the next analysis message counts afresh. 0: the end at once,
 * the analysis empty. */
static void hm_think_step(srv_engine *e, slot *sl)
{
    const srv_request *r = &sl->task->req;
    if (sl->think == THINK_OUT || sl->i_forced < sl->n_forced) return;
    const char *g = sl->gen.p ? sl->gen.p : "";
    /* each search starts where the last one stopped (think_scan), not at think_at: a reply is
     * read once, not once per token */
    if (sl->think == THINK_UNKNOWN) { /* between messages: an analysis header opens the count */
        const size_t from = sl->think_scan > sl->think_at ? sl->think_scan : sl->think_at;
        const size_t k = rs_hm_analysis(r->rs, g, from, sl->gen.n, &sl->think_scan);
        if (!k) return;
        sl->think = THINK_IN;
        sl->n_think = 0;
        sl->think_at = sl->think_scan = k;
    }
    static const char end_tag[] = "<|end|>";
    const size_t en = sizeof end_tag - 1;
    const size_t from = sl->think_scan > sl->think_at ? sl->think_scan : sl->think_at;
    const char *end = sl->gen.n > from ? memmem(g + from, sl->gen.n - from, end_tag, en) : NULL;
    if (end) { /* the model ended it: read on for the next analysis */
        sl->think = THINK_UNKNOWN;
        sl->think_at = sl->think_scan = (size_t)(end - g) + en;
        return;
    }
    sl->think_scan = sl->gen.n > from + en - 1 ? sl->gen.n - (en - 1) : from; /* an <|end|> cut short is read again */
    if (sl->n_think < r->reasoning_budget) return;
    int32_t n = 0;
    free(sl->forced);
    sl->forced = srv_tokenize(e->s, "<|end|>", 7, false, true, &n);
    sl->n_forced = sl->forced ? n : 0;
    sl->i_forced = 0;
    sl->think = THINK_UNKNOWN;
    sl->think_at = sl->think_scan = sl->gen.n; /* (the forced end follows) */
}

/* --reasoning-budget, as llama-server's: after the budget's thinking tokens, the tokens of
 * "\n</think>\n" are forced one per step (the grammar, if any, starts after the thinking and
 * takes them: reasoning.c). Called before each sampling step: where the generated text stands
 * (the opening <think> at the start, or forced open by the prompt; the closing tag), and the
 * forced tokens queued once the budget is spent. */
static void think_step(srv_engine *e, slot *sl)
{
    const srv_request *r = &sl->task->req;
    static const char open[] = "<think>", close[] = "</think>";
    if (r->rs && r->rs->harmony) {
        hm_think_step(e, sl);
        return;
    }
    if (sl->think == THINK_OUT || sl->n_forced) return;
    const char *g = sl->gen.p ? sl->gen.p : "";
    if (sl->think == THINK_UNKNOWN) {
        size_t i = 0;
        while (i < sl->gen.n && (g[i] == ' ' || g[i] == '\n' || g[i] == '\t' || g[i] == '\r')) i++;
        const size_t rem = sl->gen.n - i;
        if (rem >= sizeof open - 1 && !memcmp(g + i, open, sizeof open - 1)) sl->think = THINK_IN;
        else if (rem && memcmp(g + i, open, rem < sizeof open - 1 ? rem : sizeof open - 1) != 0) sl->think = THINK_OUT;
        if (sl->think != THINK_IN) return;
    }
    if (sl->gen.n >= sizeof close - 1 && memmem(g, sl->gen.n, close, sizeof close - 1)) {
        sl->think = THINK_OUT; /* the model closed it */
        return;
    }
    if (sl->n_think < r->reasoning_budget) return;
    static const char end[] = "\n</think>\n";
    int32_t n = 0;
    sl->forced = srv_tokenize(e->s, end, sizeof end - 1, false, true, &n);
    sl->n_forced = sl->forced ? n : 0;
    sl->i_forced = 0;
    sl->think = THINK_OUT;
}

/* Publish a sampled token: the record, the text released by it, probabilities, trace; and
 * the end of the task when stop != NONE. */
static bool publish(srv_engine *e, slot *sl, sift_token tok, float p_sel, size_t n_probs, srv_stop stop, int stop_word,
                    bool truncated, const char *text, size_t text_n)
{
    srv_task *t = sl->task;
    const bool tr = t->req.trace && !sl->trace_oom;
    pthread_mutex_lock(&t->mu);
    bool ok = grow((void **)&t->recs, &t->cap_recs, t->n_recs, 1, sizeof *t->recs) &&
              grow((void **)&t->probs, &t->cap_probs, t->n_probs, n_probs, sizeof *t->probs) &&
              (!tr || (grow((void **)&t->stages, &t->cap_stages, t->n_stages, sl->n_st, sizeof *t->stages) &&
                       grow((void **)&t->tops, &t->cap_tops, t->n_tops, sl->n_top, sizeof *t->tops)));
    if (ok) {
        utf8_sanitize(&t->text, text, text_n);
        ok = !t->text.oom;
    }
    if (ok) {
        srv_tokrec *r = &t->recs[t->n_recs++];
        r->tok = tok;
        r->text_end = (uint32_t)t->text.n;
        r->p = p_sel;
        r->probs_off = (uint32_t)t->n_probs;
        r->n_probs = (uint32_t)n_probs;
        for (size_t i = 0; i < n_probs; i++) t->probs[t->n_probs++] = (srv_prob){sl->pid[i], sl->pp[i]};
        r->trace_off = (uint32_t)t->n_stages;
        r->n_stages = tr ? (uint32_t)sl->n_st : 0;
        if (tr) {
            const uint32_t base = (uint32_t)t->n_tops;
            for (size_t i = 0; i < sl->n_st; i++) {
                srv_stage s = sl->st[i];
                s.top_off += base;
                t->stages[t->n_stages++] = s;
            }
            if (sl->n_top) memcpy(t->tops + t->n_tops, sl->top, sl->n_top * sizeof *sl->top);
            t->n_tops += sl->n_top;
        }
        t->n_decoded = sl->n_decoded;
    }
    if (stop != SRV_STOP_NONE || !ok) {
        const double now = srv_now_ms();
        t->stop = stop;
        t->stop_word = stop_word;
        t->truncated = truncated;
        t->t_prompt_ms = sl->t_first - sl->t_start;
        t->t_gen_ms = now - sl->t_first;
        if (!ok) srv_errorf(&t->err, 500, "out of memory while generating");
        t->done = true;
    }
    /* a streaming connection wants every token; a non-streaming one only the end */
    if (t->req.stream || t->done) pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    (void)e;
    return ok;
}

/* End a task without a new token (a complete grammar that may not emit end-of-generation):
 * the text released so far stands, with what was held back for stop words flushed. */
static void finish_without_token(slot *sl, srv_stop stop)
{
    srv_task *t = sl->task;
    pthread_mutex_lock(&t->mu);
    if (sl->gen.n > sl->n_released) utf8_sanitize(&t->text, sl->gen.p + sl->n_released, sl->gen.n - sl->n_released);
    sl->n_released = sl->gen.n;
    const double now = srv_now_ms();
    t->stop = stop;
    t->stop_word = -1;
    t->truncated = false;
    t->t_prompt_ms = sl->t_first - sl->t_start;
    t->t_gen_ms = now - sl->t_first;
    t->done = true;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

typedef enum { DONE_OK, DONE_FAILED, DONE_CANCELLED } done_kind;

/* Count a finished task into the stats (under e->mu); the tokens of a cancelled or failed
 * task count too: the work was done. */
static void stats_task_done(srv_engine *e, slot *sl, done_kind how)
{
    srv_task *t = sl->task;
    pthread_mutex_lock(&e->mu);
    if (how == DONE_FAILED) e->stats.n_tasks_failed++;
    else if (how == DONE_CANCELLED) e->stats.n_tasks_cancelled++;
    else e->stats.n_tasks_done++;
    e->stats.n_prompt_tokens += t->req.n_prompt - t->n_cached;
    e->stats.t_prompt_s += (sl->t_first > 0 ? sl->t_first - sl->t_start : srv_now_ms() - sl->t_start) / 1e3;
    e->stats.n_gen_tokens += sl->n_decoded;
    e->stats.t_gen_s += sl->t_first > 0 ? (srv_now_ms() - sl->t_first) / 1e3 : 0;
    if (sl->n_cache + 1 > e->stats.n_tokens_max) e->stats.n_tokens_max = sl->n_cache + 1;
    /* latencies as a client sees them: queued at submit, first token when its logits were sampled */
    srv_hist_add(&e->stats.h_queue, (sl->t_start - t->t_submit) / 1e3);
    if (sl->t_first > 0) srv_hist_add(&e->stats.h_ttft, (sl->t_first - t->t_submit) / 1e3);
    if (sl->t_first > 0 && sl->n_decoded > 1)
        srv_hist_add(&e->stats.h_tpot, (srv_now_ms() - sl->t_first) / 1e3 / (sl->n_decoded - 1));
    pthread_mutex_unlock(&e->mu);
}

/* The slot's logits are ready: sample, publish, and go on or finish. */
static void slot_step(srv_engine *e, slot *sl, const float *logits)
{
    srv_task *t = sl->task;
    const srv_request *r = &t->req;
    if (sl->t_first == 0) sl->t_first = srv_now_ms();
    if (sl->n_decoded >= sl->n_limit) { /* n_predict 0: the prompt was only read into the cache */
        pthread_mutex_lock(&t->mu);
        t->stop = SRV_STOP_LIMIT;
        t->t_prompt_ms = sl->t_first - sl->t_start;
        t->done = true;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
        stats_task_done(e, sl, DONE_OK);
        slot_release(e, sl);
        return;
    }
    float p_sel = 0;
    size_t n_probs = 0;
    think_step(e, sl);
    sift_token tok;
    if (sl->i_forced < sl->n_forced) { /* the reasoning budget's closing tag: forced, not sampled */
        tok = sl->forced[sl->i_forced++];
        sl->n_st = sl->n_top = 0; /* no sampling step: no trace stages for this token */
        sift_chain_accept(t->chain, tok);
        if (t->grammar) sift_sampler_accept(t->grammar, tok);
        p_sel = 1;
    } else {
        tok = slot_sample(e, sl, logits, &p_sel, &n_probs);
        if (sl->think == THINK_IN) sl->n_think++;
    }
    if (tok == SIFT_TOKEN_NULL && t->grammar) {
        const sift_grammar_status gs = sift_grammar_sampler_status(t->grammar);
        if (gs == SIFT_GRAMMAR_CAN_END || gs == SIFT_GRAMMAR_DONE) {
            /* complete, and its end-of-generation tokens are suppressed (ignore_eos, a
             * logit bias): nothing more can be generated, the text stands as it is */
            finish_without_token(sl, SRV_STOP_EOS);
            stats_task_done(e, sl, DONE_OK);
        } else if (gs == SIFT_GRAMMAR_OVER_LIMIT) {
            char msg[160];
            snprintf(msg, sizeof msg, "the grammar has more than %d parse stacks at once (SIFT_GRAMMAR_MAX_STACKS): "
                                      "it is too ambiguous to follow", SIFT_GRAMMAR_MAX_STACKS);
            task_fail(t, 400, msg);
            stats_task_done(e, sl, DONE_FAILED);
        } else {
            task_fail(t, 400, "the grammar allows no token here: no token of the vocabulary can continue it "
                              "(or the sampler chain excludes every token it allows)");
            stats_task_done(e, sl, DONE_FAILED);
        }
        slot_release(e, sl);
        return;
    }
    if (tok == SIFT_TOKEN_NULL) {
        task_fail(t, 500, "the sampler chain selected no token");
        stats_task_done(e, sl, DONE_FAILED);
        slot_release(e, sl);
        return;
    }
    sl->n_decoded++;
    srv_stop stop = SRV_STOP_NONE;
    int stop_word = -1;
    bool truncated = false;
    if (sift_vocab_is_eog(e->s->vocab, tok)) {
        stop = SRV_STOP_EOS;
    } else {
        char buf[256];
        int32_t n = sift_token_to_piece(e->s->vocab, tok, buf, sizeof buf, 0, false);
        if (n < 0) { /* a long piece */
            char *big = malloc((size_t)-n);
            if (big && (n = sift_token_to_piece(e->s->vocab, tok, big, -n, 0, false)) > 0) sbuf_add(&sl->gen, big, (size_t)n);
            free(big);
        } else {
            sbuf_add(&sl->gen, buf, (size_t)n);
        }
        if (r->n_stop) {
            /* a stop string can only start in text not yet released (partial matches are held) */
            const size_t from = sl->n_released;
            const long at = stop_find(sl->gen.p, sl->gen.n, from, r->stop, r->n_stop, &stop_word);
            if (at >= 0) {
                sl->gen.n = (size_t)at;
                stop = SRV_STOP_WORD;
            }
        }
    }
    if (stop == SRV_STOP_NONE && sl->n_decoded >= sl->n_limit) stop = SRV_STOP_LIMIT;
    /* the slot's context is full once the next token has no cell after it (llama-server
     * stops at prompt + generated = the slot's context); --context-shift makes room instead */
    if (stop == SRV_STOP_NONE && sl->n_cache + 1 >= e->n_ctx_slot && !(e->s->cfg.ctx_shift && ctx_shift(e, sl)))
        stop = SRV_STOP_LIMIT, truncated = true;
    truncated |= sl->shifted;
    /* the text this token releases */
    size_t upto = sl->gen.n;
    if (stop == SRV_STOP_NONE) {
        size_t hold = utf8_incomplete_tail(sl->gen.p, sl->gen.n);
        const size_t ph = stop_partial(sl->gen.p, sl->gen.n, r->stop, r->n_stop);
        if (ph > hold) hold = ph;
        upto = sl->gen.n - hold > sl->n_released ? sl->gen.n - hold : sl->n_released;
    }
    const bool ok = publish(e, sl, tok, p_sel, n_probs, stop, stop_word, truncated, sl->gen.p ? sl->gen.p + sl->n_released : "",
                            upto - sl->n_released);
    sl->n_released = upto;
    if (stop != SRV_STOP_NONE || !ok) {
        stats_task_done(e, sl, ok ? DONE_OK : DONE_FAILED);
        slot_release(e, sl);
        return;
    }
    sl->last = tok;
    sl->state = SLOT_GEN;
    if (sl->draft) { /* the draft's history ends with the newest token, not yet decoded */
        sift_error err = {0};
        if (sift_draft_push(sl->draft, &tok, 1, &err) != SIFT_OK) fprintf(stderr, "sift serve: slot %d: draft: %s\n", sl->id, err.msg);
    }
}

/* How deep a slot drafts when the cost model has data: the k whose extra tokens are worth
 * more than they cost. A step of n batch tokens takes about b + s * n ms (fitted to the
 * decodes' own times, decayed so that it follows the machine's load); with g generating
 * slots a plain token costs a slot (b + s * g) / g. A draft of k tokens that the target
 * accepts token by token with probability a adds a + ... + a^k expected tokens to the slot's
 * step and costs k * (s + c), c being the draft's own time per token (a draft model's
 * decodes; near zero for prompt lookup). Where verification is nearly free (decoding bound
 * by memory) drafts get long; where the batch is already compute-bound, or the draft
 * costs more than it saves, k is 0 and the slot generates plainly, with a one-token probe
 * every PROBE_EVERY steps to notice when that changes. */
#define COST_DECAY 0.97
#define COST_WARMUP 8
#define PROBE_EVERY 32
static int32_t cost_depth(const srv_engine *e, const slot *sl, int32_t cap, int n_gen)
{
    const double var = e->cw * e->cxx - e->cx * e->cx;
    if (e->cw < COST_WARMUP || var <= 1e-6 * e->cw * e->cw) return cap; /* no fit yet: the draft's own rule */
    double s = (e->cw * e->cxy - e->cx * e->cy) / var;
    const double b = (e->cy - s * e->cx) / e->cw;
    if (s < 0) s = 0;
    const double per_token = (b + s * n_gen) / (n_gen > 0 ? n_gen : 1);
    const double c = sl->d_n > 0 ? sl->d_ms / sl->d_n : 0;
    const double a = sift_draft_acceptance(sl->draft);
    int32_t best = 0;
    double best_gain = 0, gain_tokens = 0, ak = 1;
    for (int32_t k = 1; k <= cap; k++) {
        ak *= a;
        gain_tokens += ak;
        const double gain = gain_tokens * per_token - k * (s + c);
        if (gain > best_gain) best = k, best_gain = gain;
    }
    if (best == 0 && sl->idle >= PROBE_EVERY) best = 1;
    return best;
}

/* Record a decode of n batch tokens that took ms. */
static void cost_observe(srv_engine *e, int32_t n, double ms)
{
    e->cw = COST_DECAY * e->cw + 1;
    e->cx = COST_DECAY * e->cx + n;
    e->cxx = COST_DECAY * e->cxx + (double)n * n;
    e->cy = COST_DECAY * e->cy + ms;
    e->cxy = COST_DECAY * e->cxy + n * ms;
}

/* Speculative decoding: the draft for a generating slot, up to cap tokens after its last
 * one (0 without a draft source, with the request's n_max 0, or while the reasoning budget
 * forces tokens). A draft never reaches the last cells of the slot (so no context shift can
 * happen while draft tokens sit in the cache) nor past the request's n_predict. n_gen: the
 * generating slots of this step. */
static int32_t slot_draft(srv_engine *e, slot *sl, int32_t cap, int n_gen)
{
    const srv_request *r = &sl->task->req;
    sl->n_draft = 0;
    if (!sl->draft || r->spec.n_max < 1 || sl->i_forced < sl->n_forced) return 0;
    if (cap > r->spec.n_max) cap = r->spec.n_max;
    if (cap > e->n_ctx_slot - sl->n_cache - 2) cap = e->n_ctx_slot - sl->n_cache - 2;
    if (cap > sl->n_limit - sl->n_decoded - 1) cap = sl->n_limit - sl->n_decoded - 1;
    if (cap > 0) cap = cost_depth(e, sl, cap, n_gen);
    if (cap < 1) {
        sl->idle++;
        return 0;
    }
    sift_error err = {0};
    const double t0 = srv_now_ms();
    const int32_t k = sift_draft_propose(sl->draft, sl->dtok, cap, &err);
    const double ms = srv_now_ms() - t0;
    e->t_draft_ms += ms;
    if (k < 0) {
        fprintf(stderr, "sift serve: slot %d: draft: %s\n", sl->id, err.msg);
        return 0;
    }
    if (k > 0) {
        sl->d_ms = COST_DECAY * sl->d_ms + ms;
        sl->d_n = COST_DECAY * sl->d_n + k;
        sl->idle = 0;
    } else {
        sl->idle++;
    }
    return sl->n_draft = k;
}

static void task_count_drafts(srv_task *t, int32_t drafted, int32_t accepted)
{
    pthread_mutex_lock(&t->mu);
    t->n_drafted += drafted;
    t->n_draft_accepted += accepted;
    pthread_mutex_unlock(&t->mu);
}

/* The logits of a generating slot's batch rows are ready: row 0 follows its last token, row
 * j + 1 its draft token j. Sample row by row as plain generation would (slot_step: one chain
 * step, one RNG draw, one publish per row), going on while the sampled token is the draft's;
 * the first one that differs, or the one after a fully accepted draft, is the new last
 * token. Then the cells of the rejected draft tokens leave the cache. */
static void slot_verify(srv_engine *e, slot *sl)
{
    srv_task *t = sl->task;
    const int32_t k = sl->n_draft, row = sl->batch_idx;
    int32_t acc = 0;
    /* (the task's counters change only while the slot holds it: a slot_step that ends the
     * task releases the slot's reference, and the task may be gone after it) */
    if (k) task_count_drafts(t, k, 0);
    for (int32_t j = 0;; j++) {
        slot_step(e, sl, sift_get_logits_ith(e->ctx, row + j));
        if (j == k || sl->task != t || sl->state != SLOT_GEN || sl->last != sl->dtok[j]) break;
        sl->cache[sl->n_cache++] = sl->last; /* its cell was decoded with the draft */
        acc++;
        task_count_drafts(t, 0, 1); /* before the next row's publish, which may end the task */
    }
    sift_kv_seq_rm(e->ctx, sl->id, sl->n_cache, -1);
    sl->n_draft = 0;
    if (!k) return;
    sift_draft_feedback(sl->draft, k, acc);
    e->n_drafted += k;
    e->n_draft_accepted += acc;
}

/* ---- the loop -------------------------------------------------------------------------------------- */

/* Step 1: cancelled tasks out of the queue, waiting tasks into idle slots (under e->mu).
 * Returns how many tasks were taken; their slots are listed in started[]. */
static int take_queue(srv_engine *e, slot **started)
{
    int n_started = 0, w = 0;
    for (int i = 0; i < e->q_n; i++) {
        srv_task *t = e->queue[i];
        if (atomic_load(&t->cancelled)) {
            e->stats.n_tasks_cancelled++;
            srv_task_unref(t);
            continue;
        }
        slot *best = NULL;
        int32_t best_keep = -1;
        for (int k = 0; k < e->n_slots; k++) {
            slot *sl = &e->slots[k];
            if (sl->state != SLOT_IDLE || sl->task) continue;
            if (t->req.id_slot >= 0 && sl->id != t->req.id_slot) continue;
            bool taken = false;
            for (int j = 0; j < n_started; j++) taken |= started[j] == sl;
            if (taken) continue;
            const int32_t keep = t->req.cache_prompt ? common_prefix(sl->cache, sl->n_cache, t->req.prompt, t->req.n_prompt) : 0;
            if (keep > best_keep || (keep == best_keep && sl->last_used < best->last_used)) best = sl, best_keep = keep;
        }
        if (best) {
            best->task = t; /* claimed; slot_start runs outside the lock */
            e->running[best->id] = t;
            started[n_started++] = best;
        } else {
            e->queue[w++] = t;
        }
    }
    e->q_n = w;
    return n_started;
}

static void publish_snapshot(srv_engine *e, int n_busy)
{
    pthread_mutex_lock(&e->mu);
    e->stats.n_busy = n_busy;
    e->stats.n_queued = e->q_n;
    e->stats.kv_used = sift_kv_n_used(e->ctx);
    for (int i = 0; i < e->n_slots; i++) {
        const slot *sl = &e->slots[i];
        srv_slot_info *p = &e->pub[i];
        p->id = sl->id;
        p->busy = sl->task != NULL;
        p->id_task = sl->task ? sl->task->id : -1;
        p->n_prompt = sl->task ? sl->task->req.n_prompt : 0;
        p->n_past = sl->n_cache;
        p->n_decoded = sl->n_decoded;
        p->n_cached_tokens = sl->n_cache;
        p->has_run = sl->has_run;
        p->spec = sl->task ? sl->task->req.spec : sl->has_run ? sl->last_spec : srv_draft_defaults(&e->s->cfg);
        p->draft_acceptance = sl->draft ? sift_draft_acceptance(sl->draft) : 0;
    }
    pthread_mutex_unlock(&e->mu);
}

/* Run op on the engine thread: the slot must be idle. Save writes its cells and cached
 * tokens; restore replaces them (the file must hold a token per cell); erase empties them. */
static void run_slot_op(srv_engine *e, slot_op *op)
{
    slot *sl = &e->slots[op->slot];
    sift_error err = {0};
    const double t0 = srv_now_ms();
    if (sl->task) {
        srv_errorf(&op->err, 503, "slot %d is busy with a request; retry when it is idle", op->slot);
        return;
    }
    if (op->action == SRV_SLOT_ERASE) {
        op->res.n_tokens = sl->n_cache;
        sift_kv_seq_rm(e->ctx, sl->id, -1, -1);
        sl->n_cache = 0;
    } else if (op->action == SRV_SLOT_SAVE) {
        op->res.n_bytes = sift_state_seq_save_file(e->ctx, op->path, sl->id, sl->cache, (size_t)sl->n_cache, &err);
        op->res.n_tokens = sl->n_cache;
        if (!op->res.n_bytes) srv_errorf(&op->err, 500, "slot %d: %s", op->slot, err.msg);
    } else {
        size_t nt = 0;
        op->res.n_bytes = sift_state_seq_load_file(e->ctx, op->path, sl->id, sl->cache, (size_t)e->n_ctx_slot, &nt, &err);
        if (op->res.n_bytes && sift_kv_seq_pos_max(e->ctx, sl->id) + 1 != (sift_pos)nt) { /* cells and tokens disagree */
            op->res.n_bytes = 0;
            snprintf(err.msg, sizeof err.msg, "the file's cells do not match its %zu tokens", nt);
            err.status = SIFT_E_FORMAT;
        }
        if (!op->res.n_bytes) {
            sift_kv_seq_rm(e->ctx, sl->id, -1, -1); /* (a refused file leaves the cells, but the tokens may be half read) */
            sl->n_cache = 0;
            srv_errorf(&op->err, err.status == SIFT_E_IO ? 404 : 400, "slot %d: %s", op->slot, err.msg);
        } else {
            sl->n_cache = (int32_t)nt;
            op->res.n_tokens = (long long)nt;
        }
    }
    op->res.ms = srv_now_ms() - t0;
}

static void *engine_main(void *arg)
{
    srv_engine *e = arg;
    slot **started = calloc((size_t)e->n_slots, sizeof *started);
    const int n_batch = e->batch.capacity;
    for (;;) {
        /* 1. the queue */
        pthread_mutex_lock(&e->mu);
        for (;;) {
            bool active = false;
            for (int i = 0; i < e->n_slots; i++) active |= e->slots[i].task != NULL;
            if (e->stop || active || e->q_n > 0 || (e->op && !e->op->taken)) break;
            pthread_cond_wait(&e->cv, &e->mu);
        }
        if (e->stop) {
            pthread_mutex_unlock(&e->mu);
            break;
        }
        const int n_started = started ? take_queue(e, started) : 0;
        slot_op *op = e->op && !e->op->taken ? e->op : NULL;
        if (op) op->taken = true;
        pthread_mutex_unlock(&e->mu);
        for (int i = 0; i < n_started; i++) slot_start(e, started[i], started[i]->task);
        if (op) {
            run_slot_op(e, op);
            pthread_mutex_lock(&e->mu);
            op->done = true;
            pthread_cond_signal(&op->cv);
            pthread_mutex_unlock(&e->mu);
        }

        /* 2. clients that went away */
        for (int i = 0; i < e->n_slots; i++) {
            slot *sl = &e->slots[i];
            if (sl->task && atomic_load(&sl->task->cancelled)) {
                task_fail(sl->task, 499, "the client closed the connection");
                stats_task_done(e, sl, DONE_CANCELLED);
                slot_release(e, sl);
            }
        }

        /* 3. one batch: generating slots first (one token each), then prompt chunks */
        sift_batch_clear(&e->batch);
        int n_busy = 0;
        long long n_shared = 0;
        int n_gen = 0;
        for (int i = 0; i < e->n_slots; i++) n_gen += e->slots[i].state == SLOT_GEN;
        const int n_gen_all = n_gen;
        for (int i = 0; i < e->n_slots; i++) {
            slot *sl = &e->slots[i];
            sl->batch_idx = -1;
            sl->n_in_batch = 0;
            if (sl->state != SLOT_GEN) continue;
            n_busy++;
            n_gen--;
            /* its draft gets what the batch has left after one entry for each generating slot */
            const int32_t k = slot_draft(e, sl, n_batch - e->batch.n_tokens - 1 - n_gen, n_gen_all);
            sl->batch_idx = e->batch.n_tokens;
            sift_batch_add(&e->batch, sl->last, sl->n_cache, &sl->id, 1, true);
            for (int32_t j = 0; j < k; j++) sift_batch_add(&e->batch, sl->dtok[j], sl->n_cache + 1 + j, &sl->id, 1, true);
            sl->n_in_batch = 1 + k;
        }
        for (int i = 0; i < e->n_slots; i++) {
            slot *sl = &e->slots[i];
            if (sl->state != SLOT_PROMPT || sl->n_in_batch) continue; /* (n_in_batch: read with a twin below) */
            n_busy++;
            const srv_request *r = &sl->task->req;
            /* twins: slots reading the same prompt from the same place (the n choices of one
             * request) decode it once, each token listed in all their sequences; the last
             * token's logits serve them all, each samples with its own chain */
            int n_ids = 1;
            e->share_ids[0] = sl->id;
            for (int k = i + 1; k < e->n_slots; k++) {
                const slot *o = &e->slots[k];
                if (o->state == SLOT_PROMPT && same_prompt_at(sl, o)) e->share_ids[n_ids++] = o->id;
            }
            while (sl->i_prompt + sl->n_in_batch < r->n_prompt && e->batch.n_tokens < n_batch) {
                const int32_t j = sl->i_prompt + sl->n_in_batch;
                const bool last = j == r->n_prompt - 1;
                sift_batch_add(&e->batch, r->prompt[j], sl->n_cache + sl->n_in_batch, e->share_ids, n_ids, last);
                if (last) sl->batch_idx = e->batch.n_tokens - 1;
                sl->n_in_batch++;
            }
            n_shared += (long long)sl->n_in_batch * (n_ids - 1);
            for (int k = 1; k < n_ids; k++) {
                slot *o = &e->slots[e->share_ids[k]];
                o->n_in_batch = sl->n_in_batch;
                o->batch_idx = sl->batch_idx;
                n_busy++;
            }
        }
        if (e->batch.n_tokens == 0) {
            publish_snapshot(e, n_busy);
            continue;
        }

        /* 4. one decode for every active sequence */
        sift_error err = {0};
        const double t_dec0 = srv_now_ms();
        const sift_status st = sift_decode(e->ctx, &e->batch, &err);
        const double t_dec1 = srv_now_ms();
        if (st == SIFT_OK) cost_observe(e, e->batch.n_tokens, t_dec1 - t_dec0);
        pthread_mutex_lock(&e->mu);
        e->stats.t_decode_s += (t_dec1 - t_dec0) / 1e3;
        e->stats.n_decode++;
        e->stats.n_busy_slot_steps += n_busy;
        e->stats.n_prompt_shared += n_shared;
        pthread_mutex_unlock(&e->mu);
        if (st != SIFT_OK) {
            char msg[300];
            snprintf(msg, sizeof msg, "decode failed: %s", err.msg);
            fprintf(stderr, "sift serve: %s\n", msg);
            for (int i = 0; i < e->n_slots; i++) {
                slot *sl = &e->slots[i];
                if (!sl->n_in_batch) continue;
                task_fail(sl->task, 500, msg);
                stats_task_done(e, sl, DONE_FAILED);
                sift_kv_seq_rm(e->ctx, sl->id, -1, -1);
                sl->n_cache = 0;
                slot_release(e, sl);
            }
            publish_snapshot(e, 0);
            continue;
        }

        /* 5. the decoded tokens are in the cache; sample where logits came out */
        for (int i = 0; i < e->n_slots; i++) {
            slot *sl = &e->slots[i];
            if (!sl->n_in_batch) continue;
            if (sl->state == SLOT_GEN) {
                sl->cache[sl->n_cache++] = sl->last;
                slot_verify(e, sl);
                continue;
            } else {
                memcpy(sl->cache + sl->n_cache, sl->task->req.prompt + sl->i_prompt, (size_t)sl->n_in_batch * sizeof(sift_token));
                sl->n_cache += sl->n_in_batch;
                sl->i_prompt += sl->n_in_batch;
                report_progress(sl);
            }
            if (sl->batch_idx >= 0) slot_step(e, sl, sift_get_logits_ith(e->ctx, sl->batch_idx));
        }
        n_busy = 0;
        for (int i = 0; i < e->n_slots; i++) n_busy += e->slots[i].task != NULL;
        const double t_smp = srv_now_ms() - t_dec1;
        pthread_mutex_lock(&e->mu);
        e->stats.t_sample_s += t_smp / 1e3;
        e->stats.t_sampling_s += e->t_sampling_ms / 1e3;
        e->stats.n_sampled += e->n_sampled;
        e->stats.t_draft_s += e->t_draft_ms / 1e3;
        e->stats.n_drafted += e->n_drafted;
        e->stats.n_draft_accepted += e->n_draft_accepted;
        pthread_mutex_unlock(&e->mu);
        e->t_sampling_ms = e->t_draft_ms = 0;
        e->n_sampled = e->n_drafted = e->n_draft_accepted = 0;
        publish_snapshot(e, n_busy);
    }

    /* shutting down: every task still here fails */
    for (int i = 0; i < e->n_slots; i++)
        if (e->slots[i].task) {
            task_fail(e->slots[i].task, 503, "the server is shutting down");
            slot_release(e, &e->slots[i]);
        }
    free(started);
    return NULL;
}

/* ---- the public side ------------------------------------------------------------------------------------ */

/* The defaults of a request's speculative.* fields (--draft-max, --draft-min, --draft-p-min). */
sift_draft_params srv_draft_defaults(const srv_config *cfg)
{
    return (sift_draft_params){.n_max = cfg->draft_max, .n_min = cfg->draft_min, .p_min = cfg->draft_p_min, .adaptive = true};
}

/* Slot sl's draft source: prompt lookup, or the draft model in a context of its own with the
 * slot's cells (a slot's drafts run one after another: the draft model is small). */
static bool slot_draft_new(srv_engine *e, slot *sl, sift_error *err)
{
    const srv_config *cfg = &e->s->cfg;
    sift_draft_params dp = srv_draft_defaults(cfg);
    if (dp.n_max < 1) dp.n_max = 1; /* (--draft-max 0: no drafting; the source still exists for requests that ask) */
    if (e->s->draft_model) {
        sift_context_params cp = sift_context_default_params();
        cp.n_ctx = (uint32_t)e->n_ctx_slot;
        cp.n_batch = (uint32_t)cfg->n_batch;
        cp.n_threads = cfg->n_threads;
        cp.n_threads_batch = cfg->n_threads_batch;
        cp.isa = cfg->isa;
        sl->draft = sift_draft_model_new(e->s->draft_model, e->s->model, cp, dp, err);
    } else {
        sl->draft = sift_draft_lookup_new(cfg->lookup, dp, err);
    }
    sl->dtok = malloc(SRV_MAX_DRAFT * sizeof *sl->dtok);
    if (sl->draft && !sl->dtok && err) {
        err->status = SIFT_E_NOMEM;
        snprintf(err->msg, sizeof err->msg, "engine: out of memory");
    }
    return sl->draft && sl->dtok;
}

srv_engine *srv_engine_start(srv_server *s, sift_error *err)
{
    const srv_config *cfg = &s->cfg;
    srv_engine *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->s = s;
    e->n_slots = cfg->n_parallel;
    sift_context_params cp = sift_context_default_params();
    cp.n_seq_max = (uint32_t)cfg->n_parallel;
    /* (--kv-unified: llama-server's slots share one pool of -c cells; sift's have one cache
     * each, so each gets the whole -c) */
    cp.n_ctx = (uint32_t)cfg->n_ctx * (cfg->kv_unified ? (uint32_t)cfg->n_parallel : 1u);
    cp.n_batch = (uint32_t)(cfg->n_batch > cfg->n_parallel ? cfg->n_batch : cfg->n_parallel);
    cp.n_threads = cfg->n_threads;
    cp.n_threads_batch = cfg->n_threads_batch;
    cp.isa = cfg->isa;
    e->ctx = sift_context_new(s->model, cp, err);
    if (!e->ctx) {
        free(e);
        return NULL;
    }
    if (cfg->n_cvec > 0) { /* control vectors: loaded once, the context keeps its copy */
        sift_control_vector *cv = NULL;
        const int32_t l0 = cfg->cvec_layer_start > 0 ? cfg->cvec_layer_start : 1;
        const int32_t l1 = cfg->cvec_layer_end > 0 ? cfg->cvec_layer_end : s->info.n_layer;
        if (sift_control_vector_load(cfg->cvec_paths, cfg->cvec_scales, cfg->n_cvec, &cv, err) != SIFT_OK ||
            sift_context_set_control_vector(e->ctx, sift_control_vector_data(cv), sift_control_vector_len(cv),
                                            sift_control_vector_n_embd(cv), l0, l1, err) != SIFT_OK) {
            sift_control_vector_free(cv);
            sift_context_free(e->ctx);
            free(e);
            return NULL;
        }
        sift_control_vector_free(cv);
    }
    e->n_ctx_slot = (int32_t)sift_n_ctx_seq(e->ctx);
    s->n_ctx_slot = e->n_ctx_slot;
    e->q_cap = cfg->max_queue > 0 ? cfg->max_queue : 1;
    /* room for one request's n choices (at most a task per slot) even past --max-queue */
    e->queue = calloc((size_t)e->q_cap + (size_t)e->n_slots, sizeof *e->queue);
    e->slots = calloc((size_t)e->n_slots, sizeof *e->slots);
    e->pub = calloc((size_t)e->n_slots, sizeof *e->pub);
    e->share_ids = calloc((size_t)e->n_slots, sizeof *e->share_ids);
    e->running = calloc((size_t)e->n_slots, sizeof *e->running);
    bool ok = e->queue && e->slots && e->pub && e->share_ids && e->running &&
              sift_batch_init(&e->batch, (int32_t)cp.n_batch, e->n_slots) == SIFT_OK;
    for (int i = 0; ok && i < e->n_slots; i++) {
        slot *sl = &e->slots[i];
        sl->id = i;
        e->pub[i] = (srv_slot_info){.id = i, .id_task = -1}; /* what /slots shows before the first step */
        sl->batch_idx = -1;
        sl->cache = malloc((size_t)e->n_ctx_slot * sizeof *sl->cache);
        sl->pid = malloc(SRV_MAX_N_PROBS * sizeof *sl->pid);
        sl->pp = malloc(SRV_MAX_N_PROBS * sizeof *sl->pp);
        ok = sl->cache && sl->pid && sl->pp;
        if (ok && (s->draft_model || cfg->lookup > 0)) {
            if (sift_model_is_recurrent(s->model)) { /* a rejected draft cannot be taken back out of a recurrent state */
                if (err) {
                    err->status = SIFT_E_UNSUPPORTED;
                    snprintf(err->msg, sizeof err->msg, "engine: speculative decoding (--model-draft, --lookup) needs a model "
                             "without a recurrent state, which this one (qwen35) keeps");
                }
                goto fail;
            }
            if (!slot_draft_new(e, sl, err)) goto fail;
        }
    }
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->stats.n_slots = e->n_slots;
    if (ok && pthread_create(&e->thread, NULL, engine_main, e) == 0) {
        e->thread_started = true;
        return e;
    }
    if (err) {
        err->status = SIFT_E_NOMEM;
        snprintf(err->msg, sizeof err->msg, "engine: out of memory (or no thread)");
    }
fail:
    srv_engine_free(e);
    return NULL;
}

int srv_engine_submit_all(srv_engine *e, srv_task *const *g, int n)
{
    pthread_mutex_lock(&e->mu);
    /* --max-queue counts waiting tasks; a request's choices (n <= slots) are never refused
     * for being more than it when nothing waits */
    if (e->stop || (e->q_n > 0 && e->q_n + n > e->q_cap) || n > e->q_cap + e->n_slots) {
        e->stats.n_rejected++;
        pthread_mutex_unlock(&e->mu);
        return 503;
    }
    for (int i = 0; i < n; i++) { /* under one lock: the engine takes them in the same step */
        srv_task *t = g[i];
        srv_task_ref(t);
        t->id = e->next_id++;
        t->t_submit = srv_now_ms();
        e->queue[e->q_n++] = t;
    }
    e->stats.n_queued = e->q_n;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

int srv_engine_submit(srv_engine *e, srv_task *t) { return srv_engine_submit_all(e, &t, 1); }

int srv_engine_slot_action(srv_engine *e, int id, srv_slot_action action, const char *path, srv_slot_result *res, srv_error *err)
{
    if (id < 0 || id >= e->n_slots) return srv_errorf(err, 400, "no slot %d (the slots are 0 to %d)", id, e->n_slots - 1);
    slot_op op = {.action = action, .slot = id, .path = path};
    pthread_cond_init(&op.cv, NULL);
    pthread_mutex_lock(&e->mu);
    if (e->stop || e->op) {
        pthread_mutex_unlock(&e->mu);
        pthread_cond_destroy(&op.cv);
        return srv_errorf(err, 503, e->stop ? "the server is shutting down" : "another slot action is running; retry");
    }
    e->op = &op;
    pthread_cond_signal(&e->cv);
    /* once the engine took it, it finishes it (file I/O, no decode): wait for that; before,
     * a stopping engine never will */
    while (!op.done && !(e->stop && !op.taken)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&op.cv, &e->mu, &ts);
    }
    e->op = NULL;
    pthread_mutex_unlock(&e->mu);
    pthread_cond_destroy(&op.cv);
    if (!op.done) return srv_errorf(err, 503, "the server is shutting down");
    if (op.err.status) {
        *err = op.err;
        return op.err.status;
    }
    *res = op.res;
    return 0;
}

void srv_engine_cancel(srv_engine *e, srv_task *t)
{
    atomic_store(&t->cancelled, true);
    pthread_mutex_lock(&e->mu);
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

bool srv_engine_stop_by(srv_engine *e, double t_end)
{
    if (!e) return true;
    pthread_mutex_lock(&e->mu);
    e->stop = true;
    for (int i = 0; i < e->q_n; i++) {
        task_fail(e->queue[i], 503, "the server is shutting down");
        srv_task_unref(e->queue[i]);
    }
    e->q_n = 0;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (!e->thread_started) return true;
    /* the thread stops after its current step; a step that does not end (a grammar's work)
     * leaves its slots' tasks to be failed from here, so that their clients get an answer */
    while (pthread_tryjoin_np(e->thread, NULL) != 0) {
        if (srv_now_ms() >= t_end) {
            pthread_mutex_lock(&e->mu);
            for (int i = 0; i < e->n_slots; i++)
                if (e->running[i]) task_fail(e->running[i], 503, "the server is shutting down");
            pthread_mutex_unlock(&e->mu);
            return false;
        }
        poll(NULL, 0, 2);
    }
    e->thread_started = false;
    return true;
}

void srv_engine_stop(srv_engine *e)
{
    if (!e) return;
    srv_engine_stop_by(e, INFINITY);
    if (e->thread_started) pthread_join(e->thread, NULL);
    e->thread_started = false;
}

void srv_engine_free(srv_engine *e)
{
    if (!e) return;
    srv_engine_stop(e);
    for (int i = 0; e->slots && i < e->n_slots; i++) {
        slot *sl = &e->slots[i];
        free(sl->cache);
        free(sl->st);
        free(sl->top);
        free(sl->pid);
        free(sl->pp);
        free(sl->dtok);
        sift_draft_free(sl->draft);
        sbuf_free(&sl->gen);
    }
    free(e->slots);
    free(e->queue);
    free(e->pub);
    free(e->share_ids);
    free(e->running);
    sift_batch_free(&e->batch);
    sift_context_free(e->ctx);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

void srv_engine_stats_get(srv_engine *e, srv_engine_stats *st, srv_slot_info *slots, int max_slots)
{
    pthread_mutex_lock(&e->mu);
    *st = e->stats;
    for (int i = 0; slots && i < max_slots && i < e->n_slots; i++) slots[i] = e->pub[i];
    pthread_mutex_unlock(&e->mu);
}
