/*
 * rng.h - random numbers exactly as llama.cpp draws them (libstdc++ <random> in C).
 *
 * llama.cpp's samplers use std::mt19937 and three libstdc++ distributions; reproducing
 * its token streams means reproducing each of them bit for bit:
 *
 *   sift__rng_uniform_double  std::uniform_real_distribution<double>(0, 1): libstdc++'s
 *                            generate_canonical<double, 53> takes TWO 32-bit outputs,
 *                            (x0 + x1 * 2^32) / 2^64 rounded once to double, and clamps
 *                            a result of 1.0 to the largest double below 1 (dist).
 *   sift__rng_uniform_float   std::uniform_real_distribution<float>(0, 1): ONE output,
 *                            float(x0) / 2^32, clamped below 1 (xtc).
 *   sift__rng_discrete        std::discrete_distribution<int> over float weights: weights
 *                            widened to double, summed in order, each divided by the
 *                            sum, partial sums in order with the last forced to 1.0, then
 *                            lower_bound of one uniform double draw. Fewer than two
 *                            weights: returns 0 WITHOUT drawing (mirostat, adaptive-p).
 *
 * The generator is the standard MT19937 (Matsumoto & Nishimura), seeded the standard way.
 * SIFT_DEFAULT_SEED asks for a random seed (getrandom, falling back to the clock).
 */
#ifndef SIFT_CORE_RNG_H
#define SIFT_CORE_RNG_H

#include <stddef.h>
#include <stdint.h>

#define SIFT_MT_N 624

typedef struct sift__rng {
    uint32_t mt[SIFT_MT_N];
    uint32_t idx; /* next word of mt[] to temper; SIFT_MT_N = regenerate first */
} sift__rng;

/* std::mt19937(seed) / rng.seed(seed) */
void sift__rng_seed(sift__rng *rng, uint32_t seed);
/* rng(): the next tempered 32-bit output */
uint32_t sift__rng_next(sift__rng *rng);
double sift__rng_uniform_double(sift__rng *rng);
float sift__rng_uniform_float(sift__rng *rng);
/* Index drawn from weights w[0..n) as std::discrete_distribution<int>; cp is scratch for
 * n doubles (the cumulative probabilities). */
size_t sift__rng_discrete(sift__rng *rng, const float *w, size_t n, double *cp);

/* llama.cpp's get_rng_seed(): seed itself, or a random seed for SIFT_DEFAULT_SEED. */
uint32_t sift__seed_resolve(uint32_t seed);

#endif
