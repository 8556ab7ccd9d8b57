/* Sequences and the batch view on small, hand-checked cases: slot mapping,
 * fork and copy-on-write, truncate, shared prefixes, padding, buffer reuse,
 * and every bad argument. */
#include <string.h>

#include "clpa_kv.h"
#include "tap.h"
#include "test_alloc.h"

static int failed_with(clpa_status got, clpa_status want, const char *w1, const char *w2) {
  const char *e = clpa_last_error();
  int good = got == want && e[0] && (!w1 || strstr(e, w1)) && (!w2 || strstr(e, w2));
  if (!good) diag("got %s, message \"%s\"", clpa_status_name(got), e);
  return good;
}

static clpa_pool *make(int32_t num_blocks, int32_t block_size, test_alloc *ta) {
  clpa_pool_config cfg;
  clpa_pool_config_init(&cfg);
  cfg.num_blocks = num_blocks;
  cfg.block_size = block_size;
  if (ta) cfg.allocator = test_allocator(ta);
  clpa_pool *p = NULL;
  if (clpa_pool_create(&cfg, &p) != CLPA_OK) diag("create: %s", clpa_last_error());
  return p;
}

static clpa_seq *seq(clpa_pool *p) {
  clpa_seq *s = NULL;
  if (clpa_seq_create(p, &s) != CLPA_OK) diag("seq_create: %s", clpa_last_error());
  return s;
}

/* The sequence's table is exactly the n ids given. */
static int table_is(const clpa_seq *s, int32_t n, const int32_t *want) {
  const int32_t *t = clpa_seq_block_table(s);
  int good = clpa_seq_num_blocks(s) == n && (n == 0 || memcmp(t, want, (size_t)n * 4) == 0);
  if (!good) {
    diag("table of %d blocks:", clpa_seq_num_blocks(s));
    for (int32_t i = 0; i < clpa_seq_num_blocks(s); i++) diag("  [%d] = %d", i, t[i]);
  }
  return good;
}

static int slots_are(const int64_t *got, int32_t n, const int64_t *want) {
  for (int32_t i = 0; i < n; i++) {
    if (got[i] != want[i]) {
      diag("slots[%d] = %lld, expected %lld", i, (long long)got[i], (long long)want[i]);
      return 0;
    }
  }
  return 1;
}

