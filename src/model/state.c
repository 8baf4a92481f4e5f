/*
 * state.c - one sequence's KV cells to a file and back (llama_state_seq_save_file /
 * llama_state_seq_load_file): what a server's slot save and restore write, so that a
 * long prompt is decoded once and survives a restart.
 *
 * The file, little-endian, the cells as the host's float32 (context.h's transposed rows):
 *
 *   "SIFTSEQ1"                                 magic and version
 *   u32 n_layer_kv, n_head_kv, head_dim, n_vocab  the cache's shape (layers that store K/V): another model's file is refused
 *   u32 n_tokens, i32 tokens[n_tokens]         what the cells hold (the caller's prompt cache)
 *   u32 n, u8 valid[n]                         the sequence's end and its valid map
 *   f32 K[n] then V[n] for each (layer, KV head, dim), in that order
 *
 * Loading is hostile-input parsing: every count is checked against the context, and the
 * file's size must be exactly what its header announces before any cell is touched, so a
 * short, long or corrupt file is an error that leaves the sequence as it was. (An I/O error
 * in the middle of the cells, after that check, empties the sequence instead.)
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/status.h"
#include "model/context.h"

static const char MAGIC[8] = {'S', 'I', 'F', 'T', 'S', 'E', 'Q', '1'};

typedef struct seq_header {
    uint32_t n_layer, n_head_kv, head_dim, n_vocab;
} seq_header;

static seq_header shape_of(const sift_context *ctx)
{
    const sift__hparams *hp = &ctx->model->hp;
    return (seq_header){(uint32_t)hp->n_layer_kv, (uint32_t)hp->n_head_kv, (uint32_t)hp->head_dim, (uint32_t)hp->n_vocab};
}

/* The file's size for n_tokens ids and n cells. */
static uint64_t file_size(const seq_header *h, uint64_t n_tokens, uint64_t n)
{
    return sizeof MAGIC + sizeof *h + 4 + 4 * n_tokens + 4 + n + 2 * (uint64_t)h->n_layer * h->n_head_kv * h->head_dim * n * 4;
}

size_t sift_state_seq_save_file(sift_context *ctx, const char *path, sift_seq_id seq, const sift_token *tokens, size_t n_tokens,
                                sift_error *err)
{
    if (!ctx || !path || seq < 0 || seq >= ctx->n_seq || (n_tokens && !tokens) || n_tokens > (size_t)ctx->n_ctx_seq) {
        sift__error_set(err, SIFT_E_INVAL, "state save: bad arguments (sequence %d, %zu tokens)", (int)seq, n_tokens);
        return 0;
    }
    if (ctx->rs_conv) { /* the file holds K/V cells only, not a recurrent state */
        sift__error_set(err, SIFT_E_UNSUPPORTED, "state save: %s keeps a recurrent state, which sequence files do not hold",
                        ctx->model->hp.arch);
        return 0;
    }
    const kv_seq *sq = &ctx->seqs[seq];
    const seq_header h = shape_of(ctx);
    FILE *f = fopen(path, "wb");
    if (!f) {
        sift__error_set(err, SIFT_E_IO, "state save: cannot create %s", path);
        return 0;
    }
    const uint32_t nt = (uint32_t)n_tokens, n = (uint32_t)sq->n;
    bool ok = fwrite(MAGIC, sizeof MAGIC, 1, f) == 1 && fwrite(&h, sizeof h, 1, f) == 1 && fwrite(&nt, 4, 1, f) == 1 &&
              (!nt || fwrite(tokens, 4, nt, f) == nt) && fwrite(&n, 4, 1, f) == 1 && (!n || fwrite(sq->valid, 1, n, f) == n);
    const size_t ld = (size_t)ctx->n_ctx_seq;
    for (uint32_t l = 0; ok && n && l < h.n_layer; l++)
        for (uint32_t kh = 0; ok && kh < h.n_head_kv; kh++)
            for (uint32_t d = 0; ok && d < h.head_dim; d++)
                ok = fwrite(kv_row(ctx, ctx->k_cache, (int)l, seq, (int)kh) + d * ld, 4, n, f) == n &&
                     fwrite(kv_row(ctx, ctx->v_cache, (int)l, seq, (int)kh) + d * ld, 4, n, f) == n;
    ok = fclose(f) == 0 && ok;
    if (!ok) {
        remove(path);
        sift__error_set(err, SIFT_E_IO, "state save: cannot write %s", path);
        return 0;
    }
    return (size_t)file_size(&h, nt, n);
}

