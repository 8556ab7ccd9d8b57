/*
 * xattn_mma.cl — phase 1 of XAttention's estimation (what clpa_xattn_stats
 * in xattn.cl computes: stat_m, stat_l and bstat, same layouts, which
 * xattn.cl's banner defines; its arguments are xattn_args.h's
 * XATTN_STATS_MMA_ARG_LIST) on tensor cores: mma.cl's
 * m16n8k16 with operands in the key cache's dtype (f16 or bf16) and f32
 * accumulation; emulated off NVIDIA, for tests.
 *
 * The strided scores are a GEMM with gathered operands (K = S D):
 *   A[r][k] = q[rS + S-1-t][d],  B[k][c] = k[cS + t][d]   (k <-> (t, d))
 * so a work-group owns ROWS strided rows of one head and walks the
 * columns of one key chunk that its rows see in tiles of COLS, each
 * tile's product in steps of KC k indices: TP = KC / 32 consecutive t
 * (tokens cS + t, cS + t + 1 sit side by side in the cache: whole 32-byte
 * sectors) times 32 dimensions. A step's query rows and key columns are
 * copied into local memory (cp.async on NVIDIA, STAGES stages: the next
 * STAGES - 1 steps' copies in flight while one is computed, one barrier a
 * step) and read back through ldmatrix. Each warp holds 16 MT rows x COLS scores
 * in registers; after a tile's last step it folds them, per row and per
 * segment of min(BCOLS, COLS) columns, into the row's running state of
 * the current key block (quad shuffles), and at a block's end writes the
 * block's (m_b, l_b) to bstat and merges it into the row's chunk state,
 * as clpa_xattn_stats does. Work-groups with more columns start first
 * (the row tiles run from the last).
 *
 * Scores: scale times the f32 sum of products of operands rounded to the
 * cache's dtype (the query is rounded; the keys are stored so). A column
 * whose keys lie in a block outside the cache is masked and sets
 * CLPA_FAULT_BAD_BLOCK; slots past the sequence are never read: the last
 * group's queries past num_q and keys past num_k (= row0 S + num_q) are
 * zero padding, copied in as zeros without reading them or their table
 * entries (xattn.cl says why masked, not multiplied by 0).
 *
 * Grid: (num_chunks * NUM_THREADS, piece heads, ceil(piece rows / ROWS)),
 * work-groups of NUM_THREADS: a row tile's chunks and heads run together
 * (its queries are read once a tile by each of them: from L2 so).
 */
#if !KV_SPLIT_KEY /* the host refuses other layouts on this path first */
#error "xattn_mma: the split-key cache layout only (its loads restate key_index in 16-byte units)"
#endif
#ifndef CLPA_HEAD_SIZE
#error "CLPA_HEAD_SIZE: elements a head; required"
#endif
#ifndef CLPA_BLOCK_SIZE
#error "CLPA_BLOCK_SIZE: tokens a cache block; required"
#endif
#ifndef CLPA_NUM_THREADS
#error "CLPA_NUM_THREADS: work-items a work-group; required"
#endif
#ifndef CLPA_STRIDE
#error "CLPA_STRIDE: the stride S; required"
#endif
#ifndef CLPA_BCOLS
#error "CLPA_BCOLS: columns a key block, B / S; required"
#endif
#ifndef CLPA_ROWS
#error "CLPA_ROWS: strided rows a work-group; required"
#endif
#ifndef CLPA_COLS
#error "CLPA_COLS: columns a tile; required"
#endif
#ifndef CLPA_KC
#error "CLPA_KC: k indices a step; required"
#endif
#ifndef CLPA_STAGES
#error "CLPA_STAGES: steps in local memory (2-4); required"
#endif
#define HEAD_SIZE CLPA_HEAD_SIZE
#define BLOCK_SIZE CLPA_BLOCK_SIZE
#define NUM_THREADS CLPA_NUM_THREADS
#define STRIDE CLPA_STRIDE
#define BCOLS CLPA_BCOLS          /* columns per key block: B / S */
#define XR CLPA_ROWS              /* strided rows per work-group */
#define BN CLPA_COLS              /* columns per tile */
#define KC CLPA_KC                /* k indices per step */
#define STAGES CLPA_STAGES        /* steps in local memory: computed, and in flight (2-4) */
#define WARPS (NUM_THREADS / 32)
#define MT (XR / 16 / WARPS)      /* m-tiles per warp */
#define NT (BN / 8)               /* n-tiles per tile */
#define KSTEPS (KC / 16)          /* mma k-steps per step */
#define TP (KC / 32)              /* tokens per step */
#define ROWW (KC / 2 + 4)         /* 32-bit words per local row, padded by 16 bytes */
#define NSTEP (STRIDE * HEAD_SIZE / KC)
#define SEG (BCOLS < BN ? BCOLS : BN) /* columns folded at once: within one block */
#define NSEG (BN / SEG)

