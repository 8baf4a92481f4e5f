/*
 * test_gpu_host.c - everything of the device chain that can be checked without a GPU.
 *
 *  - Philox4x32-10 against Random123's known-answer vectors; the float key order.
 *  - The split of chain items (device prefix / CPU tail items), per-sequence specs,
 *    sampling params planned from their items (the hybrid chain has the same token
 *    streams as sift_chain_from_params), the pass list, the handoff unpacking.
 *  - The host reference of the kernels (host_reference.c: the same radix levels, cut
 *    decisions, compactions, tail-kernel algorithms and Philox draws, pass for pass) against the CPU
 *    samplers on every row of the reference logits: the surviving candidates, in order,
 *    bit for bit; top_p's rare differences are checked to be llama.cpp's float rounding
 *    (the reference then agrees with the exact cut).
 *  - Hybrid chains: reference device prefix + CPU tail (dist on the CPU) reproduce all 13
 *    llama.cpp reference token streams; device-selected greedy with penalties and biases
 *    matches the CPU chain token for token; dist on the reference device is reproducible
 *    and passes a chi-square test.
 *
 * Under valgrind and in sanitizer builds the loops over rows, steps and draws are shortened
 * (every path still runs); the normal build runs them in full.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "gpu/handoff.h"
#include "gpu/plan.h"
#include "gpu/host_reference.h"
#include "gpu_testutil.h"

/* ---- a one-row device chain on the host reference ------------------------------------------ */

typedef struct hostchain {
    sift__gpu_plan plan;
    sift__gpu_rowspec row;
    const sift__gpu_rowspec *rows[1];
    sift__gpu_ref ref;
    sift_chain *tail;
    sift_candidates cand;
    sift_candidates base; /* cand as allocated: CPU samplers (xtc) may advance its pointers */
    uint64_t *scratch;
    uint32_t V;
} hostchain;

static int hc_init(hostchain *h, const char *spec, uint32_t V, int cpu_dist)
{
    memset(h, 0, sizeof *h);
    sift_chain_env env = {.n_vocab = (int32_t)V, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    sift_error err;
    if (sift__gpu_plan_spec(spec, &env, (int32_t)V, cpu_dist, &h->plan, &h->row, &err) != SIFT_OK) {
        fprintf(stderr, "%s: %s\n", spec, err.msg);
        return -1;
    }
    h->rows[0] = &h->row;
    h->V = V;
    const int32_t cap = h->plan.selects ? 1 : sift__gpu_row_bound(&h->plan, &h->row);
    if (sift__gpu_ref_init(&h->ref, &h->plan, 1, cap) != SIFT_OK) return -1;
    if (sift__gpu_tail_chain(&h->row, &env, &h->tail, &err) != SIFT_OK) return -1;
    if (sift_candidates_init(&h->cand, (size_t)cap) != SIFT_OK) return -1;
    h->base = h->cand;
    h->scratch = malloc((size_t)cap * sizeof *h->scratch);
    return h->scratch ? 0 : -1;
}

static void hc_free(hostchain *h)
{
    sift__gpu_ref_free(&h->ref);
    sift__gpu_rowspec_free(&h->row);
    sift_chain_free(h->tail);
    sift_candidates_free(&h->base);
    free(h->scratch);
}

/* one run of the device prefix: the handoff unpacked into h->cand (0), or a selected token (1) */
static int hc_device(hostchain *h, const float *logits, sift_token *token)
{
    sift__gpu_ref_run(&h->ref, h->rows, 1, logits, h->V);
    assert_int_equal(h->ref.tail_overflow, 0);
    const sift__gpu_out *o = &h->ref.out[0];
    *token = o->token;
    if (o->token >= 0 || h->plan.selects) return 1;
    h->cand = h->base;
    assert_int_equal(sift__gpu_handoff_unpack(o, h->ref.hid, h->ref.hlg, h->ref.hp, h->scratch, &h->cand), SIFT_OK);
    return 0;
}

/* a whole step: device prefix, CPU tail, accept everywhere */
static sift_token hc_step(hostchain *h, const float *logits)
{
    sift_token tok;
    if (hc_device(h, logits, &tok)) return tok;
    if (!h->tail) return SIFT_TOKEN_NULL;
    tok = sift_chain_apply(h->tail, &h->cand);
    sift_chain_accept(h->tail, tok);
    sift__gpu_ref_accept(&h->ref, h->rows, 1, &tok);
    return tok;
}

static int tie_permutation(const sift_candidates *a, const sift_candidates *b);

/* a row's CPU tail as its items' names and arguments: "mirostat_v2(17,5,0.1)" */
static const char *tail_text(const sift__gpu_rowspec *row, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = 0;
    for (size_t i = 0; i < row->tail.n && k < cap; i++) {
        const sift__chain_item *it = &row->tail.v[i];
        k += (size_t)snprintf(buf + k, cap - k, "%s%s(", i ? ";" : "", sift__item_name(it->kind));
        switch (it->kind) {
        case SIFT__ITEM_DIST: k += (size_t)snprintf(buf + k, cap - k, "%u", (unsigned)it->seed); break;
        case SIFT__ITEM_TOP_K: k += (size_t)snprintf(buf + k, cap - k, "%d", (int)it->i[0]); break;
        case SIFT__ITEM_MIROSTAT_V2:
            k += (size_t)snprintf(buf + k, cap - k, "%u,%g,%g", (unsigned)it->seed, (double)it->f[0], (double)it->f[1]);
            break;
        case SIFT__ITEM_TEMP: k += (size_t)snprintf(buf + k, cap - k, "%g", (double)it->f[0]); break;
        case SIFT__ITEM_TYPICAL:
            k += (size_t)snprintf(buf + k, cap - k, "%g,%d", (double)it->f[0], (int)it->i[0]);
            break;
        case SIFT__ITEM_TEMP_EXT:
        case SIFT__ITEM_PENALTIES:
            if (it->kind == SIFT__ITEM_PENALTIES) k += (size_t)snprintf(buf + k, cap - k, "%d,", (int)it->i[0]);
            k += (size_t)snprintf(buf + k, cap - k, "%g,%g,%g", (double)it->f[0], (double)it->f[1], (double)it->f[2]);
            break;
        case SIFT__ITEM_LOGIT_BIAS:
            for (size_t b = 0; b < it->n_bias && k < cap; b++)
                k += (size_t)snprintf(buf + k, cap - k, "%s%d:%g", b ? "," : "", (int)it->bias[b].token, (double)it->bias[b].bias);
            break;
        default: break;
        }
        if (k < cap) k += (size_t)snprintf(buf + k, cap - k, ")");
    }
    return buf;
}

/* ---- Philox, keys ---------------------------------------------------------------------------- */

static void test_philox_kat(void **state)
{
    (void)state;
    /* Random123 kat_vectors: philox4x32 10 <ctr> <key> -> <out> */
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6,
         0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420,
         0x24126ea1},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t ctr[4] = {kat[i][0], kat[i][1], kat[i][2], kat[i][3]};
        const uint32_t key[2] = {kat[i][4], kat[i][5]};
        sift__gpu_philox(ctr, key);
        for (int j = 0; j < 4; j++) assert_int_equal(ctr[j], kat[i][6 + j]);
    }
    /* uniform draws: in [0, 1), mean and variance of U(0,1), distinct streams per seed */
    double s = 0, s2 = 0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        const double u = sift__gpu_uniform(42, (uint64_t)i);
        assert_true(u >= 0.0 && u < 1.0);
        s += u;
        s2 += u * u;
    }
    const double mean = s / n, var = s2 / n - mean * mean;
    assert_true(fabs(mean - 0.5) < 0.005);
    assert_true(fabs(var - 1.0 / 12) < 0.002);
    assert_true(sift__gpu_uniform(1, 0) != sift__gpu_uniform(2, 0));
    assert_true(sift__gpu_uniform(1, 0) != sift__gpu_uniform(1, 1));
    assert_true(sift__gpu_uniform(7, 123) == sift__gpu_uniform(7, 123));
}

