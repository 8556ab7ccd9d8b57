/*
 * clpa-bench decode — decode attention bandwidth: GB/s of K/V read, and
 * that as a ratio of the device's copy bandwidth measured in the same run
 * (the better of clEnqueueCopyBuffer and a float4 copy kernel, counting
 * bytes read plus bytes written).
 *
 * Method: random (finite) inputs, every sequence with its own shuffled
 * blocks and a length as --lengths says (uniform: all at the context); a
 * first call (it builds the kernels on a cold cache, and is where the
 * library refuses a shape); then, as bench_timing says:
 *   hot:  two warm-up calls, then 7 batches of n calls enqueued back to
 *         back and timed by the wall clock around clFinish; the median
 *         batch gives the time per call, launch overhead included, as an
 *         engine would see it;
 *   cold: a flush kernel reads 256 MiB before every call, and the call
 *         takes from the flush's end to the end of decode's last kernel
 *         (profiling events); the median of --repeats calls.
 * bench_decode_measure does one configuration; `decode` prints it and
 * `sweep` (bench_sweep.c) runs it over a grid.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "clpa.h"

#define MAX_DIM (1 << 24)

const char *bench_parse_dtype(const char *text, void *value) {
  return clpa_dtype_parse(text, value) == CLPA_OK ? NULL : "f32, f16, bf16, fp8_e4m3 or fp8_e5m2";
}

const char *bench_parse_layout(const char *text, void *value) {
  for (int k = CLPA_KV_LAYOUT_SPLIT_KEY; k <= CLPA_KV_LAYOUT_NHD; k++)
    if (strcmp(text, clpa_kv_layout_kind_name((clpa_kv_layout_kind)k)) == 0) {
      *(clpa_kv_layout_kind *)value = (clpa_kv_layout_kind)k;
      return NULL;
    }
  return "split_key, hnd or nhd";
}

static const char *const LENGTHS_NAMES[] = {"uniform", "loguniform", "one-long"};

const char *bench_lengths_name(bench_lengths l) { return LENGTHS_NAMES[l]; }

const char *bench_parse_lengths(const char *text, void *value) {
  for (int i = 0; i < 3; i++)
    if (strcmp(text, LENGTHS_NAMES[i]) == 0) {
      *(bench_lengths *)value = (bench_lengths)i;
      return NULL;
    }
  return "uniform, loguniform or one-long";
}

static const char *parse_variant(const char *text, void *value) {
  clpa_decode_variant *v = value;
  if (strcmp(text, "v1") == 0) *v = CLPA_DECODE_V1;
  else if (strcmp(text, "v2") == 0) *v = CLPA_DECODE_V2;
  else if (strcmp(text, "auto") == 0) *v = CLPA_DECODE_AUTO;
  else return "v1, v2 or auto";
  return NULL;
}

/* --work-list: CLPA_DECODE_WORK_LIST's word, set before the context is made */
static const char *parse_work_list(const char *text, void *value) {
  if (strcmp(text, "auto") != 0 && strcmp(text, "on") != 0 && strcmp(text, "off") != 0)
    return "auto, on or off";
  *(const char **)value = text;
  return NULL;
}

static const char *variant_name(clpa_decode_variant v) {
  return v == CLPA_DECODE_V1 ? "v1" : v == CLPA_DECODE_V2 ? "v2" : "auto";
}

static const char *const PATH_NAMES[] = {"auto", "lanes", "mma", "rows"};
const char *bench_path_name(clpa_decode_path p) {
  return (unsigned)p < sizeof PATH_NAMES / sizeof *PATH_NAMES ? PATH_NAMES[p] : "?";
}

const char *bench_parse_path(const char *text, void *value) {
  for (int i = 0; i < 4; i++)
    if (strcmp(text, PATH_NAMES[i]) == 0) {
      *(clpa_decode_path *)value = (clpa_decode_path)i;
      return NULL;
    }
  return "auto, lanes, mma or rows";
}

/* ----------------------------------------------------------------------
 * One configuration
 * -------------------------------------------------------------------- */
void bench_make_lengths(bench_lengths kind, int32_t context, int32_t short_len, int n,
                        int32_t *lens) {
  const int32_t lo = context < 16 ? context : 16;
  const int32_t others = short_len ? short_len : context / 64 > lo ? context / 64 : lo;
  for (int i = 0; i < n; i++) {
    if (kind == BENCH_LENGTHS_LOGUNIFORM) {
      double u = (double)(bench_rand() >> 11) / 9007199254740992.0; /* [0, 1) */
      lens[i] = (int32_t)floor(exp(log(lo) + u * (log(context + 1.0) - log(lo))));
      if (lens[i] > context) lens[i] = context;
    } else {
      lens[i] = kind == BENCH_LENGTHS_ONE_LONG && i > 0 ? others : context;
    }
  }
}

