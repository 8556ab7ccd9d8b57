/*
 * decode_mma.cl — decode on tensor cores for GQA (mma.cl: mma.sync
 * m16n8k16 on NVIDIA, f16 or bf16 caches, f32 accumulation; emulated
 * elsewhere, for tests). Same arguments, grid, outputs (v1 or v2's
 * partition states for reduce.cl) and results as decode.cl's
 * clpa_decode_paged; the G <= 16 query heads of one KV head that a
 * work-group serves are the 16 rows of the products (rows past G are
 * zero queries):
 *
 *   S = Q K^T   M = heads, N = 8 tokens an n-tile, K = head dimensions
 *   O += P V    M = heads, K = 16 tokens a k-step,  N = 8 dimensions
 *
 * so P leaves the first product in the layout the second takes (as in
 * FlashAttention-2), and each K/V element is read once, straight from
 * the cache into registers, 16 bytes per load:
 *   - keys: the sum over dimensions allows any order, so lane (g, t)
 *     loads dimensions 8 (4 P + t) .. 8 (4 P + t) + 7 of its token (one
 *     16-byte row of the key layout) and uses them for k-steps 2P and
 *     2P + 1; the queries are loaded in the same order;
 *   - values: column c of S's n-tile n is token TOK(n, c) of the step, so
 *     that lane t's tokens are 16 t .. 16 t + 15, two 16-byte pieces of a
 *     value row per dimension.
 * A warp takes steps of 64 tokens (the work-group's warps in turn), keeps
 * its rows' softmax state in base 2 (max and sum over the 4 lanes of a
 * row by quad_reduce), and the warps' states and outputs are merged in
 * local memory at the end. Tokens outside [window start, context) and
 * blocks with bad ids are masked (the latter set CLPA_FAULT_BAD_BLOCK);
 * value slots there are zeroed, since 0 * NaN is NaN.
 *
 * Rows past G, steps past the end: computed on zeros and masked, so that
 * every work-item runs the same iterations (the emulated products use
 * barriers).
 */
#if !defined(CLPA_HEAD_SIZE) || !defined(CLPA_BLOCK_SIZE) || !defined(CLPA_NUM_THREADS) || !defined(CLPA_PARTITION_SIZE) || !defined(CLPA_HEADS_PER_WG)
#error "built through lib/launch.c, which passes every -DCLPA_ option of the family"
#endif
#define HEAD_SIZE CLPA_HEAD_SIZE
#define BLOCK_SIZE CLPA_BLOCK_SIZE
#define NUM_THREADS CLPA_NUM_THREADS
#define PARTITION_SIZE CLPA_PARTITION_SIZE
#define G CLPA_HEADS_PER_WG
#define WARPS (NUM_THREADS / 32)
#define STEP 64                 /* tokens a warp takes at a time */
#define KSTEPS (HEAD_SIZE / 16) /* k-steps of Q K^T */
#define DTILES (HEAD_SIZE / 8)  /* n-tiles of O */
#define LOG2E 1.4426950408889634f

#if HEAD_SIZE % 32 || G > 16 || NUM_THREADS % 32 || PARTITION_SIZE % STEP || BLOCK_SIZE % 8 || \
    STEP % BLOCK_SIZE
#error "decode mma: head size a multiple of 32, <= 16 heads, partitions of 64-token steps"
#endif
#if KV_BYTES != 2
#error "decode mma: the cache must be f16 or bf16"
#endif

/* The step's token at column c of S's n-tile n. */
#define TOK(n, c) (((c) / 2) * 16 + 2 * (n) + (c) % 2)

/* The physical block holding positions first .. last (one block), or -1
 * when none of them is inside [lo, L) (never read nor checked) or the
 * table's id is bad (then the fault bit). */
inline int mma_block(__global const int *table, int first, int last, int lo, int L,
                     int num_blocks, __global volatile int *faults) {
  if (last < lo || first >= L) return -1;
  const int phys = table[first / BLOCK_SIZE];
  if (phys >= 0 && phys < num_blocks) return phys;
  atomic_or(faults, CLPA_FAULT_BAD_BLOCK);
  return -1;
}

