/*
 * model_step.c — one engine step of the demo's model (model.c has the
 * object and the layout of its device buffers): the forward pass over a
 * batch (embedding, the layers' GEMMs, RoPE, cache writes and attention
 * through clpa, the LM head and argmax), on the per-step buffers of
 * model_buffers.c, each op timed by model_timing.c's events.
 *
 * The linear layers are linear.h's, C [T, out] = A [T, in] . W^T by the
 * engine the device's table picks for T rows; the output projection and
 * the down projection accumulate into x, which is the residual add. Where
 * gemv runs the gate and up projection, its epilogue writes SwiGLU's
 * activations (the weight's rows interleaved by 8: model.c's
 * interleave_gu); elsewhere demo_silu_mul makes them.
 *
 * Every command goes on the clpa context's in-order queue; the step waits
 * once, at its end.
 */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "model_internal.h"

/* ---------------------------------------------------------------------
 * One engine step
 * ------------------------------------------------------------------- */

static clpa_status write_buf(demo_model *m, cl_mem b, size_t bytes, const void *src,
                             const char *what) {
  if (!bytes) return CLPA_OK;
  cl_int e = clEnqueueWriteBuffer(m->queue, b, CL_FALSE, 0, bytes, src, 0, NULL,
                                  demo_model_event(m, TIME_OTHER, what));
  m->ops += e == CL_SUCCESS;
  return e == CL_SUCCESS
             ? CLPA_OK
             : demo_fail(demo_cl_status(e), "clEnqueueWriteBuffer(%s): OpenCL error %d", what,
                         (int)e);
}

/* Sets a kernel's arguments from (size, pointer) pairs and enqueues it. */
static clpa_status launch_as(demo_model *m, int kind, int k, cl_uint dims, const size_t *global,
                             const size_t *local, int nargs, ...) {
  va_list ap;
  va_start(ap, nargs);
  for (int i = 0; i < nargs; i++) {
    size_t size = va_arg(ap, size_t);
    const void *p = va_arg(ap, const void *);
    cl_int e = clSetKernelArg(m->k[k], (cl_uint)i, size, p);
    if (e != CL_SUCCESS) {
      va_end(ap);
      return demo_fail(demo_cl_status(e), "clSetKernelArg(%s, %d): OpenCL error %d",
                       demo_kernel_names[k], i, (int)e);
    }
  }
  va_end(ap);
  for (cl_uint d = 0; d < dims; d++)
    if (!global[d]) return CLPA_OK;
  cl_int e = clEnqueueNDRangeKernel(m->queue, m->k[k], dims, NULL, global, local, 0, NULL,
                                    demo_model_event(m, kind, demo_kernel_names[k]));
  m->ops += e == CL_SUCCESS;
  return e == CL_SUCCESS
             ? CLPA_OK
             : demo_fail(demo_cl_status(e), "clEnqueueNDRangeKernel(%s): OpenCL error %d",
                         demo_kernel_names[k], (int)e);
}
#define ARG(v) sizeof(v), (const void *)&(v)
#define launch(m, ...) launch_as(m, TIME_OTHER, __VA_ARGS__)

/* Whether layer l's matrix `which` over rows x k takes its activations as
 * f16 (linear.h's demo_linear_takes_f16): then their producer writes them
 * so, rounded as the GEMM would round f32 ones. */
static int takes_f16(const demo_model *m, int32_t l, demo_matrix which, int32_t rows, int32_t k) {
  return demo_linear_takes_f16(m->lin, m->engine, rows, k, demo_model_form(m, l, which));
}

/* A linear call's status, its enqueues since `before` counted as ops. */
static clpa_status counted(demo_model *m, uint64_t before, clpa_status st) {
  m->ops += (int32_t)(demo_linear_enqueues(m->lin) - before);
  return st;
}

/* C [rows, n] = A [rows, k] . W^T (W [n, k], layer l's matrix `which`, in its
 * stored form), or C += that; A f16 where half is set. */
static clpa_status gemm(demo_model *m, int32_t l, demo_matrix which, cl_mem A, cl_mem W, cl_mem C,
                        int32_t rows, int32_t n, int32_t k, int accumulate, int half) {
  if (!rows) return CLPA_OK;
  const uint64_t before = demo_linear_enqueues(m->lin);
  cl_event *ev = demo_model_event(m, TIME_GEMM, demo_matrix_names[which]);
  return counted(m, before, (half ? demo_linear_run_f16 : demo_linear_run)(
                                m->lin, m->engine, demo_model_form(m, l, which), A, W, C, rows, n,
                                k, accumulate, ev));
}