/* The example drawn in clpa_kv.h, with block_size 4. */
static void test_fork_and_cow(void) {
  test_alloc ta;
  memset(&ta, 0, sizeof ta);
  clpa_pool *p = make(8, 4, &ta);
  clpa_seq *parent = seq(p);
  long long live = ta.live;
  int64_t sl[16];
  clpa_block_copy cp = {-7, -7};
  ok(live >= 2, "pool and sequence draw on the pool's allocator (%lld blocks live)", live);
  ok(clpa_seq_num_tokens(parent) == 0 && clpa_seq_num_blocks(parent) == 0 &&
         clpa_seq_block_table(parent) == NULL,
     "a new sequence is empty");
  ok(clpa_seq_append(parent, 6, sl, &cp) == CLPA_OK && cp.src == -1 && cp.dst == -1 &&
         slots_are(sl, 6, (const int64_t[]){0, 1, 2, 3, 4, 5}) &&
         table_is(parent, 2, (const int32_t[]){0, 1}) && clpa_seq_num_tokens(parent) == 6,
     "6 tokens fill blocks 0 and 1, slots 0..5, no copy");

  clpa_seq *child = NULL;
  ok(clpa_seq_fork(parent, &child) == CLPA_OK && table_is(child, 2, (const int32_t[]){0, 1}) &&
         clpa_seq_num_tokens(child) == 6 && clpa_pool_refcount(p, 0) == 2 &&
         clpa_pool_refcount(p, 1) == 2,
     "fork shares both blocks: refcount 2");
  clpa_pool_stats st;
  clpa_pool_stats_get(p, &st);
  ok(st.shared == 2 && st.used == 2, "stats: 2 used, 2 shared");

  ok(clpa_seq_append(child, 1, sl, &cp) == CLPA_OK && cp.src == 1 && cp.dst == 2 &&
         sl[0] == 2 * 4 + 2 && table_is(child, 2, (const int32_t[]){0, 2}) &&
         clpa_pool_refcount(p, 1) == 1 && clpa_pool_refcount(p, 2) == 1 &&
         clpa_pool_refcount(p, 0) == 2,
     "the child's write into the shared partial block copies it: (1 -> 2), slot 10");
  ok(clpa_seq_append(parent, 1, sl, &cp) == CLPA_OK && cp.src == -1 && sl[0] == 1 * 4 + 2 &&
         table_is(parent, 2, (const int32_t[]){0, 1}),
     "the parent now owns block 1 alone: writes in place, slot 6, no copy");
  ok(clpa_seq_append(child, 0, NULL, &cp) == CLPA_OK && cp.src == -1, "append 0: no copy");

  /* At a block boundary nothing is copied: full blocks stay shared. */
  clpa_seq *a = seq(p), *b = NULL;
  clpa_seq_append(a, 8, NULL, &cp);
  clpa_seq_fork(a, &b);
  const int32_t *ta_ = clpa_seq_block_table(a);
  int32_t a0 = ta_[0], a1 = ta_[1];
  ok(clpa_seq_append(b, 1, sl, &cp) == CLPA_OK && cp.src == -1 && clpa_seq_num_blocks(b) == 3 &&
         clpa_seq_block_table(b)[0] == a0 && clpa_seq_block_table(b)[1] == a1 &&
         clpa_pool_refcount(p, a1) == 2,
     "fork at a block boundary then append: a new block, no copy, full blocks still shared");

  /* Copy-on-write needs a block: with none free, nothing happens. */
  clpa_seq_destroy(b);
  clpa_seq_destroy(a);
  clpa_seq_pop(child, 4); /* child: 3 tokens in block 0, shared with the parent */
  int32_t hog[8];
  int32_t nfree = clpa_pool_num_free(p);
  clpa_pool_alloc(p, nfree, hog);
  cp.src = cp.dst = -7;
  sl[0] = -7;
  ok(failed_with(clpa_seq_append(child, 1, sl, &cp), CLPA_ERR_POOL_EXHAUSTED, "copy-on-write",
                 NULL) &&
         cp.src == -7 && sl[0] == -7 && clpa_seq_num_tokens(child) == 3 &&
         table_is(child, 1, (const int32_t[]){0}) && clpa_pool_refcount(p, 0) == 2,
     "a copy-on-write with no free block: exhausted, sequence and outputs untouched");
  clpa_pool_unref(p, hog[0]);
  ok(clpa_seq_append(child, 1, sl, &cp) == CLPA_OK && cp.src == 0 && cp.dst == hog[0] &&
         sl[0] == (int64_t)hog[0] * 4 + 3,
     "with one block back, the same append copies block 0");
  for (int32_t i = 1; i < nfree; i++) clpa_pool_unref(p, hog[i]);

  /* One append can copy the shared last block and allocate more. */
  clpa_seq *c = NULL;
  clpa_seq_fork(parent, &c); /* parent: 7 tokens, blocks 0 1 */
  ok(clpa_seq_append(c, 6, sl, &cp) == CLPA_OK && cp.src == 1 && clpa_seq_num_blocks(c) == 4 &&
         clpa_seq_block_table(c)[1] == cp.dst,
     "7 + 6 tokens on a fork: copy of block 1, then 1 new block (13 tokens, 4 blocks)");
  const int32_t *tc = clpa_seq_block_table(c);
  int64_t want6[6] = {(int64_t)tc[1] * 4 + 3, (int64_t)tc[2] * 4, (int64_t)tc[2] * 4 + 1,
                      (int64_t)tc[2] * 4 + 2, (int64_t)tc[2] * 4 + 3, (int64_t)tc[3] * 4};
  ok(slots_are(sl, 6, want6), "its 6 slots: the copied block's last, a full new block, one more");
  int64_t all[13];
  ok(clpa_seq_slots(c, 0, 13, all) == CLPA_OK && all[0] == 0 && all[3] == 3 &&
         all[4] == (int64_t)tc[1] * 4 && slots_are(all + 7, 6, want6),
     "clpa_seq_slots gives the same mapping for the whole sequence");

  clpa_seq_destroy(c);
  clpa_seq_destroy(child);
  clpa_seq_destroy(parent);
  clpa_seq_destroy(NULL);
  ok(clpa_pool_num_free(p) == 8 && clpa_pool_check(p) == CLPA_OK,
     "destroying every sequence frees every block (destroy(NULL) is harmless)");
  clpa_pool_destroy(p);
  ok(ta.live == 0 && ta.bad_sizes == 0, "no memory left behind");
}

