/*
 * radix.c — the radix-tree prefix cache (see clpa_radix.h for the picture):
 * nodes, the walk, match, insert, locks and eviction, inspection.
 *
 * Pieces:
 *   node        one edge: a run of whole blocks (tokens, then block ids, in
 *               one allocation after the header), its lock count, its tick
 *               (radix_internal.h)
 *   child index one open-addressing hash table for the whole tree, keyed by
 *               (parent id, hash of namespace + first block's tokens): finding
 *               the child to follow costs one hash of block_size tokens
 *               (radix_index.c)
 *   heap        a binary min-heap (by tick) of the eviction candidates, the
 *               unlocked leaves; each node knows its slot, so a node that
 *               stops or starts being a candidate costs O(log n)
 *               (radix_heap.c)
 *
 * One walk (walk()) serves match and insert: it returns how many blocks
 * matched, the deepest node reached whole and, when the match stopped
 * inside an edge, that edge and how far into it.
 *
 * Every change is prepared before it is made: nodes are allocated and the
 * index and heap grown first, so an allocation failure leaves the tree as it
 * was, and the steps that follow cannot fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "last_error.h"
#include "radix_internal.h"
#include "reserved.h"

/* ----------------------------------------------------------------------
 * Nodes
 * -------------------------------------------------------------------- */
static size_t node_bytes(const clpa_radix *t, int32_t cap) {
  return sizeof(clpa_radix_node) + (size_t)cap * ((size_t)t->bs + 1) * sizeof(int32_t);
}

static clpa_radix_node *node_new(clpa_radix *t, int32_t cap) {
  size_t per_block = ((size_t)t->bs + 1) * sizeof(int32_t); /* bs tokens and a block id */
  if ((size_t)cap > (SIZE_MAX - sizeof(clpa_radix_node)) / per_block) return NULL;
  clpa_radix_node *n = clpa_mem_alloc(&t->alloc, node_bytes(t, cap));
  if (!n) return NULL;
  memset(n, 0, sizeof *n);
  n->cap_blocks = cap;
  n->heap_idx = -1;
  n->id = t->next_id++;
  return n;
}

static void node_free(clpa_radix *t, clpa_radix_node *n) {
  if (n) clpa_mem_free(&t->alloc, n, node_bytes(t, n->cap_blocks));
}

static void child_link(clpa_radix_node *p, clpa_radix_node *c) {
  c->parent = p;
  c->prev_sib = NULL;
  c->next_sib = p->first_child;
  if (p->first_child) p->first_child->prev_sib = c;
  p->first_child = c;
  p->num_children++;
}

static void child_unlink(clpa_radix_node *c) {
  clpa_radix_node *p = c->parent;
  if (c->prev_sib)
    c->prev_sib->next_sib = c->next_sib;
  else
    p->first_child = c->next_sib;
  if (c->next_sib) c->next_sib->prev_sib = c->prev_sib;
  c->next_sib = c->prev_sib = NULL;
  p->num_children--;
}

/* Next node in pre-order (parents before children), NULL after the last. */
static const clpa_radix_node *preorder_next(const clpa_radix_node *root, const clpa_radix_node *n) {
  if (n->first_child) return n->first_child;
  while (n != root) {
    if (n->next_sib) return n->next_sib;
    n = n->parent;
  }
  return NULL;
}

/* ----------------------------------------------------------------------
 * Create / destroy
 * -------------------------------------------------------------------- */
void clpa_radix_config_init(clpa_radix_config *cfg) {
  if (cfg) memset(cfg, 0, sizeof *cfg);
}

