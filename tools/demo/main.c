/*
 * clpa-demo — a small LLM engine in the Llama shape, end to end on
 * OpenCL: continuous batching over clpa's KV manager, paged KV cache,
 * radix prefix sharing, every attention call through clpa (prefill with
 * prefix hits, decode over the paged cache), GEMMs through CLBlast. The
 * default runs a seeded synthetic workload with realistic sharing on a
 * tiny random-weight model; --model loads a Llama GGUF, and --prompt or
 * --prompts serves text through its tokenizer. See --help.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tool_cli.h"
#include "check.h"
#include "gguf.h"
#include "model.h"
#include "prompts.h"
#include "report.h"
#include "sampler.h"
#include "scheduler.h"
#include "tokenizer.h"
#include "workload.h"

/* --output-min and --output-max when not given (0 marks "not given"). */
enum { OUTPUT_MIN = 16, OUTPUT_MAX = 32 };
/* --blocks' largest value, and the cache sized from the workload's. */
#define MAX_BLOCKS (1 << 24)

typedef struct demo_args {
  const char *preset, *model, *device, *schedule, *prompt, *prompts, *trace, *weight_layout;
  int32_t requests, output_min, output_max, blocks, block_size, max_running, token_budget;
  int32_t arrival_steps, max_wait;
  uint64_t seed;
  clpa_dtype kv_dtype, weight_dtype;
  const char *weight_quant;
  float temperature, top_p;
  int32_t top_k;
  int no_prefix_cache, check, json, no_warmup, time_split, two_calls, unfused;
  demo_linear_engine linear;
} demo_args;

static const char *parse_text(const char *text, void *value) {
  *(const char **)value = text;
  return NULL;
}

static const char *parse_schedule(const char *text, void *value) {
  if (strcmp(text, "lpm") && strcmp(text, "fcfs")) return "lpm or fcfs";
  *(const char **)value = text;
  return NULL;
}

static const char *parse_layout(const char *text, void *value) {
  if (strcmp(text, "auto") && strcmp(text, "rows") && strcmp(text, "tiles"))
    return "auto, rows or tiles";
  *(const char **)value = text;
  return NULL;
}

static const char *parse_preset(const char *text, void *value) {
  demo_config c;
  if (demo_config_preset(text, &c)) return "tiny or llama-1b";
  *(const char **)value = text;
  return NULL;
}

static const char *parse_dtype(const char *text, void *value) {
  clpa_dtype d;
  if (clpa_dtype_parse(text, &d) != CLPA_OK || (d != CLPA_DTYPE_F32 && d != CLPA_DTYPE_F16))
    return "f32 or f16";
  *(clpa_dtype *)value = d;
  return NULL;
}

static const char *parse_linear(const char *text, void *value) {
  demo_linear_engine *e = value;
  if (strcmp(text, "auto") == 0) *e = DEMO_LINEAR_AUTO;
  else if (strcmp(text, "stream") == 0) *e = DEMO_LINEAR_STREAM;
  else if (strcmp(text, "mma") == 0) *e = DEMO_LINEAR_MMA;
  else if (strcmp(text, "gemm") == 0) *e = DEMO_LINEAR_GEMM;
  else if (strcmp(text, "gemv") == 0) *e = DEMO_LINEAR_GEMV;
  else if (strcmp(text, "clblast") == 0) *e = DEMO_LINEAR_CLBLAST;
  else return "auto, stream, mma, gemm, gemv or clblast";
  return NULL;
}

/* A finite float in [lo, hi]; lo itself excluded when open_lo. */
static const char *parse_float(const char *text, float *value, float lo, int open_lo, float hi) {
  char *end;
  const float v = strtof(text, &end);
  if (end == text || *end || !(v >= lo && v <= hi) || (open_lo && v == lo)) return "";
  *value = v;
  return NULL;
}

static const char *parse_temperature(const char *text, void *value) {
  return parse_float(text, value, 0.0f, 0, 1e4f) ? "a number from 0 (greedy) to 10000" : NULL;
}

static const char *parse_top_p(const char *text, void *value) {
  return parse_float(text, value, 0.0f, 1, 1.0f) ? "a number above 0 and at most 1" : NULL;
}

static const cli_cmd *g_cmd;

