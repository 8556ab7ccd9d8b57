/*
 * clpa-bench xattn — XAttention on one long prompt: the time of the
 * estimation (clpa_xattn_estimate), the density of the mask it selects,
 * and the speed-up of block-sparse prefill over dense clpa_prefill with
 * the estimation included: dense / (estimate + sparse).
 *
 * Inputs, from a seeded recipe (bench_rand, fixed seed), one sequence of L
 * tokens, every query and key head alike but for the noise:
 *   structured  attention concentrated as real models' is:
 *               - near the diagonal: dims 0..15 carry 8 rotary pairs,
 *                 q_i = A (cos w_f i, sin w_f i), k_j = A (cos w_f j,
 *                 sin w_f j), w_f = 2 pi / (64 * 2^f), A = 3.8, so the
 *                 score holds A^2 sum_f cos(w_f (i - j)), largest at i = j;
 *               - on the first tokens: dim 16 is 3 in every query and 12
 *                 in keys 0..3 (attention sinks);
 *               - on a few scattered positions: dim 17 is 2 in every query
 *                 and 12 in 16 keys drawn at random;
 *               - the other dims uniform noise in [-0.5, 0.5].
 *   random      every element uniform in [-1, 1]: nearly uniform
 *               attention, the worst case for sparsity.
 * Values are uniform random. Caches f16, queries f16, causal, no prefix.
 *
 * Timing as clpa-bench prefill: after a first call, two warm-ups, the
 * median of 7 batches of back-to-back calls around clFinish, for each of
 * dense prefill, the estimation and sparse prefill (with the mask the
 * estimation wrote). Density: kept / causal (query block, key block) pairs
 * over every head, from the mask read back.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "clpa.h"
#ifdef CLPA_BENCH_CLBLAST
#include <clblast_c.h>
#endif

#define MAX_LENGTHS 8

typedef struct xattn_args {
  int32_t heads, kv_heads, head_size, block_size, stride, block, chunk;
  double tau;
  int32_t lengths[MAX_LENGTHS];
  int n_lengths;
  int input; /* 0 both, 1 structured, 2 random */
  int json, gemm;
  int path; /* clpa_xattn_path */
  bench_shapes shapes; /* the defaults taken: gpu or cpu (auto until parse picks) */
} xattn_args;

/* The shape sets: a GPU's heads 32/8 at 8k, 32k and 64k tokens; a CPU's
 * heads 8/2 at 1k, 2k and 4k (15 s with both inputs on PoCL, 2 cores;
 * the GPU's 64k alone would take hours there). */
static const int32_t gpu_tokens[] = {8192, 32768, 65536}, cpu_tokens[] = {1024, 2048, 4096};
#define GPU_HEADS 32
#define GPU_KV_HEADS 8
#define CPU_HEADS 8
#define CPU_KV_HEADS 2

static const char *parse_lengths_list(const char *text, void *value) {
  xattn_args *a = value;
  a->n_lengths = 0;
  const char *p = text;
  while (*p) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 64 || v > (1 << 22) || a->n_lengths == MAX_LENGTHS)
      return "a list of up to 8 token counts, 64 to 4194304, separated by commas";
    a->lengths[a->n_lengths++] = (int32_t)v;
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return "a list of token counts separated by commas";
  }
  return a->n_lengths ? NULL : "at least one token count";
}

/* *value = the index of text among the three names, or the message. */
static const char *parse_of3(const char *text, void *value, const char *const names[3],
                             const char *message) {
  for (int i = 0; i < 3; i++)
    if (strcmp(text, names[i]) == 0) {
      *(int *)value = i;
      return NULL;
    }
  return message;
}

static const char *parse_input(const char *text, void *value) {
  static const char *const names[] = {"both", "structured", "random"};
  return parse_of3(text, value, names, "structured, random or both");
}

static const char *parse_path(const char *text, void *value) {
  static const char *const names[] = {"auto", "f32", "mma"};
  return parse_of3(text, value, names, "auto, f32 or mma");
}

static const char *parse_tau(const char *text, void *value) {
  char *end;
  const double t = strtod(text, &end);
  if (end == text || *end || !(t > 0 && t <= 1)) return "a number in (0, 1]";
  *(double *)value = t;
  return NULL;
}