void clpa_radix_destroy(clpa_radix *t) {
  if (!t) return;
  if (t->root) {
    /* post-order: free children before their parent, without a stack */
    clpa_radix_node *n = t->root;
    while (n) {
      if (n->first_child) {
        n = n->first_child;
        continue;
      }
      clpa_radix_node *p = n->parent;
      const int32_t *b = NODE_BLOCKS(t, n);
      for (int32_t i = 0; i < n->num_blocks; i++) clpa_pool_unref(t->pool, b[i]);
      if (p) child_unlink(n);
      node_free(t, n);
      n = p;
    }
  }
  clpa_allocator a = t->alloc;
  clpa_mem_free(&a, t->idx, t->idx_cap * sizeof *t->idx);
  clpa_mem_free(&a, t->heap, (size_t)t->heap_cap * sizeof *t->heap);
  clpa_mem_free(&a, t->in_tree, (size_t)t->pool_blocks);
  clpa_mem_free(&a, t->seen, (size_t)t->pool_blocks * sizeof *t->seen);
  clpa_mem_free(&a, t, sizeof *t);
}

clpa_status clpa_radix_create(clpa_pool *pool, const clpa_radix_config *cfg, clpa_radix **out) {
  CLPA_CHECK(NULL, !pool || !out, CLPA_ERR_INVALID_ARG, "pool and out must not be NULL");
  clpa_radix_config def;
  if (!cfg) {
    clpa_radix_config_init(&def);
    cfg = &def;
  }
  CLPA_CHECK_RESERVED(NULL, cfg, "cfg->");
  CLPA_CHECK(NULL, !cfg->allocator.fn && cfg->allocator.user, CLPA_ERR_INVALID_ARG,
             "allocator has user data but no fn");
  clpa_pool_stats ps;
  clpa_pool_stats_get(pool, &ps);
  clpa_radix *t = clpa_mem_calloc(&cfg->allocator, 1, sizeof *t);
  CLPA_CHECK(NULL, !t, CLPA_ERR_OUT_OF_MEMORY, "no memory for the tree");
  t->pool = pool;
  t->alloc = cfg->allocator;
  t->on_evict = cfg->on_evict;
  t->on_evict_user = cfg->on_evict_user;
  t->bs = clpa_pool_block_size(pool);
  t->pool_blocks = ps.num_blocks;
  t->st.block_size = t->bs;
  t->idx_cap = 64;
  t->root = node_new(t, 0);
  t->idx = clpa_mem_calloc(&t->alloc, t->idx_cap, sizeof *t->idx);
  t->in_tree = clpa_mem_calloc(&t->alloc, (size_t)t->pool_blocks, 1);
  t->seen = clpa_mem_calloc(&t->alloc, (size_t)t->pool_blocks, sizeof *t->seen);
  if (!t->root || !t->idx || !t->in_tree || !t->seen || clpa_radix_heap_reserve_(t, 64)) {
    if (!t->idx) t->idx_cap = 0;
    clpa_radix_destroy(t);
    return CLPA_FAIL(NULL, CLPA_ERR_OUT_OF_MEMORY, "no memory for the tree");
  }
  *out = t;
  return CLPA_OK;
}

/* ----------------------------------------------------------------------
 * The walk
 * -------------------------------------------------------------------- */
typedef struct walk_result {
  clpa_radix_node *node;    /* deepest node whose whole edge matched */
  clpa_radix_node *partial; /* the child whose edge matched only in part, or NULL */
  int32_t partial_blocks;   /* blocks matched in partial's edge: 0 < k < its length */
  int32_t blocks;           /* blocks matched in all */
} walk_result;

/* Follows tokens (max_blocks whole blocks of them) down from the root,
 * writing the matched block ids to blocks_out when it is not NULL. */
static walk_result walk(const clpa_radix *t, uint64_t ns, const int32_t *tokens, int32_t max_blocks,
                        int32_t *blocks_out) {
  walk_result w = {t->root, NULL, 0, 0};
  size_t bytes = (size_t)t->bs * sizeof(int32_t);
  while (w.blocks < max_blocks) {
    const int32_t *q = tokens + (size_t)w.blocks * (size_t)t->bs;
    clpa_radix_node *c = clpa_radix_idx_find_(t, w.node, ns, q);
    if (!c) break;
    const int32_t *et = NODE_TOKENS(c);
    int32_t k = 1; /* clpa_radix_idx_find_ compared the first block */
    while (k < c->num_blocks && w.blocks + k < max_blocks &&
           memcmp(et + (size_t)k * (size_t)t->bs, q + (size_t)k * (size_t)t->bs, bytes) == 0)
      k++;
    if (blocks_out) memcpy(blocks_out + w.blocks, NODE_BLOCKS(t, c), (size_t)k * sizeof(int32_t));
    w.blocks += k;
    if (k < c->num_blocks) {
      w.partial = c;
      w.partial_blocks = k;
      break;
    }
    w.node = c;
  }
  return w;
}

