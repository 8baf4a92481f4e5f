/*
 * host_reference.c - the device program on the host, pass for pass (see host_reference.h).
 *
 * Each function below is one kernel of kernels.cu. A "block" here is a loop iteration over
 * the chunks of a row (SIFT_GPU_CHUNK positions each); inside it, "thread" t owns the
 * SIFT_GPU_PER_THREAD consecutive positions starting at t * SIFT_GPU_PER_THREAD, as on the
 * device. The work the device's last finishing block does for a row (deciding a radix
 * level, turning counts into offsets, drawing) happens here after the loop over chunks.
 * Counts, fixed-point masses and maxima do not depend on the order they are combined in;
 * double sums are formed in the device's exact order (per thread, then the block's tree,
 * then chunk by chunk), so a draw picks the same token here and there.
 */
#include "gpu/host_reference.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK SIFT_GPU_CHUNK
#define PER SIFT_GPU_PER_THREAD
#define THREADS SIFT_GPU_THREADS

/* the tail kernel's shared memory */
typedef struct sift__gpu_tail_list {
    int32_t n;
    int32_t id[SIFT_GPU_SMALL];
    float lg[SIFT_GPU_SMALL];
    float pr[SIFT_GPU_SMALL];
    uint64_t key[SIFT_GPU_SMALL];
} tail_list;

sift_status sift__gpu_ref_init(sift__gpu_ref *ref, const sift__gpu_plan *plan, int32_t n_seq, int32_t cap)
{
    memset(ref, 0, sizeof *ref);
    ref->plan = plan;
    ref->n_seq = n_seq;
    ref->n_vocab = plan->n_vocab;
    ref->cap = cap > 0 ? cap : 1;
    ref->n_chunks = (plan->n_vocab + CHUNK - 1) / CHUNK;
    const size_t nv = (size_t)n_seq * (size_t)plan->n_vocab;
    const size_t w = plan->window > 0 ? (size_t)plan->window : 1;
    ref->rng = calloc((size_t)n_seq, sizeof *ref->rng);
    ref->ring = calloc((size_t)n_seq * w, sizeof *ref->ring);
    ref->ring_first = calloc((size_t)n_seq, sizeof *ref->ring_first);
    ref->ring_count = calloc((size_t)n_seq, sizeof *ref->ring_count);
    ref->rows = calloc((size_t)n_seq, sizeof *ref->rows);
    for (int b = 0; b < 2; b++) {
        ref->list_id[b] = malloc(nv * sizeof *ref->list_id[b]);
        ref->list_lg[b] = malloc(nv * sizeof *ref->list_lg[b]);
    }
    ref->hist_cnt = calloc(SIFT_GPU_NBINS, sizeof *ref->hist_cnt);
    ref->hist_mass = calloc(SIFT_GPU_NBINS, sizeof *ref->hist_mass);
    const size_t np = (size_t)n_seq * (size_t)ref->n_chunks;
    ref->part_a = calloc(np, sizeof *ref->part_a);
    ref->part_b = calloc(np, sizeof *ref->part_b);
    ref->part_d = calloc(np, sizeof *ref->part_d);
    ref->part_k = calloc(np, sizeof *ref->part_k);
    ref->pen_tok = calloc((size_t)n_seq * w, sizeof *ref->pen_tok);
    ref->pen_cnt = calloc((size_t)n_seq * w, sizeof *ref->pen_cnt);
    ref->pen_n = calloc((size_t)n_seq, sizeof *ref->pen_n);
    ref->out = calloc((size_t)n_seq, sizeof *ref->out);
    ref->hid = calloc((size_t)n_seq * (size_t)ref->cap, sizeof *ref->hid);
    ref->hlg = calloc((size_t)n_seq * (size_t)ref->cap, sizeof *ref->hlg);
    ref->hp = calloc((size_t)n_seq * (size_t)ref->cap, sizeof *ref->hp);
    ref->tail = malloc(sizeof(struct sift__gpu_tail_list));
    if (!ref->tail || !ref->rng || !ref->ring || !ref->ring_first || !ref->ring_count || !ref->rows || !ref->list_id[0] ||
        !ref->list_id[1] || !ref->list_lg[0] || !ref->list_lg[1] || !ref->hist_cnt || !ref->hist_mass || !ref->part_a ||
        !ref->part_b || !ref->part_d || !ref->part_k || !ref->pen_tok || !ref->pen_cnt || !ref->pen_n || !ref->out ||
        !ref->hid || !ref->hlg || !ref->hp) {
        sift__gpu_ref_free(ref);
        return SIFT_E_NOMEM;
    }
    return SIFT_OK;
}

