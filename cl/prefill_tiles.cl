/* prefill_tiles.cl — prefill's portable path; built after prefill.cl (its arguments,
 * helpers and layouts: lib/launch.c's prefill families). */
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

/* Block-sparse: the work-group's first tile from k that a row keeps
 * (k_end if none; k itself without a mask), every work-item calling it:
 * each work-item's next kept key over its live rows (mask_next), kept in
 * *mine while it lies ahead, then the work-group's least (group_min):
 * three barriers a kept tile, none per skipped one. */
inline int tiles_next(int k, int k_end, __global const uchar *block_mask,
                      __global const uchar *const mrow[TM], const int live[TM], int mask_block,
                      int *mine, __local int *slot) {
  if (!block_mask) return k;
  if (*mine < k) {
    *mine = k_end;
    for (int i = 0; i < TM; i++)
      if (live[i]) *mine = min(*mine, mask_next(mrow[i], k, k_end, mask_block));
  }
  return group_min(*mine, slot);
}

__kernel __attribute__((reqd_work_group_size(NUM_THREADS, 1, 1))) void clpa_prefill_paged(
    PREFILL_ARGS) {
  __local float q_s[ROWS * QS];
  __local float kv_s[BK * QS];
  __local float p_s[ROWS * BK];
  __local float red[ROWS * CG];
  __local int kok[BK];
  __local int next_kept;

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

  /* Block-sparse: the tiles from k0 on that no row keeps are skipped
   * (next_tile: each work-item's next kept key over its rows, remembered
   * in `mine` while it lies ahead, then the work-group's least). */
  int mine = -1;
  for (int k0 = tiles_next(k_begin, k_end, block_mask, mrow, live, mask_block, &mine, &next_kept);
       k0 < k_end;
       k0 = tiles_next(k0 + BK, k_end, block_mask, mrow, live, mask_block, &mine, &next_kept)) {
    /* ---- 1b. which rows keep this tile's key block ---- */
    int keep[TM];
    for (int i = 0; i < TM; i++) keep[i] = !block_mask || (live[i] && mrow[i][k0 / mask_block]);
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
