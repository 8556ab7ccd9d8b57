/*
 * attn_scene.h — one random paged-attention scene for the kernel tests
 * (test_decode, test_prefill, test_xattn), and the same scene on the
 * device.
 *
 * The test draws the sequences' lengths (each test has its own corner
 * cases): the keys of each sequence and, for prefill, how many of them
 * are cached before its new tokens (the queries). The scene draws the
 * rest:
 *
 *   - block tables: every sequence's blocks taken from a shuffled pool
 *     with 3 spare blocks; odd sequences share half the whole blocks they
 *     and the sequence before may share (a fork, or with `cached` a radix
 *     hit within both prefixes); one spare column; entries past a
 *     sequence's blocks far outside the cache (never read);
 *   - caches: slots that hold a token random (keys in +-ATTN_SCENE_K_MAX,
 *     values in +-ATTN_SCENE_V_MAX), every other slot NaN, stored in the
 *     cache's dtype (fp8 with random per-tensor scales) and decoded back,
 *     so the reference reads exactly what the device reads;
 *   - queries: rows of heads * head_size, then q_pad NaN elements (never
 *     read), stored in the io dtype and decoded back alike;
 *   - the options the spec asks for: ALiBi slopes, sinks, a soft cap, a
 *     sliding window.
 *
 * attn_scene_upload copies a scene into device buffers, with its output
 * (and lse) poisoned; attn_scene_release and attn_scene_free let go.
 * attn_scene_csr gives the same block tables as a CSR page table
 * (FlashInfer's indptr, indices and last_page_len) on the device.
 *
 * Header-only, like cl_util.h: the draws come from the test's own tap.h
 * generator (its state is per program file), so CLPA_TEST_SEED replays
 * the scenes too. Include after cl_util.h.
 */
#ifndef CLPA_TEST_ATTN_SCENE_H
#define CLPA_TEST_ATTN_SCENE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cl_util.h"

#define ATTN_SCENE_K_MAX 1.5 /* the keys' largest magnitude */
#define ATTN_SCENE_V_MAX 2.0 /* the values' largest magnitude */

/* What a scene is drawn from. */
typedef struct attn_scene_spec {
  int seqs, heads, kv_heads, head_size, block_size;
  clpa_dtype kv, io;     /* the caches' storage dtype; the queries' */
  const int32_t *lens;   /* [seqs]: the keys of each sequence */
  const int32_t *cached; /* [seqs]: a prefill batch, lens - cached new tokens (the queries) a
                            sequence, blocks shared only within both prefixes; NULL: decode */
  int q_rows;            /* decode's query tokens (with cached: their sum, set by the scene) */
  int q_pad;             /* NaN elements after each query row's heads * head_size */
  double q_amp;          /* queries uniform in +-q_amp */
  int alibi, sinks, softcap;
  int window_max; /* > 0: a sliding window of 1..window_max tokens */
  clpa_kv_layout_kind layout; /* the caches' layout kind (0: split-key) */
  int pitch_gap; /* > 0: blocks that many elements (a multiple of x) further apart than their
                    size (block_pitch), the gaps NaN */
} attn_scene_spec;

/* One scene on the host. */
typedef struct attn_scene {
  int seqs, heads, q_rows, num_blocks, max_blocks;
  clpa_dtype io;
  clpa_kv_layout kv;
  size_t q_stride, cache_elems;
  int32_t *lens, *tables;            /* [seqs], [seqs][max_blocks] */
  int32_t *cached, *cu;              /* prefill: [seqs], cu_seqlens_q [seqs + 1]; decode: NULL */
  float *q, *kf, *vf;                /* decoded: what the reference reads */
  void *q_store, *k_store, *v_store; /* as stored: what the device reads */
  float *alibi, *sinks;              /* [heads] or NULL */
  float k_scale, v_scale, soft_cap;
  int window;
} attn_scene;

/* The tensor-core instructions are real on ctx's device (NVIDIA, compute
 * capability 8.0 on), not emulated. */
static inline int attn_scene_mma_real(clpa_context *ctx) {
  clpa_device_info info;
  clpa_context_device_info(ctx, &info);
  return info.lanes == CLPA_LANES_NV_PTX && info.nv_compute_capability >= 80;
}

