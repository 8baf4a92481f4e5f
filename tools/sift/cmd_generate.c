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

#include "cli_cvec.h"
#include "cli_grammar.h"
#include "cli_sampling.h"
#include "cli_util.h"
#include "sift.h"

/* Ctrl-C during generation ends it like any other stop, perf summary included (llama-cli
 * prints its timings too); a second Ctrl-C is the default action again. */
static volatile sig_atomic_t interrupted;
static void on_sigint(int sig)
{
    interrupted = 1;
    signal(sig, SIG_DFL);
}

const char sift_cmd_generate_help[] = "generate text from a GGUF model, llama-cli style (also: sift -m MODEL -p PROMPT)";

typedef struct gen_opts {
    const char *model;
    char *prompt;          /* owned (after -f / escapes) */
    const char *neg_prompt; /* --cfg-negative-prompt */
    char *neg_owned;
    float cfg_scale;
    long n_predict;
    long n_ctx;
    long n_batch;
    long n_keep;
    int n_threads, n_threads_batch;
    bool escape, display_prompt, log, trace, context_shift;
    int trace_top;
    const char *chain_spec;
    sift_isa isa;
    cli_grammar grammar; /* --grammar, -j, ... (cli_grammar.h); the sampler is made in make_grammar */
    cli_cvec cvec;       /* --control-vector, ... (cli_cvec.h) */
} gen_opts;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sift generate -m MODEL.gguf [-p PROMPT | -f FILE] [options]\n"
            "       sift -m MODEL.gguf -p PROMPT [options]\n\n"
            "model and context:\n"
            "  -m, --model FILE          GGUF model (llama, qwen2, qwen3 architectures)\n"
            "  -p, --prompt TEXT         prompt (default: empty, i.e. BOS only)\n"
            "  -f, --file FILE           read the prompt from FILE\n"
            "  -e, --escape              process \\n \\t \\r \\\\ \\' \\\" \\xHH in the prompts (default)\n"
            "  --no-escape               take the prompts literally\n"
            "  -n, --n-predict N         tokens to generate (default -1: until end of generation or a full context;\n"
            "                            -2: until the context is full)\n"
            "  -c, --ctx-size N          context size in tokens (default 0: the model's training context)\n"
            "  -b, --batch-size N        most tokens per decode call while reading the prompt (default 512)\n"
            "  -t, --threads N           threads for generation (default %d)\n"
            "  -tb, --threads-batch N    threads for prompt processing (default: as -t)\n"
            "  --context-shift           when the context is full, drop half of it after the first --keep tokens\n"
            "                            and go on (default: stop)\n"
            "  --keep N                  prompt tokens kept by --context-shift, BOS not counted (default 0; -1 = all)\n"
            "  --isa NAME                kernels: auto, scalar, avx2, avx512 (default auto)\n\n"
            "sampler chain:\n"
            "  --chain SPEC              the exact chain, e.g. \"top_k(40);top_p(0.95,1);temp(0.8);dist(42)\"\n"
            "                            (replaces the flags below except --seed and --ignore-eos)\n"
            "  --cfg-negative-prompt T   classifier-free guidance: the negative prompt\n"
            "  --cfg-scale F             guidance strength (default 1.0 = off)\n"
            "\n"
            "output:\n"
            "  --no-display-prompt       do not print the prompt\n"
            "  --trace                   print the chain inspector for every generated token (stderr)\n"
            "  --trace-top K             candidates shown per sampler in --trace (default 5, at most 32)\n"
            "  --log-disable             no logs and no perf summary on stderr\n"
            "  -h, --help                this text\n\n",
            cli_default_threads());
    cli_grammar_help(f);
    cli_sampling_help(f);
    fprintf(f, "\ncontrol vectors:\n");
    cli_cvec_help(f);
}

static int bad(const char *flag, const char *value, const char *why)
{
    fprintf(stderr, "sift generate: %s: %s%s%s%s\n", flag, why, value ? " '" : "", value ? value : "", value ? "'" : "");
    return 2;
}