/* Cuts n's edge after k blocks (0 < k < n->num_blocks); m, allocated for k
 * blocks, becomes the upper part and n keeps the lower part, its children
 * and its handle. The index and heap must have room for one more node.
 * Sizes do not change: the blocks only move between nodes of the same lock
 * count.
 *
 *     parent                 parent
 *       |                      |
 *     n [A B C]     --->     m [A]      (takes n's place under parent)
 *      / \                     |
 *                            n [B C]
 *                             / \
 */
static clpa_radix_node *split(clpa_radix *t, clpa_radix_node *n, int32_t k, clpa_radix_node *m) {
  size_t bs = (size_t)t->bs;
  memcpy(NODE_TOKENS(m), NODE_TOKENS(n), (size_t)k * bs * sizeof(int32_t));
  memcpy(NODE_BLOCKS(t, m), NODE_BLOCKS(t, n), (size_t)k * sizeof(int32_t));
  m->num_blocks = k;
  m->ns = n->ns;
  m->key = n->key;
  m->last_access = n->last_access;
  m->lock = n->lock;
  m->pins = 0; /* the locks name n, which keeps its lower end */
  m->depth_blocks = n->depth_blocks - (n->num_blocks - k);
  /* m takes n's place in the sibling list and in the index */
  clpa_radix_node *p = n->parent;
  m->parent = p;
  m->prev_sib = n->prev_sib;
  m->next_sib = n->next_sib;
  if (m->prev_sib)
    m->prev_sib->next_sib = m;
  else
    p->first_child = m;
  if (m->next_sib) m->next_sib->prev_sib = m;
  t->idx[clpa_radix_idx_slot_of_(t, n)].node = m;
  /* n keeps the tail, moved to the front of its own data */
  int32_t rest = n->num_blocks - k;
  int32_t *nb = NODE_BLOCKS(t, n);
  memmove(NODE_TOKENS(n), NODE_TOKENS(n) + (size_t)k * bs, (size_t)rest * bs * sizeof(int32_t));
  memmove(nb, nb + k, (size_t)rest * sizeof(int32_t));
  n->num_blocks = rest;
  n->key = clpa_radix_block_key_(n->ns, NODE_TOKENS(n), t->bs);
  m->first_child = NULL;
  m->num_children = 0;
  child_link(m, n);
  clpa_radix_idx_insert_(t, n);
  t->st.num_nodes++;
  t->st.splits++;
  return m;
}

/* Allocates what `new_nodes` more nodes need: the nodes themselves are
 * allocated by the caller; this grows the index and the heap. */
static int reserve_nodes(clpa_radix *t, int32_t new_nodes) {
  if (clpa_radix_idx_reserve_(t, (size_t)new_nodes)) return -1;
  return clpa_radix_heap_reserve_(t, (int64_t)t->st.num_nodes + new_nodes);
}

/* ----------------------------------------------------------------------
 * Match
 * -------------------------------------------------------------------- */
