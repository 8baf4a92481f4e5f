/*
 * cmd_generate.c - `sift generate` (and `sift -m ...` with no command word): text from a
 * GGUF model, streamed as it is sampled, in the manner of llama.cpp's llama-cli.
 *
 *   sift -m ../shared/models/stories260K.gguf -p "Once upon a time" -n 128
 *
 * The loop is llama-cli's: tokenize the prompt (BOS added as the vocabulary asks), decode
 * it in batches of -b tokens, push the prompt through the chain's accept so penalties see
 * it, then per token: sample from the last logits, accept, print the piece, decode the
 * token at the next position. Generation stops at an end-of-generation token (unless
 * --ignore-eos, which bans them), after -n tokens, or when the context is full (unless
 * --context-shift, which drops half of what follows the first --keep tokens and moves the
 * rest back, as llama-cli does).
 *
 * The chain is llama.cpp common's (every llama.cpp sampling flag, cli_sampling.c), or
 * exactly the samplers of --chain SPEC. Classifier-free guidance (--cfg-negative-prompt,
 * --cfg-scale) follows llama.cpp's old main example: a second sequence in the same context
 * starts from the negative prompt and receives every generated token too; both are decoded
 * in one batch per step, and before sampling the main logits become
 * g + scale * (l - g) on log-softmaxed vectors (sift_cfg_apply).
 *
 * Conversation mode (-cnv, the default when the model has a chat template or one is given,
 * as in llama-cli) and -i turn the run into a session: after each reply (ended by an
 * end-of-generation token, a reverse prompt, -n tokens or Ctrl-C) a line is read from stdin
 * and fed after what the KV cache holds: a user message through the chat template
 * (cli_chat.c: only the part of the rendering that is new), or the line itself with
 * --in-prefix / --in-suffix. /exit, EOF or a Ctrl-C at the prompt ends it.
 *
 * A thinking model's thinking (<think>...</think>, gpt-oss's analysis channel, Command R7B's
 * <|START_THINKING|>; the split is the server's, tools/common/reasoning.c) is shown apart as the new
 * llama-cli shows it: between "[Start thinking]" and "[End thinking]", faint when stdout is a
 * terminal (or --color on; never with --color off), and the conversation's history keeps only
 * the answer, as llama-cli's does (a template that drops old thinking renders the same text);
 * --reasoning-format none prints the reply as the model writes it and keeps it whole.
 *
 * Output: the prompt (unless --no-display-prompt) and the generated text on stdout,
 * flushed per token; logs, --trace (the chain inspector for every generated token: each
 * sampler's candidate count and top probabilities) and the perf summary on stderr
 * (--log-disable silences the logs and the summary). Exit 0, 1 on a runtime failure, 2 on
 * a usage error (one line naming the flag).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_chat.h"
#include "cli_grammar.h"
#include "cli_sampling.h"
#include "cli_util.h"
#include "generate_opts.h"
#include "reasoning.h"
#include "sift.h"
#include "stream_text.h"

/* Ctrl-C. Without interaction it ends the generation like any other stop, perf summary
 * included (llama-cli prints its timings too), and a second one is the default action
 * again. In interactive and conversation modes (llama-cli's sigint_handler) the first stops
 * the current reply and hands control back; one while waiting for input, or a second before
 * the reply noticed the first, ends the session with the perf summary (exit 130). The
 * handler only sets flags: the perf summary is printed by the code that sees them.
 * One Ctrl-C can arrive twice: `timeout -s INT` signals the command and then its whole
 * process group, the command included, and the second came after the handler had run about
 * one time in twelve, killing sift before its summary. So a second SIGINT within
 * SIGINT_ECHO_NS of the first is that same one; later, it is the default action. */
#define SIGINT_ECHO_NS 200000000LL
static volatile sig_atomic_t interrupted, quit_requested, waiting_input, interactive_mode;
static struct timespec first_sigint;
static void on_sigint(int sig)
{
    if (!interactive_mode) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t); /* (async-signal-safe) */
        if (!interrupted) {
            first_sigint = t;
            interrupted = 1;
        } else if ((long long)(t.tv_sec - first_sigint.tv_sec) * 1000000000LL + (t.tv_nsec - first_sigint.tv_nsec) >= SIGINT_ECHO_NS) {
            signal(sig, SIG_DFL);
            raise(sig);
        }
    } else if (waiting_input || interrupted) {
        quit_requested = 1;
    } else {
        interrupted = 1;
    }
}

const char sift_cmd_generate_help[] = "generate text from a GGUF model, llama-cli style (also: sift -m MODEL -p PROMPT)";

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---- tokens and text ------------------------------------------------------------------------ */

/* parse_special: special tokens' texts are those tokens (a rendered chat template), as
 * llama-cli parses them; a plain prompt is taken as text, as it always was here */
static sift_token *tokenize(const sift_vocab *vocab, const char *text, bool add_special, bool parse_special,
                            int32_t *n_out)
{
    const size_t len = strlen(text);
    int32_t cap = (int32_t)(len + 8);
    sift_token *toks = malloc((size_t)cap * sizeof *toks);
    if (!toks) return NULL;
    int32_t n = sift_tokenize(vocab, text, len, toks, cap, add_special, parse_special);
    if (n < 0 && n != INT32_MIN) {
        cap = -n;
        sift_token *t2 = realloc(toks, (size_t)cap * sizeof *toks);
        if (!t2) {
            free(toks);
            return NULL;
        }
        toks = t2;
        n = sift_tokenize(vocab, text, len, toks, cap, add_special, parse_special);
    }
    if (n < 0) {
        free(toks);
        return NULL;
    }
    *n_out = n;
    return toks;
}

/* token_to_piece without specials (control tokens print as nothing), as llama-cli shows text */
static int piece(const sift_vocab *vocab, sift_token t, char *buf, int cap, bool special)
{
    int32_t n = sift_token_to_piece(vocab, t, buf, cap, 0, special);
    return n < 0 ? 0 : n;
}

static void print_piece(const sift_vocab *vocab, sift_token t, bool special)
{
    char buf[256];
    const int n = piece(vocab, t, buf, sizeof buf, special);
    fwrite(buf, 1, (size_t)n, stdout);
}

