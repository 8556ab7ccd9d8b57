/*
 * test_demo_quant.c — ggml's quantized block formats in clpa-demo
 * (tools/demo/quant.c), host suite.
 *
 * 1. Block sizes and ggml's type numbers.
 * 2. One hand-built block per type whose values the test works out from
 *    the format's definition alone (scale bytes packed by hand, a few
 *    elements pinned as literals), checked exactly.
 * 3. Random blocks of random bytes (random finite scales, and raw bits for
 *    inf / NaN / subnormal ones) decoded by quant.c and by this test's own
 *    decoder, written in ggml's loop order: equal bit for bit.
 * 4. The reference encoder on random data of several shapes: every
 *    element within the bound quant.h documents (the worst ratio printed),
 *    decoded values re-encode to themselves, encoding is deterministic and
 *    writes every byte, and bad input is refused without writing.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/demo/quant.h"
#include "clpa_base.h"
#include "tap.h"

static const uint32_t types[] = {DEMO_GGML_Q4_0, DEMO_GGML_Q8_0, DEMO_GGML_Q4_K, DEMO_GGML_Q5_K,
                                 DEMO_GGML_Q6_K};
static const char *const names[] = {"q4_0", "q8_0", "q4_K", "q5_K", "q6_K"};
#define N_TYPES 5

static void put16(uint8_t *p, uint16_t h) {
  p[0] = (uint8_t)h;
  p[1] = (uint8_t)(h >> 8);
}
static float h2f(const uint8_t *p) { return clpa_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* bitwise equality, any NaN equal to any NaN */
static bool same(float a, float b) { return !memcmp(&a, &b, 4) || (a != a && b != b); }

/* ============================================================ 1. sizes */

static void test_sizes(void) {
  static const uint32_t elems[] = {32, 32, 256, 256, 256}, bytes[] = {18, 34, 144, 176, 210};
  static const uint32_t numbers[] = {2, 8, 12, 13, 14};
  bool all = true;
  for (int i = 0; i < N_TYPES; i++)
    all = all && types[i] == numbers[i] && demo_quant_supported(types[i]) &&
          demo_quant_block_elems(types[i]) == elems[i] && demo_quant_block_bytes(types[i]) == bytes[i];
  ok(all, "ggml numbers 2/8/12/13/14; blocks of 32/32/256/256/256 elements in 18/34/144/176/210 bytes");
  ok(!demo_quant_supported(3) && !demo_quant_block_elems(0) && !demo_quant_block_bytes(15) &&
         !demo_quant_supported(30),
     "q4_1, f32, q8_K, bf16 are not block types here");
}

/* ===================================================== 2. by hand, exact */

/* Q4_K / Q5_K sub-block scales and mins and their 12 bytes, packed by hand
 * from the layout (byte s: sc[s] | sc[s+4] bits 4-5 in bits 6-7; byte s+4:
 * the same for m; byte s+8: sc[s+4] low nibble | m[s+4] low nibble << 4). */
static const int hand_sc[8] = {1, 2, 3, 63, 17, 32, 5, 48}, hand_m[8] = {0, 1, 63, 7, 33, 16, 2, 60};
static const uint8_t hand_scales[12] = {0x41, 0x82, 0x03, 0xff, 0x80, 0x41, 0x3f, 0xc7, 0x11, 0x00, 0x25, 0xc0};

static bool check_hand(uint32_t type, const uint8_t *blk, const double *want, int n, const char *what) {
  float y[256];
  for (int i = 0; i < 256; i++) y[i] = NAN;
  clpa_status st = demo_quant_dequantize(type, blk, y, (uint64_t)n);
  int bad = -1;
  for (int i = 0; i < n && bad < 0; i++)
    if ((double)y[i] != want[i]) bad = i;
  if (bad >= 0) diag("%s: element %d = %.9g, expected %.9g", what, bad, (double)y[bad], want[bad]);
  return ok(st == CLPA_OK && bad < 0, "%s", what);
}

