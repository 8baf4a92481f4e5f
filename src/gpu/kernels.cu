/*
 * kernels.cu - the device chain's kernels (CUDA C), one per pass of plan.h's step list.
 *
 * Every kernel here has a twin in host_reference.c, which runs the same shared functions
 * (radix_select.h, philox.h, sampler_math.h, row_bookkeeping.h) in the same order; read
 * the two side by side. The shapes:
 *
 *   row kernels     one thread per row: bookkeeping (begin, temp, bias, out, accept)
 *   chunk kernels   grid (chunks, rows): block c of row r owns list positions
 *                   [c * 4096, (c + 1) * 4096), thread t the 16 consecutive positions from
 *                   c * 4096 + 16 t (read as four 16-byte loads when the row is aligned).
 *                   Blocks past the row's list exit at once; the others count themselves
 *                   in the row's `done` word, and the last one to finish (threadfence +
 *                   atomic ticket) does the row's decision - the next radix digit, the
 *                   compaction offsets, the draw - so no pass needs an extra launch and
 *                   nothing waits for the host.
 *   block kernels   one block per row: penalty windows, and the tail kernel, which runs
 *                   everything left of a short list (<= 4096 entries) in shared memory.
 *
 * Determinism: histograms and counts are integers; maxima are order-free; double sums are
 * formed per thread in position order, then by a fixed tree, then chunk by chunk in order.
 * A run gives the same tokens for the same inputs and seeds, whatever the batch size or
 * the order blocks are scheduled in.
 *
 * Rows' state lives in device memory (sift__gpu_row); a block reads its row into shared
 * memory once. Within one kernel only the last block of a row writes the row (every other
 * participating block has read it by then), except where a filter keeps everything and
 * block 0 only sets the row's flags, which no block of that kernel reads.
 *
 * Built with -fmad=false: the penalty, temperature and softmax arithmetic must round as the
 * CPU samplers' does.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "gpu/kernels.h"
#include "gpu/philox.h"
#include "gpu/radix_select.h"
#include "gpu/row_bookkeeping.h"
#include "gpu/sampler_math.h"

/* The two pieces of CUDA syntax, as macros, so that tests/cuda_emu can compile this file as
 * C++ and run the kernels on the CPU (an emulator's <cuda_runtime.h> defines them first). */
#ifndef SIFT_GPU_LAUNCH
#define SIFT_GPU_LAUNCH(kernel, grid, smem, stream, ...) kernel<<<(grid), NT, (smem), (stream)>>>(__VA_ARGS__)
#endif
#ifndef SIFT_GPU_DYN_SMEM
#define SIFT_GPU_DYN_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
#endif

#define NT SIFT_GPU_THREADS
#define PER SIFT_GPU_PER_THREAD
#define CHUNK SIFT_GPU_CHUNK
#define NWARP (NT / 32)
#define FULLMASK 0xffffffffu

typedef unsigned long long u64;

/* ---- block primitives (every thread of the block must call them) -------------------------- */

template <typename V> __device__ __forceinline__ V warp_incl_sum(V v)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const V x = __shfl_up_sync(FULLMASK, v, o);
        if (lane >= o) v += x;
    }
    return v;
}

/* exclusive prefix sum over the block in thread order; *total gets the sum */
template <typename V> __device__ V block_excl_sum(V v, V *total)
{
    __shared__ V part[NWARP];
    __shared__ V tot;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const V inc = warp_incl_sum(v);
    if (lane == 31) part[w] = inc;
    __syncthreads();
    if (w == 0) {
        const V x = lane < NWARP ? part[lane] : V(0);
        const V xi = warp_incl_sum(x);
        if (lane < NWARP) part[lane] = xi - x;
        if (lane == NWARP - 1) tot = xi;
    }
    __syncthreads();
    const V res = part[w] + inc - v;
    if (total) *total = tot;
    __syncthreads();
    return res;
}

template <typename V> __device__ V block_sum(V v)
{
    V t;
    block_excl_sum(v, &t);
    return t;
}

__device__ u64 block_max_u64(u64 v)
{
    __shared__ u64 part[NWARP];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const u64 x = __shfl_xor_sync(FULLMASK, v, o);
        v = x > v ? x : v;
    }
    if (lane == 0) part[w] = v;
    __syncthreads();
    u64 m = part[0];
#pragma unroll
    for (int i = 1; i < NWARP; i++) m = part[i] > m ? part[i] : m;
    __syncthreads();
    return m;
}

/* The last block of a row to get here (its writes, and all others', are visible to it). */
__device__ bool last_block(unsigned *done, unsigned expected)
{
    __shared__ int last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(done, 1u) == expected - 1u;
    __syncthreads();
    if (last) __threadfence();
    return last != 0;
}

/* ---- rows and their lists ------------------------------------------------------------------ */

struct view {
    const float *lg;
    const int32_t *id; /* NULL: the id is the position */
    int vec;
};

__device__ __forceinline__ view view_of(const sift__gpu_dev &d, const sift__gpu_row &row, int r)
{
    view v;
    if (row.src == SIFT_GPU_SRC_INPUT) {
        v.lg = d.in + (int64_t)r * d.ld;
        v.id = nullptr;
        v.vec = d.in_vec;
    } else {
        v.lg = d.llg[row.src] + (int64_t)r * d.stride;
        v.id = row.ids ? nullptr : d.lid[row.src] + (int64_t)r * d.stride;
        v.vec = 1;
    }
    return v;
}

__device__ __forceinline__ int32_t id_at(const view &v, int32_t pos) { return v.id ? v.id[pos] : pos; }

/* the stored logits of positions [start, start + PER) (0 past n) */
__device__ __forceinline__ void load16(const view &v, int32_t start, int32_t n, float x[PER])
{
    if (v.vec && start + PER <= n) {
        const float4 *p = reinterpret_cast<const float4 *>(v.lg + start);
#pragma unroll
        for (int q = 0; q < PER / 4; q++) {
            const float4 f = p[q];
            x[4 * q] = f.x, x[4 * q + 1] = f.y, x[4 * q + 2] = f.z, x[4 * q + 3] = f.w;
        }
    } else {
#pragma unroll
        for (int j = 0; j < PER; j++) x[j] = start + j < n ? v.lg[start + j] : 0.0f;
    }
}

