/*
 * cl_util.h — what the kernel tests share: a context on the default
 * device, buffers made from host arrays, poisoning, and comparison that
 * prints the worst element.
 */
#ifndef CLPA_TEST_CL_UTIL_H
#define CLPA_TEST_CL_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clpa.h"
#include "tap.h"

/* A context for tests: the default device (CLPA_DEVICE), lanes forced by
 * CLPA_TEST_LANES=emulated|subgroup|nv_ptx when set. Exits on failure. */
static inline clpa_context *test_context(int profiling) {
  clpa_context_config cfg;
  clpa_context_config_init(&cfg);
  cfg.profiling = profiling;
  const char *lanes = getenv("CLPA_TEST_LANES");
  if (lanes) {
    for (int l = CLPA_LANES_EMULATED; l <= CLPA_LANES_NV_PTX; l++)
      if (strcmp(lanes, clpa_lanes_name((clpa_lanes)l)) == 0) cfg.lanes = (clpa_lanes)l;
  }
  clpa_context *ctx = NULL;
  if (clpa_context_create(&cfg, &ctx) != CLPA_OK) {
    printf("not ok 1 - context: %s\n1..1\n", clpa_last_error());
    exit(1);
  }
  clpa_device_info info;
  clpa_context_device_info(ctx, &info);
  diag("device [%d:%d] %s (%s), lanes %s", info.platform_index, info.device_index, info.name,
       info.platform_name, clpa_lanes_name(info.lanes));
  return ctx;
}

/* No fault bit is set (reading them clears them); `when` says after what. */
static inline int test_no_faults(clpa_context *ctx, const char *when) {
  int32_t faults = 0;
  const clpa_status st = clpa_context_check_faults(ctx, &faults);
  return ok(st == CLPA_OK && faults == 0, "no faults %s (0x%x)", when, faults);
}

/* Every fault a test provokes is read (and so cleared) by that test: at the
 * end none is left. A leftover means a launch nobody checked set one. */
static inline void test_no_faults_left(clpa_context *ctx) {
  test_no_faults(ctx, "left unread at the end");
}

/* The end of a kernel test: how the programs were had (built or from the
 * binary cache), the context destroyed, the TAP plan. */
static inline int test_context_done(clpa_context *ctx) {
  test_no_faults_left(ctx);
  clpa_program_stats ps;
  clpa_context_program_stats(ctx, &ps);
  diag("programs: %u built, %u from disk, %.1f s building", ps.built_from_source,
       ps.loaded_from_disk, ps.build_seconds);
  clpa_context_destroy(ctx);
  return done_testing();
}

/* A device buffer holding a copy of host bytes (or uninitialised). */
static inline cl_mem test_buffer(clpa_context *ctx, const void *host, size_t bytes) {
  cl_int err;
  cl_mem m = clCreateBuffer(clpa_context_cl_context(ctx),
                            CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0),
                            bytes ? bytes : 4, (void *)host, &err);
  if (err != CL_SUCCESS) {
    printf("not ok - clCreateBuffer(%zu bytes) failed: %d\n", bytes, err);
    exit(1);
  }
  return m;
}

/* bytes of host into m from byte `at` on, blocking. */
static inline void test_write_at(clpa_context *ctx, cl_mem m, size_t at, const void *host,
                                 size_t bytes) {
  cl_int err =
      clEnqueueWriteBuffer(clpa_context_cl_queue(ctx), m, CL_TRUE, at, bytes, host, 0, NULL, NULL);
  if (err != CL_SUCCESS) {
    printf("not ok - clEnqueueWriteBuffer failed: %d\n", err);
    exit(1);
  }
}

/* Fills a device buffer with 0xFF bytes: NaN as f32, f16 and bf16. */
static inline void test_poison(clpa_context *ctx, cl_mem m, size_t bytes) {
  unsigned char *p = malloc(bytes ? bytes : 1);
  memset(p, 0xFF, bytes);
  test_write_at(ctx, m, 0, p, bytes);
  free(p);
}

