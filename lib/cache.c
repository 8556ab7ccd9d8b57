/*
 * cache.c — the KV cache object: sizing, allocation into arenas, wrapping
 * the application's buffers, host caches for swapping.
 *
 * An owned cache packs its 2 * num_layers slices (K0, V0, K1, V1, ...)
 * into arenas, each as many slices as the device's largest allocation
 * holds; a slice starts on a multiple of the device's base-address
 * alignment (so it can be a sub-buffer) and the kernels get sub-buffers.
 *
 *   arena 0: | K0 |pad| V0 |pad| K1 |pad| ... |      slice_stride apart
 *   arena 1: | Kn |pad| Vn |pad| ...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blocks_args.h"
#include "internal.h"

/* clpa_blocks_zero's parameters, from their list (cl/blocks_args.h). */
static const clpa_param zero_params[] = {BLOCKS_ZERO_ARG_LIST(CLPA_PARAM_OF, )};
#define ZERO_SLOT(kind, type, name) BLOCKS_ZERO_ARG_##name,
enum { BLOCKS_ZERO_ARG_LIST(ZERO_SLOT, ) BLOCKS_ZERO_NUM_ARGS };

#define MIN_ALIGN 256 /* bytes: at least CL_DEVICE_MEM_BASE_ADDR_ALIGN, and good for bandwidth */

void clpa_cache_config_init(clpa_cache_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->num_layers = 1;
  cfg->block_size = 16;
  cfg->dtype = CLPA_DTYPE_F16;
  cfg->placement = CLPA_CACHE_DEVICE;
  cfg->pinned = 1;
}

/* a * b, or 0 when it passes 2^62 (every caller treats 0 as "too big"). */
static uint64_t mul_capped(uint64_t a, uint64_t b) {
  const uint64_t cap = (uint64_t)1 << 62;
  if (a && b > cap / a) return 0;
  return a * b;
}

/* Bytes of one block of one slice; 0 for an invalid shape. */
static uint64_t block_bytes_of(const clpa_cache_config *c) {
  size_t es = clpa_dtype_size(c->dtype);
  if (es == 0 || c->num_kv_heads <= 0 || c->head_size <= 0 || c->block_size <= 0) return 0;
  if (c->head_size % (int32_t)(16 / es) != 0) return 0;
  return mul_capped(mul_capped((uint64_t)c->num_kv_heads * (uint64_t)c->head_size,
                               (uint64_t)c->block_size), es);
}

uint64_t clpa_cache_bytes_per_block(const clpa_cache_config *cfg) {
  if (!cfg || cfg->num_layers <= 0) return 0;
  return mul_capped(block_bytes_of(cfg), 2 * (uint64_t)cfg->num_layers);
}