void sift__gpu_ref_free(sift__gpu_ref *ref)
{
    if (!ref) return;
    free(ref->rng);
    free(ref->ring);
    free(ref->ring_first);
    free(ref->ring_count);
    free(ref->rows);
    for (int b = 0; b < 2; b++) {
        free(ref->list_id[b]);
        free(ref->list_lg[b]);
    }
    free(ref->hist_cnt);
    free(ref->hist_mass);
    free(ref->part_a);
    free(ref->part_b);
    free(ref->part_d);
    free(ref->part_k);
    free(ref->pen_tok);
    free(ref->pen_cnt);
    free(ref->pen_n);
    free(ref->out);
    free(ref->hid);
    free(ref->hlg);
    free(ref->hp);
    free(ref->tail);
    memset(ref, 0, sizeof *ref);
}

void sift__gpu_ref_reset_row(sift__gpu_ref *ref, int32_t r)
{
    ref->rng[r] = 0;
    ref->ring_first[r] = 0;
    ref->ring_count[r] = 0;
}

/* ---- reading a row's list ----------------------------------------------------------------- */

typedef struct run_ctx {
    sift__gpu_ref *ref;
    const sift__gpu_rowspec *const *rows;
    const float *logits;
    int64_t ld;
} run_ctx;

static const float *stored_lg(const run_ctx *c, int32_t r)
{
    const sift__gpu_row *row = &c->ref->rows[r];
    if (row->src == SIFT_GPU_SRC_INPUT) return c->logits + (int64_t)r * c->ld;
    return c->ref->list_lg[row->src] + (size_t)r * (size_t)c->ref->n_vocab;
}

static int32_t id_at(const run_ctx *c, int32_t r, int32_t pos)
{
    const sift__gpu_row *row = &c->ref->rows[r];
    return row->ids ? pos : c->ref->list_id[row->src][(size_t)r * (size_t)c->ref->n_vocab + (size_t)pos];
}

static float value_at(const run_ctx *c, int32_t r, int32_t pos)
{
    return sift__gpu_read(&c->ref->rows[r], pos, stored_lg(c, r)[pos]);
}

static int32_t chunks_of(int32_t n) { return n <= 0 ? 1 : (n + CHUNK - 1) / CHUNK; }

/* row r's per-block partials (as the device keeps them, [n_seq][n_chunks]) */
#define PART(ref, a, r) ((ref)->a + (size_t)(r) * (size_t)(ref)->n_chunks)

static const sift__gpu_param *param(const run_ctx *c, int32_t r, int32_t op) { return &c->rows[r]->prm[op]; }

static int full_on(const run_ctx *c, int32_t r, int32_t op)
{
    return c->ref->rows[r].mode == SIFT_GPU_FULL && param(c, r, op)->on;
}

/* ---- the passes ----------------------------------------------------------------------------- */

static void k_pen_prep(run_ctx *c, int32_t op)
{
    sift__gpu_ref *ref = c->ref;
    const int32_t w = ref->plan->window > 0 ? ref->plan->window : 1;
    for (int32_t r = 0; r < ref->n_seq; r++) {
        ref->pen_n[r] = 0;
        if (!param(c, r, op)->on) continue;
        const int32_t last_n = param(c, r, op)->k;
        const int32_t cnt = ref->ring_count[r];
        int32_t tmp[SIFT_GPU_MAX_WINDOW];
        for (int32_t i = 0; i < cnt; i++) tmp[i] = ref->ring[(size_t)r * w + (size_t)((ref->ring_first[r] + i) % last_n)];
        /* ascending, as the device's bitonic sort leaves them */
        for (int32_t i = 1; i < cnt; i++) {
            const int32_t v = tmp[i];
            int32_t j = i;
            while (j > 0 && tmp[j - 1] > v) {
                tmp[j] = tmp[j - 1];
                j--;
            }
            tmp[j] = v;
        }
        int32_t m = 0;
        for (int32_t i = 0; i < cnt; i++) {
            if (m > 0 && ref->pen_tok[(size_t)r * w + (size_t)(m - 1)] == tmp[i]) {
                ref->pen_cnt[(size_t)r * w + (size_t)(m - 1)]++;
            } else {
                ref->pen_tok[(size_t)r * w + (size_t)m] = tmp[i];
                ref->pen_cnt[(size_t)r * w + (size_t)m] = 1;
                m++;
            }
        }
        ref->pen_n[r] = m;
    }
}

