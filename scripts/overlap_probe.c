/*
 * overlap_probe.c — how much of a paged K/V stream and its multiply-adds a
 * CPU OpenCL device (PoCL) can overlap: the ceiling the rows decode
 * (cl/decode_rows.cl) is held against on issue 11's PoCL target, where
 * clpa-bench's roofline floor assumes the two overlap perfectly.
 *
 *   gcc -O2 scripts/overlap_probe.c -o /tmp/overlap_probe -lOpenCL
 *   /tmp/overlap_probe [rounds]
 *
 * The data is S3's (64 sequences x 2048 tokens, 32/8 heads, head 128,
 * block 16, f16): 512 work-items of one (one a sequence and KV head, as
 * the rows decode's grid orders them), each walking 128 key tiles then
 * 128 value tiles of 4 KB through a table of shuffled blocks (a block =
 * the 8 heads' tiles, 32 KB, as the cache layout puts them). Per tile:
 * the tile two ahead prefetched a line per 64 bytes read, one line a KB of
 * the tile four ahead (the rows decode's KPF and KTOUCH). Four kernels a
 * round, wall clock after clFinish:
 *   read       every 16 halves converted and added (memory alone);
 *   read+fma   4 float16 multiply-adds per 16 halves (2 FMAs a byte, the
 *              decode's: 4 query heads, keys and values alike);
 *   fma        the same on 4 tiles that stay in cache (compute alone);
 *   copy       a float4 copy of 256 MiB (clpa-bench's copy ceiling's kernel).
 * Timing only: the sums are written but not checked.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x)                                                               \
  do {                                                                      \
    cl_int e_ = (x);                                                        \
    if (e_ != CL_SUCCESS) {                                                 \
      fprintf(stderr, "%s:%d: %s: OpenCL error %d\n", __FILE__, __LINE__, #x, e_); \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

static const char *source =
    "__kernel __attribute__((reqd_work_group_size(1, 1, 1)))\n"
    "void walk(__global const half *data, __global const int *table, int nt, int fmas, int mask,\n"
    "          __global float *out, float16 q0, float16 q1, float16 q2, float16 q3) {\n"
    "  const int wi = get_global_id(0);\n"
    "  __global const int *tb = table + (size_t)wi * nt;\n"
    "  float16 a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;\n"
    "  for (int i = 0; i < nt; i++) {\n"
    "    __global const half *t = data + (size_t)(tb[i] & mask) * 2048;\n"
    "    __global const uchar *pf = (__global const uchar *)(data + (size_t)(tb[min(i + 2, nt - 1)] & mask) * 2048);\n"
    "    if (i + 4 < nt) {\n"
    "      __global const uchar *p = (__global const uchar *)(data + (size_t)(tb[i + 4] & mask) * 2048);\n"
    "      for (int o = 0; o < 4096; o += 1024) __builtin_prefetch(p + o);\n"
    "    }\n"
    "    if (!fmas) {\n"
    "      for (int v = 0; v < 128; v += 2) {\n"
    "        __builtin_prefetch(pf + v * 32);\n"
    "        a0 += vload_half16(v, t);\n"
    "        b0 += vload_half16(v + 1, t);\n"
    "      }\n"
    "    } else {\n"
    "      for (int v = 0; v < 128; v += 2) {\n"
    "        __builtin_prefetch(pf + v * 32);\n"
    "        float16 x = vload_half16(v, t), y = vload_half16(v + 1, t);\n"
    "        a0 = fma(x, q0, a0); a1 = fma(x, q1, a1); a2 = fma(x, q2, a2); a3 = fma(x, q3, a3);\n"
    "        b0 = fma(y, q0, b0); b1 = fma(y, q1, b1); b2 = fma(y, q2, b2); b3 = fma(y, q3, b3);\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  const float16 s = a0 + a1 + a2 + a3 + b0 + b1 + b2 + b3;\n"
    "  const float8 h = s.lo + s.hi;\n"
    "  const float4 f = h.lo + h.hi;\n"
    "  out[wi] = f.x + f.y + f.z + f.w;\n"
    "}\n"
    "__kernel void copy4(__global const float4 *s, __global float4 *d) {\n"
    "  d[get_global_id(0)] = s[get_global_id(0)];\n"
    "}\n";

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double run(cl_command_queue q, cl_kernel k, size_t global, const size_t *local) {
  const double t0 = now();
  CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, local, 0, NULL, NULL));
  CK(clFinish(q));
  return now() - t0;
}

enum { SEQS = 64, KV_HEADS = 8, BLOCKS = 128 /* a sequence's */, POOL = 8192 /* blocks a cache */ };

