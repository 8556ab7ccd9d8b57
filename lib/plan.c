/*
 * plan.c — plans (clpa.h section 8): made on the heap by clpa_plan_decode,
 * clpa_plan_prefill and clpa_plan_cascade, run by clpa_run, described and
 * released; and what every kind's run shares (the caches against the
 * plan's shape, the empty run).
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

void clpa_attn_inputs_init(clpa_attn_inputs *in) {
  if (!in) return;
  memset(in, 0, sizeof *in);
  in->k_scale = in->v_scale = 1.0f;
}

clpa_status clpa_plan_begin(clpa_context *ctx, const void *p, plan_kind kind, clpa_plan *pl) {
  memset(pl, 0, sizeof *pl);
  CLPA_CHECK(NULL, !ctx, CLPA_ERR_INVALID_ARG, "ctx must not be NULL");
  CLPA_CTX_CHECK(ctx, !p, CLPA_ERR_INVALID_ARG, "p must not be NULL");
  pl->ctx = ctx, pl->kind = kind;
  return CLPA_OK;
}

void clpa_plan_fini(clpa_plan *pl) {
  if (!pl) return;
  if (pl->dk) clReleaseKernel(pl->dk);
  if (pl->reduce) clReleaseKernel(pl->reduce);
  if (pl->pk) clReleaseKernel(pl->pk);
  if (pl->split) clReleaseKernel(pl->split);
  if (pl->owns_lists) {
    if (pl->info) clReleaseMemObject(pl->info);
    if (pl->work) clReleaseMemObject(pl->work);
  }
  for (size_t i = 0; i < sizeof pl->cascade_bufs / sizeof *pl->cascade_bufs; i++)
    if (pl->cascade_bufs[i]) clReleaseMemObject(pl->cascade_bufs[i]);
  clpa_plan_release(pl->prefix);
  clpa_plan_release(pl->suffix);
  free(pl->group_starts);
  memset(pl, 0, sizeof *pl);
}

void clpa_plan_release(clpa_plan *plan) {
  if (!plan) return;
  clpa_plan_fini(plan);
  free(plan);
}

/* A plan on the heap, filled by `fill`. */
#define PLAN_NEW(fill, ctx, p, out)                                                             \
  do {                                                                                          \
    CLPA_CHECK(NULL, !(ctx), CLPA_ERR_INVALID_ARG, "ctx must not be NULL");                     \
    CLPA_CTX_CHECK(ctx, !(out), CLPA_ERR_INVALID_ARG, "plan must not be NULL");                 \
    *(out) = NULL;                                                                              \
    clpa_plan *pl_ = malloc(sizeof *pl_);                                                       \
    if (!pl_) return CLPA_FAIL((ctx)->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory for a plan"); \
    const clpa_status st_ = (fill);                                                             \
    if (st_ != CLPA_OK) {                                                                       \
      free(pl_);                                                                                \
      return st_;                                                                               \
    }                                                                                           \
    *(out) = pl_;                                                                               \
    return CLPA_OK;                                                                             \
  } while (0)

static clpa_status plan_decode_impl(clpa_context *ctx, const clpa_decode_params *p,
                                    clpa_plan **plan) {
  PLAN_NEW(clpa_decode_plan_fill(ctx, p, PLAN_OWN, pl_), ctx, p, plan);
}

clpa_status clpa_plan_decode(clpa_context *ctx, const clpa_decode_params *p, clpa_plan **plan) {
  CLPA_API_CALL(plan_decode_impl(ctx, p, plan));
}

static clpa_status plan_prefill_impl(clpa_context *ctx, const clpa_prefill_params *p,
                                     clpa_plan **plan) {
  PLAN_NEW(clpa_prefill_plan_fill(ctx, p, PLAN_OWN, pl_), ctx, p, plan);
}

clpa_status clpa_plan_prefill(clpa_context *ctx, const clpa_prefill_params *p, clpa_plan **plan) {
  CLPA_API_CALL(plan_prefill_impl(ctx, p, plan));
}

static clpa_status plan_cascade_impl(clpa_context *ctx, const clpa_cascade_params *p,
                                     clpa_plan **plan) {
  PLAN_NEW(clpa_cascade_plan_fill(ctx, p, PLAN_OWN, pl_), ctx, p, plan);
}

clpa_status clpa_plan_cascade(clpa_context *ctx, const clpa_cascade_params *p, clpa_plan **plan) {
  CLPA_API_CALL(plan_cascade_impl(ctx, p, plan));
}

static clpa_status run_impl(clpa_plan *plan, const clpa_attn_inputs *in) {
  CLPA_CHECK(NULL, !plan || !plan->ctx, CLPA_ERR_INVALID_ARG, "plan must not be NULL");
  CLPA_CTX_CHECK(plan->ctx, !in, CLPA_ERR_INVALID_ARG, "in must not be NULL");
  CLPA_CHECK_RESERVED(plan->ctx->error, in, "in->");
  switch (plan->kind) {
    case PLAN_DECODE: return clpa_decode_run(plan, in);
    case PLAN_PREFILL: return clpa_prefill_run(plan, in);
    default: return clpa_cascade_run(plan, in);
  }
}

clpa_status clpa_run(clpa_plan *plan, const clpa_attn_inputs *in) {
  CLPA_API_CALL(run_impl(plan, in));
}

static void describe_decode(const decode_call *c, clpa_plan_info *out) {
  out->path = c->mma ? CLPA_DECODE_PATH_MMA : c->rows ? CLPA_DECODE_PATH_ROWS : CLPA_DECODE_PATH_LANES;
  out->variant = c->v2 ? CLPA_DECODE_V2 : CLPA_DECODE_V1;
  out->partition_size = c->v2 ? c->partition : 0;
  out->heads_per_group = c->heads_per_group;
}

static clpa_status describe_impl(const clpa_plan *plan, clpa_plan_info *out) {
  CLPA_CHECK(NULL, !plan || !out, CLPA_ERR_INVALID_ARG, "plan and out must not be NULL");
  memset(out, 0, sizeof *out);
  if (plan->kind == PLAN_DECODE) describe_decode(&plan->dc, out);
  if (plan->kind == PLAN_CASCADE && plan->suffix) describe_decode(&plan->suffix->dc, out);
  if (plan->kind == PLAN_PREFILL) {
    out->path = plan->ps.path, out->rows = plan->ps.rows;
    out->keys = plan->ps.path == CLPA_PREFILL_ROWS ? 0 : plan->ps.keys;
  }
  return CLPA_OK;
}

clpa_status clpa_plan_describe(const clpa_plan *plan, clpa_plan_info *out) {
  CLPA_API_CALL(describe_impl(plan, out));
}

clpa_status clpa_plan_caches(const clpa_plan *pl, const clpa_attn_inputs *in, clpa_attn *a) {
  clpa_context *ctx = pl->ctx;
  const clpa_status st = clpa_attn_caches(ctx, a, in->cache, in->layer, in->key_cache,
                                          in->value_cache, &pl->kv);
  if (st != CLPA_OK) return st;
  const clpa_kv_layout *want = &pl->kv, *got = &a->kv;
  CLPA_CTX_CHECK(ctx, got->dtype != want->dtype || got->block_size != want->block_size ||
                          got->num_kv_heads != want->num_kv_heads ||
                          got->head_size != want->head_size,
                 CLPA_ERR_INVALID_ARG,
                 "the caches hold %s blocks of %d tokens x %d KV heads x %d; the plan was made for"
                 " %s, %d x %d x %d", clpa_dtype_name(got->dtype), got->block_size,
                 got->num_kv_heads, got->head_size, clpa_dtype_name(want->dtype),
                 want->block_size, want->num_kv_heads, want->head_size);
  return CLPA_OK;
}

clpa_status clpa_run_nothing(clpa_context *ctx, const clpa_attn_inputs *in) {
  if (!in->event) return CLPA_OK;
  CLPA_CL_CHECK(ctx, clEnqueueMarkerWithWaitList(ctx->queue, in->num_wait_events, in->wait_events,
                                                 in->event), "clEnqueueMarkerWithWaitList");
  return CLPA_OK;
}