typedef struct decode_inputs {
  int32_t *lens, *tables;
  float *q;
  cl_mem kc, vc, bq, bt, bl, out;
} decode_inputs;

static void inputs_free(decode_inputs *in) {
  free(in->lens), free(in->tables), free(in->q);
  cl_mem all[] = {in->kc, in->vc, in->bq, in->bt, in->bl, in->out};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    if (all[i]) clReleaseMemObject(all[i]);
}

/* The paged-read probe (cl/smoke.cl's clpa_smoke_paged_read) over a
 * call's own caches, tables and lengths. */
typedef struct paged_arg {
  cl_kernel k;
  size_t global[3], local[3];
} paged_arg;

static clpa_status paged_once(clpa_context *ctx, const void *arg_, cl_event *event) {
  const paged_arg *a = arg_;
  cl_int err = clEnqueueNDRangeKernel(clpa_context_cl_queue(ctx), a->k, 3, NULL, a->global,
                                      a->local, 0, NULL, event);
  return err == CL_SUCCESS ? CLPA_OK : CLPA_ERR_OPENCL;
}

/* K/V bytes per second through the probe: on CPUs in partitions of the
 * decode's size (the whole context for v1), one work-item a work-group
 * (as the rows path) reading 64 bytes at a time; elsewhere 128
 * work-items a work-group reading 16 bytes each, consecutive, in
 * partitions of at most 512 tokens (the decode's where shorter), so that
 * the probe has the work-groups to fill the device whatever the decode's
 * plan (a v1 plan of 16 x 8 rows gave it 128;
 * docs/decisions/0028-bench-paged-read-probe.md). 0 where it does not
 * apply (tiles not whole 64-byte chunks) or failed. */
static double paged_read_gbps(bench_env *env, const bench_decode_shape *s, const decode_inputs *in,
                              int32_t bpseq, const bench_decode_figures *f,
                              const bench_timing *t) {
  const size_t tile = (size_t)s->block_size * s->head_size * clpa_dtype_size(s->dtype);
  if (tile % 64) return 0;
  const int32_t part = env->info.is_cpu                      ? f->partition
                       : f->partition > 0 && f->partition < 512 ? f->partition
                                                                : 512;
  const cl_int part_blocks = part >= s->block_size ? part / s->block_size : part > 0 ? 1 : bpseq;
  const cl_int nparts = (bpseq + part_blocks - 1) / part_blocks, bs = s->block_size;
  const size_t unit = env->info.is_cpu ? 64 : 16; /* bytes a work-item reads at once */
  const cl_ulong block_n = tile / unit * s->kv_heads;
  const cl_int tile_n = (cl_int)(tile / unit);
  const size_t wg = env->info.is_cpu ? 1 : 128;
  paged_arg a = {NULL, {wg * s->kv_heads, (size_t)s->batch, (size_t)nparts}, {wg, 1, 1}};
  cl_mem out = bench_buffer_quiet(env, NULL, sizeof(cl_uint));
  cl_program prog;
  cl_int err = CL_INVALID_VALUE;
  double secs = 0, gbps = 0;
  if (out && clpa_program_get(env->ctx, "smoke", "", &prog) == CLPA_OK)
    a.k = clCreateKernel(prog, unit == 64 ? "clpa_smoke_paged_read" : "clpa_smoke_paged_read4", &err);
  const void *vals[] = {&in->kc, &in->vc, &in->bt, &in->bl, &bpseq, &bs, &part_blocks, &block_n,
                        &tile_n, &out};
  const size_t sizes[] = {sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem),
                          sizeof(cl_int), sizeof(cl_int), sizeof(cl_int), sizeof(cl_ulong),
                          sizeof(cl_int), sizeof(cl_mem)};
  for (cl_uint i = 0; err == CL_SUCCESS && i < sizeof sizes / sizeof *sizes; i++)
    err = clSetKernelArg(a.k, i, sizes[i], vals[i]);
  if (err == CL_SUCCESS && bench_measure(env, "paged read", paged_once, &a, t, &secs) == 0)
    gbps = f->kv_bytes / secs / 1e9;
  if (a.k) clReleaseKernel(a.k);
  if (out) clReleaseMemObject(out);
  return gbps;
}

static clpa_status decode_once(clpa_context *ctx, const void *arg, cl_event *event) {
  clpa_decode_params p = *(const clpa_decode_params *)arg;
  p.event = event;
  return clpa_decode(ctx, &p);
}

/* --plan-run: a run of a plan made once, on the call's buffers. */
typedef struct plan_run {
  clpa_plan *plan;
  clpa_attn_inputs in;
} plan_run;

static clpa_status run_once(clpa_context *ctx, const void *arg, cl_event *event) {
  (void)ctx;
  const plan_run *r = arg;
  clpa_attn_inputs in = r->in;
  in.event = event;
  return clpa_run(r->plan, &in);
}

/* Host seconds per call of fn, enqueued back to back (the device's time
 * overlaps), the mean of 200 after 10 warm-up calls; -1 on failure. */
