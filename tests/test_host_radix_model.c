/*
 * The radix tree against a plain model, over long random operation streams.
 *
 * The model is a flat list of the cached sequences (maximal ones: none is a
 * prefix of another), each with its tokens and block ids, plus per block:
 * last use, lock count and depth. A block id names one cached prefix, so
 * "two sequences share a prefix" is "they hold the same block there".
 * Eviction in the model removes the last block of the sequence whose last
 * block is unlocked and least recently used (deeper first on a tie), one
 * block at a time; the tree evicts whole nodes, deepest block first, so the
 * two must free the very same blocks in the very same order.
 *
 * Checked after every operation: match lengths and blocks, the node's depth,
 * cached / evictable / protected sizes; every 997 operations: the tree's own
 * invariants, the pool's, and every block's refcount (1 when cached, else 0).
 *
 * Usage: test_host_radix_model [ops per run]  (default 60000; six runs: block
 * sizes 1, 16, 32, each with a tight and a roomy pool). CLPA_TEST_SEED replays.
 */
#include <string.h>

#include "clpa_radix.h"
#include "tap.h"

#define MAXB 12 /* blocks per sequence at most */
#define NUM_NS 3
#define NUM_BASES 6
#define MAX_LOCKS 10
#define MAX_POOL 1024

static const uint64_t ns_values[NUM_NS] = {0, 7, 0xfeedfacecafebeefULL};

typedef struct mseq {
  uint64_t ns;
  int32_t n; /* blocks */
  int32_t tok[MAXB * 32];
  int32_t blk[MAXB];
} mseq;

typedef struct mblock {
  int cached, lock, depth;
  uint64_t last;
} mblock;

typedef struct held_lock {
  clpa_radix_node *node;
  int32_t n;
  int32_t blk[MAXB];
} held_lock;

static struct {
  int32_t bs;
  mseq *seqs;
  int nseqs, capseqs;
  mblock blocks[MAX_POOL];
  int32_t pool_blocks;
  uint64_t clock;
  held_lock locks[MAX_LOCKS];
  int nlocks;
  int32_t bases[NUM_BASES][MAXB * 32];
  int32_t evicted[MAX_POOL];
  int nevicted;
} M;

static clpa_pool *pool;
static clpa_radix *tree;
static int failures;

#define CHECK(cond, ...)                      \
  do {                                        \
    if (!(cond)) {                            \
      if (failures++ < 10) diag(__VA_ARGS__); \
    }                                         \
  } while (0)

static void on_evict(void *user, const int32_t *b, int32_t n) {
  (void)user;
  for (int32_t i = 0; i < n && M.nevicted < (int)(sizeof M.evicted / sizeof *M.evicted); i++)
    M.evicted[M.nevicted++] = b[i];
}

/* Longest cached prefix (blocks) of tok in ns, at most cap blocks; *which
 * gets the sequence holding it (-1 when none). */
static int32_t model_match(uint64_t ns, const int32_t *tok, int32_t cap, int *which) {
  int32_t best = 0;
  *which = -1;
  size_t bytes = (size_t)M.bs * sizeof(int32_t);
  for (int s = 0; s < M.nseqs; s++) {
    const mseq *q = &M.seqs[s];
    if (q->ns != ns) continue;
    int32_t k = 0, lim = q->n < cap ? q->n : cap;
    while (k < lim && memcmp(q->tok + k * M.bs, tok + k * M.bs, bytes) == 0) k++;
    if (k > best) {
      best = k;
      *which = s;
    }
  }
  return best;
}

static void model_touch(const int32_t *blk, int32_t n) {
  M.clock++;
  for (int32_t i = 0; i < n; i++) M.blocks[blk[i]].last = M.clock;
}

static void seq_remove(int s) { M.seqs[s] = M.seqs[--M.nseqs]; }

/* Adds a sequence, dropping those that are now its proper prefixes (they
 * hold the same block where they end). */
static void model_add(uint64_t ns, const int32_t *tok, const int32_t *blk, int32_t n) {
  for (int s = M.nseqs - 1; s >= 0; s--) {
    const mseq *t = &M.seqs[s];
    if (t->ns == ns && t->n <= n && t->blk[t->n - 1] == blk[t->n - 1]) seq_remove(s);
  }
  if (M.nseqs == M.capseqs) {
    M.capseqs = M.capseqs ? 2 * M.capseqs : 64;
    M.seqs = realloc(M.seqs, (size_t)M.capseqs * sizeof *M.seqs);
  }
  mseq *q = &M.seqs[M.nseqs++];
  q->ns = ns;
  q->n = n;
  memcpy(q->tok, tok, (size_t)n * (size_t)M.bs * sizeof(int32_t));
  memcpy(q->blk, blk, (size_t)n * sizeof(int32_t));
}

