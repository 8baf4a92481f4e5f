/*
 * conns.c - which connections `sift serve` admits, and how long a request may take to arrive.
 *
 * Why this exists: libmicrohttpd's only clock is an idle timeout, which counts silence. A
 * client sending one header byte per second is never silent, and a few hundred connections
 * that send nothing fill --max-connections, after which valid requests are refused. So the
 * server accepts connections itself (http.c) and asks this table first.
 *
 * Every connection is in one phase:
 *   WAIT  no request in progress: waiting for a request line and headers (a fresh
 *         connection, or a kept-alive one after its last response). The whole head must
 *         arrive within header_ms of entering WAIT, however the bytes trickle in; the wait
 *         for the next request on a kept-alive connection counts too (as HAProxy's
 *         `timeout http-request` does when no keep-alive timeout is set).
 *   BODY  the head is in, the body is arriving: within body_ms.
 *   BUSY  the request is being answered (generation can take minutes: no deadline here;
 *         the idle timeout still closes a client that stops reading).
 *
 * A body must also keep a pace: after RATE_GRACE_MS in BODY it must have averaged min_rate
 * bytes per second since its headers (--min-body-rate), else it is closed at once. Without
 * that, 65 connections sending one body byte a second each hold their places for the whole
 * body deadline, and a legitimate client gets in 3 times in 163.
 *
 * Admission, when a connection arrives:
 *   - per client address (per_client, 0 = no cap): at the cap, one of the client's own WAIT
 *     connections is closed to make room; with none to give up the new one is refused.
 *   - in all (max_conns): at the cap, a WAIT connection of anyone is closed; with none to
 *     give up, the new one is refused.
 * Which connection gives way: first a WAIT one that has been answered at least once (a
 * kept-alive connection between requests, or one the client has closed and whose thread
 * has not noticed yet), oldest first; else a fresh one that has sent no complete head for
 * GRACE_MS, oldest first; else the slowest upload (BODY, the lowest average rate) that has
 * been at it for GRACE_MS, or for SLOW_EVICT_MS when it is behind --min-body-rate's pace
 * already: a trickled body is given up for a client that has a request. (Without that
 * second rule, uploads that reconnect in waves are all younger than GRACE_MS a third of the
 * time, and a third of the legitimate requests are refused.) A fresh connection younger than that is never closed: its request
 * may be on its way (under load a head can take a while to be read), and closing it would
 * drop a valid request. So idle and slow connections delay nobody for more than GRACE_MS.
 *
 * "Closing" is shutdown(2) on the socket (through kill_fd, replaceable for the unit tests):
 * the connection's own thread sees the end of the stream and closes it, and then calls
 * srv_conns_closed. The table is one mutex and a linear array (a few hundred entries: an
 * admission scans it once).
 *
 * A client is its IPv4 address, or its IPv6 /64: one host is given a /64 (RFC 6177), so
 * counting full IPv6 addresses would make one host any number of "clients".
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "server/server.h"

/* A fresh connection is not given up for a new one before this age (ms; or half the
 * header deadline when that is shorter). */
#define GRACE_MS 1000.0
/* How long a body may arrive at any pace before --min-body-rate applies (ms): a client's
 * first packets and TCP's slow start. */
#define RATE_GRACE_MS 2000.0
/* An upload behind that pace may be given up for a new connection after this (ms). */
#define SLOW_EVICT_MS 100.0

typedef struct centry {
    int fd;                  /* -1: free */
    bool doomed;             /* shut down by us, waiting for its thread to close it */
    bool served;             /* answered at least once (a kept-alive connection) */
    srv_conn_phase phase;
    double t_phase;          /* when the phase began (ms) */
    long long body_bytes;    /* BODY: bytes of the body received so far */
    unsigned char addr[16];  /* the client's address (IPv4 in the first 4 bytes) */
    int family;
} centry;

