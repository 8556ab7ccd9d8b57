/*
 * linear_kernels.c — the demo's weight-streaming linear kernel, OpenCL C
 * 1.2 source (linear.c builds it once per weight dtype and shape):
 *
 *   C [rows, n] = A [rows, k] . W^T (+ C when ACC),  W [n, k] row-major
 *
 * in the weight's stored dtype (DEMO_WDT 0 f32, 1 f16 through vload_half,
 * 2 bf16 as 16-bit words), A and C f32, f32 accumulation. It reads each
 * weight once per row block (ROWS rows of A, whose work-groups for the
 * same columns run side by side so that the later ones find W in the
 * cache), so for a decode step's few rows it is bound by the weights'
 * bytes, not by arithmetic.
 *
 * Work-group: GROUPS column groups of LANES work-items. Column group g of
 * work-group (b, j) owns columns c0 .. c0 + NC - 1, c0 = (j GROUPS + g) NC,
 * of row block b (rows r0 .. r0 + ROWS - 1, r0 = b ROWS); its LANES
 * work-items split k in 8-element pieces, lane l taking pieces l, l +
 * LANES, ...: each 16-byte (f16) or 32-byte (f32) load of a weight row is
 * one lane's, and the lanes' loads of one row are contiguous. Each lane
 * keeps ROWS x NC sums; where LANES > 1 they meet in local memory
 * (padded rows: no bank conflicts) and each lane finishes some outputs.
 *
 * Grid: (ceil(rows / ROWS) * WG, ceil(n / (GROUPS NC))), WG = GROUPS LANES.
 * k is a multiple of 8 (linear.c checks). Checked against a double
 * reference by tests/test_demo_linear.c.
 */
#include "linear.h"

