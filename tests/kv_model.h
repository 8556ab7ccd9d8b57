/*
 * kv_model.h — drives the pool, sequences and batch view with random
 * operations and checks them, after every step, against a plain model:
 *
 *   mrc[b]      the refcount block b must have
 *   seqs[i]     a block list and a token count per sequence, plus the value
 *               of every token it wrote or inherited
 *   ext         the references the test itself holds (clpa_pool_alloc/ref)
 *   content     a simulated device cache: one value per slot. Appends write
 *               through the returned slot mapping, reported copy-on-write
 *               pairs are copied, and every sequence must read back exactly
 *               its own tokens — which is what copy-on-write is for.
 *
 * Used by test_host_kv_model (long runs) and test_host_kv_oom (the same
 * operations while the allocator fails its Nth call). An allocation failure
 * must surface as CLPA_ERR_OUT_OF_MEMORY from the call that hit it, and
 * only then, and the model (which is not updated) must still match.
 */
#ifndef CLPA_KV_MODEL_H
#define CLPA_KV_MODEL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clpa_kv.h"
#include "tap.h"
#include "test_alloc.h"

#define KM_MAX_SEQS 24
#define KM_POISON64 ((int64_t)0x7eadbeef7eadbeefLL)
#define KM_POISON32 ((int32_t)-0x21524111)

typedef struct km_config {
  int32_t num_blocks, block_size, max_seqs, batch_min;
} km_config;

enum {
  OP_CREATE, OP_DESTROY, OP_APPEND, OP_FORK, OP_TRUNCATE, OP_POP, OP_EXT_ALLOC, OP_EXT_REF,
  OP_EXT_UNREF, OP_APPEND_BLOCKS, OP_BATCH, OP_SLOTS, OP_BAD, OP_DRAIN, OP_COUNT_
};
static const char *const km_op_names[OP_COUNT_] = {
    "create", "destroy", "append", "fork", "truncate", "pop", "ext_alloc", "ext_ref",
    "ext_unref", "append_blocks", "batch", "slots", "bad", "drain"};

typedef struct km_counts {
  long long ops[OP_COUNT_];
  long long cow, cow_exhausted, exhausted, oom, bad, batch_reuse, batch_grow, tokens;
  long long batch_same_list, rows_skipped, rows_rewritten; /* incremental batch builds */
  long long oom_by_op[OP_COUNT_ + 1]; /* the last: pool and batch creation */
} km_counts;

typedef struct km_seq {
  clpa_seq *s;
  int32_t *tab;  /* [num_blocks] */
  int32_t nb;
  int32_t *vals; /* [num_blocks * block_size] */
  int32_t tokens;
  long long uid, ver; /* which sequence, and how often its table changed */
} km_seq;

typedef struct km {
  km_config cfg;
  test_alloc *ta;
  clpa_pool *pool;
  clpa_batch *batch;
  km_seq seqs[KM_MAX_SEQS];
  int nseqs;
  int32_t *mrc;
  int32_t mfree;
  int32_t *ext;
  int next, extcap;
  int32_t *content; /* [num_blocks * block_size] */
  int32_t next_val;
  int32_t *buf;     /* scratch block ids, [num_blocks + 8] */
  int32_t *counts;  /* [num_blocks] */
  int64_t *slots;   /* [num_blocks * block_size + 8] */
  const clpa_seq **batch_seqs;
  clpa_batch_view view;
  int have_view;
  /* the last successful build's rows: which model sequence at which
   * version, so the rows a build must (and must not) rewrite are known */
  int prev_idx[KM_MAX_SEQS + 3];
  long long prev_uid[KM_MAX_SEQS + 3], prev_ver[KM_MAX_SEQS + 3];
  int32_t prev_r;
  long long next_uid;
  int32_t *view_copy; /* snapshot of the last view's table, then its lengths */
  long long max_entries, max_batch_seqs;
  km_counts n;
  long long step;
  const char *op;
  int opi; /* OP_COUNT_ during setup */
  char err[1024];
} km;

static int km_fail(km *m, const char *fmt, ...) {
  va_list ap;
  int k = snprintf(m->err, sizeof m->err, "step %lld, op %s: ", m->step, m->op);
  va_start(ap, fmt);
  vsnprintf(m->err + k, sizeof m->err - (size_t)k, fmt, ap);
  va_end(ap);
  return -1;
}
#define KM_REQ(cond, ...) \
  do {                    \
    if (!(cond)) return km_fail(m, __VA_ARGS__); \
  } while (0)

/* The status a call must return: want, or CLPA_ERR_OUT_OF_MEMORY exactly
 * when the allocator failed on purpose during the call. */
