/*
 * The prefill reference (clpa_ref_prefill, host/ref_attention.c) against
 * attention computed by other routes.
 *
 * Each scene draws varlen sequences of (cached prefix, new tokens) — no
 * prefix, a prefix ending inside a block, prefixes of many blocks, no new
 * token, one new token, long sequences over many blocks — with dense
 * per-sequence K/V ([num_kv_heads][L][head_size]), shuffled block tables
 * (some sequences share whole cached blocks of an earlier one, as a radix
 * cache hit does), and caches poisoned with NaN. The prefix goes in through
 * the test's own scatter, the new tokens through clpa_ref_reshape_and_cache
 * (as an engine does before prefill). The checks:
 *
 *   - dense truth: long double from the dense arrays, a streaming
 *     log-sum-exp over the keys backwards and p_j = e^(s_j - lse), so
 *     numerically unlike the reference; tolerance 1e-12 relative to the
 *     largest |v| seen (out) or max(1, |lse|), as for decode;
 *   - single-token prefill (n = 1, cached = L - 1) equals clpa_ref_decode
 *     bit for bit;
 *   - chunked prefill (new tokens cut into 1, 2 and 7 chunks, each a call
 *     with a growing cached length, each chunk's K/V written just before
 *     its call so later positions are still NaN) equals one call bit for
 *     bit;
 *   - splitting the key set at a block boundary K, A = [0, K) and
 *     B = [K, L), each its own call, then clpa_ref_merge_states, equals
 *     the whole within 1e-12, causal (K within the cached prefix: the
 *     cascade split) and not;
 *   - every bad argument is refused, named, and nothing is written.
 *
 * CLPA_TEST_SEED replays a run.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_scene.h"

/* Upper bound on sum over sequences of n * L * num_heads * head_size for
 * one random scene, so the long double truth stays quick. */
#define WORK_BUDGET 12000000.0

/* How a scene draws its (cached, new) lengths. */
typedef enum { LENS_MIXED, LENS_ONE_NEW, LENS_SPLIT } lens_kind;

/* ======================================================================
 * Scenes
 * ==================================================================== */

/* One sequence's (cached, new) for the mixed kind. */
static void draw_mixed(int32_t bs, int32_t *c, int32_t *n) {
  switch (rng_below(7)) {
    case 0: /* no prefix */
      *c = 0;
      *n = 1 + (int32_t)rng_below(48);
      break;
    case 1: /* a prefix ending inside a block */
      *c = bs * (int32_t)rng_below(4) + (bs > 1 ? 1 + (int32_t)rng_below((uint32_t)bs - 1u) : 0);
      *n = 1 + (int32_t)rng_below(48);
      break;
    case 2: /* a prefix of many whole blocks (a radix cache hit) */
      *c = bs * (4 + (int32_t)rng_below(12));
      *n = 1 + (int32_t)rng_below((uint32_t)(2 * bs + 3));
      break;
    case 3: /* nothing new: no output row, nothing read */
      *c = (int32_t)rng_below(100);
      *n = 0;
      break;
    case 4: /* one new token (a decode step as a prefill) */
      *c = (int32_t)rng_below(100);
      *n = 1;
      break;
    case 5: /* long: many blocks of new tokens after any prefix */
      *c = (int32_t)rng_below(300);
      *n = 100 + (int32_t)rng_below(300);
      break;
    default:
      *c = (int32_t)rng_below(80);
      *n = (int32_t)rng_below(80);
  }
}

/* Draws every sequence's lengths and which earlier sequence it shares
 * whole cached blocks with (within both prefixes, as a radix hit), until the
 * long double truth fits the budget. */
