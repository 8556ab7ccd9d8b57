/*
 * ref_scene.h — the random scenes of the CPU-reference tests
 * (test_host_ref_attention for decode, test_host_ref_prefill), and the
 * truth they are checked against.
 *
 * A scene holds dense per-sequence K/V ([num_kv_heads][L][head_size]),
 * shuffled block tables in which some sequences share an earlier one's
 * leading blocks (with equal data), and paged f32 caches poisoned with NaN
 * into which the test's own scatter writes the tokens before the queries
 * (decode: every token). The key vector width x is drawn (4, 8 or 16); the
 * caches stay f32, laid out as that width's dtype would be.
 *
 * A decode scene has one query a sequence, at the sequence's last
 * position (cached == NULL); a prefill scene cu[s + 1] - cu[s] new tokens
 * after cached[s] tokens, its queries at positions cached[s] + i.
 *
 * The truth is computed from the dense arrays in long double, keys
 * backwards with a streaming log-sum-exp and p_j = e^(s_j - lse),
 * numerically unlike the reference's max-then-divide. Tolerance TOL,
 * relative to the largest |v| seen (outputs) or max(1, |lse|).
 *
 * Building one: ref_scene_init (the shape, the number of sequences), the
 * test draws the lengths and which earlier sequence each shares blocks
 * with, ref_scene_fill (tables, data, caches, options). Header-only: the
 * draws come from the test's own tap.h generator. Include after tap.h.
 */
#ifndef CLPA_TEST_REF_SCENE_H
#define CLPA_TEST_REF_SCENE_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "last_error.h"
#include "ref_attention.h"
#include "ref_util.h"
#include "tap.h"

#define TOL 1e-12

enum { OPT_ALIBI = 1, OPT_WINDOW = 2, OPT_SOFTCAP = 4, OPT_SINKS = 8, OPT_LSE = 16, OPT_ALL = 31 };

typedef struct scene {
  int32_t num_seqs, num_heads, num_kv_heads, head_size, block_size, num_blocks, max_blocks, x;
  clpa_kv_layout kv; /* of the caches: its dtype gives x (f32 4, f16 8, fp8 16) */
  size_t q_stride;
  int32_t *lens;   /* [num_seqs]: the keys of each sequence */
  int32_t *cached; /* prefill: [num_seqs]; decode: NULL */
  int32_t *cu;     /* prefill: [num_seqs + 1], the query rows of each sequence; decode: NULL */
  int32_t total;   /* query rows: decode num_seqs, prefill cu[num_seqs] */
  int32_t *tables; /* [num_seqs][max_blocks] */
  float *query;    /* [total][q_stride], padding NaN */
  float **k, **v;  /* per sequence, dense [num_kv_heads][len][head_size] */
  float *kc, *vc;  /* paged caches, NaN where no token lives */
  size_t cache_elems;
  int opts, causal;
  float scale, soft_cap;
  int32_t window;
  float *alibi, *sinks; /* [num_heads] or NULL */
  char desc[320];
} scene;

/* Query rows of sequence s, and the first of them. */
static inline int32_t new_len(const scene *sc, int32_t s) {
  return sc->cached ? sc->cu[s + 1] - sc->cu[s] : 1;
}
static inline int32_t first_row(const scene *sc, int32_t s) { return sc->cached ? sc->cu[s] : s; }
/* Tokens of sequence s before its first query (decode: all but the last). */
static inline int32_t cached_len(const scene *sc, int32_t s) {
  return sc->cached ? sc->cached[s] : sc->lens[s] - 1;
}

static inline float dense_k(const scene *sc, int32_t s, int32_t kvh, int32_t j, int32_t d) {
  return sc
      ->k[s][((size_t)kvh * (size_t)sc->lens[s] + (size_t)j) * (size_t)sc->head_size + (size_t)d];
}
static inline float dense_v(const scene *sc, int32_t s, int32_t kvh, int32_t j, int32_t d) {
  return sc
      ->v[s][((size_t)kvh * (size_t)sc->lens[s] + (size_t)j) * (size_t)sc->head_size + (size_t)d];
}

static inline size_t out_elems(const scene *sc) {
  return (size_t)(sc->total > 0 ? sc->total : 1) * (size_t)sc->num_heads * (size_t)sc->head_size;
}
static inline size_t lse_elems(const scene *sc) {
  return (size_t)(sc->total > 0 ? sc->total : 1) * (size_t)sc->num_heads;
}

/* ======================================================================
 * Building a scene
 * ==================================================================== */

/* The shape; 1-5 sequences; lens (and for prefill cached, cu) allocated
 * for the test to draw. */
