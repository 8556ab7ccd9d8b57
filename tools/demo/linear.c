/*
 * linear.c — see linear.h: each engine's programs (built on first use), buffers and launches,
 * the CLBlast route with its f32 copy of the weight and the tiled GEMM's f16 copy of ggml's
 * blocks; which engine and shape a call takes is linear_table.c's.
 */
#include "linear_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clblast_c.h>

#include "error.h"

/* The kernels' DEMO_WDT of form d (0 f32, 1 f16, 2 bf16, 3 ... the block forms) and WTILE. */
static int kernel_wdt(int d) {
  return d == DEMO_W_F16_TILED ? 1 : d == DEMO_W_BF16_TILED ? 2 : d < DEMO_W_F16_TILED ? d : d - 2;
}

clpa_status demo_linear_create(cl_context ctx, cl_device_id dev, cl_command_queue queue,
                               const demo_linear_tuning *tuning, demo_linear **out) {
  *out = NULL;
  const demo_linear_tuning *t = tuning ? tuning : demo_linear_lookup(dev);
  if (t->lanes < 1 || t->lanes > 64 || t->groups < 1 || t->groups * t->lanes > 1024 || t->nc < 1 ||
      t->nc > 16 || t->stream_max_rows < 0 || t->mma_max_rows < 0 ||
      t->mma_min_rows < 0 || t->mwarps < 1 || t->mwarps > 8 || t->mma_ct < 1 || t->mma_ct > 4 ||
      t->mma_fill < 0 || t->mma_fill > 64 || t->gemm_min_rows < 0 ||
      (t->gemm_bm != 0 && t->gemm_bm != 64 && t->gemm_bm != 128) ||
      (t->gemm_bk != 32 && t->gemm_bk != 64) || (t->gemm_f16a != 0 && t->gemm_f16a != 1) ||
      t->gemv_max_rows < 0 || t->gemv_warps < 1 || t->gemv_warps > 16 || t->gemv_unroll < 1 ||
      t->gemv_unroll > 8 || (t->gemv_ct != 1 && t->gemv_ct != 2 && t->gemv_ct != 4) ||
      (t->tiled != 0 && t->tiled != 1) || (t->gemv_nt != 4 && t->gemv_nt != 8) ||
      t->gemm_fill < 0 || t->gemm_fill > 16 || t->gemm_dq_rows < 0 || t->stream_sums < 0 ||
      t->stream_sums > 1024)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "demo_linear_create: lanes %d, groups %d, nc %d, stream_max_rows %d,"
                     " mma rows %d to %d, mwarps %d, mma_ct %d, mma_fill %d, gemm_min_rows %d,"
                     " gemm_bm %d (0, 64 or 128), gemm_bk %d (32 or 64), gemm_f16a %d (0 or 1),"
                     " gemv_max_rows %d, gemv_warps %d (1 to 16), gemv_unroll %d (1 to 8),"
                     " gemv_ct %d (1, 2 or 4), tiled %d (0 or 1), gemv_nt %d (4 or 8),"
                     " gemm_fill %d (0 to 16), gemm_dq_rows %d, stream_sums %d (0 to 1024)",
                     (int)t->lanes, (int)t->groups, (int)t->nc, (int)t->stream_max_rows,
                     (int)t->mma_min_rows, (int)t->mma_max_rows, (int)t->mwarps,
                     (int)t->mma_ct, (int)t->mma_fill, (int)t->gemm_min_rows, (int)t->gemm_bm,
                     (int)t->gemm_bk, (int)t->gemm_f16a, (int)t->gemv_max_rows,
                     (int)t->gemv_warps, (int)t->gemv_unroll, (int)t->gemv_ct, (int)t->tiled, (int)t->gemv_nt,
                     (int)t->gemm_fill, (int)t->gemm_dq_rows, (int)t->stream_sums);
  demo_linear *l = calloc(1, sizeof *l);
  if (!l) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "demo_linear_create: out of memory");
  l->ctx = ctx, l->dev = dev, l->queue = queue;
  l->tune = *t;
  l->nvidia = demo_linear_is_nvidia(dev);
  cl_uint cus = 1;
  if (clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL) != CL_SUCCESS)
    cus = 1; /* unknown: the shape rules count one */
  l->cus = cus ? (int32_t)cus : 1;
  *out = l;
  return CLPA_OK;
}

void demo_linear_destroy(demo_linear *l) {
  if (!l) return;
  for (int d = 0; d < NWDT; d++) {
    for (int b = 0; b < NBLOCKS; b++) {
      if (l->stream[d][b]) clReleaseKernel(l->stream[d][b]);
      if (l->prog[d][b]) clReleaseProgram(l->prog[d][b]);
    }
    if (l->widen[d]) clReleaseKernel(l->widen[d]);
    if (l->widen_h[d]) clReleaseKernel(l->widen_h[d]);
    if (l->hprog[d]) clReleaseProgram(l->hprog[d]);
    for (int b = 0; b < NMMA; b++) {
      if (l->mma[d][b]) clReleaseKernel(l->mma[d][b]);
      if (l->mprog[d][b]) clReleaseProgram(l->mprog[d][b]);
    }
    for (int b = 0; b < NGEMM; b++)
      for (int f = 0; f < NGEMM_FORMS; f++)
        for (int o = 0; o < 3; o++) {
          if (l->gemm[d][b][f][o]) clReleaseKernel(l->gemm[d][b][f][o]);
          if (l->gprog[d][b][f][o]) clReleaseProgram(l->gprog[d][b][f][o]);
        }
    for (int b = 0; b < NGEMV; b++)
      for (int h = 0; h < 2; h++)
        for (int o = 0; o < 4; o++)
          for (int c = 0; c < 3; c++) {
            if (l->gemv[d][b][h][o][c]) clReleaseKernel(l->gemv[d][b][h][o][c]);
            if (l->vprog[d][b][h][o][c]) clReleaseProgram(l->vprog[d][b][h][o][c]);
          }
  }
  if (l->reduce) clReleaseKernel(l->reduce);
  if (l->rprog) clReleaseProgram(l->rprog);
  if (l->wide) clReleaseMemObject(l->wide);
  if (l->half) clReleaseMemObject(l->half);
  if (l->part) clReleaseMemObject(l->part);
  if (l->counts) clReleaseMemObject(l->counts);
  free(l);
}

