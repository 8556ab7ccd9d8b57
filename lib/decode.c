/*
 * decode.c — clpa_decode: resolves the caches (a clpa_cache or the
 * application's buffers with their layout), validates everything, plans
 * (decode_plan.c: v1 or v2, heads per work-group, the path) and launches one of
 * cl/decode.cl, cl/decode_mma.cl and cl/decode_rows.cl (the last with
 * cl/reduce.cl in v2) through the launch path.
 */
#include <stdlib.h>
#include <string.h>

#include "decode_args.h"
#include "pages_args.h"
#include "plan.h"

/* The kernels' parameters, from their lists (cl/decode_args.h): a table
 * and each parameter's position, DECODE_ARG_<name> and REDUCE_ARG_<name>. */
/* A CSR program takes the page table's (cl/pages_args.h) after them: the
 * lists end with those slots, which a padded launch leaves out. */
static const clpa_param decode_params[] = {DECODE_ARG_LIST(CLPA_PARAM_OF, )
                                               PAGE_ARG_LIST(CLPA_PARAM_OF, )};
static const clpa_param reduce_params[] = {REDUCE_ARG_LIST(CLPA_PARAM_OF, )
                                               PAGE_ARG_LIST(CLPA_PARAM_OF, )};
static const clpa_param list_params[] = {DECODE_LIST_ARG_LIST(CLPA_PARAM_OF, )
                                             PAGE_ARG_LIST(CLPA_PARAM_OF, )};
#define DECODE_SLOT(kind, type, name) DECODE_ARG_##name,
#define REDUCE_SLOT(kind, type, name) REDUCE_ARG_##name,
#define LIST_SLOT(kind, type, name) LIST_ARG_##name,
enum { DECODE_ARG_LIST(DECODE_SLOT, ) PAGE_ARG_LIST(DECODE_SLOT, ) DECODE_ALL_ARGS };
enum { REDUCE_ARG_LIST(REDUCE_SLOT, ) PAGE_ARG_LIST(REDUCE_SLOT, ) REDUCE_ALL_ARGS };
enum { DECODE_LIST_ARG_LIST(LIST_SLOT, ) PAGE_ARG_LIST(LIST_SLOT, ) LIST_ALL_ARGS };
#define DECODE_NUM_ARGS(csr) ((csr) ? DECODE_ALL_ARGS : DECODE_ARG_page_indptr)
#define REDUCE_NUM_ARGS(csr) ((csr) ? REDUCE_ALL_ARGS : REDUCE_ARG_page_indptr)
#define LIST_NUM_ARGS(csr) ((csr) ? LIST_ALL_ARGS : LIST_ARG_page_indptr)

void clpa_decode_params_init(clpa_decode_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->q_dtype = CLPA_DTYPE_F32;
  p->k_scale = p->v_scale = 1.0f;
  p->variant = CLPA_DECODE_AUTO;
}

static clpa_decode_spec decode_spec(const clpa_decode_params *p, const decode_call *c) {
  const int lanes = !c->mma && !c->rows;
  /* Split-key blocks of one token are HND's (a token's key and value rows at the same
   * strides), which decode_mma.cl reads with a table entry a token. */
  const clpa_kv_layout_kind kind =
      c->mma && c->a.kv.block_size == 1 ? CLPA_KV_LAYOUT_HND : c->a.kv.kind;
  const clpa_decode_spec s = {c->a.kv.head_size,  c->a.kv.block_size,        (int32_t)c->a.kv.dtype,
                              (int32_t)p->q_dtype, c->rows ? 1 : c->threads,
                              lanes ? c->sg : 0,
                              c->v2 || c->rows ? c->partition : 0, c->heads_per_group,
                              c->rows ? c->key_vectors : 0,
                              c->maxnreg, /* the tuning row's register cap (lanes only) */
                              c->mma ? c->chunk : 0,
                              c->mma ? c->pipe : 0,
                              c->merge,
                              (int32_t)kind,
                              (int32_t)p->page_table,
                              c->list_entries > 0};
  return s;
}

static const char *decode_kernel_name(const decode_call *c) {
  return c->mma ? "clpa_decode_mma" : c->rows ? "clpa_decode_rows" : "clpa_decode_paged";
}

/* The plan's kernels: the work-groups' and, for v2 without the in-launch
 * merge, reduce.cl's. */
