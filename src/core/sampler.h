/*
 * sampler.h - internal helpers for writing built-in samplers.
 */
#ifndef SIFT_CORE_SAMPLER_H
#define SIFT_CORE_SAMPLER_H

#include "sift.h"

/* A do-nothing sampler named `name` (a static string such as "?top-k"): what a disabled
 * parameter value gives, as llama.cpp's llama_sampler_init_empty. */
sift_sampler *sift__sampler_noop(const char *name);

/* Allocate a zeroed context of `size` bytes and wrap it with iface; NULL (nothing leaked)
 * on out of memory. The iface's free must release the context with free(). */
sift_sampler *sift__sampler_new(const sift_sampler_i *iface, size_t size);

#endif
