/*
 * linear.h — the demo's linear layers: C [rows, n] = A [rows, k] . W^T,
 * or C += that (the residual add), W [n, k] in its stored form (f32, f16
 * or bf16 row-major, f16 or bf16 tiled, or one of ggml's block formats, dequantized in the
 * kernels exactly as ggml does), A and C f32 on the device, f32 sums.
 * Five engines:
 *
 *   stream   linear_kernels.c: reads each weight once per row block, in
 *            its stored form; bound by the weights' bytes for few rows
 *            (a decode step); any OpenCL 1.2 device
 *   mma      linear_kernels.c: the same on NVIDIA's tensor cores (2xTF32,
 *            f16 and bf16 weights, or ggml's blocks decoded and rounded to
 *            tf32; emulated elsewhere, for tests)
 *   gemv     linear_gemv_kernels.c: few rows on NVIDIA's tensor cores, the
 *            activations rounded to the weights' type (f16 or bf16; block
 *            forms decoded to f16), each weight read once from device
 *            memory straight into registers; bound by the weights' bytes
 *            (a decode step); emulated elsewhere, for tests
 *   gemm     linear_gemm_kernels.c: a tiled GEMM on NVIDIA's tensor cores
 *            (f16 or bf16 weights, or ggml's blocks decoded to f16; the
 *            activations rounded to the weights' type: one mma a 16 k); for
 *            many rows (a prefill chunk); emulated elsewhere, for tests
 *   clblast  CLBlast's SGEMM, the weight widened to f32 first where it is
 *            stored narrower (no device here has cl_khr_fp16 for HGEMM);
 *            for many rows (a prefill chunk)
 *
 * The engine for a call comes from the device's entry of a table (device
 * name, then vendor, then type, then the default; linear_table.c holds it
 * and its rules, and names the records of the measurements behind each
 * entry), by the number of rows.
 */
#ifndef CLPA_DEMO_LINEAR_H
#define CLPA_DEMO_LINEAR_H

#include "clpa.h"
#include "wfmt.h"

typedef enum demo_linear_engine {
  DEMO_LINEAR_AUTO = 0,   /* the device's table */
  DEMO_LINEAR_STREAM = 1, /* linear_kernels.c */
  DEMO_LINEAR_CLBLAST = 2, /* CLBlast's SGEMM */
  DEMO_LINEAR_MMA = 3,     /* linear_kernels.c's tensor-core kernel (NVIDIA; emulated elsewhere) */
  DEMO_LINEAR_GEMM = 4,    /* linear_gemm_kernels.c's tiled GEMM (NVIDIA; emulated elsewhere) */
  DEMO_LINEAR_GEMV = 5     /* linear_gemv_kernels.c (NVIDIA; emulated elsewhere) */
} demo_linear_engine;

/* One entry of the table. */
typedef struct demo_linear_tuning {
  const char *match;       /* "vendor:NVIDIA", "type:cpu", "type:gpu", "default" */
  int32_t stream_max_rows; /* the streaming kernel up to this many rows */
  int32_t lanes, groups, nc; /* the streaming kernel's shape (linear_kernels.c) */
  int32_t mma_min_rows, mma_max_rows; /* NVIDIA: the tensor-core kernel for these row counts,
                                         before the streaming kernel (max 0: never) */
  int32_t mwarps;          /* its warps a work-group */
  int32_t mma_ct;          /* its tiles of 16 columns a warp */
  int32_t mma_fill;        /* its split of k across work-groups aims at this many warps a
                              compute unit (0: no split; demo_linear_mma_split) */
  int32_t gemm_min_rows;   /* NVIDIA: the tiled GEMM from this many rows on, before the
                              others (0: never) */
  int32_t gemm_bm;         /* its rows a work-group: 64, 128 or 0 (demo_linear_gemm_rows) */
  int32_t gemm_bk;         /* its k a stage: 32 or 64 (where k is a multiple of 64) */
  int32_t gemm_f16a;       /* 1: with f16 weights it takes f16 activations, copied to local
                              memory by cp.async (demo_linear_takes_f16); 0: f32 ones */
  int32_t gemv_max_rows;   /* NVIDIA: the few-row kernel up to this many rows, before mma
                              and stream (0: never) */
  int32_t gemv_warps;      /* its warps a work-group, splitting k (1 to 16) */
  int32_t gemv_unroll;     /* its chunks of 32 k a warp loads before it multiplies (1 to 8) */
  int32_t gemv_ct;         /* its most tiles of 16 columns a work-group: 1, 2 or 4
                              (demo_linear_gemv_shape) */
  int32_t tiled;           /* 1: f16 and bf16 weights are best held in their tiled forms
                              (the model uploads them so) */
  int32_t gemv_nt;         /* gemv's most row tiles of 8 a work-group: 4 or 8 (more rows take
                              several row blocks, each reading the weights again) */
  int32_t gemm_fill;       /* the tiled GEMM's split of k aims at this many work-groups a
                              compute unit (0 to 16; 0: no split; demo_linear_gemm_split) */
  int32_t gemm_dq_rows;    /* the tiled GEMM on ggml's blocks from this many rows decodes the
                              weight into an f16 copy first (a kernel a call) and multiplies
                              that as f16 weights (0: never; the blocks decoded in its loads) */
  int32_t stream_sums;     /* the streaming kernel with one lane a column group: most float8
                              sums a work-item keeps (row block x nc), so its row blocks are
                              1, 4, 8 or 16 rows up to stream_sums / nc, nc lowered for Q4_K
                              and Q5_K's 16 (0: 1, 4 and 16 rows, as with several lanes;
                              demo_linear_stream_shape) */
} demo_linear_tuning;

