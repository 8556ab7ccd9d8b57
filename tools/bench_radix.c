/*
 * bench_radix.c — `clpa-bench radix`: the prefix cache on a synthetic
 * serving trace. Public headers only.
 *
 * The trace (deterministic for a seed): 10,000 requests of about 2k tokens,
 * every one starting with the same 512-token system prompt, then either
 *   - few-shot (half): one of 24 example sets (1,024 tokens) and a fresh
 *     question (400-600 tokens), or
 *   - chat (half): the next turn of one of 256 conversations: the whole
 *     history (earlier prompts and answers) plus a new user message
 *     (100-250 tokens); a conversation past 3k tokens starts over.
 * Each request does what an engine does through the tree: match and lock
 * its prefix, take blocks for the rest from the pool (evicting when short),
 * decode a 64-token answer, and after `window` later requests were admitted
 * (they overlap, so locks matter), insert its tokens, unlock, and drop its
 * own block references.
 *
 * Reported: calls per second of match, insert and evict (timed around the
 * tree calls only) and all together (ops_per_s), and the hit rate: prompt
 * tokens found cached / prompt tokens.
 *
 * Usage: clpa-bench radix [--json] [--requests N] [--block-size N]
 *                         [--blocks N] [--window N] [--seed N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clpa_radix.h"

int clpa_bench_radix(int argc, char **argv);

#define SYS_LEN 512
#define FEWSHOT_SETS 24
#define FEWSHOT_LEN 1024
#define CHATS 256
#define CHAT_MAX 3072
#define ANSWER_LEN 64
#define MAX_TOKENS (CHAT_MAX + 512)

typedef struct bench_opts {
  int json;
  int32_t requests, block_size, blocks, window;
  uint64_t seed;
} bench_opts;

typedef struct inflight {
  int32_t tokens[MAX_TOKENS];
  int32_t blocks[MAX_TOKENS];
  int32_t n, nb;
  uint64_t ns;
  clpa_radix_node *node;
  int chat; /* conversation index, -1 for few-shot */
} inflight;

static uint64_t rng_state;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static int32_t tok(void) { return (int32_t)(rnd() % 32000); }
static int32_t between(int32_t lo, int32_t hi) {
  return lo + (int32_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parse(int argc, char **argv, bench_opts *o) {
  *o = (bench_opts){0, 10000, 16, 16384, 32, 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "radix") == 0 && i == 1) continue; /* as called by clpa-bench */
    if (strcmp(a, "--json") == 0) {
      o->json = 1;
      continue;
    }
    if (i + 1 >= argc) return -1;
    long v = atol(argv[++i]);
    if (strcmp(a, "--requests") == 0)
      o->requests = (int32_t)v;
    else if (strcmp(a, "--block-size") == 0)
      o->block_size = (int32_t)v;
    else if (strcmp(a, "--blocks") == 0)
      o->blocks = (int32_t)v;
    else if (strcmp(a, "--window") == 0)
      o->window = (int32_t)v;
    else if (strcmp(a, "--seed") == 0)
      o->seed = (uint64_t)v;
    else
      return -1;
  }
  if (o->requests < 1 || o->block_size < 1 || o->blocks < 1 || o->window < 1) return -1;
  return 0;
}

typedef struct bench_state {
  clpa_pool *pool;
  clpa_radix *tree;
  int32_t sys[SYS_LEN];
  int32_t fewshot[FEWSHOT_SETS][FEWSHOT_LEN];
  int32_t *chat[CHATS]; /* history tokens, CHAT_MAX + room */
  int32_t chat_len[CHATS];
  int chat_busy[CHATS];
  long long n_match, n_insert, n_evict, prompt_tokens, hit_tokens, refused;
  double t_match, t_insert, t_evict;
} bench_state;

