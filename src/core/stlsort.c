/*
 * stlsort.c - libstdc++'s introsort and heap-based partial sort on (key, index) pairs.
 * See stlsort.h for why this must be the exact algorithm. Names follow libstdc++'s so the
 * two can be read side by side; "comp(a, b)" is `a.key > b.key`.
 */
#include "core/stlsort.h"

#include "core/fast_kernels.h"

#define COMP(a, b) ((a).key > (b).key)
#define THRESHOLD 16

static inline void swap_pair(sift__pair *a, sift__pair *b)
{
    sift__pair t = *a;
    *a = *b;
    *b = t;
}

/* __push_heap */
static void push_heap(sift__pair *first, ptrdiff_t hole, ptrdiff_t top, sift__pair value)
{
    ptrdiff_t parent = (hole - 1) / 2;
    while (hole > top && COMP(first[parent], value)) {
        first[hole] = first[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    first[hole] = value;
}

/* __adjust_heap */
static void adjust_heap(sift__pair *first, ptrdiff_t hole, ptrdiff_t len, sift__pair value)
{
    const ptrdiff_t top = hole;
    ptrdiff_t child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (COMP(first[child], first[child - 1])) child--;
        first[hole] = first[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        first[hole] = first[child - 1];
        hole = child - 1;
    }
    push_heap(first, hole, top, value);
}

/* __make_heap */
static void make_heap(sift__pair *first, ptrdiff_t len)
{
    if (len < 2) return;
    ptrdiff_t parent = (len - 2) / 2;
    for (;;) {
        sift__pair v = first[parent];
        adjust_heap(first, parent, len, v);
        if (parent == 0) return;
        parent--;
    }
}

/* __pop_heap(first, last, result) */
static inline void pop_heap(sift__pair *first, ptrdiff_t len, sift__pair *result)
{
    sift__pair v = *result;
    *result = *first;
    adjust_heap(first, 0, len, v);
}

/* __heap_select + __sort_heap = __partial_sort */
static void partial_sort(sift__pair *first, sift__pair *middle, sift__pair *last)
{
    const ptrdiff_t len = middle - first;
    make_heap(first, len);
    for (sift__pair *i = middle; i < last; ++i)
        if (COMP(*i, *first)) pop_heap(first, len, i);
    for (sift__pair *l = middle; l - first > 1;) {
        --l;
        pop_heap(first, l - first, l);
    }
}

/* __move_median_to_first */
static void move_median_to_first(sift__pair *result, sift__pair *a, sift__pair *b, sift__pair *c)
{
    if (COMP(*a, *b)) {
        if (COMP(*b, *c)) swap_pair(result, b);
        else if (COMP(*a, *c)) swap_pair(result, c);
        else swap_pair(result, a);
    } else if (COMP(*a, *c)) {
        swap_pair(result, a);
    } else if (COMP(*b, *c)) {
        swap_pair(result, c);
    } else {
        swap_pair(result, b);
    }
}

/* __unguarded_partition */
static sift__pair *unguarded_partition(sift__pair *first, sift__pair *last, sift__pair *pivot)
{
    for (;;) {
        while (COMP(*first, *pivot)) ++first;
        --last;
        while (COMP(*pivot, *last)) --last;
        if (!(first < last)) return first;
        swap_pair(first, last);
        ++first;
    }
}

static void introsort_loop(sift__pair *first, sift__pair *last, int depth_limit)
{
    while (last - first > THRESHOLD) {
        if (depth_limit == 0) {
            partial_sort(first, last, last);
            return;
        }
        --depth_limit;
        sift__pair *mid = first + (last - first) / 2;
        move_median_to_first(first, first + 1, mid, last - 1);
        sift__pair *cut = unguarded_partition(first + 1, last, first);
        introsort_loop(cut, last, depth_limit);
        last = cut;
    }
}

/* __unguarded_linear_insert */
static inline void unguarded_linear_insert(sift__pair *last)
{
    sift__pair val = *last;
    sift__pair *next = last - 1;
    while (COMP(val, *next)) {
        *last = *next;
        last = next;
        --next;
    }
    *last = val;
}

/* __insertion_sort */
static void insertion_sort(sift__pair *first, sift__pair *last)
{
    if (first == last) return;
    for (sift__pair *i = first + 1; i != last; ++i) {
        if (COMP(*i, *first)) {
            sift__pair val = *i;
            for (sift__pair *j = i; j != first; --j) *j = *(j - 1); /* move_backward */
            *first = val;
        } else {
            unguarded_linear_insert(i);
        }
    }
}

void sift__stl_sort(sift__pair *a, size_t n)
{
    if (n < 2) return;
    int lg = 63 - __builtin_clzll((unsigned long long)n); /* std::__lg */
    introsort_loop(a, a + n, lg * 2);
    /* __final_insertion_sort */
    if (n > THRESHOLD) {
        insertion_sort(a, a + THRESHOLD);
        for (sift__pair *i = a + THRESHOLD; i != a + n; ++i) unguarded_linear_insert(i);
    } else {
        insertion_sort(a, a + n);
    }
}

void sift__stl_partial_sort(sift__pair *a, size_t middle, size_t n)
{
    if (middle > n) middle = n;
    if (middle == 0) return;
    partial_sort(a, a + middle, a + n);
}

void sift__stl_partial_sort_keys(const float *keys, size_t n, size_t k, sift__pair *heap)
{
    if (k > n) k = n;
    if (k == 0) return;
    for (size_t i = 0; i < k; i++) heap[i] = (sift__pair){sift__sort_key(keys[i]), (uint32_t)i};
    const ptrdiff_t len = (ptrdiff_t)k;
    make_heap(heap, len);
    /* __heap_select's loop: an entry beats the heap's top -> __pop_heap(first, middle, i),
     * which parks the old top at position i (never read again) and sifts the entry in.
     * A NaN key compares false here exactly as its -inf stand-in would. */
    const sift__fk *fk = sift__fk_best();
    for (size_t i = k; (i = fk->next_above(keys, i, n, heap[0].key)) < n; i++) /* SIMD: skip to the next hit */
        adjust_heap(heap, 0, len, (sift__pair){keys[i], (uint32_t)i});
    for (sift__pair *l = heap + k; l - heap > 1;) { /* __sort_heap */
        --l;
        pop_heap(heap, l - heap, l);
    }
}
