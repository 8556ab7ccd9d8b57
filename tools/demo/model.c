/*
 * model.c — the demo's Llama-shaped model on the device, the object: its
 * presets, kernels, weights (host and device) and their lifetime (model.h
 * has the contract, reference.h the formulas). One engine step over it is
 * model_step.c's, its per-step buffers model_buffers.c's and its timing
 * model_timing.c's; model_internal.h has the struct they share.
 *
 * Device buffers (f32 unless said; T = new tokens of the step, S = its
 * sequences; W = weight dtype, f32 or f16):
 *
 *   weights   embed W [vocab, hidden], lm_head W [vocab, hidden],
 *             final_norm [hidden]; per layer attn_norm, ffn_norm [hidden],
 *             wqkv W [(heads + 2 kv_heads) hd, hidden] (wq, wk, wv stacked:
 *             one GEMM), wo W [hidden, heads hd], wgu W [2 ffn, hidden]
 *             (gate, up stacked), wdown W [hidden, ffn]
 *   rope      float2 [max_positions, hd/2]: (cos, sin), from double
 *   per step  x [T, hidden] (the residual stream), xn [T, hidden], qkv [T,
 *             qkv_dim], attn [T, heads hd], gu [T, 2 ffn], act [T, ffn],
 *             xl [S, hidden], logits [S, vocab], next int [S]
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "parallel.h"
#include "quant.h"
#include "model_internal.h"

/* ---------------------------------------------------------------------
 * Presets
 * ------------------------------------------------------------------- */

int demo_config_preset(const char *name, demo_config *out) {
  demo_config c;
  memset(&c, 0, sizeof c);
  c.rope_theta = 10000.0f;
  c.norm_eps = 1e-5f;
  if (name && strcmp(name, "tiny") == 0) {
    c.vocab = 512, c.hidden = 128, c.layers = 4, c.heads = 4, c.kv_heads = 2, c.head_size = 32;
    c.ffn = 256, c.max_positions = 2048;
  } else if (name && strcmp(name, "llama-1b") == 0) {
    c.vocab = 128256, c.hidden = 2048, c.layers = 16, c.heads = 32, c.kv_heads = 8;
    c.head_size = 64, c.ffn = 8192, c.rope_theta = 500000.0f, c.max_positions = 8192;
  } else {
    return -1;
  }
  *out = c;
  return 0;
}

/* ---------------------------------------------------------------------
 * The model object
 * ------------------------------------------------------------------- */

const demo_config *demo_model_config(const demo_model *m) { return &m->cfg; }
const demo_host_weights *demo_model_host(const demo_model *m) { return &m->hw; }
void demo_model_set_linear(demo_model *m, demo_linear_engine e) { m->engine = e; }
void demo_model_linear_rule(const demo_model *m, char *buf, size_t cap) {
  const demo_linear_tuning *t = demo_linear_tuning_of(m->lin);
  if (m->engine != DEMO_LINEAR_AUTO) {
    snprintf(buf, cap, "%s (forced)", demo_linear_engine_name(m->engine));
    return;
  }
  /* the engines in demo_linear_pick's order, each with its rows */
  char part[4][64];
  int n = 0;
  if (t->gemm_min_rows > 0)
    snprintf(part[n++], sizeof part[0], "gemm (where it runs) from %d rows", (int)t->gemm_min_rows);
  if (t->gemv_max_rows > 0)
    snprintf(part[n++], sizeof part[0], "gemv (where it runs) up to %d rows", (int)t->gemv_max_rows);
  if (t->mma_max_rows >= (1 << 30))
    snprintf(part[n++], sizeof part[0], "mma (where it runs) from %d rows", (int)t->mma_min_rows);
  else if (t->mma_max_rows > 0)
    snprintf(part[n++], sizeof part[0], "mma (where it runs) from %d to %d rows",
             (int)t->mma_min_rows, (int)t->mma_max_rows);
  if (t->stream_max_rows >= (1 << 30))
    snprintf(part[n++], sizeof part[0], "stream at every row count");
  else
    snprintf(part[n++], sizeof part[0], "stream up to %d rows, then clblast", (int)t->stream_max_rows);
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < n && at < cap; i++)
    at += (size_t)snprintf(buf + at, cap - at, "%s%s", i ? ", else " : "", part[i]);
  if (at < cap) snprintf(buf + at, cap - at, " (table %s)", t->match);
}

/* One copy of bytes from a to b, by clEnqueueCopyBuffer (k NULL) or the copy kernel k, timed by
 * its profiling event: the GB/s read and written, 0 if a call fails. */
static double copy_once_gbps(demo_model *m, cl_mem a, cl_mem b, size_t bytes, cl_kernel k) {
  cl_event ev;
  cl_ulong t0, t1;
  const size_t global = bytes / 16;
  const cl_int e = k ? clEnqueueNDRangeKernel(m->queue, k, 1, NULL, &global, NULL, 0, NULL, &ev)
                     : clEnqueueCopyBuffer(m->queue, a, b, 0, 0, bytes, 0, NULL, &ev);
  if (e != CL_SUCCESS) return 0;
  const cl_profiling_info s = CL_PROFILING_COMMAND_START, f = CL_PROFILING_COMMAND_END;
  const int got = clWaitForEvents(1, &ev) == CL_SUCCESS &&
                  clGetEventProfilingInfo(ev, s, sizeof t0, &t0, NULL) == CL_SUCCESS &&
                  clGetEventProfilingInfo(ev, f, sizeof t1, &t1, NULL) == CL_SUCCESS;
  clReleaseEvent(ev);
  return got && t1 > t0 ? 2.0 * (double)bytes / (double)(t1 - t0) : 0;
}

