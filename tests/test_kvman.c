/*
 * The KV manager, case by case: the example in clpa_kvman.h, a fully
 * cached prompt, chunked prefill sharing, eviction under pressure, clean
 * failure, and destroy with requests still running (no leak).
 */
#include <string.h>

#include "clpa_kvman.h"
#include "tap.h"

static long live;
static void *counting_alloc(void *user, void *ptr, size_t old, size_t n) {
  (void)user;
  live += (long)n - (long)(ptr ? old : 0);
  if (n == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, n);
}

static clpa_kvman *make(int32_t blocks, int32_t bs) {
  clpa_kvman_config cfg;
  clpa_kvman_config_init(&cfg);
  cfg.num_blocks = blocks;
  cfg.block_size = bs;
  cfg.allocator.fn = counting_alloc;
  clpa_kvman *km = NULL;
  if (clpa_kvman_create(&cfg, &km) != CLPA_OK) {
    diag("create: %s", clpa_last_error());
    exit(1);
  }
  return km;
}

static clpa_kvman_stats stats(const clpa_kvman *km) {
  clpa_kvman_stats st;
  clpa_kvman_stats_get(km, &st);
  return st;
}

/* A request admitted with one token locks nothing (it cannot share a
 * prefix); checkpointing it used to unlock a NULL node, which failed
 * quietly and overwrote the last error with a spurious INVALID_ARG. */
static void regress_checkpoint_short_prompt(void) {
  clpa_kvman *km = make(16, 2);
  int64_t slots[16];
  clpa_kvman_admit_result a;
  const int32_t one[] = {42}, more[] = {1, 2, 3, 4, 5};
  ok(clpa_kvman_admit(km, 0, one, 1, slots, &a) == CLPA_OK && a.cached_tokens == 0,
     "a one-token prompt is admitted");
  clpa_kvman_append(km, a.req, more, 5, slots);
  clpa_kvman_append(km, a.req, more, -1, slots); /* a known last error */
  char before[256];
  snprintf(before, sizeof before, "%s", clpa_last_error());
  ok(clpa_kvman_checkpoint(km, a.req, 6) == CLPA_OK && strcmp(before, clpa_last_error()) == 0,
     "regress: checkpoint succeeds and leaves the last error alone (%s)", clpa_last_error());
  clpa_kvman_stats st = stats(km);
  ok(st.blocks_cached == 3 && st.blocks_evictable == 0, "its 3 blocks are cached and locked");
  ok(clpa_kvman_checkpoint(km, a.req, 6) == CLPA_OK && strcmp(before, clpa_last_error()) == 0,
     "a second checkpoint moves the lock quietly too");
  clpa_kvman_finish(km, a.req, 1);
  st = stats(km);
  ok(st.blocks_evictable == 3 && st.running == 0, "finish unlocks everything");
  clpa_kvman_destroy(km);
}

/* Boolean-like arguments take 0 or 1 only, as every other field is
 * validated, and the message names the field. */
static void regress_boolean_arguments(void) {
  clpa_kvman_config cfg;
  clpa_kvman_config_init(&cfg);
  cfg.num_blocks = 8;
  clpa_kvman *km = NULL;
  cfg.prefix_cache = 2;
  ok(clpa_kvman_create(&cfg, &km) == CLPA_ERR_INVALID_ARG && km == NULL &&
         strstr(clpa_last_error(), "prefix_cache"),
     "regress: prefix_cache = 2 is refused: %s", clpa_last_error());
  cfg.prefix_cache = -1;
  ok(clpa_kvman_create(&cfg, &km) == CLPA_ERR_INVALID_ARG, "prefix_cache = -1 is refused");
  km = make(8, 2);
  int64_t slots[8];
  clpa_kvman_admit_result a;
  const int32_t p[] = {1, 2, 3, 4, 5};
  clpa_kvman_admit(km, 0, p, 5, slots, &a);
  ok(clpa_kvman_finish(km, a.req, 2) == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "cache") &&
         stats(km).running == 1,
     "regress: finish with cache = 2 is refused and releases nothing: %s", clpa_last_error());
  ok(clpa_kvman_finish(km, a.req, 1) == CLPA_OK && stats(km).blocks_cached == 2,
     "cache = 1 caches");
  clpa_kvman_destroy(km);
}

