/*
 * The cache object (lib/cache.c): sizes and bytes per block, creation
 * from a block count and from a fraction of device memory, host caches,
 * wrapping application buffers, and every refusal: a clear status, a
 * message naming the argument, *out left NULL. Requests the device cannot
 * hold (more than its memory, a layer larger than its largest allocation)
 * fail with CLPA_ERR_DEVICE_MEMORY before allocating anything.
 */
#include <stdio.h>

#include "cache_util.h"

static clpa_context *ctx;
static clpa_device_info dev;

static clpa_cache_config shape(int layers, int heads, int hs, int bs, clpa_dtype d, int blocks) {
  clpa_cache_config cfg;
  clpa_cache_config_init(&cfg);
  cfg.num_layers = layers, cfg.num_kv_heads = heads, cfg.head_size = hs, cfg.block_size = bs;
  cfg.dtype = d, cfg.num_blocks = blocks;
  return cfg;
}

static size_t mem_size(cl_mem m) {
  size_t s = 0;
  clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof s, &s, NULL);
  return s;
}

static int all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

static void test_defaults_and_sizes(void) {
  clpa_cache_config cfg;
  clpa_cache_config_init(&cfg);
  ok(cfg.num_layers == 1 && cfg.block_size == 16 && cfg.dtype == CLPA_DTYPE_F16 &&
         cfg.mem_fraction == 0 && cfg.placement == CLPA_CACHE_DEVICE && cfg.pinned == 1 &&
         cfg.num_blocks == 0 && cfg.num_kv_heads == 0,
     "config defaults");
  for (int d = 0; d < CLPA_DTYPE_COUNT_; d++) {
    cfg = shape(32, 8, 128, 16, (clpa_dtype)d, 0);
    uint64_t want = 2ull * 32 * 8 * 128 * 16 * clpa_dtype_size((clpa_dtype)d);
    ok(clpa_cache_bytes_per_block(&cfg) == want, "bytes per block, %s: %llu",
       clpa_dtype_name((clpa_dtype)d), (unsigned long long)want);
  }
  cfg = shape(1, 1, 120, 16, CLPA_DTYPE_FP8_E4M3, 0);
  ok(clpa_cache_bytes_per_block(&cfg) == 0, "bytes per block 0 for head_size 120 in fp8 (x = 16)");
  ok(clpa_cache_bytes_per_block(NULL) == 0, "bytes per block 0 for NULL");
}

static void test_create_count(void) {
  const int L = 3, nb = 10;
  clpa_cache_config cfg = shape(L, 2, 80, 16, CLPA_DTYPE_BF16, nb);
  clpa_cache *c = NULL;
  clpa_status st = clpa_cache_create(ctx, &cfg, &c);
  if (!ok(st == CLPA_OK && c, "create from a block count")) {
    diag("%s", clpa_last_error());
    return;
  }
  clpa_cache_info in;
  ok(clpa_cache_get_info(c, &in) == CLPA_OK, "get_info");
  const uint64_t bb = 2 * 80 * 16 * 2;
  ok(in.num_layers == L && in.num_blocks == nb && in.num_kv_heads == 2 && in.head_size == 80 &&
         in.block_size == 16 && in.dtype == CLPA_DTYPE_BF16 && in.x == 8,
     "info: shape");
  ok(in.block_bytes == bb && in.layer_bytes == bb * nb && in.bytes_per_block == 2 * L * bb,
     "info: block_bytes %llu, layer_bytes %llu, bytes_per_block %llu",
     (unsigned long long)in.block_bytes, (unsigned long long)in.layer_bytes,
     (unsigned long long)in.bytes_per_block);
  ok(in.num_arenas == 1 && in.allocated_bytes >= 2 * L * in.layer_bytes && !in.wrapped &&
         in.placement == CLPA_CACHE_DEVICE,
     "one arena of %llu bytes (padding included)", (unsigned long long)in.allocated_bytes);
  int distinct = 1, sized = 1, zero = 1;
  unsigned char *buf = malloc(in.layer_bytes);
  for (int s = 0; s < 2 * L; s++) {
    cl_mem m = slice_mem(c, s / 2, s & 1);
    sized &= m && mem_size(m) == in.layer_bytes;
    for (int r = 0; r < s; r++) distinct &= m != slice_mem(c, r / 2, r & 1);
    test_read(ctx, m, buf, in.layer_bytes);
    zero &= all_zero(buf, in.layer_bytes);
  }
  free(buf);
  ok(sized && distinct, "every layer's key and value: a distinct buffer of layer_bytes");
  ok(zero, "a new cache is zeroed");
  ok(!clpa_cache_key(c, L) && !clpa_cache_value(c, -1) && !clpa_cache_key(NULL, 0) &&
         !clpa_cache_key_host(c, 0) && !clpa_cache_value_host(c, 0),
     "no buffer for a bad layer, no host memory for a device cache");
  clpa_cache_destroy(c);
  clpa_cache_destroy(NULL);
  ok(clpa_cache_get_info(NULL, &in) == CLPA_ERR_INVALID_ARG, "get_info(NULL) refused");
}

