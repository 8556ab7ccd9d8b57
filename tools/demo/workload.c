/*
 * workload.c — see workload.h. Requests are made up front except chat
 * turns after the first, which need the answer before: a chat's turn t
 * + 1 is made when turn t is reported done.
 */
#include "workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct demo_workload {
  demo_workload_config cfg;
  uint64_t rng;
  int32_t **system, **fewshot; /* the shared prefixes */
  demo_request *reqs;          /* every request, chat turns as they are made */
  int32_t made, issued, done;
  int32_t chat_requests;       /* of cfg.requests, how many are chat turns */
  int32_t chat_turns_made;
  int32_t *chat_turn;          /* per chat: turns made so far */
};

static uint64_t next_u64(demo_workload *w) {
  uint64_t z = (w->rng += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static int32_t below(demo_workload *w, int32_t n) {
  return n > 0 ? (int32_t)(next_u64(w) % (uint64_t)n) : 0;
}

static int32_t between(demo_workload *w, int32_t lo, int32_t hi) {
  return lo + below(w, hi - lo + 1);
}

static void fill(demo_workload *w, int32_t *t, int32_t n) {
  for (int32_t i = 0; i < n; i++) t[i] = 1 + below(w, w->cfg.vocab - 1);
}

static int32_t *tokens(demo_workload *w, int32_t n) {
  int32_t *t = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
  if (t) fill(w, t, n);
  return t;
}

const char *demo_kind_name(demo_kind k) {
  static const char *const names[] = {"system", "fewshot", "chat", "unique"};
  return (unsigned)k < DEMO_KINDS ? names[k] : "?";
}

void demo_workload_config_init(demo_workload_config *c, int32_t requests, int32_t vocab) {
  memset(c, 0, sizeof *c);
  c->requests = requests;
  c->vocab = vocab;
  c->output_min = 16, c->output_max = 32;
  c->system_prompts = 2, c->system_len = 96;
  c->fewshot_groups = 2, c->fewshot_len = 192;
  c->chats = requests / 8 > 0 ? requests / 8 : 1, c->turn_len = 24;
  c->question_len = 24;
  c->arrival_steps = requests; /* about one new request per step */
  c->seed = 1;
}

/* A new request at the end of reqs (the array has room for all). */
static demo_request *add(demo_workload *w, demo_kind kind, int32_t prompt_len, int32_t arrival) {
  demo_request *r = &w->reqs[w->made];
  memset(r, 0, sizeof *r);
  r->id = w->made++;
  r->kind = kind;
  r->prompt_len = prompt_len;
  r->prompt = malloc(sizeof(int32_t) * (size_t)prompt_len);
  r->max_new_tokens = between(w, w->cfg.output_min, w->cfg.output_max);
  r->arrival = arrival;
  r->chat = r->turn = -1;
  return r->prompt ? r : NULL;
}

demo_workload *demo_workload_create(const demo_workload_config *cfg) {
  const demo_workload_config *c = cfg;
  const char *bad = c->requests < 1                        ? "requests"
                    : c->vocab < 2                         ? "vocab"
                    : c->output_min < 1 || c->output_max < c->output_min ? "output_min/output_max"
                    : c->system_prompts < 1 || c->system_len < 1 ? "system_prompts/system_len"
                    : c->fewshot_groups < 1 || c->fewshot_len < 1 ? "fewshot_groups/fewshot_len"
                    : c->chats < 1 || c->turn_len < 1      ? "chats/turn_len"
                    : c->question_len < 1                  ? "question_len"
                    : c->arrival_steps < 0                 ? "arrival_steps"
                                                           : NULL;
  if (bad) {
    fprintf(stderr, "clpa-demo: workload: %s out of range\n", bad);
    return NULL;
  }
  demo_workload *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->cfg = *c;
  w->rng = c->seed * 0x2545f4914f6cdd1dULL + 1;
  w->system = calloc((size_t)c->system_prompts, sizeof *w->system);
  w->fewshot = calloc((size_t)c->fewshot_groups, sizeof *w->fewshot);
  w->reqs = calloc((size_t)c->requests, sizeof *w->reqs);
  w->chat_turn = calloc((size_t)c->chats, sizeof *w->chat_turn);
  int good = w->system && w->fewshot && w->reqs && w->chat_turn;
  for (int32_t i = 0; good && i < c->system_prompts; i++) good = (w->system[i] = tokens(w, c->system_len)) != NULL;
  for (int32_t i = 0; good && i < c->fewshot_groups; i++)
    good = (w->fewshot[i] = tokens(w, c->system_len + c->fewshot_len)) != NULL;
  /* A quarter of the requests are chat turns (at least one per chat). */
  w->chat_requests = c->requests / 4 > c->chats ? c->requests / 4 : c->chats;
  if (w->chat_requests > c->requests) w->chat_requests = c->requests;
  const int32_t others = c->requests - w->chat_requests;
  for (int32_t i = 0; good && i < others; i++) {
    const int32_t arrival = c->arrival_steps ? below(w, c->arrival_steps) : 0;
    const int32_t pick = below(w, 10); /* 4 system, 4 few-shot, 2 unique */
    demo_request *r;
    if (pick < 4) {
      const int32_t s = below(w, c->system_prompts);
      if (!(r = add(w, DEMO_SYSTEM, c->system_len + c->question_len, arrival))) break;
      memcpy(r->prompt, w->system[s], sizeof(int32_t) * (size_t)c->system_len);
      fill(w, r->prompt + c->system_len, c->question_len);
    } else if (pick < 8) {
      const int32_t g = below(w, c->fewshot_groups), n = c->system_len + c->fewshot_len;
      if (!(r = add(w, DEMO_FEWSHOT, n + c->question_len, arrival))) break;
      memcpy(r->prompt, w->fewshot[g], sizeof(int32_t) * (size_t)n);
      fill(w, r->prompt + n, c->question_len);
    } else {
      if (!(r = add(w, DEMO_UNIQUE, 4 * c->question_len, arrival))) break;
      fill(w, r->prompt, 4 * c->question_len);
    }
  }
  good = good && w->made == others;
  /* First turns of the chats: the system prompt + a message. */
  for (int32_t k = 0; good && k < c->chats && w->chat_turns_made < w->chat_requests; k++) {
    const int32_t arrival = c->arrival_steps ? below(w, c->arrival_steps) : 0;
    demo_request *r = add(w, DEMO_CHAT, c->system_len + c->turn_len, arrival);
    if (!r) {
      good = 0;
      break;
    }
    memcpy(r->prompt, w->system[0], sizeof(int32_t) * (size_t)c->system_len);
    fill(w, r->prompt + c->system_len, c->turn_len);
    r->chat = k, r->turn = 0;
    w->chat_turn[k] = 1;
    w->chat_turns_made++;
  }
  if (!good) {
    demo_workload_destroy(w);
    return NULL;
  }
  return w;
}

demo_workload *demo_workload_create_prompts(const int32_t *const *prompts, const int32_t *lens,
                                            const int32_t *max_new, int32_t n) {
  demo_workload *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  demo_workload_config_init(&w->cfg, n, 2);
  w->cfg.system_prompts = w->cfg.fewshot_groups = w->cfg.chats = 0; /* nothing made up */
  w->reqs = calloc((size_t)n, sizeof *w->reqs);
  if (!w->reqs) {
    free(w);
    return NULL;
  }
  for (int32_t i = 0; i < n; i++) {
    demo_request *r = &w->reqs[i];
    r->id = i, r->kind = DEMO_UNIQUE, r->prompt_len = lens[i], r->max_new_tokens = max_new[i];
    r->chat = r->turn = -1;
    r->prompt = malloc(sizeof(int32_t) * (size_t)(lens[i] > 0 ? lens[i] : 1));
    if (!r->prompt) {
      demo_workload_destroy(w);
      return NULL;
    }
    memcpy(r->prompt, prompts[i], sizeof(int32_t) * (size_t)lens[i]);
    w->made++;
  }
  return w;
}

void demo_workload_destroy(demo_workload *w) {
  if (!w) return;
  for (int32_t i = 0; w->system && i < w->cfg.system_prompts; i++) free(w->system[i]);
  for (int32_t i = 0; w->fewshot && i < w->cfg.fewshot_groups; i++) free(w->fewshot[i]);
  for (int32_t i = 0; w->reqs && i < w->made; i++) free(w->reqs[i].prompt);
  free(w->system), free(w->fewshot), free(w->reqs), free(w->chat_turn);
  free(w);
}

demo_request *demo_workload_next(demo_workload *w, int32_t step) {
  /* Requests are handed out in arrival order among those made. */
  demo_request *best = NULL;
  for (int32_t i = 0; i < w->made; i++) {
    demo_request *r = &w->reqs[i];
    if (r->issued || r->arrival > step) continue;
    if (!best || r->arrival < best->arrival) best = r;
  }
  if (best) {
    best->issued = 1;
    w->issued++;
  }
  return best;
}

void demo_workload_done(demo_workload *w, demo_request *r, const int32_t *generated, int32_t n,
                        int32_t step) {
  w->done++;
  if (r->kind != DEMO_CHAT || w->chat_turns_made >= w->chat_requests) return;
  /* The chat goes on: the history, the answer, a new message. */
  const int32_t len = r->prompt_len + n + w->cfg.turn_len;
  demo_request *t = add(w, DEMO_CHAT, len, step + 1);
  if (!t) return; /* out of memory: the chat ends here */
  memcpy(t->prompt, r->prompt, sizeof(int32_t) * (size_t)r->prompt_len);
  memcpy(t->prompt + r->prompt_len, generated, sizeof(int32_t) * (size_t)n);
  fill(w, t->prompt + r->prompt_len + n, w->cfg.turn_len);
  t->chat = r->chat, t->turn = r->turn + 1;
  w->chat_turn[r->chat]++;
  w->chat_turns_made++;
}

int demo_workload_finished(const demo_workload *w) {
  /* A done chat turn makes the next one before it counts as done, so when
   * everything made is done, nothing more will be made. */
  return w->done == w->made;
}

int32_t demo_workload_issued(const demo_workload *w, int32_t per_kind[DEMO_KINDS]) {
  if (per_kind) {
    memset(per_kind, 0, sizeof(int32_t) * DEMO_KINDS);
    for (int32_t i = 0; i < w->made; i++)
      if (w->reqs[i].issued) per_kind[w->reqs[i].kind]++;
  }
  return w->issued;
}
