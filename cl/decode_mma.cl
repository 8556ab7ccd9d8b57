/*
 * decode_mma.cl — decode on tensor cores for GQA (mma.cl: mma.sync
 * m16n8k16 on NVIDIA, f16, bf16 or fp8 caches (fp8 pairs converted to f16
 * pairs in registers, exactly), f32 accumulation; f32 caches through
 * m16n8k8 on tf32, 3xTF32, whose fragments hold one element where
 * m16n8k16's hold a pair, so the bookkeeping below is the same with
 * k-steps of 2 dimensions or tokens a register; emulated elsewhere, for
 * tests). Same arguments, grid and results as decode.cl's
 * clpa_decode_paged; in v2 the partitions write their states, and the
 * last of a row's to finish, told by a counter (part_counts), merges them
 * and writes the output (steps 7 and 8, decode_merge.cl's decode_last_part and
 * decode_merge_parts), with no reduce kernel (CLPA_MERGE 1; with 0, on
 * devices without device-scope ordering, reduce.cl's kernel merges after
 * the launch). Checked by tests/test_decode.c
 * against clpa_ref_decode.
 *
 * Decode is a stream over K and V with a few query heads: the work per
 * byte must be a handful of instructions, or the kernel is bound by issue
 * rather than by memory (decode.cl spends ~14 per element with 4 heads).
 * Here the tokens and the value dimensions are the 16 rows of the
 * products and the G <= 16 query heads of one KV head the columns (NH
 * n-tiles of 8), so each warp instruction consumes 16 x 16 cache elements
 * and no tensor work is spent on padding rows:
 *
 *   S^T  = K Q^T     M = the 16 tokens of a chunk, N = heads, K = dimensions
 *   O^T += V^T P^T   M = 16 dimensions,            N = heads, K = the chunk's tokens
 *
 * Every K and V element goes from the cache straight into an operand
 * register, once:
 *   - keys: the sum over dimensions allows any order, so lane (g, t)
 *     loads 16-byte rows of the key layout (dimensions X (4 P + t) ..
 *     + X - 1 of its tokens, X = 8, 16 for fp8, 4 for f32) and uses them
 *     for the KSPR k-steps P KSPR + j, 4 dimensions each (f32: 2); the
 *     queries' B fragments take the same order;
 *   - S^T's C fragment (lane: rows g, g + 8 = tokens; columns 2t, 2t + 1
 *     = heads), rounded to the cache dtype (f16 for fp8; f32 split into
 *     high parts and remainders), is P^T's B fragment once each 8 x 8 half
 *     is transposed across the warp (mma_trans: movmatrix; f32's 32-bit
 *     values as two 16-bit halves, mma_trans32);
 *   - for that, row r of S^T is token TOK(r) of the chunk, chosen so that
 *     the tokens a lane's V^T fragment needs are 4 consecutive ones: lane
 *     t reads value rows g and g + 8 at tokens 4t .. 4t + 3 (8 bytes each,
 *     4 of fp8, 16 of f32: two k-steps of 2 tokens).
 *
 *   TOK(r): r  0  1  2  3  4  5  6  7 |  8  9 10 11 12 13 14 15
 *           t  0  1  4  5  8  9 12 13 |  2  3  6  7 10 11 14 15
 *
 *   With fp8's chunks of two m-tiles (MSUB, below), m-tile s's row r is
 *   token 8 (r' / 2) + r' % 2 + 2 (r / 8) + 4 s (r' = r % 8), so lane t
 *   reads its value rows at tokens 8t .. 8t + 7 (8 bytes): k-step s takes
 *   8t + 4s .. 8t + 4s + 3.
 *
 * The softmax runs over each column (a head): its max over the 8 lanes of
 * a column (mma_col_reduce), once per chunk; each lane keeps its own part
 * of the sum until the end. The warps take chunks in turn (on NVIDIA, with
 * 256 tokens a warp or more, as they ask) and merge their states and
 * outputs in local memory at the end.
 *
 * Where a call's time goes (a %globaltimer trace of every warp):
 * docs/decisions/0012-decode-mma-kernel.md.
 *
 * Grid:  (num_heads / G * NUM_THREADS, num_seqs, partitions)
 * Group: NUM_THREADS work-items, whole warps of 32.
 * Buffers: as decode.cl's (decode_args.h); the cache layouts
 *   k_cache [num_blocks, num_kv_heads, HEAD_SIZE / X, BLOCK_SIZE, X]
 *   v_cache [num_blocks, num_kv_heads, HEAD_SIZE, BLOCK_SIZE]
 * or HND's or NHD's (kv.cl; decode_mma_chunk.cl loads them). The build
 * options and the shapes they imply: decode_mma_shape.cl.
 * The work-group: 4 warps, or 3 or 2 (lib/decode_plan.c mma_warps), or 6, 8 or
 * 12 where fewer, wider work-groups do (mma_widen); 8 at most with PIPE
 * (below: each warp loads its next chunk while it computes one).
 *
 * Tokens outside [window start, context) and blocks with bad ids are
 * masked (the latter set CLPA_FAULT_BAD_BLOCK); value slots there are
 * zeroed, since 0 * NaN is NaN. Chunks past the end are computed on zeros
 * and masked, so that every work-item runs the same iterations (the
 * emulated products use barriers).
 */