/* llama.cpp's string_process_escapes, in place. */
static void process_escapes(char *s)
{
    char *o = s;
    for (const char *p = s; *p; p++) {
        if (*p != '\\' || !p[1]) {
            *o++ = *p;
            continue;
        }
        p++;
        switch (*p) {
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case '\'': *o++ = '\''; break;
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case 'x': {
            int v = 0, k = 0;
            for (; k < 2; k++) {
                const char c = p[1 + k];
                const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
                if (d < 0) break;
                v = v * 16 + d;
            }
            if (k == 2) {
                *o++ = (char)v;
                p += 2;
            } else {
                *o++ = '\\';
                *o++ = 'x';
            }
            break;
        }
        default:
            *o++ = '\\';
            *o++ = *p;
        }
    }
    *o = 0;
}

/* 0: parsed; 2: usage error (message printed); -1: --help printed. */
static int parse_args(int argc, char **argv, gen_opts *o, cli_sampling *cs, bool *sampling_flags)
{
    const char *prompt = NULL, *prompt_file = NULL;
    *o = (gen_opts){.cfg_scale = 1.0f, .n_predict = -1, .n_batch = 512, .n_threads = cli_default_threads(),
                    .escape = true, .display_prompt = true, .log = true, .trace_top = 5, .isa = SIFT_ISA_AUTO};
    cli_grammar_init(&o->grammar);
    *sampling_flags = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define IS(x) (!strcmp(a, x))
#define NEEDV()                                         \
    do {                                                \
        if (!v) return bad(a, NULL, "missing value");   \
        i++;                                            \
    } while (0)
        long n;
        if (IS("-h") || IS("--help")) {
            usage(stdout);
            return -1;
        } else if (IS("-m") || IS("--model")) {
            NEEDV();
            o->model = v;
        } else if (IS("-p") || IS("--prompt")) {
            NEEDV();
            prompt = v;
        } else if (IS("-f") || IS("--file")) {
            NEEDV();
            prompt_file = v;
        } else if (IS("-e") || IS("--escape")) {
            o->escape = true;
        } else if (IS("--no-escape")) {
            o->escape = false;
        } else if (IS("-n") || IS("--n-predict") || IS("--predict")) {
            NEEDV();
            if (!cli_parse_long(v, -2, 1L << 30, &n)) return bad(a, v, "expected an integer >= -2, got");
            o->n_predict = n;
        } else if (IS("-c") || IS("--ctx-size")) {
            NEEDV();
            if (!cli_parse_long(v, 0, 1L << 24, &n)) return bad(a, v, "expected a context size in [0, 2^24], got");
            o->n_ctx = n;
        } else if (IS("-b") || IS("--batch-size") || IS("-ub") || IS("--ubatch-size")) {
            NEEDV();
            if (!cli_parse_long(v, 1, 1L << 20, &n)) return bad(a, v, "expected a batch size >= 1, got");
            o->n_batch = n;
        } else if (IS("-t") || IS("--threads")) {
            NEEDV();
            if (!cli_parse_long(v, 1, 256, &n)) return bad(a, v, "expected a thread count in [1, 256], got");
            o->n_threads = (int)n;
        } else if (IS("-tb") || IS("--threads-batch")) {
            NEEDV();
            if (!cli_parse_long(v, 1, 256, &n)) return bad(a, v, "expected a thread count in [1, 256], got");
            o->n_threads_batch = (int)n;
        } else if (IS("--keep")) {
            NEEDV();
            if (!cli_parse_long(v, -1, 1L << 24, &n)) return bad(a, v, "expected an integer >= -1, got");
            o->n_keep = n;
        } else if (IS("--context-shift")) {
            o->context_shift = true;
        } else if (IS("--no-context-shift")) {
            o->context_shift = false;
        } else if (IS("--isa")) {
            NEEDV();
            if (!cli_parse_isa(v, &o->isa)) return bad(a, v, "expected auto, scalar, avx2 or avx512, got");
        } else if (IS("--chain")) {
            NEEDV();
            o->chain_spec = v;
        } else if (IS("--cfg-negative-prompt")) {
            NEEDV();
            o->neg_prompt = v;
        } else if (IS("--cfg-scale")) {
            NEEDV();
            char *end;
            errno = 0;
            double f = strtod(v, &end);
            if (end == v || *end || errno || !isfinite(f)) return bad(a, v, "expected a number, got");
            o->cfg_scale = (float)f;
        } else if (IS("--no-display-prompt")) {
            o->display_prompt = false;
        } else if (IS("--display-prompt")) {
            o->display_prompt = true;
        } else if (IS("--log-disable")) {
            o->log = false;
        } else if (IS("--trace")) {
            o->trace = true;
        } else if (IS("--trace-top")) {
            NEEDV();
            if (!cli_parse_long(v, 1, 32, &n)) return bad(a, v, "expected an integer in [1, 32], got");
            o->trace_top = (int)n;
        } else if (IS("-no-cnv") || IS("--no-conversation")) {
            /* sift generate is never interactive: accepted for llama-cli command lines */
        } else if ((n = cli_cvec_flag(&o->cvec, "sift generate", argc, argv, &i)) != 0) {
            if (n < 0) return 2;
        } else if ((n = cli_grammar_flag(&o->grammar, argc, argv, &i)) != 0) {
            if (n < 0) return 2;
        } else {
            const int r = cli_sampling_flag(cs, argc, argv, &i);
            if (r < 0) return 2;
            if (r == 0) return bad(a, NULL, "unknown option (try --help)");
            if (!IS("-s") && !IS("--seed") && !IS("--ignore-eos") && !IS("--no-perf")) *sampling_flags = true;
        }
#undef IS
#undef NEEDV
    }
    if (!o->model) return bad("-m", NULL, "a model is required");
    if (prompt && prompt_file) return bad("-f", NULL, "give either -p or -f, not both");
    if (o->chain_spec && *sampling_flags)
        return bad("--chain", NULL, "excludes the llama.cpp sampling flags (only --seed and --ignore-eos go with it)");
    if (!o->n_threads_batch) o->n_threads_batch = o->n_threads;
    if (prompt_file) {
        if (!(o->prompt = cli_read_file(prompt_file, NULL))) {
            fprintf(stderr, "sift generate: -f: cannot read '%s': %s\n", prompt_file, strerror(errno));
            return 2;
        }
        /* one trailing newline is the file's end, not the prompt's (llama-cli drops it too) */
        const size_t len = strlen(o->prompt);
        if (len && o->prompt[len - 1] == '\n') o->prompt[len - 1] = 0;
    } else {
        o->prompt = strdup(prompt ? prompt : "");
    }
    if (o->neg_prompt) o->neg_owned = strdup(o->neg_prompt);
    if (!o->prompt || (o->neg_prompt && !o->neg_owned)) return bad("-p", NULL, "out of memory");
    if (o->escape) {
        process_escapes(o->prompt);
        if (o->neg_owned) process_escapes(o->neg_owned);
    }
    return 0;
}

