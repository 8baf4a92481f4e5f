/*
 * fast_kernels_avx512.c - the fast-path kernels with AVX-512 (F, BW, VL, DQ; 16 floats a vector).
 * Same results as the scalar kernels in fast_kernels.c (see fast_kernels.h for the contracts); only
 * entered after a run-time CPU check (fast_kernels.c). Compress-to-register plus an unaligned
 * 16-lane store is used instead of compress-to-memory (slow on Zen 4), so index buffers
 * need 16 entries of slack past their logical end (the workspace has them).
 */
#if defined(__x86_64__)
#include <float.h>
#include <immintrin.h>
#include <math.h>

#include "core/fast_kernels.h"

#define LANES 16

static inline __mmask16 tail_mask(size_t left) { return left >= LANES ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u); }

static inline __m512i iota_from(size_t i) { return _mm512_add_epi32(_mm512_set1_epi32((int)i), _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)); }

/* write the lanes of v selected by m to out (compacted); returns how many */
static inline size_t put_idx(uint32_t *out, __mmask16 m, __m512i v)
{
    _mm512_storeu_si512(out, _mm512_maskz_compress_epi32(m, v));
    return (size_t)__builtin_popcount(m);
}

static float k_max(const float *x, size_t n, float init, bool *nan)
{
    __m512 a = _mm512_set1_ps(init), b = a;
    __mmask16 bad = 0;
    size_t i = 0;
    for (; i + 4 * LANES <= n; i += 4 * LANES) {
        const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + LANES);
        const __m512 v2 = _mm512_loadu_ps(x + i + 2 * LANES), v3 = _mm512_loadu_ps(x + i + 3 * LANES);
        /* max_ps(v, m) = v > m ? v : m: a NaN v never wins */
        a = _mm512_max_ps(v0, a), b = _mm512_max_ps(v1, b);
        a = _mm512_max_ps(v2, a), b = _mm512_max_ps(v3, b);
        bad |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v2, v3, _CMP_UNORD_Q);
    }
    for (; i < n; i += LANES) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(init), m, x + i);
        a = _mm512_max_ps(v, a);
        bad |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
    *nan |= bad != 0;
    return _mm512_reduce_max_ps(_mm512_max_ps(a, b));
}

static size_t k_argmax(const float *x, size_t n)
{
    /* pass 1: the maximum and NaNs; pass 2 (cached now): the first entry equal to it */
    bool nan = false;
    const float mx = k_max(x, n, -INFINITY, &nan);
    if (nan) return SIZE_MAX;
    if (mx == -INFINITY) return 0; /* nothing is > -inf: x[0] stays */
    const __m512 t = _mm512_set1_ps(mx);
    size_t i = 0;
    for (; i + 4 * LANES <= n; i += 4 * LANES) {
        const __mmask16 m0 = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), t, _CMP_EQ_OQ);
        const __mmask16 m1 = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i + LANES), t, _CMP_EQ_OQ);
        const __mmask16 m2 = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i + 2 * LANES), t, _CMP_EQ_OQ);
        const __mmask16 m3 = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i + 3 * LANES), t, _CMP_EQ_OQ);
        if (m0 | m1 | m2 | m3) {
            if (m0) return i + (size_t)__builtin_ctz(m0);
            if (m1) return i + LANES + (size_t)__builtin_ctz(m1);
            if (m2) return i + 2 * LANES + (size_t)__builtin_ctz(m2);
            return i + 3 * LANES + (size_t)__builtin_ctz(m3);
        }
    }
    for (; i < n; i += LANES) {
        const __mmask16 m = tail_mask(n - i) & _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(tail_mask(n - i), x + i), t, _CMP_EQ_OQ);
        if (m) return i + (size_t)__builtin_ctz(m);
    }
    return 0; /* not reached */
}

static size_t k_count_ge(const float *x, size_t n, float thr)
{
    const __m512 t = _mm512_set1_ps(thr);
    size_t k = 0, i = 0;
    for (; i + 2 * LANES <= n; i += 2 * LANES)
        k += (size_t)__builtin_popcount(_mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), t, _CMP_GE_OQ)) +
             (size_t)__builtin_popcount(_mm512_cmp_ps_mask(_mm512_loadu_ps(x + i + LANES), t, _CMP_GE_OQ));
    for (; i < n; i += LANES) {
        const __mmask16 m = tail_mask(n - i);
        k += (size_t)__builtin_popcount(m & _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(m, x + i), t, _CMP_GE_OQ));
    }
    return k;
}

