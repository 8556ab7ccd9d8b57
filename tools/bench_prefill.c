/*
 * clpa-bench prefill — prefill attention throughput: TFLOP/s of the
 * attention products, next to the device's f32 FMA peak measured in the
 * same run (clpa_smoke_fma: 8 independent float16 mad chains per
 * work-item).
 *
 * FLOPs per call: each (sequence, query head) with L new tokens over C
 * cached ones does Q.K^T and P.V over the causal half of the new part and
 * over the whole prefix: 2 * D * L^2 + 4 * D * L * C (multiply and add
 * counted as 2). Method: random finite inputs, every sequence with its own
 * shuffled blocks, its new tokens' K/V already in the cache; a first call
 * (kernel builds), two warm-ups, then 7 batches of back-to-back calls
 * timed around clFinish; the median batch gives the time per call.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "clpa.h"

typedef struct prefill_args {
  int32_t heads, kv_heads, head_size, block_size, batch, new_tokens, cached, rows, keys;
  clpa_dtype dtype, q_dtype;
  clpa_prefill_path path;
  clpa_kv_layout_kind layout;
  bench_shapes shapes; /* the defaults taken: gpu or cpu (auto until parse picks) */
  int json, tune;
  int32_t warp_rows; /* mma: rows_per_warp (0 picks) */
} prefill_args;

/* The shape sets' batch: 8 x 2048 new tokens on a GPU; 1 x 2048 on a CPU
 * (about 0.2 s a call on PoCL with 2 cores, against 1.9 s). */
#define GPU_BATCH 8
#define CPU_BATCH 1

static const char *path_name(clpa_prefill_path p) {
  return p == CLPA_PREFILL_ROWS ? "rows" : p == CLPA_PREFILL_MMA ? "mma" : "tiles";
}

static const char *parse_path(const char *text, void *value) {
  clpa_prefill_path *p = value;
  if (strcmp(text, "auto") == 0) *p = CLPA_PREFILL_AUTO;
  else if (strcmp(text, "tiles") == 0) *p = CLPA_PREFILL_TILES;
  else if (strcmp(text, "rows") == 0) *p = CLPA_PREFILL_ROWS;
  else if (strcmp(text, "mma") == 0) *p = CLPA_PREFILL_MMA;
  else return "auto, tiles, rows or mma";
  return NULL;
}

#define MAX_DIM (1 << 24)

static const char *parse_dtype(const char *text, void *value) {
  return clpa_dtype_parse(text, value) == CLPA_OK ? NULL : "f32, f16, bf16, fp8_e4m3 or fp8_e5m2";
}

