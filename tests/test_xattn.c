/*
 * XAttention's estimation on the device (cl/xattn.cl) against the CPU
 * oracle clpa_ref_xattn_estimate_dense (host/ref_xattn.c) on fresh random
 * inputs: the keys written into a paged cache through a shuffled block
 * table (unused slots NaN, the unused table column far outside the
 * cache), queries with and without padding between tokens; head sizes 64
 * and 128, strides 4/8/16, blocks 64/128, one, two, three and uneven key
 * chunks, q_offset 0 and > 0, GQA and MQA, f32/f16/bf16/fp8 caches and
 * f32/f16/bf16 queries. The oracle reads the same stored (decoded) values.
 * Prompts that are not whole strided groups (num_q % S != 0, as few as 1
 * and 3 queries, strides 4/8/16, cache blocks shorter than S so that the
 * padding reaches the unused table column): the kernels must treat the
 * padding as zero tokens without reading it, so the query buffer holds S
 * NaN tokens after the last, the cache slots after the last token are NaN,
 * and no case may raise a fault.
 *
 * Tolerances: masses |got - want| <= MASS_ATOL + MASS_RTOL |want| (the
 * device sums f32 scores and probabilities where the oracle uses double;
 * a block's mass is at most its BS rows). Masks exactly, except "near
 * cut" entries: where the oracle's running sum before a block lies within
 * NEAR_EPS T of tau T, or where the last kept and the first dropped block
 * have masses within NEAR_EPS T of each other (f32 rounding may swap
 * them). Those are a property of the random input alone, and a small case
 * holds few: a case of 120 causal entries whose rows have near-equal masses
 * (random keys, bf16) had 3 such ties, 6 entries, now and then. So each
 * case must leave NEAR_CASE_SHARE of its causal entries checked exactly,
 * and over the whole run the near-cut entries must be rare
 * (NEAR_MAX_SHARE of the causal entries, plus 2; runs show 0.2-0.4 %).
 *
 * Then: tau = 1 keeps every causal block; without a mass buffer the mask
 * is the same; a bad block id sets the fault bit; a structured input (attention
 * near the diagonal and on the first tokens) gives low density at tau
 * 0.9; every bad argument is refused, named, with "clpa_xattn_estimate: "
 * first and nothing written.
 */
#include <stdio.h>

#include "cl_util.h"
#include "attn_scene.h"
#include "ref_xattn.h"

#define MASS_ATOL 1e-6
#define MASS_RTOL 1e-4
#define NEAR_EPS 2e-5
#define NEAR_MAX_SHARE 0.01
#define NEAR_CASE_SHARE 0.75

#define F32 CLPA_DTYPE_F32
#define F16 CLPA_DTYPE_F16
#define BF16 CLPA_DTYPE_BF16
#define E4M3 CLPA_DTYPE_FP8_E4M3

static clpa_context *ctx;
static int no_mass;          /* run_device: leave mass NULL (the library's scratch) */
static int32_t last_faults;  /* run_device: the fault word after the run */
static size_t scratch_limit; /* run_device: params.scratch_limit */
static clpa_xattn_path xpath; /* run_device: params.path (reference: mma rounds the queries) */
static clpa_kv_layout_kind xlayout; /* make_scene: the cache's layout kind */
static int xinterleave;             /* make_scene: blocks two apart (K and V in one buffer) */
static size_t near_total, causal_total; /* check_case: the run's near-cut and causal entries */

typedef struct xcase {
  int heads, kv_heads, hs, bs; /* query heads, KV heads, head size, cache block size */
  int S, B, chunk, num_q, q_offset;
  clpa_dtype kv, io;
  double tau;
  int q_pad;
} xcase;

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) BAIL_OUT("out of memory");
  return p;
}

/* A case's scene (attn_scene.h): one sequence of q_offset cached keys and
 * num_q queries, the queries padded by 40 elements with q_pad. keyf and qf
 * (NULL: random) then rewrite every key and query. */
static void make_scene(const xcase *c, attn_scene *sc, float (*keyf)(int j, int d, int hs, int S),
                       float (*qf)(int i, int d, int hs, int S, int q_offset)) {
  const int32_t lens[1] = {c->q_offset + c->num_q}, cached[1] = {c->q_offset};
  const attn_scene_spec sp = {.seqs = 1, .heads = c->heads, .kv_heads = c->kv_heads,
                              .head_size = c->hs, .block_size = c->bs, .kv = c->kv, .io = c->io,
                              .lens = lens, .cached = cached, .q_pad = c->q_pad ? 40 : 0,
                              .q_amp = 2.0, .layout = xlayout,
                              .pitch_gap = xinterleave ? c->kv_heads * c->hs * c->bs : 0};
  attn_scene_build(sc, &sp);
  if (!keyf && !qf) return;
  for (int h = 0; keyf && h < c->kv_heads; h++)
    for (int j = 0; j < lens[0]; j++)
      for (int d = 0; d < c->hs; d++)
        sc->kf[attn_scene_key_index(sc, 0, h, j, d)] = keyf(j, d, c->hs, c->S);
  for (int i = 0; qf && i < c->num_q; i++)
    for (int e = 0; e < c->heads * c->hs; e++)
      sc->q[(size_t)i * sc->q_stride + (size_t)e] = qf(i, e % c->hs, c->hs, c->S, c->q_offset);
  attn_scene_store(sc);
}