uint64_t demo_linear_enqueues(const demo_linear *l) { return l->enqueues; }

/* Builds the kernels' source (with the tensor-core kernel: mma 1; the
 * tiled GEMM after the source's first part and the 16-bit mma part: mma 2;
 * the few-row kernel likewise: mma 3; the split's reduce kernel: mma 4; the
 * f16 copy of ggml's blocks like the 16-bit kernels: mma 5) with these
 * options and returns the program and its kernel `name`. */
static clpa_status build(demo_linear *l, int mma, int d, const char *shape, const char *name,
                         cl_program *prog, cl_kernel *kern) {
  char opts[256];
  snprintf(opts, sizeof opts, "-cl-std=CL1.2 -DDEMO_WDT=%d -DWTILE=%d %s", kernel_wdt(d),
           demo_wfmt_is_tiled((demo_wfmt)d), shape);
  const char *src[16];
  unsigned n = 0;
  /* the 16-bit kernels (mma 2, 3) and the f16 copy (5) take the first parts alone: the weights'
   * types and ggml's blocks; the split's reduce kernel (mma 4) stands alone */
  for (unsigned i = 0; mma != 4 && i < (mma < 2 ? demo_linear_source_count : DEMO_LINEAR_TYPE_PARTS);
       i++)
    src[n++] = demo_linear_source[i];
  if (mma) src[n++] = demo_linear_swiglu_source;
  if (mma == 2 || mma == 3 || mma == 5) src[n++] = demo_linear_mma16_source;
  if (mma == 5) src[n++] = demo_linear_widen_h_source;
  if (mma == 1 || mma == 4) src[n++] = demo_linear_split_source;
  for (unsigned i = 0; mma == 1 && i < demo_linear_mma_source_count; i++)
    src[n++] = demo_linear_mma_source[i];
  for (unsigned i = 0; mma == 2 && i < demo_linear_gemm_source_count; i++)
    src[n++] = demo_linear_gemm_source[i];
  for (unsigned i = 0; mma == 3 && i < demo_linear_gemv_source_count; i++)
    src[n++] = demo_linear_gemv_source[i];
  cl_int e;
  cl_program p = clCreateProgramWithSource(l->ctx, n, src, NULL, &e);
  if (e != CL_SUCCESS)
    return demo_fail(demo_cl_status(e), "demo_linear: clCreateProgramWithSource: OpenCL error %d",
                     (int)e);
  e = clBuildProgram(p, 1, &l->dev, opts, NULL, NULL);
  if (e != CL_SUCCESS) {
    char log[1536] = "";
    clGetProgramBuildInfo(p, l->dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    clReleaseProgram(p);
    return demo_fail(CLPA_ERR_BUILD, "demo_linear: clBuildProgram(%s): OpenCL error %d: %s",
                     opts, (int)e, log);
  }
  cl_kernel k = clCreateKernel(p, name, &e);
  if (e != CL_SUCCESS) {
    clReleaseProgram(p);
    return demo_fail(demo_cl_status(e), "demo_linear: clCreateKernel(%s): OpenCL error %d",
                     name, (int)e);
  }
  *prog = p, *kern = k;
  return CLPA_OK;
}

/* The streaming program of dtype d and row block b, built on first use;
 * demo_linear_widen of that dtype comes from it too. */
static clpa_status program(demo_linear *l, int d, int b) {
  if (l->stream[d][b]) return CLPA_OK;
  int32_t nc; /* the block's own rows give back b and its columns a group */
  demo_linear_stream_block(&l->tune, (demo_wfmt)d, row_blocks[b], &nc);
  char opts[160];
  snprintf(opts, sizeof opts, "-DROWS=%d -DNC=%d -DLANES=%d -DGROUPS=%d", (int)row_blocks[b],
           (int)nc, (int)l->tune.lanes, (int)l->tune.groups);
  clpa_status st = build(l, 0, d, opts, "demo_linear_stream", &l->prog[d][b], &l->stream[d][b]);
  if (st != CLPA_OK || l->widen[d]) return st;
  cl_int e;
  l->widen[d] = clCreateKernel(l->prog[d][b], "demo_linear_widen", &e);
  return demo_cl_check(e, "demo_linear: clCreateKernel(demo_linear_widen)");
}

/* The tensor-core program of dtype d and row block b (mma_blocks). */
static clpa_status mma_program(demo_linear *l, int d, int b) {
  if (l->mma[d][b]) return CLPA_OK;
  char opts[192];
  const int nt = (int)mma_blocks[b] / 8;
  snprintf(opts, sizeof opts,
           "-DNT=%d -DMWARPS=%d -DCT=%d -DSC=%d -DDEMO_PTX=%d", nt,
           (int)l->tune.mwarps, (int)l->tune.mma_ct, demo_linear_mma_stage(nt), l->nvidia);
  return build(l, 1, d, opts, "demo_linear_mma", &l->mprog[d][b], &l->mma[d][b]);
}

/* Grows *buf to hold elems elements of size bytes (zeroed when zero is set). */
static clpa_status grow(demo_linear *l, cl_mem *buf, size_t *have, size_t elems, size_t size,
                        int zero, const char *what) {
  if (*have >= elems) return CLPA_OK;
  if (*buf) clReleaseMemObject(*buf);
  *have = 0;
  cl_int e;
  *buf = clCreateBuffer(l->ctx, CL_MEM_READ_WRITE, elems * size, NULL, &e);
  if (e == CL_SUCCESS && zero) {
    const cl_int z = 0;
    e = clEnqueueFillBuffer(l->queue, *buf, &z, sizeof z, 0, elems * size, 0, NULL, NULL);
    l->enqueues += e == CL_SUCCESS;
  }
  if (e != CL_SUCCESS) {
    if (*buf) clReleaseMemObject(*buf);
    *buf = NULL;
    return demo_fail(demo_cl_status(e), "demo_linear_run: %s (%zu bytes): OpenCL error %d",
                     what, elems * size, (int)e);
  }
  *have = elems;
  return CLPA_OK;
}

/* Whether a kernel's last split adds the sums up itself: the tensor-core kernel's on NVIDIA (a
 * tile of at most a few thousand sums); the tiled GEMM's tiles (8 or 16 thousand) go to the
 * reduce kernel everywhere (record 0038). */
static int self_adds(const demo_linear *l, int counted) { return counted && l->nvidia; }

/* The split sums' buffer for a call of `split` splits, and the tiles' counters (`tiles` of them)
 * where the kernel (counted: it takes them) adds up itself, else the reduce kernel. */
static clpa_status split_buffers(demo_linear *l, int32_t split, int32_t rows, int32_t n, size_t tiles,
                                 int counted) {
  clpa_status st = grow(l, &l->part, &l->part_elems, (size_t)split * (size_t)rows * (size_t)n,
                        sizeof(float), 0, "clCreateBuffer(the split sums)");
  if (st == CLPA_OK && self_adds(l, counted))
    st = grow(l, &l->counts, &l->count_elems, tiles, sizeof(cl_int), 1,
              "clCreateBuffer(the tiles' counters)");
  if (st == CLPA_OK && !self_adds(l, counted) && !l->reduce)
    st = build(l, 4, DEMO_W_F32, "-DDEMO_PTX=0", "demo_linear_split_reduce", &l->rprog, &l->reduce);
  return st;
}

/* Enqueues kernel kr (its arguments 0-6 set) with the split sums as argument 7 (and where counted
 * the tiles' counters as 8) over (g0, g1, split) work-groups of wg items, and with split > 1,
 * unless the kernel adds up itself, the reduce kernel after it: C (+)= the sums in split order. */
static clpa_status launch_split(demo_linear *l, cl_kernel kr, int counted, size_t g0, size_t g1,
                                size_t wg, int32_t split, cl_mem C, int32_t rows, int32_t n,
                                int accumulate, int os, cl_event *ev, const char *what) {
  /* unread where they stand for C: split 1, and counters where the reduce kernel adds up */
  cl_mem part = split > 1 ? l->part : C, counts = split > 1 && self_adds(l, counted) ? l->counts : C;
  cl_int e = clSetKernelArg(kr, 7, sizeof part, &part);
  if (counted) e |= clSetKernelArg(kr, 8, sizeof counts, &counts);
  const size_t global[3] = {g0 * wg, g1, (size_t)split}; /* row blocks fastest */
  const size_t local[3] = {wg, 1, 1};
  const int reduce = split > 1 && !self_adds(l, counted);
  if (e == CL_SUCCESS)
    e = clEnqueueNDRangeKernel(l->queue, kr, 3, NULL, global, local, 0, NULL, reduce ? NULL : ev);
  l->enqueues += e == CL_SUCCESS;
  if (e != CL_SUCCESS || !reduce) return demo_cl_check(e, what);
  const cl_int acc = accumulate != 0;
  e = clSetKernelArg(l->reduce, 0, sizeof l->part, &l->part);
  e |= clSetKernelArg(l->reduce, 1, sizeof rows, &rows);
  e |= clSetKernelArg(l->reduce, 2, sizeof n, &n);
  e |= clSetKernelArg(l->reduce, 3, sizeof split, &split);
  e |= clSetKernelArg(l->reduce, 4, sizeof C, &C);
  e |= clSetKernelArg(l->reduce, 5, sizeof acc, &acc);
  const cl_int o = os;
  e |= clSetKernelArg(l->reduce, 6, sizeof o, &o);
  const size_t items = (size_t)rows * (size_t)(os ? n / 2 : n);
  if (e == CL_SUCCESS) e = clEnqueueNDRangeKernel(l->queue, l->reduce, 1, NULL, &items, NULL, 0, NULL, ev);
  l->enqueues += e == CL_SUCCESS;
  return demo_cl_check(e, "demo_linear_run: clEnqueueNDRangeKernel(demo_linear_split_reduce)");
}

static clpa_status check(demo_wfmt w, int32_t rows, int32_t n, int32_t k) {
  if ((unsigned)w >= DEMO_W_COUNT)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "demo_linear_run: weight form %d (f32, f16, bf16, f16_tiled, bf16_tiled,"
                     " q8_0, q4_0, q4_K, q5_K or q6_K)", (int)w);
  if (rows < 0 || n <= 0 || k <= 0)
    return demo_fail(CLPA_ERR_INVALID_ARG, "demo_linear_run: rows %d, n %d, k %d", (int)rows,
                     (int)n, (int)k);
  if (!demo_wfmt_row_bytes(w, k) && demo_wfmt_is_tiled(w))
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "demo_linear_run: k %d is not a multiple of 32, the k of %s's tiles", (int)k,
                     demo_wfmt_name(w));
  if (!demo_wfmt_row_bytes(w, k))
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "demo_linear_run: k %d is not a whole number of %s blocks of %u", (int)k,
                     demo_wfmt_name(w), (unsigned)demo_wfmt_block_elems(w));
  return CLPA_OK;
}

