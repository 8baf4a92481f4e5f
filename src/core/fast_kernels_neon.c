/*
 * fast_kernels_neon.c - the fast-path kernels with aarch64 NEON (4 floats a vector). Same
 * results as the scalar kernels in fast_kernels.c (see fast_kernels.h); NEON is part of
 * every aarch64 CPU, so the file needs no flag. NEON has no movemask: a compare's four lanes
 * become a 4-bit mask through AND with {1, 2, 4, 8} and an across-lanes add, and the lanes a
 * mask selects are written out one set bit at a time (at most four; the output buffers'
 * slack is not needed). FMA (FMLA, always there) is used in the approximation's polynomial,
 * as the scalar version does with fmaf, so the bits agree.
 *
 * exp_exact is glibc's expf as aarch64 builds it, which is not x86's __expf_fma: the
 * reduction rounds z = x * N/ln2 to an integer with round() (FRINTA; aarch64 sets
 * TOINT_INTRINSICS) instead of the shift trick, and nothing is FMA-contracted: r = z - k
 * with z rounded first, the polynomial as multiplies and adds. With x86's fused
 * r = x N/ln2 - k the result differs at -0x1.f8cbb2p+5 (the input fast_kernels.c's probe
 * holds for this); this form was checked under qemu against aarch64 glibc 2.36's expf on two
 * million inputs. The probe still checks the bits against this process's libm before the
 * vector version is kept.
 */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <float.h>
#include <math.h>

#include "core/fast_kernels.h"

#define LANES 4

static inline unsigned lanes_of(size_t left) { return left >= LANES ? 0xFu : (1u << left) - 1u; }

static inline unsigned movemask(uint32x4_t c)
{
    static const uint32_t bit[4] = {1, 2, 4, 8};
    return vaddvq_u32(vandq_u32(c, vld1q_u32(bit)));
}

static inline float32x4_t load_or(const float *p, size_t left, float fill)
{
    if (left >= LANES) return vld1q_f32(p);
    float t[4] = {fill, fill, fill, fill};
    for (size_t i = 0; i < left; i++) t[i] = p[i];
    return vld1q_f32(t);
}

static inline void store_n(float *p, float32x4_t v, size_t left)
{
    if (left >= LANES) {
        vst1q_f32(p, v);
        return;
    }
    float t[4];
    vst1q_f32(t, v);
    for (size_t i = 0; i < left; i++) p[i] = t[i];
}

/* positions base + lane of the lanes set in m, to out; returns how many */
static inline size_t put_bits(uint32_t *out, unsigned m, size_t base)
{
    size_t k = 0;
    for (; m; m &= m - 1) out[k++] = (uint32_t)(base + (size_t)__builtin_ctz(m));
    return k;
}

/* lanes that are NaN */
static inline uint32x4_t isnan4(float32x4_t v) { return vmvnq_u32(vceqq_f32(v, v)); }

/* m < v ? v : m per lane, as the scalar max (NaN never wins: a NaN v fails the compare) */
static inline float32x4_t max_keep(float32x4_t m, float32x4_t v) { return vbslq_f32(vcltq_f32(m, v), v, m); }

static inline float hmax(float32x4_t v) { return vmaxvq_f32(v); }

static float k_max(const float *x, size_t n, float init, bool *nan)
{
    float32x4_t a = vdupq_n_f32(init), b = a, c = a, d = a;
    uint32x4_t bad = vdupq_n_u32(0);
    size_t i = 0;
    for (; i + 4 * LANES <= n; i += 4 * LANES) {
        const float32x4_t v0 = vld1q_f32(x + i), v1 = vld1q_f32(x + i + 4), v2 = vld1q_f32(x + i + 8), v3 = vld1q_f32(x + i + 12);
        a = max_keep(a, v0), b = max_keep(b, v1), c = max_keep(c, v2), d = max_keep(d, v3);
        bad = vorrq_u32(bad, vorrq_u32(vorrq_u32(isnan4(v0), isnan4(v1)), vorrq_u32(isnan4(v2), isnan4(v3))));
    }
    for (; i < n; i += LANES) {
        const float32x4_t v = load_or(x + i, n - i, init);
        a = max_keep(a, v);
        bad = vorrq_u32(bad, isnan4(v));
    }
    *nan |= vmaxvq_u32(bad) != 0;
    /* no lane holds a NaN unless init is one; FMAXV would return it where the scalar keeps init */
    float t[4];
    vst1q_f32(t, max_keep(max_keep(a, b), max_keep(c, d)));
    float r = t[0];
    for (int l = 1; l < 4; l++) r = r < t[l] ? t[l] : r;
    return r;
}

