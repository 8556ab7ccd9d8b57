/*
 * scheduler.c — see scheduler.h. One loop: arrivals, admission, a batch
 * of decodes and prefill chunks, one forward, then each sequence's new
 * token (finish, or append it for the next step, or preempt).
 */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { WAITING, PREFILL, DECODE };

typedef struct live {
  demo_request *req;
  demo_result *res;
  clpa_kvreq *kv;
  int32_t *prompt;      /* what is admitted: the request's prompt, + its output after a preemption */
  int32_t prompt_len;
  int own_prompt;       /* prompt was allocated here (a preempted request's) */
  int64_t *slots;       /* slots of prompt tokens [cached, prompt_len) */
  int32_t cached;       /* prompt tokens found in the cache at this admission */
  int32_t computed;     /* prompt tokens whose K/V are in the cache */
  int64_t next_slot;    /* DECODE: where the next input's K/V goes */
  int32_t waiting_since, state;
} live;

struct demo_engine {
  demo_model *m;
  demo_workload *w;
  demo_sched_config cfg;
  const demo_config *mc;
  clpa_cache *cache;
  clpa_kvman *km;
  demo_result *results;
  int32_t capacity, max_blocks;
  live **waiting, **running;
  int32_t n_wait, n_run, done;
  /* one step's batch */
  live **batch;
  int32_t *tokens, *cu, *cached, *tables, *next;
  int64_t *slots;
  /* [max_running + 1][vocab]: the step's last-token logits, read back when
   * --check keeps them or the sampler draws from them. */
  float *logits;
  demo_run_stats st;
  struct timespec t0;
};

static double now_s(const demo_engine *e) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - e->t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - e->t0.tv_nsec);
}

void demo_sched_config_init(demo_sched_config *c) {
  memset(c, 0, sizeof *c);
  c->num_blocks = 1024, c->block_size = 16, c->kv_dtype = CLPA_DTYPE_F16;
  c->max_running = 16, c->token_budget = 512, c->lpm = 1, c->max_wait = 64;
  c->prefix_cache = 1, c->eog = NULL, c->n_eog = 0;
}

clpa_status demo_engine_create(demo_model *m, demo_workload *w, const demo_sched_config *cfg,
                               demo_engine **out) {
  *out = NULL;
  demo_engine *e = calloc(1, sizeof *e);
  if (!e) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "engine: out of memory");
  e->m = m, e->w = w, e->cfg = *cfg, e->mc = demo_model_config(m);
  clock_gettime(CLOCK_MONOTONIC, &e->t0);
  clpa_status st = demo_model_cache_create(m, cfg->num_blocks, cfg->block_size, cfg->kv_dtype,
                                           &e->cache);
  if (st != CLPA_OK) {
    free(e);
    return demo_fail(st, "KV cache: %s", demo_last_error());
  }
  clpa_kv_layout kv;
  clpa_cache_get_layout(e->cache, &kv);
  clpa_kvman_config kc;
  clpa_kvman_config_init(&kc);
  clpa_kvman_config_from_layout(&kc, &kv);
  kc.prefix_cache = cfg->prefix_cache;
  kc.free_watermark = cfg->num_blocks / 64;
  if ((st = clpa_kvman_create(&kc, &e->km)) != CLPA_OK) {
    demo_engine_destroy(e);
    return demo_fail(st, "KV manager: %s", clpa_last_error());
  }
  e->capacity = 1 << 16; /* requests (ids index results) */
  e->max_blocks = (e->mc->max_positions + cfg->block_size - 1) / cfg->block_size;
  const size_t seqs = (size_t)cfg->max_running + 1, toks = (size_t)cfg->token_budget + seqs;
  e->results = calloc((size_t)e->capacity, sizeof *e->results);
  e->waiting = calloc((size_t)e->capacity, sizeof *e->waiting);
  e->running = calloc(seqs, sizeof *e->running);
  e->batch = calloc(seqs, sizeof *e->batch);
  e->tokens = calloc(toks, sizeof *e->tokens);
  e->slots = calloc(toks, sizeof *e->slots);
  e->cu = calloc(seqs + 1, sizeof *e->cu);
  e->cached = calloc(seqs, sizeof *e->cached);
  e->next = calloc(seqs, sizeof *e->next);
  e->tables = calloc(seqs * (size_t)e->max_blocks, sizeof *e->tables);
  const int read_logits = cfg->keep_logits || cfg->sampler;
  e->logits = read_logits ? calloc(seqs * (size_t)e->mc->vocab, sizeof *e->logits) : NULL;
  if (!e->results || !e->waiting || !e->running || !e->batch || !e->tokens || !e->slots ||
      !e->cu || !e->cached || !e->next || !e->tables || (read_logits && !e->logits)) {
    demo_engine_destroy(e);
    return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "engine: out of memory");
  }
  *out = e;
  return CLPA_OK;
}

