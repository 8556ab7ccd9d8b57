/*
 * xattn.cl — XAttention's block-sparse estimation (Xu et al. 2025) for one
 * sequence's prefill over the paged key cache, KV-chunked in three softmax
 * phases (notes: shared/reference/xattention-kv-chunking.md). Checked by
 * tests/test_xattn.c against clpa_ref_xattn_estimate_dense
 * (host/ref_xattn.c), whose header defines every quantity below.
 *
 * Strided units (S = stride, BS = B / S, R(r) = row0 + r, row0 = q_offset / S):
 *
 *   strided query row r = [ q[rS+S-1] | ... | q[rS+0] ]   (S * HEAD_SIZE)
 *   strided key col   c = [ k[cS+0]   | ... | k[cS+S-1] ] (S * HEAD_SIZE)
 *   score(r, c) = scale * row r . col c,  scale = 1 / (sqrt(D) S) (host)
 *   visible iff c <= R(r)
 *   rows = ceil(num_q / S), cols = ceil(num_k / S), num_k = q_offset + num_q:
 *   queries q[i >= num_q] and keys k[j >= num_k] are zero tokens (the last
 *   group's padding), never read
 *
 * Kernels (one launch each, in order on an in-order queue):
 * Phases 1 to 3 run per piece: heads head0 .. head0 + grid heads - 1,
 * rows rbase .. rend - 1 (whole query blocks), bstat holding the piece's
 * rows only (the host picks pieces that fit its scratch).
 *   clpa_xattn_stats   phase 1. Grid (piece rows / XROWS, piece heads,
 *                      num_chunks), a work-item per (XROWS strided rows,
 *                      head, key chunk): each row's online softmax state
 *                      over each key block's visible columns (increasing
 *                      c), kept per (row, key block) in bstat as (m_b,
 *                      l_b), and their merge over the chunk, (m, l).
 *   clpa_xattn_merge   phase 2. Grid (piece rows, piece heads): each row's
 *                      chunk states merged (softmax_merge, chunks in order)
 *                      into (m, l), written over chunk 0's.
 *   clpa_xattn_mass    phase 3. Grid (k_blocks, piece query blocks,
 *                      piece heads), a work-item per block pair: for each row
 *                      of the query block (increasing) that sees the key
 *                      block it takes the row's merged (m, l) and adds the row's mass
 *                      e^(m_b - m) l_b / l, which is the sum of e^(s-m)/l
 *                      over the block's visible columns: the scores are
 *                      computed once, in phase 1. No atomics: the sum order
 *                      is fixed, so results are deterministic. Pairs after
 *                      the diagonal get 0.
 *   clpa_xattn_select  phase 4. Grid (q_blocks x XSEL_THREADS, num_heads),
 *                      a work-group per query block: block 0, the
 *                      diagonal, then the rest by mass descending (ties by
 *                      index) while the running sum before a block is < tau T.
 * Phases 1 to 3: work-group sizes are the driver's (nothing is shared
 * between items).
 *
 * Buffers (element counts):
 *   q        [num_q, q_stride] io_t         head h at h * HEAD_SIZE
 *   k_cache  [num_blocks, num_kv_heads, HEAD_SIZE / X, BLOCK_SIZE, X]
 *   table    [max_blocks_per_seq] int32     the sequence's blocks
 *   stat_m, stat_l [num_heads, num_chunks, rows] float
 *   bstat    [piece heads, piece rows, k_blocks] float2 (m_b, l_b); only the
 *            blocks a row sees are written
 *   mass     [num_heads, q_blocks, k_blocks] float
 *   mask     [num_heads, q_blocks, k_blocks] uchar
 *
 * Keys are read one token at a time through the table, X dimensions per
 * load (key_index). A key in a block outside [0, num_blocks) masks its
 * column and sets CLPA_FAULT_BAD_BLOCK; slots past the sequence are never
 * read (the columns stop at R(r), and the last column's padding is a
 * zero token whose table entry is not looked up either: the slots may
 * hold NaN, and 0 * NaN is NaN, so the padding is masked, not multiplied
 * by 0).
 */
