/*
 * Storage dtype conversions (host/dtype_convert.c), checked against
 * independent models:
 *   - every code of every format: decode equals the value computed from its
 *     bit fields in double, and re-encodes to itself (NaN rules aside);
 *   - every tie between two neighbouring codes rounds to the even one, and
 *     one f32 ulp either side rounds to the nearer one;
 *   - hand-picked values with known answers;
 *   - millions of random floats round to the nearest value found by search:
 *     a linear scan over all codes for fp8, a binary search in the decoded
 *     table for f16/bf16 (and, where the compiler has _Float16, its cast).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtype_convert.h"
#include "tap.h"

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

/* One format under test, with its field widths for the independent model. */
typedef struct fmt {
  const char *name;
  clpa_dtype dtype;
  int bits, ebits, mbits, bias;
  int has_inf;  /* IEEE-like top exponent (inf + NaN); else e4m3fn */
  int saturate; /* finite overflow saturates (fp8) instead of going to inf */
} fmt;

static const fmt fmts[] = {
    {"f16", CLPA_DTYPE_F16, 16, 5, 10, 15, 1, 0},
    {"bf16", CLPA_DTYPE_BF16, 16, 8, 7, 127, 1, 0},
    {"fp8_e4m3", CLPA_DTYPE_FP8_E4M3, 8, 4, 3, 7, 0, 1},
    {"fp8_e5m2", CLPA_DTYPE_FP8_E5M2, 8, 5, 2, 15, 1, 1},
};

static float dec(const fmt *f, uint32_t c) {
  switch (f->dtype) {
    case CLPA_DTYPE_F16:
      return clpa_f16_to_f32((uint16_t)c);
    case CLPA_DTYPE_BF16:
      return clpa_bf16_to_f32((uint16_t)c);
    default:
      return clpa_fp8_to_f32((uint8_t)c, f->dtype);
  }
}
static uint32_t enc(const fmt *f, float x) {
  switch (f->dtype) {
    case CLPA_DTYPE_F16:
      return clpa_f32_to_f16(x);
    case CLPA_DTYPE_BF16:
      return clpa_f32_to_bf16(x);
    default:
      return clpa_f32_to_fp8(x, f->dtype);
  }
}

/* Independent model of a code: 0 finite (value in *v), 1 inf, 2 NaN. */
static int model(const fmt *f, uint32_t c, double *v) {
  uint32_t sign = c >> (f->bits - 1);
  uint32_t e = (c >> f->mbits) & ((1u << f->ebits) - 1u);
  uint32_t m = c & ((1u << f->mbits) - 1u);
  uint32_t emax = (1u << f->ebits) - 1u;
  if (f->has_inf && e == emax) return m ? 2 : 1;
  if (!f->has_inf && e == emax && m == (1u << f->mbits) - 1u) return 2;
  double frac = (double)m / (double)(1u << f->mbits);
  double mag = e ? ldexp(1.0 + frac, (int)e - f->bias) : ldexp(frac, 1 - f->bias);
  *v = sign ? -mag : mag;
  return 0;
}

/* What a code should re-encode to: itself, except NaN canonicalisation. */
static uint32_t expected_roundtrip(const fmt *f, uint32_t c) {
  double v;
  if (model(f, c, &v) != 2) return c;
  switch (f->dtype) {
    case CLPA_DTYPE_F16:
      return (c & 0x8000u) | 0x7fffu;
    case CLPA_DTYPE_BF16:
      return c | 0x0040u;
    default:
      return (c & 0x80u) | 0x7fu;
  }
}

static void test_all_codes(const fmt *f) {
  uint32_t ncodes = 1u << f->bits;
  long bad_dec = 0, bad_rt = 0;
  for (uint32_t c = 0; c < ncodes; c++) {
    double v = 0;
    int kind = model(f, c, &v);
    float d = dec(f, c);
    int sign_ok = (signbit(d) != 0) == ((c >> (f->bits - 1)) != 0);
    int good = kind == 2   ? isnan(d) && sign_ok
               : kind == 1 ? isinf(d) && sign_ok
                           : (double)d == v && sign_ok;
    if (!good && bad_dec++ < 5)
      diag("%s code 0x%x decodes to %a (bits 0x%08x), model %a kind %d", f->name, c, d, f32_bits(d),
           v, kind);
    uint32_t back = enc(f, d);
    uint32_t want = expected_roundtrip(f, c);
    if (back != want && bad_rt++ < 5)
      diag("%s code 0x%x -> %a -> 0x%x, expected 0x%x", f->name, c, d, back, want);
  }
  ok(bad_dec == 0, "%s: all %u codes decode to the value of their bit fields (%ld wrong)", f->name,
     ncodes, bad_dec);
  ok(bad_rt == 0, "%s: all %u codes re-encode to themselves, NaNs canonicalised (%ld wrong)",
     f->name, ncodes, bad_rt);
}

