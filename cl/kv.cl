/*
 * kv.cl — the paged KV cache as kernels see it: how an element is stored
 * (CLPA_KV_DTYPE) and where it lives (paged addressing). Part of every
 * family that reads or writes the cache (decode's, prefill's and
 * XAttention's paths, cache; lib/kernels.c), after common.cl.
 *
 * 1. Storage dtypes: CLPA_KV_DTYPE (a clpa_codes.h code) picks how the
 *    cache stores an element (kv_t) and KV_LOAD(n, p) loads n consecutive
 *    elements as a float vector (or, for 4, in two steps: KV_RAW4A(p),
 *    where p is aligned to 4 elements, loads them as stored (KV_RAW4) in
 *    one vector load, see IO_RAW4A; KV_RAW4_FLOAT converts). KV_LOADA(n,
 *    p) is KV_LOAD where p is aligned to n elements: one vector load. All
 *    arithmetic is f32.
 *
 *      code  storage     element  X = 16 B / element
 *      F32   f32         float    4
 *      F16   f16         half     8   (vload_half: core OpenCL, no cl_khr_fp16)
 *      BF16  bf16        ushort   8   (upper half of an f32)
 *      E4M3  fp8 e4m3fn  uchar    16  (decoded through f16 bits, times a scale)
 *      E5M2  fp8 e5m2    uchar    16
 *
 *    Storing goes the other way, bit for bit as the host's
 *    clpa_dtype_encode: f32 -> bf16 and fp8 round to nearest even, fp8
 *    divides by a per-tensor scale first (correctly rounded, whatever
 *    accuracy the device's '/' has) and saturates.
 *
 * 2. Paged addressing: CLPA_KV_LAYOUT (a clpa_codes.h layout code) picks
 *    the layout, and key_index / value_index give the element offsets of
 *    a key or value element from where its (block, KV head) starts
 *    (kv_tile). The host's twins are clpa_kv_key_index /
 *    clpa_kv_value_index (include/clpa_layout.h); the CPU reference and
 *    the tests address the cache through them.
 */
#ifndef CLPA_KV_DTYPE
#error "CLPA_KV_DTYPE: the cache's storage dtype, a clpa_codes.h code; required"
#endif
#ifndef CLPA_KV_LAYOUT
#error "CLPA_KV_LAYOUT: the cache's layout, a clpa_codes.h layout code; required"
#endif

/* ---- 1. storage dtypes ---------------------------------------------- */

/* fp8 decoders work on uintN lanes holding one byte each. Both go through
 * f16, whose conversion devices do in hardware: e5m2 is the upper byte of
 * an f16; e4m3's bits, moved into f16's places, give the value / 2^8
 * (subnormals included), and only its NaN (0x7f, 0xff) needs a select. */
#define FP8_E4M3_DECODER(n)                                                                  \
  inline CAT(float, n) CAT(fp8e4m3_to_float, n)(CAT(uint, n) b) {                            \
    CAT(float, n) r = CAT(f16_bits_to_float, n)(                                            \
                          CAT(TO_USHORT, n)(((b & 0x80u) << 8) | ((b & 0x7fu) << 7))) *      \
                      0x1p8f;                                                               \
    return select(r, (CAT(float, n))(NAN), (b & 0x7fu) == 0x7fu);                            \
  }