static void test_create_fraction(void) {
  const double frac = 0.002;
  clpa_cache_config cfg = shape(2, 4, 64, 16, CLPA_DTYPE_F16, 0);
  cfg.mem_fraction = frac;
  clpa_cache *c = NULL;
  clpa_status st = clpa_cache_create(ctx, &cfg, &c);
  if (!ok(st == CLPA_OK, "create from mem_fraction %g", frac)) {
    diag("%s", clpa_last_error());
    return;
  }
  clpa_cache_info in;
  clpa_cache_get_info(c, &in);
  const double budget = frac * (double)dev.global_mem_bytes;
  const double bpb = (double)in.bytes_per_block;
  ok(in.num_blocks > 0 && in.num_blocks * bpb <= budget &&
         (in.num_blocks + 1) * bpb > budget - 2 * 2 * 65536.0,
     "%d blocks of %.0f bytes fill %g of %llu bytes", in.num_blocks, bpb, frac,
     (unsigned long long)dev.global_mem_bytes);
  ok(in.allocated_bytes <= budget, "allocated %llu bytes, within the budget",
     (unsigned long long)in.allocated_bytes);
  clpa_cache_destroy(c);
}

static void test_host(void) {
  for (int pinned = 0; pinned <= 1; pinned++) {
    clpa_cache_config cfg = shape(2, 2, 32, 8, CLPA_DTYPE_FP8_E5M2, 5);
    cfg.placement = CLPA_CACHE_HOST, cfg.pinned = pinned;
    clpa_cache *c = NULL;
    clpa_status st = clpa_cache_create(ctx, &cfg, &c);
    if (!ok(st == CLPA_OK, "host cache, pinned %d", pinned)) {
      diag("%s", clpa_last_error());
      continue;
    }
    clpa_cache_info in;
    clpa_cache_get_info(c, &in);
    int good = in.placement == CLPA_CACHE_HOST && (pinned || !in.pinned);
    for (int l = 0; l < 2; l++) {
      unsigned char *k = clpa_cache_key_host(c, l), *v = clpa_cache_value_host(c, l);
      good &= k && v && k != v && !clpa_cache_key(c, l) && !clpa_cache_value(c, l);
      good &= all_zero(k, in.layer_bytes) && all_zero(v, in.layer_bytes);
    }
    ok(good, "host memory per layer, zeroed, no cl_mem (%s)", in.pinned ? "pinned" : "plain");
    clpa_cache_destroy(c);
  }
}

static cl_uint refcount(cl_mem m) {
  cl_uint n = 0;
  clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof n, &n, NULL);
  return n;
}

