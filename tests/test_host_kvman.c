/*
 * The KV manager, case by case: the example in clpa_kvman.h, a fully
 * cached prompt, chunked prefill sharing, eviction under pressure, clean
 * failure, and destroy with requests still running (no leak).
 */
#include <string.h>

#include "clpa_kvman.h"
#include "tap.h"

static long live, alloc_calls;
static void *counting_alloc(void *user, void *ptr, size_t old, size_t n) {
  (void)user;
  live += (long)n - (long)(ptr ? old : 0);
  alloc_calls += n > 0;
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

/* Appending nothing takes NULL tokens and slots (the header allows them
 * with no tokens to append); append used to memcpy from NULL and the
 * batch append to offset into NULL, undefined behaviour that UBSan reports
 * (run with UBSAN_OPTIONS=halt_on_error=1 to make it fail). */
static void regress_append_nothing_null_buffers(void) {
  clpa_kvman *km = make(8, 2);
  int64_t slots[8];
  clpa_kvman_admit_result a, b;
  const int32_t p[] = {1, 2, 3};
  clpa_kvman_admit(km, 0, p, 3, slots, &a);
  clpa_kvman_admit(km, 0, p, 2, slots, &b);
  ok(clpa_kvman_append(km, a.req, NULL, 0, NULL) == CLPA_OK && clpa_kvreq_num_tokens(a.req) == 3,
     "regress: append of no tokens with NULL tokens and slots");
  clpa_kvreq *reqs[2] = {a.req, b.req};
  const int32_t zero[2] = {0, 0};
  ok(clpa_kvman_append_batch(km, reqs, 2, zero, NULL, NULL) == CLPA_OK &&
         clpa_kvreq_num_tokens(a.req) == 3 && clpa_kvreq_num_tokens(b.req) == 2,
     "regress: a batch append of no tokens with NULL tokens and slots");
  clpa_kvman_destroy(km);
}

/* The engine's step: rows, a batch append over every running request, the
 * batch view in row order, the reserve hint, the watermark. */
static void test_decode_step_api(void) {
  clpa_kvman *km = make(64, 4);
  int64_t slots[64], want[64];
  clpa_kvman_admit_result a[4];
  clpa_kvman_admit_options opt;
  clpa_kvman_admit_options_init(&opt);
  ok(opt.reserve_tokens == 0, "admit options default to no reserve");
  opt.reserve_tokens = 40;
  int32_t prompt[10];
  for (int i = 0; i < 10; i++) prompt[i] = i;
  int admitted = 1;
  for (int k = 0; k < 4; k++) {
    prompt[9] = 100 + k;
    admitted &= clpa_kvman_admit_ex(km, 0, prompt, 6 + k, &opt, slots, &a[k]) == CLPA_OK &&
                clpa_kvreq_row(a[k].req) == k;
  }
  clpa_kvreq *const *run = clpa_kvman_running(km);
  ok(admitted && clpa_kvman_num_running(km) == 4 && run[0] == a[0].req && run[3] == a[3].req,
     "admission appends rows 0..3 in order");
  long calls = alloc_calls;
  int32_t tok[4] = {7, 7, 7, 7};
  int stepped = 1;
  for (int step = 0; step < 40 && stepped; step++) {
    stepped &= clpa_kvman_append_batch(km, run, 4, NULL, tok, slots) == CLPA_OK;
    for (int k = 0; k < 4; k++) {
      const clpa_seq *sq = clpa_kvreq_seq(run[k]);
      clpa_seq_slots(sq, clpa_seq_num_tokens(sq) - 1, 1, &want[k]);
      stepped &= slots[k] == want[k] && clpa_kvreq_tokens(run[k])[clpa_kvreq_num_tokens(run[k]) - 1] == 7;
    }
  }
  ok(stepped && clpa_kvreq_num_tokens(a[2].req) == 48,
     "40 batch appends of one token each: slots in row order, tokens recorded");
  ok(alloc_calls == calls, "with 40 tokens reserved at admission they allocate nothing (%ld calls)",
     alloc_calls - calls);
  clpa_batch *batch;
  clpa_batch_create(clpa_kvman_pool(km), NULL, &batch);
  clpa_batch_view v;
  ok(clpa_kvman_batch_build(km, batch, &v) == CLPA_OK && v.num_seqs == 4 &&
         v.context_lens[1] == 47 && v.num_changed_rows == 4 &&
         v.block_tables[v.max_blocks_per_seq * 3] == clpa_seq_block_table(clpa_kvreq_seq(run[3]))[0],
     "the batch view holds the running requests in row order");
  int32_t counts[2] = {1, 3}, tok4[4] = {1, 2, 3, 4};
  clpa_kvreq *pair[2] = {run[3], run[1]};
  ok(clpa_kvman_append_batch(km, pair, 2, counts, tok4, slots) == CLPA_OK &&
         clpa_kvreq_num_tokens(run[3]) == 50 && clpa_kvreq_num_tokens(run[1]) == 50 &&
         clpa_kvreq_tokens(run[1])[49] == 4,
     "a batch append with counts over a subset");
  ok(clpa_kvman_batch_build(km, batch, &v) == CLPA_OK && v.num_changed_rows == 1 &&
         v.changed_rows[0] == 1,
     "the next view rewrites only row 1, which took a block");
  clpa_kvreq *gone = run[1], *last = run[3];
  clpa_kvman_finish(km, gone, 1);
  run = clpa_kvman_running(km);
  ok(clpa_kvman_num_running(km) == 3 && run[1] == last && clpa_kvreq_row(last) == 1,
     "finish moves the last row into the finished one's");
  ok(clpa_kvman_batch_build(km, batch, &v) == CLPA_OK && v.num_seqs == 3 &&
         v.num_changed_rows == 1 && v.changed_rows[0] == 1,
     "and the view rewrites that row only");

  /* refusals change nothing */
  clpa_kvreq *dup[2] = {run[0], run[0]};
  ok(clpa_kvman_append_batch(km, dup, 2, NULL, tok, slots) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "twice") && clpa_kvreq_num_tokens(run[0]) == 46,
     "a request listed twice is refused: %s", clpa_last_error());
  int32_t neg[1] = {-1};
  ok(clpa_kvman_append_batch(km, run, 1, neg, tok, slots) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "counts[0]"),
     "a negative count is refused: %s", clpa_last_error());
  clpa_kvman *other = make(8, 4);
  ok(clpa_kvman_append_batch(other, run, 1, NULL, tok, slots) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "another manager") &&
         clpa_kvman_append(other, run[0], tok, 1, slots) == CLPA_ERR_INVALID_ARG &&
         clpa_kvman_finish(other, run[0], 1) == CLPA_ERR_INVALID_ARG &&
         clpa_kvman_checkpoint(other, run[0], 1) == CLPA_ERR_INVALID_ARG,
     "another manager's request is refused everywhere: %s", clpa_last_error());
  clpa_kvman_destroy(other);
  clpa_kvman_stats st;
  clpa_kvman_stats_get(km, &st);
  int32_t big[3] = {4 * 64, 0, 0};
  int32_t *many = calloc(4 * 64, sizeof *many);
  int64_t *many_slots = malloc(4 * 64 * sizeof *many_slots);
  many_slots[0] = -7;
  ok(clpa_kvman_append_batch(km, run, 3, big, many, many_slots) == CLPA_ERR_POOL_EXHAUSTED &&
         many_slots[0] == -7 && clpa_kvreq_num_tokens(run[0]) == 46 &&
         clpa_kvman_num_running(km) == 3,
     "a batch the pool cannot hold is refused whole: %s", clpa_last_error());
  free(many);
  free(many_slots);
  ok(clpa_kvman_append_batch(km, NULL, 0, NULL, NULL, NULL) == CLPA_OK, "an empty batch is fine");
  ok(clpa_kvman_admit_ex(km, 0, prompt, 10, &(clpa_kvman_admit_options){.reserve_tokens = -1}, slots, &a[0]) ==
             CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "reserve_tokens"),
     "a negative reserve is refused: %s", clpa_last_error());
  clpa_batch_destroy(batch);
  clpa_kvman_destroy(km);

  /* the watermark: reclaim evicts ahead, so admit does not have to */
  clpa_kvman_config cfg;
  clpa_kvman_config_init(&cfg);
  cfg.num_blocks = 16;
  cfg.block_size = 2;
  cfg.free_watermark = 17;
  ok(clpa_kvman_create(&cfg, &km) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "free_watermark"),
     "a watermark above num_blocks is refused: %s", clpa_last_error());
  cfg.free_watermark = 6;
  cfg.allocator.fn = counting_alloc;
  clpa_kvman_create(&cfg, &km);
  int32_t doc[20];
  for (int i = 0; i < 20; i++) doc[i] = i;
  clpa_kvman_admit(km, 0, doc, 20, slots, &a[0]); /* 10 blocks */
  clpa_kvman_finish(km, a[0].req, 1);
  int32_t freed = -1;
  ok(clpa_kvman_reclaim(km, &freed) == CLPA_OK && freed == 0,
     "above the watermark, reclaim does nothing");
  clpa_kvman_admit(km, 1, doc, 8, slots, &a[0]); /* 4 more: 2 free, under the watermark */
  ok(clpa_kvman_reclaim(km, &freed) == CLPA_OK && freed >= 4 && clpa_pool_num_free(clpa_kvman_pool(km)) >= 6,
     "under it, reclaim evicts back to %d free (freed %d)", 6, (int)freed);
  clpa_kvman_stats_get(km, &st);
  ok(st.evictions == 1 && st.hot_evictions == 0, "that round is not on the hot path");
  clpa_kvman_admit(km, 2, doc, 12, slots, &a[1]); /* 6 blocks: fits without evicting */
  clpa_kvman_stats_get(km, &st);
  ok(st.hot_evictions == 0, "so the next admission does not evict");
  clpa_kvman_finish(km, a[1].req, 1); /* its 6 blocks cached: 6 free, 6 evictable */
  clpa_kvman_admit(km, 3, doc, 16, slots, &a[2]); /* 8 blocks */
  clpa_kvman_stats_get(km, &st);
  ok(st.hot_evictions == 1, "one that finds the pool short evicts on the hot path (counted)");
  ok(clpa_kvman_reclaim(NULL, NULL) == CLPA_ERR_INVALID_ARG &&
         clpa_kvman_num_running(NULL) == -1 && clpa_kvman_running(NULL) == NULL &&
         clpa_kvreq_row(NULL) == -1,
     "NULL arguments");
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
  regress_append_nothing_null_buffers();
  test_decode_step_api();
  ok(live == 0, "no host memory left (%ld bytes)", live);
  return done_testing();
}
