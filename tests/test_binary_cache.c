/*
 * The disk cache of program binaries against a hostile or broken cache
 * directory, and its size cap.
 *
 * regress_binary_cache_trusts_only_own_files: a program binary is native
 * code on PoCL, and without HOME the cache used to be a fixed directory
 * under /tmp whose files were loaded without any check. Each case here
 * plants something in place of a good cache file (a FIFO, which used to
 * hang every process in fopen; a symlink; a file of another user; a
 * group/world-writable file; a truncated or empty file) or spoils the
 * directory (writable by others, owned by another user, not writable,
 * the per-user /tmp fallback) and checks that the next context builds from
 * source, runs the smoke kernel correctly, does not hang (alarm), and
 * replaces the bad file or says it could not write (disk_write_failed).
 *
 * regress_binary_cache_is_bounded: the directory used to grow without
 * end; after each write it is pruned to cache_max_bytes, least recently
 * used first (a load refreshes a file), abandoned temporary files go,
 * other files stay.
 *
 * regress_binary_cache_long_path, regress_binary_cache_multi_device and
 * regress_binary_cache_key_long_strings: see the functions that test them.
 *
 * Other owners need root (CI runs as root): files and directories are
 * chowned to uid 65534; as another user those checks are skipped.
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clpa.h"
#include "tap.h"

static char base[2048];
static int is_root;

typedef struct run_result {
  int smoke_ok;
  clpa_program_stats st;
} run_result;

/* One context on dir (NULL: the default directory) with the given cap:
 * gets the program of smoke with the options (NULL: runs the smoke kernel,
 * which proves the program computes correctly). */
static run_result run_opts(const char *dir, uint64_t cap, const char *options) {
  run_result r;
  memset(&r, 0, sizeof r);
  clpa_context_config cfg;
  clpa_context_config_init(&cfg);
  cfg.cache_dir = dir;
  cfg.cache_max_bytes = cap;
  clpa_context *ctx = NULL;
  if (clpa_context_create(&cfg, &ctx) != CLPA_OK) {
    diag("context: %s", clpa_last_error());
    return r;
  }
  cl_program prog;
  if (options)
    r.smoke_ok = clpa_program_get(ctx, "smoke", options, &prog) == CLPA_OK;
  else
    r.smoke_ok = clpa_smoke_test(ctx, 3000) == CLPA_OK;
  if (!r.smoke_ok) diag("smoke: %s", clpa_context_last_error(ctx));
  clpa_context_program_stats(ctx, &r.st);
  clpa_context_destroy(ctx);
  return r;
}

static run_result run(const char *dir) { return run_opts(dir, 0, NULL); }

/* A fresh directory base/name (mode 0700); returns its path (static). */
static const char *fresh_dir(const char *name) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/%s", base, name);
  mkdir(path, 0700);
  return path;
}

/* The cache files (clpa-*.bin) in dir: count, and the last one's path. */
static int cache_files(const char *dir, char *path, size_t cap) {
  DIR *d = opendir(dir);
  int n = 0;
  if (path) path[0] = '\0';
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strncmp(e->d_name, "clpa-", 5) == 0) {
      n++;
      if (path) snprintf(path, cap, "%s/%s", dir, e->d_name);
    }
  closedir(d);
  return n;
}

static int file_exists(const char *dir, const char *name) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  struct stat st;
  return lstat(p, &st) == 0;
}

/* Seeds dir with a good cache file of the smoke program; returns its path. */
static int seed(const char *dir, char *path, size_t cap) {
  run_result r = run(dir);
  return r.smoke_ok && r.st.built_from_source == 1 && cache_files(dir, path, cap) == 1;
}

/* The next run must build from source, refuse the planted file, run right,
 * and leave a good regular file of ours that the run after loads. */
static void expect_replaced(const char *dir, const char *path, const char *what) {
  run_result r = run(dir);
  ok(r.smoke_ok && r.st.built_from_source == 1 && r.st.loaded_from_disk == 0 &&
         r.st.disk_rejected == 1,
     "%s: refused and rebuilt (built %u, loaded %u, rejected %u)", what,
     r.st.built_from_source, r.st.loaded_from_disk, r.st.disk_rejected);
  struct stat st;
  int regular = lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
                (st.st_mode & 077) == 0;
  r = run(dir);
  ok(regular && r.smoke_ok && r.st.loaded_from_disk == 1,
     "%s: replaced by a private regular file that loads again", what);
}

