/*
 * program.c — kernels as data: each family's program is clpa_codes.h, the
 * parts the family lists (kernels.c: common.cl, kv.cl, ...) and the
 * family's own file, specialised with -D options; built on first use,
 * kept in the context, and cached on disk as a binary (binary_cache.c: the
 * file format, what is trusted, the cap). The disk cache key spells out
 * everything the binary depends on; a file that is missing, untrusted,
 * torn, or that the driver refuses is rebuilt from source and replaced.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "binary_cache.h"
#include "cl_sources.h"
#include "hash.h"
#include "ptx.h"

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const clpa_cl_source *find_source(const char *name) {
  for (const clpa_cl_source *s = clpa_cl_sources; s->name; s++)
    if (strcmp(s->name, name) == 0) return s;
  return NULL;
}

/* The texts of a family's program, in order: clpa_codes.h, its parts, its
 * own file. Returns how many (0: an embedded source is missing). */
#define MAX_TEXTS (sizeof(((clpa_family *)0)->parts) / sizeof(const char *) + 2)
static size_t program_texts(const clpa_family *f, const clpa_cl_source *out[MAX_TEXTS]) {
  size_t n = 0;
  out[n++] = find_source("clpa_codes");
  for (size_t i = 0; i < sizeof f->parts / sizeof *f->parts && f->parts[i]; i++)
    out[n++] = find_source(f->parts[i]);
  out[n++] = find_source(f->name);
  for (size_t i = 0; i < n; i++)
    if (!out[i]) return 0;
  return n;
}

static uint64_t source_hash(const clpa_cl_source *const *texts, size_t n) {
  uint64_t h = CLPA_HASH64_INIT;
  for (size_t i = 0; i < n; i++) h = clpa_hash64(h, texts[i]->text, texts[i]->length);
  return h;
}

/* A device string (d) or platform string (else) at its full length:
 * clpa_device_info's fields keep "" for one longer than they hold. Caller
 * frees; NULL when it cannot be read. */
static char *cl_string(cl_platform_id p, cl_device_id d, cl_uint what) {
  size_t n = 0;
  cl_int err = d ? clGetDeviceInfo(d, what, 0, NULL, &n) : clGetPlatformInfo(p, what, 0, NULL, &n);
  char *s = err == CL_SUCCESS ? malloc(n + 1) : NULL;
  if (s && (d ? clGetDeviceInfo(d, what, n, s, NULL) : clGetPlatformInfo(p, what, n, s, NULL)) !=
               CL_SUCCESS) {
    free(s);
    return NULL;
  }
  if (s) s[n] = '\0';
  return s;
}

/* The text that identifies a binary; caller frees (NULL: out of memory, or
 * a string that cannot be read: then no disk cache). */
static char *cache_key_text(const clpa_context *ctx, const char *family, uint64_t src_hash,
                            const char *options) {
  const char *fmt = "clpa %s\ndevice %s\nvendor %s\ndriver %s\nplatform %s\nfamily %s\n"
                    "source %016llx\noptions %s\n";
  char *name = cl_string(NULL, ctx->dev, CL_DEVICE_NAME);
  char *vendor = cl_string(NULL, ctx->dev, CL_DEVICE_VENDOR);
  char *driver = cl_string(NULL, ctx->dev, CL_DRIVER_VERSION);
  char *platform = cl_string(ctx->platform, NULL, CL_PLATFORM_VERSION);
  char *s = NULL;
  if (name && vendor && driver && platform) {
    int n = snprintf(NULL, 0, fmt, clpa_version_string(), name, vendor, driver, platform, family,
                     (unsigned long long)src_hash, options);
    s = malloc((size_t)n + 1);
    if (s)
      snprintf(s, (size_t)n + 1, fmt, clpa_version_string(), name, vendor, driver, platform,
               family, (unsigned long long)src_hash, options);
  }
  free(name);
  free(vendor);
  free(driver);
  free(platform);
  return s;
}

/* The program's binary for the context's device; caller frees. The program
 * belongs to every device of the OpenCL context (an application's may have
 * several), and the binary queries answer an entry a device, in the order
 * of CL_PROGRAM_DEVICES (PoCL answers for the built devices only, here our
 * one: the size it returns says how many). The entries of other devices
 * stay NULL, which the driver skips. */
