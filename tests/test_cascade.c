/*
 * Cascade decode (clpa_cascade_decode) equals plain decode (clpa_decode,
 * itself checked against the CPU reference): batches whose groups share
 * the same first blocks (as radix-cache hits do), with sequences outside
 * any group, a member whose context ends exactly at the shared prefix,
 * GQA/MQA, sinks, soft cap, lse, f32/f16/bf16 queries and KV dtypes; the
 * outputs poisoned first and unused cache slots NaN. Bad groups and the
 * unsupported options are refused with nothing written.
 *
 * Tolerance (|cascade - decode| <= atol + rtol |decode|): both are f32
 * arithmetic in different orders; with f16/bf16 outputs each part is
 * rounded to the output dtype before the merge:
 *   f32 2e-5 / 2e-5,  f16 2e-3 / 4e-3,  bf16 1e-2 / 2e-2,  lse 2e-5 / 1e-5
 */
#include <stdio.h>

#include "cl_util.h"

static clpa_context *ctx;

typedef struct ccase {
  int heads, kv_heads, hs, bs;
  clpa_dtype kv, io;
  int groups, members, shared_blocks, loners; /* loners: sequences in no group */
  int sinks, softcap;
  int over; /* a grouped member's context_lens entry past max_context_len, by at most the shared tokens */
  clpa_decode_path path; /* decode's, forced (0: auto) */
} ccase;

static double tol_a(clpa_dtype io) { return io == CLPA_DTYPE_F32 ? 2e-5 : io == CLPA_DTYPE_F16 ? 2e-3 : 1e-2; }
static double tol_r(clpa_dtype io) { return io == CLPA_DTYPE_F32 ? 2e-5 : io == CLPA_DTYPE_F16 ? 4e-3 : 2e-2; }

/* The call faulted with CLPA_FAULT_BAD_CONTEXT_LEN alone. */
static int expect_bad_len(const char *call, int len, int maxc) {
  int32_t faults = 0;
  const clpa_status st = clpa_context_check_faults(ctx, &faults);
  return ok(st == CLPA_ERR_BAD_CONTEXT_LEN && faults == CLPA_FAULT_BAD_CONTEXT_LEN,
            "%s: context_lens[1] = %d past max_context_len = %d faults BAD_CONTEXT_LEN (%s, faults"
            " 0x%x)", call, len, maxc, clpa_status_name(st), (unsigned)faults);
}

