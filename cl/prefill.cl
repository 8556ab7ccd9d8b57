/*
 * prefill.cl — paged attention for prefill: many new query tokens per
 * sequence over the paged cache, FlashAttention-2 style (Dao, 2023):
 * a work-group owns a tile of query rows, walks the keys in tiles read
 * through the block table, keeps each row's running max m and sum l and
 * rescales its output accumulator when m grows (common.cl's softmax
 * state), and normalises once at the end. Portable path: local memory
 * and barriers, f32 arithmetic, any OpenCL 1.2 device. Checked by
 * tests/test_prefill.c against clpa_ref_prefill (host/ref_attention.c).
 *
 * Rows. For sequence s with new_len new tokens, query row R of its
 * (KV head) group is token i = R / QPK (position p = cached_len + i) of
 * query head kv_head * QPK + R % QPK, so the QPK query heads that share a
 * KV head read each key tile once (GQA packing). R < new_len * QPK.
 *
 * Grid:  (num_tiles * NUM_THREADS, num_kv_heads); work[t] = (s, R0) says
 *        which sequence and first row tile t takes (host-built).
 * Group: NUM_THREADS work-items (the paths' own shapes below).
 *
 * Buffers (element counts):
 *   q            [total_new, q_stride]               head h at h * HEAD_SIZE
 *   k_cache      [num_blocks, num_kv_heads, HEAD_SIZE / X, BLOCK_SIZE, X]
 *   v_cache      [num_blocks, num_kv_heads, HEAD_SIZE, BLOCK_SIZE]
 *   block_tables [num_seqs, max_blocks_per_seq]       int32
 *   seq_info     [num_seqs, 3] int32: first new token (cu_seqlens_q[s]),
 *                new_len, cached_len
 *   work         [num_tiles, 2] int32: (s, R0)
 *   out          [total_new, num_heads, HEAD_SIZE]   io_t
 *   lse          [total_new, num_heads] float, or NULL
 *   block_mask   [num_seqs, num_heads, mask_qb, mask_kb] uchar, or NULL:
 *                block-sparse prefill (XAttention): query i of head h drops
 *                the keys of block j / mask_block when [i / mask_block] says 0
 *                (mask_block a multiple of 64, so a key tile or cache block
 *                lies in one mask block); a tile no row keeps is not read
 *
 * Keys of a tile: positions k0 .. k0 + BK - 1 (k0 a multiple of BK). For
 * row position p they take part when j < cached_len + new_len, j <= p if
 * causal, and p - j < window if window > 0; a block id outside the cache
 * masks its keys and sets CLPA_FAULT_BAD_BLOCK. Tiles wholly outside
 * every row's range are never read (nor their block ids checked).
 */
#ifndef CLPA_HEAD_SIZE
#define CLPA_HEAD_SIZE 128
#endif
#ifndef CLPA_BLOCK_SIZE
#define CLPA_BLOCK_SIZE 16
#endif
#ifndef CLPA_NUM_THREADS
#define CLPA_NUM_THREADS 128
#endif
#ifndef CLPA_ROWS
#define CLPA_ROWS 32 /* query rows per work-group */
#endif
#ifndef CLPA_KEYS
#define CLPA_KEYS 32 /* keys per tile */
#endif
#ifndef CLPA_PREFILL_PATH
#define CLPA_PREFILL_PATH 1 /* 1 tiles in local memory (clpa_prefill_paged), 2 rows per work-item (clpa_prefill_rows) */
#endif
#define HEAD_SIZE CLPA_HEAD_SIZE
#define BLOCK_SIZE CLPA_BLOCK_SIZE
#define NUM_THREADS CLPA_NUM_THREADS
#define ROWS CLPA_ROWS
#define BK CLPA_KEYS

/* Every path's kernel takes the same arguments (lib/prefill.c sets them once). */
#define PREFILL_ARGS                                                                            \
  __global io_t *out, __global float *lse, __global const io_t *q, ulong q_stride,             \
      __global const kv_t *k_cache, __global const kv_t *v_cache, ulong block_stride,         \
      ulong head_stride, __global const int *block_tables, int max_blocks_per_seq,            \
      __global const int *seq_info, __global const int *work, int num_blocks, int num_heads,  \
      int num_kv_heads, float scale, float k_scale, float v_scale,                            \
      __global const float *k_scales, __global const float *v_scales,                         \
      __global const float *alibi, float soft_cap, int window, __global const float *sinks,   \
      int causal, __global volatile int *faults, __global const uchar *block_mask,            \
      int mask_block, int mask_qb, int mask_kb

/* The physical block holding key position j of the sequence, or -1 when
 * j is outside [k_lo, kv_end) (keys before k_lo are outside every row's
 * window: their blocks are neither read nor checked) or its table entry
 * is outside the cache. */
inline int key_block(__global const int *table, int j, int k_lo, int kv_end, int num_blocks) {
  if (j < k_lo || j >= kv_end) return -1;
  const int phys = table[j / BLOCK_SIZE];
  return phys >= 0 && phys < num_blocks ? phys : -1;
}

/* Query row R of a tile (see the top): its head and position into *head
 * and *pos (a row past the sequence's nrows gets the KV head's first
 * query head at position cached, and is never written); whether it
 * exists. */
inline int tile_row(int R, int nrows, int qpk, int kv_head, int cached, int *head, int *pos) {
  const int live = R < nrows;
  *head = kv_head * qpk + (live ? R % qpk : 0);
  *pos = cached + (live ? R / qpk : 0);
  return live;
}

/* The block-mask row (mask_kb flags) of new token i of sequence s, query
 * head `head`; NULL without a mask. */
inline __global const uchar *mask_row(__global const uchar *block_mask, int s, int num_heads,
                                      int head, int i, int mask_block, int mask_qb, int mask_kb) {
  return block_mask ? block_mask + (((size_t)s * num_heads + head) * mask_qb + i / mask_block) *
                                       (size_t)mask_kb
                    : NULL;
}

