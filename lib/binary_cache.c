/*
 * binary_cache.c — program binaries on disk, used only when this user
 * wrote them, and kept under a size cap.
 *
 * File (one per key, named clpa-<16 hex digits of the key's hash>.bin):
 *
 *   "CLPABIN1"  u32 key_len  key[key_len]  u64 bin_len  bin[bin_len]  u64 checksum
 *
 * The key text spells out everything the binary depends on (clpa version,
 * device, driver and platform versions, source hash, options), so a hash
 * collision in the file name is caught by comparing keys. The checksum
 * (FNV-1a over all bytes before it) catches a torn or corrupt file.
 *
 * Why so careful: on a CPU device (PoCL) a program binary is native code
 * that runs in our process, and without HOME the directory is under /tmp,
 * which every user can write. So:
 *   - the directory is opened once per operation and everything after goes
 *     through that descriptor (openat, renameat, ...), so it cannot be
 *     swapped in between; it must belong to this user and not be writable
 *     by group or others, and is created 0700;
 *   - a file is opened with O_NOFOLLOW (no symlinks) and O_NONBLOCK (a FIFO
 *     must not hang us), then must be a regular file of this user, not
 *     writable by group or others, of a sane size;
 *   - writes go to a fresh temporary name (O_CREAT|O_EXCL|O_NOFOLLOW, mode
 *     0600) renamed into place, which also replaces whatever bad file
 *     (symlink, FIFO, someone else's) had the name.
 * Anything off means "not cached": the caller builds from source.
 *
 * Pruning: after each write the directory is brought under the cap by
 * removing the least recently used files (oldest modification time; a
 * load refreshes it), and temporary files left by crashed writers for an
 * hour are removed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "binary_cache.h"
#include "hash.h"

#define MAX_FILE_BYTES ((off_t)1 << 30)
#define STALE_TMP_SECONDS 3600
#define NAME_LEN 25 /* "clpa-" + 16 hex + ".bin" */

static void error_text(int err, char *buf, size_t cap) {
  if (strerror_r(err, buf, cap) != 0) snprintf(buf, cap, "errno %d", err);
}

static void cache_name(const char *key, char name[32]) {
  uint64_t h = clpa_hash64(CLPA_HASH64_INIT, key, strlen(key));
  snprintf(name, 32, "clpa-%016llx.bin", (unsigned long long)h);
}

static int is_cache_name(const char *n) {
  if (strlen(n) != NAME_LEN || strncmp(n, "clpa-", 5) != 0 || strcmp(n + 21, ".bin") != 0)
    return 0;
  for (int i = 5; i < 21; i++)
    if (!((n[i] >= '0' && n[i] <= '9') || (n[i] >= 'a' && n[i] <= 'f'))) return 0;
  return 1;
}

static int is_tmp_name(const char *n) {
  size_t len = strlen(n);
  return strncmp(n, ".clpa-", 6) == 0 && len > 10 && strcmp(n + len - 4, ".tmp") == 0;
}

/* A file only this user can have written. */
static int trusted_file(const struct stat *st) {
  return S_ISREG(st->st_mode) && st->st_uid == geteuid() &&
         (st->st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

/* mkdir -p; new directories are private. Errors surface in open_dir. */
static void make_dirs(const char *dir) {
  char *tmp = strdup(dir);
  if (!tmp) return;
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(tmp, 0700);
      *p = '/';
    }
  mkdir(tmp, 0700);
  free(tmp);
}

/* Opens the cache directory if only this user can have put files in it.
 * Returns the descriptor, or -1 with the reason in why. */
static int open_dir(const char *dir, int create, char *why, size_t cap) {
  if (create) make_dirs(dir);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    char e[128];
    error_text(errno, e, sizeof e);
    snprintf(why, cap, "cannot %s it: %s", create ? "create or open" : "open", e);
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
    snprintf(why, cap, "it is not a directory");
  } else if (st.st_uid != geteuid()) {
    snprintf(why, cap, "it belongs to uid %lu, not to this user (uid %lu)",
             (unsigned long)st.st_uid, (unsigned long)geteuid());
  } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(why, cap, "it is writable by group or others (mode %04o); chmod 700 it",
             (unsigned)(st.st_mode & 07777));
  } else {
    return fd;
  }
  close(fd);
  return -1;
}

