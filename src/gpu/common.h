/*
 * common.h - what the CUDA kernels and their host reference share, compiled by both nvcc
 * (as __host__ __device__ code) and the host C compiler.
 *
 * The device chain's algorithms are written once, here, as small functions of plain
 * values: the order-preserving key of a float, the three radix levels of a selection,
 * the decision a level's histogram leads to, the tie count at the final key, the
 * fixed-point mass of a probability, Philox4x32-10, the per-row bookkeeping after each
 * pass. The kernels (kernels.cu) run them in parallel; the host reference (ref.c) runs the
 * very same functions sequentially, pass for pass and chunk for chunk, so that the logic
 * of every kernel is checked against the CPU samplers on machines without a GPU.
 *
 * Representation. A row's candidates are a list in device memory (static capacity n_vocab)
 * whose entries keep their order: at first the caller's logits themselves (ids are the
 * positions), after a filter a compacted copy in one of two ping-pong buffers. Filters
 * never reorder; each records what the CPU chain would know about its array (sorted, or
 * in position order), and the order is made physical only where it matters: when a short
 * list moves to the "tail" kernel (one block per row, everything in shared memory) and
 * when candidates are handed to a CPU tail. Temperatures are not written back: they are
 * pending divisions applied on every read (exactly the CPU's l / t, in order), and a
 * compaction writes the transformed values.
 *
 * Selection (top_k, top_p, min_p's fallback). A float's key (sign-flipped bits, -0 folded
 * into +0) orders like the float. Three passes histogram the key's bits 31..21, 20..10 and
 * 9..0 (2048, 2048, 1024 bins) over the elements that match the prefix decided so far; the
 * last block to finish a pass decides the next digit. Every bin carries a count and a
 * mass: the probability exp(l - max) in 64-bit fixed point (2^-43 units), so that sums are
 * integer sums - exact and independent of the order atomics land in, hence deterministic
 * and identical on the host. A criterion is a count target (top_k's k, min_keep) or a mass
 * target (top_p: ceil(p * total)); each level picks the first bin, from the top, where the
 * running total reaches the target. After three levels the exact key at the cut and the
 * number of its ties to keep are known; ties are kept in position (= token id) order.
 * A compaction (count pass, then a write pass at per-block offsets) keeps the elements
 * above the key and the first `need` ties.
 */
#ifndef SIFT_GPU_COMMON_H
#define SIFT_GPU_COMMON_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define SIFT_HD __host__ __device__ __forceinline__
#else
#define SIFT_HD static inline
#endif

/* ---- sizes -------------------------------------------------------------------------------- */

#define SIFT_GPU_THREADS 256                      /* threads per block, every kernel */
#define SIFT_GPU_PER_THREAD 16                    /* elements per thread in a chunk */
#define SIFT_GPU_CHUNK (SIFT_GPU_THREADS * SIFT_GPU_PER_THREAD) /* elements per block: 4096 */
#define SIFT_GPU_SMALL 4096                       /* lists this short go to the tail kernel */
#define SIFT_GPU_NBINS 2048                       /* bins of the widest radix level */
#define SIFT_GPU_BINS_PER_THREAD (SIFT_GPU_NBINS / SIFT_GPU_THREADS)
#define SIFT_GPU_MAX_DIV 4                        /* temperatures in one device prefix */
#define SIFT_GPU_MAX_OPS 32                       /* samplers in one device prefix */
#define SIFT_GPU_MAX_WINDOW 8192                  /* longest penalty window on the device */
#define SIFT_GPU_MAX_VOCAB ((1 << 21) - 1)        /* keeps fixed-point mass sums below 2^64 */
#define SIFT_GPU_MASS_ONE 8796093022208.0         /* 2^43: fixed-point probability 1 */

/* Fixed-point masses and their sums: unsigned long long (not uint64_t, which is unsigned
 * long on LP64 hosts) because that is the type CUDA's 64-bit atomics take. */
