/*
 * seq.c — sequences: a block table over the pool, fork, copy-on-write of the
 * last block, truncate (see clpa_kv.h).
 *
 * Invariant: num_blocks == ceil(num_tokens / block_size), and the sequence
 * holds one reference on each table entry. Every mutating call validates
 * and reserves everything that can fail (pool blocks, table memory) before
 * it changes anything, so a failure leaves the sequence and pool as they were.
 */
#include <string.h>

#include "alloc.h"
#include "grow.h"
#include "kv_internal.h"
#include "last_error.h"

static int32_t blocks_for(int64_t tokens, int32_t block_size) {
  return (int32_t)((tokens + block_size - 1) / block_size);
}

/* Grows the table to hold need entries; on failure nothing changes. */
static clpa_status reserve_table(clpa_seq *s, int32_t need) {
  if (need <= s->cap) return CLPA_OK;
  int64_t cap = clpa_grow_cap(s->cap, need, 4, INT32_MAX, sizeof(int32_t));
  CLPA_CHECK(NULL, cap < 0, CLPA_ERR_OUT_OF_MEMORY, "a block table of %d entries is too large",
             (int)need);
  int32_t *t = clpa_mem_realloc(&s->pool->alloc, s->table, (size_t)s->cap * sizeof(int32_t),
                                (size_t)cap * sizeof(int32_t));
  CLPA_CHECK(NULL, !t, CLPA_ERR_OUT_OF_MEMORY, "cannot grow the block table to %lld entries",
             (long long)cap);
  s->table = t;
  s->cap = (int32_t)cap;
  return CLPA_OK;
}

clpa_status clpa_seq_create(clpa_pool *pool, clpa_seq **out) {
  CLPA_CHECK(NULL, !pool, CLPA_ERR_INVALID_ARG, "pool must not be NULL");
  CLPA_CHECK(NULL, !out, CLPA_ERR_INVALID_ARG, "out must not be NULL");
  clpa_seq *s = clpa_mem_alloc(&pool->alloc, sizeof *s);
  CLPA_CHECK(NULL, !s, CLPA_ERR_OUT_OF_MEMORY, "cannot allocate a sequence");
  memset(s, 0, sizeof *s);
  s->pool = pool;
  clpa_seq_changed_(s);
  *out = s;
  return CLPA_OK;
}

clpa_status clpa_seq_reserve(clpa_seq *seq, int32_t num_tokens) {
  CLPA_CHECK(NULL, !seq, CLPA_ERR_INVALID_ARG, "seq must not be NULL");
  CLPA_CHECK(NULL, num_tokens < 0, CLPA_ERR_INVALID_ARG, "num_tokens (%d) must be >= 0",
             (int)num_tokens);
  return reserve_table(seq, blocks_for(num_tokens, seq->pool->block_size));
}

void clpa_seq_destroy(clpa_seq *seq) {
  if (!seq) return;
  clpa_pool *p = seq->pool;
  for (int32_t i = 0; i < seq->num_blocks; i++) clpa_pool_decref_(p, seq->table[i]);
  clpa_mem_free(&p->alloc, seq->table, (size_t)seq->cap * sizeof(int32_t));
  clpa_mem_free(&p->alloc, seq, sizeof *seq);
}

/* Writes the slots of n tokens starting at offset off of table entry blk. */
static void write_slots_at(const clpa_seq *s, int32_t blk, int32_t off, int32_t n,
                           int64_t *slots) {
  int32_t bs = s->pool->block_size;
  for (int32_t i = 0; i < n; i++) {
    slots[i] = (int64_t)s->table[blk] * bs + off;
    if (++off == bs) {
      off = 0;
      blk++;
    }
  }
}

static void write_slots(const clpa_seq *s, int32_t start, int32_t n, int64_t *slots) {
  int32_t bs = s->pool->block_size;
  write_slots_at(s, start / bs, start % bs, n, slots);
}

