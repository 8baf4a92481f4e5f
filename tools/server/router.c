/*
 * router.c - `sift serve` without -m: router mode, several models behind one server.
 *
 *   sift serve --models-dir ./models [--models-preset presets.ini] [--models-max 4] [--no-models-autoload]
 *
 * As llama-server's router: the models are the GGUF files of --models-dir (a file is the model
 * named after it without .gguf; a subdirectory holding one model is named after the
 * directory) and the sections of an INI --models-preset (per-model options; `model = PATH`
 * adds a model). A request names its model in its body's "model" (POST) or in ?model= (GET
 * /props, /slots, /metrics); an unloaded model is loaded first (400 with
 * --no-models-autoload, or ?autoload=false), an unknown one is a 400. POST /models/load and
 * /models/unload do it by hand; GET /models (and /v1/models) lists every model with its
 * status (loaded, loading, unloaded; ?reload=1 reads the sources again). At --models-max
 * models loaded, loading one more stops the least recently used.
 *
 * Design: each model runs in a `sift serve -m PATH --host 127.0.0.1 --port 0` child process
 * of its own, and the router passes HTTP through to it. Not in-process model instances:
 *   - the whole server (engine, slots, templates, tools, grammars, streaming, limits, drain)
 *     is reused unchanged, and every endpoint works through the router the day it works in
 *     a single-model server, with nothing to keep in step;
 *   - a model that crashes (or runs out of memory loading) takes its own process down, not
 *     the router and the other models, and unloading gives the memory back to the system for
 *     certain (munmap and the allocator's arenas of a long-lived process may not);
 *   - the server's globals (libmicrohttpd daemon, signal handling, per-thread state) stay
 *     one per process, as they were written.
 * What it costs: one more copy of each response through the router (a local socket, cheap
 * next to generation) and a process start per load (tens of ms before the model's own load).
 *
 * Children: the command line's options (minus the router's own: srv_router_own_flag) go to
 * every child, after the preset's (so the command line wins, as llama-server's precedence
 * says). --port 0 lets the child bind any free port, so there is no race between choosing a
 * port and binding it; the router reads the port from the child's "listening on" line on its
 * stderr, which a thread per child forwards to the router's stderr ([model] prefix). Each
 * child gets a random key (LLAMA_API_KEY in its environment, never on a command line), and
 * the router sends it: another local user cannot reach a model around the router's
 * --api-key. The child is in a process group of its own (a terminal's Ctrl-C reaches the
 * router only, which stops the children in order), and PR_SET_PDEATHSIG gives it SIGTERM if
 * the router dies. Unload and shutdown send SIGTERM (the child drains as on its own: running
 * requests finish within --drain-timeout), then SIGKILL after --drain-timeout + 5 s; a child
 * still loading is killed at once. The monitor thread waitpid()s its child: no zombies.
 *
 * Passing through: the request goes to the child as HTTP/1.0 with Content-Length (so the
 * answer ends when the child closes: no chunked framing to undo), with the client's body,
 * method, path and query (model and autoload dropped) and only the headers the child needs.
 * The answer's status, Content-Type, Content-Length and Retry-After come back; the body is
 * copied as it arrives (a stream's events are never held), and a client that goes away
 * closes the child's connection, which cancels the request there. The router's own
 * checks (Host, Origin, --api-key, body limits, connection caps) are http.c's, before
 * anything is passed on.
 */
#ifdef SIFT_HAVE_MHD

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "server/router.h"

extern char **environ;

#define CHILD_HOST "127.0.0.1"
#define KILL_GRACE_MS 5000.0  /* after --drain-timeout, an unloading child is killed */
#define HEAD_MAX 65536        /* a child's response head */
#define LINE_MAX_OUT 1024     /* a child's stderr line (longer ones are cut) */

typedef enum mstatus { M_UNLOADED = 0, M_LOADING, M_LOADED } mstatus;

static const char *status_name(mstatus s) { return s == M_LOADED ? "loaded" : s == M_LOADING ? "loading" : "unloaded"; }

/* A model of the router: its source and, while loaded, its server. */
typedef struct rmodel {
    msrc src;
    bool removed;             /* gone from the sources at a reload (hidden; kept: its thread may still run) */
    mstatus status;
    bool stopping;            /* SIGTERM sent */
    bool failed;              /* exited on its own with an error (or killed by a signal it was not sent) */
    int exit_code;
    pid_t pid;
    int port;
    int out_fd;               /* the child's stderr and stdout (read by the monitor thread) */
    char key[33];             /* the child's --api-key (hex), sent by the proxy */
    char last_line[256];      /* the child's last line of output (why a load failed) */
    double last_used, kill_at;
    pthread_t th;
    bool th_joinable;
    bool spawn_req;           /* the spawner thread is asked to start it */
    srv_error spawn_err;      /* what the spawner answered (status 0: started) */
} rmodel;

struct srv_router {
    srv_server *s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rmodel **m;
    int n;
    char exe[PATH_MAX];
    atomic_bool stopping;     /* shutting down: no new loads */
    pthread_t spawner;        /* forks every child (see spawn_locked) */
    bool spawner_live, spawner_quit;
};

