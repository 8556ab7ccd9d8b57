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

static clpa_status run_impl(clpa_plan *plan, const clpa_attn_inputs *in) {
  CLPA_CHECK(NULL, !plan || !plan->ctx, CLPA_ERR_INVALID_ARG, "plan must not be NULL");
  CLPA_CTX_CHECK(plan->ctx, !in, CLPA_ERR_INVALID_ARG, "in must not be NULL");
  CLPA_CHECK_RESERVED(plan->ctx->error, in, "in->");
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
