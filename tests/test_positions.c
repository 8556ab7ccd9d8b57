/*
 * Positions at the 32-bit edge (issue 41's findings, each at its exact
 * values): a table of 2^26 entries x 32 tokens, every entry a valid block
 * of a small cache, admits positions up to 2^31 - 1, but the kernels keep
 * positions in int, so every call takes contexts up to CLPA_MAX_CONTEXT_LEN
 * (2^30) only.
 *   regress_prefill_past_max_context: 2 147 483 607 cached + 40 new tokens
 *     (the rows path crashed, the tiles path was silently wrong), and one
 *     past the bound: refused on every path, named, nothing written.
 *   regress_prefill_at_max_context: the last 40 positions below the bound,
 *     sliding window 64: computed right on every path (against
 *     clpa_ref_prefill, f32 1e-4 / 1e-4; the mma path's rounding of P to
 *     f16 as test_prefill allows it).
 *   regress_decode_plan_near_int32_max: max_context_len = INT32_MAX on
 *     every path and variant (the planner overflowed int: UBSan, a build
 *     with a negative partition, a refusal that asked for 2^64 bytes):
 *     refused, named, nothing written; at the bound every plan answers
 *     with sane numbers.
 *   regress_decode_at_max_context: a context of 2^30 with window 64 on the
 *     mma path (v1) and the rows path (v2), against clpa_ref_decode.
 *   XAttention past the bound: refused like the others.
 * Cascade's check of context lengths past max_context_len is in
 * test_cascade.c (regress_cascade_context_past_max).
 */
#include <stdio.h>

#include "clpa_xattn.h"
#include "cl_util.h"
#include "ref_attention.h"

#define BS 32
#define HS 64
#define HEADS 4
#define KV_HEADS 2
#define NB 8                  /* physical blocks: table entry i is block i % NB */
#define TABLE ((int32_t)1 << 26) /* entries: 2^31 tokens */
#define NEW 40
#define WINDOW 64

static clpa_context *ctx;
static clpa_kv_layout kv;
static cl_mem kc, vc, table;
static float *keys, *values; /* the caches as floats, for the references */
static int32_t *host_table;

static void setup(void) {
  clpa_kv_layout_init(&kv, CLPA_DTYPE_F16, NB, BS, KV_HEADS, HS);
  const size_t n = kv.cache_bytes / 2;
  keys = malloc(sizeof(float) * n), values = malloc(sizeof(float) * n);
  uint16_t *k16 = malloc(kv.cache_bytes), *v16 = malloc(kv.cache_bytes);
  for (size_t i = 0; i < n; i++) keys[i] = (float)rng_uniform(-1, 1), values[i] = (float)rng_uniform(-2, 2);
  clpa_dtype_encode(CLPA_DTYPE_F16, keys, k16, n, 1.0f);
  clpa_dtype_encode(CLPA_DTYPE_F16, values, v16, n, 1.0f);
  clpa_dtype_decode(CLPA_DTYPE_F16, k16, keys, n, 1.0f); /* what the device reads */
  clpa_dtype_decode(CLPA_DTYPE_F16, v16, values, n, 1.0f);
  kc = test_buffer(ctx, k16, kv.cache_bytes), vc = test_buffer(ctx, v16, kv.cache_bytes);
  host_table = malloc(sizeof(int32_t) * (size_t)TABLE);
  for (int32_t i = 0; i < TABLE; i++) host_table[i] = (i * 5 + 3) % NB;
  table = test_buffer(ctx, host_table, sizeof(int32_t) * (size_t)TABLE);
  free(k16), free(v16);
}

/* test_decode's and test_prefill's tolerances for an f32 output: 1e-4 /
 * 1e-4; on the mma paths, which round queries and P to the cache's f16,
 * f16's 1e-3 / 2e-3 and at least the bound of P's rounding. */
static double tol_a(int mma) { return mma ? fmax(1e-3, test_p_round_atol(CLPA_DTYPE_F16, 2.0)) : 1e-4; }
static double tol_r(int mma) { return mma ? 2e-3 : 1e-4; }

static float *random_query(int rows) {
  float *q = malloc(sizeof(float) * (size_t)rows * HEADS * HS);
  for (int i = 0; i < rows * HEADS * HS; i++) q[i] = (float)rng_uniform(-2, 2);
  return q;
}

/* Every number in a message is one a caller could have meant: no negative
 * and none past 2^40 (overflowed arithmetic shows as either). */
