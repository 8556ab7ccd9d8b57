/*
 * reference.c — the demo's host reference engine (reference.h has the
 * formulas). Token by token: each new token's K/V is appended to the
 * session's dense arrays and its query attends to everything so far,
 * which is causal attention without a mask.
 */
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct demo_ref_session {
  const demo_config *cfg;
  const demo_host_weights *w;
  int32_t len, cap;     /* tokens held, tokens allocated */
  double **k, **v;      /* [layers] -> [cap][kv_heads * head_size] */
  double *scratch;      /* x, xn, q, k, v, o, g, u, scores */
};

static size_t kv_row(const demo_config *c) { return (size_t)c->kv_heads * c->head_size; }

static size_t scratch_len(const demo_config *c) {
  size_t q = (size_t)c->heads * c->head_size;
  return 2 * (size_t)c->hidden + 2 * q + 2 * kv_row(c) + 2 * (size_t)c->ffn +
         (size_t)c->max_positions;
}

demo_ref_session *demo_ref_session_create(const demo_config *cfg, const demo_host_weights *w) {
  demo_ref_session *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->cfg = cfg;
  s->w = w;
  s->k = calloc((size_t)cfg->layers, sizeof *s->k);
  s->v = calloc((size_t)cfg->layers, sizeof *s->v);
  s->scratch = malloc(scratch_len(cfg) * sizeof(double));
  if (!s->k || !s->v || !s->scratch) {
    demo_ref_session_destroy(s);
    return NULL;
  }
  return s;
}

void demo_ref_session_destroy(demo_ref_session *s) {
  if (!s) return;
  for (int32_t l = 0; s->k && l < s->cfg->layers; l++) free(s->k[l]);
  for (int32_t l = 0; s->v && l < s->cfg->layers; l++) free(s->v[l]);
  free(s->k);
  free(s->v);
  free(s->scratch);
  free(s);
}

int32_t demo_ref_session_len(const demo_ref_session *s) { return s->len; }

/* Grows every layer's K/V to hold at least n tokens. Returns 0 or -1. */
static int reserve(demo_ref_session *s, int32_t n) {
  if (n <= s->cap) return 0;
  int32_t cap = s->cap ? s->cap : 64;
  while (cap < n) cap *= 2;
  size_t bytes = (size_t)cap * kv_row(s->cfg) * sizeof(double);
  for (int32_t l = 0; l < s->cfg->layers; l++) {
    double *k = realloc(s->k[l], bytes);
    if (!k) return -1;
    s->k[l] = k;
    double *v = realloc(s->v[l], bytes);
    if (!v) return -1;
    s->v[l] = v;
  }
  s->cap = cap;
  return 0;
}

demo_ref_session *demo_ref_session_fork(const demo_ref_session *s) {
  demo_ref_session *c = demo_ref_session_create(s->cfg, s->w);
  if (!c || reserve(c, s->len ? s->len : 1)) {
    demo_ref_session_destroy(c);
    return NULL;
  }
  size_t bytes = (size_t)s->len * kv_row(s->cfg) * sizeof(double);
  for (int32_t l = 0; l < s->cfg->layers; l++) {
    if (bytes) memcpy(c->k[l], s->k[l], bytes);
    if (bytes) memcpy(c->v[l], s->v[l], bytes);
  }
  c->len = s->len;
  return c;
}

/* y [rows] = W [rows][cols] . x [cols], accumulated in double. */
static void matvec(const float *W, const double *x, int32_t rows, int32_t cols, double *y) {
  for (int32_t r = 0; r < rows; r++) {
    const float *wr = W + (size_t)r * cols;
    double acc = 0;
    for (int32_t c = 0; c < cols; c++) acc += (double)wr[c] * x[c];
    y[r] = acc;
  }
}

static void rmsnorm(const double *x, const float *w, int32_t n, double eps, double *y) {
  double ss = 0;
  for (int32_t i = 0; i < n; i++) ss += x[i] * x[i];
  double r = 1.0 / sqrt(ss / n + eps);
  for (int32_t i = 0; i < n; i++) y[i] = x[i] * r * w[i];
}

/* Interleaved RoPE on n_heads heads of hd at x (reference.h). */
static void rope(double *x, int32_t n_heads, int32_t hd, int32_t pos, double theta,
                 const float *factors) {
  for (int32_t i = 0; i < hd / 2; i++) {
    double f = pow(theta, -2.0 * i / hd) / (factors ? factors[i] : 1.0);
    double a = pos * f, c = cos(a), sn = sin(a);
    for (int32_t h = 0; h < n_heads; h++) {
      double *p = x + (size_t)h * hd + 2 * i;
      double x0 = p[0], x1 = p[1];
      p[0] = x0 * c - x1 * sn;
      p[1] = x0 * sn + x1 * c;
    }
  }
}

