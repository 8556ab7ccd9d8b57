/*
 * grow.h — checked capacity growth for the host objects' arrays. Not
 * installed.
 *
 * Every growable array in host/ doubles its capacity so that a slowly
 * growing object reallocates O(log n) times. The doubling, the element
 * count limit (int32 indices) and the byte count (size_t, which is 32 bits
 * on some targets) are all checked here once, so no caller multiplies
 * unchecked.
 */
#ifndef CLPA_HOST_GROW_H
#define CLPA_HOST_GROW_H

#include <stddef.h>
#include <stdint.h>

/* The capacity an array of cap elements of elem_size bytes should grow to
 * so that it holds at least need: cap doubled (first when cap <= 0) until
 * it reaches need, never above max elements nor above SIZE_MAX bytes.
 * Returns that capacity (>= need), or -1 when need itself is negative,
 * above max, or too many bytes. */
static inline int64_t clpa_grow_cap(int64_t cap, int64_t need, int64_t first, int64_t max,
                                    size_t elem_size) {
  if (elem_size == 0) elem_size = 1;
  if ((uint64_t)max > SIZE_MAX / elem_size) max = (int64_t)(SIZE_MAX / elem_size);
  if (need < 0 || need > max) return -1;
  int64_t c = cap > 0 ? cap : first;
  if (c < 1) c = 1;
  if (c > max) c = max;
  while (c < need) c = c > max / 2 ? max : 2 * c;
  return c;
}

#endif
