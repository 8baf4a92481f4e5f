/*
 * perf.h - the monotonic clock used by perf counters (CLOCK_MONOTONIC through the vDSO,
 * about 20 ns a read).
 */
#ifndef SIFT_CORE_PERF_H
#define SIFT_CORE_PERF_H

#include <stdint.h>
#include <time.h>

static inline int64_t sift__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
