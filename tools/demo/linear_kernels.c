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
    "#if DEMO_WDT < 3\n"
    "#define ROW(W, c, k) ((W) + (size_t)(c) * (k))\n"
    "#define WLOAD8(row, kk) LOAD8((row) + (kk))\n"
    "#else\n"
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
    "/* ggml's get_scale_min_k4: sub-block j's 6-bit scale and min */\n"
    "inline uchar2 scale_min_k4(int j, __global const uchar *q) {\n"
    "  return j < 4 ? (uchar2)(q[j] & 63, q[j + 4] & 63)\n"
    "               : (uchar2)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),\n"
    "                          (q[j + 4] >> 4) | ((q[j] >> 6) << 4));\n"
    "}\n"
    "/* 8 elements from element e (a multiple of 8) of block b */\n"
    "inline float8 qload8(__global const uchar *b, int e) {\n"
    "#if DEMO_WDT == 3\n"
    "  return f16_at(b) * convert_float8(vload8(0, (__global const char *)b + 2 + e));\n"
    "#elif DEMO_WDT == 4\n"
    "  const uchar8 q = vload8(0, b + 2 + e % 16);\n"
    "  const uchar8 nib = e < 16 ? (q & (uchar8)(0xF)) : (q >> (uchar8)(4));\n"
    "  return (convert_float8(nib) - 8.0f) * f16_at(b);\n"
    "#elif DEMO_WDT == 5 || DEMO_WDT == 6\n"
    "  const int j = e / 64, w = e % 64, l = w % 32, hi = w >= 32;\n"
    "  const uchar2 sm = scale_min_k4(2 * j + hi, b + 4);\n"
    "  const float d1 = f16_at(b) * sm.x, m1 = f16_at(b + 2) * sm.y;\n"
    "#if DEMO_WDT == 5\n"
    "  const uchar8 q = vload8(0, b + 16 + 32 * j + l);\n"
    "  const uchar8 nib = hi ? (q >> (uchar8)(4)) : (q & (uchar8)(0xF));\n"
    "#else\n"
    "  const uchar8 q = vload8(0, b + 48 + 32 * j + l), h = vload8(0, b + 16 + l);\n"
    "  const uchar u = (uchar)((hi ? 2 : 1) << (2 * j));\n"
    "  const uchar8 nib = (hi ? (q >> (uchar8)(4)) : (q & (uchar8)(0xF))) +\n"
    "                     select((uchar8)(0), (uchar8)(16), (h & (uchar8)(u)) != (uchar8)(0));\n"
    "#endif\n"
    "  return d1 * convert_float8(nib) - m1;\n"
    "#else\n"
    "  const int n = e / 128, w = e % 128, quad = w / 32, l = w % 32;\n"
    "  __global const uchar *ql = b + 64 * n, *qh = b + 128 + 32 * n;\n"
    "  const uchar8 lo = vload8(0, ql + l + (quad & 1) * 32), h = vload8(0, qh + l);\n"
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
    " * grid (n k): an element a work-item; ggml's blocks (k a multiple of 8):\n"
    " * (n k / 8), 8 elements a work-item */\n"
    "__kernel void demo_linear_widen(__global const wt_t *W, __global float *out, int k) {\n"
    "  const size_t i = get_global_id(0);\n"
    "#if DEMO_WDT == 0\n"
    "  out[i] = W[i];\n"
    "#elif DEMO_WDT == 1\n"
    "  out[i] = vload_half(i, W);\n"
    "#elif DEMO_WDT == 2\n"
    "  out[i] = as_float((uint)W[i] << 16);\n"
    "#else\n"
    "  const size_t c = 8 * i / (size_t)k;\n"
    "  vstore8(WLOAD8(ROW(W, c, k), (int)(8 * i % (size_t)k)), i, out);\n"
    "#endif\n"
    "}\n",
};

