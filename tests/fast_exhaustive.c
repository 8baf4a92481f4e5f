/*
 * fast_exhaustive.c - the two claims about expf that the fast paths rest on, checked for
 * EVERY float input they can see (d = logit - max <= 0, plus the positive range up to
 * expf's overflow, where exp_exact is also defined):
 *
 *   1. every kernel variant's exp_exact is this libm's expf, bit for bit;
 *   2. sift__approx_exp (and every variant's approx_exp, which the unit test shows to be the
 *      same bits) is within SIFT__APPROX_EPS relative of expf where expf >= 2^-125, and
 *      within SIFT__APPROX_ETA absolute below that.
 *
 * Prints the maximum relative error found (docs/performance.md quotes it). About 2.3e9
 * inputs: label "slow" (tests/fast.cmake).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fast_kernels.h"

enum { BLOCK = 1 << 16 };

int main(void)
{
    const sift__fk *v[4];
    const int nv = sift__fk_all(v, 4);
    float *d = malloc(BLOCK * sizeof *d), *want = malloc(BLOCK * sizeof *want), *got = malloc(BLOCK * sizeof *got);
    if (!d || !want || !got) return 1;
    double worst = 0.0;
    float worst_at = 0.0f;
    unsigned long long n = 0, bad = 0;
    /* bit patterns: every negative float (incl. -0, -inf, NaNs) and 0 .. 0x42B20000 (89.0) */
    const uint64_t ranges[2][2] = {{0x80000000ull, 0x100000000ull}, {0x00000000ull, 0x42B20001ull}};
    for (int r = 0; r < 2; r++) {
        for (uint64_t b0 = ranges[r][0]; b0 < ranges[r][1]; b0 += BLOCK) {
            const size_t m = ranges[r][1] - b0 < BLOCK ? (size_t)(ranges[r][1] - b0) : BLOCK;
            for (size_t i = 0; i < m; i++) {
                const uint32_t bits = (uint32_t)(b0 + i);
                memcpy(&d[i], &bits, sizeof bits);
                want[i] = expf(d[i]);
            }
            for (int k = 0; k < nv; k++) {
                v[k]->exp_exact(d, m, 0.0f, got);
                for (size_t i = 0; i < m; i++) {
                    if (memcmp(&got[i], &want[i], sizeof got[i]) && !(got[i] != got[i] && want[i] != want[i])) {
                        if (bad++ < 10) fprintf(stderr, "%s: exp_exact(%a) = %a, libm %a\n", v[k]->name, d[i], got[i], want[i]);
                    }
                }
            }
            if (r == 0) { /* the approximation, on d <= 0 */
                for (size_t i = 0; i < m; i++) {
                    if (d[i] != d[i]) continue;
                    const float a = sift__approx_exp(d[i]);
                    const double err = fabs((double)a - (double)want[i]);
                    if (want[i] >= 0x1p-125f) {
                        const double rel = err / want[i];
                        if (rel > worst) worst = rel, worst_at = d[i];
                    } else if (err > SIFT__APPROX_ETA) {
                        if (bad++ < 10) fprintf(stderr, "approx_exp(%a) = %a, expf %a\n", d[i], a, want[i]);
                    }
                }
            }
            n += m;
        }
    }
    printf("fast_exhaustive: %llu inputs, %d variant(s) of exp_exact: %llu mismatches; approx_exp max relative error %.4g at %a "
           "(bound %g)\n", n, nv, bad, worst, worst_at, SIFT__APPROX_EPS);
    free(d);
    free(want);
    free(got);
    return bad == 0 && worst <= SIFT__APPROX_EPS ? 0 : 1;
}
