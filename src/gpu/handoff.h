/*
 * handoff.h - the device's surviving candidates as a CPU tail receives them (host logic).
 *
 * A row's handoff is n entries (ids, logits, and probabilities when SIFT_GPU_PROBS says
 * they are valid) plus the flags the device kept for the CPU chain's state. The device
 * leaves a long list in id order even where the CPU chain would have sorted it (sorting
 * long lists is the CPU's job at this point, and cheap next to everything else there);
 * unpacking restores the CPU's order - descending logits, ties by ascending id, which is
 * a stable sort of the id-ordered list - so the tail sees the array the all-CPU chain
 * would have had (up to the order of tied logits, see docs/gpu.md).
 */
#ifndef SIFT_GPU_HANDOFF_H
#define SIFT_GPU_HANDOFF_H

#include "gpu/device_types.h"
#include "gpu/sampler_math.h"
#include "sift.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fill cand (capacity >= out->n) from one row of the handoff buffers. scratch holds
 * out->n keys (used when the list must be sorted here). SIFT_E_INVAL when the row does
 * not fit or holds no list (the device selected a token). */
sift_status sift__gpu_handoff_unpack(const sift__gpu_out *out, const int32_t *ids, const float *logits,
                                     const float *probs, uint64_t *scratch, sift_candidates *cand);

/* Are two candidate arrays the same (size, ids and logits bit for bit, sorted, the
 * probabilities flag and, when set, the probabilities)? On a difference, describes the
 * first one in msg (cap bytes) and returns 0. For tests. */
int sift__gpu_candidates_same(const sift_candidates *a, const sift_candidates *b, char *msg, size_t cap);

/* The same for sets: the same ids with the same logits, in any order. */
int sift__gpu_candidates_same_set(const sift_candidates *a, const sift_candidates *b, char *msg, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