/* Builds the next request's prompt into r. */
static void make_prompt(bench_state *b, inflight *r) {
  int c = (int)(rnd() % CHATS);
  r->ns = 0;
  r->chat = -1;
  if (rnd() % 2 || b->chat_busy[c]) {
    const int32_t *ex = b->fewshot[rnd() % FEWSHOT_SETS];
    memcpy(r->tokens, b->sys, sizeof b->sys);
    memcpy(r->tokens + SYS_LEN, ex, FEWSHOT_LEN * sizeof(int32_t));
    r->n = SYS_LEN + FEWSHOT_LEN;
    for (int32_t q = between(400, 600); q > 0; q--) r->tokens[r->n++] = tok();
    return;
  }
  if (b->chat_len[c] == 0 || b->chat_len[c] > CHAT_MAX - 256 - ANSWER_LEN) {
    memcpy(b->chat[c], b->sys, sizeof b->sys); /* a new conversation */
    b->chat_len[c] = SYS_LEN;
    for (int32_t q = between(600, 1200); q > 0; q--) b->chat[c][b->chat_len[c]++] = tok();
  }
  memcpy(r->tokens, b->chat[c], (size_t)b->chat_len[c] * sizeof(int32_t));
  r->n = b->chat_len[c];
  for (int32_t q = between(100, 250); q > 0; q--) r->tokens[r->n++] = tok();
  r->chat = c;
  b->chat_busy[c] = 1;
}

static int take_blocks(bench_state *b, int32_t need, int32_t *out) {
  int32_t short_by = need - clpa_pool_num_free(b->pool);
  if (short_by > 0) {
    double t0 = now();
    clpa_radix_evict(b->tree, short_by, NULL);
    b->t_evict += now() - t0;
    b->n_evict++;
  }
  return clpa_pool_alloc(b->pool, need, out) == CLPA_OK ? 0 : -1;
}

/* Admits r: match and lock the prefix, allocate the rest. */
static int admit(bench_state *b, inflight *r, int32_t bs) {
  clpa_radix_match_result m;
  double t0 = now();
  clpa_radix_match(b->tree, r->ns, r->tokens, r->n - 1, r->blocks, MAX_TOKENS, &m);
  b->t_match += now() - t0;
  b->n_match++;
  clpa_radix_lock(b->tree, m.node);
  for (int32_t i = 0; i < m.num_blocks; i++) clpa_pool_ref(b->pool, r->blocks[i]);
  b->prompt_tokens += r->n;
  b->hit_tokens += m.num_tokens;
  /* decode: the answer is appended before the request is finished */
  for (int32_t a = 0; a < ANSWER_LEN; a++) r->tokens[r->n++] = tok();
  r->nb = (r->n + bs - 1) / bs;
  r->node = m.node;
  if (take_blocks(b, r->nb - m.num_blocks, r->blocks + m.num_blocks) == 0) return 0;
  for (int32_t i = 0; i < m.num_blocks; i++) clpa_pool_unref(b->pool, r->blocks[i]);
  clpa_radix_unlock(b->tree, m.node);
  b->refused++;
  return -1;
}

static void finish(bench_state *b, inflight *r) {
  clpa_radix_insert_result ir;
  double t0 = now();
  clpa_radix_insert(b->tree, r->ns, r->tokens, r->n, r->blocks, &ir);
  b->t_insert += now() - t0;
  b->n_insert++;
  clpa_radix_unlock(b->tree, r->node);
  for (int32_t i = 0; i < r->nb; i++) clpa_pool_unref(b->pool, r->blocks[i]);
  if (r->chat >= 0) {
    memcpy(b->chat[r->chat], r->tokens, (size_t)r->n * sizeof(int32_t));
    b->chat_len[r->chat] = r->n;
    b->chat_busy[r->chat] = 0;
  }
}

