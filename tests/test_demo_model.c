/*
 * test_demo_model.c — clpa-demo's model on the device against the host
 * reference engine (tools/demo/reference.h), step by step, as an engine
 * drives it: a prefill of sequences of different lengths, decode steps,
 * mixed batches (decodes and prefill chunks in one forward), chunked
 * prefill, and a radix-cache hit (a sequence whose block table starts
 * with another's blocks, prefilled with cached_len > 0). Block tables and
 * slots are built by hand.
 *
 * Tolerance: every step's last-token logits, worst |device - reference|
 * over the reference's largest |logit|: 1e-3 with f32 weights and an f32
 * KV cache (f32 GEMMs and attention against double), 2e-2 with f16 weights
 * and an f16 KV cache (the weights are the same on both sides, the f16
 * cache rounds every K/V element by up to 2^-11 relative, which the
 * reference does not). The greedy token must match wherever the
 * reference's top two logits are further apart than the tolerance allows.
 * First, the row kernels alone (argmax, RMSNorm) against the host.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cl_util.h"
#include "kernels.h"
#include "model.h"
#include "parallel.h"
#include "reference.h"
#include "scheduler.h"
#include "workload.h"

#define MAX_SEQS 8
#define BLOCK 16
#define MB 32 /* blocks per sequence: 512 tokens */
#define NUM_BLOCKS 256

typedef struct tseq {
  int32_t blocks[MB];
  int32_t len;            /* tokens in the cache */
  int32_t next;           /* the greedy token after the last step (decode input) */
  int32_t tokens[MB * BLOCK];
  demo_ref_session *ref;
} tseq;

typedef struct world {
  const char *name;
  clpa_context *ctx;
  demo_model *m;
  const demo_config *cfg;
  clpa_cache *cache;
  tseq seq[MAX_SEQS];
  int32_t n_seqs, next_block;
  double tol;
  double worst; /* over all steps */
  float *logits;
  double *want;
} world;

/* A new sequence with fresh blocks, its first `shared` blocks taken from
 * another sequence (a prefix-cache hit), whose tokens it copies. */
static int new_seq(world *w, int from, int32_t shared_blocks) {
  tseq *s = &w->seq[w->n_seqs];
  memset(s, 0, sizeof *s);
  for (int32_t b = 0; b < MB; b++) {
    if (b < shared_blocks) {
      s->blocks[b] = w->seq[from].blocks[b];
    } else {
      if (w->next_block >= NUM_BLOCKS) BAIL_OUT("test out of blocks");
      s->blocks[b] = w->next_block++;
    }
  }
  s->ref = demo_ref_session_create(w->cfg, demo_model_host(w->m));
  if (!s->ref) BAIL_OUT("out of memory");
  if (shared_blocks) {
    int32_t n = shared_blocks * BLOCK;
    memcpy(s->tokens, w->seq[from].tokens, (size_t)n * sizeof(int32_t));
    if (demo_ref_session_append(s->ref, s->tokens, n, NULL)) BAIL_OUT("reference failed");
    s->len = n;
  }
  return w->n_seqs++;
}

typedef struct step_item {
  int seq;
  int32_t n; /* new tokens: 1 with decode (the sequence's greedy token), else random */
} step_item;

/* Runs one forward over items (decodes first, n == 1 with decode set) and
 * compares every sequence's last-token logits with the reference. */