static void test_keys(void **state)
{
    (void)state;
    const float v[] = {-INFINITY, -1e30f, -2.5f, -1.0f, -1e-40f, -0.0f, 0.0f, 1e-40f, 1e-30f, 1.0f, 2.5f, 3e38f, INFINITY};
    const int n = (int)(sizeof v / sizeof *v);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            const uint32_t a = sift__gpu_key(v[i]), b = sift__gpu_key(v[j]);
            assert_int_equal(v[i] < v[j], a < b);
            assert_int_equal(v[i] == v[j], a == b);
        }
    for (int i = 0; i < n; i++) assert_true(sift__gpu_unkey(sift__gpu_key(v[i])) == v[i]);
    /* digits: the three levels cover the key */
    const uint32_t k = sift__gpu_key(12.375f);
    const uint32_t rebuilt = (sift__gpu_level_digit(k, 0) << 21) | (sift__gpu_level_digit(k, 1) << 10) | sift__gpu_level_digit(k, 2);
    assert_int_equal(rebuilt, k);
    assert_true(sift__gpu_level_match(k, 1, k >> 21));
    assert_true(sift__gpu_level_match(k, 2, k >> 10));
    assert_false(sift__gpu_level_match(k, 2, (k >> 10) ^ 1));
    /* sort keys: logit descending, then position ascending */
    assert_true(sift__gpu_sortkey(2.0f, 5) > sift__gpu_sortkey(1.0f, 0));
    assert_true(sift__gpu_sortkey(1.0f, 3) > sift__gpu_sortkey(1.0f, 4));
    assert_int_equal(sift__gpu_sortkey_pos(sift__gpu_sortkey(-3.0f, 1234)), 1234);
}

/* ---- the split -------------------------------------------------------------------------------- */

typedef struct split_case {
    const char *spec;
    int n_dev_items, n_ops, selects;
    const char *tail;
    const char *desc;
} split_case;