/* Evicts one block the model's way; returns it, or -1 when none can go. */
static int32_t model_evict_one(void) {
  int best = -1;
  for (int s = 0; s < M.nseqs; s++) {
    const mblock *b = &M.blocks[M.seqs[s].blk[M.seqs[s].n - 1]];
    if (b->lock) continue;
    if (best < 0) {
      best = s;
      continue;
    }
    const mblock *c = &M.blocks[M.seqs[best].blk[M.seqs[best].n - 1]];
    if (b->last < c->last || (b->last == c->last && b->depth > c->depth)) best = s;
  }
  if (best < 0) return -1;
  mseq *q = &M.seqs[best];
  int32_t blk = q->blk[--q->n];
  M.blocks[blk].cached = 0;
  if (q->n == 0) {
    seq_remove(best);
  } else {
    int32_t end = q->blk[q->n - 1];
    for (int s = 0; s < M.nseqs; s++)
      if (s != best && M.seqs[s].n > q->n && M.seqs[s].blk[q->n - 1] == end) {
        seq_remove(best); /* now a prefix of another sequence */
        break;
      }
  }
  return blk;
}

static void model_sizes(int32_t *cached, int32_t *evictable) {
  *cached = *evictable = 0;
  for (int b = 0; b < M.pool_blocks; b++) {
    *cached += M.blocks[b].cached;
    *evictable += M.blocks[b].cached && !M.blocks[b].lock;
  }
}

/* A sequence of whole and partial blocks: a cut of one of the bases, then
 * random tokens from a small alphabet (so blocks sometimes collide). */
static int32_t gen_tokens(int32_t *tok) {
  int32_t maxt = MAXB * M.bs + M.bs - 1;
  if (maxt > MAXB * 32) maxt = MAXB * 32;
  int32_t n = 1 + (int32_t)rng_below((uint32_t)maxt);
  int32_t cut = (int32_t)rng_below((uint32_t)n + 1);
  const int32_t *base = M.bases[rng_below(NUM_BASES)];
  for (int32_t i = 0; i < n; i++) tok[i] = i < cut ? base[i] : (int32_t)rng_below(3);
  return n;
}

static void check_sizes(const char *after) {
  clpa_radix_stats st;
  clpa_radix_stats_get(tree, &st);
  int32_t cached, evictable;
  model_sizes(&cached, &evictable);
  CHECK(st.cached_blocks == cached && st.evictable_blocks == evictable &&
            st.protected_blocks == cached - evictable &&
            st.evictable_tokens == (int64_t)evictable * M.bs,
        "after %s: tree cached %d evictable %d protected %d, model %d %d %d", after,
        (int)st.cached_blocks, (int)st.evictable_blocks, (int)st.protected_blocks, (int)cached,
        (int)evictable, (int)(cached - evictable));
}

static void check_deep(long op) {
  clpa_status s = clpa_radix_check(tree);
  CHECK(s == CLPA_OK, "op %ld: tree invalid: %s", op, clpa_last_error());
  s = clpa_pool_check(pool);
  CHECK(s == CLPA_OK, "op %ld: pool invalid: %s", op, clpa_last_error());
  for (int32_t b = 0; b < M.pool_blocks; b++)
    CHECK(clpa_pool_refcount(pool, b) == M.blocks[b].cached,
          "op %ld: block %d refcount %d, model cached %d", op, (int)b,
          (int)clpa_pool_refcount(pool, b), M.blocks[b].cached);
}

static int32_t node_depth(const clpa_radix_node *node) {
  clpa_radix_node_info info;
  clpa_radix_node_get(tree, node, &info);
  return node == clpa_radix_root(tree) ? 0 : info.depth_blocks;
}

static void maybe_lock(clpa_radix_node *node, const int32_t *blk, int32_t n, uint32_t pct) {
  if (M.nlocks == MAX_LOCKS || rng_below(100) >= pct) return;
  CHECK(clpa_radix_lock(tree, node) == CLPA_OK, "lock failed: %s", clpa_last_error());
  held_lock *h = &M.locks[M.nlocks++];
  h->node = node;
  h->n = n;
  memcpy(h->blk, blk, (size_t)n * sizeof(int32_t));
  for (int32_t i = 0; i < n; i++) M.blocks[blk[i]].lock++;
}

