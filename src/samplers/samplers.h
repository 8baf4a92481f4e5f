/*
 * samplers.h - what the built-in sampler files share internally.
 *
 * Random samplers expose their vtables so sift_sampler_get_seed() (seed.c) can recognise
 * them, as llama.cpp's llama_sampler_get_seed() does, and a seed getter each.
 */
#ifndef SIFT_SAMPLERS_H
#define SIFT_SAMPLERS_H

#include "core/candidates.h"
#include "core/rng.h"
#include "core/sampler.h"
#include "sift.h"

extern const sift_sampler_i sift__dist_iface;
extern const sift_sampler_i sift__mirostat_iface;
extern const sift_sampler_i sift__mirostat_v2_iface;
extern const sift_sampler_i sift__adaptive_p_iface;

uint32_t sift__dist_seed(const sift_sampler *smpl);
uint32_t sift__mirostat_seed(const sift_sampler *smpl);
uint32_t sift__mirostat_v2_seed(const sift_sampler *smpl);
uint32_t sift__adaptive_p_seed(const sift_sampler *smpl);

/* llama.cpp's int(x) for a float on x86 (cvttss2si): truncation, INT_MIN for NaN and
 * values outside int range. */
static inline int sift__float_to_int(float x)
{
    if (x > -2147483649.0f && x < 2147483648.0f) return (int)x;
    return (-2147483647 - 1);
}

#endif
