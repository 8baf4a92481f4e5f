/*
 * sampler.c - the sampler object: a vtable and a context, as llama.cpp's llama_sampler.
 *
 * The wrappers below are the only way the rest of the library (and users) call into a
 * sampler, so the vtable's optional entries are handled in one place: a NULL accept /
 * reset does nothing, a NULL clone copies a context-less sampler, a NULL free frees only
 * the wrapper. sift_sampler_apply() lends a temporary workspace to candidates that have
 * none (user-built arrays), so built-in samplers can always count on scratch memory;
 * chains own a workspace and never hit that path.
 */
#include <stdlib.h>

#include "core/candidates.h"
#include "core/sampler.h"

sift_sampler *sift_sampler_init(const sift_sampler_i *iface, void *ctx)
{
    if (!iface || !iface->apply) return NULL;
    sift_sampler *s = malloc(sizeof *s);
    if (!s) return NULL;
    s->iface = iface;
    s->ctx = ctx;
    return s;
}

const char *sift_sampler_name(const sift_sampler *smpl)
{
    if (!smpl || !smpl->iface || !smpl->iface->name) return "(unnamed)";
    const char *n = smpl->iface->name(smpl);
    return n ? n : "(unnamed)";
}

void sift_sampler_accept(sift_sampler *smpl, sift_token token)
{
    if (smpl && smpl->iface->accept) smpl->iface->accept(smpl, token);
}

void sift_sampler_apply(sift_sampler *smpl, sift_candidates *cand)
{
    if (!smpl || !cand) return;
    sift_workspace *own = cand->ws;
    if (own && own->cap >= cand->size) {
        sift__sampler_run(smpl, cand);
        return;
    }
    /* lend scratch memory for this call (user-built candidates) */
    sift_workspace *tmp = sift__ws_new(cand->size ? cand->size : 1);
    cand->ws = tmp;
    sift__sampler_run(smpl, cand);
    cand->ws = own;
    sift__ws_free(tmp);
}

void sift_sampler_reset(sift_sampler *smpl)
{
    if (smpl && smpl->iface->reset) smpl->iface->reset(smpl);
}

sift_sampler *sift_sampler_clone(const sift_sampler *smpl)
{
    if (!smpl) return NULL;
    if (smpl->iface->clone) return smpl->iface->clone(smpl);
    if (smpl->ctx == NULL) return sift_sampler_init(smpl->iface, NULL);
    return NULL; /* a context without a way to copy it */
}

void sift_sampler_free(sift_sampler *smpl)
{
    if (!smpl) return;
    if (smpl->iface->free) smpl->iface->free(smpl);
    free(smpl);
}

sift_sampler *sift__sampler_new(const sift_sampler_i *iface, size_t size)
{
    void *ctx = calloc(1, size);
    if (!ctx) return NULL;
    sift_sampler *s = sift_sampler_init(iface, ctx);
    if (!s) free(ctx);
    return s;
}

/* ---- the no-op sampler of disabled parameters ---------------------------------------- */

static const char *noop_name(const sift_sampler *smpl) { return (const char *)smpl->ctx; }
static void noop_apply(sift_sampler *smpl, sift_candidates *cand) { (void)smpl, (void)cand; }
static sift_sampler *noop_clone(const sift_sampler *smpl) { return sift__sampler_noop((const char *)smpl->ctx); }

static const sift_sampler_i noop_iface = {
    .name = noop_name,
    .apply = noop_apply,
    .clone = noop_clone,
    /* ctx is a static string: nothing to free */
};

sift_sampler *sift__sampler_noop(const char *name)
{
    return sift_sampler_init(&noop_iface, (void *)name);
}

bool sift__sampler_is_noop(const sift_sampler *smpl) { return smpl && smpl->iface == &noop_iface; }

/* ---- fast-path descriptors (sampler.h) --------------------------------------------------- */

void sift__op_apply(sift_sampler *smpl, sift_candidates *cand)
{
    const sift__op *op = smpl->ctx;
    op->apply(smpl, cand);
}

uint32_t sift_sampler_get_seed(const sift_sampler *smpl)
{
    if (!smpl || !smpl->iface->get_seed) return SIFT_DEFAULT_SEED;
    return smpl->iface->get_seed(smpl);
}
