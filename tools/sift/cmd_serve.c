/*
 * cmd_serve.c - `sift serve`: the llama-server-compatible HTTP API (tools/server/).
 *
 *   sift serve -m ../shared/models/stories260K.gguf --host 127.0.0.1 --port 8080 -np 4 -c 2048
 *
 * Loads the model, starts the engine (one context with -np sequences: the slots) and the
 * HTTP server, prints "listening on http://HOST:PORT" to stderr (with the real port when
 * --port 0 asked for any free one), and serves until SIGINT or SIGTERM. Shutdown fails the
 * requests still running with 503, waits for their connections and frees everything.
 *
 * Signals are blocked in every thread (the mask is set before any thread starts) and
 * taken by sigwait() here, so no handler runs inside the engine or libmicrohttpd.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <strings.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/router.h"
#include "server/server.h"
#include "cli_compat.h"
#include "cli_cvec.h"
#include "cli_sampling.h"
#include "cli_util.h"
#include "sift.h"

const char sift_cmd_serve_help[] = "HTTP server: llama-server's API (/completion, /v1/chat/completions, ...), continuous batching, web playground";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sift serve -m MODEL.gguf [options]\n"
            "       sift serve --models-dir DIR [--models-preset FILE.ini] [options]   (router mode)\n\n"
            "  -m, --model FILE          GGUF model\n"
            "  --host HOST               address to listen on (default 127.0.0.1)\n"
            "  --port N                  port (default 8080; 0 = any free port, printed at start)\n"
            "  -np, --parallel N         slots: requests decoded together (default 4)\n"
            "  -c, --ctx-size N          KV cells in all, split evenly over the slots (default 0: the model's\n"
            "                            training context)\n"
            "  -b, --batch-size N        most tokens per decode step (default 512)\n"
            "  -t, --threads N           threads for decoding (default: up to 4)\n"
            "  -tb, --threads-batch N    threads for steps of more than one token (default: as -t)\n"
            "  -n, --n-predict N         tokens per request when the request does not say (default -1: up to\n"
            "                            --max-n-predict or the end of the slot's context)\n"
            "  -a, --alias NAME[,NAME]   the model's names (default: its file name); the first in sort order is its id\n"
            "  --tags TAG[,TAG]          the model's tags, listed in /models\n"
            "  --no-webui                / answers 404 instead of the web page\n"
            "  --slot-save-path DIR      where POST /slots/N?action=save|restore keep their files (off without)\n"
            "  --context-shift           a full slot drops old tokens (a request's n_keep / n_discard) and goes on,\n"
            "                            as llama-server's (default off: the reply stops, truncated)\n"
            "  --spm-infill              /infill's prompt puts the suffix before the prefix (suffix-prefix-middle),\n"
            "                            as some code models are trained (default: prefix-suffix-middle)\n"
            "  -kvu, --kv-unified        every slot may use the whole -c, as with llama-server's unified KV cache\n"
            "                            (sift keeps a cache per slot: -np x -c cells in all)\n"
            "  --chat-template-file FILE a Jinja chat template to render (instead of the GGUF's tokenizer.chat_template)\n"
            "  --chat-template NAME|TEXT chat template by name (chatml, llama2, llama2-sys, mistral-v1, mistral-v3,\n"
            "                            mistral-v7, llama3, phi3, phi4, zephyr, gemma, vicuna, deepseek, command-r, ...)\n"
            "                            or a Jinja template's own text (default: detected from the GGUF, else chatml)\n"
            "  --reasoning-format F      none, deepseek, deepseek-legacy or auto (default): <think>...</think> in the\n"
            "                            reply goes to reasoning_content (none: stays in content)\n"
            "  -rea, --reasoning on|off|auto  thinking on or off for templates that read enable_thinking (default auto)\n"
            "  --reasoning-budget N      thinking tokens before </think> is forced (-1: no limit, default; 0: at once)\n"
            "  --chat-template-kwargs JSON  extra variables for the chat template, e.g. '{\"enable_thinking\": false}'\n"
            "  --isa NAME                kernels: auto, scalar, avx2, avx512, neon, neon-dotprod (default auto)\n"
            "  --embeddings              serve /embedding and /v1/embeddings (else 501); completions keep working\n"
            "  --pooling TYPE            embeddings pooling: none, mean, cls, last (default none, as llama-server for\n"
            "                            llama-family models)\n"
            "  --control-vector FILE, --control-vector-scaled FILE SCALE, --control-vector-layer-range START END\n"
            "                            control vectors for every slot, as sift generate\n\n"
            "router mode (no -m: several models, each in a `sift serve` of its own, loaded on demand; docs/server.md):\n"
            "  --models-dir DIR          the models: DIR's GGUF files (named without .gguf), and its subdirectories\n"
            "                            that hold one model (named after the subdirectory)\n"
            "  --models-preset FILE      an INI file: [NAME] sections with a model's options (model = PATH adds one),\n"
            "                            [*] options for every model\n"
            "  --models-max N            models loaded at once; loading one more unloads the least recently used\n"
            "                            (default 4; 0 = no cap)\n"
            "  --no-models-autoload      a request for a model not loaded gets 400 (POST /models/load loads it)\n"
            "                            (--models-autoload: the default)\n"
            "  the other options go to every model's server\n\n"
            "speculative decoding (docs/speculative.md; each slot drafts, one decode verifies every slot's draft):\n"
            "  -md, --model-draft FILE   a draft model with the target's vocabulary\n"
            "  --lookup N                prompt lookup: draft from n-grams of 1..N tokens of the prompt and reply\n"
            "  --draft-max N             most tokens per draft (default 16; --draft, --draft-n); a request's\n"
            "                            speculative.n_max overrides it, 0 turning drafting off\n"
            "  --draft-min N             a shorter draft is not verified (default 0; --draft-n-min; speculative.n_min)\n"
            "  --draft-p-min P           the draft model stops after a token it gives less than P (default 0.75;\n"
            "                            speculative.p_min)\n\n"
            "exposure:\n"
            "  --api-key KEY             require this key (repeatable): 'Authorization: Bearer KEY' or 'X-Api-Key: KEY';\n"
            "                            /health and the page stay open\n"
            "  --api-key-file FILE       keys, one per line (blank lines and # comments skipped)\n"
            "  --cors-origin ORIGIN      allow this web origin (repeatable; * = any). Default: none, same-origin only\n"
            "  --allowed-hosts NAMES     Host names this server answers to beside localhost, IP literals and --host\n"
            "                            (comma-separated, repeatable; .example.com = the domain and its subdomains;\n"
            "                            * = any). Others get 403: the DNS-rebinding defence\n"
            "  --no-slots, --no-metrics  turn /slots or /metrics off (404)\n\n"
            "limits:\n"
            "  -to, --timeout N          close connections silent for N seconds (default 600)\n"
            "  --header-timeout N        a request's line and headers must arrive within N seconds (default 10)\n"
            "  --body-timeout N          its body within N seconds of the headers (default 30)\n"
            "  --max-connections N       simultaneous connections (default 256); idle ones make room for new ones\n"
            "  --max-connections-per-client N\n"
            "                            per client address (default 32; 0 = no cap, e.g. behind a load balancer)\n"
            "  --max-queue N             requests waiting for a slot; more get 503 + Retry-After (default 64)\n"
            "  --max-body BYTES          request body size; more get 413 (default 1048576)\n"
            "  --max-body-in-flight BYTES\n"
            "                            request body bytes all uploads together may hold; past it 503 (default 67108864)\n"
            "  --min-body-rate BYTES     a body must average this many bytes/s after 2 s, else its connection is\n"
            "                            closed (default 1024; 0 = off)\n"
            "  --max-probs-bytes BYTES   n_probs + trace output of the requests in flight, counted as 256 bytes per\n"
            "                            top-candidate entry of the worst case; a request alone over it gets 400,\n"
            "                            together with others 503 (default 268435456)\n"
            "  --max-renders N           Jinja chat template renders at once; more wait up to 10 s, then 503\n"
            "                            (default: half the CPUs, at least 1)\n"
            "  --max-n-predict N         the most tokens one request may ask for (default 4096)\n"
            "  --drain-timeout N         on SIGTERM/SIGINT, running requests get N seconds to finish (default 30)\n"
            "  --template-memory BYTES   memory all chat-template renders may hold at once, and one at most; a request\n"
            "                            over it gets 413 (default 1073741824; 0 = 512 MiB per render, no shared cap)\n"
            "  --template-timeout MS     wall-clock limit of one chat-template render; over it 400 (default 5000; 0 = none)\n\n"
            "  --jinja / --no-jinja      chats render the GGUF's (or --chat-template-file's) Jinja template (default), or\n"
            "                            the built-in template it resembles, as llama-server's --no-jinja does\n"
            "  -v, --log-requests        one line per request on stderr\n"
            "  -h, --help                this text\n\n"
            "sampling defaults: llama-server's sampling flags (--temp, --top-k, --top-p, --min-p, --seed, --repeat-penalty,\n"
            "--samplers, ... as in `sift generate --help`) set the values of requests that do not give their own.\n\n"
            "Every option can also come from the environment: LLAMA_ARG_* as llama-server names them (LLAMA_ARG_CTX_SIZE,\n"
            "LLAMA_API_KEY, ...) or SIFT_ARG_* (the long option's name: SIFT_ARG_MAX_QUEUE=8); the command line wins.\n"
            "Long options may be spelt with '_' for '-' (--repeat_penalty), as llama.cpp reads them.\n\n"
            "Endpoints, fields and limits: docs/server.md. Replicas behind a balancer: docs/scale-out.md.\n\n"
            "llama-server flags accepted with a note because they change nothing here (also --metrics, --slots):\n");
    cli_compat_help(f, CLI_COMPAT_SERVE);
}

static int bad(const char *flag, const char *value, const char *why)
{
    fprintf(stderr, "sift serve: %s: %s%s%s%s\n", flag, why, value ? " '" : "", value ? value : "", value ? "'" : "");
    return 2;
}

/* Append s to a growable string list (the strings are not copied: argv, the environment and
 * the key file's lines outlive the server). */
