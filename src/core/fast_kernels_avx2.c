/*
 * fast_kernels_avx2.c - the fast-path kernels with AVX2 + FMA (8 floats a vector), for CPUs
 * without AVX-512. Same results as the scalar kernels in fast_kernels.c (see fast_kernels.h); only
 * entered after a run-time CPU check. AVX2 has no compress instruction: the lanes a
 * compare selects are moved to the front by a permutation looked up from the movemask
 * (compact_lut) and stored as a whole vector, so output buffers need 8 entries of slack
 * (the workspace has 64). FMA is used where
 * glibc's expf uses it (exp_exact) and in the approximation's polynomial, as the scalar
 * version does with fmaf, so the bits agree.
 */
#if defined(__x86_64__)
#include <float.h>
#include <immintrin.h>
#include <math.h>

#include "core/fast_kernels.h"

#define LANES 8

static inline __m256i tail_mask(size_t left)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const int k = left >= LANES ? LANES : (int)left;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), lane);
}

static inline __m256 load_or(const float *p, size_t left, float fill)
{
    if (left >= LANES) return _mm256_loadu_ps(p);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, tail_mask(left)), _mm256_castsi256_ps(tail_mask(left)));
}

static inline unsigned lanes_of(size_t left) { return left >= LANES ? 0xFFu : (1u << left) - 1u; }

/* lane numbers of the set bits of an 8-bit mask, packed (AVX2 has no compress): a
 * vpermd by this row moves the selected lanes to the front */
