/*
 * decode.c — clpa_decode: validates, plans (v1 or v2, heads per
 * work-group, lane-group width) and launches cl/decode.cl and
 * cl/reduce.cl.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define DECODE_THREADS 128
#define DEFAULT_PARTITION 512

void clpa_decode_params_init(clpa_decode_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->kv_dtype = CLPA_DTYPE_F16;
  p->q_dtype = CLPA_DTYPE_F32;
  p->k_scale = p->v_scale = 1.0f;
  p->variant = CLPA_DECODE_AUTO;
}

typedef struct decode_plan {
  int v2, partition, heads_per_group, sg, max_parts;
  int logits_stride; /* floats of local logits per head */
  int num_blocks;    /* blocks in the cache, from its size */
} decode_plan;

static int supported_head_size(int hs) {
  static const int ok[] = {32, 64, 80, 96, 112, 120, 128, 192, 256};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
    if (ok[i] == hs) return 1;
  return 0;
}

static size_t local_bytes(const clpa_decode_params *p, int g, int logits_stride) {
  return sizeof(float) * ((size_t)2 * g * p->head_size + DECODE_THREADS +
                          (size_t)g * logits_stride) + 256; /* 256: compiler slack */
}

static int round_up(int a, int b) { return (a + b - 1) / b * b; }

static clpa_status validate(clpa_context *ctx, const clpa_decode_params *p) {
  CLPA_CTX_CHECK(ctx, p->num_seqs < 0, CLPA_ERR_INVALID_ARG, "num_seqs = %d", p->num_seqs);
  CLPA_CTX_CHECK(ctx, p->num_heads <= 0 || p->num_kv_heads <= 0, CLPA_ERR_INVALID_ARG,
                 "num_heads = %d, num_kv_heads = %d (both must be > 0)", p->num_heads,
                 p->num_kv_heads);
  CLPA_CTX_CHECK(ctx, p->num_heads % p->num_kv_heads != 0, CLPA_ERR_INVALID_ARG,
                 "num_heads = %d is not a multiple of num_kv_heads = %d", p->num_heads,
                 p->num_kv_heads);
  CLPA_CTX_CHECK(ctx, !supported_head_size(p->head_size), CLPA_ERR_UNSUPPORTED,
                 "head_size = %d (supported: 32, 64, 80, 96, 112, 120, 128, 192, 256)",
                 p->head_size);
  CLPA_CTX_CHECK(ctx, p->block_size != 8 && p->block_size != 16 && p->block_size != 32,
                 CLPA_ERR_UNSUPPORTED, "block_size = %d (supported: 8, 16, 32)", p->block_size);
  size_t kv_size = clpa_dtype_size(p->kv_dtype);
  CLPA_CTX_CHECK(ctx, kv_size == 0, CLPA_ERR_INVALID_ARG, "kv_dtype = %d is not a clpa_dtype",
                 (int)p->kv_dtype);
  CLPA_CTX_CHECK(ctx, p->head_size % (int)(16 / kv_size) != 0, CLPA_ERR_UNSUPPORTED,
                 "head_size = %d is not a multiple of x = %d (16 bytes of %s), which the key"
                 " cache layout needs", p->head_size, (int)(16 / kv_size),
                 clpa_dtype_name(p->kv_dtype));
  CLPA_CTX_CHECK(ctx, p->q_dtype != CLPA_DTYPE_F32 && p->q_dtype != CLPA_DTYPE_F16,
                 CLPA_ERR_UNSUPPORTED, "q_dtype = %s (query and output must be f32 or f16)",
                 clpa_dtype_name(p->q_dtype));
  CLPA_CTX_CHECK(ctx, p->max_blocks_per_seq <= 0, CLPA_ERR_INVALID_ARG,
                 "max_blocks_per_seq = %d", p->max_blocks_per_seq);
  CLPA_CTX_CHECK(ctx, p->max_context_len < 0 ||
                          (int64_t)p->max_context_len > (int64_t)p->max_blocks_per_seq * p->block_size,
                 CLPA_ERR_INVALID_ARG,
                 "max_context_len = %d exceeds the table's capacity %d blocks x %d tokens",
                 p->max_context_len, p->max_blocks_per_seq, p->block_size);
  CLPA_CTX_CHECK(ctx, !isfinite(p->scale), CLPA_ERR_INVALID_ARG, "scale = %g", (double)p->scale);
  CLPA_CTX_CHECK(ctx, !(p->k_scale > 0 && isfinite(p->k_scale)) ||
                          !(p->v_scale > 0 && isfinite(p->v_scale)),
                 CLPA_ERR_INVALID_ARG, "k_scale = %g, v_scale = %g (must be finite and > 0)",
                 (double)p->k_scale, (double)p->v_scale);
  CLPA_CTX_CHECK(ctx, !(p->soft_cap >= 0 && isfinite(p->soft_cap)), CLPA_ERR_INVALID_ARG,
                 "soft_cap = %g (0 = off, else > 0)", (double)p->soft_cap);
  CLPA_CTX_CHECK(ctx, p->sliding_window < 0, CLPA_ERR_INVALID_ARG, "sliding_window = %d",
                 p->sliding_window);
  size_t row = (size_t)p->num_heads * p->head_size;
  CLPA_CTX_CHECK(ctx, p->q_stride != 0 && p->q_stride < row, CLPA_ERR_INVALID_ARG,
                 "q_stride = %zu is less than num_heads * head_size = %zu", p->q_stride, row);
  CLPA_CTX_CHECK(ctx, (unsigned)p->variant > CLPA_DECODE_V2, CLPA_ERR_INVALID_ARG,
                 "variant = %d", (int)p->variant);
  CLPA_CTX_CHECK(ctx, p->partition_size < 0 || p->partition_size % p->block_size != 0,
                 CLPA_ERR_INVALID_ARG, "partition_size = %d is not a multiple of block_size = %d",
                 p->partition_size, p->block_size);
  int qpk = p->num_heads / p->num_kv_heads;
  CLPA_CTX_CHECK(ctx, p->heads_per_group < 0 || (p->heads_per_group > 0 && qpk % p->heads_per_group),
                 CLPA_ERR_INVALID_ARG,
                 "heads_per_group = %d does not divide num_heads / num_kv_heads = %d",
                 p->heads_per_group, qpk);
  CLPA_CTX_CHECK(ctx, p->heads_per_group > 16, CLPA_ERR_UNSUPPORTED,
                 "heads_per_group = %d (at most 16)", p->heads_per_group);
  return CLPA_OK;
}