static void run_step(world *w, const char *what, const step_item *items, int n_items,
                     int num_decode) {
  int32_t cu[MAX_SEQS + 1], cached[MAX_SEQS], tables[MAX_SEQS * MB], next[MAX_SEQS];
  static int32_t tokens[MAX_SEQS * MB * BLOCK];
  static int64_t slots[MAX_SEQS * MB * BLOCK];
  cu[0] = 0;
  for (int i = 0; i < n_items; i++) {
    tseq *s = &w->seq[items[i].seq];
    cached[i] = s->len;
    for (int32_t j = 0; j < items[i].n; j++) {
      int32_t pos = s->len + j, t = cu[i] + j;
      s->tokens[pos] = i < num_decode ? s->next : (int32_t)rng_below((uint32_t)w->cfg->vocab);
      tokens[t] = s->tokens[pos];
      slots[t] = (int64_t)s->blocks[pos / BLOCK] * BLOCK + pos % BLOCK;
    }
    cu[i + 1] = cu[i] + items[i].n;
    memcpy(tables + (size_t)i * MB, s->blocks, sizeof s->blocks);
  }
  demo_batch b = {n_items, num_decode, tokens, cu, cached, slots, tables, MB};
  demo_times times;
  clpa_status st = demo_model_forward(w->m, w->cache, &b, w->logits, next, &times);
  if (!ok(st == CLPA_OK, "%s %s: forward", w->name, what)) {
    diag("%s", demo_last_error());
    return;
  }
  double worst = 0;
  int worst_seq = -1, argmax_bad = 0;
  for (int i = 0; i < n_items; i++) {
    tseq *s = &w->seq[items[i].seq];
    if (demo_ref_session_append(s->ref, s->tokens + s->len, items[i].n, w->want))
      BAIL_OUT("reference failed");
    s->len += items[i].n;
    s->next = next[i];
    double maxabs = 0, err = 0;
    const float *got = w->logits + (size_t)i * w->cfg->vocab;
    for (int32_t v = 0; v < w->cfg->vocab; v++) {
      maxabs = fmax(maxabs, fabs(w->want[v]));
      double e = fabs(got[v] - w->want[v]);
      err = isnan(e) ? INFINITY : fmax(err, e);
    }
    double rel = err / maxabs;
    if (rel > worst || worst_seq < 0) worst = rel, worst_seq = i;
    int32_t top = demo_ref_argmax(w->want, w->cfg->vocab);
    double second = -INFINITY;
    for (int32_t v = 0; v < w->cfg->vocab; v++)
      if (v != top) second = fmax(second, w->want[v]);
    if (next[i] != top && w->want[top] - second > 2 * w->tol * maxabs) {
      argmax_bad++;
      diag("sequence %d: greedy %d, reference %d (gap %.4g)", i, (int)next[i], (int)top,
           w->want[top] - second);
    }
  }
  w->worst = fmax(w->worst, worst);
  ok(worst <= w->tol && !argmax_bad,
     "%s %s: %d seqs (%d decode), %d tokens: worst logit error %.3g of max |logit| (tol %.0e)",
     w->name, what, n_items, num_decode, (int)cu[n_items], worst, w->tol);
  if (times.attention_s + times.gemm_s + times.other_s > 0)
    diag("device time: attention %.2f ms, gemm %.2f ms, other %.2f ms", times.attention_s * 1e3,
         times.gemm_s * 1e3, times.other_s * 1e3);
}

/* A model of random weights, or (from != NULL) of from's host weights. */
static void world_init(world *w, clpa_context *ctx, const char *name, clpa_dtype wdt,
                       clpa_dtype kvdt, double tol, const demo_host_weights *from) {
  static demo_config cfg;
  memset(w, 0, sizeof *w);
  w->name = name;
  w->ctx = ctx;
  w->tol = tol;
  if (demo_config_preset("tiny", &cfg)) BAIL_OUT("no tiny preset");
  clpa_status st = from ? demo_model_create_host(ctx, &cfg, from, wdt, &w->m)
                        : demo_model_create_random(ctx, &cfg, 1234, wdt, &w->m);
  if (!ok(st == CLPA_OK, "%s: create the model", name)) BAIL_OUT("%s", demo_last_error());
  w->cfg = demo_model_config(w->m);
  st = demo_model_cache_create(w->m, NUM_BLOCKS, BLOCK, kvdt, &w->cache);
  if (!ok(st == CLPA_OK, "%s: demo_model_cache_create", name)) BAIL_OUT("%s", demo_last_error());
  w->logits = malloc((size_t)MAX_SEQS * w->cfg->vocab * sizeof(float));
  w->want = malloc((size_t)w->cfg->vocab * sizeof(double));
  if (!w->logits || !w->want) BAIL_OUT("out of memory");
}

static void world_free(world *w) {
  for (int i = 0; i < w->n_seqs; i++) demo_ref_session_destroy(w->seq[i].ref);
  clpa_cache_destroy(w->cache);
  demo_model_destroy(w->m);
  free(w->logits);
  free(w->want);
}

/* (a) one prefill of four sequences, (b) decodes, mixed batches, chunked
 * prefill and a prefix hit; `short_run` keeps only a few of them. */
