/*
 * mma.cl — warp-level matrix products for the tensor-core paths: on
 * NVIDIA (CLPA_LANES == 3) PTX's mma.sync.aligned.m16n8k16 with f16 or
 * bf16 operands (the KV cache's dtype) and f32 accumulation, and for f32
 * caches m16n8k8 on tf32 three times (mma_3xtf32, below); on every
 * other device the same products emulated through local memory, so that
 * a path's fragment bookkeeping runs, and is tested, on PoCL in CI (slow:
 * for tests, never picked by the heuristics there).
 *
 * Fragments of m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16
 * with floating point type"): lane l of a warp, g = l / 4, t = l % 4,
 * holds each pair in one 32-bit register, the lower index in the low half:
 *   A 16 x 16 (row major)  a.x = A[g][2t, 2t+1]     a.y = A[g+8][2t, 2t+1]
 *                          a.z = A[g][2t+8, 2t+9]   a.w = A[g+8][2t+8, 2t+9]
 *   B 16 x 8  (column)     b.x = B[2t, 2t+1][g]     b.y = B[2t+8, 2t+9][g]
 *   C, D 16 x 8 (f32)      .x, .y = C[g][2t], C[g][2t+1]
 *                          .z, .w = C[g+8][2t], C[g+8][2t+1]
 *
 * The emulated forms use barriers: every work-item of the work-group
 * calls them together, and the work-group is whole warps of 32 (lane =
 * local id % 32). `xch` is local scratch of MMA_XCH words.
 */
#if CLPA_KV_DTYPE == CLPA_CODE_BF16
#define MMA_BF16 1
#define MMA_T "bf16"
#else
#define MMA_BF16 0
#define MMA_T "f16"
#endif
#define MMA_PTX (CLPA_LANES == 3)
#if MMA_PTX
#define MMA_XCH 1
#define MMA_UNROLL _Pragma("unroll") /* fragments stay in registers */
#else
#define MMA_XCH (NUM_THREADS * 6)
#define MMA_UNROLL /* loops with barriers: unrolled, they make PoCL's compile explode */
#endif

/* Two floats as one operand register (lo in the low half), rounded to
 * nearest even. */
