/*
 * prefill_probe.c — runs the PTX of cl/prefill_mma.cl's clpa_prefill_mma,
 * as NVIDIA's OpenCL compiled it (the program binary our disk cache keeps;
 * scripts/ptx_audit.py extracts it), through the CUDA driver API, so that
 * Nsight Compute, which does not see OpenCL kernels, can profile it. On
 * the lent GPU machine only (it has the CUDA toolkit):
 *
 *   gcc -O2 -I/usr/local/cuda/include scripts/prefill_probe.c -o /tmp/probe \
 *       -L/usr/local/cuda/lib64/stubs -lcuda
 *   sed -i 's/%envreg[0-9]*;/0;/' FILE.ptx
 *   /tmp/probe FILE.ptx [batch new_len cached rows]
 *
 * (NVIDIA's OpenCL adds %envreg0-2, the enqueue's group offsets, to
 * %ctaid; a CUDA launch leaves them undefined, hence the sed.)
 * The arguments are PREFILL_ARGS (cl/prefill.c) for a causal f16 call,
 * 32/8 heads, head 128 (PROBE_HEAD=N: N), block 16, random data and a
 * shuffled block table, the work list ordered as lib/prefill.c orders it
 * on GPUs. rows must be the ROWS the PTX was built with (64 or 128), since
 * the launch shape is NUM_THREADS = 2 * rows. Prints the time per call
 * (CUDA events, median of 9 of 5 calls each) and TFLOP/s as clpa-bench
 * prefill counts them.
 * Timing and profiling only: the output is not checked here.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                 \
  do {                                                                        \
    CUresult r_ = (x);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                 \
      const char *s_ = NULL;                                                  \
      cuGetErrorString(r_, &s_);                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?"); \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

typedef struct tile {
  int64_t end;
  int seq, r0;
} tile;

static int longest_first(const void *a, const void *b) {
  const tile *x = a, *y = b;
  if (x->end != y->end) return x->end > y->end ? -1 : 1;
  if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
  return x->r0 < y->r0 ? -1 : x->r0 > y->r0;
}

static uint16_t f16_of(float f) { /* round to nearest, |f| <= 1 */
  if (f == 0.0f) return 0;
  uint32_t u;
  memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  int e = (int)((u >> 23) & 0xff) - 127 + 15;
  uint32_t m = u & 0x7fffffu;
  if (e <= 0) return (uint16_t)sign;
  uint32_t h = ((uint32_t)e << 10) | (m >> 13);
  if ((m >> 12) & 1) h++;
  return (uint16_t)(sign | h);
}

static CUdeviceptr upload(const void *p, size_t n) {
  CUdeviceptr d;
  CK(cuMemAlloc(&d, n));
  CK(cuMemcpyHtoD(d, p, n));
  return d;
}