clpa_status clpa_radix_match(clpa_radix *t, uint64_t ns, const int32_t *tokens, int32_t num_tokens,
                             int32_t *blocks, int32_t max_blocks, clpa_radix_match_result *out) {
  CLPA_CHECK(NULL, !t || !out, CLPA_ERR_INVALID_ARG, "tree and out must not be NULL");
  CLPA_CHECK(NULL, num_tokens < 0 || max_blocks < 0, CLPA_ERR_INVALID_ARG,
             "num_tokens (%d) and max_blocks (%d) must be >= 0", (int)num_tokens, (int)max_blocks);
  CLPA_CHECK(NULL, !tokens && num_tokens > 0, CLPA_ERR_INVALID_ARG,
             "tokens is NULL with num_tokens = %d", (int)num_tokens);
  int32_t nmax = num_tokens / t->bs;
  if (nmax > max_blocks) nmax = max_blocks;
  walk_result w = walk(t, ns, tokens, nmax, NULL); /* blocks: once nothing can fail */
  clpa_radix_node *end = w.node;
  if (w.partial) {
    clpa_radix_node *m = node_new(t, w.partial_blocks);
    if (!m || reserve_nodes(t, 1)) {
      node_free(t, m);
      return CLPA_FAIL(NULL, CLPA_ERR_OUT_OF_MEMORY, "no memory to split a node");
    }
    end = split(t, w.partial, w.partial_blocks, m);
  }
  /* the path's blocks, each edge at its depth, from the end up */
  for (const clpa_radix_node *x = end; blocks && x != t->root; x = x->parent)
    memcpy(blocks + (x->depth_blocks - x->num_blocks), NODE_BLOCKS(t, x),
           (size_t)x->num_blocks * sizeof(int32_t));
  clpa_radix_touch_path_(t, end);
  out->num_blocks = w.blocks;
  out->num_tokens = w.blocks * t->bs;
  out->node = end;
  return CLPA_OK;
}

/* ----------------------------------------------------------------------
 * Insert
 *
 * The walk stops after `i` of the sequence's `n` blocks, either at a node
 * boundary or inside an edge. Four cases:
 *
 *   1. i == n at a node boundary: all cached; nothing to add.
 *   2. i == n inside an edge: split the edge; the upper part is the end.
 *   3. i <  n at a node boundary: a new leaf with blocks [i, n) under the
 *      node the walk reached.
 *   4. i <  n inside an edge: split the edge (as 2), then a new leaf (as 3)
 *      under the upper part.
 * -------------------------------------------------------------------- */
static clpa_status check_new_blocks(clpa_radix *t, const int32_t *b, int32_t n) {
  if (++t->seen_stamp == 0) { /* wrapped: clear the stamps */
    memset(t->seen, 0, (size_t)t->pool_blocks * sizeof *t->seen);
    t->seen_stamp = 1;
  }
  for (int32_t i = 0; i < n; i++) {
    CLPA_CHECK(NULL, b[i] < 0 || b[i] >= t->pool_blocks, CLPA_ERR_INVALID_ARG,
               "block %d (entry %d) is out of range [0, %d)", (int)b[i], (int)i,
               (int)t->pool_blocks);
    CLPA_CHECK(NULL, t->in_tree[b[i]], CLPA_ERR_INVALID_ARG,
               "block %d (entry %d) already holds another prefix in the tree", (int)b[i], (int)i);
    CLPA_CHECK(NULL, t->seen[b[i]] == t->seen_stamp, CLPA_ERR_INVALID_ARG,
               "block %d is listed twice", (int)b[i]);
    CLPA_CHECK(NULL, clpa_pool_refcount(t->pool, b[i]) <= 0, CLPA_ERR_STATE,
               "block %d (entry %d) is free in the pool", (int)b[i], (int)i);
    t->seen[b[i]] = t->seen_stamp;
  }
  return CLPA_OK;
}

