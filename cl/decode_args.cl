/*
 * decode_args.cl — the arguments every decode kernel takes: decode.cl's
 * clpa_decode_paged, decode_mma.cl's clpa_decode_mma and decode_rows.cl's
 * clpa_decode_rows. Part of the three decode families (lib/kernels.c),
 * after kv.cl (io_t, kv_t); lib/decode.c sets them once.
 *
 * part_counts (a counter a work-group row: num_seqs x work-groups a
 * sequence, zero between calls) is v2's in the work-group kernels
 * (decode.cl, decode_mma.cl): the partitions of a row count themselves
 * done there, and the last one merges them (decode_merge.cl).
 */
#define DECODE_ARGS                                                                             \
  __global io_t *out, __global float *lse, __global float *tmp_out, __global float *max_logits, \
      __global float *exp_sums, __global const io_t *q, ulong q_stride,                         \
      __global const kv_t *k_cache, __global const kv_t *v_cache, ulong block_stride,           \
      ulong head_stride, __global const int *block_tables, int max_blocks_per_seq,              \
      __global const int *context_lens, int max_context_len, int num_blocks, int num_heads,     \
      int num_kv_heads, float scale, float k_scale, float v_scale,                              \
      __global const float *k_scales, __global const float *v_scales,                           \
      __global const float *alibi, float soft_cap, int window, __global const float *sinks,     \
      int max_parts, int logits_stride, __global volatile int *faults, __local float *logits, \
      __global volatile int *part_counts