/* The keys rows at positions p_lo .. p_hi walk: [k_lo, k_end) = (.x, .y),
 * up to the last row when causal, from the first row's window start. */
inline int2 tile_keys(int p_lo, int p_hi, int kv_end, int causal, int window) {
  return (int2)(window > 0 ? max(p_lo - window + 1, 0) : 0,
                causal ? min(kv_end, p_hi + 1) : kv_end);
}

#if CLPA_PREFILL_PATH == 1
/*
 * clpa_prefill_paged — the portable path: f32 products from local memory
 * in register tiles. The NUM_THREADS work-items form RGS row groups of CG
 * (RGS = min(ROWS, 16)); work-item (rg, cg) scores TM rows (r = rg + RGS
 * i) against TN keys of each tile (k = cg + CG j) with float4
 * accumulators, and owns those rows' output dimensions cg, cg + CG, ...
 * (float4s of them where HEAD_SIZE allows: dims 4 (cg + CG j) .. + 3).
 * So each query vector read from local memory serves TN keys and each key
 * vector TM rows (and in P V each value vector TM rows); rows of q_s and
 * kv_s are padded by 4 floats, so the CG work-items of a row group read
 * different banks. A row's max over the tile meets in local memory; its
 * sum l stays split over the CG work-items until the end.
 */
#define RGS (ROWS < 16 ? ROWS : 16) /* row groups */
#define CG (NUM_THREADS / RGS)      /* work-items a row group */
#define TM (ROWS / RGS)             /* rows a work-item */
#define TN (BK / CG)                /* keys a work-item scores per tile */
#define QS (HEAD_SIZE + 4)          /* floats a row of q_s and kv_s */
#define V4 (HEAD_SIZE % (4 * CG) == 0)
#if V4
#define DN (HEAD_SIZE / (4 * CG)) /* float4 output dimensions a work-item */
#else
#define DN ((HEAD_SIZE + CG - 1) / CG) /* output dimensions a work-item (the last may be past) */
#endif
#if NUM_THREADS % RGS || ROWS % RGS || BK % CG || HEAD_SIZE % 4 || BK % 4
#error "prefill tile shape: ROWS and BK must fit the work-group's row groups"
#endif
#if BLOCK_SIZE % 4
#error "prefill reads values 4 tokens at a time: BLOCK_SIZE must be a multiple of 4"
#endif

#define floatX CAT(float, KV_X)

/* ---- 1. load the query rows (zeros for rows past the sequence) ---- */
inline void load_rows(__local float *q_s, __global const io_t *q, ulong q_stride, int first,
                      int R0, int nrows, int qpk, int kv_head) {
  for (int e = get_local_id(0); e < ROWS * HEAD_SIZE; e += NUM_THREADS) {
    const int r = e / HEAD_SIZE, d = e % HEAD_SIZE, R = R0 + r;
    float v = 0.0f;
    if (R < nrows) {
      const ulong t = (ulong)(first + R / qpk);
      v = IO_LOAD(q, t * q_stride + (ulong)(kv_head * qpk + R % qpk) * HEAD_SIZE + d);
    }
    q_s[r * QS + d] = v;
  }
}

/* ---- 2. a tile of keys into kv_s[k][d], 16 bytes per load, and which
 * of them take part at all into kok[k]: keys past kv_end or in a bad
 * block (which sets the fault bit) are zeros and never scored ---- */
inline void load_keys(__local float *kv_s, __local int *kok, __global const kv_t *k_cache,
                      __global const int *table, int k0, int k_lo, int kv_end, int num_blocks,
                      int kv_head, ulong block_stride, ulong head_stride, float kscale,
                      __global volatile int *faults) {
  for (int k = get_local_id(0); k < BK; k += NUM_THREADS) {
    const int j = k0 + k;
    kok[k] = key_block(table, j, k_lo, kv_end, num_blocks) >= 0;
    if (j >= k_lo && j < kv_end && !kok[k]) atomic_or(faults, CLPA_FAULT_BAD_BLOCK);
  }
  for (int e = get_local_id(0); e < BK * (HEAD_SIZE / X); e += NUM_THREADS) {
    const int k = e / (HEAD_SIZE / X), d = (e % (HEAD_SIZE / X)) * X, j = k0 + k;
    const int phys = key_block(table, j, k_lo, kv_end, num_blocks);
    floatX v = (floatX)(0.0f);
    if (phys >= 0) {
      const ulong tile = kv_tile((ulong)phys, kv_head, block_stride, head_stride);
      v = KV_LOAD(KV_X, k_cache + tile + key_index(d, j % BLOCK_SIZE, BLOCK_SIZE)) * kscale;
    }
    CAT(vstore, KV_X)(v, 0, kv_s + k * QS + d);
  }
}

/* ---- 5. a tile of values into kv_s[k][d], 4 tokens of one row per load
 * (a value row is contiguous over a block's tokens) ---- */
inline void load_values(__local float *kv_s, __global const kv_t *v_cache,
                        __global const int *table, int k0, int k_lo, int kv_end, int num_blocks,
                        int kv_head, ulong block_stride, ulong head_stride, float vscale) {
  for (int e = get_local_id(0); e < (BK / 4) * HEAD_SIZE; e += NUM_THREADS) {
    const int d = e % HEAD_SIZE, k = (e / HEAD_SIZE) * 4, j = k0 + k;
    float4 v = (float4)(0.0f);
    /* 4 keys of one block (k0, k and BLOCK_SIZE are multiples of 4): ask
     * for the block with a key of it inside [k_lo, kv_end). */
    const int phys = key_block(table, max(j, k_lo), k_lo, kv_end, num_blocks);
    if (phys >= 0) {
      const ulong tile = kv_tile((ulong)phys, kv_head, block_stride, head_stride);
      v = KV_LOAD(4, v_cache + tile + value_index(d, j % BLOCK_SIZE, BLOCK_SIZE)) * vscale;
      /* Slots past the context may hold anything, NaN included: zero
       * them, since 0 * NaN is NaN. */
      const int4 jj = (int4)(j, j + 1, j + 2, j + 3);
      v = select((float4)(0.0f), v, jj < kv_end && jj >= k_lo);
    }
    kv_s[(k + 0) * QS + d] = v.s0;
    kv_s[(k + 1) * QS + d] = v.s1;
    kv_s[(k + 2) * QS + d] = v.s2;
    kv_s[(k + 3) * QS + d] = v.s3;
  }
}