static clpa_status check_shape(char *err, const clpa_cache_config *c) {
  CLPA_CHECK(err, !c, CLPA_ERR_INVALID_ARG, "cfg must not be NULL");
  CLPA_CHECK_RESERVED(err, c, "cfg->");
  CLPA_CHECK(err, c->num_layers <= 0, CLPA_ERR_INVALID_ARG, "cfg->num_layers = %d (must be > 0)",
             c->num_layers);
  CLPA_CHECK(err, c->num_layers > INT32_MAX / 2, CLPA_ERR_INVALID_ARG,
             "cfg->num_layers = %d is too large", c->num_layers);
  CLPA_CHECK(err, c->num_kv_heads <= 0, CLPA_ERR_INVALID_ARG,
             "cfg->num_kv_heads = %d (must be > 0)", c->num_kv_heads);
  CLPA_CHECK(err, c->block_size <= 0, CLPA_ERR_INVALID_ARG, "cfg->block_size = %d (must be > 0)",
             c->block_size);
  size_t es = clpa_dtype_size(c->dtype);
  CLPA_CHECK(err, es == 0, CLPA_ERR_INVALID_ARG, "cfg->dtype = %d is not a clpa_dtype",
             (int)c->dtype);
  CLPA_CHECK(err, c->head_size <= 0 || c->head_size % (int32_t)(16 / es) != 0,
             CLPA_ERR_INVALID_ARG,
             "cfg->head_size = %d (must be > 0 and a multiple of x = %d, 16 bytes of %s)",
             c->head_size, (int)(16 / es), clpa_dtype_name(c->dtype));
  CLPA_CHECK(err, clpa_cache_bytes_per_block(c) == 0, CLPA_ERR_INVALID_ARG,
             "cfg: %d layers x %d heads x %d x %d tokens of %s is too large a block",
             c->num_layers, c->num_kv_heads, c->head_size, c->block_size,
             clpa_dtype_name(c->dtype));
  CLPA_CHECK(err, c->num_blocks < 0, CLPA_ERR_INVALID_ARG, "cfg->num_blocks = %d",
             c->num_blocks);
  CLPA_CHECK(err, (unsigned)c->placement > CLPA_CACHE_HOST, CLPA_ERR_INVALID_ARG,
             "cfg->placement = %d", (int)c->placement);
  CLPA_CHECK(err, c->pinned != 0 && c->pinned != 1, CLPA_ERR_INVALID_ARG,
             "cfg->pinned = %d (expected 0 or 1)", c->pinned);
  CLPA_CHECK(err, (unsigned)c->layout >= CLPA_KV_LAYOUT_COUNT_, CLPA_ERR_INVALID_ARG,
             "cfg->layout = %d is not a clpa_kv_layout_kind (split_key 0, hnd 1, nhd 2)",
             (int)c->layout);
  CLPA_CHECK(err, c->reserved32 != 0, CLPA_ERR_INVALID_ARG,
             "cfg->reserved32 = %d (reserved words must be 0: fill the struct with its _init"
             " function)", (int)c->reserved32);
  clpa_kv_layout l; /* what the ops will take: refused here, not at the first op */
  const clpa_status st =
      clpa_kv_layout_init_kind(&l, c->layout, c->dtype, 0, c->block_size, c->num_kv_heads,
                               c->head_size);
  return st == CLPA_OK ? st : clpa_err_within(err, st, "cfg");
}

static void fill_info(clpa_cache *c, const clpa_cache_config *cfg, int32_t num_blocks) {
  clpa_cache_info *in = &c->info;
  in->num_layers = cfg->num_layers;
  in->num_kv_heads = cfg->num_kv_heads;
  in->head_size = cfg->head_size;
  in->block_size = cfg->block_size;
  in->num_blocks = num_blocks;
  in->dtype = cfg->dtype;
  in->x = (int32_t)(16 / clpa_dtype_size(cfg->dtype));
  in->block_bytes = block_bytes_of(cfg);
  in->layer_bytes = mul_capped(in->block_bytes, (uint64_t)num_blocks); /* 0: too big */
  in->bytes_per_block = clpa_cache_bytes_per_block(cfg);
  in->placement = cfg->placement;
  in->layout = cfg->layout;
}

static uint64_t round_up64(uint64_t a, uint64_t b) { return (a + b - 1) / b * b; }

static size_t device_align(const clpa_context *ctx) {
  cl_uint bits = 0;
  size_t a = MIN_ALIGN;
  if (clGetDeviceInfo(ctx->dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL) ==
          CL_SUCCESS &&
      bits / 8 > a)
    a = bits / 8;
  return a;
}

/* Blocks that mem_fraction of the device's memory holds, leaving room for
 * the alignment padding and within the largest allocation. */
