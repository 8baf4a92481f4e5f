/*
 * kv.c - the KV cache's sequence operations (llama_memory_seq_* semantics).
 *
 * With one run of cells per sequence and cell = position (see context.h), every operation
 * is a small edit of a sequence's valid map and end, plus, for copies and shifts, a copy
 * of the affected cells along each transposed K/V row:
 *
 *   rm(s, p0, p1)     valid[p0..p1) = 0; if the range reaches the end, the end moves back
 *                     to the last valid position (so decoding can go on from there)
 *   cp(src, dst, ..)  cells copied row by row, valid map too; dst's end grows if needed
 *   keep(s)           every other sequence emptied
 *   add(s, p0, p1, d) cells moved by d positions, keys rotated by d (RoPE is a rotation,
 *                     so rotating by d turns a key for position p into one for p + d)
 *
 * Emptying a sequence only resets its map; the stale K/V bytes are never read because
 * attention masks invalid cells and never reads past a token's own position.
 *
 * A hybrid model (qwen35) also carries a recurrent state per sequence (context.h), which
 * stands for all of the sequence's tokens at once and cannot be edited by position. So, as
 * llama.cpp's llama_memory_recurrent: rm empties a whole sequence (its state zeroed) or
 * removes nothing past its end, and refuses anything else (SIFT_E_STATE, nothing changed);
 * cp copies a whole sequence (dst emptied first, then src's cells and state); add refuses
 * every shift (a context shift would keep a state that still holds the dropped tokens).
 * Callers fall back to decoding the tokens again (the server) or stop (generate, speculative).
 */
#include <string.h>

#include "model/context.h"

static bool seq_ok(const sift_context *ctx, sift_seq_id s)
{
    return ctx && s >= 0 && s < ctx->n_seq;
}

/* Clamp [p0, p1) to [0, n_ctx_seq) with llama's "negative = open" convention. */
static void clamp_range(const sift_context *ctx, sift_pos *p0, sift_pos *p1)
{
    if (*p0 < 0) *p0 = 0;
    if (*p1 < 0 || *p1 > ctx->n_ctx_seq) *p1 = ctx->n_ctx_seq;
    if (*p0 > *p1) *p0 = *p1;
}

/* Move the end back over trailing holes and recount the holes. */
static void seq_settle(const sift_context *ctx, kv_seq *sq)
{
    (void)ctx;
    while (sq->n > 0 && !sq->valid[sq->n - 1]) sq->n--;
    int32_t holes = 0;
    for (int32_t c = 0; c < sq->n; c++) holes += !sq->valid[c];
    sq->n_holes = holes;
}

static void seq_clear(sift_context *ctx, int s)
{
    kv_seq *sq = &ctx->seqs[s];
    memset(sq->valid, 0, (size_t)ctx->n_ctx_seq);
    sq->n = 0;
    sq->n_holes = 0;
    sift__rs_clear(ctx, s);
}

sift_status sift_kv_seq_rm(sift_context *ctx, sift_seq_id seq, sift_pos p0, sift_pos p1)
{
    if (!ctx || seq >= ctx->n_seq) return SIFT_E_INVAL;
    clamp_range(ctx, &p0, &p1);
    const int s0 = seq < 0 ? 0 : seq, s1 = seq < 0 ? ctx->n_seq : seq + 1;
    if (ctx->rs_conv) /* a recurrent state: whole sequences or nothing (checked for all before any changes) */
        for (int s = s0; s < s1; s++)
            if (p0 < ctx->seqs[s].n && (p0 > sift_kv_seq_pos_min(ctx, s) || p1 < ctx->seqs[s].n)) return SIFT_E_STATE;
    for (int s = s0; s < s1; s++) {
        kv_seq *sq = &ctx->seqs[s];
        if (p0 >= sq->n) continue;
        memset(sq->valid + p0, 0, (size_t)(p1 - p0));
        seq_settle(ctx, sq);
        if (sq->n == 0) sift__rs_clear(ctx, s);
    }
    return SIFT_OK;
}