/* v[i] over the CG work-items of row rg + RGS i, for each of this
 * work-item's TM rows (max or sum, in cg order); red holds ROWS * CG
 * floats. Every work-item of the work-group calls it (barriers). */
inline void rows_reduce(float v[TM], int is_max, __local float *red) {
  const int lid = get_local_id(0), rg = lid / CG, cg = lid % CG;
  for (int i = 0; i < TM; i++) red[(rg + RGS * i) * CG + cg] = v[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int i = 0; i < TM; i++) {
    __local const float *x = red + (rg + RGS * i) * CG;
    float s = x[0];
    for (int c = 1; c < CG; c++) s = is_max ? fmax(s, x[c]) : s + x[c];
    v[i] = s;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}

__kernel __attribute__((reqd_work_group_size(NUM_THREADS, 1, 1))) void clpa_prefill_paged(
    PREFILL_ARGS) {
  __local float q_s[ROWS * QS];
  __local float kv_s[BK * QS];
  __local float p_s[ROWS * BK];
  __local float red[ROWS * CG];
  __local int kok[BK];
  __local int any_kept;

  const int lid = get_local_id(0), rg = lid / CG, cg = lid % CG;
  const int s = work[2 * get_group_id(0)], R0 = work[2 * get_group_id(0) + 1];
  const int kv_head = get_group_id(1), qpk = num_heads / num_kv_heads;
  const int first = seq_info[3 * s], new_len = seq_info[3 * s + 1], cached = seq_info[3 * s + 2];
  const int nrows = new_len * qpk;
  const int kv_end = cached + new_len; /* keys of the sequence */
  __global const int *table = block_tables + (size_t)s * max_blocks_per_seq;
  const float kscale = !KV_IS_FP8 ? 1.0f : k_scales ? k_scales[0] : k_scale;
  const float vscale = !KV_IS_FP8 ? 1.0f : v_scales ? v_scales[0] : v_scale;

  /* This work-item's rows: row rg + RGS i of the tile. */
  int live[TM], head[TM], pos[TM];
  float slope[TM];
  __global const uchar *mrow[TM];
  for (int i = 0; i < TM; i++) {
    live[i] = tile_row(R0 + rg + RGS * i, nrows, qpk, kv_head, cached, &head[i], &pos[i]);
    slope[i] = alibi ? alibi[head[i]] : 0.0f;
    mrow[i] = mask_row(block_mask, s, num_heads, head[i], pos[i] - cached, mask_block, mask_qb,
                       mask_kb);
  }

  /* The tile's key range. */
  const int p_lo = cached + R0 / qpk, p_hi = cached + (min(R0 + ROWS, nrows) - 1) / qpk;
  const int2 keys = tile_keys(p_lo, p_hi, kv_end, causal, window);
  const int k_lo = keys.x, k_end = keys.y, k_begin = k_lo / BK * BK;

  load_rows(q_s, q, q_stride, first, R0, nrows, qpk, kv_head);

  /* The rows' softmax states (the sink as a logit that is already there;
   * l is split over the row's work-items, summed at the end). */
  float m[TM], l[TM];
  for (int i = 0; i < TM; i++) {
    m[i] = sinks ? sinks[head[i]] : -INFINITY;
    l[i] = sinks && cg == 0 ? 1.0f : 0.0f;
  }
#if V4
  float4 acc[TM][DN];
#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int j = 0; j < DN; j++) acc[i][j] = (float4)(0.0f);
#else
  float acc[TM][DN];
#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int j = 0; j < DN; j++) acc[i][j] = 0.0f;
#endif

  for (int k0 = k_begin; k0 < k_end; k0 += BK) {
    /* ---- 1b. block-sparse: does any row keep this tile's key block? ---- */
    int keep[TM], mine = 0;
    for (int i = 0; i < TM; i++) {
      keep[i] = !block_mask || (live[i] && mrow[i][k0 / mask_block]);
      mine |= keep[i];
    }
    if (block_mask) {
      barrier(CLK_LOCAL_MEM_FENCE);
      if (lid == 0) any_kept = 0;
      barrier(CLK_LOCAL_MEM_FENCE);
      if (mine) atomic_or(&any_kept, 1);
      barrier(CLK_LOCAL_MEM_FENCE);
      if (!any_kept) continue; /* the same answer for every work-item */
    }
    /* ---- 2. load the key tile ---- */
    barrier(CLK_LOCAL_MEM_FENCE);
    load_keys(kv_s, kok, k_cache, table, k0, k_lo, k_end, num_blocks, kv_head, block_stride,
              head_stride, kscale, faults);
    barrier(CLK_LOCAL_MEM_FENCE);

    /* ---- 3. scores: TM rows x TN keys, float4 accumulators ---- */
    float4 dot[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
      for (int j = 0; j < TN; j++) dot[i][j] = (float4)(0.0f);
    for (int d = 0; d < HEAD_SIZE; d += 4) {
      float4 qv[TM], kv[TN];
#pragma unroll
      for (int i = 0; i < TM; i++) qv[i] = vload4(0, q_s + (rg + RGS * i) * QS + d);
#pragma unroll
      for (int j = 0; j < TN; j++) kv[j] = vload4(0, kv_s + (cg + CG * j) * QS + d);
#pragma unroll
      for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) dot[i][j] = mad(qv[i], kv[j], dot[i][j]);
    }
    float sc[TM][TN], tmax[TM];
#pragma unroll
    for (int i = 0; i < TM; i++) {
      tmax[i] = -INFINITY;
#pragma unroll
      for (int j = 0; j < TN; j++) {
        const int k = cg + CG * j, jj = k0 + k;
        const float4 d4 = dot[i][j];
        float x = ((d4.s0 + d4.s1) + (d4.s2 + d4.s3)) * scale;
        if (soft_cap > 0.0f) x = soft_cap * tanh(x / soft_cap);
        x += slope[i] * (float)(jj - pos[i]);
        const int masked = !live[i] || !keep[i] || !kok[k] || (causal && jj > pos[i]) ||
                           (window > 0 && pos[i] - jj >= window);
        sc[i][j] = masked ? -INFINITY : x;
        tmax[i] = fmax(tmax[i], sc[i][j]);
      }
    }

    /* ---- 4. online softmax: new max, rescale, probabilities ---- */
    rows_reduce(tmax, 1, red);
#pragma unroll
    for (int i = 0; i < TM; i++) {
      const float mn = fmax(m[i], tmax[i]);
      const float alpha = mn == -INFINITY ? 1.0f : exp(m[i] - mn); /* 0 when m was -inf */
      l[i] *= alpha;
#pragma unroll
      for (int j = 0; j < TN; j++) {
        const float pr = sc[i][j] == -INFINITY ? 0.0f : exp(sc[i][j] - mn);
        p_s[(rg + RGS * i) * BK + cg + CG * j] = pr;
        l[i] += pr;
      }
      m[i] = mn;
      if (alpha != 1.0f) {
#pragma unroll
        for (int j = 0; j < DN; j++) acc[i][j] *= alpha;
      }
    }

    /* ---- 5. load the value tile and accumulate P V ---- */
    barrier(CLK_LOCAL_MEM_FENCE);
    load_values(kv_s, v_cache, table, k0, k_lo, k_end, num_blocks, kv_head, block_stride,
                head_stride, vscale);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < BK; k++) {
      float pr[TM];
#pragma unroll
      for (int i = 0; i < TM; i++) pr[i] = p_s[(rg + RGS * i) * BK + k];
#pragma unroll
      for (int j = 0; j < DN; j++) {
#if V4
        const float4 v = vload4(0, kv_s + k * QS + 4 * (cg + CG * j));
#else
        const int dd = cg + CG * j;
        const float v = kv_s[k * QS + (dd < HEAD_SIZE ? dd : 0)];
#endif
#pragma unroll
        for (int i = 0; i < TM; i++) acc[i][j] = mad(pr[i], v, acc[i][j]);
      }
    }
  }

  /* ---- 6. normalise once and write ---- */
  rows_reduce(l, 0, red);
  for (int i = 0; i < TM; i++) {
    if (!live[i]) continue;
    const int R = R0 + rg + RGS * i;
    const size_t row = (size_t)(first + R / qpk) * num_heads + head[i];
    const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
#pragma unroll
    for (int j = 0; j < DN; j++) {
#if V4
      const float4 o = acc[i][j] * inv;
      const size_t d = row * HEAD_SIZE + 4 * (cg + CG * j);
      IO_STORE(o.s0, out, d), IO_STORE(o.s1, out, d + 1);
      IO_STORE(o.s2, out, d + 2), IO_STORE(o.s3, out, d + 3);
#else
      const int dd = cg + CG * j;
      if (dd < HEAD_SIZE) IO_STORE(acc[i][j] * inv, out, row * HEAD_SIZE + dd);
#endif
    }
    if (lse && cg == 0) lse[row] = softmax_lse(softmax_state_of(m[i], l[i]));
  }
}