/* act [rows, ffn] = SwiGLU of layer l's gate and up projection of A (f16
 * where a_half is set), made in gemv's epilogue (demo_linear_run_swiglu_out),
 * act f16 where act_half is set */
static clpa_status gemm_swiglu(demo_model *m, int32_t l, cl_mem A, int a_half, cl_mem act,
                               int act_half, int32_t rows) {
  const uint64_t before = demo_linear_enqueues(m->lin);
  return counted(m, before, demo_linear_run_swiglu_out(
                                m->lin, m->engine, demo_model_form(m, l, DEMO_MAT_GU), A, a_half,
                                m->dl[l].wgu, act, act_half, rows, 2 * m->cfg.ffn, m->cfg.hidden,
                                demo_model_event(m, TIME_GEMM, "gate_up + SwiGLU")));
}

/* A clpa call that enqueues (counted as one op: how many kernels it runs
 * inside is the library's). */
static clpa_status clpa_op(demo_model *m, clpa_status st, const char *what, int32_t layer) {
  m->ops += st == CLPA_OK;
  return demo_clpa_check(st, what, layer);
}

/* y = rms(x) * w, y f32 or, where half is set, f16 */
static clpa_status rmsnorm(demo_model *m, cl_mem x, cl_mem w, cl_mem y, int32_t rows, int half) {
  size_t g = (size_t)rows * m->norm_wg, l = (size_t)m->norm_wg;
  return launch(m, half ? K_RMSNORM_H : K_RMSNORM, 1, &g, &l, 5, ARG(x), ARG(w), ARG(y),
                ARG(m->cfg.hidden), ARG(m->cfg.norm_eps));
}

/* Checks a batch against the model and the cache before anything runs. */
static clpa_status check_batch(const demo_model *m, const clpa_kv_layout *kv, const demo_batch *b) {
  const char *fn = "demo_model_forward";
  if (b->num_seqs <= 0 || b->num_decode < 0 || b->num_decode > b->num_seqs)
    return demo_fail(CLPA_ERR_INVALID_ARG, "%s: num_seqs %d, num_decode %d", fn,
                     (int)b->num_seqs, (int)b->num_decode);
  if (!b->tokens || !b->cu_seqlens || !b->cached_lens || !b->slots || !b->block_tables ||
      b->max_blocks_per_seq <= 0)
    return demo_fail(CLPA_ERR_INVALID_ARG, "%s: NULL array or max_blocks_per_seq %d", fn,
                     (int)b->max_blocks_per_seq);
  if (b->cu_seqlens[0] != 0)
    return demo_fail(CLPA_ERR_INVALID_ARG, "%s: cu_seqlens[0] != 0", fn);
  const int64_t cap = (int64_t)b->max_blocks_per_seq * kv->block_size;
  for (int32_t s = 0; s < b->num_seqs; s++) {
    int32_t n = b->cu_seqlens[s + 1] - b->cu_seqlens[s], c = b->cached_lens[s];
    if (n < 1 || c < 0)
      return demo_fail(CLPA_ERR_INVALID_ARG,
                       "%s: sequence %d has %d new tokens, cached_len %d", fn, (int)s, (int)n,
                       (int)c);
    if (s < b->num_decode && (n != 1 || c < 1))
      return demo_fail(
          CLPA_ERR_INVALID_ARG,
          "%s: decode sequence %d needs 1 new token and cached_len > 0 (has %d, %d)", fn, (int)s,
          (int)n, (int)c);
    if ((int64_t)c + n > m->cfg.max_positions || (int64_t)c + n > cap)
      return demo_fail(
          CLPA_ERR_INVALID_ARG,
          "%s: sequence %d reaches %lld tokens (max_positions %d, block table %lld)", fn, (int)s,
          (long long)c + n, (int)m->cfg.max_positions, (long long)cap);
  }
  const int32_t T = b->cu_seqlens[b->num_seqs];
  const int64_t slots = (int64_t)kv->num_blocks * kv->block_size;
  for (int32_t t = 0; t < T; t++) {
    if (b->tokens[t] < 0 || b->tokens[t] >= m->cfg.vocab)
      return demo_fail(CLPA_ERR_INVALID_ARG, "%s: token %d is %d (vocab %d)", fn, (int)t,
                       (int)b->tokens[t], (int)m->cfg.vocab);
    if (b->slots[t] >= slots) /* negative: padding, skipped */
      return demo_fail(CLPA_ERR_INVALID_ARG, "%s: token %d's slot %lld is past the cache's %lld",
                       fn, (int)t, (long long)b->slots[t], (long long)slots);
  }
  return CLPA_OK;
}

