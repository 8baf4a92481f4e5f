/*
 * chain.c - the smallest complete use of libsift: build llama.cpp's usual chain, sample a
 * few tokens from made-up logits, look at what the samplers left, free everything.
 *
 *   cc chain.c $(pkg-config --cflags --libs --static sift) -o chain && ./chain
 */
#include <math.h>
#include <stdio.h>

#include <sift.h>

enum { N_VOCAB = 1000 };

/* Stand-in for a model: logits that favour a token that moves with the step. */
static void fake_logits(float *logits, int step)
{
    for (int i = 0; i < N_VOCAB; i++) logits[i] = -0.01f * (float)((i * 37 + step * 11) % N_VOCAB);
    logits[(step * 7) % N_VOCAB] += 8.0f;
}

int main(void)
{
    sift_chain *chain = sift_chain_new(sift_chain_default_params());
    if (!chain) return 1;
    /* the chain takes ownership of each sampler */
    sift_chain_add(chain, sift_sampler_init_penalties(64, 1.1f, 0.0f, 0.0f));
    sift_chain_add(chain, sift_sampler_init_top_k(40));
    sift_chain_add(chain, sift_sampler_init_top_p(0.95f, 1));
    sift_chain_add(chain, sift_sampler_init_temp(0.8f));
    sift_chain_add(chain, sift_sampler_init_dist(1234)); /* SIFT_DEFAULT_SEED = random seed */

    static float logits[N_VOCAB];
    for (int step = 0; step < 8; step++) {
        fake_logits(logits, step);
        sift_token tok = sift_chain_sample(chain, logits, N_VOCAB); /* fill, apply, accept */
        if (tok == SIFT_TOKEN_NULL) break;
        const sift_candidates *c = sift_chain_candidates(chain); /* what the samplers left */
        printf("step %d: token %d (%zu candidates left)\n", step, tok, c->size);
    }
    sift_chain_free(chain); /* frees the samplers too */
    return 0;
}