/* bytes of m from byte `at` on into host, blocking. */
static inline void test_read_at(clpa_context *ctx, cl_mem m, size_t at, void *host, size_t bytes) {
  cl_int err =
      clEnqueueReadBuffer(clpa_context_cl_queue(ctx), m, CL_TRUE, at, bytes, host, 0, NULL, NULL);
  if (err != CL_SUCCESS) {
    printf("not ok - clEnqueueReadBuffer failed: %d\n", err);
    exit(1);
  }
}

static inline void test_read(clpa_context *ctx, cl_mem m, void *host, size_t bytes) {
  test_read_at(ctx, m, 0, host, bytes);
}

/* 1 when the first bytes of m are still test_poison's 0xFF. */
static inline int test_untouched(clpa_context *ctx, cl_mem m, size_t bytes) {
  unsigned char *h = malloc(bytes ? bytes : 1);
  test_read(ctx, m, h, bytes);
  int same = 1;
  for (size_t i = 0; i < bytes; i++) same &= h[i] == 0xFF;
  free(h);
  return same;
}

/* The tensor-core paths round the softmax weights P to `p_dtype` (the
 * cache's; f16 for fp8) before P V, each by at most the unit roundoff u
 * (2^-8 for bf16's 8 significant bits, 2^-11 for f16's 11; none for f32's
 * 3xTF32), and sum P in f32 unrounded: the output, sum p v / sum p, moves
 * by at most u * max|v|, absolutely, however much an output cancels. The
 * atol that allows for it, given the values' largest magnitude. */
static inline double test_p_round_atol(clpa_dtype p_dtype, double vmax) {
  const double u = p_dtype == CLPA_DTYPE_BF16 ? 0x1p-8 : p_dtype == CLPA_DTYPE_F16 ? 0x1p-11 : 0.0;
  return u * vmax;
}

/* Worst |got - want| / (atol + rtol * |want|) over n elements; a NaN or a
 * mismatched infinity counts as infinitely bad. Returns the ratio (<= 1
 * passes) and the index of the worst element. */
static inline double test_worst(const float *got, const double *want, size_t n, double atol,
                                double rtol, size_t *worst_at) {
  double worst = 0;
  *worst_at = 0;
  for (size_t i = 0; i < n; i++) {
    double r;
    if (isinf(want[i]) && got[i] == want[i])
      r = 0;
    else if (isnan(got[i]) || isinf(got[i]) || isinf(want[i]))
      r = INFINITY;
    else
      r = fabs(got[i] - want[i]) / (atol + rtol * fabs(want[i]));
    if (r > worst || (i == 0 && r == 0)) {
      worst = r;
      *worst_at = i;
    }
  }
  return worst;
}

/* Tables of refused calls for the validation tests: BAD_CALLS declares
 * `bad` (up to N rows of params type T) and its count `n`; each BAD row is
 * `good` with one change (`field_expr`), the words the context's message
 * must hold and the status; BAD_CALLS_CHECK runs every row through `call`
 * and checks the status, the words, that the message names the public
 * call (`prefix`) and that the thread's last error is the same text. */
#define BAD_CALLS(T, N)                 \
  struct {                              \
    const char *what, *needle;          \
    clpa_status want;                   \
    T p;                                \
  } bad[N];                             \
  int n = 0
#define BAD(field_expr, needle_, want_)                                  \
  do {                                                                   \
    if (n == (int)(sizeof bad / sizeof *bad)) abort(); /* table full */ \
    bad[n].p = good;                                                     \
    bad[n].p.field_expr;                                                 \
    bad[n].what = #field_expr;                                           \
    bad[n].needle = needle_;                                             \
    bad[n++].want = want_;                                               \
  } while (0)
#define BAD_CALLS_CHECK(call, prefix)                                                          \
  for (int i_ = 0; i_ < n; i_++) {                                                             \
    const clpa_status st_ = call(ctx, &bad[i_].p);                                             \
    const char *msg_ = clpa_context_last_error(ctx);                                           \
    ok(st_ == bad[i_].want && strstr(msg_, bad[i_].needle) &&                                  \
           strncmp(msg_, prefix, strlen(prefix)) == 0 && strcmp(clpa_last_error(), msg_) == 0, \
       "%s -> %s: %s", bad[i_].what, clpa_status_name(st_), msg_);                             \
  }

#endif
