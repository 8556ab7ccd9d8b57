/*
 * cache_ops.c — the cache ops: reshape_and_cache launches cl/cache.cl and
 * copy_blocks cl/blocks.cl (their parameters are cl/cache_args.h's and
 * cl/blocks_args.h's lists, set here by name); swap_blocks enqueues
 * buffer transfers. Each validates
 * everything, and builds its kernel, before enqueueing anything.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blocks_args.h"
#include "cache_args.h"
#include "internal.h"

/* The kernels' parameters, from their lists (cl/cache_args.h,
 * cl/blocks_args.h): a table and each parameter's position,
 * CACHE_RESHAPE_ARG_<name> and BLOCKS_COPY_ARG_<name>. */
static const clpa_param reshape_params[] = {CACHE_RESHAPE_ARG_LIST(CLPA_PARAM_OF, )};
static const clpa_param copy_params[] = {BLOCKS_COPY_ARG_LIST(CLPA_PARAM_OF, )};
#define RESHAPE_SLOT(kind, type, name) CACHE_RESHAPE_ARG_##name,
#define COPY_SLOT(kind, type, name) BLOCKS_COPY_ARG_##name,
enum { CACHE_RESHAPE_ARG_LIST(RESHAPE_SLOT, ) CACHE_RESHAPE_NUM_ARGS };
enum { BLOCKS_COPY_ARG_LIST(COPY_SLOT, ) BLOCKS_COPY_NUM_ARGS };

void clpa_reshape_and_cache_params_init(clpa_reshape_and_cache_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->src_dtype = CLPA_DTYPE_F32;
  p->k_scale = p->v_scale = 1.0f;
}

void clpa_copy_blocks_params_init(clpa_copy_blocks_params *p) {
  if (p) memset(p, 0, sizeof *p);
}

void clpa_swap_blocks_params_init(clpa_swap_blocks_params *p) {
  if (p) memset(p, 0, sizeof *p);
}

/* ---- shared checks --------------------------------------------------- */

static clpa_status check_events(clpa_context *ctx, cl_uint n, const cl_event *evs) {
  return clpa_check_wait_list(ctx, n, evs);
}

static clpa_status check_cache(clpa_context *ctx, const clpa_cache *c, const char *name,
                               int device_only) {
  CLPA_CTX_CHECK(ctx, !c, CLPA_ERR_INVALID_ARG, "%s must not be NULL", name);
  CLPA_CTX_CHECK(ctx, c->ctx != ctx, CLPA_ERR_INVALID_ARG,
                 "%s was created on another clpa_context", name);
  CLPA_CTX_CHECK(ctx, device_only && c->info.placement != CLPA_CACHE_DEVICE, CLPA_ERR_INVALID_ARG,
                 "%s is a host cache; this op needs a device cache", name);
  return CLPA_OK;
}

/* Resolves [first, first + n) (n 0 = to the end) against the cache. */
static clpa_status check_layers(clpa_context *ctx, const clpa_cache *c, int32_t first, int32_t n,
                                int32_t *count) {
  *count = 0; /* set on every path, so no caller can read it unset */
  const int32_t L = c->info.num_layers;
  CLPA_CTX_CHECK(ctx, first < 0 || first >= L, CLPA_ERR_INVALID_ARG,
                 "first_layer = %d (the cache has %d layers)", first, L);
  CLPA_CTX_CHECK(ctx, n < 0 || n > L - first, CLPA_ERR_INVALID_ARG,
                 "num_layers = %d from first_layer %d (the cache has %d layers)", n, first, L);
  *count = n ? n : L - first;
  return CLPA_OK;
}

/* With no command enqueued, the caller's event still has to complete after
 * its wait list: a marker does that. */
static clpa_status marker(clpa_context *ctx, cl_uint n, const cl_event *evs, cl_event *event) {
  if (!event) return CLPA_OK;
  CLPA_CL_CHECK(ctx, clEnqueueMarkerWithWaitList(ctx->queue, n, evs, event),
                "clEnqueueMarkerWithWaitList");
  return CLPA_OK;
}

/* After several commands: an event for all of them (a marker with an empty
 * wait list waits for everything enqueued before it). */
