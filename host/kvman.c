/*
 * kvman.c — the KV manager (see clpa_kvman.h): a pool, a radix tree and the
 * admitted requests, each a sequence plus its tokens and the tree node its
 * cached prefix ends at (locked while the request runs).
 *
 * Reference counting, the one thing to get right here: a request's
 * sequence holds one reference on each of its blocks (shared prefix blocks
 * included), the tree holds one on each block it caches, and the two are
 * independent. Finishing a request inserts its blocks (the tree references
 * those it keeps) and destroys the sequence, which drops the request's
 * references: duplicates of cached blocks and the partial last block reach
 * zero and go back to the pool.
 */
#include <string.h>

#include "clpa_kvman.h"
#include "grow.h"
#include "util.h"

struct clpa_kvreq {
  clpa_kvreq *prev, *next;
  clpa_seq *seq;
  clpa_radix_node *node; /* locked; the root (never NULL) when nothing is */
  uint64_t ns;
  int32_t *tokens;
  int32_t num_tokens, cap_tokens;
};

struct clpa_kvman {
  clpa_allocator alloc;
  clpa_pool *pool;
  clpa_radix *tree;
  int32_t bs;
  int32_t prefix_cache;
  clpa_kvreq *reqs; /* running requests, a doubly linked list */
  int32_t *scratch; /* matched blocks during admit */
  int32_t scratch_cap;
  clpa_kvman_stats st; /* the counters; sizes are read when asked */
};

void clpa_kvman_config_init(clpa_kvman_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->block_size = 16;
  cfg->prefix_cache = 1;
}

static void req_free(clpa_kvman *km, clpa_kvreq *r) {
  clpa_radix_unlock(km->tree, r->node); /* a no-op for the root */
  clpa_seq_destroy(r->seq);
  clpa_mem_free(&km->alloc, r->tokens, (size_t)r->cap_tokens * sizeof(int32_t));
  clpa_mem_free(&km->alloc, r, sizeof *r);
}

void clpa_kvman_destroy(clpa_kvman *km) {
  if (!km) return;
  while (km->reqs) {
    clpa_kvreq *r = km->reqs;
    km->reqs = r->next;
    req_free(km, r);
  }
  clpa_radix_destroy(km->tree);
  clpa_pool_destroy(km->pool);
  clpa_mem_free(&km->alloc, km->scratch, (size_t)km->scratch_cap * sizeof(int32_t));
  clpa_allocator a = km->alloc;
  clpa_mem_free(&a, km, sizeof *km);
}

clpa_status clpa_kvman_create(const clpa_kvman_config *cfg, clpa_kvman **out) {
  CLPA_CHECK(NULL, !cfg || !out, CLPA_ERR_INVALID_ARG, "cfg and out must not be NULL");
  CLPA_CHECK(NULL, cfg->num_blocks <= 0 || cfg->block_size <= 0, CLPA_ERR_INVALID_ARG,
             "num_blocks (%d) and block_size (%d) must be > 0", (int)cfg->num_blocks,
             (int)cfg->block_size);
  CLPA_CHECK(NULL, cfg->prefix_cache != 0 && cfg->prefix_cache != 1, CLPA_ERR_INVALID_ARG,
             "cfg->prefix_cache (%d) must be 0 or 1", (int)cfg->prefix_cache);
  CLPA_CHECK(NULL, !cfg->allocator.fn && cfg->allocator.user, CLPA_ERR_INVALID_ARG,
             "allocator has user data but no fn");
  clpa_kvman *km = clpa_mem_calloc(&cfg->allocator, 1, sizeof *km);
  CLPA_CHECK(NULL, !km, CLPA_ERR_OUT_OF_MEMORY, "no memory for the manager");
  km->alloc = cfg->allocator;
  km->bs = cfg->block_size;
  km->prefix_cache = cfg->prefix_cache;
  clpa_pool_config pc;
  clpa_pool_config_init(&pc);
  pc.num_blocks = cfg->num_blocks;
  pc.block_size = cfg->block_size;
  pc.allocator = cfg->allocator;
  clpa_radix_config rc;
  clpa_radix_config_init(&rc);
  rc.allocator = cfg->allocator;
  clpa_status s = clpa_pool_create(&pc, &km->pool);
  if (s == CLPA_OK) s = clpa_radix_create(km->pool, &rc, &km->tree);
  if (s != CLPA_OK) {
    clpa_kvman_destroy(km);
    return s; /* the message is the pool's or the tree's */
  }
  *out = km;
  return CLPA_OK;
}

static int32_t blocks_for(int64_t tokens, int32_t bs) { return (int32_t)((tokens + bs - 1) / bs); }

/* Evicts cached prefixes until `need` blocks are free (or nothing is left
 * to evict); the caller then tries its allocation. */
static void make_room(clpa_kvman *km, int32_t need) {
  int32_t free_now = clpa_pool_num_free(km->pool);
  if (need <= free_now || !km->prefix_cache) return;
  clpa_radix_evict(km->tree, need - free_now, NULL);
  km->st.evictions++;
}