/* The call's buffers (named by names, "A W C" as the call calls them) are all there: a NULL one
 * would reach the kernels as a null pointer. */
static clpa_status buffers(const char *fn, const char *names, cl_mem a, cl_mem b, cl_mem c) {
  if (a && b && c) return CLPA_OK;
  return demo_fail(CLPA_ERR_INVALID_ARG, "%s: %s must be buffers (the %s is NULL)", fn, names,
                   !a ? "first" : !b ? "second" : "third");
}

static clpa_status set_args(cl_kernel kr, cl_mem A, int32_t rows, int32_t k, cl_mem W, int32_t n,
                            cl_mem C, int accumulate) {
  /* args 0-6; the mma kernel's 7 and 8 are set by run_mma */
  const cl_int acc = accumulate != 0;
  cl_int e = clSetKernelArg(kr, 0, sizeof A, &A);
  e |= clSetKernelArg(kr, 1, sizeof rows, &rows);
  e |= clSetKernelArg(kr, 2, sizeof k, &k);
  e |= clSetKernelArg(kr, 3, sizeof W, &W);
  e |= clSetKernelArg(kr, 4, sizeof n, &n);
  e |= clSetKernelArg(kr, 5, sizeof C, &C);
  e |= clSetKernelArg(kr, 6, sizeof acc, &acc);
  return e == CL_SUCCESS ? CLPA_OK
                         : demo_fail(CLPA_ERR_OPENCL, "demo_linear_run: clSetKernelArg failed");
}

