/*
 * prefill_args.h — the parameters of prefill's kernels, in order, written
 * once: every path's kernel (prefill_tiles.cl's clpa_prefill_paged,
 * prefill_rows.cl's clpa_prefill_rows, prefill_mma.cl's clpa_prefill_mma)
 * takes PREFILL_ARG_LIST, whose buffers prefill.cl's banner shapes. Read
 * by both compilers, as decode_args.h (which says how): a part of the
 * prefill families (lib/kernels.c) and included by lib/prefill.c.
 */
#ifndef CLPA_PREFILL_ARGS_H
#define CLPA_PREFILL_ARGS_H

#define PREFILL_ARG_LIST(ARG, SEP)         \
  ARG(GLOBAL, io_t, out) SEP               \
  ARG(GLOBAL, float, lse) SEP              \
  ARG(GLOBAL_CONST, io_t, q) SEP           \
  ARG(VALUE, ulong, q_stride) SEP          \
  ARG(GLOBAL_CONST, kv_t, k_cache) SEP     \
  ARG(GLOBAL_CONST, kv_t, v_cache) SEP     \
  ARG(VALUE, ulong, block_stride) SEP      \
  ARG(VALUE, ulong, head_stride) SEP       \
  ARG(GLOBAL_CONST, int, block_tables) SEP \
  ARG(VALUE, int, max_blocks_per_seq) SEP  \
  ARG(GLOBAL_CONST, int, seq_info) SEP     \
  ARG(GLOBAL_CONST, int, work) SEP         \
  ARG(VALUE, int, num_blocks) SEP          \
  ARG(VALUE, int, num_heads) SEP           \
  ARG(VALUE, int, num_kv_heads) SEP        \
  ARG(VALUE, float, scale) SEP             \
  ARG(VALUE, float, k_scale) SEP           \
  ARG(VALUE, float, v_scale) SEP           \
  ARG(GLOBAL_CONST, float, k_scales) SEP   \
  ARG(GLOBAL_CONST, float, v_scales) SEP   \
  ARG(GLOBAL_CONST, float, alibi) SEP      \
  ARG(VALUE, float, soft_cap) SEP          \
  ARG(VALUE, int, window) SEP              \
  ARG(GLOBAL_CONST, float, sinks) SEP      \
  ARG(VALUE, int, causal) SEP              \
  ARG(GLOBAL_VOLATILE, int, faults) SEP    \
  ARG(GLOBAL_CONST, uchar, block_mask) SEP \
  ARG(VALUE, int, mask_block) SEP          \
  ARG(VALUE, int, mask_qb) SEP             \
  ARG(VALUE, int, mask_kb) SEP             \
  ARG(GLOBAL, io_t, part_out) SEP          \
  ARG(GLOBAL, float, part_lse) SEP         \
  ARG(VALUE, int, split_keys)

/* prefill.cl's clpa_prefill_merge: the split items' partials into out and
 * lse (prefill.cl's banner). */
#define PREFILL_MERGE_ARG_LIST(ARG, SEP)   \
  ARG(GLOBAL, io_t, out) SEP               \
  ARG(GLOBAL, float, lse) SEP              \
  ARG(GLOBAL_CONST, io_t, part_out) SEP    \
  ARG(GLOBAL_CONST, float, part_lse) SEP   \
  ARG(GLOBAL_CONST, int, seq_info) SEP     \
  ARG(GLOBAL_CONST, int, groups) SEP       \
  ARG(VALUE, int, groups_at) SEP           \
  ARG(VALUE, int, num_heads) SEP           \
  ARG(VALUE, int, num_kv_heads)

#endif