static inline void ref_scene_init(scene *sc, int prefill, int causal, int32_t head_size,
                                  int32_t block_size, int32_t group, int32_t nkv) {
  static const int32_t xs[3] = {4, 8, 16};
  memset(sc, 0, sizeof *sc);
  sc->num_seqs = 1 + (int32_t)rng_below(5);
  sc->num_kv_heads = nkv;
  sc->num_heads = nkv * group;
  sc->head_size = head_size;
  sc->block_size = block_size;
  sc->causal = causal;
  do sc->x = pick(xs, 3);
  while (head_size % sc->x);
  sc->q_stride = (size_t)sc->num_heads * (size_t)head_size + rng_below(3) * 16u;
  sc->lens = xcalloc((size_t)sc->num_seqs, sizeof *sc->lens);
  if (prefill) {
    sc->cached = xcalloc((size_t)sc->num_seqs, sizeof *sc->cached);
    sc->cu = xcalloc((size_t)sc->num_seqs + 1, sizeof *sc->cu);
  }
  sc->total = sc->num_seqs;
}

/* Dense K/V (a sharing sequence copies its parent's shared blocks) and the queries. */
static inline void ref_scene_data(scene *sc, const int32_t *parent, const int32_t *shared,
                                  double qmag) {
  const size_t nkv = (size_t)sc->num_kv_heads, hs = (size_t)sc->head_size;
  sc->k = xcalloc((size_t)sc->num_seqs, sizeof *sc->k);
  sc->v = xcalloc((size_t)sc->num_seqs, sizeof *sc->v);
  for (int32_t s = 0; s < sc->num_seqs; s++) {
    size_t len = (size_t)sc->lens[s];
    sc->k[s] = xcalloc(nkv * len * hs, sizeof(float));
    sc->v[s] = xcalloc(nkv * len * hs, sizeof(float));
    for (size_t h = 0; h < nkv; h++)
      for (size_t j = 0; j < len; j++)
        for (size_t d = 0; d < hs; d++) {
          size_t i = (h * len + j) * hs + d;
          if (parent[s] >= 0 && j < (size_t)shared[s] * (size_t)sc->block_size) {
            sc->k[s][i] = dense_k(sc, parent[s], (int32_t)h, (int32_t)j, (int32_t)d);
            sc->v[s][i] = dense_v(sc, parent[s], (int32_t)h, (int32_t)j, (int32_t)d);
          } else {
            sc->k[s][i] = rnd(-1, 1);
            sc->v[s][i] = rnd(-1, 1);
          }
        }
  }
  sc->query = nan_array((size_t)(sc->total > 0 ? sc->total : 1) * sc->q_stride);
  for (int32_t t = 0; t < sc->total; t++)
    for (size_t i = 0; i < (size_t)sc->num_heads * hs; i++)
      sc->query[(size_t)t * sc->q_stride + i] = rnd(-qmag, qmag);
}

/* The test's own dense -> paged scatter of positions [from, to) of
 * sequence s, through the layout's one formula (checked against memory
 * order by test_host_layout, and by hand in the tests). */
static inline void ref_scene_scatter(const scene *sc, int32_t s, int32_t from, int32_t to,
                                     float *kc, float *vc) {
  const int32_t bs = sc->block_size;
  for (int32_t j = from; j < to; j++) {
    const int32_t b = sc->tables[(size_t)s * (size_t)sc->max_blocks + (size_t)(j / bs)];
    for (int32_t h = 0; h < sc->num_kv_heads; h++)
      for (int32_t d = 0; d < sc->head_size; d++) {
        kc[clpa_kv_key_index(&sc->kv, b, h, j % bs, d)] = dense_k(sc, s, h, j, d);
        vc[clpa_kv_value_index(&sc->kv, b, h, j % bs, d)] = dense_v(sc, s, h, j, d);
      }
  }
}

static inline void ref_scene_options(scene *sc, int opts) {
  sc->opts = opts;
  sc->scale = (float)(rng_uniform(0.5, 3.0) / sqrt((double)sc->head_size));
  sc->soft_cap = (opts & OPT_SOFTCAP) ? rnd(2, 30) : 0.0f;
  int32_t max_len = 0;
  for (int32_t s = 0; s < sc->num_seqs; s++)
    if (sc->lens[s] > max_len) max_len = sc->lens[s];
  sc->window = (opts & OPT_WINDOW) ? 1 + (int32_t)rng_below((uint32_t)max_len + 6u) : 0;
  sc->alibi = sc->sinks = NULL;
  if (opts & OPT_ALIBI) {
    sc->alibi = xcalloc((size_t)sc->num_heads, sizeof(float));
    for (int32_t h = 0; h < sc->num_heads; h++)
      sc->alibi[h] = (float)exp2(-8.0 * (h + 1) / sc->num_heads);
  }
  if (opts & OPT_SINKS) {
    sc->sinks = xcalloc((size_t)sc->num_heads, sizeof(float));
    for (int32_t h = 0; h < sc->num_heads; h++) sc->sinks[h] = rnd(-3, 6);
  }
}

