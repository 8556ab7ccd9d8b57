/*
 * radix_index.c — the radix tree's child index (see radix.c): one
 * open-addressing hash table for the whole tree, keyed by (parent id, hash
 * of namespace + first block's tokens), so that finding the child to follow
 * costs one hash of block_size tokens; and the hashing behind it.
 */
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "radix_internal.h"

/* ----------------------------------------------------------------------
 * Hashing
 * -------------------------------------------------------------------- */
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t clpa_radix_block_key_(uint64_t ns, const int32_t *tok, int32_t bs) {
  uint64_t h = mix64(ns ^ 0x51ed270b27e4e4c5ULL);
  for (int32_t i = 0; i < bs; i++) h = (h ^ (uint32_t)tok[i]) * 0x100000001b3ULL;
  return mix64(h);
}

static uint64_t idx_hash(uint64_t parent_id, uint64_t key) {
  return mix64(key ^ (parent_id * 0x9e3779b97f4a7c15ULL));
}

/* ----------------------------------------------------------------------
 * Child index: linear probing, backward-shift deletion (no tombstones)
 * -------------------------------------------------------------------- */
clpa_radix_node *clpa_radix_idx_find_(const clpa_radix *t, const clpa_radix_node *parent,
                                      uint64_t ns, const int32_t *first_block) {
  uint64_t key = clpa_radix_block_key_(ns, first_block, t->bs);
  size_t mask = t->idx_cap - 1;
  for (size_t i = idx_hash(parent->id, key) & mask;; i = (i + 1) & mask) {
    clpa_radix_node *c = t->idx[i].node;
    if (!c) return NULL;
    if (c->parent == parent && c->key == key && c->ns == ns &&
        memcmp(NODE_TOKENS(c), first_block, (size_t)t->bs * sizeof(int32_t)) == 0)
      return c;
  }
}

static void idx_put(idx_entry *tab, size_t cap, uint64_t h, clpa_radix_node *n) {
  size_t i = h & (cap - 1);
  while (tab[i].node) i = (i + 1) & (cap - 1);
  tab[i].h = h;
  tab[i].node = n;
}

void clpa_radix_idx_insert_(clpa_radix *t, clpa_radix_node *n) {
  idx_put(t->idx, t->idx_cap, idx_hash(n->parent->id, n->key), n);
  t->idx_count++;
}

size_t clpa_radix_idx_slot_of_(const clpa_radix *t, const clpa_radix_node *n) {
  size_t mask = t->idx_cap - 1;
  size_t i = idx_hash(n->parent->id, n->key) & mask;
  while (t->idx[i].node != n) i = (i + 1) & mask;
  return i;
}

void clpa_radix_idx_remove_(clpa_radix *t, const clpa_radix_node *n) {
  size_t mask = t->idx_cap - 1;
  size_t i = clpa_radix_idx_slot_of_(t, n);
  for (size_t j = (i + 1) & mask; t->idx[j].node; j = (j + 1) & mask) {
    size_t home = t->idx[j].h & mask;
    /* move j back to the hole at i unless its home lies cyclically in (i, j] */
    if (((j - home) & mask) >= ((j - i) & mask)) {
      t->idx[i] = t->idx[j];
      i = j;
    }
  }
  t->idx[i].node = NULL;
  t->idx_count--;
}

int clpa_radix_idx_reserve_(clpa_radix *t, size_t extra) {
  if ((t->idx_count + extra) * 2 <= t->idx_cap) return 0;
  size_t cap = t->idx_cap;
  while ((t->idx_count + extra) * 2 > cap) {
    if (cap > SIZE_MAX / 2 / sizeof(idx_entry)) return -1; /* stays a power of two or fails */
    cap *= 2;
  }
  idx_entry *tab = clpa_mem_calloc(&t->alloc, cap, sizeof *tab);
  if (!tab) return -1;
  for (size_t i = 0; i < t->idx_cap; i++)
    if (t->idx[i].node) idx_put(tab, cap, t->idx[i].h, t->idx[i].node);
  clpa_mem_free(&t->alloc, t->idx, t->idx_cap * sizeof *tab);
  t->idx = tab;
  t->idx_cap = cap;
  return 0;
}
