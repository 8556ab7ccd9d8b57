/*
 * plan_shared.c — what every kind of plan shares (plan.h): its start, its
 * release, its description, and what each kind's run shares (the caches
 * against the plan's shape, the empty run). decode.c, prefill.c, cascade.c
 * and xattn.c call these; plan.c stands above them all.
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
  if (pl->dlist) clReleaseKernel(pl->dlist);
  if (pl->pk) clReleaseKernel(pl->pk);
  if (pl->mk) clReleaseKernel(pl->mk);
  if (pl->split) clReleaseKernel(pl->split);
  if (pl->owns_lists) {
    if (pl->info) clReleaseMemObject(pl->info);
    if (pl->work) clReleaseMemObject(pl->work);
    if (pl->dec_lens) clReleaseMemObject(pl->dec_lens);
  }
  clpa_plan_release(pl->dec);
  for (size_t i = 0; i < sizeof pl->cascade_bufs / sizeof *pl->cascade_bufs; i++)
    if (pl->cascade_bufs[i]) clReleaseMemObject(pl->cascade_bufs[i]);
  clpa_plan_release(pl->prefix);
  clpa_plan_release(pl->suffix);
  free(pl->group_starts);
  if (pl->xattn) pl->xattn_free(pl->xattn);
  memset(pl, 0, sizeof *pl);
}

void clpa_plan_release(clpa_plan *plan) {
  if (!plan) return;
  clpa_plan_fini(plan);
  free(plan);
}

static void describe_decode(const decode_call *c, clpa_plan_info *out) {
  out->path = c->mma ? CLPA_DECODE_PATH_MMA : c->rows ? CLPA_DECODE_PATH_ROWS : CLPA_DECODE_PATH_LANES;
  out->variant = c->v2 ? CLPA_DECODE_V2 : CLPA_DECODE_V1;
  out->partition_size = c->v2 ? c->partition : 0;
  out->heads_per_group = c->heads_per_group;
  out->work_pairs = c->work ? c->work_pairs : 0;
  out->list_entries = c->list_entries;
}

static clpa_status describe_impl(const clpa_plan *plan, clpa_plan_info *out) {
  CLPA_CHECK(NULL, !plan || !out, CLPA_ERR_INVALID_ARG, "plan and out must not be NULL");
  memset(out, 0, sizeof *out);
  if (plan->kind == PLAN_DECODE) describe_decode(&plan->dc, out);
  if (plan->kind == PLAN_CASCADE && plan->suffix) describe_decode(&plan->suffix->dc, out);
  if (plan->kind == PLAN_PREFILL) {
    out->path = plan->ps.path, out->rows = plan->ps.rows;
    out->keys = plan->ps.path == CLPA_PREFILL_ROWS ? 0 : plan->ps.keys;
    out->rows_per_warp = plan->ps.path == CLPA_PREFILL_MMA ? 16 * plan->ps.mt : 0;
    out->split_keys = plan->split_keys, out->split_rows = (int32_t)plan->split_rows;
    out->decode_rows = plan->dec_rows;
    if (plan->dec) {
      clpa_plan_info d;
      describe_decode(&plan->dec->dc, &d);
      out->variant = d.variant, out->partition_size = d.partition_size;
      out->heads_per_group = d.heads_per_group;
    }
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
  return st != CLPA_OK ? st : clpa_plan_same_shape(pl, &a->kv);
}

clpa_status clpa_plan_same_shape(const clpa_plan *pl, const clpa_kv_layout *got) {
  const clpa_kv_layout *want = &pl->kv;
  CLPA_CTX_CHECK(pl->ctx, got->dtype != want->dtype || got->block_size != want->block_size ||
                              got->num_kv_heads != want->num_kv_heads ||
                              got->head_size != want->head_size || got->kind != want->kind,
                 CLPA_ERR_INVALID_ARG,
                 "the caches hold %s blocks of %d tokens x %d KV heads x %d (%s layout); the plan"
                 " was made for %s, %d x %d x %d (%s)", clpa_dtype_name(got->dtype),
                 got->block_size, got->num_kv_heads, got->head_size,
                 clpa_kv_layout_kind_name(got->kind), clpa_dtype_name(want->dtype),
                 want->block_size, want->num_kv_heads, want->head_size,
                 clpa_kv_layout_kind_name(want->kind));
  return CLPA_OK;
}

clpa_status clpa_run_nothing(clpa_context *ctx, const clpa_attn_inputs *in) {
  if (!in->event) return CLPA_OK;
  CLPA_CL_CHECK(ctx, clEnqueueMarkerWithWaitList(ctx->queue, in->num_wait_events, in->wait_events,
                                                 in->event), "clEnqueueMarkerWithWaitList");
  return CLPA_OK;
}
