/*
 * pages.cl — where a kernel finds a sequence's blocks and its length: one
 * set of helpers for both page tables, picked by CLPA_PAGE_TABLE (a
 * clpa_codes.h page-table code). Part of decode's, reduce's and
 * prefill's families (lib/kernels.c), after their argument lists, whose
 * parameters its macros name.
 *
 *   PAGE_PARAMS              after KERNEL_PARAMS(list): the table's own parameters
 *   page_row                 one sequence's row of the table
 *   PAGE_ROW(seq)            sequence seq's row
 *   PAGE_OF(row, i)          the block id of its logical block i >= 0
 *   PAGE_OF_CLAMPED(row, i, max_blocks)  the same, read inside the row
 *                            for any i >= 0 (for reads ahead of the length)
 *   SEQ_LEN(seq)             its length as the device holds it (decode)
 *   PAGE_LEN(row, seq)       the same, where its row is at hand
 *   PAGE_ROW_OF_LEN(seq, n)  prefill: its row, for a length n the host planned
 *
 * Padded (CLPA_CODE_PAGE_TABLE_PADDED): block_tables [num_seqs,
 * max_blocks_per_seq] and context_lens [num_seqs]; a row is a pointer into
 * the table and an entry one load, the code the kernels had before CSR
 * came (its IR is unchanged). Every entry a kernel reads lies in the row.
 *
 * CSR (CLPA_CODE_PAGE_TABLE_CSR, FlashInfer's page table; pages_args.h):
 * sequence s has the pages page_indices[page_indptr[s] .. page_indptr[s +
 * 1]) and, when it has any, (pages - 1) * BLOCK_SIZE + last_page_len[s]
 * tokens (none without pages; last_page_len[s] is then not read). A row
 * whose page_indptr entries fall outside [0, num_page_indices) or
 * decrease, or whose last_page_len[s] is outside [1, BLOCK_SIZE], has no
 * length (-1): decode then sets CLPA_FAULT_BAD_CONTEXT_LEN and takes it as
 * 0, as it takes a bad context_lens entry. PAGE_OF reads only inside the
 * row (-1 past it, which a kernel masks as any bad id), so no bad table
 * sends a read outside page_indices. Prefill's lengths are the host's
 * (cached_lens + new tokens): a row whose length is another sets
 * CLPA_FAULT_BAD_CONTEXT_LEN and gives no pages, so its keys are masked
 * (with CLPA_FAULT_BAD_BLOCK) as bad ids are. Decode's context_lens, NULL
 * from the API with a CSR table, holds those host lengths where a mixed
 * step's decode rows run on decode's kernel (lib/prefill.c): a row whose
 * length is another then has none, as a bad row.
 */
#ifndef CLPA_PAGE_TABLE
#error "CLPA_PAGE_TABLE: the page table, a clpa_codes.h page-table code; required"
#endif

#if CLPA_PAGE_TABLE == CLPA_CODE_PAGE_TABLE_PADDED
#define PAGE_PARAMS
typedef __global const int *page_row;
#define PAGE_ROW(seq) (block_tables + (size_t)(seq) * max_blocks_per_seq)
#define PAGE_OF(row, i) ((row)[i])
#define PAGE_OF_CLAMPED(row, i, max_blocks) ((row)[min((i), (max_blocks) - 1)])
#define SEQ_LEN(seq) (context_lens[seq])
#define PAGE_LEN(row, seq) (context_lens[seq])
#define PAGE_ROW_OF_LEN(seq, n) PAGE_ROW(seq)

#elif CLPA_PAGE_TABLE == CLPA_CODE_PAGE_TABLE_CSR
#ifndef CLPA_BLOCK_SIZE
#error "CLPA_BLOCK_SIZE: tokens a cache block (a CSR length counts pages in them); required"
#endif
#define PAGE_PARAMS , KERNEL_PARAMS(PAGE_ARG_LIST)
typedef struct page_row {
  __global const int *idx; /* the row's first entry */
  int count;               /* its pages; 0 for a bad row */
  int len;                 /* its tokens; -1 for a bad row */
} page_row;

/* Sequence seq's row, checked (the banner says how). The length is
 * computed in 64 bits: pages * BLOCK_SIZE can pass 2^31. */
inline page_row csr_row(__global const int *indptr, __global const int *indices, int num_indices,
                        __global const int *last, int seq) {
  page_row r = {indices, 0, -1};
  const int a = indptr[seq], b = indptr[seq + 1];
  if (a < 0 || b < a || b > num_indices) return r;
  r.idx = indices + a;
  if (b == a) {
    r.len = 0;
    return r;
  }
  const int l = last[seq];
  const long len = (long)(b - a - 1) * CLPA_BLOCK_SIZE + l;
  if (l >= 1 && l <= CLPA_BLOCK_SIZE && len <= INT_MAX) r.count = b - a, r.len = (int)len;
  return r;
}

/* Row r kept for a sequence of n tokens, else emptied with the fault bit. */
inline page_row csr_row_of_len(page_row r, int n, __global volatile int *faults) {
  if (r.len == n) return r;
  if (get_local_id(0) == 0) atomic_or(faults, CLPA_FAULT_BAD_CONTEXT_LEN);
  r.count = 0;
  return r;
}

/* Row r of sequence seq, bad (no pages, no length) where `lens` is given
 * and holds another length for it. */
inline page_row csr_row_as(page_row r, __global const int *lens, int seq) {
  if (lens && r.len != lens[seq]) r.count = 0, r.len = -1;
  return r;
}

#define CSR_ROW(seq) csr_row(page_indptr, page_indices, num_page_indices, last_page_len, (seq))
#define PAGE_ROW(seq) csr_row_as(CSR_ROW(seq), context_lens, (seq)) /* decode's families */
#define PAGE_OF(row, i) ((int)(i) < (row).count ? (row).idx[i] : -1)
#define PAGE_OF_CLAMPED(row, i, max_blocks) PAGE_OF(row, i)
#define SEQ_LEN(seq) (PAGE_ROW(seq).len)
#define PAGE_LEN(row, seq) ((row).len)
#define PAGE_ROW_OF_LEN(seq, n) csr_row_of_len(CSR_ROW(seq), (n), faults)

#else
#error "CLPA_PAGE_TABLE: not a page-table code"
#endif