static void test_wrap(void) {
  clpa_cache_config cfg = shape(2, 2, 64, 16, CLPA_DTYPE_F32, 0);
  const size_t bb = 2 * 64 * 16 * 4;
  cl_mem k[2] = {test_buffer(ctx, NULL, 9 * bb), test_buffer(ctx, NULL, 7 * bb + 100)};
  cl_mem v[2] = {test_buffer(ctx, NULL, 8 * bb), test_buffer(ctx, NULL, 12 * bb)};
  const cl_uint rc = refcount(k[1]);
  clpa_cache *c = NULL;
  clpa_status st = clpa_cache_wrap(ctx, &cfg, k, v, &c);
  ok(st == CLPA_OK, "wrap application buffers");
  if (c) {
    clpa_cache_info in;
    clpa_cache_get_info(c, &in);
    ok(in.num_blocks == 7 && in.wrapped && in.num_arenas == 4 && in.allocated_bytes == 0,
       "num_blocks 0: as many as the smallest buffer holds (%d)", in.num_blocks);
    ok(clpa_cache_key(c, 1) == k[1] && clpa_cache_value(c, 0) == v[0], "the layers are the buffers");
    ok(refcount(k[1]) == rc + 1, "the cache holds a reference");
    clpa_cache_destroy(c);
    ok(refcount(k[1]) == rc, "destroy gives it back");
  }
  cfg.num_blocks = 8;
  struct {
    const char *what, *needle;
    int n;
  } t[] = {{"a buffer too small", "key_caches[1] holds", 0},
           {"NULL arrays", "must not be NULL", 1},
           {"a NULL buffer", "value_caches[1] must not be NULL", 2},
           {"one buffer twice", "same buffer", 3},
           {"a host placement", "placement", 4},
           {"a buffer of another OpenCL context", "another OpenCL context", 5}};
  clpa_context *other = test_context(0);
  cl_mem foreign = NULL;
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    clpa_cache_config cf = cfg;
    cl_mem kk[2] = {k[0], k[1]}, vv[2] = {v[0], v[1]};
    const cl_mem *kp = kk;
    switch (t[i].n) {
      case 1: kp = NULL; break;
      case 2: vv[1] = NULL, cf.num_blocks = 7; break;
      case 3: vv[1] = k[0], cf.num_blocks = 7; break;
      case 4: cf.placement = CLPA_CACHE_HOST; break;
      case 5:
        cf.num_blocks = 7;
        foreign = clCreateBuffer(clpa_context_cl_context(other), CL_MEM_READ_WRITE, 20 * bb, NULL,
                                 NULL);
        vv[0] = foreign;
        break;
    }
    c = (clpa_cache *)&cfg; /* must come back NULL */
    st = clpa_cache_wrap(ctx, &cf, kp, vv, &c);
    if (!ok(st == CLPA_ERR_INVALID_ARG && !c && strstr(clpa_last_error(), t[i].needle) &&
                strncmp(clpa_last_error(), "clpa_cache_wrap: ", 17) == 0,
            "wrap refuses %s", t[i].what))
      diag("%s: %s", clpa_status_name(st), clpa_last_error());
  }
  if (foreign) clReleaseMemObject(foreign);
  clpa_context_destroy(other);
  for (int l = 0; l < 2; l++) clReleaseMemObject(k[l]), clReleaseMemObject(v[l]);
}

