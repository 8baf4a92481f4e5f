/*
 * bench_server.c - `sift bench --server`: a bounded load test of `sift serve` on loopback.
 *
 *   sift bench --server -m ../shared/models/stories260K.gguf            (64 clients, 2000 requests,
 *                                                                       10% malformed, -np 1 and -np 8)
 *
 * For each slot count in --np, it starts `sift serve` itself (this same binary, on
 * 127.0.0.1 with a free port), then runs --clients client threads over one keep-alive
 * connection each, which together send exactly --requests requests: every --bad-every-th
 * one malformed (cycling through several kinds of bad JSON / bad fields), the others valid
 * and alternating /completion, /completion with "stream": true (SSE) and
 * /v1/chat/completions, each asking for --n-predict tokens with ignore_eos and its own seed.
 *
 * Every answer is checked: a valid request must get 200 and exactly --n-predict tokens
 * (tokens_predicted, the number of SSE token events, or usage.completion_tokens), a
 * malformed one must get 400 with a JSON error body. The server's RSS is sampled every
 * 20 ms (its peak is reported and checked against --rss-limit-mb); after the run the
 * server must still be alive and must exit 0 on SIGTERM. A run that passes --time-limit
 * seconds stops and fails.
 *
 * It prints requests/s, generated tokens/s, p50/p99 latency (valid requests, wall time from
 * sending the request to the last byte), the status counts, peak RSS, and the batching gain
 * (tokens/s of the largest -np over the smallest). Runs are sequential (one server at a
 * time, on the same machine as the clients): compare figures within one invocation. With
 * --reps N the whole list of slot counts runs N times in turn (1, 8, 1, 8, ...), so a
 * machine whose load changes disturbs every slot count alike, and the gain is the median of
 * the N ratios.
 *
 * The shared models are too small for batching to gain anything (their weights live in the
 * caches, so a step of 8 tokens costs 8 steps of one); `sift mkmodel` makes one that is not
 * (docs/server.md, "Load test").
 * Exit status 0 when every check passed.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "server/server.h"

const char sift_bench_server_help[] = "load test of sift serve on loopback: N clients, M requests (some malformed), -np 1 vs 8";

typedef struct lt_cfg {
    const char *model;
    int clients, requests, bad_every, n_predict, ctx_per_slot, threads;
    int np[8], n_np, reps;
    double time_limit_s;
    double rss_limit_mb;
    bool json;
    const char *extra[8];      /* more `sift serve` flags (--hostile), NULL-terminated */
} lt_cfg;

typedef struct lt_result {
    int np;
    double wall_s, req_per_s, tok_per_s, p50_ms, p99_ms, mean_ms;
    long n_ok, n_bad_ok, n_status_other, n_wrong_tokens, n_io_errors, n_valid, n_malformed;
    long long tokens;
    double rss_peak_mb, rss_end_mb;
    double eng_decode_s, eng_sample_s, busy_per_decode; /* from the server's /metrics */
    double sampling_us;                                 /* its sift_sampling_us_per_token */
    int server_exit;
    bool crashed, timed_out;
} lt_result;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the server process ---------------------------------------------------------------------- */

typedef struct server_proc {
    pid_t pid;
    int port;
    int err_fd;
    pthread_t drain;
} server_proc;

static void *drain_main(void *arg)
{
    const int fd = *(int *)arg;
    char buf[4096];
    while (read(fd, buf, sizeof buf) > 0) {
    }
    return NULL;
}

static bool server_start(const lt_cfg *c, int np, server_proc *sp)
{
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return false;
    self[n] = 0;
    int pfd[2];
    if (pipe(pfd) != 0) return false;
    char np_s[16], ctx_s[32], q_s[16], t_s[16];
    snprintf(t_s, sizeof t_s, "%d", c->threads);
    snprintf(np_s, sizeof np_s, "%d", np);
    snprintf(ctx_s, sizeof ctx_s, "%d", np * c->ctx_per_slot);
    snprintf(q_s, sizeof q_s, "%d", c->clients + 8); /* every client may wait: no 503 expected */
    const pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        dup2(pfd[1], 2);
        close(pfd[0]);
        close(pfd[1]);
        const char *av[40] = {"sift", "serve", "-m", c->model, "--host", "127.0.0.1", "--port", "0", "-np", np_s, "-c", ctx_s,
                              "--max-queue", q_s, "--max-n-predict", "100000"};
        int k = 16;
        if (!c->extra[0]) av[k++] = "--max-connections-per-client", av[k++] = "0"; /* every client is 127.0.0.1 */
        for (int i = 0; i < 8 && c->extra[i]; i++) av[k++] = c->extra[i];
        if (c->threads) av[k++] = "-t", av[k++] = t_s;
        av[k] = NULL;
        execv(self, (char *const *)av);
        _exit(127);
    }
    close(pfd[1]);
    sp->pid = pid;
    sp->err_fd = pfd[0];
    sp->port = 0;
    char line[8192];
    size_t have = 0;
    const double t0 = now_s();
    while (now_s() - t0 < 60 && !sp->port) {
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        if (poll(&p, 1, 1000) <= 0) continue;
        const ssize_t r = read(pfd[0], line + have, sizeof line - 1 - have);
        if (r <= 0) break;
        have += (size_t)r;
        line[have] = 0;
        const char *m = strstr(line, "listening on http://");
        const char *colon = m ? strchr(m + 20, ':') : NULL;
        if (colon && strchr(colon, '\n')) sp->port = atoi(colon + 1);
        if (have == sizeof line - 1) have = 0;
    }
    if (!sp->port) {
        fprintf(stderr, "sift bench --server: the server did not start: %s\n", line);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return false;
    }
    pthread_create(&sp->drain, NULL, drain_main, &sp->err_fd);
    return true;
}

