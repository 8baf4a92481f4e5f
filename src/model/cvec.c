/*
 * cvec.c - control vectors: per-layer vectors added to the residual stream, in llama.cpp's
 * file format and with its semantics.
 *
 * The file (what llama.cpp's cvector-generator writes, and common's
 * llama_control_vector_load reads) is a GGUF whose tensors are `direction.<layer>`, F32,
 * one dimension of n_embd values. Layer 0 is refused, as llama.cpp refuses it (its buffer has
 * no room for layer 0), and so is anything else that is not such a tensor. Several
 * files, each times its scale, are summed into one buffer laid out as llama.cpp lays it out:
 * [layer 1][layer 2]... of n_embd floats each, so that data + len can be handed to
 * sift_context_set_control_vector exactly as to llama_set_adapter_cvec.
 *
 * Applying it (forward.c): after layer il's feed-forward residual add, x += v[il] for
 * il_start <= il <= il_end. The context keeps its own copy, [n_layer][n_embd] with a zero
 * row 0, so the forward pass indexes it directly; a context without one pays one NULL test
 * per layer.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "model/context.h"
#include "model/cvec.h"

struct sift_control_vector {
    float *data;    /* [n_layers][n_embd], layer 1 first */
    size_t len;     /* floats */
    int32_t n_embd; /* 0 while empty */
};

sift_control_vector *sift__cvec_new(void)
{
    return calloc(1, sizeof(sift_control_vector));
}