static void draw_lens(scene *sc, lens_kind kind, int32_t *parent, int32_t *shared) {
  const int32_t n_seqs = sc->num_seqs, bs = sc->block_size;
  int32_t *newl = xcalloc((size_t)n_seqs, sizeof *newl);
  for (int tries = 0;; tries++) {
    double work = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
      int32_t c, n;
      if (kind == LENS_ONE_NEW) {
        c = rng_below(4) ? (int32_t)rng_below(200) : bs * (int32_t)rng_below(6);
        n = 1;
      } else if (kind == LENS_SPLIT) { /* a block boundary K with n <= K <= c exists */
        n = 1 + (int32_t)rng_below((uint32_t)(3 * bs + 20));
        c = (n + bs - 1) / bs * bs + bs * (int32_t)rng_below(4) + (int32_t)rng_below((uint32_t)bs);
      } else {
        draw_mixed(bs, &c, &n);
      }
      if (tries > 20 && n > 4) n /= 4; /* big heads: keep it quick */
      parent[s] = -1;
      shared[s] = 0;
      if (s > 0 && rng_below(2)) {
        int32_t p = (int32_t)rng_below((uint32_t)s);
        if (sc->cached[p] >= bs) {
          parent[s] = p;
          shared[s] = 1 + (int32_t)rng_below((uint32_t)(sc->cached[p] / bs));
          if (c < shared[s] * bs) c = shared[s] * bs + (int32_t)rng_below((uint32_t)bs + 1u);
        }
      }
      sc->cached[s] = c;
      newl[s] = n;
      work += (double)n * (double)(c + n) * sc->num_heads * sc->head_size;
    }
    if (work <= WORK_BUDGET || tries > 40) break;
  }
  sc->cu[0] = 0;
  for (int32_t s = 0; s < n_seqs; s++) {
    sc->cu[s + 1] = sc->cu[s] + newl[s];
    sc->lens[s] = sc->cached[s] + newl[s];
  }
  sc->total = sc->cu[n_seqs];
  free(newl);
}


/* The test's own scatter of every sequence's prefix [0, cached). */
static void scatter_prefix(const scene *sc, float *kc, float *vc) {
  for (int32_t s = 0; s < sc->num_seqs; s++) ref_scene_scatter(sc, s, 0, sc->cached[s], kc, vc);
}

/* Positions [from[s], to[s]) of every sequence into the caches through
 * clpa_ref_reshape_and_cache: token-major rows, one padding token. */
static void write_tokens(const scene *sc, const int32_t *from, const int32_t *to, float *kc,
                         float *vc) {
  const size_t row = (size_t)sc->num_kv_heads * (size_t)sc->head_size;
  size_t ntok = 1;
  for (int32_t s = 0; s < sc->num_seqs; s++) ntok += (size_t)(to[s] - from[s]);
  float *krows = nan_array(ntok * row), *vrows = nan_array(ntok * row);
  int64_t *slots = xcalloc(ntok, sizeof *slots);
  size_t t = 0;
  slots[t++] = -1; /* padding: its rows are NaN */
  for (int32_t s = 0; s < sc->num_seqs; s++)
    for (int32_t j = from[s]; j < to[s]; j++, t++) {
      int32_t b = sc->tables[(size_t)s * (size_t)sc->max_blocks + (size_t)(j / sc->block_size)];
      slots[t] = (int64_t)b * sc->block_size + j % sc->block_size;
      for (int32_t h = 0; h < sc->num_kv_heads; h++)
        for (int32_t d = 0; d < sc->head_size; d++) {
          krows[t * row + (size_t)h * (size_t)sc->head_size + (size_t)d] = dense_k(sc, s, h, j, d);
          vrows[t * row + (size_t)h * (size_t)sc->head_size + (size_t)d] = dense_v(sc, s, h, j, d);
        }
    }
  clpa_ref_cache_args ca = {.num_tokens = (int32_t)ntok,
                            .kv = sc->kv,
                            .key = krows,
                            .key_stride = row,
                            .value = vrows,
                            .value_stride = row,
                            .slot_mapping = slots,
                            .key_cache = kc,
                            .value_cache = vc};
  if (clpa_ref_reshape_and_cache(&ca) != CLPA_OK)
    BAIL_OUT("reshape_and_cache: %s", clpa_last_error());
  free(krows);
  free(vrows);
  free(slots);
}

/* The prefix through the test's scatter (ref_scene_fill), the new tokens
 * through clpa_ref_reshape_and_cache, as an engine writes them before
 * prefill. */
static void scene_build(scene *sc, lens_kind kind, int opts, int causal, int32_t head_size,
                        int32_t block_size, int32_t group, int32_t nkv) {
  ref_scene_init(sc, 1, causal, head_size, block_size, group, nkv);
  int32_t *parent = xcalloc((size_t)sc->num_seqs, sizeof *parent);
  int32_t *shared = xcalloc((size_t)sc->num_seqs, sizeof *shared);
  draw_lens(sc, kind, parent, shared);
  ref_scene_fill(sc, parent, shared, opts);
  write_tokens(sc, sc->cached, sc->lens, sc->kc, sc->vc);
  free(parent);
  free(shared);
}