static double host_seconds(clpa_context *ctx, bench_event_fn fn, const void *arg) {
  double t0 = 0;
  for (int i = 0; i < 210; i++) {
    if (i == 10) t0 = bench_now();
    if (fn(ctx, arg, NULL) != CLPA_OK) return -1;
  }
  const double per = (bench_now() - t0) / 200;
  return clpa_context_finish(ctx) == CLPA_OK ? per : -1;
}

/* The plan's host cost (the mean of 20 after one) and one run's beside
 * one call's. */
static int host_costs(clpa_context *ctx, const clpa_decode_params *p, const plan_run *r,
                      bench_decode_figures *f) {
  clpa_plan *plan = NULL;
  double t0 = 0;
  for (int i = 0; i < 21; i++) {
    if (i == 1) t0 = bench_now();
    if (clpa_plan_decode(ctx, p, &plan) != CLPA_OK) return -1;
    clpa_plan_release(plan);
  }
  f->plan_host = (bench_now() - t0) / 20;
  f->run_host = host_seconds(ctx, run_once, r);
  f->call_host = host_seconds(ctx, decode_once, p);
  return f->run_host < 0 || f->call_host < 0 ? -1 : 0;
}

#define WHY(code, ...)                         \
  do {                                         \
    snprintf(why, why_size, __VA_ARGS__);      \
    rc = (code);                               \
    goto done;                                 \
  } while (0)