static int parse(int argc, char **argv, prefill_args *a) {
  /* batch 0: not given, the shape set's */
  *a = (prefill_args){32, 8, 128, 16, 0, 2048, 0, 0, 0, CLPA_DTYPE_F16, CLPA_DTYPE_F16,
                      CLPA_PREFILL_AUTO, CLPA_KV_LAYOUT_SPLIT_KEY, BENCH_SHAPES_AUTO, 0, 0, 0};
  const cli_opt opts[] = {
      {"heads", CLI_INT, &a->heads, 1, MAX_DIM, "N", "query heads", NULL, NULL},
      {"kv-heads", CLI_INT, &a->kv_heads, 1, MAX_DIM, "N", "key/value heads, a divisor of --heads",
       NULL, NULL},
      {"head-size", CLI_INT, &a->head_size, 1, MAX_DIM, "N", "elements per head", NULL, NULL},
      {"block-size", CLI_INT, &a->block_size, 1, MAX_DIM, "N", "tokens per cache block", NULL,
       NULL},
      {"batch", CLI_INT, &a->batch, 1, MAX_DIM, "N", "sequences", "8; CPU 1", NULL},
      {"new-tokens", CLI_INT, &a->new_tokens, 1, MAX_DIM, "N", "new (prompt) tokens per sequence",
       NULL, NULL},
      {"cached-tokens", CLI_INT, &a->cached, 0, MAX_DIM, "N",
       "tokens per sequence already in the cache\n(a prefix hit)", NULL, NULL},
      {"dtype", CLI_WORD, &a->dtype, 0, 0, "NAME",
       "cache dtype: f32, f16, bf16, fp8_e4m3 or\nfp8_e5m2", "f16", parse_dtype},
      {"layout", CLI_WORD, &a->layout, 0, 0, "KIND", "the caches' layout: split_key, hnd or nhd",
       "split_key", bench_parse_layout},
      {"q-dtype", CLI_WORD, &a->q_dtype, 0, 0, "NAME", "query and output dtype: f32, f16 or bf16",
       "f16", parse_dtype},
      {"path", CLI_WORD, &a->path, 0, 0, "NAME",
       "auto (rows on CPUs, mma on NVIDIA where it\napplies, else tiles), tiles (local-memory\ntiles), "
       "rows (rows per work-item) or mma\n(tensor cores; emulated off NVIDIA, slow)",
       "auto", parse_path},
      {"rows", CLI_INT, &a->rows, 0, 128, "N",
       "query rows per work-group (tiles: 8, 16, 32,\n64; rows: 1, 2, 4, 8, 16; mma: 64, 128); 0\npicks",
       NULL, NULL},
      {"keys", CLI_INT, &a->keys, 0, 64, "N", "keys per tile (8, 16, 32, 64); 0 picks", NULL,
       NULL},
      {"warp-rows", CLI_INT, &a->warp_rows, 0, 32, "N",
       "mma: query rows a warp (16, 32); 0 picks", NULL, NULL},
      {"tune", CLI_FLAG, &a->tune, 0, 0, NULL,
       "time every path and shape on these inputs and\nprint the tuning-table line for the best",
       NULL, NULL},
      {"shapes", CLI_WORD, &a->shapes, 0, 0, "SET",
       "the defaults the options not given take: gpu,\ncpu (marked CPU; seconds on a 2-core CPU)\n"
       "or auto (cpu when the device is a CPU)", "auto", bench_parse_shapes},
      {"json", CLI_FLAG, &a->json, 0, 0, NULL, "print one JSON line instead of the table", NULL,
       NULL},
      {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
  };
  const cli_cmd cmd = {
      "clpa-bench prefill",
      "Times causal paged prefill attention on the selected device: TFLOP/s of\n"
      "Q.K^T and P.V (the causal half of the new tokens, plus the whole cached\n"
      "prefix), next to the device's f32 FMA peak measured in the same run.",
      opts,
      "FLOPs: batch * heads * (2 * D * L^2 + 4 * D * L * C) for L new and C cached\n"
      "tokens. Method: random finite inputs, shuffled blocks, a first call (kernel\n"
      "builds), two warm-ups, then 7 batches timed around clFinish; the median.\n"
      "JSON keys: op, device, lanes, mode (hot), path, rows (a work-group),\n"
      "rows_per_warp (mma; else 0), keys (a tile), heads, kv_heads, head_size,\n"
      "block_size, layout,"
      " batch, new_tokens, cached_tokens, dtype, q_dtype, us_per_call, tflops,\n"
      "fma_peak_tflops, ratio,\n"
      "shapes (the set the defaults came from: gpu or cpu).",
      clpa_version_string(),
  };
  int rc = cli_parse(&cmd, argc, argv);
  if (rc != CLI_RUN) return rc;
  a->shapes = bench_shapes_pick(a->shapes);
  if (!a->batch) a->batch = a->shapes == BENCH_SHAPES_CPU ? CPU_BATCH : GPU_BATCH;
  const long long per_seq = ((long long)a->cached + a->new_tokens + a->block_size - 1) / a->block_size;
  if (per_seq * a->batch > INT32_MAX || (long long)a->new_tokens * a->batch > INT32_MAX)
    return cli_error(&cmd, "--batch %d of %d + %d tokens is more than the library indexes",
                     (int)a->batch, (int)a->cached, (int)a->new_tokens);
  return CLI_RUN;
}

#define FAIL(...) BENCH_FAIL("prefill", __VA_ARGS__)
#define REFUSE(why)                                                                     \
  do {                                                                                  \
    rc = 2;                                                                             \
    FAIL("the library refuses this shape: %s\nTry 'clpa-bench prefill --help' for the " \
         "options.",                                                                    \
         why);                                                                          \
  } while (0)

int bench_prefill(int argc, char **argv) {
  prefill_args a;
  int parsed = parse(argc, argv, &a);
  if (parsed != CLI_RUN) return parsed;
  bench_env env;
  if (bench_open(&env)) return 1;
  const int L = a.new_tokens, C = a.cached;
  const int bpseq = (C + L + a.block_size - 1) / a.block_size, nblocks = bpseq * a.batch;
  const size_t esz = clpa_dtype_size(a.dtype), qsz = clpa_dtype_size(a.q_dtype);
  const size_t cache_elems = (size_t)nblocks * a.kv_heads * a.head_size * a.block_size;
  const size_t qn = (size_t)a.batch * L * a.heads * a.head_size;
  int rc = 1;
  int32_t *tables = malloc(sizeof(int32_t) * nblocks), *cu = malloc(sizeof(int32_t) * (a.batch + 1));
  int32_t *cached = malloc(sizeof(int32_t) * a.batch);
  float *q = malloc(sizeof(float) * qn);
  void *qs = malloc(qsz * qn);
  cl_mem kc = NULL, vc = NULL, bq = NULL, bt = NULL, out = NULL;
  if (!tables || !cu || !cached || !q || !qs) FAIL("out of host memory");
  bench_shuffled(tables, nblocks);
  cu[0] = 0;
  for (int s = 0; s < a.batch; s++) cu[s + 1] = cu[s] + L, cached[s] = C;
  bench_random_values(q, qn);
  if (clpa_dtype_encode(a.q_dtype, q, qs, qn, 1.0f) != CLPA_OK) REFUSE(clpa_last_error());
  cli_progress("prefill: making random K/V caches (2 x %.0f MB)...",
               (double)(cache_elems * esz) / 1e6);
  kc = bench_random_cache(&env, a.dtype, cache_elems);
  vc = bench_random_cache(&env, a.dtype, cache_elems);
  cli_progress_end();
  bq = bench_buffer(&env, qs, qsz * qn);
  bt = bench_buffer(&env, tables, sizeof(int32_t) * nblocks);
  out = bench_buffer(&env, NULL, qsz * qn);
  if (!kc || !vc || !bq || !bt || !out) FAIL("could not make the inputs");

  clpa_prefill_params p;
  clpa_prefill_params_init(&p);
  if (clpa_kv_layout_init_kind(&p.kv, a.layout, a.dtype, nblocks, a.block_size, a.kv_heads,
                               a.head_size))
    REFUSE(clpa_last_error());
  p.num_seqs = a.batch, p.num_heads = a.heads, p.key_cache = kc, p.value_cache = vc;
  p.max_blocks_per_seq = bpseq, p.cu_seqlens_q = cu, p.cached_lens = cached;
  p.q_dtype = a.q_dtype, p.scale = 1.0f / sqrtf((float)a.head_size), p.k_scale = p.v_scale = 0.01f;
  p.query = bq, p.block_tables = bt, p.out = out;
  p.rows_per_group = a.rows, p.keys_per_tile = a.keys, p.path = a.path;
  p.rows_per_warp = a.warp_rows;

  if (a.tune) { /* every candidate on the same inputs; the best becomes the table's line */
    static const int cand[][3] = {{CLPA_PREFILL_TILES, 64, 16}, {CLPA_PREFILL_TILES, 32, 32},
                                  {CLPA_PREFILL_TILES, 16, 32},
                                  {CLPA_PREFILL_TILES, 32, 16}, {CLPA_PREFILL_TILES, 16, 16},
                                  {CLPA_PREFILL_ROWS, 1, 0},    {CLPA_PREFILL_ROWS, 2, 0},
                                  {CLPA_PREFILL_ROWS, 4, 0},    {CLPA_PREFILL_ROWS, 8, 0},
                                  {CLPA_PREFILL_ROWS, 16, 0},   {CLPA_PREFILL_MMA, 64, 64},
                                  {CLPA_PREFILL_MMA, 64, 32},   {CLPA_PREFILL_MMA, 128, 64},
                                  {CLPA_PREFILL_MMA, 128, 32}};
    const double flops = (double)a.batch * a.heads *
                         (2.0 * a.head_size * L * L + 4.0 * a.head_size * (double)L * C);
    double best = 0;
    int bi = -1;
    for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
      if (cand[i][0] == CLPA_PREFILL_MMA && env.info.lanes != CLPA_LANES_NV_PTX) {
        printf("mma   rows %2d keys %2d: skipped (no mma instruction here: emulated, for tests)\n",
               cand[i][1], cand[i][2]);
        continue;
      }
      p.path = (clpa_prefill_path)cand[i][0], p.rows_per_group = cand[i][1];
      p.keys_per_tile = cand[i][2];
      double t = 0;
      if (clpa_prefill(env.ctx, &p) != CLPA_OK || clpa_context_finish(env.ctx) != CLPA_OK ||
          bench_time(&env, "prefill", (bench_fn)clpa_prefill, &p, &t)) {
        printf("%-5s rows %d keys %d: refused (%s)\n", path_name((clpa_prefill_path)cand[i][0]),
               cand[i][1], cand[i][2], clpa_context_last_error(env.ctx));
        continue;
      }
      char tt[32];
      printf("%-5s rows %2d keys %2d: %s, %.4f TFLOP/s\n",
             path_name((clpa_prefill_path)cand[i][0]), cand[i][1], cand[i][2],
             cli_time_text(tt, sizeof tt, t, 10), flops / t / 1e12);
      if (flops / t > best) best = flops / t, bi = (int)i;
    }
    if (bi < 0) FAIL("no candidate ran");
    printf("tuning table (lib/tuning.c): prefill_path %s, prefill_rows %d, prefill_keys %d"
           " (%.4f TFLOP/s on %s)\n", cand[bi][0] == CLPA_PREFILL_ROWS  ? "CLPA_PREFILL_ROWS"
                                       : cand[bi][0] == CLPA_PREFILL_MMA ? "CLPA_PREFILL_MMA"
                                                                         : "CLPA_PREFILL_TILES",
           cand[bi][1], cand[bi][2], best / 1e12, env.info.name);
    rc = 0;
    goto done;
  }
  cli_progress("prefill: first call (a cold kernel cache builds the kernels now)...");
  clpa_status st = clpa_prefill(env.ctx, &p);
  if (st == CLPA_OK) st = clpa_context_finish(env.ctx);
  cli_progress_end();
  if (st == CLPA_ERR_INVALID_ARG || st == CLPA_ERR_UNSUPPORTED)
    REFUSE(clpa_context_last_error(env.ctx));
  if (st != CLPA_OK) FAIL("%s", clpa_context_last_error(env.ctx));
  double per_call = 0;
  if (bench_time(&env, "prefill", (bench_fn)clpa_prefill, &p, &per_call)) goto done;
  if (clpa_context_check_faults(env.ctx, NULL) != CLPA_OK)
    FAIL("%s", clpa_context_last_error(env.ctx));
  const double D = a.head_size;
  const double flops = (double)a.batch * a.heads * (2.0 * D * L * L + 4.0 * D * L * C);
  const double tflops = flops / per_call / 1e12;
  const double peak = bench_fma_tflops(&env);
  if (peak <= 0) FAIL("could not measure the FMA peak");
  /* what ran: the plan clpa_prefill made (path, rows a work-group and a warp) */
  clpa_plan *plan = NULL;
  clpa_plan_info info;
  if (clpa_plan_prefill(env.ctx, &p, &plan) != CLPA_OK || clpa_plan_describe(plan, &info) != CLPA_OK) {
    clpa_plan_release(plan);
    FAIL("%s", clpa_context_last_error(env.ctx));
  }
  clpa_plan_release(plan);
  const char *path = path_name((clpa_prefill_path)info.path);
  const int32_t used_rows = info.rows;
  if (a.json) {
    cli_json j;
    cli_json_begin(&j, stdout);
    cli_json_str(&j, "op", "prefill");
    cli_json_str(&j, "device", env.info.name);
    cli_json_str(&j, "lanes", clpa_lanes_name(env.info.lanes));
    cli_json_str(&j, "mode", "hot"); /* back-to-back calls, as decode's hot mode */
    cli_json_str(&j, "path", path);
    cli_json_int(&j, "rows", used_rows);
    cli_json_int(&j, "rows_per_warp", info.rows_per_warp);
    cli_json_int(&j, "keys", info.keys);
    cli_json_int(&j, "heads", a.heads);
    cli_json_int(&j, "kv_heads", a.kv_heads);
    cli_json_int(&j, "head_size", a.head_size);
    cli_json_int(&j, "block_size", a.block_size);
    cli_json_str(&j, "layout", clpa_kv_layout_kind_name(a.layout));
    cli_json_int(&j, "batch", a.batch);
    cli_json_int(&j, "new_tokens", L);
    cli_json_int(&j, "cached_tokens", C);
    cli_json_str(&j, "dtype", clpa_dtype_name(a.dtype));
    cli_json_str(&j, "q_dtype", clpa_dtype_name(a.q_dtype));
    cli_json_num(&j, "us_per_call", per_call * 1e6, 2);
    cli_json_num(&j, "tflops", tflops, 4);
    cli_json_num(&j, "fma_peak_tflops", peak, 4);
    cli_json_num(&j, "ratio", tflops / peak, 4);
    cli_json_str(&j, "shapes", bench_shapes_name(a.shapes));
    cli_json_end(&j);
  } else {
    printf("device      %s (%s lanes), %s path, %d rows a work-group", env.info.name,
           clpa_lanes_name(env.info.lanes), path, used_rows);
    if (info.rows_per_warp) printf(", %d a warp", info.rows_per_warp);
    if (info.keys) printf(", %d keys a tile", info.keys); /* 0: the rows path */
    printf("\n");
    printf("shape       batch %d x %d new tokens over %d cached, heads %d/%d, head size %d,"
           " block %d, %s cache, %s queries; %s defaults\n",
           a.batch, L, C, a.heads, a.kv_heads, a.head_size, a.block_size,
           clpa_dtype_name(a.dtype), clpa_dtype_name(a.q_dtype),
           a.shapes == BENCH_SHAPES_CPU ? "CPU" : "GPU");
    char tt[32];
    printf("time        %s per call (median of 7 batches)\n",
           cli_time_text(tt, sizeof tt, per_call, 0));
    printf("attention   %.3f TFLOP/s (%.1f GFLOP per call)\n", tflops, flops / 1e9);
    printf("fma peak    %.3f TFLOP/s (f32, same run)\n", peak);
    printf("ratio       %.3f of the FMA peak\n", tflops / peak);
  }
  rc = 0;
done:
  cli_progress_end();
  free(tables), free(cu), free(cached), free(q), free(qs);
  cl_mem all[] = {kc, vc, bq, bt, out};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    if (all[i]) clReleaseMemObject(all[i]);
  bench_close(&env);
  return rc;
}