/* "direction.<digits>" -> the layer; -1 when the name is anything else */
static long direction_layer(const char *name)
{
    static const char prefix[] = "direction.";
    if (strncmp(name, prefix, sizeof prefix - 1)) return -1;
    const char *p = name + sizeof prefix - 1;
    if (!*p) return -1;
    long v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9' || v > SIFT_CVEC_MAX_LAYER) return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

sift_status sift__cvec_add(sift_control_vector *cv, const sift_gguf *g, float scale, const char *what, sift_error *err)
{
    if (!cv || !g) return sift__error_set(err, SIFT_E_INVAL, "control vector: no vector or file");
    if (!isfinite(scale)) return sift__error_set(err, SIFT_E_INVAL, "control vector %s: scale is not a finite number", what);
    const int64_t nt = sift_gguf_n_tensors(g);
    int32_t n_embd = cv->n_embd;
    long max_layer = 0;
    /* check every tensor before touching cv */
    for (int64_t i = 0; i < nt; i++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
        const long il = direction_layer(t->name);
        if (il < 0 || il > SIFT_CVEC_MAX_LAYER)
            return sift__error_set(err, SIFT_E_FORMAT,
                                   "control vector %s: tensor '%s' is not direction.<layer> (layer 1..%d)", what, t->name,
                                   SIFT_CVEC_MAX_LAYER);
        if (il == 0)
            return sift__error_set(err, SIFT_E_FORMAT, "control vector %s: direction.0: layer 0 has no control vector",
                                   what);
        if (t->type != SIFT_TYPE_F32)
            return sift__error_set(err, SIFT_E_FORMAT, "control vector %s: %s is %s, expected f32", what, t->name,
                                   sift_type_name(t->type) ? sift_type_name(t->type) : "?");
        if (t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1 || t->ne[0] < 1 || t->ne[0] > (1 << 20))
            return sift__error_set(err, SIFT_E_FORMAT, "control vector %s: %s is not one dimension of n_embd values", what,
                                   t->name);
        if (n_embd && t->ne[0] != n_embd)
            return sift__error_set(err, SIFT_E_FORMAT,
                                   "control vector %s: %s has %lld values, the vectors before it %d (n_embd differs)",
                                   what, t->name, (long long)t->ne[0], n_embd);
        n_embd = (int32_t)t->ne[0];
        if (il > max_layer) max_layer = il;
        const float *src = t->data;
        for (int64_t j = 0; j < t->ne[0]; j++)
            if (!isfinite(src[j]))
                return sift__error_set(err, SIFT_E_FORMAT, "control vector %s: %s holds a value that is not finite",
                                       what, t->name);
    }
    if (!n_embd) return sift__error_set(err, SIFT_E_FORMAT, "control vector %s: no direction.<layer> tensors", what);
    const size_t need = (size_t)max_layer * (size_t)n_embd;
    if (need > cv->len) {
        float *d = realloc(cv->data, need * sizeof(float));
        if (!d) return sift__error_set(err, SIFT_E_NOMEM, "control vector %s: out of memory", what);
        memset(d + cv->len, 0, (need - cv->len) * sizeof(float));
        cv->data = d;
        cv->len = need;
    }
    cv->n_embd = n_embd;
    for (int64_t i = 0; i < nt; i++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
        const float *src = t->data;
        float *dst = cv->data + (size_t)(direction_layer(t->name) - 1) * (size_t)n_embd;
        for (int32_t j = 0; j < n_embd; j++) dst[j] += src[j] * scale;
    }
    return SIFT_OK;
}

sift_status sift_control_vector_load(const char *const *paths, const float *scales, int32_t n, sift_control_vector **out,
                                     sift_error *err)
{
    if (!out) return sift__error_set(err, SIFT_E_INVAL, "control vector: no output");
    *out = NULL;
    if (!paths || n < 1) return sift__error_set(err, SIFT_E_INVAL, "control vector: no files");
    sift_control_vector *cv = sift__cvec_new();
    if (!cv) return sift__error_set(err, SIFT_E_NOMEM, "control vector: out of memory");
    for (int32_t i = 0; i < n; i++) {
        if (!paths[i]) {
            sift_control_vector_free(cv);
            return sift__error_set(err, SIFT_E_INVAL, "control vector: file %d has no path", i);
        }
        sift_error e2 = {0};
        sift_gguf *g = sift_gguf_open(paths[i], &e2);
        if (!g) {
            sift_control_vector_free(cv);
            return sift__error_set(err, e2.status ? e2.status : SIFT_E_IO, "control vector %s: %s", paths[i], e2.msg);
        }
        const sift_status rc = sift__cvec_add(cv, g, scales ? scales[i] : 1.0f, paths[i], err);
        sift_gguf_close(g);
        if (rc != SIFT_OK) {
            sift_control_vector_free(cv);
            return rc;
        }
    }
    *out = cv;
    return SIFT_OK;
}

const float *sift_control_vector_data(const sift_control_vector *cv) { return cv ? cv->data : NULL; }
size_t sift_control_vector_len(const sift_control_vector *cv) { return cv ? cv->len : 0; }
int32_t sift_control_vector_n_embd(const sift_control_vector *cv) { return cv ? cv->n_embd : 0; }

void sift_control_vector_free(sift_control_vector *cv)
{
    if (!cv) return;
    free(cv->data);
    free(cv);
}

sift_status sift_context_set_control_vector(sift_context *ctx, const float *data, size_t len, int32_t n_embd,
                                            int32_t il_start, int32_t il_end, sift_error *err)
{
    if (!ctx) return sift__error_set(err, SIFT_E_INVAL, "control vector: no context");
    if (!data) { /* off */
        free(ctx->cvec);
        ctx->cvec = NULL;
        return SIFT_OK;
    }
    const sift__hparams *hp = &ctx->model->hp;
    if (n_embd != hp->n_embd)
        return sift__error_set(err, SIFT_E_INVAL, "control vector: n_embd %d does not match the model's %d", n_embd,
                               hp->n_embd);
    for (size_t i = 0; i < len; i++)
        if (!isfinite(data[i]))
            return sift__error_set(err, SIFT_E_INVAL, "control vector: value %zu is not finite", i);
    const size_t E = (size_t)hp->n_embd;
    float *v = calloc((size_t)hp->n_layer * E, sizeof(float));
    if (!v) return sift__error_set(err, SIFT_E_NOMEM, "control vector: out of memory");
    /* llama_adapter_cvec::apply: data holds layer 1 first; a layer past len stays zero */
    for (int il = 1; il < hp->n_layer; il++) {
        const size_t off = E * (size_t)(il - 1);
        if (off + E <= len) memcpy(v + (size_t)il * E, data + off, E * sizeof(float));
    }
    free(ctx->cvec);
    ctx->cvec = v;
    ctx->cvec_l0 = il_start;
    ctx->cvec_l1 = il_end;
    return SIFT_OK;
}
