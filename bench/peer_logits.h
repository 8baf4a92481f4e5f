/* peer_logits.h - the synthetic logits of ../shared/peer/peer_gen.h, bit for bit.
 *
 * The sampling and grammar benchmarks time sift on exactly the vectors llama.cpp's
 * peer_bench and peer_grammar time, so the two columns of their tables compare like with
 * like. The recipe ("Logit recipe" in ../shared/peer/README.md) uses integer operations and
 * correctly rounded double + - * / only (its logarithm is a series, not libm's log), so
 * every machine and compiler produces the same floats: a gaussian background of 2*N(0,1)
 * and a Zipf-like head of 24..200 tokens placed at random ids. */
#ifndef SIFT_BENCH_PEER_LOGITS_H
#define SIFT_BENCH_PEER_LOGITS_H

#include <stdint.h>

/* The seed both peers use. */
#define SIFT_PEER_LOGIT_SEED 0x13198A2E03707344ULL

/* Fill out[0 .. n_vocab) with vector number `index` of the recipe for `seed`. */
void sift_peer_logits(float *out, int n_vocab, uint64_t seed, uint32_t index);

#endif