static clpa_ref_prefill_args scene_args(const scene *sc, double *out, double *lse) {
  clpa_ref_prefill_args a = {.num_seqs = sc->num_seqs,
                             .num_heads = sc->num_heads,
                             .kv = sc->kv,
                             .max_blocks_per_seq = sc->max_blocks,
                             .query = sc->query,
                             .q_stride = sc->q_stride,
                             .cu_seqlens_q = sc->cu,
                             .cached_lens = sc->cached,
                             .key_cache = sc->kc,
                             .value_cache = sc->vc,
                             .block_tables = sc->tables,
                             .scale = sc->scale,
                             .alibi_slopes = sc->alibi,
                             .sliding_window = sc->window,
                             .soft_cap = sc->soft_cap,
                             .sinks = sc->sinks,
                             .causal = sc->causal,
                             .out = out,
                             .lse = lse};
  return a;
}

/* Shapes for the random scenes, cycled through. */
static const int32_t head_sizes[] = {32, 64, 80, 96, 128, 8, 16, 48, 256, 112};
static const int32_t block_sizes[] = {1, 8, 16, 32, 4};
static const int32_t groups[] = {1, 2, 4, 8}; /* MHA, GQA; nkv 1 makes MQA */
#define N_HS ((int)(sizeof head_sizes / sizeof head_sizes[0]))
#define N_BS ((int)(sizeof block_sizes / sizeof block_sizes[0]))

static void build_cycled(scene *sc, int i, lens_kind kind, int opts, int causal) {
  int32_t group = groups[(i / 5) % 4];
  int32_t nkv = 1 + (int32_t)rng_below(group == 8 ? 2 : 3);
  scene_build(sc, kind, opts, causal, head_sizes[i % N_HS], block_sizes[(i / 3) % N_BS], group,
              nkv);
}

/* ======================================================================
 * Reference against the dense truth, every option combination, causal and
 * not.
 * ==================================================================== */
static void test_prefill_random(void) {
  for (int i = 0; i < 128; i++) {
    int opts = i % 32, causal = (i / 32) % 2;
    scene sc;
    build_cycled(&sc, i, LENS_MIXED, opts, causal);
    poison_unread_entries(&sc);
    double *out = poisoned(out_elems(&sc));
    double *lse = (opts & OPT_LSE) ? poisoned(lse_elems(&sc)) : NULL;
    clpa_ref_prefill_args a = scene_args(&sc, out, lse);
    clpa_status st = clpa_ref_prefill(&a);
    if (st != CLPA_OK) {
      ok(0, "clpa_ref_prefill failed: %s (%s)", clpa_last_error(), sc.desc);
    } else {
      worst w = compare_dense(&sc, out, lse);
      report(&w, &sc, "prefill matches dense attention");
    }
    free(out);
    free(lse);
    scene_free(&sc);
  }
}

/* ======================================================================
 * Single-token prefill equals decode, bit for bit.
 * ==================================================================== */
static void test_prefill_vs_decode(void) {
  int all_same = 1, scenes = 0;
  for (int i = 0; i < 64; i++) {
    int opts = (i % 32) | OPT_LSE, causal = i / 32; /* n = 1: causal changes nothing */
    scene sc;
    build_cycled(&sc, i + 7, LENS_ONE_NEW, opts, causal);
    poison_unread_entries(&sc);
    size_t no = out_elems(&sc), nl = lse_elems(&sc);
    double *po = poisoned(no), *pl = poisoned(nl), *dout = poisoned(no), *dl = poisoned(nl);
    clpa_ref_prefill_args a = scene_args(&sc, po, pl);
    /* Row t = sequence s (one token each): the query rows are decode's. */
    clpa_ref_decode_args d = {.num_seqs = sc.num_seqs,
                              .num_heads = sc.num_heads,
                              .kv = sc.kv,
                              .max_blocks_per_seq = sc.max_blocks,
                              .query = sc.query,
                              .q_stride = sc.q_stride,
                              .key_cache = sc.kc,
                              .value_cache = sc.vc,
                              .block_tables = sc.tables,
                              .context_lens = sc.lens,
                              .scale = sc.scale,
                              .alibi_slopes = sc.alibi,
                              .sliding_window = sc.window,
                              .soft_cap = sc.soft_cap,
                              .sinks = sc.sinks,
                              .out = dout,
                              .lse = dl};
    int good = clpa_ref_prefill(&a) == CLPA_OK && clpa_ref_decode(&d) == CLPA_OK &&
               memcmp(po, dout, no * sizeof *po) == 0 && memcmp(pl, dl, nl * sizeof *pl) == 0;
    if (!good) {
      all_same = 0;
      diag("differs from decode: %s (%s)", sc.desc, clpa_last_error());
    }
    scenes++;
    free(po), free(pl), free(dout), free(dl);
    scene_free(&sc);
  }
  ok(all_same,
     "single-token prefill (cached L-1, one new) equals clpa_ref_decode bit for bit in "
     "%d scenes (all options, causal and not)",
     scenes);
}

