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

#include "alloc.h"
#include "clpa_kvman.h"
#include "grow.h"
#include "kv_internal.h" /* the batch append moves a sequence inline */
#include "last_error.h"
#include "reserved.h"

struct clpa_kvreq {
  clpa_kvman *km; /* the owner: a request handed to another manager is refused */
  clpa_seq *seq;
  clpa_radix_node *node; /* locked; the root (never NULL) when nothing is */
  uint64_t ns;
  uint64_t stamp; /* the last batch call that listed it (duplicate check) */
  int32_t *tokens;
  int32_t num_tokens, cap_tokens;
  int32_t row; /* index in km->run */
};

/* The running requests live in one dense array in row order: admit appends,
 * finish moves the last request into the finished one's row. run_seqs is
 * its parallel array of sequences, the batch view's input. */
struct clpa_kvman {
  clpa_allocator alloc;
  clpa_pool *pool;
  clpa_radix *tree;
  int32_t bs;
  int32_t prefix_cache;
  int32_t watermark;
  clpa_kvreq **run;
  const clpa_seq **run_seqs;
  int32_t num_run, run_cap;
  uint64_t stamp;
  int32_t *scratch; /* matched blocks during admit */
  int32_t scratch_cap;
  clpa_kvman_stats st; /* the counters; sizes are read when asked */
};

static size_t run_bytes(int32_t cap) {
  return (size_t)cap * (sizeof(clpa_kvreq *) + sizeof(const clpa_seq *));
}

void clpa_kvman_config_init(clpa_kvman_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->block_size = 16;
  cfg->prefix_cache = 1;
}

void clpa_kvman_config_from_layout(clpa_kvman_config *cfg, const clpa_kv_layout *l) {
  if (!cfg || !l) return;
  cfg->num_blocks = l->num_blocks;
  cfg->block_size = l->block_size;
}

void clpa_kvman_admit_options_init(clpa_kvman_admit_options *opt) {
  if (opt) memset(opt, 0, sizeof *opt);
}

static void req_free(clpa_kvman *km, clpa_kvreq *r) {
  clpa_radix_unlock(km->tree, r->node); /* a no-op for the root */
  clpa_seq_destroy(r->seq);
  clpa_mem_free(&km->alloc, r->tokens, (size_t)r->cap_tokens * sizeof(int32_t));
  clpa_mem_free(&km->alloc, r, sizeof *r);
}

void clpa_kvman_destroy(clpa_kvman *km) {
  if (!km) return;
  while (km->num_run > 0) req_free(km, km->run[--km->num_run]);
  clpa_radix_destroy(km->tree);
  clpa_pool_destroy(km->pool);
  clpa_mem_free(&km->alloc, km->scratch, (size_t)km->scratch_cap * sizeof(int32_t));
  clpa_mem_free(&km->alloc, km->run, run_bytes(km->run_cap));
  clpa_allocator a = km->alloc;
  clpa_mem_free(&a, km, sizeof *km);
}

clpa_status clpa_kvman_create(const clpa_kvman_config *cfg, clpa_kvman **out) {
  CLPA_CHECK(NULL, !cfg || !out, CLPA_ERR_INVALID_ARG, "cfg and out must not be NULL");
  CLPA_CHECK_RESERVED(NULL, cfg, "cfg->");
  CLPA_CHECK(NULL, cfg->num_blocks <= 0 || cfg->block_size <= 0, CLPA_ERR_INVALID_ARG,
             "num_blocks (%d) and block_size (%d) must be > 0", (int)cfg->num_blocks,
             (int)cfg->block_size);
  CLPA_CHECK(NULL, cfg->prefix_cache != 0 && cfg->prefix_cache != 1, CLPA_ERR_INVALID_ARG,
             "cfg->prefix_cache (%d) must be 0 or 1", (int)cfg->prefix_cache);
  CLPA_CHECK(NULL, cfg->free_watermark < 0 || cfg->free_watermark > cfg->num_blocks,
             CLPA_ERR_INVALID_ARG, "cfg->free_watermark (%d) must be in [0, num_blocks = %d]",
             (int)cfg->free_watermark, (int)cfg->num_blocks);
  CLPA_CHECK(NULL, !cfg->allocator.fn && cfg->allocator.user, CLPA_ERR_INVALID_ARG,
             "allocator has user data but no fn");
  clpa_kvman *km = clpa_mem_calloc(&cfg->allocator, 1, sizeof *km);
  CLPA_CHECK(NULL, !km, CLPA_ERR_OUT_OF_MEMORY, "no memory for the manager");
  km->alloc = cfg->allocator;
  km->bs = cfg->block_size;
  km->prefix_cache = cfg->prefix_cache;
  km->watermark = cfg->free_watermark;
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
 * to evict); the caller then tries its allocation. hot: called from admit
 * or append, the engine's critical path. */
