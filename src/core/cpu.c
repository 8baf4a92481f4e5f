/*
 * cpu.c - CPUID and XGETBV, once per process (see cpu.h for why one strict check).
 *
 * CPUID rather than __builtin_cpu_supports: GCC 12 cannot name F16C there, and it says
 * nothing about the OS's consent to save the wide registers, which only XGETBV tells.
 * XGETBV itself is only executed when CPUID reports OSXSAVE (without it the instruction
 * faults).
 *
 * aarch64: getauxval's HWCAP bits on Linux (the kernel's reading of the ID registers, which
 * user space may not read itself on every kernel), sysctlbyname on macOS.
 */
#include "core/cpu.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
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
#elif defined(__aarch64__) && defined(__linux__)
static void read_cpu(sift__cpu *c)
{
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    c->neon = hw & HWCAP_ASIMD;
    c->dotprod = c->neon && (hw & HWCAP_ASIMDDP);
    c->i8mm = c->dotprod && (hw2 & HWCAP2_I8MM);
}
#elif defined(__aarch64__) && defined(__APPLE__)
static bool sysctl_flag(const char *name)
{
    int v = 0;
    size_t len = sizeof v;
    return sysctlbyname(name, &v, &len, NULL, 0) == 0 && v != 0;
}
static void read_cpu(sift__cpu *c)
{
    c->neon = true;
    c->dotprod = sysctl_flag("hw.optional.arm.FEAT_DotProd");
    c->i8mm = c->dotprod && sysctl_flag("hw.optional.arm.FEAT_I8MM");
}
#elif defined(__aarch64__)
static void read_cpu(sift__cpu *c) { c->neon = true; /* part of the architecture; nothing else can be asked */ }
#else
static void read_cpu(sift__cpu *c) { (void)c; }
#endif

/* The levels are the flag sets of sift_isa_flags(): AVX-512 includes all of AVX2's, NEON with
 * dotprod all of NEON's. */
static sift_isa best_level(const sift__cpu *c)
{
#if defined(__aarch64__)
    return c->dotprod ? SIFT_ISA_NEON_DOTPROD : c->neon ? SIFT_ISA_NEON : SIFT_ISA_SCALAR;
#else
    const bool avx2 = c->avx && c->avx2 && c->fma && c->f16c && c->bmi1 && c->bmi2 && c->popcnt && c->os_ymm;
    const bool avx512 = avx2 && c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->os_zmm;
    return avx512 ? SIFT_ISA_AVX512 : avx2 ? SIFT_ISA_AVX2 : SIFT_ISA_SCALAR;
#endif
}

/* The first level of this architecture's chain (the levels above SCALAR, in order). */
#if defined(__aarch64__)
#define FIRST_LEVEL SIFT_ISA_NEON
#define LAST_LEVEL SIFT_ISA_NEON_DOTPROD
#else
#define FIRST_LEVEL SIFT_ISA_AVX2
#define LAST_LEVEL SIFT_ISA_AVX512
#endif

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
    /* each architecture's levels are consecutive in the enum, in order: SCALAR < AVX2 <
     * AVX512, SCALAR < NEON < NEON_DOTPROD; another architecture's never run */
    if (isa == SIFT_ISA_AUTO || isa == SIFT_ISA_SCALAR) return true;
    return isa >= FIRST_LEVEL && isa <= LAST_LEVEL && isa <= sift__cpu_get()->best;
}

sift_isa sift__cpu_best_env(const char *var)
{
    const sift_isa best = sift__cpu_get()->best;
    const char *v = var ? getenv(var) : NULL;
    sift_isa cap = LAST_LEVEL;
    if (v && !strcmp(v, "scalar")) cap = SIFT_ISA_SCALAR;
#if defined(__aarch64__)
    else if (v && !strcmp(v, "neon")) cap = SIFT_ISA_NEON;
#else
    else if (v && !strcmp(v, "avx2")) cap = SIFT_ISA_AVX2;
#endif
    return best < cap ? best : cap;
}

bool sift__env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}
