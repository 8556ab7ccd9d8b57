/*
 * reference.h — the demo's reference engine: the same model as model.h,
 * on the host, in double precision, dense and naive on purpose (no
 * paging, no prefix cache, no batching), so that --check and the tests
 * can hold the device engine to it.
 *
 * The formulas, once, for both engines (model_step.c's kernels compute the
 * same in f32; hd = head_size, positions from 0):
 *
 *   RMSNorm   y_i = x_i / sqrt(mean_j(x_j^2) + eps) * w_i
 *   RoPE      GGUF/llama.cpp's interleaved ("normal", LLAMA_ROPE_TYPE_NORM)
 *             convention, on every query and key head: for i < hd/2,
 *             a = pos * theta^(-2i/hd) / factor_i (factor_i = 1 unless the
 *             weights carry rope_freq_factors: Llama 3.1+ scaling),
 *               y_2i   = x_2i cos a - x_2i+1 sin a
 *               y_2i+1 = x_2i sin a + x_2i+1 cos a
 *             (HF's rotate-half pairs i with i + hd/2; convert_hf_to_gguf
 *             permutes Wq/Wk rows so GGUF files use this one)
 *   attention softmax(q.k_j / sqrt(hd)) over keys j <= pos, GQA: query
 *             head h reads KV head h / (heads / kv_heads)
 *   SwiGLU    silu(g) * u, silu(g) = g / (1 + e^-g)
 *   logits    Wlm . rms(x) of the last token; greedy = the first index of
 *             the largest logit
 *
 * Weights are the model's host copy (demo_model_host): exactly the values
 * the device computes with.
 */
#ifndef CLPA_DEMO_REFERENCE_H
#define CLPA_DEMO_REFERENCE_H

#include <stdint.h>

#include "model.h"

/* Logits of the last of tokens[0 .. n) (n >= 1), everything recomputed
 * from scratch, into logits_last [vocab]. Returns 0, or -1 (bad arguments:
 * n < 1 or > max_positions, a token outside the vocabulary; out of memory). */
int demo_ref_logits(const demo_config *cfg, const demo_host_weights *w, const int32_t *tokens,
                    int32_t n, double *logits_last);

/* An incremental reference for one request: its own dense K/V per layer
 * (double), so appending tokens costs only the new tokens. fork copies
 * one (a shared prefix computed once, like a radix-cache hit, but nothing
 * is shared between the copies). */
typedef struct demo_ref_session demo_ref_session;

/* Returns a new empty session, or NULL (out of memory). The config and
 * weights must outlive it. */
demo_ref_session *demo_ref_session_create(const demo_config *cfg, const demo_host_weights *w);
/* Returns an independent copy, or NULL. */
demo_ref_session *demo_ref_session_fork(const demo_ref_session *s);
void demo_ref_session_destroy(demo_ref_session *s);
/* Tokens so far. */
int32_t demo_ref_session_len(const demo_ref_session *s);
/* Appends tokens[0 .. n) (n >= 1) and writes the last one's logits into
 * logits_last [vocab] (may be NULL). Returns 0, or -1 (as demo_ref_logits;
 * the session is unchanged then). */
int demo_ref_session_append(demo_ref_session *s, const int32_t *tokens, int32_t n,
                            double *logits_last);

/* The first index of the largest of x [n] (NaN never wins). */
int32_t demo_ref_argmax(const double *x, int32_t n);

#endif
