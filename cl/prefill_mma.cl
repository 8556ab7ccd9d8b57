/* prefill_mma.cl — prefill's tensor-core path; built after prefill.cl (its arguments,
 * helpers and layouts) and prefill_mma_tiles.cl (its key and value tiles in local memory):
 * lib/kernels.c's prefill families. */
/*
 * clpa_prefill_mma — the same attention on tensor cores (mma.cl: on
 * NVIDIA mma.sync m16n8k16, operands in the cache's dtype, f16 or bf16,
 * or f16 for an fp8 cache, whose tiles are converted as they are copied;
 * f32 accumulation; emulated elsewhere, for tests), FlashAttention-2's
 * shape: a work-group of WARPS warps owns ROWS = 16 * MT * WARPS query
 * rows, 16 a warp whose queries stay in registers as A fragments (rounded
 * to the operand type), or 32 (MT 2, dense calls) whose queries wait in
 * local memory and are read a k-step at a time. Per tile of BK keys
 * (prefill_mma_tiles.cl) each warp computes S = Q K^T (16 x BK a row
 * tile, f32, 4 independent accumulators in flight), the online softmax
 * on S's fragments in base 2 (row max and sum over the 4 lanes that share
 * a row; mma.cl's MMA_SOFTMAX_STEP: the output is rescaled only when a
 * row's max jumps) and O += P V with P rounded to the operand type. As in
 * FlashAttention-2 the copies overlap the products: the values of a tile
 * arrive while S is computed, the next tile's keys while P V is (cp.async
 * on NVIDIA); with STAGES = 2 (where local memory holds two tiles) the
 * next tile's keys and values both arrive while the whole tile is
 * computed, one barrier a tile. Tiles that need no mask (keys inside
 * every row's range, valid blocks, no block mask) skip the per-element
 * masking. Same arguments, masks and results as clpa_prefill_paged.
 */
#ifndef CLPA_SPARSE
#error "CLPA_SPARSE: 1 or 2 for the builds for calls with a block mask (mma_next_tile); required"
#endif
#ifndef CLPA_MT
#error "CLPA_MT: row tiles of 16 a warp (1, queries in registers; 2, in local memory); required"
#endif
#ifndef CLPA_ITEMS
#error "CLPA_ITEMS: 1 where the work list has split items or warps without rows; required"
#endif
/* A warp's row tiles of 16 rows: 2 (FlashAttention-2's 32 rows a warp)
 * puts each key and value fragment into twice the products; their
 * queries then wait in local memory, read through ldmatrix a k-step at a
 * time (docs/decisions/0041-prefill-mma-warp-rows.md). Dense calls only. */
#define MT CLPA_MT
#define RPL (2 * MT)    /* rows a lane: g + 8 h of its warp's */
#define QLOCAL (MT == 2) /* queries in local memory */
#if (MT != 1 && MT != 2) || (MT == 2 && CLPA_SPARSE)
#error "prefill mma: 1 or 2 row tiles a warp, 2 only in the dense build"
#endif
#if ROWS != 16 * MT * WARPS
#error "prefill mma shape: 16 MT rows a warp"
#endif
#define KSTEPS (HEAD_SIZE / 16) /* k-steps of Q K^T */
#define DTILES (HEAD_SIZE / 8)  /* n-tiles of O */
#define STILES (BK / 8)         /* n-tiles of S */

/* Query elements i, i + 1 (i even) as one operand register, and an
 * output pair stored: where queries and output have the cache's dtype,
 * a 32-bit word each (`aligned`: the pair is 4-byte aligned), which is
 * the rounding IO_STORE does too; else element by element. */
inline uint mma_q_pair(__global const io_t *q, ulong i, int aligned) {
#if CLPA_IO_DTYPE == CLPA_KV_DTYPE
  if (aligned) return ((__global const uint *)q)[i / 2];
#else
  (void)aligned;
#endif
  return mma_pack(IO_LOAD(q, i), IO_LOAD(q, i + 1));
}

inline void mma_store_pair(__global io_t *out, ulong i, float2 v) {
#if CLPA_IO_DTYPE == CLPA_KV_DTYPE
  ((__global uint *)out)[i / 2] = mma_pack(v.x, v.y);
#elif CLPA_IO_DTYPE == CLPA_CODE_F32
  vstore2(v, 0, out + i);
#else
  IO_STORE(v.x, out, i);
  IO_STORE(v.y, out, i + 1);
#endif
}