/* Copy cells [p0, p1) of (layer, src) to (layer, dst) in every K and V row. */
static void copy_cells(sift_context *ctx, int src, int dst, sift_pos p0, sift_pos p1)
{
    const sift__hparams *hp = &ctx->model->hp;
    const size_t ld = (size_t)ctx->n_ctx_seq, bytes = (size_t)(p1 - p0) * sizeof(float);
    for (int l = 0; l < hp->n_layer_kv; l++)
        for (int h = 0; h < hp->n_head_kv; h++)
            for (int d = 0; d < hp->head_dim; d++) {
                memcpy(kv_row(ctx, ctx->k_cache, l, dst, h) + d * ld + p0, kv_row(ctx, ctx->k_cache, l, src, h) + d * ld + p0,
                       bytes);
                memcpy(kv_row(ctx, ctx->v_cache, l, dst, h) + d * ld + p0, kv_row(ctx, ctx->v_cache, l, src, h) + d * ld + p0,
                       bytes);
            }
}

sift_status sift_kv_seq_cp(sift_context *ctx, sift_seq_id src, sift_seq_id dst, sift_pos p0, sift_pos p1)
{
    if (!seq_ok(ctx, src) || !seq_ok(ctx, dst)) return SIFT_E_INVAL;
    if (src == dst) return SIFT_OK;
    clamp_range(ctx, &p0, &p1);
    kv_seq *a = &ctx->seqs[src], *b = &ctx->seqs[dst];
    if (ctx->rs_conv) { /* a recurrent state: the whole of src replaces dst */
        if (p0 > 0 || p1 < a->n) return SIFT_E_STATE;
        const sift__hparams *hp = &ctx->model->hp;
        const size_t nc = (size_t)hp->n_layer_rs * rs_conv_n(hp), ns = (size_t)hp->n_layer_rs * rs_ssm_n(hp);
        seq_clear(ctx, dst);
        memcpy(ctx->rs_conv + (size_t)dst * nc, ctx->rs_conv + (size_t)src * nc, nc * sizeof(float));
        memcpy(ctx->rs_ssm + (size_t)dst * ns, ctx->rs_ssm + (size_t)src * ns, ns * sizeof(float));
    }
    if (p1 > a->n) p1 = a->n; /* nothing to copy past src's end */
    if (p0 >= p1) return SIFT_OK;
    copy_cells(ctx, src, dst, p0, p1);
    memcpy(b->valid + p0, a->valid + p0, (size_t)(p1 - p0));
    if (p1 > b->n) b->n = p1;
    seq_settle(ctx, b);
    return SIFT_OK;
}

sift_status sift_kv_seq_keep(sift_context *ctx, sift_seq_id seq)
{
    if (!seq_ok(ctx, seq)) return SIFT_E_INVAL;
    for (int s = 0; s < ctx->n_seq; s++)
        if (s != seq) seq_clear(ctx, s);
    return SIFT_OK;
}

void sift_kv_clear(sift_context *ctx)
{
    if (!ctx) return;
    for (int s = 0; s < ctx->n_seq; s++) seq_clear(ctx, s);
}

/* Rotate the keys of cells [c0, c1) of sequence s by `delta` positions, every layer and
 * KV head: gather a cell's head vector from the transposed rows, rotate, scatter back. */
static void rotate_keys(sift_context *ctx, int s, sift_pos c0, sift_pos c1, sift_pos delta)
{
    const sift__hparams *hp = &ctx->model->hp;
    if (!hp->n_rot || delta == 0) return;
    float cs[SIFT_MAX_HEAD_DIM], cs_swa[SIFT_MAX_HEAD_DIM], vec[SIFT_MAX_HEAD_DIM]; /* n_rot <= head_dim <= SIFT_MAX_HEAD_DIM (model.c) */
    sift__rope_cache(ctx->model, ctx->rope_factors, (float)delta, false, false, cs);
    sift__rope_cache(ctx->model, ctx->rope_factors_swa, (float)delta, true, false, cs_swa);
    const size_t ld = (size_t)ctx->n_ctx_seq;
    for (int l = 0; l < hp->n_layer_kv; l++) { /* the layers that store K (gemma4's shared ones do not) */
        const sift__layer *L = &ctx->model->layers[l];
        for (int h = 0; h < L->n_head_kv && !L->nope; h++) { /* a layer without RoPE keeps its keys */
            const float *r = L->swa ? cs_swa : cs;
            float *kt = kv_row(ctx, ctx->k_cache, l, s, h);
            for (sift_pos c = c0; c < c1; c++) {
                for (int d = 0; d < L->head_dim; d++) vec[d] = kt[d * ld + c];
                sift__rope_apply(vec, r, L->n_rot, hp->rope_neox);
                for (int d = 0; d < L->head_dim; d++) kt[d * ld + c] = vec[d];
            }
        }
    }
}

