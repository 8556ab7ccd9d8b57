/*
 * The program cache: the same key gives the same program and builds once;
 * a second process loads the program from the disk cache; a corrupt or
 * truncated cache file is rejected, rebuilt and rewritten; the cache can be
 * turned off by config and by CLPA_NO_BINARY_CACHE=1; a broken build says
 * CLPA_ERR_BUILD with the log.
 *
 * Each "process run" is a forked child that creates its own context, so
 * nothing is shared in memory; the parent touches OpenCL only after the
 * forks.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clpa.h"
#include "tap.h"

static char cache_dir[4096];

/* Runs one "process": build the smoke program, report the stats. */
static int run_child(int binary_cache, clpa_program_stats *out) {
  int fd[2];
  if (pipe(fd) != 0) return 0;
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    clpa_context_config cfg;
    clpa_context_config_init(&cfg);
    cfg.cache_dir = cache_dir;
    cfg.binary_cache = binary_cache;
    clpa_context *ctx;
    clpa_program_stats st = {0};
    int good = clpa_context_create(&cfg, &ctx) == CLPA_OK && clpa_smoke_test(ctx, 1000) == CLPA_OK &&
               clpa_context_program_stats(ctx, &st) == CLPA_OK;
    if (!good) fprintf(stderr, "child: %s\n", clpa_last_error());
    clpa_context_destroy(ctx);
    if (write(fd[1], &st, sizeof st) != (ssize_t)sizeof st) good = 0;
    _exit(good ? 0 : 1);
  }
  close(fd[1]);
  ssize_t got = read(fd[0], out, sizeof *out);
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return got == (ssize_t)sizeof *out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Path of the one cache file, or "" if there is none. */
static int cache_files(char *path, size_t cap) {
  DIR *d = opendir(cache_dir);
  int n = 0;
  path[0] = '\0';
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strncmp(e->d_name, "clpa-", 5) == 0) {
      n++;
      snprintf(path, cap, "%s/%s", cache_dir, e->d_name);
    }
  closedir(d);
  return n;
}

static void rm_cache(void) {
  char path[8192];
  while (cache_files(path, sizeof path) > 0) remove(path);
}

static void test_disk(void) {
  clpa_program_stats s1, s2, s3, s4, s5;
  char path[8192];
  unsetenv("CLPA_NO_BINARY_CACHE");
  rm_cache();
  ok(run_child(1, &s1) && s1.built_from_source == 1 && s1.loaded_from_disk == 0,
     "first process builds from source");
  ok(cache_files(path, sizeof path) == 1, "one cache file written: %s", path);
  ok(run_child(1, &s2) && s2.loaded_from_disk == 1 && s2.built_from_source == 0,
     "second process loads the program from the disk cache");
  diag("smoke program: built in %.4f s, loaded from disk in %.4f s", s1.build_seconds,
       s2.build_seconds);

  /* Corrupt the middle of the file: rejected, rebuilt, rewritten. */
  FILE *f = fopen(path, "r+b");
  long size = 0;
  if (f) {
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, size / 2, SEEK_SET);
    unsigned char junk[16];
    memset(junk, 0xA5, sizeof junk);
    fwrite(junk, 1, sizeof junk, f);
    fclose(f);
  }
  ok(size > 32 && run_child(1, &s3) && s3.disk_rejected == 1 && s3.built_from_source == 1,
     "a corrupted cache file is rejected and the program rebuilt");
  ok(run_child(1, &s4) && s4.loaded_from_disk == 1, "the rebuilt program was cached again");

  /* A truncated file. */
  ok(truncate(path, size / 3) == 0 && run_child(1, &s5) && s5.disk_rejected == 1 &&
         s5.built_from_source == 1,
     "a truncated cache file is rejected and rebuilt");

  rm_cache();
  ok(run_child(0, &s1) && s1.built_from_source == 1 && cache_files(path, sizeof path) == 0,
     "binary_cache = 0 writes no file");
  setenv("CLPA_NO_BINARY_CACHE", "1", 1);
  ok(run_child(1, &s1) && s1.built_from_source == 1 && cache_files(path, sizeof path) == 0,
     "CLPA_NO_BINARY_CACHE=1 writes no file");
  unsetenv("CLPA_NO_BINARY_CACHE");
  rm_cache();
}

static void test_memory(void) {
  clpa_context_config cfg;
  clpa_context_config_init(&cfg);
  cfg.binary_cache = 0;
  clpa_context *ctx;
  if (!ok(clpa_context_create(&cfg, &ctx) == CLPA_OK, "context")) return;
  cl_program a, b, c;
  clpa_program_stats st;
  ok(clpa_program_get(ctx, "smoke", "-DX=1", &a) == CLPA_OK &&
         clpa_program_get(ctx, "smoke", "-DX=1", &b) == CLPA_OK && a == b,
     "same family and options give the same program");
  ok(clpa_program_get(ctx, "smoke", "-DX=2", &c) == CLPA_OK && c != a,
     "other options give another program");
  clpa_context_program_stats(ctx, &st);
  ok(st.built_from_source == 2 && st.memory_hits == 1, "built twice (%u), one memory hit (%u)",
     st.built_from_source, st.memory_hits);
  clpa_status s = clpa_program_get(ctx, "smoke", "-DCLPA_SMOKE_BREAK", &c);
  ok(s == CLPA_ERR_BUILD && strstr(clpa_context_last_error(ctx), "deliberately broken") &&
         strstr(clpa_context_last_error(ctx), "build log"),
     "a failed build says CLPA_ERR_BUILD and carries the log");
  diag("%.300s", clpa_context_last_error(ctx));
  /* regress_options_define_with_space: "-D name" was cut in two by the sort
   * (CL_INVALID_BUILD_OPTIONS: "-D -DCLPA_LANES=1 CLPA_SMOKE_BREAK"). */
  s = clpa_program_get(ctx, "smoke", "-D CLPA_SMOKE_BREAK", &c);
  ok(s == CLPA_ERR_BUILD && strstr(clpa_context_last_error(ctx), "deliberately broken"),
     "-D CLPA_SMOKE_BREAK (a space after -D) defines it: %s", clpa_status_name(s));
  s = clpa_program_get(ctx, "smoke", "-D X=1  -D\tY=2", &b);
  ok(s == CLPA_OK && clpa_program_get(ctx, "smoke", "-DY=2 -DX=1", &c) == CLPA_OK && b == c,
     "-D X=1 -D Y=2 builds, and is the program of -DY=2 -DX=1: %s", clpa_status_name(s));
  ok(clpa_smoke_test(ctx, 10) == CLPA_OK, "the context still works after a failed build");
  clpa_context_destroy(ctx);
}

int main(void) {
  const char *tmp = getenv("CLPA_TEST_TMP");
  snprintf(cache_dir, sizeof cache_dir, "%s/clpa-cache-test-%ld", tmp ? tmp : "/tmp",
           (long)getpid());
  test_disk();
  rmdir(cache_dir);
  test_memory();
  return done_testing();
}