static void test_plan_split(void **state)
{
    (void)state;
    static const split_case cases[] = {
        {"top_k(40);temp(0.8);dist(1234)", 3, 3, 1, "", "device: top-k -> temp -> dist"},
        {"top_k(256);temp(0.8);mirostat_v2(17,5,0.1)", 2, 2, 0, "mirostat_v2(17,5,0.1)",
         "device: top-k -> temp | cpu: mirostat-v2"},
        {"dist(3);top_k(4)", 0, 0, 0, "dist(3);top_k(4)", "device: (none) | cpu: dist -> top-k"},
        {"top_k(5);logit_bias(3:1.5);greedy()", 1, 1, 0, "logit_bias(3:1.5);greedy()",
         "device: top-k | cpu: logit-bias -> greedy"},
        {"logit_bias(3:1.5, 7:-inf);penalties(64,1.3,0.2,0.1);top_p(0.9,1);min_p(0.05,0);greedy()", 5, 5, 1, "", NULL},
        {"penalties(64,1.0,0.0,0.0);top_k(40);typical(1.0,0);top_p(0.95,0);min_p(0.05,0);xtc(0.0,0.1,0,42);"
         "temp_ext(0.8,0.0,1.0);dist(42)",
         8, 6, 1, "", "device: ?penalties -> top-k -> ?typical -> top-p -> min-p -> ?xtc -> temp-ext -> dist"},
        {"top_k(40);temp_ext(0.8,0.5,1);dist(19)", 1, 1, 0, "temp_ext(0.8,0.5,1);dist(19)", NULL},
        {"typical(0.9,1);dist(3)", 0, 0, 0, "typical(0.9,1);dist(3)", NULL},
        {"penalties(9000,1.1,0,0);top_k(3);greedy()", 0, 0, 0, "penalties(9000,1.1,0,0);top_k(3);greedy()", NULL},
        {"temp(1.1);temp(1.2);temp(1.3);temp(1.4);temp(1.5);greedy()", 4, 4, 0, "temp(1.5);greedy()", NULL},
        {" top_k ( 2 ) ; ; dry(0.8,1.75,2,64,\"a;b)\",\"c\");dist()", 1, 1, 0, "dry(0.8,1.75,2,64,\"a;b)\",\"c\");dist()", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const split_case *c = &cases[i];
        sift__gpu_plan plan;
        sift__gpu_rowspec row;
        sift_error err = {0};
        sift_chain_env env = {.n_vocab = 32000, .vocab = NULL, .eot = -1, .default_seed = 5};
        /* the dry case has string breakers and no vocabulary: libsift refuses it, as it should */
        const sift_status st = sift__gpu_plan_spec(c->spec, &env, 32000, 0, &plan, &row, &err);
        if (strstr(c->spec, "\"a;b)\"")) {
            assert_int_equal(st, SIFT_E_PARSE);
            assert_non_null(strstr(err.msg, "need a vocabulary"));
            continue;
        }
        if (st != SIFT_OK) fail_msg("%s: %s", c->spec, err.msg);
        assert_int_equal(plan.n_dev_items, c->n_dev_items);
        assert_int_equal(plan.n_ops, c->n_ops);
        assert_int_equal(plan.selects, c->selects);
        char tail[256];
        assert_string_equal(tail_text(&row, tail, sizeof tail), c->tail);
        if (c->desc) assert_string_equal(plan.desc, c->desc);
        sift__gpu_rowspec_free(&row);
    }

    /* parameters as the device reads them */
    sift__gpu_plan plan;
    sift__gpu_rowspec row;
    sift_error err;
    assert_int_equal(sift__gpu_plan_spec("logit_bias(3:1.5,7:-inf,3:0.25);penalties(64,1.3,0.2,0.1);top_k(0);min_p(0.1,3);temp(0.5);dist()",
                                         &(sift_chain_env){.n_vocab = 100, .default_seed = 77}, 100, 0, &plan, &row, &err),
                     SIFT_OK);
    assert_int_equal(plan.n_ops, 6);
    assert_int_equal(plan.window, 64);
    assert_int_equal(row.n_bias, 3);
    assert_int_equal(row.prm[0].k, 3);
    assert_int_equal(row.bias[1].token, 7);
    assert_true(isinf(row.bias[1].bias) && row.bias[1].bias < 0);
    assert_true(row.bias[2].bias == 0.25f);
    assert_true(row.prm[1].on && row.prm[1].k == 64 && row.prm[1].f0 == 1.3f && row.prm[1].f1 == 0.2f && row.prm[1].f2 == 0.1f);
    assert_int_equal(plan.ops[2].kind, SIFT_GPU_OP_TOP_K);
    assert_false(row.prm[2].on); /* top_k(0) is a no-op: a slot, off */
    assert_true(row.prm[3].f0 == 0.1f && row.prm[3].k == 3 && row.prm[3].f1 == logf(0.1f));
    assert_true(row.prm[4].f0 == 0.5f);
    assert_int_equal(row.prm[5].seed, 77); /* dist() takes env->default_seed */
    assert_int_equal(sift__gpu_row_bound(&plan, &row), 100);
    sift__gpu_rowspec_free(&row);

    /* cpu_dist keeps a final dist on the CPU */
    assert_int_equal(sift__gpu_plan_spec("top_k(40);temp(0.8);dist(1234)", NULL, 32000, 1, &plan, &row, &err), SIFT_OK);
    assert_int_equal(plan.n_ops, 2);
    char tail[64];
    assert_string_equal(tail_text(&row, tail, sizeof tail), "dist(1234)");
    assert_int_equal(sift__gpu_row_bound(&plan, &row), 40);
    sift__gpu_rowspec_free(&row);
}

static void test_plan_errors(void **state)
{
    (void)state;
    sift__gpu_plan plan;
    sift__gpu_rowspec row;
    sift_error err;
    assert_int_equal(sift__gpu_plan_spec("top_k(40;dist()", NULL, 32000, 0, &plan, &row, &err), SIFT_E_PARSE);
    assert_non_null(strstr(err.msg, "col"));
    assert_int_equal(sift__gpu_plan_spec("top_q(4)", NULL, 32000, 0, &plan, &row, &err), SIFT_E_PARSE);
    assert_non_null(strstr(err.msg, "unknown sampler 'top_q'"));
    assert_int_equal(sift__gpu_plan_spec("logit_bias(40000:1)", NULL, 32000, 0, &plan, &row, &err), SIFT_E_PARSE);
    assert_int_equal(sift__gpu_plan_spec("greedy()", NULL, 0, 0, &plan, &row, &err), SIFT_E_INVAL);
    assert_int_equal(sift__gpu_plan_spec("greedy()", NULL, SIFT_GPU_MAX_VOCAB + 1, 0, &plan, &row, &err), SIFT_E_INVAL);
    assert_int_equal(sift__gpu_plan_spec(NULL, NULL, 10, 0, &plan, &row, &err), SIFT_E_INVAL);
}

static void test_plan_row(void **state)
{
    (void)state;
    sift__gpu_plan plan;
    sift__gpu_rowspec base, row;
    sift_error err;
    assert_int_equal(sift__gpu_plan_spec("penalties(64,1.0,0,0);top_k(40);typical(1.0,0);top_p(0.95,0);temp_ext(0.8,0,1);mirostat_v2(1,5,0.1)",
                                         NULL, 1000, 0, &plan, &base, &err),
                     SIFT_OK);
    assert_int_equal(plan.n_dev_items, 5);
    /* other values, penalties turned on, another tail */
    assert_int_equal(sift__gpu_plan_row(&plan, "penalties(32,1.2,0,0);top_k(7);typical(1.0,0);top_p(1.0,0);temp_ext(1.5,0,1);dist(9)",
                                        NULL, &row, &err),
                     SIFT_OK);
    assert_true(row.prm[0].on && row.prm[0].k == 32);
    assert_int_equal(row.prm[1].k, 7);
    assert_false(row.prm[2].on); /* top_p(1.0) is off */
    assert_true(row.prm[3].f0 == 1.5f);
    char tail[64];
    assert_string_equal(tail_text(&row, tail, sizeof tail), "dist(9)");
    assert_int_equal(sift__gpu_row_bound(&plan, &row), 7);
    sift__gpu_rowspec_free(&row);
    /* shapes that do not fit */
    static const char *const bad[][2] = {
        {"penalties(64,1.0,0,0);top_k(40);typical(1.0,0);top_p(0.95,0);greedy()", "sampler 5 is greedy"},
        {"penalties(64,1.0,0,0);top_k(40);typical(0.9,0);top_p(0.95,0);temp_ext(0.8,0,1)", "sampler 3 (typical) is off"},
        {"penalties(65,1.1,0,0);top_k(40);typical(1.0,0);top_p(0.95,0);temp_ext(0.8,0,1)", "window 65"},
        {"penalties(64,1.0,0,0);top_k(40);typical(1.0,0);top_p(0.95,0);temp(0.8)", "sampler 5 is temp, the chain has temp_ext"},
        {"penalties(64,1.0,0,0);top_k(40);typical(1.0,0);top_p(0.95,0)", "has 4 samplers"},
        {"penalties(64,1.0,0,0);top_k(40);typical(1.0,0);top_p(0.95,0);temp_ext(0.8,0.5,1)", "must stay a device temp"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(sift__gpu_plan_row(&plan, bad[i][0], NULL, &row, &err), SIFT_E_INVAL);
        if (!strstr(err.msg, bad[i][1])) fail_msg("%s: '%s' lacks '%s'", bad[i][0], err.msg, bad[i][1]);
    }
    assert_int_equal(sift__gpu_plan_row(&plan, "top_k(", NULL, &row, &err), SIFT_E_PARSE);
    sift__gpu_rowspec_free(&base);

    /* a chain that selects on the device takes no tail per sequence */
    assert_int_equal(sift__gpu_plan_spec("top_k(4);dist(1)", NULL, 1000, 0, &plan, &base, &err), SIFT_OK);
    assert_int_equal(sift__gpu_plan_row(&plan, "top_k(4);dist(1);greedy()", NULL, &row, &err), SIFT_E_INVAL);
    assert_int_equal(sift__gpu_plan_row(&plan, "top_k(9);dist(2)", NULL, &row, &err), SIFT_OK);
    assert_int_equal(row.prm[1].seed, 2);
    sift__gpu_rowspec_free(&row);
    sift__gpu_rowspec_free(&base);
}

/* sampling params plan from the items sift_chain_from_params builds its chain of: the
 * same split and device numbers as the equivalent spec, and a hybrid chain (device prefix
 * on the host reference, CPU tail with dist on the CPU) samples exactly like the CPU chain */
static int hc_init_params(hostchain *h, const sift_sampling_params *sp, uint32_t V, sift_error *err)
{
    memset(h, 0, sizeof *h);
    sift_chain_env env = {.n_vocab = (int32_t)V, .vocab = NULL, .eot = SIFT_TOKEN_NULL, .default_seed = 0};
    sift__chain_items items;
    if (sift__chain_items_from_params(sp, &env, &items, err) != SIFT_OK) return -1;
    const sift_status st = sift__gpu_plan_items(&items, &env, (int32_t)V, 1, &h->plan, &h->row, err);
    sift__chain_items_free(&items);
    if (st != SIFT_OK) return -1;
    h->rows[0] = &h->row;
    h->V = V;
    const int32_t cap = sift__gpu_row_bound(&h->plan, &h->row);
    if (sift__gpu_ref_init(&h->ref, &h->plan, 1, cap) != SIFT_OK) return -1;
    if (sift__gpu_tail_chain(&h->row, &env, &h->tail, err) != SIFT_OK) return -1;
    if (sift_candidates_init(&h->cand, (size_t)cap) != SIFT_OK) return -1;
    h->base = h->cand;
    h->scratch = malloc((size_t)cap * sizeof *h->scratch);
    return h->scratch ? 0 : -1;
}

static void test_plan_params(void **state)
{
    (void)state;
    gt_logits L;
    assert_int_equal(gt_load_logits(32000, &L), 0);
    sift_logit_bias biases[] = {{5, 2.5f}, {31999, -INFINITY}, {5, 0.125f}};
    for (int variant = 0; variant < 6; variant++) {
        sift_sampling_params sp = sift_sampling_default_params();
        sp.seed = 1234;
        switch (variant) {
        case 1: /* penalties, biases, min_keep, xtc on */
            sp.penalty_repeat = 1.3f, sp.penalty_freq = 0.2f, sp.penalty_present = 0.1f;
            sp.logit_bias = biases, sp.n_logit_bias = 3;
            sp.min_keep = 3, sp.xtc_probability = 0.5f, sp.xtc_threshold = 0.1f;
            break;
        case 2: sp.mirostat = 2; break;
        case 3: sp.mirostat = 1, sp.temp = 0.7f; break;
        case 4: /* adaptive-p, listed first: it is still added last */
            assert_int_equal(sift_sampling_set_samplers(&sp, "adaptive_p;top_k;temp", NULL), SIFT_OK);
            sp.adaptive_target = 0.3f;
            break;
        case 5: /* dynamic temperature, typical, top-n-sigma, odd floats */
            sp.dynatemp_range = 0.5f, sp.typ_p = 0.9f, sp.top_n_sigma = 1.5f, sp.top_p = 0.1f + 0.7f, sp.temp = 1.0f / 3.0f;
            break;
        default: break;
        }
        sift_error err;
        hostchain h;
        if (hc_init_params(&h, &sp, 32000, &err) != 0) fail_msg("variant %d: %s", variant, err.msg);
        sift_chain_env env = {.n_vocab = 32000, .vocab = NULL, .eot = -1, .default_seed = 0};
        sift_chain *cpu = sift_chain_from_params(&sp, &env, &err);
        if (!cpu) fail_msg("variant %d: %s", variant, err.msg);
        const int steps = GT_SLOW_HOST() ? 8 : 64;
        for (int t = 0; t < steps; t++) {
            const float *x = gt_row(&L, (uint32_t)t);
            const sift_token want = sift_chain_sample(cpu, x, 32000);
            const sift_token got = hc_step(&h, x);
            if (want != got) fail_msg("variant %d step %d: %d vs %d (%s)", variant, t, got, want, h.plan.desc);
        }
        sift_chain_free(cpu);
        hc_free(&h);
    }
    /* the default params split as their spec does */
    {
        sift_sampling_params sp = sift_sampling_default_params();
        sp.seed = 7;
        sift_chain_env env = {.n_vocab = 32000, .vocab = NULL, .eot = -1, .default_seed = 0};
        sift__chain_items items;
        sift__gpu_plan a, b;
        sift__gpu_rowspec ra, rb;
        sift_error err;
        assert_int_equal(sift__chain_items_from_params(&sp, &env, &items, &err), SIFT_OK);
        assert_int_equal(sift__gpu_plan_items(&items, &env, 32000, 0, &a, &ra, &err), SIFT_OK);
        sift__chain_items_free(&items);
        assert_int_equal(sift__gpu_plan_spec("penalties(64,1,0,0);dry(0,1.75,2,64);top_n_sigma(-1);top_k(40);typical(1,0);"
                                             "top_p(0.95,0);min_p(0.05,0);xtc(0,0.1,0,7);temp_ext(0.8,0,1);dist(7)",
                                             &env, 32000, 0, &b, &rb, &err),
                         SIFT_OK);
        assert_string_equal(a.desc, b.desc);
        assert_string_equal(a.desc, "device: ?penalties -> ?dry -> ?top-n-sigma -> top-k -> ?typical -> top-p -> min-p -> ?xtc "
                                    "-> temp-ext -> dist");
        assert_int_equal(a.n_ops, b.n_ops);
        assert_memory_equal(ra.prm, rb.prm, sizeof ra.prm);
        sift__gpu_rowspec_free(&ra);
        sift__gpu_rowspec_free(&rb);
    }
    /* refusals */
    sift_sampling_params sp = sift_sampling_default_params();
    sift__chain_items items;
    sift__gpu_plan plan;
    sift__gpu_rowspec row;
    sift_error err;
    sp.mirostat = 3;
    assert_int_equal(sift__chain_items_from_params(&sp, NULL, &items, &err), SIFT_E_INVAL);
    sp = sift_sampling_default_params();
    sp.ignore_eos = true;
    assert_int_equal(sift__chain_items_from_params(&sp, NULL, &items, &err), SIFT_E_INVAL);
    sp = sift_sampling_default_params();
    sift_logit_bias nanb = {1, NAN};
    sp.logit_bias = &nanb, sp.n_logit_bias = 1;
    assert_int_equal(sift__chain_items_from_params(&sp, NULL, &items, &err), SIFT_OK);
    assert_int_equal(sift__gpu_plan_items(&items, NULL, 32000, 0, &plan, &row, &err), SIFT_E_INVAL);
    assert_non_null(strstr(err.msg, "NaN"));
    sift__chain_items_free(&items);
    /* DRY string breakers stay strings, bytes as they are (no text round trip to escape them) */
    sp = sift_sampling_default_params();
    strcpy(sp.dry_sequence_breakers[0], "a\"b\\\n\x01");
    assert_int_equal(sift__chain_items_from_params(&sp, NULL, &items, &err), SIFT_OK);
    int seen = 0;
    for (size_t i = 0; i < items.n; i++) {
        if (items.v[i].kind != SIFT__ITEM_DRY) continue;
        seen = 1;
        assert_true(items.v[i].strings);
        assert_int_equal(items.v[i].n_strs, 4);
        assert_string_equal(items.v[i].strs[0], "a\"b\\\n\x01");
        assert_string_equal(items.v[i].strs[1], ":");
    }
    assert_true(seen);
    sift__chain_items_free(&items);
    free(L.x);
}

static void test_steps(void **state)
{
    (void)state;
    struct {
        const char *spec;
        uint32_t V;
        const char *want;
    } cases[] = {
        /* top_k(40) sends every row to the tail: nothing long-list after it */
        {"top_k(40);top_p(0.95,0);min_p(0.05,0);temp(0.8);dist(1)", 151936, "begin hist hist hist count write tail out"},
        {"top_p(0.95,0);dist(1)", 131072, "begin max hist hist hist count write dist tail out"},
        {"greedy()", 32000, "begin argmax out"},
        {"greedy()", 1000, "begin tail out"},
        {"penalties(64,1.3,0,0);top_k(50);greedy()", 32000,
         "begin pen_prep copy pen_apply hist hist hist count write tail out accept"},
        {"logit_bias(1:2);min_p(0.1,1);temp(1.5)", 32000,
         "begin copy bias max count hist hist hist count write temp tail finish out"},
        {"temp(0);top_k(5)", 32000, "begin argmax hist hist hist count write tail out"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sift__gpu_plan plan;
        sift__gpu_rowspec row;
        sift_error err;
        assert_int_equal(sift__gpu_plan_spec(cases[i].spec, NULL, (int32_t)cases[i].V, 0, &plan, &row, &err), SIFT_OK);
        const sift__gpu_rowspec *rows[1] = {&row};
        sift__gpu_step steps[SIFT_GPU_MAX_STEPS];
        const int32_t n = sift__gpu_steps(&plan, rows, 1, steps);
        char got[512] = "";
        for (int32_t k = 0; k < n; k++) {
            strcat(got, k ? " " : "");
            strcat(got, sift__gpu_step_name(steps[k].kind));
        }
        if (strcmp(got, cases[i].want) != 0) fail_msg("%s: got '%s'", cases[i].spec, got);
        sift__gpu_rowspec_free(&row);
    }
    /* the tail kernel's shared memory: what the longest list entering it needs */
    struct {
        const char *spec;
        uint32_t V;
        int32_t cap;
    } caps[] = {
        {"top_k(40);top_p(0.95,0);dist(1)", 151936, 40},
        {"penalties(64,1.3,0,0);top_k(256);dist(1)", 151936, 256},
        {"top_p(0.95,0);top_k(40);dist(1)", 151936, SIFT_GPU_SMALL},
        {"top_k(5000);dist(1)", 151936, SIFT_GPU_SMALL},
        {"top_k(0);dist(1)", 151936, SIFT_GPU_SMALL},
        {"top_k(40);dist(1)", 1000, 1000},
    };
    for (size_t i = 0; i < sizeof caps / sizeof *caps; i++) {
        sift__gpu_plan plan;
        sift__gpu_rowspec row;
        assert_int_equal(sift__gpu_plan_spec(caps[i].spec, NULL, (int32_t)caps[i].V, 0, &plan, &row, NULL), SIFT_OK);
        const sift__gpu_rowspec *rows[1] = {&row};
        assert_int_equal(sift__gpu_tail_cap(&plan, rows, 1), caps[i].cap);
        sift__gpu_rowspec_free(&row);
    }
}

static void test_handoff_unpack(void **state)
{
    (void)state;
    sift_candidates c;
    assert_int_equal(sift_candidates_init(&c, 8), SIFT_OK);
    const int32_t ids[5] = {2, 3, 5, 8, 9};
    const float lg[5] = {1.0f, 4.0f, -2.0f, 4.0f, 0.5f};
    const float pr[5] = {0.1f, 0.2f, 0.3f, 0.25f, 0.15f};
    uint64_t scratch[5];
    /* sorted on the CPU, id order on the device: sorted here, ties by id */
    sift__gpu_out o = {5, SIFT_GPU_SORTED | SIFT_GPU_PROBS, -1, 0};
    assert_int_equal(sift__gpu_handoff_unpack(&o, ids, lg, pr, scratch, &c), SIFT_OK);
    const int32_t want_id[5] = {3, 8, 2, 9, 5};
    for (int i = 0; i < 5; i++) assert_int_equal(c.id[i], want_id[i]);
    assert_true(c.logit[0] == 4.0f && c.logit[4] == -2.0f && c.p[1] == 0.25f);
    assert_true(c.sorted && (c.flags & SIFT_CAND_PROBS) && c.size == 5 && c.selected == -1);
    /* already in order on the device, or not sorted at all: as is */
    o.flags = 0;
    assert_int_equal(sift__gpu_handoff_unpack(&o, ids, lg, pr, scratch, &c), SIFT_OK);
    for (int i = 0; i < 5; i++) assert_int_equal(c.id[i], ids[i]);
    assert_false(c.sorted);
    assert_int_equal(c.flags, 0);
    /* refusals: a selected token, a list larger than the candidates */
    o.token = 3;
    assert_int_equal(sift__gpu_handoff_unpack(&o, ids, lg, pr, scratch, &c), SIFT_E_INVAL);
    o = (sift__gpu_out){9, 0, -1, 0};
    assert_int_equal(sift__gpu_handoff_unpack(&o, ids, lg, pr, scratch, &c), SIFT_E_INVAL);
    sift_candidates_free(&c);
}

/* ---- the reference kernels vs the CPU samplers --------------------------------------------- */

/* a and b hold the same candidates and the same sequence of logits: they differ only in
 * the order of tokens with equal logits */
static int tie_permutation(const sift_candidates *a, const sift_candidates *b)
{
    char msg[256];
    if (!sift__gpu_candidates_same_set(a, b, msg, sizeof msg)) return 0;
    for (size_t i = 0; i < a->size; i++)
        if (a->logit[i] != b->logit[i]) return 0;
    return 1;
}

typedef struct filt_stats {
    int same, rounding, ties;
} filt_stats;

/* One filter on every row: the device's handoff, unpacked, against the CPU sampler's array. */
static filt_stats filter_rows(const gt_logits *L, const char *spec, uint32_t rows)
{
    filt_stats st = {0, 0, 0};
    const uint32_t V = L->n_vocab;
    hostchain h;
    assert_int_equal(hc_init(&h, spec, V, 0), 0);
    assert_int_equal(h.plan.n_dev_items, 1);
    sift_candidates cpu;
    assert_int_equal(sift_candidates_init(&cpu, V), SIFT_OK);
    for (uint32_t r = 0; r < rows; r++) {
        const float *x = gt_row(L, r);
        assert_int_equal(gt_cpu_apply(spec, V, x, &cpu), 0);
        sift_token tok;
        if (hc_device(&h, x, &tok)) { /* greedy */
            assert_int_equal(tok, sift_candidates_selected(&cpu));
            st.same++;
            continue;
        }
        char msg[256];
        if (sift__gpu_candidates_same(&h.cand, &cpu, msg, sizeof msg)) {
            st.same++;
            continue;
        }
        /* a different cut: only top_p's, and only where llama.cpp's float sums end it
         * elsewhere than exact arithmetic does (the device then agrees with the exact cut) */
        float p = 0;
        unsigned mk = 0;
        if (sscanf(spec, "top_p(%f,%u)", &p, &mk) == 2 && h.cand.size != cpu.size) {
            const size_t exact = gt_exact_top_p(x, V, p, mk);
            if (h.cand.size == exact) {
                st.rounding++;
                continue;
            }
            fail_msg("%s V=%u row %u: device %zu, cpu %zu, exact %zu", spec, V, r, h.cand.size, cpu.size, exact);
        }
        /* the same set in another order: tied logits (llama.cpp's sort order vs ours) */
        if (tie_permutation(&h.cand, &cpu)) {
            st.ties++;
            continue;
        }
        fail_msg("%s V=%u row %u: %s", spec, V, r, msg);
    }
    sift_candidates_free(&cpu);
    hc_free(&h);
    return st;
}

static void test_ref_filters(void **state)
{
    (void)state;
    static const char *const specs[] = {
        "greedy()",        "top_k(1)",          "top_k(40)",         "top_k(256)",        "top_k(3000)",
        "top_k(4096)",     "top_k(5000)",       "top_k(31999)",      "top_k(32000)",      "top_p(0.5,1)",
        "top_p(0.9,1)",    "top_p(0.95,0)",     "top_p(0.99,1)",     "top_p(0.999,1)",    "top_p(0.9,200)",
        "top_p(0.0,1)",    "min_p(0.05,0)",     "min_p(0.1,1)",      "min_p(0.5,1)",      "min_p(0.001,0)",
        "min_p(0.5,4500)", "min_p(1.5,0)",      "min_p(0.9,50)",
    };
    const int slow = GT_SLOW_HOST();
    const uint32_t vocabs[2] = {32000, 151936};
    for (int v = 0; v < 2; v++) {
        gt_logits L;
        assert_int_equal(gt_load_logits(vocabs[v], &L), 0);
        for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
            if (slow && v && s % 4) continue; /* under valgrind: every fourth sampler at 152k */
            const uint32_t rows = slow ? 1 : (v ? 8 : L.n_rows);
            const filt_stats st = filter_rows(&L, specs[s], rows);
            printf("  %-18s V=%-6u %2d/%u identical", specs[s], vocabs[v], st.same, rows);
            if (st.rounding) printf(", %d at llama.cpp's float-rounded top_p cut (device = exact cut)", st.rounding);
            if (st.ties) printf(", %d the same set with tied logits in another order", st.ties);
            printf("\n");
        }
        free(L.x);
    }
}

/* A short vocabulary runs everything in the tail kernel; long lists cross the levels. */
static void test_ref_tail_vs_cpu(void **state)
{
    (void)state;
    gt_logits L;
    assert_int_equal(gt_load_logits(32000, &L), 0);
    static const char *const specs[] = {
        "top_k(40);top_p(0.95,0);min_p(0.05,0);temp(0.8)",
        "min_p(0.05,1);top_p(0.8,3);temp(0.7)",
        "temp(1.7);top_p(0.9,1);top_k(20)",
        "logit_bias(5:3.5,7:-inf,5:0.25);penalties(64,1.0,0,0);top_k(30)",
        "temp(0);top_k(3)",
        "top_p(0.99,1);min_p(0.2,0)",
    };
    const uint32_t Vs[2] = {3000, 32000};
    sift_candidates cpu;
    assert_int_equal(sift_candidates_init(&cpu, 32000), SIFT_OK);
    for (int v = 0; v < 2; v++)
        for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
            hostchain h;
            assert_int_equal(hc_init(&h, specs[s], Vs[v], 0), 0);
            const uint32_t rows = GT_SLOW_HOST() ? 2 : L.n_rows;
            int same = 0;
            for (uint32_t r = 0; r < rows; r++) {
                const float *x = gt_row(&L, r); /* the first V logits of the row */
                assert_int_equal(gt_cpu_apply(specs[s], Vs[v], x, &cpu), 0);
                sift_token tok;
                assert_int_equal(hc_device(&h, x, &tok), 0);
                char msg[256];
                if (sift__gpu_candidates_same(&h.cand, &cpu, msg, sizeof msg)) same++;
                else if (!tie_permutation(&h.cand, &cpu))
                    fail_msg("%s V=%u row %u: %s", specs[s], Vs[v], r, msg);
            }
            printf("  %-60s V=%-5u %d/%u identical (the rest: tied logits in another order)\n", specs[s], Vs[v], same, rows);
            hc_free(&h);
        }
    sift_candidates_free(&cpu);
    free(L.x);
}

/* The hybrid case: top_k(256);temp(0.8);<CPU sampler>. The CPU part receives the
 * all-CPU chain's candidates (every row, both vocabularies), and the token streams are the
 * all-CPU chain's. */
static void test_ref_hybrid(void **state)
{
    (void)state;
    const uint32_t vocabs[2] = {32000, 151936};
    const int slow = GT_SLOW_HOST();
    for (int v = 0; v < 2; v++) {
        gt_logits L;
        assert_int_equal(gt_load_logits(vocabs[v], &L), 0);
        const uint32_t V = vocabs[v];
        sift_candidates cpu;
        assert_int_equal(sift_candidates_init(&cpu, V), SIFT_OK);
        for (size_t t = 0; t < GT_N_HYBRID_TAILS; t++) {
            char spec[512];
            snprintf(spec, sizeof spec, "top_k(256);temp(0.8);%s", gt_hybrid_tails[t]);
            hostchain h;
            assert_int_equal(hc_init(&h, spec, V, 0), 0);
            assert_int_equal(h.plan.n_dev_items, 2);
            int identical = 0;
            const uint32_t rows = slow ? 2 : L.n_rows;
            for (uint32_t r = 0; r < rows; r++) {
                sift_token tok;
                assert_int_equal(hc_device(&h, gt_row(&L, r), &tok), 0);
                assert_int_equal(gt_cpu_apply("top_k(256);temp(0.8)", V, gt_row(&L, r), &cpu), 0);
                char msg[256];
                if (sift__gpu_candidates_same(&h.cand, &cpu, msg, sizeof msg)) identical++;
                else if (!tie_permutation(&h.cand, &cpu)) fail_msg("%s V=%u row %u: %s", spec, V, r, msg);
            }
            hc_free(&h);
            /* the stream, step by step (with the tail's history), against the all-CPU chain */
            assert_int_equal(hc_init(&h, spec, V, 0), 0);
            sift_chain *ref = sift_chain_from_spec(spec, &(sift_chain_env){.n_vocab = (int32_t)V}, NULL);
            assert_non_null(ref);
            const int steps = slow ? 4 : v ? 32 : 128;
            for (int k = 0; k < steps; k++) {
                const sift_token a = hc_step(&h, gt_row(&L, (uint32_t)k));
                const sift_token b = sift_chain_sample(ref, gt_row(&L, (uint32_t)k), (int32_t)V);
                if (a != b) fail_msg("%s V=%u step %d: %d vs %d", spec, V, k, a, b);
            }
            printf("  %-72s V=%-6u candidates identical on %d/%u rows; %d/%d tokens as the all-CPU chain\n", spec, V,
                   identical, rows, steps, steps);
            sift_chain_free(ref);
            hc_free(&h);
        }
        sift_candidates_free(&cpu);
        free(L.x);
    }
}

/* Device prefix (reference) + CPU tail with dist on the CPU: llama.cpp's streams, token for
 * token, for every reference chain. */
static void test_ref_reference_streams(void **state)
{
    (void)state;
    const uint32_t vocabs[2] = {32000, 151936};
    const int slow = GT_SLOW_HOST();
    for (int v = 0; v < 2; v++) {
        gt_logits L;
        assert_int_equal(gt_load_logits(vocabs[v], &L), 0);
        for (size_t c = 0; c < GT_N_CHAINS; c++) {
            int32_t want[GT_STEPS];
            assert_int_equal(gt_load_stream(vocabs[v], gt_chains[c].name, want), 0);
            hostchain h;
            assert_int_equal(hc_init(&h, gt_spec(&gt_chains[c], vocabs[v]), vocabs[v], 1), 0);
            const int steps = slow ? (v ? 2 : 8) : v ? 32 : 128;
            int t = 0;
            for (; t < steps; t++) {
                const sift_token tok = hc_step(&h, gt_row(&L, (uint32_t)t));
                if (tok != want[t]) break;
            }
            printf("  %-26s V=%-6u %3d/%d tokens as llama.cpp   (%s)\n", gt_chains[c].name, vocabs[v], t, steps, h.plan.desc);
            /* top_p over the whole vocabulary cuts where exact arithmetic does, which can
             * differ from llama.cpp's float sums (see test_ref_filters) */
            if (t < steps && strcmp(gt_chains[c].name, "topp09_dist_s7") != 0)
                fail_msg("%s V=%u: step %d differs", gt_chains[c].name, vocabs[v], t);
            hc_free(&h);
        }
        free(L.x);
    }
}

/* Greedy on the device with penalties and biases (windows kept on the device): the CPU
 * chain's tokens, step for step. */
static void test_ref_device_greedy(void **state)
{
    (void)state;
    gt_logits L;
    assert_int_equal(gt_load_logits(32000, &L), 0);
    static const char *const specs[] = {
        "penalties(64,1.3,0.2,0.1);top_k(50);greedy()",
        "logit_bias(25590:-inf,19910:-2);penalties(16,1.5,0.5,0.5);temp(0.7);greedy()",
        "penalties(8,2.0,1.0,1.0);greedy()",
        "penalties(64,1.3,0.2,0.1);top_p(0.9,1);min_p(0.05,0);greedy()",
    };
    const uint32_t Vs[2] = {2000, 32000};
    for (int v = 0; v < 2; v++)
        for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
            if (v == 0 && strstr(specs[s], "25590")) continue; /* token outside the short vocabulary */
            hostchain h;
            assert_int_equal(hc_init(&h, specs[s], Vs[v], 0), 0);
            assert_true(h.plan.selects);
            sift_chain_env env = {.n_vocab = (int32_t)Vs[v], .vocab = NULL, .eot = -1, .default_seed = 0};
            sift_chain *cpu = sift_chain_from_spec(specs[s], &env, NULL);
            assert_non_null(cpu);
            const int steps = GT_SLOW_HOST() ? 8 : GT_STEPS;
            int changed = 0;
            for (int t = 0; t < steps; t++) {
                const float *x = gt_row(&L, (uint32_t)t);
                const sift_token a = hc_step(&h, x);
                const sift_token b = sift_chain_sample(cpu, x, (int32_t)Vs[v]);
                if (a != b) fail_msg("%s V=%u step %d: device %d, cpu %d", specs[s], Vs[v], t, a, b);
                changed += t >= 32 && a != gt_row(&L, (uint32_t)t)[0]; /* keep the compiler honest */
            }
            (void)changed;
            sift_chain_free(cpu);
            hc_free(&h);
        }
    free(L.x);
}

