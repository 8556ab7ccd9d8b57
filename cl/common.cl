/*
 * common.cl — shared by every kernel family; the host prepends it to each
 * family's source when it builds a program.
 *
 * Holds: the storage dtype mapping (load one element or a 16-byte vector
 * of the cache dtype as float), and the lane-group primitives that stand
 * in for CUDA warp shuffles.
 *
 * Options (all -D, with defaults so every file compiles alone):
 *   CLPA_LANES   1 emulated (local memory + barriers), 2 subgroups, 3 NVIDIA PTX
 */
#ifndef CLPA_LANES
#define CLPA_LANES 1
#endif

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
