/*
 * common.cl — the first part of every kernel family's program but
 * smoke's (which needs none; blocks' takes it for KERNEL_PARAMS alone). A
 * program is clpa_codes.h (the numbers C and OpenCL C share),
 * this file, the parts its family lists and the family's own file, in
 * that order (lib/kernels.c): kv.cl where the cache is read or written,
 * io.cl where there are queries or outputs, and so on. No file compiles
 * alone.
 *
 * Options: lib/launch.c renders each tunable of a family (lib/kernels.c)
 * as -DCLPA_<NAME>=<value>, and lib/program.c adds CLPA_LANES to every
 * program. Every option a file reads is required, and the file says so
 * before its first use:
 *     #ifndef CLPA_NAME
 *     #error "CLPA_NAME: what it is; required"
 *     #endif
 * No option has a default (a default would hide a host that forgot one);
 * derived sizes are plain defines, in capitals. smoke.cl's
 * CLPA_SMOKE_BREAK, a switch for tests/test_program_cache.c, is no option.
 *
 * 1. Vector helpers: width-generic loads, conversions, sums and dots.
 * 2. Lane groups: the CUDA warp becomes SG consecutive work-items.
 *    CLPA_LANES picks how lanes exchange values: 1 emulated (local memory
 *    + barriers, any OpenCL 1.2 device), 2 subgroups with shuffles, 3
 *    NVIDIA inline PTX.
 * 3. The softmax state (m, l) and its merge: decode's partitions, prefill's
 *    key tiles, merge_states and XAttention's key chunks all use it.
 */
#ifndef CLPA_LANES
#error "CLPA_LANES: how lanes exchange values (1 emulated, 2 subgroup, 3 nv_ptx); required"
#endif

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

/* Width-1 "vectors", so one macro serves every vector width. */
typedef float float1;
typedef int int1;
typedef uint uint1;
typedef ushort ushort1;
typedef uchar uchar1;
/* Loads by width (own names: compilers define the built-in ones as macros). */
#define VLOAD1(p) (*(p))
#define VLOAD2(p) vload2(0, (p))
#define VLOAD4(p) vload4(0, (p))
#define VLOAD8(p) vload8(0, (p))
#define VLOAD16(p) vload16(0, (p))
#define VLOADH1(p) vload_half(0, (p))
#define VLOADH2(p) vload_half2(0, (p))
#define VLOADH4(p) vload_half4(0, (p))
#define VLOADH8(p) vload_half8(0, (p))
#define VLOADH16(p) vload_half16(0, (p))
/* Conversions by width: the built-in names have no width-1 form, and
 * pasting onto them can collide with the compiler's own macros. */
#define TO_FLOAT1(x) convert_float(x)
#define TO_FLOAT2(x) convert_float2(x)
#define TO_FLOAT4(x) convert_float4(x)
#define TO_FLOAT8(x) convert_float8(x)
#define TO_FLOAT16(x) convert_float16(x)
#define TO_USHORT1(x) convert_ushort(x)
#define TO_USHORT2(x) convert_ushort2(x)
#define TO_USHORT4(x) convert_ushort4(x)
#define TO_USHORT8(x) convert_ushort8(x)
#define TO_USHORT16(x) convert_ushort16(x)
/* f16 bits to floats (what vload_half does to memory, on a register; kv.cl's
 * fp8 decoders go through it too). */
#define F16_BITS_DECODER(n)                                                                     \
  inline CAT(float, n) CAT(f16_bits_to_float, n)(CAT(ushort, n) h) {                            \
    return CAT(VLOADH, n)((const __private half *)&h);                                           \
  }
