/*
 * prefill.c — clpa_prefill (cl/prefill.cl and a path's file; the kernels'
 * parameters are cl/prefill_args.h's list, set here by name): validate
 * everything, including the host-side sequence lengths, plan the work list
 * of row tiles, upload it (plan) and launch (run). The path, shape and
 * build are prefill_paths.c's; a mixed step's decode rows (split, or on
 * decode's kernel) are planned in prefill_mixed.c; clpa_merge_states is
 * merge.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "block_mask.h"
#include "plan.h"
#include "prefill_mixed.h"
#include "prefill_paths.h"
#include "pages_args.h"
#include "prefill_args.h"
#include "size_math.h"

/* The paths' parameters, from their list: a table and each parameter's
 * position, PREFILL_ARG_<name>. */
/* A CSR program takes the page table's (cl/pages_args.h) after them: the
 * list ends with those slots, which a padded launch leaves out. */
static const clpa_param prefill_params[] = {PREFILL_ARG_LIST(CLPA_PARAM_OF, )
                                                PAGE_ARG_LIST(CLPA_PARAM_OF, )};
#define PREFILL_SLOT(kind, type, name) PREFILL_ARG_##name,
enum { PREFILL_ARG_LIST(PREFILL_SLOT, ) PAGE_ARG_LIST(PREFILL_SLOT, ) PREFILL_ALL_ARGS };
/* prefill.cl's clpa_prefill_merge's: PMERGE_ARG_<name>. */
static const clpa_param pmerge_params[] = {PREFILL_MERGE_ARG_LIST(CLPA_PARAM_OF, )};
#define PMERGE_SLOT(kind, type, name) PMERGE_ARG_##name,
enum { PREFILL_MERGE_ARG_LIST(PMERGE_SLOT, ) PMERGE_NUM_ARGS };

#define PMERGE_THREADS 32 /* prefill.cl's MERGE_THREADS */

void clpa_prefill_params_init(clpa_prefill_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->causal = 1;
  p->q_dtype = CLPA_DTYPE_F32;
  p->k_scale = p->v_scale = 1.0f;
}

/* The sequence lengths (host arrays): monotone offsets, each sequence
 * inside its block-table row. Sets *total to the new tokens. */
