/*
 * The radix tree, case by case: the picture in clpa_radix.h, the four
 * insert cases, namespaces, locks, LRU order, argument errors.
 */
#include <string.h>

#include "clpa_radix.h"
#include "kv_internal.h" /* white box: a refcount at INT32_MAX without 2^31 refs */
#include "tap.h"

static clpa_pool *pool;
static clpa_radix *tree;
static int32_t evicted[64];
static int nevicted;

static void on_evict(void *user, const int32_t *b, int32_t n) {
  (void)user;
  for (int32_t i = 0; i < n; i++) evicted[nevicted++] = b[i];
}

static void setup(int32_t bs, int32_t num_blocks) {
  clpa_pool_config pc;
  clpa_pool_config_init(&pc);
  pc.num_blocks = num_blocks;
  pc.block_size = bs;
  clpa_radix_config rc;
  clpa_radix_config_init(&rc);
  rc.on_evict = on_evict;
  nevicted = 0;
  if (clpa_pool_create(&pc, &pool) != CLPA_OK || clpa_radix_create(pool, &rc, &tree) != CLPA_OK) {
    diag("setup failed: %s", clpa_last_error());
    exit(1);
  }
}

static void teardown(void) {
  clpa_radix_destroy(tree);
  clpa_pool_stats ps;
  clpa_pool_stats_get(pool, &ps);
  ok(ps.free == ps.num_blocks, "destroy gives every block back (%d of %d free)", (int)ps.free,
     (int)ps.num_blocks);
  clpa_pool_destroy(pool);
  tree = NULL;
  pool = NULL;
}

/* Inserts tokens with freshly allocated blocks and drops the caller's
 * references, as a finished request would. */
static clpa_radix_insert_result put(uint64_t ns, const int32_t *tok, int32_t n) {
  int32_t blk[64];
  int32_t nb = n / clpa_pool_block_size(pool);
  clpa_radix_insert_result r = {0, 0, NULL, {0}};
  if (clpa_pool_alloc(pool, nb, blk) != CLPA_OK) return r;
  if (clpa_radix_insert(tree, ns, tok, n, blk, &r) != CLPA_OK)
    diag("insert: %s", clpa_last_error());
  for (int32_t i = 0; i < nb; i++) clpa_pool_unref(pool, blk[i]);
  return r;
}

static char *dump_str(void) {
  static char buf[4096];
  FILE *f = fmemopen(buf, sizeof buf, "w");
  clpa_radix_dump(tree, f);
  fclose(f);
  return buf;
}

static clpa_radix_stats stats(void) {
  clpa_radix_stats st;
  clpa_radix_stats_get(tree, &st);
  return st;
}

/* The picture in the header: "ab cd ef" and "ab cd gh", then a match for
 * "ab xy" that splits "ab cd". Letters are 1..8. */
static void test_header_picture(void) {
  setup(2, 16);
  const int32_t abcdef[] = {1, 2, 3, 4, 5, 6}, abcdgh[] = {1, 2, 3, 4, 7, 8}, abxy[] = {1, 2, 9, 9};
  clpa_radix_insert_result r1 = put(0, abcdef, 6);
  clpa_radix_insert_result r2 = put(0, abcdgh, 6);
  ok(r1.cached_tokens == 0 && r2.cached_tokens == 4 && r2.num_tokens == 6,
     "second insert finds 4 tokens cached");
  ok(stats().num_nodes == 3 && stats().splits == 1 && stats().cached_blocks == 4,
     "three nodes, one split, four blocks");
  clpa_radix_node_info info;
  clpa_radix_node_get(tree, r1.node, &info);
  const clpa_radix_node *cd = info.parent;
  clpa_radix_lock(tree, r1.node);
  clpa_radix_match_result m;
  int32_t blk[4] = {-1, -1, -1, -1};
  ok(clpa_radix_match(tree, 0, abxy, 4, blk, 4, &m) == CLPA_OK && m.num_blocks == 1 &&
         m.num_tokens == 2 && blk[0] == 0 && blk[1] == -1,
     "match 'ab xy' finds one block (block %d)", (int)blk[0]);
  clpa_radix_node_get(tree, m.node, &info);
  ok(info.depth_blocks == 1 && info.num_children == 1 && info.lock_count == 1 &&
         stats().splits == 2,
     "the match split 'ab cd'; the upper part inherits the lock");
  clpa_radix_node_info cdi;
  clpa_radix_node_get(tree, cd, &cdi);
  ok(cdi.parent == m.node && cdi.num_blocks == 1 && cdi.tokens[0] == 3 && cdi.num_children == 2,
     "the old node keeps the lower part 'cd' and its children");
  const char *want =
      "(root) nodes=4 blocks=4 evictable=1 protected=3 block_size=2\n"
      "`-- ns=0 [1 2 | 0] lock=1 t=3\n"
      "    `-- [3 4 | 1] lock=1 t=2\n"
      "        +-- [7 8 | 5] lock=0 t=2\n"
      "        `-- [5 6 | 2] lock=1 t=1\n";
  const char *got = dump_str();
  if (!ok(strcmp(got, want) == 0, "dump draws the tree")) diag("got:\n%s", got);
  ok(clpa_radix_check(tree) == CLPA_OK, "valid: %s", clpa_last_error());
  clpa_radix_unlock(tree, r1.node);
  teardown();
}

