/*
 * layout.c — the paged KV layout (include/clpa_layout.h): its checks, its
 * strides and the one host formula for where a key or value element
 * lives. The kernels' twin is cl/kv.cl.
 */
#include "clpa_layout.h"

#include "util.h"

clpa_status clpa_kv_layout_init(clpa_kv_layout *out, clpa_dtype dtype, int32_t num_blocks,
                                int32_t block_size, int32_t num_kv_heads, int32_t head_size) {
  CLPA_CHECK(NULL, !out, CLPA_ERR_INVALID_ARG, "out must not be NULL");
  const size_t es = clpa_dtype_size(dtype);
  CLPA_CHECK(NULL, es == 0, CLPA_ERR_INVALID_ARG, "dtype = %d is not a clpa_dtype", (int)dtype);
  CLPA_CHECK(NULL, num_blocks < 0, CLPA_ERR_INVALID_ARG, "num_blocks = %d (must be >= 0)",
             num_blocks);
  CLPA_CHECK(NULL, block_size <= 0, CLPA_ERR_INVALID_ARG, "block_size = %d (must be > 0)",
             block_size);
  CLPA_CHECK(NULL, num_kv_heads <= 0, CLPA_ERR_INVALID_ARG, "num_kv_heads = %d (must be > 0)",
             num_kv_heads);
  const int32_t x = (int32_t)(16 / es);
  CLPA_CHECK(NULL, head_size <= 0 || head_size % x != 0, CLPA_ERR_INVALID_ARG,
             "head_size = %d (must be > 0 and a multiple of x = %d: 16 bytes of %s)", head_size, x,
             clpa_dtype_name(dtype));
  /* Every factor is < 2^31, so head_stride fits; the rest is checked. */
  const uint64_t head_stride = (uint64_t)head_size * (uint64_t)block_size;
  const uint64_t nb = num_blocks ? (uint64_t)num_blocks : 1;
  CLPA_CHECK(NULL, head_stride > UINT64_MAX / (uint64_t)num_kv_heads / es / nb,
             CLPA_ERR_INVALID_ARG,
             "a cache of %d blocks of %d x %d x %d %s elements does not fit in 64 bits",
             num_blocks, num_kv_heads, head_size, block_size, clpa_dtype_name(dtype));
  const uint64_t block_stride = head_stride * (uint64_t)num_kv_heads;
  clpa_kv_layout l;
  l.dtype = dtype;
  l.num_blocks = num_blocks;
  l.block_size = block_size;
  l.num_kv_heads = num_kv_heads;
  l.head_size = head_size;
  l.x = x;
  l.head_stride = head_stride;
  l.block_stride = block_stride;
  l.block_bytes = block_stride * es;
  l.cache_bytes = l.block_bytes * (uint64_t)num_blocks;
  *out = l;
  return CLPA_OK;
}

clpa_status clpa_kv_layout_check(const clpa_kv_layout *l, clpa_kv_layout *out) {
  CLPA_CHECK(NULL, !l, CLPA_ERR_INVALID_ARG, "layout must not be NULL");
  CLPA_CHECK_RESERVED(NULL, l, "layout->");
  return clpa_kv_layout_init(out, l->dtype, l->num_blocks, l->block_size, l->num_kv_heads,
                             l->head_size);
}

static uint64_t tile(const clpa_kv_layout *l, int32_t block, int32_t kv_head) {
  return (uint64_t)block * l->block_stride + (uint64_t)kv_head * l->head_stride;
}

uint64_t clpa_kv_key_index(const clpa_kv_layout *l, int32_t block, int32_t kv_head, int32_t tok,
                           int32_t dim) {
  const uint64_t x = (uint64_t)l->x;
  return tile(l, block, kv_head) + ((uint64_t)dim / x * (uint64_t)l->block_size + (uint64_t)tok) * x +
         (uint64_t)dim % x;
}

uint64_t clpa_kv_value_index(const clpa_kv_layout *l, int32_t block, int32_t kv_head, int32_t tok,
                             int32_t dim) {
  return tile(l, block, kv_head) + (uint64_t)dim * (uint64_t)l->block_size + (uint64_t)tok;
}

void clpa_pool_config_from_layout(clpa_pool_config *cfg, const clpa_kv_layout *l) {
  if (!cfg || !l) return;
  cfg->num_blocks = l->num_blocks;
  cfg->block_size = l->block_size;
}

void clpa_kvman_config_from_layout(clpa_kvman_config *cfg, const clpa_kv_layout *l) {
  if (!cfg || !l) return;
  cfg->num_blocks = l->num_blocks;
  cfg->block_size = l->block_size;
}