typedef unsigned long long sift__gpu_m64;

/* ---- ops, row modes, flags ----------------------------------------------------------------- */

enum {
    SIFT_GPU_OP_BIAS = 1,  /* logit_bias: add biases, in order, to listed tokens */
    SIFT_GPU_OP_PENALTIES, /* repetition / frequency / presence over the row's window */
    SIFT_GPU_OP_TEMP,      /* l / t; t <= 0 keeps the first maximum only */
    SIFT_GPU_OP_TOP_K,
    SIFT_GPU_OP_TOP_P,
    SIFT_GPU_OP_MIN_P,
    SIFT_GPU_OP_GREEDY,
    SIFT_GPU_OP_DIST,
};

enum { SIFT_GPU_FULL = 0, SIFT_GPU_TAIL = 1, SIFT_GPU_DONE = 2 };        /* row modes */
enum { SIFT_GPU_SRC_INPUT = -1, SIFT_GPU_SRC_BUF0 = 0, SIFT_GPU_SRC_BUF1 = 1 };
enum { SIFT_GPU_F_NONE = 0, SIFT_GPU_F_SELECT, SIFT_GPU_F_CUT, SIFT_GPU_F_KEEP }; /* filter states */

#define SIFT_GPU_SORTED 0x1u /* the CPU chain would hold this list sorted (descending) */
#define SIFT_GPU_PHYS 0x2u   /* the list IS in that order (else: in position = id order) */
#define SIFT_GPU_PROBS 0x4u  /* probabilities of the current logits are valid (tail only) */

#define SIFT_GPU_SEL_COUNT 0x1u
#define SIFT_GPU_SEL_MASS 0x2u

/* One op's parameters for one row. */
typedef struct sift__gpu_param {
    int32_t on;   /* 0: this row skips the op (a disabled value, e.g. top_k(0)) */
    int32_t k;    /* top_k: k; top_p, min_p: min_keep; penalties: last_n; bias: entries */
    int32_t off;  /* bias: first entry in the bias pool */
    float f0;     /* top_p, min_p: p; temp: t; penalties: repeat */
    float f1;     /* min_p: logf(p) (the host's logf, as the CPU sampler computes it); penalties: freq */
    float f2;     /* penalties: present */
    uint32_t seed;/* dist */
    int32_t pad;
} sift__gpu_param;

typedef struct sift__gpu_bias {
    int32_t token;
    float bias;
} sift__gpu_bias;

/* A selection in progress (see the top of this file). */
typedef struct sift__gpu_sel {
    uint32_t prefix;     /* key bits decided by the levels so far */
    int32_t level;       /* the level the next histogram pass builds: 0, 1, 2 */
    uint32_t active;     /* SIFT_GPU_SEL_COUNT | SIFT_GPU_SEL_MASS */
    uint32_t k;          /* count target */
    float p;             /* top_p's p: the mass target is ceil(p * total) */
    uint32_t above;      /* elements whose key is above the decided prefix */
    sift__gpu_m64 mass_t;     /* mass target (fixed point), set when level 0 is decided */
    sift__gpu_m64 mass_above; /* their mass */
} sift__gpu_sel;