static clpa_status decode_kernels(clpa_context *ctx, const clpa_decode_params *p, clpa_plan *pl) {
  const decode_call *c = &pl->dc;
  const clpa_decode_spec spec = decode_spec(p, c);
  const clpa_family *fam = c->mma    ? &clpa_family_decode_mma
                           : c->rows ? &clpa_family_decode_rows
                                     : &clpa_family_decode;
  clpa_status st = clpa_family_kernel(ctx, fam, &spec, decode_kernel_name(c), &pl->dk);
  if (st == CLPA_OK && c->list_entries > 0)
    st = clpa_family_kernel(ctx, fam, &spec, "clpa_decode_mma_list", &pl->dlist);
  if (st != CLPA_OK || !c->v2 || c->merge) return st;
  /* a CSR length counts pages of the cache's blocks; a padded one is read */
  const int csr = p->page_table == CLPA_PAGE_TABLE_CSR;
  const clpa_reduce_spec rspec = {c->a.kv.head_size, (int32_t)p->q_dtype, c->partition,
                                  csr ? c->a.kv.block_size : 0, (int32_t)p->page_table};
  return clpa_family_kernel(ctx, &clpa_family_reduce, &rspec, "clpa_decode_reduce", &pl->reduce);
}

static clpa_status launch_decode(clpa_context *ctx, const clpa_decode_params *p,
                                 const decode_call *c, cl_kernel k, cl_mem tmp_out,
                                 cl_mem max_logits, cl_mem exp_sums, cl_event *ev) {
  const clpa_decode_spec spec = decode_spec(p, c);
  cl_mem faults, counts = NULL;
  clpa_status st;
  const char *name = decode_kernel_name(c);
  /* Where the work-group kernels merge v2's partitions (decode_v2), they write the output: the
   * last partition of a row to finish merges them, told so by a counter a row. */
  const size_t rows = (size_t)p->num_seqs * (size_t)(p->num_heads / c->heads_per_group);
  if ((st = clpa_faults_buffer(ctx, &faults)) ||
      (c->merge && (st = clpa_part_counts(ctx, rows, &counts))))
    return st;
  const cl_mem out = c->v2 && !c->merge ? NULL : p->out, lse = c->v2 && !c->merge ? NULL : p->lse;
  const cl_ulong q_stride = c->a.q_stride, block_stride = c->a.kv.block_stride;
  const cl_ulong head_stride = c->a.kv.head_stride;
  const cl_int maxb = p->max_blocks_per_seq, maxc = p->max_context_len, nb = c->a.kv.num_blocks;
  const cl_int nh = p->num_heads, nkv = c->a.kv.num_kv_heads, win = p->sliding_window;
  const cl_int mp = c->max_parts, ls = c->logits_stride, npi = p->num_page_indices;
  const cl_float scale = clpa_softmax_scale(p->scale, c->a.kv.head_size);
  const cl_float ks = p->k_scale, vs = p->v_scale, cap = p->soft_cap;
  const int csr = p->page_table == CLPA_PAGE_TABLE_CSR;
#define A(name, v) [DECODE_ARG_##name] = CLPA_ARG(v)
  const clpa_arg args[DECODE_ALL_ARGS] = {
      A(out, out),
      A(lse, lse),
      A(tmp_out, tmp_out),
      A(max_logits, max_logits),
      A(exp_sums, exp_sums),
      A(q, p->query),
      A(q_stride, q_stride),
      A(k_cache, c->a.k),
      A(v_cache, c->a.v),
      A(block_stride, block_stride),
      A(head_stride, head_stride),
      A(block_tables, p->block_tables),
      A(max_blocks_per_seq, maxb),
      A(context_lens, p->context_lens),
      A(max_context_len, maxc),
      A(num_blocks, nb),
      A(num_heads, nh),
      A(num_kv_heads, nkv),
      A(scale, scale),
      A(k_scale, ks),
      A(v_scale, vs),
      A(k_scales, p->k_scale_buffer),
      A(v_scales, p->v_scale_buffer),
      A(alibi, p->alibi_slopes),
      A(soft_cap, cap),
      A(window, win),
      A(sinks, p->sinks),
      A(max_parts, mp),
      A(logits_stride, ls),
      A(faults, faults),
      [DECODE_ARG_logits] = CLPA_ARG_LOCAL(sizeof(float) * (size_t)ls * (size_t)c->heads_per_group),
      A(part_counts, counts),
      A(work, c->work),
      A(page_indptr, p->page_indptr),
      A(page_indices, p->page_indices),
      A(num_page_indices, npi),
      A(last_page_len, p->last_page_len)};
#undef A
  /* heads x sequences x partitions, or heads x a plan's list of busy (sequence, partition) */
  const clpa_ndrange r = {3,
                          {(size_t)(p->num_heads / c->heads_per_group) * (size_t)spec.num_threads,
                           c->list_entries ? (size_t)c->list_entries
                           : c->work       ? (size_t)c->work_pairs
                                           : (size_t)p->num_seqs,
                           c->work ? 1 : (size_t)c->max_parts},
                          {(size_t)spec.num_threads, 1, 1},
                          p->num_wait_events,
                          p->wait_events,
                          ev};
  return clpa_enqueue_listed(ctx, k, name, decode_params, args, DECODE_NUM_ARGS(csr), &r);
}

