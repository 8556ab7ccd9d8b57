/*
 * cache.cl — writing and copying the paged KV cache: the OpenCL port of
 * vLLM's reshape_and_cache (csrc/cache_kernels.cu).
 * Launched by lib/cache_ops.c. Checked by tests/test_cache_reshape.c
 * (reshape_and_cache against clpa_ref_reshape_and_cache + clpa_dtype_encode,
 * bit for bit) and tests/test_cache_e2e.c (under clpa_decode). The
 * dtype-blind block copies are in blocks.cl.
 *
 * Layouts (elements; X = 16 bytes / element of the cache dtype):
 *   key, value    rows of [num_tokens, row stride], token t's row at
 *                 offset + t * stride, head h at h * head_size in it
 *                 (a fused QKV buffer is one buffer with three offsets)
 *   slot_mapping  int64 [num_tokens]: block * block_size + offset; < 0 skips
 *   k_cache       split-key [num_blocks, num_kv_heads, head_size / X, block_size, X],
 *                 HND [num_blocks, num_kv_heads, block_size, head_size],
 *                 NHD [num_blocks, block_size, num_kv_heads, head_size]
 *   v_cache       split-key [num_blocks, num_kv_heads, head_size, block_size],
 *                 HND and NHD as k_cache (kv.cl's key_index, value_index)
 *
 * One block of one KV head in the split-key layout, where a token's
 * elements go:
 *
 *   key:    row j (dims jX .. jX+X-1):  | tok 0: X | tok 1: X | ... |   16 B per token, contiguous
 *   value:  row d (one dim):            | tok 0 | tok 1 | ... | tok B-1 |   one element per token
 *
 * (HND and NHD: a token's head_size elements are contiguous in both.)
 */
/* Element i of a key/value row of dtype dt (a clpa_codes.h code: f32,
 * f16 or bf16) as a float. The source dtype is a kernel argument, not a build
 * option: a uniform branch per element is cheaper than three times the
 * programs to build. */
inline float src_load(__global const void *p, ulong i, int dt) {
  if (dt == CLPA_CODE_F16) return vload_half(i, (__global const half *)p);
  if (dt == CLPA_CODE_BF16) return as_float((uint)((__global const ushort *)p)[i] << 16);
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
__kernel void clpa_cache_reshape(KERNEL_PARAMS(CACHE_RESHAPE_ARG_LIST)) {
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
  const int off = (int)(slot % block_size);
  const ulong head_stride = kv_head_stride(head_size, block_size);
  const ulong tile = kv_tile((ulong)(slot / block_size), h, block_stride, head_stride);
  const int ts = kv_token_stride(num_kv_heads, head_stride, block_size);
  const ulong ki = tile + key_index(d, off, block_size, ts);
  const ulong vi = tile + value_index(d, off, block_size, ts);
  const ulong ks = key_offset + t * key_stride + e, vs = value_offset + t * value_stride + e;
#if CLPA_KV_DTYPE <= CLPA_CODE_BF16
  if (src_dtype == CLPA_KV_DTYPE) {
    ((__global bits_t *)k_cache)[ki] = ((__global const bits_t *)key)[ks];
    ((__global bits_t *)v_cache)[vi] = ((__global const bits_t *)value)[vs];
    return;
  }
#endif
  KV_STORE(src_load(key, ks, src_dtype), k_cache, ki, divisor_of(k_scale));
  KV_STORE(src_load(value, vs, src_dtype), v_cache, vi, divisor_of(v_scale));
}

/*
 * contract: what this program sees of clpa_codes.h and of kv.cl, for
 * tests/test_codes.c to hold against the host (one work-item):
 *   out[0 .. 9)   the dtype codes, CLPA_CODE_DTYPE_COUNT and the fault bits
 *   out[9]        X for this program's CLPA_KV_DTYPE
 *   out[10 ..)    the index of every (kv head, tok, dim) of block 1 in this
 *                 program's CLPA_KV_LAYOUT (kv_tile + key_index), then the
 *                 same for values (value_index), head- then tok-major;
 *                 the first element of each 16-byte row through key_row16
 *                 (and value_row16 in HND and NHD) instead:
 *                 2 * num_kv_heads * block_size * head_size ints
 */
__kernel void clpa_cache_contract(__global int *out, int block_size, int head_size,
                                  int num_kv_heads, ulong block_stride) {
  const int codes[9] = {CLPA_CODE_F32,        CLPA_CODE_F16,
                        CLPA_CODE_BF16,       CLPA_CODE_FP8_E4M3,
                        CLPA_CODE_FP8_E5M2,   CLPA_CODE_DTYPE_COUNT,
                        CLPA_FAULT_BAD_BLOCK, CLPA_FAULT_BAD_CONTEXT_LEN,
                        CLPA_FAULT_LANES};
  for (int i = 0; i < 9; i++) out[i] = codes[i];
  out[9] = X;
  const int n = num_kv_heads * block_size * head_size;
  __global int *keys = out + 10, *values = keys + n;
  const ulong head_stride = kv_head_stride(head_size, block_size);
  const int ts = kv_token_stride(num_kv_heads, head_stride, block_size);
  for (int h = 0; h < num_kv_heads; h++) {
    const int tile = (int)kv_tile(1, h, block_stride, head_stride);
    for (int t = 0; t < block_size; t++)
      for (int d = 0; d < head_size; d++) {
        const int i = (h * block_size + t) * head_size + d;
        keys[i] = tile + key_index(d, t, block_size, ts);
        values[i] = tile + value_index(d, t, block_size, ts);
        if (d % X == 0) { /* a row's first element through the 16-byte forms */
          keys[i] = tile + key_row16(d / X, t, block_size, ts) * X;
#if !KV_SPLIT_KEY
          values[i] = tile + value_row16(d / X, t, ts) * X;
#endif
        }
      }
  }
}