static inline void ref_scene_describe(scene *sc) {
  const size_t cap = sizeof sc->desc;
  int n = snprintf(sc->desc, cap, "seqs %d heads %d/%d hs %d x %d bs %d blocks %d %s",
                   sc->num_seqs, sc->num_heads, sc->num_kv_heads, sc->head_size, sc->x,
                   sc->block_size, sc->num_blocks,
                   !sc->cached ? "lens" : sc->causal ? "causal c+n" : "non-causal c+n");
  for (int32_t s = 0; s < sc->num_seqs && n < 240; s++) {
    const char *sep = s ? "," : " ";
    if (sc->cached)
      n += snprintf(sc->desc + n, cap - (size_t)n, "%s%d+%d", sep, sc->cached[s], new_len(sc, s));
    else
      n += snprintf(sc->desc + n, cap - (size_t)n, "%s%d", sep, sc->lens[s]);
  }
  snprintf(sc->desc + n, cap - (size_t)n, "%s%s%s%s%s", (sc->opts & OPT_ALIBI) ? " alibi" : "",
           (sc->opts & OPT_WINDOW) ? " window" : "", (sc->opts & OPT_SOFTCAP) ? " softcap" : "",
           (sc->opts & OPT_SINKS) ? " sinks" : "", (sc->opts & OPT_LSE) ? " lse" : "");
}

/* After the test drew lens (cached, cu, total) and the sharing: block
 * tables (ref_util.h), dense data, the caches with every token before the
 * queries scattered (decode: all of them), the options, the description. */
static inline void ref_scene_fill(scene *sc, const int32_t *parent, const int32_t *shared,
                                  int opts) {
  sc->tables = draw_block_tables(sc->num_seqs, sc->block_size, sc->lens, parent, shared,
                                 &sc->max_blocks, &sc->num_blocks);
  ref_scene_data(sc, parent, shared, rng_below(3) ? 1.0 : 8.0);
  sc->cache_elems = (size_t)sc->num_blocks * (size_t)sc->num_kv_heads * (size_t)sc->head_size *
                    (size_t)sc->block_size;
  if (clpa_kv_layout_init(&sc->kv, dtype_of_x(sc->x), sc->num_blocks, sc->block_size,
                          sc->num_kv_heads, sc->head_size))
    BAIL_OUT("layout: %s", clpa_last_error());
  sc->kc = nan_array(sc->cache_elems);
  sc->vc = nan_array(sc->cache_elems);
  for (int32_t s = 0; s < sc->num_seqs; s++)
    ref_scene_scatter(sc, s, 0, sc->cached ? sc->cached[s] : sc->lens[s], sc->kc, sc->vc);
  ref_scene_options(sc, opts);
  ref_scene_describe(sc);
}

/* Table entries the reference must neither read nor check become garbage:
 * blocks wholly before the first key any query of the sequence sees, and
 * every entry of a sequence with no query. The caches stay (other
 * sequences may share the blocks). */
static inline void poison_unread_entries(scene *sc) {
  for (int32_t s = 0; s < sc->num_seqs; s++) {
    int32_t *row = sc->tables + (size_t)s * (size_t)sc->max_blocks;
    int32_t first = 0, c = cached_len(sc, s);
    if (new_len(sc, s) == 0)
      first = sc->max_blocks * sc->block_size;
    else if (sc->window > 0 && c + 1 > sc->window)
      first = c + 1 - sc->window;
    for (int32_t i = 0; i < first / sc->block_size; i++) row[i] = -1000 - i;
  }
}

static inline void scene_free(scene *sc) {
  for (int32_t s = 0; s < sc->num_seqs; s++) {
    free(sc->k[s]);
    free(sc->v[s]);
  }
  free(sc->k);
  free(sc->v);
  free(sc->lens);
  free(sc->cached);
  free(sc->cu);
  free(sc->tables);
  free(sc->query);
  free(sc->kc);
  free(sc->vc);
  free(sc->alibi);
  free(sc->sinks);
}

/* ======================================================================
 * Dense truth: long double from the dense arrays, keys backwards with a
 * streaming log-sum-exp, p_j = e^(s_j - lse).
 * ==================================================================== */

/* Query i of sequence s (at position p = cached + i; keys [0, p] when
 * causal or decode, else every key), head h. */