typedef struct demo_linear demo_linear;

/* The streaming kernel's shape for a call of `rows` rows of form w: its row block (the rows a
 * work-group takes; more rows take several blocks), the first of 1, 4, (8,) 16 that holds them,
 * and its columns a column group, both capped by stream_sums where one lane holds a column
 * group's sums. */
void demo_linear_stream_shape(const demo_linear_tuning *t, demo_wfmt w, int32_t rows,
                              int32_t *block, int32_t *nc);

/* The engines on a device and queue (the clpa context's), with the
 * table's entry for the device, or `tuning` where it is not NULL (tests
 * and benchmarks try other shapes). Returns CLPA_OK and *out,
 * CLPA_ERR_INVALID_ARG (a shape the kernel cannot take: lanes 1 to 64,
 * groups x lanes 1 to 1024, nc 1 to 16, stream_max_rows >= 0) or
 * CLPA_ERR_OUT_OF_MEMORY. Programs are built on first use. */
clpa_status demo_linear_create(cl_context ctx, cl_device_id dev, cl_command_queue queue,
                               const demo_linear_tuning *tuning, demo_linear **out);
void demo_linear_destroy(demo_linear *l);

/* The device's table entry (its match says which row applied). */
const demo_linear_tuning *demo_linear_tuning_of(const demo_linear *l);

/* Commands enqueued so far by every call on l (kernels, fills, and a
 * CLBlast call as one whatever it runs inside), for the engine's count of
 * ops a step. */
uint64_t demo_linear_enqueues(const demo_linear *l);

/* The engine the table picks for `rows` rows over a k of k, weights in
 * form w: gemm from gemm_min_rows where it runs (NVIDIA, k a multiple of
 * 32, f16 or bf16 weights or block forms), else gemv up to gemv_max_rows
 * where it runs (the same),
 * else mma from mma_min_rows to mma_max_rows where it
 * runs (f16 or bf16; block forms only when forced), else stream up to
 * stream_max_rows (k a multiple of 8), else clblast (block formats
 * widened to f32 first). */
demo_linear_engine demo_linear_pick(const demo_linear *l, int32_t rows, int32_t k, demo_wfmt w);

/* The tensor-core kernel's splits of k for a call (1: none): doubled
 * while the call's warps stay under mma_fill a compute unit, each split
 * a whole number of chunks of 32 and at least two stages. */
int32_t demo_linear_mma_split(const demo_linear *l, int32_t rows, int32_t n, int32_t k);

/* The few-row kernel's tiles of 16 columns a work-group (*ct) and warps
 * (*kw) for a call: the most tiles up to the table's gemv_ct that still
 * give 16 warps a compute unit, and the table's warps, fewer where the
 * warps' sums would pass 32 KB of local memory. */
void demo_linear_gemv_shape(const demo_linear *l, int32_t rows, int32_t n, int32_t *ct, int32_t *kw);

/* The tiled GEMM's k a stage for a call over k, f16 activations (half 1,
 * by cp.async: 32) or f32 ones (the table's gemm_bk where k is a multiple
 * of it, else 32). */
int32_t demo_linear_gemm_stage_k(const demo_linear *l, int32_t k, int half);

/* The tiled GEMM's splits of k for a call (1: none), f16 activations
 * (half 1) or f32 ones: doubled while the call's work-groups stay under
 * gemm_fill a compute unit, up to 16, each split at least 8 stages. */
int32_t demo_linear_gemm_split(const demo_linear *l, int32_t rows, int32_t n, int32_t k, int half);

/* The tiled GEMM's rows a work-group for a call (32 MT: 64 or 128): the
 * table's gemm_bm, else 128 past 64 rows where the call has at least a
 * work-group to two compute units that way. */
