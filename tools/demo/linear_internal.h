/*
 * linear_internal.h — what linear.c (programs, buffers, launches) and linear_table.c (the
 * table of engines and its rules) share: the kernels' row blocks, struct demo_linear, and the
 * rules both call.
 */
#ifndef CLPA_DEMO_LINEAR_INTERNAL_H
#define CLPA_DEMO_LINEAR_INTERNAL_H

#include "linear.h"

/* Row blocks the kernels are built for: the smallest that holds the
 * call's rows, else the largest, several blocks; 8 only with one lane a
 * column group (demo_linear_stream_block). */
static const int32_t row_blocks[] = {1, 4, 8, 16};
#define NBLOCKS (int)(sizeof row_blocks / sizeof row_blocks[0])
/* The index in row_blocks of the streaming kernel's row block for `rows` rows of form w, and its
 * columns a group in *nc (linear.h's demo_linear_stream_shape). */
int demo_linear_stream_block(const demo_linear_tuning *t, demo_wfmt w, int32_t rows,
                             int32_t *nc);
static const int32_t mma_blocks[] = {8, 16, 32, 64}; /* 8 NT */
#define NMMA (int)(sizeof mma_blocks / sizeof mma_blocks[0])
/* the tiled GEMM's programs: MT 2 or 4 (64 or 128 rows a work-group) by KS 2 or 4 (32 or 64 k a
 * stage) with f32 activations, or f16 ones by cp.async (32 k a stage) */
#define NGEMM 2
#define NGEMM_FORMS 3
/* the few-row kernel's programs: NT 1, 2, 4 or 8 row tiles of 8 (8: where the table's gemv_nt
 * allows), f32 or f16 activations */
static const int32_t gemv_blocks[] = {8, 16, 32, 64};
#define NGEMV (int)(sizeof gemv_blocks / sizeof gemv_blocks[0])

enum { NWDT = DEMO_W_COUNT };

struct demo_linear {
  cl_context ctx;
  cl_device_id dev;
  cl_command_queue queue;
  demo_linear_tuning tune;
  int nvidia;         /* inline PTX: the tensor-core kernel runs on the tensor cores */
  int32_t cus;        /* compute units (the split's aim) */
  cl_program prog[NWDT][NBLOCKS], mprog[NWDT][NMMA];
  cl_kernel stream[NWDT][NBLOCKS], widen[NWDT], mma[NWDT][NMMA];
  cl_program hprog[NWDT];
  cl_kernel widen_h[NWDT]; /* ggml's blocks to an f16 copy (gemm_dq_rows) */
  cl_program rprog;
  cl_kernel reduce;   /* demo_linear_split_reduce: the splits added up where the kernel does not */
  /* by rows a work-group, form (f32 A with 32 or 64 k a stage, f16 A) and output (C, SwiGLU's
   * f32 or f16) */
  cl_program gprog[NWDT][NGEMM][NGEMM_FORMS][3];
  cl_kernel gemm[NWDT][NGEMM][NGEMM_FORMS][3];
  /* by activations (f32, f16), output (C, SwiGLU's f32 or f16, RoPE and the cache write) and
   * tiles (1, 2, 4) */
  cl_program vprog[NWDT][NGEMV][2][4][3];
  cl_kernel gemv[NWDT][NGEMV][2][4][3];
  cl_mem wide;        /* CLBlast's f32 copy of one weight */
  size_t wide_elems;
  cl_mem half;        /* the tiled GEMM's f16 copy of one block-form weight (gemm_dq_rows) */
  size_t half_elems;
  cl_mem part, counts; /* the mma kernel's split sums and its tiles' counters (zero between calls) */
  size_t part_elems, count_elems;
  uint64_t enqueues;  /* commands enqueued so far (demo_linear_enqueues) */
};

/* Chunks of 32 a stage of the tensor-core kernel for nt row tiles: its
 * activations' local memory at most 16 KB. */
static inline int demo_linear_mma_stage(int nt) { return nt >= 8 ? 2 : nt >= 4 ? 4 : 8; }

/* Columns a work-group of the tensor-core kernel takes. */
static inline int64_t demo_linear_mma_cols(const demo_linear *l) {
  return 16 * (int64_t)l->tune.mma_ct * l->tune.mwarps;
}

/* The table's entry for dev (device name, then vendor, then type, then the default). */
const demo_linear_tuning *demo_linear_lookup(cl_device_id dev);

/* Whether dev's vendor is NVIDIA (inline PTX: the tensor-core kernels run on tensor cores). */
int demo_linear_is_nvidia(cl_device_id dev);

/* The index of the smallest of count blocks that holds rows, else the last. */
int demo_linear_block_in(const int32_t *blocks, int count, int32_t rows);

/* The tensor-core kernel takes the call: k in chunks of 32, f16 or bf16 weights or ggml's blocks
 * (off NVIDIA it runs emulated, for tests: never picked there). */
int demo_linear_mma_runs(int32_t k, demo_wfmt w);

/* The 16-bit tensor-core kernels (the tiled GEMM and gemv) take the call: k in chunks of 32,
 * f16 or bf16 weights or ggml's blocks (k a whole number of them: linear.c's check holds that). */
int demo_linear_gemm_runs(int32_t k, demo_wfmt w);

/* gemv's warps for nt row tiles and ct column tiles, and its row block (gemv_blocks) for rows. */
int32_t demo_linear_gemv_warps(const demo_linear *l, int32_t nt, int32_t ct);
int demo_linear_gemv_block(const demo_linear *l, int32_t rows);

/* Whether the tiled GEMM takes a call over form d's blocks through an f16 copy of the weight. */
int demo_linear_gemm_dq(const demo_linear *l, int d, int32_t rows);

#endif