#ifndef CLPA_HEAD_SIZE
#error "CLPA_HEAD_SIZE: elements a head; required"
#endif
#ifndef CLPA_BLOCK_SIZE
#error "CLPA_BLOCK_SIZE: tokens a cache block; required"
#endif
#define HEAD_SIZE CLPA_HEAD_SIZE
#define BLOCK_SIZE CLPA_BLOCK_SIZE

#if HEAD_SIZE % KV_X
#error "xattn reads keys X elements at a time: HEAD_SIZE must be a multiple of X"
#endif

#define floatX CAT(float, KV_X)
/* X consecutive query elements from element i of p, as floats. */
#define IO_LOADX(p, i) IO_LOADN(KV_X, p, i)

/* What every score needs: where the query head and the KV head live. */
typedef struct xattn_src {
  __global const io_t *q;       /* the query head's first element of token 0 */
  ulong q_stride;
  __global const kv_t *k_cache;
  __global const int *table;
  ulong block_stride, head_stride;
  int kv_head, num_blocks, stride, ts; /* ts: kv_token_stride */
  int num_q, num_k;             /* tokens past these are the zero padding */
  float scale;                  /* 1 / (sqrt(D) S), times k_scale */
} xattn_src;

/* Key token tok's first element through the table, or NULL for the
 * padding past the keys (neither it nor its table entry is read); *bad
 * is set where its block lies outside the cache (then block 0 stands in:
 * the caller masks the column). */
inline __global const kv_t *xattn_key(const xattn_src *s, int tok, int *bad) {
  if (tok >= s->num_k) return NULL;
  int phys = s->table[tok / BLOCK_SIZE];
  if (phys < 0 || phys >= s->num_blocks) *bad = 1, phys = 0;
  return s->k_cache + kv_tile((ulong)phys, s->kv_head, s->block_stride, s->head_stride) +
         key_index(0, tok % BLOCK_SIZE, BLOCK_SIZE, s->ts);
}

/* Query token tok's head, or NULL for the padding past the queries. */
inline __global const io_t *xattn_query(const xattn_src *s, int tok) {
  return tok < s->num_q ? s->q + (ulong)tok * s->q_stride : NULL;
}

/* A register tile of scores: XROWS strided rows x XCOLS columns per
 * step, so each loaded query vector serves XCOLS columns and each key
 * vector XROWS rows; 8 x 8 is as fast on CPUs as larger tiles and keeps
 * the registers a GPU can hold (64 scores + 8 key vectors;
 * docs/decisions/0027-xattn-score-tile.md). */
#define XROWS 8
#define XCOLS 8

/* score(r, c) for rows r0 .. r0 + XROWS - 1 and columns c0 .. c0 +
 * XCOLS - 1, scaled, into acc[i][j]; rows past r0 + n - 1 repeat row
 * r0 + n - 1 and columns past c0 + nc - 1 repeat column c0 + nc - 1.
 * A padding token (xattn_key, xattn_query: NULL) loads as zeros.
 * bad[j] is set when a key of column j lies in a block outside the cache
 * (its scores are garbage from block 0: the caller masks the column).
 * Computed in XSUB x XSUB sub-tiles with X-wide accumulators (one
 * multiply-add serves X dimensions; summed across lanes once at the end):
 * each score sums t, then d, lane-wise in increasing order. */
#if CLPA_LANES == 3
/* NVIDIA: one scalar accumulator a score, as before the sub-tiles, which
 * cost NVIDIA more (64 X-wide accumulators, every vector loaded twice)
 * than the lane sums they save on CPUs
 * (docs/decisions/0027-xattn-score-tile.md). */