/* A piece for the trace: quoted, control bytes escaped, at most ~24 bytes shown. */
static void trace_piece(FILE *f, const sift_vocab *vocab, sift_token t)
{
    char buf[64];
    const int n = piece(vocab, t, buf, sizeof buf, true);
    fputc('"', f);
    for (int i = 0; i < n && i < 24; i++) {
        const unsigned char c = (unsigned char)buf[i];
        if (c == '\n') fputs("\\n", f);
        else if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* ---- the chain inspector (--trace) ---------------------------------------------------------- */

typedef struct trace_state {
    const sift_vocab *vocab;
    int top;
    long step;
} trace_state;

static void trace_hook(void *user, int32_t index, const sift_sampler *smpl, const sift_candidates *cand)
{
    trace_state *ts = user;
    FILE *f = stderr;
    if (index < 0) fprintf(f, "[trace] step %ld\n", ts->step);
    sift_token ids[32];
    float probs[32];
    const size_t n = sift_candidates_top(cand, (size_t)ts->top, ids, NULL, probs);
    /* the row "(logits)" is the stage before any sampler; the numbers are always
     * probabilities (softmax of what is left), hence "p:" */
    fprintf(f, "[trace]   %-12s n=%-6zu p:", index < 0 ? "(logits)" : sift_sampler_name(smpl), cand->size);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, " %d:", (int)ids[i]);
        trace_piece(f, ts->vocab, ids[i]);
        fprintf(f, "=%.3f", probs[i]);
    }
    if (cand->selected >= 0 && (size_t)cand->selected < cand->size) fprintf(f, "  -> %d", (int)cand->id[cand->selected]);
    fputc('\n', f);
}

/* ---- grammar hook ------------------------------------------------------------------------------ */

/* The grammar sampler the flags ask for (cli_grammar.h), or none. It stays outside the chain
 * and is used as llama.cpp's common sampler uses it: by default rejection (sample with the
 * chain, apply the grammar only when it refuses the pick), or --grammar-first; prompt tokens
 * go to the chain's history, not to the grammar. Returns 0 and *out (NULL: no grammar), or
 * an exit code. */
static int make_grammar(const gen_opts *o, const sift_vocab_view *view, sift_sampler **out)
{
    sift_error err = {0};
    *out = cli_grammar_sampler(&o->grammar, view, &err);
    if (!*out && err.status != SIFT_OK) {
        fprintf(stderr, "sift generate: %s\n", err.msg);
        return 2;
    }
    return 0;
}

static sift_token sample_token(sift_sampler *grammar, sift_grammar_mode mode, sift_chain *chain, const float *logits,
                               int32_t n_vocab)
{
    if (grammar) return sift_grammar_chain_sample(grammar, chain, logits, n_vocab, mode, NULL);
    return sift_chain_sample(chain, logits, n_vocab);
}

/* ---- decoding ------------------------------------------------------------------------------------ */

typedef struct seq_feed {
    const sift_token *toks;
    int32_t n;
    int32_t pos0;    /* position of toks[0] */
    float *logits;   /* receives the logits after the last token */
} seq_feed;

/* Decode the tokens of several sequences, filling batches of at most n_batch tokens; each
 * sequence's logits after its last token are copied out (they may come from different
 * decode calls). */
static int feed(sift_context *ctx, sift_batch *b, seq_feed *seqs, int n_seqs, int32_t n_vocab)
{
    int cur = 0, off = 0;
    while (cur < n_seqs) {
        sift_batch_clear(b);
        int last_idx[2] = {-1, -1};
        while (cur < n_seqs && b->n_tokens < b->capacity) {
            const seq_feed *s = &seqs[cur];
            if (off == s->n) {
                cur++, off = 0;
                continue;
            }
            const bool last = off == s->n - 1;
            if (last) last_idx[cur] = b->n_tokens;
            sift_batch_add(b, s->toks[off], s->pos0 + off, &cur, 1, last);
            off++;
        }
        if (b->n_tokens == 0) break;
        sift_error err = {0};
        if (sift_decode(ctx, b, &err) != SIFT_OK) {
            fprintf(stderr, "sift generate: decode: %s\n", err.msg);
            return 1;
        }
        for (int s = 0; s < n_seqs && s < 2; s++)
            if (last_idx[s] >= 0) memcpy(seqs[s].logits, sift_get_logits_ith(ctx, last_idx[s]), (size_t)n_vocab * sizeof(float));
    }
    return 0;
}

/* llama-cli's context shift on one sequence: keep [0, n_keep), drop half of the rest. */
static int32_t shift_context(sift_context *ctx, int seq, int32_t n_past, int32_t n_keep)
{
    const int32_t n_left = n_past - n_keep;
    const int32_t n_discard = n_left / 2;
    if (n_discard < 1) return n_past;
    if (sift_kv_seq_rm(ctx, seq, n_keep, n_keep + n_discard) != SIFT_OK) { /* a recurrent state (qwen35): no shift */
        fprintf(stderr, "\n[context shift: not possible, the model keeps a recurrent state; stopping]\n");
        return n_past;
    }
    sift_kv_seq_add(ctx, seq, n_keep + n_discard, n_past, -n_discard);
    return n_past - n_discard;
}

/* ---- interaction --------------------------------------------------------------------------------- */

/* llama-cli's console colours (--color): the prompt yellow, the user's input bold green */
#define COL_RESET "\x1b[0m"
#define COL_PROMPT "\x1b[33m"
#define COL_USER "\x1b[1m\x1b[32m"

/* One line of input (llama-cli's readline): a line ending in '\' goes on on the next line,
 * keeping the newline. NULL at EOF or when interrupted; the trailing newline removed. */
static char *read_input(void)
{
    char *buf = NULL, *line = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        errno = 0;
        const ssize_t k = getline(&line, &cap, stdin);
        if (k < 0) {
            clearerr(stdin);
            free(line);
            if (n == 0 || quit_requested) {
                free(buf);
                return NULL;
            }
            return buf;
        }
        char *b2 = realloc(buf, n + (size_t)k + 1);
        if (!b2) {
            free(buf), free(line);
            return NULL;
        }
        buf = b2;
        memcpy(buf + n, line, (size_t)k + 1);
        n += (size_t)k;
        if (n >= 2 && buf[n - 1] == '\n' && buf[n - 2] == '\\') {
            buf[n - 2] = '\n', buf[--n] = 0;
            continue;
        }
        break;
    }
    free(line);
    if (n && buf[n - 1] == '\n') buf[--n] = 0;
    return buf;
}

/* ---- the run: decoding input, generating replies ------------------------------------------------ */

