/* ref_attention.c — naive double-precision references (see ref_attention.h). */
#include "ref_attention.h"

#include <math.h>
#include <stdlib.h>

#include "block_mask.h"
#include "last_error.h"
#include "size_math.h"

/* ======================================================================
 * Decode
 * ==================================================================== */

/* First token that takes part: the window keeps j with L - 1 - j < W. */
static int32_t first_token(int32_t len, int32_t window) {
  return window > 0 && len > window ? len - window : 0;
}

/* Shapes shared by decode and prefill: the layout (into *kv), the head
 * grouping, the block table's row length and the query row stride. */
static clpa_status check_shapes(int32_t num_seqs, int32_t num_heads, const clpa_kv_layout *layout,
                                int32_t max_blocks_per_seq, size_t q_stride, clpa_kv_layout *kv) {
  CLPA_CHECK(NULL, num_seqs < 0, CLPA_ERR_INVALID_ARG, "num_seqs = %d < 0", num_seqs);
  clpa_status st = clpa_kv_layout_check(layout, kv);
  if (st != CLPA_OK) return st;
  CLPA_CHECK(NULL, num_heads <= 0 || num_heads % kv->num_kv_heads != 0, CLPA_ERR_INVALID_ARG,
             "num_heads = %d is not a positive multiple of num_kv_heads = %d", num_heads,
             kv->num_kv_heads);
  CLPA_CHECK(NULL, max_blocks_per_seq < 0, CLPA_ERR_INVALID_ARG,
             "max_blocks_per_seq = %d must be >= 0", max_blocks_per_seq);
  CLPA_CHECK(NULL, q_stride < (size_t)num_heads * (size_t)kv->head_size, CLPA_ERR_INVALID_ARG,
             "q_stride = %zu < num_heads*head_size = %zu", q_stride,
             (size_t)num_heads * (size_t)kv->head_size);
  return CLPA_OK;
}

/* Options shared by decode and prefill. */
static clpa_status check_options(int32_t num_heads, float scale, float soft_cap,
                                 int32_t sliding_window, const float *alibi_slopes,
                                 const float *sinks) {
  CLPA_CHECK(NULL, !isfinite(scale), CLPA_ERR_INVALID_ARG, "scale = %g is not finite",
             (double)scale);
  CLPA_CHECK(NULL, !(soft_cap >= 0) || isinf(soft_cap), CLPA_ERR_INVALID_ARG,
             "soft_cap = %g must be finite and >= 0 (0 = off)", (double)soft_cap);
  CLPA_CHECK(NULL, sliding_window < 0, CLPA_ERR_INVALID_ARG,
             "sliding_window = %d must be >= 0 (0 = off)", sliding_window);
  for (int32_t h = 0; h < num_heads; h++) {
    CLPA_CHECK(NULL, alibi_slopes && !isfinite(alibi_slopes[h]), CLPA_ERR_INVALID_ARG,
               "alibi_slopes[%d] = %g is not finite", h, (double)alibi_slopes[h]);
    CLPA_CHECK(NULL, sinks && (isnan(sinks[h]) || sinks[h] == INFINITY), CLPA_ERR_INVALID_ARG,
               "sinks[%d] = %g must not be NaN or +inf", h, (double)sinks[h]);
  }
  return CLPA_OK;
}

/* Checks the pointers, every context length and every block id that holds
 * a token taking part; sets *max_len to the longest context. */