/* ---- tokens and text ------------------------------------------------------------------------ */

static sift_token *tokenize(const sift_vocab *vocab, const char *text, bool add_special, int32_t *n_out)
{
    const size_t len = strlen(text);
    int32_t cap = (int32_t)(len + 8);
    sift_token *toks = malloc((size_t)cap * sizeof *toks);
    if (!toks) return NULL;
    int32_t n = sift_tokenize(vocab, text, len, toks, cap, add_special, false);
    if (n < 0 && n != INT32_MIN) {
        cap = -n;
        sift_token *t2 = realloc(toks, (size_t)cap * sizeof *toks);
        if (!t2) {
            free(toks);
            return NULL;
        }
        toks = t2;
        n = sift_tokenize(vocab, text, len, toks, cap, add_special, false);
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

static void print_piece(const sift_vocab *vocab, sift_token t)
{
    char buf[256];
    const int n = piece(vocab, t, buf, sizeof buf, false);
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
    sift_kv_seq_rm(ctx, seq, n_keep, n_keep + n_discard);
    sift_kv_seq_add(ctx, seq, n_keep + n_discard, n_past, -n_discard);
    return n_past - n_discard;
}

/* ---- the command ---------------------------------------------------------------------------------- */

int sift_cmd_generate(int argc, char **argv)
{
    gen_opts o;
    cli_sampling cs;
    cli_sampling_init(&cs);
    bool sampling_flags;
    const int pr = parse_args(argc, argv, &o, &cs, &sampling_flags);
    if (pr != 0) {
        free(o.prompt);
        free(o.neg_owned);
        return pr < 0 ? 0 : pr;
    }
    const bool cfg = o.neg_owned && o.cfg_scale != 1.0f;

    int rc = 1;
    sift_model *model = NULL;
    sift_context *ctx = NULL;
    sift_chain *chain = NULL;
    sift_sampler *grammar = NULL;
    sift_token *prompt = NULL, *neg = NULL;
    float *logits = NULL, *glogits = NULL;
    sift_batch batch = {0};
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

    /* the prompts */
    int32_t n_prompt = 0, n_neg = 0;
    prompt = tokenize(vocab, o.prompt, true, &n_prompt);
    if (!prompt) {
        fprintf(stderr, "sift generate: cannot tokenize the prompt\n");
        goto done;
    }
    if (n_prompt == 0) { /* a vocabulary without BOS and an empty prompt: nothing to condition on */
        fprintf(stderr, "sift generate: the prompt is empty and the vocabulary adds no BOS\n");
        rc = 2;
        goto done;
    }
    if (cfg && !(neg = tokenize(vocab, o.neg_owned, true, &n_neg))) {
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
        fprintf(stderr, "sift: prompt %d tokens, generating %ld\n\n", n_prompt, o.n_predict);
    }

    logits = malloc((size_t)n_vocab * sizeof *logits);
    glogits = malloc((size_t)n_vocab * sizeof *glogits);
    if (!logits || !glogits || sift_batch_init(&batch, (int32_t)cp.n_batch, 1) != SIFT_OK) {
        fprintf(stderr, "sift generate: out of memory\n");
        goto done;
    }

    if (o.display_prompt) {
        for (int32_t i = 0; i < n_prompt; i++) print_piece(vocab, prompt[i]);
        fflush(stdout);
    }

    /* prompt processing */
    const double t_p0 = now_ms();
    seq_feed feeds[2] = {{prompt, n_prompt, 0, logits}, {neg, n_neg, 0, glogits}};
    if (feed(ctx, &batch, feeds, cfg ? 2 : 1, n_vocab) != 0) goto done;
    const double t_prompt = now_ms() - t_p0;
    /* the prompt goes into the samplers' history (penalties see it), not into the grammar */
    for (int32_t i = 0; i < n_prompt; i++) sift_chain_accept(chain, prompt[i]);
    sift_chain_perf_reset(chain);

    /* generation */
    int32_t n_past = n_prompt, n_past_g = n_neg;
    const int32_t n_keep = o.n_keep < 0 || o.n_keep > n_prompt ? n_prompt
                                                                : (int32_t)o.n_keep + (sift_vocab_add_bos(vocab) ? 1 : 0);
    long n_gen = 0;
    double t_decode = 0;
    const char *stop = "n_predict";
    const double t_g0 = now_ms();
    interrupted = 0;
    void (*old_sigint)(int) = signal(SIGINT, on_sigint);
    for (;;) {
        if (o.n_predict >= 0 && n_gen >= o.n_predict) break;
        if (interrupted) {
            stop = "interrupt (Ctrl-C)";
            break;
        }
        if (cfg) sift_cfg_apply(logits, glogits, n_vocab, o.cfg_scale);
        ts.step = n_gen;
        const sift_token tok = sample_token(grammar, o.grammar.mode, chain, logits, n_vocab);
        if (tok == SIFT_TOKEN_NULL && grammar) {
            /* the grammar and the chain left no token: never sample a forbidden one */
            const sift_grammar_status gs = sift_grammar_sampler_status(grammar);
            if (gs == SIFT_GRAMMAR_CAN_END || gs == SIFT_GRAMMAR_DONE) {
                stop = "grammar complete (end of generation suppressed)";
                break;
            }
            fprintf(stderr, "\nsift generate: the grammar allows no token here: no token of the vocabulary can continue it "
                            "(or the sampler chain excludes every token it allows)\n");
            goto done;
        }
        if (tok == SIFT_TOKEN_NULL) {
            fprintf(stderr, "\nsift generate: the chain selected no token (its last sampler must select)\n");
            goto done;
        }
        n_gen++;
        if (sift_vocab_is_eog(vocab, tok)) {
            stop = "end of generation";
            break;
        }
        print_piece(vocab, tok);
        fflush(stdout);
        if (o.trace) {
            fprintf(stderr, "[trace]   => %d ", (int)tok);
            trace_piece(stderr, vocab, tok);
            fputc('\n', stderr);
        }
        if (o.n_predict >= 0 && n_gen >= o.n_predict) break;

        if (n_past >= n_ctx_seq || (cfg && n_past_g >= n_ctx_seq)) {
            if (!o.context_shift || o.n_predict == -2) {
                stop = "context full";
                break;
            }
            if (o.log) fprintf(stderr, "\n[context shift: keeping %d tokens, dropping half of the rest]\n", n_keep);
            n_past = shift_context(ctx, 0, n_past, n_keep);
            if (cfg) n_past_g = shift_context(ctx, 1, n_past_g, n_keep < n_neg ? n_keep : n_neg);
            if (n_past >= n_ctx_seq) {
                stop = "context full";
                break;
            }
        }
        /* one batch: the token for the main sequence (and for the guidance sequence) */
        sift_batch_clear(&batch);
        int s0 = 0, s1 = 1;
        sift_batch_add(&batch, tok, n_past, &s0, 1, true);
        if (cfg) sift_batch_add(&batch, tok, n_past_g, &s1, 1, true);
        const double td = now_ms();
        if (sift_decode(ctx, &batch, &err) != SIFT_OK) {
            fprintf(stderr, "\nsift generate: decode: %s\n", err.msg);
            goto done;
        }
        t_decode += now_ms() - td;
        memcpy(logits, sift_get_logits_ith(ctx, 0), (size_t)n_vocab * sizeof(float));
        if (cfg) memcpy(glogits, sift_get_logits_ith(ctx, 1), (size_t)n_vocab * sizeof(float));
        n_past++;
        n_past_g++;
    }
    const double t_gen = now_ms() - t_g0;
    signal(SIGINT, old_sigint == SIG_ERR ? SIG_DFL : old_sigint);
    fputc('\n', stdout);
    fflush(stdout);

    if (o.log) {
        const sift_chain_perf perf = sift_chain_get_perf(chain);
        const long n_dec = n_gen > 0 ? n_gen - 1 : 0; /* the last sampled token is not decoded */
        fprintf(stderr, "\nsift perf: stopped by %s\n", stop);
        fprintf(stderr, "sift perf: load        %10.2f ms\n", t_load);
        fprintf(stderr, "sift perf: prompt      %10.2f ms / %5d tokens (%10.1f tokens/s)\n", t_prompt,
                n_prompt + (cfg ? n_neg : 0), t_prompt > 0 ? (n_prompt + (cfg ? n_neg : 0)) / (t_prompt / 1e3) : 0.0);
        fprintf(stderr, "sift perf: generation  %10.2f ms / %5ld tokens (%10.1f tokens/s; decode %.1f tokens/s)\n", t_gen,
                n_gen, t_gen > 0 ? n_gen / (t_gen / 1e3) : 0.0, t_decode > 0 ? n_dec / (t_decode / 1e3) : 0.0);
        if (perf.n_sample > 0) {
            fprintf(stderr, "sift perf: sampling    %10.2f us/token (fill %.2f us) over %lld tokens; by sampler:",
                    (perf.t_total_us + perf.t_fill_us) / (double)perf.n_sample, perf.t_fill_us / (double)perf.n_sample,
                    (long long)perf.n_sample);
            for (int32_t i = 0; i < sift_chain_n(chain); i++) {
                const double us = sift_chain_perf_sampler_us(chain, i);
                fprintf(stderr, " %s %.1f%%", sift_sampler_name(sift_chain_get(chain, i)),
                        perf.t_total_us > 0 ? 100.0 * us / perf.t_total_us : 0.0);
            }
            fputc('\n', stderr);
        }
        fprintf(stderr, "sift perf: total       %10.2f ms\n", t_load + t_prompt + t_gen);
    }
    rc = 0;
done:
    sift_batch_free(&batch);
    free(logits);
    free(glogits);
    free(prompt);
    free(neg);
    sift_sampler_free(grammar);
    sift_chain_free(chain);
    sift_context_free(ctx);
    sift_model_free(model);
    free(o.prompt);
    free(o.neg_owned);
    return rc;
}