static clpa_status check_buffers(clpa_context *ctx, const clpa_decode_params *p, decode_plan *pl) {
  size_t qs = clpa_dtype_size(p->q_dtype), kvs = clpa_dtype_size(p->kv_dtype);
  size_t n = (size_t)p->num_seqs, heads = (size_t)p->num_heads;
  size_t row = heads * p->head_size, stride = p->q_stride ? p->q_stride : row;
  size_t block_bytes = (size_t)p->num_kv_heads * p->head_size * p->block_size * kvs;
  size_t ksize = 0, vsize = 0;
  clpa_status st;
  if ((st = clpa_check_buffer(ctx, p->key_cache, "key_cache", block_bytes, 0)) ||
      (st = clpa_check_buffer(ctx, p->value_cache, "value_cache", block_bytes, 0)))
    return st;
  clGetMemObjectInfo(p->key_cache, CL_MEM_SIZE, sizeof ksize, &ksize, NULL);
  clGetMemObjectInfo(p->value_cache, CL_MEM_SIZE, sizeof vsize, &vsize, NULL);
  size_t blocks = (ksize < vsize ? ksize : vsize) / block_bytes;
  CLPA_CTX_CHECK(ctx, blocks > INT32_MAX, CLPA_ERR_UNSUPPORTED, "%zu blocks (at most 2^31 - 1)",
                 blocks);
  pl->num_blocks = (int)blocks;
  size_t need_q = n ? ((n - 1) * stride + row) * qs : 0;
  if ((st = clpa_check_buffer(ctx, p->query, "query", need_q, 0)) ||
      (st = clpa_check_buffer(ctx, p->block_tables, "block_tables",
                              n * (size_t)p->max_blocks_per_seq * 4, 0)) ||
      (st = clpa_check_buffer(ctx, p->context_lens, "context_lens", n * 4, 0)) ||
      (st = clpa_check_buffer(ctx, p->out, "out", n * row * qs, 0)) ||
      (st = clpa_check_buffer(ctx, p->lse, "lse", n * heads * 4, 1)) ||
      (st = clpa_check_buffer(ctx, p->alibi_slopes, "alibi_slopes", heads * 4, 1)) ||
      (st = clpa_check_buffer(ctx, p->sinks, "sinks", heads * 4, 1)))
    return st;
  return CLPA_OK;
}

