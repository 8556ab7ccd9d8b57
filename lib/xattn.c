/*
 * xattn.c — clpa_xattn_estimate (cl/xattn.cl, cl/xattn_mma.cl; the
 * kernels' parameters are cl/xattn_args.h's lists, set here by name):
 * validate everything (the shapes the reference, host/ref_xattn.h,
 * requires; the key cache; every buffer), then launch the stats, merge,
 * mass and select kernels in order; and
 * its plans (clpa_plan_xattn, plan.h): the checks, the path and the
 * kernels once, a run per layer on that layer's buffers.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "plan.h"
#include "size_math.h"
#include "xattn_args.h"

/* The kernels' parameters, from their lists (cl/xattn_args.h): a table
 * and each parameter's position, <LIST>_ARG_<name>. */
static const clpa_param stats_params[] = {XATTN_STATS_ARG_LIST(CLPA_PARAM_OF, )};
static const clpa_param stats_mma_params[] = {XATTN_STATS_MMA_ARG_LIST(CLPA_PARAM_OF, )};
static const clpa_param merge_params[] = {XATTN_MERGE_ARG_LIST(CLPA_PARAM_OF, )};
static const clpa_param mass_params[] = {XATTN_MASS_ARG_LIST(CLPA_PARAM_OF, )};
static const clpa_param select_params[] = {XATTN_SELECT_ARG_LIST(CLPA_PARAM_OF, )};
#define STATS_SLOT(kind, type, name) XATTN_STATS_ARG_##name,
#define STATS_MMA_SLOT(kind, type, name) XATTN_STATS_MMA_ARG_##name,
#define MERGE_SLOT(kind, type, name) XATTN_MERGE_ARG_##name,
#define MASS_SLOT(kind, type, name) XATTN_MASS_ARG_##name,
#define SELECT_SLOT(kind, type, name) XATTN_SELECT_ARG_##name,
enum { XATTN_STATS_ARG_LIST(STATS_SLOT, ) XATTN_STATS_NUM_ARGS };
enum { XATTN_STATS_MMA_ARG_LIST(STATS_MMA_SLOT, ) XATTN_STATS_MMA_NUM_ARGS };
enum { XATTN_MERGE_ARG_LIST(MERGE_SLOT, ) XATTN_MERGE_NUM_ARGS };
enum { XATTN_MASS_ARG_LIST(MASS_SLOT, ) XATTN_MASS_NUM_ARGS };
enum { XATTN_SELECT_ARG_LIST(SELECT_SLOT, ) XATTN_SELECT_NUM_ARGS };

void clpa_xattn_params_init(clpa_xattn_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->k_scale = 1.0f;
  p->q_dtype = CLPA_DTYPE_F32;
  p->stride = 8;
  p->block = 128;
  p->tau = 0.9;
}

/* What the shapes imply, in strided units. */
typedef struct xattn_plan {
  cl_mem k;
  clpa_kv_layout kv;
  size_t q_stride;
  int32_t rows, cols, row0, bs, q_blocks, k_blocks, diag0, chunk_cols, num_chunks;
  size_t blocks;     /* num_heads * q_blocks * k_blocks */
  size_t stats;      /* num_heads * num_chunks * rows */
} xattn_plan;

/* The key cache: cache + layer, or key_cache + kv (planning: kv alone will do). */
static clpa_status resolve_cache(clpa_context *ctx, const clpa_xattn_params *p, xattn_plan *x,
                                 int planning) {
  if (p->cache) {
    CLPA_CTX_CHECK(ctx, p->key_cache != NULL, CLPA_ERR_INVALID_ARG,
                   "give either cache (and layer) or key_cache, not both");
    cl_mem v;
    return clpa_cache_layer(ctx, p->cache, p->layer, &x->k, &v, &x->kv);
  }
  CLPA_CTX_CHECK(ctx, !p->key_cache && !planning, CLPA_ERR_INVALID_ARG,
                 "key_cache (or cache) must be given");
  clpa_status st = clpa_kv_layout_check(&p->kv, &x->kv);
  if (st != CLPA_OK) return clpa_err_within(ctx->error, st, "kv");
  x->k = p->key_cache;
  return CLPA_OK;
}