static void op_match(void) {
  int32_t tok[MAXB * 32 + 32], blk[MAXB];
  int32_t n = gen_tokens(tok);
  uint64_t ns = ns_values[rng_below(NUM_NS)];
  int32_t cap = rng_below(4) ? MAXB : (int32_t)rng_below(MAXB);
  clpa_radix_match_result r;
  clpa_status s = clpa_radix_match(tree, ns, tok, n, blk, cap, &r);
  int which;
  int32_t want = model_match(ns, tok, n / M.bs < cap ? n / M.bs : cap, &which);
  CHECK(s == CLPA_OK && r.num_blocks == want && r.num_tokens == want * M.bs,
        "match: tree %d blocks, model %d (status %d)", (int)r.num_blocks, (int)want, (int)s);
  if (s != CLPA_OK || r.num_blocks != want) return;
  CHECK(want == 0 || memcmp(blk, M.seqs[which].blk, (size_t)want * sizeof(int32_t)) == 0,
        "match: blocks differ from the model's");
  CHECK(node_depth(r.node) == want, "match: node depth %d, want %d", (int)node_depth(r.node),
        (int)want);
  model_touch(blk, want);
  maybe_lock(r.node, blk, want, 30);
}

static void compare_evictions(int32_t asked, int32_t freed) {
  /* the model evicts as many blocks as the tree did, and must pick the same */
  for (int i = 0; i < M.nevicted; i++) {
    int32_t b = model_evict_one();
    if (b != M.evicted[i]) {
      CHECK(0, "eviction %d of %d: tree freed block %d, model would free %d", i, M.nevicted,
            (int)M.evicted[i], (int)b);
      break;
    }
  }
  int32_t cached, evictable;
  model_sizes(&cached, &evictable);
  CHECK(freed == M.nevicted, "evict reported %d freed, callback saw %d", (int)freed, M.nevicted);
  CHECK(freed >= asked || evictable == 0, "evict(%d) freed %d with %d still evictable", (int)asked,
        (int)freed, (int)evictable);
  M.nevicted = 0;
}

static void do_evict(int32_t n) {
  int32_t freed = -1;
  M.nevicted = 0;
  clpa_status s = clpa_radix_evict(tree, n, &freed);
  CHECK(s == CLPA_OK, "evict failed: %s", clpa_last_error());
  compare_evictions(n, freed);
}

static void op_insert(void) {
  int32_t tok[MAXB * 32 + 32], blk[MAXB];
  int32_t n = gen_tokens(tok), nb = n / M.bs;
  uint64_t ns = ns_values[rng_below(NUM_NS)];
  /* the caller computed the whole sequence in its own blocks */
  int32_t short_by = nb - clpa_pool_num_free(pool);
  if (short_by > 0) do_evict(short_by);
  int which;
  int32_t k = model_match(ns, tok, nb, &which);
  if (clpa_pool_alloc(pool, nb, blk) != CLPA_OK) return;
  clpa_radix_insert_result r;
  clpa_status s = clpa_radix_insert(tree, ns, tok, n, blk, &r);
  CHECK(s == CLPA_OK && r.cached_tokens == k * M.bs && r.num_tokens == nb * M.bs,
        "insert: cached %d tokens, model %d (status %d: %s)", (int)r.cached_tokens, (int)(k * M.bs),
        (int)s, clpa_last_error());
  if (s != CLPA_OK) {
    for (int32_t i = 0; i < nb; i++) clpa_pool_unref(pool, blk[i]);
    return;
  }
  CHECK(node_depth(r.node) == nb, "insert: node depth %d, want %d", (int)node_depth(r.node),
        (int)nb);
  int32_t path[MAXB];
  if (k) memcpy(path, M.seqs[which].blk, (size_t)k * sizeof(int32_t));
  for (int32_t i = k; i < nb; i++) {
    path[i] = blk[i];
    M.blocks[blk[i]] = (mblock){1, 0, (int)i + 1, 0};
  }
  for (int32_t i = 0; i < nb; i++) clpa_pool_unref(pool, blk[i]); /* duplicates go free */
  if (nb > k) model_add(ns, tok, path, nb);
  model_touch(path, nb);
  maybe_lock(r.node, path, nb, 20);
}

