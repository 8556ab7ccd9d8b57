/*
 * decode_mma_chunk.cl — what a warp of decode_mma.cl does to get a chunk of
 * the cache into operand registers: the table entries of a lane's tokens
 * (one a run of RUN tokens, or one a token where blocks are shorter: TOKB),
 * the 16-byte loads of keys and values in each layout, the masks of
 * tokens outside the window or the context, the fragment positions of
 * tokens (score_token) and dimensions (out_dim), and the value rows turned
 * into V^T's operands (value_pairs, value_frag). After decode_mma_shape.cl.
 */

/* HND and NHD (a token's key and value are rows of contiguous
 * dimensions): a lane loads the 16-byte value pieces that sit where its
 * key pieces do (tokens kt + 4 s, kt + 4 s + 2, dimensions X (4 P + t)
 * ..: the tokens of S^T's rows g, g + 8, which are P^T's k index), and
 * each 32-bit word of them, an 8 x 8 matrix of 16-bit values across the
 * warp (rows: the 8 lanes' tokens; columns: the 4 lanes' dimension pairs)
 * is transposed by mma_trans (movmatrix) into an A register of V^T:
 * token pairs of one dimension, as mma wants them. That keeps 16-byte
 * loads at one movmatrix a 32-bit word of f16 or bf16 values (fp8: each word
 * transposed as fp8 pairs, then its bytes paired by token,
 * mma_fp8_token_pairs, and converted). O^T's rows are then these
 * dimensions in another order (out_dim). f32 caches (tf32: one element a
 * register, no pairs) need no transpose: lane g loads dimensions 32 p + 4
 * g .. + 3 of its 4 value tokens vt .., rows g, g + 8 of m-tiles 2 p and
 * 2 p + 1. */
#if !KV_SPLIT_KEY && KV_BYTES == 4
#define VSLABS (HEAD_SIZE / 32) /* 32-dimension slabs of f32 values */
#elif !KV_SPLIT_KEY
#define VMT (X / 4) /* O^T's m-tiles a 16-byte row's words give: 2, 4 of fp8 */
#endif

/* A lane's value row piece: RUN tokens (8 bytes of f16 or of fp8's 8
 * tokens, 16 of f32); VROW_KEEP(v, lo, end), of tokens v .. v + RUN - 1,
 * the bits kept of those inside [lo, end): one mask for all the rows (a
 * select a row was ~10 instructions a word with fp8, 170 of the loop's
 * 758). VWORD(w, s): the 4 tokens of k-step s. RUN_IN(n, v, lo, end):
 * the -1 / 0 flags of tokens v .. v + n - 1 inside [lo, end). */
#define RUN_IN(n, v, lo, end) ((int##n)(v) + IOTA##n >= (lo) && (int##n)(v) + IOTA##n < (end))
#if KV_BYTES == 4
typedef uint4 vrow_t;
#define VROW_ZERO ((uint4)(0u))
#define VROW_KEEP(v, lo, end) as_uint4(RUN_IN(4, v, lo, end))
#define VROW_W0(v) ((v).x)
#elif KV_BYTES == 1 && MSUB == 2
typedef uint2 vrow_t;
#define VROW_ZERO ((uint2)(0u))
#define VROW_KEEP(v, lo, end) as_uint2(convert_char8(RUN_IN(8, v, lo, end)))
#define VWORD(w, s) ((s) ? (w).y : (w).x)
#define VROW_W0(v) ((v).x)
#elif KV_BYTES == 1
typedef uint vrow_t;
#define VROW_ZERO 0u
#define VROW_KEEP(v, lo, end) as_uint(convert_char4(RUN_IN(4, v, lo, end)))
#define VWORD(w, s) (w)
#define VROW_W0(v) (v)
#else
typedef uint2 vrow_t;
#define VROW_ZERO ((uint2)(0u))
#define VROW_KEEP(v, lo, end) as_uint2(convert_short4(RUN_IN(4, v, lo, end)))
#define VWORD(w, s) (w)
#define VROW_W0(v) ((v).x)
#endif
#if (MSUB != 1 && MSUB != 2) || (MSUB == 2 && KV_BYTES != 1)
#error "decode mma: chunks of 16 tokens, or 32 with fp8 caches"
#endif

/* Operand registers (two f16 or bf16 pairs) of 4 cache elements in a
 * 32-bit word (fp8, converted: mma.cl's mma_fp8x4) or in two. */