int clpa_bench_radix(int argc, char **argv) {
  bench_opts o;
  if (parse(argc, argv, &o)) {
    fprintf(stderr,
            "usage: clpa-bench radix [--json] [--requests N] [--block-size N] "
            "[--blocks N] [--window N] [--seed N]\n");
    return 2;
  }
  rng_state = o.seed;
  bench_state *b = calloc(1, sizeof *b);
  inflight *win = calloc((size_t)o.window, sizeof *win);
  int *live = calloc((size_t)o.window, sizeof *live);
  clpa_pool_config pc;
  clpa_pool_config_init(&pc);
  pc.num_blocks = o.blocks;
  pc.block_size = o.block_size;
  if (!b || !win || !live || clpa_pool_create(&pc, &b->pool) != CLPA_OK ||
      clpa_radix_create(b->pool, NULL, &b->tree) != CLPA_OK) {
    fprintf(stderr, "clpa-bench radix: setup failed: %s\n", clpa_last_error());
    return 1;
  }
  for (int i = 0; i < SYS_LEN; i++) b->sys[i] = tok();
  for (int s = 0; s < FEWSHOT_SETS; s++)
    for (int i = 0; i < FEWSHOT_LEN; i++) b->fewshot[s][i] = tok();
  for (int c = 0; c < CHATS; c++) b->chat[c] = malloc(MAX_TOKENS * sizeof(int32_t));

  double t_start = now();
  for (int32_t q = 0; q < o.requests; q++) {
    inflight *r = &win[q % o.window];
    if (live[q % o.window]) finish(b, r); /* the oldest in flight ends */
    make_prompt(b, r);
    live[q % o.window] = admit(b, r, o.block_size) == 0;
    if (!live[q % o.window] && r->chat >= 0) b->chat_busy[r->chat] = 0;
  }
  for (int32_t i = 0; i < o.window; i++)
    if (live[i]) finish(b, &win[i]);
  double wall = now() - t_start;

  clpa_radix_stats st;
  clpa_radix_stats_get(b->tree, &st);
  double t_ops = b->t_match + b->t_insert + b->t_evict;
  long long ops = b->n_match + b->n_insert + b->n_evict;
  double hit = b->prompt_tokens ? (double)b->hit_tokens / (double)b->prompt_tokens : 0;
  if (o.json) {
    printf(
        "{\"bench\": \"radix\", \"requests\": %d, \"block_size\": %d, \"num_blocks\": %d, "
        "\"window\": %d, \"prompt_tokens\": %lld, \"hit_tokens\": %lld, \"hit_rate\": %.4f, "
        "\"ops\": %lld, \"ops_per_s\": %.0f, \"match_per_s\": %.0f, \"insert_per_s\": %.0f, "
        "\"evict_per_s\": %.0f, \"evict_calls\": %lld, \"evicted_blocks\": %lld, "
        "\"evicted_nodes\": %lld, \"splits\": %lld, \"refused\": %lld, \"seconds\": %.4f}\n",
        (int)o.requests, (int)o.block_size, (int)o.blocks, (int)o.window, b->prompt_tokens,
        b->hit_tokens, hit, ops, ops / t_ops, b->n_match / b->t_match, b->n_insert / b->t_insert,
        b->n_evict ? b->n_evict / b->t_evict : 0.0, b->n_evict, (long long)st.evicted_blocks,
        (long long)st.evicted_nodes, (long long)st.splits, b->refused, wall);
  } else {
    printf("radix: %d requests, %.1fM prompt tokens, block_size %d, %d blocks, %d in flight\n",
           (int)o.requests, b->prompt_tokens / 1e6, (int)o.block_size, (int)o.blocks,
           (int)o.window);
    printf("  match   %8lld calls  %10.0f /s  (%.2f us each)\n", b->n_match,
           b->n_match / b->t_match, 1e6 * b->t_match / (double)b->n_match);
    printf("  insert  %8lld calls  %10.0f /s  (%.2f us each)\n", b->n_insert,
           b->n_insert / b->t_insert, 1e6 * b->t_insert / (double)b->n_insert);
    if (b->n_evict)
      printf("  evict   %8lld calls  %10.0f /s  (%.2f us each; %lld blocks, %lld nodes)\n",
             b->n_evict, b->n_evict / b->t_evict, 1e6 * b->t_evict / (double)b->n_evict,
             (long long)st.evicted_blocks, (long long)st.evicted_nodes);
    printf("  all     %8lld ops    %10.0f /s\n", ops, ops / t_ops);
    printf("  hit rate %.4f (%lld of %lld prompt tokens cached), %lld splits, %lld refused\n", hit,
           b->hit_tokens, b->prompt_tokens, (long long)st.splits, b->refused);
  }
  clpa_radix_destroy(b->tree);
  clpa_pool_destroy(b->pool);
  for (int c = 0; c < CHATS; c++) free(b->chat[c]);
  free(b);
  free(win);
  free(live);
  return 0;
}
