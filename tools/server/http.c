/*
 * http.c - the HTTP side of `sift serve`, on GNU libmicrohttpd.
 *
 * Threading: libmicrohttpd runs one thread per connection (MHD_USE_THREAD_PER_CONNECTION).
 * That suits an LLM server, where a request lives for seconds and the number of live
 * connections is bounded (--max-connections): a connection's thread parses the request,
 * builds the sampler chain, submits the task to the engine and then simply blocks until
 * the task has output, either inside the access handler (non-streaming) or inside the
 * content-reader callback of a chunked response (SSE streaming). No event loop, no
 * suspend/resume.
 *
 * Client disconnects: while it waits for the engine, a connection thread wakes every
 * 50 ms and polls its socket for POLLRDHUP/POLLHUP; a client that went away cancels the
 * task, and the engine frees the slot at its next step (within one decode). A failed write
 * ends the response the same way (the reader's free callback cancels the task).
 *
 * Limits: a body larger than --max-body is refused with 413 (at once when Content-Length
 * says so, else when the upload passes the limit; the rest is read and dropped, never
 * stored); a full queue gives 503 with Retry-After; idle connections are closed after
 * --timeout seconds.
 *
 * Exposure: the server accepts connections itself (an acceptor thread hands each to
 * libmicrohttpd with MHD_add_connection) so that conns.c decides first: a cap per client
 * address, idle connections given up for new ones, and deadlines for a request's head and
 * body that a client trickling bytes cannot stretch (the acceptor's poll wakes every 200 ms
 * to enforce them). A connection refused there gets a readable 503: the answer, then the
 * write side shut and what the client still sends read and dropped for a moment (closing a
 * socket with unread input sends a reset, which can destroy the answer before the client
 * reads it). --api-key: every endpoint but /health and the page wants the key, as
 * `Authorization: Bearer KEY` or `X-Api-Key: KEY` (401 otherwise, checked on the headers,
 * before the body is read).
 *
 * Browsers (checked on the headers of every request, every method, before the key): the
 * Host header must name this server: a loopback name (localhost, *.localhost), an IP
 * literal, the --host name, or one of --allowed-hosts (else 403). That stops DNS
 * rebinding, where a web page's own name is made to resolve to 127.0.0.1: its requests
 * then carry its Origin AND its Host, so comparing the two proves nothing, but its Host is
 * a name this server does not answer to. An IP literal cannot be rebound, so any is
 * accepted (a LAN client of --host 0.0.0.0 uses one). CORS: no Access-Control-* headers
 * unless --cors-origin names the request's Origin (or is `*`), and a request from a
 * foreign Origin (not the Host it was sent to) is refused with 403, GETs such as /props
 * and /slots too: without that a web page could still make the server generate (a
 * "simple" cross-origin POST runs, only its answer is hidden).
 *
 * Framing: two Content-Length headers that differ, or Content-Length beside
 * Transfer-Encoding, get 400 (a proxy in front may frame the request the other way: the
 * request smuggling shape); a query string longer than SRV_MAX_QUERY bytes or with more
 * than SRV_MAX_QUERY_ARGS arguments gets 414 (cut before libmicrohttpd parses it, which at
 * 500 arguments runs out of its connection memory and closes without an answer).
 *
 * Budgets (server-wide): --max-body-in-flight caps the body bytes all uploads buffer
 * together (a request's Content-Length is reserved on its headers; past the budget, 503
 * with Retry-After); --max-probs-bytes caps the n_probs and trace output of the requests
 * in flight, estimated as SRV_PROBS_ENTRY_BYTES per top-candidate entry of the worst case
 * (a request alone over it: 400 naming the fields; together with the others: 503).
 * Draining (SIGTERM): new work and /health get 503 with Connection: close, running
 * requests finish (srv_http_drain).
 *
 * Routes (GET): / (the playground), /health, /v1/health, /props, /slots, /metrics,
 * /v1/models, /models. (POST): /completion, /completions, /v1/completions,
 * /v1/chat/completions, /chat/completions, /tokenize, /detokenize, /apply-template,
 * /infill (infill.c), /embedding, /embeddings, /v1/embeddings (embeddings.c), /v1/messages and
 * /v1/messages/count_tokens (Anthropic's API, anthropic.c: its answers, errors included, in
 * Anthropic's shapes), /v1/responses and /responses (OpenAI's Responses API, responses.c).
 * In router mode (router.c) the page and /health stay here; every other route, after the same
 * checks on the headers, is srv_router_route's.
 */
#ifdef SIFT_HAVE_MHD

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/router.h"
#include "server/server.h"

struct srv_http {
    struct MHD_Daemon *d;
    srv_server *s;
    srv_conns *conns;
    int lfd;                 /* the listening socket (ours, not MHD's) */
    int wake[2];             /* a pipe: wakes the acceptor to stop */
    pthread_t acceptor;
    bool acceptor_started;
    atomic_bool stop;
};

/* Per-request state (MHD's con_cls, made by on_uri when the request line is in): the body
 * being uploaded. */
typedef struct conn_req {
    sbuf body;
    bool too_big;
    bool headers_done;       /* on_request saw the headers */
    bool uri_too_long;       /* the query string was over SRV_MAX_QUERY / SRV_MAX_QUERY_ARGS (cut) */
    bool body_busy;          /* a chunked body went over --max-body-in-flight */
    long long body_reserved; /* bytes reserved against --max-body-in-flight */
    double t0;
} conn_req;

/* ---- responses ------------------------------------------------------------------------------- */

/* The status of the response this connection's thread queued last (one thread per
 * connection: a thread-local is the connection's), for the request log. */
static _Thread_local int last_status;
/* The request on this connection's thread is on Anthropic's paths: errors in its shape. */
static _Thread_local bool anth_errors;

static void count_status(srv_server *s, int status)
{
    srv_http_stats *h = &s->http;
    last_status = status;
    atomic_fetch_add(&h->n_requests, 1);
    if (status < 300) atomic_fetch_add(&h->n_2xx, 1);
    else if (status == 400) atomic_fetch_add(&h->n_400, 1);
    else if (status == 401 || status == 403) atomic_fetch_add(&h->n_401_403, 1);
    else if (status == 404 || status == 405) atomic_fetch_add(&h->n_404, 1);
    else if (status == 413) atomic_fetch_add(&h->n_413, 1);
    else if (status == 503 || status == 429) atomic_fetch_add(&h->n_429_503, 1);
    else if (status >= 500) atomic_fetch_add(&h->n_5xx, 1);
}

static void log_request(srv_server *s, const char *method, const char *url, int status, const conn_req *r)
{
    if (!s->cfg.log_requests) return;
    fprintf(stderr, "sift serve: %s %s -> %d (%.1f ms)\n", method, url, status, r ? srv_now_ms() - r->t0 : 0.0);
}

/* ---- CORS and API keys ------------------------------------------------------------------------ */

/* The request's Origin when --cors-origin allows it ("*" allows any), else NULL. */
static const char *cors_allowed(const srv_server *s, struct MHD_Connection *c)
{
    const srv_config *cfg = &s->cfg;
    if (!cfg->n_cors_origins) return NULL;
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    for (int i = 0; i < cfg->n_cors_origins; i++) {
        if (!strcmp(cfg->cors_origins[i], "*")) return "*";
        if (origin && !strcmp(cfg->cors_origins[i], origin)) return origin;
    }
    return NULL;
}