static int km_status(km *m, clpa_status st, clpa_status want, long long failures_before) {
  if (m->ta->failures != failures_before) want = CLPA_ERR_OUT_OF_MEMORY;
  KM_REQ(st == want, "returned %s, expected %s (%s)", clpa_status_name(st),
         clpa_status_name(want), clpa_last_error());
  if (st != CLPA_OK) KM_REQ(clpa_last_error()[0] != '\0', "failed with an empty message");
  if (st == CLPA_ERR_OUT_OF_MEMORY) {
    m->n.oom++;
    m->n.oom_by_op[m->opi]++;
  }
  if (st == CLPA_ERR_POOL_EXHAUSTED) m->n.exhausted++;
  return 0;
}
#define KM_STATUS(st, want, fb)                              \
  do {                                                       \
    if (km_status(m, (st), (want), (fb)) != 0) return -1;    \
  } while (0)

static void km_release(km *m, int32_t b) {
  if (--m->mrc[b] == 0) m->mfree++;
}

static int32_t km_blocks_for(const km *m, int32_t tokens) {
  return (tokens + m->cfg.block_size - 1) / m->cfg.block_size;
}

static km_seq *km_pick(km *m) { return m->nseqs ? &m->seqs[rng_below((uint32_t)m->nseqs)] : NULL; }

/* A random block in use, or -1. */
static int32_t km_used_block(km *m) {
  if (m->mfree == m->cfg.num_blocks) return -1;
  for (;;) {
    int32_t b = (int32_t)rng_below((uint32_t)m->cfg.num_blocks);
    if (m->mrc[b] > 0) return b;
  }
}
static int32_t km_free_block(km *m) {
  if (m->mfree == 0) return -1;
  for (;;) {
    int32_t b = (int32_t)rng_below((uint32_t)m->cfg.num_blocks);
    if (m->mrc[b] == 0) return b;
  }
}

/* ---- operations ---------------------------------------------------- */

static int op_create(km *m) {
  if (m->nseqs == m->cfg.max_seqs) return 0;
  clpa_seq *s = NULL;
  long long fb = m->ta->failures;
  clpa_status st = clpa_seq_create(m->pool, &s);
  KM_STATUS(st, CLPA_OK, fb);
  if (st != CLPA_OK) {
    KM_REQ(s == NULL, "out written on failure");
    return 0;
  }
  km_seq *q = &m->seqs[m->nseqs++];
  q->s = s;
  q->nb = q->tokens = 0;
  q->uid = ++m->next_uid;
  q->ver = 0;
  return 0;
}

static void km_remove(km *m, km_seq *q) {
  km_seq tmp = *q;
  *q = m->seqs[--m->nseqs];
  m->seqs[m->nseqs] = tmp; /* keep its arrays for reuse */
}

static int op_destroy(km *m) {
  km_seq *q = km_pick(m);
  if (!q) return 0;
  clpa_seq_destroy(q->s);
  for (int32_t j = 0; j < q->nb; j++) km_release(m, q->tab[j]);
  km_remove(m, q);
  return 0;
}

static int32_t km_pick_n(int32_t bs) {
  uint32_t r = rng_below(100);
  if (r < 50) return 1;
  if (r < 80) return 1 + (int32_t)rng_below((uint32_t)bs);
  if (r < 95) return (int32_t)rng_below(3u * (uint32_t)bs + 1);
  return 0;
}