const char *const demo_linear_source[] = {
    "#ifndef DEMO_WDT\n"
    "#define DEMO_WDT 1 /* 0 f32, 1 f16, 2 bf16 */\n"
    "#endif\n"
    "#ifndef ROWS\n"
    "#define ROWS 4  /* rows of A a work-group takes */\n"
    "#endif\n"
    "#ifndef NC\n"
    "#define NC 4    /* columns (rows of W) a column group takes */\n"
    "#endif\n"
    "#ifndef LANES\n"
    "#define LANES 16 /* work-items of a column group, splitting k */\n"
    "#endif\n"
    "#ifndef GROUPS\n"
    "#define GROUPS 8 /* column groups a work-group */\n"
    "#endif\n"
    "#define WG (GROUPS * LANES)\n"
    "#define OUTS (ROWS * NC)   /* a column group's outputs */\n"
    "#define PAD (LANES + 1)   /* local row of a column group's partial sums */\n"
    "\n"
    "/* A weight row and 8 of its elements from element kk (a multiple of 8):\n"
    " * ROW(W, c, k) its first byte, WLOAD8(row, kk) the floats. */\n"
    "#if DEMO_WDT == 0\n"
    "typedef float wt_t;\n"
    "#define LOAD8(p) vload8(0, p)\n"
    "#elif DEMO_WDT == 1\n"
    "typedef half wt_t;\n"
    "#define LOAD8(p) vload_half8(0, p)\n"
    "#elif DEMO_WDT == 2\n"
    "typedef ushort wt_t;\n"
    "#define LOAD8(p) as_float8(convert_uint8(vload8(0, p)) << 16)\n"
    "#else\n"
    "typedef uchar wt_t; /* ggml's blocks (quant.h), dequantized as ggml does */\n"
    "#endif\n"
    "#ifndef WTILE\n"
    "#error \"WTILE: 1 for 16-bit weights stored as tiles of 16 rows x 32 k (linear.h), else 0\"\n"
    "#endif\n"
    "#if DEMO_WDT < 3\n"
    "/* WAT(row, kk): element kk (a multiple of 8) of a row; WCH: elements a\n"
    " * chunk of 32 k advances. Tiles: row c's 8 elements from k 8j of a tile\n"
    " * at 256 ((c % 16) / 8) + 32 (c % 8) + 8 j, the order gemv's lanes load */\n"
    "#if WTILE\n"
    "#define ROW(W, c, k) \\\n"
    "  ((W) + (size_t)((c) / 16) * 16 * (size_t)(k) + ((c) % 16 / 8) * 256 + ((c) % 8) * 32)\n"
    "#define WAT(row, kk) ((row) + (kk) + 480 * ((kk) / 32))\n"
    "#define WCH 512\n"
    "#else\n"
    "#define ROW(W, c, k) ((W) + (size_t)(c) * (k))\n"
    "#define WAT(row, kk) ((row) + (kk))\n"
    "#define WCH 32\n"
    "#endif\n"
    "#define WLOAD8(row, kk) LOAD8(WAT(row, kk))\n"
    "#else\n",
    /* (a part of its own: C's 4095 characters a literal) */
    "#if DEMO_WDT == 3\n"
    "#define QK 32\n"
    "#define QB 34  /* Q8_0: half d, char qs[32] */\n"
    "#elif DEMO_WDT == 4\n"
    "#define QK 32\n"
    "#define QB 18  /* Q4_0: half d, uchar qs[16] */\n"
    "#elif DEMO_WDT == 5\n"
    "#define QK 256\n"
    "#define QB 144 /* Q4_K: half d, dmin; uchar scales[12], qs[128] */\n"
    "#elif DEMO_WDT == 6\n"
    "#define QK 256\n"
    "#define QB 176 /* Q5_K: half d, dmin; uchar scales[12], qh[32], qs[128] */\n"
    "#else\n"
    "#define QK 256\n"
    "#define QB 210 /* Q6_K: uchar ql[128], qh[64]; char scales[16]; half d */\n"
    "#endif\n"
    "#define ROW(W, c, k) ((W) + (size_t)(c) * (size_t)((k) / QK * QB))\n"
    "#define WLOAD8(row, kk) qload8((row) + (size_t)((kk) / QK) * QB, (kk) % QK)\n"
    "inline float f16_at(__global const uchar *p) { return vload_half(0, (__global const half *)p); }\n"
    "#endif\n",
    /* (a part of its own: C's 4095 characters a literal) */
    "#if DEMO_WDT >= 3\n"
    "#if DEMO_BYTES8\n"
    "/* the 8 bytes from p, 2-byte aligned (Q8_0, Q4_0 and Q6_K blocks are 34, 18 and 210 bytes), by\n"
    " * aligned loads of those 8 bytes alone: two or three instead of eight byte loads */\n"
    "inline uchar8 bytes8(__global const uchar *p) {\n"
    "  if (((ulong)p & 2) == 0) {\n"
    "    __global const uint *w = (__global const uint *)p;\n"
    "    return as_uchar8((uint2)(w[0], w[1]));\n"
    "  }\n"
    "  __global const ushort *h = (__global const ushort *)p;\n"
    "  const uint a = h[0], b = *(__global const uint *)(p + 2), c = h[3];\n"
    "  return as_uchar8((uint2)(a | b << 16, b >> 16 | c << 16));\n"
    "}\n"
    "#define QBYTES8(p) bytes8(p)\n"
    "#else\n"
    "/* a byte a load: faster in the stream kernel, whose neighbouring lanes meet both alignments;\n"
    " * the tiled GEMM as timed before bytes8 (gemv's builds set DEMO_BYTES8): record 0029 */\n"
    "#define QBYTES8(p) vload8(0, p)\n"
    "#endif\n"
    "/* ggml's get_scale_min_k4 (sub-block j's 6-bit scale and min) from a K-quant block's first\n"
    " * 16 bytes in registers: d, dmin, then scale byte i at bit 8 i + 32 */\n"
    "inline uchar2 scale_min_k4_regs(int j, uint4 head) {\n"
    "  const ulong lo = (ulong)head.y | ((ulong)head.z << 32); /* scale bytes 0-7 */\n"
    "  const uchar a = (uchar)(lo >> (8 * (j & 3))), m = (uchar)(lo >> (8 * (j & 3) + 32));\n"
    "  if (j < 4) return (uchar2)(a & 63, m & 63); /* bytes j, j + 4 */\n"
    "  const uchar c = (uchar)(head.w >> (8 * (j - 4))); /* byte j + 4 */\n"
    "  return (uchar2)((c & 0xF) | ((a >> 6) << 4), (c >> 4) | ((m >> 6) << 4));\n"
    "}\n"
    "#if DEMO_WDT == 5 || DEMO_WDT == 6\n"
    "/* Q4_K, Q5_K: sub-block 2 j + hi's 8 quants from its element l (< 32), a byte each (Q5_K's\n"
    " * fifth bit in) */\n"
    "inline uint2 kquant_quants(__global const uchar *b, int j, int l, int hi) {\n"
    "#if DEMO_WDT == 5\n"
    "  const uint2 q = *(__global const uint2 *)(b + 16 + 32 * j + l);\n"
    "  return (hi ? q >> 4 : q) & 0x0f0f0f0fu;\n"
    "#else\n"
    "  const uint2 q = *(__global const uint2 *)(b + 48 + 32 * j + l);\n"
    "  const uint2 h = *(__global const uint2 *)(b + 16 + l);\n"
    "  return ((hi ? q >> 4 : q) & 0x0f0f0f0fu) | (h >> (2 * j + hi) & 0x01010101u) << 4;\n"
    "#endif\n"
    "}\n"
    "#endif\n"
    "/* 8 elements from element e (a multiple of 8) of block b */\n"
    "inline float8 qload8(__global const uchar *b, int e) {\n"
    "#if DEMO_WDT == 3\n"
    "  return f16_at(b) * convert_float8(as_char8(QBYTES8(b + 2 + e)));\n"
    "#elif DEMO_WDT == 4\n"
    "  const uchar8 q = QBYTES8(b + 2 + e % 16);\n"
    "  const uchar8 nib = e < 16 ? (q & (uchar8)(0xF)) : (q >> (uchar8)(4));\n"
    "  return (convert_float8(nib) - 8.0f) * f16_at(b);\n"
    "#elif DEMO_WDT == 5 || DEMO_WDT == 6\n"
    "  /* blocks of 144 and 176 bytes start 16-byte aligned: d, dmin and the 12 scale bytes in one\n"
    "   * load, 8 quants in another */\n"
    "  const int j = e / 64, w = e % 64, l = w % 32, hi = w >= 32;\n"
    "  const uint4 head = *(__global const uint4 *)b;\n"
    "  const uchar2 sm = scale_min_k4_regs(2 * j + hi, head);\n"
    "  const float d1 = vload_half(0, (const __private half *)&head) * sm.x;\n"
    "  const float m1 = vload_half(1, (const __private half *)&head) * sm.y;\n"
    "  return d1 * convert_float8(as_uchar8(kquant_quants(b, j, l, hi))) - m1;\n"
    "#else\n"
    "  const int n = e / 128, w = e % 128, quad = w / 32, l = w % 32;\n"
    "  __global const uchar *ql = b + 64 * n, *qh = b + 128 + 32 * n;\n"
    "  const uchar8 lo = QBYTES8(ql + l + (quad & 1) * 32), h = QBYTES8(qh + l);\n"
    "  const uchar8 low = quad < 2 ? (lo & (uchar8)(0xF)) : (lo >> (uchar8)(4));\n"
    "  const uchar8 q = low | (((h >> (uchar8)(2 * quad)) & (uchar8)(3)) << (uchar8)(4));\n"
    "  const float ds = f16_at(b + 208) * (float)((__global const char *)b)[192 + 8 * n + l / 16 + 2 * quad];\n"
    "  return ds * (convert_float8(q) - 32.0f);\n"
    "#endif\n"
    "}\n"
    "#endif\n"
    "\n"
    "inline float dot8(float8 a, float8 b) {\n"
    "  float8 p = a * b;\n"
    "  return (p.s0 + p.s1) + (p.s2 + p.s3) + ((p.s4 + p.s5) + (p.s6 + p.s7));\n"
    "}\n"
    "\n",
    "__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\n"
    "void demo_linear_stream(__global const float *A, int rows, int k,\n"
    "                        __global const wt_t *W, int n,\n"
    "                        __global float *C, int acc_into) {\n"
    "  const int lid = get_local_id(0), lane = lid % LANES, grp = lid / LANES;\n"
    "  const int r0 = get_group_id(0) * ROWS;\n"
    "  const int c0 = (get_group_id(1) * GROUPS + grp) * NC;\n"
    "#if LANES == 1\n"
    "  /* one work-item a column group (CPUs): vector sums, added up once at the end */\n"
    "  float8 vacc[ROWS][NC];\n"
    "  for (int r = 0; r < ROWS; r++)\n"
    "    for (int c = 0; c < NC; c++) vacc[r][c] = (float8)(0.0f);\n"
    "#define MAC(r, c, a, w) vacc[r][c] = fma(a, w, vacc[r][c])\n"
    "#else\n"
    "  float acc[ROWS][NC];\n"
    "  for (int r = 0; r < ROWS; r++)\n"
    "    for (int c = 0; c < NC; c++) acc[r][c] = 0.0f;\n"
    "#define MAC(r, c, a, w) acc[r][c] += dot8(a, w)\n"
    "#endif\n"
    "  /* columns past n read row 0 (their sums are never written) */\n"
    "  __global const wt_t *wrow[NC];\n"
    "  for (int c = 0; c < NC; c++) wrow[c] = ROW(W, c0 + c < n ? c0 + c : 0, k);\n"
    "  __global const float *arow[ROWS];\n"
    "  for (int r = 0; r < ROWS; r++) arow[r] = A + (size_t)(r0 + r < rows ? r0 + r : r0) * k;\n"
    "  for (int kk = lane * 8; kk < k; kk += LANES * 8) {\n"
    "    float8 w[NC];\n"
    "    for (int c = 0; c < NC; c++) w[c] = WLOAD8(wrow[c], kk);\n"
    "    for (int r = 0; r < ROWS; r++) {\n"
    "      const float8 a = vload8(0, arow[r] + kk);\n"
    "      for (int c = 0; c < NC; c++) MAC(r, c, a, w[c]);\n"
    "    }\n"
    "  }\n"
    "#if LANES > 1\n"
    "  __local float part[GROUPS * OUTS * PAD];\n"
    "  __local float *mine = part + grp * OUTS * PAD;\n"
    "  for (int r = 0; r < ROWS; r++)\n"
    "    for (int c = 0; c < NC; c++) mine[(r * NC + c) * PAD + lane] = acc[r][c];\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  for (int o = lane; o < OUTS; o += LANES) {\n"
    "    float s = 0.0f;\n"
    "    for (int l = 0; l < LANES; l++) s += mine[o * PAD + l];\n"
    "    const int r = r0 + o / NC, c = c0 + o % NC;\n"
    "    if (r < rows && c < n) {\n"
    "      __global float *out = C + (size_t)r * n + c;\n"
    "      *out = acc_into ? *out + s : s;\n"
    "    }\n"
    "  }\n"
    "#else\n"
    "  for (int r = 0; r < ROWS; r++)\n"
    "    for (int c = 0; c < NC; c++)\n"
    "      if (r0 + r < rows && c0 + c < n) {\n"
    "        __global float *out = C + (size_t)(r0 + r) * n + c0 + c;\n"
    "        const float s = dot8(vacc[r][c], (float8)(1.0f));\n"
    "        *out = acc_into ? *out + s : s;\n"
    "      }\n"
    "#endif\n"
    "}\n"
    "\n"
    "/* out [n, k] = W as floats, exact (CLBlast's SGEMM takes f32).\n"
    " * grid (k, n): an element a work-item; ggml's blocks and the tiled forms (k a\n"
    " * multiple of 8): (k / 8, n), 8 elements a work-item (no division by k: a 64-bit one\n"
    " * is a long routine on GPUs) */\n"
    "__kernel void demo_linear_widen(__global const wt_t *W, __global float *out, int k) {\n"
    "  const size_t e = get_global_id(0), c = get_global_id(1);\n"
    "#if DEMO_WDT == 0\n"
    "  out[c * k + e] = W[c * k + e];\n"
    "#elif DEMO_WDT == 1 && !WTILE\n"
    "  out[c * k + e] = vload_half(c * k + e, W);\n"
    "#elif DEMO_WDT == 2 && !WTILE\n"
    "  out[c * k + e] = as_float((uint)W[c * k + e] << 16);\n"
    "#else\n"
    "  vstore8(WLOAD8(ROW(W, c, k), (int)(8 * e)), c * (size_t)(k / 8) + e, out);\n"
    "#endif\n"
    "}\n",
};

