/* prefill_mma_tiles.cl — how prefill's tensor-core path (prefill_mma.cl,
 * built after this file) brings key and value tiles into local memory and
 * addresses their fragments there: the tile's shape, the layouts, the
 * ldmatrix addresses, the block-table lookups and the copies.
 *
 * Per tile of BK keys (BK / BLOCK_SIZE cache blocks, the tile's parts) the
 * work-group copies each block's keys and values into local memory as the
 * cache holds them: a block's part of one KV head is HEAD_SIZE / 8 x
 * BLOCK_SIZE uint4 of keys and HEAD_SIZE x BLOCK_SIZE / 8 of values,
 * contiguous, so work-item l copies uint4 l, l + NUM_THREADS, .. of each
 * (one 64-bit add a copy, the block ids read a tile ahead, off the
 * critical path). ldmatrix reads the fragments straight from that layout:
 * a key fragment's 8 rows are 8 consecutive tokens of one 16-byte chunk
 * (128 contiguous bytes), a value fragment's 8 rows are 8 dimensions of
 * one 8-token chunk, whose chunks are swizzled (mma_vpos) so that the 8
 * rows hit 8 different bank groups. An fp8 cache's tiles are converted to
 * f16 as they are copied.
 *
 * HND and NHD (a token's key and value each a row of HEAD_SIZE contiguous
 * elements): a tile is copied token-major, BK rows of HEAD_SIZE / 8 uint4
 * and one uint4 of padding (mma_tpos), so that the 8 tokens of one chunk
 * an ldmatrix row set reads hit 8 bank groups, and every fragment's
 * address is a lane's base plus a constant, as split-key's are
 * (docs/decisions/0031-prefill-mma-fragment-addresses.md).
 * Keys read as above (a fragment's 8 rows are 8 tokens of one chunk);
 * values through ldmatrix's .trans, whose 8 rows are 8 tokens of one chunk
 * (8 dimensions) handed out transposed: token pairs of one dimension, V's
 * B fragment. The copies are as many 16-byte pieces as split-key's, and
 * successive work-items copy successive pieces of the cache (HND: a part
 * is contiguous; NHD: its token rows are).
 *
 * Local memory: STAGES * 2 * BK * HEAD_SIZE halves (HND, NHD: HEAD_SIZE + 8
 * a token), and with 32 rows a warp (prefill_mma.cl's MT 2) ROWS *
 * HEAD_SIZE of queries, lib/prefill.c's mma_local_bytes.
 */
#define WARPS (NUM_THREADS / 32)
#ifndef CLPA_STAGES
#error "CLPA_STAGES: key and value tiles in flight (1 or 2); required"
#endif
#define STAGES CLPA_STAGES /* key and value tiles in flight: 1 or 2 */
#if NUM_THREADS % 32 || BK % 32 || HEAD_SIZE % 16 || BLOCK_SIZE % 8 || BK % BLOCK_SIZE || \
    (STAGES != 1 && STAGES != 2)
#error "prefill mma tiles: whole warps, BK of 32 and of BLOCK_SIZE, HEAD_SIZE of 16, 1-2 stages"
#endif
#if KV_BYTES != 2 && KV_BYTES != 1
#error "prefill mma: the cache must be f16, bf16 or fp8"
#endif
#define NP (BK / BLOCK_SIZE)    /* cache blocks (parts) of a tile */
#define VS (BLOCK_SIZE / 8)     /* uint4 of a value row of a block: 1, 2 or 4 */
#define PART4 (HEAD_SIZE * VS)  /* uint4 of a block's keys, and of its values */
#if KV_SPLIT_KEY
#define KTILE (NP * PART4) /* uint4 of a key tile */
#else
#define CH (HEAD_SIZE / 8) /* uint4 of a token's row (HND, NHD) */
#define TROW (CH + 1)      /* and of its row in local memory, padded */
#define KTILE (BK * TROW)
#endif
#define VTILE KTILE /* uint4 of a value tile */
#define CPT ((PART4 + NUM_THREADS - 1) / NUM_THREADS) /* a work-item's copies of a part */


/* Where uint4 `col` of row `row` of a tile whose rows are `width` uint4
 * (even, or 1) sits in local memory: the row's chunks xor-ed with bits of
 * the row, so that the same chunk of 8 successive rows (one ldmatrix
 * fragment) hits 8 different 16-byte bank groups (rows alone would put 2
 * or more of them in the same group). SW, the largest power of two that
 * divides the width up to 8, is how many chunks the xor mixes: 8 / SW
 * successive rows already start in different groups. */
