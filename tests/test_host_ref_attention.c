/*
 * CPU references (host/ref_attention.c) against attention computed by a
 * different route.
 *
 * Each scene (ref_scene.h) draws dense per-sequence K/V ([num_kv_heads][L][head_size]),
 * shuffled block tables (some sequences share a parent's leading blocks,
 * with equal data), and scatters dense -> paged with its own index
 * arithmetic into caches poisoned with NaN; the reference then reads the
 * paged copy. Truth is computed from the dense arrays in long double with a
 * streaming log-sum-exp and explicit normalisation (p_j = e^(s_j - lse)),
 * numerically unlike the reference's max-then-divide. Tolerance 1e-12,
 * relative to the largest |v| (outputs) or max(1, |lse|).
 *
 * The same scenes check clpa_ref_reshape_and_cache (it must build a cache
 * bit-identical to the test's scatter) and clpa_ref_merge_states (two
 * halves of a context merged must equal the whole).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_scene.h"

static int32_t draw_len(int32_t bs) {
  switch (rng_below(6)) {
    case 0:
      return 0;
    case 1:
      return 1;
    case 2:
      return bs * (int32_t)(1 + rng_below(6)); /* ends on a block boundary */
    case 3:
      return bs * (int32_t)rng_below(6) + 1; /* one token into a block */
    default:
      return (int32_t)rng_below(200);
  }
}

/* Lengths and sharing. Sequence s may share the first shared[s] full
 * blocks of an earlier sequence (a fork or a cached prefix). */
static void draw_lens(scene *sc, int32_t *parent, int32_t *shared) {
  const int32_t n = sc->num_seqs, bs = sc->block_size;
  for (int32_t s = 0; s < n; s++) {
    sc->lens[s] = draw_len(bs);
    parent[s] = -1;
    shared[s] = 0;
    if (s > 0 && rng_below(2)) {
      int32_t p = (int32_t)rng_below((uint32_t)s);
      int32_t full = sc->lens[p] / bs;
      if (full > 0) {
        parent[s] = p;
        shared[s] = 1 + (int32_t)rng_below((uint32_t)full);
        int32_t min_len = shared[s] * bs;
        if (sc->lens[s] < min_len) sc->lens[s] = min_len + (int32_t)rng_below((uint32_t)bs + 1u);
      }
    }
  }
}

/* Slot mapping route: every sequence's tokens, token-major rows with padded
 * strides and padding tokens (slot -1) mixed in, through the reference
 * scatter. Returns 1 when the cache equals the test's own scatter bit for
 * bit (both start from the same NaN bits). */
static int reshape_matches(const scene *sc) {
  float *kc = nan_array(sc->cache_elems), *vc = nan_array(sc->cache_elems);
  const size_t row = (size_t)sc->num_kv_heads * (size_t)sc->head_size;
  int same = 1;
  for (int32_t s = 0; s < sc->num_seqs && same; s++) {
    size_t len = (size_t)sc->lens[s], ntok = len + 2, stride = row + rng_below(3);
    float *krows = nan_array(ntok * stride), *vrows = nan_array(ntok * stride);
    int64_t *slots = xcalloc(ntok, sizeof *slots);
    size_t pad_at[2] = {rng_below((uint32_t)ntok), rng_below((uint32_t)ntok)};
    for (size_t t = 0, j = 0; t < ntok; t++) {
      if ((t == pad_at[0] || t == pad_at[1] || j == len) && ntok - t > len - j) {
        slots[t] = -1 - (int64_t)rng_below(3); /* padding: rows are NaN */
        continue;
      }
      int32_t b = sc->tables[(size_t)s * (size_t)sc->max_blocks + j / (size_t)sc->block_size];
      slots[t] = (int64_t)b * sc->block_size + (int64_t)(j % (size_t)sc->block_size);
      for (int32_t h = 0; h < sc->num_kv_heads; h++)
        for (int32_t d = 0; d < sc->head_size; d++) {
          krows[t * stride + (size_t)h * (size_t)sc->head_size + (size_t)d] =
              dense_k(sc, s, h, (int32_t)j, d);
          vrows[t * stride + (size_t)h * (size_t)sc->head_size + (size_t)d] =
              dense_v(sc, s, h, (int32_t)j, d);
        }
      j++;
    }
    clpa_ref_cache_args ca = {.num_tokens = (int32_t)ntok,
                              .kv = sc->kv,
                              .key = krows,
                              .key_stride = stride,
                              .value = vrows,
                              .value_stride = stride,
                              .slot_mapping = slots,
                              .key_cache = kc,
                              .value_cache = vc};
    clpa_status st = clpa_ref_reshape_and_cache(&ca);
    if (st != CLPA_OK) {
      diag("reshape_and_cache failed: %s", clpa_last_error());
      same = 0;
    }
    free(krows);
    free(vrows);
    free(slots);
  }
  if (same)
    same = memcmp(kc, sc->kc, sc->cache_elems * sizeof(float)) == 0 &&
           memcmp(vc, sc->vc, sc->cache_elems * sizeof(float)) == 0;
  free(kc);
  free(vc);
  return same;
}