static void scenario(world *w, int short_run) {
  const int32_t lens[4] = {37, 130, 200, 5};
  step_item it[MAX_SEQS];
  for (int i = 0; i < 4; i++) it[i] = (step_item){new_seq(w, 0, 0), lens[i]};
  run_step(w, "prefill", it, 4, 0);

  for (int i = 0; i < 4; i++) it[i] = (step_item){i, 1};
  for (int k = 0; k < (short_run ? 1 : 3); k++) run_step(w, "decode", it, 4, 4);

  /* a new sequence in two chunks next to the decodes */
  int e = new_seq(w, 0, 0);
  it[4] = (step_item){e, 60};
  run_step(w, "mixed (chunk 1)", it, 5, 4);
  it[4] = (step_item){e, 75};
  run_step(w, "mixed (chunk 2)", it, 5, 4);

  /* a prefix hit: the first 8 blocks (128 tokens) of sequence 1, then 50
   * new tokens, next to decodes of everything else */
  int f = new_seq(w, 1, 8);
  for (int i = 0; i < 5; i++) it[i] = (step_item){i, 1};
  it[5] = (step_item){f, 50};
  run_step(w, "prefix hit (cached_len 128)", it, 6, 5);
  if (short_run) return;

  /* a second prefix hit and a fresh prefill, no decodes */
  int g = new_seq(w, 2, 3);
  it[0] = (step_item){g, 1};
  it[1] = (step_item){new_seq(w, 0, 0), 90};
  run_step(w, "prefill (prefix hit 48 + fresh)", it, 2, 0);
  for (int i = 0; i < w->n_seqs; i++) it[i] = (step_item){i, 1};
  for (int k = 0; k < 2; k++) run_step(w, "decode all", it, w->n_seqs, w->n_seqs);
}

/* Bad batches are refused before anything runs, with a message. */
static void refusals(world *w) {
  int32_t tokens[2] = {1, 2}, cu[2] = {0, 2}, cached[1] = {5}, next[1] = {-1};
  int64_t slots[2] = {5, 6};
  demo_batch b = {1, 1, tokens, cu, cached, slots, w->seq[0].blocks, MB};
  clpa_status st = demo_model_forward(w->m, w->cache, &b, NULL, next, NULL);
  ok(st == CLPA_ERR_INVALID_ARG && strstr(demo_last_error(), "decode sequence 0") && next[0] == -1,
     "a decode sequence with 2 tokens is refused: %s", demo_last_error());
  b.num_decode = 0;
  tokens[1] = w->cfg->vocab;
  st = demo_model_forward(w->m, w->cache, &b, NULL, next, NULL);
  ok(st == CLPA_ERR_INVALID_ARG && strstr(demo_last_error(), "token 1"),
     "a token outside the vocabulary is refused: %s", demo_last_error());
  tokens[1] = 2;
  cached[0] = MB * BLOCK - 1;
  st = demo_model_forward(w->m, w->cache, &b, NULL, next, NULL);
  ok(st == CLPA_ERR_INVALID_ARG, "a sequence past its block table is refused: %s",
     demo_last_error());
}

/* The engine (scheduler.c) on this model: prefill chunks take the token
 * budget in admission order. Three prompts at step 0, a budget of 16: the
 * short one is done in two steps, then the first long one's chunks go
 * before the second's, so its first token comes first. (Finishing the
 * short one moved the last running request into its place, and the
 * second long prompt took every chunk until it was done.) */
static void prefill_order(world *w) {
  int32_t p0[4], p1[64], p2[64];
  for (int32_t i = 0; i < 64; i++) {
    if (i < 4) p0[i] = 1 + i;
    p1[i] = 1 + (7 * i) % (w->cfg->vocab - 1), p2[i] = 1 + (11 * i + 3) % (w->cfg->vocab - 1);
  }
  const int32_t *prompts[3] = {p0, p1, p2};
  const int32_t lens[3] = {4, 64, 64}, max_new[3] = {2, 2, 2};
  demo_workload *wl = demo_workload_create_prompts(prompts, lens, max_new, 3);
  if (!wl) BAIL_OUT("out of memory");
  demo_sched_config c;
  demo_sched_config_init(&c);
  c.num_blocks = 64, c.block_size = BLOCK, c.max_running = 3, c.token_budget = 16;
  demo_engine *e = NULL;
  clpa_status st = demo_engine_create(w->m, wl, &c, &e);
  if (st == CLPA_OK) st = demo_engine_run(e, NULL, NULL);
  int32_t n = 0;
  const demo_result *r = st == CLPA_OK ? demo_engine_results(e, &n) : NULL;
  ok(st == CLPA_OK && n == 3 && r[0].num_generated == 2 && r[1].num_generated == 2 &&
         r[2].num_generated == 2 && r[1].first_token_s < r[2].first_token_s,
     "engine: prefill chunks in admission order, request 1's first token before request 2's"
     " (%.2f ms, %.2f ms): %s", r ? r[1].first_token_s * 1e3 : 0,
     r ? r[2].first_token_s * 1e3 : 0, st == CLPA_OK ? "ran" : demo_last_error());
  demo_engine_destroy(e);
  demo_workload_destroy(wl);
}