static bool list_add(char ***list, int *n, char *s)
{
    char **p = realloc(*list, (size_t)(*n + 1) * sizeof *p);
    if (!p) return false;
    p[(*n)++] = s;
    *list = p;
    return true;
}

/* The keys of an --api-key-file: one a line, surrounding blanks trimmed, blank lines and
 * lines starting with # skipped. 0, or 2 with a message. */
static int read_key_file(srv_config *c, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return bad("--api-key-file", path, "cannot open");
    /* getline, not a fixed buffer: a key longer than the buffer would come back in pieces,
     * and its tail would become a key of its own */
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int n = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        if (memchr(line, 0, (size_t)len)) {
            free(line);
            fclose(f);
            return bad("--api-key-file", path, "a NUL byte in");
        }
        char *a = line, *z = line + len;
        while (*a == ' ' || *a == '\t') a++;
        while (z > a && (z[-1] == '\n' || z[-1] == '\r' || z[-1] == ' ' || z[-1] == '\t')) *--z = 0;
        if (!*a || *a == '#') continue;
        char *k = strdup(a);
        if (!k || !list_add(&c->owned, &c->n_owned, k)) {
            free(k);
            free(line);
            fclose(f);
            return bad("--api-key-file", path, "out of memory reading");
        }
        if (!list_add(&c->api_keys, &c->n_api_keys, k)) {
            free(line);
            fclose(f);
            return bad("--api-key-file", path, "out of memory reading");
        }
        n++;
    }
    free(line);
    fclose(f);
    if (!n) return bad("--api-key-file", path, "no key in");
    return 0;
}

static void ignored(const char *flag, const char *why) { fprintf(stderr, "sift serve: note: %s ignored (%s)\n", flag, why); }

/* One option a with its possible value v (NULL when none follows). *used: v was consumed.
 * Returns 0 parsed, 1 unknown option, 2 usage error (message printed), -1 help printed. */
