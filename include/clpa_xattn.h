/*
 * clpa_xattn.h — XAttention's block-sparse estimation on the device (Xu et
 * al. 2025, "XAttention: Block Sparse Attention with Antidiagonal
 * Scoring"), for one sequence's prefill over the paged key cache.
 * clpa.h includes this header; it may also be included alone.
 *
 * For long prompts most (query block, key block) pairs carry almost no
 * attention mass. The estimation scores strided antidiagonals of Q·Kᵀ
 * (cheap: one product in S per token pair), turns them into a softmax per
 * strided query row, sums the probabilities into block masses and keeps,
 * per query block, the fewest key blocks that hold a share tau of its
 * mass. The result is a block mask that clpa_prefill's block_mask takes
 * (block-sparse prefill; clpa_attn.h) or the caller's own scheduler consumes.
 *
 * ----------------------------------------------------------------------
 * Definitions (per query head h; KV head h / (num_heads / num_kv_heads))
 *
 *   The new tokens i = 0 .. num_q - 1 sit at positions q_offset + i; the
 *   keys are positions j = 0 .. num_k - 1, num_k = q_offset + num_q, read
 *   through block_table (the cached prefix and the new tokens, which the
 *   caller has already written with clpa_reshape_and_cache).
 *   S = stride, B = block (tokens per mask block), BS = B / S.
 *   rows = ceil(num_q / S), cols = ceil(num_k / S), R(r) = q_offset / S + r.
 *   Any num_q will do: as XAttention pads, queries i >= num_q and keys
 *   j >= num_k count as zero vectors in the scores (they are not read).
 *
 *   score(r, c) = sum_{t=0}^{S-1} q[rS + S-1-t] . k[cS + t] / (sqrt(D) S)
 *                 (the antidiagonal of the S x S tile of token products)
 *   visible iff c <= R(r) (causal on strided groups; the strided diagonal
 *   is kept whole)
 *   p(r, c)     = e^(score - m_r) / l_r, the softmax of row r over its
 *                 visible columns
 *   mass[qb][kb] = sum of p(r, c) over rows r of query block qb (strided
 *                 rows [qb BS, (qb + 1) BS)) and visible columns c of key
 *                 block kb; a row's p sums to 1, so a block row sums to
 *                 its number of strided rows.
 *   selection   per query block qb, d = q_offset / B + qb (its diagonal
 *               key block), T = sum_{kb <= d} mass[qb][kb]: walk block 0,
 *               block d, then blocks 1 .. d-1 by mass descending (equal
 *               masses by increasing index) with acc = 0; a block is kept
 *               iff it is 0 or d, or acc < tau T before adding its mass.
 *               tau == 1 keeps every causal block. Blocks kb > d: 0.
 *
 * host/ref_xattn.h (the CPU reference, in double) documents all of this
 * with pictures; tests/test_xattn.c checks the device against it.
 *
 * How the device computes it (cl/xattn.cl): keys are cut into chunks of
 * `chunk` tokens; phase 1 computes every strided row's softmax state per
 * key block and their merge (m, l) per key chunk; phase 2 merges a row's
 * chunk states; phase 3 sums the normalised probabilities of each (query
 * block, key block) pair in a fixed order (rows increasing, as the
 * reference), so results are deterministic; phase 4 selects, a
 * work-group per (head, query block). Arithmetic is f32: masses match the
 * reference to about 1e-5 relative, and a mask can differ from the
 * reference's only where a running sum lies within rounding of tau T (or
 * two masses at the cut are equal within rounding). On tensor cores
 * (path mma, auto on NVIDIA) phase 1's products take the queries rounded
 * to the cache's dtype: the same holds against a reference given those
 * rounded queries.
 * ==================================================================== */
#ifndef CLPA_XATTN_H
#define CLPA_XATTN_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

#include "clpa_base.h"
#include "clpa_cache.h"
#include "clpa_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which kernel computes phase 1's scores (every path gives the same
 * masses within rounding). f32 reads every cache layout kind
 * (clpa_layout.h); mma split-key caches only (forced onto another kind:
 * CLPA_ERR_UNSUPPORTED), and auto takes f32 for the others. */
typedef enum clpa_xattn_path {
  CLPA_XATTN_AUTO = 0, /* mma on NVIDIA where it applies, else f32 */
  CLPA_XATTN_F32 = 1,  /* f32 products on every device: a register tile of scores a work-item */
  /* Tensor cores: mma.sync m16n8k16 on NVIDIA (compute capability 8.0),
   * f16 or bf16 caches (the queries rounded to the cache's dtype, f32
   * accumulation), head sizes that are multiples of 32, block / stride a
   * multiple of 8 that divides 64 or that 64 divides. Forced on other
   * devices it runs emulated through local memory (slow: for tests). */
  CLPA_XATTN_MMA = 2
} clpa_xattn_path;

