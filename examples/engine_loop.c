/*
 * engine_loop.c — the calls an inference engine makes, step by step, over
 * a few requests of different lengths:
 *
 *   admit      clpa_kvman_admit_ex: a request arrives; its cached prefix
 *              is found (here one request shares another's system prompt)
 *              and its prompt gets blocks
 *   prefill    chunks of at most CHUNK prompt tokens a step: their K/V
 *              written with reshape_and_cache, attention planned once a
 *              step (clpa_plan_prefill) and run on every layer, the
 *              computed prefix published with clpa_kvman_checkpoint
 *   decode     one token a step for each request past its prompt:
 *              clpa_kvman_append_batch gives the slots, the batch view
 *              (clpa_kvman_batch_build) the block tables and lengths, and
 *              only the rows it rewrote (changed_rows) go to the device
 *   finish     clpa_kvman_finish caches the request's blocks for later
 *              requests and frees its row
 *
 * The model is a stand-in: a token's keys and values are a fixed function
 * of the token, its position and the layer; queries and the "sampled"
 * tokens come from a seeded generator, so every run is the same. Each step
 * checks two things and exits nonzero on a mismatch: the device's block
 * tables (kept up to date by changed rows alone) equal the KV manager's,
 * and every attention output equals attention computed in double
 * precision on the host.
 *
 * Build it against an installed clpa:
 *   cc engine_loop.c $(pkg-config --cflags --libs clpa) -lm -o engine_loop
 */
#include <clpa.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAYERS 2
#define HEADS 8
#define KV_HEADS 2
#define HEAD_SIZE 64
#define ROW (KV_HEADS * HEAD_SIZE)     /* one token's keys (or values), all KV heads */
#define QROW (HEADS * HEAD_SIZE)       /* one token's query, all heads */
#define MAX_ROWS 4                     /* requests running at once */
#define MAX_BLOCKS 8                   /* block-table width: 128 tokens of context */
#define MAX_TOKENS 128                 /* prompt + output of one request */
#define CHUNK 32                       /* prompt tokens a request computes a step */
#define STEP_TOKENS (MAX_ROWS * CHUNK) /* new tokens a step, at most */
#define SYSTEM 32                      /* the shared system prompt */
/* As prefix_prefill.c: f32 paths land near 1e-6; the tensor-core paths
 * (NVIDIA) round the softmax weights to f16, on values of at most 1. */
#define TOLERANCE 2e-3

typedef enum { WAITING, PREFILL, DECODE, DONE } req_state;

typedef struct request {
  int32_t arrive, prompt_len, shares_system, max_out; /* the workload */
  int32_t prompt[MAX_TOKENS];
  req_state state;
  clpa_kvreq *kv;     /* the KV manager's request while admitted */
  int32_t computed;   /* prompt tokens whose K/V are in the cache */
  int32_t chunk;      /* this step's prompt tokens (PREFILL) */
  int32_t generated;  /* tokens sampled so far */
  int32_t next_token; /* the last one sampled: the next decode step's input */
} request;

static request reqs[] = {
    {.arrive = 0, .prompt_len = 40, .shares_system = 1, .max_out = 5},
    {.arrive = 0, .prompt_len = 70, .shares_system = 0, .max_out = 3},
    {.arrive = 2, .prompt_len = 45, .shares_system = 1, .max_out = 6},
    {.arrive = 4, .prompt_len = 21, .shares_system = 0, .max_out = 4},
};
#define NUM_REQS ((int32_t)(sizeof reqs / sizeof *reqs))