static int op_append(km *m) {
  km_seq *q = km_pick(m);
  if (!q) return 0;
  int32_t bs = m->cfg.block_size, n = km_pick_n(bs);
  int32_t t = q->tokens, nb = q->nb;
  int32_t need = km_blocks_for(m, t + n), fresh = need - nb;
  int cow = n > 0 && t % bs != 0 && m->mrc[q->tab[nb - 1]] > 1;
  clpa_status want = fresh + cow > m->mfree ? CLPA_ERR_POOL_EXHAUSTED : CLPA_OK;
  for (int32_t i = 0; i <= n; i++) m->slots[i] = KM_POISON64;
  clpa_block_copy copy = {-7, -7};
  long long fb = m->ta->failures;
  clpa_status st = clpa_seq_append(q->s, n, m->slots, &copy);
  KM_STATUS(st, want, fb);
  if (st != CLPA_OK) {
    if (st == CLPA_ERR_POOL_EXHAUSTED && cow && fresh == m->mfree) m->n.cow_exhausted++;
    for (int32_t i = 0; i <= n; i++) KM_REQ(m->slots[i] == KM_POISON64, "slots written on failure");
    KM_REQ(copy.src == -7 && copy.dst == -7, "copy written on failure");
    return 0;
  }
  const int32_t *rt = clpa_seq_block_table(q->s);
  if (cow) {
    KM_REQ(copy.src == q->tab[nb - 1], "copy.src %d, expected the shared last block %d",
           copy.src, q->tab[nb - 1]);
    KM_REQ(copy.dst >= 0 && copy.dst < m->cfg.num_blocks && m->mrc[copy.dst] == 0,
           "copy.dst %d is not a free block", copy.dst);
    km_release(m, copy.src);
    m->mrc[copy.dst] = 1;
    m->mfree--;
    q->tab[nb - 1] = copy.dst;
    memcpy(m->content + (size_t)copy.dst * bs, m->content + (size_t)copy.src * bs,
           (size_t)bs * sizeof(int32_t));
    m->n.cow++;
  } else {
    KM_REQ(copy.src == -1 && copy.dst == -1, "copy {%d, %d} reported, none expected", copy.src,
           copy.dst);
  }
  for (int32_t j = nb; j < need; j++) {
    int32_t b = rt[j];
    KM_REQ(b >= 0 && b < m->cfg.num_blocks && m->mrc[b] == 0,
           "new table entry %d = %d was not a free block", j, b);
    m->mrc[b] = 1;
    m->mfree--;
    q->tab[j] = b;
  }
  if (need != nb || cow) q->ver++;
  q->nb = need;
  for (int32_t i = 0; i < n; i++) {
    int32_t pos = t + i, b = q->tab[pos / bs];
    int64_t want_slot = (int64_t)b * bs + pos % bs;
    KM_REQ(m->slots[i] == want_slot, "slots[%d] = %lld, expected %lld (token %d)", i,
           (long long)m->slots[i], (long long)want_slot, pos);
    KM_REQ(m->mrc[b] == 1, "token %d is written into block %d with refcount %d", pos, b,
           m->mrc[b]);
    m->content[want_slot] = m->next_val;
    q->vals[pos] = m->next_val++;
  }
  KM_REQ(m->slots[n] == KM_POISON64, "slots written past n");
  q->tokens = t + n;
  m->n.tokens += n;
  return 0;
}

static int op_fork(km *m) {
  km_seq *p = km_pick(m);
  if (!p || m->nseqs == m->cfg.max_seqs) return 0;
  clpa_seq *s = NULL;
  long long fb = m->ta->failures;
  clpa_status st = clpa_seq_fork(p->s, &s);
  KM_STATUS(st, CLPA_OK, fb);
  if (st != CLPA_OK) {
    KM_REQ(s == NULL, "out written on failure");
    return 0;
  }
  km_seq *c = &m->seqs[m->nseqs++];
  c->s = s;
  c->nb = p->nb;
  c->uid = ++m->next_uid;
  c->ver = 0;
  c->tokens = p->tokens;
  memcpy(c->tab, p->tab, (size_t)p->nb * sizeof(int32_t));
  memcpy(c->vals, p->vals, (size_t)p->tokens * sizeof(int32_t));
  for (int32_t j = 0; j < c->nb; j++) m->mrc[c->tab[j]]++;
  return 0;
}

static void km_truncate_model(km *m, km_seq *q, int32_t len) {
  int32_t keep = km_blocks_for(m, len);
  if (keep != q->nb) q->ver++;
  for (int32_t j = keep; j < q->nb; j++) km_release(m, q->tab[j]);
  q->nb = keep;
  q->tokens = len;
}

static int op_truncate(km *m, int pop) {
  km_seq *q = km_pick(m);
  if (!q) return 0;
  /* Mostly short rollbacks, as speculative decoding makes. */
  int32_t k = rng_below(4) ? (int32_t)rng_below((uint32_t)m->cfg.block_size + 2)
                           : (int32_t)rng_below((uint32_t)q->tokens + 1);
  if (k > q->tokens) k = q->tokens;
  clpa_status st = pop ? clpa_seq_pop(q->s, k) : clpa_seq_truncate(q->s, q->tokens - k);
  KM_STATUS(st, CLPA_OK, m->ta->failures);
  km_truncate_model(m, q, q->tokens - k);
  return 0;
}

static int op_ext_alloc(km *m) {
  int32_t k = (int32_t)rng_below(4);
  if (m->next + k > m->extcap) return 0;
  for (int32_t j = 0; j <= k; j++) m->buf[j] = KM_POISON32;
  clpa_status want = k > m->mfree ? CLPA_ERR_POOL_EXHAUSTED : CLPA_OK;
  long long fb = m->ta->failures;
  clpa_status st = clpa_pool_alloc(m->pool, k, m->buf);
  KM_STATUS(st, want, fb);
  if (st != CLPA_OK) {
    for (int32_t j = 0; j <= k; j++) KM_REQ(m->buf[j] == KM_POISON32, "blocks written on failure");
    return 0;
  }
  for (int32_t j = 0; j < k; j++) {
    int32_t b = m->buf[j];
    KM_REQ(b >= 0 && b < m->cfg.num_blocks && m->mrc[b] == 0, "allocated block %d was not free",
           b);
    m->mrc[b] = 1;
    m->mfree--;
    m->ext[m->next++] = b;
  }
  KM_REQ(m->buf[k] == KM_POISON32, "blocks written past n");
  return 0;
}

