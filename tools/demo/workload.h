/*
 * workload.h — the demo's requests, with the sharing real traffic has
 * (what RadixAttention's evaluation serves): shared system prompts,
 * few-shot groups that share a long prefix, multi-turn chats that resend
 * the whole history (the model's own answers included, so a turn arrives
 * only when the turn before it is done), and unique prompts. Sizes, mix
 * and arrivals come from the config; everything is seeded.
 */
#ifndef CLPA_DEMO_WORKLOAD_H
#define CLPA_DEMO_WORKLOAD_H

#include <stdint.h>

typedef enum demo_kind {
  DEMO_SYSTEM = 0, /* a shared system prompt + a unique question */
  DEMO_FEWSHOT,    /* a group's shared few-shot examples + a question */
  DEMO_CHAT,       /* a chat turn: the whole history + the new message */
  DEMO_UNIQUE,     /* nothing shared */
  DEMO_KINDS
} demo_kind;

typedef struct demo_request {
  int32_t id;
  demo_kind kind;
  int32_t *prompt;
  int32_t prompt_len;
  int32_t max_new_tokens;
  int32_t arrival;    /* the engine step it arrives at */
  int32_t chat, turn; /* DEMO_CHAT: which chat and turn (from 0); else -1 */
  int issued;         /* handed out by demo_workload_next */
} demo_request;

typedef struct demo_workload_config {
  int32_t requests;     /* in all, chat turns included */
  int32_t vocab;        /* prompt tokens are drawn from [1, vocab) */
  int32_t output_min, output_max; /* generated tokens per request */
  int32_t system_prompts, system_len;
  int32_t fewshot_groups, fewshot_len;
  int32_t chats, turn_len;   /* a turn adds turn_len user tokens */
  int32_t question_len;      /* unique part of system/few-shot requests; unique prompts are 4x */
  int32_t arrival_steps;     /* non-chat requests arrive uniformly over steps [0, arrival_steps) */
  uint64_t seed;
} demo_workload_config;

/* The default mix for a vocabulary (a few hundred requests' worth of
 * sharing, scaled by requests). */
void demo_workload_config_init(demo_workload_config *cfg, int32_t requests, int32_t vocab);

typedef struct demo_workload demo_workload;

/* Returns NULL when out of memory or the config is impossible (a message
 * on stderr says which field). */
demo_workload *demo_workload_create(const demo_workload_config *cfg);
void demo_workload_destroy(demo_workload *w);
/* A workload of given prompts instead (text turned into tokens, say):
 * prompt i is request i, all arriving at step 0, request i allowed
 * max_new[i] generated tokens. The prompts are copied. NULL when out of
 * memory. */
demo_workload *demo_workload_create_prompts(const int32_t *const *prompts, const int32_t *lens,
                                            const int32_t *max_new, int32_t n);

/* The next request that has arrived by `step`, or NULL. The workload
 * keeps owning it; it stays valid until demo_workload_destroy. */
demo_request *demo_workload_next(demo_workload *w, int32_t step);
/* A request is done with these generated tokens: a chat's next turn (the
 * history, the answer and a new message) arrives at step + 1. */
void demo_workload_done(demo_workload *w, demo_request *r, const int32_t *generated, int32_t n,
                        int32_t step);
/* 1 when every request was handed out and reported done. */
int demo_workload_finished(const demo_workload *w);
/* Requests handed out so far, and of each kind. */
int32_t demo_workload_issued(const demo_workload *w, int32_t per_kind[DEMO_KINDS]);
const char *demo_kind_name(demo_kind k);

#endif
