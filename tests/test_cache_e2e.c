/*
 * End to end, the way an engine drives the cache: a prompt is written
 * through a sequence of the host pool (clpa_seq_append's slots) with
 * reshape_and_cache; the sequence is forked (and, a few steps later,
 * forked again), each sequence appends its own tokens, the
 * copy-on-write pairs clpa_seq_append reports are done with one
 * clpa_copy_blocks per step over every layer, before that step's
 * reshape_and_cache; and after every step clpa_decode over the batch that
 * clpa_batch_build makes must give each sequence what clpa_ref_decode
 * gives over that sequence's own logical tokens, laid out privately
 * (identity block table), in every layer.
 *
 * The cache starts as random bytes (NaN and inf included for the float
 * dtypes), so a slot read that should not be, or a copy that did not
 * happen, shows. Every storage dtype; fp8 with random scales. Output f32,
 * tolerance |got - want| <= 1e-4 + 1e-4 |want| (the reference reads the
 * same quantised values, so only f32 arithmetic differs); where decode
 * runs on tensor cores (NVIDIA: f16, bf16 and fp8 caches), which round
 * the queries and probabilities to the cache's dtype (f16 for fp8),
 * test_decode's tolerance for that dtype.
 */
#include <stdio.h>

#include "cache_util.h"
#include "clpa_kv.h"
#include "ref_attention.h"

#define LAYERS 2
#define HEADS 4
#define KV_HEADS 2
#define HS 64
#define BS 16
#define BLOCKS 40
#define ROW (KV_HEADS * HS)
#define MAX_SEQS 3
#define MAX_TOKENS 256

static clpa_context *ctx;

/* A sequence and its logical tokens: the K/V rows as stored (already
 * quantised), per layer. */
typedef struct lseq {
  clpa_seq *seq;
  int n;
  float *k[LAYERS], *v[LAYERS]; /* [MAX_TOKENS][ROW] */
} lseq;

static void lseq_init(lseq *s) {
  s->n = 0;
  for (int l = 0; l < LAYERS; l++) {
    s->k[l] = malloc(sizeof(float) * MAX_TOKENS * ROW);
    s->v[l] = malloc(sizeof(float) * MAX_TOKENS * ROW);
  }
}

static void lseq_free(lseq *s) {
  clpa_seq_destroy(s->seq);
  for (int l = 0; l < LAYERS; l++) free(s->k[l]), free(s->v[l]);
}

/* What one step writes: rows and slots of all sequences' new tokens. */
typedef struct step {
  int n;
  float *k[LAYERS], *v[LAYERS]; /* [n][ROW], as uploaded (f32, unquantised) */
  int64_t slots[MAX_SEQS * MAX_TOKENS];
  clpa_block_copy copies[MAX_SEQS];
  int ncopies;
} step;

typedef struct setup {
  clpa_dtype dtype;
  float ks, vs;
  clpa_cache *cache;
} setup;

/* Appends n tokens to s: reserves slots (recording any copy), draws rows,
 * keeps their quantised values as the sequence's logical tokens. */
static int append(const setup *su, lseq *s, int n, step *st) {
  clpa_block_copy copy;
  if (clpa_seq_append(s->seq, n, st->slots + st->n, &copy) != CLPA_OK) {
    diag("append: %s", clpa_last_error());
    return 0;
  }
  if (copy.src >= 0) st->copies[st->ncopies++] = copy;
  unsigned char q[ROW * 4];
  for (int l = 0; l < LAYERS; l++)
    for (int t = 0; t < n; t++) {
      float *kr = st->k[l] + (size_t)(st->n + t) * ROW, *vr = st->v[l] + (size_t)(st->n + t) * ROW;
      for (int e = 0; e < ROW; e++) {
        kr[e] = (float)rng_uniform(-1.5, 1.5);
        vr[e] = (float)rng_uniform(-2.0, 2.0);
      }
      clpa_dtype_encode(su->dtype, kr, q, ROW, su->ks);
      clpa_dtype_decode(su->dtype, q, s->k[l] + (size_t)(s->n + t) * ROW, ROW, su->ks);
      clpa_dtype_encode(su->dtype, vr, q, ROW, su->vs);
      clpa_dtype_decode(su->dtype, q, s->v[l] + (size_t)(s->n + t) * ROW, ROW, su->vs);
    }
  s->n += n;
  st->n += n;
  return 1;
}