static int op_ext_ref(km *m) {
  int32_t b = km_used_block(m);
  if (b < 0 || m->next == m->extcap) return 0;
  KM_STATUS(clpa_pool_ref(m->pool, b), CLPA_OK, m->ta->failures);
  m->mrc[b]++;
  m->ext[m->next++] = b;
  return 0;
}

static int op_ext_unref(km *m) {
  if (!m->next) return 0;
  int j = (int)rng_below((uint32_t)m->next);
  int32_t b = m->ext[j];
  KM_STATUS(clpa_pool_unref(m->pool, b), CLPA_OK, m->ta->failures);
  km_release(m, b);
  m->ext[j] = m->ext[--m->next];
  return 0;
}

static int km_in_table(const km_seq *q, int32_t b) {
  for (int32_t j = 0; j < q->nb; j++)
    if (q->tab[j] == b) return 1;
  return 0;
}

static int op_append_blocks(km *m) {
  km_seq *q = km_pick(m);
  if (!q) return 0;
  int32_t bs = m->cfg.block_size;
  if (q->tokens % bs != 0) {
    int32_t b = km_used_block(m);
    clpa_status st = clpa_seq_append_blocks(q->s, &b, 1);
    KM_STATUS(st, CLPA_ERR_STATE, m->ta->failures);
    return 0;
  }
  /* Up to 3 distinct blocks in use that the sequence does not hold. */
  int32_t k = 0, want_k = (int32_t)rng_below(4);
  for (int tries = 0; tries < 16 && k < want_k; tries++) {
    int32_t b = km_used_block(m);
    if (b < 0) break;
    int dup = km_in_table(q, b);
    for (int32_t j = 0; j < k; j++) dup |= m->buf[j] == b;
    if (!dup) m->buf[k++] = b;
  }
  long long fb = m->ta->failures;
  clpa_status st = clpa_seq_append_blocks(q->s, m->buf, k);
  KM_STATUS(st, CLPA_OK, fb);
  if (st != CLPA_OK) return 0;
  if (k) q->ver++;
  for (int32_t j = 0; j < k; j++) {
    int32_t b = m->buf[j];
    m->mrc[b]++;
    q->tab[q->nb++] = b;
    memcpy(q->vals + q->tokens, m->content + (size_t)b * bs, (size_t)bs * sizeof(int32_t));
    q->tokens += bs;
  }
  return 0;
}