#define FP8_E5M2_DECODER(n)                                                                  \
  inline CAT(float, n) CAT(fp8e5m2_to_float, n)(CAT(uint, n) b) {                            \
    return CAT(f16_bits_to_float, n)(CAT(TO_USHORT, n)(b << 8));                             \
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

#if CLPA_KV_DTYPE == CLPA_CODE_F32
typedef float kv_t;
#define KV_BYTES 4
#define KV_X 4 /* X as a literal, for pasting into vector names */
#define KV_LOAD(n, p) CAT(VLOAD, n)(p)
#define KV_RAW4 float4
#define KV_STORED float
#define KV_BITS_FLOAT(n, x) (x)
#define KV_IS_FP8 0
#elif CLPA_KV_DTYPE == CLPA_CODE_F16
typedef half kv_t;
#define KV_BYTES 2
#define KV_X 8 /* X as a literal, for pasting into vector names */
#define KV_LOAD(n, p) CAT(VLOADH, n)(p)
#define KV_RAW4 uint2
#define KV_STORED ushort
#define KV_BITS_FLOAT(n, x) CAT(f16_bits_to_float, n)(x)
#define KV_IS_FP8 0
#elif CLPA_KV_DTYPE == CLPA_CODE_BF16
typedef ushort kv_t;
#define KV_BYTES 2
#define KV_X 8 /* X as a literal, for pasting into vector names */
#define KV_LOAD(n, p) CAT(AS_FLOAT, n)(CAT(TO_UINT, n)(CAT(VLOAD, n)(p)) << 16)
#define KV_RAW4 uint2
/* the pairs converted in their 32-bit lanes, not unpacked first */
#define KV_RAW4_FLOAT(x) bf16_bits_to_float4(x)
#define KV_STORED ushort
#define KV_BITS_FLOAT(n, x) CAT(AS_FLOAT, n)(CAT(TO_UINT, n)(x) << 16)
#define KV_IS_FP8 0
#elif CLPA_KV_DTYPE == CLPA_CODE_FP8_E4M3
typedef uchar kv_t;
#define KV_BYTES 1
#define KV_X 16 /* X as a literal, for pasting into vector names */
#define KV_LOAD(n, p) CAT(fp8e4m3_to_float, n)(CAT(TO_UINT, n)(CAT(VLOAD, n)(p)))
#define KV_RAW4 uint
#define KV_STORED uchar
#define KV_BITS_FLOAT(n, x) CAT(fp8e4m3_to_float, n)(CAT(TO_UINT, n)(x))
#define KV_IS_FP8 1
#elif CLPA_KV_DTYPE == CLPA_CODE_FP8_E5M2
typedef uchar kv_t;
#define KV_BYTES 1
#define KV_X 16 /* X as a literal, for pasting into vector names */
#define KV_LOAD(n, p) CAT(fp8e5m2_to_float, n)(CAT(TO_UINT, n)(CAT(VLOAD, n)(p)))
#define KV_RAW4 uint
#define KV_STORED uchar
#define KV_BITS_FLOAT(n, x) CAT(fp8e5m2_to_float, n)(CAT(TO_UINT, n)(x))
#define KV_IS_FP8 1
#else
#error "CLPA_KV_DTYPE must be a storage dtype code of clpa_codes.h"
#endif
/* 4 elements at p (aligned to 4 elements) as stored, in 32-bit lanes:
 * one vector load; KV_RAW4_FLOAT converts them as KV_BITS_FLOAT does. */
#define KV_RAW4A(p) (*(__global const KV_RAW4 *)(p))
#ifndef KV_RAW4_FLOAT
#define KV_RAW4_FLOAT(x) KV_BITS_FLOAT(4, CAT(as_, CAT(KV_STORED, 4))(x))
#endif
/* n elements at p, aligned to n elements, as floatn: one vector load of
 * the stored bits (KV_STORED: the element's bits as an integer type, or
 * float), then KV_BITS_FLOAT. KV_LOAD's vloadn and vload_halfn may only
 * assume an element's alignment, and NVIDIA's compiler loads those
 * element by element (the lanes decode kernel: 80 16-bit loads, 81 32-bit
 * ones for f32, 32 byte loads for fp8, no vector load). */
#define KV_LOADA(n, p) KV_BITS_FLOAT(n, *(__global const CAT(KV_STORED, n) *)(p))
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
 * clpa_dtype_encode computes), for s > 0 finite. OpenCL lets '/' be 2.5 ulp off,
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
#if CLPA_KV_DTYPE == CLPA_CODE_F32
#define KV_STORE(v, p, i, d) ((p)[i] = (v))
#elif CLPA_KV_DTYPE == CLPA_CODE_F16
#define KV_STORE(v, p, i, d) vstore_half_rte((v), (i), (p))
#elif CLPA_KV_DTYPE == CLPA_CODE_BF16
#define KV_STORE(v, p, i, d) ((p)[i] = f32_to_bf16(as_uint(v)))
#else
#define KV_STORE(v, p, i, d) ((p)[i] = f32_to_fp8(div_rn((v), (d)), CLPA_KV_DTYPE == CLPA_CODE_FP8_E5M2))
#endif


/* ---- 2. paged addressing ----------------------------------------------
 * The layouts (element counts, X = 16 bytes of the storage dtype, B =
 * BLOCK_SIZE, H = num_kv_heads, D = HEAD_SIZE):
 *   split-key  key cache    [num_blocks, H, D / X, B, X]
 *              value cache  [num_blocks, H, D, B]
 *   HND        both         [num_blocks, H, B, D]
 *   NHD        both         [num_blocks, B, H, D]
 * A block is block_stride = H * B * D elements in every layout; its KV
 * head h starts head_stride * h after it (split-key, HND: B * D; NHD: D):
 * kv_tile. Tile offsets are 64-bit: block * block_stride passes 2^31
 * elements in large caches. Within a block the offsets are 32-bit (the
 * host refuses HND and NHD blocks of 2^31 elements). */
