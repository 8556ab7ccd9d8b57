/*
 * plan.c — plans (clpa.h section 8): made on the heap by clpa_plan_decode,
 * clpa_plan_prefill, clpa_plan_cascade and clpa_plan_xattn and run by
 * clpa_run, each handed to its kind (decode.c, prefill.c, cascade.c,
 * xattn.c). What the kinds
 * share is below them, in plan_shared.c.
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

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

static clpa_status plan_xattn_impl(clpa_context *ctx, const clpa_xattn_params *p,
                                   clpa_plan **plan) {
  PLAN_NEW(clpa_xattn_plan_fill(ctx, p, pl_), ctx, p, plan);
}

clpa_status clpa_plan_xattn(clpa_context *ctx, const clpa_xattn_params *p, clpa_plan **plan) {
  CLPA_API_CALL(plan_xattn_impl(ctx, p, plan));
}

/* A buffer the plan's kind does not read is refused, not ignored (XAttention's run refuses its
 * own): a prefill plan's lengths are its cu_seqlens_q and cached_lens, so context_lens would
 * change nothing; decode and cascade apply no block mask; only XAttention writes masses. */
static clpa_status check_unread(const clpa_plan *plan, const clpa_attn_inputs *in) {
  const int prefill = plan->kind == PLAN_PREFILL;
  const char *kind = prefill ? "prefill" : plan->kind == PLAN_DECODE ? "decode" : "cascade";
  CLPA_CTX_CHECK(plan->ctx, prefill && in->context_lens, CLPA_ERR_INVALID_ARG,
                 "in->context_lens is given to a prefill plan, whose lengths are its params'"
                 " cu_seqlens_q and cached_lens (plan again for others): leave it NULL");
  CLPA_CTX_CHECK(plan->ctx, !prefill && in->block_mask, CLPA_ERR_INVALID_ARG,
                 "in->block_mask is given to a %s plan, which applies no mask (a prefill plan"
                 " made with one does): leave it NULL", kind);
  CLPA_CTX_CHECK(plan->ctx, in->mass != NULL, CLPA_ERR_INVALID_ARG,
                 "in->mass is given to a %s plan (only XAttention's run writes it): leave it NULL",
                 kind);
  return CLPA_OK;
}

static clpa_status run_impl(clpa_plan *plan, const clpa_attn_inputs *in) {
  CLPA_CHECK(NULL, !plan || !plan->ctx, CLPA_ERR_INVALID_ARG, "plan must not be NULL");
  CLPA_CTX_CHECK(plan->ctx, !in, CLPA_ERR_INVALID_ARG, "in must not be NULL");
  CLPA_CHECK_RESERVED(plan->ctx->error, in, "in->");
  if (plan->kind != PLAN_XATTN) {
    const clpa_status st = check_unread(plan, in);
    if (st != CLPA_OK) return st;
  }
  switch (plan->kind) {
    case PLAN_DECODE: return clpa_decode_run(plan, in);
    case PLAN_PREFILL: return clpa_prefill_run(plan, in);
    case PLAN_XATTN: return clpa_xattn_run(plan, in);
    default: return clpa_cascade_run(plan, in);
  }
}

clpa_status clpa_run(clpa_plan *plan, const clpa_attn_inputs *in) {
  CLPA_API_CALL(run_impl(plan, in));
}
