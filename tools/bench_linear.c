/*
 * bench_linear.c — clpa-bench linear: clpa-demo's linear layers
 * (tools/demo/linear.h) on the model's weight shapes: time per call, the
 * weight bytes read as GB/s over the copy bandwidth measured in the same
 * run, and FLOP/s over the f32 FMA peak, per engine and row count; then a
 * decode step's layers summed (every layer's projections and the LM head).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "demo/error.h"
#include "demo/linear.h"

#define MAX_ROWS_LIST 16

typedef struct rows_list {
  int32_t n, v[MAX_ROWS_LIST];
} rows_list;

typedef struct linear_args {
  const char *model;
  const char *dtype; /* a demo_wfmt's name */
  rows_list rows;
  const char *engine;
  int32_t lanes, groups, nc, mwarps, fill, ct, gemm_bm, gemm_bk, gemm_f16a, gemv_warps, gemv_unroll,
      gemv_ct, gemv_nt, gemm_fill, gemm_dq_rows, stream_sums;
  int json, cold, hot;
  int32_t repeats;
} linear_args;

static const char *parse_rows(const char *text, void *value) {
  rows_list *r = value;
  r->n = 0;
  for (const char *p = text; *p;) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 1 || v > 65536 || r->n == MAX_ROWS_LIST) return "up to 16 counts in 1..65536, comma-separated";
    r->v[r->n++] = (int32_t)v;
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return "up to 16 counts in 1..65536, comma-separated";
  }
  return r->n ? NULL : "up to 16 counts in 1..65536, comma-separated";
}

static const char *parse_word(const char *text, void *value) {
  *(const char **)value = text;
  return NULL;
}

/* A model's linear layers: the weight [n, k] and how many a decode step runs. */
typedef struct lin_shape {
  const char *what;
  int32_t n, k, per_step;
} lin_shape;

static int model_shapes(const char *model, lin_shape *s) {
  /* hidden, ffn, heads, kv_heads, head_size, vocab, layers (tools/demo/model.c's presets) */
  int32_t H, F, qh, kvh, hd, V, L;
  if (strcmp(model, "llama-1b") == 0)
    H = 2048, F = 8192, qh = 32, kvh = 8, hd = 64, V = 128256, L = 16;
  else if (strcmp(model, "tiny") == 0)
    H = 128, F = 256, qh = 4, kvh = 2, hd = 32, V = 512, L = 4;
  else
    return 0;
  s[0] = (lin_shape){"qkv", (qh + 2 * kvh) * hd, H, L};
  s[1] = (lin_shape){"o", H, qh * hd, L};
  s[2] = (lin_shape){"gate_up", 2 * F, H, L};
  s[3] = (lin_shape){"down", H, F, L};
  s[4] = (lin_shape){"lm_head", V, H, 1};
  return 5;
}

typedef struct call {
  demo_linear *l;
  demo_linear_engine engine;
  demo_wfmt form;
  cl_mem A, W, C;
  int32_t rows, n, k;
  int half; /* A is f16 (demo_linear_run_f16) */
} call;

static clpa_status one_call(clpa_context *ctx, const void *arg, cl_event *event) {
  (void)ctx;
  const call *c = arg;
  return (c->half ? demo_linear_run_f16 : demo_linear_run)(
      c->l, c->engine, c->form, c->A, c->W, c->C, c->rows, c->n, c->k, 0, event);
}

/* demo_linear_dequantize_f16 of a shape's weight (the tiled GEMM's copy from gemm_dq_rows) */
typedef struct copy_call {
  demo_linear *l;
  demo_wfmt form;
  cl_mem W, out;
  int32_t n, k;
} copy_call;

static clpa_status one_copy(clpa_context *ctx, const void *arg, cl_event *event) {
  (void)ctx;
  const copy_call *c = arg;
  return demo_linear_dequantize_f16(c->l, c->form, c->W, c->out, c->n, c->k, event);
}

/* Block forms: the time of a shape's f16 copy (us, timed as its calls are), else 0; < 0 where it
 * failed. */