#if CLPA_KV_LAYOUT == CLPA_CODE_LAYOUT_SPLIT_KEY
#define KV_SPLIT_KEY 1
#elif CLPA_KV_LAYOUT == CLPA_CODE_LAYOUT_HND || CLPA_KV_LAYOUT == CLPA_CODE_LAYOUT_NHD
#define KV_SPLIT_KEY 0
#else
#error "CLPA_KV_LAYOUT must be a layout code of clpa_codes.h"
#endif
inline ulong kv_tile(ulong block, int kv_head, ulong block_stride, ulong head_stride) {
  return block * block_stride + (ulong)kv_head * head_stride;
}
/* head_stride from the shape, for the kernels that take no strides (cache.cl). */
inline ulong kv_head_stride(int head_size, int block_size) {
#if CLPA_KV_LAYOUT == CLPA_CODE_LAYOUT_NHD
  return (ulong)head_size;
#else
  return (ulong)head_size * block_size;
#endif
}
/* The elements between successive tokens of a block, for one KV head and
 * dimension, in the HND and NHD layouts (D, resp. H * D), from the head
 * count and stride every kernel has (not from block_stride, which is the
 * layout's block_pitch where one is set): the `ts` of key_index and
 * value_index. Unused in the split-key layout (0), whose token strides (X
 * for keys, 1 for values) key_index and value_index know. */
inline int kv_token_stride(int num_kv_heads, ulong head_stride, int block_size) {
#if CLPA_KV_LAYOUT == CLPA_CODE_LAYOUT_NHD
  (void)block_size;
  return num_kv_heads * (int)head_stride;
#elif CLPA_KV_LAYOUT == CLPA_CODE_LAYOUT_HND
  return (int)(head_stride / (ulong)block_size);
#else
  return 0;
#endif
}
/* Element `dim` of the key of the token at offset `tok` of its block, from
 * the tile (ts: kv_token_stride). */
inline int key_index(int dim, int tok, int block_size, int ts) {
#if KV_SPLIT_KEY
  /* = ((dim / X) * block_size + tok) * X + dim % X, in the order that
   * keeps the part that depends on dim alone separate: the decode loop's
   * dims are unrolled constants plus a lane offset. */
  return tok * X + (dim / X) * (block_size * X) + dim % X;
#else
  return tok * ts + dim;
#endif
}
/* Element `dim` of the value of the token at offset `tok`, from the tile. */
inline int value_index(int dim, int tok, int block_size, int ts) {
#if KV_SPLIT_KEY
  return dim * block_size + tok;
#else
  return tok * ts + dim;
#endif
}
/* key_index(dim, tok) - key_index(0, tok) for dim a multiple of X: where a
 * token's 16-byte row of dims dim .. dim + X - 1 lies from its first. */
inline int key_dim_offset(int dim, int block_size) {
#if KV_SPLIT_KEY
  return dim * block_size;
#else
  return dim;
#endif
}

/* key_index(X c, tok) / X: the token's 16-byte key row of dimensions
 * X c .. X c + X - 1, in 16-byte units from the tile, for the kernels
 * that load keys 16 bytes at a time (the tensor-core paths). In HND and
 * NHD ts is a multiple of X (head_size is). */
inline int key_row16(int c, int tok, int block_size, int ts) {
#if KV_SPLIT_KEY
  (void)ts;
  return c * block_size + tok;
#else
  (void)block_size;
  return tok * (ts / X) + c;
#endif
}
#if !KV_SPLIT_KEY
/* value_index(X c, tok) / X: the same for values in HND and NHD, where a
 * token's value is a contiguous row as its key is (split-key values have
 * no 16-byte rows of one token). */
inline int value_row16(int c, int tok, int ts) { return tok * (ts / X) + c; }
#endif

/* n values of one dimension for successive tokens (tok .. tok + n - 1 of
 * one block) at p = v_cache + tile + value_index(dim, tok), as a floatn:
 * LOAD(n, p) (KV_LOAD or KV_LOADA) where the layout keeps them contiguous
 * (split-key), else n loads ts elements apart (kv_gather). */
#if KV_SPLIT_KEY
#define KV_TOKENS(LOAD, n, p, ts) LOAD(n, p)
#define KV_RAW4_TOKENS(p, ts) KV_RAW4A(p)
#else
#define KV_TOKENS(LOAD, n, p, ts) CAT(kv_gather, n)((p), (ts))
#define KV_RAW4_TOKENS(p, ts) kv_raw4_gather((p), (ts))
inline float kv_gather1(__global const kv_t *p, int ts) {
  (void)ts;
  return KV_LOAD(1, p);
}
#define KV_GATHER(n)                                                          \
  inline CAT(float, n) CAT(kv_gather, n)(__global const kv_t *p, int ts) {   \
    float v[n];                                                               \
    _Pragma("unroll") for (int i = 0; i < (n); i++) v[i] = KV_LOAD(1, p + i * ts); \
    return CAT(vload, n)(0, v);                                               \
  }
KV_GATHER(2)
KV_GATHER(4)
KV_GATHER(8)
KV_GATHER(16)
/* KV_RAW4_TOKENS: the same for 4 tokens as stored (KV_RAW4A's bits, for
 * KV_RAW4_FLOAT): 4 loads of the stored bits ts apart. */
inline KV_RAW4 kv_raw4_gather(__global const kv_t *p, int ts) {
  __global const KV_STORED *s = (__global const KV_STORED *)p;
  return CAT(as_, KV_RAW4)((CAT(KV_STORED, 4))(s[0], s[ts], s[2 * ts], s[3 * ts]));
}
#endif