/* Insert cases 1..4, as labelled in radix.c. */
static void test_insert_cases(void) {
  setup(2, 32);
  const int32_t s[] = {1, 2, 3, 4, 5, 6}, t[] = {1, 2, 3, 4, 8, 8, 9, 9};
  put(0, s, 6);
  clpa_radix_insert_result r = put(0, s, 6);
  ok(r.cached_tokens == 6 && stats().num_nodes == 1 && stats().splits == 0,
     "case 1: all cached at a node boundary adds nothing");
  r = put(0, s, 4);
  ok(r.cached_tokens == 4 && stats().num_nodes == 2 && stats().splits == 1 &&
         stats().cached_blocks == 3,
     "case 2: ends inside an edge: split, no new blocks");
  r = put(0, t, 8);
  ok(r.cached_tokens == 4 && stats().num_nodes == 3 && stats().splits == 1 &&
         stats().cached_blocks == 5,
     "case 3: leaves at a node boundary: one new leaf");
  const int32_t u[] = {1, 2, 3, 4, 7, 7, 6, 6, 5};
  r = put(0, u, 9); /* 4 whole blocks; the partial 5th is not cached */
  ok(r.cached_tokens == 4 && r.num_tokens == 8 && stats().num_nodes == 4 &&
         stats().cached_blocks == 7,
     "case 3 with a partial last block caches only whole blocks");
  const int32_t v[] = {1, 2, 3, 4, 8, 8, 9, 9, 1, 1};
  r = put(0, v, 10);
  ok(r.cached_tokens == 8 && stats().num_nodes == 5, "case 3 below a leaf");
  const int32_t x[] = {1, 2, 3, 4, 8, 8, 7, 5};
  r = put(0, x, 8);
  ok(r.cached_tokens == 6 && stats().splits == 2 && stats().num_nodes == 7,
     "case 4: leaves inside an edge: split, then a new leaf");
  const int32_t y[] = {5, 5, 6, 6, 7, 7}, z[] = {5, 5, 6, 6, 1, 1};
  put(0, y, 6);
  r = put(0, z, 6);
  ok(r.cached_tokens == 4 && stats().splits == 3 && stats().num_nodes == 10 &&
         stats().cached_blocks == 13,
     "case 4 at the top level");
  ok(clpa_radix_check(tree) == CLPA_OK, "valid: %s", clpa_last_error());
  teardown();
}

