/*
 * sampler.h — clpa-demo's seeded sampling on the host: the next token
 * drawn from a sequence's logits, in vLLM's order (and llama.cpp's, but
 * for where the temperature goes; see below):
 *
 *   1. top-k        keep the k largest logits (k = 0: all of them)
 *   2. temperature  p = softmax(logits / T) over what is kept
 *   3. top-p        keep the most probable tokens, most probable first,
 *                   up to the smallest set whose mass reaches p (p = 1:
 *                   all), ties in id order
 *   4. draw         one token from what is kept, in proportion to p
 *
 * T = 0 is greedy: the argmax (the lowest id on a tie), no draw; top-k
 * and top-p do nothing then. top-k 1 is the argmax at any temperature.
 *
 * llama.cpp's default chain applies the temperature after top-p, so its
 * nucleus is taken over softmax(logits), not softmax(logits / T); at T = 1
 * the two agree.
 *
 * The draws are counter-based: draw n of stream s under a seed is a hash
 * of (seed, s, n), not the next value of a generator shared by the batch.
 * The engine uses a request's id as its stream and the index of the token
 * it generates as n, so a request's tokens depend on the seed, its own
 * logits and nothing else: not on which requests share its steps, on
 * --max-running, the schedule, the prefix cache or a preemption.
 *
 * Host C11, libc and libm only.
 */
#ifndef CLPA_DEMO_SAMPLER_H
#define CLPA_DEMO_SAMPLER_H

#include <stdint.h>

typedef struct demo_sampler_config {
  float temperature; /* >= 0; 0 is greedy */
  int32_t top_k;     /* >= 0; 0 keeps every token */
  float top_p;       /* (0, 1]; 1 keeps every token */
  uint64_t seed;
} demo_sampler_config;

/* Greedy: temperature 0, top-k 0, top-p 1, seed 0. */
void demo_sampler_config_init(demo_sampler_config *c);

/* NULL when c is valid, else what is wrong with it ("top_p must be in
 * (0, 1]"). */
const char *demo_sampler_config_check(const demo_sampler_config *c);

typedef struct demo_sampler demo_sampler;

/* A sampler over a vocabulary of vocab tokens, with its scratch space
 * (O(vocab)); one thread at a time. Returns NULL when c is not valid
 * (demo_sampler_config_check), vocab < 1, or out of memory. */
demo_sampler *demo_sampler_create(const demo_sampler_config *c, int32_t vocab);
/* Accepts NULL. */
void demo_sampler_destroy(demo_sampler *s);

/* Draw n of stream `stream`: returns the token picked from logits[vocab]
 * (steps 1-4 above), in [0, vocab). Logits that are NaN count as -inf;
 * where some are +inf, those share all the probability evenly. */
int32_t demo_sampler_sample(demo_sampler *s, const float *logits, uint64_t stream, uint64_t n);

/* What steps 1-3 keep, for tests and for reading: writes the kept tokens,
 * most probable first, into ids and their probabilities (renormalized to
 * sum to 1) into probs (room for vocab each). Returns how many were kept
 * (>= 1). At T = 0, the argmax with probability 1. */
int32_t demo_sampler_probs(demo_sampler *s, const float *logits, int32_t *ids, double *probs);

/* The uniform number in [0, 1) (53 bits) behind draw n of stream under
 * seed. */
double demo_sampler_uniform(uint64_t seed, uint64_t stream, uint64_t n);

#endif