double demo_model_copy_gbps(demo_model *m) {
  const size_t bytes = (size_t)64 << 20;
  cl_int e;
  cl_mem a = clCreateBuffer(m->clctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
  cl_mem b = e == CL_SUCCESS ? clCreateBuffer(m->clctx, CL_MEM_READ_WRITE, bytes, NULL, &e) : NULL;
  /* clEnqueueCopyBuffer and clpa's copy kernel (clpa-bench's two ceilings), the better */
  cl_kernel k = NULL;
  cl_program prog;
  if (b && m->queue_profiles && clpa_program_get(m->ctx, "smoke", "", &prog) == CLPA_OK) {
    const cl_uint n4 = (cl_uint)(bytes / 16);
    k = clCreateKernel(prog, "clpa_smoke_copy4", &e);
    if (k && (e != CL_SUCCESS || clSetKernelArg(k, 0, sizeof a, &a) != CL_SUCCESS ||
              clSetKernelArg(k, 1, sizeof b, &b) != CL_SUCCESS ||
              clSetKernelArg(k, 2, sizeof n4, &n4) != CL_SUCCESS))
      clReleaseKernel(k), k = NULL;
  }
  double best = 0;
  for (int way = 0; way < (k ? 2 : 1); way++)
    for (int i = 0; m->queue_profiles && b && i < 4; i++) {
      const double gbps = copy_once_gbps(m, a, b, bytes, way ? k : NULL);
      if (gbps <= 0) break;
      if (i > 0 && gbps > best) best = gbps; /* the first copy touches the pages */
    }
  if (k) clReleaseKernel(k);
  if (a) clReleaseMemObject(a);
  if (b) clReleaseMemObject(b);
  return best;
}

/* The steps take events for timing or a trace, where the queue profiles. */
static void update_profiling(demo_model *m) {
  m->profiling = (m->timing || m->trace) && m->queue_profiles;
}

void demo_model_set_timing(demo_model *m, int on) {
  m->timing = on != 0;
  update_profiling(m);
}

int demo_model_set_trace(demo_model *m, FILE *f) {
  m->trace = m->queue_profiles ? f : NULL;
  m->trace_step = 0;
  update_profiling(m);
  return f == NULL || m->trace != NULL;
}

void demo_model_set_one_call(demo_model *m, int on) { m->one_call = on != 0; }

void demo_model_set_fused(demo_model *m, int on) { m->unfused = !on; }

const char *const demo_matrix_names[DEMO_MAT_LM_HEAD + 1] = {"qkv", "o", "gate_up", "down",
                                                             "lm_head"};

const char *const demo_kernel_names[K_COUNT] = {
    "demo_embed_f32", "demo_embed_f16",  "demo_rmsnorm",    "demo_rmsnorm_rows",
    "demo_rope",      "demo_silu_mul",   "demo_argmax",     "demo_rmsnorm_h",
    "demo_silu_mul_h", "demo_rope_cache", "demo_argmax_part"};

void demo_model_destroy(demo_model *m) {
  if (!m) return;
  if (m->queue) clFinish(m->queue);
  demo_model_release_buffers(m);
  demo_model_events_free(m);
  demo_release_mem(&m->d_embed);
  demo_release_mem(&m->d_final_norm);
  demo_release_mem(&m->d_lm_head);
  demo_release_mem(&m->d_rope);
  demo_linear_destroy(m->lin);
  for (int32_t l = 0; m->dl && l < m->cfg.layers; l++) {
    dev_layer *d = &m->dl[l];
    demo_release_mem(&d->attn_norm), demo_release_mem(&d->ffn_norm), demo_release_mem(&d->wqkv);
    demo_release_mem(&d->wo), demo_release_mem(&d->wgu), demo_release_mem(&d->wdown);
  }
  for (int32_t l = 0; m->hl && l < m->cfg.layers; l++) {
    host_layer *h = &m->hl[l];
    free(h->attn_norm), free(h->ffn_norm), free(h->wqkv), free(h->wo), free(h->wgu),
        free(h->wdown);
  }
  free(m->dl);
  free(m->hl);
  free(m->hw.layer);
  if (m->h_lm_head != m->h_embed) free(m->h_lm_head);
  free(m->h_embed);
  free(m->h_final_norm);
  free(m->h_rope_factors);
  free(m->slot_layers);
  for (int i = 0; i < K_COUNT; i++)
    if (m->k[i]) clReleaseKernel(m->k[i]);
  if (m->prog) clReleaseProgram(m->prog);
  free(m);
}

static int config_valid(const demo_config *c) {
  return c->vocab > 0 && c->hidden > 0 && c->layers > 0 && c->heads > 0 && c->kv_heads > 0 &&
         c->heads % c->kv_heads == 0 && c->head_size > 0 && c->head_size % 2 == 0 && c->ffn > 0 &&
         c->rope_theta > 0 && c->norm_eps > 0 && c->max_positions > 0;
}

/* Builds the demo's program and kernels on the context's device. */
static clpa_status build_kernels(demo_model *m) {
  cl_int e;
  m->prog = clCreateProgramWithSource(m->clctx, demo_kernel_source_count,
                                      (const char **)demo_kernel_source, NULL, &e);
  if (e != CL_SUCCESS) return demo_cl_check(e, "clCreateProgramWithSource (demo kernels)");
  clpa_device_info info;
  clpa_context_device_info(m->ctx, &info);
  m->norm_wg = demo_norm_wg(info.is_gpu);
  char opts[64];
  demo_kernel_options(opts, sizeof opts, m->norm_wg);
  e = clBuildProgram(m->prog, 1, &m->dev, opts, NULL, NULL);
  if (e != CL_SUCCESS) {
    char log[1536] = "";
    clGetProgramBuildInfo(m->prog, m->dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    return demo_fail(CLPA_ERR_BUILD, "clBuildProgram (demo kernels): OpenCL error %d: %s",
                     (int)e, log);
  }
  for (int i = 0; i < K_COUNT; i++) {
    m->k[i] = clCreateKernel(m->prog, demo_kernel_names[i], &e);
    if (e != CL_SUCCESS)
      return demo_fail(demo_cl_status(e), "clCreateKernel(%s): OpenCL error %d",
                       demo_kernel_names[i], (int)e);
  }
  return CLPA_OK;
}

/* A device buffer holding n host floats (the norms, the RoPE table). */
static clpa_status upload(demo_model *m, const float *h, size_t n, cl_mem *out) {
  cl_int e;
  *out = clCreateBuffer(m->clctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof(float),
                        (void *)h, &e);
  return demo_cl_check(e, "clCreateBuffer (weights)");
}

/* A matrix's host floats as the device holds them: n rows of k in dt (f32 or f16), the gate and
 * up rows interleaved (source_row) where gu_f, their count each, is set. */
typedef struct form_job {
  const float *src;
  void *dst;
  size_t k;
  int32_t gu_f;
  clpa_dtype dt;
} form_job;

/* The host row that the device's row r holds: the order interleave_gu's comment gives where
 * gu_f (the gate's and the up's rows each) is set. */
static size_t source_row(size_t r, int32_t gu_f) {
  if (!gu_f) return r;
  const size_t t = r / 16, o = r % 16;
  return o < 8 ? 8 * t + o : (size_t)gu_f + 8 * t + (o - 8);
}

static void form_rows(void *arg, int part, size_t lo, size_t hi) {
  (void)part;
  const form_job *j = arg;
  for (size_t r = lo; r < hi; r++) {
    const float *src = j->src + source_row(r, j->gu_f) * j->k;
    if (j->dt == CLPA_DTYPE_F16)
      clpa_dtype_encode(CLPA_DTYPE_F16, src, (uint16_t *)j->dst + r * j->k, j->k, 1.0f);
    else
      memcpy((float *)j->dst + r * j->k, src, j->k * sizeof(float));
  }
}

/* A matrix [n, k] of host floats in the weight dtype (as tiles where m->tiled is set), written
 * on the host's cores straight into the mapped device buffer: on a CPU device that is the
 * buffer's own memory, so a weight is written once (no staging copy, no second buffer). */
static clpa_status upload_rows(demo_model *m, const float *src, int32_t n, int32_t k, int32_t gu_f,
                               cl_mem *out) {
  const size_t count = (size_t)n * (size_t)k;
  const int tiled = m->tiled;
  const size_t bytes = tiled ? demo_wfmt_bytes(DEMO_W_F16_TILED, n, k)
                             : count * clpa_dtype_size(m->wdtype);
  uint16_t *rows = tiled && bytes ? malloc(2 * count) : NULL;
  if (!bytes || (tiled && !rows)) {
    free(rows);
    return demo_fail(bytes ? CLPA_ERR_OUT_OF_MEMORY : CLPA_ERR_INVALID_ARG,
                     "upload: a %d x %d matrix%s (%zu bytes)", (int)n, (int)k,
                     tiled ? " as tiles" : "", bytes);
  }
  cl_int e;
  cl_mem buf = clCreateBuffer(m->clctx, CL_MEM_READ_ONLY, bytes, NULL, &e);
  clpa_status st = demo_cl_check(e, "clCreateBuffer (weights)");
  void *dst = NULL;
  if (st == CLPA_OK) {
    dst = clEnqueueMapBuffer(m->queue, buf, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 0, bytes, 0,
                             NULL, NULL, &e);
    st = demo_cl_check(e, "clEnqueueMapBuffer (weights)");
  }
  if (st == CLPA_OK) {
    form_job j = {src, tiled ? (void *)rows : dst, (size_t)k, gu_f,
                  tiled ? CLPA_DTYPE_F16 : m->wdtype};
    demo_parallel_for((size_t)n, ((size_t)1 << 20) / (size_t)k + 1, form_rows, &j);
    if (tiled) demo_wfmt_tile(DEMO_W_F16_TILED, rows, dst, n, k);
    cl_event done = NULL;
    st = demo_cl_check(clEnqueueUnmapMemObject(m->queue, buf, dst, 0, NULL, &done),
                       "clEnqueueUnmapMemObject (weights)");
    if (st == CLPA_OK) st = demo_cl_check(clWaitForEvents(1, &done), "clWaitForEvents (weights)");
    if (done) clReleaseEvent(done);
  }
  free(rows);
  if (st != CLPA_OK) {
    if (buf) clReleaseMemObject(buf);
    return st;
  }
  *out = buf;
  return CLPA_OK;
}

/* Whether every f16 matrix of the model (and its embedding) can be held as tiles: each k a
 * multiple of 32. */
static int tileable(const demo_model *m) {
  const demo_config *c = &m->cfg;
  return m->wdtype == CLPA_DTYPE_F16 && c->hidden % 32 == 0 &&
         (c->heads * c->head_size) % 32 == 0 && c->ffn % 32 == 0;
}

/* The gate and up projection's rows as the device holds them where
 * gu_inter is set: interleaved by 8, a tile of 16 rows holding gate rows
 * 8t .. 8t + 7, then up rows 8t .. 8t + 7 (kernels.c's demo_gu_col), so
 * that gemv can make SwiGLU's activations from one tile (its epilogue).
 * src: 2f rows of row_bytes, the gate's then the up's. NULL: no memory. */
static void *interleave_gu(const void *src, size_t row_bytes, int32_t f) {
  unsigned char *dst = malloc(row_bytes * 2 * (size_t)f);
  if (!dst) return NULL;
  for (size_t r = 0; r < 2 * (size_t)f; r++)
    memcpy(dst + r * row_bytes, (const unsigned char *)src + source_row(r, f) * row_bytes,
           row_bytes);
  return dst;
}

/* The RoPE table: (cos, sin) of pos * theta^(-2i/hd) / factor_i, in
 * double, then float. */
static clpa_status upload_rope(demo_model *m) {
  const demo_config *c = &m->cfg;
  const int32_t half = c->head_size / 2;
  size_t n = (size_t)c->max_positions * half * 2;
  float *t = malloc(n * sizeof(float));
  if (!t) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "rope table: %zu floats", n);
  for (int32_t i = 0; i < half; i++) {
    double f = pow((double)c->rope_theta, -2.0 * i / c->head_size);
    if (m->h_rope_factors) f /= m->h_rope_factors[i];
    for (int32_t p = 0; p < c->max_positions; p++) {
      t[((size_t)p * half + i) * 2] = (float)cos(p * f);
      t[((size_t)p * half + i) * 2 + 1] = (float)sin(p * f);
    }
  }
  clpa_status st = upload(m, t, n, &m->d_rope);
  free(t);
  return st;
}

/* Points the public host view (demo_host_weights) and the builder's
 * slots into the stacked arrays. */
static void set_host_view(demo_model *m, demo_weight_slots *slots) {
  const demo_config *c = &m->cfg;
  size_t qd = (size_t)c->heads * c->head_size, kd = (size_t)c->kv_heads * c->head_size;
  slots->embed = m->h_embed;
  slots->final_norm = m->h_final_norm;
  slots->lm_head = m->h_lm_head;
  slots->rope_freq_factors = m->h_rope_factors;
  slots->layer = m->slot_layers;
  for (int32_t l = 0; l < c->layers; l++) {
    host_layer *h = &m->hl[l];
    demo_layer_slots *d = &m->slot_layers[l];
    d->attn_norm = h->attn_norm;
    d->ffn_norm = h->ffn_norm;
    d->wq = h->wqkv;
    d->wk = h->wqkv + qd * c->hidden;
    d->wv = h->wqkv + (qd + kd) * c->hidden;
    d->wo = h->wo;
    d->w_gate = h->wgu;
    d->w_up = h->wgu + (size_t)c->ffn * c->hidden;
    d->w_down = h->wdown;
    m->hw.layer[l].attn_norm = d->attn_norm, m->hw.layer[l].ffn_norm = d->ffn_norm;
    m->hw.layer[l].wq = d->wq, m->hw.layer[l].wk = d->wk, m->hw.layer[l].wv = d->wv;
    m->hw.layer[l].wo = d->wo, m->hw.layer[l].w_gate = d->w_gate, m->hw.layer[l].w_up = d->w_up;
    m->hw.layer[l].w_down = d->w_down;
  }
  m->hw.embed = m->h_embed;
  m->hw.final_norm = m->h_final_norm;
  m->hw.lm_head = m->h_lm_head;
  m->hw.rope_freq_factors = m->h_rope_factors;
}

/* The model shell: context handles, config, kernels, zeroed arrays. */
static clpa_status model_new(clpa_context *ctx, const demo_config *cfg, clpa_dtype wdt,
                             demo_model **out) {
  *out = NULL;
  if (!ctx || !cfg || !config_valid(cfg))
    return demo_fail(CLPA_ERR_INVALID_ARG, "demo_model: invalid context or config");
  if (wdt != CLPA_DTYPE_F32 && wdt != CLPA_DTYPE_F16)
    return demo_fail(CLPA_ERR_UNSUPPORTED, "demo_model: weight dtype %s (f32 or f16)",
                     clpa_dtype_name(wdt));
  demo_model *m = calloc(1, sizeof *m);
  if (!m) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "demo_model: out of memory");
  m->ctx = ctx;
  m->clctx = clpa_context_cl_context(ctx);
  m->dev = clpa_context_cl_device(ctx);
  m->queue = clpa_context_cl_queue(ctx);
  m->cfg = *cfg;
  m->gu_inter = cfg->ffn % 8 == 0;
  m->wdtype = wdt;
  m->qkv_dim = (cfg->heads + 2 * cfg->kv_heads) * cfg->head_size;
  cl_command_queue_properties props = 0;
  if (clGetCommandQueueInfo(m->queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL) != CL_SUCCESS)
    props = 0; /* unknown: no profiling events asked for */
  m->queue_profiles = (props & CL_QUEUE_PROFILING_ENABLE) != 0;
  m->profiling = m->timing = m->queue_profiles;
  m->hl = calloc((size_t)cfg->layers, sizeof *m->hl);
  m->dl = calloc((size_t)cfg->layers, sizeof *m->dl);
  m->hw.layer = calloc((size_t)cfg->layers, sizeof *m->hw.layer);
  if (!m->hl || !m->dl || !m->hw.layer) {
    demo_model_destroy(m);
    return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "demo_model: out of memory");
  }
  clpa_status st = build_kernels(m);
  if (st == CLPA_OK) st = demo_linear_create(m->clctx, m->dev, m->queue, NULL, &m->lin);
  /* the table says whether tiles are best on this device */
  if (st == CLPA_OK) m->tiled = demo_linear_tuning_of(m->lin)->tiled && tileable(m);
  if (st != CLPA_OK) {
    demo_model_destroy(m);
    return st;
  }
  *out = m;
  return CLPA_OK;
}