/* Block-sparse: the first tile from k0 that a row of the work-group
 * keeps (k_end if none); every work-item calls it. m0 / m1: this
 * work-item's rows' mask rows (the dense build: NULL for a row past the
 * end). Without a mask, k0. Kept positions are block starts (multiples of
 * 64, so of BK) or k0. Two forms, both correct for any mask:
 * - CLPA_SPARSE (the builds for calls with a mask): where the work-group's
 *   rows read one mask row (one_row; always in build 2, which the host
 *   takes where a mask block holds whole work-groups), the scan of that
 *   row from k0 on, no barrier. Else each work-item finds the next kept
 *   mask block of its own rows from k0 on, remembered in *mine (its next
 *   kept key, >= the k0 it was found for: the scan only moves forward),
 *   then the work-group takes the least (local atomic_min): three
 *   barriers a kept tile however many are skipped.
 * - otherwise (the dense build) a vote per tile, three barriers each:
 *   kept for dense calls because it keeps NVIDIA's build under the
 *   registers at which only two work-groups fit an SM, where the scan (or
 *   no vote) pushes it past them
 *   (docs/decisions/0021-prefill-mma-sparse-scan.md). */
#if CLPA_SPARSE
#define MMA_NEXT_STATE int mine = -1; /* mma_next_tile's memory */
#define MMA_NEXT_TILE(k) \
  mma_next_tile(k, k_end, sparse, r.mrow[0], r.mrow[1], mask_block, one_row, &mine, &next_kept)
/* one_row: every row of the work-group reads the same mask row (its tokens
 * lie in one mask block, and rows past the end take its first token's). */
inline int mma_next_tile(int k0, int k_end, int sparse, __global const uchar *m0,
                         __global const uchar *m1, int mask_block, int one_row, int *mine,
                         __local int *next) {
  if (!sparse) return k0;
  if (one_row) return mask_next(m0, k0, k_end, mask_block); /* *mine would never be ahead */
  if (*mine < k0)
    *mine = min(mask_next(m0, k0, k_end, mask_block), mask_next(m1, k0, k_end, mask_block));
  return group_min(*mine, next);
}
/* Whether row h's mask keeps tile k0 (with one_row, a tile the scan found) */
#define MMA_KEEPS(h, k0) (one_row || (r.mrow[h] && r.mrow[h][(k0) / mask_block]))
#elif MT == 2
#define MMA_NEXT_STATE
#define MMA_NEXT_TILE(k) (k) /* no mask: every tile */
#define MMA_KEEPS(h, k0) 1
#else
#define MMA_NEXT_STATE
#define MMA_NEXT_TILE(k) mma_next_tile(k, k_end, sparse, r.mrow[0], r.mrow[1], mask_block, &next_kept)
#define MMA_KEEPS(h, k0) (!sparse || (r.mrow[h] && r.mrow[h][(k0) / mask_block]))
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

/* ---- The kernel's phases ---- */

/* Which query row a work-group's row R is. The dense build interleaves
 * the KV head's qpk query heads (row R: token R / qpk, head R % qpk of the
 * group), so that a tile's keys and values serve qpk heads. The sparse
 * build keeps heads apart: each head's new tokens take `pad` rows (new_len
 * rounded up to ROWS), so that a work-group's rows are one head's
 * consecutive tokens and follow one head's block mask: interleaved, a tile
 * is computed when any of qpk heads keeps it, and for heads whose masks
 * differ that is nearly every tile
 * (docs/decisions/0021-prefill-mma-sparse-scan.md). Sets the head and
 * position (for a row past the end the sequence's first new token, or with
 * heads apart its work-group's, whose mask row it then reads); returns
 * whether the row is one of the sequence's. */