/* Enqueues kernel kr over (g0, g1) work-groups of wg work-items in the first dimension. */
static clpa_status launch(demo_linear *l, cl_kernel kr, size_t g0, size_t g1, size_t wg, cl_event *ev,
                          const char *what) {
  const size_t global[2] = {g0 * wg, g1}, local[2] = {wg, 1};
  const cl_int e = clEnqueueNDRangeKernel(l->queue, kr, 2, NULL, global, local, 0, NULL, ev);
  l->enqueues += e == CL_SUCCESS;
  return demo_cl_check(e, what);
}

static clpa_status run_stream(demo_linear *l, int d, cl_mem A, cl_mem W, cl_mem C, int32_t rows,
                              int32_t n, int32_t k, int accumulate, cl_event *ev) {
  if (k % 8)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "demo_linear_run: the streaming kernel needs k a multiple of 8 (k %d)",
                     (int)k);
  int32_t nc;
  const int b = demo_linear_stream_block(&l->tune, (demo_wfmt)d, rows, &nc);
  clpa_status st = program(l, d, b);
  if (st == CLPA_OK) st = set_args(l->stream[d][b], A, rows, k, W, n, C, accumulate);
  if (st != CLPA_OK) return st;
  const size_t wg = (size_t)l->tune.groups * (size_t)l->tune.lanes;
  const size_t cols = (size_t)l->tune.groups * (size_t)nc, rb = (size_t)row_blocks[b];
  return launch(l, l->stream[d][b], ((size_t)rows + rb - 1) / rb, ((size_t)n + cols - 1) / cols, wg,
                ev, "demo_linear_run: clEnqueueNDRangeKernel(demo_linear_stream)");
}

static clpa_status run_mma(demo_linear *l, int d, cl_mem A, cl_mem W, cl_mem C, int32_t rows,
                           int32_t n, int32_t k, int accumulate, cl_event *ev) {
  if (!demo_linear_mma_runs(k, (demo_wfmt)d))
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "demo_linear_run: the tensor-core kernel needs k a multiple of 32"
                     " and f16, bf16 or block-form weights (k %d, %s)", (int)k, demo_wfmt_name((demo_wfmt)d));
  const int b = demo_linear_block_in(mma_blocks, NMMA, rows);
  const int32_t split = demo_linear_mma_split(l, rows, n, k);
  const size_t wg = 32 * (size_t)l->tune.mwarps, rb = (size_t)mma_blocks[b];
  const size_t cols = (size_t)demo_linear_mma_cols(l);
  const size_t tiles = ((size_t)n + cols - 1) / cols, blocks = ((size_t)rows + rb - 1) / rb;
  clpa_status st = mma_program(l, d, b);
  if (st == CLPA_OK && split > 1) st = split_buffers(l, split, rows, n, tiles * blocks, 1);
  if (st == CLPA_OK) st = set_args(l->mma[d][b], A, rows, k, W, n, C, accumulate);
  if (st != CLPA_OK) return st;
  return launch_split(l, l->mma[d][b], 1, blocks, tiles, wg, split, C, rows, n, accumulate, 0, ev,
                      "demo_linear_run: clEnqueueNDRangeKernel(demo_linear_mma)");
}