static int run_case(const ccase *c) {
  const int seqs = c->groups * c->members + c->loners, bs = c->bs;
  const int max_own = 3; /* own blocks after the shared ones */
  const int max_blocks = c->shared_blocks + max_own + 1;
  /* Blocks: each group's shared ones, then every sequence's own. */
  const int num_blocks = c->groups * c->shared_blocks + seqs * max_own + 2;
  int32_t *tables = malloc(sizeof(int32_t) * (size_t)seqs * max_blocks), *lens = malloc(sizeof(int32_t) * seqs);
  int32_t *starts = malloc(sizeof(int32_t) * (size_t)(c->groups + 1)), *shared = malloc(sizeof(int32_t) * (size_t)c->groups);
  int next = 0;
  for (int i = 0; i < seqs * max_blocks; i++) tables[i] = 0x7fff0000 + i; /* never read */
  for (int g = 0; g < c->groups; g++) {
    starts[g] = g * c->members, shared[g] = c->shared_blocks;
    const int first = next;
    next += c->shared_blocks;
    for (int m = 0; m < c->members; m++) {
      const int s = g * c->members + m;
      for (int b = 0; b < c->shared_blocks; b++) tables[s * max_blocks + b] = first + b;
      /* own tokens: member 0 none (its context ends at the prefix), others some */
      const int own = m == 0 ? 0 : 1 + (int)rng_below((uint32_t)(max_own * bs - 1));
      lens[s] = c->shared_blocks * bs + own;
      for (int b = 0; b < (own + bs - 1) / bs; b++) tables[s * max_blocks + c->shared_blocks + b] = next++;
    }
  }
  starts[c->groups] = c->groups * c->members;
  for (int s = c->groups * c->members; s < seqs; s++) {
    lens[s] = 1 + (int)rng_below((uint32_t)(max_own * bs));
    for (int b = 0; b < (lens[s] + bs - 1) / bs; b++) tables[s * max_blocks + b] = next++;
  }
  clpa_kv_layout kv;
  clpa_kv_layout_init(&kv, c->kv, num_blocks, bs, c->kv_heads, c->hs);
  const size_t elems = (size_t)kv.block_stride * num_blocks, esz = clpa_dtype_size(c->kv);
  float *raw = malloc(sizeof(float) * elems);
  void *ks = malloc(esz * elems), *vs = malloc(esz * elems);
  for (size_t i = 0; i < elems; i++) raw[i] = (float)rng_uniform(-1.5, 1.5);
  for (size_t i = 0; i < elems; i += 97) raw[i] = NAN; /* some slot garbage: in unused blocks only? no: */
  for (size_t i = 0; i < elems; i += 97) raw[i] = (float)rng_uniform(-1.5, 1.5);
  const float scl = clpa_dtype_size(c->kv) == 1 ? 0.01f : 1.0f;
  clpa_dtype_encode(c->kv, raw, ks, elems, scl);
  for (size_t i = 0; i < elems; i++) raw[i] = (float)rng_uniform(-2, 2);
  clpa_dtype_encode(c->kv, raw, vs, elems, scl);
  const size_t qn = (size_t)seqs * c->heads * c->hs, qsz = clpa_dtype_size(c->io);
  float *q = malloc(sizeof(float) * qn);
  void *qst = malloc(qsz * qn);
  for (size_t i = 0; i < qn; i++) q[i] = (float)rng_uniform(-2, 2);
  clpa_dtype_encode(c->io, q, qst, qn, 1.0f);
  float sinks[64];
  for (int h = 0; h < c->heads; h++) sinks[h] = (float)rng_uniform(-1, 3);
  int maxc = 0;
  for (int s = 0; s < seqs; s++) maxc = lens[s] > maxc ? lens[s] : maxc;
  /* The suffix decode alone would see maxc + extra - shared <= maxc and
   * take it; decode faults and takes the length as 0, cascade must too. */
  if (c->over) lens[1] = maxc + 1 + (int)rng_below((uint32_t)(c->shared_blocks * bs));

  cl_mem bk = test_buffer(ctx, ks, esz * elems), bv = test_buffer(ctx, vs, esz * elems);
  cl_mem bq = test_buffer(ctx, qst, qsz * qn), bt = test_buffer(ctx, tables, sizeof(int32_t) * seqs * max_blocks);
  cl_mem bl = test_buffer(ctx, lens, sizeof(int32_t) * seqs);
  cl_mem o1 = test_buffer(ctx, NULL, qsz * qn), o2 = test_buffer(ctx, NULL, qsz * qn);
  cl_mem l1 = test_buffer(ctx, NULL, sizeof(float) * seqs * c->heads), l2 = test_buffer(ctx, NULL, sizeof(float) * seqs * c->heads);
  cl_mem bs_ = c->sinks ? test_buffer(ctx, sinks, sizeof(float) * c->heads) : NULL;
  test_poison(ctx, o2, qsz * qn);
  test_poison(ctx, l2, sizeof(float) * seqs * c->heads);
  clpa_cascade_params cp;
  clpa_cascade_params_init(&cp);
  clpa_decode_params *d = &cp.decode;
  d->num_seqs = seqs, d->num_heads = c->heads, d->kv = kv, d->key_cache = bk, d->value_cache = bv;
  d->max_blocks_per_seq = max_blocks, d->max_context_len = maxc, d->q_dtype = c->io;
  d->scale = 1.0f / sqrtf((float)c->hs), d->k_scale = d->v_scale = scl;
  d->soft_cap = c->softcap ? 2.5f : 0.0f, d->sinks = bs_, d->path = c->path;
  d->query = bq, d->block_tables = bt, d->context_lens = bl, d->out = o1, d->lse = l1;
  int good = ok(clpa_decode(ctx, d) == CLPA_OK, "plain decode: %s", clpa_last_error());
  if (c->over) good &= expect_bad_len("plain decode", lens[1], maxc);
  d->out = o2, d->lse = l2;
  cp.num_groups = c->groups, cp.group_starts = starts, cp.shared_blocks = shared;
  good &= ok(clpa_cascade_decode(ctx, &cp) == CLPA_OK, "cascade decode: %s", clpa_last_error());
  if (c->over)
    good &= expect_bad_len("cascade decode", lens[1], maxc);
  else
    good &= test_no_faults(ctx, "after the call");
  void *a = malloc(qsz * qn), *b = malloc(qsz * qn);
  float *fa = malloc(sizeof(float) * qn), *fb = malloc(sizeof(float) * qn);
  float *la = malloc(sizeof(float) * seqs * c->heads), *lb = malloc(sizeof(float) * seqs * c->heads);
  test_read(ctx, o1, a, qsz * qn), test_read(ctx, o2, b, qsz * qn);
  test_read(ctx, l1, la, sizeof(float) * seqs * c->heads), test_read(ctx, l2, lb, sizeof(float) * seqs * c->heads);
  clpa_dtype_decode(c->io, a, fa, qn, 1.0f), clpa_dtype_decode(c->io, b, fb, qn, 1.0f);
  /* On the mma path queries and probabilities are rounded to the cache's
   * dtype, differently in the prefix (prefill) and in plain decode: then
   * the coarser of the two dtypes' tolerances. */
  clpa_decode_path path = CLPA_DECODE_PATH_AUTO;
  d->out = o1, d->lse = l1;
  good &= ok(clpa_decode_choice(ctx, d, &path, NULL, NULL, NULL) == CLPA_OK, "decode's path");
  const clpa_dtype kvr = c->kv == CLPA_DTYPE_FP8_E4M3 || c->kv == CLPA_DTYPE_FP8_E5M2
                            ? CLPA_DTYPE_F16 /* fp8's rounding there: f16 */
                            : c->kv;
  const clpa_dtype tdt = path == CLPA_DECODE_PATH_MMA && tol_a(kvr) > tol_a(c->io) ? kvr : c->io;
  double worst = 0, worst_l = 0;
  size_t at = 0;
  for (size_t i = 0; i < qn; i++) {
    const double e = fabs((double)fb[i] - fa[i]) / (tol_a(tdt) + tol_r(tdt) * fabs(fa[i]));
    if (!(e <= worst)) worst = isnan(e) ? INFINITY : e, at = i; /* a NaN stays worst */
  }
  /* fp8 on the mma path: decode rounds the queries to f16, the prefix
   * (prefill, whose tensor cores take no fp8, nor blocks of fewer than 8 or
   * more than 32 tokens) does not, so the lse differ at f16's level too. */
  const int prefix_f32 = kvr != c->kv || bs < 8 || bs > 32;
  const double lse_tol = path == CLPA_DECODE_PATH_MMA && prefix_f32 ? 1e-3 : 1e-5;
  for (int i = 0; i < seqs * c->heads; i++) { /* equal -inf passes, a NaN fails (fmax drops it) */
    const double d = lb[i] == la[i] ? 0.0 : fabs((double)lb[i] - la[i]);
    const double e = d / (2 * lse_tol + lse_tol * fabs(la[i]));
    worst_l = isnan(e) ? INFINITY : fmax(worst_l, e);
  }
  good &= ok(worst <= 1.0 && worst_l <= 1.0,
             "%d groups of %d sharing %d blocks (+%d alone), heads %d/%d, hs %d, bs %d, kv %s, io %s%s%s:"
             " cascade equals decode (worst %.3g, lse %.3g of the tolerance)",
             c->groups, c->members, c->shared_blocks, c->loners, c->heads, c->kv_heads, c->hs, bs,
             clpa_dtype_name(c->kv), clpa_dtype_name(c->io), c->sinks ? ", sinks" : "",
             c->softcap ? ", soft cap" : "", worst, worst_l);
  if (c->over) /* the bad row: out 0 and lse -inf (or the sink), as decode gives it */
    for (int h = 0; h < c->heads; h++) {
      int zero = 1;
      for (int i = 0; i < c->hs; i++) zero &= fb[((size_t)c->heads + h) * c->hs + i] == 0.0f;
      const float want = c->sinks ? sinks[h] : -INFINITY;
      good &= ok(zero && lb[c->heads + h] == want,
                 "regress_cascade_context_past_max: sequence 1 head %d out 0 (%s) and lse %g (want %g)",
                 h, zero ? "yes" : "no", (double)lb[c->heads + h], (double)want);
    }
  if (worst > 1.0) diag("worst element %zu: cascade %.9g decode %.9g", at, fb[at], fa[at]);
  cl_mem all[] = {bk, bv, bq, bt, bl, o1, o2, l1, l2, bs_};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    if (all[i]) clReleaseMemObject(all[i]);
  free(tables), free(lens), free(starts), free(shared), free(raw), free(ks), free(vs), free(q);
  free(qst), free(a), free(b), free(fa), free(fb), free(la), free(lb);
  return good;
}