inline void xattn_scores(const xattn_src *s, int r0, int n, int c0, int nc,
                         float acc[XROWS][XCOLS], int bad[XCOLS]) {
  for (int i = 0; i < XROWS; i++)
    for (int j = 0; j < XCOLS; j++) acc[i][j] = 0.0f;
  for (int j = 0; j < XCOLS; j++) bad[j] = 0;
  for (int t = 0; t < s->stride; t++) {
    __global const kv_t *kt[XCOLS];
    for (int j = 0; j < XCOLS; j++)
      kt[j] = xattn_key(s, (c0 + min(j, nc - 1)) * s->stride + t, &bad[j]);
    __global const io_t *qt[XROWS];
    for (int i = 0; i < XROWS; i++)
      qt[i] = xattn_query(s, (r0 + min(i, n - 1)) * s->stride + s->stride - 1 - t);
    for (int d = 0; d < HEAD_SIZE; d += KV_X) {
      floatX k[XCOLS];
      for (int j = 0; j < XCOLS; j++)
        k[j] = kt[j] ? KV_LOAD(KV_X, kt[j] + key_dim_offset(d, BLOCK_SIZE)) : (floatX)(0.0f);
      for (int i = 0; i < XROWS; i++) {
        const floatX qv = qt[i] ? IO_LOADX(qt[i], d) : (floatX)(0.0f);
        for (int j = 0; j < XCOLS; j++) acc[i][j] = VDOT(KV_X, qv, k[j], acc[i][j]);
      }
    }
  }
  for (int i = 0; i < XROWS; i++)
    for (int j = 0; j < XCOLS; j++) acc[i][j] *= s->scale;
}
#else
#define XSUB 4
inline void xattn_scores(const xattn_src *s, int r0, int n, int c0, int nc,
                         float acc[XROWS][XCOLS], int bad[XCOLS]) {
  for (int j = 0; j < XCOLS; j++) bad[j] = 0;
  for (int i0 = 0; i0 < XROWS; i0 += XSUB)
    for (int j0 = 0; j0 < XCOLS; j0 += XSUB) {
      floatX va[XSUB][XSUB];
#pragma unroll
      for (int i = 0; i < XSUB; i++)
#pragma unroll
        for (int j = 0; j < XSUB; j++) va[i][j] = (floatX)(0.0f);
      for (int t = 0; t < s->stride; t++) {
        __global const kv_t *kt[XSUB];
#pragma unroll
        for (int j = 0; j < XSUB; j++)
          kt[j] = xattn_key(s, (c0 + min(j0 + j, nc - 1)) * s->stride + t, &bad[j0 + j]);
        __global const io_t *qt[XSUB];
#pragma unroll
        for (int i = 0; i < XSUB; i++)
          qt[i] = xattn_query(s, (r0 + min(i0 + i, n - 1)) * s->stride + s->stride - 1 - t);
        for (int d = 0; d < HEAD_SIZE; d += KV_X) {
          floatX k[XSUB], qv[XSUB];
#pragma unroll
          for (int j = 0; j < XSUB; j++) /* key_index(d, o) = key_index(0, o) + key_dim_offset(d) */
            k[j] = kt[j] ? KV_LOAD(KV_X, kt[j] + key_dim_offset(d, BLOCK_SIZE)) : (floatX)(0.0f);
#pragma unroll
          for (int i = 0; i < XSUB; i++) qv[i] = qt[i] ? IO_LOADX(qt[i], d) : (floatX)(0.0f);
#pragma unroll
          for (int i = 0; i < XSUB; i++)
#pragma unroll
            for (int j = 0; j < XSUB; j++) va[i][j] = mad(qv[i], k[j], va[i][j]);
        }
      }
#pragma unroll
      for (int i = 0; i < XSUB; i++)
#pragma unroll
        for (int j = 0; j < XSUB; j++) acc[i0 + i][j0 + j] = VSUM(KV_X, va[i][j]) * s->scale;
    }
}
#endif