static int sane_numbers(const char *msg) {
  for (const char *p = msg; *p; p++) {
    if (*p == '-' && p[1] >= '0' && p[1] <= '9') return 0;
    if (*p >= '0' && *p <= '9' && strtoull(p, NULL, 10) > ((unsigned long long)1 << 40)) return 0;
    while (*p >= '0' && *p <= '9' && p[1] >= '0' && p[1] <= '9') p++;
  }
  return 1;
}

static const char *prefill_path_name(clpa_prefill_path path) {
  return path == CLPA_PREFILL_ROWS ? "rows" : path == CLPA_PREFILL_TILES ? "tiles" : "mma";
}

static void prefill_params(clpa_prefill_params *p, const int32_t *cu, const int32_t *cached,
                           cl_mem q, cl_mem out, cl_mem lse) {
  clpa_prefill_params_init(p);
  p->num_seqs = 1, p->num_heads = HEADS, p->key_cache = kc, p->value_cache = vc, p->kv = kv;
  p->max_blocks_per_seq = TABLE, p->cu_seqlens_q = cu, p->cached_lens = cached;
  p->scale = 0.125f, p->sliding_window = WINDOW, p->query = q, p->block_tables = table;
  p->out = out, p->lse = lse;
}

static void regress_prefill_past_max_context(cl_mem q, cl_mem out) {
  const int32_t cu[2] = {0, NEW}, past[] = {2147483607, CLPA_MAX_CONTEXT_LEN - NEW + 1};
  const clpa_prefill_path paths[] = {CLPA_PREFILL_AUTO, CLPA_PREFILL_ROWS, CLPA_PREFILL_TILES,
                                     CLPA_PREFILL_MMA};
  const size_t bytes = sizeof(float) * NEW * HEADS * HS;
  test_poison(ctx, out, bytes);
  for (size_t c = 0; c < 2; c++)
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
      clpa_prefill_params p;
      prefill_params(&p, cu, &past[c], q, out, NULL);
      p.path = paths[i];
      const clpa_status st = clpa_prefill(ctx, &p);
      const char *msg = clpa_context_last_error(ctx);
      ok(st == CLPA_ERR_UNSUPPORTED && strstr(msg, "clpa_prefill: sequence 0: cached_lens") &&
             strstr(msg, "CLPA_MAX_CONTEXT_LEN"),
         "regress_prefill_past_max_context: %d cached + %d new, path %d refused: %s", past[c],
         NEW, (int)paths[i], msg);
    }
  ok(test_untouched(ctx, out, bytes) && test_no_faults(ctx, "after the refusals"),
     "regress_prefill_past_max_context: nothing written");
}

static void regress_prefill_at_max_context(cl_mem q, const float *hq, cl_mem out, cl_mem lse) {
  const int32_t cu[2] = {0, NEW}, cached = CLPA_MAX_CONTEXT_LEN - NEW;
  const size_t n = (size_t)NEW * HEADS * HS;
  double *want = malloc(sizeof(double) * n), *want_lse = malloc(sizeof(double) * NEW * HEADS);
  clpa_ref_prefill_args r = {0};
  r.num_seqs = 1, r.num_heads = HEADS, r.kv = kv, r.max_blocks_per_seq = TABLE, r.query = hq;
  r.q_stride = HEADS * HS, r.cu_seqlens_q = cu, r.cached_lens = &cached, r.key_cache = keys;
  r.value_cache = values, r.block_tables = host_table, r.scale = 0.125f;
  r.sliding_window = WINDOW, r.causal = 1, r.out = want, r.lse = want_lse;
  ok(clpa_ref_prefill(&r) == CLPA_OK, "reference prefill at the bound: %s", clpa_last_error());
  const clpa_prefill_path paths[] = {CLPA_PREFILL_ROWS, CLPA_PREFILL_TILES, CLPA_PREFILL_MMA};
  float *got = malloc(sizeof(float) * n), *got_lse = malloc(sizeof(float) * NEW * HEADS);
  for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
    clpa_prefill_params p;
    prefill_params(&p, cu, &cached, q, out, lse);
    p.path = paths[i];
    test_poison(ctx, out, sizeof(float) * n), test_poison(ctx, lse, sizeof(float) * NEW * HEADS);
    const clpa_status st = clpa_prefill(ctx, &p);
    ok(st == CLPA_OK, "prefill at positions %d .. %d, path %s: %s", cached, cached + NEW - 1,
       prefill_path_name(paths[i]), clpa_last_error());
    test_no_faults(ctx, "after the call");
    test_read(ctx, out, got, sizeof(float) * n), test_read(ctx, lse, got_lse, sizeof(float) * NEW * HEADS);
    const int mma = paths[i] == CLPA_PREFILL_MMA;
    size_t at, at_l;
    const double worst = test_worst(got, want, n, tol_a(mma), tol_r(mma), &at);
    const double worst_l = test_worst(got_lse, want_lse, NEW * HEADS, 1e-4, 1e-5, &at_l);
    ok(worst <= 1.0 && worst_l <= 1.0,
       "regress_prefill_at_max_context: path %s within tolerance (worst %.3g, lse %.3g)",
       prefill_path_name(paths[i]), worst, worst_l);
    if (worst > 1.0) diag("worst element %zu: got %.9g want %.9g", at, got[at], want[at]);
  }
  free(want), free(want_lse), free(got), free(got_lse);
}