typedef struct gen_run {
    const gen_opts *o;
    const sift_vocab *vocab;
    sift_context *ctx;
    sift_chain *chain;
    sift_sampler *grammar;
    sift_batch batch;
    float *logits, *glogits;
    int32_t n_vocab;
    long n_ctx_seq;
    bool cfg;
    int32_t n_past, n_past_g, n_keep;
    trace_state *ts;
    sift_spec *spec;   /* speculative decoding (NULL: plain) */
    sift_draft *draft;
    sift_token *out;   /* the tokens of a speculative step */
    sift_token undecoded; /* the last sampled token when a reply stopped before decoding it */
    rs_spec *think;       /* the reply's thinking shown apart (NULL: printed as written) */
    bool dim;             /* the thinking in faint text */
    /* perf */
    double t_load, t_prompt, t_gen, t_decode;
    long n_prompt_tok, n_gen, n_dec;
} gen_run;

typedef enum stop_why { STOP_NPREDICT, STOP_EOG, STOP_CTX, STOP_RPROMPT, STOP_INT, STOP_GRAMMAR, STOP_ERROR } stop_why;

static const char *stop_name(stop_why w)
{
    switch (w) {
    case STOP_NPREDICT: return "n_predict";
    case STOP_EOG: return "end of generation";
    case STOP_CTX: return "context full";
    case STOP_RPROMPT: return "reverse prompt";
    case STOP_INT: return "interrupt (Ctrl-C)";
    case STOP_GRAMMAR: return "grammar complete (end of generation suppressed)";
    default: return "error";
    }
}

/* Decode more input of the main sequence (a turn of the conversation, an input line) after
 * what the context holds; it goes into the chain's history too. The undecoded last token of
 * the previous reply comes first. Nonzero on failure. */
static int ingest(gen_run *r, const sift_token *toks, int32_t n)
{
    sift_token *all = malloc(((size_t)n + 1) * sizeof *all);
    if (!all) return 1;
    int32_t k = 0;
    if (r->undecoded != SIFT_TOKEN_NULL) all[k++] = r->undecoded;
    memcpy(all + k, toks, (size_t)n * sizeof *toks);
    k += n;
    r->undecoded = SIFT_TOKEN_NULL;
    if (r->n_past + k > r->n_ctx_seq) {
        fprintf(stderr, "\nsift generate: the input does not fit in what is left of the context (%ld tokens; see -c)\n",
                r->n_ctx_seq);
        free(all);
        return 1;
    }
    const double t0 = now_ms();
    seq_feed f = {all, k, r->n_past, r->logits};
    const int rc = k ? feed(r->ctx, &r->batch, &f, 1, r->n_vocab) : 0;
    r->t_prompt += now_ms() - t0;
    r->n_prompt_tok += n;
    for (int32_t i = 0; i < n; i++) sift_chain_accept(r->chain, toks[i]);
    /* the draft's history already ends with the undecoded token (it was sampled) */
    sift_error err = {0};
    if (!rc && r->draft && sift_draft_push(r->draft, toks, n, &err) != SIFT_OK) {
        fprintf(stderr, "\nsift generate: %s\n", err.msg);
        free(all);
        return 1;
    }
    r->n_past += k;
    free(all);
    return rc;
}

/* Tokenize text and ingest it; the special tokens of a rendered chat template are parsed. */
static int ingest_text(gen_run *r, const char *text, bool first, bool parse_special)
{
    if (!*text && !first) return 0;
    int32_t n = 0;
    sift_token *toks = tokenize(r->vocab, text, first, parse_special, &n);
    if (!toks) {
        fprintf(stderr, "\nsift generate: cannot tokenize the input\n");
        return 1;
    }
    const int rc = ingest(r, toks, n);
    free(toks);
    return rc;
}

/* Whether a reverse prompt ends in text[0..n) after byte `from` (a piece just printed). */
static bool rprompt_found(const gen_opts *o, const char *text, size_t n, size_t from)
{
    for (int i = 0; i < o->n_rprompts; i++) {
        const size_t l = strlen(o->rprompts[i]);
        if (l > n) continue;
        for (size_t at = from >= l ? from - l + 1 : 0; at + l <= n; at++)
            if (!memcmp(text + at, o->rprompts[i], l)) return true;
    }
    return false;
}

/* The state of one reply, for take_token (the speculative step calls it per token). */
typedef struct reply_state {
    gen_run *r;
    sbuf text;
    long n_gen;
    stop_why why;
    sbuf answer;   /* with r->think: the reply without its thinking (what the history keeps) */
    bool thinking; /* the thinking's frame is open */
} reply_state;

#define COL_THINK "\x1b[2m" /* faint */

/* Thinking and answer text that came out of the split: the thinking inside its frame. */
static void show_split(reply_state *rs, const sbuf *reasoning, const sbuf *answer)
{
    const gen_run *r = rs->r;
    if (reasoning->n) {
        if (!rs->thinking) fputs(r->dim ? COL_THINK "[Start thinking]\n" : "[Start thinking]\n", stdout);
        rs->thinking = true;
        fwrite(reasoning->p, 1, reasoning->n, stdout);
    }
    if (answer->n) {
        if (rs->thinking) fputs(r->dim ? "\n[End thinking]\n\n" COL_RESET : "\n[End thinking]\n\n", stdout);
        rs->thinking = false;
        fwrite(answer->p, 1, answer->n, stdout);
        sbuf_add(&rs->answer, answer->p, answer->n);
    }
}

/* A token's text on stdout: as written, or through the thinking's split (which reads the
 * special tokens' texts: <think> may be one). */
static void show_piece(reply_state *rs, sift_token tok, const char *buf, int np)
{
    gen_run *r = rs->r;
    if (!r->think) {
        fwrite(buf, 1, (size_t)np, stdout);
        return;
    }
    char sp[256];
    const int ns = r->o->special ? np : piece(r->vocab, tok, sp, sizeof sp, true);
    sbuf rr = {0}, cc = {0};
    rs_stream(r->think, r->o->special ? buf : sp, (size_t)ns, &rr, &cc);
    show_split(rs, &rr, &cc);
    sbuf_free(&rr);
    sbuf_free(&cc);
}