/* Positive finite codes in increasing order are exactly 0 .. top. */
static uint32_t top_finite_code(const fmt *f) {
  uint32_t c = (1u << (f->bits - 1)) - 1u;
  double v;
  while (model(f, c, &v) != 0) c--;
  return c;
}

/* Every tie between neighbours c, c+1 goes to the even code; one f32 ulp
 * either side goes to the nearer one. For IEEE formats the value past the
 * top finite code is the tie with infinity (2^(emax+1)). */
static void test_ties(const fmt *f) {
  uint32_t top = top_finite_code(f);
  long bad = 0, checked = 0;
  for (uint32_t c = 0; c <= top; c++) {
    double lo, hi;
    model(f, c, &lo);
    uint32_t up = c + 1; /* the code for hi; for c == top: inf or saturation */
    if (c < top) {
      model(f, c + 1, &hi);
    } else {
      hi = lo + ldexp(1.0, (int)(top >> f->mbits) - f->bias - f->mbits);
      if (f->saturate) up = top;
    }
    double mid = (lo + hi) / 2;
    float fm = (float)mid;
    if ((double)fm != mid) {
      diag("%s: tie %a not representable in f32", f->name, mid);
      bad++;
      continue;
    }
    uint32_t even = (c & 1u) ? up : c;
    if (f->saturate && c == top) even = top;
    for (int neg = 0; neg < 2; neg++) {
      uint32_t s = neg ? 1u << (f->bits - 1) : 0;
      float x = neg ? -fm : fm;
      uint32_t got_mid = enc(f, x);
      uint32_t got_below = enc(f, nextafterf(x, 0.0f));
      uint32_t got_above = enc(f, nextafterf(x, neg ? -INFINITY : INFINITY));
      checked += 3;
      if (got_mid != (s | even) || got_below != (s | c) || got_above != (s | up)) {
        if (bad++ < 5)
          diag("%s: tie %a between 0x%x and 0x%x: got 0x%x (below 0x%x, above 0x%x)", f->name,
               (double)x, s | c, s | up, got_mid, got_below, got_above);
      }
    }
  }
  ok(bad == 0, "%s: %ld ties and their f32 neighbours round to nearest-even (%ld wrong)", f->name,
     checked, bad);
}

typedef struct known {
  clpa_dtype dtype;
  float x;
  uint32_t code;
  const char *why;
} known;