static void k_copy(run_ctx *c)
{
    sift__gpu_ref *ref = c->ref;
    for (int32_t r = 0; r < ref->n_seq; r++) {
        sift__gpu_row *row = &ref->rows[r];
        if (row->mode != SIFT_GPU_FULL || row->src != SIFT_GPU_SRC_INPUT) continue;
        float *dst = ref->list_lg[0] + (size_t)r * (size_t)ref->n_vocab;
        for (int32_t i = 0; i < row->n; i++) dst[i] = value_at(c, r, i);
        row->src = SIFT_GPU_SRC_BUF0;
        row->ids = 1;
        row->n_div = 0;
        row->only = -1;
    }
}

static void k_bias(run_ctx *c, int32_t op)
{
    sift__gpu_ref *ref = c->ref;
    for (int32_t r = 0; r < ref->n_seq; r++) {
        if (!full_on(c, r, op)) continue;
        sift__gpu_row *row = &ref->rows[r];
        const sift__gpu_param *pm = param(c, r, op);
        float *lg = ref->list_lg[0] + (size_t)r * (size_t)ref->n_vocab;
        for (int32_t b = 0; b < pm->k; b++) {
            const sift__gpu_bias e = c->rows[r]->bias[pm->off + b];
            if (e.token >= 0 && e.token < row->n) lg[e.token] += e.bias;
        }
        row->has_max = 0;
        row->flags &= ~(SIFT_GPU_SORTED | SIFT_GPU_PROBS);
    }
}

static void k_pen_apply(run_ctx *c, int32_t op)
{
    sift__gpu_ref *ref = c->ref;
    const int32_t w = ref->plan->window > 0 ? ref->plan->window : 1;
    for (int32_t r = 0; r < ref->n_seq; r++) {
        if (!full_on(c, r, op)) continue;
        sift__gpu_row *row = &ref->rows[r];
        const sift__gpu_param *pm = param(c, r, op);
        float *lg = ref->list_lg[0] + (size_t)r * (size_t)ref->n_vocab;
        for (int32_t i = 0; i < ref->pen_n[r]; i++) {
            const int32_t t = ref->pen_tok[(size_t)r * w + (size_t)i];
            if (t >= 0 && t < row->n) lg[t] = sift__gpu_penalize(lg[t], ref->pen_cnt[(size_t)r * w + (size_t)i], pm->f0, pm->f1, pm->f2);
        }
        row->has_max = 0;
        row->flags &= ~(SIFT_GPU_SORTED | SIFT_GPU_PROBS);
    }
}

static void k_temp(run_ctx *c, int32_t op)
{
    for (int32_t r = 0; r < c->ref->n_seq; r++)
        if (full_on(c, r, op) && param(c, r, op)->f0 > 0.0f) sift__gpu_row_temp(&c->ref->rows[r], param(c, r, op)->f0);
}

/* first maximum: the largest (key, -position) */
static void k_argmax(run_ctx *c, int32_t op)
{
    sift__gpu_ref *ref = c->ref;
    const int greedy = ref->plan->ops[op].kind == SIFT_GPU_OP_GREEDY;
    for (int32_t r = 0; r < ref->n_seq; r++) {
        if (!full_on(c, r, op) || (!greedy && param(c, r, op)->f0 > 0.0f)) continue;
        sift__gpu_row *row = &ref->rows[r];
        const int32_t nc = chunks_of(row->n);
        uint32_t *pa = PART(ref, part_a, r), *pb = PART(ref, part_b, r);
        double *pd = PART(ref, part_d, r);
        uint64_t *pk = PART(ref, part_k, r);
        (void)pa, (void)pb, (void)pd, (void)pk;
        for (int32_t ch = 0; ch < nc; ch++) {
            uint64_t best = 0;
            for (int32_t i = ch * CHUNK; i < row->n && i < (ch + 1) * CHUNK; i++) {
                const uint64_t k = sift__gpu_sortkey(value_at(c, r, i), i);
                best = k > best ? k : best;
            }
            pk[ch] = best;
        }
        uint64_t best = 0;
        for (int32_t ch = 0; ch < nc; ch++) best = pk[ch] > best ? pk[ch] : best;
        const int32_t pos = sift__gpu_sortkey_pos(best);
        if (greedy) {
            row->token = id_at(c, r, pos);
            row->mode = SIFT_GPU_DONE;
        } else {
            row->only = pos;
            row->flags &= ~SIFT_GPU_PROBS;
        }
    }
}

static void k_max(run_ctx *c)
{
    sift__gpu_ref *ref = c->ref;
    for (int32_t r = 0; r < ref->n_seq; r++) {
        sift__gpu_row *row = &ref->rows[r];
        if (row->mode != SIFT_GPU_FULL || row->has_max) continue;
        uint32_t best = 0;
        for (int32_t i = 0; i < row->n; i++) {
            const uint32_t k = sift__gpu_key(value_at(c, r, i));
            best = k > best ? k : best;
        }
        row->max = sift__gpu_unkey(best);
        row->has_max = 1;
    }
}

