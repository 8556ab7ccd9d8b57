/*
 * Plans (clpa_plan_decode, clpa_plan_prefill, clpa_plan_cascade,
 * clpa_plan_xattn, clpa_run):
 * a plan made once runs on every layer of a cache and across steps whose
 * device lengths and block tables change (decode: within its
 * max_context_len), and gives the one-call ops' results bit for bit:
 * - decode on every path (auto, lanes v1/v2, rows, mma: emulated off
 *   NVIDIA), planned without host lengths and with one step's, three
 *   steps of fresh lengths and tables, two layers: each run equal to
 *   clpa_decode with the run's buffers (byte for byte; planned from host
 *   lengths, at the step whose lengths they are) and to the double
 *   reference (|got - want| <= atol + rtol |want|: f32 paths 1e-4 / 1e-4,
 *   mma, which rounds the query and P to f16, 4e-3 / 4e-3);
 * - mma v2 planned from host lengths with CLPA_DECODE_WORK_LIST=on (set
 *   for the whole test: only such plans take it), so that its work-groups
 *   take the busy partitions from a list (clpa_plan_info's work_pairs):
 *   the later steps' lengths pass and fall short of the listed partitions;
 *   again with a sliding window of 70 tokens; 19 such one calls, each its
 *   own list, enqueued back to back (past the context's first ring of
 *   staging arrays their list writes read; the queue held behind the first
 *   one's kernel until all are enqueued: none may wait for the device),
 *   each against the reference;
 * - prefill (cached prefixes, an empty sequence, a block mask; the mma
 *   path forced at 32 rows a warp, which the plan reports) and cascade on
 *   both layers, equal to clpa_prefill and clpa_cascade_decode;
 * - a plan made from the layout alone (no buffers) runs on the
 *   application's buffers as on the cache;
 * - XAttention's estimation (clpa_plan_xattn), f32 and mma paths (mma
 *   emulated off NVIDIA), num_q not a multiple of the stride: one plan on
 *   both layers equals clpa_xattn_estimate's mask and masses byte for
 *   byte; one made from the layout alone runs on a key_cache; a run with
 *   buffers it does not read is refused, nothing written;
 * - refusals with nothing written: a NULL plan or inputs, caches of
 *   another shape, a mask the plan lacks, ALiBi in a cascade run, a buffer
 *   the plan's kind does not read (context_lens to prefill, a block mask to
 *   decode or cascade, masses); an empty batch's run completes its event;
 * - calls whose list writes wait in a queue held behind a user event
 *   never wait for it: back to back, and where a write fails (an
 *   interposed clEnqueueWriteBuffer).
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "cache_util.h"
#include "cl_util.h"
#include "ref_attention.h"
#include "ref_util.h"

static clpa_context *ctx;

enum { LAYERS = 2, HEADS = 8, KV_HEADS = 2, HS = 64, BS = 16, BLOCKS = 96, MAXB = 12, SEQS = 5 };
#define KV_DTYPE CLPA_DTYPE_F16

static clpa_cache *cache;
static clpa_kv_layout kv;
static float *keys[LAYERS], *values[LAYERS]; /* the caches' values as the device holds them */
static int32_t decode_window; /* the decode cases' sliding window (0: off) */

/* Random keys and values in every layer, rounded to the cache's dtype. */
static void fill_cache(void) {
  const size_t n = (size_t)kv.block_stride * BLOCKS, esz = clpa_dtype_size(KV_DTYPE);
  void *enc = malloc(esz * n);
  for (int l = 0; l < LAYERS; l++)
    for (int v = 0; v < 2; v++) {
      float *f = malloc(sizeof(float) * n);
      for (size_t i = 0; i < n; i++) f[i] = rnd(-1.5, 1.5);
      clpa_dtype_encode(KV_DTYPE, f, enc, n, 1.0f);
      clpa_dtype_decode(KV_DTYPE, enc, f, n, 1.0f);
      cl_mem m = v ? clpa_cache_value(cache, l) : clpa_cache_key(cache, l);
      test_write(ctx, m, enc, esz * n);
      (v ? values : keys)[l] = f;
    }
  free(enc);
}

/* The buffers of one batch. */
typedef struct batch {
  int32_t lens[SEQS], tables[SEQS * MAXB];
  float q[SEQS * HEADS * HS];
  cl_mem bq, bt, bl, out_run, lse_run, out_call, lse_call;
} batch;

static void batch_make(batch *b) {
  for (size_t i = 0; i < sizeof b->q / sizeof *b->q; i++) b->q[i] = rnd(-2, 2);
  b->bq = test_buffer(ctx, b->q, sizeof b->q);
  b->bt = test_buffer(ctx, NULL, sizeof b->tables);
  b->bl = test_buffer(ctx, NULL, sizeof b->lens);
  const size_t out = sizeof(float) * SEQS * HEADS * HS, lse = sizeof(float) * SEQS * HEADS;
  b->out_run = test_buffer(ctx, NULL, out), b->out_call = test_buffer(ctx, NULL, out);
  b->lse_run = test_buffer(ctx, NULL, lse), b->lse_call = test_buffer(ctx, NULL, lse);
}