static int op_batch(km *m) {
  /* Sequences may repeat; an empty batch is valid too. Half the time the
   * previous build's rows again (as a decode step does), when they all
   * still exist, sometimes with a row dropped or added at the end. */
  int32_t r = m->nseqs ? (int32_t)rng_below((uint32_t)m->nseqs + 3) : 0;
  int32_t width = m->cfg.batch_min > 1 ? m->cfg.batch_min : 1, maxlen = 0;
  int idx[KM_MAX_SEQS + 3];
  int same_list = m->have_view && m->nseqs && rng_below(2);
  for (int32_t i = 0; same_list && i < m->prev_r; i++) same_list = m->prev_idx[i] < m->nseqs;
  if (same_list) {
    r = m->prev_r;
    memcpy(idx, m->prev_idx, (size_t)r * sizeof *idx);
    uint32_t k = rng_below(4);
    if (k == 0 && r > 0) r--;
    if (k == 1 && r < KM_MAX_SEQS + 3) idx[r++] = (int)rng_below((uint32_t)m->nseqs);
  }
  for (int32_t i = 0; i < r; i++) {
    if (!same_list) idx[i] = (int)rng_below((uint32_t)m->nseqs);
    const km_seq *q = &m->seqs[idx[i]];
    m->batch_seqs[i] = q->s;
    if (q->nb > width) width = q->nb;
    if (q->tokens > maxlen) maxlen = q->tokens;
  }
  long long entries = (long long)r * width;
  int reuse = m->have_view && entries <= m->max_entries && r <= m->max_batch_seqs;
  long long calls = m->ta->calls, fb = m->ta->failures;
  clpa_batch_view v;
  memset(&v, 0x5a, sizeof v);
  clpa_status st = clpa_batch_build(m->batch, m->batch_seqs, r, &v);
  KM_STATUS(st, CLPA_OK, fb);
  if (st != CLPA_OK) {
    /* The previous view must still be intact. */
    if (m->have_view) {
      size_t ne = (size_t)m->view.num_seqs * (size_t)m->view.max_blocks_per_seq;
      KM_REQ(memcmp(m->view.block_tables, m->view_copy, ne * sizeof(int32_t)) == 0 &&
                 memcmp(m->view.context_lens, m->view_copy + ne,
                        (size_t)m->view.num_seqs * sizeof(int32_t)) == 0,
             "a failed build changed the previous view");
    }
    return 0;
  }
  KM_REQ(v.num_seqs == r && v.max_blocks_per_seq == width && v.max_context_len == maxlen,
         "view %d x %d (max len %d), expected %d x %d (max len %d)", v.num_seqs,
         v.max_blocks_per_seq, v.max_context_len, r, width, maxlen);
  KM_REQ(v.block_tables && v.context_lens, "NULL arrays in the view");
  for (int32_t i = 0; i < r; i++) {
    const km_seq *q = &m->seqs[idx[i]];
    const int32_t *row = v.block_tables + (size_t)i * width;
    for (int32_t j = 0; j < width; j++) {
      int32_t want = j < q->nb ? q->tab[j] : 0;
      KM_REQ(row[j] == want, "table[%d][%d] = %d, expected %d", i, j, row[j], want);
    }
    KM_REQ(v.context_lens[i] == q->tokens, "context_lens[%d] = %d, expected %d", i,
           v.context_lens[i], q->tokens);
  }
  /* changed_rows: ascending, and with the same arrays and width exactly the
   * rows whose sequence or table differs from the previous build's */
  KM_REQ(v.num_changed_rows >= 0 && v.num_changed_rows <= r, "%d changed rows of %d",
         v.num_changed_rows, r);
  int exact = reuse && m->view.max_blocks_per_seq == width;
  for (int32_t i = 0, c = 0; i < r; i++) {
    int listed = c < v.num_changed_rows && v.changed_rows[c] == i;
    c += listed;
    const km_seq *q = &m->seqs[idx[i]];
    int same = i < m->prev_r && m->prev_uid[i] == q->uid && m->prev_ver[i] == q->ver;
    if (exact)
      KM_REQ(listed == !same, "row %d (%s) is %slisted as changed", i,
             same ? "unchanged" : "changed", listed ? "" : "not ");
    else
      KM_REQ(listed || same, "row %d changed but is not listed", i);
    if (i == r - 1)
      KM_REQ(c == v.num_changed_rows, "changed_rows is not ascending or lists rows past %d", r);
    m->n.rows_skipped += !listed;
    m->n.rows_rewritten += listed;
  }
  m->n.batch_same_list += same_list;
  for (int32_t i = 0; i < r; i++) {
    m->prev_idx[i] = idx[i];
    m->prev_uid[i] = m->seqs[idx[i]].uid;
    m->prev_ver[i] = m->seqs[idx[i]].ver;
  }
  m->prev_r = r;
  if (reuse) {
    KM_REQ(m->ta->calls == calls && v.block_tables == m->view.block_tables &&
               v.context_lens == m->view.context_lens,
           "a batch no larger than an earlier one (%lld entries, %d seqs) reallocated", entries, r);
    m->n.batch_reuse++;
  } else {
    m->n.batch_grow++;
  }
  if (entries > m->max_entries) m->max_entries = entries;
  if (r > m->max_batch_seqs) m->max_batch_seqs = r;
  m->view = v;
  m->have_view = 1;
  memcpy(m->view_copy, v.block_tables, (size_t)entries * sizeof(int32_t));
  memcpy(m->view_copy + entries, v.context_lens, (size_t)r * sizeof(int32_t));
  return 0;
}

static int op_slots(km *m) {
  km_seq *q = km_pick(m);
  if (!q) return 0;
  int32_t bs = m->cfg.block_size;
  int32_t start = (int32_t)rng_below((uint32_t)q->tokens + 1);
  int32_t n = (int32_t)rng_below((uint32_t)(q->tokens - start) + 1);
  for (int32_t i = 0; i <= n; i++) m->slots[i] = KM_POISON64;
  KM_STATUS(clpa_seq_slots(q->s, start, n, m->slots), CLPA_OK, m->ta->failures);
  for (int32_t i = 0; i < n; i++) {
    int32_t pos = start + i;
    int64_t want = (int64_t)q->tab[pos / bs] * bs + pos % bs;
    KM_REQ(m->slots[i] == want, "slots[%d] = %lld, expected %lld", i, (long long)m->slots[i],
           (long long)want);
  }
  KM_REQ(m->slots[n] == KM_POISON64, "slots written past n");
  return 0;
}