static void test_refusals(void) {
  struct {
    const char *needle;
    int field;
  } t[] = {{"cfg must not be NULL", 0}, {"num_layers", 1},  {"num_kv_heads", 2},
           {"head_size", 3},            {"head_size", 4},   {"block_size", 5},
           {"dtype", 6},                {"num_blocks", 7},  {"are both 0: set num_blocks", 8},
           {"mem_fraction", 9},         {"placement", 10},  {"pinned", 11},
           {"host cache needs", 12},    {"too large", 13},  {"32 bits", 14}};
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    clpa_cache_config cfg = shape(2, 2, 64, 16, CLPA_DTYPE_F16, 4), *cp = &cfg;
    switch (t[i].field) {
      case 0: cp = NULL; break;
      case 1: cfg.num_layers = 0; break;
      case 2: cfg.num_kv_heads = -1; break;
      case 3: cfg.head_size = 0; break;
      case 4: cfg.dtype = CLPA_DTYPE_FP8_E4M3, cfg.head_size = 120; break;
      case 5: cfg.block_size = 0; break;
      case 6: cfg.dtype = (clpa_dtype)9; break;
      case 7: cfg.num_blocks = -3; break;
      case 8: cfg.num_blocks = 0, cfg.mem_fraction = 0; break;
      case 9: cfg.num_blocks = 0, cfg.mem_fraction = 1.5; break;
      case 10: cfg.placement = (clpa_cache_placement)5; break;
      case 11: cfg.pinned = 2; break;
      case 12: cfg.placement = CLPA_CACHE_HOST, cfg.num_blocks = 0; break;
      case 13: cfg.num_layers = 1 << 20, cfg.num_kv_heads = 1 << 20, cfg.head_size = 1 << 20; break;
      case 14: /* a head's split-key tile past 2^31 - 1 elements (4 GiB were allocated) */
        cfg.num_layers = 1, cfg.num_kv_heads = 1, cfg.dtype = CLPA_DTYPE_FP8_E4M3;
        cfg.head_size = 16, cfg.block_size = (1 << 27) + 1, cfg.num_blocks = 1;
        break;
    }
    clpa_cache *c = (clpa_cache *)&cfg;
    clpa_status st = clpa_cache_create(ctx, cp, &c);
    const char *msg = clpa_context_last_error(ctx);
    if (!ok(st == CLPA_ERR_INVALID_ARG && !c && strstr(msg, t[i].needle), "create refuses: %s",
            t[i].needle))
      diag("%s: %s", clpa_status_name(st), msg);
  }
  clpa_cache_config cfg = shape(1, 1, 32, 16, CLPA_DTYPE_F16, 1);
  clpa_cache *c;
  ok(clpa_cache_create(NULL, &cfg, &c) == CLPA_ERR_INVALID_ARG, "create refuses a NULL ctx");
  ok(clpa_cache_create(ctx, &cfg, NULL) == CLPA_ERR_INVALID_ARG, "create refuses a NULL out");
}

/* More than the device holds: refused before any allocation. */
static void test_too_large(void) {
  /* one layer's key cache past the largest allocation */
  clpa_cache_config cfg = shape(1, 8, 128, 16, CLPA_DTYPE_F32, 0);
  const uint64_t bb = 8 * 128 * 16 * 4;
  cfg.num_blocks = (int32_t)(dev.max_alloc_bytes / bb + 1);
  clpa_cache *c = (clpa_cache *)&cfg;
  clpa_status st = clpa_cache_create(ctx, &cfg, &c);
  if (!ok(st == CLPA_ERR_DEVICE_MEMORY && !c && strstr(clpa_last_error(), "per buffer"),
          "a layer larger than the largest allocation (%d blocks)", cfg.num_blocks))
    diag("%s: %s", clpa_status_name(st), clpa_last_error());
  /* each layer fits an allocation, all of them not the device */
  cfg.num_blocks = (int32_t)(dev.max_alloc_bytes / 2 / bb);
  cfg.num_layers = (int32_t)(dev.global_mem_bytes / (dev.max_alloc_bytes / 2) / 2 + 2);
  c = (clpa_cache *)&cfg;
  st = clpa_cache_create(ctx, &cfg, &c);
  if (!ok(st == CLPA_ERR_DEVICE_MEMORY && !c && strstr(clpa_last_error(), "the device has"),
          "%d layers of %d blocks: more than the device's %llu bytes", cfg.num_layers,
          cfg.num_blocks, (unsigned long long)dev.global_mem_bytes))
    diag("%s: %s", clpa_status_name(st), clpa_last_error());
  /* a fraction too small for one block */
  cfg = shape(80, 64, 256, 32, CLPA_DTYPE_F32, 0);
  cfg.mem_fraction = 1e-9;
  c = (clpa_cache *)&cfg;
  st = clpa_cache_create(ctx, &cfg, &c);
  if (!ok(st == CLPA_ERR_DEVICE_MEMORY && !c && strstr(clpa_last_error(), "holds no block"),
          "a mem_fraction that holds no block"))
    diag("%s: %s", clpa_status_name(st), clpa_last_error());
  /* max_arena_bytes below one layer */
  cfg = shape(2, 2, 64, 16, CLPA_DTYPE_F16, 8);
  cfg.max_arena_bytes = 8 * 2 * 64 * 16 * 2 - 1;
  c = (clpa_cache *)&cfg;
  st = clpa_cache_create(ctx, &cfg, &c);
  if (!ok(st == CLPA_ERR_DEVICE_MEMORY && !c && strstr(clpa_last_error(), "max_arena_bytes"),
          "max_arena_bytes smaller than one layer's key cache"))
    diag("%s: %s", clpa_status_name(st), clpa_last_error());
  cfg.max_arena_bytes = 3 * 8 * 2 * 64 * 16 * 2;
  clpa_cache_info in = {0};
  st = clpa_cache_create(ctx, &cfg, &c);
  if (st == CLPA_OK) clpa_cache_get_info(c, &in);
  ok(st == CLPA_OK && in.num_arenas == 2, "arenas of at most three slices: 4 slices in %d arenas",
     in.num_arenas);
  clpa_cache_destroy(c);
  /* and the context still works */
  cfg = shape(1, 1, 32, 16, CLPA_DTYPE_F16, 2);
  ok(clpa_cache_create(ctx, &cfg, &c) == CLPA_OK, "a small cache after the refusals");
  clpa_cache_destroy(c);
}

