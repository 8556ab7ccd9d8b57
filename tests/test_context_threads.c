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

/* One cold process; returns its wait status. */
static int round_in_child(void) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(300); /* a hang fails the round instead of the whole test timing out */
    pthread_t t[THREADS];
    int good[THREADS];
    for (int i = 0; i < THREADS; i++)
      if (pthread_create(&t[i], NULL, worker, &good[i]) != 0) _exit(3);
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

int main(void) {
  const char *tmp = getenv("CLPA_TEST_TMP");
  snprintf(cache_dir, sizeof cache_dir, "%s/clpa-threads-test-%ld", tmp ? tmp : "/tmp",
           (long)getpid());
  unsetenv("CLPA_NO_BINARY_CACHE");
  for (int r = 0; r < ROUNDS; r++) {
    int st = round_in_child();
    ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
       "round %d: %d threads create contexts and run kernels at once (%s %d)", r, THREADS,
       st >= 0 && WIFSIGNALED(st) ? "signal" : "exit",
       st < 0 ? -1 : WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  }
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
  if (system(cmd) != 0) diag("could not remove %s", cache_dir);
  return done_testing();
}
