/*
 * prefix_prefill.c — a prefill that starts from a prefix-cache hit.
 *
 * Request A (a system prompt and a question) is computed and finished, and
 * the KV manager keeps its whole blocks in its radix tree. Request B asks
 * another question after the same system prompt: admitting it finds A's
 * blocks, so only B's remaining tokens get slots. Their keys and values go
 * into the cache with reshape_and_cache, and one prefill (planned, then run
 * on the layer) attends from them over the cached prefix and, causally,
 * over each other. The example checks the output against attention in
 * double precision on the host and prints the largest error.
 *
 * The hit is whole blocks: the system prompt is 40 tokens, blocks hold 16,
 * so B reuses 32 tokens and computes the other 8 again with its own.
 *
 * Build it against an installed clpa:
 *   cc prefix_prefill.c $(pkg-config --cflags --libs clpa) -lm -o prefix_prefill
 * Exit status 0 when the device's answer is within the tolerance below.
 */
#include <clpa.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define HEADS 8
#define KV_HEADS 2
#define HEAD_SIZE 64
#define ROW (KV_HEADS * HEAD_SIZE) /* one token's keys (or values), all KV heads */
#define SYSTEM 40                  /* the shared system prompt */
#define LEN_A (SYSTEM + 9)
#define LEN_B (SYSTEM + 23)
/* Against the double-precision answer: f32 paths land near 1e-6; the
 * tensor-core paths (NVIDIA) round the softmax weights to f16, 2^-11
 * relative, on values of at most 1. */
#define TOLERANCE 2e-3

static int fail(const char *what, clpa_context *ctx) {
  fprintf(stderr, "%s: %s\n", what, ctx ? clpa_context_last_error(ctx) : clpa_last_error());
  return 1;
}

static int cl_fail(const char *what, cl_int err) {
  fprintf(stderr, "%s: OpenCL error %d\n", what, (int)err);
  return 1;
}

/* A multiple of 1/512 in [-1, 1] drawn from x: exact in f16, so the f16
 * cache holds exactly what the host reference reads. */
static float draw(uint64_t x) {
  x += 0x9e3779b97f4a7c15u; /* splitmix64 */
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  x ^= x >> 31;
  return (float)((int)(x % 1025) - 512) / 512.0f;
}

/* The stand-in for a model: element e of the key (kv 0) or value (kv 1) of
 * a token at a position. Like a real model's, it is the same for the same
 * tokens at the same positions, which is what makes a cached prefix reusable. */
static float kv_elem(int kv, int32_t token, int32_t pos, int32_t e) {
  return draw(((uint64_t)token << 40) ^ ((uint64_t)pos << 16) ^ ((uint64_t)e << 1) ^ (uint64_t)kv);
}

static cl_mem buffer(clpa_context *ctx, size_t bytes, void *host) {
  cl_int err;
  cl_mem b = clCreateBuffer(clpa_context_cl_context(ctx),
                            host ? CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR : CL_MEM_READ_WRITE,
                            bytes, host, &err);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "clCreateBuffer of %zu bytes: OpenCL error %d\n", bytes, (int)err);
    exit(1);
  }
  return b;
}

/* Writes the keys and values of tokens[first, first + n) (at those
 * positions) into layer 0 through their slots. */
static clpa_status write_kv(clpa_context *ctx, clpa_cache *cache, const int32_t *tokens,
                            int32_t first, int32_t n, const int64_t *slots) {
  static float k[LEN_B * ROW], v[LEN_B * ROW];
  for (int32_t t = 0; t < n; t++)
    for (int32_t e = 0; e < ROW; e++) {
      k[t * ROW + e] = kv_elem(0, tokens[first + t], first + t, e);
      v[t * ROW + e] = kv_elem(1, tokens[first + t], first + t, e);
    }
  cl_mem bk = buffer(ctx, sizeof(float) * ROW * (size_t)n, k);
  cl_mem bv = buffer(ctx, sizeof(float) * ROW * (size_t)n, v);
  cl_mem bs = buffer(ctx, sizeof(int64_t) * (size_t)n, (void *)slots);
  clpa_reshape_and_cache_params w;
  clpa_reshape_and_cache_params_init(&w);
  w.cache = cache, w.layer = 0, w.num_tokens = n;
  w.key = bk, w.value = bv, w.slot_mapping = bs;
  clpa_status st = clpa_reshape_and_cache(ctx, &w);
  clReleaseMemObject(bk); /* OpenCL keeps them alive until the write is done */
  clReleaseMemObject(bv);
  clReleaseMemObject(bs);
  return st;
}