static int parse_opt(srv_config *c, const char *a, char *v, bool *used)
{
    long n;
    *used = false;
#define IS(x) (!strcmp(a, x))
#define NEEDV()                                       \
    do {                                              \
        if (!v) return bad(a, NULL, "missing value"); \
        *used = true;                                 \
    } while (0)
#define INTV(lo, hi, what)                                                              \
    do {                                                                                \
        NEEDV();                                                                        \
        if (!cli_parse_long(v, lo, hi, &n)) return bad(a, v, "expected " what ", got"); \
    } while (0)
    if (IS("-h") || IS("--help")) {
        usage(stdout);
        return -1;
    } else if (IS("-m") || IS("--model")) {
        NEEDV();
        c->model_path = v;
    } else if (IS("--host")) {
        NEEDV();
        c->host = v;
    } else if (IS("--port")) {
        INTV(0, 65535, "a port in [0, 65535]");
        c->port = (int)n;
    } else if (IS("-np") || IS("--parallel")) {
        INTV(1, 256, "a slot count in [1, 256]");
        c->n_parallel = (int)n;
    } else if (IS("-c") || IS("--ctx-size")) {
        INTV(0, 1L << 24, "a context size in [0, 2^24]");
        c->n_ctx = (int)n;
    } else if (IS("-b") || IS("--batch-size") || IS("-ub") || IS("--ubatch-size")) {
        INTV(1, 1L << 16, "a batch size in [1, 65536]");
        c->n_batch = (int)n;
    } else if (IS("-t") || IS("--threads")) {
        INTV(1, 256, "a thread count in [1, 256]");
        c->n_threads = (int)n;
    } else if (IS("-tb") || IS("--threads-batch")) {
        INTV(1, 256, "a thread count in [1, 256]");
        c->n_threads_batch = (int)n;
    } else if (IS("-n") || IS("--n-predict") || IS("--predict")) {
        INTV(-1, 1L << 24, "an integer >= -1");
        c->default_n_predict = (int)n;
    } else if (IS("-a") || IS("--alias")) {
        NEEDV();
        c->alias = v;
    } else if (IS("--chat-template")) {
        NEEDV();
        /* a built-in name, else the template's own text (llama-server: JINJA_TEMPLATE) */
        if (chat_from_name(v) == CHAT_UNKNOWN) c->chat_template_text = v, c->chat_template = NULL;
        else c->chat_template = v, c->chat_template_text = NULL;
    } else if (IS("--chat-template-file")) {
        NEEDV();
        c->chat_template_file = v;
    } else if (IS("--reasoning-format")) {
        NEEDV();
        rs_format f;
        if (rs_format_parse(v, &f)) return bad(a, v, "expected none, deepseek, deepseek-legacy or auto, got");
        c->reasoning_format = (int)f;
    } else if (IS("-rea") || IS("--reasoning")) {
        NEEDV();
        if (!strcmp(v, "on") || !strcmp(v, "enabled") || !strcmp(v, "true") || !strcmp(v, "1")) c->reasoning = 1;
        else if (!strcmp(v, "off") || !strcmp(v, "disabled") || !strcmp(v, "false") || !strcmp(v, "0")) c->reasoning = 0;
        else if (!strcmp(v, "auto") || !strcmp(v, "-1")) c->reasoning = -1;
        else return bad(a, v, "expected on, off or auto, got");
    } else if (IS("--reasoning-budget")) {
        INTV(-1, 1L << 24, "-1 (no limit), 0 (end at once) or a token count");
        c->reasoning_budget = (int)n;
    } else if (IS("--chat-template-kwargs")) {
        NEEDV();
        c->chat_template_kwargs = v;
    } else if (IS("--isa")) {
        NEEDV();
        if (!cli_parse_isa(v, &c->isa)) return bad(a, v, "expected auto, scalar, avx2 or avx512, got");
    } else if (IS("-to") || IS("--timeout")) {
        INTV(1, 86400, "seconds in [1, 86400]");
        c->timeout_s = (int)n;
    } else if (IS("--header-timeout")) {
        INTV(1, 3600, "seconds in [1, 3600]");
        c->header_timeout_s = (int)n;
    } else if (IS("--body-timeout")) {
        INTV(1, 86400, "seconds in [1, 86400]");
        c->body_timeout_s = (int)n;
    } else if (IS("--drain-timeout")) {
        INTV(0, 86400, "seconds in [0, 86400]");
        c->drain_timeout_s = (int)n;
    } else if (IS("--template-memory")) {
        INTV(0, 1L << 40, "bytes in [0, 2^40]");
        c->template_memory = (size_t)n;
    } else if (IS("--template-timeout")) {
        INTV(0, 3600000, "milliseconds in [0, 3600000]");
        c->template_timeout_ms = (int)n;
    } else if (IS("--max-connections")) {
        INTV(1, 100000, "a count in [1, 100000]");
        c->max_connections = (int)n;
    } else if (IS("--max-connections-per-client")) {
        INTV(0, 100000, "a count in [0, 100000] (0: no cap)");
        c->max_conns_per_client = (int)n;
    } else if (IS("--max-queue")) {
        INTV(1, 1000000, "a count in [1, 1000000]");
        c->max_queue = (int)n;
    } else if (IS("--max-body")) {
        INTV(64, 1L << 30, "bytes in [64, 2^30]");
        c->max_body = (size_t)n;
    } else if (IS("--max-body-in-flight")) {
        INTV(64, 1L << 40, "bytes in [64, 2^40]");
        c->max_body_in_flight = (size_t)n;
    } else if (IS("--min-body-rate")) {
        INTV(0, 1L << 30, "bytes/s in [0, 2^30]");
        c->min_body_rate = (int)n;
    } else if (IS("--max-renders")) {
        INTV(1, 1024, "a count in [1, 1024]");
        c->max_renders = (int)n;
    } else if (IS("--max-probs-bytes")) {
        INTV(0, 1L << 40, "bytes in [0, 2^40]");
        c->max_probs_bytes = (size_t)n;
    } else if (IS("--allowed-hosts")) {
        NEEDV();
        for (char *k = strtok(v, ","); k; k = strtok(NULL, ","))
            if (*k && !list_add(&c->allowed_hosts, &c->n_allowed_hosts, k)) return bad(a, NULL, "out of memory");
        if (!c->n_allowed_hosts) return bad(a, NULL, "an empty list");
    } else if (IS("--max-n-predict")) {
        INTV(1, 1L << 24, "an integer in [1, 2^24]");
        c->max_n_predict = (int)n;
    } else if (IS("--api-key")) {
        NEEDV();
        /* llama-server takes a comma-separated list here (LLAMA_API_KEY too) */
        for (char *k = strtok(v, ","); k; k = strtok(NULL, ","))
            if (*k && !list_add(&c->api_keys, &c->n_api_keys, k)) return bad(a, NULL, "out of memory");
        if (!c->n_api_keys) return bad(a, NULL, "an empty key");
    } else if (IS("--api-key-file")) {
        NEEDV();
        const int r = read_key_file(c, v);
        if (r) return r;
    } else if (IS("--cors-origin")) {
        NEEDV();
        if (!*v) return bad(a, NULL, "an empty origin");
        if (!list_add(&c->cors_origins, &c->n_cors_origins, v)) return bad(a, NULL, "out of memory");
    } else if (IS("--embeddings") || IS("--embedding") || IS("--embd")) {
        c->embeddings = true;
    } else if (IS("--pooling")) {
        NEEDV();
        if (!strcmp(v, "none")) c->pooling = SIFT_POOLING_TYPE_NONE;
        else if (!strcmp(v, "mean")) c->pooling = SIFT_POOLING_TYPE_MEAN;
        else if (!strcmp(v, "cls")) c->pooling = SIFT_POOLING_TYPE_CLS;
        else if (!strcmp(v, "last")) c->pooling = SIFT_POOLING_TYPE_LAST;
        else if (!strcmp(v, "rank")) return bad(a, v, "not supported (no classifier heads here):");
        else return bad(a, v, "expected none, mean, cls or last, got");
    } else if (IS("--no-slots")) {
        c->no_slots = true;
    } else if (IS("--no-metrics")) {
        c->no_metrics = true;
    } else if (IS("--slots")) {
        c->no_slots = false;
    } else if (IS("--metrics")) {
        c->no_metrics = false;
        ignored(a, "/metrics is always on unless --no-metrics");
    } else if (IS("--jinja")) {
        c->no_jinja = false;
    } else if (IS("--no-jinja")) {
        c->no_jinja = true;
    } else if (IS("-md") || IS("--model-draft")) {
        NEEDV();
        c->model_draft = v;
    } else if (IS("--lookup")) {
        INTV(1, SIFT_LOOKUP_MAX_N, "an n-gram size 1..8");
        c->lookup = (int)n;
    } else if (IS("--draft-max") || IS("--draft") || IS("--draft-n")) {
        INTV(0, SRV_MAX_DRAFT, "0..1024");
        c->draft_max = (int)n;
    } else if (IS("--draft-min") || IS("--draft-n-min")) {
        INTV(0, SRV_MAX_DRAFT, "0..1024");
        c->draft_min = (int)n;
    } else if (IS("--draft-p-min")) {
        NEEDV();
        if (!cli_parse_float(v, &c->draft_p_min) || !(c->draft_p_min >= 0.0f && c->draft_p_min <= 1.0f))
            return bad(a, v, "expected a probability 0..1, got");
    } else if (IS("--context-shift")) {
        c->ctx_shift = true;
    } else if (IS("--no-context-shift")) {
        c->ctx_shift = false;
    } else if (IS("--spm-infill")) {
        c->spm_infill = true;
    } else if (IS("--slot-save-path")) {
        NEEDV();
        c->slot_save_path = v;
    } else if (IS("-kvu") || IS("--kv-unified")) {
        c->kv_unified = true;
    } else if (IS("--no-webui")) {
        c->no_webui = true;
    } else if (IS("--webui")) {
        c->no_webui = false;
    } else if (IS("--tags")) {
        NEEDV();
        c->tags = v;
    } else if (IS("--models-dir")) {
        NEEDV();
        c->models_dir = v;
    } else if (IS("--models-preset")) {
        NEEDV();
        c->models_preset = v;
    } else if (IS("--models-max")) {
        INTV(0, 4096, "a count in [0, 4096] (0: no cap)");
        c->models_max = (int)n;
    } else if (IS("--models-autoload")) {
        c->models_autoload = true;
    } else if (IS("--no-models-autoload")) {
        c->models_autoload = false;
    } else if (IS("-v") || IS("--log-requests") || IS("--verbose")) {
        c->log_requests = true;
    } else {
        return 1;
    }
#undef IS
#undef NEEDV
#undef INTV
    return 0;
}