/* ======================================================================
 * Chunked prefill equals one call, bit for bit.
 * ==================================================================== */

/* Cuts n into k chunks at random points (chunks may be empty). */
static void cut_points(int32_t n, int k, int32_t *cuts) {
  cuts[0] = 0;
  cuts[k] = n;
  for (int q = 1; q < k; q++) cuts[q] = (int32_t)rng_below((uint32_t)n + 1u);
  for (int q = 1; q < k; q++) /* insertion sort of cuts[1..k-1] */
    for (int r = q; r > 1 && cuts[r] < cuts[r - 1]; r--) {
      int32_t tmp = cuts[r];
      cuts[r] = cuts[r - 1];
      cuts[r - 1] = tmp;
    }
}

/* The new tokens in k chunks: a fresh cache with only the prefixes; before
 * chunk q, its tokens are written (reshape_and_cache), so every later
 * position is still NaN when a chunk runs. Returns 1 when each row equals
 * the one-call row bit for bit. */
static int chunked_equals(const scene *sc, int k, const double *out1, const double *lse1) {
  const size_t hs = (size_t)sc->head_size, nh = (size_t)sc->num_heads;
  const int32_t n_seqs = sc->num_seqs;
  int32_t *cuts = xcalloc((size_t)n_seqs * (size_t)(k + 1), sizeof *cuts);
  for (int32_t s = 0; s < n_seqs; s++) cut_points(new_len(sc, s), k, cuts + (size_t)s * (k + 1));
  float *kc = nan_array(sc->cache_elems), *vc = nan_array(sc->cache_elems);
  scatter_prefix(sc, kc, vc);
  int32_t *cached = xcalloc((size_t)n_seqs, sizeof *cached),
          *to = xcalloc((size_t)n_seqs, sizeof *to);
  int32_t *cu = xcalloc((size_t)n_seqs + 1, sizeof *cu);
  float *q = nan_array((size_t)(sc->total + 1) * sc->q_stride);
  double *out = poisoned(out_elems(sc)), *lse = poisoned(lse_elems(sc));
  int same = 1;
  for (int c = 0; c < k && same; c++) {
    for (int32_t s = 0; s < n_seqs; s++) {
      const int32_t *ct = cuts + (size_t)s * (k + 1);
      cached[s] = sc->cached[s] + ct[c];
      to[s] = sc->cached[s] + ct[c + 1];
      cu[s + 1] = cu[s] + (ct[c + 1] - ct[c]);
      memcpy(q + (size_t)cu[s] * sc->q_stride,
             sc->query + (size_t)(sc->cu[s] + ct[c]) * sc->q_stride,
             (size_t)(ct[c + 1] - ct[c]) * sc->q_stride * sizeof *q);
    }
    write_tokens(sc, cached, to, kc, vc);
    clpa_ref_prefill_args a = scene_args(sc, out, lse);
    a.query = q, a.cu_seqlens_q = cu, a.cached_lens = cached, a.key_cache = kc, a.value_cache = vc;
    if (clpa_ref_prefill(&a) != CLPA_OK) {
      diag("chunk %d of %d failed: %s", c, k, clpa_last_error());
      same = 0;
      break;
    }
    for (int32_t s = 0; s < n_seqs && same; s++) {
      const int32_t *ct = cuts + (size_t)s * (k + 1);
      for (int32_t i = ct[c]; i < ct[c + 1]; i++) {
        size_t row = (size_t)(cu[s] + i - ct[c]), row1 = (size_t)(sc->cu[s] + i);
        if (memcmp(out + row * nh * hs, out1 + row1 * nh * hs, nh * hs * sizeof *out) ||
            memcmp(lse + row * nh, lse1 + row1 * nh, nh * sizeof *lse)) {
          diag("chunk %d of %d: seq %d new token %d differs from one call", c, k, s, i);
          same = 0;
          break;
        }
      }
    }
  }
  free(cuts), free(kc), free(vc), free(cached), free(to), free(cu), free(q), free(out), free(lse);
  return same;
}

