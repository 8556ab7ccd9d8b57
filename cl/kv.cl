/*
 * kv.cl — the paged KV cache as kernels see it: how an element is stored
 * (CLPA_KV_DTYPE) and where it lives (paged addressing). Part of every
 * family that reads or writes the cache (decode, cache), after common.cl.
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
 * 2. Paged addressing: the element offsets of a key or value element
 *    inside one (block, KV head) of the cache. The host's twins are
 *    clpa_kv_key_index / clpa_kv_value_index (include/clpa_layout.h); the
 *    CPU reference and the tests address the cache through them.
 */
#ifndef CLPA_KV_DTYPE
#define CLPA_KV_DTYPE CLPA_CODE_F16
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
 * vLLM's layouts (element counts, X = 16 bytes of the storage dtype):
 *   key cache    [num_blocks, num_kv_heads, head_size / X, block_size, X]
 *   value cache  [num_blocks, num_kv_heads, head_size, block_size]
 * so one (block, KV head) is a contiguous tile of head_size * block_size
 * elements in both, head_stride apart, and blocks block_stride =
 * num_kv_heads * head_stride apart. Tile offsets are 64-bit: block *
 * block_stride passes 2^31 elements in large caches. */
inline ulong kv_tile(ulong block, int kv_head, ulong block_stride, ulong head_stride) {
  return block * block_stride + (ulong)kv_head * head_stride;
}
/* Element `dim` of the key of the token at offset `tok` of its block, in a tile. */
inline int key_index(int dim, int tok, int block_size) {
  /* = ((dim / X) * block_size + tok) * X + dim % X, in the order that
   * keeps the part that depends on dim alone separate: the decode loop's
   * dims are unrolled constants plus a lane offset. */
  return tok * X + (dim / X) * (block_size * X) + dim % X;
}
/* Element `dim` of the value of the token at offset `tok`, in a tile. */
inline int value_index(int dim, int tok, int block_size) { return dim * block_size + tok; }

/* The arguments of every decode kernel (decode.cl's clpa_decode_paged,
 * decode_mma.cl's clpa_decode_mma, decode_rows.cl's clpa_decode_rows):
 * lib/decode.c sets them once. part_counts (a counter a work-group row:
 * num_seqs x work-groups a sequence, zero between calls) is v2's in the
 * work-group kernels (decode.cl, decode_mma.cl): the partitions of a row
 * count themselves done there, and the last one merges them
 * (decode_last_part, decode_merge_parts below). */
#define DECODE_ARGS                                                                             \
  __global io_t *out, __global float *lse, __global float *tmp_out, __global float *max_logits, \
      __global float *exp_sums, __global const io_t *q, ulong q_stride,                         \
      __global const kv_t *k_cache, __global const kv_t *v_cache, ulong block_stride,           \
      ulong head_stride, __global const int *block_tables, int max_blocks_per_seq,              \
      __global const int *context_lens, int max_context_len, int num_blocks, int num_heads,     \
      int num_kv_heads, float scale, float k_scale, float v_scale,                              \
      __global const float *k_scales, __global const float *v_scales,                           \
      __global const float *alibi, float soft_cap, int window, __global const float *sinks,     \
      int max_parts, int logits_stride, __global volatile int *faults, __local float *logits, \
      __global volatile int *part_counts

/* ---- v2's partitions merged by the last of a row's work-groups ----
 * (decode.cl, decode_mma.cl, where lib/decode.c builds them with
 * CLPA_MERGE 1; elsewhere, and always on the rows path, reduce.cl's kernel
 * merges after the launch.)
 * Each partition writes its state (max_logits, exp_sums: the natural-log
 * max and sum of its logits, the sink left out) and its normalised output
 * (tmp_out), reduce.cl's layout; decode_last_part counts the work-group
 * done, and the last of the row's to count merges them all
 * (decode_merge_parts). The CUDA threadfence-reduction pattern, which
 * needs ordering between work-groups that OpenCL 1.2 does not give: the
 * partitions' writes released and the last one's reads acquired at device
 * scope around the counter. On NVIDIA inline PTX gives it; elsewhere
 * OpenCL C 2.0's atomics with memory_scope_device (lib/context.c builds
 * these programs with -cl-std=CL2.0 or CL3.0 only where the device has
 * them). The in-launch merge saves the reduce kernel's launch
 * (docs/decisions/0002-decode-v2-merge.md). */