static void scene_build(scene *sc, int opts, int32_t head_size, int32_t block_size, int32_t group,
                        int32_t nkv) {
  ref_scene_init(sc, 0, 0, head_size, block_size, group, nkv);
  int32_t *parent = xcalloc((size_t)sc->num_seqs, sizeof *parent);
  int32_t *shared = xcalloc((size_t)sc->num_seqs, sizeof *shared);
  draw_lens(sc, parent, shared);
  ref_scene_fill(sc, parent, shared, opts);
  free(parent);
  free(shared);
}

static clpa_ref_decode_args scene_args(const scene *sc, double *out, double *lse) {
  clpa_ref_decode_args a = {.num_seqs = sc->num_seqs,
                            .num_heads = sc->num_heads,
                            .kv = sc->kv,
                            .max_blocks_per_seq = sc->max_blocks,
                            .query = sc->query,
                            .q_stride = sc->q_stride,
                            .key_cache = sc->kc,
                            .value_cache = sc->vc,
                            .block_tables = sc->tables,
                            .context_lens = sc->lens,
                            .scale = sc->scale,
                            .alibi_slopes = sc->alibi,
                            .sliding_window = sc->window,
                            .soft_cap = sc->soft_cap,
                            .sinks = sc->sinks,
                            .out = out,
                            .lse = lse};
  return a;
}

static int reshape_scenes, reshape_bad;

/* One random scene with the given options: reshape cross-check, then
 * reference vs dense. */
static int run_decode_scene(int opts, int32_t head_size, int32_t block_size, int32_t group,
                            int32_t nkv) {
  scene sc;
  scene_build(&sc, opts, head_size, block_size, group, nkv);
  int good = reshape_matches(&sc);
  reshape_scenes++;
  if (!good) {
    reshape_bad++;
    diag("reshape_and_cache cache differs from the test scatter: %s", sc.desc);
  }
  poison_unread_entries(&sc);
  size_t nout = (size_t)sc.num_seqs * (size_t)sc.num_heads * (size_t)sc.head_size;
  double *out = poisoned(nout);
  double *lse = (opts & OPT_LSE) ? poisoned((size_t)sc.num_seqs * (size_t)sc.num_heads) : NULL;
  clpa_ref_decode_args a = scene_args(&sc, out, lse);
  clpa_status st = clpa_ref_decode(&a);
  if (st != CLPA_OK) {
    ok(0, "clpa_ref_decode failed: %s (%s)", clpa_last_error(), sc.desc);
    good = 0;
  } else {
    worst w = compare_dense(&sc, out, lse);
    good &= report(&w, &sc, "decode matches dense attention");
  }
  free(out);
  free(lse);
  scene_free(&sc);
  return good;
}

