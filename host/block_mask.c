/* block_mask.c — block-sparse prefill's coverage rule (see block_mask.h). */
#include "block_mask.h"

int32_t clpa_block_mask_uncovered(int32_t num_seqs, const int32_t *cu_seqlens_q,
                                  const int32_t *cached_lens, int32_t mask_block,
                                  int32_t mask_q_blocks, int32_t mask_k_blocks) {
  for (int32_t s = 0; s < num_seqs; s++) {
    const int64_t n = (int64_t)cu_seqlens_q[s + 1] - cu_seqlens_q[s], len = cached_lens[s] + n;
    if (n > 0 && ((n - 1) / mask_block >= mask_q_blocks || (len - 1) / mask_block >= mask_k_blocks))
      return s;
  }
  return -1;
}