static void batch_free(batch *b) {
  cl_mem all[] = {b->bq, b->bt, b->bl, b->out_run, b->lse_run, b->out_call, b->lse_call};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
}

/* A step's lengths (one 0, one at maxc, the rest random) and tables
 * (distinct blocks, shuffled), written to the device. */
static void batch_step(batch *b, int maxc) {
  int32_t ids[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) ids[i] = i;
  shuffle(ids, BLOCKS);
  for (int s = 0; s < SEQS; s++) {
    b->lens[s] = s == 0 ? 0 : s == 1 ? maxc : (int32_t)rng_below((uint32_t)maxc + 1);
    for (int j = 0; j < MAXB; j++) b->tables[s * MAXB + j] = ids[s * MAXB + j];
  }
  test_write(ctx, b->bl, b->lens, sizeof b->lens);
  test_write(ctx, b->bt, b->tables, sizeof b->tables);
  test_poison(ctx, b->out_run, sizeof(float) * SEQS * HEADS * HS);
  test_poison(ctx, b->lse_run, sizeof(float) * SEQS * HEADS);
  test_poison(ctx, b->out_call, sizeof(float) * SEQS * HEADS * HS);
  test_poison(ctx, b->lse_call, sizeof(float) * SEQS * HEADS);
}

/* Two device buffers hold the same bytes. */
static int same_bytes(cl_mem a, cl_mem b, size_t n) {
  unsigned char *x = malloc(n), *y = malloc(n);
  test_read(ctx, a, x, n), test_read(ctx, b, y, n);
  const int same = memcmp(x, y, n) == 0;
  free(x), free(y);
  return same;
}

/* The larger of two error ratios, a NaN infinitely bad (fmax would drop it: a NaN output, or
 * test_poison's left unwritten, would pass). */
static double worse(double worst, double r) { return isnan(r) ? INFINITY : fmax(worst, r); }

/* The run's output against the double reference for layer l. */
static double decode_error(const batch *b, int l, double tol) {
  double *want = poisoned((size_t)SEQS * HEADS * HS), *want_lse = poisoned((size_t)SEQS * HEADS);
  clpa_ref_decode_args r = {0};
  r.num_seqs = SEQS, r.num_heads = HEADS, r.kv = kv, r.max_blocks_per_seq = MAXB;
  r.query = b->q, r.q_stride = HEADS * HS, r.key_cache = keys[l], r.value_cache = values[l];
  r.block_tables = b->tables, r.context_lens = b->lens, r.scale = 0.125f;
  r.sliding_window = decode_window;
  r.out = want, r.lse = want_lse;
  double worst = clpa_ref_decode(&r) == CLPA_OK ? 0.0 : INFINITY;
  float *got = malloc(sizeof(float) * SEQS * HEADS * HS), *lse = malloc(sizeof(float) * SEQS * HEADS);
  test_read(ctx, b->out_run, got, sizeof(float) * SEQS * HEADS * HS);
  test_read(ctx, b->lse_run, lse, sizeof(float) * SEQS * HEADS);
  for (int i = 0; i < SEQS * HEADS * HS; i++)
    worst = worse(worst, fabs(got[i] - want[i]) / (tol + tol * fabs(want[i])));
  for (int i = 0; i < SEQS * HEADS; i++) /* lse: -inf for the empty sequence */
    worst = worse(worst, want_lse[i] == -INFINITY ? (lse[i] == -INFINITY ? 0.0 : INFINITY)
                                                 : fabs(lse[i] - want_lse[i]) / (tol + tol * fabs(want_lse[i])));
  free(want), free(want_lse), free(got), free(lse);
  return worst;
}

static void decode_params(clpa_decode_params *p, const batch *b, int maxc) {
  clpa_decode_params_init(p);
  p->sliding_window = decode_window;
  p->num_seqs = SEQS, p->num_heads = HEADS, p->cache = cache, p->max_blocks_per_seq = MAXB;
  p->max_context_len = maxc, p->scale = 0.125f, p->query = b->bq, p->block_tables = b->bt;
  p->context_lens = b->bl, p->out = b->out_call, p->lse = b->lse_call;
}

static void inputs_of(clpa_attn_inputs *in, const batch *b, int layer) {
  clpa_attn_inputs_init(in);
  in->cache = cache, in->layer = layer, in->query = b->bq, in->block_tables = b->bt;
  in->context_lens = b->bl, in->out = b->out_run, in->lse = b->lse_run;
}

