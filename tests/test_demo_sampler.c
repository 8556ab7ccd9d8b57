/*
 * test_demo_sampler.c — clpa-demo's host sampler (tools/demo/sampler.c),
 * host suite. The reference is naive on purpose: sort every token by
 * logit, cut at k, softmax at T, walk the sorted list to the mass p.
 *
 *   - a bad config is refused, naming the field
 *   - T = 0 and top-k 1 (at any T) are the argmax, lowest id on a tie
 *   - T -> 0: the argmax's probability rises to 1 and every draw takes it
 *     (at T = 1e-4 over a logit gap of 0.01, a rival weighs below e^-100)
 *   - the kept set and its probabilities equal the reference's on random
 *     logits (ties included for top-k); the top-p set is the smallest
 *     prefix of the sorted order whose mass reaches p
 *   - the same seed draws the same tokens; another seed, or another
 *     stream, draws different ones
 *   - over 100 000 draws on a fixed 8-token vector, each token's count is
 *     within 5 standard deviations of its binomial expectation (a false
 *     failure about once in 1.7 million bins; the seed is printed), and a
 *     token the settings drop is never drawn
 *   - NaN logits count as -inf; +inf logits share all the mass evenly
 *     (regress: exp(inf - inf) made every weight NaN and the draw took
 *     token 0, or the top-k heap's first)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/demo/sampler.h"
#include "tap.h"

static demo_sampler *make(float t, int32_t k, float p, uint64_t seed, int32_t vocab) {
  demo_sampler_config c;
  demo_sampler_config_init(&c);
  c.temperature = t, c.top_k = k, c.top_p = p, c.seed = seed;
  demo_sampler *s = demo_sampler_create(&c, vocab);
  if (!s) BAIL_OUT("demo_sampler_create(T %g, k %d, p %g, vocab %d) failed", t, k, p, vocab);
  return s;
}

static int32_t argmax(const float *l, int32_t v) {
  int32_t b = 0;
  for (int32_t i = 1; i < v; i++)
    if (l[i] > l[b]) b = i;
  return b;
}

/* ---- the naive reference ------------------------------------------------ */

static const float *g_logits;
static int by_logit(const void *a, const void *b) {
  const int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
  if (g_logits[i] != g_logits[j]) return g_logits[i] > g_logits[j] ? -1 : 1;
  return i < j ? -1 : i > j;
}

/* The kept tokens, most probable first, and their renormalized
 * probabilities; returns how many. */
static int32_t ref_keep(const float *l, int32_t v, float t, int32_t k, float p, int32_t *ids,
                        double *probs) {
  if (t == 0) {
    ids[0] = argmax(l, v), probs[0] = 1;
    return 1;
  }
  for (int32_t i = 0; i < v; i++) ids[i] = i;
  g_logits = l;
  qsort(ids, (size_t)v, sizeof *ids, by_logit);
  const int32_t n = k > 0 && k < v ? k : v;
  double total = 0;
  for (int32_t i = 0; i < n; i++) {
    probs[i] = exp(((double)l[ids[i]] - l[ids[0]]) / t);
    total += probs[i];
  }
  int32_t kept = n;
  double cum = 0;
  for (int32_t i = 0; p < 1 && i < n; i++) {
    cum += probs[i];
    if (cum >= (double)p * total) {
      kept = i + 1;
      break;
    }
  }
  double sum = 0;
  for (int32_t i = 0; i < kept; i++) sum += probs[i];
  for (int32_t i = 0; i < kept; i++) probs[i] /= sum;
  return kept;
}

/* ---- the properties ----------------------------------------------------- */