/* Lanes per lane group: the emulated path uses one lane per key token. */
static int lane_width(const clpa_context *ctx, int block_size) {
  switch (ctx->lanes) {
    case CLPA_LANES_NV_PTX: return 32;
    /* A lane group is an aligned 32-lane (or smaller) slice of a subgroup:
     * xor shuffles with masks below its width stay inside it, so wider
     * subgroups (PoCL makes the whole work-group one) serve as well. */
    case CLPA_LANES_SUBGROUP:
      return ctx->subgroup_size && ctx->subgroup_size < 32 ? ctx->subgroup_size : 32;
    default: return block_size;
  }
}

static clpa_status plan(clpa_context *ctx, const clpa_decode_params *p, decode_plan *pl) {
  const uint64_t lmem = ctx->info.local_mem_bytes;
  const int qpk = p->num_heads / p->num_kv_heads;
  pl->sg = lane_width(ctx, p->block_size);
  pl->partition = p->partition_size ? p->partition_size : DEFAULT_PARTITION;
  pl->partition = round_up(pl->partition, p->block_size);
  const int max_ctx = p->max_context_len > 0 ? p->max_context_len : 1;
  const int v1_stride = round_up(max_ctx, p->block_size);
  const int parts = (max_ctx + pl->partition - 1) / pl->partition;
  const unsigned cus = ctx->info.compute_units ? ctx->info.compute_units : 1;

  int v2;
  if (p->variant == CLPA_DECODE_V1)
    v2 = 0;
  else if (p->variant == CLPA_DECODE_V2)
    v2 = 1;
  else
    v2 = parts > 1 || local_bytes(p, 1, v1_stride) > lmem;
  const int stride = v2 ? pl->partition : v1_stride;
  int g = p->heads_per_group;
  if (g == 0) {
    g = 1;
    for (int c = 8; c >= 2; c /= 2) {
      long groups = (long)p->num_seqs * (p->num_heads / c) * (v2 ? parts : 1);
      if (qpk % c == 0 && local_bytes(p, c, stride) <= lmem && groups >= 2L * cus) {
        g = c;
        break;
      }
    }
  }
  pl->heads_per_group = g;
  pl->v2 = v2;
  pl->logits_stride = stride;
  pl->max_parts = v2 ? parts : 1;
  CLPA_CTX_CHECK(ctx, local_bytes(p, g, pl->logits_stride) > lmem, CLPA_ERR_UNSUPPORTED,
                 "%s with %d heads per group needs %zu bytes of local memory; the device has %llu"
                 " (use v2 or a smaller partition_size)", v2 ? "v2" : "v1", g,
                 local_bytes(p, g, pl->logits_stride), (unsigned long long)lmem);
  return CLPA_OK;
}

static void decode_options(const clpa_decode_params *p, const decode_plan *pl, char *buf,
                           size_t cap) {
  snprintf(buf, cap,
           "-DHEAD_SIZE=%d -DBLOCK_SIZE=%d -DKV_DTYPE=%d -DIO_DTYPE=%d -DNUM_THREADS=%d -DSG=%d "
           "-DPARTITION_SIZE=%d -DHEADS_PER_WG=%d",
           p->head_size, p->block_size, (int)p->kv_dtype, p->q_dtype == CLPA_DTYPE_F16 ? 1 : 0,
           DECODE_THREADS, pl->sg, pl->v2 ? pl->partition : 0, pl->heads_per_group);
}

/* On the subgroup path the lane width is whatever the compiler gives our
 * kernel: learn it once from a built kernel, then build for it. */
static clpa_status learn_subgroup_size(clpa_context *ctx, cl_kernel k) {
  size_t local = DECODE_THREADS, sg = 0;
  cl_int err = CL_INVALID_OPERATION;
#ifdef CL_VERSION_2_1
  if (strncmp(ctx->info.device_version, "OpenCL 2.1", 10) >= 0 ||
      strncmp(ctx->info.device_version, "OpenCL 3", 8) == 0)
    err = clGetKernelSubGroupInfo(k, ctx->dev, CL_KERNEL_MAX_SUB_GROUP_SIZE_FOR_NDRANGE,
                                  sizeof local, &local, sizeof sg, &sg, NULL);
#endif
  if (err != CL_SUCCESS || sg == 0 || (sg & (sg - 1)) || sg > DECODE_THREADS)
    return CLPA_FAIL(ctx->error, CLPA_ERR_UNSUPPORTED,
                     "cannot learn a usable subgroup size on '%s' (%s, size %zu); force lanes"
                     " 'emulated'", ctx->info.name, clpa_cl_error_name(err), sg);
  ctx->subgroup_size = (int)sg;
  return CLPA_OK;
}

