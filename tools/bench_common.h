/* bench_common.h — what clpa-bench's subcommands share (public API only). */
#ifndef CLPA_BENCH_COMMON_H
#define CLPA_BENCH_COMMON_H

#include <stdint.h>

#include "clpa.h"

typedef struct bench_env {
  clpa_context *ctx;
  clpa_device_info info;
} bench_env;

/* Opens a context on the selected device (CLPA_DEVICE); prints why not. */
int bench_open(bench_env *env);
void bench_close(bench_env *env);
/* Prints a usage error and returns 2. */
int bench_usage(const char *fmt, ...);
uint64_t bench_rand(void);
/* A device buffer with a copy of host (or uninitialised when host is NULL). */
cl_mem bench_buffer(bench_env *env, const void *host, size_t bytes);
/* A cache of n elements of dtype holding random finite values of moderate size. */
cl_mem bench_random_cache(bench_env *env, clpa_dtype dtype, size_t n);

/* One call of the operation being timed; returns a clpa_status. */
typedef clpa_status (*bench_fn)(clpa_context *ctx, const void *arg);
/* Median seconds per call over 7 batches of back-to-back calls, after two
 * warm-up calls. Returns 0, or 1 after printing the error. */
int bench_time(bench_env *env, bench_fn fn, const void *arg, double *per_call);
/* The device's copy bandwidth in GB/s (bytes read + written): the better of
 * clEnqueueCopyBuffer and a float4 copy kernel over `bytes`. <= 0 on error. */
double bench_copy_gbps(bench_env *env, size_t bytes);

int bench_decode(int argc, char **argv);
int clpa_bench_radix(int argc, char **argv);

#endif
