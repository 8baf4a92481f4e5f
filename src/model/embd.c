/*
 * embd.c - embeddings (sift_set_embeddings, sift_get_embeddings_ith / _seq): the final
 * hidden state of a decode, per token or pooled per sequence, as llama.cpp's
 * llama_get_embeddings_ith / llama_get_embeddings_seq give it.
 *
 * The vector is the one the output head multiplies: the last layer's residual stream after
 * the output RMSNorm (llama.cpp's "result_norm", t_embd). forward.c leaves those rows in
 * ctx->xn, one per output token (after the last layer kept only the outputs), so with
 * pooling NONE they are read in place and nothing is copied. With MEAN / CLS / LAST every
 * token of the batch is an output (check_batch) and the head is skipped; here each
 * sequence's rows are combined into embd_seq[seq]: the average, the first or the last row
 * of the sequence in the batch (by batch order, which is position order within a
 * sequence). A token listed in several sequences counts for its first one (the one whose
 * history it attended to). No normalization here: llama-server normalizes per request.
 */
#include <string.h>

#include "model/context.h"

void sift__embd_pool(sift_context *ctx)
{
    if (ctx->pooling == SIFT_POOLING_TYPE_NONE) return;
    const int64_t E = ctx->model->hp.n_embd;
    memset(ctx->embd_seq_ok, 0, (size_t)ctx->n_seq);
    memset(ctx->embd_seq, 0, (size_t)ctx->n_seq * (size_t)E * sizeof(float));
    /* count per sequence in seq_next (free after check_batch) */
    int32_t *cnt = ctx->seq_next;
    for (int s = 0; s < ctx->n_seq; s++) cnt[s] = 0;
    for (int32_t t = 0; t < ctx->n_outputs; t++) {
        const int s = ctx->tok_seq[t];
        const float *row = ctx->xn + (size_t)t * E;
        float *dst = ctx->embd_seq + (size_t)s * E;
        switch (ctx->pooling) {
        case SIFT_POOLING_TYPE_MEAN:
            for (int64_t d = 0; d < E; d++) dst[d] += row[d];
            break;
        case SIFT_POOLING_TYPE_CLS:
            if (!cnt[s]) memcpy(dst, row, (size_t)E * sizeof(float));
            break;
        default: /* LAST */
            memcpy(dst, row, (size_t)E * sizeof(float));
            break;
        }
        cnt[s]++;
        ctx->embd_seq_ok[s] = 1;
    }
    if (ctx->pooling == SIFT_POOLING_TYPE_MEAN)
        for (int s = 0; s < ctx->n_seq; s++) {
            if (!cnt[s]) continue;
            float *dst = ctx->embd_seq + (size_t)s * E;
            const float inv = 1.0f / (float)cnt[s];
            for (int64_t d = 0; d < E; d++) dst[d] *= inv;
        }
}

sift_status sift_set_embeddings(sift_context *ctx, bool embeddings, sift_pooling_type pooling)
{
    if (!ctx) return SIFT_E_INVAL;
    if (pooling == SIFT_POOLING_TYPE_UNSPECIFIED) pooling = SIFT_POOLING_TYPE_NONE;
    if (pooling == SIFT_POOLING_TYPE_RANK) return SIFT_E_UNSUPPORTED;
    if (pooling < SIFT_POOLING_TYPE_NONE || pooling > SIFT_POOLING_TYPE_LAST) return SIFT_E_INVAL;
    ctx->embeddings = embeddings;
    ctx->pooling = (int)pooling;
    return SIFT_OK;
}

bool sift_get_embeddings_enabled(const sift_context *ctx) { return ctx && ctx->embeddings; }

sift_pooling_type sift_get_pooling_type(const sift_context *ctx)
{
    return ctx ? (sift_pooling_type)ctx->pooling : SIFT_POOLING_TYPE_UNSPECIFIED;
}

float *sift_get_embeddings_ith(sift_context *ctx, int32_t i)
{
    if (!ctx || !ctx->embd_valid) return NULL;
    const int32_t row = sift__output_row(ctx, i);
    return row < 0 ? NULL : ctx->xn + (size_t)row * ctx->model->hp.n_embd;
}

float *sift_get_embeddings_seq(sift_context *ctx, sift_seq_id seq)
{
    if (!ctx || !ctx->embd_valid || ctx->pooling == SIFT_POOLING_TYPE_NONE || seq < 0 || seq >= ctx->n_seq ||
        !ctx->embd_seq_ok[seq])
        return NULL;
    return ctx->embd_seq + (size_t)seq * ctx->model->hp.n_embd;
}