static clpa_status get_kernel(clpa_context *ctx, const clpa_decode_params *p, decode_plan *pl,
                              cl_kernel *k) {
  char opts[512];
  decode_options(p, pl, opts, sizeof opts);
  clpa_status st = clpa_kernel_create(ctx, "decode", opts, "clpa_decode_paged", k);
  if (st != CLPA_OK || ctx->lanes != CLPA_LANES_SUBGROUP || ctx->subgroup_size) return st;
  st = learn_subgroup_size(ctx, *k);
  if (st != CLPA_OK) {
    if (ctx->lanes_forced) {
      clReleaseKernel(*k);
      *k = NULL;
      return st;
    }
    /* Subgroups we cannot size (an OpenCL 2.0 device with only the KHR
     * query, say): the emulated path works everywhere. */
    ctx->lanes = CLPA_LANES_EMULATED;
    clpa_err_clear();
    ctx->error[0] = '\0';
    st = CLPA_OK;
  }
  if (ctx->lanes != CLPA_LANES_SUBGROUP || lane_width(ctx, p->block_size) != pl->sg) {
    clReleaseKernel(*k);
    *k = NULL;
    pl->sg = lane_width(ctx, p->block_size);
    decode_options(p, pl, opts, sizeof opts);
    st = clpa_kernel_create(ctx, "decode", opts, "clpa_decode_paged", k);
  }
  return st;
}

#define ARG(i, v) CLPA_SET_ARG(ctx, k, i, v)

static clpa_status launch_decode(clpa_context *ctx, const clpa_decode_params *p, decode_plan *pl,
                                 cl_mem out, cl_mem stat0, cl_mem stat1, cl_event *ev) {
  cl_kernel k;
  clpa_status st = get_kernel(ctx, p, pl, &k);
  if (st != CLPA_OK) return st;
  cl_mem faults;
  if ((st = clpa_faults_buffer(ctx, &faults)) != CLPA_OK) {
    clReleaseKernel(k);
    return st;
  }
  cl_ulong q_stride = p->q_stride ? p->q_stride : (cl_ulong)p->num_heads * p->head_size;
  cl_ulong head_stride = (cl_ulong)p->head_size * p->block_size;
  cl_ulong block_stride = head_stride * p->num_kv_heads;
  cl_int maxb = p->max_blocks_per_seq, maxc = p->max_context_len, nb = pl->num_blocks;
  cl_int nh = p->num_heads, nkv = p->num_kv_heads, win = p->sliding_window;
  cl_int mp = pl->max_parts, ls = pl->logits_stride;
  cl_float scale = p->scale, ks = p->k_scale, vs = p->v_scale, cap = p->soft_cap;
  ARG(0, out);
  ARG(1, stat0);
  ARG(2, stat1);
  ARG(3, p->query);
  ARG(4, q_stride);
  ARG(5, p->key_cache);
  ARG(6, p->value_cache);
  ARG(7, block_stride);
  ARG(8, head_stride);
  ARG(9, p->block_tables);
  ARG(10, maxb);
  ARG(11, p->context_lens);
  ARG(12, maxc);
  ARG(13, nb);
  ARG(14, nh);
  ARG(15, nkv);
  ARG(16, scale);
  ARG(17, ks);
  ARG(18, vs);
  ARG(19, p->alibi_slopes);
  ARG(20, cap);
  ARG(21, win);
  ARG(22, p->sinks);
  ARG(23, mp);
  ARG(24, ls);
  ARG(25, faults);
  cl_int err = clSetKernelArg(k, 26, sizeof(float) * (size_t)ls * pl->heads_per_group, NULL);
  if (err != CL_SUCCESS) {
    clReleaseKernel(k);
    return CLPA_CL_FAIL(ctx, err, "clSetKernelArg(logits)");
  }
  size_t global[3] = {(size_t)(p->num_heads / pl->heads_per_group) * DECODE_THREADS,
                      (size_t)p->num_seqs, (size_t)pl->max_parts};
  size_t local[3] = {DECODE_THREADS, 1, 1};
  err = clEnqueueNDRangeKernel(ctx->queue, k, 3, NULL, global, local, p->num_wait_events,
                               p->wait_events, ev);
  clReleaseKernel(k);
  if (err != CL_SUCCESS) return CLPA_CL_FAIL(ctx, err, "clEnqueueNDRangeKernel(clpa_decode_paged)");
  return CLPA_OK;
}

