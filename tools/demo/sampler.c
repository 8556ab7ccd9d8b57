/*
 * sampler.c — see sampler.h. Every step works on one array of candidates
 * (id, weight): the weight is first the logit, then exp((logit - max) / T),
 * an unnormalized probability in (0, 1] (the largest is 1), in double.
 * Nothing sorts the whole vocabulary unless it has to: top-k keeps a heap
 * of k, and top-p first drops the tokens below a weight threshold when
 * those above it already hold mass p (they are then a prefix of the
 * sorted order, so the nucleus lies among them), and sorts the rest.
 */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cand {
  double w;
  int32_t id;
} cand;

struct demo_sampler {
  demo_sampler_config cfg;
  int32_t vocab;
  cand *c; /* [vocab] */
};

void demo_sampler_config_init(demo_sampler_config *c) {
  memset(c, 0, sizeof *c);
  c->temperature = 0.0f, c->top_k = 0, c->top_p = 1.0f, c->seed = 0;
}

const char *demo_sampler_config_check(const demo_sampler_config *c) {
  if (!(c->temperature >= 0.0f) || !isfinite(c->temperature)) return "temperature must be >= 0";
  if (c->top_k < 0) return "top_k must be >= 0";
  if (!(c->top_p > 0.0f && c->top_p <= 1.0f)) return "top_p must be in (0, 1]";
  return NULL;
}

demo_sampler *demo_sampler_create(const demo_sampler_config *c, int32_t vocab) {
  if (demo_sampler_config_check(c) || vocab < 1) return NULL;
  demo_sampler *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->cfg = *c, s->vocab = vocab;
  if (!(s->c = malloc(sizeof *s->c * (size_t)vocab))) {
    free(s);
    return NULL;
  }
  return s;
}

void demo_sampler_destroy(demo_sampler *s) {
  if (!s) return;
  free(s->c);
  free(s);
}

/* splitmix64's finalizer: a bijection that mixes every bit into every bit
 * (mix(0) = 0, hence the odd constants added before each call). */
static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double demo_sampler_uniform(uint64_t seed, uint64_t stream, uint64_t n) {
  uint64_t h = mix(seed ^ 0x9e3779b97f4a7c15ULL);
  h = mix(h + 0x9e3779b97f4a7c15ULL * (stream + 1));
  h = mix(h + 0xd1b54a32d192ed03ULL * (n + 1));
  return (double)(h >> 11) * 0x1.0p-53;
}

/* a ranks below b: a smaller weight, or the same and a larger id. */
static int below(const cand *a, const cand *b) { return a->w < b->w || (a->w == b->w && a->id > b->id); }

static int by_rank(const void *pa, const void *pb) {
  const cand *a = pa, *b = pb;
  return below(a, b) ? 1 : below(b, a) ? -1 : 0;
}

/* Restores the min-heap (root: the lowest ranked) under node i. */
static void sift_down(cand *h, int32_t n, int32_t i) {
  for (;;) {
    int32_t low = i;
    const int32_t l = 2 * i + 1, r = l + 1;
    if (l < n && below(&h[l], &h[low])) low = l;
    if (r < n && below(&h[r], &h[low])) low = r;
    if (low == i) return;
    const cand t = h[i];
    h[i] = h[low], h[low] = t;
    i = low;
  }
}

static double logit_at(const float *logits, int32_t i) {
  return isnan(logits[i]) ? -INFINITY : (double)logits[i];
}

/* Step 1: the candidates with their logits as weights; returns how many. */
static int32_t top_k(demo_sampler *s, const float *logits) {
  cand *c = s->c;
  const int32_t v = s->vocab, k = s->cfg.top_k > 0 && s->cfg.top_k < v ? s->cfg.top_k : v;
  for (int32_t i = 0; i < k; i++) c[i] = (cand){logit_at(logits, i), i};
  if (k == v) return v;
  for (int32_t i = k / 2 - 1; i >= 0; i--) sift_down(c, k, i);
  for (int32_t i = k; i < v; i++) {
    const cand x = {logit_at(logits, i), i};
    if (below(&c[0], &x)) c[0] = x, sift_down(c, k, 0);
  }
  return k;
}

