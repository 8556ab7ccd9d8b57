/* dtype_convert.c — float <-> storage dtype conversions (see dtype_convert.h). */
#include "dtype_convert.h"

#include <math.h>
#include <string.h>

#include "last_error.h"

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Shifts m right by `shift` bits, rounding to nearest, ties to even. */
static uint32_t shift_rne(uint32_t m, unsigned shift) {
  if (shift == 0) return m;
  if (shift > 25) return 0; /* callers pass m < 2^24: below half of one unit */
  uint32_t r = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u))) r++;
  return r;
}

/*
 * Rounds |f| (finite, given as its f32 bits without the sign) to a binary
 * format with `mant` mantissa bits and exponent bias `bias`, and returns its
 * exponent|mantissa code — possibly past the format's largest finite code,
 * which the caller turns into inf or saturation.
 *
 * Normal results: drop 23 - mant mantissa bits with RNE; a carry moves into
 * the exponent field, which is exactly right (1.11..1 rounds up to 10.0).
 * Then rebias from 127 to `bias`.
 * Subnormal results: count units of the smallest subnormal, 2^(1-bias-mant).
 * A carry out of the subnormal range gives the smallest normal code, again
 * exactly right.
 */
static uint32_t round_magnitude(uint32_t a, unsigned mant, int bias) {
  int e = (int)(a >> 23); /* biased f32 exponent, 0 for f32 subnormals */
  if (e - 127 >= 1 - bias) {
    uint32_t r = shift_rne(a, 23 - mant);
    return r - ((uint32_t)(127 - bias) << mant);
  }
  /* value = m * 2^(e' - 150) with e' = max(e, 1); in units of
   * 2^(1 - bias - mant) that is m * 2^(e' - 151 + bias + mant). */
  uint32_t m = (a & 0x7fffffu) | (e ? 0x800000u : 0u);
  int ee = e ? e : 1;
  int shift = 151 - bias - (int)mant - ee; /* > 0 here */
  return shift_rne(m, (unsigned)shift);
}

/* clpa_f32_to_f16, inlined into clpa_dtype_encode's loop: round_magnitude's
 * rule without its branches, so that the loop runs at a few cycles an
 * element (the same code for every one of the 2^32 floats, checked
 * exhaustively when it was written). Results of 2^-14 and up: RNE on the 13
 * dropped bits (a + 0xfff + lsb: a carry is right), rebias 127 -> 15, and
 * past 65504 inf; below: units of 2^-24, m >> (126 - e) rounded the same
 * way (a shift past 31 leaves 0, as it should: such floats are under half
 * a unit). NaN: the canonical code (see the header). */
static inline uint16_t f32_to_f16(float f) {
  const uint32_t x = f32_bits(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  uint32_t n = ((a + 0x0fffu + ((a >> 13) & 1u)) >> 13) - (112u << 10);
  n = n > 0x7c00u ? 0x7c00u : n;
  const uint32_t e = a >> 23, m = (a & 0x7fffffu) | (e ? 0x800000u : 0u);
  uint32_t sh = e > 112u ? 14u : 126u - (e ? e : 1u); /* used only where e < 113 */
  sh = sh > 31u ? 31u : sh;
  const uint32_t s = (m + (1u << (sh - 1u)) - 1u + ((m >> sh) & 1u)) >> sh;
  uint32_t r = a < 0x38800000u ? s : n;
  r = a > 0x7f800000u ? 0x7fffu : r;
  return (uint16_t)(sign | r);
}

uint16_t clpa_f32_to_f16(float f) { return f32_to_f16(f); }

/* clpa_f16_to_f32, inlined into clpa_dtype_decode's loop */
static inline float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0x1f) {
    if (m == 0) return bits_f32(sign | 0x7f800000u);
    return bits_f32(sign | 0x7fc00000u | (m << 13));
  }
  if (e) return bits_f32(sign | ((e + 112u) << 23) | (m << 13)); /* rebias 15 -> 127 */
  const float v = (float)m * 0x1p-24f; /* subnormal: exact */
  return sign ? -v : v;
}

float clpa_f16_to_f32(uint16_t h) { return f16_to_f32(h); }

uint16_t clpa_f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u);
  /* RNE on the low 16 bits; a carry into the exponent (or to inf) is right. */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float clpa_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/* The two fp8 formats, described once. */
typedef struct fp8_format {
  unsigned mant;     /* mantissa bits */
  int bias;          /* exponent bias */
  uint32_t max_code; /* exponent|mantissa of the largest finite value */
  uint32_t inf_code; /* exponent|mantissa of inf, 0 when there is none */
} fp8_format;

static const fp8_format fp8_e4m3 = {3, 7, 0x7e, 0};
static const fp8_format fp8_e5m2 = {2, 15, 0x7b, 0x7c};