#ifndef CLPA_MERGE
#define CLPA_MERGE 0 /* v2: 1, the last partition of a row merges them; 0, reduce.cl's kernel does */
#endif
#if CLPA_MERGE
#if CLPA_LANES == 3
/* PTX's fence-based release and acquire patterns: membar.gl (fence.sc.gpu)
 * before the counter's relaxed atomic and, in the last work-group, after
 * it. Fences are cumulative: work-item 0's covers the writes the barrier
 * ordered before it. */
inline int count_done(__global volatile int *count, int nparts) {
  asm volatile("membar.gl;" ::: "memory");
  const int last = atomic_inc(count) == nparts - 1;
  if (last) {
    asm volatile("membar.gl;" ::: "memory");
    atomic_xchg(count, 0); /* for the next call: every partition has counted */
  }
  return last;
}
#define COUNTED_FENCE CLK_LOCAL_MEM_FENCE /* bar.sync orders global memory too */
#elif __OPENCL_C_VERSION__ >= 200
/* Acquire-release at device scope: the barrier before it orders the
 * work-group's writes before work-item 0's release, the one after it
 * orders work-item 0's acquire before the others' reads. */
inline int count_done(__global volatile int *count, int nparts) {
  volatile __global atomic_int *c = (volatile __global atomic_int *)count;
  const int last =
      atomic_fetch_add_explicit(c, 1, memory_order_acq_rel, memory_scope_device) == nparts - 1;
  if (last) atomic_store_explicit(c, 0, memory_order_relaxed, memory_scope_device);
  return last;
}
#define COUNTED_FENCE (CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)
#else
#error "CLPA_MERGE needs inline PTX or OpenCL C 2.0's atomics (else reduce.cl merges: CLPA_MERGE 0)"
#endif

/* Whether this work-group is the last of its row's nparts partitions to
 * finish (the same answer for every work-item; 0 where `counts` is 0, and
 * the counter left alone). The row's counter is part_counts' entry for
 * sequence seq and this work-group's head group (get_group_id(0)); the
 * last sets it back to zero for the next call. Every work-item calls it. */
inline int decode_last_part(int counts, __global volatile int *part_counts, int seq,
                            int nparts, __local int *flag) {
  __global volatile int *count = part_counts + (size_t)seq * get_num_groups(0) + get_group_id(0);
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  if (get_local_id(0) == 0) flag[0] = counts && count_done(count, nparts);
  barrier(COUNTED_FENCE);
  return flag[0];
}
#endif

/* The most partitions decode_merge_parts merges in registers, each
 * work-item all of them for its output element. */
#define MERGE_REG 8

/* A partition's weight l e^(m - M) against the row's largest logit M (0
 * for an empty one): softmax_weight over a sum of 1. */
inline float part_weight(float m, float l, float M) {
  return softmax_weight(softmax_state_of(m, l), softmax_state_of(M, 1.0f));
}

/* The merge of a row's nparts partitions (ng heads of head size hs from
 * head head0 of sequence seq) into out and lse, by the work-group of nt
 * work-items that `merging` (where it is 0, only the barriers). No
 * work-item walks the partitions in a chain of dependent loads
 * (docs/decisions/0002-decode-v2-merge.md):
 *   - up to mreg partitions (MERGE_REG in decode_mma.cl, 0 in decode.cl):
 *     each work-item loads every partition's state and output of its
 *     element at once (one round trip to the L2) and merges them in
 *     registers (in decode.cl the registers it holds cost more than it
 *     saves);
 *   - more: each step spread over the work-group:
 *     a. each head's largest logit (the sink's too), ht = nt / ng
 *        work-items a head, each over every ht-th partition, then over the
 *        ht maxima (red_m);
 *     b. the partitions' weights l_p e^(m_p - M), into local memory (wts,
 *        the first wcap a head), and their sums (red_l);
 *     c. each output element, the weighted sum of the partitions'
 *        outputs, its loads independent of one another.
 * Local memory: red_m, red_l nt floats, row_m, row_l ng, wts ng x wcap. */