/* Whether the mma paths take fp8 caches on ctx's device
 * (host/decode_planner.c's clpa_planner_mma_fp8): emulated, or NVIDIA
 * from compute capability 8.9 (cvt.rn.f16x2.e4m3x2). */
static inline int attn_scene_mma_fp8(clpa_context *ctx) {
  clpa_device_info info;
  clpa_context_device_info(ctx, &info);
  return info.lanes != CLPA_LANES_NV_PTX || info.nv_compute_capability >= 89;
}

/* The dtype the mma paths round queries and probabilities to: the cache's,
 * f16 for fp8. */
static inline clpa_dtype attn_scene_mma_dtype(clpa_dtype kv) {
  return clpa_dtype_size(kv) == 1 ? CLPA_DTYPE_F16 : kv;
}

static inline void *attn_scene_alloc(size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (!p) BAIL_OUT("out of memory");
  return p;
}

/* Index in kf/vf (and the stores) of sequence s's token j, KV head h, dimension d. */
static inline size_t attn_scene_key_index(const attn_scene *sc, int s, int h, int j, int d) {
  const int bs = sc->kv.block_size;
  return clpa_kv_key_index(&sc->kv, sc->tables[(size_t)s * sc->max_blocks + j / bs], h, j % bs, d);
}
static inline size_t attn_scene_value_index(const attn_scene *sc, int s, int h, int j, int d) {
  const int bs = sc->kv.block_size;
  return clpa_kv_value_index(&sc->kv, sc->tables[(size_t)s * sc->max_blocks + j / bs], h, j % bs,
                             d);
}

/* n floats through a dtype and back: what storing them keeps. */
static inline void attn_scene_round(clpa_dtype dt, float *x, void *store, size_t n, float scale) {
  void *tmp = store ? store : attn_scene_alloc(clpa_dtype_size(dt) * n);
  clpa_dtype_encode(dt, x, tmp, n, scale);
  clpa_dtype_decode(dt, tmp, x, n, scale);
  if (!store) free(tmp);
}

/* After the test rewrote kf, vf or q: stores them again, and rounds them to what is stored. */
static inline void attn_scene_store(attn_scene *sc) {
  attn_scene_round(sc->kv.dtype, sc->kf, sc->k_store, sc->cache_elems, sc->k_scale);
  attn_scene_round(sc->kv.dtype, sc->vf, sc->v_store, sc->cache_elems, sc->v_scale);
  attn_scene_round(sc->io, sc->q, sc->q_store, sc->q_stride * (size_t)sc->q_rows, 1.0f);
}

/* The queries as a path that takes them in `dt` sees them (the mma paths
 * round them to the cache's dtype); the stored queries stay. */
static inline void attn_scene_round_queries(attn_scene *sc, clpa_dtype dt) {
  attn_scene_round(dt, sc->q, NULL, sc->q_stride * (size_t)sc->q_rows, 1.0f);
}