static size_t k_argmax(const float *x, size_t n)
{
    /* pass 1: the maximum and NaNs; pass 2: the first index holding it (early exit) */
    bool nan = false;
    const float mx = k_max(x, n, -INFINITY, &nan);
    if (nan) return SIZE_MAX;
    if (mx == -INFINITY) return 0;
    const float32x4_t t = vdupq_n_f32(mx);
    for (size_t i = 0; i < n; i += LANES) {
        const unsigned m = lanes_of(n - i) & movemask(vceqq_f32(load_or(x + i, n - i, -INFINITY), t));
        if (m) return i + (size_t)__builtin_ctz(m);
    }
    return 0; /* not reached */
}

static size_t k_count_ge(const float *x, size_t n, float thr)
{
    const float32x4_t t = vdupq_n_f32(thr);
    uint32x4_t acc = vdupq_n_u32(0);
    size_t i = 0;
    for (; i + LANES <= n; i += LANES) acc = vsubq_u32(acc, vcgeq_f32(vld1q_f32(x + i), t)); /* true lanes are -1 */
    size_t k = vaddvq_u32(acc);
    for (; i < n; i++) k += x[i] >= thr;
    return k;
}

static size_t k_next_above(const float *x, size_t from, size_t n, float thr)
{
    const float32x4_t t = vdupq_n_f32(thr);
    size_t i = from;
    for (; i + 4 * LANES <= n; i += 4 * LANES) {
        const uint32x4_t c0 = vcgtq_f32(vld1q_f32(x + i), t), c1 = vcgtq_f32(vld1q_f32(x + i + 4), t);
        const uint32x4_t c2 = vcgtq_f32(vld1q_f32(x + i + 8), t), c3 = vcgtq_f32(vld1q_f32(x + i + 12), t);
        if (vmaxvq_u32(vorrq_u32(vorrq_u32(c0, c1), vorrq_u32(c2, c3)))) {
            const unsigned m = movemask(c0) | movemask(c1) << 4 | movemask(c2) << 8 | movemask(c3) << 12;
            return i + (size_t)__builtin_ctz(m);
        }
    }
    for (; i < n; i++)
        if (x[i] > thr) return i;
    return n;
}

static size_t k_collect_minp(const float *x, size_t n, float lp, uint32_t *idx, float *max_out)
{
    float m = -FLT_MAX;
    size_t k = 0;
    for (size_t g = 0; g < n; g += 64) {
        const float32x4_t thr = vdupq_n_f32(m + lp);
        float32x4_t mv = vdupq_n_f32(-FLT_MAX);
        for (size_t i = g; i < g + 64 && i < n; i += LANES) {
            const float32x4_t v = load_or(x + i, n - i, -FLT_MAX);
            const unsigned hit = lanes_of(n - i) & movemask(vcgeq_f32(v, thr));
            if (hit) k += put_bits(idx + k, hit, i);
            mv = max_keep(mv, v);
        }
        const float bm = hmax(mv); /* (a NaN lane never entered mv) */
        m = m < bm ? bm : m;
    }
    *max_out = m;
    return k;
}

