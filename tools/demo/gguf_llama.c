/* gguf_llama.c — llama.cpp's Llama conventions on top of the GGUF reader
 * (gguf.c, gguf_kv.c, gguf_tensors.c): the metadata and tensor shapes
 * demo_gguf_llama_config checks, and the Q/K row unpermutation (see
 * gguf.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"


/* A required (or optional, with dflt) positive int32 key. */
static clpa_status llama_int(const demo_gguf *g, const char *key, bool required, int32_t dflt,
                             int32_t *out) {
  uint32_t v = (uint32_t)dflt;
  bool found = true;
  clpa_status st = demo_gguf_get_u32(g, key, &v, required ? NULL : &found);
  if (st) return st;
  if (v == 0 || v > INT32_MAX)
    return demo_fail(CLPA_ERR_INVALID_ARG, "metadata '%s' = %" PRIu32 " is not in [1, 2^31)", key, v);
  *out = (int32_t)v;
  return CLPA_OK;
}

/* Whether name is one of the tensors demo_gguf_llama_config checks. */
static bool llama_tensor_name(const char *name, int32_t layers) {
  static const char *const top[] = {"token_embd.weight", "output_norm.weight", "output.weight",
                                    "rope_freqs.weight"};
  static const char *const per_layer[] = {"attn_norm", "attn_q",   "attn_k",
                                          "attn_v",    "attn_output", "ffn_norm",
                                          "ffn_gate",  "ffn_up",   "ffn_down"};
  for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
    if (!strcmp(name, top[i])) return true;
  if (strncmp(name, "blk.", 4)) return false;
  const char *d = name + 4, *e = d; /* "blk." l "." what ".weight", l in [0, layers) as %d */
  while (*e >= '0' && *e <= '9') e++;
  if (e == d || e - d > 9 || (*d == '0' && e - d > 1) || *e != '.' || atol(d) >= layers)
    return false;
  for (size_t i = 0; i < sizeof per_layer / sizeof per_layer[0]; i++) {
    const size_t n = strlen(per_layer[i]);
    if (!strncmp(e + 1, per_layer[i], n) && !strcmp(e + 1 + n, ".weight")) return true;
  }
  return false;
}

static clpa_status llama_tensors(const demo_gguf *g, const demo_gguf_llama *c, bool *tied) {
  const demo_gguf_tensor *t;
  clpa_status st;
  char name[64];
  int64_t hd = c->head_size;
  if ((st = demo_gguf_expect(g, "token_embd.weight", c->hidden, c->vocab, &t))) return st;
  if ((st = demo_gguf_expect(g, "output_norm.weight", c->hidden, 0, &t))) return st;
  *tied = !demo_gguf_get_tensor(g, "output.weight");
  if (!*tied && (st = demo_gguf_expect(g, "output.weight", c->hidden, c->vocab, &t))) return st;
  static const struct {
    const char *what;
    int ne0, ne1; /* 0 none, 1 hidden, 2 heads*hd, 3 kv_heads*hd, 4 ffn */
  } per_layer[] = {
      {"attn_norm", 1, 0}, {"attn_q", 1, 2},   {"attn_k", 1, 3},  {"attn_v", 1, 3},
      {"attn_output", 2, 1}, {"ffn_norm", 1, 0}, {"ffn_gate", 1, 4}, {"ffn_up", 1, 4},
      {"ffn_down", 4, 1},
  };
  int64_t dim[5] = {0, c->hidden, c->heads * hd, c->kv_heads * hd, c->ffn};
  for (int32_t l = 0; l < c->layers; l++)
    for (size_t i = 0; i < sizeof per_layer / sizeof per_layer[0]; i++) {
      snprintf(name, sizeof name, "blk.%" PRId32 ".%s.weight", l, per_layer[i].what);
      if ((st = demo_gguf_expect(g, name, dim[per_layer[i].ne0], dim[per_layer[i].ne1], &t))) return st;
    }
  if (demo_gguf_get_tensor(g, "rope_freqs.weight") &&
      (st = demo_gguf_expect(g, "rope_freqs.weight", hd / 2, 0, &t)))
    return st;
  /* llama.cpp refuses a file holding tensors its model does not create
   * (done_getting_tensors: "wrong number of tensors"), and its Llama creates
   * optional ones the demo does not run (attention and MLP biases, experts),
   * which would change the answers: none may be ignored. */
  for (uint64_t i = 0; i < demo_gguf_tensor_count(g); i++) {
    const char *name = demo_gguf_tensor_at(g, i)->name;
    if (!llama_tensor_name(name, c->layers))
      return demo_fail(CLPA_ERR_UNSUPPORTED,
                       "tensor '%.100s' is not one of the Llama tensors the demo runs (a bias,"
                       " an expert, another architecture's): not supported", name);
  }
  return CLPA_OK;
}

