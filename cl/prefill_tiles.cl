/* prefill_tiles.cl — prefill's portable path; built after prefill.cl (its arguments,
 * helpers and layouts: lib/kernels.c's prefill families). */
/*
 * clpa_prefill_paged — the portable path: f32 products from local memory,
 * staged the way a tiled SGEMM stages them. A work-group owns ROWS query
 * rows; per tile of BK keys:
 *   S = Q K^T  in chunks of DK head dims: the chunk's queries and keys go
 *              to local memory transposed (qt[d][row], kt[d][column]),
 *              and work-item (rg, cg) multiplies TM consecutive rows by
 *              TN keys CG apart (side by side in kt: key_column) as outer
 *              products, one vector load of rows and one of keys per dim
 *              (TM x TN multiply-adds);
 *   softmax    in base 2: each row's tile max meets in local memory
 *              (red), one work-item a row folds it into the row's running
 *              max (mst) and rescale factor (ast); probabilities go to
 *              pt[key][row], TM rows a store. (Not warp shuffles on
 *              NVIDIA: docs/decisions/0022-prefill-tiles-shape.md.)
 *   O += P V   in chunks of VK keys (vs[key][dim]): the work-item's TM
 *              rows by its output float4s cg, cg + CG, ... (TM x 4 DN
 *              multiply-adds per key from TM / 4 + DN vector loads).
 * Queries are read again for every key tile (from cache: they are the
 * same each time), so local memory holds chunks, not the whole query
 * tile, and the tiles can be 64 x 64 in NVIDIA's 48 KiB. Worked example,
 * ROWS = BK = 64, 128 work-items, head 128: SPT = 32 scores a work-item,
 * TM = 8, TN = 4, RGS = 8 row groups of CG = 16; per dim 3 float4 loads
 * serve 32 multiply-adds, per value key 4 serve 64.
 * lib/prefill.c's tile_local_bytes mirrors the local memory below.
 */
#ifndef CLPA_VKEYS
#error "CLPA_VKEYS: keys a value chunk (lib/prefill.c picks what fits); required"
#endif
#define VK CLPA_VKEYS
#define DK 32 /* head dims a chunk of Q K^T */

#define SPT (ROWS * BK / NUM_THREADS) /* scores a work-item per tile */
#if SPT >= 8 /* rows a work-item: min(SPT, 8), as a literal (LDS pastes it) */
#define TM 8
#elif SPT == 4
#define TM 4
#elif SPT == 2
#define TM 2
#else
#define TM 1
#endif
#if SPT / TM == 4
#define TN 4 /* keys a work-item scores per tile */
#elif SPT / TM == 2
#define TN 2
#else
#define TN 1
#endif
#define RGS (ROWS / TM)                  /* row groups */
#define CG (BK / TN)                     /* work-items a row group */
#define RS (CG + 1) /* floats a row of red: one work-item a row reads it without bank conflicts */
#define QT (ROWS + 4)                    /* floats a row of qt and pt */
#define KT (BK + 4)                      /* floats a row of kt */
#define VS (HEAD_SIZE + 4)               /* floats a row of vs */
#define U4 (HEAD_SIZE / 4)               /* float4s of a head */
#define DN ((U4 + CG - 1) / CG)          /* output float4s a work-item (the last may be past) */
/* 4-element pieces a work-item copies a chunk: queries, keys (of Q K^T),
 * values; they wait in registers between a chunk's loads and its stores */
#define QU ((ROWS * DK / 4 + NUM_THREADS - 1) / NUM_THREADS)
#define KU ((BK * DK / 4 + NUM_THREADS - 1) / NUM_THREADS)
#define VU ((VK / 4 * HEAD_SIZE + NUM_THREADS - 1) / NUM_THREADS)
#define QK_FLOATS (DK * QT + DK * KT)
#define UNION_FLOATS (QK_FLOATS > VK * VS ? QK_FLOATS : VK * VS)
#if SPT < 1 || SPT * NUM_THREADS != ROWS * BK || TN * TM != SPT || RGS * CG != NUM_THREADS ||      \
    HEAD_SIZE % 4 || BK % VK || VK % 4 || NUM_THREADS % BK
#error "prefill tile shape: ROWS x BK must be a multiple of the work-group, VK of 4 dividing BK"
#endif
#if BLOCK_SIZE % 4
#error "prefill reads values 4 tokens at a time: BLOCK_SIZE must be a multiple of 4"
#endif

/* n (1, 2, 4 or 8) floats of local memory at p, aligned to min(n, 4)
 * floats, into a[0 .. n): one or two vector loads. */
