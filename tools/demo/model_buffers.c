/*
 * model_buffers.c — the per-step device buffers and host staging of the
 * model (model.c's header draws them), grown on demand by model_step.c
 * and released with the model by model.c.
 */
#include <stdlib.h>

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

clpa_status demo_model_reserve(demo_model *m, int32_t T, int32_t S, int32_t bt) {
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
    TRY(new_buffer(m, (size_t)n * 4, &m->tokens, "tokens"));
    TRY(new_buffer(m, (size_t)n * 4, &m->positions, "positions"));
    TRY(new_buffer(m, (size_t)n * 8, &m->slots, "slots"));
    int32_t *p = realloc(m->h_pos, (size_t)n * sizeof *p);
    if (!p) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "demo_model_forward: staging");
    m->h_pos = p;
    m->cap_t = n;
  }
  if (S > m->cap_s) {
    int32_t n = S > 2 * m->cap_s ? S : 2 * m->cap_s;
    m->cap_s = 0;
    TRY(new_buffer(m, n * H * f, &m->xl, "xl"));
    TRY(new_buffer(m, (size_t)n * c->vocab * f, &m->logits, "logits"));
    TRY(new_buffer(m, (size_t)n * 4, &m->next, "next"));
    TRY(new_buffer(m, (size_t)n * 4, &m->ctx_lens, "context_lens"));
    TRY(new_buffer(m, (size_t)n * 4, &m->last_rows, "last_rows"));
    int32_t *a = realloc(m->h_ctx, (size_t)n * sizeof *a);
    if (a) m->h_ctx = a;
    int32_t *b = realloc(m->h_last, (size_t)n * sizeof *b);
    if (b) m->h_last = b;
    if (!a || !b) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "demo_model_forward: staging");
    m->cap_s = n;
  }
  if (bt > m->cap_bt) {
    int32_t n = bt > 2 * m->cap_bt ? bt : 2 * m->cap_bt;
    m->cap_bt = 0;
    TRY(new_buffer(m, (size_t)n * 4, &m->bt_dec, "block_tables (decode)"));
    TRY(new_buffer(m, (size_t)n * 4, &m->bt_pre, "block_tables (prefill)"));
    m->cap_bt = n;
  }
out:
  return st;
}

void demo_model_release_buffers(demo_model *m) {
  cl_mem *bufs[] = {&m->x, &m->xn, &m->xh, &m->qkv, &m->attn, &m->gu, &m->act, &m->acth, &m->xl, &m->logits,
                    &m->next, &m->tokens, &m->positions, &m->slots, &m->ctx_lens, &m->last_rows,
                    &m->bt_dec, &m->bt_pre};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) demo_release_mem(bufs[i]);
  m->cap_t = m->cap_s = m->cap_bt = 0;
  free(m->h_pos);
  free(m->h_ctx);
  free(m->h_last);
  m->h_pos = m->h_ctx = m->h_last = NULL;
}