/* The tiled GEMM's program of dtype d, 64 (b 0) or 128 rows (1) a
 * work-group, f32 activations and 32 (s 0) or 64 k (1) a stage, or f16
 * activations by cp.async, 32 k a stage (s 2). */
static clpa_status gemm_program(demo_linear *l, int d, int b, int s, int o) {
  if (l->gemm[d][b][s][o]) return CLPA_OK;
  char opts[112];
  snprintf(opts, sizeof opts, "-DMT=%d -DKS=%d -DAH=%d -DOS=%d -DDEMO_PTX=%d", 2 + 2 * b,
           s == 1 ? 4 : 2, s == 2, o, l->nvidia);
  return build(l, 2, d, opts, "demo_linear_gemm", &l->gprog[d][b][s][o], &l->gemm[d][b][s][o]);
}

clpa_status demo_linear_mma_peak_kernel(demo_linear *l, cl_kernel *k) {
  *k = NULL;
  if (!l->nvidia)
    return demo_fail(CLPA_ERR_UNSUPPORTED, "demo_linear_mma_peak_kernel: NVIDIA only (inline PTX)");
  clpa_status st = gemm_program(l, DEMO_W_F16, 0, 0, 0);
  if (st != CLPA_OK) return st;
  cl_int e;
  *k = clCreateKernel(l->gprog[DEMO_W_F16][0][0][0], "demo_linear_mma_peak", &e);
  return demo_cl_check(e, "demo_linear: clCreateKernel(demo_linear_mma_peak)");
}

/* kr (demo_linear_widen or _h) over (per_row, n) work-items: out = W decoded; local (lx, 1),
 * or the runtime's choice where lx is 0 */
static clpa_status launch_widen(demo_linear *l, cl_kernel kr, cl_mem W, cl_mem out, int32_t n,
                                size_t per_row, size_t lx, int32_t k, cl_event *ev,
                                const char *what) {
  const size_t items[2] = {per_row, (size_t)n}, local[2] = {lx, 1};
  cl_int e = clSetKernelArg(kr, 0, sizeof W, &W);
  e |= clSetKernelArg(kr, 1, sizeof out, &out);
  e |= clSetKernelArg(kr, 2, sizeof k, &k);
  if (e == CL_SUCCESS)
    e = clEnqueueNDRangeKernel(l->queue, kr, 2, NULL, items, lx ? local : NULL, 0, NULL, ev);
  l->enqueues += e == CL_SUCCESS;
  return demo_cl_check(e, what);
}

/* groups of 8 elements a work-item of the f16 copy (demo_linear_widen_h's WPER): two for the
 * K-quants, one for Q8_0 and Q4_0 (record 0029, "The copy kernel, measured") */
static int widen_per(int d) { return d >= DEMO_W_Q4_K ? 2 : 1; }

/* out [n k] halves = block form d's W as f16 (demo_linear_widen_h), its program built on first
 * use; work-groups of up to 256 along a row (the largest power of two its items divide into). */
static clpa_status widen_h(demo_linear *l, int d, cl_mem W, cl_mem out, int32_t n, int32_t k,
                           cl_event *ev) {
  if (!l->widen_h[d]) {
    char opts[48];
    snprintf(opts, sizeof opts, "-DDEMO_PTX=%d -DWPER=%d", l->nvidia, widen_per(d));
    clpa_status st = build(l, 5, d, opts, "demo_linear_widen_h", &l->hprog[d], &l->widen_h[d]);
    if (st != CLPA_OK) return st;
  }
  const size_t per = (size_t)k / (8 * (size_t)widen_per(d)); /* k: a multiple of 32 (check) */
  size_t lx = 1;
  while (lx < 256 && per % (2 * lx) == 0) lx *= 2;
  return launch_widen(l, l->widen_h[d], W, out, n, per, lx, k, ev,
                      "demo_linear: demo_linear_widen_h");
}

clpa_status demo_linear_dequantize_f16(demo_linear *l, demo_wfmt w, cl_mem W, cl_mem out,
                                       int32_t n, int32_t k, cl_event *ev) {
  if (ev) *ev = NULL;
  if (!demo_wfmt_is_block(w))
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "demo_linear_dequantize_f16: w must be one of ggml's block forms (%s)",
                     demo_wfmt_name(w));
  clpa_status st = check(w, 1, n, k);
  if (st == CLPA_OK) st = buffers("demo_linear_dequantize_f16", "W and out", W, out, out);
  return st == CLPA_OK ? widen_h(l, (int)w, W, out, n, k, ev) : st;
}