static double copy_us(bench_env *env, demo_linear *l, demo_wfmt form, cl_mem W,
                      const lin_shape *s, const bench_timing *t) {
  if (!demo_wfmt_is_block(form)) return 0;
  cl_mem out = bench_buffer(env, NULL, (size_t)s->n * (size_t)s->k * 2);
  if (!out) return -1;
  copy_call c = {l, form, W, out, s->n, s->k};
  double per = 0;
  const int bad = bench_measure(env, "f16 copy", one_copy, &c, t, &per);
  clReleaseMemObject(out);
  return bad ? -1 : per * 1e6;
}

/* NVIDIA: the tensor cores' f16 TFLOP/s (demo_linear_mma_peak), else 0. */
static double mma_peak(bench_env *env, demo_linear *l) {
  /* whole warps (mma.sync is a warp's): work-groups of 256 */
  bench_kernel_arg p = {NULL, (size_t)(env->info.compute_units ? env->info.compute_units : 1) * 8 * 256,
                        256};
  const cl_int iters = 4096;
  double t = 0, tflops = 0;
  cl_mem out = NULL;
  if (demo_linear_mma_peak_kernel(l, &p.k) != CLPA_OK) return 0;
  out = bench_buffer(env, NULL, sizeof(float) * p.global);
  if (out && clSetKernelArg(p.k, 0, sizeof out, &out) == CL_SUCCESS &&
      clSetKernelArg(p.k, 1, sizeof iters, &iters) == CL_SUCCESS &&
      bench_time(env, "mma peak", bench_kernel_once, &p, &t) == 0 && t > 0)
    tflops = (double)p.global / 32 * iters * 8 * 4096 / t / 1e12;
  clReleaseKernel(p.k);
  if (out) clReleaseMemObject(out);
  return tflops;
}