#if KV_BYTES == 1
#define PAIRS4_OF_WORD(w) mma_fp8x4(w)
/* K-step j of a key row: its 4 dimensions. */
inline uint2 key_kstep(uint4 r, int j) {
  return PAIRS4_OF_WORD(j == 0 ? r.x : j == 1 ? r.y : j == 2 ? r.z : r.w);
}
inline uint2 value_pairs(vrow_t w, int s) { return PAIRS4_OF_WORD(VWORD(w, s)); }
#else /* k-step j: 2 pairs of f16/bf16 dimensions, or 2 f32 ones */
inline uint2 key_kstep(uint4 r, int j) { return j == 0 ? r.xy : r.zw; }
#if KV_BYTES == 2
inline uint2 value_pairs(vrow_t w, int s) { return VWORD(w, s); }
#endif
#endif

/* A lane (g = lane / 4, t = lane % 4) holds rows g and g + 8 and columns
 * 2 t, 2 t + 1 of each C fragment (mma.cl). Column i of n-tile h: head
 * head0 + column while column < G. */
inline int lane_col(int h, int t, int i) { return 8 * h + 2 * t + i; }
/* Row g + 8 r of S^T's m-tile s as a token of the row (kt: the lane's
 * first key token, load_chunk's). */
inline int score_token(int kt, int s, int r) { return kt + 4 * s + 2 * r; }

/* The table entries a lane's tokens of the chunk at c0 lie in (its key
 * rows' block, its value rows' block), read before anything is known
 * about them: the index is clamped into the sequence's row, so the read
 * stays inside the table even for chunks past the end; mma_block_of decides
 * whether an entry is used. Read a chunk ahead (and the first chunk's
 * before the context length arrives), so no chunk waits on a table read
 * before its K/V loads can start. */
