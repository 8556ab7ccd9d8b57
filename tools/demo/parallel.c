/* parallel.c — demo_parallel_for on POSIX threads (parallel.h). */
#include "parallel.h"

#include <pthread.h>
#include <unistd.h>

typedef struct part {
  void (*fn)(void *, int, size_t, size_t);
  void *arg;
  int index;
  size_t lo, hi;
} part;

static void *run_part(void *p) {
  const part *q = p;
  q->fn(q->arg, q->index, q->lo, q->hi);
  return NULL;
}

int demo_parallel_for(size_t n, size_t grain, void (*fn)(void *arg, int part, size_t lo, size_t hi),
                      void *arg) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  size_t parts = cpus < 1 ? 1 : cpus > DEMO_PARALLEL_MAX ? DEMO_PARALLEL_MAX : (size_t)cpus;
  const size_t most = grain ? n / grain : n; /* parts of at least grain */
  if (parts > most) parts = most;
  if (parts < 1) parts = 1;
  part p[DEMO_PARALLEL_MAX];
  pthread_t tid[DEMO_PARALLEL_MAX];
  int started[DEMO_PARALLEL_MAX] = {0};
  for (size_t t = 0; t < parts; t++) {
    p[t] = (part){fn, arg, (int)t, n / parts * t + (t < n % parts ? t : n % parts), 0};
    p[t].hi = p[t].lo + n / parts + (t < n % parts);
  }
  for (size_t t = 1; t < parts; t++) {
    started[t] = pthread_create(&tid[t], NULL, run_part, &p[t]) == 0;
    if (!started[t]) run_part(&p[t]); /* no thread: here */
  }
  run_part(&p[0]);
  for (size_t t = 1; t < parts; t++)
    if (started[t]) pthread_join(tid[t], NULL);
  return (int)parts;
}
