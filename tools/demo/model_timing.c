/*
 * model_timing.c — where the time of one engine step goes: the profiling
 * events model_step.c takes for its ops, summed by kind (attention, GEMM,
 * other), or written op by op to a trace file. The events live in the
 * model (model_internal.h) from one demo_model_event to the step's
 * demo_model_events_clear; model.c frees the array with the model.
 */
#include <math.h>
#include <stdlib.h>

#include "model_internal.h"
#include "tool_cli.h"

/* Seconds since the step began (model_internal.h) */
double demo_model_step_clock(const demo_model *m) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - m->step_t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - m->step_t0.tv_nsec);
}

/* Where the next op's event goes (NULL when the queue does not profile:
 * then no events are kept). With profiling, a marker goes on the queue
 * first: the op's time is from the marker's end to the end of its event,
 * so an op of several kernels (a CLBlast GEMM with its padding kernels,
 * decode v2 with its reduce) counts whole, and idle time before it (the
 * host still enqueueing) does not. A program built on first use inside
 * the op does count: time warm steps. When tracing, no marker: the op's
 * own event stamps are written as they are (an op of several kernels shows
 * its last one's), and the trace shows the queue's gaps rather than hiding
 * them. */
cl_event *demo_model_event(demo_model *m, int kind, const char *name) {
  if (!m->profiling) return NULL;
  if (m->n_ev == m->cap_ev) {
    int cap = m->cap_ev ? 2 * m->cap_ev : 256;
    timed_event *p = realloc(m->ev, (size_t)cap * sizeof *p);
    if (!p) return NULL; /* not timed, still run */
    m->ev = p, m->cap_ev = cap;
  }
  timed_event *t = &m->ev[m->n_ev++];
  t->ev = t->start = NULL;
  t->kind = kind, t->name = name, t->layer = m->cur_layer;
  t->host_s = m->trace ? demo_model_step_clock(m) : 0;
  if (!m->trace && clEnqueueMarkerWithWaitList(m->queue, 0, NULL, &t->start) != CL_SUCCESS)
    t->start = NULL;
  return &t->ev;
}

static int event_time(cl_event ev, cl_profiling_info what, cl_ulong *t) {
  return ev && clGetEventProfilingInfo(ev, what, sizeof *t, t, NULL) == CL_SUCCESS;
}

/* Sums the step's ops by kind (demo_model_event says how each is timed). On the
 * in-order queue an op cannot start before the op before it ended, so
 * that end bounds its start: PoCL 3.1 stamps a marker's end when it
 * reaches the marker, before the kernels ahead of it have finished, which
 * charged every GEMM before an attention call to attention (89.8 % of the
 * tiny demo's device time, where perf showed 3 % in attention kernels). */
void demo_model_times(demo_model *m, demo_times *t) {
  double sum[3] = {0, 0, 0};
  cl_ulong prev_end = 0;
  for (int i = 0; i < m->n_ev; i++) {
    cl_ulong from, end;
    if (!event_time(m->ev[i].ev, CL_PROFILING_COMMAND_END, &end)) continue;
    if (!event_time(m->ev[i].start, CL_PROFILING_COMMAND_END, &from) &&
        !event_time(m->ev[i].ev, CL_PROFILING_COMMAND_START, &from))
      continue;
    if (from < prev_end) from = prev_end;
    if (end > from) sum[m->ev[i].kind] += (double)(end - from) * 1e-9;
    if (end > prev_end) prev_end = end;
  }
  if (t) t->attention_s = sum[TIME_ATTN], t->gemm_s = sum[TIME_GEMM], t->other_s = sum[TIME_OTHER];
}

/* One line for the step, then one an op, times in µs: the host's (from the
 * step's start) and the device's four stamps (from the first op's queued
 * stamp). An op whose stamps cannot be read is written with nulls. */
void demo_model_trace_step(demo_model *m, int32_t T, int32_t S, int32_t nd, double enqueue_s) {
  static const char *const kinds[3] = {"attention", "gemm", "other"};
  static const cl_profiling_info what[4] = {CL_PROFILING_COMMAND_QUEUED, CL_PROFILING_COMMAND_SUBMIT,
                                            CL_PROFILING_COMMAND_START, CL_PROFILING_COMMAND_END};
  static const char *const keys[4] = {"queued_us", "submit_us", "start_us", "end_us"};
  if (!m->trace) return;
  const int64_t step = m->trace_step++;
  cli_json j;
  cli_json_begin(&j, m->trace);
  cli_json_int(&j, "step", step);
  cli_json_int(&j, "tokens", T);
  cli_json_int(&j, "seqs", S);
  cli_json_int(&j, "decode_seqs", nd);
  cli_json_int(&j, "ops", m->n_ev);
  cli_json_num(&j, "host_enqueue_us", enqueue_s * 1e6, 1);
  cli_json_num(&j, "host_wall_us", demo_model_step_clock(m) * 1e6, 1);
  cli_json_end(&j);
  cl_ulong base = 0;
  if (m->n_ev > 0 && !event_time(m->ev[0].ev, what[0], &base)) base = 0;
  for (int i = 0; i < m->n_ev; i++) {
    const timed_event *t = &m->ev[i];
    cli_json_begin(&j, m->trace);
    cli_json_int(&j, "step", step);
    cli_json_int(&j, "op", i);
    cli_json_int(&j, "layer", t->layer);
    cli_json_str(&j, "kind", kinds[t->kind]);
    cli_json_str(&j, "name", t->name ? t->name : "");
    cli_json_num(&j, "host_us", t->host_s * 1e6, 1);
    for (int k = 0; k < 4; k++) {
      cl_ulong v;
      const int got = base && event_time(t->ev, what[k], &v) && v >= base;
      cli_json_num(&j, keys[k], got ? (double)(v - base) * 1e-3 : NAN, 3); /* NaN: null */
    }
    cli_json_end(&j);
  }
}

void demo_model_events_clear(demo_model *m) {
  for (int i = 0; i < m->n_ev; i++) {
    if (m->ev[i].ev) clReleaseEvent(m->ev[i].ev);
    if (m->ev[i].start) clReleaseEvent(m->ev[i].start);
  }
  m->n_ev = 0;
}

void demo_model_events_free(demo_model *m) {
  demo_model_events_clear(m);
  free(m->ev);
  m->ev = NULL, m->cap_ev = 0;
}