static void test_known(void) {
  static const known k[] = {
      {CLPA_DTYPE_F16, 1.0f, 0x3c00, "one"},
      {CLPA_DTYPE_F16, 1.0f + 0x1p-11f, 0x3c00, "tie 1+2^-11 -> 1 (even)"},
      {CLPA_DTYPE_F16, 1.0f + 0x3p-11f, 0x3c02, "tie 1+3*2^-11 -> 1+2^-9 (even)"},
      {CLPA_DTYPE_F16, 65504.0f, 0x7bff, "max"},
      {CLPA_DTYPE_F16, 65519.996f, 0x7bff, "just below the inf tie"},
      {CLPA_DTYPE_F16, 65520.0f, 0x7c00, "tie with inf -> inf"},
      {CLPA_DTYPE_F16, 0x1p-24f, 0x0001, "smallest subnormal"},
      {CLPA_DTYPE_F16, 0x1p-25f, 0x0000, "half the smallest subnormal -> 0 (even)"},
      {CLPA_DTYPE_F16, 0x1.000002p-25f, 0x0001, "just above -> smallest subnormal"},
      {CLPA_DTYPE_F16, 0x3p-25f, 0x0002, "tie 1.5 subnormal units -> 2"},
      {CLPA_DTYPE_F16, 0x1.ffcp-15f, 0x0400, "largest subnormal + half unit -> smallest normal"},
      {CLPA_DTYPE_F16, -0.0f, 0x8000, "negative zero"},
      {CLPA_DTYPE_F16, -INFINITY, 0xfc00, "-inf"},
      {CLPA_DTYPE_F16, 0x1p-149f, 0x0000, "f32 subnormal -> 0"},
      {CLPA_DTYPE_BF16, 1.0f + 0x1p-8f, 0x3f80, "tie 1+2^-8 -> 1 (even)"},
      {CLPA_DTYPE_BF16, 1.0f + 0x3p-8f, 0x3f82, "tie 1+3*2^-8 -> up (even)"},
      {CLPA_DTYPE_BF16, 0x1.ffp127f, 0x7f80, "tie above max 0x1.fep127 -> inf"},
      {CLPA_DTYPE_BF16, 0x1p-133f, 0x0001, "smallest bf16 subnormal"},
      {CLPA_DTYPE_BF16, 0x1p-134f, 0x0000, "its half -> 0 (even)"},
      {CLPA_DTYPE_FP8_E4M3, 448.0f, 0x7e, "max"},
      {CLPA_DTYPE_FP8_E4M3, 464.0f, 0x7e, "would round to 480 (the NaN code): saturates"},
      {CLPA_DTYPE_FP8_E4M3, 1e30f, 0x7e, "huge saturates"},
      {CLPA_DTYPE_FP8_E4M3, INFINITY, 0x7e, "+inf saturates"},
      {CLPA_DTYPE_FP8_E4M3, -INFINITY, 0xfe, "-inf saturates"},
      {CLPA_DTYPE_FP8_E4M3, NAN, 0x7f, "NaN"},
      {CLPA_DTYPE_FP8_E4M3, 1.0625f, 0x38, "tie 1+1/16 -> 1 (even)"},
      {CLPA_DTYPE_FP8_E4M3, 1.1875f, 0x3a, "tie 1+3/16 -> 1.25 (even)"},
      {CLPA_DTYPE_FP8_E4M3, 0x1p-9f, 0x01, "smallest subnormal"},
      {CLPA_DTYPE_FP8_E4M3, 0x1p-10f, 0x00, "its half -> 0"},
      {CLPA_DTYPE_FP8_E4M3, 0x3p-10f, 0x02, "tie 1.5 units -> 2"},
      {CLPA_DTYPE_FP8_E4M3, 0x1.ep-7f, 0x08, "largest subnormal + half unit -> 2^-6"},
      {CLPA_DTYPE_FP8_E4M3, -3.0f, 0xc4, "-3"},
      {CLPA_DTYPE_FP8_E5M2, 57344.0f, 0x7b, "max"},
      {CLPA_DTYPE_FP8_E5M2, 61440.0f, 0x7b, "tie with 2^16 saturates"},
      {CLPA_DTYPE_FP8_E5M2, 1e30f, 0x7b, "huge finite saturates"},
      {CLPA_DTYPE_FP8_E5M2, INFINITY, 0x7c, "+inf stays inf"},
      {CLPA_DTYPE_FP8_E5M2, -INFINITY, 0xfc, "-inf stays inf"},
      {CLPA_DTYPE_FP8_E5M2, 1.125f, 0x3c, "tie 1+1/8 -> 1 (even)"},
      {CLPA_DTYPE_FP8_E5M2, 1.375f, 0x3e, "tie 1+3/8 -> 1.5 (even)"},
      {CLPA_DTYPE_FP8_E5M2, 0x1p-16f, 0x01, "smallest subnormal"},
      {CLPA_DTYPE_FP8_E5M2, 0x1p-17f, 0x00, "its half -> 0"},
      {CLPA_DTYPE_FP8_E5M2, 0x3p-17f, 0x02, "tie 1.5 units -> 2"},
      {CLPA_DTYPE_FP8_E5M2, -NAN, 0xff, "negative NaN keeps its sign"},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    uint32_t got = k[i].dtype == CLPA_DTYPE_F16    ? clpa_f32_to_f16(k[i].x)
                   : k[i].dtype == CLPA_DTYPE_BF16 ? clpa_f32_to_bf16(k[i].x)
                                                   : clpa_f32_to_fp8(k[i].x, k[i].dtype);
    if (got != k[i].code) {
      bad++;
      diag("%s(%a): got 0x%x, expected 0x%x (%s)", clpa_dtype_name(k[i].dtype), (double)k[i].x, got,
           k[i].code, k[i].why);
    }
  }
  ok(bad == 0, "%zu hand-picked values encode as expected (%d wrong)", sizeof k / sizeof k[0], bad);

  /* NaN encodings documented in the header. */
  float qnan_payload = bits_f32(0x7fc12345u), snan_low = bits_f32(0xff800001u);
  ok(clpa_f32_to_f16(qnan_payload) == 0x7fff && clpa_f32_to_f16(snan_low) == 0xffff &&
         f32_bits(clpa_f16_to_f32(0x7c01)) == 0x7fc02000u,
     "f16 NaN: encodes to canonical sign|0x7fff; decodes with payload, quiet bit forced");
  ok(clpa_f32_to_bf16(qnan_payload) == 0x7fc1 && clpa_f32_to_bf16(snan_low) == 0xffc0,
     "bf16 NaN: quiet bit forced so low-bit payloads cannot become inf");
  ok(f32_bits(clpa_fp8_to_f32(0xff, CLPA_DTYPE_FP8_E4M3)) == 0xffc00000u &&
         f32_bits(clpa_fp8_to_f32(0x7d, CLPA_DTYPE_FP8_E5M2)) == 0x7fc00000u,
     "fp8 NaN decodes to the quiet f32 NaN with its sign");
}

