/*
 * xattn_args.h — the parameters of XAttention's kernels, in order, written
 * once: XATTN_STATS_ARG_LIST (xattn.cl's clpa_xattn_stats, phase 1),
 * XATTN_STATS_MMA_ARG_LIST (xattn_mma.cl's clpa_xattn_stats_mma, phase 1
 * on tensor cores: q_direct where the other has stride and bs),
 * XATTN_MERGE_ARG_LIST, XATTN_MASS_ARG_LIST and XATTN_SELECT_ARG_LIST
 * (xattn.cl's phases 2 to 4); xattn.cl's banner shapes the buffers. Read
 * by both compilers, as decode_args.h (which says how): a part of the
 * xattn and xattn_mma families (lib/kernels.c) and included by
 * lib/xattn.c.
 */
#ifndef CLPA_XATTN_ARGS_H
#define CLPA_XATTN_ARGS_H

#define XATTN_STATS_ARG_LIST(ARG, SEP) \
  ARG(GLOBAL, float, stat_m) SEP       \
  ARG(GLOBAL, float, stat_l) SEP       \
  ARG(GLOBAL, float2, bstat) SEP       \
  ARG(GLOBAL_CONST, io_t, q) SEP       \
  ARG(VALUE, ulong, q_stride) SEP      \
  ARG(GLOBAL_CONST, kv_t, k_cache) SEP \
  ARG(VALUE, ulong, block_stride) SEP  \
  ARG(VALUE, ulong, head_stride) SEP   \
  ARG(GLOBAL_CONST, int, table) SEP    \
  ARG(VALUE, int, num_blocks) SEP      \
  ARG(VALUE, int, num_kv_heads) SEP    \
  ARG(VALUE, int, qpk) SEP             \
  ARG(VALUE, int, stride) SEP          \
  ARG(VALUE, float, scale) SEP         \
  ARG(VALUE, int, num_q) SEP           \
  ARG(VALUE, int, rows) SEP            \
  ARG(VALUE, int, row0) SEP            \
  ARG(VALUE, int, chunk_cols) SEP      \
  ARG(VALUE, int, bs) SEP              \
  ARG(VALUE, int, k_blocks) SEP        \
  ARG(VALUE, int, head0) SEP           \
  ARG(VALUE, int, rbase) SEP           \
  ARG(VALUE, int, rend) SEP            \
  ARG(GLOBAL_VOLATILE, int, faults)

#define XATTN_STATS_MMA_ARG_LIST(ARG, SEP) \
  ARG(GLOBAL, float, stat_m) SEP           \
  ARG(GLOBAL, float, stat_l) SEP           \
  ARG(GLOBAL, float2, bstat) SEP           \
  ARG(GLOBAL_CONST, io_t, q) SEP           \
  ARG(VALUE, ulong, q_stride) SEP          \
  ARG(VALUE, int, q_direct) SEP            \
  ARG(GLOBAL_CONST, kv_t, k_cache) SEP     \
  ARG(VALUE, ulong, block_stride) SEP      \
  ARG(VALUE, ulong, head_stride) SEP       \
  ARG(GLOBAL_CONST, int, table) SEP        \
  ARG(VALUE, int, num_blocks) SEP          \
  ARG(VALUE, int, qpk) SEP                 \
  ARG(VALUE, float, scale) SEP             \
  ARG(VALUE, int, num_q) SEP               \
  ARG(VALUE, int, rows) SEP                \
  ARG(VALUE, int, row0) SEP                \
  ARG(VALUE, int, chunk_cols) SEP          \
  ARG(VALUE, int, k_blocks) SEP            \
  ARG(VALUE, int, head0) SEP               \
  ARG(VALUE, int, rbase) SEP               \
  ARG(VALUE, int, rend) SEP                \
  ARG(GLOBAL_VOLATILE, int, faults)

#define XATTN_MERGE_ARG_LIST(ARG, SEP) \
  ARG(GLOBAL, float, stat_m) SEP       \
  ARG(GLOBAL, float, stat_l) SEP       \
  ARG(VALUE, int, num_chunks) SEP      \
  ARG(VALUE, int, rows) SEP            \
  ARG(VALUE, int, head0) SEP           \
  ARG(VALUE, int, rbase)

#define XATTN_MASS_ARG_LIST(ARG, SEP)  \
  ARG(GLOBAL, float, mass) SEP         \
  ARG(GLOBAL_CONST, float, stat_m) SEP \
  ARG(GLOBAL_CONST, float, stat_l) SEP \
  ARG(VALUE, int, num_chunks) SEP      \
  ARG(GLOBAL_CONST, float2, bstat) SEP \
  ARG(VALUE, int, rows) SEP            \
  ARG(VALUE, int, row0) SEP            \
  ARG(VALUE, int, bs) SEP              \
  ARG(VALUE, int, diag0) SEP           \
  ARG(VALUE, int, q_blocks) SEP        \
  ARG(VALUE, int, head0) SEP           \
  ARG(VALUE, int, rbase) SEP           \
  ARG(VALUE, int, rend)

/* clpa_xattn_select: a work-group of XSEL_THREADS a query block, which
 * sorts up to XSEL_KEYS candidate blocks in local memory (18 KiB); a
 * query block with more is selected by one work-item
 * (docs/decisions/0040-xattn-select-sort.md). */
#define XSEL_THREADS 128
#define XSEL_KEYS 2048

#define XATTN_SELECT_ARG_LIST(ARG, SEP) \
  ARG(GLOBAL, uchar, mask) SEP          \
  ARG(GLOBAL_CONST, float, mass) SEP    \
  ARG(VALUE, int, k_blocks) SEP         \
  ARG(VALUE, int, diag0) SEP            \
  ARG(VALUE, float, tau) SEP            \
  ARG(VALUE, int, keep_all)

#endif
