/* buffers.c — buffer checks, the fault word, partition counters and scratch space. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

clpa_status clpa_check_buffer(clpa_context *ctx, cl_mem buf, const char *name, size_t need,
                              int optional) {
  if (!buf) {
    CLPA_CTX_CHECK(ctx, !optional, CLPA_ERR_INVALID_ARG, "%s must not be NULL", name);
    return CLPA_OK;
  }
  size_t size = 0;
  cl_context owner = NULL;
  cl_int err = clGetMemObjectInfo(buf, CL_MEM_SIZE, sizeof size, &size, NULL);
  if (err == CL_SUCCESS) err = clGetMemObjectInfo(buf, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
  CLPA_CTX_CHECK(ctx, err != CL_SUCCESS, CLPA_ERR_INVALID_ARG, "%s is not a valid cl_mem (%s)", name,
                 clpa_cl_error_name(err));
  CLPA_CTX_CHECK(ctx, owner != ctx->cl, CLPA_ERR_INVALID_ARG,
                 "%s belongs to another OpenCL context", name);
  CLPA_CTX_CHECK(ctx, size < need, CLPA_ERR_INVALID_ARG,
                 "%s holds %zu bytes but the shapes need %zu", name, size, need);
  return CLPA_OK;
}

clpa_status clpa_check_wait_list(clpa_context *ctx, cl_uint n, const cl_event *evs) {
  CLPA_CTX_CHECK(ctx, n > 0 && !evs, CLPA_ERR_INVALID_ARG,
                 "num_wait_events = %u but wait_events is NULL", (unsigned)n);
  CLPA_CTX_CHECK(ctx, n == 0 && evs, CLPA_ERR_INVALID_ARG,
                 "wait_events is set but num_wait_events = 0 (OpenCL refuses that pair)");
  for (cl_uint i = 0; i < n; i++) {
    CLPA_CTX_CHECK(ctx, !evs[i], CLPA_ERR_INVALID_ARG, "wait_events[%u] is NULL", (unsigned)i);
    /* An event of another OpenCL context fails the enqueue after earlier
     * kernels of the same call may already be queued; catch it here. */
    cl_context owner = NULL;
    cl_int err = clGetEventInfo(evs[i], CL_EVENT_CONTEXT, sizeof owner, &owner, NULL);
    CLPA_CTX_CHECK(ctx, err != CL_SUCCESS, CLPA_ERR_INVALID_ARG,
                   "wait_events[%u] is not a valid cl_event (%s)", (unsigned)i,
                   clpa_cl_error_name(err));
    CLPA_CTX_CHECK(ctx, owner != ctx->cl, CLPA_ERR_INVALID_ARG,
                   "wait_events[%u] belongs to another OpenCL context", (unsigned)i);
  }
  return CLPA_OK;
}

clpa_status clpa_faults_buffer(clpa_context *ctx, cl_mem *out) {
  if (!ctx->faults) {
    cl_int zero = 0, err;
    ctx->faults = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero,
                                 &zero, &err);
    if (err != CL_SUCCESS) {
      ctx->faults = NULL;
      return CLPA_CL_FAIL(ctx, err, "clCreateBuffer(fault word)");
    }
  }
  *out = ctx->faults;
  return CLPA_OK;
}

clpa_status clpa_part_counts(clpa_context *ctx, size_t n, cl_mem *out) {
  if (n == 0) n = 1;
  if (ctx->part_counts_size < n) {
    int32_t *zeros = calloc(n, sizeof *zeros);
    CLPA_CTX_CHECK(ctx, !zeros, CLPA_ERR_OUT_OF_MEMORY, "%zu partition counters", n);
    cl_int err;
    cl_mem m = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof *zeros,
                              zeros, &err);
    free(zeros);
    if (err != CL_SUCCESS) return CLPA_CL_FAIL(ctx, err, "clCreateBuffer(partition counters)");
    if (ctx->part_counts) clReleaseMemObject(ctx->part_counts); /* freed once idle */
    ctx->part_counts = m;
    ctx->part_counts_size = n;
  }
  *out = ctx->part_counts;
  return CLPA_OK;
}

clpa_status clpa_scratch(clpa_context *ctx, int slot, size_t size, cl_mem *out) {
  if (size == 0) size = 4;
  if (ctx->scratch_size[slot] < size) {
    /* half again what it was (fewer regrowths), within the device's largest buffer */
    size_t grow = ctx->scratch_size[slot] + ctx->scratch_size[slot] / 2;
    if (ctx->info.max_alloc_bytes && grow > ctx->info.max_alloc_bytes)
      grow = (size_t)ctx->info.max_alloc_bytes;
    if (grow < size) grow = size;
    cl_int err;
    cl_mem m = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, grow, NULL, &err);
    if (err != CL_SUCCESS) return CLPA_CL_FAIL(ctx, err, "clCreateBuffer(scratch)");
    if (ctx->scratch[slot]) clReleaseMemObject(ctx->scratch[slot]); /* freed once idle */
    ctx->scratch[slot] = m;
    ctx->scratch_size[slot] = grow;
  }
  *out = ctx->scratch[slot];
  return CLPA_OK;
}

static clpa_status staging_wait(clpa_context *ctx, clpa_staging *s) {
  if (!s->written) return CLPA_OK;
  const cl_int err = clWaitForEvents(1, &s->written);
  clReleaseEvent(s->written);
  s->written = NULL;
  return err == CL_SUCCESS ? CLPA_OK : CLPA_CL_FAIL(ctx, err, "clWaitForEvents(work list write)");
}

/* Whether s's last write is done, without waiting (its event released then): 1, or 0 while it
 * is queued or running; a write that failed is the call's failure (*st), as a wait's would be,
 * and an event whose state cannot be read is waited for. */