/* A matrix's shape: rows (n) and columns (k). */
static void matrix_shape(const demo_model *m, demo_matrix which, int32_t *n, int32_t *k) {
  const demo_config *c = &m->cfg;
  const int32_t H = c->hidden, qd = c->heads * c->head_size;
  switch (which) {
  case DEMO_MAT_QKV: *n = m->qkv_dim, *k = H; break;
  case DEMO_MAT_O: *n = H, *k = qd; break;
  case DEMO_MAT_GU: *n = 2 * c->ffn, *k = H; break;
  case DEMO_MAT_DOWN: *n = H, *k = c->ffn; break;
  default: *n = c->vocab, *k = H; break;
  }
}

/* Layer l's matrix `which` (the LM head: l ignored): the host's floats, and the device's buffer. */
static float *host_matrix(demo_model *m, int32_t l, demo_matrix which) {
  return which == DEMO_MAT_QKV    ? m->hl[l].wqkv
         : which == DEMO_MAT_O    ? m->hl[l].wo
         : which == DEMO_MAT_GU   ? m->hl[l].wgu
         : which == DEMO_MAT_DOWN ? m->hl[l].wdown
                                  : m->h_lm_head;
}
static cl_mem *dev_matrix(demo_model *m, int32_t l, demo_matrix which) {
  return which == DEMO_MAT_QKV    ? &m->dl[l].wqkv
         : which == DEMO_MAT_O    ? &m->dl[l].wo
         : which == DEMO_MAT_GU   ? &m->dl[l].wgu
         : which == DEMO_MAT_DOWN ? &m->dl[l].wdown
                                  : &m->d_lm_head;
}