static clpa_status check_decode_data(const clpa_ref_decode_args *a, const clpa_kv_layout *kv,
                                     int32_t *max_len) {
  *max_len = 0;
  if (a->num_seqs == 0) return CLPA_OK;
  CLPA_CHECK(NULL, !a->query || !a->block_tables || !a->context_lens || !a->out,
             CLPA_ERR_INVALID_ARG, "query, block_tables, context_lens and out must not be NULL");
  CLPA_CHECK(NULL, kv->num_blocks > 0 && (!a->key_cache || !a->value_cache), CLPA_ERR_INVALID_ARG,
             "key_cache and value_cache must not be NULL");
  int64_t cap = (int64_t)a->max_blocks_per_seq * kv->block_size;
  for (int32_t s = 0; s < a->num_seqs; s++) {
    int32_t len = a->context_lens[s];
    CLPA_CHECK(NULL, len < 0 || len > cap, CLPA_ERR_INVALID_ARG,
               "context_lens[%d] = %d is outside [0, max_blocks_per_seq*block_size = %lld]", s, len,
               (long long)cap);
    if (len > *max_len) *max_len = len;
    if (len == 0) continue;
    const int32_t *row = a->block_tables + (size_t)s * (size_t)a->max_blocks_per_seq;
    int32_t first_block = first_token(len, a->sliding_window) / kv->block_size;
    int32_t last_block = (len - 1) / kv->block_size;
    for (int32_t i = first_block; i <= last_block; i++) {
      CLPA_CHECK(NULL, row[i] < 0 || row[i] >= kv->num_blocks, CLPA_ERR_INVALID_ARG,
                 "block_tables[%d][%d] = %d is outside [0, num_blocks = %d)", s, i, row[i],
                 kv->num_blocks);
    }
  }
  return CLPA_OK;
}

/* One (sequence, head): logits one token at a time through the block table,
 * then a two-pass softmax. logits has room for the context; acc for one
 * head. */
static void decode_one(const clpa_ref_decode_args *a, const clpa_kv_layout *kv, int32_t s,
                       int32_t h, double *logits, double *acc) {
  const int32_t len = a->context_lens[s];
  const size_t hs = (size_t)kv->head_size;
  const int32_t kvh = h / (a->num_heads / kv->num_kv_heads);
  const float *q = a->query + (size_t)s * a->q_stride + (size_t)h * hs;
  const int32_t *row = a->block_tables + (size_t)s * (size_t)a->max_blocks_per_seq;
  const int32_t first = first_token(len, a->sliding_window);
  double *out = a->out + ((size_t)s * (size_t)a->num_heads + (size_t)h) * hs;
  double *lse = a->lse ? a->lse + (size_t)s * (size_t)a->num_heads + (size_t)h : NULL;

  for (size_t d = 0; d < hs; d++) out[d] = 0.0;
  if (len == 0) {
    if (lse) *lse = a->sinks ? (double)a->sinks[h] : -INFINITY;
    return;
  }

  /* Logits. */
  double m = a->sinks ? (double)a->sinks[h] : -INFINITY;
  for (int32_t j = first; j < len; j++) {
    const int32_t b = row[j / kv->block_size], o = j % kv->block_size;
    double dot = 0.0;
    for (int32_t d = 0; d < (int32_t)hs; d++)
      dot += (double)q[d] * (double)a->key_cache[clpa_kv_key_index(kv, b, kvh, o, d)];
    double sj = (double)a->scale * dot;
    if (a->soft_cap > 0) sj = (double)a->soft_cap * tanh(sj / (double)a->soft_cap);
    if (a->alibi_slopes) sj += (double)a->alibi_slopes[h] * (double)(j - (len - 1));
    logits[j - first] = sj;
    if (sj > m) m = sj;
  }

  /* Softmax-weighted values. */
  double den = a->sinks ? exp((double)a->sinks[h] - m) : 0.0;
  for (size_t d = 0; d < hs; d++) acc[d] = 0.0;
  for (int32_t j = first; j < len; j++) {
    const int32_t b = row[j / kv->block_size], o = j % kv->block_size;
    double w = exp(logits[j - first] - m);
    den += w;
    for (int32_t d = 0; d < (int32_t)hs; d++)
      acc[d] += w * (double)a->value_cache[clpa_kv_value_index(kv, b, kvh, o, d)];
  }
  for (size_t d = 0; d < hs; d++) out[d] = acc[d] / den;
  if (lse) *lse = m + log(den);
}

