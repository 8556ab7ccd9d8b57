/*
 * radix_heap.c — the radix tree's eviction heap (see radix.c): a binary
 * min-heap (by tick) of the eviction candidates, the unlocked leaves; each
 * node knows its slot, so a node that stops or starts being a candidate
 * costs O(log n). Also the ticks themselves: touching a path stamps it.
 */
#include <stdint.h>

#include "alloc.h"
#include "grow.h"
#include "radix_internal.h"

/* ----------------------------------------------------------------------
 * Eviction heap: the unlocked leaves, oldest tick on top. Ties (only along
 * one path, never between two leaves) go to the deeper node.
 * -------------------------------------------------------------------- */
int clpa_radix_older_(const clpa_radix_node *a, const clpa_radix_node *b) {
  if (a->last_access != b->last_access) return a->last_access < b->last_access;
  return a->depth_blocks > b->depth_blocks;
}

static void heap_set(clpa_radix *t, int32_t i, clpa_radix_node *n) {
  t->heap[i] = n;
  n->heap_idx = i;
}

static void heap_up(clpa_radix *t, int32_t i) {
  clpa_radix_node *n = t->heap[i];
  while (i > 0) {
    int32_t p = (i - 1) / 2;
    if (!clpa_radix_older_(n, t->heap[p])) break;
    heap_set(t, i, t->heap[p]);
    i = p;
  }
  heap_set(t, i, n);
}

static void heap_down(clpa_radix *t, int32_t i) {
  clpa_radix_node *n = t->heap[i];
  for (;;) {
    int32_t c = 2 * i + 1;
    if (c >= t->heap_n) break;
    if (c + 1 < t->heap_n && clpa_radix_older_(t->heap[c + 1], t->heap[c])) c++;
    if (!clpa_radix_older_(t->heap[c], n)) break;
    heap_set(t, i, t->heap[c]);
    i = c;
  }
  heap_set(t, i, n);
}

void clpa_radix_heap_remove_(clpa_radix *t, clpa_radix_node *n) {
  int32_t i = n->heap_idx;
  clpa_radix_node *last = t->heap[--t->heap_n];
  n->heap_idx = -1;
  if (last == n) return;
  heap_set(t, i, last);
  heap_up(t, i);
  heap_down(t, last->heap_idx);
}

/* Capacity for every node to be a candidate: grown with the node count so
 * that eviction, which never allocates, can always push a parent. */
int clpa_radix_heap_reserve_(clpa_radix *t, int64_t nodes) {
  if (nodes <= t->heap_cap) return 0;
  int64_t cap = clpa_grow_cap(t->heap_cap, nodes, 64, INT32_MAX, sizeof(clpa_radix_node *));
  if (cap < 0) return -1;
  clpa_radix_node **h = clpa_mem_realloc(&t->alloc, t->heap, (size_t)t->heap_cap * sizeof *h,
                                         (size_t)cap * sizeof *h);
  if (!h) return -1;
  t->heap = h;
  t->heap_cap = (int32_t)cap;
  return 0;
}

int clpa_radix_is_candidate_(const clpa_radix *t, const clpa_radix_node *n) {
  return n != t->root && n->num_children == 0 && n->lock == 0;
}

void clpa_radix_heap_sync_(clpa_radix *t, clpa_radix_node *n) {
  int want = clpa_radix_is_candidate_(t, n);
  if (want && n->heap_idx < 0) {
    heap_set(t, t->heap_n++, n);
    heap_up(t, n->heap_idx);
  } else if (!want && n->heap_idx >= 0) {
    clpa_radix_heap_remove_(t, n);
  } else if (want) {
    heap_up(t, n->heap_idx);
    heap_down(t, n->heap_idx);
  }
}

/* Stamps the path from n up to the root with a fresh tick. Only n itself
 * can be a leaf, so at most one heap move. */
void clpa_radix_touch_path_(clpa_radix *t, clpa_radix_node *n) {
  uint64_t tick = ++t->tick;
  for (clpa_radix_node *p = n; p != t->root; p = p->parent) p->last_access = tick;
  if (n != t->root) clpa_radix_heap_sync_(t, n);
}