/* One decode plan over three steps and both layers. */
static void test_decode_reuse(const char *name, clpa_decode_path path, clpa_decode_variant variant,
                              int partition, int host_lens, int listed) {
  batch b;
  batch_make(&b);
  const int maxc = MAXB * BS - 7;
  clpa_decode_params p;
  decode_params(&p, &b, maxc);
  p.path = path, p.variant = variant, p.partition_size = partition;
  batch_step(&b, maxc);
  if (host_lens) p.host_context_lens = b.lens; /* step 0's: later steps differ */
  clpa_plan *plan = NULL;
  clpa_status st = clpa_plan_decode(ctx, &p, &plan);
  if (!ok(st == CLPA_OK, "decode %s: plan (%s)", name, clpa_last_error())) {
    batch_free(&b);
    return;
  }
  clpa_plan_info info;
  clpa_decode_path cpath;
  clpa_decode_variant cvar;
  int32_t cpart, chpg;
  clpa_plan_describe(plan, &info);
  clpa_decode_choice(ctx, &p, &cpath, &cvar, &cpart, &chpg);
  ok((int)cpath == info.path && cvar == info.variant && cpart == info.partition_size &&
         chpg == info.heads_per_group,
     "decode %s: the plan runs what clpa_decode_choice says (path %d, v%d, partition %d, %d"
     " heads a group)", name, info.path, (int)info.variant, info.partition_size, info.heads_per_group);
  if (listed)
    ok(info.work_pairs > 0, "decode %s: the plan's work-groups take %lld busy partitions from a"
       " list", name, (long long)info.work_pairs);
  p.host_context_lens = NULL;
  const double tol = info.path == CLPA_DECODE_PATH_MMA ? 4e-3 : 1e-4;
  int same = 1, ran = 1;
  double worst = 0;
  for (int step = 0; step < 3 && ran; step++) {
    if (step) batch_step(&b, maxc);
    for (int l = 0; l < LAYERS && ran; l++) {
      clpa_attn_inputs in;
      inputs_of(&in, &b, l);
      p.layer = l;
      /* planned from host lengths, later steps: the one call first, so that the partition
       * states it leaves in the context's scratch would show in a run that skipped some */
      st = host_lens && step > 0 ? clpa_decode(ctx, &p) : CLPA_OK;
      if (st == CLPA_OK) st = clpa_run(plan, &in);
      /* planned from host lengths, the one call plans the same at step 0 only */
      if (host_lens && step == 0) p.host_context_lens = b.lens;
      if (st == CLPA_OK && (!host_lens || step == 0)) st = clpa_decode(ctx, &p);
      p.host_context_lens = NULL;
      if (st != CLPA_OK) { /* reported below */
        ran = 0;
        diag("decode %s: step %d layer %d: %s", name, step, l, clpa_last_error());
        break;
      }
      if (!host_lens || step == 0) /* the one call plans the same: see above */
        same &= same_bytes(b.out_run, b.out_call, sizeof(float) * SEQS * HEADS * HS) &&
                same_bytes(b.lse_run, b.lse_call, sizeof(float) * SEQS * HEADS);
      worst = fmax(worst, decode_error(&b, l, tol));
    }
  }
  ok(ran && same, "decode %s: %s x %d layers equal clpa_decode bit for bit", name,
     host_lens ? "step 0 (its host lengths)" : "3 steps", LAYERS);
  ok(ran && worst <= 1.0, "decode %s%s: 3 steps of new lengths and tables x %d layers on one plan match"
     " the reference (worst %.3g of the tolerance)", name, host_lens ? " (planned from step 0's"
     " host lengths)" : "", LAYERS, worst);
  test_no_faults(ctx, name);
  clpa_plan_release(plan);
  batch_free(&b);
}

/* clEnqueueWriteBuffer as the loader gives it, but for the write fail_write_in counts down
 * to (from 1), which fails as a driver out of resources would. A definition of the test's
 * own, so that libclpa's calls reach it first (test_binary_cache.c does so too). */
static int fail_write_in;

cl_int clEnqueueWriteBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t off,
                            size_t size, const void *ptr, cl_uint n, const cl_event *wait,
                            cl_event *ev) {
  typedef cl_int (*write_fn)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *,
                             cl_uint, const cl_event *, cl_event *);
  static write_fn real;
  if (!real) {
    void *f = dlsym(RTLD_NEXT, "clEnqueueWriteBuffer");
    memcpy(&real, &f, sizeof f);
  }
  if (fail_write_in > 0 && --fail_write_in == 0) return CL_OUT_OF_RESOURCES;
  return real(q, m, blocking, off, size, ptr, n, wait, ev);
}

/* A call that does not return (the alarm): a failure, not a stuck test. */
static void on_hang(int sig) {
  (void)sig;
  static const char msg[] = "not ok - a call blocked while the queue was held behind a user"
                            " event (deadlock)\n";
  if (write(1, msg, sizeof msg - 1) < 0) _exit(2);
  _exit(1);
}

/* One calls planned from host lengths, each its own list, enqueued back to back with no wait
 * (more than twice the context's first ring of staging arrays, which their non-blocking list
 * writes read): each matches the reference. The queue is held behind the first call's kernel
 * (a user event) until every call is enqueued, so that their list writes wait in it while the
 * host makes the next lists (regress_staging_ring_held_queue: a call waited there for the
 * write of the call 8 before it, which the held queue never ran: the application, which sets
 * the event after its calls return, hung in the tenth). */