/* Speculative decoding: roll back rejected tokens. */
static void test_truncate(void) {
  clpa_pool *p = make(8, 4, NULL);
  clpa_seq *s = seq(p), *f = NULL;
  clpa_block_copy cp;
  clpa_seq_append(s, 10, NULL, &cp); /* blocks 0 1 2, 10 tokens */
  ok(clpa_seq_truncate(s, 9) == CLPA_OK && clpa_seq_num_blocks(s) == 3 &&
         clpa_pool_num_free(p) == 5,
     "truncate 10 -> 9 keeps 3 blocks");
  ok(clpa_seq_truncate(s, 8) == CLPA_OK && clpa_seq_num_blocks(s) == 2 &&
         clpa_pool_refcount(p, 2) == 0 && clpa_pool_num_free(p) == 6,
     "truncate to 8 releases the emptied block 2");
  ok(clpa_seq_pop(s, 3) == CLPA_OK && clpa_seq_num_tokens(s) == 5 && clpa_seq_num_blocks(s) == 2,
     "pop 3 -> 5 tokens in 2 blocks");
  ok(clpa_seq_truncate(s, 5) == CLPA_OK && clpa_seq_num_tokens(s) == 5, "truncate to the same length");

  /* Rolling back into a block shared with a fork: the next write copies it. */
  clpa_seq_fork(s, &f);
  clpa_seq_append(f, 3, NULL, &cp); /* f copies block 1 */
  clpa_seq_append(s, 3, NULL, &cp); /* s now owns block 1 alone */
  clpa_seq_destroy(f);
  clpa_seq_fork(s, &f); /* s: 8 tokens, blocks 0 1 shared */
  ok(clpa_seq_pop(f, 2) == CLPA_OK && clpa_pool_refcount(p, 1) == 2, "pop on a fork keeps block 1 shared");
  int64_t sl;
  ok(clpa_seq_append(f, 1, &sl, &cp) == CLPA_OK && cp.src == 1 && sl == (int64_t)cp.dst * 4 + 2,
     "rewriting token 6 after a rollback copies the shared block first");
  ok(clpa_seq_truncate(f, 0) == CLPA_OK && clpa_seq_num_blocks(f) == 0 &&
         clpa_pool_refcount(p, 0) == 1 && clpa_pool_refcount(p, 1) == 1,
     "truncate to 0 drops every reference");
  ok(clpa_seq_append(f, 1, &sl, &cp) == CLPA_OK && cp.src == -1 && clpa_seq_num_blocks(f) == 1,
     "an emptied sequence grows again");
  clpa_seq_destroy(f);
  clpa_seq_destroy(s);
  ok(clpa_pool_num_free(p) == 8, "all blocks free");
  clpa_pool_destroy(p);
}