/* Whether an Origin header names another site than the one the request was sent to (the
 * Host header): the playground's own requests are same-origin and pass. */
static bool foreign_origin(const srv_server *s, struct MHD_Connection *c)
{
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!origin) return false; /* not a browser, or a same-origin GET */
    if (cors_allowed(s, c)) return false;
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    const char *rest = !strncmp(origin, "http://", 7) ? origin + 7 : !strncmp(origin, "https://", 8) ? origin + 8 : NULL;
    return !(host && rest && !strcasecmp(rest, host));
}

/* The name of a Host header value (lower-cased into out, port and brackets dropped, a
 * trailing dot too); false when it is not a plausible name. */
static bool host_name(const char *host, char *out, size_t cap)
{
    const char *a = host, *z;
    if (*a == '[') { /* [v6]:port */
        z = strchr(++a, ']');
        if (!z) return false;
    } else {
        z = strchr(a, ':');
        if (!z) z = a + strlen(a);
    }
    size_t n = (size_t)(z - a);
    if (n && a[n - 1] == '.') n--;
    if (!n || n >= cap) return false;
    for (size_t i = 0; i < n; i++) out[i] = (char)tolower((unsigned char)a[i]);
    out[n] = 0;
    return true;
}

/* Whether name ends with the label suffix (".localhost" matches "a.localhost"). */
static bool ends_with(const char *name, const char *suffix)
{
    const size_t n = strlen(name), k = strlen(suffix);
    return n > k && !strcmp(name + n - k, suffix);
}

/* Whether the Host header names this server (the DNS-rebinding check; the file's top says
 * why): no Host (HTTP/1.0, not a browser), a loopback name, an IP literal, --host, or one of
 * --allowed-hosts (a name, ".example.com" for the domain and its subdomains, or "*"). */
static bool host_allowed(const srv_server *s, struct MHD_Connection *c)
{
    const srv_config *cfg = &s->cfg;
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (!host) return true;
    char name[256];
    if (!host_name(host, name, sizeof name)) return false;
    unsigned char ip[16];
    if (inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1) return true;
    if (!strcmp(name, "localhost") || ends_with(name, ".localhost")) return true;
    if (cfg->host && !strcasecmp(cfg->host, name)) return true;
    for (int i = 0; i < cfg->n_allowed_hosts; i++) {
        const char *h = cfg->allowed_hosts[i];
        if (!strcmp(h, "*") || !strcasecmp(h, name)) return true;
        if (h[0] == '.' && (!strcasecmp(h + 1, name) || ends_with(name, h))) return true;
    }
    return false;
}

/* Equal strings, in time that depends on the lengths only (a key is not guessed byte by byte
 * from response times). */
static bool same_secret(const char *a, const char *b)
{
    const size_t na = strlen(a), nb = strlen(b);
    unsigned char d = na != nb;
    for (size_t i = 0; i < na; i++) d |= (unsigned char)(a[i] ^ b[i % (nb ? nb : 1)]);
    return d == 0;
}

static bool key_ok(const srv_server *s, struct MHD_Connection *c)
{
    const srv_config *cfg = &s->cfg;
    if (!cfg->n_api_keys) return true;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *key = NULL;
    if (auth && !strncasecmp(auth, "Bearer ", 7)) {
        key = auth + 7;
        while (*key == ' ') key++;
    } else {
        key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
    }
    bool ok = false;
    for (int i = 0; key && i < cfg->n_api_keys; i++) ok |= same_secret(key, cfg->api_keys[i]);
    return ok;
}

/* /health, the model list and the page are open, as in llama-server (a balancer's health
 * check carries no key; a client lists the models before it is configured). */
static bool open_path(const char *url)
{
    return !strcmp(url, "/health") || !strcmp(url, "/v1/health") || !strcmp(url, "/") || !strcmp(url, "/index.html") ||
           !strcmp(url, "/models") || !strcmp(url, "/v1/models");
}

static void common_headers(struct MHD_Response *resp, struct MHD_Connection *c, srv_server *s, const char *ctype)
{
    MHD_add_response_header(resp, "Content-Type", ctype);
    const char *allow = cors_allowed(s, c);
    if (allow) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", allow);
        if (strcmp(allow, "*")) MHD_add_response_header(resp, "Vary", "Origin");
    }
    MHD_add_response_header(resp, "Server", "sift/" SIFT_VERSION_STRING);
    if (atomic_load(&s->draining)) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
}