static void test_config(void) {
  demo_sampler_config c;
  demo_sampler_config_init(&c);
  ok(c.temperature == 0 && c.top_k == 0 && c.top_p == 1 && !demo_sampler_config_check(&c),
     "the default config is greedy and valid");
  const struct {
    float t;
    int32_t k;
    float p;
    const char *word;
  } bad[] = {{-1, 0, 1, "temperature"}, {NAN, 0, 1, "temperature"}, {INFINITY, 0, 1, "temperature"},
             {1, -1, 1, "top_k"},        {1, 0, 0, "top_p"},          {1, 0, 1.5f, "top_p"},
             {1, 0, NAN, "top_p"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    c.temperature = bad[i].t, c.top_k = bad[i].k, c.top_p = bad[i].p;
    const char *why = demo_sampler_config_check(&c);
    ok(why && strstr(why, bad[i].word) && !demo_sampler_create(&c, 8),
       "T %g, k %d, p %g refused: %s", bad[i].t, bad[i].k, bad[i].p, why ? why : "(accepted)");
  }
}

static void test_greedy(void) {
  enum { V = 50 };
  float l[V];
  int good0 = 1, good1 = 1;
  demo_sampler *g = make(0, 0, 1, rng_next(), V);
  for (int trial = 0; trial < 200; trial++) {
    for (int32_t i = 0; i < V; i++) l[i] = (float)floor(rng_uniform(-4, 4)); /* many ties */
    const int32_t best = argmax(l, V);
    const float t = trial % 3 == 0 ? 0.3f : trial % 3 == 1 ? 1.0f : 7.0f;
    demo_sampler *k1 = make(t, 1, trial % 2 ? 1.0f : 0.5f, rng_next(), V);
    for (uint64_t n = 0; n < 20; n++) {
      const int32_t a = demo_sampler_sample(g, l, (uint64_t)trial, n);
      const int32_t b = demo_sampler_sample(k1, l, (uint64_t)trial, n);
      if (a != best && good0) diag("T 0: trial %d draw %d took %d, the argmax is %d", trial, (int)n, a, best);
      if (b != best && good1) diag("top-k 1: trial %d draw %d took %d, the argmax is %d", trial, (int)n, b, best);
      good0 = good0 && a == best, good1 = good1 && b == best;
    }
    demo_sampler_destroy(k1);
  }
  demo_sampler_destroy(g);
  ok(good0, "T 0 is the argmax (lowest id on a tie) on 200 vectors of 50 tied integer logits");
  ok(good1, "top-k 1 is the argmax at T 0.3, 1 and 7 (with and without top-p)");
}

static void test_cold_limit(void) {
  enum { V = 1000 };
  float l[V];
  int32_t ids[V];
  double probs[V];
  int rises = 1, always = 1;
  double worst = 1;
  for (int trial = 0; trial < 50; trial++) {
    for (int32_t i = 0; i < V; i++) l[i] = (float)rng_uniform(-5, 5);
    const int32_t best = argmax(l, V);
    float second = -INFINITY;
    for (int32_t i = 0; i < V; i++)
      if (i != best && l[i] > second) second = l[i];
    if (l[best] - second < 0.01f) l[best] = second + 0.01f; /* a gap of at least 0.01 */
    static const float ts[] = {4, 1, 0.3f, 0.1f, 0.03f, 0.01f, 0.001f, 0.0001f};
    double last = 0;
    for (size_t j = 0; j < sizeof ts / sizeof *ts; j++) {
      demo_sampler *s = make(ts[j], 0, 1, rng_next(), V);
      demo_sampler_probs(s, l, ids, probs);
      const double pb = ids[0] == best ? probs[0] : 0;
      if (pb < last) rises = 0, diag("trial %d: P(argmax) %.17g at T %g below %.17g", trial, pb, ts[j], last);
      last = pb;
      if (ts[j] == 0.0001f) { /* gap / T = 100: a rival's weight is below exp(-100) */
        worst = fmin(worst, pb);
        for (uint64_t n = 0; n < 100; n++) always = always && demo_sampler_sample(s, l, 7, n) == best;
      }
      demo_sampler_destroy(s);
    }
  }
  ok(rises, "T 4 -> 0.0001: the argmax's probability never falls (50 vectors of 1000 logits)");
  ok(worst > 1 - 1e-12 && always,
     "at T 0.0001 with a gap of 0.01 it is 1 (worst 1 - %.3g) and 100 draws each take the argmax",
     1 - worst);
}

/* The sampler's kept set against the reference, and the top-p set's
 * definition checked directly. */
static void test_kept_sets(void) {
  int same = 1, minimal = 1, cases = 0;
  static const int32_t vocabs[] = {1, 2, 7, 100, 5000};
  static const float ps[] = {0.01f, 0.3f, 0.9f, 0.999f, 1};
  int32_t *ids = malloc(sizeof(int32_t) * 5000), *rids = malloc(sizeof(int32_t) * 5000);
  double *probs = malloc(sizeof(double) * 5000), *rprobs = malloc(sizeof(double) * 5000);
  float *l = malloc(sizeof(float) * 5000);
  if (!ids || !rids || !probs || !rprobs || !l) BAIL_OUT("out of memory");
  for (size_t vi = 0; vi < sizeof vocabs / sizeof *vocabs; vi++) {
    const int32_t v = vocabs[vi];
    for (int trial = 0; trial < 40; trial++) {
      const int ties = trial % 2; /* quantized logits: ties at the top-k boundary */
      for (int32_t i = 0; i < v; i++) {
        const double x = rng_uniform(-6, 6);
        l[i] = (float)(ties ? floor(x * 2) / 2 : x);
      }
      const float t = (float)rng_uniform(0.05, 5);
      const int32_t ks[] = {0, 1, 3, v, v + 5};
      const int32_t k = ks[rng_below(5)];
      const float p = ties ? 1 : ps[rng_below(5)]; /* top-p on continuous logits only */
      demo_sampler *s = make(t, k, p, 1, v);
      const int32_t n = demo_sampler_probs(s, l, ids, probs);
      const int32_t rn = ref_keep(l, v, t, k, p, rids, rprobs);
      demo_sampler_destroy(s);
      cases++;
      int eq = n == rn;
      for (int32_t i = 0; eq && i < n; i++) eq = ids[i] == rids[i] && fabs(probs[i] - rprobs[i]) <= 1e-12;
      for (int32_t i = 1; eq && i < n; i++) eq = probs[i] <= probs[i - 1];
      if (!eq && same)
        diag("vocab %d, T %g, k %d, p %g: kept %d (first %d, %.17g), the reference %d (first %d, %.17g)",
             v, t, k, p, n, ids[0], probs[0], rn, rids[0], rprobs[0]);
      same = same && eq;
      if (p < 1 && eq) {
        /* The mass of what is kept reaches p, without the last it does not
         * (over the top-k set's softmax, which is what the reference's
         * probabilities renormalize; recompute it here). */
        const int32_t kk = k > 0 && k < v ? k : v;
        double total = 0, kept = 0;
        int32_t *all = malloc(sizeof(int32_t) * (size_t)v);
        double *w = malloc(sizeof(double) * (size_t)v);
        if (!all || !w) BAIL_OUT("out of memory");
        ref_keep(l, v, t, k, 1, all, w); /* p = 1: the whole top-k set, its probabilities */
        for (int32_t i = 0; i < kk; i++) total += w[i];
        for (int32_t i = 0; i < n; i++) kept += w[i];
        const double without = kept - w[n - 1];
        const int m = kept >= p * total - 1e-12 && without < p * total + 1e-12;
        if (!m && minimal)
          diag("vocab %d, T %g, k %d, p %g: kept mass %.17g, without the last %.17g", v, t, k, p, kept, without);
        minimal = minimal && m;
        free(all), free(w);
      }
    }
  }
  ok(same, "%d random cases (vocab 1 to 5000, T 0.05-5, k 0/1/3/vocab/vocab+5, p 0.01-1): the kept"
     " tokens, their order and probabilities equal the reference's", cases);
  ok(minimal, "the top-p set is the smallest prefix of the sorted order whose mass reaches p");
  free(ids), free(rids), free(probs), free(rprobs), free(l);
}

static void test_seeds(uint64_t seed) {
  enum { V = 8, N = 2000 };
  const float l[V] = {0, 0, 0, 0, 0, 0, 0, 0}; /* every draw uniform over 8 */
  demo_sampler *a = make(1, 0, 1, seed, V), *b = make(1, 0, 1, seed, V), *c = make(1, 0, 1, seed + 1, V);
  int same = 1, other_seed = 0, other_stream = 0;
  for (uint64_t i = 0; i < N; i++) {
    const int32_t x = demo_sampler_sample(a, l, i % 16, i / 16);
    same = same && x == demo_sampler_sample(b, l, i % 16, i / 16);
    other_seed += x != demo_sampler_sample(c, l, i % 16, i / 16);
    other_stream += x != demo_sampler_sample(a, l, i % 16 + 16, i / 16);
  }
  ok(same, "two samplers of one seed draw the same %d tokens", N);
  /* Independent uniform draws over 8 differ 7/8 of the time: 1750 of 2000,
   * standard deviation 15; 1600 is 10 deviations below. */
  ok(other_seed > 1600, "seed + 1 draws another token %d times of %d (independent: ~1750)", other_seed, N);
  ok(other_stream > 1600, "another stream, the same seed: %d of %d differ (~1750)", other_stream, N);
  demo_sampler_destroy(a), demo_sampler_destroy(b), demo_sampler_destroy(c);

  double sum = 0, lo = 1, hi = 0;
  const int un = 100000;
  for (int i = 0; i < un; i++) {
    const double u = demo_sampler_uniform(seed, (uint64_t)i & 7, (uint64_t)i >> 3);
    sum += u, lo = fmin(lo, u), hi = fmax(hi, u);
  }
  const double mean = sum / un, sd = sqrt(1.0 / 12 / un);
  ok(lo >= 0 && hi < 1 && fabs(mean - 0.5) < 5 * sd,
     "demo_sampler_uniform: %d values in [%.3g, %.6f], mean %.5f (0.5 +- %.5f)", un, lo, hi, mean, 5 * sd);
}

static void test_distribution(uint64_t seed) {
  enum { V = 8, N = 100000 };
  const float l[V] = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f};
  static const struct {
    float t;
    int32_t k;
    float p;
  } cfg[] = {{1, 0, 1}, {0.7f, 5, 1}, {1.3f, 0, 0.8f}, {1, 4, 0.9f}, {2.5f, 0, 1}};
  for (size_t c = 0; c < sizeof cfg / sizeof *cfg; c++) {
    int32_t rids[V];
    double rprobs[V], expect[V] = {0};
    const int32_t rn = ref_keep(l, V, cfg[c].t, cfg[c].k, cfg[c].p, rids, rprobs);
    for (int32_t i = 0; i < rn; i++) expect[rids[i]] = rprobs[i];
    demo_sampler *s = make(cfg[c].t, cfg[c].k, cfg[c].p, seed, V);
    long count[V] = {0};
    for (uint64_t i = 0; i < N; i++) count[demo_sampler_sample(s, l, i % 64, i / 64)]++;
    demo_sampler_destroy(s);
    int good = 1;
    double worst = 0; /* in standard deviations */
    char line[512];
    int at = 0;
    for (int32_t v = 0; v < V; v++) {
      const double mu = N * expect[v], sd = sqrt(N * expect[v] * (1 - expect[v]));
      const double z = sd > 0 ? fabs((double)count[v] - mu) / sd : (count[v] ? INFINITY : 0);
      worst = fmax(worst, z);
      good = good && (expect[v] > 0 ? z <= 5 : count[v] == 0);
      at += snprintf(line + at, sizeof line - (size_t)at, " %ld/%.0f", count[v], mu);
    }
    if (!good) diag("counts/expected:%s", line);
    ok(good, "T %g, top-k %d, top-p %g: %d draws over %d kept tokens within 5 sd of the expected"
       " counts (worst %.2f sd), the %d dropped never drawn",
       cfg[c].t, cfg[c].k, cfg[c].p, N, rn, worst, V - rn);
  }
}