/* The oracle, head by head, on the decoded values. */
static void reference(const xcase *c, const attn_scene *in, clpa_ref_xattn_dims *dims, double *mass,
                      uint8_t *mask) {
  const clpa_ref_xattn_shape sh = {c->num_q, in->lens[0], c->q_offset, c->hs, c->S, c->B};
  if (clpa_ref_xattn_dims_get(&sh, dims) != CLPA_OK) BAIL_OUT("shape: %s", clpa_last_error());
  const size_t nb = (size_t)dims->q_blocks * (size_t)dims->k_blocks;
  float *qh = xmalloc(sizeof(float) * (size_t)c->num_q * c->hs);
  float *kh = xmalloc(sizeof(float) * (size_t)in->lens[0] * c->hs);
  for (int h = 0; h < c->heads; h++) {
    const int kvh = h / (c->heads / c->kv_heads);
    for (int i = 0; i < c->num_q; i++)
      for (int d = 0; d < c->hs; d++)
        qh[(size_t)i * c->hs + d] = in->q[(size_t)i * in->q_stride + (size_t)h * c->hs + d];
    if (xpath == CLPA_XATTN_MMA) /* its products take the queries in the cache's dtype */
      attn_scene_round(c->kv, qh, NULL, (size_t)c->num_q * c->hs, 1.0f);
    for (int j = 0; j < in->lens[0]; j++)
      for (int d = 0; d < c->hs; d++) kh[(size_t)j * c->hs + d] = in->kf[attn_scene_key_index(in, 0, kvh, j, d)];
    if (clpa_ref_xattn_estimate_dense(&sh, qh, kh, c->tau, mass + h * nb, mask + h * nb, NULL) !=
        CLPA_OK)
      BAIL_OUT("reference: %s", clpa_last_error());
  }
  free(qh), free(kh);
}

/* The queries again, with S NaN tokens (all bits set: NaN in every io
 * dtype) after the last, which the kernels must never read. */
static cl_mem query_nan_tail(const xcase *c, const attn_scene *in) {
  const size_t tok = in->q_stride * clpa_dtype_size(c->io), have = tok * (size_t)c->num_q;
  uint8_t *bytes = xmalloc(have + tok * (size_t)c->S);
  memcpy(bytes, in->q_store, have);
  memset(bytes + have, 0xff, tok * (size_t)c->S);
  cl_mem q = test_buffer(ctx, bytes, have + tok * (size_t)c->S);
  free(bytes);
  return q;
}

/* Runs the device on a case; fills got_mass and got_mask. Returns the status. */
static clpa_status run_device(const xcase *c, const attn_scene *in, size_t nblocks, float *got_mass,
                              uint8_t *got_mask) {
  attn_scene_dev d;
  attn_scene_upload(ctx, in, 0, 0, &d);
  clReleaseMemObject(d.q);
  d.q = query_nan_tail(c, in);
  cl_mem mask = test_buffer(ctx, NULL, nblocks), mass = test_buffer(ctx, NULL, 4 * nblocks);
  test_poison(ctx, mask, nblocks);
  test_poison(ctx, mass, 4 * nblocks);
  clpa_xattn_params p;
  clpa_xattn_params_init(&p);
  p.num_heads = c->heads, p.key_cache = d.kc, p.kv = in->kv, p.k_scale = in->k_scale;
  p.block_table = d.bt, p.max_blocks_per_seq = in->max_blocks, p.query = d.q, p.q_dtype = c->io;
  p.q_stride = c->q_pad ? in->q_stride : 0, p.num_q = c->num_q, p.q_offset = c->q_offset;
  p.stride = c->S, p.block = c->B, p.chunk = c->chunk, p.tau = c->tau;
  p.mask = mask, p.mass = no_mass ? NULL : mass;
  p.scratch_limit = scratch_limit;
  p.path = xpath;
  cl_event ev = NULL;
  p.event = &ev;
  clpa_status st = clpa_xattn_estimate(ctx, &p);
  if (st == CLPA_OK) {
    clWaitForEvents(1, &ev);
    clReleaseEvent(ev);
    test_read(ctx, mask, got_mask, nblocks);
    if (!no_mass) test_read(ctx, mass, got_mass, 4 * nblocks);
    last_faults = 0;
    if (clpa_context_check_faults(ctx, &last_faults) != CLPA_OK || last_faults)
      diag("fault word %d: %s", last_faults, clpa_context_last_error(ctx));
  } else {
    diag("clpa_xattn_estimate: %s", clpa_context_last_error(ctx));
  }
  clReleaseMemObject(mask), clReleaseMemObject(mass);
  attn_scene_release(&d);
  return st;
}