clpa_status clpa_ref_decode(const clpa_ref_decode_args *a) {
  CLPA_CHECK(NULL, !a, CLPA_ERR_INVALID_ARG, "args must not be NULL");
  clpa_kv_layout kv;
  clpa_status st =
      check_shapes(a->num_seqs, a->num_heads, &a->kv, a->max_blocks_per_seq, a->q_stride, &kv);
  if (st == CLPA_OK)
    st = check_options(a->num_heads, a->scale, a->soft_cap, a->sliding_window, a->alibi_slopes,
                       a->sinks);
  int32_t max_len = 0;
  if (st == CLPA_OK) st = check_decode_data(a, &kv, &max_len);
  if (st != CLPA_OK) return st;
  max_len = 0; /* the logits of one row: the tokens its window keeps */
  for (int32_t s = 0; s < a->num_seqs; s++) {
    const int32_t len = a->context_lens[s], span = len - first_token(len, a->sliding_window);
    if (span > max_len) max_len = span;
  }

  double *logits = malloc(((size_t)max_len + 1) * sizeof *logits);
  double *acc = malloc((size_t)kv.head_size * sizeof *acc);
  if (!logits || !acc) {
    free(logits);
    free(acc);
    return CLPA_FAIL(NULL, CLPA_ERR_OUT_OF_MEMORY, "no memory for %d logits", max_len);
  }
  for (int32_t s = 0; s < a->num_seqs; s++)
    for (int32_t h = 0; h < a->num_heads; h++) decode_one(a, &kv, s, h, logits, acc);
  free(logits);
  free(acc);
  return CLPA_OK;
}

/* ======================================================================
 * Prefill
 * ==================================================================== */

/* Checks the pointers, cu_seqlens_q, every cached length and every block id
 * that holds a key taking part; sets *max_len to the longest L of a
 * sequence with new tokens. */
static clpa_status check_prefill_data(const clpa_ref_prefill_args *a, const clpa_kv_layout *kv,
                                      int32_t *max_len) {
  *max_len = 0;
  if (a->num_seqs == 0) return CLPA_OK;
  CLPA_CHECK(NULL, !a->query || !a->cu_seqlens_q || !a->cached_lens || !a->block_tables || !a->out,
             CLPA_ERR_INVALID_ARG,
             "query, cu_seqlens_q, cached_lens, block_tables and out must not be NULL");
  CLPA_CHECK(NULL, kv->num_blocks > 0 && (!a->key_cache || !a->value_cache), CLPA_ERR_INVALID_ARG,
             "key_cache and value_cache must not be NULL");
  const int32_t *cu = a->cu_seqlens_q;
  CLPA_CHECK(NULL, cu[0] != 0, CLPA_ERR_INVALID_ARG, "cu_seqlens_q[0] = %d must be 0", cu[0]);
  /* Positions are int32, as in the kernels. */
  int64_t cap = (int64_t)a->max_blocks_per_seq * kv->block_size;
  if (cap > INT32_MAX) cap = INT32_MAX;
  for (int32_t s = 0; s < a->num_seqs; s++) {
    CLPA_CHECK(NULL, cu[s + 1] < cu[s], CLPA_ERR_INVALID_ARG,
               "cu_seqlens_q[%d] = %d < cu_seqlens_q[%d] = %d (must be non-decreasing)", s + 1,
               cu[s + 1], s, cu[s]);
    const int32_t cached = a->cached_lens[s], n = cu[s + 1] - cu[s];
    CLPA_CHECK(NULL, cached < 0, CLPA_ERR_INVALID_ARG, "cached_lens[%d] = %d < 0", s, cached);
    const int64_t len = (int64_t)cached + n;
    CLPA_CHECK(NULL, len > cap, CLPA_ERR_INVALID_ARG,
               "cached_lens[%d] + new tokens = %d + %d exceeds min(max_blocks_per_seq*block_size, "
               "INT32_MAX) = %lld",
               s, cached, n, (long long)cap);
    if (n == 0) continue; /* no query: nothing of it is read */
    if (len > *max_len) *max_len = (int32_t)len;
    /* The earliest query (position cached) reaches back furthest. */
    const int32_t *row = a->block_tables + (size_t)s * (size_t)a->max_blocks_per_seq;
    int32_t first_block = first_token(cached + 1, a->sliding_window) / kv->block_size;
    int32_t last_block = (int32_t)((len - 1) / kv->block_size);
    for (int32_t i = first_block; i <= last_block; i++) {
      CLPA_CHECK(NULL, row[i] < 0 || row[i] >= kv->num_blocks, CLPA_ERR_INVALID_ARG,
                 "block_tables[%d][%d] = %d is outside [0, num_blocks = %d)", s, i, row[i],
                 kv->num_blocks);
    }
  }
  if (a->block_mask) {
    CLPA_CHECK(NULL, a->mask_block <= 0, CLPA_ERR_INVALID_ARG, "mask_block = %d must be > 0",
               a->mask_block);
    const int32_t s = clpa_block_mask_uncovered(a->num_seqs, cu, a->cached_lens, a->mask_block,
                                                a->mask_q_blocks, a->mask_k_blocks);
    CLPA_CHECK(NULL, s >= 0, CLPA_ERR_INVALID_ARG,
               "sequence %d: %lld new tokens over %lld keys need more than mask_q_blocks = %d x"
               " mask_k_blocks = %d blocks of %d", s, (long long)(cu[s + 1] - cu[s]),
               (long long)a->cached_lens[s] + (cu[s + 1] - cu[s]), a->mask_q_blocks,
               a->mask_k_blocks, a->mask_block);
  }
  const size_t total = (size_t)cu[a->num_seqs];
  const size_t row_out = (size_t)a->num_heads * (size_t)kv->head_size;
  size_t extent;
  CLPA_CHECK(NULL,
             !clpa_size_mul_add(total, a->q_stride, 0, &extent) ||
                 !clpa_size_mul_add(total, row_out, 0, &extent),
             CLPA_ERR_INVALID_ARG,
             "%zu query rows of q_stride = %zu or of num_heads*head_size = %zu do not fit in "
             "size_t",
             total, a->q_stride, row_out);
  return CLPA_OK;
}