/* A prefix cache hands whole blocks to a new sequence. */
static void test_append_blocks(void) {
  clpa_pool *p = make(6, 4, NULL);
  int32_t pre[2];
  clpa_pool_alloc(p, 2, pre); /* the cache's own references */
  clpa_seq *s = seq(p);
  clpa_block_copy cp;
  int64_t sl[2];
  ok(clpa_seq_append_blocks(s, pre, 2) == CLPA_OK && clpa_seq_num_tokens(s) == 8 &&
         table_is(s, 2, pre) && clpa_pool_refcount(p, pre[0]) == 2,
     "append_blocks: 2 cached blocks, 8 tokens, refcount 2");
  ok(clpa_seq_append(s, 2, sl, &cp) == CLPA_OK && cp.src == -1 && clpa_seq_num_blocks(s) == 3 &&
         sl[0] == (int64_t)clpa_seq_block_table(s)[2] * 4,
     "new tokens go to a new block; the shared prefix is never written");
  ok(failed_with(clpa_seq_append_blocks(s, pre, 1), CLPA_ERR_STATE, "inside a block", NULL) &&
         clpa_seq_num_tokens(s) == 10 && clpa_pool_refcount(p, pre[0]) == 2,
     "append_blocks after a partial block refused with CLPA_ERR_STATE");
  ok(clpa_seq_append_blocks(s, NULL, 0) == CLPA_ERR_STATE, "even with n = 0 (the state is wrong)");
  clpa_seq *t = seq(p);
  ok(clpa_seq_append_blocks(t, NULL, 0) == CLPA_OK && clpa_seq_num_tokens(t) == 0,
     "n = 0 on an empty sequence does nothing");
  int32_t mixed[2] = {pre[1], 5};
  ok(failed_with(clpa_seq_append_blocks(t, mixed, 2), CLPA_ERR_STATE, "blocks[1] = 5", "free") &&
         clpa_pool_refcount(p, pre[1]) == 2 && clpa_seq_num_tokens(t) == 0,
     "a free block in the list: refused, and the valid one gained no reference");
  mixed[1] = 6;
  ok(failed_with(clpa_seq_append_blocks(t, mixed, 2), CLPA_ERR_INVALID_ARG, "blocks[1] = 6",
                 "out of range") &&
         clpa_pool_refcount(p, pre[1]) == 2,
     "an out-of-range block in the list: refused");
  clpa_pool_unref(p, pre[0]);
  clpa_pool_unref(p, pre[1]);
  clpa_seq_destroy(s);
  clpa_seq_destroy(t);
  ok(clpa_pool_num_free(p) == 6, "all blocks free once cache and sequence let go");
  clpa_pool_destroy(p);
}

