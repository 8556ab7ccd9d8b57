/*
 * ref_xattn.h — CPU reference for XAttention's block-sparse estimation
 * (Xu et al. 2025, "XAttention: Block Sparse Attention with Antidiagonal
 * Scoring"), computed over KV chunks in three softmax phases as the
 * device kernels will (notes: shared/reference/xattention-kv-chunking.md),
 * plus the unchunked algorithm in one go as their oracle. Double
 * precision from float inputs, naive on purpose. Internal (host/), not
 * installed.
 *
 * For long prompts most (query block, key block) pairs carry almost no
 * attention mass. XAttention scores strided antidiagonals of Q·Kᵀ, which
 * is cheap, turns the scores into a softmax per strided query row, sums
 * the probabilities into block masses, and keeps per query block the
 * fewest key blocks that hold a share tau of its mass. Attention then
 * runs on the kept blocks only.
 *
 * ----------------------------------------------------------------------
 * Terms (one head, dense inputs)
 *
 *   q [num_q][D] floats: query i sits at position q_offset + i
 *   k [num_k][D] floats: key j sits at position j
 *   S  = stride            (tokens per strided row or column)
 *   B  = block_size        (tokens per block, a multiple of S)
 *   BS = B / S             (strided rows or columns per block)
 *   rows = ceil(num_q / S),  cols = ceil(num_k / S)
 *   q[i] for i >= num_q and k[j] for j >= num_k are zero vectors (the
 *   padding to whole groups, as XAttention's F.pad): they add nothing to
 *   a score and are never read
 *   R(r) = q_offset / S + r   global strided index of strided query row r
 *
 * Strided rows and columns ("flat group GEMM with reshape"), S = 4:
 *
 *   strided query row r  = [ q[4r+3] | q[4r+2] | q[4r+1] | q[4r+0] ]  (S*D)
 *   strided key col   c  = [ k[4c+0] | k[4c+1] | k[4c+2] | k[4c+3] ]  (S*D)
 *
 *   score(r, c) = scale * dot(row r, col c)
 *               = scale * sum_{t=0}^{S-1} dot(q[rS + S-1-t], k[cS + t])
 *   scale       = 1 / (sqrt(D) * S)
 *
 * In the S x S tile of token products q_i·k_j the score is the sum along
 * the antidiagonal (X), which crosses every row and every column once:
 *
 *              k[4c] k[4c+1] k[4c+2] k[4c+3]
 *     q[4r]      .      .       .       X
 *     q[4r+1]    .      .       X       .
 *     q[4r+2]    .      X       .       .
 *     q[4r+3]    X      .       .       .
 *
 * Scale: each of the S products is an attention logit before the model's
 * 1/sqrt(D); dividing by S as well makes the score their mean, so it sits
 * on the scale of the model's own logits q·k/sqrt(D) and the softmax below
 * has the temperature of real attention. This is XAttention's scale
 * (their norm = 1). Their kernels fold log2(e) in and use exp2; that is
 * the same softmax: e^(s - m) = 2^((s - m) log2 e).
 *
 * Causal rule: the pair (r, c) is visible iff c <= R(r), and masked iff
 * c > R(r). That is "masked when the key group starts after the query
 * group ends": the key group starts at token cS, the query group ends at
 * position R(r)S + S - 1, and cS > R(r)S + S - 1  <=>  c > R(r). On the
 * strided diagonal c == R(r) the antidiagonal holds products whose key
 * lies after its query (t > (S-1)/2); they are kept, as in XAttention
 * (torch.triu(diagonal=1) on the reshaped scores).
 *
 * Blocks: query block qb is strided rows [qb*BS, min((qb+1)*BS, rows)),
 * key block kb strided columns [kb*BS, min((kb+1)*BS, cols)); the last of
 * each may be partial. q_blocks = ceil(rows / BS), k_blocks =
 * ceil(cols / BS). q_offset is a multiple of B, so query block qb lies on
 * key block diag(qb) = q_offset / B + qb, its diagonal block; key blocks
 * kb <= diag(qb) are the causal ones (kb > diag(qb) holds no visible
 * pair). q_offset + num_q <= num_k: every query's key is there (keys past
 * the last query are allowed; those past its strided group are never
 * visible).
 *
 * ----------------------------------------------------------------------
 * The phases, for one query chunk x every key chunk
 *
 * A chunk is strided query rows [q_start, q_start + q_len) x strided key
 * columns [k_start, k_start + k_len), offsets and lengths in strided
 * units, rows counted from query 0 (its global index is R(q_start)).
 *
 *   scores   scores[i][j] = score(q_start + i, k_start + j), -inf where
 *            masked (a kernel may skip masked tiles; phases 1 and 3 never
 *            read masked entries).
 *   phase 1  per row r of the chunk, over its visible columns c of the
 *            chunk (c <= R(r)), in increasing c:
 *              m = max s,  l = sum e^(s - m);   none visible: m = -inf, l = 0
 *   phase 2  per row, over the key chunks i in order:
 *              m = max_i m_i,  l = sum_i l_i e^(m_i - m)
 *            where a chunk with m_i = -inf adds nothing (no -inf - -inf).
 *   phase 3  p(r, c) = e^(s(r, c) - m[r]) / l[r] for visible pairs, and
 *              mass[qb][kb] = sum over rows r of qb (increasing),
 *                             sum over visible columns c of kb (increasing)
 *                             of p(r, c)
 *            Blocks are not divided by their row count: a query block's
 *            masses sum to its number of strided rows (each row's p sums
 *            to 1); selection only uses shares of that total.
 *   phase 4  selection, per query block qb with d = diag(qb):
 *              T     = sum_{kb=0..d} mass[qb][kb], in increasing kb
 *              order = block 0, then block d (if d > 0), then the other
 *                      blocks 1..d-1 by mass descending, equal masses by
 *                      increasing index
 *              walk the order with acc = 0: a block is kept iff it is
 *              block 0 or d, or acc < tau*T (acc before adding it); then
 *              acc += its mass. That is: the forced blocks, then the
 *              fewest more whose cumulative mass reaches tau*T
 *              (reaching exactly is enough).
 *              tau == 1 keeps every causal block (full attention), so
 *              rounding in T or acc never drops one.
 *            mask[qb][kb] = 1 if kept, else 0 (always 0 for kb > d);
 *            density = kept pairs / causal pairs, causal pairs =
 *            sum_qb (diag(qb) + 1); partial blocks count as whole ones.
 *
 * Masses of the chunked route equal the unchunked ones up to rounding
 * (the merged l is summed in another order), so a mask can differ only
 * where a cumulative mass lies within rounding of tau*T.
 *
 * Not modelled: XAttention's norm (1 here), kdb, keep_sink / keep_recent.
 * Prompts that are not whole strided groups are: the last group of the
 * queries and of the keys is padded with zero tokens, as above.
 *
 * Every function validates all its arguments before writing anything and
 * reports failures through clpa_last_error().
 */
