/*
 * cpu.h - what this CPU and its OS let sift run, read once per process: the one run-time
 * CPU check behind every SIMD choice (the sampler fast paths, core/fast_kernels.c; the
 * grammar mask pass, grammar/mask_apply.c; the model's kernel tables, model/kernels.c).
 *
 * Why one check, and why this strict: the build compiles every *_avx2.c file with
 * -mavx2 -mfma -mf16c -mpopcnt -mbmi -mbmi2 and every *_avx512.c file with those plus
 * -mavx512f/bw/vl/dq (sift_isa_flags() in cmake/layers.cmake), and the compiler may use
 * any of those instructions anywhere in such a file, not only where an intrinsic names
 * one. So a level counts as present only when every feature of its flag set is, and when
 * the OS saves the registers it widens (XGETBV: YMM state for AVX2; opmask and both ZMM
 * halves for AVX-512). The three places used to check three different subsets
 * (__builtin_cpu_supports("avx2") alone, for one), which could enter an F16C or BMI2
 * instruction on a CPU without it, or AVX on an OS that does not save YMM.
 *
 * CPUID and XGETBV run once (pthread_once; safe from any thread).
 *
 * aarch64: NEON (Advanced SIMD) is part of the architecture, so SIFT_ISA_NEON is always
 * there; SIFT_ISA_NEON_DOTPROD needs SDOT/UDOT (the *_neon_dotprod.c files are compiled with
 * -march=armv8.2-a+dotprod), and i8mm (SMMLA, *_neon_i8mm.c) is no level of its own but
 * replaces the prompt tiles of the dotprod table where the CPU has it, as VNNI does on
 * AVX-512. On Linux the features come from getauxval(AT_HWCAP / AT_HWCAP2), which the
 * kernel fills from the ID registers; on macOS from sysctlbyname("hw.optional.arm.FEAT_*")
 * (every Apple M-series core has dotprod; that path is not tested here). Elsewhere
 * (another OS, another architecture) every feature is false and the level is
 * SIFT_ISA_SCALAR, or SIFT_ISA_NEON on an aarch64 OS this file cannot ask.
 *
 * Overrides stay where they were: SIFT_FASTK=scalar|avx2|neon lowers the sampler fast paths
 * (sift__cpu_best_env), and a context's sift_context_params.isa (the CLI's --isa) picks
 * the model's kernels among the levels sift__cpu_runs() allows.
 */
#ifndef SIFT_CORE_CPU_H
#define SIFT_CORE_CPU_H

#include <stdbool.h>

#include "sift.h"

typedef struct sift__cpu {
    /* CPUID */
    bool avx, fma, f16c, popcnt, bmi1, bmi2, avx2;
    bool avx512f, avx512bw, avx512vl, avx512dq;
    bool avx512vnni; /* not part of a level: the AVX-512 table's Q8_0 / Q4_0 entries (model/kernels.c) */
    /* XGETBV (XCR0), read only when CPUID reports OSXSAVE */
    bool os_ymm; /* the OS saves XMM and YMM state */
    bool os_zmm; /* ... and opmask, ZMM_Hi256 and Hi16_ZMM state */
    /* aarch64 (HWCAPs): Advanced SIMD, SDOT/UDOT, SMMLA/UMMLA */
    bool neon, dotprod, i8mm;
    /* the highest level whose whole flag set the CPU and OS run: SIFT_ISA_AVX512,
     * SIFT_ISA_AVX2 or SIFT_ISA_SCALAR on x86-64; SIFT_ISA_NEON_DOTPROD or SIFT_ISA_NEON on
     * aarch64 */
    sift_isa best;
} sift__cpu;

/* This CPU, read on the first call. */
const sift__cpu *sift__cpu_get(void);

/* Can code compiled for isa run here? SCALAR always; AUTO (whatever is best) too. */
bool sift__cpu_runs(sift_isa isa);

/* The best level, lowered to the one named by the environment variable `var` when it is
 * set to "scalar", "avx2" or "neon" (another value, or none, lowers nothing). The variable is
 * read at each call; callers that choose once per process call this once. */
sift_isa sift__cpu_best_env(const char *var);

/* Is the switch variable `name` on: set, non-empty and not "0"? (SIFT_PACK_NOW, SIFT_NO_VNNI, ...;
 * read at each call.) */
bool sift__env_on(const char *name);

#endif
