/*
 * smoke.cl — y = a*x + y, to prove the compiler, the queue and the program
 * cache work on a device (clpa_smoke_test). Grid: n work-items.
 */
__kernel void clpa_smoke_axpy(float a, __global const float *x, __global float *y, uint n) {
  uint i = get_global_id(0);
  if (i < n) y[i] = fma(a, x[i], y[i]);
}

#ifdef CLPA_SMOKE_BREAK
/* Lets tests prove that a failed build reports CLPA_ERR_BUILD with its log. */
#error "deliberately broken build (CLPA_SMOKE_BREAK)"
#endif

/* A plain float4 copy: clpa-bench measures the device's copy bandwidth
 * with it (and with clEnqueueCopyBuffer) as the ceiling for its ratios.
 * Grid: n4 work-items, one float4 each. */
__kernel void clpa_smoke_copy4(__global const float4 *src, __global float4 *dst, uint n4) {
  uint i = get_global_id(0);
  if (i < n4) dst[i] = src[i];
}

/* The f32 FMA ceiling clpa-bench holds prefill against: every work-item
 * runs 8 independent chains of float16 mads (so both a GPU's lanes and a
 * CPU's vector units stay busy without waiting on one chain), `iters`
 * steps each: 8 * 16 * 2 * iters FLOPs per work-item. The sum is written
 * so nothing can be optimised away (all 16 lanes of it). Grid: any size. */
__kernel void clpa_smoke_fma(__global float *out, float b, float c, int iters) {
  float16 x0 = (float16)(get_global_id(0) * 1e-7f), x1 = x0 + 1.0f, x2 = x0 + 2.0f;
  float16 x3 = x0 + 3.0f, x4 = x0 + 4.0f, x5 = x0 + 5.0f, x6 = x0 + 6.0f, x7 = x0 + 7.0f;
  for (int i = 0; i < iters; i++) {
    x0 = fma(x0, b, c), x1 = fma(x1, b, c), x2 = fma(x2, b, c), x3 = fma(x3, b, c);
    x4 = fma(x4, b, c), x5 = fma(x5, b, c), x6 = fma(x6, b, c), x7 = fma(x7, b, c);
  }
  const float16 s = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
  /* Every lane of the sum: a compiler drops the lanes nothing reads (NVIDIA's
   * did, which made the peak 4x what the device has). */
  const float8 s8 = s.lo + s.hi;
  const float4 s4 = s8.lo + s8.hi;
  out[get_global_id(0)] = (s4.x + s4.y) + (s4.z + s4.w);
}

/* Reads a paged K/V cache the way decode does, computing only a
 * checksum: the ceiling of decode's reads on the device, which clpa-bench
 * decode prints beside the copy bandwidth (random blocks of a few KB are
 * not a stream). Work-group (KV head, sequence, partition of part_blocks
 * blocks); its work-items share the partition's tiles a vector T at a
 * time, the blocks one after another, so that none idles where a tile
 * has fewer vectors than the work-group has work-items (tile_n vectors a
 * tile; block_n from one block to the next). Two widths: 64 bytes a
 * work-item (uint16: a CPU's work-item, one AVX-512 register) and 16
 * (uint4: a GPU's lanes then read 16 consecutive bytes each, a warp 512).
 * The checksum is written only if it hits a constant, so that the reads
 * cannot be dropped. */
#define PAGED_READ(name, T, lo_half, hi_half)                                                  \
  __kernel void name(__global const T *k, __global const T *v, __global const int *tables,    \
                     __global const int *lens, int blocks_per_seq, int block_size,            \
                     int part_blocks, ulong block_n, int tile_n, __global uint *out) {        \
    const int h = get_group_id(0), s = get_group_id(1), part = get_group_id(2);               \
    const int lid = get_local_id(0), nl = get_local_size(0);                                  \
    const int nb = (lens[s] + block_size - 1) / block_size;                                   \
    const int b0 = part * part_blocks, n = max(min(b0 + part_blocks, nb) - b0, 0) * tile_n;   \
    __global const int *table = tables + (size_t)s * blocks_per_seq + b0;                     \
    T acc = (T)(0u);                                                                          \
    _Pragma("unroll 4") for (int i = lid; i < n; i += nl) {                                   \
      const int b = i / tile_n;                                                               \
      const ulong at = (ulong)table[b] * block_n + (ulong)h * tile_n + (ulong)(i - b * tile_n); \
      acc ^= k[at] ^ v[at];                                                                   \
    }                                                                                         \
    const uint4 r4 = hi_half(acc) ^ lo_half(acc);                                             \
    const uint r = r4.x ^ r4.y ^ r4.z ^ r4.w;                                                 \
    if (r == 0x9e3779b9u) out[0] = r;                                                         \
  }
#define PAGED_LO16(a) ((a).lo.lo ^ (a).hi.hi)
#define PAGED_HI16(a) ((a).lo.hi ^ (a).hi.lo)
#define PAGED_LO4(a) (a)
#define PAGED_HI4(a) ((uint4)(0u))
PAGED_READ(clpa_smoke_paged_read, uint16, PAGED_LO16, PAGED_HI16)
PAGED_READ(clpa_smoke_paged_read4, uint4, PAGED_LO4, PAGED_HI4)