/* The fused RoPE and cache write's view of a layer's caches
 * (demo_rope_cache in kernels.c): the layout's strides in elements, in
 * the form its one formula for every kind takes them. */
typedef struct cache_write {
  int on;          /* 0: demo_rope, then clpa_reshape_and_cache */
  demo_qkv_rope r; /* the layout's part of it (linear.h; the buffers are each layer's) */
} cache_write;

static uint64_t key_at(const demo_qkv_rope *w, int32_t blk, int32_t h, int32_t o, int32_t d) {
  return (uint64_t)blk * w->bs + (uint64_t)h * w->hs + (uint64_t)(d / w->x) * w->kdh +
         (uint64_t)o * w->kts + (uint64_t)(d % w->x);
}
static uint64_t value_at(const demo_qkv_rope *w, int32_t blk, int32_t h, int32_t o, int32_t d) {
  return (uint64_t)blk * w->bs + (uint64_t)h * w->hs + (uint64_t)d * w->vds + (uint64_t)o * w->vts;
}

/* Whether the step writes its K/V by demo_rope_cache, and its strides.
 * The demo sees the cache through the public headers alone: the layout's
 * strides (clpa_kv_layout) and the formula clpa_layout.h documents, whose
 * one host form is clpa_kv_key_index / clpa_kv_value_index. So the kernel's
 * formula is held to those for every element of the first and the last
 * block the first time a layout is seen (a layout it does not match, say a
 * kind to come, takes the library's write). f32 and f16 caches only: the
 * library's f16 is vstore_half_rte, the kernel's too; other dtypes (bf16,
 * fp8 with its scales) take the library's write. */
static void plan_cache_write(demo_model *m, clpa_cache *cache, const clpa_kv_layout *kv,
                             cache_write *cw) {
  memset(cw, 0, sizeof *cw);
  demo_qkv_rope *w = &cw->r;
  if (m->unfused || (kv->dtype != CLPA_DTYPE_F32 && kv->dtype != CLPA_DTYPE_F16) ||
      !clpa_cache_key(cache, 0) || kv->num_blocks <= 0)
    return;
  const int split = kv->kind == CLPA_KV_LAYOUT_SPLIT_KEY;
  w->nslots = (cl_long)kv->num_blocks * kv->block_size;
  w->B = kv->block_size, w->f16 = kv->dtype == CLPA_DTYPE_F16, w->x = kv->x;
  w->bs = kv->block_stride, w->hs = kv->head_stride;
  w->kdh = (cl_ulong)kv->x * (split ? (cl_ulong)kv->block_size : 1);
  w->kts = kv->key_token_stride;
  w->vds = split ? (cl_ulong)kv->block_size : 1;
  w->vts = kv->value_token_stride;
  if (m->fused_kv_state == 0 || memcmp(&m->fused_kv, kv, sizeof *kv) != 0) {
    int same = w->x > 0;
    for (int32_t blk = 0; same && blk < kv->num_blocks; blk += kv->num_blocks > 1 ? kv->num_blocks - 1 : 1)
      for (int32_t h = 0; h < kv->num_kv_heads; h++)
        for (int32_t o = 0; o < kv->block_size; o++)
          for (int32_t d = 0; d < kv->head_size; d++)
            same &= key_at(w, blk, h, o, d) == clpa_kv_key_index(kv, blk, h, o, d) &&
                    value_at(w, blk, h, o, d) == clpa_kv_value_index(kv, blk, h, o, d);
    m->fused_kv = *kv;
    m->fused_kv_state = same ? 1 : -1;
  }
  cw->on = m->fused_kv_state == 1;
}

/* The step's attention plans (decode rows first, then the prefill
 * chunks; NULL where the step has none), made once and run per layer.
 * Not kept for the next step: prefill's work list is this step's chunks,
 * and decode's split is planned from this step's host lengths, so a plan
 * kept would divide the next step's work otherwise than the one-call ops
 * (and could change its results' last bits). */