inline uint mma_pack(float lo, float hi) {
  uint r;
#if MMA_PTX
  asm("cvt.rn." MMA_T "x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#elif MMA_BF16
  r = (uint)f32_to_bf16(as_uint(lo)) | ((uint)f32_to_bf16(as_uint(hi)) << 16);
#else
  ushort h[2];
  vstore_half_rte(lo, 0, (__private half *)h);
  vstore_half_rte(hi, 1, (__private half *)h);
  r = (uint)h[0] | ((uint)h[1] << 16);
#endif
  return r;
}

#if CLPA_KV_DTYPE == CLPA_CODE_FP8_E4M3 || CLPA_KV_DTYPE == CLPA_CODE_FP8_E5M2
#if !MMA_PTX
/* Two fp8 values (the cache's e4m3 or e5m2, the lower in the low byte of
 * `b`) as an f16 pair register, exactly (every fp8 value is an f16): e5m2
 * is an f16's upper byte. (NVIDIA: mma_fp8x4's cvt and prmt.) */
inline uint mma_fp8x2(uint b) {
#if CLPA_KV_DTYPE == CLPA_CODE_FP8_E5M2
  return ((b & 0xffu) << 8) | ((b & 0xff00u) << 16);
#else
  const float2 f = fp8e4m3_to_float2((uint2)(b & 0xffu, (b >> 8) & 0xffu));
  return mma_pack(f.x, f.y);
#endif
}
#endif

/* The four fp8 values of a word as two f16 pair registers (bytes 0, 1
 * and bytes 2, 3). On NVIDIA the word's 16-bit halves go to the cvt as
 * they are (the upper one had cost a shift a word) and e5m2 is one byte
 * permute a pair. */
inline uint2 mma_fp8x4(uint w) {
#if MMA_PTX && CLPA_KV_DTYPE == CLPA_CODE_FP8_E5M2
  uint lo, hi;
  asm("prmt.b32 %0, %1, %2, 0x1404;" : "=r"(lo) : "r"(w), "r"(0u));
  asm("prmt.b32 %0, %1, %2, 0x3424;" : "=r"(hi) : "r"(w), "r"(0u));
  return (uint2)(lo, hi);
#elif MMA_PTX
  uint lo, hi;
  asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\t"
      "cvt.rn.f16x2.e4m3x2 %0, l;\n\tcvt.rn.f16x2.e4m3x2 %1, h;\n\t}"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
  return (uint2)(lo, hi);
#else
  return (uint2)(mma_fp8x2(w & 0xffffu), mma_fp8x2(w >> 16));
#endif
}
#endif

#if CLPA_KV_DTYPE == CLPA_CODE_FP8_E4M3 || CLPA_KV_DTYPE == CLPA_CODE_FP8_E5M2
/* A transposed register of fp8 pairs (mma_trans of 2 dimensions d, d + 1
 * of two tokens a, b: bytes a_d a_d+1 b_d b_d+1, lowest first) as the
 * tokens' pairs a_d b_d a_d+1 b_d+1, which mma_fp8x4 turns into the f16
 * pairs (a, b) of dimension d and of d + 1: one byte permute. */
inline uint mma_fp8_token_pairs(uint w) {
#if MMA_PTX
  uint r;
  asm("prmt.b32 %0, %1, %2, 0x3120;" : "=r"(r) : "r"(w), "r"(0u));
  return r;
#else
  return (w & 0xff0000ffu) | ((w & 0xff00u) << 8) | ((w >> 8) & 0xff00u);
#endif
}
#endif

#if !MMA_PTX
/* Half `hi` of an operand register as a float. */
inline float mma_unpack(uint r, int hi) {
  const ushort h = (ushort)(hi ? r >> 16 : r & 0xffffu);
#if MMA_BF16
  return as_float((uint)h << 16);
#else
  return vload_half(0, (const __private half *)&h);
#endif
}
#endif

#if !MMA_PTX
/* Element e of an operand register: half e of a pair (per == 2), or the
 * register as a tf32 (per == 1: its low 13 bits dropped, truncation, the
 * coarsest a tensor core may treat them; the high parts have none). */
inline float mma_elem(uint r, int e, int per) {
  return per == 2 ? mma_unpack(r, e) : as_float(r & 0xffffe000u);
}

/* D = A B + C for this warp through local memory: m16n8k16 on pairs
 * (per == 2) or m16n8k8 on tf32s (per == 1), whose registers sit at the
 * same places (below). */
inline float4 mma_emulated(float4 c, uint4 a, uint2 b, __local uint *xch, int per) {
  const int lid = get_local_id(0), lane = lid % 32, g = lane / 4, t = lane % 4;
  __local uint *w = xch + (lid - lane) * 6; /* this warp's 32 x 6 words */
  w[lane * 6 + 0] = a.x, w[lane * 6 + 1] = a.y, w[lane * 6 + 2] = a.z, w[lane * 6 + 3] = a.w;
  w[lane * 6 + 4] = b.x, w[lane * 6 + 5] = b.y;
  barrier(CLK_LOCAL_MEM_FENCE);
  float d[4] = {c.x, c.y, c.z, c.w};
  for (int i = 0; i < 4; i++) {
    const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
    float s = 0.0f;
    for (int k = 0; k < 8 * per; k++) {
      /* A[row][k] and B[k][col]: which lane (t = q) and register (r) hold them */
      const int q = k % (4 * per) / per, r = k / (4 * per), e = k % per;
      const uint ra = w[((row % 8) * 4 + q) * 6 + row / 8 + 2 * r];
      const uint rb = w[(col * 4 + q) * 6 + 4 + r];
      s = mad(mma_elem(ra, e, per), mma_elem(rb, e, per), s);
    }
    d[i] += s;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  return (float4)(d[0], d[1], d[2], d[3]);
}
#endif

#if MMA_PTX
/* Returns D = A B + C of mma.sync.aligned.SPEC (f32 C and D, 4 A and 2 B
 * registers). */
#define MMA_SYNC_RETURN(SPEC, c, a, b)                                                        \
  do {                                                                                      \
    float d0_, d1_, d2_, d3_;                                                               \
    asm("mma.sync.aligned." SPEC " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "          \
        "{%10, %11, %12, %13};"                                                             \
        : "=f"(d0_), "=f"(d1_), "=f"(d2_), "=f"(d3_)                                        \
        : "r"((a).x), "r"((a).y), "r"((a).z), "r"((a).w), "r"((b).x), "r"((b).y),           \
          "f"((c).x), "f"((c).y), "f"((c).z), "f"((c).w));                                  \
    return (float4)(d0_, d1_, d2_, d3_);                                                    \
  } while (0)
#endif

/* D = A B + C for this warp. */
inline float4 mma_16816(float4 c, uint4 a, uint2 b, __local uint *xch) {
#if MMA_PTX
  (void)xch;
  MMA_SYNC_RETURN("m16n8k16.row.col.f32." MMA_T "." MMA_T ".f32", c, a, b);
#else
  return mma_emulated(c, a, b, xch, 2);
#endif
}

/* f32 operands (3xTF32): mma.sync m16n8k8 with tf32 operands (10 stored
 * mantissa bits, f32's range), three times, on each operand's high part
 * (rounded to tf32) and its remainder: A B ~ Ah Bh + Ah Bl + Al Bh, the
 * dropped Al Bl and the remainders' own rounding ~2^-21 of |A||B|.
 * m16n8k8's fragments are m16n8k16's with one element a register where
 * that has a pair (PTX ISA, "Matrix Fragments for mma.m16n8k8"):
 *   A 16 x 8  a.x = A[g][t]  a.y = A[g+8][t]  a.z = A[g][t+4]  a.w = A[g+8][t+4]
 *   B 8 x 8   b.x = B[t][g]  b.y = B[t+4][g]
 *   C, D      as m16n8k16's. */
inline float4 mma_1688(float4 c, uint4 a, uint2 b, __local uint *xch) {
#if MMA_PTX
  (void)xch;
  MMA_SYNC_RETURN("m16n8k8.row.col.f32.tf32.tf32.f32", c, a, b);
#else
  return mma_emulated(c, a, b, xch, 1);
#endif
}

/* An f32's high part: rounded to tf32's 10 stored mantissa bits (half
 * away from zero, as cvt.rna), low bits zero; x minus it is exact. */
inline uint4 mma_tf32_hi4(uint4 x) { return (x + 0x1000u) & 0xffffe000u; }
inline uint4 mma_tf32_lo4(uint4 x, uint4 hi) { return as_uint4(as_float4(x) - as_float4(hi)); }

/* C + A B for f32 operands: a (A's registers) split here, b given as
 * high parts and remainders; the small products first. */
inline float4 mma_3xtf32(float4 c, uint4 a, uint2 bh, uint2 bl, __local uint *xch) {
  const uint4 ah = mma_tf32_hi4(a), al = mma_tf32_lo4(a, ah);
  c = mma_1688(c, al, bh, xch);
  c = mma_1688(c, ah, bl, xch);
  return mma_1688(c, ah, bh, xch);
}

#if MMA_PTX
/* Max or sum over the lanes that differ in the bits from..to of the lane
 * number (a butterfly of shuffles). */
inline float mma_xor_reduce(float v, int is_max, int from, int to) {
  for (int mask = from; mask <= to; mask *= 2) {
    const float o = lane_xor(v, mask);
    v = is_max ? fmax(v, o) : v + o;
  }
  return v;
}
#endif

/* Max and sum over the 4 lanes of a quad (the lanes g of one fragment
 * row share). */
inline float quad_reduce(float v, int is_max, __local uint *xch) {
#if MMA_PTX
  (void)xch;
  return mma_xor_reduce(v, is_max, 1, 2);
#else
  const int lid = get_local_id(0), q = lid & ~3;
  xch[lid] = as_uint(v);
  barrier(CLK_LOCAL_MEM_FENCE);
  const float a = as_float(xch[q]), b = as_float(xch[q + 1]);
  const float c = as_float(xch[q + 2]), d = as_float(xch[q + 3]);
  barrier(CLK_LOCAL_MEM_FENCE);
  /* The lanes' order, as the butterfly takes them: (0 1)(2 3). */
  return is_max ? fmax(fmax(a, b), fmax(c, d)) : (a + b) + (c + d);
#endif
}

/* Max and sum over the 8 lanes of a fragment column (the lanes of one t:
 * l, l ^ 4, .., l ^ 28). */
inline float mma_col_reduce(float v, int is_max, __local uint *xch) {
#if MMA_PTX
  (void)xch;
  return mma_xor_reduce(v, is_max, 4, 16);
#else
  const int lid = get_local_id(0), base = lid - lid % 32 + lid % 4;
  xch[lid] = as_uint(v);
  barrier(CLK_LOCAL_MEM_FENCE);
  float x[8];
  for (int j = 0; j < 8; j++) x[j] = as_float(xch[base + 4 * j]);
  barrier(CLK_LOCAL_MEM_FENCE);
  /* The lanes' order, as the butterfly takes them: (0 1)(2 3), then the pairs, then the halves. */
  for (int s = 1; s < 8; s *= 2)
    for (int j = 0; j < 8; j += 2 * s) x[j] = is_max ? fmax(x[j], x[j + s]) : x[j] + x[j + s];
  return x[0];
#endif
}

#if !MMA_PTX
/* Element `hi` (0, 1) of two registers of 16-bit pairs as one pair, a's
 * below b's: a lane's register of a transposed 8 x 8 matrix from the two
 * rows' words that hold its column (mma_trans, and the emulated ldmatrix
 * .trans of prefill_mma.cl). */
inline uint mma_column_pair(uint a, uint b, int hi) {
  return (hi ? a >> 16 : a & 0xffffu) | (hi ? b & 0xffff0000u : b << 16);
}
#endif

/* An 8 x 8 matrix of 16-bit values held one register a lane (lane l: row
 * l / 4, columns 2 (l % 4) and + 1, the lower in the low half: the layout
 * of a C fragment's rows packed in pairs), transposed: lane l gets row
 * l / 4 of the transpose. movmatrix on NVIDIA (sm_75 and later). */
inline uint mma_trans(uint r, __local uint *xch) {
#if MMA_PTX
  (void)xch;
  uint d;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(r));
  return d;
#else
  const int lid = get_local_id(0), lane = lid % 32, g = lane / 4, t = lane % 4;
  __local uint *w = xch + (lid - lane);
  w[lane] = r;
  barrier(CLK_LOCAL_MEM_FENCE);
  /* row g of the transpose = column g: rows 2t and 2t + 1 of it */
  const uint a = w[8 * t + g / 2], b = w[8 * t + 4 + g / 2];
  barrier(CLK_LOCAL_MEM_FENCE);
  return mma_column_pair(a, b, g % 2);
#endif
}

/* The same for 32-bit values, two registers a lane (columns 2t and 2t + 1
 * of row l / 4): their upper and lower halves transposed apart. */
inline uint2 mma_trans32(uint a, uint b, __local uint *xch) {
  const uint hi = mma_trans((a >> 16) | (b & 0xffff0000u), xch);
  const uint lo = mma_trans((a & 0xffffu) | (b << 16), xch);
  return (uint2)((lo & 0xffffu) | (hi << 16), (lo >> 16) | (hi & 0xffff0000u));
}

/* 16 bytes from global to local memory: on NVIDIA asynchronously
 * (cp.async, Ampere and later), so that the copy runs while the warp
 * computes; mma_copy_wait() waits for this work-item's copies (then a
 * barrier shows them to the others). Elsewhere a plain copy. Both
 * addresses 16-byte aligned. */
inline void mma_copy16(__local uint4 *dst, __global const uint4 *src) {
#if MMA_PTX
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint)(size_t)dst),
               "l"((ulong)src)
               : "memory");