static double rss_mb(pid_t pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    double mb = 0;
    const size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl)) mb = atof(line + kl + 1) / 1024.0;
    fclose(f);
    return mb;
}

/* ---- a small HTTP/1.1 client (keep-alive, Content-Length or chunked) ----------------------------- */

typedef struct conn {
    int fd;
    int port;
    uint32_t src;              /* source address (host order; 0: 127.0.0.1) */
    int timeout_ms;            /* receive timeout (0: none) */
    char buf[1 << 16];
    size_t n, off;
} conn;

static int conn_open(conn *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0) return -1;
    const int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (c->timeout_ms) {
        struct timeval tv = {.tv_sec = c->timeout_ms / 1000, .tv_usec = (c->timeout_ms % 1000) * 1000};
        setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    if (c->src) {
        struct sockaddr_in b = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(c->src)};
        if (bind(c->fd, (struct sockaddr *)&b, sizeof b) != 0) {
            close(c->fd);
            c->fd = -1;
            return -1;
        }
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port), .sin_addr.s_addr = htonl(0x7f000001)};
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    c->n = c->off = 0;
    return 0;
}

static void conn_close(conn *c)
{
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->n = c->off = 0;
}

static int fill(conn *c)
{
    if (c->off == c->n) c->off = c->n = 0;
    if (c->n == sizeof c->buf) {
        memmove(c->buf, c->buf + c->off, c->n - c->off);
        c->n -= c->off;
        c->off = 0;
    }
    const ssize_t r = recv(c->fd, c->buf + c->n, sizeof c->buf - c->n, 0);
    if (r <= 0) return -1;
    c->n += (size_t)r;
    return 0;
}

/* A line without its CRLF into out (cap bytes at most). */
static int read_line(conn *c, char *out, size_t cap)
{
    for (;;) {
        for (size_t i = c->off; i + 1 < c->n; i++) {
            if (c->buf[i] == '\r' && c->buf[i + 1] == '\n') {
                size_t len = i - c->off;
                if (len >= cap) len = cap - 1;
                memcpy(out, c->buf + c->off, len);
                out[len] = 0;
                c->off = i + 2;
                return 0;
            }
        }
        if (fill(c) != 0) return -1;
    }
}

static int read_n(conn *c, size_t n, sbuf *out)
{
    while (n > 0) {
        if (c->off == c->n && fill(c) != 0) return -1;
        size_t k = c->n - c->off;
        if (k > n) k = n;
        if (out) sbuf_add(out, c->buf + c->off, k);
        c->off += k;
        n -= k;
    }
    return 0;
}

/* One request on the keep-alive connection; the body into *out. 0, or -1 on an I/O error. */
static int http_do(conn *c, const char *method, const char *path, const char *body, int *status, sbuf *out)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        if (c->fd < 0 && conn_open(c) != 0) return -1;
        char head[512];
        const int hn = snprintf(head, sizeof head,
                                "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                                method, path, strlen(body));
        if (send(c->fd, head, (size_t)hn, MSG_NOSIGNAL) != hn ||
            send(c->fd, body, strlen(body), MSG_NOSIGNAL) != (ssize_t)strlen(body)) {
            conn_close(c);
            continue; /* a keep-alive connection the server had closed: once more on a new one */
        }
        char line[1024];
        if (read_line(c, line, sizeof line) != 0) {
            conn_close(c);
            if (attempt == 0) continue;
            return -1;
        }
        *status = atoi(strchr(line, ' ') ? strchr(line, ' ') + 1 : "0");
        long clen = -1;
        bool chunked = false, close_after = false;
        for (;;) {
            if (read_line(c, line, sizeof line) != 0) return conn_close(c), -1;
            if (!line[0]) break;
            if (!strncasecmp(line, "Content-Length:", 15)) clen = atol(line + 15);
            if (!strncasecmp(line, "Transfer-Encoding:", 18) && strstr(line, "chunked")) chunked = true;
            if (!strncasecmp(line, "Connection:", 11) && strstr(line, "close")) close_after = true;
        }
        out->n = 0;
        if (chunked) {
            for (;;) {
                if (read_line(c, line, sizeof line) != 0) return conn_close(c), -1;
                const long sz = strtol(line, NULL, 16);
                if (sz == 0) {
                    do { /* trailers, then the blank line */
                        if (read_line(c, line, sizeof line) != 0) return conn_close(c), -1;
                    } while (line[0]);
                    break;
                }
                if (read_n(c, (size_t)sz, out) != 0 || read_n(c, 2, NULL) != 0) return conn_close(c), -1;
            }
        } else if (clen >= 0) {
            if (read_n(c, (size_t)clen, out) != 0) return conn_close(c), -1;
        } else {
            while (fill(c) == 0) {
            }
            sbuf_add(out, c->buf + c->off, c->n - c->off);
            close_after = true;
        }
        if (close_after) conn_close(c);
        return 0;
    }
    return -1;
}

/* ---- the load ------------------------------------------------------------------------------------- */

static const char *const malformed[] = {
    "{\"prompt\": \"x\", \"top_p\": \"high\"}",
    "{\"prompt\": 5}",
    "{\"prompt\": \"x\", ",
    "{\"prompt\": \"x\", \"samplers\": [\"top_k\", \"nope\"]}",
    "{\"prompt\": \"x\", \"n_predict\": -7}",
    "[1, 2, 3]",
    "{\"prompt\": \"x\", \"logit_bias\": [[999999, 1]]}",
    "{\"prompt\": \"x\", \"grammar\": \"root ::= (\"}",
    "{\"messages\": [{\"content\": \"no role\"}]}",
    "",
};
static const char *const prompts[] = {"Once upon a time", "Lily and Tom went to the park", "The little dog", "One day, a girl"};