/* The reply's end: the rest of the split, the thinking's frame closed (the colour too). */
static void show_end(reply_state *rs)
{
    gen_run *r = rs->r;
    if (!r->think) return;
    sbuf rr = {0}, cc = {0};
    rs_stream_final(r->think, r->think->seen.p ? r->think->seen.p : "", r->think->seen.n, &rr, &cc);
    show_split(rs, &rr, &cc);
    sbuf_free(&rr);
    sbuf_free(&cc);
    if (rs->thinking && r->dim) fputs(COL_RESET, stdout);
    rs->thinking = false;
}

/* A token was sampled (and accepted by the chain): count it, print it, and say whether the
 * reply goes on. On a stop the token stays undecoded (the next input starts with it). */
static bool take_token(void *user, sift_token tok)
{
    reply_state *rs = user;
    gen_run *r = rs->r;
    const gen_opts *o = r->o;
    rs->n_gen++;
    r->n_gen++;
    r->ts->step = r->n_gen;
    if (sift_vocab_is_eog(r->vocab, tok)) {
        r->undecoded = tok; /* the turn's end stays in the conversation (llama-cli decodes it too) */
        rs->why = STOP_EOG;
        return false;
    }
    char buf[256];
    const int np = piece(r->vocab, tok, buf, sizeof buf, o->special);
    show_piece(rs, tok, buf, np);
    fflush(stdout);
    const size_t before = rs->text.n;
    sbuf_add(&rs->text, buf, (size_t)np);
    if (o->trace) {
        fprintf(stderr, "[trace]   => %d ", (int)tok);
        trace_piece(stderr, r->vocab, tok);
        fputc('\n', stderr);
    }
    if (o->n_rprompts && rprompt_found(o, rs->text.p, rs->text.n, before)) {
        r->undecoded = tok;
        rs->why = STOP_RPROMPT;
        return false;
    }
    if (o->n_predict >= 0 && rs->n_gen >= o->n_predict) {
        r->undecoded = tok;
        rs->why = STOP_NPREDICT;
        return false;
    }
    return true;
}

/* The chain (and grammar) selected nothing: a stop when the grammar is complete, else an error. */
static stop_why no_token(const gen_run *r)
{
    if (r->grammar) {
        /* the grammar and the chain left no token: never sample a forbidden one */
        const sift_grammar_status gs = sift_grammar_sampler_status(r->grammar);
        if (gs == SIFT_GRAMMAR_CAN_END || gs == SIFT_GRAMMAR_DONE) return STOP_GRAMMAR;
        if (gs == SIFT_GRAMMAR_OVER_LIMIT) {
            fprintf(stderr, "\nsift generate: the grammar has more than %d parse stacks at once (SIFT_GRAMMAR_MAX_STACKS): "
                            "it is too ambiguous to follow\n", SIFT_GRAMMAR_MAX_STACKS);
            return STOP_ERROR;
        }
        fprintf(stderr, "\nsift generate: the grammar allows no token here: no token of the vocabulary can continue it "
                        "(or the sampler chain excludes every token it allows)\n");
        return STOP_ERROR;
    }
    fprintf(stderr, "\nsift generate: the chain selected no token (its last sampler must select)\n");
    return STOP_ERROR;
}

/* The rest of a reply with speculative decoding: each step decodes the last token and a
 * draft in one batch and samples the positions the target agrees with (sift_spec_step);
 * take_token sees each token as the plain loop would. No context shift (refused earlier). */
static void reply_spec(gen_run *r, reply_state *rs, sift_token tok)
{
    const gen_opts *o = r->o;
    sift_error err = {0};
    const sift_spec_sampling smp = {.chain = r->chain, .grammar = r->grammar, .mode = o->grammar.mode,
                                    .on_token = take_token, .user = rs};
    for (;;) {
        if (interrupted) {
            r->undecoded = tok;
            rs->why = STOP_INT;
            return;
        }
        if (r->n_past >= r->n_ctx_seq) {
            r->undecoded = tok;
            rs->why = STOP_CTX;
            return;
        }
        const long left = o->n_predict >= 0 ? o->n_predict - rs->n_gen : r->n_ctx_seq;
        sift_spec_result res;
        const double td = now_ms();
        /* r->out holds a batch's worth of tokens, the most one step can give */
        const int32_t room = (int32_t)(left < 1 ? 1 : left > r->batch.capacity ? r->batch.capacity : left);
        const sift_status st = sift_spec_step(r->spec, r->n_past, tok, room, &smp, r->out, &res, &err);
        r->t_decode += now_ms() - td;
        if (st != SIFT_OK) {
            fprintf(stderr, "\nsift generate: decode: %s\n", err.msg);
            rs->why = STOP_ERROR;
            return;
        }
        r->n_dec++;
        r->n_past += res.n_tokens;
        if (res.n_tokens) tok = r->out[res.n_tokens - 1];
        if (res.stopped) return; /* take_token said why and kept tok undecoded */
        if (res.no_token) {
            rs->why = no_token(r);
            return;
        }
    }
}

/* Sample a reply from the logits at hand, printing it; its text goes to *out (may be NULL).
 * Stops at an end-of-generation token, -n tokens, a reverse prompt, a full context, Ctrl-C. */