/* Layer l's matrix `which` (or the LM head) as the device holds it, from the host's floats
 * (the gate and up rows interleaved where gu_inter is set), into *out. */
static clpa_status upload_host_matrix(demo_model *m, int32_t l, demo_matrix which, cl_mem *out) {
  int32_t n, k;
  matrix_shape(m, which, &n, &k);
  const int32_t gu_f = which == DEMO_MAT_GU && m->gu_inter ? m->cfg.ffn : 0;
  return upload_rows(m, host_matrix(m, l, which), n, k, gu_f, out);
}

/* Uploads every host weight (already rounded to the weight dtype). */
static clpa_status upload_all(demo_model *m) {
  const demo_config *c = &m->cfg;
  const size_t H = (size_t)c->hidden;
  clpa_status st;
  TRY(upload_rows(m, m->h_embed, c->vocab, c->hidden, 0, &m->d_embed));
  if (m->h_lm_head != m->h_embed) {
    if (!m->d_lm_head) TRY(upload_host_matrix(m, 0, DEMO_MAT_LM_HEAD, &m->d_lm_head));
  } else if ((st = demo_cl_check(clRetainMemObject(m->d_embed), "clRetainMemObject")) == CLPA_OK) {
    m->d_lm_head = m->d_embed; /* tied: one buffer */
  }
  TRY(upload(m, m->h_final_norm, H, &m->d_final_norm));
  for (int32_t l = 0; l < c->layers; l++) {
    host_layer *h = &m->hl[l];
    dev_layer *d = &m->dl[l];
    TRY(upload(m, h->attn_norm, H, &d->attn_norm));
    TRY(upload(m, h->ffn_norm, H, &d->ffn_norm));
    /* matrices the source gave as blocks are on the device already */
    for (int w = DEMO_MAT_QKV; w <= DEMO_MAT_DOWN; w++)
      if (!*dev_matrix(m, l, (demo_matrix)w))
        TRY(upload_host_matrix(m, l, (demo_matrix)w, dev_matrix(m, l, (demo_matrix)w)));
  }
  TRY(upload_rope(m));
out:
  return st;
}