/* Heads, dtypes, the estimation's shape and tau. */
static clpa_status check_shape(clpa_context *ctx, const clpa_xattn_params *p, xattn_plan *x) {
  const clpa_kv_layout *kv = &x->kv;
  CLPA_CTX_CHECK(ctx, p->num_heads <= 0 || p->num_heads % kv->num_kv_heads != 0,
                 CLPA_ERR_INVALID_ARG,
                 "num_heads = %d is not a positive multiple of the cache's num_kv_heads = %d",
                 p->num_heads, kv->num_kv_heads);
  CLPA_CTX_CHECK(ctx, p->q_dtype != CLPA_DTYPE_F32 && p->q_dtype != CLPA_DTYPE_F16 &&
                          p->q_dtype != CLPA_DTYPE_BF16,
                 CLPA_ERR_UNSUPPORTED, "q_dtype = %s (the query must be f32, f16 or bf16)",
                 clpa_dtype_name(p->q_dtype));
  CLPA_CTX_CHECK(ctx, !(p->k_scale > 0 && isfinite(p->k_scale)), CLPA_ERR_INVALID_ARG,
                 "k_scale = %g (must be finite and > 0)", (double)p->k_scale);
  CLPA_CTX_CHECK(ctx, p->stride != 4 && p->stride != 8 && p->stride != 16, CLPA_ERR_INVALID_ARG,
                 "stride = %d (4, 8 or 16)", p->stride);
  CLPA_CTX_CHECK(ctx, p->block <= 0 || p->block % p->stride != 0, CLPA_ERR_INVALID_ARG,
                 "block = %d is not a positive multiple of stride = %d", p->block, p->stride);
  CLPA_CTX_CHECK(ctx, p->chunk < 0 || p->chunk % p->block != 0, CLPA_ERR_INVALID_ARG,
                 "chunk = %d is not 0 (one chunk) or a positive multiple of block = %d",
                 p->chunk, p->block);
  CLPA_CTX_CHECK(ctx, !(p->tau > 0 && p->tau <= 1), CLPA_ERR_INVALID_ARG,
                 "tau = %g (must be in (0, 1])", p->tau);
  CLPA_CTX_CHECK(ctx, p->num_q <= 0, CLPA_ERR_INVALID_ARG, "num_q = %d must be > 0", p->num_q);
  CLPA_CTX_CHECK(ctx, p->q_offset < 0 || p->q_offset % p->block != 0, CLPA_ERR_INVALID_ARG,
                 "q_offset = %d is not a non-negative multiple of block = %d", p->q_offset,
                 p->block);
  CLPA_CTX_CHECK(ctx, p->max_blocks_per_seq <= 0, CLPA_ERR_INVALID_ARG,
                 "max_blocks_per_seq = %d", p->max_blocks_per_seq);
  const int64_t num_k = (int64_t)p->q_offset + p->num_q;
  CLPA_CTX_CHECK(ctx, num_k > (int64_t)p->max_blocks_per_seq * kv->block_size,
                 CLPA_ERR_INVALID_ARG,
                 "q_offset + num_q = %d + %d keys exceed the block table (max_blocks_per_seq ="
                 " %d x %d tokens)", p->q_offset, p->num_q, p->max_blocks_per_seq,
                 kv->block_size);
  CLPA_CTX_CHECK(ctx, num_k > CLPA_MAX_CONTEXT_LEN, CLPA_ERR_UNSUPPORTED,
                 "q_offset + num_q = %d + %d keys are past CLPA_MAX_CONTEXT_LEN = %d", p->q_offset,
                 p->num_q, CLPA_MAX_CONTEXT_LEN);
  /* Whole strided groups: the last of the queries and of the keys is
   * zero-padded (the kernels mask the tokens past num_q and num_k). */
  x->cols = (int32_t)((num_k + p->stride - 1) / p->stride);
  const int32_t cols = x->cols;
  x->rows = (p->num_q + p->stride - 1) / p->stride;
  x->row0 = p->q_offset / p->stride;
  x->bs = p->block / p->stride;
  x->q_blocks = (x->rows + x->bs - 1) / x->bs;
  x->k_blocks = (int32_t)((cols + (int64_t)x->bs - 1) / x->bs);
  x->diag0 = p->q_offset / p->block;
  x->chunk_cols = p->chunk ? p->chunk / p->stride : cols;
  x->num_chunks = (int32_t)((cols + (int64_t)x->chunk_cols - 1) / x->chunk_cols);
  size_t bytes;
  CLPA_CTX_CHECK(ctx, !clpa_size_mul_add((size_t)p->num_heads, (size_t)x->q_blocks, 0, &x->blocks) ||
                          !clpa_size_mul_add(x->blocks, (size_t)x->k_blocks, 0, &x->blocks) ||
                          !clpa_size_mul_add(x->blocks, sizeof(float), 0, &bytes) ||
                          !clpa_size_mul_add((size_t)p->num_heads, (size_t)x->num_chunks, 0,
                                             &x->stats) ||
                          !clpa_size_mul_add(x->stats, (size_t)x->rows, 0, &x->stats) ||
                          !clpa_size_mul_add(x->stats, sizeof(float), 0, &bytes),
                 CLPA_ERR_INVALID_ARG,
                 "num_heads = %d with %d x %d blocks and %d chunks of %d rows: the sizes overflow"
                 " size_t", p->num_heads, x->q_blocks, x->k_blocks, x->num_chunks, x->rows);
  return clpa_check_wait_list(ctx, p->num_wait_events, p->wait_events);
}