typedef struct clpa_xattn_params {
  int32_t num_heads;           /* query heads, a positive multiple of the cache's num_kv_heads */
  /* The paged key cache: cache and layer, or key_cache and kv (values
   * are not read, so no value cache is asked for). */
  const clpa_cache *cache;     /* a device cache of this context, or NULL */
  int32_t layer;               /* with cache: which layer */
  cl_mem key_cache;            /* without cache: the application's key cache ... */
  clpa_kv_layout kv;           /* ... and its layout (holds kv.cache_bytes) */
  float k_scale;               /* fp8 caches: the per-tensor key scale (1 by default) */
  cl_mem block_table;          /* int32 [max_blocks_per_seq]: the sequence's physical blocks */
  int32_t max_blocks_per_seq;  /* > 0; q_offset + num_q <= max_blocks_per_seq * kv.block_size
                                  and <= CLPA_MAX_CONTEXT_LEN (clpa_attn.h) */
  /* The new tokens' queries: [num_q][q_stride] elements of q_dtype, head
   * h at h * head_size. */
  cl_mem query;
  clpa_dtype q_dtype;          /* f32, f16 or bf16 */
  size_t q_stride;             /* elements between tokens; 0 = num_heads * head_size */
  int32_t num_q;               /* new tokens: > 0 (the last strided group is zero-padded) */
  int32_t q_offset;            /* cached tokens before them: >= 0, a multiple of block */
  /* Shape of the estimation. */
  int32_t stride;              /* S: 4, 8 or 16 (default 8) */
  int32_t block;               /* B: tokens per mask block, a positive multiple of stride (default 128) */
  int32_t chunk;               /* keys per KV chunk of phase 1: a positive multiple of block; 0 = one chunk */
  double tau;                  /* share of each query block's mass to keep: 0 < tau <= 1 (default 0.9) */
  size_t scratch_limit;        /* bytes of per-(row, key block) states at once: the estimation runs in
                                * pieces of heads and query blocks that fit; 0 = 256 MiB (or a quarter
                                * of the device's largest buffer, if less) */
  clpa_xattn_path path;        /* 0 = auto */
  /* Outputs, q_blocks = ceil(num_q / B), k_blocks = ceil((q_offset +
   * num_q) / B): */
  cl_mem mask;                 /* uint8 [num_heads][q_blocks][k_blocks]: 1 kept, 0 not */
  cl_mem mass;                 /* optional: float [num_heads][q_blocks][k_blocks] (0 after each diagonal) */
  /* Events: wait for these before starting; *event (if not NULL) gets an
   * event that completes with the last kernel; the caller releases it. */
  cl_uint num_wait_events;
  const cl_event *wait_events;
  cl_event *event;
  uint64_t reserved[8]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_xattn_params;

/* Fills p with the defaults: zeros and NULLs, k_scale 1, q_dtype f32,
 * stride 8, block 128, chunk 0 (one chunk), tau 0.9. The caller sets the
 * shapes, the cache and the buffers. */
CLPA_API void clpa_xattn_params_init(clpa_xattn_params *p);

/* Enqueues the estimation (four kernels: phases 1 to 3 per piece of heads
 * and query blocks, then the selection) on the context's queue; does not
 * wait. The density (kept / causal pairs, causal pairs = sum over query
 * blocks of diag + 1) is the caller's to count from the mask once it is
 * read back.
 *
 * Everything is validated before anything is enqueued: the shapes above,
 * the layout, tau, the dtypes and every buffer's size. Block ids live on
 * the device, so the kernels check them: a key in a block outside
 * [0, num_blocks) takes no part (its column is masked) and sets
 * CLPA_FAULT_BAD_BLOCK (clpa_context_check_faults).
 *
 * Memory: besides the outputs, 2 * num_heads * rows * num_chunks floats
 * of the context's scratch (each row's softmax state per chunk; the mma
 * path cuts the keys into about 8 chunks where `chunk` leaves fewer, so
 * that a row tile's chunks run side by side and share its queries), rows =
 * ceil(num_q / stride), the masses when mass is NULL, and each row's state per
 * key block (2 * rows * k_blocks floats a head: the scores are computed
 * once), for as many heads and query blocks at a time as scratch_limit
 * allows (at least one query block of one head).
 *
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (which field, which value),
 * CLPA_ERR_UNSUPPORTED (q_dtype; path mma where it does not apply; keys past
 * CLPA_MAX_CONTEXT_LEN), CLPA_ERR_BUILD, CLPA_ERR_OPENCL or
 * CLPA_ERR_DEVICE_MEMORY. */
CLPA_API clpa_status clpa_xattn_estimate(clpa_context *ctx, const clpa_xattn_params *p);

/* The path clpa_xattn_estimate would take for p, after the same checks,
 * with nothing enqueued. */
CLPA_API clpa_status clpa_xattn_choice(clpa_context *ctx, const clpa_xattn_params *p,
                                       clpa_xattn_path *path);

#ifdef __cplusplus
}
#endif

#endif /* CLPA_XATTN_H */