typedef struct step_plans {
  clpa_plan *decode, *prefill;
} step_plans;

static void plans_release(step_plans *sp) {
  clpa_plan_release(sp->decode);
  clpa_plan_release(sp->prefill);
  sp->decode = sp->prefill = NULL;
}

static clpa_status plans_make(demo_model *m, clpa_cache *cache, const demo_batch *b,
                              int32_t max_ctx, step_plans *sp) {
  const demo_config *c = &m->cfg;
  const float scale = (float)(1.0 / sqrt((double)c->head_size));
  /* one call: every sequence a prefill one (a decode row: one token after cached_len) */
  const int32_t nd = m->one_call ? 0 : b->num_decode, np = b->num_seqs - nd;
  clpa_status st = CLPA_OK;
  sp->decode = sp->prefill = NULL;
  if (nd > 0) {
    clpa_decode_params p;
    clpa_decode_params_init(&p);
    p.num_seqs = nd, p.num_heads = c->heads, p.cache = cache;
    p.max_blocks_per_seq = b->max_blocks_per_seq, p.max_context_len = max_ctx;
    p.q_dtype = CLPA_DTYPE_F32, p.scale = scale, p.q_stride = (size_t)m->qkv_dim;
    p.host_context_lens = m->h_ctx; /* the same lengths, for the split's plan */
    st = demo_clpa_check(clpa_plan_decode(m->ctx, &p, &sp->decode), "clpa_plan_decode", -1);
  }
  if (st == CLPA_OK && np > 0) {
    clpa_prefill_params p;
    clpa_prefill_params_init(&p);
    p.num_seqs = np, p.num_heads = c->heads, p.cache = cache;
    p.max_blocks_per_seq = b->max_blocks_per_seq;
    p.cu_seqlens_q = b->cu_seqlens + nd, p.cached_lens = b->cached_lens + nd;
    p.q_dtype = CLPA_DTYPE_F32, p.scale = scale, p.q_stride = (size_t)m->qkv_dim;
    st = demo_clpa_check(clpa_plan_prefill(m->ctx, &p, &sp->prefill), "clpa_plan_prefill", -1);
  }
  if (st != CLPA_OK) plans_release(sp);
  return st;
}

/* Attention of layer l: the step's plans on this layer's cache. */
static clpa_status attention(demo_model *m, clpa_cache *cache, const step_plans *sp, int32_t l) {
  clpa_attn_inputs in;
  clpa_attn_inputs_init(&in);
  in.cache = cache, in.layer = l, in.query = m->qkv, in.out = m->attn;
  clpa_status st = CLPA_OK;
  if (sp->decode) {
    in.block_tables = m->bt_dec, in.context_lens = m->ctx_lens;
    in.event = demo_model_event(m, TIME_ATTN, "clpa_run (decode)");
    if ((st = clpa_op(m, clpa_run(sp->decode, &in), "clpa_run (decode)", l)) != CLPA_OK)
      return st;
  }
  if (sp->prefill) {
    in.block_tables = m->bt_pre, in.context_lens = NULL;
    in.event = demo_model_event(m, TIME_ATTN, "clpa_run (prefill)");
    st = clpa_op(m, clpa_run(sp->prefill, &in), "clpa_run (prefill)", l);
  }
  return st;
}

/* RoPE on the query and key heads and the new tokens' K/V to layer l's
 * caches: one launch where cw says so, else RoPE, then the library's write. */
