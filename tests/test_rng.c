/*
 * test_rng.c - the RNG reproduces libstdc++: std::mt19937, uniform_real_distribution
 * <double> and <float>, discrete_distribution (expected values printed by a C++ program
 * compiled with g++ 12 / libstdc++, see the comments).
 */
#include "core/rng.h"
#include "sift_test.h"

static void test_mt19937_standard_values(void **state)
{
    (void)state;
    sift__rng r;
    sift__rng_seed(&r, 5489); /* std::mt19937's default seed */
    assert_int_equal(sift__rng_next(&r), 3499211612u);
    assert_int_equal(sift__rng_next(&r), 581869302u);
    assert_int_equal(sift__rng_next(&r), 3890346734u);
    sift__rng_seed(&r, 5489);
    uint32_t v = 0;
    for (int i = 0; i < 10000; i++) v = sift__rng_next(&r);
    assert_int_equal(v, 4123659995u); /* [rand.predef]: the 10000th output */
    sift__rng_seed(&r, 42);
    assert_int_equal(sift__rng_next(&r), 1608637542u);
}

static void test_uniform_double_two_draws(void **state)
{
    (void)state;
    sift__rng r;
    sift__rng_seed(&r, 42);
    /* std::uniform_real_distribution<double>(0, 1) on std::mt19937(42) */
    assert_true(sift__rng_uniform_double(&r) == 0x1.97d47b66bfc3cp-1);
    assert_true(sift__rng_uniform_double(&r) == 0x1.77aca8779b102p-3);
    assert_true(sift__rng_uniform_double(&r) == 0x1.8f33a88f76c7fp-1);
    /* two 32-bit outputs per draw: the 7th raw output after 3 draws */
    sift__rng a, b;
    sift__rng_seed(&a, 1);
    sift__rng_seed(&b, 1);
    for (int i = 0; i < 3; i++) sift__rng_uniform_double(&a);
    for (int i = 0; i < 6; i++) sift__rng_next(&b);
    assert_int_equal(sift__rng_next(&a), sift__rng_next(&b));
}

static void test_uniform_float_one_draw(void **state)
{
    (void)state;
    sift__rng r;
    sift__rng_seed(&r, 7);
    assert_true(sift__rng_uniform_float(&r) == 0x1.388f0ap-4f);
    assert_true(sift__rng_uniform_float(&r) == 0x1.d19726p-3f);
    assert_true(sift__rng_uniform_float(&r) == 0x1.8f5184p-1f);
}

static void test_discrete_distribution(void **state)
{
    (void)state;
    sift__rng r;
    sift__rng_seed(&r, 1234);
    const float w[] = {0.1f, 0.0f, 2.5f, 1.0f, 0.4f};
    double cp[5];
    /* std::discrete_distribution<int>(w, w + 5) on std::mt19937(1234) */
    const size_t expect[] = {2, 3, 2, 3, 3, 2, 2, 3, 2, 2, 0, 2};
    for (size_t i = 0; i < 12; i++) assert_int_equal(sift__rng_discrete(&r, w, 5, cp), expect[i]);
    /* a zero weight is never drawn */
    sift__rng_seed(&r, 5);
    for (int i = 0; i < 2000; i++) assert_int_not_equal(sift__rng_discrete(&r, w, 5, cp), 1);
}

static void test_discrete_single_weight_draws_nothing(void **state)
{
    (void)state;
    sift__rng r;
    sift__rng_seed(&r, 99);
    const float one[] = {3.0f};
    double cp[1];
    assert_int_equal(sift__rng_discrete(&r, one, 1, cp), 0);
    assert_int_equal(sift__rng_next(&r), 2887414401u); /* the first raw output of mt19937(99) */
}

static void test_seed_resolve(void **state)
{
    (void)state;
    assert_int_equal(sift__seed_resolve(0), 0);
    assert_int_equal(sift__seed_resolve(1234), 1234);
    /* SIFT_DEFAULT_SEED draws a seed; two draws in a row differ (with 2^-32 odds of a clash) */
    uint32_t a = sift__seed_resolve(SIFT_DEFAULT_SEED), b = sift__seed_resolve(SIFT_DEFAULT_SEED);
    assert_true(a != b || sift__seed_resolve(SIFT_DEFAULT_SEED) != a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mt19937_standard_values),
        cmocka_unit_test(test_uniform_double_two_draws),
        cmocka_unit_test(test_uniform_float_one_draw),
        cmocka_unit_test(test_discrete_distribution),
        cmocka_unit_test(test_discrete_single_weight_draws_nothing),
        cmocka_unit_test(test_seed_resolve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