int bench_decode_measure(bench_env *env, const bench_decode_shape *s, const bench_timing *t,
                         bench_decode_figures *f, char *why, size_t why_size) {
  const size_t esz = clpa_dtype_size(s->dtype);
  const int32_t bpseq = (s->context + s->block_size - 1) / s->block_size;
  const size_t qn = (size_t)s->batch * s->heads * s->head_size;
  const size_t table_n = (size_t)bpseq * s->batch;
  decode_inputs in = {0};
  int rc = BENCH_FAILED;
  why[0] = '\0';
  memset(f, 0, sizeof *f);
  in.lens = malloc(sizeof(int32_t) * s->batch);
  in.tables = calloc(table_n, sizeof(int32_t));
  in.q = malloc(sizeof(float) * qn);
  if (!in.lens || !in.tables || !in.q) WHY(BENCH_TOO_BIG, "out of host memory");
  bench_make_lengths(s->lengths, s->context, s->short_len, s->batch, in.lens);
  /* Blocks for the tokens the lengths use, shuffled over the tables. */
  long long nblocks = 0;
  for (int i = 0; i < s->batch; i++) {
    nblocks += (in.lens[i] + s->block_size - 1) / s->block_size;
    f->tokens += in.lens[i];
  }
  if (nblocks > INT32_MAX)
    WHY(BENCH_REFUSED, "%lld blocks of %d tokens, more than %d", nblocks, (int)s->block_size,
        INT32_MAX);
  const size_t cache_elems = (size_t)nblocks * s->kv_heads * s->head_size * s->block_size;
  f->cache_bytes = cache_elems * esz;
  f->kv_bytes = 2.0 * (double)f->tokens * s->kv_heads * s->head_size * esz;
  clpa_decode_params p;
  clpa_decode_params_init(&p);
  if (clpa_kv_layout_init_kind(&p.kv, s->layout, s->dtype, (int32_t)nblocks, s->block_size,
                               s->kv_heads, s->head_size))
    WHY(BENCH_REFUSED, "%s", clpa_last_error());
  double held = 2.0 * (double)f->cache_bytes + (double)env->flush_bytes;
  if (f->cache_bytes > env->info.max_alloc_bytes || held > 0.9 * (double)env->info.global_mem_bytes)
    WHY(BENCH_TOO_BIG, "2 x %.0f MB of cache does not fit the device (%.0f MB, at most %.0f MB "
        "a buffer)", (double)f->cache_bytes / 1e6, (double)env->info.global_mem_bytes / 1e6,
        (double)env->info.max_alloc_bytes / 1e6);
  int32_t *order = malloc(sizeof(int32_t) * (size_t)(nblocks ? nblocks : 1));
  if (!order) WHY(BENCH_TOO_BIG, "out of host memory");
  for (int32_t i = 0; i < nblocks; i++) order[i] = i;
  for (int32_t i = (int32_t)nblocks - 1; i > 0; i--) {
    int32_t j = (int32_t)(bench_rand() % (uint64_t)(i + 1)), x = order[i];
    order[i] = order[j], order[j] = x;
  }
  for (int i = 0, next = 0; i < s->batch; i++)
    for (int b = 0; b < (in.lens[i] + s->block_size - 1) / s->block_size; b++)
      in.tables[(size_t)i * bpseq + b] = order[next++];
  free(order);
  for (size_t i = 0; i < qn; i++) in.q[i] = (float)((double)(bench_rand() % 2001) / 1000.0 - 1.0);

  cli_progress("decode: making random K/V caches (2 x %.0f MB)...", (double)f->cache_bytes / 1e6);
  in.kc = bench_random_cache(env, s->dtype, cache_elems);
  in.vc = in.kc ? bench_random_cache(env, s->dtype, cache_elems) : NULL;
  cli_progress_end();
  if (!in.kc || !in.vc)
    WHY(BENCH_TOO_BIG, "the device could not hold 2 x %.0f MB of cache",
        (double)f->cache_bytes / 1e6);
  in.bq = bench_buffer_quiet(env, in.q, sizeof(float) * qn);
  in.bt = bench_buffer_quiet(env, in.tables, sizeof(int32_t) * table_n);
  in.bl = bench_buffer_quiet(env, in.lens, sizeof(int32_t) * s->batch);
  in.out = bench_buffer_quiet(env, NULL, sizeof(float) * qn);
  if (!in.bq || !in.bt || !in.bl || !in.out) WHY(BENCH_TOO_BIG, "could not make the inputs");

  p.num_seqs = s->batch, p.num_heads = s->heads, p.max_blocks_per_seq = bpseq;
  p.max_context_len = s->context, p.q_dtype = CLPA_DTYPE_F32;
  p.scale = 1.0f / sqrtf((float)s->head_size), p.k_scale = p.v_scale = 0.01f;
  p.query = in.bq, p.key_cache = in.kc, p.value_cache = in.vc, p.block_tables = in.bt;
  p.context_lens = in.bl, p.out = in.out;
  if (!s->no_host_lengths) p.host_context_lens = in.lens; /* as an engine that knows them */
  p.variant = s->variant, p.partition_size = s->partition, p.heads_per_group = s->hpg;
  p.path = s->path;
  if (clpa_decode_choice(env->ctx, &p, &f->path, &f->variant, &f->partition, &f->hpg) != CLPA_OK)
    WHY(BENCH_REFUSED, "%s", clpa_context_last_error(env->ctx));

  /* The first call builds the kernels (from the binary cache when warm)
   * and is where the library refuses a shape. */
  cli_progress("decode: first call (a cold kernel cache builds the kernels now)...");
  clpa_status st = clpa_decode(env->ctx, &p);
  if (st == CLPA_OK) st = clpa_context_finish(env->ctx);
  cli_progress_end();
  if (st == CLPA_ERR_INVALID_ARG || st == CLPA_ERR_UNSUPPORTED)
    WHY(BENCH_REFUSED, "%s", clpa_context_last_error(env->ctx));
  if (st == CLPA_ERR_OUT_OF_MEMORY) WHY(BENCH_TOO_BIG, "%s", clpa_context_last_error(env->ctx));
  if (st != CLPA_OK) WHY(BENCH_FAILED, "%s", clpa_context_last_error(env->ctx));
  /* The plan the timed calls run (a one call makes the same, list included) */
  plan_run run = {NULL, {0}};
  clpa_plan_info info;
  if (clpa_plan_decode(env->ctx, &p, &run.plan) != CLPA_OK)
    WHY(BENCH_FAILED, "%s", clpa_context_last_error(env->ctx));
  clpa_plan_describe(run.plan, &info); /* a plan made: CLPA_OK */
  f->work_pairs = info.work_pairs, f->list_entries = info.list_entries;
  if (!s->plan_run) clpa_plan_release(run.plan), run.plan = NULL;
  if (s->plan_run) {
    clpa_attn_inputs_init(&run.in);
    run.in.key_cache = in.kc, run.in.value_cache = in.vc, run.in.query = in.bq;
    run.in.block_tables = in.bt, run.in.context_lens = in.bl, run.in.out = in.out;
    run.in.k_scale = p.k_scale, run.in.v_scale = p.v_scale;
    const int bad = bench_measure(env, "decode", run_once, &run, t, &f->per_call) ||
                    host_costs(env->ctx, &p, &run, f);
    clpa_plan_release(run.plan);
    if (bad) WHY(BENCH_FAILED, "%s", clpa_context_last_error(env->ctx));
  } else if (bench_measure(env, "decode", decode_once, &p, t, &f->per_call)) {
    goto done;
  }
  if (clpa_context_check_faults(env->ctx, NULL) != CLPA_OK)
    WHY(BENCH_FAILED, "%s", clpa_context_last_error(env->ctx));
  if (s->paged_probe) f->paged_gbps = paged_read_gbps(env, s, &in, bpseq, f, t);
  rc = BENCH_MEASURED;
done:
  cli_progress_end();
  inputs_free(&in);
  return rc;
}

/* ----------------------------------------------------------------------
 * clpa-bench decode
 * -------------------------------------------------------------------- */
typedef struct decode_args {
  bench_decode_shape s;
  int cold, hot, json, tune;
  int32_t repeats;
  const char *work_list; /* --work-list, or NULL */
} decode_args;

