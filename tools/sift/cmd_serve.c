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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/server.h"
#include "cli_util.h"
#include "sift.h"

const char sift_cmd_serve_help[] = "HTTP server: llama-server's API (/completion, /v1/chat/completions, ...), continuous batching, web playground";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sift serve -m MODEL.gguf [options]\n\n"
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
            "  -a, --alias NAME          model name in responses (default: the model path)\n"
            "  --chat-template-file FILE a Jinja chat template to render (instead of the GGUF's tokenizer.chat_template)\n"
            "  --chat-template NAME      chat template by name (chatml, llama2, llama2-sys, mistral-v1, mistral-v3,\n"
            "                            mistral-v7, llama3, phi3, phi4, zephyr, gemma, vicuna, deepseek, command-r, ...)\n"
            "                            (default: detected from the GGUF, else chatml)\n"
            "  --isa NAME                kernels: auto, scalar, avx2, avx512 (default auto)\n\n"
            "limits:\n"
            "  -to, --timeout N          close connections idle for N seconds (default 600)\n"
            "  --max-connections N       simultaneous connections (default 256)\n"
            "  --max-queue N             requests waiting for a slot; more get 503 + Retry-After (default 64)\n"
            "  --max-body BYTES          request body size; more get 413 (default 1048576)\n"
            "  --max-n-predict N         the most tokens one request may ask for (default 4096)\n\n"
            "  -v, --log-requests        one line per request on stderr\n"
            "  -h, --help                this text\n\n"
            "Endpoints, fields and limits: docs/server.md.\n");
}

static int bad(const char *flag, const char *value, const char *why)
{
    fprintf(stderr, "sift serve: %s: %s%s%s%s\n", flag, why, value ? " '" : "", value ? value : "", value ? "'" : "");
    return 2;
}

/* 0 parsed, 2 usage error, -1 help printed */
static int parse_args(int argc, char **argv, srv_config *c)
{
    *c = (srv_config){.host = "127.0.0.1", .port = 8080, .n_parallel = 4, .n_batch = 512, .n_threads = cli_default_threads(),
                      .timeout_s = 600, .max_connections = 256, .max_queue = 64, .max_body = 1 << 20,
                      .max_n_predict = 4096, .default_n_predict = -1, .isa = SIFT_ISA_AUTO};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
#define IS(x) (!strcmp(a, x))
#define NEEDV()                                       \
    do {                                              \
        if (!v) return bad(a, NULL, "missing value"); \
        i++;                                          \
    } while (0)
#define INTV(lo, hi, what)                                                    \
    do {                                                                      \
        NEEDV();                                                              \
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
        } else if (IS("--chat-template-file")) {
            NEEDV();
            c->chat_template_file = v;
        } else if (IS("--chat-template")) {
            NEEDV();
            if (chat_from_name(v) == CHAT_UNKNOWN) return bad(a, v, "unknown template name (see --help):");
            c->chat_template = v;
        } else if (IS("--isa")) {
            NEEDV();
            if (!cli_parse_isa(v, &c->isa)) return bad(a, v, "expected auto, scalar, avx2 or avx512, got");
        } else if (IS("-to") || IS("--timeout")) {
            INTV(1, 86400, "seconds in [1, 86400]");
            c->timeout_s = (int)n;
        } else if (IS("--max-connections")) {
            INTV(1, 100000, "a count in [1, 100000]");
            c->max_connections = (int)n;
        } else if (IS("--max-queue")) {
            INTV(1, 1000000, "a count in [1, 1000000]");
            c->max_queue = (int)n;
        } else if (IS("--max-body")) {
            INTV(64, 1L << 30, "bytes in [64, 2^30]");
            c->max_body = (size_t)n;
        } else if (IS("--max-n-predict")) {
            INTV(1, 1L << 24, "an integer in [1, 2^24]");
            c->max_n_predict = (int)n;
        } else if (IS("-v") || IS("--log-requests") || IS("--verbose")) {
            c->log_requests = true;
        } else {
            return bad(a, NULL, "unknown option (try --help)");
        }
#undef IS
#undef NEEDV
#undef INTV
    }
    if (!c->model_path) return bad("-m", NULL, "a model is required");
    if (!c->n_threads_batch) c->n_threads_batch = c->n_threads;
    if (c->default_n_predict > c->max_n_predict) return bad("-n", NULL, "larger than --max-n-predict");
    return 0;
}

