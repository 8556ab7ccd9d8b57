/*
 * nhd_cache.c — clpa on an engine's own cache in the NHD layout, the one
 * vLLM's current backends, FlashAttention and FlashInfer (NHD) use: K and
 * V each [blocks, block_size, kv_heads, head_size], in the engine's own
 * buffers, written by the engine (here the host fills them in that order
 * with plain indexing, no clpa call). clpa decodes over them through a
 * clpa_kv_layout of kind CLPA_KV_LAYOUT_NHD, over blocks scattered over
 * the cache: once with vLLM's padded block tables, once with FlashInfer's
 * CSR page table (indptr, indices, last_page_len), and once more with K and
 * V in one buffer as FlashInfer's single tensor holds them, [blocks, 2,
 * block_size, kv_heads, head_size] (the layout's block_pitch). It checks
 * the answers against attention computed on the host in double precision.
 *
 * Build it against an installed clpa:
 *   cc nhd_cache.c $(pkg-config --cflags --libs clpa) -lm -o nhd_cache
 * Exit status 0 when the device's answer matches.
 */
#include <clpa.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define SEQS 2
#define HEADS 8
#define KV_HEADS 2
#define HEAD_SIZE 64
#define BLOCK 16
#define BLOCKS 32
#define MAX_BLOCKS 8 /* a block table's row */

static int fail(const char *what, clpa_context *ctx) {
  fprintf(stderr, "%s: %s\n", what, ctx ? clpa_context_last_error(ctx) : clpa_last_error());
  return 1;
}

/* One decode step with p, its faults checked and its output read into out
 * (bytes of it): 0, or 1 after saying which stage of run `run` failed. */
static int decode_into(clpa_context *ctx, const clpa_decode_params *p, float *out, size_t bytes,
                       const char *run) {
  const char *stage = "decode";
  int bad = clpa_decode(ctx, p) != CLPA_OK;
  if (!bad) stage = "faults", bad = clpa_context_check_faults(ctx, NULL) != CLPA_OK;
  if (!bad)
    stage = "read", bad = clEnqueueReadBuffer(clpa_context_cl_queue(ctx), p->out, CL_TRUE, 0, bytes,
                                              out, 0, NULL, NULL) != CL_SUCCESS;
  if (!bad) return 0;
  char what[64];
  snprintf(what, sizeof what, "%s (%s)", stage, run);
  return fail(what, ctx);
}

/* A value in [-1, 1) from an index (deterministic, no libc rand). */
static float noise(uint32_t i) {
  i ^= i >> 16, i *= 0x7feb352dU, i ^= i >> 15, i *= 0x846ca68bU, i ^= i >> 16;
  return (float)(i & 0xffff) / 32768.0f - 1.0f;
}

/* The engine's own index of an NHD element: [block][token][kv_head][dim]. */
static size_t nhd(int32_t block, int32_t tok, int32_t h, int32_t d) {
  return (((size_t)block * BLOCK + (size_t)tok) * KV_HEADS + (size_t)h) * HEAD_SIZE + (size_t)d;
}

/* The host's attention for sequence s of lens[] tokens on the blocks of
 * tables[s], reading the same NHD indexing; the worst difference from out. */
static double check(const float *q, const float *k, const float *v, const float *out,
                    const int32_t *lens, int32_t tables[][MAX_BLOCKS]) {
  double worst = 0;
  for (int s = 0; s < SEQS; s++)
    for (int h = 0; h < HEADS; h++) {
      const int g = h / (HEADS / KV_HEADS);
      const float *qh = q + ((size_t)s * HEADS + (size_t)h) * HEAD_SIZE;
      double score[MAX_BLOCKS * BLOCK] = {0}, top = -INFINITY, sum = 0;
      for (int t = 0; t < lens[s]; t++) {
        const int32_t b = tables[s][t / BLOCK];
        double dot = 0;
        for (int d = 0; d < HEAD_SIZE; d++) dot += (double)qh[d] * k[nhd(b, t % BLOCK, g, d)];
        score[t] = dot / sqrt((double)HEAD_SIZE);
        top = fmax(top, score[t]);
      }
      for (int t = 0; t < lens[s]; t++) sum += score[t] = exp(score[t] - top);
      for (int d = 0; d < HEAD_SIZE; d++) {
        double o = 0;
        for (int t = 0; t < lens[s]; t++)
          o += score[t] / sum * v[nhd(tables[s][t / BLOCK], t % BLOCK, g, d)];
        worst = fmax(worst, fabs(out[((size_t)s * HEADS + (size_t)h) * HEAD_SIZE + (size_t)d] - o));
      }
    }
  return worst;
}

