/*
 * stlsort.h - libstdc++'s std::sort and std::partial_sort, step for step, in C.
 *
 * Why: llama.cpp orders candidates with std::sort / std::partial_sort, which are not
 * stable. When logits tie, the order they end up in (and, at a top-k boundary, which of
 * them survives) is whatever libstdc++'s introsort / heap-select happens to do - and the
 * token a dist sampler picks depends on that order. Real vocabularies have ties (a 152k
 * vocabulary of float32 logits has dozens), so reproducing llama.cpp's streams means
 * reproducing these algorithms exactly: the same pivots, the same comparisons, the same
 * moves. The code follows bits/stl_algo.h and bits/stl_heap.h (GCC 9-14, unchanged in that
 * range): introsort with median-of-three pivots, depth limit 2*floor(log2 n), insertion
 * sort below 16 elements; partial_sort = make_heap + sift-down selection + sort_heap.
 *
 * Elements are (key, index) pairs ordered by DESCENDING key (llama.cpp's comparator is
 * `a.logit > b.logit`); an ascending sort (typical's `a < b`) is the same algorithm on
 * negated keys, since -a > -b exactly when a < b. The index lets the caller gather its
 * struct-of-arrays afterwards, which gives the permutation std::sort would have made of
 * the array-of-structs.
 *
 * These are the exact paths. Faster selections that give the same result when there are
 * no ties (issue 3) can check for ties and fall back to them.
 */
#ifndef SIFT_CORE_STLSORT_H
#define SIFT_CORE_STLSORT_H

#include <stddef.h>
#include <stdint.h>

typedef struct sift__pair {
    float key;
    uint32_t idx;
} sift__pair;

/* The key for a float: NaN becomes -inf. With NaN in the array `a > b` is not a strict
 * weak order, and libstdc++'s unguarded loops may then run past the array (llama.cpp's
 * behaviour there is undefined, so there is nothing exact to reproduce); every other value
 * is its own key, so orders without NaN are untouched. */
static inline float sift__sort_key(float x) { return x != x ? -__builtin_inff() : x; }

/* std::sort(a, a + n, greater-by-key) */
void sift__stl_sort(sift__pair *a, size_t n);
/* std::partial_sort(a, a + middle, a + n, greater-by-key): a[0..middle) = the middle
 * largest, sorted; a[middle..n) in heap-selection leftover order. */
void sift__stl_partial_sort(sift__pair *a, size_t middle, size_t n);

/* The same as sift__stl_partial_sort(pairs of (key(keys[i]), i), k, n) for the first k
 * entries, without building the n pairs: the heap selection streams over keys and keeps
 * only the k-entry heap (heap[0..k) on return). The exact path of llama.cpp's top-k for
 * k <= 128. An entry only matters when it beats the heap's top, which only grows, so a
 * SIMD scan (fast_kernels.c's next_above) skips from one such entry to the next: about one compare
 * per entry plus k log(n/k) heap updates. */
void sift__stl_partial_sort_keys(const float *keys, size_t n, size_t k, sift__pair *heap);

#endif