/* current values (pending temperatures applied) of this thread's positions in chunk c */
__device__ __forceinline__ int32_t load_values(const view &v, const sift__gpu_row &row, int c, float x[PER])
{
    const int32_t start = c * CHUNK + (int32_t)threadIdx.x * PER;
    load16(v, start, row.n, x);
#pragma unroll
    for (int j = 0; j < PER; j++) x[j] = sift__gpu_read(&row, start + j, x[j]);
    return start;
}

__device__ __forceinline__ int32_t chunks_of(int32_t n) { return n <= 0 ? 1 : (n + CHUNK - 1) / CHUNK; }

__device__ __forceinline__ const sift__gpu_param &param(const sift__gpu_dev &d, int op, int r)
{
    return d.prm[(int64_t)op * d.n_seq_max + r];
}

/* Load row r into shared memory; returns whether block blockIdx.x takes part in a chunk
 * kernel over it (the row is a long list, and the chunk is within it). */
__device__ bool chunk_enter(const sift__gpu_dev &d, sift__gpu_row &row, int r)
{
    if (threadIdx.x == 0) row = d.rows[r];
    __syncthreads();
    return row.mode == SIFT_GPU_FULL && (int)blockIdx.x < chunks_of(row.n);
}

__device__ __forceinline__ void row_store(const sift__gpu_dev &d, int r, sift__gpu_row &row)
{
    row.done = 0;
    d.rows[r] = row;
}

/* ---- row kernels -------------------------------------------------------------------------- */

__global__ void k_begin(sift__gpu_dev d)
{
    const int r = blockIdx.x * NT + threadIdx.x;
    if (r >= d.n_seq) return;
    sift__gpu_row row;
    sift__gpu_row_begin(&row, d.n_vocab);
    d.rows[r] = row;
    d.tokens[r] = -1;
}

__global__ void k_temp(sift__gpu_dev d, int op)
{
    const int r = blockIdx.x * NT + threadIdx.x;
    if (r >= d.n_seq) return;
    sift__gpu_row *row = &d.rows[r];
    const sift__gpu_param &pm = param(d, op, r);
    if (row->mode == SIFT_GPU_FULL && pm.on && pm.f0 > 0.0f) sift__gpu_row_temp(row, pm.f0);
}

__global__ void k_bias(sift__gpu_dev d, int op)
{
    const int r = blockIdx.x * NT + threadIdx.x;
    if (r >= d.n_seq) return;
    sift__gpu_row *row = &d.rows[r];
    const sift__gpu_param &pm = param(d, op, r);
    if (row->mode != SIFT_GPU_FULL || !pm.on) return;
    float *lg = d.llg[0] + (int64_t)r * d.stride;
    for (int b = 0; b < pm.k; b++) { /* in order: repeated tokens add up as on the CPU */
        const sift__gpu_bias e = d.bias[pm.off + b];
        if (e.token >= 0 && e.token < row->n) lg[e.token] += e.bias;
    }
    row->has_max = 0;
    row->flags &= ~(SIFT_GPU_SORTED | SIFT_GPU_PROBS);
}

__global__ void k_out(sift__gpu_dev d)
{
    const int r = blockIdx.x * NT + threadIdx.x;
    if (r >= d.n_seq) return;
    const sift__gpu_row row = d.rows[r];
    sift__gpu_out o;
    o.n = row.token >= 0 ? 0 : row.n;
    o.flags = row.flags;
    o.token = row.token;
    o.pad = 0;
    d.out[r] = o;
    d.tokens[r] = row.token;
}

/* tokens: d.accept (chosen by CPU tails) or the rows' own (selected on the device) */
__global__ void k_accept(sift__gpu_dev d, int from_host)
{
    const int r = blockIdx.x * NT + threadIdx.x;
    if (r >= d.n_seq) return;
    const int32_t t = from_host ? d.accept[r] : d.rows[r].token;
    if (t < 0) return;
    for (int op = 0; op < d.n_ops; op++) {
        const sift__gpu_param &pm = param(d, op, r);
        if (d.kinds[op] != SIFT_GPU_OP_PENALTIES || !pm.on) continue;
        sift__gpu_ring_push(d.ring + (int64_t)r * d.window, &d.ring_first[r], &d.ring_count[r], pm.k, t);
    }
}

/* ---- penalties: the window's distinct tokens and counts, then the scatter ------------------ */

__global__ void __launch_bounds__(NT) k_pen_prep(sift__gpu_dev d, int op)
{
    const int r = blockIdx.x;
    __shared__ int32_t s[SIFT_GPU_MAX_WINDOW];
    const sift__gpu_param &pm = param(d, op, r);
    if (!pm.on || pm.k <= 0) {
        if (threadIdx.x == 0) d.pen_n[r] = 0;
        return;
    }
    const int32_t cnt = d.ring_count[r], first = d.ring_first[r], last_n = pm.k;
    const int32_t *ring = d.ring + (int64_t)r * d.window;
    int32_t P = 1;
    while (P < cnt) P <<= 1;
    for (int32_t i = threadIdx.x; i < P; i += NT) s[i] = i < cnt ? ring[(first + i) % last_n] : 0x7fffffff;
    __syncthreads();
    for (int32_t k = 2; k <= P; k <<= 1) /* bitonic sort, ascending */
        for (int32_t j = k >> 1; j > 0; j >>= 1) {
            for (int32_t i = threadIdx.x; i < P; i += NT) {
                const int32_t x = i ^ j;
                if (x > i) {
                    const int32_t a = s[i], b = s[x];
                    if (((i & k) == 0) ? a > b : a < b) s[i] = b, s[x] = a;
                }
            }
            __syncthreads();
        }
    /* runs of equal tokens: each run's start writes (token, length) at its rank */
    int32_t *out_t = d.pen_tok + (int64_t)r * d.window, *out_c = d.pen_cnt + (int64_t)r * d.window;
    int32_t base = 0;
    for (int32_t i0 = 0; i0 < cnt; i0 += NT) {
        const int32_t i = i0 + threadIdx.x;
        const int start = i < cnt && (i == 0 || s[i] != s[i - 1]);
        uint32_t tot;
        const uint32_t rank = block_excl_sum<uint32_t>((uint32_t)start, &tot);
        if (start) {
            int32_t e = i + 1;
            while (e < cnt && s[e] == s[i]) e++;
            out_t[base + (int32_t)rank] = s[i];
            out_c[base + (int32_t)rank] = e - i;
        }
        base += (int32_t)tot;
    }
    if (threadIdx.x == 0) d.pen_n[r] = base;
}