inline xattn_src xattn_src_of(__global const io_t *q, ulong q_stride, int head,
                              __global const kv_t *k_cache, __global const int *table,
                              ulong block_stride, ulong head_stride, int num_blocks,
                              int num_kv_heads, int qpk, int stride, float scale, int num_q,
                              int row0) {
  xattn_src s;
  s.q = q + (ulong)head * HEAD_SIZE;
  s.q_stride = q_stride;
  s.k_cache = k_cache;
  s.table = table;
  s.block_stride = block_stride;
  s.head_stride = head_stride;
  s.ts = kv_token_stride(num_kv_heads, head_stride, BLOCK_SIZE);
  s.kv_head = head / qpk;
  s.num_blocks = num_blocks;
  s.stride = stride;
  s.num_q = num_q;
  s.num_k = row0 * stride + num_q; /* q_offset + num_q */
  s.scale = scale;
  return s;
}

/* ---- phase 1: rows' softmax states over one key chunk ---------------- */
/* Rows r0 .. r0 + n - 1's states over key block kb (bm, bl) go to bstat
 * and into the chunk's states (m, l); the block's states start over. */
inline void xattn_flush(__global float2 *bstat, int at, int k_blocks, int kb, int n,
                        float bm[XROWS], float bl[XROWS], float m[XROWS], float l[XROWS]) {
  for (int i = 0; i < XROWS; i++) {
    if (i < n) bstat[(ulong)(at + i) * k_blocks + kb] = (float2)(bm[i], bl[i]);
    const softmax_state st =
        softmax_merge(softmax_state_of(m[i], l[i]), softmax_state_of(bm[i], bl[i]));
    m[i] = st.m, l[i] = st.l, bm[i] = -INFINITY, bl[i] = 0.0f;
  }
}

__kernel void clpa_xattn_stats(KERNEL_PARAMS(XATTN_STATS_ARG_LIST)) {
  const int r0 = rbase + get_global_id(0) * XROWS, ph = get_global_id(1), ch = get_global_id(2);
  const int head = head0 + ph, num_chunks = get_global_size(2);
  if (r0 >= rend) return;
  const int n = min(XROWS, rend - r0);
  const xattn_src s = xattn_src_of(q, q_stride, head, k_cache, table, block_stride, head_stride,
                                   num_blocks, num_kv_heads, qpk, stride, scale, num_q, row0);
  const int c0 = ch * chunk_cols; /* a multiple of bs: a block lies in one chunk */
  const int c1 = min(c0 + chunk_cols, row0 + r0 + n); /* visible to the last row: c <= R(r) */
  float m[XROWS], l[XROWS], bm[XROWS], bl[XROWS], x[XROWS][XCOLS];
  int bad[XCOLS];
  for (int i = 0; i < XROWS; i++) m[i] = bm[i] = -INFINITY, l[i] = bl[i] = 0.0f;
  int faulted = 0, kb = c0 / bs;
  const int at = ph * (rend - rbase) + r0 - rbase; /* the piece's row */
  for (int cb = c0; cb < c1; cb += XCOLS) {
    const int nc = min(XCOLS, c1 - cb);
    xattn_scores(&s, r0, n, cb, nc, x, bad);
    if (bs % XCOLS == 0) { /* the tile lies in one key block: a vector update per row */
      if (cb / bs != kb) { /* the next key block */
        xattn_flush(bstat, at, k_blocks, kb, n, bm, bl, m, l);
        kb = cb / bs;
      }
      int okc[XCOLS];
      for (int j = 0; j < XCOLS; j++) {
        okc[j] = j < nc && !bad[j] ? -1 : 0;
        faulted |= j < nc && bad[j];
      }
      const int8 ok8 = vload8(0, okc);
      for (int i = 0; i < XROWS; i++) { /* columns cb + j <= R(r0 + i) are visible */
        const float8 v = select((float8)(-INFINITY), vload8(0, x[i]),
                                ok8 & (IOTA8 <= (int8)(row0 + r0 + i - cb)));
        const float tmax = vmax8(v);
        if (tmax == -INFINITY) continue;
        if (tmax > bm[i]) { /* online softmax: rescale the sum to the new max */
          bl[i] *= exp(bm[i] - tmax); /* e^(-inf) = 0 while empty */
          bm[i] = tmax;
        }
        bl[i] += VSUM(8, exp(v - bm[i]));
      }
      continue;
    }
    for (int j = 0; j < nc; j++) {
      const int c = cb + j;
      if (c / bs != kb) { /* the next key block */
        xattn_flush(bstat, at, k_blocks, kb, n, bm, bl, m, l);
        kb = c / bs;
      }
      if (bad[j]) {
        faulted = 1;
        continue;
      }
      for (int i = 0; i < XROWS; i++) {
        if (c > row0 + r0 + i) continue; /* not visible to this row (or past the rows) */
        if (x[i][j] > bm[i]) { /* online softmax: rescale the sum to the new max */
          bl[i] = bl[i] * exp(bm[i] - x[i][j]) + 1.0f;
          bm[i] = x[i][j];
        } else {
          bl[i] += exp(x[i][j] - bm[i]);
        }
      }
    }
  }
  if (c0 < c1) xattn_flush(bstat, at, k_blocks, kb, n, bm, bl, m, l);
  if (faulted) atomic_or(faults, CLPA_FAULT_BAD_BLOCK);
  const ulong cat = ((ulong)head * num_chunks + ch) * rows + r0;
  for (int i = 0; i < n; i++) stat_m[cat + i] = m[i], stat_l[cat + i] = l[i];
}