clpa_status clpa_seq_append(clpa_seq *seq, int32_t n, int64_t *slots, clpa_block_copy *copy) {
  CLPA_CHECK(NULL, !seq, CLPA_ERR_INVALID_ARG, "seq must not be NULL");
  CLPA_CHECK(NULL, !copy, CLPA_ERR_INVALID_ARG,
             "copy must not be NULL (a copy-on-write may have to be reported)");
  CLPA_CHECK(NULL, n < 0, CLPA_ERR_INVALID_ARG, "n (%d) must be >= 0", (int)n);
  CLPA_CHECK(NULL, n > INT32_MAX - seq->num_tokens, CLPA_ERR_INVALID_ARG,
             "n (%d) would take the sequence past INT32_MAX tokens (it has %d)", (int)n,
             (int)seq->num_tokens);
  clpa_pool *p = seq->pool;
  int32_t bs = p->block_size;
  /* room: free slots in the last block. The decode step (n = 1) needs no
   * division: a new block exactly when room is 0. */
  int32_t room = (int32_t)((int64_t)seq->num_blocks * bs - seq->num_tokens);
  int32_t fresh = n <= room ? 0 : n - room <= bs ? 1 : blocks_for((int64_t)n - room, bs);
  int32_t need = seq->num_blocks + fresh;
  /* The first new token lands in the last block iff that block is partial. */
  int32_t last = seq->num_blocks - 1;
  int cow = n > 0 && room > 0 && p->refcount[seq->table[last]] > 1;
  CLPA_CHECK(NULL, (int64_t)fresh + cow > p->num_free, CLPA_ERR_POOL_EXHAUSTED,
             "appending %d tokens needs %d blocks%s, only %d of %d are free", (int)n,
             (int)(fresh + cow), cow ? " (one for copy-on-write)" : "", (int)p->num_free,
             (int)p->num_blocks);
  clpa_status st = reserve_table(seq, need);
  if (st != CLPA_OK) return st;

  /* Nothing can fail from here on. */
  clpa_block_copy c = {-1, -1};
  if (cow) {
    c.src = seq->table[last];
    c.dst = clpa_pool_pop_(p);
    clpa_pool_decref_(p, c.src); /* still >= 1: the other holders keep it */
    seq->table[last] = c.dst;
  }
  for (int32_t i = seq->num_blocks; i < need; i++) seq->table[i] = clpa_pool_pop_(p);
  if (cow || fresh) clpa_seq_changed_(seq);
  /* the first new token: in the partial last block, else at a new block's start */
  int32_t blk = room ? last : seq->num_blocks, off = room ? bs - room : 0;
  seq->num_blocks = need;
  seq->num_tokens += n;
  if (slots) write_slots_at(seq, blk, off, n, slots);
  *copy = c;
  return CLPA_OK;
}

clpa_status clpa_seq_append_blocks(clpa_seq *seq, const int32_t *blocks, int32_t n) {
  CLPA_CHECK(NULL, !seq, CLPA_ERR_INVALID_ARG, "seq must not be NULL");
  CLPA_CHECK(NULL, n < 0, CLPA_ERR_INVALID_ARG, "n (%d) must be >= 0", (int)n);
  CLPA_CHECK(NULL, !blocks && n > 0, CLPA_ERR_INVALID_ARG, "blocks must not be NULL (n = %d)",
             (int)n);
  clpa_pool *p = seq->pool;
  int32_t bs = p->block_size;
  CLPA_CHECK(NULL, seq->num_tokens % bs != 0, CLPA_ERR_STATE,
             "the sequence ends inside a block (%d tokens, block_size %d); whole blocks can "
             "only follow a block boundary",
             (int)seq->num_tokens, (int)bs);
  CLPA_CHECK(NULL, (int64_t)n * bs > INT32_MAX - seq->num_tokens, CLPA_ERR_INVALID_ARG,
             "n (%d) blocks would take the sequence past INT32_MAX tokens", (int)n);
  for (int32_t i = 0; i < n; i++) {
    int32_t b = blocks[i];
    CLPA_CHECK(NULL, b < 0 || b >= p->num_blocks, CLPA_ERR_INVALID_ARG,
               "blocks[%d] = %d is out of range [0, %d)", (int)i, (int)b, (int)p->num_blocks);
    CLPA_CHECK(NULL, p->refcount[b] == 0, CLPA_ERR_STATE,
               "blocks[%d] = %d is free; only blocks in use can be shared", (int)i, (int)b);
    CLPA_CHECK(NULL, p->refcount[b] == INT32_MAX, CLPA_ERR_STATE,
               "blocks[%d] = %d already has INT32_MAX references", (int)i, (int)b);
  }
  clpa_status st = reserve_table(seq, seq->num_blocks + n);
  if (st != CLPA_OK) return st;
  for (int32_t i = 0; i < n; i++) {
    clpa_pool_incref_(p, blocks[i]);
    seq->table[seq->num_blocks++] = blocks[i];
  }
  if (n) clpa_seq_changed_(seq);
  seq->num_tokens += n * bs;
  return CLPA_OK;
}