__kernel __attribute__((reqd_work_group_size(NUM_THREADS, 1, 1))) void clpa_decode_mma(
    DECODE_ARGS) {
  __local float o_s[16 * HEAD_SIZE];
  __local float m_s[WARPS * 16], l_s[WARPS * 16], row_m[16], row_l[16];
  __local uint xch[MMA_XCH];
  (void)k_scale, (void)v_scale, (void)k_scales, (void)v_scales, (void)logits, (void)logits_stride;

  const int lid = get_local_id(0), lane = lid % 32, warp = lid / 32, g = lane / 4, t = lane % 4;
  const int head0 = get_group_id(0) * G, seq = get_group_id(1), part = get_group_id(2);
  const int kv_head = head0 / (num_heads / num_kv_heads);
  int L = context_lens[seq];
  if (L < 0 || L > max_context_len) {
    if (lid == 0 && part == 0) atomic_or(faults, CLPA_FAULT_BAD_CONTEXT_LEN);
    L = 0;
  }
  /* Tokens before lo are outside the sliding window: never read nor checked. */
  const int lo = window > 0 ? max(L - window, 0) : 0;
#if PARTITION_SIZE
  if (part * PARTITION_SIZE >= L) return; /* the reduce kernel skips empty partitions */
  const int t_end = min((part + 1) * PARTITION_SIZE, L);
  if (max(part * PARTITION_SIZE, lo) >= t_end) { /* the whole partition is outside the window */
    if (lid < G) {
      const size_t sh = (size_t)seq * num_heads + head0 + lid;
      exp_sums[sh * max_parts + part] = 0.0f;
      max_logits[sh * max_parts + part] = -INFINITY;
    }
    return;
  }
  const int t_begin = max(part * PARTITION_SIZE, lo) / STEP * STEP;
#else
  const int t_end = L, t_begin = lo / STEP * STEP;
#endif
  const int nsteps = (t_end - t_begin + STEP - 1) / STEP;
  __global const int *table = block_tables + (size_t)seq * max_blocks_per_seq;
  const ulong kv_off = kv_tile(0, kv_head, block_stride, head_stride); /* + block * block_stride */

  /* This lane's rows g and g + 8: heads head0 + row while row < G. */
  int live[2];
  float slope[2];
  for (int h = 0; h < 2; h++) {
    live[h] = g + 8 * h < G;
    slope[h] = alibi && live[h] ? alibi[head0 + g + 8 * h] : 0.0f;
  }

  /* ---- 1. queries as A fragments, dimensions in the keys' order ---- */
  uint4 qa[KSTEPS];
  MMA_UNROLL
  for (int ks = 0; ks < KSTEPS; ks++) {
    float f[8];
    for (int e = 0; e < 8; e++) {
      const int h = e / 2 % 2, d = (4 * (ks / 2) + t) * 8 + (ks % 2) * 4 + (e / 4) * 2 + e % 2;
      f[e] = live[h] ? IO_LOAD(q, (ulong)seq * q_stride + (ulong)(head0 + g + 8 * h) * HEAD_SIZE + d)
                     : 0.0f;
    }
    qa[ks] = (uint4)(mma_pack(f[0], f[1]), mma_pack(f[2], f[3]), mma_pack(f[4], f[5]),
                     mma_pack(f[6], f[7]));
  }

  float m2[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float4 o[DTILES];
  MMA_UNROLL
  for (int n = 0; n < DTILES; n++) o[n] = (float4)(0.0f);

  const int iters = (nsteps + WARPS - 1) / WARPS;
  for (int it = 0; it < iters; it++) {
    const int s0 = t_begin + (it * WARPS + warp) * STEP; /* past t_end: all masked */

    /* ---- 2. keys: token TOK(n, g) = kt + 2 n, in block kb[n / 4] ---- */
    const int kt = s0 + (g / 2) * 16 + g % 2;
    const int kb0 = mma_block(table, kt, kt + (BLOCK_SIZE < 16 ? 6 : 14), lo, t_end, num_blocks,
                              faults);
    const int kb1 =
        BLOCK_SIZE < 16 ? mma_block(table, kt + 8, kt + 14, lo, t_end, num_blocks, faults) : kb0;
    float4 sc[8];
    MMA_UNROLL
    for (int n = 0; n < 8; n++) {
      const int j = kt + 2 * n, kb = n < 4 ? kb0 : kb1;
      /* key_index(8 c, o): uint4 number c * BLOCK_SIZE + o of the tile */
      __global const uint4 *kp = (__global const uint4 *)(k_cache + kv_off +
                                                          (ulong)max(kb, 0) * block_stride) +
                                 j % BLOCK_SIZE;
      const int ok = kb >= 0; /* tokens of it outside [lo, t_end) are masked below */
      float4 acc = (float4)(0.0f);
      MMA_UNROLL
      for (int P = 0; P < KSTEPS / 2; P++) {
        const uint4 kv = ok ? kp[(4 * P + t) * BLOCK_SIZE] : (uint4)(0u);
        acc = mma_16816(acc, qa[2 * P], kv.xy, xch);
        acc = mma_16816(acc, qa[2 * P + 1], kv.zw, xch);
      }
      sc[n] = acc;
    }

    /* ---- 3. values: this lane's tokens vt .. vt + 15, blocks vb[0..1] ---- */
    const int vt = s0 + 16 * t;
    const int vb0 = mma_block(table, vt, vt + (BLOCK_SIZE < 16 ? 7 : 15), lo, t_end, num_blocks,
                              faults);
    const int vb1 =
        BLOCK_SIZE < 16 ? mma_block(table, vt + 8, vt + 15, lo, t_end, num_blocks, faults) : vb0;
    /* Rows and lanes whose every score counts (no masking needed). */
    const int whole = vb0 >= 0 && vb1 >= 0 && vt >= lo && vt + 16 <= t_end;

    /* ---- 4. logits in base 2; masks ---- */
    const int plain = soft_cap <= 0.0f && !alibi;
    if (whole && plain) {
      MMA_UNROLL
      for (int n = 0; n < 8; n++) sc[n] *= scale * LOG2E;
    } else {
      MMA_UNROLL
      for (int n = 0; n < 8; n++) {
        float x[4] = {sc[n].x, sc[n].y, sc[n].z, sc[n].w};
        for (int i = 0; i < 4; i++) {
          const int h = i / 2, j = vt + 2 * n + i % 2; /* TOK(n, 2t + i % 2) */
          float v = x[i] * scale;
          if (soft_cap > 0.0f) v = soft_cap * tanh(v / soft_cap);
          v += slope[h] * (float)(j - L + 1);
          const int masked = !live[h] || (n < 4 ? vb0 : vb1) < 0 || j < lo || j >= t_end;
          x[i] = masked ? -INFINITY : v * LOG2E;
        }
        sc[n] = (float4)(x[0], x[1], x[2], x[3]);
      }
    }

    /* ---- 5. online softmax per row; P as A fragments ---- */
    float alpha[2];
    uint4 pa[4];
    MMA_SOFTMAX_STEP(sc, 8, m2, l, alpha, pa, xch);

    /* ---- 6. O = O alpha + P V: dimension n * 8 + g is column g of n-tile n ---- */
    __global const kv_t *vp0 = v_cache + kv_off + (ulong)max(vb0, 0) * block_stride;
    __global const kv_t *vp1 = v_cache + kv_off + (ulong)max(vb1, 0) * block_stride;
    MMA_UNROLL
    for (int n = 0; n < DTILES; n++) {
      const int d = n * 8 + g;
      uint4 w0 = vb0 >= 0 ? vload4(0, (__global const uint *)(vp0 + value_index(d, vt % BLOCK_SIZE, BLOCK_SIZE)))
                          : (uint4)(0u);
      uint4 w1 = vb1 >= 0 ? vload4(0, (__global const uint *)(vp1 + value_index(d, (vt + 8) % BLOCK_SIZE, BLOCK_SIZE)))
                          : (uint4)(0u);
      if (!whole) { /* slots outside [lo, t_end) may hold NaN */
        const int8 j0 = (int8)(vt) + IOTA8, j1 = j0 + 8;
        w0 = as_uint4(select((ushort8)(0), as_ushort8(w0), convert_short8(j0 >= lo && j0 < t_end)));
        w1 = as_uint4(select((ushort8)(0), as_ushort8(w1), convert_short8(j1 >= lo && j1 < t_end)));
      }
      float4 acc = o[n] * (float4)(alpha[0], alpha[0], alpha[1], alpha[1]);
      acc = mma_16816(acc, pa[0], w0.xy, xch);
      acc = mma_16816(acc, pa[1], w0.zw, xch);
      acc = mma_16816(acc, pa[2], w1.xy, xch);
      acc = mma_16816(acc, pa[3], w1.zw, xch);
      o[n] = acc;
    }
  }

  /* ---- 7. merge the warps: states, then outputs weighted to the common max ---- */
  for (int h = 0; h < 2; h++) {
    l[h] = quad_reduce(l[h], 0, xch);
    if (t == 0) m_s[warp * 16 + g + 8 * h] = m2[h], l_s[warp * 16 + g + 8 * h] = l[h];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < 16) {
    float M = -INFINITY, S = 0.0f;
    for (int w = 0; w < WARPS; w++) M = fmax(M, m_s[w * 16 + lid]);
    for (int w = 0; w < WARPS; w++)
      if (l_s[w * 16 + lid] > 0.0f) S += l_s[w * 16 + lid] * MMA_EXP2(m_s[w * 16 + lid] - M);
    row_m[lid] = M, row_l[lid] = S;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  float wgt[2];
  for (int h = 0; h < 2; h++) {
    const float M = row_m[g + 8 * h];
    wgt[h] = l[h] > 0.0f ? MMA_EXP2(m2[h] - M) : 0.0f;
  }
  for (int w = 0; w < WARPS; w++) {
    if (warp == w) {
      MMA_UNROLL
      for (int n = 0; n < DTILES; n++)
        for (int i = 0; i < 4; i++) {
          const int r = g + 8 * (i / 2), d = n * 8 + 2 * t + i % 2;
          const float v = (i == 0 ? o[n].x : i == 1 ? o[n].y : i == 2 ? o[n].z : o[n].w) * wgt[i / 2];
          o_s[r * HEAD_SIZE + d] = w == 0 ? v : o_s[r * HEAD_SIZE + d] + v;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  /* ---- 8. write the output (v1) or the partition's state (v2) ---- */
  for (int i = lid; i < G * HEAD_SIZE; i += NUM_THREADS) {
    const int r = i / HEAD_SIZE, d = i % HEAD_SIZE;
    const size_t sh = (size_t)seq * num_heads + head0 + r;
    const softmax_state st = softmax_state_of(row_m[r] / LOG2E, row_l[r]);
#if PARTITION_SIZE
    tmp_out[(sh * max_parts + part) * HEAD_SIZE + d] = st.l > 0.0f ? o_s[i] / st.l : 0.0f;
    if (d == 0) max_logits[sh * max_parts + part] = st.m, exp_sums[sh * max_parts + part] = st.l;
#else
    /* The sink: one more logit in the softmax, with no value. */
    const softmax_state all = sinks ? softmax_merge(st, softmax_logit(sinks[head0 + r])) : st;
    const float w = softmax_weight(st, all);
    IO_STORE(st.l > 0.0f ? o_s[i] / st.l * w : 0.0f, out, sh * HEAD_SIZE + d);
    if (d == 0 && lse) lse[sh] = softmax_lse(all);
#endif
  }
}