int bench_linear(int argc, char **argv) {
  linear_args a = {"llama-1b", "f16", {5, {1, 4, 16, 64, 256}}, "all", 0, 0, 0, 0, -1, 0,
                   0, 0, -1, 0, 0, 0, 0, -1, -1, -1, 0, 0, 0, 30};
  const cli_opt opts[] = {
      {"model", CLI_WORD, &a.model, 0, 0, "NAME", "the weight shapes: llama-1b or tiny", "llama-1b",
       parse_word},
      {"dtype", CLI_WORD, &a.dtype, 0, 0, "NAME",
       "weight form: f32, f16, bf16, f16_tiled, bf16_tiled,\nor ggml's q8_0, q4_0, q4_K, q5_K, q6_K (random\n"
       "blocks)", "f16", parse_word},
      {"rows", CLI_WORD, &a.rows, 0, 0, "LIST", "rows of A (tokens of a step), comma-separated",
       "1,4,16,64,256", parse_rows},
      {"engine", CLI_WORD, &a.engine, 0, 0, "NAME",
       "stream, mma, gemm, gemv (NVIDIA), clblast, auto\n(the table's) or all", "all", parse_word},
      {"lanes", CLI_INT, &a.lanes, 0, 64, "N", "the streaming kernel's shape, forced (0: the table's)",
       NULL, NULL},
      {"groups", CLI_INT, &a.groups, 0, 1024, "N", "column groups a work-group (with --lanes)", NULL, NULL},
      {"nc", CLI_INT, &a.nc, 0, 16, "N", "columns a column group (with --lanes)", NULL, NULL},
      {"mwarps", CLI_INT, &a.mwarps, 1, 16, "N", "the tensor-core kernel's warps, forced", NULL, NULL},
      {"fill", CLI_INT, &a.fill, 0, 64, "N",
       "its split of k aims at N warps a compute unit, forced\n(0: no split)", NULL, NULL},
      {"ct", CLI_INT, &a.ct, 1, 4, "N", "its tiles of 16 columns a warp, forced", NULL, NULL},
      {"gemm-bm", CLI_INT, &a.gemm_bm, 64, 128, "N", "the tiled GEMM's rows a work-group (64 or 128), forced",
       NULL, NULL},
      {"gemm-bk", CLI_INT, &a.gemm_bk, 32, 64, "N", "its k a stage (32 or 64), forced", NULL, NULL},
      {"gemm-fill", CLI_INT, &a.gemm_fill, -1, 16, "N",
       "its split of k aims at N work-groups a compute unit,\nforced (0: no split)", NULL, NULL},
      {"stream-sums", CLI_INT, &a.stream_sums, -1, 1024, "N",
       "the streaming kernel with one lane: most float8 sums a\nwork-item keeps, forced (0: no"
       " limit)", NULL, NULL},
      {"gemm-dq-rows", CLI_INT, &a.gemm_dq_rows, -1, 65536, "N",
       "ggml's blocks: the tiled GEMM through an f16 copy of the\nweight from N rows, forced (0:"
       " never)", NULL, NULL},
      {"gemm-f16a", CLI_INT, &a.gemm_f16a, 0, 1, "N",
       "1: f16 weights take f16 activations by cp.async, 0: f32\nones, forced (-1: the table's)", NULL, NULL},
      {"gemv-warps", CLI_INT, &a.gemv_warps, 1, 16, "N", "gemv's warps a work-group, forced", NULL, NULL},
      {"gemv-ct", CLI_INT, &a.gemv_ct, 1, 4, "N", "gemv's most tiles of 16 columns a work-group, forced",
       NULL, NULL},
      {"gemv-unroll", CLI_INT, &a.gemv_unroll, 1, 8, "N", "its chunks of 32 k in flight a warp, forced",
       NULL, NULL},
      {"gemv-nt", CLI_INT, &a.gemv_nt, 4, 8, "N",
       "its most row tiles of 8 a work-group (4 or 8), forced", NULL, NULL},
      {"cold", CLI_FLAG, &a.cold, 0, 0, NULL, "flush the L2 before every timed call (default on a GPU)",
       NULL, NULL},
      {"hot", CLI_FLAG, &a.hot, 0, 0, NULL, "back-to-back calls (default elsewhere)", NULL, NULL},
      {"repeats", CLI_INT, &a.repeats, 1, 1000, "N", "cold: timed calls (the median)", NULL, NULL},
      {"json", CLI_FLAG, &a.json, 0, 0, NULL, "one JSON line a measurement", NULL, NULL},
      {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
  };
  const cli_cmd cmd = {
      "clpa-bench linear",
      "Times clpa-demo's linear layers, C [rows, n] = A [rows, k] . W^T with W in its\n"
      "stored dtype, on a model's weight shapes: GB/s of weights read over the copy\n"
      "bandwidth, and TFLOP/s over the f32 FMA peak, both measured in the same run;\n"
      "then a decode step of `rows` sequences: every layer's projections and the LM\n"
      "head, summed.",
      opts,
      "JSON keys: op, device, mode (cold or hot), engine, shape, dtype, rows, n, k,\n"
      "us_per_call, weight_bytes, gbps, copy_gbps, ratio, tflops, fma_peak_tflops,\n"
      "mma_peak_tflops (NVIDIA: f16 mma.sync back to back, same run), launch_us (a\n"
      "one-work-group kernel back to back with itself: a dependent launch's least\n"
      "cost), read_us\n"
      "(one read of the shape's weight bytes by a plain read kernel, timed the same\n"
      "way: the call's floor), read_ratio (read_us over us_per_call), f16_copy_us\n"
      "(ggml's blocks: the weight's f16 copy that the tiled GEMM multiplies from\n"
      "gemm_dq_rows, timed the same way), lanes, groups, nc and row_block (the\n"
      "streaming kernel's for the call), mwarps, fill, ct, ksplit (the tensor-core\n"
      "kernel's or the tiled GEMM's splits of k), gemm_bm, gemm_bk (the tiled GEMM's\n"
      "tile), gemm_fill, gemm_f16a (1: f16 activations), gemm_dq_rows,\n"
      "gemv_warps, gemv_ct (its shape for the call), gemv_unroll and gemv_nt;\n"
      "the step's lines have shape \"step\", the summed time and bytes, read_floor_us\n"
      "(the calls' reads summed), read_ratio and f16_copy_us (summed).",
      clpa_version_string(),
  };
  int rc = cli_parse(&cmd, argc, argv);
  if (rc != CLI_RUN) return rc;
  if (a.cold && a.hot) return cli_error(&cmd, "--cold and --hot exclude each other");
  lin_shape shapes[5];
  const int ns = model_shapes(a.model, shapes);
  if (!ns) return cli_error(&cmd, "--model %s (llama-1b or tiny)", a.model);
  const demo_wfmt form = demo_wfmt_of_name(a.dtype);
  if (form == DEMO_W_COUNT)
    return cli_error(&cmd, "--dtype %s (f32, f16, bf16, f16_tiled, bf16_tiled, q8_0, q4_0, q4_K,"
                     " q5_K or q6_K)", a.dtype);
  for (int i = 0; i < ns; i++)
    if (!demo_wfmt_row_bytes(form, shapes[i].k))
      return cli_error(&cmd, "--dtype %s: %s's rows of %d are not whole blocks (--model llama-1b)",
                       a.dtype, shapes[i].what, (int)shapes[i].k);
  demo_linear_engine engines[5];
  int ne = 0, all = strcmp(a.engine, "all") == 0;
  if (all)
    engines[ne++] = DEMO_LINEAR_STREAM, engines[ne++] = DEMO_LINEAR_CLBLAST; /* + mma on NVIDIA, below */
  else if (strcmp(a.engine, "stream") == 0)
    engines[ne++] = DEMO_LINEAR_STREAM;
  else if (strcmp(a.engine, "mma") == 0)
    engines[ne++] = DEMO_LINEAR_MMA;
  else if (strcmp(a.engine, "gemm") == 0)
    engines[ne++] = DEMO_LINEAR_GEMM;
  else if (strcmp(a.engine, "gemv") == 0)
    engines[ne++] = DEMO_LINEAR_GEMV;
  else if (strcmp(a.engine, "clblast") == 0)
    engines[ne++] = DEMO_LINEAR_CLBLAST;
  else if (strcmp(a.engine, "auto") == 0)
    engines[ne++] = DEMO_LINEAR_AUTO;
  else
    return cli_error(&cmd, "--engine %s (stream, mma, gemm, gemv, clblast, auto or all)", a.engine);

  bench_env env;
  if (bench_open(&env)) return 1;
  bench_timing t;
  bench_timing_pick(&env, a.cold, a.hot, a.repeats, &t);
  cl_context cl = clpa_context_cl_context(env.ctx);
  if (all && strstr(env.info.vendor, "NVIDIA"))
    engines[ne++] = DEMO_LINEAR_MMA, engines[ne++] = DEMO_LINEAR_GEMM, engines[ne++] = DEMO_LINEAR_GEMV;
  /* the table's entry, with what the options force */
  demo_linear *l = NULL;
  demo_linear_tuning forced = {"forced", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 1, 0, 4, 2, 1, 0, 4, 0, 0, 0};
  const int force = a.lanes || a.mwarps || a.fill >= 0 || a.ct || a.gemm_bm || a.gemm_bk ||
                    a.gemm_f16a >= 0 || a.gemv_warps || a.gemv_unroll || a.gemv_ct || a.gemv_nt ||
                    a.gemm_fill >= 0 || a.gemm_dq_rows >= 0 || a.stream_sums >= 0;
  if (demo_linear_create(cl, clpa_context_cl_device(env.ctx), clpa_context_cl_queue(env.ctx), NULL,
                         &l) == CLPA_OK && force) {
    forced = *demo_linear_tuning_of(l);
    forced.match = "forced";
    forced.stream_max_rows = forced.mma_max_rows = 1 << 30;
    if (a.lanes) forced.lanes = a.lanes, forced.groups = a.groups, forced.nc = a.nc;
    if (a.mwarps) forced.mwarps = a.mwarps;
    if (a.fill >= 0) forced.mma_fill = a.fill;
    if (a.ct) forced.mma_ct = a.ct;
    if (a.gemm_bm) forced.gemm_bm = a.gemm_bm;
    if (a.gemm_bk) forced.gemm_bk = a.gemm_bk;
    if (a.gemm_f16a >= 0) forced.gemm_f16a = a.gemm_f16a;
    if (a.gemv_warps) forced.gemv_warps = a.gemv_warps;
    if (a.gemv_unroll) forced.gemv_unroll = a.gemv_unroll;
    if (a.gemv_ct) forced.gemv_ct = a.gemv_ct;
    if (a.gemv_nt) forced.gemv_nt = a.gemv_nt;
    if (a.gemm_fill >= 0) forced.gemm_fill = a.gemm_fill;
    if (a.gemm_dq_rows >= 0) forced.gemm_dq_rows = a.gemm_dq_rows;
    if (a.stream_sums >= 0) forced.stream_sums = a.stream_sums;
    demo_linear_destroy(l);
    l = NULL;
    demo_linear_create(cl, clpa_context_cl_device(env.ctx), clpa_context_cl_queue(env.ctx), &forced,
                       &l);
  }
  if (!l) {
    fprintf(stderr, "clpa-bench linear: %s\n", demo_last_error());
    bench_close(&env);
    return 1;
  }
  const demo_linear_tuning *tu = demo_linear_tuning_of(l);
  int32_t max_rows = 0, max_n = 0, max_k = 0;
  for (int i = 0; i < a.rows.n; i++) max_rows = a.rows.v[i] > max_rows ? a.rows.v[i] : max_rows;
  for (int i = 0; i < ns; i++) {
    max_n = shapes[i].n > max_n ? shapes[i].n : max_n;
    max_k = shapes[i].k > max_k ? shapes[i].k : max_k;
  }
  cl_mem A = bench_random_cache(&env, CLPA_DTYPE_F32, (size_t)max_rows * max_k);
  cl_mem Ah = bench_random_cache(&env, CLPA_DTYPE_F16, (size_t)max_rows * max_k); /* demo_linear_run_f16's */
  cl_mem C = bench_buffer(&env, NULL, sizeof(float) * (size_t)max_rows * max_n);
  cli_progress("linear: measuring the copy bandwidth and the FMA peak...");
  const double copy = bench_copy_gbps(&env, (size_t)256 << 20, &t), peak = bench_fma_tflops(&env);
  const double mpeak = l ? mma_peak(&env, l) : 0, launch = bench_launch_us(&env);
  cli_progress_end();
  rc = A && Ah && C && copy > 0 ? 0 : 1;
  if (!a.json && rc == 0) {
    printf("copy %.1f GB/s, f32 FMA peak %.3f TFLOP/s", copy, peak);
    if (mpeak > 0) printf(", f16 mma peak %.1f TFLOP/s", mpeak);
    printf(", %.1f us a small kernel back to back", launch);
    printf(" (this run)\n");
  }
  double read_us[5] = {0, 0, 0, 0, 0}; /* a shape's read floor, measured at its first call */
  double f16_copy[5] = {-1, -1, -1, -1, -1}; /* block forms: its f16 copy's time, likewise */
  for (int e = 0; e < ne && rc == 0; e++)
    for (int r = 0; r < a.rows.n && rc == 0; r++) {
      double step_s = 0, step_bytes = 0, step_read = 0, step_copy = 0;
      for (int i = 0; i < ns && rc == 0; i++) {
        const lin_shape *s = &shapes[i];
        /* random bits: the block forms' scales may be anything, which times the same */
        const size_t wbytes = demo_wfmt_bytes(form, s->n, s->k);
        cl_mem W = wbytes ? bench_random_cache(&env, CLPA_DTYPE_F16, (wbytes + 1) / 2) : NULL;
        if (!W) {
          rc = 1;
          break;
        }
        const int half = demo_linear_takes_f16(l, engines[e], a.rows.v[r], s->k, form);
        call c = {l, engines[e], form, half ? Ah : A, W, C, a.rows.v[r], s->n, s->k, half};
        const demo_linear_engine used =
            engines[e] == DEMO_LINEAR_AUTO ? demo_linear_pick(l, c.rows, c.k, form) : engines[e];
        double per_call = 0;
        char what[96];
        snprintf(what, sizeof what, "linear %s %s rows %d", demo_linear_engine_name(used), s->what,
                 (int)c.rows);
        if (bench_measure(&env, what, one_call, &c, &t, &per_call)) {
          fprintf(stderr, "clpa-bench linear: %s\n", demo_last_error());
          rc = 1;
        }
        if (rc == 0 && read_us[i] <= 0 && (read_us[i] = bench_read_us(&env, W, wbytes, &t)) <= 0) {
          fprintf(stderr, "clpa-bench linear: timing the read of %s's weights failed\n", s->what);
          rc = 1;
        }
        if (rc == 0 && f16_copy[i] < 0 && (f16_copy[i] = copy_us(&env, l, form, W, s, &t)) < 0) {
          fprintf(stderr, "clpa-bench linear: timing the f16 copy of %s's weights failed: %s\n",
                  s->what, demo_last_error());
          rc = 1;
        }
        clReleaseMemObject(W);
        if (rc) break;
        const double bytes = (double)wbytes;
        const double gbps = bytes / per_call / 1e9;
        const double tflops = 2.0 * c.rows * (double)s->n * s->k / per_call / 1e12;
        step_s += per_call * s->per_step, step_bytes += bytes * s->per_step;
        step_read += read_us[i] * s->per_step;
        step_copy += f16_copy[i] * s->per_step;
        if (a.json) {
          cli_json j;
          cli_json_begin(&j, stdout);
          cli_json_str(&j, "op", "linear");
          cli_json_str(&j, "device", env.info.name);
          cli_json_str(&j, "mode", bench_mode_name(&t));
          cli_json_str(&j, "engine", demo_linear_engine_name(used));
          cli_json_str(&j, "shape", s->what);
          cli_json_str(&j, "dtype", demo_wfmt_name(form));
          cli_json_int(&j, "rows", c.rows);
          cli_json_int(&j, "n", s->n);
          cli_json_int(&j, "k", s->k);
          cli_json_num(&j, "us_per_call", per_call * 1e6, 2);
          cli_json_num(&j, "weight_bytes", bytes, 0);
          cli_json_num(&j, "gbps", gbps, 1);
          cli_json_num(&j, "copy_gbps", copy, 1);
          cli_json_num(&j, "ratio", gbps / copy, 4);
          cli_json_num(&j, "tflops", tflops, 3);
          cli_json_num(&j, "fma_peak_tflops", peak, 3);
          if (mpeak > 0) cli_json_num(&j, "mma_peak_tflops", mpeak, 1);
          cli_json_num(&j, "launch_us", launch, 2);
          cli_json_num(&j, "read_us", read_us[i], 2);
          cli_json_num(&j, "read_ratio", read_us[i] / (per_call * 1e6), 4);
          if (demo_wfmt_is_block(form)) cli_json_num(&j, "f16_copy_us", f16_copy[i], 2);
          cli_json_int(&j, "lanes", tu->lanes);
          cli_json_int(&j, "groups", tu->groups);
          int32_t block = 0, nc = tu->nc;
          if (used == DEMO_LINEAR_STREAM) demo_linear_stream_shape(tu, form, c.rows, &block, &nc);
          cli_json_int(&j, "nc", nc);
          if (block) cli_json_int(&j, "row_block", block);
          cli_json_int(&j, "mwarps", tu->mwarps);
          cli_json_int(&j, "fill", tu->mma_fill);
          cli_json_int(&j, "ct", tu->mma_ct);
          if (used == DEMO_LINEAR_GEMM) {
            cli_json_int(&j, "gemm_bm", demo_linear_gemm_rows(l, c.rows, s->n));
            cli_json_int(&j, "gemm_bk", demo_linear_gemm_stage_k(l, s->k, half));
            cli_json_int(&j, "gemm_f16a", half);
            cli_json_int(&j, "gemm_fill", tu->gemm_fill);
            cli_json_int(&j, "gemm_dq_rows", tu->gemm_dq_rows);
          }
          if (used == DEMO_LINEAR_GEMV) {
            int32_t ct, kw;
            demo_linear_gemv_shape(l, c.rows, s->n, &ct, &kw);
            cli_json_int(&j, "gemv_warps", kw);
            cli_json_int(&j, "gemv_ct", ct);
            cli_json_int(&j, "gemv_unroll", tu->gemv_unroll);
            cli_json_int(&j, "gemv_nt", tu->gemv_nt);
            cli_json_int(&j, "f16_activations", half);
          }
          cli_json_int(&j, "ksplit", used == DEMO_LINEAR_MMA    ? demo_linear_mma_split(l, c.rows, s->n, s->k)
                                     : used == DEMO_LINEAR_GEMM ? demo_linear_gemm_split(l, c.rows, s->n, s->k, half)
                                                                : 1);
          cli_json_end(&j);
        } else {
          char t[32];
          printf("%-8s %-8s rows %5d  %6d x %5d  %s  %8.1f GB/s (%.3f of copy, %.3f of a read)"
                 "  %7.3f TFLOP/s\n",
                 demo_linear_engine_name(used), s->what, (int)c.rows, (int)s->n, (int)s->k,
                 cli_time_text(t, sizeof t, per_call, 10), gbps, gbps / copy,
                 read_us[i] / (per_call * 1e6), tflops);
        }
      }
      if (rc) break;
      const double gbps = step_bytes / step_s / 1e9;
      if (a.json) {
        cli_json j;
        cli_json_begin(&j, stdout);
        cli_json_str(&j, "op", "linear");
        cli_json_str(&j, "device", env.info.name);
        cli_json_str(&j, "mode", bench_mode_name(&t));
        cli_json_str(&j, "engine", demo_linear_engine_name(engines[e]));
        cli_json_str(&j, "shape", "step");
        cli_json_str(&j, "model", a.model);
        cli_json_str(&j, "dtype", demo_wfmt_name(form));
        cli_json_int(&j, "rows", a.rows.v[r]);
        cli_json_num(&j, "us_per_call", step_s * 1e6, 1);
        cli_json_num(&j, "weight_bytes", step_bytes, 0);
        cli_json_num(&j, "gbps", gbps, 1);
        cli_json_num(&j, "copy_gbps", copy, 1);
        cli_json_num(&j, "ratio", gbps / copy, 4);
        cli_json_num(&j, "read_floor_us", step_read, 1);
        cli_json_num(&j, "read_ratio", step_read / (step_s * 1e6), 4);
        if (demo_wfmt_is_block(form)) cli_json_num(&j, "f16_copy_us", step_copy, 1);
        cli_json_end(&j);
      } else {
        char t1[32], t2[32], t3[32];
        printf("%-8s step     rows %5d  %s's layers: %s, %.3f of copy (floor %s; its calls' reads"
               " %s)\n",
               demo_linear_engine_name(engines[e]), (int)a.rows.v[r], a.model,
               cli_time_text(t1, sizeof t1, step_s, 0), gbps / copy,
               cli_time_text(t2, sizeof t2, step_bytes / (copy * 1e9), 0),
               cli_time_text(t3, sizeof t3, step_read * 1e-6, 0));
      }
    }
  if (A) clReleaseMemObject(A);
  if (Ah) clReleaseMemObject(Ah);
  if (C) clReleaseMemObject(C);
  demo_linear_destroy(l);
  bench_close(&env);
  return rc;
}