static const uint8_t compact_lut[256][8] = {
    {0,0,0,0,0,0,0,0}, {0,0,0,0,0,0,0,0}, {1,0,0,0,0,0,0,0}, {0,1,0,0,0,0,0,0}, {2,0,0,0,0,0,0,0}, {0,2,0,0,0,0,0,0}, {1,2,0,0,0,0,0,0}, {0,1,2,0,0,0,0,0},
    {3,0,0,0,0,0,0,0}, {0,3,0,0,0,0,0,0}, {1,3,0,0,0,0,0,0}, {0,1,3,0,0,0,0,0}, {2,3,0,0,0,0,0,0}, {0,2,3,0,0,0,0,0}, {1,2,3,0,0,0,0,0}, {0,1,2,3,0,0,0,0},
    {4,0,0,0,0,0,0,0}, {0,4,0,0,0,0,0,0}, {1,4,0,0,0,0,0,0}, {0,1,4,0,0,0,0,0}, {2,4,0,0,0,0,0,0}, {0,2,4,0,0,0,0,0}, {1,2,4,0,0,0,0,0}, {0,1,2,4,0,0,0,0},
    {3,4,0,0,0,0,0,0}, {0,3,4,0,0,0,0,0}, {1,3,4,0,0,0,0,0}, {0,1,3,4,0,0,0,0}, {2,3,4,0,0,0,0,0}, {0,2,3,4,0,0,0,0}, {1,2,3,4,0,0,0,0}, {0,1,2,3,4,0,0,0},
    {5,0,0,0,0,0,0,0}, {0,5,0,0,0,0,0,0}, {1,5,0,0,0,0,0,0}, {0,1,5,0,0,0,0,0}, {2,5,0,0,0,0,0,0}, {0,2,5,0,0,0,0,0}, {1,2,5,0,0,0,0,0}, {0,1,2,5,0,0,0,0},
    {3,5,0,0,0,0,0,0}, {0,3,5,0,0,0,0,0}, {1,3,5,0,0,0,0,0}, {0,1,3,5,0,0,0,0}, {2,3,5,0,0,0,0,0}, {0,2,3,5,0,0,0,0}, {1,2,3,5,0,0,0,0}, {0,1,2,3,5,0,0,0},
    {4,5,0,0,0,0,0,0}, {0,4,5,0,0,0,0,0}, {1,4,5,0,0,0,0,0}, {0,1,4,5,0,0,0,0}, {2,4,5,0,0,0,0,0}, {0,2,4,5,0,0,0,0}, {1,2,4,5,0,0,0,0}, {0,1,2,4,5,0,0,0},
    {3,4,5,0,0,0,0,0}, {0,3,4,5,0,0,0,0}, {1,3,4,5,0,0,0,0}, {0,1,3,4,5,0,0,0}, {2,3,4,5,0,0,0,0}, {0,2,3,4,5,0,0,0}, {1,2,3,4,5,0,0,0}, {0,1,2,3,4,5,0,0},
    {6,0,0,0,0,0,0,0}, {0,6,0,0,0,0,0,0}, {1,6,0,0,0,0,0,0}, {0,1,6,0,0,0,0,0}, {2,6,0,0,0,0,0,0}, {0,2,6,0,0,0,0,0}, {1,2,6,0,0,0,0,0}, {0,1,2,6,0,0,0,0},
    {3,6,0,0,0,0,0,0}, {0,3,6,0,0,0,0,0}, {1,3,6,0,0,0,0,0}, {0,1,3,6,0,0,0,0}, {2,3,6,0,0,0,0,0}, {0,2,3,6,0,0,0,0}, {1,2,3,6,0,0,0,0}, {0,1,2,3,6,0,0,0},
    {4,6,0,0,0,0,0,0}, {0,4,6,0,0,0,0,0}, {1,4,6,0,0,0,0,0}, {0,1,4,6,0,0,0,0}, {2,4,6,0,0,0,0,0}, {0,2,4,6,0,0,0,0}, {1,2,4,6,0,0,0,0}, {0,1,2,4,6,0,0,0},
    {3,4,6,0,0,0,0,0}, {0,3,4,6,0,0,0,0}, {1,3,4,6,0,0,0,0}, {0,1,3,4,6,0,0,0}, {2,3,4,6,0,0,0,0}, {0,2,3,4,6,0,0,0}, {1,2,3,4,6,0,0,0}, {0,1,2,3,4,6,0,0},
    {5,6,0,0,0,0,0,0}, {0,5,6,0,0,0,0,0}, {1,5,6,0,0,0,0,0}, {0,1,5,6,0,0,0,0}, {2,5,6,0,0,0,0,0}, {0,2,5,6,0,0,0,0}, {1,2,5,6,0,0,0,0}, {0,1,2,5,6,0,0,0},
    {3,5,6,0,0,0,0,0}, {0,3,5,6,0,0,0,0}, {1,3,5,6,0,0,0,0}, {0,1,3,5,6,0,0,0}, {2,3,5,6,0,0,0,0}, {0,2,3,5,6,0,0,0}, {1,2,3,5,6,0,0,0}, {0,1,2,3,5,6,0,0},
    {4,5,6,0,0,0,0,0}, {0,4,5,6,0,0,0,0}, {1,4,5,6,0,0,0,0}, {0,1,4,5,6,0,0,0}, {2,4,5,6,0,0,0,0}, {0,2,4,5,6,0,0,0}, {1,2,4,5,6,0,0,0}, {0,1,2,4,5,6,0,0},
    {3,4,5,6,0,0,0,0}, {0,3,4,5,6,0,0,0}, {1,3,4,5,6,0,0,0}, {0,1,3,4,5,6,0,0}, {2,3,4,5,6,0,0,0}, {0,2,3,4,5,6,0,0}, {1,2,3,4,5,6,0,0}, {0,1,2,3,4,5,6,0},
    {7,0,0,0,0,0,0,0}, {0,7,0,0,0,0,0,0}, {1,7,0,0,0,0,0,0}, {0,1,7,0,0,0,0,0}, {2,7,0,0,0,0,0,0}, {0,2,7,0,0,0,0,0}, {1,2,7,0,0,0,0,0}, {0,1,2,7,0,0,0,0},
    {3,7,0,0,0,0,0,0}, {0,3,7,0,0,0,0,0}, {1,3,7,0,0,0,0,0}, {0,1,3,7,0,0,0,0}, {2,3,7,0,0,0,0,0}, {0,2,3,7,0,0,0,0}, {1,2,3,7,0,0,0,0}, {0,1,2,3,7,0,0,0},
    {4,7,0,0,0,0,0,0}, {0,4,7,0,0,0,0,0}, {1,4,7,0,0,0,0,0}, {0,1,4,7,0,0,0,0}, {2,4,7,0,0,0,0,0}, {0,2,4,7,0,0,0,0}, {1,2,4,7,0,0,0,0}, {0,1,2,4,7,0,0,0},
    {3,4,7,0,0,0,0,0}, {0,3,4,7,0,0,0,0}, {1,3,4,7,0,0,0,0}, {0,1,3,4,7,0,0,0}, {2,3,4,7,0,0,0,0}, {0,2,3,4,7,0,0,0}, {1,2,3,4,7,0,0,0}, {0,1,2,3,4,7,0,0},
    {5,7,0,0,0,0,0,0}, {0,5,7,0,0,0,0,0}, {1,5,7,0,0,0,0,0}, {0,1,5,7,0,0,0,0}, {2,5,7,0,0,0,0,0}, {0,2,5,7,0,0,0,0}, {1,2,5,7,0,0,0,0}, {0,1,2,5,7,0,0,0},
    {3,5,7,0,0,0,0,0}, {0,3,5,7,0,0,0,0}, {1,3,5,7,0,0,0,0}, {0,1,3,5,7,0,0,0}, {2,3,5,7,0,0,0,0}, {0,2,3,5,7,0,0,0}, {1,2,3,5,7,0,0,0}, {0,1,2,3,5,7,0,0},
    {4,5,7,0,0,0,0,0}, {0,4,5,7,0,0,0,0}, {1,4,5,7,0,0,0,0}, {0,1,4,5,7,0,0,0}, {2,4,5,7,0,0,0,0}, {0,2,4,5,7,0,0,0}, {1,2,4,5,7,0,0,0}, {0,1,2,4,5,7,0,0},
    {3,4,5,7,0,0,0,0}, {0,3,4,5,7,0,0,0}, {1,3,4,5,7,0,0,0}, {0,1,3,4,5,7,0,0}, {2,3,4,5,7,0,0,0}, {0,2,3,4,5,7,0,0}, {1,2,3,4,5,7,0,0}, {0,1,2,3,4,5,7,0},
    {6,7,0,0,0,0,0,0}, {0,6,7,0,0,0,0,0}, {1,6,7,0,0,0,0,0}, {0,1,6,7,0,0,0,0}, {2,6,7,0,0,0,0,0}, {0,2,6,7,0,0,0,0}, {1,2,6,7,0,0,0,0}, {0,1,2,6,7,0,0,0},
    {3,6,7,0,0,0,0,0}, {0,3,6,7,0,0,0,0}, {1,3,6,7,0,0,0,0}, {0,1,3,6,7,0,0,0}, {2,3,6,7,0,0,0,0}, {0,2,3,6,7,0,0,0}, {1,2,3,6,7,0,0,0}, {0,1,2,3,6,7,0,0},
    {4,6,7,0,0,0,0,0}, {0,4,6,7,0,0,0,0}, {1,4,6,7,0,0,0,0}, {0,1,4,6,7,0,0,0}, {2,4,6,7,0,0,0,0}, {0,2,4,6,7,0,0,0}, {1,2,4,6,7,0,0,0}, {0,1,2,4,6,7,0,0},
    {3,4,6,7,0,0,0,0}, {0,3,4,6,7,0,0,0}, {1,3,4,6,7,0,0,0}, {0,1,3,4,6,7,0,0}, {2,3,4,6,7,0,0,0}, {0,2,3,4,6,7,0,0}, {1,2,3,4,6,7,0,0}, {0,1,2,3,4,6,7,0},
    {5,6,7,0,0,0,0,0}, {0,5,6,7,0,0,0,0}, {1,5,6,7,0,0,0,0}, {0,1,5,6,7,0,0,0}, {2,5,6,7,0,0,0,0}, {0,2,5,6,7,0,0,0}, {1,2,5,6,7,0,0,0}, {0,1,2,5,6,7,0,0},
    {3,5,6,7,0,0,0,0}, {0,3,5,6,7,0,0,0}, {1,3,5,6,7,0,0,0}, {0,1,3,5,6,7,0,0}, {2,3,5,6,7,0,0,0}, {0,2,3,5,6,7,0,0}, {1,2,3,5,6,7,0,0}, {0,1,2,3,5,6,7,0},
    {4,5,6,7,0,0,0,0}, {0,4,5,6,7,0,0,0}, {1,4,5,6,7,0,0,0}, {0,1,4,5,6,7,0,0}, {2,4,5,6,7,0,0,0}, {0,2,4,5,6,7,0,0}, {1,2,4,5,6,7,0,0}, {0,1,2,4,5,6,7,0},
    {3,4,5,6,7,0,0,0}, {0,3,4,5,6,7,0,0}, {1,3,4,5,6,7,0,0}, {0,1,3,4,5,6,7,0}, {2,3,4,5,6,7,0,0}, {0,2,3,4,5,6,7,0}, {1,2,3,4,5,6,7,0}, {0,1,2,3,4,5,6,7},
};