/* Requests end at any token of the eog set: a greedy run's request 0
 * generates t0 t1 ...; with eog {a token it never makes, t_k} (t_k its
 * first token unlike those before it, k >= 1) the same request stops at
 * t_k (k + 1 tokens, finish STOP). Before, the scheduler stopped at one
 * token alone (the file's eos), so a Llama 3 Instruct file's <|eot_id|>
 * did not end an answer. */
static void eog_set(world *w) {
  int32_t p0[8];
  for (int32_t i = 0; i < 8; i++) p0[i] = 1 + (5 * i + 2) % (w->cfg->vocab - 1);
  const int32_t *prompts[1] = {p0};
  const int32_t lens[1] = {8}, max_new[1] = {12};
  int32_t first[12], n0 = 0, k = -1, never = -1;
  for (int run = 0; run < 2; run++) {
    demo_workload *wl = demo_workload_create_prompts(prompts, lens, max_new, 1);
    if (!wl) BAIL_OUT("out of memory");
    demo_sched_config c;
    demo_sched_config_init(&c);
    c.num_blocks = 16, c.block_size = BLOCK, c.max_running = 1, c.token_budget = 64;
    const int32_t eog[2] = {never, k >= 0 ? first[k] : -1};
    if (run) c.eog = eog, c.n_eog = 2;
    demo_engine *e = NULL;
    clpa_status st = demo_engine_create(w->m, wl, &c, &e);
    if (st == CLPA_OK) st = demo_engine_run(e, NULL, NULL);
    int32_t n = 0;
    const demo_result *r = st == CLPA_OK ? demo_engine_results(e, &n) : NULL;
    if (!run) {
      n0 = r && n == 1 ? r[0].num_generated : 0;
      for (int32_t i = 0; i < n0; i++) first[i] = r[0].generated[i];
      for (int32_t i = 1; i < n0 && k < 0; i++) {
        k = i;
        for (int32_t j = 0; j < i; j++) k = first[j] == first[i] ? -1 : k;
      }
      for (int32_t v = 0; v < w->cfg->vocab && never < 0; v++) {
        never = v;
        for (int32_t i = 0; i < n0; i++) never = first[i] == v ? -1 : never;
      }
    } else {
      const int one = r && n == 1;
      ok(st == CLPA_OK && n0 == 12 && k >= 1 && one && r[0].num_generated == k + 1 &&
             r[0].finish == DEMO_FINISH_STOP &&
             !memcmp(r[0].generated, first, sizeof *first * (size_t)(k + 1)),
         "engine: a request ends at a token of the eog set (token %d of %d: %d tokens, finish %d)",
         (int)k, (int)n0, one ? (int)r[0].num_generated : -1, one ? (int)r[0].finish : -1);
    }
    demo_engine_destroy(e);
    demo_workload_destroy(wl);
  }
}

/* ---------------------------------------------------------------------
 * The row kernels alone (kernels.c), against the host: the argmax over
 * rows cut into parts (ties across parts, NaN, all -inf, all NaN) and the
 * RMSNorms over rows whose length leaves a tail after the 16-byte loads.
 * ------------------------------------------------------------------- */

static cl_kernel kernel_of(cl_program p, const char *name) {
  cl_int e;
  cl_kernel k = clCreateKernel(p, name, &e);
  if (e != CL_SUCCESS) BAIL_OUT("clCreateKernel(%s): %d", name, (int)e);
  return k;
}