inline void decode_merge_parts(int merging, int nparts, int seq, int head0, int num_heads,
                               int max_parts, __global const float *max_logits,
                               __global const float *exp_sums, __global const float *tmp_out,
                               __global const float *sinks, __global io_t *out,
                               __global float *lse, const int ng, const int hs, const int nt,
                               __local float *red_m, __local float *red_l, __local float *row_m,
                               __local float *row_l, __local float *wts, const int wcap,
                               const int mreg) {
  const int lid = get_local_id(0);
  for (int i = lid; mreg > 0 && merging && nparts <= mreg && i < ng * hs; i += nt) {
    const int r = i / hs, d = i % hs;
    const size_t sh = (size_t)seq * num_heads + head0 + r;
    float pm[MERGE_REG], pl[MERGE_REG], po[MERGE_REG];
#pragma unroll
    for (int p = 0; p < MERGE_REG; p++) {
      pm[p] = p < nparts ? max_logits[sh * max_parts + p] : -INFINITY;
      pl[p] = p < nparts ? exp_sums[sh * max_parts + p] : 0.0f;
      po[p] = p < nparts ? tmp_out[(sh * max_parts + p) * hs + d] : 0.0f;
    }
    float M = sinks ? sinks[head0 + r] : -INFINITY;
#pragma unroll
    for (int p = 0; p < MERGE_REG; p++) M = fmax(M, pm[p]);
    float sum = sinks ? exp(sinks[head0 + r] - M) : 0.0f, acc = 0.0f;
#pragma unroll
    for (int p = 0; p < MERGE_REG; p++) { /* empty partitions (and p >= nparts) weigh 0 */
      const float w = part_weight(pm[p], pl[p], M);
      sum += w, acc += w * po[p];
    }
    const softmax_state all = softmax_state_of(M, sum);
    IO_STORE(all.l > 0.0f ? acc / all.l : 0.0f, out, sh * hs + d);
    if (d == 0 && lse) lse[sh] = softmax_lse(all);
  }
  const int spread = merging && nparts > mreg, ht = nt / ng;
  const int r8 = lid / ht, k8 = lid % ht;
  const size_t sh8 = (size_t)seq * num_heads + head0 + r8;
  if (spread && lid < ng * ht) {
    float M = -INFINITY;
    for (int p = k8; p < nparts; p += ht) M = fmax(M, max_logits[sh8 * max_parts + p]);
    red_m[lid] = M;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (spread && lid < ng * ht) {
    float M = sinks ? sinks[head0 + r8] : -INFINITY, sum = 0.0f;
    for (int k = 0; k < ht; k++) M = fmax(M, red_m[r8 * ht + k]);
    for (int p = k8; p < nparts; p += ht) {
      const size_t at = sh8 * max_parts + p;
      const float w = part_weight(max_logits[at], exp_sums[at], M);
      if (p < wcap) wts[r8 * wcap + p] = w;
      sum += w;
    }
    red_l[lid] = sum;
    if (k8 == 0) row_m[r8] = M;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (spread && lid < ng) { /* the sink: one more logit, with no value */
    float sum = sinks ? exp(sinks[head0 + lid] - row_m[lid]) : 0.0f;
    for (int k = 0; k < ht; k++) sum += red_l[lid * ht + k];
    row_l[lid] = sum;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int i = lid; spread && i < ng * hs; i += nt) {
    const int r = i / hs, d = i % hs;
    const size_t sh = (size_t)seq * num_heads + head0 + r;
    __global const float *op = tmp_out + sh * max_parts * hs + d;
    float acc = 0.0f; /* empty partitions wrote 0 outputs, and weigh 0 */
    /* Not unrolled: unrolled 8, it cost NVIDIA time at 1-4 partitions
     * (docs/decisions/0002-decode-v2-merge.md). */
    for (int p = 0; p < min(nparts, wcap); p++) acc += wts[r * wcap + p] * op[(size_t)p * hs];
    for (int p = wcap; p < nparts; p++)
      acc += part_weight(max_logits[sh * max_parts + p], exp_sums[sh * max_parts + p], row_m[r]) *
             op[(size_t)p * hs];
    const softmax_state all = softmax_state_of(row_m[r], row_l[r]);
    IO_STORE(all.l > 0.0f ? acc / all.l : 0.0f, out, sh * hs + d);
    if (d == 0 && lse) lse[sh] = softmax_lse(all);
  }
}

/* The rows paths' value vectors (prefill_rows.cl's clpa_prefill_rows,
 * decode_rows.cl): VB tokens of a value row, which the layout keeps
 * contiguous within a block; 8 for blocks of 8, else 16. */
#if defined(CLPA_BLOCK_SIZE) && CLPA_BLOCK_SIZE == 8
#define VB 8
#else
#define VB 16
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
  floatB t[VB];
  for (int i = 0; i < VB; i++) t[i] = a[i];
  for (int n = VB; n > 1; n /= 2)
    for (int i = 0; i < n / 2; i++)
      t[i] = (floatB)(t[2 * i].even, t[2 * i + 1].even) + (floatB)(t[2 * i].odd, t[2 * i + 1].odd);
  return t[0];
}

/* res[d] = the lane sum of acc[d], d < n: VB at a time (lane_sums), the
 * last n % VB (a head size's last few) one at a time. */
inline void row_sums(const floatB *acc, float *res, int n) {
  for (int d = 0; d + VB <= n; d += VB) CAT(vstore, VB)(lane_sums(acc + d), 0, res + d);
#pragma clang loop vectorize(disable)
  for (int d = n / VB * VB; d < n; d++) res[d] = VSUM(VB, acc[d]);
}

/* The rows paths' key vectors (decode_rows.cl, prefill_rows.cl): a
 * 16-element vector of the key layout holds VT tokens x KV_X dimensions
 * (one 16-byte row per token); queries are held repeated VT times, so one
 * multiply-add serves VT tokens. */
#if KV_X == 16 /* tokens per 16-element key vector (a literal: it is pasted into names) */
#define VT 1
#elif KV_X == 8
#define VT 2
#else
#define VT 4
#endif
/* The query chunk at p (KV_X floats), repeated VT times. */
#if KV_X == 16
#define QREP(p) vload16(0, (p))
#elif KV_X == 8
#define QREP(p) ((float16)(vload8(0, (p)), vload8(0, (p))))
#else
#define QREP(p) ((float16)(vload4(0, (p)), vload4(0, (p)), vload4(0, (p)), vload4(0, (p))))
#endif

/* The VT token sums of a 16-lane key product (each token's KV_X lanes are
 * adjacent): pairwise sums of even and odd lanes, log2(KV_X) times. */
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
#if KV_X == 4
  return c;
#else
  const float2 d = c.even + c.odd;
#if KV_X == 8
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
#if KV_X == 4
  return x;
#elif KV_X == 8
  return x.even + x.odd;
#else
  const float8 y = x.even + x.odd;
  return y.even + y.odd;
#endif
}

