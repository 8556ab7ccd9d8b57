/* The block pool: allocation order, all-or-nothing, refcounts and counters,
 * the free list, and every bad argument. */
#include <string.h>

#include "kv_internal.h"
#include "tap.h"
#include "test_alloc.h"

/* The last call failed with want and a message containing every word. */
static int failed_with(clpa_status got, clpa_status want, const char *w1, const char *w2) {
  const char *e = clpa_last_error();
  int good = got == want && e[0] && (!w1 || strstr(e, w1)) && (!w2 || strstr(e, w2));
  if (!good) diag("got %s, message \"%s\"", clpa_status_name(got), e);
  return good;
}

static clpa_pool *make(int32_t num_blocks, int32_t block_size) {
  clpa_pool_config cfg;
  clpa_pool_config_init(&cfg);
  cfg.num_blocks = num_blocks;
  cfg.block_size = block_size;
  clpa_pool *p = NULL;
  if (clpa_pool_create(&cfg, &p) != CLPA_OK) diag("create: %s", clpa_last_error());
  return p;
}

static int stats_are(const clpa_pool *p, int32_t nb, int32_t nfree, int32_t used, int32_t shared) {
  clpa_pool_stats s;
  clpa_pool_stats_get(p, &s);
  int good = s.num_blocks == nb && s.free == nfree && s.used == used && s.shared == shared &&
             clpa_pool_num_free(p) == nfree;
  if (!good) diag("stats {%d, free %d, used %d, shared %d}", s.num_blocks, s.free, s.used, s.shared);
  return good;
}

static void test_config_and_create(void) {
  clpa_pool_config cfg;
  memset(&cfg, 0x5a, sizeof cfg);
  clpa_pool_config_init(&cfg);
  ok(cfg.num_blocks == 0 && cfg.block_size == 16 && cfg.allocator.fn == NULL &&
         cfg.allocator.user == NULL,
     "config_init zeroes everything but block_size 16");
  clpa_pool_config_init(NULL);
  ok(1, "config_init(NULL) is harmless");

  clpa_pool *p = (clpa_pool *)&cfg; /* must stay untouched on failure */
  ok(failed_with(clpa_pool_create(NULL, &p), CLPA_ERR_INVALID_ARG, "cfg", NULL) &&
         p == (clpa_pool *)&cfg,
     "create: NULL cfg refused, out untouched");
  cfg.num_blocks = 4;
  ok(failed_with(clpa_pool_create(&cfg, NULL), CLPA_ERR_INVALID_ARG, "out", NULL),
     "create: NULL out refused");
  cfg.num_blocks = 0;
  ok(failed_with(clpa_pool_create(&cfg, &p), CLPA_ERR_INVALID_ARG, "num_blocks", "0"),
     "create: num_blocks 0 refused");
  cfg.num_blocks = -5;
  ok(failed_with(clpa_pool_create(&cfg, &p), CLPA_ERR_INVALID_ARG, "num_blocks", "-5"),
     "create: num_blocks -5 refused");
  cfg.num_blocks = 4;
  cfg.block_size = 0;
  ok(failed_with(clpa_pool_create(&cfg, &p), CLPA_ERR_INVALID_ARG, "block_size", NULL),
     "create: block_size 0 refused");
  cfg.block_size = 16;
  cfg.allocator.user = &cfg;
  ok(failed_with(clpa_pool_create(&cfg, &p), CLPA_ERR_INVALID_ARG, "allocator", NULL),
     "create: allocator user data without a function refused");
  ok(p == (clpa_pool *)&cfg, "out untouched by every failed create");

  clpa_pool_destroy(NULL);
  ok(1, "destroy(NULL) is harmless");

  /* The pool's own memory comes from its allocator. */
  test_alloc ta;
  memset(&ta, 0, sizeof ta);
  cfg.allocator = test_allocator(&ta);
  cfg.num_blocks = 1000;
  p = NULL;
  ok(clpa_pool_create(&cfg, &p) == CLPA_OK && p && ta.live > 0 &&
         ta.live_bytes >= 1000 * sizeof(int32_t),
     "create draws on the allocator hook (%lld blocks, %zu bytes)", ta.live, ta.live_bytes);
  clpa_pool_destroy(p);
  ok(ta.live == 0 && ta.live_bytes == 0 && ta.bad_sizes == 0, "destroy returns it all");
  for (long long n = 1; n <= 2; n++) {
    memset(&ta, 0, sizeof ta);
    ta.fail_at = n;
    p = (clpa_pool *)&cfg;
    clpa_status st = clpa_pool_create(&cfg, &p);
    ok(failed_with(st, CLPA_ERR_OUT_OF_MEMORY, NULL, NULL) && p == (clpa_pool *)&cfg &&
           ta.live == 0,
       "create with allocation %lld failing: out of memory, nothing leaked", n);
  }
}