static inline void dense_row(const scene *sc, int32_t s, int32_t i, int32_t h, long double *out,
                             long double *lse, double *vmax) {
  const int32_t len = sc->lens[s], hs = sc->head_size, p = cached_len(sc, s) + i;
  const int32_t hi = sc->causal || !sc->cached ? p + 1 : len; /* keys [0, hi) before the window */
  const int32_t kvh = h / (sc->num_heads / sc->num_kv_heads);
  const float *q =
      sc->query + (size_t)(first_row(sc, s) + i) * sc->q_stride + (size_t)h * (size_t)hs;
  long double *logit = xcalloc((size_t)len + 1, sizeof *logit);
  char *in = xcalloc((size_t)len + 1, 1);
  long double m = -INFINITY, l = 0; /* running max and sum of e^(x - m) */
  if (sc->sinks) {
    m = sc->sinks[h];
    l = 1;
  }
  *vmax = 0;
  for (int32_t j = hi - 1; j >= 0; j--) { /* backwards: a different order */
    in[j] = sc->window <= 0 || (p - j) < sc->window;
    if (!in[j]) continue;
    long double dot = 0;
    for (int32_t d = hs - 1; d >= 0; d--) dot += (long double)q[d] * dense_k(sc, s, kvh, j, d);
    long double x = (long double)sc->scale * dot;
    if (sc->soft_cap > 0) x = sc->soft_cap * tanhl(x / sc->soft_cap);
    if (sc->alibi) x += (long double)sc->alibi[h] * (j - p);
    logit[j] = x;
    if (x > m) {
      l = l * expl(m - x) + 1;
      m = x;
    } else {
      l += expl(x - m);
    }
    for (int32_t d = 0; d < hs; d++) *vmax = fmax(*vmax, fabs((double)dense_v(sc, s, kvh, j, d)));
  }
  *lse = l > 0 ? m + logl(l) : -INFINITY;
  for (int32_t d = 0; d < hs; d++) out[d] = 0;
  for (int32_t j = 0; j < hi; j++) {
    if (!in[j]) continue;
    long double pj = expl(logit[j] - *lse);
    for (int32_t d = 0; d < hs; d++) out[d] += pj * dense_v(sc, s, kvh, j, d);
  }
  free(logit);
  free(in);
}

typedef struct worst {
  double ratio;    /* error / tolerance; > 1 fails; inf for NaN or class mismatch */
  int32_t t, h, d; /* query row (decode: the sequence), head, dim (-1: the lse) */
  double got, want;
} worst;

#define WORST_NONE ((worst){0, -1, -1, -1, 0, 0})

static inline void note(worst *w, double got, long double want, double tol, int32_t t, int32_t h,
                        int32_t d) {
  double r;
  if (isnan(got) || isinf(got) || isinf((double)want))
    r = (isinf(got) && got == (double)want) ? 0.0 : INFINITY;
  else if (tol == 0)
    r = (long double)got == want ? 0.0 : INFINITY;
  else
    r = fabs((double)((long double)got - want)) / tol;
  if (r > w->ratio || (w->ratio == 0 && w->t < 0)) *w = (worst){r, t, h, d, got, (double)want};
}

/* The reference's out/lse against the dense truth; returns the worst. A
 * query with no key in sight must give 0 exactly (no |v|, no tolerance). */
static inline worst compare_dense(const scene *sc, const double *out, const double *lse) {
  worst w = WORST_NONE;
  long double *dout = xcalloc((size_t)sc->head_size, sizeof *dout);
  for (int32_t s = 0; s < sc->num_seqs; s++)
    for (int32_t i = 0; i < new_len(sc, s); i++) {
      const int32_t t = first_row(sc, s) + i;
      for (int32_t h = 0; h < sc->num_heads; h++) {
        long double dlse;
        double vmax;
        dense_row(sc, s, i, h, dout, &dlse, &vmax);
        const double *o =
            out + ((size_t)t * (size_t)sc->num_heads + (size_t)h) * (size_t)sc->head_size;
        for (int32_t d = 0; d < sc->head_size; d++)
          note(&w, o[d], dout[d], TOL * vmax, t, h, d);
        if (lse)
          note(&w, lse[(size_t)t * (size_t)sc->num_heads + (size_t)h], dlse,
               TOL * fmax(1.0, fabs((double)dlse)), t, h, -1);
      }
    }
  free(dout);
  return w;
}

static inline int report(const worst *w, const scene *sc, const char *what) {
  int good = w->ratio <= 1.0;
  ok(good, "%s: %s (worst %.3g of tolerance)", what, sc->desc, w->ratio);
  if (!good)
    diag("worst: query row %d head %d %s%d: got %.17g, want %.17g", w->t, w->h,
         w->d < 0 ? "lse" : "d=", w->d < 0 ? 0 : w->d, w->got, w->want);
  return good;
}

#endif