#define LDS_1(a, p) ((a)[0] = *(p))
#define LDS_2(a, p)                                                                                \
  do {                                                                                             \
    const float2 t_ = *(__local const float2 *)(p);                                               \
    (a)[0] = t_.s0, (a)[1] = t_.s1;                                                                \
  } while (0)
#define LDS_4(a, p)                                                                                \
  do {                                                                                             \
    const float4 t_ = *(__local const float4 *)(p);                                               \
    (a)[0] = t_.s0, (a)[1] = t_.s1, (a)[2] = t_.s2, (a)[3] = t_.s3;                                \
  } while (0)
#define LDS_8(a, p)                                                                                \
  do {                                                                                             \
    LDS_4(a, p);                                                                                   \
    LDS_4((a) + 4, (p) + 4);                                                                       \
  } while (0)
#define LDS(n, a, p) CAT(LDS_, n)(a, p)
/* and back: a[0 .. n) into local memory at p, aligned the same way */
#define STS_1(p, a) (*(p) = (a)[0])
#define STS_2(p, a) (*(__local float2 *)(p) = (float2)((a)[0], (a)[1]))
#define STS_4(p, a) (*(__local float4 *)(p) = (float4)((a)[0], (a)[1], (a)[2], (a)[3]))
#define STS_8(p, a)                                                                                \
  do {                                                                                             \
    STS_4(p, a);                                                                                   \
    STS_4((p) + 4, (a) + 4);                                                                       \
  } while (0)
#define STS(n, p, a) CAT(STS_, n)(p, a)

/* 4 floats into column c of a transposed chunk t (rows of `stride`
 * floats from row r). */
inline void put_column4(__local float *t, int stride, int r, int c, float4 v) {
  t[(r + 0) * stride + c] = v.s0;
  t[(r + 1) * stride + c] = v.s1;
  t[(r + 2) * stride + c] = v.s2;
  t[(r + 3) * stride + c] = v.s3;
}

/* ---- the tile's blocks: the element offsets of the NBT (block, KV head)
 * tiles (whole blocks of a BK-key tile, or the one block holding it)
 * worked out once per tile into local memory by the first NBT work-items,
 * so that the copies and masks read an offset from there instead of the
 * table (a global load and a 64-bit product each). A block with no key in
 * [k_lo, k_end) gets -1 unread; one with a key there and an id outside the
 * cache gets -1 and sets the fault bit. ---- */
#define NBT (BK >= BLOCK_SIZE ? BK / BLOCK_SIZE : 1)
inline void tile_blocks(__local long *tb, page_row table, int k0, int k_lo, int k_end,
                        int num_blocks, int kv_head, ulong block_stride, ulong head_stride,
                        __global volatile int *faults) {
  const int lid = get_local_id(0);
  if (lid < NBT) {
    const int b = (uint)k0 / BLOCK_SIZE + lid, first = b * BLOCK_SIZE;
    long tile = -1;
    if (first + BLOCK_SIZE > k_lo && first < k_end) {
      const int phys = PAGE_OF(table, b);
      if (phys < 0 || phys >= num_blocks)
        atomic_or(faults, CLPA_FAULT_BAD_BLOCK);
      else
        tile = (long)kv_tile((ulong)phys, kv_head, block_stride, head_stride);
    }
    tb[lid] = tile;
  }
}

/* The tile offset of key j's block (j of tile k0; -1 where j is outside
 * [k_lo, k_end) or its block is bad). */
inline long tile_key_block(__local const long *tb, int j, int k0, int k_lo, int k_end) {
  return j >= k_lo && j < k_end ? tb[(uint)j / BLOCK_SIZE - (uint)k0 / BLOCK_SIZE] : -1;
}