clpa_status clpa_radix_insert(clpa_radix *t, uint64_t ns, const int32_t *tokens, int32_t num_tokens,
                              const int32_t *blocks, clpa_radix_insert_result *out) {
  CLPA_CHECK(NULL, !t || !out, CLPA_ERR_INVALID_ARG, "tree and out must not be NULL");
  CLPA_CHECK(NULL, num_tokens < 0, CLPA_ERR_INVALID_ARG, "num_tokens (%d) must be >= 0",
             (int)num_tokens);
  CLPA_CHECK(NULL, num_tokens > 0 && (!tokens || !blocks), CLPA_ERR_INVALID_ARG,
             "tokens and blocks must not be NULL when num_tokens = %d", (int)num_tokens);
  int32_t n = num_tokens / t->bs;
  walk_result w = walk(t, ns, tokens, n, NULL);
  int32_t i = w.blocks, fresh = n - i;
  clpa_status s = check_new_blocks(t, blocks + i, fresh);
  if (s != CLPA_OK) return s;

  /* prepare: allocate every node, grow index and heap, take references */
  clpa_radix_node *m = NULL, *leaf = NULL;
  int32_t new_nodes = (w.partial != NULL) + (fresh > 0);
  if (w.partial) m = node_new(t, w.partial_blocks);
  if (fresh > 0) leaf = node_new(t, fresh);
  if ((w.partial && !m) || (fresh > 0 && !leaf) || reserve_nodes(t, new_nodes)) {
    node_free(t, m);
    node_free(t, leaf);
    return CLPA_FAIL(NULL, CLPA_ERR_OUT_OF_MEMORY, "no memory for %d new node(s)", (int)new_nodes);
  }
  for (int32_t k = 0; k < fresh; k++) {
    s = clpa_pool_ref(t->pool, blocks[i + k]);
    if (s != CLPA_OK) {
      /* name the block (and keep the pool's reason) before the rollback
       * runs k down to -1 */
      int32_t entry = i + k;
      char why[256];
      snprintf(why, sizeof why, "%s", clpa_last_error());
      while (k-- > 0) clpa_pool_unref(t->pool, blocks[i + k]);
      node_free(t, m);
      node_free(t, leaf);
      return CLPA_FAIL(NULL, s, "cannot reference entry %d of blocks (%s)", (int)entry, why);
    }
  }

  /* cases 2 and 4: split the edge the walk stopped in */
  clpa_radix_node *end = w.node;
  if (w.partial) end = split(t, w.partial, w.partial_blocks, m);
  /* cases 3 and 4: hang the rest below it */
  if (leaf) {
    size_t bs = (size_t)t->bs;
    memcpy(NODE_TOKENS(leaf), tokens + (size_t)i * bs, (size_t)fresh * bs * sizeof(int32_t));
    memcpy(NODE_BLOCKS(t, leaf), blocks + i, (size_t)fresh * sizeof(int32_t));
    for (int32_t k = 0; k < fresh; k++) t->in_tree[blocks[i + k]] = 1;
    leaf->num_blocks = fresh;
    leaf->ns = ns;
    leaf->key = clpa_radix_block_key_(ns, NODE_TOKENS(leaf), t->bs);
    leaf->depth_blocks = end->depth_blocks + fresh;
    child_link(end, leaf);
    clpa_radix_idx_insert_(t, leaf);
    clpa_radix_heap_sync_(t, end); /* end is no longer a leaf */
    t->st.num_nodes++;
    t->st.cached_blocks += fresh;
    t->st.evictable_blocks += fresh;
    end = leaf;
  }
  /* case 1 needs nothing but the touch */
  clpa_radix_touch_path_(t, end);
  out->num_tokens = n * t->bs;
  out->cached_tokens = i * t->bs;
  out->node = end;
  return CLPA_OK;
}

/* ----------------------------------------------------------------------
 * Locks and eviction
 * -------------------------------------------------------------------- */
/* The root's child above node (node itself at depth one), or NULL where node is not t's: its
 * walk up ends at another tree's root. */
static const clpa_radix_node *top_of(const clpa_radix *t, const clpa_radix_node *node) {
  const clpa_radix_node *top = node;
  while (top->parent && top->parent != t->root) top = top->parent;
  return top->parent ? top : NULL;
}

