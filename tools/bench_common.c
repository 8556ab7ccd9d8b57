/* bench_common.c — device setup, random inputs, timing and the copy ceiling. */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng_state = 0x243f6a8885a308d3ULL;
uint64_t bench_rand(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
uint64_t bench_rand_state(void) { return rng_state; }
void bench_rand_restore(uint64_t state) { rng_state = state; }

const char *bench_shapes_name(bench_shapes s) {
  return s == BENCH_SHAPES_CPU ? "cpu" : s == BENCH_SHAPES_GPU ? "gpu" : "auto";
}

const char *bench_parse_shapes(const char *text, void *value) {
  bench_shapes *s = value;
  if (strcmp(text, "auto") == 0) *s = BENCH_SHAPES_AUTO;
  else if (strcmp(text, "gpu") == 0) *s = BENCH_SHAPES_GPU;
  else if (strcmp(text, "cpu") == 0) *s = BENCH_SHAPES_CPU;
  else return "auto, gpu or cpu";
  return NULL;
}

bench_shapes bench_shapes_pick(bench_shapes asked) {
  if (asked != BENCH_SHAPES_AUTO) return asked;
  size_t n = 0, sel = 0;
  clpa_device_info *devs = NULL;
  int cpu = 0;
  if (clpa_devices_list(NULL, 0, &n) == CLPA_OK && n > 0 && (devs = calloc(n, sizeof *devs)) &&
      clpa_devices_list(devs, n, &n) == CLPA_OK && clpa_device_select(NULL, &sel) == CLPA_OK &&
      sel < n)
    cpu = devs[sel].is_cpu;
  free(devs);
  return cpu ? BENCH_SHAPES_CPU : BENCH_SHAPES_GPU;
}

int bench_open(bench_env *env) {
  memset(env, 0, sizeof *env);
  clpa_context_config cfg;
  clpa_context_config_init(&cfg);
  cfg.profiling = 1;
  if (clpa_context_create(&cfg, &env->ctx) != CLPA_OK ||
      clpa_context_device_info(env->ctx, &env->info) != CLPA_OK) {
    fprintf(stderr, "clpa-bench: %s\n", clpa_last_error());
    return 1;
  }
  return 0;
}

void bench_close(bench_env *env) {
  if (env->flush_kernel) clReleaseKernel(env->flush_kernel);
  if (env->flush_prog) clReleaseProgram(env->flush_prog);
  if (env->flush_buf) clReleaseMemObject(env->flush_buf);
  if (env->flush_sink) clReleaseMemObject(env->flush_sink);
  clpa_context_destroy(env->ctx);
  memset(env, 0, sizeof *env);
}

cl_mem bench_buffer_quiet(bench_env *env, const void *host, size_t bytes) {
  cl_int err;
  cl_mem m = clCreateBuffer(clpa_context_cl_context(env->ctx),
                            CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                            (void *)host, &err);
  return err == CL_SUCCESS ? m : NULL;
}

cl_mem bench_buffer(bench_env *env, const void *host, size_t bytes) {
  cl_mem m = bench_buffer_quiet(env, host, bytes);
  if (!m) fprintf(stderr, "clpa-bench: clCreateBuffer(%zu bytes) failed\n", bytes);
  return m;
}

/* Random bit patterns that decode to finite values in roughly [-2, 2]
 * (times the scale for fp8): no conversion code needed. */
static void random_elements(clpa_dtype dtype, void *dst, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t r = (uint32_t)bench_rand();
    switch (dtype) {
      case CLPA_DTYPE_F32: {
        uint32_t bits = (r & 0x807fffffu) | ((uint32_t)(125 + r % 3) << 23);
        memcpy((uint32_t *)dst + i, &bits, 4);
        break;
      }
      case CLPA_DTYPE_F16:
        ((uint16_t *)dst)[i] = (uint16_t)((r & 0x83ffu) | ((13u + (r >> 16) % 3) << 10));
        break;
      case CLPA_DTYPE_BF16:
        ((uint16_t *)dst)[i] = (uint16_t)((r & 0x807fu) | ((125u + (r >> 16) % 3) << 7));
        break;
      default: /* fp8: any code but the NaN/inf exponents */
        ((uint8_t *)dst)[i] = (uint8_t)((r & 0x83u) | ((4u + (r >> 8) % 6) << 3));
        break;
    }
  }
}