static void regress_split_at_block_boundary(void) {
  setup(4, 16);
  const int32_t a[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const int32_t b[] = {1, 2, 3, 4, 5, 6, 0, 0, 9, 10, 11, 12};
  put(0, a, 12);
  clpa_radix_match_result m;
  int32_t blk[3];
  clpa_radix_match(tree, 0, b, 12, blk, 3, &m);
  ok(m.num_tokens == 4 && m.num_blocks == 1,
     "a match diverging mid-block counts whole blocks only");
  clpa_radix_insert_result r = put(0, b, 12);
  ok(r.cached_tokens == 4 && stats().cached_blocks == 5 && stats().num_nodes == 3,
     "the edge is cut at the block boundary (4 tokens), not at the divergence (6)");
  teardown();
}

static void test_namespaces(void) {
  setup(2, 16);
  const int32_t s[] = {1, 2, 3, 4};
  put(1, s, 4);
  clpa_radix_match_result m;
  clpa_radix_match(tree, 2, s, 4, NULL, 2, &m);
  ok(m.num_blocks == 0, "the same tokens in another namespace do not match");
  clpa_radix_insert_result r = put(2, s, 4);
  ok(r.cached_tokens == 0 && stats().cached_blocks == 4, "nor share blocks when inserted");
  clpa_radix_match(tree, 1, s, 4, NULL, 2, &m);
  ok(m.num_blocks == 2, "the first namespace still matches");
  teardown();
}

static void test_lru_and_locks(void) {
  setup(1, 16);
  const int32_t a[] = {1, 1, 1}, b[] = {2, 2}, c[] = {3};
  put(0, a, 3);                               /* blocks 0 1 2 */
  put(0, b, 2);                               /* blocks 3 4 */
  clpa_radix_insert_result rc = put(0, c, 1); /* block 5 */
  clpa_radix_match_result m;
  clpa_radix_match(tree, 0, a, 2, NULL, 2, &m); /* touches 1 1, splits off the last 1 */
  ok(clpa_radix_lock(tree, rc.node) == CLPA_OK && stats().protected_blocks == 1 &&
         stats().evictable_tokens == 5,
     "locking c protects one block, five evictable");
  int32_t freed;
  nevicted = 0;
  clpa_radix_evict(tree, 1, &freed);
  ok(freed == 1 && nevicted == 1 && evicted[0] == 2,
     "the oldest leaf goes first: the split-off tail");
  clpa_radix_evict(tree, 1, &freed);
  ok(freed == 2 && evicted[1] == 4 && evicted[2] == 3, "then b, a whole node, deepest block first");
  clpa_radix_evict(tree, 100, &freed);
  ok(freed == 2 && evicted[3] == 1 && evicted[4] == 0 && stats().cached_blocks == 1,
     "then a's upper part; the locked c stays (freed %d)", (int)freed);
  ok(clpa_radix_unlock(tree, rc.node) == CLPA_OK && stats().evictable_blocks == 1,
     "unlock makes c evictable");
  ok(clpa_radix_unlock(tree, rc.node) == CLPA_ERR_STATE, "a second unlock is a state error");
  ok(clpa_radix_lock(tree, clpa_radix_root(tree)) == CLPA_OK &&
         clpa_radix_unlock(tree, clpa_radix_root(tree)) == CLPA_OK,
     "locking the root does nothing");
  /* a block someone else holds leaves the tree but frees nothing */
  clpa_radix_match_result mc;
  int32_t cb;
  clpa_radix_match(tree, 0, c, 1, &cb, 1, &mc);
  clpa_pool_ref(pool, cb);
  clpa_radix_evict(tree, 1, &freed);
  ok(freed == 0 && stats().cached_blocks == 0 && clpa_pool_refcount(pool, cb) == 1,
     "evicting a block still referenced elsewhere frees nothing");
  clpa_pool_unref(pool, cb);
  ok(clpa_pool_num_free(pool) == 16, "all blocks back");
  teardown();
}

static void test_errors(void) {
  setup(2, 8);
  const int32_t s[] = {1, 2, 3, 4}, t[] = {5, 6, 7, 8};
  clpa_radix_insert_result r;
  clpa_radix_match_result m;
  int32_t blk[2];
  clpa_pool_alloc(pool, 2, blk);
  ok(clpa_radix_insert(NULL, 0, s, 4, blk, &r) == CLPA_ERR_INVALID_ARG, "NULL tree");
  ok(clpa_radix_insert(tree, 0, NULL, 4, blk, &r) == CLPA_ERR_INVALID_ARG, "NULL tokens");
  ok(clpa_radix_insert(tree, 0, s, -1, blk, &r) == CLPA_ERR_INVALID_ARG, "negative count");
  int32_t bad[2] = {blk[0], 99};
  ok(clpa_radix_insert(tree, 0, s, 4, bad, &r) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "99"),
     "block out of range: %s", clpa_last_error());
  int32_t twice[2] = {blk[0], blk[0]};
  ok(clpa_radix_insert(tree, 0, s, 4, twice, &r) == CLPA_ERR_INVALID_ARG, "block listed twice: %s",
     clpa_last_error());
  int32_t freeb[2] = {blk[0], 7};
  ok(clpa_radix_insert(tree, 0, s, 4, freeb, &r) == CLPA_ERR_STATE, "free block: %s",
     clpa_last_error());
  ok(stats().num_nodes == 0 && clpa_pool_refcount(pool, blk[0]) == 1,
     "failed inserts changed nothing");
  ok(clpa_radix_insert(tree, 0, s, 4, blk, &r) == CLPA_OK, "a good insert");
  ok(clpa_radix_insert(tree, 0, t, 4, blk, &r) == CLPA_ERR_INVALID_ARG,
     "a block already in the tree under another prefix: %s", clpa_last_error());
  ok(clpa_radix_match(tree, 0, s, 4, NULL, -1, &m) == CLPA_ERR_INVALID_ARG, "negative max_blocks");
  ok(clpa_radix_match(tree, 0, s, 4, NULL, 2, NULL) == CLPA_ERR_INVALID_ARG, "NULL out");
  ok(clpa_radix_evict(tree, -1, NULL) == CLPA_ERR_INVALID_ARG, "negative eviction");
  ok(clpa_radix_lock(tree, NULL) == CLPA_ERR_INVALID_ARG, "NULL node");
  ok(clpa_radix_create(NULL, NULL, &tree) == CLPA_ERR_INVALID_ARG, "NULL pool");
  clpa_radix_lock(tree, r.node); /* destroy with a lock held still releases everything */
  clpa_pool_unref(pool, blk[0]);
  clpa_pool_unref(pool, blk[1]);
  clpa_radix_destroy(tree);
  ok(clpa_pool_num_free(pool) == 8, "destroy drops the tree's references");
  clpa_radix_destroy(NULL);
  clpa_pool_destroy(pool);
}

