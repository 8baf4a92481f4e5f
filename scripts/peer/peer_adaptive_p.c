/*
 * peer_adaptive_p.c - llama.cpp's adaptive_p sampler after any peer chain spec, for
 * scripts/peer_diff.py (../shared/peer's peer_replay has no adaptive_p). Built on the fly
 * against the peer's libllama; not part of sift.
 *
 *   peer_adaptive_p LOGITS STEPS "PREFIX_SPEC" TARGET DECAY SEED
 */
#include <stdio.h>
#include <stdlib.h>

#include "llama_peer.h"
#include "peer_chainspec.h"

struct llama_sampler *llama_sampler_init_adaptive_p(float target, float decay, uint32_t seed);

int main(int argc, char **argv)
{
    if (argc != 7) return 2;
    FILE *f = fopen(argv[1], "rb");
    uint32_t h[2];
    if (!f || fread(h, 4, 2, f) != 2) return 1;
    float *x = malloc((size_t)h[0] * h[1] * 4);
    if (!x || fread(x, 4, (size_t)h[0] * h[1], f) != (size_t)h[0] * h[1]) return 1;
    fclose(f);
    char err[256];
    struct llama_sampler *c = peer_chainspec_build(argv[3], (int32_t)h[0], 0, err, sizeof err);
    if (!c) return fprintf(stderr, "%s\n", err), 2;
    llama_sampler_chain_add(c, llama_sampler_init_adaptive_p((float)atof(argv[4]), (float)atof(argv[5]), (uint32_t)atol(argv[6])));
    llama_token_data *cur = malloc(h[0] * sizeof *cur);
    const int steps = atoi(argv[2]);
    for (int t = 0; t < steps; t++) {
        const float *v = x + (size_t)(t % h[1]) * h[0];
        for (size_t i = 0; i < h[0]; i++) cur[i] = (llama_token_data){(llama_token)i, v[i], 0.0f};
        llama_token_data_array arr = {cur, h[0], -1, false};
        llama_sampler_apply(c, &arr);
        if (arr.selected < 0 || (size_t)arr.selected >= arr.size) return 1;
        llama_token tok = arr.data[arr.selected].id;
        llama_sampler_accept(c, tok);
        printf("%d\n", tok);
    }
    llama_sampler_free(c);
    free(cur);
    free(x);
    return 0;
}