/* Environment names for the options: llama-server's LLAMA_ARG_* (and LLAMA_API_KEY), and
 * SIFT_ARG_<long option> for every option of sift's own. A switch (flag == NULL for the
 * value) is set by 1/true/on/enabled and cleared by 0/false/off/disabled through `neg`. */
typedef struct env_opt {
    const char *env, *flag, *neg; /* neg: the switch's opposite (NULL: takes a value) */
    bool is_switch;
} env_opt;

static const env_opt ENV_OPTS[] = {
    {"LLAMA_ARG_MODEL", "--model", NULL, false},
    {"LLAMA_ARG_HOST", "--host", NULL, false},
    {"LLAMA_ARG_PORT", "--port", NULL, false},
    {"LLAMA_ARG_N_PARALLEL", "--parallel", NULL, false},
    {"LLAMA_ARG_CTX_SIZE", "--ctx-size", NULL, false},
    {"LLAMA_ARG_BATCH", "--batch-size", NULL, false},
    {"LLAMA_ARG_UBATCH", "--ubatch-size", NULL, false},
    {"LLAMA_ARG_THREADS", "--threads", NULL, false},
    {"LLAMA_ARG_THREADS_BATCH", "--threads-batch", NULL, false},
    {"LLAMA_ARG_N_PREDICT", "--n-predict", NULL, false},
    {"LLAMA_ARG_ALIAS", "--alias", NULL, false},
    {"LLAMA_ARG_CHAT_TEMPLATE", "--chat-template", NULL, false},
    {"LLAMA_ARG_REASONING_FORMAT", "--reasoning-format", NULL, false},
    {"LLAMA_ARG_REASONING", "--reasoning", NULL, false},
    {"LLAMA_ARG_THINK_BUDGET", "--reasoning-budget", NULL, false},
    {"LLAMA_ARG_CHAT_TEMPLATE_KWARGS", "--chat-template-kwargs", NULL, false},
    {"LLAMA_ARG_TIMEOUT", "--timeout", NULL, false},
    {"LLAMA_API_KEY", "--api-key", NULL, false},
    {"LLAMA_ARG_API_KEY_FILE", "--api-key-file", NULL, false},
    {"LLAMA_ARG_N_GPU_LAYERS", "-ngl", NULL, false},
    {"LLAMA_ARG_TEMPERATURE", "--temp", NULL, false},
    {"LLAMA_ARG_REPEAT_PENALTY", "--repeat-penalty", NULL, false},
    {"LLAMA_ARG_PRESENCE_PENALTY", "--presence-penalty", NULL, false},
    {"LLAMA_ARG_FREQUENCY_PENALTY", "--frequency-penalty", NULL, false},
    {"LLAMA_ARG_TOP_K", "--top-k", NULL, false},
    {"LLAMA_ARG_TOP_P", "--top-p", NULL, false},
    {"LLAMA_ARG_MIN_P", "--min-p", NULL, false},
    {"LLAMA_ARG_SEED", "--seed", NULL, false},
    {"LLAMA_ARG_ENDPOINT_METRICS", "--metrics", "--no-metrics", true},
    {"LLAMA_ARG_ENDPOINT_SLOTS", "--slots", "--no-slots", true},
    {"LLAMA_ARG_EMBEDDINGS", "--embeddings", NULL, true},
    {"LLAMA_ARG_POOLING", "--pooling", NULL, false},
    {"LLAMA_ARG_MODEL_DRAFT", "--model-draft", NULL, false},
    {"LLAMA_ARG_DRAFT_MAX", "--draft-max", NULL, false},
    {"LLAMA_ARG_DRAFT_MIN", "--draft-min", NULL, false},
    {"LLAMA_ARG_DRAFT_P_MIN", "--draft-p-min", NULL, false},
    {"LLAMA_ARG_MODELS_DIR", "--models-dir", NULL, false},
    {"LLAMA_ARG_MODELS_PRESET", "--models-preset", NULL, false},
    {"LLAMA_ARG_MODELS_MAX", "--models-max", NULL, false},
    {"LLAMA_ARG_MODELS_AUTOLOAD", "--models-autoload", "--no-models-autoload", true},
    {"SIFT_ARG_MODEL", "--model", NULL, false},
    {"SIFT_ARG_HOST", "--host", NULL, false},
    {"SIFT_ARG_PORT", "--port", NULL, false},
    {"SIFT_ARG_PARALLEL", "--parallel", NULL, false},
    {"SIFT_ARG_CTX_SIZE", "--ctx-size", NULL, false},
    {"SIFT_ARG_BATCH_SIZE", "--batch-size", NULL, false},
    {"SIFT_ARG_THREADS", "--threads", NULL, false},
    {"SIFT_ARG_THREADS_BATCH", "--threads-batch", NULL, false},
    {"SIFT_ARG_N_PREDICT", "--n-predict", NULL, false},
    {"SIFT_ARG_ALIAS", "--alias", NULL, false},
    {"LLAMA_ARG_SLOT_SAVE_PATH", "--slot-save-path", NULL, false},
    {"LLAMA_ARG_CONTEXT_SHIFT", "--context-shift", "--no-context-shift", true},
    {"SIFT_ARG_CHAT_TEMPLATE", "--chat-template", NULL, false},
    {"SIFT_ARG_ISA", "--isa", NULL, false},
    {"SIFT_ARG_REASONING_FORMAT", "--reasoning-format", NULL, false},
    {"SIFT_ARG_REASONING", "--reasoning", NULL, false},
    {"SIFT_ARG_REASONING_BUDGET", "--reasoning-budget", NULL, false},
    {"SIFT_ARG_CHAT_TEMPLATE_KWARGS", "--chat-template-kwargs", NULL, false},
    {"SIFT_ARG_API_KEY", "--api-key", NULL, false},
    {"SIFT_ARG_API_KEY_FILE", "--api-key-file", NULL, false},
    {"SIFT_ARG_CORS_ORIGIN", "--cors-origin", NULL, false},
    {"SIFT_ARG_TIMEOUT", "--timeout", NULL, false},
    {"SIFT_ARG_HEADER_TIMEOUT", "--header-timeout", NULL, false},
    {"SIFT_ARG_BODY_TIMEOUT", "--body-timeout", NULL, false},
    {"SIFT_ARG_DRAIN_TIMEOUT", "--drain-timeout", NULL, false},
    {"SIFT_ARG_TEMPLATE_MEMORY", "--template-memory", NULL, false},
    {"SIFT_ARG_TEMPLATE_TIMEOUT", "--template-timeout", NULL, false},
    {"SIFT_ARG_MAX_CONNECTIONS", "--max-connections", NULL, false},
    {"SIFT_ARG_MAX_CONNECTIONS_PER_CLIENT", "--max-connections-per-client", NULL, false},
    {"SIFT_ARG_MAX_QUEUE", "--max-queue", NULL, false},
    {"SIFT_ARG_MAX_BODY", "--max-body", NULL, false},
    {"SIFT_ARG_MAX_N_PREDICT", "--max-n-predict", NULL, false},
    {"SIFT_ARG_MAX_BODY_IN_FLIGHT", "--max-body-in-flight", NULL, false},
    {"SIFT_ARG_MIN_BODY_RATE", "--min-body-rate", NULL, false},
    {"SIFT_ARG_MAX_PROBS_BYTES", "--max-probs-bytes", NULL, false},
    {"SIFT_ARG_MAX_RENDERS", "--max-renders", NULL, false},
    {"SIFT_ARG_ALLOWED_HOSTS", "--allowed-hosts", NULL, false},
    {"SIFT_ARG_SLOTS", "--slots", "--no-slots", true},
    {"SIFT_ARG_METRICS", "--metrics", "--no-metrics", true},
    {"SIFT_ARG_LOG_REQUESTS", "--log-requests", NULL, true},
    {"SIFT_ARG_EMBEDDINGS", "--embeddings", NULL, true},
    {"SIFT_ARG_POOLING", "--pooling", NULL, false},
    {"SIFT_ARG_MODEL_DRAFT", "--model-draft", NULL, false},
    {"SIFT_ARG_LOOKUP", "--lookup", NULL, false},
    {"SIFT_ARG_DRAFT_MAX", "--draft-max", NULL, false},
    {"SIFT_ARG_DRAFT_MIN", "--draft-min", NULL, false},
    {"SIFT_ARG_DRAFT_P_MIN", "--draft-p-min", NULL, false},
};

