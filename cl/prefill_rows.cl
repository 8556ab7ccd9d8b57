/* prefill_rows.cl — prefill's CPU path; built after prefill.cl (its arguments,
 * helpers and layouts: lib/kernels.c's prefill families). */
/*
 * clpa_prefill_rows — the same attention, shaped for CPUs (PoCL): a
 * work-group of one work-item owns RG query rows and walks the keys a
 * block at a time with explicit vectors, its rows' queries, softmax
 * states and accumulators in private memory (which a CPU keeps in L1),
 * and no barriers. Scores: per row and key, a dot product of 16-byte
 * chunks of the key (KV_X elements: key_index's rows); values: per row
 * and dimension, a dot product of the block's probabilities with the
 * value row, which the value layout keeps contiguous over the block's
 * tokens. Same arguments, masks and results as clpa_prefill_paged.
 *
 * Grid:  (num_items, num_kv_heads), work-groups of 1; work[t] = (s, R0, kb,
 *        slot) with rows R0 .. R0 + RG - 1 of sequence s (RG = CLPA_ROWS;
 *        prefill.cl's work_item_of).
 */
#define RG ROWS /* query rows per work-item */
#define VLOADB(p) CAT(VLOAD, VB)(p)
#define IOTAB CAT(IOTA, VB)
#define BCH (BLOCK_SIZE / VB) /* value vectors per block of tokens */
/* Key vectors sharing each query load: PTG x RG accumulators of 16 lanes. */
#define PTG_ (RG >= 16 ? 1 : RG >= 8 ? 2 : 4)
#define PTG (PTG_ < BLOCK_SIZE / VT ? PTG_ : BLOCK_SIZE / VT)
/* Cache blocks a step (their P V products meet in registers): 128 tokens,
 * at most 8 blocks (docs/decisions/0043-prefill-rows-unmasked-blocks.md). */
#define GB (BLOCK_SIZE >= 128 ? 1 : 128 / BLOCK_SIZE < 8 ? 128 / BLOCK_SIZE : 8)
/* Key vectors whose token sums are taken together: PTG of 4 at once
 * (rows.cl's token_sums4: SVT = 4 x VT tokens), else one at a time. */
#if PTG == 4
#define SVN 4
#define SVT VT4
#define ROWS_SUMS(ka, i, r) token_sums4(ka[i][r], ka[(i) + 1][r], ka[(i) + 2][r], ka[(i) + 3][r])
#else
#define SVN 1
#define SVT VT
#define ROWS_SUMS(ka, i, r) token_sums(ka[i][r])
#endif
#define floatS CAT(float, SVT)
#define intS CAT(int, SVT)

/* Block-sparse: mask_block is a multiple of 64, so a cache block lies in
 * one mask block where BLOCK_SIZE divides 64; blocks of 128 or 256 tokens
 * may straddle mask blocks, and then each key follows its own. */
#define MASK_STRADDLES (BLOCK_SIZE > 64 || 64 % BLOCK_SIZE != 0)
#if MASK_STRADDLES
/* Whether mask row m keeps a key of [j0, j1]; *every: all of them. */
inline int mask_keeps(__global const uchar *m, int j0, int j1, int mask_block, int *every) {
  int any = 0, all = 1;
  for (int b = j0 / mask_block; b <= j1 / mask_block; b++) any |= m[b] != 0, all &= m[b] != 0;
  *every = all;
  return any;
}
/* The lanes of tokens jj = j .. j + SVT - 1 that mask row m drops (SVT <=
 * 64: in at most two mask blocks; keys past j_max, masked anyway, take
 * j_max's block, the last the mask has). */
inline intS mask_drops(__global const uchar *m, intS jj, int j, int j_max, int mask_block) {
  const int b0 = min(j, j_max) / mask_block, b1 = min(j + SVT - 1, j_max) / mask_block;
  const int cut = b1 * mask_block; /* lanes from cut on lie in block b1 */
  return (jj < cut && m[b0] == 0) || (jj >= cut && m[b1] == 0);
}
#endif

/* ---- The kernel's phases ---- */

