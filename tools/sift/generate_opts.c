/*
 * generate_opts.c - `sift generate`'s command line: llama-cli's flag names, value forms and
 * defaults (common/arg.cpp), checked here with a one-line message naming the flag (exit 2);
 * the sampling and grammar flags are cli_sampling.c's and cli_grammar.c's, shared with
 * `sift replay`.
 */
#include "generate_opts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_compat.h"
#include "cli_util.h"
#include "reasoning.h"

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
            "  --isa NAME                kernels: auto, scalar, avx2, avx512, neon, neon-dotprod (default auto)\n\n"
            "speculative decoding (the same tokens as without it; docs/speculative.md):\n"
            "  -md, --model-draft FILE   a draft model with the target's vocabulary\n"
            "  --lookup N                prompt lookup: draft from n-grams of 1..N tokens of the prompt and the text\n"
            "  --draft-max N             most tokens per draft (default 16; --draft, --draft-n)\n"
            "  --draft-min N             a shorter draft is not verified (default 0; --draft-n-min)\n"
            "  --draft-p-min P           the draft model stops after a token it gives less than P (default 0.75)\n"
            "  --draft-fixed             draft up to --draft-max every step, not the depth the measured costs pay for\n\n"
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
            "  -co, --color [on|off]     colour the prompt (yellow) and the user's input (green)\n"
            "  -sp, --special            print special (control) tokens' texts too\n"
            "  --reasoning-format F      auto (default), deepseek: a thinking model's thinking is shown apart,\n"
            "                            between [Start thinking] and [End thinking], faint on a terminal, and\n"
            "                            left out of the conversation's history; none: as the model writes it\n"
            "  --verbose-prompt          print the text fed to the model at each turn (stderr)\n"
            "  -h, --help                this text\n\n"
            "conversation and interaction (llama-cli's):\n"
            "  -cnv, --conversation      chat: each input line is a user message formatted by the chat template and the\n"
            "                            model replies (default when the model has a chat template or one is given)\n"
            "  -no-cnv, --no-conversation  plain text generation even when the model has a chat template\n"
            "  --chat-template-file FILE a Jinja chat template (instead of the GGUF's tokenizer.chat_template)\n"
            "  --chat-template NAME      a built-in template (chatml, llama3, llama2, mistral-v7, phi3, ...) or Jinja text\n"
            "  -sys, --system-prompt T   the system message of the conversation\n"
            "  -sysf, --system-prompt-file FILE  the system message from a file\n"
            "  -st, --single-turn        conversation: one reply, then exit (to -p, else to the first input line)\n"
            "  -i, --interactive         without a chat template: generate, then read lines that continue the text\n"
            "  -if, --interactive-first  interactive, waiting for input before generating\n"
            "  -r, --reverse-prompt T    stop generating at T and hand control to the user (repeatable)\n"
            "  --in-prefix T, --in-suffix T  text put before / after every input line (either one turns the\n"
            "                            default conversation mode off, as llama-cli's template is then disabled)\n"
            "  --in-prefix-bos           a BOS token before every input line\n"
            "  (/exit or Ctrl-D ends the session; Ctrl-C stops a reply, a second Ctrl-C ends the session)\n\n",
            cli_default_threads());
    cli_grammar_help(f);
    cli_sampling_help(f);
    fprintf(f, "\ncontrol vectors:\n");
    cli_cvec_help(f);
    fprintf(f, "\nLong options may be spelt with '_' for '-' (--repeat_penalty), as llama.cpp reads them.\n"
               "llama-cli flags accepted with a note because they change nothing here:\n");
    cli_compat_help(f, CLI_COMPAT_GENERATE);
}

static int bad(const char *flag, const char *value, const char *why)
{
    fprintf(stderr, "sift generate: %s: %s%s%s%s\n", flag, why, value ? " '" : "", value ? value : "", value ? "'" : "");
    return 2;
}