/* ---- children ----------------------------------------------------------------------------------- */

static double now_ms(void) { return srv_now_ms(); }

static bool running(const rmodel *m) { return m->status != M_UNLOADED; }

static rmodel *find_model(srv_router *R, const char *id)
{
    for (int i = 0; i < R->n; i++)
        if (!R->m[i]->removed && !strcmp(R->m[i]->src.id, id)) return R->m[i];
    return NULL;
}

/* SIGTERM (the child drains), SIGKILL by kill_at; at once for a child still loading. With R->mu. */
static void stop_locked(srv_router *R, rmodel *m)
{
    if (!running(m) || m->pid <= 0 || m->stopping) return;
    m->stopping = true;
    if (m->status == M_LOADING) {
        kill(m->pid, SIGKILL);
        return;
    }
    kill(m->pid, SIGTERM);
    m->kill_at = now_ms() + 1e3 * R->s->cfg.drain_timeout_s + KILL_GRACE_MS;
}

/* A line the child wrote: forwarded, and its "listening on" line makes the model loaded. */
static void child_line(srv_router *R, rmodel *m, const char *line)
{
    fprintf(stderr, "[%s] %s\n", m->src.id, line);
    const char *l = !strncmp(line, "sift serve: loaded in ", 22) ? strstr(line, "; listening on http://") : NULL;
    pthread_mutex_lock(&R->mu);
    snprintf(m->last_line, sizeof m->last_line, "%s", line);
    if (l && m->status == M_LOADING) {
        const char *colon = strrchr(l, ':');
        const int port = colon ? atoi(colon + 1) : 0;
        if (port > 0 && port < 65536) {
            m->port = port;
            m->status = M_LOADED;
            pthread_cond_broadcast(&R->cv);
        }
    }
    pthread_mutex_unlock(&R->mu);
}

/* One thread per child: its output, the kill deadline, its exit (waitpid: no zombie). */
static void *monitor_main(void *p)
{
    void **a = p;
    srv_router *R = a[0];
    rmodel *m = a[1];
    free(a);
    pthread_mutex_lock(&R->mu);
    const int fd = m->out_fd;
    const pid_t pid = m->pid;
    pthread_mutex_unlock(&R->mu);
    char line[LINE_MAX_OUT];
    size_t n = 0;
    bool eof = false;
    int st = 0;
    for (;;) {
        if (!eof) {
            struct pollfd pf = {.fd = fd, .events = POLLIN};
            if (poll(&pf, 1, 100) > 0) {
                char buf[4096];
                const ssize_t k = read(fd, buf, sizeof buf);
                if (k <= 0 && !(k < 0 && (errno == EINTR || errno == EAGAIN))) eof = true;
                for (ssize_t i = 0; i < k; i++) {
                    if (buf[i] == '\n' || n == sizeof line - 1) {
                        line[n] = 0;
                        child_line(R, m, line);
                        n = 0;
                        if (buf[i] == '\n') continue;
                    }
                    line[n++] = buf[i];
                }
            }
        } else {
            poll(NULL, 0, 50);
        }
        pthread_mutex_lock(&R->mu);
        if (m->stopping && m->kill_at > 0 && now_ms() >= m->kill_at) {
            fprintf(stderr, "sift serve: model %s did not stop within --drain-timeout + %.0f s: killing it\n", m->src.id,
                    KILL_GRACE_MS / 1e3);
            kill(pid, SIGKILL);
            m->kill_at = 0;
        }
        pthread_mutex_unlock(&R->mu);
        const pid_t w = waitpid(pid, &st, WNOHANG); /* (never blocking: the kill deadline must keep running) */
        if (w == pid || (w < 0 && errno == ECHILD)) break;
    }
    if (n) {
        line[n] = 0;
        child_line(R, m, line);
    }
    close(fd);
    pthread_mutex_lock(&R->mu);
    m->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    m->failed = !m->stopping && m->exit_code != 0;
    if (m->failed) fprintf(stderr, "sift serve: model %s exited with status %d\n", m->src.id, m->exit_code);
    m->status = M_UNLOADED;
    m->stopping = false;
    m->pid = 0;
    m->port = 0;
    m->kill_at = 0;
    pthread_cond_broadcast(&R->cv);
    pthread_mutex_unlock(&R->mu); /* (the last use of R and m: load_locked may join this thread now) */
    return NULL;
}