/* half: A is f16 (demo_linear_run_f16); C as gemm_program's o says */
static clpa_status run_gemm_out(demo_linear *l, int d, cl_mem A, cl_mem W, cl_mem C, int32_t rows,
                                int32_t n, int32_t k, int accumulate, cl_event *ev, int half, int o) {
  if (!demo_linear_gemm_runs(k, (demo_wfmt)d))
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "demo_linear_run: the tiled GEMM needs k a multiple of 32 and f16, bf16 or"
                     " block-form weights (k %d, %s)", (int)k, demo_wfmt_name((demo_wfmt)d));
  if (demo_linear_gemm_dq(l, d, rows)) { /* the weight decoded into l->half, then multiplied as f16 */
    clpa_status st = grow(l, &l->half, &l->half_elems, (size_t)n * (size_t)k, 2, 0,
                          "clCreateBuffer(f16 copy of a weight)");
    /* where the copy does not fit, f32 activations go the blocks' own way (decoded in the GEMM's
     * loads); f16 ones cannot */
    if (st != CLPA_OK && half) return st;
    if (st == CLPA_OK) {
      if ((st = widen_h(l, d, W, l->half, n, k, NULL)) != CLPA_OK) return st;
      d = DEMO_W_F16, W = l->half;
    }
  }
  const int32_t bm = demo_linear_gemm_rows(l, rows, n);
  /* else 32 k a stage */
  const int b = bm == 128, ks = half ? 2 : demo_linear_gemm_stage_k(l, k, 0) == 64;
  const int32_t split = demo_linear_gemm_split(l, rows, n, k, half);
  const size_t blocks = ((size_t)rows + (size_t)bm - 1) / (size_t)bm, tiles = ((size_t)n + 127) / 128;
  clpa_status st = gemm_program(l, d, b, ks, o);
  cl_kernel kr = st == CLPA_OK ? l->gemm[d][b][ks][o] : NULL;
  if (st == CLPA_OK && split > 1) st = split_buffers(l, split, rows, n, blocks * tiles, 0);
  if (st == CLPA_OK) st = set_args(kr, A, rows, k, W, n, C, accumulate);
  if (st != CLPA_OK) return st;
  return launch_split(l, kr, 0, blocks, tiles, 256, split, C, rows, n, accumulate, o, ev,
                      "demo_linear_run: clEnqueueNDRangeKernel(demo_linear_gemm)");
}

static clpa_status run_gemm(demo_linear *l, int d, cl_mem A, cl_mem W, cl_mem C, int32_t rows,
                            int32_t n, int32_t k, int accumulate, cl_event *ev, int half) {
  return run_gemm_out(l, d, A, W, C, rows, n, k, accumulate, ev, half, 0);
}

/* The few-row kernel's program of dtype d, 8, 16, 32 or 64 rows a work-group
 * (b), f32 (h 0) or f16 activations (1), C (o 0), SwiGLU's activations as
 * f32 (1) or f16 (2) or RoPE and the cache write (3), and 1, 2 or 4 column
 * tiles (c 0, 1, 2). */
static clpa_status gemv_program(demo_linear *l, int d, int b, int h, int o, int c) {
  if (l->gemv[d][b][h][o][c]) return CLPA_OK;
  char opts[160];
  const int nt = (int)gemv_blocks[b] / 8, ct = 1 << c;
  snprintf(opts, sizeof opts,
           "-DNT=%d -DCT=%d -DKW=%d -DUN=%d -DAH=%d -DOS=%d -DDEMO_PTX=%d -DDEMO_BYTES8=1", nt, ct,
           (int)demo_linear_gemv_warps(l, nt, ct), (int)l->tune.gemv_unroll, h, o, l->nvidia);
  return build(l, 3, d, opts, "demo_linear_gemv", &l->vprog[d][b][h][o][c], &l->gemv[d][b][h][o][c]);
}

/* Arguments 7-24 of the RoPE epilogue's program (o 3). */
static clpa_status set_rope_args(cl_kernel kr, const demo_qkv_rope *r) {
  cl_int e = clSetKernelArg(kr, 7, sizeof r->pos, &r->pos);
  e |= clSetKernelArg(kr, 8, sizeof r->cs, &r->cs);
  e |= clSetKernelArg(kr, 9, sizeof r->hd, &r->hd);
  e |= clSetKernelArg(kr, 10, sizeof r->heads, &r->heads);
  e |= clSetKernelArg(kr, 11, sizeof r->kv_heads, &r->kv_heads);
  e |= clSetKernelArg(kr, 12, sizeof r->slots, &r->slots);
  e |= clSetKernelArg(kr, 13, sizeof r->nslots, &r->nslots);
  e |= clSetKernelArg(kr, 14, sizeof r->B, &r->B);
  e |= clSetKernelArg(kr, 15, sizeof r->f16, &r->f16);
  e |= clSetKernelArg(kr, 16, sizeof r->kc, &r->kc);
  e |= clSetKernelArg(kr, 17, sizeof r->vc, &r->vc);
  const cl_ulong s[6] = {r->bs, r->hs, r->kdh, r->kts, r->vds, r->vts};
  for (cl_uint i = 0; i < 6; i++) e |= clSetKernelArg(kr, 18 + i, sizeof s[i], &s[i]);
  e |= clSetKernelArg(kr, 24, sizeof r->x, &r->x);
  return e == CL_SUCCESS
             ? CLPA_OK
             : demo_fail(CLPA_ERR_OPENCL, "demo_linear_run_qkv_rope: clSetKernelArg failed");
}