size_t sift_state_seq_load_file(sift_context *ctx, const char *path, sift_seq_id seq, sift_token *tokens_out, size_t cap,
                                size_t *n_tokens_out, sift_error *err)
{
    if (n_tokens_out) *n_tokens_out = 0;
    if (!ctx || !path || seq < 0 || seq >= ctx->n_seq || (cap && !tokens_out)) {
        sift__error_set(err, SIFT_E_INVAL, "state load: bad arguments (sequence %d)", (int)seq);
        return 0;
    }
    if (ctx->rs_conv) {
        sift__error_set(err, SIFT_E_UNSUPPORTED, "state load: %s keeps a recurrent state, which sequence files do not hold",
                        ctx->model->hp.arch);
        return 0;
    }
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        if (f) fclose(f);
        sift__error_set(err, SIFT_E_IO, "state load: cannot open %s", path);
        return 0;
    }
    char magic[sizeof MAGIC];
    seq_header h;
    uint32_t nt = 0, n = 0;
    const seq_header want = shape_of(ctx);
    size_t got = 0;
    int status = SIFT_E_FORMAT;
    const char *why = NULL;
    if (fread(magic, sizeof magic, 1, f) != 1 || memcmp(magic, MAGIC, sizeof MAGIC) != 0) why = "not a sift sequence file";
    else if (fread(&h, sizeof h, 1, f) != 1 || memcmp(&h, &want, sizeof h) != 0) why = "written for a model of another shape";
    else if (fread(&nt, 4, 1, f) != 1 || nt > (uint32_t)ctx->n_ctx_seq) why = "more tokens than the sequence holds";
    else if (nt > cap) status = SIFT_E_INVAL, why = "more tokens than the caller's buffer holds";
    else if (nt && fread(tokens_out, 4, nt, f) != nt) why = "truncated";
    else if (fread(&n, 4, 1, f) != 1 || n > (uint32_t)ctx->n_ctx_seq) why = "more cells than the sequence has";
    else if ((uint64_t)st.st_size != file_size(&h, nt, n)) why = "its size is not what its header says";
    for (uint32_t i = 0; !why && i < nt; i++)
        if (tokens_out[i] < 0 || (uint32_t)tokens_out[i] >= h.n_vocab) why = "a token id out of the vocabulary";
    if (why) {
        fclose(f);
        sift__error_set(err, status, "state load: %s: %s", path, why);
        return 0;
    }
    /* the size is right: from here on the cells are replaced */
    kv_seq *sq = &ctx->seqs[seq];
    memset(sq->valid, 0, (size_t)ctx->n_ctx_seq);
    bool ok = !n || fread(sq->valid, 1, n, f) == n;
    const size_t ld = (size_t)ctx->n_ctx_seq;
    for (uint32_t l = 0; ok && n && l < h.n_layer; l++)
        for (uint32_t kh = 0; ok && kh < h.n_head_kv; kh++)
            for (uint32_t d = 0; ok && d < h.head_dim; d++)
                ok = fread(kv_row(ctx, ctx->k_cache, (int)l, seq, (int)kh) + d * ld, 4, n, f) == n &&
                     fread(kv_row(ctx, ctx->v_cache, (int)l, seq, (int)kh) + d * ld, 4, n, f) == n;
    fclose(f);
    int32_t holes = 0, end = 0;
    for (uint32_t c = 0; ok && c < n; c++) {
        sq->valid[c] = sq->valid[c] != 0;
        if (sq->valid[c]) end = (int32_t)c + 1;
    }
    for (int32_t c = 0; ok && c < end; c++) holes += !sq->valid[c];
    if (!ok) {
        memset(sq->valid, 0, (size_t)ctx->n_ctx_seq);
        sq->n = sq->n_holes = 0;
        sift__error_set(err, SIFT_E_IO, "state load: %s: read error (the sequence is empty now)", path);
        return 0;
    }
    sq->n = end;
    sq->n_holes = holes;
    got = (size_t)file_size(&h, nt, n);
    if (n_tokens_out) *n_tokens_out = nt;
    return got;
}