static clpa_status rope_and_cache(demo_model *m, clpa_cache *cache, const cache_write *cw,
                                  int32_t l, int32_t T) {
  const demo_config *c = &m->cfg;
  const int32_t qd = c->heads * c->head_size, hd = c->head_size;
  if (cw->on) {
    cl_mem kc = clpa_cache_key(cache, l), vc = clpa_cache_value(cache, l);
    size_t g[3] = {(size_t)hd / 2, (size_t)(c->heads + 2 * c->kv_heads), (size_t)T};
    return launch(m, K_ROPE_CACHE, 3, g, NULL, 20, ARG(m->qkv), ARG(m->positions),
                  ARG(m->d_rope), ARG(m->qkv_dim), ARG(hd), ARG(c->heads), ARG(c->kv_heads),
                  ARG(m->slots), ARG(cw->r.nslots), ARG(cw->r.B), ARG(cw->r.f16), ARG(kc), ARG(vc),
                  ARG(cw->r.bs), ARG(cw->r.hs), ARG(cw->r.kdh), ARG(cw->r.kts), ARG(cw->r.vds),
                  ARG(cw->r.vts), ARG(cw->r.x));
  }
  size_t rg[3] = {(size_t)hd / 2, (size_t)(c->heads + c->kv_heads), (size_t)T};
  clpa_status st = launch(m, K_ROPE, 3, rg, NULL, 5, ARG(m->qkv), ARG(m->positions),
                          ARG(m->d_rope), ARG(m->qkv_dim), ARG(hd));
  if (st != CLPA_OK) return st;
  clpa_reshape_and_cache_params rc;
  clpa_reshape_and_cache_params_init(&rc);
  rc.cache = cache, rc.layer = l, rc.num_tokens = T, rc.src_dtype = CLPA_DTYPE_F32;
  rc.key = rc.value = m->qkv;
  rc.key_offset = (size_t)qd, rc.value_offset = (size_t)qd + (size_t)c->kv_heads * hd;
  rc.key_stride = rc.value_stride = (size_t)m->qkv_dim;
  rc.slot_mapping = m->slots;
  rc.event = demo_model_event(m, TIME_ATTN, "clpa_reshape_and_cache");
  return clpa_op(m, clpa_reshape_and_cache(m->ctx, &rc), "clpa_reshape_and_cache", l);
}

/* The QKV projection of A (f16 where a_half is set) with RoPE and the new
 * tokens' K/V to layer l's caches in gemv's epilogue
 * (demo_linear_run_qkv_rope): rope_and_cache's work without its launch. */
static clpa_status gemm_qkv_rope(demo_model *m, clpa_cache *cache, const cache_write *cw,
                                 int32_t l, cl_mem A, int a_half, int32_t T) {
  const demo_config *c = &m->cfg;
  demo_qkv_rope r = cw->r;
  r.pos = m->positions, r.cs = m->d_rope, r.slots = m->slots;
  r.kc = clpa_cache_key(cache, l), r.vc = clpa_cache_value(cache, l);
  r.hd = c->head_size, r.heads = c->heads, r.kv_heads = c->kv_heads;
  const uint64_t before = demo_linear_enqueues(m->lin);
  return counted(m, before, demo_linear_run_qkv_rope(
                                m->lin, m->engine, demo_model_form(m, l, DEMO_MAT_QKV), A, a_half,
                                m->dl[l].wqkv, m->qkv, T, m->qkv_dim, c->hidden, &r,
                                demo_model_event(m, TIME_GEMM, "qkv + RoPE + cache")));
}