#ifndef CLPA_HOST_REF_XATTN_H
#define CLPA_HOST_REF_XATTN_H

#include <stddef.h>
#include <stdint.h>

#include "clpa_base.h"

/* The problem, as above. */
typedef struct clpa_ref_xattn_shape {
  int32_t num_q;      /* query tokens, > 0 (the last group zero-padded to S) */
  int32_t num_k;      /* key tokens, >= q_offset + num_q (the last group zero-padded to S) */
  int32_t q_offset;   /* position of query 0, >= 0, a multiple of block_size */
  int32_t head_dim;   /* D > 0 */
  int32_t stride;     /* S > 0 */
  int32_t block_size; /* B, a positive multiple of stride */
} clpa_ref_xattn_shape;

/* What the shape implies (filled by clpa_ref_xattn_dims). */
typedef struct clpa_ref_xattn_dims {
  int32_t rows;           /* ceil(num_q / S): strided query rows */
  int32_t cols;           /* ceil(num_k / S): strided key columns */
  int32_t rows_per_block; /* BS = B / S */
  int32_t q_blocks;       /* ceil(rows / BS) */
  int32_t k_blocks;       /* ceil(cols / BS) */
  int32_t row0;           /* q_offset / S: R(0) */
  int32_t diag0;          /* q_offset / B: diag(0) */
} clpa_ref_xattn_dims;

/* One query chunk x one key chunk, in strided units (see above). */
typedef struct clpa_ref_xattn_chunk {
  int32_t q_start, q_len; /* strided query rows [q_start, q_start + q_len), q_len > 0 */
  int32_t k_start, k_len; /* strided key columns [k_start, k_start + k_len), k_len > 0 */
} clpa_ref_xattn_chunk;

/* Checks the shape: num_q > 0, D > 0, S > 0, B a positive multiple of S,
 * num_k >= 0, q_offset >= 0 and a multiple of B,
 * q_offset + num_q <= num_k, and that q, k ([num][D] floats) and the
 * [q_blocks][k_blocks] arrays fit in size_t bytes. Fills *dims when not
 * NULL. Returns CLPA_OK or CLPA_ERR_INVALID_ARG (nothing written). */