static void test_planted_files(void) {
  char path[4096];
  const char *dir;

  dir = fresh_dir("fifo");
  if (ok(seed(dir, path, sizeof path), "seeded %s", dir)) {
    unlink(path);
    ok(mkfifo(path, 0600) == 0, "a FIFO in place of the cache file");
    expect_replaced(dir, path, "FIFO"); /* used to block in fopen forever */
  }

  dir = fresh_dir("symlink");
  if (ok(seed(dir, path, sizeof path), "seeded %s", dir)) {
    char target[4200];
    snprintf(target, sizeof target, "%s/elsewhere.bin", base);
    struct stat before, after;
    ok(rename(path, target) == 0 && symlink(target, path) == 0 && stat(target, &before) == 0,
       "a symlink to a good cache file elsewhere");
    expect_replaced(dir, path, "symlink");
    ok(stat(target, &after) == 0 && after.st_size == before.st_size &&
           after.st_mtime == before.st_mtime,
       "the symlink's target was not written through");
  }

  dir = fresh_dir("other-owner");
  if (!is_root) {
    ok(1, "# SKIP a file of another user needs root to make");
  } else if (ok(seed(dir, path, sizeof path), "seeded %s", dir)) {
    ok(chown(path, 65534, 65534) == 0, "the good cache file now belongs to uid 65534");
    expect_replaced(dir, path, "another user's file");
  }

  dir = fresh_dir("writable-file");
  if (ok(seed(dir, path, sizeof path), "seeded %s", dir)) {
    ok(chmod(path, 0666) == 0, "the good cache file made world-writable");
    expect_replaced(dir, path, "world-writable file");
  }

  dir = fresh_dir("truncated");
  if (ok(seed(dir, path, sizeof path), "seeded %s", dir)) {
    struct stat st;
    ok(stat(path, &st) == 0 && truncate(path, st.st_size / 2) == 0, "truncated to half");
    expect_replaced(dir, path, "truncated file");
  }

  dir = fresh_dir("empty");
  if (ok(seed(dir, path, sizeof path), "seeded %s", dir)) {
    ok(truncate(path, 0) == 0, "truncated to zero bytes");
    expect_replaced(dir, path, "zero-length file");
  }
}

/* A directory others could have written: not read, not written. */
static void expect_dir_refused(const char *dir, const char *what) {
  run_result r = run(dir);
  ok(r.smoke_ok && r.st.built_from_source == 1 && r.st.loaded_from_disk == 0 &&
         r.st.disk_write_failed == 1,
     "%s: not used (built %u, loaded %u, write failed %u)", what, r.st.built_from_source,
     r.st.loaded_from_disk, r.st.disk_write_failed);
}

static void test_bad_dirs(void) {
  char path[4096];
  const char *dir = fresh_dir("world-writable-dir");
  if (ok(seed(dir, path, sizeof path), "seeded %s", dir)) {
    ok(chmod(dir, 0777) == 0, "directory made world-writable, a good file inside");
    expect_dir_refused(dir, "world-writable directory");
    ok(chmod(dir, 0770) == 0, "directory made group-writable");
    expect_dir_refused(dir, "group-writable directory");
    chmod(dir, 0700);
    run_result r = run(dir);
    ok(r.smoke_ok && r.st.loaded_from_disk == 1, "back to 0700: the file loads again");
  }

  dir = fresh_dir("other-owner-dir");
  if (!is_root) {
    ok(1, "# SKIP a directory of another user needs root to make");
  } else if (ok(seed(dir, path, sizeof path), "seeded %s", dir)) {
    ok(chown(dir, 65534, 65534) == 0, "directory now belongs to uid 65534");
    expect_dir_refused(dir, "another user's directory");
  }

  /* Not writable. Root writes through mode bits, so a path that cannot be
   * created (under a regular file) stands in; other users also get a
   * read-only directory, which still serves loads. */
  char blocked[4200];
  snprintf(blocked, sizeof blocked, "%s/plain-file", base);
  FILE *f = fopen(blocked, "w");
  if (f) fclose(f);
  strcat(blocked, "/cache");
  run_result r = run(blocked);
  ok(r.smoke_ok && r.st.built_from_source == 1 && r.st.disk_write_failed == 1,
     "a directory that cannot be created: built, disk_write_failed = %u", r.st.disk_write_failed);
  r = run(blocked);
  ok(r.smoke_ok && r.st.disk_write_failed == 1, "... and counted again by the next context");
  if (is_root) {
    ok(1, "# SKIP a read-only directory does not stop root");
  } else {
    dir = fresh_dir("read-only-dir");
    if (ok(seed(dir, path, sizeof path), "seeded %s", dir)) {
      chmod(dir, 0500);
      r = run(dir);
      ok(r.smoke_ok && r.st.loaded_from_disk == 1, "a read-only directory still serves loads");
      r = run_opts(dir, 0, "-DCLPA_TEST_OTHER=1");
      ok(r.smoke_ok && r.st.built_from_source == 1 && r.st.disk_write_failed == 1,
         "a read-only directory: new programs built, disk_write_failed = %u",
         r.st.disk_write_failed);
      chmod(dir, 0700);
    }
  }
}