static clpa_status finish_event(clpa_context *ctx, int commands, cl_event last, cl_event *event) {
  if (!event) return CLPA_OK;
  if (commands == 1) {
    *event = last;
    return CLPA_OK;
  }
  if (last) clReleaseEvent(last);
  return marker(ctx, 0, NULL, event);
}

/* ---- reshape_and_cache ------------------------------------------------ */

static clpa_status reshape_validate(clpa_context *ctx, const clpa_reshape_and_cache_params *p) {
  clpa_status st;
  CLPA_CHECK_RESERVED(ctx->error, p, "p->");
  if ((st = check_events(ctx, p->num_wait_events, p->wait_events)) ||
      (st = check_cache(ctx, p->cache, "cache", 1)))
    return st;
  const clpa_cache_info *in = &p->cache->info;
  CLPA_CTX_CHECK(ctx, p->layer < 0 || p->layer >= in->num_layers, CLPA_ERR_INVALID_ARG,
                 "layer = %d (the cache has %d layers)", p->layer, in->num_layers);
  CLPA_CTX_CHECK(ctx, p->num_tokens < 0, CLPA_ERR_INVALID_ARG, "num_tokens = %d", p->num_tokens);
  CLPA_CTX_CHECK(ctx, p->src_dtype != CLPA_DTYPE_F32 && p->src_dtype != CLPA_DTYPE_F16 &&
                          p->src_dtype != CLPA_DTYPE_BF16,
                 CLPA_ERR_UNSUPPORTED, "src_dtype = %s (key and value must be f32, f16 or bf16)",
                 clpa_dtype_name(p->src_dtype));
  CLPA_CTX_CHECK(ctx, !(p->k_scale > 0 && isfinite(p->k_scale)) ||
                          !(p->v_scale > 0 && isfinite(p->v_scale)),
                 CLPA_ERR_INVALID_ARG, "k_scale = %g, v_scale = %g (must be finite and > 0)",
                 (double)p->k_scale, (double)p->v_scale);
  const size_t row = (size_t)in->num_kv_heads * (size_t)in->head_size;
  /* cache.cl numbers a token's elements in 32 bits (the grid's first dimension) */
  CLPA_CTX_CHECK(ctx, row > INT32_MAX, CLPA_ERR_UNSUPPORTED,
                 "cache: num_kv_heads * head_size = %d x %d = %zu elements a token, past the"
                 " kernel's 2^31 - 1", in->num_kv_heads, in->head_size, row);
  CLPA_CTX_CHECK(ctx, p->key_stride != 0 && p->key_stride < row, CLPA_ERR_INVALID_ARG,
                 "key_stride = %zu is less than num_kv_heads * head_size = %zu", p->key_stride,
                 row);
  CLPA_CTX_CHECK(ctx, p->value_stride != 0 && p->value_stride < row, CLPA_ERR_INVALID_ARG,
                 "value_stride = %zu is less than num_kv_heads * head_size = %zu",
                 p->value_stride, row);
  const size_t n = (size_t)p->num_tokens, es = clpa_dtype_size(p->src_dtype);
  const size_t ks = p->key_stride ? p->key_stride : row, vs = p->value_stride ? p->value_stride : row;
  /* Elements the rows reach, overflow-checked: offset + (n - 1) * stride + row. */
  CLPA_CTX_CHECK(ctx, n && ((ks > (SIZE_MAX / es - row - p->key_offset) / n) ||
                            (vs > (SIZE_MAX / es - row - p->value_offset) / n) ||
                            p->key_offset > SIZE_MAX / es - row ||
                            p->value_offset > SIZE_MAX / es - row),
                 CLPA_ERR_INVALID_ARG, "key/value offsets and strides overflow size_t");
  const size_t kneed = n ? (p->key_offset + (n - 1) * ks + row) * es : 0;
  const size_t vneed = n ? (p->value_offset + (n - 1) * vs + row) * es : 0;
  if ((st = clpa_check_buffer(ctx, p->key, "key", kneed, 0)) ||
      (st = clpa_check_buffer(ctx, p->value, "value", vneed, 0)) ||
      (st = clpa_check_buffer(ctx, p->slot_mapping, "slot_mapping", n * sizeof(int64_t), 0)))
    return st;
  return CLPA_OK;
}

