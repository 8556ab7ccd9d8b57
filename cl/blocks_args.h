/*
 * blocks_args.h — the parameters of blocks.cl's kernels, in order, written
 * once: BLOCKS_COPY_ARG_LIST (clpa_blocks_copy) and BLOCKS_ZERO_ARG_LIST
 * (clpa_blocks_zero); blocks.cl's banners shape the buffers. Read by both
 * compilers, as decode_args.h (which says how): a part of the blocks
 * family (lib/kernels.c) and included by lib/cache_ops.c (the copy) and
 * lib/cache.c (the zeroing).
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

#endif
