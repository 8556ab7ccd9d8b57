/*
 * decode_plan.h — inside lib/ only: what one clpa_decode call works on
 * (decode_plan.c plans it, decode.c launches it).
 */
#ifndef CLPA_LIB_DECODE_PLAN_H
#define CLPA_LIB_DECODE_PLAN_H

#include "internal.h"

/* What one call works on, resolved and checked. */
typedef struct decode_call {
  clpa_attn a;          /* caches, layout, query, options (attention.c) */
  int v2, partition, heads_per_group, sg, max_parts;
  size_t partials;      /* v2: num_seqs x num_heads x max_parts (times head_size floats: checked
                           to fit size_t) */
  int mma;              /* decode_mma.cl's tensor-core kernel */
  int rows;             /* decode_rows.cl's CPU kernel */
  int key_vectors;      /* rows: key vectors a query load (TG there) */
  int logits_stride;    /* floats of local logits per head */
  int threads;          /* work-group size: DECODE_THREADS, or the mma plan's */
  int chunk;            /* mma: tokens a chunk (mma_chunk_for) */
  int pipe;             /* mma: the next chunk loaded while one is computed (mma_pipe) */
  int merge;            /* v2: the work-group kernel merges the partitions, else reduce.cl */
  int maxnreg;          /* NVIDIA: registers a work-item at most (0: the compiler's choice) */
  int64_t work_pairs;   /* mma v2: busy (sequence, partition) pairs a plan's list holds, 0: the
                           rectangle grid (decode.c makes the list for a plan and a one call) */
  cl_mem work;          /* that list (the plan's own), or NULL */
  int list_entries;     /* mma v2 without host lengths: the entries of the list decode_mma.cl's
                           clpa_decode_mma_list makes each run (0: none), the busy work-groups */
  int list_want;        /* it aims at (host/decode_planner.h) */
} decode_call;

/* The path, v1 or v2, the partition, the query heads a work-group and the
 * work-group's shape for p, whose caches, layout and buffers are checked
 * (c->a resolved): host/decode_planner.c has each rule, docs/decisions/
 * what measured it.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG or CLPA_ERR_UNSUPPORTED (named). */
clpa_status clpa_decode_plan(clpa_context *ctx, const clpa_decode_params *p, decode_call *c);

/* c's list of c->work_pairs busy (sequence, partition) pairs from p's host
 * lengths (host/decode_planner.h's clpa_decode_work_list): 4 words a pair
 * into out. */
void clpa_decode_plan_list(const clpa_context *ctx, const clpa_decode_params *p,
                           const decode_call *c, int32_t *out);

#endif
