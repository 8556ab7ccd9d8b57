/*
 * kernels.c — the demo model's own OpenCL C kernels, embedded as source
 * (model.c builds them on the clpa context's device): embedding gather,
 * RMSNorm, RoPE, SwiGLU's silu(gate) * up and the greedy argmax. Attention
 * is clpa's, the linear layers linear.h's.
 *
 * OpenCL C 1.2, f32 arithmetic; f16 weights are read with vload_half, so
 * no cl_khr_fp16 is needed. The source is split into pieces because ISO
 * C only promises string literals of 4095 characters (-Woverlength-strings);
 * clCreateProgramWithSource takes the pieces as they are. reference.h
 * states the formulas (the host reference computes the same in double).
 */
#include "kernels.h"

const char *const demo_kernel_source[] = {
    /* ---------------------------------------------------------------- */
    "#define DEMO_WG 64 /* work-group of the row reductions */\n"
    "\n"
    "/* x [T, hidden] = E[tok[t]]   grid (hidden, T) */\n"
    "__kernel void demo_embed_f32(__global const float *E, __global const int *tok,\n"
    "                             __global float *x, int hidden) {\n"
    "  size_t i = get_global_id(0), t = get_global_id(1);\n"
    "  x[t * hidden + i] = E[(size_t)tok[t] * hidden + i];\n"
    "}\n"
    "__kernel void demo_embed_f16(__global const half *E, __global const int *tok,\n"
    "                             __global float *x, int hidden) {\n"
    "  size_t i = get_global_id(0), t = get_global_id(1);\n"
    "  x[t * hidden + i] = vload_half((size_t)tok[t] * hidden + i, E);\n"
    "}\n"
    "\n",
    /* ---------------------------------------------------------------- */
    "/* y = x * rsqrt(mean(x^2) + eps) * w over one row of n, by one\n"
    " * work-group of DEMO_WG (red: DEMO_WG floats of local memory). */\n"
    "static void demo_rms_row(__global const float *x, __global const float *w,\n"
    "                         __global float *y, int n, float eps, __local float *red) {\n"
    "  int lid = get_local_id(0);\n"
    "  float s = 0.0f;\n"
    "  for (int i = lid; i < n; i += DEMO_WG) s = fma(x[i], x[i], s);\n"
    "  red[lid] = s;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  for (int o = DEMO_WG / 2; o > 0; o >>= 1) {\n"
    "    if (lid < o) red[lid] += red[lid + o];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  float r = 1.0f / sqrt(red[0] / (float)n + eps);\n"
    "  for (int i = lid; i < n; i += DEMO_WG) y[i] = x[i] * r * w[i];\n"
    "}\n"
    "\n"
    "/* y [T, n] = rms(x [T, n]) * w   grid (DEMO_WG * T), work-group DEMO_WG */\n"
    "__kernel __attribute__((reqd_work_group_size(DEMO_WG, 1, 1)))\n"
    "void demo_rmsnorm(__global const float *x, __global const float *w, __global float *y,\n"
    "                  int n, float eps) {\n"
    "  __local float red[DEMO_WG];\n"
    "  size_t r = get_group_id(0);\n"
    "  demo_rms_row(x + r * n, w, y + r * n, n, eps, red);\n"
    "}\n"
    "\n"
    "/* y [R, n] = rms(x [rows[r], n]) * w: the last token of each sequence.\n"
    " * grid (DEMO_WG * R), work-group DEMO_WG */\n"
    "__kernel __attribute__((reqd_work_group_size(DEMO_WG, 1, 1)))\n"
    "void demo_rmsnorm_rows(__global const float *x, __global const int *rows,\n"
    "                       __global const float *w, __global float *y, int n, float eps) {\n"
    "  __local float red[DEMO_WG];\n"
    "  size_t r = get_group_id(0);\n"
    "  demo_rms_row(x + (size_t)rows[r] * n, w, y + r * n, n, eps, red);\n"
    "}\n"
    "\n",
    /* ---------------------------------------------------------------- */
    "/* RoPE in place on the first nheads heads of each row of the fused QKV\n"
    " * buffer [T, row] (the query heads, then the key heads), GGUF/llama.cpp's\n"
    " * interleaved (\"normal\") convention: dimensions (2i, 2i+1) rotate by\n"
    " * pos * theta^(-2i/hd). cs [max_positions, hd/2] holds (cos, sin) of\n"
    " * that angle, computed on the host in double.\n"
    " * grid (hd/2, nheads, T) */\n"
    "__kernel void demo_rope(__global float *qkv, __global const int *pos,\n"
    "                        __global const float2 *cs, int row, int hd) {\n"
    "  size_t i = get_global_id(0), h = get_global_id(1), t = get_global_id(2);\n"
    "  float2 c = cs[(size_t)pos[t] * (hd / 2) + i];\n"
    "  __global float *p = qkv + t * row + h * hd + 2 * i;\n"
    "  float a = p[0], b = p[1];\n"
    "  p[0] = a * c.x - b * c.y;\n"
    "  p[1] = a * c.y + b * c.x;\n"
    "}\n"
    "\n"
    "/* act [T, f] = silu(gu[t, i]) * gu[t, f + i]: gate and up from one fused\n"
    " * GEMM [T, 2f]. silu(g) = g / (1 + exp(-g)).   grid (f, T) */\n"
    "__kernel void demo_silu_mul(__global const float *gu, __global float *act, int f) {\n"
    "  size_t i = get_global_id(0), t = get_global_id(1);\n"
    "  float g = gu[t * 2 * f + i], u = gu[t * 2 * f + f + i];\n"
    "  act[t * f + i] = g / (1.0f + exp(-g)) * u;\n"
    "}\n"
    "\n"
    "/* out[r] = the first index of the largest of logits [r, n] (NaN never\n"
    " * wins; all NaN gives 0).   grid (DEMO_WG * R), work-group DEMO_WG */\n"
    "__kernel __attribute__((reqd_work_group_size(DEMO_WG, 1, 1)))\n"
    "void demo_argmax(__global const float *logits, int n, __global int *out) {\n"
    "  __local float bv[DEMO_WG];\n"
    "  __local int bi[DEMO_WG];\n"
    "  int lid = get_local_id(0);\n"
    "  __global const float *l = logits + get_group_id(0) * (size_t)n;\n"
    "  float best = -INFINITY;\n"
    "  int idx = n;\n"
    "  for (int i = lid; i < n; i += DEMO_WG)\n"
    "    if (l[i] > best || (idx == n && l[i] == best)) { best = l[i]; idx = i; }\n"
    "  bv[lid] = best;\n"
    "  bi[lid] = idx;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  for (int o = DEMO_WG / 2; o > 0; o >>= 1) {\n"
    "    if (lid < o && (bv[lid + o] > bv[lid] ||\n"
    "                    (bv[lid + o] == bv[lid] && bi[lid + o] < bi[lid]))) {\n"
    "      bv[lid] = bv[lid + o];\n"
    "      bi[lid] = bi[lid + o];\n"
    "    }\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  if (lid == 0) out[get_group_id(0)] = bi[0] < n ? bi[0] : 0;\n"
    "}\n",
};

const unsigned demo_kernel_source_count =
    (unsigned)(sizeof demo_kernel_source / sizeof demo_kernel_source[0]);