static void k_hist(run_ctx *c, int32_t op, int32_t level)
{
    sift__gpu_ref *ref = c->ref;
    const int kind = ref->plan->ops[op].kind;
    for (int32_t r = 0; r < ref->n_seq; r++) {
        if (!full_on(c, r, op)) continue;
        sift__gpu_row *row = &ref->rows[r];
        sift__gpu_row local = *row;
        if (level == 0 && kind != SIFT_GPU_OP_MIN_P) {
            if (sift__gpu_filter_init(&local, kind, param(c, r, op)) == SIFT_GPU_F_KEEP) {
                sift__gpu_row_filtered(row, kind); /* block 0 does this on the device */
                continue;
            }
        } else if (row->fstate != SIFT_GPU_F_SELECT || row->sel.level != level) {
            continue;
        }
        const sift__gpu_sel *s = &local.sel;
        const int mass = (s->active & SIFT_GPU_SEL_MASS) != 0;
        for (int32_t i = 0; i < row->n; i++) {
            const float l = value_at(c, r, i);
            const uint32_t key = sift__gpu_key(l);
            if (!sift__gpu_level_match(key, level, s->prefix)) continue;
            const uint32_t d = sift__gpu_level_digit(key, level);
            ref->hist_cnt[d]++;
            if (mass) ref->hist_mass[d] += sift__gpu_mass(expf(l - row->max));
        }
        /* the last block decides */
        const int nb = sift__gpu_level_nbins(level);
        if (level == 0 && mass) {
            sift__gpu_m64 total = 0;
            for (int b = 0; b < nb; b++) total += ref->hist_mass[b];
            local.sel.mass_t = sift__gpu_mass_target(local.sel.p, total);
        }
        sift__gpu_cross ck = {-1, 0, 0}, cm = {-1, 0, 0};
        sift__gpu_walk(&local.sel, ref->hist_cnt, ref->hist_mass, nb - 1, 0, local.sel.above, local.sel.mass_above, &ck, &cm);
        uint32_t thr = 0;
        int32_t need = 0;
        const int keep = sift__gpu_sel_advance(&local.sel, &ck, &cm, ref->hist_cnt, ref->hist_mass, &thr, &need);
        row->sel = local.sel;
        row->pred = local.pred;
        row->kmin = local.kmin;
        if (keep) {
            row->fstate = SIFT_GPU_F_NONE;
            sift__gpu_row_filtered(row, kind);
        } else if (row->sel.level == 3) {
            row->fstate = SIFT_GPU_F_CUT;
            row->thr = thr;
            row->need = need;
            row->n_gt = row->n_eq = 0;
            row->pred = 0;
            row->counted = 0;
        } else {
            row->fstate = SIFT_GPU_F_SELECT;
        }
        memset(ref->hist_cnt, 0, SIFT_GPU_NBINS * sizeof *ref->hist_cnt);
        memset(ref->hist_mass, 0, SIFT_GPU_NBINS * sizeof *ref->hist_mass);
    }
}

/* entries above / at the cut per block; then per-block offsets. first: min_p's predicate. */
static void k_count(run_ctx *c, int32_t op, int first)
{
    sift__gpu_ref *ref = c->ref;
    const int kind = ref->plan->ops[op].kind;
    for (int32_t r = 0; r < ref->n_seq; r++) {
        if (!full_on(c, r, op)) continue;
        sift__gpu_row *row = &ref->rows[r];
        sift__gpu_row local = *row;
        if (first) {
            if (kind != SIFT_GPU_OP_MIN_P) continue;
            sift__gpu_filter_init(&local, kind, param(c, r, op));
        } else if (row->fstate != SIFT_GPU_F_CUT || row->counted) {
            continue;
        }
        const int32_t nc = chunks_of(row->n);
        uint32_t *pa = PART(ref, part_a, r), *pb = PART(ref, part_b, r);
        double *pd = PART(ref, part_d, r);
        uint64_t *pk = PART(ref, part_k, r);
        (void)pa, (void)pb, (void)pd, (void)pk;
        for (int32_t ch = 0; ch < nc; ch++) {
            uint32_t gt = 0, eq = 0;
            for (int32_t i = ch * CHUNK; i < row->n && i < (ch + 1) * CHUNK; i++) {
                const uint32_t key = sift__gpu_key(value_at(c, r, i));
                gt += key > local.thr;
                eq += key == local.thr;
            }
            pa[ch] = gt;
            pb[ch] = eq;
        }
        /* the last block: totals and exclusive offsets */
        uint32_t gt = 0, eq = 0;
        for (int32_t ch = 0; ch < nc; ch++) {
            const uint32_t a = pa[ch], b = pb[ch];
            pa[ch] = gt;
            pb[ch] = eq;
            gt += a;
            eq += b;
        }
        local.fstate = sift__gpu_row_counted(&local, gt, eq);
        if (local.fstate == SIFT_GPU_F_CUT && sift__gpu_row_kept(&local) >= (uint32_t)local.n) {
            local.fstate = SIFT_GPU_F_KEEP; /* nothing to cut */
            sift__gpu_row_filtered(&local, kind);
        }
        if (local.fstate == SIFT_GPU_F_KEEP) local.fstate = SIFT_GPU_F_NONE;
        *row = local;
    }
}