static void set_args(cl_kernel k, int n, const size_t *size, const void *const *val) {
  for (int i = 0; i < n; i++)
    if (clSetKernelArg(k, (cl_uint)i, size[i], val[i]) != CL_SUCCESS) BAIL_OUT("clSetKernelArg %d", i);
}

static void run_kernel(clpa_context *ctx, cl_kernel k, cl_uint dims, const size_t *g, const size_t *l) {
  cl_command_queue q = clpa_context_cl_queue(ctx);
  if (clEnqueueNDRangeKernel(q, k, dims, NULL, g, l, 0, NULL, NULL) != CL_SUCCESS || clFinish(q) != CL_SUCCESS)
    BAIL_OUT("kernel launch");
}

/* the first index of the largest non-NaN value; 0 when there is none */
static int32_t host_argmax(const float *v, int32_t n) {
  int32_t best = -1;
  for (int32_t i = 0; i < n; i++)
    if (!isnan(v[i]) && (best < 0 || v[i] > v[best])) best = i;
  return best < 0 ? 0 : best;
}

static void argmax_rows(clpa_context *ctx, cl_program p, int32_t n) {
  enum { R = 7 };
  const int32_t parts = demo_argmax_parts(n), len = (n + parts - 1) / parts;
  float *v = malloc(sizeof(float) * R * (size_t)n);
  if (!v) BAIL_OUT("out of memory");
  for (int32_t r = 0; r < R; r++)
    for (int32_t i = 0; i < n; i++) v[(size_t)r * n + i] = (float)rng_uniform(-4, 4);
  float *row;
  row = v + 1 * (size_t)n; /* the largest twice, the later copy in an earlier part's place */
  row[n - 1] = 9, row[len / 2] = 9;
  row = v + 2 * (size_t)n; /* NaN everywhere but a few, the largest in the last part */
  for (int32_t i = 0; i < n; i++) row[i] = i % 5 ? NAN : row[i];
  row[n - 2] = 7;
  row = v + 3 * (size_t)n; /* all -inf: the first */
  for (int32_t i = 0; i < n; i++) row[i] = -INFINITY;
  row = v + 4 * (size_t)n; /* all NaN: 0 */
  for (int32_t i = 0; i < n; i++) row[i] = NAN;
  row = v + 5 * (size_t)n; /* the largest at the last index, NaN at the first */
  row[0] = NAN, row[n - 1] = 100;
  row = v + 6 * (size_t)n; /* -inf and NaN but one finite value in a middle part */
  for (int32_t i = 0; i < n; i++) row[i] = i % 2 ? -INFINITY : NAN;
  row[n / 2 + 1] = -1e30f;
  cl_mem d = test_buffer(ctx, v, sizeof(float) * R * (size_t)n);
  cl_mem pv = test_buffer(ctx, NULL, sizeof(float) * R * (size_t)parts);
  cl_mem pi = test_buffer(ctx, NULL, sizeof(int32_t) * R * (size_t)parts);
  cl_mem out = test_buffer(ctx, NULL, sizeof(int32_t) * R);
  test_poison(ctx, pv, sizeof(float) * R * (size_t)parts);
  test_poison(ctx, pi, sizeof(int32_t) * R * (size_t)parts);
  test_poison(ctx, out, sizeof(int32_t) * R);
  cl_kernel kp = kernel_of(p, "demo_argmax_part"), ka = kernel_of(p, "demo_argmax");
  const cl_int cn = n, clen = len, cparts = parts;
  set_args(kp, 5, (const size_t[]){sizeof d, 4, 4, sizeof pv, sizeof pi},
           (const void *const[]){&d, &cn, &clen, &pv, &pi});
  run_kernel(ctx, kp, 2, (const size_t[]){(size_t)parts * DEMO_WG, R}, (const size_t[]){DEMO_WG, 1});
  set_args(ka, 5, (const size_t[]){sizeof pv, sizeof pi, 4, 4, sizeof out},
           (const void *const[]){&pv, &pi, &cparts, &cn, &out});
  run_kernel(ctx, ka, 1, (const size_t[]){R * DEMO_WG}, (const size_t[]){DEMO_WG});
  int32_t got[R];
  test_read(ctx, out, got, sizeof got);
  int bad = 0;
  for (int32_t r = 0; r < R; r++) {
    const int32_t want = host_argmax(v + (size_t)r * n, n);
    if (got[r] != want) bad++, diag("row %d: argmax %d, host %d", (int)r, (int)got[r], (int)want);
  }
  ok(!bad, "demo_argmax over %d values in %d parts: %d rows (ties across parts, NaN, all -inf, all NaN) "
     "as the host's first largest", (int)n, (int)parts, R);
  clReleaseKernel(kp), clReleaseKernel(ka);
  clReleaseMemObject(d), clReleaseMemObject(pv), clReleaseMemObject(pi), clReleaseMemObject(out);
  free(v);
}