__global__ void __launch_bounds__(NT) k_pen_apply(sift__gpu_dev d, int op)
{
    const int r = blockIdx.x;
    sift__gpu_row *row = &d.rows[r];
    const sift__gpu_param &pm = param(d, op, r);
    if (row->mode != SIFT_GPU_FULL || !pm.on) return;
    float *lg = d.llg[0] + (int64_t)r * d.stride;
    const int32_t m = d.pen_n[r], n = row->n;
    for (int32_t i = threadIdx.x; i < m; i += NT) { /* distinct tokens: no two threads meet */
        const int32_t t = d.pen_tok[(int64_t)r * d.window + i];
        if (t >= 0 && t < n) lg[t] = sift__gpu_penalize(lg[t], d.pen_cnt[(int64_t)r * d.window + i], pm.f0, pm.f1, pm.f2);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        row->has_max = 0;
        row->flags &= ~(SIFT_GPU_SORTED | SIFT_GPU_PROBS);
    }
}

/* ---- chunk kernels -------------------------------------------------------------------------- */

/* the input, as read, into buffer 0 (ids = positions): what logit_bias and penalties modify */
__global__ void __launch_bounds__(NT) k_copy(sift__gpu_dev d)
{
    const int r = blockIdx.y, c = blockIdx.x;
    __shared__ sift__gpu_row row;
    if (!chunk_enter(d, row, r) || row.src != SIFT_GPU_SRC_INPUT) return;
    const view v = view_of(d, row, r);
    float x[PER];
    const int32_t start = load_values(v, row, c, x);
    float *dst = d.llg[0] + (int64_t)r * d.stride;
#pragma unroll
    for (int j = 0; j < PER; j++)
        if (start + j < row.n) dst[start + j] = x[j];
    if (last_block(&d.rows[r].done, (unsigned)chunks_of(row.n)) && threadIdx.x == 0) {
        row.src = SIFT_GPU_SRC_BUF0;
        row.ids = 1;
        row.n_div = 0;
        row.only = -1;
        row_store(d, r, row);
    }
}

/* The largest key of a row split over chunks: each block passes the best key of its chunk;
 * it lands in pk[c], and the row's last block to arrive reduces all of them. True (in every
 * thread of that block) with *out set; false in the other blocks, which are done. */
__device__ bool row_max_key(const sift__gpu_dev &d, int r, int c, int32_t n, u64 best, u64 *out)
{
    best = block_max_u64(best);
    u64 *pk = d.pk + (int64_t)r * d.n_chunks;
    if (threadIdx.x == 0) pk[c] = best;
    const int nc = chunks_of(n);
    if (!last_block(&d.rows[r].done, (unsigned)nc)) return false;
    u64 m = 0;
    for (int i = threadIdx.x; i < nc; i += NT) {
        const u64 k = __ldcg(&pk[i]);
        m = k > m ? k : m;
    }
    *out = block_max_u64(m);
    return true;
}

/* the first maximum: greedy's token, or temp <= 0's one survivor */
__global__ void __launch_bounds__(NT) k_argmax(sift__gpu_dev d, int op)
{
    const int r = blockIdx.y, c = blockIdx.x;
    __shared__ sift__gpu_row row;
    if (!chunk_enter(d, row, r)) return;
    const sift__gpu_param &pm = param(d, op, r);
    const int greedy = d.kinds[op] == SIFT_GPU_OP_GREEDY;
    if (!pm.on || (!greedy && pm.f0 > 0.0f)) return;
    const view v = view_of(d, row, r);
    float x[PER];
    const int32_t start = load_values(v, row, c, x);
    u64 best = 0;
#pragma unroll
    for (int j = 0; j < PER; j++)
        if (start + j < row.n) {
            const u64 k = sift__gpu_sortkey(x[j], start + j);
            best = k > best ? k : best;
        }
    u64 m;
    if (!row_max_key(d, r, c, row.n, best, &m)) return;
    if (threadIdx.x == 0) {
        const int32_t pos = sift__gpu_sortkey_pos(m);
        if (greedy) {
            row.token = id_at(v, pos);
            row.mode = SIFT_GPU_DONE;
        } else {
            row.only = pos;
            row.flags &= ~SIFT_GPU_PROBS;
        }
        row_store(d, r, row);
    }
}

__global__ void __launch_bounds__(NT) k_max(sift__gpu_dev d)
{
    const int r = blockIdx.y, c = blockIdx.x;
    __shared__ sift__gpu_row row;
    if (!chunk_enter(d, row, r) || row.has_max) return;
    const view v = view_of(d, row, r);
    float x[PER];
    const int32_t start = load_values(v, row, c, x);
    u64 best = 0;
#pragma unroll
    for (int j = 0; j < PER; j++)
        if (start + j < row.n) {
            const u64 k = sift__gpu_key(x[j]);
            best = k > best ? k : best;
        }
    u64 m;
    if (!row_max_key(d, r, c, row.n, best, &m)) return;
    if (threadIdx.x == 0) {
        row.max = sift__gpu_unkey((uint32_t)m);
        row.has_max = 1;
        row_store(d, r, row);
    }
}

/* One radix level of a selection (top_k, top_p, min_p's fallback). Level 0 of top_k/top_p
 * sets the selection up itself (every block the same way). The last block decides the
 * level's digit (a parallel walk over the bins, exact because it is all integers) and
 * clears the row's histogram for the next level. */