static void k_write(run_ctx *c, int32_t op)
{
    sift__gpu_ref *ref = c->ref;
    const int kind = ref->plan->ops[op].kind;
    for (int32_t r = 0; r < ref->n_seq; r++) {
        sift__gpu_row *row = &ref->rows[r];
        if (!full_on(c, r, op) || row->fstate != SIFT_GPU_F_CUT || !row->counted) continue;
        const int dst = row->src == SIFT_GPU_SRC_BUF0 ? 1 : 0;
        int32_t *oid = ref->list_id[dst] + (size_t)r * (size_t)ref->n_vocab;
        float *olg = ref->list_lg[dst] + (size_t)r * (size_t)ref->n_vocab;
        const uint32_t need = (uint32_t)row->need;
        uint32_t maxk = 0;
        const int32_t nc = chunks_of(row->n);
        uint32_t *pa = PART(ref, part_a, r), *pb = PART(ref, part_b, r);
        double *pd = PART(ref, part_d, r);
        uint64_t *pk = PART(ref, part_k, r);
        (void)pa, (void)pb, (void)pd, (void)pk;
        for (int32_t ch = 0; ch < nc; ch++) {
            uint32_t eq_rank = pb[ch];
            uint32_t at = pa[ch] + (eq_rank < need ? eq_rank : need);
            for (int32_t i = ch * CHUNK; i < row->n && i < (ch + 1) * CHUNK; i++) {
                const float l = value_at(c, r, i);
                const uint32_t key = sift__gpu_key(l);
                int keep = key > row->thr;
                if (key == row->thr) keep = eq_rank++ < need;
                if (!keep) continue;
                oid[at] = id_at(c, r, i);
                olg[at] = l;
                at++;
                maxk = key > maxk ? key : maxk;
            }
        }
        const uint32_t n_new = sift__gpu_row_kept(row);
        sift__gpu_row_filtered(row, kind);
        sift__gpu_row_compacted(row, op, (int32_t)n_new, sift__gpu_unkey(maxk));
    }
}

/* one block's part of dist: the thread sums of positions [base, base + CHUNK) of the list */
static void dist_threads(const run_ctx *c, int32_t r, int32_t base, float max, double *s)
{
    const sift__gpu_row *row = &c->ref->rows[r];
    for (int t = 0; t < THREADS; t++) {
        double a = 0.0;
        for (int j = 0; j < PER; j++) {
            const int32_t i = base + t * PER + j;
            if (i < row->n) a += (double)expf(value_at(c, r, i) - max);
        }
        s[t] = a;
    }
}

static void k_dist(run_ctx *c, int32_t op)
{
    sift__gpu_ref *ref = c->ref;
    for (int32_t r = 0; r < ref->n_seq; r++) {
        if (!full_on(c, r, op)) continue;
        sift__gpu_row *row = &ref->rows[r];
        const int32_t nc = chunks_of(row->n);
        uint32_t *pa = PART(ref, part_a, r), *pb = PART(ref, part_b, r);
        double *pd = PART(ref, part_d, r);
        uint64_t *pk = PART(ref, part_k, r);
        (void)pa, (void)pb, (void)pd, (void)pk;
        double s[THREADS];
        for (int32_t ch = 0; ch < nc; ch++) {
            dist_threads(c, r, ch * CHUNK, row->max, s);
            pd[ch] = sift__gpu_tree_sum(s);
        }
        /* the last block draws */
        double total = 0.0;
        for (int32_t ch = 0; ch < nc; ch++) total += pd[ch];
        const double target = total * sift__gpu_uniform(param(c, r, op)->seed, ref->rng[r]++);
        double rem, rem2;
        const int32_t ch = sift__gpu_walk_d(pd, nc, target, &rem);
        dist_threads(c, r, ch * CHUNK, row->max, s);
        const int32_t t = sift__gpu_walk_d(s, THREADS, rem, &rem2);
        float e[PER];
        int32_t m = 0;
        for (int j = 0; j < PER; j++) {
            const int32_t i = ch * CHUNK + t * PER + j;
            if (i < row->n) e[m++] = expf(value_at(c, r, i) - row->max);
        }
        const int32_t j = m > 0 ? sift__gpu_walk_f(e, m, rem2) : 0;
        row->token = id_at(c, r, ch * CHUNK + t * PER + j);
        row->mode = SIFT_GPU_DONE;
    }
}