static clpa_status reserve_tokens(clpa_kvman *km, clpa_kvreq *r, int64_t need) {
  if (need <= r->cap_tokens) return CLPA_OK;
  CLPA_CHECK(NULL, need > INT32_MAX, CLPA_ERR_INVALID_ARG, "more than INT32_MAX tokens");
  int64_t cap = clpa_grow_cap(r->cap_tokens, need, 64, INT32_MAX, sizeof(int32_t));
  CLPA_CHECK(NULL, cap < 0, CLPA_ERR_OUT_OF_MEMORY, "%lld tokens do not fit in host memory",
             (long long)need);
  int32_t *t = clpa_mem_realloc(&km->alloc, r->tokens, (size_t)r->cap_tokens * sizeof(int32_t),
                                (size_t)cap * sizeof(int32_t));
  CLPA_CHECK(NULL, !t, CLPA_ERR_OUT_OF_MEMORY, "no memory for %lld tokens", (long long)cap);
  r->tokens = t;
  r->cap_tokens = (int32_t)cap;
  return CLPA_OK;
}

/* Matches, locks and shares the cached prefix of r's prompt (all but its
 * last token, which is always computed). Returns its length in blocks
 * through *blocks. */
static clpa_status share_prefix(clpa_kvman *km, clpa_kvreq *r, int32_t *blocks) {
  *blocks = 0;
  if (!km->prefix_cache || r->num_tokens < 2) return CLPA_OK;
  int32_t maxb = (r->num_tokens - 1) / km->bs;
  if (maxb > km->scratch_cap) {
    int64_t cap = clpa_grow_cap(km->scratch_cap, maxb, 64, INT32_MAX, sizeof(int32_t));
    int32_t *s = cap < 0 ? NULL
                         : clpa_mem_realloc(&km->alloc, km->scratch,
                                            (size_t)km->scratch_cap * sizeof(int32_t),
                                            (size_t)cap * sizeof(int32_t));
    CLPA_CHECK(NULL, !s, CLPA_ERR_OUT_OF_MEMORY, "no memory for %d block ids", (int)maxb);
    km->scratch = s;
    km->scratch_cap = (int32_t)cap;
  }
  clpa_radix_match_result m;
  clpa_status s =
      clpa_radix_match(km->tree, r->ns, r->tokens, r->num_tokens - 1, km->scratch, maxb, &m);
  if (s != CLPA_OK) return s;
  s = clpa_radix_lock(km->tree, m.node);
  if (s != CLPA_OK) return s;
  r->node = m.node;
  s = clpa_seq_append_blocks(r->seq, km->scratch, m.num_blocks);
  if (s != CLPA_OK) return s;
  *blocks = m.num_blocks;
  return CLPA_OK;
}

clpa_status clpa_kvman_admit(clpa_kvman *km, uint64_t ns, const int32_t *tokens, int32_t num_tokens,
                             int64_t *slots, clpa_kvman_admit_result *out) {
  CLPA_CHECK(NULL, !km || !tokens || !slots || !out, CLPA_ERR_INVALID_ARG,
             "km, tokens, slots and out must not be NULL");
  CLPA_CHECK(NULL, num_tokens < 1, CLPA_ERR_INVALID_ARG, "num_tokens (%d) must be >= 1",
             (int)num_tokens);
  clpa_kvreq *r = clpa_mem_calloc(&km->alloc, 1, sizeof *r);
  CLPA_CHECK(NULL, !r, CLPA_ERR_OUT_OF_MEMORY, "no memory for a request");
  r->ns = ns;
  r->node = clpa_radix_root(km->tree);
  int32_t cached_blocks = 0;
  clpa_status s = reserve_tokens(km, r, num_tokens);
  if (s == CLPA_OK) {
    memcpy(r->tokens, tokens, (size_t)num_tokens * sizeof(int32_t));
    r->num_tokens = num_tokens;
    s = clpa_seq_create(km->pool, &r->seq);
  }
  if (s == CLPA_OK) s = share_prefix(km, r, &cached_blocks);
  int32_t cached = cached_blocks * km->bs;
  if (s == CLPA_OK) {
    clpa_block_copy copy;
    make_room(km, blocks_for(num_tokens, km->bs) - cached_blocks);
    s = clpa_seq_append(r->seq, num_tokens - cached, slots, &copy);
  }
  if (s != CLPA_OK) {
    req_free(km, r);
    return s; /* the message says which step failed */
  }
  r->next = km->reqs;
  if (km->reqs) km->reqs->prev = r;
  km->reqs = r;
  km->st.requests++;
  km->st.running++;
  km->st.prompt_tokens += num_tokens;
  km->st.hit_tokens += cached;
  km->st.computed_tokens += num_tokens - cached;
  out->req = r;
  out->cached_tokens = cached;
  out->num_new_tokens = num_tokens - cached;
  return CLPA_OK;
}