static inline __m256i lut_row(unsigned m) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)compact_lut[m])); }

/* positions base + lane of the lanes set in m, to out (8 entries written; returns how many
 * are meant) */
static inline size_t put_bits(uint32_t *out, unsigned m, size_t base)
{
    const __m256i pos = _mm256_add_epi32(_mm256_set1_epi32((int)base), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_storeu_si256((__m256i *)out, _mm256_permutevar8x32_epi32(pos, lut_row(m)));
    return (size_t)__builtin_popcount(m);
}

static inline float hmax(__m256 v)
{
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a = _mm_max_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

static inline double hsum(__m256d v)
{
    __m128d a = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(a, _mm_unpackhi_pd(a, a)));
}

static float k_max(const float *x, size_t n, float init, bool *nan)
{
    __m256 a = _mm256_set1_ps(init), b = a, c = a, d = a, bad = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 4 * LANES <= n; i += 4 * LANES) {
        const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        const __m256 v2 = _mm256_loadu_ps(x + i + 16), v3 = _mm256_loadu_ps(x + i + 24);
        a = _mm256_max_ps(v0, a), b = _mm256_max_ps(v1, b), c = _mm256_max_ps(v2, c), d = _mm256_max_ps(v3, d);
        bad = _mm256_or_ps(bad, _mm256_or_ps(_mm256_cmp_ps(v0, v1, _CMP_UNORD_Q), _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q)));
    }
    for (; i < n; i += LANES) {
        const __m256 v = load_or(x + i, n - i, init);
        a = _mm256_max_ps(v, a);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    *nan |= _mm256_movemask_ps(bad) != 0;
    return hmax(_mm256_max_ps(_mm256_max_ps(a, b), _mm256_max_ps(c, d)));
}