/* clpa_pool_ref fails inside insert only for a block at INT32_MAX
 * references. The rollback must undo the references already taken and the
 * message must name the failing entry; it used to read blocks[-1] (a heap
 * overflow under ASan when the first fresh block failed). */
static void pin_refcount(int32_t b, int32_t rc) {
  int32_t old = pool->refcount[b];
  pool->num_shared += (rc > 1) - (old > 1);
  pool->refcount[b] = rc;
}

static void regress_insert_ref_failure_rolls_back(void) {
  setup(2, 8);
  const int32_t s[] = {1, 2, 3, 4, 5, 6};
  for (int32_t bad_entry = 0; bad_entry < 3; bad_entry++) {
    int32_t *blk = malloc(3 * sizeof *blk); /* exactly 3, so ASan sees blocks[-1] */
    clpa_pool_alloc(pool, 3, blk);
    pin_refcount(blk[bad_entry], INT32_MAX);
    char before[4096];
    strcpy(before, dump_str());
    clpa_radix_insert_result r;
    clpa_status st = clpa_radix_insert(tree, 0, s, 6, blk, &r);
    char want[64];
    snprintf(want, sizeof want, "entry %d", (int)bad_entry);
    ok(st == CLPA_ERR_STATE && strstr(clpa_last_error(), want) &&
           strstr(clpa_last_error(), "INT32_MAX"),
       "regress: a reference failure at entry %d is named: %s", (int)bad_entry,
       clpa_last_error());
    pin_refcount(blk[bad_entry], 1);
    int rolled_back = 1;
    for (int i = 0; i < 3; i++) rolled_back &= clpa_pool_refcount(pool, blk[i]) == 1;
    ok(rolled_back && strcmp(before, dump_str()) == 0 && clpa_radix_check(tree) == CLPA_OK &&
           clpa_pool_check(pool) == CLPA_OK,
       "regress: the references taken before entry %d were dropped, the tree is unchanged",
       (int)bad_entry);
    for (int i = 0; i < 3; i++) clpa_pool_unref(pool, blk[i]);
    free(blk);
  }
  teardown();
}