static inline float32x4_t approx4(float32x4_t d)
{
    const float32x4_t y = vmulq_f32(d, vdupq_n_f32(SIFT__AX_LOG2E));
    const float32x4_t kf = vrndnq_f32(y); /* ties to even, as the scalar magic-number rounding */
    const float32x4_t f = vsubq_f32(y, kf);
    float32x4_t p = vfmaq_f32(vdupq_n_f32(SIFT__AX_C3), vdupq_n_f32(SIFT__AX_C4), f);
    p = vfmaq_f32(vdupq_n_f32(SIFT__AX_C2), p, f);
    p = vfmaq_f32(vdupq_n_f32(SIFT__AX_C1), p, f);
    p = vfmaq_f32(vdupq_n_f32(SIFT__AX_C0), p, f);
    const int32x4_t e = vaddq_s32(vreinterpretq_s32_f32(p), vshlq_n_s32(vcvtnq_s32_f32(kf), 23));
    const uint32x4_t ok = vcgeq_f32(d, vdupq_n_f32(SIFT__AX_LO));
    return vreinterpretq_f32_u32(vandq_u32(ok, vreinterpretq_u32_s32(e)));
}

static size_t k_approx_blocks(const float *x, size_t n, float dh, double *blk, float *bmax, uint32_t *head, float *max_out,
                              bool *nan)
{
    const float32x4_t hv = vdupq_n_f32(dh);
    float32x4_t run = vdupq_n_f32(-INFINITY);
    uint32x4_t bad = vdupq_n_u32(0);
    size_t nh = 0;
    for (size_t b = 0; b * SIFT__BLK < n; b++) {
        const size_t s0i = b * SIFT__BLK, e = s0i + SIFT__BLK < n ? s0i + SIFT__BLK : n;
        float32x4_t m0 = run;
        for (size_t i = s0i; i < e; i += LANES) {
            const float32x4_t v = load_or(x + i, e - i, -INFINITY);
            m0 = max_keep(m0, v);
            bad = vorrq_u32(bad, isnan4(v));
        }
        const float M = hmax(m0);
        run = vdupq_n_f32(M);
        bmax[b] = M;
        /* four 4-lane accumulators: 16 lanes of at most 16 terms, as the scalar reference */
        float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
        for (size_t i = s0i; i < e; i += LANES) {
            const unsigned live = lanes_of(e - i);
            const float32x4_t d = vsubq_f32(load_or(x + i, e - i, 0.0f), run);
            const unsigned hm = live & movemask(vcgeq_f32(d, hv));
            if (hm) nh += put_bits(head + nh, hm, i);
            static const uint32_t bit[4] = {1, 2, 4, 8};
            const uint32x4_t keep = vtstq_u32(vdupq_n_u32(live & ~hm), vld1q_u32(bit));
            const float32x4_t a = vreinterpretq_f32_u32(vandq_u32(keep, vreinterpretq_u32_f32(approx4(d))));
            acc[(i / LANES) & 3] = vaddq_f32(acc[(i / LANES) & 3], a);
        }
        /* lane l of acc[q] is the scalar reference's lane 4q + l: the same sums, added in its order */
        float lane[16];
        for (int q = 0; q < 4; q++) vst1q_f32(lane + 4 * q, acc[q]);
        double s = 0.0;
        for (int l = 0; l < 16; l++) s += lane[l];
        blk[b] = s;
    }
    *max_out = hmax(run);
    *nan |= vmaxvq_u32(bad) != 0;
    return nh;
}

static void k_approx_exp(const float *x, size_t n, float M, float *out)
{
    const float32x4_t mv = vdupq_n_f32(M);
    for (size_t i = 0; i < n; i += LANES) store_n(out + i, approx4(vsubq_f32(load_or(x + i, n - i, 0.0f), mv)), n - i);
}

