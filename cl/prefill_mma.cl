/* prefill_mma.cl — prefill's tensor-core path; built after prefill.cl (its arguments,
 * helpers and layouts: lib/launch.c's prefill families). */
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
#ifndef CLPA_SPARSE
#define CLPA_SPARSE 1 /* the build for calls with a block mask (mma_next_tile) */
#endif
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
 * keeps (k_end if none); every work-item calls it. m0 / m1: this
 * work-item's rows' mask rows, NULL for a row past the end. Without a
 * mask, k0. Two forms, both correct for any mask:
 * - CLPA_SPARSE (the build for calls with a mask): each work-item finds
 *   the next kept mask block of its own rows from k0 on, remembered in
 *   *mine (its next kept key, >= the k0 it was found for: the scan only
 *   moves forward), then the work-group takes the least (local
 *   atomic_min): three barriers a kept tile however many are skipped.
 *   Kept positions are block starts (multiples of 64, so of BK) or k0.
 * - otherwise (the dense build) a vote per tile, three barriers each (at
 *   64k tokens 2048 tiles a work-group: H100 XAttention sparse prefill
 *   70.5 ms against 53.9 with the scan). Kept for dense calls because
 *   NVIDIA's compiler gives the kernel 168 registers with it and 214
 *   without it or 176 with the scan: past 170 only two work-groups fit an
 *   SM, and dense prefill ran 113 -> 97 TFLOP/s (notes/perf.md). */
#if CLPA_SPARSE
#define MMA_NEXT_STATE int mine = -1; /* mma_next_tile's memory */
#define MMA_NEXT_TILE(k) \
  mma_next_tile(k, k_end, sparse, mrow[0], mrow[1], mask_block, &mine, &next_kept)
inline int mma_next_tile(int k0, int k_end, int sparse, __global const uchar *m0,
                         __global const uchar *m1, int mask_block, int *mine, __local int *next) {
  if (!sparse) return k0;
  if (*mine < k0)
    *mine = min(mask_next(m0, k0, k_end, mask_block), mask_next(m1, k0, k_end, mask_block));
  return group_min(*mine, next);
}
#else
#define MMA_NEXT_STATE
#define MMA_NEXT_TILE(k) mma_next_tile(k, k_end, sparse, mrow[0], mrow[1], mask_block, &next_kept)
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
#endif

__kernel __attribute__((reqd_work_group_size(NUM_THREADS, 1, 1))) void clpa_prefill_mma(
    PREFILL_ARGS) {
  __local uint4 k_s[STAGES * KTILE];
  __local uint4 v_s[STAGES * VTILE];
  __local uint xch[MMA_XCH];
  __local int kok[STAGES * BK];
  __local int next_kept;
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

  MMA_NEXT_STATE
  int k0 = MMA_NEXT_TILE(k_lo / BK * BK);
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
    const int next = MMA_NEXT_TILE(k0 + BK);
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
    const int next = MMA_NEXT_TILE(k0 + BK);
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