static void test_hand_q8_0(void) {
  uint8_t b[34];
  double want[32];
  put16(b, 0x3400); /* d = 0.25 */
  for (int i = 0; i < 32; i++) {
    b[2 + i] = (uint8_t)(int8_t)(i * 7 - 100);
    want[i] = (i * 7 - 100) * 0.25;
  }
  check_hand(DEMO_GGML_Q8_0, b, want, 32, "q8_0 by hand: d 0.25, qs i*7-100 (y[0] = -25, y[31] = 29.25)");
  ok(want[0] == -25 && want[31] == 29.25, "q8_0: the pinned elements");
}

static void test_hand_q4_0(void) {
  uint8_t b[18];
  double want[32];
  put16(b, 0xb800); /* d = -0.5 */
  for (int j = 0; j < 16; j++) {
    b[2 + j] = (uint8_t)(j | (15 - j) << 4); /* low nibble: element j; high: element j + 16 */
    want[j] = (j - 8) * -0.5;
    want[j + 16] = (15 - j - 8) * -0.5;
  }
  check_hand(DEMO_GGML_Q4_0, b, want, 32,
             "q4_0 by hand: d -0.5, low nibbles elements 0..15, high 16..31 (y[0] = 4, y[16] = -3.5)");
  ok(want[0] == 4 && want[15] == -3.5 && want[16] == -3.5 && want[31] == 4, "q4_0: the pinned elements");
}

/* Q4_K / Q5_K: d = 0.5, dmin = 0.25, the scales above, levels qf(e). */
static void hand_k_min(bool five) {
  uint8_t b[176] = {0};
  double want[256];
  put16(b, 0x3800);     /* d = 0.5 */
  put16(b + 2, 0x3400); /* dmin = 0.25 */
  memcpy(b + 4, hand_scales, 12);
  uint8_t *qh = five ? b + 16 : NULL, *qs = five ? b + 48 : b + 16;
  for (int e = 0; e < 256; e++) {
    int s = e / 32, l = e % 32, q = five ? (e * 11 + 5) % 32 : (e * 7 + 3) % 16;
    qs[32 * (s / 2) + l] |= (uint8_t)((q & 15) << (s % 2 ? 4 : 0));
    if (five) qh[l] |= (uint8_t)((q >> 4) << s);
    want[e] = 0.5 * hand_sc[s] * q - 0.25 * hand_m[s];
  }
  if (five) {
    check_hand(DEMO_GGML_Q5_K, b, want, 256,
               "q5_K by hand: d 0.5, dmin 0.25, 6-bit scales/mins packed by hand, fifth bit in qh");
    ok(want[37] == 27.75 && want[255] == 609, "q5_K: y[37] = 0.5*2*28 - 0.25*1, y[255] = 0.5*48*26 - 0.25*60");
  } else {
    check_hand(DEMO_GGML_Q4_K, b, want, 256, "q4_K by hand: d 0.5, dmin 0.25, 6-bit scales/mins packed by hand");
    ok(want[37] == 5.75 && want[200] == 27 && want[255] == 273,
       "q4_K: y[37] = 0.5*2*6 - 0.25*1, y[200] = 0.5*5*11 - 0.25*2, y[255] = 0.5*48*12 - 0.25*60");
  }
}

static void test_hand_q6_k(void) {
  static const int sc[16] = {1, -1, 2, -3, 5, -8, 13, -21, 34, -55, 89, -128, 127, 0, 7, -7};
  uint8_t b[210] = {0};
  double want[256];
  for (int s = 0; s < 16; s++) b[192 + s] = (uint8_t)(int8_t)sc[s];
  put16(b + 208, 0x3000); /* d = 0.125 */
  for (int e = 0; e < 256; e++) {
    int h = e / 128, k = e % 128 / 32, l = e % 32, q = (e * 13 + 7) % 64;
    b[64 * h + 32 * (k % 2) + l] |= (uint8_t)((q & 15) << (k / 2 ? 4 : 0));
    b[128 + 32 * h + l] |= (uint8_t)((q >> 4) << (2 * k));
    want[e] = 0.125 * sc[e / 16] * (q - 32);
  }
  check_hand(DEMO_GGML_Q6_K, b, want, 256, "q6_K by hand: d 0.125, int8 scales -128..127, 4+2-bit levels");
  ok(want[0] == -3.125 && want[180] == -176 && want[200] == 238.125 && want[255] == -22.75,
     "q6_K: y[0] = 0.125*1*-25, y[180] = 0.125*-128*11, y[200] = 0.125*127*15, y[255] = 0.125*-7*26");
}

