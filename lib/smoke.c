/* smoke.c — a tiny end-to-end kernel run that proves a device works. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"

static clpa_status clpa_smoke_test_impl(clpa_context *ctx, size_t n) {
  CLPA_CHECK(NULL, !ctx, CLPA_ERR_INVALID_ARG, "ctx must not be NULL");
  CLPA_CTX_CHECK(ctx, n == 0 || n > (1u << 26), CLPA_ERR_INVALID_ARG,
                 "n = %zu (expected 1 .. 2^26)", n);
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *r = malloc(n * sizeof *r);
  cl_mem bx = NULL, by = NULL;
  cl_kernel k = NULL;
  clpa_status st = CLPA_OK;
  cl_int err = CL_SUCCESS;
  if (!x || !y || !r) {
    st = CLPA_FAIL(ctx->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    x[i] = (float)(i % 97) * 0.25f - 7.0f;
    y[i] = (float)(i % 13) - 6.5f;
  }
  bx = clCreateBuffer(ctx->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof *x, x, &err);
  if (err == CL_SUCCESS)
    by = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof *y, y, &err);
  if (err != CL_SUCCESS) {
    st = CLPA_CL_FAIL(ctx, err, "clCreateBuffer");
    goto out;
  }
  const cl_float a = 1.5f;
  const cl_uint un = (cl_uint)n;
  const clpa_arg args[] = {CLPA_ARG(a), CLPA_ARG(bx), CLPA_ARG(by), CLPA_ARG(un)};
  const clpa_ndrange grid = {1, {(n + 63) / 64 * 64}, {0}, 0, NULL, NULL};
  if ((st = clpa_family_kernel(ctx, &clpa_family_smoke, NULL, "clpa_smoke_axpy", &k)) ||
      (st = clpa_enqueue(ctx, k, "clpa_smoke_axpy", args, CLPA_NARGS(args), &grid)))
    goto out;
  err = clEnqueueReadBuffer(ctx->queue, by, CL_TRUE, 0, n * sizeof *r, r, 0, NULL, NULL);
  if (err != CL_SUCCESS) {
    st = CLPA_CL_FAIL(ctx, err, "clEnqueueReadBuffer");
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    float want = fmaf(a, x[i], y[i]);
    if (r[i] != want) {
      st = CLPA_FAIL(ctx->error, CLPA_ERR_OPENCL,
                     "smoke kernel gave y[%zu] = %g, expected %g: the device computes wrongly", i,
                     (double)r[i], (double)want);
      break;
    }
  }
out:
  if (k) clReleaseKernel(k);
  if (bx) clReleaseMemObject(bx);
  if (by) clReleaseMemObject(by);
  free(x);
  free(y);
  free(r);
  return st;
}

clpa_status clpa_smoke_test(clpa_context *ctx, size_t n) {
  CLPA_API_CALL(clpa_smoke_test_impl(ctx, n));
}