int main(void) {
  clpa_context *ctx;
  if (clpa_context_create(NULL, &ctx) != CLPA_OK) return fail("context", NULL);

  /* The layout says what the engine's buffers hold: f32, NHD. */
  clpa_kv_layout kv;
  if (clpa_kv_layout_init_kind(&kv, CLPA_KV_LAYOUT_NHD, CLPA_DTYPE_F32, BLOCKS, BLOCK, KV_HEADS,
                               HEAD_SIZE) != CLPA_OK)
    return fail("layout", NULL);

  /* Two sequences of 100 and 37 tokens on scattered blocks. */
  const int32_t lens[SEQS] = {100, 37};
  int32_t tables[SEQS][MAX_BLOCKS];
  for (int s = 0; s < SEQS; s++)
    for (int b = 0; b < MAX_BLOCKS; b++) tables[s][b] = (7 * (s * MAX_BLOCKS + b) + 3) % BLOCKS;
  static float k[BLOCKS * BLOCK * KV_HEADS * HEAD_SIZE], v[BLOCKS * BLOCK * KV_HEADS * HEAD_SIZE];
  static float q[SEQS * HEADS * HEAD_SIZE], out[SEQS * HEADS * HEAD_SIZE];
  for (size_t i = 0; i < sizeof k / sizeof *k; i++) k[i] = noise((uint32_t)i), v[i] = noise((uint32_t)i ^ 0x55555555u);
  for (size_t i = 0; i < sizeof q / sizeof *q; i++) q[i] = noise((uint32_t)i ^ 0x33333333u);

  cl_context cl = clpa_context_cl_context(ctx);
  cl_int err;
  const cl_mem_flags in = CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR;
  cl_mem bk = NULL, bv = NULL, bq = NULL, bt = NULL, bl = NULL, bix = NULL, bll = NULL, bo = NULL;
  bk = clCreateBuffer(cl, in, sizeof k, k, &err);
  if (err == CL_SUCCESS) bv = clCreateBuffer(cl, in, sizeof v, v, &err);
  if (err == CL_SUCCESS) bq = clCreateBuffer(cl, in, sizeof q, q, &err);
  if (err == CL_SUCCESS) bt = clCreateBuffer(cl, in, sizeof tables, tables, &err);
  if (err == CL_SUCCESS) bl = clCreateBuffer(cl, in, sizeof lens, (void *)lens, &err);
  if (err != CL_SUCCESS) return fail("buffers", ctx);
  /* The same pages as FlashInfer's CSR table: sequence s holds pages
   * indices[indptr[s] .. indptr[s + 1]), its last page holding last_len[s] tokens. */
  int32_t indptr[SEQS + 1] = {0}, indices[SEQS * MAX_BLOCKS] = {0}, last_len[SEQS];
  for (int s = 0; s < SEQS; s++) {
    const int32_t pages = (lens[s] + BLOCK - 1) / BLOCK;
    for (int b = 0; b < pages; b++) indices[indptr[s] + b] = tables[s][b];
    indptr[s + 1] = indptr[s] + pages, last_len[s] = lens[s] - (pages - 1) * BLOCK;
  }
  cl_mem bip = clCreateBuffer(cl, in, sizeof indptr, indptr, &err);
  if (err == CL_SUCCESS) bix = clCreateBuffer(cl, in, sizeof indices, indices, &err);
  if (err == CL_SUCCESS) bll = clCreateBuffer(cl, in, sizeof last_len, last_len, &err);
  if (err == CL_SUCCESS) bo = clCreateBuffer(cl, CL_MEM_WRITE_ONLY, sizeof out, NULL, &err);
  if (err != CL_SUCCESS) return fail("buffers", ctx);

  /* One decode step over the engine's buffers: key_cache, value_cache and their layout. */
  clpa_decode_params p;
  clpa_decode_params_init(&p);
  p.num_seqs = SEQS, p.num_heads = HEADS;
  p.key_cache = bk, p.value_cache = bv, p.kv = kv;
  p.max_blocks_per_seq = MAX_BLOCKS, p.max_context_len = 100;
  p.scale = 1.0f / sqrtf((float)HEAD_SIZE);
  p.query = bq, p.block_tables = bt, p.context_lens = bl, p.out = bo;
  if (decode_into(ctx, &p, out, sizeof out, "padded table")) return 1;
  const double padded = check(q, k, v, out, lens, tables);

  /* Again with the CSR table: the lengths come from it, so no block_tables or context_lens. */
  p.block_tables = NULL, p.context_lens = NULL, p.max_blocks_per_seq = 0;
  p.page_table = CLPA_PAGE_TABLE_CSR, p.num_page_indices = indptr[SEQS];
  p.page_indptr = bip, p.page_indices = bix, p.last_page_len = bll;
  if (decode_into(ctx, &p, out, sizeof out, "CSR")) return 1;
  const double csr = check(q, k, v, out, lens, tables);

  /* K and V in one buffer, [blocks, 2, BLOCK, KV_HEADS, HEAD_SIZE]: blocks two blocks apart
   * (block_pitch), key_cache the buffer, value_cache a sub-buffer one block in. */
  const size_t block = (size_t)BLOCK * KV_HEADS * HEAD_SIZE;
  float *kv2 = malloc(sizeof(float) * 2 * block * BLOCKS);
  if (!kv2) return fail("out of memory", NULL);
  for (size_t b = 0; b < BLOCKS; b++)
    for (size_t i = 0; i < block; i++)
      kv2[2 * b * block + i] = k[b * block + i], kv2[(2 * b + 1) * block + i] = v[b * block + i];
  kv.block_pitch = 2 * kv.block_stride;
  if (clpa_kv_layout_check(&kv, &kv) != CLPA_OK) return fail("layout (one buffer)", NULL);
  cl_mem b2 = clCreateBuffer(cl, in, sizeof(float) * 2 * block * BLOCKS, kv2, &err), b2v = NULL;
  const cl_buffer_region values = {sizeof(float) * block, sizeof(float) * block * (2 * BLOCKS - 1)};
  if (err == CL_SUCCESS)
    b2v = clCreateSubBuffer(b2, CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &values, &err);
  free(kv2);
  if (err != CL_SUCCESS) return fail("one buffer (its values' origin must meet the device's"
                                     " CL_DEVICE_MEM_BASE_ADDR_ALIGN)", ctx);
  p.kv = kv, p.key_cache = b2, p.value_cache = b2v;
  if (decode_into(ctx, &p, out, sizeof out, "one buffer")) return 1;
  const double one = check(q, k, v, out, lens, tables);
  printf("decode over an NHD cache (%d and %d tokens, %d heads): worst error %.2g with padded"
         " block tables, %.2g with a CSR page table, %.2g with K and V in one buffer\n", lens[0],
         lens[1], HEADS, padded, csr, one);
  cl_mem all[] = {bk, bv, bq, bt, bl, bip, bix, bll, bo, b2v, b2};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
  clpa_context_destroy(ctx);
  return padded < 1e-4 && csr < 1e-4 && one < 1e-4 ? 0 : 1; /* f32 cache: sums of ~100 products in f32 */
}