static void test_seq_bad_args(void) {
  clpa_pool *p = make(4, 4, NULL);
  clpa_seq *s = seq(p), *out = (clpa_seq *)p;
  clpa_block_copy cp = {-7, -7};
  int64_t sl[4] = {-7, -7, -7, -7};
  clpa_seq_append(s, 3, NULL, &cp);
  cp.src = cp.dst = -7;
  ok(failed_with(clpa_seq_create(NULL, &out), CLPA_ERR_INVALID_ARG, "pool", NULL) &&
         out == (clpa_seq *)p,
     "create: NULL pool, out untouched");
  ok(failed_with(clpa_seq_create(p, NULL), CLPA_ERR_INVALID_ARG, "out", NULL), "create: NULL out");
  ok(failed_with(clpa_seq_append(NULL, 1, sl, &cp), CLPA_ERR_INVALID_ARG, "seq", NULL),
     "append: NULL seq");
  ok(failed_with(clpa_seq_append(s, 1, sl, NULL), CLPA_ERR_INVALID_ARG, "copy", NULL),
     "append: NULL copy");
  ok(failed_with(clpa_seq_append(s, -2, sl, &cp), CLPA_ERR_INVALID_ARG, "n (-2)", NULL),
     "append: negative n");
  ok(failed_with(clpa_seq_append(s, INT32_MAX, sl, &cp), CLPA_ERR_INVALID_ARG, "INT32_MAX", NULL),
     "append: more than INT32_MAX tokens");
  ok(failed_with(clpa_seq_append(s, 100, sl, &cp), CLPA_ERR_POOL_EXHAUSTED, "free", NULL),
     "append: more than the pool holds is exhaustion");
  ok(sl[0] == -7 && cp.src == -7 && clpa_seq_num_tokens(s) == 3 && clpa_pool_num_free(p) == 3,
     "failed appends wrote nothing and took nothing");
  int32_t b0 = clpa_seq_block_table(s)[0];
  ok(failed_with(clpa_seq_append_blocks(NULL, &b0, 1), CLPA_ERR_INVALID_ARG, "seq", NULL),
     "append_blocks: NULL seq");
  clpa_seq *e = seq(p);
  ok(failed_with(clpa_seq_append_blocks(e, NULL, 1), CLPA_ERR_INVALID_ARG, "blocks", NULL),
     "append_blocks: NULL blocks");
  ok(failed_with(clpa_seq_append_blocks(e, &b0, -1), CLPA_ERR_INVALID_ARG, "n (-1)", NULL),
     "append_blocks: negative n");
  int32_t neg = -3;
  ok(failed_with(clpa_seq_append_blocks(e, &neg, 1), CLPA_ERR_INVALID_ARG, "blocks[0] = -3", NULL),
     "append_blocks: negative block id");
  ok(failed_with(clpa_seq_fork(NULL, &out), CLPA_ERR_INVALID_ARG, "parent", NULL), "fork: NULL parent");
  ok(failed_with(clpa_seq_fork(s, NULL), CLPA_ERR_INVALID_ARG, "out", NULL) &&
         clpa_pool_refcount(p, b0) == 1,
     "fork: NULL out, no reference taken");
  ok(failed_with(clpa_seq_truncate(NULL, 0), CLPA_ERR_INVALID_ARG, "seq", NULL), "truncate: NULL seq");
  ok(failed_with(clpa_seq_truncate(s, 4), CLPA_ERR_INVALID_ARG, "num_tokens (4)", "[0, 3]"),
     "truncate: longer than the sequence");
  ok(failed_with(clpa_seq_truncate(s, -1), CLPA_ERR_INVALID_ARG, "num_tokens (-1)", NULL),
     "truncate: negative");
  ok(failed_with(clpa_seq_pop(NULL, 1), CLPA_ERR_INVALID_ARG, "seq", NULL), "pop: NULL seq");
  ok(failed_with(clpa_seq_pop(s, 4), CLPA_ERR_INVALID_ARG, "n (4)", NULL), "pop: more than it has");
  ok(failed_with(clpa_seq_pop(s, -1), CLPA_ERR_INVALID_ARG, "n (-1)", NULL), "pop: negative");
  ok(failed_with(clpa_seq_slots(NULL, 0, 1, sl), CLPA_ERR_INVALID_ARG, "seq", NULL), "slots: NULL seq");
  ok(failed_with(clpa_seq_slots(s, 0, 1, NULL), CLPA_ERR_INVALID_ARG, "slots", NULL),
     "slots: NULL slots");
  ok(failed_with(clpa_seq_slots(s, 0, -1, sl), CLPA_ERR_INVALID_ARG, "n (-1)", NULL), "slots: negative n");
  ok(failed_with(clpa_seq_slots(s, 2, 2, sl), CLPA_ERR_INVALID_ARG, "start (2)", NULL),
     "slots: range past the end");
  ok(failed_with(clpa_seq_slots(s, -1, 1, sl), CLPA_ERR_INVALID_ARG, "start (-1)", NULL),
     "slots: negative start");
  ok(clpa_seq_slots(s, 3, 0, NULL) == CLPA_OK, "slots: an empty range at the end is fine");
  ok(sl[0] == -7, "failed slots calls wrote nothing");
  ok(clpa_seq_num_tokens(NULL) == -1 && clpa_seq_num_blocks(NULL) == -1 &&
         clpa_seq_block_table(NULL) == NULL,
     "getters of NULL: -1, -1, NULL");
  ok(clpa_seq_num_tokens(s) == 3 && clpa_pool_refcount(p, b0) == 1 && clpa_pool_num_free(p) == 3,
     "after all that, the sequence and pool are unchanged");
  clpa_seq_destroy(e);
  clpa_seq_destroy(s);
  clpa_pool_destroy(p);
}