static void test_alloc_ref_unref(void) {
  clpa_pool *p = make(4, 8);
  ok(p && clpa_pool_block_size(p) == 8 && stats_are(p, 4, 4, 0, 0), "fresh pool: 4 free blocks");
  int32_t b[5] = {-9, -9, -9, -9, -9};
  ok(clpa_pool_alloc(p, 3, b) == CLPA_OK && b[0] == 0 && b[1] == 1 && b[2] == 2 && b[3] == -9,
     "a fresh pool hands out the lowest ids first");
  ok(clpa_pool_refcount(p, 0) == 1 && clpa_pool_refcount(p, 3) == 0 && stats_are(p, 4, 1, 3, 0),
     "allocated blocks have refcount 1");
  int32_t c[2] = {-9, -9};
  ok(failed_with(clpa_pool_alloc(p, 2, c), CLPA_ERR_POOL_EXHAUSTED, "need 2", "1 of 4") &&
         c[0] == -9 && c[1] == -9 && stats_are(p, 4, 1, 3, 0),
     "asking for 2 with 1 free: exhausted, nothing taken, nothing written");
  ok(clpa_pool_alloc(p, 0, NULL) == CLPA_OK && stats_are(p, 4, 1, 3, 0), "n = 0 takes nothing");

  ok(clpa_pool_ref(p, 1) == CLPA_OK && clpa_pool_refcount(p, 1) == 2 && stats_are(p, 4, 1, 3, 1),
     "ref makes block 1 shared");
  ok(clpa_pool_ref(p, 1) == CLPA_OK && clpa_pool_refcount(p, 1) == 3 && stats_are(p, 4, 1, 3, 1),
     "a third reference: still one shared block");
  ok(clpa_pool_unref(p, 1) == CLPA_OK && clpa_pool_unref(p, 1) == CLPA_OK &&
         clpa_pool_refcount(p, 1) == 1 && stats_are(p, 4, 1, 3, 0),
     "unref back to 1: no longer shared");
  ok(clpa_pool_unref(p, 1) == CLPA_OK && clpa_pool_refcount(p, 1) == 0 && stats_are(p, 4, 2, 2, 0),
     "unref to 0 frees block 1");
  ok(failed_with(clpa_pool_unref(p, 1), CLPA_ERR_STATE, "block 1", "already free") &&
         stats_are(p, 4, 2, 2, 0),
     "double unref refused with CLPA_ERR_STATE");
  ok(failed_with(clpa_pool_ref(p, 1), CLPA_ERR_STATE, "block 1", "free") &&
         clpa_pool_refcount(p, 1) == 0,
     "ref of a free block refused with CLPA_ERR_STATE");
  ok(clpa_pool_alloc(p, 1, c) == CLPA_OK && c[0] == 1, "the block freed last is reused first");
  ok(clpa_pool_alloc(p, 1, c) == CLPA_OK && c[0] == 3 && stats_are(p, 4, 0, 4, 0),
     "then the remaining free block");
  ok(failed_with(clpa_pool_alloc(p, 1, c), CLPA_ERR_POOL_EXHAUSTED, "0 of 4", NULL),
     "an empty pool refuses one more");
  for (int32_t i = 0; i < 4; i++) clpa_pool_unref(p, i);
  ok(stats_are(p, 4, 4, 0, 0) && clpa_pool_check(p) == CLPA_OK, "all back: 4 free, check passes");
  clpa_pool_destroy(p);
}