/* demo_rmsnorm (f32), demo_rmsnorm_h (f16) and demo_rmsnorm_rows (f32, f16) over R rows of n */
static void rmsnorm_rows(clpa_context *ctx, cl_program p, int32_t n, int wg) {
  enum { R = 5 };
  const float eps = 1e-5f;
  const size_t nx = (size_t)R * n;
  float *x = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * nx);
  uint16_t *yh = malloc(2 * nx);
  double *want = malloc(sizeof(double) * nx);
  if (!x || !w || !y || !yh || !want) BAIL_OUT("out of memory");
  for (size_t i = 0; i < nx; i++) x[i] = (float)rng_uniform(-3, 3);
  for (int32_t i = 0; i < n; i++) w[i] = (float)rng_uniform(0.5, 1.5);
  for (int32_t r = 0; r < R; r++) {
    double ss = 0;
    for (int32_t i = 0; i < n; i++) ss += (double)x[(size_t)r * n + i] * x[(size_t)r * n + i];
    const double s = 1.0 / sqrt(ss / n + eps);
    for (int32_t i = 0; i < n; i++) want[(size_t)r * n + i] = x[(size_t)r * n + i] * s * w[i];
  }
  const int32_t rows[R] = {4, 0, 2, 2, 1}; /* demo_rmsnorm_rows: these rows of x */
  cl_mem dx = test_buffer(ctx, x, sizeof(float) * nx), dw = test_buffer(ctx, w, sizeof(float) * n);
  cl_mem dr = test_buffer(ctx, rows, sizeof rows);
  cl_mem dy = test_buffer(ctx, NULL, sizeof(float) * nx), dh = test_buffer(ctx, NULL, 2 * nx);
  const cl_int cn = n;
  const size_t g = (size_t)R * wg, l = (size_t)wg;
  double worst[4] = {0, 0, 0, 0};
  for (int v = 0; v < 4; v++) {
    const cl_int half = v % 2; /* v 1, 3: f16 out */
    cl_kernel k = kernel_of(p, v == 0 ? "demo_rmsnorm" : v == 1 ? "demo_rmsnorm_h" : "demo_rmsnorm_rows");
    cl_mem dst = half ? dh : dy;
    test_poison(ctx, dst, half ? 2 * nx : sizeof(float) * nx);
    if (v < 2)
      set_args(k, 5, (const size_t[]){sizeof dx, sizeof dw, sizeof dst, 4, 4},
               (const void *const[]){&dx, &dw, &dst, &cn, &eps});
    else
      set_args(k, 7, (const size_t[]){sizeof dx, sizeof dr, sizeof dw, sizeof dst, 4, 4, 4},
               (const void *const[]){&dx, &dr, &dw, &dst, &cn, &eps, &half});
    run_kernel(ctx, k, 1, &g, &l);
    if (half) test_read(ctx, dh, yh, 2 * nx);
    else test_read(ctx, dy, y, sizeof(float) * nx);
    for (int32_t r = 0; r < R; r++)
      for (int32_t i = 0; i < n; i++) {
        const size_t at = (size_t)r * n + i, from = (size_t)(v >= 2 ? rows[r] : r) * n + i;
        const double got = half ? clpa_f16_to_f32(yh[at]) : y[at];
        const double e = fabs(got - want[from]) / fmax(fabs(want[from]), 1e-3);
        worst[v] = isnan(e) ? INFINITY : fmax(worst[v], e);
      }
    clReleaseKernel(k);
  }
  /* f32: a few roundings of the sum and the products; f16: its rounding, 2^-11 */
  ok(worst[0] <= 1e-5 && worst[1] <= 5e-4 + 1e-5 && worst[2] <= 1e-5 && worst[3] <= 5e-4 + 1e-5,
     "demo_rmsnorm, _h, _rows (f32, f16) over %d rows of %d, work-group %d: worst relative error"
     " %.2g, %.2g, %.2g, %.2g", R, (int)n, wg, worst[0], worst[1], worst[2], worst[3]);
  clReleaseMemObject(dx), clReleaseMemObject(dw), clReleaseMemObject(dr);
  clReleaseMemObject(dy), clReleaseMemObject(dh);
  free(x), free(w), free(y), free(yh), free(want);
}

