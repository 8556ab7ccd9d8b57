/*
 * prefill_mixed.h — inside lib/ only: a mixed step's decode rows in a
 * clpa_prefill plan (prefill_mixed.c): their keys split into parts that a
 * merge launch combines, or the leading ones on a decode plan of their own
 * (docs/decisions/0042-prefill-mixed-step-splits.md). prefill.c calls these
 * while it fills a plan and makes its lists.
 */
#ifndef CLPA_LIB_PREFILL_MIXED_H
#define CLPA_LIB_PREFILL_MIXED_H

#include "plan.h"

/* The keys sequence s's rows see together, [*lo, *end). */
void clpa_prefill_seq_keys(const clpa_prefill_params *p, int32_t s, int64_t *lo, int64_t *end);

/* The parts sequence s's keys are split into under pl's rule (1: none). */
int64_t clpa_prefill_seq_parts(const clpa_plan *pl, const clpa_prefill_params *p, int32_t s,
                               int qpk);

/* The split rule into pl (split_keys, split_from, split_rows, split_slots;
 * the parts' extra work items added to pl->tiles), for the sequences from
 * pl->dec_rows on. Returns CLPA_OK or CLPA_ERR_UNSUPPORTED (partials past
 * the device's largest buffer). */
clpa_status clpa_prefill_plan_splits(clpa_context *ctx, const clpa_prefill_params *p, int qpk,
                                     clpa_plan *pl);

/* Whether the decode rows from `from` on make half the work items of
 * `rows` rows or more (the mma path then takes the tuning row's mixed_rows). */
int clpa_prefill_decode_rows_lead(const clpa_prefill_params *p, int32_t from, int qpk, int rows);

/* The leading decode rows' decode plan (made as `make` says) into pl->dec
 * and their count into pl->dec_rows, where decode_rows_kernel or the
 * tuning row's rule says; path: the call's (its precision follows).
 * Returns CLPA_OK, or decode's refusal where forced, or
 * CLPA_ERR_OUT_OF_MEMORY. */
clpa_status clpa_prefill_plan_decode_rows(clpa_context *ctx, const clpa_prefill_params *p,
                                          int path, int make, clpa_plan *pl);

#endif