static size_t k_next_above(const float *x, size_t from, size_t n, float thr)
{
    const __m512 t = _mm512_set1_ps(thr);
    size_t i = from;
    for (; i + 4 * LANES <= n; i += 4 * LANES) {
        const __mmask16 m0 = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), t, _CMP_GT_OQ);
        const __mmask16 m1 = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i + 16), t, _CMP_GT_OQ);
        const __mmask16 m2 = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i + 32), t, _CMP_GT_OQ);
        const __mmask16 m3 = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i + 48), t, _CMP_GT_OQ);
        if (m0 | m1 | m2 | m3) {
            if (m0) return i + (size_t)__builtin_ctz(m0);
            if (m1) return i + 16 + (size_t)__builtin_ctz(m1);
            if (m2) return i + 32 + (size_t)__builtin_ctz(m2);
            return i + 48 + (size_t)__builtin_ctz(m3);
        }
    }
    for (; i < n; i += LANES) {
        const __mmask16 m = tail_mask(n - i) & _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(tail_mask(n - i), x + i), t, _CMP_GT_OQ);
        if (m) return i + (size_t)__builtin_ctz(m);
    }
    return n;
}

static size_t k_collect_minp(const float *x, size_t n, float lp, uint32_t *idx, float *max_out)
{
    float m = -FLT_MAX;
    size_t k = 0;
    const __m512 lo = _mm512_set1_ps(-FLT_MAX);
    for (size_t g = 0; g < n; g += 64) {
        const __m512 thr = _mm512_set1_ps(m + lp);
        __m512 mv = lo;
        for (size_t i = g; i < g + 64 && i < n; i += LANES) {
            const __mmask16 t = tail_mask(n - i);
            const __m512 v = _mm512_mask_loadu_ps(lo, t, x + i);
            const __mmask16 hit = t & _mm512_cmp_ps_mask(v, thr, _CMP_GE_OQ);
            if (hit) k += put_idx(idx + k, hit, iota_from(i));
            mv = _mm512_max_ps(v, mv);
        }
        const float bm = _mm512_reduce_max_ps(mv);
        m = m < bm ? bm : m;
    }
    *max_out = m;
    return k;
}

/* approx_exp on 16 lanes (the scalar sift__approx_exp, operation for operation) */
static inline __m512 approx16(__m512 d)
{
    const __m512 y = _mm512_mul_ps(d, _mm512_set1_ps(SIFT__AX_LOG2E));
    const __m512 kf = _mm512_roundscale_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(y, kf);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(SIFT__AX_C4), f, _mm512_set1_ps(SIFT__AX_C3));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(SIFT__AX_C2));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(SIFT__AX_C1));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(SIFT__AX_C0));
    const __m512i e = _mm512_add_epi32(_mm512_castps_si512(p), _mm512_slli_epi32(_mm512_cvtps_epi32(kf), 23));
    const __mmask16 ok = _mm512_cmp_ps_mask(d, _mm512_set1_ps(SIFT__AX_LO), _CMP_GE_OQ);
    return _mm512_maskz_mov_ps(ok, _mm512_castsi512_ps(e));
}

