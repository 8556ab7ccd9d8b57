/*
 * ref_util.h — what the CPU-reference tests (test_host_ref_attention,
 * test_host_ref_prefill) share to build their random scenes: allocation
 * that bails out, NaN-filled arrays, draws, and the storage dtype of a
 * key vector width. Include after tap.h.
 */
#ifndef CLPA_TEST_REF_UTIL_H
#define CLPA_TEST_REF_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "clpa_base.h"
#include "tap.h"

static inline void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) BAIL_OUT("out of memory");
  return p;
}

/* n floats, every one NaN: unused cache slots, padding. */
static inline float *nan_array(size_t n) {
  float *p = xcalloc(n, sizeof *p);
  for (size_t i = 0; i < n; i++) p[i] = NAN;
  return p;
}

/* n doubles, every one NaN: outputs a refused call must leave alone. */
static inline double *poisoned(size_t n) {
  double *p = xcalloc(n, sizeof *p);
  for (size_t i = 0; i < n; i++) p[i] = NAN;
  return p;
}

static inline float rnd(double lo, double hi) { return (float)rng_uniform(lo, hi); }

static inline void shuffle(int32_t *a, int32_t n) {
  for (int32_t i = n - 1; i > 0; i--) {
    int32_t j = (int32_t)rng_below((uint32_t)i + 1u), t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}

static inline int32_t pick(const int32_t *a, size_t n) { return a[rng_below((uint32_t)n)]; }

/* The storage dtype whose 16-byte vector is x elements wide. */
static inline clpa_dtype dtype_of_x(int32_t x) {
  return x == 4 ? CLPA_DTYPE_F32 : x == 8 ? CLPA_DTYPE_F16 : CLPA_DTYPE_FP8_E4M3;
}

#endif
