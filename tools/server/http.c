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
 * Routes (GET): / (the playground), /health, /v1/health, /props, /slots, /metrics,
 * /v1/models, /models. (POST): /completion, /completions, /v1/completions,
 * /v1/chat/completions, /chat/completions, /tokenize, /detokenize, /apply-template.
 */
#ifdef SIFT_HAVE_MHD

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "server/server.h"

struct srv_http {
    struct MHD_Daemon *d;
    srv_server *s;
};

/* Per-request state (MHD's con_cls): the body being uploaded. */
typedef struct conn_req {
    sbuf body;
    bool too_big;
    double t0;
} conn_req;

/* ---- responses ------------------------------------------------------------------------------- */

/* The status of the response this connection's thread queued last (one thread per
 * connection: a thread-local is the connection's), for the request log. */
static _Thread_local int last_status;

static void count_status(srv_server *s, int status)
{
    srv_http_stats *h = &s->http;
    last_status = status;
    atomic_fetch_add(&h->n_requests, 1);
    if (status < 300) atomic_fetch_add(&h->n_2xx, 1);
    else if (status == 400) atomic_fetch_add(&h->n_400, 1);
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

static void common_headers(struct MHD_Response *resp, const char *ctype)
{
    MHD_add_response_header(resp, "Content-Type", ctype);
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    MHD_add_response_header(resp, "Server", "sift/" SIFT_VERSION_STRING);
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
    common_headers(resp, ctype);
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
    return reply(c, s, e->status, "application/json; charset=utf-8", srv_json_error(e), e->status == 503 ? "1" : NULL);
}

/* ---- waiting for the engine ----------------------------------------------------------------------- */

static int conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* Whether the peer closed (or reset) the connection. */
static bool client_gone(int fd)
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
    while (!t->done && t->n_recs <= have) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        if (!t->done && t->n_recs <= have && client_gone(fd)) {
            pthread_mutex_unlock(&t->mu);
            return false;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return true;
}

/* ---- SSE streaming ------------------------------------------------------------------------------- */

typedef struct stream_st {
    srv_server *s;
    srv_task *t;
    int fd;
    size_t recs_sent, text_sent;
    sbuf out;
    size_t out_off;
    bool final_done, role_sent;
} stream_st;

/* Copy the records [st->recs_sent, n_recs) and what they point into (under the task lock),
 * format them as SSE events into st->out. */
static void stream_format(stream_st *st)
{
    srv_task *t = st->t;
    srv_snapshot sn = {0};
    bool done, oom = false;
    pthread_mutex_lock(&t->mu);
    done = t->done;
    const size_t n = t->n_recs;
    if (n > st->recs_sent) {
        const srv_tokrec *first = &t->recs[st->recs_sent];
        sn.n_recs = n - st->recs_sent;
        sn.rec_from = st->recs_sent;
        sn.text_from = st->text_sent;
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
        srv_sse_error(&e, &st->out);
        st->final_done = true;
    } else {
        if (sn.n_recs) {
            srv_sse_tokens(st->s, t, &sn, &st->role_sent, &st->out);
            st->recs_sent += sn.n_recs;
            st->text_sent = sn.text_to;
        }
        if (done) { /* every record is in once done is seen under the lock */
            srv_sse_final(st->s, t, &st->role_sent, &st->out);
            st->final_done = true;
        }
    }
    free(sn.recs);
    free(sn.text);
    free(sn.probs);
    free(sn.stages);
    free(sn.tops);
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
        if (!wait_task(st->t, st->fd, st->recs_sent)) return MHD_CONTENT_READER_END_WITH_ERROR; /* cancelled in stream_free */
        stream_format(st);
        if (st->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

static void stream_free(void *cls)
{
    stream_st *st = cls;
    if (!st->final_done) { /* the client went away (or a write failed) before the end */
        srv_engine_cancel(st->s->engine, st->t);
        atomic_fetch_add(&st->s->http.n_disconnects, 1);
    }
    srv_task_unref(st->t);
    sbuf_free(&st->out);
    free(st);
}

/* ---- completions ------------------------------------------------------------------------------------- */

static enum MHD_Result handle_completion(struct MHD_Connection *c, srv_server *s, srv_kind kind, const conn_req *r)
{
    srv_error e = {0};
    srv_request req;
    if (srv_parse_completion(s, kind, r->body.p ? r->body.p : "", r->body.n, &req, &e)) return reply_error(c, s, &e);
    sift_chain *chain;
    sift_sampler *grammar;
    if (srv_build_samplers(s, &req, &chain, &grammar, &e)) {
        srv_request_free(&req);
        return reply_error(c, s, &e);
    }
    const bool stream = req.stream;
    srv_task *t = srv_task_new(&req, chain, grammar);
    if (!t) {
        srv_request_free(&req);
        sift_chain_free(chain);
        sift_sampler_free(grammar);
        srv_errorf(&e, 500, "out of memory");
        return reply_error(c, s, &e);
    }
    if (srv_engine_submit(s->engine, t) != 0) {
        srv_task_unref(t);
        srv_errorf(&e, 503, "the server is busy: %d requests are waiting for a slot; retry later", s->cfg.max_queue);
        return reply_error(c, s, &e);
    }
    const int fd = conn_fd(c);
    if (stream) {
        stream_st *st = calloc(1, sizeof *st);
        struct MHD_Response *resp =
            st ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, stream_read, st, stream_free) : NULL;
        if (!resp) {
            srv_engine_cancel(s->engine, t);
            srv_task_unref(t);
            free(st);
            return MHD_NO;
        }
        st->s = s;
        st->t = t; /* the stream owns the connection's reference now */
        st->fd = fd;
        common_headers(resp, "text/event-stream; charset=utf-8");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        const enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        count_status(s, 200);
        return ret;
    }
    if (!wait_task(t, fd, SIZE_MAX)) { /* gone: drop the task and close */
        srv_engine_cancel(s->engine, t);
        srv_task_unref(t);
        atomic_fetch_add(&s->http.n_disconnects, 1);
        return MHD_NO;
    }
    enum MHD_Result ret;
    if (t->err.status) ret = reply_error(c, s, &t->err);
    else ret = reply_json(c, s, 200, srv_json_final(s, t));
    srv_task_unref(t);
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

/* ---- routing ---------------------------------------------------------------------------------------- */

static bool path_is(const char *url, const char *a) { return !strcmp(url, a); }

static enum MHD_Result route(struct MHD_Connection *c, srv_server *s, const char *url, const char *method, const conn_req *r)
{
    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    srv_error e = {0};
    if (!strcmp(method, "OPTIONS")) { /* CORS preflight */
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!resp) return MHD_NO;
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Content-Type, Authorization");
        const enum MHD_Result ret = MHD_queue_response(c, 204, resp);
        MHD_destroy_response(resp);
        count_status(s, 204);
        return ret;
    }
    static const char *const gets[] = {"/", "/index.html", "/health", "/v1/health", "/props", "/slots", "/metrics", "/v1/models", "/models"};
    static const char *const posts[] = {"/completion", "/completions", "/v1/completions", "/v1/chat/completions",
                                        "/chat/completions", "/tokenize", "/detokenize", "/apply-template"};
    bool is_get = false, is_post = false;
    for (size_t i = 0; i < sizeof gets / sizeof *gets; i++) is_get |= path_is(url, gets[i]);
    for (size_t i = 0; i < sizeof posts / sizeof *posts; i++) is_post |= path_is(url, posts[i]);
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
        if (path_is(url, "/") || path_is(url, "/index.html")) {
            struct MHD_Response *resp =
                MHD_create_response_from_buffer(srv_index_html_len, (void *)srv_index_html, MHD_RESPMEM_PERSISTENT);
            if (!resp) return MHD_NO;
            common_headers(resp, "text/html; charset=utf-8");
            const enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
            MHD_destroy_response(resp);
            count_status(s, 200);
            return ret;
        }
        if (path_is(url, "/health") || path_is(url, "/v1/health")) return reply_json(c, s, 200, strdup("{\"status\":\"ok\"}"));
        if (path_is(url, "/props")) return reply_json(c, s, 200, srv_json_props(s));
        if (path_is(url, "/slots")) return reply_json(c, s, 200, srv_json_slots(s));
        if (path_is(url, "/metrics")) return reply(c, s, 200, "text/plain; version=0.0.4", srv_text_metrics(s), NULL);
        return reply_json(c, s, 200, srv_json_models(s));
    }
    if (path_is(url, "/completion") || path_is(url, "/completions")) return handle_completion(c, s, SRV_NATIVE, r);
    if (path_is(url, "/v1/completions")) return handle_completion(c, s, SRV_OAI_CMPL, r);
    if (path_is(url, "/v1/chat/completions") || path_is(url, "/chat/completions")) return handle_completion(c, s, SRV_OAI_CHAT, r);
    if (path_is(url, "/tokenize")) return handle_simple(c, s, srv_handle_tokenize, r);
    if (path_is(url, "/detokenize")) return handle_simple(c, s, srv_handle_detokenize, r);
    return handle_simple(c, s, srv_handle_apply_template, r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    srv_server *s = cls;
    conn_req *r = *con_cls;
    if (!r) { /* first call: headers only */
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->t0 = srv_now_ms();
        *con_cls = r;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->cfg.max_body) {
            /* refuse before reading: MHD closes the connection after this response */
            r->too_big = true;
            srv_error e = {0};
            srv_errorf(&e, 413, "the request body is larger than %zu bytes (--max-body)", s->cfg.max_body);
            const enum MHD_Result ret = reply_error(c, s, &e);
            log_request(s, method, url, 413, r);
            return ret;
        }
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        if (!r->too_big) {
            if (r->body.n + *upload_size > s->cfg.max_body) {
                r->too_big = true;
                sbuf_free(&r->body);
            } else {
                sbuf_add(&r->body, upload, *upload_size);
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->body.oom) {
        srv_error e = {0};
        srv_errorf(&e, 500, "out of memory reading the request");
        return reply_error(c, s, &e);
    }
    last_status = 0;
    const enum MHD_Result ret = route(c, s, url, method, r);
    log_request(s, method, url, ret == MHD_YES ? last_status : 499, r);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    conn_req *r = *con_cls;
    if (r) {
        sbuf_free(&r->body);
        free(r);
        *con_cls = NULL;
    }
}

srv_http *srv_http_start(srv_server *s, int *port_out, char *errbuf, size_t errcap)
{
    const srv_config *cfg = &s->cfg;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    const int g = getaddrinfo(cfg->host, port, &hints, &ai);
    if (g != 0 || !ai) {
        snprintf(errbuf, errcap, "--host %s: %s", cfg->host, gai_strerror(g));
        return NULL;
    }
    const struct addrinfo *pick = ai;
    for (const struct addrinfo *a = ai; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    srv_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        snprintf(errbuf, errcap, "out of memory");
        return NULL;
    }
    h->s = s;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (pick->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, pick->ai_addr,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->timeout_s, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)cfg->max_connections, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, 256u, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        snprintf(errbuf, errcap, "cannot listen on %s:%d (in use, or not an address of this machine)", cfg->host, cfg->port);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = di ? di->port : cfg->port;
    return h;
}

void srv_http_stop(srv_http *h)
{
    if (!h) return;
    MHD_stop_daemon(h->d);
    free(h);
}

#endif /* SIFT_HAVE_MHD */