static void test_batch(void) {
  test_alloc ta;
  memset(&ta, 0, sizeof ta);
  clpa_pool *p = make(16, 4, &ta);
  clpa_seq *s[3] = {seq(p), seq(p), seq(p)};
  clpa_block_copy cp;
  clpa_seq_append(s[0], 9, NULL, &cp); /* 3 blocks */
  clpa_seq_append(s[1], 1, NULL, &cp); /* 1 block */
  /* s[2] stays empty */
  clpa_batch *b = NULL;
  ok(clpa_batch_create(p, NULL, &b) == CLPA_OK && b, "batch with default config");
  clpa_batch_view v;
  const clpa_seq *const list[3] = {s[0], s[1], s[2]};
  ok(clpa_batch_build(b, list, 3, &v) == CLPA_OK && v.num_seqs == 3 &&
         v.max_blocks_per_seq == 3 && v.max_context_len == 9,
     "3 sequences: a 3 x 3 table, longest 9 tokens");
  const int32_t *t0 = clpa_seq_block_table(s[0]), *t1 = clpa_seq_block_table(s[1]);
  int32_t want[9] = {t0[0], t0[1], t0[2], t1[0], 0, 0, 0, 0, 0};
  ok(memcmp(v.block_tables, want, sizeof want) == 0, "rows are the tables, padded with block 0");
  ok(v.context_lens[0] == 9 && v.context_lens[1] == 1 && v.context_lens[2] == 0, "context lengths");

  const int32_t *tables = v.block_tables;
  long long calls = ta.calls;
  const clpa_seq *const two[2] = {s[1], s[0]};
  ok(clpa_batch_build(b, two, 2, &v) == CLPA_OK && v.block_tables == tables && ta.calls == calls &&
         v.max_blocks_per_seq == 3 && v.block_tables[0] == t1[0] && v.block_tables[3] == t0[0],
     "a smaller batch reuses the buffers: no allocation");
  ok(clpa_batch_build(b, NULL, 0, &v) == CLPA_OK && v.num_seqs == 0 && v.max_context_len == 0 &&
         v.max_blocks_per_seq == 1 && ta.calls == calls,
     "an empty batch: 0 rows, width 1, no allocation");
  clpa_seq_append(s[2], 40, NULL, &cp); /* 10 blocks */
  ok(clpa_batch_build(b, list, 3, &v) == CLPA_OK && v.max_blocks_per_seq == 10 &&
         v.block_tables[2 * 10 + 9] == clpa_seq_block_table(s[2])[9] &&
         v.block_tables[1 * 10 + 1] == 0,
     "a longer sequence widens the table to 10");
  calls = ta.calls;
  int steps_ok = 1;
  for (int step = 0; step < 40; step++) {
    steps_ok &= clpa_seq_pop(s[2], 1) == CLPA_OK;
    steps_ok &= clpa_batch_build(b, list, 3, &v) == CLPA_OK;
  }
  ok(steps_ok && ta.calls == calls && v.max_blocks_per_seq == 3 && v.context_lens[2] == 0,
     "40 shrinking steps: no allocation, back to width 3");

  /* A fixed width. */
  clpa_batch_config bc;
  memset(&bc, 0x5a, sizeof bc);
  clpa_batch_config_init(&bc);
  ok(bc.min_blocks_per_seq == 0, "batch config_init: min_blocks_per_seq 0");
  clpa_batch_config_init(NULL);
  bc.min_blocks_per_seq = 8;
  clpa_batch *fixed = NULL;
  ok(clpa_batch_create(p, &bc, &fixed) == CLPA_OK &&
         clpa_batch_build(fixed, list, 2, &v) == CLPA_OK && v.max_blocks_per_seq == 8 &&
         v.block_tables[3] == 0 && v.block_tables[8] == t1[0],
     "min_blocks_per_seq 8: rows 8 wide");

  /* Bad arguments, and a failed build keeps the previous view. */
  clpa_pool *other = make(4, 4, NULL);
  clpa_seq *stranger = seq(other);
  const clpa_seq *const mixed[2] = {s[0], stranger};
  const clpa_seq *const holes[2] = {s[0], NULL};
  clpa_batch *bb = (clpa_batch *)p;
  ok(failed_with(clpa_batch_create(NULL, NULL, &bb), CLPA_ERR_INVALID_ARG, "pool", NULL) &&
         bb == (clpa_batch *)p,
     "create: NULL pool");
  ok(failed_with(clpa_batch_create(p, NULL, NULL), CLPA_ERR_INVALID_ARG, "out", NULL),
     "create: NULL out");
  bc.min_blocks_per_seq = -1;
  ok(failed_with(clpa_batch_create(p, &bc, &bb), CLPA_ERR_INVALID_ARG, "min_blocks_per_seq", NULL),
     "create: negative min_blocks_per_seq");
  clpa_batch_build(b, list, 2, &v);
  clpa_batch_view before = v, w;
  memset(&w, 0x5a, sizeof w);
  ok(failed_with(clpa_batch_build(NULL, list, 1, &w), CLPA_ERR_INVALID_ARG, "batch", NULL),
     "build: NULL batch");
  ok(failed_with(clpa_batch_build(b, list, 1, NULL), CLPA_ERR_INVALID_ARG, "out", NULL),
     "build: NULL out");
  ok(failed_with(clpa_batch_build(b, NULL, 1, &w), CLPA_ERR_INVALID_ARG, "seqs", NULL),
     "build: NULL seqs");
  ok(failed_with(clpa_batch_build(b, list, -1, &w), CLPA_ERR_INVALID_ARG, "num_seqs (-1)", NULL),
     "build: negative num_seqs");
  ok(failed_with(clpa_batch_build(b, holes, 2, &w), CLPA_ERR_INVALID_ARG, "seqs[1]", "NULL"),
     "build: a NULL sequence");
  ok(failed_with(clpa_batch_build(b, mixed, 2, &w), CLPA_ERR_INVALID_ARG, "seqs[1]", "another pool"),
     "build: a sequence of another pool");
  ta.fail_at = ta.calls + 1;
  const clpa_seq *big[40];
  for (int i = 0; i < 40; i++) big[i] = s[i % 3];
  ok(failed_with(clpa_batch_build(b, big, 40, &w), CLPA_ERR_OUT_OF_MEMORY, NULL, NULL),
     "build: out of memory growing");
  ta.fail_at = ta.calls + 2; /* the second array this time */
  ok(failed_with(clpa_batch_build(b, big, 40, &w), CLPA_ERR_OUT_OF_MEMORY, NULL, NULL),
     "build: out of memory on the second array");
  int32_t want2[6] = {t0[0], t0[1], t0[2], t1[0], 0, 0};
  unsigned char poison[sizeof w];
  memset(poison, 0x5a, sizeof poison);
  ok(memcmp(&w, poison, sizeof w) == 0 && before.max_blocks_per_seq == 3 &&
         memcmp(before.block_tables, want2, sizeof want2) == 0 && before.context_lens[1] == 1,
     "failed builds wrote nothing and the previous view is intact");
  ta.fail_at = 0;
  ok(clpa_batch_build(b, big, 40, &v) == CLPA_OK && v.num_seqs == 40 &&
         v.context_lens[39] == clpa_seq_num_tokens(s[0]),
     "with memory back, the big build succeeds");

  clpa_seq_destroy(stranger);
  clpa_pool_destroy(other);
  clpa_batch_destroy(fixed);
  clpa_batch_destroy(b);
  clpa_batch_destroy(NULL);
  for (int i = 0; i < 3; i++) clpa_seq_destroy(s[i]);
  clpa_pool_destroy(p);
  ok(ta.live == 0 && ta.bad_sizes == 0, "batches, sequences and pool freed everything");
}