/* ---- the copies, in two halves: fetch_* loads a chunk from global
 * memory into the work-item's registers as stored (qf, kf, vf), before
 * the products of the chunk already in local memory, so that their
 * latency hides behind them; store_* converts and writes them into local
 * memory after the next barrier.
 *
 * 1. A chunk of queries and keys (head dims dc .. dc + DK), for
 * qt[d][row] and kt[d][key]: work-item lid copies row lid % ROWS and key
 * lid % BK (NUM_THREADS is a multiple of both), so neighbours write
 * neighbouring columns (no bank conflicts), pieces of 4 dims Q_STEP and
 * K_STEP apart. Dims past the head, rows past the sequence and keys that
 * take no part (outside [k_lo, k_end) or in a bad block) are zeros.
 *
 * The addresses: the work-item's query row (q_row, once a work-group) and
 * key row (key_row, once a tile) are element offsets that include the
 * work-item's first dims wherever every piece lies inside the chunk and
 * the head (QK_EXACT: the common head sizes); a piece is then that offset
 * plus one that is known when the kernel is built, plus dc (for keys
 * key_dim_offset(dc): dc is a multiple of X, and so key_index(d0 + o, tok)
 * = key_index(d0, tok) + key_index(o, 0) for the work-item's first dim d0
 * < K_STEP and o a multiple of K_STEP, both powers of two; in every
 * layout). Elsewhere each
 * piece's dims are clamped into the head. Every address is inside its
 * buffer even where the load is not taken: PoCL's compiler hoisted a
 * guarded vector load out of its branch, and a block id of -1 made its
 * address 2^44 bytes off. ---- */
#define Q_STEP (4 * (NUM_THREADS / ROWS))
#define K_STEP (4 * (NUM_THREADS / BK))
#define QK_EXACT                                                                                   \
  (HEAD_SIZE % DK == 0 && ROWS * DK / 4 == QU * NUM_THREADS && BK * DK / 4 == KU * NUM_THREADS &&  \
   (K_STEP & (K_STEP - 1)) == 0)
inline int q_dim(int t) { return 4 * ((int)get_local_id(0) / ROWS) + Q_STEP * t; }
inline int k_dim(int t) { return 4 * ((int)get_local_id(0) / BK) + K_STEP * t; }

/* The element offset of the work-group's query row R (the work-item
 * copies row R0 + lid % ROWS), or -1 past the sequence. */
inline long q_row(int R, int nrows, int qpk, int first, int kv_head, ulong q_stride) {
  if (R >= nrows) return -1;
  return (long)(first + R / qpk) * (long)q_stride + (long)(kv_head * qpk + R % qpk) * HEAD_SIZE +
         (QK_EXACT ? q_dim(0) : 0);
}

/* The element offset of the key row work-item lid copies in each chunk
 * of tile k0, or -1 where it takes no part. */
inline long key_row(__local const long *tb, int k0, int k_lo, int k_end, int ts) {
  const int j = k0 + (int)get_local_id(0) % BK;
  const long tile = tile_key_block(tb, j, k0, k_lo, k_end);
  return tile < 0 ? -1
                  : tile + key_index(QK_EXACT ? k_dim(0) : 0, (uint)j % BLOCK_SIZE, BLOCK_SIZE,
                                     ts);
}

inline void fetch_qk(IO_RAW4 qf[QU], KV_RAW4 kf[KU], __global const io_t *q, long qrow,
                     int qvec, __global const kv_t *k_cache, long krow, int dc) {
  __global const io_t *const qp = q + (qrow >= 0 ? qrow : 0);
#pragma unroll
  for (int t = 0; t < QU; t++) {
    const int d = q_dim(t);
    const int o = QK_EXACT ? dc + Q_STEP * t : min(dc + d, HEAD_SIZE - 4);
    qf[t] = (IO_RAW4)(0);
    if ((QK_EXACT || (d < DK && dc + d < HEAD_SIZE)) && qrow >= 0) /* the constant on the left: no clang warning */
      qf[t] = qvec ? IO_RAW4A(qp, o) : IO_RAW4U(qp, o);
  }
  __global const kv_t *const kp = k_cache + (krow >= 0 ? krow : 0);
#pragma unroll
  for (int t = 0; t < KU; t++) {
    const int d = k_dim(t);
    /* (tok 0: no token stride) */
    const int o = QK_EXACT
                      ? key_dim_offset(dc, BLOCK_SIZE) + key_index(K_STEP * t, 0, BLOCK_SIZE, 0)
                      : key_index(min(dc + d, HEAD_SIZE - 4), 0, BLOCK_SIZE, 0);
    kf[t] = (KV_RAW4)(0);
    if ((QK_EXACT || (d < DK && dc + d < HEAD_SIZE)) && krow >= 0) kf[t] = KV_RAW4A(kp + o);
  }
}

/* The column of kt holding key k of the tile: work-item (rg, cg) scores
 * keys cg, cg + CG, cg + 2 CG, ... (so that its probabilities for a key
 * go to pt as one vector store without bank conflicts) from one vector
 * load of kt's columns cg * TN .. cg * TN + TN. */
inline int key_column(int k) { return k % CG * TN + k / CG; }