/* soft_cap tanh(v / soft_cap) as soft_cap (1 - 2 / (e^(2 |v| / soft_cap)
 * + 1)) with v's sign: one exp2 and one reciprocal (MUFU on NVIDIA). Off
 * tanh's value by 1.5e-7 of soft_cap with exact exp2 and reciprocal
 * (checked on the host over |v| <= 400, soft_cap 30), a few ulp more with
 * MUFU's. tanh and the division made the chunk loop larger, on a branch
 * most calls skip, and the loop's size costs fp8 time
 * (docs/decisions/0012-decode-mma-kernel.md). */
inline float mma_soft_cap(float v, float cap, float inv_cap) {
  const float e = MMA_EXP2(fabs(v) * inv_cap * (2.0f * LOG2E));
  return copysign(cap * (1.0f - 2.0f * native_recip(e + 1.0f)), v);
}

/* Output element i summed over the warps' slices. */
inline float slices_sum(__local const float *o_s, int i) {
  float v = o_s[i];
  for (int k = 1; k < SLICES; k++) v += o_s[k * G * HEAD_SIZE + i];
  return v;
}

/* ---- The kernel's phases ---- */

/* The queries as B fragments: column g of n-tile h is head head0 + 8 h + g
 * (zeros past G), k-step ks its dimensions in the keys' order; f32: hi
 * the tf32 high parts and lo the remainders (mma.cl's 3xTF32). */
typedef struct {
  uint2 hi[NH][KSTEPS];
#if KV_BYTES == 4
  uint2 lo[NH][KSTEPS];
#endif
} mma_qb;

/* P^T as B fragments, m-tile s of the chunk and n-tile h (f32: tokens 4t
 * .. 4t + 3 of column g, high parts and remainders). */
typedef struct {
#if KV_BYTES == 4
  uint4 hi[MSUB][NH], lo[MSUB][NH];
#else
  uint2 hi[MSUB][NH];
#endif
} mma_pb;

/* A warp's state in this lane's registers: per column 8 h + 2 t + i the
 * running max (base 2) and this lane's part of the sum; O^T's fragments
 * (m-tile mt, n-tile h: rows g, g + 8 are dimensions 16 mt + g, + 8). */
typedef struct {
  float m2[NH][2], l[NH][2];
  float4 o[MTILES][NH];
} mma_state;

/* What turns a chunk's scores into logits: the scale (fp8: times the
 * keys'), the soft cap, the ALiBi slopes of this lane's columns, the
 * row's length and its window's first token. */
typedef struct {
  float qk_scale, soft_cap, inv_cap, slope[NH][2];
  int L, lo;
} mma_logit_args;

/* Step 1: the row's queries, qs its first element. */
inline void mma_query_cols(mma_qb *qf, __global const io_t *qs, int head0, int g, int t) {
  MMA_UNROLL
  for (int h = 0; h < NH; h++) {
    const int col = 8 * h + g;
    __global const io_t *qh = qs + (ulong)(head0 + min(col, G - 1)) * HEAD_SIZE;
    MMA_UNROLL
    for (int ks = 0; ks < KSTEPS; ks++) {
      const int d = (4 * (ks / KSPR) + t) * X + (ks % KSPR) * KDIMS;
      float f[4];
      for (int e = 0; e < KDIMS; e++) f[e] = col < G ? IO_LOAD(qh, d + e) : 0.0f;
#if KV_BYTES == 4
      const uint4 x = (uint4)(as_uint(f[0]), as_uint(f[1]), 0u, 0u), hi = mma_tf32_hi4(x);
      qf->hi[h][ks] = hi.xy, qf->lo[h][ks] = mma_tf32_lo4(x, hi).xy;
#else
      qf->hi[h][ks] = (uint2)(mma_pack(f[0], f[1]), mma_pack(f[2], f[3]));
#endif
    }
  }
}

/* The logits' arguments; a lane's columns are 8 h + 2 t + i (lane_col's,
 * written out here and in step 6's writes: through it, clang 15 folds the
 * index differently with 8 heads a work-group). */
inline void mma_logit_args_init(mma_logit_args *a, __global const float *alibi, int head0, int t,
                                float qk_scale, float soft_cap, int L, int lo) {
  for (int h = 0; h < NH; h++)
    for (int i = 0; i < 2; i++) {
      const int col = 8 * h + 2 * t + i;
      a->slope[h][i] = alibi && col < G ? alibi[head0 + col] : 0.0f;
    }
  a->qk_scale = qk_scale, a->soft_cap = soft_cap, a->L = L, a->lo = lo;
  a->inv_cap = soft_cap > 0.0f ? 1.0f / soft_cap : 0.0f;
}

