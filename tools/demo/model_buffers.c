/*
 * model_buffers.c — the per-step device buffers and host staging of the
 * model (model.c's header draws them), grown on demand by model_step.c
 * and released with the model by model.c.
 */
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

static clpa_status new_buffer(demo_model *m, size_t bytes, cl_mem *out, const char *what) {
  cl_int e;
  demo_release_mem(out);
  *out = clCreateBuffer(m->clctx, CL_MEM_READ_WRITE, bytes ? bytes : 4, NULL, &e);
  if (e != CL_SUCCESS)
    return demo_fail(demo_cl_status(e), "clCreateBuffer(%s, %zu bytes): OpenCL error %d",
                     what, bytes, (int)e);
  return CLPA_OK;
}

clpa_status demo_model_reserve(demo_model *m, int32_t T, int32_t S) {
  const demo_config *c = &m->cfg;
  const size_t f = sizeof(float), H = (size_t)c->hidden;
  clpa_status st = CLPA_OK;
  if (T > m->cap_t) {
    int32_t n = T > 2 * m->cap_t ? T : 2 * m->cap_t;
    m->cap_t = 0;
    TRY(new_buffer(m, n * H * f, &m->x, "x"));
    TRY(new_buffer(m, n * H * f, &m->xn, "xn"));
    TRY(new_buffer(m, (size_t)n * m->qkv_dim * f, &m->qkv, "qkv"));
    TRY(new_buffer(m, (size_t)n * c->heads * c->head_size * f, &m->attn, "attn"));
    TRY(new_buffer(m, (size_t)n * 2 * c->ffn * f, &m->gu, "gu"));
    TRY(new_buffer(m, (size_t)n * c->ffn * f, &m->act, "act"));
    TRY(new_buffer(m, n * H * 2, &m->xh, "xh"));
    TRY(new_buffer(m, (size_t)n * c->ffn * 2, &m->acth, "acth"));
    m->cap_t = n;
  }
  if (S > m->cap_s) {
    int32_t n = S > 2 * m->cap_s ? S : 2 * m->cap_s;
    m->cap_s = 0;
    TRY(new_buffer(m, n * H * f, &m->xl, "xl"));
    TRY(new_buffer(m, (size_t)n * c->vocab * f, &m->logits, "logits"));
    TRY(new_buffer(m, (size_t)n * 4, &m->next, "next"));
    TRY(new_buffer(m, (size_t)n * demo_argmax_parts(c->vocab) * 4, &m->part_v, "argmax parts"));
    TRY(new_buffer(m, (size_t)n * demo_argmax_parts(c->vocab) * 4, &m->part_i, "argmax parts"));
    m->cap_s = n;
  }
out:
  return st;
}

cl_mem *demo_model_input(demo_model *m, int i) {
  cl_mem *r[] = {&m->last_rows, &m->ctx_lens, &m->tokens, &m->positions,
                 &m->slots,     &m->bt_dec,   &m->bt_pre};
  return r[i];
}
static const char *const input_names[IN_COUNT] = {
    "last_rows", "context_lens", "tokens", "positions", "slots", "block_tables (decode)",
    "block_tables (prefill)"};

static void release_inputs(demo_model *m) {
  for (int i = 0; i < IN_COUNT; i++) demo_release_mem(demo_model_input(m, i));
  memset(m->in_len, 0, sizeof m->in_len);
}

clpa_status demo_model_inputs(demo_model *m, int32_t T, int32_t S, int32_t nd, int32_t mb) {
  if (!m->in_align) {
    cl_uint bits = 0;
    cl_int e = clGetDeviceInfo(m->dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL);
    if (e != CL_SUCCESS)
      return demo_fail(demo_cl_status(e), "clGetDeviceInfo(CL_DEVICE_MEM_BASE_ADDR_ALIGN): OpenCL"
                       " error %d", (int)e);
    m->in_align = bits / 8 > 16 ? bits / 8 : 16;
  }
  /* bytes of each region (at least 4: a sub-buffer is never empty) */
  size_t *want = m->in_want;
  const size_t need[IN_COUNT] = {(size_t)S * 4, (size_t)nd * 4, (size_t)T * 4, (size_t)T * 4,
                                (size_t)T * 8, (size_t)nd * mb * 4, (size_t)(S - nd) * mb * 4};
  size_t off[IN_COUNT], len[IN_COUNT], end = 0;
  memcpy(want, need, sizeof need);
  for (int i = 0; i < IN_COUNT; i++) {
    off[i] = (end + m->in_align - 1) / m->in_align * m->in_align;
    len[i] = want[i] ? want[i] : 4;
    end = off[i] + len[i];
    if (want[i]) m->in_used = off[i] + want[i];
  }
  if (end > m->in_cap) {
    const size_t cap = end > 2 * m->in_cap ? end : 2 * m->in_cap;
    release_inputs(m);
    demo_release_mem(&m->in_buf);
    free(m->h_in);
    m->in_cap = 0;
    m->h_in = malloc(cap);
    if (!m->h_in) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "demo_model_forward: %zu bytes of staging", cap);
    clpa_status st = new_buffer(m, cap, &m->in_buf, "the step's inputs");
    if (st != CLPA_OK) return st;
    m->in_cap = cap;
  }
  if (memcmp(off, m->in_off, sizeof off) != 0 || memcmp(len, m->in_len, sizeof len) != 0) {
    release_inputs(m);
    for (int i = 0; i < IN_COUNT; i++) {
      cl_buffer_region r = {off[i], len[i]};
      cl_int e;
      *demo_model_input(m, i) =
          clCreateSubBuffer(m->in_buf, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &e);
      if (e != CL_SUCCESS) {
        *demo_model_input(m, i) = NULL;
        release_inputs(m);
        return demo_fail(demo_cl_status(e), "clCreateSubBuffer(%s, %zu bytes at %zu): OpenCL error %d",
                         input_names[i], len[i], off[i], (int)e);
      }
    }
    memcpy(m->in_off, off, sizeof off), memcpy(m->in_len, len, sizeof len);
  }
  m->h_last = (int32_t *)(m->h_in + off[IN_LAST]);
  m->h_ctx = (int32_t *)(m->h_in + off[IN_CTX]);
  m->h_pos = (int32_t *)(m->h_in + off[IN_POS]);
  return CLPA_OK;
}

void demo_model_release_buffers(demo_model *m) {
  cl_mem *bufs[] = {&m->x, &m->xn, &m->xh, &m->qkv, &m->attn, &m->gu, &m->act, &m->acth, &m->xl, &m->logits,
                    &m->next, &m->part_v, &m->part_i};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) demo_release_mem(bufs[i]);
  m->cap_t = m->cap_s = 0;
  release_inputs(m);
  demo_release_mem(&m->in_buf);
  free(m->h_in);
  m->h_in = NULL, m->in_cap = 0;
  m->h_pos = m->h_ctx = m->h_last = NULL;
}