/* Every buffer against what the shapes need (planning: those given). */
static clpa_status check_buffers(clpa_context *ctx, const clpa_xattn_params *p, xattn_plan *x,
                                 int planning) {
  const clpa_kv_layout *kv = &x->kv;
  const size_t row = (size_t)p->num_heads * (size_t)kv->head_size;
  CLPA_CTX_CHECK(ctx, p->q_stride != 0 && p->q_stride < row, CLPA_ERR_INVALID_ARG,
                 "q_stride = %zu is less than num_heads * head_size = %zu", p->q_stride, row);
  x->q_stride = p->q_stride ? p->q_stride : row;
  CLPA_CTX_CHECK(ctx, kv->cache_bytes > SIZE_MAX, CLPA_ERR_INVALID_ARG,
                 "kv: %llu bytes of cache do not fit in size_t", (unsigned long long)kv->cache_bytes);
  size_t need_q = 0;
  CLPA_CTX_CHECK(ctx, !clpa_size_mul_add((size_t)p->num_q - 1, x->q_stride, row, &need_q) ||
                          !clpa_size_mul_add(need_q, clpa_dtype_size(p->q_dtype), 0, &need_q),
                 CLPA_ERR_INVALID_ARG,
                 "q_stride = %zu with %d query tokens: the query's size overflows size_t",
                 x->q_stride, p->num_q);
  CLPA_CTX_CHECK(ctx, p->mass && p->mass == p->mask, CLPA_ERR_INVALID_ARG,
                 "mass and mask must be different buffers");
  clpa_status st;
  if ((st = clpa_check_buffer(ctx, x->k, "key_cache", (size_t)kv->cache_bytes, planning)) ||
      (st = clpa_check_buffer(ctx, p->query, "query", need_q, planning)) ||
      (st = clpa_check_buffer(ctx, p->block_table, "block_table",
                              (size_t)p->max_blocks_per_seq * 4, planning)) ||
      (st = clpa_check_buffer(ctx, p->mask, "mask", x->blocks, planning)) ||
      (st = clpa_check_buffer(ctx, p->mass, "mass", x->blocks * sizeof(float), 1)))
    return st;
  return CLPA_OK;
}

/* Strided rows per work-item of the stats kernel (cl/xattn.cl's XROWS). */
#define XROWS 8

/* The tensor-core stats kernel's shape (cl/xattn_mma.cl): 4 warps, 64
 * strided rows, tiles of 64 columns, steps of 64 k indices, two of them
 * in local memory (fewer where a tile has fewer steps). */
#define MMA_THREADS 128
#define MMA_ROWS 64
#define MMA_COLS 64
#define MMA_KC 64
#define MMA_STAGES 2
/* Key chunks on the mma path: the columns in about this many (the
 * caller's chunks where smaller), whole tiles and key blocks: a row
 * tile's chunks run side by side and read its queries from L2
 * (docs/decisions/0026-xattn-mma-key-chunks.md). */
#define MMA_CHUNKS 8

/* (xattn_mma.cl copies 16-byte key rows of successive tokens: the
 * split-key layout only) */
static int mma_applies(const xattn_plan *x) {
  return x->kv.kind == CLPA_KV_LAYOUT_SPLIT_KEY &&
         (x->kv.dtype == CLPA_DTYPE_F16 || x->kv.dtype == CLPA_DTYPE_BF16) &&
         x->kv.head_size % 32 == 0 && x->kv.block_size % 2 == 0 && x->bs % 8 == 0 &&
         (MMA_COLS % x->bs == 0 || x->bs % MMA_COLS == 0);
}

/* Steps a tile: S D / KC; the stages, at most that many. */
static int mma_stages(int stride, int head_size) {
  const int steps = stride * head_size / MMA_KC;
  return steps < MMA_STAGES ? steps : MMA_STAGES;
}