/* ---- the tail kernel: one row's remaining ops on a short list ------------------------------- */


static int cmp_desc_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* sort the list by (logit desc, position asc), carrying ids and logits */
static void tail_sort(tail_list *L)
{
    for (int32_t i = 0; i < L->n; i++) L->key[i] = sift__gpu_sortkey(L->lg[i], i);
    qsort(L->key, (size_t)L->n, sizeof *L->key, cmp_desc_u64);
    for (int32_t i = 0; i < L->n; i++) {
        const int32_t pos = sift__gpu_sortkey_pos(L->key[i]);
        L->pr[i] = L->lg[pos];
        L->key[i] = (uint64_t)(uint32_t)L->id[pos];
    }
    for (int32_t i = 0; i < L->n; i++) {
        L->lg[i] = L->pr[i];
        L->id[i] = (int32_t)L->key[i];
    }
}

static float tail_max(const tail_list *L, uint32_t flags)
{
    if (flags & SIFT_GPU_SORTED) return L->lg[0];
    uint32_t best = 0;
    for (int32_t i = 0; i < L->n; i++) {
        const uint32_t k = sift__gpu_key(L->lg[i]);
        best = k > best ? k : best;
    }
    return sift__gpu_unkey(best);
}

/* the first maximum in list order */
static int32_t tail_argmax(const tail_list *L)
{
    uint64_t best = 0;
    for (int32_t i = 0; i < L->n; i++) {
        const uint64_t k = sift__gpu_sortkey(L->lg[i], i);
        best = k > best ? k : best;
    }
    return sift__gpu_sortkey_pos(best);
}

static int32_t tail_find(const tail_list *L, int32_t token)
{
    if (token >= 0 && token < L->n && L->id[token] == token) return token;
    for (int32_t i = 0; i < L->n; i++)
        if (L->id[i] == token) return i;
    return -1;
}

