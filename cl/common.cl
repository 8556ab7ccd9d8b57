/*
 * common.cl — shared by every kernel family; the host prepends it to each
 * family's source when it builds a program, so a family file may use all
 * of it. Kernel files hold only kernel code; everything tunable is a -D
 * define with a default here, so every file compiles alone.
 *
 * 1. Storage dtypes: KV_DTYPE picks how the cache stores an element (kv_t)
 *    and KV_LOAD(n, p) loads n consecutive elements as a float vector.
 *    All arithmetic is f32.
 *
 *      KV_DTYPE  storage     element  X = 16 B / element
 *      0         f32         float    4
 *      1         f16         half     8   (vload_half: core OpenCL, no cl_khr_fp16)
 *      2         bf16        ushort   8   (upper half of an f32)
 *      3         fp8 e4m3fn  uchar    16  (decoded arithmetically, times a scale)
 *      4         fp8 e5m2    uchar    16
 *
 *    Storing goes the other way, bit for bit as the host's clpa_encode
 *    (host/dtype_convert.h): f32 -> bf16 and fp8 round to nearest even,
 *    fp8 divides by a per-tensor scale first (correctly rounded, whatever
 *    accuracy the device's '/' has) and saturates.
 *
 * 2. Lane groups: the CUDA warp becomes SG consecutive work-items. CLPA_LANES
 *    picks how lanes exchange values: 1 emulated (local memory + barriers,
 *    any OpenCL 1.2 device), 2 subgroups with shuffles, 3 NVIDIA inline PTX.
 */
#ifndef CLPA_LANES
#define CLPA_LANES 1 /* 1 emulated, 2 subgroup, 3 nv_ptx */
#endif
#ifndef KV_DTYPE
#define KV_DTYPE 1
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

inline float vsum1(float a) { return a; }
inline float vsum2(float2 a) { return a.s0 + a.s1; }
inline float vsum4(float4 a) { return (a.s0 + a.s1) + (a.s2 + a.s3); }
inline float vsum8(float8 a) { return vsum4(a.lo) + vsum4(a.hi); }
inline float vsum16(float16 a) { return vsum8(a.lo) + vsum8(a.hi); }
#define VSUM(n, a) CAT(vsum, n)(a)
/* acc + a . b as a chain of mads. */
inline float vdot1(float a, float b, float acc) { return mad(a, b, acc); }
inline float vdot2(float2 a, float2 b, float acc) { return mad(a.s1, b.s1, mad(a.s0, b.s0, acc)); }
inline float vdot4(float4 a, float4 b, float acc) { return vdot2(a.hi, b.hi, vdot2(a.lo, b.lo, acc)); }
inline float vdot8(float8 a, float8 b, float acc) { return vdot4(a.hi, b.hi, vdot4(a.lo, b.lo, acc)); }
inline float vdot16(float16 a, float16 b, float acc) {
  return vdot8(a.hi, b.hi, vdot8(a.lo, b.lo, acc));
}
#define VDOT(n, a, b, acc) CAT(vdot, n)(a, b, acc)

/* ---- 1. storage dtypes ---------------------------------------------- */

/* fp8 decoders work on uintN lanes holding one byte each. Both go through
 * f16, whose conversion devices do in hardware: e5m2 is the upper byte of
 * an f16; e4m3's bits, moved into f16's places, give the value / 2^8
 * (subnormals included), and only its NaN (0x7f, 0xff) needs a select. */
#define FP8_E4M3_DECODER(n)                                                         \
  inline CAT(float, n) CAT(fp8e4m3_to_float, n)(CAT(uint, n) b) {                   \
    CAT(ushort, n) h = CAT(TO_USHORT, n)(((b & 0x80u) << 8) | ((b & 0x7fu) << 7));  \
    CAT(float, n) r = CAT(VLOADH, n)((const __private half *)&h) * 0x1p8f;           \
    return select(r, (CAT(float, n))(NAN), (b & 0x7fu) == 0x7fu);                   \
  }
#define FP8_E5M2_DECODER(n)                                                         \
  inline CAT(float, n) CAT(fp8e5m2_to_float, n)(CAT(uint, n) b) {                   \
    CAT(ushort, n) h = CAT(TO_USHORT, n)(b << 8);                                    \
    return CAT(VLOADH, n)((const __private half *)&h);                              \
  }
