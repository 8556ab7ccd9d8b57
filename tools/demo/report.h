/*
 * report.h — what clpa-demo prints: a live progress line on a terminal,
 * and at the end a summary table (or one JSON line).
 */
#ifndef CLPA_DEMO_REPORT_H
#define CLPA_DEMO_REPORT_H

#include <stdio.h>

#include "scheduler.h"

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
} demo_report_info;

/* The progress line (call after each step; prints only on a terminal). */
void demo_report_progress(const demo_engine *e, void *user);
/* The summary: a table on out, or one JSON line when json. */
void demo_report_summary(FILE *out, const demo_engine *e, const demo_report_info *info, int json);

#endif