/* A call that must be refused; verification afterwards proves it changed nothing. */
static int op_bad(km *m) {
  km_seq *q = km_pick(m);
  int32_t nbk = m->cfg.num_blocks, b;
  clpa_status st = CLPA_OK, want = CLPA_OK;
  int64_t slot = KM_POISON64;
  clpa_block_copy copy = {-7, -7};
  switch (rng_below(10)) {
    case 0:
      if ((b = km_free_block(m)) < 0) return 0;
      st = clpa_pool_unref(m->pool, b), want = CLPA_ERR_STATE;
      break;
    case 1:
      if ((b = km_free_block(m)) < 0) return 0;
      st = clpa_pool_ref(m->pool, b), want = CLPA_ERR_STATE;
      break;
    case 2:
      b = rng_below(2) ? nbk + (int32_t)rng_below(5) : -1 - (int32_t)rng_below(5);
      st = clpa_pool_unref(m->pool, b), want = CLPA_ERR_INVALID_ARG;
      KM_REQ(clpa_pool_refcount(m->pool, b) == -1, "refcount of out-of-range block %d", b);
      break;
    case 3:
      b = rng_below(2) ? nbk + (int32_t)rng_below(5) : INT32_MIN;
      st = clpa_pool_ref(m->pool, b), want = CLPA_ERR_INVALID_ARG;
      break;
    case 4: {
      int32_t x = KM_POISON32;
      st = clpa_pool_alloc(m->pool, m->mfree + 1 + (int32_t)rng_below(3), &x);
      want = CLPA_ERR_POOL_EXHAUSTED;
      KM_REQ(x == KM_POISON32, "blocks written on failure");
      break;
    }
    case 5:
      if (!q) return 0;
      st = clpa_seq_truncate(q->s, q->tokens + 1 + (int32_t)rng_below(3)),
      want = CLPA_ERR_INVALID_ARG;
      break;
    case 6:
      if (!q) return 0;
      st = clpa_seq_pop(q->s, rng_below(2) ? q->tokens + 1 : -1), want = CLPA_ERR_INVALID_ARG;
      break;
    case 7: /* a valid block followed by a bad one: neither may gain a reference */
      if (!q || q->tokens % m->cfg.block_size != 0 || (b = km_used_block(m)) < 0) return 0;
      if (km_in_table(q, b)) return 0;
      m->buf[0] = b;
      if (rng_below(2) || m->mfree == 0) {
        m->buf[1] = nbk;
        want = CLPA_ERR_INVALID_ARG;
      } else {
        m->buf[1] = km_free_block(m);
        want = CLPA_ERR_STATE;
      }
      st = clpa_seq_append_blocks(q->s, m->buf, 2);
      break;
    case 8:
      if (!q) return 0;
      st = clpa_seq_slots(q->s, q->tokens, 1, &slot), want = CLPA_ERR_INVALID_ARG;
      KM_REQ(slot == KM_POISON64, "slot written on failure");
      break;
    default:
      if (!q) return 0;
      st = clpa_seq_append(q->s, -1 - (int32_t)rng_below(3), &slot, &copy);
      want = CLPA_ERR_INVALID_ARG;
      KM_REQ(slot == KM_POISON64 && copy.src == -7, "outputs written on failure");
      break;
  }
  KM_STATUS(st, want, m->ta->failures);
  m->n.bad++;
  return 0;
}

/* Takes every free block from outside: the pool must hand out exactly the
 * model's free set, then refuse one more. */
static int op_drain(km *m) {
  int32_t k = m->mfree;
  KM_STATUS(clpa_pool_alloc(m->pool, k, m->buf), CLPA_OK, m->ta->failures);
  for (int32_t j = 0; j < k; j++) {
    int32_t b = m->buf[j];
    KM_REQ(b >= 0 && b < m->cfg.num_blocks && m->mrc[b] == 0, "drained block %d was not free", b);
    m->mrc[b] = 1;
  }
  int32_t x;
  KM_STATUS(clpa_pool_alloc(m->pool, 1, &x), CLPA_ERR_POOL_EXHAUSTED, m->ta->failures);
  KM_REQ(clpa_pool_num_free(m->pool) == 0, "free blocks left after draining");
  for (int32_t j = 0; j < k; j++) {
    KM_STATUS(clpa_pool_unref(m->pool, m->buf[j]), CLPA_OK, m->ta->failures);
    m->mrc[m->buf[j]] = 0;
  }
  return 0;
}

/* ---- invariants ------------------------------------------------------ */