#if CLPA_SPARSE
inline int mma_row(int R, int new_len, int pad, int qpk, int kv_head, int cached, int *head,
                   int *pos) {
  const int tok = R % pad, live = tok < new_len;
  *head = kv_head * qpk + R / pad;
  *pos = cached + (live ? tok : tok / ROWS * ROWS); /* past the end: its work-group's first */
  return live;
}
#define MMA_TOKEN_LO(R0) ((R0) % pad)                          /* a work-group's first token */
#define MMA_TOKEN_HI(R0) (min((R0) % pad + ROWS, new_len) - 1) /* and its last one */
#define MMA_TOKEN(h) (r.pos[h] - cached)                       /* lane row h's token */
#define MMA_READS_MASK(live) 1 /* every row reads a mask row */
#else
inline int mma_row(int R, int new_len, int pad, int qpk, int kv_head, int cached, int *head,
                   int *pos) {
  (void)pad;
  return tile_row(R, new_len * qpk, qpk, kv_head, cached, head, pos);
}
#define MMA_TOKEN_LO(R0) ((R0) / qpk)
#define MMA_TOKEN_HI(R0) ((min((R0) + ROWS, nrows) - 1) / qpk)
#define MMA_TOKEN(h) ((row0 + 8 * (h)) / qpk)
#define MMA_READS_MASK(live) (live)
#endif

/* This lane's query rows, g + 8 h of its warp's 16 MT (index h):
 * whether the row is one of the sequence's, its head, position, ALiBi
 * slope and block-mask row (the dense build: NULL for a row past the end). */
typedef struct {
  int live[RPL], head[RPL], pos[RPL];
  float slope[RPL];
  __global const uchar *mrow[RPL];
} mma_rows;

/* The queries as A fragments: a.x, a.z from row g (dimensions 2t, 2t + 8
 * of the k-step), a.y, a.w from row g + 8; row h's dimension 2 t is
 * element qrow[h] of q (zeros for a row past the end). */
inline void mma_queries(uint4 *qa, __global const io_t *q, const ulong *qrow, const mma_rows *r,
                        int aligned) {
  MMA_UNROLL
  for (int ks = 0; ks < KSTEPS; ks++) {
    uint a[4];
    for (int e = 0; e < 4; e++)
      a[e] = r->live[e % 2] ? mma_q_pair(q, qrow[e % 2] + ks * 16 + e / 2 * 8, aligned) : 0u;
    qa[ks] = (uint4)(a[0], a[1], a[2], a[3]);
  }
}

#if QLOCAL
/* The work-group's queries in local memory, rounded to the operand type:
 * chunk c (dimensions 8 c .. 8 c + 7) of its row R at q_s[c * ROWS + R],
 * so that an A fragment's 8 rows of one chunk are 128 contiguous bytes
 * (zeros for a row past the end). Queries of the cache's dtype whose rows
 * start 16-byte aligned (q_stride a multiple of 8) are copied as they are,
 * 16 bytes a copy (cp.async on NVIDIA: they land with the first tile);
 * others element pair by pair. Successive work-items take successive
 * chunks of a row. */
inline void mma_queries_local(__local uint4 *q_s, __global const io_t *q, int R0, int new_len,
                              int pad, int qpk, int kv_head, int cached, int first,
                              ulong q_stride) {
  const int whole = CLPA_IO_DTYPE == CLPA_KV_DTYPE && q_stride % 8 == 0, al = q_stride % 2 == 0;
  for (int e = get_local_id(0); e < ROWS * (HEAD_SIZE / 8); e += NUM_THREADS) {
    const int R = e / (HEAD_SIZE / 8), c = e % (HEAD_SIZE / 8);
    int head, pos;
    __local uint4 *d = q_s + c * ROWS + R;
    if (!mma_row(R0 + R, new_len, pad, qpk, kv_head, cached, &head, &pos)) {
      *d = (uint4)(0u);
      continue;
    }
    const ulong i = (ulong)(first + pos - cached) * q_stride + (ulong)head * HEAD_SIZE + 8 * c;
    if (whole) mma_copy16(d, (__global const uint4 *)(q + i));
    else
      *d = (uint4)(mma_q_pair(q, i, al), mma_q_pair(q, i + 2, al), mma_q_pair(q, i + 4, al),
                   mma_q_pair(q, i + 6, al));
  }
}
/* An A fragment's row address that lane l gives (in uint4 from the
 * warp's first row): rows l % 16 of chunk l / 16; k-step ks of row tile
 * m is MMA_QOFF(m, ks) past it. */
inline int mma_qlane(int l) { return l / 16 * ROWS + l % 16; }
#define MMA_QOFF(m, ks) (2 * (ks) * ROWS + 16 * (m))
#define MMA_QA(m, ks) MMA_LDSM4(qw, qb, mma_qlane, MMA_QOFF(m, ks))
#else
#define MMA_QA(m, ks) qa[ks]
#endif