/*
 * demo_linear_mma (NVIDIA, inline PTX): the same product on tensor cores,
 * mma.sync m16n8k8 on tf32 with W as A (16 columns x 8 k) and the rows of
 * A as B (8 k x 8 rows). f16 and bf16 weights are exact in tf32; each
 * activation goes in twice, its tf32 high part and its remainder (2xTF32:
 * within ~2^-21 of f32's products, as clpa's decode_mma does for f32
 * caches with 3xTF32).
 *
 * Work-group: MWARPS warps on 16 columns (c0 = 16 group), all rows up to
 * 8 NT (row tile i: rows 8i .. 8i + 7), k cut in chunks of 32 that the
 * warps take in turn (warp w: chunks w, w + MWARPS, ...); their sums meet
 * in local memory. Fragments (PTX ISA, m16n8k8 tf32; g = lane / 4, t =
 * lane % 4): A a.x = A[g][t], a.y = A[g+8][t], a.z = A[g][t+4], a.w =
 * A[g+8][t+4]; B b.x = B[t][g], b.y = B[t+4][g]; D .x, .y = D[g][2t, 2t+1],
 * .z, .w = D[g+8][2t, 2t+1]. The dot product does not care in which order
 * k comes, so within a chunk lane (g, t) takes the 8 consecutive k at
 * 8t .. 8t + 7 of its columns g and g + 8 and of its rows (one 16-byte
 * weight load a column), step s of the chunk's four treating k = 8t + 2s
 * as logical t and 8t + 2s + 1 as t + 4 on both sides.
 *
 * Grid: (MWARPS 32 ceil(n / 16), ceil(rows / (8 NT))).
 */