static void test_decode_random(void) {
  static const int32_t head_sizes[] = {32, 64, 80, 96, 112, 128, 192, 256, 8, 16, 48};
  static const int32_t block_sizes[] = {1, 8, 16, 32};
  static const int32_t groups[] = {1, 2, 4, 8}; /* MHA, GQA; nkv 1 makes MQA */
  const int n_hs = (int)(sizeof head_sizes / sizeof head_sizes[0]);
  for (int i = 0; i < 64; i++) {
    int opts = i % 32;
    int32_t hs = head_sizes[i % n_hs];
    int32_t bs = block_sizes[(i / 3) % 4];
    int32_t group = groups[(i / 5) % 4];
    int32_t nkv = 1 + (int32_t)rng_below(group == 8 ? 2 : 4);
    run_decode_scene(opts, hs, bs, group, nkv);
  }
  ok(reshape_bad == 0,
     "reshape_and_cache built %d caches bit-identical to the test scatter (%d differ)",
     reshape_scenes, reshape_bad);
}

/* ======================================================================
 * Hand-made cases with known answers.
 * ==================================================================== */
static void test_decode_known(void) {
  /* One token: out = v, lse = s. Two heads, MQA, head_size 4, x 4, bs 2. */
  float q[2 * 4] = {1, 2, 3, 4, -1, 0, 0, 0};
  float kc[1 * 1 * 4 * 2] = {0}, vc[1 * 1 * 4 * 2] = {0};
  for (int d = 0; d < 4; d++) {
    kc[d] = 0.5f * (float)(d + 1); /* key[0][0][0][0][d]: d/x = 0, offset 0 */
    kc[4 + d] = NAN;               /* offset 1: unused */
    vc[d * 2] = (float)(10 + d);   /* value[0][0][d][0] */
    vc[d * 2 + 1] = NAN;
  }
  int32_t table[1] = {0}, len[1] = {1};
  double out[8], lse[2];
  clpa_ref_decode_args a = {.num_seqs = 1,
                            .num_heads = 2,
                            .kv = {.dtype = CLPA_DTYPE_F32, .num_blocks = 1, .block_size = 2,
                                   .num_kv_heads = 1, .head_size = 4}, /* the rest: derived */
                            .max_blocks_per_seq = 1,
                            .query = q,
                            .q_stride = 8,
                            .key_cache = kc,
                            .value_cache = vc,
                            .block_tables = table,
                            .context_lens = len,
                            .scale = 0.5f,
                            .out = out,
                            .lse = lse};
  clpa_status st = clpa_ref_decode(&a);
  ok(st == CLPA_OK && out[0] == 10 && out[3] == 13 && out[4] == 10 && out[7] == 13 &&
         lse[0] == 0.5 * (0.5 + 2 + 4.5 + 8) && lse[1] == 0.5 * -0.5,
     "one token: out = v, lse = scale*dot (lse %g %g)", lse[0], lse[1]);

  float sinks[2] = {1.0f, -INFINITY};
  a.sinks = sinks;
  st = clpa_ref_decode(&a);
  double s0 = 0.5 * 15;
  double want_w = 1.0 / (1.0 + exp(1.0 - s0));
  ok(st == CLPA_OK && fabs(out[0] - 10 * want_w) < 1e-14 &&
         fabs(lse[0] - log(exp(s0) + exp(1.0))) < 1e-14 && out[4] == 10 && lse[1] == -0.25,
     "sink takes mass away from the value; a -inf sink changes nothing");

  len[0] = 0;
  for (int i = 0; i < 8; i++) out[i] = NAN;
  st = clpa_ref_decode(&a);
  ok(st == CLPA_OK && out[0] == 0 && out[7] == 0 && lse[0] == 1.0 && lse[1] == -INFINITY,
     "L = 0 with sinks: out 0, lse = sink (1 and -inf)");
  a.sinks = NULL;
  st = clpa_ref_decode(&a);
  ok(st == CLPA_OK && out[0] == 0 && isinf(lse[0]) && lse[0] < 0 && isinf(lse[1]),
     "L = 0 without sinks: out 0, lse -inf");
}

/* ======================================================================
 * Argument checks: each bad argument is named and nothing is written.
 * ==================================================================== */