F16_BITS_DECODER(1)
F16_BITS_DECODER(2)
F16_BITS_DECODER(4)
F16_BITS_DECODER(8)
F16_BITS_DECODER(16)
/* 4 bf16 elements held in a uint2 (little-endian pairs) to floats. */
inline float4 bf16_bits_to_float4(uint2 x) {
  return as_float4((uint4)(x.s0 << 16, x.s0 & 0xffff0000u, x.s1 << 16, x.s1 & 0xffff0000u));
}
#define TO_UINT1(x) convert_uint(x)
#define TO_UINT2(x) convert_uint2(x)
#define TO_UINT4(x) convert_uint4(x)
#define TO_UINT8(x) convert_uint8(x)
#define TO_UINT16(x) convert_uint16(x)
#define AS_FLOAT1(x) as_float(x)
#define AS_FLOAT2(x) as_float2(x)
#define AS_FLOAT4(x) as_float4(x)
#define AS_FLOAT8(x) as_float8(x)
#define AS_FLOAT16(x) as_float16(x)
#define AS_UINT1(x) as_uint(x)
#define AS_UINT2(x) as_uint2(x)
#define AS_UINT4(x) as_uint4(x)
#define AS_UINT8(x) as_uint8(x)
#define AS_UINT16(x) as_uint16(x)
#define IOTA1 0
#define IOTA2 (int2)(0, 1)
#define IOTA4 (int4)(0, 1, 2, 3)
#define IOTA8 (int8)(0, 1, 2, 3, 4, 5, 6, 7)
#define IOTA16 (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)

/* A kernel's parameter list from its list in an *_args.h (decode_args.h
 * says how the entries read), the same list the host fills by name:
 *   void clpa_decode_paged(KERNEL_PARAMS(DECODE_ARG_LIST))  */
#define KERNEL_PARAMS(list) list(KERNEL_PARAM, KERNEL_COMMA)
#define KERNEL_COMMA ,
#define KERNEL_PARAM(kind, type, name) KERNEL_PARAM_##kind(type) name
#define KERNEL_PARAM_GLOBAL(t) __global t *
#define KERNEL_PARAM_GLOBAL_CONST(t) __global const t *
#define KERNEL_PARAM_GLOBAL_VOLATILE(t) __global volatile t *
#define KERNEL_PARAM_LOCAL(t) __local t *
#define KERNEL_PARAM_VALUE(t) t

/* ---- 1. vector helpers ---------------------------------------------- */

inline float vsum1(float a) { return a; }
inline float vsum2(float2 a) { return a.s0 + a.s1; }
inline float vsum4(float4 a) { return (a.s0 + a.s1) + (a.s2 + a.s3); }
inline float vsum8(float8 a) { return vsum4(a.lo) + vsum4(a.hi); }
inline float vsum16(float16 a) { return vsum8(a.lo) + vsum8(a.hi); }
#define VSUM(n, a) CAT(vsum, n)(a)
/* The largest lane. */
inline float vmax1(float a) { return a; }
inline float vmax2(float2 a) { return fmax(a.s0, a.s1); }
inline float vmax4(float4 a) { return fmax(vmax2(a.lo), vmax2(a.hi)); }
inline float vmax8(float8 a) { return vmax4(fmax(a.lo, a.hi)); }
inline float vmax16(float16 a) { return vmax8(fmax(a.lo, a.hi)); }
/* acc + a . b as a chain of mads. */
inline float vdot1(float a, float b, float acc) { return mad(a, b, acc); }
inline float vdot2(float2 a, float2 b, float acc) { return mad(a.s1, b.s1, mad(a.s0, b.s0, acc)); }
inline float vdot4(float4 a, float4 b, float acc) { return vdot2(a.hi, b.hi, vdot2(a.lo, b.lo, acc)); }
inline float vdot8(float8 a, float8 b, float acc) { return vdot4(a.hi, b.hi, vdot4(a.lo, b.lo, acc)); }
inline float vdot16(float16 a, float16 b, float acc) {
  return vdot8(a.hi, b.hi, vdot8(a.lo, b.lo, acc));
}
#define VDOT(n, a, b, acc) CAT(vdot, n)(a, b, acc)

/* bfloat16 from f32 bits, rounded to nearest even as the host's encoder:
 * NaN keeps its top bits with the quiet bit set (io.cl's and kv.cl's bf16 stores). */