static void test_bad_args(void) {
  clpa_pool *p = make(4, 16);
  int32_t b[4];
  ok(failed_with(clpa_pool_alloc(NULL, 1, b), CLPA_ERR_INVALID_ARG, "pool", NULL),
     "alloc: NULL pool");
  ok(failed_with(clpa_pool_alloc(p, -1, b), CLPA_ERR_INVALID_ARG, "n (-1)", NULL),
     "alloc: negative n");
  ok(failed_with(clpa_pool_alloc(p, 1, NULL), CLPA_ERR_INVALID_ARG, "blocks", NULL),
     "alloc: NULL blocks");
  ok(failed_with(clpa_pool_ref(NULL, 0), CLPA_ERR_INVALID_ARG, "pool", NULL), "ref: NULL pool");
  ok(failed_with(clpa_pool_ref(p, -1), CLPA_ERR_INVALID_ARG, "block -1", "out of range"),
     "ref: block -1");
  ok(failed_with(clpa_pool_ref(p, 4), CLPA_ERR_INVALID_ARG, "block 4", "[0, 4)"), "ref: block 4");
  ok(failed_with(clpa_pool_unref(NULL, 0), CLPA_ERR_INVALID_ARG, "pool", NULL), "unref: NULL pool");
  ok(failed_with(clpa_pool_unref(p, INT32_MAX), CLPA_ERR_INVALID_ARG, "2147483647", "out of range"),
     "unref: block INT32_MAX");
  ok(failed_with(clpa_pool_unref(p, INT32_MIN), CLPA_ERR_INVALID_ARG, "out of range", NULL),
     "unref: block INT32_MIN");
  ok(clpa_pool_refcount(NULL, 0) == -1 && clpa_pool_refcount(p, -1) == -1 &&
         clpa_pool_refcount(p, 4) == -1 && clpa_pool_refcount(p, 3) == 0,
     "refcount: -1 out of range or NULL pool, 0 when free");
  clpa_pool_stats s;
  memset(&s, 0x5a, sizeof s);
  clpa_pool_stats_get(NULL, &s);
  clpa_pool_stats_get(p, NULL);
  ok(s.num_blocks == 0 && s.free == 0 && s.used == 0 && s.shared == 0,
     "stats_get: NULL pool gives zeros, NULL out is harmless");
  ok(clpa_pool_block_size(NULL) == -1 && clpa_pool_num_free(NULL) == -1,
     "block_size and num_free of NULL are -1");
  ok(failed_with(clpa_pool_check(NULL), CLPA_ERR_INVALID_ARG, "pool", NULL), "check: NULL pool");
  ok(stats_are(p, 4, 4, 0, 0) && clpa_pool_check(p) == CLPA_OK, "the pool is untouched");
  clpa_pool_destroy(p);
}

/* clpa_pool_check must notice each way the bookkeeping can break. */
static void test_check_detects_corruption(void) {
  clpa_pool *p = make(8, 4);
  int32_t b[3];
  clpa_pool_alloc(p, 3, b);
  clpa_pool_ref(p, b[1]);
  ok(clpa_pool_check(p) == CLPA_OK, "check passes on a healthy pool");

  p->refcount[5] = 1; /* free but counted in use */
  ok(failed_with(clpa_pool_check(p), CLPA_ERR_STATE, "block 5", "free list"),
     "check: a block on the free list with refcount 1");
  p->refcount[5] = 0;

  p->refcount[b[0]] = 0; /* in use but counted free */
  ok(failed_with(clpa_pool_check(p), CLPA_ERR_STATE, "not on the free list", NULL),
     "check: refcount 0 off the free list");
  p->refcount[b[0]] = 1;

  int32_t saved = p->free_stack[0];
  p->free_stack[0] = p->free_stack[1];
  ok(failed_with(clpa_pool_check(p), CLPA_ERR_STATE, "twice", NULL),
     "check: a block on the free list twice");
  p->free_stack[0] = saved;

  p->num_shared++;
  ok(failed_with(clpa_pool_check(p), CLPA_ERR_STATE, "shared counter", NULL),
     "check: shared counter off by one");
  p->num_shared--;
  ok(clpa_pool_check(p) == CLPA_OK, "check passes again once repaired");
  clpa_pool_destroy(p);
}

int main(void) {
  test_config_and_create();
  test_alloc_ref_unref();
  test_bad_args();
  test_check_detects_corruption();
  return done_testing();
}