/* Sorted positive finite values of a 16-bit format plus the virtual value
 * 2^(emax+1) at the inf code, so IEEE overflow falls out of nearest-even. */
typedef struct table {
  uint32_t n;
  double v[1u << 15];
} table;

static void build_table(const fmt *f, table *t) {
  uint32_t top = top_finite_code(f);
  for (uint32_t c = 0; c <= top; c++) model(f, c, &t->v[c]);
  t->v[top + 1] = t->v[top] + ldexp(1.0, (int)(top >> f->mbits) - f->bias - f->mbits);
  t->n = top + 2;
}

/* Which of a, b is nearer to x: -1 a, +1 b, 0 a tie. Decided by comparing
 * x with the midpoint, which is exact in double for every format here;
 * subtracting (x - a) would round when x is far beyond both. */
static int closer(double x, double a, double b) {
  if (a == b) return 0;
  double mid = (a + b) / 2;
  if (x == mid) return 0;
  return (x < mid) == (a < b) ? -1 : 1;
}

/* Nearest code of |x| by binary search in the table (ties to even). */
static uint32_t nearest_by_table(const table *t, double ax) {
  uint32_t lo = 0, hi = t->n - 1;
  if (ax >= t->v[hi]) return hi;
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (t->v[mid] <= ax)
      lo = mid;
    else
      hi = mid;
  }
  int cmp = closer(ax, t->v[lo], t->v[hi]);
  if (cmp != 0) return cmp < 0 ? lo : hi;
  return (lo & 1u) ? hi : lo;
}

/* Nearest fp8 code of |x| by scanning every code (ties to even). Finite
 * values beyond max land on max: the documented saturation. */
static uint32_t nearest_by_scan(const fmt *f, double ax) {
  uint32_t best = 0;
  double best_v = 0;
  for (uint32_t c = 1; c < 0x80u; c++) {
    double v;
    if (model(f, c, &v) != 0) continue;
    int cmp = closer(ax, best_v, v);
    if (cmp > 0 || (cmp == 0 && !(c & 1u))) {
      best = c;
      best_v = v;
    }
  }
  return best;
}

static float random_float(const fmt *f, int mode) {
  uint32_t sign = (uint32_t)(rng_next() & 1u) << 31;
  switch (mode) {
    case 0: /* any bit pattern: NaN, inf, huge, tiny */
      return bits_f32((uint32_t)rng_next());
    case 1: { /* exponents around the format's range */
      int lo = 1 - f->bias - f->mbits - 3, hi = (1 << f->ebits) - f->bias + 2;
      int e = lo + (int)rng_below((uint32_t)(hi - lo + 1));
      if (e < -149) e = -149;
      if (e > 127) e = 127;
      uint32_t be = e < -126 ? 0u : (uint32_t)(e + 127);
      uint32_t m = (uint32_t)rng_next() & 0x7fffffu;
      if (!be) m = (m | 0x400000u) >> (-126 - e); /* rough subnormal */
      return bits_f32(sign | (be << 23) | m);
    }
    default: { /* a few f32 ulps from a random code, or its tie */
      uint32_t top = top_finite_code(f);
      double v;
      model(f, rng_below(top + 1), &v);
      float x = (float)v;
      int steps = (int)rng_below(9) - 4;
      uint32_t b = f32_bits(x);
      if (steps < 0 && (b & 0x7fffffffu) < (uint32_t)-steps) steps = 0;
      return bits_f32(sign | (b + (uint32_t)steps));
    }
  }
}

