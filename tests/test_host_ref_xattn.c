/*
 * The XAttention estimation reference (host/ref_xattn.c): the KV-chunked
 * route (scores per chunk, partial stats, merge, block sums, select)
 * against the unchunked oracle (clpa_ref_xattn_estimate_dense), and the
 * definitions pinned on numbers worked by hand.
 *
 * Random scenes draw one head's dense Q and K (D 32..128, S in {4, 8, 16},
 * B in {4S, 64, 128}, up to a few thousand tokens), causal, the queries at
 * the end of the keys after a block-aligned prefix (sometimes with keys
 * after the last query, sometimes no prefix; every other scene with token
 * counts that are not whole strided groups). Q and K are followed by S
 * NaN tokens, to prove that the padding past num_q and num_k is never
 * read. For each scene:
 *
 *   - full scores (one chunk) hold -inf exactly where masked; a sample of
 *     visible ones equals the antidiagonal formula in long double;
 *   - scores chunk by chunk equal the full ones bit for bit;
 *   - key chunkings 1, 2, 3, uneven (block-aligned) and ragged (any
 *     strided cut, stats only), each with its own query chunking: merged
 *     stats equal one-shot stats (m exactly, l within 1e-12 relative);
 *     masked scores are NaN when the phases read them, to prove they
 *     never do;
 *   - the chunked block masses equal the oracle's within 1e-10 (every
 *     entry written), masks and densities equal exactly;
 *   - tau = 1 keeps every causal block; as tau falls the kept sets shrink
 *     (each inside the last) down to the forced blocks.
 *
 * Then: a structured scene (attention near the diagonal and on the first
 * tokens) gives low density at tau = 0.9; all-zero queries give exact
 * ties, broken by index; hand-worked scores and selections pin the
 * orientation, the scale, the causal rule, the zero padding and the cut;
 * token counts that are not whole groups (num_q 1 and 3 among them, with
 * and without a prefix) give, chunked and unchunked, exactly what the
 * queries and keys padded with zero tokens give; every bad argument is
 * refused, named, with nothing written.
 *
 * CLPA_TEST_SEED replays a run.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_xattn.h"
#include "tap.h"

#define TOL_STATS 1e-12
#define TOL_MASS 1e-10
#define MAX_CUTS 8
/* Caps on num_q * num_k * D / S of a random scene (about 2/3 of the
 * multiply-adds it costs: three passes over the visible scores): two big
 * scenes, the rest small, so the test stays near a second. */
#define WORK_BIG 3.0e8
#define WORK_SMALL 5.0e7

typedef struct scene {
  clpa_ref_xattn_shape sh;
  clpa_ref_xattn_dims d;
  float *q, *k;
  char desc[200];
} scene;

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) BAIL_OUT("out of memory");
  return p;
}

static double *poisoned(size_t n) {
  double *p = xcalloc(n, sizeof *p);
  for (size_t i = 0; i < n; i++) p[i] = NAN;
  return p;
}

static int32_t pick(const int32_t *a, size_t n) { return a[rng_below((uint32_t)n)]; }

static void scene_init(scene *sc, int32_t num_q, int32_t num_k, int32_t q_offset, int32_t dim,
                       int32_t stride, int32_t block) {
  sc->sh = (clpa_ref_xattn_shape){num_q, num_k, q_offset, dim, stride, block};
  if (clpa_ref_xattn_dims_get(&sc->sh, &sc->d) != CLPA_OK)
    BAIL_OUT("shape: %s", clpa_last_error());
  /* S NaN tokens after each: the reference must stop at num_q and num_k. */
  sc->q = xcalloc((size_t)(num_q + stride) * (size_t)dim, sizeof(float));
  sc->k = xcalloc((size_t)(num_k + stride) * (size_t)dim, sizeof(float));
  for (size_t i = 0; i < (size_t)stride * (size_t)dim; i++)
    sc->q[(size_t)num_q * (size_t)dim + i] = sc->k[(size_t)num_k * (size_t)dim + i] = NAN;
  snprintf(sc->desc, sizeof sc->desc, "num_q %d num_k %d q_offset %d D %d S %d B %d", num_q,
           num_k, q_offset, dim, stride, block);
}

static void scene_free(scene *sc) {
  free(sc->q);
  free(sc->k);
}

static size_t block_elems(const scene *sc) {
  return (size_t)sc->d.q_blocks * (size_t)sc->d.k_blocks;
}

/* R(r) >= c: the causal rule, written again. */
static int is_visible(const scene *sc, int32_t r, int32_t c) { return c <= sc->d.row0 + r; }

/* Element dd of query i and of key j, 0 past num_q and num_k (the padding). */
static double q_at(const scene *sc, int64_t i, int32_t dd) {
  return i < sc->sh.num_q ? sc->q[(size_t)i * (size_t)sc->sh.head_dim + (size_t)dd] : 0.0;
}
static double k_at(const scene *sc, int64_t j, int32_t dd) {
  return j < sc->sh.num_k ? sc->k[(size_t)j * (size_t)sc->sh.head_dim + (size_t)dd] : 0.0;
}

/* ======================================================================
 * Chunkings
 * ==================================================================== */

typedef enum { CUT_ONE, CUT_TWO, CUT_THREE, CUT_UNEVEN, CUT_KINDS } cut_kind;
static const char *const cut_names[] = {"1", "2", "3", "uneven"};

/* Cuts [0, len) into chunks whose inner edges are multiples of align:
 * cuts[0] = 0 < cuts[1] < ... < cuts[n] = len. Returns n. Fewer chunks than
 * asked when len holds fewer aligned units. */
static int make_cuts(int32_t len, int32_t align, cut_kind kind, int32_t *cuts) {
  const int32_t units = (len + align - 1) / align; /* the last may be partial */
  int want = kind == CUT_ONE ? 1 : kind == CUT_TWO ? 2 : kind == CUT_THREE ? 3
                                                    : 2 + (int)rng_below(MAX_CUTS - 1);
  if (want > units) want = units;
  int n = 0;
  cuts[n++] = 0;
  if (kind == CUT_UNEVEN) { /* distinct random unit boundaries, sorted */
    uint8_t *used = xcalloc((size_t)units + 1, 1);
    int got = 0;
    while (got < want - 1) {
      int32_t u = 1 + (int32_t)rng_below((uint32_t)units - 1u);
      if (!used[u]) used[u] = 1, got++;
    }
    for (int32_t u = 1; u < units; u++)
      if (used[u]) cuts[n++] = u * align;
    free(used);
  } else {
    for (int i = 1; i < want; i++) cuts[n++] = (int32_t)((int64_t)units * i / want) * align;
  }
  cuts[n] = len;
  return n;
}

