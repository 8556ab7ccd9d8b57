/*
 * rows.cl — what the CPU rows paths share (decode_rows.cl's
 * clpa_decode_rows, prefill_rows.cl's clpa_prefill_rows): a work-item owns
 * whole rows and computes with explicit 16-wide vectors, so it needs
 * vector shapes of the cache's layout and sums across lanes. Part of
 * those two families (lib/kernels.c), after kv.cl (KV_X, KV_LOAD,
 * key_index).
 *
 * In the HND and NHD layouts the same vectors are gathered: a key vector
 * from VT loads of X dims (one per token), a value vector from VB loads a
 * token stride apart (kv.cl's KV_TOKENS); the arithmetic is the same.
 *
 * 1. Value vectors: VB tokens of a value row, and their lane sums.
 * 2. Key vectors: VT tokens of a 16-element key vector, their token sums,
 *    and the key products that share each query load.
 * 3. Prefetches: the next blocks, which no hardware prefetcher can guess.
 */

/* ---- 1. value vectors ------------------------------------------------ */

/* The rows paths' value vectors (prefill_rows.cl's clpa_prefill_rows,
 * decode_rows.cl): VB tokens of a value row, which the layout keeps
 * contiguous within a block; 16, or the whole block where it is smaller. */
#ifndef CLPA_BLOCK_SIZE
#error "CLPA_BLOCK_SIZE: tokens a cache block; required"
#endif
#if CLPA_BLOCK_SIZE >= 16
#define VB 16
#elif CLPA_BLOCK_SIZE == 8
#define VB 8
#elif CLPA_BLOCK_SIZE == 4
#define VB 4
#elif CLPA_BLOCK_SIZE == 2
#define VB 2
#else
#define VB 1
#endif
/* VB floats at p, loaded and stored (vloadn and vstoren have no n = 1). */
#if VB == 1
#define ROWS_LOADB(p) (*(p))
#define ROWS_STOREB(v, p) (*(p) = (v))
#else
#define ROWS_LOADB(p) CAT(vload, VB)(0, (p))
#define ROWS_STOREB(v, p) CAT(vstore, VB)((v), 0, (p))
#endif
#define floatB CAT(float, VB)
#define intB CAT(int, VB)

/* The lane sums of VB successive accumulators a[0 .. VB-1] as one vector,
 * lane i the sum of a[i]: pairs of vectors merge into one while their
 * lanes per vector halve (a two-vector shuffle and an add), log2(VB)
 * times, VB - 1 vector adds in all; the same pairwise sums as VSUM(VB,
 * a[i]). One VSUM at a time took 16 scalar loads and 15 adds a sum;
 * vectorized over the accumulators, PoCL 3.1 had gathered their lanes
 * (vgatherqps, slow on AMD) (docs/decisions/0016-decode-rows-kernel.md). */
inline floatB lane_sums(const floatB *a) {
#if VB == 1
  return a[0];
#else
  floatB t[VB];
  for (int i = 0; i < VB; i++) t[i] = a[i];
  for (int n = VB; n > 1; n /= 2)
    for (int i = 0; i < n / 2; i++)
      t[i] = (floatB)(t[2 * i].even, t[2 * i + 1].even) + (floatB)(t[2 * i].odd, t[2 * i + 1].odd);
  return t[0];
#endif
}

/* res[d] = the lane sum of acc[d], d < n: VB at a time (lane_sums), the
 * last n % VB (a head size's last few) one at a time. */
inline void row_sums(const floatB *acc, float *res, int n) {
  for (int d = 0; d + VB <= n; d += VB) ROWS_STOREB(lane_sums(acc + d), res + d);
#pragma clang loop vectorize(disable)
  for (int d = n / VB * VB; d < n; d++) res[d] = VSUM(VB, acc[d]);
}

/* ---- 2. key vectors -------------------------------------------------- */

/* The rows paths' key vectors (decode_rows.cl, prefill_rows.cl): a
 * 16-element vector of the key layout holds VT tokens x ROWS_X dimensions
 * (one 16-byte row of KV_X per token); queries are held repeated VT times,
 * so one multiply-add serves VT tokens. A block of one token keeps its
 * key's dimensions contiguous in every layout (key_index(d, 0) = d from
 * the tile), so there a vector is 16 of them whatever the dtype: ROWS_X
 * 16, VT 1 (the head a multiple of 16). */
#if CLPA_BLOCK_SIZE == 1
#define ROWS_X 16
#else
#define ROWS_X KV_X
#endif
#if ROWS_X == 16 /* tokens per 16-element key vector (a literal: it is pasted into names) */
#define VT 1
#elif ROWS_X == 8
#define VT 2
#else
#define VT 4
#endif
/* The query chunk at p (ROWS_X floats), repeated VT times. */
#if ROWS_X == 16
#define QREP(p) vload16(0, (p))
#elif ROWS_X == 8
#define QREP(p) ((float16)(vload8(0, (p)), vload8(0, (p))))
#else
#define QREP(p) ((float16)(vload4(0, (p)), vload4(0, (p)), vload4(0, (p)), vload4(0, (p))))
#endif

/* The VT token sums of a 16-lane key product (each token's ROWS_X lanes are
 * adjacent): pairwise sums of even and odd lanes, log2(ROWS_X) times. */
#define floatT CAT(float, VT)
#define intT CAT(int, VT)
#if VT == 1
#define IOTAT 0
#else
#define IOTAT CAT(IOTA, VT)
#endif
inline floatT token_sums(float16 a) {
  const float8 b = a.even + a.odd;
  const float4 c = b.even + b.odd;
#if ROWS_X == 4
  return c;
#else
  const float2 d = c.even + c.odd;
#if ROWS_X == 8
  return d;
#else
  return d.even + d.odd;
#endif
#endif
}