static void test_prefill_chunked(void) {
  static const int ks[3] = {1, 2, 7};
  for (int i = 0; i < 32; i++) {
    scene sc;
    build_cycled(&sc, i + 3, LENS_MIXED, i | OPT_LSE, 1);
    double *out1 = poisoned(out_elems(&sc)), *lse1 = poisoned(lse_elems(&sc));
    clpa_ref_prefill_args a = scene_args(&sc, out1, lse1);
    int good = clpa_ref_prefill(&a) == CLPA_OK;
    for (int j = 0; j < 3 && good; j++) good = chunked_equals(&sc, ks[j], out1, lse1);
    ok(good, "chunked prefill (1, 2, 7 chunks) equals one call bit for bit: %s", sc.desc);
    free(out1);
    free(lse1);
    scene_free(&sc);
  }
}

/* ======================================================================
 * Key-set split + merge_states equals the whole.
 *
 * For each sequence, K is a block boundary with n <= K <= cached:
 *   A = keys [0, K): non-causal, cached' = K - n, the same table. Its
 *       queries sit delta = L - K positions early, so the window is
 *       W - delta (the test draws W > every delta) and ALiBi adds the
 *       constant slope*delta to every logit: out is unchanged, lse is
 *       corrected by -slope*delta. No sink.
 *   B = keys [K, L): the table from entry K/block_size, cached' =
 *       cached - K, causal as the whole; positions shift by K on both
 *       sides, so causal, window and ALiBi see the same differences. The
 *       sink lives here.
 * Causal: every A key precedes every query (K <= cached), so this is the
 * cascade split of a cached prefix; non-causal: any split.
 * ==================================================================== */
static void test_split_merge(int opts, int causal, int i) {
  scene sc;
  build_cycled(&sc, i, LENS_SPLIT, opts | OPT_LSE, causal);
  const int32_t bs = sc.block_size, nh = sc.num_heads, hs = sc.head_size;
  int32_t *split = xcalloc((size_t)sc.num_seqs, sizeof *split);
  int32_t max_delta = 0, max_len = 0;
  for (int32_t s = 0; s < sc.num_seqs; s++) {
    int32_t lo = (new_len(&sc, s) + bs - 1) / bs, hi = sc.cached[s] / bs; /* in blocks */
    split[s] = bs * (lo + (int32_t)rng_below((uint32_t)(hi - lo + 1)));
    if (sc.lens[s] - split[s] > max_delta) max_delta = sc.lens[s] - split[s];
    if (sc.lens[s] > max_len) max_len = sc.lens[s];
  }
  if (opts & OPT_WINDOW) sc.window = max_delta + 1 + (int32_t)rng_below((uint32_t)max_len);

  double *ow = poisoned(out_elems(&sc)), *lw = poisoned(lse_elems(&sc));
  clpa_ref_prefill_args whole = scene_args(&sc, ow, lw);
  int good = clpa_ref_prefill(&whole) == CLPA_OK;
  worst w = WORST_NONE;
  for (int32_t s = 0; s < sc.num_seqs && good; s++) {
    const int32_t n = new_len(&sc, s), K = split[s], delta = sc.lens[s] - K;
    const size_t rows = (size_t)n * (size_t)nh, elems = rows * (size_t)hs;
    double *oa = poisoned(elems), *la = poisoned(rows), *ob = poisoned(elems), *lb = poisoned(rows),
           *om = poisoned(elems), *lm = poisoned(rows);
    int32_t cu1[2] = {0, n}, ca = K - n, cb = sc.cached[s] - K;
    const int32_t *row = sc.tables + (size_t)s * (size_t)sc.max_blocks;
    clpa_ref_prefill_args a = scene_args(&sc, oa, la);
    a.num_seqs = 1, a.query = sc.query + (size_t)sc.cu[s] * sc.q_stride, a.cu_seqlens_q = cu1;
    a.cached_lens = &ca, a.block_tables = row, a.causal = 0, a.sinks = NULL;
    a.sliding_window = sc.window > 0 ? sc.window - delta : 0;
    clpa_ref_prefill_args b = a;
    b.out = ob, b.lse = lb, b.cached_lens = &cb, b.block_tables = row + K / bs;
    b.max_blocks_per_seq = sc.max_blocks - K / bs, b.causal = sc.causal, b.sinks = sc.sinks;
    b.sliding_window = sc.window;
    good = clpa_ref_prefill(&a) == CLPA_OK && clpa_ref_prefill(&b) == CLPA_OK;
    for (size_t r = 0; r < rows && good && sc.alibi; r++)
      la[r] -= (double)sc.alibi[r % (size_t)nh] * (double)delta;
    good = good && clpa_ref_merge_states(rows, (size_t)hs, oa, la, ob, lb, om, lm) == CLPA_OK;
    for (size_t r = 0; r < rows && good; r++) {
      const int32_t t = sc.cu[s] + (int32_t)(r / (size_t)nh), h = (int32_t)(r % (size_t)nh);
      const size_t wr = (size_t)t * (size_t)nh + (size_t)h;
      for (int32_t d = 0; d < hs; d++)
        note(&w, om[r * (size_t)hs + (size_t)d], ow[wr * (size_t)hs + (size_t)d], TOL, t, h, d);
      note(&w, lm[r], lw[wr], TOL * fmax(1.0, fabs(lw[wr])), t, h, -1);
    }
    free(oa), free(la), free(ob), free(lb), free(om), free(lm);
  }
  if (!good)
    ok(0, "split/merge: a call failed: %s (%s)", clpa_last_error(), sc.desc);
  else
    report(&w, &sc, "keys [0,K) and [K,L) merged equal the whole");
  free(ow);
  free(lw);
  free(split);
  scene_free(&sc);
}