/* Marks the near-cut entries of one query block's row (see the top). */
static int mark_near(const double *w, int d, double tau, uint8_t *near, int kb_count) {
  memset(near, 0, (size_t)kb_count);
  if (tau >= 1 || d < 2) return 0;
  int *order = xmalloc(sizeof(int) * (size_t)d);
  int n = 0;
  for (int j = 1; j < d; j++) order[n++] = j;
  for (int a = 1; a < n; a++) /* insertion sort: mass descending, index ascending */
    for (int b = a; b > 0 && (w[order[b]] > w[order[b - 1]] ||
                              (w[order[b]] == w[order[b - 1]] && order[b] < order[b - 1]));
         b--) {
      int t = order[b];
      order[b] = order[b - 1], order[b - 1] = t;
    }
  double T = 0;
  for (int kb = 0; kb <= d; kb++) T += w[kb];
  const double cut = tau * T, eps = NEAR_EPS * T;
  double acc = w[0] + w[d];
  int first_dropped = -1, last_kept = -1, marked = 0;
  for (int i = 0; i < n; i++) {
    const int j = order[i];
    if (fabs(acc - cut) <= eps) near[j] = 1;
    if (acc < cut)
      last_kept = j;
    else if (first_dropped < 0)
      first_dropped = j;
    acc += w[j];
  }
  if (last_kept >= 0 && first_dropped >= 0 && fabs(w[last_kept] - w[first_dropped]) <= eps)
    near[last_kept] = near[first_dropped] = 1;
  for (int kb = 0; kb < kb_count; kb++) marked += near[kb];
  free(order);
  return marked;
}

static void describe(const xcase *c, char *buf, size_t cap) {
  snprintf(buf, cap,
           "%s%s%sheads %d/%d hs %d bs %d S %d B %d chunk %d num_q %d q_offset %d kv %s io %s tau %g%s",
           xpath == CLPA_XATTN_MMA ? "mma: " : "",
           xlayout ? clpa_kv_layout_kind_name(xlayout) : "", xinterleave ? " (K, V in one buffer) " :
           xlayout ? " " : "", c->heads, c->kv_heads, c->hs, c->bs, c->S,
           c->B, c->chunk, c->num_q, c->q_offset, clpa_dtype_name(c->kv), clpa_dtype_name(c->io),
           c->tau, c->q_pad ? " q_stride" : "");
}

/* Checks one case; returns the device's density (kept / causal pairs). */
static double check_case(const xcase *c, const attn_scene *in, double *ref_density) {
  char name[300];
  describe(c, name, sizeof name);
  clpa_ref_xattn_dims dims;
  const clpa_ref_xattn_shape sh = {c->num_q, in->lens[0], c->q_offset, c->hs, c->S, c->B};
  if (clpa_ref_xattn_dims_get(&sh, &dims) != CLPA_OK) BAIL_OUT("shape: %s", clpa_last_error());
  const size_t nb = (size_t)dims.q_blocks * dims.k_blocks, n = nb * (size_t)c->heads;
  double *want_mass = xmalloc(sizeof(double) * n);
  uint8_t *want_mask = xmalloc(n), *got_mask = xmalloc(n), *near = xmalloc((size_t)dims.k_blocks);
  float *got_mass = xmalloc(sizeof(float) * n);
  reference(c, in, &dims, want_mass, want_mask);
  const clpa_status st = run_device(c, in, n, got_mass, got_mask);
  ok(st == CLPA_OK && last_faults == 0, "%s: enqueued (%s), no fault (%d)", name,
     clpa_status_name(st), last_faults);
  double density = -1;
  if (st == CLPA_OK) {
    size_t at;
    const double worst = test_worst(got_mass, want_mass, n, MASS_ATOL, MASS_RTOL, &at);
    if (!ok(worst <= 1.0, "%s: masses within tolerance (worst %.3g of allowed)", name, worst))
      diag("worst: head %zu qb %zu kb %zu: got %.9g want %.9g", at / nb, at % nb / dims.k_blocks,
           at % dims.k_blocks, got_mass[at], want_mass[at]);
    size_t causal = 0, near_count = 0, bad = 0, kept = 0, ref_kept = 0;
    for (int h = 0; h < c->heads; h++)
      for (int qb = 0; qb < dims.q_blocks; qb++) {
        const size_t row = h * nb + (size_t)qb * dims.k_blocks;
        const int d = dims.diag0 + qb;
        causal += (size_t)d + 1;
        near_count += (size_t)mark_near(want_mass + row, d, c->tau, near, dims.k_blocks);
        for (int kb = 0; kb < dims.k_blocks; kb++) {
          kept += got_mask[row + kb] == 1, ref_kept += want_mask[row + kb];
          if (got_mask[row + kb] != want_mask[row + kb] && !(near[kb] && got_mask[row + kb] <= 1)) {
            if (bad++ < 4)
              diag("mask differs: head %d qb %d kb %d (diag %d): got %d want %d, mass %.9g", h, qb,
                   kb, d, got_mask[row + kb], want_mask[row + kb], want_mass[row + kb]);
          }
        }
      }
    ok(bad == 0, "%s: masks equal but for near-cut entries (%zu differ elsewhere)", name, bad);
    ok((double)(causal - near_count) >= NEAR_CASE_SHARE * (double)causal,
       "%s: near-cut entries a few (%zu of %zu causal)", name, near_count, causal);
    near_total += near_count, causal_total += causal;
    density = (double)kept / (double)causal;
    if (ref_density) *ref_density = (double)ref_kept / (double)causal;
  }
  free(want_mass), free(want_mask), free(got_mask), free(got_mass), free(near);
  return density;
}

