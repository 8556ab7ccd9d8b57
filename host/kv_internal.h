/*
 * kv_internal.h — the pool's representation, shared by pool.c, seq.c and
 * batch.c so the hot paths (append, fork, truncate) move refcounts inline
 * after their own validation. Not installed.
 */
#ifndef CLPA_HOST_KV_INTERNAL_H
#define CLPA_HOST_KV_INTERNAL_H

#include "clpa_kv.h"

/*
 * Free blocks sit on a stack (free_stack[0..num_free)), so taking and
 * returning a block is O(1) and needs no memory. A block is on the stack
 * exactly when its refcount is 0; clpa_pool_check verifies that.
 */
struct clpa_pool {
  clpa_allocator alloc;
  int32_t num_blocks;
  int32_t block_size;
  int32_t num_free;
  int32_t num_shared; /* blocks with refcount > 1 */
  uint64_t gen;       /* last generation handed to a sequence (see clpa_seq) */
  int32_t *refcount;  /* [num_blocks] */
  int32_t *free_stack; /* [num_blocks]; the top is free_stack[num_free - 1] */
};

/* A sequence holds one reference on each of table[0..num_blocks), and
 * num_blocks == ceil(num_tokens / block_size).
 *
 * gen names the contents of table[0..num_blocks): every change to them
 * (a block added, dropped or swapped by copy-on-write) takes a fresh
 * number from the pool's counter, and so does a new sequence. Two looks at
 * a sequence that see the same address and the same gen see the same
 * table, which is what lets the batch view skip unchanged rows. */
struct clpa_seq {
  clpa_pool *pool;
  int32_t *table; /* [cap] */
  int32_t cap;
  int32_t num_blocks;
  int32_t num_tokens;
  uint64_t gen;
};

static inline void clpa_seq_changed_(clpa_seq *s) { s->gen = ++s->pool->gen; }

/* Callers have checked num_free > 0. */
static inline int32_t clpa_pool_pop_(clpa_pool *p) {
  int32_t b = p->free_stack[--p->num_free];
  p->refcount[b] = 1;
  return b;
}

/* Callers have checked that b is in use and below INT32_MAX. */
static inline void clpa_pool_incref_(clpa_pool *p, int32_t b) {
  if (++p->refcount[b] == 2) p->num_shared++;
}

/* Callers have checked that b is in use. */
static inline void clpa_pool_decref_(clpa_pool *p, int32_t b) {
  int32_t rc = --p->refcount[b];
  if (rc == 1) {
    p->num_shared--;
  } else if (rc == 0) {
    p->free_stack[p->num_free++] = b;
  }
}

#endif