/* Scratch for one (sequence, KV head): its keys and values gathered dense,
 * row j = token j (rows before the first key taking part are left unset),
 * the logits of one query and one head's accumulator. */
typedef struct prefill_scratch {
  int32_t base;   /* the first gathered token: row j of k, v and logits is token base + j */
  double *k, *v;  /* [span][head_size] */
  double *logits; /* [span + 1] */
  double *acc;    /* [head_size] */
} prefill_scratch;

/* The tokens any query of sequence s sees, from the first one's window:
 * [first_token(cached + 1, window), cached + n). */
static int32_t prefill_first(const clpa_ref_prefill_args *a, int32_t s) {
  return first_token(a->cached_lens[s] + 1, a->sliding_window);
}

/* Gathers tokens [first, len) of sequence s, KV head kvh, one token at a
 * time through the block table. */
static void prefill_gather(const clpa_ref_prefill_args *a, const clpa_kv_layout *kv, int32_t s,
                           int32_t kvh, int32_t first, int32_t len, prefill_scratch *w) {
  const int32_t *row = a->block_tables + (size_t)s * (size_t)a->max_blocks_per_seq;
  const size_t hs = (size_t)kv->head_size;
  w->base = first;
  for (int32_t j = first; j < len; j++) {
    const int32_t b = row[j / kv->block_size], o = j % kv->block_size;
    const size_t r = (size_t)(j - first) * hs;
    for (int32_t d = 0; d < kv->head_size; d++) {
      w->k[r + (size_t)d] = (double)a->key_cache[clpa_kv_key_index(kv, b, kvh, o, d)];
      w->v[r + (size_t)d] = (double)a->value_cache[clpa_kv_value_index(kv, b, kvh, o, d)];
    }
  }
}

