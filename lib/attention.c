/*
 * attention.c — what decode and prefill share before they launch: the
 * caches (a clpa_cache and a layer, or the application's buffers with
 * their layout), the checks of shapes, dtypes and options, and the checks
 * of every buffer against what the shapes need (sizes from user numbers
 * through the checked helper).
 */
#include <math.h>
#include <stdio.h>

#include "internal.h"
#include "size_math.h"

static int supported_head_size(int hs) {
  static const int ok[] = {32, 64, 80, 96, 112, 120, 128, 192, 256};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
    if (ok[i] == hs) return 1;
  return 0;
}

clpa_status clpa_attn_caches(clpa_context *ctx, clpa_attn *a, const clpa_cache *cache,
                             int32_t layer, cl_mem key_cache, cl_mem value_cache,
                             const clpa_kv_layout *kv) {
  if (cache) {
    CLPA_CTX_CHECK(ctx, key_cache || value_cache, CLPA_ERR_INVALID_ARG,
                   "give either cache (and layer) or key_cache and value_cache, not both");
    return clpa_cache_layer(ctx, cache, layer, &a->k, &a->v, &a->kv);
  }
  CLPA_CTX_CHECK(ctx, !key_cache || !value_cache, CLPA_ERR_INVALID_ARG,
                 "key_cache and value_cache (or cache) must be given");
  clpa_status st = clpa_kv_layout_check(kv, &a->kv);
  if (st != CLPA_OK) return clpa_err_within(ctx->error, st, "kv");
  a->k = key_cache;
  a->v = value_cache;
  return CLPA_OK;
}

clpa_status clpa_attn_layout(clpa_context *ctx, clpa_attn *a, const clpa_cache *cache,
                             int32_t layer, cl_mem key_cache, cl_mem value_cache,
                             const clpa_kv_layout *kv) {
  if (cache || key_cache || value_cache)
    return clpa_attn_caches(ctx, a, cache, layer, key_cache, value_cache, kv);
  const clpa_status st = clpa_kv_layout_check(kv, &a->kv);
  return st == CLPA_OK ? st : clpa_err_within(ctx->error, st, "kv");
}

/* One page table, whole: padded (block_tables, max_blocks_per_seq) or CSR
 * (page_indptr, page_indices, last_page_len, num_page_indices); the
 * fields of the other form unset. The buffers themselves are checked with
 * the others (a plan's params may leave them NULL). */
static clpa_status check_page_table(clpa_context *ctx, const clpa_attn *a) {
  CLPA_CTX_CHECK(ctx, a->page_table != CLPA_PAGE_TABLE_PADDED && a->page_table != CLPA_PAGE_TABLE_CSR,
                 CLPA_ERR_INVALID_ARG, "page_table = %d (CLPA_PAGE_TABLE_PADDED or _CSR)",
                 (int)a->page_table);
  if (a->page_table == CLPA_PAGE_TABLE_PADDED) {
    const char *csr = a->page_indptr     ? "page_indptr"
                      : a->page_indices  ? "page_indices"
                      : a->last_page_len ? "last_page_len"
                      : a->num_page_indices ? "num_page_indices"
                                            : NULL;
    CLPA_CTX_CHECK(ctx, csr != NULL, CLPA_ERR_INVALID_ARG,
                   "%s is set with page_table = CLPA_PAGE_TABLE_PADDED (CSR tables take page_table ="
                   " CLPA_PAGE_TABLE_CSR, and no block_tables)", csr);
    CLPA_CTX_CHECK(ctx, a->max_blocks_per_seq <= 0, CLPA_ERR_INVALID_ARG,
                   "max_blocks_per_seq = %d", a->max_blocks_per_seq);
    return CLPA_OK;
  }
  CLPA_CTX_CHECK(ctx, a->block_tables != NULL, CLPA_ERR_INVALID_ARG,
                 "block_tables is given with page_table = CLPA_PAGE_TABLE_CSR: give one table"
                 " (page_indptr, page_indices and last_page_len)");
  CLPA_CTX_CHECK(ctx, a->max_blocks_per_seq != 0, CLPA_ERR_INVALID_ARG,
                 "max_blocks_per_seq = %d with page_table = CLPA_PAGE_TABLE_CSR (the padded"
                 " table's columns: leave it 0)", a->max_blocks_per_seq);
  CLPA_CTX_CHECK(ctx, a->num_page_indices < 0, CLPA_ERR_INVALID_ARG,
                 "num_page_indices = %d (must be >= 0)", a->num_page_indices);
  return CLPA_OK;
}

