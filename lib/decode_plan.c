/*
 * decode_plan.c — clpa_decode's plan (decode_plan.h): the checks of
 * decode's own fields, then the planner (host/decode_planner.c: which
 * kernel, v1 or v2, how long a partition, how many query heads and warps
 * a work-group) on the call's shape, the context's device facts and its
 * tuning row; its plan becomes the call's.
 */

#include "decode_plan.h"
#include "size_math.h"

clpa_status clpa_decode_validate(clpa_context *ctx, const clpa_decode_params *p,
                                 const clpa_kv_layout *kv) {
  CLPA_CTX_CHECK(ctx, p->num_seqs < 0, CLPA_ERR_INVALID_ARG, "num_seqs = %d", p->num_seqs);
  CLPA_CTX_CHECK(ctx, p->max_context_len < 0, CLPA_ERR_INVALID_ARG,
                 "max_context_len = %d (must be >= 0)", p->max_context_len);
  /* A CSR table's lengths come from the table (FlashInfer's): the kernels
   * check them against max_context_len. */
  CLPA_CTX_CHECK(ctx, p->page_table == CLPA_PAGE_TABLE_CSR && p->context_lens, CLPA_ERR_INVALID_ARG,
                 "context_lens is given with page_table = CLPA_PAGE_TABLE_CSR (the lengths come"
                 " from page_indptr and last_page_len): leave it NULL");
  CLPA_CTX_CHECK(ctx, p->page_table == CLPA_PAGE_TABLE_PADDED &&
                          (int64_t)p->max_context_len > (int64_t)p->max_blocks_per_seq * kv->block_size,
                 CLPA_ERR_INVALID_ARG,
                 "max_context_len = %d exceeds the table's capacity %d blocks x %d tokens",
                 p->max_context_len, p->max_blocks_per_seq, kv->block_size);
  CLPA_CTX_CHECK(ctx, p->max_context_len > CLPA_MAX_CONTEXT_LEN, CLPA_ERR_UNSUPPORTED,
                 "max_context_len = %d is past CLPA_MAX_CONTEXT_LEN = %d tokens",
                 p->max_context_len, CLPA_MAX_CONTEXT_LEN);
  CLPA_CTX_CHECK(ctx, (unsigned)p->variant > CLPA_DECODE_V2, CLPA_ERR_INVALID_ARG,
                 "variant = %d", (int)p->variant);
  CLPA_CTX_CHECK(ctx, p->partition_size < 0 || p->partition_size % kv->block_size != 0,
                 CLPA_ERR_INVALID_ARG, "partition_size = %d is not a multiple of block_size = %d",
                 p->partition_size, kv->block_size);
  CLPA_CTX_CHECK(ctx, p->partition_size > CLPA_MAX_CONTEXT_LEN, CLPA_ERR_UNSUPPORTED,
                 "partition_size = %d is past CLPA_MAX_CONTEXT_LEN = %d tokens", p->partition_size,
                 CLPA_MAX_CONTEXT_LEN);
  const int qpk = p->num_heads / kv->num_kv_heads;
  CLPA_CTX_CHECK(ctx, p->heads_per_group < 0 || (p->heads_per_group > 0 && qpk % p->heads_per_group),
                 CLPA_ERR_INVALID_ARG,
                 "heads_per_group = %d does not divide num_heads / num_kv_heads = %d",
                 p->heads_per_group, qpk);
  CLPA_CTX_CHECK(ctx, p->heads_per_group > 16, CLPA_ERR_UNSUPPORTED,
                 "heads_per_group = %d (at most 16)", p->heads_per_group);
  for (int32_t i = 0; p->host_context_lens && i < p->num_seqs; i++)
    CLPA_CTX_CHECK(ctx, p->host_context_lens[i] < 0 || p->host_context_lens[i] > p->max_context_len,
                   CLPA_ERR_INVALID_ARG, "host_context_lens[%d] = %d is outside [0, max_context_len = %d]",
                   i, p->host_context_lens[i], p->max_context_len);
  return CLPA_OK;
}