/* S = Q K^T on key tile kw: key n * 8 + g of the tile is column g of
 * n-tile n; 4 n-tiles at a time, so that 4 accumulators are in flight. */
/* Row tile m's scores are sc[m * STILES ..]; its queries qa[] (in
 * registers, MT 1) or the warp's rows from qw (in local memory). */
inline void mma_scores(float4 *sc, const uint4 *qa, __local const uint *qw,
                       __local const uint *kw, int lane, __local uint *xch) {
  const uint ka = MMA_BASE(kw, mma_klane), ka2 = MMA_BASE(kw, mma_klane2);
  (void)ka, (void)ka2, (void)qa, (void)qw;
#if QLOCAL
  const uint qb = MMA_BASE(qw, mma_qlane);
  (void)qb;
#endif
  MMA_UNROLL
  for (int n0 = 0; n0 < STILES; n0 += 4) {
    MMA_UNROLL
    for (int n = 0; n < 4; n++)
      MMA_UNROLL
      for (int m = 0; m < MT; m++) sc[m * STILES + n0 + n] = (float4)(0.0f);
    MMA_UNROLL
    for (int ks = 0; ks + 1 < KSTEPS; ks += 2) {
      uint4 b[4];
      MMA_UNROLL
      for (int n = 0; n < 4; n++) b[n] = MMA_LDSM4(kw, ka, mma_klane, MMA_KROW(n0 + n, 2 * ks));
      MMA_UNROLL
      for (int m = 0; m < MT; m++) {
        const uint4 a0 = MMA_QA(m, ks), a1 = MMA_QA(m, ks + 1);
        float4 *s = sc + m * STILES + n0;
        MMA_UNROLL
        for (int n = 0; n < 4; n++) s[n] = mma_16816(s[n], a0, b[n].xy, xch);
        MMA_UNROLL
        for (int n = 0; n < 4; n++) s[n] = mma_16816(s[n], a1, b[n].zw, xch);
      }
    }
    if (KSTEPS % 2) {
      MMA_UNROLL
      for (int n = n0; n < n0 + 4; n++) {
        const uint2 b = MMA_LDSM2(kw, ka2, mma_klane2, MMA_KROW(n, (KSTEPS - 1) * 2));
        MMA_UNROLL
        for (int m = 0; m < MT; m++)
          sc[m * STILES + n] = mma_16816(sc[m * STILES + n], MMA_QA(m, KSTEPS - 1), b, xch);
      }
    }
  }
}

/* The logits of row tile m's scores sc[] (its STILES n-tiles) of tile k0
 * in base 2 (sc * c2 where `plain`: the scale rides in the exponent's fma,
 * the same arithmetic whether a tile is masked or not, so that a mask
 * keeping every block gives dense prefill's output bit for bit), -inf
 * where masked: row h past the end or its mask block not
 * kept (keep[h]), a part not read (ph), keys outside [k_lo, k_end), the
 * causal or window bound. A `full` tile masks nothing. */
inline void mma_logits(float4 *sc, const mma_rows *r, const int *keep, const int *ph, int k0,
                       int full, int plain, const mma_src *c, int causal, int window,
                       float scale, float soft_cap, int t, int m) {
  if (full && plain) return;
  MMA_UNROLL
  for (int n = 0; n < STILES; n++) {
    float x[4] = {sc[n].x, sc[n].y, sc[n].z, sc[n].w};
    for (int i = 0; i < 4; i++) {
      const int h = 2 * m + i / 2, j = k0 + n * 8 + 2 * t + i % 2, pos = r->pos[h];
      const int masked = !full && (!r->live[h] || !keep[h] || ph[n * 8 / BLOCK_SIZE] < 0 ||
                                   j < c->k_lo || j >= c->k_end || (causal && j > pos) ||
                                   (window > 0 && pos - j >= window));
      if (!plain) {
        float v = x[i] * scale;
        if (soft_cap > 0.0f) v = soft_cap * tanh(v / soft_cap);
        x[i] = (v + r->slope[h] * (float)(j - pos)) * LOG2E;
      }
      x[i] = masked ? -INFINITY : x[i];
    }
    sc[n] = (float4)(x[0], x[1], x[2], x[3]);
  }
}

/* O = O alpha + P V on value tile vw: dimension n * 8 + g is column g of
 * n-tile n; row tile m's are o[m * DTILES ..], its P pa[m * BK / 16 ..]. */
