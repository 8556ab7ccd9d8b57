/*
 * decode_basic.c — clpa end to end in one page: a context on the default
 * device, a KV cache, the KV manager set up from the cache's layout, a
 * prompt's keys and values written with reshape_and_cache through the
 * slots the manager hands out, one decode step over the paged cache, and
 * the fault check. It checks its own answer: every key is the same, so
 * attention is the plain mean of the values, which the host computes.
 *
 * Build it against an installed clpa:
 *   cc decode_basic.c $(pkg-config --cflags --libs clpa) -lm -o decode_basic
 * Exit status 0 when the device's answer matches.
 */
#include <clpa.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define HEADS 8
#define KV_HEADS 2
#define HEAD_SIZE 64
#define PROMPT 100
#define ROW (KV_HEADS * HEAD_SIZE)

static int fail(const char *what, clpa_context *ctx) {
  fprintf(stderr, "%s: %s\n", what, ctx ? clpa_context_last_error(ctx) : clpa_last_error());
  return 1;
}

static int cl_fail(const char *what, cl_int err) {
  fprintf(stderr, "%s: OpenCL error %d\n", what, (int)err);
  return 1;
}

int main(void) {
  clpa_context *ctx;
  if (clpa_context_create(NULL, &ctx) != CLPA_OK) return fail("context", NULL);

  /* A one-layer f16 cache of 64 blocks of 16 tokens. */
  clpa_cache_config cc;
  clpa_cache_config_init(&cc);
  cc.num_kv_heads = KV_HEADS, cc.head_size = HEAD_SIZE, cc.num_blocks = 64;
  clpa_cache *cache;
  if (clpa_cache_create(ctx, &cc, &cache) != CLPA_OK) return fail("cache", ctx);
  clpa_kv_layout kv;
  clpa_cache_get_layout(cache, &kv);

  /* The KV manager hands out the slots: same blocks, same block size. */
  clpa_kvman_config kc;
  clpa_kvman_config_init(&kc);
  clpa_kvman_config_from_layout(&kc, &kv);
  clpa_kvman *km;
  if (clpa_kvman_create(&kc, &km) != CLPA_OK) return fail("kvman", NULL);
  int32_t tokens[PROMPT];
  int64_t slots[PROMPT];
  for (int i = 0; i < PROMPT; i++) tokens[i] = 1000 + i;
  clpa_kvman_admit_result r;
  if (clpa_kvman_admit(km, 0, tokens, PROMPT, slots, &r) != CLPA_OK) return fail("admit", NULL);

  /* The prompt's keys (all equal) and values (v[t][e] = t + e / 100). */
  static float k[PROMPT * ROW], v[PROMPT * ROW], q[HEADS * HEAD_SIZE], out[HEADS * HEAD_SIZE];
  for (int t = 0; t < PROMPT; t++)
    for (int e = 0; e < ROW; e++) k[t * ROW + e] = 0.5f, v[t * ROW + e] = (float)t + e / 100.0f;
  for (int i = 0; i < HEADS * HEAD_SIZE; i++) q[i] = 1.0f;
  cl_context cl = clpa_context_cl_context(ctx);
  cl_int err;
  const cl_mem_flags in = CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR;
  const clpa_seq *seq = clpa_kvreq_seq(r.req);
  int32_t len = clpa_seq_num_tokens(seq);
  cl_mem bk, bv = NULL, bs = NULL, bq = NULL, bt = NULL, bl = NULL, bo = NULL;
  bk = clCreateBuffer(cl, in, sizeof k, k, &err);
  if (err == CL_SUCCESS) bv = clCreateBuffer(cl, in, sizeof v, v, &err);
  if (err == CL_SUCCESS)
    bs = clCreateBuffer(cl, in, sizeof(int64_t) * (size_t)r.num_new_tokens, slots, &err);
  if (err == CL_SUCCESS) bq = clCreateBuffer(cl, in, sizeof q, q, &err);
  if (err == CL_SUCCESS)
    bt = clCreateBuffer(cl, in, sizeof(int32_t) * (size_t)clpa_seq_num_blocks(seq),
                        (void *)clpa_seq_block_table(seq), &err);
  if (err == CL_SUCCESS) bl = clCreateBuffer(cl, in, sizeof len, &len, &err);
  if (err == CL_SUCCESS) bo = clCreateBuffer(cl, CL_MEM_WRITE_ONLY, sizeof out, NULL, &err);
  if (err != CL_SUCCESS) return cl_fail("clCreateBuffer", err);

  /* Write the new tokens' K/V into layer 0 through their slots. */
  clpa_reshape_and_cache_params w;
  clpa_reshape_and_cache_params_init(&w);
  w.cache = cache, w.layer = 0, w.num_tokens = r.num_new_tokens;
  w.key = bk, w.value = bv, w.slot_mapping = bs;
  if (clpa_reshape_and_cache(ctx, &w) != CLPA_OK) return fail("reshape_and_cache", ctx);

  /* One decode step for the one sequence. */
  clpa_decode_params p;
  clpa_decode_params_init(&p);
  p.num_seqs = 1, p.num_heads = HEADS, p.cache = cache, p.layer = 0;
  p.max_blocks_per_seq = clpa_seq_num_blocks(seq), p.max_context_len = len;
  p.scale = 1.0f / sqrtf((float)HEAD_SIZE);
  p.query = bq, p.block_tables = bt, p.context_lens = bl, p.out = bo;
  if (clpa_decode(ctx, &p) != CLPA_OK) return fail("decode", ctx);
  if (clpa_context_check_faults(ctx, NULL) != CLPA_OK) return fail("faults", ctx);
  err = clEnqueueReadBuffer(clpa_context_cl_queue(ctx), bo, CL_TRUE, 0, sizeof out, out, 0, NULL,
                            NULL);
  if (err != CL_SUCCESS) return cl_fail("clEnqueueReadBuffer", err);

  /* Equal keys: the output is the mean value, (PROMPT - 1) / 2 + e / 100. */
  double worst = 0;
  for (int h = 0; h < HEADS; h++)
    for (int d = 0; d < HEAD_SIZE; d++) {
      const int e = (h / (HEADS / KV_HEADS)) * HEAD_SIZE + d;
      const double want = (PROMPT - 1) / 2.0 + (double)(float)(e / 100.0f);
      worst = fmax(worst, fabs(out[h * HEAD_SIZE + d] - want) / (1e-2 + fabs(want)));
    }
  printf("decode over %d cached tokens on %d heads: worst relative error %.2g\n", len, HEADS,
         worst);
  cl_mem all[] = {bk, bv, bs, bq, bt, bl, bo};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
  clpa_kvman_finish(km, r.req, 1);
  clpa_kvman_destroy(km);
  clpa_cache_destroy(cache);
  clpa_context_destroy(ctx);
  return worst < 5e-3 ? 0 : 1; /* f16 storage of values up to ~100 */
}
