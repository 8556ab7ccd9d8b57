/*
 * clpa-demo's linear layers (tools/demo/linear.h): both engines against a
 * double-precision reference on fresh random inputs, for f32, f16 and bf16
 * weights, row counts on and off the streaming kernel's row blocks (1, 3,
 * 4, 5, 16, 17, 40), column counts off its column groups, with and without
 * accumulating into C; outputs poisoned (NaN) first: with the device's
 * table entry and with two forced shapes (the GPUs' lanes splitting k and
 * meeting in local memory, and an odd one), so that every form of the
 * kernel runs on every device. Then the table's pick and the refusals.
 *
 * Tolerance: any order of f32 sums of k products is within k u sum |a w|
 * of the exact dot (u = 2^-24), as the weights are exact in f32; the test
 * allows that bound (plus u |C| when accumulating). The tiled GEMM rounds
 * each activation to the weights' type first (to nearest: within v |a|,
 * v = 2^-11 for f16, 2^-8 for bf16, or 2^-25 absolute below f16's normal
 * range), block forms' weights to f16 as well, so for it the test adds
 * v sum |a w| (v doubled, plus its square, for block forms) + 2^-25 (sum
 * |w| + 2 sum |a|). With f16 activations (demo_linear_run_f16) the test
 * rounds them itself and the reference takes them rounded: the f32 bound.
 */
#include <stdio.h>

#include "cl_util.h"
#include "linear.h"
#include "model.h"
#include "quant.h"

static clpa_context *ctx;