/* both work-groups of the norms (demo_norm_wg's choice by device type) */
static void kernels_alone(clpa_context *ctx) {
  cl_context c = clpa_context_cl_context(ctx);
  cl_device_id dev = clpa_context_cl_device(ctx);
  for (int gpu = 0; gpu < 2; gpu++) {
    cl_int e;
    char opts[64];
    demo_kernel_options(opts, sizeof opts, demo_norm_wg(gpu));
    cl_program p = clCreateProgramWithSource(c, demo_kernel_source_count,
                                             (const char **)demo_kernel_source, NULL, &e);
    if (e != CL_SUCCESS || clBuildProgram(p, 1, &dev, opts, NULL, NULL) != CL_SUCCESS)
      BAIL_OUT("the demo's kernels do not build with %s", opts);
    if (gpu == 0) {
      argmax_rows(ctx, p, 100);
      argmax_rows(ctx, p, 9001);
      argmax_rows(ctx, p, 128256);
    }
    rmsnorm_rows(ctx, p, 2051, demo_norm_wg(gpu));
    rmsnorm_rows(ctx, p, 128, demo_norm_wg(gpu));
    clReleaseProgram(p);
  }
}

/* demo_parallel_for cuts [0, n) into contiguous parts, each seen once. */
typedef struct parts_seen {
  unsigned char hit[10007];
  size_t lo[DEMO_PARALLEL_MAX], hi[DEMO_PARALLEL_MAX];
} parts_seen;

static void mark_part(void *arg, int part, size_t lo, size_t hi) {
  parts_seen *p = arg;
  p->lo[part] = lo, p->hi[part] = hi;
  for (size_t i = lo; i < hi; i++) p->hit[i]++;
}

static void parallel_parts(void) {
  const size_t ns[] = {0, 1, 7, 100, 10007};
  const size_t grains[] = {1, 3, 1000, 20000};
  int good = 1;
  for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
    for (size_t b = 0; b < sizeof grains / sizeof *grains; b++) {
      parts_seen *p = calloc(1, sizeof *p);
      if (!p) BAIL_OUT("out of memory");
      const int parts = demo_parallel_for(ns[a], grains[b], mark_part, p);
      int fine = parts >= 1 && parts <= DEMO_PARALLEL_MAX && p->lo[0] == 0 &&
                 p->hi[parts - 1] == ns[a] && (parts == 1 || ns[a] / (size_t)parts >= grains[b]);
      for (int t = 1; t < parts; t++) fine &= p->lo[t] == p->hi[t - 1] && p->hi[t] > p->lo[t];
      for (size_t i = 0; i < ns[a]; i++) fine &= p->hit[i] == 1;
      if (!fine) diag("n %zu, grain %zu: %d parts", ns[a], grains[b], parts);
      good &= fine;
      free(p);
    }
  ok(good, "demo_parallel_for: contiguous parts covering [0, n) once, none under the grain");
}

/* The random weights are the seeded stream's draws in order, however many
 * threads drew them: the embedding and LM head (past 2 x 2^20 floats, so
 * in parts on 2 cores or more) against one loop of the generator that
 * model_weights.c states (splitmix64, the sum of 4 uniforms). */
static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static float draw(uint64_t *s, double mean, double std) {
  double u = 0;
  for (int i = 0; i < 4; i++) u += (double)(splitmix(s) >> 11) * (1.0 / 9007199254740992.0);
  return (float)(mean + std * ((u - 2.0) * 1.7320508075688772));
}