/* One query row t (position p), head h, over the gathered keys [lo, hi)
 * that its mask row keeps (mrow NULL: all): decode_one's arithmetic in the
 * same order, so n = 1 equals decode. */
static void prefill_row(const clpa_ref_prefill_args *a, size_t hs, int32_t t, int32_t h, int32_t p,
                        int32_t lo, int32_t hi, const uint8_t *mrow, prefill_scratch *w) {
  const float *q = a->query + (size_t)t * a->q_stride + (size_t)h * hs;
  double *out = a->out + ((size_t)t * (size_t)a->num_heads + (size_t)h) * hs;
  double *lse = a->lse ? a->lse + (size_t)t * (size_t)a->num_heads + (size_t)h : NULL;

  for (size_t d = 0; d < hs; d++) out[d] = 0.0;
  int32_t kept = 0;
  for (int32_t j = lo; j < hi; j++) kept += !mrow || mrow[j / a->mask_block];
  if (kept == 0) { /* no key: every one masked, or none (decode's rule) */
    if (lse) *lse = a->sinks ? (double)a->sinks[h] : -INFINITY;
    return;
  }

  /* Logits. */
  double m = a->sinks ? (double)a->sinks[h] : -INFINITY;
  for (int32_t j = lo; j < hi; j++) {
    if (mrow && !mrow[j / a->mask_block]) continue;
    const double *k = w->k + (size_t)(j - w->base) * hs;
    double dot = 0.0;
    for (size_t d = 0; d < hs; d++) dot += (double)q[d] * k[d];
    double sj = (double)a->scale * dot;
    if (a->soft_cap > 0) sj = (double)a->soft_cap * tanh(sj / (double)a->soft_cap);
    if (a->alibi_slopes) sj += (double)a->alibi_slopes[h] * (double)(j - p);
    w->logits[j - w->base] = sj;
    if (sj > m) m = sj;
  }

  /* Softmax-weighted values. */
  double den = a->sinks ? exp((double)a->sinks[h] - m) : 0.0;
  for (size_t d = 0; d < hs; d++) w->acc[d] = 0.0;
  for (int32_t j = lo; j < hi; j++) {
    if (mrow && !mrow[j / a->mask_block]) continue;
    const double *v = w->v + (size_t)(j - w->base) * hs;
    double wj = exp(w->logits[j - w->base] - m);
    den += wj;
    for (size_t d = 0; d < hs; d++) w->acc[d] += wj * v[d];
  }
  for (size_t d = 0; d < hs; d++) out[d] = w->acc[d] / den;
  if (lse) *lse = m + log(den);
}

/* One sequence: per KV head, gather, then every query row of every query
 * head of its group. */
static void prefill_seq(const clpa_ref_prefill_args *a, const clpa_kv_layout *kv, int32_t s,
                        prefill_scratch *w) {
  const int32_t cached = a->cached_lens[s];
  const int32_t t0 = a->cu_seqlens_q[s], n = a->cu_seqlens_q[s + 1] - t0;
  if (n == 0) return;
  const int32_t len = cached + n, group = a->num_heads / kv->num_kv_heads;
  for (int32_t kvh = 0; kvh < kv->num_kv_heads; kvh++) {
    prefill_gather(a, kv, s, kvh, prefill_first(a, s), len, w);
    for (int32_t h = kvh * group; h < (kvh + 1) * group; h++) {
      for (int32_t i = 0; i < n; i++) {
        const int32_t p = cached + i;
        const int32_t lo = first_token(p + 1, a->sliding_window), hi = a->causal ? p + 1 : len;
        const uint8_t *mrow =
            a->block_mask ? a->block_mask + (((size_t)s * (size_t)a->num_heads + (size_t)h) *
                                                 (size_t)a->mask_q_blocks +
                                             (size_t)(i / a->mask_block)) *
                                                (size_t)a->mask_k_blocks
                          : NULL;
        prefill_row(a, (size_t)kv->head_size, t0 + i, h, p, lo, hi, mrow, w);
      }
    }
  }
}