#endif /* CLPA_PREFILL_PATH == 1 */

#if CLPA_PREFILL_PATH == 2
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
 * Grid:  (num_items, num_kv_heads), work-groups of 1; work[t] = (s, R0)
 *        with rows R0 .. R0 + RG - 1 of sequence s (RG = CLPA_ROWS).
 */
#define RG ROWS /* query rows per work-item */
#define VLOADB(p) CAT(VLOAD, VB)(p)
#define KV_LOADB(p) KV_LOAD(VB, (p))
#define IOTAB CAT(IOTA, VB)
#define BCH (BLOCK_SIZE / VB) /* value vectors per block of tokens */
/* Key vectors sharing each query load: PTG x RG accumulators of 16 lanes. */
#define PTG_ (RG >= 16 ? 1 : RG >= 8 ? 2 : 4)
#define PTG (PTG_ < BLOCK_SIZE / VT ? PTG_ : BLOCK_SIZE / VT)
#ifndef CLPA_KEY_BLOCKS
#define CLPA_KEY_BLOCKS 4
#endif
#define GB CLPA_KEY_BLOCKS /* cache blocks a step: their P V products meet in registers */

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void clpa_prefill_rows(
    PREFILL_ARGS) {
  const int s = work[2 * get_group_id(0)], R0 = work[2 * get_group_id(0) + 1];
  const int kv_head = get_group_id(1), qpk = num_heads / num_kv_heads;
  const int first = seq_info[3 * s], new_len = seq_info[3 * s + 1], cached = seq_info[3 * s + 2];
  const int nrows = new_len * qpk, rows = min(RG, nrows - R0);
  const int kv_end = cached + new_len;
  __global const int *table = block_tables + (size_t)s * max_blocks_per_seq;
  const float kscale = !KV_IS_FP8 ? 1.0f : k_scales ? k_scales[0] : k_scale;
  const float vscale = !KV_IS_FP8 ? 1.0f : v_scales ? v_scales[0] : v_scale;

  /* ---- 1. the rows: queries, positions, slopes; the accumulators keep
   * one lane per token offset of a value vector, summed once at the end
   * (no horizontal sum per block) ---- */
  float qr[RG][HEAD_SIZE];
  floatB acc[RG][HEAD_SIZE];
  float m[RG], l[RG], slope[RG];
  int pos[RG], head[RG];
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
    m[r] = sinks ? sinks[head[r]] : -INFINITY;
    l[r] = sinks ? 1.0f : 0.0f;
  }
  float16 q16[RG][HEAD_SIZE / KV_X]; /* query chunks repeated VT times (kv.cl's QREP) */
  for (int r = 0; r < RG; r++)
    for (int c = 0; c < HEAD_SIZE / KV_X; c++) q16[r][c] = QREP(&qr[r][c * KV_X]);
  const int2 keys = tile_keys(pos[0], pos[rows - 1], kv_end, causal, window);
  const int k_lo = keys.x, k_end = keys.y;

  __global const uchar *mrow[RG];
  for (int r = 0; r < RG; r++)
    mrow[r] = mask_row(block_mask, s, num_heads, head[r], pos[r] - cached, mask_block, mask_qb,
                       mask_kb);

  for (int b0 = k_lo / BLOCK_SIZE; b0 * BLOCK_SIZE < k_end; b0 += GB) {
    /* The step's blocks that count: nv of them, with their value tiles and
     * first tokens; the scores of block g at sc[r][g * BLOCK_SIZE ..]. */
    __global const kv_t *vbs[GB];
    int j0s[GB], nv = 0;
    float sc[RG][GB * BLOCK_SIZE];
    for (int b = b0; b < b0 + GB && b * BLOCK_SIZE < k_end; b++) {
      /* Block-sparse: rows that drop this block's mask block; none keeps it: skip. */
      int keep[RG], any = 0;
      for (int r = 0; r < RG; r++) {
        keep[r] = !block_mask || (r < rows && mrow[r][(b * BLOCK_SIZE) / mask_block]);
        any |= keep[r];
      }
      if (!any) continue;
      const int phys = table[b];
      if (phys < 0 || phys >= num_blocks) {
        atomic_or(faults, CLPA_FAULT_BAD_BLOCK);
        continue; /* its keys are masked */
      }
      const ulong tile = kv_tile((ulong)phys, kv_head, block_stride, head_stride);
      __global const kv_t *kb = k_cache + tile;
      const int j0 = b * BLOCK_SIZE;
      vbs[nv] = v_cache + tile, j0s[nv] = j0;

      /* ---- 2. scores of the block's keys, per row: PTG key vectors (VT
       * tokens each, kv.cl) share each query load ---- */
      for (int o0 = 0; o0 < BLOCK_SIZE / VT; o0 += PTG) {
        float16 ka[PTG][RG];
        ROWS_KEY_PRODUCTS(ka, PTG, RG, kb, o0, q16, kscale, BLOCK_SIZE);
#pragma unroll
        for (int i = 0; i < PTG; i++) {
          const int j = j0 + (o0 + i) * VT; /* tokens j .. j + VT - 1 */
          const intT jj = IOTAT + j;
#pragma unroll
          for (int r = 0; r < RG; r++) {
            floatT x = token_sums(ka[i][r]) * scale;
            if (soft_cap > 0.0f) x = soft_cap * tanh(x / soft_cap);
            if (alibi) x += slope[r] * CAT(TO_FLOAT, VT)(jj - pos[r]);
            intT masked = (jj < k_lo) | (jj >= k_end);
            if (causal) masked |= jj > pos[r];
            if (window > 0) masked |= pos[r] - jj >= window;
            x = keep[r] ? select(x, (floatT)(-INFINITY), masked) : (floatT)(-INFINITY);
#if VT == 1
            sc[r][nv * BLOCK_SIZE + j - j0] = x;
#else
            CAT(vstore, VT)(x, 0, &sc[r][nv * BLOCK_SIZE + j - j0]);
#endif
          }
        }
      }
      nv++;
    }
    if (nv == 0) continue;

    /* ---- 3. online softmax over the step's blocks, per row ---- */
    floatB pb[RG][GB * BCH];
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

    /* ---- 4. P V: each value row is contiguous over a block's tokens; the
     * step's products for one dimension meet in registers, then one add
     * to each row's accumulator. Slots past the context (or before the
     * window) may hold NaN: zero them ---- */
    for (int d = 0; d < HEAD_SIZE; d++) {
      floatB t[RG];
#pragma unroll
      for (int r = 0; r < RG; r++) t[r] = (floatB)(0.0f);
#pragma unroll
      for (int g = 0; g < GB; g++) {
        if (g < nv) {
#pragma unroll
          for (int c = 0; c < BCH; c++) {
            floatB v = KV_LOADB(vbs[g] + value_index(d, c * VB, BLOCK_SIZE)) * vscale;
            const intB jj = IOTAB + (j0s[g] + c * VB);
            v = select((floatB)(0.0f), v, jj >= k_lo && jj < k_end);
#pragma unroll
            for (int r = 0; r < RG; r++) t[r] = fma(pb[r][g * BCH + c], v, t[r]);
          }
        }
      }
#pragma unroll
      for (int r = 0; r < RG; r++) acc[r][d] += t[r];
    }
  }

  /* ---- 5. normalise once and write ---- */
  for (int r = 0; r < rows; r++) {
    const size_t row = (size_t)(first + (R0 + r) / qpk) * num_heads + head[r];
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    for (int d = 0; d < HEAD_SIZE; d++) IO_STORE(VSUM(VB, acc[r][d]) * inv, out, row * HEAD_SIZE + d);
    if (lse) lse[row] = softmax_lse(softmax_state_of(m[r], l[r]));
  }
}
#endif /* CLPA_PREFILL_PATH == 2 */