/* One layer over the step's T tokens; x holds the residual stream. */
static clpa_status layer(demo_model *m, clpa_cache *cache, const step_plans *sp,
                         const cache_write *cw, int32_t l, int32_t T) {
  const demo_config *c = &m->cfg;
  const dev_layer *d = &m->dl[l];
  const int32_t qd = c->heads * c->head_size;
  /* each linear call's activations: f16 where it takes them (takes_f16) */
  const int hq = takes_f16(m, l, DEMO_MAT_QKV, T, c->hidden);
  const int hg = takes_f16(m, l, DEMO_MAT_GU, T, c->hidden);
  const int hdn = takes_f16(m, l, DEMO_MAT_DOWN, T, c->ffn);
  const cl_mem xq = hq ? m->xh : m->xn, xg = hg ? m->xh : m->xn, act = hdn ? m->acth : m->act;
  /* the gate and up projection makes SwiGLU's activations in its epilogue where gemv or the
   * tiled GEMM runs it (the norms stay launches: docs/decisions/0034-demo-epilogue-fusions.md,
   * 0035, 0038) */
  const int sw = m->gu_inter && !m->unfused &&
                 demo_linear_takes_swiglu_out(m->lin, m->engine, T, 2 * c->ffn, c->hidden,
                                              demo_model_form(m, l, DEMO_MAT_GU));
  clpa_status st;
  TRY(rmsnorm(m, m->x, d->attn_norm, xq, T, hq));
  /* RoPE and the cache write in the QKV projection's epilogue where gemv runs it and the
   * layout takes the fused write (docs/decisions/0035-demo-rope-and-norms-in-gemv.md) */
  if (cw->on && demo_linear_takes_qkv_rope(m->lin, m->engine, T, c->hidden,
                                           demo_model_form(m, l, DEMO_MAT_QKV))) {
    TRY(gemm_qkv_rope(m, cache, cw, l, xq, hq, T));
  } else {
    TRY(gemm(m, l, DEMO_MAT_QKV, xq, d->wqkv, m->qkv, T, m->qkv_dim, c->hidden, 0, hq));
    TRY(rope_and_cache(m, cache, cw, l, T));
  }
  TRY(attention(m, cache, sp, l));

  TRY(gemm(m, l, DEMO_MAT_O, m->attn, d->wo, m->x, T, c->hidden, qd, 1, 0));
  TRY(rmsnorm(m, m->x, d->ffn_norm, xg, T, hg));
  if (sw) {
    TRY(gemm_swiglu(m, l, xg, hg, act, hdn, T));
  } else {
    TRY(gemm(m, l, DEMO_MAT_GU, xg, d->wgu, m->gu, T, 2 * c->ffn, c->hidden, 0, hg));
    size_t sg[2] = {(size_t)c->ffn, (size_t)T};
    const cl_int inter = m->gu_inter;
    TRY(launch(m, hdn ? K_SILU_MUL_H : K_SILU_MUL, 2, sg, NULL, 4, ARG(m->gu), ARG(act),
               ARG(c->ffn), ARG(inter)));
  }
  TRY(gemm(m, l, DEMO_MAT_DOWN, act, d->wdown, m->x, T, c->hidden, c->ffn, 1, hdn));
out:
  return st;
}