typedef struct lt_shared {
    const lt_cfg *cfg;
    int port;
    atomic_int next;
    double t0, deadline;
    atomic_bool timed_out;
    double *lat;              /* per request, ms (valid ones; -1 for malformed) */
    atomic_long n_ok, n_bad_ok, n_other, n_wrong, n_io;
    atomic_llong tokens;
} lt_shared;

/* Tokens in a valid answer, -1 when the answer is not the expected shape. */
static long count_tokens(int kind, const sbuf *b)
{
    if (kind == 1) { /* SSE: token events, then a final event with stop: true */
        long n_tok = 0, final_n = -1;
        const char *p = b->p ? b->p : "";
        const char *end = p + b->n;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            const size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
            if (len > 6 && !strncmp(p, "data: ", 6)) {
                cJSON *j = cJSON_ParseWithLength(p + 6, len - 6);
                if (!j) return -1;
                if (cJSON_IsTrue(cJSON_GetObjectItem(j, "stop"))) final_n = (long)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "tokens_predicted"));
                else n_tok++;
                cJSON_Delete(j);
            }
            p += len + 1;
        }
        return final_n == n_tok ? n_tok : -1;
    }
    cJSON *j = cJSON_ParseWithLength(b->p ? b->p : "", b->n);
    if (!j) return -1;
    long n = -1;
    if (kind == 0) n = (long)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "tokens_predicted"));
    else n = (long)cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "completion_tokens"));
    cJSON_Delete(j);
    return n;
}

static void *client_main(void *arg)
{
    lt_shared *sh = arg;
    const lt_cfg *c = sh->cfg;
    conn *cn = calloc(1, sizeof *cn);
    sbuf out = {0};
    char body[1024];
    if (!cn) return NULL;
    cn->fd = -1;
    cn->port = sh->port;
    for (;;) {
        const int i = atomic_fetch_add(&sh->next, 1);
        if (i >= c->requests) break;
        if (now_s() > sh->deadline) {
            atomic_store(&sh->timed_out, true);
            break;
        }
        const bool bad = c->bad_every > 0 && i % c->bad_every == c->bad_every - 1;
        const char *path;
        int kind = 0;
        if (bad) {
            const char *m = malformed[(i / c->bad_every) % (sizeof malformed / sizeof *malformed)];
            path = strstr(m, "messages") ? "/v1/chat/completions" : "/completion";
            snprintf(body, sizeof body, "%s", m);
        } else {
            kind = i % 3;
            const char *p = prompts[i % 4];
            if (kind == 2) {
                path = "/v1/chat/completions";
                snprintf(body, sizeof body,
                         "{\"messages\": [{\"role\": \"user\", \"content\": \"%s\"}], \"max_tokens\": %d, \"ignore_eos\": true, \"seed\": %d}",
                         p, c->n_predict, i);
            } else {
                path = "/completion";
                snprintf(body, sizeof body, "{\"prompt\": \"%s\", \"n_predict\": %d, \"ignore_eos\": true, \"seed\": %d%s}", p,
                         c->n_predict, i, kind == 1 ? ", \"stream\": true" : "");
            }
        }
        int status = 0;
        const double t0 = now_s();
        const int r = http_do(cn, "POST", path, body, &status, &out);
        const double ms = (now_s() - t0) * 1e3;
        sh->lat[i] = bad ? -1 : ms;
        if (r != 0) {
            atomic_fetch_add(&sh->n_io, 1);
            continue;
        }
        if (bad) {
            cJSON *j = status == 400 ? cJSON_ParseWithLength(out.p ? out.p : "", out.n) : NULL;
            if (j && cJSON_GetObjectItem(j, "error")) atomic_fetch_add(&sh->n_bad_ok, 1);
            else atomic_fetch_add(&sh->n_other, 1);
            cJSON_Delete(j);
        } else if (status != 200) {
            atomic_fetch_add(&sh->n_other, 1);
        } else {
            const long n = count_tokens(kind, &out);
            if (n == c->n_predict) {
                atomic_fetch_add(&sh->n_ok, 1);
                atomic_fetch_add(&sh->tokens, n);
            } else {
                atomic_fetch_add(&sh->n_wrong, 1);
            }
        }
    }
    conn_close(cn);
    free(cn);
    sbuf_free(&out);
    return NULL;
}

typedef struct rss_mon {
    pid_t pid;
    atomic_bool stop;
    double peak;
} rss_mon;