#if CLPA_PREFILL_PATH == 3
/*
 * clpa_prefill_mma — the same attention on tensor cores (mma.cl: on
 * NVIDIA mma.sync m16n8k16, operands in the cache's dtype, f16 or bf16,
 * f32 accumulation; emulated elsewhere, for tests), FlashAttention-2's
 * shape: a work-group of WARPS warps owns ROWS = 16 * WARPS query rows,
 * 16 a warp, whose queries stay in registers as A fragments (rounded to
 * the operand type). Per tile of BK keys the work-group copies the keys
 * (a row of HEAD_SIZE per key) and the values (a row of BK keys per
 * dimension, as the value cache keeps them) into local memory, 16 bytes
 * per copy, rows padded by 16 bytes so that fragment reads hit 32
 * different banks; each warp computes S = Q K^T (16 x BK, f32), the
 * online softmax on S's fragments in base 2 (row max and sum over the 4
 * lanes that share a row) and O += P V with P rounded to the operand
 * type. As in FlashAttention-2 the copies overlap the products: the
 * values of a tile arrive while S is computed, the next tile's keys while
 * P V is (cp.async on NVIDIA); with STAGES = 2 (where local memory holds
 * two tiles) the next tile's keys and values both arrive while the whole
 * tile is computed, one barrier a tile. Operands come out of local
 * memory through ldmatrix (mma_ldm4). Tiles that need no mask (keys
 * inside every row's range, valid blocks, no block mask) skip the
 * per-element masking; the output is rescaled only where a row's maximum
 * moved. Same arguments, masks and results as clpa_prefill_paged.
 *
 * Local memory: STAGES * (BK * (HEAD_SIZE + 8) + HEAD_SIZE * (BK + 8))
 * halves.
 */