/* The option at argv[*i] (its value consumed, *i advanced): control vectors, the sampling
 * defaults, the llama-server flags that change nothing here (cli_compat.c), then the server's
 * own. 0 parsed, 1 unknown, 2 usage error (message printed), -1 help printed. */
static cli_cvec serve_cv;           /* --control-vector...: its strings are argv's */
static cli_sampling serve_sampling; /* --temp, --top-k, ...: the requests' defaults */

static int take_opt(srv_config *c, int argc, char **argv, int *i)
{
    cli_compat_normalize(argv[*i]);
    int r = cli_cvec_flag(&serve_cv, "sift serve", argc, argv, i);
    if (r) return r < 0 ? 2 : 0;
    if ((r = cli_sampling_flag(&serve_sampling, argc, argv, i)) != 0) return r < 0 ? 2 : 0;
    if ((r = cli_compat_flag("sift serve", CLI_COMPAT_SERVE, argc, argv, i)) != 0) return r < 0 ? 2 : 0;
    bool used;
    r = parse_opt(c, argv[*i], *i + 1 < argc ? argv[*i + 1] : NULL, &used);
    *i += used;
    return r;
}

static int parse_env(srv_config *c)
{
    for (size_t i = 0; i < sizeof ENV_OPTS / sizeof *ENV_OPTS; i++) {
        const env_opt *o = &ENV_OPTS[i];
        const char *val = getenv(o->env);
        if (!val) continue;
        const char *flag = o->flag;
        char *arg = NULL;
        if (o->is_switch) {
            const bool on = !strcmp(val, "1") || !strcasecmp(val, "true") || !strcasecmp(val, "on") || !strcasecmp(val, "enabled");
            const bool off = !strcmp(val, "0") || !strcasecmp(val, "false") || !strcasecmp(val, "off") || !strcasecmp(val, "disabled");
            if (!on && !off) return bad(o->env, val, "expected 1/true/on/enabled or 0/false/off/disabled, got");
            if (off && !o->neg) continue;
            flag = on ? o->flag : o->neg;
        } else {
            arg = strdup(val); /* --api-key splits its value in place; the copy lives as long as the server */
            if (!arg || !list_add(&c->owned, &c->n_owned, arg)) {
                free(arg);
                return bad(o->env, NULL, "out of memory");
            }
        }
        char name[64];
        snprintf(name, sizeof name, "%s", flag); /* take_opt normalizes the option word in place */
        char *av[2] = {name, arg};
        int j = 0;
        if (take_opt(c, arg ? 2 : 1, av, &j)) {
            fprintf(stderr, "sift serve: (from the environment variable %s)\n", o->env);
            return 2;
        }
    }
    return 0;
}

