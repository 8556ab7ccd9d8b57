/*
 * model_gguf.c — the model from a GGUF file (llama.cpp's Llama layout, as
 * gguf.h's demo_gguf_llama_config checks it). Tensors are converted to
 * floats straight into the model's host arrays (model_build.h), then
 * rounded to the weight dtype and uploaded. The Q/K rows stay in GGUF's
 * order: the demo's RoPE is GGUF's interleaved one (reference.h), so no
 * unpermuting. A file without output.weight ties the LM head to the
 * embedding; rope_freqs.weight becomes the RoPE frequency factors, times
 * the linear RoPE scaling factor where the file has one (both divide the
 * frequencies, as in ggml_rope_ext: theta = freq_scale * pos * base^(-2i/d)
 * / factor_i).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "model_build.h"

/* The longest sequence served from a file. llama.context_length sizes the
 * RoPE table (max_positions x head_size / 2 (cos, sin) pairs, computed on
 * the host and uploaded), the block tables and the reference's scratch: a
 * file's 2^31 - 1 made a 350 KB model ask for 256 GiB. A longer context is
 * served up to this many positions (8 times Llama 3.1's 128Ki). */
#define DEMO_GGUF_MAX_POSITIONS (1 << 20)

/* Tensor name into the model's slot dst; shape [ne0] (ne1 == 0) or [ne0, ne1] in GGUF order. */
static clpa_status load(const demo_gguf *g, const char *name, int64_t ne0, int64_t ne1,
                        float *dst) {
  const demo_gguf_tensor *t;
  clpa_status st = demo_gguf_expect(g, name, ne0, ne1, &t);
  if (st == CLPA_OK) st = demo_gguf_tensor_to_f32(t, dst, (uint64_t)(ne1 ? ne0 * ne1 : ne0));
  if (st != CLPA_OK)
    return demo_fail(st, "demo_model_create_gguf: %s", demo_last_error());
  return CLPA_OK;
}

/* Stores matrix `which` of layer l as the file's blocks where every tensor
 * of it (q, k, v; gate, up; or one) holds the same block form, stacked in
 * the model's order; other forms stay the host floats' path. */
static clpa_status keep_blocks(const demo_gguf *g, demo_model *m, int32_t l, demo_matrix which,
                               const char *const *what, int parts) {
  demo_gguf_raw raw[3];
  size_t total = 0;
  for (int i = 0; i < parts; i++) {
    char name[96];
    if (l >= 0)
      snprintf(name, sizeof name, "blk.%d.%s.weight", (int)l, what[i]);
    else
      snprintf(name, sizeof name, "%s", what[i]);
    const demo_gguf_tensor *t = demo_gguf_get_tensor(g, name);
    if (!t || demo_gguf_tensor_raw(t, &raw[i]) != CLPA_OK) return CLPA_OK;
    const demo_wfmt w = demo_wfmt_of_ggml(raw[i].type);
    if (!demo_wfmt_is_block(w) || raw[i].type != raw[0].type) return CLPA_OK;
    total += (size_t)raw[i].size;
  }
  unsigned char *buf = malloc(total ? total : 1);
  if (!buf) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "demo_model_create_gguf: %zu bytes", total);
  for (size_t i = 0, at = 0; i < (size_t)parts; at += (size_t)raw[i].size, i++)
    memcpy(buf + at, raw[i].data, (size_t)raw[i].size);
  const clpa_status st =
      demo_model_set_blocks(m, l < 0 ? 0 : l, which, demo_wfmt_of_ggml(raw[0].type), buf, total);
  free(buf);
  return st;
}