static void test_decode_back_to_back(void) {
  enum { CALLS = 19, HELD = CALLS };
  batch b[CALLS];
  const int maxc = MAXB * BS - 7;
  for (int i = 0; i < CALLS; i++) batch_make(&b[i]), batch_step(&b[i], maxc);
  cl_int err;
  cl_event gate = clCreateUserEvent(clpa_context_cl_context(ctx), &err);
  clpa_status st = err == CL_SUCCESS ? CLPA_OK : CLPA_ERR_OPENCL;
  int listed = 0, i;
  signal(SIGALRM, on_hang);
  alarm(120);
  for (i = 0; i < CALLS && st == CLPA_OK; i++) {
    clpa_decode_params p;
    decode_params(&p, &b[i], maxc);
    p.path = CLPA_DECODE_PATH_MMA, p.variant = CLPA_DECODE_V2, p.partition_size = 32;
    p.host_context_lens = b[i].lens, p.out = b[i].out_run, p.lse = b[i].lse_run;
    p.layer = i % LAYERS;
    clpa_plan *plan = NULL;
    clpa_plan_info info = {0};
    if ((st = clpa_plan_decode(ctx, &p, &plan)) == CLPA_OK) clpa_plan_describe(plan, &info);
    clpa_plan_release(plan);
    listed += info.work_pairs > 0;
    if (i == 0) p.wait_events = &gate, p.num_wait_events = 1;
    if (st == CLPA_OK) st = clpa_decode(ctx, &p);
    if (i == HELD - 1 && clSetUserEventStatus(gate, CL_COMPLETE) != CL_SUCCESS) st = CLPA_ERR_OPENCL;
  }
  alarm(0);
  if (gate && i < HELD) clSetUserEventStatus(gate, CL_COMPLETE);
  ok(st == CLPA_OK && listed == CALLS, "decode: %d one calls back to back, %d of them listed (%s)",
     CALLS, listed, st == CLPA_OK ? "" : clpa_last_error());
  double worst = 0;
  for (int j = 0; j < i; j++) worst = fmax(worst, decode_error(&b[j], j % LAYERS, 4e-3));
  ok(st == CLPA_OK && worst <= 1.0, "decode: each of %d one calls back to back matches the"
     " reference (worst %.3g of the tolerance)", CALLS, worst);
  if (gate) clReleaseEvent(gate);
  for (int j = 0; j < CALLS; j++) batch_free(&b[j]);
}

/* A plan from the layout alone runs on the application's buffers. */
static void test_layout_only(void) {
  batch b;
  batch_make(&b);
  clpa_decode_params p;
  decode_params(&p, &b, MAXB * BS);
  p.cache = NULL, p.kv = kv, p.query = p.block_tables = p.context_lens = p.out = p.lse = NULL;
  clpa_plan *plan = NULL;
  ok(clpa_plan_decode(ctx, &p, &plan) == CLPA_OK, "decode: a plan from the layout alone (%s)",
     clpa_last_error());
  batch_step(&b, MAXB * BS);
  clpa_attn_inputs in;
  inputs_of(&in, &b, 1);
  int good = clpa_run(plan, &in) == CLPA_OK;
  in.cache = NULL, in.key_cache = clpa_cache_key(cache, 1), in.value_cache = clpa_cache_value(cache, 1);
  in.out = b.out_call, in.lse = b.lse_call;
  good &= clpa_run(plan, &in) == CLPA_OK;
  /* alike, and right: two runs of a plan that computed nothing, or the wrong thing, agree */
  clpa_plan_info info;
  clpa_plan_describe(plan, &info);
  const double worst = decode_error(&b, 1, info.path == CLPA_DECODE_PATH_MMA ? 4e-3 : 1e-4);
  ok(good && same_bytes(b.out_run, b.out_call, sizeof(float) * SEQS * HEADS * HS) &&
         worst <= 1.0,
     "decode: it runs on layer 1 of the cache and on the application's buffers alike, matching"
     " the reference (worst %.3g of the tolerance) (%s)", worst, clpa_last_error());
  clpa_plan_release(plan);
  batch_free(&b);
}

/* warp_rows: 0 the path the device picks, else the mma path forced with
 * that many query rows a warp (which the plan must report). */