/* 0 parsed, 2 usage error, -1 help printed. The environment first, then the command line
 * (which wins: a later option overrides, and lists such as --api-key add up). */
static int parse_args(int argc, char **argv, srv_config *c)
{
    *c = (srv_config){.host = "127.0.0.1", .port = 8080, .n_parallel = 4, .n_batch = 512, .n_threads = cli_default_threads(),
                      .timeout_s = 600, .max_connections = 256, .max_queue = 64, .max_body = 1 << 20,
                      .max_n_predict = 4096, .default_n_predict = -1, .isa = SIFT_ISA_AUTO, .header_timeout_s = 10,
                      .body_timeout_s = 30, .max_conns_per_client = 32, .drain_timeout_s = 30,
                      .template_memory = (size_t)1 << 30, .template_timeout_ms = 5000,
                      .max_body_in_flight = 64u << 20, .min_body_rate = 1024, .max_probs_bytes = 256u << 20,
                      .pooling = SIFT_POOLING_TYPE_UNSPECIFIED, .reasoning = -1, .reasoning_budget = -1,
                      .draft_max = 16, .draft_min = 0, .draft_p_min = 0.75f, .models_max = 4, .models_autoload = true};
    serve_cv = (cli_cvec){0};
    cli_sampling_init(&serve_sampling);
    int r = parse_env(c);
    for (int i = 1; !r && i < argc; i++) {
        const int i0 = i;
        char *word = argv[i];
        r = take_opt(c, argc, argv, &i);
        if (r == 1) r = bad(argv[i], NULL, "unknown option (try --help)");
        /* router mode: what a model's server gets (router.c); the router's own stay here */
        for (int k = i0; !r && k <= i && !srv_router_own_flag(word); k++)
            if (!list_add(&c->child_args, &c->n_child_args, argv[k])) r = bad(word, NULL, "out of memory");
    }
    if (r) return r;
    if (serve_sampling.any) {
        /* the rules that need no model now (a bad value ends the start, not every request);
         * the vocabulary checks and -1 windows per request, as for a request's own fields */
        sift_error err = {0};
        if (sift_sampling_params_validate(&serve_sampling.params, 0, &err) != SIFT_OK) {
            fprintf(stderr, "sift serve: %s\n", err.msg);
            return 2;
        }
        c->sampling = &serve_sampling.params;
    }
    c->cvec_paths = serve_cv.paths;
    c->cvec_scales = serve_cv.scales;
    c->n_cvec = serve_cv.n;
    c->cvec_layer_start = (int)serve_cv.layer_start;
    c->cvec_layer_end = (int)serve_cv.layer_end;
    /* no -m: router mode (as llama-server), on the Hugging Face cache when nothing else names models */
    if (!c->model_path && !c->models_dir && !c->models_preset && !rt_cache_count())
        return bad("-m", NULL, "a model is required (or router mode: --models-dir / --models-preset, or models in the "
                               "Hugging Face cache, LLAMA_CACHE or ~/.cache/huggingface/hub)");
    if (!c->n_threads_batch) c->n_threads_batch = c->n_threads;
    if (!c->max_renders) { /* half the CPUs: the other half stays the engine's */
        const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        c->max_renders = ncpu >= 4 ? (int)(ncpu / 2) : 1;
    }
    if (c->default_n_predict > c->max_n_predict) return bad("-n", NULL, "larger than --max-n-predict");
    if (c->model_draft && c->lookup) return bad("--lookup", NULL, "give either --model-draft or --lookup, not both");
    if (c->draft_min > c->draft_max) return bad("--draft-min", NULL, "is larger than --draft-max");
    return 0;
}

static void config_free(srv_config *c)
{
    for (int i = 0; i < c->n_owned; i++) free(c->owned[i]);
    free(c->owned);
    free(c->api_keys);
    free(c->cors_origins);
    free(c->allowed_hosts);
    free(c->child_args);
}

#ifdef SIFT_HAVE_MHD /* (a build without libmicrohttpd has no server to load templates for) */

/* After the drain's deadline: the failed requests' answers get LAST_WORDS_MS to go out; the
 * process exits at WATCHDOG_MS at the latest (both under the 1 s docs/server.md promises). */
#define ENGINE_STOP_MS 200.0 /* the engine's current step may end by then; else its tasks fail from outside */
#define LAST_WORDS_MS 600.0
#define WATCHDOG_MS 900.0

typedef struct drain_arg {
    srv_http *http;
    int timeout_s;
    atomic_bool done, ok;
} drain_arg;