inline void mma_state_init(mma_state *st) {
  for (int h = 0; h < NH; h++)
    st->m2[h][0] = st->m2[h][1] = -INFINITY, st->l[h][0] = st->l[h][1] = 0.0f;
  MMA_UNROLL
  for (int mt = 0; mt < MTILES; mt++)
    MMA_UNROLL
    for (int h = 0; h < NH; h++) st->o[mt][h] = (float4)(0.0f);
}

/* Step 2's end: the chunk's value slots outside [lo, t_end) are zeroed,
 * since they may hold NaN and 0 * NaN is NaN. kt and vt: the lane's first
 * key and value tokens (load_chunk's). */
inline void mma_mask_values(mma_chunk *cur, int c0, int kt, int vt, int g, int lo, int t_end) {
  (void)c0, (void)kt, (void)g, (void)vt;
#if KV_SPLIT_KEY
  if (cur->vb >= 0 && (vt < lo || vt + RUN > t_end)) {
    const vrow_t keep = VROW_KEEP(vt, lo, t_end);
    MMA_UNROLL
    for (int mt = 0; mt < MTILES; mt++) cur->v0[mt] &= keep, cur->v1[mt] &= keep;
  }
#elif KV_BYTES == 4
  if (cur->vb >= 0 && (vt < lo || vt + 4 > t_end)) /* a token's pieces at a time */
    MMA_UNROLL
    for (int i = 0; i < 4; i++)
      if (vt + i < lo || vt + i >= t_end)
        MMA_UNROLL
        for (int sl = 0; sl < VSLABS; sl++) cur->v[i][sl] = (uint4)(0u);
#else
  const int kq = c0 + RUN * (g / 2); /* the run of the lane's key (and value) tokens */
  if (!TOKB && cur->kb >= 0 && (kq < lo || kq + RUN > t_end)) /* a token's pieces at a time
                                                                * (TOKB: load_chunk's zeros) */
    MMA_UNROLL
    for (int s = 0; s < MSUB; s++)
      MMA_UNROLL
      for (int r = 0; r < 2; r++) {
        const int tok = score_token(kt, s, r);
        if (tok >= lo && tok < t_end) continue;
        MMA_UNROLL
        for (int P = 0; P < KROWS; P++) {
          if (r) cur->v1[s][P] = (uint4)(0u);
          else cur->v0[s][P] = (uint4)(0u);
        }
      }
#endif
}

/* Step 3: S^T = K Q^T, m-tile s: rows g, g + 8 are tokens kt + 4 s, kt + 4 s + 2. */
inline void mma_chunk_scores(float4 sc[MSUB][NH], const mma_chunk *cur, const mma_qb *qf,
                             __local uint *xch) {
  MMA_UNROLL
  for (int s = 0; s < MSUB; s++)
    MMA_UNROLL
    for (int h = 0; h < NH; h++) {
      float4 acc[QK_ACCS];
      MMA_UNROLL
      for (int i = 0; i < QK_ACCS; i++) acc[i] = (float4)(0.0f);
      MMA_UNROLL
      for (int P = 0; P < KROWS; P++)
        MMA_UNROLL
        for (int j = 0; j < KSPR; j++) {
          const int ks = P * KSPR + j, ai = ks % QK_ACCS;
          const uint2 a0 = key_kstep(cur->k0[s][P], j), a1 = key_kstep(cur->k1[s][P], j);
#if KV_BYTES == 4
          acc[ai] = mma_3xtf32(acc[ai], (uint4)(a0.x, a1.x, a0.y, a1.y), qf->hi[h][ks],
                               qf->lo[h][ks], xch);
#else
          acc[ai] = mma_16816(acc[ai], (uint4)(a0.x, a1.x, a0.y, a1.y), qf->hi[h][ks], xch);
#endif
        }
      MMA_UNROLL
      for (int i = 1; i < QK_ACCS; i++) acc[0] += acc[i];
      sc[s][h] = acc[0];
    }
}

/* Step 4: the chunk's logits in base 2 with its masks (tokens outside
 * [lo, t_end), blocks with bad ids), the online softmax per column
 * (alpha: the factor its output takes) and P^T as B fragments. */