static size_t k_collect_ge(const float *x, size_t n, float thr, uint32_t *idx, float *max_out, bool *nan, float *cmax)
{
    const float32x4_t tv = vdupq_n_f32(thr);
    float32x4_t all = vdupq_n_f32(-INFINITY);
    uint32x4_t bad = vdupq_n_u32(0);
    size_t k = 0;
    for (size_t c = 0; c < n; c += SIFT__CHUNK) {
        const size_t end = c + SIFT__CHUNK < n ? c + SIFT__CHUNK : n;
        float32x4_t a = vdupq_n_f32(-INFINITY);
        for (size_t i = c; i < end; i += LANES) {
            const float32x4_t v = load_or(x + i, end - i, -INFINITY);
            a = max_keep(a, v);
            bad = vorrq_u32(bad, isnan4(v));
            const unsigned h = lanes_of(end - i) & movemask(vcgeq_f32(v, tv));
            if (h) k += put_bits(idx + k, h, i);
        }
        if (cmax) cmax[c / SIFT__CHUNK] = hmax(a);
        all = max_keep(all, a);
    }
    *max_out = hmax(all);
    *nan |= vmaxvq_u32(bad) != 0;
    return k;
}

/* glibc's expf on 2 lanes, as aarch64's build of it computes (see the top) */
static inline float64x2_t expf2(float64x2_t xd)
{
    const float64x2_t inv = vdupq_n_f64(SIFT__EXPF_INVLN2N);
    const float64x2_t z = vmulq_f64(inv, xd);
    const float64x2_t kd = vrndaq_f64(z);
    const int64x2_t ki = vcvtaq_s64_f64(z);
    const float64x2_t r = vsubq_f64(z, kd);
    uint64x2_t t = vcombine_u64(vcreate_u64(sift__exp2f_tab[vgetq_lane_s64(ki, 0) & 31]),
                                vcreate_u64(sift__exp2f_tab[vgetq_lane_s64(ki, 1) & 31]));
    t = vaddq_u64(t, vshlq_n_u64(vreinterpretq_u64_s64(ki), 47));
    const float64x2_t zz = vaddq_f64(vmulq_f64(vdupq_n_f64(SIFT__EXPF_C0), r), vdupq_n_f64(SIFT__EXPF_C1));
    const float64x2_t r2 = vmulq_f64(r, r);
    float64x2_t y = vaddq_f64(vmulq_f64(vdupq_n_f64(SIFT__EXPF_C2), r), vdupq_n_f64(1.0));
    y = vaddq_f64(vmulq_f64(zz, r2), y);
    return vmulq_f64(y, vreinterpretq_f64_u64(t));
}

static inline float32x4_t expf4(float32x4_t x)
{
    /* the special ranges first: out of them the reduction's integer may be anything */
    const uint32x4_t uf = vcltq_f32(x, vdupq_n_f32(SIFT__EXPF_UFLOW));
    const uint32x4_t mu = vbicq_u32(vcltq_f32(x, vdupq_n_f32(SIFT__EXPF_MAYUFLOW)), uf);
    const uint32x4_t of = vcgtq_f32(x, vdupq_n_f32(SIFT__EXPF_OFLOW));
    const uint32x4_t nn = isnan4(x);
    const uint32x4_t special = vorrq_u32(vorrq_u32(uf, mu), vorrq_u32(of, nn));
    const float32x4_t xs = vbslq_f32(special, vdupq_n_f32(0.0f), x);
    float32x4_t f = vcvt_high_f32_f64(vcvt_f32_f64(expf2(vcvt_f64_f32(vget_low_f32(xs)))), expf2(vcvt_high_f64_f32(xs)));
    f = vbslq_f32(uf, vdupq_n_f32(0.0f), f);
    f = vbslq_f32(mu, vdupq_n_f32(0x1p-149f), f);
    f = vbslq_f32(of, vdupq_n_f32(INFINITY), f);
    f = vbslq_f32(nn, vaddq_f32(x, x), f);
    return f;
}

static void k_exp_exact(const float *d, size_t n, float M, float *out)
{
    const float32x4_t mv = vdupq_n_f32(M);
    for (size_t i = 0; i < n; i += LANES) store_n(out + i, expf4(vsubq_f32(load_or(d + i, n - i, 0.0f), mv)), n - i);
}

