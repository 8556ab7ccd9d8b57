/*
 * linear_gemv_kernels.c — the demo's tensor-core kernel for few rows (a
 * decode step), OpenCL C 1.2 source (linear.c builds it after
 * linear_kernels.c's first part and demo_linear_mma16_source, once per
 * weight form, row tile count and activation type):
 *
 *   C [rows, n] = A [rows, k] . W^T (+ C when acc_into),  W [n, k] row-major
 *
 * or (OS 1, 2) SwiGLU's activations from that product in its epilogue,
 * act [rows, n / 2] = silu(gate) * up as f32 or f16 (rounded to nearest
 * even), where W's rows are a gate and up projection interleaved by 8:
 * each tile of 16 columns is gate columns 8t .. 8t + 7 then the same of up,
 * so that a lane holds both (columns g and g + 8 of its D);
 * or (OS 3) RoPE and the cache write in its epilogue, where W is the QKV
 * projection (heads query heads, then kvh_n key and as many value heads of
 * hd columns): the query heads rotated into C, the key heads rotated and the
 * value heads copied to each row's slot of the layer's caches (kernels.c's
 * demo_rope_cache, the same formulas: see there).
 *
 * f16 (DEMO_WDT 1) or bf16 (2) weights, or ggml's blocks (3-7, decoded by
 * WLOAD8 and rounded to f16); A f16 in device memory (AH 1, f16 weights:
 * its producer rounded it) or f32 rounded to the weights' type on the way
 * (AH 0: within 2^-11 of each for f16, 2^-8 for bf16); C f32, f32 sums.
 * It is bound by the weights' bytes: each is read once per row block,
 * from device memory straight into registers, 16 bytes a load, no local
 * memory and no barrier until the end.
 *
 * Work-group: KW warps over CT tiles of 16 columns (W's rows c0 .. c0 +
 * 16 CT - 1, c0 = 16 CT group(1)) and 8 NT rows (r0 = 8 NT group(0)); warp
 * w takes the chunks of 32 k from w chunks / KW to (w + 1) chunks / KW
 * (Q4_K and Q5_K: in pairs, the low and high nibbles of the same bytes),
 * loading UN chunks of every tile at once (the last chunk again where
 * fewer are left: no branch between the loads) before it multiplies them,
 * each activation load serving the CT tiles; the warps' sums meet in local
 * memory at the end, added in warp order (the same bits every run).
 *
 * Fragments (PTX ISA, m16n8k16; g = lane / 4, t = lane % 4), W as the A
 * operand (16 columns x 16 k) and 8 rows of A as B (16 k x 8 rows): the
 * dot product does not care in which order k comes, so in a chunk lane
 * (g, t) loads the 8 consecutive k at 8t .. 8t + 7 of columns g and g + 8
 * (w0, w1) and of row g of each row tile (x), and the chunk's two mma take
 * k 8t + {0, 1, 2, 3} and 8t + {4, 5, 6, 7} as logical {2t, 2t + 1, 2t +
 * 8, 2t + 9}: a = (w0.x, w1.x, w0.y, w1.y), b = (x.x, x.y), then the .z .w
 * halves. D: .x .y = (column g, rows 2t, 2t + 1), .z .w = column g + 8.
 * Elsewhere (no DEMO_PTX) each lane computes its D's sums straight from
 * device memory (slow: for tests only, so that the kernel's bookkeeping
 * runs on PoCL).
 *
 * Grid: (32 KW ceil(rows / (8 NT)), ceil(n / (16 CT))); row blocks vary
 * fastest, so that a column tile's blocks run together and read its
 * weights from the L2 after the first. k is a multiple of 32 and of the
 * weights' block (linear.c checks).
 * Checked against a double reference by tests/test_demo_linear.c.
 */
#include "linear.h"