static void k_tail(run_ctx *c, tail_list *L)
{
    sift__gpu_ref *ref = c->ref;
    const sift__gpu_plan *plan = ref->plan;
    const int32_t w = plan->window > 0 ? plan->window : 1;
    const int32_t cap = sift__gpu_tail_cap(plan, c->rows, ref->n_seq);
    for (int32_t r = 0; r < ref->n_seq; r++) {
        sift__gpu_row *row = &ref->rows[r];
        if (row->mode != SIFT_GPU_TAIL) continue;
        if (row->n > cap) ref->tail_overflow = 1; /* the device would stop here (__trap) */
        L->n = row->n;
        for (int32_t i = 0; i < L->n; i++) {
            L->id[i] = id_at(c, r, i);
            L->lg[i] = value_at(c, r, i);
        }
        row->n_div = 0;
        row->only = -1;
        uint32_t flags = row->flags & ~SIFT_GPU_PHYS;
        if (flags & SIFT_GPU_SORTED) tail_sort(L);
        row->token = -1;
        int selected = 0;
        for (int32_t op = row->next_op; op < plan->n_ops && !selected; op++) {
            const sift__gpu_param *pm = param(c, r, op);
            if (!pm->on) continue;
            switch (plan->ops[op].kind) {
            case SIFT_GPU_OP_BIAS:
                for (int32_t b = 0; b < pm->k; b++) {
                    const sift__gpu_bias e = c->rows[r]->bias[pm->off + b];
                    const int32_t at = tail_find(L, e.token);
                    if (at >= 0) L->lg[at] += e.bias;
                }
                flags &= ~(SIFT_GPU_SORTED | SIFT_GPU_PROBS);
                break;
            case SIFT_GPU_OP_PENALTIES:
                for (int32_t i = 0; i < ref->pen_n[r]; i++) {
                    const int32_t at = tail_find(L, ref->pen_tok[(size_t)r * w + (size_t)i]);
                    if (at >= 0)
                        L->lg[at] = sift__gpu_penalize(L->lg[at], ref->pen_cnt[(size_t)r * w + (size_t)i], pm->f0, pm->f1, pm->f2);
                }
                flags &= ~(SIFT_GPU_SORTED | SIFT_GPU_PROBS);
                break;
            case SIFT_GPU_OP_TEMP:
                if (pm->f0 > 0.0f) {
                    for (int32_t i = 0; i < L->n; i++) L->lg[i] = L->lg[i] / pm->f0;
                } else if (L->n > 0) {
                    const int32_t keep = tail_argmax(L);
                    for (int32_t i = 0; i < L->n; i++)
                        if (i != keep) L->lg[i] = -INFINITY;
                }
                flags &= ~SIFT_GPU_PROBS;
                break;
            case SIFT_GPU_OP_TOP_K: {
                const int32_t k = pm->k < L->n ? pm->k : L->n;
                if (!(flags & SIFT_GPU_SORTED)) tail_sort(L);
                if (k < L->n) flags &= ~SIFT_GPU_PROBS;
                L->n = k;
                flags |= SIFT_GPU_SORTED;
                break;
            }
            case SIFT_GPU_OP_TOP_P: {
                if (L->n == 0) break;
                const float max = tail_max(L, flags);
                for (int32_t i = 0; i < L->n; i++) L->pr[i] = expf(L->lg[i] - max);
                const float sum = sift__gpu_fsum(L->pr, L->n);
                if (!(flags & SIFT_GPU_SORTED)) tail_sort(L);
                for (int32_t i = 0; i < L->n; i++) L->pr[i] = expf(L->lg[i] - max) / sum;
                const int32_t last = sift__gpu_topp_cut(L->pr, L->n, pm->f0, pm->k);
                flags |= SIFT_GPU_SORTED | SIFT_GPU_PROBS;
                if (last < L->n) flags &= ~SIFT_GPU_PROBS;
                L->n = last;
                break;
            }
            case SIFT_GPU_OP_MIN_P: {
                if (L->n == 0) break;
                const float bound = tail_max(L, flags) + pm->f1;
                const int32_t kmin = pm->k > 1 ? pm->k : 1;
                int32_t cnt = 0;
                for (int32_t i = 0; i < L->n; i++) cnt += L->lg[i] >= bound;
                int32_t n_new;
                if (!(flags & SIFT_GPU_SORTED) && cnt >= kmin) { /* the stable filter */
                    int32_t at = 0;
                    for (int32_t i = 0; i < L->n; i++)
                        if (L->lg[i] >= bound) {
                            L->id[at] = L->id[i];
                            L->lg[at] = L->lg[i];
                            at++;
                        }
                    n_new = cnt;
                } else {
                    if (!(flags & SIFT_GPU_SORTED)) tail_sort(L);
                    flags |= SIFT_GPU_SORTED;
                    n_new = sift__gpu_minp_cut_sorted(cnt, kmin, L->n);
                }
                if (n_new < L->n) flags &= ~SIFT_GPU_PROBS;
                L->n = n_new;
                break;
            }
            case SIFT_GPU_OP_GREEDY:
                if (L->n > 0) row->token = L->id[tail_argmax(L)];
                selected = 1;
                break;
            case SIFT_GPU_OP_DIST: {
                if (L->n == 0) {
                    selected = 1;
                    break;
                }
                const float max = tail_max(L, flags);
                for (int32_t i = 0; i < L->n; i++) L->pr[i] = expf(L->lg[i] - max);
                double s[THREADS];
                for (int t = 0; t < THREADS; t++) {
                    double a = 0.0;
                    for (int j = 0; j < PER; j++) {
                        const int32_t i = t * PER + j;
                        if (i < L->n) a += (double)L->pr[i];
                    }
                    s[t] = a;
                }
                double ts[THREADS];
                memcpy(ts, s, sizeof ts);
                const double total = sift__gpu_tree_sum(ts);
                const double target = total * sift__gpu_uniform(pm->seed, ref->rng[r]++);
                double rem;
                const int32_t t = sift__gpu_walk_d(s, THREADS, target, &rem);
                const int32_t base = t * PER;
                const int32_t m = L->n - base < PER ? L->n - base : PER;
                const int32_t j = m > 0 ? sift__gpu_walk_f(L->pr + base, m, rem) : 0;
                row->token = L->id[base + j];
                selected = 1;
                break;
            }
            default: break;
            }
        }
        if (flags & SIFT_GPU_SORTED) flags |= SIFT_GPU_PHYS;
        row->flags = flags;
        row->n = L->n;
        if (selected) {
            row->mode = SIFT_GPU_DONE;
            continue;
        }
        /* hand the list over, in its order */
        const int32_t n = L->n < ref->cap ? L->n : ref->cap;
        memcpy(ref->hid + (size_t)r * (size_t)ref->cap, L->id, (size_t)n * sizeof *L->id);
        memcpy(ref->hlg + (size_t)r * (size_t)ref->cap, L->lg, (size_t)n * sizeof *L->lg);
        if (flags & SIFT_GPU_PROBS) memcpy(ref->hp + (size_t)r * (size_t)ref->cap, L->pr, (size_t)n * sizeof *L->pr);
        row->mode = SIFT_GPU_DONE;
        row->n = n;
    }
}