#if TOKB /* TOKB: the entries of the lane's key tokens kt + 4 s + 2 r (score_token), entry 2 s + r */
typedef int4 chunk_ids_t;
inline int4 chunk_ids(page_row table, int c0, int g, int t, int max_blocks) {
  (void)t;
  const int kt = c0 + RUN * (g / 2) + g % 2;
  return (int4)(PAGE_OF_CLAMPED(table, score_token(kt, 0, 0) / BLOCK_SIZE, max_blocks),
                PAGE_OF_CLAMPED(table, score_token(kt, 0, 1) / BLOCK_SIZE, max_blocks),
                MSUB > 1 ? PAGE_OF_CLAMPED(table, score_token(kt, 1, 0) / BLOCK_SIZE, max_blocks) : 0,
                MSUB > 1 ? PAGE_OF_CLAMPED(table, score_token(kt, 1, 1) / BLOCK_SIZE, max_blocks) : 0);
}
inline int int4_at(int4 v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
#else
typedef int2 chunk_ids_t;
inline int2 chunk_ids(page_row table, int c0, int g, int t, int max_blocks) {
  const int kq = c0 + RUN * (g / 2), vt = c0 + RUN * t;
  return (int2)(PAGE_OF_CLAMPED(table, kq / BLOCK_SIZE, max_blocks),
                PAGE_OF_CLAMPED(table, vt / BLOCK_SIZE, max_blocks));
}
#endif

/* The physical block `phys` (the table's entry) of the tokens first ..
 * last (one block: a run of RUN, as BLOCK_SIZE % RUN == 0, or one token
 * with TOKB), or -1 when none of them is inside [lo, end) (never used nor
 * checked) or the entry is bad (then the fault bit). */
inline int mma_block_of(int phys, int first, int last, int lo, int end, int num_blocks,
                        __global volatile int *faults) {
  if (last < lo || first >= end) return -1;
  if (phys >= 0 && phys < num_blocks) return phys;
  atomic_or(faults, CLPA_FAULT_BAD_BLOCK);
  return -1;
}

/* Row g + 8 r of O^T's m-tile mt: a dimension. HND and NHD: where the
 * transposes put it (the banner's paragraph on them). */
inline int out_dim(int mt, int g, int r) {
#if KV_SPLIT_KEY
  return 16 * mt + g + 8 * r;
#elif KV_BYTES == 4 /* lane g's dimensions 32 p + 4 g .. + 3: rows g, g + 8 of m-tiles 2 p, 2 p + 1 */
  return 32 * (mt / 2) + 4 * g + 2 * (mt % 2) + r;
#elif KV_BYTES == 1 /* word j of lane quad g / 2's rows; of its pair (g % 2), dimension r */
  return 64 * (mt / 4) + 16 * (g / 2) + 4 * (mt % 4) + 2 * (g % 2) + r;
#else /* word 2 j + r of lane quad g / 2's rows, column g % 2 of its pair */
  return 32 * (mt / 2) + 8 * (g / 2) + 4 * (mt % 2) + 2 * r + g % 2;
#endif
}

#if !KV_SPLIT_KEY && KV_BYTES != 4
inline uint row_word(uint4 r, int i) { return i == 0 ? r.x : i == 1 ? r.y : i == 2 ? r.z : r.w; }
/* V^T's A fragment of the m-tile that word(s) j of a lane's value rows
 * give (r0: S^T's row g token, r1: row g + 8's), transposed across the
 * warp: rows g, g + 8 are two dimensions (out_dim), k pairs (2 t, 2 t +
 * 1) and (2 t + 8, 2 t + 9) P^T's tokens. */
inline uint4 value_frag(uint4 r0, uint4 r1, int j, __local uint *xch) {
#if KV_BYTES == 1
  const uint2 a = mma_fp8x4(mma_fp8_token_pairs(mma_trans(row_word(r0, j), xch)));
  const uint2 b = mma_fp8x4(mma_fp8_token_pairs(mma_trans(row_word(r1, j), xch)));
  return (uint4)(a.x, a.y, b.x, b.y);
#else
  return (uint4)(mma_trans(row_word(r0, 2 * j), xch), mma_trans(row_word(r0, 2 * j + 1), xch),
                 mma_trans(row_word(r1, 2 * j), xch), mma_trans(row_word(r1, 2 * j + 1), xch));
#endif
}
#endif

/* One chunk's operands in this lane's registers: key rows g and g + 8 of
 * S^T's m-tile s (tokens kt + 4 s and kt + 4 s + 2 of the chunk, KROWS
 * 16-byte rows each) and value rows 16 mt + g, + 8 at tokens vt .. vt +
 * RUN - 1 (HND, NHD: the values where the keys are; f32 the 16-byte
 * pieces of tokens vt + i at dimensions 32 p + 4 g); kb, vb the blocks
 * (-1: nothing loaded, zeros). */
typedef struct mma_chunk {
  uint4 k0[MSUB][KROWS], k1[MSUB][KROWS];
#if KV_SPLIT_KEY
  vrow_t v0[MTILES], v1[MTILES];
#elif KV_BYTES == 4
  uint4 v[4][VSLABS];
#else
  uint4 v0[MSUB][KROWS], v1[MSUB][KROWS];
#endif
  int kb, vb;
#if TOKB
  int kbt[MSUB][2]; /* the block of key token score_token(kt, s, r), or -1 */
#endif
} mma_chunk;
#if KV_SPLIT_KEY /* a value word of the chunk, for PIPE's dependence */
#define VFIRST(ch) VROW_W0((ch).v0[0])
#elif KV_BYTES == 4
#define VFIRST(ch) ((ch).v[0][0].x)
#else
#define VFIRST(ch) ((ch).v0[0][0].x)
#endif

#if TOKB
/* Loads the chunk at c0 (TOKB): each key token's rows, and its value rows
 * where its keys are, from its own block. */
inline void load_chunk(mma_chunk *ch, int c0, int4 ids, int g, int t, int lo, int end,
                       int num_blocks, __global volatile int *faults,
                       __global const kv_t *k_cache, __global const kv_t *v_cache, ulong kv_off,
                       ulong block_stride, int ts) {
  const int kt = c0 + RUN * (g / 2) + g % 2;
  MMA_UNROLL
  for (int s = 0; s < MSUB; s++)
    MMA_UNROLL
    for (int r = 0; r < 2; r++) {
      const int tok = score_token(kt, s, r);
      const int b = mma_block_of(int4_at(ids, 2 * s + r), tok, tok, lo, end, num_blocks, faults);
      ch->kbt[s][r] = b;
      const ulong base = kv_off + (ulong)max(b, 0) * block_stride;
      __global const uint4 *kp = (__global const uint4 *)(k_cache + base) +
                                 key_row16(0, tok % BLOCK_SIZE, BLOCK_SIZE, ts);
      __global const uint4 *vp = (__global const uint4 *)(v_cache + base) +
                                 value_row16(0, tok % BLOCK_SIZE, ts);
      MMA_UNROLL
      for (int P = 0; P < KROWS; P++) {
        const uint4 k = b >= 0 ? kp[4 * P + t] : (uint4)(0u), v = b >= 0 ? vp[4 * P + t] : (uint4)(0u);
        if (r) ch->k1[s][P] = k, ch->v1[s][P] = v;
        else ch->k0[s][P] = k, ch->v0[s][P] = v;
      }
    }
  ch->kb = ch->vb = 0;
}
#else
/* Loads the chunk at c0 whose table entries are ids (chunk_ids; positions
 * past the end: zeros, nothing read). */
inline void load_chunk(mma_chunk *ch, int c0, int2 ids, int g, int t, int lo, int end,
                       int num_blocks, __global volatile int *faults,
                       __global const kv_t *k_cache, __global const kv_t *v_cache, ulong kv_off,
                       ulong block_stride, int ts) {
  const int kq = c0 + RUN * (g / 2), kt = kq + g % 2, vt = c0 + RUN * t;
  ch->kb = mma_block_of(ids.x, kq, kq + RUN - 1, lo, end, num_blocks, faults);
  ch->vb = mma_block_of(ids.y, vt, vt + RUN - 1, lo, end, num_blocks, faults);
  /* kv.cl's key_row16 is affine, 0 at (0, 0): the lane's first token's
   * row, then constant offsets */
  __global const uint4 *kp = (__global const uint4 *)(k_cache + kv_off +
                                                      (ulong)max(ch->kb, 0) * block_stride) +
                             key_row16(0, kt % BLOCK_SIZE, BLOCK_SIZE, ts);
#if KV_SPLIT_KEY
  /* Value rows g + 16 mt and g + 8 + 16 mt at tokens vt .. vt + 3: one
   * base and constant byte offsets. (An index a row had NVIDIA keep 16
   * 64-bit offsets live and spend two adds and a pointer reload a load:
   * docs/decisions/0012-decode-mma-kernel.md.) Aligned: vt and BLOCK_SIZE
   * are multiples of RUN. */
  __global const uchar *vp =
      (__global const uchar *)(v_cache + kv_off + (ulong)max(ch->vb, 0) * block_stride) +
      (size_t)value_index(g, (uint)vt % BLOCK_SIZE, BLOCK_SIZE, 0) * KV_BYTES;
#endif
  MMA_UNROLL
  for (int s = 0; s < MSUB; s++)
    MMA_UNROLL
    for (int P = 0; P < KROWS; P++) {
      ch->k0[s][P] = ch->kb >= 0 ? kp[key_row16(4 * P + t, 4 * s, BLOCK_SIZE, ts)] : (uint4)(0u);
      ch->k1[s][P] = ch->kb >= 0 ? kp[key_row16(4 * P + t, 4 * s, BLOCK_SIZE, ts) +
                                      key_row16(0, 2, BLOCK_SIZE, ts)]
                                 : (uint4)(0u);
    }
#if KV_SPLIT_KEY
  MMA_UNROLL
  for (int mt = 0; mt < MTILES; mt++) {
    const size_t o0 = (size_t)value_index(16 * mt, 0, BLOCK_SIZE, 0) * KV_BYTES;
    const size_t o1 = (size_t)value_index(16 * mt + 8, 0, BLOCK_SIZE, 0) * KV_BYTES;
    ch->v0[mt] = ch->vb >= 0 ? *(__global const vrow_t *)(vp + o0) : VROW_ZERO;
    ch->v1[mt] = ch->vb >= 0 ? *(__global const vrow_t *)(vp + o1) : VROW_ZERO;
  }
#elif KV_BYTES == 4 /* tokens vt + i, dimensions 32 p + 4 g .. + 3 */
  __global const uint4 *vp = (__global const uint4 *)(v_cache + kv_off +
                                                      (ulong)max(ch->vb, 0) * block_stride) +
                             value_row16(0, (uint)vt % BLOCK_SIZE, ts);
  MMA_UNROLL
  for (int i = 0; i < 4; i++)
    MMA_UNROLL
    for (int p = 0; p < VSLABS; p++)
      ch->v[i][p] = ch->vb >= 0 ? vp[value_row16(8 * p + g, i, ts)] : (uint4)(0u);
#else /* the key rows' tokens and dimensions */
  (void)vt;
  __global const uint4 *vp = (__global const uint4 *)(v_cache + kv_off +
                                                      (ulong)max(ch->kb, 0) * block_stride) +
                             value_row16(0, kt % BLOCK_SIZE, ts);
  MMA_UNROLL
  for (int s = 0; s < MSUB; s++)
    MMA_UNROLL
    for (int P = 0; P < KROWS; P++) {
      ch->v0[s][P] = ch->kb >= 0 ? vp[value_row16(4 * P + t, 4 * s, ts)] : (uint4)(0u);
      ch->v1[s][P] = ch->kb >= 0 ? vp[value_row16(4 * P + t, 4 * s + 2, ts)] : (uint4)(0u);
    }
#endif
}
#endif
/* load_chunk's arguments after the table entries: positions from `end` on
 * are masked, `off` the KV head's offset. */
#define MMA_CHUNK_ARGS(end, off) \
  g, t, lo, end, num_blocks, faults, k_cache, v_cache, off, block_stride, ts