static void random_key(char out[33])
{
    unsigned char b[16];
    ssize_t k = getrandom(b, sizeof b, 0);
    if (k != (ssize_t)sizeof b) { /* (no getrandom: still unguessable enough for a loopback port) */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned long x = (unsigned long)ts.tv_nsec ^ ((unsigned long)getpid() << 20) ^ (unsigned long)rand();
        for (size_t i = 0; i < sizeof b; i++) b[i] = (unsigned char)((x >> (i % 8) * 8) ^ (unsigned long)rand());
    }
    for (size_t i = 0; i < sizeof b; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

/* The environment a child starts with: the router's, without what names a key or a model
 * (the child's are on its command line), with its own key and the preset's variables. */
static bool child_env(const rmodel *m, strv *env)
{
    static const char *const drop[] = {"LLAMA_API_KEY=", "SIFT_ARG_API_KEY=", "LLAMA_ARG_API_KEY_FILE=",
                                       "SIFT_ARG_API_KEY_FILE=", "LLAMA_ARG_MODELS_DIR=", "LLAMA_ARG_MODELS_PRESET=",
                                       "LLAMA_ARG_MODELS_MAX=", "LLAMA_ARG_MODELS_AUTOLOAD=", "SIFT_ARG_MODELS_DIR=",
                                       "SIFT_ARG_MODELS_PRESET=", "SIFT_ARG_MODELS_MAX="};
    for (char **e = environ; e && *e; e++) {
        bool skip = false;
        for (size_t i = 0; i < sizeof drop / sizeof *drop && !skip; i++) skip = !strncmp(*e, drop[i], strlen(drop[i]));
        if (!skip && !rt_strv_add(env, *e)) return false;
    }
    for (int i = 0; i < m->src.env.n; i++)
        if (!rt_strv_add(env, m->src.env.v[i])) return false;
    char kv[64];
    snprintf(kv, sizeof kv, "LLAMA_API_KEY=%s", m->key);
    return rt_strv_add(env, kv);
}

/* Start the model's server (the spawner thread). With R->mu; 0, or an HTTP status with e. */
static int fork_locked(srv_router *R, rmodel *m, srv_error *e)
{
    const srv_config *cfg = &R->s->cfg;
    if (m->th_joinable) { /* the last run's monitor has finished (the status is UNLOADED) */
        pthread_join(m->th, NULL);
        m->th_joinable = false;
    }
    random_key(m->key);
    strv argv = {0}, env = {0};
    bool ok = rt_strv_add(&argv, R->exe) && rt_strv_add(&argv, "serve");
    for (int i = 0; ok && i < m->src.args.n; i++) ok = rt_strv_add(&argv, m->src.args.v[i]);
    for (int i = 0; ok && i < cfg->n_child_args; i++) ok = rt_strv_add(&argv, cfg->child_args[i]);
    ok = ok && rt_strv_add(&argv, "-m") && rt_strv_add(&argv, m->src.path) && rt_strv_add(&argv, "--host") &&
         rt_strv_add(&argv, CHILD_HOST) && rt_strv_add(&argv, "--port") && rt_strv_add(&argv, "0") && rt_strv_add(&argv, "--alias") &&
         rt_strv_add(&argv, m->src.id) && child_env(m, &env);
    int pfd[2] = {-1, -1};
    const int nul = ok ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
    if (!ok || nul < 0 || pipe2(pfd, O_CLOEXEC) != 0) {
        if (nul >= 0) close(nul);
        rt_strv_free(&argv);
        rt_strv_free(&env);
        return srv_errorf(e, 500, "cannot start a server for model %s: %s", m->src.id, ok ? strerror(errno) : "out of memory");
    }
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid == 0) { /* the child: only async-signal-safe calls until exec */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(1); /* the router died already */
        dup2(nul, 0);
        dup2(pfd[1], 1);
        dup2(pfd[1], 2);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        execve(R->exe, argv.v, env.v);
        static const char msg[] = "sift serve: cannot run the sift binary for a model server\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(127);
    }
    const int err = errno;
    close(nul);
    close(pfd[1]);
    rt_strv_free(&argv);
    rt_strv_free(&env);
    if (pid < 0) {
        close(pfd[0]);
        return srv_errorf(e, 500, "cannot start a server for model %s: %s", m->src.id, strerror(err));
    }
    m->pid = pid;
    m->out_fd = pfd[0];
    m->status = M_LOADING;
    m->stopping = m->failed = false;
    m->exit_code = 0;
    m->last_line[0] = 0;
    m->last_used = now_ms();
    void **a = malloc(2 * sizeof *a);
    if (a) a[0] = R, a[1] = m;
    if (!a || pthread_create(&m->th, NULL, monitor_main, a) != 0) { /* no monitor: stop it here */
        free(a);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(pfd[0]);
        m->status = M_UNLOADED;
        m->pid = 0;
        return srv_errorf(e, 500, "cannot start a server for model %s: no thread", m->src.id);
    }
    m->th_joinable = true;
    fprintf(stderr, "sift serve: loading model %s (pid %d)\n", m->src.id, (int)pid);
    return 0;
}

/* The one thread that forks: PR_SET_PDEATHSIG fires when the *thread* that forked a child
 * ends, not the process, so a connection's thread (gone with its request) cannot be it. */
static void *spawner_main(void *p)
{
    srv_router *R = p;
    pthread_mutex_lock(&R->mu);
    while (!R->spawner_quit) {
        bool any = false;
        for (int i = 0; i < R->n; i++) {
            rmodel *m = R->m[i];
            if (!m->spawn_req) continue;
            m->spawn_err = (srv_error){0};
            fork_locked(R, m, &m->spawn_err);
            m->spawn_req = false;
            any = true;
        }
        if (any) pthread_cond_broadcast(&R->cv);
        else pthread_cond_wait(&R->cv, &R->mu);
    }
    pthread_mutex_unlock(&R->mu);
    return NULL;
}

/* Start the model's server through the spawner thread. With R->mu; 0, or an HTTP status with e. */
static int spawn_locked(srv_router *R, rmodel *m, srv_error *e)
{
    m->spawn_req = true;
    pthread_cond_broadcast(&R->cv);
    while (m->spawn_req) pthread_cond_wait(&R->cv, &R->mu);
    if (!m->spawn_err.status) return 0;
    *e = m->spawn_err;
    return e->status;
}

static int n_running(const srv_router *R)
{
    int k = 0;
    for (int i = 0; i < R->n; i++) k += running(R->m[i]);
    return k;
}

static void timed_wait(srv_router *R, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&R->cv, &R->mu, &ts);
}

