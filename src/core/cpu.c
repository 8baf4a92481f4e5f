/*
 * cpu.c - CPUID and XGETBV, once per process (see cpu.h for why one strict check).
 *
 * CPUID rather than __builtin_cpu_supports: GCC 12 cannot name F16C there, and it says
 * nothing about the OS's consent to save the wide registers, which only XGETBV tells.
 * XGETBV itself is only executed when CPUID reports OSXSAVE (without it the instruction
 * faults).
 */
#include "core/cpu.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static sift__cpu cpu;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
static void read_cpu(sift__cpu *c)
{
    unsigned a, b, cx, d;
    if (!__get_cpuid(1, &a, &b, &cx, &d)) return;
    c->fma = cx & (1u << 12);
    c->popcnt = cx & (1u << 23);
    c->avx = cx & (1u << 28);
    c->f16c = cx & (1u << 29);
    if (cx & (1u << 27)) { /* OSXSAVE: XGETBV may be executed */
        unsigned xlo, xhi;
        __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
        c->os_ymm = (xlo & 0x06) == 0x06; /* XMM, YMM */
        c->os_zmm = (xlo & 0xe6) == 0xe6; /* and opmask, ZMM_Hi256, Hi16_ZMM */
    }
    if (!__get_cpuid_count(7, 0, &a, &b, &cx, &d)) return; /* (checks the highest leaf first) */
    c->bmi1 = b & (1u << 3);
    c->avx2 = b & (1u << 5);
    c->bmi2 = b & (1u << 8);
    c->avx512f = b & (1u << 16);
    c->avx512dq = b & (1u << 17);
    c->avx512bw = b & (1u << 30);
    c->avx512vl = b & (1u << 31);
    c->avx512vnni = cx & (1u << 11);
}
#else
static void read_cpu(sift__cpu *c) { (void)c; }
#endif

/* The levels are the flag sets of sift_isa_flags(): AVX-512 includes all of AVX2's. */
static sift_isa best_level(const sift__cpu *c)
{
    const bool avx2 = c->avx && c->avx2 && c->fma && c->f16c && c->bmi1 && c->bmi2 && c->popcnt && c->os_ymm;
    const bool avx512 = avx2 && c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->os_zmm;
    return avx512 ? SIFT_ISA_AVX512 : avx2 ? SIFT_ISA_AVX2 : SIFT_ISA_SCALAR;
}

static void init_cpu(void)
{
    memset(&cpu, 0, sizeof cpu);
    read_cpu(&cpu);
    cpu.best = best_level(&cpu);
}

const sift__cpu *sift__cpu_get(void)
{
    pthread_once(&cpu_once, init_cpu);
    return &cpu;
}

bool sift__cpu_runs(sift_isa isa)
{
    /* the enum's order is the levels' order: SCALAR < AVX2 < AVX512 */
    return isa == SIFT_ISA_AUTO || (isa >= SIFT_ISA_SCALAR && isa <= sift__cpu_get()->best);
}

sift_isa sift__cpu_best_env(const char *var)
{
    const sift_isa best = sift__cpu_get()->best;
    const char *v = var ? getenv(var) : NULL;
    const sift_isa cap = !v ? SIFT_ISA_AVX512 : !strcmp(v, "scalar") ? SIFT_ISA_SCALAR : !strcmp(v, "avx2") ? SIFT_ISA_AVX2 : SIFT_ISA_AVX512;
    return best < cap ? best : cap;
}