static void *drain_main(void *p)
{
    drain_arg *d = p;
    atomic_store(&d->ok, srv_http_drain(d->http, d->timeout_s));
    atomic_store(&d->done, true);
    kill(getpid(), SIGTERM); /* wake the sigwait below */
    return NULL;
}

/* The last resort of a shutdown: whatever still runs at the drain's deadline (a template
 * render that does not stop, a grammar step, a connection thread the daemon cannot join),
 * the process is gone by then. _exit: the other threads may hold any lock. */
static double watchdog_at;

static void *watchdog_main(void *p)
{
    (void)p;
    for (;;) {
        const double left = watchdog_at - srv_now_ms();
        if (left <= 0) break;
        poll(NULL, 0, left > 1000 ? 1000 : (int)left + 1);
    }
    fprintf(stderr, "sift serve: shutdown did not finish by --drain-timeout + 1 s (work that does not stop): exiting now\n");
    fflush(stderr);
    _exit(0);
    return NULL;
}

/* Drain in a helper thread while this one waits for signals: a second SIGTERM or SIGINT
 * cuts the drain short (the impatient operator's Ctrl-C Ctrl-C). True when it finished. */
static bool drain(srv_http *http, int timeout_s, const sigset_t *sigs)
{
    drain_arg d = {.http = http, .timeout_s = timeout_s};
    pthread_t th;
    if (pthread_create(&th, NULL, drain_main, &d) != 0) return srv_http_drain(http, 0);
    int sig = 0;
    sigwait(sigs, &sig);
    if (!atomic_load(&d.done)) atomic_store(&srv_http_server(http)->drain_abort, true); /* a second signal */
    pthread_join(th, NULL);
    return atomic_load(&d.ok);
}

/* llama.cpp's chatml as Jinja (common/chat.cpp's CHATML_TEMPLATE_SRC): what a model without a
 * template of its own is rendered with, so tools and the Jinja-only features work there too. */
static const char CHATML_JINJA[] =
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\\n' -}}\n"
    "{%- endif -%}";

/* The Jinja template for chats: --chat-template-file (which must parse), the GGUF's, else
 * llama.cpp's chatml. */
static int load_jinja(srv_server *s, const srv_config *cfg)
{
    sift_error err = {0};
    if (cfg->chat_template_file) {
        size_t n = 0;
        char *text = cli_read_file(cfg->chat_template_file, &n);
        if (!text) {
            fprintf(stderr, "sift serve: cannot read %s\n", cfg->chat_template_file);
            return -1;
        }
        s->jinja = sift_template_parse(text, n, &err);
        free(s->tmpl_text);
        s->tmpl_text = text;
        if (!s->jinja) {
            fprintf(stderr, "sift serve: %s: %s\n", cfg->chat_template_file, err.msg);
            return -1;
        }
        return 0;
    }
    if (!s->tmpl_text && !(s->tmpl_text = strdup(CHATML_JINJA))) return -1;
    s->tmpl_fallback = !strcmp(s->tmpl_text, CHATML_JINJA);
    if (s->tmpl_text) {
        s->jinja = sift_template_parse(s->tmpl_text, strlen(s->tmpl_text), &err);
        if (!s->jinja && cfg->chat_template_text) { /* the user's own: an error, as a --chat-template-file's */
            fprintf(stderr, "sift serve: --chat-template: %s\n", err.msg);
            return -1;
        }
        if (!s->jinja) fprintf(stderr, "sift serve: the model's chat template does not parse (%s); using a built-in one\n", err.msg);
    }
    return 0;
}
#endif