static stop_why reply(gen_run *r, sbuf *out)
{
    const gen_opts *o = r->o;
    sift_error err = {0};
    reply_state rs = {.r = r, .why = STOP_NPREDICT};
    const double t0 = now_ms();
    for (;;) {
        if (o->n_predict >= 0 && rs.n_gen >= o->n_predict) break;
        if (interrupted) {
            rs.why = STOP_INT;
            break;
        }
        if (r->cfg) sift_cfg_apply(r->logits, r->glogits, r->n_vocab, o->cfg_scale);
        r->ts->step = r->n_gen;
        const sift_token tok = sample_token(r->grammar, o->grammar.mode, r->chain, r->logits, r->n_vocab);
        if (tok == SIFT_TOKEN_NULL) {
            rs.why = no_token(r);
            break;
        }
        if (r->spec && sift_draft_push(r->draft, &tok, 1, &err) != SIFT_OK) {
            fprintf(stderr, "\nsift generate: %s\n", err.msg);
            rs.why = STOP_ERROR;
            break;
        }
        if (!take_token(&rs, tok)) break;
        if (r->spec) {
            reply_spec(r, &rs, tok);
            break;
        }
        if (r->n_past >= r->n_ctx_seq || (r->cfg && r->n_past_g >= r->n_ctx_seq)) {
            if (!o->context_shift || o->n_predict == -2) {
                r->undecoded = tok;
                rs.why = STOP_CTX;
                break;
            }
            if (o->log) fprintf(stderr, "\n[context shift: keeping %d tokens, dropping half of the rest]\n", r->n_keep);
            r->n_past = shift_context(r->ctx, 0, r->n_past, r->n_keep);
            if (r->cfg) r->n_past_g = shift_context(r->ctx, 1, r->n_past_g, r->n_keep);
            if (r->n_past >= r->n_ctx_seq) {
                r->undecoded = tok;
                rs.why = STOP_CTX;
                break;
            }
        }
        /* one batch: the token for the main sequence (and for the guidance sequence) */
        sift_batch_clear(&r->batch);
        int s0 = 0, s1 = 1;
        sift_batch_add(&r->batch, tok, r->n_past, &s0, 1, true);
        if (r->cfg) sift_batch_add(&r->batch, tok, r->n_past_g, &s1, 1, true);
        const double td = now_ms();
        if (sift_decode(r->ctx, &r->batch, &err) != SIFT_OK) {
            fprintf(stderr, "\nsift generate: decode: %s\n", err.msg);
            rs.why = STOP_ERROR;
            break;
        }
        r->t_decode += now_ms() - td;
        r->n_dec++;
        memcpy(r->logits, sift_get_logits_ith(r->ctx, 0), (size_t)r->n_vocab * sizeof(float));
        if (r->cfg) memcpy(r->glogits, sift_get_logits_ith(r->ctx, 1), (size_t)r->n_vocab * sizeof(float));
        r->n_past++;
        r->n_past_g++;
    }
    r->t_gen += now_ms() - t0;
    show_end(&rs);
    const sbuf *keep = r->think ? &rs.answer : &rs.text; /* the history keeps the answer alone */
    if (out && keep->n) sbuf_add(out, keep->p, keep->n);
    sbuf_free(&rs.text);
    sbuf_free(&rs.answer);
    return rs.why;
}

static void print_perf(const gen_run *r, const char *stop)
{
    const sift_chain_perf perf = sift_chain_get_perf(r->chain);
    const long n_prompt = r->n_prompt_tok;
    fprintf(stderr, "\nsift perf: stopped by %s\n", stop);
    fprintf(stderr, "sift perf: load        %10.2f ms\n", r->t_load);
    fprintf(stderr, "sift perf: prompt      %10.2f ms / %5ld tokens (%10.1f tokens/s)\n", r->t_prompt, n_prompt,
            r->t_prompt > 0 ? n_prompt / (r->t_prompt / 1e3) : 0.0);
    fprintf(stderr, "sift perf: generation  %10.2f ms / %5ld tokens (%10.1f tokens/s; decode %.1f tokens/s)\n", r->t_gen,
            r->n_gen, r->t_gen > 0 ? r->n_gen / (r->t_gen / 1e3) : 0.0,
            r->t_decode > 0 ? r->n_dec / (r->t_decode / 1e3) : 0.0);
    if (perf.n_sample > 0) {
        fprintf(stderr, "sift perf: sampling    %10.2f us/token (fill %.2f us) over %lld tokens; by sampler:",
                (perf.t_total_us + perf.t_fill_us) / (double)perf.n_sample, perf.t_fill_us / (double)perf.n_sample,
                (long long)perf.n_sample);
        for (int32_t i = 0; i < sift_chain_n(r->chain); i++) {
            const double us = sift_chain_perf_sampler_us(r->chain, i);
            fprintf(stderr, " %s %.1f%%", sift_sampler_name(sift_chain_get(r->chain, i)),
                    perf.t_total_us > 0 ? 100.0 * us / perf.t_total_us : 0.0);
        }
        fputc('\n', stderr);
    }
    if (r->spec) {
        /* llama.cpp's speculative example: n_drafted, n_accept, accept % */
        const sift_spec_stats st = sift_spec_get_stats(r->spec);
        char how[96];
        if (r->o->lookup) snprintf(how, sizeof how, "n-gram 1..%ld", r->o->lookup);
        else snprintf(how, sizeof how, "p-min %.2f", (double)r->o->draft_p_min);
        fprintf(stderr, "sift perf: speculative %s (%s, draft-max %ld, draft-min %ld): %lld target passes, %.2f tokens per pass\n",
                sift_draft_kind(r->draft), how, r->o->draft_max, r->o->draft_min, (long long)st.n_steps,
                st.n_steps ? (double)st.n_tokens / (double)st.n_steps : 0.0);
        fprintf(stderr, "sift perf: n_drafted = %lld, n_accept = %lld, accept = %.3f%%; draft %.2f ms, verify %.2f ms\n",
                (long long)st.n_drafted, (long long)st.n_accepted,
                st.n_drafted ? 100.0 * (double)st.n_accepted / (double)st.n_drafted : 0.0, st.t_draft_ms, st.t_verify_ms);
    }
    fprintf(stderr, "sift perf: total       %10.2f ms\n", r->t_load + r->t_prompt + r->t_gen);
}

/* Before a reply in conversation mode: a fresh split of its thinking when the model may think
 * and --reasoning-format is not none (the prompt may have opened the thinking already). */
static void think_begin(gen_run *r, const cli_chat *chat)
{
    rs_spec_free(r->think);
    r->think = NULL;
    if (!chat || r->o->reasoning_format == RS_NONE || !cli_chat_thinks(chat)) return;
    if (!(r->think = calloc(1, sizeof *r->think))) return; /* (out of memory: shown as written) */
    r->think->format = RS_DEEPSEEK;
    r->think->forced_open = cli_chat_forced_open(chat);
    rs_set_tags(r->think, cli_chat_format(chat));
}

/* --verbose-prompt: the text fed at a turn, on stderr */
static void verbose_prompt(const gen_opts *o, const char *text)
{
    if (o->verbose_prompt && text) fprintf(stderr, "sift: prompt: '%s'\n", text);
}

/* The interactive session after the first prompt (llama-cli's loop): reply, then read a line
 * and feed it (a user message through the chat template in conversation mode; the line with
 * --in-prefix / --in-suffix otherwise), until /exit, EOF or a second Ctrl-C. *stop says why it
 * ended; nonzero on failure. */