static void test_nan(void) {
  enum { V = 6 };
  const float l[V] = {NAN, 1, 3, NAN, 2, -1};
  demo_sampler *g = make(0, 0, 1, 1, V), *s = make(1, 0, 1, 1, V);
  int never = 1;
  for (uint64_t n = 0; n < 1000; n++) {
    const int32_t t = demo_sampler_sample(s, l, 0, n);
    never = never && t != 0 && t != 3;
  }
  ok(demo_sampler_sample(g, l, 0, 0) == 2 && never, "NaN logits count as -inf: never drawn, not the argmax");
  demo_sampler_destroy(g), demo_sampler_destroy(s);
}

/* The probabilities and 1000 draws at T, k, p: the +inf tokens 1 and 3
 * (the first `kept` of them) at 1 / kept each, every other token at 0;
 * drawn 500 +- 100 times each where both are kept (binomial sd 16). */
static int inf_case(const float *l, int32_t v, float t, int32_t k, float p, int32_t kept) {
  demo_sampler *s = make(t, k, p, 9, v);
  int32_t ids[8];
  double probs[8], by_id[8] = {0};
  const int32_t n = demo_sampler_probs(s, l, ids, probs);
  for (int32_t i = 0; i < n; i++) by_id[ids[i]] = probs[i];
  int good = ids[0] == 1;
  for (int32_t i = 0; i < v; i++)
    good = good && by_id[i] == (i == 1 || (i == 3 && kept == 2) ? 1.0 / kept : 0);
  long count[8] = {0};
  for (uint64_t d = 0; d < 1000; d++) count[demo_sampler_sample(s, l, 2, d)]++;
  demo_sampler_destroy(s);
  const long want3 = kept == 2 ? 500 : 0;
  good = good && count[1] + count[3] == 1000 && labs(count[3] - want3) <= (kept == 2 ? 100 : 0);
  if (!good)
    diag("T %g, k %d, p %g: kept %d (first %d, %.17g), drew 1 %ld times and 3 %ld times", t, k, p,
         n, ids[0], probs[0], count[1], count[3]);
  return good;
}