static unsigned char *program_binary(const clpa_context *ctx, cl_program prog, size_t *len) {
  cl_uint n = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_NUM_DEVICES, sizeof n, &n, NULL) != CL_SUCCESS || n == 0)
    return NULL;
  cl_device_id *devs = malloc(n * sizeof *devs);
  size_t *sizes = calloc(n, sizeof *sizes), got = n * sizeof *sizes, entries = 0, at = 0;
  unsigned char **bins = calloc(n, sizeof *bins), *bin = NULL;
  if (!devs || !sizes || !bins ||
      clGetProgramInfo(prog, CL_PROGRAM_DEVICES, n * sizeof *devs, devs, NULL) != CL_SUCCESS ||
      clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, n * sizeof *sizes, sizes, &got) !=
          CL_SUCCESS)
    goto out;
  entries = got / sizeof *sizes;
  if (entries != 1)
    while (at < n && devs[at] != ctx->dev) at++;
  if (entries > n || at >= entries || sizes[at] == 0 || !(bins[at] = malloc(sizes[at])))
    goto out;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, entries * sizeof *bins, bins, NULL) ==
      CL_SUCCESS) {
    bin = bins[at];
    *len = sizes[at];
  } else {
    free(bins[at]);
  }
out:
  free(devs);
  free(sizes);
  free(bins);
  return bin;
}

/* Records a build failure with the log in the message. */
static clpa_status build_failed(clpa_context *ctx, cl_program prog, cl_int err,
                                const char *family, const char *options) {
  clpa_err_set(ctx->error, clpa_status_from_cl(err), "clpa_program_get",
               "build of '%s' with options '%s' failed: %s (%d)\n--- build log ---\n", family,
               options, clpa_cl_error_name(err), (int)err);
  size_t sz = 0;
  if (clGetProgramBuildInfo(prog, ctx->dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &sz) == CL_SUCCESS &&
      sz > 1) {
    char *log = malloc(sz + 1);
    if (log && clGetProgramBuildInfo(prog, ctx->dev, CL_PROGRAM_BUILD_LOG, sz, log, NULL) ==
                   CL_SUCCESS) {
      log[sz] = '\0';
      clpa_err_append(ctx->error, log);
    }
    free(log);
  }
  return err == CL_BUILD_PROGRAM_FAILURE ? CLPA_ERR_BUILD : clpa_status_from_cl(err);
}

static clpa_status build_from_source(clpa_context *ctx, const clpa_cl_source *const *srcs,
                                     size_t n, const char *family, const char *options,
                                     cl_program *out) {
  const char *texts[MAX_TEXTS];
  size_t lens[MAX_TEXTS];
  for (size_t i = 0; i < n; i++) texts[i] = srcs[i]->text, lens[i] = srcs[i]->length;
  cl_int err;
  cl_program prog = clCreateProgramWithSource(ctx->cl, (cl_uint)n, texts, lens, &err);
  if (err != CL_SUCCESS) return CLPA_CL_FAIL(ctx, err, "clCreateProgramWithSource");
  err = clBuildProgram(prog, 1, &ctx->dev, options, NULL, NULL);
  if (err != CL_SUCCESS) {
    clpa_status st = build_failed(ctx, prog, err, family, options);
    clReleaseProgram(prog);
    return st;
  }
  *out = prog;
  return CLPA_OK;
}

/* A program built from a binary (`len` bytes, freed here), or NULL. */
static cl_program from_binary(clpa_context *ctx, unsigned char *bin, size_t len,
                              const char *options) {
  cl_int status = CL_SUCCESS, err;
  const unsigned char *bins[1] = {bin};
  cl_program prog = clCreateProgramWithBinary(ctx->cl, 1, &ctx->dev, &len, bins, &status, &err);
  free(bin);
  if (err == CL_SUCCESS && status == CL_SUCCESS)
    err = clBuildProgram(prog, 1, &ctx->dev, options, NULL, NULL);
  if (err != CL_SUCCESS || status != CL_SUCCESS) {
    if (prog) clReleaseProgram(prog);
    return NULL;
  }
  return prog;
}

/* On NVIDIA a program whose options carry -DCLPA_MAXNREG=N (N > 0) is
 * rebuilt from its PTX with `.maxnreg N` in every kernel (host/ptx.c's
 * clpa_ptx_with_maxnreg): NVIDIA's OpenCL has no working register option,
 * and ptxas left alone gives the mma prefill 2 work-groups an SM where 128
 * registers fit 4 (docs/decisions/0019-prefill-mma-register-cap.md). The
 * disk cache then keeps the capped PTX. Where the rebuild fails, the
 * program as built stays (the cap is a speed hint, not a meaning). */