static void free_live(live *l) {
  if (!l) return;
  if (l->own_prompt) free(l->prompt);
  free(l->slots);
  free(l);
}

void demo_engine_destroy(demo_engine *e) {
  if (!e) return;
  for (int32_t i = 0; i < e->n_run; i++) free_live(e->running[i]);
  for (int32_t i = 0; i < e->n_wait; i++) free_live(e->waiting[i]);
  for (int32_t i = 0; e->results && i < e->capacity; i++)
    free(e->results[i].generated), free(e->results[i].logits);
  clpa_kvman_destroy(e->km);
  clpa_cache_destroy(e->cache);
  free(e->results), free(e->waiting), free(e->running), free(e->batch), free(e->tokens);
  free(e->slots), free(e->cu), free(e->cached), free(e->next), free(e->tables), free(e->logits);
  free(e);
}

const demo_result *demo_engine_results(const demo_engine *e, int32_t *count) {
  int32_t n = 0;
  for (int32_t i = 0; i < e->capacity; i++)
    if (e->results[i].req) n = i + 1;
  *count = n;
  return e->results;
}

const demo_run_stats *demo_engine_stats(const demo_engine *e) { return &e->st; }

void demo_engine_live(const demo_engine *e, int32_t *done, int32_t *running, int32_t *waiting,
                      int32_t *blocks_used, int32_t *blocks_total) {
  clpa_kvman_stats ks;
  clpa_kvman_stats_get(e->km, &ks);
  *done = e->done, *running = e->n_run, *waiting = e->n_wait;
  *blocks_used = ks.blocks_used, *blocks_total = ks.blocks_total;
}

/* ---- arrivals and admission ------------------------------------------- */

int64_t demo_request_kv_tokens(const demo_request *r) {
  return (int64_t)r->prompt_len + r->max_new_tokens - 1;
}

int64_t demo_request_kv_blocks(const demo_request *r, int32_t block_size) {
  return (demo_request_kv_tokens(r) + block_size - 1) / block_size;
}

static void finish_request(demo_engine *e, live *l, int32_t step, int cache) {
  if (l->kv) clpa_kvman_finish(e->km, l->kv, cache);
  l->kv = NULL;
  l->res->done_s = now_s(e);
  demo_workload_done(e->w, l->req, l->res->generated, l->res->num_generated, step);
  e->done++;
  free_live(l);
}

static clpa_status arrive(demo_engine *e, int32_t step) {
  demo_request *r;
  while ((r = demo_workload_next(e->w, step))) {
    if (r->id >= e->capacity) return demo_fail(CLPA_ERR_UNSUPPORTED, "more than %d requests", e->capacity);
    demo_result *res = &e->results[r->id];
    res->req = r;
    res->arrived_s = now_s(e);
    res->generated = malloc(sizeof(int32_t) * (size_t)r->max_new_tokens);
    if (e->cfg.keep_logits)
      res->logits = malloc(sizeof(float) * (size_t)r->max_new_tokens * (size_t)e->mc->vocab);
    live *l = calloc(1, sizeof *l);
    if (!res->generated || (e->cfg.keep_logits && !res->logits) || !l) {
      free(l);
      return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory for request %d", r->id);
    }
    l->req = r, l->res = res, l->prompt = r->prompt, l->prompt_len = r->prompt_len;
    l->waiting_since = step, l->state = WAITING;
    e->st.requests++;
    const int64_t need = (int64_t)r->prompt_len + r->max_new_tokens;
    if (need > e->mc->max_positions ||
        demo_request_kv_blocks(r, e->cfg.block_size) > e->cfg.num_blocks) {
      res->refused = 1; /* can never run: say so in the report, do not spin */
      res->finish = need > e->mc->max_positions ? DEMO_FINISH_CONTEXT : DEMO_FINISH_CACHE;
      e->st.refused++;
      finish_request(e, l, step, 0);
      continue;
    }
    e->waiting[e->n_wait++] = l;
  }
  return CLPA_OK;
}

/* Longest-prefix-first order (with the age bound), or arrival order. */
static int32_t *g_match; /* qsort has no context argument */
static live **g_wait;
static int32_t g_step, g_max_wait;