#define MMA_SW(w) (((w) & -(w)) < 8 ? ((w) & -(w)) : 8)
inline int mma_swz(int row, int col, int width) {
  return row * width + (col ^ (row / (8 / MMA_SW(width)) % MMA_SW(width)));
}

/* Where value chunk e of a part (dimension e / VS, tokens 8 (e % VS) ..
 * + 7) sits in local memory (split-key). */
inline int mma_vpos(int e) { return mma_swz(e / VS, e % VS, VS); }

/* The 16-byte key row of chunk c (dimensions 8 c .. 8 c + 7) at key 8 n
 * of a tile in local memory, in uint4 (split-key): part n * 8 / BLOCK_SIZE
 * (a cache block, copied as it is), then kv.cl's key_row16 for the part's
 * token (affine: the chunk's row at token 0, plus the token's). */
inline int mma_key_row16(int n, int c) {
  return n * 8 / BLOCK_SIZE * PART4 + key_row16(c, 0, BLOCK_SIZE, 0) +
         key_row16(0, n * 8 % BLOCK_SIZE, BLOCK_SIZE, 0);
}

/* The ldmatrix row address (in uint4 of a tile) that lane `lane` gives,
 * the rest being a constant of the call (MMA_LDSM4's c): keys: row lane %
 * 8 is key n * 8 + lane % 8 and matrix lane / 8 is chunk 2 ks + lane / 8
 * (dimensions 16 ks + 8 (lane / 8) ..); for a lone last k-step (x2) lanes
 * 16-31 repeat 0-15. Values: row lane % 8 is dimension n * 8 + lane % 8,
 * matrix i = lane / 8 the tile's tokens 16 ks + 8 i .. (chunk i % VS of
 * part i / VS from k-step ks on, swizzled as mma_vpos). The constants:
 * MMA_KROW (keys of n-tile n from chunk c) and MMA_VOFF (values of
 * k-step ks, n-tile n). */
#if KV_SPLIT_KEY
inline int mma_klane(int lane) { return lane / 8 * BLOCK_SIZE + lane % 8; }
inline int mma_klane2(int lane) { return lane / 8 % 2 * BLOCK_SIZE + lane % 8; }
inline int mma_vlane(int lane) {
  const int r8 = lane % 8, i8 = lane / 8;
  return i8 / VS * PART4 + mma_vpos(r8 * VS + i8 % VS);
}
#define MMA_KROW(n, c) mma_key_row16(n, c)
#define MMA_VOFF(ks, n) (2 * (ks) / VS * PART4 + (n) * 8 * VS)
#define MMA_LDSM4V MMA_LDSM4
#else
/* Where chunk c (dimensions 8 c .. 8 c + 7) of the tile's token k sits:
 * row k, TROW uint4 a row (affine, so that a fragment's address is a
 * lane's part plus a constant). CH is even (HEAD_SIZE a multiple of 16),
 * so TROW is odd and 8 successive rows start in 8 different 16-byte bank
 * groups. */
inline int mma_tpos(int k, int c) { return k * TROW + c; }
/* Keys of n-tile n from chunk c: row l % 8 is key 8 n + l % 8, matrix l /
 * 8 chunk c + l / 8 (x2: lanes 16-31 repeat 0-15). Values of k-step ks
 * (tokens 16 ks .. + 15, then the next k-step's) at chunk n (the n-tile's
 * dimensions), through .trans: matrix l / 8 is tokens 16 ks + 8 (l / 8)
 * .., so lane l gives token 16 ks + l. */
inline int mma_klane(int l) { return mma_tpos(l % 8, l / 8); }
inline int mma_klane2(int l) { return mma_tpos(l % 8, l / 8 % 2); }
inline int mma_vlane(int l) { return mma_tpos(l, 0); }
#define MMA_KROW(n, c) mma_tpos(8 * (n), c)
#define MMA_VOFF(ks, n) mma_tpos(16 * (ks), n)
#define MMA_LDSM4V MMA_LDSM4T
#endif

/* ldmatrix.x4 (x2: .xy; T: .trans) of the fragment c uint4 past the row
 * address LANEFN(lane) of tile w: on NVIDIA the instruction, at offset c
 * from the lane's base A = MMA_BASE(w, LANEFN), taken once a tile;
 * emulated, each lane computes the addresses the others would give (no
 * exchange, no barrier: PoCL compiles barriers in loops slowly), lane l
 * taking, .trans, column l / 4 of rows 2 (l % 4) and + 1 of each matrix. */