/* The stages of query rows and key columns (padded by 16 bytes), the
 * column flags, mma.cl's scratch when emulated. */
static size_t mma_local_bytes(int stages, int emulated) {
  const size_t row = 4 * (MMA_KC / 2 + 4);
  return (size_t)stages * (MMA_ROWS + MMA_COLS) * row + 2 * MMA_COLS * sizeof(int) +
         4 * (emulated ? MMA_THREADS * 6 : 1);
}

/* *mma = 1 where phase 1 runs on tensor cores: forced, or auto on NVIDIA
 * where it applies; a forced path that cannot run is refused. */
static clpa_status pick_path(clpa_context *ctx, const clpa_xattn_params *p, const xattn_plan *x,
                             int *mma) {
  CLPA_CTX_CHECK(ctx, (unsigned)p->path > CLPA_XATTN_MMA, CLPA_ERR_INVALID_ARG,
                 "path = %d (0 auto, 1 f32, 2 mma)", (int)p->path);
  const int emulated = ctx->lanes != CLPA_LANES_NV_PTX;
  const size_t lbytes = mma_local_bytes(mma_stages(p->stride, x->kv.head_size), emulated);
  const int fits = lbytes <= ctx->info.local_mem_bytes;
  if (p->path != CLPA_XATTN_MMA) {
    *mma = p->path == CLPA_XATTN_AUTO && clpa_mma_native(ctx) == 1 && mma_applies(x) && fits;
    return CLPA_OK;
  }
  CLPA_CTX_CHECK(ctx, x->kv.kind != CLPA_KV_LAYOUT_SPLIT_KEY, CLPA_ERR_UNSUPPORTED,
                 "path mma reads the split-key cache layout only, and the key cache is %s (path"
                 " f32 reads every layout; path auto picks it)",
                 clpa_kv_layout_kind_name(x->kv.kind));
  CLPA_CTX_CHECK(ctx, x->kv.block_size % 2 != 0, CLPA_ERR_UNSUPPORTED,
                 "path mma takes cache blocks of an even number of tokens, and block_size is %d"
                 " (path f32 takes every size; path auto picks it)", x->kv.block_size);
  CLPA_CTX_CHECK(ctx, !mma_applies(x), CLPA_ERR_UNSUPPORTED,
                 "path mma needs an f16 or bf16 cache, a head size that is a multiple of 32 and"
                 " block / stride a multiple of 8 that divides %d or that %d divides (cache %s,"
                 " head_size %d, block / stride %d)", MMA_COLS, MMA_COLS,
                 clpa_dtype_name(x->kv.dtype), x->kv.head_size, x->bs);
  clpa_status st = clpa_mma_check(ctx);
  if (st != CLPA_OK) return st;
  CLPA_CTX_CHECK(ctx, !fits, CLPA_ERR_UNSUPPORTED,
                 "path mma needs %zu bytes of local memory (the device has %llu)", lbytes,
                 (unsigned long long)ctx->info.local_mem_bytes);
  *mma = 1;
  return CLPA_OK;
}

/* The pieces phases 1 and 3 run in: heads_per heads and rows_per rows
 * (whole query blocks) at a time, so that their per-(row, key block)
 * states fit the scratch limit (at least one query block of one head). */
static void plan_pieces(const clpa_context *ctx, const clpa_xattn_params *p, const xattn_plan *x,
                        int32_t *heads_per, int32_t *rows_per) {
  size_t limit = p->scratch_limit;
  if (limit == 0) {
    limit = (size_t)256 << 20;
    if (ctx->info.max_alloc_bytes / 4 < limit) limit = (size_t)(ctx->info.max_alloc_bytes / 4);
  }
  const size_t per_row = (size_t)x->k_blocks * 2 * sizeof(float);
  const size_t per_head = per_row * (size_t)x->rows;
  if (per_head <= limit) {
    const size_t h = limit / per_head;
    *heads_per = h < (size_t)p->num_heads ? (int32_t)h : p->num_heads;
    *rows_per = x->rows;
  } else {
    const size_t blocks = limit / per_row / (size_t)x->bs;
    *heads_per = 1;
    *rows_per = blocks > 1 ? (int32_t)blocks * x->bs : x->bs; /* < rows here */
  }
}

/* Enqueues the kernels ks (stats and mass per piece, then select) in
 * order; the in-order queue makes each wait for the one before. */