/* Without HOME the cache is $TMPDIR/clpa-<uid>, private, and refused when
 * someone else could write it. */
static void test_tmp_fallback(void) {
  char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  char *xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
  char *tmpdir = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
  unsetenv("HOME");
  unsetenv("XDG_CACHE_HOME");
  setenv("TMPDIR", fresh_dir("tmp"), 1);
  char want[4200];
  snprintf(want, sizeof want, "%s/tmp/clpa-%lu", base, (unsigned long)geteuid());

  clpa_context *ctx = NULL;
  const char *got = NULL;
  if (clpa_context_create(NULL, &ctx) == CLPA_OK) got = clpa_context_cache_dir(ctx);
  ok(got && strcmp(got, want) == 0, "without HOME the cache directory is %s (got %s)", want,
     got ? got : "none");
  clpa_context_destroy(ctx);
  run_result r = run(NULL);
  struct stat st;
  if (stat(want, &st) != 0) st.st_mode = 0;
  ok(r.smoke_ok && (st.st_mode & 0777) == 0700 && cache_files(want, NULL, 0) == 1,
     "it is created 0700 (mode %04o) and holds the program", (unsigned)(st.st_mode & 0777));
  ok(chmod(want, 01777) == 0, "the fallback made world-writable, as /tmp is");
  r = run(NULL);
  ok(r.smoke_ok && r.st.loaded_from_disk == 0 && r.st.disk_write_failed == 1,
     "a world-writable fallback is not used");

  if (home) setenv("HOME", home, 1);
  if (xdg) setenv("XDG_CACHE_HOME", xdg, 1);
  if (tmpdir)
    setenv("TMPDIR", tmpdir, 1);
  else
    unsetenv("TMPDIR");
  free(home);
  free(xdg);
  free(tmpdir);
}

/* regress_binary_cache_multi_device: an application's OpenCL context may
 * hold several devices, and a program then belongs to all of them, so the
 * binary queries answer an entry a device (CL_PROGRAM_DEVICES' order).
 * program.c asked for one entry: a conformant driver refuses that
 * (CL_INVALID_VALUE) and nothing was ever stored; one that does not check
 * writes past it. PoCL answers for the built devices only, so here
 * clGetProgramInfo answers as a conformant driver does for a context of
 * two devices, ours the second, the first one never built for. */
static int two_devices;

/* The loader's definition of an OpenCL entry point, into *fn (a function
 * pointer; dlsym's object pointer is copied, as ISO C casts none). */
static void next_definition(const char *name, void *fn) {
  void *f = dlsym(RTLD_NEXT, name);
  memcpy(fn, &f, sizeof f);
}

static cl_int answer(size_t size, void *value, size_t *ret, const void *data, size_t need) {
  if (ret) *ret = need;
  if (value && size < need) return CL_INVALID_VALUE;
  if (value) memcpy(value, data, need);
  return CL_SUCCESS;
}