/* The device side of a step: copies first (all layers, one call), then
 * each layer's new rows. */
static int write_step(const setup *su, const step *st) {
  clpa_copy_blocks_params cp;
  clpa_copy_blocks_params_init(&cp);
  cp.cache = su->cache, cp.pairs = st->copies, cp.num_pairs = st->ncopies;
  if (clpa_copy_blocks(ctx, &cp) != CLPA_OK) {
    diag("copy_blocks: %s", clpa_context_last_error(ctx));
    return 0;
  }
  int good = 1;
  cl_mem slots = test_buffer(ctx, st->slots, sizeof(int64_t) * (size_t)st->n);
  for (int l = 0; l < LAYERS; l++) {
    cl_mem k = test_buffer(ctx, st->k[l], sizeof(float) * ROW * (size_t)st->n);
    cl_mem v = test_buffer(ctx, st->v[l], sizeof(float) * ROW * (size_t)st->n);
    clpa_reshape_and_cache_params p;
    clpa_reshape_and_cache_params_init(&p);
    p.cache = su->cache, p.layer = l, p.num_tokens = st->n, p.key = k, p.value = v;
    p.slot_mapping = slots, p.k_scale = su->ks, p.v_scale = su->vs;
    if (clpa_reshape_and_cache(ctx, &p) != CLPA_OK) {
      diag("reshape_and_cache: %s", clpa_context_last_error(ctx));
      good = 0;
    }
    clReleaseMemObject(k), clReleaseMemObject(v);
  }
  clReleaseMemObject(slots);
  return good;
}

/* clpa_ref_decode over one sequence's logical tokens in a private cache
 * (block i holds tokens [i*BS, (i+1)*BS)). */
static int reference(const setup *su, const lseq *s, int layer, const float *q, double *out) {
  const int nb = (s->n + BS - 1) / BS;
  const size_t elems = (size_t)(nb ? nb : 1) * KV_HEADS * HS * BS;
  clpa_kv_layout kv;
  clpa_kv_layout_init(&kv, su->dtype, nb, BS, KV_HEADS, HS);
  float *kc = malloc(sizeof(float) * elems), *vc = malloc(sizeof(float) * elems);
  for (size_t i = 0; i < elems; i++) kc[i] = vc[i] = NAN;
  for (int j = 0; j < s->n; j++)
    for (int h = 0; h < KV_HEADS; h++)
      for (int d = 0; d < HS; d++) {
        kc[clpa_kv_key_index(&kv, j / BS, h, j % BS, d)] = s->k[layer][(size_t)j * ROW + h * HS + d];
        vc[clpa_kv_value_index(&kv, j / BS, h, j % BS, d)] = s->v[layer][(size_t)j * ROW + h * HS + d];
      }
  int32_t table[MAX_TOKENS / BS + 1], len = s->n;
  for (int i = 0; i < nb; i++) table[i] = i;
  clpa_ref_decode_args a = {.num_seqs = 1, .num_heads = HEADS, .kv = kv,
                            .max_blocks_per_seq = nb ? nb : 1, .query = q,
                            .q_stride = HEADS * HS, .key_cache = kc, .value_cache = vc,
                            .block_tables = table, .context_lens = &len,
                            .scale = 1.0f / sqrtf((float)HS), .out = out};
  clpa_status st = clpa_ref_decode(&a);
  if (st != CLPA_OK) diag("reference: %s", clpa_last_error());
  free(kc), free(vc);
  return st == CLPA_OK;
}