static void *rss_main(void *arg)
{
    rss_mon *m = arg;
    while (!atomic_load(&m->stop)) {
        const double r = rss_mb(m->pid, "VmRSS:");
        if (r > m->peak) m->peak = r;
        usleep(20000);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static bool run_one(const lt_cfg *c, int np, lt_result *res)
{
    memset(res, 0, sizeof *res);
    res->np = np;
    server_proc sp;
    if (!server_start(c, np, &sp)) return false;
    lt_shared sh = {.cfg = c, .port = sp.port};
    sh.lat = calloc((size_t)c->requests, sizeof *sh.lat);
    pthread_t *th = calloc((size_t)c->clients, sizeof *th);
    rss_mon mon = {.pid = sp.pid};
    pthread_t mon_th;
    pthread_create(&mon_th, NULL, rss_main, &mon);
    sh.t0 = now_s();
    sh.deadline = sh.t0 + c->time_limit_s;
    int started = 0;
    for (int i = 0; i < c->clients && th && sh.lat; i++)
        if (pthread_create(&th[i], NULL, client_main, &sh) == 0) started++;
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    const double wall = now_s() - sh.t0;
    atomic_store(&mon.stop, true);
    pthread_join(mon_th, NULL);

    res->crashed = waitpid(sp.pid, &res->server_exit, WNOHANG) != 0;
    if (!res->crashed) { /* where the engine's time went */
        conn *mc = calloc(1, sizeof *mc);
        sbuf m = {0};
        int st = 0;
        if (mc) {
            mc->fd = -1;
            mc->port = sp.port;
            if (http_do(mc, "GET", "/metrics", "", &st, &m) == 0 && st == 200 && m.p) {
                static const char *const keys[] = {"\nsift_engine_decode_seconds_total ", "\nsift_engine_sample_seconds_total ",
                                                   "\nsift_n_busy_slots_per_decode ", "\nsift_sampling_us_per_token "};
                double *dst[] = {&res->eng_decode_s, &res->eng_sample_s, &res->busy_per_decode, &res->sampling_us};
                for (int k = 0; k < 4; k++) {
                    const char *x = strstr(m.p, keys[k]);
                    if (x) *dst[k] = atof(x + strlen(keys[k]));
                }
            }
            conn_close(mc);
            free(mc);
        }
        sbuf_free(&m);
    }
    res->rss_end_mb = rss_mb(sp.pid, "VmRSS:");
    res->rss_peak_mb = mon.peak > res->rss_end_mb ? mon.peak : res->rss_end_mb;
    if (!res->crashed) {
        kill(sp.pid, SIGTERM);
        int st = 0;
        waitpid(sp.pid, &st, 0);
        res->server_exit = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    } else {
        res->server_exit = WIFEXITED(res->server_exit) ? WEXITSTATUS(res->server_exit) : 128 + WTERMSIG(res->server_exit);
    }
    pthread_join(sp.drain, NULL);
    close(sp.err_fd);

    res->wall_s = wall;
    res->n_ok = atomic_load(&sh.n_ok);
    res->n_bad_ok = atomic_load(&sh.n_bad_ok);
    res->n_status_other = atomic_load(&sh.n_other);
    res->n_wrong_tokens = atomic_load(&sh.n_wrong);
    res->n_io_errors = atomic_load(&sh.n_io);
    res->tokens = atomic_load(&sh.tokens);
    res->timed_out = atomic_load(&sh.timed_out);
    for (int i = 0; i < c->requests; i++) {
        const bool bad = c->bad_every > 0 && i % c->bad_every == c->bad_every - 1;
        res->n_malformed += bad;
        res->n_valid += !bad;
    }
    size_t nl = 0;
    double sum = 0;
    for (int i = 0; sh.lat && i < c->requests; i++)
        if (sh.lat[i] > 0) sh.lat[nl++] = sh.lat[i], sum += sh.lat[i];
    qsort(sh.lat, nl, sizeof *sh.lat, cmp_double);
    res->p50_ms = nl ? sh.lat[(nl - 1) / 2] : 0;
    res->p99_ms = nl ? sh.lat[(size_t)((double)(nl - 1) * 0.99)] : 0;
    res->mean_ms = nl ? sum / (double)nl : 0;
    res->req_per_s = (res->n_ok + res->n_bad_ok + res->n_status_other + res->n_wrong_tokens) / wall;
    res->tok_per_s = (double)res->tokens / wall;
    free(sh.lat);
    free(th);
    return true;
}

/* ---- --hostile: a combined attack while a legitimate client measures -------------------------------- */

/* A chat template that spends the whole render budget of CPU (seconds) on every chat
 * request: 7,000 x 7,000 empty loop turns. Written into a copy of the model's GGUF as
 * tokenizer.chat_template, where a downloaded model carries it. */
static const char hostile_template[] =
    "{%- for i in range(7000) -%}{%- for j in range(7000) -%}{%- endfor -%}{%- endfor -%}"
    "{%- for m in messages -%}{{ m.content }}{%- endfor -%}";

/* 20 levels of a_i ::= a_{i+1} a_{i+1} | [a-z]: the parse stacks double at every level. The
 * text ends in a comment "# %ld" that req_main numbers, so each request is a new grammar to
 * the server (no compiled-grammar cache hit: an attacker varies the text). */
static char *exp_grammar_request(void)
{
    sbuf g = {0};
    sbuf_adds(&g, "root ::= a0\n");
    for (int i = 0; i < 20; i++) sbuf_printf(&g, "a%d ::= a%d a%d | [a-z]\n", i, i + 1, i + 1);
    sbuf_adds(&g, "a20 ::= [a-z]\n# %ld\n");
    char *gt = sbuf_strdup(&g);
    sbuf_free(&g);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "prompt", "Once");
    cJSON_AddNumberToObject(o, "n_predict", 8);
    cJSON_AddStringToObject(o, "grammar", gt ? gt : "");
    free(gt);
    char *r = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return r;
}

/* Copy the GGUF at src to dst with tokenizer.chat_template replaced. */
static bool write_hostile_gguf(const char *src, const char *dst)
{
    sift_error err = {0};
    sift_gguf *g = sift_gguf_open(src, &err);
    if (!g) return false;
    sift__gguf_writer *w = sift__gguf_writer_new();
    bool ok = w != NULL;
    for (int64_t i = 0; ok && i < sift_gguf_n_kv(g); i++)
        ok = sift__gguf_writer_set_value(w, sift_gguf_key(g, i), sift_gguf_kv_value(g, i)) == SIFT_OK;
    ok = ok && sift__gguf_writer_set_str(w, "tokenizer.chat_template", hostile_template) == SIFT_OK;
    for (int64_t i = 0; ok && i < sift_gguf_n_tensors(g); i++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
        ok = sift__gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size, &err) == SIFT_OK;
    }
    ok = ok && sift__gguf_writer_write_file(w, dst, &err) == SIFT_OK;
    sift__gguf_writer_free(w);
    sift_gguf_close(g);
    return ok;
}

