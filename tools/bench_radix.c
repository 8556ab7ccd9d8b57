/*
 * bench_radix.c — `clpa-bench radix`: the prefix cache on a synthetic
 * serving trace, driven through the KV manager the way an engine drives
 * it. Public headers only; no device.
 *
 * The trace is bench_common.h's (deterministic for a seed): 10,000
 * requests of about 2k tokens sharing a system prompt, few-shot example
 * sets and multi-turn chats. Each request is admitted (clpa_kvman_admit:
 * match and lock its prefix, take blocks for the rest, evicting when
 * short), decodes a 64-token answer (one clpa_kvman_append of 64 tokens),
 * and after `window` later requests were admitted (they overlap, so locks
 * matter) is finished (clpa_kvman_finish: its blocks go into the tree).
 *
 * Reported: calls per second of admit, append and finish (timed around the
 * manager's calls only) and all together (ops_per_s), and the hit rate:
 * prompt tokens found cached / prompt tokens.
 *
 * Usage: clpa-bench radix --help.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "clpa_kvman.h"

#define CHATS 256
#define ANSWER_LEN 64

typedef struct bench_opts {
  int json;
  int32_t requests, block_size, blocks, window;
  uint64_t seed;
} bench_opts;

typedef struct inflight {
  clpa_kvreq *req; /* NULL when the slot is empty */
  int chat;        /* conversation, -1 for few-shot */
} inflight;