/* acc[i][r] = the 16-lane products of key vectors o0 + i (i < NV) of the
 * block at kb with the queries q16[r][chunk] (r < NR): every chunk's NV key
 * loads share each query load. pf (bytes, or NULL): each chunk also
 * prefetches its share of the 16 x NV elements there (a step's slice of
 * a later block, spread over the chunks rather than a burst that would
 * fill the core's miss buffers and stall the products behind it). A
 * macro, so the accumulators stay in registers (PoCL keeps arrays passed
 * by pointer in memory). */
#define ROWS_KEY_PRODUCTS(acc, NV, NR, kb, o0, q16, kscale, block_size, pf)                   \
  do {                                                                                        \
    _Pragma("unroll") for (int i_ = 0; i_ < (NV); i_++)                                       \
      _Pragma("unroll") for (int r_ = 0; r_ < (NR); r_++)(acc)[i_][r_] = (float16)(0.0f);     \
    for (int c_ = 0; c_ < HEAD_SIZE / KV_X; c_++) {                                           \
      const int pfb_ = 16 * (NV) * KV_BYTES; /* bytes a chunk prefetches (a power of 2) */    \
      if (pf && pfb_ >= 64)                                                                   \
        _Pragma("unroll") for (int l_ = 0; l_ < pfb_ / 64; l_++)                              \
          ROWS_PREFETCH((pf) + c_ * pfb_ + 64 * l_);                                          \
      else if (pf && c_ * pfb_ % 64 == 0) /* a line every 64 / pfb_ chunks */                 \
        ROWS_PREFETCH((pf) + c_ * pfb_);                                                      \
      float16 kk_[NV];                                                                        \
      _Pragma("unroll") for (int i_ = 0; i_ < (NV); i_++) kk_[i_] =                            \
          KV_LOAD(16, (kb) + key_index(c_ * KV_X, ((o0) + i_) * VT, (block_size))) * (kscale); \
      _Pragma("unroll") for (int r_ = 0; r_ < (NR); r_++) {                                   \
        const float16 qv_ = (q16)[r_][c_];                                                    \
        _Pragma("unroll") for (int i_ = 0; i_ < (NV); i_++)(acc)[i_][r_] =                     \
            fma(kk_[i_], qv_, (acc)[i_][r_]);                                                 \
      }                                                                                       \
    }                                                                                         \
  } while (0)

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
