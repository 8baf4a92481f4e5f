/*
 * embeddings.c - `sift serve --embeddings`: llama-server's /embedding and OpenAI's
 * /v1/embeddings.
 *
 * The vectors are libsift's (sift_set_embeddings: the final hidden state after the output
 * norm, pooled per --pooling), computed on a context of their own: one sequence of the
 * slot's size, n_batch as large, so an input is always one decode (pooling needs the whole
 * sequence in one batch, as in llama.cpp, where llama-server asks for n_ubatch >= the
 * input). Requests take the context in turn (a mutex): embedding a prompt is one forward
 * pass without sampling, the generation slots are not involved, and completions keep
 * working beside it (llama-server's --embeddings serves embeddings only; sift serves both).
 *
 * What llama-server does, and so this module:
 *   - the input is `input` (or `content`): a string, one sequence of token ids and strings,
 *     or an array of those (request.c's prompt forms); tokenized with BOS as prompts are;
 *     an empty one is a 400;
 *   - /embedding answers [{"index", "embedding"}] per input, "embedding" being the list of
 *     per-token vectors with --pooling none (not normalized) or a list holding the one
 *     pooled vector;
 *   - pooled vectors are normalized per `embd_normalize` (default 2: Euclidean; -1 none,
 *     0 max-absolute scaled to int16's range, 1 taxicab, p > 2 the p-norm), as
 *     common_embd_normalize;
 *   - /v1/embeddings answers {"object": "list", "data": [{"object": "embedding", "index",
 *     "embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}}, the vector as
 *     floats or, with `encoding_format: "base64"`, the base64 of its little-endian float32
 *     bytes; --pooling none is a 400 there (per-token vectors are not OpenAI's shape);
 *   - without --embeddings both answer 501 not_supported_error.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

struct srv_embd {
    sift_context *ctx;
    pthread_mutex_t mu;
    sift_batch batch;
    int32_t n_max;             /* tokens per input: the context's cells (= its batch) */
    int32_t n_embd;
    sift_pooling_type pooling;
};

const char *srv_pooling_name(int pooling)
{
    switch (pooling) {
    case SIFT_POOLING_TYPE_NONE: return "none";
    case SIFT_POOLING_TYPE_MEAN: return "mean";
    case SIFT_POOLING_TYPE_CLS: return "cls";
    case SIFT_POOLING_TYPE_LAST: return "last";
    default: return "?";
    }
}