static size_t k_argmax(const float *x, size_t n)
{
    /* pass 1: the maximum and NaNs; pass 2: the first index holding it (early exit) */
    bool nan = false;
    const float mx = k_max(x, n, -INFINITY, &nan);
    if (nan) return SIZE_MAX;
    if (mx == -INFINITY) return 0;
    const __m256 t = _mm256_set1_ps(mx);
    for (size_t i = 0; i < n; i += LANES) {
        const unsigned m = lanes_of(n - i) & (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(load_or(x + i, n - i, -INFINITY), t, _CMP_EQ_OQ));
        if (m) return i + (size_t)__builtin_ctz(m);
    }
    return 0; /* not reached */
}

static size_t k_count_ge(const float *x, size_t n, float thr)
{
    const __m256 t = _mm256_set1_ps(thr);
    size_t k = 0;
    for (size_t i = 0; i < n; i += LANES)
        k += (size_t)__builtin_popcount(lanes_of(n - i) & (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(load_or(x + i, n - i, 0.0f), t, _CMP_GE_OQ)));
    return k;
}

static size_t k_next_above(const float *x, size_t from, size_t n, float thr)
{
    const __m256 t = _mm256_set1_ps(thr);
    size_t i = from;
    for (; i + 4 * LANES <= n; i += 4 * LANES) {
        const __m256 c0 = _mm256_cmp_ps(_mm256_loadu_ps(x + i), t, _CMP_GT_OQ);
        const __m256 c1 = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 8), t, _CMP_GT_OQ);
        const __m256 c2 = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 16), t, _CMP_GT_OQ);
        const __m256 c3 = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 24), t, _CMP_GT_OQ);
        if (!_mm256_testz_ps(_mm256_or_ps(_mm256_or_ps(c0, c1), _mm256_or_ps(c2, c3)), _mm256_castsi256_ps(_mm256_set1_epi32(-1)))) {
            const unsigned m = (unsigned)_mm256_movemask_ps(c0) | (unsigned)_mm256_movemask_ps(c1) << 8 |
                               (unsigned)_mm256_movemask_ps(c2) << 16 | (unsigned)_mm256_movemask_ps(c3) << 24;
            return i + (size_t)__builtin_ctz(m);
        }
    }
    for (; i < n; i += LANES) {
        const unsigned m = lanes_of(n - i) & (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(load_or(x + i, n - i, 0.0f), t, _CMP_GT_OQ));
        if (m) return i + (size_t)__builtin_ctz(m);
    }
    return n;
}