static clpa_status check_lengths(clpa_context *ctx, const clpa_prefill_params *p,
                                 const clpa_kv_layout *kv, int32_t *total, size_t *mask_bytes) {
  CLPA_CTX_CHECK(ctx, p->num_seqs < 0, CLPA_ERR_INVALID_ARG, "num_seqs = %d", p->num_seqs);
  CLPA_CTX_CHECK(ctx, !p->cu_seqlens_q || (p->num_seqs > 0 && !p->cached_lens),
                 CLPA_ERR_INVALID_ARG, "cu_seqlens_q and cached_lens (host arrays) must be given");
  CLPA_CTX_CHECK(ctx, p->cu_seqlens_q[0] < 0, CLPA_ERR_INVALID_ARG,
                 "cu_seqlens_q[0] = %d (must be >= 0)", p->cu_seqlens_q[0]);
  /* a CSR row's length is on the device: the kernels check it */
  const int64_t cap = p->page_table == CLPA_PAGE_TABLE_PADDED
                          ? (int64_t)p->max_blocks_per_seq * kv->block_size
                          : INT64_MAX;
  for (int32_t s = 0; s < p->num_seqs; s++) {
    const int32_t a = p->cu_seqlens_q[s], b = p->cu_seqlens_q[s + 1], c = p->cached_lens[s];
    CLPA_CTX_CHECK(ctx, b < a, CLPA_ERR_INVALID_ARG,
                   "cu_seqlens_q[%d] = %d < cu_seqlens_q[%d] = %d (offsets must not decrease)",
                   s + 1, b, s, a);
    CLPA_CTX_CHECK(ctx, c < 0, CLPA_ERR_INVALID_ARG, "cached_lens[%d] = %d", s, c);
    CLPA_CTX_CHECK(ctx, (int64_t)c + (b - a) > cap, CLPA_ERR_INVALID_ARG,
                   "sequence %d: cached_lens %d + %d new tokens exceed its block-table row (%d"
                   " blocks x %d tokens)", s, c, b - a, p->max_blocks_per_seq, kv->block_size);
    CLPA_CTX_CHECK(ctx, (int64_t)c + (b - a) > CLPA_MAX_CONTEXT_LEN, CLPA_ERR_UNSUPPORTED,
                   "sequence %d: cached_lens %d + %d new tokens are past CLPA_MAX_CONTEXT_LEN = %d",
                   s, c, b - a, CLPA_MAX_CONTEXT_LEN);
  }
  *total = p->cu_seqlens_q[p->num_seqs];
  *mask_bytes = 0;
  if (!p->block_mask) return CLPA_OK;
  CLPA_CTX_CHECK(ctx, p->mask_block <= 0 || p->mask_block % 64 != 0, CLPA_ERR_INVALID_ARG,
                 "mask_block = %d (a positive multiple of 64 tokens)", p->mask_block);
  CLPA_CTX_CHECK(ctx, p->mask_q_blocks <= 0 || p->mask_k_blocks <= 0, CLPA_ERR_INVALID_ARG,
                 "mask_q_blocks = %d, mask_k_blocks = %d (both > 0)", p->mask_q_blocks,
                 p->mask_k_blocks);
  const int32_t s = clpa_block_mask_uncovered(p->num_seqs, p->cu_seqlens_q, p->cached_lens,
                                              p->mask_block, p->mask_q_blocks, p->mask_k_blocks);
  const int32_t *cu = p->cu_seqlens_q;
  CLPA_CTX_CHECK(ctx, s >= 0, CLPA_ERR_INVALID_ARG,
                 "sequence %d: %lld new tokens over %lld keys need more than mask_q_blocks = %d"
                 " x mask_k_blocks = %d blocks of %d", s, (long long)(cu[s + 1] - cu[s]),
                 (long long)p->cached_lens[s] + (cu[s + 1] - cu[s]), p->mask_q_blocks,
                 p->mask_k_blocks, p->mask_block);
  size_t need = 0;
  CLPA_CTX_CHECK(ctx, !clpa_size_mul_add((size_t)p->num_seqs * (size_t)p->num_heads,
                                         (size_t)p->mask_q_blocks, 0, &need) ||
                          !clpa_size_mul_add(need, (size_t)p->mask_k_blocks, 0, &need),
                 CLPA_ERR_INVALID_ARG, "the block mask's size overflows size_t");
  *mask_bytes = need;
  return CLPA_OK;
}

/* A work item of the plan (a row tile, or a split part of one: kb, slot,
 * prefill.cl's work_item) and the end of the keys it walks (its last
 * position + 1). */
typedef struct plan_tile {
  int64_t end;
  int32_t seq, r0, kb, slot;
} plan_tile;

/* Longest first, then by sequence, row and part: a total order, so the
 * same plan every time. */
static int longest_first(const void *a, const void *b) {
  const plan_tile *x = a, *y = b;
  if (x->end != y->end) return x->end > y->end ? -1 : 1;
  if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
  if (x->r0 != y->r0) return x->r0 < y->r0 ? -1 : 1;
  return x->kb < y->kb ? -1 : x->kb > y->kb;
}

/* A sequence's query rows as the kernel numbers them: qpk a token,
 * interleaved, or with heads apart (mma with a block mask: each head's
 * tokens from a multiple of rows on, cl/prefill_mma.cl's mma_row), and the
 * row tiles they make. */
static int heads_apart(const clpa_prefill_spec *ps) {
  return ps->path == CLPA_PREFILL_MMA && ps->sparse;
}
static int64_t seq_rows(int64_t new_len, int qpk, int rows, int apart) {
  return (apart ? (new_len + rows - 1) / rows * rows : new_len) * qpk;
}

/* The per-sequence info (first token, new_len, cached_len), the work
 * items (sequence, first row, first key, partial slot: a split row's
 * parts, in slots in order) and the merge groups (sequence, first row,
 * first slot, slots) into host words hi[3 * num_seqs], hw[4 * (tiles +
 * split_rows)]. */