/* clpa_seq_reserve pre-grows the table so appends allocate nothing, and a
 * decode step in a fixed batch rewrites only the rows that took a block. */
static void test_reserve_and_incremental_batch(void) {
  test_alloc ta;
  memset(&ta, 0, sizeof ta);
  clpa_pool *p = make(64, 4, &ta);
  clpa_seq *s[4] = {seq(p), seq(p), seq(p), seq(p)};
  ok(clpa_seq_reserve(s[0], 100) == CLPA_OK && clpa_seq_num_tokens(s[0]) == 0 &&
         clpa_pool_num_free(p) == 64,
     "reserve takes no blocks and adds no tokens");
  long long calls = ta.calls;
  clpa_block_copy cp;
  int appended = 1;
  for (int i = 0; i < 99; i++) appended &= clpa_seq_append(s[0], 1, NULL, &cp) == CLPA_OK;
  ok(appended && ta.calls == calls && clpa_seq_num_blocks(s[0]) == 25,
     "99 appends after reserving 100 tokens allocate no host memory");
  ok(failed_with(clpa_seq_reserve(s[0], -1), CLPA_ERR_INVALID_ARG, "num_tokens", NULL) &&
         failed_with(clpa_seq_reserve(NULL, 1), CLPA_ERR_INVALID_ARG, "seq", NULL),
     "reserve refuses bad arguments");
  for (int k = 1; k < 4; k++) clpa_seq_append(s[k], k, NULL, &cp); /* 1, 2, 3 tokens */
  clpa_batch_config bc;
  clpa_batch_config_init(&bc);
  bc.min_blocks_per_seq = 32;
  clpa_batch *b = NULL;
  clpa_batch_create(p, &bc, &b);
  const clpa_seq *const list[4] = {s[0], s[1], s[2], s[3]};
  clpa_batch_view v;
  ok(clpa_batch_build(b, list, 4, &v) == CLPA_OK && v.num_changed_rows == 4,
     "the first build writes every row");
  for (int k = 0; k < 4; k++) clpa_seq_append(s[k], 1, NULL, &cp); /* s[3] reaches 4 tokens */
  ok(clpa_batch_build(b, list, 4, &v) == CLPA_OK && v.num_changed_rows == 0 &&
         v.context_lens[3] == 4,
     "a step that takes no block rewrites no row (lengths still follow)");
  for (int k = 0; k < 4; k++) clpa_seq_append(s[k], 1, NULL, &cp);
  ok(clpa_batch_build(b, list, 4, &v) == CLPA_OK && v.num_changed_rows == 2 &&
         v.changed_rows[0] == 0 && v.changed_rows[1] == 3 && v.block_tables[3 * 32 + 1] != 0,
     "the next step rewrites rows 0 and 3, which took a block");
  const clpa_seq *const swapped[4] = {s[0], s[2], s[1], s[3]};
  ok(clpa_batch_build(b, swapped, 4, &v) == CLPA_OK && v.num_changed_rows == 2 &&
         v.changed_rows[0] == 1 && v.changed_rows[1] == 2,
     "sequences that change rows rewrite both rows");
  clpa_seq_destroy(s[1]);
  s[1] = seq(p); /* may reuse the address: a fresh generation all the same */
  clpa_seq_append(s[1], 1, NULL, &cp);
  const clpa_seq *const again[4] = {s[0], s[2], s[1], s[3]};
  ok(clpa_batch_build(b, again, 4, &v) == CLPA_OK && v.num_changed_rows == 1 &&
         v.changed_rows[0] == 2 && v.block_tables[2 * 32] == clpa_seq_block_table(s[1])[0],
     "a new sequence in a row is rewritten, even at a recycled address");
  clpa_seq_pop(s[0], 30); /* 101 -> 71 tokens, 26 -> 18 blocks */
  ok(clpa_batch_build(b, again, 4, &v) == CLPA_OK && v.num_changed_rows == 1 &&
         v.block_tables[17] != 0 && v.block_tables[18] == 0 && v.block_tables[25] == 0,
     "a truncated row is rewritten and its dropped blocks become padding");
  clpa_batch_destroy(b);
  for (int k = 0; k < 4; k++) clpa_seq_destroy(s[k]);
  clpa_pool_destroy(p);
  ok(ta.live == 0, "no leak");
}

int main(void) {
  test_fork_and_cow();
  test_truncate();
  test_append_blocks();
  test_seq_bad_args();
  test_batch();
  test_reserve_and_incremental_batch();
  return done_testing();
}