/* The chunk's scores copied out of the full [rows][cols] matrix, masked
 * entries NaN: the phases must never read them. */
static double *chunk_scores(const scene *sc, const double *full, clpa_ref_xattn_chunk c) {
  double *out = xcalloc((size_t)c.q_len * (size_t)c.k_len, sizeof *out);
  for (int32_t i = 0; i < c.q_len; i++)
    for (int32_t j = 0; j < c.k_len; j++) {
      const int32_t r = c.q_start + i, col = c.k_start + j;
      out[(size_t)i * (size_t)c.k_len + (size_t)j] =
          is_visible(sc, r, col) ? full[(size_t)r * (size_t)sc->d.cols + (size_t)col] : NAN;
    }
  return out;
}

/* Worst errors of one chunked route. */
typedef struct route_err {
  int failed;     /* a call failed */
  int m_differs;  /* merged m != one-shot m somewhere */
  double l_rel;   /* worst |l - l1| / l1 */
  int alias_diff; /* merging in place differs from merging out of place */
} route_err;

/* One query chunk [qa, qb) over the key cuts: partial stats per key
 * chunk, merged, compared with the one-shot m1, l1; the merged stats go
 * to m, l (q_len each). */
static void route_stats(const scene *sc, const double *full, int32_t qa, int32_t qb,
                        const int32_t *kc, int nk, const double *m1, const double *l1, double *m,
                        double *l, route_err *e) {
  const size_t qn = (size_t)(qb - qa);
  double *mp = poisoned((size_t)nk * qn), *lp = poisoned((size_t)nk * qn);
  for (int c = 0; c < nk; c++) {
    clpa_ref_xattn_chunk ch = {qa, qb - qa, kc[c], kc[c + 1] - kc[c]};
    double *s = chunk_scores(sc, full, ch);
    if (clpa_ref_xattn_partial_stats(&sc->sh, ch, s, mp + (size_t)c * qn, lp + (size_t)c * qn))
      e->failed = 1;
    free(s);
  }
  if (clpa_ref_xattn_merge_stats((size_t)nk, qn, mp, lp, m, l)) e->failed = 1;
  /* In place, into the last chunk's rows: the same numbers. */
  double *ma = mp + (size_t)(nk - 1) * qn, *la = lp + (size_t)(nk - 1) * qn;
  if (clpa_ref_xattn_merge_stats((size_t)nk, qn, mp, lp, ma, la)) e->failed = 1;
  if (memcmp(ma, m, qn * sizeof *m) || memcmp(la, l, qn * sizeof *l)) e->alias_diff = 1;
  for (size_t i = 0; i < qn; i++) {
    if (m[i] != m1[(size_t)qa + i]) e->m_differs = 1;
    double rel = fabs(l[i] - l1[(size_t)qa + i]) / l1[(size_t)qa + i];
    if (!(rel <= e->l_rel)) e->l_rel = rel; /* NaN sticks */
  }
  free(mp);
  free(lp);
}

/* The whole chunked route with query cuts qc (nq chunks) and key cuts kc
 * (nk chunks); mass (poisoned by the caller) gets the block sums when
 * aligned, else only the stats are checked. */
static void route(const scene *sc, const double *full, const int32_t *qc, int nq,
                  const int32_t *kc, int nk, const double *m1, const double *l1, double *mass,
                  route_err *e) {
  for (int a = 0; a < nq; a++) {
    const int32_t qa = qc[a], qb = qc[a + 1];
    double *m = poisoned((size_t)(qb - qa)), *l = poisoned((size_t)(qb - qa));
    route_stats(sc, full, qa, qb, kc, nk, m1, l1, m, l, e);
    for (int c = 0; mass && c < nk; c++) {
      clpa_ref_xattn_chunk ch = {qa, qb - qa, kc[c], kc[c + 1] - kc[c]};
      double *s = chunk_scores(sc, full, ch);
      if (clpa_ref_xattn_block_sums(&sc->sh, ch, s, m, l, mass)) e->failed = 1;
      free(s);
    }
    free(m);
    free(l);
  }
}

/* Scores chunk by chunk equal the full matrix bit for bit, -inf included. */
static int scores_by_chunk_equal(const scene *sc, const double *full, const int32_t *qc, int nq,
                                 const int32_t *kc, int nk) {
  int equal = 1;
  for (int a = 0; a < nq; a++)
    for (int c = 0; c < nk; c++) {
      clpa_ref_xattn_chunk ch = {qc[a], qc[a + 1] - qc[a], kc[c], kc[c + 1] - kc[c]};
      double *s = poisoned((size_t)ch.q_len * (size_t)ch.k_len);
      if (clpa_ref_xattn_scores(&sc->sh, sc->q, sc->k, ch, s) != CLPA_OK) equal = 0;
      for (int32_t i = 0; equal && i < ch.q_len; i++)
        if (memcmp(s + (size_t)i * (size_t)ch.k_len,
                   full + (size_t)(ch.q_start + i) * (size_t)sc->d.cols + (size_t)ch.k_start,
                   (size_t)ch.k_len * sizeof *s))
          equal = 0;
      free(s);
    }
  return equal;
}

/* ======================================================================
 * The checks of one scene
 * ==================================================================== */

/* Full scores: -inf exactly where masked, a sample of visible entries
 * against the antidiagonal in long double. */
static void check_full_scores(const scene *sc, const double *full) {
  const int32_t rows = sc->d.rows, cols = sc->d.cols, S = sc->sh.stride, D = sc->sh.head_dim;
  int mask_ok = 1;
  for (int32_t r = 0; r < rows; r++)
    for (int32_t c = 0; c < cols; c++) {
      double x = full[(size_t)r * (size_t)cols + (size_t)c];
      if (is_visible(sc, r, c) ? !isfinite(x) : x != -INFINITY) mask_ok = 0;
    }
  double worst = 0;
  for (int n = 0; n < 300; n++) {
    int32_t r = (int32_t)rng_below((uint32_t)rows);
    int32_t c = (int32_t)rng_below((uint32_t)(sc->d.row0 + r + 1));
    long double sum = 0;
    for (int32_t t = 0; t < S; t++)
      for (int32_t dd = 0; dd < D; dd++)
        sum += (long double)q_at(sc, (int64_t)r * S + S - 1 - t, dd) *
               k_at(sc, (int64_t)c * S + t, dd);
    long double want = sum / (sqrtl((long double)D) * S);
    double err = (double)fabsl((long double)full[(size_t)r * (size_t)cols + (size_t)c] - want) /
                 fmax(1.0, fabs((double)want));
    if (!(err <= worst)) worst = err;
  }
  ok(mask_ok && worst <= 1e-13, "scores: -inf exactly where c > R(r), antidiagonal/(sqrt(D)S) "
                                "(worst of 300: %.2e) (%s)",
     worst, sc->desc);
}