#if NUM_THREADS % 32 || XR % (16 * WARPS) || BN % 8 || (KC != 32 && KC != 64) || \
    HEAD_SIZE % 32 || STRIDE % TP || BCOLS % 8 || (BN % BCOLS && BCOLS % BN) || BLOCK_SIZE % 2 || \
    BN > NUM_THREADS || STAGES < 2 || STAGES > 4 || NSTEP < STAGES
#error "xattn mma shape: whole warps, 16-row m-tiles, KC 32 or 64, HEAD_SIZE of 32, BCOLS of 8, BN <= NUM_THREADS, 2-4 stages (at most the steps a tile)"
#endif
#if KV_BYTES != 2
#error "xattn mma: the cache must be f16 or bf16"
#endif

/* A work-item's share of a step's copies: chunk u = lid % (KC / 8) of
 * QI rows and KI columns (uint4 u: token t0 + u / 4, dimensions d0 + u %
 * 4 * 8 .. + 7). Where a column's S keys lie in one cache block (S
 * divides BLOCK_SIZE) its block is looked up once a tile. */
#define CPR (KC / 8)                    /* uint4 chunks a row a step */
#define QI (XR * CPR / NUM_THREADS)     /* query rows a work-item copies */
#define KI (BN * CPR / NUM_THREADS)     /* key columns a work-item copies */
#define ONEBLOCK (BLOCK_SIZE % STRIDE == 0)
#if (XR * CPR) % NUM_THREADS || (BN * CPR) % NUM_THREADS
#error "xattn mma: a step's copies must spread evenly over the work-items"
#endif

typedef struct xm_src {
  __global const io_t *q[QI];   /* row's token rS + S - 1 at its chunk's dims; NULL: past r_last */
  int q_pad[QI];                /* the row's first t that is no padding: rS + S-1-t < num_q */
  __global const uint4 *k[KI];  /* ONEBLOCK: the column's block at its first key + u / 4; NULL: none */
} xm_src;

/* Step `it`'s operands into stage `st`: the rows' query slices and the
 * tile's key slices (zeros for rows past r_last, columns past c1, keys
 * in bad blocks and the padding past num_q and num_k). At a tile's first
 * step also its column flags and (ONEBLOCK) the columns' blocks. */
