/*
 * kernels_avx512vnni.c - the Q8_0 and Q4_0 kernels with AVX-512 VNNI (vpdpbusd), compiled
 * with the AVX-512 flags and -mavx512vnni, entered only when core/cpu.c has found the
 * extension; they replace the AVX-512 table's Q8_0 and Q4_0 entries (kernels.c).
 *
 * Why: a 4 x 4 tile of Q8_0 pairs spent most of its instructions forming the byte products
 * (vpabsb, vpmovb2m, a masked vpsubb, vpmaddubsw, vpmaddwd: five per pair and register of
 * 64 values). vpdpbusd forms and sums four unsigned-by-signed byte products per int32 lane
 * in one instruction, exactly (no 16-bit saturation). Activations and weights are both
 * signed, so the activations are made unsigned by an offset of 128 (x ^ 0x80 = x + 128),
 * once per column and step, and each weight register carries the offset's correction
 * -128 * (its four-byte sums), once per row and step:
 *     sum_i (x_i + 128) w_i  - 128 sum_i w_i  =  sum_i x_i w_i
 * The correction is the accumulator vpdpbusd starts from, so a pair costs one instruction.
 * The integer sums are the same numbers as the plain kernels', and everything after them is
 * kernels_avx512_q0.h's shared text: results are bit for bit the scalar code's
 * (tests/test_kernels.c checks both tables).
 */
#include <immintrin.h>
#include <string.h>

#include "model/kernels_simd.h"

#if !defined(__AVX512VNNI__)
#error "kernels_avx512vnni.c needs -mavx512vnni (sift_isa_flags() in cmake/layers.cmake)"
#endif

FORCE_INLINE __m512i x_prep(__m512i x)
{
    return _mm512_xor_si512(x, _mm512_set1_epi8((char)0x80));
}

/* -128 * the sums of w's four-byte groups (|sum| <= 4 * 128 * 128: no overflow) */
FORCE_INLINE __m512i w_aux(__m512i w)
{
    return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), w));
}

FORCE_INLINE __m512i pair_products(__m512i w, __m512i aux, __m512i xp)
{
    return _mm512_dpbusd_epi32(aux, xp, w);
}

#include "model/kernels_avx512_q0.h"

void sift__kernels_init_avx512vnni(sift__kernels *k)
{
    k->dot[SIFT_TYPE_Q8_0] = dot_q8_0;
    k->dot[SIFT_TYPE_Q4_0] = dot_q4_0;
    k->rows[SIFT_TYPE_Q8_0] = rows_dot_q8_0;
    k->rows[SIFT_TYPE_Q4_0] = rows_dot_q4_0;
    k->gemm[SIFT_TYPE_Q8_0] = gemm_q8_0;
    k->gemm[SIFT_TYPE_Q4_0] = gemm_q4_0;
}