static uint16_t bf16_of(float x) { /* round to nearest even */
  uint32_t u;
  memcpy(&u, &x, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float f32_of_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float x;
  memcpy(&x, &u, 4);
  return x;
}

/* ggml's type number of each block form (quant.h) */
static uint32_t ggml_of(demo_wfmt w) {
  return w == DEMO_W_Q8_0 ? DEMO_GGML_Q8_0 : w == DEMO_W_Q4_0 ? DEMO_GGML_Q4_0
         : w == DEMO_W_Q4_K ? DEMO_GGML_Q4_K : w == DEMO_W_Q5_K ? DEMO_GGML_Q5_K : DEMO_GGML_Q6_K;
}

/* Weights n x k in form wf: the stored bytes and the floats they hold
 * (the block forms quantized by quant.c and decoded by it, as ggml does:
 * the device must give the same floats). */
static void *make_weights(demo_wfmt wf, int32_t n, int32_t k, float *exact) {
  const size_t count = (size_t)n * (size_t)k;
  if (demo_wfmt_untiled(wf) != wf) { /* the row-major form's, tiled (linear.h's formula) */
    void *rows = make_weights(demo_wfmt_untiled(wf), n, k, exact), *w = malloc(demo_wfmt_bytes(wf, n, k));
    if (demo_wfmt_tile(wf, rows, w, n, k)) {
      printf("not ok - demo_wfmt_tile %s %d x %d refused\n", demo_wfmt_name(wf), (int)n, (int)k);
      exit(1);
    }
    free(rows);
    return w;
  }
  void *w = malloc(demo_wfmt_row_bytes(wf, k) * (size_t)n);
  for (size_t i = 0; i < count; i++) exact[i] = (float)rng_uniform(-1, 1);
  if (wf >= DEMO_W_Q8_0) {
    if (demo_quant_quantize(ggml_of(wf), exact, w, count) != CLPA_OK ||
        demo_quant_dequantize(ggml_of(wf), w, exact, count) != CLPA_OK) {
      printf("not ok - quant.c: %s\n", demo_last_error());
      exit(1);
    }
  } else if (wf == DEMO_W_F32) {
    memcpy(w, exact, count * 4);
  } else if (wf == DEMO_W_F16) {
    clpa_dtype_encode(CLPA_DTYPE_F16, exact, w, count, 1.0f);
    clpa_dtype_decode(CLPA_DTYPE_F16, w, exact, count, 1.0f);
  } else {
    uint16_t *b = w;
    for (size_t i = 0; i < count; i++) b[i] = bf16_of(exact[i]), exact[i] = f32_of_bf16(b[i]);
  }
  return w;
}

/* The exact dot of an activation row a and a weight row w (k each), and in
 * *bound the file's bound on a device's f32 sum of it: k u sum |a w|, plus
 * v sum |a w| + 2^-25 (sum |w| + 2 sum |a|) where the activations are
 * rounded to 16 bits (v, the header) */
static double ref_dot(const float *a, const float *w, int32_t k, double v, double *bound) {
  double dot = 0, mag = 0, wmag = 0, amag = 0;
  for (int32_t i = 0; i < k; i++) {
    const double p = (double)a[i] * w[i];
    dot += p, mag += fabs(p), wmag += fabs(w[i]), amag += fabs(a[i]);
  }
  *bound = (double)k * 0x1p-24 * mag + (v ? v * mag + 0x1p-25 * (wmag + 2 * amag) : 0);
  return dot;
}

/* v of ref_dot for the 16-bit tensor-core kernels (the tiled GEMM and gemv), which round the
 * activations to the weights' type (f16 for block forms, whose weights they may round to f16
 * too): none of the activations' where they come in as f16 already (half). */
static double rounding_16(demo_wfmt dt, int half) {
  const demo_wfmt base = demo_wfmt_untiled(dt);
  if (base == DEMO_W_F16 || base == DEMO_W_BF16) return half ? 0 : base == DEMO_W_F16 ? 0x1p-11 : 0x1p-8;
  return half ? 0x1p-11 : 0x1p-11 + 0x1p-11 + 0x1p-22;
}

/* half: A goes in as f16 (demo_linear_run_f16), the reference taking it rounded */
static int run_case(demo_linear *l, demo_linear_engine e, demo_wfmt dt, int32_t rows, int32_t n,
                    int32_t k, int accumulate, int half) {
  const double v = e == DEMO_LINEAR_MMA && dt >= DEMO_W_Q8_0 ? 0x1p-11 /* blocks rounded to tf32 */
                   : e != DEMO_LINEAR_GEMM && e != DEMO_LINEAR_GEMV ? 0
                                                                    : rounding_16(dt, half);
  const size_t an = (size_t)rows * k, cn = (size_t)rows * n, wn = (size_t)n * k;
  float *a = malloc(sizeof(float) * (an ? an : 1)), *wf = malloc(sizeof(float) * wn);
  float *c0 = malloc(sizeof(float) * (cn ? cn : 1)), *got = malloc(sizeof(float) * (cn ? cn : 1));
  uint16_t *ah = malloc(2 * (an ? an : 1));
  for (size_t i = 0; i < an; i++) a[i] = (float)rng_uniform(-2, 2);
  if (half) { /* the activations as f16, and the floats they hold */
    clpa_dtype_encode(CLPA_DTYPE_F16, a, ah, an, 1.0f);
    clpa_dtype_decode(CLPA_DTYPE_F16, ah, a, an, 1.0f);
  }
  for (size_t i = 0; i < cn; i++) c0[i] = (float)rng_uniform(-4, 4);
  void *w = make_weights(dt, n, k, wf);
  cl_mem A = half ? test_buffer(ctx, ah, 2 * an) : test_buffer(ctx, a, sizeof(float) * an), W = test_buffer(ctx, w, demo_wfmt_bytes(dt, n, k));
  cl_mem C = accumulate ? test_buffer(ctx, c0, sizeof(float) * cn) : test_buffer(ctx, NULL, sizeof(float) * cn);
  if (!accumulate) test_poison(ctx, C, sizeof(float) * cn);
  const clpa_status st = half ? demo_linear_run_f16(l, e, dt, A, W, C, rows, n, k, accumulate, NULL)
                              : demo_linear_run(l, e, dt, A, W, C, rows, n, k, accumulate, NULL);
  int good = ok(st == CLPA_OK, "%s, %s weights, %s%d x %d x %d%s: %s", demo_linear_engine_name(e),
                demo_wfmt_name(dt), half ? "f16 activations, " : "", (int)rows, (int)n, (int)k,
                accumulate ? ", accumulating" : "",
                st == CLPA_OK ? "ran" : demo_last_error());
  test_read(ctx, C, got, sizeof(float) * cn);
  double worst = 0;
  size_t at = 0;
  for (int32_t r = 0; r < rows; r++)
    for (int32_t j = 0; j < n; j++) {
      double sum_bound;
      const double dot = ref_dot(a + (size_t)r * k, wf + (size_t)j * k, k, v, &sum_bound);
      const size_t o = (size_t)r * n + j;
      const double want = accumulate ? c0[o] + dot : dot;
      const double bound = sum_bound + (accumulate ? 0x1p-24 * fabs(want) : 0) + 1e-30;
      const double ratio = isfinite(got[o]) ? fabs(got[o] - want) / bound : INFINITY;
      if (!(ratio <= worst)) worst = ratio, at = o;
    }
  good &= ok(worst <= 1.0, "  within k u sum|a w|%s (worst %.3g of it)",
             v ? " + the rounding to 16 bits" : "", worst);
  if (worst > 1.0) diag("worst element row %zu col %zu: got %.9g", at / (size_t)n, at % (size_t)n, got[at]);
  clReleaseMemObject(A), clReleaseMemObject(W), clReleaseMemObject(C);
  free(a), free(ah), free(wf), free(c0), free(got), free(w);
  return good;
}

/* SwiGLU's activations from gemv's epilogue (demo_linear_run_swiglu_out):
 * act [rows, n / 2], column 8 t + j = silu(C col 16 t + j) * C col 16 t + 8 + j
 * of C = A . W^T. Each C's error bound b as run_case's (the activations
 * rounded to the weights' type, or f16 in where half_in); act's then
 * 1.1 |up| b_gate + |silu(gate)| b_up (|silu'| <= 1.1), plus its rounding to
 * f16 (2^-11 |act|, half_out) and 2^-20 |act| for the device's exp. */
static void run_swiglu_case(demo_linear *l, demo_linear_engine e, demo_wfmt dt, int32_t rows,
                            int32_t n, int32_t k, int half_in, int half_out) {
  const double v = rounding_16(dt, half_in);
  const size_t an = (size_t)rows * k, on = (size_t)rows * (n / 2), wn = (size_t)n * k;
  float *a = malloc(sizeof(float) * an), *wf = malloc(sizeof(float) * wn);
  float *got = malloc(sizeof(float) * on);
  uint16_t *ah = malloc(2 * an), *gh = malloc(2 * on);
  if (!a || !wf || !got || !ah || !gh || !an) BAIL_OUT("out of memory");
  for (size_t i = 0; i < an; i++) a[i] = (float)rng_uniform(-2, 2);
  if (half_in) {
    clpa_dtype_encode(CLPA_DTYPE_F16, a, ah, an, 1.0f);
    clpa_dtype_decode(CLPA_DTYPE_F16, ah, a, an, 1.0f);
  }
  void *w = make_weights(dt, n, k, wf);
  cl_mem A = half_in ? test_buffer(ctx, ah, 2 * an) : test_buffer(ctx, a, sizeof(float) * an);
  cl_mem W = test_buffer(ctx, w, demo_wfmt_bytes(dt, n, k));
  cl_mem O = test_buffer(ctx, NULL, (half_out ? 2 : 4) * on);
  test_poison(ctx, O, (half_out ? 2 : 4) * on);
  const clpa_status st = demo_linear_run_swiglu_out(l, e, dt, A, half_in, W, O, half_out, rows, n, k, NULL);
  int good = ok(st == CLPA_OK, "%s, %s weights, %s in, SwiGLU's activations out as %s, %d x %d x %d: %s",
                demo_linear_engine_name(e), demo_wfmt_name(dt), half_in ? "f16" : "f32",
                half_out ? "f16" : "f32", (int)rows, (int)n, (int)k,
                st == CLPA_OK ? "ran" : demo_last_error());
  if (half_out) {
    test_read(ctx, O, gh, 2 * on);
    clpa_dtype_decode(CLPA_DTYPE_F16, gh, got, on, 1.0f);
  } else {
    test_read(ctx, O, got, sizeof(float) * on);
  }
  double worst = 0;
  for (int32_t r = 0; r < rows; r++)
    for (int32_t j = 0; j < n / 2; j++) {
      double dot[2], bound[2];
      for (int h = 0; h < 2; h++) { /* the gate's column, then the up's */
        const int32_t col = 16 * (j / 8) + j % 8 + 8 * h;
        dot[h] = ref_dot(a + (size_t)r * k, wf + (size_t)col * k, k, v, &bound[h]);
      }
      const double sg = dot[0] / (1 + exp(-dot[0])), want = sg * dot[1];
      const double b = 1.1 * fabs(dot[1]) * bound[0] + fabs(sg) * bound[1] +
                       ((half_out ? 0x1p-11 : 0) + 0x1p-20) * fabs(want) + 1e-30;
      const double g = got[(size_t)r * (n / 2) + j];
      const double ratio = isfinite(g) ? fabs(g - want) / b : INFINITY;
      if (!(ratio <= worst)) worst = ratio;
    }
  good &= ok(worst <= 1.0, "  within the bound (worst %.3g of it)", worst);
  (void)good;
  clReleaseMemObject(A), clReleaseMemObject(W), clReleaseMemObject(O);
  free(a), free(wf), free(got), free(ah), free(gh), free(w);
}

/* RoPE and the cache write from gemv's epilogue (demo_linear_run_qkv_rope):
 * C = A . W^T with heads query heads, then kvh key and kvh value heads of hd
 * columns; each pair (2j, 2j + 1) of a query head rotated by cs[pos[row]][j]
 * into qkv, of a key head rotated and of a value head copied into the row's
 * slot of the caches, in a split-key layout of blocks of bs_tok tokens (x 4).
 * Every row has its own slot, or one outside [0, nslots) (not written, and
 * the caches have a block past nslots to show it). The
 * rotation's bound from each C's (run_case's): |c| b0 + |s| b1 + 2^-22 (|x0
 * c| + |x1 s|) for f32's products and sum, plus 2^-11 |y| into an f16 cache.
 * Nothing else is written: qkv's key and value columns and every cache byte
 * not a row's stay poisoned. */
static void run_rope_case(demo_linear *l, demo_wfmt dt, int32_t rows, int32_t heads, int32_t kvh,
                          int32_t hd, int32_t k, int half_in, int f16) {
  const double v = rounding_16(dt, half_in);
  const int32_t n = (heads + 2 * kvh) * hd, B = 4, x = 4, npos = 40;
  const int32_t nblocks = rows / B + 2, nslots = nblocks * B;
  const size_t an = (size_t)rows * k, cn = (size_t)rows * n, wn = (size_t)n * k, es = f16 ? 2 : 4;
  /* the caches hold a block more than nslots reach: a write past nslots lands there */
  const size_t hs = (size_t)hd * B, bs = (size_t)kvh * hs, cache_n = (size_t)(nblocks + 1) * bs;
  float *a = malloc(sizeof(float) * an), *wf = malloc(sizeof(float) * wn),
        *got = malloc(sizeof(float) * cn);
  float *cs = malloc(sizeof(float) * 2 * (size_t)npos * (size_t)(hd / 2));
  uint16_t *ah = malloc(2 * an);
  unsigned char *kb = malloc(cache_n * es), *vb = malloc(cache_n * es);
  unsigned char *wrote = calloc(2 * cache_n, 1); /* key then value elements written */
  int32_t *pos = malloc(sizeof(int32_t) * (size_t)rows),
          *perm = malloc(sizeof(int32_t) * (size_t)nslots);
  int64_t *slots = malloc(sizeof(int64_t) * (size_t)rows);
  if (!a || !wf || !got || !cs || !ah || !kb || !vb || !wrote || !pos || !perm || !slots)
    BAIL_OUT("out of memory");
  for (size_t i = 0; i < an; i++)
    a[i] = (float)rng_uniform(-2, 2);
  if (half_in) {
    clpa_dtype_encode(CLPA_DTYPE_F16, a, ah, an, 1.0f);
    clpa_dtype_decode(CLPA_DTYPE_F16, ah, a, an, 1.0f);
  }
  for (int32_t i = 0; i < npos * (hd / 2); i++) {
    const double t = rng_uniform(-3.2, 3.2);
    cs[2 * i] = (float)cos(t), cs[2 * i + 1] = (float)sin(t);
  }
  for (int32_t i = 0; i < nslots; i++)
    perm[i] = i;
  for (int32_t i = nslots - 1; i > 0; i--) {
    const int32_t j = (int32_t)rng_below((uint32_t)i + 1), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  for (int32_t r = 0; r < rows; r++) {
    pos[r] = (int32_t)rng_below((uint32_t)npos);
    /* some rows skipped: slot -1, nslots or past it */
    slots[r] = r % 5 != 3 ? perm[r] : r % 3 == 0 ? -1 : r % 3 == 1 ? nslots : (int64_t)nslots + r;
  }
  void *w = make_weights(dt, n, k, wf);
  cl_mem A = half_in ? test_buffer(ctx, ah, 2 * an) : test_buffer(ctx, a, sizeof(float) * an);
  cl_mem W = test_buffer(ctx, w, demo_wfmt_bytes(dt, n, k));
  cl_mem C = test_buffer(ctx, NULL, sizeof(float) * cn), KC = test_buffer(ctx, NULL, cache_n * es);
  cl_mem VC = test_buffer(ctx, NULL, cache_n * es);
  test_poison(ctx, C, sizeof(float) * cn), test_poison(ctx, KC, cache_n * es),
      test_poison(ctx, VC, cache_n * es);
  demo_qkv_rope rp = {0};
  rp.pos = test_buffer(ctx, pos, sizeof(int32_t) * (size_t)rows);
  rp.cs = test_buffer(ctx, cs, sizeof(float) * 2 * (size_t)npos * (size_t)(hd / 2));
  rp.slots = test_buffer(ctx, slots, sizeof(int64_t) * (size_t)rows);
  rp.kc = KC, rp.vc = VC, rp.hd = hd, rp.heads = heads, rp.kv_heads = kvh, rp.B = B, rp.f16 = f16;
  rp.x = x, rp.nslots = nslots, rp.bs = bs, rp.hs = hs, rp.kdh = (cl_ulong)x * B,
  rp.kts = (cl_ulong)x;
  rp.vds = (cl_ulong)B, rp.vts = 1;
  const clpa_status st =
      demo_linear_run_qkv_rope(l, DEMO_LINEAR_GEMV, dt, A, half_in, W, C, rows, n, k, &rp, NULL);
  int good = ok(
      st == CLPA_OK,
      "gemv, %s weights, %s in, RoPE and %s cache write out, %d rows, %d/%d heads of %d, k %d: %s",
      demo_wfmt_name(dt), half_in ? "f16" : "f32", f16 ? "an f16" : "an f32", (int)rows, (int)heads,
      (int)kvh, (int)hd, (int)k, st == CLPA_OK ? "ran" : demo_last_error());
  test_read(ctx, C, got, sizeof(float) * cn), test_read(ctx, KC, kb, cache_n * es),
      test_read(ctx, VC, vb, cache_n * es);
  double worst = 0;
  int stray = 0, kept = 1;
  for (int32_t r = 0; r < rows; r++)
    for (int32_t col = 0; col < n; col += 2) {
      const int32_t h = col / hd, j = col % hd / 2;
      double x01[2], b01[2];
      for (int e = 0; e < 2; e++)
        x01[e] = ref_dot(a + (size_t)r * k, wf + (size_t)(col + e) * k, k, v, &b01[e]);
      double y[2] = {x01[0], x01[1]}, yb[2] = {b01[0], b01[1]};
      if (h < heads + kvh) {
        const double c = cs[2 * ((size_t)pos[r] * (hd / 2) + j)],
                     s = cs[2 * ((size_t)pos[r] * (hd / 2) + j) + 1];
        y[0] = x01[0] * c - x01[1] * s, y[1] = x01[0] * s + x01[1] * c;
        const double rb =
            0x1p-22 * (fabs(x01[0] * c) + fabs(x01[1] * s) + fabs(x01[0] * s) + fabs(x01[1] * c));
        yb[0] = fabs(c) * b01[0] + fabs(s) * b01[1] + rb,
        yb[1] = fabs(s) * b01[0] + fabs(c) * b01[1] + rb;
      }
      for (int e = 0; e < 2; e++) {
        double g;
        if (h < heads) {
          g = got[(size_t)r * n + col + e];
        } else {
          kept &= isnan(got[(size_t)r * n + col + e]); /* key and value columns: not written */
          if (slots[r] < 0 || slots[r] >= nslots)
            continue;
          const int key = h < heads + kvh;
          const int32_t kv = h - heads - (key ? 0 : kvh), d = 2 * j + e;
          const size_t blk = (size_t)(slots[r] / B), o = (size_t)(slots[r] % B);
          const size_t at = key ? blk * bs + kv * hs + (size_t)(d / x) * x * B + o * x + d % x
                                : blk * bs + kv * hs + (size_t)d * B + o;
          wrote[(key ? 0 : cache_n) + at] = 1;
          const unsigned char *src = (key ? kb : vb) + at * es;
          if (f16) {
            uint16_t hv;
            memcpy(&hv, src, 2);
            float fv;
            clpa_dtype_decode(CLPA_DTYPE_F16, &hv, &fv, 1, 1.0f);
            g = fv;
            yb[e] += 0x1p-11 * (fabs(y[e]) + yb[e]) + 0x1p-25; /* its rounding, subnormals too */
          } else {
            float fv;
            memcpy(&fv, src, 4);
            g = fv;
          }
        }
        const double ratio = isfinite(g) ? fabs(g - y[e]) / (yb[e] + 1e-30) : INFINITY;
        if (!(ratio <= worst))
          worst = ratio;
      }
    }
  for (size_t i = 0; i < 2 * cache_n; i++)
    if (!wrote[i]) {
      const unsigned char *p = (i < cache_n ? kb + i * es : vb + (i - cache_n) * es);
      for (size_t b = 0; b < es; b++)
        stray += p[b] != 0xFF;
    }
  good &= ok(worst <= 1.0 && kept && !stray,
             "  within the bound (worst %.3g of it); qkv's key and value columns kept: %s; cache"
             " bytes written outside the rows' slots: %d",
             worst, kept ? "yes" : "no", stray);
  (void)good;
  clReleaseMemObject(A), clReleaseMemObject(W), clReleaseMemObject(C), clReleaseMemObject(KC);
  clReleaseMemObject(VC), clReleaseMemObject(rp.pos), clReleaseMemObject(rp.cs),
      clReleaseMemObject(rp.slots);
  free(a), free(wf), free(got), free(cs), free(ah), free(kb), free(vb), free(wrote), free(pos);
  free(perm), free(slots), free(w);
}

/* demo_linear_run refuses the call (CLPA_ERR_INVALID_ARG, a message
 * holding needle where it is not NULL) before touching the buffers. */
static void refused(demo_linear *l, demo_linear_engine e, demo_wfmt w, int32_t rows, int32_t n,
                    int32_t k, const char *needle, const char *what) {
  cl_mem b = test_buffer(ctx, NULL, 4096);
  const clpa_status st = demo_linear_run(l, e, w, b, b, b, rows, n, k, 0, NULL);
  ok(st == CLPA_ERR_INVALID_ARG && (!needle || strstr(demo_last_error(), needle)), "%s refused: %s",
     what, demo_last_error());
  clReleaseMemObject(b);
}

/* A forced table row: its name and streaming kernel's shape (stream_max_rows, lanes, groups,
 * nc), every other field as the "default" row's (no gemv, mma or GEMM rows); a case sets what
 * it tests after. */
static demo_linear_tuning forced(const char *name, int32_t max_rows, int32_t lanes,
                                 int32_t groups, int32_t nc) {
  const demo_linear_tuning t = {.match = name, .stream_max_rows = max_rows, .lanes = lanes,
                                .groups = groups, .nc = nc, .mwarps = 4, .mma_ct = 2,
                                .gemm_bk = 32, .gemm_f16a = 1, .gemv_warps = 4, .gemv_unroll = 2,
                                .gemv_ct = 1, .gemv_nt = 4};
  return t;
}

static demo_linear *create(const demo_linear_tuning *t) {
  demo_linear *l;
  if (demo_linear_create(clpa_context_cl_context(ctx), clpa_context_cl_device(ctx),
                         clpa_context_cl_queue(ctx), t, &l) != CLPA_OK) {
    printf("not ok - demo_linear_create: %s\n", demo_last_error());
    exit(1);
  }
  return l;
}

/* The streaming kernel in shape t (NULL: the table's) over every dtype and row count. */
static const demo_wfmt dts[] = {DEMO_W_F32, DEMO_W_F16, DEMO_W_BF16};

/* ggml's five block forms through engine e of l: 1 to max_rows rows, 20 to 20 + max_n - 1
 * columns, k 1 to kmax of the form's blocks (32 or 256 elements), accumulating for every
 * other form. */
static const demo_wfmt quants[] = {DEMO_W_Q8_0, DEMO_W_Q4_0, DEMO_W_Q4_K, DEMO_W_Q5_K, DEMO_W_Q6_K};
static void block_forms(demo_linear *l, demo_linear_engine e, uint32_t max_rows, uint32_t max_n,
                        uint32_t kmax) {
  for (size_t q = 0; q < 5; q++) {
    const int32_t kq = (quants[q] <= DEMO_W_Q4_0 ? 32 : 256) * (1 + (int32_t)rng_below(kmax));
    /* gemv takes f16 activations too (demo_linear_takes_f16): every other form with them */
    run_case(l, e, quants[q], 1 + (int32_t)rng_below(max_rows), 20 + (int32_t)rng_below(max_n), kq,
             (int)(q % 2), e == DEMO_LINEAR_GEMV && q % 2 == 0);
  }
}

/* The tiled GEMM over block-form weights dt through an f16 copy (lq, gemm_dq_rows) and with the
 * blocks decoded in its loads (lk, the same shape otherwise): the same bits, f32 activations. */
static void same_bits_dq(demo_linear *lq, demo_linear *lk, demo_wfmt dt, int32_t rows, int32_t n,
                         int32_t k) {
  const size_t an = (size_t)rows * k, cn = (size_t)rows * n;
  float *a = malloc(sizeof(float) * an), *wf = malloc(sizeof(float) * n * k);
  float *got[2] = {malloc(sizeof(float) * cn), malloc(sizeof(float) * cn)};
  for (size_t i = 0; i < an; i++) a[i] = (float)rng_uniform(-2, 2);
  void *w = make_weights(dt, n, k, wf);
  cl_mem A = test_buffer(ctx, a, sizeof(float) * an), W = test_buffer(ctx, w, demo_wfmt_bytes(dt, n, k));
  cl_mem C = test_buffer(ctx, NULL, sizeof(float) * cn);
  clpa_status st[2];
  for (int i = 0; i < 2; i++) {
    test_poison(ctx, C, sizeof(float) * cn);
    st[i] = demo_linear_run(i ? lk : lq, DEMO_LINEAR_GEMM, dt, A, W, C, rows, n, k, 0, NULL);
    test_read(ctx, C, got[i], sizeof(float) * cn);
  }
  ok(st[0] == CLPA_OK && st[1] == CLPA_OK && memcmp(got[0], got[1], sizeof(float) * cn) == 0,
     "gemm, %s weights, %d x %d x %d: through an f16 copy the same bits as decoded in its loads",
     demo_wfmt_name(dt), (int)rows, (int)n, (int)k);
  clReleaseMemObject(A), clReleaseMemObject(W), clReleaseMemObject(C);
  free(a), free(wf), free(got[0]), free(got[1]), free(w);
}

/* Blocks of random bytes decoded on the device, bit for bit as quant.c (ggml) decodes them:
 * f16 scales of both signs, every 8th subnormal, and every scale byte random. quant.c's encoder
 * never writes a negative d or a negative Q6_K scale, but ggml's does (quantize_row_q6_K_ref:
 * d = 1 / iscale, iscale = -128 / max_scale; the sub-block with the largest scale gets -128). */
static void random_blocks_decoded(demo_linear *l) {
  const int32_t n = 5, k = 512;
  for (size_t q = 0; q < 5; q++) {
    const uint32_t t = ggml_of(quants[q]), bb = demo_quant_block_bytes(t);
    const int scales = t == DEMO_GGML_Q4_K || t == DEMO_GGML_Q5_K ? 2 : 1; /* d, dmin */
    const size_t bytes = demo_wfmt_row_bytes(quants[q], k) * n, count = (size_t)n * k;
    uint8_t *blocks = malloc(bytes);
    float *want = malloc(sizeof(float) * count), *got = malloc(sizeof(float) * count);
    for (size_t i = 0; i < bytes; i++) blocks[i] = (uint8_t)rng_next();
    for (size_t b = 0; b < bytes / bb; b++) {
      uint8_t *p = blocks + b * bb + (t == DEMO_GGML_Q6_K ? 208 : 0);
      for (int h = 0; h < scales; h++) {
        const uint32_t v = (b % 8 == 7 ? rng_below(0x400) : rng_below(0x7c00)) | rng_below(2) << 15;
        p[2 * h] = (uint8_t)v, p[2 * h + 1] = (uint8_t)(v >> 8);
      }
    }
    const clpa_status hs = demo_quant_dequantize(t, blocks, want, count);
    cl_mem W = test_buffer(ctx, blocks, bytes), out = test_buffer(ctx, NULL, sizeof(float) * count);
    test_poison(ctx, out, sizeof(float) * count);
    const clpa_status st = demo_linear_dequantize(l, quants[q], W, out, n, k);
    test_read(ctx, out, got, sizeof(float) * count);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < count; i++)
      if (memcmp(&got[i], &want[i], 4) && !bad++) first = i;
    if (bad)
      diag("%s: %zu elements differ, the first [%zu]: %a on the device, %a from quant.c",
           demo_wfmt_name(quants[q]), bad, first, (double)got[first], (double)want[first]);
    ok(hs == CLPA_OK && st == CLPA_OK && !bad,
       "%s: random blocks (scales of both signs, subnormal ones) decoded on the device bit for bit"
       " as quant.c (ggml)", demo_wfmt_name(quants[q]));
    clReleaseMemObject(W), clReleaseMemObject(out);
    free(blocks), free(want), free(got);
  }
}

static void stream_grid(const demo_linear_tuning *t) {
  demo_linear *l = create(t);
  t = demo_linear_tuning_of(l);
  diag("streaming kernel, %s: lanes %d, groups %d, nc %d, stream_sums %d", t->match,
       (int)t->lanes, (int)t->groups, (int)t->nc, (int)t->stream_sums);
  const int32_t rows[] = {1, 3, 4, 5, 16, 17, 40};
  for (size_t d = 0; d < 3; d++)
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
      const int32_t n = 37 + (int32_t)rng_below(90), k = 8 * (1 + (int32_t)rng_below(80));
      run_case(l, DEMO_LINEAR_STREAM, dts[d], rows[r], n, k, (int)(r % 2), 0);
    }
  demo_linear_destroy(l);
}