int main(void) {
  /* A context on the default device: $CLPA_DEVICE, else the first GPU,
   * else the first device (cfg.device picks another). */
  clpa_context_config cfg;
  clpa_context_config_init(&cfg);
  clpa_context *ctx;
  if (clpa_context_create(&cfg, &ctx) != CLPA_OK) return fail("context", NULL);

  /* A one-layer f16 cache of 32 blocks of 16 tokens, and the KV manager
   * over the same blocks. */
  clpa_cache_config cc;
  clpa_cache_config_init(&cc);
  cc.num_kv_heads = KV_HEADS, cc.head_size = HEAD_SIZE, cc.num_blocks = 32;
  clpa_cache *cache;
  if (clpa_cache_create(ctx, &cc, &cache) != CLPA_OK) return fail("cache", ctx);
  clpa_kv_layout kv;
  clpa_cache_get_layout(cache, &kv);
  clpa_kvman_config kc;
  clpa_kvman_config_init(&kc);
  clpa_kvman_config_from_layout(&kc, &kv);
  clpa_kvman *km;
  if (clpa_kvman_create(&kc, &km) != CLPA_OK) return fail("kvman", NULL);

  /* Two prompts: the same system prompt, then different questions. */
  int32_t prompt_a[LEN_A], prompt_b[LEN_B];
  for (int32_t i = 0; i < LEN_B; i++) {
    const int32_t tok = i < SYSTEM ? 100 + i : 5000 + 7 * i;
    if (i < LEN_A) prompt_a[i] = i < SYSTEM ? tok : 9000 + i;
    prompt_b[i] = tok;
  }

  /* Request A, the earlier one: nothing cached yet, so every token gets a
   * slot. Its K/V are written (its attention is not what this example
   * shows), then finish caches its whole blocks in the radix tree. */
  int64_t slots[LEN_B];
  clpa_kvman_admit_result ra;
  if (clpa_kvman_admit(km, 0, prompt_a, LEN_A, slots, &ra) != CLPA_OK) return fail("admit A", NULL);
  if (write_kv(ctx, cache, prompt_a, ra.cached_tokens, ra.num_new_tokens, slots) != CLPA_OK)
    return fail("reshape_and_cache A", ctx);
  int32_t blocks_a[LEN_A]; /* A's block table, for the check below */
  const clpa_seq *seq_a = clpa_kvreq_seq(ra.req);
  for (int32_t i = 0; i < clpa_seq_num_blocks(seq_a); i++)
    blocks_a[i] = clpa_seq_block_table(seq_a)[i];
  if (clpa_kvman_finish(km, ra.req, 1) != CLPA_OK) return fail("finish A", NULL);

  /* Request B: admit matches the longest cached prefix in whole blocks,
   * locks it, and hands out slots only for the tokens to compute, at
   * positions cached_tokens .. LEN_B - 1. */
  clpa_kvman_admit_result rb;
  if (clpa_kvman_admit(km, 0, prompt_b, LEN_B, slots, &rb) != CLPA_OK) return fail("admit B", NULL);
  const clpa_seq *seq_b = clpa_kvreq_seq(rb.req);
  const int32_t *table = clpa_seq_block_table(seq_b), num_blocks = clpa_seq_num_blocks(seq_b);
  const int32_t cached = rb.cached_tokens, n = rb.num_new_tokens;
  printf("B: %d tokens, %d found in the cache (A's blocks", LEN_B, cached);
  for (int32_t i = 0; i < cached / kv.block_size; i++) printf(" %d", table[i]);
  printf("), %d to compute\n", n);
  int bad = cached != SYSTEM / kv.block_size * kv.block_size;
  for (int32_t i = 0; i < cached / kv.block_size; i++) bad |= table[i] != blocks_a[i];
  if (bad) {
    fprintf(stderr, "B should start on A's first %d blocks\n", SYSTEM / kv.block_size);
    return 1;
  }

  /* B's new tokens: their K/V into the cache, then their queries. */
  if (write_kv(ctx, cache, prompt_b, cached, n, slots) != CLPA_OK)
    return fail("reshape_and_cache B", ctx);
  static float q[LEN_B * HEADS * HEAD_SIZE], out[LEN_B * HEADS * HEAD_SIZE];
  for (int32_t i = 0; i < n * HEADS * HEAD_SIZE; i++)
    q[i] = draw(((uint64_t)1 << 60) + (uint64_t)i);
  cl_mem bq = buffer(ctx, sizeof(float) * HEADS * HEAD_SIZE * (size_t)n, q);
  cl_mem bo = buffer(ctx, sizeof(float) * HEADS * HEAD_SIZE * (size_t)n, NULL);
  cl_mem bt = buffer(ctx, sizeof(int32_t) * (size_t)num_blocks, (void *)table);

  /* The prefill: one sequence of n new tokens over `cached` cached ones.
   * The plan fixes the lengths (host arrays, checked now); the run takes a
   * layer's buffers. An engine runs the same plan on every layer;
   * clpa_prefill is a plan, one run and a release in one call. */
  const int32_t cu_seqlens[2] = {0, n}, cached_lens[1] = {cached};
  clpa_prefill_params p;
  clpa_prefill_params_init(&p); /* causal, f32 query and output */
  p.num_seqs = 1, p.num_heads = HEADS, p.cache = cache;
  p.max_blocks_per_seq = num_blocks;
  p.cu_seqlens_q = cu_seqlens, p.cached_lens = cached_lens;
  p.scale = 1.0f / sqrtf((float)HEAD_SIZE);
  clpa_plan *plan;
  if (clpa_plan_prefill(ctx, &p, &plan) != CLPA_OK) return fail("plan", ctx);
  clpa_attn_inputs in;
  clpa_attn_inputs_init(&in);
  in.cache = cache, in.layer = 0, in.query = bq, in.out = bo, in.block_tables = bt;
  if (clpa_run(plan, &in) != CLPA_OK) return fail("run", ctx);
  if (clpa_context_check_faults(ctx, NULL) != CLPA_OK) return fail("faults", ctx);
  const cl_int read = clEnqueueReadBuffer(clpa_context_cl_queue(ctx), bo, CL_TRUE, 0,
                                          sizeof(float) * HEADS * HEAD_SIZE * (size_t)n, out, 0,
                                          NULL, NULL);
  if (read != CL_SUCCESS) return cl_fail("clEnqueueReadBuffer", read);

  /* The reference: new token i sits at position cached + i and attends to
   * positions 0 .. cached + i, keys and values recomputed from the tokens. */
  double worst = 0;
  for (int32_t i = 0; i < n; i++)
    for (int32_t h = 0; h < HEADS; h++) {
      const int32_t pos = cached + i, base = h / (HEADS / KV_HEADS) * HEAD_SIZE;
      const float *qv = q + (i * HEADS + h) * HEAD_SIZE;
      double logit[LEN_B], m = -INFINITY, sum = 0, acc[HEAD_SIZE] = {0};
      for (int32_t j = 0; j <= pos; j++) {
        double dot = 0;
        for (int32_t d = 0; d < HEAD_SIZE; d++) dot += qv[d] * kv_elem(0, prompt_b[j], j, base + d);
        logit[j] = p.scale * dot;
        m = fmax(m, logit[j]);
      }
      for (int32_t j = 0; j <= pos; j++) {
        const double w = exp(logit[j] - m);
        sum += w;
        for (int32_t d = 0; d < HEAD_SIZE; d++) acc[d] += w * kv_elem(1, prompt_b[j], j, base + d);
      }
      for (int32_t d = 0; d < HEAD_SIZE; d++) {
        const double err = fabs(out[(i * HEADS + h) * HEAD_SIZE + d] - acc[d] / sum);
        if (!(err <= worst)) worst = err; /* a NaN sticks */
      }
    }
  printf("prefill of %d new tokens over %d cached, %d heads: max error %.2g (tolerance %.0e)\n", n,
         cached, HEADS, worst, TOLERANCE);

  clpa_plan_release(plan);
  clReleaseMemObject(bq);
  clReleaseMemObject(bo);
  clReleaseMemObject(bt);
  clpa_kvman_finish(km, rb.req, 1);
  clpa_kvman_destroy(km);
  clpa_cache_destroy(cache);
  clpa_context_destroy(ctx);
  return worst <= TOLERANCE ? 0 : 1;
}