static void run_case(const xcase *c) {
  attn_scene in;
  make_scene(c, &in, NULL, NULL);
  check_case(c, &in, NULL);
  attn_scene_free(&in);
}

/* A prompt of partial strided groups: the cache slots after the last
 * token in its last block made NaN here (as the scene leaves them), so a
 * kernel that reads the padding's keys fails the case. */
static void run_partial(const xcase *c) {
  attn_scene in;
  make_scene(c, &in, NULL, NULL);
  const int len = c->q_offset + c->num_q, bs = c->bs;
  const int32_t last = in.tables[(len - 1) / bs];
  for (int h = 0; h < c->kv_heads; h++)
    for (int o = len % bs ? len % bs : bs; o < bs; o++)
      for (int d = 0; d < c->hs; d++) in.kf[clpa_kv_key_index(&in.kv, last, h, o, d)] = NAN;
  attn_scene_store(&in);
  check_case(c, &in, NULL);
  attn_scene_free(&in);
}

/* tau = 1: every causal block kept, nothing after the diagonals. */
static void test_tau_one(void) {
  const xcase c = {4, 2, 64, 16, 8, 64, 128, 384, 128, F16, F32, 1.0, 0};
  attn_scene in;
  make_scene(&c, &in, NULL, NULL);
  const int qb_n = c.num_q / c.B, kb_n = (c.q_offset + c.num_q) / c.B;
  const size_t n = (size_t)c.heads * qb_n * kb_n;
  float *mass = xmalloc(4 * n);
  uint8_t *mask = xmalloc(n);
  int good = run_device(&c, &in, n, mass, mask) == CLPA_OK;
  for (int h = 0; h < c.heads; h++)
    for (int qb = 0; qb < qb_n; qb++)
      for (int kb = 0; kb < kb_n; kb++)
        good &= mask[((size_t)h * qb_n + qb) * kb_n + kb] == (kb <= c.q_offset / c.B + qb);
  ok(good, "tau = 1 keeps every causal block and nothing else");
  free(mass), free(mask);
  attn_scene_free(&in);
}

/* mass is optional: without it the mask is the same. A block id outside
 * the cache sets CLPA_FAULT_BAD_BLOCK. */
static void test_no_mass_and_faults(void) {
  const xcase c = {2, 1, 64, 16, 8, 64, 128, 256, 128, F16, F32, 0.8, 0};
  attn_scene in;
  make_scene(&c, &in, NULL, NULL);
  const size_t n = (size_t)c.heads * (256 / 64) * (384 / 64);
  float *mass = xmalloc(4 * n);
  uint8_t *with = xmalloc(n), *without = xmalloc(n);
  int good = run_device(&c, &in, n, mass, with) == CLPA_OK && last_faults == 0;
  no_mass = 1;
  good &= run_device(&c, &in, n, mass, without) == CLPA_OK;
  no_mass = 0;
  ok(good && memcmp(with, without, n) == 0, "mass NULL: the same mask, no fault");
  in.tables[1] = 1 << 30;
  const clpa_status st = run_device(&c, &in, n, mass, with);
  ok(st == CLPA_OK && last_faults == CLPA_FAULT_BAD_BLOCK,
     "a block id outside the cache sets CLPA_FAULT_BAD_BLOCK (fault word %d)", last_faults);
  free(mass), free(with), free(without);
  attn_scene_free(&in);
}

/* In pieces (scratch_limit): the same masses and masks, bit for bit, as
 * in one piece: each row's states are computed the same way wherever it
 * runs. Pieces of 1 head x 1 query block (a limit of 1 byte), of 2 heads
 * with every row, and of 1 head x 2 query blocks, over uneven chunks and
 * a partial last block. */
