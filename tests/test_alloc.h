/*
 * test_alloc.h — an allocator hook for tests: counts live blocks and bytes
 * (so a test can prove nothing leaked), checks that every free and resize
 * names the size the block really has, and fails the Nth allocation on
 * request (out-of-memory injection). Header-only.
 */
#ifndef CLPA_TEST_ALLOC_H
#define CLPA_TEST_ALLOC_H

#include <stdlib.h>
#include <string.h>

#include "clpa_base.h"

typedef struct test_alloc {
  long long calls;     /* allocations and resizes attempted (not counted while paused) */
  long long fail_at;   /* fail the call with this 1-based number; 0 = never */
  long long failures;  /* calls failed on purpose */
  long long live;      /* blocks allocated and not yet freed */
  size_t live_bytes;
  long long bad_sizes; /* frees or resizes whose old_size was wrong */
  int paused;          /* while set: not counted, never failed */
} test_alloc;

/* Each block carries its size in a 16-byte header. */
#define TEST_ALLOC_HDR 16

static void *test_alloc_fn(void *user, void *ptr, size_t old_size, size_t new_size) {
  test_alloc *t = user;
  unsigned char *h = ptr ? (unsigned char *)ptr - TEST_ALLOC_HDR : NULL;
  if (h) {
    size_t real;
    memcpy(&real, h, sizeof real);
    if (real != old_size) t->bad_sizes++;
  }
  if (new_size == 0) {
    if (h) {
      t->live--;
      t->live_bytes -= old_size;
      free(h);
    }
    return NULL;
  }
  if (!t->paused && ++t->calls == t->fail_at) {
    t->failures++;
    return NULL;
  }
  unsigned char *n = realloc(h, new_size + TEST_ALLOC_HDR);
  if (!n) return NULL;
  memcpy(n, &new_size, sizeof new_size);
  if (h) {
    t->live_bytes -= old_size;
  } else {
    t->live++;
  }
  t->live_bytes += new_size;
  return n + TEST_ALLOC_HDR;
}

static inline clpa_allocator test_allocator(test_alloc *t) {
  clpa_allocator a = {test_alloc_fn, t};
  return a;
}

#endif