static size_t k_approx_blocks(const float *x, size_t n, float dh, double *blk, float *bmax, uint32_t *head, float *max_out,
                              bool *nan)
{
    const __m512 hv = _mm512_set1_ps(dh), ninf = _mm512_set1_ps(-INFINITY);
    __m512 run = ninf; /* the running maximum, broadcast */
    __mmask16 bad = 0;
    size_t nh = 0;
    for (size_t b = 0; b * SIFT__BLK < n; b++) {
        const size_t s0i = b * SIFT__BLK, e = s0i + SIFT__BLK < n ? s0i + SIFT__BLK : n;
        __m512 m0 = run, m1 = run;
        size_t i = s0i;
        for (; i + 2 * LANES <= e; i += 2 * LANES) { /* the block's maximum (it is in L1 afterwards) */
            const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + LANES);
            m0 = _mm512_max_ps(v0, m0), m1 = _mm512_max_ps(v1, m1);
            bad |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q);
        }
        for (; i < e; i += LANES) {
            const __m512 v = _mm512_mask_loadu_ps(ninf, tail_mask(e - i), x + i);
            m0 = _mm512_max_ps(v, m0);
            bad |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        }
        const float M = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
        run = _mm512_set1_ps(M);
        bmax[b] = M;
        __m512 acc = _mm512_setzero_ps();
        for (i = s0i; i < e; i += LANES) {
            const __mmask16 t = tail_mask(e - i);
            const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(t, x + i), run);
            const __mmask16 hm = t & _mm512_cmp_ps_mask(d, hv, _CMP_GE_OQ);
            if (hm) nh += put_idx(head + nh, hm, iota_from(i));
            acc = _mm512_mask_add_ps(acc, t & ~hm, acc, approx16(d));
        }
        blk[b] = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(acc)),
                                                    _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)))));
    }
    *max_out = _mm512_reduce_max_ps(run);
    *nan |= bad != 0;
    return nh;
}

static void k_approx_exp(const float *x, size_t n, float M, float *out)
{
    const __m512 mv = _mm512_set1_ps(M);
    for (size_t i = 0; i < n; i += LANES) {
        const __mmask16 t = tail_mask(n - i);
        _mm512_mask_storeu_ps(out + i, t, approx16(_mm512_sub_ps(_mm512_maskz_loadu_ps(t, x + i), mv)));
    }
}

static size_t k_collect_ge(const float *x, size_t n, float thr, uint32_t *idx, float *max_out, bool *nan, float *cmax)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY), tv = _mm512_set1_ps(thr);
    __m512 all = ninf;
    __mmask16 bad = 0;
    size_t k = 0;
    for (size_t c = 0; c < n; c += SIFT__CHUNK) {
        const size_t end = c + SIFT__CHUNK < n ? c + SIFT__CHUNK : n;
        __m512 a = ninf, b = ninf;
        size_t i = c;
        for (; i + 4 * LANES <= end; i += 4 * LANES) {
            const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + LANES);
            const __m512 v2 = _mm512_loadu_ps(x + i + 2 * LANES), v3 = _mm512_loadu_ps(x + i + 3 * LANES);
            a = _mm512_max_ps(v0, a), b = _mm512_max_ps(v1, b);
            a = _mm512_max_ps(v2, a), b = _mm512_max_ps(v3, b);
            bad |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v2, v3, _CMP_UNORD_Q);
            /* one test for 64 entries: max(v0..v3) >= thr (NaN lanes never pass) */
            const __m512 m4 = _mm512_max_ps(_mm512_max_ps(v0, v1), _mm512_max_ps(v2, v3));
            if (_mm512_cmp_ps_mask(m4, tv, _CMP_GE_OQ)) {
                const __mmask16 h0 = _mm512_cmp_ps_mask(v0, tv, _CMP_GE_OQ), h1 = _mm512_cmp_ps_mask(v1, tv, _CMP_GE_OQ);
                const __mmask16 h2 = _mm512_cmp_ps_mask(v2, tv, _CMP_GE_OQ), h3 = _mm512_cmp_ps_mask(v3, tv, _CMP_GE_OQ);
                if (h0) k += put_idx(idx + k, h0, iota_from(i));
                if (h1) k += put_idx(idx + k, h1, iota_from(i + LANES));
                if (h2) k += put_idx(idx + k, h2, iota_from(i + 2 * LANES));
                if (h3) k += put_idx(idx + k, h3, iota_from(i + 3 * LANES));
            }
        }
        for (; i < end; i += LANES) {
            const __mmask16 t = tail_mask(end - i);
            const __m512 v = _mm512_mask_loadu_ps(ninf, t, x + i);
            a = _mm512_max_ps(v, a);
            bad |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            const __mmask16 h = t & _mm512_cmp_ps_mask(v, tv, _CMP_GE_OQ);
            if (h) k += put_idx(idx + k, h, iota_from(i));
        }
        a = _mm512_max_ps(a, b);
        if (cmax) cmax[c / SIFT__CHUNK] = _mm512_reduce_max_ps(a);
        all = _mm512_max_ps(a, all);
    }
    *max_out = _mm512_reduce_max_ps(all);
    *nan |= bad != 0;
    return k;
}