clpa_status clpa_radix_lock(clpa_radix *t, clpa_radix_node *node) {
  CLPA_CHECK(NULL, !t || !node, CLPA_ERR_INVALID_ARG, "tree and node must not be NULL");
  if (node == t->root) return CLPA_OK;
  const clpa_radix_node *top = top_of(t, node);
  CLPA_CHECK(NULL, !top, CLPA_ERR_INVALID_ARG, "the node is not one of this tree's");
  /* the topmost node counts every lock below it, so it overflows first */
  CLPA_CHECK(NULL, top->lock == INT32_MAX, CLPA_ERR_STATE, "too many locks on one prefix");
  node->pins++;
  for (clpa_radix_node *p = node; p != t->root; p = p->parent) {
    if (p->lock++ == 0) {
      t->st.evictable_blocks -= p->num_blocks;
      t->st.protected_blocks += p->num_blocks;
      clpa_radix_heap_sync_(t, p);
    }
  }
  return CLPA_OK;
}

clpa_status clpa_radix_unlock(clpa_radix *t, clpa_radix_node *node) {
  CLPA_CHECK(NULL, !t || !node, CLPA_ERR_INVALID_ARG, "tree and node must not be NULL");
  if (node == t->root) return CLPA_OK;
  CLPA_CHECK(NULL, !top_of(t, node), CLPA_ERR_INVALID_ARG, "the node is not one of this tree's");
  /* its own locks, not its descendants': undoing one of theirs here would
   * leave their ancestors' counts short, and negative at their unlock */
  CLPA_CHECK(NULL, node->pins <= 0, CLPA_ERR_STATE,
             "the node is not locked (%d lock(s) below it are its descendants')",
             (int)node->lock);
  node->pins--;
  for (clpa_radix_node *p = node; p != t->root; p = p->parent) {
    if (--p->lock == 0) {
      t->st.protected_blocks -= p->num_blocks;
      t->st.evictable_blocks += p->num_blocks;
      clpa_radix_heap_sync_(t, p);
    }
  }
  return CLPA_OK;
}

/* Removes one unlocked leaf; returns how many of its blocks went back to
 * the pool. */
static int32_t evict_leaf(clpa_radix *t, clpa_radix_node *n) {
  int32_t nb = n->num_blocks, freed = 0;
  int32_t *b = NODE_BLOCKS(t, n);
  for (int32_t i = 0; i < nb / 2; i++) { /* deepest first; n is about to go */
    int32_t x = b[i];
    b[i] = b[nb - 1 - i];
    b[nb - 1 - i] = x;
  }
  if (t->on_evict) t->on_evict(t->on_evict_user, b, nb);
  for (int32_t i = 0; i < nb; i++) {
    clpa_pool_unref(t->pool, b[i]);
    t->in_tree[b[i]] = 0;
    freed += clpa_pool_refcount(t->pool, b[i]) == 0;
  }
  clpa_radix_node *p = n->parent;
  clpa_radix_heap_remove_(t, n);
  clpa_radix_idx_remove_(t, n);
  child_unlink(n);
  node_free(t, n);
  t->st.num_nodes--;
  t->st.cached_blocks -= nb;
  t->st.evictable_blocks -= nb;
  t->st.evicted_blocks += nb;
  t->st.evicted_nodes++;
  clpa_radix_heap_sync_(t, p); /* p may have become an unlocked leaf */
  return freed;
}

clpa_status clpa_radix_evict(clpa_radix *t, int32_t num_blocks, int32_t *num_freed) {
  CLPA_CHECK(NULL, !t, CLPA_ERR_INVALID_ARG, "tree must not be NULL");
  CLPA_CHECK(NULL, num_blocks < 0, CLPA_ERR_INVALID_ARG, "num_blocks (%d) must be >= 0",
             (int)num_blocks);
  int32_t freed = 0;
  while (freed < num_blocks && t->heap_n > 0) freed += evict_leaf(t, t->heap[0]);
  if (num_freed) *num_freed = freed;
  return CLPA_OK;
}

void clpa_radix_stats_get(const clpa_radix *t, clpa_radix_stats *out) {
  if (!out) return;
  if (!t) {
    memset(out, 0, sizeof *out);
    return;
  }
  *out = t->st;
  out->evictable_tokens = (int64_t)t->st.evictable_blocks * t->bs;
  out->protected_tokens = (int64_t)t->st.protected_blocks * t->bs;
}

/* ----------------------------------------------------------------------
 * Inspection
 * -------------------------------------------------------------------- */
