/*
 * block_mask.h — block-sparse prefill's coverage rule. Not installed.
 */
#ifndef CLPA_HOST_BLOCK_MASK_H
#define CLPA_HOST_BLOCK_MASK_H

#include <stdint.h>

/* Block-sparse prefill's coverage rule, one place for clpa_prefill and its
 * reference: the first sequence (cu_seqlens_q / cached_lens) with new
 * tokens whose last query or last key falls past mask_q_blocks /
 * mask_k_blocks blocks of mask_block (> 0) tokens, or -1 when the mask
 * covers them all. */
int32_t clpa_block_mask_uncovered(int32_t num_seqs, const int32_t *cu_seqlens_q,
                                  const int32_t *cached_lens, int32_t mask_block,
                                  int32_t mask_q_blocks, int32_t mask_k_blocks);

#endif