static int by_priority(const void *a, const void *b) {
  const int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
  const live *x = g_wait[i], *y = g_wait[j];
  const int old_x = g_step - x->waiting_since >= g_max_wait, old_y = g_step - y->waiting_since >= g_max_wait;
  if (old_x != old_y) return old_y - old_x;
  if (!old_x && g_match && g_match[i] != g_match[j]) return g_match[j] - g_match[i];
  if (x->waiting_since != y->waiting_since) return x->waiting_since - y->waiting_since;
  return x->req->id - y->req->id;
}

static clpa_status admit(demo_engine *e, int32_t step) {
  if (!e->n_wait) return CLPA_OK;
  int32_t *order = malloc(sizeof(int32_t) * (size_t)e->n_wait);
  int32_t *match = e->cfg.lpm && e->cfg.prefix_cache ? malloc(sizeof(int32_t) * (size_t)e->n_wait) : NULL;
  if (!order || (e->cfg.lpm && e->cfg.prefix_cache && !match)) {
    free(order), free(match);
    return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory ordering the queue");
  }
  for (int32_t i = 0; i < e->n_wait; i++) {
    order[i] = i;
    if (match) {
      clpa_radix_match_result mr;
      match[i] = clpa_radix_match(clpa_kvman_radix(e->km), 0, e->waiting[i]->prompt,
                                  e->waiting[i]->prompt_len, NULL, e->max_blocks, &mr) == CLPA_OK
                     ? mr.num_tokens
                     : 0;
    }
  }
  g_match = match, g_wait = e->waiting, g_step = step, g_max_wait = e->cfg.max_wait;
  qsort(order, (size_t)e->n_wait, sizeof *order, by_priority);
  clpa_status st = CLPA_OK;
  char *taken = calloc((size_t)e->n_wait, 1);
  if (!taken) st = demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  for (int32_t k = 0; st == CLPA_OK && k < e->n_wait && e->n_run < e->cfg.max_running; k++) {
    live *l = e->waiting[order[k]];
    l->slots = malloc(sizeof(int64_t) * (size_t)l->prompt_len);
    if (!l->slots) {
      st = demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory");
      break;
    }
    clpa_kvman_admit_options opt;
    clpa_kvman_admit_options_init(&opt);
    opt.reserve_tokens = l->req->max_new_tokens - l->res->num_generated;
    clpa_kvman_admit_result r;
    clpa_status a = clpa_kvman_admit_ex(e->km, 0, l->prompt, l->prompt_len, &opt, l->slots, &r);
    if (a == CLPA_ERR_POOL_EXHAUSTED) { /* no room now: it waits, and so do the rest */
      free(l->slots);
      l->slots = NULL;
      break;
    }
    if (a != CLPA_OK) {
      st = demo_fail(a, "admit: %s", clpa_last_error());
      break;
    }
    l->kv = r.req, l->cached = l->computed = r.cached_tokens, l->state = PREFILL;
    if (l->res->preemptions == 0) { /* a recomputation is not a new prompt */
      l->res->cached_tokens = r.cached_tokens;
      e->st.cached_tokens += r.cached_tokens;
      e->st.prompt_tokens += l->prompt_len;
    }
    e->running[e->n_run++] = l;
    taken[order[k]] = 1;
  }
  int32_t n = 0;
  for (int32_t i = 0; taken && i < e->n_wait; i++)
    if (!taken[i]) e->waiting[n++] = e->waiting[i];
  if (taken) e->n_wait = n;
  free(taken), free(order), free(match);
  return st;
}

/* ---- one step ---------------------------------------------------------- */

/* Puts live l's next part into the batch: its decode input, or a prefill
 * chunk of up to `room` tokens. Returns the tokens taken. */
static int32_t add_to_batch(demo_engine *e, demo_batch *b, live *l, int32_t room) {
  const int32_t s = b->num_seqs, t0 = e->cu[s];
  int32_t n;
  if (l->state == DECODE) {
    n = 1;
    e->tokens[t0] = l->res->generated[l->res->num_generated - 1];
    e->slots[t0] = l->next_slot;
    e->cached[s] = clpa_kvreq_num_tokens(l->kv) - 1;
  } else {
    n = l->prompt_len - l->computed < room ? l->prompt_len - l->computed : room;
    memcpy(e->tokens + t0, l->prompt + l->computed, sizeof(int32_t) * (size_t)n);
    memcpy(e->slots + t0, l->slots + (l->computed - l->cached), sizeof(int64_t) * (size_t)n);
    e->cached[s] = l->computed;
  }
  const clpa_seq *seq = clpa_kvreq_seq(l->kv);
  const int32_t nb = clpa_seq_num_blocks(seq);
  int32_t *row = e->tables + (size_t)s * (size_t)e->max_blocks;
  memcpy(row, clpa_seq_block_table(seq), sizeof(int32_t) * (size_t)nb);
  memset(row + nb, 0, sizeof(int32_t) * (size_t)(e->max_blocks - nb));
  e->batch[s] = l;
  e->cu[s + 1] = t0 + n;
  b->num_seqs++;
  return n;
}