int sift_cmd_serve(int argc, char **argv)
{
    cli_malloc_keep(); /* requests compile grammars again and again */
    srv_server *s = calloc(1, sizeof *s);
    if (!s) return 1;
    const int pr = parse_args(argc, argv, &s->cfg);
    if (pr != 0) {
        config_free(&s->cfg);
        free(s);
        return pr < 0 ? 0 : pr;
    }
#ifndef SIFT_HAVE_MHD
    fprintf(stderr, "sift serve: this build has no HTTP server (libmicrohttpd was not found at configure time)\n");
    config_free(&s->cfg);
    free(s);
    return 1;
#else
    srv_config *cfg = &s->cfg;
    int rc = 1;
    srv_http *http = NULL;

    /* every thread started from here on inherits this mask; sigwait() below takes them */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (!cfg->model_path) { /* --models-dir / --models-preset: several models, each in a server of its own */
        rc = srv_router_run(s, &sigs);
        goto done;
    }
    sift_error err = {0};
    const double t0 = srv_now_ms();
    s->model = sift_model_load(cfg->model_path, &err);
    if (!s->model) {
        fprintf(stderr, "sift serve: %s: %s\n", cfg->model_path, err.msg);
        goto done;
    }
    sift_model_get_info(s->model, &s->info);
    if (cfg->model_draft && !(s->draft_model = sift_model_load(cfg->model_draft, &err))) {
        fprintf(stderr, "sift serve: draft model %s: %s\n", cfg->model_draft, err.msg);
        goto done;
    }
    s->vocab = sift_model_vocab(s->model);
    s->n_vocab = s->info.n_vocab;
    sift_vocab_view_get(s->vocab, &s->view);
    /* one grammar compiler for the model: the trie is built now, not in the first request */
    if (!(s->gcomp = sift_grammar_compiler_new(&s->view, NULL, &err))) {
        fprintf(stderr, "sift serve: grammar compiler: %s\n", err.msg);
        goto done;
    }
    s->eot = sift_vocab_eot(s->vocab);
    if (s->eot == SIFT_TOKEN_NULL) s->eot = sift_vocab_eos(s->vocab);
    /* never the path: it tells the file system; of several aliases, the first in sort order
     * (llama-server's std::set) */
    s->model_name = srv_file_name(cfg->model_path);
    if (cfg->alias) {
        free(s->model_name_own);
        s->model_name = s->model_name_own = srv_first_name(cfg->alias);
        if (!s->model_name) goto done;
    }
    sift_model_desc(s->model, s->model_desc, sizeof s->model_desc);
    s->t_start = time(NULL);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());

    /* the chat template: --chat-template NAME (built in); else --chat-template-file, else the
     * GGUF's, rendered as Jinja; a GGUF template that does not parse, or none, falls back to
     * the built-in one it resembles, else chatml */
    const char *gguf_tmpl = sift_model_chat_template(s->model, NULL);
    if (gguf_tmpl && !(s->tmpl_text = strdup(gguf_tmpl))) goto done;
    if (cfg->chat_template_text) { /* --chat-template with a template's text */
        free(s->tmpl_text);
        if (!(s->tmpl_text = strdup(cfg->chat_template_text))) goto done;
    }
    if (cfg->no_jinja && cfg->chat_template_file) { /* (llama-server: the file picks a built-in template) */
        size_t n = 0;
        char *text = cli_read_file(cfg->chat_template_file, &n);
        if (!text) {
            fprintf(stderr, "sift serve: cannot read %s\n", cfg->chat_template_file);
            rc = 2;
            goto done;
        }
        free(s->tmpl_text);
        s->tmpl_text = text;
    }
    if (!cfg->chat_template && !cfg->no_jinja && load_jinja(s, cfg) != 0) {
        rc = 2;
        goto done;
    }
    s->tc_fmt = tc_detect(s->tmpl_text); /* the tool-call format, once: every request reads it */
    if (cfg->template_memory && !(s->tpool = sift_template_pool_new(cfg->template_memory))) {
        rc = 1;
        goto done;
    }
    if (chat_jinja_set_kwargs(s, cfg->chat_template_kwargs, cfg->reasoning) != 0) {
        rc = 2;
        goto done;
    }
    chat_jinja_probe_caps(s); /* after the pool: the probes render under the budgets */
    s->tmpl = cfg->chat_template ? chat_from_name(cfg->chat_template) : chat_detect(s->tmpl_text);
    s->tmpl_detected = s->tmpl != CHAT_UNKNOWN && !s->tmpl_fallback;
    if (s->tmpl == CHAT_UNKNOWN) s->tmpl = CHAT_CHATML;

    if (cfg->n_ctx == 0) cfg->n_ctx = s->info.n_ctx_train;
    if (!cfg->kv_unified && cfg->n_ctx / cfg->n_parallel < 4) {
        fprintf(stderr, "sift serve: -c %d over -np %d slots leaves fewer than 4 cells per slot\n", cfg->n_ctx, cfg->n_parallel);
        rc = 2;
        goto done;
    }
    s->engine = srv_engine_start(s, &err);
    if (!s->engine) {
        fprintf(stderr, "sift serve: %s\n", err.msg);
        goto done;
    }
    if (cfg->embeddings && !(s->embd = srv_embd_new(s, &err))) {
        fprintf(stderr, "sift serve: embeddings: %s\n", err.msg[0] ? err.msg : "out of memory");
        goto done;
    }
    int port = 0;
    char msg[256];
    const srv_prio_mode prio = srv_prio_init(true); /* before the first connection thread */
    http = srv_http_start(s, &port, msg, sizeof msg);
    if (!http) {
        fprintf(stderr, "sift serve: %s\n", msg);
        goto done;
    }
    fprintf(stderr, "sift serve: model %s (%s), vocab %d, %d slots x %d tokens, batch %d, threads %d/%d, chat template %s%s\n",
            cfg->model_path, s->model_desc, s->n_vocab, cfg->n_parallel, s->n_ctx_slot,
            cfg->n_batch > cfg->n_parallel ? cfg->n_batch : cfg->n_parallel, cfg->n_threads, cfg->n_threads_batch,
            s->jinja && !s->tmpl_fallback ? "jinja" : chat_name(s->tmpl), (s->jinja && !s->tmpl_fallback) || s->tmpl_detected ? "" : " (default)");
    if (s->draft_model)
        fprintf(stderr, "sift serve: speculative decoding: draft model %s, draft-max %d, draft-min %d, draft-p-min %.2f\n",
                srv_file_name(cfg->model_draft), cfg->draft_max, cfg->draft_min, (double)cfg->draft_p_min);
    else if (cfg->lookup)
        fprintf(stderr, "sift serve: speculative decoding: prompt lookup over n-grams of 1..%d tokens, draft-max %d, draft-min %d\n",
                cfg->lookup, cfg->draft_max, cfg->draft_min);
    if (prio == SRV_PRIO_NICE) fprintf(stderr, "sift serve: chat-template renders and grammar compiles run at nice 19 (the lowest)\n");
    fprintf(stderr, "sift serve: loaded in %.0f ms; listening on http://%s:%d\n", srv_now_ms() - t0,
            strchr(cfg->host, ':') ? "[::]" : cfg->host, port);
    fflush(stderr);

    int sig = 0;
    sigwait(&sigs, &sig);
    atomic_store(&s->draining, true); /* before the line below: whoever reads it sees the 503s */
    fprintf(stderr, "sift serve: %s: draining (new work gets 503; running requests have %d s to finish)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", cfg->drain_timeout_s);
    fflush(stderr);
    const bool drained = drain(http, cfg->drain_timeout_s, &sigs);
    /* the deadline (or a second signal): what is still queued or running fails with 503, each
     * connection gets LAST_WORDS_MS to send that (a stream its error event, so that no stream
     * ends without a closing event), and the process is gone within a second of the deadline
     * whatever does not stop */
    const double t_stop = srv_now_ms();
    watchdog_at = t_stop + WATCHDOG_MS;
    pthread_t wd;
    if (pthread_create(&wd, NULL, watchdog_main, NULL) == 0) pthread_detach(wd);
    atomic_store(&s->stop_work, true);
    if (drained) fprintf(stderr, "sift serve: drained, shutting down\n");
    else fprintf(stderr, "sift serve: drain cut short (timeout or a second signal): failing what still runs with 503\n");
    srv_engine_stop_by(s->engine, t_stop + ENGINE_STOP_MS);
    if (!drained && !srv_http_flush(http, t_stop + LAST_WORDS_MS))
        fprintf(stderr, "sift serve: some connections did not take their last answer in time\n");
    rc = 0;
done:
    srv_engine_stop(s->engine); /* running requests fail with 503: their connections can end */
    srv_http_stop(http);        /* waits for the connection threads */
    srv_engine_free(s->engine);
    srv_embd_free(s->embd);
    sift_grammar_compiler_free(s->gcomp);
    sift_model_free(s->model);
    sift_model_free(s->draft_model);
    sift_template_free(s->jinja);
    free(s->model_name_own);
    chat_jinja_free_kwargs(s);
    sift_template_pool_free(s->tpool);
    free(s->tmpl_text);
    config_free(&s->cfg);
    free(s);
    return rc;
#endif
}