static void round_part(void *arg, int part, size_t lo, size_t hi) {
  (void)part;
  float *p = arg;
  uint16_t h[4096];
  for (size_t i = lo; i < hi; i += 4096) {
    const size_t c = hi - i < 4096 ? hi - i : 4096;
    clpa_dtype_encode(CLPA_DTYPE_F16, p + i, h, c, 1.0f);
    clpa_dtype_decode(CLPA_DTYPE_F16, h, p + i, c, 1.0f);
  }
}

/* Rounds n floats in place to dt (f16: what the device will store). */
static void round_to(float *p, size_t n, clpa_dtype dt) {
  if (dt == CLPA_DTYPE_F16) demo_parallel_for(n, 1 << 20, round_part, p);
}

clpa_status demo_model_begin(clpa_context *ctx, const demo_config *cfg, clpa_dtype weight_dtype,
                             int tied, int rope_factors, demo_model **out,
                             demo_weight_slots *slots) {
  if (!out || !slots)
    return demo_fail(CLPA_ERR_INVALID_ARG, "demo_model_begin: NULL argument");
  demo_model *m;
  clpa_status st = model_new(ctx, cfg, weight_dtype, &m);
  if (st != CLPA_OK) return st;
  const size_t H = (size_t)cfg->hidden, qd = (size_t)cfg->heads * cfg->head_size;
  const size_t F = (size_t)cfg->ffn, f = sizeof(float);
  m->slot_layers = calloc((size_t)cfg->layers, sizeof *m->slot_layers);
  m->h_embed = malloc((size_t)cfg->vocab * H * f);
  m->h_final_norm = malloc(H * f);
  m->h_lm_head = tied ? m->h_embed : malloc((size_t)cfg->vocab * H * f);
  int bad = !m->slot_layers || !m->h_embed || !m->h_final_norm || !m->h_lm_head;
  if (rope_factors) bad |= !(m->h_rope_factors = malloc((size_t)cfg->head_size / 2 * f));
  for (int32_t l = 0; l < cfg->layers && !bad; l++) {
    host_layer *h = &m->hl[l];
    h->attn_norm = malloc(H * f);
    h->ffn_norm = malloc(H * f);
    h->wqkv = malloc((size_t)m->qkv_dim * H * f);
    h->wo = malloc(H * qd * f);
    h->wgu = malloc(2 * F * H * f);
    h->wdown = malloc(H * F * f);
    bad = !h->attn_norm || !h->ffn_norm || !h->wqkv || !h->wo || !h->wgu || !h->wdown;
  }
  if (bad) {
    demo_model_destroy(m);
    return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "demo_model_begin: host weights");
  }
  set_host_view(m, slots);
  *out = m;
  return CLPA_OK;
}

