/*
 * scheduler.h — continuous batching over clpa's KV manager, the way
 * vLLM and SGLang schedule: requests arrive; admission matches the prefix
 * cache and takes blocks (evicting cached prefixes when short); the
 * waiting queue is ordered longest-matched-prefix first (RadixAttention's
 * cache-aware order, with an age bound so nothing starves) or first come
 * first served; every step runs the running requests' decodes plus
 * prefill chunks of the admitted prompts under a token budget; finished
 * requests go into the radix tree; a request that finds no block for its
 * next token is preempted (its blocks given back, cached when the prefix
 * cache is on) and recomputed later.
 */
#ifndef CLPA_DEMO_SCHEDULER_H
#define CLPA_DEMO_SCHEDULER_H

#include <stdint.h>

#include "model.h"
#include "sampler.h"
#include "workload.h"

typedef struct demo_sched_config {
  int32_t num_blocks, block_size; /* the KV cache (per layer) */
  clpa_dtype kv_dtype;
  int32_t max_running;   /* requests decoding at once */
  int32_t token_budget;  /* tokens per step: decodes first, then prefill chunks */
  int lpm;               /* 1: longest matched prefix first; 0: first come first served */
  int32_t max_wait;      /* lpm: a request waiting this many steps goes first */
  int prefix_cache;      /* 0: never match, never cache */
  int keep_logits;       /* store each generated token's logits (for --check) */
  const int32_t *eog;    /* n_eog tokens that end a request early (GGUF: the tokenizer's */
  int32_t n_eog;         /* end-of-generation set); not owned */
  /* NULL: greedy, the device's argmax. Else every token is drawn on the
   * host from its logits (read back each step), stream = the request's
   * id, n = the token's index in its output. Not owned. */
  demo_sampler *sampler;
} demo_sched_config;

void demo_sched_config_init(demo_sched_config *c);

/* Why a request ended. */
typedef enum demo_finish {
  DEMO_FINISH_NONE = 0, /* still running (or never arrived) */
  DEMO_FINISH_LENGTH,   /* it generated max_new_tokens */
  DEMO_FINISH_STOP,     /* it generated a token of eog */
  DEMO_FINISH_CONTEXT,  /* refused: prompt + max_new_tokens is past the model's positions */
  DEMO_FINISH_CACHE,    /* refused: the KV cache cannot hold it (too few blocks in all, or
                           it could not be admitted into an empty cache) */
} demo_finish;

/* The most tokens whose K/V request r holds: its prompt and every
 * generated token but the last, which ends the request before it is fed
 * back (so its K/V is never written). Its blocks are this many tokens'
 * blocks; the model's positions count the last token too (vLLM's
 * prompt + max_tokens <= max_model_len). */
int64_t demo_request_kv_tokens(const demo_request *r);
/* The cache blocks of block_size tokens those tokens take. */
int64_t demo_request_kv_blocks(const demo_request *r, int32_t block_size);

/* What one request went through. */
typedef struct demo_result {
  const demo_request *req;
  int32_t *generated, num_generated;
  float *logits;            /* [num_generated][vocab] when keep_logits */
  int32_t cached_tokens;    /* prompt tokens found in the cache (first admission) */
  int32_t computed_tokens;  /* prompt tokens computed, recomputation included */
  int32_t preemptions;
  double arrived_s, first_token_s, done_s; /* wall clock from the run's start */
  int refused;              /* too long for the model or the cache: never run */
  demo_finish finish;
} demo_result;

typedef struct demo_run_stats {
  int32_t steps, requests, refused;
  int64_t prompt_tokens, cached_tokens, computed_tokens, generated_tokens;
  int64_t preemptions, evicted_blocks;
  int32_t peak_blocks;      /* blocks in use at the busiest step */
  /* wall clock: all, and each step's split between its prefill and decode tokens by count */
  double seconds, prefill_s, decode_s;
  int64_t prefill_tokens_in_prefill_steps;
  int64_t decode_tokens;    /* decode rows run (one token each, in any step): decode_s's tokens */
  int32_t decode_steps;     /* steps that were all decodes */
  int64_t decode_kv_tokens; /* the context tokens those steps' attention read, summed */
  double decode_step_s;     /* those steps' wall clock, summed (host work and waits included) */
  double decode_step_device_s; /* their device time, summed (0 without timing) */
  /* ops enqueued (demo_times.ops), summed: decode-only steps, and the
   * others (mixed: prefill chunks, with or without decodes) */
  int64_t decode_ops, decode_layer_ops, mixed_ops, mixed_layer_ops;
  int32_t mixed_steps;
  demo_times device;        /* summed over steps */
  double hit_rate;          /* cached / prompt tokens */
} demo_run_stats;

typedef struct demo_engine demo_engine;

/* An engine over a model and a workload (neither is owned). */
clpa_status demo_engine_create(demo_model *m, demo_workload *w, const demo_sched_config *cfg,
                               demo_engine **out);
void demo_engine_destroy(demo_engine *e);
/* Runs every request to the end. progress (may be NULL) is called after
 * each step. Returns CLPA_OK or the failing call's status (the message is
 * in demo_last_error(), error.h). */
clpa_status demo_engine_run(demo_engine *e, void (*progress)(const demo_engine *e, void *user),
                            void *user);
/* The results (one per request, in request id order) and the totals. */
const demo_result *demo_engine_results(const demo_engine *e, int32_t *count);
const demo_run_stats *demo_engine_stats(const demo_engine *e);
/* Live figures for the progress line. */
void demo_engine_live(const demo_engine *e, int32_t *done, int32_t *running, int32_t *waiting,
                      int32_t *blocks_used, int32_t *blocks_total);

#endif