/* glibc's __expf_fma on 8 lanes, in double, then rounded to float (see fast_kernels.h) */
static inline __m256 expf8(__m256 x, __m512i t0, __m512i t1, __m512i t2, __m512i t3)
{
    const __m512d xd = _mm512_cvtps_pd(x);
    const __m512d inv = _mm512_set1_pd(SIFT__EXPF_INVLN2N), shift = _mm512_set1_pd(SIFT__EXPF_SHIFT);
    __m512d kd = _mm512_fmadd_pd(inv, xd, shift);
    const __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, shift);
    const __m512d r = _mm512_fmsub_pd(inv, xd, kd);
    const __m512i lo = _mm512_permutex2var_epi64(t0, ki, t1), hi = _mm512_permutex2var_epi64(t2, ki, t3);
    __m512i t = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo, hi);
    t = _mm512_add_epi64(t, _mm512_slli_epi64(ki, 47));
    const __m512d z = _mm512_fmadd_pd(r, _mm512_set1_pd(SIFT__EXPF_C0), _mm512_set1_pd(SIFT__EXPF_C1));
    const __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(SIFT__EXPF_C2), _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(z, r2, y);
    y = _mm512_mul_pd(y, _mm512_castsi512_pd(t));
    __m256 f = _mm512_cvtpd_ps(y);
    /* glibc's special cases: below UFLOW 0 (also -inf), below MAYUFLOW the smallest
     * subnormal, above OFLOW +inf (also +inf), NaN -> x + x */
    const __mmask8 uf = _mm256_cmp_ps_mask(x, _mm256_set1_ps(SIFT__EXPF_UFLOW), _CMP_LT_OQ);
    const __mmask8 mu = _mm256_cmp_ps_mask(x, _mm256_set1_ps(SIFT__EXPF_MAYUFLOW), _CMP_LT_OQ) & ~uf;
    const __mmask8 of = _mm256_cmp_ps_mask(x, _mm256_set1_ps(SIFT__EXPF_OFLOW), _CMP_GT_OQ);
    const __mmask8 nn = _mm256_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    f = _mm256_mask_mov_ps(f, uf, _mm256_setzero_ps());
    f = _mm256_mask_mov_ps(f, mu, _mm256_set1_ps(0x1p-149f));
    f = _mm256_mask_mov_ps(f, of, _mm256_set1_ps(INFINITY));
    f = _mm256_mask_add_ps(f, nn, x, x);
    return f;
}

static void k_exp_exact(const float *d, size_t n, float M, float *out)
{
    const __m256 mv = _mm256_set1_ps(M);
    const __m512i t0 = _mm512_loadu_si512(sift__exp2f_tab), t1 = _mm512_loadu_si512(sift__exp2f_tab + 8);
    const __m512i t2 = _mm512_loadu_si512(sift__exp2f_tab + 16), t3 = _mm512_loadu_si512(sift__exp2f_tab + 24);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 a = _mm256_sub_ps(_mm256_loadu_ps(d + i), mv), b = _mm256_sub_ps(_mm256_loadu_ps(d + i + 8), mv);
        _mm256_storeu_ps(out + i, expf8(a, t0, t1, t2, t3));
        _mm256_storeu_ps(out + i + 8, expf8(b, t0, t1, t2, t3));
    }
    for (; i < n; i += 8) {
        const __mmask8 m = n - i >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (n - i)) - 1u);
        _mm256_mask_storeu_ps(out + i, m, expf8(_mm256_sub_ps(_mm256_maskz_loadu_ps(m, d + i), mv), t0, t1, t2, t3));
    }
}