static clpa_status enqueue_all(clpa_context *ctx, const clpa_xattn_params *p, const xattn_plan *x,
                               cl_kernel *ks, int mma, cl_mem faults, cl_mem sm, cl_mem sl,
                               cl_mem bst, cl_mem mass, int32_t heads_per, int32_t rows_per) {
  clpa_status st;
  const cl_ulong q_stride = x->q_stride, block_stride = x->kv.block_stride;
  const cl_ulong head_stride = x->kv.head_stride;
  const cl_int nb = x->kv.num_blocks, nkv = x->kv.num_kv_heads, qpk = p->num_heads / nkv;
  const cl_int S = p->stride, num_q = p->num_q;
  const cl_int rows = x->rows, row0 = x->row0, cc = x->chunk_cols, nch = x->num_chunks;
  const cl_int bs = x->bs, diag0 = x->diag0, kbl = x->k_blocks, qbl = x->q_blocks;
  const cl_int keep_all = p->tau >= 1.0;
  /* the mma kernel copies 16-byte query chunks as they are where they are
   * the cache's dtype and aligned */
  const cl_int q_direct = p->q_dtype == x->kv.dtype && x->q_stride % 8 == 0;
  /* fp8 caches store key / k_scale; the other dtypes ignore the scale. */
  const double kscale = clpa_dtype_size(x->kv.dtype) == 1 ? p->k_scale : 1.0;
  const cl_float scale = (cl_float)(kscale / (sqrt((double)x->kv.head_size) * p->stride));
  const cl_float tau = (cl_float)p->tau;
  int first = 1;
  for (cl_int head0 = 0; head0 < p->num_heads; head0 += heads_per)
    for (cl_int rbase = 0; rbase < rows; rbase += rows_per) {
      const cl_int rend = rows - rbase < rows_per ? rows : rbase + rows_per;
      const size_t hn = (size_t)(p->num_heads - head0 < heads_per ? p->num_heads - head0 : heads_per);
#define A(name, v) [XATTN_STATS_ARG_##name] = CLPA_ARG(v)
      const clpa_arg a1[XATTN_STATS_NUM_ARGS] = {
          A(stat_m, sm), A(stat_l, sl), A(bstat, bst), A(q, p->query), A(q_stride, q_stride),
          A(k_cache, x->k), A(block_stride, block_stride), A(head_stride, head_stride),
          A(table, p->block_table), A(num_blocks, nb), A(num_kv_heads, nkv), A(qpk, qpk),
          A(stride, S), A(scale, scale), A(num_q, num_q), A(rows, rows), A(row0, row0),
          A(chunk_cols, cc), A(bs, bs), A(k_blocks, kbl), A(head0, head0), A(rbase, rbase),
          A(rend, rend), A(faults, faults)};
#undef A
      const clpa_ndrange r1 = {3,
                               {(size_t)(rend - rbase + XROWS - 1) / XROWS, hn,
                                (size_t)x->num_chunks},
                               {0, 0, 0},
                               first ? p->num_wait_events : 0,
                               first ? p->wait_events : NULL,
                               NULL};
      /* the mma kernel: chunk, head, row tile (the kernel takes them from the last):
       * work-groups of one row tile's chunks run together and share its queries in L2 */
#define A(name, v) [XATTN_STATS_MMA_ARG_##name] = CLPA_ARG(v)
      const clpa_arg a1m[XATTN_STATS_MMA_NUM_ARGS] = {
          A(stat_m, sm), A(stat_l, sl), A(bstat, bst), A(q, p->query), A(q_stride, q_stride),
          A(q_direct, q_direct), A(k_cache, x->k), A(block_stride, block_stride),
          A(head_stride, head_stride), A(table, p->block_table), A(num_blocks, nb), A(qpk, qpk),
          A(scale, scale), A(num_q, num_q), A(rows, rows), A(row0, row0), A(chunk_cols, cc),
          A(k_blocks, kbl), A(head0, head0), A(rbase, rbase), A(rend, rend), A(faults, faults)};
#undef A
      const clpa_ndrange r1m = {3,
                                {(size_t)x->num_chunks * MMA_THREADS, hn,
                                 (size_t)(rend - rbase + MMA_ROWS - 1) / MMA_ROWS},
                                {MMA_THREADS, 1, 1},
                                r1.num_wait_events,
                                r1.wait_events,
                                NULL};
#define A(name, v) [XATTN_MERGE_ARG_##name] = CLPA_ARG(v)
      const clpa_arg am[XATTN_MERGE_NUM_ARGS] = {A(stat_m, sm),     A(stat_l, sl),
                                                 A(num_chunks, nch), A(rows, rows),
                                                 A(head0, head0),    A(rbase, rbase)};
#undef A
      const clpa_ndrange rm = {2, {(size_t)(rend - rbase), hn}, {0, 0}, 0, NULL, NULL};
#define A(name, v) [XATTN_MASS_ARG_##name] = CLPA_ARG(v)
      const clpa_arg a2[XATTN_MASS_NUM_ARGS] = {
          A(mass, mass),   A(stat_m, sm),    A(stat_l, sl),   A(num_chunks, nch),
          A(bstat, bst),   A(rows, rows),    A(row0, row0),   A(bs, bs),
          A(diag0, diag0), A(q_blocks, qbl), A(head0, head0), A(rbase, rbase),
          A(rend, rend)};
#undef A
      const clpa_ndrange r2 = {3,
                               {(size_t)x->k_blocks, (size_t)((rend - rbase + bs - 1) / bs), hn},
                               {0, 0, 0},
                               0,
                               NULL,
                               NULL};
      first = 0;
      if ((st = mma ? clpa_enqueue_listed(ctx, ks[0], "clpa_xattn_stats_mma", stats_mma_params,
                                          a1m, XATTN_STATS_MMA_NUM_ARGS, &r1m)
                    : clpa_enqueue_listed(ctx, ks[0], "clpa_xattn_stats", stats_params, a1,
                                          XATTN_STATS_NUM_ARGS, &r1)) ||
          (st = clpa_enqueue_listed(ctx, ks[3], "clpa_xattn_merge", merge_params, am,
                                    XATTN_MERGE_NUM_ARGS, &rm)) ||
          (st = clpa_enqueue_listed(ctx, ks[1], "clpa_xattn_mass", mass_params, a2,
                                    XATTN_MASS_NUM_ARGS, &r2)))
        return st;
    }
#define A(name, v) [XATTN_SELECT_ARG_##name] = CLPA_ARG(v)
  const clpa_arg a3[XATTN_SELECT_NUM_ARGS] = {A(mask, p->mask), A(mass, mass), A(k_blocks, kbl),
                                              A(diag0, diag0),  A(tau, tau),
                                              A(keep_all, keep_all)};
#undef A
  const clpa_ndrange r3 = {2,
                           {(size_t)x->q_blocks * XSEL_THREADS, (size_t)p->num_heads},
                           {XSEL_THREADS, 1},
                           0,
                           NULL,
                           p->event};
  return clpa_enqueue_listed(ctx, ks[2], "clpa_xattn_select", select_params, a3,
                             XATTN_SELECT_NUM_ARGS, &r3);
}