/* Returns CLI_RUN or the exit status. */
static int parse(int argc, char **argv, decode_args *a) {
  *a = (decode_args){{32, 8, 128, 16, 16, 4096, 0, 0, CLPA_DTYPE_F16, CLPA_DECODE_AUTO, CLPA_DECODE_PATH_AUTO,
                      BENCH_LENGTHS_UNIFORM, 1, 0, 0, 0, CLPA_KV_LAYOUT_SPLIT_KEY},
                     0, 0, 0, 0, 30, NULL};
  bench_decode_shape *s = &a->s;
  const cli_opt opts[] = {
      {"heads", CLI_INT, &s->heads, 1, MAX_DIM, "N", "query heads", NULL, NULL},
      {"kv-heads", CLI_INT, &s->kv_heads, 1, MAX_DIM, "N", "key/value heads, a divisor of --heads",
       NULL, NULL},
      {"head-size", CLI_INT, &s->head_size, 1, MAX_DIM, "N", "elements per head", NULL, NULL},
      {"block-size", CLI_INT, &s->block_size, 1, MAX_DIM, "N", "tokens per cache block", NULL,
       NULL},
      {"batch", CLI_INT, &s->batch, 1, MAX_DIM, "N", "sequences", NULL, NULL},
      {"context", CLI_INT, &s->context, 1, MAX_DIM, "N", "tokens per sequence (the longest)", NULL,
       NULL},
      {"lengths", CLI_WORD, &s->lengths, 0, 0, "KIND",
       "uniform (every sequence at --context),\nloguniform (log-uniform in [16, --context]) or "
       "one-long\n(sequence 0 at --context, the others at --context/64,\nat least 16)",
       "uniform", bench_parse_lengths},
      {"layout", CLI_WORD, &s->layout, 0, 0, "KIND", "the caches' layout: split_key, hnd or nhd",
       "split_key", bench_parse_layout},
      {"short", CLI_INT, &s->short_len, 0, MAX_DIM, "N",
       "one-long: the other sequences' length\n(0: --context/64, at least 16)", NULL, NULL},
      {"no-host-lengths", CLI_FLAG, &s->no_host_lengths, 0, 0, NULL,
       "plan from max_context_len alone, as an engine\nthat keeps its lengths on the device", NULL,
       NULL},
      {"plan-run", CLI_FLAG, &s->plan_run, 0, 0, NULL,
       "time clpa_run on a plan made once, and the\nhost's microseconds per plan, run and\n"
       "clpa_decode call", NULL, NULL},
      {"work-list", CLI_WORD, &a->work_list, 0, 0, "WORD",
       "plans from host lengths on the mma path run\ntheir busy partitions from a list: auto (the\n"
       "tuning table's rule), on or off\n(CLPA_DECODE_WORK_LIST)", "auto",
       parse_work_list},
      {"dtype", CLI_WORD, &s->dtype, 0, 0, "NAME",
       "cache dtype: f32, f16, bf16, fp8_e4m3 or\nfp8_e5m2; queries and output are f32", "f16",
       bench_parse_dtype},
      {"variant", CLI_WORD, &s->variant, 0, 0, "NAME",
       "v1 (one pass), v2 (partitioned) or auto (v1 when\nthe context fits one partition)", "auto",
       parse_variant},
      {"path", CLI_WORD, &s->path, 0, 0, "NAME",
       "lanes (f32 FMAs), mma (tensor cores; emulated\noff NVIDIA, slow), rows (CPUs) or auto",
       "auto",
       bench_parse_path},
      {"partition", CLI_INT, &s->partition, 0, MAX_DIM, "N",
       "v2 tokens per partition, a multiple of\n--block-size; 0 takes the tuning\ntable's (clpa-info --smoke prints it)", NULL, NULL},
      {"heads-per-group", CLI_INT, &s->hpg, 0, MAX_DIM, "N",
       "query heads per work-group, a divisor of\n--heads / --kv-heads; 0 picks one", NULL, NULL},
      {"cold", CLI_FLAG, &a->cold, 0, 0, NULL,
       "flush the L2 (read 256 MiB) before every timed\ncall; time it with profiling events",
       "on a GPU", NULL},
      {"hot", CLI_FLAG, &a->hot, 0, 0, NULL, "time back-to-back calls by the wall clock",
       "elsewhere", NULL},
      {"repeats", CLI_INT, &a->repeats, 1, 100000, "N", "cold: timed calls (the median is shown)",
       NULL, NULL},
      {"tune", CLI_FLAG, &a->tune, 0, 0, NULL,
       "time this shape at every v2 partition (128 to\n4096 tokens) and the other paths at the "
       "best;\nprint the tuning table's decode_partition",
       NULL, NULL},
      {"json", CLI_FLAG, &a->json, 0, 0, NULL, "print one JSON line instead of the table", NULL,
       NULL},
      {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
  };
  const cli_cmd cmd = {
      "clpa-bench decode",
      "Times paged decode attention on the selected device (CLPA_DEVICE, else the\n"
      "first GPU, else the first device; clpa-info lists them): time per call, K/V\n"
      "bytes read per call as GB/s, the device's copy bandwidth measured in the same\n"
      "run and the same mode (read + write, the better of clEnqueueCopyBuffer and a\n"
      "float4 copy kernel) and the ratio of the two; the f32 FMA peak measured in\n"
      "the same run and the roofline floor: the longer of K/V bytes at the copy\n"
      "bandwidth and 4 * head_size * tokens * heads FLOPs at the FMA peak.",
      opts,
      "Method: random finite inputs, every sequence with its own shuffled blocks; a\n"
      "first call (where a cold kernel cache builds the kernels), then\n"
      "  cold: before every call a kernel reads 256 MiB (half the largest buffer on\n"
      "        small devices), so nothing of the last call stays in the L2; a call\n"
      "        takes from that kernel's end to the end of decode's last kernel\n"
      "        (profiling events); the median of --repeats calls;\n"
      "  hot:  two warm-up calls, then 7 batches of back-to-back calls timed around\n"
      "        clFinish; the median batch, launch overhead included.\n"
      "K/V bytes count the tokens of the actual lengths.\n"
      "JSON keys: op, device, lanes, mode, repeats, heads, kv_heads, head_size,\n"
      "block_size, layout, batch, context, lengths, tokens, dtype, variant,\n"
      "partition, heads_per_group, us_per_call, kv_bytes, gbps, copy_gbps, ratio,\n"
      "flops, fma_peak_tflops, floor_us, bound (memory or compute), roofline_ratio,\n"
      "paged_read_gbps, paged_ratio (where a block's tile is whole 64-byte chunks),\n"
      "host_lengths, work_pairs (the busy partitions the calls take from a list,\n"
      "0: none), list_entries (without host lengths, the entries of the list the device\n"
      "makes, 0: none); with --plan-run plan_host_us, run_host_us, call_host_us.",
      clpa_version_string(),
  };
  int rc = cli_parse(&cmd, argc, argv);
  if (rc != CLI_RUN) return rc;
  if (a->cold && a->hot) return cli_error(&cmd, "--cold and --hot exclude each other");
  /* the block tables have room for --context tokens a sequence */
  if (s->lengths == BENCH_LENGTHS_ONE_LONG && s->short_len > s->context)
    return cli_error(&cmd, "--short %d is longer than --context %d (the longest sequence)",
                     (int)s->short_len, (int)s->context);
  if (a->work_list && setenv("CLPA_DECODE_WORK_LIST", a->work_list, 1) != 0)
    return cli_error(&cmd, "setenv(CLPA_DECODE_WORK_LIST) failed");
  long long blocks = (long long)(s->context + s->block_size - 1) / s->block_size * s->batch;
  if (blocks > INT32_MAX)
    return cli_error(&cmd, "--batch %d at --context %d needs %lld blocks of %d tokens, more than %d",
                     (int)s->batch, (int)s->context, blocks, (int)s->block_size, INT32_MAX);
  return CLI_RUN;
}

/* The roofline of one call: the K/V bytes at the copy bandwidth or the
 * products (Q.K^T and P.V: 4 * D FLOPs per token and query head) at the
 * f32 FMA peak, whichever takes longer; both measured in the same run. */
typedef struct roofline {
  double flops, peak_tflops, floor_s;
  int compute_bound;
} roofline;

static roofline roofline_of(const decode_args *a, const bench_decode_figures *f, double copy,
                            double peak) {
  roofline r;
  r.flops = 4.0 * a->s.head_size * (double)f->tokens * a->s.heads;
  r.peak_tflops = peak;
  const double mem = f->kv_bytes / (copy * 1e9), math = r.flops / (peak * 1e12);
  r.compute_bound = math > mem;
  r.floor_s = r.compute_bound ? math : mem;
  return r;
}

static void print_json(const decode_args *a, const bench_env *env, const bench_timing *t,
                       const bench_decode_figures *f, double gbps, double copy,
                       const roofline *r) {
  const bench_decode_shape *s = &a->s;
  cli_json j;
  cli_json_begin(&j, stdout);
  cli_json_str(&j, "op", "decode");
  cli_json_str(&j, "device", env->info.name);
  cli_json_str(&j, "lanes", clpa_lanes_name(env->info.lanes));
  cli_json_str(&j, "mode", bench_mode_name(t));
  cli_json_int(&j, "repeats", t->cold ? t->repeats : 7);
  cli_json_int(&j, "heads", s->heads);
  cli_json_int(&j, "kv_heads", s->kv_heads);
  cli_json_int(&j, "head_size", s->head_size);
  cli_json_int(&j, "block_size", s->block_size);
  cli_json_str(&j, "layout", clpa_kv_layout_kind_name(s->layout));
  cli_json_int(&j, "batch", s->batch);
  cli_json_int(&j, "context", s->context);
  cli_json_str(&j, "lengths", bench_lengths_name(s->lengths));
  cli_json_int(&j, "tokens", f->tokens);
  cli_json_str(&j, "dtype", clpa_dtype_name(s->dtype));
  cli_json_str(&j, "variant", variant_name(s->variant));
  cli_json_int(&j, "partition", s->partition);
  cli_json_int(&j, "heads_per_group", s->hpg);
  cli_json_str(&j, "path", bench_path_name(f->path));
  cli_json_str(&j, "used_variant", variant_name(f->variant));
  cli_json_int(&j, "used_partition", f->partition);
  cli_json_int(&j, "used_heads_per_group", f->hpg);
  cli_json_num(&j, "us_per_call", f->per_call * 1e6, 2);
  cli_json_num(&j, "kv_bytes", f->kv_bytes, 0);
  cli_json_num(&j, "gbps", gbps, 3);
  cli_json_num(&j, "copy_gbps", copy, 3);
  cli_json_num(&j, "ratio", gbps / copy, 4);
  cli_json_num(&j, "flops", r->flops, 0);
  cli_json_num(&j, "fma_peak_tflops", r->peak_tflops, 4);
  cli_json_num(&j, "floor_us", r->floor_s * 1e6, 3);
  cli_json_str(&j, "bound", r->compute_bound ? "compute" : "memory");
  cli_json_num(&j, "roofline_ratio", r->floor_s / f->per_call, 4);
  if (f->paged_gbps > 0) {
    cli_json_num(&j, "paged_read_gbps", f->paged_gbps, 3);
    cli_json_num(&j, "paged_ratio", gbps / f->paged_gbps, 4);
  }
  cli_json_int(&j, "host_lengths", !s->no_host_lengths);
  if (s->plan_run) {
    cli_json_num(&j, "plan_host_us", f->plan_host * 1e6, 2);
    cli_json_num(&j, "run_host_us", f->run_host * 1e6, 2);
    cli_json_num(&j, "call_host_us", f->call_host * 1e6, 2);
  }
  cli_json_num(&j, "work_pairs", (double)f->work_pairs, 0);
  cli_json_num(&j, "list_entries", (double)f->list_entries, 0);
  cli_json_end(&j);
}

static void print_table(const decode_args *a, const bench_env *env, const bench_timing *t,
                        const bench_decode_figures *f, double gbps, double copy,
                        const roofline *r) {
  const bench_decode_shape *s = &a->s;
  printf("device      %s (%s lanes)\n", env->info.name, clpa_lanes_name(env->info.lanes));
  printf("shape       batch %d, context %d, heads %d/%d, head size %d, block %d, %s cache\n",
         s->batch, s->context, s->heads, s->kv_heads, s->head_size, s->block_size,
         clpa_dtype_name(s->dtype));
  printf("lengths     %s: %lld tokens in all\n", bench_lengths_name(s->lengths), f->tokens);
  printf("kernel      %s path, %s, partition %d, %d heads per work-group\n", bench_path_name(f->path),
         variant_name(f->variant), f->partition, f->hpg);
  if (t->cold)
    printf("mode        cold: L2 flushed (%.0f MiB read) before each call, event-timed\n",
           (double)env->flush_bytes / 1048576.0);
  else
    printf("mode        hot: back-to-back calls, wall clock\n");
  char t1[32], t2[32], t3[32];
  if (t->cold)
    printf("time        %s per call (median of %d calls)\n",
           cli_time_text(t1, sizeof t1, f->per_call, 0), t->repeats);
  else
    printf("time        %s per call (median of 7 batches)\n",
           cli_time_text(t1, sizeof t1, f->per_call, 0));
  printf("K/V read    %.1f MB per call -> %.2f GB/s\n", f->kv_bytes / 1e6, gbps);
  printf("copy        %.2f GB/s (read + write, same run, %s)\n", copy, bench_mode_name(t));
  printf("ratio       %.3f of copy bandwidth\n", gbps / copy);
  printf("fma peak    %.3f TFLOP/s (f32, same run); %.2f GFLOP per call\n", r->peak_tflops,
         r->flops / 1e9);
  printf("roofline    floor %s (%s-bound); %.3f of it\n",
         cli_time_text(t1, sizeof t1, r->floor_s, 0), r->compute_bound ? "compute" : "memory",
         r->floor_s / f->per_call);
  if (f->paged_gbps > 0)
    printf("paged read  %.2f GB/s (the same blocks read, nothing computed); %.3f of it\n",
           f->paged_gbps, gbps / f->paged_gbps);
  if (f->work_pairs > 0 || f->list_entries > 0)
    printf("work list   %lld partitions listed by the host, %d entries by the device\n",
           (long long)f->work_pairs, f->list_entries);
  if (s->plan_run)
    printf("host        %s a plan, %s a run, %s a clpa_decode call (enqueue); %lld"
           " partitions listed\n",
           cli_time_text(t1, sizeof t1, f->plan_host, 0),
           cli_time_text(t2, sizeof t2, f->run_host, 0),
           cli_time_text(t3, sizeof t3, f->call_host, 0), (long long)f->work_pairs);
}

/* One --tune candidate: measures s and prints its line ("refused" with the
 * library's reason, the path named as asked); fills f, returns whether it
 * ran. */
static int tune_point(bench_env *env, const bench_decode_shape *s, const bench_timing *t,
                      bench_decode_figures *f) {
  char why[2048];
  if (bench_decode_measure(env, s, t, f, why, sizeof why) != BENCH_MEASURED) {
    printf("partition %4d, %-5s path: refused (%s)\n", (int)s->partition, bench_path_name(s->path),
           why);
    return 0;
  }
  char tt[32];
  printf("partition %4d, %-5s path: %s, %.2f GB/s\n", (int)s->partition, bench_path_name(f->path),
         cli_time_text(tt, sizeof tt, f->per_call, 10), f->kv_bytes / f->per_call / 1e9);
  return 1;
}

/* --tune: the shape at every v2 partition of 128 .. 4096 tokens up to
 * the context (the one partition past it too), on the heuristic's path,
 * then every other path this device runs natively at the best partition;
 * prints each time and the tuning table's decode_partition. */
static int tune(bench_env *env, const decode_args *a, const bench_timing *t) {
  static const int32_t parts[] = {128, 256, 512, 1024, 2048, 4096};
  bench_decode_shape s = a->s;
  s.paged_probe = 0, s.variant = CLPA_DECODE_V2;
  bench_decode_figures f;
  double best = 0;
  int32_t best_part = 0;
  clpa_decode_path best_path = CLPA_DECODE_PATH_AUTO;
  for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
    if (parts[i] % s.block_size || (i > 0 && parts[i - 1] >= s.context)) continue;
    s.partition = parts[i];
    if (tune_point(env, &s, t, &f) && (best == 0 || f.per_call < best))
      best = f.per_call, best_part = parts[i], best_path = f.path;
  }
  if (best == 0) {
    fprintf(stderr, "clpa-bench decode: no partition ran\n");
    return 1;
  }
  s.partition = best_part;
  for (int p = CLPA_DECODE_PATH_LANES; p <= CLPA_DECODE_PATH_ROWS; p++) {
    if ((clpa_decode_path)p == best_path) continue;
    if (p == CLPA_DECODE_PATH_MMA && env->info.lanes != CLPA_LANES_NV_PTX) {
      printf("partition %4d, mma   path: skipped (no mma instruction here: emulated, for tests)\n",
             (int)best_part);
      continue;
    }
    s.path = (clpa_decode_path)p;
    tune_point(env, &s, t, &f);
  }
  char tt[32];
  printf("tuning table (lib/tuning.c): decode_partition %d (%s path, %s on %s, %s)\n",
         (int)best_part, bench_path_name(best_path), cli_time_text(tt, sizeof tt, best, 0),
         env->info.name, bench_mode_name(t));
  return 0;
}

