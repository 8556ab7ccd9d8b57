/*
 * cache_args.h — the parameters of cache.cl's clpa_cache_reshape, in
 * order, written once (CACHE_RESHAPE_ARG_LIST); cache.cl's banner shapes
 * the buffers. Read by both compilers, as decode_args.h (which says how):
 * a part of the cache family (lib/kernels.c) and included by
 * lib/cache_ops.c. cache.cl's clpa_cache_contract, a probe that only
 * tests/test_codes.c launches, keeps its own three parameters.
 */
#ifndef CLPA_CACHE_ARGS_H
#define CLPA_CACHE_ARGS_H

#define CACHE_RESHAPE_ARG_LIST(ARG, SEP)    \
  ARG(GLOBAL_CONST, void, key) SEP          \
  ARG(VALUE, ulong, key_offset) SEP         \
  ARG(VALUE, ulong, key_stride) SEP         \
  ARG(GLOBAL_CONST, void, value) SEP        \
  ARG(VALUE, ulong, value_offset) SEP       \
  ARG(VALUE, ulong, value_stride) SEP       \
  ARG(VALUE, int, src_dtype) SEP            \
  ARG(VALUE, int, num_tokens) SEP           \
  ARG(GLOBAL_CONST, long, slot_mapping) SEP \
  ARG(GLOBAL, kv_t, k_cache) SEP            \
  ARG(GLOBAL, kv_t, v_cache) SEP            \
  ARG(VALUE, int, num_kv_heads) SEP         \
  ARG(VALUE, int, head_size) SEP            \
  ARG(VALUE, int, block_size) SEP           \
  ARG(VALUE, int, num_blocks) SEP           \
  ARG(VALUE, ulong, block_stride) SEP       \
  ARG(VALUE, float, k_scale) SEP            \
  ARG(VALUE, float, v_scale) SEP            \
  ARG(GLOBAL_VOLATILE, int, faults)

#endif