/* ---- phase 2: each row's chunk states merged (chunks in order) into
 * chunk 0's place. Grid (piece rows, piece heads). ---------------------- */
__kernel void clpa_xattn_merge(KERNEL_PARAMS(XATTN_MERGE_ARG_LIST)) {
  const int r = rbase + get_global_id(0), head = head0 + get_global_id(1);
  __global float *hm = stat_m + (ulong)head * num_chunks * rows + r;
  __global float *hl = stat_l + (ulong)head * num_chunks * rows + r;
  softmax_state st = softmax_empty();
  for (int ch = 0; ch < num_chunks; ch++)
    st = softmax_merge(st, softmax_state_of(hm[(ulong)ch * rows], hl[(ulong)ch * rows]));
  *hm = st.m, *hl = st.l;
}

/* ---- phase 3: block masses from the merged states --------------------- */
__kernel void clpa_xattn_mass(KERNEL_PARAMS(XATTN_MASS_ARG_LIST)) {
  const int kb = get_global_id(0), qb = rbase / bs + get_global_id(1), ph = get_global_id(2);
  const int head = head0 + ph, k_blocks = get_global_size(0);
  const ulong at = ((ulong)head * q_blocks + qb) * k_blocks + kb;
  if (kb > diag0 + qb) { /* after the diagonal: no visible pair */
    mass[at] = 0.0f;
    return;
  }
  __global const float *hm = stat_m + (ulong)head * num_chunks * rows;
  __global const float *hl = stat_l + (ulong)head * num_chunks * rows;
  float acc = 0.0f;
  const int r_end = min((qb + 1) * bs, rend); /* rend: rows, or a whole block's end */
  for (int r = qb * bs; r < r_end; r++) {
    if (kb * bs > row0 + r) continue; /* the block's first column is past the row */
    const softmax_state st = softmax_state_of(hm[r], hl[r]); /* phase 2's merge */
    const float2 b = bstat[((ulong)ph * (rend - rbase) + r - rbase) * k_blocks + kb];
    acc += softmax_weight(softmax_state_of(b.x, b.y), st); /* rows in increasing order */
  }
  mass[at] = acc;
}

/* ---- phase 4: selection per query block ------------------------------- */

/* Candidate block j (mass x) as an ascending sort key: mass descending,
 * then index ascending. A float's bits rise with it for x >= 0, which
 * masses are (sums of exponentials: never -0); a NaN mass makes the total
 * NaN, and then nothing past the forced blocks is kept in either order. */
