/*
 * layout.c — the paged KV layout (include/clpa_layout.h): its checks, its
 * strides and the one host formula for where a key or value element
 * lives, in each kind. The kernels' twin is cl/kv.cl.
 */
#include "clpa_layout.h"

#include "last_error.h"
#include "reserved.h"

const char *clpa_kv_layout_kind_name(clpa_kv_layout_kind kind) {
  switch (kind) {
    case CLPA_KV_LAYOUT_SPLIT_KEY: return "split_key";
    case CLPA_KV_LAYOUT_HND: return "hnd";
    case CLPA_KV_LAYOUT_NHD: return "nhd";
    default: return "?";
  }
}

/* clpa_kv_layout_init_kind's, with blocks `pitch` elements apart (0: packed). */
static clpa_status layout_of(clpa_kv_layout *out, clpa_kv_layout_kind kind, clpa_dtype dtype,
                             int32_t num_blocks, int32_t block_size, int32_t num_kv_heads,
                             int32_t head_size, uint64_t pitch) {
  CLPA_CHECK(NULL, !out, CLPA_ERR_INVALID_ARG, "out must not be NULL");
  CLPA_CHECK(NULL, (unsigned)kind >= CLPA_KV_LAYOUT_COUNT_, CLPA_ERR_INVALID_ARG,
             "kind = %d is not a clpa_kv_layout_kind (split_key 0, hnd 1, nhd 2)", (int)kind);
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
  /* Every factor is < 2^31, so a head's tile fits; the rest is checked. */
  const uint64_t tile = (uint64_t)head_size * (uint64_t)block_size;
  const uint64_t nb = num_blocks ? (uint64_t)num_blocks : 1;
  CLPA_CHECK(NULL, tile > UINT64_MAX / (uint64_t)num_kv_heads / es / nb, CLPA_ERR_INVALID_ARG,
             "a cache of %d blocks of %d x %d x %d %s elements does not fit in 64 bits",
             num_blocks, num_kv_heads, head_size, block_size, clpa_dtype_name(dtype));
  const uint64_t block_stride = tile * (uint64_t)num_kv_heads;
  CLPA_CHECK(NULL, kind != CLPA_KV_LAYOUT_SPLIT_KEY && block_stride > INT32_MAX,
             CLPA_ERR_INVALID_ARG,
             "a block of %d x %d x %d elements is past 2^31 - 1, which the %s layout's kernels"
             " index in 32 bits", num_kv_heads, block_size, head_size,
             clpa_kv_layout_kind_name(kind));
  /* Split-key kernels index within a (block, head) tile in 32 bits too
   * (kv.cl's key_index, value_index); only the tile's start is 64-bit. */
  CLPA_CHECK(NULL, kind == CLPA_KV_LAYOUT_SPLIT_KEY && tile > INT32_MAX, CLPA_ERR_INVALID_ARG,
             "a head's tile of %d x %d elements (head_size x block_size) is past 2^31 - 1, which"
             " the split_key layout's kernels index in 32 bits", head_size, block_size);
  CLPA_CHECK(NULL, pitch && (pitch < block_stride || pitch % (uint64_t)x), CLPA_ERR_INVALID_ARG,
             "block_pitch = %llu (0 for packed blocks, else at least a block's %llu elements and"
             " a multiple of x = %d)", (unsigned long long)pitch,
             (unsigned long long)block_stride, x);
  const uint64_t stride = pitch ? pitch : block_stride;
  /* What the buffers span: num_blocks - 1 strides and a block. */
  CLPA_CHECK(NULL, num_blocks > 1 && stride > (UINT64_MAX / es - block_stride) / (nb - 1),
             CLPA_ERR_INVALID_ARG,
             "a cache of %d blocks %llu elements apart does not fit in 64 bits", num_blocks,
             (unsigned long long)stride);
  const uint64_t d = (uint64_t)head_size;
  clpa_kv_layout l = {0};
  l.dtype = dtype;
  l.num_blocks = num_blocks;
  l.block_size = block_size;
  l.num_kv_heads = num_kv_heads;
  l.head_size = head_size;
  l.x = x;
  l.kind = kind;
  l.head_stride = kind == CLPA_KV_LAYOUT_NHD ? d : tile;
  l.block_pitch = pitch;
  l.block_stride = stride;
  l.block_bytes = block_stride * es;
  l.cache_bytes = num_blocks ? (stride * (uint64_t)(num_blocks - 1) + block_stride) * es : 0;
  switch (kind) {
    case CLPA_KV_LAYOUT_SPLIT_KEY: l.key_token_stride = (uint64_t)x, l.value_token_stride = 1; break;
    case CLPA_KV_LAYOUT_HND: l.key_token_stride = l.value_token_stride = d; break;
    default: l.key_token_stride = l.value_token_stride = d * (uint64_t)num_kv_heads; break;
  }
  *out = l;
  return CLPA_OK;
}

