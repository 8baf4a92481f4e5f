/* peer_logits.c - peer_gen.h's logit recipe (see peer_logits.h for why it is written this way). */
#include "peer_logits.h"

#include <stdbool.h>

static uint64_t sm64(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double u01(uint64_t *s) { return (double)(sm64(s) >> 11) * 0x1p-53; }

/* Irwin-Hall(4) scaled to unit variance: close enough to a normal, and exact everywhere. */
static double gauss(uint64_t *s)
{
    double acc = u01(s);
    acc += u01(s);
    acc += u01(s);
    acc += u01(s);
    return (acc - 2.0) * 0x1.bb67ae8584caap+0;
}

/* ln(x) for x >= 1 by halving into [1, 2) and the atanh series: no libm, so no ulp drift. */
static double ln_series(double x)
{
    int k = 0;
    while (x >= 2.0) {
        x *= 0.5;
        k++;
    }
    const double y = (x - 1.0) / (x + 1.0), y2 = y * y;
    double term = y, sum = 0.0;
    for (int n = 0; n < 40; n++) {
        sum += term / (double)(2 * n + 1);
        term *= y2;
    }
    return 2.0 * sum + (double)k * 0x1.62e42fefa39efp-1;
}

void sift_peer_logits(float *out, int n_vocab, uint64_t seed, uint32_t index)
{
    uint64_t st = seed ^ ((uint64_t)(index + 1u) * 0xD1B54A32D192ED03ULL);
    for (int i = 0; i < n_vocab; i++) out[i] = (float)(2.0 * gauss(&st));
    const int H = 24 + (int)(sm64(&st) % 177); /* head size 24 .. 200 */
    const double a = 0.6 + 1.4 * u01(&st);
    const double delta = 3.0 + 6.0 * u01(&st);
    const double top = ln_series((double)n_vocab) + 2.0 + delta;
    int32_t chosen[24 + 177];
    for (int r = 0; r < H; r++) {
        int32_t id;
        bool dup;
        do { /* distinct ids: a repeated draw is drawn again */
            id = (int32_t)(sm64(&st) % (uint64_t)n_vocab);
            dup = false;
            for (int q = 0; q < r && !dup; q++) dup = chosen[q] == id;
        } while (dup);
        chosen[r] = id;
        out[id] = (float)(top - a * ln_series((double)(r + 1)) + 0.5 * gauss(&st));
    }
}
