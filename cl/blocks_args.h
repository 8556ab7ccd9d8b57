/*
 * blocks_args.h — the parameters of blocks.cl's kernels, in order, written
 * once: BLOCKS_COPY_ARG_LIST (clpa_blocks_copy), BLOCKS_ZERO_ARG_LIST
 * (clpa_blocks_zero) and BLOCKS_CASCADE_SPLIT_ARG_LIST
 * (clpa_blocks_cascade_split); blocks.cl's banners shape the buffers.
 * Read by both compilers, as decode_args.h (which says how): a part of the
 * blocks family (lib/kernels.c) and included by lib/cache_ops.c (the
 * copy), lib/cache.c (the zeroing) and lib/cascade.c (the split).
 */
#ifndef CLPA_BLOCKS_ARGS_H
#define CLPA_BLOCKS_ARGS_H

#define BLOCKS_COPY_ARG_LIST(ARG, SEP) \
  ARG(GLOBAL, uint4, arena) SEP        \
  ARG(VALUE, ulong, first_word) SEP    \
  ARG(VALUE, ulong, slice_words) SEP   \
  ARG(VALUE, ulong, block_words) SEP   \
  ARG(VALUE, int, num_blocks) SEP      \
  ARG(GLOBAL_CONST, long, pairs) SEP   \
  ARG(GLOBAL_VOLATILE, int, faults)

#define BLOCKS_ZERO_ARG_LIST(ARG, SEP) \
  ARG(GLOBAL, uint4, p) SEP            \
  ARG(VALUE, ulong, n)

#define BLOCKS_CASCADE_SPLIT_ARG_LIST(ARG, SEP) \
  ARG(GLOBAL_CONST, int, tables) SEP            \
  ARG(GLOBAL_CONST, int, lens) SEP              \
  ARG(VALUE, int, max_context_len) SEP          \
  ARG(GLOBAL_CONST, int, shared) SEP            \
  ARG(VALUE, int, max_blocks) SEP               \
  ARG(VALUE, int, block_size) SEP               \
  ARG(VALUE, int, num_heads) SEP                \
  ARG(GLOBAL, int, suffix_tables) SEP           \
  ARG(GLOBAL, int, suffix_lens) SEP             \
  ARG(GLOBAL, float, prefix_lse) SEP            \
  ARG(GLOBAL_VOLATILE, int, faults)

#endif