static void expect_invalid(clpa_ref_decode_args a, const char *needle, const char *what) {
  size_t nout = (size_t)(a.num_seqs > 0 ? a.num_seqs : 1) * 64 * 64;
  double *out = poisoned(nout), *lse = poisoned(64 * 16);
  double *out0 = poisoned(nout);
  if (a.out) a.out = out;
  if (a.lse) a.lse = lse;
  clpa_err_clear();
  clpa_status st = clpa_ref_decode(&a);
  int untouched =
      memcmp(out, out0, nout * sizeof *out) == 0 && memcmp(lse, out0, 64 * 16 * sizeof *lse) == 0;
  ok(st == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), needle) && untouched,
     "rejects %s: \"%s\"%s", what, clpa_last_error(), untouched ? "" : " (OUTPUT WRITTEN)");
  free(out);
  free(lse);
  free(out0);
}

static void test_decode_invalid(void) {
  scene sc;
  for (;;) { /* the block id checks below need a block table column */
    scene_build(&sc, OPT_ALL & ~OPT_WINDOW, 64, 8, 2, 2);
    if (sc.max_blocks > 0) break;
    scene_free(&sc);
  }
  double dummy[1];
  clpa_ref_decode_args good = scene_args(&sc, dummy, dummy);
  clpa_ref_decode_args a;
  /* One bad field at a time on top of the good arguments. */
#define BAD(set, needle, what)       \
  do {                               \
    a = good;                        \
    set;                             \
    expect_invalid(a, needle, what); \
  } while (0)
  int32_t last = sc.num_seqs - 1;
  int32_t saved_len = sc.lens[last], saved_blk = sc.tables[(size_t)last * (size_t)sc.max_blocks];

  BAD(a.num_heads = 3, "num_kv_heads", "num_heads % num_kv_heads != 0");
  BAD((a.kv.head_size = 12, a.kv.dtype = CLPA_DTYPE_FP8_E4M3), "x = 16", "head_size % x != 0");
  BAD(a.kv.dtype = (clpa_dtype)7, "dtype = 7", "invalid dtype");
  BAD(a.kv.block_size = 0, "block_size", "block_size = 0");
  BAD(a.num_seqs = -1, "num_seqs", "negative num_seqs");
  BAD(a.q_stride = (size_t)sc.num_heads * 64 - 1, "q_stride", "short q_stride");
  BAD(a.query = NULL, "query", "NULL query");
  BAD(a.out = NULL, "out", "NULL out");
  BAD(a.scale = NAN, "scale", "NaN scale");
  BAD(a.soft_cap = -1, "soft_cap", "negative soft_cap");
  BAD(a.soft_cap = INFINITY, "soft_cap", "infinite soft_cap");
  BAD(a.sliding_window = -2, "sliding_window", "negative window");
  float bad_h[16];
  for (int h = 0; h < 16; h++) bad_h[h] = 0.5f;
  bad_h[sc.num_heads - 1] = NAN;
  BAD(a.sinks = bad_h, "sinks[", "NaN sink");
  bad_h[sc.num_heads - 1] = INFINITY;
  BAD(a.alibi_slopes = bad_h, "alibi_slopes[", "infinite alibi slope");

  /* Data errors in the last sequence: earlier ones must not be written. */
  sc.lens[last] = sc.max_blocks * sc.block_size + 1;
  expect_invalid(good, "context_lens[", "context longer than the block table");
  sc.lens[last] = -1;
  expect_invalid(good, "context_lens[", "negative context length");
  sc.lens[last] = 1;
  sc.tables[(size_t)last * (size_t)sc.max_blocks] = sc.num_blocks;
  expect_invalid(good, "block_tables[", "block id == num_blocks");
  sc.tables[(size_t)last * (size_t)sc.max_blocks] = -1;
  expect_invalid(good, "block_tables[", "negative block id");
  sc.lens[last] = saved_len;
  sc.tables[(size_t)last * (size_t)sc.max_blocks] = saved_blk;

  a = good;
  a.num_seqs = 0;
  a.out = NULL;
  a.lse = NULL;
  a.query = NULL;
  ok(clpa_ref_decode(&a) == CLPA_OK, "num_seqs = 0 is fine with NULL buffers");
  BAD(a.kv.num_kv_heads = 0, "num_kv_heads", "num_kv_heads = 0");
  BAD((a.kv.num_blocks = a.kv.block_size = a.kv.num_kv_heads = INT32_MAX,
       a.kv.head_size = 1 << 30, a.kv.dtype = CLPA_DTYPE_F32),
      "64 bits", "cache too large for 64 bits");
#undef BAD
  scene_free(&sc);
}

