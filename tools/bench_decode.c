/*
 * clpa-bench decode — decode attention bandwidth: GB/s of K/V read, and
 * that as a ratio of the device's copy bandwidth measured in the same run
 * (the better of clEnqueueCopyBuffer and a float4 copy kernel, counting
 * bytes read plus bytes written).
 *
 * Method: random (finite) inputs, every sequence at the full context with
 * its own shuffled blocks; a first call (it builds the kernels on a cold
 * cache, and is where the library refuses a shape) and two warm-up calls;
 * then 7 batches of n calls enqueued back to back and timed by the wall
 * clock around clFinish; the median batch gives the time per call. Launch
 * overhead is included, as an engine would see it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "clpa.h"

typedef struct decode_args {
  int32_t heads, kv_heads, head_size, block_size, batch, context, partition, hpg;
  clpa_dtype dtype;
  clpa_decode_variant variant;
  int json;
} decode_args;

#define MAX_DIM (1 << 24)

static const char *parse_dtype(const char *text, void *value) {
  return clpa_dtype_parse(text, value) == CLPA_OK ? NULL : "f32, f16, bf16, fp8_e4m3 or fp8_e5m2";
}

static const char *parse_variant(const char *text, void *value) {
  clpa_decode_variant *v = value;
  if (strcmp(text, "v1") == 0) *v = CLPA_DECODE_V1;
  else if (strcmp(text, "v2") == 0) *v = CLPA_DECODE_V2;
  else if (strcmp(text, "auto") == 0) *v = CLPA_DECODE_AUTO;
  else return "v1, v2 or auto";
  return NULL;
}

static const char *variant_name(clpa_decode_variant v) {
  return v == CLPA_DECODE_V1 ? "v1" : v == CLPA_DECODE_V2 ? "v2" : "auto";
}

/* Returns CLI_RUN or the exit status. */
static int parse(int argc, char **argv, decode_args *a) {
  *a = (decode_args){32, 8, 128, 16, 16, 4096, 0, 0, CLPA_DTYPE_F16, CLPA_DECODE_AUTO, 0};
  const cli_opt opts[] = {
      {"heads", CLI_INT, &a->heads, 1, MAX_DIM, "N", "query heads", NULL, NULL},
      {"kv-heads", CLI_INT, &a->kv_heads, 1, MAX_DIM, "N", "key/value heads, a divisor of --heads",
       NULL, NULL},
      {"head-size", CLI_INT, &a->head_size, 1, MAX_DIM, "N", "elements per head", NULL, NULL},
      {"block-size", CLI_INT, &a->block_size, 1, MAX_DIM, "N", "tokens per cache block", NULL,
       NULL},
      {"batch", CLI_INT, &a->batch, 1, MAX_DIM, "N", "sequences, each at the full context", NULL,
       NULL},
      {"context", CLI_INT, &a->context, 1, MAX_DIM, "N", "tokens per sequence", NULL, NULL},
      {"dtype", CLI_WORD, &a->dtype, 0, 0, "NAME",
       "cache dtype: f32, f16, bf16, fp8_e4m3 or\nfp8_e5m2; queries and output are f32", "f16",
       parse_dtype},
      {"variant", CLI_WORD, &a->variant, 0, 0, "NAME",
       "v1 (one pass), v2 (partitioned) or auto (v1 when\nthe context fits one partition)", "auto",
       parse_variant},
      {"partition", CLI_INT, &a->partition, 0, MAX_DIM, "N",
       "v2 tokens per partition, a multiple of\n--block-size; 0 means 512", NULL, NULL},
      {"heads-per-group", CLI_INT, &a->hpg, 0, MAX_DIM, "N",
       "query heads per work-group, a divisor of\n--heads / --kv-heads; 0 picks one", NULL, NULL},
      {"json", CLI_FLAG, &a->json, 0, 0, NULL, "print one JSON line instead of the table", NULL,
       NULL},
      {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
  };
  const cli_cmd cmd = {
      "clpa-bench decode",
      "Times paged decode attention on the selected device (CLPA_DEVICE, else the\n"
      "first GPU, else the first device; clpa-info lists them): time per call, K/V\n"
      "bytes read per call as GB/s, the device's copy bandwidth measured in the same\n"
      "run (read + write, the better of clEnqueueCopyBuffer and a float4 copy kernel)\n"
      "and the ratio of the two.",
      opts,
      "Method: random finite inputs, every sequence at the full context with its own\n"
      "shuffled blocks; a first call (where a cold kernel cache builds the kernels)\n"
      "and two warm-up calls, then 7 batches of back-to-back calls timed around\n"
      "clFinish; the median batch gives the time per call, launch overhead included.\n"
      "JSON keys: op, device, lanes, heads, kv_heads, head_size, block_size, batch,\n"
      "context, dtype, variant, partition, heads_per_group, us_per_call, kv_bytes,\n"
      "gbps, copy_gbps, ratio.",
  };
  int rc = cli_parse(&cmd, argc, argv);
  if (rc != CLI_RUN) return rc;
  long long blocks = (long long)(a->context + a->block_size - 1) / a->block_size * a->batch;
  if (blocks > INT32_MAX)
    return cli_error(&cmd, "--batch %d at --context %d needs %lld blocks of %d tokens, more than %d",
                     (int)a->batch, (int)a->context, blocks, (int)a->block_size, INT32_MAX);
  return CLI_RUN;
}

static void print_json(const decode_args *a, const bench_env *env, double per_call,
                       double kv_bytes, double gbps, double copy) {
  cli_json j;
  cli_json_begin(&j, stdout);
  cli_json_str(&j, "op", "decode");
  cli_json_str(&j, "device", env->info.name);
  cli_json_str(&j, "lanes", clpa_lanes_name(env->info.lanes));
  cli_json_int(&j, "heads", a->heads);
  cli_json_int(&j, "kv_heads", a->kv_heads);
  cli_json_int(&j, "head_size", a->head_size);
  cli_json_int(&j, "block_size", a->block_size);
  cli_json_int(&j, "batch", a->batch);
  cli_json_int(&j, "context", a->context);
  cli_json_str(&j, "dtype", clpa_dtype_name(a->dtype));
  cli_json_str(&j, "variant", variant_name(a->variant));
  cli_json_int(&j, "partition", a->partition);
  cli_json_int(&j, "heads_per_group", a->hpg);
  cli_json_num(&j, "us_per_call", per_call * 1e6, 2);
  cli_json_num(&j, "kv_bytes", kv_bytes, 0);
  cli_json_num(&j, "gbps", gbps, 3);
  cli_json_num(&j, "copy_gbps", copy, 3);
  cli_json_num(&j, "ratio", gbps / copy, 4);
  cli_json_end(&j);
}

/* Says why (after a progress line, if any) and leaves through done. */
#define FAIL(...)                                 \
  do {                                            \
    cli_progress_end();                           \
    fprintf(stderr, "clpa-bench decode: ");       \
    fprintf(stderr, __VA_ARGS__);                 \
    fputc('\n', stderr);                          \
    goto done;                                    \
  } while (0)
/* The library refused the shape the options gave: a usage error. */
#define REFUSE(why)                                                                    \
  do {                                                                                 \
    rc = 2;                                                                            \
    FAIL("the library refuses this shape: %s\nTry 'clpa-bench decode --help' for the " \
         "options.",                                                                   \
         why);                                                                         \
  } while (0)

int bench_decode(int argc, char **argv) {
  decode_args a;
  int parsed = parse(argc, argv, &a);
  if (parsed != CLI_RUN) return parsed;
  bench_env env;
  if (bench_open(&env)) return 1;
  const size_t esz = clpa_dtype_size(a.dtype);
  const int bpseq = (a.context + a.block_size - 1) / a.block_size;
  const int nblocks = bpseq * a.batch;
  const size_t cache_elems = (size_t)nblocks * a.kv_heads * a.head_size * a.block_size;
  const size_t qn = (size_t)a.batch * a.heads * a.head_size;
  int rc = 1;
  int32_t *tables = malloc(sizeof(int32_t) * nblocks), *lens = malloc(sizeof(int32_t) * a.batch);
  float *q = malloc(sizeof(float) * qn);
  cl_mem kc = NULL, vc = NULL, bq = NULL, bt = NULL, bl = NULL, out = NULL;
  if (!tables || !lens || !q) FAIL("out of host memory");
  for (int i = 0; i < nblocks; i++) tables[i] = i;
  for (int i = nblocks - 1; i > 0; i--) {
    int j = (int)(bench_rand() % (uint64_t)(i + 1)), t = tables[i];
    tables[i] = tables[j], tables[j] = t;
  }
  for (int s = 0; s < a.batch; s++) lens[s] = a.context;
  for (size_t i = 0; i < qn; i++) q[i] = (float)((double)(bench_rand() % 2001) / 1000.0 - 1.0);
  cli_progress("decode: making random K/V caches (2 x %.0f MB)...",
               (double)(cache_elems * esz) / 1e6);
  kc = bench_random_cache(&env, a.dtype, cache_elems);
  vc = bench_random_cache(&env, a.dtype, cache_elems);
  cli_progress_end();
  bq = bench_buffer(&env, q, sizeof(float) * qn);
  bt = bench_buffer(&env, tables, sizeof(int32_t) * nblocks);
  bl = bench_buffer(&env, lens, sizeof(int32_t) * a.batch);
  out = bench_buffer(&env, NULL, sizeof(float) * qn);
  if (!kc || !vc || !bq || !bt || !bl || !out)
    FAIL("could not make the inputs (2 x %.0f MB of cache)", (double)(cache_elems * esz) / 1e6);

  clpa_decode_params p;
  clpa_decode_params_init(&p);
  if (clpa_kv_layout_init(&p.kv, a.dtype, nblocks, a.block_size, a.kv_heads, a.head_size))
    REFUSE(clpa_last_error());
  p.num_seqs = a.batch, p.num_heads = a.heads, p.max_blocks_per_seq = bpseq;
  p.max_context_len = a.context, p.q_dtype = CLPA_DTYPE_F32;
  p.scale = 1.0f / sqrtf((float)a.head_size), p.k_scale = p.v_scale = 0.01f;
  p.query = bq, p.key_cache = kc, p.value_cache = vc, p.block_tables = bt, p.context_lens = bl;
  p.out = out, p.variant = a.variant, p.partition_size = a.partition, p.heads_per_group = a.hpg;

  /* The first call builds the kernels (from the binary cache when warm)
   * and is where the library refuses a shape: that is a usage error. */
  cli_progress("decode: first call (a cold kernel cache builds the kernels now)...");
  clpa_status st = clpa_decode(env.ctx, &p);
  if (st == CLPA_OK) st = clpa_context_finish(env.ctx);
  cli_progress_end();
  if (st == CLPA_ERR_INVALID_ARG || st == CLPA_ERR_UNSUPPORTED)
    REFUSE(clpa_context_last_error(env.ctx));
  if (st != CLPA_OK) FAIL("%s", clpa_context_last_error(env.ctx));
  double per_call = 0;
  if (bench_time(&env, "decode", (bench_fn)clpa_decode, &p, &per_call)) goto done;
  if (clpa_context_check_faults(env.ctx, NULL) != CLPA_OK)
    FAIL("%s", clpa_context_last_error(env.ctx));
  double kv_bytes = 2.0 * a.batch * (double)a.context * a.kv_heads * a.head_size * esz;
  double gbps = kv_bytes / per_call / 1e9;
  double copy = bench_copy_gbps(&env, cache_elems * esz);
  if (copy <= 0) FAIL("could not measure the copy bandwidth");
  if (a.json) {
    print_json(&a, &env, per_call, kv_bytes, gbps, copy);
  } else {
    printf("device      %s (%s lanes)\n", env.info.name, clpa_lanes_name(env.info.lanes));
    printf("shape       batch %d, context %d, heads %d/%d, head size %d, block %d, %s cache\n",
           a.batch, a.context, a.heads, a.kv_heads, a.head_size, a.block_size,
           clpa_dtype_name(a.dtype));
    printf("time        %.1f us per call (median of 7 batches)\n", per_call * 1e6);
    printf("K/V read    %.1f MB per call -> %.2f GB/s\n", kv_bytes / 1e6, gbps);
    printf("copy        %.2f GB/s (read + write, same run)\n", copy);
    printf("ratio       %.3f of copy bandwidth\n", gbps / copy);
  }
  rc = 0;
done:
  cli_progress_end();
  free(tables), free(lens), free(q);
  cl_mem all[] = {kc, vc, bq, bt, bl, out};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    if (all[i]) clReleaseMemObject(all[i]);
  bench_close(&env);
  return rc;
}