inline ulong xsel_key(float x, int j) { return (ulong)(~as_uint(x)) << 32 | (uint)j; }
inline float xsel_mass(ulong key) { return as_float(~(uint)(key >> 32)); }

/* tau times the query block's total mass (blocks 0 .. d, summed in order). */
inline float xsel_cut(__global const float *w, int d, float tau) {
  float total = 0.0f;
  for (int kb = 0; kb <= d; kb++) total += w[kb];
  return tau * total;
}

/* Grid (q_blocks x XSEL_THREADS, num_heads), a work-group per query block:
 * block 0, the diagonal, then the rest by mass descending (ties by index)
 * while the running sum before a block is < tau T. The candidates (blocks
 * 1 .. d - 1) are sorted in local memory (bitonic), then one work-item
 * walks them, adding in that order as a sequential selection would, so
 * the mask is the same bit for bit; past XSEL_KEYS candidates one
 * work-item selects by repeated maximum instead. */
__kernel __attribute__((reqd_work_group_size(XSEL_THREADS, 1, 1))) void clpa_xattn_select(
    KERNEL_PARAMS(XATTN_SELECT_ARG_LIST)) {
  __local ulong key[XSEL_KEYS];
  __local uchar pick[XSEL_KEYS];
  __local float cut_at[1];
  const int lid = get_local_id(0), qb = get_group_id(0), head = get_group_id(1);
  const ulong row = ((ulong)head * get_num_groups(0) + qb) * k_blocks;
  __global const float *w = mass + row;
  __global uchar *out = mask + row;
  const int d = diag0 + qb, n = d - 1; /* d < k_blocks: the keys end with the last query */
  if (keep_all || d < 2 || n > XSEL_KEYS) {
    if (lid != 0) return;
    for (int kb = 0; kb < k_blocks; kb++) out[kb] = (uchar)(kb == 0 || kb == d || (keep_all && kb < d));
    if (keep_all || d < 2) return;
    const float cut = xsel_cut(w, d, tau);
    float acc = w[0] + w[d];
    /* Blocks 1 .. d-1 in order, by repeated selection of the largest after
     * the previous one. Stops at the cut, since the running sum only grows. */
    float prev_m = INFINITY;
    int prev_i = 0;
    for (int step = 1; step < d && acc < cut; step++) {
      int best = -1;
      for (int j = 1; j < d; j++) {
        const float x = w[j];
        if (!(x < prev_m || (x == prev_m && j > prev_i))) continue;
        if (best < 0 || x > w[best]) best = j;
      }
      if (best < 0) break;
      out[best] = 1;
      acc += w[best];
      prev_m = w[best];
      prev_i = best;
    }
    return;
  }
  int N = 1;
  while (N < n) N *= 2;
  for (int i = lid; i < N; i += XSEL_THREADS) {
    key[i] = i < n ? xsel_key(w[i + 1], i + 1) : (ulong)0xffffffffffffffffUL;
    pick[i] = 0;
  }
  if (lid == 0) cut_at[0] = xsel_cut(w, d, tau);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int k = 2; k <= N; k *= 2)
    for (int j = k / 2; j > 0; j /= 2) {
      for (int i = lid; i < N; i += XSEL_THREADS) {
        const int p = i ^ j;
        if (p <= i) continue;
        const ulong a = key[i], b = key[p];
        if ((a > b) == ((i & k) == 0)) key[i] = b, key[p] = a;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  if (lid == 0) {
    const float cut = cut_at[0];
    float acc = w[0] + w[d];
    for (int i = 0; i < n && acc < cut; i++) {
      const ulong c = key[i];
      pick[(int)(uint)c - 1] = 1;
      acc += xsel_mass(c);
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int kb = lid; kb < k_blocks; kb += XSEL_THREADS)
    out[kb] = (uchar)(kb == 0 || kb == d || (kb < d && pick[kb - 1]));
}
