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
 * or HND's or NHD's (kv.cl; below, after the shape's checks).
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
#ifndef CLPA_HEAD_SIZE
#error "CLPA_HEAD_SIZE: elements a head; required"
#endif
#ifndef CLPA_BLOCK_SIZE
#error "CLPA_BLOCK_SIZE: tokens a cache block; required"
#endif
#ifndef CLPA_NUM_THREADS
#error "CLPA_NUM_THREADS: work-items a work-group; required"
#endif
#ifndef CLPA_PARTITION_SIZE
#error "CLPA_PARTITION_SIZE: 0 for v1, else tokens a partition (a multiple of BLOCK_SIZE); required"
#endif
#ifndef CLPA_HEADS_PER_WG
#error "CLPA_HEADS_PER_WG: query heads of one KV head a work-group serves; required"
#endif
#ifndef CLPA_CHUNK
#error "CLPA_CHUNK: tokens a warp takes at a time (16, or 32 for fp8); required"
#endif
#ifndef CLPA_PIPE
#error "CLPA_PIPE: 1 where a warp loads its next chunk while it computes one; required"
#endif
#define HEAD_SIZE CLPA_HEAD_SIZE
#define BLOCK_SIZE CLPA_BLOCK_SIZE
#define NUM_THREADS CLPA_NUM_THREADS
#define PARTITION_SIZE CLPA_PARTITION_SIZE
#define G CLPA_HEADS_PER_WG
#define WARPS (NUM_THREADS / 32)
/* A chunk's tokens (CLPA_CHUNK: 16, or 32 for fp8 where lib/decode_plan.c's
 * mma_chunk_for says): MSUB m-tiles of S^T, 16 tokens each, and MSUB
 * k-steps of O^T's product. A lane's value tokens are RUN = 4 MSUB
 * consecutive ones (one 8-byte row piece with fp8's two m-tiles, where
 * one gave 4 bytes), and the chunk's fixed work (the columns' max, the
 * output's rescale, the table reads, the handout) is shared by 32 tokens
 * instead of 16: fp8's chunks are half f16's bytes for the same fixed
 * work. It costs registers; f16 in chunks of 32 (16-byte row pieces) ran
 * slower (docs/decisions/0010-decode-mma-fp8-chunk.md). */
#define CHUNK CLPA_CHUNK /* tokens of a chunk */
#define MSUB (CHUNK / 16)
/* PIPE (lib/decode_plan.c mma_pipe): a warp issues its next chunk's loads as
 * soon as this chunk's have arrived and computes this one while they are
 * in flight; else it loads a chunk, waits and computes it, and other
 * warps' loads fill the wait. It takes a second chunk of registers, so 8
 * warps a compute unit instead of 12
 * (docs/decisions/0011-decode-mma-pipe.md). */
#define PIPE CLPA_PIPE
#define RUN (4 * MSUB)    /* a lane's consecutive value tokens (and key tokens' span) */
/* A lane's 16-byte key row holds X dimensions (8 of f16/bf16, 16 of fp8,
 * 4 of f32) and serves KSPR k-steps (4 of its dimensions each, 2 of f32's:
 * m16n8k8's tf32 k-steps, mma.cl); KROWS rows a token. */
#if KV_BYTES == 4
#define KSPR 2
#else
#define KSPR (X / 4)
#endif
#define KDIMS (X / KSPR) /* a key row's dimensions a k-step */
#define KROWS (HEAD_SIZE / (4 * X))
#define MTILES (HEAD_SIZE / 16)    /* m-tiles of O^T */
/* S^T's products go to QK_ACCS independent sums (the k-steps in turn),
 * so that a chunk's chain of dependent mma is half as long (f32: 48 ->
 * 24; docs/decisions/0012-decode-mma-kernel.md). */
#define QK_ACCS 2
#define KSTEPS (KSPR * KROWS)
#define NH ((G + 7) / 8)           /* n-tiles of heads */

/* Chunks of a partition (v1: all of the row's). */
#if PARTITION_SIZE
#define PCH (PARTITION_SIZE / CHUNK)
#else
#define PCH (1 << 28)
#endif
/* Slices of local memory the warps' outputs go to (step 6): one a warp
 * where they fit in 32 KB, else the most that fit and divide the warps
 * (lib/decode_plan.c mma_slices; warps are 2, 3, 4, 6, 8 or 12). */
#define SLICE_ROOM (8192 / (G * HEAD_SIZE))
#define SLICE_OK(d) ((d) > 0 && WARPS % ((d) > 0 ? (d) : 1) == 0 && (d) <= SLICE_ROOM)
#define SLICES                                                                                    \
  (SLICE_OK(WARPS) ? WARPS : SLICE_OK(WARPS / 2) ? WARPS / 2 : SLICE_OK(WARPS / 3) ? WARPS / 3  \
   : SLICE_OK(WARPS / 4) ? WARPS / 4 : SLICE_OK(WARPS / 6) ? WARPS / 6 : 1)

/* TOKB: blocks of fewer tokens than a lane's run (1 or 2; HND and NHD,
 * f16, bf16 or fp8: a token's key and value are 16-byte rows; split-key
 * at 1 is HND's layout, which the host names so): each of a lane's key
 * tokens is looked up in the table on its own. */
#define TOKB (BLOCK_SIZE < RUN)
#if TOKB && (KV_SPLIT_KEY || KV_BYTES == 4)
#error "decode mma: blocks of 1 or 2 tokens in HND or NHD with f16, bf16 or fp8 caches"
#endif
#if HEAD_SIZE % (4 * X) || G > 16 || NUM_THREADS % 32 || PARTITION_SIZE % CHUNK || \
    (!TOKB && BLOCK_SIZE % RUN)
#error "decode mma: head size a multiple of 32 (fp8: 64, f32: 16), <= 16 heads, partitions of whole chunks"
#endif
#if !KV_SPLIT_KEY && KV_BYTES == 4 && HEAD_SIZE % 32
#error "decode mma: f32 caches in HND and NHD take head sizes of multiples of 32"
#endif

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

/* The table entries a lane's tokens of the chunk at c0 lie in (its key
 * rows' block, its value rows' block), read before anything is known
 * about them: the index is clamped into the sequence's row, so the read
 * stays inside the table even for chunks past the end; mma_block4 decides
 * whether an entry is used. Read a chunk ahead (and the first chunk's
 * before the context length arrives), so no chunk waits on a table read
 * before its K/V loads can start. */
#if TOKB /* TOKB: the entries of the lane's key tokens kt + 4 s + 2 r (score_token), entry 2 s + r */
typedef int4 chunk_ids_t;
inline int4 chunk_ids(page_row table, int c0, int g, int t, int max_blocks) {
  (void)t;
  const int kt = c0 + RUN * (g / 2) + g % 2;
  return (int4)(PAGE_OF_CLAMPED(table, kt / BLOCK_SIZE, max_blocks),
                PAGE_OF_CLAMPED(table, (kt + 2) / BLOCK_SIZE, max_blocks),
                MSUB > 1 ? PAGE_OF_CLAMPED(table, (kt + 4) / BLOCK_SIZE, max_blocks) : 0,
                MSUB > 1 ? PAGE_OF_CLAMPED(table, (kt + 6) / BLOCK_SIZE, max_blocks) : 0);
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

/* The physical block `phys` (the table's entry) of the RUN tokens first
 * .. first + RUN - 1 (one block, as BLOCK_SIZE % RUN == 0), or -1 when
 * none of them is inside [lo, end) (never used nor checked) or the entry
 * is bad (then the fault bit). */
inline int mma_block_run(int phys, int first, int lo, int end, int num_blocks,
                         __global volatile int *faults) {
  if (first + RUN - 1 < lo || first >= end) return -1;
  if (phys >= 0 && phys < num_blocks) return phys;
  atomic_or(faults, CLPA_FAULT_BAD_BLOCK);
  return -1;
}

/* A lane (g = lane / 4, t = lane % 4) holds rows g and g + 8 and columns
 * 2 t, 2 t + 1 of each C fragment (mma.cl). Column i of n-tile h: head
 * head0 + column while column < G. */
inline int lane_col(int h, int t, int i) { return 8 * h + 2 * t + i; }
/* Row g + 8 r of S^T's m-tile s as a token of the row (kt: the lane's
 * first key token, load_chunk's). */
inline int score_token(int kt, int s, int r) { return kt + 4 * s + 2 * r; }
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
/* The block `phys` of one token, or -1 when it is outside [lo, end) or
 * the entry is bad (then the fault bit), as mma_block_run. */
inline int mma_block_tok(int phys, int tok, int lo, int end, int num_blocks,
                         __global volatile int *faults) {
  if (tok < lo || tok >= end) return -1;
  if (phys >= 0 && phys < num_blocks) return phys;
  atomic_or(faults, CLPA_FAULT_BAD_BLOCK);
  return -1;
}

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
      const int b = mma_block_tok(int4_at(ids, 2 * s + r), tok, lo, end, num_blocks, faults);
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
  ch->kb = mma_block_run(ids.x, kq, lo, end, num_blocks, faults);
  ch->vb = mma_block_run(ids.y, vt, lo, end, num_blocks, faults);
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
  const int head0 = get_group_id(0) * G, seq = get_group_id(1), part = get_group_id(2);
  const int kv_head = head0 / (num_heads / num_kv_heads);
  /* The row's chunks (16 tokens from the window's start): partition p
   * takes chunks [p PCH, (p + 1) PCH), its warps in turn, or on NVIDIA
   * as they ask (step 2).
   * The length, the queries and the first chunk's table entries are read
   * together (one round trip to memory instead of three before the first
   * K/V load); the entries again only where a sliding window moves the
   * start. */
  page_row table = PAGE_ROW(seq);
  const int c_first = part * PCH + warp;
  chunk_ids_t ids = chunk_ids(table, c_first * CHUNK, g, t, max_blocks_per_seq);
  int L = PAGE_LEN(table, seq);
  /* ---- 1. queries as B fragments (column g of n-tile h), dimensions in the keys' order ---- */
  uint2 qb[NH][KSTEPS];
#if KV_BYTES == 4
  uint2 ql[NH][KSTEPS]; /* f32: qb the high parts, ql the remainders (mma.cl's 3xTF32) */
#endif
  MMA_UNROLL
  for (int h = 0; h < NH; h++) {
    const int col = 8 * h + g;
    __global const io_t *qh = q + (ulong)seq * q_stride + (ulong)(head0 + min(col, G - 1)) * HEAD_SIZE;
    MMA_UNROLL
    for (int ks = 0; ks < KSTEPS; ks++) {
      const int d = (4 * (ks / KSPR) + t) * X + (ks % KSPR) * KDIMS;
      float f[4];
      for (int e = 0; e < KDIMS; e++) f[e] = col < G ? IO_LOAD(qh, d + e) : 0.0f;
#if KV_BYTES == 4
      const uint4 x = (uint4)(as_uint(f[0]), as_uint(f[1]), 0u, 0u), hi = mma_tf32_hi4(x);
      qb[h][ks] = hi.xy, ql[h][ks] = mma_tf32_lo4(x, hi).xy;
#else
      qb[h][ks] = (uint2)(mma_pack(f[0], f[1]), mma_pack(f[2], f[3]));
#endif
    }
  }

  if (L < 0 || L > max_context_len) {
    if (lid == 0 && part == 0) atomic_or(faults, CLPA_FAULT_BAD_CONTEXT_LEN);
    L = 0;
  }
  /* Tokens before lo are outside the sliding window: never read nor
   * checked. A row of no tokens (an empty context) is one empty partition,
   * which writes the empty output. */
  const int lo = window > 0 ? max(L - window, 0) : 0, t0 = lo / CHUNK * CHUNK;
  const int total = (L - t0 + CHUNK - 1) / CHUNK; /* the row's chunks */
  const int nparts = max((total + PCH - 1) / PCH, 1);
  /* Work-groups past the row's partitions do nothing. On NVIDIA they leave
   * here; the emulated path runs them through with no chunks (iters <= 0)
   * and no writes: after this return and the barriers that follow, PoCL
   * 3.1 got step 8's spread merge wrong (3 heads a work-group, more than
   * MERGE_REG partitions: wrong outputs every time;
   * docs/decisions/0002-decode-v2-merge.md). */
  const int live = part < nparts;
#if PARTITION_SIZE && !CLPA_MERGE
  /* reduce.cl merges the row's partitions counted from token 0, these
   * from the window's first chunk: the ones past this row's are empty. */
  for (int r = lid; !live && r < G; r += NUM_THREADS) {
    const size_t sp = ((size_t)seq * num_heads + head0 + r) * max_parts + part;
    max_logits[sp] = -INFINITY, exp_sums[sp] = 0.0f;
  }
#endif
#if MMA_PTX
  if (!live) return;
  if (lid == 0) handout[0] = part * PCH + WARPS;
  barrier(CLK_LOCAL_MEM_FENCE);
#endif
  if (t0) ids = chunk_ids(table, t0 + c_first * CHUNK, g, t, max_blocks_per_seq);
  const int c_end = min((part + 1) * PCH, total); /* this work-group's chunks end */
  const ulong kv_off = kv_tile(0, kv_head, block_stride, head_stride); /* + block * block_stride */
  const int ts = kv_token_stride(num_kv_heads, head_stride, BLOCK_SIZE); /* HND, NHD */

  /* This lane's columns 8 h + 2 t + i: heads head0 + column while column < G.
   * (lane_col's, written out here and in step 6's writes: through it,
   * clang 15 folds the index differently with 8 heads a work-group.) */
  float slope[NH][2];
  for (int h = 0; h < NH; h++)
    for (int i = 0; i < 2; i++) {
      const int col = 8 * h + 2 * t + i;
      slope[h][i] = alibi && col < G ? alibi[head0 + col] : 0.0f;
    }

  float m2[NH][2], l[NH][2]; /* per column: running max (base 2), this lane's part of the sum */
  float4 o[MTILES][NH];
  for (int h = 0; h < NH; h++) m2[h][0] = m2[h][1] = -INFINITY, l[h][0] = l[h][1] = 0.0f;
  MMA_UNROLL
  for (int mt = 0; mt < MTILES; mt++)
    MMA_UNROLL
    for (int h = 0; h < NH; h++) o[mt][h] = (float4)(0.0f);

  /* fp8: the cache holds values / scale; keys' scale goes into the logits, values' into the output */
  const float qk_scale = scale * (!KV_IS_FP8 ? 1.0f : k_scales ? k_scales[0] : k_scale);
  const float vscale = !KV_IS_FP8 ? 1.0f : v_scales ? v_scales[0] : v_scale;
  const float inv_cap = soft_cap > 0.0f ? 1.0f / soft_cap : 0.0f;
  int c = c_first;
#if MMA_PTX
  /* NVIDIA: where the warps have 16 chunks each or more, after its first a
   * warp takes the work-group's next chunk as it asks (a chunk ahead), so
   * that they end together; with fewer the atomic's round trip cost more
   * than it saved. The emulated products need every warp to run the same
   * iterations (docs/decisions/0012-decode-mma-kernel.md). */
  const int ask = (c_end - part * PCH) * CHUNK >= 256 * WARPS; /* the same in the whole work-group */
#define NEXT_CHUNK(c) (ask ? warp_lane0(lane == 0 ? atomic_inc(handout) : 0) : (c) + WARPS)
#else
#define NEXT_CHUNK(c) ((c) + WARPS)
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
  const int iters = (c_end - part * PCH + WARPS - 1) / WARPS;
  for (int it = 0; it < iters; it++) {
#endif
    /* ---- 2. load the chunk's K and V (PIPE: the next chunk's); the next chunk's number and
     * table entries ---- */
    const int c0 = t0 + c * CHUNK, t_end = c < c_end ? L : 0; /* t_end 0: all masked */
    const int kt = c0 + RUN * (g / 2) + g % 2, vt = c0 + RUN * t;
#if PIPE
    /* The next chunk's loads wait for this chunk's data: dep (zero at run
     * time) puts a use of it into their address. Without it ptxas issues
     * them first and counts both chunks' loads on one scoreboard, so the
     * first use of this chunk would wait for the next one too
     * (docs/decisions/0011-decode-mma-pipe.md). */
    const ulong dep = (ulong)((cur.k0[0][0].x ^ VFIRST(cur)) & dz);
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
#if KV_SPLIT_KEY
    if (cur.vb >= 0 && (vt < lo || vt + RUN > t_end)) { /* slots outside [lo, t_end) may hold NaN */
      const vrow_t keep = VROW_KEEP(vt, lo, t_end);
      MMA_UNROLL
      for (int mt = 0; mt < MTILES; mt++) cur.v0[mt] &= keep, cur.v1[mt] &= keep;
    }
#elif KV_BYTES == 4
    if (cur.vb >= 0 && (vt < lo || vt + 4 > t_end)) /* as above, a token's pieces at a time */
      MMA_UNROLL
      for (int i = 0; i < 4; i++)
        if (vt + i < lo || vt + i >= t_end)
          MMA_UNROLL
          for (int sl = 0; sl < VSLABS; sl++) cur.v[i][sl] = (uint4)(0u);
#else
    const int kq = c0 + RUN * (g / 2); /* the run of the lane's key (and value) tokens */
    (void)vt;
    if (!TOKB && cur.kb >= 0 && (kq < lo || kq + RUN > t_end)) /* as above, a token's pieces at a time
                                                                  * (TOKB: load_chunk's zeros) */
      MMA_UNROLL
      for (int s = 0; s < MSUB; s++)
        MMA_UNROLL
        for (int r = 0; r < 2; r++) {
          const int tok = score_token(kt, s, r);
          if (tok >= lo && tok < t_end) continue;
          MMA_UNROLL
          for (int P = 0; P < KROWS; P++) {
            if (r) cur.v1[s][P] = (uint4)(0u);
            else cur.v0[s][P] = (uint4)(0u);
          }
        }
#endif

    /* ---- 3. S^T = K Q^T, m-tile s: rows g, g + 8 are tokens kt + 4 s, kt + 4 s + 2 ---- */
    float4 sc[MSUB][NH];
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
            const uint2 a0 = key_kstep(cur.k0[s][P], j), a1 = key_kstep(cur.k1[s][P], j);
#if KV_BYTES == 4
            acc[ai] = mma_3xtf32(acc[ai], (uint4)(a0.x, a1.x, a0.y, a1.y), qb[h][ks], ql[h][ks], xch);
#else
            acc[ai] = mma_16816(acc[ai], (uint4)(a0.x, a1.x, a0.y, a1.y), qb[h][ks], xch);
#endif
          }
        MMA_UNROLL
        for (int i = 1; i < QK_ACCS; i++) acc[0] += acc[i];
        sc[s][h] = acc[0];
      }

    /* ---- 4. logits in base 2, masks; the online softmax per column; P^T as B fragments ---- */
    int in[MSUB][2];
    MMA_UNROLL
    for (int s = 0; s < MSUB; s++)
      MMA_UNROLL
      for (int r = 0; r < 2; r++) {
        const int tok = score_token(kt, s, r);
#if TOKB
        in[s][r] = cur.kbt[s][r] >= 0; /* inside [lo, t_end) */
#else
        in[s][r] = cur.kb >= 0 && tok >= lo && tok < t_end;
#endif
      }
#if KV_BYTES == 4
    uint4 pb[MSUB][NH], pl[MSUB][NH]; /* f32: tokens 4t .. 4t + 3 of column g, high parts and remainders */
#else
    uint2 pb[MSUB][NH];
#endif
    float alpha[NH][2];
    MMA_UNROLL
    for (int h = 0; h < NH; h++) {
      /* m-tile s: (kt + 4s, 2t) (kt + 4s, 2t+1) (kt + 4s + 2, 2t) (kt + 4s + 2, 2t+1) */
      float x[MSUB][4];
      MMA_UNROLL
      for (int s = 0; s < MSUB; s++) {
        const float4 a = sc[s][h];
        x[s][0] = a.x, x[s][1] = a.y, x[s][2] = a.z, x[s][3] = a.w;
        MMA_UNROLL
        for (int e = 0; e < 4; e++) {
          float v = x[s][e] * qk_scale;
          if (soft_cap > 0.0f) v = mma_soft_cap(v, soft_cap, inv_cap);
          v += slope[h][e % 2] * (float)(score_token(kt, s, e / 2) - L + 1);
          x[s][e] = in[s][e / 2] ? v * LOG2E : -INFINITY;
        }
      }
      float p[MSUB][4];
      MMA_UNROLL
      for (int i = 0; i < 2; i++) {
        float mx = fmax(x[0][i], x[0][i + 2]);
        MMA_UNROLL
        for (int s = 1; s < MSUB; s++) mx = fmax(mx, fmax(x[s][i], x[s][i + 2]));
        const float mn = fmax(m2[h][i], mma_col_reduce(mx, 1, xch));
        alpha[h][i] = mn == -INFINITY ? 1.0f : MMA_EXP2(m2[h][i] - mn);
        const float base = mn == -INFINITY ? 0.0f : mn; /* every score -inf: p = 0 */
        m2[h][i] = mn;
        float sum = 0.0f;
        MMA_UNROLL
        for (int s = 0; s < MSUB; s++) {
          p[s][i] = MMA_EXP2(x[s][i] - base), p[s][i + 2] = MMA_EXP2(x[s][i + 2] - base);
          sum += p[s][i] + p[s][i + 2];
        }
        l[h][i] = l[h][i] * alpha[h][i] + sum;
      }
      MMA_UNROLL
      for (int s = 0; s < MSUB; s++) {
#if KV_BYTES == 4
        const uint4 pt = (uint4)(mma_trans32(as_uint(p[s][0]), as_uint(p[s][1]), xch),
                                 mma_trans32(as_uint(p[s][2]), as_uint(p[s][3]), xch));
        pb[s][h] = mma_tf32_hi4(pt), pl[s][h] = mma_tf32_lo4(pt, pb[s][h]);
#else
        pb[s][h] = (uint2)(mma_trans(mma_pack(p[s][0], p[s][1]), xch),
                           mma_trans(mma_pack(p[s][2], p[s][3]), xch));
#endif
      }
    }

    /* ---- 5. O^T = O^T alpha + V^T P^T: rows g, g + 8 are dimensions 16 mt + g, + 8 ---- */
    MMA_UNROLL
    for (int mt = 0; mt < MTILES; mt++) {
#if KV_BYTES == 4 /* two k-steps: tokens 4t, 4t + 1, then 4t + 2, 4t + 3 */
#if KV_SPLIT_KEY
      const uint4 w0 = cur.v0[mt], w1 = cur.v1[mt];
      const uint4 va = (uint4)(w0.x, w1.x, w0.y, w1.y), vb = (uint4)(w0.z, w1.z, w0.w, w1.w);
#else /* token vt + i's words 2 j, 2 j + 1 of slab p: rows g, g + 8 of m-tile 2 p + j */
      const int sl = mt / 2, j = mt % 2;
      const uint4 va = (uint4)(j ? cur.v[0][sl].zw : cur.v[0][sl].xy, j ? cur.v[1][sl].zw : cur.v[1][sl].xy);
      const uint4 vb = (uint4)(j ? cur.v[2][sl].zw : cur.v[2][sl].xy, j ? cur.v[3][sl].zw : cur.v[3][sl].xy);
#endif
      MMA_UNROLL
      for (int h = 0; h < NH; h++) {
        const float4 acc = o[mt][h] * (float4)(alpha[h][0], alpha[h][1], alpha[h][0], alpha[h][1]);
        o[mt][h] = mma_3xtf32(mma_3xtf32(acc, va, pb[0][h].xy, pl[0][h].xy, xch), vb, pb[0][h].zw,
                              pl[0][h].zw, xch);
      }
#else /* k-step s: tokens vt + 4 s .. vt + 4 s + 3 */
      uint4 vfrag[MSUB];
      MMA_UNROLL
      for (int s = 0; s < MSUB; s++) {
#if KV_SPLIT_KEY
        const uint2 w0 = value_pairs(cur.v0[mt], s), w1 = value_pairs(cur.v1[mt], s);
        vfrag[s] = (uint4)(w0.x, w1.x, w0.y, w1.y);
#else
        vfrag[s] = value_frag(cur.v0[s][mt / VMT], cur.v1[s][mt / VMT], mt % VMT, xch);
#endif
      }
      MMA_UNROLL
      for (int h = 0; h < NH; h++) {
        float4 acc = o[mt][h] * (float4)(alpha[h][0], alpha[h][1], alpha[h][0], alpha[h][1]);
        MMA_UNROLL
        for (int s = 0; s < MSUB; s++) acc = mma_16816(acc, vfrag[s], pb[s][h], xch);
        o[mt][h] = acc;
      }
#endif
    }
#if PIPE
    cur = nx, c = next, next = next2;
#else
    c = next;
#endif
  }

  /* ---- 6. merge the warps: states, then outputs weighted to the common max ----
   * Each warp writes its weighted outputs to a slice of its own (SLICES of
   * them, rounds of SLICES warps adding into them where fewer fit), and
   * the sum over slices happens as the output is written: two barriers
   * where rounds of one warp at a time took WARPS + 2 (the epilogue is on
   * every call's critical path: docs/decisions/0012-decode-mma-kernel.md). */
  for (int h = 0; h < NH; h++)
    for (int i = 0; i < 2; i++) {
      l[h][i] = mma_col_reduce(l[h][i], 0, xch);
      if (g == 0) m_s[warp * 16 + lane_col(h, t, i)] = m2[h][i], l_s[warp * 16 + lane_col(h, t, i)] = l[h][i];
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
      wgt[h][i] = l[h][i] > 0.0f ? MMA_EXP2(m2[h][i] - M) : 0.0f;
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
            const float4 a = o[mt][h];
            const float v = (e == 0 ? a.x : e == 1 ? a.y : e == 2 ? a.z : a.w) * wgt[h][e % 2];
            if (col < G) slice[col * HEAD_SIZE + d] = round == 0 ? v : slice[col * HEAD_SIZE + d] + v;
          }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  /* ---- 7. write the output: directly where the row has one partition
   * (always in v1), else the partition's state, and the last partition of
   * the row to finish merges them (step 8). No work-item returns between
   * barriers (PoCL 3.1 ran a loop past its bound after a uniform return
   * followed by barriers), and work-groups past the row's partitions
   * write nothing. ---- */