clpa_status clpa_ref_prefill(const clpa_ref_prefill_args *a) {
  CLPA_CHECK(NULL, !a, CLPA_ERR_INVALID_ARG, "args must not be NULL");
  clpa_kv_layout kv;
  clpa_status st =
      check_shapes(a->num_seqs, a->num_heads, &a->kv, a->max_blocks_per_seq, a->q_stride, &kv);
  if (st == CLPA_OK)
    st = check_options(a->num_heads, a->scale, a->soft_cap, a->sliding_window, a->alibi_slopes,
                       a->sinks);
  if (st == CLPA_OK && a->causal != 0 && a->causal != 1)
    st = CLPA_FAIL(NULL, CLPA_ERR_INVALID_ARG, "causal = %d must be 0 or 1", a->causal);
  int32_t max_len = 0;
  if (st == CLPA_OK) st = check_prefill_data(a, &kv, &max_len);
  if (st != CLPA_OK) return st;
  /* The scratch holds one sequence's gathered tokens: the most of them. */
  max_len = 0;
  for (int32_t s = 0; s < a->num_seqs; s++) {
    const int32_t span = a->cached_lens[s] + (a->cu_seqlens_q[s + 1] - a->cu_seqlens_q[s]) -
                         prefill_first(a, s);
    if (span > max_len) max_len = span;
  }

  prefill_scratch w = {0, NULL, NULL, NULL, NULL};
  size_t kv_elems;
  if (clpa_size_mul_add((size_t)max_len, (size_t)kv.head_size, 0, &kv_elems) &&
      kv_elems <= SIZE_MAX / sizeof(double)) {
    w.k = malloc(kv_elems ? kv_elems * sizeof(double) : 1);
    w.v = malloc(kv_elems ? kv_elems * sizeof(double) : 1);
    w.logits = malloc(((size_t)max_len + 1) * sizeof(double));
    w.acc = malloc((size_t)kv.head_size * sizeof(double));
  }
  if (!w.k || !w.v || !w.logits || !w.acc) {
    free(w.k), free(w.v), free(w.logits), free(w.acc);
    return CLPA_FAIL(NULL, CLPA_ERR_OUT_OF_MEMORY,
                     "no memory to gather %d tokens of head_size %d (keys and values)", max_len,
                     kv.head_size);
  }
  for (int32_t s = 0; s < a->num_seqs; s++) prefill_seq(a, &kv, s, &w);
  free(w.k), free(w.v), free(w.logits), free(w.acc);
  return CLPA_OK;
}

/* ======================================================================
 * Merge states
 * ==================================================================== */
clpa_status clpa_ref_merge_states(size_t num_rows, size_t head_size, const double *out_a,
                                  const double *lse_a, const double *out_b, const double *lse_b,
                                  double *out, double *lse) {
  CLPA_CHECK(NULL, head_size == 0, CLPA_ERR_INVALID_ARG, "head_size must be > 0");
  if (num_rows == 0) return CLPA_OK;
  CLPA_CHECK(NULL, !out_a || !lse_a || !out_b || !lse_b || !out, CLPA_ERR_INVALID_ARG,
             "out_a, lse_a, out_b, lse_b and out must not be NULL");
  for (size_t r = 0; r < num_rows; r++) {
    CLPA_CHECK(NULL, isnan(lse_a[r]) || lse_a[r] == INFINITY, CLPA_ERR_INVALID_ARG,
               "lse_a[%zu] = %g must not be NaN or +inf", r, lse_a[r]);
    CLPA_CHECK(NULL, isnan(lse_b[r]) || lse_b[r] == INFINITY, CLPA_ERR_INVALID_ARG,
               "lse_b[%zu] = %g must not be NaN or +inf", r, lse_b[r]);
  }
  for (size_t r = 0; r < num_rows; r++) {
    const double la = lse_a[r], lb = lse_b[r];
    const double *oa = out_a + r * head_size, *ob = out_b + r * head_size;
    double *o = out + r * head_size;
    double l;
    /* Each element is read before it is written, so out may alias out_a or
     * out_b. An empty side (lse -inf) is dropped, not weighted by 0. */
    if (la == -INFINITY && lb == -INFINITY) {
      for (size_t d = 0; d < head_size; d++) o[d] = 0.0;
      l = -INFINITY;
    } else if (lb == -INFINITY) {
      for (size_t d = 0; d < head_size; d++) o[d] = oa[d];
      l = la;
    } else if (la == -INFINITY) {
      for (size_t d = 0; d < head_size; d++) o[d] = ob[d];
      l = lb;
    } else {
      double m = la > lb ? la : lb;
      double ea = exp(la - m), eb = exp(lb - m);
      for (size_t d = 0; d < head_size; d++) o[d] = (oa[d] * ea + ob[d] * eb) / (ea + eb);
      l = m + log(ea + eb);
    }
    if (lse) lse[r] = l;
  }
  return CLPA_OK;
}