/* long lists that reach the end of the device prefix: into the handoff buffers as they are */
static void k_finish(run_ctx *c)
{
    sift__gpu_ref *ref = c->ref;
    for (int32_t r = 0; r < ref->n_seq; r++) {
        sift__gpu_row *row = &ref->rows[r];
        if (row->mode != SIFT_GPU_FULL) continue;
        const int32_t n = row->n < ref->cap ? row->n : ref->cap;
        for (int32_t i = 0; i < n; i++) {
            ref->hid[(size_t)r * (size_t)ref->cap + (size_t)i] = id_at(c, r, i);
            ref->hlg[(size_t)r * (size_t)ref->cap + (size_t)i] = value_at(c, r, i);
        }
        row->n = n;
        row->flags &= ~(SIFT_GPU_PHYS | SIFT_GPU_PROBS);
        row->mode = SIFT_GPU_DONE;
    }
}

static void k_out(run_ctx *c)
{
    sift__gpu_ref *ref = c->ref;
    for (int32_t r = 0; r < ref->n_seq; r++) {
        const sift__gpu_row *row = &ref->rows[r];
        ref->out[r] = (sift__gpu_out){row->token >= 0 ? 0 : row->n, row->flags, row->token, 0};
    }
}

static void accept_rows(sift__gpu_ref *ref, const sift__gpu_rowspec *const *rows, int32_t n_seq, const int32_t *tokens)
{
    const sift__gpu_plan *plan = ref->plan;
    const int32_t w = plan->window > 0 ? plan->window : 1;
    for (int32_t op = 0; op < plan->n_ops; op++) {
        if (plan->ops[op].kind != SIFT_GPU_OP_PENALTIES) continue;
        for (int32_t r = 0; r < n_seq; r++) {
            const sift__gpu_param *pm = &rows[r]->prm[op];
            const int32_t t = tokens ? tokens[r] : ref->rows[r].token;
            if (!pm->on || t < 0) continue;
            sift__gpu_ring_push(ref->ring + (size_t)r * (size_t)w, &ref->ring_first[r], &ref->ring_count[r], pm->k, t);
        }
    }
}

void sift__gpu_ref_accept(sift__gpu_ref *ref, const sift__gpu_rowspec *const *rows, int32_t n_seq, const int32_t *tokens)
{
    accept_rows(ref, rows, n_seq, tokens);
}

void sift__gpu_ref_run(sift__gpu_ref *ref, const sift__gpu_rowspec *const *rows, int32_t n_seq, const float *logits,
                       int64_t ld)
{
    run_ctx c = {ref, rows, logits, ld};
    const int32_t saved = ref->n_seq;
    ref->n_seq = n_seq;
    sift__gpu_step steps[SIFT_GPU_MAX_STEPS];
    const int32_t n_steps = sift__gpu_steps(ref->plan, rows, n_seq, steps);
    for (int32_t i = 0; i < n_steps; i++) {
        const sift__gpu_step *s = &steps[i];
        switch (s->kind) {
        case SIFT_GPU_STEP_BEGIN:
            for (int32_t r = 0; r < n_seq; r++) sift__gpu_row_begin(&ref->rows[r], ref->n_vocab);
            break;
        case SIFT_GPU_STEP_PEN_PREP: k_pen_prep(&c, s->op); break;
        case SIFT_GPU_STEP_COPY: k_copy(&c); break;
        case SIFT_GPU_STEP_BIAS: k_bias(&c, s->op); break;
        case SIFT_GPU_STEP_PEN_APPLY: k_pen_apply(&c, s->op); break;
        case SIFT_GPU_STEP_TEMP: k_temp(&c, s->op); break;
        case SIFT_GPU_STEP_ARGMAX: k_argmax(&c, s->op); break;
        case SIFT_GPU_STEP_MAX: k_max(&c); break;
        case SIFT_GPU_STEP_HIST: k_hist(&c, s->op, s->level); break;
        case SIFT_GPU_STEP_COUNT: k_count(&c, s->op, s->level); break;
        case SIFT_GPU_STEP_WRITE: k_write(&c, s->op); break;
        case SIFT_GPU_STEP_DIST: k_dist(&c, s->op); break;
        case SIFT_GPU_STEP_TAIL: k_tail(&c, ref->tail); break;
        case SIFT_GPU_STEP_FINISH: k_finish(&c); break;
        case SIFT_GPU_STEP_OUT: k_out(&c); break;
        case SIFT_GPU_STEP_ACCEPT: accept_rows(ref, rows, n_seq, NULL); break;
        default: break;
        }
    }
    ref->n_seq = saved;
}