/* Start model m unless it runs, first stopping the least recently used models while
 * --models-max are running (and waiting for them to exit). With R->mu; 0, or an HTTP status with e. */
static int load_locked(srv_router *R, rmodel *m, srv_error *e)
{
    const int max = R->s->cfg.models_max;
    for (;;) {
        if (running(m) && !m->stopping) return 0;
        if (running(m)) { /* being unloaded: a new server once this one has exited */
            timed_wait(R, 50);
            continue;
        }
        if (atomic_load(&R->stopping) || atomic_load(&R->s->draining))
            return srv_errorf(e, 503, "the server is shutting down");
        if (m->removed) return srv_errorf(e, 400, "model '%s' not found", m->src.id);
        if (max <= 0 || n_running(R) < max) break;
        rmodel *lru = NULL;
        int n_stopping = 0;
        for (int i = 0; i < R->n; i++) {
            rmodel *x = R->m[i];
            n_stopping += running(x) && x->stopping;
            if (x != m && running(x) && !x->stopping && (!lru || x->last_used < lru->last_used)) lru = x;
        }
        /* one out for one in: while enough are on their way out, wait for them, evict no more */
        if (lru && n_running(R) - n_stopping >= max) {
            fprintf(stderr, "sift serve: --models-max %d models loaded: unloading %s, the least recently used\n", max, lru->src.id);
            stop_locked(R, lru);
        }
        timed_wait(R, 200);
    }
    return spawn_locked(R, m, e);
}

/* The model ready for a request: loaded (autoload) and its port. Waits while it loads, as
 * long as the client (fd) is there. 0 with *port and key, or an HTTP status with e. */
static int ensure_ready(srv_router *R, const char *id, bool autoload, int client_fd, int *port, char key[33], srv_error *e)
{
    pthread_mutex_lock(&R->mu);
    rmodel *m = find_model(R, id);
    int rc = 0;
    if (!m) {
        rc = srv_errorf(e, 400, "model '%.200s' not found (GET /models lists them)", id);
    } else if (!running(m) && !autoload) {
        rc = srv_errorf(e, 400, "model '%.200s' is not loaded (POST /models/load; this server does not load models on demand: "
                                "--no-models-autoload)", id);
    } else {
        rc = load_locked(R, m, e);
        while (!rc && m->status == M_LOADING) {
            timed_wait(R, 50);
            if (srv_client_gone(client_fd)) rc = srv_errorf(e, 499, "the client went away");
        }
        if (!rc && m->status != M_LOADED)
            rc = srv_errorf(e, 500, "model '%.200s' failed to load (exit status %d%s%.200s)", id, m->exit_code,
                            m->last_line[0] ? ": " : "", m->last_line);
        if (!rc) {
            *port = m->port;
            memcpy(key, m->key, 33);
        }
    }
    pthread_mutex_unlock(&R->mu);
    return rc;
}

/* ---- passing requests through ---------------------------------------------------------------------- */

typedef struct pxy {
    int fd;                   /* to the model's server */
    int client;               /* the client's socket */
    char *buf;                /* body bytes that came with the head */
    size_t n, off;
} pxy;

static void pxy_free(void *cls)
{
    pxy *p = cls;
    if (p->fd >= 0) close(p->fd); /* a stream cut short: the model's server sees its client go */
    free(p->buf);
    free(p);
}

/* Wait until fd is readable; false when the client went away (or poll failed). */
static bool wait_readable(int fd, int client)
{
    for (;;) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        const int r = poll(&pf, 1, 50);
        if (r > 0) return true;
        if (r < 0 && errno != EINTR) return false;
        if (srv_client_gone(client)) return false;
    }
}

static ssize_t pxy_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    pxy *p = cls;
    if (p->off < p->n) {
        size_t k = p->n - p->off;
        if (k > max) k = max;
        memcpy(out, p->buf + p->off, k);
        p->off += k;
        return (ssize_t)k;
    }
    for (;;) {
        if (!wait_readable(p->fd, p->client)) return MHD_CONTENT_READER_END_WITH_ERROR;
        const ssize_t k = recv(p->fd, out, max, 0);
        if (k > 0) return k; /* what came, at once: a stream's event is never held */
        if (k == 0) return MHD_CONTENT_READER_END_OF_STREAM;
        if (errno != EINTR && errno != EAGAIN) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

typedef struct qbuild {
    sbuf *b;
    int n;
} qbuild;

static void url_encode(sbuf *b, const char *s)
{
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') sbuf_add(b, s, 1);
        else sbuf_printf(b, "%%%02X", c);
    }
}