cl_int clGetProgramInfo(cl_program prog, cl_program_info what, size_t size, void *value,
                        size_t *ret) {
  typedef cl_int (*info_fn)(cl_program, cl_program_info, size_t, void *, size_t *);
  static info_fn real;
  if (!real) next_definition("clGetProgramInfo", &real);
  cl_device_id devs[2] = {(cl_device_id)&two_devices, NULL};
  size_t sizes[2] = {0, 0};
  if (!two_devices ||
      real(prog, CL_PROGRAM_DEVICES, sizeof devs[1], &devs[1], NULL) != CL_SUCCESS ||
      real(prog, CL_PROGRAM_BINARY_SIZES, sizeof sizes[1], &sizes[1], NULL) != CL_SUCCESS)
    return real(prog, what, size, value, ret);
  cl_uint n = 2;
  switch (what) {
  case CL_PROGRAM_NUM_DEVICES:
    return answer(size, value, ret, &n, sizeof n);
  case CL_PROGRAM_DEVICES:
    return answer(size, value, ret, devs, sizeof devs);
  case CL_PROGRAM_BINARY_SIZES:
    return answer(size, value, ret, sizes, sizeof sizes);
  case CL_PROGRAM_BINARIES: {
    unsigned char **bins = value;
    cl_int err = answer(size, NULL, ret, NULL, 2 * sizeof *bins);
    if (value && size < 2 * sizeof *bins) return CL_INVALID_VALUE;
    if (value && bins[1]) err = real(prog, what, sizeof bins[1], &bins[1], NULL);
    return err; /* bins[0], a device not built for, is skipped */
  }
  default:
    return real(prog, what, size, value, ret);
  }
}

static void test_multi_device(void) {
  const char *dir = fresh_dir("two-devices");
  two_devices = 1;
  run_result r = run(dir);
  int stored = cache_files(dir, NULL, 0);
  ok(r.smoke_ok && r.st.built_from_source == 1 && stored == 1,
     "a context of two devices: built and stored (%d files)", stored);
  r = run(dir);
  ok(r.smoke_ok && r.st.loaded_from_disk == 1 && r.st.built_from_source == 0,
     "... and the next context loads it (loaded %u, built %u)", r.st.loaded_from_disk,
     r.st.built_from_source);
  two_devices = 0;
}

/* regress_binary_cache_key_long_strings: the key took the device's name,
 * vendor and driver version and the platform's version from
 * clpa_device_info, whose 128-byte fields hold "" where the string is
 * longer, so a long driver version dropped out of the key and a binary
 * of another driver loaded. clGetDeviceInfo answers here with a
 * 160-character driver version whose last character changes. */
static char long_driver;

cl_int clGetDeviceInfo(cl_device_id dev, cl_device_info what, size_t size, void *value,
                       size_t *ret) {
  typedef cl_int (*info_fn)(cl_device_id, cl_device_info, size_t, void *, size_t *);
  static info_fn real;
  if (!real) next_definition("clGetDeviceInfo", &real);
  if (!long_driver || what != CL_DRIVER_VERSION) return real(dev, what, size, value, ret);
  char version[161];
  memset(version, '9', sizeof version - 2);
  version[sizeof version - 2] = long_driver;
  version[sizeof version - 1] = '\0';
  return answer(size, value, ret, version, sizeof version);
}

static void test_key_long_strings(void) {
  const char *dir = fresh_dir("long-driver");
  long_driver = '1';
  run_result r = run(dir);
  ok(r.smoke_ok && r.st.built_from_source == 1 && cache_files(dir, NULL, 0) == 1,
     "a driver version of 160 characters: built and stored");
  r = run(dir);
  ok(r.smoke_ok && r.st.loaded_from_disk == 1, "the same driver loads it (loaded %u)",
     r.st.loaded_from_disk);
  long_driver = '2';
  r = run(dir);
  ok(r.smoke_ok && r.st.loaded_from_disk == 0 && r.st.built_from_source == 1,
     "a driver whose version differs in its 160th character builds anew (loaded %u, built %u)",
     r.st.loaded_from_disk, r.st.built_from_source);
  long_driver = 0;
}