/* An ancestor's lock count includes its descendants' locks, and unlock
 * used to take that for a lock of its own: unlocking the ancestor of a
 * locked node returned CLPA_OK, made the ancestor evictable under a
 * locked descendant, and the descendant's own unlock then drove the
 * ancestor's count to -1 (clpa_radix_check: fewer locks than its child). */
static void regress_unlock_ancestor_of_locked_node(void) {
  setup(2, 8);
  const int32_t s[] = {1, 2, 3, 4, 5, 6};
  clpa_radix_insert_result upper = put(0, s, 4), lower = put(0, s, 6);
  ok(clpa_radix_lock(tree, lower.node) == CLPA_OK, "lock the lower node");
  char before[4096];
  strcpy(before, dump_str());
  ok(clpa_radix_unlock(tree, upper.node) == CLPA_ERR_STATE &&
         strstr(clpa_last_error(), "not locked"),
     "regress: unlocking its ancestor, which holds no lock of its own, is refused: %s",
     clpa_last_error());
  ok(strcmp(before, dump_str()) == 0 && stats().protected_blocks == 3 &&
         clpa_radix_check(tree) == CLPA_OK,
     "regress: the refused unlock changed nothing");
  ok(clpa_radix_unlock(tree, lower.node) == CLPA_OK && stats().evictable_blocks == 3 &&
         clpa_radix_check(tree) == CLPA_OK,
     "regress: the lower node's own unlock leaves consistent counts");
  clpa_radix_match_result m; /* a split's upper part takes no lock of its own either */
  clpa_radix_lock(tree, lower.node);
  clpa_radix_match(tree, 0, s, 2, NULL, 1, &m);
  ok(m.num_blocks == 1 && clpa_radix_unlock(tree, m.node) == CLPA_ERR_STATE &&
         clpa_radix_unlock(tree, lower.node) == CLPA_OK && clpa_radix_check(tree) == CLPA_OK,
     "regress: nor does the upper part of a split locked node");
  teardown();
}

/* A node handed to another tree's lock walked up past that tree's root to a
 * NULL parent (a crash; the Python package's first to find it). */
static void regress_node_of_another_tree(void) {
  setup(2, 8);
  const int32_t s[] = {1, 2, 3, 4};
  clpa_radix_node *mine = put(0, s, 4).node;
  clpa_radix *other_tree = tree;
  clpa_pool *other_pool = pool;
  setup(2, 8);
  clpa_radix_node *theirs = put(0, s, 4).node;
  char before[4096];
  strcpy(before, dump_str());
  clpa_radix_node_info info;
  const clpa_radix_node *other_root = clpa_radix_root(other_tree);
  ok(clpa_radix_lock(tree, mine) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "not one of this tree's") &&
         clpa_radix_unlock(tree, mine) == CLPA_ERR_INVALID_ARG &&
         clpa_radix_node_get(tree, mine, &info) == CLPA_ERR_INVALID_ARG &&
         clpa_radix_node_get(tree, other_root, &info) == CLPA_ERR_INVALID_ARG &&
         clpa_radix_lock(tree, (clpa_radix_node *)other_root) == CLPA_ERR_INVALID_ARG,
     "regress: lock, unlock and node_get refuse another tree's node: %s", clpa_last_error());
  ok(strcmp(before, dump_str()) == 0 && clpa_radix_lock(tree, theirs) == CLPA_OK &&
         clpa_radix_node_get(tree, theirs, &info) == CLPA_OK && info.lock_count == 1 &&
         clpa_radix_unlock(tree, theirs) == CLPA_OK && clpa_radix_check(tree) == CLPA_OK,
     "regress: and change nothing; its own node still locks");
  teardown();
  tree = other_tree, pool = other_pool;
  teardown();
}

int main(void) {
  test_header_picture();
  test_insert_cases();
  regress_split_at_block_boundary();
  test_namespaces();
  test_lru_and_locks();
  test_errors();
  regress_insert_ref_failure_rolls_back();
  regress_unlock_ancestor_of_locked_node();
  regress_node_of_another_tree();
  return done_testing();
}