int demo_model_tiled(const demo_model *m) { return m->tiled; }

clpa_status demo_model_set_weight_layout(demo_model *m, int tiled) {
  const demo_config *c = &m->cfg;
  tiled = tiled != 0;
  if (tiled == m->tiled) return CLPA_OK;
  if (tiled && !tileable(m))
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "demo_model_set_weight_layout: tiles need f16 weights (%s) and hidden (%d),"
                     " heads x head_size (%d) and ffn (%d) multiples of 32",
                     clpa_dtype_name(m->wdtype), (int)c->hidden, (int)(c->heads * c->head_size),
                     (int)c->ffn);
  /* every new buffer first, then the swap: on failure the model is as it was */
  const size_t per = DEMO_MAT_DOWN - DEMO_MAT_QKV + 1, count = 2 + per * (size_t)c->layers;
  cl_mem *fresh = calloc(count, sizeof *fresh);
  if (!fresh) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "demo_model_set_weight_layout: out of memory");
  m->tiled = tiled;
  const int tied = m->h_lm_head == m->h_embed;
  clpa_status st = upload_rows(m, m->h_embed, c->vocab, c->hidden, 0, &fresh[0]);
  if (st == CLPA_OK && !tied && !m->lm_form)
    st = upload_host_matrix(m, 0, DEMO_MAT_LM_HEAD, &fresh[1]);
  for (int32_t l = 0; st == CLPA_OK && l < c->layers; l++)
    for (size_t w = 0; st == CLPA_OK && w < per; w++)
      if (!m->dl[l].form[DEMO_MAT_QKV + w])
        st = upload_host_matrix(m, l, (demo_matrix)(DEMO_MAT_QKV + w), &fresh[2 + per * (size_t)l + w]);
  if (st == CLPA_OK && tied) {
    st = demo_cl_check(clRetainMemObject(fresh[0]), "clRetainMemObject");
    if (st == CLPA_OK) fresh[1] = fresh[0];
  }
  if (st != CLPA_OK) {
    m->tiled = !tiled;
    for (size_t i = 0; i < count; i++) demo_release_mem(&fresh[i]);
    free(fresh);
    return st;
  }
  demo_release_mem(&m->d_embed), m->d_embed = fresh[0];
  if (fresh[1]) demo_release_mem(&m->d_lm_head), m->d_lm_head = fresh[1];
  for (int32_t l = 0; l < c->layers; l++)
    for (size_t w = 0; w < per; w++) {
      cl_mem *dst = dev_matrix(m, l, (demo_matrix)(DEMO_MAT_QKV + w));
      if (fresh[2 + per * (size_t)l + w]) demo_release_mem(dst), *dst = fresh[2 + per * (size_t)l + w];
    }
  free(fresh);
  return CLPA_OK;
}

