/*
 * cascade.c — clpa_cascade_decode and its plan: the shared prefix of each
 * group through a prefill plan (the group's decode queries, non-causal,
 * over the shared blocks), every sequence's suffix through a decode plan
 * (a suffix view of its table made on the device), and clpa_merge_states.
 * The prefill and decode plans check what they check for their own calls,
 * so every check holds here too.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blocks_args.h"
#include "plan.h"

/* clpa_blocks_cascade_split's parameters, from their list
 * (cl/blocks_args.h): a table and BLOCKS_CASCADE_SPLIT_ARG_<name>. */
static const clpa_param split_params[] = {BLOCKS_CASCADE_SPLIT_ARG_LIST(CLPA_PARAM_OF, )};
#define SPLIT_SLOT(kind, type, name) BLOCKS_CASCADE_SPLIT_ARG_##name,
enum { BLOCKS_CASCADE_SPLIT_ARG_LIST(SPLIT_SLOT, ) BLOCKS_CASCADE_SPLIT_NUM_ARGS };

void clpa_cascade_params_init(clpa_cascade_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  clpa_decode_params_init(&p->decode);
}

static clpa_status check_groups(clpa_context *ctx, const clpa_cascade_params *p, int block_size) {
  const clpa_decode_params *d = &p->decode;
  CLPA_CTX_CHECK(ctx, d->alibi_slopes || d->sliding_window, CLPA_ERR_UNSUPPORTED,
                 "ALiBi and sliding windows depend on each sequence's own position in the shared"
                 " prefix: use clpa_decode");
  CLPA_CTX_CHECK(ctx, d->page_table != CLPA_PAGE_TABLE_PADDED, CLPA_ERR_UNSUPPORTED,
                 "decode.page_table = %d: cascade decode reads padded block tables (a group's"
                 " shared prefix is its rows' first shared_blocks columns)", (int)d->page_table);
  CLPA_CTX_CHECK(ctx, p->num_groups < 0, CLPA_ERR_INVALID_ARG, "num_groups = %d", p->num_groups);
  if (p->num_groups == 0) return CLPA_OK;
  CLPA_CTX_CHECK(ctx, !p->group_starts || !p->shared_blocks, CLPA_ERR_INVALID_ARG,
                 "group_starts and shared_blocks (host arrays) must be given");
  CLPA_CTX_CHECK(ctx, p->group_starts[0] != 0, CLPA_ERR_INVALID_ARG,
                 "group_starts[0] = %d (must be 0)", p->group_starts[0]);
  for (int32_t g = 0; g < p->num_groups; g++) {
    const int32_t a = p->group_starts[g], b = p->group_starts[g + 1], sh = p->shared_blocks[g];
    CLPA_CTX_CHECK(ctx, b <= a || b > d->num_seqs, CLPA_ERR_INVALID_ARG,
                   "group_starts[%d] = %d after %d (groups are non-empty runs of the %d sequences)",
                   g + 1, b, a, d->num_seqs);
    CLPA_CTX_CHECK(ctx, sh < 1 || sh > d->max_blocks_per_seq, CLPA_ERR_INVALID_ARG,
                   "shared_blocks[%d] = %d (1 .. max_blocks_per_seq = %d)", g, sh,
                   d->max_blocks_per_seq);
    CLPA_CTX_CHECK(ctx, (int64_t)sh * block_size > d->max_context_len, CLPA_ERR_INVALID_ARG,
                   "group %d shares %lld tokens, more than max_context_len = %d (every member's"
                   " context holds them)", g, (long long)sh * block_size, d->max_context_len);
    CLPA_CTX_CHECK(ctx, (int64_t)sh * block_size < b - a, CLPA_ERR_INVALID_ARG,
                   "group %d shares %d tokens but has %d members (a group must share at least as"
                   " many tokens as it has members)", g, sh * block_size, b - a);
  }
  return CLPA_OK;
}

/* A buffer of the plan's own. */
static clpa_status own_buffer(clpa_context *ctx, size_t bytes, const void *host, cl_mem *out) {
  cl_int err;
  *out = clCreateBuffer(ctx->cl, host ? CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR : CL_MEM_READ_WRITE,
                        bytes ? bytes : 4, (void *)host, &err);
  if (err != CL_SUCCESS) {
    *out = NULL;
    return CLPA_CL_FAIL(ctx, err, "clCreateBuffer(cascade scratch)");
  }
  return CLPA_OK;
}