/* Online softmax over a step's nv blocks (scores sc), per row: their
 * probabilities into pb (zeros past nv), the rows' max m and sum l
 * updated, and the accumulators rescaled where a row's max rises. */
inline void rows_online_softmax(floatB pb[RG][GB * BCH], float sc[RG][GB * BLOCK_SIZE], int nv,
                                float *m, float *l, floatB acc[RG][HEAD_SIZE]) {
  for (int r = 0; r < RG; r++) {
    floatB bmv = VLOADB(&sc[r][0]);
    for (int c = 1; c < nv * BCH; c++) bmv = fmax(bmv, VLOADB(&sc[r][c * VB]));
    const float mn = fmax(m[r], CAT(vmax, VB)(bmv));
    const float base = mn == -INFINITY ? 0.0f : mn; /* every score -inf: p = 0 */
    floatB sum = (floatB)(0.0f);
#pragma unroll
    for (int c = 0; c < GB * BCH; c++) {
      pb[r][c] = c < nv * BCH ? exp(VLOADB(&sc[r][c * VB]) - base) : (floatB)(0.0f);
      sum += pb[r][c]; /* e^(-inf) = 0 */
    }
    /* The old output's factor: 1 while the max stays (most steps after the
     * first few), and then the accumulators are left alone. */
    if (mn > m[r]) {
      const float alpha = exp(m[r] - mn); /* 0 when m was -inf */
      l[r] *= alpha;
      for (int d = 0; d < HEAD_SIZE; d++) acc[r][d] *= alpha;
    }
    l[r] += VSUM(VB, sum);
    m[r] = mn;
  }
}

/* P V over a step's nv blocks (value tiles vbs, first tokens j0s): each
 * value row is contiguous over a block's tokens; the step's products for
 * one dimension meet in registers, then one add to each row's
 * accumulator. Slots outside [k_lo, k_end) may hold NaN: zeroed. ALL (a
 * literal): GB blocks, every slot inside, so neither tested. */
