/*
 * parallel.h — a loop's iterations spread over the host's cores, for the
 * demo's work on whole models (random weights, their rounding to the
 * weight dtype, quantization): a llama-1b holds 1.5 x 10^9 weights.
 */
#ifndef CLPA_DEMO_PARALLEL_H
#define CLPA_DEMO_PARALLEL_H

#include <stddef.h>

/* The most parts demo_parallel_for makes. */
#define DEMO_PARALLEL_MAX 32

/* Calls fn(arg, part, lo, hi) over [0, n) cut into contiguous parts
 * (part 0 first), one a thread, as many as the host has online CPUs up to
 * DEMO_PARALLEL_MAX and no part under `grain` iterations (one part when n
 * is below 2 grain). The calling thread runs part 0, and any part whose
 * thread could not start. Returns the parts' count once every part is
 * done; fn sees each part once and the parts do not overlap. */
int demo_parallel_for(size_t n, size_t grain, void (*fn)(void *arg, int part, size_t lo, size_t hi),
                      void *arg);

#endif