/*
 * demo_linear_mma: the same product on tensor cores, mma.sync m16n8k8 on
 * tf32 with W as A (16 columns x 8 k) and the rows of A as B (8 k x 8
 * rows). f16 and bf16 weights are exact in tf32; each activation goes in
 * twice, its tf32 high part and its remainder (2xTF32: within ~2^-21 of
 * f32's products, as clpa's decode_mma does for f32 caches with 3xTF32).
 * On NVIDIA (DEMO_PTX) the instruction is inline PTX; elsewhere the same
 * fragments are multiplied through local memory (slow: for tests only,
 * so that the kernel's bookkeeping runs on PoCL).
 *
 * Work-group: MWARPS warps; warp w owns CT tiles of 16 columns from c0 =
 * (group(1) MWARPS + w) 16 CT, all warps on the row block r0 = 8 NT
 * group(0) (row tile i: rows r0 + 8i .. + 7). Row blocks vary fastest in
 * the grid, so that a column block's work-groups run together and its
 * weights come from the L2 for all but the first. k goes in chunks of 32,
 * by stages of SC chunks: the work-group copies a stage's activations
 * into local memory in fragment order (lane (g, t) of row tile i reads
 * its 8 at once), then each warp runs the stage's chunks on its columns,
 * the next chunk's weights in flight as raw 16-byte loads.
 *
 * The grid's third dimension splits k into ksplit equal runs of chunks
 * (demo_linear_mma_split picks it, to give a small matrix enough
 * work-groups). With ksplit 1 the sums go to C; else each split writes
 * them to P [ksplit, rows, n], and on NVIDIA the last of a block's splits
 * to finish (a counter a block, membar.gl around it, as clpa's decode
 * merge) adds them up in split order into C; elsewhere
 * demo_linear_mma_reduce does, a second launch. The order of the sums is
 * fixed, so results do not change from run to run.
 *
 * Fragments (PTX ISA, m16n8k8 tf32; g = lane / 4, t = lane % 4): A a.x =
 * A[g][t], a.y = A[g+8][t], a.z = A[g][t+4], a.w = A[g+8][t+4]; B b.x =
 * B[t][g], b.y = B[t+4][g]; D .x, .y = D[g][2t, 2t+1], .z, .w = D[g+8][2t,
 * 2t+1]. The dot product does not care in which order k comes, so within
 * a chunk lane (g, t) takes the 8 consecutive k at 8t .. 8t + 7 of its
 * columns g and g + 8 and of its rows (one 16-byte weight load a column),
 * step s of the chunk's four treating k = 8t + 2s as logical t and 8t +
 * 2s + 1 as t + 4 on both sides.
 *
 * Grid: (MWARPS 32 ceil(rows / (8 NT)), ceil(n / (16 CT MWARPS)), ksplit).
 */