static void test_inf(void) {
  enum { V = 6 };
  const float l[V] = {1, INFINITY, 3, INFINITY, 2, NAN};
  demo_sampler *g = make(0, 0, 1, 1, V);
  ok(demo_sampler_sample(g, l, 0, 0) == 1, "T 0: the first +inf logit is the argmax");
  demo_sampler_destroy(g);
  ok(inf_case(l, V, 1, 0, 1, 2), "T 1: the two +inf logits kept at 1/2 each, and only they drawn");
  ok(inf_case(l, V, 0.3f, 3, 1, 2), "T 0.3, top-k 3: the same (the finite 3 kept, at weight 0)");
  ok(inf_case(l, V, 2, 0, 0.5f, 1), "T 2, top-p 0.5: the first +inf alone reaches the mass");
  const float one[V] = {1, INFINITY, 3, -INFINITY, 2, 0};
  demo_sampler *s = make(1.5f, 4, 0.9f, 3, V);
  int always = 1;
  for (uint64_t d = 0; d < 200; d++) always = always && demo_sampler_sample(s, one, 0, d) == 1;
  demo_sampler_destroy(s);
  ok(always, "one +inf logit (T 1.5, top-k 4, top-p 0.9): 200 draws take it");
}

int main(void) {
  const uint64_t seed = rng_seed_from_env();
  test_config();
  test_greedy();
  test_cold_limit();
  test_kept_sets();
  test_seeds(seed);
  test_distribution(seed);
  test_nan();
  test_inf();
  return done_testing();
}
