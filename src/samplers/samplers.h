/*
 * samplers.h - what the built-in sampler files share internally.
 *
 * (Random samplers answer sift_sampler_get_seed() through their vtable's get_seed, so
 * nothing has to recognise them by address, as llama.cpp's llama_sampler_get_seed() does.)
 */
#ifndef SIFT_SAMPLERS_H
#define SIFT_SAMPLERS_H

#include "core/candidates.h"
#include "core/rng.h"
#include "core/sampler.h"
#include "sift.h"

/* llama.cpp's int(x) for a float on x86 (cvttss2si): truncation, INT_MIN for NaN and
 * values outside int range. */
static inline int sift__float_to_int(float x)
{
    if (x > -2147483649.0f && x < 2147483648.0f) return (int)x;
    return (-2147483647 - 1);
}

#endif