static void test_pieces(void) {
  const xcase c = {4, 2, 64, 16, 8, 64, 192, 776, 128, F16, F32, 0.9, 0};
  attn_scene in;
  make_scene(&c, &in, NULL, NULL);
  const int rows = c.num_q / c.S, qb = (c.num_q + c.B - 1) / c.B;
  const int kb = (c.q_offset + c.num_q + c.B - 1) / c.B;
  const size_t n = (size_t)c.heads * (size_t)qb * (size_t)kb, per_row = (size_t)kb * 8;
  float *m1 = xmalloc(4 * n), *m2 = xmalloc(4 * n);
  uint8_t *k1 = xmalloc(n), *k2 = xmalloc(n);
  int good = run_device(&c, &in, n, m1, k1) == CLPA_OK;
  const size_t limits[] = {1, 2 * per_row * (size_t)rows, per_row * 2 * (size_t)(c.B / c.S)};
  const char *names[] = {"1 head x 1 query block", "2 heads, every row", "1 head x 2 query blocks"};
  for (int i = 0; i < 3; i++) {
    scratch_limit = limits[i];
    const int ran = run_device(&c, &in, n, m2, k2) == CLPA_OK;
    ok(good && ran && memcmp(m1, m2, 4 * n) == 0 && memcmp(k1, k2, n) == 0,
       "in pieces of %s: the same masses and mask", names[i]);
  }
  scratch_limit = 0;
  free(m1), free(m2), free(k1), free(k2);
  attn_scene_free(&in);
}

/* Structured scene (as test_host_ref_xattn's): a sink on the first S keys
 * and rotary-like features that make attention local. */
#define STRUCT_NUM_K 2048
static float struct_key(int j, int d, int hs, int S) {
  const double w = 2 * 3.14159265358979323846 / (2.0 * STRUCT_NUM_K);
  if (d == 0) return j < S ? 8.0f : 0.0f;
  if (d == 1) return 0.0f;
  const int f = d / 2;
  (void)hs;
  return (float)(2.0 * (d % 2 ? sin(f * w * j) : cos(f * w * j)) + rng_uniform(-0.05, 0.05));
}
static float struct_query(int i, int d, int hs, int S, int q_offset) {
  const double w = 2 * 3.14159265358979323846 / (2.0 * STRUCT_NUM_K), p = q_offset + i;
  (void)hs, (void)S;
  if (d == 0) return 8.0f;
  if (d == 1) return 0.0f;
  const int f = d / 2;
  return (float)(2.0 * (d % 2 ? sin(f * w * p) : cos(f * w * p)));
}

static void test_structured(void) {
  const xcase c = {1, 1, 64, 16, 8, 64, 512, STRUCT_NUM_K - 512, 512, F16, F32, 0.9, 0};
  attn_scene in;
  make_scene(&c, &in, struct_key, struct_query);
  double ref_density = -1;
  const double density = check_case(&c, &in, &ref_density);
  ok(density >= 0 && density < 0.2 && fabs(density - ref_density) < 0.01,
     "structured: density %.4f < 0.2 at tau 0.9 (reference %.4f)", density, ref_density);
  attn_scene_free(&in);
}

/* Every bad argument is refused with a message naming it and the public
 * call, before anything is enqueued: the poisoned outputs stay. */
