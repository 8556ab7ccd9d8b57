/*
 * clpa-bench decode — decode attention bandwidth: GB/s of K/V read, and
 * that as a ratio of the device's copy bandwidth measured in the same run
 * (the better of clEnqueueCopyBuffer and a float4 copy kernel, counting
 * bytes read plus bytes written).
 *
 * Method: random (finite) inputs, every sequence at the full context with
 * its own shuffled blocks; two warm-up calls; then 7 batches of n calls
 * enqueued back to back and timed by the wall clock around clFinish; the
 * median batch gives the time per call. Launch overhead is included, as an
 * engine would see it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "clpa.h"

typedef struct decode_args {
  int heads, kv_heads, head_size, block_size, batch, context, partition, hpg;
  clpa_dtype dtype;
  clpa_decode_variant variant;
  int json;
} decode_args;

static int parse(int argc, char **argv, decode_args *a) {
  *a = (decode_args){32, 8, 128, 16, 16, 4096, 0, 0, CLPA_DTYPE_F16, CLPA_DECODE_AUTO, 0};
  for (int i = 2; i < argc; i++) {
    const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int *target = NULL;
    if (strcmp(k, "--json") == 0) { a->json = 1; continue; }
    if (!v) return bench_usage("missing value for %s", k);
    i++;
    if (strcmp(k, "--heads") == 0) target = &a->heads;
    else if (strcmp(k, "--kv-heads") == 0) target = &a->kv_heads;
    else if (strcmp(k, "--head-size") == 0) target = &a->head_size;
    else if (strcmp(k, "--block-size") == 0) target = &a->block_size;
    else if (strcmp(k, "--batch") == 0) target = &a->batch;
    else if (strcmp(k, "--context") == 0) target = &a->context;
    else if (strcmp(k, "--partition") == 0) target = &a->partition;
    else if (strcmp(k, "--heads-per-group") == 0) target = &a->hpg;
    else if (strcmp(k, "--dtype") == 0) {
      if (clpa_dtype_parse(v, &a->dtype) != CLPA_OK) return bench_usage("%s", clpa_last_error());
      continue;
    } else if (strcmp(k, "--variant") == 0) {
      if (strcmp(v, "v1") == 0) a->variant = CLPA_DECODE_V1;
      else if (strcmp(v, "v2") == 0) a->variant = CLPA_DECODE_V2;
      else if (strcmp(v, "auto") == 0) a->variant = CLPA_DECODE_AUTO;
      else return bench_usage("--variant takes v1, v2 or auto, not '%s'", v);
      continue;
    } else {
      return bench_usage("unknown option %s", k);
    }
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < 0 || n > (1L << 24)) return bench_usage("%s takes a number, not '%s'", k, v);
    *target = (int)n;
  }
  if (a->batch <= 0 || a->context <= 0) return bench_usage("--batch and --context must be > 0");
  return 0;
}

int bench_decode(int argc, char **argv) {
  decode_args a;
  if (parse(argc, argv, &a)) return 2;
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
  if (!tables || !lens || !q) goto done;
  for (int i = 0; i < nblocks; i++) tables[i] = i;
  for (int i = nblocks - 1; i > 0; i--) {
    int j = (int)(bench_rand() % (uint64_t)(i + 1)), t = tables[i];
    tables[i] = tables[j], tables[j] = t;
  }
  for (int s = 0; s < a.batch; s++) lens[s] = a.context;
  for (size_t i = 0; i < qn; i++) q[i] = (float)((double)(bench_rand() % 2001) / 1000.0 - 1.0);
  kc = bench_random_cache(&env, a.dtype, cache_elems);
  vc = bench_random_cache(&env, a.dtype, cache_elems);
  bq = bench_buffer(&env, q, sizeof(float) * qn);
  bt = bench_buffer(&env, tables, sizeof(int32_t) * nblocks);
  bl = bench_buffer(&env, lens, sizeof(int32_t) * a.batch);
  out = bench_buffer(&env, NULL, sizeof(float) * qn);
  if (!kc || !vc || !bq || !bt || !bl || !out) goto done;

  clpa_decode_params p;
  clpa_decode_params_init(&p);
  if (clpa_kv_layout_init(&p.kv, a.dtype, nblocks, a.block_size, a.kv_heads, a.head_size)) {
    fprintf(stderr, "clpa-bench: %s\n", clpa_last_error());
    goto done;
  }
  p.num_seqs = a.batch, p.num_heads = a.heads, p.max_blocks_per_seq = bpseq;
  p.max_context_len = a.context, p.q_dtype = CLPA_DTYPE_F32;
  p.scale = 1.0f / sqrtf((float)a.head_size), p.k_scale = p.v_scale = 0.01f;
  p.query = bq, p.key_cache = kc, p.value_cache = vc, p.block_tables = bt, p.context_lens = bl;
  p.out = out, p.variant = a.variant, p.partition_size = a.partition, p.heads_per_group = a.hpg;

  double per_call = 0;
  if (bench_time(&env, (bench_fn)clpa_decode, &p, &per_call)) goto done;
  if (clpa_context_check_faults(env.ctx, NULL) != CLPA_OK) {
    fprintf(stderr, "clpa-bench: %s\n", clpa_context_last_error(env.ctx));
    goto done;
  }
  double kv_bytes = 2.0 * a.batch * (double)a.context * a.kv_heads * a.head_size * esz;
  double gbps = kv_bytes / per_call / 1e9;
  double copy = bench_copy_gbps(&env, cache_elems * esz);
  if (copy <= 0) goto done;
  if (a.json) {
    printf("{\"op\":\"decode\",\"device\":\"%s\",\"lanes\":\"%s\",\"heads\":%d,\"kv_heads\":%d,"
           "\"head_size\":%d,\"block_size\":%d,\"batch\":%d,\"context\":%d,\"dtype\":\"%s\","
           "\"variant\":\"%s\",\"us_per_call\":%.2f,\"kv_bytes\":%.0f,\"gbps\":%.3f,"
           "\"copy_gbps\":%.3f,\"ratio\":%.4f}\n",
           env.info.name, clpa_lanes_name(env.info.lanes), a.heads, a.kv_heads, a.head_size,
           a.block_size, a.batch, a.context, clpa_dtype_name(a.dtype),
           a.variant == CLPA_DECODE_V1 ? "v1" : a.variant == CLPA_DECODE_V2 ? "v2" : "auto",
           per_call * 1e6, kv_bytes, gbps, copy, gbps / copy);
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
  if (rc) fprintf(stderr, "clpa-bench decode: %s\n", clpa_last_error());
  free(tables), free(lens), free(q);
  cl_mem all[] = {kc, vc, bq, bt, bl, out};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    if (all[i]) clReleaseMemObject(all[i]);
  bench_close(&env);
  return rc;
}