/* clpa_decode over the batch, every layer, against the reference. */
static int check_decode(const setup *su, clpa_batch *batch, lseq *seqs, int nseqs, int stepno) {
  const clpa_seq *list[MAX_SEQS];
  for (int i = 0; i < nseqs; i++) list[i] = seqs[i].seq;
  clpa_batch_view bv;
  if (clpa_batch_build(batch, list, nseqs, &bv) != CLPA_OK) return 0;
  const size_t qn = (size_t)nseqs * HEADS * HS;
  float q[MAX_SEQS * HEADS * HS], got[MAX_SEQS * HEADS * HS];
  double want[MAX_SEQS * HEADS * HS];
  cl_mem tables = test_buffer(ctx, bv.block_tables,
                              sizeof(int32_t) * (size_t)nseqs * bv.max_blocks_per_seq);
  cl_mem lens = test_buffer(ctx, bv.context_lens, sizeof(int32_t) * (size_t)nseqs);
  cl_mem out = test_buffer(ctx, NULL, sizeof(float) * qn);
  int good = 1;
  for (int l = 0; l < LAYERS; l++) {
    for (size_t i = 0; i < qn; i++) q[i] = (float)rng_uniform(-2.0, 2.0);
    for (int s = 0; s < nseqs; s++)
      good &= reference(su, &seqs[s], l, q + (size_t)s * HEADS * HS, want + (size_t)s * HEADS * HS);
    cl_mem qb = test_buffer(ctx, q, sizeof(float) * qn);
    test_poison(ctx, out, sizeof(float) * qn);
    clpa_decode_params p;
    clpa_decode_params_init(&p);
    p.num_seqs = nseqs, p.num_heads = HEADS, p.max_blocks_per_seq = bv.max_blocks_per_seq;
    p.max_context_len = bv.max_context_len, p.q_dtype = CLPA_DTYPE_F32;
    p.scale = 1.0f / sqrtf((float)HS), p.k_scale = su->ks, p.v_scale = su->vs;
    if (l % 2 == 0) { /* the cache object itself, or its buffers with its layout */
      p.cache = su->cache, p.layer = l;
    } else {
      clpa_cache_get_layout(su->cache, &p.kv);
      p.key_cache = clpa_cache_key(su->cache, l), p.value_cache = clpa_cache_value(su->cache, l);
    }
    p.query = qb, p.block_tables = tables, p.context_lens = lens, p.out = out;
    clpa_decode_path path = CLPA_DECODE_PATH_AUTO;
    clpa_status st = clpa_decode_choice(ctx, &p, &path, NULL, NULL, NULL);
    if (st == CLPA_OK) st = clpa_decode(ctx, &p);
    if (st != CLPA_OK) {
      diag("decode: %s", clpa_context_last_error(ctx));
      good = 0;
    }
    test_read(ctx, out, got, sizeof(float) * qn);
    clReleaseMemObject(qb);
    const int mma = path == CLPA_DECODE_PATH_MMA, bf16 = su->dtype == CLPA_DTYPE_BF16;
    const double atol = !mma ? 1e-4 : bf16 ? 4e-3 : 1e-3, rtol = !mma ? 1e-4 : bf16 ? 8e-3 : 2e-3;
    size_t at;
    double worst = test_worst(got, want, qn, atol, rtol, &at);
    if (worst > 1.0) {
      diag("step %d layer %d: worst element %zu (seq %zu of %d tokens, head %zu, dim %zu): got %.9g"
           " want %.9g", stepno, l, at, at / (HEADS * HS), seqs[at / (HEADS * HS)].n,
           at / HS % HEADS, at % HS, got[at], want[at]);
      good = 0;
    }
  }
  clReleaseMemObject(tables), clReleaseMemObject(lens), clReleaseMemObject(out);
  return good;
}