/* Everything the device knows about a row during a run (device memory, one per row). */
typedef struct sift__gpu_row {
    int32_t n;         /* entries in the current list */
    int32_t src;       /* SIFT_GPU_SRC_* */
    int32_t ids;       /* 1: an entry's id is its position (no id array) */
    int32_t mode;      /* SIFT_GPU_FULL / TAIL / DONE */
    int32_t next_op;   /* TAIL: the first op the tail kernel runs */
    uint32_t flags;    /* SIFT_GPU_SORTED | PHYS | PROBS */
    int32_t n_div;     /* pending temperatures, divided in this order on every read */
    float div[SIFT_GPU_MAX_DIV];
    int32_t only;      /* >= 0: every other position reads as -inf (temp <= 0) */
    int32_t has_max;   /* max holds the largest current logit */
    float max;
    int32_t fstate;    /* SIFT_GPU_F_*: the filter in progress */
    int32_t pred;      /* min_p: the cut being counted is the predicate l >= bound */
    int32_t counted;   /* the count pass for the current cut has run (offsets are ready) */
    sift__gpu_sel sel;
    uint32_t thr;      /* the cut: keep key > thr, and the first `need` entries with key == thr */
    int32_t need;
    uint32_t kmin;     /* min_p: max(min_keep, 1) */
    uint32_t n_gt, n_eq; /* totals of the last count pass */
    uint32_t done;     /* blocks of the current kernel that have finished */
    int32_t token;     /* the selected token, -1 = none */
} sift__gpu_row;

/* What the host gets back per row. */
typedef struct sift__gpu_out {
    int32_t n;      /* candidates handed over (0 when the device selected) */
    uint32_t flags; /* SIFT_GPU_SORTED | PHYS | PROBS of the handed-over list */
    int32_t token;  /* selected token, -1 = none */
    int32_t pad;
} sift__gpu_out;

/* ---- floats as ordered keys ------------------------------------------------------------------ */

SIFT_HD uint32_t sift__gpu_f2u(float x)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
#endif
}

SIFT_HD float sift__gpu_u2f(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float x;
    memcpy(&x, &u, 4);
    return x;
#endif
}

/* Unsigned key that orders like the float (a < b <=> key(a) < key(b) for non-NaN), with
 * -0 and +0 the same key, as they compare equal. */
