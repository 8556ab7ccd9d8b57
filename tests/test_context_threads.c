/*
 * regress_concurrent_context_create: several threads create contexts at
 * once in a fresh process. PoCL sets its devices up lazily on the first
 * clGetPlatformIDs/clGetDeviceIDs, and two threads there at once crashed
 * it in 5 of 6 runs, until clpa serialised enumeration and context/queue
 * creation. Each round is a forked child (so the implementation starts
 * cold), whose threads create a context, list devices, build or load the
 * smoke program through one shared binary cache directory, run it and
 * destroy the context. A crash, a hang (alarm) or any failed call fails the
 * round.
 *
 * regress_parallel_contexts_program_options: threads with a context each
 * look up programs at once (the memory cache: the options are put in
 * canonical order at every lookup). That used strtok, whose state is one
 * for the process, so one thread's words ran into another's buffer: heap
 * corruption ("free(): invalid next size") or a program of the wrong
 * options. Each thread's options differ; every lookup must give back the
 * thread's first program.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clpa.h"
#include "tap.h"

#define THREADS 4
#define ROUNDS 5

static char cache_dir[4096];

/* Under AddressSanitizer: PoCL set up in a thread other than main leaves
 * that thread's alternate signal stack so that ASan's thread teardown
 * fails ("unable to unmap", CHECK failed) — with plain OpenCL calls too, no
 * clpa involved. ASan reads this hook at start-up; other builds ignore it. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "use_sigaltstack=0"; }

static void *worker(void *arg) {
  int *good = arg;
  clpa_context_config cfg;
  clpa_context_config_init(&cfg);
  cfg.cache_dir = cache_dir;
  clpa_context *ctx = NULL;
  size_t n = 0;
  *good = clpa_context_create(&cfg, &ctx) == CLPA_OK;
  if (*good) *good = clpa_devices_list(NULL, 0, &n) == CLPA_OK && n > 0;
  if (*good) *good = clpa_smoke_test(ctx, 4096) == CLPA_OK;
  if (!*good) fprintf(stderr, "thread: %s\n", clpa_last_error());
  clpa_context_destroy(ctx);
  return NULL;
}

/* One cold process whose threads run fn (given the thread's index, it
 * leaves 1 for success); returns its wait status. */
static int round_in_child(void *(*fn)(void *)) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(300); /* a hang fails the round instead of the whole test timing out */
    pthread_t t[THREADS];
    int good[THREADS];
    for (int i = 0; i < THREADS; i++) {
      good[i] = i;
      if (pthread_create(&t[i], NULL, fn, &good[i]) != 0) _exit(3);
    }
    int all = 1;
    for (int i = 0; i < THREADS; i++) {
      pthread_join(t[i], NULL);
      all &= good[i];
    }
    _exit(all ? 0 : 1);
  }
  int status = -1;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return status;
}

enum { LOOKUPS = 100000 };

static void *lookup_worker(void *arg) {
  static const char *const options[THREADS] = {
      "-DA_ONE=1 -DA_TWO=2 -DA_THREE=3 -DA_FOUR=4 -DA_FIVE=5", "-DB_ONE=1 -DB_TWO=2 -DB_THREE=3",
      "-DC_ONE=1 -DC_TWO=2 -DC_THREE=3 -DC_FOUR=4", "-DD_ONE=1 -DD_TWO=2"};
  int *good = arg;
  const char *opts = options[*good]; /* in: the thread's index */
  clpa_context_config cfg;
  clpa_context_config_init(&cfg);
  cfg.binary_cache = 0;
  clpa_context *ctx = NULL;
  cl_program first = NULL, p = NULL;
  clpa_status st = clpa_context_create(&cfg, &ctx);
  if (st == CLPA_OK) st = clpa_program_get(ctx, "smoke", opts, &first);
  *good = st == CLPA_OK;
  int k = 0;
  for (; *good && k < LOOKUPS; k++)
    *good = (st = clpa_program_get(ctx, "smoke", opts, &p)) == CLPA_OK && p == first;
  if (!*good)
    fprintf(stderr, "thread (%s), lookup %d: %s\n", opts, k,
            st != CLPA_OK ? clpa_last_error() : "another program than the first");
  clpa_context_destroy(ctx);
  return NULL;
}

/* A round passes when its process exited 0; says how it ended. */
static void ok_round(int st, const char *what) {
  ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s (%s %d)", what,
     st >= 0 && WIFSIGNALED(st) ? "signal" : "exit",
     st < 0 ? -1 : WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

int main(void) {
  const char *tmp = getenv("CLPA_TEST_TMP");
  snprintf(cache_dir, sizeof cache_dir, "%s/clpa-threads-test-%ld", tmp ? tmp : "/tmp",
           (long)getpid());
  unsetenv("CLPA_NO_BINARY_CACHE");
  char what[128];
  for (int r = 0; r < ROUNDS; r++) {
    snprintf(what, sizeof what, "round %d: %d threads create contexts and run kernels at once",
             r, THREADS);
    ok_round(round_in_child(worker), what);
  }
  snprintf(what, sizeof what, "%d threads, a context each, look up %d programs at once",
           THREADS, LOOKUPS);
  ok_round(round_in_child(lookup_worker), what);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
  if (system(cmd) != 0) diag("could not remove %s", cache_dir);
  return done_testing();
}
