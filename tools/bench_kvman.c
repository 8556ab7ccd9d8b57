/*
 * bench_kvman.c — `clpa-bench kvman`: the host work of the KV manager per
 * decode step, with an engine-like driver. Public headers only; no device.
 *
 * The driver keeps `running` requests in flight (64, 256 and 1024 by
 * default), drawn from the serving trace of `clpa-bench radix`
 * (bench_common.h: shared system prompt, few-shot groups, multi-turn
 * chats). Each request decodes an answer of out-min..out-max tokens
 * (uniform). One step does what an engine's scheduler does between two
 * forward passes:
 *
 *   1. finish the requests whose answer is complete (their tokens go into
 *      the prefix cache), and admit new ones to refill the batch
 *      (clpa_kvman_admit_ex, reserving the answer's length);
 *   2. append one decoded token to every running request
 *      (clpa_kvman_append_batch over clpa_kvman_running; the slots are
 *      where reshape_and_cache writes the K/V);
 *   3. build the batch view (clpa_kvman_batch_build: block tables
 *      [running, width] and context lengths) the attention kernel reads;
 *   4. off the critical path (an engine does it while the device runs the
 *      step): clpa_kvman_reclaim, evicting down to the free-block watermark.
 *
 * With --legacy the driver uses the calls that existed before those: one
 * clpa_kvman_append per request, its own array of sequences for
 * clpa_batch_build, clpa_kvman_admit without a reserve, no watermark.
 *
 * Only the manager's calls are timed, per step (the trace's own work, i.e.
 * making prompts and keeping chat histories, is not). After `warmup` steps
 * (the pool fills and eviction starts), `steps` steps are timed; reported
 * are steps per second and the microseconds per step of 1-3 (mean, p50,
 * p99), and the mean of 4 on its own (reclaim_us_per_step).
 *
 * Usage: clpa-bench kvman --help. --running N measures that size only;
 * --blocks 0 (default) sizes the pool at 160 blocks per running request
 * plus 8192; --watermark defaults to 1/64 of the pool.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "clpa_kvman.h"

typedef struct kv_opts {
  int json, legacy;
  int32_t running, steps, warmup, block_size, blocks, width, out_min, out_max, watermark;
  uint64_t seed;
} kv_opts;

/* --running at most this: 160 blocks each must stay in an int32 */
#define MAX_RUNNING (1 << 20)