FP8_E4M3_DECODER(1)
FP8_E4M3_DECODER(2)
FP8_E4M3_DECODER(4)
FP8_E4M3_DECODER(8)
FP8_E4M3_DECODER(16)
FP8_E5M2_DECODER(1)
FP8_E5M2_DECODER(2)
FP8_E5M2_DECODER(4)
FP8_E5M2_DECODER(8)
FP8_E5M2_DECODER(16)

#if KV_DTYPE == 0
typedef float kv_t;
#define KV_BYTES 4
#define KV_LOAD(n, p) CAT(VLOAD, n)(p)
#define KV_IS_FP8 0
#elif KV_DTYPE == 1
typedef half kv_t;
#define KV_BYTES 2
#define KV_LOAD(n, p) CAT(VLOADH, n)(p)
#define KV_IS_FP8 0
#elif KV_DTYPE == 2
typedef ushort kv_t;
#define KV_BYTES 2
#define KV_LOAD(n, p) CAT(AS_FLOAT, n)(CAT(TO_UINT, n)(CAT(VLOAD, n)(p)) << 16)
#define KV_IS_FP8 0
#elif KV_DTYPE == 3
typedef uchar kv_t;
#define KV_BYTES 1
#define KV_LOAD(n, p) CAT(fp8e4m3_to_float, n)(CAT(TO_UINT, n)(CAT(VLOAD, n)(p)))
#define KV_IS_FP8 1
#elif KV_DTYPE == 4
typedef uchar kv_t;
#define KV_BYTES 1
#define KV_LOAD(n, p) CAT(fp8e5m2_to_float, n)(CAT(TO_UINT, n)(CAT(VLOAD, n)(p)))
#define KV_IS_FP8 1
#else
#error "KV_DTYPE must be 0 (f32), 1 (f16), 2 (bf16), 3 (fp8 e4m3) or 4 (fp8 e5m2)"
#endif
/* Elements per 16 bytes: the innermost dimension of the key cache. */
#define X (16 / KV_BYTES)

/* ---- 1b. storing: float -> storage dtype ------------------------------
 * Every function matches its host twin in host/dtype_convert.c on every
 * input, NaN and infinity included (tests/test_cache_reshape.c checks). */

/* m >> s rounded to nearest, ties to even; m < 2^24, so s > 25 gives 0. */
inline uint shift_rne(uint m, uint s) {
  if (s == 0u) return m;
  if (s > 25u) return 0u;
  uint r = m >> s, rem = m & ((1u << s) - 1u), mid = 1u << (s - 1u);
  return r + ((rem > mid || (rem == mid && (r & 1u))) ? 1u : 0u);
}

/* |f| (finite, as f32 bits without the sign) rounded to a format with
 * `mant` mantissa bits and exponent bias `bias`: its exponent|mantissa
 * code, possibly past the largest finite one (the caller saturates).
 * Normal results drop bits with a carry into the exponent; subnormal
 * results count units of the smallest subnormal, 2^(1 - bias - mant). */
inline uint round_magnitude(uint a, uint mant, int bias) {
  int e = (int)(a >> 23);
  if (e - 127 >= 1 - bias) return shift_rne(a, 23u - mant) - ((uint)(127 - bias) << mant);
  uint m = (a & 0x7fffffu) | (e ? 0x800000u : 0u);
  return shift_rne(m, (uint)(151 - bias - (int)mant - (e ? e : 1)));
}

/* OCP fp8: e4m3fn (max 448, no inf: inf saturates) or e5m2 (max 57344;
 * inf stays inf, finite overflow saturates). NaN -> sign | 0x7f. */
inline uchar f32_to_fp8(float f, int e5m2) {
  uint x = as_uint(f), sign = (x >> 24) & 0x80u, a = x & 0x7fffffffu;
  uint max_code = e5m2 ? 0x7bu : 0x7eu;
  if (a > 0x7f800000u) return (uchar)(sign | 0x7fu);
  if (a == 0x7f800000u) return (uchar)(sign | (e5m2 ? 0x7cu : 0x7eu));
  uint r = round_magnitude(a, e5m2 ? 2u : 3u, e5m2 ? 15 : 7);
  return (uchar)(sign | min(r, max_code));
}

