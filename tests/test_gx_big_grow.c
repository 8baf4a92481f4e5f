/*
 * test_gx_big_grow.c - growable arrays of the grammar layer past 256 KiB (alloc_bits_utf8.c): on
 * Linux they move into their own mappings grown by mremap (no copy: the MaskBench tails of
 * issue 12); contents must survive every step (heap -> mapping, mapping grown, mapping shrunk
 * back to the heap), and no mapping may outlive its free.
 */
#include "sift_test.h"

#include "grammar/alloc_bits_utf8.h"

static void check_iota(const uint32_t *v, uint32_t n, uint32_t salt)
{
    for (uint32_t k = 0; k < n; k++)
        if (v[k] != k * 2654435761u + salt) fail_msg("element %u lost: %u", k, v[k]);
}

/* GX_GROW one element at a time up to 4M uint32 (16 MiB): 1 live mapping once past 256 KiB */
static void test_grow_keeps_contents(void **state)
{
    (void)state;
    uint32_t live0 = sift__gx_big_live();
    uint32_t *v = NULL, cap = 0;
    for (uint32_t k = 0; k < (4u << 20); k++) {
        assert_true(GX_GROW(v, cap, k + 1));
        v[k] = k * 2654435761u + 7;
    }
    check_iota(v, 4u << 20, 7);
    assert_int_equal(cap, 4u << 20); /* doubling from 16 */
#if defined(__linux__)
    assert_int_equal(sift__gx_big_live(), live0 + 1);
    assert_int_equal((uintptr_t)v & 4095u, 0); /* a mapping */
#endif
    /* shrink below 128 KiB: back to the heap, the first 1000 elements kept */
    v = sift__gx_grow_realloc(v, 1000 * sizeof *v);
    assert_non_null(v);
    check_iota(v, 1000, 7);
    assert_int_equal(sift__gx_big_live(), live0);
    sift__gx_free(v);
    assert_int_equal(sift__gx_big_live(), live0);
}

/* several arrays grown in turns (their mappings collide and move), freed in another order */
static void test_interleaved(void **state)
{
    (void)state;
    uint32_t live0 = sift__gx_big_live();
    enum { N = 5 };
    uint32_t *v[N] = {0}, cap[N] = {0};
    for (uint32_t k = 0; k < (1u << 20); k++)
        for (uint32_t a = 0; a < N; a++) {
            assert_true(GX_GROW(v[a], cap[a], k + 1));
            v[a][k] = k * 2654435761u + a;
        }
    for (uint32_t a = 0; a < N; a++) check_iota(v[a], 1u << 20, a);
#if defined(__linux__)
    assert_int_equal(sift__gx_big_live(), live0 + N);
#endif
    /* a mapping that shrinks but stays big is still one (mremap down), contents kept */
    v[2] = sift__gx_grow_realloc(v[2], (size_t)(200u << 10) * sizeof *v[2]);
    assert_non_null(v[2]);
    check_iota(v[2], 200u << 10, 2);
    sift__gx_free(v[3]);
    sift__gx_free(v[0]);
    check_iota(v[4], 1u << 20, 4); /* the table compacted: the others still found */
    v[4] = sift__gx_grow_realloc(v[4], (size_t)(2u << 20) * sizeof *v[4]);
    assert_non_null(v[4]);
    check_iota(v[4], 1u << 20, 4);
    sift__gx_free(v[1]);
    sift__gx_free(v[2]);
    sift__gx_free(v[4]);
    assert_int_equal(sift__gx_big_live(), live0);
}

/* a block that malloc/calloc made big first, then grown: copied into a mapping; free(NULL) ok;
 * sift__gx_realloc takes a mapping back to the heap (its blocks may be free()d by callers) */
static void test_from_calloc(void **state)
{
    (void)state;
    uint32_t live0 = sift__gx_big_live();
    uint32_t n = 300u << 10;
    uint32_t *v = sift__gx_calloc(n, sizeof *v);
    assert_non_null(v);
    for (uint32_t k = 0; k < n; k++) v[k] = k * 2654435761u + 3;
    v = sift__gx_grow_realloc(v, (size_t)n * 2 * sizeof *v);
    assert_non_null(v);
    check_iota(v, n, 3);
#if defined(__linux__)
    assert_int_equal(sift__gx_big_live(), live0 + 1);
#endif
    v = sift__gx_realloc(v, (size_t)n * 3 * sizeof *v);
    assert_non_null(v);
    check_iota(v, n, 3);
    assert_int_equal(sift__gx_big_live(), live0);
    free(v); /* a malloc'd block now */
    sift__gx_free(NULL);
    assert_int_equal(sift__gx_big_live(), live0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grow_keeps_contents),
        cmocka_unit_test(test_interleaved),
        cmocka_unit_test(test_from_calloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