float clpa_softmax_scale(float scale, int32_t head_size) {
  return scale != 0.0f ? scale : 1.0f / sqrtf((float)head_size);
}

clpa_status clpa_attn_validate(clpa_context *ctx, const clpa_attn *a) {
  const clpa_kv_layout *kv = &a->kv;
  CLPA_CTX_CHECK(ctx, a->num_heads <= 0 || a->num_heads % kv->num_kv_heads != 0,
                 CLPA_ERR_INVALID_ARG,
                 "num_heads = %d is not a positive multiple of the cache's num_kv_heads = %d",
                 a->num_heads, kv->num_kv_heads);
  CLPA_CTX_CHECK(ctx, !supported_head_size(kv->head_size), CLPA_ERR_UNSUPPORTED,
                 "head_size = %d (supported: 32, 64, 80, 96, 112, 120, 128, 192, 256)",
                 kv->head_size);
  CLPA_CTX_CHECK(ctx, kv->block_size > 256 || (kv->block_size & (kv->block_size - 1)) != 0,
                 CLPA_ERR_UNSUPPORTED, "block_size = %d (supported: powers of two, 1 to 256)",
                 kv->block_size);
  CLPA_CTX_CHECK(ctx, a->q_dtype != CLPA_DTYPE_F32 && a->q_dtype != CLPA_DTYPE_F16 &&
                          a->q_dtype != CLPA_DTYPE_BF16,
                 CLPA_ERR_UNSUPPORTED, "q_dtype = %s (query and output must be f32, f16 or bf16)",
                 clpa_dtype_name(a->q_dtype));
  clpa_status st = check_page_table(ctx, a);
  if (st != CLPA_OK) return st;
  CLPA_CTX_CHECK(ctx, !isfinite(a->scale), CLPA_ERR_INVALID_ARG, "scale = %g", (double)a->scale);
  CLPA_CTX_CHECK(ctx, !(a->k_scale > 0 && isfinite(a->k_scale)) ||
                          !(a->v_scale > 0 && isfinite(a->v_scale)),
                 CLPA_ERR_INVALID_ARG, "k_scale = %g, v_scale = %g (must be finite and > 0)",
                 (double)a->k_scale, (double)a->v_scale);
  CLPA_CTX_CHECK(ctx, !(a->soft_cap >= 0 && isfinite(a->soft_cap)), CLPA_ERR_INVALID_ARG,
                 "soft_cap = %g (0 = off, else > 0)", (double)a->soft_cap);
  CLPA_CTX_CHECK(ctx, a->sliding_window < 0, CLPA_ERR_INVALID_ARG, "sliding_window = %d",
                 a->sliding_window);
  const size_t row = (size_t)a->num_heads * (size_t)kv->head_size;
  CLPA_CTX_CHECK(ctx, a->q_stride != 0 && a->q_stride < row, CLPA_ERR_INVALID_ARG,
                 "q_stride = %zu is less than num_heads * head_size = %zu", a->q_stride, row);
  return clpa_check_wait_list(ctx, a->num_wait_events, a->wait_events);
}

/* The page table's buffers: block_tables of need_table bytes, or the CSR
 * table's (page_indices may be NULL when it has no entries). */