static int read_all(int fd, unsigned char *buf, size_t n) {
  while (n > 0) {
    ssize_t got = read(fd, buf, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return 0;
    buf += got;
    n -= (size_t)got;
  }
  return 1;
}

static int write_all(int fd, const unsigned char *buf, size_t n) {
  while (n > 0) {
    ssize_t put = write(fd, buf, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return 0;
    buf += put;
    n -= (size_t)put;
  }
  return 1;
}

/* The binary in an open cache file, if the file is trusted, whole and
 * holds this key; else NULL. */
static unsigned char *read_trusted(int fd, const char *key, size_t *bin_len) {
  struct stat st;
  size_t klen = strlen(key);
  if (fstat(fd, &st) != 0 || !trusted_file(&st) || st.st_size > MAX_FILE_BYTES ||
      st.st_size < (off_t)(8 + 4 + klen + 8 + 8))
    return NULL;
  size_t size = (size_t)st.st_size;
  unsigned char *buf = malloc(size), *bin = NULL;
  if (!buf || !read_all(fd, buf, size)) goto out;
  uint64_t sum;
  memcpy(&sum, buf + size - 8, 8);
  if (sum != clpa_hash64(CLPA_HASH64_INIT, buf, size - 8)) goto out;
  if (memcmp(buf, "CLPABIN1", 8) != 0) goto out;
  uint32_t kl;
  memcpy(&kl, buf + 8, 4);
  if (kl != klen || memcmp(buf + 12, key, klen) != 0) goto out;
  uint64_t bl;
  memcpy(&bl, buf + 12 + klen, 8);
  if (bl == 0 || bl != (uint64_t)size - (12 + klen + 8 + 8)) goto out;
  bin = malloc(bl);
  if (!bin) goto out;
  memcpy(bin, buf + 12 + klen + 8, bl);
  *bin_len = bl;
out:
  free(buf);
  return bin;
}

unsigned char *clpa_disk_cache_load(clpa_context *ctx, const char *key, size_t *len) {
  char why[256], name[32];
  cache_name(key, name);
  /* An unusable directory is reported when a program is stored. */
  int dfd = open_dir(ctx->cache_dir, 0, why, sizeof why);
  if (dfd < 0) return NULL;
  int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  close(dfd);
  if (fd < 0) {
    if (errno != ENOENT) ctx->stats.disk_rejected++; /* a symlink (ELOOP), unreadable, ... */
    return NULL;
  }
  unsigned char *bin = read_trusted(fd, key, len);
  if (bin)
    futimens(fd, NULL); /* now recently used: pruned last */
  else
    ctx->stats.disk_rejected++;
  close(fd);
  return bin;
}

static void write_failed(clpa_context *ctx, const char *why) {
  static atomic_int said;
  ctx->stats.disk_write_failed++;
  if (atomic_exchange(&said, 1) == 0)
    fprintf(stderr,
            "clpa: cannot store program binaries in the cache directory '%s': %s. Programs are"
            " built from source in every process (clpa_program_stats.disk_write_failed counts"
            " them); set cache_dir or XDG_CACHE_HOME to a private directory, or"
            " CLPA_NO_BINARY_CACHE=1.\n",
            ctx->cache_dir, why);
}

/* Writes the file under a fresh temporary name, then renames it into
 * place. Returns 1, or 0 with the reason in why. */
static int write_file(int dfd, const char *name, const char *key, const unsigned char *bin,
                      size_t bin_len, char *why, size_t cap) {
  static atomic_uint seq;
  size_t klen = strlen(key), total = 12 + klen + 8 + bin_len + 8;
  unsigned char *buf = malloc(total);
  if (!buf) {
    snprintf(why, cap, "out of memory");
    return 0;
  }
  memcpy(buf, "CLPABIN1", 8);
  uint32_t kl = (uint32_t)klen;
  uint64_t bl = bin_len;
  memcpy(buf + 8, &kl, 4);
  memcpy(buf + 12, key, klen);
  memcpy(buf + 12 + klen, &bl, 8);
  memcpy(buf + 20 + klen, bin, bin_len);
  uint64_t sum = clpa_hash64(CLPA_HASH64_INIT, buf, total - 8);
  memcpy(buf + total - 8, &sum, 8);

  char tmp[96];
  int fd = -1, err = 0;
  for (int attempt = 0; attempt < 16 && fd < 0; attempt++) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(tmp, sizeof tmp, ".clpa-%.16s-%ld-%u-%lx.tmp", name + 5, (long)getpid(),
             atomic_fetch_add(&seq, 1), (unsigned long)ts.tv_nsec);
    fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    err = errno;
    if (fd < 0 && err != EEXIST) break;
  }
  int good = fd >= 0 && write_all(fd, buf, total);
  if (fd >= 0 && !good) err = errno;
  if (fd >= 0 && close(fd) != 0 && good) {
    good = 0;
    err = errno;
  }
  if (good && renameat(dfd, tmp, dfd, name) != 0) {
    good = 0;
    err = errno;
  }
  if (!good) {
    char e[128];
    error_text(err, e, sizeof e);
    snprintf(why, cap, "cannot write %s there: %s", fd >= 0 ? tmp : "a file", e);
    if (fd >= 0) unlinkat(dfd, tmp, 0);
  }
  free(buf);
  return good;
}

typedef struct cache_file {
  char name[NAME_LEN + 1];
  off_t size;
  struct timespec used;
} cache_file;

static int older_first(const void *a, const void *b) {
  const cache_file *x = a, *y = b;
  if (x->used.tv_sec != y->used.tv_sec) return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
  if (x->used.tv_nsec != y->used.tv_nsec) return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Removes the least recently used cache files until the rest fit the cap,
 * and temporary files abandoned long ago. Only our own regular files with
 * our names are touched. */
static void prune(clpa_context *ctx, int dfd) {
  int fd2 = dup(dfd);
  DIR *d = fd2 >= 0 ? fdopendir(fd2) : NULL;
  if (!d) {
    if (fd2 >= 0) close(fd2);
    return;
  }
  cache_file *files = NULL;
  size_t n = 0, cap = 0;
  uint64_t total = 0;
  time_t now = time(NULL);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    int tmp = is_tmp_name(e->d_name);
    if (!tmp && !is_cache_name(e->d_name)) continue;
    struct stat st;
    if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !trusted_file(&st)) continue;
    if (tmp) {
      if (now - st.st_mtime > STALE_TMP_SECONDS) unlinkat(dfd, e->d_name, 0);
      continue;
    }
    if (n == cap) {
      size_t grown_cap = cap ? 2 * cap : 64;
      cache_file *grown = realloc(files, grown_cap * sizeof *files);
      if (!grown) break; /* prune what we have seen */
      files = grown;
      cap = grown_cap;
    }
    memcpy(files[n].name, e->d_name, NAME_LEN + 1); /* is_cache_name checked the length */
    files[n].size = st.st_size;
    files[n].used = st.st_mtim;
    total += (uint64_t)st.st_size;
    n++;
  }
  closedir(d);
  if (total > ctx->cache_max_bytes) {
    qsort(files, n, sizeof *files, older_first);
    for (size_t i = 0; i < n && total > ctx->cache_max_bytes; i++) {
      int gone = unlinkat(dfd, files[i].name, 0) == 0;
      if (gone || errno == ENOENT) total -= (uint64_t)files[i].size; /* or another process pruned it */
      if (gone) ctx->stats.disk_pruned++;
    }
  }
  free(files);
}

void clpa_disk_cache_store(clpa_context *ctx, const char *key, const unsigned char *bin,
                           size_t len) {
  char why[512], name[32];
  cache_name(key, name);
  int dfd = open_dir(ctx->cache_dir, 1, why, sizeof why);
  if (dfd < 0) {
    write_failed(ctx, why);
    return;
  }
  if (write_file(dfd, name, key, bin, len, why, sizeof why))
    prune(ctx, dfd);
  else
    write_failed(ctx, why);
  close(dfd);
}