/* Returns CLI_RUN or the exit status. */
static int parse(int argc, char **argv, bench_opts *o) {
  *o = (bench_opts){0, 10000, 16, 16384, 32, 1};
  const cli_opt opts[] = {
      {"requests", CLI_INT, &o->requests, 1, INT32_MAX, "N", "requests to replay", NULL, NULL},
      {"block-size", CLI_INT, &o->block_size, 1, INT32_MAX, "N", "tokens per block", NULL, NULL},
      {"blocks", CLI_INT, &o->blocks, 1, INT32_MAX, "N", "blocks in the pool", NULL, NULL},
      {"window", CLI_INT, &o->window, 1, INT32_MAX, "N",
       "requests in flight (a request finishes when\nthis many later ones were admitted)", NULL,
       NULL},
      {"seed", CLI_U64, &o->seed, 0, 0, "N", "the trace's seed", NULL, NULL},
      {"json", CLI_FLAG, &o->json, 0, 0, NULL, "print one JSON line instead of the table", NULL,
       NULL},
      {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
  };
  const cli_cmd cmd = {
      "clpa-bench radix",
      "Replays a synthetic serving trace through the KV manager (no device): every\n"
      "prompt shares a 512-token system prompt, then either a few-shot set and a\n"
      "question or the next turn of a chat (~2k tokens). Each request is admitted\n"
      "(match and lock its prefix, take blocks for the rest, evicting when short),\n"
      "appends a 64-token answer and later finishes (its blocks go into the tree).\n"
      "Prints calls per second of admit, append and finish (only the manager's calls\n"
      "are timed) and the hit rate: prompt tokens found cached / prompt tokens.",
      opts,
      "JSON keys: op, bench, requests, block_size, num_blocks, window, prompt_tokens,\n"
      "hit_tokens, hit_rate, ops, ops_per_s, admit_per_s, append_per_s, finish_per_s,\n"
      "evictions, evicted_blocks, evicted_nodes, splits, refused, seconds.",
      clpa_version_string(),
  };
  return cli_parse(&cmd, argc, argv);
}

typedef struct bench_state {
  clpa_kvman *km;
  bench_trace *trace;
  int32_t prompt[TRACE_MAX_PROMPT], answer[ANSWER_LEN];
  int64_t slots[TRACE_MAX_PROMPT];
  int32_t history[TRACE_MAX_PROMPT + ANSWER_LEN];
  long long n_admit, n_append, n_finish, refused;
  double t_admit, t_append, t_finish;
} bench_state;

/* Admits the next request of the trace and decodes its answer. */
static void start(bench_state *b, inflight *r) {
  int32_t n = bench_trace_next(b->trace, b->prompt, &r->chat);
  clpa_kvman_admit_result a;
  double t0 = bench_now();
  clpa_status s = clpa_kvman_admit(b->km, 0, b->prompt, n, b->slots, &a);
  b->t_admit += bench_now() - t0;
  b->n_admit++;
  r->req = s == CLPA_OK ? a.req : NULL;
  for (int32_t i = 0; i < ANSWER_LEN; i++) b->answer[i] = bench_trace_token(b->trace);
  if (r->req) {
    t0 = bench_now();
    s = clpa_kvman_append(b->km, r->req, b->answer, ANSWER_LEN, b->slots);
    b->t_append += bench_now() - t0;
    b->n_append++;
    if (s != CLPA_OK) clpa_kvman_finish(b->km, r->req, 0);
  }
  if (s != CLPA_OK) { /* no blocks even after evicting: refused */
    r->req = NULL;
    b->refused++;
    bench_trace_end(b->trace, r->chat, NULL, 0, 0);
  }
}

static void finish(bench_state *b, inflight *r) {
  int32_t n = clpa_kvreq_num_tokens(r->req);
  if (r->chat >= 0) memcpy(b->history, clpa_kvreq_tokens(r->req), (size_t)n * sizeof(int32_t));
  double t0 = bench_now();
  clpa_kvman_finish(b->km, r->req, 1);
  b->t_finish += bench_now() - t0;
  b->n_finish++;
  bench_trace_end(b->trace, r->chat, b->history, n, 1);
  r->req = NULL;
}

int clpa_bench_radix(int argc, char **argv) {
  bench_opts o;
  int parsed = parse(argc, argv, &o);
  if (parsed != CLI_RUN) return parsed;
  bench_state *b = calloc(1, sizeof *b);
  inflight *win = calloc((size_t)o.window, sizeof *win);
  clpa_kvman_config kc;
  clpa_kvman_config_init(&kc);
  kc.num_blocks = o.blocks;
  kc.block_size = o.block_size;
  if (!b || !win || !(b->trace = bench_trace_create(o.seed, CHATS, ANSWER_LEN)) ||
      clpa_kvman_create(&kc, &b->km) != CLPA_OK) {
    fprintf(stderr, "clpa-bench radix: setup failed: %s\n", clpa_last_error());
    if (b) bench_trace_destroy(b->trace);
    free(b);
    free(win);
    return 1;
  }

  double t_start = bench_now();
  cli_progress_begin();
  for (int32_t q = 0; q < o.requests; q++) {
    if (q % 64 == 0 && cli_progress_due())
      cli_progress("radix: request %d of %d", (int)q, (int)o.requests);
    inflight *r = &win[q % o.window];
    if (r->req) finish(b, r); /* the oldest in flight ends */
    start(b, r);
  }
  for (int32_t i = 0; i < o.window; i++)
    if (win[i].req) finish(b, &win[i]);
  double wall = bench_now() - t_start;
  cli_progress_end();

  clpa_kvman_stats ks;
  clpa_kvman_stats_get(b->km, &ks);
  clpa_radix_stats st;
  clpa_radix_stats_get(clpa_kvman_radix(b->km), &st);
  double t_ops = b->t_admit + b->t_append + b->t_finish;
  long long ops = b->n_admit + b->n_append + b->n_finish;
  double hit = ks.prompt_tokens ? (double)ks.hit_tokens / (double)ks.prompt_tokens : 0;
  if (o.json) {
    cli_json j;
    cli_json_begin(&j, stdout);
    cli_json_str(&j, "op", "radix");
    cli_json_str(&j, "bench", "radix"); /* the key before "op"; kept for old readers */
    cli_json_int(&j, "requests", o.requests);
    cli_json_int(&j, "block_size", o.block_size);
    cli_json_int(&j, "num_blocks", o.blocks);
    cli_json_int(&j, "window", o.window);
    cli_json_int(&j, "prompt_tokens", (long long)ks.prompt_tokens);
    cli_json_int(&j, "hit_tokens", (long long)ks.hit_tokens);
    cli_json_num(&j, "hit_rate", hit, 4);
    cli_json_int(&j, "ops", ops);
    cli_json_num(&j, "ops_per_s", ops / t_ops, 0);
    cli_json_num(&j, "admit_per_s", b->n_admit / b->t_admit, 0);
    cli_json_num(&j, "append_per_s", b->n_append ? b->n_append / b->t_append : 0.0, 0);
    cli_json_num(&j, "finish_per_s", b->n_finish ? b->n_finish / b->t_finish : 0.0, 0);
    cli_json_int(&j, "evictions", (long long)ks.evictions);
    cli_json_int(&j, "evicted_blocks", (long long)st.evicted_blocks);
    cli_json_int(&j, "evicted_nodes", (long long)st.evicted_nodes);
    cli_json_int(&j, "splits", (long long)st.splits);
    cli_json_int(&j, "refused", b->refused);
    cli_json_num(&j, "seconds", wall, 4);
    cli_json_end(&j);
  } else {
    printf("radix: %d requests, %.1fM prompt tokens, block_size %d, %d blocks, %d in flight\n",
           (int)o.requests, (double)ks.prompt_tokens / 1e6, (int)o.block_size, (int)o.blocks,
           (int)o.window);
    char t[32];
    printf("  admit   %8lld calls  %10.0f /s  (%s each)\n", b->n_admit,
           b->n_admit / b->t_admit, cli_time_text(t, sizeof t, b->t_admit / (double)b->n_admit, 0));
    if (b->n_append)
      printf("  append  %8lld calls  %10.0f /s  (%s each, %d tokens)\n", b->n_append,
             b->n_append / b->t_append,
             cli_time_text(t, sizeof t, b->t_append / (double)b->n_append, 0), ANSWER_LEN);
    if (b->n_finish)
      printf("  finish  %8lld calls  %10.0f /s  (%s each)\n", b->n_finish,
             b->n_finish / b->t_finish,
             cli_time_text(t, sizeof t, b->t_finish / (double)b->n_finish, 0));
    printf("  all     %8lld ops    %10.0f /s\n", ops, ops / t_ops);
    printf("  evicted %lld blocks, %lld nodes in %lld rounds\n", (long long)st.evicted_blocks,
           (long long)st.evicted_nodes, (long long)ks.evictions);
    printf("  hit rate %.4f (%lld of %lld prompt tokens cached), %lld splits, %lld refused\n", hit,
           (long long)ks.hit_tokens, (long long)ks.prompt_tokens, (long long)st.splits,
           b->refused);
  }
  clpa_kvman_destroy(b->km);
  bench_trace_destroy(b->trace);
  free(b);
  free(win);
  return 0;
}