static void test_bad_args(void) {
  clpa_kv_layout kv;
  clpa_kv_layout_init(&kv, F16, 8, 16, 2, 64);
  const size_t qbytes = 4 * 4 * 64 * 64;
  cl_mem q = test_buffer(ctx, NULL, qbytes), kc = test_buffer(ctx, NULL, kv.cache_bytes);
  cl_mem bt = test_buffer(ctx, NULL, 4 * 8), mask = test_buffer(ctx, NULL, 8);
  cl_mem mass = test_buffer(ctx, NULL, 32), small = test_buffer(ctx, NULL, 64);
  cl_mem tiny = test_buffer(ctx, NULL, 4);
  test_poison(ctx, mask, 8);
  test_poison(ctx, mass, 32);
  cl_event null_ev[1] = {NULL};
  clpa_xattn_params good;
  clpa_xattn_params_init(&good);
  good.num_heads = 4, good.key_cache = kc, good.kv = kv, good.block_table = bt;
  good.max_blocks_per_seq = 8, good.query = q, good.num_q = 64, good.q_offset = 64;
  good.stride = 8, good.block = 64, good.mask = mask, good.mass = mass;
  BAD_CALLS(clpa_xattn_params, 48);
  BAD(num_heads = 3, "num_heads = 3", CLPA_ERR_INVALID_ARG);
  BAD(num_heads = 0, "num_heads = 0", CLPA_ERR_INVALID_ARG);
  BAD(key_cache = NULL, "key_cache", CLPA_ERR_INVALID_ARG);
  BAD(cache = (const clpa_cache *)1, "not both", CLPA_ERR_INVALID_ARG);
  BAD(kv.dtype = (clpa_dtype)-3, "kv: ", CLPA_ERR_INVALID_ARG);
  BAD(kv.num_blocks = 9, "key_cache holds", CLPA_ERR_INVALID_ARG);
  BAD(q_dtype = E4M3, "q_dtype", CLPA_ERR_UNSUPPORTED);
  BAD(k_scale = 0, "k_scale", CLPA_ERR_INVALID_ARG);
  BAD(k_scale = NAN, "k_scale", CLPA_ERR_INVALID_ARG);
  BAD(stride = 5, "stride = 5", CLPA_ERR_INVALID_ARG);
  BAD(stride = 32, "stride = 32", CLPA_ERR_INVALID_ARG);
  BAD(block = 60, "block = 60", CLPA_ERR_INVALID_ARG);
  BAD(block = 0, "block = 0", CLPA_ERR_INVALID_ARG);
  BAD(chunk = 96, "chunk = 96", CLPA_ERR_INVALID_ARG);
  BAD(chunk = -64, "chunk = -64", CLPA_ERR_INVALID_ARG);
  BAD(tau = 0, "tau = 0", CLPA_ERR_INVALID_ARG);
  BAD(tau = 1.5, "tau = 1.5", CLPA_ERR_INVALID_ARG);
  BAD(tau = NAN, "tau = nan", CLPA_ERR_INVALID_ARG);
  BAD(num_q = 0, "num_q = 0", CLPA_ERR_INVALID_ARG);
  BAD(num_q = -8, "num_q = -8", CLPA_ERR_INVALID_ARG);
  BAD(q_offset = 32, "q_offset = 32", CLPA_ERR_INVALID_ARG);
  BAD(q_offset = -64, "q_offset = -64", CLPA_ERR_INVALID_ARG);
  BAD(q_offset = 2147483584, "block table", CLPA_ERR_INVALID_ARG);
  BAD(max_blocks_per_seq = 0, "max_blocks_per_seq = 0", CLPA_ERR_INVALID_ARG);
  BAD(max_blocks_per_seq = 7, "block table", CLPA_ERR_INVALID_ARG);
  BAD(max_blocks_per_seq = 1 << 30, "block_table holds", CLPA_ERR_INVALID_ARG);
  BAD(q_stride = 100, "q_stride = 100", CLPA_ERR_INVALID_ARG);
  BAD(q_stride = SIZE_MAX, "overflows", CLPA_ERR_INVALID_ARG);
  BAD(query = small, "query holds", CLPA_ERR_INVALID_ARG);
  BAD(query = NULL, "query", CLPA_ERR_INVALID_ARG);
  BAD(block_table = tiny, "block_table holds", CLPA_ERR_INVALID_ARG);
  BAD(mask = NULL, "mask", CLPA_ERR_INVALID_ARG);
  BAD(mask = tiny, "mask holds", CLPA_ERR_INVALID_ARG);
  BAD(mass = tiny, "mass holds", CLPA_ERR_INVALID_ARG);
  BAD(mass = mask, "different", CLPA_ERR_INVALID_ARG);
  BAD(num_wait_events = 1, "wait_events", CLPA_ERR_INVALID_ARG);
  BAD(wait_events = null_ev, "wait_events[0] is NULL", CLPA_ERR_INVALID_ARG);
  bad[n - 1].p.num_wait_events = 1;
  BAD_CALLS_CHECK(clpa_xattn_estimate, "clpa_xattn_estimate: ");
  ok(clpa_xattn_estimate(NULL, &good) == CLPA_ERR_INVALID_ARG, "NULL context");
  ok(clpa_xattn_estimate(ctx, NULL) == CLPA_ERR_INVALID_ARG, "NULL params");
  ok(test_untouched(ctx, mask, 8) && test_untouched(ctx, mass, 32),
     "no refused call wrote to mask or mass");
  cl_mem all[] = {q, kc, bt, mask, mass, small, tiny};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
}

/* heads, kv_heads, hs, bs, S, B, chunk, num_q, q_offset, kv, io, tau, q_pad */
static const xcase grid[] = {
    {4, 2, 64, 16, 8, 64, 0, 512, 0, F16, F32, 0.9, 0},        /* one chunk, GQA */
    {2, 2, 128, 16, 4, 64, 128, 256, 256, F16, F16, 0.9, 0},   /* four chunks, a prefix */
    {4, 1, 64, 16, 16, 128, 384, 640, 384, BF16, BF16, 0.7, 1}, /* MQA, 3 uneven chunks */
    {2, 2, 128, 32, 8, 128, 256, 776, 128, F32, F32, 0.95, 0}, /* partial last blocks */
    {2, 1, 64, 8, 8, 64, 64, 256, 64, E4M3, F16, 0.5, 0},      /* fp8, a chunk per block */
    {2, 2, 64, 16, 8, 64, 128, 256, 0, F16, F32, 0.9, 1},      /* two chunks, no prefix */
    {2, 1, 64, 16, 16, 64, 128, 512, 64, F16, F32, 0.9, 0},    /* 4 columns a block: per column */
    {1, 1, 16, 16, 8, 64, 0, 64, 131136, F16, F32, 0.9, 0},    /* 2048 candidates: the whole sort */
    {1, 1, 16, 16, 8, 64, 0, 64, 131200, F16, F32, 0.9, 0},    /* 2049: one work-item selects */
};

