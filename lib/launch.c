/*
 * launch.c — the one launch path: kernel families as data (kernels.h),
 * their options rendered canonically, kernels fetched through the program
 * cache, arguments set from a list and the NDRange enqueued, every
 * OpenCL result checked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define T(spec, field, name) {name, offsetof(spec, field)}
static const clpa_tunable decode_tunables[] = {
    T(clpa_decode_spec, head_size, "HEAD_SIZE"),
    T(clpa_decode_spec, block_size, "BLOCK_SIZE"),
    T(clpa_decode_spec, kv_dtype, "KV_DTYPE"),
    T(clpa_decode_spec, io_dtype, "IO_DTYPE"),
    T(clpa_decode_spec, num_threads, "NUM_THREADS"),
    T(clpa_decode_spec, sg, "SG"),
    T(clpa_decode_spec, partition_size, "PARTITION_SIZE"),
    T(clpa_decode_spec, heads_per_wg, "HEADS_PER_WG"),
    T(clpa_decode_spec, key_vectors, "KEY_VECTORS"),
    T(clpa_decode_spec, maxnreg, "MAXNREG"),
    T(clpa_decode_spec, chunk, "CHUNK"),
    T(clpa_decode_spec, pipe, "PIPE"),
    T(clpa_decode_spec, merge, "MERGE"),
};
static const clpa_tunable reduce_tunables[] = {
    T(clpa_reduce_spec, head_size, "HEAD_SIZE"),
    T(clpa_reduce_spec, io_dtype, "IO_DTYPE"),
    T(clpa_reduce_spec, partition_size, "PARTITION_SIZE"),
};
static const clpa_tunable prefill_tunables[] = {
    T(clpa_prefill_spec, head_size, "HEAD_SIZE"),
    T(clpa_prefill_spec, block_size, "BLOCK_SIZE"),
    T(clpa_prefill_spec, kv_dtype, "KV_DTYPE"),
    T(clpa_prefill_spec, io_dtype, "IO_DTYPE"),
    T(clpa_prefill_spec, num_threads, "NUM_THREADS"),
    T(clpa_prefill_spec, rows, "ROWS"),
    T(clpa_prefill_spec, keys, "KEYS"),
    T(clpa_prefill_spec, stages, "STAGES"),
    T(clpa_prefill_spec, sparse, "SPARSE"),
    T(clpa_prefill_spec, maxnreg, "MAXNREG"),
    T(clpa_prefill_spec, vkeys, "VKEYS"),
};
static const clpa_tunable merge_tunables[] = {
    T(clpa_merge_spec, io_dtype, "IO_DTYPE"),
    T(clpa_merge_spec, num_threads, "NUM_THREADS"),
};
static const clpa_tunable xattn_tunables[] = {
    T(clpa_xattn_spec, head_size, "HEAD_SIZE"),
    T(clpa_xattn_spec, block_size, "BLOCK_SIZE"),
    T(clpa_xattn_spec, kv_dtype, "KV_DTYPE"),
    T(clpa_xattn_spec, io_dtype, "IO_DTYPE"),
};
static const clpa_tunable xattn_mma_tunables[] = {
    T(clpa_xattn_spec, head_size, "HEAD_SIZE"),
    T(clpa_xattn_spec, block_size, "BLOCK_SIZE"),
    T(clpa_xattn_spec, kv_dtype, "KV_DTYPE"),
    T(clpa_xattn_spec, io_dtype, "IO_DTYPE"),
    T(clpa_xattn_spec, num_threads, "NUM_THREADS"),
    T(clpa_xattn_spec, stride, "STRIDE"),
    T(clpa_xattn_spec, bcols, "BCOLS"),
    T(clpa_xattn_spec, rows, "ROWS"),
    T(clpa_xattn_spec, cols, "COLS"),
    T(clpa_xattn_spec, kc, "KC"),
    T(clpa_xattn_spec, stages, "STAGES"),
};
static const clpa_tunable cache_tunables[] = {T(clpa_cache_spec, kv_dtype, "KV_DTYPE")};
#undef T
#define N(a) (sizeof a / sizeof *a)

const clpa_family clpa_family_decode = {"decode", {"common", "kv", NULL}, decode_tunables,
                                        N(decode_tunables)};
/* decode_mma.cl and decode_rows.cl take decode's specification (SG unused: 0). */
const clpa_family clpa_family_decode_rows = {"decode_rows", {"common", "kv", NULL}, decode_tunables,
                                             N(decode_tunables)};
const clpa_family clpa_family_decode_mma = {"decode_mma", {"common", "kv", "mma", NULL},
                                            decode_tunables, N(decode_tunables)};
