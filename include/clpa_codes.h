/*
 * clpa_codes.h — the numbers the C API and the OpenCL C kernels share.
 *
 * This one file is read by both compilers: the library includes it
 * through clpa_base.h, and prepends it to every kernel program it builds
 * (lib/program.c), so a dtype code or a fault bit is written down once.
 * It holds #defines only, nothing either language would reject.
 * tests/test_codes.c checks on a device that both sides see the same
 * values.
 */
#ifndef CLPA_CODES_H
#define CLPA_CODES_H

/* Storage dtypes (clpa_dtype in clpa_base.h takes its values from here).
 * A kernel program gets the cache's as CLPA_KV_DTYPE and the query's and
 * output's as CLPA_IO_DTYPE. */
#define CLPA_CODE_F32 0
#define CLPA_CODE_F16 1
#define CLPA_CODE_BF16 2
#define CLPA_CODE_FP8_E4M3 3
#define CLPA_CODE_FP8_E5M2 4
#define CLPA_CODE_DTYPE_COUNT 5

/* Paged cache layouts (clpa_kv_layout_kind in clpa_layout.h takes its
 * values from here). A kernel program that reads or writes the cache gets
 * the layout's as CLPA_KV_LAYOUT. */
#define CLPA_CODE_LAYOUT_SPLIT_KEY 0 /* vLLM's original: keys [.., head_size / x, block_size, x] */
#define CLPA_CODE_LAYOUT_HND 1       /* [blocks, kv_heads, block_size, head_size] (FlashInfer HND) */
#define CLPA_CODE_LAYOUT_NHD 2       /* [blocks, block_size, kv_heads, head_size] (vLLM, FA, FlashInfer NHD) */
#define CLPA_CODE_LAYOUT_COUNT 3

/* Page tables (clpa_page_table in clpa.h takes its values from here). A
 * decode or prefill program gets the call's as CLPA_PAGE_TABLE. */
#define CLPA_CODE_PAGE_TABLE_PADDED 0 /* block_tables [num_seqs, max_blocks_per_seq] + context_lens */
#define CLPA_CODE_PAGE_TABLE_CSR 1    /* page_indptr, page_indices, last_page_len (FlashInfer's) */

/* Fault bits the kernels OR into the context's fault word when they meet
 * bad data that lives on the device (clpa_context_check_faults reads it). */
#define CLPA_FAULT_BAD_BLOCK 1       /* a block table entry, slot or copied block outside the cache */
#define CLPA_FAULT_BAD_CONTEXT_LEN 2 /* a context length < 0 or > max_context_len */
#define CLPA_FAULT_LANES 4           /* the device's subgroups did not match the lane groups */

#endif /* CLPA_CODES_H */
