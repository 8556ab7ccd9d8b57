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

/* Block tables for n sequences of lens[s] tokens in blocks of bs:
 * sequence s shares its first shared[s] blocks with sequence parent[s]
 * (an earlier one), and takes the rest from a shuffled pool with 0-4
 * spare blocks; rows have 0-2 spare columns, and entries past a sequence's
 * blocks hold garbage (never read, never checked). Sets *max_blocks and
 * *num_blocks; returns the [n][*max_blocks] table. */
static inline int32_t *draw_block_tables(int32_t n, int32_t bs, const int32_t *lens,
                                         const int32_t *parent, const int32_t *shared,
                                         int32_t *max_blocks, int32_t *num_blocks) {
  int32_t max_nblk = 0, own = 0;
  for (int32_t s = 0; s < n; s++) {
    int32_t nblk = (lens[s] + bs - 1) / bs;
    if (nblk > max_nblk) max_nblk = nblk;
    own += nblk - shared[s];
  }
  const int32_t mb = *max_blocks = max_nblk + (int32_t)rng_below(3);
  const int32_t nb = *num_blocks = own + (int32_t)rng_below(5); /* spare blocks stay NaN */
  int32_t *perm = xcalloc((size_t)nb, sizeof *perm);
  for (int32_t i = 0; i < nb; i++) perm[i] = i;
  shuffle(perm, nb);
  int32_t *tables = xcalloc((size_t)n * (size_t)mb, sizeof *tables);
  const int32_t garbage[3] = {-1, nb + 7, INT32_MAX};
  int32_t next = 0;
  for (int32_t s = 0; s < n; s++) {
    int32_t *row = tables + (size_t)s * (size_t)mb;
    int32_t nblk = (lens[s] + bs - 1) / bs;
    for (int32_t i = 0; i < mb; i++) {
      if (i < shared[s])
        row[i] = tables[(size_t)parent[s] * (size_t)mb + (size_t)i];
      else if (i < nblk)
        row[i] = perm[next++];
      else
        row[i] = garbage[i % 3];
    }
  }
  free(perm);
  return tables;
}

static inline int32_t pick(const int32_t *a, size_t n) { return a[rng_below((uint32_t)n)]; }

/* The storage dtype whose 16-byte vector is x elements wide. */
static inline clpa_dtype dtype_of_x(int32_t x) {
  return x == 4 ? CLPA_DTYPE_F32 : x == 8 ? CLPA_DTYPE_F16 : CLPA_DTYPE_FP8_E4M3;
}

#endif