#if MMA_PTX
#define MMA_BASE(w, LANEFN) mma_shared((w) + 4 * LANEFN(lane))
#define MMA_LDSM4(w, A, LANEFN, c) mma_ldsm4a((A) + 16u * (uint)(c))
#define MMA_LDSM2(w, A, LANEFN, c) mma_ldsm2a((A) + 16u * (uint)(c))
#define MMA_LDSM4T(w, A, LANEFN, c) mma_ldsm4ta((A) + 16u * (uint)(c))
#else
#define MMA_BASE(w, LANEFN) 0u
#define MMA_LDSM_M(w, LANEFN, c, m) (w)[4 * (LANEFN(8 * (m) + lane / 4) + (c)) + lane % 4]
#define MMA_LDSM4(w, A, LANEFN, c)                                                        \
  (uint4)(MMA_LDSM_M(w, LANEFN, c, 0), MMA_LDSM_M(w, LANEFN, c, 1),                      \
          MMA_LDSM_M(w, LANEFN, c, 2), MMA_LDSM_M(w, LANEFN, c, 3))
#define MMA_LDSM2(w, A, LANEFN, c) (uint2)(MMA_LDSM_M(w, LANEFN, c, 0), MMA_LDSM_M(w, LANEFN, c, 1))
#define MMA_LDSMT_ROW(w, LANEFN, c, m, i) \
  (w)[4 * (LANEFN(8 * (m) + 2 * (lane % 4) + (i)) + (c)) + lane / 8]
#define MMA_LDSMT_M(w, LANEFN, c, m) \
  mma_column_pair(MMA_LDSMT_ROW(w, LANEFN, c, m, 0), MMA_LDSMT_ROW(w, LANEFN, c, m, 1), lane / 4 % 2)
#define MMA_LDSM4T(w, A, LANEFN, c)                                                       \
  (uint4)(MMA_LDSMT_M(w, LANEFN, c, 0), MMA_LDSMT_M(w, LANEFN, c, 1),                    \
          MMA_LDSMT_M(w, LANEFN, c, 2), MMA_LDSMT_M(w, LANEFN, c, 3))
#endif

/* The table entries of tile k0's parts whose keys meet [k_lo, k_end)
 * (the others are not read and left as they are): issued a tile ahead,
 * so that the load's latency passes while a tile is computed. */
inline void mma_tile_entries(int *raw, page_row table, int k0, int k_lo, int k_end) {
  for (int p = 0; p < NP; p++) {
    const int j0 = k0 + p * BLOCK_SIZE;
    if (j0 + BLOCK_SIZE > k_lo && j0 < k_end) raw[p] = PAGE_OF(table, (uint)j0 / BLOCK_SIZE);
  }
}

/* The block ids of tile k0's parts from their entries raw[]: ph[p] >= 0
 * the block, -1 for a part with no key in [k_lo, k_end) (not read), -2 for
 * one whose entry is outside the cache (which sets the fault bit). */
inline void mma_tile_blocks(int *ph, const int *raw, int k0, int k_lo, int k_end, int num_blocks,
                            __global volatile int *faults) {
  for (int p = 0; p < NP; p++) {
    const int j0 = k0 + p * BLOCK_SIZE, b = raw[p];
    ph[p] = j0 + BLOCK_SIZE <= k_lo || j0 >= k_end ? -1 : b >= 0 && b < num_blocks ? b : -2;
    if (ph[p] == -2 && get_local_id(0) == 0) atomic_or(faults, CLPA_FAULT_BAD_BLOCK);
  }
}

#if KV_BYTES == 1
/* fp8: 8 values (a uint2) as the f16 chunk they make, exactly (every e4m3
 * and e5m2 value is an f16). */
inline uint4 mma_fp8_chunk(uint2 w) { return (uint4)(mma_fp8x4(w.x), mma_fp8x4(w.y)); }

/* fp8: where local chunk e of a part starts in the cache's part, in
 * elements (8-byte aligned: head sizes and pitches are multiples of 16
 * elements). Split-key keys: dimensions 8 (e / BLOCK_SIZE) .. of token e %
 * BLOCK_SIZE; values: tokens 8 (e % VS) .. of dimension e / VS. HND, NHD:
 * dimensions 8 (e % CH) .. of token e / CH. */
