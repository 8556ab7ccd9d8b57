/*
 * kernels.h — the demo's OpenCL C source (kernels.c), in pieces for
 * clCreateProgramWithSource.
 */
#ifndef CLPA_DEMO_KERNELS_H
#define CLPA_DEMO_KERNELS_H

extern const char *const demo_kernel_source[];
extern const unsigned demo_kernel_source_count;

#endif