static void run(clpa_dtype dtype) {
  const int fp8 = dtype == CLPA_DTYPE_FP8_E4M3 || dtype == CLPA_DTYPE_FP8_E5M2;
  setup su = {dtype, fp8 ? (float)rng_uniform(0.002, 0.02) : 1.0f,
              fp8 ? (float)rng_uniform(0.002, 0.02) : 1.0f, NULL};
  clpa_cache_config cc;
  clpa_cache_config_init(&cc);
  cc.num_layers = LAYERS, cc.num_kv_heads = KV_HEADS, cc.head_size = HS, cc.block_size = BS;
  cc.dtype = dtype, cc.num_blocks = BLOCKS;
  clpa_pool_config pc;
  clpa_pool_config_init(&pc);
  pc.num_blocks = BLOCKS, pc.block_size = BS;
  clpa_pool *pool = NULL;
  clpa_batch *batch = NULL;
  if (clpa_cache_create(ctx, &cc, &su.cache) != CLPA_OK || clpa_pool_create(&pc, &pool) != CLPA_OK ||
      clpa_batch_create(pool, NULL, &batch) != CLPA_OK) {
    ok(0, "setup for %s: %s", clpa_dtype_name(dtype), clpa_last_error());
    return;
  }
  cache_image junk = cache_randomize(ctx, su.cache);
  image_free(&junk);

  lseq seqs[MAX_SEQS];
  for (int i = 0; i < MAX_SEQS; i++) lseq_init(&seqs[i]), seqs[i].seq = NULL;
  step st = {0};
  for (int l = 0; l < LAYERS; l++) {
    st.k[l] = malloc(sizeof(float) * MAX_SEQS * MAX_TOKENS * ROW);
    st.v[l] = malloc(sizeof(float) * MAX_SEQS * MAX_TOKENS * ROW);
  }
  int good = clpa_seq_create(pool, &seqs[0].seq) == CLPA_OK;
  /* the prompt: 37 tokens, the last block partly filled */
  good &= append(&su, &seqs[0], 37, &st) && write_step(&su, &st);
  good &= check_decode(&su, batch, seqs, 1, 0);
  /* fork: B shares A's three blocks */
  good &= clpa_seq_fork(seqs[0].seq, &seqs[1].seq) == CLPA_OK;
  seqs[1].n = seqs[0].n;
  for (int l = 0; l < LAYERS; l++) {
    memcpy(seqs[1].k[l], seqs[0].k[l], sizeof(float) * ROW * (size_t)seqs[0].n);
    memcpy(seqs[1].v[l], seqs[0].v[l], sizeof(float) * ROW * (size_t)seqs[0].n);
  }
  int nseqs = 2, copies = 0;
  /* steps: A and B append different tokens (A 3 then 1 a step, B 5 then
   * 1), C forks off A at step 2 */
  for (int s = 1; s <= 14 && good; s++) {
    st.n = 0, st.ncopies = 0;
    if (s == 3) {
      good &= clpa_seq_fork(seqs[0].seq, &seqs[2].seq) == CLPA_OK;
      seqs[2].n = seqs[0].n;
      for (int l = 0; l < LAYERS; l++) {
        memcpy(seqs[2].k[l], seqs[0].k[l], sizeof(float) * ROW * (size_t)seqs[0].n);
        memcpy(seqs[2].v[l], seqs[0].v[l], sizeof(float) * ROW * (size_t)seqs[0].n);
      }
      nseqs = 3;
    }
    for (int i = 0; i < nseqs; i++)
      good &= append(&su, &seqs[i], s == 1 ? (i == 0 ? 3 : 5) : 1 + (s % 5 == 0), &st);
    copies += st.ncopies;
    good &= write_step(&su, &st);
    good &= check_decode(&su, batch, seqs, nseqs, s);
  }
  ok(good, "%s: prompt, fork, appends with copy-on-write, decode == reference over each "
     "sequence's own tokens (%d sequences, %d block copies, k_scale %g)",
     clpa_dtype_name(dtype), nseqs, copies, (double)su.ks);
  ok(copies >= 2, "copy-on-write happened (%d copies)", copies);
  test_no_faults(ctx, "after the run");
  ok(clpa_pool_check(pool) == CLPA_OK, "pool invariants hold");
  for (int i = 0; i < MAX_SEQS; i++) lseq_free(&seqs[i]);
  for (int l = 0; l < LAYERS; l++) free(st.k[l]), free(st.v[l]);
  clpa_batch_destroy(batch);
  clpa_pool_destroy(pool);
  clpa_cache_destroy(su.cache);
}

int main(void) {
  rng_seed_from_env();
  ctx = test_context(0);
  for (int d = 0; d < CLPA_DTYPE_COUNT_; d++) run((clpa_dtype)d);
  test_no_faults_left(ctx);
  clpa_context_destroy(ctx);
  return done_testing();
}
