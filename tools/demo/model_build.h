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
/* Rounds and uploads; *out = m, or m is destroyed and the error returned. */
clpa_status demo_model_finish(demo_model *m, demo_model **out);

#endif