/* bfloat16 from f32 bits: NaN keeps its top bits with the quiet bit set. */
inline ushort f32_to_bf16(uint x) {
  if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x0040u);
  return (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* A divisor prepared once: s = ms * 2^es with ms in [0.5, 1), and an
 * approximation of 1 / ms. */
typedef struct divisor {
  float ms, inv;
  int es;
} divisor;
inline divisor divisor_of(float s) {
  divisor d;
  d.ms = frexp(s, &d.es);
  d.inv = 1.0f / d.ms;
  return d;
}

/* x / s rounded to nearest even, as IEEE f32 division (what the host's
 * clpa_encode computes), for s > 0 finite. OpenCL lets '/' be 2.5 ulp off,
 * and one ulp of the quotient can move an fp8 rounding, so: scale both to
 * [0.5, 1) mantissas (exact), take q = mx * (1 / ms) (a few ulp off on any
 * device, so the next step runs everywhere, PoCL included), then walk q
 * one ulp at a time towards the quotient t, steered by the sign of the
 * remainder mx - q * ms, which fma gives exactly for q near t, until q and
 * its neighbour bracket t; keep the nearer (ties: the even mantissa).
 * ldexp then rescales exactly; a subnormal result may round twice, but
 * anything that small is 0 in every storage dtype this feeds (fp8). */
inline float div_rn(float x, divisor d) {
  if (x == 0.0f || !isfinite(x)) return x / (ldexp(d.ms, d.es));
  int ex;
  float mx = frexp(x, &ex);
  float q = mx * d.inv;
  for (int i = 0; i < 8; i++) {
    float r = fma(-q, d.ms, mx); /* > 0: t lies above q */
    if (r == 0.0f) break;
    float n = nextafter(q, r > 0.0f ? INFINITY : -INFINITY);
    float rn = fma(-n, d.ms, mx);
    if (rn != 0.0f && (rn > 0.0f) == (r > 0.0f)) { /* t lies beyond n too */
      q = n;
      continue;
    }
    float a = fabs(r), b = fabs(rn);
    if (b < a || (b == a && (as_uint(n) & 1u) == 0u)) q = n;
    break;
  }
  return ldexp(q, ex - d.es);
}

/* KV_STORE(v, p, i, d): element i of p = v in the cache dtype (fp8 stores
 * v / scale, d = divisor_of(scale); the other dtypes ignore d). */
#if KV_DTYPE == 0
#define KV_STORE(v, p, i, d) ((p)[i] = (v))
#elif KV_DTYPE == 1
#define KV_STORE(v, p, i, d) vstore_half_rte((v), (i), (p))
#elif KV_DTYPE == 2
#define KV_STORE(v, p, i, d) ((p)[i] = f32_to_bf16(as_uint(v)))
#else
#define KV_STORE(v, p, i, d) ((p)[i] = f32_to_fp8(div_rn((v), (d)), KV_DTYPE == 4))
#endif

/* Query and output: f32 (IO_DTYPE 0) or f16 (1), stored through vstore_half_rte. */
#ifndef IO_DTYPE
#define IO_DTYPE 0
#endif
#if IO_DTYPE == 0
typedef float io_t;
#define IO_LOAD(p, i) ((p)[i])
#define IO_STORE(v, p, i) ((p)[i] = (v))
#elif IO_DTYPE == 1
typedef half io_t;
#define IO_LOAD(p, i) vload_half((i), (p))
#define IO_STORE(v, p, i) vstore_half_rte((v), (i), (p))
#else
#error "IO_DTYPE must be 0 (f32) or 1 (f16)"
#endif

/* ---- 2. lane groups -------------------------------------------------- */

#if CLPA_LANES == 3
/* NVIDIA: a warp is 32 lanes; shfl.sync.bfly exchanges registers. */
inline float lane_xor(float v, int mask) {
  float r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(mask));
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

/* Fault bits a kernel ORs into the context's fault word (see clpa.h). */
#define CLPA_FAULT_BAD_BLOCK 1
#define CLPA_FAULT_BAD_CONTEXT_LEN 2
#define CLPA_FAULT_LANES 4