#define WARPS (NUM_THREADS / 32)
#ifndef CLPA_STAGES
#define CLPA_STAGES 1
#endif
#define STAGES CLPA_STAGES /* key and value tiles in flight: 1 or 2 */
#if ROWS != 16 * WARPS || NUM_THREADS % 32 || NUM_THREADS % BK || BK % 32 || HEAD_SIZE % 16 || \
    BLOCK_SIZE % 8 || (BK % BLOCK_SIZE && BLOCK_SIZE % BK) || (STAGES != 1 && STAGES != 2)
#error "prefill mma shape: 16 rows a warp, BK of 32, HEAD_SIZE of 16, BLOCK_SIZE of 8, 1-2 stages"
#endif
#if KV_BYTES != 2
#error "prefill mma: the cache must be f16 or bf16"
#endif
#define KSTEPS (HEAD_SIZE / 16)  /* k-steps of Q K^T */
#define DTILES (HEAD_SIZE / 8)   /* n-tiles of O */
#define STILES (BK / 8)          /* n-tiles of S */
#define KROW (HEAD_SIZE / 2 + 4) /* 32-bit words per key row in local memory */
#define VROW (BK / 2 + 4)        /* 32-bit words per value row */
#define PART (BLOCK_SIZE < BK ? BLOCK_SIZE : BK) /* keys of one cache block in a tile */
#define KTILE (BK * KROW / 4)        /* uint4 of a key tile */
#define VTILE (HEAD_SIZE * VROW / 4) /* uint4 of a value tile */
#define LOG2E 1.4426950408889634f

/* Tile k0's keys into k_s and their flags into kok: keys outside [k_lo,
 * k_end) or in a bad block (which sets the fault bit) are zeros, flagged
 * off. Work-item l copies key l % BK. */
inline void mma_load_keys(__local uint4 *k_s, __local int *kok, __global const kv_t *k_cache,
                          __global const int *table, int k0, int k_lo, int k_end,
                          int num_blocks, int kv_head, ulong block_stride, ulong head_stride,
                          __global volatile int *faults) {
  const int lid = get_local_id(0), k = lid % BK, j = k0 + k;
  const int phys = key_block(table, j, k_lo, k_end, num_blocks);
  if (lid < BK) {
    kok[k] = phys >= 0;
    if (j >= k_lo && j < k_end && phys < 0) atomic_or(faults, CLPA_FAULT_BAD_BLOCK);
  }
  /* key_index(8 c, o): chunk c of token o is uint4 number c * BLOCK_SIZE + o */
  __global const uint4 *src =
      (__global const uint4 *)(k_cache + kv_tile((ulong)max(phys, 0), kv_head, block_stride,
                                                 head_stride)) + j % BLOCK_SIZE;
  for (int c = lid / BK; c < HEAD_SIZE / 8; c += NUM_THREADS / BK) {
    __local uint4 *dst = k_s + k * (KROW / 4) + c;
    if (phys >= 0) mma_copy16(dst, src + c * BLOCK_SIZE);
    else *dst = (uint4)(0u);
  }
}

/* Tile k0's values into v_s, a block's part at a time (its rows are
 * contiguous): parts with no key in [k_lo, k_end) or in a bad block are
 * zeros; slots outside the range are zeroed by mma_fix_values once the
 * copies have landed. */
inline void mma_load_values(__local uint4 *v_s, __global const kv_t *v_cache,
                            __global const int *table, int k0, int k_lo, int k_end,
                            int num_blocks, int kv_head, ulong block_stride, ulong head_stride) {
  const int lid = get_local_id(0);
  for (int kb = 0; kb < BK; kb += PART) {
    const int j0 = k0 + kb;
    const int phys = j0 + PART > k_lo && j0 < k_end
                         ? key_block(table, max(j0, k_lo), k_lo, k_end, num_blocks)
                         : -1;
    /* value_index(d, o): 8 tokens from o are uint4 number (d * BLOCK_SIZE + o) / 8 */
    __global const uint4 *src =
        (__global const uint4 *)(v_cache + kv_tile((ulong)max(phys, 0), kv_head, block_stride,
                                                   head_stride)) + j0 % BLOCK_SIZE / 8;
    for (int e = lid; e < HEAD_SIZE * (PART / 8); e += NUM_THREADS) {
      const int cc = e % (PART / 8), d = e / (PART / 8);
      __local uint4 *dst = v_s + d * (VROW / 4) + kb / 8 + cc;
      if (phys >= 0) mma_copy16(dst, src + d * (BLOCK_SIZE / 8) + cc);
      else *dst = (uint4)(0u);
    }
  }
}

/* Zeroes the value slots of tile k0 outside [k_lo, k_end), which may hold
 * anything, NaN included (0 * NaN is NaN), in the chunks this work-item
 * copied (after mma_copy_wait). */
