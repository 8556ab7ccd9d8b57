/*
 * clpa_radix.h — the prefix cache (RadixAttention).
 *
 * Introduction
 *
 * Requests that share a prefix (a system prompt, few-shot examples, the
 * earlier turns of a chat) share the KV of that prefix. The radix tree
 * remembers which physical blocks hold the KV of which token prefixes after
 * the requests that computed them are gone, so a later request computes
 * only what is new. The KV manager (clpa_kvman.h) ties the block pool,
 * sequences and this tree together the way an engine uses them (admit,
 * append, checkpoint, finish); an engine normally drives the tree through
 * it. Both are host-only, like clpa_kv.h, and need no OpenCL.
 *
 * The tree
 *
 * Keys are token ids, values are physical block ids. Every edge holds a
 * run of whole blocks: block_size tokens and one block id per block, so
 * every match and every insert is block-aligned; the partial last block of
 * a sequence is never cached. A namespace key (uint64: a LoRA adapter id, a
 * tenant salt) keeps prefixes of different namespaces apart: the same
 * tokens under two namespaces never share a block.
 *
 * Here block_size = 2 and the tree holds "ab cd ef" and "ab cd gh" (letters
 * are tokens, digits are blocks; a node is drawn with its edge):
 *
 *              (root)
 *                |
 *            [ab cd|1 2]
 *              /       \
 *       [ef|3]         [gh|4]
 *
 * Node split. A match for "ab xy" ends inside the edge "ab cd", after one
 * block. The edge is cut at that block boundary: a new node takes the
 * upper part ("ab", block 1) and the old node keeps the lower part and its
 * children, so a handle to the old node (held by a running request) still
 * names the same path:
 *
 *        (root)                        (root)
 *          |                             |
 *      [ab cd|1 2]      match        [ab|1]      <- new node, returned
 *        /     \       "ab xy"         |
 *    [ef|3]  [gh|4]    ------>      [cd|2]       <- the old node
 *                                    /    \
 *                                [ef|3]  [gh|4]
 *
 * Recency and eviction. Every match and insert stamps the nodes on its
 * path with a fresh tick. clpa_radix_evict removes the least recently used
 * unlocked leaf (a whole node: all its blocks, deepest first), then the
 * next, until enough blocks went back to the pool; a parent left as an
 * unlocked leaf becomes a candidate in its turn. The candidates live in a
 * heap updated as nodes change, so each step costs O(log n), never a scan
 * of the tree.
 *
 * Locks. A running request locks the node its prefix ends at: the node and
 * every ancestor get their lock count raised, and a locked node is never
 * evicted. Sizes are kept as "evictable" (unlocked nodes) and "protected"
 * (locked nodes) and read in O(1).
 *
 * References. The tree holds one pool reference (clpa_pool_ref) on every
 * block it keeps and drops it (clpa_pool_unref) when the block is evicted
 * or the tree destroyed. Callers keep and release their own references as
 * usual: after an insert that found the first k tokens already cached, the
 * caller's own blocks for those tokens are duplicates, and dropping the
 * caller's references frees them.
 *
 * Failure. Calls that can fail return a clpa_status and set the message of
 * clpa_last_error(). A failed call changes nothing (a match or insert that
 * runs out of host memory, or an insert refused for a block it cannot
 * reference, leaves the tree and the pool's refcounts as they were).
 * Host memory comes from the tree's allocator (clpa_radix_config), whose
 * failures tests inject.
 *
 * Threads. A tree is used by one thread at a time, together with its pool.
 * Lifetime. Destroy the tree before its pool.
 */
#ifndef CLPA_RADIX_H
#define CLPA_RADIX_H

#include <stdio.h>

#include "clpa_kv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
 * Radix tree: create, match, insert
 * ==================================================================== */
typedef struct clpa_radix clpa_radix;
/* A node of the tree. Handles stay valid until the node is evicted; a node
 * that is locked is never evicted, and a split never moves a node's lower
 * end, so a locked handle always names the same prefix. */
typedef struct clpa_radix_node clpa_radix_node;

/* Called once per evicted node with its blocks, deepest first, just before
 * the tree drops its references (an engine may offload them to host memory
 * first). Must not call back into the tree. */
typedef void (*clpa_radix_evict_fn)(void *user, const int32_t *blocks, int32_t num_blocks);