int32_t demo_linear_gemm_rows(const demo_linear *l, int32_t rows, int32_t n);

/* NVIDIA: *k receives a new kernel demo_linear_mma_peak (out: a float a
 * work-item, iters), back-to-back mma.sync.m16n8k16 (4096 flops a warp
 * each, 8 an iteration), the tensor cores' ceiling for benchmarks; the
 * caller releases it. CLPA_ERR_UNSUPPORTED elsewhere. */
clpa_status demo_linear_mma_peak_kernel(demo_linear *l, cl_kernel *k);

/* "stream", "mma", "gemm", "gemv", "clblast" or "auto". */
const char *demo_linear_engine_name(demo_linear_engine e);

/* Enqueues C = A . W^T (accumulate 0) or C += A . W^T (1) by engine e
 * (AUTO: demo_linear_pick's); *ev (if not NULL) gets the last command's
 * event. w is W's form. Returns CLPA_OK,
 * CLPA_ERR_INVALID_ARG (shapes, dtype, a NULL buffer; the message says which), CLPA_ERR_BUILD,
 * CLPA_ERR_OPENCL, CLPA_ERR_DEVICE_MEMORY (CLBlast's f32 copy of W) or
 * CLPA_ERR_OUT_OF_RESOURCES. Messages go to demo_last_error(). */
clpa_status demo_linear_run(demo_linear *l, demo_linear_engine e, demo_wfmt w, cl_mem A,
                            cl_mem W, cl_mem C, int32_t rows, int32_t n, int32_t k, int accumulate,
                            cl_event *ev);

/* Whether the call demo_linear_run(l, e, w, ..., rows, n, k, ...) would make
 * runs faster from f16 activations, by demo_linear_run_f16: k a multiple of
 * 32 and engine e (AUTO: demo_linear_pick's) gemv with f16 weights or ggml's
 * blocks, or gemm with the table's gemm_f16a set and f16 weights (or ggml's
 * blocks from the table's gemm_dq_rows, through an f16 copy). The caller
 * then writes A as f16 (rounded to nearest even: what those kernels do to f32
 * activations on the way in, so the results are the same bits). */
int demo_linear_takes_f16(const demo_linear *l, demo_linear_engine e, int32_t rows, int32_t k,
                          demo_wfmt w);

/* demo_linear_run with A [rows, k] f16 in device memory, where
 * demo_linear_takes_f16 holds (else CLPA_ERR_INVALID_ARG): the tiled GEMM
 * copies both operands to local memory by cp.async, NVIDIA's asynchronous
 * copies, stages ahead of its tensor cores; gemv reads half the bytes of
 * activations and rounds none. */
clpa_status demo_linear_run_f16(demo_linear *l, demo_linear_engine e, demo_wfmt w, cl_mem A,
                                cl_mem W, cl_mem C, int32_t rows, int32_t n, int32_t k,
                                int accumulate, cl_event *ev);

/* Whether demo_linear_run_swiglu_out takes the call: engine e (AUTO:
 * demo_linear_pick's) is gemv or the tiled GEMM for it (f16, bf16 or
 * block-form weights, k a multiple of 32) and n a multiple of 16. */
int demo_linear_takes_swiglu_out(const demo_linear *l, demo_linear_engine e, int32_t rows,
                                 int32_t n, int32_t k, demo_wfmt w);

/* act [rows, n / 2] = silu(G) * U of G U = A . W^T, where W [n, k] is a gate
 * and up projection with its rows interleaved by 8 (each 16 rows: 8 of the
 * gate's, then the same 8 of the up's; act's column 8 t + j is the gate's
 * row 8 t + j): SwiGLU made in the epilogue of gemv or the tiled GEMM (or
 * of its split's reduce kernel), as f32 or, where act_half
 * is set, f16 rounded to nearest even; A f16 where a_half is set (as
 * demo_linear_run_f16 takes it). Where demo_linear_takes_swiglu_out holds
 * (and demo_linear_takes_f16 for a_half), else CLPA_ERR_INVALID_ARG. */
clpa_status demo_linear_run_swiglu_out(demo_linear *l, demo_linear_engine e, demo_wfmt w, cl_mem A,
                                       int a_half, cl_mem W, cl_mem act, int act_half,
                                       int32_t rows, int32_t n, int32_t k, cl_event *ev);

/* Where demo_linear_run_qkv_rope's epilogue puts a step's rows (kernels.c's
 * demo_rope_cache does the same as a launch of its own): RoPE's (cos, sin)
 * table and each row's position; each row's slot and the layer's caches,
 * with the layout's strides in elements in the form one formula for every
 * layout takes them (model_step.c holds it to clpa_layout.h's):
 *   key   blk * bs + kvh * hs + (d / x) * kdh + o * kts + d % x
 *   value blk * bs + kvh * hs + d * vds + o * vts,  (blk, o) = (slot / B, slot % B) */