srv_embd *srv_embd_new(srv_server *s, sift_error *err)
{
    const srv_config *cfg = &s->cfg;
    srv_embd *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    const int32_t n = s->n_ctx_slot > 0 ? s->n_ctx_slot : 512;
    sift_context_params cp = sift_context_default_params();
    cp.n_ctx = (uint32_t)n;
    cp.n_batch = (uint32_t)n;
    cp.n_seq_max = 1;
    cp.n_threads = cfg->n_threads;
    cp.n_threads_batch = cfg->n_threads_batch;
    cp.isa = cfg->isa;
    m->ctx = sift_context_new(s->model, cp, err);
    if (!m->ctx || sift_batch_init(&m->batch, n, 1) != SIFT_OK) {
        sift_context_free(m->ctx);
        free(m);
        return NULL;
    }
    m->pooling = cfg->pooling == SIFT_POOLING_TYPE_UNSPECIFIED ? SIFT_POOLING_TYPE_NONE : (sift_pooling_type)cfg->pooling;
    sift_set_embeddings(m->ctx, true, m->pooling);
    m->n_max = n;
    m->n_embd = s->info.n_embd;
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

void srv_embd_free(srv_embd *m)
{
    if (!m) return;
    sift_batch_free(&m->batch);
    sift_context_free(m->ctx);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

int srv_embd_pooling(const srv_embd *m) { return m ? (int)m->pooling : SIFT_POOLING_TYPE_UNSPECIFIED; }

/* common_embd_normalize: -1 none, 0 max absolute (int16 range), 1 taxicab, 2 Euclidean, p: p-norm */
static void normalize(const float *in, float *out, int n, int norm)
{
    double sum = 0;
    switch (norm) {
    case -1: sum = 1; break;
    case 0:
        for (int i = 0; i < n; i++)
            if (fabs(in[i]) > sum) sum = fabs(in[i]);
        sum /= 32760.0;
        break;
    case 2:
        for (int i = 0; i < n; i++) sum += (double)in[i] * in[i];
        sum = sqrt(sum);
        break;
    default:
        for (int i = 0; i < n; i++) sum += pow(fabs(in[i]), norm);
        sum = pow(sum, 1.0 / norm);
        break;
    }
    const double k = sum > 0 ? 1.0 / sum : 0;
    for (int i = 0; i < n; i++) out[i] = (float)(in[i] * k);
}

static cJSON *vec_json(const float *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static cJSON *vec_base64(const float *v, int n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const size_t nb = (size_t)n * 4;
    unsigned char *b = malloc(nb ? nb : 1);
    char *o = malloc((nb + 2) / 3 * 4 + 1);
    if (!b || !o) {
        free(b);
        free(o);
        return cJSON_CreateNull();
    }
    for (int i = 0; i < n; i++) { /* little-endian float32, whatever the host */
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++) b[(size_t)i * 4 + k] = (unsigned char)(u >> (8 * k));
    }
    size_t j = 0;
    for (size_t i = 0; i < nb; i += 3) {
        const uint32_t x = (uint32_t)b[i] << 16 | (i + 1 < nb ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < nb ? b[i + 2] : 0);
        o[j++] = abc[x >> 18 & 63];
        o[j++] = abc[x >> 12 & 63];
        o[j++] = i + 1 < nb ? abc[x >> 6 & 63] : '=';
        o[j++] = i + 2 < nb ? abc[x & 63] : '=';
    }
    o[j] = 0;
    cJSON *r = cJSON_CreateString(o);
    free(b);
    free(o);
    return r;
}

/* Decode one input and add its result to out (index i). Holds m->mu. */
static int embed_one(const srv_server *s, srv_embd *m, const sift_token *t, int32_t n, int index, bool oai, bool b64,
                     int norm, float *tmp, cJSON *out, srv_error *e)
{
    sift_kv_clear(m->ctx);
    sift_batch_clear(&m->batch);
    const sift_seq_id s0 = 0;
    for (int32_t i = 0; i < n; i++) sift_batch_add(&m->batch, t[i], i, &s0, 1, true);
    sift_error se = {0};
    if (sift_decode(m->ctx, &m->batch, &se) != SIFT_OK) return srv_errorf(e, 500, "embedding: %s", se.msg);
    cJSON *item = cJSON_CreateObject();
    cJSON_AddNumberToObject(item, "index", index);
    if (oai) cJSON_AddStringToObject(item, "object", "embedding");
    if (m->pooling == SIFT_POOLING_TYPE_NONE) { /* /embedding only: every token's vector, as is */
        cJSON *rows = cJSON_AddArrayToObject(item, "embedding");
        for (int32_t i = 0; i < n; i++) cJSON_AddItemToArray(rows, vec_json(sift_get_embeddings_ith(m->ctx, i), m->n_embd));
    } else {
        const float *v = sift_get_embeddings_seq(m->ctx, 0);
        if (!v) {
            cJSON_Delete(item);
            return srv_errorf(e, 500, "embedding: no pooled vector");
        }
        normalize(v, tmp, m->n_embd, norm);
        cJSON *vj = oai && b64 ? vec_base64(tmp, m->n_embd) : vec_json(tmp, m->n_embd);
        if (oai) {
            cJSON_AddItemToObject(item, "embedding", vj);
        } else {
            cJSON *one = cJSON_AddArrayToObject(item, "embedding");
            cJSON_AddItemToArray(one, vj);
        }
    }
    cJSON_AddItemToArray(out, item);
    (void)s;
    return 0;
}

int srv_handle_embeddings(const srv_server *s, bool oai, const char *body, size_t len, char **out, srv_error *e)
{
    srv_embd *m = s->embd;
    if (!m) {
        srv_errorf(e, 501, "This server does not support embeddings. Start it with `--embeddings`");
        e->type = "not_supported_error";
        return 501;
    }
    if (oai && m->pooling == SIFT_POOLING_TYPE_NONE)
        return srv_errorf(e, 400, "Pooling type 'none' is not OAI compatible. Please use a different pooling type (--pooling mean, cls or last)");
    cJSON *root = len ? cJSON_ParseWithLength(body, len) : NULL;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return srv_errorf(e, 400, "the request body must be a JSON object");
    }
    int rc = 0;
    const char *name = "input";
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "input");
    if (!in || cJSON_IsNull(in)) {
        in = cJSON_GetObjectItemCaseSensitive(root, "content");
        name = "content";
    }
    if (!in || cJSON_IsNull(in)) rc = srv_errorf(e, 400, "\"input\" or \"content\" must be provided");
    bool b64 = false;
    const cJSON *ef = cJSON_GetObjectItemCaseSensitive(root, "encoding_format");
    if (!rc && ef && !cJSON_IsNull(ef)) {
        if (cJSON_IsString(ef) && !strcmp(ef->valuestring, "base64")) b64 = true;
        else if (!cJSON_IsString(ef) || strcmp(ef->valuestring, "float"))
            rc = srv_errorf(e, 400, "'encoding_format' must be \"float\" or \"base64\"");
    }
    int norm = 2;
    const cJSON *nj = cJSON_GetObjectItemCaseSensitive(root, "embd_normalize");
    if (!rc && nj && !cJSON_IsNull(nj)) {
        if (!cJSON_IsNumber(nj) || nj->valuedouble != floor(nj->valuedouble) || nj->valuedouble < -1 || nj->valuedouble > 100)
            rc = srv_errorf(e, 400, "'embd_normalize' must be an integer in [-1, 100] (-1 none, 0 max-abs, 1 taxicab, 2 euclidean, p: p-norm)");
        else norm = (int)nj->valuedouble;
    }
    int np = 0;
    if (!rc) {
        np = srv_prompt_count(in, name, SRV_MAX_EMBD_INPUTS, e);
        if (np < 0) rc = -np;
    }
    /* tokenize every input first: a bad one fails the request before any decode */
    sift_token **toks = rc ? NULL : calloc((size_t)np, sizeof *toks);
    int32_t *ns = rc ? NULL : calloc((size_t)np, sizeof *ns);
    if (!rc && (!toks || !ns)) rc = srv_errorf(e, 500, "out of memory");
    long long n_tokens = 0;
    for (int i = 0; !rc && i < np; i++) {
        rc = srv_prompt_at(s, in, name, i, &toks[i], &ns[i], e);
        if (!rc && ns[i] == 0) rc = srv_errorf(e, 400, "Input content cannot be empty");
        if (!rc && ns[i] > m->n_max)
            rc = srv_errorf(e, 400, "input %d is too large to process: %d tokens, at most %d (the slot's context, -c / -np)", i,
                            ns[i], m->n_max);
        n_tokens += ns[i];
    }
    cJSON *data = rc ? NULL : cJSON_CreateArray();
    float *tmp = rc ? NULL : malloc((size_t)m->n_embd * sizeof *tmp);
    if (!rc && !tmp) rc = srv_errorf(e, 500, "out of memory");
    if (!rc) {
        pthread_mutex_lock(&m->mu);
        for (int i = 0; !rc && i < np; i++) rc = embed_one(s, m, toks[i], ns[i], i, oai, b64, norm, tmp, data, e);
        pthread_mutex_unlock(&m->mu);
    }
    if (!rc) {
        if (oai) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "model", s->model_name);
            cJSON_AddStringToObject(o, "object", "list");
            cJSON *u = cJSON_AddObjectToObject(o, "usage");
            cJSON_AddNumberToObject(u, "prompt_tokens", (double)n_tokens);
            cJSON_AddNumberToObject(u, "total_tokens", (double)n_tokens);
            cJSON_AddItemToObject(o, "data", data);
            data = o;
        }
        *out = cJSON_PrintUnformatted(data);
        if (!*out) rc = srv_errorf(e, 500, "out of memory");
    }
    cJSON_Delete(data);
    free(tmp);
    for (int i = 0; toks && i < np; i++) free(toks[i]);
    free(toks);
    free(ns);
    cJSON_Delete(root);
    return rc;
}
