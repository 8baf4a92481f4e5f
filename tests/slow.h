/*
 * slow.h - SLOW(): whether this test runs under a sanitizer or valgrind, where CPU-time bounds
 * (a hostile input must end within 1 s) cannot hold; such runs check the outcome only.
 */
#ifndef SIFT_TESTS_SLOW_H
#define SIFT_TESTS_SLOW_H

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define SLOW() (SANITIZED || RUNNING_ON_VALGRIND)
#endif
#endif
#ifndef SLOW
#define SLOW() SANITIZED
#endif

#endif