static void test_prefill(int masked, int warp_rows) {
  const int32_t cu[] = {0, 7, 7, 27, 28}, cached[] = {5, 9, 0, 40}, n = 4, total = 28;
  const size_t qn = (size_t)total * HEADS * HS, on = qn * sizeof(float);
  float *q = malloc(on);
  for (size_t i = 0; i < qn; i++) q[i] = rnd(-2, 2);
  int32_t tables[4 * MAXB];
  for (int i = 0; i < 4 * MAXB; i++) tables[i] = (i * 7) % BLOCKS;
  const int mqb = 1, mkb = 2;
  uint8_t mask[4 * HEADS * 1 * 2];
  for (size_t i = 0; i < sizeof mask; i++) mask[i] = (uint8_t)(i % 3 != 0);
  cl_mem bq = test_buffer(ctx, q, on), bt = test_buffer(ctx, tables, sizeof tables);
  cl_mem bm = test_buffer(ctx, mask, sizeof mask);
  cl_mem o1 = test_buffer(ctx, NULL, on), o2 = test_buffer(ctx, NULL, on);
  clpa_prefill_params p;
  clpa_prefill_params_init(&p);
  p.num_seqs = n, p.num_heads = HEADS, p.cache = cache, p.max_blocks_per_seq = MAXB;
  p.cu_seqlens_q = cu, p.cached_lens = cached, p.scale = 0.125f, p.query = bq, p.block_tables = bt;
  if (masked) p.block_mask = bm, p.mask_block = 64, p.mask_q_blocks = mqb, p.mask_k_blocks = mkb;
  if (warp_rows) p.path = CLPA_PREFILL_MMA, p.rows_per_warp = warp_rows;
  clpa_plan *plan = NULL;
  if (!ok(clpa_plan_prefill(ctx, &p, &plan) == CLPA_OK, "prefill%s: plan (%s)",
          masked ? " (masked)" : "", clpa_last_error()))
    return;
  if (warp_rows) {
    clpa_plan_info info;
    clpa_plan_describe(plan, &info);
    ok(info.path == CLPA_PREFILL_MMA && info.rows_per_warp == warp_rows,
       "prefill on mma with rows_per_warp %d: the plan says path %d, %d rows a warp", warp_rows,
       info.path, info.rows_per_warp);
  }
  int same = 1;
  for (int l = 0; l < LAYERS; l++) {
    test_poison(ctx, o1, on), test_poison(ctx, o2, on);
    clpa_attn_inputs in;
    clpa_attn_inputs_init(&in);
    in.cache = cache, in.layer = l, in.query = bq, in.block_tables = bt, in.out = o1;
    in.block_mask = masked ? bm : NULL;
    p.layer = l, p.out = o2;
    same &= clpa_run(plan, &in) == CLPA_OK && clpa_prefill(ctx, &p) == CLPA_OK && same_bytes(o1, o2, on);
  }
  ok(same, "prefill%s%s: one plan on %d layers equals clpa_prefill bit for bit (%s)",
     masked ? " with a block mask" : "", warp_rows ? ", mma at 32 rows a warp" : "", LAYERS,
     clpa_last_error());
  if (!masked && !warp_rows) { /* regress_run_refuses_unread: lengths are the plan's */
    clpa_attn_inputs in;
    clpa_attn_inputs_init(&in);
    in.cache = cache, in.query = bq, in.block_tables = bt, in.out = o1, in.context_lens = bt;
    test_poison(ctx, o1, on);
    clpa_status st = clpa_run(plan, &in);
    int refused =
        st == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "clpa_run: in->context_lens");
    in.context_lens = NULL, in.mass = bm;
    st = clpa_run(plan, &in);
    refused &= st == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "clpa_run: in->mass");
    ok(refused && test_untouched(ctx, o1, on),
       "prefill: a run given context_lens (the plan's lengths stay) or mass is refused, nothing"
       " written (%s)", clpa_last_error());
  }
  if (masked) { /* a run without the plan's mask */
    clpa_attn_inputs in;
    clpa_attn_inputs_init(&in);
    in.cache = cache, in.query = bq, in.block_tables = bt, in.out = o1;
    test_poison(ctx, o1, on);
    const clpa_status st = clpa_run(plan, &in);
    ok(st == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "block_mask") && test_untouched(ctx, o1, on),
       "prefill: a run without the plan's block mask is refused, nothing written (%s)", clpa_last_error());
  }
  if (!masked && !warp_rows) { /* regress_staging_write_failed_held_queue */
    /* The queue held behind a user event (a marker waiting on it), a one call whose second
     * list write (its work items, after the sequences' info) fails: the call fails at once.
     * It waited for the queue (clFinish), which the event held: a hang. Then the queue runs,
     * and the next call's lists are right. */
    cl_int err;
    cl_event gate = clCreateUserEvent(clpa_context_cl_context(ctx), &err);
    int held = err == CL_SUCCESS && clEnqueueMarkerWithWaitList(clpa_context_cl_queue(ctx), 1,
                                                                &gate, NULL) == CL_SUCCESS;
    signal(SIGALRM, on_hang);
    alarm(60);
    p.layer = 0, p.out = o2;
    fail_write_in = 2;
    const clpa_status st = held ? clpa_prefill(ctx, &p) : CLPA_OK;
    alarm(0);
    const int failed = st == CLPA_ERR_OUT_OF_RESOURCES && fail_write_in == 0 &&
                       strstr(clpa_last_error(), "CL_OUT_OF_RESOURCES");
    fail_write_in = 0;
    if (gate) clSetUserEventStatus(gate, CL_COMPLETE), clReleaseEvent(gate);
    clpa_attn_inputs in;
    clpa_attn_inputs_init(&in);
    in.cache = cache, in.query = bq, in.block_tables = bt, in.out = o1;
    test_poison(ctx, o1, on), test_poison(ctx, o2, on);
    const int after = clpa_run(plan, &in) == CLPA_OK && clpa_prefill(ctx, &p) == CLPA_OK &&
                      same_bytes(o1, o2, on);
    ok(held && failed && after,
       "prefill: a list write that fails behind a held queue fails the call without a wait,"
       " and the next call is right");
  }
  test_no_faults(ctx, "prefill");
  clpa_plan_release(plan);
  cl_mem all[] = {bq, bt, bm, o1, o2};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
  free(q);
}