static clpa_status make_lists(clpa_context *ctx, const clpa_prefill_params *p, int qpk,
                              const clpa_plan *pl, int32_t *hi, int32_t *hw) {
  const int rows = pl->ps.rows, apart = heads_apart(&pl->ps);
  const size_t tiles = pl->tiles;
  plan_tile *pt = malloc(sizeof(plan_tile) * tiles);
  if (!pt) return CLPA_FAIL(ctx->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory for %zu tiles", tiles);
  size_t t = 0;
  int32_t slot = 0, *grp = hw + 4 * tiles;
  for (int32_t s = 0; s < p->num_seqs; s++) {
    const int32_t new_len = p->cu_seqlens_q[s + 1] - p->cu_seqlens_q[s];
    hi[3 * s] = p->cu_seqlens_q[s], hi[3 * s + 1] = new_len, hi[3 * s + 2] = p->cached_lens[s];
    if (s < pl->dec_rows) continue; /* decode's kernel takes it */
    const int64_t parts = clpa_prefill_seq_parts(pl, p, s, qpk);
    if (parts > 1) { /* a decode row: one tile, its keys in parts */
      int64_t lo, end;
      clpa_prefill_seq_keys(p, s, &lo, &end);
      const int64_t P = pl->split_keys;
      grp[0] = s, grp[1] = 0, grp[2] = slot, grp[3] = (int32_t)parts, grp += 4;
      for (int64_t j = 0, kb = lo / P * P; j < parts; j++, kb += P, t++)
        pt[t] = (plan_tile){kb + P < end ? kb + P : end, s, 0, (int32_t)kb, slot++};
      continue;
    }
    const int64_t nrows = seq_rows(new_len, qpk, rows, apart), pad = nrows / qpk;
    for (int64_t r0 = 0; r0 < nrows; r0 += rows, t++) {
      /* its last token */
      const int64_t last = apart ? (r0 % pad + rows < new_len ? r0 % pad + rows : new_len) - 1
                                 : ((r0 + rows < nrows ? r0 + rows : nrows) - 1) / qpk;
      const int64_t end = p->cached_lens[s] + (p->causal ? last + 1 : new_len);
      pt[t] = (plan_tile){end, s, (int32_t)r0, 0, -1};
    }
  }
  /* On GPUs longest first, as FlashAttention-2 orders causal tiles: the
   * short ones then fill the compute units as the long ones finish,
   * instead of a last wave of long tiles running alone. CPUs keep each
   * sequence's tiles together, in order: consecutive tiles there reread
   * the same keys from cache (docs/decisions/0023-prefill-tile-order.md). */
  if (!ctx->info.is_cpu) qsort(pt, tiles, sizeof *pt, longest_first);
  for (t = 0; t < tiles; t++)
    hw[4 * t] = pt[t].seq, hw[4 * t + 1] = pt[t].r0, hw[4 * t + 2] = pt[t].kb,
           hw[4 * t + 3] = pt[t].slot;
  free(pt);
  return CLPA_OK;
}

/* The words of a plan's lists: the sequences' info, the work items and
 * merge groups (where the prefill kernel runs), the decode rows' lengths
 * (where decode's kernel takes them: a padded table's, or those a CSR
 * table's rows must have). */
static void list_words(const clpa_prefill_params *p, const clpa_plan *pl, size_t *ni, size_t *nw,
                       size_t *nl) {
  *ni = pl->tiles ? 3 * (size_t)p->num_seqs : 0;
  *nw = pl->tiles ? 4 * (pl->tiles + pl->split_rows) : 0;
  *nl = pl->dec ? (size_t)pl->dec_rows : 0;
}

/* The lists into h (list_words' counts, in that order). */
static clpa_status fill_lists(clpa_context *ctx, const clpa_prefill_params *p, int qpk,
                              const clpa_plan *pl, int32_t *h) {
  size_t ni, nw, nl;
  list_words(p, pl, &ni, &nw, &nl);
  for (size_t s = 0; s < nl; s++) h[ni + nw + s] = p->cached_lens[s] + 1;
  return ni ? make_lists(ctx, p, qpk, pl, h, h + ni) : CLPA_OK;
}

/* A plan's own lists: buffers made from the host words, which they copy. */
static clpa_status own_lists(clpa_context *ctx, const clpa_prefill_params *p, int qpk,
                             clpa_plan *pl) {
  size_t ni, nw, nl;
  list_words(p, pl, &ni, &nw, &nl);
  int32_t *h = malloc(sizeof(int32_t) * (ni + nw + nl + 1));
  if (!h) return CLPA_FAIL(ctx->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory for %zu tiles", pl->tiles);
  clpa_status st = fill_lists(ctx, p, qpk, pl, h);
  cl_int err = CL_SUCCESS;
  const cl_mem_flags flags = CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR;
  pl->owns_lists = 1;
  if (st == CLPA_OK && ni) pl->info = clCreateBuffer(ctx->cl, flags, sizeof(int32_t) * ni, h, &err);
  if (st == CLPA_OK && err == CL_SUCCESS && nw)
    pl->work = clCreateBuffer(ctx->cl, flags, sizeof(int32_t) * nw, h + ni, &err);
  if (st == CLPA_OK && err == CL_SUCCESS && nl)
    pl->dec_lens = clCreateBuffer(ctx->cl, flags, sizeof(int32_t) * nl, h + ni + nw, &err);
  free(h);
  if (st == CLPA_OK && err != CL_SUCCESS) st = CLPA_CL_FAIL(ctx, err, "clCreateBuffer(prefill plan)");
  return st;
}

/* One call's lists, in the context's grow-only scratch (slots 4, 5 and 9)
 * by writes that do not block from the context's staging ring: the queue is
 * in order, so they land after the last call's kernel has read the old list,
 * and no buffer is created per call (docs/decisions/0024-prefill-work-list.md). */
static clpa_status scratch_lists(clpa_context *ctx, const clpa_prefill_params *p, int qpk,
                                 clpa_plan *pl) {
  size_t ni, nw, nl;
  list_words(p, pl, &ni, &nw, &nl);
  clpa_staging *s;
  clpa_status st;
  if (ni + nw + nl == 0) return CLPA_OK; /* nothing to write */
  if ((st = clpa_staging_take(ctx, ni + nw + nl, &s)) ||
      (st = fill_lists(ctx, p, qpk, pl, s->host)) ||
      (ni && (st = clpa_scratch(ctx, 4, sizeof(int32_t) * ni, &pl->info))) ||
      (nw && (st = clpa_scratch(ctx, 5, sizeof(int32_t) * nw, &pl->work))) ||
      (nl && (st = clpa_scratch(ctx, 9, sizeof(int32_t) * nl, &pl->dec_lens))))
    return st;
  const char *what = "clEnqueueWriteBuffer(prefill plan)";
  const int last = nl ? 2 : nw ? 1 : 0; /* the last write takes the staging's event */
  if ((ni && (st = clpa_staging_write(ctx, s, pl->info, 0, ni, last == 0, what))) ||
      (nw && (st = clpa_staging_write(ctx, s, pl->work, ni, nw, last == 1, what))))
    return st;
  return nl ? clpa_staging_write(ctx, s, pl->dec_lens, ni + nw, nl, 1, what) : CLPA_OK;
}

static clpa_status launch(clpa_context *ctx, const clpa_prefill_params *p, const clpa_attn *a,
                          const clpa_plan *pl) {
  cl_mem faults;
  clpa_status st;
  const clpa_prefill_spec *spec = &pl->ps;
  const int rows_path = spec->path == CLPA_PREFILL_ROWS, mma = spec->path == CLPA_PREFILL_MMA;
  const char *name = rows_path ? "clpa_prefill_rows"
                     : mma     ? "clpa_prefill_mma"
                               : "clpa_prefill_paged";
  if ((st = clpa_faults_buffer(ctx, &faults))) return st;
  const cl_ulong q_stride = a->q_stride, block_stride = a->kv.block_stride;
  const cl_ulong head_stride = a->kv.head_stride;
  const cl_int maxb = p->max_blocks_per_seq, nb = a->kv.num_blocks, nh = p->num_heads;
  const cl_int nkv = a->kv.num_kv_heads, win = p->sliding_window, causal = p->causal;
  const cl_float scale = clpa_softmax_scale(p->scale, a->kv.head_size);
  const cl_float ks = p->k_scale, vs = p->v_scale, cap = p->soft_cap;
  const cl_int mask_block = p->block_mask ? p->mask_block : 64;
  const cl_int mask_qb = p->mask_q_blocks, mask_kb = p->mask_k_blocks;
  const cl_int npi = p->num_page_indices, split_keys = pl->split_keys;
  /* split rows' partials (scratch slots 7, 8): io rows [slots, num_kv_heads, rows], their LSEs */
  cl_mem part_out = NULL, part_lse = NULL;
  const size_t part_rows = pl->split_slots * (size_t)a->kv.num_kv_heads * (size_t)spec->rows;
  if (pl->split_rows &&
      ((st = clpa_scratch(ctx, 7, part_rows * a->kv.head_size * clpa_dtype_size(p->q_dtype),
                          &part_out)) ||
       (st = clpa_scratch(ctx, 8, part_rows * sizeof(float), &part_lse))))
    return st;
#define A(name, v) [PREFILL_ARG_##name] = CLPA_ARG(v)
  const clpa_arg args[PREFILL_ALL_ARGS] = {
      A(out, p->out),
      A(lse, p->lse),
      A(q, p->query),
      A(q_stride, q_stride),
      A(k_cache, a->k),
      A(v_cache, a->v),
      A(block_stride, block_stride),
      A(head_stride, head_stride),
      A(block_tables, p->block_tables),
      A(max_blocks_per_seq, maxb),
      A(seq_info, pl->info),
      A(work, pl->work),
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
      A(causal, causal),
      A(faults, faults),
      A(block_mask, p->block_mask),
      A(mask_block, mask_block),
      A(mask_qb, mask_qb),
      A(mask_kb, mask_kb),
      A(part_out, part_out),
      A(part_lse, part_lse),
      A(split_keys, split_keys),
      A(page_indptr, p->page_indptr),
      A(page_indices, p->page_indices),
      A(num_page_indices, npi),
      A(last_page_len, p->last_page_len)};
#undef A
  const size_t nargs =
      p->page_table == CLPA_PAGE_TABLE_CSR ? PREFILL_ALL_ARGS : PREFILL_ARG_page_indptr;
  const size_t wg = rows_path ? 1 : (size_t)spec->num_threads;
  const clpa_ndrange r = {2,
                          {pl->tiles * wg, (size_t)a->kv.num_kv_heads},
                          {wg, 1},
                          p->num_wait_events,
                          p->wait_events,
                          pl->split_rows ? NULL : p->event};
  if ((st = clpa_enqueue_listed(ctx, pl->pk, name, prefill_params, args, nargs, &r)) ||
      !pl->split_rows)
    return st;
  /* the split rows' merge, after the kernel (the queue is in order) */
  const cl_int groups_at = (cl_int)pl->tiles;
#define M(name, v) [PMERGE_ARG_##name] = CLPA_ARG(v)
  const clpa_arg margs[PMERGE_NUM_ARGS] = {M(out, p->out),         M(lse, p->lse),
                                           M(part_out, part_out),   M(part_lse, part_lse),
                                           M(seq_info, pl->info),   M(groups, pl->work),
                                           M(groups_at, groups_at), M(num_heads, nh),
                                           M(num_kv_heads, nkv)};
#undef M
  const clpa_ndrange mr = {2,
                           {pl->split_rows * spec->rows * PMERGE_THREADS, (size_t)nkv},
                           {PMERGE_THREADS, 1},
                           0,
                           NULL,
                           p->event};
  return clpa_enqueue_listed(ctx, pl->mk, "clpa_prefill_merge", pmerge_params, margs,
                             PMERGE_NUM_ARGS, &mr);
}

/* The kernel a plan's spec names. */
static clpa_status prefill_kernel(clpa_context *ctx, clpa_plan *pl) {
  const int path = pl->ps.path;
  const char *name = path == CLPA_PREFILL_ROWS  ? "clpa_prefill_rows"
                     : path == CLPA_PREFILL_MMA ? "clpa_prefill_mma"
                                                : "clpa_prefill_paged";
  const clpa_family *fam = path == CLPA_PREFILL_ROWS  ? &clpa_family_prefill_rows
                           : path == CLPA_PREFILL_MMA ? &clpa_family_prefill_mma
                                                      : &clpa_family_prefill_tiles;
  clpa_status st = clpa_family_kernel(ctx, fam, &pl->ps, name, &pl->pk);
  if (st == CLPA_OK && pl->split_rows)
    st = clpa_family_kernel(ctx, fam, &pl->ps, "clpa_prefill_merge", &pl->mk);
  return st;
}

/* The plan's row tiles (of the sequences from `from` on: the others are
 * decode's) into *tiles; refused where a sequence's rows pass the kernels'
 * 32-bit row numbers. */
static clpa_status count_tiles(clpa_context *ctx, const clpa_prefill_params *p, int qpk, int rows,
                               int apart, int32_t from, size_t *tiles) {
  *tiles = 0;
  for (int32_t s = from; s < p->num_seqs; s++) {
    const int64_t new_len = p->cu_seqlens_q[s + 1] - p->cu_seqlens_q[s];
    const int64_t nrows = seq_rows(new_len, qpk, rows, apart);
    CLPA_CTX_CHECK(ctx, nrows + rows > INT32_MAX, CLPA_ERR_UNSUPPORTED,
                   "sequence %d: %lld new tokens x %d query heads a KV head make %lld query rows,"
                   " past the prefill kernels' 32-bit row numbers", s, (long long)new_len, qpk,
                   (long long)nrows);
    *tiles += (size_t)((nrows + rows - 1) / rows);
  }
  return CLPA_OK;
}

/* The mma kernel's build for the plan's work items: 1 where some item is
 * split or a sequence's one row tile leaves a warp without rows (a decode
 * row's: the warp then skips the products), else 0, whose kernel has no
 * code for either; a longer sequence's short last tile does not take 1
 * (the test costs every tile more than the idle warps save:
 * docs/decisions/0045-prefill-mma-items-build.md). */
static int mma_items(const clpa_prefill_params *p, const clpa_plan *pl, int qpk) {
  if (pl->ps.path != CLPA_PREFILL_MMA) return 0;
  if (pl->split_rows) return 1;
  const int apart = heads_apart(&pl->ps);
  for (int32_t s = pl->dec_rows; s < p->num_seqs; s++) {
    const int64_t new_len = p->cu_seqlens_q[s + 1] - p->cu_seqlens_q[s];
    const int64_t n = apart ? new_len : new_len * qpk; /* rows (a head's, heads apart) */
    if (n > 0 && n <= pl->ps.rows - 16 * pl->ps.mt) return 1;
  }
  return 0;
}

clpa_status clpa_prefill_plan_fill(clpa_context *ctx, const clpa_prefill_params *p, int make,
                                   clpa_plan *pl) {
  clpa_status st = clpa_plan_begin(ctx, p, PLAN_PREFILL, pl);
  if (st != CLPA_OK) return st;
  CLPA_CHECK_RESERVED(ctx->error, p, "p->");
  CLPA_CTX_CHECK(ctx, p->split_keys < -1 || (p->split_keys > 0 && p->split_keys % 64 != 0),
                 CLPA_ERR_INVALID_ARG,
                 "p->split_keys = %d (0 = auto, -1 = never, or a positive multiple of 64)",
                 (int)p->split_keys);
  CLPA_CTX_CHECK(ctx, p->split_keys > 0 && p->block_mask, CLPA_ERR_UNSUPPORTED,
                 "p->split_keys = %d: calls with a block_mask are not split (0 or -1 there)",
                 (int)p->split_keys);
  CLPA_CTX_CHECK(ctx, p->decode_rows_kernel < -1 || p->decode_rows_kernel > 1,
                 CLPA_ERR_INVALID_ARG, "p->decode_rows_kernel = %d (0 = auto, 1 = always, -1 ="
                 " never)", (int)p->decode_rows_kernel);
  CLPA_CTX_CHECK(ctx, p->decode_rows_kernel == 1 && p->block_mask, CLPA_ERR_UNSUPPORTED,
                 "p->decode_rows_kernel = 1: decode's kernel takes no block_mask (0 or -1 there)");
  CLPA_CTX_CHECK(ctx, p->reserved32 != 0, CLPA_ERR_INVALID_ARG,
                 "p->reserved32 = %d (reserved words must be 0: fill the struct with its _init"
                 " function)", (int)p->reserved32);
  clpa_attn a;
  CLPA_ATTN_OF(&a, p);
  if ((st = clpa_attn_layout(ctx, &a, p->cache, p->layer, p->key_cache, p->value_cache, &p->kv)) ||
      (st = clpa_attn_validate(ctx, &a)))
    return st;
  CLPA_CTX_CHECK(ctx, p->causal != 0 && p->causal != 1, CLPA_ERR_INVALID_ARG,
                 "causal = %d (0 or 1)", p->causal);
  size_t mask_bytes = 0;
  int path = 0, rows = 0, keys = 0;
  if ((st = check_lengths(ctx, p, &a.kv, &pl->total, &mask_bytes)) ||
      (st = clpa_prefill_pick_path(ctx, p, &a.kv, &path, &rows, &keys)))
    return st;
  pl->kv = a.kv;
  pl->pp = *p;
  pl->pp.cu_seqlens_q = pl->pp.cached_lens = NULL, pl->pp.cache = NULL;
  pl->pp.key_cache = pl->pp.value_cache = NULL, pl->pp.event = NULL, pl->pp.wait_events = NULL;
  pl->pp.num_wait_events = 0;
  pl->mask_bytes = mask_bytes;
  const int mma = path == CLPA_PREFILL_MMA;
  int mt = 1;
  CLPA_CTX_CHECK(ctx, p->rows_per_warp != 0 && p->rows_per_warp != 16 && p->rows_per_warp != 32,
                 CLPA_ERR_INVALID_ARG, "rows_per_warp = %d (0 = auto, 16 or 32)", p->rows_per_warp);
  CLPA_CTX_CHECK(ctx, p->rows_per_warp != 0 && !mma, CLPA_ERR_INVALID_ARG,
                 "rows_per_warp = %d is the mma path's, and the call takes the %s path (0 there)",
                 p->rows_per_warp, path == CLPA_PREFILL_TILES ? "tiles" : "rows");
  const int qpk = p->num_heads / a.kv.num_kv_heads;
  if ((st = clpa_prefill_plan_decode_rows(ctx, p, path, make, pl))) return st;
  if (mma && !p->rows_per_group && rows == 128 && ctx->prefill_tuning.mixed_rows &&
      clpa_prefill_decode_rows_lead(p, pl->dec_rows, qpk, rows))
    rows = ctx->prefill_tuning.mixed_rows;
  if (mma && (st = clpa_prefill_mma_mt(ctx, p, &a.kv, rows, &keys, pl->dec_rows, &mt))) {
    clpa_plan_fini(pl);
    return st;
  }
  pl->ps = clpa_prefill_spec_for(ctx, p, &a.kv, path, rows, keys, mt);
  if ((st = count_tiles(ctx, p, qpk, rows, heads_apart(&pl->ps), pl->dec_rows, &pl->tiles)) ||
      (st = clpa_prefill_plan_splits(ctx, p, qpk, pl))) {
    clpa_plan_fini(pl);
    return st;
  }
  pl->ps.items = mma_items(p, pl, qpk);
  if ((make != PLAN_CHECK && pl->tiles && (st = prefill_kernel(ctx, pl))) ||
      (make == PLAN_OWN && (pl->tiles || pl->dec) && (st = own_lists(ctx, p, qpk, pl)))) {
    clpa_plan_fini(pl);
    return st;
  }
  return CLPA_OK;
}

/* A run's params (the plan's with in's buffers) and caches into *q and
 * *a, every buffer checked against the plan. */
static clpa_status run_check(const clpa_plan *pl, const clpa_attn_inputs *in,
                             clpa_prefill_params *q, clpa_attn *a) {
  clpa_context *ctx = pl->ctx;
  *q = pl->pp;
  CLPA_APPLY_INPUTS(q, in);
  q->block_mask = in->block_mask;
  clpa_status st;
  CLPA_ATTN_OF(a, q);
  if ((st = clpa_plan_caches(pl, in, a)) || (st = clpa_attn_validate(ctx, a)) ||
      (st = clpa_attn_check_buffers(ctx, a, q->num_seqs, (size_t)pl->total)))
    return st;
  CLPA_CTX_CHECK(ctx, (pl->mask_bytes != 0) != (q->block_mask != NULL), CLPA_ERR_INVALID_ARG,
                 "block_mask is %s, and the plan was made %s one", q->block_mask ? "given" : "NULL",
                 pl->mask_bytes ? "with" : "without");
  return q->block_mask ? clpa_check_buffer(ctx, q->block_mask, "block_mask", pl->mask_bytes, 0)
                       : CLPA_OK;
}

/* A checked run: the leading decode rows on decode's plan first (its own
 * checks pass where the run's did: the same buffers' first rows), with the
 * wait list; then the other rows' kernel (and merge), the event with the
 * last. */
static clpa_status run_checked(clpa_plan *pl, const clpa_attn_inputs *in, clpa_prefill_params *q,
                               const clpa_attn *a) {
  if (!pl->tiles && !pl->dec) return clpa_run_nothing(pl->ctx, in);
  if (pl->dec) {
    clpa_attn_inputs d = *in;
    if (pl->tiles) d.event = NULL;
    const clpa_status st = clpa_decode_run_lens(pl->dec, &d, pl->dec_lens);
    if (st != CLPA_OK || !pl->tiles) return st;
    q->num_wait_events = 0, q->wait_events = NULL;
  }
  return launch(pl->ctx, q, a, pl);
}

clpa_status clpa_prefill_run(clpa_plan *pl, const clpa_attn_inputs *in) {
  clpa_prefill_params q;
  clpa_attn a;
  const clpa_status st = run_check(pl, in, &q, &a);
  if (st != CLPA_OK) return st;
  return run_checked(pl, in, &q, &a);
}

static clpa_status clpa_prefill_choice_impl(clpa_context *ctx, const clpa_prefill_params *p,
                                            clpa_prefill_path *path, int32_t *rows,
                                            int32_t *keys) {
  clpa_plan pl;
  clpa_status st = clpa_prefill_plan_fill(ctx, p, PLAN_CHECK, &pl);
  if (st != CLPA_OK) return st;
  clpa_plan_info info;
  clpa_plan_describe(&pl, &info);
  clpa_plan_fini(&pl);
  if (path) *path = (clpa_prefill_path)info.path;
  if (rows) *rows = info.rows;
  if (keys) *keys = info.keys;
  return CLPA_OK;
}

clpa_status clpa_prefill_choice(clpa_context *ctx, const clpa_prefill_params *p,
                                clpa_prefill_path *path, int32_t *rows, int32_t *keys) {
  CLPA_API_CALL(clpa_prefill_choice_impl(ctx, p, path, rows, keys));
}

/* A plan (its work list in the context's scratch), one run, a release. */
static clpa_status clpa_prefill_impl(clpa_context *ctx, const clpa_prefill_params *p) {
  clpa_plan pl;
  clpa_status st = clpa_prefill_plan_fill(ctx, p, PLAN_KERNELS, &pl);
  if (st != CLPA_OK) return st;
  clpa_attn_inputs in;
  CLPA_INPUTS_OF(&in, p);
  in.block_mask = p->block_mask;
  /* the buffers first, so that a refused call leaves its work list unwritten */
  clpa_prefill_params q;
  clpa_attn a;
  if ((st = run_check(&pl, &in, &q, &a))) goto done;
  const int qpk = p->num_heads / pl.kv.num_kv_heads;
  if ((st = scratch_lists(ctx, p, qpk, &pl)) == CLPA_OK) st = run_checked(&pl, &in, &q, &a);
done:
  clpa_plan_fini(&pl);
  return st;
}

clpa_status clpa_prefill(clpa_context *ctx, const clpa_prefill_params *p) {
  CLPA_API_CALL(clpa_prefill_impl(ctx, p));
}