/* ================================== 3. random blocks, ggml's loop order */

static void ref_scale_min(const uint8_t *q, int j, int *d, int *m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

/* One block, as ggml-quants.c's dequantize_row_<type> walks it. */
static void ref_decode(uint32_t type, const uint8_t *x, float *y) {
  if (type == DEMO_GGML_Q8_0) {
    const float d = h2f(x);
    for (int j = 0; j < 32; ++j) y[j] = (int8_t)x[2 + j] * d;
  } else if (type == DEMO_GGML_Q4_0) {
    const float d = h2f(x);
    for (int j = 0; j < 16; ++j) {
      const int x0 = (x[2 + j] & 0x0F) - 8, x1 = (x[2 + j] >> 4) - 8;
      y[j] = x0 * d;
      y[j + 16] = x1 * d;
    }
  } else if (type == DEMO_GGML_Q4_K || type == DEMO_GGML_Q5_K) {
    bool five = type == DEMO_GGML_Q5_K;
    const uint8_t *ql = x + (five ? 48 : 16), *qh = x + 16;
    const float d = h2f(x), min = h2f(x + 2);
    int is = 0, sc, m;
    unsigned u1 = 1, u2 = 2;
    for (int j = 0; j < 256; j += 64) {
      ref_scale_min(x + 4, is + 0, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      ref_scale_min(x + 4, is + 1, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - m2;
      ql += 32;
      is += 2;
      u1 <<= 2;
      u2 <<= 2;
    }
  } else {
    const float d = h2f(x + 208);
    const uint8_t *ql = x, *qh = x + 128;
    const int8_t *sc = (const int8_t *)(x + 192);
    for (int n = 0; n < 256; n += 128) {
      for (int l = 0; l < 32; ++l) {
        int is = l / 16;
        const int8_t q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

static void test_random_blocks(int iters) {
  enum { NB = 16 };
  for (int k = 0; k < N_TYPES; k++) {
    uint32_t t = types[k], be = demo_quant_block_elems(t), bb = demo_quant_block_bytes(t);
    uint8_t *b = malloc(NB * bb + 1);
    float *got = malloc(sizeof(float) * NB * be), *want = malloc(sizeof(float) * NB * be);
    long bad = 0, n = 0;
    for (int it = 0; it < iters; it++) {
      /* one byte in: blocks need not be aligned */
      uint8_t *blk = b + (it & 1);
      for (uint32_t i = 0; i < NB * bb; i++) blk[i] = (uint8_t)rng_next();
      for (int j = 0; j < NB && it % 4; j++) { /* 3 in 4: finite scales of any size */
        uint8_t *p = blk + j * bb + (t == DEMO_GGML_Q6_K ? 208 : 0);
        put16(p, (uint16_t)(rng_below(0x7c00) | (rng_below(2) << 15)));
        if (t == DEMO_GGML_Q4_K || t == DEMO_GGML_Q5_K) put16(p + 2, (uint16_t)rng_below(0x7c00));
      }
      for (uint32_t i = 0; i < NB * be; i++) got[i] = NAN;
      clpa_status st = demo_quant_dequantize(t, blk, got, (uint64_t)NB * be);
      for (int j = 0; j < NB; j++) ref_decode(t, blk + j * bb, want + j * be);
      for (uint32_t i = 0; i < NB * be; i++, n++)
        if (st || !same(got[i], want[i])) {
          if (bad++ < 3) diag("%s: iteration %d element %u: %a, ggml's order gives %a", names[k], it, i,
                              (double)got[i], (double)want[i]);
        }
    }
    ok(bad == 0, "%s: %ld elements of random blocks equal bit for bit to ggml's loop order", names[k], n);
    free(b);
    free(got);
    free(want);
  }
}

/* ================================================ 4. the reference encoder */

/* The bound quant.h documents for element i of x (n elements of a type). */
static double bound(uint32_t t, const float *x, int i) {
  int be = (int)demo_quant_block_elems(t), b0 = i / be * be;
  double A = 0;
  for (int j = b0; j < b0 + be; j++) A = fmax(A, fabs(x[j]));
  if (t == DEMO_GGML_Q8_0) return A / 254 * (1 + 0x1p-9) + 0x1p-24;
  if (t == DEMO_GGML_Q4_0) return A / 8 * (1 + 0x1p-9) + 0x1p-24;
  if (t == DEMO_GGML_Q6_K) {
    double a16 = 0;
    for (int j = i / 16 * 16; j < i / 16 * 16 + 16; j++) a16 = fmax(a16, fabs(x[j]));
    return a16 / 62 + A / 7000 + 0x1p-24;
  }
  double lo = 0, hi = -INFINITY;
  for (int j = i / 32 * 32; j < i / 32 * 32 + 32; j++) {
    lo = fmin(lo, x[j]);
    hi = fmax(hi, x[j]);
  }
  return t == DEMO_GGML_Q4_K ? (hi - lo) / 30 + A / 600 + 0x1p-24 : (hi - lo) / 62 + A / 1200 + 0x1p-24;
}

/* Whether quant.h promises that block j of x (encoded in q) re-encodes
 * to itself: its scales are 0 or normal f16s, and for Q4_K / Q5_K the
 * sub-block with the most negative value spans half of its magnitude. */
static bool promised(uint32_t t, const float *x, const uint8_t *q, int j) {
  const uint8_t *b = q + (size_t)j * demo_quant_block_bytes(t);
  int at = t == DEMO_GGML_Q6_K ? 208 : 0, n = t == DEMO_GGML_Q4_K || t == DEMO_GGML_Q5_K ? 2 : 1;
  for (int i = 0; i < n; i++) {
    uint16_t h = (uint16_t)(b[at + 2 * i] | b[at + 2 * i + 1] << 8);
    if ((h & 0x7fff) && !(h & 0x7c00)) return false;
  }
  if (n == 1) return true;
  const float *xs = x + 256 * j;
  float lo = 0, span = 0;
  for (int s = 0; s < 8; s++) {
    float l = 0, h = xs[32 * s];
    for (int i = 0; i < 32; i++) {
      l = fminf(l, xs[32 * s + i]);
      h = fmaxf(h, xs[32 * s + i]);
    }
    if (l < lo) {
      lo = l;
      span = h - l;
    }
  }
  return !(lo < 0) || span >= -0.5f * lo;
}

enum { UNIFORM, WEIGHTS, SMALL, POSITIVE, NEGATIVE, SUBSCALES, SPARSE, HUGE, TINY, CONSTANT, N_SHAPES };
static const char *const shape_names[] = {"uniform +-1", "weights ~N(0, 0.02)", "weights ~N(0, 0.002)",
                                          "positive [0, 3]", "negative [-2, 0.5]", "sub-blocks 1e-3..1",
                                          "90% zeros", "+-5e5", "+-1e-6", "constant blocks"};

static void fill(float *x, int n, int shape) {
  float c = (float)rng_uniform(-2, 2), sub = 1;
  for (int i = 0; i < n; i++) {
    if (i % 32 == 0) sub = (float)pow(10, rng_uniform(-3, 0));
    if (i % 256 == 0) c = (float)rng_uniform(-2, 2);
    double u = rng_uniform(-1, 1);
    switch (shape) {
      case UNIFORM: x[i] = (float)u; break;
      case WEIGHTS: x[i] = (float)((rng_uniform(-1, 1) + rng_uniform(-1, 1) + u) * 0.02); break;
      case SMALL: x[i] = (float)((rng_uniform(-1, 1) + rng_uniform(-1, 1) + u) * 0.002); break;
      case POSITIVE: x[i] = (float)rng_uniform(0, 3); break;
      case NEGATIVE: x[i] = (float)rng_uniform(-2, 0.5); break;
      case SUBSCALES: x[i] = (float)u * sub; break;
      case SPARSE: x[i] = rng_below(10) ? 0.0f : (float)u; break;
      case HUGE: x[i] = (float)(u * 5e5); break;
      case TINY: x[i] = (float)(u * 1e-6); break;
      default: x[i] = c; break;
    }
  }
}

static void test_round_trips(int n_super) {
  const int n = 256 * n_super;
  float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), *y2 = malloc(sizeof(float) * n);
  uint8_t *q = malloc((size_t)n * 2), *q2 = malloc((size_t)n * 2);
  for (int k = 0; k < N_TYPES; k++) {
    uint32_t t = types[k];
    size_t bytes = (size_t)n / demo_quant_block_elems(t) * demo_quant_block_bytes(t);
    double worst = 0;
    int over = 0, unstable = 0, changed = 0, checked = 0, unpromised = 0;
    for (int sh = 0; sh < N_SHAPES; sh++) {
      fill(x, n, sh);
      memset(q, 0xa5, bytes);
      memset(q2, 0x5a, bytes);
      if (demo_quant_quantize(t, x, q, (uint64_t)n) || demo_quant_quantize(t, x, q2, (uint64_t)n))
        BAIL_OUT("%s: quantize failed: %s", names[k], demo_last_error());
      if (memcmp(q, q2, bytes)) changed++;
      for (int i = 0; i < n; i++) y[i] = y2[i] = NAN;
      if (demo_quant_dequantize(t, q, y, (uint64_t)n)) BAIL_OUT("dequantize failed");
      double sw = 0;
      int bad_here = 0;
      for (int i = 0; i < n; i++) {
        double e = fabs((double)x[i] - y[i]), b = bound(t, x, i);
        if (!(e <= b) && over++ < 3)
          diag("%s, %s: x[%d] = %.9g decodes to %.9g, error %.3g over the bound %.3g", names[k],
               shape_names[sh], i, (double)x[i], (double)y[i], e, b);
        sw = fmax(sw, e / b);
      }
      worst = fmax(worst, sw);
      /* decoded values re-encode to themselves, where quant.h says so */
      if (demo_quant_quantize(t, y, q2, (uint64_t)n) || demo_quant_dequantize(t, q2, y2, (uint64_t)n))
        BAIL_OUT("%s, %s: re-encoding failed: %s", names[k], shape_names[sh], demo_last_error());
      int be = (int)demo_quant_block_elems(t), other = 0;
      for (int j = 0; j < n / be; j++) {
        bool p = promised(t, x, q, j), moved = false;
        for (int i = j * be; i < (j + 1) * be; i++) moved = moved || !same(y[i], y2[i]);
        checked += p;
        unpromised += !p;
        if (moved && p) {
          bad_here++;
          if (unstable++ < 3) diag("%s, %s: block %d re-encodes to other values", names[k], shape_names[sh], j);
        }
        other += moved && !p;
      }
      diag("%s, %s: worst error / bound %.3f%s", names[k], shape_names[sh], sw,
           other ? "; some blocks with subnormal scales or no spread re-encode to other values" : "");
    }
    ok(over == 0, "%s: every element of %d shapes x %d elements within quant.h's bound (worst ratio %.3f)",
       names[k], N_SHAPES, n, worst);
    ok(unstable == 0 && checked > unpromised,
       "%s: decoded values re-encode to themselves (%d blocks where quant.h promises it; %d others)", names[k],
       checked, unpromised);
    ok(changed == 0, "%s: encoding is deterministic and writes every byte", names[k]);
  }
  free(x);
  free(y);
  free(y2);
  free(q);
  free(q2);
}

static void test_edges(void) {
  float x[256] = {0}, y[256];
  uint8_t q[256];
  bool zeros = true;
  for (int k = 0; k < N_TYPES; k++) {
    uint32_t be = demo_quant_block_elems(types[k]);
    zeros = zeros && !demo_quant_quantize(types[k], x, q, be) && !demo_quant_dequantize(types[k], q, y, be);
    for (uint32_t i = 0; i < be; i++) zeros = zeros && y[i] == 0;
  }
  ok(zeros, "a block of zeros decodes to zeros, every type");
  /* the extremes of the range */
  for (int i = 0; i < 256; i++) x[i] = i % 2 ? DEMO_QUANT_MAX_ABS : -DEMO_QUANT_MAX_ABS;
  bool fin = true;
  for (int k = 0; k < N_TYPES; k++) {
    uint32_t be = demo_quant_block_elems(types[k]);
    fin = fin && !demo_quant_quantize(types[k], x, q, be) && !demo_quant_dequantize(types[k], q, y, be);
    for (uint32_t i = 0; i < be; i++) fin = fin && fabsf(y[i] - x[i]) <= bound(types[k], x, (int)i);
  }
  ok(fin, "+-DEMO_QUANT_MAX_ABS encodes, every type, within the bound");

  /* refusals name the element or block and write nothing; the bad value
   * is in the second block: the first is fine */
  static const float bads[] = {NAN, INFINITY, -INFINITY};
  static const struct {
    float ok_at, refused_at; /* the largest magnitudes around the type's limit */
  } limits[N_TYPES] = {{524032.0f, 524400.0f}, {8.3e6f, 8.4e6f}, {-4.1e6f, -4.2e6f}, {-4.1e6f, -4.2e6f},
                       {2.57e8f, 2.6e8f}};
  static const float spans[N_TYPES][2] = {{0, 0}, {0, 0}, {6.1e7f, 6.2e7f}, {1.27e8f, 1.3e8f}, {0, 0}};
  for (int k = 0; k < N_TYPES; k++) {
    uint32_t be = demo_quant_block_elems(types[k]), at = be + 5;
    float trials[7] = {bads[0], bads[1], bads[2], limits[k].ok_at, limits[k].refused_at, spans[k][0], spans[k][1]};
    for (int j = 0; j < 7; j++) {
      if (j >= 5 && !trials[j]) continue;
      float xs[512];
      for (int i = 0; i < 512; i++) xs[i] = 0.5f;
      xs[at] = trials[j];
      uint8_t out[2 * 210];
      memset(out, 0xa5, sizeof out);
      clpa_status st = demo_quant_quantize(types[k], xs, out, 2 * be);
      bool untouched = true;
      for (size_t i = 0; i < sizeof out; i++) untouched = untouched && out[i] == 0xa5;
      char needle[64];
      if (j < 3) snprintf(needle, sizeof needle, "element %u is ", (unsigned)at);
      else snprintf(needle, sizeof needle, "block 1 (max |x| %g) needs a %s scale past f16's 65504",
                    (double)fabsf(trials[j]), names[k]);
      bool refuse = j < 3 || j == 4 || j == 6;
      if (refuse)
        ok(st == CLPA_ERR_INVALID_ARG && strstr(demo_last_error(), needle) && untouched,
           "%s: %g refused, nothing written: %s", names[k], (double)trials[j], demo_last_error());
      else
        ok(st == CLPA_OK, "%s: %g%s encodes", names[k], (double)trials[j], j == 5 ? " (a span)" : "");
    }
  }
  clpa_status st = demo_quant_quantize(DEMO_GGML_Q4_K, x, q, 128);
  ok(st == CLPA_ERR_INVALID_ARG && strstr(demo_last_error(), "128 elements are not whole q4_K blocks of 256"),
     "quantize: a partial block refused: %s", demo_last_error());
  st = demo_quant_dequantize(DEMO_GGML_Q8_0, q, y, 33);
  ok(st == CLPA_ERR_INVALID_ARG && strstr(demo_last_error(), "33 elements are not whole q8_0 blocks of 32"),
     "dequantize: a partial block refused: %s", demo_last_error());
  st = demo_quant_dequantize(3, q, y, 32);
  ok(st == CLPA_ERR_UNSUPPORTED && strstr(demo_last_error(), "ggml type 3 is not one of " DEMO_QUANT_TYPE_NAMES),
     "dequantize: q4_1 (3) refused, the supported types listed: %s", demo_last_error());
  st = demo_quant_quantize(DEMO_GGML_Q6_K, NULL, q, 256);
  ok(st == CLPA_ERR_INVALID_ARG && strstr(demo_last_error(), "NULL"), "quantize: NULL refused");
  ok(demo_quant_dequantize(DEMO_GGML_Q6_K, NULL, NULL, 0) == CLPA_OK, "zero elements: nothing to do");
}

int main(int argc, char **argv) {
  rng_seed_from_env();
  int iters = argc > 1 ? atoi(argv[1]) : 400;
  test_sizes();
  test_hand_q8_0();
  test_hand_q4_0();
  hand_k_min(false);
  hand_k_min(true);
  test_hand_q6_k();
  test_random_blocks(iters);
  test_round_trips(iters / 10 > 4 ? iters / 10 : 4);
  test_edges();
  return done_testing();
}