__global__ void __launch_bounds__(NT) k_hist(sift__gpu_dev d, int op, int level)
{
    const int r = blockIdx.y, c = blockIdx.x;
    __shared__ sift__gpu_row row;
    __shared__ uint32_t cnt[SIFT_GPU_NBINS];
    __shared__ u64 mass[SIFT_GPU_NBINS];
    __shared__ int go;
    __shared__ sift__gpu_cross s_ck, s_cm;
    if (!chunk_enter(d, row, r)) return;
    const int kind = d.kinds[op];
    const sift__gpu_param &pm = param(d, op, r);
    if (!pm.on) return;
    if (threadIdx.x == 0) {
        go = 1;
        if (level == 0 && kind != SIFT_GPU_OP_MIN_P) {
            if (sift__gpu_filter_init(&row, kind, &pm) == SIFT_GPU_F_KEEP) {
                go = 0; /* nothing to cut: only the flags change (block 0 writes them) */
                if (c == 0) {
                    sift__gpu_row_filtered(&row, kind);
                    d.rows[r].flags = row.flags;
                }
            }
        } else if (row.fstate != SIFT_GPU_F_SELECT || row.sel.level != level) {
            go = 0;
        }
    }
    __syncthreads();
    if (!go) return;
    const int nb = sift__gpu_level_nbins(level);
    const int with_mass = (row.sel.active & SIFT_GPU_SEL_MASS) != 0;
    for (int b = threadIdx.x; b < nb; b += NT) {
        cnt[b] = 0;
        mass[b] = 0;
    }
    __syncthreads();
    const view v = view_of(d, row, r);
    float x[PER];
    const int32_t start = load_values(v, row, c, x);
#pragma unroll
    for (int j = 0; j < PER; j++) {
        if (start + j >= row.n) continue;
        const uint32_t key = sift__gpu_key(x[j]);
        if (!sift__gpu_level_match(key, level, row.sel.prefix)) continue;
        const uint32_t dg = sift__gpu_level_digit(key, level);
        atomicAdd(&cnt[dg], 1u);
        if (with_mass) atomicAdd(&mass[dg], (u64)sift__gpu_mass(expf(x[j] - row.max)));
    }
    __syncthreads();
    uint32_t *gc = d.hcnt + (int64_t)r * SIFT_GPU_NBINS;
    u64 *gm = d.hmass + (int64_t)r * SIFT_GPU_NBINS;
    for (int b = threadIdx.x; b < nb; b += NT) {
        if (cnt[b]) atomicAdd(&gc[b], cnt[b]);
        if (mass[b]) atomicAdd(&gm[b], mass[b]);
    }
    if (!last_block(&d.rows[r].done, (unsigned)chunks_of(row.n))) return;

    /* the decision: bins in descending order, a slice of nb / NT per thread */
    for (int b = threadIdx.x; b < nb; b += NT) {
        cnt[b] = __ldcg(&gc[b]);
        mass[b] = __ldcg(&gm[b]);
        gc[b] = 0;
        gm[b] = 0;
    }
    if (threadIdx.x == 0) s_ck.bin = s_cm.bin = -1;
    __syncthreads();
    const int per = nb / NT;
    const int hi = nb - 1 - (int)threadIdx.x * per, lo = hi - per + 1;
    u64 tc = 0, tm = 0;
    for (int b = hi; b >= lo; b--) {
        tc += cnt[b];
        tm += mass[b];
    }
    u64 total_c, total_m;
    const u64 pc = block_excl_sum<u64>(tc, &total_c);
    const u64 pm_ = block_excl_sum<u64>(tm, &total_m);
    if (level == 0 && with_mass && threadIdx.x == 0) row.sel.mass_t = sift__gpu_mass_target(row.sel.p, total_m);
    __syncthreads();
    sift__gpu_cross ck = {-1, 0, 0}, cm = {-1, 0, 0};
    sift__gpu_walk(&row.sel, cnt, mass, hi, lo, row.sel.above + (uint32_t)pc, row.sel.mass_above + pm_, &ck, &cm);
    if (ck.bin >= 0) s_ck = ck;
    if (cm.bin >= 0) s_cm = cm;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t thr = 0;
        int32_t need = 0;
        const int keep = sift__gpu_sel_advance(&row.sel, &s_ck, &s_cm, cnt, mass, &thr, &need);
        if (keep) {
            row.fstate = SIFT_GPU_F_NONE;
            sift__gpu_row_filtered(&row, kind);
        } else if (row.sel.level == 3) {
            row.fstate = SIFT_GPU_F_CUT;
            row.thr = thr;
            row.need = need;
            row.n_gt = row.n_eq = 0;
            row.pred = 0;
            row.counted = 0;
        } else {
            row.fstate = SIFT_GPU_F_SELECT;
        }
        row_store(d, r, row);
    }
}

/* Entries above and at the cut, per block; the last block turns them into offsets. The
 * first count of min_p sets up its predicate (l >= max + logf(p)) itself. */