static int parse(int argc, char **argv, xattn_args *a) {
  /* heads, kv_heads and the lengths 0: not given, the shape set's */
  *a = (xattn_args){0, 0, 128, 16, 8, 128, 0, 0.9, {0}, 0, 0, 0, 0, 0, BENCH_SHAPES_AUTO};
  const cli_opt opts[] = {
      {"heads", CLI_INT, &a->heads, 1, 256, "N", "query heads", "32; CPU 8", NULL},
      {"kv-heads", CLI_INT, &a->kv_heads, 1, 256, "N", "key/value heads, a divisor of --heads",
       "8; CPU 2", NULL},
      {"head-size", CLI_INT, &a->head_size, 1, 512, "N", "elements per head", NULL, NULL},
      {"block-size", CLI_INT, &a->block_size, 1, 1024, "N", "tokens per cache block", NULL, NULL},
      {"tokens", CLI_WORD, a, 0, 0, "LIST", "prompt lengths, comma-separated",
       "8192,32768,65536; CPU 1024,2048,4096", parse_lengths_list},
      {"input", CLI_WORD, &a->input, 0, 0, "KIND",
       "structured (concentrated attention), random\n(nearly uniform) or both", "both", parse_input},
      {"tau", CLI_WORD, &a->tau, 0, 0, "T", "share of each query block's mass to keep, in\n(0, 1]",
       "0.9", parse_tau},
      {"stride", CLI_INT, &a->stride, 4, 16, "S", "antidiagonal stride: 4, 8 or 16", NULL, NULL},
      {"block", CLI_INT, &a->block, 64, 4096, "B",
       "tokens per mask block, a multiple of 64 (prefill's\nrule) and of --stride", NULL, NULL},
      {"chunk", CLI_INT, &a->chunk, 0, 1 << 22, "N",
       "keys per estimation chunk, a multiple of --block;\n0 = one chunk", NULL, NULL},
      {"gemm", CLI_FLAG, &a->gemm, 0, 0, NULL,
       "also time the GEMM route for the scores: CLBlast's\nbatched SGEMM of the reshaped queries "
       "and keys\n(builds with CLBlast only)",
       NULL, NULL},
      {"path", CLI_WORD, &a->path, 0, 0, "P",
       "the estimation's products: auto, f32 or mma\n(tensor cores)", "auto", parse_path},
      {"shapes", CLI_WORD, &a->shapes, 0, 0, "SET",
       "the defaults the options not given take: gpu,\ncpu (marked CPU; seconds on a 2-core CPU)\n"
       "or auto (cpu when the device is a CPU)", "auto", bench_parse_shapes},
      {"json", CLI_FLAG, &a->json, 0, 0, NULL, "print one JSON line instead of the table", NULL,
       NULL},
      {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
  };
  const cli_cmd cmd = {
      "clpa-bench xattn",
      "Times XAttention on one causal prompt per length: the block-sparse estimation\n"
      "(clpa_xattn_estimate), the density of the mask it selects, and the speed-up\n"
      "of block-sparse prefill over dense prefill, estimation included.",
      opts,
      "Inputs (a fixed seed): structured puts attention near the diagonal (8 rotary\n"
      "pairs), on the first 4 tokens and on 16 scattered keys; random is uniform in\n"
      "[-1, 1]. f16 caches and queries. Timing as clpa-bench prefill (median of 7\n"
      "batches). JSON keys: op, device, mode (hot), heads, kv_heads, head_size, tau,\n"
      "stride, block, path (the estimation's), shapes (the set the defaults came\n"
      "from: gpu or cpu), runs (an array of: tokens, input, dense_ms, estimate_ms,\n"
      "sparse_ms, density, speedup, estimate_share, and with --gemm gemm_ms).\n"
      "--gemm: per head, the ceil(L/S) x (S D) reshaped queries times the\n"
      "transposed reshaped keys into a full square f32 score matrix, one\n"
      "strided-batched CLBlastSgemm over the heads, from contiguous random\n"
      "matrices: the products alone (the reshape copies out of the paged cache and\n"
      "the softmax passes over the stored scores are not counted), so a lower bound\n"
      "on that route's cost.",
      clpa_version_string(),
  };
  int rc = cli_parse(&cmd, argc, argv);
  if (rc != CLI_RUN) return rc;
  a->shapes = bench_shapes_pick(a->shapes);
  const int cpu = a->shapes == BENCH_SHAPES_CPU;
  if (!a->heads) a->heads = cpu ? CPU_HEADS : GPU_HEADS;
  if (!a->kv_heads) a->kv_heads = cpu ? CPU_KV_HEADS : GPU_KV_HEADS;
  if (!a->n_lengths) {
    a->n_lengths = 3;
    memcpy(a->lengths, cpu ? cpu_tokens : gpu_tokens, sizeof gpu_tokens);
  }
#ifndef CLPA_BENCH_CLBLAST
  if (a->gemm) return cli_error(&cmd, "--gemm needs a build with CLBlast");
#endif
  return CLI_RUN;
}

/* One length and input kind: the device buffers and both calls' params. */
typedef struct xrun {
  cl_mem kc, vc, q, bt, out, mask;
  clpa_prefill_params p;
  clpa_xattn_params x;
  size_t mask_bytes;
  int q_blocks, k_blocks;
} xrun;

static void xrun_release(xrun *r) {
  cl_mem all[] = {r->kc, r->vc, r->q, r->bt, r->out, r->mask};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    if (all[i]) clReleaseMemObject(all[i]);
  memset(r, 0, sizeof *r);
}

static float noise(double half) {
  return (float)(((double)(bench_rand() % 20001) / 10000.0 - 1.0) * half);
}

/* Row `pos` (a query or key) of the recipe, head_size elements. */
static void recipe_row(float *row, int d, int pos, int is_key, int structured, const char *hot) {
  if (!structured) {
    for (int e = 0; e < d; e++) row[e] = noise(1.0);
    return;
  }
  for (int e = 0; e < d; e++) row[e] = noise(0.5);
  for (int f = 0; f < 8 && 2 * f + 1 < d; f++) {
    const double w = 6.283185307179586 / (64.0 * (double)(1 << f));
    row[2 * f] = (float)(3.8 * cos(w * pos)), row[2 * f + 1] = (float)(3.8 * sin(w * pos));
  }
  if (d > 17) {
    row[16] = is_key ? (pos < 4 ? 12.0f : 0.0f) : 3.0f;
    row[17] = is_key ? (hot[pos] ? 12.0f : 0.0f) : 2.0f;
  }
}

/* Makes the inputs of one run; returns NULL or what went wrong. */
static const char *xrun_make(bench_env *env, const xattn_args *a, int L, int structured, xrun *r) {
  memset(r, 0, sizeof *r);
  const int D = a->head_size, bs = a->block_size, nb = (L + bs - 1) / bs;
  clpa_prefill_params *p = &r->p;
  clpa_prefill_params_init(p);
  if (clpa_kv_layout_init(&p->kv, CLPA_DTYPE_F16, nb, bs, a->kv_heads, D) != CLPA_OK)
    return clpa_last_error();
  const size_t cache_elems = (size_t)p->kv.block_stride * nb, qn = (size_t)L * a->heads * D;
  int32_t *tables = malloc(sizeof(int32_t) * nb);
  float *kf = malloc(sizeof(float) * cache_elems), *qf = malloc(sizeof(float) * qn);
  uint16_t *ks = malloc(2 * cache_elems), *qs = malloc(2 * qn);
  char *hot = calloc((size_t)L, 1);
  const char *why = NULL;
  if (!tables || !kf || !qf || !ks || !qs || !hot) {
    why = "out of host memory";
    goto out;
  }
  for (int i = 0; i < nb; i++) tables[i] = i;
  for (int i = nb - 1; i > 0; i--) {
    int j = (int)(bench_rand() % (uint64_t)(i + 1)), t = tables[i];
    tables[i] = tables[j], tables[j] = t;
  }
  for (int i = 0; i < 16; i++) hot[bench_rand() % (uint64_t)L] = 1;
  for (size_t i = 0; i < cache_elems; i++) kf[i] = 0; /* slots past L */
  float *row = malloc(sizeof(float) * D);
  if (!row) {
    why = "out of host memory";
    goto out;
  }
  for (int j = 0; j < L; j++)
    for (int h = 0; h < a->kv_heads; h++) {
      recipe_row(row, D, j, 1, structured, hot);
      for (int e = 0; e < D; e++)
        kf[clpa_kv_key_index(&p->kv, tables[j / bs], h, j % bs, e)] = row[e];
    }
  for (int i = 0; i < L; i++)
    for (int h = 0; h < a->heads; h++) recipe_row(qf + ((size_t)i * a->heads + h) * D, D, i, 0,
                                                   structured, hot);
  free(row);
  clpa_dtype_encode(CLPA_DTYPE_F16, kf, ks, cache_elems, 1.0f);
  clpa_dtype_encode(CLPA_DTYPE_F16, qf, qs, qn, 1.0f);
  r->q_blocks = (L + a->block - 1) / a->block, r->k_blocks = r->q_blocks;
  r->mask_bytes = (size_t)a->heads * r->q_blocks * r->k_blocks;
  r->kc = bench_buffer(env, ks, 2 * cache_elems);
  r->vc = bench_random_cache(env, CLPA_DTYPE_F16, cache_elems);
  r->q = bench_buffer(env, qs, 2 * qn);
  r->bt = bench_buffer(env, tables, sizeof(int32_t) * nb);
  r->out = bench_buffer(env, NULL, 2 * qn);
  r->mask = bench_buffer(env, NULL, r->mask_bytes);
  if (!r->kc || !r->vc || !r->q || !r->bt || !r->out || !r->mask) {
    why = "the device could not hold the inputs";
    goto out;
  }
  static int32_t cu[2], cached[1];
  cu[0] = 0, cu[1] = L, cached[0] = 0;
  p->num_seqs = 1, p->num_heads = a->heads, p->key_cache = r->kc, p->value_cache = r->vc;
  p->max_blocks_per_seq = nb, p->cu_seqlens_q = cu, p->cached_lens = cached;
  p->q_dtype = CLPA_DTYPE_F16, p->scale = 1.0f / sqrtf((float)D);
  p->query = r->q, p->block_tables = r->bt, p->out = r->out;
  clpa_xattn_params *x = &r->x;
  clpa_xattn_params_init(x);
  x->num_heads = a->heads, x->key_cache = r->kc, x->kv = p->kv, x->block_table = r->bt;
  x->max_blocks_per_seq = nb, x->query = r->q, x->q_dtype = CLPA_DTYPE_F16, x->num_q = L;
  x->stride = a->stride, x->block = a->block, x->chunk = a->chunk, x->tau = a->tau;
  x->mask = r->mask, x->path = (clpa_xattn_path)a->path;
out:
  free(tables), free(kf), free(qf), free(ks), free(qs), free(hot);
  return why;
}

static clpa_status sparse_once(clpa_context *ctx, const void *arg) {
  const xrun *r = arg;
  return clpa_prefill(ctx, &r->p);
}

static clpa_status estimate_once(clpa_context *ctx, const void *arg) {
  const xrun *r = arg;
  return clpa_xattn_estimate(ctx, &r->x);
}

typedef struct xresult {
  int tokens, structured;
  clpa_xattn_path path; /* the estimation's, as taken */
  double dense, estimate, sparse, density, gemm; /* gemm 0: not timed */
} xresult;

#ifdef CLPA_BENCH_CLBLAST
/* The GEMM route's products (--gemm): see the help text. */
typedef struct gemm_run {
  cl_mem a, b, c;
  size_t m, k, heads;
  CLBlastStatusCode *status; /* the last call's, for the message */
} gemm_run;

static clpa_status gemm_once(clpa_context *ctx, const void *arg) {
  const gemm_run *g = arg;
  cl_command_queue q = clpa_context_cl_queue(ctx);
  CLBlastStatusCode e = CLBlastSgemmStridedBatched(
      CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, g->m, g->m, g->k, 1.0f, g->a,
      0, g->k, g->m * g->k, g->b, 0, g->k, g->m * g->k, 0.0f, g->c, 0, g->m, g->m * g->m,
      g->heads, &q, NULL);
  *g->status = e;
  return e == CLBlastSuccess ? CLPA_OK : CLPA_ERR_OPENCL;
}

/* Seconds per call of the GEMM route's products for L tokens, or an error. */
static const char *gemm_time(bench_env *env, const xattn_args *a, int L, double *secs) {
  static char text[96];
  CLBlastStatusCode status = CLBlastSuccess;
  const size_t groups = (size_t)(L + a->stride - 1) / (size_t)a->stride; /* padded, as estimated */
  gemm_run g = {NULL, NULL, NULL, groups, (size_t)a->stride * a->head_size, (size_t)a->heads,
                &status};
  const size_t in = g.heads * g.m * g.k, out = g.heads * g.m * g.m;
  float *host = malloc(sizeof(float) * in);
  const char *why = NULL;
  if (!host) return "out of host memory for the GEMM inputs";
  for (size_t i = 0; i < in; i++) host[i] = (float)((double)(bench_rand() % 2001) / 1000.0 - 1.0);
  g.a = bench_buffer_quiet(env, host, sizeof(float) * in);
  g.b = bench_buffer_quiet(env, host, sizeof(float) * in);
  g.c = bench_buffer_quiet(env, NULL, sizeof(float) * out);
  free(host);
  if (!g.a || !g.b || !g.c) why = "the device could not hold the GEMM's matrices";
  else if (gemm_once(env->ctx, &g) != CLPA_OK || clpa_context_finish(env->ctx) != CLPA_OK ||
           bench_time(env, "GEMM route", gemm_once, &g, secs)) {
    snprintf(text, sizeof text, "CLBlastSgemmStridedBatched returned status %d", (int)status);
    why = status != CLBlastSuccess ? text : clpa_context_last_error(env->ctx);
  }
  cl_mem all[] = {g.a, g.b, g.c};
  for (int i = 0; i < 3; i++)
    if (all[i]) clReleaseMemObject(all[i]);
  return why;
}
#endif

/* Times one run: dense, the estimation, then sparse under its mask. */
static const char *xrun_time(bench_env *env, const xattn_args *a, xrun *r, xresult *res) {
  if (clpa_xattn_estimate(env->ctx, &r->x) != CLPA_OK || clpa_context_finish(env->ctx) != CLPA_OK)
    return clpa_context_last_error(env->ctx);
  uint8_t *mask = malloc(r->mask_bytes);
  if (!mask) return "out of host memory";
  if (clEnqueueReadBuffer(clpa_context_cl_queue(env->ctx), r->mask, CL_TRUE, 0, r->mask_bytes,
                          mask, 0, NULL, NULL) != CL_SUCCESS) {
    free(mask);
    return "could not read the mask back";
  }
  size_t kept = 0, causal = 0;
  for (int h = 0; h < a->heads; h++)
    for (int i = 0; i < r->q_blocks; i++)
      for (int j = 0; j <= i; j++) kept += mask[((size_t)h * r->q_blocks + i) * r->k_blocks + j] != 0,
                                   causal++;
  free(mask);
  res->density = causal ? (double)kept / (double)causal : 0;
  r->p.block_mask = NULL;
  if (clpa_prefill(env->ctx, &r->p) != CLPA_OK || clpa_context_finish(env->ctx) != CLPA_OK)
    return clpa_context_last_error(env->ctx);
  if (bench_time(env, "dense prefill", sparse_once, r, &res->dense)) return "timing failed";
  if (bench_time(env, "estimation", estimate_once, r, &res->estimate)) return "timing failed";
  r->p.block_mask = r->mask, r->p.mask_block = a->block;
  r->p.mask_q_blocks = r->q_blocks, r->p.mask_k_blocks = r->k_blocks;
  if (bench_time(env, "sparse prefill", sparse_once, r, &res->sparse)) return "timing failed";
  if (clpa_context_check_faults(env->ctx, NULL) != CLPA_OK) return clpa_context_last_error(env->ctx);
  return NULL;
}

int bench_xattn(int argc, char **argv) {
  xattn_args a;
  int parsed = parse(argc, argv, &a);
  if (parsed != CLI_RUN) return parsed;
  bench_env env;
  if (bench_open(&env)) return 1;
  xresult res[2 * MAX_LENGTHS];
  int n = 0, rc = 1;
  for (int li = 0; li < a.n_lengths; li++)
    for (int kind = 1; kind <= 2; kind++) {
      if (a.input && a.input != kind) continue;
      const int L = a.lengths[li];
      xrun r;
      cli_progress("xattn: %d tokens, %s input: making the inputs...", L,
                   kind == 1 ? "structured" : "random");
      const char *why = xrun_make(&env, &a, L, kind == 1, &r);
      cli_progress_end();
      if (!why) {
        res[n] = (xresult){L, kind == 1, CLPA_XATTN_AUTO, 0, 0, 0, 0, 0};
        why = clpa_xattn_choice(env.ctx, &r.x, &res[n].path) != CLPA_OK
                  ? clpa_context_last_error(env.ctx)
                  : xrun_time(&env, &a, &r, &res[n]);
      }
      xrun_release(&r);
#ifdef CLPA_BENCH_CLBLAST
      if (!why && a.gemm) why = gemm_time(&env, &a, L, &res[n].gemm);
#endif
      if (why) {
        fprintf(stderr, "clpa-bench xattn: %d tokens, %s input: %s\n", L,
                kind == 1 ? "structured" : "random", why);
        goto done;
      }
      n++;
    }
  if (a.json) {
    cli_json j;
    cli_json_begin(&j, stdout);
    cli_json_str(&j, "op", "xattn");
    cli_json_str(&j, "device", env.info.name);
    cli_json_str(&j, "mode", "hot"); /* back-to-back calls, as decode's hot mode */
    cli_json_int(&j, "heads", a.heads);
    cli_json_int(&j, "kv_heads", a.kv_heads);
    cli_json_int(&j, "head_size", a.head_size);
    cli_json_num(&j, "tau", a.tau, 4);
    cli_json_int(&j, "stride", a.stride);
    cli_json_int(&j, "block", a.block);
    cli_json_str(&j, "path", n && res[0].path == CLPA_XATTN_MMA ? "mma" : "f32");
    cli_json_str(&j, "shapes", bench_shapes_name(a.shapes));
    cli_json_array(&j, "runs");
    for (int i = 0; i < n; i++) {
      const xresult *x = &res[i];
      cli_json_object(&j, NULL);
      cli_json_int(&j, "tokens", x->tokens);
      cli_json_str(&j, "input", x->structured ? "structured" : "random");
      cli_json_num(&j, "dense_ms", x->dense * 1e3, 3);
      cli_json_num(&j, "estimate_ms", x->estimate * 1e3, 3);
      cli_json_num(&j, "sparse_ms", x->sparse * 1e3, 3);
      cli_json_num(&j, "density", x->density, 4);
      cli_json_num(&j, "speedup", x->dense / (x->estimate + x->sparse), 3);
      cli_json_num(&j, "estimate_share", x->estimate / x->dense, 4);
      if (x->gemm > 0) cli_json_num(&j, "gemm_ms", x->gemm * 1e3, 3);
      cli_json_end(&j);
    }
    cli_json_end(&j);
    cli_json_end(&j);
  } else {
    printf("device  %s (%s lanes)\n", env.info.name, clpa_lanes_name(env.info.lanes));
    printf("shape   heads %d/%d, head size %d, block %d, f16; tau %.3g, stride %d, mask block %d;"
           " %s defaults\n",
           a.heads, a.kv_heads, a.head_size, a.block_size, a.tau, a.stride, a.block,
           a.shapes == BENCH_SHAPES_CPU ? "CPU" : "GPU");
    printf("path    estimation on %s\n",
           n && res[0].path == CLPA_XATTN_MMA ? "tensor cores (mma)" : "f32 products");
    printf("%8s %-10s %10s %10s %10s %8s %8s %9s\n", "tokens", "input", "dense", "estimate",
           "sparse", "density", "speedup", "est/dense");
    for (int i = 0; i < n; i++) {
      const xresult *x = &res[i];
      char dense[32], est[32], sparse[32];
      printf("%8d %-10s %s %s %s %8.4f %7.2fx %9.4f\n", x->tokens,
             x->structured ? "structured" : "random",
             cli_time_text(dense, sizeof dense, x->dense, 10),
             cli_time_text(est, sizeof est, x->estimate, 10),
             cli_time_text(sparse, sizeof sparse, x->sparse, 10), x->density,
             x->dense / (x->estimate + x->sparse), x->estimate / x->dense);
      if (x->gemm > 0)
        printf("%8s %-10s GEMM route's products (CLBlast, full square): %s\n", "", "",
               cli_time_text(dense, sizeof dense, x->gemm, 0));
    }
    printf("speedup = dense / (estimate + sparse); density = kept / causal block pairs\n");
  }
  rc = 0;
done:
  bench_close(&env);
  return rc;
}