static int km_verify(km *m, int check_data) {
  int32_t nbk = m->cfg.num_blocks, bs = m->cfg.block_size;
  memset(m->counts, 0, (size_t)nbk * sizeof(int32_t));
  for (int i = 0; i < m->nseqs; i++)
    for (int32_t j = 0; j < m->seqs[i].nb; j++) m->counts[m->seqs[i].tab[j]]++;
  for (int j = 0; j < m->next; j++) m->counts[m->ext[j]]++;
  int32_t nfree = 0, shared = 0;
  for (int32_t b = 0; b < nbk; b++) {
    KM_REQ(m->counts[b] == m->mrc[b], "model drift: block %d held %d times, model refcount %d", b,
           m->counts[b], m->mrc[b]);
    int32_t rc = clpa_pool_refcount(m->pool, b);
    KM_REQ(rc == m->mrc[b], "block %d has refcount %d, expected %d", b, rc, m->mrc[b]);
    nfree += rc == 0;
    shared += rc > 1;
  }
  KM_REQ(nfree == m->mfree, "model drift: %d free, model says %d", nfree, m->mfree);
  clpa_pool_stats s;
  clpa_pool_stats_get(m->pool, &s);
  KM_REQ(s.num_blocks == nbk && s.free == nfree && s.used == nbk - nfree && s.shared == shared &&
             clpa_pool_num_free(m->pool) == nfree,
         "stats {%d, free %d, used %d, shared %d}, expected {%d, %d, %d, %d}", s.num_blocks,
         s.free, s.used, s.shared, nbk, nfree, nbk - nfree, shared);
  for (int i = 0; i < m->nseqs; i++) {
    const km_seq *q = &m->seqs[i];
    KM_REQ(clpa_seq_num_tokens(q->s) == q->tokens && clpa_seq_num_blocks(q->s) == q->nb &&
               q->nb == km_blocks_for(m, q->tokens),
           "seq %d: %d tokens in %d blocks, expected %d in %d", i, clpa_seq_num_tokens(q->s),
           clpa_seq_num_blocks(q->s), q->tokens, q->nb);
    const int32_t *rt = clpa_seq_block_table(q->s);
    KM_REQ(q->nb == 0 || memcmp(rt, q->tab, (size_t)q->nb * sizeof(int32_t)) == 0,
           "seq %d: block table differs from the model", i);
    if (!check_data) continue;
    for (int32_t pos = 0; pos < q->tokens; pos++) {
      int32_t got = m->content[(size_t)q->tab[pos / bs] * bs + pos % bs];
      KM_REQ(got == q->vals[pos], "seq %d reads %d at token %d, wrote %d: its data was clobbered",
             i, got, pos, q->vals[pos]);
    }
  }
  m->ta->paused++;
  clpa_status st = clpa_pool_check(m->pool);
  m->ta->paused--;
  KM_REQ(st == CLPA_OK, "clpa_pool_check: %s", clpa_last_error());
  return 0;
}

/* ---- a whole run ------------------------------------------------------ */

static int km_step(km *m) {
  int low = m->mfree < m->cfg.num_blocks / 4 + 1;
  int w[OP_COUNT_] = {0};
  w[OP_CREATE] = m->nseqs < m->cfg.max_seqs ? 6 : 0;
  /* Under pressure, release more: the pool should spend its time near
   * exhaustion, not stuck in it. */
  w[OP_DESTROY] = m->nseqs ? (low ? 8 : 2) : 0;
  w[OP_APPEND] = 30;
  w[OP_FORK] = 10;
  w[OP_TRUNCATE] = low ? 10 : 4;
  w[OP_POP] = low ? 10 : 4;
  w[OP_EXT_ALLOC] = 3;
  w[OP_EXT_REF] = 3;
  w[OP_EXT_UNREF] = m->next ? (low ? 12 : 4) : 0;
  w[OP_APPEND_BLOCKS] = 4;
  w[OP_BATCH] = 4;
  w[OP_SLOTS] = 3;
  w[OP_BAD] = 3;
  w[OP_DRAIN] = 1;
  int total = 0;
  for (int i = 0; i < OP_COUNT_; i++) total += w[i];
  int r = (int)rng_below((uint32_t)total), op = 0;
  while (r >= w[op]) r -= w[op++];
  m->op = km_op_names[op];
  m->opi = op;
  m->n.ops[op]++;
  switch (op) {
    case OP_CREATE: return op_create(m);
    case OP_DESTROY: return op_destroy(m);
    case OP_APPEND: return op_append(m);
    case OP_FORK: return op_fork(m);
    case OP_TRUNCATE: return op_truncate(m, 0);
    case OP_POP: return op_truncate(m, 1);
    case OP_EXT_ALLOC: return op_ext_alloc(m);
    case OP_EXT_REF: return op_ext_ref(m);
    case OP_EXT_UNREF: return op_ext_unref(m);
    case OP_APPEND_BLOCKS: return op_append_blocks(m);
    case OP_BATCH: return op_batch(m);
    case OP_SLOTS: return op_slots(m);
    case OP_BAD: return op_bad(m);
    default: return op_drain(m);
  }
}

static void km_free_arrays(km *m) {
  for (int i = 0; i < KM_MAX_SEQS; i++) {
    free(m->seqs[i].tab);
    free(m->seqs[i].vals);
  }
  free(m->mrc);
  free(m->ext);
  free(m->content);
  free(m->buf);
  free(m->counts);
  free(m->slots);
  free(m->batch_seqs);
  free(m->view_copy);
}

