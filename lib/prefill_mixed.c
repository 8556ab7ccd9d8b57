/*
 * prefill_mixed.c — a mixed step's decode rows in a clpa_prefill plan
 * (prefill_mixed.h): which decode rows split and into what parts, and which
 * leading ones run on a decode plan of their own, by the tuning row's
 * rules (docs/decisions/0042-prefill-mixed-step-splits.md).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prefill_mixed.h"

/* The keys sequence s's rows see together, [*lo, *end): to its last
 * token's (causal or not), from its first token's window start (the
 * kernels' tile_keys for a tile of all its rows). */
void clpa_prefill_seq_keys(const clpa_prefill_params *p, int32_t s, int64_t *lo, int64_t *end) {
  const int64_t c = p->cached_lens[s], n = p->cu_seqlens_q[s + 1] - p->cu_seqlens_q[s];
  const int64_t w = p->sliding_window > 0 ? c - p->sliding_window + 1 : 0;
  *end = c + n, *lo = w > 0 ? w : 0;
}

/* Whether sequence s is a decode row: new tokens whose rows fill at most
 * one work item, the whole of which a split part then walks. */
static int decode_row(const clpa_prefill_params *p, int32_t s, int qpk, int rows) {
  const int64_t n = p->cu_seqlens_q[s + 1] - p->cu_seqlens_q[s];
  return n > 0 && n * qpk <= rows;
}

/* The parts sequence s's keys are split into under pl's rule (1: none):
 * one a multiple of split_keys, from its first key's. */
int64_t clpa_prefill_seq_parts(const clpa_plan *pl, const clpa_prefill_params *p, int32_t s,
                               int qpk) {
  if (!pl->split_keys || !decode_row(p, s, qpk, pl->ps.rows)) return 1;
  int64_t lo, end;
  clpa_prefill_seq_keys(p, s, &lo, &end);
  const int64_t P = pl->split_keys;
  if (end - lo <= P || end - lo <= pl->split_from) return 1;
  return (end - 1) / P - lo / P + 1;
}

/* The split rule into pl (split_keys, split_from, split_rows,
 * split_slots), and the parts' extra work items added to pl->tiles.
 * Forced (split_keys > 0): every decode row that spans more than one part.
 * Auto (0), where the tuning row says (GPUs measured, no block mask): parts
 * of the decode rows' fair share of the call's work-groups, of at least
 * the row's minimum, for decode rows that would otherwise walk more keys
 * than any other work item (splitting a row shorter than the call's
 * longest walk does not shorten the call, and adds a merge)
 * (docs/decisions/0042-prefill-mixed-step-splits.md). */
clpa_status clpa_prefill_plan_splits(clpa_context *ctx, const clpa_prefill_params *p, int qpk,
                                     clpa_plan *pl) {
  pl->split_keys = 0, pl->split_from = 0, pl->split_rows = pl->split_slots = 0;
  const clpa_prefill_tuning *t = &ctx->prefill_tuning;
  if (p->split_keys < 0 || p->block_mask) return CLPA_OK;
  if (p->split_keys > 0) {
    pl->split_keys = p->split_keys;
  } else {
    if (ctx->info.is_cpu || t->split_groups_per_cu <= 0) return CLPA_OK;
    double work = 0.0;
    int64_t other = 0; /* the longest walk of the other work items */
    for (int32_t s = pl->dec_rows; s < p->num_seqs; s++) {
      int64_t lo, end;
      clpa_prefill_seq_keys(p, s, &lo, &end);
      if (decode_row(p, s, qpk, pl->ps.rows)) work += (double)(end - lo);
      else if (end > lo && end - lo > other) other = end - lo;
    }
    const double groups = (double)(ctx->info.compute_units ? ctx->info.compute_units : 1) *
                          t->split_groups_per_cu / pl->kv.num_kv_heads;
    double share = ceil(work / groups / 64.0) * 64.0;
    if (share < t->split_min_keys) share = t->split_min_keys;
    pl->split_keys = share > CLPA_MAX_CONTEXT_LEN ? CLPA_MAX_CONTEXT_LEN : (int32_t)share;
    pl->split_from = other;
  }
  int64_t extra = 0, slots = 0;
  for (int32_t s = pl->dec_rows; s < p->num_seqs; s++) {
    const int64_t n = clpa_prefill_seq_parts(pl, p, s, qpk);
    if (n > 1) pl->split_rows++, slots += n, extra += n - 1;
  }
  if (!pl->split_rows) {
    pl->split_keys = 0;
    return CLPA_OK;
  }
  /* the partials: io rows [slots, num_kv_heads, rows] and their LSEs */
  const double rows = (double)slots * pl->kv.num_kv_heads * pl->ps.rows;
  const double bytes = rows * pl->kv.head_size * clpa_dtype_size(p->q_dtype);
  CLPA_CTX_CHECK(ctx, slots > INT32_MAX || bytes > (double)ctx->info.max_alloc_bytes,
                 CLPA_ERR_UNSUPPORTED,
                 "split_keys = %d splits %zu decode rows into %lld parts, whose partial outputs"
                 " (%.0f bytes) pass the device's largest buffer (%llu bytes): larger parts, or"
                 " -1 (none)", (int)pl->split_keys, pl->split_rows, (long long)slots, bytes,
                 (unsigned long long)ctx->info.max_alloc_bytes);
  pl->split_slots = (size_t)slots;
  pl->tiles += (size_t)extra;
  return CLPA_OK;
}

