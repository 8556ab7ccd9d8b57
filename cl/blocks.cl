/*
 * blocks.cl — whole-block operations on the paged cache that need no
 * dtype: a block of any dtype is a whole number of 16-byte words (the
 * key layout's last dimension is 16 bytes). The copy is vLLM's
 * copy_blocks (csrc/cache_kernels.cu). Launched by lib/cache_ops.c and
 * lib/cache.c; checked by tests/test_cache_copy.c (against host copies),
 * tests/test_cache.c (zeroed arenas) and tests/test_cache_e2e.c.
 */

/*
 * copy_blocks: copy whole blocks (src -> dst) in every slice of an arena,
 * a buffer holding num_slices equal slices (one layer's key or value cache
 * each, slice_words apart). Dtype-blind: a block is block_words 16-byte
 * words (a block of any dtype is a multiple of 16 bytes, since head_size
 * is a multiple of 16 bytes).
 * Grid: (block_words, num_pairs, num_slices); any work-group size.
 * pairs: int64 [num_pairs, 2] (vLLM's block_mapping). src < 0 means no
 * copy; any other id outside [0, num_blocks) sets CLPA_FAULT_BAD_BLOCK and
 * the pair is skipped. Destinations must be distinct and never a source
 * (the host checks the pairs it uploads itself).
 */
__kernel void clpa_blocks_copy(KERNEL_PARAMS(BLOCKS_COPY_ARG_LIST)) {
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
__kernel void clpa_blocks_zero(KERNEL_PARAMS(BLOCKS_ZERO_ARG_LIST)) {
  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) p[i] = (uint4)(0u);
}

/*
 * cascade_split: the suffix view of a batch for cascade decode, after the
 * groups' prefix attention. Sequence s shares its first shared[s] table
 * entries with its group; its suffix table is the rest of its row,
 * shifted to the front (then -1), and its suffix context is what follows
 * the shared tokens. A context length that decode would refuse (outside
 * [0, max_context_len]) or one shorter than its shared part sets
 * CLPA_FAULT_BAD_CONTEXT_LEN and is taken as 0, as clpa_decode takes it:
 * an empty suffix, and the prefix's lse of every head of s set to -inf so
 * that the merge drops the prefix too. Grid: (max_blocks, num_seqs).
 * prefix_lse: float [num_seqs, num_heads].
 */
__kernel void clpa_blocks_cascade_split(KERNEL_PARAMS(BLOCKS_CASCADE_SPLIT_ARG_LIST)) {
  const int i = get_global_id(0), s = get_global_id(1), sh = shared[s];
  const size_t row = (size_t)s * max_blocks;
  suffix_tables[row + i] = i + sh < max_blocks ? tables[row + i + sh] : -1;
  if (i == 0) {
    const int len = lens[s];
    /* sh * block_size <= max_context_len: the host checks it */
    const int bad = len < 0 || len > max_context_len || len < sh * block_size;
    suffix_lens[s] = bad ? 0 : len - sh * block_size;
    if (bad) {
      atomic_or(faults, CLPA_FAULT_BAD_CONTEXT_LEN);
      for (int h = 0; h < num_heads; h++) prefix_lse[(size_t)s * num_heads + h] = -INFINITY;
    }
  }
}