static clpa_status blocks_from_fraction(clpa_context *ctx, const clpa_cache_config *cfg,
                                        uint64_t block_bytes, size_t align, uint64_t max_alloc,
                                        int32_t *out) {
  CLPA_CTX_CHECK(ctx, cfg->mem_fraction == 0.0, CLPA_ERR_INVALID_ARG,
                 "cfg->num_blocks and cfg->mem_fraction are both 0: set num_blocks (blocks per "
                 "layer) or mem_fraction (the share of the device's %llu bytes the cache may "
                 "take, in (0, 1]; what the weights and activations need must stay free)",
                 (unsigned long long)ctx->info.global_mem_bytes);
  CLPA_CTX_CHECK(ctx, !(cfg->mem_fraction > 0.0 && cfg->mem_fraction <= 1.0),
                 CLPA_ERR_INVALID_ARG,
                 "cfg->mem_fraction = %g (with num_blocks 0 it must be in (0, 1])",
                 cfg->mem_fraction);
  const uint64_t bpb = clpa_cache_bytes_per_block(cfg);
  double budget = cfg->mem_fraction * (double)ctx->info.global_mem_bytes -
                  2.0 * cfg->num_layers * (double)align;
  double nb = budget > 0 ? budget / (double)bpb : 0;
  uint64_t by_alloc = max_alloc / block_bytes;
  if (nb > (double)by_alloc) nb = (double)by_alloc;
  if (nb > (double)INT32_MAX) nb = (double)INT32_MAX;
  int32_t n = (int32_t)nb;
  while (n > 0 && round_up64((uint64_t)n * block_bytes, align) > max_alloc) n--;
  CLPA_CTX_CHECK(ctx, n < 1, CLPA_ERR_DEVICE_MEMORY,
                 "cfg->mem_fraction = %g of %llu bytes holds no block of %llu bytes",
                 cfg->mem_fraction, (unsigned long long)ctx->info.global_mem_bytes,
                 (unsigned long long)bpb);
  *out = n;
  return CLPA_OK;
}

void clpa_cache_destroy(clpa_cache *c) {
  if (!c) return;
  const int nslices = 2 * c->info.num_layers;
  if (c->info.placement == CLPA_CACHE_HOST && c->ctx->queue) clFinish(c->ctx->queue);
  if (c->slices)
    for (int i = 0; i < nslices; i++)
      if (c->slices[i].mem) clReleaseMemObject(c->slices[i].mem);
  if (c->arenas)
    for (int a = 0; a < c->info.num_arenas; a++) {
      clpa_cache_arena *ar = &c->arenas[a];
      if (!ar->owned) continue;
      if (ar->mem && ar->host)
        clEnqueueUnmapMemObject(c->ctx->queue, ar->mem, ar->host, 0, NULL, NULL);
      else
        free(ar->host);
      if (ar->mem) clReleaseMemObject(ar->mem);
    }
  free(c->arenas);
  free(c->slices);
  free(c);
}