clpa_status clpa_seq_fork(const clpa_seq *parent, clpa_seq **out) {
  CLPA_CHECK(NULL, !parent, CLPA_ERR_INVALID_ARG, "parent must not be NULL");
  CLPA_CHECK(NULL, !out, CLPA_ERR_INVALID_ARG, "out must not be NULL");
  clpa_pool *p = parent->pool;
  for (int32_t i = 0; i < parent->num_blocks; i++) {
    CLPA_CHECK(NULL, p->refcount[parent->table[i]] == INT32_MAX, CLPA_ERR_STATE,
               "block %d already has INT32_MAX references", (int)parent->table[i]);
  }
  clpa_seq *s = clpa_mem_alloc(&p->alloc, sizeof *s);
  CLPA_CHECK(NULL, !s, CLPA_ERR_OUT_OF_MEMORY, "cannot allocate a sequence");
  memset(s, 0, sizeof *s);
  s->pool = p;
  clpa_status st = reserve_table(s, parent->num_blocks);
  if (st != CLPA_OK) {
    clpa_mem_free(&p->alloc, s, sizeof *s);
    return st;
  }
  for (int32_t i = 0; i < parent->num_blocks; i++) {
    s->table[i] = parent->table[i];
    clpa_pool_incref_(p, s->table[i]);
  }
  s->num_blocks = parent->num_blocks;
  s->num_tokens = parent->num_tokens;
  clpa_seq_changed_(s);
  *out = s;
  return CLPA_OK;
}

clpa_status clpa_seq_truncate(clpa_seq *seq, int32_t num_tokens) {
  CLPA_CHECK(NULL, !seq, CLPA_ERR_INVALID_ARG, "seq must not be NULL");
  CLPA_CHECK(NULL, num_tokens < 0 || num_tokens > seq->num_tokens, CLPA_ERR_INVALID_ARG,
             "num_tokens (%d) must be in [0, %d], the current count", (int)num_tokens,
             (int)seq->num_tokens);
  int32_t keep = blocks_for(num_tokens, seq->pool->block_size);
  for (int32_t i = keep; i < seq->num_blocks; i++) clpa_pool_decref_(seq->pool, seq->table[i]);
  if (keep != seq->num_blocks) clpa_seq_changed_(seq);
  seq->num_blocks = keep;
  seq->num_tokens = num_tokens;
  return CLPA_OK;
}

clpa_status clpa_seq_pop(clpa_seq *seq, int32_t n) {
  CLPA_CHECK(NULL, !seq, CLPA_ERR_INVALID_ARG, "seq must not be NULL");
  CLPA_CHECK(NULL, n < 0 || n > seq->num_tokens, CLPA_ERR_INVALID_ARG,
             "n (%d) must be in [0, %d], the current count", (int)n, (int)seq->num_tokens);
  return clpa_seq_truncate(seq, seq->num_tokens - n);
}

clpa_status clpa_seq_slots(const clpa_seq *seq, int32_t start, int32_t n, int64_t *slots) {
  CLPA_CHECK(NULL, !seq, CLPA_ERR_INVALID_ARG, "seq must not be NULL");
  CLPA_CHECK(NULL, n < 0, CLPA_ERR_INVALID_ARG, "n (%d) must be >= 0", (int)n);
  CLPA_CHECK(NULL, !slots && n > 0, CLPA_ERR_INVALID_ARG, "slots must not be NULL (n = %d)",
             (int)n);
  CLPA_CHECK(NULL, start < 0 || start > seq->num_tokens - n, CLPA_ERR_INVALID_ARG,
             "start (%d) + n (%d) must lie in [0, %d], the sequence's tokens", (int)start, (int)n,
             (int)seq->num_tokens);
  write_slots(seq, start, n, slots);
  return CLPA_OK;
}

int32_t clpa_seq_num_tokens(const clpa_seq *seq) { return seq ? seq->num_tokens : -1; }

int32_t clpa_seq_num_blocks(const clpa_seq *seq) { return seq ? seq->num_blocks : -1; }

const int32_t *clpa_seq_block_table(const clpa_seq *seq) { return seq ? seq->table : NULL; }