/* The query string passed on: every argument but model and autoload (the router's). */
static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    qbuild *q = cls;
    if (!strcmp(key, "model") || !strcmp(key, "autoload")) return MHD_YES;
    sbuf_adds(q->b, q->n++ ? "&" : "?");
    url_encode(q->b, key);
    if (value) {
        sbuf_adds(q->b, "=");
        url_encode(q->b, value);
    }
    return MHD_YES;
}

/* A header's value in head[0..n) (case-insensitive name), copied into out; false when absent. */
static bool head_value(const char *head, const char *name, char *out, size_t cap)
{
    const size_t k = strlen(name);
    for (const char *l = strstr(head, "\r\n"); l && l[2] != '\r'; l = strstr(l + 2, "\r\n")) {
        const char *h = l + 2;
        if (strncasecmp(h, name, k) || h[k] != ':') continue;
        h += k + 1;
        while (*h == ' ' || *h == '\t') h++;
        const char *z = strstr(h, "\r\n");
        size_t len = z ? (size_t)(z - h) : strlen(h);
        if (len >= cap) len = cap - 1;
        memcpy(out, h, len);
        out[len] = 0;
        return true;
    }
    return false;
}

static bool send_all(int fd, const char *p, size_t n)
{
    while (n) {
        const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

static int bad_gateway(struct MHD_Connection *c, srv_server *s, const char *id, const char *what)
{
    srv_error e = {0};
    srv_errorf(&e, 502, "the server of model '%.200s' %s (see the router's log)", id, what);
    e.type = "server_error";
    return srv_http_reply_error(c, s, &e);
}

/* Pass the request to model id's server (loaded first, as autoload says) and its answer back. */
static int proxy(struct MHD_Connection *c, srv_server *s, const char *id, bool autoload, bool touch, const char *method,
                 const char *url, const char *body, size_t n)
{
    srv_router *R = s->router;
    const int client = srv_http_conn_fd(c);
    int fd = -1, port = 0;
    char key[33];
    /* twice: the server found may exit before the connection (unloaded for another one, crashed) */
    for (int attempt = 0; fd < 0 && attempt < 2; attempt++) {
        srv_error e = {0};
        const int st = ensure_ready(R, id, autoload, client, &port, key, &e);
        if (st == 499) return MHD_NO;
        if (st) return srv_http_reply_error(c, s, &e);
        if (touch) {
            pthread_mutex_lock(&R->mu);
            rmodel *m = find_model(R, id);
            if (m) m->last_used = now_ms();
            pthread_mutex_unlock(&R->mu);
        }
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            close(fd);
            fd = -1;
            poll(NULL, 0, 100); /* its monitor notices the exit */
        }
    }
    if (fd < 0) return bad_gateway(c, s, id, "does not take connections");
    sbuf req = {0};
    qbuild q = {.b = &req};
    sbuf_printf(&req, "%s %s", method, url);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, query_arg, &q);
    sbuf_printf(&req, " HTTP/1.0\r\nHost: " CHILD_HOST ":%d\r\nAuthorization: Bearer %s\r\n", port, key);
    if (!strcmp(method, "POST")) sbuf_printf(&req, "Content-Type: application/json\r\nContent-Length: %zu\r\n", n);
    sbuf_adds(&req, "\r\n");
    bool ok = !req.oom && send_all(fd, req.p, req.n) && (!n || send_all(fd, body, n));
    sbuf_free(&req);
    /* the head: status line and headers (a non-streamed answer's come when it is done) */
    char *head = ok ? malloc(HEAD_MAX + 1) : NULL;
    size_t hn = 0;
    char *end = NULL;
    while (head && !end && hn < HEAD_MAX) {
        if (!wait_readable(fd, client)) { /* the client went away: the child sees this socket close */
            free(head);
            close(fd);
            atomic_fetch_add(&s->http.n_disconnects, 1);
            return MHD_NO;
        }
        const ssize_t k = recv(fd, head + hn, HEAD_MAX - hn, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        hn += (size_t)k;
        head[hn] = 0;
        end = strstr(head, "\r\n\r\n");
    }
    int status = 0;
    if (!end || sscanf(head, "HTTP/%*d.%*d %d", &status) != 1 || status < 100 || status > 599) {
        free(head);
        close(fd);
        return bad_gateway(c, s, id, ok ? "answered nothing readable (it may have stopped)" : "did not take the request");
    }
    end[2] = 0; /* the headers, each ending in \r\n */
    char ctype[256] = "application/json; charset=utf-8", clen[32], retry[32];
    head_value(head, "Content-Type", ctype, sizeof ctype);
    const bool has_len = head_value(head, "Content-Length", clen, sizeof clen);
    const bool has_retry = head_value(head, "Retry-After", retry, sizeof retry);
    pxy *p = calloc(1, sizeof *p);
    const size_t body_at = (size_t)(end + 4 - head);
    if (!p) {
        free(head);
        close(fd);
        return MHD_NO;
    }
    p->fd = fd;
    p->client = client;
    p->n = hn - body_at;
    p->buf = head;
    memmove(head, head + body_at, p->n);
    const uint64_t size = has_len ? strtoull(clen, NULL, 10) : MHD_SIZE_UNKNOWN;
    struct MHD_Response *resp = MHD_create_response_from_callback(size, 32 * 1024, pxy_read, p, pxy_free);
    if (!resp) {
        pxy_free(p);
        return MHD_NO;
    }
    if (has_retry) MHD_add_response_header(resp, "Retry-After", retry);
    if (!strncmp(ctype, "text/event-stream", 17)) {
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    }
    return srv_http_queue(c, s, status, ctype, resp);
}

/* ---- the router's own endpoints -------------------------------------------------------------------- */

static char *print_free(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

/* Read the sources again (?reload=1): models gone are hidden (stopped if running), models
 * whose file or options changed are stopped if running (the next load takes the new ones),
 * new ones are added. 0, or -1 with err (the list is left as it was). */
static int reload(srv_router *R, char *err, size_t cap)
{
    msrc *v = NULL;
    int n = 0;
    if (rt_read_sources(&R->s->cfg, &v, &n, err, cap)) return -1;
    pthread_mutex_lock(&R->mu);
    int rc = 0;
    for (int i = 0; i < R->n; i++) {
        rmodel *m = R->m[i];
        if (!m->removed && !rt_src_find(v, n, m->src.id)) {
            m->removed = true;
            stop_locked(R, m);
        }
    }
    for (int k = 0; k < n; k++) {
        rmodel *m = NULL;
        for (int i = 0; i < R->n && !m; i++)
            if (!strcmp(R->m[i]->src.id, v[k].id)) m = R->m[i];
        if (m) {
            const bool changed = strcmp(m->src.path, v[k].path) || !rt_strv_same(&m->src.args, &v[k].args) ||
                                 !rt_strv_same(&m->src.env, &v[k].env);
            if (changed) stop_locked(R, m);
            m->removed = false;
            rt_msrc_free(&m->src);
            m->src = v[k];
        } else {
            rmodel **grown = realloc(R->m, (size_t)(R->n + 1) * sizeof *grown);
            rmodel *x = grown ? calloc(1, sizeof *x) : NULL;
            if (grown) R->m = grown;
            if (!x) {
                rt_msrc_free(&v[k]);
                rc = -1;
                continue;
            }
            x->src = v[k];
            x->out_fd = -1;
            R->m[R->n++] = x;
        }
    }
    pthread_mutex_unlock(&R->mu);
    free(v);
    if (rc) snprintf(err, cap, "out of memory");
    return rc;
}

static char *models_json(srv_router *R)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    pthread_mutex_lock(&R->mu);
    for (int i = 0; i < R->n; i++) {
        const rmodel *m = R->m[i];
        if (m->removed) continue;
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "id", m->src.id);
        cJSON_AddStringToObject(x, "object", "model");
        cJSON_AddStringToObject(x, "owned_by", "sift");
        cJSON_AddNumberToObject(x, "created", (double)R->s->t_start);
        cJSON_AddItemToObject(x, "aliases", cJSON_CreateArray());
        cJSON_AddItemToObject(x, "tags", cJSON_CreateArray());
        cJSON_AddStringToObject(x, "source", m->src.source ? m->src.source : "preset");
        cJSON *st = cJSON_AddObjectToObject(x, "status");
        cJSON_AddStringToObject(st, "value", status_name(m->status));
        if (m->failed) {
            cJSON_AddBoolToObject(st, "failed", true);
            cJSON_AddNumberToObject(st, "exit_code", m->exit_code);
        }
        cJSON_AddItemToArray(data, x);
    }
    pthread_mutex_unlock(&R->mu);
    return print_free(o);
}