const char *const demo_linear_mma_source[] = {
    "#ifndef NT\n"
    "#define NT 8      /* row tiles of 8 */\n"
    "#endif\n"
    "#ifndef MWARPS\n"
    "#define MWARPS 8  /* warps splitting k */\n"
    "#endif\n"
    "\n"
    "inline float4 mma_tf32(float4 c, uint4 a, uint2 b) {\n"
    "  float d0, d1, d2, d3;\n"
    "  asm(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, \"\n"
    "      \"{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\"\n"
    "      : \"=f\"(d0), \"=f\"(d1), \"=f\"(d2), \"=f\"(d3)\n"
    "      : \"r\"(a.x), \"r\"(a.y), \"r\"(a.z), \"r\"(a.w), \"r\"(b.x), \"r\"(b.y),\n"
    "        \"f\"(c.x), \"f\"(c.y), \"f\"(c.z), \"f\"(c.w));\n"
    "  return (float4)(d0, d1, d2, d3);\n"
    "}\n"
    "\n"
    "/* 8 consecutive weights of a column as f32 bits (0 past n) */\n"
    "inline uint8 wload(__global const wt_t *w, int ok) {\n"
    "  return ok ? as_uint8(LOAD8(w)) : (uint8)(0u);\n"
    "}\n"
    "\n",
    "__kernel __attribute__((reqd_work_group_size(MWARPS * 32, 1, 1)))\n"
    "void demo_linear_mma(__global const float *A, int rows, int k,\n"
    "                     __global const wt_t *W, int n,\n"
    "                     __global float *C, int acc_into) {\n"
    "  const int lid = get_local_id(0), warp = lid / 32, lane = lid % 32;\n"
    "  const int g = lane / 4, t = lane % 4;\n"
    "  const int c0 = get_group_id(0) * 16, r0 = get_group_id(1) * (8 * NT);\n"
    "  const int ca = c0 + g, cb = c0 + g + 8;\n"
    "  __global const wt_t *wa = W + (size_t)(ca < n ? ca : 0) * k + 8 * t;\n"
    "  __global const wt_t *wb = W + (size_t)(cb < n ? cb : 0) * k + 8 * t;\n"
    "  float4 acc[NT];\n"
    "  for (int i = 0; i < NT; i++) acc[i] = (float4)(0.0f);\n"
    "  const int chunks = k / 32;\n"
    "  /* the next chunk's loads in flight while this one is computed (two\n"
    "   * ahead measured slower: notes/linear.md) */\n"
    "  int ch = warp;\n"
    "  uint8 xa = (uint8)(0u), xb = (uint8)(0u);\n"
    "  if (ch < chunks) xa = wload(wa + 32 * ch, ca < n), xb = wload(wb + 32 * ch, cb < n);\n"
    "  for (; ch < chunks; ch += MWARPS) {\n"
    "    const uint8 ya = xa, yb = xb; /* this chunk's; the next one's loads go out now */\n"
    "    if (ch + MWARPS < chunks)\n"
    "      xa = wload(wa + 32 * (ch + MWARPS), ca < n), xb = wload(wb + 32 * (ch + MWARPS), cb < n);\n"
    "    const uint a[8] = {ya.s0, ya.s1, ya.s2, ya.s3, ya.s4, ya.s5, ya.s6, ya.s7};\n"
    "    const uint b[8] = {yb.s0, yb.s1, yb.s2, yb.s3, yb.s4, yb.s5, yb.s6, yb.s7};\n"
    "    for (int i = 0; i < NT; i++) {\n"
    "      const int r = r0 + 8 * i + g;\n"
    "      if (r0 + 8 * i >= rows) break;\n"
    "      uint8 x = (uint8)(0u);\n"
    "      if (r < rows) x = as_uint8(vload8(0, A + (size_t)r * k + 32 * ch + 8 * t));\n"
    "      const uint8 hi = (x + 0x1000u) & 0xffffe000u;\n"
    "      const uint8 lo = as_uint8(as_float8(x) - as_float8(hi));\n"
    "      const uint h[8] = {hi.s0, hi.s1, hi.s2, hi.s3, hi.s4, hi.s5, hi.s6, hi.s7};\n"
    "      const uint l[8] = {lo.s0, lo.s1, lo.s2, lo.s3, lo.s4, lo.s5, lo.s6, lo.s7};\n"
    "      for (int s = 0; s < 4; s++) {\n"
    "        const uint4 af = (uint4)(a[2 * s], b[2 * s], a[2 * s + 1], b[2 * s + 1]);\n"
    "        acc[i] = mma_tf32(acc[i], af, (uint2)(l[2 * s], l[2 * s + 1]));\n"
    "        acc[i] = mma_tf32(acc[i], af, (uint2)(h[2 * s], h[2 * s + 1]));\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  /* the warps' sums: part[warp][i][lane] */\n"
    "  __local float4 part[MWARPS * NT * 32];\n"
    "  for (int i = 0; i < NT; i++) part[(warp * NT + i) * 32 + lane] = acc[i];\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  for (int o = lid; o < NT * 32; o += MWARPS * 32) {\n"
    "    float4 s = (float4)(0.0f);\n"
    "    for (int w = 0; w < MWARPS; w++) s += part[w * NT * 32 + o];\n"
    "    const int i = o / 32, gg = o % 32 / 4, tt = o % 4;\n"
    "    const int r = r0 + 8 * i + 2 * tt, col[2] = {c0 + gg, c0 + gg + 8};\n"
    "    const float v[4] = {s.x, s.y, s.z, s.w}; /* (col, row) (g, 2t) (g, 2t+1) (g+8, 2t) (g+8, 2t+1) */\n"
    "    for (int e = 0; e < 4; e++) {\n"
    "      const int rr = r + e % 2, cc = col[e / 2];\n"
    "      if (rr < rows && cc < n) {\n"
    "        __global float *out = C + (size_t)rr * n + cc;\n"
    "        *out = acc_into ? *out + v[e] : v[e];\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n",
};

const unsigned demo_linear_mma_source_count =
    (unsigned)(sizeof demo_linear_mma_source / sizeof demo_linear_mma_source[0]);

const unsigned demo_linear_source_count =
    (unsigned)(sizeof demo_linear_source / sizeof demo_linear_source[0]);