/* llama.cpp's RoPE scaling (llama-model.cpp's load_hparams and
 * llama-context.cpp): rope.scaling.type defaults to "linear"; the factor is
 * rope.scaling.factor, else the older rope.scale_linear, 0 or absent
 * meaning 1; "none" never scales. Linear scaling divides every frequency
 * by the factor (ggml_rope_ext's freq_scale = 1 / factor), so *linear is
 * the factor, 1 for none. YaRN and LongRoPE the demo does not run, nor an
 * attn_factor other than 1 (it scales cos and sin): refused, not ignored. */
static clpa_status llama_rope_scaling(const demo_gguf *g, float *linear) {
  demo_gguf_str type = {"linear", 6};
  float factor = 0.0f, attn = 1.0f;
  bool found;
  clpa_status st;
  if ((st = demo_gguf_get_str(g, "llama.rope.scaling.type", &type, &found))) return st;
  if ((st = demo_gguf_get_f32(g, "llama.rope.scaling.factor", &factor, &found))) return st;
  if (!found && (st = demo_gguf_get_f32(g, "llama.rope.scale_linear", &factor, &found))) return st;
  if ((st = demo_gguf_get_f32(g, "llama.rope.scaling.attn_factor", &attn, &found))) return st;
  if (strcmp(type.s, "linear") && strcmp(type.s, "none"))
    return demo_fail(CLPA_ERR_UNSUPPORTED, "llama.rope.scaling.type '%.40s' is not supported"
                     " (only linear and none)", type.s);
  if (!(factor >= 0.0f) || factor > 1e6f)
    return demo_fail(CLPA_ERR_INVALID_ARG, "llama.rope.scaling.factor = %g is not in [0, 1e6]",
                     (double)factor);
  if (attn != 1.0f)
    return demo_fail(CLPA_ERR_UNSUPPORTED, "llama.rope.scaling.attn_factor = %g is not supported"
                     " (only 1)", (double)attn);
  *linear = strcmp(type.s, "none") && factor != 0.0f ? factor : 1.0f;
  return CLPA_OK;
}

/* Keys with which llama.cpp runs a Llama (LLM_ARCH_LLAMA) that the demo
 * does not: experts and a non-causal mask. Refused, never ignored; keys
 * llama.cpp reads for other architectures only (sliding_window, clamp_kqv,
 * attention.scale) it ignores here, and so does the demo. */
static clpa_status llama_unsupported_keys(const demo_gguf *g) {
  uint32_t u = 0;
  bool b = true, found;
  clpa_status st;
  if ((st = demo_gguf_get_u32(g, "llama.expert_count", &u, &found))) return st;
  if (found && u > 0)
    return demo_fail(CLPA_ERR_UNSUPPORTED, "llama.expert_count = %" PRIu32 ": mixture-of-experts"
                     " models are not supported", u);
  if ((st = demo_gguf_get_bool(g, "llama.attention.causal", &b, &found))) return st;
  if (!b)
    return demo_fail(CLPA_ERR_UNSUPPORTED, "llama.attention.causal = false: non-causal attention"
                     " is not supported");
  return CLPA_OK;
}