/* tokenizer.chat_template from the GGUF (NULL when absent). */
static char *read_chat_template(const char *path)
{
    sift_gguf *g = sift_gguf_open(path, NULL);
    if (!g) return NULL;
    const char *t = NULL;
    char *copy = NULL;
    if (sift_gguf_get_str(g, "tokenizer.chat_template", &t, NULL) == SIFT_OK && t) copy = strdup(t);
    sift_gguf_close(g);
    return copy;
}

/* The Jinja template for chats: --chat-template-file (which must parse) or the GGUF's. */
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
    if (s->tmpl_text) {
        s->jinja = sift_template_parse(s->tmpl_text, strlen(s->tmpl_text), &err);
        if (!s->jinja) fprintf(stderr, "sift serve: the model's chat template does not parse (%s); using a built-in one\n", err.msg);
    }
    return 0;
}

int sift_cmd_serve(int argc, char **argv)
{
    srv_server *s = calloc(1, sizeof *s);
    if (!s) return 1;
    const int pr = parse_args(argc, argv, &s->cfg);
    if (pr != 0) {
        free(s);
        return pr < 0 ? 0 : pr;
    }
#ifndef SIFT_HAVE_MHD
    fprintf(stderr, "sift serve: this build has no HTTP server (libmicrohttpd was not found at configure time)\n");
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

    sift_error err = {0};
    const double t0 = srv_now_ms();
    s->model = sift_model_load(cfg->model_path, &err);
    if (!s->model) {
        fprintf(stderr, "sift serve: %s: %s\n", cfg->model_path, err.msg);
        goto done;
    }
    sift_model_get_info(s->model, &s->info);
    s->vocab = sift_model_vocab(s->model);
    s->n_vocab = s->info.n_vocab;
    sift_vocab_view_get(s->vocab, &s->view);
    s->eot = sift_vocab_eot(s->vocab);
    if (s->eot == SIFT_TOKEN_NULL) s->eot = sift_vocab_eos(s->vocab);
    s->model_name = cfg->alias ? cfg->alias : cfg->model_path;
    sift_model_desc(s->model, s->model_desc, sizeof s->model_desc);
    s->t_start = time(NULL);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());

    /* the chat template: --chat-template NAME (built in); else --chat-template-file, else the
     * GGUF's, rendered as Jinja; a GGUF template that does not parse, or none, falls back to
     * the built-in one it resembles, else chatml */
    s->tmpl_text = read_chat_template(cfg->model_path);
    if (!cfg->chat_template && load_jinja(s, cfg) != 0) {
        rc = 2;
        goto done;
    }
    s->tmpl = cfg->chat_template ? chat_from_name(cfg->chat_template) : chat_detect(s->tmpl_text);
    s->tmpl_detected = s->tmpl != CHAT_UNKNOWN;
    if (s->tmpl == CHAT_UNKNOWN) s->tmpl = CHAT_CHATML;

    if (cfg->n_ctx == 0) cfg->n_ctx = s->info.n_ctx_train;
    if (cfg->n_ctx / cfg->n_parallel < 4) {
        fprintf(stderr, "sift serve: -c %d over -np %d slots leaves fewer than 4 cells per slot\n", cfg->n_ctx, cfg->n_parallel);
        rc = 2;
        goto done;
    }
    s->engine = srv_engine_start(s, &err);
    if (!s->engine) {
        fprintf(stderr, "sift serve: %s\n", err.msg);
        goto done;
    }
    int port = 0;
    char msg[256];
    http = srv_http_start(s, &port, msg, sizeof msg);
    if (!http) {
        fprintf(stderr, "sift serve: %s\n", msg);
        goto done;
    }
    fprintf(stderr, "sift serve: model %s (%s), vocab %d, %d slots x %d tokens, batch %d, threads %d/%d, chat template %s%s\n",
            cfg->model_path, s->model_desc, s->n_vocab, cfg->n_parallel, s->n_ctx_slot,
            cfg->n_batch > cfg->n_parallel ? cfg->n_batch : cfg->n_parallel, cfg->n_threads, cfg->n_threads_batch,
            s->jinja ? "jinja" : chat_name(s->tmpl), s->jinja || s->tmpl_detected ? "" : " (default)");
    fprintf(stderr, "sift serve: loaded in %.0f ms; listening on http://%s:%d\n", srv_now_ms() - t0,
            strchr(cfg->host, ':') ? "[::]" : cfg->host, port);
    fflush(stderr);

    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "sift serve: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = 0;
done:
    srv_engine_stop(s->engine); /* running requests fail with 503: their connections can end */
    srv_http_stop(http);        /* waits for the connection threads */
    srv_engine_free(s->engine);
    sift_model_free(s->model);
    sift_template_free(s->jinja);
    free(s->tmpl_text);
    free(s);
    return rc;
#endif
}