#define ROWS_VALUES(ALL)                                                                        \
  for (int d = 0; d < HEAD_SIZE; d++) {                                                       \
    floatB t[RG];                                                                             \
    _Pragma("unroll") for (int r = 0; r < RG; r++) t[r] = (floatB)(0.0f);                      \
    _Pragma("unroll") for (int g = 0; g < GB; g++) {                                          \
      if ((ALL) || g < nv) {                                                                  \
        _Pragma("unroll") for (int c = 0; c < BCH; c++) {                                     \
          floatB v = KV_TOKENS(KV_LOAD, VB, vbs[g] + value_index(d, c * VB, BLOCK_SIZE, ts),  \
                               ts) * vscale;                                                  \
          if (!(ALL)) {                                                                       \
            const intB jj = IOTAB + (j0s[g] + c * VB);                                        \
            v = select((floatB)(0.0f), v, jj >= k_lo && jj < k_end);                          \
          }                                                                                   \
          _Pragma("unroll") for (int r = 0; r < RG; r++) t[r] = fma(pb[r][g * BCH + c], v, t[r]); \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
    _Pragma("unroll") for (int r = 0; r < RG; r++) acc[r][d] += t[r];                         \
  }

/* ROWS_VALUES, its loop without tests where `inside` says every slot is.
 * Always inlined: PoCL's inliner left it a call once it held two loops, and
 * a call keeps acc and pb in memory (record 0043). */
inline __attribute__((always_inline)) void rows_values(floatB acc[RG][HEAD_SIZE],
                                                       floatB pb[RG][GB * BCH],
                                                       __global const kv_t *const *vbs,
                                                       const int *j0s, int nv, int k_lo,
                                                       int k_end, float vscale, int ts,
                                                       int inside) {
  if (inside) {
    ROWS_VALUES(1)
  } else {
    ROWS_VALUES(0)
  }
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void clpa_prefill_rows(
    KERNEL_PARAMS(PREFILL_ARG_LIST) PAGE_PARAMS) {
  const work_item w = work_item_of(work, get_group_id(0));
  const int s = w.s, R0 = w.R0;
  const int kv_head = get_group_id(1), qpk = num_heads / num_kv_heads;
  const int first = seq_info[3 * s], new_len = seq_info[3 * s + 1], cached = seq_info[3 * s + 2];
  const int nrows = new_len * qpk, rows = min(RG, nrows - R0);
  const int kv_end = cached + new_len;
  page_row table = PAGE_ROW_OF_LEN(s, cached + new_len);
  const float kscale = !KV_IS_FP8 ? 1.0f : k_scales ? k_scales[0] : k_scale;
  const float vscale = !KV_IS_FP8 ? 1.0f : v_scales ? v_scales[0] : v_scale;
  const int ts = kv_token_stride(num_kv_heads, head_stride, BLOCK_SIZE); /* HND, NHD */

  /* ---- 1. the rows: queries, positions, slopes; the accumulators keep
   * one lane per token offset of a value vector, summed once at the end
   * (no horizontal sum per block) ---- */
  float qr[RG][HEAD_SIZE];
  floatB acc[RG][HEAD_SIZE];
  float m[RG], l[RG], slope[RG];
  int pos[RG], head[RG];
  /* the rows' keys (their first's window to their last's causal bound), the item's split of them */
  const int2 all_keys = tile_keys(cached + R0 / qpk, cached + (R0 + rows - 1) / qpk, kv_end, causal,
                                  window);
  const int sink = sinks && item_has_sink(all_keys, w);
  for (int r = 0; r < RG; r++) {
    const int R = R0 + min(r, rows - 1); /* rows past the end repeat the last: never written */
    head[r] = kv_head * qpk + R % qpk;
    pos[r] = cached + R / qpk;
    slope[r] = alibi ? alibi[head[r]] : 0.0f;
    const ulong t = (ulong)(first + R / qpk);
    for (int d = 0; d < HEAD_SIZE; d++) {
      qr[r][d] = IO_LOAD(q, t * q_stride + (ulong)head[r] * HEAD_SIZE + d);
      acc[r][d] = (floatB)(0.0f);
    }
    m[r] = sink ? sinks[head[r]] : -INFINITY;
    l[r] = sink ? 1.0f : 0.0f;
  }
  float16 q16[RG][HEAD_SIZE / ROWS_X]; /* query chunks repeated VT times (rows.cl's QREP) */
  for (int r = 0; r < RG; r++)
    for (int c = 0; c < HEAD_SIZE / ROWS_X; c++) q16[r][c] = QREP(&qr[r][c * ROWS_X]);
  const int2 keys = item_keys(all_keys, w, split_keys);
  const int k_lo = keys.x, k_end = keys.y;

  __global const uchar *mrow[RG];
  for (int r = 0; r < RG; r++)
    mrow[r] = mask_row(block_mask, s, num_heads, head[r], pos[r] - cached, mask_block, mask_qb,
                       mask_kb);

  for (int b0 = k_lo / BLOCK_SIZE; b0 * BLOCK_SIZE < k_end; b0 += GB) {
    /* The step's blocks that count: nv of them, with their value tiles and
     * first tokens; the scores of block g at sc[r][g * BLOCK_SIZE ..]. */
    __global const kv_t *vbs[GB];
    int j0s[GB], nv = 0, inside = 1; /* inside: the blocks' slots all inside [k_lo, k_end) */
    float sc[RG][GB * BLOCK_SIZE];
    for (int b = b0; b < b0 + GB && b * BLOCK_SIZE < k_end; b++) {
      /* Block-sparse: rows that drop this block's mask block; none keeps it: skip. */
      int keep[RG], any = 0, all = 1;
      for (int r = 0; r < RG; r++) {
#if MASK_STRADDLES /* a row keeps the block where it keeps any of its keys */
        int every = 1;
        keep[r] = !block_mask || (r < rows && mask_keeps(mrow[r], b * BLOCK_SIZE,
                                                         min((b + 1) * BLOCK_SIZE, k_end) - 1,
                                                         mask_block, &every));
        any |= keep[r], all &= keep[r] && every;
#else
        keep[r] = !block_mask || (r < rows && mrow[r][(b * BLOCK_SIZE) / mask_block]);
        any |= keep[r], all &= keep[r];
#endif
      }
      if (!any) continue;
      const int phys = PAGE_OF(table, b);
      if (phys < 0 || phys >= num_blocks) {
        atomic_or(faults, CLPA_FAULT_BAD_BLOCK);
        continue; /* its keys are masked */
      }
      const ulong tile = kv_tile((ulong)phys, kv_head, block_stride, head_stride);
      __global const kv_t *kb = k_cache + tile;
      const int j0 = b * BLOCK_SIZE;
      vbs[nv] = v_cache + tile, j0s[nv] = j0;
      const int in_keys = j0 >= k_lo && j0 + BLOCK_SIZE <= k_end; /* every slot the item's */
      inside &= in_keys;

      /* Whether every row keeps every key of the block (its keys inside the
       * item's, at or before the first row's position, inside the last
       * row's window): then no score is masked. */
      const int whole = all && in_keys && (!causal || j0 + BLOCK_SIZE - 1 <= pos[0]) &&
                        (window <= 0 || pos[RG - 1] - j0 < window);

      /* ---- 2. scores of the block's keys, per row: PTG key vectors (VT
       * tokens each, rows.cl) share each query load ---- */
      for (int o0 = 0; o0 < BLOCK_SIZE / VT; o0 += PTG) {
        float16 ka[PTG][RG];
        ROWS_KEY_PRODUCTS(ka, PTG, RG, kb, o0, q16, kscale, BLOCK_SIZE, ts,
                          (__global const uchar *)0);
#pragma unroll
        for (int i = 0; i < PTG; i += SVN) {
          const int j = j0 + (o0 + i) * VT; /* tokens j .. j + SVT - 1 */
          const intS jj = CAT(IOTA, SVT) + j;
#pragma unroll
          for (int r = 0; r < RG; r++) {
            floatS x = ROWS_SUMS(ka, i, r) * scale;
            if (soft_cap > 0.0f) x = soft_cap * tanh(x / soft_cap);
            if (alibi) x += slope[r] * CAT(TO_FLOAT, SVT)(jj - pos[r]);
            if (!whole) {
              intS masked = (jj < k_lo) | (jj >= k_end);
              if (causal) masked |= jj > pos[r];
              if (window > 0) masked |= pos[r] - jj >= window;
#if MASK_STRADDLES
              if (block_mask && keep[r])
                masked |= mask_drops(mrow[r], jj, j, k_end - 1, mask_block);
#endif
              x = keep[r] ? select(x, (floatS)(-INFINITY), masked) : (floatS)(-INFINITY);
            }
#if SVT == 1
            sc[r][nv * BLOCK_SIZE + j - j0] = x;
#else
            CAT(vstore, SVT)(x, 0, &sc[r][nv * BLOCK_SIZE + j - j0]);
#endif
          }
        }
      }
      nv++;
    }
    if (nv == 0) continue;

    /* online softmax over the step's blocks, per row; then P V */
    floatB pb[RG][GB * BCH];
    rows_online_softmax(pb, sc, nv, m, l, acc);
    rows_values(acc, pb, vbs, j0s, nv, k_lo, k_end, vscale, ts, nv == GB && inside);
  }

  /* ---- 3. normalise once and write ---- */
  __global io_t *dst = w.slot < 0 ? out : part_out;
  __global float *dlse = w.slot < 0 ? lse : part_lse;
  for (int r = 0; r < rows; r++) {
    const size_t row = item_row(w, R0 + r, first, qpk, num_heads, kv_head, num_kv_heads);
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    float res[HEAD_SIZE];
    row_sums(acc[r], res, HEAD_SIZE);
    for (int d = 0; d < HEAD_SIZE; d++) IO_STORE(res[d] * inv, dst, row * HEAD_SIZE + d);
    if (dlse) dlse[row] = softmax_lse(softmax_state_of(m[r], l[r]));
  }
}