static int parse(int argc, char **argv, demo_args *a) {
  *a = (demo_args){.preset = "tiny", .schedule = "lpm", .requests = 24, .block_size = 16,
                   .max_running = 16, .token_budget = 512, .arrival_steps = 24, .max_wait = 64,
                   .seed = 1, .kv_dtype = CLPA_DTYPE_F16, .weight_dtype = CLPA_DTYPE_F32,
                   .top_p = 1.0f, .linear = DEMO_LINEAR_AUTO, .weight_layout = "auto"};
  const cli_opt opts[] = {
      {"preset", CLI_WORD, &a->preset, 0, 0, "NAME",
       "random-weight model: tiny (CPU, seconds) or\nllama-1b (Llama-3.2-1B's shape, for GPUs)",
       "tiny", parse_preset},
      {"model", CLI_WORD, &a->model, 0, 0, "FILE",
       "a Llama GGUF (f32, f16, bf16, q8_0, q4_0,\nq4_K, q5_K or q6_K tensors) instead of\nrandom weights", "none", parse_text},
      {"prompt", CLI_WORD, &a->prompt, 0, 0, "TEXT",
       "with --model: serve this text (tokenized by\nthe file's tokenizer) and print the answer\n"
       "instead of the synthetic workload", "none", parse_text},
      {"prompts", CLI_WORD, &a->prompts, 0, 0, "FILE",
       "with --model: serve every line of FILE (see\nbelow) with continuous batching; answers on\n"
       "stdout in the file's order, the summary on stderr", "none", parse_text},
      {"requests", CLI_INT, &a->requests, 1, 1 << 16, "N",
       "requests, chat turns included", NULL, NULL},
      {"output-min", CLI_INT, &a->output_min, 1, DEMO_MAX_TOKENS_LIMIT, "N",
       "shortest answer (tokens); given alone above\n--output-max's default, it raises it", "16",
       NULL},
      {"output-max", CLI_INT, &a->output_max, 1, DEMO_MAX_TOKENS_LIMIT, "N",
       "longest answer (tokens); given alone, it sets\n--output-min too; the answer's limit with\n"
       "--prompt, and --prompts' default max_tokens", "32", NULL},
      {"arrival-steps", CLI_INT, &a->arrival_steps, 0, 1 << 20, "N",
       "requests arrive over this many engine steps\n(0: all at once)", NULL, NULL},
      {"seed", CLI_U64, &a->seed, 0, 0, "N", "seed of the weights, the workload and sampling",
       NULL, NULL},
      {"temperature", CLI_WORD, &a->temperature, 0, 0, "T",
       "sample at temperature T on the host from the\nlogits (0: greedy, the device's argmax)", "0",
       parse_temperature},
      {"top-k", CLI_INT, &a->top_k, -1, 1 << 30, "K",
       "sample among the K likeliest tokens (0 or -1:\nall; nothing at --temperature 0)", NULL, NULL},
      {"top-p", CLI_WORD, &a->top_p, 0, 0, "P",
       "then among the likeliest whose probability\nsums to P (1: all; nothing at --temperature 0)",
       "1", parse_top_p},
      {"schedule", CLI_WORD, &a->schedule, 0, 0, "NAME",
       "lpm (longest matched prefix first, SGLang's\ncache-aware order) or fcfs", "lpm",
       parse_schedule},
      {"max-wait", CLI_INT, &a->max_wait, 1, 1 << 20, "N",
       "lpm: a request waiting this many steps goes\nfirst", NULL, NULL},
      {"no-prefix-cache", CLI_FLAG, &a->no_prefix_cache, 0, 0, NULL,
       "never match or cache prefixes (to compare)", NULL, NULL},
      {"blocks", CLI_INT, &a->blocks, 0, MAX_BLOCKS, "N",
       "KV cache blocks per layer; 0 sizes it from\nthe workload (a small value forces preemption)",
       NULL, NULL},
      {"block-size", CLI_INT, &a->block_size, 1, 256, "N", "tokens per block: a power of two, 1 to 256", NULL,
       NULL},
      {"kv-dtype", CLI_WORD, &a->kv_dtype, 0, 0, "NAME", "KV cache dtype: f16 or f32", "f16",
       parse_dtype},
      {"weight-dtype", CLI_WORD, &a->weight_dtype, 0, 0, "NAME", "weight dtype: f32 or f16",
       "f32", parse_dtype},
      {"weight-quant", CLI_WORD, &a->weight_quant, 0, 0, "NAME",
       "random models: store every layer's matrices\nand the LM head as ggml blocks (q8_0, q4_0,\n"
       "q4_K, q5_K or q6_K), quantized on the host", "none", parse_text},
      {"weight-layout", CLI_WORD, &a->weight_layout, 0, 0, "NAME",
       "how the device holds f16 matrices not in blocks:\nauto (the device's table), rows (row-major)\n"
       "or tiles (16 rows x 32, in gemv's load order)", "auto", parse_layout},
      {"linear", CLI_WORD, &a->linear, 0, 0, "NAME",
       "the linear layers' engine: auto (the device's\ntable by rows), stream (the weight-streaming\n"
       "kernel), mma (its tensor-core form, NVIDIA),\ngemm (the tiled tensor-core GEMM, NVIDIA),\ngemv (tensor cores for few rows, NVIDIA)\nor clblast (CLBlast's SGEMM)", "auto", parse_linear},
      {"max-running", CLI_INT, &a->max_running, 1, 4096, "N", "requests decoding at once", NULL,
       NULL},
      {"token-budget", CLI_INT, &a->token_budget, 16, 1 << 20, "N",
       "tokens per step: decodes, then prefill chunks", NULL, NULL},
      {"device", CLI_WORD, &a->device, 0, 0, "SPEC",
       "P:D or a name substring (else CLPA_DEVICE,\nelse the first GPU, else the first device)",
       "default", parse_text},
      {"no-warmup", CLI_FLAG, &a->no_warmup, 0, 0, NULL,
       "time the first launch of every kernel too (by\ndefault the workload is served once untimed\n"
       "first, so that the figures are a warm run's)", NULL, NULL},
      {"two-attention-calls", CLI_FLAG, &a->two_calls, 0, 0, NULL,
       "each layer's attention as a clpa_decode over the\nstep's decode rows and a clpa_prefill over its\n"
       "chunks (default: one clpa_prefill over all, decode\nrows first as one-token sequences)", NULL,
       NULL},
      {"unfused", CLI_FLAG, &a->unfused, 0, 0, NULL,
       "every op its own launch, as before the fusions\n(RoPE, then clpa_reshape_and_cache; ...), to\n"
       "time them against (the same tokens)", NULL, NULL},
      {"time-split", CLI_FLAG, &a->time_split, 0, 0, NULL,
       "split the device time between attention, GEMMs\nand the rest by a profiling event an op (two\n"
       "enqueues each, which slow the run down)", NULL, NULL},
      {"trace", CLI_WORD, &a->trace, 0, 0, "FILE",
       "write every op of the timed run to FILE, a JSON\nline each (its kernel, layer, host and device\n"
       "stamps) after a line a step; slows the run as\n--time-split does", "none", parse_text},
      {"check", CLI_FLAG, &a->check, 0, 0, NULL,
       "run every request again through the host\nreference engine and compare tokens and logits",
       NULL, NULL},
      {"json", CLI_FLAG, &a->json, 0, 0, NULL,
       "print one JSON line instead of the table\n(with --prompt or --prompts, one a request\n"
       "before it)", NULL, NULL},
      {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
  };
  static cli_cmd cmd;
  cmd = (cli_cmd){
      "clpa-demo",
      "A small LLM engine on OpenCL: continuous batching over clpa's KV manager, a\n"
      "paged KV cache with radix prefix sharing, clpa attention (prefill with prefix\n"
      "hits, decode), its own linear-layer kernels or CLBlast. Serves a seeded synthetic workload (shared\n"
      "system prompts, few-shot groups, multi-turn chats, unique prompts) and prints\n"
      "a summary.",
      opts,
      "JSON keys include op (\"demo\"), computed_tokens, cached_tokens, generated_tokens,\n"
      "tokens_per_s, hit_rate, ttft_p50_ms, tpot_p50_ms, peak_blocks, preemptions,\n"
      "attention_s, gemm_s (with --time-split), decode_step_ms, ops_decode_step and\n"
      "ops_mixed_step (commands enqueued a step), temperature and, with --check, check_ok.\n"
      "\n"
      "Sampling draws token n of request i from a hash of (--seed, i, n): a run\n"
      "repeats whatever the batching.\n"
      "\n"
      "--prompts FILE: when the file's first non-blank line starts with {, every line\n"
      "is a JSON object {\"prompt\": \"text\", \"max_tokens\": 64} (max_tokens optional,\n"
      "default --output-max; strings take JSON's escapes); otherwise every line is a\n"
      "prompt as it stands. Blank lines are skipped. Answers go to stdout in the\n"
      "file's order, one a line (backslash, newline and carriage return written \\\\,\n"
      "\\n and \\r; a refused request as [refused: why]), or with --json one object a\n"
      "line: op (\"answer\"), index, line, prompt_tokens, generated_tokens, text,\n"
      "finish_reason (stop, length, or refused with an error saying why); the\n"
      "summary (op \"demo\") goes to stderr.\n"
      "\n"
      "Exit status: 0; 1 when something fails, every request is refused (too long\n"
      "for the model's context or --blocks) or --check finds a difference; 2 for a\n"
      "bad command line or a malformed --prompts line (FILE:LINE:COLUMN says where).",
      clpa_version_string(),
  };
  g_cmd = &cmd;
  int rc = cli_parse(&cmd, argc, argv);
  if (rc != CLI_RUN) return rc;
  /* One bound given alone sets the other where the default would not do:
   * --output-max N alone is every answer N long; --output-min alone
   * raises the default maximum up to itself. */
  const int min_given = a->output_min != 0, max_given = a->output_max != 0;
  if (!max_given) a->output_max = a->output_min > OUTPUT_MAX ? a->output_min : OUTPUT_MAX;
  if (!min_given) a->output_min = max_given ? a->output_max : OUTPUT_MIN;
  if (a->output_max < a->output_min)
    return cli_error(&cmd, "--output-max %d is below --output-min %d", (int)a->output_max,
                     (int)a->output_min);
  if (a->top_k < 0) a->top_k = 0; /* -1: off, as vLLM's top_k -1 */
  if (a->prompt && !a->model)
    return cli_error(&cmd, "--prompt needs --model (the random models have no tokenizer)");
  if (a->prompts && !a->model)
    return cli_error(&cmd, "--prompts needs --model (the random models have no tokenizer)");
  if (a->prompt && a->prompts)
    return cli_error(&cmd, "--prompt and --prompts do not go together: one text, or a file of them");
  if (a->check && a->temperature > 0)
    return cli_error(&cmd, "--check compares every token with the reference's argmax, so it needs"
                     " greedy decoding: --temperature 0, not %g", (double)a->temperature);
  if (a->block_size & (a->block_size - 1))
    return cli_error(&cmd, "--block-size takes a power of two from 1 to 256, not %d", (int)a->block_size);
  if (a->weight_quant && a->model)
    return cli_error(&cmd, "--weight-quant is for the random models: --model keeps its file's forms");
  const demo_wfmt q = a->weight_quant ? demo_wfmt_of_name(a->weight_quant) : DEMO_W_COUNT;
  if (a->weight_quant && !demo_wfmt_is_block(q))
    return cli_error(&cmd, "--weight-quant %s: the forms are %s", a->weight_quant, DEMO_QUANT_TYPE_NAMES);
  return CLI_RUN;
}

/* Every request was refused (too long for the model's context or for the
 * KV cache): the run served nothing, which is a failure, not a summary of
 * zeros. Says why for the shortest request (needing the fewest positions
 * and blocks) and returns 1; returns 0 when something ran (requests
 * refused among others are counted in the summary). */
static int all_refused(const demo_engine *e, const demo_args *a, const demo_sched_config *sc,
                       int32_t context) {
  const demo_run_stats *st = demo_engine_stats(e);
  if (st->requests == 0 || st->refused < st->requests) return 0;
  int32_t count;
  const demo_result *res = demo_engine_results(e, &count);
  const demo_request *r = NULL;
  int64_t need = 0;
  for (int32_t i = 0; i < count; i++) {
    const demo_request *q = res[i].req;
    if (q && (!r || (int64_t)q->prompt_len + q->max_new_tokens < need))
      r = q, need = (int64_t)q->prompt_len + q->max_new_tokens;
  }
  const int64_t blocks = demo_request_kv_blocks(r, sc->block_size); /* r: requests > 0 */
  if (need > context && a->prompt)
    fprintf(stderr, "clpa-demo: --prompt (%d tokens) plus --output-max %d does not fit the model's "
            "context of %d tokens\n", (int)r->prompt_len, (int)r->max_new_tokens, (int)context);
  else if (need > context)
    fprintf(stderr, "clpa-demo: every request is longer than the model's context of %d tokens (the "
            "shortest: %d prompt + %d output tokens)\n", (int)context, (int)r->prompt_len,
            (int)r->max_new_tokens);
  else if (blocks > sc->num_blocks)
    fprintf(stderr, "clpa-demo: --blocks %d is too small for every request: the smallest needs %lld "
            "blocks (%lld tokens, %d a block)\n", (int)sc->num_blocks, (long long)blocks,
            (long long)demo_request_kv_tokens(r), (int)sc->block_size);
  else
    fprintf(stderr, "clpa-demo: every request was refused: none could be admitted into the %d "
            "blocks of the KV cache\n", (int)sc->num_blocks);
  return 1;
}

/* The prompts served as text (--prompt: one, --prompts: the file's), as
 * token ids, each with its output limit and its line in the file. */
typedef struct served {
  int32_t **ids, *lens, *max_new, *lines;
  int32_t n;
} served;

static void served_free(served *sv) {
  for (int32_t i = 0; sv->ids && i < sv->n; i++) free(sv->ids[i]);
  free(sv->ids), free(sv->lens), free(sv->max_new), free(sv->lines);
}

/* Tokenizes what --prompt or --prompts gives. Returns 0, or 1 after
 * saying which prompt failed. */
static int tokenize(const demo_tokenizer *tok, const demo_args *a, const demo_prompts *pf,
                    served *sv) {
  const int32_t n = a->prompt ? 1 : pf->count;
  sv->ids = calloc((size_t)n, sizeof *sv->ids);
  sv->lens = calloc((size_t)n, sizeof *sv->lens);
  sv->max_new = calloc((size_t)n, sizeof *sv->max_new);
  sv->lines = calloc((size_t)n, sizeof *sv->lines);
  if (!sv->ids || !sv->lens || !sv->max_new || !sv->lines) {
    fprintf(stderr, "clpa-demo: out of memory for %d prompts\n", (int)n);
    return 1;
  }
  sv->n = n;
  for (int32_t i = 0; i < n; i++) {
    const demo_prompt *q = a->prompt ? NULL : &pf->items[i];
    size_t len = 0;
    const clpa_status st = demo_tokenizer_encode(tok, q ? q->text : a->prompt,
                                                 q ? q->len : strlen(a->prompt),
                                                 demo_tokenizer_add_bos(tok), false, &sv->ids[i], &len);
    if (st != CLPA_OK || len == 0 || len > INT32_MAX / 2) {
      const char *why = st != CLPA_OK ? demo_last_error() : len ? "too long" : "no tokens";
      if (q)
        fprintf(stderr, "clpa-demo: %s:%d: %s\n", a->prompts, (int)q->line, why);
      else
        fprintf(stderr, "clpa-demo: --prompt: %s\n", why);
      return 1;
    }
    sv->lens[i] = (int32_t)len;
    sv->max_new[i] = q && q->max_tokens > 0 ? q->max_tokens : a->output_max;
    sv->lines[i] = q ? q->line : 0;
  }
  return 0;
}

/* Reads --prompts' file before anything starts. Returns CLI_RUN, or the
 * exit status after saying why: 2 for a malformed file, 1 when it cannot
 * be read. */
static int read_prompts(const demo_args *a, demo_prompts *pf) {
  const clpa_status st = demo_prompts_read(a->prompts, pf);
  if (st == CLPA_ERR_INVALID_ARG) return cli_error(g_cmd, "%s", demo_last_error());
  if (st != CLPA_OK) {
    fprintf(stderr, "clpa-demo: --prompts: %s\n", demo_last_error());
    return 1;
  }
  if (pf->count == 0) return cli_error(g_cmd, "%s: no prompts (every line is blank)", a->prompts);
  if (pf->count > 1 << 16)
    return cli_error(g_cmd, "%s: %d prompts, more than the %d the demo serves in one run",
                     a->prompts, (int)pf->count, 1 << 16);
  return CLI_RUN;
}

/* The run's workload: --prompt's or --prompts' requests (tokenized in
 * sv), else the synthetic one; *longest: the longest sequence a request
 * can reach (the cache's sizing). NULL when out of memory. */
static demo_workload *make_workload(const demo_args *a, const served *sv, const demo_config *mc,
                                    int32_t *longest) {
  *longest = 1;
  if (a->prompt || a->prompts) {
    for (int32_t i = 0; i < sv->n; i++) { /* longer than the model's context: refused anyway */
      const int64_t need = (int64_t)sv->lens[i] + sv->max_new[i];
      const int32_t fit = need < mc->max_positions ? (int32_t)need : mc->max_positions;
      *longest = fit > *longest ? fit : *longest;
    }
    return demo_workload_create_prompts((const int32_t *const *)sv->ids, sv->lens, sv->max_new,
                                        sv->n);
  }
  demo_workload_config wc;
  demo_workload_config_init(&wc, a->requests, mc->vocab);
  wc.output_min = a->output_min, wc.output_max = a->output_max, wc.seed = a->seed;
  wc.arrival_steps = a->arrival_steps;
  *longest = wc.system_len + wc.fewshot_len + wc.question_len + 4 * wc.turn_len + 4 * a->output_max;
  return demo_workload_create(&wc);
}

static double wall_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The warm-up: the same workload served once on an engine of its own (its
 * cache freed after), so that the timed run finds every program built and
 * every kernel launched once (PoCL compiles a kernel at its first launch,
 * CLBlast in every process). Nothing of it reaches the timed run but
 * that. */
static clpa_status warm_up(demo_model *m, const demo_args *a, const served *sv,
                           const demo_config *mc, const demo_sched_config *sc) {
  int32_t longest;
  demo_workload *w = make_workload(a, sv, mc, &longest);
  if (!w) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory for the workload");
  demo_sched_config c = *sc;
  c.keep_logits = 0;
  demo_engine *e = NULL;
  clpa_status st = demo_engine_create(m, w, &c, &e);
  if (st == CLPA_OK) st = demo_engine_run(e, NULL, NULL);
  demo_engine_destroy(e);
  demo_workload_destroy(w);
  return st;
}

int main(int argc, char **argv) {
  demo_args a;
  int rc = parse(argc, argv, &a);
  if (rc != CLI_RUN) return rc;
  demo_prompts pf = {0};
  if (a.prompts && (rc = read_prompts(&a, &pf)) != CLI_RUN) return rc;
  rc = 1;
  clpa_context *ctx = NULL;
  demo_model *m = NULL;
  demo_workload *w = NULL;
  demo_engine *e = NULL;
  demo_sampler *smp = NULL;
  FILE *trace = NULL;
  served sv = {0};
  clpa_context_config cc;
  clpa_context_config_init(&cc);
  cc.device = a.device, cc.profiling = 1; /* the copy bandwidth and --time-split use profiling events */
  cli_progress("clpa-demo: opening the device...");
  if (clpa_context_create(&cc, &ctx) != CLPA_OK) {
    cli_progress_end();
    fprintf(stderr, "clpa-demo: %s\n", clpa_last_error());
    demo_prompts_free(&pf);
    return 1;
  }
  clpa_device_info info;
  clpa_context_device_info(ctx, &info);
  clpa_status st;
  demo_gguf *g = NULL;
  demo_tokenizer *tok = NULL;
  demo_config mc;
  if (a.model) {
    cli_progress("clpa-demo: loading %s...", a.model);
    if (demo_gguf_open(a.model, &g) != CLPA_OK) {
      cli_progress_end();
      fprintf(stderr, "clpa-demo: %s\n", demo_last_error());
      goto out;
    }
    if (demo_tokenizer_create(g, &tok) != CLPA_OK) {
      cli_progress_end();
      fprintf(stderr, "clpa-demo: %s: tokenizer: %s\n", a.model, demo_last_error());
      goto out;
    }
    if ((st = demo_model_create_gguf(ctx, g, a.weight_dtype, &m)) != CLPA_OK) {
      cli_progress_end();
      fprintf(stderr, "clpa-demo: %s: %s\n", a.model, demo_last_error());
      goto out;
    }
    mc = *demo_model_config(m);
  } else {
    demo_config_preset(a.preset, &mc);
    cli_progress("clpa-demo: making the %s model (random weights, seed %llu)...", a.preset,
                 (unsigned long long)a.seed);
    const demo_wfmt q = a.weight_quant ? demo_wfmt_of_name(a.weight_quant) : DEMO_W_COUNT;
    if ((st = demo_model_create_random_quant(ctx, &mc, a.seed, a.weight_dtype, q, &m)) != CLPA_OK) {
      cli_progress_end();
      fprintf(stderr, "clpa-demo: model: %s\n", demo_last_error());
      goto out;
    }
  }
  demo_model_set_linear(m, a.linear);
  if (strcmp(a.weight_layout, "auto") &&
      (st = demo_model_set_weight_layout(m, strcmp(a.weight_layout, "tiles") == 0)) != CLPA_OK) {
    cli_progress_end();
    fprintf(stderr, "clpa-demo: --weight-layout %s: %s\n", a.weight_layout, demo_last_error());
    goto out;
  }
  demo_model_set_timing(m, a.time_split);
  demo_model_set_one_call(m, !a.two_calls);
  demo_model_set_fused(m, !a.unfused);
  /* The cache holds every running request's longest sequence, twice. */
  int32_t longest = 1;
  if ((a.prompt || a.prompts) && tokenize(tok, &a, &pf, &sv)) {
    cli_progress_end();
    goto out;
  }
  if (!(w = make_workload(&a, &sv, &mc, &longest))) goto out;
  if (a.temperature > 0) {
    demo_sampler_config scfg;
    demo_sampler_config_init(&scfg);
    scfg.temperature = a.temperature, scfg.top_k = a.top_k, scfg.top_p = a.top_p, scfg.seed = a.seed;
    if (!(smp = demo_sampler_create(&scfg, mc.vocab))) {
      cli_progress_end();
      fprintf(stderr, "clpa-demo: out of memory for the sampler\n");
      goto out;
    }
  }
  demo_sched_config sc;
  demo_sched_config_init(&sc);
  sc.block_size = a.block_size, sc.kv_dtype = a.kv_dtype, sc.max_running = a.max_running;
  sc.token_budget = a.token_budget, sc.lpm = strcmp(a.schedule, "lpm") == 0, sc.max_wait = a.max_wait;
  sc.prefix_cache = !a.no_prefix_cache, sc.keep_logits = a.check, sc.sampler = smp;
  if (tok) sc.eog = demo_tokenizer_eog(tok, &sc.n_eog);
  /* in 64 bits: --max-running 4096 by a long --output-max passes 2^31 */
  const int64_t sized =
      2 * (int64_t)a.max_running * (((int64_t)longest + a.block_size - 1) / a.block_size);
  if (!a.blocks && sized > MAX_BLOCKS) {
    cli_progress_end();
    rc = cli_error(g_cmd, "a KV cache sized from the workload (--max-running %d requests of up "
                   "to %d tokens, twice) takes %lld blocks of %d, more than %d: give --blocks",
                   (int)a.max_running, (int)longest, (long long)sized, (int)a.block_size,
                   MAX_BLOCKS);
    goto out;
  }
  sc.num_blocks = a.blocks ? a.blocks : (int32_t)sized;
  clpa_program_stats ps0 = {0}, ps1 = {0};
  double warmup_s = -1;
  unsigned warmup_built = 0;
  /* first, its cache freed before the timed engine's is made: one cache on the device at a time */
  if (!a.no_warmup) {
    cli_progress("clpa-demo: warming up: serving the workload once, untimed...");
    clpa_context_program_stats(ctx, &ps0);
    const double t0 = wall_s();
    if ((st = warm_up(m, &a, &sv, &mc, &sc)) != CLPA_OK) {
      cli_progress_end();
      fprintf(stderr, "clpa-demo: warm-up: %s\n", demo_last_error());
      goto out;
    }
    warmup_s = wall_s() - t0;
    clpa_context_program_stats(ctx, &ps1);
    warmup_built = ps1.built_from_source - ps0.built_from_source;
    cli_progress_end();
  }
  cli_progress("clpa-demo: building kernels and the KV cache (fast with a warm kernel cache)...");
  if ((st = demo_engine_create(m, w, &sc, &e)) != CLPA_OK) {
    cli_progress_end();
    fprintf(stderr, "clpa-demo: engine: %s\n", demo_last_error());
    goto out;
  }
  cli_progress_end();
  clpa_context_program_stats(ctx, &ps0);
  if (a.trace && !(trace = fopen(a.trace, "w"))) {
    fprintf(stderr, "clpa-demo: --trace: cannot write %s\n", a.trace);
    goto out;
  }
  if (trace && !demo_model_set_trace(m, trace)) {
    fprintf(stderr, "clpa-demo: --trace: the device's queue takes no profiling events\n");
    goto out;
  }
  cli_progress_begin();
  st = demo_engine_run(e, demo_report_progress, NULL);
  cli_progress_end();
  demo_model_set_trace(m, NULL);
  if (trace) {
    const int bad = ferror(trace) | fclose(trace);
    trace = NULL;
    if (bad) {
      fprintf(stderr, "clpa-demo: --trace: error writing %s\n", a.trace);
      goto out;
    }
  }
  clpa_context_program_stats(ctx, &ps1);
  if (st != CLPA_OK) {
    fprintf(stderr, "clpa-demo: %s\n", demo_last_error());
    goto out;
  }
  if (a.prompts || (a.prompt && a.json)) { /* every request's answer, the refused ones included */
    const demo_answers_info ai = {tok, a.prompts ? sv.lines : NULL, mc.max_positions,
                                  sc.num_blocks, sc.block_size};
    if (demo_report_answers(stdout, e, &ai, a.json)) {
      fprintf(stderr, "clpa-demo: out of memory writing the answers\n");
      goto out;
    }
  }
  if (all_refused(e, &a, &sc, mc.max_positions)) goto out;
  char verdict[512] = "";
  int check_ok = 1;
  if (a.check) {
    cli_progress("clpa-demo: checking every request against the host reference engine...");
    const double tol = a.kv_dtype == CLPA_DTYPE_F32 && a.weight_dtype == CLPA_DTYPE_F32 ? 2e-3 : 2e-2;
    check_ok = demo_check(m, e, tol, verdict, sizeof verdict);
    cli_progress_end();
  }
  char linear_rule[192], weight_forms[96];
  demo_model_weight_forms(m, weight_forms, sizeof weight_forms);
  demo_model_linear_rule(m, linear_rule, sizeof linear_rule);
  const double copy_gbps = demo_model_copy_gbps(m); /* after the run: its buffers are idle */
  demo_report_info ri = {info.name,   clpa_lanes_name(info.lanes),
                         a.model ? a.model : a.preset, a.schedule,
                         sc.prefix_cache, clpa_dtype_name(a.kv_dtype),
                         weight_forms, sc.num_blocks,
                         sc.block_size, a.check ? verdict : NULL,
                         check_ok, ps1.built_from_source - ps0.built_from_source,
                         ps1.loaded_from_disk - ps0.loaded_from_disk,
                         ps1.build_seconds - ps0.build_seconds,
                         a.temperature, a.top_k, a.top_p, a.seed,
                         linear_rule, copy_gbps, demo_model_weight_bytes(m),
                         2.0 * mc.layers * mc.kv_heads * mc.head_size *
                             (double)clpa_dtype_size(a.kv_dtype),
                         warmup_s, warmup_built, a.two_calls ? 2 : 1, mc.layers};
  if (a.prompt && !a.json) { /* the answer, as text */
    int32_t count;
    const demo_result *res = demo_engine_results(e, &count);
    size_t tl = 0;
    char *text = count > 0 ? demo_report_text(tok, res[0].generated, res[0].num_generated, &tl) : NULL;
    if (text) {
      printf("%s", a.prompt);
      fwrite(text, 1, tl, stdout);
      printf("\n\n");
    }
    free(text);
  }
  /* With --prompts, stdout holds the answers alone (as llama.cpp's tools
   * keep their logs on stderr). */
  demo_report_summary(a.prompts ? stderr : stdout, e, &ri, a.json);
  rc = check_ok ? 0 : 1;
out:
  if (trace) fclose(trace);
  demo_engine_destroy(e);
  demo_sampler_destroy(smp);
  demo_workload_destroy(w);
  served_free(&sv);
  demo_prompts_free(&pf);
  demo_model_destroy(m);
  demo_tokenizer_destroy(tok);
  demo_gguf_close(g);
  clpa_context_destroy(ctx);
  return rc;
}