clpa_status demo_gguf_llama_config(const demo_gguf *g, demo_gguf_llama *out) {
  if (!g || !out) return demo_fail(CLPA_ERR_INVALID_ARG, "demo_gguf_llama_config: NULL argument");
  demo_gguf_llama c;
  memset(&c, 0, sizeof c);
  demo_gguf_str arch = {"", 0};
  clpa_status st;
  if ((st = demo_gguf_get_str(g, "general.architecture", &arch, NULL))) return st;
  if (strcmp(arch.s, "llama"))
    return demo_fail(CLPA_ERR_UNSUPPORTED, "architecture '%.100s' is not supported (only 'llama')", arch.s);
  if ((st = llama_int(g, "llama.embedding_length", true, 0, &c.hidden))) return st;
  if ((st = llama_int(g, "llama.block_count", true, 0, &c.layers))) return st;
  if ((st = llama_int(g, "llama.attention.head_count", true, 0, &c.heads))) return st;
  if ((st = llama_int(g, "llama.attention.head_count_kv", false, c.heads, &c.kv_heads))) return st;
  if ((st = llama_int(g, "llama.feed_forward_length", true, 0, &c.ffn))) return st;
  if ((st = llama_int(g, "llama.context_length", true, 0, &c.max_positions))) return st;
  c.rope_theta = 10000.0f;
  bool found;
  if ((st = demo_gguf_get_f32(g, "llama.rope.freq_base", &c.rope_theta, &found))) return st;
  if ((st = demo_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &c.norm_eps, NULL)))
    return st;
  if ((st = llama_rope_scaling(g, &c.rope_linear_scale))) return st;
  if ((st = llama_unsupported_keys(g))) return st;
  if (!(c.rope_theta > 0.0f) || c.rope_theta > 1e30f)
    return demo_fail(CLPA_ERR_INVALID_ARG, "llama.rope.freq_base = %g is not a positive number", (double)c.rope_theta);
  if (!(c.norm_eps > 0.0f) || c.norm_eps > 1.0f)
    return demo_fail(CLPA_ERR_INVALID_ARG, "llama.attention.layer_norm_rms_epsilon = %g is not in (0, 1]",
                     (double)c.norm_eps);
  if (c.hidden % c.heads)
    return demo_fail(CLPA_ERR_INVALID_ARG, "llama.embedding_length %" PRId32 " is not a multiple of head_count %" PRId32,
                     c.hidden, c.heads);
  if (c.kv_heads > c.heads || c.heads % c.kv_heads)
    return demo_fail(CLPA_ERR_INVALID_ARG, "llama.attention.head_count %" PRId32 " is not a multiple of head_count_kv %" PRId32,
                     c.heads, c.kv_heads);
  c.head_size = c.hidden / c.heads;
  if (c.head_size % 2)
    return demo_fail(CLPA_ERR_UNSUPPORTED, "head size %" PRId32 " is odd: RoPE needs pairs", c.head_size);
  static const char *const hd_keys[] = {"llama.rope.dimension_count", "llama.attention.key_length",
                                        "llama.attention.value_length"};
  for (int i = 0; i < 3; i++) {
    uint32_t v;
    if ((st = demo_gguf_get_u32(g, hd_keys[i], &v, &found))) return st;
    if (found && v != (uint32_t)c.head_size)
      return demo_fail(CLPA_ERR_UNSUPPORTED, "%s = %" PRIu32 " differs from the head size %" PRId32
                  " (embedding_length / head_count): not supported", hd_keys[i], v, c.head_size);
  }
  /* vocab: token_embd's rows, which the token list must match */
  const demo_gguf_tensor *embd = demo_gguf_get_tensor(g, "token_embd.weight");
  if (!embd) return demo_fail(CLPA_ERR_INVALID_ARG, "missing tensor 'token_embd.weight'");
  if (embd->n_dims != 2 || embd->ne[1] < 1 || embd->ne[1] > INT32_MAX)
    return demo_fail(CLPA_ERR_INVALID_ARG, "tensor 'token_embd.weight' is not a [hidden, vocab] matrix");
  c.vocab = (int32_t)embd->ne[1];
  demo_gguf_arr toks;
  if ((st = demo_gguf_get_arr(g, "tokenizer.ggml.tokens", DEMO_GGUF_STRING, &toks, &found))) return st;
  if (found && toks.n != (uint64_t)c.vocab)
    return demo_fail(CLPA_ERR_INVALID_ARG, "tokenizer.ggml.tokens has %" PRIu64 " tokens but token_embd.weight has %" PRId32 " rows",
                     toks.n, c.vocab);
  uint32_t vs;
  if ((st = demo_gguf_get_u32(g, "llama.vocab_size", &vs, &found))) return st;
  if (found && vs != (uint32_t)c.vocab)
    return demo_fail(CLPA_ERR_INVALID_ARG, "llama.vocab_size %" PRIu32 " but token_embd.weight has %" PRId32 " rows",
                     vs, c.vocab);
  if ((int64_t)c.heads * c.head_size > INT32_MAX || (int64_t)c.ffn * c.hidden > INT64_MAX / 4)
    return demo_fail(CLPA_ERR_INVALID_ARG, "llama dimensions are too large");
  if ((st = llama_tensors(g, &c, &c.tied_embeddings))) return st;
  c.has_rope_freqs = demo_gguf_get_tensor(g, "rope_freqs.weight") != NULL;
  *out = c;
  return CLPA_OK;
}

clpa_status demo_gguf_unpermute_qk(float *w, int32_t n_head, int32_t hd, int64_t in) {
  if (!w || n_head < 1 || hd < 2 || hd % 2 || in < 1)
    return demo_fail(CLPA_ERR_INVALID_ARG, "demo_gguf_unpermute_qk: bad arguments (n_head %" PRId32
                     ", hd %" PRId32 ", in %" PRId64 ")", n_head, hd, in);
  size_t row = (size_t)in * sizeof(float);
  float *tmp = malloc((size_t)hd * row);
  if (!tmp) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (unpermute)");
  for (int32_t h = 0; h < n_head; h++) {
    float *head = w + (size_t)h * (size_t)hd * (size_t)in;
    memcpy(tmp, head, (size_t)hd * row);
    for (int32_t i = 0; i < hd / 2; i++)
      for (int32_t k = 0; k < 2; k++)
        memcpy(head + (size_t)(k * hd / 2 + i) * (size_t)in, tmp + (size_t)(2 * i + k) * (size_t)in, row);
  }
  free(tmp);
  return CLPA_OK;
}
