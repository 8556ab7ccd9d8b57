/*
 * model_build.h — inside tools/demo only: how a weight source (random,
 * host floats, GGUF) fills a model. demo_model_begin allocates the
 * model's host arrays and hands out where each tensor goes; the source
 * writes floats there (row-major [out][in], as demo_host_weights); then
 * demo_model_finish rounds them to the weight dtype (so the host copy is
 * exactly what the device stores) and uploads everything.
 */
#ifndef CLPA_DEMO_MODEL_BUILD_H
#define CLPA_DEMO_MODEL_BUILD_H

#include "model.h"

/* A layer's matrices, as the model fuses them, and the LM head. */
typedef enum demo_matrix { DEMO_MAT_QKV, DEMO_MAT_O, DEMO_MAT_GU, DEMO_MAT_DOWN, DEMO_MAT_LM_HEAD } demo_matrix;

typedef struct demo_layer_slots {
  float *attn_norm, *ffn_norm;   /* [hidden] */
  float *wq, *wk, *wv;           /* [heads*hd][hidden], [kv_heads*hd][hidden] x2 */
  float *wo;                     /* [hidden][heads*hd] */
  float *w_gate, *w_up;          /* [ffn][hidden] */
  float *w_down;                 /* [hidden][ffn] */
} demo_layer_slots;

typedef struct demo_weight_slots {
  float *embed, *final_norm;     /* [vocab][hidden], [hidden] */
  float *lm_head;                /* [vocab][hidden]; == embed when tied */
  float *rope_freq_factors;      /* [hd/2], or NULL unless asked for */
  demo_layer_slots *layer;       /* [layers], owned by the model */
} demo_weight_slots;

/* A model with uninitialised host weights: tied = the LM head is the
 * embedding (one array, one device buffer); rope_factors = it has RoPE
 * frequency factors. On failure nothing is left allocated. */
clpa_status demo_model_begin(clpa_context *ctx, const demo_config *cfg, clpa_dtype weight_dtype,
                             int tied, int rope_factors, demo_model **out,
                             demo_weight_slots *slots);
/* A layer's matrix (or the LM head, layer ignored) stored on the device
 * as the source's blocks of ggml's form w (rows in the order of the
 * model's fused matrix: q, k, v; gate, up), the kernels decoding them
 * (linear.h); the host floats, which the source still writes, are then
 * kept as they are (its exact decoding), not rounded to the weight dtype.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (bytes that do not make the
 * matrix in form w) or the upload's error. */
clpa_status demo_model_set_blocks(demo_model *m, int32_t layer, demo_matrix which, demo_wfmt w,
                                  const void *blocks, size_t bytes);
/* Stores every layer's matrices, and the LM head where it is not the
 * embedding, as blocks of ggml's form w (a block form), quantized from the
 * host floats by quant.c; the host floats become their decoding, which
 * the host reference computes with. Returns CLPA_OK, CLPA_ERR_INVALID_ARG
 * (w not a block form, or a matrix whose rows are not whole blocks: the
 * message names it), CLPA_ERR_OUT_OF_MEMORY or the upload's error. */
clpa_status demo_model_quantize(demo_model *m, demo_wfmt w);
/* A matrix's stored form (layer ignored for the LM head). */
demo_wfmt demo_model_form(const demo_model *m, int32_t layer, demo_matrix which);
/* Rounds and uploads; *out = m, or m is destroyed and the error returned. */
clpa_status demo_model_finish(demo_model *m, demo_model **out);

#endif