/* Queue body (malloc'd, taken) with a status. */
static enum MHD_Result reply(struct MHD_Connection *c, srv_server *s, int status, const char *ctype, char *body,
                             const char *retry_after)
{
    if (!body) {
        status = 500;
        body = strdup("{\"error\":{\"code\":500,\"message\":\"out of memory\",\"type\":\"server_error\"}}");
        if (!body) return MHD_NO;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    common_headers(resp, c, s, ctype);
    if (status == 401) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (retry_after) MHD_add_response_header(resp, "Retry-After", retry_after);
    const enum MHD_Result r = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    count_status(s, status);
    return r;
}

static enum MHD_Result reply_json(struct MHD_Connection *c, srv_server *s, int status, char *json)
{
    return reply(c, s, status, "application/json; charset=utf-8", json, NULL);
}

static enum MHD_Result reply_error(struct MHD_Connection *c, srv_server *s, const srv_error *e)
{
    return reply(c, s, e->status, "application/json; charset=utf-8", anth_errors ? srv_anth_json_error(e) : srv_json_error(e),
                 e->status == 503 ? "1" : NULL);
}

/* For router.c (router.h): the same replies, and a response it made, with the common headers. */
int srv_http_reply(struct MHD_Connection *c, srv_server *s, int status, const char *ctype, char *body)
{
    return reply(c, s, status, ctype, body, NULL);
}

int srv_http_reply_error(struct MHD_Connection *c, srv_server *s, const srv_error *e) { return reply_error(c, s, e); }

int srv_http_queue(struct MHD_Connection *c, srv_server *s, int status, const char *ctype, struct MHD_Response *resp)
{
    common_headers(resp, c, s, ctype);
    const enum MHD_Result r = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    count_status(s, status);
    return r;
}

/* Reserve n bytes against budget `cap` in *used; false (nothing reserved) when over it. */
static bool budget_take(atomic_llong *used, long long n, long long cap)
{
    long long cur = atomic_load(used);
    do {
        if (cur + n > cap) return false;
    } while (!atomic_compare_exchange_weak(used, &cur, cur + n));
    return true;
}

/* ---- waiting for the engine ----------------------------------------------------------------------- */

static int conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

int srv_http_conn_fd(struct MHD_Connection *c) { return conn_fd(c); }

/* Whether the peer closed (or reset) the connection (server.h). */
bool srv_client_gone(int fd)
{
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* Block until the task has more than `have` records or is done. False when the client
 * went away meanwhile. */
static bool wait_task(srv_task *t, int fd, size_t have)
{
    pthread_mutex_lock(&t->mu);
    while (!t->done && t->n_recs + t->n_prog <= have) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        if (!t->done && t->n_recs + t->n_prog <= have && srv_client_gone(fd)) {
            pthread_mutex_unlock(&t->mu);
            return false;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return true;
}

/* ---- SSE streaming ------------------------------------------------------------------------------- */

/* One task of a streamed request: what of it went out already. */
typedef struct stream_part {
    srv_task *t;
    size_t recs_sent, text_sent, prog_sent;
    bool final_done, role_sent;
    srv_anth_stream *anth;     /* /v1/messages: the OpenAI chunks converted to Anthropic's events */
    srv_resp_stream *resp;     /* /v1/responses: the chat chunks converted to the Responses events */
} stream_part;

/* A streamed request: one task, or several (n > 1, several prompts) whose events
 * interleave, each carrying its index. */
typedef struct stream_st {
    srv_server *s;
    stream_part *parts;
    srv_task **g;              /* the tasks, in index order (for the closing usage) */
    int n, n_final;
    int fd;
    sbuf out;
    size_t out_off;
    bool final_done;           /* every part closed (or an error ended the stream) */
    long long probs_reserved;  /* --max-probs-bytes held until the stream ends */
} stream_st;

/* Copy the records [p->recs_sent, n_recs) of one part and what they point into (under the
 * task lock), format them as SSE events into st->out. */
static void stream_format(stream_st *st, stream_part *p)
{
    srv_task *t = p->t;
    sbuf *dst = p->anth ? srv_anth_stream_input(p->anth) : p->resp ? srv_resp_stream_input(p->resp) : &st->out;
    srv_snapshot sn = {0};
    bool done, oom = false;
    srv_progress prog[8];
    size_t n_prog = 0;
    pthread_mutex_lock(&t->mu);
    done = t->done;
    while (p->prog_sent + n_prog < t->n_prog && n_prog < sizeof prog / sizeof *prog) /* (the rest next time) */
        prog[n_prog] = t->prog[p->prog_sent + n_prog], n_prog++;
    if (p->prog_sent + n_prog < t->n_prog) done = false;
    const size_t n = t->n_recs;
    if (n > p->recs_sent) {
        const srv_tokrec *first = &t->recs[p->recs_sent];
        sn.n_recs = n - p->recs_sent;
        sn.rec_from = p->recs_sent;
        sn.text_from = p->text_sent;
        sn.text_to = t->recs[n - 1].text_end;
        sn.probs_from = first->probs_off;
        sn.stages_from = first->trace_off;
        sn.tops_from = sn.stages_from < t->n_stages ? t->stages[sn.stages_from].top_off : t->n_tops;
        sn.recs = malloc(sn.n_recs * sizeof *sn.recs);
        sn.text = malloc(sn.text_to - sn.text_from + 1);
        sn.probs = malloc((t->n_probs - sn.probs_from + 1) * sizeof *sn.probs);
        sn.stages = malloc((t->n_stages - sn.stages_from + 1) * sizeof *sn.stages);
        sn.tops = malloc((t->n_tops - sn.tops_from + 1) * sizeof *sn.tops);
        oom = !sn.recs || !sn.text || !sn.probs || !sn.stages || !sn.tops;
        if (!oom) {
            /* (arrays never grown are NULL: copy only what exists) */
            memcpy(sn.recs, first, sn.n_recs * sizeof *sn.recs);
            if (sn.text_to > sn.text_from) memcpy(sn.text, t->text.p + sn.text_from, sn.text_to - sn.text_from);
            if (t->n_probs > sn.probs_from)
                memcpy(sn.probs, t->probs + sn.probs_from, (t->n_probs - sn.probs_from) * sizeof *sn.probs);
            if (t->n_stages > sn.stages_from)
                memcpy(sn.stages, t->stages + sn.stages_from, (t->n_stages - sn.stages_from) * sizeof *sn.stages);
            if (t->n_tops > sn.tops_from) memcpy(sn.tops, t->tops + sn.tops_from, (t->n_tops - sn.tops_from) * sizeof *sn.tops);
        }
    }
    pthread_mutex_unlock(&t->mu);
    if (oom) {
        srv_error e;
        srv_errorf(&e, 500, "out of memory while streaming");
        srv_sse_error(&e, dst);
        st->final_done = true;
    } else {
        for (size_t i = 0; i < n_prog; i++) srv_sse_progress(st->s, t, &prog[i], &st->out);
        p->prog_sent += n_prog;
        if (sn.n_recs) {
            srv_sse_tokens(st->s, t, &sn, &p->role_sent, dst);
            p->recs_sent += sn.n_recs;
            p->text_sent = sn.text_to;
        }
        if (done) { /* every record is in once done is seen under the lock */
            srv_sse_final_group(st->s, t, &p->role_sent, st->g, st->n, st->n_final + 1 == st->n, dst);
            p->final_done = true;
            if (++st->n_final == st->n) st->final_done = true;
        }
    }
    if (p->anth) srv_anth_sse(st->s, p->anth, t, &st->out);
    if (p->resp) srv_resp_sse(st->s, p->resp, t, &st->out);
    free(sn.recs);
    free(sn.text);
    free(sn.probs);
    free(sn.stages);
    free(sn.tops);
}

static bool part_ready(const stream_part *p)
{
    pthread_mutex_lock(&p->t->mu);
    const bool r = p->t->done || p->t->n_recs > p->recs_sent || p->t->n_prog > p->prog_sent;
    pthread_mutex_unlock(&p->t->mu);
    return r;
}

/* Block until some open part has output. False when the client went away meanwhile. */
static bool wait_parts(stream_st *st)
{
    if (st->n == 1) return wait_task(st->parts[0].t, st->fd, st->parts[0].recs_sent + st->parts[0].prog_sent);
    for (;;) {
        stream_part *first = NULL;
        for (int i = 0; i < st->n; i++) {
            stream_part *p = &st->parts[i];
            if (p->final_done) continue;
            if (part_ready(p)) return true;
            if (!first) first = p;
        }
        if (!first) return true;
        /* several tasks, one condition variable each: wait on one briefly, then look again */
        srv_task *t = first->t;
        pthread_mutex_lock(&t->mu);
        if (!t->done && t->n_recs <= first->recs_sent && t->n_prog <= first->prog_sent) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 10 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        }
        pthread_mutex_unlock(&t->mu);
        if (srv_client_gone(st->fd)) return false;
    }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream_st *st = cls;
    for (;;) {
        if (st->out_off < st->out.n) {
            size_t k = st->out.n - st->out_off;
            if (k > max) k = max;
            memcpy(buf, st->out.p + st->out_off, k);
            st->out_off += k;
            return (ssize_t)k;
        }
        st->out.n = st->out_off = 0;
        if (st->final_done) return MHD_CONTENT_READER_END_OF_STREAM;
        if (!wait_parts(st)) return MHD_CONTENT_READER_END_WITH_ERROR; /* cancelled in stream_free */
        for (int i = 0; i < st->n && !st->final_done; i++)
            if (!st->parts[i].final_done && part_ready(&st->parts[i])) stream_format(st, &st->parts[i]);
        if (st->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

static void stream_free(void *cls)
{
    stream_st *st = cls;
    if (!st->final_done) /* the client went away (or a write failed) before the end */
        atomic_fetch_add(&st->s->http.n_disconnects, 1);
    for (int i = 0; i < st->n; i++) {
        if (!st->parts[i].final_done) srv_engine_cancel(st->s->engine, st->parts[i].t); /* (after an error too) */
        srv_task_unref(st->parts[i].t);
        srv_anth_stream_free(st->parts[i].anth);
        srv_resp_stream_free(st->parts[i].resp);
    }
    atomic_fetch_sub(&st->s->http.probs_bytes, st->probs_reserved);
    free(st->parts);
    free(st->g);
    sbuf_free(&st->out);
    free(st);
}

/* ---- completions ------------------------------------------------------------------------------------- */

/* Cancel (when queued) and release the first n tasks of g. */
static void drop_tasks(srv_server *s, srv_task **g, int n, bool cancel)
{
    for (int i = 0; i < n; i++) {
        if (cancel) srv_engine_cancel(s->engine, g[i]);
        srv_task_unref(g[i]);
    }
}

/* Task k of a request: its own parse (prompt k / n_cmpl, choice k % n_cmpl; the first was
 * parsed already into *req0), chain and grammar. NULL with e. */
static srv_task *make_task(srv_server *s, srv_kind kind, const conn_req *r, int k, srv_request *req0, srv_error *e)
{
    srv_request req;
    if (k == 0) {
        req = *req0;
        memset(req0, 0, sizeof *req0);
    } else if (srv_parse_completion_at(s, kind, r->body.p ? r->body.p : "", r->body.n, k / req0->n_cmpl, k % req0->n_cmpl,
                                       &req, e)) {
        return NULL;
    }
    sift_chain *chain;
    sift_sampler *grammar;
    if (srv_build_samplers(s, &req, &chain, &grammar, e)) {
        srv_request_free(&req);
        return NULL;
    }
    srv_task *t = srv_task_new(&req, chain, grammar);
    if (!t) {
        srv_request_free(&req);
        sift_chain_free(chain);
        sift_sampler_free(grammar);
        srv_errorf(e, 500, "out of memory");
    }
    return t;
}

/* A place among the --max-renders Jinja renders that may run at once: a chat request with the
 * model's own template renders it while it is parsed, on its connection's thread, and a
 * template's render is bounded in work but not in CPU share: two clients chatting with a
 * template that spends its whole budget keep two cores busy, and on a two-core machine the
 * engine then decodes for everybody at a third of its speed. Waits up to RENDER_WAIT_MS;
 * false when no place came (503). */
#define RENDER_WAIT_MS 10000.0
static bool render_enter(srv_server *s, srv_kind kind)
{
    if ((kind != SRV_OAI_CHAT && kind != SRV_ANTH_MSG && kind != SRV_RESP) || !s->jinja) return true;
    const double t_end = srv_now_ms() + RENDER_WAIT_MS;
    while (!budget_take(&s->http.renders, 1, s->cfg.max_renders > 0 ? s->cfg.max_renders : 1)) {
        if (srv_now_ms() >= t_end || atomic_load(&s->draining)) return false;
        poll(NULL, 0, 5);
    }
    return true;
}

static void render_leave(srv_server *s, srv_kind kind)
{
    if ((kind == SRV_OAI_CHAT || kind == SRV_ANTH_MSG || kind == SRV_RESP) && s->jinja) atomic_fetch_sub(&s->http.renders, 1);
}

/* What task t's n_probs and trace output is counted as against --max-probs-bytes: its worst
 * case (every token it may generate) of top-candidate entries, SRV_PROBS_ENTRY_BYTES each. */
static long long probs_cost(const srv_server *s, const srv_task *t)
{
    const srv_request *q = &t->req;
    const long long per_token = q->n_probs + (q->trace ? (long long)(q->trace_top + 1) * t->n_stage_names : 0);
    long long n_tok = q->n_predict >= 0 ? q->n_predict : s->cfg.max_n_predict;
    if (n_tok > s->n_ctx_slot) n_tok = s->n_ctx_slot;
    return per_token * n_tok * SRV_PROBS_ENTRY_BYTES;
}

static enum MHD_Result handle_completion(struct MHD_Connection *c, srv_server *s, srv_kind kind, const conn_req *r)
{
    srv_error e = {0};
    srv_request req;
    if (!render_enter(s, kind)) {
        srv_errorf(&e, 503, "the server is rendering its most chat templates at once (--max-renders %d); retry later",
                   s->cfg.max_renders);
        return reply_error(c, s, &e);
    }
    chat_jinja_set_client(conn_fd(c)); /* a render stops if this client goes away */
    if ((kind == SRV_OAI_CHAT || kind == SRV_ANTH_MSG || kind == SRV_RESP) && s->jinja) srv_prio_background(); /* the model file's code (prio.c); restored by on_request */
    const int rc = srv_parse_completion(s, kind, r->body.p ? r->body.p : "", r->body.n, &req, &e);
    chat_jinja_set_client(-1);
    if (rc) render_leave(s, kind);
    if (rc) return reply_error(c, s, &e);
    const bool stream = req.stream;
    const int n_cmpl = req.n_cmpl, n = req.n_prompts * req.n_cmpl;
    if (n > s->cfg.max_queue + s->cfg.n_parallel) { /* could never be queued at once */
        render_leave(s, kind);
        srv_request_free(&req);
        srv_errorf(&e, 400, "%d completions in one request, more than the queue and the slots hold (--max-queue %d + -np %d)", n,
                   s->cfg.max_queue, s->cfg.n_parallel);
        return reply_error(c, s, &e);
    }
    srv_task **g = calloc((size_t)n, sizeof *g);
    if (!g) {
        render_leave(s, kind);
        srv_request_free(&req);
        srv_errorf(&e, 500, "out of memory");
        return reply_error(c, s, &e);
    }
    for (int k = 0; k < n; k++) {
        srv_request first = {.n_cmpl = n_cmpl};
        g[k] = make_task(s, kind, r, k, k == 0 ? &req : &first, &e); /* (k > 0 renders again) */
        if (!g[k]) {
            render_leave(s, kind);
            if (k == 0) srv_request_free(&req);
            drop_tasks(s, g, k, false);
            free(g);
            return reply_error(c, s, &e);
        }
        if (k > 0) { /* one response: one id */
            memcpy(g[k]->oai_id, g[0]->oai_id, sizeof g[k]->oai_id);
            g[k]->created = g[0]->created;
        }
    }
    render_leave(s, kind);
    srv_prio_restore(); /* before waiting on the engine: a background thread must hold no lock the engine takes */
    long long cost = 0;
    for (int k = 0; k < n; k++) cost += probs_cost(s, g[k]);
    const long long budget = (long long)s->cfg.max_probs_bytes;
    if (cost > budget || (cost && !budget_take(&s->http.probs_bytes, cost, budget))) {
        drop_tasks(s, g, n, false);
        free(g);
        if (cost > budget)
            srv_errorf(&e, 400,
                       "n_probs and trace output of up to %lld MiB (tokens x (n_probs + trace stages x trace_top) x %d bytes) is "
                       "more than the server allows (--max-probs-bytes %lld MiB): ask for fewer tokens, n_probs or trace_top",
                       cost >> 20, SRV_PROBS_ENTRY_BYTES, budget >> 20);
        else
            srv_errorf(&e, 503, "the server is producing its most n_probs and trace output already (--max-probs-bytes); retry later");
        return reply_error(c, s, &e);
    }
    if (srv_engine_submit_all(s->engine, g, n) != 0) {
        atomic_fetch_sub(&s->http.probs_bytes, cost);
        drop_tasks(s, g, n, false);
        free(g);
        srv_errorf(&e, 503, "the server is busy: %d requests are waiting for a slot; retry later", s->cfg.max_queue);
        return reply_error(c, s, &e);
    }
    const int fd = conn_fd(c);
    if (stream) {
        stream_st *st = calloc(1, sizeof *st);
        stream_part *parts = calloc((size_t)n, sizeof *parts);
        if (parts && kind == SRV_ANTH_MSG && !(parts[0].anth = srv_anth_stream_new())) { /* (one task: no n there) */
            free(parts);
            parts = NULL;
        }
        if (parts && kind == SRV_RESP && !(parts[0].resp = srv_resp_stream_new())) {
            free(parts);
            parts = NULL;
        }
        struct MHD_Response *resp = st && parts ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, stream_read,
                                                                                    st, stream_free)
                                                : NULL;
        if (!resp) {
            atomic_fetch_sub(&s->http.probs_bytes, cost);
            drop_tasks(s, g, n, true);
            free(g);
            if (parts) srv_anth_stream_free(parts[0].anth);
            if (parts) srv_resp_stream_free(parts[0].resp);
            free(parts);
            free(st);
            return MHD_NO;
        }
        st->s = s;
        st->probs_reserved = cost;
        st->parts = parts;
        st->g = g; /* the stream owns the connection's references now */
        st->n = n;
        for (int k = 0; k < n; k++) parts[k].t = g[k];
        st->fd = fd;
        common_headers(resp, c, s, "text/event-stream; charset=utf-8");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        const enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        count_status(s, 200);
        return ret;
    }
    for (int k = 0; k < n; k++) {
        if (!wait_task(g[k], fd, SIZE_MAX)) { /* gone: drop the tasks and close */
            atomic_fetch_sub(&s->http.probs_bytes, cost);
            drop_tasks(s, g, n, true);
            free(g);
            atomic_fetch_add(&s->http.n_disconnects, 1);
            return MHD_NO;
        }
    }
    enum MHD_Result ret;
    const srv_task *failed = NULL;
    for (int k = 0; k < n && !failed; k++)
        if (g[k]->err.status) failed = g[k];
    if (failed) ret = reply_error(c, s, &failed->err);
    else ret = reply_json(c, s, 200, kind == SRV_ANTH_MSG ? srv_anth_json_final(s, g[0])
                                     : kind == SRV_RESP   ? srv_resp_json_final(s, g[0])
                                                          : srv_json_final_group(s, g, n));
    atomic_fetch_sub(&s->http.probs_bytes, cost);
    drop_tasks(s, g, n, false);
    free(g);
    return ret;
}

typedef int (*simple_handler)(const srv_server *, const char *, size_t, char **, srv_error *);

static enum MHD_Result handle_simple(struct MHD_Connection *c, srv_server *s, simple_handler fn, const conn_req *r)
{
    srv_error e = {0};
    char *out = NULL;
    if (fn(s, r->body.p ? r->body.p : "", r->body.n, &out, &e)) return reply_error(c, s, &e);
    return reply_json(c, s, 200, out);
}

/* /apply-template (and /v1/messages/count_tokens) render the chat template as a chat request
 * does: one of the --max-renders places, and the background priority (prio.c) with a Jinja
 * template. */
static enum MHD_Result handle_render(struct MHD_Connection *c, srv_server *s, simple_handler fn, const conn_req *r)
{
    if (!render_enter(s, SRV_OAI_CHAT)) {
        srv_error e = {0};
        srv_errorf(&e, 503, "the server is rendering its most chat templates at once (--max-renders %d); retry later",
                   s->cfg.max_renders);
        return reply_error(c, s, &e);
    }
    chat_jinja_set_client(conn_fd(c)); /* a render stops if this client goes away */
    if (s->jinja) srv_prio_background();
    const enum MHD_Result ret = handle_simple(c, s, fn, r);
    chat_jinja_set_client(-1);
    render_leave(s, SRV_OAI_CHAT);
    return ret;
}

/* POST /slots/N?action=save|restore|erase (llama-server's slot persistence): save writes the
 * slot's KV cells and tokens to --slot-save-path/FILENAME, restore reads them back (into any
 * slot, of a server with the same model), erase empties the slot's cache. As in llama-server,
 * --no-slots turns off GET /slots only; save and restore need --slot-save-path. */
static enum MHD_Result handle_slot_action(struct MHD_Connection *c, srv_server *s, const char *id, const conn_req *r)
{
    srv_error e = {0};
    char *end = NULL;
    const long slot = strtol(id, &end, 10);
    if (!isdigit((unsigned char)id[0]) || *end || slot >= s->cfg.n_parallel) {
        srv_errorf(&e, 400, "no slot '%.32s' (the slots are 0 to %d)", id, s->cfg.n_parallel - 1);
        return reply_error(c, s, &e);
    }
    const char *action = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action");
    srv_slot_action a;
    if (action && !strcmp(action, "save")) a = SRV_SLOT_SAVE;
    else if (action && !strcmp(action, "restore")) a = SRV_SLOT_RESTORE;
    else if (action && !strcmp(action, "erase")) a = SRV_SLOT_ERASE;
    else {
        srv_errorf(&e, 400, "'action' must be save, restore or erase, got '%.32s'", action ? action : "");
        return reply_error(c, s, &e);
    }
    char path[4096] = "", fname[256] = "";
    if (a != SRV_SLOT_ERASE) {
        if (!s->cfg.slot_save_path) {
            srv_errorf(&e, 501, "slot save and restore need --slot-save-path");
            e.type = "not_supported_error";
            return reply_error(c, s, &e);
        }
        if (srv_parse_slot_file(r->body.p ? r->body.p : "", r->body.n, fname, sizeof fname, &e)) return reply_error(c, s, &e);
        snprintf(path, sizeof path, "%s/%s", s->cfg.slot_save_path, fname);
    }
    srv_slot_result res = {0};
    if (srv_engine_slot_action(s->engine, (int)slot, a, path, &res, &e)) return reply_error(c, s, &e);
    return reply_json(c, s, 200, srv_json_slot_action((int)slot, a, fname, &res));
}

/* ---- health and readiness ---------------------------------------------------------------------------- */

static enum MHD_Result has_key(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind, (void)value;
    if (!strcmp(key, "fail_on_no_slot")) *(bool *)cls = true;
    return MHD_YES;
}

/* 200 {"status":"ok"}; 503 while draining (a balancer takes the replica out), and with
 * ?fail_on_no_slot when every slot is busy (llama-server's readiness probe). */
static enum MHD_Result handle_health(struct MHD_Connection *c, srv_server *s)
{
    srv_error e = {0};
    if (atomic_load(&s->draining)) {
        srv_errorf(&e, 503, "the server is shutting down");
        return reply_error(c, s, &e);
    }
    bool want_slot = false;
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, has_key, &want_slot);
    if (want_slot && s->engine) {
        srv_engine_stats st;
        srv_engine_stats_get(s->engine, &st, NULL, 0);
        if (st.n_busy >= st.n_slots || st.n_queued > 0) {
            srv_errorf(&e, 503, "no slot available");
            return reply_error(c, s, &e);
        }
    }
    return reply_json(c, s, 200, strdup("{\"status\":\"ok\"}"));
}

/* ---- routing ---------------------------------------------------------------------------------------- */

static bool path_is(const char *url, const char *a) { return !strcmp(url, a); }

static int embd_native(const srv_server *s, const char *b, size_t n, char **out, srv_error *e)
{
    return srv_handle_embeddings(s, false, b, n, out, e);
}

static int embd_oai(const srv_server *s, const char *b, size_t n, char **out, srv_error *e)
{
    return srv_handle_embeddings(s, true, b, n, out, e);
}

static enum MHD_Result route(struct MHD_Connection *c, srv_server *s, const char *url, const char *method, const conn_req *r)
{
    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    srv_error e = {0};
    if (!strcmp(method, "OPTIONS")) { /* CORS preflight: the headers only for an allowed Origin */
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!resp) return MHD_NO;
        const char *allow = cors_allowed(s, c);
        if (allow) {
            MHD_add_response_header(resp, "Access-Control-Allow-Origin", allow);
            if (strcmp(allow, "*")) MHD_add_response_header(resp, "Vary", "Origin");
            MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
            MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Content-Type, Authorization, X-Api-Key");
            MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
        }
        const enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp); /* (llama-server: 200) */
        MHD_destroy_response(resp);
        count_status(s, 200);
        return ret;
    }
    if (s->router && !path_is(url, "/") && !path_is(url, "/index.html") && !path_is(url, "/health") && !path_is(url, "/v1/health")) {
        if (r->too_big) {
            srv_errorf(&e, 413, "the request body is larger than %zu bytes (--max-body)", s->cfg.max_body);
            return reply_error(c, s, &e);
        }
        return (enum MHD_Result)srv_router_route(c, s, url, method, r->body.p, r->body.n);
    }
    static const char *const gets[] = {"/", "/index.html", "/health", "/v1/health", "/props", "/slots", "/metrics", "/v1/models", "/models"};
    static const char *const posts[] = {"/completion", "/completions", "/v1/completions", "/v1/chat/completions",
                                        "/chat/completions", "/tokenize", "/detokenize", "/apply-template",
                                        "/embedding", "/embeddings", "/v1/embeddings", "/v1/messages",
                                        "/v1/messages/count_tokens", "/infill",
                                        "/v1/responses", "/responses"};
    bool is_get = false, is_post = false;
    for (size_t i = 0; i < sizeof gets / sizeof *gets; i++) is_get |= path_is(url, gets[i]);
    for (size_t i = 0; i < sizeof posts / sizeof *posts; i++) is_post |= path_is(url, posts[i]);
    is_post |= !strncmp(url, "/slots/", 7); /* /slots/N?action=save|restore|erase */
    if (!is_get && !is_post) {
        srv_errorf(&e, 404, "no endpoint %.200s", url);
        return reply_error(c, s, &e);
    }
    if ((is_get && !get) || (is_post && !post)) {
        srv_errorf(&e, 405, "%.200s takes %s, not %.16s", url, is_get ? "GET" : "POST", method);
        e.type = "invalid_request_error";
        return reply_error(c, s, &e);
    }
    if (r->too_big) {
        srv_errorf(&e, 413, "the request body is larger than %zu bytes (--max-body)", s->cfg.max_body);
        return reply_error(c, s, &e);
    }
    if (is_get) {
        if ((path_is(url, "/") || path_is(url, "/index.html")) && s->cfg.no_webui) {
            srv_errorf(&e, 404, "the web page is turned off (--no-webui)");
            return reply_error(c, s, &e);
        }
        if (path_is(url, "/") || path_is(url, "/index.html")) {
            struct MHD_Response *resp =
                MHD_create_response_from_buffer(srv_index_html_len, (void *)srv_index_html, MHD_RESPMEM_PERSISTENT);
            if (!resp) return MHD_NO;
            common_headers(resp, c, s, "text/html; charset=utf-8");
            const enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
            MHD_destroy_response(resp);
            count_status(s, 200);
            return ret;
        }
        if (path_is(url, "/health") || path_is(url, "/v1/health")) return handle_health(c, s);
        if (path_is(url, "/props")) return reply_json(c, s, 200, srv_json_props(s));
        if ((path_is(url, "/slots") && s->cfg.no_slots) || (path_is(url, "/metrics") && s->cfg.no_metrics)) {
            srv_errorf(&e, 501, "this server does not serve %s (--no-%s)", url, url + 1); /* (llama-server: 501) */
            e.type = "not_supported_error";
            return reply_error(c, s, &e);
        }
        if (path_is(url, "/slots")) return reply_json(c, s, 200, srv_json_slots(s));
        if (path_is(url, "/metrics")) return reply(c, s, 200, "text/plain; version=0.0.4", srv_text_metrics(s), NULL);
        return reply_json(c, s, 200, srv_json_models(s));
    }
    if (atomic_load(&s->draining)) {
        srv_errorf(&e, 503, "the server is shutting down; retry on another replica");
        return reply_error(c, s, &e);
    }
    if (!strncmp(url, "/slots/", 7)) return handle_slot_action(c, s, url + 7, r);
    if (path_is(url, "/completion") || path_is(url, "/completions")) return handle_completion(c, s, SRV_NATIVE, r);
    if (path_is(url, "/v1/completions")) return handle_completion(c, s, SRV_OAI_CMPL, r);
    if (path_is(url, "/infill")) return handle_completion(c, s, SRV_INFILL, r);
    if (path_is(url, "/v1/chat/completions") || path_is(url, "/chat/completions")) return handle_completion(c, s, SRV_OAI_CHAT, r);
    if (path_is(url, "/tokenize")) return handle_simple(c, s, srv_handle_tokenize, r);
    if (path_is(url, "/detokenize")) return handle_simple(c, s, srv_handle_detokenize, r);
    if (path_is(url, "/embedding") || path_is(url, "/embeddings")) return handle_simple(c, s, embd_native, r);
    if (path_is(url, "/v1/embeddings")) return handle_simple(c, s, embd_oai, r);
    if (path_is(url, "/v1/messages")) return handle_completion(c, s, SRV_ANTH_MSG, r);
    if (path_is(url, "/v1/messages/count_tokens")) return handle_render(c, s, srv_handle_count_tokens, r);
    if (path_is(url, "/v1/responses") || path_is(url, "/responses")) return handle_completion(c, s, SRV_RESP, r);
    return handle_render(c, s, srv_handle_apply_template, r);
}

/* The request line is in (MHD_OPTION_URI_LOG_CALLBACK, called before libmicrohttpd parses
 * the query string): the request's state, and a query string over the limits cut to nothing
 * (uri points into MHD's own, writable, line buffer; the '?' it finds stays, so the byte
 * after it ends the arguments) and remembered for a 414. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls, (void)c;
    conn_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->t0 = srv_now_ms();
    const char *q = uri ? strchr(uri, '?') : NULL;
    if (q) {
        size_t n_args = 1;
        const char *p = q + 1;
        for (; *p && *p != ' '; p++) n_args += *p == '&' || *p == ';';
        if ((size_t)(p - q - 1) > SRV_MAX_QUERY || n_args > SRV_MAX_QUERY_ARGS) {
            ((char *)q)[1] = 0;
            r->uri_too_long = true;
        }
    }
    return r;
}

/* Release a request's --max-body-in-flight reservation. */
static void body_release(srv_server *s, conn_req *r)
{
    if (r->body_reserved) atomic_fetch_sub(&s->http.body_bytes, r->body_reserved);
    r->body_reserved = 0;
}

typedef struct framing {
    const char *cl;   /* the first Content-Length */
    bool cl_conflict; /* another one that differs */
    bool te;          /* Transfer-Encoding present */
} framing;

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    framing *f = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        if (!f->cl) f->cl = value;
        else if (strcmp(f->cl, value)) f->cl_conflict = true;
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        f->te = true;
    }
    return MHD_YES;
}