/* The mma path's chunks: the columns in MMA_CHUNKS, rounded up to whole
 * tiles and key blocks (mma_applies: bs divides the tile or the tile bs),
 * unless the caller's are smaller. */
static clpa_status mma_chunks(clpa_context *ctx, const clpa_xattn_params *p, xattn_plan *x) {
  const int64_t cols = x->cols;
  const int64_t unit = x->bs > MMA_COLS ? x->bs : MMA_COLS;
  const int64_t want = (cols + MMA_CHUNKS - 1) / MMA_CHUNKS;
  const int32_t cap = (int32_t)((want + unit - 1) / unit * unit);
  if (x->chunk_cols <= cap) return CLPA_OK;
  x->chunk_cols = cap;
  x->num_chunks = (int32_t)((cols + cap - 1) / cap);
  size_t bytes;
  CLPA_CTX_CHECK(ctx, !clpa_size_mul_add((size_t)p->num_heads, (size_t)x->num_chunks, 0,
                                         &x->stats) ||
                          !clpa_size_mul_add(x->stats, (size_t)x->rows, 0, &x->stats) ||
                          !clpa_size_mul_add(x->stats, sizeof(float), 0, &bytes),
                 CLPA_ERR_INVALID_ARG, "num_heads = %d with %d chunks of %d rows: the sizes"
                 " overflow size_t", p->num_heads, x->num_chunks, x->rows);
  return CLPA_OK;
}

static const char *const kernel_names[4] = {"clpa_xattn_stats", "clpa_xattn_mass",
                                             "clpa_xattn_select", "clpa_xattn_merge"};

/* The path's four kernels into ks (NULLs first; on failure the caller
 * releases what it got). */