/* ======================================================================
 * merge_states
 * ==================================================================== */

/* Splits each context at L - W: A = tokens [0, L - W) (context length
 * L - W, with the sinks), B = the last W (sliding window, no sinks). No
 * ALiBi, whose bias depends on the query position. The merge must give the
 * whole; sequences with L <= W leave A empty (lse -inf). */
static void test_merge_split(int opts) {
  scene sc;
  scene_build(&sc, opts & (OPT_SOFTCAP | OPT_SINKS), 32 << rng_below(4), 16, 2, 2);
  int32_t max_len = 0;
  for (int32_t s = 0; s < sc.num_seqs; s++)
    if (sc.lens[s] > max_len) max_len = sc.lens[s];
  int32_t window = 1 + (int32_t)rng_below((uint32_t)max_len + 2u);
  size_t rows = (size_t)sc.num_seqs * (size_t)sc.num_heads, n = rows * (size_t)sc.head_size;
  double *o_all = poisoned(n), *o_a = poisoned(n), *o_b = poisoned(n), *o_m = poisoned(n);
  double *l_all = poisoned(rows), *l_a = poisoned(rows), *l_b = poisoned(rows),
         *l_m = poisoned(rows);
  int32_t *lens_a = xcalloc((size_t)sc.num_seqs, sizeof *lens_a);
  for (int32_t s = 0; s < sc.num_seqs; s++)
    lens_a[s] = sc.lens[s] > window ? sc.lens[s] - window : 0;

  clpa_ref_decode_args a = scene_args(&sc, o_all, l_all);
  int good = clpa_ref_decode(&a) == CLPA_OK;
  a.out = o_a, a.lse = l_a, a.context_lens = lens_a;
  good &= clpa_ref_decode(&a) == CLPA_OK;
  a = scene_args(&sc, o_b, l_b);
  a.sinks = NULL, a.sliding_window = window;
  good &= clpa_ref_decode(&a) == CLPA_OK;
  good &=
      clpa_ref_merge_states(rows, (size_t)sc.head_size, o_a, l_a, o_b, l_b, o_m, l_m) == CLPA_OK;
  worst w = WORST_NONE;
  for (size_t r = 0; r < rows && good; r++) {
    int32_t s = (int32_t)(r / (size_t)sc.num_heads), h = (int32_t)(r % (size_t)sc.num_heads);
    for (int32_t d = 0; d < sc.head_size; d++) {
      size_t i = r * (size_t)sc.head_size + (size_t)d;
      note(&w, o_m[i], o_all[i], TOL, s, h, d);
    }
    note(&w, l_m[r], l_all[r], TOL * fmax(1.0, fabs(l_all[r])), s, h, -1);
  }
  snprintf(sc.desc + strlen(sc.desc), sizeof sc.desc - strlen(sc.desc), " split W=%d", window);
  if (!good)
    ok(0, "merge split: a call failed: %s", clpa_last_error());
  else
    report(&w, &sc, "merge of [0, L-W) and the last W equals the whole");
  free(o_all), free(o_a), free(o_b), free(o_m);
  free(l_all), free(l_a), free(l_b), free(l_m);
  free(lens_a);
  scene_free(&sc);
}

/* The formula in long double on wide-ranging lse, -inf on either side,
 * aliasing and lse == NULL. */