/* Enqueues the reduce kernel k. */
static clpa_status launch_reduce(clpa_context *ctx, const clpa_decode_params *p,
                                 const decode_call *c, cl_kernel k, cl_mem tmp_out,
                                 cl_mem max_logits, cl_mem exp_sums, cl_event *ev) {
  const cl_int maxc = p->max_context_len, nh = p->num_heads, mp = c->max_parts;
  const cl_int npi = p->num_page_indices;
  const int csr = p->page_table == CLPA_PAGE_TABLE_CSR;
#define A(name, v) [REDUCE_ARG_##name] = CLPA_ARG(v)
  const clpa_arg args[REDUCE_ALL_ARGS] = {
      A(out, p->out),          A(lse, p->lse),           A(max_logits, max_logits),
      A(exp_sums, exp_sums),   A(tmp_out, tmp_out),      A(context_lens, p->context_lens),
      A(max_context_len, maxc), A(num_heads, nh),        A(max_parts, mp),
      A(sinks, p->sinks),      A(page_indptr, p->page_indptr),
      A(page_indices, p->page_indices),                  A(num_page_indices, npi),
      A(last_page_len, p->last_page_len)};
#undef A
  const clpa_ndrange r = {2,
                          {(size_t)p->num_heads, (size_t)p->num_seqs},
                          {1, 1},
                          0,
                          NULL,
                          ev};
  return clpa_enqueue_listed(ctx, k, "clpa_decode_reduce", reduce_params, args,
                             REDUCE_NUM_ARGS(csr), &r);
}

/* A plan without host lengths: its list of c->list_entries entries into `work`, made by
 * decode_mma.cl's clpa_decode_mma_list from the lengths the device holds (one work-group). */
static clpa_status launch_list(clpa_context *ctx, const clpa_decode_params *p, const decode_call *c,
                               cl_kernel k, cl_mem work) {
  const cl_int n = p->num_seqs, entries = c->list_entries, want = c->list_want;
  const cl_int groups = p->num_heads / c->heads_per_group, maxc = p->max_context_len;
  const cl_int win = p->sliding_window, npi = p->num_page_indices;
#define A(name, v) [LIST_ARG_##name] = CLPA_ARG(v)
  const clpa_arg args[LIST_ALL_ARGS] = {
      A(work, work),         A(num_seqs, n),          A(entries, entries),
      A(want, want),         A(groups, groups),       A(context_lens, p->context_lens),
      A(max_context_len, maxc), A(window, win),       A(page_indptr, p->page_indptr),
      A(page_indices, p->page_indices),               A(num_page_indices, npi),
      A(last_page_len, p->last_page_len)};
#undef A
  const clpa_ndrange r = {1, {256}, {256}, p->num_wait_events, p->wait_events, NULL};
  return clpa_enqueue_listed(ctx, k, "clpa_decode_mma_list", list_params, args,
                             LIST_NUM_ARGS(p->page_table == CLPA_PAGE_TABLE_CSR), &r);
}