/* Whether some held lock names node itself (not a descendant). */
static int held_on(const clpa_radix_node *node) {
  for (int i = 0; i < M.nlocks; i++)
    if (M.locks[i].node == node) return 1;
  return 0;
}

static void op_unlock(void) {
  if (!M.nlocks) return;
  int i = (int)rng_below((uint32_t)M.nlocks);
  held_lock *h = &M.locks[i];
  clpa_radix_node_info info;
  clpa_radix_node_get(tree, h->node, &info);
  clpa_radix_node *up = (clpa_radix_node *)info.parent;
  if (rng_below(4) == 0 && up && up != clpa_radix_root(tree) && !held_on(up)) {
    /* its parent counts its lock but holds none of its own: refused, unchanged */
    clpa_status s = clpa_radix_unlock(tree, up);
    CHECK(s == CLPA_ERR_STATE, "unlock of a parent that holds no lock: status %d", (int)s);
    return;
  }
  clpa_status s = clpa_radix_unlock(tree, h->node);
  CHECK(s == CLPA_OK, "unlock failed: %s", clpa_last_error());
  for (int32_t j = 0; j < h->n; j++) M.blocks[h->blk[j]].lock--;
  M.locks[i] = M.locks[--M.nlocks];
}

static void run(int32_t bs, int32_t pool_blocks, long ops) {
  memset(&M, 0, sizeof M);
  M.bs = bs;
  M.pool_blocks = pool_blocks;
  for (int b = 0; b < NUM_BASES; b++)
    for (int i = 0; i < MAXB * 32; i++) M.bases[b][i] = (int32_t)rng_below(1000);
  clpa_pool_config pc;
  clpa_pool_config_init(&pc);
  pc.num_blocks = pool_blocks;
  pc.block_size = bs;
  clpa_radix_config rc;
  clpa_radix_config_init(&rc);
  rc.on_evict = on_evict;
  if (clpa_pool_create(&pc, &pool) != CLPA_OK || clpa_radix_create(pool, &rc, &tree) != CLPA_OK) {
    ok(0, "create: %s", clpa_last_error());
    return;
  }
  failures = 0;
  long nmatch = 0, ninsert = 0, nevict = 0;
  for (long op = 0; op < ops && failures == 0; op++) {
    uint32_t r = rng_below(100);
    if (r < 40) {
      op_match();
      nmatch++;
      check_sizes("match");
    } else if (r < 75) {
      op_insert();
      ninsert++;
      check_sizes("insert");
    } else if (r < 92) {
      op_unlock();
      check_sizes("unlock");
    } else {
      do_evict(1 + (int32_t)rng_below(8));
      nevict++;
      check_sizes("evict");
    }
    if (op % 997 == 0) check_deep(op);
    if (rng_below(5000) == 0) /* churn the shared prefixes */
      for (int i = 0; i < MAXB * 32; i++)
        M.bases[rng_below(NUM_BASES)][i] = (int32_t)rng_below(1000);
  }
  check_deep(ops);
  clpa_radix_stats st;
  clpa_radix_stats_get(tree, &st);
  ok(failures == 0,
     "block_size %d, %d blocks: %ld ops (%ld match, %ld insert, %ld evict), %lld splits, "
     "%lld nodes evicted, agree with the model",
     (int)bs, (int)pool_blocks, ops, nmatch, ninsert, nevict, (long long)st.splits,
     (long long)st.evicted_nodes);
  /* unlock everything, evict everything: the pool must come back whole */
  while (M.nlocks) op_unlock();
  do_evict(pool_blocks);
  clpa_radix_stats_get(tree, &st);
  ok(st.cached_blocks == 0 && clpa_pool_num_free(pool) == pool_blocks && M.nseqs == 0,
     "block_size %d: full eviction empties the tree and the pool (%d free)", (int)bs,
     (int)clpa_pool_num_free(pool));
  clpa_radix_destroy(tree);
  clpa_pool_destroy(pool);
  free(M.seqs);
}

int main(int argc, char **argv) {
  long ops = argc > 1 ? atol(argv[1]) : 60000;
  rng_seed_from_env();
  const int32_t sizes[] = {1, 16, 32};
  for (int i = 0; i < 3; i++) {
    run(sizes[i], 160, ops);  /* tight: evictions all the time */
    run(sizes[i], 1024, ops); /* roomy: big trees, deep splits */
  }
  return done_testing();
}