clpa_status demo_model_create_gguf(clpa_context *ctx, const struct demo_gguf *g,
                                   clpa_dtype weight_dtype, demo_model **out) {
  if (!g || !out) return demo_fail(CLPA_ERR_INVALID_ARG, "demo_model_create_gguf: NULL");
  *out = NULL;
  demo_gguf_llama L;
  clpa_status st = demo_gguf_llama_config(g, &L);
  if (st != CLPA_OK)
    return demo_fail(st, "demo_model_create_gguf: %s", demo_last_error());
  const int32_t positions =
      L.max_positions < DEMO_GGUF_MAX_POSITIONS ? L.max_positions : DEMO_GGUF_MAX_POSITIONS;
  demo_config c = {L.vocab, L.hidden, L.layers, L.heads, L.kv_heads, L.head_size, L.ffn,
                   L.rope_theta, L.norm_eps, positions};
  demo_model *m;
  demo_weight_slots w;
  const bool factors = L.has_rope_freqs || L.rope_linear_scale != 1.0f;
  st = demo_model_begin(ctx, &c, weight_dtype, L.tied_embeddings, factors, &m, &w);
  if (st != CLPA_OK) return st;
  const int64_t H = c.hidden, qd = (int64_t)c.heads * c.head_size;
  const int64_t kd = (int64_t)c.kv_heads * c.head_size;
  st = load(g, "token_embd.weight", H, c.vocab, w.embed);
  if (st == CLPA_OK) st = load(g, "output_norm.weight", H, 0, w.final_norm);
  if (st == CLPA_OK && !L.tied_embeddings) st = load(g, "output.weight", H, c.vocab, w.lm_head);
  if (st == CLPA_OK && L.has_rope_freqs)
    st = load(g, "rope_freqs.weight", c.head_size / 2, 0, w.rope_freq_factors);
  for (int32_t i = 0; st == CLPA_OK && factors && i < c.head_size / 2; i++)
    w.rope_freq_factors[i] = (L.has_rope_freqs ? w.rope_freq_factors[i] : 1.0f) *
                             L.rope_linear_scale;
  for (int32_t l = 0; l < c.layers && st == CLPA_OK; l++) {
    demo_layer_slots *d = &w.layer[l];
    struct {
      const char *what;
      int64_t ne0, ne1;
      float *dst;
    } t[] = {
        {"attn_norm", H, 0, d->attn_norm}, {"ffn_norm", H, 0, d->ffn_norm},
        {"attn_q", H, qd, d->wq},          {"attn_k", H, kd, d->wk},
        {"attn_v", H, kd, d->wv},          {"attn_output", qd, H, d->wo},
        {"ffn_gate", H, c.ffn, d->w_gate}, {"ffn_up", H, c.ffn, d->w_up},
        {"ffn_down", c.ffn, H, d->w_down},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0] && st == CLPA_OK; i++) {
      char name[96];
      snprintf(name, sizeof name, "blk.%d.%s.weight", (int)l, t[i].what);
      st = load(g, name, t[i].ne0, t[i].ne1, t[i].dst);
    }
  }
  /* ggml's block forms stay blocks on the device, decoded by the kernels
   * (the host floats above, their exact decoding, serve the reference) */
  static const char *const qkv[] = {"attn_q", "attn_k", "attn_v"}, *const o[] = {"attn_output"};
  static const char *const gu[] = {"ffn_gate", "ffn_up"}, *const down[] = {"ffn_down"};
  static const char *const head[] = {"output.weight"};
  for (int32_t l = 0; l < c.layers && st == CLPA_OK; l++) {
    st = keep_blocks(g, m, l, DEMO_MAT_QKV, qkv, 3);
    if (st == CLPA_OK) st = keep_blocks(g, m, l, DEMO_MAT_O, o, 1);
    if (st == CLPA_OK) st = keep_blocks(g, m, l, DEMO_MAT_GU, gu, 2);
    if (st == CLPA_OK) st = keep_blocks(g, m, l, DEMO_MAT_DOWN, down, 1);
  }
  if (st == CLPA_OK && !L.tied_embeddings) st = keep_blocks(g, m, -1, DEMO_MAT_LM_HEAD, head, 1);
  if (st != CLPA_OK) {
    demo_model_destroy(m);
    return st;
  }
  return demo_model_finish(m, out);
}