const char *const demo_linear_mma_source[] = {
    "#ifndef NT\n"
    "#define NT 8      /* row tiles of 8 */\n"
    "#endif\n"
    "#ifndef MWARPS\n"
    "#define MWARPS 4  /* warps a work-group */\n"
    "#endif\n"
    "#ifndef CT\n"
    "#define CT 2      /* column tiles of 16 a warp */\n"
    "#endif\n"
    "#ifndef SC\n"
    "#define SC 4      /* chunks of 32 a stage */\n"
    "#endif\n"
    "#ifndef DEMO_PTX\n"
    "#define DEMO_PTX 0 /* 1: NVIDIA's inline PTX */\n"
    "#endif\n"
    "\n"
    "#if DEMO_PTX\n"
    "inline float4 mma_tf32(float4 c, uint4 a, uint2 b) {\n"
    "  float d0, d1, d2, d3;\n"
    "  asm(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, \"\n"
    "      \"{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\"\n"
    "      : \"=f\"(d0), \"=f\"(d1), \"=f\"(d2), \"=f\"(d3)\n"
    "      : \"r\"(a.x), \"r\"(a.y), \"r\"(a.z), \"r\"(a.w), \"r\"(b.x), \"r\"(b.y),\n"
    "        \"f\"(c.x), \"f\"(c.y), \"f\"(c.z), \"f\"(c.w));\n"
    "  return (float4)(d0, d1, d2, d3);\n"
    "}\n"
    "#define MMA(c, a, b) mma_tf32(c, a, b)\n"
    "#else\n"
    "/* The warp's fragments through x (32 x 6 words of local memory), each\n"
    " * operand cut to tf32 as the tensor cores read it. Every work-item of\n"
    " * the work-group calls it together (barriers). */\n"
    "inline float tf32(uint v) { return as_float(v & 0xffffe000u); }\n"
    "inline float4 mma_tf32(float4 c, uint4 a, uint2 b, __local uint *x) {\n"
    "  const int lane = get_local_id(0) % 32, g = lane / 4, t = lane % 4;\n"
    "  vstore4(a, 0, x + 6 * lane);\n"
    "  vstore2(b, 0, x + 6 * lane + 4);\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  float d[4] = {c.x, c.y, c.z, c.w};\n"
    "  for (int e = 0; e < 4; e++) {\n"
    "    const int row = g + 8 * (e / 2), col = 2 * t + e % 2;\n"
    "    for (int kk = 0; kk < 8; kk++)\n"
    "      d[e] += tf32(x[6 * (4 * (row % 8) + kk % 4) + row / 8 + 2 * (kk / 4)]) *\n"
    "              tf32(x[6 * (4 * col + kk % 4) + 4 + kk / 4]);\n"
    "  }\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  return (float4)(d[0], d[1], d[2], d[3]);\n"
    "}\n"
    "#define MMA(c, a, b) mma_tf32(c, a, b, xch)\n"
    "#endif\n"
    "\n"
    "/* 8 raw weights (16 bytes) as f32 bits */\n"
    "inline uint8 widen8(uint4 raw) {\n"
    "#if DEMO_WDT == 1\n"
    "  return as_uint8(vload_half8(0, (const __private half *)&raw));\n"
    "#else\n"
    "  return convert_uint8(as_ushort8(raw)) << 16;\n"
    "#endif\n"
    "}\n",
    "__kernel __attribute__((reqd_work_group_size(MWARPS * 32, 1, 1)))\n"
    "void demo_linear_mma(__global const float *A, int rows, int k,\n"
    "                     __global const wt_t *W, int n,\n"
    "                     __global float *C, int acc_into,\n"
    "                     __global float *P, __global volatile int *counts) {\n"
    "  const int lid = get_local_id(0), warp = lid / 32, lane = lid % 32;\n"
    "  const int g = lane / 4, t = lane % 4;\n"
    "  const int r0 = get_group_id(0) * (8 * NT);\n"
    "  const int c0 = (get_group_id(1) * MWARPS + warp) * CT * 16;\n"
    "  const int ksplit = get_num_groups(2), split = get_group_id(2);\n"
    "  const int cps = k / 32 / ksplit, stages = (cps + SC - 1) / SC;\n"
    "  const size_t kbeg = (size_t)32 * split * cps;\n"
    "  __local float As[SC * NT * 32 * 8];\n"
    "#if !DEMO_PTX\n"
    "  __local uint xch_all[MWARPS * 32 * 6];\n"
    "  __local uint *xch = xch_all + warp * 32 * 6;\n"
    "#endif\n"
    "  __global const wt_t *wp[CT][2];\n"
    "  int wok[CT][2];\n"
    "  for (int ct = 0; ct < CT; ct++)\n"
    "    for (int h = 0; h < 2; h++) {\n"
    "      const int col = c0 + 16 * ct + 8 * h + g;\n"
    "      wok[ct][h] = col < n;\n"
    "#if DEMO_WDT < 3\n"
    "      wp[ct][h] = WAT(ROW(W, col < n ? col : 0, k), kbeg + 8 * t);\n"
    "#else\n"
    "      wp[ct][h] = ROW(W, col < n ? col : 0, k); /* ggml's blocks: the row */\n"
    "#endif\n"
    "    }\n"
    "  float4 acc[NT][CT];\n"
    "  for (int i = 0; i < NT; i++)\n"
    "    for (int ct = 0; ct < CT; ct++) acc[i][ct] = (float4)(0.0f);\n"
    "#if DEMO_WDT < 3\n"
    "  uint4 wn[CT][2]; /* the next chunk's weights, raw */\n"
    "#define LOADW(ch) \\\n"
    "  for (int ct = 0; ct < CT; ct++) \\\n"
    "    for (int h = 0; h < 2; h++) \\\n"
    "      wn[ct][h] = wok[ct][h] && (ch) < cps \\\n"
    "          ? vload4(0, (__global const uint *)(wp[ct][h] + WCH * (ch))) : (uint4)(0u)\n"
    "#define WIDEN(ct, h, ch) widen8(wn[ct][h])\n"
    "#else\n"
    "#define LOADW(ch) ((void)0)\n"
    "/* ggml's blocks: this lane's 8 weights of chunk ch decoded at use (WLOAD8)\n"
    " * and rounded to the nearest tf32 (within 2^-11 of each) */\n"
    "#define WIDEN(ct, h, ch) (wok[ct][h] \\\n"
    "    ? (as_uint8(WLOAD8(wp[ct][h], kbeg + 32 * (ch) + 8 * t)) + 0x1000u) & 0xffffe000u \\\n"
    "    : (uint8)(0u))\n"
    "#endif\n"
    "  LOADW(0);\n"
    "\n",
    "  for (int st = 0; st < stages; st++) {\n"
    "    barrier(CLK_LOCAL_MEM_FENCE); /* the last stage's reads are done */\n"
    "    for (int q = lid; q < 8 * NT * SC * 8; q += MWARPS * 32) {\n"
    "      const int r = q / (SC * 8), kk = 4 * (q % (SC * 8)), ch = st * SC + kk / 32;\n"
    "      const int row = r0 + r;\n"
    "      float4 v = (float4)(0.0f);\n"
    "      if (row < rows && ch < cps) v = vload4(0, A + (size_t)row * k + kbeg + 32 * st * SC + kk);\n"
    "      vstore4(v, 0, As + (((kk / 32) * NT + r / 8) * 32 + 4 * (r % 8) + kk % 32 / 8) * 8 + kk % 8);\n"
    "    }\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (int c = 0; c < SC; c++) {\n"
    "      const int ch = st * SC + c;\n"
    "      if (ch >= cps) break; /* the same for the whole work-group */\n"
    "      uint wa[CT][8], wb[CT][8];\n"
    "      for (int ct = 0; ct < CT; ct++) {\n"
    "        const uint8 x0 = WIDEN(ct, 0, ch), x1 = WIDEN(ct, 1, ch);\n"
    "        wa[ct][0] = x0.s0, wa[ct][1] = x0.s1, wa[ct][2] = x0.s2, wa[ct][3] = x0.s3;\n"
    "        wa[ct][4] = x0.s4, wa[ct][5] = x0.s5, wa[ct][6] = x0.s6, wa[ct][7] = x0.s7;\n"
    "        wb[ct][0] = x1.s0, wb[ct][1] = x1.s1, wb[ct][2] = x1.s2, wb[ct][3] = x1.s3;\n"
    "        wb[ct][4] = x1.s4, wb[ct][5] = x1.s5, wb[ct][6] = x1.s6, wb[ct][7] = x1.s7;\n"
    "      }\n"
    "      LOADW(ch + 1);\n"
    "      for (int i = 0; i < NT; i++) {\n"
    "        if (r0 + 8 * i >= rows) break;\n"
    "        const uint8 x = as_uint8(vload8(0, As + ((c * NT + i) * 32 + lane) * 8));\n"
    "        const uint8 hi = (x + 0x1000u) & 0xffffe000u;\n"
    "        const uint8 lo = as_uint8(as_float8(x) - as_float8(hi));\n"
    "        const uint h[8] = {hi.s0, hi.s1, hi.s2, hi.s3, hi.s4, hi.s5, hi.s6, hi.s7};\n"
    "        const uint l[8] = {lo.s0, lo.s1, lo.s2, lo.s3, lo.s4, lo.s5, lo.s6, lo.s7};\n"
    "        for (int ct = 0; ct < CT; ct++)\n"
    "          for (int s = 0; s < 4; s++) {\n"
    "            const uint4 af = (uint4)(wa[ct][2 * s], wb[ct][2 * s], wa[ct][2 * s + 1], wb[ct][2 * s + 1]);\n"
    "            acc[i][ct] = MMA(acc[i][ct], af, (uint2)(l[2 * s], l[2 * s + 1]));\n"
    "            acc[i][ct] = MMA(acc[i][ct], af, (uint2)(h[2 * s], h[2 * s + 1]));\n"
    "          }\n"
    "      }\n"
    "    }\n"
    "  }\n",
    "  /* D: (col g, rows 2t, 2t+1) in .x .y, col g + 8 in .z .w */\n"
    "  for (int i = 0; i < NT; i++)\n"
    "    for (int ct = 0; ct < CT; ct++) {\n"
    "      const float v[4] = {acc[i][ct].x, acc[i][ct].y, acc[i][ct].z, acc[i][ct].w};\n"
    "      for (int e = 0; e < 4; e++) {\n"
    "        const int rr = r0 + 8 * i + 2 * t + e % 2, cc = c0 + 16 * ct + g + 8 * (e / 2);\n"
    "        if (rr < rows && cc < n) {\n"
    "          if (ksplit > 1) {\n"
    "            P[((size_t)split * rows + rr) * n + cc] = v[e];\n"
    "          } else {\n"
    "            __global float *out = C + (size_t)rr * n + cc;\n"
    "            *out = acc_into ? *out + v[e] : v[e];\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "#if DEMO_PTX\n"
    "  __local int last;\n"
    "  if (ksplit > 1 && split_last(counts, &last))\n"
    "    split_add(P, C, rows, n, acc_into, r0, get_group_id(1) * MWARPS * CT * 16, 8 * NT,\n"
    "              MWARPS * CT * 16);\n"
    "#endif\n"
    "}\n",
};

