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
 * Three layouts (kinds) are read; element counts, x = 16 bytes / element
 * size, B = block_size, H = num_kv_heads, D = head_size:
 *
 *   CLPA_KV_LAYOUT_SPLIT_KEY (0, the default: vLLM's original layout)
 *     key cache    [num_blocks, H, D / x, B, x]
 *     value cache  [num_blocks, H, D, B]
 *   CLPA_KV_LAYOUT_HND (FlashInfer's HND), keys and values alike
 *     [num_blocks, H, B, D]
 *   CLPA_KV_LAYOUT_NHD (vLLM's current backends, FlashAttention,
 *     FlashInfer's NHD), keys and values alike
 *     [num_blocks, B, H, D]
 *
 * In every kind a block holds H * B * D elements, block_stride apart (that
 * many, or block_pitch where it is set), and one KV head of a block starts
 * head_stride after the block (split-key and HND: B * D; NHD: D). Within
 * that, the key of the token at offset t
 * of the block, dimension d, is at
 *
 *   split-key  (d / x) * B * x  +  t * x  +  d % x   (16 bytes per token and row)
 *   HND, NHD   t * key_token_stride  +  d            (key_token_stride D, resp. H * D)
 *
 * and its value at d * B + t (split-key) or t * value_token_stride + d.
 * A slot (slot mapping) is block * block_size + t in every kind.
 * clpa_kv_key_index and clpa_kv_value_index are the one host formula; the
 * kernels' twins are key_index and value_index in cl/kv.cl, where the kind
 * is a build option (CLPA_KV_LAYOUT).
 *
 * Every op that takes a layout (or a cache) checks its kind: a value that
 * is no clpa_kv_layout_kind is refused with CLPA_ERR_INVALID_ARG. One
 * path reads the split-key layout only (XAttention's tensor-core path;
 * docs/guide.md): forced onto another kind it refuses with
 * CLPA_ERR_UNSUPPORTED, and the automatic choice picks a path that reads
 * the layout.
 *
 * K and V in one buffer: vLLM's [2, num_blocks, ...] is two halves, each
 * a cache (key_cache and value_cache sub-buffers of it). FlashInfer's
 * [num_blocks, 2, ...] interleaves a block of keys with a block of values:
 * set block_pitch to twice the block (2 H B D) and give key_cache the
 * buffer and value_cache a sub-buffer H B D elements in (its origin must
 * meet the device's CL_DEVICE_MEM_BASE_ADDR_ALIGN).
 */
#ifndef CLPA_LAYOUT_H
#define CLPA_LAYOUT_H

#include "clpa_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which layout the caches have (see above). Values from clpa_codes.h. */
typedef enum clpa_kv_layout_kind {
  CLPA_KV_LAYOUT_SPLIT_KEY = CLPA_CODE_LAYOUT_SPLIT_KEY, /* vLLM's original (the default) */
  CLPA_KV_LAYOUT_HND = CLPA_CODE_LAYOUT_HND,             /* [blocks, kv_heads, block_size, head_size] */
  CLPA_KV_LAYOUT_NHD = CLPA_CODE_LAYOUT_NHD,             /* [blocks, block_size, kv_heads, head_size] */
  CLPA_KV_LAYOUT_COUNT_ = CLPA_CODE_LAYOUT_COUNT
} clpa_kv_layout_kind;

/* The kind's name ("split_key", "hnd", "nhd"), or "?" for a value that is
 * no kind. */
CLPA_API const char *clpa_kv_layout_kind_name(clpa_kv_layout_kind kind);

typedef struct clpa_kv_layout {
  /* What the layout is (set by clpa_kv_layout_init or _init_kind, or by
   * hand and then checked by every op, which recomputes the derived fields
   * from these and `kind`). */
  clpa_dtype dtype;     /* storage dtype of both caches */
  int32_t num_blocks;   /* blocks in each of the key and value caches, >= 0 */
  int32_t block_size;   /* tokens per block, > 0 */
  int32_t num_kv_heads; /* > 0 */
  int32_t head_size;    /* > 0, a multiple of x */
  /* What it implies (elements unless said). */
  int32_t x;             /* elements per 16 bytes: the key layout's last dimension */
  uint64_t head_stride;  /* between KV heads of a block: head_size * block_size (NHD: head_size) */
  uint64_t block_stride; /* between blocks: num_kv_heads * head_size * block_size, or block_pitch */
  uint64_t block_bytes;  /* one block of one cache, in bytes (its H B D elements) */
  uint64_t cache_bytes;  /* what each buffer must hold: num_blocks * block_bytes when packed */
  /* What the layout is, continued (0, what clpa_kv_layout_init leaves:
   * split-key, so a layout from before this field means what it meant). */
  clpa_kv_layout_kind kind;
  int32_t reserved32; /* 0 */
  /* What it implies, continued: elements between successive tokens of a
   * block, for one KV head and dimension. Split-key: x for keys, 1 for
   * values; HND: head_size; NHD: num_kv_heads * head_size. */
  uint64_t key_token_stride;
  uint64_t value_token_stride;
  /* What the layout is, continued: elements from one block's start to the
   * next in each buffer; 0 (what ..._init leaves) for packed blocks
   * (num_kv_heads * head_size * block_size). Else at least that and a
   * multiple of x: block_stride is then block_pitch, and cache_bytes what
   * num_blocks blocks that far apart span (K and V in one buffer: above). */
  uint64_t block_pitch;
  uint64_t reserved[4]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_kv_layout;

/* Fills *out with the split-key layout of caches of num_blocks blocks of
 * block_size tokens, num_kv_heads heads of head_size elements, stored as
 * dtype, and the strides this implies. Returns CLPA_OK, or
 * CLPA_ERR_INVALID_ARG (a NULL out, an invalid dtype, a size out of
 * range, head_size not a multiple of x, a (block, KV head) tile of
 * head_size x block_size past 2^31 - 1 elements, which the kernels index
 * in 32 bits, or a cache whose byte size does not fit in 64 bits; the
 * message names the field) with *out untouched. */
CLPA_API clpa_status clpa_kv_layout_init(clpa_kv_layout *out, clpa_dtype dtype, int32_t num_blocks,
                                         int32_t block_size, int32_t num_kv_heads,
                                         int32_t head_size);
/* The same for a layout of the given kind. Besides clpa_kv_layout_init's
 * refusals: a kind that is no clpa_kv_layout_kind, and (HND, NHD) a block
 * of 2^31 elements or more (the kernels index within a block in 32 bits).
 * head_size must be a multiple of x in every kind (the kernels load 16
 * bytes of a key at a time). */
CLPA_API clpa_status clpa_kv_layout_init_kind(clpa_kv_layout *out, clpa_kv_layout_kind kind,
                                              clpa_dtype dtype, int32_t num_blocks,
                                              int32_t block_size, int32_t num_kv_heads,
                                              int32_t head_size);

/* Checks a layout filled by hand (or by _init, then `kind` set):
 * recomputes the derived fields from the first five, `kind` and
 * `block_pitch` into *out (which may be l itself). Returns as
 * clpa_kv_layout_init_kind, and refuses nonzero reserved words and a
 * block_pitch smaller than a block or not a multiple of x. */
CLPA_API clpa_status clpa_kv_layout_check(const clpa_kv_layout *l, clpa_kv_layout *out);

/* Index (in elements, from the start of the key cache) of dimension dim
 * of the key of the token at offset tok of block `block`, KV head
 * kv_head, in the layout's kind. The arguments must be in range for the
 * layout (unchecked: this is the one formula, used in inner loops). */
CLPA_API uint64_t clpa_kv_key_index(const clpa_kv_layout *l, int32_t block, int32_t kv_head,
                                    int32_t tok, int32_t dim);
/* The same for the value cache. */
CLPA_API uint64_t clpa_kv_value_index(const clpa_kv_layout *l, int32_t block, int32_t kv_head,
                                      int32_t tok, int32_t dim);

#ifdef __cplusplus
}
#endif
#endif /* CLPA_LAYOUT_H */