typedef struct hostile_sh {
    int port;
    atomic_bool stop;
    atomic_long n_slow_conns, n_chat, n_grammar, n_amp, n_amp_400;
} hostile_sh;

typedef struct slow_arg {
    hostile_sh *sh;
    uint32_t src; /* 127.0.0.x */
} slow_arg;

/* Slow uploads from one address: up to 20 connections, each sending its head and then one
 * body byte a second; a closed one is opened again. Bounded by sh->stop. */
static void *slow_main(void *arg)
{
    slow_arg *a = arg;
    hostile_sh *sh = a->sh;
    enum { K = 20 };
    int fds[K];
    for (int i = 0; i < K; i++) fds[i] = -1;
    static const char head[] = "POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                               "Content-Length: 100000\r\n\r\n{";
    while (!atomic_load(&sh->stop)) {
        for (int i = 0; i < K && !atomic_load(&sh->stop); i++) {
            if (fds[i] >= 0 && send(fds[i], " ", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) continue;
            if (fds[i] >= 0) close(fds[i]);
            conn c = {.fd = -1, .port = sh->port, .src = a->src};
            fds[i] = -1;
            if (conn_open(&c) != 0) continue;
            if (send(c.fd, head, sizeof head - 1, MSG_NOSIGNAL) != (ssize_t)sizeof head - 1) {
                close(c.fd);
                continue;
            }
            fds[i] = c.fd;
            atomic_fetch_add(&sh->n_slow_conns, 1);
        }
        for (int t = 0; t < 10 && !atomic_load(&sh->stop); t++) poll(NULL, 0, 100);
    }
    for (int i = 0; i < K; i++)
        if (fds[i] >= 0) close(fds[i]);
    return NULL;
}

typedef struct req_arg {
    hostile_sh *sh;
    const char *path, *body;
    bool numbered; /* body is a format with one %ld: the request's number */
    atomic_long *count, *count_400;
    int pause_ms;
} req_arg;

/* One request after another (a 10 s receive timeout each), until sh->stop. */
static void *req_main(void *arg)
{
    req_arg *a = arg;
    conn *c = calloc(1, sizeof *c);
    sbuf out = {0};
    while (c && !atomic_load(&a->sh->stop)) {
        c->fd = -1;
        c->port = a->sh->port;
        c->timeout_ms = 10000;
        int st = 0;
        const long k = atomic_fetch_add(a->count, 1);
        char *body = NULL;
        if (a->numbered) {
            const int len = snprintf(NULL, 0, a->body, k);
            if (len < 0 || !(body = malloc((size_t)len + 1))) break;
            snprintf(body, (size_t)len + 1, a->body, k);
        }
        const int r = http_do(c, "POST", a->path, body ? body : a->body, &st, &out);
        free(body);
        conn_close(c);
        if (r == 0 && st == 400 && a->count_400) atomic_fetch_add(a->count_400, 1);
        if (a->pause_ms) poll(NULL, 0, a->pause_ms);
    }
    sbuf_free(&out);
    free(c);
    return NULL;
}

/* The server's own time for a /completion answer: timings.prompt_ms + predicted_ms (ms, from
 * the slot's start to the last token), or -1. */
static double engine_ms(const sbuf *b)
{
    cJSON *j = cJSON_ParseWithLength(b->p ? b->p : "", b->n);
    const cJSON *t = cJSON_GetObjectItem(j, "timings");
    const cJSON *p = cJSON_GetObjectItem(t, "prompt_ms"), *g = cJSON_GetObjectItem(t, "predicted_ms");
    const double ms = cJSON_IsNumber(p) && cJSON_IsNumber(g) ? p->valuedouble + g->valuedouble : -1;
    cJSON_Delete(j);
    return ms;
}

/* The legitimate client: n requests one after another on a fresh connection each, for
 * `limit_s` seconds at most; their latencies (ms, -1 for a failure or no time left) into lat,
 * the engine's part of each (engine_ms) into eng. */
static void legit_run(int port, int n, int n_predict, double *lat, double *eng, double limit_s)
{
    conn *c = calloc(1, sizeof *c);
    sbuf out = {0};
    const double t_end = now_s() + limit_s;
    for (int i = 0; i < n; i++) lat[i] = -1;
    for (int i = 0; c && i < n && now_s() < t_end; i++) {
        char body[160];
        snprintf(body, sizeof body, "{\"prompt\": \"Once upon a time\", \"n_predict\": %d, \"ignore_eos\": true, \"seed\": %d}",
                 n_predict, i);
        c->fd = -1;
        c->port = port;
        c->timeout_ms = 10000;
        int st = 0;
        const double t0 = now_s();
        const int r = http_do(c, "POST", "/completion", body, &st, &out);
        lat[i] = r == 0 && st == 200 ? 1e3 * (now_s() - t0) : -1;
        eng[i] = r == 0 && st == 200 ? engine_ms(&out) : -1;
        conn_close(c);
        poll(NULL, 0, 20);
    }
    sbuf_free(&out);
    free(c);
}

static double pct(const double *v, int n, double q)
{
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return 0;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    const double r = s[(int)(q * (n - 1) + 0.5)];
    free(s);
    return r;
}

static int hostile_main(lt_cfg *c, int n_legit, const char *attacks)
{
    char path[128];
    snprintf(path, sizeof path, "/tmp/sift-hostile-%d.gguf", (int)getpid());
    if (!write_hostile_gguf(c->model, path)) {
        fprintf(stderr, "sift bench --server --hostile: cannot write %s from %s\n", path, c->model);
        return 1;
    }
    lt_cfg hc = *c;
    hc.model = path;
    hc.clients = 8;
    hc.ctx_per_slot = 4096; /* room for the amplification request's 4,000 tokens, as in issue 26 */
    hc.extra[0] = "--header-timeout";
    hc.extra[1] = "10";
    server_proc sp;
    if (!server_start(&hc, 4, &sp)) {
        unlink(path);
        return 1;
    }
    hostile_sh sh = {.port = sp.port};
    double *idle = calloc((size_t)n_legit, sizeof *idle), *att = calloc((size_t)n_legit, sizeof *att);
    double *eng = calloc((size_t)n_legit, sizeof *eng);
    if (!idle || !att || !eng) return 1;
    legit_run(sp.port, n_legit, c->n_predict, idle, eng, 120); /* the idle figures first */
    fprintf(stderr, "sift bench --server --hostile: idle run done; attacking\n");

    char *grammar_body = exp_grammar_request();
    static const char amp_body[] = "{\"prompt\": \"Once upon a time\", \"n_predict\": 4000, \"ignore_eos\": true, \"n_probs\": 100, "
                                   "\"trace\": true, \"trace_top\": 64}";
    static const char chat_body[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 4}";
    pthread_t th[32];
    int n_th = 0;
    slow_arg sa[16];
    for (int i = 0; i < 16 && strstr(attacks, "slow"); i++) {
        sa[i] = (slow_arg){.sh = &sh, .src = 0x7f000002u + (uint32_t)i}; /* 127.0.0.2 .. 127.0.0.17 */
        pthread_create(&th[n_th++], NULL, slow_main, &sa[i]);
    }
    req_arg ra[] = {
        {.sh = &sh, .path = "/v1/chat/completions", .body = chat_body, .count = &sh.n_chat},
        {.sh = &sh, .path = "/v1/chat/completions", .body = chat_body, .count = &sh.n_chat},
        {.sh = &sh, .path = "/completion", .body = grammar_body, .numbered = true, .count = &sh.n_grammar},
        {.sh = &sh, .path = "/completion", .body = amp_body, .count = &sh.n_amp, .count_400 = &sh.n_amp_400, .pause_ms = 20},
        {.sh = &sh, .path = "/completion", .body = amp_body, .count = &sh.n_amp, .count_400 = &sh.n_amp_400, .pause_ms = 20},
    };
    static const char *const ra_kind[] = {"template", "template", "grammar", "amp", "amp"};
    for (size_t i = 0; i < sizeof ra / sizeof *ra; i++)
        if (strstr(attacks, ra_kind[i])) pthread_create(&th[n_th++], NULL, req_main, &ra[i]);
    poll(NULL, 0, 3000); /* the attack in full swing: the slow uploads past the rate grace */
    const double t_att = now_s();
    legit_run(sp.port, n_legit, c->n_predict, att, eng, 120);
    const double att_s = now_s() - t_att;
    fprintf(stderr, "sift bench --server --hostile: measured under attack; stopping the attack\n");
    atomic_store(&sh.stop, true);
    for (int i = 0; i < n_th; i++) pthread_join(th[i], NULL);

    conn mc = {.fd = -1, .port = sp.port};
    sbuf m = {0};
    int st = 0;
    double slow_closed = -1, evicted = -1;
    if (http_do(&mc, "GET", "/metrics", "", &st, &m) == 0 && st == 200 && m.p) {
        const char *x = strstr(m.p, "phase=\"slow_body\"} ");
        if (x) slow_closed = atof(x + 19);
        x = strstr(m.p, "\nsift_connections_evicted_total ");
        if (x) evicted = atof(x + 32);
    }
    conn_close(&mc);
    sbuf_free(&m);
    const bool alive = waitpid(sp.pid, &st, WNOHANG) == 0;
    const double t_sig = now_s();
    int exit_st = -1;
    if (alive) {
        kill(sp.pid, SIGTERM);
        waitpid(sp.pid, &st, 0);
        exit_st = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    const double exit_s = now_s() - t_sig;
    pthread_join(sp.drain, NULL);
    close(sp.err_fd);
    unlink(path);

    int n_idle_ok = 0, n_ok = 0, n_within = 0;
    double idle_ok[1024], att_ok[1024];
    for (int i = 0; i < n_legit; i++) {
        if (idle[i] >= 0) idle_ok[n_idle_ok++] = idle[i];
        if (att[i] >= 0) att_ok[n_ok++] = att[i];
    }
    const double idle_p50 = n_idle_ok ? pct(idle_ok, n_idle_ok, 0.5) : 0, idle_p99 = n_idle_ok ? pct(idle_ok, n_idle_ok, 0.99) : 0;
    for (int i = 0; i < n_ok; i++) n_within += att_ok[i] <= 3 * idle_p50;
    const double share = 100.0 * n_within / n_legit;
    /* where the late answers' time went: in the engine (a slot's prompt and tokens), or
     * outside it (HTTP, the queue, the scheduler) */
    double late_eng[1024], late_rest[1024];
    int n_late = 0;
    for (int i = 0; i < n_legit; i++)
        if (att[i] > 3 * idle_p50 && eng[i] >= 0) late_eng[n_late] = eng[i], late_rest[n_late++] = att[i] - eng[i];
    printf("sift bench --server --hostile: %s with a slow chat template, -np 4; attacks %s\n"
           "attack: slow uploads from 16 addresses (127.0.0.2-17, %ld connections opened), %ld chat renders of the template, "
           "%ld exponential-grammar requests, %ld amplification requests (%ld answered 400)\n"
           "server: %.0f slow bodies closed (--min-body-rate), %.0f connections given up for new ones\n"
           "legitimate client (%d requests of %d tokens): idle p50 %.1f ms, p99 %.1f ms; under attack %d answered, p50 %.1f ms, "
           "p99 %.1f ms (%.1f s)\n"
           "answered within 3x the idle p50 (%.1f ms): %d/%d = %.1f%% (target >= 95%%)\n"
           "the %d answered later: in the engine p50 %.1f ms, max %.1f ms; outside it (HTTP, queue, scheduling) p50 %.1f ms, max %.1f ms\n"
           "server alive after the attack: %s; exit %d %.2f s after SIGTERM\n",
           c->model, attacks, atomic_load(&sh.n_slow_conns), atomic_load(&sh.n_chat), atomic_load(&sh.n_grammar), atomic_load(&sh.n_amp),
           atomic_load(&sh.n_amp_400), slow_closed, evicted, n_legit, c->n_predict, idle_p50, idle_p99, n_ok,
           n_ok ? pct(att_ok, n_ok, 0.5) : 0, n_ok ? pct(att_ok, n_ok, 0.99) : 0, att_s, 3 * idle_p50, n_within, n_legit, share, n_late,
           n_late ? pct(late_eng, n_late, 0.5) : 0, n_late ? pct(late_eng, n_late, 1) : 0, n_late ? pct(late_rest, n_late, 0.5) : 0,
           n_late ? pct(late_rest, n_late, 1) : 0,
           alive ? "yes" : "NO", exit_st, exit_s);
    free(grammar_body);
    free(idle);
    free(att);
    free(eng);
    const bool pass = alive && exit_st == 0 && share >= 95.0;
    printf("%s\n", pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
}

static bool run_passed(const lt_cfg *c, const lt_result *r)
{
    return !r->crashed && !r->timed_out && r->server_exit == 0 && r->n_ok == r->n_valid && r->n_bad_ok == r->n_malformed &&
           r->n_status_other == 0 && r->n_wrong_tokens == 0 && r->n_io_errors == 0 && r->rss_peak_mb <= c->rss_limit_mb;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sift bench --server -m MODEL.gguf [options]\n"
            "  --clients N        concurrent clients (default 64)\n"
            "  --requests N       requests per run (default 2000)\n"
            "  --bad-every N      every N-th request is malformed (default 10 = 10%%; 0 = none)\n"
            "  --n-predict N      tokens per valid request (default 32)\n"
            "  --np LIST          slot counts to compare, e.g. 1,8 (default 1,8)\n"
            "  --reps N           run the list N times in turn; the gain is the median ratio (default 1)\n"
            "  --ctx-per-slot N   KV cells per slot (default 256)\n"
            "  --threads N        the server's -t (default: its own default)\n"
            "  --time-limit S     seconds one run may take (default 300)\n"
            "  --rss-limit-mb N   the server's RSS must stay below (default 1024)\n"
            "  --json             one JSON object per run instead of the table\n"
            "  --hostile          instead: a combined attack (slow uploads from 16 loopback addresses, a slow chat\n"
            "                     template in a copy of the GGUF, an exponential grammar, amplification requests)\n"
            "                     while one legitimate client sends --requests requests (use e.g. 60); passes when\n"
            "                     >= 95%% of them are answered within 3x their idle p50 latency\n"
            "  --attacks LIST     with --hostile: which (default slow,template,grammar,amp)\n");
}

int sift_bench_server(int argc, char **argv)
{
    bool hostile = false;
    const char *attacks = "slow,template,grammar,amp";
    lt_cfg c = {.clients = 64, .requests = 2000, .bad_every = 10, .n_predict = 32, .ctx_per_slot = 256, .np = {1, 8}, .n_np = 2,
                .reps = 1, .time_limit_s = 300, .rss_limit_mb = 1024};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define IS(x) (!strcmp(a, x))
        if (IS("-h") || IS("--help")) {
            usage(stdout);
            return 0;
        } else if (IS("--json")) {
            c.json = true;
        } else if (IS("--hostile")) {
            hostile = true;
        } else if (IS("--attacks") && v) {
            attacks = argv[++i];
        } else if (!v) {
            fprintf(stderr, "sift bench --server: %s: missing value (or unknown option)\n", a);
            return 2;
        } else if (IS("-m") || IS("--model")) {
            c.model = argv[++i];
        } else if (IS("--clients")) {
            c.clients = atoi(argv[++i]);
        } else if (IS("--requests")) {
            c.requests = atoi(argv[++i]);
        } else if (IS("--bad-every")) {
            c.bad_every = atoi(argv[++i]);
        } else if (IS("--n-predict")) {
            c.n_predict = atoi(argv[++i]);
        } else if (IS("--ctx-per-slot")) {
            c.ctx_per_slot = atoi(argv[++i]);
        } else if (IS("--reps")) {
            c.reps = atoi(argv[++i]);
        } else if (IS("--threads")) {
            c.threads = atoi(argv[++i]);
        } else if (IS("--time-limit")) {
            c.time_limit_s = atof(argv[++i]);
        } else if (IS("--rss-limit-mb")) {
            c.rss_limit_mb = atof(argv[++i]);
        } else if (IS("--np")) {
            c.n_np = 0;
            for (char *p = argv[++i]; *p && c.n_np < 8;) {
                c.np[c.n_np++] = (int)strtol(p, &p, 10);
                if (*p == ',') p++;
                else if (*p) break;
            }
        } else {
            fprintf(stderr, "sift bench --server: unknown option %s\n", a);
            return 2;
        }
#undef IS
    }
    if (!c.model || c.clients < 1 || c.requests < 1 || c.n_predict < 1 || c.n_np < 1 || c.ctx_per_slot < c.n_predict + 64 ||
        c.reps < 1 || c.reps > 16) {
        usage(stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (hostile) return hostile_main(&c, c.requests < 1000 ? c.requests : 1000, attacks);
    lt_result res[8 * 16];
    bool all_ok = true;
    int n_pass = 0;
    if (!c.json)
        printf("sift bench --server: %s, %d clients, %d requests per run (%d%% malformed), %d tokens per valid request\n\n"
               "%4s %9s %10s %10s %9s %9s %7s %7s %7s %7s %7s %9s %5s  %s\n",
               c.model, c.clients, c.requests, c.bad_every ? 100 / c.bad_every : 0, c.n_predict, "np", "wall s", "requests/s",
               "tokens/s", "p50 ms", "p99 ms", "200 ok", "400 ok", "other", "wrongN", "io err", "RSS MB", "exit", "result");
    const int n_runs = c.n_np * c.reps;
    for (int k = 0; k < n_runs; k++) {
        if (!run_one(&c, c.np[k % c.n_np], &res[k])) {
            fprintf(stderr, "sift bench --server: could not start the server (np %d)\n", c.np[k % c.n_np]);
            return 1;
        }
        const lt_result *r = &res[k];
        const bool ok = run_passed(&c, r);
        all_ok &= ok;
        n_pass += ok;
        if (c.json) {
            printf("{\"np\": %d, \"clients\": %d, \"requests\": %d, \"malformed\": %ld, \"n_predict\": %d, \"wall_s\": %.3f, "
                   "\"requests_per_s\": %.1f, \"tokens_per_s\": %.1f, \"p50_ms\": %.2f, \"p99_ms\": %.2f, \"mean_ms\": %.2f, "
                   "\"ok_200\": %ld, \"ok_400\": %ld, \"other_status\": %ld, \"wrong_token_count\": %ld, \"io_errors\": %ld, "
                   "\"rss_peak_mb\": %.1f, \"sampling_us_per_token\": %.3f, \"server_exit\": %d, \"crashed\": %s, "
                   "\"timed_out\": %s, \"passed\": %s}\n",
                   r->np, c.clients, c.requests, r->n_malformed, c.n_predict, r->wall_s, r->req_per_s, r->tok_per_s, r->p50_ms,
                   r->p99_ms, r->mean_ms, r->n_ok, r->n_bad_ok, r->n_status_other, r->n_wrong_tokens, r->n_io_errors,
                   r->rss_peak_mb, r->sampling_us, r->server_exit, r->crashed ? "true" : "false", r->timed_out ? "true" : "false",
                   ok ? "true" : "false");
        } else {
            printf("%4d %9.2f %10.1f %10.1f %9.2f %9.2f %7ld %7ld %7ld %7ld %7ld %9.1f %5d  %s%s%s\n", r->np, r->wall_s, r->req_per_s,
                   r->tok_per_s, r->p50_ms, r->p99_ms, r->n_ok, r->n_bad_ok, r->n_status_other, r->n_wrong_tokens,
                   r->n_io_errors, r->rss_peak_mb, r->server_exit, ok ? "PASS" : "FAIL", r->crashed ? " (crashed)" : "",
                   r->timed_out ? " (time limit)" : "");
            printf("     engine: %.2f busy slots per decode; decode %.2f s (%.1f us/token), sampling + publishing %.2f s "
                   "(%.1f us/token), of which the sampling call %.2f us/token\n",
                   r->busy_per_decode, r->eng_decode_s, r->tokens ? 1e6 * r->eng_decode_s / (double)r->tokens : 0, r->eng_sample_s,
                   r->tokens ? 1e6 * r->eng_sample_s / (double)r->tokens : 0, r->sampling_us);
        }
        fflush(stdout);
    }
    if (!c.json && c.n_np > 1) {
        int lo = 0, hi = 0;
        for (int k = 1; k < c.n_np; k++) {
            if (res[k].np < res[lo].np) lo = k;
            if (res[k].np > res[hi].np) hi = k;
        }
        /* per rep: the ratio of two runs made back to back; then the median */
        double g[16], p_hi[16], p_lo[16];
        for (int r = 0; r < c.reps; r++) {
            const lt_result *a = &res[r * c.n_np + lo], *b = &res[r * c.n_np + hi];
            g[r] = a->tok_per_s > 0 ? b->tok_per_s / a->tok_per_s : 0;
            p_hi[r] = b->p50_ms, p_lo[r] = a->p50_ms;
        }
        qsort(g, (size_t)c.reps, sizeof *g, cmp_double);
        qsort(p_hi, (size_t)c.reps, sizeof *p_hi, cmp_double);
        qsort(p_lo, (size_t)c.reps, sizeof *p_lo, cmp_double);
        const int m0 = (c.reps - 1) / 2, m1 = c.reps / 2;
#define MED(v) (0.5 * ((v)[m0] + (v)[m1]))
        if (c.reps == 1)
            printf("\nbatching gain: tokens/s with -np %d / -np %d = %.2fx (p50 latency %.1f ms vs %.1f ms)\n", res[hi].np,
                   res[lo].np, g[0], p_hi[0], p_lo[0]);
        else
            printf("\nbatching gain: tokens/s with -np %d / -np %d = %.2fx, median of %d reps (%.2fx .. %.2fx); "
                   "median p50 latency %.1f ms vs %.1f ms\n",
                   res[hi].np, res[lo].np, MED(g), c.reps, g[0], g[c.reps - 1], MED(p_hi), MED(p_lo));
#undef MED
    }
    if (!c.json) printf("%d passed, %d failed\n", n_pass, n_runs - n_pass);
    return all_ok ? 0 : 1;
}