/* Philox dist: reproducible for a seed, different across seeds, always a candidate the CPU
 * chain keeps, and (chi-square) distributed as the probabilities. */
static void test_ref_dist(void **state)
{
    (void)state;
    gt_logits L;
    assert_int_equal(gt_load_logits(32000, &L), 0);
    const char *spec = "top_k(40);top_p(0.95,0);min_p(0.05,0);temp(0.8);dist(42)";
    hostchain a, b, c;
    assert_int_equal(hc_init(&a, spec, 32000, 0), 0);
    assert_int_equal(hc_init(&b, spec, 32000, 0), 0);
    assert_int_equal(hc_init(&c, "top_k(40);top_p(0.95,0);min_p(0.05,0);temp(0.8);dist(43)", 32000, 0), 0);
    sift_candidates cpu;
    assert_int_equal(sift_candidates_init(&cpu, 32000), SIFT_OK);
    int differ = 0;
    const int steps = GT_SLOW_HOST() ? 16 : GT_STEPS;
    for (int t = 0; t < steps; t++) {
        const float *x = gt_row(&L, (uint32_t)t);
        const sift_token ta = hc_step(&a, x), tb = hc_step(&b, x), tc = hc_step(&c, x);
        assert_int_equal(ta, tb);
        differ += ta != tc;
        assert_int_equal(gt_cpu_apply("top_k(40);top_p(0.95,0);min_p(0.05,0);temp(0.8)", 32000, x, &cpu), 0);
        int found = 0;
        for (size_t i = 0; i < cpu.size; i++) found |= cpu.id[i] == ta;
        assert_true(found);
    }
    assert_true(differ > 0);
    hc_free(&a);
    hc_free(&b);
    hc_free(&c);

    /* a row draws the same tokens alone and inside a batch (chunking does not depend on the
     * batch; each row has its own stream) */
    {
        sift__gpu_plan plan;
        sift__gpu_rowspec rs;
        assert_int_equal(sift__gpu_plan_spec("top_p(0.99,1);temp(1.1);dist(5)", NULL, 32000, 0, &plan, &rs, NULL), SIFT_OK);
        const sift__gpu_rowspec *rows[4] = {&rs, &rs, &rs, &rs};
        sift__gpu_ref one, four;
        assert_int_equal(sift__gpu_ref_init(&one, &plan, 1, 1), SIFT_OK);
        assert_int_equal(sift__gpu_ref_init(&four, &plan, 4, 1), SIFT_OK);
        float *x4 = malloc(4 * 32000 * sizeof *x4);
        const int steps2 = GT_SLOW_HOST() ? 2 : 16;
        for (int t = 0; t < steps2; t++) {
            for (int r = 0; r < 4; r++) memcpy(x4 + r * 32000, gt_row(&L, (uint32_t)(t + r)), 32000 * sizeof *x4);
            sift__gpu_ref_run(&one, rows, 1, x4 + 2 * 32000, 32000);
            sift__gpu_ref_run(&four, rows, 4, x4, 32000);
            assert_int_equal(one.out[0].token, four.out[2].token);
        }
        free(x4);
        sift__gpu_ref_free(&one);
        sift__gpu_ref_free(&four);
        sift__gpu_rowspec_free(&rs);
    }

    /* chi-square: draws from the tail kernel (V <= SIFT_GPU_SMALL), from the long-list
     * kernel on the input and on a compacted list (top_k(5000) of 6000), against the CPU's
     * probabilities of the same candidates */
    const uint32_t Vs[3] = {64, 6000, 6000};
    const char *const dspec[3] = {"dist(7)", "dist(7)", "top_k(5000);dist(7)"};
    for (int v = 0; v < 3; v++) {
        const uint32_t V = Vs[v];
        float *x = malloc(V * sizeof *x);
        for (uint32_t i = 0; i < V; i++) x[i] = gt_row(&L, 3)[i] * (v ? 0.5f : 0.3f);
        hostchain h;
        assert_int_equal(hc_init(&h, dspec[v], V, 0), 0);
        if (v == 2) assert_int_equal(gt_cpu_apply("top_k(5000)", V, x, &cpu), 0);
        else sift_candidates_fill(&cpu, x, V);
        const float *p = sift_candidates_probs(&cpu);
        /* bins: every token with expected count >= 20, the rest pooled */
        const int n = GT_SLOW_HOST() ? (v ? 1000 : 10000) : (v ? 20000 : 200000);
        int *hits = calloc(V, sizeof *hits);
        for (int i = 0; i < n; i++) {
            sift_token tok;
            hc_device(&h, x, &tok);
            assert_true(tok >= 0 && (uint32_t)tok < V);
            hits[tok]++;
        }
        double chi = 0, rest_e = 0, rest_o = 0;
        int df = 0, inside = 0;
        for (size_t i = 0; i < cpu.size; i++) {
            const int32_t t = cpu.id[i];
            const double e = (double)p[i] * n;
            inside += hits[t];
            if (e >= 20) {
                chi += (hits[t] - e) * (hits[t] - e) / e;
                df++;
            } else {
                rest_e += e;
                rest_o += hits[t];
            }
        }
        assert_int_equal(inside, n); /* every draw is a candidate the CPU chain keeps */
        if (rest_e > 0) {
            chi += (rest_o - rest_e) * (rest_o - rest_e) / rest_e;
            df++;
        }
        df -= 1;
        /* p > 0.001: chi2 below the 0.999 quantile (Wilson-Hilferty approximation) */
        const double z = 3.0902, k = df;
        const double q999 = k * pow(1 - 2 / (9 * k) + z * sqrt(2 / (9 * k)), 3);
        printf("  %-20s V=%-5u %d draws: chi2 = %.1f, df = %d, 0.999 quantile %.1f\n", dspec[v], V, n, chi, df, q999);
        assert_true(df >= 3);
        assert_true(chi < q999);
        free(hits);
        free(x);
        hc_free(&h);
    }
    sift_candidates_free(&cpu);
    free(L.x);
}

