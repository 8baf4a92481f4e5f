/*
 * seed.c - sift_sampler_get_seed(): the seed a random sampler actually uses, as
 * llama.cpp's llama_sampler_get_seed() (dist, mirostat, mirostat v2; adaptive-p too,
 * since it selects like them).
 */
#include "samplers/samplers.h"

uint32_t sift_sampler_get_seed(const sift_sampler *smpl)
{
    if (!smpl) return SIFT_DEFAULT_SEED;
    if (smpl->iface == &sift__dist_iface) return sift__dist_seed(smpl);
    if (smpl->iface == &sift__mirostat_iface) return sift__mirostat_seed(smpl);
    if (smpl->iface == &sift__mirostat_v2_iface) return sift__mirostat_v2_seed(smpl);
    if (smpl->iface == &sift__adaptive_p_iface) return sift__adaptive_p_seed(smpl);
    return SIFT_DEFAULT_SEED;
}
