/*
 * dtype_convert.h — notes on the exact host conversions between float and
 * the storage dtypes of the KV cache, whose declarations are public in
 * clpa_base.h (clpa_dtype_encode, clpa_dtype_decode and the scalar
 * converters). Tests use them to fill caches and to read device results
 * back; the CPU references read caches decoded by them. Internal (host/),
 * not installed.
 *
 * Every conversion from float rounds to nearest, ties to even (RNE), with
 * subnormals kept (no flush to zero). Every conversion to float is exact.
 *
 *   dtype      bits          bias  max finite  inf  NaN codes         overflow
 *   f16        1 s, 5 e, 10 m  15     65504     yes  e=31, m!=0        -> inf (IEEE)
 *   bf16       1 s, 8 e,  7 m 127  ~3.39e38     yes  e=255, m!=0       -> inf (IEEE)
 *   fp8_e4m3   1 s, 4 e,  3 m   7       448     no   0x7f, 0xff only   -> saturates to +-448
 *   fp8_e5m2   1 s, 5 e,  2 m  15     57344     yes  e=31, m!=0        -> saturates to +-57344
 *
 * Choices worth knowing:
 *
 * - f16 matches OpenCL's vstore_half_rte / vload_half bit for bit on every
 *   non-NaN value (checked once against PoCL on all ties, their f32
 *   neighbours and 16M random floats; all 2^16 codes for vload_half). A NaN
 *   encodes as sign | 0x7fff, PoCL's and NVIDIA's canonical half NaN (x86
 *   F16C would keep the payload instead), and decodes to the f32 NaN with
 *   the same sign and payload, quiet bit forced (as PoCL's vload_half).
 *   Other devices may differ on NaN bits: compare NaNs by class.
 *
 * - bf16 encodes a NaN as its top 16 bits with the quiet bit (0x0040) forced,
 *   so a payload only in the low bits cannot turn into infinity. Decoding is
 *   the plain shift by 16 every kernel does, so it keeps signalling NaNs.
 *
 * - fp8 e4m3 is OCP's "e4m3fn" (the one vLLM, PyTorch float8_e4m3fn and
 *   NVIDIA __nv_fp8_e4m3 use): exponent 15 is an ordinary binade except that
 *   0x7f/0xff are NaN. It has no infinity, so anything beyond 448 (including
 *   +-inf) saturates to +-448 — the behaviour of NVIDIA's __NV_SATFINITE and
 *   of vLLM's quantizers, which clamp to +-448 before converting. PyTorch's
 *   plain .to(float8_e4m3fn) gives NaN instead; we do not follow it.
 *
 * - fp8 e5m2 has infinities: +-inf stays +-inf, but a finite value beyond
 *   57344 saturates to +-57344 instead of becoming inf (same reasoning: a
 *   scaled KV value that overflows should clamp, not poison attention).
 *
 * - fp8 NaNs encode as sign | 0x7f (e4m3: the only NaN codes; e5m2: one of
 *   six, so 0x7d/0x7e/0xfd/0xfe canonicalise to 0x7f/0xff on a round trip).
 *   They decode to the quiet f32 NaN 0x7fc00000 with the sign kept.
 *
 * Round trips (decode then encode) give back the same bits for every code
 * except: f16 NaNs come back as 0x7fff/0xffff; bf16 signalling NaNs come
 * back quiet; e5m2 NaNs come back as 0x7f/0xff. tests/test_host_dtype_convert.c
 * checks all 2^16 and 2^8 codes.
 *
 * Multi-byte storage words are in host byte order; host and device must
 * share it (every OpenCL device clpa targets is little-endian).
 */
#ifndef CLPA_HOST_DTYPE_CONVERT_H
#define CLPA_HOST_DTYPE_CONVERT_H

#include "clpa_base.h"

#endif