SIFT_HD uint32_t sift__gpu_key(float x)
{
    uint32_t u = sift__gpu_f2u(x);
    if (u == 0x80000000u) u = 0;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* The float of a key (+0 for the folded -0). */
SIFT_HD float sift__gpu_unkey(uint32_t k)
{
    return sift__gpu_u2f((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

/* ---- radix levels -------------------------------------------------------------------------------- */

SIFT_HD int sift__gpu_level_bits(int level) { return level == 2 ? 10 : 11; }
SIFT_HD int sift__gpu_level_shift(int level) { return level == 0 ? 21 : level == 1 ? 10 : 0; }
SIFT_HD int sift__gpu_level_nbins(int level) { return 1 << sift__gpu_level_bits(level); }

/* Does key belong to the level's histogram (its higher bits are the decided prefix)? */
SIFT_HD int sift__gpu_level_match(uint32_t key, int level, uint32_t prefix)
{
    return level == 0 || (key >> (sift__gpu_level_shift(level) + sift__gpu_level_bits(level))) == prefix;
}

SIFT_HD uint32_t sift__gpu_level_digit(uint32_t key, int level)
{
    return (key >> sift__gpu_level_shift(level)) & ((1u << sift__gpu_level_bits(level)) - 1u);
}

/* exp(l - max) in fixed point, rounded to nearest: exact in double (a float times 2^43 is
 * exact, and below 2^53) and the same on host and device. */
SIFT_HD sift__gpu_m64 sift__gpu_mass(float e) { return (sift__gpu_m64)((double)e * SIFT_GPU_MASS_ONE + 0.5); }

/* top_p's target: the smallest mass m with m / total >= p, at least 1 (the top element has
 * mass 2^43), at most the total. */
SIFT_HD sift__gpu_m64 sift__gpu_mass_target(float p, sift__gpu_m64 total)
{
    double t = ceil((double)p * (double)total);
    sift__gpu_m64 m = t <= 1.0 ? 1u : t >= (double)total ? total : (sift__gpu_m64)t;
    return m < total ? m : total;
}

/* Where a criterion is met: the bin and the totals of the bins above it (including what
 * was above the level's range). bin -1: not in the range walked. */
typedef struct sift__gpu_cross {
    int32_t bin;
    uint32_t c_before;
    sift__gpu_m64 m_before;
} sift__gpu_cross;

/* Walk bins hi, hi-1, ..., lo of a level (descending keys) with running totals starting at
 * (c0, m0), and record the first bin at which each criterion of `sel` is reached. The host
 * walks a level's whole range at once; on the device each thread walks its own slice,
 * started at the exclusive prefix sums of the slices above it (integers, so both give the
 * same bins). */
SIFT_HD void sift__gpu_walk(const sift__gpu_sel *sel, const uint32_t *cnt, const sift__gpu_m64 *mass, int hi, int lo,
                           uint32_t c0, sift__gpu_m64 m0, sift__gpu_cross *ck, sift__gpu_cross *cm)
{
    uint32_t c = c0;
    sift__gpu_m64 m = m0;
    for (int b = hi; b >= lo; b--) {
        const uint32_t c1 = c + cnt[b];
        const sift__gpu_m64 m1 = m + mass[b];
        if ((sel->active & SIFT_GPU_SEL_COUNT) && ck->bin < 0 && c < sel->k && c1 >= sel->k) {
            ck->bin = b;
            ck->c_before = c;
            ck->m_before = m;
        }
        if ((sel->active & SIFT_GPU_SEL_MASS) && cm->bin < 0 && m < sel->mass_t && m1 >= sel->mass_t) {
            cm->bin = b;
            cm->c_before = c;
            cm->m_before = m;
        }
        c = c1;
        m = m1;
    }
}

/* Advance a selection by one level from where its active criteria were met (bin -1: never
 * within this level). Returns 1 when nothing is to be cut (a target lies beyond the whole
 * list: keep everything), else 0. After level 2, *thr and *need hold the cut: keep keys
 * above *thr and the first *need entries whose key equals it. cnt/mass are the level's
 * histogram (the final bin's mass / count is the one mass every tie has). */
SIFT_HD int sift__gpu_sel_advance(sift__gpu_sel *s, const sift__gpu_cross *ck, const sift__gpu_cross *cm,
                                 const uint32_t *cnt, const sift__gpu_m64 *mass, uint32_t *thr, int32_t *need)
{
    const int use_k = (s->active & SIFT_GPU_SEL_COUNT) != 0;
    const int use_m = (s->active & SIFT_GPU_SEL_MASS) != 0;
    if ((use_k && ck->bin < 0) || (use_m && cm->bin < 0) || (!use_k && !use_m)) return 1;
    /* the later cut (the lower bin) satisfies both criteria; only those met in it go on */
    const sift__gpu_cross *c = use_k ? ck : cm;
    if (use_k && use_m && cm->bin < ck->bin) c = cm;
    const int b = c->bin;
    uint32_t active = 0;
    if (use_k && ck->bin == b) active |= SIFT_GPU_SEL_COUNT;
    if (use_m && cm->bin == b) active |= SIFT_GPU_SEL_MASS;
    s->active = active;
    s->above = c->c_before;
    s->mass_above = c->m_before;
    s->prefix = (s->prefix << sift__gpu_level_bits(s->level)) | (uint32_t)b;
    s->level++;
    if (s->level < 3) return 0;
    /* the key is exact: how many of its ties are needed */
    const sift__gpu_m64 n_eq = cnt[b];
    sift__gpu_m64 nd = 1;
    if (active & SIFT_GPU_SEL_COUNT) {
        const sift__gpu_m64 want = s->k - s->above; /* >= 1: the count target lies in this bin */
        if (want > nd) nd = want;
    }
    if ((active & SIFT_GPU_SEL_MASS) && n_eq > 0 && mass[b] > 0) {
        const sift__gpu_m64 each = mass[b] / n_eq; /* every tie has the same logit, so the same mass */
        const sift__gpu_m64 want = (s->mass_t - s->mass_above + each - 1) / each;
        if (want > nd) nd = want;
    }
    *thr = s->prefix;
    *need = (int32_t)(nd < n_eq ? nd : n_eq);
    return 0;
}

/* ---- Philox4x32-10 (Salmon et al., SC'11), the stream of dist ------------------------------ */

SIFT_HD void sift__gpu_mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
#ifdef __CUDA_ARCH__
    *hi = __umulhi(a, b);
    *lo = a * b;
#else
    const uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
#endif
}

/* ctr <- Philox4x32-10(ctr, key) */
SIFT_HD void sift__gpu_philox(uint32_t ctr[4], const uint32_t key_in[2])
{
    uint32_t k0 = key_in[0], k1 = key_in[1];
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint32_t hi0, lo0, hi1, lo1;
        sift__gpu_mulhilo(0xD2511F53u, ctr[0], &hi0, &lo0);
        sift__gpu_mulhilo(0xCD9E8D57u, ctr[2], &hi1, &lo1);
        const uint32_t c1 = ctr[1], c3 = ctr[3];
        ctr[0] = hi1 ^ c1 ^ k0;
        ctr[1] = lo1;
        ctr[2] = hi0 ^ c3 ^ k1;
        ctr[3] = lo0;
    }
}

/* Draw number `counter` of the stream `seed`: a double in [0, 1) with 53 random bits. The
 * key is (seed, "dist"), the counter (counter, "sift"); one Philox block per draw. */
SIFT_HD double sift__gpu_uniform(uint32_t seed, uint64_t counter)
{
    uint32_t ctr[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), 0u, 0x73696674u};
    const uint32_t key[2] = {seed, 0x64697374u};
    sift__gpu_philox(ctr, key);
    return ((double)(ctr[0] >> 5) * 67108864.0 + (double)(ctr[1] >> 6)) * (1.0 / 9007199254740992.0);
}

/* ---- per-element arithmetic, exactly as the CPU samplers do it --------------------------------- */

/* penalties.c: l *= repeat or l /= repeat, then l -= count * freq + (count > 0) * present.
 * Device code is built with -fmad=false so nothing here is fused. */
SIFT_HD float sift__gpu_penalize(float l, int32_t count, float repeat, float freq, float present)
{
    if (l <= 0) l = l * repeat;
    else l = l / repeat;
    return l - ((float)count * freq + (float)(count > 0) * present);
}

/* The current value of the entry at position pos whose stored logit is l. */
SIFT_HD float sift__gpu_read(const sift__gpu_row *r, int32_t pos, float l)
{
    if (r->only >= 0 && pos != r->only) return -INFINITY;
    for (int i = 0; i < r->n_div; i++) l = l / r->div[i];
    return l;
}

/* Sort key of the tail: descending order of (logit desc, position asc). Positions are in id
 * order whenever a list is sorted, so ties go to the lower token id. */
SIFT_HD uint64_t sift__gpu_sortkey(float l, int32_t pos)
{
    return ((uint64_t)sift__gpu_key(l) << 32) | (uint64_t)(0xFFFFFFFFu - (uint32_t)pos);
}
SIFT_HD int32_t sift__gpu_sortkey_pos(uint64_t k) { return (int32_t)(0xFFFFFFFFu - (uint32_t)k); }

/* ---- per-row bookkeeping (the row thread, or the last block of a pass) ------------------------- */

/* The start of a run: the whole vocabulary, in position order, straight from the input. */
SIFT_HD void sift__gpu_row_begin(sift__gpu_row *r, int32_t n_vocab)
{
    memset(r, 0, sizeof *r);
    r->n = n_vocab;
    r->src = SIFT_GPU_SRC_INPUT;
    r->ids = 1;
    r->mode = n_vocab <= SIFT_GPU_SMALL ? SIFT_GPU_TAIL : SIFT_GPU_FULL;
    r->next_op = 0;
    r->only = -1;
    r->token = -1;
}

/* temp(t > 0) on a long list: one more pending division (the max divides exactly as its
 * element does). t <= 0 needs the position of the first maximum (an argmax pass). */
SIFT_HD void sift__gpu_row_temp(sift__gpu_row *r, float t)
{
    r->div[r->n_div++] = t;
    if (r->has_max) r->max = r->max / t;
    r->flags &= ~SIFT_GPU_PROBS;
}

/* Set up a filter on a long list. Returns the state: F_SELECT (histogram passes follow),
 * F_CUT (the cut is known: min_p's predicate, counted first), F_KEEP (nothing to cut). */
SIFT_HD int sift__gpu_filter_init(sift__gpu_row *r, int kind, const sift__gpu_param *pm)
{
    memset(&r->sel, 0, sizeof r->sel);
    r->pred = 0;
    r->counted = 0;
    r->need = 0x7fffffff;
    const uint32_t n = (uint32_t)r->n;
    if (kind == SIFT_GPU_OP_TOP_K) {
        const uint32_t k = (uint32_t)pm->k;
        r->fstate = k >= n ? SIFT_GPU_F_KEEP : SIFT_GPU_F_SELECT;
        r->sel.active = SIFT_GPU_SEL_COUNT;
        r->sel.k = k;
    } else if (kind == SIFT_GPU_OP_TOP_P) {
        r->fstate = SIFT_GPU_F_SELECT;
        r->sel.active = SIFT_GPU_SEL_MASS | (pm->k > 1 ? SIFT_GPU_SEL_COUNT : 0u);
        r->sel.k = (uint32_t)pm->k;
        r->sel.p = pm->f0;
    } else { /* min_p: count l >= max + logf(p) first */
        r->kmin = pm->k > 1 ? (uint32_t)pm->k : 1u;
        r->thr = sift__gpu_key(r->max + pm->f1);
        r->pred = 1;
        r->fstate = SIFT_GPU_F_CUT;
    }
    return r->fstate;
}

/* After a count pass (totals of entries above and at the cut key). min_p: keep the
 * predicate's set when it holds at least max(min_keep, 1) entries, else fall back to a
 * count selection of that many (the CPU's sorted path). Returns the filter state. */
SIFT_HD int sift__gpu_row_counted(sift__gpu_row *r, uint32_t n_gt, uint32_t n_eq)
{
    r->n_gt = n_gt;
    r->n_eq = n_eq;
    r->counted = 1;
    if (r->pred) {
        r->pred = 0;
        const uint32_t kept = n_gt + n_eq;
        if (kept < r->kmin) {
            if (r->kmin >= (uint32_t)r->n) {
                r->fstate = SIFT_GPU_F_KEEP;
                r->flags |= SIFT_GPU_SORTED;
                return r->fstate;
            }
            memset(&r->sel, 0, sizeof r->sel);
            r->sel.active = SIFT_GPU_SEL_COUNT;
            r->sel.k = r->kmin;
            r->fstate = SIFT_GPU_F_SELECT;
            r->counted = 0;
            r->flags |= SIFT_GPU_SORTED;
        }
    }
    return r->fstate;
}

/* Entries a cut keeps. */
SIFT_HD uint32_t sift__gpu_row_kept(const sift__gpu_row *r)
{
    const uint32_t nd = (uint32_t)r->need;
    return r->n_gt + (r->n_eq < nd ? r->n_eq : nd);
}

/* After a compaction wrote `n` entries (max: the largest) to the other buffer. */
SIFT_HD void sift__gpu_row_compacted(sift__gpu_row *r, int32_t op, int32_t n, float max)
{
    r->n = n;
    r->src = r->src == SIFT_GPU_SRC_BUF0 ? SIFT_GPU_SRC_BUF1 : SIFT_GPU_SRC_BUF0;
    r->ids = 0;
    r->n_div = 0;
    r->only = -1;
    r->has_max = n > 0;
    r->max = max;
    r->flags &= ~(SIFT_GPU_PHYS | SIFT_GPU_PROBS);
    r->fstate = SIFT_GPU_F_NONE;
    if (n <= SIFT_GPU_SMALL) {
        r->mode = SIFT_GPU_TAIL;
        r->next_op = op + 1;
    }
}

/* Flags a filter leaves (the CPU's): top_k and top_p sort; min_p keeps the order it found
 * (its fallback sorts: set by sift__gpu_row_counted). */
SIFT_HD void sift__gpu_row_filtered(sift__gpu_row *r, int kind)
{
    if (kind == SIFT_GPU_OP_TOP_K || kind == SIFT_GPU_OP_TOP_P) r->flags |= SIFT_GPU_SORTED;
    r->flags &= ~SIFT_GPU_PROBS;
}

/* ---- sequential pieces (one thread on the device, the same loop on the host) ------------------- */

/* float sum in array order: llama.cpp's softmax denominator (top_p) */
SIFT_HD float sift__gpu_fsum(const float *e, int32_t n)
{
    float s = 0.0f;
    for (int32_t i = 0; i < n; i++) s += e[i];
    return s;
}

/* top_p's cut on probabilities in descending order: the first i with the float running sum
 * >= p and i + 1 >= min_keep gives i + 1; n when never (top_p.c). */
SIFT_HD int32_t sift__gpu_topp_cut(const float *p, int32_t n, float P, int32_t min_keep)
{
    float cum = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        cum += p[i];
        if (cum >= P && i + 1 >= min_keep) return i + 1;
    }
    return n;
}

