/*
 * clpa_cache.h — the KV cache on the device and the operations on it:
 * writing new tokens (reshape_and_cache), copying blocks (copy-on-write)
 * and swapping blocks between device and host memory (preemption,
 * offload). clpa.h includes this header; it stands on clpa_runtime.h (the
 * context) and may be included alone.
 *
 * Introduction
 *
 * A cache object holds the key and value caches of every layer of a model
 * in vLLM's layouts (element counts; x = 16 bytes / element size):
 *
 *   key cache    [num_blocks, num_kv_heads, head_size / x, block_size, x]
 *   value cache  [num_blocks, num_kv_heads, head_size, block_size]
 *
 * one pair per layer. That is the default split-key layout; cfg.layout
 * picks HND or NHD instead (clpa_layout.h draws all three). The block ids are the ones a clpa_pool hands out
 * (clpa_kv.h): the pool decides which block holds which token, the cache
 * holds the bytes. clpa_cache_key / clpa_cache_value give each layer's
 * cl_mem to every op, clpa_decode included.
 *
 *   device cache   allocated by clpa (num_blocks given, or sized from a
 *                  fraction of the device's memory), or wrapping caches the
 *                  application allocated itself
 *   host cache     the same layout in host memory (pinned where the device
 *                  offers it): the other end of clpa_swap_blocks
 *
 * Memory. clpa packs a device cache into as few buffers ("arenas") as the
 * device's largest allocation allows, each layer's key and value cache a
 * sub-buffer aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN; so clpa_copy_blocks
 * copies every layer in one launch per arena (usually one; a cache larger
 * than the device's largest allocation needs several). Creation fills
 * the buffers with zeros and waits, so a device that allocates lazily
 * fails here, cleanly, and not in the middle of a run.
 *
 * Ops. Every op validates all its arguments before enqueueing anything (a
 * refused call writes nothing), waits for the given events and can return
 * one that completes with its last command, like clpa_decode. Block ids and
 * slots that live in device buffers are checked by the kernels: a bad one
 * is skipped and sets CLPA_FAULT_BAD_BLOCK in the context's fault word
 * (clpa_context_check_faults). Nothing is ever written outside the caches.
 * The ops assume an in-order queue, as the rest of clpa does.
 *
 * Lifetime. A cache belongs to the context it was made on and must be
 * destroyed before it; like the context, one thread at a time.
 */
#ifndef CLPA_CACHE_H
#define CLPA_CACHE_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

#include "clpa_base.h"
#include "clpa_kv.h"
#include "clpa_layout.h"
#include "clpa_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
 * 1. The cache object
 * ==================================================================== */
typedef struct clpa_cache clpa_cache;

typedef enum clpa_cache_placement {
  CLPA_CACHE_DEVICE = 0, /* device memory: what the kernels read and write */
  CLPA_CACHE_HOST = 1    /* host memory, pinned where possible: for clpa_swap_blocks */
} clpa_cache_placement;