const clpa_family clpa_family_reduce = {"reduce", {"common", NULL}, reduce_tunables,
                                        N(reduce_tunables)};
/* Prefill's paths: prefill.cl (what they share), then each path's file. */
const clpa_family clpa_family_prefill_tiles = {"prefill_tiles", {"common", "kv", "prefill", NULL},
                                               prefill_tunables, N(prefill_tunables)};
const clpa_family clpa_family_prefill_rows = {"prefill_rows", {"common", "kv", "prefill", NULL},
                                              prefill_tunables, N(prefill_tunables)};
const clpa_family clpa_family_prefill_mma = {"prefill_mma",
                                             {"common", "kv", "mma", "prefill", NULL},
                                             prefill_tunables, N(prefill_tunables)};
const clpa_family clpa_family_merge = {"merge", {"common", NULL}, merge_tunables,
                                       N(merge_tunables)};
const clpa_family clpa_family_cache = {"cache", {"common", "kv", NULL}, cache_tunables,
                                       N(cache_tunables)};
const clpa_family clpa_family_xattn = {"xattn", {"common", "kv", NULL}, xattn_tunables,
                                       N(xattn_tunables)};
const clpa_family clpa_family_xattn_mma = {"xattn_mma", {"common", "kv", "mma", NULL},
                                           xattn_mma_tunables, N(xattn_mma_tunables)};
const clpa_family clpa_family_blocks = {"blocks", {"common", NULL}, NULL, 0};
const clpa_family clpa_family_smoke = {"smoke", {NULL}, NULL, 0};

const clpa_family *clpa_family_find(const char *name) {
  static const clpa_family *const all[] = {
      &clpa_family_decode, &clpa_family_reduce, &clpa_family_prefill_tiles,
      &clpa_family_prefill_rows, &clpa_family_prefill_mma, &clpa_family_merge,
      &clpa_family_cache,  &clpa_family_blocks, &clpa_family_smoke, &clpa_family_xattn,
      &clpa_family_decode_mma, &clpa_family_decode_rows, &clpa_family_xattn_mma};
  for (size_t i = 0; name && i < N(all); i++)
    if (strcmp(all[i]->name, name) == 0) return all[i];
  return NULL;
}

/* "-DCLPA_A=1 -DCLPA_B=2": the spec's tunables in the family's order. */
static clpa_status render_options(clpa_context *ctx, const clpa_family *f, const void *spec,
                                  char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < f->num_tunables; i++) {
    int32_t v;
    memcpy(&v, (const char *)spec + f->tunables[i].offset, sizeof v);
    int w = snprintf(buf + n, cap - n, "%s-DCLPA_%s=%d", i ? " " : "", f->tunables[i].name, (int)v);
    CLPA_CTX_CHECK(ctx, w < 0 || (size_t)w >= cap - n, CLPA_ERR_INVALID_ARG,
                   "options of kernel family '%s' do not fit %zu bytes", f->name, cap);
    n += (size_t)w;
  }
  return CLPA_OK;
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
  for (char *w = strtok(copy, " \t\n"); w; w = strtok(NULL, " \t\n")) words[n++] = w;
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

clpa_status clpa_family_kernel(clpa_context *ctx, const clpa_family *f, const void *spec,
                               const char *name, cl_kernel *out) {
  char opts[512];
  clpa_status st = render_options(ctx, f, spec, opts, sizeof opts);
  if (st != CLPA_OK) return st;
  return clpa_kernel_create(ctx, f->name, opts, name, out);
}

clpa_status clpa_enqueue(clpa_context *ctx, cl_kernel k, const char *name, const clpa_arg *args,
                         size_t num_args, const clpa_ndrange *r) {
  for (size_t i = 0; i < num_args; i++) {
    cl_int err = clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value);
    if (err != CL_SUCCESS)
      return clpa_err_set(ctx->error, clpa_status_from_cl(err), __func__,
                          "clSetKernelArg(%s, argument %zu) failed: %s (%d)", name, i,
                          clpa_cl_error_name(err), (int)err);
  }
  cl_int err = clEnqueueNDRangeKernel(ctx->queue, k, r->dims, NULL, r->global,
                                      r->local[0] ? r->local : NULL, r->num_wait_events,
                                      r->wait_events, r->event);
  if (err != CL_SUCCESS)
    return clpa_err_set(ctx->error, clpa_status_from_cl(err), __func__,
                        "clEnqueueNDRangeKernel(%s) failed: %s (%d)", name,
                        clpa_cl_error_name(err), (int)err);
  return CLPA_OK;
}
