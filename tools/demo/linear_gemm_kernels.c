/*
 * linear_gemm_kernels.c — the demo's tiled tensor-core GEMM for many rows
 * (a prefill chunk), OpenCL C 1.2 source (linear.c builds it once per
 * weight dtype and row tile):
 *
 *   C [rows, n] = A [rows, k] . W^T (+ C when acc_into),  W [n, k] row-major
 *
 * f16 (DEMO_WDT 1) or bf16 (2) weights, or ggml's blocks (3-7, decoded by
 * linear_kernels.c's first part, which the program starts with, and
 * rounded to f16), A and C f32, f32 sums. Unlike the streaming kernels it
 * rounds the activations to the weights' type on the way into local
 * memory (f16: within 2^-11 of each, bf16: 2^-8), so that one
 * mma.sync.m16n8k16 takes 16 k at a time; f16 and bf16 weights are exact.
 *
 * Work-group: 8 warps over a tile of BM = 32 MT rows x 128 columns; warp
 * w takes rows 16 MT (w / 4) .. + 16 MT (MT tiles of 16) and columns 32 (w
 * % 4) .. + 32 (4 tiles of 8). k goes in stages of BK = 16 KS: the
 * work-group loads the next stage's activations (f32, rounded) and
 * weights into registers while the warps multiply the current one out of
 * local memory (KS 2: two buffers, one barrier a stage; KS 4: one buffer,
 * two barriers). Local rows are BK / 2 words of data and 4 of padding, so
 * ldmatrix's eight 16-byte rows fall in distinct banks.
 *
 * Fragments (PTX ISA, m16n8k16; g = lane / 4, t = lane % 4): A (rows x k)
 * a.x = A[g][2t, 2t+1], a.y = A[g+8][2t..], a.z = A[g][2t+8..], a.w =
 * A[g+8][2t+8..]: one ldmatrix.x4, lanes 0-15 addressing rows 0-15 at
 * the k-step's first word, lanes 16-31 four words on. B (k x columns) is
 * W's rows: b.x = W[g][2t, 2t+1], b.y = W[g][2t+8..], so one ldmatrix.x4
 * over 8 columns' 32 k (lanes 8i .. 8i+7 at words 4i) gives both k-steps'
 * b. D: .x, .y = D[g][2t, 2t+1], .z, .w = D[g+8][2t, 2t+1].
 *
 * On NVIDIA (DEMO_PTX) the loads and products are inline PTX (sm_80 and
 * later); elsewhere each lane computes its fragments' sums straight from
 * local memory (slow: for tests only, so that the kernel's bookkeeping
 * runs on PoCL).
 *
 * Grid: (256 ceil(rows / BM), ceil(n / 128)); row tiles vary fastest, so
 * that a column tile's work-groups run together and its weights come from
 * the L2 for all but the first. k is a multiple of BK and of the weights'
 * block (linear.c checks).
 * Checked against a double reference by tests/test_demo_linear.c.
 */
#include "linear.h"