/* Partial strided groups (num_q % S != 0; the f32 path, then the mma
 * path where it applies): 1 and 3 queries, with and without a prefix;
 * cache blocks of 8 under S 16 (a column's padding lies in the next,
 * unused, table entry), an f32 cache, fp8, key chunks, the mma path's
 * own chunks (4350 queries: 1088 columns). */
static const xcase partial_grid[] = {
    {2, 1, 64, 16, 8, 64, 0, 1, 0, F16, F32, 0.9, 0},         /* one query */
    {2, 2, 64, 16, 8, 64, 128, 3, 128, F16, F32, 0.9, 1},     /* three, after a prefix */
    {2, 1, 64, 16, 4, 64, 128, 301, 64, F16, F16, 0.9, 1},    /* S 4, chunks */
    {4, 2, 64, 8, 16, 128, 256, 517, 128, BF16, F32, 0.9, 0}, /* S 16 over blocks of 8 */
    {2, 2, 128, 16, 8, 128, 0, 775, 256, F32, F32, 0.95, 0},  /* f32 cache */
    {2, 1, 64, 8, 8, 64, 64, 250, 64, E4M3, F16, 0.5, 0},     /* fp8, a chunk a block */
    {2, 1, 64, 16, 16, 256, 512, 1001, 512, F16, F32, 0.9, 1}, /* 16 columns a block */
    {1, 1, 32, 16, 4, 64, 0, 4350, 0, F16, F16, 0.9, 0},      /* the mma path's chunks */
};

/* The tensor-core path's own cases: key blocks of 128 columns (a block's
 * state carried across tiles), of 32 (two blocks a tile), partial blocks
 * and tiles, f16 queries copied as they are, a stride longer than a cache
 * block (each key's block looked up), the path's own chunks (lib/xattn.c's
 * MMA_CHUNKS: 1088 columns in five chunks of 192 and one of 128). */
static const xcase mma_grid[] = {
    {2, 1, 64, 16, 4, 512, 0, 1024, 512, F16, F32, 0.9, 0},    /* 128 columns a block */
    {2, 2, 128, 32, 8, 128, 256, 776, 128, F16, F32, 0.95, 0}, /* partial last blocks */
    {4, 2, 64, 16, 8, 256, 512, 512, 256, BF16, F32, 0.9, 1},  /* 32 columns a block */
    {2, 1, 64, 8, 16, 128, 0, 512, 128, F16, F16, 0.9, 0},     /* a column's keys in 2 blocks */
    {1, 1, 32, 16, 4, 64, 0, 4352, 0, F16, F16, 0.9, 0},      /* 1088 columns: the path's 6 chunks */
};

/* Where the mma path applies (lib/xattn.c's rule). */
static int mma_applies(const xcase *c) {
  const int bc = c->B / c->S;
  return (c->kv == F16 || c->kv == BF16) && c->hs % 32 == 0 && bc % 8 == 0 &&
         (64 % bc == 0 || bc % 64 == 0);
}