inline int mma_fp8_at(int e, int values, int ts) {
#if KV_SPLIT_KEY
  (void)ts;
  return values ? value_index(e / VS, 8 * (e % VS), BLOCK_SIZE, 0)
                : key_index(8 * (e / BLOCK_SIZE), e % BLOCK_SIZE, BLOCK_SIZE, 0);
#else
  const int o = e / CH, c = e % CH;
  return values ? value_index(8 * c, o, BLOCK_SIZE, ts) : key_index(8 * c, o, BLOCK_SIZE, ts);
#endif
}
#endif

/* Copies the keys (or values: `cache` and `dst` say which) of the parts of
 * a tile whose blocks are ph[] into dst (a stage's tile); this
 * work-item's chunks of a part not read are zeros. Local memory holds
 * f16 or bf16 chunks of 8 elements in every case: an fp8 cache's 8 bytes
 * are read and converted on the way (a plain load, where 2-byte caches
 * take cp.async), so that the products read the same tiles
 * (docs/decisions/0032-prefill-mma-fp8.md). */
inline void mma_load_parts(__local uint4 *dst, __global const kv_t *cache, const int *ph,
                           int kv_head, ulong block_stride, ulong head_stride, int ts,
                           int values) {
  const int lid = get_local_id(0);
  (void)ts; /* split-key: unused */
  for (int p = 0; p < NP; p++) {
    __global const kv_t *part = cache + kv_tile((ulong)max(ph[p], 0), kv_head, block_stride,
                                                head_stride);
    __global const uint4 *src = (__global const uint4 *)part;
    (void)src; /* fp8: unused */
    for (int i = 0; i < CPT; i++) {
      const int e = lid + i * NUM_THREADS;
      if (PART4 % NUM_THREADS && e >= PART4) break;
#if KV_SPLIT_KEY
      __local uint4 *d = dst + p * PART4 + (values ? mma_vpos(e) : e);
#if KV_BYTES != 1
      __global const uint4 *from = src + e;
#endif
#else /* chunk e % CH of token e / CH: successive work-items, successive 16 bytes of a row */
      const int o = e / CH, c = e % CH;
      __local uint4 *d = dst + mma_tpos(p * BLOCK_SIZE + o, c);
#if KV_BYTES != 1
      __global const uint4 *from = src + (values ? value_row16(c, o, ts) : key_row16(c, o, BLOCK_SIZE, ts));
#endif
#endif
#if KV_BYTES == 1
      *d = ph[p] >= 0 ? mma_fp8_chunk(*(__global const uint2 *)(part + mma_fp8_at(e, values, ts)))
                      : (uint4)(0u);
#else
      if (ph[p] >= 0) mma_copy16(d, from);
      else *d = (uint4)(0u);
#endif
    }
  }
}

/* Zeroes the value slots of tile k0 outside [k_lo, k_end), which may hold
 * anything, NaN included (0 * NaN is NaN), in the chunks this work-item
 * copied (after mma_copy_wait). */
inline void mma_fix_values(__local uint4 *v_s, int k0, int k_lo, int k_end) {
  if (k0 >= k_lo && k0 + BK <= k_end) return;
  for (int p = 0; p < NP; p++)
    for (int i = 0; i < CPT; i++) {
      const int e = get_local_id(0) + i * NUM_THREADS;
      if (PART4 % NUM_THREADS && e >= PART4) break;
#if KV_SPLIT_KEY
      const int j = k0 + p * BLOCK_SIZE + e % VS * 8;
      if (j >= k_lo && j + 8 <= k_end) continue;
      __local uint4 *q = v_s + p * PART4 + mma_vpos(e);
      const int8 jj = (int8)(j) + IOTA8;
      *q = as_uint4(select((ushort8)(0), as_ushort8(*q), convert_short8(jj >= k_lo && jj < k_end)));
#else /* a chunk is 8 dimensions of one token */
      const int j = k0 + p * BLOCK_SIZE + e / CH;
      if (j < k_lo || j >= k_end) v_s[mma_tpos(p * BLOCK_SIZE + e / CH, e % CH)] = (uint4)(0u);
#endif
    }
}


/* Where a work-group's tiles come from: its KV head's part of the
 * caches' blocks, through its sequence's table row, for keys in [k_lo,
 * k_end); ts is HND's and NHD's token stride. */
typedef struct {
  __global const kv_t *k_cache, *v_cache;
  page_row table;
  __global volatile int *faults;
  ulong block_stride, head_stride;
  int kv_head, ts, num_blocks, k_lo, k_end, sparse;
} mma_src;