inline void store_qk(const IO_RAW4 qf[QU], const KV_RAW4 kf[KU], __local float *qt,
                     __local float *kt, float kscale) {
  const int lid = get_local_id(0);
#pragma unroll
  for (int t = 0; t < QU; t++)
    if (QK_EXACT || q_dim(t) < DK) put_column4(qt, QT, q_dim(t), lid % ROWS, IO_RAW4_FLOAT(qf[t]));
#pragma unroll
  for (int t = 0; t < KU; t++)
    if (QK_EXACT || k_dim(t) < DK)
      put_column4(kt, KT, k_dim(t), key_column(lid % BK), KV_RAW4_FLOAT(kf[t]) * kscale);
}

/* ---- 4. a chunk of VK values (keys kv0 .. kv0 + VK of the tile), for
 * vs[key][dim]: 4 tokens of one dim a load (a value row is contiguous
 * over a block's tokens in the split-key layout; 4 loads a token stride
 * apart in HND and NHD; k0, kv0 and BLOCK_SIZE are multiples of 4, so
 * the 4 share a block); slots of keys that take no part are zeros (by
 * store_v): they may hold NaN, and 0 * NaN is NaN ---- */
inline int v_unit(int t) { return get_local_id(0) + NUM_THREADS * t; }

inline void fetch_v(KV_RAW4 vf[VU], __global const kv_t *v_cache, __local const long *tb, int k0,
                    int kv0, int ts) {
  /* tokens from the start of the tile's first block */
  const int t0 = (BK % BLOCK_SIZE == 0 ? 0 : (uint)k0 % BLOCK_SIZE) + kv0;
#pragma unroll
  for (int t = 0; t < VU; t++) {
    const int e = v_unit(t), tok = t0 + 4 * (e / HEAD_SIZE);
    const long tile = e < VK / 4 * HEAD_SIZE ? tb[(uint)tok / BLOCK_SIZE] : -1;
    vf[t] = (KV_RAW4)(0);
    if (tile >= 0)
      vf[t] = KV_RAW4_TOKENS(v_cache + (tile >= 0 ? tile : 0) +
                                 value_index(e % HEAD_SIZE, (uint)tok % BLOCK_SIZE, BLOCK_SIZE, ts),
                             ts);
  }
}

/* (`inside`: every key of the tile is in [k_lo, k_end), none to zero) */
inline void store_v(const KV_RAW4 vf[VU], __local float *vs, int k0, int kv0, int k_lo,
                    int k_end, int inside, float vscale) {
#pragma unroll
  for (int t = 0; t < VU; t++) {
    const int e = v_unit(t), j = k0 + kv0 + 4 * (e / HEAD_SIZE);
    if (e >= VK / 4 * HEAD_SIZE) break;
    float4 v = KV_RAW4_FLOAT(vf[t]) * vscale;
    if (!inside) {
      const int4 jj = (int4)(j, j + 1, j + 2, j + 3);
      v = select((float4)(0.0f), v, jj < k_end && jj >= k_lo);
    }
    __local float *o = vs + 4 * (e / HEAD_SIZE) * VS + e % HEAD_SIZE;
    o[0] = v.s0, o[VS] = v.s1, o[2 * VS] = v.s2, o[3 * VS] = v.s3;
  }
}

/* The rows of the tile (ROWS entries each in local memory): query head
 * (-1 past the sequence), position, ALiBi slope. */
typedef struct tile_rows {
  __local int *head, *pos;
  __local float *slope;
} tile_rows;

/* Row r's block-mask row (NULL without a mask). */
inline __global const uchar *row_mask(tile_rows rows, int r, __global const uchar *block_mask,
                                      int s, int num_heads, int cached, int mask_block,
                                      int mask_qb, int mask_kb) {
  return mask_row(block_mask, s, num_heads, rows.head[r], rows.pos[r] - cached, mask_block,
                  mask_qb, mask_kb);
}

/* Block-sparse: the work-group's first tile from k that a row keeps
 * (k_end if none), every work-item calling it: each work-item's next kept
 * key over its live rows (mask_next), kept in *mine while it lies ahead,
 * then the work-group's least (group_min): three barriers a kept tile,
 * none per skipped one. Only the build for calls with a mask (CLPA_SPARSE,
 * lib/prefill.c) has them; the dense build takes every tile. No barrier
 * may hang on a kernel argument: with them behind `if (block_mask)`, PoCL
 * 5.0 (LLVM 16, AVX-512) miscompiled the kernel for dense calls too
 * (some rows' maxima and sums wrong, which cases depending on the build). */