/* The arena plan: slice_stride, how many slices per arena, the arenas. */
static clpa_status plan_arenas(clpa_context *ctx, clpa_cache *c, size_t align,
                               uint64_t max_alloc) {
  const clpa_cache_info *in = &c->info;
  const int nslices = 2 * in->num_layers;
  CLPA_CTX_CHECK(ctx, in->layer_bytes == 0, CLPA_ERR_DEVICE_MEMORY,
                 "cfg->num_blocks = %d blocks of %llu bytes: one layer's key cache passes 2^62"
                 " bytes", in->num_blocks, (unsigned long long)in->block_bytes);
  const uint64_t stride = round_up64(in->layer_bytes, align);
  CLPA_CTX_CHECK(ctx, stride > max_alloc || stride > SIZE_MAX, CLPA_ERR_DEVICE_MEMORY,
                 "one layer's key cache takes %llu bytes (%d blocks of %llu); %s at most %llu"
                 " bytes per buffer", (unsigned long long)in->layer_bytes, in->num_blocks,
                 (unsigned long long)in->block_bytes,
                 max_alloc < ctx->info.max_alloc_bytes ? "cfg->max_arena_bytes allows"
                                                       : "the device allocates",
                 (unsigned long long)max_alloc);
  uint64_t per = max_alloc / stride;
  if (per > (uint64_t)nslices) per = (uint64_t)nslices;
  const int narenas = (int)((nslices + per - 1) / per);
  const uint64_t total = mul_capped(stride, (uint64_t)nslices);
  CLPA_CTX_CHECK(ctx, in->placement == CLPA_CACHE_DEVICE &&
                          (total == 0 || total > ctx->info.global_mem_bytes),
                 CLPA_ERR_DEVICE_MEMORY,
                 "%d blocks x %llu bytes per block need %llu bytes; the device has %llu",
                 in->num_blocks, (unsigned long long)in->bytes_per_block,
                 (unsigned long long)total, (unsigned long long)ctx->info.global_mem_bytes);
  c->slice_stride = (size_t)stride;
  c->arenas = calloc((size_t)narenas, sizeof *c->arenas);
  c->slices = calloc((size_t)nslices, sizeof *c->slices);
  CLPA_CTX_CHECK(ctx, !c->arenas || !c->slices, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  c->info.num_arenas = narenas;
  for (int a = 0; a < narenas; a++) {
    clpa_cache_arena *ar = &c->arenas[a];
    ar->first_slice = a * (int)per;
    ar->num_slices = nslices - ar->first_slice < (int)per ? nslices - ar->first_slice : (int)per;
    ar->size = (size_t)stride * (size_t)ar->num_slices;
    ar->owned = 1;
    for (int s = 0; s < ar->num_slices; s++) {
      c->slices[ar->first_slice + s].arena = a;
      c->slices[ar->first_slice + s].offset = (size_t)stride * (size_t)s;
    }
    c->info.allocated_bytes += ar->size;
  }
  return CLPA_OK;
}

/* Device arenas: buffers, sub-buffers, zeroed by clpa_cache_zero; waits
 * for it, so that a lazily allocating device fails here. */
static clpa_status alloc_device(clpa_context *ctx, clpa_cache *c) {
  const int narenas = c->info.num_arenas;
  cl_int err = CL_SUCCESS;
  for (int a = 0; a < narenas; a++) {
    c->arenas[a].mem = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, c->arenas[a].size, NULL, &err);
    if (err != CL_SUCCESS) {
      c->arenas[a].mem = NULL;
      return CLPA_FAIL(ctx->error, err == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
                                           err == CL_INVALID_BUFFER_SIZE ||
                                           err == CL_OUT_OF_RESOURCES
                                       ? CLPA_ERR_DEVICE_MEMORY
                                       : clpa_status_from_cl(err),
                       "clCreateBuffer(cache arena %d, %zu bytes) failed: %s", a,
                       c->arenas[a].size, clpa_cl_error_name(err));
    }
  }
  for (int s = 0; s < 2 * c->info.num_layers; s++) {
    clpa_cache_slice *sl = &c->slices[s];
    cl_buffer_region region = {sl->offset, (size_t)c->info.layer_bytes};
    sl->mem = clCreateSubBuffer(c->arenas[sl->arena].mem, CL_MEM_READ_WRITE,
                                CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
    if (err != CL_SUCCESS) {
      sl->mem = NULL;
      return CLPA_CL_FAIL(ctx, err, "clCreateSubBuffer(cache layer)");
    }
  }
  cl_kernel k;
  clpa_status st = clpa_family_kernel(ctx, &clpa_family_blocks, NULL, "clpa_blocks_zero", &k);
  if (st != CLPA_OK) return st;
  cl_event *evs = calloc((size_t)narenas, sizeof *evs);
  if (!evs) {
    clReleaseKernel(k);
    return CLPA_FAIL(ctx->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  }
  int n = 0;
  for (; n < narenas && st == CLPA_OK; n++) {
    cl_ulong words = c->arenas[n].size / 16;
    size_t global = (size_t)(ctx->info.compute_units ? ctx->info.compute_units : 1) * 2048;
    if (global > words) global = (size_t)words;
    const clpa_arg args[BLOCKS_ZERO_NUM_ARGS] = {[BLOCKS_ZERO_ARG_p] = CLPA_ARG(c->arenas[n].mem),
                                                 [BLOCKS_ZERO_ARG_n] = CLPA_ARG(words)};
    const clpa_ndrange r = {1, {global}, {0}, 0, NULL, &evs[n]};
    st = clpa_enqueue_listed(ctx, k, "clpa_blocks_zero", zero_params, args, BLOCKS_ZERO_NUM_ARGS,
                             &r);
  }
  clReleaseKernel(k);
  if (st != CLPA_OK) n--; /* the failed enqueue gave no event */
  cl_int werr = n > 0 ? clWaitForEvents((cl_uint)n, evs) : CL_SUCCESS;
  cl_int bad = err;
  for (int i = 0; i < n; i++) {
    cl_int status = CL_COMPLETE;
    const cl_int qerr =
        clGetEventInfo(evs[i], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
    if (qerr != CL_SUCCESS) status = qerr; /* the status unknown: the query's error instead */
    if (status < 0 && bad == CL_SUCCESS) bad = status;
    clReleaseEvent(evs[i]);
  }
  free(evs);
  if (st != CLPA_OK) return st;
  if (bad == CL_SUCCESS) bad = werr;
  if (bad != CL_SUCCESS)
    return CLPA_FAIL(ctx->error, CLPA_ERR_DEVICE_MEMORY,
                     "zeroing %llu bytes of cache failed (%s): the device cannot hold it",
                     (unsigned long long)c->info.allocated_bytes, clpa_cl_error_name(bad));
  return CLPA_OK;
}

/* Host arenas: pinned (a mapped CL_MEM_ALLOC_HOST_PTR buffer, which
 * drivers transfer from by DMA) or plain memory; zeroed, which also makes
 * the OS commit the pages now. */
static int alloc_pinned(clpa_context *ctx, clpa_cache_arena *ar) {
  cl_int err;
  ar->mem = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, ar->size, NULL,
                           &err);
  if (err != CL_SUCCESS) {
    ar->mem = NULL;
    return 0;
  }
  ar->host = clEnqueueMapBuffer(ctx->queue, ar->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                ar->size, 0, NULL, NULL, &err);
  if (err != CL_SUCCESS || !ar->host) {
    clReleaseMemObject(ar->mem);
    ar->mem = NULL;
    ar->host = NULL;
    return 0;
  }
  return 1;
}

static clpa_status alloc_host(clpa_context *ctx, clpa_cache *c, int pinned) {
  const int narenas = c->info.num_arenas;
  int all_pinned = pinned;
  for (int a = 0; a < narenas && all_pinned; a++) all_pinned = alloc_pinned(ctx, &c->arenas[a]);
  if (!all_pinned) /* give back what was pinned; use plain memory throughout */
    for (int a = 0; a < narenas; a++) {
      clpa_cache_arena *ar = &c->arenas[a];
      if (ar->mem) {
        clEnqueueUnmapMemObject(ctx->queue, ar->mem, ar->host, 0, NULL, NULL);
        clReleaseMemObject(ar->mem);
        ar->mem = NULL;
        ar->host = NULL;
      }
    }
  if (!all_pinned) clFinish(ctx->queue);
  for (int a = 0; a < narenas; a++) {
    clpa_cache_arena *ar = &c->arenas[a];
    if (!ar->host) ar->host = malloc(ar->size);
    CLPA_CTX_CHECK(ctx, !ar->host, CLPA_ERR_OUT_OF_MEMORY,
                   "out of host memory for %zu bytes of host cache", ar->size);
    memset(ar->host, 0, ar->size);
  }
  for (int s = 0; s < 2 * c->info.num_layers; s++)
    c->slices[s].host = c->arenas[c->slices[s].arena].host + c->slices[s].offset;
  c->info.pinned = all_pinned;
  return CLPA_OK;
}

static clpa_status clpa_cache_create_impl(clpa_context *ctx, const clpa_cache_config *cfg, clpa_cache **out) {
  CLPA_CHECK(NULL, !ctx, CLPA_ERR_INVALID_ARG, "ctx must not be NULL");
  CLPA_CTX_CHECK(ctx, !out, CLPA_ERR_INVALID_ARG, "out must not be NULL");
  *out = NULL;
  clpa_status st = check_shape(ctx->error, cfg);
  if (st != CLPA_OK) return st;
  CLPA_CTX_CHECK(ctx, cfg->placement == CLPA_CACHE_HOST && cfg->num_blocks == 0,
                 CLPA_ERR_INVALID_ARG,
                 "cfg->num_blocks = 0: a host cache needs an explicit number of blocks");
  const uint64_t block_bytes = block_bytes_of(cfg);
  const size_t align = device_align(ctx);
  uint64_t max_alloc = ctx->info.max_alloc_bytes;
  if (cfg->max_arena_bytes && cfg->max_arena_bytes < max_alloc) max_alloc = cfg->max_arena_bytes;
  int32_t num_blocks = cfg->num_blocks;
  if (num_blocks == 0 &&
      (st = blocks_from_fraction(ctx, cfg, block_bytes, align, max_alloc, &num_blocks)) != CLPA_OK)
    return st;
  clpa_cache *c = calloc(1, sizeof *c);
  CLPA_CTX_CHECK(ctx, !c, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  c->ctx = ctx;
  fill_info(c, cfg, num_blocks);
  st = plan_arenas(ctx, c, align, max_alloc);
  if (st == CLPA_OK)
    st = cfg->placement == CLPA_CACHE_DEVICE ? alloc_device(ctx, c) : alloc_host(ctx, c, cfg->pinned);
  if (st != CLPA_OK) {
    clpa_cache_destroy(c);
    return st;
  }
  *out = c;
  return CLPA_OK;
}

clpa_status clpa_cache_create(clpa_context *ctx, const clpa_cache_config *cfg, clpa_cache **out) {
  CLPA_API_CALL(clpa_cache_create_impl(ctx, cfg, out));
}

static clpa_status clpa_cache_wrap_impl(clpa_context *ctx, const clpa_cache_config *cfg, const cl_mem *key_caches, const cl_mem *value_caches, clpa_cache **out) {
  CLPA_CHECK(NULL, !ctx, CLPA_ERR_INVALID_ARG, "ctx must not be NULL");
  CLPA_CTX_CHECK(ctx, !out, CLPA_ERR_INVALID_ARG, "out must not be NULL");
  *out = NULL;
  clpa_status st = check_shape(ctx->error, cfg);
  if (st != CLPA_OK) return st;
  CLPA_CTX_CHECK(ctx, cfg->placement != CLPA_CACHE_DEVICE, CLPA_ERR_INVALID_ARG,
                 "cfg->placement must be CLPA_CACHE_DEVICE to wrap buffers");
  CLPA_CTX_CHECK(ctx, !key_caches || !value_caches, CLPA_ERR_INVALID_ARG,
                 "key_caches and value_caches must not be NULL");
  const uint64_t block_bytes = block_bytes_of(cfg);
  const int nslices = 2 * cfg->num_layers;
  uint64_t min_blocks = UINT64_MAX;
  const uint64_t need = mul_capped(block_bytes, (uint64_t)cfg->num_blocks);
  CLPA_CTX_CHECK(ctx, cfg->num_blocks > 0 && (need == 0 || need > SIZE_MAX), CLPA_ERR_INVALID_ARG,
                 "cfg->num_blocks = %d blocks of %llu bytes do not fit in memory", cfg->num_blocks,
                 (unsigned long long)block_bytes);
  char name[64];
  for (int s = 0; s < nslices; s++) {
    cl_mem m = (s & 1) ? value_caches[s / 2] : key_caches[s / 2];
    snprintf(name, sizeof name, "%s[%d]", (s & 1) ? "value_caches" : "key_caches", s / 2);
    if ((st = clpa_check_buffer(ctx, m, name, (size_t)need, 0)))
      return st;
    size_t size = 0;
    CLPA_CL_CHECK(ctx, clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, NULL),
                  "clGetMemObjectInfo(CL_MEM_SIZE)");
    if (size / block_bytes < min_blocks) min_blocks = size / block_bytes;
    for (int r = 0; r < s; r++) {
      cl_mem o = (r & 1) ? value_caches[r / 2] : key_caches[r / 2];
      CLPA_CTX_CHECK(ctx, o == m, CLPA_ERR_INVALID_ARG, "%s is the same buffer as %s[%d]", name,
                     (r & 1) ? "value_caches" : "key_caches", r / 2);
    }
  }
  int32_t num_blocks = cfg->num_blocks;
  if (num_blocks == 0) {
    CLPA_CTX_CHECK(ctx, min_blocks == 0, CLPA_ERR_INVALID_ARG,
                   "the smallest buffer holds no block of %llu bytes",
                   (unsigned long long)block_bytes);
    CLPA_CTX_CHECK(ctx, min_blocks > INT32_MAX, CLPA_ERR_UNSUPPORTED,
                   "the buffers hold %llu blocks (at most 2^31 - 1)",
                   (unsigned long long)min_blocks);
    num_blocks = (int32_t)min_blocks;
  }
  clpa_cache *c = calloc(1, sizeof *c);
  if (c) {
    c->arenas = calloc((size_t)nslices, sizeof *c->arenas);
    c->slices = calloc((size_t)nslices, sizeof *c->slices);
  }
  if (!c || !c->arenas || !c->slices) {
    if (c) free(c->arenas), free(c->slices);
    free(c);
    return CLPA_FAIL(ctx->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  }
  c->ctx = ctx;
  fill_info(c, cfg, num_blocks);
  c->info.wrapped = 1;
  c->info.num_arenas = nslices;
  c->slice_stride = (size_t)c->info.layer_bytes;
  for (int s = 0; s < nslices; s++) {
    cl_mem m = (s & 1) ? value_caches[s / 2] : key_caches[s / 2];
    const cl_int err =
        clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof c->arenas[s].size, &c->arenas[s].size, NULL);
    if (err != CL_SUCCESS) { /* answered above: the slices retained so far are released */
      clpa_cache_destroy(c);
      return CLPA_CL_FAIL(ctx, err, "clGetMemObjectInfo(CL_MEM_SIZE)");
    }
    clRetainMemObject(m);
    c->slices[s] = (clpa_cache_slice){m, s, 0, NULL};
    c->arenas[s].mem = m; /* borrowed: the slice holds the reference */
    c->arenas[s].first_slice = s;
    c->arenas[s].num_slices = 1;
  }
  *out = c;
  return CLPA_OK;
}

clpa_status clpa_cache_wrap(clpa_context *ctx, const clpa_cache_config *cfg,
                            const cl_mem *key_caches, const cl_mem *value_caches,
                            clpa_cache **out) {
  CLPA_API_CALL(clpa_cache_wrap_impl(ctx, cfg, key_caches, value_caches, out));
}

clpa_status clpa_cache_get_info(const clpa_cache *cache, clpa_cache_info *out) {
  CLPA_CHECK(NULL, !cache || !out, CLPA_ERR_INVALID_ARG, "cache and out must not be NULL");
  *out = cache->info;
  return CLPA_OK;
}

clpa_status clpa_cache_get_layout(const clpa_cache *cache, clpa_kv_layout *out) {
  CLPA_CHECK(NULL, !cache || !out, CLPA_ERR_INVALID_ARG, "cache and out must not be NULL");
  const clpa_cache_info *in = &cache->info;
  return clpa_kv_layout_init_kind(out, in->layout, in->dtype, in->num_blocks, in->block_size,
                                  in->num_kv_heads, in->head_size);
}

clpa_status clpa_cache_layer(clpa_context *ctx, const clpa_cache *cache, int32_t layer, cl_mem *k,
                             cl_mem *v, clpa_kv_layout *kv) {
  CLPA_CTX_CHECK(ctx, cache->ctx != ctx, CLPA_ERR_INVALID_ARG,
                 "cache was created on another clpa_context");
  CLPA_CTX_CHECK(ctx, cache->info.placement != CLPA_CACHE_DEVICE, CLPA_ERR_INVALID_ARG,
                 "cache is a host cache; kernels need a device cache");
  CLPA_CTX_CHECK(ctx, layer < 0 || layer >= cache->info.num_layers, CLPA_ERR_INVALID_ARG,
                 "layer = %d (the cache has %d layers)", layer, cache->info.num_layers);
  *k = cache->slices[2 * layer].mem;
  *v = cache->slices[2 * layer + 1].mem;
  return clpa_cache_get_layout(cache, kv);
}

static const clpa_cache_slice *slice_of(const clpa_cache *c, int32_t layer, int v) {
  if (!c || layer < 0 || layer >= c->info.num_layers) return NULL;
  return &c->slices[2 * layer + v];
}

cl_mem clpa_cache_key(const clpa_cache *cache, int32_t layer) {
  const clpa_cache_slice *s = slice_of(cache, layer, 0);
  return s ? s->mem : NULL;
}

cl_mem clpa_cache_value(const clpa_cache *cache, int32_t layer) {
  const clpa_cache_slice *s = slice_of(cache, layer, 1);
  return s ? s->mem : NULL;
}

void *clpa_cache_key_host(const clpa_cache *cache, int32_t layer) {
  const clpa_cache_slice *s = slice_of(cache, layer, 0);
  return s ? s->host : NULL;
}

void *clpa_cache_value_host(const clpa_cache *cache, int32_t layer) {
  const clpa_cache_slice *s = slice_of(cache, layer, 1);
  return s ? s->host : NULL;
}