sift_status sift_kv_seq_add(sift_context *ctx, sift_seq_id seq, sift_pos p0, sift_pos p1, sift_pos delta)
{
    if (!seq_ok(ctx, seq)) return SIFT_E_INVAL;
    kv_seq *sq = &ctx->seqs[seq];
    clamp_range(ctx, &p0, &p1);
    if (p1 > sq->n) p1 = sq->n;
    if (p0 >= p1 || delta == 0) return SIFT_OK;
    if (ctx->rs_conv) return SIFT_E_STATE; /* a recurrent state cannot be shifted */
    if ((int64_t)p1 + delta > ctx->n_ctx_seq) return SIFT_E_STATE;
    /* cells that would land below position 0 are dropped */
    if ((int64_t)p0 + delta < 0) {
        const sift_pos cut = -delta;
        if (cut >= p1) {
            memset(sq->valid + p0, 0, (size_t)(p1 - p0));
            seq_settle(ctx, sq);
            return SIFT_OK;
        }
        memset(sq->valid + p0, 0, (size_t)(cut - p0));
        p0 = cut;
    }
    const sift_pos q0 = p0 + delta, q1 = p1 + delta, n = p1 - p0;
    const sift__hparams *hp = &ctx->model->hp;
    const size_t ld = (size_t)ctx->n_ctx_seq;
    for (int l = 0; l < hp->n_layer_kv; l++)
        for (int h = 0; h < hp->n_head_kv; h++)
            for (int d = 0; d < hp->head_dim; d++) {
                float *kt = kv_row(ctx, ctx->k_cache, l, seq, h) + d * ld, *vt = kv_row(ctx, ctx->v_cache, l, seq, h) + d * ld;
                memmove(kt + q0, kt + p0, (size_t)n * sizeof(float));
                memmove(vt + q0, vt + p0, (size_t)n * sizeof(float));
            }
    /* the valid map moves with the cells; what they left behind (outside the target) empties */
    uint8_t *v = sq->valid;
    memmove(v + q0, v + p0, (size_t)n);
    if (delta > 0)
        memset(v + p0, 0, (size_t)(q0 - p0 < n ? q0 - p0 : n));
    else
        memset(v + (q1 > p0 ? q1 : p0), 0, (size_t)(p1 - (q1 > p0 ? q1 : p0)));
    rotate_keys(ctx, seq, q0, q1, delta);
    if (q1 > sq->n) sq->n = q1;
    seq_settle(ctx, sq);
    return SIFT_OK;
}

sift_pos sift_kv_seq_pos_min(const sift_context *ctx, sift_seq_id seq)
{
    if (!seq_ok(ctx, seq)) return -1;
    const kv_seq *sq = &ctx->seqs[seq];
    for (int32_t c = 0; c < sq->n; c++)
        if (sq->valid[c]) return c;
    return -1;
}

sift_pos sift_kv_seq_pos_max(const sift_context *ctx, sift_seq_id seq)
{
    if (!seq_ok(ctx, seq)) return -1;
    return ctx->seqs[seq].n - 1;
}

int32_t sift_kv_n_used(const sift_context *ctx)
{
    if (!ctx) return 0;
    int32_t used = 0;
    for (int s = 0; s < ctx->n_seq; s++) used += ctx->seqs[s].n - ctx->seqs[s].n_holes;
    return used;
}