#ifndef CLPA_SPARSE
#error "CLPA_SPARSE: 1 for the build for calls with a block mask; required"
#endif
inline int tiles_next(int k, int k_end, __global const uchar *block_mask, tile_rows rows, int s,
                      int num_heads, int cached, int mask_block, int mask_qb, int mask_kb,
                      int *mine, __local int *slot) {
#if CLPA_SPARSE
  if (*mine < k) {
    *mine = k_end;
    for (int i = 0; i < TM; i++) {
      const int r = get_local_id(0) / CG * TM + i;
      if (rows.head[r] >= 0)
        *mine = min(*mine, mask_next(row_mask(rows, r, block_mask, s, num_heads, cached,
                                              mask_block, mask_qb, mask_kb),
                                     k, k_end, mask_block));
    }
  }
  return group_min(*mine, slot);
#else
  return k;
#endif
}

/* ---- The kernel as phases over what a work-group holds ----
 * tiles_call: the call and the work-group's rows, fixed for the kernel;
 * tiles_lds: its local memory; tiles_acc: a work-item's running sums and
 * output. The next chunk's loads (qf, kf, vf), in flight between phases,
 * are passed as arrays: a private array reached through a struct pointer
 * is a generic pointer where the compiler follows OpenCL C 2.0 (NVIDIA's
 * does), and the copies take private arrays. */
typedef struct tiles_call {
  int s, kv_head, qpk, first, nrows, cached, R0;
  int k_lo, k_end, p_lo, p_hi; /* the keys the rows see; the rows' first and last position */
  int causal, window, plain, ts, qvec;
  long qrow; /* the query row this work-item copies (q_row) */
  float scale, c2, soft_cap, kscale, vscale;
  __global const uchar *block_mask;
  int num_heads, mask_block, mask_qb, mask_kb;
  work_item w; /* the work item: a split writes its partial slot (prefill.cl) */
  int num_kv_heads;
} tiles_call;

typedef struct tiles_lds {
  __local float *qt, *kt, *vs, *pt, *red, *mst, *ast;
  __local int *next_kept;
  tile_rows rows;
} tiles_lds;

typedef struct tiles_acc {
  float l[TM];        /* the rows' partial sums (a row's split over its CG work-items) */
  float4 acc[TM][DN]; /* the rows' output float4s cg, cg + CG, ... */
} tiles_acc;

/* The first tile from k that a row keeps (tiles_next with the call's mask). */
inline int tiles_next_kept(const tiles_call *c, tiles_lds m, int k, int *mine) {
  return tiles_next(k, c->k_end, c->block_mask, m.rows, c->s, c->num_heads, c->cached,
                    c->mask_block, c->mask_qb, c->mask_kb, mine, m.next_kept);
}

/* 1-2. Scores of tile k0: TM rows x TN keys, outer products over the
 * head's chunks; each chunk's loads (after the last, the tile's first
 * values) are fetched before the products of the one before. */
inline void tiles_scores(float sc[TM][TN], IO_RAW4 qf[QU], KV_RAW4 kf[KU], KV_RAW4 vf[VU], tiles_lds m, const tiles_call *c,
                         __global const io_t *q, __global const kv_t *k_cache,
                         __global const kv_t *v_cache, __local const long *tb, int k0, long krow) {
  const int rg = get_local_id(0) / CG, cg = get_local_id(0) % CG;
#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int j = 0; j < TN; j++) sc[i][j] = 0.0f;
  for (int dc = 0; dc < HEAD_SIZE; dc += DK) {
    barrier(CLK_LOCAL_MEM_FENCE); /* the last chunk (or tile) is read */
    store_qk(qf, kf, m.qt, m.kt, c->kscale);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (dc + DK < HEAD_SIZE)
      fetch_qk(qf, kf, q, c->qrow, c->qvec, k_cache, krow, dc + DK);
    else
      fetch_v(vf, v_cache, tb, k0, 0, c->ts);
#pragma unroll /* the whole chunk (docs/decisions/0022-prefill-tiles-shape.md) */
    for (int d = 0; d < DK; d++) {
      float a[TM], b[TN];
      LDS(TM, a, m.qt + d * QT + rg * TM);
      LDS(TN, b, m.kt + d * KT + cg * TN);
#pragma unroll
      for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) sc[i][j] = fma(a[i], b[j], sc[i][j]);
    }
  }
}

/* 3a. Logits in base 2 (times log2(e)) with the masks, and each row's
 * tile max into red. Masks only where the tile is not `full` (every key
 * inside every row's range, in a valid block; dense builds only), soft-cap
 * and ALiBi only where the call has them (`plain` otherwise: the scale and
 * log2(e) in one multiply). */