static void test_xattn(clpa_xattn_path path) {
  const char *name = path == CLPA_XATTN_MMA ? "xattn mma" : "xattn f32";
  /* stride 8, block 64: 1 x 2 mask blocks a head; 61 queries, the last
   * strided group padded */
  enum { NQ = 61, OFF = 64, QB = 1, KB = 2 };
  const size_t qn = (size_t)NQ * HEADS * HS, nmask = (size_t)HEADS * QB * KB;
  float *q = malloc(sizeof(float) * qn);
  for (size_t i = 0; i < qn; i++) q[i] = rnd(-2, 2);
  int32_t table[MAXB];
  for (int i = 0; i < MAXB; i++) table[i] = (i * 5 + 3) % BLOCKS;
  cl_mem bq = test_buffer(ctx, q, sizeof(float) * qn), bt = test_buffer(ctx, table, sizeof table);
  cl_mem m1 = test_buffer(ctx, NULL, nmask), m2 = test_buffer(ctx, NULL, nmask);
  cl_mem w1 = test_buffer(ctx, NULL, nmask * 4), w2 = test_buffer(ctx, NULL, nmask * 4);
  clpa_xattn_params p;
  clpa_xattn_params_init(&p);
  p.num_heads = HEADS, p.cache = cache, p.max_blocks_per_seq = MAXB, p.query = bq;
  p.block_table = bt, p.num_q = NQ, p.q_offset = OFF, p.block = 64, p.tau = 0.8, p.path = path;
  clpa_plan *plan = NULL, *bare = NULL;
  if (!ok(clpa_plan_xattn(ctx, &p, &plan) == CLPA_OK, "%s: plan (%s)", name, clpa_last_error()))
    return;
  clpa_xattn_params lp = p; /* from the layout alone */
  lp.cache = NULL, lp.kv = kv, lp.query = NULL, lp.block_table = NULL;
  ok(clpa_plan_xattn(ctx, &lp, &bare) == CLPA_OK, "%s: a plan from the layout alone (%s)", name,
     clpa_last_error());
  int same = 1, kept = 1;
  for (int l = 0; l < LAYERS; l++) {
    test_poison(ctx, m1, nmask), test_poison(ctx, m2, nmask);
    test_poison(ctx, w1, nmask * 4), test_poison(ctx, w2, nmask * 4);
    clpa_attn_inputs in;
    clpa_attn_inputs_init(&in);
    in.cache = cache, in.layer = l, in.query = bq, in.block_tables = bt, in.block_mask = m1;
    in.mass = w1;
    p.layer = l, p.mask = m2, p.mass = w2;
    same &= clpa_run(plan, &in) == CLPA_OK && clpa_xattn_estimate(ctx, &p) == CLPA_OK &&
            same_bytes(m1, m2, nmask) && same_bytes(w1, w2, nmask * 4);
    uint8_t got[HEADS * QB * KB];
    test_read(ctx, m1, got, sizeof got);
    for (int h = 0; h < HEADS; h++) kept &= got[h * KB] == 1 && got[h * KB + 1] == 1;
  }
  ok(same && kept,
     "%s: one plan on %d layers equals clpa_xattn_estimate's mask and masses bit for bit, block"
     " 0 and the diagonal kept (%s)", name, LAYERS, clpa_last_error());
  if (bare) {
    clpa_attn_inputs in;
    clpa_attn_inputs_init(&in);
    in.key_cache = clpa_cache_key(cache, 1), in.query = bq, in.block_tables = bt;
    in.block_mask = m1, in.mass = w1;
    test_poison(ctx, m1, nmask), test_poison(ctx, w1, nmask * 4);
    ok(clpa_run(bare, &in) == CLPA_OK && same_bytes(m1, m2, nmask) && same_bytes(w1, w2, nmask * 4),
       "%s: the layout's plan on layer 1's key cache gives the same (%s)", name, clpa_last_error());
    in.value_cache = clpa_cache_value(cache, 1);
    test_poison(ctx, m1, nmask);
    const clpa_status st = clpa_run(bare, &in);
    ok(st == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "refuses") && test_untouched(ctx, m1, nmask),
       "%s: a run with a value cache is refused, nothing written (%s)", name, clpa_last_error());
    in.value_cache = NULL, in.block_mask = NULL;
    ok(clpa_run(bare, &in) == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "in->block_mask"),
       "%s: a run without a mask to write is refused (%s)", name, clpa_last_error());
  }
  test_no_faults(ctx, name);
  clpa_plan_release(plan);
  clpa_plan_release(bare);
  cl_mem all[] = {bq, bt, m1, m2, w1, w2};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
  free(q);
}