clpa_status demo_model_forward(demo_model *m, clpa_cache *cache, const demo_batch *b,
                               float *logits, int32_t *next_tokens, demo_times *times) {
  if (times) memset(times, 0, sizeof *times);
  if (!m || !cache || !b || !next_tokens)
    return demo_fail(CLPA_ERR_INVALID_ARG, "demo_model_forward: NULL argument");
  clpa_kv_layout kv;
  clpa_status st = demo_clpa_check(clpa_cache_get_layout(cache, &kv), "clpa_cache_get_layout", -1);
  if (st != CLPA_OK) return st;
  if (kv.num_kv_heads != m->cfg.kv_heads || kv.head_size != m->cfg.head_size)
    return demo_fail(
        CLPA_ERR_INVALID_ARG, "demo_model_forward: cache of %d x %d, model %d x %d",
        (int)kv.num_kv_heads, (int)kv.head_size, (int)m->cfg.kv_heads, (int)m->cfg.head_size);
  if ((st = check_batch(m, &kv, b)) != CLPA_OK) return st;

  const demo_config *c = &m->cfg;
  /* nd: the sequences of the decode plan (none in one call: plans_make) */
  const int32_t S = b->num_seqs, nd = m->one_call ? 0 : b->num_decode, T = b->cu_seqlens[S];
  const int32_t mb = b->max_blocks_per_seq;
  if ((st = demo_model_reserve(m, T, S)) != CLPA_OK ||
      (st = demo_model_inputs(m, T, S, nd, mb)) != CLPA_OK)
    return st;
  unsigned char *in = m->h_in;
  memcpy(in + m->in_off[IN_TOKENS], b->tokens, m->in_want[IN_TOKENS]);
  memcpy(in + m->in_off[IN_SLOTS], b->slots, m->in_want[IN_SLOTS]);
  memcpy(in + m->in_off[IN_BT_DEC], b->block_tables, m->in_want[IN_BT_DEC]);
  memcpy(in + m->in_off[IN_BT_PRE], b->block_tables + (size_t)nd * mb, m->in_want[IN_BT_PRE]);

  int32_t max_ctx = 0;
  step_plans plans = {NULL, NULL};
  for (int32_t s = 0; s < S; s++) {
    for (int32_t i = b->cu_seqlens[s]; i < b->cu_seqlens[s + 1]; i++)
      m->h_pos[i] = b->cached_lens[s] + (i - b->cu_seqlens[s]);
    m->h_last[s] = b->cu_seqlens[s + 1] - 1;
    if (s < nd) {
      m->h_ctx[s] = b->cached_lens[s] + 1;
      if (m->h_ctx[s] > max_ctx) max_ctx = m->h_ctx[s];
    }
  }

  demo_model_events_clear(m);
  m->ops = 0, m->cur_layer = -1;
  clock_gettime(CLOCK_MONOTONIC, &m->step_t0);
  int32_t layer_ops = 0;
  /* the inputs as one write from the staging (a write each, unfused) */
  if (!m->unfused) TRY(write_buf(m, m->in_buf, m->in_used, in, "the step's inputs"));
  for (int i = 0; m->unfused && i < IN_COUNT; i++)
    TRY(write_buf(m, *demo_model_input(m, i), m->in_want[i], in + m->in_off[i], "an input"));

  size_t eg[2] = {(size_t)c->hidden, (size_t)T};
  if (m->wdtype == CLPA_DTYPE_F16)
    TRY(launch(m, K_EMBED_F16, 2, eg, NULL, 5, ARG(m->d_embed), ARG(m->tokens), ARG(m->x),
               ARG(c->hidden), ARG(m->tiled)));
  else
    TRY(launch(m, K_EMBED_F32, 2, eg, NULL, 4, ARG(m->d_embed), ARG(m->tokens), ARG(m->x),
               ARG(c->hidden)));
  TRY(plans_make(m, cache, b, max_ctx, &plans));
  cache_write cw;
  plan_cache_write(m, cache, &kv, &cw);
  layer_ops = m->ops;
  for (int32_t l = 0; l < c->layers; l++) {
    m->cur_layer = l;
    TRY(layer(m, cache, &plans, &cw, l, T));
  }
  m->cur_layer = -1;
  layer_ops = m->ops - layer_ops;

  size_t ng = (size_t)S * m->norm_wg, nl = (size_t)m->norm_wg;
  const cl_int hl = takes_f16(m, 0, DEMO_MAT_LM_HEAD, S, c->hidden);
  TRY(launch(m, K_RMSNORM_ROWS, 1, &ng, &nl, 7, ARG(m->x), ARG(m->last_rows), ARG(m->d_final_norm),
             ARG(m->xl), ARG(c->hidden), ARG(c->norm_eps), ARG(hl)));
  TRY(gemm(m, 0, DEMO_MAT_LM_HEAD, m->xl, m->d_lm_head, m->logits, S, c->vocab, c->hidden, 0, hl));
  const cl_int parts = demo_argmax_parts(c->vocab), part_len = (c->vocab + parts - 1) / parts;
  size_t pg[2] = {(size_t)parts * DEMO_WG, (size_t)S}, pl[2] = {DEMO_WG, 1};
  TRY(launch(m, K_ARGMAX_PART, 2, pg, pl, 5, ARG(m->logits), ARG(c->vocab), ARG(part_len),
             ARG(m->part_v), ARG(m->part_i)));
  size_t ag = (size_t)S * DEMO_WG, al = DEMO_WG;
  TRY(launch(m, K_ARGMAX, 1, &ag, &al, 5, ARG(m->part_v), ARG(m->part_i), ARG(parts), ARG(c->vocab),
             ARG(m->next)));
  TRY(demo_cl_check(clEnqueueReadBuffer(m->queue, m->next, CL_FALSE, 0, (size_t)S * 4, next_tokens,
                                        0, NULL, demo_model_event(m, TIME_OTHER, "read next tokens")),
                    "clEnqueueReadBuffer(next tokens)"));
  m->ops++;
  if (logits) {
    TRY(demo_cl_check(clEnqueueReadBuffer(m->queue, m->logits, CL_FALSE, 0,
                                          (size_t)S * c->vocab * sizeof(float), logits, 0, NULL,
                                          demo_model_event(m, TIME_OTHER, "read logits")),
                      "clEnqueueReadBuffer(logits)"));
    m->ops++;
  }
out:;
  m->cur_layer = -1;
  plans_release(&plans);
  const double enqueue_s = demo_model_step_clock(m);
  /* Wait in every case: the queue may still read the caller's arrays. */
  cl_int e = clFinish(m->queue);
  if (st == CLPA_OK) st = demo_cl_check(e, "clFinish");
  if (st == CLPA_OK && m->profiling) demo_model_times(m, times);
  if (st == CLPA_OK) demo_model_trace_step(m, T, S, b->num_decode, enqueue_s); /* the step's, however called */
  if (times) times->ops = m->ops, times->layer_ops = layer_ops;
  demo_model_events_clear(m);
  return st;
}