clpa_radix_node *clpa_radix_root(const clpa_radix *t) { return t ? t->root : NULL; }

static void node_info(const clpa_radix *t, const clpa_radix_node *n, clpa_radix_node_info *out) {
  out->parent = n->parent;
  out->ns = n->ns;
  out->tokens = NODE_TOKENS(n);
  out->blocks = NODE_BLOCKS(t, n);
  out->num_blocks = n->num_blocks;
  out->depth_blocks = n->depth_blocks;
  out->num_children = n->num_children;
  out->lock_count = n->lock;
  out->last_access = n->last_access;
}

clpa_status clpa_radix_node_get(const clpa_radix *t, const clpa_radix_node *n,
                                clpa_radix_node_info *out) {
  CLPA_CHECK(NULL, !t || !n || !out, CLPA_ERR_INVALID_ARG, "tree, node and out must not be NULL");
  CLPA_CHECK(NULL, n != t->root && !top_of(t, n), CLPA_ERR_INVALID_ARG,
             "the node is not one of this tree's");
  node_info(t, n, out);
  return CLPA_OK;
}

clpa_status clpa_radix_foreach(const clpa_radix *t, clpa_radix_visit_fn fn, void *user) {
  CLPA_CHECK(NULL, !t || !fn, CLPA_ERR_INVALID_ARG, "tree and fn must not be NULL");
  for (const clpa_radix_node *n = preorder_next(t->root, t->root); n;
       n = preorder_next(t->root, n)) {
    clpa_radix_node_info info;
    node_info(t, n, &info);
    if (fn(user, n, &info)) break;
  }
  return CLPA_OK;
}

#define BAD(...) return CLPA_FAIL(NULL, CLPA_ERR_STATE, __VA_ARGS__)

static clpa_status validate_node(const clpa_radix *t, const clpa_radix_node *n, int32_t *blocks,
                                 int32_t *evictable, int32_t *candidates) {
  const clpa_radix_node *p = n->parent;
  if (n->num_blocks <= 0 || n->num_blocks > n->cap_blocks) BAD("node %p has bad length", (void *)n);
  if (n->depth_blocks != p->depth_blocks + n->num_blocks) BAD("node %p has bad depth", (void *)n);
  if (p != t->root && n->ns != p->ns)
    BAD("node %p is in another namespace than its parent", (void *)n);
  if (n->key != clpa_radix_block_key_(n->ns, NODE_TOKENS(n), t->bs))
    BAD("node %p has a stale key", (void *)n);
  if (clpa_radix_idx_find_(t, p, n->ns, NODE_TOKENS(n)) != n)
    BAD("node %p is not found from its parent", (void *)n);
  if (n->last_access > p->last_access && p != t->root)
    BAD("node %p is newer than its parent", (void *)n);
  int32_t kids = 0, child_locks = 0;
  for (const clpa_radix_node *c = n->first_child; c; c = c->next_sib) {
    if (c->parent != n) BAD("child of %p points to another parent", (void *)n);
    kids++;
    child_locks += c->lock;
  }
  if (kids != n->num_children)
    BAD("node %p counts %d children, has %d", (void *)n, (int)n->num_children, (int)kids);
  if (n->pins < 0 || n->lock != n->pins + child_locks)
    BAD("node %p counts %d locks, has %d of its own and %d below", (void *)n, (int)n->lock,
        (int)n->pins, (int)child_locks);
  int cand = clpa_radix_is_candidate_(t, n);
  if (cand != (n->heap_idx >= 0)) BAD("node %p is %sin the heap", (void *)n, cand ? "not " : "");
  if (cand && (n->heap_idx >= t->heap_n || t->heap[n->heap_idx] != n))
    BAD("node %p: heap slot", (void *)n);
  if (n->heap_idx > 0 && clpa_radix_older_(n, t->heap[(n->heap_idx - 1) / 2]))
    BAD("heap order broken at %p", (void *)n);
  const int32_t *b = NODE_BLOCKS(t, n);
  for (int32_t i = 0; i < n->num_blocks; i++) {
    if (b[i] < 0 || b[i] >= t->pool_blocks || !t->in_tree[b[i]])
      BAD("node %p: block %d", (void *)n, (int)b[i]);
    if (clpa_pool_refcount(t->pool, b[i]) < 1) BAD("block %d in the tree is free", (int)b[i]);
  }
  *blocks += n->num_blocks;
  if (n->lock == 0) *evictable += n->num_blocks;
  *candidates += cand;
  return CLPA_OK;
}