/* regress_layer_bytes_wrap: one layer's key cache (block bytes x
 * num_blocks) was counted in 64 bits without a check, so a shape past
 * 2^64 bytes wrapped: to 0 (a division by zero planning the arenas) or to
 * a few bytes (a cache "of" 1.8e9 blocks of 10 GB in a buffer of 256
 * bytes, which reshape_and_cache and copy_blocks then address). Both are
 * refused before allocating, device and host caches alike. */
static void regress_layer_bytes_wrap(void) {
  /* fp8, heads of 16, blocks of 1 token: a block is 16 * num_kv_heads bytes */
  const struct {
    int32_t num_kv_heads, num_blocks;
    const char *what;
  } t[] = {{1 << 30, 1 << 30, "2^64 bytes (wraps to 0)"},
           {631832658, 1824726041, "2^64 + 32 bytes (wraps to 32)"}};
  for (size_t i = 0; i < sizeof t / sizeof *t; i++)
    for (int host = 0; host <= 1; host++) {
      clpa_cache_config cfg = shape(1, t[i].num_kv_heads, 16, 1, CLPA_DTYPE_FP8_E4M3,
                                    t[i].num_blocks);
      cfg.placement = host ? CLPA_CACHE_HOST : CLPA_CACHE_DEVICE;
      clpa_cache *c = (clpa_cache *)&cfg;
      clpa_status st = clpa_cache_create(ctx, &cfg, &c);
      const char *msg = clpa_context_last_error(ctx);
      if (!ok(st == CLPA_ERR_DEVICE_MEMORY && !c && strstr(msg, "cfg->num_blocks = ") &&
                  strncmp(msg, "clpa_cache_create: ", 19) == 0,
              "%s cache: a layer of %s refused", host ? "host" : "device", t[i].what)) {
        clpa_cache_info in = {0};
        if (st == CLPA_OK && c) clpa_cache_get_info(c, &in);
        diag("%s: %s (layer_bytes %llu)", clpa_status_name(st), msg,
             (unsigned long long)in.layer_bytes);
        if (st == CLPA_OK) clpa_cache_destroy(c);
      }
    }
}

int main(void) {
  rng_seed_from_env();
  ctx = test_context(0);
  clpa_context_device_info(ctx, &dev);
  test_defaults_and_sizes();
  test_create_count();
  test_create_fraction();
  test_host();
  test_wrap();
  test_refusals();
  test_too_large();
  regress_layer_bytes_wrap();
  clpa_context_destroy(ctx);
  return done_testing();
}