/* out [n, k] = ggml's blocks W as f16, rounded to nearest even as the tiled GEMM rounds them in
 * its loads (pack8: linear_gemm_kernels.c's 16-bit helpers, which this program is built after),
 * one 16-byte store a group of 8. grid (k / (8 WPER), n): work-item i of row c takes the groups
 * i + j k / (8 WPER), j < WPER (a warp's stores contiguous), all loaded before any is stored. */
const char *const demo_linear_widen_h_source =
    "#ifndef WPER\n"
    "#error \"WPER: groups of 8 elements a work-item (1, 2 or 4)\"\n"
    "#endif\n"
    "__kernel void demo_linear_widen_h(__global const wt_t *W, __global uint *out, int k) {\n"
    "  const int per = k / (8 * WPER);\n"
    "  const size_t i = get_global_id(0), c = get_global_id(1);\n"
    "  __global const wt_t *row = ROW(W, c, k);\n"
    "  uint4 v[WPER];\n"
    "  for (int j = 0; j < WPER; j++) v[j] = pack8(WLOAD8(row, 8 * ((int)i + j * per)));\n"
    "  for (int j = 0; j < WPER; j++) vstore4(v[j], c * (size_t)(k / 8) + i + (size_t)(j * per), out);\n"
    "}\n";