inline void xm_load(__local uint4 *qs, __local uint4 *ks, __local int *colok, xm_src *src, int it,
                    int st, ulong q_stride, int q_direct, __global const kv_t *k_cache,
                    ulong block_stride, ulong head_stride, __global const int *table,
                    int num_blocks, int kv_head, int c0, int c1, int num_k,
                    __global volatile int *faults) {
  const int lid = get_local_id(0), u = lid % CPR, tile = it / NSTEP, step = it % NSTEP;
  const int t0 = step / (HEAD_SIZE / 32) * TP, d0 = step % (HEAD_SIZE / 32) * 32;
  const int cb = c0 + tile * BN;
  if (step == 0 && lid < BN) { /* the tile's column flags */
    const int c = cb + lid;
    int ok = c < c1;
    for (int t = 0; ok && t < STRIDE && c * STRIDE + t < num_k; t++) {
      const int b = table[(c * STRIDE + t) / BLOCK_SIZE];
      if (b < 0 || b >= num_blocks) ok = 0, atomic_or(faults, CLPA_FAULT_BAD_BLOCK);
    }
    colok[(tile & 1) * BN + lid] = ok;
  }
  __local uint4 *qd = qs + st * (XR * ROWW / 4) + lid / CPR * (ROWW / 4) + u;
  MMA_UNROLL
  for (int i = 0; i < QI; i++) {
    __local uint4 *dst = qd + i * (NUM_THREADS / CPR) * (ROWW / 4);
    if (!src->q[i] || t0 + u / 4 < src->q_pad[i]) {
      *dst = (uint4)(0u);
      continue;
    }
    __global const io_t *p = src->q[i] - (long)(t0 + u / 4) * (long)q_stride + d0;
#if CLPA_IO_DTYPE == CLPA_KV_DTYPE
    if (q_direct) {
      mma_copy16(dst, (__global const uint4 *)p);
      continue;
    }
#else
    (void)q_direct;
#endif
    float f[8];
    for (int j = 0; j < 8; j++) f[j] = IO_LOAD(p, j);
    *dst = (uint4)(mma_pack(f[0], f[1]), mma_pack(f[2], f[3]), mma_pack(f[4], f[5]),
                   mma_pack(f[6], f[7]));
  }
  __local uint4 *kd = ks + st * (BN * ROWW / 4) + lid / CPR * (ROWW / 4) + u;
  MMA_UNROLL
  for (int i = 0; i < KI; i++) {
    __local uint4 *dst = kd + i * (NUM_THREADS / CPR) * (ROWW / 4);
    const int c = cb + lid / CPR + i * (NUM_THREADS / CPR);
#if ONEBLOCK
    if (step == 0) { /* the column's block, once a tile */
      const int tok = c * STRIDE + u / 4, b = c < c1 ? table[tok / BLOCK_SIZE] : -1;
      src->k[i] = b < 0 || b >= num_blocks
                      ? NULL
                      : (__global const uint4 *)(k_cache + kv_tile((ulong)b, kv_head, block_stride,
                                                                   head_stride)) +
                            tok % BLOCK_SIZE;
    }
    if (!src->k[i] || c * STRIDE + t0 + u / 4 >= num_k) {
      *dst = (uint4)(0u);
      continue;
    }
    /* key_index(8 w, o): chunk w of token o is uint4 number w * BLOCK_SIZE + o */
    mma_copy16(dst, src->k[i] + (d0 / 8 + u % 4) * BLOCK_SIZE + t0);
#else
    const int tok = c * STRIDE + t0 + u / 4;
    const int b = c < c1 && tok < num_k ? table[tok / BLOCK_SIZE] : -1;
    if (b < 0 || b >= num_blocks) {
      *dst = (uint4)(0u);
      continue;
    }
    __global const uint4 *kb =
        (__global const uint4 *)(k_cache + kv_tile((ulong)b, kv_head, block_stride, head_stride));
    mma_copy16(dst, kb + (d0 / 8 + u % 4) * BLOCK_SIZE + tok % BLOCK_SIZE);
#endif
  }
}

/* acc += Q K^T of one step: the warp's MT m-tiles of query rows (qw)
 * against the step's BN keys (kw), two k-steps an ldmatrix. */