static void make_room(clpa_kvman *km, int64_t need, int hot) {
  int32_t free_now = clpa_pool_num_free(km->pool);
  if (need <= free_now || !km->prefix_cache) return;
  if (need > INT32_MAX) need = INT32_MAX;
  clpa_radix_evict(km->tree, (int32_t)(need - free_now), NULL);
  km->st.evictions++;
  km->st.hot_evictions += hot;
}

/* Makes room for one more running request. Both row arrays live in one
 * allocation (run, then run_seqs; see run_bytes), so they grow together or
 * not at all. */

static clpa_status reserve_run(clpa_kvman *km) {
  if (km->num_run < km->run_cap) return CLPA_OK;
  int64_t cap = clpa_grow_cap(km->run_cap, (int64_t)km->num_run + 1, 16, INT32_MAX,
                              sizeof(clpa_kvreq *) + sizeof(const clpa_seq *));
  CLPA_CHECK(NULL, cap < 0, CLPA_ERR_OUT_OF_MEMORY, "too many running requests (%d)",
             (int)km->num_run);
  clpa_kvreq **run = clpa_mem_alloc(&km->alloc, run_bytes((int32_t)cap));
  CLPA_CHECK(NULL, !run, CLPA_ERR_OUT_OF_MEMORY, "no memory for %lld running requests",
             (long long)cap);
  const clpa_seq **seqs = (const clpa_seq **)(run + cap);
  if (km->num_run) {
    memcpy(run, km->run, (size_t)km->num_run * sizeof *run);
    memcpy(seqs, km->run_seqs, (size_t)km->num_run * sizeof *seqs);
  }
  clpa_mem_free(&km->alloc, km->run, run_bytes(km->run_cap));
  km->run = run;
  km->run_seqs = seqs;
  km->run_cap = (int32_t)cap;
  return CLPA_OK;
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

clpa_status clpa_kvman_admit_ex(clpa_kvman *km, uint64_t ns, const int32_t *tokens,
                                int32_t num_tokens, const clpa_kvman_admit_options *opt,
                                int64_t *slots, clpa_kvman_admit_result *out) {
  CLPA_CHECK(NULL, !km || !tokens || !slots || !out, CLPA_ERR_INVALID_ARG,
             "km, tokens, slots and out must not be NULL");
  CLPA_CHECK(NULL, num_tokens < 1, CLPA_ERR_INVALID_ARG, "num_tokens (%d) must be >= 1",
             (int)num_tokens);
  if (opt) CLPA_CHECK_RESERVED(NULL, opt, "opt->");
  int32_t reserve = opt ? opt->reserve_tokens : 0;
  CLPA_CHECK(NULL, reserve < 0 || reserve > INT32_MAX - num_tokens, CLPA_ERR_INVALID_ARG,
             "opt->reserve_tokens (%d) must be >= 0 and keep num_tokens (%d) + it <= INT32_MAX",
             (int)reserve, (int)num_tokens);
  clpa_status s = reserve_run(km);
  if (s != CLPA_OK) return s;
  clpa_kvreq *r = clpa_mem_calloc(&km->alloc, 1, sizeof *r);
  CLPA_CHECK(NULL, !r, CLPA_ERR_OUT_OF_MEMORY, "no memory for a request");
  r->km = km;
  r->ns = ns;
  r->node = clpa_radix_root(km->tree);
  int32_t cached_blocks = 0;
  /* the whole expected length now, so decode steps do not reallocate */
  s = reserve_tokens(km, r, (int64_t)num_tokens + reserve);
  if (s == CLPA_OK) {
    memcpy(r->tokens, tokens, (size_t)num_tokens * sizeof(int32_t));
    r->num_tokens = num_tokens;
    s = clpa_seq_create(km->pool, &r->seq);
  }
  if (s == CLPA_OK) s = clpa_seq_reserve(r->seq, num_tokens + reserve);
  if (s == CLPA_OK) s = share_prefix(km, r, &cached_blocks);
  int32_t cached = cached_blocks * km->bs;
  if (s == CLPA_OK) {
    clpa_block_copy copy;
    make_room(km, blocks_for(num_tokens, km->bs) - cached_blocks, 1);
    s = clpa_seq_append(r->seq, num_tokens - cached, slots, &copy);
  }
  if (s != CLPA_OK) {
    req_free(km, r);
    return s; /* the message says which step failed */
  }
  r->row = km->num_run++;
  km->run[r->row] = r;
  km->run_seqs[r->row] = r->seq;
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

clpa_status clpa_kvman_admit(clpa_kvman *km, uint64_t ns, const int32_t *tokens, int32_t num_tokens,
                             int64_t *slots, clpa_kvman_admit_result *out) {
  return clpa_kvman_admit_ex(km, ns, tokens, num_tokens, NULL, slots, out);
}

/* The blocks appending n tokens to r takes from the pool. */
static int32_t fresh_blocks(const clpa_kvman *km, const clpa_kvreq *r, int32_t n) {
  int32_t room = (int32_t)((int64_t)clpa_seq_num_blocks(r->seq) * km->bs - r->num_tokens);
  if (n <= room) return 0;
  return n - room <= km->bs ? 1 : blocks_for((int64_t)n - room, km->bs);
}

clpa_status clpa_kvman_append(clpa_kvman *km, clpa_kvreq *r, const int32_t *tokens, int32_t n,
                              int64_t *slots) {
  CLPA_CHECK(NULL, !km || !r, CLPA_ERR_INVALID_ARG, "km and req must not be NULL");
  CLPA_CHECK(NULL, r->km != km, CLPA_ERR_INVALID_ARG, "req belongs to another manager");
  CLPA_CHECK(NULL, n < 0, CLPA_ERR_INVALID_ARG, "n (%d) must be >= 0", (int)n);
  CLPA_CHECK(NULL, n > 0 && (!tokens || !slots), CLPA_ERR_INVALID_ARG,
             "tokens and slots must not be NULL when n = %d", (int)n);
  clpa_status s = reserve_tokens(km, r, (int64_t)r->num_tokens + n);
  if (s != CLPA_OK) return s;
  make_room(km, fresh_blocks(km, r, n), 1);
  clpa_block_copy copy;
  s = clpa_seq_append(r->seq, n, slots, &copy);
  if (s != CLPA_OK) return s;
  if (n) memcpy(r->tokens + r->num_tokens, tokens, (size_t)n * sizeof(int32_t)); /* may be NULL */
  r->num_tokens += n;
  km->st.computed_tokens += n;
  return CLPA_OK;
}

/* Checks a batch append's arguments and counts its tokens and new blocks;
 * stamps every request so that a repeated one is caught. *grow is set when
 * some request needs more host memory (a token buffer or block table). */
static clpa_status batch_check(clpa_kvman *km, clpa_kvreq *const *reqs, int32_t num_reqs,
                               const int32_t *counts, int64_t *total_tokens,
                               int64_t *total_blocks, int *grow) {
  uint64_t stamp = ++km->stamp;
  int64_t tokens = 0, blocks = 0;
  int32_t bs = km->bs;
  for (int32_t i = 0; i < num_reqs; i++) {
    clpa_kvreq *r = reqs[i];
    int32_t n = counts ? counts[i] : 1;
    CLPA_CHECK(NULL, !r, CLPA_ERR_INVALID_ARG, "reqs[%d] is NULL", (int)i);
    CLPA_CHECK(NULL, r->km != km, CLPA_ERR_INVALID_ARG, "reqs[%d] belongs to another manager",
               (int)i);
    CLPA_CHECK(NULL, r->stamp == stamp, CLPA_ERR_INVALID_ARG,
               "reqs[%d] is listed twice (row %d)", (int)i, (int)r->row);
    CLPA_CHECK(NULL, n < 0, CLPA_ERR_INVALID_ARG, "counts[%d] (%d) must be >= 0", (int)i, (int)n);
    CLPA_CHECK(NULL, n > INT32_MAX - r->num_tokens, CLPA_ERR_INVALID_ARG,
               "counts[%d] (%d) would take reqs[%d] past INT32_MAX tokens", (int)i, (int)n,
               (int)i);
    r->stamp = stamp;
    tokens += n;
    const clpa_seq *q = r->seq;
    int32_t room = (int32_t)((int64_t)q->num_blocks * bs - q->num_tokens);
    int32_t fresh = n <= room ? 0 : n - room <= bs ? 1 : blocks_for((int64_t)n - room, bs);
    blocks += fresh;
    *grow |= r->num_tokens + n > r->cap_tokens || q->num_blocks + fresh > q->cap;
  }
  CLPA_CHECK(NULL, tokens > INT32_MAX, CLPA_ERR_INVALID_ARG,
             "the batch appends %lld tokens, more than INT32_MAX", (long long)tokens);
  *total_tokens = tokens;
  *total_blocks = blocks;
  return CLPA_OK;
}

/* One token into r, whose memory is reserved, whose new block (if any) is
 * free in the pool and whose last block, with room free slots, is its own:
 * the decode step, inline. */
static void append_one(clpa_kvreq *r, int32_t room, int32_t token, int64_t *slot) {
  clpa_seq *q = r->seq;
  clpa_pool *p = q->pool;
  int32_t bs = p->block_size;
  if (room == 0) {
    q->table[q->num_blocks++] = clpa_pool_pop_(p);
    clpa_seq_changed_(q);
    *slot = (int64_t)q->table[q->num_blocks - 1] * bs;
  } else {
    *slot = (int64_t)q->table[q->num_blocks - 1] * bs + (bs - room);
  }
  q->num_tokens++;
  r->tokens[r->num_tokens++] = token;
}

clpa_status clpa_kvman_append_batch(clpa_kvman *km, clpa_kvreq *const *reqs, int32_t num_reqs,
                                    const int32_t *counts, const int32_t *tokens,
                                    int64_t *slots) {
  CLPA_CHECK(NULL, !km, CLPA_ERR_INVALID_ARG, "km must not be NULL");
  CLPA_CHECK(NULL, num_reqs < 0, CLPA_ERR_INVALID_ARG, "num_reqs (%d) must be >= 0",
             (int)num_reqs);
  CLPA_CHECK(NULL, num_reqs > 0 && !reqs, CLPA_ERR_INVALID_ARG,
             "reqs must not be NULL (num_reqs = %d)", (int)num_reqs);
  int64_t ntok = 0, nblocks = 0;
  int grow = 0;
  clpa_status s = batch_check(km, reqs, num_reqs, counts, &ntok, &nblocks, &grow);
  if (s != CLPA_OK) return s;
  CLPA_CHECK(NULL, ntok > 0 && (!tokens || !slots), CLPA_ERR_INVALID_ARG,
             "tokens and slots must not be NULL for %lld tokens", (long long)ntok);
  /* All or nothing: blocks for everyone, then host memory for everyone;
   * the appends after that cannot fail. */
  make_room(km, nblocks, 1);
  int32_t nfree = clpa_pool_num_free(km->pool);
  CLPA_CHECK(NULL, nblocks > nfree, CLPA_ERR_POOL_EXHAUSTED,
             "the batch needs %lld new blocks, only %d are free (after evicting what could be)",
             (long long)nblocks, (int)nfree);
  for (int32_t i = 0; grow && i < num_reqs; i++) {
    clpa_kvreq *r = reqs[i];
    int32_t n = counts ? counts[i] : 1;
    s = reserve_tokens(km, r, (int64_t)r->num_tokens + n);
    if (s == CLPA_OK) s = clpa_seq_reserve(r->seq, r->num_tokens + n);
    if (s != CLPA_OK) return s; /* only capacities grew */
  }
  int64_t at = 0;
  for (int32_t i = 0; i < num_reqs; i++) {
    clpa_kvreq *r = reqs[i];
    int32_t n = counts ? counts[i] : 1;
    if (n == 0) continue; /* tokens and slots may be NULL: no offsets into them */
    const clpa_seq *q = r->seq;
    /* a running request's partial last block is its own (the tree takes
     * whole blocks only), so no copy-on-write: checked, not assumed */
    int32_t room = (int32_t)((int64_t)q->num_blocks * km->bs - q->num_tokens);
    int shared_tail = room > 0 && q->pool->refcount[q->table[q->num_blocks - 1]] > 1;
    if (n == 1 && !shared_tail) {
      append_one(r, room, tokens[at], &slots[at]);
    } else {
      clpa_block_copy copy;
      clpa_seq_append(r->seq, n, slots + at, &copy);
      memcpy(r->tokens + r->num_tokens, tokens + at, (size_t)n * sizeof(int32_t));
      r->num_tokens += n;
    }
    at += n;
  }
  km->st.computed_tokens += ntok;
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
  CLPA_CHECK(NULL, r->km != km, CLPA_ERR_INVALID_ARG, "req belongs to another manager");
  CLPA_CHECK(NULL, num_computed < 0 || num_computed > r->num_tokens, CLPA_ERR_INVALID_ARG,
             "num_computed (%d) must be in [0, %d]", (int)num_computed, (int)r->num_tokens);
  return cache_tokens(km, r, num_computed, 1);
}

clpa_status clpa_kvman_finish(clpa_kvman *km, clpa_kvreq *r, int cache) {
  CLPA_CHECK(NULL, !km || !r, CLPA_ERR_INVALID_ARG, "km and req must not be NULL");
  CLPA_CHECK(NULL, r->km != km, CLPA_ERR_INVALID_ARG, "req belongs to another manager");
  CLPA_CHECK(NULL, cache != 0 && cache != 1, CLPA_ERR_INVALID_ARG,
             "cache (%d) must be 0 (abort) or 1 (cache the tokens)", cache);
  clpa_status s = cache ? cache_tokens(km, r, r->num_tokens, 0) : CLPA_OK;
  /* the last row moves into this one */
  clpa_kvreq *last = km->run[--km->num_run];
  km->run[r->row] = last;
  km->run_seqs[r->row] = last->seq;
  last->row = r->row;
  req_free(km, r);
  km->st.running--;
  return s;
}

clpa_status clpa_kvman_evict(clpa_kvman *km, int32_t num_blocks, int32_t *num_freed) {
  CLPA_CHECK(NULL, !km, CLPA_ERR_INVALID_ARG, "km must not be NULL");
  CLPA_CHECK(NULL, num_blocks < 0, CLPA_ERR_INVALID_ARG, "num_blocks (%d) must be >= 0",
             (int)num_blocks);
  int32_t before = clpa_pool_num_free(km->pool);
  make_room(km, num_blocks, 0);
  if (num_freed) *num_freed = clpa_pool_num_free(km->pool) - before;
  return CLPA_OK;
}

clpa_status clpa_kvman_reclaim(clpa_kvman *km, int32_t *num_freed) {
  CLPA_CHECK(NULL, !km, CLPA_ERR_INVALID_ARG, "km must not be NULL");
  return clpa_kvman_evict(km, km->watermark, num_freed);
}

int32_t clpa_kvman_num_running(const clpa_kvman *km) { return km ? km->num_run : -1; }

clpa_kvreq *const *clpa_kvman_running(const clpa_kvman *km) { return km ? km->run : NULL; }

clpa_status clpa_kvman_batch_build(clpa_kvman *km, clpa_batch *batch, clpa_batch_view *out) {
  CLPA_CHECK(NULL, !km, CLPA_ERR_INVALID_ARG, "km must not be NULL");
  return clpa_batch_build(batch, km->run_seqs, km->num_run, out);
}

const clpa_seq *clpa_kvreq_seq(const clpa_kvreq *r) { return r ? r->seq : NULL; }
int32_t clpa_kvreq_num_tokens(const clpa_kvreq *r) { return r ? r->num_tokens : -1; }
const int32_t *clpa_kvreq_tokens(const clpa_kvreq *r) { return r ? r->tokens : NULL; }
uint64_t clpa_kvreq_ns(const clpa_kvreq *r) { return r ? r->ns : 0; }
int32_t clpa_kvreq_row(const clpa_kvreq *r) { return r ? r->row : -1; }

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
