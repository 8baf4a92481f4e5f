/*
 * cli_util.h - the small helpers every sift command and bench suite parses its flags and
 * reads its files with, so each value form is checked the same way everywhere: a value
 * parses only when the whole string does (no "12abc" read as 12), numbers are range-checked
 * by the caller's bounds, and files are read whole into one NUL-terminated buffer.
 */
#ifndef SIFT_CLI_UTIL_H
#define SIFT_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "sift.h"

/* A decimal integer in [lo, hi], the whole of s; false otherwise (*out untouched). */
bool cli_parse_long(const char *s, long lo, long hi, long *out);
/* A number (strtod syntax) that does not overflow, the whole of s. */
bool cli_parse_float(const char *s, float *out);
/* A comma-separated list of integers in [lo, hi] into out[0 .. max): the count, or -1 when an
 * item does not parse, is out of range, or there are more than max (an empty list is 0). */
int cli_parse_list(const char *s, long lo, long hi, int *out, int max);
/* --isa's value: auto, scalar, avx2 or avx512. */
bool cli_parse_isa(const char *s, sift_isa *out);
/* Threads a command uses unless told: the online CPUs, 1 .. 4 (sampling and the small shared
 * models gain nothing from more; -t overrides). */
int cli_default_threads(void);
/* The whole of stream f as a NUL-terminated malloc'd string (its length in *len), or NULL:
 * out of memory or a read error (ferror(f) tells which). */
char *cli_read_stream(FILE *f, size_t *len);
/* The whole file at path (as cli_read_stream), or NULL with errno set (ENOMEM, EIO, or
 * fopen's). len may be NULL. */
char *cli_read_file(const char *path, size_t *len);

/* Clocks for timings, in microseconds: monotonic wall time, and the calling thread's CPU time. */
double cli_now_us(void);
double cli_thread_cpu_us(void);

/* For long-running commands that compile grammars again and again (serve, bench): keep freed
 * heap memory in the process (glibc: blocks under 32 MiB from the heap, the heap trimmed only
 * past 128 MiB free). By default glibc maps each block over 128 KiB afresh and gives the top
 * of the heap back, so every compile of a large JSON schema faulted its tables' pages in
 * again: 13-15 % of a Kubernetes schema's time to first mask, kernel page-fault work (perf). */
void cli_malloc_keep(void);

#endif