/* min_p on a list sorted descending, c of whose entries are >= the bound: min_p.c's loop
 * stops at the first i >= max(1, min_keep) below the bound. */
SIFT_HD int32_t sift__gpu_minp_cut_sorted(int32_t c, int32_t kmin, int32_t n)
{
    const int32_t i = c > kmin ? c : kmin;
    return i < n ? i : n;
}

/* The block's fixed reduction order: a[t] += a[t + s] for s = 128, 64, ..., 1. */
SIFT_HD double sift__gpu_tree_sum(double *a)
{
    for (int s = SIFT_GPU_THREADS / 2; s > 0; s >>= 1)
        for (int t = 0; t < s; t++) a[t] += a[t + s];
    return a[0];
}

/* dist's walk: the first i with (running double sum of v[0..i]) >= target; *rem gets
 * target minus the sum before i. None (rounding, NaN): the last i with v[i] > 0, else n-1. */
SIFT_HD int32_t sift__gpu_walk_d(const double *v, int32_t n, double target, double *rem)
{
    double run = 0.0;
    for (int32_t i = 0; i < n; i++) {
        if (run + v[i] >= target) {
            *rem = target - run;
            return i;
        }
        run += v[i];
    }
    int32_t last = n - 1;
    while (last > 0 && !(v[last] > 0.0)) last--;
    *rem = v[last];
    return last;
}

SIFT_HD int32_t sift__gpu_walk_f(const float *v, int32_t n, double target)
{
    double run = 0.0;
    for (int32_t i = 0; i < n; i++) {
        run += (double)v[i];
        if (run >= target) return i;
    }
    int32_t last = n - 1;
    while (last > 0 && !(v[last] > 0.0f)) last--;
    return last;
}

/* penalties.c's window: the newest token in, the oldest out once last_n are held. The
 * counts are recomputed from the window when applied. */
SIFT_HD void sift__gpu_ring_push(int32_t *ring, int32_t *first, int32_t *count, int32_t last_n, int32_t token)
{
    if (last_n <= 0) return;
    if (*count >= last_n) {
        ring[*first] = token;
        *first = (*first + 1) % last_n;
    } else {
        ring[(*first + *count) % last_n] = token;
        (*count)++;
    }
}

#endif