typedef struct clpa_cache_config {
  int32_t num_layers;   /* > 0 */
  int32_t num_kv_heads; /* > 0 */
  int32_t head_size;    /* > 0, a multiple of x (16 bytes of dtype) */
  int32_t block_size;   /* tokens per block, > 0 (attention: powers of two, 1 to 256) */
  clpa_dtype dtype;     /* storage dtype */
  /* Blocks per layer: > 0 exactly; 0 = as many as mem_fraction of the
   * device's global memory holds (device caches only; a wrapped cache
   * takes 0 to mean as many as the smallest buffer holds). */
  int32_t num_blocks;
  /* With num_blocks 0: the share of the device's global memory the cache
   * takes, in (0, 1] (vLLM's gpu_memory_utilization, for the cache alone);
   * 0 (default) refuses a cache with neither size set. Global memory is
   * what the implementation reports (clpa_device_info.global_mem_bytes):
   * a GPU's whole memory, not what is free; on PoCL's CPU device a share
   * of the host's RAM that moves with the memory free at the time. */
  double mem_fraction;
  clpa_cache_placement placement;
  /* Host caches: 1 (default) pinned memory (CL_MEM_ALLOC_HOST_PTR, mapped)
   * where the device gives it, else plain host memory; 0 plain memory. */
  int pinned;
  /* Largest buffer clpa allocates; 0 (default) = the device's largest
   * allocation. Smaller values split the layers over more arenas (a driver
   * that dislikes huge buffers; tests). */
  uint64_t max_arena_bytes;
  /* The caches' layout (clpa_layout.h): CLPA_KV_LAYOUT_SPLIT_KEY (0,
   * default), CLPA_KV_LAYOUT_HND or CLPA_KV_LAYOUT_NHD. */
  clpa_kv_layout_kind layout;
  int32_t reserved32;   /* 0 */
  uint64_t reserved[7]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_cache_config;

/* Fills cfg with defaults: num_layers 1, block_size 16, dtype f16,
 * placement device, pinned 1, the rest 0. The shape and num_blocks (or
 * mem_fraction) still need setting. */
CLPA_API void clpa_cache_config_init(clpa_cache_config *cfg);

/* Bytes one block takes over all layers, keys and values:
 * 2 * num_layers * num_kv_heads * head_size * block_size * element size
 * (vLLM's cache block size). Returns 0 when cfg is NULL or its shape is
 * invalid. */
CLPA_API uint64_t clpa_cache_bytes_per_block(const clpa_cache_config *cfg);

/* Creates a cache for the context's device as cfg describes. A device
 * cache of cfg->num_blocks = 0 gets
 *   floor(mem_fraction * global memory / bytes per block)
 * blocks (less a little for alignment), fewer if the device's largest
 * allocation (or cfg->max_arena_bytes) cannot hold one layer's key cache
 * of that many. The memory is zeroed; the call waits for
 * that. Returns CLPA_OK and *out, CLPA_ERR_INVALID_ARG (the message names
 * the field), CLPA_ERR_DEVICE_MEMORY (more than the device's global
 * memory, one layer larger than its largest allocation, or an allocation
 * that failed; nothing is left allocated), CLPA_ERR_OUT_OF_MEMORY or
 * CLPA_ERR_OPENCL. On failure *out is NULL. */
CLPA_API clpa_status clpa_cache_create(clpa_context *ctx, const clpa_cache_config *cfg,
                                       clpa_cache **out);

/* Wraps caches the application allocated: key_caches[l] and
 * value_caches[l] for l < cfg->num_layers, buffers of ctx's OpenCL context
 * in the layouts above, each holding at least num_blocks blocks (0: as
 * many as the smallest holds). clpa retains them, never reallocates or
 * clears them, and releases them in clpa_cache_destroy. placement must be
 * CLPA_CACHE_DEVICE. Each buffer is its own arena, so clpa_copy_blocks
 * launches once per layer and cache. Returns CLPA_OK and *out,
 * CLPA_ERR_INVALID_ARG (a NULL or foreign buffer, one too small: the
 * message names it and its size), CLPA_ERR_UNSUPPORTED (more than
 * INT32_MAX blocks) or CLPA_ERR_OUT_OF_MEMORY. */
CLPA_API clpa_status clpa_cache_wrap(clpa_context *ctx, const clpa_cache_config *cfg,
                                     const cl_mem *key_caches, const cl_mem *value_caches,
                                     clpa_cache **out);

/* Releases the cache's buffers (NULL is fine). A host cache first waits
 * for the context's queue, since swaps in flight use its memory; a device
 * cache lets OpenCL keep its buffers alive until pending commands end. */
CLPA_API void clpa_cache_destroy(clpa_cache *cache);

typedef struct clpa_cache_info {
  int32_t num_layers, num_kv_heads, head_size, block_size, num_blocks;
  clpa_dtype dtype;
  int32_t x;                 /* elements per 16 bytes (the split-key layout's last dimension) */
  uint64_t block_bytes;      /* one block of one layer's key (or value) cache */
  uint64_t layer_bytes;      /* one layer's key (or value) cache: num_blocks * block_bytes */
  uint64_t bytes_per_block;  /* clpa_cache_bytes_per_block: all layers, K and V */
  uint64_t allocated_bytes;  /* what clpa allocated, alignment padding included (0 when wrapped) */
  int32_t num_arenas;        /* buffers holding the slices (clpa_copy_blocks launches per arena) */
  clpa_cache_placement placement;
  int pinned;                /* host cache in pinned (mapped OpenCL) memory */
  int wrapped;               /* made by clpa_cache_wrap */
  clpa_kv_layout_kind layout; /* the caches' layout kind (clpa_layout.h) */
  int32_t reserved32;
  uint64_t reserved[7]; /* room for fields to come (README's ABI) */
} clpa_cache_info;

/* Describes the cache. Returns CLPA_OK or CLPA_ERR_INVALID_ARG (NULL). */
CLPA_API clpa_status clpa_cache_get_info(const clpa_cache *cache, clpa_cache_info *out);

/* The layout of each layer's key and value cache (clpa_layout.h): what
 * clpa_decode and the other ops take with raw buffers, and what
 * clpa_pool_config_from_layout / clpa_kvman_config_from_layout set the
 * host side up from. Returns CLPA_OK or CLPA_ERR_INVALID_ARG (NULL). */
CLPA_API clpa_status clpa_cache_get_layout(const clpa_cache *cache, clpa_kv_layout *out);

/* Layer l's key (value) cache as a buffer for the kernels: a sub-buffer of
 * exactly layer_bytes for caches clpa allocated, the application's buffer
 * for wrapped ones. NULL for a host cache, a NULL cache or l out of range.
 * Owned by the cache. */
CLPA_API cl_mem clpa_cache_key(const clpa_cache *cache, int32_t layer);
CLPA_API cl_mem clpa_cache_value(const clpa_cache *cache, int32_t layer);

/* Layer l's key (value) cache in host memory, layer_bytes long: for host
 * caches only (NULL otherwise). Do not touch the blocks a swap in flight
 * reads or writes until its event completes. */
CLPA_API void *clpa_cache_key_host(const clpa_cache *cache, int32_t layer);
CLPA_API void *clpa_cache_value_host(const clpa_cache *cache, int32_t layer);

/* ======================================================================
 * 2. reshape_and_cache: write new tokens' keys and values
 *
 * Token t's key row (num_kv_heads * head_size elements, head h at
 * h * head_size) starts at key_offset + t * key_stride elements of key,
 * likewise for value; so one fused QKV buffer [num_tokens, (num_heads +
 * 2 * num_kv_heads) * head_size] serves as both, with key_offset =
 * num_heads * head_size, value_offset = key_offset + num_kv_heads *
 * head_size and both strides the fused row. The row goes to slot
 * slot_mapping[t] = block * block_size + offset of the layer's caches;
 * negative slots are padding and skipped.
 *
 * Conversion to the cache dtype, bit for bit as host/dtype_convert.h
 * documents: f16 as vstore_half_rte; bf16 round to nearest even; fp8
 * stores fp8(x / k_scale) (v_scale for values), the quotient correctly
 * rounded in f32, then rounded to nearest even, saturating (e4m3: +-inf
 * too; e5m2: finite values only). A source of the cache's own dtype is
 * copied bit for bit.
 * ==================================================================== */
typedef struct clpa_reshape_and_cache_params {
  clpa_cache *cache;      /* a device cache */
  int32_t layer;          /* which layer's caches */
  int32_t num_tokens;     /* >= 0 */
  clpa_dtype src_dtype;   /* key and value rows: f32, f16 or bf16 */
  cl_mem key, value;      /* may be the same buffer */
  size_t key_offset, value_offset; /* elements before token 0's row */
  size_t key_stride, value_stride; /* elements between rows; 0 = num_kv_heads * head_size */
  cl_mem slot_mapping;    /* int64 [num_tokens] */
  float k_scale, v_scale; /* fp8 caches: stored = x / scale; finite, > 0 (1 by default) */
  cl_uint num_wait_events;
  const cl_event *wait_events;
  cl_event *event;        /* if not NULL: completes with the write */
  uint64_t reserved[8]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_reshape_and_cache_params;

/* Fills p with defaults: zeros and NULLs, src_dtype f32, scales 1. */
CLPA_API void clpa_reshape_and_cache_params_init(clpa_reshape_and_cache_params *p);

/* Enqueues the write; does not wait. Shapes and buffer sizes are checked
 * first; slots are checked by the kernel: one at or past num_blocks *
 * block_size is skipped and sets CLPA_FAULT_BAD_BLOCK. Two tokens with the
 * same slot race (one of them wins): do not.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (named), CLPA_ERR_UNSUPPORTED
 * (src_dtype; a cache of num_kv_heads * head_size past 2^31 - 1 elements a
 * token), CLPA_ERR_BUILD or CLPA_ERR_OPENCL. */
CLPA_API clpa_status clpa_reshape_and_cache(clpa_context *ctx,
                                            const clpa_reshape_and_cache_params *p);

/* ======================================================================
 * 3. copy_blocks: copy-on-write on the device
 *
 * Copies block src to block dst in the key and value caches of layers
 * [first_layer, first_layer + num_layers), in one kernel launch per arena.
 * The pairs come either from the host — clpa_block_copy entries as
 * clpa_seq_append reports them (src < 0: no copy, skipped), checked before
 * anything is enqueued — or from a device buffer of int64 [num_pairs, 2]
 * (vLLM's block_mapping), checked by the kernel (src < 0 skips; any other
 * id outside the cache is skipped and sets CLPA_FAULT_BAD_BLOCK).
 * Destinations must be distinct and never a source of the same call.
 * ==================================================================== */
typedef struct clpa_copy_blocks_params {
  clpa_cache *cache;              /* a device cache */
  int32_t first_layer;            /* >= 0 */
  int32_t num_layers;             /* 0 = every layer from first_layer */
  int32_t num_pairs;              /* >= 0 */
  const clpa_block_copy *pairs;   /* host pairs, or NULL and: */
  cl_mem pair_buffer;             /* int64 [num_pairs, 2] on the device */
  cl_uint num_wait_events;
  const cl_event *wait_events;
  cl_event *event;
  uint64_t reserved[8]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_copy_blocks_params;

/* Fills p with defaults: zeros and NULLs (all layers, no pairs). */
CLPA_API void clpa_copy_blocks_params_init(clpa_copy_blocks_params *p);

/* Enqueues the copies; does not wait. Host pairs are uploaded (copied
 * before the call returns, so the array may be reused at once).
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (a pair out of range, a repeated
 * destination, a destination that is also a source: the message names the
 * pair), CLPA_ERR_BUILD, CLPA_ERR_DEVICE_MEMORY or CLPA_ERR_OPENCL. */
CLPA_API clpa_status clpa_copy_blocks(clpa_context *ctx, const clpa_copy_blocks_params *p);

/* ======================================================================
 * 4. swap_blocks: move blocks between caches (device <-> host)
 *
 * Copies block pairs[i].src of src to block pairs[i].dst of dst, keys and
 * values of layers [first_layer, first_layer + num_layers). The two caches
 * must have the same shape and dtype (num_blocks may differ); one of them
 * may be a host cache (swap out: device -> host; swap in: host -> device),
 * or both device caches (distinct). Runs of consecutive pairs (src and dst
 * both +1) go as one transfer per layer. Transfers are asynchronous: a host
 * cache's blocks must not be touched until the event completes.
 * ==================================================================== */
typedef struct clpa_swap_blocks_params {
  clpa_cache *src, *dst;
  int32_t first_layer;          /* >= 0 */
  int32_t num_layers;           /* 0 = every layer from first_layer */
  int32_t num_pairs;            /* >= 0 */
  const clpa_block_copy *pairs; /* src < 0: skipped */
  cl_uint num_wait_events;
  const cl_event *wait_events;
  cl_event *event;
  uint64_t reserved[8]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_swap_blocks_params;

/* Fills p with defaults: zeros and NULLs. */
CLPA_API void clpa_swap_blocks_params_init(clpa_swap_blocks_params *p);

/* Enqueues the transfers; does not wait.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (mismatched caches, a pair out of
 * range, a repeated destination, or, between two caches that wrap the
 * same buffer, a source and destination that overlap in it: named),
 * CLPA_ERR_UNSUPPORTED (host to
 * host) or CLPA_ERR_OPENCL (a transfer failed to enqueue; the ones before
 * it are enqueued). */
CLPA_API clpa_status clpa_swap_blocks(clpa_context *ctx, const clpa_swap_blocks_params *p);

#ifdef __cplusplus
}
#endif
#endif /* CLPA_CACHE_H */