clpa_status clpa_ref_xattn_dims_get(const clpa_ref_xattn_shape *shape, clpa_ref_xattn_dims *dims);

/* Scores of one chunk: scores[i][j] ([q_len][k_len] doubles, row-major) =
 * score(q_start + i, k_start + j), or -inf where masked. Reads query
 * tokens of the chunk's rows and key tokens of its visible columns only
 * (none past num_q or num_k).
 * Checks the shape, the chunk within [0, rows) x [0, cols), the pointers,
 * the scores array's size in size_t, and every float read finite.
 * Returns CLPA_OK or CLPA_ERR_INVALID_ARG (nothing written). */
clpa_status clpa_ref_xattn_scores(const clpa_ref_xattn_shape *shape, const float *q,
                                  const float *k, clpa_ref_xattn_chunk chunk, double *scores);

/* Phase 1: m[i], l[i] (q_len doubles each) of the chunk's row i over the
 * chunk's visible columns; m = -inf and l = 0 where none is visible.
 * Masked scores are never read. Checks the shape, the chunk, the pointers
 * and every visible score finite. Returns CLPA_OK or CLPA_ERR_INVALID_ARG
 * (nothing written). */
clpa_status clpa_ref_xattn_partial_stats(const clpa_ref_xattn_shape *shape,
                                         clpa_ref_xattn_chunk chunk, const double *scores,
                                         double *m, double *l);

/* Phase 2: merges num_chunks partial statistics of num_rows rows each,
 * m_parts and l_parts [num_chunks][num_rows], into m, l [num_rows]. m and
 * l may alias any one chunk's rows of m_parts and l_parts. Checks
 * num_chunks > 0, the pointers, the sizes in size_t, and each part either
 * (m = -inf, l = 0) or (m finite, l finite and > 0). Returns CLPA_OK or
 * CLPA_ERR_INVALID_ARG (nothing written). */
clpa_status clpa_ref_xattn_merge_stats(size_t num_chunks, size_t num_rows, const double *m_parts,
                                       const double *l_parts, double *m, double *l);

/* Phase 3: the block masses of one chunk with the global statistics m, l
 * (q_len doubles: the chunk's rows, merged over every key chunk). Writes
 * mass[qb][kb] of the whole problem's [q_blocks][k_blocks] array for the
 * chunk's blocks only (0 for blocks with no visible pair); other entries
 * are left alone, so chunks that tile the rows x cols fill it. Masked
 * scores are never read. Checks the shape, the chunk, that it starts on
 * a block (q_start, k_start multiples of BS) and ends on one or at the
 * end (rows, cols), the pointers, every visible score finite, and every
 * row with a visible pair having m finite and l finite > 0. Returns
 * CLPA_OK or CLPA_ERR_INVALID_ARG (nothing written). */
clpa_status clpa_ref_xattn_block_sums(const clpa_ref_xattn_shape *shape,
                                      clpa_ref_xattn_chunk chunk, const double *scores,
                                      const double *m, const double *l, double *mass);

/* Phase 4: selection as above from mass [q_blocks][k_blocks] (entries
 * after each diagonal never read) into mask [q_blocks][k_blocks]; density
 * (may be NULL) gets kept / causal pairs. Checks the shape, the pointers,
 * 0 < tau <= 1, and every causal mass finite and >= 0. Returns CLPA_OK,
 * CLPA_ERR_INVALID_ARG or CLPA_ERR_OUT_OF_MEMORY (scratch for one row's
 * order); nothing written on failure. */
clpa_status clpa_ref_xattn_select(const clpa_ref_xattn_shape *shape, const double *mass,
                                  double tau, uint8_t *mask, double *density);

/* The oracle: the unchunked algorithm in one go. Every visible strided
 * score (summed token by token along the antidiagonal), one two-pass
 * softmax per strided query row over all its visible keys, the block sums
 * and the selection, as defined above. mass [q_blocks][k_blocks] gets
 * every entry (0 after the diagonals); mask and density as
 * clpa_ref_xattn_select (density may be NULL). Checks the shape, the
 * pointers, tau, and every float read finite. Returns CLPA_OK,
 * CLPA_ERR_INVALID_ARG or CLPA_ERR_OUT_OF_MEMORY (scratch for the scores;
 * nothing written). */
clpa_status clpa_ref_xattn_estimate_dense(const clpa_ref_xattn_shape *shape, const float *q,
                                          const float *k, double tau, double *mass,
                                          uint8_t *mask, double *density);

#endif