/* half: A is f16 (demo_linear_run_f16); C as gemv_program's o says (o 3: with r's rows) */
static clpa_status run_gemv_out(demo_linear *l, int d, cl_mem A, cl_mem W, cl_mem C, int32_t rows,
                                int32_t n, int32_t k, int accumulate, cl_event *ev, int half, int o,
                                const demo_qkv_rope *r) {
  if (!demo_linear_gemm_runs(k, (demo_wfmt)d))
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "demo_linear_run: the few-row kernel (gemv) needs k a multiple of 32 and f16,"
                     " bf16 or block-form weights (k %d, %s)", (int)k, demo_wfmt_name((demo_wfmt)d));
  const int b = demo_linear_gemv_block(l, rows);
  int32_t ct, kw;
  demo_linear_gemv_shape(l, rows, n, &ct, &kw);
  const int c = ct == 4 ? 2 : ct == 2;
  clpa_status st = gemv_program(l, d, b, half, o, c);
  cl_kernel kr = st == CLPA_OK ? l->gemv[d][b][half][o][c] : NULL;
  if (st == CLPA_OK) st = set_args(kr, A, rows, k, W, n, C, accumulate);
  if (st == CLPA_OK && o == 3) st = set_rope_args(kr, r);
  if (st != CLPA_OK) return st;
  const size_t rb = (size_t)gemv_blocks[b], cols = 16 * (size_t)ct;
  return launch(l, kr, ((size_t)rows + rb - 1) / rb, ((size_t)n + cols - 1) / cols, 32 * (size_t)kw, ev,
                "demo_linear_run: clEnqueueNDRangeKernel(demo_linear_gemv)");
}

static clpa_status run_gemv(demo_linear *l, int d, cl_mem A, cl_mem W, cl_mem C, int32_t rows,
                            int32_t n, int32_t k, int accumulate, cl_event *ev, int half) {
  return run_gemv_out(l, d, A, W, C, rows, n, k, accumulate, ev, half, 0, NULL);
}

/* out [n, k] = W as floats (demo_linear_widen); the program is built. */
static clpa_status widen(demo_linear *l, int d, cl_mem W, cl_mem out, int32_t n, int32_t k) {
  /* block and tiled forms: 8 elements an item */
  const int by8 = demo_wfmt_is_block((demo_wfmt)d) || demo_wfmt_is_tiled((demo_wfmt)d);
  return launch_widen(l, l->widen[d], W, out, n, by8 ? (size_t)k / 8 : (size_t)k, 0, k, NULL,
                      "demo_linear: demo_linear_widen");
}

clpa_status demo_linear_dequantize(demo_linear *l, demo_wfmt w, cl_mem W, cl_mem out, int32_t n,
                                   int32_t k) {
  clpa_status st = check(w, 1, n, k);
  if (st == CLPA_OK) st = buffers("demo_linear_dequantize", "W and out", W, out, out);
  if (st == CLPA_OK) st = program(l, (int)w, 0);
  return st == CLPA_OK ? widen(l, (int)w, W, out, n, k) : st;
}

static clpa_status run_clblast(demo_linear *l, int d, cl_mem A, cl_mem W, cl_mem C, int32_t rows,
                               int32_t n, int32_t k, int accumulate, cl_event *ev) {
  cl_mem w = W;
  const size_t count = (size_t)n * (size_t)k;
  clpa_status st;
  if (d != DEMO_W_F32) {
    if ((st = program(l, d, 0)) != CLPA_OK ||
        (st = grow(l, &l->wide, &l->wide_elems, count, sizeof(float), 0,
                   "clCreateBuffer(f32 copy of a weight)")) != CLPA_OK ||
        (st = widen(l, d, W, l->wide, n, k)) != CLPA_OK)
      return st;
    w = l->wide;
  }
  CLBlastStatusCode s = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes,
                                     (size_t)rows, (size_t)n, (size_t)k, 1.0f, A, 0, (size_t)k, w,
                                     0, (size_t)k, accumulate ? 1.0f : 0.0f, C, 0, (size_t)n,
                                     &l->queue, ev);
  l->enqueues += s == CLBlastSuccess; /* one, however many kernels CLBlast runs inside */
  if (s != CLBlastSuccess)
    return demo_fail(
        s == CLBlastOpenCLOutOfResources ? CLPA_ERR_OUT_OF_RESOURCES : CLPA_ERR_OPENCL,
        "CLBlastSgemm(%d x %d x %d): CLBlast status %d", (int)rows, (int)n, (int)k, (int)s);
  return CLPA_OK;
}

clpa_status demo_linear_run(demo_linear *l, demo_linear_engine e, demo_wfmt w, cl_mem A,
                            cl_mem W, cl_mem C, int32_t rows, int32_t n, int32_t k, int accumulate,
                            cl_event *ev) {
  const int d = (int)w;
  clpa_status st = check(w, rows, n, k);
  if (st == CLPA_OK) st = buffers("demo_linear_run", "A, W and C", A, W, C);
  if (st != CLPA_OK || rows == 0) return st;
  if (e == DEMO_LINEAR_AUTO) e = demo_linear_pick(l, rows, k, w);
  return e == DEMO_LINEAR_STREAM ? run_stream(l, d, A, W, C, rows, n, k, accumulate, ev)
         : e == DEMO_LINEAR_MMA  ? run_mma(l, d, A, W, C, rows, n, k, accumulate, ev)
         : e == DEMO_LINEAR_GEMM ? run_gemm(l, d, A, W, C, rows, n, k, accumulate, ev, 0)
         : e == DEMO_LINEAR_GEMV ? run_gemv(l, d, A, W, C, rows, n, k, accumulate, ev, 0)
                                 : run_clblast(l, d, A, W, C, rows, n, k, accumulate, ev);
}