#else
  *dst = *src;
#endif
}

inline void mma_copy_wait(void) {
#if MMA_PTX
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

/* Deeper pipelines: mma_copy_commit() closes this work-item's copies
 * issued since the last commit into a group; MMA_COPY_WAIT_GROUPS(n)
 * waits until at most n (a literal 0-2) groups are still in flight. */
inline void mma_copy_commit(void) {
#if MMA_PTX
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
#if MMA_PTX
#define MMA_COPY_WAIT_GROUPS(n) asm volatile("cp.async.wait_group " #n ";" ::: "memory")
#else
#define MMA_COPY_WAIT_GROUPS(n) ((void)0)
#endif

/* B fragments from local memory (ldmatrix on NVIDIA: one instruction
 * for two k-steps' operands, where each would take two 32-bit reads):
 * the matrix is rows row0 .. row0 + 7 of `tile` (`stride` 32-bit words a
 * row, every row 16-byte aligned), one row per column of B; component c
 * of the result is the register of the 8 x 8 submatrix at words word0 +
 * 4 c .. + 3: lane l gets word word0 + 4 c + l % 4 of row row0 + l / 4,
 * which is b.x, b.y of k-step word0 / 8 (c = 0, 1) and of the next one
 * (c = 2, 3) when a row holds B's k index in order. Volatile: the data changes between calls at the same address
 * (barriers and cp.async order them, not the operands). */
#if MMA_PTX
/* Returns ldmatrix.x4's 4 registers (SPEC: "" or ".trans") from shared
 * address a. */
#define MMA_LDSM4_RETURN(SPEC, a)                                                           \
  do {                                                                                      \
    uint4 r;                                                                                \
    asm volatile("ldmatrix.sync.aligned.m8n8.x4" SPEC ".shared.b16 {%0, %1, %2, %3}, [%4];" \
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)                               \
                 : "r"(a));                                                                 \
    return r;                                                                               \
  } while (0)
/* ldmatrix.x4: lanes 8 i .. 8 i + 7 give the row addresses of matrix i. */
inline uint4 mma_ldsm4a(uint a) { MMA_LDSM4_RETURN("", a); }
inline uint4 mma_ldsm4(__local const uint *p) { return mma_ldsm4a((uint)(size_t)p); }

/* ldmatrix.x4.trans: the same matrices transposed, lane l getting
 * column l / 4 of each, rows 2 (l % 4) and + 1: for B fragments whose k
 * index runs along the rows in memory (prefill_mma.cl's HND and NHD values,
 * a token a row). */
inline uint4 mma_ldsm4ta(uint a) { MMA_LDSM4_RETURN(".trans", a); }

/* ldmatrix.x2: lanes 0-15 give the row addresses of matrices 0 and 1 (the
 * others' are ignored but must be valid shared addresses). */
inline uint2 mma_ldsm2a(uint a) {
  uint2 r;
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r.x), "=r"(r.y)
               : "r"(a));
  return r;
}

