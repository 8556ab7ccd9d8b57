/*
 * ref_attention.h — CPU references for the attention kernels, in double
 * precision. They are the oracle every kernel test compares against, so
 * they are naive on purpose: one token at a time through the block table,
 * then plain dense masked attention. Never fast, never clever. Internal
 * (host/), not installed.
 *
 * Layouts are vLLM's (sizes in elements, not bytes), as a clpa_kv_layout
 * states them; elements are addressed through clpa_kv_key_index and
 * clpa_kv_value_index, the one host formula. The caches hold floats
 * already decoded from their storage dtype (clpa_dtype_decode), so one
 * reference serves every dtype; x is the storage dtype's 16-byte vector
 * width, which shapes the key layout:
 *
 *   query        q + s*q_stride + h*head_size + d                 float
 *   key_cache    [num_blocks][num_kv_heads][head_size/x][block_size][x]
 *   value_cache  [num_blocks][num_kv_heads][head_size][block_size]
 *   block_tables int32 [num_seqs][max_blocks_per_seq]
 *   context_lens int32 [num_seqs]
 *   cu_seqlens_q int32 [num_seqs + 1] (prefill: query rows of sequence s are cu[s] .. cu[s+1]-1)
 *   slot_mapping int64 [num_tokens]: slot = block*block_size + offset, < 0 skips
 *
 *   x = 16 / sizeof(storage element): f32 4, f16/bf16 8, fp8 16.
 *
 * Token j of sequence s lives in block b = block_tables[s][j / block_size]
 * at offset o = j % block_size; element d of its key is
 *   key_cache[clpa_kv_key_index(&kv, b, kvh, o, d)]      ([b][kvh][d / x][o][d % x])
 * and of its value
 *   value_cache[clpa_kv_value_index(&kv, b, kvh, o, d)]  ([b][kvh][d][o]).
 *
 * Every function validates all its arguments before writing anything and
 * reports failures through clpa_last_error().
 */
#ifndef CLPA_HOST_REF_ATTENTION_H
#define CLPA_HOST_REF_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "clpa_base.h"
#include "clpa_layout.h"

/* ======================================================================
 * Decode: one query token per sequence, at position L - 1
 *
 * For sequence s with context length L = context_lens[s], query head h and
 * its KV head kvh = h / (num_heads / num_kv_heads) (GQA/MQA), over the key
 * tokens j in [0, L) that take part:
 *
 *   s_j  = scale * dot(q, k_j)
 *   s_j  = soft_cap * tanh(s_j / soft_cap)       if soft_cap > 0
 *   s_j += alibi_slopes[h] * (j - (L - 1))       if alibi_slopes
 *   token j takes part iff (L - 1 - j) < W       if sliding_window W > 0
 *
 *   m    = max(max_j s_j, sinks[h] if sinks)
 *   den  = sum_j e^(s_j - m)  +  e^(sinks[h] - m) if sinks
 *   out  = sum_j e^(s_j - m) v_j / den
 *   lse  = m + log(den)                          (natural log)
 *
 * The sink (gpt-oss style) is an extra logit with no value: it only takes
 * probability mass away. With no token (L == 0): out = 0 and lse = -inf, or
 * lse = sinks[h] when there is a sink. (L > 0 always has token L - 1.)
 *
 * Tokens outside the sliding window are never read, and a block holding
 * only such tokens is neither read nor checked, so an engine may free it
 * (and a test may poison it).
 * ==================================================================== */
typedef struct clpa_ref_decode_args {
  /* shapes */
  int32_t num_seqs;           /* >= 0 */
  int32_t num_heads;          /* query heads, a multiple of kv.num_kv_heads */
  clpa_kv_layout kv;          /* the caches' shape (its dtype gives x; the caches hold floats) */
  int32_t max_blocks_per_seq; /* row length of block_tables, >= 0 */

  /* inputs */
  const float *query;          /* row s at query + s*q_stride */
  size_t q_stride;             /* >= num_heads*head_size (a fused QKV row is fine) */
  const float *key_cache;      /* decoded keys, layout above */
  const float *value_cache;    /* decoded values, layout above */
  const int32_t *block_tables; /* entries past ceil(L / block_size) never read */
  const int32_t *context_lens; /* each in [0, max_blocks_per_seq*block_size] */

  /* options */
  float scale;               /* softmax scale, finite (usually 1/sqrt(head_size)) */
  const float *alibi_slopes; /* [num_heads] or NULL */
  int32_t sliding_window;    /* W > 0: last W tokens only; 0: off */
  float soft_cap;            /* > 0: tanh soft cap; 0: off */
  const float *sinks;        /* [num_heads] sink logits or NULL */

  /* outputs */
  double *out; /* [num_seqs][num_heads][head_size] */
  double *lse; /* [num_seqs][num_heads] or NULL */
} clpa_ref_decode_args;