__global__ void __launch_bounds__(NT) k_count(sift__gpu_dev d, int op, int first)
{
    const int r = blockIdx.y, c = blockIdx.x;
    __shared__ sift__gpu_row row;
    __shared__ int go;
    if (!chunk_enter(d, row, r)) return;
    const int kind = d.kinds[op];
    const sift__gpu_param &pm = param(d, op, r);
    if (!pm.on) return;
    if (threadIdx.x == 0) {
        go = 1;
        if (first) {
            if (kind == SIFT_GPU_OP_MIN_P) sift__gpu_filter_init(&row, kind, &pm);
            else go = 0;
        } else if (row.fstate != SIFT_GPU_F_CUT || row.counted) {
            go = 0;
        }
    }
    __syncthreads();
    if (!go) return;
    const view v = view_of(d, row, r);
    float x[PER];
    const int32_t start = load_values(v, row, c, x);
    uint32_t gt = 0, eq = 0;
#pragma unroll
    for (int j = 0; j < PER; j++)
        if (start + j < row.n) {
            const uint32_t key = sift__gpu_key(x[j]);
            gt += key > row.thr;
            eq += key == row.thr;
        }
    gt = block_sum<uint32_t>(gt);
    eq = block_sum<uint32_t>(eq);
    uint32_t *pa = d.pa + (int64_t)r * d.n_chunks, *pb = d.pb + (int64_t)r * d.n_chunks;
    if (threadIdx.x == 0) {
        pa[c] = gt;
        pb[c] = eq;
    }
    const int nc = chunks_of(row.n);
    if (!last_block(&d.rows[r].done, (unsigned)nc)) return;
    /* exclusive offsets in chunk order: thread t holds chunks [t * q, (t + 1) * q) */
    const int q = (nc + NT - 1) / NT;
    uint32_t a = 0, b = 0;
    for (int i = (int)threadIdx.x * q; i < ((int)threadIdx.x + 1) * q && i < nc; i++) {
        a += __ldcg(&pa[i]);
        b += __ldcg(&pb[i]);
    }
    uint32_t tot_a, tot_b;
    uint32_t ea = block_excl_sum<uint32_t>(a, &tot_a), eb = block_excl_sum<uint32_t>(b, &tot_b);
    for (int i = (int)threadIdx.x * q; i < ((int)threadIdx.x + 1) * q && i < nc; i++) {
        const uint32_t x1 = __ldcg(&pa[i]), x2 = __ldcg(&pb[i]);
        pa[i] = ea;
        pb[i] = eb;
        ea += x1;
        eb += x2;
    }
    if (threadIdx.x == 0) {
        int fs = sift__gpu_row_counted(&row, tot_a, tot_b);
        if (fs == SIFT_GPU_F_CUT && sift__gpu_row_kept(&row) >= (uint32_t)row.n) {
            fs = SIFT_GPU_F_KEEP; /* nothing to cut */
            sift__gpu_row_filtered(&row, kind);
        }
        if (fs == SIFT_GPU_F_KEEP) row.fstate = SIFT_GPU_F_NONE;
        row_store(d, r, row);
    }
}

/* The kept entries, in position order, into the other buffer (transformed values). */
__global__ void __launch_bounds__(NT) k_write(sift__gpu_dev d, int op)
{
    const int r = blockIdx.y, c = blockIdx.x;
    __shared__ sift__gpu_row row;
    if (!chunk_enter(d, row, r)) return;
    const sift__gpu_param &pm = param(d, op, r);
    if (!pm.on || row.fstate != SIFT_GPU_F_CUT || !row.counted) return;
    const view v = view_of(d, row, r);
    float x[PER];
    const int32_t start = load_values(v, row, c, x);
    const uint32_t thr = row.thr, need = (uint32_t)row.need;
    uint32_t key[PER];
    uint32_t my_eq = 0;
#pragma unroll
    for (int j = 0; j < PER; j++) {
        key[j] = start + j < row.n ? sift__gpu_key(x[j]) : 0u;
        my_eq += start + j < row.n && key[j] == thr;
    }
    const uint32_t *pa = d.pa + (int64_t)r * d.n_chunks, *pb = d.pb + (int64_t)r * d.n_chunks;
    const uint32_t gt_before = __ldcg(&pa[c]), eq_before = __ldcg(&pb[c]);
    uint32_t eq_rank = eq_before + block_excl_sum<uint32_t>(my_eq, nullptr);
    uint32_t keep_mask = 0, my_kept = 0;
#pragma unroll
    for (int j = 0; j < PER; j++) {
        if (start + j >= row.n) continue;
        int keep = key[j] > thr;
        if (key[j] == thr) keep = eq_rank++ < need;
        if (keep) keep_mask |= 1u << j, my_kept++;
    }
    uint32_t at = gt_before + (eq_before < need ? eq_before : need) + block_excl_sum<uint32_t>(my_kept, nullptr);
    const int dst = row.src == SIFT_GPU_SRC_BUF0 ? 1 : 0;
    int32_t *oid = d.lid[dst] + (int64_t)r * d.stride;
    float *olg = d.llg[dst] + (int64_t)r * d.stride;
    u64 maxk = 0;
#pragma unroll
    for (int j = 0; j < PER; j++)
        if (keep_mask & (1u << j)) {
            oid[at] = id_at(v, start + j);
            olg[at] = x[j];
            at++;
            maxk = key[j] > maxk ? key[j] : maxk;
        }
    u64 m;
    if (!row_max_key(d, r, c, row.n, maxk, &m)) return;
    if (threadIdx.x == 0) {
        const uint32_t n_new = sift__gpu_row_kept(&row);
        sift__gpu_row_filtered(&row, d.kinds[op]);
        sift__gpu_row_compacted(&row, op, (int32_t)n_new, sift__gpu_unkey((uint32_t)m));
        row_store(d, r, row);
    }
}

/* dist on a long list: per-block sums in a fixed order; the last block draws. */
__device__ void dist_thread_sums(const view &v, const sift__gpu_row &row, int c, double *s)
{
    float x[PER];
    const int32_t start = load_values(v, row, c, x);
    double a = 0.0;
#pragma unroll
    for (int j = 0; j < PER; j++)
        if (start + j < row.n) a += (double)expf(x[j] - row.max);
    s[threadIdx.x] = a;
}

/* a[] <- its tree sum in a[0] (the order sift__gpu_tree_sum emulates) */
__device__ void block_tree_sum(double *a)
{
    __syncthreads();
    for (int s = NT / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) a[threadIdx.x] += a[threadIdx.x + s];
        __syncthreads();
    }
}

