/*
 * report.h — what clpa-demo prints: a live progress line on a terminal,
 * at the end a summary table (or one JSON line), and with --prompts each
 * request's answer.
 */
#ifndef CLPA_DEMO_REPORT_H
#define CLPA_DEMO_REPORT_H

#include <stdio.h>

#include "scheduler.h"
#include "tokenizer.h"

typedef struct demo_report_info {
  const char *device, *lanes, *model, *schedule;
  int prefix_cache;
  const char *kv_dtype, *weight_dtype;
  int32_t num_blocks, block_size;
  const char *check; /* NULL: no check; else its verdict line */
  int check_ok;
  /* clpa's programs that the run itself got on first use (built from
   * source, loaded from the binary cache) and the wall time that took:
   * inside the run's times, and its device time where an op waited on a
   * build (a cold kernel cache). */
  unsigned programs_built, programs_loaded;
  double build_s;
  /* sampling: temperature 0 is greedy */
  float temperature;
  int32_t top_k;
  float top_p;
  uint64_t seed;
  /* The step floor: the weights and a decode step's K/V read once at the
   * copy bandwidth measured in the same run (0: not measured). */
  const char *linear;        /* the linear layers' engines, in words */
  double copy_gbps, weight_bytes, kv_bytes_per_token; /* K and V of every layer */
  /* The warm-up: the workload served once before the timed run, so that
   * every kernel is built and launched once outside it (-1: none). */
  double warmup_s;
  unsigned warmup_built; /* clpa's programs it built from source */
  int attention_calls;   /* a layer's attention calls in a mixed step: 1 or 2 */
  int32_t layers;        /* the model's, for the ops a layer */
} demo_report_info;

/* The progress line (call after each step; prints only on a terminal). */
void demo_report_progress(const demo_engine *e, void *user);
/* The summary: a table on out, or one JSON line when json. */
void demo_report_summary(FILE *out, const demo_engine *e, const demo_report_info *info, int json);

/* The text of n generated ids: their pieces one after another, as they
 * would stream (demo_tokenizer_decode would drop the space that encoding
 * puts in front of a prompt, but an answer's first space is its own).
 * An id the tokenizer does not have (a model whose vocabulary is larger
 * than its tokenizer's) adds nothing. A malloc'd, NUL-terminated string
 * of *len bytes (free() it), or NULL when out of memory. */
char *demo_report_text(const demo_tokenizer *tok, const int32_t *ids, int32_t n, size_t *len);

/* What the answers need besides the engine's results. */
typedef struct demo_answers_info {
  const demo_tokenizer *tok;
  const int32_t *lines;  /* [requests]: request i's line in the file, or NULL */
  int32_t context;       /* the model's positions */
  int32_t num_blocks, block_size;
} demo_answers_info;

/* Every request's answer on out, in request order, whatever order they
 * finished in. Plain: one line each, its text with "\", newline and
 * carriage return written \\, \n and \r so that line i is answer i, or
 * "[refused: why]". json: one object a line with index, line,
 * prompt_tokens, generated_tokens, text, finish_reason ("stop": the end
 * token; "length": max_tokens; "refused", with "error" saying why).
 * Returns 0, or -1 when out of memory (the rest is not printed). */
int demo_report_answers(FILE *out, const demo_engine *e, const demo_answers_info *in, int json);

#endif