static clpa_status check_table_buffers(clpa_context *ctx, const clpa_attn *a, int32_t num_seqs,
                                       size_t need_table) {
  if (a->page_table == CLPA_PAGE_TABLE_PADDED)
    return clpa_check_buffer(ctx, a->block_tables, "block_tables", need_table, 0);
  const size_t n = (size_t)num_seqs;
  clpa_status st;
  if ((st = clpa_check_buffer(ctx, a->page_indptr, "page_indptr", (n + 1) * 4, 0)) ||
      (st = clpa_check_buffer(ctx, a->page_indices, "page_indices",
                              (size_t)a->num_page_indices * 4, a->num_page_indices == 0)) ||
      (st = clpa_check_buffer(ctx, a->last_page_len, "last_page_len", n * 4, 0)))
    return st;
  return CLPA_OK;
}

clpa_status clpa_attn_check_buffers(clpa_context *ctx, clpa_attn *a, int32_t num_seqs,
                                    size_t num_rows) {
  const clpa_kv_layout *kv = &a->kv;
  const size_t qs = clpa_dtype_size(a->q_dtype), n = num_rows;
  const size_t heads = (size_t)a->num_heads, row = heads * (size_t)kv->head_size;
  if (!a->q_stride) a->q_stride = row;
  clpa_status st;
  CLPA_CTX_CHECK(ctx, kv->cache_bytes > SIZE_MAX, CLPA_ERR_INVALID_ARG,
                 "kv: %llu bytes of cache do not fit in size_t", (unsigned long long)kv->cache_bytes);
  /* Both caches must hold the layout's blocks: a value cache with fewer
   * blocks than the key cache is refused, not half-checked. */
  if ((st = clpa_check_buffer(ctx, a->k, "key_cache", (size_t)kv->cache_bytes, 0)) ||
      (st = clpa_check_buffer(ctx, a->v, "value_cache", (size_t)kv->cache_bytes, 0)))
    return st;
  /* The query's last row ends at ((n - 1) * q_stride + row) elements. */
  size_t need_q = 0;
  CLPA_CTX_CHECK(ctx, n && (!clpa_size_mul_add(n - 1, a->q_stride, row, &need_q) ||
                            !clpa_size_mul_add(need_q, qs, 0, &need_q)),
                 CLPA_ERR_INVALID_ARG,
                 "q_stride = %zu with %zu query rows: the query's size overflows size_t",
                 a->q_stride, n);
  size_t need_table = 0, need_out = 0, need_lse = 0;
  CLPA_CTX_CHECK(ctx, !clpa_size_mul_add((size_t)num_seqs, (size_t)a->max_blocks_per_seq * 4, 0,
                                         &need_table) ||
                          !clpa_size_mul_add(n, row, 0, &need_out) ||
                          !clpa_size_mul_add(need_out, qs, 0, &need_out) ||
                          !clpa_size_mul_add(n, heads * 4, 0, &need_lse),
                 CLPA_ERR_INVALID_ARG,
                 "%zu query rows with num_heads = %d and max_blocks_per_seq = %d: the buffer"
                 " sizes overflow size_t", n, a->num_heads, a->max_blocks_per_seq);
  if ((st = clpa_check_buffer(ctx, a->query, "query", need_q, 0)) ||
      (st = check_table_buffers(ctx, a, num_seqs, need_table)) ||
      (st = clpa_check_buffer(ctx, a->out, "out", need_out, 0)) ||
      (st = clpa_check_buffer(ctx, a->lse, "lse", need_lse, 1)) ||
      (st = clpa_check_buffer(ctx, a->alibi_slopes, "alibi_slopes", heads * 4, 1)) ||
      (st = clpa_check_buffer(ctx, a->sinks, "sinks", heads * 4, 1)) ||
      (st = clpa_check_buffer(ctx, a->k_scale_buffer, "k_scale_buffer", 4, 1)) ||
      (st = clpa_check_buffer(ctx, a->v_scale_buffer, "v_scale_buffer", 4, 1)))
    return st;
  return CLPA_OK;
}
