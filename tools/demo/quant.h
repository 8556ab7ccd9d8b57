/*
 * quant.h — ggml's quantized block formats on the host, for clpa-demo:
 * Q4_0, Q8_0, Q4_K, Q5_K and Q6_K, as ggml-common.h lays them out and
 * ggml-quants.c's dequantize_row_* decode them. Host C11, libc only.
 *
 * A row of n elements is n / BLOCK blocks stored back to back, BLOCK being
 * 32 (Q4_0, Q8_0) or 256 (the K-quants, "super-blocks"). Everything is
 * little-endian; "f16" is an IEEE half. Byte offsets within one block:
 *
 *   Q8_0  (32 elements, 34 bytes)     y[i] = qs[i] * d
 *     0   f16 d
 *     2   i8  qs[32]
 *
 *   Q4_0  (32 elements, 18 bytes)     y[i] = (q[i] - 8) * d
 *     0   f16 d
 *     2   u8  qs[16]       q[i] = qs[i] & 15, q[i + 16] = qs[i] >> 4  (i < 16)
 *
 *   Q4_K  (256 elements, 144 bytes)   8 sub-blocks s of 32; e = 32 s + l
 *     0   f16 d            y[e] = (d * sc[s]) * q[e] - dmin * m[s]
 *     2   f16 dmin         q[e] = nibble of qs[32 (s / 2) + l]: low for even s,
 *     4   u8  scales[12]          high for odd s
 *     16  u8  qs[128]      sc[s], m[s]: 6 bits each, packed as below
 *
 *   Q5_K  (256 elements, 176 bytes)   as Q4_K, plus a fifth bit:
 *     0   f16 d            y[e] = (d * sc[s]) * q[e] - dmin * m[s]
 *     2   f16 dmin         q[e] = (nibble as in Q4_K) + 16 * bit s of qh[l]
 *     4   u8  scales[12]
 *     16  u8  qh[32]
 *     48  u8  qs[128]
 *
 *   Q6_K  (256 elements, 210 bytes)   16 sub-blocks of 16, scale sc[e / 16]
 *     0   u8  ql[128]      y[e] = (d * sc[e / 16]) * (q[e] - 32), q in [0, 63]
 *     128 u8  qh[64]       two halves h of 128: e = 128 h + 32 k + l (k < 4)
 *     192 i8  scales[16]   low 4 bits of q[e]: ql[64 h + 32 (k & 1) + l],
 *     208 f16 d                              low nibble for k < 2, high for k >= 2
 *                          high 2 bits: bits 2k, 2k + 1 of qh[32 h + l]
 *
 *   The 12 scale bytes of Q4_K and Q5_K (ggml's get_scale_min_k4), sc and
 *   m in [0, 63], s < 4:
 *     byte s      = sc[s]     | (sc[s + 4] >> 4) << 6
 *     byte s + 4  = m[s]      | (m[s + 4]  >> 4) << 6
 *     byte s + 8  = (sc[s + 4] & 15) | (m[s + 4] & 15) << 4
 *
 * Decoding is bit-identical to ggml's dequantize_row_*: the same float
 * operations in the same order, as the formulas above write them (f16 to
 * float exact, integers converted to float; every product is exact, so a
 * fused multiply-add changes nothing).
 *
 * Encoding (demo_quant_quantize) is this file's own reference quantizer,
 * simple rather than ggml's: any valid blocks decode through every ggml
 * implementation, and these are chosen for a provable error bound (below).
 */
#ifndef CLPA_DEMO_QUANT_H
#define CLPA_DEMO_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "clpa_base.h"
#include "error.h"

/* ggml's type numbers (ggml.h, enum ggml_type) of the formats above. */
enum {
  DEMO_GGML_Q4_0 = 2,
  DEMO_GGML_Q8_0 = 8,
  DEMO_GGML_Q4_K = 12,
  DEMO_GGML_Q5_K = 13,
  DEMO_GGML_Q6_K = 14,
};

/* For messages: the supported types as ggml names them. */
#define DEMO_QUANT_TYPE_NAMES "q4_0, q8_0, q4_K, q5_K and q6_K"

