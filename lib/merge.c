/*
 * merge.c — clpa_merge_states (cl/merge.cl; its parameters cl/merge_args.h's
 * list, set here by name): attention results over disjoint key sets
 * combined by their log-sum-exps.
 */
#include <string.h>

#include "internal.h"
#include "merge_args.h"
#include "size_math.h"

/* clpa_merge_states's, from cl/merge_args.h: MERGE_ARG_<name>. */
static const clpa_param merge_params[] = {MERGE_ARG_LIST(CLPA_PARAM_OF, )};
#define MERGE_SLOT(kind, type, name) MERGE_ARG_##name,
enum { MERGE_ARG_LIST(MERGE_SLOT, ) MERGE_NUM_ARGS };

#define MERGE_THREADS 64

void clpa_merge_states_params_init(clpa_merge_states_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->dtype = CLPA_DTYPE_F32;
  p->num_inputs = 2;
}

static clpa_status clpa_merge_states_impl(clpa_context *ctx, const clpa_merge_states_params *p) {
  CLPA_CHECK(NULL, !ctx, CLPA_ERR_INVALID_ARG, "ctx must not be NULL");
  CLPA_CTX_CHECK(ctx, !p, CLPA_ERR_INVALID_ARG, "p must not be NULL");
  CLPA_CHECK_RESERVED(ctx->error, p, "p->");
  CLPA_CTX_CHECK(ctx, p->num_rows < 0, CLPA_ERR_INVALID_ARG, "num_rows = %d", p->num_rows);
  CLPA_CTX_CHECK(ctx, p->head_size <= 0, CLPA_ERR_INVALID_ARG, "head_size = %d", p->head_size);
  CLPA_CTX_CHECK(ctx, p->num_inputs < 2 || p->num_inputs > CLPA_MERGE_MAX_INPUTS,
                 CLPA_ERR_INVALID_ARG, "num_inputs = %d (2 .. %d)", p->num_inputs,
                 CLPA_MERGE_MAX_INPUTS);
  CLPA_CTX_CHECK(ctx, p->dtype != CLPA_DTYPE_F32 && p->dtype != CLPA_DTYPE_F16 &&
                          p->dtype != CLPA_DTYPE_BF16,
                 CLPA_ERR_UNSUPPORTED, "dtype = %s (outputs must be f32, f16 or bf16)",
                 clpa_dtype_name(p->dtype));
  clpa_status st = clpa_check_wait_list(ctx, p->num_wait_events, p->wait_events);
  if (st != CLPA_OK) return st;
  size_t need_o = 0, need_l = 0;
  CLPA_CTX_CHECK(ctx, !clpa_size_mul_add((size_t)p->num_rows, (size_t)p->head_size, 0, &need_o) ||
                          !clpa_size_mul_add(need_o, clpa_dtype_size(p->dtype), 0, &need_o) ||
                          !clpa_size_mul_add((size_t)p->num_rows, 4, 0, &need_l),
                 CLPA_ERR_INVALID_ARG, "num_rows = %d x head_size = %d overflows size_t",
                 p->num_rows, p->head_size);
  static const char *const on[] = {"outs[0]", "outs[1]", "outs[2]", "outs[3]",
                                   "outs[4]", "outs[5]", "outs[6]", "outs[7]"};
  static const char *const ln[] = {"lses[0]", "lses[1]", "lses[2]", "lses[3]",
                                   "lses[4]", "lses[5]", "lses[6]", "lses[7]"};
  for (int i = 0; i < p->num_inputs; i++)
    if ((st = clpa_check_buffer(ctx, p->outs[i], on[i], need_o, 0)) ||
        (st = clpa_check_buffer(ctx, p->lses[i], ln[i], need_l, 0)))
      return st;
  if ((st = clpa_check_buffer(ctx, p->out, "out", need_o, 0)) ||
      (st = clpa_check_buffer(ctx, p->lse, "lse", need_l, 1)))
    return st;
  if (p->num_rows == 0) {
    if (!p->event) return CLPA_OK;
    CLPA_CL_CHECK(ctx, clEnqueueMarkerWithWaitList(ctx->queue, p->num_wait_events, p->wait_events,
                                                   p->event), "clEnqueueMarkerWithWaitList");
    return CLPA_OK;
  }
  const clpa_merge_spec spec = {(int32_t)p->dtype, MERGE_THREADS};
  cl_kernel k;
  if ((st = clpa_family_kernel(ctx, &clpa_family_merge, &spec, "clpa_merge_states", &k))) return st;
  const cl_int n = p->num_inputs, hs = p->head_size;
  cl_mem o[CLPA_MERGE_MAX_INPUTS] = {0}, l[CLPA_MERGE_MAX_INPUTS] = {0};
  for (int i = 0; i < n; i++) o[i] = p->outs[i], l[i] = p->lses[i];
#define A(name, v) [MERGE_ARG_##name] = CLPA_ARG(v)
#define IN(i) A(o##i, o[i]), A(l##i, l[i])
  const clpa_arg args[MERGE_NUM_ARGS] = {A(out, p->out), A(lse, p->lse), A(n, n), A(head_size, hs),
                                         IN(0), IN(1), IN(2), IN(3), IN(4), IN(5), IN(6), IN(7)};
#undef IN
#undef A
  const clpa_ndrange r = {1, {(size_t)p->num_rows * MERGE_THREADS}, {MERGE_THREADS},
                          p->num_wait_events, p->wait_events, p->event};
  st = clpa_enqueue_listed(ctx, k, "clpa_merge_states", merge_params, args, MERGE_NUM_ARGS, &r);
  clReleaseKernel(k);
  return st;
}

clpa_status clpa_merge_states(clpa_context *ctx, const clpa_merge_states_params *p) {
  CLPA_API_CALL(clpa_merge_states_impl(ctx, p));
}