/* A matrix's form: its blocks' (demo_model_set_blocks), else the weight dtype's (tiled where
 * m->tiled is set). */
demo_wfmt demo_model_form(const demo_model *m, int32_t layer, demo_matrix which) {
  const demo_wfmt f = which == DEMO_MAT_LM_HEAD ? m->lm_form : m->dl[layer].form[which];
  const demo_wfmt w = demo_wfmt_of_dtype(m->wdtype);
  return f ? f : m->tiled ? demo_wfmt_tiled(w) : w;
}

clpa_status demo_model_set_blocks(demo_model *m, int32_t layer, demo_matrix which, demo_wfmt w,
                                  const void *blocks, size_t bytes) {
  int32_t n, k;
  matrix_shape(m, which, &n, &k);
  const size_t want = demo_wfmt_row_bytes(w, k) * (size_t)n;
  if (!demo_wfmt_is_block(w) || !want || bytes != want ||
      (which != DEMO_MAT_LM_HEAD && (layer < 0 || layer >= m->cfg.layers)) ||
      (which == DEMO_MAT_LM_HEAD && m->h_lm_head == m->h_embed))
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "demo_model_set_blocks: layer %d matrix %d as %s: %zu bytes (%zu wanted)",
                     (int)layer, (int)which, demo_wfmt_name(w), bytes, want);
  cl_mem *dst = dev_matrix(m, layer, which);
  void *gu = which == DEMO_MAT_GU && m->gu_inter
                 ? interleave_gu(blocks, demo_wfmt_row_bytes(w, k), m->cfg.ffn)
                 : (void *)blocks;
  if (!gu) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "demo_model_set_blocks: %zu bytes", bytes);
  cl_int e;
  demo_release_mem(dst);
  *dst = clCreateBuffer(m->clctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, gu, &e);
  if (gu != blocks) free(gu);
  if (e != CL_SUCCESS) {
    *dst = NULL;
    return demo_cl_check(e, "clCreateBuffer (weight blocks)");
  }
  if (which == DEMO_MAT_LM_HEAD)
    m->lm_form = w;
  else
    m->dl[layer].form[which] = w;
  return CLPA_OK;
}

/* A matrix's rows quantized into their blocks, then decoded back into the
 * floats; each part's status and message (a failure's is its thread's own). */
typedef struct quant_job {
  uint32_t type;
  float *h;
  unsigned char *blocks;
  size_t row_bytes;
  int32_t k;
  clpa_status st[DEMO_PARALLEL_MAX];
  char msg[DEMO_PARALLEL_MAX][256];
} quant_job;

static void quant_rows(void *arg, int part, size_t r0, size_t r1) {
  quant_job *j = arg;
  const size_t count = (r1 - r0) * (size_t)j->k;
  float *h = j->h + r0 * (size_t)j->k;
  unsigned char *b = j->blocks + r0 * j->row_bytes;
  clpa_status st = demo_quant_quantize(j->type, h, b, count);
  if (st == CLPA_OK) st = demo_quant_dequantize(j->type, b, h, count);
  if (st != CLPA_OK) snprintf(j->msg[part], sizeof j->msg[part], "%s", demo_last_error());
  j->st[part] = st;
}

/* One matrix of n rows of k, on the host's cores (the K-quants' encoder
 * searches every sub-block's scales, and a llama-1b's layers hold 10^9
 * weights: minutes on one core). */
static clpa_status quant_matrix(uint32_t type, float *h, unsigned char *blocks, size_t row_bytes,
                                int32_t n, int32_t k) {
  quant_job *j = malloc(sizeof *j);
  if (!j) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "demo_model_quantize: out of memory");
  *j = (quant_job){.type = type, .h = h, .blocks = blocks, .row_bytes = row_bytes, .k = k};
  const int parts = demo_parallel_for((size_t)n, 1, quant_rows, j);
  clpa_status st = CLPA_OK;
  for (int t = 0; t < parts && st == CLPA_OK; t++)
    if (j->st[t] != CLPA_OK) st = demo_fail(j->st[t], "%s", j->msg[t]);
  free(j);
  return st;
}

