/*
 * pages_args.h — the CSR page table's kernel parameters (FlashInfer's
 * paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len), written
 * once for decode's, reduce's and prefill's kernels. A program built with
 * CLPA_PAGE_TABLE = CLPA_CODE_PAGE_TABLE_CSR takes them after its own
 * list (pages.cl's PAGE_PARAMS); a padded build (CLPA_CODE_PAGE_TABLE_PADDED)
 * does not have them, so its parameters, and its code, are those of
 * before. The host (lib/decode.c, lib/prefill.c) lists them after the
 * family's own and sets them only for a CSR program. Read by both
 * compilers, as decode_args.h (which says how). Defines only.
 *
 *   page_indptr       [num_seqs + 1] int32: sequence s's pages are
 *                     page_indices[page_indptr[s] .. page_indptr[s + 1])
 *   page_indices      [num_page_indices] int32: block ids
 *   num_page_indices  the entries page_indices holds
 *   last_page_len     [num_seqs] int32: tokens in s's last page, 1 .. BLOCK_SIZE
 */
#ifndef CLPA_PAGES_ARGS_H
#define CLPA_PAGES_ARGS_H

#define PAGE_ARG_LIST(ARG, SEP)            \
  ARG(GLOBAL_CONST, int, page_indptr) SEP  \
  ARG(GLOBAL_CONST, int, page_indices) SEP \
  ARG(VALUE, int, num_page_indices) SEP    \
  ARG(GLOBAL_CONST, int, last_page_len)

#endif