static void decode_params(clpa_decode_params *p, cl_mem q, cl_mem lens, cl_mem out, cl_mem lse,
                          int32_t max_context_len) {
  clpa_decode_params_init(p);
  p->num_seqs = 1, p->num_heads = HEADS, p->key_cache = kc, p->value_cache = vc, p->kv = kv;
  p->max_blocks_per_seq = TABLE, p->max_context_len = max_context_len, p->scale = 0.125f;
  p->sliding_window = WINDOW, p->query = q, p->block_tables = table, p->context_lens = lens;
  p->out = out, p->lse = lse;
}

static const clpa_decode_path dpaths[] = {CLPA_DECODE_PATH_AUTO, CLPA_DECODE_PATH_LANES,
                                          CLPA_DECODE_PATH_ROWS, CLPA_DECODE_PATH_MMA};
static const clpa_decode_variant variants[] = {CLPA_DECODE_AUTO, CLPA_DECODE_V1, CLPA_DECODE_V2};

static void regress_decode_plan_near_int32_max(cl_mem q, cl_mem lens, cl_mem out) {
  const size_t bytes = sizeof(float) * HEADS * HS;
  test_poison(ctx, out, bytes);
  int refused = 0, runs = 0, sane = 0, plans = 0;
  for (size_t i = 0; i < 4; i++)
    for (size_t v = 0; v < 3; v++) {
      clpa_decode_params p;
      decode_params(&p, q, lens, out, NULL, INT32_MAX);
      p.path = dpaths[i], p.variant = variants[v];
      const clpa_status a = clpa_decode_choice(ctx, &p, NULL, NULL, NULL, NULL);
      const int named = strstr(clpa_context_last_error(ctx), "max_context_len = 2147483647 is past"
                                                             " CLPA_MAX_CONTEXT_LEN") != NULL;
      const clpa_status b = clpa_decode(ctx, &p);
      const int named_b = strstr(clpa_context_last_error(ctx), "clpa_decode: max_context_len") != NULL;
      refused += a == CLPA_ERR_UNSUPPORTED && named && b == CLPA_ERR_UNSUPPORTED && named_b;
      runs++;
      /* at the bound: a plan, or a named refusal with numbers that mean something */
      decode_params(&p, q, lens, out, NULL, CLPA_MAX_CONTEXT_LEN);
      p.path = dpaths[i], p.variant = variants[v];
      clpa_decode_variant got_v = CLPA_DECODE_AUTO;
      int32_t part = -1, hpg = -1;
      const clpa_status c = clpa_decode_choice(ctx, &p, NULL, &got_v, &part, &hpg);
      const int good = c == CLPA_OK ? (got_v == CLPA_DECODE_V1 ? part == 0 : part > 0 && part <= CLPA_MAX_CONTEXT_LEN) && hpg > 0
                                    : (c == CLPA_ERR_UNSUPPORTED && sane_numbers(clpa_context_last_error(ctx)));
      if (!good)
        diag("path %d variant %d at the bound: %s (partition %d, heads %d) %s", (int)dpaths[i],
             (int)variants[v], clpa_status_name(c), part, hpg, clpa_context_last_error(ctx));
      sane += good;
      plans++;
    }
  ok(refused == runs, "regress_decode_plan_near_int32_max: max_context_len = INT32_MAX refused by"
                      " clpa_decode_choice and clpa_decode on %d of %d paths x variants", refused, runs);
  ok(sane == plans, "regress_decode_plan_near_int32_max: at CLPA_MAX_CONTEXT_LEN %d of %d plans sane",
     sane, plans);
  ok(test_untouched(ctx, out, bytes) && test_no_faults(ctx, "after the refusals"),
     "regress_decode_plan_near_int32_max: nothing written");
}