/* A refusal on the headers (the body is never read; MHD closes the connection after it). */
static enum MHD_Result refuse_head(struct MHD_Connection *c, srv_server *s, conn_req *r, const char *method, const char *url,
                                   srv_error *e)
{
    r->too_big = true;
    const enum MHD_Result ret = reply_error(c, s, e);
    log_request(s, method, url, e->status, r);
    return ret;
}

/* The checks on a request's headers, before any of its body is read: 0 to go on, else the
 * status with e filled. */
static int check_head(srv_http *h, struct MHD_Connection *c, const char *url, const char *method, conn_req *r, srv_error *e)
{
    srv_server *s = h->s;
    if (!host_allowed(s, c)) {
        srv_errorf(e, 403, "Host %.200s is not a name of this server (--allowed-hosts)",
                   MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST));
        e->type = "permission_error";
        return 403;
    }
    if (strcmp(method, "OPTIONS") && foreign_origin(s, c)) { /* a web page of another site: not even a GET */
        srv_errorf(e, 403, "requests from origin %.200s are not allowed (--cors-origin)",
                   MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"));
        e->type = "permission_error";
        return 403;
    }
    if (r->uri_too_long) {
        srv_errorf(e, 414, "the query string is longer than %d bytes or has more than %d arguments", SRV_MAX_QUERY,
                   SRV_MAX_QUERY_ARGS);
        e->type = "invalid_request_error";
        return 414;
    }
    framing f = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, framing_header, &f);
    char *end = NULL;
    const unsigned long long cl = f.cl ? strtoull(f.cl, &end, 10) : 0;
    if (f.cl_conflict || (f.cl && f.te) || (f.cl && (end == f.cl || *end))) {
        srv_errorf(e, 400, "%s", f.cl_conflict ? "two different Content-Length headers"
                                 : f.te       ? "Content-Length and Transfer-Encoding together"
                                              : "a Content-Length that is not a number");
        e->type = "invalid_request_error";
        return 400;
    }
    if (strcmp(method, "OPTIONS") && !open_path(url) && !key_ok(s, c)) {
        srv_errorf(e, 401, "Invalid API Key");
        e->type = "authentication_error";
        return 401;
    }
    if (cl > s->cfg.max_body) {
        srv_errorf(e, 413, "the request body is larger than %zu bytes (--max-body)", s->cfg.max_body);
        return 413;
    }
    if (cl && !budget_take(&s->http.body_bytes, (long long)cl, (long long)s->cfg.max_body_in_flight)) {
        srv_errorf(e, 503, "the server is receiving %zu bytes of request bodies already (--max-body-in-flight); retry later",
                   s->cfg.max_body_in_flight);
        return 503;
    }
    r->body_reserved = (long long)cl;
    (void)h;
    return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    srv_http *h = cls;
    srv_server *s = h->s;
    conn_req *r = *con_cls;
    anth_errors = !strcmp(url, "/v1/messages") || !strcmp(url, "/v1/messages/count_tokens");
    if (!r) return MHD_NO; /* on_uri ran out of memory */
    if (!r->headers_done) { /* first call: headers only */
        r->headers_done = true;
        srv_conns_set_phase(h->conns, conn_fd(c), SRV_CONN_BODY, srv_now_ms());
        srv_error e = {0};
        if (check_head(h, c, url, method, r, &e)) return refuse_head(c, s, r, method, url, &e);
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        srv_conns_body_bytes(h->conns, conn_fd(c), *upload_size);
        if (!r->too_big && !r->body_busy) {
            /* a chunked body (no Content-Length) reserves as it comes */
            const long long over = (long long)(r->body.n + *upload_size) - r->body_reserved;
            if (r->body.n + *upload_size > s->cfg.max_body) {
                r->too_big = true;
                sbuf_free(&r->body);
            } else if (over > 0 && !budget_take(&s->http.body_bytes, over, (long long)s->cfg.max_body_in_flight)) {
                r->body_busy = true;
                sbuf_free(&r->body);
            } else {
                if (over > 0) r->body_reserved += over;
                sbuf_add(&r->body, upload, *upload_size);
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    srv_conns_set_phase(h->conns, conn_fd(c), SRV_CONN_BUSY, srv_now_ms());
    if (r->body.oom) {
        srv_error e = {0};
        srv_errorf(&e, 500, "out of memory reading the request");
        return reply_error(c, s, &e);
    }
    if (r->body_busy) {
        srv_error e = {0};
        srv_errorf(&e, 503, "the server is receiving %zu bytes of request bodies already (--max-body-in-flight); retry later",
                   s->cfg.max_body_in_flight);
        return reply_error(c, s, &e);
    }
    last_status = 0;
    const enum MHD_Result ret = route(c, s, url, method, r);
    srv_prio_restore(); /* a handler may have gone into the background (prio.c) */
    log_request(s, method, url, ret == MHD_YES ? last_status : 499, r);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    srv_http *h = cls;
    conn_req *r = *con_cls;
    if (r) {
        body_release(h->s, r);
        sbuf_free(&r->body);
        free(r);
        *con_cls = NULL;
    }
    /* kept alive: the next request's head is due within the header deadline */
    srv_conns_set_phase(h->conns, conn_fd(c), SRV_CONN_WAIT, srv_now_ms());
}

/* MHD is done with a connection (called before it closes the socket, so the fd is still
 * ours to forget). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code)
{
    (void)socket_context;
    srv_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) srv_conns_closed(h->conns, conn_fd(c));
}

/* ---- accepting -------------------------------------------------------------------------------------- */

/* Refused connections being closed gently (acceptor thread only): the answer is sent and
 * the write side shut; what the client still sends is read and dropped until it closes,
 * LINGER_MS pass or LINGER_BYTES came, and only then is the socket closed. Closing at once
 * with the request unread sends a reset, and a reset can reach the client before it has
 * read the 503 (the kernel drops the answer). */
#define LINGER_MAX 128
#define LINGER_MS 500.0
#define LINGER_BYTES 65536

typedef struct linger_fd {
    int fd;
    double t_end;
    size_t n_read;
} linger_fd;

/* A connection conns.c would not admit: one short answer, then a gentle close. */
static void refuse(linger_fd *lg, int *n_lg, int fd)
{
#define REFUSED_BODY                                                                                      \
    "{\"error\":{\"code\":503,\"message\":\"too many connections from this address or in all; retry later\"," \
    "\"type\":\"unavailable_error\"}}"
    char msg[512];
    const int n = snprintf(msg, sizeof msg,
                           "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                           "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
                           sizeof REFUSED_BODY - 1, REFUSED_BODY);
#undef REFUSED_BODY
    ssize_t w = send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
    shutdown(fd, SHUT_WR);
    if (*n_lg >= LINGER_MAX) { /* too many lingering already: close (a reset, at worst) */
        close(fd);
        return;
    }
    lg[(*n_lg)++] = (linger_fd){.fd = fd, .t_end = srv_now_ms() + LINGER_MS};
}

/* Read and drop what the lingering connections sent; close those done. */
static void linger_step(linger_fd *lg, int *n_lg, const struct pollfd *p, double now)
{
    int w = 0;
    for (int i = 0; i < *n_lg; i++) {
        linger_fd *x = &lg[i];
        bool done = now >= x->t_end;
        if (!done && (p[i].revents & (POLLIN | POLLHUP | POLLERR | POLLRDHUP))) {
            char buf[4096];
            const ssize_t k = recv(x->fd, buf, sizeof buf, MSG_DONTWAIT);
            if (k > 0) x->n_read += (size_t)k;
            done = k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR) || x->n_read >= LINGER_BYTES;
        }
        if (done) close(x->fd);
        else lg[w++] = *x;
    }
    *n_lg = w;
}

static void *acceptor_main(void *arg)
{
    srv_http *h = arg;
    linger_fd lg[LINGER_MAX];
    int n_lg = 0;
    struct pollfd p[2 + LINGER_MAX];
    while (!atomic_load(&h->stop)) {
        p[0] = (struct pollfd){.fd = h->lfd, .events = POLLIN};
        p[1] = (struct pollfd){.fd = h->wake[0], .events = POLLIN};
        for (int i = 0; i < n_lg; i++) p[2 + i] = (struct pollfd){.fd = lg[i].fd, .events = POLLIN | POLLRDHUP};
        const int n = poll(p, 2 + (nfds_t)n_lg, n_lg ? 50 : 200);
        const double now = srv_now_ms();
        srv_conns_reap(h->conns, now);
        if (n_lg) linger_step(lg, &n_lg, p + 2, now);
        if (n <= 0 || (p[1].revents & POLLIN) || !(p[0].revents & POLLIN)) continue;
        for (int k = 0; k < 256 && !atomic_load(&h->stop); k++) { /* take what the backlog holds */
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            const int fd = accept4(h->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0) {
                if (errno == EMFILE || errno == ENFILE) poll(NULL, 0, 10); /* out of descriptors: let some close */
                break;
            }
            if (!srv_conns_admit(h->conns, fd, (struct sockaddr *)&ss, srv_now_ms())) {
                refuse(lg, &n_lg, fd);
                continue;
            }
            if (MHD_add_connection(h->d, fd, (struct sockaddr *)&ss, sl) != MHD_YES) srv_conns_closed(h->conns, fd); /* MHD closed it */
        }
    }
    for (int i = 0; i < n_lg; i++) close(lg[i].fd);
    return NULL;
}

/* socket + bind + listen on cfg.host:cfg.port (IPv4 preferred when the name has both). */
static int listen_on(const srv_config *cfg, char *errbuf, size_t errcap)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    const int g = getaddrinfo(cfg->host, port, &hints, &ai);
    if (g != 0 || !ai) {
        snprintf(errbuf, errcap, "--host %s: %s", cfg->host, gai_strerror(g));
        return -1;
    }
    const struct addrinfo *pick = ai;
    for (const struct addrinfo *a = ai; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    int fd = socket(pick->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    const int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, pick->ai_addr, pick->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        snprintf(errbuf, errcap, "cannot listen on %s:%d (%s)", cfg->host, cfg->port, strerror(errno));
        if (fd >= 0) close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

static int bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) return -1;
    if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return -1;
}

srv_http *srv_http_start(srv_server *s, int *port_out, char *errbuf, size_t errcap)
{
    const srv_config *cfg = &s->cfg;
    srv_http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(errbuf, errcap, "out of memory");
        return NULL;
    }
    h->s = s;
    h->lfd = h->wake[0] = h->wake[1] = -1;
    h->conns = srv_conns_new(cfg->max_connections, cfg->max_conns_per_client, 1e3 * cfg->header_timeout_s,
                             1e3 * cfg->body_timeout_s, cfg->min_body_rate, NULL);
    if (!h->conns || pipe2(h->wake, O_CLOEXEC) != 0) {
        snprintf(errbuf, errcap, "out of memory");
        srv_http_stop(h);
        return NULL;
    }
    h->lfd = listen_on(cfg, errbuf, errcap);
    if (h->lfd < 0) {
        srv_http_stop(h);
        return NULL;
    }
    const unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                           MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->timeout_s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)srv_conns_capacity(cfg->max_connections),
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                            MHD_OPTION_URI_LOG_CALLBACK, on_uri, h,
                            MHD_OPTION_END);
    if (!h->d) {
        snprintf(errbuf, errcap, "cannot start the HTTP daemon");
        srv_http_stop(h);
        return NULL;
    }
    s->httpd = h; /* before any connection can ask /metrics for the connection counters */
    if (pthread_create(&h->acceptor, NULL, acceptor_main, h) != 0) {
        s->httpd = NULL;
        snprintf(errbuf, errcap, "cannot start the acceptor thread");
        srv_http_stop(h);
        return NULL;
    }
    h->acceptor_started = true;
    *port_out = bound_port(h->lfd);
    return h;
}

