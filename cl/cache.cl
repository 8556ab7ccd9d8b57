/*
 * cache.cl — writing and copying the paged KV cache: the OpenCL port of
 * vLLM's reshape_and_cache and copy_blocks (csrc/cache_kernels.cu).
 * Launched by lib/cache_ops.c. Checked by tests/test_cache_reshape.c
 * (reshape_and_cache against clpa_ref_reshape_and_cache + clpa_encode, bit
 * for bit), tests/test_cache_copy.c (copy_blocks against host copies) and
 * tests/test_cache_e2e.c (both, under clpa_decode).
 *
 * Layouts (elements; X = 16 bytes / element of the cache dtype):
 *   key, value    rows of [num_tokens, row stride], token t's row at
 *                 offset + t * stride, head h at h * head_size in it
 *                 (a fused QKV buffer is one buffer with three offsets)
 *   slot_mapping  int64 [num_tokens]: block * block_size + offset; < 0 skips
 *   k_cache       [num_blocks, num_kv_heads, head_size / X, block_size, X]
 *   v_cache       [num_blocks, num_kv_heads, head_size, block_size]
 *
 * One block of one KV head, where a token's elements go:
 *
 *   key:    row j (dims jX .. jX+X-1):  | tok 0: X | tok 1: X | ... |   16 B per token, contiguous
 *   value:  row d (one dim):            | tok 0 | tok 1 | ... | tok B-1 |   one element per token
 */
/* Element i of a key/value row of dtype dt (clpa_dtype: 0 f32, 1 f16,
 * 2 bf16) as a float. The source dtype is a kernel argument, not a build
 * option: a uniform branch per element is cheaper than three times the
 * programs to build. */
inline float src_load(__global const void *p, ulong i, int dt) {
  if (dt == 1) return vload_half(i, (__global const half *)p);
  if (dt == 2) return as_float((uint)((__global const ushort *)p)[i] << 16);
  return ((__global const float *)p)[i];
}

#if KV_BYTES == 4
typedef uint bits_t;
#elif KV_BYTES == 2
typedef ushort bits_t;
#else
typedef uchar bits_t;
#endif

/*
 * reshape_and_cache: scatter new key and value rows into the caches.
 * Grid: (num_kv_heads * head_size, num_tokens), each rounded up to the
 * work-group size (the padding returns at once). Work-item (e, t) takes
 * element e (head e / head_size, dim e % head_size) of token t's key and
 * value, as vLLM's kernel does: adjacent work-items read adjacent source
 * elements and write adjacent bytes of the key cache (16 bytes per token
 * and row of X dims); value elements land block_size elements apart. A
 * slot at or past num_blocks * block_size is never written: it sets
 * CLPA_FAULT_BAD_BLOCK. A source of the cache's own dtype is copied as
 * bits (NaN payloads survive; half values cannot even be loaded without
 * cl_khr_fp16).
 */
__kernel void clpa_cache_reshape(__global const void *key, ulong key_offset, ulong key_stride,
                                 __global const void *value, ulong value_offset,
                                 ulong value_stride, int src_dtype, int num_tokens,
                                 __global const long *slot_mapping, __global kv_t *k_cache,
                                 __global kv_t *v_cache, int num_kv_heads, int head_size,
                                 int block_size, int num_blocks, float k_scale, float v_scale,
                                 __global volatile int *faults) {
  const int e = get_global_id(0);
  const size_t t = get_global_id(1);
  if (e >= num_kv_heads * head_size || t >= num_tokens) return; /* grid padding */
  const long slot = slot_mapping[t];
  if (slot < 0) return; /* padding */
  if (slot >= (long)num_blocks * block_size) {
    if (e == 0) atomic_or(faults, CLPA_FAULT_BAD_BLOCK);
    return;
  }
  const int h = e / head_size, d = e % head_size;
  const ulong blk = (ulong)(slot / block_size);
  const int off = (int)(slot % block_size);
  /* 64-bit offsets: block * stride passes 2^31 elements in large caches. */
  const ulong head_base = (blk * num_kv_heads + h) * (ulong)head_size * block_size;
  const ulong ki = head_base + ((ulong)(d / X) * block_size + off) * X + d % X;
  const ulong vi = head_base + (ulong)d * block_size + off;
  const ulong ks = key_offset + t * key_stride + e, vs = value_offset + t * value_stride + e;
#if KV_DTYPE <= 2
  if (src_dtype == KV_DTYPE) {
    ((__global bits_t *)k_cache)[ki] = ((__global const bits_t *)key)[ks];
    ((__global bits_t *)v_cache)[vi] = ((__global const bits_t *)value)[vs];
    return;
  }
#endif
  KV_STORE(src_load(key, ks, src_dtype), k_cache, ki, divisor_of(k_scale));
  KV_STORE(src_load(value, vs, src_dtype), v_cache, vi, divisor_of(v_scale));
}

/*
 * copy_blocks: copy whole blocks (src -> dst) in every slice of an arena,
 * a buffer holding num_slices equal slices (one layer's key or value cache
 * each, slice_words apart). Dtype-blind: a block is block_words 16-byte
 * words (a block of any dtype is a multiple of 16 bytes, since head_size
 * is a multiple of X).
 * Grid: (block_words, num_pairs, num_slices); any work-group size.
 * pairs: int64 [num_pairs, 2] (vLLM's block_mapping). src < 0 means no
 * copy; any other id outside [0, num_blocks) sets CLPA_FAULT_BAD_BLOCK and
 * the pair is skipped. Destinations must be distinct and never a source
 * (the host checks the pairs it uploads itself).
 */
__kernel void clpa_cache_copy_blocks(__global uint4 *arena, ulong first_word, ulong slice_words,
                                     ulong block_words, int num_blocks,
                                     __global const long *pairs, __global volatile int *faults) {
  const size_t w = get_global_id(0), p = get_global_id(1), s = get_global_id(2);
  const long src = pairs[2 * p], dst = pairs[2 * p + 1];
  if (src < 0) return;
  if (src >= num_blocks || dst < 0 || dst >= num_blocks) {
    if (w == 0 && s == 0) atomic_or(faults, CLPA_FAULT_BAD_BLOCK);
    return;
  }
  __global uint4 *base = arena + first_word + s * slice_words;
  base[(ulong)dst * block_words + w] = base[(ulong)src * block_words + w];
}

/*
 * zero: n 16-byte words of a new cache arena, so that a device that
 * allocates lazily commits the memory at creation. A kernel and not
 * clEnqueueFillBuffer: NVIDIA's fill (driver 580) silently leaves buffers
 * of 16 GiB and more unfilled (4-byte pattern: 2^32 elements), and its
 * caches are that large. Grid: any size (a grid-stride loop).
 */
__kernel void clpa_cache_zero(__global uint4 *p, ulong n) {
  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) p[i] = (uint4)(0u);
}