inline void mma_chunk_softmax(mma_pb *pf, float alpha[NH][2], mma_state *st,
                              float4 sc[MSUB][NH], const mma_chunk *cur, int kt, int t_end,
                              const mma_logit_args *a, __local uint *xch) {
  int in[MSUB][2];
  MMA_UNROLL
  for (int s = 0; s < MSUB; s++)
    MMA_UNROLL
    for (int r = 0; r < 2; r++) {
#if TOKB
      in[s][r] = cur->kbt[s][r] >= 0; /* inside [lo, t_end) */
#else
      const int tok = score_token(kt, s, r);
      in[s][r] = cur->kb >= 0 && tok >= a->lo && tok < t_end;
#endif
    }
  MMA_UNROLL
  for (int h = 0; h < NH; h++) {
    /* m-tile s: (kt + 4s, 2t) (kt + 4s, 2t+1) (kt + 4s + 2, 2t) (kt + 4s + 2, 2t+1) */
    float x[MSUB][4];
    MMA_UNROLL
    for (int s = 0; s < MSUB; s++) {
      const float4 v4 = sc[s][h];
      x[s][0] = v4.x, x[s][1] = v4.y, x[s][2] = v4.z, x[s][3] = v4.w;
      MMA_UNROLL
      for (int e = 0; e < 4; e++) {
        float v = x[s][e] * a->qk_scale;
        if (a->soft_cap > 0.0f) v = mma_soft_cap(v, a->soft_cap, a->inv_cap);
        v += a->slope[h][e % 2] * (float)(score_token(kt, s, e / 2) - a->L + 1);
        x[s][e] = in[s][e / 2] ? v * LOG2E : -INFINITY;
      }
    }
    float p[MSUB][4];
    MMA_UNROLL
    for (int i = 0; i < 2; i++) {
      float mx = fmax(x[0][i], x[0][i + 2]);
      MMA_UNROLL
      for (int s = 1; s < MSUB; s++) mx = fmax(mx, fmax(x[s][i], x[s][i + 2]));
      const float mn = fmax(st->m2[h][i], mma_col_reduce(mx, 1, xch));
      alpha[h][i] = mn == -INFINITY ? 1.0f : MMA_EXP2(st->m2[h][i] - mn);
      const float base = mn == -INFINITY ? 0.0f : mn; /* every score -inf: p = 0 */
      st->m2[h][i] = mn;
      float sum = 0.0f;
      MMA_UNROLL
      for (int s = 0; s < MSUB; s++) {
        p[s][i] = MMA_EXP2(x[s][i] - base), p[s][i + 2] = MMA_EXP2(x[s][i + 2] - base);
        sum += p[s][i] + p[s][i + 2];
      }
      st->l[h][i] = st->l[h][i] * alpha[h][i] + sum;
    }
    MMA_UNROLL
    for (int s = 0; s < MSUB; s++) {
#if KV_BYTES == 4
      const uint4 pt = (uint4)(mma_trans32(as_uint(p[s][0]), as_uint(p[s][1]), xch),
                               mma_trans32(as_uint(p[s][2]), as_uint(p[s][3]), xch));
      pf->hi[s][h] = mma_tf32_hi4(pt), pf->lo[s][h] = mma_tf32_lo4(pt, pf->hi[s][h]);
#else
      pf->hi[s][h] = (uint2)(mma_trans(mma_pack(p[s][0], p[s][1]), xch),
                             mma_trans(mma_pack(p[s][2], p[s][3]), xch));
#endif
    }
  }
}

/* Step 5: O^T = O^T alpha + V^T P^T: rows g, g + 8 of m-tile mt are
 * dimensions 16 mt + g, + 8. */
inline void mma_chunk_values(mma_state *st, const mma_chunk *cur, const mma_pb *pf,
                             float alpha[NH][2], __local uint *xch) {
  MMA_UNROLL
  for (int mt = 0; mt < MTILES; mt++) {
#if KV_BYTES == 4 /* two k-steps: tokens 4t, 4t + 1, then 4t + 2, 4t + 3 */
#if KV_SPLIT_KEY
    const uint4 w0 = cur->v0[mt], w1 = cur->v1[mt];
    const uint4 va = (uint4)(w0.x, w1.x, w0.y, w1.y), vb = (uint4)(w0.z, w1.z, w0.w, w1.w);
#else /* token vt + i's words 2 j, 2 j + 1 of slab p: rows g, g + 8 of m-tile 2 p + j */
    const int sl = mt / 2, j = mt % 2;
    const uint4 va = (uint4)(j ? cur->v[0][sl].zw : cur->v[0][sl].xy,
                             j ? cur->v[1][sl].zw : cur->v[1][sl].xy);
    const uint4 vb = (uint4)(j ? cur->v[2][sl].zw : cur->v[2][sl].xy,
                             j ? cur->v[3][sl].zw : cur->v[3][sl].xy);
#endif
    MMA_UNROLL
    for (int h = 0; h < NH; h++) {
      const float4 acc = st->o[mt][h] * (float4)(alpha[h][0], alpha[h][1], alpha[h][0], alpha[h][1]);
      st->o[mt][h] = mma_3xtf32(mma_3xtf32(acc, va, pf->hi[0][h].xy, pf->lo[0][h].xy, xch), vb,
                                pf->hi[0][h].zw, pf->lo[0][h].zw, xch);
    }
#else /* k-step s: tokens vt + 4 s .. vt + 4 s + 3 */
    uint4 vfrag[MSUB];
    MMA_UNROLL
    for (int s = 0; s < MSUB; s++) {
#if KV_SPLIT_KEY
      const uint2 w0 = value_pairs(cur->v0[mt], s), w1 = value_pairs(cur->v1[mt], s);
      vfrag[s] = (uint4)(w0.x, w1.x, w0.y, w1.y);
#else
      vfrag[s] = value_frag(cur->v0[s][mt / VMT], cur->v1[s][mt / VMT], mt % VMT, xch);
#endif
    }
    MMA_UNROLL
    for (int h = 0; h < NH; h++) {
      float4 acc = st->o[mt][h] * (float4)(alpha[h][0], alpha[h][1], alpha[h][0], alpha[h][1]);
      MMA_UNROLL
      for (int s = 0; s < MSUB; s++) acc = mma_16816(acc, vfrag[s], pf->hi[s][h], xch);
      st->o[mt][h] = acc;
    }
#endif
  }
}