clpa_status clpa_kv_layout_init_kind(clpa_kv_layout *out, clpa_kv_layout_kind kind,
                                     clpa_dtype dtype, int32_t num_blocks, int32_t block_size,
                                     int32_t num_kv_heads, int32_t head_size) {
  return layout_of(out, kind, dtype, num_blocks, block_size, num_kv_heads, head_size, 0);
}

clpa_status clpa_kv_layout_init(clpa_kv_layout *out, clpa_dtype dtype, int32_t num_blocks,
                                int32_t block_size, int32_t num_kv_heads, int32_t head_size) {
  return clpa_kv_layout_init_kind(out, CLPA_KV_LAYOUT_SPLIT_KEY, dtype, num_blocks, block_size,
                                  num_kv_heads, head_size);
}

clpa_status clpa_kv_layout_check(const clpa_kv_layout *l, clpa_kv_layout *out) {
  CLPA_CHECK(NULL, !l, CLPA_ERR_INVALID_ARG, "layout must not be NULL");
  CLPA_CHECK_RESERVED(NULL, l, "layout->");
  CLPA_CHECK(NULL, l->reserved32 != 0, CLPA_ERR_INVALID_ARG,
             "layout->reserved32 = %d (reserved words must be 0: fill the struct with its _init"
             " function)", (int)l->reserved32);
  CLPA_CHECK(NULL, (unsigned)l->kind >= CLPA_KV_LAYOUT_COUNT_, CLPA_ERR_INVALID_ARG,
             "layout->kind = %d is not a clpa_kv_layout_kind (split_key 0, hnd 1, nhd 2)",
             (int)l->kind);
  return layout_of(out, l->kind, l->dtype, l->num_blocks, l->block_size, l->num_kv_heads,
                   l->head_size, l->block_pitch);
}

/* Where (block, kv_head) starts: a contiguous tile of head_size *
 * block_size elements in the split-key and HND layouts, the first row of
 * a strided one in NHD. */
static uint64_t tile(const clpa_kv_layout *l, int32_t block, int32_t kv_head) {
  return (uint64_t)block * l->block_stride + (uint64_t)kv_head * l->head_stride;
}

uint64_t clpa_kv_key_index(const clpa_kv_layout *l, int32_t block, int32_t kv_head, int32_t tok,
                           int32_t dim) {
  if (l->kind != CLPA_KV_LAYOUT_SPLIT_KEY)
    return tile(l, block, kv_head) + (uint64_t)tok * l->key_token_stride + (uint64_t)dim;
  const uint64_t x = (uint64_t)l->x;
  return tile(l, block, kv_head) + ((uint64_t)dim / x * (uint64_t)l->block_size + (uint64_t)tok) * x +
         (uint64_t)dim % x;
}

uint64_t clpa_kv_value_index(const clpa_kv_layout *l, int32_t block, int32_t kv_head, int32_t tok,
                             int32_t dim) {
  if (l->kind != CLPA_KV_LAYOUT_SPLIT_KEY)
    return tile(l, block, kv_head) + (uint64_t)tok * l->value_token_stride + (uint64_t)dim;
  return tile(l, block, kv_head) + (uint64_t)dim * (uint64_t)l->block_size + (uint64_t)tok;
}
