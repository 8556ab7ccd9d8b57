/*
 * decode_args.h — the parameters of decode's kernels, in order, written
 * once: DECODE_ARG_LIST for the three paths (decode.cl's
 * clpa_decode_paged, decode_mma.cl's clpa_decode_mma, decode_rows.cl's
 * clpa_decode_rows), REDUCE_ARG_LIST for reduce.cl's clpa_decode_reduce.
 * Read by both compilers: a part of the decode and reduce families
 * (lib/kernels.c), where common.cl's KERNEL_PARAMS writes each kernel's
 * parameter list from it, and included by lib/decode.c, where
 * lib/internal.h's CLPA_ARG_SLOT and CLPA_PARAM_OF make the positions it
 * fills by name and the sizes clpa_enqueue checks. So the host's
 * arguments cannot drift from the kernel's parameters: a missing one or
 * one of the wrong size fails the launch with its name.
 *
 * An entry is ARG(kind, type, name): kind GLOBAL, GLOBAL_CONST,
 * GLOBAL_VOLATILE (a buffer of type), LOCAL (local memory of type: a size,
 * no value) or VALUE (a scalar: int, ulong, float). SEP separates them.
 * Defines only: nothing either compiler would reject.
 *
 * part_counts (a counter a work-group row: num_seqs x work-groups a
 * sequence, zero between calls) is v2's in the work-group kernels
 * (decode.cl, decode_mma.cl): the partitions of a row count themselves
 * done there, and the last one merges them (decode_merge.cl).
 *
 * work (decode_mma.cl; NULL elsewhere and for a rectangle grid) is a plan's
 * list of busy (sequence, partition) pairs, int4 {seq, part, the
 * sequence's partitions, 0} a work-group (lib/decode.c).
 */
#ifndef CLPA_DECODE_ARGS_H
#define CLPA_DECODE_ARGS_H

#define DECODE_ARG_LIST(ARG, SEP)          \
  ARG(GLOBAL, io_t, out) SEP               \
  ARG(GLOBAL, float, lse) SEP              \
  ARG(GLOBAL, float, tmp_out) SEP          \
  ARG(GLOBAL, float, max_logits) SEP       \
  ARG(GLOBAL, float, exp_sums) SEP         \
  ARG(GLOBAL_CONST, io_t, q) SEP           \
  ARG(VALUE, ulong, q_stride) SEP          \
  ARG(GLOBAL_CONST, kv_t, k_cache) SEP     \
  ARG(GLOBAL_CONST, kv_t, v_cache) SEP     \
  ARG(VALUE, ulong, block_stride) SEP      \
  ARG(VALUE, ulong, head_stride) SEP       \
  ARG(GLOBAL_CONST, int, block_tables) SEP \
  ARG(VALUE, int, max_blocks_per_seq) SEP  \
  ARG(GLOBAL_CONST, int, context_lens) SEP \
  ARG(VALUE, int, max_context_len) SEP     \
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
  ARG(VALUE, int, max_parts) SEP           \
  ARG(VALUE, int, logits_stride) SEP       \
  ARG(GLOBAL_VOLATILE, int, faults) SEP    \
  ARG(LOCAL, float, logits) SEP            \
  ARG(GLOBAL_VOLATILE, int, part_counts) SEP \
  ARG(GLOBAL_CONST, int, work)

/* decode_mma.cl's clpa_decode_mma_list (a plan without host lengths, lib/decode.c): the list
 * of `entries` int4 {seq, part, the sequence's partitions, chunks a partition} (void entries
 * {0, 0, 0, -1} after them) that clpa_decode_mma reads as `work`, from the lengths. */
#define DECODE_LIST_ARG_LIST(ARG, SEP)     \
  ARG(GLOBAL, int, work) SEP               \
  ARG(VALUE, int, num_seqs) SEP            \
  ARG(VALUE, int, entries) SEP             \
  ARG(VALUE, int, want) SEP                \
  ARG(VALUE, int, groups) SEP              \
  ARG(GLOBAL_CONST, int, context_lens) SEP \
  ARG(VALUE, int, max_context_len) SEP     \
  ARG(VALUE, int, window)

/* reduce.cl's buffers and their shapes: its banner. */
#define REDUCE_ARG_LIST(ARG, SEP)          \
  ARG(GLOBAL, io_t, out) SEP               \
  ARG(GLOBAL, float, lse) SEP              \
  ARG(GLOBAL_CONST, float, max_logits) SEP \
  ARG(GLOBAL_CONST, float, exp_sums) SEP   \
  ARG(GLOBAL_CONST, float, tmp_out) SEP    \
  ARG(GLOBAL_CONST, int, context_lens) SEP \
  ARG(VALUE, int, max_context_len) SEP     \
  ARG(VALUE, int, num_heads) SEP           \
  ARG(VALUE, int, max_parts) SEP           \
  ARG(GLOBAL_CONST, float, sinks)

#endif