/* A request found no block for its next token: give its blocks back
 * (cached, when the prefix cache is on: they hold computed K/V) and queue
 * it again with its output so far as part of its prompt. */
static clpa_status preempt(demo_engine *e, live *l, int32_t step) {
  clpa_kvman_finish(e->km, l->kv, e->cfg.prefix_cache);
  l->kv = NULL;
  const int32_t n = l->req->prompt_len + l->res->num_generated;
  int32_t *p = malloc(sizeof(int32_t) * (size_t)n);
  if (!p) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  memcpy(p, l->req->prompt, sizeof(int32_t) * (size_t)l->req->prompt_len);
  memcpy(p + l->req->prompt_len, l->res->generated, sizeof(int32_t) * (size_t)l->res->num_generated);
  if (l->own_prompt) free(l->prompt);
  free(l->slots);
  l->slots = NULL;
  l->prompt = p, l->prompt_len = n, l->own_prompt = 1;
  l->state = WAITING, l->waiting_since = step - e->cfg.max_wait; /* first in line */
  l->res->preemptions++;
  e->st.preemptions++;
  e->waiting[e->n_wait++] = l;
  return CLPA_OK;
}

/* Takes l out of the running list, the others kept in admission order:
 * the order step_once gives prefill chunks the budget in. */
static void unrun(demo_engine *e, const live *l) {
  int32_t n = 0;
  for (int32_t i = 0; i < e->n_run; i++)
    if (e->running[i] != l) e->running[n++] = e->running[i];
  e->n_run = n;
}

/* Sequence s of the batch ran (its logits at row s): the device's argmax,
 * or the sampler's draw, is its next token unless a prefill chunk left
 * more of its prompt to go. */
static clpa_status take_token(demo_engine *e, int32_t s, int32_t step) {
  live *l = e->batch[s];
  demo_result *res = l->res;
  if (l->state == PREFILL) {
    l->computed += e->cu[s + 1] - e->cu[s];
    e->st.computed_tokens += e->cu[s + 1] - e->cu[s];
    res->computed_tokens += e->cu[s + 1] - e->cu[s];
    /* Publish the computed prefix (whole blocks) at once, as SGLang caches
     * unfinished requests: requests that arrive meanwhile share it. */
    if (e->cfg.prefix_cache && clpa_kvman_checkpoint(e->km, l->kv, l->computed) != CLPA_OK)
      return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "checkpoint: %s", clpa_last_error());
    if (l->computed < l->prompt_len) return CLPA_OK; /* more chunks to go */
  }
  const int32_t tok = e->cfg.sampler ? demo_sampler_sample(e->cfg.sampler,
                                                           e->logits + (size_t)s * e->mc->vocab,
                                                           (uint64_t)l->req->id,
                                                           (uint64_t)res->num_generated)
                                     : e->next[s];
  res->generated[res->num_generated] = tok;
  if (e->cfg.keep_logits)
    memcpy(res->logits + (size_t)res->num_generated * e->mc->vocab,
           e->logits + (size_t)s * e->mc->vocab, sizeof(float) * (size_t)e->mc->vocab);
  res->num_generated++;
  e->st.generated_tokens++;
  if (res->num_generated == 1) res->first_token_s = now_s(e);
  int stop = 0;
  for (int32_t i = 0; i < e->cfg.n_eog && !stop; i++) stop = tok == e->cfg.eog[i];
  if (res->num_generated == l->req->max_new_tokens || stop) {
    res->finish = stop ? DEMO_FINISH_STOP : DEMO_FINISH_LENGTH;
    unrun(e, l);
    finish_request(e, l, step, e->cfg.prefix_cache);
    return CLPA_OK;
  }
  clpa_status a = clpa_kvman_append(e->km, l->kv, &tok, 1, &l->next_slot);
  if (a == CLPA_OK) {
    l->state = DECODE;
    return CLPA_OK;
  }
  if (a != CLPA_ERR_POOL_EXHAUSTED) return demo_fail(a, "append: %s", clpa_last_error());
  unrun(e, l);
  return preempt(e, l, step);
}