/* The oracle's masses: 0 after each diagonal, each query block's row
 * summing to its number of strided rows. */
static void check_oracle_mass(const scene *sc, const double *mass) {
  const clpa_ref_xattn_dims *d = &sc->d;
  double worst = 0;
  int zeros = 1;
  for (int32_t qb = 0; qb < d->q_blocks; qb++) {
    const int32_t nrows = qb == d->q_blocks - 1 ? d->rows - qb * d->rows_per_block
                                                : d->rows_per_block;
    double sum = 0;
    for (int32_t kb = 0; kb < d->k_blocks; kb++) {
      double x = mass[(size_t)qb * (size_t)d->k_blocks + (size_t)kb];
      if (kb > d->diag0 + qb && x != 0) zeros = 0;
      sum += x;
    }
    if (!(fabs(sum - nrows) <= worst)) worst = fabs(sum - nrows);
  }
  ok(zeros && worst <= 1e-11,
     "oracle: block rows sum to their strided rows (worst %.2e), 0 after the diagonal (%s)",
     worst, sc->desc);
}

/* Kept blocks of a mask; whether it keeps nothing after any diagonal. */
static int64_t count_kept(const scene *sc, const uint8_t *mask, int *causal_ok) {
  int64_t kept = 0;
  *causal_ok = 1;
  for (int32_t qb = 0; qb < sc->d.q_blocks; qb++)
    for (int32_t kb = 0; kb < sc->d.k_blocks; kb++) {
      uint8_t v = mask[(size_t)qb * (size_t)sc->d.k_blocks + (size_t)kb];
      if (v > 1 || (v && kb > sc->d.diag0 + qb)) *causal_ok = 0;
      kept += v;
    }
  return kept;
}

static int64_t causal_pairs(const scene *sc) {
  int64_t n = 0;
  for (int32_t qb = 0; qb < sc->d.q_blocks; qb++) n += sc->d.diag0 + qb + 1;
  return n;
}

/* First differing (qb, kb) of two masks, for the diagnostics. */
static void diag_mask_diff(const scene *sc, const uint8_t *a, const uint8_t *b, const double *ma,
                           const double *mb) {
  for (size_t e = 0; e < block_elems(sc); e++)
    if (a[e] != b[e]) {
      diag("first difference at block (%zu, %zu): %d vs %d, masses %.17g vs %.17g",
           e / (size_t)sc->d.k_blocks, e % (size_t)sc->d.k_blocks, a[e], b[e], ma[e], mb[e]);
      return;
    }
}

/* tau = 1 keeps every causal block; falling tau keeps subsets, down to
 * the forced blocks alone. */
static void check_taus(const scene *sc, const double *mass) {
  static const double taus[] = {1.0, 0.999, 0.99, 0.95, 0.9, 0.8, 0.6, 0.4, 0.2, 0.05, 1e-12};
  const size_t n = block_elems(sc), nt = sizeof taus / sizeof *taus;
  uint8_t *prev = xcalloc(n, 1), *mask = xcalloc(n, 1);
  double prev_density = 2, density = -1;
  int monotone = 1, causal_ok = 1, full_ok = 0, calls_ok = 1;
  for (size_t t = 0; t < nt; t++) {
    memset(mask, 0xAB, n);
    if (clpa_ref_xattn_select(&sc->sh, mass, taus[t], mask, &density) != CLPA_OK) calls_ok = 0;
    int cok;
    const int64_t kept = count_kept(sc, mask, &cok);
    causal_ok &= cok;
    if (t == 0) full_ok = kept == causal_pairs(sc) && density == 1.0;
    for (size_t e = 0; t > 0 && e < n; e++)
      if (mask[e] > prev[e]) monotone = 0;
    if (density > prev_density || density != (double)kept / (double)causal_pairs(sc))
      monotone = 0;
    prev_density = density;
    memcpy(prev, mask, n);
  }
  /* The smallest tau: block 0 and the diagonal only. */
  const int64_t forced = 2 * (int64_t)sc->d.q_blocks - (sc->d.diag0 == 0);
  ok(calls_ok && causal_ok && full_ok, "tau = 1 keeps every causal block, none after (%s)",
     sc->desc);
  ok(calls_ok && monotone && density == (double)forced / (double)causal_pairs(sc),
     "falling tau keeps nested sets, density non-increasing to the forced blocks (%.4f) (%s)",
     density, sc->desc);
  free(prev);
  free(mask);
}

/* Everything of one scene. */
static void check_scene(const scene *sc) {
  const clpa_ref_xattn_dims *d = &sc->d;
  const size_t nb = block_elems(sc);
  const double tau = 0.9;

  /* The oracle. */
  double *mass_d = poisoned(nb), dens_d = -1;
  uint8_t *mask_d = xcalloc(nb, 1);
  if (clpa_ref_xattn_estimate_dense(&sc->sh, sc->q, sc->k, tau, mass_d, mask_d, &dens_d)) {
    ok(0, "estimate_dense failed: %s (%s)", clpa_last_error(), sc->desc);
    free(mass_d);
    free(mask_d);
    return;
  }
  check_oracle_mass(sc, mass_d);

  /* Full scores and one-shot stats. */
  clpa_ref_xattn_chunk all = {0, d->rows, 0, d->cols};
  double *full = poisoned((size_t)d->rows * (size_t)d->cols);
  double *m1 = poisoned((size_t)d->rows), *l1 = poisoned((size_t)d->rows);
  if (clpa_ref_xattn_scores(&sc->sh, sc->q, sc->k, all, full) ||
      clpa_ref_xattn_partial_stats(&sc->sh, all, full, m1, l1))
    BAIL_OUT("one-shot: %s (%s)", clpa_last_error(), sc->desc);
  check_full_scores(sc, full);

  /* Chunked routes: block-aligned 1, 2, 3, uneven, then ragged. */
  int32_t qc[MAX_CUTS + 1], kc[MAX_CUTS + 1];
  for (int kind = 0; kind <= CUT_KINDS; kind++) {
    const int ragged = kind == CUT_KINDS;
    const int32_t al = ragged ? 1 : d->rows_per_block;
    const cut_kind ck = ragged ? CUT_UNEVEN : (cut_kind)kind;
    const int nk = make_cuts(d->cols, al, ck, kc);
    const int nq = make_cuts(d->rows, al, (cut_kind)rng_below(CUT_KINDS), qc);
    char what[96];
    snprintf(what, sizeof what, "%s key chunking (%d key x %d query chunks)",
             ragged ? "ragged" : cut_names[kind], nk, nq);
    if (kind == CUT_UNEVEN)
      ok(scores_by_chunk_equal(sc, full, qc, nq, kc, nk),
         "scores chunk by chunk equal the full ones bit for bit, %s (%s)", what, sc->desc);

    route_err e = {0, 0, 0.0, 0};
    double *mass = ragged ? NULL : poisoned(nb);
    route(sc, full, qc, nq, kc, nk, m1, l1, mass, &e);
    ok(!e.failed && !e.m_differs && e.l_rel <= TOL_STATS && !e.alias_diff,
       "merged stats equal one-shot: m exactly, l within %.2e (worst %.2e), in place too; %s "
       "(%s)",
       TOL_STATS, e.l_rel, what, sc->desc);
    if (e.failed) diag("a call failed: %s", clpa_last_error());
    if (ragged) break;

    double worst = 0;
    for (size_t i = 0; i < nb; i++) {
      double err = fabs(mass[i] - mass_d[i]);
      if (!(err <= worst)) worst = err; /* an entry never written stays NaN */
    }
    ok(!e.failed && worst <= TOL_MASS, "block masses equal the oracle's (worst %.2e); %s (%s)",
       worst, what, sc->desc);

    uint8_t *mask = xcalloc(nb, 1);
    double dens = -1;
    clpa_status st = clpa_ref_xattn_select(&sc->sh, mass, tau, mask, &dens);
    int same = st == CLPA_OK && memcmp(mask, mask_d, nb) == 0 && dens == dens_d;
    ok(same, "mask and density (%.4f) at tau %.2f equal the oracle's; %s (%s)", dens, tau, what,
       sc->desc);
    if (!same) diag_mask_diff(sc, mask, mask_d, mass, mass_d);
    free(mask);
    free(mass);
  }

  check_taus(sc, mass_d);
  free(full);
  free(m1);
  free(l1);
  free(mass_d);
  free(mask_d);
}