int main(int argc, char **argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 8;
  cl_platform_id pl;
  cl_device_id dev;
  cl_int err;
  CK(clGetPlatformIDs(1, &pl, NULL));
  CK(clGetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CK(err);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
  CK(err);
  cl_program p = clCreateProgramWithSource(ctx, 1, &source, NULL, &err);
  CK(err);
  if (clBuildProgram(p, 1, &dev, "", NULL, NULL) != CL_SUCCESS) {
    static char log[1 << 16];
    CK(clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL));
    fprintf(stderr, "%s\n", log);
    return 1;
  }
  /* the caches: K then V, POOL blocks of KV_HEADS tiles of 4 KB each (512 MiB) */
  const size_t tiles = 2u * POOL * KV_HEADS, nwi = SEQS * KV_HEADS;
  const int nt = 2 * BLOCKS;
  cl_mem data = clCreateBuffer(ctx, CL_MEM_READ_WRITE, tiles * 4096, NULL, &err);
  CK(err);
  unsigned short *tile = malloc(4096);
  int *perm = malloc(sizeof(int) * POOL), *tab = malloc(sizeof(int) * nwi * nt);
  if (!tile || !perm || !tab) return 1;
  for (int i = 0; i < 2048; i++) tile[i] = (unsigned short)(0x3c00 ^ (i & 0x3ff)); /* halves near 1 */
  for (size_t t = 0; t < tiles; t++)
    CK(clEnqueueWriteBuffer(q, data, CL_TRUE, t * 4096, 4096, tile, 0, NULL, NULL));
  srand(1);
  for (int i = 0; i < POOL; i++) perm[i] = i;
  for (int i = POOL - 1; i > 0; i--) {
    const int j = rand() % (i + 1), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  for (size_t w = 0; w < nwi; w++)
    for (int i = 0; i < BLOCKS; i++) {
      const int blk = perm[(w / KV_HEADS) * BLOCKS + i], h = (int)(w % KV_HEADS);
      tab[w * nt + i] = blk * KV_HEADS + h;                              /* keys */
      tab[w * nt + BLOCKS + i] = POOL * KV_HEADS + blk * KV_HEADS + h;  /* values */
    }
  cl_mem table = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof(int) * nwi * nt, tab, &err);
  CK(err);
  cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(float) * nwi, NULL, &err);
  CK(err);
  const size_t copy_bytes = 256u << 20;
  cl_mem dst = clCreateBuffer(ctx, CL_MEM_READ_WRITE, copy_bytes, NULL, &err);
  CK(err);
  cl_kernel walk = clCreateKernel(p, "walk", &err);
  CK(err);
  cl_kernel copy = clCreateKernel(p, "copy4", &err);
  CK(err);
  CK(clSetKernelArg(copy, 0, sizeof data, &data));
  CK(clSetKernelArg(copy, 1, sizeof dst, &dst));
  float qv[64];
  for (int i = 0; i < 64; i++) qv[i] = 0.01f * (float)i;
  CK(clSetKernelArg(walk, 0, sizeof data, &data));
  CK(clSetKernelArg(walk, 1, sizeof table, &table));
  CK(clSetKernelArg(walk, 2, sizeof nt, &nt));
  CK(clSetKernelArg(walk, 5, sizeof out, &out));
  for (int i = 0; i < 4; i++) CK(clSetKernelArg(walk, 6 + (cl_uint)i, 16 * sizeof(float), qv + 16 * i));
  const double bytes = (double)nwi * nt * 4096;
  const size_t one = 1;
  printf("# %.0f MB of K/V a call; ms (GB/s of K/V), copy in GB/s read + written\n", bytes / 1e6);
  for (int r = 0; r <= rounds; r++) { /* round 0 warms up (page faults, the build) */
    const struct { int fmas, mask; const char *name; } v[] = {
        {0, -1, "read"}, {1, -1, "read+fma"}, {1, 3, "fma"}};
    double t[3];
    for (int i = 0; i < 3; i++) {
      CK(clSetKernelArg(walk, 3, sizeof(int), &v[i].fmas));
      CK(clSetKernelArg(walk, 4, sizeof(int), &v[i].mask));
      t[i] = run(q, walk, nwi, &one);
    }
    const double tc = run(q, copy, copy_bytes / 16, NULL);
    if (r == 0) continue;
    for (int i = 0; i < 3; i++) printf("%s %.2f (%.1f)  ", v[i].name, t[i] * 1e3, bytes / t[i] / 1e9);
    printf("copy %.1f\n", 2.0 * (double)copy_bytes / tc / 1e9);
  }
  return 0;
}