static clpa_status make_kernels(clpa_context *ctx, const clpa_xattn_params *p, const xattn_plan *x,
                                int mma, cl_kernel ks[4]) {
  const clpa_xattn_spec spec = {x->kv.head_size, x->kv.block_size, (int32_t)x->kv.dtype,
                                (int32_t)p->q_dtype, 0, 0, 0, 0, 0, 0, 0, (int32_t)x->kv.kind};
  const clpa_xattn_spec spec_mma = {x->kv.head_size, x->kv.block_size, (int32_t)x->kv.dtype,
                                    (int32_t)p->q_dtype, MMA_THREADS, p->stride, x->bs,
                                    MMA_ROWS, MMA_COLS, MMA_KC,
                                    mma_stages(p->stride, x->kv.head_size), (int32_t)x->kv.kind};
  clpa_status st = mma ? clpa_family_kernel(ctx, &clpa_family_xattn_mma, &spec_mma,
                                            "clpa_xattn_stats_mma", &ks[0])
                       : clpa_family_kernel(ctx, &clpa_family_xattn, &spec, kernel_names[0], &ks[0]);
  for (int i = 1; i < 4 && st == CLPA_OK; i++)
    st = clpa_family_kernel(ctx, &clpa_family_xattn, &spec, kernel_names[i], &ks[i]);
  return st;
}

static void release_kernels(cl_kernel ks[4]) {
  for (int i = 0; i < 4; i++)
    if (ks[i]) clReleaseKernel(ks[i]), ks[i] = NULL;
}

/* The scratch, then the kernels ks in order. Everything that can fail
 * short of an enqueue comes first: nothing is left half done. */
static clpa_status enqueue(clpa_context *ctx, const clpa_xattn_params *p, const xattn_plan *x,
                           int mma, cl_kernel ks[4]) {
  cl_mem faults, sm, sl, bst, mass = p->mass;
  clpa_status st = clpa_faults_buffer(ctx, &faults);
  if (st == CLPA_OK) st = clpa_scratch(ctx, 0, x->stats * sizeof(float), &sm);
  if (st == CLPA_OK) st = clpa_scratch(ctx, 1, x->stats * sizeof(float), &sl);
  if (st == CLPA_OK && !mass) st = clpa_scratch(ctx, 2, x->blocks * sizeof(float), &mass);
  int32_t heads_per = 0, rows_per = 0;
  plan_pieces(ctx, p, x, &heads_per, &rows_per);
  const size_t piece = (size_t)heads_per * (size_t)rows_per * (size_t)x->k_blocks;
  if (st == CLPA_OK) st = clpa_scratch(ctx, 3, piece * 2 * sizeof(float), &bst);
  if (st == CLPA_OK)
    st = enqueue_all(ctx, p, x, ks, mma, faults, sm, sl, bst, mass, heads_per, rows_per);
  return st;
}

static clpa_status launch(clpa_context *ctx, const clpa_xattn_params *p, const xattn_plan *xp,
                          int mma) {
  xattn_plan plan = *xp, *x = &plan;
  if (mma) {
    const clpa_status st = mma_chunks(ctx, p, x);
    if (st != CLPA_OK) return st;
  }
  cl_kernel ks[4] = {NULL, NULL, NULL, NULL};
  clpa_status st = make_kernels(ctx, p, x, mma, ks);
  if (st == CLPA_OK) st = enqueue(ctx, p, x, mma, ks);
  release_kernels(ks);
  return st;
}

/* Every check, then the path. */
static clpa_status plan(clpa_context *ctx, const clpa_xattn_params *p, xattn_plan *x, int *mma) {
  CLPA_CHECK(NULL, !ctx, CLPA_ERR_INVALID_ARG, "ctx must not be NULL");
  CLPA_CTX_CHECK(ctx, !p, CLPA_ERR_INVALID_ARG, "p must not be NULL");
  memset(x, 0, sizeof *x);
  CLPA_CHECK_RESERVED(ctx->error, p, "p->");
  clpa_status st;
  if ((st = resolve_cache(ctx, p, x, 0)) || (st = check_shape(ctx, p, x)) ||
      (st = check_buffers(ctx, p, x, 0)))
    return st;
  return pick_path(ctx, p, x, mma);
}

static clpa_status clpa_xattn_estimate_impl(clpa_context *ctx, const clpa_xattn_params *p) {
  xattn_plan x;
  int mma = 0;
  const clpa_status st = plan(ctx, p, &x, &mma);
  return st != CLPA_OK ? st : launch(ctx, p, &x, mma);
}

clpa_status clpa_xattn_estimate(clpa_context *ctx, const clpa_xattn_params *p) {
  CLPA_API_CALL(clpa_xattn_estimate_impl(ctx, p));
}