static char *router_props(const srv_server *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "role", "router");
    cJSON_AddNumberToObject(o, "max_instances", s->cfg.models_max);
    cJSON_AddBoolToObject(o, "models_autoload", s->cfg.models_autoload);
    cJSON_AddStringToObject(o, "model_alias", "sift");
    cJSON_AddStringToObject(o, "model_path", "none");
    cJSON *dgs = cJSON_AddObjectToObject(o, "default_generation_settings");
    cJSON_AddObjectToObject(dgs, "params");
    cJSON_AddNumberToObject(dgs, "n_ctx", 0);
    cJSON_AddStringToObject(o, "build_info", "sift " SIFT_VERSION_STRING);
    return print_free(o);
}

static bool query_autoload(struct MHD_Connection *c, const srv_server *s)
{
    const char *a = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "autoload");
    return a ? !strcmp(a, "true") || !strcmp(a, "1") : s->cfg.models_autoload;
}

static int reply_400(struct MHD_Connection *c, srv_server *s, int status, const char *type, const char *fmt, const char *arg)
{
    srv_error e = {0};
    srv_errorf(&e, status, fmt, arg);
    e.type = type;
    return srv_http_reply_error(c, s, &e);
}

/* The body's "model" (a JSON object's string field) into id; NULL with a 400 message in why. */
static char *body_model(const char *body, size_t n, const char **why)
{
    cJSON *j = cJSON_ParseWithLength(body ? body : "", n);
    const cJSON *m = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "model") : NULL;
    char *id = cJSON_IsString(m) && m->valuestring[0] ? strdup(m->valuestring) : NULL;
    *why = !j ? "the request body is not valid JSON" : !cJSON_IsObject(j) ? "the request body is not a JSON object"
                                                                          : "model name is missing from the request";
    cJSON_Delete(j);
    return id;
}

