/*
 * test_cpu.c - the one run-time CPU check (core/cpu.c) and its three users: a level is
 * reported only with its whole flag set and the OS's register state, the SIFT_FASTK-style
 * cap lowers and never raises, the answer is the same from every thread, and the sampler
 * fast paths, the grammar mask pass and the model's kernel tables all offer exactly the
 * levels it allows.
 */
#include <pthread.h>

#include "core/cpu.h"
#include "core/fast_kernels.h"
#include "grammar/mask_apply.h"
#include "model/kernels.h"
#include "sift_test.h"

#if defined(__aarch64__)
static void test_level_has_its_whole_flag_set(void **state)
{
    (void)state;
    const sift__cpu *c = sift__cpu_get();
    /* NEON is part of aarch64; dotprod is reported only with it, i8mm only with dotprod */
    assert_true(c->neon);
    assert_true(!c->dotprod || c->neon);
    assert_true(!c->i8mm || c->dotprod);
    assert_int_equal(c->best, c->dotprod ? SIFT_ISA_NEON_DOTPROD : SIFT_ISA_NEON);
    /* no x86 feature on this CPU */
    assert_false(c->avx || c->avx2 || c->avx512f || c->os_ymm);
    printf("  this CPU: %s (neon %d dotprod %d i8mm %d)\n", sift_isa_name(c->best), c->neon, c->dotprod, c->i8mm);
}
#else
static void test_level_has_its_whole_flag_set(void **state)
{
    (void)state;
    const sift__cpu *c = sift__cpu_get();
    assert_true(c->best == SIFT_ISA_SCALAR || c->best == SIFT_ISA_AVX2 || c->best == SIFT_ISA_AVX512);
    if (c->best >= SIFT_ISA_AVX2) {
        assert_true(c->avx && c->avx2 && c->fma && c->f16c && c->bmi2 && c->os_ymm);
#if defined(__x86_64__)
        /* GCC's own reading of CPUID agrees where it can name the feature */
        assert_true(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2"));
#endif
    }
    if (c->best == SIFT_ISA_AVX512) {
        assert_true(c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->os_zmm);
#if defined(__x86_64__)
        assert_true(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"));
#endif
    }
    /* and the other way: every feature of a level present means the level is reported */
    const bool avx2 = c->avx && c->avx2 && c->fma && c->f16c && c->bmi2 && c->os_ymm;
    const bool avx512 = avx2 && c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->os_zmm;
    assert_int_equal(c->best, avx512 ? SIFT_ISA_AVX512 : avx2 ? SIFT_ISA_AVX2 : SIFT_ISA_SCALAR);
    assert_true(!c->os_zmm || c->os_ymm);
    printf("  this CPU: %s (avx2 %d fma %d f16c %d bmi2 %d avx512 f/bw/vl/dq %d%d%d%d, os ymm %d zmm %d)\n",
           sift_isa_name(c->best), c->avx2, c->fma, c->f16c, c->bmi2, c->avx512f, c->avx512bw, c->avx512vl,
           c->avx512dq, c->os_ymm, c->os_zmm);
    assert_false(c->neon || c->dotprod || c->i8mm);
}
#endif

static void test_runs(void **state)
{
    (void)state;
    const sift_isa best = sift__cpu_get()->best;
    assert_true(sift__cpu_runs(SIFT_ISA_AUTO));
    assert_true(sift__cpu_runs(SIFT_ISA_SCALAR));
#if defined(__aarch64__)
    assert_false(sift__cpu_runs(SIFT_ISA_AVX2) || sift__cpu_runs(SIFT_ISA_AVX512)); /* another architecture's */
    assert_true(sift__cpu_runs(SIFT_ISA_NEON));
    assert_int_equal(sift__cpu_runs(SIFT_ISA_NEON_DOTPROD), best == SIFT_ISA_NEON_DOTPROD);
#else
    assert_int_equal(sift__cpu_runs(SIFT_ISA_AVX2), best >= SIFT_ISA_AVX2 && best <= SIFT_ISA_AVX512);
    assert_int_equal(sift__cpu_runs(SIFT_ISA_AVX512), best == SIFT_ISA_AVX512);
    assert_false(sift__cpu_runs(SIFT_ISA_NEON) || sift__cpu_runs(SIFT_ISA_NEON_DOTPROD));
#endif
    assert_false(sift__cpu_runs((sift_isa)7));
    assert_false(sift__cpu_runs((sift_isa)-1));
}

static void test_env_cap_lowers_only(void **state)
{
    (void)state;
    const char *var = "SIFT_TEST_CPU_CAP";
    const sift_isa best = sift__cpu_get()->best;
    unsetenv(var);
    assert_int_equal(sift__cpu_best_env(var), best);
    assert_int_equal(sift__cpu_best_env(NULL), best);
    setenv(var, "scalar", 1);
    assert_int_equal(sift__cpu_best_env(var), SIFT_ISA_SCALAR);
#if defined(__aarch64__)
    setenv(var, "neon", 1);
    assert_int_equal(sift__cpu_best_env(var), SIFT_ISA_NEON);
    setenv(var, "avx2", 1); /* another architecture's name lowers nothing */
    assert_int_equal(sift__cpu_best_env(var), best);
#else
    setenv(var, "avx2", 1);
    assert_int_equal(sift__cpu_best_env(var), best < SIFT_ISA_AVX2 ? best : SIFT_ISA_AVX2);
    setenv(var, "neon", 1); /* another architecture's name lowers nothing */
    assert_int_equal(sift__cpu_best_env(var), best);
#endif
    setenv(var, "avx512", 1); /* names no lower level: nothing lowered, and nothing raised */
    assert_int_equal(sift__cpu_best_env(var), best);
    setenv(var, "bogus", 1);
    assert_int_equal(sift__cpu_best_env(var), best);
    unsetenv(var);
}

static void *read_from_thread(void *arg)
{
    (void)arg;
    return (void *)sift__cpu_get();
}

static void test_same_from_every_thread(void **state)
{
    (void)state;
    enum { N = 8 };
    pthread_t t[N];
    for (int i = 0; i < N; i++) assert_int_equal(pthread_create(&t[i], NULL, read_from_thread, NULL), 0);
    const sift__cpu *c = sift__cpu_get();
    for (int i = 0; i < N; i++) {
        void *r;
        assert_int_equal(pthread_join(t[i], &r), 0);
        assert_ptr_equal(r, c);
    }
}

/* The three users offer exactly the levels the check allows. */
static void test_users_follow_the_check(void **state)
{
    (void)state;
    const sift_isa best = sift__cpu_get()->best;
    /* the model's kernel tables */
    assert_non_null(sift__kernels_get(SIFT_ISA_SCALAR));
    assert_int_equal(sift__kernels_get(SIFT_ISA_AVX2) != NULL, sift__cpu_runs(SIFT_ISA_AVX2));
    assert_int_equal(sift__kernels_get(SIFT_ISA_AVX512) != NULL, sift__cpu_runs(SIFT_ISA_AVX512));
    assert_int_equal(sift_isa_best(), best);
    assert_int_equal(sift__kernels_get(SIFT_ISA_AUTO)->isa, best);
    const sift__fk *v[4];
#if defined(__aarch64__)
    assert_non_null(sift__kernels_get(SIFT_ISA_NEON));
    assert_int_equal(sift__kernels_get(SIFT_ISA_NEON_DOTPROD) != NULL, sift__cpu_runs(SIFT_ISA_NEON_DOTPROD));
    assert_null(sift__kernels_get(SIFT_ISA_AVX2));
    /* the sampler fast paths: NEON (one variant for both NEON levels), then scalar */
    assert_int_equal(sift__fk_all(v, 4), 2);
    assert_string_equal(v[0]->name, "neon");
    /* the grammar mask pass */
    assert_true(sift__gx_mask_ops_best() == &sift__gx_mask_ops_neon);
    assert_true(sift__gx_mask_ops_neon.apply == sift__gx_mask_apply_neon);
#else
    assert_null(sift__kernels_get(SIFT_ISA_NEON));
    assert_null(sift__kernels_get(SIFT_ISA_NEON_DOTPROD));
    /* the sampler fast paths: one variant per level, best first */
    assert_int_equal(sift__fk_all(v, 4), best == SIFT_ISA_AVX512 ? 3 : best == SIFT_ISA_AVX2 ? 2 : 1);
    /* the grammar mask pass */
    const sift__gx_mask_ops *want = best == SIFT_ISA_AVX512 ? &sift__gx_mask_ops_avx512
                                    : best == SIFT_ISA_AVX2 ? &sift__gx_mask_ops_avx2
                                                            : &sift__gx_mask_ops_scalar;
    assert_true(sift__gx_mask_ops_best() == want);
    assert_true(want->apply == (best == SIFT_ISA_AVX512 ? sift__gx_mask_apply_avx512
                                : best == SIFT_ISA_AVX2 ? sift__gx_mask_apply_avx2
                                                        : sift__gx_mask_apply_scalar));
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_level_has_its_whole_flag_set),
        cmocka_unit_test(test_runs),
        cmocka_unit_test(test_env_cap_lowers_only),
        cmocka_unit_test(test_same_from_every_thread),
        cmocka_unit_test(test_users_follow_the_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