/* ======================================================================
 * reshape_and_cache
 * ==================================================================== */
static clpa_status check_cache_args(const clpa_ref_cache_args *a, clpa_kv_layout *kv) {
  CLPA_CHECK(NULL, !a, CLPA_ERR_INVALID_ARG, "args must not be NULL");
  CLPA_CHECK(NULL, a->num_tokens < 0, CLPA_ERR_INVALID_ARG, "num_tokens = %d < 0", a->num_tokens);
  clpa_status st = clpa_kv_layout_check(&a->kv, kv);
  if (st != CLPA_OK) return st;
  size_t row = (size_t)kv->num_kv_heads * (size_t)kv->head_size;
  CLPA_CHECK(NULL, a->key_stride < row || a->value_stride < row, CLPA_ERR_INVALID_ARG,
             "key_stride = %zu and value_stride = %zu must be >= num_kv_heads*head_size = %zu",
             a->key_stride, a->value_stride, row);
  if (a->num_tokens == 0) return CLPA_OK;
  CLPA_CHECK(NULL, !a->key || !a->value || !a->slot_mapping, CLPA_ERR_INVALID_ARG,
             "key, value and slot_mapping must not be NULL");
  CLPA_CHECK(NULL, kv->num_blocks > 0 && (!a->key_cache || !a->value_cache), CLPA_ERR_INVALID_ARG,
             "key_cache and value_cache must not be NULL");
  int64_t num_slots = (int64_t)kv->num_blocks * kv->block_size;
  for (int32_t t = 0; t < a->num_tokens; t++) {
    CLPA_CHECK(NULL, a->slot_mapping[t] >= num_slots, CLPA_ERR_INVALID_ARG,
               "slot_mapping[%d] = %lld >= num_blocks*block_size = %lld", t,
               (long long)a->slot_mapping[t], (long long)num_slots);
  }
  return CLPA_OK;
}

clpa_status clpa_ref_reshape_and_cache(const clpa_ref_cache_args *a) {
  clpa_kv_layout kv;
  clpa_status st = check_cache_args(a, &kv);
  if (st != CLPA_OK) return st;
  for (int32_t t = 0; t < a->num_tokens; t++) {
    int64_t slot = a->slot_mapping[t];
    if (slot < 0) continue; /* padding */
    const int32_t b = (int32_t)(slot / kv.block_size), o = (int32_t)(slot % kv.block_size);
    const float *k = a->key + (size_t)t * a->key_stride;
    const float *v = a->value + (size_t)t * a->value_stride;
    for (int32_t h = 0; h < kv.num_kv_heads; h++) {
      for (int32_t d = 0; d < kv.head_size; d++) {
        const size_t e = (size_t)h * (size_t)kv.head_size + (size_t)d;
        a->key_cache[clpa_kv_key_index(&kv, b, h, o, d)] = k[e];
        a->value_cache[clpa_kv_value_index(&kv, b, h, o, d)] = v[e];
      }
    }
  }
  return CLPA_OK;
}
