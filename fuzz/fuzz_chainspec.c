/*
 * fuzz_chainspec.c - libFuzzer target: arbitrary chain specs run on arbitrary logits.
 *
 * Input: byte 0 = n_vocab - 1 (1..64 tokens), then n_vocab float32 logits taken from the
 * input (NaN, inf, denormals included; missing bytes are zero), then the rest is the chain
 * spec text. A spec that parses is run for 4 steps, cloned, reset and run again. Nothing
 * may crash, hang, leak or trip ASan/UBSan, whatever the spec or the logits.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const int32_t n_vocab = (int32_t)(data[0] & 63) + 1;
    data++, size--;
    float logits[64] = {0};
    size_t nb = (size_t)n_vocab * sizeof(float);
    if (nb > size) nb = size;
    memcpy(logits, data, nb);
    data += nb, size -= nb;

    char *spec = malloc(size + 1);
    if (!spec) return 0;
    memcpy(spec, data, size);
    spec[size] = 0;

    sift_chain_env env = {.n_vocab = n_vocab, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 7};
    sift_error err;
    sift_chain *chain = sift_chain_from_spec(spec, &env, &err);
    if (chain) {
        for (int t = 0; t < 4; t++) {
            sift_token tok = sift_chain_sample(chain, logits, n_vocab);
            if (tok != SIFT_TOKEN_NULL && (tok < 0 || tok >= n_vocab)) abort(); /* a token from nowhere */
            sift_candidates *c = sift_chain_candidates(chain);
            sift_token ids[4];
            float pr[4];
            sift_candidates_top(c, 4, ids, NULL, pr);
            sift_candidates_probs(c);
        }
        sift_chain *copy = sift_chain_clone(chain);
        sift_chain_reset(chain);
        sift_chain_sample(chain, logits, n_vocab);
        if (copy) sift_chain_sample(copy, logits, n_vocab);
        sift_chain_free(copy);
        sift_chain_free(chain);
    }
    free(spec);
    return 0;
}