/* ======================================================================
 * Hand-made: three new tokens, no prefix, one head, head_size 4, x 4,
 * block size 2 (tokens 0, 1 in block 1 and token 2 in block 0).
 * ==================================================================== */
static void test_prefill_known(void) {
  float q[3 * 4] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1};
  float kc[2 * 4 * 2], vc[2 * 4 * 2];
  const float keys[3][4] = {{2, 0, 0, 0}, {0, 4, 0, 0}, {1, 1, 1, 1}};
  const float vals[3][4] = {{10, 11, 12, 13}, {20, 21, 22, 23}, {30, 31, 32, 33}};
  for (int i = 0; i < 16; i++) kc[i] = vc[i] = NAN;
  const int blk[3] = {1, 1, 0}, off[3] = {0, 1, 0};
  for (int j = 0; j < 3; j++)
    for (int d = 0; d < 4; d++) {
      kc[blk[j] * 8 + off[j] * 4 + d] = keys[j][d]; /* [b][d/4][o][d%4] */
      vc[blk[j] * 8 + d * 2 + off[j]] = vals[j][d]; /* [b][d][o] */
    }
  int32_t table[2] = {1, 0}, cu[2] = {0, 3}, cached[1] = {0};
  double out[12], lse[3];
  clpa_ref_prefill_args a = {.num_seqs = 1,
                             .num_heads = 1,
                             .kv = {.dtype = CLPA_DTYPE_F32, .num_blocks = 2, .block_size = 2,
                                    .num_kv_heads = 1, .head_size = 4},
                             .max_blocks_per_seq = 2,
                             .query = q,
                             .q_stride = 4,
                             .cu_seqlens_q = cu,
                             .cached_lens = cached,
                             .key_cache = kc,
                             .value_cache = vc,
                             .block_tables = table,
                             .scale = 0.5f,
                             .causal = 1,
                             .out = out,
                             .lse = lse};
  clpa_status st = clpa_ref_prefill(&a);
  /* Row 0 sees key 0 only: out = v0, lse = 0.5*2. Row 1: logits 0 and 2. */
  double w1 = 1.0 / (1.0 + exp(-2.0));
  ok(st == CLPA_OK && out[0] == 10 && out[3] == 13 && lse[0] == 1.0 &&
         fabs(out[4] - (10 * (1 - w1) + 20 * w1)) < 1e-13 &&
         fabs(lse[1] - log(1 + exp(2.0))) < 1e-13,
     "causal: token 0 sees only itself (out = v0, lse %g), token 1 two keys", lse[0]);

  /* Non-causal: row 0 (logits 1, 0, 0.5) sees all three. */
  a.causal = 0;
  st = clpa_ref_prefill(&a);
  double e0 = exp(1.0), e1 = 1.0, e2 = exp(0.5), den = e0 + e1 + e2;
  ok(st == CLPA_OK && fabs(out[0] - (10 * e0 + 20 * e1 + 30 * e2) / den) < 1e-13 &&
         fabs(lse[0] - log(den)) < 1e-13,
     "non-causal: token 0 sees all three keys");

  /* Window 1, causal, ALiBi: each row sees itself only, bias 0. */
  a.causal = 1, a.sliding_window = 1;
  float slope[1] = {0.75f};
  a.alibi_slopes = slope;
  st = clpa_ref_prefill(&a);
  ok(st == CLPA_OK && out[4] == 20 && out[8] == 30 && lse[1] == 2.0 && lse[2] == 2.0,
     "window 1: each token sees only itself (ALiBi term 0)");

  /* A cached prefix of 2, one new token: that is decode at L = 3. */
  cached[0] = 2, cu[1] = 1, a.sliding_window = 0;
  float q3[4] = {1, 1, 1, 1};
  a.query = q3;
  st = clpa_ref_prefill(&a);
  double s0 = 1 - 2 * 0.75, s1 = 2 - 1 * 0.75, s2 = 2;
  double m = fmax(s0, fmax(s1, s2));
  double d3 = exp(s0 - m) + exp(s1 - m) + exp(s2 - m);
  ok(st == CLPA_OK && fabs(lse[0] - (m + log(d3))) < 1e-13 &&
         fabs(out[1] - (11 * exp(s0 - m) + 21 * exp(s1 - m) + 31 * exp(s2 - m)) / d3) < 1e-13,
     "cached 2 + 1 new: ALiBi slope*(j - p) with p = 2");
}