/* Several rows in one batch, each with its own parameters: every row as if alone. */
static void test_ref_batch(void **state)
{
    (void)state;
    gt_logits L;
    assert_int_equal(gt_load_logits(32000, &L), 0);
    const char *base = "penalties(64,1.0,0,0);top_k(40);top_p(0.95,0);temp(0.8);greedy()";
    const char *const per[4] = {
        "penalties(64,1.0,0,0);top_k(40);top_p(0.95,0);temp(0.8);greedy()",
        "penalties(32,1.3,0.2,0.1);top_k(5000);top_p(0.5,1);temp(1.3);greedy()",
        "penalties(64,1.0,0,0);top_k(0);top_p(0.99,0);temp(0);greedy()",
        "penalties(64,1.2,0,0);top_k(3);top_p(1.0,0);temp(1.0);greedy()",
    };
    sift__gpu_plan plan;
    sift__gpu_rowspec b0, rs[4];
    sift_error err;
    assert_int_equal(sift__gpu_plan_spec(base, NULL, 32000, 0, &plan, &b0, &err), SIFT_OK);
    const sift__gpu_rowspec *rows[4];
    sift_chain *cpu[4];
    for (int r = 0; r < 4; r++) {
        if (sift__gpu_plan_row(&plan, per[r], NULL, &rs[r], &err) != SIFT_OK) fail_msg("%s", err.msg);
        rows[r] = &rs[r];
        cpu[r] = sift_chain_from_spec(per[r], &(sift_chain_env){.n_vocab = 32000}, NULL);
        assert_non_null(cpu[r]);
    }
    sift__gpu_ref ref;
    assert_int_equal(sift__gpu_ref_init(&ref, &plan, 4, 1), SIFT_OK);
    float *x = malloc(4 * 32000 * sizeof *x);
    const int steps = GT_SLOW_HOST() ? 4 : 64;
    for (int t = 0; t < steps; t++) {
        for (int r = 0; r < 4; r++) memcpy(x + r * 32000, gt_row(&L, (uint32_t)(t + 7 * r)), 32000 * sizeof *x);
        sift__gpu_ref_run(&ref, rows, 4, x, 32000);
        assert_int_equal(ref.tail_overflow, 0);
        for (int r = 0; r < 4; r++) {
            const sift_token want = sift_chain_sample(cpu[r], x + r * 32000, 32000);
            if (ref.out[r].token != want) fail_msg("step %d row %d: %d vs %d", t, r, ref.out[r].token, want);
        }
    }
    for (int r = 0; r < 4; r++) {
        sift_chain_free(cpu[r]);
        sift__gpu_rowspec_free(&rs[r]);
    }
    sift__gpu_rowspec_free(&b0);
    sift__gpu_ref_free(&ref);
    free(x);
    free(L.x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_kat),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_plan_split),
        cmocka_unit_test(test_plan_errors),
        cmocka_unit_test(test_plan_row),
        cmocka_unit_test(test_plan_params),
        cmocka_unit_test(test_steps),
        cmocka_unit_test(test_handoff_unpack),
        cmocka_unit_test(test_ref_filters),
        cmocka_unit_test(test_ref_tail_vs_cpu),
        cmocka_unit_test(test_ref_hybrid),
        cmocka_unit_test(test_ref_reference_streams),
        cmocka_unit_test(test_ref_device_greedy),
        cmocka_unit_test(test_ref_dist),
        cmocka_unit_test(test_ref_batch),
    };
    if (getenv("SIFT_TEST_FILTER")) cmocka_set_test_filter(getenv("SIFT_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