const char *const demo_linear_gemm_source[] = {
    "#ifndef DEMO_WDT\n"
    "#error \"DEMO_WDT: 1 f16 or 2 bf16 weights\"\n"
    "#endif\n"
    "#ifndef MT\n"
    "#error \"MT: row tiles of 16 a warp (2 or 4)\"\n"
    "#endif\n"
    "#ifndef KS\n"
    "#error \"KS: k-steps of 16 a stage (2 or 4)\"\n"
    "#endif\n"
    "#ifndef DEMO_PTX\n"
    "#error \"DEMO_PTX: 1 for NVIDIA's inline PTX, else 0\"\n"
    "#endif\n"
    "#define BM (32 * MT)    /* rows a work-group */\n"
    "#define BN 128          /* columns a work-group */\n"
    "#define BK (16 * KS)    /* k a stage */\n"
    "#define LDS (8 * KS + 4) /* words a local row: BK / 2 + 4 of padding */\n"
    "#define NBUF (KS == 2 ? 2 : 1) /* local buffers: two stages fit in 48 KB at KS 2 */\n"
    "#define ABUF (BM * LDS)\n"
    "#define WBUF (BN * LDS)\n"
    "#define AL (BM * BK / 4 / 256) /* float4 of A a work-item loads a stage */\n"
    "#define WL (BN * BK / 8 / 256) /* uint4 of W */\n"
    "#if DEMO_WDT == 2\n"
    "#define MMA_T \"bf16\"\n"
    "#else\n"
    "#define MMA_T \"f16\" /* f16 weights, and ggml's blocks decoded to f16 */\n"
    "#endif\n"
    "\n"
    "/* two floats as a pair of the weights' type, lo in the low half, rounded to nearest even */\n"
    "inline uint pack2(float lo, float hi) {\n"
    "#if DEMO_PTX\n"
    "  uint r;\n"
    "  asm(\"cvt.rn.\" MMA_T \"x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n"
    "  return r;\n"
    "#elif DEMO_WDT != 2\n"
    "  ushort h[2];\n"
    "  vstore_half_rte(lo, 0, (__private half *)h);\n"
    "  vstore_half_rte(hi, 1, (__private half *)h);\n"
    "  return (uint)h[0] | ((uint)h[1] << 16);\n"
    "#else\n"
    "  const uint a = as_uint(lo), b = as_uint(hi);\n"
    "  return ((a + 0x7fffu + ((a >> 16) & 1u)) >> 16) |\n"
    "         (((b + 0x7fffu + ((b >> 16) & 1u)) >> 16) << 16);\n"
    "#endif\n"
    "}\n"
    "\n"
    "#if DEMO_PTX\n"
    "inline uint4 ldsm4(__local const uint *p) {\n"
    "  uint4 r;\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\"\n"
    "               : \"=r\"(r.x), \"=r\"(r.y), \"=r\"(r.z), \"=r\"(r.w) : \"r\"((uint)(size_t)p));\n"
    "  return r;\n"
    "}\n"
    "inline float4 mma16816(float4 c, uint4 a, uint b0, uint b1) {\n"
    "  float4 d;\n"
    "  asm(\"mma.sync.aligned.m16n8k16.row.col.f32.\" MMA_T \".\" MMA_T \".f32 {%0, %1, %2, %3}, \"\n"
    "      \"{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\"\n"
    "      : \"=f\"(d.x), \"=f\"(d.y), \"=f\"(d.z), \"=f\"(d.w)\n"
    "      : \"r\"(a.x), \"r\"(a.y), \"r\"(a.z), \"r\"(a.w), \"r\"(b0), \"r\"(b1),\n"
    "        \"f\"(c.x), \"f\"(c.y), \"f\"(c.z), \"f\"(c.w));\n"
    "  return d;\n"
    "}\n"
    "#else\n"
    "/* element e of a local row of pairs */\n"
    "inline float elem(__local const uint *row, int e) {\n"
    "#if DEMO_WDT != 2\n"
    "  return vload_half(e, (__local const half *)row);\n"
    "#else\n"
    "  return as_float((uint)((__local const ushort *)row)[e] << 16);\n"
    "#endif\n"
    "}\n"
    "/* D [16 x 8] += the 16 k from element e0 of A's rows a0 .. a0 + 15 and\n"
    " * W's rows w0 .. w0 + 7, this lane's four sums (the banner's D) */\n"
    "inline float4 mma_emulated(float4 c, __local const uint *As, int a0, __local const uint *Ws,\n"
    "                           int w0, int e0) {\n"
    "  const int lane = get_local_id(0) % 32, g = lane / 4, t = lane % 4;\n"
    "  float d[4] = {c.x, c.y, c.z, c.w};\n"
    "  for (int q = 0; q < 4; q++) {\n"
    "    __local const uint *ar = As + (a0 + g + 8 * (q / 2)) * LDS;\n"
    "    __local const uint *wr = Ws + (w0 + 2 * t + q % 2) * LDS;\n"
    "    for (int e = e0; e < e0 + 16; e++) d[q] += elem(ar, e) * elem(wr, e);\n"
    "  }\n"
    "  return (float4)(d[0], d[1], d[2], d[3]);\n"
    "}\n"
    "#endif\n"
    "\n"
    "/* 8 weights of slot i from k index kk as four pairs: f16 and bf16 as stored, ggml's\n"
    " * blocks decoded (linear_kernels.c's WLOAD8) and rounded to f16 */\n"
    "#if DEMO_WDT < 3\n"
    "#define LOADW(i, kk) vload4(0, (__global const uint *)(wrow[i] + (kk) + woff[i]))\n"
    "#else\n"
    "inline uint4 pack8(float8 w) {\n"
    "  return (uint4)(pack2(w.s0, w.s1), pack2(w.s2, w.s3), pack2(w.s4, w.s5), pack2(w.s6, w.s7));\n"
    "}\n"
    "#define LOADW(i, kk) pack8(WLOAD8(wrow[i], (kk) + woff[i]))\n"
    "#endif\n"
    "\n",
    "__kernel __attribute__((reqd_work_group_size(256, 1, 1)))\n"
    "void demo_linear_gemm(__global const float *A, int rows, int k,\n"
    "                      __global const wt_t *W, int n,\n"
    "                      __global float *C, int acc_into) {\n"
    "  const int lid = get_local_id(0), warp = lid / 32, lane = lid % 32;\n"
    "  const int g = lane / 4, t = lane % 4;\n"
    "  const int r0 = get_group_id(0) * BM, c0 = get_group_id(1) * BN;\n"
    "  const int wr = 16 * MT * (warp / 4), wc = 32 * (warp % 4); /* the warp's, in the tile */\n"
    "  __local uint As[NBUF * ABUF] __attribute__((aligned(16)));\n"
    "  __local uint Ws[NBUF * WBUF] __attribute__((aligned(16)));\n"
    "  /* this work-item's loads: AL float4 of A (row q / (BK / 4), floats 4 (q % (BK / 4)))\n"
    "   * and WL uint4 of W (row q / (BK / 8), words 4 (q % (BK / 8))), q = lid + 256 i */\n"
    "  __global const float *ag[AL];\n"
    "  __global const wt_t *wrow[WL]; /* the column's row of W (NULL past n) */\n"
    "  int woff[WL];\n"
    "  for (int i = 0; i < AL; i++) {\n"
    "    const int q = lid + 256 * i, row = r0 + q / (BK / 4);\n"
    "    ag[i] = row < rows ? A + (size_t)row * k + 4 * (q % (BK / 4)) : NULL;\n"
    "  }\n"
    "  for (int i = 0; i < WL; i++) {\n"
    "    const int q = lid + 256 * i, col = c0 + q / (BK / 8);\n"
    "    wrow[i] = col < n ? ROW(W, col, k) : NULL;\n"
    "    woff[i] = 8 * (q % (BK / 8));\n"
    "  }\n"
    "  float4 ra[AL];\n"
    "  uint4 rw[WL];\n"
    "#define LOAD(kk) \\\n"
    "  for (int i = 0; i < AL; i++) ra[i] = ag[i] ? vload4(0, ag[i] + (kk)) : (float4)(0.0f); \\\n"
    "  for (int i = 0; i < WL; i++) rw[i] = wrow[i] ? LOADW(i, kk) : (uint4)(0u)\n"
    "#define STORE(buf) \\\n"
    "  for (int i = 0; i < AL; i++) { \\\n"
    "    const int q = lid + 256 * i; \\\n"
    "    vstore2((uint2)(pack2(ra[i].x, ra[i].y), pack2(ra[i].z, ra[i].w)), 0, \\\n"
    "            As + (buf) * ABUF + q / (BK / 4) * LDS + 2 * (q % (BK / 4))); \\\n"
    "  } \\\n"
    "  for (int i = 0; i < WL; i++) { \\\n"
    "    const int q = lid + 256 * i; \\\n"
    "    vstore4(rw[i], 0, Ws + (buf) * WBUF + q / (BK / 8) * LDS + 4 * (q % (BK / 8))); \\\n"
    "  }\n"
    "  float4 acc[MT][4];\n"
    "  for (int m = 0; m < MT; m++)\n"
    "    for (int j = 0; j < 4; j++) acc[m][j] = (float4)(0.0f);\n"
    "  const int stages = k / BK;\n"
    "  LOAD(0);\n"
    "  STORE(0);\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n",
    "  for (int s = 0; s < stages; s++) {\n"
    "    const int buf = NBUF == 2 ? s & 1 : 0;\n"
    "    if (s + 1 < stages) {\n"
    "      LOAD(BK * (s + 1));\n"
    "    }\n"
    "    __local const uint *as = As + buf * ABUF, *ws = Ws + buf * WBUF;\n"
    "    for (int h = 0; h < KS / 2; h++) { /* 32 k at a time */\n"
    "#if DEMO_PTX\n"
    "      uint4 b[4]; /* columns wc + 8 j: .x .y k-step 0, .z .w k-step 1 */\n"
    "      for (int j = 0; j < 4; j++)\n"
    "        b[j] = ldsm4(ws + (wc + 8 * j + lane % 8) * LDS + 16 * h + 4 * (lane / 8));\n"
    "      for (int ks = 0; ks < 2; ks++)\n"
    "        for (int m = 0; m < MT; m++) {\n"
    "          const uint4 a = ldsm4(as + (wr + 16 * m + lane % 16) * LDS + 16 * h + 8 * ks + 4 * (lane / 16));\n"
    "          for (int j = 0; j < 4; j++)\n"
    "            acc[m][j] = mma16816(acc[m][j], a, ks ? b[j].z : b[j].x, ks ? b[j].w : b[j].y);\n"
    "        }\n"
    "#else\n"
    "      for (int ks = 0; ks < 2; ks++)\n"
    "        for (int m = 0; m < MT; m++)\n"
    "          for (int j = 0; j < 4; j++)\n"
    "            acc[m][j] = mma_emulated(acc[m][j], as, wr + 16 * m, ws, wc + 8 * j, 32 * h + 16 * ks);\n"
    "#endif\n"
    "    }\n"
    "#if NBUF == 1\n"
    "    barrier(CLK_LOCAL_MEM_FENCE); /* every warp is done with the stage */\n"
    "#endif\n"
    "    if (s + 1 < stages) {\n"
    "      STORE(buf ^ (NBUF - 1));\n"
    "    }\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n",
    "  for (int m = 0; m < MT; m++)\n"
    "    for (int j = 0; j < 4; j++) {\n"
    "      const float v[4] = {acc[m][j].x, acc[m][j].y, acc[m][j].z, acc[m][j].w};\n"
    "      for (int e = 0; e < 4; e++) {\n"
    "        const int rr = r0 + wr + 16 * m + g + 8 * (e / 2), cc = c0 + wc + 8 * j + 2 * t + e % 2;\n"
    "        if (rr < rows && cc < n) {\n"
    "          __global float *out = C + (size_t)rr * n + cc;\n"
    "          *out = acc_into ? *out + v[e] : v[e];\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "}\n"
    "\n"
    "#if DEMO_PTX\n"
    "/* The tensor cores' ceiling for clpa-bench linear: each warp issues\n"
    " * 8 independent chains of mma.sync.m16n8k16 (4096 flops each), iters\n"
    " * times; out keeps the sums live. */\n"
    "__kernel void demo_linear_mma_peak(__global float *out, int iters) {\n"
    "  const uint4 a = (uint4)(0x3c003c00u ^ get_local_id(0));\n"
    "  float4 acc[8];\n"
    "  for (int c = 0; c < 8; c++) acc[c] = (float4)(0.0f);\n"
    "  for (int i = 0; i < iters; i++)\n"
    "    for (int c = 0; c < 8; c++) acc[c] = mma16816(acc[c], a, a.x + c, a.y);\n"
    "  float4 s = (float4)(0.0f);\n"
    "  for (int c = 0; c < 8; c++) s += acc[c];\n"
    "  out[get_global_id(0)] = s.x + s.y + s.z + s.w;\n"
    "}\n"
    "#endif\n",
};

const unsigned demo_linear_gemm_source_count =
    (unsigned)(sizeof demo_linear_gemm_source / sizeof demo_linear_gemm_source[0]);