/* SwiGLU's activation from a gate and an up sum, act = silu(gate) up, stored as f32 or (f16 1)
 * f16 rounded to nearest even: the epilogue of gemv, the tiled GEMM and the split's reduce
 * kernel. */
const char *const demo_linear_swiglu_source =
    "inline void swiglu_store(__global float *C, size_t i, float gate, float up, int f16) {\n"
    "  const float a = gate / (1.0f + exp(-gate)) * up;\n"
    "  if (f16)\n"
    "    vstore_half_rte(a, i, (__global half *)C);\n"
    "  else\n"
    "    C[i] = a;\n"
    "}\n";

/*
 * k split across work-groups, for the tensor-core kernel above and the
 * tiled GEMM (linear_gemm_kernels.c): the grid's third dimension is the
 * split (ksplit runs of k), each writes its sums to P [ksplit, rows, n],
 * and they are added in split order into C, so that the result does not
 * change from run to run. In the tensor-core kernel on NVIDIA (DEMO_PTX)
 * the last of a tile's splits to finish adds them (split_last: a counter a
 * tile, membar.gl around it, as clpa's decode merge; split_add); elsewhere
 * demo_linear_split_reduce does, a second launch.
 */
const char *const demo_linear_split_source =
    "#ifndef DEMO_PTX\n"
    "#error \"DEMO_PTX: 1 for NVIDIA's inline PTX, else 0\"\n"
    "#endif\n"
    "#if DEMO_PTX\n"
    "/* whether this work-group is the last of its tile's splits (groups (0, 1): a counter each,\n"
    " * zero between calls) to have written P; every item gets the answer through *last */\n"
    "inline int split_last(__global volatile int *counts, __local int *last) {\n"
    "  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);\n"
    "  if (get_local_id(0) == 0) {\n"
    "    __global volatile int *cnt = counts + (size_t)get_group_id(1) * get_num_groups(0) + get_group_id(0);\n"
    "    asm volatile(\"membar.gl;\" ::: \"memory\");\n"
    "    *last = atomic_inc(cnt) == get_num_groups(2) - 1;\n"
    "    if (*last) {\n"
    "      asm volatile(\"membar.gl;\" ::: \"memory\");\n"
    "      atomic_xchg(cnt, 0);\n"
    "    }\n"
    "  }\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  return *last;\n"
    "}\n"
    "\n"
    "/* C (+)= the splits' sums over the tile of nr rows x nc columns from (r0, c0), by the\n"
    " * work-group's items */\n"
    "inline void split_add(__global const float *P, __global float *C, int rows, int n, int acc_into,\n"
    "                      int r0, int c0, int nr, int nc) {\n"
    "  const int ksplit = get_num_groups(2);\n"
    "  for (int o = get_local_id(0); o < nr * nc; o += get_local_size(0)) {\n"
    "    const int rr = r0 + o / nc, cc = c0 + o % nc;\n"
    "    if (rr < rows && cc < n) {\n"
    "      float v = 0.0f;\n"
    "      for (int q = 0; q < ksplit; q++) v += P[((size_t)q * rows + rr) * n + cc];\n"
    "      __global float *out = C + (size_t)rr * n + cc;\n"
    "      *out = acc_into ? *out + v : v;\n"
    "    }\n"
    "  }\n"
    "}\n"
    "#endif\n"
    "\n"
    "/* C (+)= the splits' sums P [ksplit, rows, n], in split order; grid\n"
    " * (rows n). Or (os 1, 2) SwiGLU's activations [rows, n / 2] from them as f32 or f16, where\n"
    " * gate and up columns are interleaved by 8 (gemv's banner); grid (rows n / 2). */\n"
    "__kernel void demo_linear_split_reduce(__global const float *P, int rows, int n, int ksplit,\n"
    "                                       __global float *C, int acc_into, int os) {\n"
    "  const size_t o = get_global_id(0), plane = (size_t)rows * n;\n"
    "  if (os) {\n"
    "    const size_t cc = o % (size_t)(n / 2), at = o / (size_t)(n / 2) * n + 16 * (cc / 8) + cc % 8;\n"
    "    float gate = 0.0f, up = 0.0f;\n"
    "    for (int q = 0; q < ksplit; q++) gate += P[q * plane + at], up += P[q * plane + at + 8];\n"
    "    swiglu_store(C, o, gate, up, os == 2);\n"
    "    return;\n"
    "  }\n"
    "  float v = 0.0f;\n"
    "  for (int q = 0; q < ksplit; q++) v += P[q * plane + o];\n"
    "  C[o] = acc_into ? C[o] + v : v;\n"
    "}\n";

const unsigned demo_linear_mma_source_count =
    (unsigned)(sizeof demo_linear_mma_source / sizeof demo_linear_mma_source[0]);

const unsigned demo_linear_source_count =
    (unsigned)(sizeof demo_linear_source / sizeof demo_linear_source[0]);