clpa_status demo_linear_run_swiglu_out(demo_linear *l, demo_linear_engine e, demo_wfmt w, cl_mem A,
                                       int a_half, cl_mem W, cl_mem act, int act_half,
                                       int32_t rows, int32_t n, int32_t k, cl_event *ev) {
  clpa_status st = check(w, rows, n, k);
  if (st == CLPA_OK) st = buffers("demo_linear_run_swiglu_out", "A, W and act", A, W, act);
  if (st != CLPA_OK || rows == 0) return st;
  if (!demo_linear_takes_swiglu_out(l, e, rows, n, k, w) ||
      (a_half && !demo_linear_takes_f16(l, e, rows, k, w)))
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "demo_linear_run_swiglu_out: SwiGLU's activations come from gemv or the tiled"
                     " GEMM, with f16, bf16 or block-form weights, k a multiple of 32 and n of 16"
                     " (f16 activations in: where the engine takes them) (%s, %s, %d x %d x %d%s)",
                     demo_linear_engine_name(e), demo_wfmt_name(w), (int)rows, (int)n, (int)k,
                     a_half ? ", f16 in" : "");
  if (e == DEMO_LINEAR_AUTO) e = demo_linear_pick(l, rows, k, w);
  return e == DEMO_LINEAR_GEMM
             ? run_gemm_out(l, (int)w, A, W, act, rows, n, k, 0, ev, a_half != 0, act_half ? 2 : 1)
             : run_gemv_out(l, (int)w, A, W, act, rows, n, k, 0, ev, a_half != 0, act_half ? 2 : 1, NULL);
}

clpa_status demo_linear_run_qkv_rope(demo_linear *l, demo_linear_engine e, demo_wfmt w, cl_mem A,
                                     int a_half, cl_mem W, cl_mem qkv, int32_t rows, int32_t n,
                                     int32_t k, const demo_qkv_rope *r, cl_event *ev) {
  const char *fn = "demo_linear_run_qkv_rope";
  clpa_status st = check(w, rows, n, k);
  if (st == CLPA_OK) st = buffers(fn, "A, W and qkv", A, W, qkv);
  if (st != CLPA_OK) return st;
  if (!demo_linear_takes_qkv_rope(l, e, rows, k, w) ||
      (a_half && !demo_linear_takes_f16(l, e, rows, k, w)))
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "%s: RoPE and the cache write come from gemv alone, with f16, bf16 or"
                     " block-form weights and k a multiple of 32 (f16 activations in: f16 or"
                     " block-form weights) (%s, %s, %d x %d x %d%s)", fn, demo_linear_engine_name(e),
                     demo_wfmt_name(w), (int)rows, (int)n, (int)k, a_half ? ", f16 in" : "");
  if (!r || r->hd <= 0 || r->hd % 2 || r->heads <= 0 || r->kv_heads <= 0 ||
      ((int64_t)r->heads + 2 * (int64_t)r->kv_heads) * r->hd != n)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "%s: r must give an even head size and heads whose (heads + 2 kv_heads) hd"
                     " is n (%d; hd %d, heads %d, kv_heads %d)", fn, (int)n, r ? (int)r->hd : 0,
                     r ? (int)r->heads : 0, r ? (int)r->kv_heads : 0);
  if (!r->pos || !r->cs || !r->slots || !r->kc || !r->vc || r->B <= 0 || r->x <= 0 || r->nslots < 0)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "%s: r's pos, cs, slots, kc and vc must be buffers, B and x positive, nslots"
                     " not negative (B %d, x %d, nslots %lld)", fn, (int)r->B, (int)r->x,
                     (long long)r->nslots);
  if (rows == 0) return CLPA_OK;
  return run_gemv_out(l, (int)w, A, W, qkv, rows, n, k, 0, ev, a_half != 0, 3, r);
}

clpa_status demo_linear_run_f16(demo_linear *l, demo_linear_engine e, demo_wfmt w, cl_mem A,
                                cl_mem W, cl_mem C, int32_t rows, int32_t n, int32_t k,
                                int accumulate, cl_event *ev) {
  clpa_status st = check(w, rows, n, k);
  if (st == CLPA_OK) st = buffers("demo_linear_run_f16", "A, W and C", A, W, C);
  if (st != CLPA_OK || rows == 0) return st;
  if (!demo_linear_takes_f16(l, e, rows, k, w))
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "demo_linear_run_f16: f16 activations go to gemv with f16 weights or ggml's"
                     " blocks, or the tiled GEMM with the table's gemm_f16a and f16 weights (or"
                     " blocks from gemm_dq_rows), k a multiple of 32 (%s, %s, k %d, %d rows)",
                     demo_linear_engine_name(e), demo_wfmt_name(w), (int)k, (int)rows);
  if (e == DEMO_LINEAR_AUTO) e = demo_linear_pick(l, rows, k, w);
  return (e == DEMO_LINEAR_GEMV ? run_gemv : run_gemm)(l, (int)w, A, W, C, rows, n, k, accumulate,
                                                        ev, 1);
}
