/*
 * router.h - `sift serve` in router mode (router.c): several models behind one server, each
 * loaded on demand into a `sift serve` process of its own, as llama-server's --models-dir /
 * --models-preset / --models-max / --no-models-autoload do. The design and its reasons are at
 * the top of router.c; docs/server.md "Several models: router mode" is the user's side.
 */
#ifndef SIFT_SERVER_ROUTER_H
#define SIFT_SERVER_ROUTER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "server/server.h"

typedef struct srv_router srv_router;

/* Whether option `flag` (as typed, '_' already turned into '-') is the router's own: it is
 * not passed on to the model servers (listening address, keys, the --models-* flags, -m,
 * --alias). cmd_serve.c passes every other option of the command line to each model server. */
bool srv_router_own_flag(const char *flag);

/* Router mode's whole life, in place of loading a model: reads the models (--models-dir,
 * --models-preset), listens, serves until SIGINT/SIGTERM (sigs: blocked in every thread,
 * taken here with sigwait), then drains its connections while every model server drains its
 * own, and waits for them to exit. Returns the process's exit status (2: bad configuration). */
int srv_router_run(srv_server *s, const sigset_t *sigs);

/* http.c, for a request in router mode (the page and /health excepted, which http.c answers
 * itself): every other route. body[0..n) is the request's body. Returns an MHD_Result. */
struct MHD_Connection;
int srv_router_route(struct MHD_Connection *c, srv_server *s, const char *url, const char *method, const char *body, size_t n);

/* http.c's replies, for router.c: a body (malloc'd, taken) with a status; an error in
 * llama-server's shape; a response made by the caller, with the server's common headers.
 * Each counts the status for /metrics and returns an MHD_Result. */
struct MHD_Response;
int srv_http_reply(struct MHD_Connection *c, srv_server *s, int status, const char *ctype, char *body);
int srv_http_reply_error(struct MHD_Connection *c, srv_server *s, const srv_error *e);
int srv_http_queue(struct MHD_Connection *c, srv_server *s, int status, const char *ctype, struct MHD_Response *resp);
/* The socket of a connection (-1 when MHD does not say). */
int srv_http_conn_fd(struct MHD_Connection *c);

/* ---- internal: the models' sources (router_sources.c), for router.c ------------------------------- */

/* A growable list of owned strings (NULL-terminated, for execve). */
typedef struct strv {
    char **v;
    int n;
} strv;

void rt_strv_free(strv *l);
bool rt_strv_add(strv *l, const char *s); /* a copy of s; false: out of memory */
bool rt_strv_same(const strv *a, const strv *b);

/* A model as the sources describe it. */
typedef struct msrc {
    char *id, *path;
    strv args;                /* preset options, as command-line words */
    strv env;                 /* preset keys spelt as environment variables (LLAMA_ARG_X=v) */
    bool load_on_startup;
    const char *source;       /* "cache", "models_dir" or "preset" (static) */
} msrc;

void rt_msrc_free(msrc *m);
msrc *rt_src_find(msrc *v, int n, const char *id);
/* Every model the sources name (the Hugging Face cache, --models-dir, --models-preset), sorted
 * by id. 0, or -1 with err. */
int rt_read_sources(const srv_config *cfg, msrc **out, int *n_out, char *err, size_t cap);
/* How many models the Hugging Face cache holds (router mode's default source). */
int rt_cache_count(void);

#endif