clpa_status clpa_radix_check(const clpa_radix *t) {
  CLPA_CHECK(NULL, !t, CLPA_ERR_INVALID_ARG, "tree must not be NULL");
  int32_t nodes = 0, blocks = 0, evictable = 0, candidates = 0;
  for (const clpa_radix_node *n = preorder_next(t->root, t->root); n;
       n = preorder_next(t->root, n)) {
    clpa_status s = validate_node(t, n, &blocks, &evictable, &candidates);
    if (s != CLPA_OK) return s;
    nodes++;
  }
  int32_t marked = 0;
  for (int32_t b = 0; b < t->pool_blocks; b++) marked += t->in_tree[b];
  if (nodes != t->st.num_nodes || (size_t)nodes != t->idx_count)
    BAD("node count %d, stats %d, index %zu", (int)nodes, (int)t->st.num_nodes, t->idx_count);
  if (blocks != t->st.cached_blocks || marked != blocks)
    BAD("cached blocks %d, stats %d, marked %d", (int)blocks, (int)t->st.cached_blocks,
        (int)marked);
  if (evictable != t->st.evictable_blocks || blocks - evictable != t->st.protected_blocks)
    BAD("evictable %d, stats %d/%d", (int)evictable, (int)t->st.evictable_blocks,
        (int)t->st.protected_blocks);
  if (candidates != t->heap_n) BAD("%d candidates, heap holds %d", (int)candidates, (int)t->heap_n);
  if (t->heap_cap < t->st.num_nodes)
    BAD("heap capacity %d below node count %d", (int)t->heap_cap, (int)t->st.num_nodes);
  return CLPA_OK;
}

#undef BAD

static void dump_run(FILE *f, const int32_t *v, int32_t n) {
  int32_t shown = n > 8 ? 8 : n;
  for (int32_t i = 0; i < shown; i++) fprintf(f, i ? " %d" : "%d", (int)v[i]);
  if (shown < n) fprintf(f, " ..(%d)", (int)n);
}

void clpa_radix_dump(const clpa_radix *t, FILE *f) {
  if (!t || !f) return;
  fprintf(f, "(root) nodes=%d blocks=%d evictable=%d protected=%d block_size=%d\n",
          (int)t->st.num_nodes, (int)t->st.cached_blocks, (int)t->st.evictable_blocks,
          (int)t->st.protected_blocks, (int)t->bs);
  for (const clpa_radix_node *n = preorder_next(t->root, t->root); n;
       n = preorder_next(t->root, n)) {
    /* the indent: for each ancestor below the root, a bar if it has a
     * younger sibling still to come; drawn root-side first */
    int depth = 0;
    for (const clpa_radix_node *a = n->parent; a != t->root; a = a->parent) depth++;
    for (int d = depth; d > 0; d--) {
      const clpa_radix_node *c = n;
      for (int k = 0; k < d - 1; k++) c = c->parent;
      fputs(c->parent->next_sib ? "|   " : "    ", f);
    }
    fputs(n->next_sib ? "+-- " : "`-- ", f);
    if (n->parent == t->root) fprintf(f, "ns=%llu ", (unsigned long long)n->ns);
    fputc('[', f);
    dump_run(f, NODE_TOKENS(n), n->num_blocks * t->bs);
    fputs(" | ", f);
    dump_run(f, NODE_BLOCKS(t, n), n->num_blocks);
    fprintf(f, "] lock=%d t=%llu\n", (int)n->lock, (unsigned long long)n->last_access);
  }
}