/* Work-groups of up to 128 work-items: a token's elements (rounded up to
 * a power of two) times as many tokens as fit; the kernel skips the
 * padding. */
static void reshape_grid(clpa_context *ctx, cl_kernel k, size_t elems, size_t tokens,
                         size_t global[2], size_t local[2]) {
  size_t cap = 128, kwg = 0;
  if (clGetKernelWorkGroupInfo(k, ctx->dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL) ==
          CL_SUCCESS && kwg > 0 && kwg < cap)
    cap = kwg;
  size_t l0 = 1;
  while (l0 < elems && l0 * 2 <= cap) l0 *= 2;
  size_t l1 = cap / l0;
  while (l1 > 1 && l1 / 2 >= tokens) l1 /= 2;
  local[0] = l0, local[1] = l1;
  global[0] = (elems + l0 - 1) / l0 * l0;
  global[1] = (tokens + l1 - 1) / l1 * l1;
}

static clpa_status clpa_reshape_and_cache_impl(clpa_context *ctx, const clpa_reshape_and_cache_params *p) {
  CLPA_CHECK(NULL, !ctx, CLPA_ERR_INVALID_ARG, "ctx must not be NULL");
  CLPA_CTX_CHECK(ctx, !p, CLPA_ERR_INVALID_ARG, "p must not be NULL");
  clpa_status st = reshape_validate(ctx, p);
  if (st != CLPA_OK) return st;
  if (p->num_tokens == 0) return marker(ctx, p->num_wait_events, p->wait_events, p->event);

  const clpa_cache_info *in = &p->cache->info;
  cl_mem faults;
  if ((st = clpa_faults_buffer(ctx, &faults)) != CLPA_OK) return st;
  const clpa_cache_spec spec = {(int32_t)in->dtype, (int32_t)in->layout};
  cl_kernel k;
  if ((st = clpa_family_kernel(ctx, &clpa_family_cache, &spec, "clpa_cache_reshape", &k)))
    return st;
  const size_t row = (size_t)in->num_kv_heads * (size_t)in->head_size;
  cl_ulong koff = p->key_offset, voff = p->value_offset;
  cl_ulong ks = p->key_stride ? p->key_stride : row, vs = p->value_stride ? p->value_stride : row;
  cl_mem kc = clpa_cache_key(p->cache, p->layer), vc = clpa_cache_value(p->cache, p->layer);
  cl_int heads = in->num_kv_heads, hs = in->head_size, bs = in->block_size, nb = in->num_blocks;
  cl_ulong bst = in->block_bytes / clpa_dtype_size(in->dtype); /* a cache's blocks are packed */
  cl_float ksc = p->k_scale, vsc = p->v_scale;
  cl_int src = (cl_int)p->src_dtype, ntok = p->num_tokens;
#define A(name, v) [CACHE_RESHAPE_ARG_##name] = CLPA_ARG(v)
  const clpa_arg args[CACHE_RESHAPE_NUM_ARGS] = {
      A(key, p->key),    A(key_offset, koff), A(key_stride, ks),
      A(value, p->value), A(value_offset, voff), A(value_stride, vs),
      A(src_dtype, src), A(num_tokens, ntok), A(slot_mapping, p->slot_mapping),
      A(k_cache, kc),    A(v_cache, vc),      A(num_kv_heads, heads),
      A(head_size, hs),  A(block_size, bs),   A(num_blocks, nb),   A(block_stride, bst),
      A(k_scale, ksc),   A(v_scale, vsc),     A(faults, faults)};
#undef A
  clpa_ndrange r = {2, {0}, {0}, p->num_wait_events, p->wait_events, p->event};
  reshape_grid(ctx, k, row, (size_t)p->num_tokens, r.global, r.local);
  st = clpa_enqueue_listed(ctx, k, "clpa_cache_reshape", reshape_params, args,
                           CACHE_RESHAPE_NUM_ARGS, &r);
  clReleaseKernel(k);
  return st;
}