/* p as a 32-bit shared address, through an asm the compiler does not
 * see into: offsets added to the result stay constants from one base
 * (prefill_mma.cl's fragments), where the compiler would fold the
 * pointer's lane part into each offset and hoist every such sum out of
 * the tile loop, a register each (spilled, under the path's cap). */
inline uint mma_shared(__local const uint *p) {
  uint a;
  asm("mov.b32 %0, %1;" : "=r"(a) : "r"((uint)(size_t)p));
  return a;
}
#endif

inline uint4 mma_ldm4(__local const uint *tile, int stride, int row0, int word0) {
  const int lane = get_local_id(0) % 32;
#if MMA_PTX
  return mma_ldsm4(tile + (row0 + lane % 8) * stride + word0 + lane / 8 * 4);
#else
  __local const uint *p = tile + (row0 + lane / 4) * stride + word0 + lane % 4;
  return (uint4)(p[0], p[4], p[8], p[12]);
#endif
}

/* A fragments of rows row0 .. row0 + 15 of `tile` (row major, `stride`
 * 32-bit words a row, rows 16-byte aligned), k index from word word0 (a
 * k-step is 8 words): a.x = A[g][2t, 2t+1] and so on (the banner). One
 * ldmatrix.x4 on NVIDIA: lanes 0-15 address rows 0-15 at word0, lanes
 * 16-31 the same rows at word0 + 4. Volatile, as mma_ldm4. */
