/*
 * model_timing.c — where the time of one engine step goes: the profiling
 * events model_step.c takes for its ops, summed by kind (attention, GEMM,
 * other). The events live in the model (model_internal.h) from one
 * demo_model_event to the step's demo_model_events_clear; model.c frees
 * the array with the model.
 */
#include <stdlib.h>

#include "model_internal.h"

/* Where the next op's event goes (NULL when the queue does not profile:
 * then no events are kept). With profiling, a marker goes on the queue
 * first: the op's time is from the marker's end to the end of its event,
 * so an op of several kernels (a CLBlast GEMM with its padding kernels,
 * decode v2 with its reduce) counts whole, and idle time before it (the
 * host still enqueueing) does not. A program built on first use inside
 * the op does count: time warm steps. */
cl_event *demo_model_event(demo_model *m, int kind) {
  if (!m->profiling) return NULL;
  if (m->n_ev == m->cap_ev) {
    int cap = m->cap_ev ? 2 * m->cap_ev : 256;
    timed_event *p = realloc(m->ev, (size_t)cap * sizeof *p);
    if (!p) return NULL; /* not timed, still run */
    m->ev = p, m->cap_ev = cap;
  }
  timed_event *t = &m->ev[m->n_ev++];
  t->ev = t->start = NULL;
  t->kind = kind;
  if (clEnqueueMarkerWithWaitList(m->queue, 0, NULL, &t->start) != CL_SUCCESS) t->start = NULL;
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