/* regress_binary_cache_long_path: the directory's path was built in a
 * 4096-byte buffer, so $XDG_CACHE_HOME of 4094 characters (a path Linux
 * still opens) gave "$XDG_CACHE_HOME/" and the cache files went into
 * XDG_CACHE_HOME itself. The whole path, too long to open, now means no
 * disk cache. */
static void test_long_path(void) {
  char *xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
  static char longdir[4095], want[4200];
  snprintf(longdir, sizeof longdir, "%s", fresh_dir("long"));
  size_t len = strlen(longdir);
  while (len < sizeof longdir - 1) { /* components of up to 200 characters, each made */
    size_t part = sizeof longdir - 1 - len > 201 ? 201 : sizeof longdir - 1 - len;
    longdir[len] = '/';
    memset(longdir + len + 1, 'd', part - 1);
    len += part;
    longdir[len] = '\0';
    mkdir(longdir, 0700);
  }
  setenv("XDG_CACHE_HOME", longdir, 1);
  snprintf(want, sizeof want, "%s/clpa", longdir);
  clpa_context *ctx = NULL;
  const char *got = NULL;
  if (clpa_context_create(NULL, &ctx) == CLPA_OK) got = clpa_context_cache_dir(ctx);
  ok(got && strcmp(got, want) == 0, "XDG_CACHE_HOME of %zu characters: the directory is it "
     "and /clpa (got %zu characters, ending '%s')", len, got ? strlen(got) : 0,
     got && strlen(got) > 8 ? got + strlen(got) - 8 : "");
  clpa_context_destroy(ctx);
  run_result r = run(NULL);
  ok(r.smoke_ok && r.st.built_from_source == 1 && r.st.disk_write_failed == 1 &&
         cache_files(longdir, NULL, 0) == 0,
     "too long to open: built, not stored (write failed %u), nothing in XDG_CACHE_HOME",
     r.st.disk_write_failed);
  if (xdg)
    setenv("XDG_CACHE_HOME", xdg, 1);
  else
    unsetenv("XDG_CACHE_HOME");
  free(xdg);
}

/* The file that appeared in dir since names_before (one listing). */
static void new_file(const char *dir, char before[][256], int nbefore, char *out) {
  DIR *d = opendir(dir);
  out[0] = '\0';
  if (!d) return;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, "clpa-", 5) != 0) continue;
    int seen = 0;
    for (int i = 0; i < nbefore; i++) seen |= strcmp(before[i], e->d_name) == 0;
    if (!seen) snprintf(out, 256, "%s", e->d_name);
  }
  closedir(d);
}

static void set_age(const char *dir, const char *name, long seconds_ago) {
  char p[4200];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  struct timespec t[2];
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= seconds_ago;
  t[1] = t[0];
  utimensat(AT_FDCWD, p, t, 0);
}