clpa_status clpa_reshape_and_cache(clpa_context *ctx, const clpa_reshape_and_cache_params *p) {
  CLPA_API_CALL(clpa_reshape_and_cache_impl(ctx, p));
}

/* ---- host pairs ------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Checks host pairs against caches of src_blocks and dst_blocks blocks
 * and returns the ones to do (src >= 0) as int64 [m, 2] in *out (caller
 * frees; NULL when m is 0). Destinations must be distinct; with
 * same_cache, no destination may also be a source. */
static clpa_status take_pairs(clpa_context *ctx, const clpa_block_copy *pairs, int32_t n,
                              int32_t src_blocks, int32_t dst_blocks, int same_cache,
                              int64_t **out, int32_t *m_out) {
  *out = NULL;
  *m_out = 0;
  int32_t m = 0;
  for (int32_t i = 0; i < n; i++) {
    if (pairs[i].src < 0) continue;
    CLPA_CTX_CHECK(ctx, pairs[i].src >= src_blocks || pairs[i].dst < 0 ||
                            pairs[i].dst >= dst_blocks,
                   CLPA_ERR_INVALID_ARG,
                   "pairs[%d] = {%d, %d} is outside the cache (%d source, %d destination blocks)",
                   i, pairs[i].src, pairs[i].dst, src_blocks, dst_blocks);
    CLPA_CTX_CHECK(ctx, same_cache && pairs[i].src == pairs[i].dst, CLPA_ERR_INVALID_ARG,
                   "pairs[%d] = {%d, %d} copies a block onto itself", i, pairs[i].src,
                   pairs[i].dst);
    m++;
  }
  if (m == 0) return CLPA_OK;
  int64_t *v = malloc(sizeof(int64_t) * 4 * (size_t)m);
  CLPA_CTX_CHECK(ctx, !v, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  int64_t *dsts = v + 2 * m, *srcs = v + 3 * m;
  for (int32_t i = 0, j = 0; i < n; i++) {
    if (pairs[i].src < 0) continue;
    v[2 * j] = srcs[j] = pairs[i].src;
    v[2 * j + 1] = dsts[j] = pairs[i].dst;
    j++;
  }
  qsort(dsts, (size_t)m, sizeof *dsts, cmp_i64);
  qsort(srcs, (size_t)m, sizeof *srcs, cmp_i64);
  clpa_status st = CLPA_OK;
  for (int32_t j = 0; j < m && st == CLPA_OK; j++) {
    if (j > 0 && dsts[j] == dsts[j - 1])
      st = CLPA_FAIL(ctx->error, CLPA_ERR_INVALID_ARG,
                     "block %lld is the destination of two pairs", (long long)dsts[j]);
    else if (same_cache && bsearch(&dsts[j], srcs, (size_t)m, sizeof *srcs, cmp_i64))
      st = CLPA_FAIL(ctx->error, CLPA_ERR_INVALID_ARG,
                     "block %lld is both a destination and a source", (long long)dsts[j]);
  }
  if (st != CLPA_OK) {
    free(v);
    return st;
  }
  *out = v;
  *m_out = m;
  return CLPA_OK;
}

/* ---- copy_blocks ------------------------------------------------------ */

static clpa_status copy_launch(clpa_context *ctx, cl_kernel k, const clpa_cache *c, int arena,
                               int s0, int s1, cl_mem pairs, int32_t m, cl_mem faults,
                               const clpa_copy_blocks_params *p, cl_event *ev) {
  const clpa_cache_info *in = &c->info;
  cl_mem mem = c->arenas[arena].mem;
  cl_ulong first = c->slices[s0].offset / 16, stride = c->slice_stride / 16;
  cl_ulong words = in->block_bytes / 16;
  cl_int nb = in->num_blocks;
#define A(name, v) [BLOCKS_COPY_ARG_##name] = CLPA_ARG(v)
  const clpa_arg args[BLOCKS_COPY_NUM_ARGS] = {
      A(arena, mem),     A(first_word, first), A(slice_words, stride), A(block_words, words),
      A(num_blocks, nb), A(pairs, pairs),      A(faults, faults)};
#undef A
  const clpa_ndrange r = {3, {(size_t)words, (size_t)m, (size_t)(s1 - s0)}, {0},
                          p->num_wait_events, p->wait_events, ev};
  return clpa_enqueue_listed(ctx, k, "clpa_blocks_copy", copy_params, args, BLOCKS_COPY_NUM_ARGS,
                             &r);
}

/* One launch per arena that holds slices of the layer range. */
static clpa_status copy_enqueue(clpa_context *ctx, const clpa_copy_blocks_params *p,
                                int32_t layers, cl_mem pairs, int32_t m) {
  const clpa_cache *c = p->cache;
  cl_mem faults;
  cl_kernel k;
  clpa_status st;
  if ((st = clpa_faults_buffer(ctx, &faults)) ||
      (st = clpa_family_kernel(ctx, &clpa_family_blocks, NULL, "clpa_blocks_copy", &k)))
    return st;
  const int lo = 2 * p->first_layer, hi = 2 * (p->first_layer + layers);
  int launches = 0;
  cl_event last = NULL;
  for (int a = 0; a < c->info.num_arenas && st == CLPA_OK; a++) {
    const clpa_cache_arena *ar = &c->arenas[a];
    int s0 = ar->first_slice > lo ? ar->first_slice : lo;
    int s1 = ar->first_slice + ar->num_slices < hi ? ar->first_slice + ar->num_slices : hi;
    if (s0 >= s1) continue;
    if (last) clReleaseEvent(last);
    last = NULL;
    st = copy_launch(ctx, k, c, a, s0, s1, pairs, m, faults, p, p->event ? &last : NULL);
    if (st == CLPA_OK) launches++;
  }
  clReleaseKernel(k);
  if (st != CLPA_OK) {
    if (last) clReleaseEvent(last);
    return st;
  }
  return finish_event(ctx, launches, last, p->event);
}

static clpa_status clpa_copy_blocks_impl(clpa_context *ctx, const clpa_copy_blocks_params *p) {
  CLPA_CHECK(NULL, !ctx, CLPA_ERR_INVALID_ARG, "ctx must not be NULL");
  CLPA_CTX_CHECK(ctx, !p, CLPA_ERR_INVALID_ARG, "p must not be NULL");
  CLPA_CHECK_RESERVED(ctx->error, p, "p->");
  clpa_status st;
  int32_t layers = 0;
  if ((st = check_events(ctx, p->num_wait_events, p->wait_events)) ||
      (st = check_cache(ctx, p->cache, "cache", 1)) ||
      (st = check_layers(ctx, p->cache, p->first_layer, p->num_layers, &layers)))
    return st;
  CLPA_CTX_CHECK(ctx, p->num_pairs < 0, CLPA_ERR_INVALID_ARG, "num_pairs = %d", p->num_pairs);
  CLPA_CTX_CHECK(ctx, p->num_pairs > 0 && !p->pairs == !p->pair_buffer, CLPA_ERR_INVALID_ARG,
                 "give exactly one of pairs (host) and pair_buffer (device)");
  const int32_t nb = p->cache->info.num_blocks;
  if (p->pair_buffer || p->num_pairs == 0) {
    if (p->num_pairs == 0) return marker(ctx, p->num_wait_events, p->wait_events, p->event);
    if ((st = clpa_check_buffer(ctx, p->pair_buffer, "pair_buffer",
                                (size_t)p->num_pairs * 2 * sizeof(int64_t), 0)))
      return st;
    return copy_enqueue(ctx, p, layers, p->pair_buffer, p->num_pairs);
  }
  int64_t *pairs;
  int32_t m;
  if ((st = take_pairs(ctx, p->pairs, p->num_pairs, nb, nb, 1, &pairs, &m))) return st;
  if (m == 0) return marker(ctx, p->num_wait_events, p->wait_events, p->event);
  /* A buffer of its own per call: OpenCL copies the host array at
   * creation, and keeps the buffer alive until the kernels are done. */
  cl_int err;
  cl_mem buf = clCreateBuffer(ctx->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                              sizeof(int64_t) * 2 * (size_t)m, pairs, &err);
  free(pairs);
  if (err != CL_SUCCESS) return CLPA_CL_FAIL(ctx, err, "clCreateBuffer(copy pairs)");
  st = copy_enqueue(ctx, p, layers, buf, m);
  clReleaseMemObject(buf);
  return st;
}

clpa_status clpa_copy_blocks(clpa_context *ctx, const clpa_copy_blocks_params *p) {
  CLPA_API_CALL(clpa_copy_blocks_impl(ctx, p));
}

/* ---- swap_blocks ------------------------------------------------------ */

static clpa_status swap_validate(clpa_context *ctx, const clpa_swap_blocks_params *p,
                                 int32_t *layers) {
  clpa_status st;
  CLPA_CHECK_RESERVED(ctx->error, p, "p->");
  if ((st = check_events(ctx, p->num_wait_events, p->wait_events)) ||
      (st = check_cache(ctx, p->src, "src", 0)) || (st = check_cache(ctx, p->dst, "dst", 0)))
    return st;
  const clpa_cache_info *a = &p->src->info, *b = &p->dst->info;
  CLPA_CTX_CHECK(ctx, p->src == p->dst, CLPA_ERR_INVALID_ARG,
                 "src and dst are the same cache (clpa_copy_blocks copies within one)");
  CLPA_CTX_CHECK(ctx, a->placement == CLPA_CACHE_HOST && b->placement == CLPA_CACHE_HOST,
                 CLPA_ERR_UNSUPPORTED, "src and dst are both host caches");
  CLPA_CTX_CHECK(ctx, a->num_layers != b->num_layers || a->num_kv_heads != b->num_kv_heads ||
                          a->head_size != b->head_size || a->block_size != b->block_size ||
                          a->dtype != b->dtype || a->layout != b->layout,
                 CLPA_ERR_INVALID_ARG,
                 "src (%d layers, %d heads, head_size %d, block_size %d, %s, %s) and dst (%d, %d,"
                 " %d, %d, %s, %s) differ in shape", a->num_layers, a->num_kv_heads, a->head_size,
                 a->block_size, clpa_dtype_name(a->dtype), clpa_kv_layout_kind_name(a->layout),
                 b->num_layers, b->num_kv_heads, b->head_size, b->block_size,
                 clpa_dtype_name(b->dtype), clpa_kv_layout_kind_name(b->layout));
  if ((st = check_layers(ctx, p->src, p->first_layer, p->num_layers, layers))) return st;
  CLPA_CTX_CHECK(ctx, p->num_pairs < 0, CLPA_ERR_INVALID_ARG, "num_pairs = %d", p->num_pairs);
  CLPA_CTX_CHECK(ctx, p->num_pairs > 0 && !p->pairs, CLPA_ERR_INVALID_ARG,
                 "pairs must not be NULL when num_pairs = %d", p->num_pairs);
  return CLPA_OK;
}

/* One transfer of `bytes` from slice s of src at byte `so` to slice s of
 * dst at byte `d_o`. */
static cl_int transfer(clpa_context *ctx, const clpa_swap_blocks_params *p, int s, size_t so,
                       size_t d_o, size_t bytes, cl_event *ev) {
  const clpa_cache_slice *a = &p->src->slices[s], *b = &p->dst->slices[s];
  const int from_host = p->src->info.placement == CLPA_CACHE_HOST;
  const int to_host = p->dst->info.placement == CLPA_CACHE_HOST;
  cl_mem am = p->src->arenas[a->arena].mem, bm = p->dst->arenas[b->arena].mem;
  if (to_host)
    return clEnqueueReadBuffer(ctx->queue, am, CL_FALSE, a->offset + so, bytes, b->host + d_o,
                               p->num_wait_events, p->wait_events, ev);
  if (from_host)
    return clEnqueueWriteBuffer(ctx->queue, bm, CL_FALSE, b->offset + d_o, bytes, a->host + so,
                                p->num_wait_events, p->wait_events, ev);
  return clEnqueueCopyBuffer(ctx->queue, am, bm, a->offset + so, b->offset + d_o, bytes,
                             p->num_wait_events, p->wait_events, ev);
}

/* How many pairs from i on are consecutive on both sides (src and dst
 * both +1): one transfer per layer. */
static int32_t run_of(const int64_t *pairs, int32_t m, int32_t i) {
  int32_t run = 1;
  while (i + run < m && pairs[2 * (i + run)] == pairs[2 * i] + run &&
         pairs[2 * (i + run) + 1] == pairs[2 * i + 1] + run)
    run++;
  return run;
}

/* Two device caches can share a buffer (two wraps of the same cl_mem);
 * a transfer whose source and destination overlap there fails to
 * enqueue (CL_MEM_COPY_OVERLAP) after the ones before it: refused first. */
static clpa_status swap_overlap(clpa_context *ctx, const clpa_swap_blocks_params *p,
                                const int64_t *pairs, int32_t m, int lo, int hi) {
  if (p->src->info.placement != CLPA_CACHE_DEVICE || p->dst->info.placement != CLPA_CACHE_DEVICE)
    return CLPA_OK;
  const uint64_t bb = p->src->info.block_bytes;
  for (int s = lo; s < hi; s++) {
    const clpa_cache_slice *a = &p->src->slices[s], *b = &p->dst->slices[s];
    if (p->src->arenas[a->arena].mem != p->dst->arenas[b->arena].mem) continue;
    for (int32_t i = 0, run; i < m; i += run) {
      run = run_of(pairs, m, i);
      const uint64_t so = a->offset + (uint64_t)pairs[2 * i] * bb;
      const uint64_t d_o = b->offset + (uint64_t)pairs[2 * i + 1] * bb, n = (uint64_t)run * bb;
      CLPA_CTX_CHECK(ctx, so < d_o + n && d_o < so + n, CLPA_ERR_INVALID_ARG,
                     "blocks %lld .. %lld of src and %lld .. %lld of dst are the same memory"
                     " (the caches share layer %d's %s buffer)", (long long)pairs[2 * i],
                     (long long)pairs[2 * i] + run - 1, (long long)pairs[2 * i + 1],
                     (long long)pairs[2 * i + 1] + run - 1, s / 2, s & 1 ? "value" : "key");
    }
  }
  return CLPA_OK;
}

static clpa_status clpa_swap_blocks_impl(clpa_context *ctx, const clpa_swap_blocks_params *p) {
  CLPA_CHECK(NULL, !ctx, CLPA_ERR_INVALID_ARG, "ctx must not be NULL");
  CLPA_CTX_CHECK(ctx, !p, CLPA_ERR_INVALID_ARG, "p must not be NULL");
  int32_t layers = 0, m = 0;
  int64_t *pairs;
  clpa_status st;
  if ((st = swap_validate(ctx, p, &layers)) ||
      (st = take_pairs(ctx, p->pairs, p->num_pairs, p->src->info.num_blocks,
                       p->dst->info.num_blocks, 0, &pairs, &m)))
    return st;
  if (m == 0) return marker(ctx, p->num_wait_events, p->wait_events, p->event);
  const size_t bb = (size_t)p->src->info.block_bytes;
  const int lo = 2 * p->first_layer, hi = 2 * (p->first_layer + layers);
  if ((st = swap_overlap(ctx, p, pairs, m, lo, hi))) {
    free(pairs);
    return st;
  }
  int commands = 0;
  cl_event last = NULL;
  cl_int err = CL_SUCCESS;
  for (int32_t i = 0; i < m && err == CL_SUCCESS;) {
    const int32_t run = run_of(pairs, m, i); /* pairs i .. i + run - 1 */
    for (int s = lo; s < hi && err == CL_SUCCESS; s++) {
      if (last) clReleaseEvent(last);
      last = NULL;
      err = transfer(ctx, p, s, (size_t)pairs[2 * i] * bb, (size_t)pairs[2 * i + 1] * bb,
                     (size_t)run * bb, p->event ? &last : NULL);
      if (err == CL_SUCCESS) commands++;
    }
    i += run;
  }
  free(pairs);
  if (err != CL_SUCCESS) {
    if (last) clReleaseEvent(last);
    return CLPA_CL_FAIL(ctx, err, "swap transfer");
  }
  return finish_event(ctx, commands, last, p->event);
}

clpa_status clpa_swap_blocks(clpa_context *ctx, const clpa_swap_blocks_params *p) {
  CLPA_API_CALL(clpa_swap_blocks_impl(ctx, p));
}