__global__ void __launch_bounds__(NT) k_dist(sift__gpu_dev d, int op)
{
    const int r = blockIdx.y, c = blockIdx.x;
    __shared__ sift__gpu_row row;
    __shared__ double a[NT], s[NT];
    __shared__ int s_ch, s_t;
    __shared__ double s_rem;
    if (!chunk_enter(d, row, r)) return;
    const sift__gpu_param &pm = param(d, op, r);
    if (!pm.on) return;
    const view v = view_of(d, row, r);
    dist_thread_sums(v, row, c, a);
    block_tree_sum(a);
    double *pd = d.pd + (int64_t)r * d.n_chunks;
    if (threadIdx.x == 0) pd[c] = a[0];
    const int nc = chunks_of(row.n);
    if (!last_block(&d.rows[r].done, (unsigned)nc)) return;
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int i = 0; i < nc; i++) total += __ldcg(&pd[i]);
        const double target = total * sift__gpu_uniform(pm.seed, d.rng[r]);
        d.rng[r] += 1;
        /* the chunk (pd read through L2: other blocks wrote it) */
        double run = 0.0, rem = 0.0;
        int ch = -1;
        for (int i = 0; i < nc; i++) {
            const double x = __ldcg(&pd[i]);
            if (run + x >= target) {
                ch = i;
                rem = target - run;
                break;
            }
            run += x;
        }
        if (ch < 0) { /* as sift__gpu_walk_d: the last chunk with mass */
            ch = nc - 1;
            while (ch > 0 && !(__ldcg(&pd[ch]) > 0.0)) ch--;
            rem = __ldcg(&pd[ch]);
        }
        s_ch = ch;
        s_rem = rem;
    }
    __syncthreads();
    dist_thread_sums(v, row, s_ch, s);
    __syncthreads();
    if (threadIdx.x == 0) {
        double rem2;
        s_t = sift__gpu_walk_d(s, NT, s_rem, &rem2);
        s_rem = rem2;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const int32_t base = s_ch * CHUNK + s_t * PER;
        float e[PER];
        int32_t m = 0;
        for (int j = 0; j < PER && base + j < row.n; j++) e[m++] = expf(sift__gpu_read(&row, base + j, v.lg[base + j]) - row.max);
        const int32_t j = m > 0 ? sift__gpu_walk_f(e, m, s_rem) : 0;
        row.token = id_at(v, base + j);
        row.mode = SIFT_GPU_DONE;
        row_store(d, r, row);
    }
}

/* Long lists at the end of a device prefix: as they are into the handoff buffers. */
__global__ void __launch_bounds__(NT) k_finish(sift__gpu_dev d)
{
    const int r = blockIdx.y, c = blockIdx.x;
    __shared__ sift__gpu_row row;
    if (!chunk_enter(d, row, r)) return;
    const view v = view_of(d, row, r);
    float x[PER];
    const int32_t start = load_values(v, row, c, x);
    const int32_t n = row.n < d.cap ? row.n : d.cap;
#pragma unroll
    for (int j = 0; j < PER; j++)
        if (start + j < n) {
            d.hid[(int64_t)r * d.cap + start + j] = id_at(v, start + j);
            d.hlg[(int64_t)r * d.cap + start + j] = x[j];
        }
    if (last_block(&d.rows[r].done, (unsigned)chunks_of(row.n)) && threadIdx.x == 0) {
        row.n = n;
        row.flags &= ~(SIFT_GPU_PHYS | SIFT_GPU_PROBS);
        row.mode = SIFT_GPU_DONE;
        row_store(d, r, row);
    }
}

/* ---- the tail kernel: everything left of a short list, in shared memory ---------------------- */

struct tail_mem {
    int32_t *id;
    float *lg, *pr;
    u64 *key;
};

/* (logit desc, position asc), carrying ids and logits; n <= SIFT_GPU_SMALL */
__device__ void tail_sort(tail_mem &m, int32_t n)
{
    int32_t P = 1;
    while (P < n) P <<= 1;
    for (int32_t i = threadIdx.x; i < P; i += NT) m.key[i] = i < n ? sift__gpu_sortkey(m.lg[i], i) : 0ull;
    __syncthreads();
    for (int32_t k = 2; k <= P; k <<= 1)
        for (int32_t j = k >> 1; j > 0; j >>= 1) {
            for (int32_t i = threadIdx.x; i < P; i += NT) {
                const int32_t x = i ^ j;
                if (x > i) {
                    const u64 a = m.key[i], b = m.key[x];
                    if (((i & k) == 0) ? a < b : a > b) m.key[i] = b, m.key[x] = a;
                }
            }
            __syncthreads();
        }
    int32_t ids[SIFT_GPU_SMALL / NT];
    float lgs[SIFT_GPU_SMALL / NT];
#pragma unroll
    for (int q = 0; q < SIFT_GPU_SMALL / NT; q++) {
        const int32_t i = q * NT + (int32_t)threadIdx.x;
        if (i < n) {
            const int32_t pos = sift__gpu_sortkey_pos(m.key[i]);
            ids[q] = m.id[pos];
            lgs[q] = m.lg[pos];
        }
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < SIFT_GPU_SMALL / NT; q++) {
        const int32_t i = q * NT + (int32_t)threadIdx.x;
        if (i < n) {
            m.id[i] = ids[q];
            m.lg[i] = lgs[q];
        }
    }
    __syncthreads();
}

__device__ float tail_max(const tail_mem &m, int32_t n, uint32_t flags)
{
    if (flags & SIFT_GPU_SORTED) return m.lg[0];
    u64 best = 0;
    for (int32_t i = threadIdx.x; i < n; i += NT) {
        const u64 k = sift__gpu_key(m.lg[i]);
        best = k > best ? k : best;
    }
    return sift__gpu_unkey((uint32_t)block_max_u64(best));
}

__device__ int32_t tail_argmax(const tail_mem &m, int32_t n)
{
    u64 best = 0;
    for (int32_t i = threadIdx.x; i < n; i += NT) {
        const u64 k = sift__gpu_sortkey(m.lg[i], i);
        best = k > best ? k : best;
    }
    return sift__gpu_sortkey_pos(block_max_u64(best));
}

__device__ int32_t tail_find(const tail_mem &m, int32_t n, int32_t token)
{
    if (token >= 0 && token < n && m.id[token] == token) return token;
    for (int32_t i = 0; i < n; i++)
        if (m.id[i] == token) return i;
    return -1;
}