inline void mma_fix_values(__local uint4 *v_s, int k0, int k_lo, int k_end) {
  if (k0 >= k_lo && k0 + BK <= k_end) return;
  for (int kb = 0; kb < BK; kb += PART)
    for (int e = get_local_id(0); e < HEAD_SIZE * (PART / 8); e += NUM_THREADS) {
      const int cc = e % (PART / 8), d = e / (PART / 8), j = k0 + kb + cc * 8;
      if (j >= k_lo && j + 8 <= k_end) continue;
      __local uint4 *p = v_s + d * (VROW / 4) + kb / 8 + cc;
      const int8 jj = (int8)(j) + IOTA8;
      *p = as_uint4(select((ushort8)(0), as_ushort8(*p), convert_short8(jj >= k_lo && jj < k_end)));
    }
}

/* Block-sparse: the first tile from k0 that a row of the work-group
 * keeps (k_end if none); every work-item calls it (a vote in local
 * memory). m0 / m1: this work-item's rows' mask rows, NULL for a row
 * past the end. Without a mask, k0. */
inline int mma_next_tile(int k0, int k_end, int sparse, __global const uchar *m0,
                         __global const uchar *m1, int mask_block, __local int *any) {
  if (!sparse) return k0;
  for (; k0 < k_end; k0 += BK) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0) *any = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if ((m0 && m0[k0 / mask_block]) || (m1 && m1[k0 / mask_block])) atomic_or(any, 1);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (*any) break; /* the same answer for every work-item */
  }
  return min(k0, k_end);
}