static void test_random(const fmt *f, long count, const table *t) {
  long bad = 0, bad_native = 0, native = 0;
  for (long i = 0; i < count; i++) {
    float x = random_float(f, (int)(i % 3));
    uint32_t got = enc(f, x);
    uint32_t s = signbit(x) ? 1u << (f->bits - 1) : 0u;
    uint32_t want;
    if (isnan(x)) {
      want = got; /* the NaN rules are checked elsewhere; here: a NaN code */
      double v;
      if (model(f, got, &v) != 2) want = ~0u;
    } else if (isinf(x)) {
      want = s | (f->saturate && !f->has_inf ? top_finite_code(f) : top_finite_code(f) + 1u);
    } else if (t) {
      want = s | nearest_by_table(t, fabs((double)x));
    } else {
      want = s | nearest_by_scan(f, fabs((double)x));
    }
    if (got != want && bad++ < 5)
      diag("%s: %a (0x%08x) encodes to 0x%x, nearest is 0x%x", f->name, (double)x, f32_bits(x), got,
           want);
#ifdef __FLT16_MANT_DIG__
    if (f->dtype == CLPA_DTYPE_F16 && !isnan(x)) {
      __extension__ _Float16 h = (__extension__(_Float16)x); /* a GNU type: -Wpedantic allows it so */
      uint16_t hb;
      memcpy(&hb, &h, sizeof hb);
      native++;
      if (hb != got && bad_native++ < 5)
        diag("f16: %a encodes to 0x%x, the compiler's _Float16 cast gives 0x%x", (double)x, got,
             hb);
    }
#endif
  }
  ok(bad == 0, "%s: %ld random floats round to the nearest code found by %s (%ld wrong)", f->name,
     count, t ? "table search" : "scanning all codes", bad);
  if (native)
    ok(bad_native == 0, "f16: %ld agree with _Float16 casts (%ld wrong)", native, bad_native);
}

static void test_arrays(void) {
  enum { N = 4096 };
  static float src[N], back[N];
  static unsigned char buf[N * 4];
  /* half in [-600, 600], half any float or around each format's range (subnormals, overflow) */
  for (int i = 0; i < N; i++)
    src[i] = i < N / 2 ? (float)rng_uniform(-600.0, 600.0)
                       : random_float(&fmts[(size_t)i % (sizeof fmts / sizeof fmts[0])], i % 3);
  src[0] = NAN;
  src[1] = INFINITY;
  src[2] = -0.0f;
  const float scales[] = {1.0f, 0.0625f, 3.7f};
  for (int d = 0; d < CLPA_DTYPE_COUNT_; d++) {
    clpa_dtype dt = (clpa_dtype)d;
    for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
      float sc = scales[si];
      int bad = 0;
      clpa_dtype_encode(dt, src, buf, N, sc);
      clpa_dtype_decode(dt, buf, back, N, sc);
      for (int i = 0; i < N; i++) {
        uint32_t code;
        float r;
        switch (dt) {
          case CLPA_DTYPE_F32:
            memcpy(&code, buf + 4 * i, 4);
            r = bits_f32(code);
            bad += code != f32_bits(src[i]);
            break;
          case CLPA_DTYPE_F16:
          case CLPA_DTYPE_BF16: {
            uint16_t w;
            memcpy(&w, buf + 2 * i, 2);
            uint16_t want =
                dt == CLPA_DTYPE_F16 ? clpa_f32_to_f16(src[i]) : clpa_f32_to_bf16(src[i]);
            r = dt == CLPA_DTYPE_F16 ? clpa_f16_to_f32(want) : clpa_bf16_to_f32(want);
            bad += w != want;
            break;
          }
          default: {
            uint8_t want = clpa_f32_to_fp8(src[i] / sc, dt);
            r = clpa_fp8_to_f32(want, dt) * sc;
            bad += buf[i] != want;
            break;
          }
        }
        int same = isnan(r) ? isnan(back[i]) : f32_bits(r) == f32_bits(back[i]);
        bad += !same;
      }
      ok(bad == 0,
         "%s scale %g: clpa_dtype_encode/clpa_dtype_decode match the scalar functions%s (%d wrong)",
         clpa_dtype_name(dt), (double)sc,
         dt >= CLPA_DTYPE_FP8_E4M3 ? " with x/scale, code*scale" : ", scale ignored", bad);
    }
  }
}

int main(void) {
  rng_seed_from_env();
  static table t;
  for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
    test_all_codes(&fmts[i]);
    test_ties(&fmts[i]);
  }
  test_known();
  for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
    const fmt *f = &fmts[i];
    if (f->bits == 16) {
      build_table(f, &t);
      test_random(f, 3000000, &t);
    } else {
      test_random(f, 2000000, NULL);
    }
  }
  test_arrays();
  return done_testing();
}