/* Step 3 on n candidates of total weight `mass`: moves the nucleus to the
 * front, most probable first; returns its size and sets *mass to its
 * weight. */
static int32_t top_p(demo_sampler *s, int32_t n, double *mass) {
  cand *c = s->c;
  const double target = (double)s->cfg.top_p * *mass;
  /* Those of weight >= t are a prefix of the sorted order: if they hold
   * the target mass, the nucleus is among them. t = 0 keeps everything. */
  static const double thresholds[] = {1e-2, 1e-4, 1e-6, 1e-9, 1e-12, 0};
  for (size_t j = 0; n > 64 && j < sizeof thresholds / sizeof *thresholds; j++) {
    double above = 0;
    for (int32_t i = 0; i < n; i++)
      if (c[i].w >= thresholds[j]) above += c[i].w;
    if (above < target) continue;
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
      if (c[i].w >= thresholds[j]) c[m++] = c[i];
    n = m;
    break;
  }
  qsort(c, (size_t)n, sizeof *c, by_rank);
  double cum = 0;
  for (int32_t i = 0; i < n; i++) {
    cum += c[i].w;
    if (cum >= target) {
      n = i + 1;
      break;
    }
  }
  *mass = cum;
  return n;
}

/* Steps 1-3: the kept candidates in s->c[0..n), their weight sum in *mass;
 * in rank order when `sorted` (else the draw needs no order). */
static int32_t keep(demo_sampler *s, const float *logits, int sorted, double *mass) {
  cand *c = s->c;
  if (s->cfg.temperature == 0.0f) { /* greedy */
    int32_t best = 0;
    for (int32_t i = 1; i < s->vocab; i++)
      if (logit_at(logits, i) > logit_at(logits, best)) best = i;
    c[0] = (cand){1.0, best};
    *mass = 1.0;
    return 1;
  }
  int32_t n = top_k(s, logits);
  double max = -INFINITY;
  for (int32_t i = 0; i < n; i++) max = c[i].w > max ? c[i].w : max;
  if (max == -INFINITY) { /* nothing is possible: take the lowest id kept */
    int32_t low = 0;
    for (int32_t i = 1; i < n; i++) low = c[i].id < c[low].id ? i : low;
    c[0] = (cand){1.0, c[low].id};
    *mass = 1.0;
    return 1;
  }
  /* +inf logits take all the mass, shared evenly (softmax's limit as they
   * grow together): exp(inf - inf) would be NaN. */
  const double t = (double)s->cfg.temperature;
  double sum = 0;
  for (int32_t i = 0; i < n; i++) {
    c[i].w = max == INFINITY ? (c[i].w == INFINITY ? 1.0 : 0.0) : exp((c[i].w - max) / t);
    sum += c[i].w;
  }
  *mass = sum;
  if (s->cfg.top_p < 1.0f && n > 1) return top_p(s, n, mass);
  if (sorted) qsort(c, (size_t)n, sizeof *c, by_rank);
  return n;
}

int32_t demo_sampler_sample(demo_sampler *s, const float *logits, uint64_t stream, uint64_t n) {
  double mass;
  const int32_t k = keep(s, logits, 0, &mass);
  if (k == 1) return s->c[0].id;
  const double u = demo_sampler_uniform(s->cfg.seed, stream, n) * mass;
  double cum = 0;
  for (int32_t i = 0; i < k; i++) {
    cum += s->c[i].w;
    if (u < cum) return s->c[i].id;
  }
  /* u fell past the sum's rounding: the last token of nonzero weight. */
  for (int32_t i = k - 1; i > 0; i--)
    if (s->c[i].w > 0) return s->c[i].id;
  return s->c[0].id;
}

int32_t demo_sampler_probs(demo_sampler *s, const float *logits, int32_t *ids, double *probs) {
  double mass;
  const int32_t k = keep(s, logits, 1, &mass);
  for (int32_t i = 0; i < k; i++) ids[i] = s->c[i].id, probs[i] = s->c[i].w / mass;
  return k;
}