typedef struct demo_qkv_rope {
  cl_mem pos;   /* int [rows]: each row's position */
  cl_mem cs;    /* float2 [positions, hd / 2]: (cos, sin) of each position and pair */
  cl_mem slots; /* long [rows]: each row's slot; < 0 or >= nslots: not written */
  cl_mem kc, vc; /* the layer's key and value caches: f32, or f16 where f16 is set */
  cl_int hd, heads, kv_heads; /* head size (even); query heads, then key and value heads */
  cl_int B, f16, x;           /* tokens a block; f16 caches; elements a 16-byte key chunk */
  cl_long nslots;
  cl_ulong bs, hs, kdh, kts, vds, vts;
} demo_qkv_rope;

/* Whether demo_linear_run_qkv_rope takes the call: engine e (AUTO:
 * demo_linear_pick's) is gemv for it (f16, bf16 or block-form weights, k a
 * multiple of 32). */
int demo_linear_takes_qkv_rope(const demo_linear *l, demo_linear_engine e, int32_t rows, int32_t k,
                               demo_wfmt w);

/* The QKV projection with RoPE and the cache write in gemv's epilogue: of
 * A . W^T [rows, n], n = (heads + 2 kv_heads) hd, the query heads rotated
 * pair by pair (dims 2j, 2j + 1 by cs[pos[row]][j]) into qkv's columns
 * [0, heads hd) (its other columns are not written); the key heads rotated
 * and the value heads copied to each row's slot of r's caches, f16 rounded
 * to nearest even. A f16 where a_half is set (as demo_linear_run_f16 takes
 * it). Where demo_linear_takes_qkv_rope holds (and demo_linear_takes_f16 for
 * a_half) and r's shape matches n, else CLPA_ERR_INVALID_ARG. */
clpa_status demo_linear_run_qkv_rope(demo_linear *l, demo_linear_engine e, demo_wfmt w, cl_mem A,
                                     int a_half, cl_mem W, cl_mem qkv, int32_t rows, int32_t n,
                                     int32_t k, const demo_qkv_rope *r, cl_event *ev);

/* Enqueues out [n, k] = W as floats (f32, exactly what the kernels
 * compute with: ggml's block forms decoded as ggml does), the step
 * CLBlast's route takes first. Returns as demo_linear_run. */
clpa_status demo_linear_dequantize(demo_linear *l, demo_wfmt w, cl_mem W, cl_mem out, int32_t n,
                                   int32_t k);

/* Enqueues out [n, k] = W as f16 (half [n k]): ggml's blocks decoded as above and rounded to
 * nearest even, the copy the tiled GEMM multiplies from the table's gemm_dq_rows; *ev (if not
 * NULL) gets its event. Returns as demo_linear_run (CLPA_ERR_INVALID_ARG for a form that is
 * not a block form). */
clpa_status demo_linear_dequantize_f16(demo_linear *l, demo_wfmt w, cl_mem W, cl_mem out,
                                       int32_t n, int32_t k, cl_event *ev);

/* The kernels' source (linear_kernels.c): the streaming kernel and the
 * widening one; the tensor-core kernel, built after them and the split of
 * k (which also stands alone, for the reduce kernel the tiled GEMM's
 * splits take). */
extern const char *const demo_linear_source[];
extern const unsigned demo_linear_source_count;
extern const char *const demo_linear_mma_source[];
extern const unsigned demo_linear_mma_source_count;
extern const char *const demo_linear_split_source;
/* SwiGLU's store (linear_kernels.c), before every source but the streaming kernel's. */
extern const char *const demo_linear_swiglu_source;
/* What the 16-bit tensor-core kernels share (linear_gemm_kernels.c), then
 * the tiled GEMM and the few-row kernel (linear_gemv_kernels.c), each built
 * after the first DEMO_LINEAR_TYPE_PARTS parts of demo_linear_source (the
 * weights' types and ggml's blocks) and that. */
#define DEMO_LINEAR_TYPE_PARTS 3u
extern const char *const demo_linear_mma16_source;
extern const char *const demo_linear_gemm_source[];
extern const unsigned demo_linear_gemm_source_count;
extern const char *const demo_linear_gemv_source[];
extern const unsigned demo_linear_gemv_source_count;
/* ggml's blocks to an f16 copy (the tiled GEMM's from gemm_dq_rows), after the same and the
 * 16-bit helpers (linear_kernels.c) */
extern const char *const demo_linear_widen_h_source;

#endif