/* llama.cpp's string_process_escapes, in place. */
void gen_process_escapes(char *s)
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
int gen_parse_args(int argc, char **argv, gen_opts *o, cli_sampling *cs, bool *sampling_flags)
{
    const char *prompt = NULL, *prompt_file = NULL, *system_file = NULL;
    *o = (gen_opts){.cfg_scale = 1.0f, .n_predict = -1, .n_batch = 512, .n_threads = cli_default_threads(),
                    .escape = true, .display_prompt = true, .log = true, .trace_top = 5, .isa = SIFT_ISA_AUTO,
                    .conversation = -1, .draft_max = 16, .draft_min = 0, .draft_p_min = 0.75f};
    cli_grammar_init(&o->grammar);
    *sampling_flags = false;
    for (int i = 1; i < argc; i++) {
        cli_compat_normalize(argv[i]); /* --repeat_penalty = --repeat-penalty, as llama.cpp reads it */
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
        } else if (IS("-sysf") || IS("--system-prompt-file")) {
            NEEDV();
            system_file = v;
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
        } else if (IS("-co") || IS("--color")) {
            /* llama.cpp's --color takes an optional on/off/auto now */
            if (v && (!strcmp(v, "on") || !strcmp(v, "off") || !strcmp(v, "auto"))) {
                i++;
                o->color = strcmp(v, "off") != 0;
                o->color_off = !strcmp(v, "off");
            } else {
                o->color = true;
            }
        } else if (IS("-st") || IS("--single-turn")) {
            o->single_turn = true;
        } else if (IS("--reasoning-format")) {
            NEEDV();
            rs_format f;
            if (rs_format_parse(v, &f)) return bad(a, v, "must be none, deepseek, deepseek-legacy or auto");
            o->reasoning_format = (int)f;
        } else if (IS("--verbose-prompt")) {
            o->verbose_prompt = true;
        } else if (IS("-sp") || IS("--special")) {
            o->special = true;
        } else if (IS("--chat-template")) {
            NEEDV();
            o->chat_template = v;
        } else if (IS("--chat-template-file")) {
            NEEDV();
            o->chat_template_file = v;
        } else if (IS("-md") || IS("--model-draft")) {
            NEEDV();
            o->model_draft = v;
        } else if (IS("--lookup")) {
            NEEDV();
            if (!cli_parse_long(v, 1, SIFT_LOOKUP_MAX_N, &n)) return bad(a, v, "expected an n-gram size in [1, 8], got");
            o->lookup = n;
        } else if (IS("--draft-max") || IS("--draft") || IS("--draft-n")) {
            NEEDV();
            if (!cli_parse_long(v, 1, 1024, &n)) return bad(a, v, "expected an integer in [1, 1024], got");
            o->draft_max = n;
        } else if (IS("--draft-min") || IS("--draft-n-min")) {
            NEEDV();
            if (!cli_parse_long(v, 0, 1024, &n)) return bad(a, v, "expected an integer in [0, 1024], got");
            o->draft_min = n;
        } else if (IS("--draft-fixed")) {
            o->draft_fixed = true;
        } else if (IS("--draft-p-min")) {
            NEEDV();
            if (!cli_parse_float(v, &o->draft_p_min) || !(o->draft_p_min >= 0.0f && o->draft_p_min <= 1.0f))
                return bad(a, v, "expected a probability in [0, 1], got");
        } else if (IS("--jinja")) {
            /* llama-cli's switch to the Jinja engine: sift always renders templates with it */
        } else if ((n = cli_compat_flag("sift generate", CLI_COMPAT_GENERATE, argc, argv, &i)) != 0) {
            if (n < 0) return 2;
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
    if (o->model_draft && o->lookup) return bad("--lookup", NULL, "give either --model-draft or --lookup, not both");
    if (o->draft_min > o->draft_max) return bad("--draft-min", NULL, "is larger than --draft-max");
    /* llama.cpp: --in-prefix / --in-suffix disable the chat template, so without -cnv the
     * session is plain interactive text (the reverse-prompt chats of its README) */
    if (o->conversation == -1 && (o->in_prefix || o->in_suffix)) o->conversation = 0;
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
    if (system_file && o->system_prompt) return bad("-sysf", NULL, "give either -sys or -sysf, not both");
    if (system_file) {
        /* llama-cli's -sysf: the file's text, one trailing newline dropped as for -f */
        if (!(o->sys_owned = cli_read_file(system_file, NULL))) {
            fprintf(stderr, "sift generate: -sysf: cannot read '%s': %s\n", system_file, strerror(errno));
            return 2;
        }
        const size_t len = strlen(o->sys_owned);
        if (len && o->sys_owned[len - 1] == '\n') o->sys_owned[len - 1] = 0;
        o->system_prompt = o->sys_owned;
    } else if (o->system_prompt) {
        o->sys_owned = strdup(o->system_prompt);
    }
    if (!o->prompt || (o->neg_prompt && !o->neg_owned) || (o->system_prompt && !o->sys_owned))
        return bad("-p", NULL, "out of memory");
    if (o->escape) {
        gen_process_escapes(o->prompt);
        if (o->neg_owned) gen_process_escapes(o->neg_owned);
        if (o->sys_owned) gen_process_escapes(o->sys_owned);
    }
    return 0;
}

void gen_opts_free(gen_opts *o)
{
    free(o->prompt);
    free(o->neg_owned);
    free(o->sys_owned);
    free(o->rprompts);
    o->prompt = o->neg_owned = o->sys_owned = NULL;
    o->rprompts = NULL;
}