clpa_status clpa_kvman_append(clpa_kvman *km, clpa_kvreq *r, const int32_t *tokens, int32_t n,
                              int64_t *slots) {
  CLPA_CHECK(NULL, !km || !r, CLPA_ERR_INVALID_ARG, "km and req must not be NULL");
  CLPA_CHECK(NULL, n < 0, CLPA_ERR_INVALID_ARG, "n (%d) must be >= 0", (int)n);
  CLPA_CHECK(NULL, n > 0 && (!tokens || !slots), CLPA_ERR_INVALID_ARG,
             "tokens and slots must not be NULL when n = %d", (int)n);
  clpa_status s = reserve_tokens(km, r, (int64_t)r->num_tokens + n);
  if (s != CLPA_OK) return s;
  make_room(km, blocks_for((int64_t)r->num_tokens + n, km->bs) - blocks_for(r->num_tokens, km->bs));
  clpa_block_copy copy;
  s = clpa_seq_append(r->seq, n, slots, &copy);
  if (s != CLPA_OK) return s;
  memcpy(r->tokens + r->num_tokens, tokens, (size_t)n * sizeof(int32_t));
  r->num_tokens += n;
  km->st.computed_tokens += n;
  return CLPA_OK;
}

/* Inserts r's first n tokens; on success moves r's lock to where they end
 * when relock is set. */
static clpa_status cache_tokens(clpa_kvman *km, clpa_kvreq *r, int32_t n, int relock) {
  if (!km->prefix_cache || n < km->bs) return CLPA_OK;
  clpa_radix_insert_result ir;
  clpa_status s =
      clpa_radix_insert(km->tree, r->ns, r->tokens, n, clpa_seq_block_table(r->seq), &ir);
  if (s != CLPA_OK || !relock) return s;
  s = clpa_radix_lock(km->tree, ir.node);
  if (s != CLPA_OK) return s;
  clpa_radix_unlock(km->tree, r->node);
  r->node = ir.node;
  return CLPA_OK;
}

clpa_status clpa_kvman_checkpoint(clpa_kvman *km, clpa_kvreq *r, int32_t num_computed) {
  CLPA_CHECK(NULL, !km || !r, CLPA_ERR_INVALID_ARG, "km and req must not be NULL");
  CLPA_CHECK(NULL, num_computed < 0 || num_computed > r->num_tokens, CLPA_ERR_INVALID_ARG,
             "num_computed (%d) must be in [0, %d]", (int)num_computed, (int)r->num_tokens);
  return cache_tokens(km, r, num_computed, 1);
}

clpa_status clpa_kvman_finish(clpa_kvman *km, clpa_kvreq *r, int cache) {
  CLPA_CHECK(NULL, !km || !r, CLPA_ERR_INVALID_ARG, "km and req must not be NULL");
  CLPA_CHECK(NULL, cache != 0 && cache != 1, CLPA_ERR_INVALID_ARG,
             "cache (%d) must be 0 (abort) or 1 (cache the tokens)", cache);
  clpa_status s = cache ? cache_tokens(km, r, r->num_tokens, 0) : CLPA_OK;
  if (r->prev)
    r->prev->next = r->next;
  else
    km->reqs = r->next;
  if (r->next) r->next->prev = r->prev;
  req_free(km, r);
  km->st.running--;
  return s;
}

clpa_status clpa_kvman_evict(clpa_kvman *km, int32_t num_blocks, int32_t *num_freed) {
  CLPA_CHECK(NULL, !km, CLPA_ERR_INVALID_ARG, "km must not be NULL");
  CLPA_CHECK(NULL, num_blocks < 0, CLPA_ERR_INVALID_ARG, "num_blocks (%d) must be >= 0",
             (int)num_blocks);
  int32_t before = clpa_pool_num_free(km->pool);
  make_room(km, num_blocks);
  if (num_freed) *num_freed = clpa_pool_num_free(km->pool) - before;
  return CLPA_OK;
}

const clpa_seq *clpa_kvreq_seq(const clpa_kvreq *r) { return r ? r->seq : NULL; }
int32_t clpa_kvreq_num_tokens(const clpa_kvreq *r) { return r ? r->num_tokens : -1; }
const int32_t *clpa_kvreq_tokens(const clpa_kvreq *r) { return r ? r->tokens : NULL; }
uint64_t clpa_kvreq_ns(const clpa_kvreq *r) { return r ? r->ns : 0; }

void clpa_kvman_stats_get(const clpa_kvman *km, clpa_kvman_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (!km) return;
  *out = km->st;
  clpa_pool_stats ps;
  clpa_pool_stats_get(km->pool, &ps);
  clpa_radix_stats rs;
  clpa_radix_stats_get(km->tree, &rs);
  out->evicted_blocks = rs.evicted_blocks;
  out->blocks_total = ps.num_blocks;
  out->blocks_free = ps.free;
  out->blocks_used = ps.used;
  out->blocks_cached = rs.cached_blocks;
  out->blocks_evictable = rs.evictable_blocks;
}

clpa_pool *clpa_kvman_pool(const clpa_kvman *km) { return km ? km->pool : NULL; }
clpa_radix *clpa_kvman_radix(const clpa_kvman *km) { return km ? km->tree : NULL; }