static int staging_done(clpa_context *ctx, clpa_staging *s, clpa_status *st) {
  if (!s->written) return 1;
  cl_int state = CL_QUEUED;
  if (clGetEventInfo(s->written, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL) !=
      CL_SUCCESS) {
    *st = staging_wait(ctx, s);
    return 1;
  }
  if (state > CL_COMPLETE) return 0;
  clReleaseEvent(s->written);
  s->written = NULL;
  if (state < 0) *st = CLPA_CL_FAIL(ctx, state, "work list write");
  return 1;
}

clpa_status clpa_staging_take(clpa_context *ctx, size_t words, clpa_staging **out) {
  clpa_status st = CLPA_OK;
  int at = -1;
  for (int i = 0; i < ctx->staging_count && at < 0 && st == CLPA_OK; i++) {
    const int j = (ctx->staging_next + i) % ctx->staging_count;
    if (staging_done(ctx, &ctx->staging[j], &st)) at = j;
  }
  if (st != CLPA_OK) return st;
  if (at < 0) { /* every array is still read by a queued write: the ring grows */
    /* the queued writes submitted, so that the next calls find them done, as a wait would */
    CLPA_CL_CHECK(ctx, clFlush(ctx->queue), "clFlush(work list writes)");
    const int n = ctx->staging_count ? 2 * ctx->staging_count : CLPA_STAGING_RING;
    clpa_staging *grown = realloc(ctx->staging, sizeof *grown * (size_t)n);
    CLPA_CTX_CHECK(ctx, !grown, CLPA_ERR_OUT_OF_MEMORY, "out of memory for %d staging arrays", n);
    memset(grown + ctx->staging_count, 0, sizeof *grown * (size_t)(n - ctx->staging_count));
    at = ctx->staging_count;
    ctx->staging = grown, ctx->staging_count = n;
  }
  clpa_staging *s = &ctx->staging[at];
  ctx->staging_next = (at + 1) % ctx->staging_count;
  if (s->words < words) {
    int32_t *grown = realloc(s->host, sizeof(int32_t) * words);
    CLPA_CTX_CHECK(ctx, !grown, CLPA_ERR_OUT_OF_MEMORY, "out of memory for a work list of %zu words",
                   words);
    s->host = grown, s->words = words;
  }
  *out = s;
  return CLPA_OK;
}

clpa_status clpa_staging_write(clpa_context *ctx, clpa_staging *s, cl_mem m, size_t first,
                               size_t n, int last, const char *what) {
  const cl_int err = clEnqueueWriteBuffer(ctx->queue, m, CL_FALSE, 0, sizeof(int32_t) * n,
                                          s->host + first, 0, NULL, last ? &s->written : NULL);
  if (err == CL_SUCCESS) return CLPA_OK;
  /* the writes before this one read s->host until they run: s is taken again after them */
  if (first > 0 && !s->written &&
      clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, &s->written) != CL_SUCCESS)
    clFinish(ctx->queue); /* no marker: a queue that cannot take one is past holding */
  return CLPA_CL_FAIL(ctx, err, what);
}

void clpa_staging_free(clpa_context *ctx) {
  for (int i = 0; i < ctx->staging_count; i++) {
    clpa_staging *s = &ctx->staging[i];
    if (s->written) clWaitForEvents(1, &s->written), clReleaseEvent(s->written);
    free(s->host);
  }
  free(ctx->staging);
  ctx->staging = NULL, ctx->staging_count = ctx->staging_next = 0;
}

static clpa_status clpa_context_check_faults_impl(clpa_context *ctx, int32_t *faults) {
  CLPA_CHECK(NULL, !ctx, CLPA_ERR_INVALID_ARG, "ctx must not be NULL");
  cl_int word = 0, zero = 0;
  if (faults) *faults = 0;
  if (!ctx->faults) return CLPA_OK;
  CLPA_CL_CHECK(ctx, clEnqueueReadBuffer(ctx->queue, ctx->faults, CL_TRUE, 0, sizeof word, &word, 0,
                                         NULL, NULL), "clEnqueueReadBuffer(fault word)");
  if (word == 0) return CLPA_OK;
  CLPA_CL_CHECK(ctx, clEnqueueWriteBuffer(ctx->queue, ctx->faults, CL_TRUE, 0, sizeof zero, &zero,
                                          0, NULL, NULL), "clEnqueueWriteBuffer(fault word)");
  if (faults) *faults = word;
  /* One status per fault, the gravest first (lanes: every result is
   * wrong); the bits and the message name all of them. */
  clpa_status st = (word & CLPA_FAULT_LANES)           ? CLPA_ERR_LANE_MISMATCH
                   : (word & CLPA_FAULT_BAD_BLOCK)       ? CLPA_ERR_BAD_BLOCK
                   : (word & CLPA_FAULT_BAD_CONTEXT_LEN) ? CLPA_ERR_BAD_CONTEXT_LEN
                                                         : CLPA_ERR_OPENCL;
  return CLPA_FAIL(ctx->error, st, "kernels reported faults 0x%x:%s%s%s%s", (unsigned)word,
                   (word & 1) ? " a block id or slot outside the cache (decode masked its tokens;"
                                " the cache ops skipped it)" : "",
                   (word & 2) ? " a context length < 0 or > max_context_len (treated as 0)" : "",
                   (word & 4) ? " subgroups did not match the lane groups (results invalid)" : "",
                   (word & ~7) ? " unknown bits (a kernel wrote outside the fault word?)" : "");
}

clpa_status clpa_context_check_faults(clpa_context *ctx, int32_t *faults) {
  CLPA_API_CALL(clpa_context_check_faults_impl(ctx, faults));
}
