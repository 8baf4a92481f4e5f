/*
 * sift_test.h - small helpers shared by the cmocka tests (header-only).
 */
#ifndef SIFT_TEST_H
#define SIFT_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "sift.h"

/* ../shared/reference/sampling/logits_v<V>.bin, or NULL (the test then fails: the data is
 * part of the test suite's inputs). */
static inline float *sift_test_ref_logits(int vocab, uint32_t *n_vocab, uint32_t *n_vec)
{
    const char *shared = getenv("SIFT_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/reference/sampling/logits_v%d.bin", shared ? shared : "../shared", vocab);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s (set SIFT_SHARED)\n", path);
        return NULL;
    }
    uint32_t h[2];
    float *x = NULL;
    *n_vocab = *n_vec = 0;
    if (fread(h, 4, 2, f) == 2) {
        x = malloc((size_t)h[0] * h[1] * sizeof *x);
        if (x && fread(x, sizeof *x, (size_t)h[0] * h[1], f) != (size_t)h[0] * h[1]) {
            free(x);
            x = NULL;
        }
        *n_vocab = h[0];
        *n_vec = h[1];
    }
    fclose(f);
    return x;
}

/* candidates owning their arrays, filled from logits */
static inline void sift_test_cand(sift_candidates *c, const float *logits, size_t n)
{
    assert_int_equal(sift_candidates_init(c, n), SIFT_OK);
    assert_int_equal(sift_candidates_fill(c, logits, n), SIFT_OK);
}

/* apply one sampler (which is freed) */
static inline void sift_test_apply(sift_sampler *s, sift_candidates *c)
{
    assert_non_null(s);
    sift_sampler_apply(s, c);
    sift_sampler_free(s);
}

static inline bool sift_test_has(const sift_candidates *c, sift_token t)
{
    for (size_t i = 0; i < c->size; i++)
        if (c->id[i] == t) return true;
    return false;
}

static inline size_t sift_test_index_of(const sift_candidates *c, sift_token t)
{
    for (size_t i = 0; i < c->size; i++)
        if (c->id[i] == t) return i;
    fail_msg("token %d not among the candidates", (int)t);
    return 0;
}

#define assert_float_near(a, b, eps) assert_true(fabs((double)(a) - (double)(b)) <= (eps))

#endif