_Noreturn static void fail(const char *what, clpa_context *ctx) {
  fprintf(stderr, "%s: %s\n", what, ctx ? clpa_context_last_error(ctx) : clpa_last_error());
  exit(1);
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

/* The seeded generator for queries and sampled tokens. */
static uint64_t rng = 47;
static float next_random(void) { return draw(rng++); }

/* The stand-in model: element e of the key (kv 0) or value (kv 1) of a
 * token at a position, in a layer. The same tokens at the same positions
 * give the same K/V, which is what makes a cached prefix reusable. */
static float kv_elem(int32_t layer, int kv, int32_t token, int32_t pos, int32_t e) {
  return draw(((uint64_t)token << 40) ^ ((uint64_t)pos << 20) ^ ((uint64_t)e << 4) ^
              ((uint64_t)layer << 1) ^ (uint64_t)kv);
}

/* How far out[HEADS][HEAD_SIZE] is from the attention of query q (same
 * shape) at position pos over the keys and values of tokens[0..pos], in
 * double precision. */
static double attention_error(int32_t layer, const int32_t *tokens, int32_t pos, const float *q,
                              const float *out, float scale) {
  double worst = 0;
  for (int32_t h = 0; h < HEADS; h++) {
    const int32_t base = h / (HEADS / KV_HEADS) * HEAD_SIZE; /* this head's KV head */
    double logit[MAX_TOKENS], m = -INFINITY, sum = 0, acc[HEAD_SIZE] = {0};
    for (int32_t j = 0; j <= pos; j++) {
      double dot = 0;
      for (int32_t d = 0; d < HEAD_SIZE; d++)
        dot += q[h * HEAD_SIZE + d] * kv_elem(layer, 0, tokens[j], j, base + d);
      logit[j] = scale * dot;
      m = fmax(m, logit[j]);
    }
    for (int32_t j = 0; j <= pos; j++) {
      const double w = exp(logit[j] - m);
      sum += w;
      for (int32_t d = 0; d < HEAD_SIZE; d++)
        acc[d] += w * kv_elem(layer, 1, tokens[j], j, base + d);
    }
    for (int32_t d = 0; d < HEAD_SIZE; d++) {
      const double err = fabs(out[h * HEAD_SIZE + d] - acc[d] / sum);
      if (!(err <= worst)) worst = err; /* a NaN sticks */
    }
  }
  return worst;
}

static cl_mem buffer(clpa_context *ctx, size_t bytes) {
  cl_int err;
  cl_mem b = clCreateBuffer(clpa_context_cl_context(ctx), CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "clCreateBuffer of %zu bytes: OpenCL error %d\n", bytes, (int)err);
    exit(1);
  }
  return b;
}

/* Blocking copies: the host arrays are reused right after. */
static void upload(clpa_context *ctx, cl_mem b, size_t offset, size_t bytes, const void *src) {
  if (bytes && clEnqueueWriteBuffer(clpa_context_cl_queue(ctx), b, CL_TRUE, offset, bytes, src, 0,
                                    NULL, NULL) != CL_SUCCESS)
    fail("clEnqueueWriteBuffer", NULL);
}
static void download(clpa_context *ctx, cl_mem b, size_t bytes, void *dst) {
  if (bytes && clEnqueueReadBuffer(clpa_context_cl_queue(ctx), b, CL_TRUE, 0, bytes, dst, 0, NULL,
                                   NULL) != CL_SUCCESS)
    fail("clEnqueueReadBuffer", NULL);
}

/* Admits the requests that have arrived, while rows are free. The prompt's
 * slots come back here; the prefill chunks ask the sequence for them again
 * (clpa_seq_slots), so the engine keeps none. */
static void admit_arrivals(clpa_kvman *km, int32_t step) {
  for (int32_t i = 0; i < NUM_REQS; i++) {
    request *r = &reqs[i];
    if (r->state != WAITING || r->arrive > step || clpa_kvman_num_running(km) == MAX_ROWS) continue;
    clpa_kvman_admit_options opt;
    clpa_kvman_admit_options_init(&opt);
    opt.reserve_tokens = r->max_out; /* so decode steps allocate no host memory */
    int64_t slots[MAX_TOKENS];
    clpa_kvman_admit_result res;
    const clpa_status st = clpa_kvman_admit_ex(km, 0, r->prompt, r->prompt_len, &opt, slots, &res);
    if (st == CLPA_ERR_POOL_EXHAUSTED) continue; /* no room yet: try again next step */
    if (st != CLPA_OK) fail("admit", NULL);
    r->kv = res.req, r->computed = res.cached_tokens, r->state = PREFILL;
    printf("step %d: admit request %d: %d prompt tokens, %d cached, row %d\n", step, i,
           r->prompt_len, res.cached_tokens, clpa_kvreq_row(r->kv));
  }
}