/* ======================================================================
 * Scenes
 * ==================================================================== */

static void fill_random(scene *sc) {
  const double amp = rng_uniform(0.5, 3.0); /* sharper or flatter softmax */
  for (size_t i = 0; i < (size_t)sc->sh.num_q * (size_t)sc->sh.head_dim; i++)
    sc->q[i] = (float)rng_uniform(-amp, amp);
  for (size_t i = 0; i < (size_t)sc->sh.num_k * (size_t)sc->sh.head_dim; i++)
    sc->k[i] = (float)rng_uniform(-amp, amp);
}

/* Draws a random shape of at most cap work. */
static void draw_scene(scene *sc, int n, double cap) {
  static const int32_t strides[] = {4, 8, 16}, dims[] = {32, 48, 64, 80, 96, 128};
  const int32_t S = pick(strides, 3), D = pick(dims, 6);
  const int32_t blocks[] = {4 * S, 64, 128};
  const int32_t B = pick(blocks, 3);
  int32_t num_k, num_q, q_offset;
  double work;
  /* odd scenes: token counts in whole tokens, not whole strided groups */
  const int32_t unit = n % 2 ? 1 : S;
  do {
    num_k = unit * (1 + (int32_t)rng_below((uint32_t)(3200 / unit)));
    /* queries at the end after a block-aligned prefix; scene 0 none */
    q_offset = n == 0 ? 0 : B * (int32_t)rng_below((uint32_t)((num_k - 1) / B + 1));
    num_q = num_k - q_offset;
    if (n % 5 == 4) /* keys after the last query */
      num_q = unit * (1 + (int32_t)rng_below((uint32_t)(num_q / unit)));
    work = (double)num_q * num_k * D / S;
  } while (work > cap);
  scene_init(sc, num_q, num_k, q_offset, D, S, B);
  fill_random(sc);
}

static void test_random_scenes(void) {
  for (int n = 0; n < 10; n++) {
    scene sc;
    draw_scene(&sc, n, n < 2 ? WORK_BIG : WORK_SMALL);
    check_scene(&sc);
    scene_free(&sc);
  }
}

/* The same problem with q and k padded by zero tokens to whole strided
 * groups (num_q and num_k rounded up to multiples of S), as XAttention
 * pads them: the masses and the mask are the same bit for bit (the
 * padding's products are zeros, and adding a zero changes no sum). */
static void check_zero_padded(const scene *sc, double tau) {
  const clpa_ref_xattn_shape *sh = &sc->sh;
  const int32_t S = sh->stride, D = sh->head_dim;
  scene pad;
  scene_init(&pad, sc->d.rows * S, sc->d.cols * S, sh->q_offset, D, S, sh->block_size);
  memcpy(pad.q, sc->q, (size_t)sh->num_q * (size_t)D * sizeof(float));
  memcpy(pad.k, sc->k, (size_t)sh->num_k * (size_t)D * sizeof(float));
  const size_t nb = block_elems(sc);
  double *mass_a = poisoned(nb), *mass_b = poisoned(nb), dens_a = -1, dens_b = -2;
  uint8_t *mask_a = xcalloc(nb, 1), *mask_b = xcalloc(nb, 1);
  const int ran =
      clpa_ref_xattn_estimate_dense(sh, sc->q, sc->k, tau, mass_a, mask_a, &dens_a) == CLPA_OK &&
      clpa_ref_xattn_estimate_dense(&pad.sh, pad.q, pad.k, tau, mass_b, mask_b, &dens_b) ==
          CLPA_OK;
  if (!ran) diag("estimate_dense: %s", clpa_last_error());
  ok(ran && pad.d.q_blocks == sc->d.q_blocks && pad.d.k_blocks == sc->d.k_blocks &&
         memcmp(mass_a, mass_b, nb * sizeof *mass_a) == 0 && memcmp(mask_a, mask_b, nb) == 0 &&
         dens_a == dens_b,
     "the same masses, mask and density as on inputs padded with zero tokens to %d queries, %d "
     "keys (%s)",
     pad.sh.num_q, pad.sh.num_k, sc->desc);
  free(mass_a), free(mass_b), free(mask_a), free(mask_b);
  scene_free(&pad);
}

/* Token counts that are not whole strided groups: fewer queries than S
 * (1 and 3), with and without a prefix, keys after the last query (37
 * queries at 32 of 100 keys): every check of a random scene, then the
 * equivalence with zero-padded inputs; that too on random scenes of
 * partial groups. */