/* Step 6: merges the warps' states (row_m, row_l: the work-group's, per
 * column), then their outputs weighted to the common max. Each warp
 * writes its weighted outputs to a slice of its own (SLICES of them,
 * rounds of SLICES warps adding into them where fewer fit), and the sum
 * over slices happens as the output is written: two barriers where rounds
 * of one warp at a time took WARPS + 2 (the epilogue is on every call's
 * critical path: docs/decisions/0012-decode-mma-kernel.md). */
inline void mma_merge_warps(mma_state *st, __local float *o_s, __local float *m_s,
                            __local float *l_s, __local float *row_m, __local float *row_l,
                            int lid, __local uint *xch) {
  const int lane = lid % 32, warp = lid / 32, g = lane / 4, t = lane % 4;
  for (int h = 0; h < NH; h++)
    for (int i = 0; i < 2; i++) {
      st->l[h][i] = mma_col_reduce(st->l[h][i], 0, xch);
      if (g == 0)
        m_s[warp * 16 + lane_col(h, t, i)] = st->m2[h][i],
                                    l_s[warp * 16 + lane_col(h, t, i)] = st->l[h][i];
    }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < 8 * NH) {
    float M = -INFINITY, S = 0.0f;
    for (int w = 0; w < WARPS; w++) M = fmax(M, m_s[w * 16 + lid]);
    for (int w = 0; w < WARPS; w++)
      if (l_s[w * 16 + lid] > 0.0f) S += l_s[w * 16 + lid] * MMA_EXP2(m_s[w * 16 + lid] - M);
    row_m[lid] = M, row_l[lid] = S;
  }
  float wgt[NH][2];
  for (int h = 0; h < NH; h++)
    for (int i = 0; i < 2; i++) {
      float M = -INFINITY;
      for (int w = 0; w < WARPS; w++) M = fmax(M, m_s[w * 16 + lane_col(h, t, i)]);
      wgt[h][i] = st->l[h][i] > 0.0f ? MMA_EXP2(st->m2[h][i] - M) : 0.0f;
    }
  for (int round = 0; round < WARPS / SLICES; round++) {
    if (warp / SLICES == round) {
      __local float *slice = o_s + (warp % SLICES) * (G * HEAD_SIZE);
      MMA_UNROLL
      for (int mt = 0; mt < MTILES; mt++)
        for (int h = 0; h < NH; h++)
          MMA_UNROLL
          for (int e = 0; e < 4; e++) {
            const int col = 8 * h + 2 * t + e % 2, d = out_dim(mt, g, e / 2);
            const float4 a = st->o[mt][h];
            const float v = (e == 0 ? a.x : e == 1 ? a.y : e == 2 ? a.z : a.w) * wgt[h][e % 2];
            if (col < G) slice[col * HEAD_SIZE + d] = round == 0 ? v : slice[col * HEAD_SIZE + d] + v;
          }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* The row's extent: its length L (0 where out of range: flagged), the
 * window's first token lo (tokens before it are never read nor checked),
 * the first chunk's token t0, and the row's chunks and partitions (a row
 * of no tokens is one empty partition, which writes the empty output). */
typedef struct {
  int L, lo, t0, total, nparts;
} mma_extent;

/* The row's partitions: its length's, or where a plan's list gave the row fewer, the list's
 * (its last one then runs to the length) */
inline int row_parts(int nparts, int listed) { return listed > 0 ? min(nparts, listed) : nparts; }

#if PARTITION_SIZE && !CLPA_MERGE
/* Partitions [p0, p0 + n) of the G heads from sh0 hold nothing: reduce.cl merges a row's
 * partitions counted from token 0, and reads these as empty */
inline void mma_empty_states(__global float *max_logits, __global float *exp_sums, size_t sh0,
                             int max_parts, int p0, int n, int lid) {
  for (int i = lid; i < G * n; i += NUM_THREADS) {
    const size_t sp = (sh0 + i % G) * max_parts + p0 + i / G;
    max_logits[sp] = -INFINITY, exp_sums[sp] = 0.0f;
  }
}
#endif

inline mma_extent mma_extent_of(int L, int window, int max_context_len, int report,
                                __global volatile int *faults) {
  mma_extent x;
  if (L < 0 || L > max_context_len) {
    if (report) atomic_or(faults, CLPA_FAULT_BAD_CONTEXT_LEN);
    L = 0;
  }
  x.L = L, x.lo = window > 0 ? max(L - window, 0) : 0, x.t0 = x.lo / CHUNK * CHUNK;
  x.total = (L - x.t0 + CHUNK - 1) / CHUNK;
  x.nparts = max((x.total + PCH - 1) / PCH, 1);
  return x;
}

#if CLPA_DEVICE_LIST
/* clpa_decode_mma_list's work-group */
#define LIST_THREADS 256
/* Row i's chunks from its window's first, as mma_extent_of counts them */
#define LIST_CHUNKS(i) (mma_extent_of(SEQ_LEN(i), window, max_context_len, 0, 0).total)

/* A plan without host lengths: its list from the device's (one work-group, before the decode
 * kernel, host/decode_planner.c's plan_mma_device_list). The rows' chunks summed (total), a
 * share of max(PCH, total x groups / want) chunks a partition (at most a row's longest), row i
 * cut evenly into n = max(1, ceil(chunks_i / share)) partitions: entries {i, p, n,
 * ceil(chunks_i / n)} in row order, then void ones {0, 0, 0, -1} up to `entries`. So a row
 * has at most ceil(want / groups) partitions, and the entries are at most num_seqs + that. */
__kernel __attribute__((reqd_work_group_size(LIST_THREADS, 1, 1))) void clpa_decode_mma_list(
    KERNEL_PARAMS(DECODE_LIST_ARG_LIST) PAGE_PARAMS) {
  __local long sums[LIST_THREADS];
  __local int at[LIST_THREADS];
  const int lid = get_local_id(0);
  long mine = 0;
  for (int i = lid; i < num_seqs; i += LIST_THREADS) mine += LIST_CHUNKS(i);
  sums[lid] = mine;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = LIST_THREADS / 2; h > 0; h /= 2) {
    if (lid < h) sums[lid] += sums[lid + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const long total = sums[0], longest = (max_context_len + CHUNK - 1) / CHUNK + 1;
  const int share = (int)min(max((long)PCH, (total * groups + want - 1) / want), longest);
  int base = 0;
  for (int i0 = 0; i0 < num_seqs; i0 += LIST_THREADS) {
    const int i = i0 + lid, chunks = i < num_seqs ? LIST_CHUNKS(i) : 0;
    const int n = i < num_seqs ? max((chunks + share - 1) / share, 1) : 0;
    at[lid] = n; /* an inclusive scan of the rows' partitions */
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int d = 1; d < LIST_THREADS; d *= 2) {
      const int v = lid >= d ? at[lid - d] : 0;
      barrier(CLK_LOCAL_MEM_FENCE);
      at[lid] += v;
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int first = base + at[lid] - n;
    for (int p = 0; p < n && first + p < entries; p++) /* cut evenly: the last no longer */
      vstore4((int4)(i, p, n, (chunks + n - 1) / n), first + p, work);
    base += at[LIST_THREADS - 1];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int e = base + lid; e < entries; e += LIST_THREADS) vstore4((int4)(0, 0, 0, -1), e, work);
}
#endif

/* Step 7: the work-group's heads' rows (sh0: the first's index in out): the
 * output where the row has one partition (alone; always in v1), else the
 * partition's state, which step 8 or reduce.cl merge. Work-groups past
 * the row's partitions write nothing. */
inline void mma_write_heads(__global io_t *out, __global float *lse, __global float *tmp_out,
                           __global float *max_logits, __global float *exp_sums,
                           __global const float *sinks, __local const float *o_s,
                           __local const float *row_m, __local const float *row_l, float vscale,
                           size_t sh0, int head0, int part, int max_parts, int alone, int live,
                           int lid) {
  for (int i = lid; live && i < G * HEAD_SIZE; i += NUM_THREADS) {
    const int r = i / HEAD_SIZE, d = i % HEAD_SIZE;
    const size_t sh = sh0 + r;
    const softmax_state sm = softmax_state_of(row_m[r] / LOG2E, row_l[r]);
    const float o = sm.l > 0.0f ? slices_sum(o_s, i) * vscale / sm.l : 0.0f;
    if (alone) {
      /* The sink: one more logit in the softmax, with no value. */
      const softmax_state all = sinks ? softmax_merge(sm, softmax_logit(sinks[head0 + r])) : sm;
      IO_STORE(o * softmax_weight(sm, all), out, sh * HEAD_SIZE + d);
      if (d == 0 && lse) lse[sh] = softmax_lse(all);
    } else {
      tmp_out[(sh * max_parts + part) * HEAD_SIZE + d] = o;
      if (d == 0) max_logits[sh * max_parts + part] = sm.m, exp_sums[sh * max_parts + part] = sm.l;
    }
  }
}

/* The chunk a warp takes after chunk c. NVIDIA: where the warps have 16
 * chunks each or more (the kernel's `ask`), after its first a warp takes
 * the work-group's next chunk as it asks (a chunk ahead: `handout`), so
 * that they end together; with fewer the atomic's round trip cost more
 * than it saved. The emulated products need every warp to run the same
 * iterations (docs/decisions/0012-decode-mma-kernel.md). */
#if MMA_PTX
#define NEXT_CHUNK(c) (ask ? warp_lane0(lane == 0 ? atomic_inc(handout) : 0) : (c) + WARPS)
#else
#define NEXT_CHUNK(c) ((c) + WARPS)
#endif
/* PIPE: the next chunk's loads wait for this chunk's data: the offset
 * CHUNK_DEP (zero at run time; dz = 0) puts a use of it into their address.
 * Without it ptxas issues them first and counts both chunks' loads on one
 * scoreboard, so the first use of this chunk would wait for the next one
 * too (docs/decisions/0011-decode-mma-pipe.md). */
#define CHUNK_DEP(ch, dz) ((ulong)(((ch).k0[0][0].x ^ VFIRST(ch)) & (dz)))

__kernel __attribute__((reqd_work_group_size(NUM_THREADS, 1, 1))) void clpa_decode_mma(
    KERNEL_PARAMS(DECODE_ARG_LIST) PAGE_PARAMS) {
  __local float o_s[SLICES * G * HEAD_SIZE];
  __local float m_s[WARPS * 16], l_s[WARPS * 16], row_m[16], row_l[16];
#if PARTITION_SIZE && CLPA_MERGE
  __local float red_m[NUM_THREADS], red_l[NUM_THREADS]; /* step 8: decode_merge_parts's */
  __local int last[1];                                  /* step 8: decode_last_part's */
#endif
  __local uint xch[MMA_XCH];
#if MMA_PTX
  __local int handout[1]; /* the row's next chunk no warp has taken */
#endif
  (void)logits, (void)logits_stride;

  const int lid = get_local_id(0), lane = lid % 32, warp = lid / 32, g = lane / 4, t = lane % 4;
  const int head0 = get_group_id(0) * G;
  int seq = get_group_id(1), part = get_group_id(2), listed = 0, pch = PCH, gone = 0;
  if (work) {
    /* A plan's list of the busy (sequence, partition) pairs, the longest sequences first, in
     * place of the rectangle (lib/decode.c): entry {seq, part, the sequence's partitions}. Its
     * last partition runs to the length the device holds, whatever the plan counted. */
    const int4 w = vload4(get_group_id(1), work);
    seq = w.x, part = w.y, listed = w.z;
#if CLPA_DEVICE_LIST
    /* The device's list (clpa_decode_mma_list): the chunks a partition, -1 in a void entry */
    pch = w.w > 0 ? w.w : PCH, gone = w.w < 0;
#endif
  }
  const int kv_head = head0 / (num_heads / num_kv_heads);
  /* The row's chunks (16 tokens from the window's start): partition p
   * takes chunks [p PCH, (p + 1) PCH) (pch: the row's own in a device list), its warps in
   * turn, or on NVIDIA as they ask (step 2). The length, the queries and the first chunk's
   * table entries are read together (one round trip to memory instead of
   * three before the first K/V load); the entries again only where a
   * sliding window moves the start. */
  page_row table = PAGE_ROW(seq);
  const int L0 = PAGE_LEN(table, seq);
#if MMA_PTX && PARTITION_SIZE
  if (gone) return; /* before any barrier; emulated, it runs with no chunks and no writes */
  /* A work-group past its row's partitions (the grid has the longest row's count for every row)
   * leaves on the length alone, before it reads queries or table entries; partition 0 always has
   * work and reads them with the length (docs/decisions/0013-decode-blind-partitions.md). */
  if (part > 0 &&
      part >= row_parts(mma_extent_of(L0, window, max_context_len, 0, faults).nparts, listed)) {
#if !CLPA_MERGE
    mma_empty_states(max_logits, exp_sums, (size_t)seq * num_heads + head0, max_parts, part, 1, lid);
#endif
    return;
  }
#endif
  const int c_first = part * pch + warp;
  chunk_ids_t ids = chunk_ids(table, c_first * CHUNK, g, t, max_blocks_per_seq);
  mma_qb qf; /* ---- 1. the queries ---- */
  mma_query_cols(&qf, q + (ulong)seq * q_stride, head0, g, t);
  const mma_extent x = mma_extent_of(L0, window, max_context_len, lid == 0 && part == 0, faults);
  const int L = x.L, lo = x.lo, t0 = x.t0, total = x.total, nparts = row_parts(x.nparts, listed);
  /* Work-groups past the row's partitions do nothing but write their empty states where
   * reduce.cl merges: on NVIDIA they left above (here in v1 builds, where there are none);
   * emulated, they run with no chunks and no other writes
   * (docs/decisions/0002-decode-v2-merge.md). */
  const int live = part < nparts && !gone;
#if PARTITION_SIZE && !CLPA_MERGE
  /* reduce.cl merges the row's partitions counted from token 0, these
   * from the window's first chunk: the ones past this row's are empty. */
  if (!live)
    mma_empty_states(max_logits, exp_sums, (size_t)seq * num_heads + head0, max_parts, part, 1, lid);
  /* From a list, the last partition stands for those past it (it runs to the length) */
  if (listed && part == nparts - 1)
    mma_empty_states(max_logits, exp_sums, (size_t)seq * num_heads + head0, max_parts, nparts,
                     max_parts - nparts, lid);
#endif
#if MMA_PTX
  if (!live) return;
  if (lid == 0) handout[0] = part * pch + WARPS;
  barrier(CLK_LOCAL_MEM_FENCE);
#endif
  if (t0) ids = chunk_ids(table, t0 + c_first * CHUNK, g, t, max_blocks_per_seq);
  /* this work-group's chunks end: the row's last partition takes the rest (none where idle) */
  const int c_end = !live ? part * pch : part + 1 >= nparts ? total : (part + 1) * pch;
  const ulong kv_off = kv_tile(0, kv_head, block_stride, head_stride); /* + block * block_stride */
  const int ts = kv_token_stride(num_kv_heads, head_stride, BLOCK_SIZE); /* HND, NHD */
  /* fp8: the cache holds values / scale; keys' scale goes into the logits, values' into the output */
  const float kscale = !KV_IS_FP8 ? 1.0f : k_scales ? k_scales[0] : k_scale;
  mma_logit_args la;
  mma_logit_args_init(&la, alibi, head0, t, scale * kscale, soft_cap, L, lo);
  const float vscale = !KV_IS_FP8 ? 1.0f : v_scales ? v_scales[0] : v_scale;
  mma_state st;
  mma_state_init(&st);
  int c = c_first;
#if MMA_PTX
  const int ask = (c_end - part * pch) * CHUNK >= 256 * WARPS; /* NEXT_CHUNK's; work-group-wide */
#endif
#if PIPE
  /* The first chunk here; in the loop, each chunk's successor. */
  const uint dz = (uint)num_blocks >> 31; /* 0: num_blocks >= 0 (the host checks) */
  mma_chunk cur;
  load_chunk(&cur, t0 + c * CHUNK, ids, MMA_CHUNK_ARGS(c < c_end ? L : 0, kv_off));
  int next = NEXT_CHUNK(c);
  ids = chunk_ids(table, t0 + next * CHUNK, g, t, max_blocks_per_seq);
#endif
#if MMA_PTX
  while (c < c_end) {
#else
  const int iters = (c_end - part * pch + WARPS - 1) / WARPS;
  for (int it = 0; it < iters; it++) {
#endif
    /* ---- 2. load the chunk's K and V (PIPE: the next chunk's); the next chunk's number and
     * table entries ---- */
    const int c0 = t0 + c * CHUNK, t_end = c < c_end ? L : 0; /* t_end 0: all masked */
    const int kt = c0 + RUN * (g / 2) + g % 2, vt = c0 + RUN * t;
#if PIPE
    const ulong dep = CHUNK_DEP(cur, dz);
    mma_chunk nx;
    load_chunk(&nx, t0 + next * CHUNK, ids, MMA_CHUNK_ARGS(next < c_end ? L : 0, kv_off + dep));
    const int next2 = NEXT_CHUNK(next);
    ids = chunk_ids(table, t0 + next2 * CHUNK, g, t, max_blocks_per_seq);
#else
    mma_chunk cur;
    load_chunk(&cur, c0, ids, MMA_CHUNK_ARGS(t_end, kv_off));
    const int next = NEXT_CHUNK(c);
    ids = chunk_ids(table, t0 + next * CHUNK, g, t, max_blocks_per_seq);
#endif
    mma_mask_values(&cur, c0, kt, vt, g, lo, t_end);
    float4 sc[MSUB][NH]; /* ---- 3. the scores ---- */
    mma_chunk_scores(sc, &cur, &qf, xch);
    mma_pb pf; /* ---- 4. the softmax ---- */
    float alpha[NH][2];
    mma_chunk_softmax(&pf, alpha, &st, sc, &cur, kt, t_end, &la, xch);
    mma_chunk_values(&st, &cur, &pf, alpha, xch); /* ---- 5. the values ---- */
#if PIPE
    cur = nx, c = next, next = next2;
#else
    c = next;
#endif
  }
  mma_merge_warps(&st, o_s, m_s, l_s, row_m, row_l, lid, xch); /* ---- 6. merge the warps ---- */

#if PARTITION_SIZE
  const int alone = CLPA_MERGE && nparts == 1; /* else reduce.cl reads every partition's state */
#else
  const int alone = 1;
#endif
  /* ---- 7. write the rows (no work-item returns between barriers: PoCL 3.1 ran a loop past its
   * bound after a uniform return followed by barriers) ---- */
  mma_write_heads(out, lse, tmp_out, max_logits, exp_sums, sinks, o_s, row_m, row_l, vscale,
                 (size_t)seq * num_heads + head0, head0, part, max_parts, alone, live, lid);
#if PARTITION_SIZE && CLPA_MERGE
  /* ---- 8. the last partition of the row to finish merges them (decode_merge.cl;
   * o_s is free: the weights' local memory) ---- */
  const int merging = decode_last_part(live && !alone, part_counts, seq, nparts, last);
  decode_merge_parts(merging, nparts, seq, head0, num_heads, max_parts, max_logits, exp_sums,
                     tmp_out, sinks, out, lse, G, HEAD_SIZE, NUM_THREADS, red_m, red_l, row_m,
                     row_l, o_s, SLICES * HEAD_SIZE, MERGE_REG);
#endif
}