static void random_weights_in_parts(clpa_context *ctx) {
  const demo_config c = {4200, 512, 1, 4, 2, 128, 256, 10000.0f, 1e-5f, 64};
  demo_model *m = NULL;
  if (demo_model_create_random(ctx, &c, 77, CLPA_DTYPE_F32, &m) != CLPA_OK) {
    ok(0, "random weights in parts: %s", demo_last_error());
    return;
  }
  const demo_host_weights *hw = demo_model_host(m);
  const size_t n = (size_t)c.vocab * (size_t)c.hidden;
  uint64_t s = 77;
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += draw(&s, 0, 1) != hw->embed[i];
  for (int32_t i = 0; i < c.hidden; i++) bad += draw(&s, 1, 0.1) != hw->final_norm[i];
  for (size_t i = 0; i < n; i++) bad += draw(&s, 0, 3 / sqrt((double)c.hidden)) != hw->lm_head[i];
  ok(bad == 0, "random weights in parts: the embedding, final norm and LM head are the stream's"
     " draws in order (%zu of %zu differ)", bad, 2 * n + (size_t)c.hidden);
  demo_model_destroy(m);
}

int main(void) {
  rng_seed_from_env();
  clpa_context *ctx = test_context(1);
  kernels_alone(ctx);

  parallel_parts();
  random_weights_in_parts(ctx);

  demo_config tiny;
  ok(demo_config_preset("tiny", &tiny) == 0 && demo_config_preset("nope", &tiny) == -1,
     "presets: tiny, unknown refused");

  world w, h;
  world_init(&w, ctx, "f32", CLPA_DTYPE_F32, CLPA_DTYPE_F32, 1e-3, NULL);
  scenario(&w, 0);
  diag("f32: worst logit error %.3g of max |logit|", w.worst);
  refusals(&w);
  prefill_order(&w);
  eog_set(&w);
  ok(demo_model_set_weight_layout(w.m, 1) == CLPA_ERR_INVALID_ARG &&
         strstr(demo_last_error(), "f16 weights") && !demo_model_tiled(w.m),
     "f32 weights: tiles refused, the model as it was: %s", demo_last_error());

  /* the same weights through demo_model_create_host, with the LM head tied
   * to the embedding and RoPE frequency factors (Llama 3.1+ scaling) */
  demo_host_weights hw = *demo_model_host(w.m);
  hw.lm_head = hw.embed;
  float factors[16];
  for (int i = 0; i < 16; i++) factors[i] = 1.0f + (float)i * 0.5f;
  hw.rope_freq_factors = factors;
  world_init(&h, ctx, "host+tied+rope_factors", CLPA_DTYPE_F32, CLPA_DTYPE_F32, 1e-3, &hw);
  ok(demo_model_host(h.m)->rope_freq_factors != NULL &&
         demo_model_host(h.m)->rope_freq_factors[3] == factors[3],
     "host+tied+rope_factors: the model keeps its own copy of the factors");
  ok(demo_model_host(h.m)->lm_head == demo_model_host(h.m)->embed,
     "host+tied+rope_factors: one array for the tied LM head");
  scenario(&h, 1);
  world_free(&h);
  world_free(&w);

  world_init(&w, ctx, "f16", CLPA_DTYPE_F16, CLPA_DTYPE_F16, 2e-2, NULL);
  scenario(&w, 1);
  diag("f16: worst logit error %.3g of max |logit|", w.worst);
  /* the same f16 weights with the LM head tied, as tiles (the matrices and the embedding the
   * head shares), then back to rows in the middle of the run */
  hw = *demo_model_host(w.m);
  hw.lm_head = hw.embed;
  world_init(&h, ctx, "f16 tied", CLPA_DTYPE_F16, CLPA_DTYPE_F16, 2e-2, &hw);
  ok(demo_model_set_weight_layout(h.m, 1) == CLPA_OK && demo_model_tiled(h.m),
     "f16 tied: the weights as tiles");
  {
    step_item it[3];
    for (int i = 0; i < 3; i++) it[i] = (step_item){new_seq(&h, 0, 0), 40 + 33 * i};
    run_step(&h, "tiles: prefill", it, 3, 0);
    for (int i = 0; i < 3; i++) it[i] = (step_item){i, 1};
    run_step(&h, "tiles: decode", it, 3, 3);
    ok(demo_model_set_weight_layout(h.m, 0) == CLPA_OK && !demo_model_tiled(h.m),
       "f16 tied: back to rows");
    run_step(&h, "rows again: decode", it, 3, 3);
  }
  world_free(&h);
  world_free(&w);

  test_no_faults_left(ctx);
  clpa_context_destroy(ctx);
  return done_testing();
}