int main(void) {
  int64_t slots[64];
  clpa_kvman_admit_result a, b;
  enum { S = 1, Y = 2, Q = 3 };

  /* the header's example, block_size 3 */
  clpa_kvman *km = make(8, 3);
  const int32_t p1[] = {S, Y, S, 0, Q, 1}, p2[] = {S, Y, S, 0, Q, 2};
  ok(clpa_kvman_admit(km, 0, p1, 6, slots, &a) == CLPA_OK && a.cached_tokens == 0 &&
         a.num_new_tokens == 6 && slots[0] == 0 && slots[5] == 5,
     "first request computes all 6 tokens in blocks 0 and 1");
  ok(clpa_kvman_finish(km, a.req, 1) == CLPA_OK && stats(km).blocks_cached == 2 &&
         stats(km).blocks_free == 6,
     "finishing it caches both blocks");
  ok(clpa_kvman_admit(km, 0, p2, 6, slots, &b) == CLPA_OK && b.cached_tokens == 3 &&
         b.num_new_tokens == 3,
     "the second request finds 'SYS' cached and computes 3 tokens");
  const int32_t dec[] = {7, 7, 7, 7};
  ok(clpa_kvman_append(km, b.req, dec, 4, slots) == CLPA_OK && clpa_kvreq_num_tokens(b.req) == 10 &&
         clpa_seq_num_blocks(clpa_kvreq_seq(b.req)) == 4,
     "decode appends 4 tokens (10 in all, 4 blocks)");
  clpa_kvman_finish(km, b.req, 1);
  clpa_kvman_stats st = stats(km);
  ok(st.blocks_cached == 4 && st.blocks_free == 4 && st.running == 0 && st.blocks_evictable == 4 &&
         st.hit_tokens == 3 && st.computed_tokens == 13,
     "after both: 4 cached blocks, the partial one freed, 3 hit / 13 computed tokens");

  /* a fully cached prompt still computes its last token */
  ok(clpa_kvman_admit(km, 0, p1, 6, slots, &a) == CLPA_OK && a.cached_tokens == 3 &&
         a.num_new_tokens == 3,
     "a fully cached prompt of 2 blocks reuses 1 and computes the last block again");
  ok(clpa_kvman_admit(km, 1, p1, 6, slots, &b) == CLPA_OK && b.cached_tokens == 0,
     "another namespace shares nothing");
  clpa_kvman_finish(km, b.req, 0);
  /* refused for lack of blocks: nothing held afterwards */
  clpa_pool_stats before;
  clpa_pool_stats_get(clpa_kvman_pool(km), &before);
  int32_t big[30];
  for (int i = 0; i < 30; i++) big[i] = 100 + i;
  ok(clpa_kvman_admit(km, 0, big, 30, slots, &b) == CLPA_ERR_POOL_EXHAUSTED &&
         strstr(clpa_last_error(), "free"),
     "a request larger than the pool is refused: %s", clpa_last_error());
  st = stats(km);
  ok(st.running == 1 && st.blocks_cached + st.blocks_free <= 8 &&
         st.blocks_evictable == st.blocks_cached - 1,
     "after the refusal only the running request's prefix is locked (evictable %d of %d)",
     (int)st.blocks_evictable, (int)st.blocks_cached);
  clpa_kvman_finish(km, a.req, 1);
  clpa_kvman_destroy(km);
  ok(live == 0, "no host memory left after destroy (%ld bytes)", live);

  /* chunked prefill: a checkpoint lets a concurrent request share the part
   * computed so far */
  km = make(16, 2);
  const int32_t doc[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  clpa_kvman_admit(km, 0, doc, 10, slots, &a);
  ok(clpa_kvman_checkpoint(km, a.req, 6) == CLPA_OK && stats(km).blocks_cached == 3 &&
         stats(km).blocks_evictable == 0,
     "checkpoint caches 3 blocks, locked by the running request");
  ok(clpa_kvman_admit(km, 0, doc, 9, slots, &b) == CLPA_OK && b.cached_tokens == 6,
     "a concurrent request reuses the checkpointed 6 tokens");
  clpa_kvman_finish(km, b.req, 1);
  ok(clpa_kvman_checkpoint(km, a.req, 11) == CLPA_ERR_INVALID_ARG, "checkpoint past the end");
  clpa_kvman_finish(km, a.req, 1);
  st = stats(km);
  ok(st.blocks_cached == 5 && st.blocks_evictable == 5 && st.blocks_used == 5,
     "both finished: 5 cached blocks, duplicates freed");

  /* eviction under pressure */
  int32_t other[30];
  for (int i = 0; i < 30; i++) other[i] = 50 + i;
  ok(clpa_kvman_admit(km, 0, other, 30, slots, &a) == CLPA_OK && stats(km).evicted_blocks == 5 &&
         stats(km).blocks_free == 1,
     "a 15-block request, 4 short, evicts whole nodes leaf first: all 5 cached blocks");
  clpa_kvman_finish(km, a.req, 1);
  int32_t freed;
  ok(clpa_kvman_evict(km, 16, &freed) == CLPA_OK && freed == 15 && stats(km).blocks_free == 16,
     "explicit evict empties the cache (%d freed)", (int)freed);
  clpa_kvman_admit(km, 0, doc, 10, slots, &a); /* still running at destroy */
  clpa_kvman_destroy(km);
  ok(live == 0, "destroy releases running requests too (%ld bytes)", live);
  clpa_kvman_destroy(NULL);

  clpa_kvman_config cfg;
  clpa_kvman_config_init(&cfg);
  ok(clpa_kvman_create(&cfg, &km) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "num_blocks"),
     "num_blocks must be set: %s", clpa_last_error());
  regress_checkpoint_short_prompt();
  regress_boolean_arguments();
  ok(live == 0, "no host memory left (%ld bytes)", live);
  return done_testing();
}