/* POST /models/load and /models/unload. */
static int load_unload(struct MHD_Connection *c, srv_server *s, bool load, const char *body, size_t n)
{
    srv_router *R = s->router;
    const char *why;
    char *id = body_model(body, n, &why);
    if (!id) return reply_400(c, s, 400, "invalid_request_error", "%s", why);
    srv_error e = {0};
    pthread_mutex_lock(&R->mu);
    rmodel *m = find_model(R, id);
    if (!m) srv_errorf(&e, load ? 404 : 400, "model '%.200s' not found", id);
    else if (load && running(m)) srv_errorf(&e, 400, "model '%.200s' is already loaded", id);
    else if (!load && (!running(m) || m->stopping)) srv_errorf(&e, 400, "model '%.200s' is not loaded", id);
    else if (load) load_locked(R, m, &e);
    else stop_locked(R, m);
    pthread_mutex_unlock(&R->mu);
    free(id);
    if (e.status) return srv_http_reply_error(c, s, &e);
    return srv_http_reply(c, s, 200, "application/json; charset=utf-8", strdup("{\"success\":true}"));
}

int srv_router_route(struct MHD_Connection *c, srv_server *s, const char *url, const char *method, const char *body, size_t n)
{
    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    static const char *const gets[] = {"/props", "/models", "/v1/models", "/slots", "/metrics"};
    static const char *const posts[] = {"/completion", "/completions", "/v1/completions", "/v1/chat/completions",
                                        "/chat/completions", "/tokenize", "/detokenize", "/apply-template",
                                        "/embedding", "/embeddings", "/v1/embeddings", "/v1/messages",
                                        "/v1/messages/count_tokens", "/infill", "/v1/responses", "/responses",
                                        "/models/load", "/models/unload"};
    bool is_get = false, is_post = !strncmp(url, "/slots/", 7);
    for (size_t i = 0; i < sizeof gets / sizeof *gets; i++) is_get |= !strcmp(url, gets[i]);
    for (size_t i = 0; i < sizeof posts / sizeof *posts; i++) is_post |= !strcmp(url, posts[i]);
    if (!is_get && !is_post) return reply_400(c, s, 404, "not_found_error", "no endpoint %.200s", url);
    if ((is_get && !get) || (is_post && !post)) {
        srv_error e = {0};
        srv_errorf(&e, 405, "%.200s takes %s, not %.16s", url, is_get ? "GET" : "POST", method);
        e.type = "invalid_request_error";
        return srv_http_reply_error(c, s, &e);
    }
    const char *model = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "model");
    if (is_get) {
        if (!strcmp(url, "/models") || !strcmp(url, "/v1/models")) {
            if (MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "reload")) {
                char err[512];
                if (reload(s->router, err, sizeof err)) return reply_400(c, s, 500, "server_error", "%s", err);
            }
            return srv_http_reply(c, s, 200, "application/json; charset=utf-8", models_json(s->router));
        }
        if (!strcmp(url, "/props") && !model) return srv_http_reply(c, s, 200, "application/json; charset=utf-8", router_props(s));
        if (!model || !*model)
            return reply_400(c, s, 400, "invalid_request_error", "%s: name the model (?model=ID); GET /models lists them", url);
        return proxy(c, s, model, query_autoload(c, s), false, "GET", url, NULL, 0);
    }
    if (atomic_load(&s->draining)) return reply_400(c, s, 503, "unavailable_error", "%s", "the server is shutting down");
    if (!strcmp(url, "/models/load") || !strcmp(url, "/models/unload")) return load_unload(c, s, !strcmp(url, "/models/load"), body, n);
    const char *why;
    char *id = body_model(body, n, &why);
    if (!id) return reply_400(c, s, 400, "invalid_request_error", "%s", why);
    const int r = proxy(c, s, id, query_autoload(c, s), true, "POST", url, body, n);
    free(id);
    return r;
}

/* ---- the router's life ---------------------------------------------------------------------------- */

static void *signal_main(void *p)
{
    void **a = p;
    srv_server *s = a[0];
    const sigset_t *sigs = a[1];
    int sig = 0;
    sigwait(sigs, &sig);
    atomic_store(&s->drain_abort, true); /* a second signal, or the main thread ending this wait */
    return NULL;
}

static void router_free(srv_router *R)
{
    if (R->spawner_live) {
        pthread_mutex_lock(&R->mu);
        R->spawner_quit = true;
        pthread_cond_broadcast(&R->cv);
        pthread_mutex_unlock(&R->mu);
        pthread_join(R->spawner, NULL);
    }
    for (int i = 0; i < R->n; i++) {
        rt_msrc_free(&R->m[i]->src);
        free(R->m[i]);
    }
    free(R->m);
    pthread_mutex_destroy(&R->mu);
    pthread_cond_destroy(&R->cv);
    free(R);
}

