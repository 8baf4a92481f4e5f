/*
 * batch.c - sift_batch: allocation and appending (llama_batch_init, common_batch_add).
 *
 * One allocation holds every array, so a batch is freed with one call and cannot be half
 * made. seq_id[i] points at row i of a [capacity][seq_capacity] block.
 */
#include <stdlib.h>
#include <string.h>

#include "sift.h"

sift_status sift_batch_init(sift_batch *b, int32_t n_tokens_max, int32_t n_seq_max)
{
    if (!b) return SIFT_E_INVAL;
    memset(b, 0, sizeof *b);
    if (n_tokens_max < 1 || n_seq_max < 1 || n_tokens_max > (1 << 24) || n_seq_max > 4096) return SIFT_E_INVAL;
    const size_t n = (size_t)n_tokens_max, ns = (size_t)n_seq_max;
    /* pointer arrays first (strictest alignment), then the 4-byte arrays, the bytes last */
    const size_t bytes = n * sizeof(sift_seq_id *) + n * (sizeof(sift_token) + sizeof(sift_pos) + sizeof(int32_t)) +
                         n * ns * sizeof(sift_seq_id) + n;
    char *mem = calloc(1, bytes);
    if (!mem) return SIFT_E_NOMEM;
    b->seq_id = (sift_seq_id **)mem;
    mem += n * sizeof(sift_seq_id *);
    b->token = (sift_token *)mem;
    mem += n * sizeof(sift_token);
    b->pos = (sift_pos *)mem;
    mem += n * sizeof(sift_pos);
    b->n_seq_id = (int32_t *)mem;
    mem += n * sizeof(int32_t);
    for (size_t i = 0; i < n; i++) b->seq_id[i] = (sift_seq_id *)mem + i * ns;
    mem += n * ns * sizeof(sift_seq_id);
    b->logits = (int8_t *)mem;
    b->capacity = n_tokens_max;
    b->seq_capacity = n_seq_max;
    return SIFT_OK;
}

void sift_batch_free(sift_batch *b)
{
    if (!b) return;
    free(b->seq_id); /* the start of the one allocation */
    memset(b, 0, sizeof *b);
}

void sift_batch_clear(sift_batch *b)
{
    if (b) b->n_tokens = 0;
}

sift_status sift_batch_add(sift_batch *b, sift_token token, sift_pos pos, const sift_seq_id *seq_ids, int32_t n_seq,
                           bool logits)
{
    if (!b || !b->token || b->n_tokens >= b->capacity || n_seq < 1 || n_seq > b->seq_capacity || !seq_ids)
        return SIFT_E_INVAL;
    const int32_t i = b->n_tokens;
    b->token[i] = token;
    b->pos[i] = pos;
    b->n_seq_id[i] = n_seq;
    memcpy(b->seq_id[i], seq_ids, (size_t)n_seq * sizeof *seq_ids);
    b->logits[i] = logits;
    b->n_tokens++;
    return SIFT_OK;
}