/* ======================================================================
 * Argument checks: each bad argument is named and nothing is written.
 * ==================================================================== */
static void expect_invalid(const scene *sc, clpa_ref_prefill_args a, const char *needle,
                           const char *what) {
  size_t no = out_elems(sc), nl = lse_elems(sc);
  double *out = poisoned(no), *lse = poisoned(nl), *out0 = poisoned(no);
  if (a.out) a.out = out;
  if (a.lse) a.lse = lse;
  clpa_err_clear();
  clpa_status st = clpa_ref_prefill(&a);
  int untouched =
      memcmp(out, out0, no * sizeof *out) == 0 && memcmp(lse, out0, nl * sizeof *lse) == 0;
  ok(st == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), needle) && untouched,
     "rejects %s: \"%s\"%s", what, clpa_last_error(), untouched ? "" : " (OUTPUT WRITTEN)");
  free(out);
  free(lse);
  free(out0);
}

static void test_prefill_invalid(void) {
  scene sc;
  for (;;) { /* the checks below want new tokens in the last sequence and >= 3 rows */
    scene_build(&sc, LENS_MIXED, OPT_ALL & ~OPT_WINDOW, 1, 64, 8, 2, 2);
    if (sc.num_seqs >= 2 && new_len(&sc, sc.num_seqs - 1) > 0 && sc.total >= 3) break;
    scene_free(&sc);
  }
  double dummy[1];
  clpa_ref_prefill_args good = scene_args(&sc, dummy, dummy);
  clpa_ref_prefill_args a;
#define BAD(set, needle, what)            \
  do {                                    \
    a = good;                             \
    set;                                  \
    expect_invalid(&sc, a, needle, what); \
  } while (0)
  const int32_t last = sc.num_seqs - 1, n_last = new_len(&sc, last);
  char name[64];

  BAD(a.num_heads = 3, "num_kv_heads", "num_heads % num_kv_heads != 0");
  BAD((a.kv.head_size = 12, a.kv.dtype = CLPA_DTYPE_FP8_E4M3), "x = 16", "head_size % x != 0");
  BAD(a.kv.dtype = (clpa_dtype)7, "dtype = 7", "invalid dtype");
  BAD(a.kv.block_size = 0, "block_size", "block_size = 0");
  BAD(a.kv.num_kv_heads = 0, "num_kv_heads", "num_kv_heads = 0");
  BAD(a.num_seqs = -1, "num_seqs", "negative num_seqs");
  BAD(a.max_blocks_per_seq = -1, "max_blocks_per_seq", "negative max_blocks_per_seq");
  BAD(a.q_stride = (size_t)sc.num_heads * 64 - 1, "q_stride", "short q_stride");
  BAD(a.query = NULL, "query", "NULL query");
  BAD(a.cu_seqlens_q = NULL, "cu_seqlens_q", "NULL cu_seqlens_q");
  BAD(a.cached_lens = NULL, "cached_lens", "NULL cached_lens");
  BAD(a.block_tables = NULL, "block_tables", "NULL block_tables");
  BAD(a.out = NULL, "out", "NULL out");
  BAD(a.key_cache = NULL, "key_cache", "NULL key_cache");
  BAD(a.value_cache = NULL, "value_cache", "NULL value_cache");
  BAD(a.scale = NAN, "scale", "NaN scale");
  BAD(a.scale = INFINITY, "scale", "infinite scale");
  BAD(a.soft_cap = -1, "soft_cap", "negative soft_cap");
  BAD(a.soft_cap = INFINITY, "soft_cap", "infinite soft_cap");
  BAD(a.sliding_window = -2, "sliding_window", "negative window");
  BAD(a.causal = 2, "causal = 2", "causal = 2");
  BAD(a.causal = -1, "causal = -1", "causal = -1");
  float bad_h[16];
  for (int h = 0; h < 16; h++) bad_h[h] = 0.5f;
  bad_h[sc.num_heads - 1] = NAN;
  BAD(a.sinks = bad_h, "sinks[", "NaN sink");
  BAD(a.alibi_slopes = bad_h, "alibi_slopes[", "NaN alibi slope");
  bad_h[sc.num_heads - 1] = INFINITY;
  BAD(a.sinks = bad_h, "sinks[", "+inf sink");
  BAD(a.alibi_slopes = bad_h, "alibi_slopes[", "infinite alibi slope");
  BAD(a.q_stride = SIZE_MAX / 2, "size_t", "query rows past size_t");

  /* Data errors, in the last sequence where one is: earlier sequences must
   * not be written either. */
  sc.cu[0] = 1;
  expect_invalid(&sc, good, "cu_seqlens_q[0] = 1 must be 0", "cu_seqlens_q[0] != 0");
  sc.cu[0] = 0;
  int32_t saved = sc.cu[last + 1];
  sc.cu[last + 1] = sc.cu[last] - 1;
  snprintf(name, sizeof name, "cu_seqlens_q[%d]", last + 1);
  expect_invalid(&sc, good, name, "decreasing cu_seqlens_q");
  sc.cu[last + 1] = saved;
  saved = sc.cached[last];
  sc.cached[last] = -1;
  snprintf(name, sizeof name, "cached_lens[%d] = -1", last);
  expect_invalid(&sc, good, name, "negative cached length");
  sc.cached[last] = sc.max_blocks * sc.block_size - n_last + 1;
  snprintf(name, sizeof name, "cached_lens[%d] + new tokens", last);
  expect_invalid(&sc, good, name, "cached + new past the block table");
  sc.cached[last] = saved;
  int32_t *last_row = sc.tables + (size_t)last * (size_t)sc.max_blocks;
  const int32_t kb = (sc.lens[last] - 1) / sc.block_size; /* holds the last new key */
  int32_t saved_blk = last_row[kb];
  snprintf(name, sizeof name, "block_tables[%d][%d]", last, kb);
  last_row[kb] = sc.num_blocks;
  expect_invalid(&sc, good, name, "block id == num_blocks (a new token's block)");
  last_row[kb] = -1;
  expect_invalid(&sc, good, name, "negative block id");
  last_row[kb] = saved_blk;
  saved_blk = last_row[0];
  last_row[0] = INT32_MAX;
  snprintf(name, sizeof name, "block_tables[%d][0]", last);
  expect_invalid(&sc, good, name, "block id INT32_MAX (a prefix block)");
  last_row[0] = saved_blk;

  /* Positions are int32: one sequence whose cached + new passes INT32_MAX
   * even though the block table would be long enough. */
  a = good;
  int32_t huge = INT32_MAX - n_last + 1, cu1[2] = {0, n_last};
  a.num_seqs = 1, a.cached_lens = &huge, a.cu_seqlens_q = cu1, a.max_blocks_per_seq = INT32_MAX;
  expect_invalid(&sc, a, "INT32_MAX", "cached + new past INT32_MAX");

  /* Nothing to do is fine. */
  a = good;
  a.num_seqs = 0, a.out = NULL, a.lse = NULL, a.query = NULL, a.cu_seqlens_q = NULL;
  a.cached_lens = NULL, a.block_tables = NULL;
  ok(clpa_ref_prefill(&a) == CLPA_OK, "num_seqs = 0 is fine with NULL buffers");
  ok(clpa_ref_prefill(NULL) == CLPA_ERR_INVALID_ARG, "NULL args rejected");
  int32_t *zero_cu = xcalloc((size_t)sc.num_seqs + 1, sizeof *zero_cu);
  double *out = poisoned(4);
  a = good;
  a.cu_seqlens_q = zero_cu, a.out = out, a.lse = NULL;
  for (int32_t i = 0; i < sc.num_seqs * sc.max_blocks; i++) sc.tables[i] = -5; /* never read */
  ok(clpa_ref_prefill(&a) == CLPA_OK && isnan(out[0]),
     "no new tokens anywhere: OK, nothing written, block tables not read");
  free(zero_cu);
  free(out);
#undef BAD
  scene_free(&sc);
}

int main(void) {
  rng_seed_from_env();
  test_prefill_known();
  test_prefill_random();
  test_prefill_vs_decode();
  test_prefill_chunked();
  for (int i = 0; i < 64; i++) test_split_merge(i % 32, i / 32, i);
  test_prefill_invalid();
  return done_testing();
}