/* The path auto takes here, and the refusals of the path field. */
static void test_paths(void) {
  clpa_kv_layout kv;
  clpa_kv_layout_init(&kv, F16, 8, 16, 2, 64);
  cl_mem q = test_buffer(ctx, NULL, 4 * 4 * 64 * 64), kc = test_buffer(ctx, NULL, kv.cache_bytes);
  cl_mem bt = test_buffer(ctx, NULL, 4 * 8), mask = test_buffer(ctx, NULL, 64);
  clpa_xattn_params p;
  clpa_xattn_params_init(&p);
  p.num_heads = 4, p.key_cache = kc, p.kv = kv, p.block_table = bt, p.max_blocks_per_seq = 8;
  p.query = q, p.num_q = 64, p.q_offset = 64, p.stride = 8, p.block = 64, p.mask = mask;
  clpa_xattn_path got = (clpa_xattn_path)-1;
  clpa_device_info info;
  if (clpa_context_device_info(ctx, &info) != CLPA_OK) BAIL_OUT("device info");
  const int nv = info.lanes == CLPA_LANES_NV_PTX; /* the lent GPUs are compute capability 8.0+ */
  const clpa_status st = clpa_xattn_choice(ctx, &p, &got);
  ok(st == CLPA_OK && got == (nv ? CLPA_XATTN_MMA : CLPA_XATTN_F32), "auto takes %s here (got %d)",
     nv ? "mma" : "f32", (int)got);
  p.path = CLPA_XATTN_MMA;
  ok(clpa_xattn_choice(ctx, &p, &got) == CLPA_OK && got == CLPA_XATTN_MMA, "mma when forced");
  p.path = (clpa_xattn_path)3;
  ok(clpa_xattn_choice(ctx, &p, &got) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_context_last_error(ctx), "path = 3"),
     "path 3 refused: %s", clpa_context_last_error(ctx));
  p.path = CLPA_XATTN_MMA, p.block = 32; /* 4 columns a block */
  ok(clpa_xattn_choice(ctx, &p, &got) == CLPA_ERR_UNSUPPORTED &&
         strstr(clpa_context_last_error(ctx), "block / stride 4"),
     "mma with 4 columns a block refused: %s", clpa_context_last_error(ctx));
  p.block = 64, p.kv.dtype = F32, p.kv.cache_bytes *= 2, p.key_cache = NULL;
  cl_mem k32 = test_buffer(ctx, NULL, p.kv.cache_bytes);
  p.key_cache = k32;
  ok(clpa_xattn_choice(ctx, &p, &got) == CLPA_ERR_UNSUPPORTED &&
         strstr(clpa_context_last_error(ctx), "cache f32"),
     "mma with an f32 cache refused: %s", clpa_context_last_error(ctx));
  p.path = CLPA_XATTN_AUTO;
  ok(clpa_xattn_choice(ctx, &p, &got) == CLPA_OK && got == CLPA_XATTN_F32,
     "auto with an f32 cache: f32");
  /* a token pool (blocks of 1: the same bytes as 8 blocks of 16) */
  clpa_kv_layout_init(&p.kv, F16, 128, 1, 2, 64);
  cl_mem bt1 = test_buffer(ctx, NULL, 4 * 128);
  p.key_cache = kc, p.block_table = bt1, p.max_blocks_per_seq = 128;
  ok(clpa_xattn_choice(ctx, &p, &got) == CLPA_OK && got == CLPA_XATTN_F32,
     "auto over blocks of 1: f32");
  p.path = CLPA_XATTN_MMA;
  ok(clpa_xattn_choice(ctx, &p, &got) == CLPA_ERR_UNSUPPORTED &&
         strstr(clpa_context_last_error(ctx), "path mma takes cache blocks of an even number of"
                                              " tokens, and block_size is 1"),
     "mma over blocks of 1 refused: %s", clpa_context_last_error(ctx));
  cl_mem all[] = {q, kc, bt, mask, k32, bt1};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
}

int main(void) {
  rng_seed_from_env();
  ctx = test_context(0);
  for (int pass = 0; pass < 2; pass++) { /* f32 products, then tensor cores */
    xpath = pass ? CLPA_XATTN_MMA : CLPA_XATTN_F32;
    for (size_t i = 0; i < sizeof grid / sizeof *grid; i++)
      if (!pass || mma_applies(&grid[i])) run_case(&grid[i]);
    for (size_t i = 0; pass && i < sizeof mma_grid / sizeof *mma_grid; i++) run_case(&mma_grid[i]);
    for (size_t i = 0; i < sizeof partial_grid / sizeof *partial_grid; i++)
      if (!pass || mma_applies(&partial_grid[i])) run_partial(&partial_grid[i]);
    test_tau_one();
    test_no_mass_and_faults();
    test_pieces();
    test_structured();
  }
  /* Page sizes (issue 46): the f32 path over blocks of 1 (SGLang's token
   * pool) and 256, the first grid case otherwise (the mma path takes even
   * block sizes: lib/xattn.c's mma_applies) */
  xpath = CLPA_XATTN_F32;
  for (int bs = 1; bs <= 256; bs *= 256) {
    xcase c = grid[0];
    c.bs = bs;
    run_case(&c);
  }
  /* The HND and NHD layouts (the f32 path reads every kind), and blocks a block_pitch apart
   * as K and V interleaved in one buffer leave them (clpa_layout.h) */
  for (int k = 0; k < 3; k++) {
    xlayout = k == 2 ? CLPA_KV_LAYOUT_NHD : CLPA_KV_LAYOUT_HND, xinterleave = k > 0;
    run_case(&grid[k == 1 ? 0 : 2]);
  }
  xlayout = CLPA_KV_LAYOUT_SPLIT_KEY, xinterleave = 1;
  run_case(&grid[0]);
  xinterleave = 0;
  xpath = CLPA_XATTN_AUTO;
  ok(near_total <= (size_t)(NEAR_MAX_SHARE * (double)causal_total) + 2,
     "near-cut entries rare over the run (%zu of %zu causal)", near_total, causal_total);
  test_paths();
  test_bad_args();
  return test_context_done(ctx);
}
