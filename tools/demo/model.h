/*
 * model.h — the demo's decoder-only transformer in the Llama shape, on
 * the device through clpa's public API (attention), CLBlast (GEMMs) and
 * the demo's own small kernels (embedding, RMSNorm, RoPE, SwiGLU,
 * residual adds, argmax):
 *
 *   x = embed[token]
 *   per layer:  h = x + Wo . attn(RoPE(Wq . rms(x)), RoPE(Wk . rms(x)), Wv . rms(x))
 *               x = h + Wdown . (silu(Wgate . rms(h)) * (Wup . rms(h)))
 *   logits = Wlm . rms(x)        (greedy: the argmax)
 *
 * One forward call runs one engine step: a batch whose first num_decode
 * sequences decode one token each over the paged cache and whose others
 * run a prefill chunk (new tokens over their cached prefix). The step's
 * attention is planned once (clpa_plan_decode, clpa_plan_prefill: the
 * step's shapes and host lengths) and run on every layer's cache
 * (clpa_run); the plans are released when the step ends. Every new
 * token's K/V goes into the cache first (clpa_reshape_and_cache through
 * its slot). Tools use clpa's public headers only.
 */
#ifndef CLPA_DEMO_MODEL_H
#define CLPA_DEMO_MODEL_H

#include <stdint.h>
#include <stdio.h>

#include "clpa.h"
#include "error.h"
#include "linear.h"

typedef struct demo_config {
  int32_t vocab, hidden, layers, heads, kv_heads, head_size, ffn;
  float rope_theta, norm_eps;
  int32_t max_positions; /* longest sequence (prompt + output) the model serves */
} demo_config;

/* Fills *out with a named preset: "tiny" (the default workload in well
 * under a minute on 2 CPU cores with PoCL) or "llama-1b" (Llama-3.2-1B's
 * shape: hidden 2048, 16 layers, 32/8 heads of 64, ffn 8192, vocab
 * 128256). Returns 0, or -1 for an unknown name. */
int demo_config_preset(const char *name, demo_config *out);

typedef struct demo_model demo_model;

/* Seeded random weights (scaled so activations stay O(1) through the
 * layers and the logits have a clear argmax), stored as weight_dtype (f32
 * or f16) on the device; the host keeps the same values (after rounding
 * to weight_dtype) as floats for the reference engine. */
clpa_status demo_model_create_random(clpa_context *ctx, const demo_config *cfg, uint64_t seed,
                                     clpa_dtype weight_dtype, demo_model **out);
/* The same with every layer's matrices and the LM head stored as ggml's
 * blocks of form quant (demo_model_quantize; DEMO_W_COUNT: none), the
 * embedding and the norms as above. */
clpa_status demo_model_create_random_quant(clpa_context *ctx, const demo_config *cfg, uint64_t seed,
                                           clpa_dtype weight_dtype, demo_wfmt quant,
                                           demo_model **out);
/* From a GGUF file already opened by demo_gguf_open (gguf.h); its
 * max_positions is llama.context_length, at most 2^20 (a longer context is
 * served up to that). */
struct demo_gguf;
clpa_status demo_model_create_gguf(clpa_context *ctx, const struct demo_gguf *g,
                                   clpa_dtype weight_dtype, demo_model **out);
void demo_model_destroy(demo_model *m);
const demo_config *demo_model_config(const demo_model *m);
/* The linear layers' engine: DEMO_LINEAR_AUTO (the device's table, the
 * default) or one forced for every call (linear.h). */
void demo_model_set_linear(demo_model *m, demo_linear_engine e);
/* Whether the f16 matrices the device holds row-major (every one not in ggml's blocks, and the
 * embedding) are held as linear.h's tiles instead: the device's table says when the model is
 * made. Changing it uploads them again from the host's floats, all before any is replaced.
 * CLPA_ERR_INVALID_ARG where tiles are asked of f32 weights or of a model whose hidden size,
 * heads x head_size or ffn is not a multiple of 32; CLPA_ERR_OUT_OF_MEMORY,
 * CLPA_ERR_OPENCL (the model unchanged). */
clpa_status demo_model_set_weight_layout(demo_model *m, int tiled);
int demo_model_tiled(const demo_model *m);
/* Whether steps take a profiling event an op (two enqueues: a marker and
 * the op's event), which demo_times needs, where the queue profiles: on
 * when the model is made. Off, every op goes on the queue without one. */
void demo_model_set_timing(demo_model *m, int on);
/* Writes every op of every step from now on to f, one JSON line an op
 * (model_timing.c says what each holds), after a line for the step; NULL
 * stops. The ops take profiling events, as with timing on. Returns 0 where
 * the queue does not profile (nothing is written). */
int demo_model_set_trace(demo_model *m, FILE *f);
/* Whether a step's attention is one clpa_prefill plan over all its
 * sequences, the decode rows as one-token sequences (on), or a decode
 * plan for those and a prefill plan for the chunks (off, the default). */