/* Block tables: shuffled pool, sharing, garbage past each sequence's blocks. */
static inline void attn_scene_tables(attn_scene *sc, const attn_scene_spec *sp) {
  const int bs = sp->block_size, n = sp->seqs;
  int max_len = 0, total_blocks = 0;
  for (int s = 0; s < n; s++) {
    max_len = sp->lens[s] > max_len ? sp->lens[s] : max_len;
    total_blocks += (sp->lens[s] + bs - 1) / bs;
  }
  sc->max_blocks = (max_len + bs - 1) / bs + 1; /* one column never used */
  sc->num_blocks = total_blocks + 3;             /* spare blocks stay NaN */
  int32_t *perm = attn_scene_alloc(sizeof(int32_t) * (size_t)sc->num_blocks);
  for (int i = 0; i < sc->num_blocks; i++) perm[i] = i;
  for (int i = sc->num_blocks - 1; i > 0; i--) {
    const int j = (int)rng_below((uint32_t)i + 1);
    const int32_t t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  const size_t mb = (size_t)sc->max_blocks;
  sc->tables = attn_scene_alloc(sizeof(int32_t) * (size_t)n * mb);
  for (size_t i = 0; i < (size_t)n * mb; i++) sc->tables[i] = 0x7fff0000 + (int32_t)i;
  int next = 0;
  for (int s = 0; s < n; s++) {
    const int nb = (sp->lens[s] + bs - 1) / bs;
    int shared = 0;
    if (s % 2 == 1) { /* whole blocks only: half of what both may share leaves their last out */
      const int prev = sp->cached ? sp->cached[s - 1] / bs : (sp->lens[s - 1] + bs - 1) / bs;
      const int mine = sp->cached ? sp->cached[s] / bs : nb;
      shared = (prev < mine ? prev : mine) / 2;
      memcpy(sc->tables + (size_t)s * mb, sc->tables + (size_t)(s - 1) * mb,
             sizeof(int32_t) * (size_t)shared);
    }
    for (int b = shared; b < nb; b++) sc->tables[(size_t)s * mb + (size_t)b] = perm[next++];
  }
  free(perm);
}

/* Caches: slots that hold a token random, the others NaN; stored and decoded back. */
static inline void attn_scene_caches(attn_scene *sc, const attn_scene_spec *sp) {
  if (clpa_kv_layout_init_kind(&sc->kv, sp->layout, sp->kv, sc->num_blocks, sp->block_size,
                               sp->kv_heads, sp->head_size) != CLPA_OK)
    BAIL_OUT("layout: %s", clpa_last_error());
  if (sp->pitch_gap) {
    sc->kv.block_pitch = sc->kv.block_stride + (uint64_t)sp->pitch_gap;
    if (clpa_kv_layout_check(&sc->kv, &sc->kv) != CLPA_OK) BAIL_OUT("pitch: %s", clpa_last_error());
  }
  const int bs = sp->block_size;
  sc->cache_elems = (size_t)(sc->kv.cache_bytes / clpa_dtype_size(sp->kv));
  char *used = attn_scene_alloc((size_t)sc->num_blocks * (size_t)bs);
  for (int s = 0; s < sp->seqs; s++)
    for (int j = 0; j < sp->lens[s]; j++)
      used[(size_t)sc->tables[(size_t)s * sc->max_blocks + j / bs] * bs + j % bs] = 1;
  /* fp8: the keys stay within e4m3's 448 (1.5 / 0.004 = 375) */
  const int fp8 = clpa_dtype_size(sp->kv) == 1;
  sc->k_scale = fp8 ? (float)rng_uniform(0.004, 0.02) : 1.0f;
  sc->v_scale = fp8 ? (float)rng_uniform(0.004, 0.02) : 1.0f;
  sc->kf = attn_scene_alloc(sizeof(float) * sc->cache_elems);
  sc->vf = attn_scene_alloc(sizeof(float) * sc->cache_elems);
  for (size_t i = 0; sp->pitch_gap && i < sc->cache_elems; i++) sc->kf[i] = sc->vf[i] = NAN;
  for (int b = 0; b < sc->num_blocks; b++)
    for (int h = 0; h < sp->kv_heads; h++)
      for (int d = 0; d < sp->head_size; d++)
        for (int o = 0; o < bs; o++) {
          const int u = used[(size_t)b * bs + o];
          sc->kf[clpa_kv_key_index(&sc->kv, b, h, o, d)] =
              u ? (float)rng_uniform(-ATTN_SCENE_K_MAX, ATTN_SCENE_K_MAX) : NAN;
          sc->vf[clpa_kv_value_index(&sc->kv, b, h, o, d)] =
              u ? (float)rng_uniform(-ATTN_SCENE_V_MAX, ATTN_SCENE_V_MAX) : NAN;
        }
  free(used);
  const size_t esz = clpa_dtype_size(sp->kv);
  sc->k_store = attn_scene_alloc(esz * sc->cache_elems);
  sc->v_store = attn_scene_alloc(esz * sc->cache_elems);
}

static inline void attn_scene_queries(attn_scene *sc, const attn_scene_spec *sp) {
  const size_t row = (size_t)sp->heads * (size_t)sp->head_size;
  sc->q_stride = row + (size_t)sp->q_pad;
  const size_t qn = sc->q_stride * (size_t)sc->q_rows;
  sc->q = attn_scene_alloc(sizeof(float) * (qn ? qn : sc->q_stride));
  for (size_t i = 0; i < qn; i++)
    sc->q[i] = i % sc->q_stride < row ? (float)rng_uniform(-sp->q_amp, sp->q_amp) : NAN;
  sc->q_store = attn_scene_alloc(clpa_dtype_size(sp->io) * (qn ? qn : sc->q_stride));
}

static inline void attn_scene_options(attn_scene *sc, const attn_scene_spec *sp) {
  if (sp->alibi) {
    sc->alibi = attn_scene_alloc(sizeof(float) * (size_t)sp->heads);
    for (int h = 0; h < sp->heads; h++) sc->alibi[h] = (float)rng_uniform(0.0, 0.3);
  }
  if (sp->sinks) {
    sc->sinks = attn_scene_alloc(sizeof(float) * (size_t)sp->heads);
    for (int h = 0; h < sp->heads; h++) sc->sinks[h] = (float)rng_uniform(-1.0, 3.0);
  }
  sc->soft_cap = sp->softcap ? (float)rng_uniform(1.0, 4.0) : 0.0f;
  sc->window = sp->window_max > 0 ? 1 + (int)rng_below((uint32_t)sp->window_max) : 0;
}

/* Draws a scene from its spec (see the top). */
static inline void attn_scene_build(attn_scene *sc, const attn_scene_spec *sp) {
  memset(sc, 0, sizeof *sc);
  const size_t n = (size_t)sp->seqs;
  sc->seqs = sp->seqs, sc->heads = sp->heads, sc->q_rows = sp->q_rows, sc->io = sp->io;
  sc->lens = attn_scene_alloc(sizeof(int32_t) * n);
  memcpy(sc->lens, sp->lens, sizeof(int32_t) * n);
  if (sp->cached) {
    sc->cached = attn_scene_alloc(sizeof(int32_t) * n);
    memcpy(sc->cached, sp->cached, sizeof(int32_t) * n);
    sc->cu = attn_scene_alloc(sizeof(int32_t) * (n + 1));
    for (size_t s = 0; s < n; s++) sc->cu[s + 1] = sc->cu[s] + sc->lens[s] - sc->cached[s];
    sc->q_rows = sc->cu[n];
  }
  attn_scene_tables(sc, sp);
  attn_scene_caches(sc, sp);
  attn_scene_queries(sc, sp);
  attn_scene_store(sc);
  attn_scene_options(sc, sp);
}

static inline void attn_scene_free(attn_scene *sc) {
  free(sc->lens), free(sc->tables), free(sc->cached), free(sc->cu);
  free(sc->q), free(sc->kf), free(sc->vf), free(sc->q_store), free(sc->k_store);
  free(sc->v_store), free(sc->alibi), free(sc->sinks);
  memset(sc, 0, sizeof *sc);
}

/* A scene on the device. NULL where the scene (or the upload) has none. */
typedef struct attn_scene_dev {
  cl_mem q, kc, vc, bt, lens, al, sk; /* queries, caches, tables, lengths, ALiBi, sinks */
  cl_mem indptr, indices, last;       /* attn_scene_csr's table */
  int32_t num_indices;
  cl_mem ks, vs;                      /* the fp8 scales as buffers (dev_scale) */
  cl_mem out, lse;                    /* q_rows x heads x head_size in io; q_rows x heads f32 */
  size_t out_bytes, lse_bytes;
} attn_scene_dev;

/* Copies a scene to the device; the output (and with `lse` the lse) is
 * poisoned; with `dev_scale` the fp8 scales go in buffers too. */
static inline void attn_scene_upload(clpa_context *ctx, const attn_scene *sc, int lse,
                                     int dev_scale, attn_scene_dev *d) {
  const size_t esz = clpa_dtype_size(sc->kv.dtype), qsz = clpa_dtype_size(sc->io);
  const size_t q_rows = (size_t)(sc->q_rows > 0 ? sc->q_rows : 1), rows = q_rows * sc->heads;
  memset(d, 0, sizeof *d);
  d->q = test_buffer(ctx, sc->q_store, qsz * sc->q_stride * q_rows);
  d->kc = test_buffer(ctx, sc->k_store, esz * sc->cache_elems);
  d->vc = test_buffer(ctx, sc->v_store, esz * sc->cache_elems);
  d->bt = test_buffer(ctx, sc->tables, sizeof(int32_t) * (size_t)sc->seqs * sc->max_blocks);
  d->lens = test_buffer(ctx, sc->lens, sizeof(int32_t) * (size_t)sc->seqs);
  d->al = sc->alibi ? test_buffer(ctx, sc->alibi, sizeof(float) * (size_t)sc->heads) : NULL;
  d->sk = sc->sinks ? test_buffer(ctx, sc->sinks, sizeof(float) * (size_t)sc->heads) : NULL;
  d->ks = dev_scale ? test_buffer(ctx, &sc->k_scale, sizeof(float)) : NULL;
  d->vs = dev_scale ? test_buffer(ctx, &sc->v_scale, sizeof(float)) : NULL;
  d->out_bytes = qsz * rows * (size_t)sc->kv.head_size, d->lse_bytes = sizeof(float) * rows;
  d->out = test_buffer(ctx, NULL, d->out_bytes);
  test_poison(ctx, d->out, d->out_bytes);
  if (lse) {
    d->lse = test_buffer(ctx, NULL, d->lse_bytes);
    test_poison(ctx, d->lse, d->lse_bytes);
  }
}

static inline void attn_scene_release(attn_scene_dev *d) {
  cl_mem all[] = {d->q,  d->kc, d->vc,  d->bt,     d->lens,    d->al,  d->sk,
                  d->ks, d->vs, d->out, d->lse, d->indptr, d->indices, d->last};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    if (all[i]) clReleaseMemObject(all[i]);
  memset(d, 0, sizeof *d);
}

/* The scene's block tables as a CSR page table on the device (d->indptr,
 * d->indices, d->last, d->num_indices): each sequence's blocks as its row
 * has them (shuffled, odd sequences sharing with the one before), then
 * `spare` entries far outside the cache that no row covers (never read);
 * an empty sequence's last_page_len is garbage (never read). With `host`
 * the three arrays stay for the test (free them), else they are freed. */
typedef struct attn_scene_csr_host {
  int32_t *indptr, *indices, *last;
  int32_t num_indices;
} attn_scene_csr_host;
static inline void attn_scene_csr(clpa_context *ctx, const attn_scene *sc, int spare,
                                  attn_scene_dev *d, attn_scene_csr_host *host) {
  const int n = sc->seqs, bs = sc->kv.block_size;
  attn_scene_csr_host h;
  h.indptr = attn_scene_alloc(sizeof(int32_t) * (size_t)(n + 1));
  h.last = attn_scene_alloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
  for (int s = 0; s < n; s++) h.indptr[s + 1] = h.indptr[s] + (sc->lens[s] + bs - 1) / bs;
  h.num_indices = h.indptr[n] + spare;
  h.indices = attn_scene_alloc(sizeof(int32_t) * (size_t)(h.num_indices ? h.num_indices : 1));
  for (int s = 0; s < n; s++) {
    const int pages = h.indptr[s + 1] - h.indptr[s];
    memcpy(h.indices + h.indptr[s], sc->tables + (size_t)s * sc->max_blocks,
           sizeof(int32_t) * (size_t)pages);
    h.last[s] = pages ? sc->lens[s] - (pages - 1) * bs : 0x7fff0000;
  }
  for (int i = h.indptr[n]; i < h.num_indices; i++) h.indices[i] = 0x7ffe0000 + i;
  d->indptr = test_buffer(ctx, h.indptr, sizeof(int32_t) * (size_t)(n + 1));
  d->indices = h.num_indices ? test_buffer(ctx, h.indices, sizeof(int32_t) * (size_t)h.num_indices)
                             : NULL;
  d->last = test_buffer(ctx, h.last, sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
  d->num_indices = h.num_indices;
  if (host) {
    *host = h;
  } else {
    free(h.indptr), free(h.indices), free(h.last);
  }
}

/* A call forced onto a path that cannot take the scene (an HND or NHD
 * cache on a tensor-core path, a block size the path's kernel does not
 * take) returned st: it must be CLPA_ERR_UNSUPPORTED with a message
 * holding `want` (the call, the path and what it cannot take), and
 * nothing written. Releases the scene. */
static inline int attn_scene_refused(clpa_context *ctx, clpa_status st, const char *want,
                                     attn_scene *sc, attn_scene_dev *d) {
  const char *msg = clpa_context_last_error(ctx);
  const int good = ok(st == CLPA_ERR_UNSUPPORTED && strstr(msg, want) &&
                          test_untouched(ctx, d->out, d->out_bytes),
                      "refused, nothing written (%s)", msg);
  attn_scene_release(d);
  attn_scene_free(sc);
  return good;
}

#endif
