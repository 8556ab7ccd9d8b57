/*
 * radix_internal.h — the radix tree's representation, shared by radix.c
 * (the tree), radix_index.c (the child index) and radix_heap.c (the
 * eviction heap). Not installed.
 */
#ifndef CLPA_HOST_RADIX_INTERNAL_H
#define CLPA_HOST_RADIX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "clpa_radix.h"

struct clpa_radix_node {
  clpa_radix_node *parent;
  clpa_radix_node *first_child, *next_sib, *prev_sib;
  uint64_t ns;
  uint64_t key;         /* hash of ns and the edge's first block of tokens */
  uint64_t id;          /* serial number; keys the child index */
  uint64_t last_access; /* tick; never older than any child's */
  int32_t num_blocks;   /* edge length; 0 only for the root */
  int32_t cap_blocks;   /* what data[] was allocated for */
  int32_t depth_blocks; /* root to the end of this edge */
  int32_t num_children;
  int32_t lock;     /* locks on this node or a descendant */
  int32_t pins;     /* of those, the ones on this node itself: what unlock may undo */
  int32_t heap_idx; /* slot in the eviction heap, -1 when not a candidate */
  int32_t data[];   /* tokens [cap_blocks * block_size], then blocks [cap_blocks] */
};

typedef struct idx_entry {
  uint64_t h;
  clpa_radix_node *node; /* NULL = empty */
} idx_entry;

struct clpa_radix {
  clpa_pool *pool;
  clpa_allocator alloc;
  clpa_radix_evict_fn on_evict;
  void *on_evict_user;
  int32_t bs;          /* block size */
  int32_t pool_blocks; /* blocks in the pool */
  clpa_radix_node *root;
  uint64_t tick, next_id;
  idx_entry *idx;
  size_t idx_cap, idx_count; /* cap is a power of two; count <= cap / 2 */
  clpa_radix_node **heap;
  int32_t heap_n, heap_cap;
  uint8_t *in_tree; /* [pool_blocks]: the tree holds a reference */
  uint32_t *seen;   /* [pool_blocks]: stamps for duplicate checks */
  uint32_t seen_stamp;
  clpa_radix_stats st;
};

#define NODE_TOKENS(n) ((n)->data)
#define NODE_BLOCKS(t, n) ((n)->data + (size_t)(n)->cap_blocks * (size_t)(t)->bs)

/* radix_index.c: the child index and its hashing. */

/* The key of an edge that starts with the block `tok` (bs tokens) in
 * namespace ns. */
uint64_t clpa_radix_block_key_(uint64_t ns, const int32_t *tok, int32_t bs);
/* The child of parent whose edge starts with first_block in namespace ns,
 * or NULL. */
clpa_radix_node *clpa_radix_idx_find_(const clpa_radix *t, const clpa_radix_node *parent,
                                      uint64_t ns, const int32_t *first_block);
/* Adds n (linked under its parent, key set); the index has room. */
void clpa_radix_idx_insert_(clpa_radix *t, clpa_radix_node *n);
/* The slot that holds n, which is in the index. */
size_t clpa_radix_idx_slot_of_(const clpa_radix *t, const clpa_radix_node *n);
/* Takes n, which is in the index, out of it. */
void clpa_radix_idx_remove_(clpa_radix *t, const clpa_radix_node *n);
/* Makes room for `extra` more entries. Returns 0, or -1 when out of memory
 * (the index is unchanged). */
int clpa_radix_idx_reserve_(clpa_radix *t, size_t extra);

/* radix_heap.c: the eviction heap and the ticks that order it. */

/* Whether a is evicted before b. */
int clpa_radix_older_(const clpa_radix_node *a, const clpa_radix_node *b);
/* Whether n belongs in the heap: an unlocked leaf other than the root. */
int clpa_radix_is_candidate_(const clpa_radix *t, const clpa_radix_node *n);
/* Takes n, which is in the heap, out of it. */
void clpa_radix_heap_remove_(clpa_radix *t, clpa_radix_node *n);
/* Grows the heap to hold `nodes` candidates. Returns 0, or -1 when out of
 * memory (the heap is unchanged). */
int clpa_radix_heap_reserve_(clpa_radix *t, int64_t nodes);
/* Puts n in or out of the heap, or moves it after its tick changed. */
void clpa_radix_heap_sync_(clpa_radix *t, clpa_radix_node *n);
/* Stamps the path from n up to the root with a fresh tick. */
void clpa_radix_touch_path_(clpa_radix *t, clpa_radix_node *n);

#endif