inline void mma_values(float4 *o, const uint4 *pa, const float *alpha, __local const uint *vw,
                       int lane, __local uint *xch) {
  MMA_UNROLL
  for (int m = 0; m < MT; m++)
    if (alpha[2 * m] != 1.0f || alpha[2 * m + 1] != 1.0f) {
      const float4 f = (float4)(alpha[2 * m], alpha[2 * m], alpha[2 * m + 1], alpha[2 * m + 1]);
      MMA_UNROLL
      for (int n = 0; n < DTILES; n++) o[m * DTILES + n] *= f;
    }
  const uint va = MMA_BASE(vw, mma_vlane);
  (void)va;
  MMA_UNROLL
  for (int n0 = 0; n0 < DTILES; n0 += 4) {
    MMA_UNROLL
    for (int ks = 0; ks < BK / 16; ks += 2) {
      uint4 b[4];
      MMA_UNROLL
      for (int n = 0; n < 4; n++)
        if (n0 + n < DTILES) b[n] = MMA_LDSM4V(vw, va, mma_vlane, MMA_VOFF(ks, n0 + n));
      MMA_UNROLL
      for (int m = 0; m < MT; m++) {
        float4 *om = o + m * DTILES + n0;
        const uint4 *pm = pa + m * (BK / 16);
        MMA_UNROLL
        for (int n = 0; n < 4; n++)
          if (n0 + n < DTILES) om[n] = mma_16816(om[n], pm[ks], b[n].xy, xch);
        MMA_UNROLL
        for (int n = 0; n < 4; n++)
          if (n0 + n < DTILES) om[n] = mma_16816(om[n], pm[ks + 1], b[n].zw, xch);
      }
    }
  }
}

/* Normalises this lane's rows once (times vscale, an fp8 cache's value
 * scale, else 1) and writes them, and their LSE: row h is the warp's row
 * g + 8 h (row tile h / 2's o[]), row orow[h] of out and lse. */
inline void mma_write_rows(__global io_t *out, __global float *lse, const float4 *o, float *l,
                           const float *m2, float vscale, const mma_rows *r, const size_t *orow,
                           int t, __local uint *xch) {
  float inv[RPL];
  for (int h = 0; h < RPL; h++) {
    l[h] = quad_reduce(l[h], 0, xch);
    inv[h] = l[h] > 0.0f ? vscale / l[h] : 0.0f;
  }
  for (int h = 0; h < RPL; h++) {
    if (!r->live[h]) continue;
    const size_t row = orow[h];
    const float4 *oh = o + h / 2 * DTILES;
    MMA_UNROLL
    for (int n = 0; n < DTILES; n++)
      mma_store_pair(out, row * HEAD_SIZE + n * 8 + 2 * t, (h % 2 ? oh[n].zw : oh[n].xy) * inv[h]);
    if (lse && t == 0) lse[row] = softmax_lse(softmax_state_of(m2[h] / LOG2E, l[h]));
  }
}