int bench_decode(int argc, char **argv) {
  decode_args a;
  int parsed = parse(argc, argv, &a);
  if (parsed != CLI_RUN) return parsed;
  bench_env env;
  if (bench_open(&env)) return 1;
  bench_timing t;
  bench_timing_pick(&env, a.cold, a.hot, a.repeats, &t);
  if (a.tune) {
    const int rc = tune(&env, &a, &t);
    bench_close(&env);
    return rc;
  }
  bench_decode_figures f;
  char why[2048];
  int rc = bench_decode_measure(&env, &a.s, &t, &f, why, sizeof why);
  if (rc == BENCH_REFUSED) {
    fprintf(stderr,
            "clpa-bench decode: the library refuses this shape: %s\n"
            "Try 'clpa-bench decode --help' for the options.\n",
            why);
    rc = 2;
  } else if (rc != BENCH_MEASURED) {
    if (why[0]) fprintf(stderr, "clpa-bench decode: %s\n", why);
    rc = 1;
  } else {
    double gbps = f.kv_bytes / f.per_call / 1e9;
    double copy = bench_copy_gbps(&env, f.cache_bytes, &t);
    double peak = copy > 0 ? bench_fma_tflops(&env) : 0;
    if (copy <= 0 || peak <= 0) {
      fprintf(stderr, "clpa-bench decode: could not measure the %s\n",
              copy <= 0 ? "copy bandwidth" : "FMA peak");
      rc = 1;
    } else {
      const roofline r = roofline_of(&a, &f, copy, peak);
      if (a.json)
        print_json(&a, &env, &t, &f, gbps, copy, &r);
      else
        print_table(&a, &env, &t, &f, gbps, copy, &r);
    }
  }
  bench_close(&env);
  return rc;
}
