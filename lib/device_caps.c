/*
 * device_caps.c — what the context's device can run: the lane-group path
 * settled once (the subgroup size learnt from a kernel), the lanes a lane
 * group takes, and whether the tensor-core paths run natively; and the
 * device facts the host planners take (host/decode_planner.h). Below the
 * context (context.c settles the lanes here) and the ops, which ask.
 */
#include <string.h>

#include "internal.h"

/* On the subgroup path the lane width is whatever the compiler gives our
 * kernel: learn it once, from the default decode kernel. */
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

clpa_status clpa_lanes_settle(clpa_context *ctx) {
  if (ctx->lanes != CLPA_LANES_SUBGROUP || ctx->subgroup_size) return CLPA_OK;
  const clpa_decode_spec spec = {
      128, 16, CLPA_DTYPE_F16, CLPA_DTYPE_F32, DECODE_THREADS, 32, 0, 1, 0, 0, 0, 0, 0,
      CLPA_KV_LAYOUT_SPLIT_KEY, CLPA_PAGE_TABLE_PADDED, 0};
  cl_kernel k;
  clpa_status st = clpa_family_kernel(ctx, &clpa_family_decode, &spec, "clpa_decode_paged", &k);
  if (st == CLPA_OK) {
    st = learn_subgroup_size(ctx, k);
    clReleaseKernel(k);
  }
  if (st == CLPA_OK || ctx->lanes_forced) return st;
  /* Subgroups we cannot size (an OpenCL 2.0 device with only the KHR
   * query, say): the emulated path works everywhere. */
  ctx->lanes = CLPA_LANES_EMULATED;
  clpa_err_clear();
  ctx->error[0] = '\0';
  return CLPA_OK;
}

int clpa_mma_native(const clpa_context *ctx) {
  if (ctx->lanes != CLPA_LANES_NV_PTX) return -1;
  return ctx->info.nv_compute_capability >= 80;
}

clpa_status clpa_mma_check(clpa_context *ctx) {
  clpa_device_facts dev;
  clpa_device_facts_of(ctx, &dev);
  return clpa_planner_mma_check(&dev, ctx->error);
}

int clpa_lane_width(const clpa_context *ctx, int block_size) {
  switch (ctx->lanes) {
    case CLPA_LANES_NV_PTX: return 32;
    /* A lane group is an aligned 32-lane (or smaller) slice of a subgroup:
     * xor shuffles with masks below its width stay inside it, so wider
     * subgroups (PoCL makes the whole work-group one) serve as well. */
    case CLPA_LANES_SUBGROUP:
      return ctx->subgroup_size && ctx->subgroup_size < 32 ? ctx->subgroup_size : 32;
    default: return block_size; /* emulated: one lane per key token */
  }
}

void clpa_device_facts_of(const clpa_context *ctx, clpa_device_facts *out) {
  const clpa_device_info *in = &ctx->info;
  memset(out, 0, sizeof *out);
  out->name = in->name;
  out->is_cpu = in->is_cpu;
  out->compute_units = in->compute_units;
  out->local_mem_bytes = in->local_mem_bytes;
  out->max_work_group_size = in->max_work_group_size;
  out->native_float_width = in->native_float_width;
  out->lane_width = clpa_lane_width(ctx, 0); /* emulated: the block size, so 0 */
  out->mma_native = clpa_mma_native(ctx);
  out->compute_capability = in->nv_compute_capability;
  out->merge_in_launch = ctx->merge_in_launch;
}