__kernel __attribute__((reqd_work_group_size(NUM_THREADS, 1, 1))) void clpa_prefill_mma(
    PREFILL_ARGS) {
  __local uint4 k_s[STAGES * KTILE];
  __local uint4 v_s[STAGES * VTILE];
  __local uint xch[MMA_XCH];
  __local int kok[STAGES * BK];
  __local int any_kept;
  (void)k_scale, (void)v_scale, (void)k_scales, (void)v_scales; /* no fp8 here */

  const int lid = get_local_id(0), lane = lid % 32, warp = lid / 32, g = lane / 4, t = lane % 4;
  const int s = work[2 * get_group_id(0)], R0 = work[2 * get_group_id(0) + 1];
  const int kv_head = get_group_id(1), qpk = num_heads / num_kv_heads;
  const int first = seq_info[3 * s], new_len = seq_info[3 * s + 1], cached = seq_info[3 * s + 2];
  const int nrows = new_len * qpk, kv_end = cached + new_len;
  __global const int *table = block_tables + (size_t)s * max_blocks_per_seq;

  /* This lane's two rows: g and g + 8 of its warp's 16 (index 0 and 1). */
  int live[2], head[2], pos[2];
  float slope[2];
  __global const uchar *mrow[2];
  for (int h = 0; h < 2; h++) {
    live[h] = tile_row(R0 + warp * 16 + g + 8 * h, nrows, qpk, kv_head, cached, &head[h], &pos[h]);
    slope[h] = alibi ? alibi[head[h]] : 0.0f;
    mrow[h] = live[h] ? mask_row(block_mask, s, num_heads, head[h], pos[h] - cached, mask_block,
                                 mask_qb, mask_kb)
                      : NULL;
  }

  /* The work-group's key range. */
  const int p_lo = cached + R0 / qpk, p_hi = cached + (min(R0 + ROWS, nrows) - 1) / qpk;
  const int2 keys = tile_keys(p_lo, p_hi, kv_end, causal, window);
  const int k_lo = keys.x, k_end = keys.y;
  const int sparse = block_mask != NULL;
  const int plain = soft_cap <= 0.0f && !alibi; /* logits are scaled products */

  /* ---- 1. queries as A fragments ---- */
  uint4 qa[KSTEPS];
  MMA_UNROLL
  for (int ks = 0; ks < KSTEPS; ks++) {
    float f[8];
    for (int e = 0; e < 8; e++) {
      const int h = e / 2 % 2, d = ks * 16 + 2 * t + (e / 4) * 8 + e % 2;
      const int R = R0 + warp * 16 + g + 8 * h;
      f[e] = live[h] ? IO_LOAD(q, (ulong)(first + R / qpk) * q_stride +
                                      (ulong)head[h] * HEAD_SIZE + d)
                     : 0.0f;
    }
    qa[ks] = (uint4)(mma_pack(f[0], f[1]), mma_pack(f[2], f[3]), mma_pack(f[4], f[5]),
                     mma_pack(f[6], f[7]));
  }

  /* Softmax state per row, base 2 (m2 = m log2 e); l is this lane's part. */
  float m2[2], l[2];
  for (int h = 0; h < 2; h++) {
    m2[h] = sinks ? sinks[head[h]] * LOG2E : -INFINITY;
    l[h] = sinks && t == 0 ? 1.0f : 0.0f;
  }
  float4 o[DTILES];
  MMA_UNROLL
  for (int n = 0; n < DTILES; n++) o[n] = (float4)(0.0f);

  int k0 = mma_next_tile(k_lo / BK * BK, k_end, sparse, mrow[0], mrow[1], mask_block, &any_kept);
  if (k0 < k_end) {
    mma_load_keys(k_s, kok, k_cache, table, k0, k_lo, k_end, num_blocks, kv_head, block_stride,
                  head_stride, faults);
#if STAGES == 2
    mma_load_values(v_s, v_cache, table, k0, k_lo, k_end, num_blocks, kv_head, block_stride,
                    head_stride);
#endif
  }
  for (int stage = 0; k0 < k_end; stage = STAGES - 1 - stage) {
    __local uint4 *ks_s = k_s + stage * KTILE, *vs_s = v_s + stage * VTILE;
    __local const int *ok = kok + stage * BK;
    __local const uint *kw = (__local const uint *)ks_s, *vw = (__local const uint *)vs_s;
    /* ---- 2. keys here (and values, with 2 stages); the next ones on their way ---- */
    mma_copy_wait();
#if STAGES == 2
    mma_fix_values(vs_s, k0, k_lo, k_end);
    barrier(CLK_LOCAL_MEM_FENCE);
    const int next =
        mma_next_tile(k0 + BK, k_end, sparse, mrow[0], mrow[1], mask_block, &any_kept);
    if (next < k_end) {
      const int o1 = 1 - stage;
      mma_load_keys(k_s + o1 * KTILE, kok + o1 * BK, k_cache, table, next, k_lo, k_end,
                    num_blocks, kv_head, block_stride, head_stride, faults);
      mma_load_values(v_s + o1 * VTILE, v_cache, table, next, k_lo, k_end, num_blocks, kv_head,
                      block_stride, head_stride);
    }
#else
    barrier(CLK_LOCAL_MEM_FENCE);
    mma_load_values(vs_s, v_cache, table, k0, k_lo, k_end, num_blocks, kv_head, block_stride,
                    head_stride);
#endif

    /* Whether every score of the tile counts: all keys inside every row's
     * range and in valid blocks, no block mask. */
    int full = !sparse && k0 >= k_lo && k0 + BK <= k_end && (!causal || k0 + BK - 1 <= p_lo) &&
               (window <= 0 || p_hi - k0 < window);
    for (int b = 0; b < BK && full; b += PART) full = ok[b];
    const int keep0 = !sparse || (mrow[0] && mrow[0][k0 / mask_block]);
    const int keep1 = !sparse || (mrow[1] && mrow[1][k0 / mask_block]);

    /* ---- 3. S = Q K^T: key n * 8 + g of the tile is column g of n-tile n ---- */
    float4 sc[STILES];
    MMA_UNROLL
    for (int n = 0; n < STILES; n++) {
      float4 acc = (float4)(0.0f);
      MMA_UNROLL
      for (int ks = 0; ks < KSTEPS; ks += 2) {
        if (ks + 1 < KSTEPS) {
          const uint4 b = mma_ldm4(kw, KROW, n * 8, ks * 8);
          acc = mma_16816(acc, qa[ks], b.xy, xch);
          acc = mma_16816(acc, qa[ks + 1], b.zw, xch);
        } else {
          acc = mma_16816(acc, qa[ks], mma_ldm2(kw, KROW, n * 8, ks * 8), xch);
        }
      }
      sc[n] = acc;
    }

    /* ---- 4. logits in base 2, masked where needed ---- */
    if (full && plain) {
      MMA_UNROLL
      for (int n = 0; n < STILES; n++) sc[n] *= scale * LOG2E;
    } else {
      MMA_UNROLL
      for (int n = 0; n < STILES; n++) {
        float x[4] = {sc[n].x, sc[n].y, sc[n].z, sc[n].w};
        for (int i = 0; i < 4; i++) {
          const int h = i / 2, k = n * 8 + 2 * t + i % 2, j = k0 + k;
          float v = x[i] * scale;
          if (soft_cap > 0.0f) v = soft_cap * tanh(v / soft_cap);
          v += slope[h] * (float)(j - pos[h]);
          const int masked = !full && (!live[h] || !(h ? keep1 : keep0) || !ok[k] ||
                                       (causal && j > pos[h]) ||
                                       (window > 0 && pos[h] - j >= window));
          x[i] = masked ? -INFINITY : v * LOG2E;
        }
        sc[n] = (float4)(x[0], x[1], x[2], x[3]);
      }
    }

    /* ---- 5. online softmax per row; P as A fragments ---- */
    float alpha[2];
    uint4 pa[BK / 16];
    MMA_SOFTMAX_STEP(sc, STILES, m2, l, alpha, pa, xch);

#if STAGES == 1
    /* ---- 6. values here; the next tile's keys on their way ---- */
    mma_copy_wait();
    mma_fix_values(vs_s, k0, k_lo, k_end);
    barrier(CLK_LOCAL_MEM_FENCE);
    const int next =
        mma_next_tile(k0 + BK, k_end, sparse, mrow[0], mrow[1], mask_block, &any_kept);
    if (next < k_end)
      mma_load_keys(k_s, kok, k_cache, table, next, k_lo, k_end, num_blocks, kv_head,
                    block_stride, head_stride, faults);
#endif

    /* ---- 7. O = O alpha + P V: dimension n * 8 + g is column g of n-tile n ---- */
    if (alpha[0] != 1.0f || alpha[1] != 1.0f) {
      MMA_UNROLL
      for (int n = 0; n < DTILES; n++) o[n] *= (float4)(alpha[0], alpha[0], alpha[1], alpha[1]);
    }
    MMA_UNROLL
    for (int n = 0; n < DTILES; n++) {
      MMA_UNROLL
      for (int ks = 0; ks < BK / 16; ks += 2) {
        const uint4 b = mma_ldm4(vw, VROW, n * 8, ks * 8);
        o[n] = mma_16816(o[n], pa[ks], b.xy, xch);
        o[n] = mma_16816(o[n], pa[ks + 1], b.zw, xch);
      }
    }
    k0 = next;
  }

  /* ---- 8. normalise once and write ---- */
  float inv[2];
  for (int h = 0; h < 2; h++) {
    l[h] = quad_reduce(l[h], 0, xch);
    inv[h] = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
  }
  for (int h = 0; h < 2; h++) {
    if (!live[h]) continue;
    const int R = R0 + warp * 16 + g + 8 * h;
    const size_t row = (size_t)(first + R / qpk) * num_heads + head[h];
    MMA_UNROLL
    for (int n = 0; n < DTILES; n++) {
      const float2 v = (h ? o[n].zw : o[n].xy) * inv[h];
      IO_STORE(v.x, out, row * HEAD_SIZE + n * 8 + 2 * t);
      IO_STORE(v.y, out, row * HEAD_SIZE + n * 8 + 2 * t + 1);
    }
    if (lse && t == 0) lse[row] = softmax_lse(softmax_state_of(m2[h] / LOG2E, l[h]));
  }
}
#endif /* CLPA_PREFILL_PATH == 3 */
