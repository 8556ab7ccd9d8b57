/*
 * io.cl — the query and output dtypes: CLPA_IO_DTYPE (a clpa_codes.h
 * code) picks io_t, how a kernel stores a query or an output element, and
 * IO_LOAD / IO_STORE / IO_LOADN convert to and from f32: f32, f16
 * (through vload_half / vstore_half_rte: no cl_khr_fp16 needed) or bf16
 * (16-bit words, rounded to nearest even as the host's encoder). Part of
 * every family with queries or outputs (every one but cache, blocks and
 * smoke; lib/kernels.c), after common.cl.
 */
#ifndef CLPA_IO_DTYPE
#error "CLPA_IO_DTYPE: the query and output dtype, a clpa_codes.h code; required"
#endif
#if CLPA_IO_DTYPE == CLPA_CODE_F32
typedef float io_t;
#define IO_LOAD(p, i) ((p)[i])
#define IO_STORE(v, p, i) ((p)[i] = (v))
#elif CLPA_IO_DTYPE == CLPA_CODE_F16
typedef half io_t;
#define IO_LOAD(p, i) vload_half((i), (p))
#define IO_STORE(v, p, i) vstore_half_rte((v), (i), (p))
#elif CLPA_IO_DTYPE == CLPA_CODE_BF16
typedef ushort io_t;
#define IO_LOAD(p, i) as_float((uint)(p)[i] << 16)
#define IO_STORE(v, p, i) ((p)[i] = f32_to_bf16(as_uint(v)))
#else
#error "CLPA_IO_DTYPE must be CLPA_CODE_F32, CLPA_CODE_F16 or CLPA_CODE_BF16"
#endif
/* n (2, 4, 8 or 16) consecutive elements from element i of p, as floatn.
 * Or, for 4 of them, in two steps: IO_RAW4A / IO_RAW4U load them as
 * stored, in 32-bit lanes (IO_RAW4: float4, or uint2 holding 16-bit
 * elements), and IO_RAW4_FLOAT converts, so that a copy can load early
 * and convert late. IO_RAW4A where p + i is aligned to 4 elements: one
 * vector load (vloadn and vload_halfn may only assume an element's
 * alignment, and NVIDIA's compiler then loads element by element). */
#if CLPA_IO_DTYPE == CLPA_CODE_F32
#define IO_LOADN(n, p, i) CAT(VLOAD, n)((p) + (i))
#define IO_RAW4 float4
#define IO_RAW4U(p, i) vload4(0, (p) + (i))
#define IO_RAW4_FLOAT(x) (x)
#elif CLPA_IO_DTYPE == CLPA_CODE_F16
#define IO_LOADN(n, p, i) CAT(VLOADH, n)((p) + (i))
#define IO_RAW4 uint2
#define IO_RAW4U(p, i) as_uint2(vload4(0, (__global const ushort *)((p) + (i))))
#define IO_RAW4_FLOAT(x) f16_bits_to_float4(as_ushort4(x))
#else
#define IO_LOADN(n, p, i) CAT(AS_FLOAT, n)(CAT(TO_UINT, n)(CAT(VLOAD, n)((p) + (i))) << 16)
#define IO_RAW4 uint2
#define IO_RAW4U(p, i) as_uint2(vload4(0, (p) + (i)))
#define IO_RAW4_FLOAT(x) bf16_bits_to_float4(x)
#endif
#define IO_RAW4A(p, i) (*(__global const IO_RAW4 *)((p) + (i)))