inline uint4 mma_ldm_a(__local const uint *tile, int stride, int row0, int word0) {
  const int lane = get_local_id(0) % 32;
#if MMA_PTX
  return mma_ldsm4(tile + (row0 + lane % 16) * stride + word0 + lane / 16 * 4);
#else
  __local const uint *p = tile + (row0 + lane / 4) * stride + word0 + lane % 4;
  return (uint4)(p[0], p[8 * stride], p[4], p[8 * stride + 4]);
#endif
}

/* exp2 on the path's probabilities: common.cl's exp2_fast (one
 * MUFU.EX2 on NVIDIA). */
inline float4 mma_ex2x4(float4 x) {
  return (float4)(exp2_fast(x.x), exp2_fast(x.y), exp2_fast(x.z), exp2_fast(x.w));
}
#define MMA_EXP2(x) exp2_fast(x)
#define MMA_EXP2_4(x) mma_ex2x4(x)

/* One step of the online softmax on S's fragments, in base 2, for the
 * lane's rows g (h = 0) and g + 8 (h = 1): the logits (base 2) are
 * sc[0 .. NT) times c2 (> 0; -inf where masked); m2[2], l[2] the running
 * max and this lane's part of the sum. Leaves alpha[2] (the factor for
 * the old output) and pa[NT / 2], the probabilities as A fragments of the
 * next product (n-tiles 2j and 2j + 1 are k-step j). The max moves only
 * when a tile's exceeds it by more than MMA_SLACK (base 2): in between
 * the weights exp2(x - m2) stay below 2^MMA_SLACK, which f32 sums and
 * f16 / bf16 operands hold exactly as well, and the output is rescaled
 * once per jump instead of on every new maximum (FlashAttention-4 does
 * the same); the normalisation at the end divides by l taken against the
 * same m2, so the result does not change. A macro, so the fragments stay
 * in registers. */