#if PARTITION_SIZE
  const int alone = CLPA_MERGE && nparts == 1; /* else reduce.cl reads every partition's state */
#else
  const int alone = 1;
#endif
  for (int i = lid; live && i < G * HEAD_SIZE; i += NUM_THREADS) {
    const int r = i / HEAD_SIZE, d = i % HEAD_SIZE;
    const size_t sh = (size_t)seq * num_heads + head0 + r;
    const softmax_state st = softmax_state_of(row_m[r] / LOG2E, row_l[r]);
    const float o = st.l > 0.0f ? slices_sum(o_s, i) * vscale / st.l : 0.0f;
    if (alone) {
      /* The sink: one more logit in the softmax, with no value. */
      const softmax_state all = sinks ? softmax_merge(st, softmax_logit(sinks[head0 + r])) : st;
      IO_STORE(o * softmax_weight(st, all), out, sh * HEAD_SIZE + d);
      if (d == 0 && lse) lse[sh] = softmax_lse(all);
    } else {
      tmp_out[(sh * max_parts + part) * HEAD_SIZE + d] = o;
      if (d == 0) max_logits[sh * max_parts + part] = st.m, exp_sums[sh * max_parts + part] = st.l;
    }
  }
#if PARTITION_SIZE && CLPA_MERGE
  /* ---- 8. the last partition of the row to finish merges them (decode_merge.cl;
   * o_s is free: the weights' local memory) ---- */
  const int merging = decode_last_part(live && !alone, part_counts, seq, nparts, last);
  decode_merge_parts(merging, nparts, seq, head0, num_heads, max_parts, max_logits, exp_sums,
                     tmp_out, sinks, out, lse, G, HEAD_SIZE, NUM_THREADS, red_m, red_l, row_m,
                     row_l, o_s, SLICES * HEAD_SIZE, MERGE_REG);
#endif
}
