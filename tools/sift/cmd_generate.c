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
#include "server/server.h" /* chat_from_name, sbuf: the built-in chat templates */
#include "sift.h"

/* Ctrl-C. Without interaction it ends the generation like any other stop, perf summary
 * included (llama-cli prints its timings too), and a second one is the default action
 * again. In interactive and conversation modes (llama-cli's sigint_handler) the first stops
 * the current reply and hands control back; one while waiting for input, or a second before
 * the reply noticed the first, ends the session with the perf summary (exit 130). The
 * handler only sets flags: the perf summary is printed by the code that sees them. */
static volatile sig_atomic_t interrupted, quit_requested, waiting_input, interactive_mode;
static void on_sigint(int sig)
{
    if (!interactive_mode) {
        interrupted = 1;
        signal(sig, SIG_DFL);
    } else if (waiting_input || interrupted) {
        quit_requested = 1;
    } else {
        interrupted = 1;
    }
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
    /* interaction (llama-cli's flags) */
    int conversation;          /* -cnv 1, -no-cnv 0, -1: when there is a chat template */
    bool interactive, interactive_first, in_prefix_bos, color;
    const char *system_prompt; /* -sys */
    char *sys_owned;
    const char *chat_template, *chat_template_file;
    const char *in_prefix, *in_suffix;
    const char **rprompts;     /* -r, repeatable */
    int n_rprompts;
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
            "  -f, --file FILE           read the prompt from FILE (- : from stdin)\n"
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
            "  --color                   colour the prompt (yellow) and the user's input (green)\n"
            "  -h, --help                this text\n\n"
            "conversation and interaction (llama-cli's):\n"
            "  -cnv, --conversation      chat: each input line is a user message formatted by the chat template and the\n"
            "                            model replies (default when the model has a chat template or one is given)\n"
            "  -no-cnv, --no-conversation  plain text generation even when the model has a chat template\n"
            "  --chat-template-file FILE a Jinja chat template (instead of the GGUF's tokenizer.chat_template)\n"
            "  --chat-template NAME      a built-in template (chatml, llama3, llama2, mistral-v7, phi3, ...) or Jinja text\n"
            "  -sys, --system-prompt T   the system message of the conversation\n"
            "  -i, --interactive         without a chat template: generate, then read lines that continue the text\n"
            "  -if, --interactive-first  interactive, waiting for input before generating\n"
            "  -r, --reverse-prompt T    stop generating at T and hand control to the user (repeatable)\n"
            "  --in-prefix T, --in-suffix T  text put before / after every input line\n"
            "  --in-prefix-bos           a BOS token before every input line\n"
            "  (/exit or Ctrl-D ends the session; Ctrl-C stops a reply, a second Ctrl-C ends the session)\n\n",
            cli_default_threads());
    cli_grammar_help(f);
    cli_sampling_help(f);
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
                    .escape = true, .display_prompt = true, .log = true, .trace_top = 5, .isa = SIFT_ISA_AUTO,
                    .conversation = -1};
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
            o->conversation = 0;
        } else if (IS("-cnv") || IS("--conversation")) {
            o->conversation = 1;
        } else if (IS("-i") || IS("--interactive")) {
            o->interactive = true;
        } else if (IS("-if") || IS("--interactive-first")) {
            o->interactive = o->interactive_first = true;
        } else if (IS("-sys") || IS("--system-prompt")) {
            NEEDV();
            o->system_prompt = v;
        } else if (IS("-r") || IS("--reverse-prompt")) {
            NEEDV();
            if (!*v) return bad(a, NULL, "the reverse prompt is empty");
            const char **r = realloc(o->rprompts, (size_t)(o->n_rprompts + 1) * sizeof *r);
            if (!r) return bad(a, NULL, "out of memory");
            o->rprompts = r;
            o->rprompts[o->n_rprompts++] = v;
        } else if (IS("--in-prefix")) {
            NEEDV();
            o->in_prefix = v;
        } else if (IS("--in-suffix")) {
            NEEDV();
            o->in_suffix = v;
        } else if (IS("--in-prefix-bos")) {
            o->in_prefix_bos = true;
        } else if (IS("--color")) {
            o->color = true;
        } else if (IS("--chat-template")) {
            NEEDV();
            o->chat_template = v;
        } else if (IS("--chat-template-file")) {
            NEEDV();
            o->chat_template_file = v;
        } else if (IS("--jinja")) {
            /* llama-cli's switch to the Jinja engine: sift always renders templates with it */
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
    if (o->chat_template && o->chat_template_file)
        return bad("--chat-template", NULL, "give either --chat-template or --chat-template-file, not both");
    if (prompt_file && !strcmp(prompt_file, "-")) {
        /* -f -: the prompt is stdin (whatever follows is then no input for -i: EOF) */
        size_t len_in = 0;
        if (!(o->prompt = cli_read_stream(stdin, &len_in))) {
            fprintf(stderr, "sift generate: -f -: cannot read stdin\n");
            return 2;
        }
        const size_t len = strlen(o->prompt);
        if (len && o->prompt[len - 1] == '\n') o->prompt[len - 1] = 0;
    } else if (prompt_file) {
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
    if (o->system_prompt) o->sys_owned = strdup(o->system_prompt);
    if (!o->prompt || (o->neg_prompt && !o->neg_owned) || (o->system_prompt && !o->sys_owned))
        return bad("-p", NULL, "out of memory");
    if (o->escape) {
        process_escapes(o->prompt);
        if (o->neg_owned) process_escapes(o->neg_owned);
        if (o->sys_owned) process_escapes(o->sys_owned);
    }
    return 0;
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

/* ---- interaction --------------------------------------------------------------------------------- */

/* llama-cli's console colours (--color): the prompt yellow, the user's input bold green */
#define COL_RESET "\x1b[0m"
#define COL_PROMPT "\x1b[33m"
#define COL_USER "\x1b[1m\x1b[32m"

/* tokenizer.chat_template from the GGUF (NULL when absent). */
static char *gguf_chat_template(const char *path)
{
    sift_gguf *g = sift_gguf_open(path, NULL);
    if (!g) return NULL;
    const char *t = NULL;
    char *copy = NULL;
    if (sift_gguf_get_str(g, "tokenizer.chat_template", &t, NULL) == SIFT_OK && t) copy = strdup(t);
    sift_gguf_close(g);
    return copy;
}

/* The text of a special token ("" when the vocabulary has none). */
static void special_text(const sift_vocab *vocab, sift_token t, char *buf, int size)
{
    buf[0] = 0;
    if (t == SIFT_TOKEN_NULL) return;
    const int32_t n = sift_token_to_piece(vocab, t, buf, size - 1, 0, true);
    buf[n > 0 && n < size ? n : 0] = 0;
}

/* The chat template of the conversation: --chat-template-file, --chat-template (a built-in
 * name, else Jinja text, as llama-cli takes it), the GGUF's, or none (*c NULL, 0
 * returned). An exit code when one was asked for and does not work. */
static int make_chat(const gen_opts *o, const sift_vocab *vocab, cli_chat **c)
{
    *c = NULL;
    char *text = NULL;
    size_t len = 0;
    const char *builtin = NULL;
    if (o->chat_template_file) {
        if (!(text = cli_read_file(o->chat_template_file, &len))) {
            fprintf(stderr, "sift generate: --chat-template-file: cannot read '%s': %s\n", o->chat_template_file,
                    strerror(errno));
            return 2;
        }
    } else if (o->chat_template) {
        if (chat_from_name(o->chat_template) != CHAT_UNKNOWN) {
            builtin = o->chat_template;
        } else if (!strstr(o->chat_template, "{{") && !strstr(o->chat_template, "{%")) {
            /* neither a name nor a template: most likely a misspelt name */
            fprintf(stderr, "sift generate: --chat-template: unknown template name '%s' (chatml, llama3, llama2, "
                            "mistral-v7, phi3, ... or Jinja text)\n", o->chat_template);
            return 2;
        } else if (!(text = strdup(o->chat_template))) {
            return 1;
        }
        if (text) len = strlen(text);
    } else if ((text = gguf_chat_template(o->model))) {
        len = strlen(text);
    } else if (o->conversation == 1) {
        builtin = "chatml"; /* -cnv on a model without a template: llama.cpp's default, chatml */
    } else {
        return 0;
    }
    char bos[256], eos[256], err[512];
    special_text(vocab, sift_vocab_bos(vocab), bos, sizeof bos);
    special_text(vocab, sift_vocab_eos(vocab), eos, sizeof eos);
    *c = cli_chat_new(text, len, builtin, bos, eos, sift_vocab_add_bos(vocab), err, sizeof err);
    free(text);
    if (!*c) {
        fprintf(stderr, "sift generate: chat template%s%s: %s\n", o->chat_template_file ? " " : "",
                o->chat_template_file ? o->chat_template_file : "", err);
        return 2;
    }
    return 0;
}

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
    sift_token undecoded; /* the last sampled token when a reply stopped before decoding it */
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

/* Sample a reply from the logits at hand, printing it; its text goes to *out (may be NULL).
 * Stops at an end-of-generation token, -n tokens, a reverse prompt, a full context, Ctrl-C. */
static stop_why reply(gen_run *r, sbuf *out)
{
    const gen_opts *o = r->o;
    sift_error err = {0};
    sbuf text = {0};
    long n_gen = 0;
    stop_why why = STOP_NPREDICT;
    const double t0 = now_ms();
    for (;;) {
        if (o->n_predict >= 0 && n_gen >= o->n_predict) break;
        if (interrupted) {
            why = STOP_INT;
            break;
        }
        if (r->cfg) sift_cfg_apply(r->logits, r->glogits, r->n_vocab, o->cfg_scale);
        r->ts->step = r->n_gen;
        const sift_token tok = sample_token(r->grammar, o->grammar.mode, r->chain, r->logits, r->n_vocab);
        if (tok == SIFT_TOKEN_NULL && r->grammar) {
            /* the grammar and the chain left no token: never sample a forbidden one */
            const sift_grammar_status gs = sift_grammar_sampler_status(r->grammar);
            if (gs == SIFT_GRAMMAR_CAN_END || gs == SIFT_GRAMMAR_DONE) {
                why = STOP_GRAMMAR;
                break;
            }
            fprintf(stderr, "\nsift generate: the grammar allows no token here: no token of the vocabulary can continue it "
                            "(or the sampler chain excludes every token it allows)\n");
            why = STOP_ERROR;
            break;
        }
        if (tok == SIFT_TOKEN_NULL) {
            fprintf(stderr, "\nsift generate: the chain selected no token (its last sampler must select)\n");
            why = STOP_ERROR;
            break;
        }
        n_gen++;
        r->n_gen++;
        if (sift_vocab_is_eog(r->vocab, tok)) {
            r->undecoded = tok; /* the turn's end stays in the conversation (llama-cli decodes it too) */
            why = STOP_EOG;
            break;
        }
        char buf[256];
        const int np = piece(r->vocab, tok, buf, sizeof buf, false);
        fwrite(buf, 1, (size_t)np, stdout);
        fflush(stdout);
        const size_t before = text.n;
        sbuf_add(&text, buf, (size_t)np);
        if (o->trace) {
            fprintf(stderr, "[trace]   => %d ", (int)tok);
            trace_piece(stderr, r->vocab, tok);
            fputc('\n', stderr);
        }
        if (o->n_rprompts && rprompt_found(o, text.p, text.n, before)) {
            r->undecoded = tok;
            why = STOP_RPROMPT;
            break;
        }
        if (o->n_predict >= 0 && n_gen >= o->n_predict) {
            r->undecoded = tok;
            break;
        }
        if (r->n_past >= r->n_ctx_seq || (r->cfg && r->n_past_g >= r->n_ctx_seq)) {
            if (!o->context_shift || o->n_predict == -2) {
                r->undecoded = tok;
                why = STOP_CTX;
                break;
            }
            if (o->log) fprintf(stderr, "\n[context shift: keeping %d tokens, dropping half of the rest]\n", r->n_keep);
            r->n_past = shift_context(r->ctx, 0, r->n_past, r->n_keep);
            if (r->cfg) r->n_past_g = shift_context(r->ctx, 1, r->n_past_g, r->n_keep);
            if (r->n_past >= r->n_ctx_seq) {
                r->undecoded = tok;
                why = STOP_CTX;
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
            why = STOP_ERROR;
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
    if (out && text.n) sbuf_add(out, text.p, text.n);
    sbuf_free(&text);
    return why;
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
    fprintf(stderr, "sift perf: total       %10.2f ms\n", r->t_load + r->t_prompt + r->t_gen);
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
        if (o->escape) process_escapes(line);
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
    const int pr = parse_args(argc, argv, &o, &cs, &sampling_flags);
    if (pr != 0) {
        free(o.prompt);
        free(o.neg_owned);
        free(o.sys_owned);
        free(o.rprompts);
        return pr < 0 ? 0 : pr;
    }
    const bool cfg = o.neg_owned && o.cfg_scale != 1.0f;

    int rc = 1;
    sift_model *model = NULL;
    sift_context *ctx = NULL;
    sift_chain *chain = NULL;
    sift_sampler *grammar = NULL;
    sift_token *prompt = NULL, *neg = NULL;
    cli_chat *chat = NULL;
    char *first_text = NULL;
    gen_run r = {.o = &o, .undecoded = SIFT_TOKEN_NULL};
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
    if (o.conversation != 0 && (rc = make_chat(&o, vocab, &chat)) != 0) goto done;
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
    }
    int32_t n_prompt = 0, n_neg = 0;
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
        if (cnv)
            fprintf(stderr, "sift: conversation mode (chat template: %s); /exit or Ctrl-D ends it, Ctrl-C stops a reply\n",
                    o.chat_template_file ? o.chat_template_file : o.chat_template ? o.chat_template : "the model's");
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
        for (int32_t i = 0; i < n_prompt; i++) print_piece(vocab, prompt[i]);
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
    free(r.logits);
    free(r.glogits);
    free(prompt);
    free(neg);
    free(first_text);
    cli_chat_free(chat);
    sift_sampler_free(grammar);
    sift_chain_free(chain);
    sift_context_free(ctx);
    sift_model_free(model);
    free(o.prompt);
    free(o.neg_owned);
    free(o.sys_owned);
    free(o.rprompts);
    return rc;
}
