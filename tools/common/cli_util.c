/*
 * cli_util.c - flag values and whole-file reads for the sift commands (see cli_util.h).
 */
#include "cli_util.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

bool cli_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (end == s || *end || errno == ERANGE || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool cli_parse_float(const char *s, float *out)
{
    char *end;
    errno = 0;
    const double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE) return false;
    *out = (float)v;
    return true;
}

int cli_parse_list(const char *s, long lo, long hi, int *out, int max)
{
    int n = 0;
    while (*s) {
        char *end;
        errno = 0;
        const long x = strtol(s, &end, 10);
        if (end == s || errno == ERANGE || x < lo || x > hi || n == max || (*end && *end != ',')) return -1;
        out[n++] = (int)x;
        s = *end ? end + 1 : end;
    }
    return n;
}

bool cli_parse_isa(const char *s, sift_isa *out)
{
    static const struct {
        const char *name;
        sift_isa isa;
    } names[] = {{"auto", SIFT_ISA_AUTO}, {"scalar", SIFT_ISA_SCALAR}, {"avx2", SIFT_ISA_AVX2}, {"avx512", SIFT_ISA_AVX512},
                 {"neon", SIFT_ISA_NEON}, {"neon-dotprod", SIFT_ISA_NEON_DOTPROD}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(s, names[i].name)) {
            *out = names[i].isa;
            return true;
        }
    return false;
}

int cli_default_threads(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 4 ? 4 : (int)n;
}

char *cli_read_stream(FILE *f, size_t *len)
{
    size_t cap = 1 << 14, n = 0, got;
    char *b = malloc(cap + 1);
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(b, (cap *= 2) + 1);
            if (!nb) free(b);
            b = nb;
        }
    }
    if (b && ferror(f)) {
        free(b);
        return NULL;
    }
    if (b) b[n] = 0;
    *len = n;
    return b;
}

char *cli_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t n = 0;
    char *b = cli_read_stream(f, &n);
    const int err = !b ? (ferror(f) ? EIO : ENOMEM) : 0;
    fclose(f);
    if (!b) errno = err;
    else if (len) *len = n;
    return b;
}

double cli_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

double cli_thread_cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

void cli_malloc_keep(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 128 << 20);
#endif
}