#define MMA_SLACK 8.0f
#define MMA_SOFTMAX_STEP(sc, NT, c2, m2, l, alpha, pa, xch)                                  \
  do {                                                                                      \
    float mx_[2] = {-INFINITY, -INFINITY}, base_[2];                                        \
    MMA_UNROLL                                                                              \
    for (int n_ = 0; n_ < (NT); n_++) {                                                     \
      mx_[0] = fmax(mx_[0], fmax((sc)[n_].x, (sc)[n_].y));                                  \
      mx_[1] = fmax(mx_[1], fmax((sc)[n_].z, (sc)[n_].w));                                  \
    }                                                                                       \
    for (int h_ = 0; h_ < 2; h_++) {                                                        \
      const float mn_ = quad_reduce(mx_[h_], 1, (xch)) * (c2);                              \
      (alpha)[h_] = 1.0f;                                                                   \
      if (mn_ > (m2)[h_] + MMA_SLACK) { /* false while every score is -inf */               \
        (alpha)[h_] = MMA_EXP2((m2)[h_] - mn_);                                             \
        (m2)[h_] = mn_;                                                                     \
        (l)[h_] *= (alpha)[h_];                                                             \
      }                                                                                     \
      base_[h_] = (m2)[h_] == -INFINITY ? 0.0f : (m2)[h_]; /* every score -inf: p = 0 */    \
    }                                                                                       \
    MMA_UNROLL                                                                              \
    for (int n_ = 0; n_ < (NT); n_++) {                                                     \
      const float4 p_ = MMA_EXP2_4(                                                         \
          fma((sc)[n_], (float4)(c2), -(float4)(base_[0], base_[0], base_[1], base_[1])));  \
      (l)[0] += p_.x + p_.y, (l)[1] += p_.z + p_.w;                                         \
      const uint lo_ = mma_pack(p_.x, p_.y), hi_ = mma_pack(p_.z, p_.w); /* rows g, g + 8 */ \
      if (n_ % 2 == 0) (pa)[n_ / 2].x = lo_, (pa)[n_ / 2].y = hi_;                          \
      else (pa)[n_ / 2].z = lo_, (pa)[n_ / 2].w = hi_;                                      \
    }                                                                                       \
  } while (0)