const char *const demo_linear_gemv_source[] = {
    "#ifndef NT\n"
    "#error \"NT: row tiles of 8 a work-group (1, 2, 4 or 8)\"\n"
    "#endif\n"
    "#ifndef KW\n"
    "#error \"KW: warps a work-group, splitting k\"\n"
    "#endif\n"
    "#ifndef CT\n"
    "#error \"CT: tiles of 16 columns a work-group (1, 2 or 4)\"\n"
    "#endif\n"
    "#ifndef UN\n"
    "#error \"UN: chunks of 32 k a warp loads before it multiplies\"\n"
    "#endif\n"
    "#ifndef OS\n"
    "#error \"OS: 0 for C [rows, n] (+ C), 1 or 2 for SwiGLU's activations f32 or f16, 3 RoPE\"\n"
    "#endif\n"
    "#ifndef AH\n"
    "#error \"AH: 1 for f16 activations (f16 weights), 0 for f32 ones\"\n"
    "#endif\n"
    "#if AH\n"
    "typedef ushort at_t;\n"
    "#define ACHUNK(p, kk) vload4(0, (__global const uint *)((p) + (kk)))\n"
    "#else\n"
    "typedef float at_t;\n"
    "#define ACHUNK(p, kk) pack8(vload8(0, (p) + (kk)))\n"
    "#endif\n"
    "/* 8 weights of row p from k index kk as four pairs: f16 and bf16 as\n"
    " * stored, ggml's blocks decoded and rounded to f16 */\n"
    "#if DEMO_WDT < 3 && DEMO_PTX\n"
    "/* each weight is read once: a streaming load, evict-first (record 0036) */\n"
    "inline uint4 wstream(__global const wt_t *p) {\n"
    "  uint4 r;\n"
    "  asm(\"ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];\"\n"
    "      : \"=r\"(r.x), \"=r\"(r.y), \"=r\"(r.z), \"=r\"(r.w) : \"l\"((ulong)p));\n"
    "  return r;\n"
    "}\n"
    "#define WCHUNK(p, kk) wstream(WAT(p, kk))\n"
    "#elif DEMO_WDT < 3\n"
    "#define WCHUNK(p, kk) vload4(0, (__global const uint *)WAT(p, kk))\n"
    "#elif DEMO_WDT == 5 || DEMO_WDT == 6\n"
    "#define WCHUNK(p, kk) kquant_chunk(p, kk)\n"
    "#else\n"
    "#define WCHUNK(p, kk) pack8(WLOAD8(p, kk))\n"
    "#endif\n",
    /* (a part of its own: C's 4095 characters a literal) */
    "#if DEMO_WDT == 5 || DEMO_WDT == 6\n"
    "/* Q4_K and Q5_K: chunks 2 p and 2 p + 1 of a block are the low and high nibbles (and high\n"
    " * bits) of the same bytes under one header, so a lane decodes its 8 weights of both from one\n"
    " * load of each (CG: chunks a weight load gives) */\n"
    "#define CG 2\n"
    "inline float byte_f(uint b) { return as_float(0x4b000000u | b) - 8388608.0f; } /* exact */\n"
    "/* the 4 quants in the bytes of q as d q - m, rounded to two pairs (qload8's operations) */\n"
    "inline uint2 kq4(uint q, float d, float m) {\n"
    "  return (uint2)(pack2(d * byte_f(q & 0xffu) - m, d * byte_f(q >> 8 & 0xffu) - m),\n"
    "                 pack2(d * byte_f(q >> 16 & 0xffu) - m, d * byte_f(q >> 24) - m));\n"
    "}\n"
    "/* the 8 weights from element e and e + 32 of block b (e = 64 j + l, l < 32) */\n"
    "inline void kquant_pair(__global const uchar *b, int e, uint4 *lo, uint4 *hi) {\n"
    "  const int j = e / 64, l = e % 32;\n"
    "  const uint4 head = *(__global const uint4 *)b;\n"
    "  const uchar2 s0 = scale_min_k4_regs(2 * j, head), s1 = scale_min_k4_regs(2 * j + 1, head);\n"
    "  const float d = vload_half(0, (const __private half *)&head);\n"
    "  const float dm = vload_half(1, (const __private half *)&head);\n"
    "  /* the same bytes both times: one load of each */\n"
    "  const uint2 q0 = kquant_quants(b, j, l, 0), q1 = kquant_quants(b, j, l, 1);\n"
    "  const float d0 = d * s0.x, m0 = dm * s0.y, d1 = d * s1.x, m1 = dm * s1.y;\n"
    "  *lo = (uint4)(kq4(q0.x, d0, m0), kq4(q0.y, d0, m0));\n"
    "  *hi = (uint4)(kq4(q1.x, d1, m1), kq4(q1.y, d1, m1));\n"
    "}\n"
    "#define WLOADS(v, p, kk) kquant_pair((p) + (size_t)((kk) / QK) * QB, (kk) % QK, &(v)[0], &(v)[1])\n"
    "/* one chunk's 8 weights from element kk of a row, through kquant_pair */\n"
    "inline uint4 kquant_chunk(__global const uchar *row, int kk) {\n"
    "  uint4 v[2];\n"
    "  const int hi = kk % 64 >= 32;\n"
    "  WLOADS(v, row, kk - 32 * hi);\n"
    "  return v[hi];\n"
    "}\n"
    "#else\n"
    "#define CG 1\n"
    "#define WLOADS(v, p, kk) ((v)[0] = WCHUNK(p, kk))\n"
    "#endif\n"
    "#define UL ((UN + CG - 1) / CG) /* weight loads a warp makes before it multiplies */\n"
    "\n"
    "#if DEMO_PTX\n"
    "/* acc += the chunk's products: w0, w1 this lane's 8 k of columns g and\n"
    " * g + 8, x of row g of the tile */\n"
    "inline float4 chunk_mma(float4 acc, uint4 w0, uint4 w1, uint4 x) {\n"
    "  acc = mma16816(acc, (uint4)(w0.x, w1.x, w0.y, w1.y), x.x, x.y);\n"
    "  return mma16816(acc, (uint4)(w0.z, w1.z, w0.w, w1.w), x.z, x.w);\n"
    "}\n"
    "#else\n"
    "inline float2 unpack2(uint v) {\n"
    "#if DEMO_WDT == 2\n"
    "  return (float2)(as_float(v << 16), as_float(v & 0xffff0000u));\n"
    "#else\n"
    "  return vload_half2(0, (const __private half *)&v);\n"
    "#endif\n"
    "}\n"
    "/* the dot of 32 k from kk of a weight row and an activation row, both as\n"
    " * the tensor cores take them */\n"
    "inline float dot32(__global const wt_t *w, __global const at_t *a, int kk) {\n"
    "  float s = 0.0f;\n"
    "  for (int q = 0; q < 4; q++) {\n"
    "    const uint4 wq = WCHUNK(w, kk + 8 * q), aq = ACHUNK(a, kk + 8 * q);\n"
    "    const uint wv[4] = {wq.x, wq.y, wq.z, wq.w}, av[4] = {aq.x, aq.y, aq.z, aq.w};\n"
    "    for (int j = 0; j < 4; j++) {\n"
    "      const float2 p = unpack2(wv[j]) * unpack2(av[j]);\n"
    "      s += p.x + p.y;\n"
    "    }\n"
    "  }\n"
    "  return s;\n"
    "}\n"
    "#endif\n"
    "\n",
    "__kernel __attribute__((reqd_work_group_size(32 * KW, 1, 1)))\n"
    "void demo_linear_gemv(__global const at_t *A, int rows, int k,\n"
    "                      __global const wt_t *W, int n,\n"
    "                      __global float *C, int acc_into\n"
    "#if OS == 3\n"
    "                      , __global const int *pos, __global const float2 *cs, int hd,\n"
    "                      int heads, int kvh_n, __global const long *slots, long nslots,\n"
    "                      int B, int f16, __global float *kc, __global float *vc, ulong bs,\n"
    "                      ulong hs, ulong kdh,\n"
    "                      ulong kts, ulong vds, ulong vts, int x\n"
    "#endif\n"
    "                      ) {\n"
    "  const int lid = get_local_id(0), warp = lid / 32, lane = lid % 32;\n"
    "  const int g = lane / 4, t = lane % 4;\n"
    "  const int r0 = get_group_id(0) * 8 * NT, c0 = get_group_id(1) * 16 * CT;\n"
    "  const int units = k / (32 * CG), cb = CG * (warp * units / KW), ce = CG * ((warp + 1) * units / KW);\n"
    "  /* columns past n read the last (their sums are never written); rows likewise */\n"
    "  __global const wt_t *wr[CT][2]; /* columns g and g + 8 of each tile */\n"
    "  for (int c = 0; c < CT; c++)\n"
    "    for (int h = 0; h < 2; h++) wr[c][h] = ROW(W, min(c0 + 16 * c + 8 * h + g, n - 1), k);\n"
    "  float4 acc[NT][CT];\n"
    "  for (int i = 0; i < NT; i++)\n"
    "    for (int c = 0; c < CT; c++) acc[i][c] = (float4)(0.0f);\n"
    "#if DEMO_PTX\n"
    "  __global const at_t *ar[NT]; /* row g of each tile */\n"
    "  for (int i = 0; i < NT; i++) ar[i] = A + (size_t)min(r0 + 8 * i + g, rows - 1) * k + 8 * t;\n"
    "  for (int ch = cb; ch < ce; ch += UL * CG) {\n"
    "    uint4 wv[UL][CT][2][CG];\n"
    "    for (int u = 0; u < UL; u++) {\n"
    "      const int kk = 32 * min(ch + CG * u, ce - CG) + 8 * t;\n"
    "      for (int c = 0; c < CT; c++)\n"
    "        for (int h = 0; h < 2; h++) WLOADS(wv[u][c][h], wr[c][h], kk);\n"
    "    }\n"
    "    for (int u = 0; u < UL * CG && ch + u < ce; u++)\n"
    "      for (int i = 0; i < NT; i++) {\n"
    "        const uint4 x = ACHUNK(ar[i], 32 * (ch + u));\n"
    "        for (int c = 0; c < CT; c++)\n"
    "          acc[i][c] = chunk_mma(acc[i][c], wv[u / CG][c][0][u % CG], wv[u / CG][c][1][u % CG], x);\n"
    "      }\n"
    "  }\n"
    "#else\n"
    "  for (int i = 0; i < NT; i++) {\n"
    "    __global const at_t *a0 = A + (size_t)min(r0 + 8 * i + 2 * t, rows - 1) * k;\n"
    "    __global const at_t *a1 = A + (size_t)min(r0 + 8 * i + 2 * t + 1, rows - 1) * k;\n"
    "    for (int c = 0; c < CT; c++)\n"
    "      for (int ch = cb; ch < ce; ch++)\n"
    "        acc[i][c] += (float4)(dot32(wr[c][0], a0, 32 * ch), dot32(wr[c][0], a1, 32 * ch),\n"
    "                              dot32(wr[c][1], a0, 32 * ch), dot32(wr[c][1], a1, 32 * ch));\n"
    "  }\n"
    "#endif\n"
    "  /* the warps' sums, added in warp order; D's element e of row tile i\n"
    "   * and column tile c is column c0 + 16 c + g + 8 (e / 2), row r0 + 8 i\n"
    "   * + 2 t + e % 2 */\n"
    "#define FR (NT * CT * 32) /* a warp's fragments */\n"
    "  __local float4 part[KW * FR];\n"
    "  for (int i = 0; i < NT; i++)\n"
    "    for (int c = 0; c < CT; c++) part[warp * FR + (i * CT + c) * 32 + lane] = acc[i][c];\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n",
    /* the epilogue (its own string: C's 4095 characters a literal) */
    "#if OS == 3\n"
    "  /* the sums over the warps first, in warp 0's fragments; then each pair of\n"
    "   * columns (2j, 2j + 1) of a head in a row, which two lanes' fragments hold:\n"
    "   * row rl and column cw of the work-group's at FRAG_AT in part's floats */\n"
    "  for (int o = lid; o < FR; o += KW * 32) {\n"
    "    float4 s = part[o];\n"
    "    for (int w = 1; w < KW; w++) s += part[w * FR + o];\n"
    "    part[o] = s;\n"
    "  }\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "#define FRAG_AT(rl, cw) \\\n"
    "  (4 * ((((rl) / 8) * CT + (cw) / 16) * 32 + (cw) % 8 * 4 + (rl) % 8 / 2) + \\\n"
    "   (cw) % 16 / 8 * 2 + (rl) % 2)\n"
    "  __local const float *pf = (__local const float *)part;\n"
    "  for (int p = lid; p < 64 * NT * CT; p += KW * 32) {\n"
    "    const int rl = p / (8 * CT), cw = 2 * (p % (8 * CT)), rr = r0 + rl, cc = c0 + cw;\n"
    "    if (rr >= rows || cc >= n) continue;\n"
    "    float2 v = (float2)(pf[FRAG_AT(rl, cw)], pf[FRAG_AT(rl, cw + 1)]);\n"
    "    const int h = cc / hd, j = cc % hd / 2; /* the head (query, key, value) and the pair */\n"
    "    if (h < heads + kvh_n) {\n"
    "      const float2 r = cs[(size_t)pos[rr] * (hd / 2) + j];\n"
    "      v = (float2)(v.x * r.x - v.y * r.y, v.x * r.y + v.y * r.x);\n"
    "    }\n"
    "    if (h < heads) {\n"
    "      vstore2(v, 0, C + (size_t)rr * n + cc);\n"
    "      continue;\n"
    "    }\n"
    "    const long slot = slots[rr];\n"
    "    if (slot < 0 || slot >= nslots) continue;\n"
    "    const int key = h < heads + kvh_n;\n"
    "    const ulong kv = h - heads - (key ? 0 : kvh_n), o = (ulong)(slot % B);\n"
    "    const ulong base = (ulong)(slot / B) * bs + kv * hs, d = 2 * (ulong)j;\n"
    "    const ulong at0 = key ? base + d / x * kdh + o * kts + d % x : base + d * vds + o * vts;\n"
    "    const ulong at1 = key ? base + (d + 1) / x * kdh + o * kts + (d + 1) % x\n"
    "                          : base + (d + 1) * vds + o * vts;\n"
    "    __global float *dst = key ? kc : vc;\n"
    "    if (f16) {\n"
    "      vstore_half_rte(v.x, at0, (__global half *)dst);\n"
    "      vstore_half_rte(v.y, at1, (__global half *)dst);\n"
    "    } else {\n"
    "      dst[at0] = v.x;\n"
    "      dst[at1] = v.y;\n"
    "    }\n"
    "  }\n"
    "  (void)acc_into;\n"
    "#else\n"
    "  for (int o = lid; o < FR; o += KW * 32) {\n"
    "    float4 s = part[o];\n"
    "    for (int w = 1; w < KW; w++) s += part[w * FR + o];\n"
    "    const int i = o / 32 / CT, c = o / 32 % CT, gg = o % 32 / 4, tt = o % 4;\n"
    "    const float v[4] = {s.x, s.y, s.z, s.w};\n"
    "#if OS\n"
    "    /* gate g and up g of the tile's 8 (columns g, g + 8): act column 8 tile + g */\n"
    "    for (int e = 0; e < 2; e++) {\n"
    "      const int rr = r0 + 8 * i + 2 * tt + e, cc = (c0 + 16 * c) / 2 + gg;\n"
    "      if (rr < rows && 2 * cc < n) {\n"
    "        swiglu_store(C, (size_t)rr * (n / 2) + cc, v[e], v[e + 2], OS == 2);\n"
    "      }\n"
    "    }\n"
    "#else\n"
    "    for (int e = 0; e < 4; e++) {\n"
    "      const int rr = r0 + 8 * i + 2 * tt + e % 2, cc = c0 + 16 * c + gg + 8 * (e / 2);\n"
    "      if (rr < rows && cc < n) {\n"
    "        __global float *out = C + (size_t)rr * n + cc;\n"
    "        *out = acc_into ? *out + v[e] : v[e];\n"
    "      }\n"
    "    }\n"
    "#endif\n"
    "  }\n"
    "#endif\n"
    "}\n",
};

const unsigned demo_linear_gemv_source_count =
    (unsigned)(sizeof demo_linear_gemv_source / sizeof demo_linear_gemv_source[0]);