/* Runs steps random operations on a fresh pool, verifying after each
 * (data every data_every steps), then tears everything down and checks
 * that every block is free and every byte returned. Returns 0, or -1 with
 * the reason in m->err. The model's own arrays use plain malloc. */
static int km_run(km *m, km_config cfg, test_alloc *ta, long long steps, int data_every) {
  memset(m, 0, sizeof *m);
  m->cfg = cfg;
  m->ta = ta;
  m->op = "setup";
  m->opi = OP_COUNT_;
  m->max_entries = -1;
  size_t nbk = (size_t)cfg.num_blocks, ntok = nbk * (size_t)cfg.block_size;
  m->extcap = 4 * cfg.num_blocks;
  for (int i = 0; i < KM_MAX_SEQS; i++) {
    m->seqs[i].tab = malloc(nbk * sizeof(int32_t));
    m->seqs[i].vals = malloc(ntok * sizeof(int32_t));
  }
  m->mrc = calloc(nbk, sizeof(int32_t));
  m->ext = malloc((size_t)m->extcap * sizeof(int32_t));
  m->content = malloc(ntok * sizeof(int32_t));
  m->buf = malloc((nbk + 8) * sizeof(int32_t));
  m->counts = malloc(nbk * sizeof(int32_t));
  m->slots = malloc((ntok + 8) * sizeof(int64_t));
  m->batch_seqs = malloc((KM_MAX_SEQS + 3) * sizeof *m->batch_seqs);
  m->view_copy = malloc(((KM_MAX_SEQS + 3) * (nbk + 1 + (size_t)cfg.batch_min)) * sizeof(int32_t));
  for (size_t i = 0; i < ntok; i++) m->content[i] = -1;
  m->mfree = cfg.num_blocks;
  int rc = 0;

  clpa_pool_config pc;
  clpa_pool_config_init(&pc);
  pc.num_blocks = cfg.num_blocks;
  pc.block_size = cfg.block_size;
  pc.allocator = test_allocator(ta);
  clpa_batch_config bc;
  clpa_batch_config_init(&bc);
  bc.min_blocks_per_seq = cfg.batch_min;
  /* Creation may hit the injected failure: it must leave nothing behind. */
  for (;;) {
    long long fb = ta->failures;
    clpa_status st = clpa_pool_create(&pc, &m->pool);
    if (st == CLPA_OK) break;
    if (km_status(m, st, CLPA_OK, fb)) {
      rc = -1;
      goto out;
    }
    if (ta->live != 0) {
      rc = km_fail(m, "%lld blocks live after a failed pool create", ta->live);
      goto out;
    }
  }
  for (;;) {
    long long fb = ta->failures, live = ta->live;
    clpa_status st = clpa_batch_create(m->pool, &bc, &m->batch);
    if (st == CLPA_OK) break;
    if (km_status(m, st, CLPA_OK, fb)) {
      rc = -1;
      goto out_pool;
    }
    if (ta->live != live) {
      rc = km_fail(m, "a failed batch create leaked");
      goto out_pool;
    }
  }
  for (m->step = 0; m->step < steps && rc == 0; m->step++) {
    rc = km_step(m);
    if (rc == 0) rc = km_verify(m, data_every <= 1 || m->step % data_every == 0);
  }
  if (rc == 0) {
    m->op = "teardown";
    while (m->nseqs) {
      clpa_seq_destroy(m->seqs[0].s);
      for (int32_t j = 0; j < m->seqs[0].nb; j++) km_release(m, m->seqs[0].tab[j]);
      km_remove(m, &m->seqs[0]);
    }
    while (m->next && rc == 0) {
      int32_t b = m->ext[--m->next];
      if (clpa_pool_unref(m->pool, b) != CLPA_OK) rc = km_fail(m, "unref: %s", clpa_last_error());
      km_release(m, b);
    }
    if (rc == 0) rc = km_verify(m, 1);
    if (rc == 0 && clpa_pool_num_free(m->pool) != cfg.num_blocks)
      rc = km_fail(m, "%d blocks still in use at the end", cfg.num_blocks - clpa_pool_num_free(m->pool));
  }
  clpa_batch_destroy(m->batch);
out_pool:
  clpa_pool_destroy(m->pool);
out:
  if (rc == 0 && (ta->live != 0 || ta->live_bytes != 0))
    rc = km_fail(m, "leak: %lld blocks, %zu bytes still allocated", ta->live, ta->live_bytes);
  if (rc == 0 && ta->bad_sizes != 0)
    rc = km_fail(m, "%lld frees or resizes named the wrong size", ta->bad_sizes);
  km_free_arrays(m);
  return rc;
}

#endif