/* One token at position s->len (its K/V go there), through every layer;
 * leaves the final hidden state in x. */
static void step(demo_ref_session *s, int32_t token, double *x) {
  const demo_config *c = s->cfg;
  const demo_host_weights *w = s->w;
  const int32_t H = c->hidden, hd = c->head_size, qd = c->heads * hd, kd = c->kv_heads * hd;
  const int32_t pos = s->len, group = c->heads / c->kv_heads;
  double *xn = s->scratch + H, *q = xn + H, *o = q + qd, *kk = o + qd, *vv = kk + kd;
  double *g = vv + kd, *u = g + c->ffn, *sc = u + c->ffn;
  const double scale = 1.0 / sqrt((double)hd);

  for (int32_t i = 0; i < H; i++) x[i] = w->embed[(size_t)token * H + i];
  for (int32_t l = 0; l < c->layers; l++) {
    rmsnorm(x, w->layer[l].attn_norm, H, c->norm_eps, xn);
    matvec(w->layer[l].wq, xn, qd, H, q);
    matvec(w->layer[l].wk, xn, kd, H, kk);
    matvec(w->layer[l].wv, xn, kd, H, vv);
    rope(q, c->heads, hd, pos, c->rope_theta, w->rope_freq_factors);
    rope(kk, c->kv_heads, hd, pos, c->rope_theta, w->rope_freq_factors);
    memcpy(s->k[l] + (size_t)pos * kd, kk, (size_t)kd * sizeof(double));
    memcpy(s->v[l] + (size_t)pos * kd, vv, (size_t)kd * sizeof(double));
    for (int32_t h = 0; h < c->heads; h++) {
      const double *qh = q + (size_t)h * hd;
      const int32_t kvh = h / group;
      double m = -INFINITY, sum = 0;
      for (int32_t j = 0; j <= pos; j++) {
        const double *kj = s->k[l] + (size_t)j * kd + (size_t)kvh * hd;
        double d = 0;
        for (int32_t e = 0; e < hd; e++) d += qh[e] * kj[e];
        sc[j] = d * scale;
        if (sc[j] > m) m = sc[j];
      }
      for (int32_t j = 0; j <= pos; j++) sum += (sc[j] = exp(sc[j] - m));
      double *oh = o + (size_t)h * hd;
      for (int32_t e = 0; e < hd; e++) oh[e] = 0;
      for (int32_t j = 0; j <= pos; j++) {
        const double *vj = s->v[l] + (size_t)j * kd + (size_t)kvh * hd;
        for (int32_t e = 0; e < hd; e++) oh[e] += sc[j] / sum * vj[e];
      }
    }
    matvec(w->layer[l].wo, o, H, qd, xn);
    for (int32_t i = 0; i < H; i++) x[i] += xn[i];
    rmsnorm(x, w->layer[l].ffn_norm, H, c->norm_eps, xn);
    matvec(w->layer[l].w_gate, xn, c->ffn, H, g);
    matvec(w->layer[l].w_up, xn, c->ffn, H, u);
    for (int32_t i = 0; i < c->ffn; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
    matvec(w->layer[l].w_down, g, H, c->ffn, xn);
    for (int32_t i = 0; i < H; i++) x[i] += xn[i];
  }
  s->len++;
}

int demo_ref_session_append(demo_ref_session *s, const int32_t *tokens, int32_t n,
                            double *logits_last) {
  const demo_config *c = s->cfg;
  if (n < 1 || n > c->max_positions - s->len) return -1;
  for (int32_t i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= c->vocab) return -1;
  if (reserve(s, s->len + n)) return -1;
  double *x = s->scratch;
  for (int32_t i = 0; i < n; i++) step(s, tokens[i], x);
  if (logits_last) {
    double *xn = x + c->hidden;
    rmsnorm(x, s->w->final_norm, c->hidden, c->norm_eps, xn);
    matvec(s->w->lm_head, xn, c->vocab, c->hidden, logits_last);
  }
  return 0;
}

int demo_ref_logits(const demo_config *cfg, const demo_host_weights *w, const int32_t *tokens,
                    int32_t n, double *logits_last) {
  demo_ref_session *s = demo_ref_session_create(cfg, w);
  if (!s) return -1;
  int rc = demo_ref_session_append(s, tokens, n, logits_last);
  demo_ref_session_destroy(s);
  return rc;
}

int32_t demo_ref_argmax(const double *x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (x[i] > x[best] || (isnan(x[best]) && !isnan(x[i]))) best = i;
  return best;
}