static int session(gen_run *r, cli_chat *chat, bool reply_first, const char **stop, bool *quit)
{
    const gen_opts *o = r->o;
    const bool cnv = chat != NULL;
    bool need_eot = false;
    for (bool gen = reply_first;;) {
        if (gen) {
            sbuf text = {0};
            think_begin(r, chat);
            const stop_why w = reply(r, &text);
            interrupted = 0;
            if (w == STOP_ERROR) {
                sbuf_free(&text);
                return 1;
            }
            if (cnv && !cli_chat_push(chat, "assistant", text.p ? text.p : "")) {
                sbuf_free(&text);
                return 1;
            }
            sbuf_free(&text);
            /* a reply cut short (Ctrl-C, as llama-cli; also -n and a reverse prompt, which
             * llama-cli leaves open) gets the turn's end before the next message */
            need_eot = cnv && w != STOP_EOG;
            if (w == STOP_EOG && !cnv && o->n_rprompts) {
                /* llama-cli: after the end of the text, the first reverse prompt, shown and fed */
                fputs(o->rprompts[0], stdout);
                if (ingest_text(r, o->rprompts[0], false, true)) return 1;
            }
            if (w == STOP_CTX) {
                *stop = stop_name(w);
                return 0;
            }
            if (o->single_turn && cnv) { /* -st: llama-cli exits after its first reply */
                *stop = "single turn (-st)";
                return 0;
            }
        }
        if (quit_requested) break;
        waiting_input = 1;
        if (cnv) fputs("\n> ", stdout);
        else if (o->in_prefix) fputs(o->in_prefix, stdout);
        if (o->color) fputs(COL_USER, stdout);
        fflush(stdout);
        char *line = quit_requested ? NULL : read_input();
        if (o->color) fputs(COL_RESET, stdout);
        waiting_input = 0;
        interrupted = 0; /* a Ctrl-C between the reply's end and the prompt must not stop the next one */
        if (!line) {
            if (quit_requested) break;
            *stop = "end of input (EOF)";
            fputc('\n', stdout);
            return 0;
        }
        if (!strcmp(line, "/exit")) {
            free(line);
            *stop = "/exit";
            return 0;
        }
        if (!*line) {
            /* an empty line: in a chat, ask again; otherwise hand control back to the model */
            free(line);
            gen = !cnv;
            continue;
        }
        if (!cnv && o->in_suffix) fputs(o->in_suffix, stdout);
        fflush(stdout);
        if (o->escape) gen_process_escapes(line);
        if (o->in_prefix_bos) {
            const sift_token bos = sift_vocab_bos(r->vocab);
            if (bos != SIFT_TOKEN_NULL && ingest(r, &bos, 1)) return free(line), 1;
        }
        if (need_eot) {
            sift_token eot = sift_vocab_eot(r->vocab);
            if (eot == SIFT_TOKEN_NULL) eot = sift_vocab_eos(r->vocab);
            if (eot != SIFT_TOKEN_NULL && ingest(r, &eot, 1)) return free(line), 1;
            need_eot = false;
        }
        int rc = o->in_prefix ? ingest_text(r, o->in_prefix, false, true) : 0;
        if (!rc && cnv) {
            char err[512];
            char *delta = cli_chat_add(chat, "user", line, true, err, sizeof err);
            if (!delta) fprintf(stderr, "\nsift generate: %s\n", err);
            verbose_prompt(o, delta);
            rc = !delta || ingest_text(r, delta, false, true);
            free(delta);
        } else if (!rc) {
            rc = ingest_text(r, line, false, false);
        }
        if (!rc && o->in_suffix) rc = ingest_text(r, o->in_suffix, false, true);
        free(line);
        if (rc) return 1;
        gen = true;
    }
    *stop = "interrupt (Ctrl-C twice)";
    *quit = true;
    return 0;
}

/* ---- the command ---------------------------------------------------------------------------------- */