static void test_partial_groups(void) {
  static const struct {
    int32_t num_q, num_k, q_offset, D, S, B;
  } shapes[] = {
      {1, 1, 0, 32, 8, 64},       {3, 3, 0, 32, 4, 16},     {1, 65, 64, 16, 8, 64},
      {3, 131, 128, 48, 16, 64},  {13, 77, 64, 32, 8, 32},  {37, 100, 32, 32, 4, 16},
      {250, 378, 128, 64, 8, 64}, {517, 645, 128, 32, 16, 128},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    scene sc;
    scene_init(&sc, shapes[i].num_q, shapes[i].num_k, shapes[i].q_offset, shapes[i].D,
               shapes[i].S, shapes[i].B);
    fill_random(&sc);
    check_scene(&sc);
    check_zero_padded(&sc, 0.9);
    scene_free(&sc);
  }
  /* Each random scene with partial groups too. */
  for (int n = 1; n < 6; n += 2) {
    scene sc;
    draw_scene(&sc, n, WORK_SMALL);
    check_zero_padded(&sc, 0.9);
    scene_free(&sc);
  }
}

/* Attention near the diagonal (a Dirichlet kernel of positions: the dot
 * of q_i and k_j is A^2 * sum_f cos(f w (i - j))) and on the first
 * tokens (one feature only they and every query share). At tau = 0.9 a
 * few blocks per row hold the mass. */
static void test_structured(void) {
  scene sc;
  const int32_t D = 64, S = 8, B = 64, num_k = 4096, q_offset = 1024;
  scene_init(&sc, num_k - q_offset, num_k, q_offset, D, S, B);
  const int F = (D - 2) / 2;
  const double w = 2 * 3.14159265358979323846 / (2.0 * num_k), A = 2.0, sink = 8.0;
  for (int32_t j = 0; j < num_k; j++) {
    float *kj = sc.k + (size_t)j * D;
    kj[0] = j < S ? (float)sink : 0.0f;
    for (int f = 1; f <= F; f++) {
      kj[2 * f] = (float)(A * cos(f * w * j) + rng_uniform(-0.05, 0.05));
      kj[2 * f + 1] = (float)(A * sin(f * w * j) + rng_uniform(-0.05, 0.05));
    }
  }
  for (int32_t i = 0; i < sc.sh.num_q; i++) {
    float *qi = sc.q + (size_t)i * D;
    const double p = q_offset + i;
    qi[0] = (float)sink;
    for (int f = 1; f <= F; f++) {
      qi[2 * f] = (float)(A * cos(f * w * p));
      qi[2 * f + 1] = (float)(A * sin(f * w * p));
    }
  }
  snprintf(sc.desc + strlen(sc.desc), sizeof sc.desc - strlen(sc.desc), ", structured");

  const size_t nb = block_elems(&sc);
  double *mass = poisoned(nb), dens = -1;
  uint8_t *mask = xcalloc(nb, 1);
  clpa_status st = clpa_ref_xattn_estimate_dense(&sc.sh, sc.q, sc.k, 0.9, mass, mask, &dens);
  int forced = 1;
  for (int32_t qb = 0; qb < sc.d.q_blocks; qb++)
    forced &= mask[(size_t)qb * (size_t)sc.d.k_blocks] &&
              mask[(size_t)qb * (size_t)sc.d.k_blocks + (size_t)(sc.d.diag0 + qb)];
  ok(st == CLPA_OK && forced && dens < 0.15,
     "structured: density %.4f < 0.15 at tau 0.9, block 0 and the diagonal kept (%s)", dens,
     sc.desc);
  check_scene(&sc); /* the chunked route agrees here too */
  free(mass);
  free(mask);
  scene_free(&sc);
}

/* All-zero queries: every visible score is 0, every full off-diagonal
 * block of a row has bit-identical mass, and equal masses are taken by
 * increasing index: the kept ones of 1..d-1 are a prefix. */
static void test_ties(void) {
  scene sc;
  scene_init(&sc, 512, 1024, 512, 32, 4, 16); /* B = 4S: 16 rows, 64 key blocks */
  fill_random(&sc);
  memset(sc.q, 0, (size_t)sc.sh.num_q * 32 * sizeof(float));
  const size_t nb = block_elems(&sc), kbn = (size_t)sc.d.k_blocks;
  double *mass = poisoned(nb), dens = -1;
  uint8_t *mask = xcalloc(nb, 1);
  clpa_status st = clpa_ref_xattn_estimate_dense(&sc.sh, sc.q, sc.k, 0.5, mass, mask, &dens);
  int ties = 1, prefix = 1, some_cut = 0;
  for (int32_t qb = 0; qb < sc.d.q_blocks; qb++) {
    const int32_t diag = sc.d.diag0 + qb;
    const double *row = mass + (size_t)qb * kbn;
    const uint8_t *mr = mask + (size_t)qb * kbn;
    for (int32_t kb = 2; kb < diag; kb++) ties &= row[kb] == row[1];
    int seen_gap = 0;
    for (int32_t kb = 1; kb < diag; kb++) {
      if (!mr[kb]) seen_gap = some_cut = 1;
      else if (seen_gap) prefix = 0;
    }
  }
  ok(st == CLPA_OK && ties && prefix && some_cut,
     "regress_ties_by_index: equal masses kept by increasing index (%s)", sc.desc);
  check_scene(&sc);
  free(mass);
  free(mask);
  scene_free(&sc);
}

/* ======================================================================
 * Definitions on numbers worked by hand
 * ==================================================================== */