/* Whether the call's decode rows (from `from` on: one work item each)
 * make half its work items of `rows` rows or more: the mma path then takes
 * the tuning row's mixed_rows, as each such item keeps one warp busy
 * (docs/decisions/0042-prefill-mixed-step-splits.md). */
int clpa_prefill_decode_rows_lead(const clpa_prefill_params *p, int32_t from, int qpk, int rows) {
  int64_t dec = 0, other = 0;
  for (int32_t s = from; s < p->num_seqs; s++) {
    const int64_t n = p->cu_seqlens_q[s + 1] - p->cu_seqlens_q[s];
    if (decode_row(p, s, qpk, rows)) dec++;
    else other += (n * qpk + rows - 1) / rows;
  }
  return dec > 0 && dec >= other;
}

/* The leading decode rows: sequences 0 .. n - 1 with one new token each,
 * at query rows 0 .. n - 1 (decode's query, output and LSE rows then; its
 * block-table rows are theirs). */
static int32_t leading_decode_rows(const clpa_prefill_params *p) {
  int32_t n = 0;
  while (n < p->num_seqs && p->cu_seqlens_q[n] == n && p->cu_seqlens_q[n + 1] == n + 1) n++;
  return n;
}

/* Whether the tuning row's rule runs the n leading decode rows on decode's
 * kernel: where the call has no other new tokens and the row says so, or
 * where one of them walks more keys (to its window) than the row's bound:
 * prefill's kernel walks a row's keys in turn, decode's side by side
 * (docs/decisions/0042-prefill-mixed-step-splits.md). */
static int decode_rows_rule(const clpa_context *ctx, const clpa_prefill_params *p, int32_t n) {
  const clpa_prefill_tuning *t = &ctx->prefill_tuning;
  if (p->cu_seqlens_q[p->num_seqs] == n && t->decode_rows_alone) return 1;
  int64_t longest = 0;
  for (int32_t s = 0; s < n; s++) {
    int64_t lo, end;
    clpa_prefill_seq_keys(p, s, &lo, &end);
    if (end - lo > longest) longest = end - lo;
  }
  return t->decode_rows_from_keys > 0 && longest > t->decode_rows_from_keys;
}

/* Where decode_rows_kernel or the rule says: the leading decode rows'
 * decode plan (made as `make` says, from their host lengths) into pl->dec
 * and their count into pl->dec_rows (the lists upload their lengths). The
 * rule falls back to prefill's kernel where decode refuses the shape;
 * forced, its refusal is the call's. */
clpa_status clpa_prefill_plan_decode_rows(clpa_context *ctx, const clpa_prefill_params *p,
                                          int path, int make, clpa_plan *pl) {
  pl->dec = NULL, pl->dec_rows = 0;
  const int32_t n = p->decode_rows_kernel < 0 || p->block_mask ? 0 : leading_decode_rows(p);
  if (!n || (!p->decode_rows_kernel && !decode_rows_rule(ctx, p, n))) return CLPA_OK;
  int32_t *h = malloc(sizeof(int32_t) * (size_t)n);
  clpa_plan *d = calloc(1, sizeof *d);
  if (!h || !d) {
    free(h), free(d);
    return CLPA_FAIL(ctx->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory for %d decode rows", n);
  }
  int32_t longest = 0;
  for (int32_t s = 0; s < n; s++) {
    h[s] = p->cached_lens[s] + 1;
    if (h[s] > longest) longest = h[s];
  }
  clpa_decode_params dp;
  clpa_decode_params_init(&dp);
  dp.num_seqs = n, dp.num_heads = p->num_heads, dp.cache = p->cache, dp.layer = p->layer;
  dp.key_cache = p->key_cache, dp.value_cache = p->value_cache, dp.kv = p->kv;
  dp.max_blocks_per_seq = p->max_blocks_per_seq, dp.max_context_len = longest;
  dp.host_context_lens = h, dp.q_dtype = p->q_dtype, dp.scale = p->scale;
  dp.k_scale = p->k_scale, dp.v_scale = p->v_scale, dp.soft_cap = p->soft_cap;
  dp.sliding_window = p->sliding_window, dp.q_stride = p->q_stride;
  /* the call's arithmetic: decode's tensor cores where its path is mma (where decode has
   * them for the shape), else f32 products as the tiles and rows paths keep them */
  dp.precision = path == CLPA_PREFILL_MMA ? p->precision : CLPA_PRECISION_F32;
  dp.page_table = p->page_table, dp.num_page_indices = p->num_page_indices;
  char before[CLPA_ERROR_MAX];
  memcpy(before, ctx->error, sizeof before);
  clpa_status st = CLPA_ERR_UNSUPPORTED;
  if (path == CLPA_PREFILL_MMA) {
    dp.path = CLPA_DECODE_PATH_MMA;
    if ((st = clpa_decode_plan_fill(ctx, &dp, make, d)) != CLPA_OK)
      clpa_forget_refusal(ctx, before); /* decode's own choice then, as below */
  }
  if (st != CLPA_OK) {
    dp.path = CLPA_DECODE_PATH_AUTO;
    st = clpa_decode_plan_fill(ctx, &dp, make, d);
  }
  free(h);
  if (st != CLPA_OK) {
    free(d);
    if (p->decode_rows_kernel) return st;
    clpa_forget_refusal(ctx, before); /* the rule's fallback is not an error */
    return CLPA_OK;
  }
  pl->dec = d, pl->dec_rows = n;
  return CLPA_OK;
}