void demo_model_set_one_call(demo_model *m, int on);
/* Whether a step's ops are fused where they can be (on, the default:
 * RoPE with the cache write, ...) or each its own launch (off: to time the
 * fusions against, and to hold them to the same results). */
void demo_model_set_fused(demo_model *m, int on);
/* The linear layers' choice in words, in demo_linear_pick's order: "gemm
 * (where it runs) from 129 rows, else gemv (where it runs) up to 128 rows,
 * else mma (where it runs) from 2 rows, else stream up to 16 rows, then
 * clblast (table vendor:NVIDIA)", or the forced engine. */
void demo_model_linear_rule(const demo_model *m, char *buf, size_t cap);
/* The weights' stored forms in words: the weight dtype, and the block
 * forms some matrices kept ("f32, blocks q4_0 q8_0"). */
void demo_model_weight_forms(const demo_model *m, char *buf, size_t cap);
/* Bytes every step reads of the weights (in their stored forms): every
 * layer's projections, the norms and the LM head. */
double demo_model_weight_bytes(const demo_model *m);
/* The device's copy bandwidth in GB/s (bytes read + written), the best of
 * three copies of 64 MiB by clEnqueueCopyBuffer and three by clpa's copy
 * kernel (clpa-bench's two), timed by profiling events; 0 when the queue
 * does not profile or a copy fails. */
double demo_model_copy_gbps(demo_model *m);

/* The host copy of the weights (floats, row-major [out][in] like the
 * device's), for the reference engine. */
typedef struct demo_host_weights {
  const float *embed;   /* [vocab][hidden] */
  const float *final_norm; /* [hidden] */
  const float *lm_head; /* [vocab][hidden] */
  struct {
    const float *attn_norm, *ffn_norm; /* [hidden] */
    const float *wq, *wk, *wv;         /* [heads*hd][hidden], [kv_heads*hd][hidden] x2 */
    const float *wo;                   /* [hidden][heads*hd] */
    const float *w_gate, *w_up;        /* [ffn][hidden] */
    const float *w_down;               /* [hidden][ffn] */
  } *layer;                            /* [layers] */
  /* [head_size / 2] or NULL: RoPE pair i's frequency is divided by
   * factor i (Llama 3.1+ long-context scaling, GGUF's rope_freqs.weight). */
  const float *rope_freq_factors;
} demo_host_weights;
const demo_host_weights *demo_model_host(const demo_model *m);

/* A model from host floats (w as demo_model_host returns them: the GGUF
 * path, tests, or another model's weights), copied and rounded to
 * weight_dtype (f32 or f16) for the device and for the model's own host
 * copy. Returns CLPA_OK and *out, or an error (demo_last_error()). */
clpa_status demo_model_create_host(clpa_context *ctx, const demo_config *cfg,
                                   const demo_host_weights *w, clpa_dtype weight_dtype,
                                   demo_model **out);

/* A KV cache for this model: every layer, its KV heads and head size. */
clpa_status demo_model_cache_create(demo_model *m, int32_t num_blocks, int32_t block_size,
                                    clpa_dtype kv_dtype, clpa_cache **out);

typedef struct demo_batch {
  int32_t num_seqs;             /* > 0 */
  int32_t num_decode;           /* the first num_decode sequences have 1 token and cached_len > 0 */
  const int32_t *tokens;        /* [total]: the new tokens, sequence after sequence */
  const int32_t *cu_seqlens;    /* [num_seqs + 1]: 0, then token offsets */
  const int32_t *cached_lens;   /* [num_seqs]: position of each sequence's first new token */
  const int64_t *slots;         /* [total]: where each new token's K/V goes */
  const int32_t *block_tables;  /* [num_seqs][max_blocks_per_seq] */
  int32_t max_blocks_per_seq;
} demo_batch;

/* Device time of the last forward, by kind (from profiling events when
 * the context's queue has profiling on, else 0), and the ops it enqueued
 * (always): every kernel, write and read the demo puts on the queue, a
 * clpa call (reshape_and_cache, a plan's run) and a CLBlast call as one
 * each, the markers of profiling not counted. */
typedef struct demo_times {
  double attention_s, gemm_s, other_s;
  int32_t ops;       /* the whole step */
  int32_t layer_ops; /* of those, the layers' (all layers together) */
} demo_times;

/* demo_last_error() (error.h) says why a call failed, with clpa's
 * message when a clpa call failed. */

/* Runs one engine step. next_tokens[s] = the argmax of sequence s's last
 * token's logits; logits (if not NULL) gets those rows, [num_seqs][vocab].
 * Waits for the device. Returns CLPA_OK or the failing call's status
 * (demo_last_error() says why, clpa's message included). */
clpa_status demo_model_forward(demo_model *m, clpa_cache *cache, const demo_batch *b,
                               float *logits, int32_t *next_tokens, demo_times *times);

#endif