static void regress_decode_at_max_context(cl_mem q, const float *hq, cl_mem lens, cl_mem out,
                                          cl_mem lse) {
  const int32_t len = CLPA_MAX_CONTEXT_LEN;
  double want[HEADS * HS], want_lse[HEADS];
  clpa_ref_decode_args r = {0};
  r.num_seqs = 1, r.num_heads = HEADS, r.kv = kv, r.max_blocks_per_seq = TABLE, r.query = hq;
  r.q_stride = HEADS * HS, r.key_cache = keys, r.value_cache = values;
  r.block_tables = host_table, r.context_lens = &len, r.scale = 0.125f;
  r.sliding_window = WINDOW, r.out = want, r.lse = want_lse;
  ok(clpa_ref_decode(&r) == CLPA_OK, "reference decode at the bound: %s", clpa_last_error());
  /* mma v1 walks the window's chunks only; rows v2 in partitions of 8192
   * (its longest for 2 heads) has 131072 of them, all but one empty. */
  const struct {
    clpa_decode_path path;
    clpa_decode_variant variant;
    int32_t partition;
    const char *name;
  } runs[] = {{CLPA_DECODE_PATH_MMA, CLPA_DECODE_V1, 0, "mma v1"},
              {CLPA_DECODE_PATH_ROWS, CLPA_DECODE_V2, 8192, "rows v2"}};
  float got[HEADS * HS], got_lse[HEADS];
  for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
    clpa_decode_params p;
    decode_params(&p, q, lens, out, lse, len);
    p.path = runs[i].path, p.variant = runs[i].variant, p.partition_size = runs[i].partition;
    test_poison(ctx, out, sizeof got), test_poison(ctx, lse, sizeof got_lse);
    ok(clpa_decode(ctx, &p) == CLPA_OK, "decode of a context of %d, %s: %s", len, runs[i].name,
       clpa_last_error());
    test_no_faults(ctx, "after the call");
    test_read(ctx, out, got, sizeof got), test_read(ctx, lse, got_lse, sizeof got_lse);
    const int mma = runs[i].path == CLPA_DECODE_PATH_MMA;
    size_t at, at_l;
    const double worst = test_worst(got, want, HEADS * HS, tol_a(mma), tol_r(mma), &at);
    const double worst_l = test_worst(got_lse, want_lse, HEADS, 1e-4, 1e-5, &at_l);
    ok(worst <= 1.0 && worst_l <= 1.0,
       "regress_decode_at_max_context: %s within tolerance (worst %.3g, lse %.3g)", runs[i].name,
       worst, worst_l);
    if (worst > 1.0) diag("worst element %zu: got %.9g want %.9g", at, got[at], want[at]);
  }
}

static void xattn_past_max_context(cl_mem q) {
  clpa_xattn_params p;
  clpa_xattn_params_init(&p);
  p.num_heads = HEADS, p.key_cache = kc, p.kv = kv, p.block_table = table;
  p.max_blocks_per_seq = TABLE, p.query = q, p.num_q = 8, p.q_offset = CLPA_MAX_CONTEXT_LEN;
  cl_mem mask = test_buffer(ctx, NULL, 4096);
  test_poison(ctx, mask, 4096);
  p.mask = mask;
  const clpa_status st = clpa_xattn_estimate(ctx, &p);
  ok(st == CLPA_ERR_UNSUPPORTED && strstr(clpa_context_last_error(ctx), "CLPA_MAX_CONTEXT_LEN") &&
         test_untouched(ctx, mask, 4096),
     "XAttention: q_offset %d + num_q 8 refused, nothing written: %s", p.q_offset,
     clpa_context_last_error(ctx));
  clReleaseMemObject(mask);
}

int main(void) {
  rng_seed_from_env();
  ctx = test_context(0);
  setup();
  float *hq = random_query(NEW);
  cl_mem q = test_buffer(ctx, hq, sizeof(float) * NEW * HEADS * HS);
  cl_mem out = test_buffer(ctx, NULL, sizeof(float) * NEW * HEADS * HS);
  cl_mem lse = test_buffer(ctx, NULL, sizeof(float) * NEW * HEADS);
  const int32_t len = CLPA_MAX_CONTEXT_LEN;
  cl_mem lens = test_buffer(ctx, &len, sizeof len);
  regress_prefill_past_max_context(q, out);
  regress_prefill_at_max_context(q, hq, out, lse);
  regress_decode_plan_near_int32_max(q, lens, out);
  regress_decode_at_max_context(q, hq, lens, out, lse);
  xattn_past_max_context(q);
  cl_mem all[] = {q, out, lse, lens, kc, vc, table};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
  free(hq), free(keys), free(values), free(host_table);
  return test_context_done(ctx);
}