int sift_cmd_generate(int argc, char **argv)
{
    gen_opts o;
    cli_sampling cs;
    cli_sampling_init(&cs);
    bool sampling_flags;
    const int pr = gen_parse_args(argc, argv, &o, &cs, &sampling_flags);
    if (pr != 0) {
        gen_opts_free(&o);
        return pr < 0 ? 0 : pr;
    }
    const bool cfg = o.neg_owned && o.cfg_scale != 1.0f;

    int rc = 1;
    sift_model *model = NULL, *dmodel = NULL;
    sift_context *ctx = NULL;
    sift_chain *chain = NULL;
    sift_sampler *grammar = NULL;
    sift_token *prompt = NULL, *neg = NULL;
    cli_chat *chat = NULL;
    char *first_text = NULL;
    gen_run r = {.o = &o, .undecoded = SIFT_TOKEN_NULL};
    /* the thinking faint on a terminal, as llama-cli colours it (--color on: always; off: never) */
    r.dim = !o.color_off && (o.color || isatty(STDOUT_FILENO));
    sift_error err = {0};

    const double t_load0 = now_ms();
    model = sift_model_load(o.model, &err);
    if (!model) {
        fprintf(stderr, "sift generate: %s: %s\n", o.model, err.msg);
        goto done;
    }
    sift_model_info info;
    sift_model_get_info(model, &info);
    const sift_vocab *vocab = sift_model_vocab(model);
    const int32_t n_vocab = info.n_vocab;

    /* conversation mode: asked for, or a chat template at hand (llama-cli's default) */
    if (o.conversation != 0 &&
        (rc = cli_chat_for_model(model, o.chat_template_file, o.chat_template, o.conversation == 1, &chat)) != 0)
        goto done;
    rc = 1;
    const bool cnv = chat != NULL;
    const bool interactive = cnv || o.interactive;
    if (interactive && cfg) {
        fprintf(stderr, "sift generate: --cfg-negative-prompt works without interaction (add -no-cnv)\n");
        rc = 2;
        goto done;
    }
    if (o.sys_owned && !cnv && o.log) fprintf(stderr, "sift generate: -sys is for conversation mode; ignored\n");

    sift_context_params cp = sift_context_default_params();
    const long n_ctx_seq = o.n_ctx ? o.n_ctx : info.n_ctx_train;
    cp.n_seq_max = cfg ? 2 : 1;
    cp.n_ctx = (uint32_t)(n_ctx_seq * cp.n_seq_max);
    cp.n_batch = (uint32_t)(o.n_batch > cp.n_seq_max ? o.n_batch : cp.n_seq_max);
    cp.n_threads = o.n_threads;
    cp.n_threads_batch = o.n_threads_batch;
    cp.isa = o.isa;
    ctx = sift_context_new(model, cp, &err);
    if (!ctx) {
        fprintf(stderr, "sift generate: context: %s\n", err.msg);
        goto done;
    }
    if (cli_cvec_apply(&o.cvec, ctx, "sift generate") != 0) goto done;

    /* speculative decoding: a draft source and the verifier on sequence 0 */
    if (o.model_draft || o.lookup) {
        if (cfg || o.context_shift) {
            fprintf(stderr, "sift generate: speculative decoding (--model-draft, --lookup) does not go with %s\n",
                    cfg ? "--cfg-negative-prompt" : "--context-shift");
            rc = 2;
            goto done;
        }
        sift_draft_params dp = sift_draft_default_params();
        dp.n_max = (int32_t)o.draft_max, dp.n_min = (int32_t)o.draft_min, dp.p_min = o.draft_p_min, dp.adaptive = !o.draft_fixed;
        if (o.lookup) {
            r.draft = sift_draft_lookup_new((int32_t)o.lookup, dp, &err);
        } else if ((dmodel = sift_model_load(o.model_draft, &err)) != NULL) {
            sift_context_params dcp = cp;
            dcp.n_ctx = (uint32_t)n_ctx_seq, dcp.n_seq_max = 1;
            r.draft = sift_draft_model_new(dmodel, model, dcp, dp, &err);
        }
        if (!r.draft || !(r.spec = sift_spec_new(ctx, 0, r.draft, &err)) ||
            !(r.out = malloc(sizeof *r.out * (size_t)cp.n_batch))) {
            fprintf(stderr, "sift generate: %s%s%s\n", o.model_draft && !o.lookup ? o.model_draft : "", o.model_draft && !o.lookup ? ": " : "",
                    err.msg[0] ? err.msg : "out of memory");
            rc = err.status == SIFT_E_INVAL ? 2 : 1;
            goto done;
        }
    }
    const double t_load = now_ms() - t_load0;

    /* the chain */
    sift_vocab_view view;
    sift_vocab_view_get(vocab, &view);
    sift_token eot = sift_vocab_eot(vocab);
    if (eot == SIFT_TOKEN_NULL) eot = sift_vocab_eos(vocab);
    if (o.chain_spec) {
        sift_chain_env env = {.n_vocab = n_vocab, .vocab = &view, .eot = eot,
                              .default_seed = cs.seed_set ? cs.params.seed : SIFT_DEFAULT_SEED};
        chain = sift_chain_new(sift_chain_default_params());
        if (chain && cs.params.ignore_eos) {
            /* --ignore-eos with --chain: ban every end-of-generation token up front */
            int32_t n_eog = 0;
            const sift_token *eog = sift_vocab_eog(vocab, &n_eog);
            sift_logit_bias *bias = calloc((size_t)n_eog + 1, sizeof *bias);
            for (int32_t i = 0; bias && i < n_eog; i++) bias[i] = (sift_logit_bias){eog[i], -INFINITY};
            sift_sampler *lb = bias ? sift_sampler_init_logit_bias(n_vocab, (size_t)n_eog, bias) : NULL;
            free(bias);
            if (!lb || sift_chain_add(chain, lb) != SIFT_OK) {
                sift_sampler_free(lb);
                fprintf(stderr, "sift generate: out of memory\n");
                goto done;
            }
        }
        if (!chain || sift_chain_add_spec(chain, o.chain_spec, &env, &err) != SIFT_OK) {
            fprintf(stderr, "sift generate: --chain: %s\n", chain ? err.msg : "out of memory");
            rc = chain && err.status == SIFT_E_PARSE ? 2 : 1;
            goto done;
        }
    } else {
        /* libsift's rules, now that the vocabulary is known; -1 windows = the context */
        if (cli_sampling_finish(&cs, n_vocab, (int32_t)n_ctx_seq)) {
            rc = 2;
            goto done;
        }
        sift_chain_env env = {.n_vocab = n_vocab, .vocab = &view, .eot = eot, .default_seed = SIFT_DEFAULT_SEED};
        chain = sift_chain_from_params(&cs.params, &env, &err);
        if (!chain) {
            fprintf(stderr, "sift generate: sampling: %s\n", err.msg);
            rc = 2;
            goto done;
        }
    }
    if ((rc = make_grammar(&o, &view, &grammar)) != 0) goto done;
    rc = 1;
    trace_state ts = {vocab, o.trace_top, 0};
    if (o.trace) sift_chain_set_trace(chain, trace_hook, &ts);

    /* The first text. In conversation mode, the system prompt and -p (the first user
     * message, answered at once) through the template; with no -p the session waits for the
     * user. Otherwise the prompt itself (-if: the session waits after it). */
    bool reply_first = !o.interactive_first;
    if (cnv) {
        char e[512];
        char *sys = NULL, *user = NULL;
        if (o.sys_owned && *o.sys_owned && !(sys = cli_chat_add(chat, "system", o.sys_owned, false, e, sizeof e))) {
            fprintf(stderr, "sift generate: %s\n", e);
            goto done;
        }
        if (*o.prompt && !(user = cli_chat_add(chat, "user", o.prompt, true, e, sizeof e))) {
            fprintf(stderr, "sift generate: %s\n", e);
            free(sys);
            goto done;
        }
        reply_first = user != NULL;
        const size_t ls = sys ? strlen(sys) : 0, lu = user ? strlen(user) : 0;
        first_text = malloc(ls + lu + 1);
        if (first_text) {
            memcpy(first_text, sys ? sys : "", ls);
            memcpy(first_text + ls, user ? user : "", lu + 1);
        }
        free(sys);
        free(user);
    } else {
        first_text = strdup(o.prompt);
        /* llama-cli: a prompt that ends with a reverse prompt hands control to the user at
         * once (the chat-with-bob scripts end their prompt with "User:") */
        const size_t len = first_text ? strlen(first_text) : 0;
        if (o.interactive && len && rprompt_found(&o, first_text, len, len - 1)) reply_first = false;
    }
    int32_t n_prompt = 0, n_neg = 0;
    verbose_prompt(&o, first_text);
    prompt = first_text ? tokenize(vocab, first_text, true, cnv, &n_prompt) : NULL;
    if (!prompt) {
        fprintf(stderr, "sift generate: cannot tokenize the prompt\n");
        goto done;
    }
    if (n_prompt == 0 && !interactive) { /* a vocabulary without BOS and an empty prompt: nothing to condition on */
        fprintf(stderr, "sift generate: the prompt is empty and the vocabulary adds no BOS\n");
        rc = 2;
        goto done;
    }
    if (cfg && !(neg = tokenize(vocab, o.neg_owned, true, false, &n_neg))) {
        fprintf(stderr, "sift generate: cannot tokenize the negative prompt\n");
        goto done;
    }
    if (n_prompt > n_ctx_seq || (cfg && n_neg > n_ctx_seq)) {
        fprintf(stderr, "sift generate: the prompt has %d tokens, more than the context (%ld; see -c)\n",
                n_prompt > n_neg ? n_prompt : n_neg, n_ctx_seq);
        rc = 2;
        goto done;
    }

    if (o.log) {
        char desc[128], chain_desc[1024];
        sift_model_desc(model, desc, sizeof desc);
        sift_chain_describe(chain, chain_desc, sizeof chain_desc);
        fprintf(stderr, "sift: model %s: %s, vocab %d, n_ctx_train %d\n", o.model, desc, n_vocab, info.n_ctx_train);
        fprintf(stderr, "sift: context %ld per sequence x %u, batch %u, threads %d/%d, kernels %s\n", n_ctx_seq,
                cp.n_seq_max, cp.n_batch, o.n_threads, o.n_threads_batch, sift_isa_name(sift_context_isa(ctx)));
        fprintf(stderr, "sift: chain %s (seed %u)%s\n", chain_desc, sift_chain_get_seed(chain), grammar ? " + grammar" : "");
        if (cfg) fprintf(stderr, "sift: guidance scale %.2f, negative prompt %d tokens\n", o.cfg_scale, n_neg);
        if (r.draft && o.lookup)
            fprintf(stderr, "sift: speculative decoding: prompt lookup, n-grams 1..%ld, draft-max %ld, draft-min %ld\n", o.lookup,
                    o.draft_max, o.draft_min);
        else if (r.draft)
            fprintf(stderr, "sift: speculative decoding: draft model %s, draft-max %ld, draft-min %ld, p-min %.2f\n",
                    o.model_draft, o.draft_max, o.draft_min, (double)o.draft_p_min);
        if (cnv)
            fprintf(stderr, "sift: conversation mode (chat template: %s); /exit or Ctrl-D ends it, Ctrl-C stops a reply\n",
                    cli_chat_source(chat));
        else if (interactive)
            fprintf(stderr, "sift: interactive mode; /exit or Ctrl-D ends it, Ctrl-C stops the generation\n");
        fprintf(stderr, "sift: prompt %d tokens, generating %ld\n\n", n_prompt, o.n_predict);
    }

    r.vocab = vocab, r.ctx = ctx, r.chain = chain, r.grammar = grammar, r.n_vocab = n_vocab;
    r.n_ctx_seq = n_ctx_seq, r.cfg = cfg, r.ts = &ts, r.t_load = t_load;
    r.logits = malloc((size_t)n_vocab * sizeof *r.logits);
    r.glogits = malloc((size_t)n_vocab * sizeof *r.glogits);
    if (!r.logits || !r.glogits || sift_batch_init(&r.batch, (int32_t)cp.n_batch, 1) != SIFT_OK) {
        fprintf(stderr, "sift generate: out of memory\n");
        goto done;
    }

    if (o.display_prompt) {
        if (o.color) fputs(COL_PROMPT, stdout);
        for (int32_t i = 0; i < n_prompt; i++) print_piece(vocab, prompt[i], o.special);
        if (o.color) fputs(COL_RESET, stdout);
        fflush(stdout);
    }

    /* prompt processing */
    const double t_p0 = now_ms();
    seq_feed feeds[2] = {{prompt, n_prompt, 0, r.logits}, {neg, n_neg, 0, r.glogits}};
    if (feed(ctx, &r.batch, feeds, cfg ? 2 : 1, n_vocab) != 0) goto done;
    r.t_prompt = now_ms() - t_p0;
    r.n_prompt_tok = n_prompt + (cfg ? n_neg : 0);
    /* the prompt goes into the samplers' history (penalties see it), not into the grammar */
    for (int32_t i = 0; i < n_prompt; i++) sift_chain_accept(chain, prompt[i]);
    sift_chain_perf_reset(chain);
    if (r.draft && sift_draft_push(r.draft, prompt, n_prompt, &err) != SIFT_OK) {
        fprintf(stderr, "sift generate: %s\n", err.msg);
        goto done;
    }
    r.n_past = n_prompt, r.n_past_g = n_neg;
    r.n_keep = o.n_keep < 0 || o.n_keep > n_prompt ? n_prompt : (int32_t)o.n_keep + (sift_vocab_add_bos(vocab) ? 1 : 0);

    /* generation */
    interrupted = quit_requested = waiting_input = 0;
    interactive_mode = interactive;
    struct sigaction sa = {0}, old_sa;
    sa.sa_handler = on_sigint; /* no SA_RESTART: Ctrl-C must interrupt the wait for input */
    sigemptyset(&sa.sa_mask);
    const bool sig_ok = sigaction(SIGINT, &sa, &old_sa) == 0;
    const char *stop;
    bool quit = false;
    if (interactive) {
        const int src = session(&r, chat, reply_first, &stop, &quit);
        if (src) goto restore;
    } else {
        const stop_why w = reply(&r, NULL);
        if (w == STOP_ERROR) goto restore;
        stop = stop_name(w);
        /* llama-cli marks the model's own end of the text */
        if (w == STOP_EOG && o.log) fputs(" [end of text]", stdout);
    }
    fputc('\n', stdout);
    fflush(stdout);
    if (o.log) print_perf(&r, stop);
    rc = quit ? 130 : 0;
restore:
    if (sig_ok) sigaction(SIGINT, &old_sa, NULL);
    interactive_mode = 0;
done:
    sift_batch_free(&r.batch);
    sift_spec_free(r.spec);
    sift_draft_free(r.draft);
    free(r.out);
    sift_model_free(dmodel);
    free(r.logits);
    free(r.glogits);
    free(prompt);
    free(neg);
    free(first_text);
    rs_spec_free(r.think);
    cli_chat_free(chat);
    sift_sampler_free(grammar);
    sift_chain_free(chain);
    sift_context_free(ctx);
    sift_model_free(model);
    gen_opts_free(&o);
    return rc;
}
