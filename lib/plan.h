/*
 * plan.h — inside lib/ only: what a clpa_plan holds (plan.c makes and runs
 * plans, plan_shared.c starts, describes and releases them; decode.c,
 * prefill.c, cascade.c and xattn.c fill and run their kind).
 */
#ifndef CLPA_LIB_PLAN_H
#define CLPA_LIB_PLAN_H

#include "decode_plan.h"

typedef enum plan_kind { PLAN_DECODE = 1, PLAN_PREFILL = 2, PLAN_CASCADE = 3, PLAN_XATTN = 4 } plan_kind;

struct xattn_state; /* xattn.c's: the checked params, the path and the kernels */

struct clpa_plan {
  clpa_context *ctx;
  plan_kind kind;
  clpa_kv_layout kv; /* the caches' shape the plan was made for */
  /* decode (and cascade's suffix): the planning params with their buffers
   * and host arrays cleared, the plan, the kernels */
  clpa_decode_params dp;
  decode_call dc;
  cl_kernel dk, reduce; /* reduce: v2 without the in-launch merge */
  cl_kernel dlist;      /* decode_mma.cl's clpa_decode_mma_list: a list the device makes */
  /* prefill (and cascade's prefix) */
  clpa_prefill_params pp;
  clpa_prefill_spec ps;
  int32_t total;       /* new tokens: the query's and output's rows */
  size_t tiles;        /* work items (row tiles and their split parts), 0: nothing to run */
  int32_t split_keys;  /* keys a split part, 0: none split */
  int64_t split_from;  /* split a decode row whose keys number more than this */
  size_t split_rows;   /* row tiles split (merge groups), and their parts (partial slots) */
  size_t split_slots;
  /* the leading decode rows on decode's kernel: its plan, their count and
   * context lengths (padded tables: a buffer of the plan's or the scratch's) */
  struct clpa_plan *dec;
  int32_t dec_rows;
  cl_mem dec_lens;
  cl_mem info, work;   /* the work list: the plan's own, or the context's scratch (one call) */
  int owns_lists;
  size_t mask_bytes;   /* the block mask's, 0: the plan has none */
  cl_kernel pk;
  cl_kernel mk;        /* prefill.cl's clpa_prefill_merge, where rows are split */
  /* cascade: the prefix and suffix plans, its own buffers and groups */
  struct clpa_plan *prefix, *suffix;
  cl_mem cascade_bufs[8];
  cl_kernel split;     /* blocks.cl's suffix view */
  int32_t num_groups, *group_starts;
  struct xattn_state *xattn; /* XAttention's estimation */
  /* its release, set with it: plan_shared.c frees it without calling up into xattn.c */
  void (*xattn_free)(struct xattn_state *);
};

/* Copies a params struct's per-layer fields (decode's or prefill's: the
 * names are shared) into a clpa_attn_inputs, and back. */
#define CLPA_INPUTS_OF(in, p)                                                                    \
  do {                                                                                           \
    clpa_attn_inputs_init(in);                                                                   \
    (in)->cache = (p)->cache, (in)->layer = (p)->layer, (in)->key_cache = (p)->key_cache;        \
    (in)->value_cache = (p)->value_cache, (in)->query = (p)->query, (in)->out = (p)->out;        \
    (in)->lse = (p)->lse, (in)->block_tables = (p)->block_tables, (in)->k_scale = (p)->k_scale;  \
    (in)->v_scale = (p)->v_scale, (in)->k_scale_buffer = (p)->k_scale_buffer;                    \
    (in)->v_scale_buffer = (p)->v_scale_buffer, (in)->alibi_slopes = (p)->alibi_slopes;          \
    (in)->sinks = (p)->sinks, (in)->num_wait_events = (p)->num_wait_events;                      \
    (in)->wait_events = (p)->wait_events, (in)->event = (p)->event;                              \
    (in)->num_page_indices = (p)->num_page_indices, (in)->page_indptr = (p)->page_indptr;        \
    (in)->page_indices = (p)->page_indices, (in)->last_page_len = (p)->last_page_len;            \
  } while (0)