enum { SHARED, SUFFIX_TABLES, SUFFIX_LENS, GROUP_TABLES, PRE_OUT, PRE_LSE, SUF_OUT, SUF_LSE, NBUF };

/* The groups' prefix plan: the group's decode queries, non-causal, over
 * its shared blocks, in decode's precision: tensor cores (queries and
 * probabilities rounded to the cache's dtype) only when decode runs on
 * them too, and prefill's take the cache (decode's take blocks that
 * prefill's do not: 4 tokens, 64 to 256; there the prefix keeps f32, as
 * on tiles, a closer result than decode's rounded one). */
static clpa_status plan_prefix(clpa_context *ctx, const clpa_cascade_params *p, int make,
                               clpa_plan *pl) {
  const clpa_decode_params *d = &p->decode;
  int32_t *cached = malloc(sizeof(int32_t) * (size_t)p->num_groups);
  if (!cached) return CLPA_FAIL(ctx->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  for (int32_t g = 0; g < p->num_groups; g++)
    cached[g] = p->shared_blocks[g] * pl->kv.block_size - (p->group_starts[g + 1] - p->group_starts[g]);
  clpa_prefill_params pp;
  clpa_prefill_params_init(&pp);
  pp.num_seqs = p->num_groups, pp.num_heads = d->num_heads, pp.cache = d->cache;
  pp.layer = d->layer, pp.key_cache = d->key_cache, pp.value_cache = d->value_cache, pp.kv = d->kv;
  pp.max_blocks_per_seq = d->max_blocks_per_seq, pp.cu_seqlens_q = p->group_starts;
  pp.cached_lens = cached, pp.causal = 0, pp.q_dtype = d->q_dtype, pp.scale = d->scale;
  pp.soft_cap = d->soft_cap, pp.q_stride = d->q_stride, pp.precision = d->precision;
  /* prefill's tensor cores where decode's ran on a 2-byte cache; decode's
   * f32 (3xTF32) keeps f32's precision, as the tiles path does, and an fp8
   * cache's prefix stays on tiles (prefill's mma on fp8 is not measured in
   * cascade) */
  const int rounded = clpa_dtype_size(pl->kv.dtype) == 2;
  /* the prefix's work list is the plan's own: the suffix plan's run comes between */
  const int how = make ? PLAN_OWN : PLAN_CHECK;
  clpa_status st = CLPA_OK;
  if (!(pl->prefix = malloc(sizeof *pl->prefix)))
    st = CLPA_FAIL(ctx->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  /* prefill's tensor cores tried first; where they refuse the cache, prefill's own choice */
  if (st == CLPA_OK && pl->suffix->dc.mma && rounded) {
    char before[CLPA_ERROR_MAX];
    memcpy(before, ctx->error, CLPA_ERROR_MAX);
    pp.path = CLPA_PREFILL_MMA;
    st = clpa_prefill_plan_fill(ctx, &pp, how, pl->prefix);
    if (st == CLPA_ERR_UNSUPPORTED) { /* not an error: the choice below, as decode's */
      clpa_forget_refusal(ctx, before);
      pp.path = CLPA_PREFILL_AUTO;
      st = CLPA_OK;
    }
  }
  clpa_plan check;
  if (st == CLPA_OK && pp.path != CLPA_PREFILL_MMA &&
      (st = clpa_prefill_plan_fill(ctx, &pp, PLAN_CHECK, &check)) == CLPA_OK) {
    if (check.ps.path == CLPA_PREFILL_MMA) pp.path = CLPA_PREFILL_TILES;
    clpa_plan_fini(&check);
    st = clpa_prefill_plan_fill(ctx, &pp, how, pl->prefix);
  }
  if (st != CLPA_OK) {
    free(pl->prefix);
    pl->prefix = NULL;
  }
  free(cached);
  return st;
}

/* The plan's buffers: which group each sequence is in (as shared
 * blocks), the suffix views, the group tables, the two halves' results. */
static clpa_status plan_buffers(clpa_context *ctx, const clpa_cascade_params *p, clpa_plan *pl) {
  const clpa_decode_params *d = &p->decode;
  const size_t n = (size_t)d->num_seqs, mb = (size_t)d->max_blocks_per_seq;
  const size_t rows = n * (size_t)d->num_heads, io = clpa_dtype_size(d->q_dtype);
  const size_t outs = rows * (size_t)pl->kv.head_size * io;
  int32_t *shared = calloc(n ? n : 1, sizeof *shared);
  if (!shared) return CLPA_FAIL(ctx->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  for (int32_t g = 0; g < p->num_groups; g++)
    for (int32_t s = p->group_starts[g]; s < p->group_starts[g + 1]; s++) shared[s] = p->shared_blocks[g];
  const size_t bytes[NBUF] = {n * 4, n * mb * 4, n * 4, (size_t)p->num_groups * mb * 4,
                              outs, rows * 4, outs, rows * 4};
  clpa_status st = CLPA_OK;
  for (int i = 0; i < NBUF && st == CLPA_OK; i++)
    st = own_buffer(ctx, bytes[i], i == SHARED ? shared : NULL, &pl->cascade_bufs[i]);
  free(shared);
  return st;
}

clpa_status clpa_cascade_plan_fill(clpa_context *ctx, const clpa_cascade_params *p, int make,
                                   clpa_plan *pl) {
  clpa_status st = clpa_plan_begin(ctx, p, PLAN_CASCADE, pl);
  if (st != CLPA_OK) return st;
  CLPA_CHECK_RESERVED(ctx->error, p, "p->");
  CLPA_CHECK_RESERVED(ctx->error, &p->decode, "p->decode.");
  const clpa_decode_params *d = &p->decode;
  clpa_attn a;
  CLPA_ATTN_OF(&a, d);
  if ((st = clpa_attn_layout(ctx, &a, d->cache, d->layer, d->key_cache, d->value_cache, &d->kv)) ||
      (st = clpa_attn_validate(ctx, &a)) || (st = clpa_decode_validate(ctx, d, &a.kv)) ||
      (st = check_groups(ctx, p, a.kv.block_size)))
    return st;
  pl->kv = a.kv;
  if (!(pl->suffix = malloc(sizeof *pl->suffix)))
    return CLPA_FAIL(ctx->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  if ((st = clpa_decode_plan_fill(ctx, d, make, pl->suffix)) != CLPA_OK) {
    free(pl->suffix);
    pl->suffix = NULL;
    return st;
  }
  if (d->num_seqs == 0 || p->num_groups == 0) return CLPA_OK; /* nothing shared: decode alone */
  pl->num_groups = p->num_groups;
  pl->group_starts = malloc(sizeof(int32_t) * ((size_t)p->num_groups + 1));
  if (!pl->group_starts) st = CLPA_FAIL(ctx->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  else memcpy(pl->group_starts, p->group_starts, sizeof(int32_t) * ((size_t)p->num_groups + 1));
  if (st == CLPA_OK) st = plan_prefix(ctx, p, make, pl);
  if (st == CLPA_OK && make)
    if ((st = plan_buffers(ctx, p, pl)) == CLPA_OK)
      st = clpa_family_kernel(ctx, &clpa_family_blocks, NULL, "clpa_blocks_cascade_split", &pl->split);
  if (st != CLPA_OK) clpa_plan_fini(pl);
  return st;
}

clpa_status clpa_cascade_run(clpa_plan *pl, const clpa_attn_inputs *in) {
  clpa_context *ctx = pl->ctx;
  clpa_decode_params d = pl->suffix->dp;
  CLPA_APPLY_INPUTS(&d, in);
  d.context_lens = in->context_lens;
  CLPA_CTX_CHECK(ctx, in->alibi_slopes, CLPA_ERR_UNSUPPORTED,
                 "ALiBi depends on each sequence's own position in the shared prefix: use"
                 " clpa_decode");
  if (!pl->prefix) return clpa_decode_run(pl->suffix, in); /* nothing shared */
  clpa_attn a;
  clpa_status st;
  CLPA_ATTN_OF(&a, &d);
  if ((st = clpa_plan_caches(pl, in, &a)) || (st = clpa_attn_validate(ctx, &a)) ||
      (st = clpa_attn_check_buffers(ctx, &a, d.num_seqs, (size_t)d.num_seqs)) ||
      (st = clpa_check_buffer(ctx, d.context_lens, "context_lens", (size_t)d.num_seqs * 4, 0)))
    return st;
  const cl_mem *b = pl->cascade_bufs;
  const size_t n = (size_t)d.num_seqs, mb = (size_t)d.max_blocks_per_seq;
  const size_t rows = n * (size_t)d.num_heads;
  /* 1. The prefix: every row starts empty (lse -inf), the grouped rows get
   * their group's shared keys, all of them (non-causal), through each
   * group's table: its first member's row (the shared blocks lead it). */
  const cl_float empty = -INFINITY;
  CLPA_CL_CHECK(ctx, clEnqueueFillBuffer(ctx->queue, b[PRE_LSE], &empty, sizeof empty, 0, rows * 4,
                                         d.num_wait_events, d.wait_events, NULL),
                "clEnqueueFillBuffer(prefix lse)");
  for (int32_t g = 0; g < pl->num_groups; g++)
    CLPA_CL_CHECK(ctx, clEnqueueCopyBuffer(ctx->queue, d.block_tables, b[GROUP_TABLES],
                                           (size_t)pl->group_starts[g] * mb * 4, (size_t)g * mb * 4,
                                           mb * 4, 0, NULL, NULL),
                  "clEnqueueCopyBuffer(group table)");
  clpa_attn_inputs pre = *in;
  pre.block_tables = b[GROUP_TABLES], pre.out = b[PRE_OUT], pre.lse = b[PRE_LSE];
  pre.alibi_slopes = pre.sinks = NULL, pre.num_wait_events = 0, pre.wait_events = NULL;
  pre.event = NULL;
  if ((st = clpa_prefill_run(pl->prefix, &pre)) != CLPA_OK) return st;
  /* 2. The suffix view: tables shifted past the shared blocks, lengths
   * less them; a bad length is taken as 0, its prefix dropped. */
  cl_mem faults;
  if ((st = clpa_faults_buffer(ctx, &faults))) return st;
  const cl_int maxb = d.max_blocks_per_seq, maxc = d.max_context_len, bs = pl->kv.block_size;
  const cl_int nh = d.num_heads;
#define A(name, v) [BLOCKS_CASCADE_SPLIT_ARG_##name] = CLPA_ARG(v)
  const clpa_arg args[BLOCKS_CASCADE_SPLIT_NUM_ARGS] = {
      A(tables, d.block_tables),          A(lens, d.context_lens),
      A(max_context_len, maxc),           A(shared, b[SHARED]),
      A(max_blocks, maxb),                A(block_size, bs),
      A(num_heads, nh),                   A(suffix_tables, b[SUFFIX_TABLES]),
      A(suffix_lens, b[SUFFIX_LENS]),     A(prefix_lse, b[PRE_LSE]),
      A(faults, faults)};
#undef A
  const clpa_ndrange r = {2, {mb, n}, {0}, 0, NULL, NULL};
  if ((st = clpa_enqueue_listed(ctx, pl->split, "clpa_blocks_cascade_split", split_params, args,
                                BLOCKS_CASCADE_SPLIT_NUM_ARGS, &r)))
    return st;
  /* 3. Every sequence's own suffix (the sink, once, goes with it). */
  clpa_attn_inputs suf = *in;
  suf.block_tables = b[SUFFIX_TABLES], suf.context_lens = b[SUFFIX_LENS];
  suf.out = b[SUF_OUT], suf.lse = b[SUF_LSE];
  suf.num_wait_events = 0, suf.wait_events = NULL, suf.event = NULL;
  if ((st = clpa_decode_run(pl->suffix, &suf)) != CLPA_OK) return st;
  /* 4. Merge the two into the caller's output. */
  clpa_merge_states_params mp;
  clpa_merge_states_params_init(&mp);
  mp.num_rows = (int32_t)rows, mp.head_size = pl->kv.head_size, mp.dtype = d.q_dtype;
  mp.outs[0] = b[PRE_OUT], mp.lses[0] = b[PRE_LSE], mp.outs[1] = b[SUF_OUT], mp.lses[1] = b[SUF_LSE];
  mp.out = d.out, mp.lse = d.lse, mp.event = d.event;
  return clpa_merge_states(ctx, &mp);
}

/* A plan, one run, a release. */
static clpa_status clpa_cascade_decode_impl(clpa_context *ctx, const clpa_cascade_params *p) {
  clpa_plan pl;
  clpa_status st = clpa_cascade_plan_fill(ctx, p, PLAN_KERNELS, &pl);
  if (st != CLPA_OK) return st;
  clpa_attn_inputs in;
  CLPA_INPUTS_OF(&in, &p->decode);
  in.context_lens = p->decode.context_lens;
  st = clpa_cascade_run(&pl, &in);
  clpa_plan_fini(&pl);
  return st;
}

clpa_status clpa_cascade_decode(clpa_context *ctx, const clpa_cascade_params *p) {
  CLPA_API_CALL(clpa_cascade_decode_impl(ctx, p));
}