bool srv_http_drain(srv_http *h, int drain_timeout_s)
{
    srv_server *s = h->s;
    atomic_store(&s->draining, true);
    const double t_end = srv_now_ms() + 1e3 * drain_timeout_s;
    for (;;) {
        srv_conn_stats cs;
        srv_engine_stats es = {0};
        srv_conns_stats(h->conns, &cs);
        if (s->engine) srv_engine_stats_get(s->engine, &es, NULL, 0); /* (router mode has none) */
        /* every engine task belongs to a BUSY connection; the engine's view covers the step
         * between a response ending and its connection noticing */
        if (cs.n_busy == 0 && es.n_busy == 0 && es.n_queued == 0) return true;
        if (srv_now_ms() >= t_end || atomic_load(&s->drain_abort)) return false;
        poll(NULL, 0, 20);
    }
}

bool srv_http_flush(srv_http *h, double t_end)
{
    for (;;) {
        srv_conn_stats cs;
        srv_conns_stats(h->conns, &cs);
        if (cs.n_busy == 0) return true;
        if (srv_now_ms() >= t_end) return false;
        poll(NULL, 0, 5);
    }
}

srv_server *srv_http_server(srv_http *h) { return h->s; }

void srv_http_conn_stats(srv_http *h, srv_conn_stats *st)
{
    if (h && h->conns) srv_conns_stats(h->conns, st);
    else memset(st, 0, sizeof *st);
}

void srv_http_stop(srv_http *h)
{
    if (!h) return;
    atomic_store(&h->stop, true);
    if (h->acceptor_started) {
        const char b = 1;
        ssize_t w = write(h->wake[1], &b, 1);
        (void)w;
        pthread_join(h->acceptor, NULL);
    }
    if (h->lfd >= 0) close(h->lfd);
    if (h->d) MHD_stop_daemon(h->d); /* closes the connections left and joins their threads */
    if (h->wake[0] >= 0) close(h->wake[0]);
    if (h->wake[1] >= 0) close(h->wake[1]);
    srv_conns_free(h->conns);
    free(h);
}

#endif /* SIFT_HAVE_MHD */