struct srv_conns {
    pthread_mutex_t mu;
    centry *e;
    int cap;
    int max_conns, per_client;
    double header_ms, body_ms, grace_ms;
    double min_rate;         /* body bytes per second (0: no minimum) */
    void (*kill_fd)(int fd);
    srv_conn_stats st;
};

static void kill_shutdown(int fd) { shutdown(fd, SHUT_RDWR); }

srv_conns *srv_conns_new(int max_conns, int per_client, double header_ms, double body_ms, int min_rate, void (*kill_fd)(int fd))
{
    srv_conns *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->cap = srv_conns_capacity(max_conns);
    c->e = malloc((size_t)c->cap * sizeof *c->e);
    if (!c->e) {
        free(c);
        return NULL;
    }
    for (int i = 0; i < c->cap; i++) c->e[i].fd = -1;
    c->max_conns = max_conns;
    c->per_client = per_client;
    c->header_ms = header_ms;
    c->body_ms = body_ms;
    c->min_rate = min_rate > 0 ? min_rate : 0;
    c->grace_ms = header_ms / 2 < GRACE_MS ? header_ms / 2 : GRACE_MS;
    c->kill_fd = kill_fd ? kill_fd : kill_shutdown;
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void srv_conns_free(srv_conns *c)
{
    if (!c) return;
    pthread_mutex_destroy(&c->mu);
    free(c->e);
    free(c);
}

int srv_conns_capacity(int max_conns)
{
    /* room for connections we shut down whose threads have not closed them yet */
    return 2 * max_conns + 64;
}

static void addr_key(const struct sockaddr *sa, unsigned char out[16], int *family)
{
    memset(out, 0, 16);
    *family = sa ? sa->sa_family : 0;
    if (sa && sa->sa_family == AF_INET) {
        memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        const unsigned char *a6 = (const unsigned char *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
        static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (!memcmp(a6, v4mapped, 12)) { /* ::ffff:a.b.c.d is client a.b.c.d */
            memcpy(out, a6 + 12, 4);
            *family = AF_INET;
        } else {
            memcpy(out, a6, 8); /* the /64 (the rest stays zero) */
        }
    }
}

static centry *find(srv_conns *c, int fd)
{
    for (int i = 0; i < c->cap; i++)
        if (c->e[i].fd == fd) return &c->e[i];
    return NULL;
}

static void doom(srv_conns *c, centry *x)
{
    x->doomed = true;
    c->kill_fd(x->fd);
}

/* The connection to give up (of client fam/key when by_client): the oldest answered WAIT
 * one, else the oldest fresh one past the grace period, else the slowest upload past it;
 * NULL when there is none. */
static centry *victim(srv_conns *c, bool by_client, int fam, const unsigned char *key, double now)
{
    centry *served = NULL, *fresh = NULL, *slow = NULL;
    double slow_rate = 0;
    for (int i = 0; i < c->cap; i++) {
        centry *x = &c->e[i];
        if (x->fd < 0 || x->doomed || x->phase == SRV_CONN_BUSY) continue;
        if (by_client && (x->family != fam || memcmp(x->addr, key, 16))) continue;
        if (x->phase == SRV_CONN_BODY) {
            /* behind --min-body-rate's pace already (a body sent with its head is complete
             * long before SLOW_EVICT_MS), or past the grace period without one */
            const double dt = now - x->t_phase;
            const double rate = (double)x->body_bytes / (dt > 1 ? dt : 1);
            const bool behind = c->min_rate > 0 && dt >= SLOW_EVICT_MS && (double)x->body_bytes < c->min_rate * dt / 1e3;
            if ((behind || dt >= c->grace_ms) && (!slow || rate < slow_rate)) slow = x, slow_rate = rate;
        } else if (x->served) {
            if (!served || x->t_phase < served->t_phase) served = x;
        } else if (now - x->t_phase >= c->grace_ms) {
            if (!fresh || x->t_phase < fresh->t_phase) fresh = x;
        }
    }
    return served ? served : fresh ? fresh : slow;
}

bool srv_conns_admit(srv_conns *c, int fd, const struct sockaddr *sa, double now)
{
    unsigned char key[16];
    int fam;
    addr_key(sa, key, &fam);
    pthread_mutex_lock(&c->mu);
    int live = 0, mine = 0;
    centry *slot = NULL;
    for (int i = 0; i < c->cap; i++) {
        centry *x = &c->e[i];
        if (x->fd < 0) {
            if (!slot) slot = x;
            continue;
        }
        if (x->doomed) continue;
        live++;
        if (x->family == fam && !memcmp(x->addr, key, 16)) mine++;
    }
    bool ok = slot != NULL;
    if (ok && c->per_client > 0 && mine >= c->per_client) {
        centry *v = victim(c, true, fam, key, now);
        if (v) {
            doom(c, v);
            c->st.n_evicted++;
            live--;
        } else {
            ok = false;
        }
    }
    if (ok && live >= c->max_conns) {
        centry *v = victim(c, false, fam, key, now);
        if (v) {
            doom(c, v);
            c->st.n_evicted++;
        } else {
            ok = false;
        }
    }
    if (ok) {
        *slot = (centry){.fd = fd, .phase = SRV_CONN_WAIT, .t_phase = now, .family = fam};
        memcpy(slot->addr, key, 16);
        c->st.n_accepted++;
    } else {
        c->st.n_refused++;
    }
    pthread_mutex_unlock(&c->mu);
    return ok;
}

void srv_conns_set_phase(srv_conns *c, int fd, srv_conn_phase p, double now)
{
    pthread_mutex_lock(&c->mu);
    centry *x = find(c, fd);
    if (x && x->phase != p) {
        if (p == SRV_CONN_WAIT) x->served = true; /* back from a request */
        x->phase = p;
        x->t_phase = now;
        x->body_bytes = 0;
    }
    pthread_mutex_unlock(&c->mu);
}

void srv_conns_body_bytes(srv_conns *c, int fd, size_t n)
{
    pthread_mutex_lock(&c->mu);
    centry *x = find(c, fd);
    if (x) x->body_bytes += (long long)n;
    pthread_mutex_unlock(&c->mu);
}

void srv_conns_closed(srv_conns *c, int fd)
{
    pthread_mutex_lock(&c->mu);
    centry *x = find(c, fd);
    if (x) x->fd = -1;
    pthread_mutex_unlock(&c->mu);
}

int srv_conns_reap(srv_conns *c, double now)
{
    int n = 0;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->cap; i++) {
        centry *x = &c->e[i];
        if (x->fd < 0 || x->doomed) continue;
        if (x->phase == SRV_CONN_WAIT && now - x->t_phase > c->header_ms) {
            doom(c, x);
            c->st.n_header_timeouts++;
            n++;
        } else if (x->phase == SRV_CONN_BODY && now - x->t_phase > c->body_ms) {
            doom(c, x);
            c->st.n_body_timeouts++;
            n++;
        } else if (x->phase == SRV_CONN_BODY && c->min_rate > 0 && now - x->t_phase > RATE_GRACE_MS &&
                   (double)x->body_bytes < c->min_rate * (now - x->t_phase) / 1e3) {
            doom(c, x);
            c->st.n_slow_bodies++;
            n++;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

void srv_conns_stats(srv_conns *c, srv_conn_stats *st)
{
    pthread_mutex_lock(&c->mu);
    *st = c->st;
    st->n_open = st->n_busy = 0;
    for (int i = 0; i < c->cap; i++) {
        const centry *x = &c->e[i];
        if (x->fd < 0) continue;
        st->n_open++;
        if (x->phase == SRV_CONN_BUSY && !x->doomed) st->n_busy++;
    }
    pthread_mutex_unlock(&c->mu);
}