static void test_cascade(void) {
  batch b;
  batch_make(&b);
  /* sequences 0-1 and 2-3 share their first 2 blocks; 4 is alone */
  const int maxc = MAXB * BS;
  for (int s = 0; s < SEQS; s++) {
    b.lens[s] = 2 * BS + 1 + (int32_t)rng_below((uint32_t)(maxc - 2 * BS));
    for (int j = 0; j < MAXB; j++) b.tables[s * MAXB + j] = s * MAXB + j;
  }
  for (int j = 0; j < 2; j++) b.tables[1 * MAXB + j] = j, b.tables[3 * MAXB + j] = 2 * MAXB + j;
  test_write(ctx, b.bl, b.lens, sizeof b.lens);
  test_write(ctx, b.bt, b.tables, sizeof b.tables);
  const int32_t starts[] = {0, 2, 4}, shared[] = {2, 2};
  clpa_cascade_params cp;
  clpa_cascade_params_init(&cp);
  decode_params(&cp.decode, &b, maxc);
  cp.num_groups = 2, cp.group_starts = starts, cp.shared_blocks = shared;
  clpa_plan *plan = NULL;
  if (!ok(clpa_plan_cascade(ctx, &cp, &plan) == CLPA_OK, "cascade: plan (%s)", clpa_last_error())) {
    batch_free(&b);
    return;
  }
  int same = 1;
  for (int l = 0; l < LAYERS; l++) {
    clpa_attn_inputs in;
    inputs_of(&in, &b, l);
    cp.decode.layer = l;
    same &= clpa_run(plan, &in) == CLPA_OK && clpa_cascade_decode(ctx, &cp) == CLPA_OK &&
            same_bytes(b.out_run, b.out_call, sizeof(float) * SEQS * HEADS * HS) &&
            same_bytes(b.lse_run, b.lse_call, sizeof(float) * SEQS * HEADS);
  }
  ok(same, "cascade: one plan on %d layers equals clpa_cascade_decode bit for bit (%s)", LAYERS,
     clpa_last_error());
  clpa_attn_inputs in;
  inputs_of(&in, &b, 0);
  in.alibi_slopes = b.bl; /* any buffer: refused before it is read */
  test_poison(ctx, b.out_run, sizeof(float) * SEQS * HEADS * HS);
  ok(clpa_run(plan, &in) == CLPA_ERR_UNSUPPORTED &&
         test_untouched(ctx, b.out_run, sizeof(float) * SEQS * HEADS * HS),
     "cascade: a run with ALiBi is refused, nothing written (%s)", clpa_last_error());
  in.alibi_slopes = NULL, in.block_mask = b.bl; /* regress_run_refuses_unread */
  ok(clpa_run(plan, &in) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "clpa_run: in->block_mask") &&
         test_untouched(ctx, b.out_run, sizeof(float) * SEQS * HEADS * HS),
     "cascade: a run given a block mask (which it would not apply) is refused, nothing written"
     " (%s)", clpa_last_error());
  test_no_faults(ctx, "cascade");
  clpa_plan_release(plan);
  batch_free(&b);
}

