/*
 * bench_clock.h - the monotonic clock and the double comparison every bench here times and
 * sorts with, header-only so that standalone drivers (peer_depth, built against libllama and
 * not against sift) share them too.
 */
#ifndef SIFT_BENCH_CLOCK_H
#define SIFT_BENCH_CLOCK_H

#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* qsort comparator for doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