static size_t k_collect_minp(const float *x, size_t n, float lp, uint32_t *idx, float *max_out)
{
    float m = -FLT_MAX;
    size_t k = 0;
    for (size_t g = 0; g < n; g += 64) {
        const __m256 thr = _mm256_set1_ps(m + lp);
        __m256 mv = _mm256_set1_ps(-FLT_MAX);
        for (size_t i = g; i < g + 64 && i < n; i += LANES) {
            const __m256 v = load_or(x + i, n - i, -FLT_MAX);
            const unsigned hit = lanes_of(n - i) & (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(v, thr, _CMP_GE_OQ));
            if (hit) k += put_bits(idx + k, hit, i);
            mv = _mm256_max_ps(v, mv);
        }
        const float bm = hmax(mv);
        m = m < bm ? bm : m;
    }
    *max_out = m;
    return k;
}

static inline __m256 approx8(__m256 d)
{
    const __m256 y = _mm256_mul_ps(d, _mm256_set1_ps(SIFT__AX_LOG2E));
    const __m256 kf = _mm256_round_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 f = _mm256_sub_ps(y, kf);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(SIFT__AX_C4), f, _mm256_set1_ps(SIFT__AX_C3));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(SIFT__AX_C2));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(SIFT__AX_C1));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(SIFT__AX_C0));
    const __m256i e = _mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(_mm256_cvtps_epi32(kf), 23));
    const __m256 ok = _mm256_cmp_ps(d, _mm256_set1_ps(SIFT__AX_LO), _CMP_GE_OQ);
    return _mm256_and_ps(ok, _mm256_castsi256_ps(e));
}

static size_t k_approx_blocks(const float *x, size_t n, float dh, double *blk, float *bmax, uint32_t *head, float *max_out,
                              bool *nan)
{
    const __m256 hv = _mm256_set1_ps(dh);
    __m256 run = _mm256_set1_ps(-INFINITY), bad = _mm256_setzero_ps();
    size_t nh = 0;
    for (size_t b = 0; b * SIFT__BLK < n; b++) {
        const size_t s0i = b * SIFT__BLK, e = s0i + SIFT__BLK < n ? s0i + SIFT__BLK : n;
        __m256 m0 = run;
        for (size_t i = s0i; i < e; i += LANES) {
            const __m256 v = load_or(x + i, e - i, -INFINITY);
            m0 = _mm256_max_ps(v, m0);
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        }
        const float M = hmax(m0);
        run = _mm256_set1_ps(M);
        bmax[b] = M;
        __m256 acc = _mm256_setzero_ps();
        for (size_t i = s0i; i < e; i += LANES) {
            const __m256 live = _mm256_castsi256_ps(tail_mask(e - i));
            const __m256 d = _mm256_sub_ps(load_or(x + i, e - i, 0.0f), run);
            const __m256 hc = _mm256_and_ps(live, _mm256_cmp_ps(d, hv, _CMP_GE_OQ));
            const unsigned hm = (unsigned)_mm256_movemask_ps(hc);
            if (hm) nh += put_bits(head + nh, hm, i);
            acc = _mm256_add_ps(acc, _mm256_and_ps(_mm256_andnot_ps(hc, live), approx8(d)));
        }
        blk[b] = hsum(_mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(acc)), _mm256_cvtps_pd(_mm256_extractf128_ps(acc, 1))));
    }
    *max_out = hmax(run);
    *nan |= _mm256_movemask_ps(bad) != 0;
    return nh;
}

static void k_approx_exp(const float *x, size_t n, float M, float *out)
{
    const __m256 mv = _mm256_set1_ps(M);
    for (size_t i = 0; i < n; i += LANES) {
        const __m256 a = approx8(_mm256_sub_ps(load_or(x + i, n - i, 0.0f), mv));
        if (n - i >= LANES) _mm256_storeu_ps(out + i, a);
        else _mm256_maskstore_ps(out + i, tail_mask(n - i), a);
    }
}