/* Computes decode attention as above. Checks: pointers present, shapes
 * positive, the layout (clpa_kv_layout_check), num_heads % num_kv_heads == 0, q_stride,
 * scale finite, soft_cap >= 0 and finite, sliding_window >= 0, every
 * context length in [0, max_blocks_per_seq*block_size], every block id that
 * holds a token taking part in [0, num_blocks), alibi slopes finite, sinks
 * neither NaN nor +inf, cache sizes representable in size_t.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (nothing written) or
 * CLPA_ERR_OUT_OF_MEMORY (scratch for the logits; nothing written). */
clpa_status clpa_ref_decode(const clpa_ref_decode_args *a);

/* ======================================================================
 * Prefill: many query tokens per sequence, after a cached prefix
 *
 * Sequence s has cached = cached_lens[s] tokens already in the cache (a
 * prefix from the radix cache, or earlier chunks) and
 * n = cu_seqlens_q[s+1] - cu_seqlens_q[s] new tokens, whose keys and values
 * are ALREADY in the cache too (reshape_and_cache wrote them) at positions
 * cached .. cached + n - 1; L = cached + n. New token i of s is query row
 * t = cu_seqlens_q[s] + i, at position p = cached + i. For query head h,
 * over the key positions j that take part:
 *
 *   j in [0, p]                                   if causal
 *   j in [0, L)                                   if not
 *   and (p - j) < W                               if sliding_window W > 0
 *
 * everything else is decode's formula with p in place of L - 1 (decode is
 * the case n = 1, cached = L - 1, and gives bit-identical results):
 *
 *   s_j  = scale * dot(q, k_j), soft cap, += alibi_slopes[h] * (j - p)
 *   m    = max(max_j s_j, sinks[h] if sinks)
 *   den  = sum_j e^(s_j - m)  +  e^(sinks[h] - m) if sinks
 *   out  = sum_j e^(s_j - m) v_j / den,   lse = m + log(den)
 *
 * The window only limits the past: without causal, keys after p are all
 * kept (and their ALiBi term j - p is positive). A causal query always has
 * key p, so "no key" (out 0, lse -inf or the sink) cannot happen here with
 * valid arguments; the code still follows decode's rule.
 *
 * Each (sequence, KV head) is gathered one token at a time through the
 * block table into dense arrays, then every query row of that sequence
 * runs the same two-pass softmax as decode, keys in increasing j. Each
 * result depends only on (q, p, the keys it sees), so splitting the new
 * tokens into chunks (calls with growing cached_lens, causal) reproduces
 * one call bit for bit.
 *
 * Read: keys max(0, cached - W + 1) .. L - 1 of each sequence with n > 0
 * (all keys [0, L) without a window); the others, and whole blocks of
 * them, are neither read nor checked. Nothing of a sequence with n == 0
 * is read.
 * ==================================================================== */
typedef struct clpa_ref_prefill_args {
  /* shapes */
  int32_t num_seqs;           /* >= 0 */
  int32_t num_heads;          /* query heads, a multiple of kv.num_kv_heads */
  clpa_kv_layout kv;          /* the caches' shape (its dtype gives x; the caches hold floats) */
  int32_t max_blocks_per_seq; /* row length of block_tables, >= 0 */

  /* inputs */
  const float *query;          /* [total_new_tokens] rows, row t at query + t*q_stride,
                                  head h at h*head_size; total_new_tokens = cu_seqlens_q[num_seqs] */
  size_t q_stride;             /* >= num_heads*head_size (a fused QKV row is fine) */
  const int32_t *cu_seqlens_q; /* [num_seqs + 1]: cu[0] = 0, non-decreasing */
  const int32_t *cached_lens;  /* [num_seqs], >= 0; cached + n <= max_blocks_per_seq*block_size */
  const float *key_cache;      /* decoded keys, layout above; new tokens already written */
  const float *value_cache;    /* decoded values, layout above */
  const int32_t *block_tables; /* [num_seqs][max_blocks_per_seq]; entries past ceil(L /
                                  block_size) never read */

  /* options (as decode) */
  float scale;               /* softmax scale, finite */
  const float *alibi_slopes; /* [num_heads] or NULL */
  int32_t sliding_window;    /* W > 0: keys with p - j < W; 0: off */
  float soft_cap;            /* > 0: tanh soft cap; 0: off */
  const float *sinks;        /* [num_heads] sink logits or NULL */
  int causal;                /* 1: keys 0..p (the usual prefill); 0: all L keys */

  /* outputs */
  double *out; /* [total_new_tokens][num_heads][head_size] */
  double *lse; /* [total_new_tokens][num_heads] or NULL */

  /* Block-sparse prefill (XAttention's mask), or NULL: uint8
   * [num_seqs][num_heads][mask_q_blocks][mask_k_blocks]; query i of
   * sequence s, head h, drops key j when mask[s][h][i / mask_block]
   * [j / mask_block] is 0 (a row with every key dropped gets out 0 and lse
   * -inf, or the sink). */
  const uint8_t *block_mask;
  int32_t mask_block, mask_q_blocks, mask_k_blocks;
} clpa_ref_prefill_args;