typedef struct clpa_radix_config {
  clpa_allocator allocator;     /* host memory of the tree; {NULL, NULL} = libc */
  clpa_radix_evict_fn on_evict; /* optional */
  void *on_evict_user;
  uint64_t reserved[8]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_radix_config;

/* Fills cfg with defaults: libc allocator, no eviction callback. */
CLPA_API void clpa_radix_config_init(clpa_radix_config *cfg);

/* Creates an empty tree over pool (block size and block count come from
 * it). cfg may be NULL for defaults.
 * Returns CLPA_OK and *out, CLPA_ERR_INVALID_ARG (NULL pool or out, an
 * allocator with user data but no fn) or CLPA_ERR_OUT_OF_MEMORY. */
CLPA_API clpa_status clpa_radix_create(clpa_pool *pool, const clpa_radix_config *cfg,
                                       clpa_radix **out);

/* Drops the tree's reference on every block it holds and frees it, even
 * with nodes still locked. Accepts NULL. */
CLPA_API void clpa_radix_destroy(clpa_radix *tree);

typedef struct clpa_radix_match_result {
  int32_t num_blocks;    /* blocks matched */
  int32_t num_tokens;    /* num_blocks * block_size */
  clpa_radix_node *node; /* where the match ends: lock it to keep the prefix;
                            the root (clpa_radix_root) when nothing matched */
  uint64_t reserved[8]; /* room for fields to come (README's ABI) */
} clpa_radix_match_result;

/* Finds the longest cached prefix of tokens[0..num_tokens) in namespace ns,
 * in whole blocks and at most max_blocks of them, and writes its blocks to
 * blocks[0..num_blocks) (blocks may be NULL to only measure). A match that
 * ends inside an edge splits the edge at the block boundary, so the result
 * always ends at a node. Refreshes the recency of every node on the path.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (NULL tree or out, NULL tokens with
 * num_tokens > 0, num_tokens or max_blocks < 0) or CLPA_ERR_OUT_OF_MEMORY
 * (the split could not be made; the tree is unchanged). */
CLPA_API clpa_status clpa_radix_match(clpa_radix *tree, uint64_t ns, const int32_t *tokens,
                                      int32_t num_tokens, int32_t *blocks, int32_t max_blocks,
                                      clpa_radix_match_result *out);

typedef struct clpa_radix_insert_result {
  int32_t num_tokens;    /* tokens now cached for this sequence: num_tokens
                            rounded down to whole blocks */
  int32_t cached_tokens; /* of those, how many leading tokens were cached
                            already; the caller's blocks for them are
                            duplicates (unless they are the tree's own) */
  clpa_radix_node *node; /* where the inserted sequence ends (root if it
                            is shorter than a block) */
  uint64_t reserved[8]; /* room for fields to come (README's ABI) */
} clpa_radix_insert_result;

/* Adds the whole blocks of tokens[0..num_tokens) in namespace ns, whose KV
 * lives in blocks[0..num_tokens / block_size). The tree takes its own
 * reference on each block it keeps (those after the cached prefix) and
 * refreshes the recency of the whole path. Only the kept blocks are
 * checked; the caller's blocks for the cached prefix are not read.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (NULL tree or out; NULL tokens or
 * blocks with num_tokens > 0; num_tokens < 0; a kept block out of range,
 * listed twice or already in the tree elsewhere), CLPA_ERR_STATE (a kept
 * block is free in the pool, or already has INT32_MAX references; the
 * message names its entry) or CLPA_ERR_OUT_OF_MEMORY. On failure nothing
 * changed. */
CLPA_API clpa_status clpa_radix_insert(clpa_radix *tree, uint64_t ns, const int32_t *tokens,
                                       int32_t num_tokens, const int32_t *blocks,
                                       clpa_radix_insert_result *out);

/* ======================================================================
 * Locks, sizes, eviction
 * ==================================================================== */

/* Protects node and its ancestors from eviction (a count: lock twice,
 * unlock twice). Locking the root does nothing.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (NULL tree or node, or a node of
 * another tree) or CLPA_ERR_STATE (the prefix already holds INT32_MAX
 * locks). */
CLPA_API clpa_status clpa_radix_lock(clpa_radix *tree, clpa_radix_node *node);

/* Undoes one clpa_radix_lock of node. Unlocking the root does nothing.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (NULL tree or node, or a node of
 * another tree) or
 * CLPA_ERR_STATE (node is not locked: locks on its descendants, which its
 * lock_count also counts, are theirs to undo). */
CLPA_API clpa_status clpa_radix_unlock(clpa_radix *tree, clpa_radix_node *node);

typedef struct clpa_radix_stats {
  int32_t block_size;
  int32_t num_nodes;        /* excluding the root */
  int32_t cached_blocks;    /* blocks held by the tree */
  int32_t evictable_blocks; /* in unlocked nodes */
  int32_t protected_blocks; /* in locked nodes; evictable + protected = cached */
  int64_t evictable_tokens; /* evictable_blocks * block_size */
  int64_t protected_tokens;
  int64_t evicted_blocks; /* total over the tree's life */
  int64_t evicted_nodes;
  int64_t splits;
  uint64_t reserved[8]; /* room for fields to come (README's ABI) */
} clpa_radix_stats;

/* Fills *out (zeros for a NULL tree; nothing when out is NULL). O(1). */
CLPA_API void clpa_radix_stats_get(const clpa_radix *tree, clpa_radix_stats *out);

/* Removes least recently used unlocked leaves until at least num_blocks
 * blocks went back to the pool or nothing evictable is left. A block that
 * someone else still references leaves the tree but frees nothing and does
 * not count. Never allocates. *num_freed (may be NULL) receives the blocks
 * that went back to the pool; it may pass num_blocks by up to a node's
 * length, and fall short of it only when nothing evictable is left.
 * Returns CLPA_OK or CLPA_ERR_INVALID_ARG (NULL tree, num_blocks < 0). */
CLPA_API clpa_status clpa_radix_evict(clpa_radix *tree, int32_t num_blocks, int32_t *num_freed);

/* ======================================================================
 * Inspection (tests, debugging)
 * ==================================================================== */

/* Returns the root (never NULL for a valid tree; NULL for a NULL tree). */
CLPA_API clpa_radix_node *clpa_radix_root(const clpa_radix *tree);

typedef struct clpa_radix_node_info {
  const clpa_radix_node *parent; /* NULL for the root */
  uint64_t ns;
  const int32_t *tokens; /* the edge: num_blocks * block_size tokens */
  const int32_t *blocks; /* num_blocks block ids */
  int32_t num_blocks;    /* 0 only for the root */
  int32_t depth_blocks;  /* blocks from the root to the end of this edge */
  int32_t num_children;
  int32_t lock_count;
  uint64_t last_access; /* tick of the last match/insert through it */
  uint64_t reserved[8]; /* room for fields to come (README's ABI) */
} clpa_radix_node_info;

/* Describes node; the pointers stay valid until the tree next changes.
 * Returns CLPA_OK or CLPA_ERR_INVALID_ARG (NULL tree, node or out, or a
 * node of another tree). A node the tree has evicted is no node: its
 * handle must not be passed to any call. */
CLPA_API clpa_status clpa_radix_node_get(const clpa_radix *tree, const clpa_radix_node *node,
                                         clpa_radix_node_info *out);

/* Calls fn for every node except the root, parents before children. fn
 * must not change the tree; a nonzero return stops the walk.
 * Returns CLPA_OK or CLPA_ERR_INVALID_ARG (NULL tree or fn). */
typedef int (*clpa_radix_visit_fn)(void *user, const clpa_radix_node *node,
                                   const clpa_radix_node_info *info);
CLPA_API clpa_status clpa_radix_foreach(const clpa_radix *tree, clpa_radix_visit_fn fn, void *user);

/* Checks the tree's internal invariants (sizes, heap, child index, locks,
 * block references against the pool's refcounts being at least 1) in
 * O(nodes + pool blocks) time. For tests.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (NULL tree) or CLPA_ERR_STATE with
 * the first broken invariant. */
CLPA_API clpa_status clpa_radix_check(const clpa_radix *tree);

/* Draws the tree to f, one node per line, children indented under their
 * parent: "[t0 t1 .. | b0 b1] lock=1 t=42" (edges longer than 8 tokens are
 * cut with ".."). Does nothing for a NULL tree or file. */
CLPA_API void clpa_radix_dump(const clpa_radix *tree, FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* CLPA_RADIX_H */