static clpa_status step_once(demo_engine *e, int32_t step) {
  demo_batch b;
  memset(&b, 0, sizeof b);
  e->cu[0] = 0;
  int32_t room = e->cfg.token_budget;
  /* Decodes first (each one token), then prefill chunks in admission order. */
  for (int32_t i = 0; i < e->n_run; i++)
    if (e->running[i]->state == DECODE) room -= add_to_batch(e, &b, e->running[i], 1);
  b.num_decode = b.num_seqs;
  for (int32_t i = 0; i < e->n_run && room > 0; i++)
    if (e->running[i]->state == PREFILL) room -= add_to_batch(e, &b, e->running[i], room);
  if (b.num_seqs == 0) return CLPA_OK;
  b.tokens = e->tokens, b.cu_seqlens = e->cu, b.cached_lens = e->cached, b.slots = e->slots;
  b.block_tables = e->tables, b.max_blocks_per_seq = e->max_blocks;
  const double t0 = now_s(e);
  demo_times dt = {0, 0, 0, 0, 0};
  /* With logits asked for (sampling), the forward reads back num_seqs x
   * vocab floats after the argmax (the rows of prefill chunks that end
   * mid-prompt too), where greedy reads 4 bytes a sequence, and drawing on
   * the host costs O(vocab) a sequence, one after another (what that costs:
   * docs/decisions/0033-demo-step-trace.md). */
  clpa_status st = demo_model_forward(e->m, e->cache, &b, e->logits, e->next, &dt);
  if (st != CLPA_OK) return demo_fail(st, "forward: %s", demo_last_error());
  const double t = now_s(e) - t0;
  const int32_t decode_tokens = b.num_decode, all = e->cu[b.num_seqs];
  e->st.prefill_s += t * (all - decode_tokens) / all;
  e->st.decode_s += t * decode_tokens / all;
  e->st.prefill_tokens_in_prefill_steps += all - decode_tokens;
  e->st.decode_tokens += decode_tokens;
  if (decode_tokens == all) { /* a decode step: its K/V, for the step floor (report.c) */
    e->st.decode_steps++;
    e->st.decode_step_s += t;
    e->st.decode_step_device_s += dt.attention_s + dt.gemm_s + dt.other_s;
    for (int32_t s = 0; s < b.num_seqs; s++) e->st.decode_kv_tokens += e->cached[s] + 1;
    e->st.decode_ops += dt.ops, e->st.decode_layer_ops += dt.layer_ops;
  } else {
    e->st.mixed_steps++;
    e->st.mixed_ops += dt.ops, e->st.mixed_layer_ops += dt.layer_ops;
  }
  e->st.device.attention_s += dt.attention_s, e->st.device.gemm_s += dt.gemm_s;
  e->st.device.other_s += dt.other_s;
  clpa_kvman_stats ks;
  clpa_kvman_stats_get(e->km, &ks);
  if (ks.blocks_used > e->st.peak_blocks) e->st.peak_blocks = ks.blocks_used;
  for (int32_t s = 0; s < b.num_seqs && st == CLPA_OK; s++) st = take_token(e, s, step);
  /* Off the critical path in a real engine (while the device runs). */
  clpa_kvman_reclaim(e->km, NULL);
  return st;
}

clpa_status demo_engine_run(demo_engine *e, void (*progress)(const demo_engine *e, void *user),
                            void *user) {
  clock_gettime(CLOCK_MONOTONIC, &e->t0);
  clpa_status st = CLPA_OK;
  int32_t step = 0, idle = 0;
  while (st == CLPA_OK && (!demo_workload_finished(e->w) || e->n_wait || e->n_run)) {
    if ((st = arrive(e, step)) || (st = admit(e, step))) break;
    if (e->n_run == 0 && e->n_wait > 0 && ++idle > 2) {
      /* Nothing runs and the first in line cannot be admitted into an
       * empty pool: it never will. */
      live *l = e->waiting[0];
      memmove(e->waiting, e->waiting + 1, sizeof *e->waiting * (size_t)--e->n_wait);
      l->res->refused = 1;
      l->res->finish = DEMO_FINISH_CACHE;
      e->st.refused++;
      finish_request(e, l, step, 0);
      continue;
    }
    if (e->n_run > 0) idle = 0;
    st = step_once(e, step);
    step++;
    e->st.steps = step;
    if (progress) progress(e, user);
  }
  e->st.seconds = now_s(e);
  clpa_kvman_stats ks;
  clpa_kvman_stats_get(e->km, &ks);
  e->st.evicted_blocks = ks.evicted_blocks;
  e->st.hit_rate = e->st.prompt_tokens ? (double)e->st.cached_tokens / (double)e->st.prompt_tokens : 0;
  return st;
}