/* The token sums of 4 successive key vectors at once (4 x VT tokens, in
 * order; the same pairwise sums as token_sums): two vectors merge into one
 * while their lanes per token halve (one two-vector shuffle and add for
 * the pair instead of one each), twice, then the lanes left halve as in
 * token_sums. */
#if VT == 1 /* 4 x VT, a literal */
#define VT4 4
#elif VT == 2
#define VT4 8
#else
#define VT4 16
#endif
inline CAT(float, VT4) token_sums4(float16 a, float16 b, float16 c, float16 d) {
  const float16 ab = (float16)(a.even, b.even) + (float16)(a.odd, b.odd);
  const float16 cd = (float16)(c.even, d.even) + (float16)(c.odd, d.odd);
  const float16 x = (float16)(ab.even, cd.even) + (float16)(ab.odd, cd.odd);
#if ROWS_X == 4
  return x;
#elif ROWS_X == 8
  return x.even + x.odd;
#else
  const float8 y = x.even + x.odd;
  return y.even + y.odd;
#endif
}

/* The 16-element key vector of tokens tok .. tok + VT - 1, dims c * ROWS_X ..
 * (c + 1) * ROWS_X (lanes token-major) of the tile at kb, as floats: one
 * load in the split-key layout, VT in HND and NHD (ts: kv_token_stride). */
#if KV_SPLIT_KEY || VT == 1
#define ROWS_KEY_VECTOR(kb, c, tok, block_size, ts)                                            \
  KV_LOAD(16, (kb) + key_index((c) * ROWS_X, (tok), (block_size), (ts)))
#elif VT == 2
#define ROWS_KEY_VECTOR(kb, c, tok, block_size, ts)                                            \
  ((float16)(KV_LOAD(8, (kb) + key_index((c) * ROWS_X, (tok), (block_size), (ts))),                \
             KV_LOAD(8, (kb) + key_index((c) * ROWS_X, (tok) + 1, (block_size), (ts)))))
#else
#define ROWS_KEY_VECTOR(kb, c, tok, block_size, ts)                                            \
  ((float16)(KV_LOAD(4, (kb) + key_index((c) * ROWS_X, (tok), (block_size), (ts))),                \
             KV_LOAD(4, (kb) + key_index((c) * ROWS_X, (tok) + 1, (block_size), (ts))),            \
             KV_LOAD(4, (kb) + key_index((c) * ROWS_X, (tok) + 2, (block_size), (ts))),            \
             KV_LOAD(4, (kb) + key_index((c) * ROWS_X, (tok) + 3, (block_size), (ts)))))
#endif

/* acc[i][r] = the 16-lane products of key vectors o0 + i (i < NV) of the
 * block at kb with the queries q16[r][chunk] (r < NR): every chunk's NV key
 * loads share each query load. pf (bytes, or NULL): each chunk also
 * prefetches its share of the 16 x NV elements there (a step's slice of
 * a later block, spread over the chunks rather than a burst that would
 * fill the core's miss buffers and stall the products behind it). A
 * macro, so the accumulators stay in registers (PoCL keeps arrays passed
 * by pointer in memory). */
#define ROWS_KEY_PRODUCTS(acc, NV, NR, kb, o0, q16, kscale, block_size, ts, pf)               \
  do {                                                                                        \
    _Pragma("unroll") for (int i_ = 0; i_ < (NV); i_++)                                       \
      _Pragma("unroll") for (int r_ = 0; r_ < (NR); r_++)(acc)[i_][r_] = (float16)(0.0f);     \
    for (int c_ = 0; c_ < HEAD_SIZE / ROWS_X; c_++) {                                           \
      const int pfb_ = 16 * (NV) * KV_BYTES; /* bytes a chunk prefetches (a power of 2) */    \
      if (pf && pfb_ >= 64)                                                                   \
        _Pragma("unroll") for (int l_ = 0; l_ < pfb_ / 64; l_++)                              \
          ROWS_PREFETCH((pf) + c_ * pfb_ + 64 * l_);                                          \
      else if (pf && c_ * pfb_ % 64 == 0) /* a line every 64 / pfb_ chunks */                 \
        ROWS_PREFETCH((pf) + c_ * pfb_);                                                      \
      float16 kk_[NV];                                                                        \
      _Pragma("unroll") for (int i_ = 0; i_ < (NV); i_++) kk_[i_] =                            \
          ROWS_KEY_VECTOR((kb), c_, ((o0) + i_) * VT, (block_size), (ts)) * (kscale);           \
      _Pragma("unroll") for (int r_ = 0; r_ < (NR); r_++) {                                   \
        const float16 qv_ = (q16)[r_][c_];                                                    \
        _Pragma("unroll") for (int i_ = 0; i_ < (NV); i_++)(acc)[i_][r_] =                     \
            fma(kk_[i_], qv_, (acc)[i_][r_]);                                                 \
      }                                                                                       \
    }                                                                                         \
  } while (0)

/* ---- 3. prefetches --------------------------------------------------- */

/* A cache-line prefetch for the CPU rows paths (the blocks of a sequence
 * lie anywhere, so the hardware prefetchers cannot guess the next one):
 * clang's builtin where the compiler has it (OpenCL's prefetch() is a
 * no-op in PoCL); nothing on NVIDIA or elsewhere. */
#if defined(__has_builtin) && CLPA_LANES != 3
#if __has_builtin(__builtin_prefetch)
#define ROWS_PREFETCH(p) __builtin_prefetch(p)
#endif
#endif
#ifndef ROWS_PREFETCH
#define ROWS_PREFETCH(p) ((void)(p))
#endif