static cl_program with_register_cap(clpa_context *ctx, cl_program prog, const char *options) {
  static const char opt[] = "-DCLPA_MAXNREG=";
  const char *m = strstr(options, opt);
  const int n = m ? atoi(m + sizeof opt - 1) : 0;
  if (ctx->lanes != CLPA_LANES_NV_PTX || n <= 0) return prog;
  size_t len = 0, plen = 0;
  unsigned char *bin = program_binary(ctx, prog, &len);
  unsigned char *ptx = bin ? clpa_ptx_with_maxnreg(bin, len, n, &plen) : NULL;
  free(bin);
  cl_program capped = ptx ? from_binary(ctx, ptx, plen, options) : NULL;
  if (!capped) return prog;
  clReleaseProgram(prog);
  return capped;
}

/* Tries the disk cache; returns the program or NULL (and counts a reject). */
static cl_program load_cached(clpa_context *ctx, const char *key, const char *options) {
  size_t len = 0;
  unsigned char *bin = clpa_disk_cache_load(ctx, key, &len);
  if (!bin) return NULL;
  cl_program prog = from_binary(ctx, bin, len, options);
  if (!prog) ctx->stats.disk_rejected++;
  return prog;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

char *clpa_options_canonical(const char *options) {
  if (!options) options = "";
  size_t len = strlen(options);
  char *copy = malloc(len + 1), *out = malloc(len + 1);
  char **words = malloc(sizeof(char *) * (len / 2 + 1));
  size_t n = 0;
  if (!copy || !out || !words) {
    free(copy), free(out), free(words);
    return NULL;
  }
  memcpy(copy, options, len + 1);
  char *rest = NULL; /* strtok_r: contexts build in parallel threads, strtok's state is global */
  for (char *w = strtok_r(copy, " \t\n", &rest); w; w = strtok_r(NULL, " \t\n", &rest)) {
    /* "-D name" is "-Dname" (OpenCL takes both): one word, or sorting would part them. The
     * next word lies past this one's end, so it moves down in place. */
    if (n && (strcmp(words[n - 1], "-D") == 0 || strcmp(words[n - 1], "-I") == 0))
      memmove(words[n - 1] + 2, w, strlen(w) + 1);
    else
      words[n++] = w;
  }
  qsort(words, n, sizeof *words, cmp_str);
  out[0] = '\0';
  for (size_t i = 0, o = 0; i < n; i++) {
    if (i && strcmp(words[i], words[i - 1]) == 0) continue; /* a repeated define means one */
    size_t wl = strlen(words[i]);
    if (o) out[o++] = ' ';
    memcpy(out + o, words[i], wl + 1);
    o += wl;
  }
  free(copy);
  free(words);
  return out;
}

/* The full option string: the lane path, the caller's options and the
 * OpenCL C version decode's in-launch merge needs (context.c's
 * pick_merge), in canonical order. */
static char *full_options(const clpa_context *ctx, const char *options) {
  const char *std = strstr(options, "-DCLPA_MERGE=1") ? ctx->merge_std : "";
  size_t n = strlen(options) + strlen(std) + 96;
  char *s = malloc(n);
  if (!s) return NULL;
  snprintf(s, n, "-DCLPA_LANES=%d %s %s", (int)ctx->lanes, std, options);
  char *c = clpa_options_canonical(s);
  free(s);
  return c;
}

/* The cache entry of a family's program for these options, built (or
 * loaded from disk) on first use. */
static clpa_status program_entry(clpa_context *ctx, const char *family, const char *options,
                                 clpa_program_entry **out) {
  if (!options) options = "";
  const clpa_family *fam = clpa_family_find(family);
  const clpa_cl_source *texts[MAX_TEXTS];
  size_t ntexts = fam ? program_texts(fam, texts) : 0;
  CLPA_CTX_CHECK(ctx, ntexts == 0, CLPA_ERR_INVALID_ARG, "unknown kernel family '%s'", family);
  char *opts = full_options(ctx, options);
  size_t klen = strlen(family) + 2 + (opts ? strlen(opts) : 0);
  char *mkey = opts ? malloc(klen) : NULL;
  if (!mkey) {
    free(opts);
    return CLPA_FAIL(ctx->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  }
  snprintf(mkey, klen, "%s\n%s", family, opts);
  for (clpa_program_entry *e = ctx->programs; e; e = e->next)
    if (strcmp(e->key, mkey) == 0) {
      ctx->stats.memory_hits++;
      free(mkey);
      free(opts);
      *out = e;
      return CLPA_OK;
    }

  double t0 = now_seconds();
  cl_program prog = NULL;
  clpa_status st = CLPA_OK;
  char *dkey = NULL;
  if (ctx->binary_cache) {
    dkey = cache_key_text(ctx, family, source_hash(texts, ntexts), opts);
    if (dkey) prog = load_cached(ctx, dkey, opts);
    if (prog) ctx->stats.loaded_from_disk++;
  }
  if (!prog) {
    st = build_from_source(ctx, texts, ntexts, family, opts, &prog);
    if (st == CLPA_OK) {
      prog = with_register_cap(ctx, prog, opts);
      ctx->stats.built_from_source++;
      size_t blen = 0;
      unsigned char *bin = dkey ? program_binary(ctx, prog, &blen) : NULL;
      if (bin) clpa_disk_cache_store(ctx, dkey, bin, blen);
      free(bin);
    }
  }
  ctx->stats.build_seconds += now_seconds() - t0;
  free(dkey);
  free(opts);
  clpa_program_entry *e = NULL;
  if (st == CLPA_OK && !(e = malloc(sizeof *e))) {
    clReleaseProgram(prog);
    st = CLPA_FAIL(ctx->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  }
  if (st != CLPA_OK) {
    free(mkey);
    return st;
  }
  memset(e, 0, sizeof *e);
  e->key = mkey;
  e->program = prog;
  e->next = ctx->programs;
  ctx->programs = e;
  *out = e;
  return CLPA_OK;
}

clpa_status clpa_program_get_internal(clpa_context *ctx, const char *family, const char *options,
                                      cl_program *out) {
  clpa_program_entry *e;
  clpa_status st = program_entry(ctx, family, options, &e);
  if (st == CLPA_OK) *out = e->program;
  return st;
}

void clpa_programs_release(clpa_context *ctx) {
  clpa_program_entry *e = ctx->programs;
  while (e) {
    clpa_program_entry *next = e->next;
    for (size_t i = 0; i < sizeof e->kernels / sizeof *e->kernels; i++) {
      if (e->kernels[i]) clReleaseKernel(e->kernels[i]);
      free(e->kernel_names[i]);
    }
    clReleaseProgram(e->program);
    free(e->key);
    free(e);
    e = next;
  }
  ctx->programs = NULL;
}

static clpa_status clpa_program_get_impl(clpa_context *ctx, const char *family, const char *options, cl_program *out) {
  CLPA_CHECK(NULL, !ctx, CLPA_ERR_INVALID_ARG, "ctx must not be NULL");
  CLPA_CTX_CHECK(ctx, !family || !out, CLPA_ERR_INVALID_ARG, "family and out must not be NULL");
  return clpa_program_get_internal(ctx, family, options, out);
}

clpa_status clpa_program_get(clpa_context *ctx, const char *family, const char *options,
                             cl_program *out) {
  CLPA_API_CALL(clpa_program_get_impl(ctx, family, options, out));
}

clpa_status clpa_context_program_stats(const clpa_context *ctx, clpa_program_stats *out) {
  CLPA_CHECK(NULL, !ctx || !out, CLPA_ERR_INVALID_ARG, "ctx and out must not be NULL");
  *out = ctx->stats;
  return CLPA_OK;
}

clpa_status clpa_kernel_create(clpa_context *ctx, const char *family, const char *options,
                               const char *name, cl_kernel *out) {
  clpa_program_entry *e;
  clpa_status st = program_entry(ctx, family, options, &e);
  if (st != CLPA_OK) return st;
  const size_t slots = sizeof e->kernels / sizeof *e->kernels;
  size_t slot = 0;
  for (; slot < slots && e->kernels[slot]; slot++)
    if (strcmp(e->kernel_names[slot], name) == 0) {
      CLPA_CL_CHECK(ctx, clRetainKernel(e->kernels[slot]), "clRetainKernel");
      *out = e->kernels[slot];
      return CLPA_OK;
    }
  cl_int err;
  cl_kernel k = clCreateKernel(e->program, name, &err);
  if (err != CL_SUCCESS) return CLPA_CL_FAIL(ctx, err, name);
  /* A full cache, or no memory for the name, only costs a later clCreateKernel. */
  if (slot < slots && (e->kernel_names[slot] = strdup(name)) != NULL) {
    if (clRetainKernel(k) == CL_SUCCESS) {
      e->kernels[slot] = k;
    } else {
      free(e->kernel_names[slot]);
      e->kernel_names[slot] = NULL;
    }
  }
  *out = k;
  return CLPA_OK;
}