__global__ void __launch_bounds__(NT) k_tail(sift__gpu_dev d)
{
    SIFT_GPU_DYN_SMEM(smem);
    const int r = blockIdx.x;
    __shared__ sift__gpu_row row;
    __shared__ double a[NT], s[NT];
    __shared__ float s_f;
    __shared__ int32_t s_i;
    if (threadIdx.x == 0) row = d.rows[r];
    __syncthreads();
    if (row.mode != SIFT_GPU_TAIL) return;
    /* sized for this run's longest list (d.tail_cap), keys for its power of two */
    int32_t P = 1;
    while (P < d.tail_cap) P <<= 1;
    tail_mem m;
    m.key = reinterpret_cast<u64 *>(smem);
    m.id = reinterpret_cast<int32_t *>(m.key + P);
    m.lg = reinterpret_cast<float *>(m.id + d.tail_cap);
    m.pr = m.lg + d.tail_cap;

    int32_t n = row.n;
    if (n > d.tail_cap) __trap(); /* cannot happen (sift__gpu_tail_cap); never overrun shared memory */
    {
        const view v = view_of(d, row, r);
        for (int32_t i = threadIdx.x; i < n; i += NT) {
            m.id[i] = id_at(v, i);
            m.lg[i] = sift__gpu_read(&row, i, v.lg[i]);
        }
    }
    __syncthreads();
    uint32_t flags = row.flags & ~SIFT_GPU_PHYS;
    if (flags & SIFT_GPU_SORTED) tail_sort(m, n);
    int32_t token = -1;
    int selected = 0;
    for (int op = row.next_op; op < d.n_ops && !selected; op++) {
        const sift__gpu_param pm = param(d, op, r);
        if (!pm.on) continue;
        switch (d.kinds[op]) {
        case SIFT_GPU_OP_BIAS:
            if (threadIdx.x == 0)
                for (int b = 0; b < pm.k; b++) {
                    const sift__gpu_bias e = d.bias[pm.off + b];
                    const int32_t at = tail_find(m, n, e.token);
                    if (at >= 0) m.lg[at] += e.bias;
                }
            __syncthreads();
            flags &= ~(SIFT_GPU_SORTED | SIFT_GPU_PROBS);
            break;
        case SIFT_GPU_OP_PENALTIES: {
            const int32_t cnt = d.pen_n[r];
            for (int32_t i = threadIdx.x; i < cnt; i += NT) {
                const int32_t at = tail_find(m, n, d.pen_tok[(int64_t)r * d.window + i]);
                if (at >= 0) m.lg[at] = sift__gpu_penalize(m.lg[at], d.pen_cnt[(int64_t)r * d.window + i], pm.f0, pm.f1, pm.f2);
            }
            __syncthreads();
            flags &= ~(SIFT_GPU_SORTED | SIFT_GPU_PROBS);
            break;
        }
        case SIFT_GPU_OP_TEMP:
            if (pm.f0 > 0.0f) {
                for (int32_t i = threadIdx.x; i < n; i += NT) m.lg[i] = m.lg[i] / pm.f0;
            } else if (n > 0) {
                const int32_t keep = tail_argmax(m, n);
                for (int32_t i = threadIdx.x; i < n; i += NT)
                    if (i != keep) m.lg[i] = -INFINITY;
            }
            __syncthreads();
            flags &= ~SIFT_GPU_PROBS;
            break;
        case SIFT_GPU_OP_TOP_K: {
            const int32_t k = pm.k < n ? pm.k : n;
            if (!(flags & SIFT_GPU_SORTED)) tail_sort(m, n);
            if (k < n) flags &= ~SIFT_GPU_PROBS;
            n = k;
            flags |= SIFT_GPU_SORTED;
            break;
        }
        case SIFT_GPU_OP_TOP_P: {
            if (n == 0) break;
            /* llama.cpp's softmax: float sum in list order (one thread), then the cut on
             * the float running sum in sorted order (one thread) */
            const float max = tail_max(m, n, flags);
            for (int32_t i = threadIdx.x; i < n; i += NT) m.pr[i] = expf(m.lg[i] - max);
            __syncthreads();
            if (threadIdx.x == 0) s_f = sift__gpu_fsum(m.pr, n);
            __syncthreads();
            const float sum = s_f;
            if (!(flags & SIFT_GPU_SORTED)) tail_sort(m, n);
            for (int32_t i = threadIdx.x; i < n; i += NT) m.pr[i] = expf(m.lg[i] - max) / sum;
            __syncthreads();
            if (threadIdx.x == 0) s_i = sift__gpu_topp_cut(m.pr, n, pm.f0, pm.k);
            __syncthreads();
            const int32_t last = s_i;
            flags |= SIFT_GPU_SORTED | SIFT_GPU_PROBS;
            if (last < n) flags &= ~SIFT_GPU_PROBS;
            n = last;
            break;
        }
        case SIFT_GPU_OP_MIN_P: {
            if (n == 0) break;
            const float bound = tail_max(m, n, flags) + pm.f1;
            const int32_t kmin = pm.k > 1 ? pm.k : 1;
            uint32_t c = 0;
            for (int32_t i = threadIdx.x; i < n; i += NT) c += m.lg[i] >= bound;
            const int32_t cnt = (int32_t)block_sum<uint32_t>(c);
            int32_t n_new;
            if (!(flags & SIFT_GPU_SORTED) && cnt >= kmin) {
                /* the stable filter: thread t owns positions [16 t, 16 t + 16) */
                int32_t ids[PER];
                float lgs[PER];
                uint32_t mine = 0;
#pragma unroll
                for (int j = 0; j < PER; j++) {
                    const int32_t i = (int32_t)threadIdx.x * PER + j;
                    if (i < n && m.lg[i] >= bound) {
                        ids[mine] = m.id[i];
                        lgs[mine] = m.lg[i];
                        mine++;
                    }
                }
                const uint32_t at = block_excl_sum<uint32_t>(mine, nullptr); /* syncs: all read */
                for (uint32_t j = 0; j < mine; j++) {
                    m.id[at + j] = ids[j];
                    m.lg[at + j] = lgs[j];
                }
                __syncthreads();
                n_new = cnt;
            } else {
                if (!(flags & SIFT_GPU_SORTED)) tail_sort(m, n);
                flags |= SIFT_GPU_SORTED;
                n_new = sift__gpu_minp_cut_sorted(cnt, kmin, n);
            }
            if (n_new < n) flags &= ~SIFT_GPU_PROBS;
            n = n_new;
            break;
        }
        case SIFT_GPU_OP_GREEDY:
            if (n > 0) token = m.id[tail_argmax(m, n)];
            selected = 1;
            break;
        case SIFT_GPU_OP_DIST: {
            selected = 1;
            if (n == 0) break;
            const float max = tail_max(m, n, flags);
            for (int32_t i = threadIdx.x; i < n; i += NT) m.pr[i] = expf(m.lg[i] - max);
            __syncthreads();
            double t_sum = 0.0;
#pragma unroll
            for (int j = 0; j < PER; j++) {
                const int32_t i = (int32_t)threadIdx.x * PER + j;
                if (i < n) t_sum += (double)m.pr[i];
            }
            a[threadIdx.x] = t_sum;
            s[threadIdx.x] = t_sum;
            block_tree_sum(a);
            if (threadIdx.x == 0) {
                const double target = a[0] * sift__gpu_uniform(pm.seed, d.rng[r]);
                d.rng[r] += 1;
                double rem;
                const int32_t t = sift__gpu_walk_d(s, NT, target, &rem);
                const int32_t base = t * PER;
                const int32_t cnt = n - base < PER ? n - base : PER;
                const int32_t j = cnt > 0 ? sift__gpu_walk_f(m.pr + base, cnt, rem) : 0;
                s_i = m.id[base + j];
            }
            __syncthreads();
            token = s_i;
            break;
        }
        default: break;
        }
    }
    if (flags & SIFT_GPU_SORTED) flags |= SIFT_GPU_PHYS;
    if (!selected) { /* hand the list over, in its order */
        const int32_t k = n < d.cap ? n : d.cap;
        for (int32_t i = threadIdx.x; i < k; i += NT) {
            d.hid[(int64_t)r * d.cap + i] = m.id[i];
            d.hlg[(int64_t)r * d.cap + i] = m.lg[i];
            if (flags & SIFT_GPU_PROBS) d.hp[(int64_t)r * d.cap + i] = m.pr[i];
        }
        n = k;
    }
    if (threadIdx.x == 0) {
        row.flags = flags;
        row.n = n;
        row.token = token;
        row.n_div = 0;
        row.only = -1;
        row.mode = SIFT_GPU_DONE;
        row_store(d, r, row);
    }
}