static void test_hand_scores(void) {
  /* S = 2, D = 1: score(0, 0) = (q1 k0 + q0 k1) / (sqrt(1) * 2). */
  clpa_ref_xattn_shape sh = {2, 2, 0, 1, 2, 2};
  float q[8] = {1, 10}, k[16] = {100, 1000};
  double s[8] = {0};
  clpa_status st = clpa_ref_xattn_scores(&sh, q, k, (clpa_ref_xattn_chunk){0, 1, 0, 1}, s);
  ok(st == CLPA_OK && s[0] == (10.0 * 100 + 1.0 * 1000) / 2,
     "regress_antidiagonal_orientation: q reversed, k in order: %g == 1000", s[0]);

  /* S = 2, D = 4, all ones: S*D products of 1, times 1/(sqrt(4)*2) = 2. */
  clpa_ref_xattn_shape sh4 = {2, 2, 0, 4, 2, 2};
  float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  st = clpa_ref_xattn_scores(&sh4, ones, ones, (clpa_ref_xattn_chunk){0, 1, 0, 1}, s);
  ok(st == CLPA_OK && s[0] == 2.0, "scale 1/(sqrt(D)*S): %g == 2", s[0]);

  /* Zero padding, S = 4, D = 1: 3 queries and keys, so score(0, 0) =
   * (q0 k3 + q1 k2 + q2 k1 + q3 k0) / 4 with q3 = k3 = 0: (2*11 + 3*7) / 4.
   * One of each: the antidiagonal pairs q0 with k3 only, so 0. The NaN
   * tokens after them are never read. */
  float qp[4] = {1, 2, 3, NAN}, kp[4] = {5, 7, 11, NAN};
  clpa_ref_xattn_shape shp = {3, 3, 0, 1, 4, 4};
  s[0] = 42;
  st = clpa_ref_xattn_scores(&shp, qp, kp, (clpa_ref_xattn_chunk){0, 1, 0, 1}, s);
  ok(st == CLPA_OK && s[0] == 10.75, "zero padding: queries and keys past 3 count 0: %g == 10.75",
     s[0]);
  shp.num_q = shp.num_k = 1;
  s[0] = 42;
  st = clpa_ref_xattn_scores(&shp, qp, kp, (clpa_ref_xattn_chunk){0, 1, 0, 1}, s);
  ok(st == CLPA_OK && s[0] == 0.0, "zero padding: one query, one key: %g == 0", s[0]);

  /* Causal: q_offset 4 with B = S = 2 puts rows 0, 1 at R = 2, 3. Keys
   * 0..3 (4 columns); row 0 sees columns 0..2. */
  clpa_ref_xattn_shape shc = {4, 8, 4, 1, 2, 2};
  float qc[4] = {1, 1, 1, 1}, kc[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  for (int i = 0; i < 8; i++) s[i] = 42;
  st = clpa_ref_xattn_scores(&shc, qc, kc, (clpa_ref_xattn_chunk){0, 2, 0, 4}, s);
  ok(st == CLPA_OK && s[0] == 1.5 && s[2] == 5.5 && s[3] == -INFINITY && s[6] == 5.5 &&
         s[7] == 7.5,
     "causal: row R sees columns c <= R, the strided diagonal included");
  /* Stats of row 0 over a chunk of columns 2..3: only column 2. */
  double m = 0, l = 0;
  st = clpa_ref_xattn_partial_stats(&shc, (clpa_ref_xattn_chunk){0, 1, 2, 2},
                                    (double[]){5.5, NAN}, &m, &l);
  ok(st == CLPA_OK && m == 5.5 && l == 1.0, "partial stats: the chunk's key offset moves the "
                                            "boundary; masked NaN never read");
  st = clpa_ref_xattn_partial_stats(&shc, (clpa_ref_xattn_chunk){0, 1, 3, 1}, (double[]){NAN},
                                    &m, &l);
  ok(st == CLPA_OK && m == -INFINITY && l == 0.0, "partial stats: no visible key gives (-inf, 0)");
  double mp[2] = {-INFINITY, 1.0}, lp[2] = {0.0, 3.0};
  st = clpa_ref_xattn_merge_stats(2, 1, mp, lp, &m, &l);
  ok(st == CLPA_OK && m == 1.0 && l == 3.0, "merge: a (-inf, 0) part adds nothing");
}

/* One query block on key block 4 (q_offset 4B): masses {2, 5, 5, 1, 3},
 * total 16, forced blocks 0 and 4 hold 5. */
static void test_hand_select(void) {
  clpa_ref_xattn_shape sh = {16, 80, 64, 8, 4, 16};
  const double mass[5] = {2, 5, 5, 1, 3};
  static const struct {
    double tau;
    uint8_t want[5];
    const char *why;
  } cases[] = {
      {0.3125, {1, 0, 0, 0, 1}, "tau*T = 5: the forced blocks reach it exactly"},
      {0.5, {1, 1, 0, 0, 1}, "tau*T = 8: one of the tied 5s, the lower index"},
      {0.9375, {1, 1, 1, 0, 1}, "tau*T = 15: reached exactly after both 5s"},
      {0.95, {1, 1, 1, 1, 1}, "tau*T = 15.2: the 1 too"},
      {1.0, {1, 1, 1, 1, 1}, "tau = 1: everything causal"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    uint8_t mask[5];
    double dens = -1;
    memset(mask, 7, sizeof mask);
    clpa_status st = clpa_ref_xattn_select(&sh, mass, cases[i].tau, mask, &dens);
    int kept = 0;
    for (int j = 0; j < 5; j++) kept += cases[i].want[j];
    ok(st == CLPA_OK && !memcmp(mask, cases[i].want, 5) && dens == kept / 5.0,
       "select tau %g: %s (mask %d%d%d%d%d)", cases[i].tau, cases[i].why, mask[0], mask[1],
       mask[2], mask[3], mask[4]);
  }
}

/* ======================================================================
 * Refusals: named, nothing written
 * ==================================================================== */

#define OUT_N 4096
static double out_a[OUT_N], out_b[OUT_N];
static uint8_t out_mask[OUT_N];
static int dims_written; /* clpa_ref_xattn_dims_get wrote its output */

static void poison_outputs(void) {
  dims_written = 0;
  for (int i = 0; i < OUT_N; i++) out_a[i] = out_b[i] = NAN;
  memset(out_mask, 0xAB, sizeof out_mask);
}

static int outputs_untouched(void) {
  double nan = NAN;
  if (dims_written) return 0;
  for (int i = 0; i < OUT_N; i++)
    if (memcmp(&out_a[i], &nan, sizeof nan) || memcmp(&out_b[i], &nan, sizeof nan) ||
        out_mask[i] != 0xAB)
      return 0;
  return 1;
}

static void expect_refused(clpa_status st, const char *needle, const char *what) {
  const int untouched = outputs_untouched();
  ok(st == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), needle) && untouched,
     "refuses %s: \"%s\"%s", what, clpa_last_error(), untouched ? "" : " (OUTPUT WRITTEN)");
}