#define RANDOM_CHUNK ((size_t)16 << 20)

cl_mem bench_random_cache(bench_env *env, clpa_dtype dtype, size_t n) {
  const size_t esz = clpa_dtype_size(dtype), bytes = n * esz;
  const size_t chunk = bytes < RANDOM_CHUNK ? bytes : RANDOM_CHUNK / esz * esz;
  if (bytes > env->info.max_alloc_bytes) return NULL;
  void *host = malloc(chunk ? chunk : 1);
  cl_mem m = host ? bench_buffer_quiet(env, NULL, bytes ? bytes : 1) : NULL;
  if (m) random_elements(dtype, host, chunk / esz);
  /* Blocking writes: a device that allocates lazily says here that it
   * cannot hold the buffer. */
  for (size_t at = 0; m && at < bytes; at += chunk) {
    size_t len = bytes - at < chunk ? bytes - at : chunk;
    if (clEnqueueWriteBuffer(clpa_context_cl_queue(env->ctx), m, CL_TRUE, at, len, host, 0, NULL,
                             NULL) != CL_SUCCESS) {
      clReleaseMemObject(m);
      m = NULL;
    }
  }
  free(host);
  return m;
}

double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#define now bench_now

static int time_failed(bench_env *env) {
  cli_progress_end();
  fprintf(stderr, "clpa-bench: %s\n", clpa_context_last_error(env->ctx));
  return 1;
}

int bench_time(bench_env *env, const char *what, bench_fn fn, const void *arg, double *per_call) {
  cli_progress("%s: warm-up calls...", what);
  for (int w = 0; w < 2; w++)
    if (fn(env->ctx, arg) != CLPA_OK || clpa_context_finish(env->ctx) != CLPA_OK)
      return time_failed(env);
  double t0 = now();
  if (fn(env->ctx, arg) != CLPA_OK || clpa_context_finish(env->ctx) != CLPA_OK)
    return time_failed(env);
  double one = now() - t0;
  int n = one > 0 ? (int)(0.05 / one) : 100;
  if (n < 1) n = 1;
  if (n > 200) n = 200;
  double batches[7];
  cli_progress_begin();
  for (int b = 0; b < 7; b++) {
    if (cli_progress_due()) cli_progress("%s: timing, batch %d of 7 (%d calls)", what, b + 1, n);
    t0 = now();
    for (int i = 0; i < n; i++)
      if (fn(env->ctx, arg) != CLPA_OK) return time_failed(env);
    if (clpa_context_finish(env->ctx) != CLPA_OK) return time_failed(env);
    batches[b] = (now() - t0) / n;
  }
  cli_progress_end();
  *per_call = cli_quantile(batches, 7, 0.5); /* the median batch */
  return 0;
}

/* ----------------------------------------------------------------------
 * Cold timing
 * -------------------------------------------------------------------- */
void bench_timing_pick(const bench_env *env, int cold, int hot, int32_t repeats, bench_timing *t) {
  t->cold = cold ? 1 : hot ? 0 : env->info.is_gpu;
  t->repeats = repeats;
}

const char *bench_mode_name(const bench_timing *t) { return t->cold ? "cold" : "hot"; }

#define FLUSH_MAX ((size_t)256 << 20)

/* Reads the whole buffer (a grid-stride loop, so any grid covers it); the
 * sink is written only when the xor of everything read has one value, so
 * the compiler keeps the loads and the write practically never happens. */