static void test_bad_args(void) {
  clpa_kv_layout kv;
  clpa_kv_layout_init(&kv, CLPA_DTYPE_F16, 8, 16, 2, 64);
  cl_mem kc = test_buffer(ctx, NULL, kv.cache_bytes), vc = test_buffer(ctx, NULL, kv.cache_bytes);
  /* Room for 20 sequences: one case needs a group larger than its prefix. */
  cl_mem q = test_buffer(ctx, NULL, 20 * 4 * 64 * 4), bt = test_buffer(ctx, NULL, 20 * 4 * 4);
  cl_mem cl = test_buffer(ctx, NULL, 20 * 4), out = test_buffer(ctx, NULL, 20 * 4 * 64 * 4);
  cl_mem al = test_buffer(ctx, NULL, 16);
  test_poison(ctx, out, 20 * 4 * 64 * 4);
  clpa_cascade_params good;
  clpa_cascade_params_init(&good);
  clpa_decode_params *d = &good.decode;
  d->num_seqs = 4, d->num_heads = 4, d->kv = kv, d->key_cache = kc, d->value_cache = vc;
  d->max_blocks_per_seq = 4, d->max_context_len = 64, d->scale = 0.125f;
  d->query = q, d->block_tables = bt, d->context_lens = cl, d->out = out;
  int32_t starts[3] = {0, 2, 4}, shared[2] = {1, 1}, bad_starts[3] = {0, 2, 2}, late[3] = {1, 2, 4};
  int32_t past[3] = {0, 2, 5}, big[2] = {5, 1}, zero[2] = {0, 1}, crowd[2] = {0, 20};
  good.num_groups = 2, good.group_starts = starts, good.shared_blocks = shared;
  BAD_CALLS(clpa_cascade_params, 16);
  BAD(decode.alibi_slopes = al, "ALiBi", CLPA_ERR_UNSUPPORTED);
  BAD(decode.sliding_window = 8, "sliding windows", CLPA_ERR_UNSUPPORTED);
  BAD(num_groups = -1, "num_groups = -1", CLPA_ERR_INVALID_ARG);
  BAD(group_starts = NULL, "group_starts", CLPA_ERR_INVALID_ARG);
  BAD(group_starts = bad_starts, "group_starts[2] = 2 after 2", CLPA_ERR_INVALID_ARG);
  BAD(group_starts = late, "group_starts[0] = 1", CLPA_ERR_INVALID_ARG);
  BAD(group_starts = past, "group_starts[2] = 5", CLPA_ERR_INVALID_ARG);
  BAD(shared_blocks = big, "shared_blocks[0] = 5", CLPA_ERR_INVALID_ARG);
  BAD(shared_blocks = zero, "shared_blocks[0] = 0", CLPA_ERR_INVALID_ARG);
  BAD(decode.num_seqs = 20, "at least as many tokens", CLPA_ERR_INVALID_ARG); /* 16 < 20 */
  bad[n - 1].p.num_groups = 1, bad[n - 1].p.group_starts = crowd;
  BAD(decode.max_context_len = 65, "max_context_len = 65", CLPA_ERR_INVALID_ARG); /* decode's own checks, first */
  BAD(decode.max_context_len = 8, "shares 16 tokens, more than max_context_len = 8", CLPA_ERR_INVALID_ARG);
  BAD(decode.heads_per_group = 3, "heads_per_group = 3", CLPA_ERR_INVALID_ARG);
  BAD(decode.out = NULL, "out", CLPA_ERR_INVALID_ARG);
  BAD_CALLS_CHECK(clpa_cascade_decode, "clpa_cascade_decode: ");
  ok(clpa_cascade_decode(NULL, &good) == CLPA_ERR_INVALID_ARG, "NULL context");
  ok(clpa_cascade_decode(ctx, NULL) == CLPA_ERR_INVALID_ARG, "NULL params");
  ok(test_untouched(ctx, out, 20 * 4 * 64 * 4), "no refused call wrote to the output");
  cl_mem all[] = {kc, vc, q, bt, cl, out, al};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
}