/* Returns CLI_RUN or the exit status. */
static int parse(int argc, char **argv, kv_opts *o) {
  *o = (kv_opts){0, 0, 0, 3000, 1000, 16, 0, 256, 64, 512, -1, 1};
  const cli_opt opts[] = {
      {"running", CLI_INT, &o->running, 0, MAX_RUNNING, "N",
       "requests in flight; 0 runs 64, 256 and 1024\nin turn", NULL, NULL},
      {"steps", CLI_INT, &o->steps, 1, INT32_MAX, "N", "timed decode steps per run", NULL, NULL},
      {"warmup", CLI_INT, &o->warmup, 0, INT32_MAX, "N",
       "untimed steps first (the pool fills and\neviction starts)", NULL, NULL},
      {"block-size", CLI_INT, &o->block_size, 1, INT32_MAX, "N", "tokens per block", NULL, NULL},
      {"blocks", CLI_INT, &o->blocks, 0, INT32_MAX, "N",
       "blocks in the pool; 0 means 160 per running\nrequest plus 8192", NULL, NULL},
      {"width", CLI_INT, &o->width, 1, INT32_MAX, "N", "block-table columns of the batch view",
       NULL, NULL},
      {"watermark", CLI_INT, &o->watermark, 0, INT32_MAX, "N",
       "free blocks that reclaim keeps (not with\n--legacy)", "1/64 of the pool", NULL},
      {"out-min", CLI_INT, &o->out_min, 1, TRACE_CHAT_MAX / 2, "N", "shortest answer in tokens",
       NULL, NULL},
      {"out-max", CLI_INT, &o->out_max, 1, TRACE_CHAT_MAX / 2, "N", "longest answer in tokens",
       NULL, NULL},
      {"seed", CLI_U64, &o->seed, 0, 0, "N", "the trace's seed", NULL, NULL},
      {"legacy", CLI_FLAG, &o->legacy, 0, 0, NULL,
       "the calls from before the batch calls: one\nclpa_kvman_append per request, "
       "clpa_batch_build,\nclpa_kvman_admit without a reserve, no watermark",
       NULL, NULL},
      {"json", CLI_FLAG, &o->json, 0, 0, NULL, "print one JSON line instead of the table", NULL,
       NULL},
      {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
  };
  const cli_cmd cmd = {
      "clpa-bench kvman",
      "The KV manager's host work per decode step, driven like an engine (no device):\n"
      "`running` requests from the radix bench's trace stay in flight, each decoding\n"
      "an answer of out-min..out-max tokens. A step finishes the complete requests and\n"
      "admits new ones (reserving the answer), appends one token to every running\n"
      "request, builds the batch view, and off the timed path reclaims down to the\n"
      "watermark. Only the manager's calls are timed: steps per second, us per step\n"
      "(mean, p50, p99) split into admit, finish and append+view, and reclaim apart.",
      opts,
      "JSON keys: op, bench, api, block_size, width, out_min, out_max, runs (one object\n"
      "per size: running, mean_rows, steps, steps_per_s, us_per_step, p50_us, p99_us,\n"
      "admit_us_per_step, finish_us_per_step, decode_us_per_step, reclaim_us_per_step,\n"
      "admits, refused, hit_rate, evicted_blocks, hot_evictions, num_blocks,\n"
      "watermark).",
      clpa_version_string(),
  };
  int rc = cli_parse(&cmd, argc, argv);
  if (rc == CLI_RUN && o->out_max < o->out_min)
    return cli_error(&cmd, "--out-max (%d) is below --out-min (%d)", (int)o->out_max,
                     (int)o->out_min);
  return rc;
}

/* One running request, as the engine tracks it. */
typedef struct kv_live {
  clpa_kvreq *req;
  int chat;
  int32_t answer_left; /* tokens still to decode */
} kv_live;

typedef struct kv_run {
  const kv_opts *o;
  int32_t running;
  clpa_kvman *km;
  clpa_batch *batch;
  bench_trace *trace;
  kv_live *live;            /* [running], the batch rows in order */
  const clpa_seq **seqs;    /* [running], for the batch view */
  int32_t n;                /* requests in flight */
  int32_t *prompt, *history, *decoded;
  int64_t *slots;
  double *step_us;
  long long admits, finishes, refused, rows;
  double t_admit, t_finish, t_decode, t_reclaim;
} kv_run;

/* Finishes row i (timed) and moves the last row into its place. */
static double finish_row(kv_run *r, int32_t i) {
  kv_live *l = &r->live[i];
  int32_t n = clpa_kvreq_num_tokens(l->req);
  if (l->chat >= 0) memcpy(r->history, clpa_kvreq_tokens(l->req), (size_t)n * sizeof(int32_t));
  double t0 = bench_now();
  clpa_kvman_finish(r->km, l->req, 1);
  double t = bench_now() - t0;
  bench_trace_end(r->trace, l->chat, r->history, n, 1);
  r->live[i] = r->live[--r->n];
  r->seqs[i] = r->seqs[r->n];
  r->finishes++;
  return t;
}

/* Admits one request into a new last row (timed); 0 when refused. */
static double admit_row(kv_run *r, int *refused) {
  int chat;
  int32_t n = bench_trace_next(r->trace, r->prompt, &chat);
  int32_t answer = bench_trace_between(r->trace, r->o->out_min, r->o->out_max);
  clpa_kvman_admit_result a;
  clpa_kvman_admit_options opt;
  clpa_kvman_admit_options_init(&opt);
  opt.reserve_tokens = answer;
  double t0 = bench_now();
  clpa_status s = r->o->legacy ? clpa_kvman_admit(r->km, 0, r->prompt, n, r->slots, &a)
                               : clpa_kvman_admit_ex(r->km, 0, r->prompt, n, &opt, r->slots, &a);
  double t = bench_now() - t0;
  *refused = s != CLPA_OK;
  if (s != CLPA_OK) {
    bench_trace_end(r->trace, chat, NULL, 0, 0);
    r->refused++;
    return t;
  }
  r->live[r->n] = (kv_live){a.req, chat, answer};
  r->seqs[r->n] = clpa_kvreq_seq(a.req);
  r->n++;
  r->admits++;
  return t;
}

static void die(const char *what) {
  cli_progress_end();
  fprintf(stderr, "clpa-bench kvman: %s: %s\n", what, clpa_last_error());
  exit(1);
}

/* One engine step; returns the seconds spent in the manager. */
static double step(kv_run *r) {
  double t = 0, tf = 0, ta = 0;
  for (int32_t i = 0; i < r->n;) {
    if (r->live[i].answer_left == 0)
      tf += finish_row(r, i);
    else
      i++;
  }
  for (int refused = 0; r->n < r->running && !refused;) ta += admit_row(r, &refused);
  for (int32_t i = 0; i < r->n; i++) r->decoded[i] = bench_trace_token(r->trace);

  clpa_batch_view v;
  double t0 = bench_now();
  if (r->o->legacy) {
    for (int32_t i = 0; i < r->n; i++)
      if (clpa_kvman_append(r->km, r->live[i].req, &r->decoded[i], 1, &r->slots[i]) != CLPA_OK)
        die("append");
    if (clpa_batch_build(r->batch, r->seqs, r->n, &v) != CLPA_OK) die("batch");
  } else if (clpa_kvman_append_batch(r->km, clpa_kvman_running(r->km), r->n, NULL, r->decoded,
                                     r->slots) != CLPA_OK ||
             clpa_kvman_batch_build(r->km, r->batch, &v) != CLPA_OK) {
    die("decode step");
  }
  double td = bench_now() - t0;
  if (!r->o->legacy) { /* off the critical path */
    t0 = bench_now();
    clpa_kvman_reclaim(r->km, NULL);
    r->t_reclaim += bench_now() - t0;
  }
  for (int32_t i = 0; i < r->n; i++) r->live[i].answer_left--;
  r->rows += r->n;
  r->t_admit += ta;
  r->t_finish += tf;
  r->t_decode += td;
  t = tf + ta + td;
  return t;
}

/* Runs one size; with j, its results are the next element of j's array. */
static int run_one(const kv_opts *o, int32_t running, cli_json *j) {
  kv_run r;
  memset(&r, 0, sizeof r);
  r.o = o;
  r.running = running;
  clpa_kvman_config kc;
  clpa_kvman_config_init(&kc);
  kc.block_size = o->block_size;
  kc.num_blocks = o->blocks ? o->blocks : 160 * running + 8192;
  kc.free_watermark = o->legacy ? 0 : o->watermark >= 0 ? o->watermark : kc.num_blocks / 64;
  if (kc.free_watermark > kc.num_blocks) kc.free_watermark = kc.num_blocks;
  clpa_batch_config bc;
  clpa_batch_config_init(&bc);
  bc.min_blocks_per_seq = o->width;
  r.trace = bench_trace_create(o->seed, 4 * running, o->out_max);
  r.live = calloc((size_t)running, sizeof *r.live);
  r.seqs = calloc((size_t)running, sizeof *r.seqs);
  r.prompt = malloc(TRACE_MAX_PROMPT * sizeof(int32_t));
  r.history = malloc((size_t)(TRACE_MAX_PROMPT + o->out_max) * sizeof(int32_t));
  r.decoded = malloc((size_t)running * sizeof(int32_t));
  size_t nslots = (size_t)(running > TRACE_MAX_PROMPT ? running : TRACE_MAX_PROMPT);
  r.slots = malloc(nslots * sizeof(int64_t));
  r.step_us = malloc((size_t)o->steps * sizeof(double));
  if (!r.trace || !r.live || !r.seqs || !r.prompt || !r.history || !r.decoded || !r.slots ||
      !r.step_us || clpa_kvman_create(&kc, &r.km) != CLPA_OK ||
      clpa_batch_create(clpa_kvman_pool(r.km), &bc, &r.batch) != CLPA_OK) {
    fprintf(stderr, "clpa-bench kvman: setup failed: %s\n", clpa_last_error());
    return 1;
  }
  cli_progress_begin();
  for (int32_t s = 0; s < o->warmup; s++) {
    if (s % 16 == 0 && cli_progress_due())
      cli_progress("kvman: %d running, warm-up step %d of %d", (int)running, (int)s,
                   (int)o->warmup);
    step(&r);
  }
  r.admits = r.finishes = r.refused = r.rows = 0;
  r.t_admit = r.t_finish = r.t_decode = r.t_reclaim = 0;
  clpa_kvman_stats s0;
  clpa_kvman_stats_get(r.km, &s0);
  double total = 0;
  for (int32_t s = 0; s < o->steps; s++) {
    if (s % 16 == 0 && cli_progress_due())
      cli_progress("kvman: %d running, step %d of %d", (int)running, (int)s, (int)o->steps);
    double t = step(&r);
    r.step_us[s] = 1e6 * t;
    total += t;
  }
  cli_progress_end();
  clpa_kvman_stats s1;
  clpa_kvman_stats_get(r.km, &s1);
  const double p50 = cli_quantile(r.step_us, (size_t)o->steps, 0.5); /* sorts them */
  const double p99 = cli_quantile(r.step_us, (size_t)o->steps, 0.99);
  double mean = 1e6 * total / o->steps;
  double hit = s1.prompt_tokens > s0.prompt_tokens
                   ? (double)(s1.hit_tokens - s0.hit_tokens) /
                         (double)(s1.prompt_tokens - s0.prompt_tokens)
                   : 0;
  double rows = (double)r.rows / o->steps;
  if (j) {
    cli_json_object(j, NULL);
    cli_json_int(j, "running", running);
    cli_json_num(j, "mean_rows", rows, 1);
    cli_json_int(j, "steps", o->steps);
    cli_json_num(j, "steps_per_s", o->steps / total, 0);
    cli_json_num(j, "us_per_step", mean, 2);
    cli_json_num(j, "p50_us", p50, 2);
    cli_json_num(j, "p99_us", p99, 2);
    cli_json_num(j, "admit_us_per_step", 1e6 * r.t_admit / o->steps, 2);
    cli_json_num(j, "finish_us_per_step", 1e6 * r.t_finish / o->steps, 2);
    cli_json_num(j, "decode_us_per_step", 1e6 * r.t_decode / o->steps, 2);
    cli_json_num(j, "reclaim_us_per_step", 1e6 * r.t_reclaim / o->steps, 2);
    cli_json_int(j, "admits", r.admits);
    cli_json_int(j, "refused", r.refused);
    cli_json_num(j, "hit_rate", hit, 4);
    cli_json_int(j, "evicted_blocks", (long long)(s1.evicted_blocks - s0.evicted_blocks));
    cli_json_int(j, "hot_evictions", (long long)(s1.hot_evictions - s0.hot_evictions));
    cli_json_int(j, "num_blocks", kc.num_blocks);
    cli_json_int(j, "watermark", kc.free_watermark);
    cli_json_end(j);
  } else {
    char t[7][32];
    printf("  %5d running: %8.0f steps/s  %s a step  p50 %s  p99 %s"
           "  [admit %s, finish %s, append+view %s; reclaim %s off-path]\n"
           "                %lld admits, %lld refused, hit rate %.3f, %lld blocks evicted"
           " (%lld rounds on the hot path)\n",
           (int)running, o->steps / total, cli_time_text(t[0], sizeof t[0], mean * 1e-6, 9),
           cli_time_text(t[1], sizeof t[1], p50 * 1e-6, 9),
           cli_time_text(t[2], sizeof t[2], p99 * 1e-6, 9),
           cli_time_text(t[3], sizeof t[3], r.t_admit / o->steps, 0),
           cli_time_text(t[4], sizeof t[4], r.t_finish / o->steps, 0),
           cli_time_text(t[5], sizeof t[5], r.t_decode / o->steps, 0),
           cli_time_text(t[6], sizeof t[6], r.t_reclaim / o->steps, 0), r.admits, r.refused, hit,
           (long long)(s1.evicted_blocks - s0.evicted_blocks),
           (long long)(s1.hot_evictions - s0.hot_evictions));
  }
  clpa_batch_destroy(r.batch);
  clpa_kvman_destroy(r.km);
  bench_trace_destroy(r.trace);
  free(r.live);
  free(r.seqs);
  free(r.prompt);
  free(r.history);
  free(r.decoded);
  free(r.slots);
  free(r.step_us);
  return 0;
}

int clpa_bench_kvman(int argc, char **argv) {
  kv_opts o;
  int parsed = parse(argc, argv, &o);
  if (parsed != CLI_RUN) return parsed;
  static const int32_t sizes[] = {64, 256, 1024};
  int32_t n = o.running ? 1 : 3;
  cli_json j;
  if (o.json) {
    cli_json_begin(&j, stdout);
    cli_json_str(&j, "op", "kvman");
    cli_json_str(&j, "bench", "kvman"); /* the key before "op"; kept for old readers */
    cli_json_str(&j, "api", o.legacy ? "legacy" : "batch");
    cli_json_int(&j, "block_size", o.block_size);
    cli_json_int(&j, "width", o.width);
    cli_json_int(&j, "out_min", o.out_min);
    cli_json_int(&j, "out_max", o.out_max);
    cli_json_array(&j, "runs");
  } else {
    printf("kvman (%s calls): engine-like decode steps, block_size %d, table width %d, answers "
           "%d-%d tokens, %d steps after %d warm-up\n",
           o.legacy ? "legacy" : "batch", (int)o.block_size, (int)o.width, (int)o.out_min,
           (int)o.out_max, (int)o.steps, (int)o.warmup);
  }
  for (int32_t i = 0; i < n; i++)
    if (run_one(&o, o.running ? o.running : sizes[i], o.json ? &j : NULL)) return 1;
  if (o.json) {
    cli_json_end(&j); /* runs */
    cli_json_end(&j);
  }
  return 0;
}