inline void tiles_logits(float sc[TM][TN], tiles_lds m, const tiles_call *c,
                         __local const long *tb, int k0) {
  const int rg = get_local_id(0) / CG, cg = get_local_id(0) % CG;
  int full = !CLPA_SPARSE && k0 >= c->k_lo && k0 + BK <= c->k_end &&
             (!c->causal || k0 + BK - 1 <= c->p_lo) && (c->window <= 0 || c->p_hi - k0 < c->window);
  int kok[TN]; /* the key takes part (a bad block's keys never do) */
#pragma unroll
  for (int j = 0; j < TN; j++) {
    kok[j] = tile_key_block(tb, k0 + cg + CG * j, k0, c->k_lo, c->k_end) >= 0;
    full = full && kok[j];
  }
#pragma unroll
  for (int i = 0; i < TM; i++) {
    const int r = rg * TM + i, pos = m.rows.pos[r];
    if (c->plain) {
#pragma unroll
      for (int j = 0; j < TN; j++) sc[i][j] *= c->c2;
    } else {
      const float slope = m.rows.slope[r];
#pragma unroll
      for (int j = 0; j < TN; j++) {
        float x = sc[i][j] * c->scale;
        if (c->soft_cap > 0.0f) x = c->soft_cap * tanh(x / c->soft_cap);
        sc[i][j] = (x + slope * (float)(k0 + cg + CG * j - pos)) * LOG2E;
      }
    }
    if (!full) { /* key jj counts for the row where lo <= jj <= hi */
#if CLPA_SPARSE
      const int keep = m.rows.head[r] >= 0 &&
                       (!c->block_mask || row_mask(m.rows, r, c->block_mask, c->s, c->num_heads,
                                                   c->cached, c->mask_block, c->mask_qb,
                                                   c->mask_kb)[k0 / c->mask_block]);
#else
      const int keep = m.rows.head[r] >= 0;
#endif
      const int hi = !keep ? INT_MIN : c->causal ? pos : INT_MAX;
      const int lo = c->window > 0 ? pos - c->window + 1 : INT_MIN;
#pragma unroll
      for (int j = 0; j < TN; j++) {
        const int jj = k0 + cg + CG * j;
        sc[i][j] = kok[j] && jj >= lo && jj <= hi ? sc[i][j] : -INFINITY;
      }
    }
    float tmax = sc[i][0];
#pragma unroll
    for (int j = 1; j < TN; j++) tmax = fmax(tmax, sc[i][j]);
    m.red[r * RS + cg] = tmax;
  }
}

/* 3b. The online softmax: each row's new running max (one work-item a
 * row, from red), the probabilities into pt (TM rows a store), the sums
 * and the output rescaled where the max moved. */
inline void tiles_softmax(float sc[TM][TN], tiles_acc *a, tiles_lds m) {
  const int lid = get_local_id(0), rg = lid / CG, cg = lid % CG;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < ROWS) {
    float mx = m.mst[lid];
    for (int k = 0; k < CG; k++) mx = fmax(mx, m.red[lid * RS + k]);
    m.ast[lid] = mx == -INFINITY ? 1.0f : exp2_fast(m.mst[lid] - mx); /* 0 when the max was -inf */
    m.mst[lid] = mx;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
  for (int i = 0; i < TM; i++) {
    const float mn = m.mst[rg * TM + i], alpha = m.ast[rg * TM + i];
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < TN; j++) {
      const float pr = sc[i][j] == -INFINITY ? 0.0f : exp2_fast(sc[i][j] - mn);
      sc[i][j] = pr;
      sum += pr;
    }
    a->l[i] = a->l[i] * alpha + sum;
    if (alpha != 1.0f) {
#pragma unroll
      for (int j = 0; j < DN; j++) a->acc[i][j] *= alpha;
    }
  }
#pragma unroll
  for (int j = 0; j < TN; j++) { /* the probabilities of key cg + CG j, TM rows a store */
    float col[TM];
#pragma unroll
    for (int i = 0; i < TM; i++) col[i] = sc[i][j];
    STS(TM, m.pt + (cg + CG * j) * QT + rg * TM, col);
  }
}

/* 4. O += P V over tile k0, VK keys a chunk; after the last chunk's loads
 * the next tile's (k1) first queries and keys are fetched, from its key
 * row, which *krow receives. */
