/*
 * clpa_layout.h — the paged KV cache's shape, stated once.
 *
 * A clpa_kv_layout describes one layer's key cache and value cache: the
 * storage dtype, the number of blocks, tokens per block, KV heads and head
 * size, and the strides these imply. The cache object returns it
 * (clpa_cache_get_layout), the block pool and the KV manager are set up
 * from it (clpa_pool_config_from_layout, clpa_kvman_config_from_layout),
 * and every op takes it (or a clpa_cache and a layer). Host-only: this
 * header needs no OpenCL. clpa.h includes it.
 *
 * The layouts are vLLM's (element counts; x = 16 bytes / element size):
 *
 *   key cache    [num_blocks, num_kv_heads, head_size / x, block_size, x]
 *   value cache  [num_blocks, num_kv_heads, head_size, block_size]
 *
 * so one (block, KV head) is a tile of head_size * block_size elements in
 * both, head_stride apart, blocks block_stride apart. Within a tile, the
 * key of the token at offset t of the block, dimension d, is at
 *
 *   (d / x) * block_size * x  +  t * x  +  d % x        (16 bytes per token and row)
 *
 * and its value at d * block_size + t. A slot (slot mapping) is
 * block * block_size + t. clpa_kv_key_index and clpa_kv_value_index are the
 * one host formula; the kernels' twins are key_index and value_index in
 * cl/kv.cl. Keeping both in one place each is what leaves room for a
 * token-major (NHD) layout later.
 */
#ifndef CLPA_LAYOUT_H
#define CLPA_LAYOUT_H

#include "clpa_base.h"
#include "clpa_kv.h"
#include "clpa_kvman.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clpa_kv_layout {
  /* What the layout is (set by clpa_kv_layout_init, or by hand and then
   * checked by every op, which recomputes the fields below from these). */
  clpa_dtype dtype;     /* storage dtype of both caches */
  int32_t num_blocks;   /* blocks in each of the key and value caches, >= 0 */
  int32_t block_size;   /* tokens per block, > 0 */
  int32_t num_kv_heads; /* > 0 */
  int32_t head_size;    /* > 0, a multiple of x */
  /* What it implies (elements unless said). */
  int32_t x;             /* elements per 16 bytes: the key layout's last dimension */
  uint64_t head_stride;  /* between KV heads of a block: head_size * block_size */
  uint64_t block_stride; /* between blocks: num_kv_heads * head_stride */
  uint64_t block_bytes;  /* one block of one cache, in bytes */
  uint64_t cache_bytes;  /* num_blocks * block_bytes: what each buffer must hold */
  uint64_t reserved[8]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_kv_layout;

/* Fills *out with the layout of caches of num_blocks blocks of block_size
 * tokens, num_kv_heads heads of head_size elements, stored as dtype, and
 * the strides this implies. Returns CLPA_OK, or CLPA_ERR_INVALID_ARG (a
 * NULL out, an invalid dtype, a size out of range, head_size not a
 * multiple of x, or a cache whose byte size does not fit in 64 bits; the
 * message names the field) with *out untouched. */
CLPA_API clpa_status clpa_kv_layout_init(clpa_kv_layout *out, clpa_dtype dtype, int32_t num_blocks,
                                         int32_t block_size, int32_t num_kv_heads,
                                         int32_t head_size);

/* Checks a layout filled by hand: recomputes the derived fields from the
 * first five into *out (which may be l itself). Returns as
 * clpa_kv_layout_init. */
CLPA_API clpa_status clpa_kv_layout_check(const clpa_kv_layout *l, clpa_kv_layout *out);

/* Index (in elements, from the start of the key cache) of dimension dim
 * of the key of the token at offset tok of block `block`, KV head
 * kv_head. The arguments must be in range for the layout (unchecked: this
 * is the one formula, used in inner loops). */
CLPA_API uint64_t clpa_kv_key_index(const clpa_kv_layout *l, int32_t block, int32_t kv_head,
                                    int32_t tok, int32_t dim);
/* The same for the value cache. */
CLPA_API uint64_t clpa_kv_value_index(const clpa_kv_layout *l, int32_t block, int32_t kv_head,
                                      int32_t tok, int32_t dim);

/* Sets cfg's num_blocks and block_size from the layout (the rest of cfg
 * is left as it is: call the config's _init first). */
CLPA_API void clpa_pool_config_from_layout(clpa_pool_config *cfg, const clpa_kv_layout *l);
CLPA_API void clpa_kvman_config_from_layout(clpa_kvman_config *cfg, const clpa_kv_layout *l);

#ifdef __cplusplus
}
#endif
#endif /* CLPA_LAYOUT_H */