inline void xm_products(float4 acc[MT][NT], __local const uint *qw, __local const uint *kw,
                        __local uint *xch) {
  MMA_UNROLL
  for (int kk = 0; kk < KSTEPS; kk += 2) {
    uint4 a[MT][2];
    MMA_UNROLL
    for (int m = 0; m < MT; m++) {
      a[m][0] = mma_ldm_a(qw, ROWW, m * 16, kk * 8);
      a[m][1] = mma_ldm_a(qw, ROWW, m * 16, kk * 8 + 8);
    }
    MMA_UNROLL
    for (int n = 0; n < NT; n++) {
      const uint4 b = mma_ldm4(kw, ROWW, n * 8, kk * 8);
      MMA_UNROLL
      for (int m = 0; m < MT; m++) {
        acc[m][n] = mma_16816(acc[m][n], a[m][0], b.xy, xch);
        acc[m][n] = mma_16816(acc[m][n], a[m][1], b.zw, xch);
      }
    }
  }
}

__kernel __attribute__((reqd_work_group_size(NUM_THREADS, 1, 1))) void clpa_xattn_stats_mma(
    KERNEL_PARAMS(XATTN_STATS_MMA_ARG_LIST)) {
  __local uint4 qs[STAGES * XR * ROWW / 4];
  __local uint4 ks[STAGES * BN * ROWW / 4];
  __local int colok[2 * BN];
  __local uint xch[MMA_XCH];
  const int lid = get_local_id(0), lane = lid % 32, warp = lid / 32, g = lane / 4, t4 = lane % 4;
  const int ch = get_group_id(0), num_chunks = get_num_groups(0);
  const int ph = get_group_id(1), head = head0 + ph, kv_head = head / qpk;
  const int r_wg = rbase + (int)(get_num_groups(2) - 1 - get_group_id(2)) * XR;
  const int r_last = min(r_wg + XR, rend) - 1;
  const int c0 = ch * chunk_cols; /* a multiple of BCOLS: a block lies in one chunk */
  const int c1 = min(c0 + chunk_cols, row0 + r_last + 1); /* visible to the last row */
  const int total = c0 < c1 ? (c1 - c0 + BN - 1) / BN * NSTEP : 0;
  const int num_k = row0 * STRIDE + num_q; /* q_offset + num_q: keys past it are padding */
  __global const io_t *qh = q + (ulong)head * HEAD_SIZE;

  /* This lane's rows: m-tile m, half h (g, g + 8) */
  float4 acc[MT][NT];
  float bm[MT][2], bl[MT][2], sm[MT][2], sl[MT][2];
  MMA_UNROLL
  for (int m = 0; m < MT; m++) {
    MMA_UNROLL
    for (int n = 0; n < NT; n++) acc[m][n] = (float4)(0.0f);
    for (int h = 0; h < 2; h++) bm[m][h] = sm[m][h] = -INFINITY, bl[m][h] = sl[m][h] = 0.0f;
  }

  xm_src src;
  MMA_UNROLL
  for (int i = 0; i < QI; i++) {
    const int r = r_wg + lid / CPR + i * (NUM_THREADS / CPR), u = lid % CPR;
    src.q[i] = r <= r_last ? qh + (ulong)(r * STRIDE + STRIDE - 1) * q_stride + u % 4 * 8 : NULL;
    src.q_pad[i] = max(0, (r + 1) * STRIDE - num_q);
  }
  /* Steps 0 .. STAGES - 2 in flight, one copy group each (empty past the end). */
  for (int it = 0; it < STAGES - 1; it++) {
    if (it < total)
      xm_load(qs, ks, colok, &src, it, it, q_stride, q_direct, k_cache, block_stride,
              head_stride, table, num_blocks, kv_head, c0, c1, num_k, faults);
    mma_copy_commit();
  }
  for (int it = 0; it < total; it++) {
#if STAGES == 2
    MMA_COPY_WAIT_GROUPS(0); /* step it's group, and none after it */
#elif STAGES == 3
    MMA_COPY_WAIT_GROUPS(1);
#else
    MMA_COPY_WAIT_GROUPS(2);
#endif
    barrier(CLK_LOCAL_MEM_FENCE); /* step it landed; step it - 1's stage is free */
    const int ahead = it + STAGES - 1;
    if (ahead < total)
      xm_load(qs, ks, colok, &src, ahead, ahead % STAGES, q_stride, q_direct, k_cache,
              block_stride, head_stride, table, num_blocks, kv_head, c0, c1, num_k, faults);
    mma_copy_commit();
    const int stage = it % STAGES;
    __local const uint *qw = (__local const uint *)qs + stage * XR * ROWW + warp * MT * 16 * ROWW;
    __local const uint *kw = (__local const uint *)ks + stage * BN * ROWW;
    xm_products(acc, qw, kw, xch);
    if (it % NSTEP != NSTEP - 1) continue;

    /* ---- the tile's scores into the rows' block and chunk states ---- */
    const int cb = c0 + it / NSTEP * BN;
    __local const int *ok = colok + (it / NSTEP & 1) * BN;
    MMA_UNROLL
    for (int sg = 0; sg < NSEG; sg++) {
      const int cs = cb + sg * SEG;
      const int flush = cs < c1 && ((cs + SEG) % BCOLS == 0 || cs + SEG >= c1);
      MMA_UNROLL
      for (int m = 0; m < MT; m++)
        for (int h = 0; h < 2; h++) {
          const int r = r_wg + (warp * MT + m) * 16 + g + 8 * h, R = row0 + r;
          float v[SEG / 4], mx = -INFINITY;
          MMA_UNROLL
          for (int n = 0; n < SEG / 8; n++)
            for (int e = 0; e < 2; e++) {
              const int j = sg * SEG + n * 8 + 2 * t4 + e; /* the column's place in the tile */
              const float4 x = acc[m][sg * (SEG / 8) + n];
              const float s = (h ? (e ? x.w : x.z) : (e ? x.y : x.x)) * scale;
              v[2 * n + e] = cb + j <= R && ok[j] ? s : -INFINITY;
              mx = fmax(mx, v[2 * n + e]);
            }
          const float mn = fmax(bm[m][h], quad_reduce(mx, 1, xch));
          float sum = 0.0f;
          if (mn != -INFINITY) {
            MMA_UNROLL
            for (int i = 0; i < SEG / 4; i++) sum += MMA_EXP2((v[i] - mn) * LOG2E);
          }
          sum = quad_reduce(sum, 0, xch);
          if (mn != -INFINITY) { /* online: the block's sum rescaled to the new max */
            const float old = bm[m][h] == -INFINITY ? 0.0f : MMA_EXP2((bm[m][h] - mn) * LOG2E);
            bl[m][h] = bl[m][h] * old + sum;
            bm[m][h] = mn;
          }
          if (flush) { /* the block ends: its state out, into the chunk's */
            const int kb = cs / BCOLS;
            if (r <= r_last && t4 == 0 && kb * BCOLS <= R)
              bstat[(ulong)(ph * (rend - rbase) + r - rbase) * k_blocks + kb] =
                  (float2)(bm[m][h], bl[m][h]);
            const softmax_state st = softmax_merge(softmax_state_of(sm[m][h], sl[m][h]),
                                                   softmax_state_of(bm[m][h], bl[m][h]));
            sm[m][h] = st.m, sl[m][h] = st.l, bm[m][h] = -INFINITY, bl[m][h] = 0.0f;
          }
        }
    }
    MMA_UNROLL
    for (int m = 0; m < MT; m++)
      MMA_UNROLL
      for (int n = 0; n < NT; n++) acc[m][n] = (float4)(0.0f);
  }
  if (t4 == 0)
    for (int m = 0; m < MT; m++)
      for (int h = 0; h < 2; h++) {
        const int r = r_wg + (warp * MT + m) * 16 + g + 8 * h;
        if (r > r_last) continue;
        const ulong at = ((ulong)head * num_chunks + ch) * rows + r;
        stat_m[at] = sm[m][h], stat_l[at] = sl[m][h];
      }
}