static size_t k_collect_ge(const float *x, size_t n, float thr, uint32_t *idx, float *max_out, bool *nan, float *cmax)
{
    const __m256 tv = _mm256_set1_ps(thr);
    __m256 all = _mm256_set1_ps(-INFINITY), bad = _mm256_setzero_ps();
    size_t k = 0;
    for (size_t c = 0; c < n; c += SIFT__CHUNK) {
        const size_t end = c + SIFT__CHUNK < n ? c + SIFT__CHUNK : n;
        __m256 a = _mm256_set1_ps(-INFINITY);
        for (size_t i = c; i < end; i += LANES) {
            const __m256 v = load_or(x + i, end - i, -INFINITY);
            a = _mm256_max_ps(v, a);
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            const unsigned h = lanes_of(end - i) & (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(v, tv, _CMP_GE_OQ));
            if (h) k += put_bits(idx + k, h, i);
        }
        if (cmax) cmax[c / SIFT__CHUNK] = hmax(a);
        all = _mm256_max_ps(a, all);
    }
    *max_out = hmax(all);
    *nan |= _mm256_movemask_ps(bad) != 0;
    return k;
}

/* glibc's __expf_fma on 4 lanes (see fast_kernels_avx512.c) */
static inline __m128 expf4(__m128 x)
{
    const __m256d xd = _mm256_cvtps_pd(x);
    const __m256d inv = _mm256_set1_pd(SIFT__EXPF_INVLN2N), shift = _mm256_set1_pd(SIFT__EXPF_SHIFT);
    __m256d kd = _mm256_fmadd_pd(inv, xd, shift);
    const __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shift);
    const __m256d r = _mm256_fmsub_pd(inv, xd, kd);
    __m256i t = _mm256_i64gather_epi64((const long long *)sift__exp2f_tab, _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 47));
    const __m256d z = _mm256_fmadd_pd(r, _mm256_set1_pd(SIFT__EXPF_C0), _mm256_set1_pd(SIFT__EXPF_C1));
    const __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(SIFT__EXPF_C2), _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(z, r2, y);
    y = _mm256_mul_pd(y, _mm256_castsi256_pd(t));
    __m128 f = _mm256_cvtpd_ps(y);
    const __m128 uf = _mm_cmp_ps(x, _mm_set1_ps(SIFT__EXPF_UFLOW), _CMP_LT_OQ);
    const __m128 mu = _mm_andnot_ps(uf, _mm_cmp_ps(x, _mm_set1_ps(SIFT__EXPF_MAYUFLOW), _CMP_LT_OQ));
    const __m128 of = _mm_cmp_ps(x, _mm_set1_ps(SIFT__EXPF_OFLOW), _CMP_GT_OQ);
    const __m128 nn = _mm_cmp_ps(x, x, _CMP_UNORD_Q);
    f = _mm_andnot_ps(uf, f);
    f = _mm_blendv_ps(f, _mm_set1_ps(0x1p-149f), mu);
    f = _mm_blendv_ps(f, _mm_set1_ps(INFINITY), of);
    f = _mm_blendv_ps(f, _mm_add_ps(x, x), nn);
    return f;
}

static void k_exp_exact(const float *d, size_t n, float M, float *out)
{
    const __m128 mv = _mm_set1_ps(M);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128 a = _mm_sub_ps(_mm_loadu_ps(d + i), mv), b = _mm_sub_ps(_mm_loadu_ps(d + i + 4), mv);
        _mm_storeu_ps(out + i, expf4(a));
        _mm_storeu_ps(out + i + 4, expf4(b));
    }
    if (i < n) {
        float in[8] = {0}, res[8];
        for (size_t k = i; k < n; k++) in[k - i] = d[k] - M;
        _mm_storeu_ps(res, expf4(_mm_loadu_ps(in)));
        _mm_storeu_ps(res + 4, expf4(_mm_loadu_ps(in + 4)));
        for (size_t k = i; k < n; k++) out[k] = res[k - i];
    }
}

static bool k_grid_sum_f(const float *e, size_t m, float u, double *sum);