__kernel __attribute__((reqd_work_group_size(NUM_THREADS, 1, 1))) void clpa_prefill_mma(
    KERNEL_PARAMS(PREFILL_ARG_LIST) PAGE_PARAMS) {
  __local uint4 k_s[STAGES * KTILE];
  __local uint4 v_s[STAGES * VTILE];
#if QLOCAL
  __local uint4 q_s[ROWS * (HEAD_SIZE / 8)];
#endif
#if QLOCAL && MMA_PTX
  /* unused on NVIDIA (MMA_XCH is 1): no word past the tiles and queries, which may fill
   * the local memory the host allows (lib/prefill.c's mma_lmem) */
  __local uint *xch = (__local uint *)k_s;
#else
  __local uint xch[MMA_XCH];
#endif
#if !QLOCAL
  __local int next_kept;
#endif

  const int lid = get_local_id(0), lane = lid % 32, warp = lid / 32, g = lane / 4, t = lane % 4;
  /* Build 0 (CLPA_ITEMS): no item is split and every warp has rows, so
   * the code for either folds away (docs/decisions/0045-prefill-mma-items-build.md). */
#if CLPA_ITEMS
  const work_item w = work_item_of(work, get_group_id(0));
#else
  const work_item w = {work[4 * get_group_id(0)], work[4 * get_group_id(0) + 1], 0, -1};
#endif
  const int s = w.s, R0 = w.R0;
  const int kv_head = get_group_id(1), qpk = num_heads / num_kv_heads;
  const int first = seq_info[3 * s], new_len = seq_info[3 * s + 1], cached = seq_info[3 * s + 2];
  const int pad = (new_len + ROWS - 1) / ROWS * ROWS, nrows = new_len * qpk;
  const int kv_end = cached + new_len, row0 = R0 + warp * 16 * MT + g;
  (void)pad, (void)nrows;

  mma_rows r;
  for (int h = 0; h < RPL; h++) {
    r.live[h] = mma_row(row0 + 8 * h, new_len, pad, qpk, kv_head, cached, &r.head[h], &r.pos[h]);
    r.slope[h] = alibi ? alibi[r.head[h]] : 0.0f;
    r.mrow[h] = MMA_READS_MASK(r.live[h]) ? mask_row(block_mask, s, num_heads, r.head[h],
                                                     r.pos[h] - cached, mask_block, mask_qb, mask_kb)
                                          : NULL;
  }
  /* The work-group's key range. */
  const int p_lo = cached + MMA_TOKEN_LO(R0), p_hi = cached + MMA_TOKEN_HI(R0);
  const int2 all_keys = tile_keys(p_lo, p_hi, kv_end, causal, window);
  const int2 keys = item_keys(all_keys, w, split_keys); /* a split item's part of them */
  const int sink = sinks && item_has_sink(all_keys, w);
  const int k_lo = keys.x, k_end = keys.y, sparse = block_mask != NULL;
  /* CLPA_SPARSE 2: the host's promise that mask blocks hold whole work-groups */
  const int one_row =
      CLPA_SPARSE == 2 || (p_lo - cached) / mask_block == (p_hi - cached) / mask_block;
  (void)one_row; /* the dense build: unused */
  const mma_src c = {k_cache, v_cache, PAGE_ROW_OF_LEN(s, kv_end), faults, block_stride,
                     head_stride, kv_head, kv_token_stride(num_kv_heads, head_stride, BLOCK_SIZE),
                     num_blocks, k_lo, k_end, sparse};
  /* fp8: the cache holds values / scale; the keys' scale goes into the logits, the values' into
   * the output (1 for other caches: the same bits) */
  const float kscale = !KV_IS_FP8 ? 1.0f : k_scales ? k_scales[0] : k_scale;
  const float vscale = !KV_IS_FP8 ? 1.0f : v_scales ? v_scales[0] : v_scale;
  const float qk_scale = scale * kscale;
  /* logits are scaled products: the scale rides in the exponent's fma */
  const int plain = soft_cap <= 0.0f && !alibi && qk_scale > 0.0f;
  const float c2 = plain ? qk_scale * LOG2E : 1.0f;

#if QLOCAL
  const uint4 *qa = NULL;
  mma_queries_local(q_s, q, R0, new_len, pad, qpk, kv_head, cached, first, q_stride);
  __local const uint *qw = (__local const uint *)(q_s + warp * 16 * MT);
#else
  uint4 qa[KSTEPS];
  __local const uint *qw = NULL;
  ulong qrow[2];
  for (int h = 0; h < 2; h++)
    qrow[h] = (ulong)(first + MMA_TOKEN(h)) * q_stride + (ulong)r.head[h] * HEAD_SIZE + 2 * t;
  mma_queries(qa, q, qrow, &r, q_stride % 2 == 0);
#endif

  /* A warp whose rows are all past the sequence's (a decode row's item: its qpk rows in the
   * first warp) copies its share of each tile and skips the products; on NVIDIA only, where
   * they are the warp's own (emulated, they share local scratch between barriers). Rows are
   * in order within a warp's, so its first row says. */
  int idle_head, idle_pos;
  const int idle = CLPA_ITEMS && MMA_PTX &&
                   !mma_row(R0 + warp * 16 * MT, new_len, pad, qpk, kv_head, cached, &idle_head,
                            &idle_pos);

  /* Softmax state per row, base 2 (m2 = m log2 e); l is this lane's part. */
  float m2[RPL], l[RPL];
  for (int h = 0; h < RPL; h++) {
    m2[h] = sink ? sinks[r.head[h]] * LOG2E : -INFINITY;
    l[h] = sink && t == 0 ? 1.0f : 0.0f;
  }
  float4 o[MT * DTILES];
  MMA_UNROLL
  for (int n = 0; n < MT * DTILES; n++) o[n] = (float4)(0.0f);

  MMA_NEXT_STATE
  int k0 = MMA_NEXT_TILE(k_lo / BK * BK);
  /* this tile's blocks; the next one's table entries, read a tile ahead */
  int ph[NP], pre[NP] = {0}, pre_at = -1; /* pre[]: tile pre_at's entries */
  if (k0 < k_end) mma_issue_tile(k_s, STAGES == 2 ? v_s : NULL, ph, pre, &pre_at, k0, &c);
  for (int stage = 0; k0 < k_end; stage = STAGES - 1 - stage) {
    __local const uint *kw = (__local const uint *)(k_s + stage * KTILE);
    __local const uint *vw = (__local const uint *)(v_s + stage * VTILE);
    int nph[NP];
    /* keys here (and values, with 2 stages); the next ones on their way */
    mma_copy_wait();
#if STAGES == 2
    mma_fix_values(v_s + stage * VTILE, k0, k_lo, k_end);
    barrier(CLK_LOCAL_MEM_FENCE);
    const int next = MMA_NEXT_TILE(k0 + BK);
#if MMA_FP8_STAGED
    uint2 fk[NP][CPT], fv[NP][CPT];
    if (next < k_end) mma_fetch_tile(fk, fv, nph, pre, &pre_at, next, &c);
#else
    if (next < k_end)
      mma_issue_tile(k_s + (1 - stage) * KTILE, v_s + (1 - stage) * VTILE, nph, pre, &pre_at, next,
                     &c);
#endif
#else
    barrier(CLK_LOCAL_MEM_FENCE);
    mma_load_parts(v_s, v_cache, ph, kv_head, block_stride, head_stride, c.ts, 1);
#endif

    /* Whether every score of this work-item's rows in the tile counts: all
     * keys inside every row's range and in valid blocks, and the block mask
     * (if any) keeping the tile for both its rows (a tile lies in one mask
     * block: mask_block is a multiple of BK). */
    int keep[RPL], full = 1;
    for (int h = 0; h < RPL; h++) keep[h] = MMA_KEEPS(h, k0), full = full && keep[h];
    full = full && k0 >= k_lo && k0 + BK <= k_end &&
               (!causal || k0 + BK - 1 <= p_lo) && (window <= 0 || p_hi - k0 < window);
    for (int p = 0; p < NP; p++) full = full && ph[p] >= 0;

    float alpha[RPL];
    uint4 pa[MT * (BK / 16)];
    if (!idle) {
      float4 sc[MT * STILES];
      mma_scores(sc, qa, qw, kw, lane, xch);
      /* online softmax per row; P as A fragments */
      MMA_UNROLL
      for (int m = 0; m < MT; m++) {
        mma_logits(sc + m * STILES, &r, keep, ph, k0, full, plain, &c, causal, window, qk_scale,
                   soft_cap, t, m);
        MMA_SOFTMAX_STEP(sc + m * STILES, STILES, c2, m2 + 2 * m, l + 2 * m, alpha + 2 * m,
                         pa + m * (BK / 16), xch);
      }
    }
#if STAGES == 1
    /* values here; the next tile's keys on their way */
    mma_copy_wait();
    mma_fix_values(v_s, k0, k_lo, k_end);
    barrier(CLK_LOCAL_MEM_FENCE);
    const int next = MMA_NEXT_TILE(k0 + BK);
    if (next < k_end) mma_issue_tile(k_s, NULL, nph, pre, &pre_at, next, &c);
#endif
    if (!idle) mma_values(o, pa, alpha, vw, lane, xch);
#if MMA_FP8_STAGED
    if (next < k_end) mma_store_tile(k_s + (1 - stage) * KTILE, v_s + (1 - stage) * VTILE, fk, fv);
#endif
    for (int p = 0; p < NP; p++) ph[p] = nph[p];
    k0 = next;
  }
  /* a split item's rows go to its partial slot (dense calls only: rows numbered as R) */
  size_t orow[RPL];
  for (int h = 0; h < RPL; h++)
    orow[h] = w.slot < 0 ? (size_t)(first + MMA_TOKEN(h)) * num_heads + r.head[h]
                         : item_row(w, row0 + 8 * h, first, qpk, num_heads, kv_head, num_kv_heads);
  mma_write_rows(w.slot < 0 ? out : part_out, w.slot < 0 ? lse : part_lse, o, l, m2, vscale, &r,
                 orow, t, xch);
}