static bool k_exp_grid_f(const float *d, size_t m, float u, float *e, double *sum)
{
    const __m512i t0 = _mm512_loadu_si512(sift__exp2f_tab), t1 = _mm512_loadu_si512(sift__exp2f_tab + 8);
    const __m512i t2 = _mm512_loadu_si512(sift__exp2f_tab + 16), t3 = _mm512_loadu_si512(sift__exp2f_tab + 24);
    const __m512 K = _mm512_set1_ps(12582912.0f * u), half = _mm512_set1_ps(0.5f * u), big = _mm512_set1_ps(4194304.0f * u);
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    __m512d s0 = _mm512_setzero_pd(), s1 = s0;
    __mmask16 fail = 0;
    for (size_t i = 0; i < m; i += LANES) {
        const __mmask16 t = tail_mask(m - i);
        const __m512 dv = _mm512_maskz_loadu_ps(t, d + i);
        const __m256 lo = expf8(_mm512_castps512_ps256(dv), t0, t1, t2, t3);
        const __m256 hi = expf8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(dv), 1)), t0, t1, t2, t3);
        const __m512 v = _mm512_maskz_mov_ps(t, _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1));
        _mm512_mask_storeu_ps(e + i, t, v);
        const __m512 r = _mm512_sub_ps(_mm512_add_ps(v, K), K);
        const __m512 diff = _mm512_and_ps(_mm512_sub_ps(v, r), absmask);
        fail |= t & (_mm512_cmp_ps_mask(v, big, _CMP_NLT_UQ) | _mm512_cmp_ps_mask(diff, half, _CMP_EQ_OQ));
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(r)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(r), 1))));
    }
    if (fail) return false;
    *sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    return true;
}

static size_t k_compact_d(const float *x, size_t from, size_t to, float M, float dcut, float *d_out)
{
    const __m512 mv = _mm512_set1_ps(M), cv = _mm512_set1_ps(dcut);
    size_t m = 0;
    for (size_t i = from; i < to; i += LANES) {
        const __mmask16 t = tail_mask(to - i);
        const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(t, x + i), mv);
        const __mmask16 mc = t & _mm512_cmp_ps_mask(d, cv, _CMP_GE_OQ);
        _mm512_storeu_ps(d_out + m, _mm512_maskz_compress_ps(mc, d));
        m += (size_t)__builtin_popcount(mc);
    }
    return m;
}

static bool k_grid_sum_f(const float *e, size_t m, float u, double *sum)
{
    const __m512 K = _mm512_set1_ps(12582912.0f * u), half = _mm512_set1_ps(0.5f * u), big = _mm512_set1_ps(4194304.0f * u);
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    __m512d s0 = _mm512_setzero_pd(), s1 = s0;
    __mmask16 fail = 0;
    for (size_t i = 0; i < m; i += LANES) {
        const __mmask16 t = tail_mask(m - i);
        const __m512 v = _mm512_maskz_loadu_ps(t, e + i);
        const __m512 r = _mm512_sub_ps(_mm512_add_ps(v, K), K);
        const __m512 diff = _mm512_and_ps(_mm512_sub_ps(v, r), absmask);
        fail |= t & (_mm512_cmp_ps_mask(v, big, _CMP_NLT_UQ) | _mm512_cmp_ps_mask(diff, half, _CMP_EQ_OQ));
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(r)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(r), 1))));
    }
    if (fail) return false;
    *sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    return true;
}

static bool k_grid_sum_d(const float *e, size_t m, double u, double *sum)
{
    const __m512d K = _mm512_set1_pd(0x1.8p52 * u), half = _mm512_set1_pd(0.5 * u), big = _mm512_set1_pd(0x1p51 * u);
    const __m512d absmask = _mm512_castsi512_pd(_mm512_set1_epi64(0x7fffffffffffffffLL));
    __m512d s0 = _mm512_setzero_pd(), s1 = s0;
    __mmask8 fail = 0;
    for (size_t i = 0; i < m; i += 8) {
        const __mmask8 t = m - i >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (m - i)) - 1u);
        const __m512d v = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(t, e + i));
        const __m512d r = _mm512_sub_pd(_mm512_add_pd(v, K), K);
        const __m512d diff = _mm512_and_pd(_mm512_sub_pd(v, r), absmask);
        fail |= t & (_mm512_cmp_pd_mask(v, big, _CMP_NLT_UQ) | _mm512_cmp_pd_mask(diff, half, _CMP_EQ_OQ));
        if (i & 8) s1 = _mm512_add_pd(s1, r);
        else s0 = _mm512_add_pd(s0, r);
    }
    if (fail) return false;
    *sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    return true;
}

const sift__fk sift__fk_avx512 = {
    .name = "avx512",
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