/* ---- launching -------------------------------------------------------------------------------- */

extern "C" size_t sift__gpu_tail_smem(int32_t cap)
{
    int32_t P = 1;
    while (P < cap) P <<= 1;
    return (size_t)P * sizeof(u64) + (size_t)cap * (sizeof(int32_t) + 2 * sizeof(float));
}

extern "C" int sift__gpu_prepare(void)
{
    return (int)cudaFuncSetAttribute(k_tail, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)sift__gpu_tail_smem(SIFT_GPU_SMALL));
}

extern "C" int sift__gpu_launch(const sift__gpu_dev *dp, const sift__gpu_step *steps, int32_t n_steps, void *stream)
{
    const sift__gpu_dev d = *dp;
    cudaStream_t st = (cudaStream_t)stream;
    const dim3 rows_grid((unsigned)((d.n_seq + NT - 1) / NT));
    const dim3 chunk_grid((unsigned)d.n_chunks, (unsigned)d.n_seq);
    const dim3 block_grid((unsigned)d.n_seq);
    for (int32_t i = 0; i < n_steps; i++) {
        const sift__gpu_step &s = steps[i];
        switch (s.kind) {
        case SIFT_GPU_STEP_BEGIN: SIFT_GPU_LAUNCH(k_begin, rows_grid, 0, st, d); break;
        case SIFT_GPU_STEP_PEN_PREP: SIFT_GPU_LAUNCH(k_pen_prep, block_grid, 0, st, d, s.op); break;
        case SIFT_GPU_STEP_COPY: SIFT_GPU_LAUNCH(k_copy, chunk_grid, 0, st, d); break;
        case SIFT_GPU_STEP_BIAS: SIFT_GPU_LAUNCH(k_bias, rows_grid, 0, st, d, s.op); break;
        case SIFT_GPU_STEP_PEN_APPLY: SIFT_GPU_LAUNCH(k_pen_apply, block_grid, 0, st, d, s.op); break;
        case SIFT_GPU_STEP_TEMP: SIFT_GPU_LAUNCH(k_temp, rows_grid, 0, st, d, s.op); break;
        case SIFT_GPU_STEP_ARGMAX: SIFT_GPU_LAUNCH(k_argmax, chunk_grid, 0, st, d, s.op); break;
        case SIFT_GPU_STEP_MAX: SIFT_GPU_LAUNCH(k_max, chunk_grid, 0, st, d); break;
        case SIFT_GPU_STEP_HIST: SIFT_GPU_LAUNCH(k_hist, chunk_grid, 0, st, d, s.op, s.level); break;
        case SIFT_GPU_STEP_COUNT: SIFT_GPU_LAUNCH(k_count, chunk_grid, 0, st, d, s.op, s.level); break;
        case SIFT_GPU_STEP_WRITE: SIFT_GPU_LAUNCH(k_write, chunk_grid, 0, st, d, s.op); break;
        case SIFT_GPU_STEP_DIST: SIFT_GPU_LAUNCH(k_dist, chunk_grid, 0, st, d, s.op); break;
        case SIFT_GPU_STEP_TAIL: SIFT_GPU_LAUNCH(k_tail, block_grid, sift__gpu_tail_smem(d.tail_cap), st, d); break;
        case SIFT_GPU_STEP_FINISH: SIFT_GPU_LAUNCH(k_finish, chunk_grid, 0, st, d); break;
        case SIFT_GPU_STEP_OUT: SIFT_GPU_LAUNCH(k_out, rows_grid, 0, st, d); break;
        case SIFT_GPU_STEP_ACCEPT: SIFT_GPU_LAUNCH(k_accept, rows_grid, 0, st, d, 0); break;
        default: return (int)cudaErrorInvalidValue;
        }
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return (int)e;
    }
    return 0;
}

extern "C" int sift__gpu_accept(const sift__gpu_dev *dp, void *stream)
{
    const sift__gpu_dev d = *dp;
    SIFT_GPU_LAUNCH(k_accept, dim3((unsigned)((d.n_seq + NT - 1) / NT)), 0, (cudaStream_t)stream, d, 1);
    return (int)cudaGetLastError();
}