int main(void) {
  for (int32_t i = 0; i < NUM_REQS; i++)
    for (int32_t t = 0; t < reqs[i].prompt_len; t++)
      reqs[i].prompt[t] = reqs[i].shares_system && t < SYSTEM ? 100 + t : 1000 * (i + 1) + t;

  /* A context on the default device: $CLPA_DEVICE, else the first GPU,
   * else the first device (cfg.device picks another). */
  clpa_context_config cfg;
  clpa_context_config_init(&cfg);
  clpa_context *ctx;
  if (clpa_context_create(&cfg, &ctx) != CLPA_OK) fail("context", NULL);

  /* The cache (f16, 32 blocks of 16 tokens a layer), the KV manager over
   * the same blocks, and a batch whose table is always MAX_BLOCKS wide, so
   * the device copy keeps its shape from step to step. */
  clpa_cache_config cc;
  clpa_cache_config_init(&cc);
  cc.num_layers = LAYERS, cc.num_kv_heads = KV_HEADS, cc.head_size = HEAD_SIZE, cc.num_blocks = 32;
  clpa_cache *cache;
  if (clpa_cache_create(ctx, &cc, &cache) != CLPA_OK) fail("cache", ctx);
  clpa_kv_layout kv;
  clpa_cache_get_layout(cache, &kv);
  clpa_kvman_config kc;
  clpa_kvman_config_init(&kc);
  clpa_kvman_config_from_layout(&kc, &kv);
  clpa_kvman *km;
  if (clpa_kvman_create(&kc, &km) != CLPA_OK) fail("kvman", NULL);
  clpa_batch_config bc;
  clpa_batch_config_init(&bc);
  bc.min_blocks_per_seq = MAX_BLOCKS;
  clpa_batch *batch;
  if (clpa_batch_create(clpa_kvman_pool(km), &bc, &batch) != CLPA_OK) fail("batch", NULL);

  /* Device buffers, made once: the block tables and lengths the kernels
   * read, the step's new K/V and their slots, queries and outputs. */
  cl_mem d_tables = buffer(ctx, sizeof(int32_t) * MAX_ROWS * MAX_BLOCKS);
  cl_mem d_lens = buffer(ctx, sizeof(int32_t) * MAX_ROWS);
  cl_mem d_k = buffer(ctx, sizeof(float) * STEP_TOKENS * ROW);
  cl_mem d_v = buffer(ctx, sizeof(float) * STEP_TOKENS * ROW);
  cl_mem d_slots = buffer(ctx, sizeof(int64_t) * STEP_TOKENS);
  cl_mem d_qp = buffer(ctx, sizeof(float) * STEP_TOKENS * QROW); /* prefill queries, outputs */
  cl_mem d_op = buffer(ctx, sizeof(float) * STEP_TOKENS * QROW);
  cl_mem d_qd = buffer(ctx, sizeof(float) * MAX_ROWS * QROW); /* decode: one a row */
  cl_mem d_od = buffer(ctx, sizeof(float) * MAX_ROWS * QROW);
  const float scale = 1.0f / sqrtf((float)HEAD_SIZE);

  for (int32_t step = 0;; step++) {
    admit_arrivals(km, step);
    const int32_t rows = clpa_kvman_num_running(km);
    int32_t done = 0;
    for (int32_t i = 0; i < NUM_REQS; i++) done += reqs[i].state == DONE;
    if (done == NUM_REQS) break;
    if (rows == 0) continue; /* nothing has arrived yet */

    /* 1. What each row does this step, in row order (clpa_kvman_running):
     * a prefill chunk, or one decode token. Decode tokens get their slots
     * from one append over every row (count 0: a row still in prefill). */
    request *at[MAX_ROWS];
    for (int32_t i = 0; i < NUM_REQS; i++)
      if (reqs[i].kv) at[clpa_kvreq_row(reqs[i].kv)] = &reqs[i];
    int32_t counts[MAX_ROWS], dec_tokens[MAX_ROWS], n_dec = 0;
    int64_t dec_slots[MAX_ROWS];
    for (int32_t s = 0; s < rows; s++) {
      counts[s] = at[s]->state == DECODE;
      if (counts[s]) dec_tokens[n_dec++] = at[s]->next_token;
    }
    if (clpa_kvman_append_batch(km, clpa_kvman_running(km), rows, counts, dec_tokens, dec_slots) !=
        CLPA_OK)
      fail("append_batch", NULL);

    /* 2. The batch view: block tables and lengths of every running row.
     * Only the rows it rewrote go to the device's copy; the others already
     * hold the right table there. It lists every row the first time and
     * when the view outgrows its arrays (a row past any before). A
     * non-blocking copy would do: the view's arrays stay as they are until
     * the next build. */
    clpa_batch_view view;
    if (clpa_kvman_batch_build(km, batch, &view) != CLPA_OK) fail("batch_build", NULL);
    if (view.max_blocks_per_seq != MAX_BLOCKS) fail("a sequence outgrew MAX_BLOCKS", NULL);
    for (int32_t c = 0; c < view.num_changed_rows; c++) {
      const size_t row = (size_t)view.changed_rows[c], bytes = sizeof(int32_t) * MAX_BLOCKS;
      upload(ctx, d_tables, row * bytes, bytes, view.block_tables + row * MAX_BLOCKS);
    }

    /* 3. The step's new tokens: prefill chunks first (row order, as
     * cu_seqlens lays them out), then decode tokens. Each has a row, a
     * position and a slot. A row's prefill length is 0 when it decodes,
     * its decode length 0 when it prefills: both kernels take every row. */
    int32_t cu[MAX_ROWS + 1] = {0}, cached_lens[MAX_ROWS], dec_lens[MAX_ROWS];
    int32_t tok_row[STEP_TOKENS], tok_pos[STEP_TOKENS], n_tok = 0;
    int64_t slots[STEP_TOKENS];
    for (int32_t s = 0; s < rows; s++) {
      request *r = at[s];
      r->chunk = 0;
      if (r->state == PREFILL) {
        r->chunk = r->prompt_len - r->computed < CHUNK ? r->prompt_len - r->computed : CHUNK;
        if (clpa_seq_slots(clpa_kvreq_seq(r->kv), r->computed, r->chunk, slots + n_tok) != CLPA_OK)
          fail("seq_slots", NULL);
        for (int32_t i = 0; i < r->chunk; i++)
          tok_row[n_tok] = s, tok_pos[n_tok++] = r->computed + i;
      }
      cu[s + 1] = n_tok;
      cached_lens[s] = r->state == PREFILL ? r->computed : 0;
      dec_lens[s] = r->state == DECODE ? view.context_lens[s] : 0;
    }
    const int32_t n_pre = n_tok;
    for (int32_t s = 0, d = 0; s < rows; s++) {
      if (at[s]->state != DECODE) continue;
      tok_row[n_tok] = s, tok_pos[n_tok] = view.context_lens[s] - 1; /* the appended token */
      slots[n_tok++] = dec_slots[d++];
    }
    upload(ctx, d_slots, 0, sizeof(int64_t) * (size_t)n_tok, slots);
    upload(ctx, d_lens, 0, sizeof(int32_t) * (size_t)rows, dec_lens);

    /* 4. Plan once for the step (the lengths are host arrays, checked
     * here); the runs below take one layer's buffers each. A decode plan
     * could serve the next step too while the rows stay the same (clpa.h
     * section 8); this loop plans every step. */
    clpa_plan *prefill = NULL, *decode = NULL;
    if (n_pre > 0) {
      clpa_prefill_params p;
      clpa_prefill_params_init(&p); /* causal, f32 query and output */
      p.num_seqs = rows, p.num_heads = HEADS, p.cache = cache;
      p.max_blocks_per_seq = MAX_BLOCKS, p.cu_seqlens_q = cu, p.cached_lens = cached_lens;
      p.scale = scale;
      if (clpa_plan_prefill(ctx, &p, &prefill) != CLPA_OK) fail("plan_prefill", ctx);
    }
    if (n_tok > n_pre) {
      clpa_decode_params p;
      clpa_decode_params_init(&p);
      p.num_seqs = rows, p.num_heads = HEADS, p.cache = cache;
      p.max_blocks_per_seq = MAX_BLOCKS, p.max_context_len = view.max_context_len;
      p.host_context_lens = dec_lens, p.scale = scale;
      if (clpa_plan_decode(ctx, &p, &decode) != CLPA_OK) fail("plan_decode", ctx);
    }

    /* 5. Every layer: the model's K/V of the new tokens into the cache,
     * then attention. The outputs are read back here only to check them. */
    double worst = 0;
    for (int32_t l = 0; l < LAYERS; l++) {
      static float k[STEP_TOKENS * ROW], v[STEP_TOKENS * ROW];
      static float qp[STEP_TOKENS * QROW], op[STEP_TOKENS * QROW];
      static float qd[MAX_ROWS * QROW], od[MAX_ROWS * QROW];
      for (int32_t t = 0; t < n_tok; t++) {
        const int32_t tok = clpa_kvreq_tokens(at[tok_row[t]]->kv)[tok_pos[t]];
        for (int32_t e = 0; e < ROW; e++) {
          k[t * ROW + e] = kv_elem(l, 0, tok, tok_pos[t], e);
          v[t * ROW + e] = kv_elem(l, 1, tok, tok_pos[t], e);
        }
      }
      upload(ctx, d_k, 0, sizeof(float) * ROW * (size_t)n_tok, k);
      upload(ctx, d_v, 0, sizeof(float) * ROW * (size_t)n_tok, v);
      clpa_reshape_and_cache_params w;
      clpa_reshape_and_cache_params_init(&w);
      w.cache = cache, w.layer = l, w.num_tokens = n_tok;
      w.key = d_k, w.value = d_v, w.slot_mapping = d_slots;
      if (clpa_reshape_and_cache(ctx, &w) != CLPA_OK) fail("reshape_and_cache", ctx);

      for (int32_t i = 0; i < n_pre * QROW; i++) qp[i] = next_random();
      memset(qd, 0, sizeof qd); /* rows that do not decode: length 0, output 0, unused */
      for (int32_t t = n_pre; t < n_tok; t++)
        for (int32_t i = 0; i < QROW; i++) qd[tok_row[t] * QROW + i] = next_random();
      upload(ctx, d_qp, 0, sizeof(float) * QROW * (size_t)n_pre, qp);
      upload(ctx, d_qd, 0, sizeof(float) * QROW * (size_t)rows, qd);
      clpa_attn_inputs in;
      clpa_attn_inputs_init(&in);
      in.cache = cache, in.layer = l, in.block_tables = d_tables;
      if (prefill) {
        in.query = d_qp, in.out = d_op;
        if (clpa_run(prefill, &in) != CLPA_OK) fail("run prefill", ctx);
      }
      if (decode) {
        in.query = d_qd, in.out = d_od, in.context_lens = d_lens;
        if (clpa_run(decode, &in) != CLPA_OK) fail("run decode", ctx);
      }
      download(ctx, d_op, sizeof(float) * QROW * (size_t)n_pre, op);
      download(ctx, d_od, sizeof(float) * QROW * (size_t)rows, od);
      for (int32_t t = 0; t < n_tok; t++) {
        const float *q = t < n_pre ? qp + t * QROW : qd + tok_row[t] * QROW;
        const float *o = t < n_pre ? op + t * QROW : od + tok_row[t] * QROW;
        const double e =
            attention_error(l, clpa_kvreq_tokens(at[tok_row[t]]->kv), tok_pos[t], q, o, scale);
        if (!(e <= worst)) worst = e;
      }
    }
    clpa_plan_release(prefill);
    clpa_plan_release(decode);
    if (clpa_context_check_faults(ctx, NULL) != CLPA_OK) fail("faults", ctx);

    /* The device's block tables, kept by changed rows alone, against the
     * KV manager's own tables. */
    int32_t tables[MAX_ROWS * MAX_BLOCKS];
    download(ctx, d_tables, sizeof(int32_t) * MAX_BLOCKS * (size_t)rows, tables);
    int32_t table_rows_ok = 0;
    for (int32_t s = 0; s < rows; s++) {
      const clpa_seq *seq = clpa_kvreq_seq(at[s]->kv);
      table_rows_ok += !memcmp(tables + s * MAX_BLOCKS, clpa_seq_block_table(seq),
                               sizeof(int32_t) * (size_t)clpa_seq_num_blocks(seq));
    }
    printf(
        "step %d: %d rows: prefill %d tokens, decode %d; %d of %d table rows uploaded; "
        "max error %.2g\n",
        step, rows, n_pre, n_tok - n_pre, view.num_changed_rows, rows, worst);
    if (table_rows_ok != rows) {
      fprintf(stderr, "step %d: %d of %d device table rows differ from the KV manager's\n", step,
              rows - table_rows_ok, rows);
      return 1;
    }
    if (!(worst <= TOLERANCE)) {
      fprintf(stderr, "step %d: attention off by %.3g (tolerance %.0e)\n", step, worst, TOLERANCE);
      return 1;
    }

    /* 6. After the step: prefill rows publish what they computed (whole
     * blocks, for requests admitted meanwhile) and sample once their
     * prompt is done; decode rows sample. A request with all its tokens
     * finishes: its blocks go into the prefix cache, and the last row moves
     * into its row (the next build lists that row as changed). */
    for (int32_t s = 0; s < rows; s++) {
      request *r = at[s];
      if (r->state == PREFILL) {
        r->computed += r->chunk;
        if (clpa_kvman_checkpoint(km, r->kv, r->computed) != CLPA_OK) fail("checkpoint", NULL);
        if (r->computed < r->prompt_len) continue;
        r->state = DECODE;
      }
      r->next_token = 2000 + (int32_t)(512 * (next_random() + 1.0f)); /* "sampled" */
      if (++r->generated < r->max_out) continue;
      printf("step %d: finish request %d: %d tokens\n", step, (int)(r - reqs),
             clpa_kvreq_num_tokens(r->kv));
      if (clpa_kvman_finish(km, r->kv, 1) != CLPA_OK) fail("finish", NULL);
      r->kv = NULL, r->state = DONE;
    }
  }

  /* Every request finished: the blocks still in use are the prefix
   * cache's, kept for later requests until it evicts them. */
  clpa_kvman_stats ks;
  clpa_kvman_stats_get(km, &ks);
  printf("%lld prompt tokens, %lld from the cache; %d blocks cached for later requests\n",
         (long long)ks.prompt_tokens, (long long)ks.hit_tokens, ks.blocks_cached);
  if (ks.running != 0 || ks.blocks_used != ks.blocks_cached) {
    fprintf(stderr, "%d requests still running, %d blocks used, %d cached\n", ks.running,
            ks.blocks_used, ks.blocks_cached);
    return 1;
  }
  cl_mem all[] = {d_tables, d_lens, d_k, d_v, d_slots, d_qp, d_op, d_qd, d_od};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
  clpa_batch_destroy(batch);
  clpa_kvman_destroy(km);
  clpa_cache_destroy(cache);
  clpa_context_destroy(ctx);
  return 0;
}