static const fp8_format *fp8_format_of(clpa_dtype dtype) {
  return dtype == CLPA_DTYPE_FP8_E4M3 ? &fp8_e4m3 : dtype == CLPA_DTYPE_FP8_E5M2 ? &fp8_e5m2 : NULL;
}

uint8_t clpa_f32_to_fp8(float f, clpa_dtype dtype) {
  const fp8_format *fmt = fp8_format_of(dtype);
  if (!fmt) return 0;
  uint32_t x = f32_bits(f);
  uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint8_t)(sign | 0x7fu);
  if (a == 0x7f800000u) return (uint8_t)(sign | (fmt->inf_code ? fmt->inf_code : fmt->max_code));
  uint32_t r = round_magnitude(a, fmt->mant, fmt->bias);
  if (r > fmt->max_code) r = fmt->max_code; /* saturate, see the header */
  return (uint8_t)(sign | r);
}

float clpa_fp8_to_f32(uint8_t code, clpa_dtype dtype) {
  const fp8_format *fmt = fp8_format_of(dtype);
  if (!fmt) return NAN;
  uint32_t sign = (uint32_t)(code & 0x80u) << 24;
  uint32_t em = code & 0x7fu;
  if (fmt->inf_code) {
    if (em == fmt->inf_code) return bits_f32(sign | 0x7f800000u);
    if (em > fmt->inf_code) return bits_f32(sign | 0x7fc00000u);
  } else if (em > fmt->max_code) {
    return bits_f32(sign | 0x7fc00000u);
  }
  uint32_t e = em >> fmt->mant;
  uint32_t m = em & ((1u << fmt->mant) - 1u);
  int min_exp = 1 - fmt->bias - (int)fmt->mant; /* exponent of the smallest subnormal */
  float v =
      e ? ldexpf((float)(m | (1u << fmt->mant)), (int)e - 1 + min_exp) : ldexpf((float)m, min_exp);
  return sign ? -v : v;
}

static clpa_status check_conversion(clpa_dtype dtype, const void *src, const void *dst, size_t n,
                                    float scale, const char *fn) {
  CLPA_CHECK(NULL, clpa_dtype_size(dtype) == 0, CLPA_ERR_INVALID_ARG,
             "%s: dtype = %d is not a clpa_dtype", fn, (int)dtype);
  CLPA_CHECK(NULL, n > 0 && (!src || !dst), CLPA_ERR_INVALID_ARG,
             "%s: src and dst must not be NULL", fn);
  CLPA_CHECK(NULL, fp8_format_of(dtype) && !(isfinite(scale) && scale > 0.0f),
             CLPA_ERR_INVALID_ARG, "%s: scale = %g (fp8 needs a finite scale > 0)", fn,
             (double)scale);
  return CLPA_OK;
}

clpa_status clpa_dtype_encode(clpa_dtype dtype, const float *src, void *dst, size_t n,
                              float scale) {
  clpa_status st = check_conversion(dtype, src, dst, n, scale, "clpa_dtype_encode");
  if (st != CLPA_OK) return st;
  switch (dtype) {
    case CLPA_DTYPE_F16: {
      uint16_t *d = dst;
      for (size_t i = 0; i < n; i++) d[i] = f32_to_f16(src[i]);
      break;
    }
    case CLPA_DTYPE_BF16: {
      uint16_t *d = dst;
      for (size_t i = 0; i < n; i++) d[i] = clpa_f32_to_bf16(src[i]);
      break;
    }
    case CLPA_DTYPE_FP8_E4M3:
    case CLPA_DTYPE_FP8_E5M2: {
      uint8_t *d = dst;
      for (size_t i = 0; i < n; i++) d[i] = clpa_f32_to_fp8(src[i] / scale, dtype);
      break;
    }
    default: /* f32: a copy */
      if (n) memcpy(dst, src, n * sizeof(float));
  }
  return CLPA_OK;
}

clpa_status clpa_dtype_decode(clpa_dtype dtype, const void *src, float *dst, size_t n,
                              float scale) {
  clpa_status st = check_conversion(dtype, src, dst, n, scale, "clpa_dtype_decode");
  if (st != CLPA_OK) return st;
  switch (dtype) {
    case CLPA_DTYPE_F16: {
      const uint16_t *s = src;
      for (size_t i = 0; i < n; i++) dst[i] = f16_to_f32(s[i]);
      break;
    }
    case CLPA_DTYPE_BF16: {
      const uint16_t *s = src;
      for (size_t i = 0; i < n; i++) dst[i] = clpa_bf16_to_f32(s[i]);
      break;
    }
    case CLPA_DTYPE_FP8_E4M3:
    case CLPA_DTYPE_FP8_E5M2: {
      const uint8_t *s = src;
      for (size_t i = 0; i < n; i++) dst[i] = clpa_fp8_to_f32(s[i], dtype) * scale;
      break;
    }
    default: /* f32: a copy */
      if (n) memcpy(dst, src, n * sizeof(float));
  }
  return CLPA_OK;
}