static const char FLUSH_SRC[] =
    "__kernel void bench_flush(__global const uint4 *src, uint n4, __global uint *sink) {\n"
    "  uint4 acc = (uint4)(0);\n"
    "  for (uint i = get_global_id(0); i < n4; i += get_global_size(0)) acc ^= src[i];\n"
    "  uint x = acc.x ^ acc.y ^ acc.z ^ acc.w;\n"
    "  if (x == 0x9e3779b9u) sink[0] = x;\n"
    "}\n";

static int flush_failed(const char *what, cl_int err) {
  cli_progress_end();
  fprintf(stderr, "clpa-bench: the cold-L2 flush kernel: %s failed (%d)\n", what, err);
  return 1;
}

/* Builds the flush kernel and fills its buffer once (real pages, not a
 * shared zero page a CPU would read from its cache). Returns 0 or 1. */
static int flush_init(bench_env *env) {
  if (env->flush_kernel) return 0;
  cl_context c = clpa_context_cl_context(env->ctx);
  cl_device_id dev = clpa_context_cl_device(env->ctx);
  size_t bytes = env->info.max_alloc_bytes / 2 < FLUSH_MAX ? env->info.max_alloc_bytes / 2 : FLUSH_MAX;
  bytes = bytes / 16 * 16;
  const char *src = FLUSH_SRC;
  cl_int err;
  cli_progress("building the cold-L2 flush kernel...");
  env->flush_prog = clCreateProgramWithSource(c, 1, &src, NULL, &err);
  if (err != CL_SUCCESS) return flush_failed("clCreateProgramWithSource", err);
  err = clBuildProgram(env->flush_prog, 1, &dev, "", NULL, NULL);
  if (err != CL_SUCCESS) {
    char log[2048] = "";
    clGetProgramBuildInfo(env->flush_prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    fprintf(stderr, "%s\n", log);
    return flush_failed("clBuildProgram", err);
  }
  env->flush_kernel = clCreateKernel(env->flush_prog, "bench_flush", &err);
  if (err != CL_SUCCESS) return flush_failed("clCreateKernel", err);
  env->flush_buf = bench_buffer_quiet(env, NULL, bytes);
  env->flush_sink = bench_buffer_quiet(env, NULL, sizeof(cl_uint));
  if (!env->flush_buf || !env->flush_sink) return flush_failed("clCreateBuffer", 0);
  const cl_uint pattern = 0x5bd1e995u, n4 = (cl_uint)(bytes / 16);
  err = clEnqueueFillBuffer(clpa_context_cl_queue(env->ctx), env->flush_buf, &pattern,
                            sizeof pattern, 0, bytes, 0, NULL, NULL);
  if (err == CL_SUCCESS) err = clSetKernelArg(env->flush_kernel, 0, sizeof(cl_mem), &env->flush_buf);
  if (err == CL_SUCCESS) err = clSetKernelArg(env->flush_kernel, 1, sizeof n4, &n4);
  if (err == CL_SUCCESS) err = clSetKernelArg(env->flush_kernel, 2, sizeof(cl_mem), &env->flush_sink);
  if (err == CL_SUCCESS) err = clFinish(clpa_context_cl_queue(env->ctx));
  if (err != CL_SUCCESS) return flush_failed("filling its buffer", err);
  env->flush_bytes = bytes;
  cli_progress_end();
  return 0;
}

/* One flushed call: *seconds from the flush's end to the end of the
 * call's event. Returns 0, or 1 (the context's last error, or an OpenCL
 * error printed here). */
static int cold_once(bench_env *env, bench_event_fn fn, const void *arg, double *seconds) {
  /* Enough work-items to keep every compute unit's loads in flight. */
  size_t global = (size_t)(env->info.compute_units ? env->info.compute_units : 1) * 2048;
  if (global > env->flush_bytes / 16) global = env->flush_bytes / 16;
  cl_event flushed = NULL, done = NULL;
  cl_ulong end_flush = 0, end_call = 0;
  cl_int err = clEnqueueNDRangeKernel(clpa_context_cl_queue(env->ctx), env->flush_kernel, 1, NULL,
                                      &global, NULL, 0, NULL, &flushed);
  if (err != CL_SUCCESS) return flush_failed("clEnqueueNDRangeKernel", err);
  clpa_status st = fn(env->ctx, arg, &done);
  if (st == CLPA_OK && !done) st = CLPA_ERR_INVALID_ARG; /* nothing was enqueued */
  if (st == CLPA_OK) err = clWaitForEvents(1, &done);
  if (st == CLPA_OK && err == CL_SUCCESS)
    err = clGetEventProfilingInfo(flushed, CL_PROFILING_COMMAND_END, sizeof end_flush, &end_flush,
                                  NULL);
  if (st == CLPA_OK && err == CL_SUCCESS)
    err = clGetEventProfilingInfo(done, CL_PROFILING_COMMAND_END, sizeof end_call, &end_call, NULL);
  clReleaseEvent(flushed);
  if (done) clReleaseEvent(done);
  if (st != CLPA_OK) return time_failed(env);
  if (err != CL_SUCCESS) return flush_failed("reading the profiling events", err);
  *seconds = end_call > end_flush ? 1e-9 * (double)(end_call - end_flush) : 0;
  return 0;
}

int bench_time_cold(bench_env *env, const char *what, bench_event_fn fn, const void *arg,
                    int repeats, double *per_call) {
  if (repeats < 1) repeats = 1;
  if (flush_init(env)) return 1;
  double *t = malloc(sizeof *t * (size_t)repeats);
  if (!t) {
    fprintf(stderr, "clpa-bench: out of host memory\n");
    return 1;
  }
  cli_progress("%s: a flushed warm-up call...", what);
  int rc = cold_once(env, fn, arg, &t[0]);
  cli_progress_begin();
  for (int r = 0; rc == 0 && r < repeats; r++) {
    if (cli_progress_due()) cli_progress("%s: cold call %d of %d", what, r + 1, repeats);
    rc = cold_once(env, fn, arg, &t[r]);
  }
  cli_progress_end();
  if (rc == 0) {
    *per_call = cli_quantile(t, (size_t)repeats, 0.5); /* an even count: the middle two's mean */
  }
  free(t);
  return rc;
}

typedef struct hot_arg {
  bench_event_fn fn;
  const void *arg;
} hot_arg;

static clpa_status hot_once(clpa_context *ctx, const void *arg_) {
  const hot_arg *a = arg_;
  return a->fn(ctx, a->arg, NULL);
}

int bench_measure(bench_env *env, const char *what, bench_event_fn fn, const void *arg,
                  const bench_timing *t, double *per_call) {
  if (t->cold) return bench_time_cold(env, what, fn, arg, t->repeats, per_call);
  const hot_arg a = {fn, arg};
  return bench_time(env, what, hot_once, &a, per_call);
}

/* ----------------------------------------------------------------------
 * The copy ceiling
 * -------------------------------------------------------------------- */
typedef struct copy_arg {
  cl_mem src, dst;
  size_t bytes;
  cl_kernel k; /* NULL: clEnqueueCopyBuffer */
} copy_arg;

static clpa_status copy_once(clpa_context *ctx, const void *arg_, cl_event *event) {
  const copy_arg *a = arg_;
  cl_command_queue q = clpa_context_cl_queue(ctx);
  cl_int err;
  if (!a->k) {
    err = clEnqueueCopyBuffer(q, a->src, a->dst, 0, 0, a->bytes, 0, NULL, event);
  } else {
    size_t global = a->bytes / 16;
    err = clEnqueueNDRangeKernel(q, a->k, 1, NULL, &global, NULL, 0, NULL, event);
  }
  return err == CL_SUCCESS ? CLPA_OK : CLPA_ERR_OPENCL;
}

double bench_copy_gbps(bench_env *env, size_t bytes, const bench_timing *timing) {
  bytes = bytes / 64 * 64;
  if (bytes > env->info.max_alloc_bytes / 2) bytes = env->info.max_alloc_bytes / 2 / 64 * 64;
  if (bytes < 64) bytes = 64;
  copy_arg a = {bench_buffer(env, NULL, bytes), bench_buffer(env, NULL, bytes), bytes, NULL};
  double best = -1, t;
  cl_program prog;
  if (a.src && a.dst && bench_measure(env, "copy", copy_once, &a, timing, &t) == 0)
    best = 2.0 * bytes / t / 1e9;
  cli_progress("copy: building the copy kernel (instant with a warm cache)...");
  if (a.src && a.dst && clpa_program_get(env->ctx, "smoke", "", &prog) == CLPA_OK) {
    cl_int err;
    a.k = clCreateKernel(prog, "clpa_smoke_copy4", &err);
    cl_uint n4 = (cl_uint)(bytes / 16);
    if (err == CL_SUCCESS && clSetKernelArg(a.k, 0, sizeof a.src, &a.src) == CL_SUCCESS &&
        clSetKernelArg(a.k, 1, sizeof a.dst, &a.dst) == CL_SUCCESS &&
        clSetKernelArg(a.k, 2, sizeof n4, &n4) == CL_SUCCESS &&
        bench_measure(env, "copy kernel", copy_once, &a, timing, &t) == 0 &&
        2.0 * bytes / t / 1e9 > best)
      best = 2.0 * bytes / t / 1e9;
    if (a.k) clReleaseKernel(a.k);
  }
  cli_progress_end();
  if (a.src) clReleaseMemObject(a.src);
  if (a.dst) clReleaseMemObject(a.dst);
  return best;
}

/* bench_kernel_once with the event bench_measure's cold timing takes */
static clpa_status kernel_event_once(clpa_context *ctx, const void *arg_, cl_event *event) {
  const bench_kernel_arg *a = arg_;
  cl_int err = clEnqueueNDRangeKernel(clpa_context_cl_queue(ctx), a->k, 1, NULL, &a->global,
                                      a->local ? &a->local : NULL, 0, NULL, event);
  return err == CL_SUCCESS ? CLPA_OK : CLPA_ERR_OPENCL;
}

double bench_read_us(bench_env *env, cl_mem buf, size_t bytes, const bench_timing *timing) {
  const size_t n4 = bytes / 16;
  if (n4 == 0 || n4 > 0xffffffffu || flush_init(env)) return -1;
  cl_int err;
  bench_kernel_arg a = {clCreateKernel(env->flush_prog, "bench_flush", &err), 0, 0};
  if (err != CL_SUCCESS) return -1;
  const cl_uint n = (cl_uint)n4;
  err = clSetKernelArg(a.k, 0, sizeof buf, &buf);
  if (err == CL_SUCCESS) err = clSetKernelArg(a.k, 1, sizeof n, &n);
  if (err == CL_SUCCESS) err = clSetKernelArg(a.k, 2, sizeof env->flush_sink, &env->flush_sink);
  /* one uint4 a work-item, or a grid-stride loop over 2048 or 512 work-items a compute unit */
  const size_t cus = env->info.compute_units ? env->info.compute_units : 1;
  const size_t grids[3] = {n4, cus * 2048, cus * 512};
  double best = -1, t;
  for (int i = 0; i < 3 && err == CL_SUCCESS; i++) {
    a.global = grids[i] < n4 ? grids[i] : n4;
    if (i > 0 && a.global == n4) continue;
    if (bench_measure(env, "read floor", kernel_event_once, &a, timing, &t) == 0 && t > 0 && (best < 0 || t < best))
      best = t;
  }
  clReleaseKernel(a.k);
  return best > 0 ? best * 1e6 : -1;
}

double bench_launch_us(bench_env *env) {
  bench_kernel_arg a = {NULL, 256, 256};
  cl_mem src = bench_buffer(env, NULL, 4096), dst = bench_buffer(env, NULL, 4096);
  cl_program prog;
  double t = 0, us = -1;
  if (src && dst && clpa_program_get(env->ctx, "smoke", "", &prog) == CLPA_OK) {
    cl_int err;
    a.k = clCreateKernel(prog, "clpa_smoke_copy4", &err);
    const cl_uint n4 = 256;
    if (err == CL_SUCCESS && clSetKernelArg(a.k, 0, sizeof src, &src) == CL_SUCCESS &&
        clSetKernelArg(a.k, 1, sizeof dst, &dst) == CL_SUCCESS &&
        clSetKernelArg(a.k, 2, sizeof n4, &n4) == CL_SUCCESS &&
        bench_time(env, "launch", bench_kernel_once, &a, &t) == 0 && t > 0)
      us = t * 1e6;
    if (a.k) clReleaseKernel(a.k);
  }
  if (src) clReleaseMemObject(src);
  if (dst) clReleaseMemObject(dst);
  return us;
}

clpa_status bench_kernel_once(clpa_context *ctx, const void *arg_) {
  const bench_kernel_arg *a = arg_;
  cl_int err = clEnqueueNDRangeKernel(clpa_context_cl_queue(ctx), a->k, 1, NULL, &a->global,
                                      a->local ? &a->local : NULL, 0, NULL, NULL);
  return err == CL_SUCCESS ? CLPA_OK : CLPA_ERR_OPENCL;
}

double bench_fma_tflops(bench_env *env) {
  const cl_int iters = 4096;
  bench_kernel_arg a = {NULL, (size_t)(env->info.compute_units ? env->info.compute_units : 1) * 16384, 0};
  cl_mem out = bench_buffer(env, NULL, sizeof(float) * a.global);
  cl_program prog;
  double t = 0, tflops = -1;
  cli_progress("fma: building the FMA peak kernel (instant with a warm cache)...");
  if (out && clpa_program_get(env->ctx, "smoke", "", &prog) == CLPA_OK) {
    cl_int err;
    a.k = clCreateKernel(prog, "clpa_smoke_fma", &err);
    const cl_float b = 0.999f, c = 0.001f;
    if (err == CL_SUCCESS && clSetKernelArg(a.k, 0, sizeof out, &out) == CL_SUCCESS &&
        clSetKernelArg(a.k, 1, sizeof b, &b) == CL_SUCCESS &&
        clSetKernelArg(a.k, 2, sizeof c, &c) == CL_SUCCESS &&
        clSetKernelArg(a.k, 3, sizeof iters, &iters) == CL_SUCCESS &&
        bench_time(env, "fma", bench_kernel_once, &a, &t) == 0 && t > 0)
      tflops = (double)a.global * iters * 8 * 16 * 2 / t / 1e12;
    if (a.k) clReleaseKernel(a.k);
  }
  cli_progress_end();
  if (out) clReleaseMemObject(out);
  return tflops;
}

/* ----------------------------------------------------------------------
 * The serving trace (see bench_common.h)
 * -------------------------------------------------------------------- */
struct bench_trace {
  uint64_t rng;
  int chats;
  int32_t max_answer;
  int32_t sys[TRACE_SYS_LEN];
  int32_t fewshot[TRACE_FEWSHOT_SETS][TRACE_FEWSHOT_LEN];
  int32_t **chat; /* [chats][TRACE_MAX_PROMPT + max_answer]: the history */
  int32_t *chat_len;
  unsigned char *busy;
};

static uint64_t trace_rnd(bench_trace *t) {
  uint64_t z = (t->rng += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int32_t bench_trace_token(bench_trace *t) { return (int32_t)(trace_rnd(t) % 32000); }

int32_t bench_trace_between(bench_trace *t, int32_t lo, int32_t hi) {
  return lo + (int32_t)(trace_rnd(t) % (uint64_t)(hi - lo + 1));
}

void bench_trace_destroy(bench_trace *t) {
  if (!t) return;
  for (int c = 0; t->chat && c < t->chats; c++) free(t->chat[c]);
  free(t->chat);
  free(t->chat_len);
  free(t->busy);
  free(t);
}

bench_trace *bench_trace_create(uint64_t seed, int chats, int32_t max_answer) {
  bench_trace *t = calloc(1, sizeof *t);
  if (!t || chats < 1 || max_answer < 0 || max_answer > TRACE_CHAT_MAX / 2) {
    free(t);
    return NULL;
  }
  t->rng = seed;
  t->chats = chats;
  t->max_answer = max_answer;
  t->chat = calloc((size_t)chats, sizeof *t->chat);
  t->chat_len = calloc((size_t)chats, sizeof *t->chat_len);
  t->busy = calloc((size_t)chats, 1);
  if (!t->chat || !t->chat_len || !t->busy) {
    bench_trace_destroy(t);
    return NULL;
  }
  for (int i = 0; i < TRACE_SYS_LEN; i++) t->sys[i] = bench_trace_token(t);
  for (int s = 0; s < TRACE_FEWSHOT_SETS; s++)
    for (int i = 0; i < TRACE_FEWSHOT_LEN; i++) t->fewshot[s][i] = bench_trace_token(t);
  for (int c = 0; c < chats; c++) {
    t->chat[c] = malloc((size_t)(TRACE_MAX_PROMPT + max_answer) * sizeof(int32_t));
    if (!t->chat[c]) {
      bench_trace_destroy(t);
      return NULL;
    }
  }
  return t;
}

int32_t bench_trace_next(bench_trace *t, int32_t *tokens, int *chat) {
  int c = (int)(trace_rnd(t) % (uint64_t)t->chats);
  int32_t n;
  *chat = -1;
  if (trace_rnd(t) % 2 || t->busy[c]) {
    const int32_t *ex = t->fewshot[trace_rnd(t) % TRACE_FEWSHOT_SETS];
    memcpy(tokens, t->sys, sizeof t->sys);
    memcpy(tokens + TRACE_SYS_LEN, ex, TRACE_FEWSHOT_LEN * sizeof(int32_t));
    n = TRACE_SYS_LEN + TRACE_FEWSHOT_LEN;
    for (int32_t q = bench_trace_between(t, 400, 600); q > 0; q--) tokens[n++] = bench_trace_token(t);
    return n;
  }
  if (t->chat_len[c] == 0 || t->chat_len[c] > TRACE_CHAT_MAX - 256 - t->max_answer) {
    memcpy(t->chat[c], t->sys, sizeof t->sys); /* a new conversation */
    t->chat_len[c] = TRACE_SYS_LEN;
    for (int32_t q = bench_trace_between(t, 600, 1200); q > 0; q--)
      t->chat[c][t->chat_len[c]++] = bench_trace_token(t);
  }
  memcpy(tokens, t->chat[c], (size_t)t->chat_len[c] * sizeof(int32_t));
  n = t->chat_len[c];
  for (int32_t q = bench_trace_between(t, 100, 250); q > 0; q--) tokens[n++] = bench_trace_token(t);
  *chat = c;
  t->busy[c] = 1;
  return n;
}

void bench_trace_end(bench_trace *t, int chat, const int32_t *tokens, int32_t n, int answered) {
  if (chat < 0 || chat >= t->chats) return;
  if (answered && n <= TRACE_MAX_PROMPT + t->max_answer) {
    memcpy(t->chat[chat], tokens, (size_t)n * sizeof(int32_t));
    t->chat_len[chat] = n;
  }
  t->busy[chat] = 0;
}

void bench_shuffled(int32_t *v, int32_t n) {
  for (int32_t i = 0; i < n; i++) v[i] = i;
  for (int32_t i = n - 1; i > 0; i--) {
    const int32_t j = (int32_t)(bench_rand() % (uint64_t)(i + 1)), t = v[i];
    v[i] = v[j], v[j] = t;
  }
}

void bench_random_values(float *v, size_t n) {
  for (size_t i = 0; i < n; i++) v[i] = (float)((double)(bench_rand() % 2001) / 1000.0 - 1.0);
}