static clpa_status decode_v2(clpa_context *ctx, const clpa_decode_params *p, const clpa_plan *pl,
                             const decode_call *c) {
  const size_t stats = c->partials; /* the plan checked stats * head_size floats */
  cl_mem tmp_out, max_logits, exp_sums;
  clpa_status st;
  if ((st = clpa_scratch(ctx, 0, stats * (size_t)c->a.kv.head_size * sizeof(float), &tmp_out)) ||
      (st = clpa_scratch(ctx, 1, stats * sizeof(float), &max_logits)) ||
      (st = clpa_scratch(ctx, 2, stats * sizeof(float), &exp_sums)))
    return st;
  /* The work-group kernels merge their partitions themselves where the
   * device orders work-groups (context.c's pick_merge): one launch, no
   * reduce kernel (docs/decisions/0002-decode-v2-merge.md). The rows path
   * (one work-item a work-group, on CPUs) and other devices take the
   * reduce kernel. */
  if (c->list_entries > 0) { /* the list first (the wait list's), then the kernel (the event) */
    decode_call listed = *c;
    clpa_decode_params after = *p;
    if ((st = clpa_scratch(ctx, 6, 16 * (size_t)c->list_entries, &listed.work)) ||
        (st = launch_list(ctx, p, c, pl->dlist, listed.work)))
      return st;
    after.num_wait_events = 0, after.wait_events = NULL;
    return launch_decode(ctx, &after, &listed, pl->dk, tmp_out, max_logits, exp_sums, p->event);
  }
  if (c->merge) return launch_decode(ctx, p, c, pl->dk, tmp_out, max_logits, exp_sums, p->event);
  if ((st = launch_decode(ctx, p, c, pl->dk, tmp_out, max_logits, exp_sums, NULL)) != CLPA_OK)
    return st;
  return launch_reduce(ctx, p, c, pl->reduce, tmp_out, max_logits, exp_sums, p->event);
}

/* A plan's own list of its busy (sequence, partition) pairs (decode_call's
 * work_pairs): a buffer of the plan's (clpa_plan_decode), or one call's in the
 * context's scratch slot 6, written without blocking from the staging ring
 * (no buffer created a call: docs/decisions/0024-prefill-work-list.md). */
static clpa_status work_list(clpa_context *ctx, const clpa_decode_params *p, int own,
                             clpa_plan *pl) {
  decode_call *c = &pl->dc;
  const size_t words = 4 * (size_t)c->work_pairs;
  clpa_staging *s;
  clpa_status st;
  if (!own) {
    if ((st = clpa_staging_take(ctx, words, &s)) != CLPA_OK) return st;
    clpa_decode_plan_list(ctx, p, c, s->host);
    if ((st = clpa_scratch(ctx, 6, sizeof(int32_t) * words, &c->work)) != CLPA_OK) return st;
    return clpa_staging_write(ctx, s, c->work, 0, words, 1, "clEnqueueWriteBuffer(decode work list)");
  }
  int32_t *h = malloc(sizeof(int32_t) * words);
  CLPA_CTX_CHECK(ctx, !h, CLPA_ERR_OUT_OF_MEMORY, "out of memory for a work list of %lld pairs",
                 (long long)c->work_pairs);
  clpa_decode_plan_list(ctx, p, c, h);
  cl_int err;
  pl->work = clCreateBuffer(ctx->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                            sizeof(int32_t) * words, h, &err);
  free(h);
  if (err != CL_SUCCESS) {
    pl->work = NULL;
    return CLPA_CL_FAIL(ctx, err, "clCreateBuffer(decode plan's work list)");
  }
  pl->owns_lists = 1, c->work = pl->work;
  return CLPA_OK;
}

clpa_status clpa_decode_plan_fill(clpa_context *ctx, const clpa_decode_params *p, int make,
                                  clpa_plan *pl) {
  clpa_status st = clpa_plan_begin(ctx, p, PLAN_DECODE, pl);
  if (st != CLPA_OK) return st;
  CLPA_CHECK_RESERVED(ctx->error, p, "p->");
  decode_call *c = &pl->dc;
  CLPA_ATTN_OF(&c->a, p);
  if ((st = clpa_attn_layout(ctx, &c->a, p->cache, p->layer, p->key_cache, p->value_cache,
                             &p->kv)) ||
      (st = clpa_attn_validate(ctx, &c->a)) || (st = clpa_decode_validate(ctx, p, &c->a.kv)) ||
      (st = clpa_decode_plan(ctx, p, c)))
    return st;
  c->merge = c->v2 && !c->rows && ctx->merge_in_launch;
  pl->kv = c->a.kv;
  /* What a run reads: the shapes and options; the buffers are the run's */
  pl->dp = *p;
  pl->dp.host_context_lens = NULL, pl->dp.cache = NULL, pl->dp.key_cache = NULL;
  pl->dp.value_cache = NULL, pl->dp.event = NULL, pl->dp.wait_events = NULL;
  pl->dp.num_wait_events = 0;
  /* A one-call decode (PLAN_KERNELS) makes the list a plan would, so that both give the same
   * results */
  if (make && p->num_seqs > 0 &&
      ((st = decode_kernels(ctx, p, pl)) != CLPA_OK ||
       (c->work_pairs > 0 && (st = work_list(ctx, p, make == PLAN_OWN, pl)) != CLPA_OK))) {
    clpa_plan_fini(pl);
    return st;
  }
  return CLPA_OK;
}