/* The planner's inputs agree with the public enums and the lanes kernel. */
_Static_assert(CLPA_PLANNER_LANES_THREADS == DECODE_THREADS, "the lanes kernel's work-group");
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(CLPA_DECODE_PATH_AUTO, CLPA_PLANNER_AUTO) &&
                   SAME(CLPA_DECODE_PATH_LANES, CLPA_PLANNER_LANES) &&
                   SAME(CLPA_DECODE_PATH_MMA, CLPA_PLANNER_MMA) &&
                   SAME(CLPA_DECODE_PATH_ROWS, CLPA_PLANNER_ROWS),
               "clpa_decode_path");
_Static_assert(SAME(CLPA_DECODE_V1, CLPA_PLANNER_V1) && SAME(CLPA_DECODE_V2, CLPA_PLANNER_V2),
               "clpa_decode_variant");
_Static_assert(SAME(CLPA_PRECISION_F32, CLPA_PLANNER_PRECISION_F32), "clpa_precision");
#undef SAME

/* The planner's shape of a call. */
static clpa_decode_shape shape_of(const clpa_context *ctx, const clpa_decode_params *p,
                                  const decode_call *c) {
  const clpa_kv_layout *kv = &c->a.kv;
  const clpa_decode_shape s = {p->num_seqs,          p->num_heads,         kv->num_kv_heads,
                               kv->head_size,        kv->block_size,       kv->dtype,
                               p->max_context_len,   p->host_context_lens, (int32_t)p->path,
                               (int32_t)p->variant,  (int32_t)p->precision, p->partition_size,
                               p->heads_per_group,   kv->kind,
                               p->sliding_window,    ctx->decode_work_list};
  return s;
}

void clpa_decode_plan_list(const clpa_context *ctx, const clpa_decode_params *p,
                           const decode_call *c, int32_t *out) {
  const clpa_decode_shape s = shape_of(ctx, p, c);
  clpa_decode_decision d = {0};
  d.v2 = c->v2, d.partition = c->partition, d.chunk = c->chunk, d.work_pairs = c->work_pairs;
  clpa_decode_work_list(&s, &d, out);
}

clpa_status clpa_decode_plan(clpa_context *ctx, const clpa_decode_params *p, decode_call *c) {
  const clpa_decode_shape s = shape_of(ctx, p, c);
  clpa_device_facts dev;
  clpa_device_facts_of(ctx, &dev);
  clpa_decode_decision d;
  const clpa_status st = clpa_decode_planner(&s, &dev, &ctx->decode_tuning, &d, ctx->error);
  if (st != CLPA_OK) return st;
  c->mma = d.path == CLPA_PLANNER_MMA, c->rows = d.path == CLPA_PLANNER_ROWS;
  c->v2 = d.v2, c->partition = d.partition, c->heads_per_group = d.heads_per_group;
  c->sg = d.sg, c->max_parts = d.max_parts, c->key_vectors = d.key_vectors;
  c->logits_stride = d.logits_stride, c->threads = d.threads, c->chunk = d.chunk;
  c->pipe = d.pipe, c->maxnreg = d.maxnreg, c->work_pairs = d.work_pairs;
  c->list_entries = d.list_entries, c->list_want = d.list_want;
  /* v2's partials (decode.c's decode_v2): f32 [num_seqs, num_heads, max_parts, head_size] */
  size_t bytes = 0;
  const size_t seqs = (size_t)p->num_seqs, row = (size_t)c->a.kv.head_size * sizeof(float);
  c->partials = 0;
  CLPA_CTX_CHECK(ctx, c->v2 && (!clpa_size_mul_add(seqs, (size_t)p->num_heads, 0, &bytes) ||
                                !clpa_size_mul_add(bytes, (size_t)c->max_parts, 0, &c->partials) ||
                                !clpa_size_mul_add(c->partials, row, 0, &bytes)),
                 CLPA_ERR_UNSUPPORTED,
                 "v2 with %d sequences x %d heads x %d partitions of %d tokens: its partial"
                 " outputs' size overflows size_t (a longer partition_size)", p->num_seqs,
                 p->num_heads, c->max_parts, c->partition);
  return CLPA_OK;
}
