/*
 * launch.c — the one launch path: a kernel family's spec (kernels.h)
 * rendered as its options, kernels fetched through the program cache
 * (program.c), arguments set from a list and the NDRange enqueued, every
 * OpenCL result checked; where the kernel's parameters are a list in cl/,
 * the arguments are checked against it first, by name.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* "-DCLPA_A=1 -DCLPA_B=2": the spec's tunables in the family's order. */
static clpa_status render_options(clpa_context *ctx, const clpa_family *f, const void *spec,
                                  char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < f->num_tunables; i++) {
    int32_t v;
    memcpy(&v, (const char *)spec + f->tunables[i].offset, sizeof v);
    int w = snprintf(buf + n, cap - n, "%s-DCLPA_%s=%d", i ? " " : "", f->tunables[i].name, (int)v);
    CLPA_CTX_CHECK(ctx, w < 0 || (size_t)w >= cap - n, CLPA_ERR_INVALID_ARG,
                   "options of kernel family '%s' do not fit %zu bytes", f->name, cap);
    n += (size_t)w;
  }
  return CLPA_OK;
}

clpa_status clpa_family_kernel(clpa_context *ctx, const clpa_family *f, const void *spec,
                               const char *name, cl_kernel *out) {
  char opts[512];
  clpa_status st = render_options(ctx, f, spec, opts, sizeof opts);
  if (st != CLPA_OK) return st;
  return clpa_kernel_create(ctx, f->name, opts, name, out);
}

clpa_status clpa_enqueue(clpa_context *ctx, cl_kernel k, const char *name, const clpa_arg *args,
                         size_t num_args, const clpa_ndrange *r) {
  for (size_t i = 0; i < num_args; i++) {
    cl_int err = clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value);
    if (err != CL_SUCCESS)
      return clpa_err_set(ctx->error, clpa_status_from_cl(err), __func__,
                          "clSetKernelArg(%s, argument %zu) failed: %s (%d)", name, i,
                          clpa_cl_error_name(err), (int)err);
  }
  cl_int err = clEnqueueNDRangeKernel(ctx->queue, k, r->dims, NULL, r->global,
                                      r->local[0] ? r->local : NULL, r->num_wait_events,
                                      r->wait_events, r->event);
  if (err != CL_SUCCESS)
    return clpa_err_set(ctx->error, clpa_status_from_cl(err), __func__,
                        "clEnqueueNDRangeKernel(%s) failed: %s (%d)", name,
                        clpa_cl_error_name(err), (int)err);
  return CLPA_OK;
}

clpa_status clpa_enqueue_listed(clpa_context *ctx, cl_kernel k, const char *name,
                                const clpa_param *params, const clpa_arg *args, size_t num_args,
                                const clpa_ndrange *r) {
  for (size_t i = 0; i < num_args; i++) {
    const clpa_param *p = &params[i];
    const clpa_arg *a = &args[i];
    CLPA_CTX_CHECK(ctx, a->size == 0, CLPA_ERR_INVALID_ARG,
                   "%s: argument %zu (%s) was not set (a bug in clpa)", name, i, p->name);
    CLPA_CTX_CHECK(ctx, p->size == 0 && a->value != NULL, CLPA_ERR_INVALID_ARG,
                   "%s: argument %zu (%s) is local memory: a size and no value (a bug in clpa)",
                   name, i, p->name);
    CLPA_CTX_CHECK(ctx, p->size != 0 && a->size != p->size, CLPA_ERR_INVALID_ARG,
                   "%s: argument %zu (%s) was set with %zu bytes where the kernel takes %zu (a bug "
                   "in clpa)",
                   name, i, p->name, a->size, p->size);
  }
  return clpa_enqueue(ctx, k, name, args, num_args, r);
}
