/* quant.c — ggml's quantized block formats (see quant.h for the layouts
 * and the encoder's error bounds): one decoder per type, written from the
 * per-element formulas so that each element sees ggml's float operations
 * in ggml's order, then the reference encoders. */
#include "quant.h"

#include <math.h>
#include <string.h>

/* Every product in these formats is exact in float: an f16 (11
 * significant bits) times a scale (at most 7: |sc| <= 128) times a level
 * (at most 5: |q| <= 32) needs at most 23 bits, and stays far from float's
 * overflow and subnormals. So only Q4_K/Q5_K's final subtraction rounds,
 * and a fused multiply-add (-ffp-contract) cannot change a bit of any
 * decoder here or in ggml. */

#define QK 32    /* elements in a Q4_0 / Q8_0 block */
#define QK_K 256 /* elements in a K-quant super-block */

/* ----------------------------------------------------------------- types */

typedef struct qtype {
  uint32_t type;
  const char *name;
  uint32_t elems, bytes; /* per block */
} qtype;

static const qtype qtypes[] = {
    {DEMO_GGML_Q4_0, "q4_0", QK, 2 + QK / 2},
    {DEMO_GGML_Q8_0, "q8_0", QK, 2 + QK},
    {DEMO_GGML_Q4_K, "q4_K", QK_K, 4 + 12 + QK_K / 2},
    {DEMO_GGML_Q5_K, "q5_K", QK_K, 4 + 12 + QK_K / 8 + QK_K / 2},
    {DEMO_GGML_Q6_K, "q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2},
};

static const qtype *find(uint32_t type) {
  for (size_t i = 0; i < sizeof qtypes / sizeof qtypes[0]; i++)
    if (qtypes[i].type == type) return &qtypes[i];
  return NULL;
}

bool demo_quant_supported(uint32_t type) { return find(type) != NULL; }
uint32_t demo_quant_block_elems(uint32_t type) { return find(type) ? find(type)->elems : 0; }
uint32_t demo_quant_block_bytes(uint32_t type) { return find(type) ? find(type)->bytes : 0; }

/* The common checks of both directions; *out the type's row. */
static clpa_status check(const char *fn, uint32_t type, const void *a, const void *b, uint64_t n,
                         const qtype **out) {
  if (n && (!a || !b)) return demo_fail(CLPA_ERR_INVALID_ARG, "%s: NULL argument", fn);
  *out = find(type);
  if (!*out)
    return demo_fail(CLPA_ERR_UNSUPPORTED, "%s: ggml type %u is not one of " DEMO_QUANT_TYPE_NAMES, fn,
                     (unsigned)type);
  if (n % (*out)->elems)
    return demo_fail(CLPA_ERR_INVALID_ARG, "%s: %llu elements are not whole %s blocks of %u", fn,
                     (unsigned long long)n, (*out)->name, (unsigned)(*out)->elems);
  return CLPA_OK;
}

/* ------------------------------------------------------------------ f16 */

static float f16_at(const uint8_t *p) { return clpa_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static void f16_put(uint8_t *p, uint16_t h) {
  p[0] = (uint8_t)h;
  p[1] = (uint8_t)(h >> 8);
}

/* The smallest f16 >= v, for finite v in [0, 65504]: a scale that, unlike
 * the nearest, never shrinks the grid below what the block needs. */
static uint16_t f16_ceil(float v) {
  uint16_t h = clpa_f32_to_f16(v);
  if (clpa_f16_to_f32(h) < v) h++; /* positive f16s order as their bits */
  return h;
}

/* ---------------------------------------------- Q4_K / Q5_K scale bytes */

/* Sub-block j's 6-bit scale and min (ggml's get_scale_min_k4). */
static void k4_get(const uint8_t *s, int j, uint8_t *sc, uint8_t *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (uint8_t)((s[j + 4] & 15) | (s[j - 4] >> 6) << 4);
    *m = (uint8_t)((s[j + 4] >> 4) | (s[j] >> 6) << 4);
  }
}

static void k4_put(uint8_t *s, const uint8_t sc[8], const uint8_t m[8]) {
  for (int j = 0; j < 4; j++) {
    s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
    s[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
    s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
  }
}

/* ============================================================== decoding */

static void dec_q8_0(const uint8_t *b, float *y) {
  const float d = f16_at(b);
  for (int i = 0; i < QK; i++) y[i] = (float)(int8_t)b[2 + i] * d;
}

static void dec_q4_0(const uint8_t *b, float *y) {
  const float d = f16_at(b);
  for (int i = 0; i < QK / 2; i++) {
    y[i] = (float)((b[2 + i] & 15) - 8) * d;
    y[i + QK / 2] = (float)((b[2 + i] >> 4) - 8) * d;
  }
}

/* Q4_K (qh NULL) and Q5_K: y = (d * sc) * q - dmin * m per sub-block. */
static void dec_k_min(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, float *y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  for (int s = 0; s < 8; s++) {
    uint8_t sc, m;
    k4_get(b + 4, s, &sc, &m);
    const float D = d * (float)sc, M = dmin * (float)m;
    const uint8_t *q = qs + 32 * (s / 2);
    for (int l = 0; l < 32; l++) {
      int v = q[l] >> (4 * (s & 1)) & 15;
      if (qh) v += (qh[l] >> s & 1) << 4;
      y[32 * s + l] = D * (float)v - M;
    }
  }
}

static void dec_q6_k(const uint8_t *b, float *y) {
  const uint8_t *ql = b, *qh = b + 128, *scales = b + 192;
  const float d = f16_at(b + 208);
  for (int e = 0; e < QK_K; e++) {
    int h = e / 128, k = e % 128 / 32, l = e % 32;
    int lo = ql[64 * h + 32 * (k & 1) + l] >> (4 * (k >> 1)) & 15;
    int hi = qh[32 * h + l] >> (2 * k) & 3;
    y[e] = d * (float)(int8_t)scales[e / 16] * (float)((lo | hi << 4) - 32);
  }
}

clpa_status demo_quant_dequantize(uint32_t type, const void *src, float *dst, uint64_t n) {
  const qtype *t;
  clpa_status st = check("demo_quant_dequantize", type, src, dst, n, &t);
  if (st) return st;
  const uint8_t *b = src;
  for (uint64_t i = 0; i < n / t->elems; i++, b += t->bytes, dst += t->elems) {
    switch (type) {
      case DEMO_GGML_Q8_0: dec_q8_0(b, dst); break;
      case DEMO_GGML_Q4_0: dec_q4_0(b, dst); break;
      case DEMO_GGML_Q4_K: dec_k_min(b, NULL, b + 16, dst); break;
      case DEMO_GGML_Q5_K: dec_k_min(b, b + 16, b + 48, dst); break;
      default: dec_q6_k(b, dst); break;
    }
  }
  return CLPA_OK;
}

/* ============================================================== encoding */

static float amax(const float *x, int n) {
  float a = 0;
  for (int i = 0; i < n; i++) a = fmaxf(a, fabsf(x[i]));
  return a;
}

/* ceil(v) clamped to [0, hi]; 0 for NaN. */
static int ceil_to(float v, int hi) {
  if (!(v > 0)) return 0;
  if (v >= (float)hi) return hi;
  int c = (int)v;
  return c + ((float)c < v);
}

/* round(v) clamped to [lo, hi]; v == 0 / 0 (an empty grid) gives 0. */
static int round_to(float v, int lo, int hi) {
  if (v != v) return 0;
  if (v <= (float)lo) return lo;
  if (v >= (float)hi) return hi;
  return (int)floorf(v + 0.5f);
}

/* An f16 scale past 65504 (f16_ceil gives inf). */
static bool f16_overflows(uint16_t h) { return (h & 0x7c00) == 0x7c00; }

/* The largest |x - y| over n elements of a grid y = D * q - M, q the
 * nearest level in [qlo, qhi] (M = 0 for the symmetric Q6_K); gives up,
 * returning a value >= stop, as soon as one element reaches stop. q[]
 * receives the levels + bias when not NULL. */
static float grid_error(const float *x, int n, float D, float M, int qlo, int qhi, float stop,
                        uint8_t *q, int bias) {
  float worst = 0;
  for (int i = 0; i < n; i++) {
    int l = D > 0 ? round_to((x[i] + M) / D, qlo, qhi) : 0;
    float e = fabsf(x[i] - (D * (float)l - M));
    if (e >= stop) return e;
    if (e > worst) worst = e;
    if (q) q[i] = (uint8_t)(l + bias);
  }
  return worst;
}

/* ----------------------------------------------------------- Q8_0, Q4_0 */

/* Q8_0: the step d covers A = max |x| in 127 steps either way. */
static uint16_t q8_0_scale(const float *x) { return f16_ceil(amax(x, QK) / 127.0f); }

static void enc_q8_0(const float *x, uint8_t *b) {
  uint16_t h = q8_0_scale(x);
  const float d = clpa_f16_to_f32(h);
  f16_put(b, h);
  for (int i = 0; i < QK; i++) b[2 + i] = (uint8_t)(int8_t)round_to(x[i] / d, -127, 127);
}

/* Q4_0, as ggml's quantize_row_q4_0_ref: d = -v / 8 for v the element of
 * largest magnitude (the first such), so that v decodes to q = 0; but |d|
 * rounded up, not to nearest, and x / d rather than x * (1 / d), so that
 * decoded values re-encode to themselves. */
static uint16_t q4_0_scale(const float *x) {
  float a = 0, v = 0;
  for (int i = 0; i < QK; i++)
    if (fabsf(x[i]) > a) {
      a = fabsf(x[i]);
      v = x[i];
    }
  return (uint16_t)(f16_ceil(a / 8.0f) | (v > 0 ? 0x8000u : 0u));
}

static void enc_q4_0(const float *x, uint8_t *b) {
  uint16_t h = q4_0_scale(x);
  const float d = clpa_f16_to_f32(h);
  f16_put(b, h);
  for (int i = 0; i < QK / 2; i++) {
    int q0 = d != 0 ? round_to(x[i] / d + 8.0f, 0, 15) : 8;
    int q1 = d != 0 ? round_to(x[i + QK / 2] / d + 8.0f, 0, 15) : 8;
    b[2 + i] = (uint8_t)(q0 | q1 << 4);
  }
}

/* ---------------------------------------------------------- Q4_K, Q5_K */

/* What Q4_K / Q5_K (levels L = 15 / 31) settle before searching. */
typedef struct k_plan {
  int L;
  uint16_t hd, hmin; /* d, dmin as f16 bits */
  float d, dmin;
  float hi[8];   /* max x per sub-block */
  int m_lo[8];   /* the least m covering min(0, min x) */
  int widest;    /* the sub-block with the largest hi + dmin m_lo */
} k_plan;

/* step 1: lo = min(0, min x), hi = max x per sub-block of 32; dmin the
 *         smallest f16 with 63 dmin >= the most negative lo.
 * step 2: m_lo = ceil(-lo / dmin) per sub-block, the least m covering lo;
 *         d the smallest f16 with 63 L d >= the widest hi + dmin m_lo
 *         (less 2^-12: decoded values, re-encoded, must find the same d
 *         although hi + M rounds). */
static void k_min_plan(const float *x, int L, k_plan *p) {
  float lo[8], lmax = 0, smax = 0;
  p->L = L;
  for (int s = 0; s < 8; s++) {
    lo[s] = 0;
    p->hi[s] = x[32 * s];
    for (int l = 0; l < 32; l++) {
      lo[s] = fminf(lo[s], x[32 * s + l]);
      p->hi[s] = fmaxf(p->hi[s], x[32 * s + l]);
    }
    lmax = fmaxf(lmax, -lo[s]);
  }
  p->hmin = f16_ceil(lmax / 63.0f);
  p->dmin = clpa_f16_to_f32(p->hmin);
  p->widest = 0;
  for (int s = 0; s < 8; s++) {
    p->m_lo[s] = p->dmin > 0 ? ceil_to(-lo[s] / p->dmin, 63) : 0;
    float span = p->hi[s] + p->dmin * (float)p->m_lo[s];
    if (span > smax) {
      smax = span;
      p->widest = s;
    }
  }
  p->hd = f16_ceil(smax / (float)(63 * L) * (1.0f - 0x1p-12f));
  p->d = clpa_f16_to_f32(p->hd);
}

/* The least sc with L d sc >= hi + M (less 2^-12, see step 2), at most 63. */
static int sc_covering(const k_plan *p, int s, float M) {
  return p->d > 0 ? ceil_to((p->hi[s] + M) / ((float)p->L * p->d) * (1.0f - 0x1p-12f), 63) : 0;
}

/* Fills sc, m and the levels q[256] from the plan.
 * step 3: the widest sub-block takes its least covering pair, m_lo and
 *         the least sc covering hi + dmin m_lo (63 when d is normal): its
 *         top then decodes to 63 L d - dmin m_lo, and decoded values,
 *         re-encoded, find the same d in step 2.
 * step 4: every other sub-block tries every m in [m_lo, 63] and sc from
 *         the least covering hi + dmin m up to 63, keeping the (m, sc)
 *         with the least largest error (the first one, on a tie) and
 *         stopping at an exact fit. The least covering pair alone gives
 *         the bound in quant.h; the search also finds the grid of values
 *         that lie on one. */
static void enc_k_min(const float *x, const k_plan *p, uint8_t sc[8], uint8_t m[8], uint8_t q[QK_K]) {
  for (int s = 0; s < 8; s++) {
    const float *xs = x + 32 * s;
    float best = s == p->widest ? 0 : INFINITY; /* 0: no search */
    int bm = p->m_lo[s], bsc = s == p->widest ? sc_covering(p, s, p->dmin * (float)bm) : 0;
    for (int mm = p->m_lo[s]; mm <= (p->dmin > 0 ? 63 : p->m_lo[s]) && best > 0; mm++) {
      const float M = p->dmin * (float)mm;
      for (int c = sc_covering(p, s, M); c <= (p->d > 0 ? 63 : 0) && best > 0; c++) {
        float e = grid_error(xs, 32, p->d * (float)c, M, 0, p->L, best, NULL, 0);
        if (e < best) {
          best = e;
          bm = mm;
          bsc = c;
        }
      }
    }
    m[s] = (uint8_t)bm;
    sc[s] = (uint8_t)bsc;
    grid_error(xs, 32, p->d * (float)bsc, p->dmin * (float)bm, 0, p->L, INFINITY, q + 32 * s, 0);
  }
}

/* Q4_K: 144 bytes; Q5_K: 176, the fifth bits in qh at 16 and qs at 48. */
static void enc_q45_k(const float *x, bool five, uint8_t *b) {
  k_plan p;
  uint8_t sc[8], m[8], q[QK_K];
  k_min_plan(x, five ? 31 : 15, &p);
  enc_k_min(x, &p, sc, m, q);
  memset(b, 0, five ? 176 : 144);
  f16_put(b, p.hd);
  f16_put(b + 2, p.hmin);
  k4_put(b + 4, sc, m);
  uint8_t *qs = b + (five ? 48 : 16);
  for (int e = 0; e < QK_K; e++) {
    qs[32 * (e / 64) + e % 32] |= (uint8_t)((q[e] & 15) << (4 * (e / 32 & 1)));
    if (five) b[16 + e % 32] |= (uint8_t)((q[e] >> 4) << (e / 32));
  }
}

/* ----------------------------------------------------------------- Q6_K */

/* d the smallest f16 with 31 * 127 d >= A = max |x|. */
static uint16_t q6_k_scale(const float *x) { return f16_ceil(amax(x, QK_K) / (31.0f * 127.0f)); }

/* Per sub-block of 16, every sc from the least covering its max |x|
 * (31 d sc >= it) up to 127, keeping the least largest error (the first
 * on a tie, stopping at an exact fit). Levels stay in [-31, 31]: the
 * sub-block holding A then has sc = 127 (when d is normal) and decodes A
 * to 31 * 127 d exactly, which re-encodes to the same d. */
static void enc_q6_k(const float *x, uint8_t *b) {
  uint16_t h = q6_k_scale(x);
  const float d = clpa_f16_to_f32(h);
  uint8_t q[QK_K];
  memset(b, 0, 210);
  for (int s = 0; s < 16; s++) {
    const float *xs = x + 16 * s;
    float best = INFINITY;
    int bsc = 0;
    int sc_lo = d > 0 ? ceil_to(amax(xs, 16) / (31.0f * d), 127) : 0;
    for (int c = sc_lo; c <= (d > 0 ? 127 : 0) && best > 0; c++) {
      float e = grid_error(xs, 16, d * (float)c, 0, -32, 31, best, NULL, 0);
      if (e < best) {
        best = e;
        bsc = c;
      }
    }
    b[192 + s] = (uint8_t)bsc;
    grid_error(xs, 16, d * (float)bsc, 0, -32, 31, INFINITY, q + 16 * s, 32);
  }
  for (int e = 0; e < QK_K; e++) {
    int hh = e / 128, k = e % 128 / 32, l = e % 32;
    b[64 * hh + 32 * (k & 1) + l] |= (uint8_t)((q[e] & 15) << (4 * (k >> 1)));
    b[128 + 32 * hh + l] |= (uint8_t)((q[e] >> 4) << (2 * k));
  }
  f16_put(b + 208, h);
}

/* ---------------------------------------------------------------- rows */

/* Whether a block's scales fit in f16 (its encoding cannot fail then). */
static bool scales_fit(uint32_t type, const float *x) {
  k_plan p;
  switch (type) {
    case DEMO_GGML_Q8_0: return !f16_overflows(q8_0_scale(x));
    case DEMO_GGML_Q4_0: return !f16_overflows(q4_0_scale(x));
    case DEMO_GGML_Q6_K: return !f16_overflows(q6_k_scale(x));
    default:
      k_min_plan(x, type == DEMO_GGML_Q5_K ? 31 : 15, &p);
      return !f16_overflows(p.hmin) && !f16_overflows(p.hd);
  }
}

clpa_status demo_quant_quantize(uint32_t type, const float *src, void *dst, uint64_t n) {
  const qtype *t;
  clpa_status st = check("demo_quant_quantize", type, src, dst, n, &t);
  if (st) return st;
  /* everything first, so that a refusal writes nothing */
  for (uint64_t i = 0; i < n; i++)
    if (!isfinite(src[i]))
      return demo_fail(CLPA_ERR_INVALID_ARG, "demo_quant_quantize: element %llu is %g", (unsigned long long)i,
                       (double)src[i]);
  for (uint64_t i = 0; i < n / t->elems; i++)
    if (!scales_fit(type, src + i * t->elems))
      return demo_fail(CLPA_ERR_INVALID_ARG,
                       "demo_quant_quantize: block %llu (max |x| %g) needs a %s scale past f16's 65504",
                       (unsigned long long)i, (double)amax(src + i * t->elems, (int)t->elems), t->name);
  uint8_t *b = dst;
  for (uint64_t i = 0; i < n / t->elems; i++, b += t->bytes, src += t->elems) {
    switch (type) {
      case DEMO_GGML_Q8_0: enc_q8_0(src, b); break;
      case DEMO_GGML_Q4_0: enc_q4_0(src, b); break;
      case DEMO_GGML_Q4_K: enc_q45_k(src, false, b); break;
      case DEMO_GGML_Q5_K: enc_q45_k(src, true, b); break;
      default: enc_q6_k(src, b); break;
    }
  }
  return CLPA_OK;
}