static void test_merge_formula(void) {
  enum { ROWS = 64, HS = 24 };
  static double oa[ROWS * HS], ob[ROWS * HS], la[ROWS], lb[ROWS], out[ROWS * HS], lse[ROWS];
  for (int r = 0; r < ROWS; r++) {
    la[r] = rng_uniform(-50, 50);
    lb[r] = r % 5 == 0 ? la[r] + rng_uniform(-800, 800) : rng_uniform(-50, 50);
    if (r % 7 == 1) la[r] = -INFINITY;
    if (r % 11 == 2) lb[r] = -INFINITY;
    if (r == 3) la[r] = lb[r] = -INFINITY;
    for (int d = 0; d < HS; d++) {
      oa[r * HS + d] = rng_uniform(-2, 2);
      ob[r * HS + d] = rng_uniform(-2, 2);
    }
  }
  ok(clpa_ref_merge_states(ROWS, HS, oa, la, ob, lb, out, lse) == CLPA_OK, "merge runs");
  worst w = WORST_NONE;
  int exact_copies = 1;
  for (int r = 0; r < ROWS; r++) {
    long double m = la[r] > lb[r] ? la[r] : lb[r];
    int ea_ = la[r] != -INFINITY, eb_ = lb[r] != -INFINITY;
    long double wa = ea_ ? expl(la[r] - m) : 0, wb = eb_ ? expl(lb[r] - m) : 0;
    for (int d = 0; d < HS; d++) {
      long double want = ea_ || eb_ ? (oa[r * HS + d] * wa + ob[r * HS + d] * wb) / (wa + wb) : 0;
      note(&w, out[r * HS + d], want, TOL * 2, r, 0, d);
      if (!ea_ && eb_) exact_copies &= out[r * HS + d] == ob[r * HS + d];
      if (ea_ && !eb_) exact_copies &= out[r * HS + d] == oa[r * HS + d];
    }
    long double wl = ea_ || eb_ ? m + logl(wa + wb) : -INFINITY;
    note(&w, lse[r], wl, TOL * fmax(1.0, fabs((double)wl)), r, 0, -1);
  }
  ok(w.ratio <= 1.0, "merge matches the formula in long double (worst %.3g of tolerance)", w.ratio);
  if (w.ratio > 1.0) diag("worst: row %d d %d got %.17g want %.17g", w.t, w.d, w.got, w.want);
  ok(exact_copies && lse[3] == -INFINITY && out[3 * HS] == 0,
     "an empty side (-inf) copies the other exactly; both empty give 0 and -inf");

  static double alias[ROWS * HS];
  memcpy(alias, oa, sizeof alias);
  ok(clpa_ref_merge_states(ROWS, HS, alias, la, ob, lb, alias, NULL) == CLPA_OK &&
         memcmp(alias, out, sizeof alias) == 0,
     "out may alias out_a, and lse may be NULL");

  memcpy(alias, out, sizeof alias);
  double lb_bad = lb[ROWS - 1];
  lb[ROWS - 1] = NAN;
  ok(clpa_ref_merge_states(ROWS, HS, oa, la, ob, lb, out, lse) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "lse_b[63]") && memcmp(alias, out, sizeof alias) == 0,
     "a NaN lse in the last row is rejected before anything is written: %s", clpa_last_error());
  lb[ROWS - 1] = INFINITY;
  ok(clpa_ref_merge_states(ROWS, HS, oa, la, ob, lb, out, lse) == CLPA_ERR_INVALID_ARG,
     "+inf lse is rejected");
  lb[ROWS - 1] = lb_bad;
  ok(clpa_ref_merge_states(ROWS, 0, oa, la, ob, lb, out, lse) == CLPA_ERR_INVALID_ARG &&
         clpa_ref_merge_states(ROWS, HS, oa, NULL, ob, lb, out, lse) == CLPA_ERR_INVALID_ARG &&
         clpa_ref_merge_states(0, HS, NULL, NULL, NULL, NULL, NULL, NULL) == CLPA_OK,
     "head_size 0 and NULL inputs rejected; zero rows is fine");
}