#define CLPA_APPLY_INPUTS(p, in)                                                                 \
  do {                                                                                           \
    (p)->cache = (in)->cache, (p)->layer = (in)->layer, (p)->key_cache = (in)->key_cache;        \
    (p)->value_cache = (in)->value_cache, (p)->query = (in)->query, (p)->out = (in)->out;        \
    (p)->lse = (in)->lse, (p)->block_tables = (in)->block_tables, (p)->k_scale = (in)->k_scale;  \
    (p)->v_scale = (in)->v_scale, (p)->k_scale_buffer = (in)->k_scale_buffer;                    \
    (p)->v_scale_buffer = (in)->v_scale_buffer, (p)->alibi_slopes = (in)->alibi_slopes;          \
    (p)->sinks = (in)->sinks, (p)->num_wait_events = (in)->num_wait_events;                      \
    (p)->wait_events = (in)->wait_events, (p)->event = (in)->event;                              \
    (p)->num_page_indices = (in)->num_page_indices, (p)->page_indptr = (in)->page_indptr;        \
    (p)->page_indices = (in)->page_indices, (p)->last_page_len = (in)->last_page_len;            \
  } while (0)

/* What a fill makes beside the checked plan: nothing (the *_choice
 * calls), the kernels (a one-call op: prefill and decode then write their
 * work lists into the context's scratch), or the kernels
 * and a work list of the plan's own (clpa_plan_*). */
enum { PLAN_CHECK = 0, PLAN_KERNELS = 1, PLAN_OWN = 3 };

/* Each kind's plan into *pl (zeroed first; on failure what it got is
 * released) and its run. */
clpa_status clpa_decode_plan_fill(clpa_context *ctx, const clpa_decode_params *p, int make,
                                  clpa_plan *pl);
clpa_status clpa_decode_run(clpa_plan *pl, const clpa_attn_inputs *in);
/* A decode run whose rows have the lengths `lens` holds (int32 a row, the
 * host's): a padded table's context_lens; with a CSR table, a row whose
 * length is another faults CLPA_FAULT_BAD_CONTEXT_LEN and has none (a
 * mixed step's decode rows, which prefill's kernel checks so). */
clpa_status clpa_decode_run_lens(clpa_plan *pl, const clpa_attn_inputs *in, cl_mem lens);
clpa_status clpa_prefill_plan_fill(clpa_context *ctx, const clpa_prefill_params *p, int make,
                                   clpa_plan *pl);
clpa_status clpa_prefill_run(clpa_plan *pl, const clpa_attn_inputs *in);
clpa_status clpa_cascade_plan_fill(clpa_context *ctx, const clpa_cascade_params *p, int make,
                                   clpa_plan *pl);
clpa_status clpa_cascade_run(clpa_plan *pl, const clpa_attn_inputs *in);
clpa_status clpa_xattn_plan_fill(clpa_context *ctx, const clpa_xattn_params *p, clpa_plan *pl);
clpa_status clpa_xattn_run(clpa_plan *pl, const clpa_attn_inputs *in);

/* A fill's start: pl zeroed, ctx and the params p checked (not NULL). */
clpa_status clpa_plan_begin(clpa_context *ctx, const void *p, plan_kind kind, clpa_plan *pl);

/* Releases what pl holds (not pl itself); pl may be half filled. */
void clpa_plan_fini(clpa_plan *pl);

/* The run's caches into a (a->k, a->v, a->kv), refused unless they have
 * the plan's shape. */
clpa_status clpa_plan_caches(const clpa_plan *pl, const clpa_attn_inputs *in, clpa_attn *a);

/* Refuses a run's caches of another shape (dtype, block size, KV heads,
 * head size) than the plan's; their number of blocks may differ. */
clpa_status clpa_plan_same_shape(const clpa_plan *pl, const clpa_kv_layout *got);

/* An empty run: a marker that completes after the wait list, where the
 * caller wants an event. */
clpa_status clpa_run_nothing(clpa_context *ctx, const clpa_attn_inputs *in);

#endif