static bool k_exp_grid_f(const float *d, size_t m, float u, float *e, double *sum)
{
    k_exp_exact(d, m, 0.0f, e);
    return k_grid_sum_f(e, m, u, sum);
}

static size_t k_compact_d(const float *x, size_t from, size_t to, float M, float dcut, float *d_out)
{
    const __m256 mv = _mm256_set1_ps(M), cv = _mm256_set1_ps(dcut);
    size_t m = 0;
    for (size_t i = from; i < to; i += LANES) {
        const __m256 d = _mm256_sub_ps(load_or(x + i, to - i, 0.0f), mv);
        const unsigned mc = lanes_of(to - i) & (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(d, cv, _CMP_GE_OQ));
        _mm256_storeu_ps(d_out + m, _mm256_permutevar8x32_ps(d, lut_row(mc)));
        m += (size_t)__builtin_popcount(mc);
    }
    return m;
}

static bool k_grid_sum_f(const float *e, size_t m, float u, double *sum)
{
    const __m256 K = _mm256_set1_ps(12582912.0f * u), half = _mm256_set1_ps(0.5f * u), big = _mm256_set1_ps(4194304.0f * u);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256d s0 = _mm256_setzero_pd(), s1 = s0;
    __m256 fail = _mm256_setzero_ps();
    for (size_t i = 0; i < m; i += LANES) {
        const __m256 v = load_or(e + i, m - i, 0.0f);
        const __m256 r = _mm256_sub_ps(_mm256_add_ps(v, K), K);
        const __m256 diff = _mm256_and_ps(_mm256_sub_ps(v, r), absmask);
        fail = _mm256_or_ps(fail, _mm256_or_ps(_mm256_cmp_ps(v, big, _CMP_NLT_UQ), _mm256_cmp_ps(diff, half, _CMP_EQ_OQ)));
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(r)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(r, 1)));
    }
    if (_mm256_movemask_ps(fail)) return false;
    *sum = hsum(_mm256_add_pd(s0, s1));
    return true;
}

static bool k_grid_sum_d(const float *e, size_t m, double u, double *sum)
{
    const __m256d K = _mm256_set1_pd(0x1.8p52 * u), half = _mm256_set1_pd(0.5 * u), big = _mm256_set1_pd(0x1p51 * u);
    const __m256d absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, fail = _mm256_setzero_pd();
    for (size_t i = 0; i < m; i += LANES) {
        const __m256 v8 = load_or(e + i, m - i, 0.0f);
        const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v8)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v8, 1));
        const __m256d rl = _mm256_sub_pd(_mm256_add_pd(lo, K), K), rh = _mm256_sub_pd(_mm256_add_pd(hi, K), K);
        const __m256d dl = _mm256_and_pd(_mm256_sub_pd(lo, rl), absmask), dh = _mm256_and_pd(_mm256_sub_pd(hi, rh), absmask);
        fail = _mm256_or_pd(fail, _mm256_or_pd(_mm256_or_pd(_mm256_cmp_pd(lo, big, _CMP_NLT_UQ), _mm256_cmp_pd(hi, big, _CMP_NLT_UQ)),
                                              _mm256_or_pd(_mm256_cmp_pd(dl, half, _CMP_EQ_OQ), _mm256_cmp_pd(dh, half, _CMP_EQ_OQ))));
        s0 = _mm256_add_pd(s0, rl);
        s1 = _mm256_add_pd(s1, rh);
    }
    if (_mm256_movemask_pd(fail)) return false;
    *sum = hsum(_mm256_add_pd(s0, s1));
    return true;
}

const sift__fk sift__fk_avx2 = {
    .name = "avx2",
    .max = k_max,
    .argmax = k_argmax,
    .count_ge = k_count_ge,
    .next_above = k_next_above,
    .collect_minp = k_collect_minp,
    .collect_ge = k_collect_ge,
    .approx_blocks = k_approx_blocks,
    .approx_exp = k_approx_exp,
    .exp_exact = k_exp_exact,
    .compact_d = k_compact_d,
    .exp_grid_f = k_exp_grid_f,
    .grid_sum_f = k_grid_sum_f,
    .grid_sum_d = k_grid_sum_d,
    .exp_exact_ok = true,
    .fast_dist = true,
};
#endif