/* Returns true for the five types above. */
bool demo_quant_supported(uint32_t type);
/* Returns the elements per block (32 or 256), or 0 for another type. */
uint32_t demo_quant_block_elems(uint32_t type);
/* Returns the bytes per block (34, 18, 144, 176, 210), or 0 for another type. */
uint32_t demo_quant_block_bytes(uint32_t type);
/* The calls below that fail say why in demo_last_error() (error.h). */

/* ======================================================================
 * Decoding
 * ==================================================================== */

/* Decodes n elements (a multiple of the block) from src, n / block blocks
 * at any alignment, into dst[n]: exactly ggml's dequantize_row_<type>.
 * Every f16 value decodes, inf and NaN included (they propagate as they
 * do in ggml). Returns CLPA_OK, CLPA_ERR_UNSUPPORTED (another type) or
 * CLPA_ERR_INVALID_ARG (n not a multiple of the block, NULL). */
clpa_status demo_quant_dequantize(uint32_t type, const void *src, float *dst, uint64_t n);

/* ======================================================================
 * Encoding (a reference quantizer)
 *
 * Per block (Q8_0, Q4_0) or super-block (K-quants), with A = max |x| over
 * it, every element x and its decoded y satisfy |x - y| <= bound:
 *
 *   Q8_0  A / 254 * (1 + 2^-9) + 2^-24
 *         d = the smallest f16 >= A / 127; q = round(x / d)
 *   Q4_0  A / 8 * (1 + 2^-9) + 2^-24
 *         ggml's choice: d = -v / 8 (rounded away from 0 to f16), v the
 *         element of largest magnitude, so v decodes to q = 0; elements of
 *         the other sign past 7.5 |d| clamp to q = 15 (error up to |d|),
 *         all others are within |d| / 2
 *   Q4_K  (hi - lo) / 30 + A / 600 + 2^-24
 *   Q5_K  (hi - lo) / 62 + A / 1200 + 2^-24
 *         hi = max, lo = min(0, min) of x's sub-block of 32. dmin = the
 *         smallest f16 >= (the most negative lo) / -63; d = the smallest
 *         f16 with 63 L d (L = 15, 31) covering the widest sub-block,
 *         which takes its least covering (m, sc); every other sub-block
 *         the (m, sc) with the least largest error among those whose grid
 *         [-dmin m, L d sc - dmin m] covers it (quant.c, enc_k_min)
 *   Q6_K  A16 / 62 + A / 7000 + 2^-24
 *         A16 = max |x| over x's sub-block of 16; d = the smallest f16 >=
 *         A / (31 * 127); per sub-block the sc in [A16 / (31 d), 127] with
 *         the least largest error
 *
 * (2^-24, f16's subnormal spacing, covers blocks so small that their
 * scales are subnormal.)
 *
 * Decoded values re-encode to themselves: with y = dequantize(quantize(x)),
 * dequantize(quantize(y)) == y, bit for bit, for every block whose scales
 * (d, and dmin for Q4_K / Q5_K) came out 0 or normal f16 numbers (>= 2^-14;
 * for Q8_0 that is A >= 127 * 2^-14 ~ 0.0078) and, for Q4_K / Q5_K, whose
 * sub-block holding the most negative value spans at least half of that
 * value's magnitude (it does when it also holds a value >= 0). Subnormal
 * scales round up by a large fraction of themselves, and the decoded block
 * may then pick a smaller one.
 *
 * Elements must be finite, and each block's f16 scales must not pass
 * 65504: A <= 65504 * 127 (Q8_0), * 8 (Q4_0), * 3937 (Q6_K); for Q4_K /
 * Q5_K, 63 * 65504 below zero and about 945 / 1953 * 65504 of span.
 * |x| <= DEMO_QUANT_MAX_ABS always encodes, and so do the values decoded
 * from blocks this encoder wrote. Returns CLPA_OK, CLPA_ERR_UNSUPPORTED
 * (another type) or CLPA_ERR_INVALID_ARG (n not a multiple of the block,
 * NULL, an element not finite or a block too large, named), with dst
 * untouched on an error. Writes every byte of its n / block blocks;
 * deterministic.
 * ==================================================================== */
#define DEMO_QUANT_MAX_ABS 524032.0f /* 65504 * 8: within every type's range */
clpa_status demo_quant_quantize(uint32_t type, const float *src, void *dst, uint64_t n);

#endif /* CLPA_DEMO_QUANT_H */