inline ushort f32_to_bf16(uint x) {
  if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x0040u);
  return (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ---- 2. lane groups -------------------------------------------------- */

#if CLPA_LANES == 3
/* NVIDIA: a warp is 32 lanes; shfl.sync.bfly exchanges registers. */
inline float lane_xor(float v, int mask) {
  float r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(mask));
  return r;
}
/* Lane 0's v, in every lane of the warp. */
inline int warp_lane0(int v) {
  int r;
  asm volatile("shfl.sync.idx.b32 %0, %1, 0, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v));
  return r;
}
#elif CLPA_LANES == 2
#if defined(cl_intel_subgroups)
#pragma OPENCL EXTENSION cl_intel_subgroups : enable
#define lane_xor(v, mask) intel_sub_group_shuffle_xor((v), (uint)(mask))
#else
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
#pragma OPENCL EXTENSION cl_khr_subgroup_shuffle : enable
#define lane_xor(v, mask) sub_group_shuffle_xor((v), (uint)(mask))
#endif
#endif

/* 2^x for a softmax's weights: ex2.approx.ftz on NVIDIA (2 ulp; one
 * MUFU.EX2, where exp2 and native_exp2 take several instructions to keep
 * results below 2^-126, which a softmax weight may drop), exp2 elsewhere. */
#if CLPA_LANES == 3
inline float exp2_fast(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
#else
#define exp2_fast(x) exp2(x)
#endif
#define LOG2E 1.4426950408889634f /* log2(e): softmax exponents in base 2 */

/* Sum over aligned groups of `width` lanes (a power of two <= SG); every
 * lane of the group gets the sum. The emulated form needs every work-item
 * of the work-group to call it (it has barriers); scratch holds one float
 * per work-item. */
inline float lane_group_sum(float v, int width, __local float *scratch) {
  if (width == 1) return v;
#if CLPA_LANES == 1
  int lid = get_local_id(0);
  scratch[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  int base = lid & ~(width - 1);
  float s = 0.0f;
  for (int k = 0; k < width; k++) s += scratch[base + k];
  barrier(CLK_LOCAL_MEM_FENCE);
  return s;
#else
  (void)scratch;
  for (int mask = width / 2; mask >= 1; mask /= 2) v += lane_xor(v, mask);
  return v;
#endif
}

/* Max and sum over the whole work-group of nthreads items in lanes of sg;
 * red holds max(nthreads, 1) floats. Every work-item gets the result. */
inline float block_reduce(float v, int is_max, int nthreads, int sg, __local float *red) {
  int lid = get_local_id(0);
#if CLPA_LANES == 1
  (void)sg;
  red[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = nthreads / 2; s > 0; s >>= 1) {
    if (lid < s) red[lid] = is_max ? fmax(red[lid], red[lid + s]) : red[lid] + red[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  float r = red[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
#else
  for (int mask = sg / 2; mask >= 1; mask /= 2) {
    float o = lane_xor(v, mask);
    v = is_max ? fmax(v, o) : v + o;
  }
  if (lid % sg == 0) red[lid / sg] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  float r = red[0];
  for (int w = 1; w < nthreads / sg; w++) r = is_max ? fmax(r, red[w]) : r + red[w];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
#endif
}

/* ---- 3. the softmax state -------------------------------------------
 * Attention over a set of keys, for one query row, is summarised by
 *   m = the largest logit,  l = sum_j exp(logit_j - m)
 * (an empty set is m = -inf, l = 0). Two disjoint sets merge by the
 * online-softmax identity
 *   m = max(m_a, m_b),  l = l_a e^(m_a - m) + l_b e^(m_b - m)
 * and a part's output, normalised over its own keys, enters the merged
 * output with weight l_part e^(m_part - m) / l. The log-sum-exp of the
 * row is m + log(l). */
typedef struct softmax_state {
  float m, l;
} softmax_state;

inline softmax_state softmax_state_of(float m, float l) {
  softmax_state s;
  s.m = m;
  s.l = l;
  return s;
}
inline softmax_state softmax_empty(void) { return softmax_state_of(-INFINITY, 0.0f); }
/* A lone logit (a sink: probability mass with no value). */
inline softmax_state softmax_logit(float x) { return softmax_state_of(x, 1.0f); }
inline softmax_state softmax_merge(softmax_state a, softmax_state b) {
  const float m = fmax(a.m, b.m);
  if (m == -INFINITY) return softmax_empty(); /* both empty: e^(-inf - -inf) is NaN */
  const float la = a.m == -INFINITY ? 0.0f : a.l * exp(a.m - m);
  const float lb = b.m == -INFINITY ? 0.0f : b.l * exp(b.m - m);
  return softmax_state_of(m, la + lb);
}
/* The weight of `part`'s normalised output in the output over `all`. */
inline float softmax_weight(softmax_state part, softmax_state all) {
  if (part.m == -INFINITY || !(all.l > 0.0f)) return 0.0f;
  return part.l * exp(part.m - all.m) / all.l;
}
inline float softmax_lse(softmax_state s) { return s.l > 0.0f ? s.m + log(s.l) : -INFINITY; }