static int cmp_float(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE.ptx [batch new_len cached rows]\n", argv[0]);
    return 2;
  }
  const int batch = argc > 2 ? atoi(argv[2]) : 8, new_len = argc > 3 ? atoi(argv[3]) : 2048;
  const int cached = argc > 4 ? atoi(argv[4]) : 0, rows = argc > 5 ? atoi(argv[5]) : 64;
  const int heads = 32, kvh = 8, BS = 16, qpk = heads / kvh;
  const char *head_env = getenv("PROBE_HEAD"); /* the head size the PTX was built with */
  const int D = head_env ? atoi(head_env) : 128;
  FILE *f = fopen(argv[1], "rb");
  if (!f) return perror(argv[1]), 1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *ptx = calloc(1, (size_t)n + 1);
  if (fread(ptx, 1, (size_t)n, f) != (size_t)n) return 1;
  fclose(f);

  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  char log[8192] = "";
  /* PROBE_MAXREG=N: ptxas's register cap (what .maxnreg in the PTX would do) */
  const char *maxreg = getenv("PROBE_MAXREG");
  if (maxreg && !*maxreg) maxreg = NULL;
  CUjit_option o[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                      CU_JIT_MAX_REGISTERS};
  void *ov[] = {log, (void *)(size_t)sizeof log, (void *)(size_t)(maxreg ? atoi(maxreg) : 0)};
  if (cuModuleLoadDataEx(&mod, ptx, maxreg ? 3 : 2, o, ov) != CUDA_SUCCESS) {
    fprintf(stderr, "module load failed: %s\n", log);
    return 1;
  }
  /* PROBE_KERNEL=clpa_prefill_paged: the tiles path's kernel (128 work-items) */
  const char *kname = getenv("PROBE_KERNEL") ? getenv("PROBE_KERNEL") : "clpa_prefill_mma";
  const int tiles_path = strcmp(kname, "clpa_prefill_paged") == 0;
  CK(cuModuleGetFunction(&fn, mod, kname));
  int regs = 0, smem = 0;
  cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn);
  cuFuncGetAttribute(&smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn);

  /* Data: queries and caches uniform in [-1, 1]. */
  const int total = batch * new_len, ctx_len = cached + new_len;
  const int maxb = (ctx_len + BS - 1) / BS, nb = batch * maxb;
  srand(7);
  const size_t qn = (size_t)total * heads * D, kvn = (size_t)nb * kvh * D * BS;
  uint16_t *hq = malloc(qn * 2), *hkv = malloc(kvn * 2);
  for (size_t i = 0; i < qn; i++) hq[i] = f16_of(2.0f * rand() / (float)RAND_MAX - 1.0f);
  for (size_t i = 0; i < kvn; i++) hkv[i] = f16_of(2.0f * rand() / (float)RAND_MAX - 1.0f);
  int *table = malloc(sizeof(int) * (size_t)nb), *info = malloc(sizeof(int) * 3 * batch);
  for (int i = 0; i < nb; i++) table[i] = i;
  for (int i = nb - 1; i > 0; i--) {
    const int j = rand() % (i + 1), t = table[i];
    table[i] = table[j], table[j] = t;
  }
  const int nrows = new_len * qpk, per = (nrows + rows - 1) / rows, tiles = batch * per;
  tile *tl = malloc(sizeof(tile) * (size_t)tiles);
  int *work = malloc(sizeof(int) * 2 * (size_t)tiles), t = 0;
  for (int s = 0; s < batch; s++) {
    info[3 * s] = s * new_len, info[3 * s + 1] = new_len, info[3 * s + 2] = cached;
    for (int r0 = 0; r0 < nrows; r0 += rows, t++) {
      const int last = (r0 + rows < nrows ? r0 + rows : nrows) - 1;
      tl[t] = (tile){cached + last / qpk + 1, s, r0};
    }
  }
  qsort(tl, (size_t)tiles, sizeof *tl, longest_first);
  for (t = 0; t < tiles; t++) work[2 * t] = tl[t].seq, work[2 * t + 1] = tl[t].r0;

  CUdeviceptr d_q = upload(hq, qn * 2), d_k = upload(hkv, kvn * 2), d_v = upload(hkv, kvn * 2);
  CUdeviceptr d_out, d_faults, d_table = upload(table, sizeof(int) * (size_t)nb);
  CUdeviceptr d_info = upload(info, sizeof(int) * 3 * batch);
  CUdeviceptr d_work = upload(work, sizeof(int) * 2 * (size_t)tiles);
  CK(cuMemAlloc(&d_out, qn * 2));
  CK(cuMemAlloc(&d_faults, 4));
  CK(cuMemsetD32(d_faults, 0, 1));

  /* PREFILL_ARGS, in order. */
  CUdeviceptr null = 0;
  uint64_t q_stride = (uint64_t)heads * D, block_stride = (uint64_t)kvh * D * BS,
           head_stride = (uint64_t)D * BS;
  int i_maxb = maxb, i_nb = nb, i_heads = heads, i_kvh = kvh, win = 0, causal = 1;
  int mask_block = 64, mask_qb = 0, mask_kb = 0;
  float scale = 0.08838834764831845f, ks = 1.0f, vs = 1.0f, cap = 0.0f;
  void *args[] = {&d_out,  &null,       &d_q,       &q_stride, &d_k,      &d_v,     &block_stride,
                  &head_stride, &d_table, &i_maxb,  &d_info,   &d_work,   &i_nb,    &i_heads,
                  &i_kvh,  &scale,      &ks,        &vs,       &null,     &null,    &null,
                  &cap,    &win,        &null,      &causal,   &d_faults, &null,    &mask_block,
                  &mask_qb, &mask_kb};
  const unsigned threads = tiles_path ? 128u : 2u * (unsigned)rows;
  CUevent e0, e1;
  CK(cuEventCreate(&e0, 0));
  CK(cuEventCreate(&e1, 0));
  CK(cuLaunchKernel(fn, (unsigned)tiles, kvh, 1, threads, 1, 1, 0, NULL, args, NULL));
  CK(cuCtxSynchronize());
  const int profile = getenv("PROBE_ONCE") != NULL;
  float ms[9];
  for (int b = 0; b < (profile ? 0 : 9); b++) {
    CK(cuEventRecord(e0, NULL));
    for (int i = 0; i < 5; i++)
      CK(cuLaunchKernel(fn, (unsigned)tiles, kvh, 1, threads, 1, 1, 0, NULL, args, NULL));
    CK(cuEventRecord(e1, NULL));
    CK(cuEventSynchronize(e1));
    CK(cuEventElapsedTime(&ms[b], e0, e1));
    ms[b] /= 5;
  }
  int faults = 0;
  CK(cuMemcpyDtoH(&faults, d_faults, 4));
  const double L = new_len, C = cached;
  const double flops = 4.0 * batch * heads * D * (L * (L + 1) / 2 + L * C);
  if (!profile) {
    qsort(ms, 9, sizeof *ms, cmp_float);
    printf("probe: batch %d x %d over %d, rows %d: %.1f us, %.1f TFLOP/s, %d registers, %d "
           "bytes shared, faults %d\n",
           batch, new_len, cached, rows, ms[4] * 1e3, flops / (ms[4] * 1e-3) / 1e12, regs, smem,
           faults);
  }
  return faults != 0;
}
