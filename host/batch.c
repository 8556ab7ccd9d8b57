/*
 * batch.c — the batch view: padded block tables and context lengths for
 * one step, in buffers kept between steps (see clpa_kv.h).
 *
 * Incremental builds. For every row the batch remembers which sequence it
 * last wrote there, that sequence's generation (kv_internal.h: it changes
 * with every change to the table, and a new sequence at a recycled address
 * gets a fresh one) and how many entries were real blocks. A row whose
 * sequence and generation are unchanged is skipped; a rewritten row copies
 * its table and zeroes only the entries the previous row used beyond it
 * (the rest of the padding is still zero). Rows [0, valid_rows) hold what
 * the remembered state says at the current width; a change of width or a
 * new allocation makes every row invalid.
 */
#include <string.h>

#include "grow.h"
#include "kv_internal.h"

struct clpa_batch {
  clpa_pool *pool;
  int32_t min_width;
  int32_t width;      /* of the rows in tables */
  int32_t valid_rows; /* rows whose remembered state below is right */
  int32_t *tables;    /* [tables_cap] */
  size_t tables_cap;
  size_t rows_cap;    /* of each per-row array below */
  int32_t *lens;      /* [rows_cap] */
  const clpa_seq **row_seq;
  uint64_t *row_gen;
  int32_t *row_blocks; /* real blocks in the row; the rest are 0 */
  int32_t *changed;    /* rows rewritten by the last build */
};

void clpa_batch_config_init(clpa_batch_config *cfg) {
  if (cfg) memset(cfg, 0, sizeof *cfg);
}

clpa_status clpa_batch_create(clpa_pool *pool, const clpa_batch_config *cfg, clpa_batch **out) {
  CLPA_CHECK(NULL, !pool, CLPA_ERR_INVALID_ARG, "pool must not be NULL");
  CLPA_CHECK(NULL, !out, CLPA_ERR_INVALID_ARG, "out must not be NULL");
  clpa_batch_config def;
  clpa_batch_config_init(&def);
  if (!cfg) cfg = &def;
  CLPA_CHECK_RESERVED(NULL, cfg, "cfg->");
  CLPA_CHECK(NULL, cfg->min_blocks_per_seq < 0, CLPA_ERR_INVALID_ARG,
             "cfg->min_blocks_per_seq (%d) must be >= 0", (int)cfg->min_blocks_per_seq);
  clpa_batch *b = clpa_mem_alloc(&pool->alloc, sizeof *b);
  CLPA_CHECK(NULL, !b, CLPA_ERR_OUT_OF_MEMORY, "cannot allocate a batch");
  memset(b, 0, sizeof *b);
  b->pool = pool;
  b->min_width = cfg->min_blocks_per_seq;
  *out = b;
  return CLPA_OK;
}

/* The per-row arrays of one allocation's worth of rows, freed together. */
typedef struct rows {
  int32_t *lens, *row_blocks, *changed;
  const clpa_seq **row_seq;
  uint64_t *row_gen;
} rows;

static void rows_free(const clpa_allocator *a, rows *r, size_t cap) {
  clpa_mem_free(a, r->lens, cap * sizeof(int32_t));
  clpa_mem_free(a, r->row_blocks, cap * sizeof(int32_t));
  clpa_mem_free(a, r->changed, cap * sizeof(int32_t));
  clpa_mem_free(a, (void *)r->row_seq, cap * sizeof *r->row_seq);
  clpa_mem_free(a, r->row_gen, cap * sizeof *r->row_gen);
}

static int rows_alloc(const clpa_allocator *a, rows *r, size_t cap) {
  r->lens = clpa_mem_alloc(a, cap * sizeof(int32_t));
  r->row_blocks = clpa_mem_alloc(a, cap * sizeof(int32_t));
  r->changed = clpa_mem_alloc(a, cap * sizeof(int32_t));
  r->row_seq = clpa_mem_alloc(a, cap * sizeof *r->row_seq);
  r->row_gen = clpa_mem_alloc(a, cap * sizeof *r->row_gen);
  if (r->lens && r->row_blocks && r->changed && r->row_seq && r->row_gen) return 0;
  rows_free(a, r, cap);
  return -1;
}

void clpa_batch_destroy(clpa_batch *batch) {
  if (!batch) return;
  const clpa_allocator *a = &batch->pool->alloc;
  rows r = {batch->lens, batch->row_blocks, batch->changed, batch->row_seq, batch->row_gen};
  clpa_mem_free(a, batch->tables, batch->tables_cap * sizeof(int32_t));
  rows_free(a, &r, batch->rows_cap);
  clpa_mem_free(a, batch, sizeof *batch);
}

/* Grows the arrays to entries table entries and num_seqs rows, both or
 * neither; any growth invalidates every row (the contents are not kept). */