static void test_refusals(void) {
  /* A good problem: 32 queries after 32 keys, D 4, S 4, B 16. */
  const clpa_ref_xattn_shape good = {32, 64, 32, 4, 4, 16};
  float q[32 * 4], k[64 * 4];
  for (int i = 0; i < 32 * 4; i++) q[i] = (float)rng_uniform(-1, 1);
  for (int i = 0; i < 64 * 4; i++) k[i] = (float)rng_uniform(-1, 1);
  const clpa_ref_xattn_chunk all = {0, 8, 0, 16};
  double scores[8 * 16], m[8], l[8], mass[2 * 4];
  if (clpa_ref_xattn_scores(&good, q, k, all, scores) ||
      clpa_ref_xattn_partial_stats(&good, all, scores, m, l) ||
      clpa_ref_xattn_block_sums(&good, all, scores, m, l, mass))
    BAIL_OUT("refusals setup: %s", clpa_last_error());
  clpa_ref_xattn_shape sh;
  clpa_status st;

  /* Shapes, through every function that takes one. */
#define SHAPE_BAD(set, needle, what)                                                        \
  do {                                                                                      \
    sh = good;                                                                              \
    set;                                                                                    \
    const char *fns[] = {"dims", "scores", "partial_stats", "block_sums", "select", "dense"}; \
    for (int f_ = 0; f_ < 6; f_++) {                                                        \
      poison_outputs();                                                                     \
      clpa_ref_xattn_dims dm_;                                                              \
      memset(&dm_, 0xAB, sizeof dm_);                                                       \
      switch (f_) {                                                                         \
        case 0: st = clpa_ref_xattn_dims_get(&sh, &dm_); break;                             \
        case 1: st = clpa_ref_xattn_scores(&sh, q, k, all, out_a); break;                   \
        case 2: st = clpa_ref_xattn_partial_stats(&sh, all, scores, out_a, out_b); break;   \
        case 3: st = clpa_ref_xattn_block_sums(&sh, all, scores, m, l, out_a); break;       \
        case 4: st = clpa_ref_xattn_select(&sh, mass, 0.9, out_mask, out_a); break;         \
        default: st = clpa_ref_xattn_estimate_dense(&sh, q, k, 0.9, out_a, out_mask, out_b); \
      }                                                                                     \
      clpa_ref_xattn_dims pat_;                                                             \
      memset(&pat_, 0xAB, sizeof pat_);                                                     \
      char w_[160];                                                                         \
      snprintf(w_, sizeof w_, "%s (%s)", what, fns[f_]);                                    \
      dims_written = memcmp(&dm_, &pat_, sizeof dm_) != 0;                                  \
      expect_refused(st, needle, w_);                                                       \
    }                                                                                       \
  } while (0)
  SHAPE_BAD(sh.block_size = 18, "multiple of stride", "stride 4 not dividing block_size 18");
  SHAPE_BAD((sh.stride = 16, sh.block_size = 24, sh.num_q = 32, sh.num_k = 64, sh.q_offset = 24),
            "multiple of stride", "stride 16 not dividing block_size 24");
  SHAPE_BAD(sh.stride = 0, "stride", "stride 0");
  SHAPE_BAD(sh.head_dim = 0, "head_dim", "head_dim 0");
  SHAPE_BAD(sh.num_q = 0, "num_q", "num_q 0");
  SHAPE_BAD(sh.num_q = -3, "num_q", "negative num_q");
  SHAPE_BAD(sh.num_k = -4, "num_k", "negative num_k");
  SHAPE_BAD(sh.q_offset = 28, "q_offset", "q_offset not a multiple of block_size");
  SHAPE_BAD(sh.q_offset = -16, "q_offset", "negative q_offset");
  SHAPE_BAD(sh.num_k = 48, "exceeds num_k", "queries past the keys");
  /* int32 tokens x int32 D x 4 bytes stays below 2^64: this can only
   * overflow a narrower size_t. */
  if (SIZE_MAX / 4 / INT32_MAX < INT32_MAX)
    SHAPE_BAD((sh.num_k = INT32_MAX - 15, sh.head_dim = INT32_MAX), "size_t",
              "q/k bytes overflowing size_t");
  SHAPE_BAD((sh.num_q = sh.num_k = INT32_MAX, sh.q_offset = 0, sh.stride = sh.block_size = 1),
            "size_t", "block arrays overflowing size_t");
  poison_outputs();
  expect_refused(clpa_ref_xattn_dims_get(NULL, NULL), "shape", "NULL shape");

  /* Chunks. */
  const clpa_ref_xattn_chunk bad_chunks[] = {
      {-1, 8, 0, 16}, {0, 0, 0, 16}, {1, 8, 0, 16}, {0, 8, -4, 16}, {0, 8, 0, 0}, {0, 8, 4, 16}};
  for (size_t i = 0; i < sizeof bad_chunks / sizeof *bad_chunks; i++) {
    const clpa_ref_xattn_chunk c = bad_chunks[i];
    char w[96];
    snprintf(w, sizeof w, "chunk {%d, %d, %d, %d} outside", c.q_start, c.q_len, c.k_start,
             c.k_len);
    poison_outputs();
    expect_refused(clpa_ref_xattn_scores(&good, q, k, c, out_a), "chunk", w);
    poison_outputs();
    expect_refused(clpa_ref_xattn_partial_stats(&good, c, scores, out_a, out_b), "chunk", w);
    poison_outputs();
    expect_refused(clpa_ref_xattn_block_sums(&good, c, scores, m, l, out_a), "chunk", w);
  }
  /* Misaligned for the block sums (BS = 4), fine for the others. */
  const clpa_ref_xattn_chunk misaligned[] = {{2, 6, 0, 16}, {0, 6, 0, 16}, {0, 8, 2, 14},
                                             {0, 8, 4, 7}};
  for (size_t i = 0; i < sizeof misaligned / sizeof *misaligned; i++) {
    const clpa_ref_xattn_chunk c = misaligned[i];
    char w[96];
    snprintf(w, sizeof w, "block sums of misaligned chunk {%d, %d, %d, %d}", c.q_start, c.q_len,
             c.k_start, c.k_len);
    poison_outputs();
    expect_refused(clpa_ref_xattn_block_sums(&good, c, scores, m, l, out_a), "block-aligned", w);
    static const double zeros[8 * 16];
    st = clpa_ref_xattn_partial_stats(&good, c, zeros, out_a, out_b);
    ok(st == CLPA_OK, "partial stats take the same chunk (any strided range): %s",
       st == CLPA_OK ? "yes" : clpa_last_error());
  }
  {
    clpa_ref_xattn_shape big = {INT32_MAX, INT32_MAX, 0, 1, 1, 1 << 20};
    poison_outputs();
    expect_refused(clpa_ref_xattn_scores(&big, q, k, (clpa_ref_xattn_chunk){0, INT32_MAX, 0,
                                                                            INT32_MAX},
                                         out_a),
                   "size_t", "chunk scores overflowing size_t");
  }

  /* Pointers. */
  poison_outputs();
  expect_refused(clpa_ref_xattn_scores(&good, NULL, k, all, out_a), "NULL", "scores: NULL q");
  poison_outputs();
  expect_refused(clpa_ref_xattn_scores(&good, q, NULL, all, out_a), "NULL", "scores: NULL k");
  poison_outputs();
  expect_refused(clpa_ref_xattn_scores(&good, q, k, all, NULL), "NULL", "scores: NULL scores");
  poison_outputs();
  expect_refused(clpa_ref_xattn_partial_stats(&good, all, NULL, out_a, out_b), "NULL",
                 "partial_stats: NULL scores");
  poison_outputs();
  expect_refused(clpa_ref_xattn_partial_stats(&good, all, scores, out_a, NULL), "NULL",
                 "partial_stats: NULL l");
  poison_outputs();
  expect_refused(clpa_ref_xattn_block_sums(&good, all, scores, NULL, l, out_a), "NULL",
                 "block_sums: NULL m");
  poison_outputs();
  expect_refused(clpa_ref_xattn_block_sums(&good, all, scores, m, l, NULL), "NULL",
                 "block_sums: NULL mass");
  poison_outputs();
  expect_refused(clpa_ref_xattn_select(&good, NULL, 0.9, out_mask, out_a), "NULL",
                 "select: NULL mass");
  poison_outputs();
  expect_refused(clpa_ref_xattn_select(&good, mass, 0.9, NULL, out_a), "NULL",
                 "select: NULL mask");
  poison_outputs();
  expect_refused(clpa_ref_xattn_estimate_dense(&good, q, k, 0.9, NULL, out_mask, out_b), "NULL",
                 "dense: NULL mass");
  poison_outputs();
  expect_refused(clpa_ref_xattn_estimate_dense(&good, NULL, k, 0.9, out_a, out_mask, out_b),
                 "NULL", "dense: NULL q");
  poison_outputs();
  expect_refused(clpa_ref_xattn_merge_stats(2, 8, NULL, l, out_a, out_b), "NULL",
                 "merge: NULL m_parts");
  poison_outputs();
  expect_refused(clpa_ref_xattn_merge_stats(1, 8, m, l, out_a, NULL), "NULL", "merge: NULL l");

  /* tau. */
  const double bad_taus[] = {0.0, -0.5, 1.0000001, NAN, INFINITY};
  for (size_t i = 0; i < sizeof bad_taus / sizeof *bad_taus; i++) {
    char w[64];
    snprintf(w, sizeof w, "tau = %g", bad_taus[i]);
    poison_outputs();
    expect_refused(clpa_ref_xattn_select(&good, mass, bad_taus[i], out_mask, out_a), "tau", w);
    poison_outputs();
    expect_refused(clpa_ref_xattn_estimate_dense(&good, q, k, bad_taus[i], out_a, out_mask, out_b),
                   "tau", w);
  }

  /* Values. */
  float qn[32 * 4], kn[64 * 4];
  memcpy(qn, q, sizeof q);
  memcpy(kn, k, sizeof k);
  qn[5 * 4 + 1] = NAN;
  kn[10 * 4 + 2] = INFINITY;
  poison_outputs();
  expect_refused(clpa_ref_xattn_scores(&good, qn, k, all, out_a), "q[5][1]", "scores: NaN in q");
  poison_outputs();
  expect_refused(clpa_ref_xattn_scores(&good, q, kn, all, out_a), "k[10][2]", "scores: inf in k");
  poison_outputs();
  expect_refused(clpa_ref_xattn_estimate_dense(&good, qn, k, 0.9, out_a, out_mask, out_b),
                 "q[5][1]", "dense: NaN in q");
  poison_outputs();
  expect_refused(clpa_ref_xattn_estimate_dense(&good, q, kn, 0.9, out_a, out_mask, out_b),
                 "k[10][2]", "dense: inf in k");
  /* Key 63 is never visible (the last query is at 63... R(7) = 15 sees
   * column 15 = keys 60..63), so put the bad float past the keys read by
   * a chunk of rows 0..3 (R <= 11: keys up to 47). */
  kn[10 * 4 + 2] = 0;
  kn[50 * 4] = NAN;
  st = clpa_ref_xattn_scores(&good, q, kn, (clpa_ref_xattn_chunk){0, 4, 0, 16}, out_a);
  ok(st == CLPA_OK, "scores: keys past the chunk's visible columns are neither read nor checked");

  double sn[8 * 16];
  memcpy(sn, scores, sizeof sn);
  sn[3 * 16 + 2] = NAN; /* row 3 (R = 11) sees column 2 */
  poison_outputs();
  expect_refused(clpa_ref_xattn_partial_stats(&good, all, sn, out_a, out_b), "scores[3][2]",
                 "partial_stats: a visible NaN score");
  poison_outputs();
  expect_refused(clpa_ref_xattn_block_sums(&good, all, sn, m, l, out_a), "scores[3][2]",
                 "block_sums: a visible NaN score");
  double lz[8];
  memcpy(lz, l, sizeof lz);
  lz[6] = 0;
  poison_outputs();
  expect_refused(clpa_ref_xattn_block_sums(&good, all, scores, m, lz, out_a), "row 6",
                 "block_sums: l = 0 for a row with keys");

  const struct {
    double m, l;
  } bad_parts[] = {{1.0, 0.0}, {-INFINITY, 1.0}, {NAN, 1.0}, {INFINITY, 1.0}, {0.0, -1.0},
                   {0.0, INFINITY}};
  for (size_t i = 0; i < sizeof bad_parts / sizeof *bad_parts; i++) {
    double mp[2 * 8], lp[2 * 8];
    memcpy(mp, m, sizeof m);
    memcpy(mp + 8, m, sizeof m);
    memcpy(lp, l, sizeof l);
    memcpy(lp + 8, l, sizeof l);
    mp[8 + 3] = bad_parts[i].m;
    lp[8 + 3] = bad_parts[i].l;
    char w[64];
    snprintf(w, sizeof w, "merge: part (m, l) = (%g, %g)", bad_parts[i].m, bad_parts[i].l);
    poison_outputs();
    expect_refused(clpa_ref_xattn_merge_stats(2, 8, mp, lp, out_a, out_b), "part 1 row 3", w);
  }
  poison_outputs();
  expect_refused(clpa_ref_xattn_merge_stats(0, 8, m, l, out_a, out_b), "num_chunks",
                 "merge: no chunk");
  poison_outputs();
  expect_refused(clpa_ref_xattn_merge_stats(SIZE_MAX / 2, 3, m, l, out_a, out_b), "size_t",
                 "merge: num_chunks*num_rows overflowing size_t");

  double mb[2 * 4];
  memcpy(mb, mass, sizeof mb);
  mb[1 * 4 + 3] = -1e-300; /* query block 1 sits on key block 3: causal */
  poison_outputs();
  expect_refused(clpa_ref_xattn_select(&good, mb, 0.9, out_mask, out_a), "mass[1][3]",
                 "select: a negative causal mass");
  mb[1 * 4 + 3] = NAN;
  poison_outputs();
  expect_refused(clpa_ref_xattn_select(&good, mb, 0.9, out_mask, out_a), "mass[1][3]",
                 "select: a NaN causal mass");
  mb[1 * 4 + 3] = mass[1 * 4 + 3];
  mb[0 * 4 + 3] = NAN; /* after block 0's diagonal (2): never read */
  st = clpa_ref_xattn_select(&good, mb, 0.9, out_mask, NULL);
  ok(st == CLPA_OK && out_mask[3] == 0, "select: masses after the diagonal are never read");
#undef SHAPE_BAD
}

int main(void) {
  rng_seed_from_env();
  test_hand_scores();
  test_hand_select();
  test_refusals();
  test_ties();
  test_structured();
  test_random_scenes();
  test_partial_groups();
  return done_testing();
}