clpa_status demo_model_quantize(demo_model *m, demo_wfmt w) {
  const char *const *names = demo_matrix_names;
  const uint32_t type = demo_wfmt_ggml(w);
  if (!demo_wfmt_is_block(w) || !demo_quant_supported(type))
    return demo_fail(CLPA_ERR_INVALID_ARG, "demo_model_quantize: %s is not a block form",
                     demo_wfmt_name(w));
  const int head = m->h_lm_head != m->h_embed;
  for (int32_t l = 0; l < m->cfg.layers; l++)
    for (int which = DEMO_MAT_QKV; which <= DEMO_MAT_LM_HEAD; which++) {
      if (which == DEMO_MAT_LM_HEAD && (l > 0 || !head)) continue;
      int32_t n, k;
      matrix_shape(m, (demo_matrix)which, &n, &k);
      const size_t bytes = demo_wfmt_row_bytes(w, k) * (size_t)n;
      if (!bytes)
        return demo_fail(CLPA_ERR_INVALID_ARG,
                         "demo_model_quantize: %s rows of %d do not make whole %s blocks of %u",
                         names[which], (int)k, demo_wfmt_name(w), demo_quant_block_elems(type));
      float *h = host_matrix(m, l, (demo_matrix)which);
      void *blocks = malloc(bytes);
      if (!blocks) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "demo_model_quantize: %zu bytes", bytes);
      clpa_status st = quant_matrix(type, h, blocks, demo_wfmt_row_bytes(w, k), n, k);
      if (st == CLPA_OK) st = demo_model_set_blocks(m, l, (demo_matrix)which, w, blocks, bytes);
      free(blocks);
      if (st != CLPA_OK) return st;
    }
  return CLPA_OK;
}

double demo_model_weight_bytes(const demo_model *m) {
  const demo_config *c = &m->cfg;
  double bytes = (1 + 2.0 * c->layers) * c->hidden * 4; /* the norms */
  int32_t n, k;
  for (int32_t l = 0; l < c->layers; l++)
    for (int w = DEMO_MAT_QKV; w <= DEMO_MAT_DOWN; w++) {
      matrix_shape(m, (demo_matrix)w, &n, &k);
      bytes += (double)demo_wfmt_row_bytes(demo_model_form(m, l, (demo_matrix)w), k) * n;
    }
  matrix_shape(m, DEMO_MAT_LM_HEAD, &n, &k);
  return bytes + (double)demo_wfmt_row_bytes(demo_model_form(m, 0, DEMO_MAT_LM_HEAD), k) * n;
}

void demo_model_weight_forms(const demo_model *m, char *buf, size_t cap) {
  int used[DEMO_W_COUNT] = {0};
  for (int32_t l = 0; l < m->cfg.layers; l++)
    for (int w = DEMO_MAT_QKV; w <= DEMO_MAT_DOWN; w++) used[m->dl[l].form[w]] = 1;
  used[m->lm_form] = 1;
  size_t n = (size_t)snprintf(buf, cap, "%s", clpa_dtype_name(m->wdtype));
  if (m->tiled && n < cap) n += (size_t)snprintf(buf + n, cap - n, "_tiled");
  const char *sep = ", blocks ";
  for (int w = DEMO_W_Q8_0; w < DEMO_W_COUNT && n < cap; w++)
    if (used[w]) {
      n += (size_t)snprintf(buf + n, cap - n, "%s%s", sep, demo_wfmt_name((demo_wfmt)w));
      sep = " ";
    }
}

clpa_status demo_model_finish(demo_model *m, demo_model **out) {
  const demo_config *c = &m->cfg;
  const size_t H = (size_t)c->hidden, qd = (size_t)c->heads * c->head_size, F = (size_t)c->ffn;
  /* the host keeps what the device computes with: block matrices as decoded */
  round_to(m->h_embed, (size_t)c->vocab * H, m->wdtype);
  if (m->h_lm_head != m->h_embed && !m->lm_form) round_to(m->h_lm_head, (size_t)c->vocab * H, m->wdtype);
  for (int32_t l = 0; l < c->layers; l++) {
    host_layer *h = &m->hl[l];
    const demo_wfmt *f = m->dl[l].form;
    if (!f[DEMO_MAT_QKV]) round_to(h->wqkv, (size_t)m->qkv_dim * H, m->wdtype);
    if (!f[DEMO_MAT_O]) round_to(h->wo, H * qd, m->wdtype);
    if (!f[DEMO_MAT_GU]) round_to(h->wgu, 2 * F * H, m->wdtype);
    if (!f[DEMO_MAT_DOWN]) round_to(h->wdown, H * F, m->wdtype);
  }
  clpa_status st = upload_all(m);
  if (st != CLPA_OK) {
    demo_model_destroy(m);
    return st;
  }
  *out = m;
  return CLPA_OK;
}

clpa_status demo_model_cache_create(demo_model *m, int32_t num_blocks, int32_t block_size,
                                    clpa_dtype kv_dtype, clpa_cache **out) {
  if (!m || !out)
    return demo_fail(CLPA_ERR_INVALID_ARG, "demo_model_cache_create: NULL argument");
  clpa_cache_config cc;
  clpa_cache_config_init(&cc);
  cc.num_layers = m->cfg.layers;
  cc.num_kv_heads = m->cfg.kv_heads;
  cc.head_size = m->cfg.head_size;
  cc.block_size = block_size;
  cc.dtype = kv_dtype;
  cc.num_blocks = num_blocks;
  return demo_clpa_check(clpa_cache_create(m->ctx, &cc, out), "clpa_cache_create", -1);
}