static clpa_status reserve(clpa_batch *b, int64_t entries, int32_t num_seqs) {
  const clpa_allocator *a = &b->pool->alloc;
  int32_t *tables = b->tables;
  size_t tcap = b->tables_cap;
  if ((size_t)entries > tcap || !tables) {
    int64_t c = clpa_grow_cap((int64_t)tcap, entries, 16, INT32_MAX, sizeof(int32_t));
    tcap = c < 0 ? 0 : (size_t)c;
    tables = c < 0 ? NULL : clpa_mem_alloc(a, tcap * sizeof(int32_t));
    CLPA_CHECK(NULL, !tables, CLPA_ERR_OUT_OF_MEMORY,
               "cannot allocate a block table of %lld entries", (long long)entries);
  }
  if ((size_t)num_seqs > b->rows_cap || !b->lens) {
    int64_t c = clpa_grow_cap((int64_t)b->rows_cap, num_seqs, 16, INT32_MAX, sizeof(uint64_t));
    rows r;
    if (c < 0 || rows_alloc(a, &r, (size_t)c)) {
      if (tables != b->tables) clpa_mem_free(a, tables, tcap * sizeof(int32_t));
      return CLPA_FAIL(NULL, CLPA_ERR_OUT_OF_MEMORY,
                       "cannot allocate the rows of a batch of %d sequences", (int)num_seqs);
    }
    rows old = {b->lens, b->row_blocks, b->changed, b->row_seq, b->row_gen};
    rows_free(a, &old, b->rows_cap);
    b->lens = r.lens;
    b->row_blocks = r.row_blocks;
    b->changed = r.changed;
    b->row_seq = r.row_seq;
    b->row_gen = r.row_gen;
    b->rows_cap = (size_t)c;
    b->valid_rows = 0;
  }
  /* The old contents would be rewritten in full, so alloc + free beats realloc. */
  if (tables != b->tables) {
    clpa_mem_free(a, b->tables, b->tables_cap * sizeof(int32_t));
    b->tables = tables;
    b->tables_cap = tcap;
    b->valid_rows = 0;
  }
  return CLPA_OK;
}

clpa_status clpa_batch_build(clpa_batch *batch, const clpa_seq *const *seqs, int32_t num_seqs,
                             clpa_batch_view *out) {
  CLPA_CHECK(NULL, !batch, CLPA_ERR_INVALID_ARG, "batch must not be NULL");
  CLPA_CHECK(NULL, !out, CLPA_ERR_INVALID_ARG, "out must not be NULL");
  CLPA_CHECK(NULL, num_seqs < 0, CLPA_ERR_INVALID_ARG, "num_seqs (%d) must be >= 0",
             (int)num_seqs);
  CLPA_CHECK(NULL, !seqs && num_seqs > 0, CLPA_ERR_INVALID_ARG,
             "seqs must not be NULL (num_seqs = %d)", (int)num_seqs);
  int32_t width = batch->min_width > 1 ? batch->min_width : 1;
  int32_t max_len = 0;
  for (int32_t i = 0; i < num_seqs; i++) {
    const clpa_seq *s = seqs[i];
    CLPA_CHECK(NULL, !s, CLPA_ERR_INVALID_ARG, "seqs[%d] is NULL", (int)i);
    CLPA_CHECK(NULL, s->pool != batch->pool, CLPA_ERR_INVALID_ARG,
               "seqs[%d] belongs to another pool than the batch", (int)i);
    if (s->num_blocks > width) width = s->num_blocks;
    if (s->num_tokens > max_len) max_len = s->num_tokens;
  }
  int64_t entries = (int64_t)num_seqs * width;
  CLPA_CHECK(NULL, entries > INT32_MAX, CLPA_ERR_UNSUPPORTED,
             "a table of %d sequences x %d blocks passes INT32_MAX entries", (int)num_seqs,
             (int)width);
  clpa_status st = reserve(batch, entries, num_seqs);
  if (st != CLPA_OK) return st; /* the previous view stays as it was */
  if (width != batch->width) {
    batch->width = width;
    batch->valid_rows = 0;
  }

  /* Nothing can fail from here on. */
  int32_t nchanged = 0;
  for (int32_t i = 0; i < num_seqs; i++) {
    const clpa_seq *s = seqs[i];
    batch->lens[i] = s->num_tokens;
    int valid = i < batch->valid_rows;
    if (valid && batch->row_seq[i] == s && batch->row_gen[i] == s->gen) continue;
    int32_t *row = batch->tables + (size_t)i * (size_t)width;
    int32_t nb = s->num_blocks, used = valid ? batch->row_blocks[i] : width;
    if (nb) memcpy(row, s->table, (size_t)nb * sizeof(int32_t));
    /* Padding: block 0, a valid id (see clpa_kv.h). */
    if (used > nb) memset(row + nb, 0, (size_t)(used - nb) * sizeof(int32_t));
    batch->row_seq[i] = s;
    batch->row_gen[i] = s->gen;
    batch->row_blocks[i] = nb;
    batch->changed[nchanged++] = i;
  }
  batch->valid_rows = num_seqs;
  out->block_tables = batch->tables;
  out->context_lens = batch->lens;
  out->num_seqs = num_seqs;
  out->max_blocks_per_seq = width;
  out->max_context_len = max_len;
  out->changed_rows = batch->changed;
  out->num_changed_rows = nchanged;
  return CLPA_OK;
}
