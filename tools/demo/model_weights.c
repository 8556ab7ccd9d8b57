/*
 * model_weights.c — the model's weight sources that need no file: seeded
 * random weights and host floats (model_build.h says how a source fills
 * a model; model_gguf.c is the GGUF one).
 */
#include <math.h>
#include <string.h>

#include "model_build.h"
#include "parallel.h"

/* splitmix64, and a bit-reproducible near-normal: the sum of 4 uniforms
 * (Irwin-Hall) scaled to unit variance; no libm, so the same seed gives
 * the same weights everywhere. The state advances by GOLDEN a draw, so
 * the stream can start anywhere: fill's parts draw what one loop would. */
#define GOLDEN 0x9e3779b97f4a7c15ULL
static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += GOLDEN);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static double rng_normal(uint64_t *s) {
  double u = 0;
  for (int i = 0; i < 4; i++) u += (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
  return (u - 2.0) * 1.7320508075688772; /* the sum's variance is 4/12 */
}
typedef struct fill_job {
  uint64_t s; /* the state before p[0]'s draws */
  float *p;
  double mean, std;
} fill_job;

static void fill_part(void *arg, int part, size_t lo, size_t hi) {
  (void)part;
  const fill_job *j = arg;
  uint64_t s = j->s + 4 * (uint64_t)lo * GOLDEN; /* 4 draws an element */
  for (size_t i = lo; i < hi; i++) j->p[i] = (float)(j->mean + j->std * rng_normal(&s));
}

/* p[0 .. n) from the stream at *s, which moves past them. */
static void fill(uint64_t *s, float *p, size_t n, double mean, double std) {
  fill_job j = {*s, p, mean, std};
  demo_parallel_for(n, 1 << 20, fill_part, &j);
  *s += 4 * (uint64_t)n * GOLDEN;
}

clpa_status demo_model_create_random(clpa_context *ctx, const demo_config *cfg, uint64_t seed,
                                     clpa_dtype weight_dtype, demo_model **out) {
  return demo_model_create_random_quant(ctx, cfg, seed, weight_dtype, DEMO_W_COUNT, out);
}

clpa_status demo_model_create_random_quant(clpa_context *ctx, const demo_config *cfg, uint64_t seed,
                                           clpa_dtype weight_dtype, demo_wfmt quant,
                                           demo_model **out) {
  if (!out || !cfg) return demo_fail(CLPA_ERR_INVALID_ARG, "demo_model_create_random: NULL");
  demo_model *m;
  demo_weight_slots w;
  clpa_status st = demo_model_begin(ctx, cfg, weight_dtype, 0, 0, &m, &w);
  if (st != CLPA_OK) return st;
  const size_t H = (size_t)cfg->hidden, qd = (size_t)cfg->heads * cfg->head_size;
  const size_t kd = (size_t)cfg->kv_heads * cfg->head_size, F = (size_t)cfg->ffn;
  uint64_t s = seed;
  /* Scales: embeddings N(0, 1); projections N(0, 1/in), so each output is
   * O(1) like its normalised input and the residual stream stays O(1);
   * norm weights around 1; the LM head gives logits of standard deviation
   * ~3 (a clear argmax). */
  fill(&s, w.embed, (size_t)cfg->vocab * H, 0, 1);
  fill(&s, w.final_norm, H, 1, 0.1);
  fill(&s, w.lm_head, (size_t)cfg->vocab * H, 0, 3 / sqrt((double)H));
  for (int32_t l = 0; l < cfg->layers; l++) {
    demo_layer_slots *d = &w.layer[l];
    fill(&s, d->attn_norm, H, 1, 0.1);
    fill(&s, d->ffn_norm, H, 1, 0.1);
    fill(&s, d->wq, qd * H, 0, 1 / sqrt((double)H));
    fill(&s, d->wk, kd * H, 0, 1 / sqrt((double)H));
    fill(&s, d->wv, kd * H, 0, 1 / sqrt((double)H));
    fill(&s, d->wo, H * qd, 0, 1 / sqrt((double)qd));
    fill(&s, d->w_gate, F * H, 0, 1 / sqrt((double)H));
    fill(&s, d->w_up, F * H, 0, 1 / sqrt((double)H));
    fill(&s, d->w_down, H * F, 0, 1 / sqrt((double)F));
  }
  if (quant != DEMO_W_COUNT && (st = demo_model_quantize(m, quant)) != CLPA_OK) {
    demo_model_destroy(m);
    return st;
  }
  return demo_model_finish(m, out);
}

clpa_status demo_model_create_host(clpa_context *ctx, const demo_config *cfg,
                                   const demo_host_weights *src, clpa_dtype weight_dtype,
                                   demo_model **out) {
  if (!out || !cfg || !src || !src->layer)
    return demo_fail(CLPA_ERR_INVALID_ARG, "demo_model_create_host: NULL argument");
  demo_model *m;
  demo_weight_slots w;
  const int tied = src->lm_head == src->embed;
  clpa_status st =
      demo_model_begin(ctx, cfg, weight_dtype, tied, src->rope_freq_factors != NULL, &m, &w);
  if (st != CLPA_OK) return st;
  const size_t H = (size_t)cfg->hidden, qd = (size_t)cfg->heads * cfg->head_size;
  const size_t kd = (size_t)cfg->kv_heads * cfg->head_size, F = (size_t)cfg->ffn, f = sizeof(float);
  memcpy(w.embed, src->embed, (size_t)cfg->vocab * H * f);
  memcpy(w.final_norm, src->final_norm, H * f);
  if (!tied) memcpy(w.lm_head, src->lm_head, (size_t)cfg->vocab * H * f);
  if (src->rope_freq_factors)
    memcpy(w.rope_freq_factors, src->rope_freq_factors, (size_t)cfg->head_size / 2 * f);
  for (int32_t l = 0; l < cfg->layers; l++) {
    demo_layer_slots *d = &w.layer[l];
    memcpy(d->attn_norm, src->layer[l].attn_norm, H * f);
    memcpy(d->ffn_norm, src->layer[l].ffn_norm, H * f);
    memcpy(d->wq, src->layer[l].wq, qd * H * f);
    memcpy(d->wk, src->layer[l].wk, kd * H * f);
    memcpy(d->wv, src->layer[l].wv, kd * H * f);
    memcpy(d->wo, src->layer[l].wo, H * qd * f);
    memcpy(d->w_gate, src->layer[l].w_gate, F * H * f);
    memcpy(d->w_up, src->layer[l].w_up, F * H * f);
    memcpy(d->w_down, src->layer[l].w_down, H * F * f);
  }
  return demo_model_finish(m, out);
}
