/*
 * batch.c — the batch view: padded block tables and context lengths for
 * one step, in buffers kept between steps (see clpa_kv.h).
 */
#include <string.h>

#include "grow.h"
#include "kv_internal.h"

struct clpa_batch {
  clpa_pool *pool;
  int32_t min_width;
  int32_t *tables; /* [tables_cap] */
  size_t tables_cap;
  int32_t *lens;   /* [lens_cap] */
  size_t lens_cap;
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

void clpa_batch_destroy(clpa_batch *batch) {
  if (!batch) return;
  const clpa_allocator *a = &batch->pool->alloc;
  clpa_mem_free(a, batch->tables, batch->tables_cap * sizeof(int32_t));
  clpa_mem_free(a, batch->lens, batch->lens_cap * sizeof(int32_t));
  clpa_mem_free(a, batch, sizeof *batch);
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

  /* Grow both arrays before touching either, so a failure keeps the old view. */
  const clpa_allocator *a = &batch->pool->alloc;
  size_t tcap = batch->tables_cap, lcap = batch->lens_cap;
  int32_t *tables = batch->tables, *lens = batch->lens;
  if ((size_t)entries > tcap || !tables) {
    int64_t c = clpa_grow_cap((int64_t)tcap, entries, 16, INT32_MAX, sizeof(int32_t));
    tcap = c < 0 ? 0 : (size_t)c;
    tables = c < 0 ? NULL : clpa_mem_alloc(a, tcap * sizeof(int32_t));
    CLPA_CHECK(NULL, !tables, CLPA_ERR_OUT_OF_MEMORY,
               "cannot allocate a block table of %zu entries", tcap);
  }
  if ((size_t)num_seqs > lcap || !lens) {
    int64_t c = clpa_grow_cap((int64_t)lcap, num_seqs, 16, INT32_MAX, sizeof(int32_t));
    lcap = c < 0 ? 0 : (size_t)c;
    lens = c < 0 ? NULL : clpa_mem_alloc(a, lcap * sizeof(int32_t));
    if (!lens) {
      if (tables != batch->tables) clpa_mem_free(a, tables, tcap * sizeof(int32_t));
      return CLPA_FAIL(NULL, CLPA_ERR_OUT_OF_MEMORY,
                       "cannot allocate context lengths for %zu sequences", lcap);
    }
  }
  /* The old contents are rebuilt in full, so plain alloc + free beats realloc. */
  if (tables != batch->tables) {
    clpa_mem_free(a, batch->tables, batch->tables_cap * sizeof(int32_t));
    batch->tables = tables;
    batch->tables_cap = tcap;
  }
  if (lens != batch->lens) {
    clpa_mem_free(a, batch->lens, batch->lens_cap * sizeof(int32_t));
    batch->lens = lens;
    batch->lens_cap = lcap;
  }

  for (int32_t i = 0; i < num_seqs; i++) {
    const clpa_seq *s = seqs[i];
    int32_t *row = tables + (size_t)i * (size_t)width;
    if (s->num_blocks) memcpy(row, s->table, (size_t)s->num_blocks * sizeof(int32_t));
    /* Padding: block 0, a valid id (see clpa_kv.h). */
    memset(row + s->num_blocks, 0, (size_t)(width - s->num_blocks) * sizeof(int32_t));
    lens[i] = s->num_tokens;
  }
  out->block_tables = tables;
  out->context_lens = lens;
  out->num_seqs = num_seqs;
  out->max_blocks_per_seq = width;
  out->max_context_len = max_len;
  return CLPA_OK;
}