inline void tiles_values(tiles_acc *a, IO_RAW4 qf[QU], KV_RAW4 kf[KU], KV_RAW4 vf[VU], tiles_lds m, const tiles_call *c,
                         __global const io_t *q, __global const kv_t *k_cache,
                         __global const kv_t *v_cache, __local const long *tb,
                         __local const long *tb_next, int k0, int k1, long *krow) {
  const int rg = get_local_id(0) / CG, cg = get_local_id(0) % CG;
  const int inside = k0 >= c->k_lo && k0 + BK <= c->k_end;
  for (int kv0 = 0; kv0 < BK; kv0 += VK) {
    barrier(CLK_LOCAL_MEM_FENCE); /* qt/kt (or the last chunk's values) read; pt written */
    store_v(vf, m.vs, k0, kv0, c->k_lo, c->k_end, inside, c->vscale);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (kv0 + VK < BK)
      fetch_v(vf, v_cache, tb, k0, kv0 + VK, c->ts);
    else if (k1 < c->k_end) {
      *krow = key_row(tb_next, k1, c->k_lo, c->k_end, c->ts);
      fetch_qk(qf, kf, q, c->qrow, c->qvec, k_cache, *krow, 0);
    }
#pragma unroll 8
    for (int k = 0; k < VK; k++) {
      float pr[TM];
      LDS(TM, pr, m.pt + (kv0 + k) * QT + rg * TM);
#pragma unroll
      for (int j = 0; j < DN; j++) {
        const int u = cg + CG * j;
        if (DN * CG != U4 && u >= U4) break;
        const float4 v = *(__local const float4 *)(m.vs + k * VS + 4 * u);
#pragma unroll
        for (int i = 0; i < TM; i++) a->acc[i][j] = fma((float4)(pr[i]), v, a->acc[i][j]);
      }
    }
  }
}

/* 5. Each row's sum over its work-items, the output normalised once, and
 * the log-sum-exp. */
inline void tiles_write(const tiles_acc *a, tiles_lds m, const tiles_call *c,
                        __global io_t *out, __global float *lse) {
  const int rg = get_local_id(0) / CG, cg = get_local_id(0) % CG;
  barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
  for (int i = 0; i < TM; i++) m.red[(rg * TM + i) * RS + cg] = a->l[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int i = 0; i < TM; i++) {
    const int r = rg * TM + i, R = c->R0 + r, head = m.rows.head[r];
    if (head < 0) continue;
    float sum = 0.0f;
    for (int k = 0; k < CG; k++) sum += m.red[r * RS + k];
    const size_t row = item_row(c->w, R, c->first, c->qpk, c->num_heads, c->kv_head,
                                c->num_kv_heads);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
    for (int j = 0; j < DN; j++) {
      const int u = cg + CG * j;
      if (DN * CG != U4 && u >= U4) break;
      const float4 o = a->acc[i][j] * inv;
      const size_t d = row * HEAD_SIZE + 4 * u;
      IO_STORE(o.s0, out, d), IO_STORE(o.s1, out, d + 1);
      IO_STORE(o.s2, out, d + 2), IO_STORE(o.s3, out, d + 3);
    }
    if (lse && cg == 0) lse[row] = softmax_lse(softmax_state_of(m.mst[r] / LOG2E, sum));
  }
}