static clpa_status clpa_xattn_choice_impl(clpa_context *ctx, const clpa_xattn_params *p,
                                          clpa_xattn_path *path) {
  xattn_plan x;
  int mma = 0;
  const clpa_status st = plan(ctx, p, &x, &mma);
  if (st == CLPA_OK && path) *path = mma ? CLPA_XATTN_MMA : CLPA_XATTN_F32;
  return st;
}

clpa_status clpa_xattn_choice(clpa_context *ctx, const clpa_xattn_params *p,
                              clpa_xattn_path *path) {
  CLPA_API_CALL(clpa_xattn_choice_impl(ctx, p, path));
}

/* ----------------------------------------------------------------------
 * Plans: clpa_plan_xattn checks p and picks the path and the kernels
 * once; each clpa_run checks that run's buffers and enqueues.
 * -------------------------------------------------------------------- */
struct xattn_state {
  clpa_xattn_params p; /* the plan's params, their buffers and events cleared */
  int mma;
  cl_kernel ks[4];
};

static void state_free(struct xattn_state *s) {
  release_kernels(s->ks);
  free(s);
}

clpa_status clpa_xattn_plan_fill(clpa_context *ctx, const clpa_xattn_params *p, clpa_plan *pl) {
  clpa_status st = clpa_plan_begin(ctx, p, PLAN_XATTN, pl);
  if (st != CLPA_OK) return st;
  CLPA_CHECK_RESERVED(ctx->error, p, "p->");
  struct xattn_state *s = calloc(1, sizeof *s);
  if (!s) return CLPA_FAIL(ctx->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory for a plan");
  pl->xattn = s, pl->xattn_free = state_free;
  xattn_plan x;
  memset(&x, 0, sizeof x);
  if ((st = resolve_cache(ctx, p, &x, 1)) || (st = check_shape(ctx, p, &x)) ||
      (st = check_buffers(ctx, p, &x, 1)) || (st = pick_path(ctx, p, &x, &s->mma)) ||
      (s->mma && (st = mma_chunks(ctx, p, &x))) ||
      (st = make_kernels(ctx, p, &x, s->mma, s->ks))) {
    clpa_plan_fini(pl);
    return st;
  }
  pl->kv = x.kv;
  s->p = *p;
  s->p.cache = NULL, s->p.key_cache = NULL, s->p.query = NULL, s->p.block_table = NULL;
  s->p.mask = NULL, s->p.mass = NULL;
  s->p.num_wait_events = 0, s->p.wait_events = NULL, s->p.event = NULL;
  return CLPA_OK;
}

clpa_status clpa_xattn_run(clpa_plan *pl, const clpa_attn_inputs *in) {
  clpa_context *ctx = pl->ctx;
  const struct xattn_state *s = pl->xattn;
  clpa_xattn_params q = s->p;
  q.cache = in->cache, q.layer = in->layer, q.key_cache = in->key_cache, q.kv = pl->kv;
  q.k_scale = in->k_scale, q.query = in->query, q.block_table = in->block_tables;
  q.mask = in->block_mask, q.mass = in->mass;
  q.num_wait_events = in->num_wait_events, q.wait_events = in->wait_events, q.event = in->event;
  CLPA_CTX_CHECK(ctx, in->value_cache || in->out || in->lse || in->context_lens ||
                          in->k_scale_buffer || in->v_scale_buffer || in->alibi_slopes || in->sinks ||
                          in->page_indptr || in->page_indices || in->last_page_len ||
                          in->num_page_indices,
                 CLPA_ERR_INVALID_ARG,
                 "an XAttention plan reads the key cache, query, block_tables and k_scale and"
                 " writes block_mask (and mass); its run refuses the other buffers");
  CLPA_CTX_CHECK(ctx, !in->block_mask || !in->block_tables || !in->query, CLPA_ERR_INVALID_ARG,
                 "an XAttention run needs in->query, in->block_tables (the sequence's table) and"
                 " in->block_mask (the mask it writes)");
  xattn_plan x;
  memset(&x, 0, sizeof x);
  clpa_status st;
  if ((st = resolve_cache(ctx, &q, &x, 0)) || (st = clpa_plan_same_shape(pl, &x.kv)) ||
      (st = check_shape(ctx, &q, &x)) || (st = check_buffers(ctx, &q, &x, 0)) ||
      (s->mma && (st = mma_chunks(ctx, &q, &x))))
    return st;
  cl_kernel ks[4] = {s->ks[0], s->ks[1], s->ks[2], s->ks[3]};
  return enqueue(ctx, &q, &x, s->mma, ks);
}