static void test_pruning(void) {
  const char *d = fresh_dir("prune");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", d);
  char names[3][256];
  uint64_t big = (uint64_t)1 << 40;
  run_result r = run_opts(dir, big, "-DCLPA_TEST_PRUNE=1");
  new_file(dir, names, 0, names[0]);
  char p[4608];
  snprintf(p, sizeof p, "%s/%s", dir, names[0]);
  struct stat st;
  if (!ok(r.smoke_ok && names[0][0] && stat(p, &st) == 0, "first program stored: %s", names[0]))
    return;
  uint64_t size = (uint64_t)st.st_size, cap = size * 5 / 2; /* two files fit, not three */
  diag("cache file size %llu bytes; cap %llu", (unsigned long long)size,
       (unsigned long long)cap);
  r = run_opts(dir, cap, "-DCLPA_TEST_PRUNE=2");
  new_file(dir, names, 1, names[1]);
  ok(r.smoke_ok && names[1][0] && r.st.disk_pruned == 0 && cache_files(dir, NULL, 0) == 2,
     "second program stored, nothing pruned under the cap");

  /* Files that are not ours to prune, and abandoned temporaries. */
  char other[4200], stale[4200], fresh[4200];
  snprintf(other, sizeof other, "%s/notes.txt", dir);
  snprintf(stale, sizeof stale, "%s/.clpa-0000000000000000-1-1-1.tmp", dir);
  snprintf(fresh, sizeof fresh, "%s/.clpa-0000000000000000-2-2-2.tmp", dir);
  const char *extra[] = {other, stale, fresh};
  for (int i = 0; i < 3; i++) {
    FILE *g = fopen(extra[i], "w");
    if (g) {
      fputs("not a cache file\n", g);
      fclose(g);
    }
  }
  set_age(dir, ".clpa-0000000000000000-1-1-1.tmp", 7200);

  /* Program 1 is older than program 2 on disk, then a load makes it the
   * most recently used, so the third store evicts program 2. */
  set_age(dir, names[0], 200);
  set_age(dir, names[1], 100);
  r = run_opts(dir, cap, "-DCLPA_TEST_PRUNE=1");
  ok(r.smoke_ok && r.st.loaded_from_disk == 1, "program 1 loaded (refreshes it)");
  r = run_opts(dir, cap, "-DCLPA_TEST_PRUNE=3");
  new_file(dir, names, 2, names[2]);
  ok(r.smoke_ok && names[2][0] && r.st.disk_pruned == 1 && cache_files(dir, NULL, 0) == 2,
     "third store pruned one file (pruned %u), two remain", r.st.disk_pruned);
  ok(file_exists(dir, names[0]) && !file_exists(dir, names[1]) && file_exists(dir, names[2]),
     "the least recently used one went (program 2), the reloaded one stayed");
  ok(file_exists(dir, "notes.txt") && file_exists(dir, ".clpa-0000000000000000-2-2-2.tmp") &&
         !file_exists(dir, ".clpa-0000000000000000-1-1-1.tmp"),
     "other files stay; a temporary file abandoned for 2 hours went, a fresh one stayed");

  /* A cap smaller than one file keeps nothing. */
  r = run_opts(dir, size / 2, "-DCLPA_TEST_PRUNE=4");
  ok(r.smoke_ok && cache_files(dir, NULL, 0) == 0 && r.st.disk_pruned == 3,
     "a cap below one file empties the cache (pruned %u)", r.st.disk_pruned);

  /* The environment variable. */
  setenv("CLPA_CACHE_MAX_MB", "abc", 1);
  clpa_context *ctx = (clpa_context *)1;
  ok(clpa_context_create(NULL, &ctx) == CLPA_ERR_INVALID_ARG && ctx == NULL &&
         strstr(clpa_last_error(), "CLPA_CACHE_MAX_MB"),
     "CLPA_CACHE_MAX_MB=abc is refused: %s", clpa_last_error());
  setenv("CLPA_CACHE_MAX_MB", "0", 1);
  ok(clpa_context_create(NULL, &ctx) == CLPA_ERR_INVALID_ARG, "CLPA_CACHE_MAX_MB=0 is refused");
  setenv("CLPA_CACHE_MAX_MB", "1", 1);
  r = run_opts(dir, 0, "-DCLPA_TEST_PRUNE=5");
  ok(r.smoke_ok && cache_files(dir, NULL, 0) == (size <= (1 << 20) ? 1 : 0),
     "CLPA_CACHE_MAX_MB=1 is the cap when the config gives none");
  unsetenv("CLPA_CACHE_MAX_MB");
}

static void rm_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    chmod(path, 0700);
    DIR *d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      char p[4200];
      snprintf(p, sizeof p, "%s/%s", path, e->d_name);
      rm_tree(p);
    }
    if (d) closedir(d);
    rmdir(path);
  } else {
    unlink(path);
  }
}

int main(void) {
  alarm(900); /* a hang (the FIFO) is a failure, not a stuck CI job */
  unsetenv("CLPA_NO_BINARY_CACHE");
  unsetenv("CLPA_CACHE_MAX_MB");
  is_root = geteuid() == 0;
  const char *tmp = getenv("CLPA_TEST_TMP");
  snprintf(base, sizeof base, "%s/clpa-binary-cache-test-%ld", tmp ? tmp : "/tmp", (long)getpid());
  mkdir(base, 0700);
  diag("running as uid %lu%s", (unsigned long)geteuid(), is_root ? " (root)" : "");
  test_planted_files();
  test_bad_dirs();
  test_tmp_fallback();
  test_long_path();
  test_multi_device();
  test_key_long_strings();
  test_pruning();
  rm_tree(base);
  return done_testing();
}