static bool k_grid_sum_f(const float *e, size_t m, float u, double *sum);

static bool k_exp_grid_f(const float *d, size_t m, float u, float *e, double *sum)
{
    k_exp_exact(d, m, 0.0f, e);
    return k_grid_sum_f(e, m, u, sum);
}

static size_t k_compact_d(const float *x, size_t from, size_t to, float M, float dcut, float *d_out)
{
    const float32x4_t mv = vdupq_n_f32(M), cv = vdupq_n_f32(dcut);
    size_t m = 0;
    for (size_t i = from; i < to; i += LANES) {
        const float32x4_t d = vsubq_f32(load_or(x + i, to - i, 0.0f), mv);
        unsigned mc = lanes_of(to - i) & movemask(vcgeq_f32(d, cv));
        if (!mc) continue;
        float t[4];
        vst1q_f32(t, d);
        for (; mc; mc &= mc - 1) d_out[m++] = t[__builtin_ctz(mc)];
    }
    return m;
}

static bool k_grid_sum_f(const float *e, size_t m, float u, double *sum)
{
    const float32x4_t K = vdupq_n_f32(12582912.0f * u), half = vdupq_n_f32(0.5f * u), big = vdupq_n_f32(4194304.0f * u);
    float64x2_t s0 = vdupq_n_f64(0), s1 = s0;
    uint32x4_t fail = vdupq_n_u32(0);
    for (size_t i = 0; i < m; i += LANES) {
        const float32x4_t v = load_or(e + i, m - i, 0.0f);
        const float32x4_t r = vsubq_f32(vaddq_f32(v, K), K);
        /* !(v < big) (NaN too), or |v - r| == half */
        fail = vorrq_u32(fail, vorrq_u32(vmvnq_u32(vcltq_f32(v, big)), vceqq_f32(vabdq_f32(v, r), half)));
        s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(r)));
        s1 = vaddq_f64(s1, vcvt_high_f64_f32(r));
    }
    if (vmaxvq_u32(fail)) return false;
    *sum = vaddvq_f64(vaddq_f64(s0, s1));
    return true;
}

static bool k_grid_sum_d(const float *e, size_t m, double u, double *sum)
{
    const float64x2_t K = vdupq_n_f64(0x1.8p52 * u), half = vdupq_n_f64(0.5 * u), big = vdupq_n_f64(0x1p51 * u);
    float64x2_t s0 = vdupq_n_f64(0), s1 = s0;
    uint64x2_t fail = vdupq_n_u64(0);
    for (size_t i = 0; i < m; i += LANES) {
        const float32x4_t v4 = load_or(e + i, m - i, 0.0f);
        const float64x2_t lo = vcvt_f64_f32(vget_low_f32(v4)), hi = vcvt_high_f64_f32(v4);
        const float64x2_t rl = vsubq_f64(vaddq_f64(lo, K), K), rh = vsubq_f64(vaddq_f64(hi, K), K);
        const uint64x2_t fl = vorrq_u64(vreinterpretq_u64_u32(vmvnq_u32(vreinterpretq_u32_u64(vcltq_f64(lo, big)))),
                                        vceqq_f64(vabdq_f64(lo, rl), half));
        const uint64x2_t fh = vorrq_u64(vreinterpretq_u64_u32(vmvnq_u32(vreinterpretq_u32_u64(vcltq_f64(hi, big)))),
                                        vceqq_f64(vabdq_f64(hi, rh), half));
        fail = vorrq_u64(fail, vorrq_u64(fl, fh));
        s0 = vaddq_f64(s0, rl);
        s1 = vaddq_f64(s1, rh);
    }
    if (vmaxvq_u32(vreinterpretq_u32_u64(fail))) return false;
    *sum = vaddvq_f64(vaddq_f64(s0, s1));
    return true;
}

const sift__fk sift__fk_neon = {
    .name = "neon",
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