/* ======================================================================
 * reshape_and_cache: a hand-computed example and argument checks (the
 * random scenes above cross-check it against the test scatter).
 * ==================================================================== */
static void test_cache_known(void) {
  /* 2 blocks, 1 KV head, head_size 8, x 4, block_size 2. Key block:
   * [hs/x = 2][bs = 2][x = 4] = 16 floats; value block [8][2] = 16. */
  float kc[32], vc[32];
  float key[2 * 10], value[2 * 10]; /* 2 tokens, stride 10 */
  int64_t slots[2] = {3, -1};       /* block 1 offset 1; padding */
  for (int i = 0; i < 32; i++) kc[i] = vc[i] = -1.0f;
  for (int i = 0; i < 20; i++) {
    key[i] = (float)(100 + i);
    value[i] = (float)(200 + i);
  }
  clpa_ref_cache_args a = {.num_tokens = 2,
                           .kv = {.dtype = CLPA_DTYPE_F32, .num_blocks = 2, .block_size = 2,
                                  .num_kv_heads = 1, .head_size = 8}, /* x 4 etc.: derived */
                           .key = key,
                           .key_stride = 10,
                           .value = value,
                           .value_stride = 10,
                           .slot_mapping = slots,
                           .key_cache = kc,
                           .value_cache = vc};
  clpa_status st = clpa_ref_reshape_and_cache(&a);
  /* By hand: key d -> 16 + (d/4)*8 + 1*4 + d%4: d 0..3 -> 20..23, d 4..7 -> 28..31.
   * value d -> 16 + d*2 + 1: 17, 19, ..., 31. */
  static const int kpos[8] = {20, 21, 22, 23, 28, 29, 30, 31};
  int good = st == CLPA_OK, written = 0;
  for (int d = 0; d < 8; d++) {
    good &= kc[kpos[d]] == (float)(100 + d) && vc[17 + 2 * d] == (float)(200 + d);
  }
  for (int i = 0; i < 32; i++) written += (kc[i] != -1.0f) + (vc[i] != -1.0f);
  ok(good && written == 16, "reshape_and_cache puts a token where the layout says, skips slot -1");

  float kc0[32], vc0[32];
  memcpy(kc0, kc, sizeof kc);
  memcpy(vc0, vc, sizeof vc);
  slots[1] = 4; /* == num_blocks * block_size */
  slots[0] = 0;
  st = clpa_ref_reshape_and_cache(&a);
  ok(st == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "slot_mapping[1]") &&
         memcmp(kc, kc0, sizeof kc) == 0 && memcmp(vc, vc0, sizeof vc) == 0,
     "slot past the cache rejected, nothing written: %s", clpa_last_error());
  slots[1] = -1;
  a.key_stride = 7;
  ok(clpa_ref_reshape_and_cache(&a) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "key_stride"),
     "short key stride rejected");
  a.key_stride = 10;
  a.kv.dtype = CLPA_DTYPE_F16; /* x 8 */
  a.kv.head_size = 12;
  ok(clpa_ref_reshape_and_cache(&a) == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "x = 8"),
     "head_size % x != 0 rejected");
  a.kv.dtype = CLPA_DTYPE_F32;
  a.kv.head_size = 8;
  a.key = NULL;
  ok(clpa_ref_reshape_and_cache(&a) == CLPA_ERR_INVALID_ARG, "NULL key rejected");
  a.key = key;
  slots[0] = slots[1] = 1;
  st = clpa_ref_reshape_and_cache(&a);
  ok(st == CLPA_OK && kc[4] == 110.0f && vc[1] == 210.0f, "a repeated slot keeps the later token");
}

int main(void) {
  rng_seed_from_env();
  test_decode_known();
  test_decode_random();
  test_decode_invalid();
  for (int i = 0; i < 8; i++)
    test_merge_split(i % 2 ? OPT_SINKS | OPT_SOFTCAP : (i & 2 ? OPT_SINKS : 0));
  test_merge_formula();
  test_cache_known();
  return done_testing();
}