/* Tile k0's blocks into ph[] from the table entries in pre[], which hold
 * tile pre_at's (read a tile ahead; read here where they are another
 * tile's: the first, or a sparse call's next kept tile past the one after). */
inline void mma_tile_ids(int *ph, int *pre, int pre_at, int k0, const mma_src *c) {
  if (pre_at != k0) mma_tile_entries(pre, c->table, k0, c->k_lo, c->k_end);
  mma_tile_blocks(ph, pre, k0, c->k_lo, c->k_end, c->num_blocks, c->faults);
}

/* Issues the copies of tile k0 (keys into k_dst; values into v_dst, where
 * given), its blocks left in ph[], and reads the table entries of the tile
 * after it into pre[]. */
inline void mma_issue_tile(__local uint4 *k_dst, __local uint4 *v_dst, int *ph, int *pre, int *pre_at,
                           int k0, const mma_src *c) {
  mma_tile_ids(ph, pre, *pre_at, k0, c);
  mma_load_parts(k_dst, c->k_cache, ph, c->kv_head, c->block_stride, c->head_stride, c->ts, 0);
  if (v_dst)
    mma_load_parts(v_dst, c->v_cache, ph, c->kv_head, c->block_stride, c->head_stride, c->ts, 1);
  mma_tile_entries(pre, c->table, k0 + BK, c->k_lo, c->k_end);
  *pre_at = k0 + BK;
}

/* fp8 with two stages (MMA_FP8_STAGED): the next tile's bytes are read
 * into this work-item's registers where the f16 path issues its cp.async
 * (mma_fetch_tile) and converted into the other stage after the tile's
 * products (mma_store_tile), so that their latency passes behind the
 * products as cp.async's does (docs/decisions/0032-prefill-mma-fp8.md). */
#define MMA_FP8_STAGED (KV_BYTES == 1 && STAGES == 2)
#if MMA_FP8_STAGED
/* This work-item's chunks of the parts whose blocks are ph[] (zeros for a
 * part not read). */
inline void mma_fp8_fetch(uint2 w[NP][CPT], __global const kv_t *cache, const int *ph,
                          const mma_src *c, int values) {
  for (int p = 0; p < NP; p++) {
    __global const kv_t *part = cache + kv_tile((ulong)max(ph[p], 0), c->kv_head,
                                                c->block_stride, c->head_stride);
    for (int i = 0; i < CPT; i++) {
      const int e = get_local_id(0) + i * NUM_THREADS;
      if (PART4 % NUM_THREADS && e >= PART4) break;
      w[p][i] = ph[p] >= 0 ? *(__global const uint2 *)(part + mma_fp8_at(e, values, c->ts))
                           : (uint2)(0u);
    }
  }
}

/* mma_issue_tile's reads, into registers: keys fk, values fv (private
 * arrays of the kernel's: through a struct they would be generic pointers,
 * which NVIDIA's OpenCL C 2.0 does not pass on). */
inline void mma_fetch_tile(uint2 fk[NP][CPT], uint2 fv[NP][CPT], int *ph, int *pre, int *pre_at,
                           int k0, const mma_src *c) {
  mma_tile_ids(ph, pre, *pre_at, k0, c);
  mma_fp8_fetch(fk, c->k_cache, ph, c, 0);
  mma_fp8_fetch(fv, c->v_cache, ph, c, 1);
  mma_tile_entries(pre, c->table, k0 + BK, c->k_lo, c->k_end);
  *pre_at = k0 + BK;
}

/* The fetched tile into a stage's keys and values, as f16 chunks where
 * mma_load_parts puts them. */
inline void mma_store_tile(__local uint4 *k_dst, __local uint4 *v_dst, uint2 fk[NP][CPT],
                           uint2 fv[NP][CPT]) {
  for (int p = 0; p < NP; p++)
    for (int i = 0; i < CPT; i++) {
      const int e = get_local_id(0) + i * NUM_THREADS;
      if (PART4 % NUM_THREADS && e >= PART4) break;
#if KV_SPLIT_KEY
      k_dst[p * PART4 + e] = mma_fp8_chunk(fk[p][i]);
      v_dst[p * PART4 + mma_vpos(e)] = mma_fp8_chunk(fv[p][i]);
#else
      const int at = mma_tpos(p * BLOCK_SIZE + e / CH, e % CH);
      k_dst[at] = mma_fp8_chunk(fk[p][i]), v_dst[at] = mma_fp8_chunk(fv[p][i]);
#endif
    }
}
#endif
