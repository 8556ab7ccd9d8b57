/*
 * kernels.h — the demo's OpenCL C source (kernels.c), in pieces for
 * clCreateProgramWithSource, and what its launches need: the build
 * options, the work-groups of its row reductions, the argmax's parts.
 */
#ifndef CLPA_DEMO_KERNELS_H
#define CLPA_DEMO_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#define DEMO_WG 64 /* work-group of the argmax */

/* The RMSNorms' work-group: 256 lanes on a GPU, 64 elsewhere (the wider
 * barrier tree costs a CPU more than it saves; on a GPU 64 lanes a row left
 * the loads latency-bound: docs/decisions/0033-demo-step-trace.md). */
static inline int demo_norm_wg(int gpu) { return gpu ? 256 : 64; }

/* Writes the build options of demo_kernel_source for that work-group
 * (at most cap bytes, 64 are enough). */
void demo_kernel_options(char *buf, size_t cap, int norm_wg);

/* The argmax's parts of a row of n (demo_argmax_part): ~32 values a lane. */
static inline int32_t demo_argmax_parts(int32_t n) {
  const int32_t p = (n + 32 * DEMO_WG - 1) / (32 * DEMO_WG);
  return p < 1 ? 1 : p;
}

extern const char *const demo_kernel_source[];
extern const unsigned demo_kernel_source_count;

#endif