static void test_refusals(void) {
  batch b;
  batch_make(&b);
  clpa_decode_params p;
  decode_params(&p, &b, MAXB * BS);
  clpa_plan *plan = (clpa_plan *)&p; /* must come back NULL */
  ok(clpa_plan_decode(ctx, NULL, &plan) == CLPA_ERR_INVALID_ARG && plan == NULL,
     "plan: NULL params refused, *plan NULL (%s)", clpa_last_error());
  ok(clpa_plan_decode(ctx, &p, NULL) == CLPA_ERR_INVALID_ARG, "plan: NULL out refused (%s)",
     clpa_last_error());
  clpa_attn_inputs in;
  inputs_of(&in, &b, 0);
  ok(clpa_run(NULL, &in) == CLPA_ERR_INVALID_ARG, "run: NULL plan refused (%s)", clpa_last_error());
  clpa_plan_decode(ctx, &p, &plan);
  ok(clpa_run(plan, NULL) == CLPA_ERR_INVALID_ARG, "run: NULL inputs refused (%s)", clpa_last_error());
  /* caches of another shape */
  clpa_cache_config cfg;
  clpa_cache_config_init(&cfg);
  cfg.num_kv_heads = KV_HEADS, cfg.head_size = 32, cfg.block_size = BS, cfg.dtype = KV_DTYPE;
  cfg.num_blocks = BLOCKS;
  clpa_cache *other = NULL;
  clpa_cache_create(ctx, &cfg, &other);
  batch_step(&b, MAXB * BS);
  in.cache = other;
  clpa_status st = clpa_run(plan, &in);
  ok(st == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "the plan was made for") &&
         test_untouched(ctx, b.out_run, sizeof(float) * SEQS * HEADS * HS),
     "run: caches of head size 32 on a plan for 64 refused, nothing written (%s)", clpa_last_error());
  in.cache = cache, in.layer = LAYERS;
  ok(clpa_run(plan, &in) == CLPA_ERR_INVALID_ARG, "run: layer %d of %d refused (%s)", LAYERS,
     LAYERS, clpa_last_error());
  /* regress_run_refuses_unread: buffers a decode run would not read (it ran on without them) */
  in.layer = 0, in.block_mask = b.bt;
  st = clpa_run(plan, &in);
  int refused = st == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "clpa_run: in->block_mask");
  in.block_mask = NULL, in.mass = b.bt;
  st = clpa_run(plan, &in);
  refused &= st == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "clpa_run: in->mass");
  ok(refused && test_untouched(ctx, b.out_run, sizeof(float) * SEQS * HEADS * HS),
     "run: a decode plan given a block mask or masses is refused, nothing written (%s)",
     clpa_last_error());
  clpa_plan_release(plan);
  clpa_cache_destroy(other);
  /* an empty batch: nothing runs, the event completes */
  p.num_seqs = 0;
  cl_event ev = NULL;
  ok(clpa_plan_decode(ctx, &p, &plan) == CLPA_OK, "plan: an empty batch (%s)", clpa_last_error());
  inputs_of(&in, &b, 0);
  in.event = &ev;
  ok(clpa_run(plan, &in) == CLPA_OK && ev && clWaitForEvents(1, &ev) == CL_SUCCESS,
     "run: an empty batch's event completes");
  if (ev) clReleaseEvent(ev);
  clpa_plan_release(plan);
  clpa_plan_release(NULL);
  batch_free(&b);
}

int main(int argc, char **argv) {
  setenv("CLPA_DECODE_WORK_LIST", "on", 1); /* see the top */
  /* --merge-kernel: the mma plans alone, their partitions merged by reduce.cl's kernel after
   * the launch (as on devices without device-scope ordering; PoCL and NVIDIA merge in it) */
  const int merge_kernel = argc > 1 && strcmp(argv[1], "--merge-kernel") == 0;
  if (merge_kernel) setenv("CLPA_DECODE_MERGE", "kernel", 1);
  ctx = test_context(0);
  rng_seed_from_env();
  clpa_cache_config cfg;
  clpa_cache_config_init(&cfg);
  cfg.num_layers = LAYERS, cfg.num_kv_heads = KV_HEADS, cfg.head_size = HS, cfg.block_size = BS;
  cfg.dtype = KV_DTYPE, cfg.num_blocks = BLOCKS;
  if (clpa_cache_create(ctx, &cfg, &cache) != CLPA_OK) {
    printf("not ok 1 - cache: %s\n1..1\n", clpa_last_error());
    return 1;
  }
  clpa_cache_get_layout(cache, &kv);
  fill_cache();
  if (!merge_kernel) {
    test_decode_reuse("auto", CLPA_DECODE_PATH_AUTO, CLPA_DECODE_AUTO, 0, 0, 0);
    test_decode_reuse("auto", CLPA_DECODE_PATH_AUTO, CLPA_DECODE_AUTO, 0, 1, 0);
    test_decode_reuse("lanes v1", CLPA_DECODE_PATH_LANES, CLPA_DECODE_V1, 0, 0, 0);
    test_decode_reuse("lanes v2", CLPA_DECODE_PATH_LANES, CLPA_DECODE_V2, 32, 0, 0);
    test_decode_reuse("rows v2", CLPA_DECODE_PATH_ROWS, CLPA_DECODE_V2, 64, 0, 0);
  }
  test_decode_reuse("mma v2", CLPA_DECODE_PATH_MMA, CLPA_DECODE_V2, 32, 0, 0);
  test_decode_reuse("mma v2 listed", CLPA_DECODE_PATH_MMA, CLPA_DECODE_V2, 32, 1, 1);
  /* a window: a row's partitions count from its window's first chunk */
  decode_window = 70;
  test_decode_reuse("mma v2 listed, window 70", CLPA_DECODE_PATH_MMA, CLPA_DECODE_V2, 32, 1, 1);
  decode_window = 0;
  test_decode_back_to_back();
  if (!merge_kernel) {
    test_layout_only();
    test_prefill(0, 0);
    test_prefill(1, 0);
    test_prefill(0, 32);
    test_cascade();
    test_xattn(CLPA_XATTN_F32);
    test_xattn(CLPA_XATTN_MMA);
    test_refusals();
  }
  for (int l = 0; l < LAYERS; l++) free(keys[l]), free(values[l]);
  clpa_cache_destroy(cache);
  return test_context_done(ctx);
}
