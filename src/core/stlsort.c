/*
 * stlsort.c - libstdc++'s introsort and heap-based partial sort on (key, index) pairs.
 * See stlsort.h for why this must be the exact algorithm. Names follow libstdc++'s so the
 * two can be read side by side; "comp(a, b)" is `a.key > b.key`.
 */
#include "core/stlsort.h"

#include "core/fastk.h"

#define COMP(a, b) ((a).key > (b).key)
#define THRESHOLD 16

static inline void swap_pair(sift_pair *a, sift_pair *b)
{
    sift_pair t = *a;
    *a = *b;
    *b = t;
}

/* __push_heap */
static void push_heap(sift_pair *first, ptrdiff_t hole, ptrdiff_t top, sift_pair value)
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
static void adjust_heap(sift_pair *first, ptrdiff_t hole, ptrdiff_t len, sift_pair value)
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
static void make_heap(sift_pair *first, ptrdiff_t len)
{
    if (len < 2) return;
    ptrdiff_t parent = (len - 2) / 2;
    for (;;) {
        sift_pair v = first[parent];
        adjust_heap(first, parent, len, v);
        if (parent == 0) return;
        parent--;
    }
}

/* __pop_heap(first, last, result) */
static inline void pop_heap(sift_pair *first, ptrdiff_t len, sift_pair *result)
{
    sift_pair v = *result;
    *result = *first;
    adjust_heap(first, 0, len, v);
}

/* __heap_select + __sort_heap = __partial_sort */
static void partial_sort(sift_pair *first, sift_pair *middle, sift_pair *last)
{
    const ptrdiff_t len = middle - first;
    make_heap(first, len);
    for (sift_pair *i = middle; i < last; ++i)
        if (COMP(*i, *first)) pop_heap(first, len, i);
    for (sift_pair *l = middle; l - first > 1;) {
        --l;
        pop_heap(first, l - first, l);
    }
}

/* __move_median_to_first */
static void move_median_to_first(sift_pair *result, sift_pair *a, sift_pair *b, sift_pair *c)
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
static sift_pair *unguarded_partition(sift_pair *first, sift_pair *last, sift_pair *pivot)
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

static void introsort_loop(sift_pair *first, sift_pair *last, int depth_limit)
{
    while (last - first > THRESHOLD) {
        if (depth_limit == 0) {
            partial_sort(first, last, last);
            return;
        }
        --depth_limit;
        sift_pair *mid = first + (last - first) / 2;
        move_median_to_first(first, first + 1, mid, last - 1);
        sift_pair *cut = unguarded_partition(first + 1, last, first);
        introsort_loop(cut, last, depth_limit);
        last = cut;
    }
}

/* __unguarded_linear_insert */
static inline void unguarded_linear_insert(sift_pair *last)
{
    sift_pair val = *last;
    sift_pair *next = last - 1;
    while (COMP(val, *next)) {
        *last = *next;
        last = next;
        --next;
    }
    *last = val;
}

/* __insertion_sort */
static void insertion_sort(sift_pair *first, sift_pair *last)
{
    if (first == last) return;
    for (sift_pair *i = first + 1; i != last; ++i) {
        if (COMP(*i, *first)) {
            sift_pair val = *i;
            for (sift_pair *j = i; j != first; --j) *j = *(j - 1); /* move_backward */
            *first = val;
        } else {
            unguarded_linear_insert(i);
        }
    }
}

void sift_stl_sort(sift_pair *a, size_t n)
{
    if (n < 2) return;
    int lg = 63 - __builtin_clzll((unsigned long long)n); /* std::__lg */
    introsort_loop(a, a + n, lg * 2);
    /* __final_insertion_sort */
    if (n > THRESHOLD) {
        insertion_sort(a, a + THRESHOLD);
        for (sift_pair *i = a + THRESHOLD; i != a + n; ++i) unguarded_linear_insert(i);
    } else {
        insertion_sort(a, a + n);
    }
}

void sift_stl_partial_sort(sift_pair *a, size_t middle, size_t n)
{
    if (middle > n) middle = n;
    if (middle == 0) return;
    partial_sort(a, a + middle, a + n);
}

void sift_stl_partial_sort_keys(const float *keys, size_t n, size_t k, sift_pair *heap)
{
    if (k > n) k = n;
    if (k == 0) return;
    for (size_t i = 0; i < k; i++) heap[i] = (sift_pair){sift_sort_key(keys[i]), (uint32_t)i};
    const ptrdiff_t len = (ptrdiff_t)k;
    make_heap(heap, len);
    /* __heap_select's loop: an entry beats the heap's top -> __pop_heap(first, middle, i),
     * which parks the old top at position i (never read again) and sifts the entry in.
     * A NaN key compares false here exactly as its -inf stand-in would. */
    const sift__fk *fk = sift__fk_best();
    for (size_t i = k; (i = fk->next_above(keys, i, n, heap[0].key)) < n; i++) /* SIMD: skip to the next hit */
        adjust_heap(heap, 0, len, (sift_pair){keys[i], (uint32_t)i});
    for (sift_pair *l = heap + k; l - heap > 1;) { /* __sort_heap */
        --l;
        pop_heap(heap, l - heap, l);
    }
}