/* Stop every model server and wait for each to exit (SIGKILL after its deadline: the monitor
 * threads enforce it), then join the monitors. */
static void stop_all(srv_router *R)
{
    pthread_mutex_lock(&R->mu);
    atomic_store(&R->stopping, true);
    for (int i = 0; i < R->n; i++) stop_locked(R, R->m[i]);
    while (n_running(R)) timed_wait(R, 100);
    for (int i = 0; i < R->n; i++)
        if (R->m[i]->th_joinable) {
            pthread_join(R->m[i]->th, NULL);
            R->m[i]->th_joinable = false;
        }
    pthread_mutex_unlock(&R->mu);
}

int srv_router_run(srv_server *s, const sigset_t *sigs)
{
    srv_config *cfg = &s->cfg;
    srv_router *R = calloc(1, sizeof *R);
    if (!R) return 1;
    pthread_mutex_init(&R->mu, NULL);
    pthread_cond_init(&R->cv, NULL);
    R->s = s;
    const ssize_t k = readlink("/proc/self/exe", R->exe, sizeof R->exe - 1);
    if (k <= 0) {
        fprintf(stderr, "sift serve: router mode needs /proc/self/exe to start the model servers\n");
        router_free(R);
        return 1;
    }
    R->exe[k] = 0;
    if (pthread_create(&R->spawner, NULL, spawner_main, R) != 0) {
        fprintf(stderr, "sift serve: cannot start a thread\n");
        router_free(R);
        return 1;
    }
    R->spawner_live = true;
    s->t_start = time(NULL);
    char err[512];
    if (reload(R, err, sizeof err)) {
        fprintf(stderr, "sift serve: %s\n", err);
        router_free(R);
        return 2;
    }
    int n_start = 0;
    for (int i = 0; i < R->n; i++) n_start += R->m[i]->src.load_on_startup;
    if (cfg->models_max > 0 && n_start > cfg->models_max) {
        fprintf(stderr, "sift serve: %d models to load on startup, more than --models-max %d\n", n_start, cfg->models_max);
        router_free(R);
        return 2;
    }
    s->router = R;
    int port = 0, rc = 1;
    char msg[256];
    srv_prio_init(false);
    srv_http *http = srv_http_start(s, &port, msg, sizeof msg);
    if (!http) {
        fprintf(stderr, "sift serve: %s\n", msg);
        s->router = NULL;
        router_free(R);
        return 1;
    }
    fprintf(stderr, "sift serve: router mode: %d model%s (", R->n, R->n == 1 ? "" : "s");
    for (int i = 0; i < R->n; i++) fprintf(stderr, "%s%s", i ? ", " : "", R->m[i]->src.id);
    fprintf(stderr, "), up to %d loaded at once%s%s\n", cfg->models_max, cfg->models_max ? "" : " (no cap)",
            cfg->models_autoload ? ", loaded on demand" : ", loaded by POST /models/load only");
    if (!R->n) fprintf(stderr, "sift serve: note: no model found (GGUF files in --models-dir, sections of --models-preset)\n");
    pthread_mutex_lock(&R->mu);
    for (int i = 0; i < R->n; i++) {
        srv_error e = {0};
        if (R->m[i]->src.load_on_startup && load_locked(R, R->m[i], &e)) fprintf(stderr, "sift serve: %s\n", e.msg);
    }
    pthread_mutex_unlock(&R->mu);
    fprintf(stderr, "sift serve: listening on http://%s:%d\n", strchr(cfg->host, ':') ? "[::]" : cfg->host, port);
    fflush(stderr);

    int sig = 0;
    sigwait(sigs, &sig);
    atomic_store(&s->draining, true);
    fprintf(stderr, "sift serve: %s: draining (new work gets 503; the model servers finish what they run within %d s)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", cfg->drain_timeout_s);
    fflush(stderr);
    pthread_mutex_lock(&R->mu); /* each model server drains its own requests, as the router drains its connections */
    atomic_store(&R->stopping, true);
    for (int i = 0; i < R->n; i++) stop_locked(R, R->m[i]);
    pthread_mutex_unlock(&R->mu);
    void *a[2] = {s, (void *)sigs};
    pthread_t th;
    const bool th_ok = pthread_create(&th, NULL, signal_main, a) == 0;
    /* the model servers are gone by --drain-timeout + 1 s (their watchdog), their streams' closing
     * events sent: the router's connections get that long and one more second to pass them on */
    const bool drained = srv_http_drain(http, cfg->drain_timeout_s + 2);
    if (th_ok) {
        pthread_kill(th, SIGTERM); /* ends its sigwait when no second signal came */
        pthread_join(th, NULL);
    }
    fprintf(stderr, "sift serve: %s\n", drained ? "drained, shutting down" : "drain cut short: closing what still runs");
    srv_http_stop(http);
    stop_all(R);
    rc = 0;
    s->router = NULL;
    router_free(R);
    return rc;
}

#endif /* SIFT_HAVE_MHD */