/* Computes prefill attention as above. Checks everything decode checks
 * (pointers, the layout, num_heads % num_kv_heads, q_stride, scale,
 * soft_cap, sliding_window, alibi slopes, sinks), and causal in {0, 1};
 * with num_seqs > 0: query, cu_seqlens_q, cached_lens, block_tables and out
 * present (the caches too when num_blocks > 0), cu_seqlens_q[0] == 0 and
 * non-decreasing, every cached_lens[s] >= 0, every cached + n within
 * max_blocks_per_seq*block_size and INT32_MAX, every block id that holds a
 * key taking part in [0, num_blocks), and that the query and output
 * extents fit in size_t. num_seqs == 0 needs no buffers. Returns CLPA_OK,
 * CLPA_ERR_INVALID_ARG (nothing written) or CLPA_ERR_OUT_OF_MEMORY (scratch
 * for the gathered keys and values; nothing written). */
clpa_status clpa_ref_prefill(const clpa_ref_prefill_args *a);

/* ======================================================================
 * Merge two attention states over disjoint KV sets (same query)
 *
 * Row r (one (sequence, head) pair) of head_size elements:
 *   m      = max(lse_a[r], lse_b[r])
 *   out[r] = (out_a[r] e^(lse_a[r]-m) + out_b[r] e^(lse_b[r]-m))
 *            / (e^(lse_a[r]-m) + e^(lse_b[r]-m))
 *   lse[r] = m + log(e^(lse_a[r]-m) + e^(lse_b[r]-m))
 * An lse of -inf is an empty set: the other side is copied exactly; both
 * empty gives out 0 and lse -inf. Inputs are double so reference results
 * chain (clpa_ref_decode twice, then merge); a kernel test widens its float
 * inputs, which is exact. out may alias out_a or out_b, lse lse_a or lse_b.
 * ==================================================================== */

/* Merges num_rows rows as above; lse may be NULL. Checks head_size > 0,
 * the pointers, and that no input lse is NaN or +inf. Returns CLPA_OK or
 * CLPA_ERR_INVALID_ARG (nothing written). */
clpa_status clpa_ref_merge_states(size_t num_rows, size_t head_size, const double *out_a,
                                  const double *lse_a, const double *out_b, const double *lse_b,
                                  double *out, double *lse);

/* ======================================================================
 * reshape_and_cache: write new key/value rows into the caches
 *
 * Token t's key row key[t*key_stride + kvh*head_size + d] goes to the key
 * cache at slot = slot_mapping[t] (block slot / block_size, offset
 * slot % block_size) in the layout above; the value row likewise. Negative
 * slots are padding and skipped. Cache slots no token maps to are left
 * alone. Two tokens with the same slot: the later one wins (kernels give no
 * order, so tests should not do this).
 * ==================================================================== */
typedef struct clpa_ref_cache_args {
  int32_t num_tokens;   /* >= 0 */
  clpa_kv_layout kv;    /* the caches' shape (its dtype gives x; the caches hold floats) */

  const float *key;            /* row t at key + t*key_stride */
  size_t key_stride;           /* >= num_kv_heads*head_size */
  const float *value;          /* row t at value + t*value_stride */
  size_t value_stride;         /* >= num_kv_heads*head_size */
  const int64_t *slot_mapping; /* [num_tokens], each < num_blocks*block_size */

  float *key_cache;   /* layout above */
  float *value_cache; /* layout above */
} clpa_ref_cache_args;

/* Scatters the rows as above. Checks pointers, the layout, strides, and every
 * slot < num_blocks*block_size. Returns CLPA_OK or CLPA_ERR_INVALID_ARG
 * (nothing written). */
clpa_status clpa_ref_reshape_and_cache(const clpa_ref_cache_args *a);

#endif