clpa_status clpa_decode_run_lens(clpa_plan *pl, const clpa_attn_inputs *in, cl_mem lens) {
  clpa_context *ctx = pl->ctx;
  clpa_decode_params q = pl->dp;
  CLPA_APPLY_INPUTS(&q, in);
  q.context_lens = lens;
  decode_call c = pl->dc;
  clpa_status st;
  CLPA_ATTN_OF(&c.a, &q);
  const int csr = q.page_table == CLPA_PAGE_TABLE_CSR;
  if ((st = clpa_plan_caches(pl, in, &c.a)) || (st = clpa_attn_validate(ctx, &c.a)) ||
      (st = clpa_attn_check_buffers(ctx, &c.a, q.num_seqs, (size_t)q.num_seqs)) ||
      ((!csr || lens) &&
       (st = clpa_check_buffer(ctx, lens, "context_lens", (size_t)q.num_seqs * 4, 0))))
    return st;
  if (q.num_seqs == 0) return clpa_run_nothing(ctx, in);
  if (!c.v2) return launch_decode(ctx, &q, &c, pl->dk, NULL, NULL, NULL, q.event);
  return decode_v2(ctx, &q, pl, &c);
}

clpa_status clpa_decode_run(clpa_plan *pl, const clpa_attn_inputs *in) {
  CLPA_CTX_CHECK(pl->ctx, pl->dp.page_table == CLPA_PAGE_TABLE_CSR && in->context_lens,
                 CLPA_ERR_INVALID_ARG,
                 "context_lens is given to a plan of CSR page tables (the lengths come from"
                 " page_indptr and last_page_len): leave it NULL");
  return clpa_decode_run_lens(pl, in, in->context_lens);
}

static clpa_status clpa_decode_choice_impl(clpa_context *ctx, const clpa_decode_params *p,
                                           clpa_decode_path *path, clpa_decode_variant *variant,
                                           int32_t *partition_size, int32_t *heads_per_group) {
  clpa_plan pl;
  clpa_status st = clpa_decode_plan_fill(ctx, p, PLAN_CHECK, &pl);
  if (st != CLPA_OK) return st;
  clpa_plan_info info;
  clpa_plan_describe(&pl, &info);
  clpa_plan_fini(&pl);
  if (path) *path = (clpa_decode_path)info.path;
  if (variant) *variant = info.variant;
  if (partition_size) *partition_size = info.partition_size;
  if (heads_per_group) *heads_per_group = info.heads_per_group;
  return CLPA_OK;
}

clpa_status clpa_decode_choice(clpa_context *ctx, const clpa_decode_params *p,
                               clpa_decode_path *path, clpa_decode_variant *variant,
                               int32_t *partition_size, int32_t *heads_per_group) {
  CLPA_API_CALL(clpa_decode_choice_impl(ctx, p, path, variant, partition_size, heads_per_group));
}

/* A plan, one run, a release: a plan's run gives the same results. */
static clpa_status clpa_decode_impl(clpa_context *ctx, const clpa_decode_params *p) {
  clpa_plan pl;
  clpa_status st = clpa_decode_plan_fill(ctx, p, PLAN_KERNELS, &pl);
  if (st != CLPA_OK) return st;
  clpa_attn_inputs in;
  CLPA_INPUTS_OF(&in, p);
  in.context_lens = p->context_lens;
  st = clpa_decode_run(&pl, &in);
  clpa_plan_fini(&pl);
  return st;
}

clpa_status clpa_decode(clpa_context *ctx, const clpa_decode_params *p) {
  CLPA_API_CALL(clpa_decode_impl(ctx, p));
}