__kernel __attribute__((reqd_work_group_size(NUM_THREADS, 1, 1))) void clpa_prefill_paged(
    KERNEL_PARAMS(PREFILL_ARG_LIST) PAGE_PARAMS) {
  __local float4 un4[(UNION_FLOATS + 3) / 4]; /* qt and kt, or vs */
  __local float4 pt4[BK * QT / 4];            /* probabilities [key][row] */
  __local float red[ROWS * RS];               /* a row's partial maxima or sums */
  __local float mst[ROWS], ast[ROWS];         /* running max, this tile's rescale */
  __local int rhead[ROWS], rpos[ROWS];
  __local float rslope[ROWS];
  __local int next_kept;
  __local long tblk[2 * NBT]; /* the block tiles of this tile and the next (by tile parity) */
  const tiles_lds m = {(__local float *)un4, (__local float *)un4 + DK * QT, (__local float *)un4,
                       (__local float *)pt4, red, mst, ast, &next_kept, {rhead, rpos, rslope}};

  /* The work-group's sequence and rows, and the call. */
  const int lid = get_local_id(0);
  tiles_call c;
  c.w = work_item_of(work, get_group_id(0));
  c.s = c.w.s, c.R0 = c.w.R0, c.num_kv_heads = num_kv_heads;
  c.kv_head = get_group_id(1), c.qpk = num_heads / num_kv_heads;
  c.first = seq_info[3 * c.s], c.cached = seq_info[3 * c.s + 2];
  c.nrows = seq_info[3 * c.s + 1] * c.qpk;
  c.causal = causal, c.window = window, c.plain = !(soft_cap > 0.0f) && !alibi;
  c.ts = kv_token_stride(num_kv_heads, head_stride, BLOCK_SIZE); /* HND, NHD */
  c.qvec = q_stride % 4 == 0;                                    /* aligned query loads */
  c.qrow = q_row(c.R0 + lid % ROWS, c.nrows, c.qpk, c.first, c.kv_head, q_stride);
  c.scale = scale, c.c2 = scale * LOG2E, c.soft_cap = soft_cap;
  c.kscale = !KV_IS_FP8 ? 1.0f : k_scales ? k_scales[0] : k_scale;
  c.vscale = !KV_IS_FP8 ? 1.0f : v_scales ? v_scales[0] : v_scale;
  c.block_mask = block_mask, c.num_heads = num_heads;
  c.mask_block = mask_block, c.mask_qb = mask_qb, c.mask_kb = mask_kb;
  page_row table = PAGE_ROW_OF_LEN(c.s, c.cached + seq_info[3 * c.s + 1]);

  /* The keys the rows see, and the item's split of them. */
  c.p_lo = c.cached + c.R0 / c.qpk, c.p_hi = c.cached + (min(c.R0 + ROWS, c.nrows) - 1) / c.qpk;
  const int2 all_keys =
      tile_keys(c.p_lo, c.p_hi, c.cached + seq_info[3 * c.s + 1], causal, window);
  const int2 keys = item_keys(all_keys, c.w, split_keys);
  c.k_lo = keys.x, c.k_end = keys.y;
  const int sink = sinks && item_has_sink(all_keys, c.w);

  /* The tile's rows (work-item lid: row lid) and the running max of row
   * lid (the sink as a logit that is already there). */
  if (lid < ROWS) {
    int head, p;
    const int live = tile_row(c.R0 + lid, c.nrows, c.qpk, c.kv_head, c.cached, &head, &p);
    rhead[lid] = live ? head : -1, rpos[lid] = p, rslope[lid] = alibi ? alibi[head] : 0.0f;
    mst[lid] = sink ? sinks[head] * LOG2E : -INFINITY; /* maxima in base 2 */
  }
  barrier(CLK_LOCAL_MEM_FENCE);

  tiles_acc a;
#pragma unroll
  for (int i = 0; i < TM; i++) {
    a.l[i] = sink && lid % CG == 0 ? 1.0f : 0.0f;
#pragma unroll
    for (int j = 0; j < DN; j++) a.acc[i][j] = (float4)(0.0f);
  }

  /* The tiles a row keeps (block-sparse skips the others), the copies a
   * chunk ahead: the first tile's blocks and first chunk before the loop. */
  int mine = -1;
  int k0 = tiles_next_kept(&c, m, c.k_lo / BK * BK, &mine);
  IO_RAW4 qf[QU];
  KV_RAW4 kf[KU], vf[VU];
  __local long *tb = tblk, *tb_next = tblk + NBT;
  if (k0 < c.k_end)
    tile_blocks(tb, table, k0, c.k_lo, c.k_end, num_blocks, c.kv_head, block_stride, head_stride,
                faults);
  barrier(CLK_LOCAL_MEM_FENCE);
  long krow = -1; /* this tile's key row (key_row) */
  if (k0 < c.k_end) {
    krow = key_row(tb, k0, c.k_lo, c.k_end, c.ts);
    fetch_qk(qf, kf, q, c.qrow, c.qvec, k_cache, krow, 0);
  }
  while (k0 < c.k_end) {
    float sc[TM][TN];
    tiles_scores(sc, qf, kf, vf, m, &c, q, k_cache, v_cache, tb, k0, krow);
    tiles_logits(sc, m, &c, tb, k0);
    tiles_softmax(sc, &a, m);
    const int k1 = tiles_next_kept(&c, m, k0 + BK, &mine);
    if (k1 < c.k_end)
      tile_blocks(tb_next, table, k1, c.k_lo, c.k_end, num_blocks, c.kv_head, block_stride,
                  head_stride, faults);
    tiles_values(&a, qf, kf, vf, m, &c, q, k_cache, v_cache, tb, tb_next, k0, k1, &krow);
    k0 = k1;
    __local long *const t_ = tb;
    tb = tb_next, tb_next = t_;
  }
  tiles_write(&a, m, &c, c.w.slot < 0 ? out : part_out, c.w.slot < 0 ? lse : part_lse);
}