int main(void) {
  rng_seed_from_env();
  ctx = test_context(0);
  const ccase grid[] = {
      {4, 4, 64, 16, CLPA_DTYPE_F32, CLPA_DTYPE_F32, 2, 3, 4, 2, 0, 0, 0, 0},
      /* a long prefix: several partitions */
      {8, 2, 128, 16, CLPA_DTYPE_F16, CLPA_DTYPE_F32, 1, 6, 40, 1, 1, 0, 0, 0},
      {8, 1, 64, 8, CLPA_DTYPE_BF16, CLPA_DTYPE_F16, 3, 2, 6, 0, 0, 1, 0, 0},
      {4, 2, 96, 32, CLPA_DTYPE_FP8_E4M3, CLPA_DTYPE_F32, 2, 4, 3, 3, 1, 1, 0, 0},
      {4, 4, 128, 16, CLPA_DTYPE_F16, CLPA_DTYPE_BF16, 1, 8, 8, 0, 0, 0, 0, 0},
      /* fp8 that decode's tensor cores take (NVIDIA) and prefill's do not */
      {8, 2, 128, 16, CLPA_DTYPE_FP8_E5M2, CLPA_DTYPE_F32, 2, 3, 5, 2, 1, 0, 0, 0},
      /* regress_cascade_context_past_max: a member's length in (max_context_len,
       * max_context_len + shared], with and without sinks */
      {4, 2, 64, 16, CLPA_DTYPE_F16, CLPA_DTYPE_F32, 2, 3, 4, 1, 0, 0, 1, 0},
      {4, 2, 64, 16, CLPA_DTYPE_F32, CLPA_DTYPE_F32, 1, 4, 3, 1, 1, 0, 1, 0},
      /* regress_cascade_mma_block_prefill_lacks: decode's tensor cores (auto on NVIDIA) take
       * blocks prefill's do not (4, 64 to 256; prefill's take 8 to 32) */
      {4, 2, 64, 64, CLPA_DTYPE_F16, CLPA_DTYPE_F32, 2, 3, 2, 1, 0, 0, 0, CLPA_DECODE_PATH_MMA},
      {4, 4, 64, 4, CLPA_DTYPE_BF16, CLPA_DTYPE_BF16, 1, 3, 5, 1, 0, 0, 0, CLPA_DECODE_PATH_MMA},
  };
  for (size_t i = 0; i < sizeof grid / sizeof *grid; i++) run_case(&grid[i]);
  test_bad_args();
  test_no_faults_left(ctx);
  clpa_context_destroy(ctx);
  return done_testing();
}