int main(void) {
  rng_seed_from_env();
  ctx = test_context(0);
  const demo_linear_tuning gpu = forced("forced: lanes split k", 64, 16, 8, 4);
  const demo_linear_tuning odd = forced("forced: odd shape", 64, 4, 3, 3);
  /* one lane a column group with a cap on its sums: 3 columns and 12 sums take row blocks of 1
   * and 4 rows; 2 columns and 16 sums blocks of 1, 4 and 8, and Q4_K and Q5_K 16 with 1 column;
   * several lanes 1, 4 and 16 rows in the table's columns, whatever the form */
  demo_linear_tuning capped = forced("forced: one lane, 3 columns, 12 sums", 64, 1, 5, 3);
  capped.stream_sums = 12;
  demo_linear_tuning capped8 = forced("forced: one lane, 2 columns, 16 sums", 64, 1, 7, 2);
  capped8.stream_sums = 16;
  const int32_t call_rows[] = {1, 2, 4, 5, 8, 9, 16, 40};
  const int32_t want12[] = {1, 4, 4, 4, 4, 4, 4, 4}, want16[] = {1, 4, 4, 8, 8, 8, 8, 8};
  const int32_t want_wide[] = {1, 4, 4, 8, 8, 16, 16, 16};
  const int32_t want_lanes[] = {1, 4, 4, 16, 16, 16, 16, 16};
  int rule_ok = 1;
  for (int i = 0; i < 8; i++) {
    int32_t b12, n12, b16, n16, bq4, nq4, bq5, nq5, bo, no, bg, ng;
    demo_linear_stream_shape(&capped, DEMO_W_F16, call_rows[i], &b12, &n12);
    demo_linear_stream_shape(&capped8, DEMO_W_Q8_0, call_rows[i], &b16, &n16);
    demo_linear_stream_shape(&capped8, DEMO_W_Q4_K, call_rows[i], &bq4, &nq4);
    demo_linear_stream_shape(&capped8, DEMO_W_Q5_K, call_rows[i], &bq5, &nq5);
    demo_linear_stream_shape(&odd, DEMO_W_F32, call_rows[i], &bo, &no);
    demo_linear_stream_shape(&gpu, DEMO_W_Q4_K, call_rows[i], &bg, &ng);
    rule_ok &= b12 == want12[i] && n12 == 3 && b16 == want16[i] && n16 == 2 &&
               bq4 == want_wide[i] && nq4 == (bq4 == 16 ? 1 : 2) && bq5 == bq4 && nq5 == nq4 &&
               bo == want_lanes[i] && no == odd.nc && bg == want_lanes[i] && ng == gpu.nc;
  }
  ok(rule_ok, "stream_sums: one lane's row blocks hold at most stream_sums / nc rows (8 among"
     " them), Q4_K and Q5_K up to 16 with fewer columns; several lanes take 1, 4 and 16 rows");
  stream_grid(NULL);
  stream_grid(&gpu);
  stream_grid(&odd);
  stream_grid(&capped);
  stream_grid(&capped8);
  demo_linear *l = create(NULL);
  clpa_device_info info;
  clpa_context_device_info(ctx, &info);
  const int nvidia = strstr(info.vendor, "NVIDIA") != NULL;
  /* the tensor-core kernel (emulated off NVIDIA): every row block, several
   * blocks, k in chunks of 32, partial stages; in the table's shape and in
   * an odd one that splits k across work-groups */
  demo_linear_tuning split = forced("forced: split k", 0, 16, 8, 4);
  split.mma_min_rows = 1, split.mma_max_rows = 256, split.mwarps = 2, split.mma_ct = 3,
      split.mma_fill = 64;
  const demo_linear_tuning *mshapes[] = {NULL, &split};
  for (size_t s = 0; s < 2; s++) {
    demo_linear *lm = create(mshapes[s]);
    const demo_linear_tuning *tu = demo_linear_tuning_of(lm);
    diag("tensor-core kernel, %s: mwarps %d, ct %d, fill %d", tu->match, (int)tu->mwarps,
         (int)tu->mma_ct, (int)tu->mma_fill);
    const int32_t rows[] = {1, 7, 8, 9, 16, 31, 64, 65, 130};
    int32_t most = 1;
    for (size_t d = 1; d < 3; d++)
      for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        /* the first a shape that the forced one splits (a long k over few columns: random
         * ones alone split in none of 18 now and then) */
        const int32_t n = r == 0 ? 20 : 20 + (int32_t)rng_below(200);
        const int32_t k = r == 0 ? 32 * 40 : 32 * (1 + (int32_t)rng_below(40));
        const int32_t sp = demo_linear_mma_split(lm, rows[r], n, k);
        most = sp > most ? sp : most;
        if (sp > 1) diag("  k %d in %d splits", (int)k, (int)sp);
        run_case(lm, DEMO_LINEAR_MMA, dts[d], rows[r], n, k, (int)(r % 2), 0);
      }
    if (s == 1) {
      ok(most > 1, "the forced shape split k (up to %d splits)", (int)most);
      ok(demo_linear_mma_split(lm, 1, 20, 4096) == 8 && demo_linear_mma_split(lm, 1, 20, 1024) == 2 &&
             demo_linear_mma_split(lm, 1, 20, 96) == 1,
         "the split: doubled while warps < fill a CU and each split has two stages of 8 chunks"
         " (1 x 20 x 4096: %d, x 1024: %d, x 96: %d)", (int)demo_linear_mma_split(lm, 1, 20, 4096),
         (int)demo_linear_mma_split(lm, 1, 20, 1024), (int)demo_linear_mma_split(lm, 1, 20, 96));
    }
    demo_linear_destroy(lm);
  }
  refused(l, DEMO_LINEAR_MMA, DEMO_W_F32, 2, 4, 32, "f16, bf16 or block-form", "the tensor-core kernel with f32 weights");
  /* ggml's block forms on the tensor-core kernel (forced): decoded, rounded to tf32; k split
   * across work-groups in the second shape */
  {
    demo_linear_tuning split = forced("forced: split k", 0, 16, 8, 4);
    split.mma_min_rows = 1, split.mma_max_rows = 256, split.mwarps = 2, split.mma_ct = 3,
        split.mma_fill = 64;
    demo_linear *lm = create(&split);
    block_forms(l, DEMO_LINEAR_MMA, 20, 100, 4);
    block_forms(lm, DEMO_LINEAR_MMA, 40, 100, 16);
    demo_linear_destroy(lm);
  }
  /* the tiled GEMM (emulated off NVIDIA): both row tiles (64 and 128 rows
   * a work-group), partial row and column tiles, one stage and several */
  {
    demo_linear_tuning g64 = forced("forced: gemm 64 k a stage, 128 rows", 16, 16, 8, 4);
    g64.gemm_bm = 128, g64.gemm_bk = 64;
    const demo_linear_tuning *gshapes[] = {NULL, &g64};
    const int32_t rows[] = {1, 63, 64, 65, 130, 200};
    for (size_t s = 0; s < 2; s++) {
      demo_linear *lg = create(gshapes[s]);
      diag("tiled GEMM, %s: bm %d, bk %d", demo_linear_tuning_of(lg)->match,
           (int)demo_linear_tuning_of(lg)->gemm_bm, (int)demo_linear_tuning_of(lg)->gemm_bk);
      for (size_t d = 1; d < 3; d++)
        for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
          const int32_t n = 20 + (int32_t)rng_below(300), k = 32 * (1 + (int32_t)rng_below(12));
          diag("  %d rows a work-group, k %d", (int)demo_linear_gemm_rows(lg, rows[r], n), (int)k);
          run_case(lg, DEMO_LINEAR_GEMM, dts[d], rows[r], n, k, (int)(r % 2), 0);
        }
      /* f16 activations by cp.async (emulated off NVIDIA): 3 stages in flight at 64 rows a
       * work-group, 2 at 128; fewer stages of k than that, and many */
      for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        const int32_t n = 20 + (int32_t)rng_below(300), k = 32 * (1 + (int32_t)rng_below(12));
        diag("  f16 activations, %d rows a work-group, k %d", (int)demo_linear_gemm_rows(lg, rows[r], n),
             (int)k);
        run_case(lg, DEMO_LINEAR_GEMM, DEMO_W_F16, rows[r], n, k, (int)(r % 2), 1);
      }
      /* SwiGLU's activations from the epilogue (unsplit: this table and this shape do not split
       * these calls), n over several column tiles, f32 and f16 in and out */
      for (size_t r = 0; r < sizeof rows / sizeof *rows; r += 2) {
        const int32_t n = 16 * (1 + (int32_t)rng_below(24)), k = 32 * (1 + (int32_t)rng_below(12));
        run_swiglu_case(lg, DEMO_LINEAR_GEMM, dts[1 + (r / 2 + s) % 2], rows[r + 1], n, k, 0, (int)(r / 2 % 2));
        run_swiglu_case(lg, DEMO_LINEAR_GEMM, DEMO_W_F16, rows[r], n, k, 1, (int)(r / 2 % 2 == 0));
      }
      demo_linear_destroy(lg);
    }
  }
  /* ggml's block forms on the tiled GEMM: decoded, rounded to f16 */
  {
    demo_linear_tuning g64 = forced("forced: gemm 64 k a stage", 16, 16, 8, 4);
    g64.gemm_bk = 64;
    demo_linear *lg = create(&g64);
    block_forms(lg, DEMO_LINEAR_GEMM, 150, 200, 3);
    /* and through an f16 copy of the weight (gemm_dq_rows, here from 20 rows): the same bits
     * with f32 activations, f16 ones by cp.async, SwiGLU's out */
    demo_linear_tuning gq = forced("forced: gemm 64 k a stage, f16 copy", 16, 16, 8, 4);
    gq.gemm_bk = 64, gq.gemm_dq_rows = 20;
    demo_linear *lq = create(&gq);
    for (size_t q = 0; q < 5; q++) {
      const int32_t kq = (quants[q] <= DEMO_W_Q4_0 ? 32 : 256) * (1 + (int32_t)rng_below(3));
      const int32_t rows = 20 + (int32_t)rng_below(140), n = 20 + (int32_t)rng_below(200);
      same_bits_dq(lq, lg, quants[q], rows, n, kq);
      run_case(lq, DEMO_LINEAR_GEMM, quants[q], 20 + (int32_t)rng_below(140), n, kq, (int)(q % 2), 1);
    }
    run_swiglu_case(lq, DEMO_LINEAR_GEMM, DEMO_W_Q4_K, 40, 64, 512, 1, 1);
    run_swiglu_case(lq, DEMO_LINEAR_GEMM, DEMO_W_Q8_0, 25, 48, 64, 0, 0);
    ok(demo_linear_takes_f16(lq, DEMO_LINEAR_GEMM, 20, 256, DEMO_W_Q4_K) &&
           !demo_linear_takes_f16(lq, DEMO_LINEAR_GEMM, 19, 256, DEMO_W_Q4_K) &&
           !demo_linear_takes_f16(lg, DEMO_LINEAR_GEMM, 20, 256, DEMO_W_Q4_K),
       "f16 activations for block forms on the GEMM only through the f16 copy (from gemm_dq_rows)");
    demo_linear_destroy(lq);
    demo_linear_destroy(lg);
  }
  /* the tiled GEMM with k split across work-groups (gemm_fill 16: these small calls split): the
   * rule, then every form through it, 32 and 64 k a stage, f16 activations, one row block and
   * several, one call after another (on NVIDIA the tiles' counters are back at zero) */
  {
    demo_linear_tuning gs = forced("forced: gemm split k", 16, 16, 8, 4);
    gs.gemm_fill = 16;
    demo_linear_tuning gs64 = forced("forced: gemm split k, 64 k a stage", 16, 16, 8, 4);
    gs64.gemm_bk = 64, gs64.gemm_fill = 16;
    demo_linear *la = create(&gs), *lb = create(&gs64);
    ok(demo_linear_gemm_split(la, 1, 20, 2048, 0) == 8 && demo_linear_gemm_split(la, 1, 20, 512, 0) == 2 &&
           demo_linear_gemm_split(la, 1, 20, 480, 0) == 1 && demo_linear_gemm_split(lb, 1, 20, 2048, 0) == 4 &&
           demo_linear_gemm_split(lb, 1, 20, 2048, 1) == 8 && demo_linear_gemm_split(l, 1, 20, 2048, 0) == (nvidia ? 4 : 1),
       "the GEMM's split: doubled while work-groups < gemm_fill a CU, each split 8 stages or more, k"
       " in whole stages (1 x 20 x 2048: %d, 64 k a stage %d, f16 in %d; x 512: %d; x 480: %d; the"
       " table's: %d)", (int)demo_linear_gemm_split(la, 1, 20, 2048, 0),
       (int)demo_linear_gemm_split(lb, 1, 20, 2048, 0), (int)demo_linear_gemm_split(lb, 1, 20, 2048, 1),
       (int)demo_linear_gemm_split(la, 1, 20, 512, 0), (int)demo_linear_gemm_split(la, 1, 20, 480, 0),
       (int)demo_linear_gemm_split(l, 1, 20, 2048, 0));
    const demo_wfmt sf[] = {DEMO_W_F16, DEMO_W_BF16, DEMO_W_F16_TILED, DEMO_W_BF16_TILED};
    const int32_t rows[] = {1, 37, 64, 130};
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
      const int32_t n = 20 + (int32_t)rng_below(150), k = 512 * (1 + (int32_t)rng_below(3));
      diag("  split %d, k %d", (int)demo_linear_gemm_split(la, rows[r], n, k, 0), (int)k);
      run_case(la, DEMO_LINEAR_GEMM, sf[r], rows[r], n, k, (int)(r % 2), 0);
      diag("  64 k a stage: split %d", (int)demo_linear_gemm_split(lb, rows[r], n, k, 0));
      run_case(lb, DEMO_LINEAR_GEMM, sf[3 - r], rows[r], n, k, (int)(r % 2 == 0), 0);
      diag("  f16 activations: split %d", (int)demo_linear_gemm_split(la, rows[r], n, k, 1));
      run_case(la, DEMO_LINEAR_GEMM, DEMO_W_F16, rows[r], n, k, (int)(r % 2), 1);
    }
    block_forms(la, DEMO_LINEAR_GEMM, 70, 100, 4);
    /* SwiGLU's activations from the split's reduce kernel (and unsplit on NVIDIA, where the
     * table's fill does not split), f32 and f16 in and out, f16, bf16 and block forms */
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
      const int32_t n = 16 * (1 + (int32_t)rng_below(12)), k = 512 * (1 + (int32_t)rng_below(2));
      diag("  SwiGLU: split %d, 64 k a stage %d", (int)demo_linear_gemm_split(la, rows[r], n, k, 0),
           (int)demo_linear_gemm_split(lb, rows[r], n, k, 0));
      run_swiglu_case(la, DEMO_LINEAR_GEMM, sf[r], rows[r], n, k, 0, (int)(r % 2));
      run_swiglu_case(lb, DEMO_LINEAR_GEMM, DEMO_W_F16, rows[r], n, k, 1, (int)(r % 2 == 0));
    }
    run_swiglu_case(la, DEMO_LINEAR_GEMM, DEMO_W_Q4_K, 5, 48, 1024, 0, 1);
    run_swiglu_case(l, DEMO_LINEAR_GEMM, DEMO_W_Q8_0, 70, 64, 96, 0, 0);
    demo_linear_destroy(la), demo_linear_destroy(lb);
  }
  /* the few-row kernel (emulated off NVIDIA): every row block (8, 16, 32 rows), several
   * blocks, columns off its tiles of 16, f32 and f16 activations, SwiGLU's out of its epilogue;
   * in the table's shape and in
   * odd ones (3 warps, 3 chunks in flight, up to 2 column tiles: uneven splits of k and
   * chunks loaded twice; 16 warps over fewer chunks than warps, up to 4 column tiles) */
  {
    demo_linear_tuning v3 = forced("forced: gemv 3 warps", 16, 16, 8, 4);
    v3.gemv_max_rows = 64, v3.gemv_warps = 3, v3.gemv_unroll = 3, v3.gemv_ct = 2;
    demo_linear_tuning v16 = forced("forced: gemv 16 warps", 16, 16, 8, 4);
    v16.gemv_max_rows = 64, v16.gemv_warps = 16, v16.gemv_unroll = 1, v16.gemv_ct = 4;
    const demo_linear_tuning *vshapes[] = {NULL, &v3, &v16};
    for (size_t s = 0; s < 3; s++) {
      demo_linear *lv = create(vshapes[s]);
      const demo_linear_tuning *tu = demo_linear_tuning_of(lv);
      diag("few-row kernel, %s: %d warps, %d chunks in flight, up to %d column tiles", tu->match,
           (int)tu->gemv_warps, (int)tu->gemv_unroll, (int)tu->gemv_ct);
      const int32_t rows[] = {1, 5, 8, 9, 16, 17, 32, 40};
      for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        const int32_t n = 20 + (int32_t)rng_below(s ? 400 : 100);
        const int32_t k = 32 * (1 + (int32_t)rng_below(s == 2 ? 12 : 40));
        int32_t ct, kw;
        demo_linear_gemv_shape(lv, rows[r], n, &ct, &kw);
        diag("  %d x %d: %d column tiles, %d warps", (int)rows[r], (int)n, (int)ct, (int)kw);
        run_case(lv, DEMO_LINEAR_GEMV, dts[1 + (r + s) % 2], rows[r], n, k, (int)(r % 2), 0);
        if (r % 2 == 0) run_case(lv, DEMO_LINEAR_GEMV, DEMO_W_F16, rows[r], n, k, (int)(r % 4 == 0), 1);
        /* SwiGLU's activations from the epilogue: n a multiple of 16, f16 or f32 in and out */
        const int32_t n16 = 16 * (1 + n / 16);
        if (r % 2 == 1)
          run_swiglu_case(lv, DEMO_LINEAR_GEMV, dts[1 + (r / 2 + s) % 2], rows[r], n16, k, 0, (int)(r % 4 == 1));
        else if (r % 4 == 2)
          run_swiglu_case(lv, DEMO_LINEAR_GEMV, DEMO_W_F16, rows[r], n16, k, 1, 1);
      }
      if (s == 2) { /* and from ggml's blocks */
        run_swiglu_case(lv, DEMO_LINEAR_GEMV, DEMO_W_Q8_0, 3, 48, 64, 0, 1);
        run_swiglu_case(lv, DEMO_LINEAR_GEMV, DEMO_W_Q4_K, 9, 32, 256, 0, 0);
        run_swiglu_case(lv, DEMO_LINEAR_GEMV, DEMO_W_Q6_K, 16, 48, 512, 1, 1);
      }
      /* RoPE and the cache write from the epilogue: head sizes off and on the tiles of 16,
       * f32 and f16 in and caches, every row block */
      {
        const int32_t rr[] = {1, 6, 16, 17, 33}, hds[] = {16, 8, 32, 12, 64};
        for (size_t i = 0; i < sizeof rr / sizeof *rr; i++)
          run_rope_case(lv, i % 2 ? DEMO_W_F16 : dts[1 + (i / 2 + s) % 2], rr[i],
                        2 + (int32_t)(i % 3), 1 + (int32_t)(i % 2), hds[i],
                        32 * (1 + (int32_t)rng_below(s == 2 ? 6 : 12)), (int)(i % 2),
                        (int)((i + s) % 2));
        if (s == 1) run_rope_case(lv, DEMO_W_Q6_K, 5, 2, 1, 16, 256, 0, 1);
        if (s == 2) run_rope_case(lv, DEMO_W_Q4_K, 11, 2, 1, 32, 512, 1, 1);
      }
      if (s) { /* enough columns for the most tiles on this device: 16 warps a compute unit */
        int32_t ct, kw;
        demo_linear_gemv_shape(lv, 5, 16, &ct, &kw);
        const int32_t wide = 16 * tu->gemv_ct * ((16 * (int32_t)info.compute_units + kw - 1) / kw) + 5;
        demo_linear_gemv_shape(lv, 5, wide, &ct, &kw);
        diag("  5 x %d: %d column tiles, %d warps", (int)wide, (int)ct, (int)kw);
        ok(ct == tu->gemv_ct, "%s: %d columns take the most tiles (%d)", tu->match, (int)wide, (int)ct);
        run_case(lv, DEMO_LINEAR_GEMV, DEMO_W_F16, 5, wide, 64, 1, 0);
      }
      if (s == 1) block_forms(lv, DEMO_LINEAR_GEMV, 20, 400, 3);
      /* Q4_K, Q5_K and Q6_K, whose routes on NVIDIA scale a chunk's products
       * (linear_gemv_kernels.c KSC, KS6): every shape, one to two row tiles, k of one block (16
       * warps: some without chunks) to several, rows of odd blocks (Q6_K: both alignments) */
      for (size_t q = 0; q < 3; q++) {
        const demo_wfmt kf[] = {DEMO_W_Q4_K, DEMO_W_Q5_K, DEMO_W_Q6_K};
        const int32_t kr[] = {1, 11, 16}, kq = 256 * (1 + (int32_t)rng_below(s == 2 ? 1 : 4));
        for (int h = 0; h < 2; h++) /* f32 and f16 activations */
          run_case(lv, DEMO_LINEAR_GEMV, kf[q], kr[(s + q + h) % 3], 20 + (int32_t)rng_below(200),
                   kq, (int)((s + q + h) % 2), h);
      }
      /* the shape rule: at most gemv_ct tiles and 32 KB of sums; fewer tiles only where more
       * would leave fewer than 16 warps a compute unit */
      int good = 1;
      for (int32_t rr = 1; rr <= 40 && good; rr += 3)
        for (int32_t n = 16; n <= 70000 && good; n = n * 3 + 1) {
          int32_t ct, kw;
          demo_linear_gemv_shape(lv, rr, n, &ct, &kw);
          const int32_t nt = rr <= 8 ? 1 : rr <= 16 ? 2 : 4, blocks = (rr + 8 * nt - 1) / (8 * nt);
          int32_t most = tu->gemv_warps; /* the warps: the table's, halved to 32 KB of sums */
          while (most > 1 && most * nt * ct > 64) most /= 2;
          good = ct >= 1 && ct <= tu->gemv_ct && kw == most;
          if (good && ct < tu->gemv_ct) { /* twice the tiles fall short of 16 warps a compute unit */
            int32_t kw2 = tu->gemv_warps;
            while (kw2 > 1 && kw2 * nt * 2 * ct > 64) kw2 /= 2;
            good = (int64_t)blocks * ((n + 32 * ct - 1) / (32 * ct)) * kw2 < 16 * (int64_t)info.compute_units;
          }
          if (!good) diag("%d rows x %d: %d tiles, %d warps", (int)rr, (int)n, (int)ct, (int)kw);
        }
      ok(good, "%s: the shape rule holds over rows 1..40 and n 16..70000", tu->match);
      demo_linear_destroy(lv);
    }
  }
  refused(l, DEMO_LINEAR_GEMV, DEMO_W_F32, 2, 4, 32, "f16, bf16 or block-form", "gemv with f32 weights");
  refused(l, DEMO_LINEAR_GEMV, DEMO_W_F16, 2, 4, 48, "multiple of 32", "gemv with k 48");
  { /* SwiGLU's activations: gemv or the tiled GEMM, n a multiple of 16, f16 in with f16 weights */
    cl_mem bf = test_buffer(ctx, NULL, 4096);
    int refusals = 0;
    const struct { demo_linear_engine e; demo_wfmt w; int32_t n, k; int half_in; } bad[] = {
        {DEMO_LINEAR_STREAM, DEMO_W_F16, 16, 32, 0}, {DEMO_LINEAR_GEMV, DEMO_W_F32, 16, 32, 0},
        {DEMO_LINEAR_GEMV, DEMO_W_F16, 24, 32, 0},   {DEMO_LINEAR_GEMV, DEMO_W_F16, 16, 48, 0},
        {DEMO_LINEAR_GEMV, DEMO_W_BF16, 16, 32, 1}, {DEMO_LINEAR_MMA, DEMO_W_F16, 16, 32, 0},
        {DEMO_LINEAR_GEMM, DEMO_W_F16, 24, 32, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
      refusals += demo_linear_run_swiglu_out(l, bad[i].e, bad[i].w, bf, bad[i].half_in, bf, bf, 0, 2,
                                             bad[i].n, bad[i].k, NULL) == CLPA_ERR_INVALID_ARG &&
                  strstr(demo_last_error(), "gemv or the tiled GEMM") != NULL;
    ok(refusals == 7 && demo_linear_takes_swiglu_out(l, DEMO_LINEAR_GEMV, 2, 32, 64, DEMO_W_BF16) &&
           demo_linear_takes_swiglu_out(l, DEMO_LINEAR_GEMM, 2, 32, 256, DEMO_W_Q4_K),
       "SwiGLU's activations out: the streaming kernel, mma, f32 weights, n 24 (gemv, gemm), k 48 and"
       " f16 in with bf16 weights refused (%d of 7); gemv with bf16 weights and gemm with q4_K take"
       " n 32: %s", refusals, demo_last_error());
    clReleaseMemObject(bf);
  }
  { /* RoPE and the cache write: gemv alone, and r's shape and buffers; nothing written */
    cl_mem bf = test_buffer(ctx, NULL, 4096);
    test_poison(ctx, bf, 4096);
    demo_qkv_rope good = {0};
    good.pos = good.cs = good.slots = good.kc = good.vc = bf;
    good.hd = 8, good.heads = 2, good.kv_heads = 1, good.B = 4, good.x = 4, good.nslots = 8;
    demo_qkv_rope bad[7];
    for (int i = 0; i < 7; i++) bad[i] = good;
    bad[0].hd = 7, bad[1].heads = 3, bad[2].kv_heads = 0, bad[3].cs = NULL, bad[4].vc = NULL;
    bad[5].B = 0, bad[6].nslots = -1;
    int refusals = 0;
    for (int i = 0; i < 7; i++)
      refusals += demo_linear_run_qkv_rope(l, DEMO_LINEAR_GEMV, DEMO_W_F16, bf, 0, bf, bf, 2, 32,
                                           32, &bad[i], NULL) == CLPA_ERR_INVALID_ARG &&
                  strstr(demo_last_error(), "demo_linear_run_qkv_rope: r") != NULL;
    refusals += demo_linear_run_qkv_rope(l, DEMO_LINEAR_GEMV, DEMO_W_F16, bf, 0, bf, bf, 2, 32, 32,
                                         NULL, NULL) == CLPA_ERR_INVALID_ARG;
    const struct { demo_linear_engine e; demo_wfmt w; int32_t k; int half_in; } eng[] = {
        {DEMO_LINEAR_STREAM, DEMO_W_F16, 32, 0}, {DEMO_LINEAR_GEMV, DEMO_W_F32, 32, 0},
        {DEMO_LINEAR_GEMV, DEMO_W_F16, 48, 0}, {DEMO_LINEAR_GEMV, DEMO_W_BF16, 32, 1}};
    for (size_t i = 0; i < sizeof eng / sizeof *eng; i++)
      refusals += demo_linear_run_qkv_rope(l, eng[i].e, eng[i].w, bf, eng[i].half_in, bf, bf, 2, 32,
                                           eng[i].k, &good, NULL) == CLPA_ERR_INVALID_ARG &&
                  strstr(demo_last_error(), "gemv alone") != NULL;
    ok(refusals == 12 && test_untouched(ctx, bf, 4096),
       "RoPE and the cache write: an odd head size, heads not making n, no key heads, no table, no"
       " value cache, no tokens a block, negative slots, no r; the streaming kernel, f32 weights,"
       " k 48, f16 in with bf16 weights: refused (%d of 12), nothing written: %s", refusals,
       demo_last_error());
    clReleaseMemObject(bf);
  }
  refused(l, DEMO_LINEAR_GEMM, DEMO_W_F32, 2, 4, 32, "f16, bf16 or block-form", "the tiled GEMM with f32 weights");
  refused(l, DEMO_LINEAR_GEMM, DEMO_W_F16, 2, 4, 48, "multiple of 32", "the tiled GEMM with k 48");
  {
    cl_mem b = test_buffer(ctx, NULL, 4096);
    demo_linear_tuning f32a = forced("forced: f32 activations", 16, 16, 8, 4);
    f32a.gemm_f16a = 0;
    demo_linear *la = create(&f32a);
    const struct { demo_linear *l; demo_linear_engine e; demo_wfmt w; int32_t k; const char *what; } no[] = {
        {l, DEMO_LINEAR_GEMM, DEMO_W_BF16, 32, "bf16 weights"},
        {l, DEMO_LINEAR_MMA, DEMO_W_F16, 32, "the mma engine"},
        {l, DEMO_LINEAR_GEMM, DEMO_W_F16, 48, "k 48"},
        {la, DEMO_LINEAR_GEMM, DEMO_W_F16, 32, "a table without gemm_f16a"},
    };
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
      ok(!demo_linear_takes_f16(no[i].l, no[i].e, 2, no[i].k, no[i].w) &&
             demo_linear_run_f16(no[i].l, no[i].e, no[i].w, b, b, b, 2, 4, no[i].k, 0, NULL) ==
                 CLPA_ERR_INVALID_ARG &&
             strstr(demo_last_error(), "f16 activations"),
         "f16 activations refused with %s: %s", no[i].what, demo_last_error());
    ok(demo_linear_takes_f16(l, DEMO_LINEAR_GEMM, 2, 32, DEMO_W_F16) &&
           demo_linear_takes_f16(la, DEMO_LINEAR_GEMV, 2, 32, DEMO_W_F16) &&
           !demo_linear_takes_f16(l, DEMO_LINEAR_GEMV, 2, 32, DEMO_W_BF16) &&
           demo_linear_takes_f16(la, DEMO_LINEAR_GEMV, 2, 256, DEMO_W_Q4_K) &&
           demo_linear_takes_f16(l, DEMO_LINEAR_GEMV, 2, 32, DEMO_W_Q8_0) &&
           !demo_linear_takes_f16(la, DEMO_LINEAR_GEMM, 40, 256, DEMO_W_Q4_K) &&
           !demo_linear_takes_f16(l, DEMO_LINEAR_STREAM, 2, 256, DEMO_W_Q6_K),
       "f16 activations taken by the tiled GEMM and gemv with f16 weights (gemv whatever"
       " gemm_f16a says) and by gemv alone with ggml's blocks, not with bf16 weights");
    demo_linear_destroy(la);
    clReleaseMemObject(b);
  }
  const demo_linear_tuning bad = forced("forced: bad", 64, 16, 128, 4);
  demo_linear *nope = NULL;
  ok(demo_linear_create(clpa_context_cl_context(ctx), clpa_context_cl_device(ctx),
                        clpa_context_cl_queue(ctx), &bad, &nope) == CLPA_ERR_INVALID_ARG && !nope,
     "a work-group of 2048 refused: %s", demo_last_error());
  for (size_t d = 0; d < 3; d++) {
    run_case(l, DEMO_LINEAR_CLBLAST, dts[d], 33, 70, 200, 0, 0);
    run_case(l, DEMO_LINEAR_CLBLAST, dts[d], 2, 45, 96, 1, 0);
  }
  run_case(l, DEMO_LINEAR_AUTO, DEMO_W_F16, 3, 300, 1024, 1, 0); /* a longer k */
  /* ggml's block forms, dequantized in the kernels: on the stream kernel
   * in each shape, and widened for CLBlast */
  const demo_linear_tuning *shapes[] = {NULL, &gpu, &odd, &capped8};
  for (size_t s = 0; s < 4; s++) {
    demo_linear *lq = create(shapes[s]);
    block_forms(lq, DEMO_LINEAR_STREAM, 20, 60, 4);
    if (shapes[s] == &capped8) { /* Q4_K and Q5_K in blocks of 16 rows, one column a group */
      run_case(lq, DEMO_LINEAR_STREAM, DEMO_W_Q4_K, 17, 45, 512, 0, 0);
      run_case(lq, DEMO_LINEAR_STREAM, DEMO_W_Q5_K, 12, 33, 256, 1, 0);
    }
    demo_linear_destroy(lq);
  }
  for (size_t q = 0; q < 5; q++)
    run_case(l, DEMO_LINEAR_CLBLAST, quants[q], 9, 40, 512, (int)(q % 2), 0);
  /* the device's decoding of every block form, bit for bit quant.c's (ggml's) */
  for (size_t q = 0; q < 5; q++) {
    const int32_t n = 7, k = 512;
    float *want = malloc(sizeof(float) * n * k), *got = malloc(sizeof(float) * n * k);
    void *blocks = make_weights(quants[q], n, k, want);
    cl_mem W = test_buffer(ctx, blocks, demo_wfmt_row_bytes(quants[q], k) * n);
    cl_mem out = test_buffer(ctx, NULL, sizeof(float) * n * k);
    test_poison(ctx, out, sizeof(float) * n * k);
    const clpa_status st = demo_linear_dequantize(l, quants[q], W, out, n, k);
    test_read(ctx, out, got, sizeof(float) * n * k);
    ok(st == CLPA_OK && memcmp(got, want, sizeof(float) * n * k) == 0,
       "%s decoded on the device bit for bit as quant.c (ggml) decodes it: %s",
       demo_wfmt_name(quants[q]), st == CLPA_OK ? "ran" : demo_last_error());
    /* and as f16 (the tiled GEMM's copy): those floats rounded to nearest even */
    uint16_t *want16 = malloc(2 * n * k), *got16 = malloc(2 * n * k);
    clpa_dtype_encode(CLPA_DTYPE_F16, want, want16, (size_t)n * k, 1.0f);
    test_poison(ctx, out, 2 * n * k);
    cl_event ev = NULL;
    const clpa_status sh = demo_linear_dequantize_f16(l, quants[q], W, out, n, k, &ev);
    test_read(ctx, out, got16, 2 * n * k);
    ok(sh == CLPA_OK && ev && memcmp(got16, want16, 2 * n * k) == 0,
       "%s decoded as f16 on the device: quant.c's floats rounded to nearest even: %s",
       demo_wfmt_name(quants[q]), sh == CLPA_OK ? "ran" : demo_last_error());
    if (ev) clReleaseEvent(ev);
    clReleaseMemObject(W), clReleaseMemObject(out);
    free(want), free(got), free(blocks), free(want16), free(got16);
  }
  random_blocks_decoded(l);
  {
    cl_mem b = test_buffer(ctx, NULL, 4096);
    ok(demo_linear_dequantize_f16(l, DEMO_W_F16, b, b, 2, 64, NULL) == CLPA_ERR_INVALID_ARG &&
           strstr(demo_last_error(), "demo_linear_dequantize_f16") &&
           strstr(demo_last_error(), "block forms"),
       "demo_linear_dequantize_f16 refuses f16 weights: %s", demo_last_error());
    clReleaseMemObject(b);
  }
  refused(l, DEMO_LINEAR_STREAM, DEMO_W_Q4_K, 2, 4, 128, "whole number of q4_K blocks", "q4_K with k 128");
  demo_linear_tuning rule = forced("forced: the rule", 16, 16, 8, 4);
  rule.mma_min_rows = 17, rule.mma_max_rows = 64;
  demo_linear *lr = create(&rule);
  const demo_wfmt F16 = DEMO_W_F16, F32 = DEMO_W_F32;
  ok(demo_linear_pick(lr, 16, 64, F32) == DEMO_LINEAR_STREAM &&
         demo_linear_pick(lr, 17, 64, F32) == DEMO_LINEAR_CLBLAST &&
         demo_linear_pick(lr, 1, 60, F32) == DEMO_LINEAR_CLBLAST &&
         demo_linear_pick(lr, 64, 64, F16) == (nvidia ? DEMO_LINEAR_MMA : DEMO_LINEAR_CLBLAST) &&
         demo_linear_pick(lr, 64, 64, F32) == DEMO_LINEAR_CLBLAST &&
         demo_linear_pick(lr, 17, 48, F16) == DEMO_LINEAR_CLBLAST &&
         demo_linear_pick(lr, 65, 64, F16) == DEMO_LINEAR_CLBLAST &&
         demo_linear_pick(lr, 16, 48, F16) == DEMO_LINEAR_STREAM,
     "the pick: mma from 17 to 64 rows on NVIDIA (k a multiple of 32, f16 or bf16), else stream up"
     " to 16 rows (k a multiple of 8), else clblast");
  demo_linear_destroy(lr);
  demo_linear_tuning first = forced("forced: mma first", 16, 16, 8, 4);
  first.mma_min_rows = 2, first.mma_max_rows = 1 << 30, first.mma_fill = 16,
      first.gemm_min_rows = 128;
  lr = create(&first);
  const demo_wfmt Q4K = DEMO_W_Q4_K;
  ok(demo_linear_pick(lr, 1, 64, F16) == DEMO_LINEAR_STREAM &&
         demo_linear_pick(lr, 2, 64, F16) == (nvidia ? DEMO_LINEAR_MMA : DEMO_LINEAR_STREAM) &&
         demo_linear_pick(lr, 127, 64, F16) == (nvidia ? DEMO_LINEAR_MMA : DEMO_LINEAR_CLBLAST) &&
         demo_linear_pick(lr, 128, 64, F16) == (nvidia ? DEMO_LINEAR_GEMM : DEMO_LINEAR_CLBLAST) &&
         demo_linear_pick(lr, 100000, 64, F16) == (nvidia ? DEMO_LINEAR_GEMM : DEMO_LINEAR_CLBLAST) &&
         demo_linear_pick(lr, 128, 48, F16) == DEMO_LINEAR_CLBLAST &&
         demo_linear_pick(lr, 16, 256, Q4K) == DEMO_LINEAR_STREAM &&
         demo_linear_pick(lr, 17, 256, Q4K) == DEMO_LINEAR_CLBLAST &&
         demo_linear_pick(lr, 128, 256, Q4K) == (nvidia ? DEMO_LINEAR_GEMM : DEMO_LINEAR_CLBLAST),
     "the pick: mma from 2 rows on NVIDIA before stream, the tiled GEMM from 128; block forms"
     " (never mma) stream up to 16 rows, clblast past them, the tiled GEMM from 128 on NVIDIA");
  demo_linear_destroy(lr);
  demo_linear_tuning vfirst = forced("forced: gemv first", 16, 16, 8, 4);
  vfirst.mma_min_rows = 2, vfirst.mma_max_rows = 1 << 30, vfirst.mma_fill = 16,
      vfirst.gemm_min_rows = 128, vfirst.gemv_max_rows = 8;
  lr = create(&vfirst);
  ok(demo_linear_pick(lr, 1, 64, F16) == (nvidia ? DEMO_LINEAR_GEMV : DEMO_LINEAR_STREAM) &&
         demo_linear_pick(lr, 8, 64, DEMO_W_BF16) == (nvidia ? DEMO_LINEAR_GEMV : DEMO_LINEAR_STREAM) &&
         demo_linear_pick(lr, 9, 64, F16) == (nvidia ? DEMO_LINEAR_MMA : DEMO_LINEAR_STREAM) &&
         demo_linear_pick(lr, 128, 64, F16) == (nvidia ? DEMO_LINEAR_GEMM : DEMO_LINEAR_CLBLAST) &&
         demo_linear_pick(lr, 4, 48, F16) == DEMO_LINEAR_STREAM &&
         demo_linear_pick(lr, 4, 64, F32) == DEMO_LINEAR_STREAM &&
         demo_linear_pick(lr, 4, 256, Q4K) == (nvidia ? DEMO_LINEAR_GEMV : DEMO_LINEAR_STREAM) &&
         demo_linear_pick(lr, 8, 256, Q4K) == (nvidia ? DEMO_LINEAR_GEMV : DEMO_LINEAR_STREAM) &&
         demo_linear_pick(lr, 9, 256, Q4K) == DEMO_LINEAR_STREAM &&
         demo_linear_pick(lr, 17, 256, Q4K) == DEMO_LINEAR_CLBLAST &&
         demo_linear_pick(lr, 128, 256, Q4K) == (nvidia ? DEMO_LINEAR_GEMM : DEMO_LINEAR_CLBLAST),
     "the pick: gemv up to 8 rows on NVIDIA (k a multiple of 32, f16, bf16 or block forms), then"
     " mma (block forms: stream, clblast, the GEMM from its 128 rows); not for f32 weights");
  demo_linear_destroy(lr);
  /* the tiled forms: demo_wfmt_tile against linear.h's formula and its refusals, then every
   * engine over them (n off the tiles of 16), gemv also with f16 in and its two epilogues */
  {
    const int32_t tn = 21, tk = 96;
    const size_t bytes = demo_wfmt_bytes(DEMO_W_F16_TILED, tn, tk);
    uint16_t *src = malloc(2 * (size_t)tn * tk), *dst = malloc(bytes);
    for (size_t i = 0; i < (size_t)tn * tk; i++) src[i] = (uint16_t)(1 + rng_below(65535));
    memset(dst, 0xa5, bytes);
    int good = bytes == 2 * 32 * (size_t)tk && demo_wfmt_tile(DEMO_W_F16_TILED, src, dst, tn, tk) == 0;
    for (int32_t c = 0; c < 32; c++)
      for (int32_t kk = 0; kk < tk; kk++) {
        const size_t o = (size_t)(c / 16) * 16 * tk + (size_t)(kk / 32) * 512 +
                         (size_t)(c % 16 / 8) * 256 + (size_t)(c % 8) * 32 + (size_t)(kk % 32);
        good &= dst[o] == (c < tn ? src[(size_t)c * tk + kk] : 0);
      }
    ok(good, "demo_wfmt_tile: %d x %d as linear.h's tiles (%zu bytes), the padding rows zero",
       (int)tn, (int)tk, bytes);
    memset(dst, 0xa5, bytes);
    const int refusals = (demo_wfmt_tile(DEMO_W_F16, src, dst, tn, tk) == -1) +
                         (demo_wfmt_tile(DEMO_W_Q8_0, src, dst, tn, tk) == -1) +
                         (demo_wfmt_tile(DEMO_W_BF16_TILED, src, dst, tn, 48) == -1) +
                         (demo_wfmt_tile(DEMO_W_BF16_TILED, src, dst, 0, tk) == -1);
    int untouched = 1;
    for (size_t i = 0; i < bytes / 2; i++) untouched &= dst[i] == 0xa5a5;
    ok(refusals == 4 && untouched, "demo_wfmt_tile refuses row-major and block forms, k 48, n 0"
       " and writes nothing (%d of 4)", refusals);
    ok(demo_wfmt_bytes(DEMO_W_BF16_TILED, 17, 32) == 32 * 64 &&
           demo_wfmt_bytes(DEMO_W_F16_TILED, 16, 32) == 16 * 64 &&
           demo_wfmt_bytes(DEMO_W_F16_TILED, 16, 48) == 0 && demo_wfmt_bytes(DEMO_W_F16, 17, 48) == 17 * 96 &&
           demo_wfmt_of_ggml(1) == DEMO_W_F16 && demo_wfmt_of_ggml(30) == DEMO_W_BF16 &&
           demo_wfmt_of_name("bf16_tiled") == DEMO_W_BF16_TILED &&
           demo_wfmt_tiled(DEMO_W_F16) == DEMO_W_F16_TILED && demo_wfmt_tiled(DEMO_W_F32) == DEMO_W_F32 &&
           demo_wfmt_untiled(DEMO_W_BF16_TILED) == DEMO_W_BF16,
       "the tiled forms' bytes (rows padded to 16), names, and ggml's types map to row-major forms");
    free(src), free(dst);
    demo_linear_tuning v16 = forced("forced: gemv 16 warps", 16, 16, 8, 4);
    v16.gemv_max_rows = 64, v16.gemv_warps = 16, v16.gemv_unroll = 1, v16.gemv_ct = 4;
    demo_linear *lv = create(&v16);
    const demo_linear_engine es[] = {DEMO_LINEAR_STREAM, DEMO_LINEAR_MMA, DEMO_LINEAR_GEMM,
                                     DEMO_LINEAR_GEMV, DEMO_LINEAR_CLBLAST};
    const int32_t rows[] = {3, 17, 70};
    for (size_t i = 0; i < sizeof es / sizeof *es; i++)
      for (size_t d = 0; d < 2; d++) {
        const demo_wfmt t = d ? DEMO_W_BF16_TILED : DEMO_W_F16_TILED;
        const int32_t n = 20 + (int32_t)rng_below(90), k = 32 * (1 + (int32_t)rng_below(6));
        run_case(es[i] == DEMO_LINEAR_GEMV ? lv : l, es[i], t, rows[(i + d) % 3], n, k,
                 (int)((i + d) % 2), 0);
      }
    run_case(lv, DEMO_LINEAR_GEMV, DEMO_W_F16_TILED, 9, 75, 128, 1, 1);
    run_case(l, DEMO_LINEAR_GEMM, DEMO_W_F16_TILED, 70, 45, 96, 0, 1);
    run_swiglu_case(lv, DEMO_LINEAR_GEMV, DEMO_W_F16_TILED, 6, 64, 96, 1, 1);
    run_swiglu_case(lv, DEMO_LINEAR_GEMV, DEMO_W_BF16_TILED, 17, 48, 64, 0, 0);
    run_rope_case(lv, DEMO_W_F16_TILED, 5, 3, 1, 16, 64, 1, 1);
    run_rope_case(lv, DEMO_W_BF16_TILED, 16, 2, 2, 12, 96, 0, 0);
    for (size_t i = 0; i < sizeof es / sizeof *es; i++)
      refused(l, es[i], i % 2 ? DEMO_W_BF16_TILED : DEMO_W_F16_TILED, 2, 20, 48,
              "multiple of 32, the k of", "a tiled form with k 48");
    demo_linear_destroy(lv);
  }
  /* gemv with up to 8 row tiles of 8 a work-group (gemv_nt 8): 33 to 64 rows in one row block,
   * more in several; 16-bit, tiled and block forms, f16 in, both epilogues */
  {
    demo_linear_tuning v8 = forced("forced: gemv 64 rows a work-group", 16, 16, 8, 4);
    v8.gemv_max_rows = 64, v8.gemv_warps = 16, v8.gemv_ct = 4, v8.gemv_nt = 8;
    demo_linear *lv = create(&v8);
    const int32_t rows[] = {33, 48, 64, 73};
    const demo_wfmt forms8[] = {DEMO_W_F16, DEMO_W_BF16, DEMO_W_F16_TILED, DEMO_W_Q8_0};
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
      const int32_t n = 20 + (int32_t)rng_below(300), k = 32 * (1 + (int32_t)rng_below(8));
      int32_t ct, kw;
      demo_linear_gemv_shape(lv, rows[r], n, &ct, &kw);
      diag("  gemv_nt 8, %d x %d x %d: %d column tiles, %d warps", (int)rows[r], (int)n, (int)k,
           (int)ct, (int)kw);
      run_case(lv, DEMO_LINEAR_GEMV, forms8[r], rows[r], n, k, (int)(r % 2), 0);
      run_case(lv, DEMO_LINEAR_GEMV, DEMO_W_F16, rows[r], n, k, (int)(r % 2 == 0), 1);
    }
    run_swiglu_case(lv, DEMO_LINEAR_GEMV, DEMO_W_F16, 40, 64, 96, 1, 1);
    run_rope_case(lv, DEMO_W_F16_TILED, 50, 3, 1, 16, 64, 1, 0);
    demo_linear_destroy(lv);
  }
  refused(l, DEMO_LINEAR_STREAM, DEMO_W_F16, 2, 4, 12, "multiple of 8", "stream with k 12");
  refused(l, DEMO_LINEAR_AUTO, demo_wfmt_of_dtype(CLPA_DTYPE_FP8_E4M3), 2, 4, 16, "weight form",
          "fp8 weights");
  refused(l, DEMO_LINEAR_AUTO, DEMO_W_F16, -1, 4, 16, NULL, "rows -1");
  { /* a NULL buffer: refused by every entry and engine, not a null pointer in a kernel */
    cl_mem b = test_buffer(ctx, NULL, 4096);
    demo_linear_tuning vn = forced("forced: gemv", 16, 16, 8, 4);
    vn.gemv_max_rows = 8;
    demo_linear *lv = create(&vn);
    const demo_linear_engine es[] = {DEMO_LINEAR_STREAM, DEMO_LINEAR_MMA, DEMO_LINEAR_GEMM,
                                     DEMO_LINEAR_GEMV, DEMO_LINEAR_CLBLAST};
    demo_qkv_rope rp = {0};
    rp.pos = rp.cs = rp.slots = rp.kc = rp.vc = b;
    rp.hd = 8, rp.heads = 2, rp.kv_heads = 1, rp.B = 4, rp.x = 4, rp.nslots = 8;
    int refusals = 0, calls = 0;
    for (int z = 0; z < 3; z++) {
      cl_mem A = z == 0 ? NULL : b, W = z == 1 ? NULL : b, C = z == 2 ? NULL : b;
      clpa_status st[10];
      int s = 0;
      for (size_t i = 0; i < sizeof es / sizeof *es; i++)
        st[s++] = demo_linear_run(lv, es[i], DEMO_W_F16, A, W, C, 2, 16, 64, 0, NULL);
      st[s++] = demo_linear_run_f16(lv, DEMO_LINEAR_GEMV, DEMO_W_F16, A, W, C, 2, 16, 64, 0, NULL);
      st[s++] = demo_linear_run_swiglu_out(lv, DEMO_LINEAR_GEMV, DEMO_W_F16, A, 0, W, C, 0, 2, 32,
                                           64, NULL);
      st[s++] = demo_linear_run_qkv_rope(lv, DEMO_LINEAR_GEMV, DEMO_W_F16, A, 0, W, C, 2, 32, 64,
                                         &rp, NULL);
      if (z) st[s++] = demo_linear_dequantize(lv, DEMO_W_Q8_0, W, C, 2, 64);
      if (z) st[s++] = demo_linear_dequantize_f16(lv, DEMO_W_Q8_0, W, C, 2, 64, NULL);
      for (int i = 0; i < s; i++) refusals += st[i] == CLPA_ERR_INVALID_ARG;
      calls += s;
      diag("  NULL %s: %s", z == 0 ? "A" : z == 1 ? "W" : "C", demo_last_error());
    }
    ok(refusals == calls && calls == 28 && strstr(demo_last_error(), "NULL"),
       "a NULL A, W or C refused by every engine and entry (%d of %d): %s", refusals, calls,
       demo_last_error());
    demo_linear_destroy(lv);
    clReleaseMemObject(b);
  }
  demo_linear_destroy(l);
  return test_context_done(ctx);
}