static clpa_status reduce_kernel(clpa_context *ctx, const clpa_decode_params *p,
                                 const decode_plan *pl, cl_kernel *k) {
  char opts[256];
  snprintf(opts, sizeof opts, "-DHEAD_SIZE=%d -DIO_DTYPE=%d -DNUM_THREADS=%d -DPARTITION_SIZE=%d",
           p->head_size, p->q_dtype == CLPA_DTYPE_F16 ? 1 : 0, DECODE_THREADS, pl->partition);
  return clpa_kernel_create(ctx, "reduce", opts, "clpa_decode_reduce", k);
}

/* Sets the reduce kernel's arguments and enqueues it; releases k. */
static clpa_status launch_reduce(clpa_context *ctx, const clpa_decode_params *p,
                                 const decode_plan *pl, cl_kernel k, cl_mem tmp, cl_mem sums,
                                 cl_mem maxes, cl_event *ev) {
  cl_int maxc = p->max_context_len, nh = p->num_heads, mp = pl->max_parts;
  ARG(0, p->out);
  ARG(1, p->lse);
  ARG(2, sums);
  ARG(3, maxes);
  ARG(4, tmp);
  ARG(5, p->context_lens);
  ARG(6, maxc);
  ARG(7, nh);
  ARG(8, mp);
  ARG(9, p->sinks);
  cl_int err = clSetKernelArg(k, 10, sizeof(float) * (size_t)mp, NULL);
  if (err != CL_SUCCESS) {
    clReleaseKernel(k);
    return CLPA_CL_FAIL(ctx, err, "clSetKernelArg(weights)");
  }
  size_t global[2] = {(size_t)p->num_heads * DECODE_THREADS, (size_t)p->num_seqs};
  size_t local[2] = {DECODE_THREADS, 1};
  err = clEnqueueNDRangeKernel(ctx->queue, k, 2, NULL, global, local, 0, NULL, ev);
  clReleaseKernel(k);
  if (err != CL_SUCCESS) return CLPA_CL_FAIL(ctx, err, "clEnqueueNDRangeKernel(clpa_decode_reduce)");
  return CLPA_OK;
}

clpa_status clpa_decode(clpa_context *ctx, const clpa_decode_params *p) {
  clpa_err_clear();
  CLPA_CHECK(NULL, !ctx, CLPA_ERR_INVALID_ARG, "ctx must not be NULL");
  CLPA_CTX_CHECK(ctx, !p, CLPA_ERR_INVALID_ARG, "p must not be NULL");
  CLPA_CTX_CHECK(ctx, p->num_wait_events > 0 && !p->wait_events, CLPA_ERR_INVALID_ARG,
                 "num_wait_events = %u but wait_events is NULL", p->num_wait_events);
  decode_plan pl = {0};
  clpa_status st;
  if ((st = validate(ctx, p)) || (st = check_buffers(ctx, p, &pl)) || (st = plan(ctx, p, &pl)))
    return st;
  if (p->num_seqs == 0) {
    if (!p->event) return CLPA_OK;
    CLPA_CL_CHECK(ctx, clEnqueueMarkerWithWaitList(ctx->queue, p->num_wait_events, p->wait_events,
                                                   p->event), "clEnqueueMarkerWithWaitList");
    return CLPA_OK;
  }
  if (!pl.v2) return launch_decode(ctx, p, &pl, p->out, p->lse, NULL, p->event);

  size_t stats = (size_t)p->num_seqs * p->num_heads * pl.max_parts;
  cl_mem tmp, sums, maxes;
  if ((st = clpa_scratch(ctx, 0, stats * p->head_size * sizeof(float), &tmp)) ||
      (st = clpa_scratch(ctx, 1, stats * sizeof(float), &sums)) ||
      (st = clpa_scratch(ctx, 2, stats * sizeof(float), &maxes)))
    return st;
  /* Get the reduce kernel before enqueueing anything, so a build failure
   * leaves nothing half done. */
  cl_kernel reduce;
  if ((st = reduce_kernel(ctx, p, &pl, &reduce)) != CLPA_OK) return st;
  if ((st = launch_decode(ctx, p, &pl, tmp, sums, maxes, NULL)) != CLPA_OK) {
    clReleaseKernel(reduce);
    return st;
  }
  return launch_reduce(ctx, p, &pl, reduce, tmp, sums, maxes, p->event);
}
