/*
 * copy_blocks (cl/cache.cl, clpa_cache_copy_blocks) and swap_blocks
 * against plain host copies of the same bytes. Caches start as random
 * bytes; after each op every byte of every layer must equal what memcpy
 * of the listed blocks would give. Every dtype (the ops are dtype-blind,
 * but the block sizes differ), several layers, layer ranges, clpa's own
 * caches (one arena) and wrapped ones (one arena per buffer, so several
 * launches and a marker event), host pairs and device pairs (vLLM's int64
 * block_mapping, with a bad pair that must fault and be skipped), swaps
 * out to pinned and plain host caches and back in, device to device.
 * The ops copy whole blocks, which every layout kind keeps contiguous: a
 * few runs on HND and NHD caches, and a swap between kinds is refused.
 */
#include <stdio.h>

#include "cache_util.h"

static clpa_context *ctx;
static uint64_t arena_cap; /* cfg.max_arena_bytes of the device caches made */
static clpa_kv_layout_kind kind; /* cfg.layout of the caches made */

static clpa_cache *new_cache(clpa_dtype dtype, int layers, int blocks, clpa_cache_placement where,
                             int pinned) {
  clpa_cache_config cfg;
  clpa_cache_config_init(&cfg);
  cfg.num_layers = layers, cfg.num_kv_heads = 2, cfg.head_size = 64, cfg.block_size = 8;
  cfg.dtype = dtype, cfg.num_blocks = blocks, cfg.placement = where, cfg.pinned = pinned;
  cfg.max_arena_bytes = arena_cap, cfg.layout = kind;
  clpa_cache *c = NULL;
  if (clpa_cache_create(ctx, &cfg, &c) != CLPA_OK) diag("create: %s", clpa_last_error());
  return c;
}

/* The same shape as new_cache's, as application buffers (wrapped). */
static clpa_cache *wrapped_cache(clpa_dtype dtype, int layers, int blocks) {
  clpa_cache_config cfg;
  clpa_cache_config_init(&cfg);
  cfg.num_layers = layers, cfg.num_kv_heads = 2, cfg.head_size = 64, cfg.block_size = 8;
  cfg.dtype = dtype, cfg.layout = kind;
  size_t bytes = clpa_cache_bytes_per_block(&cfg) / (2 * (size_t)layers) * (size_t)blocks;
  cl_mem k[8], v[8];
  for (int l = 0; l < layers; l++) k[l] = test_buffer(ctx, NULL, bytes), v[l] = test_buffer(ctx, NULL, bytes);
  clpa_cache *c = NULL;
  if (clpa_cache_wrap(ctx, &cfg, k, v, &c) != CLPA_OK) diag("wrap: %s", clpa_last_error());
  for (int l = 0; l < layers; l++) clReleaseMemObject(k[l]), clReleaseMemObject(v[l]);
  return c;
}

static size_t block_bytes(const clpa_cache *c) {
  clpa_cache_info in;
  clpa_cache_get_info(c, &in);
  return (size_t)in.block_bytes;
}

/* Applies pairs to an image the way the op should: layers [l0, l1). */
static void host_copy(cache_image *dst, const cache_image *src, const clpa_block_copy *pairs,
                      int n, int l0, int l1, size_t bb) {
  for (int s = 2 * l0; s < 2 * l1; s++)
    for (int i = 0; i < n; i++)
      if (pairs[i].src >= 0)
        memcpy(dst->slices[s] + (size_t)pairs[i].dst * bb, src->slices[s] + (size_t)pairs[i].src * bb,
               bb);
}

static cache_image image_copy(const cache_image *im) {
  cache_image c = {im->n, im->bytes, calloc((size_t)im->n, sizeof(unsigned char *))};
  for (int s = 0; s < im->n; s++) {
    c.slices[s] = malloc(im->bytes);
    memcpy(c.slices[s], im->slices[s], im->bytes);
  }
  return c;
}

/* k distinct destinations and k sources disjoint from them, plus a
 * "no copy" entry as clpa_seq_append reports it. */
static int random_pairs(int blocks, int k, clpa_block_copy *out) {
  int *perm = malloc(sizeof(int) * (size_t)blocks);
  for (int i = 0; i < blocks; i++) perm[i] = i;
  for (int i = blocks - 1; i > 0; i--) {
    int j = (int)rng_below((uint32_t)i + 1), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  int n = 0;
  for (int i = 0; i < k; i++) {
    if (i == k / 2) out[n++] = (clpa_block_copy){-1, -1};
    out[n++] = (clpa_block_copy){perm[k + (int)rng_below((uint32_t)(blocks - k))], perm[i]};
  }
  free(perm);
  return n;
}

static void test_copy(clpa_dtype dtype, int wrapped, int l0, int nl) {
  const int layers = 3, blocks = 20;
  clpa_cache *c = wrapped ? wrapped_cache(dtype, layers, blocks)
                          : new_cache(dtype, layers, blocks, CLPA_CACHE_DEVICE, 0);
  const size_t bb = block_bytes(c);
  clpa_cache_info in;
  clpa_cache_get_info(c, &in);
  cache_image want = cache_randomize(ctx, c);
  cache_image orig = image_copy(&want);
  clpa_block_copy pairs[16];
  int n = random_pairs(blocks, 6, pairs);
  host_copy(&want, &orig, pairs, n, l0, nl ? l0 + nl : layers, bb);

  clpa_copy_blocks_params p;
  clpa_copy_blocks_params_init(&p);
  cl_event ev = NULL;
  p.cache = c, p.first_layer = l0, p.num_layers = nl, p.pairs = pairs, p.num_pairs = n;
  p.event = &ev;
  clpa_status st = clpa_copy_blocks(ctx, &p);
  if (!ok(st == CLPA_OK && ev, "copy_blocks %s%s layers %d+%d, %d arenas", clpa_dtype_name(dtype),
          wrapped ? " wrapped" : "", l0, nl, in.num_arenas))
    diag("%s", clpa_context_last_error(ctx));
  if (ev) clWaitForEvents(1, &ev), clReleaseEvent(ev);
  cache_image got = cache_snapshot(ctx, c);
  ok(image_equal(&got, &want, bb, "copy_blocks"), "copied blocks match a host copy, the rest untouched");
  test_no_faults(ctx, "after the copies");
  image_free(&got), image_free(&want);

  /* Device pairs, int64 [n, 2]: one out of range (faults, skipped), one
   * src < 0 (skipped quietly). */
  cache_image base = cache_snapshot(ctx, c);
  want = image_copy(&base);
  int64_t dp[2 * 4] = {3, 9, blocks + 5, 1, -1, 2, 4, 11};
  clpa_block_copy good[2] = {{3, 9}, {4, 11}};
  host_copy(&want, &base, good, 2, 0, layers, bb);
  cl_mem buf = test_buffer(ctx, dp, sizeof dp);
  clpa_copy_blocks_params_init(&p);
  p.cache = c, p.pair_buffer = buf, p.num_pairs = 4;
  ok(clpa_copy_blocks(ctx, &p) == CLPA_OK, "copy_blocks from a device int64 pair buffer");
  int32_t faults = 0;
  ok(clpa_context_check_faults(ctx, &faults) == CLPA_ERR_BAD_BLOCK && faults == CLPA_FAULT_BAD_BLOCK,
     "the bad pair set CLPA_FAULT_BAD_BLOCK");
  got = cache_snapshot(ctx, c);
  ok(image_equal(&got, &want, bb, "device pairs"), "good device pairs copied, the bad one skipped");
  clReleaseMemObject(buf);
  image_free(&got), image_free(&want), image_free(&base);
  image_free(&orig);
  clpa_cache_destroy(c);
}

/* Host pairs the op must refuse before writing anything. */
static void test_copy_refusals(void) {
  clpa_cache *c = new_cache(CLPA_DTYPE_F16, 2, 10, CLPA_CACHE_DEVICE, 0);
  clpa_cache *h = new_cache(CLPA_DTYPE_F16, 2, 10, CLPA_CACHE_HOST, 1);
  cache_image before = cache_randomize(ctx, c);
  const struct {
    clpa_block_copy pairs[3];
    int n;
    const char *what, *needle;
  } bad[] = {{{{1, 2}, {3, 2}}, 2, "a repeated destination", "destination of two pairs"},
             {{{1, 2}, {2, 3}}, 2, "a destination that is a source", "both a destination and a source"},
             {{{10, 2}}, 1, "src past the cache", "pairs[0]"},
             {{{-1, -1}, {1, -3}}, 2, "dst < 0", "pairs[1]"},
             {{{4, 4}}, 1, "a block onto itself", "onto itself"}};
  clpa_copy_blocks_params p;
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    clpa_copy_blocks_params_init(&p);
    p.cache = c, p.pairs = bad[i].pairs, p.num_pairs = bad[i].n;
    clpa_status st = clpa_copy_blocks(ctx, &p);
    if (!ok(st == CLPA_ERR_INVALID_ARG && strstr(clpa_context_last_error(ctx), bad[i].needle) &&
                strncmp(clpa_context_last_error(ctx), "clpa_copy_blocks: ", 18) == 0,
            "copy_blocks refuses %s", bad[i].what))
      diag("%s: %s", clpa_status_name(st), clpa_context_last_error(ctx));
  }
  clpa_block_copy one = {1, 2};
  cl_mem buf = test_buffer(ctx, NULL, 16);
  const struct {
    const char *what, *needle;
    int field;
  } args[] = {{"no pairs given", "exactly one", 0}, {"both pairs and pair_buffer", "exactly one", 1},
              {"a host cache", "host cache", 2},    {"first_layer 2", "first_layer", 3},
              {"num_layers 2 from 1", "num_layers", 4}, {"num_pairs -1", "num_pairs", 5},
              {"pair_buffer too small", "pair_buffer", 6}};
  for (size_t i = 0; i < sizeof args / sizeof *args; i++) {
    clpa_copy_blocks_params_init(&p);
    p.cache = c, p.pairs = &one, p.num_pairs = 1;
    switch (args[i].field) {
      case 0: p.pairs = NULL; break;
      case 1: p.pair_buffer = buf; break;
      case 2: p.cache = h; break;
      case 3: p.first_layer = 2; break;
      case 4: p.first_layer = 1, p.num_layers = 2; break;
      case 5: p.num_pairs = -1; break;
      case 6: p.pairs = NULL, p.pair_buffer = buf, p.num_pairs = 2; break;
    }
    clpa_status st = clpa_copy_blocks(ctx, &p);
    if (!ok(st == CLPA_ERR_INVALID_ARG && strstr(clpa_context_last_error(ctx), args[i].needle),
            "copy_blocks refuses %s", args[i].what))
      diag("%s: %s", clpa_status_name(st), clpa_context_last_error(ctx));
  }
  cache_image after = cache_snapshot(ctx, c);
  ok(image_equal(&after, &before, block_bytes(c), "after refusals"), "refused copies wrote nothing");
  /* Only "no copy" entries: nothing to do, but the event still comes. */
  clpa_block_copy none = {-1, -1};
  cl_event ev = NULL;
  clpa_copy_blocks_params_init(&p);
  p.cache = c, p.pairs = &none, p.num_pairs = 1, p.event = &ev;
  ok(clpa_copy_blocks(ctx, &p) == CLPA_OK && ev && clWaitForEvents(1, &ev) == CL_SUCCESS,
     "only no-copy entries: an event that completes");
  if (ev) clReleaseEvent(ev);
  clReleaseMemObject(buf);
  image_free(&before), image_free(&after);
  clpa_cache_destroy(c), clpa_cache_destroy(h);
}

/* Swap out (device -> host), back in (host -> device), and device to
 * device, checking every byte of both caches each time. */
static void test_swap(clpa_dtype dtype, int pinned) {
  const int layers = 2;
  clpa_cache *d = new_cache(dtype, layers, 16, CLPA_CACHE_DEVICE, 0);
  clpa_cache *h = new_cache(dtype, layers, 11, CLPA_CACHE_HOST, pinned);
  clpa_cache *d2 = wrapped_cache(dtype, layers, 7);
  clpa_cache_info hi;
  clpa_cache_get_info(h, &hi);
  const size_t bb = block_bytes(d);
  cache_image dv = cache_randomize(ctx, d), hv = cache_randomize(ctx, h);
  cache_image d2v = cache_randomize(ctx, d2);

  /* out: a run of three, two singles, a no-copy entry */
  clpa_block_copy out[] = {{3, 0}, {4, 1}, {5, 2}, {-1, -1}, {15, 10}, {0, 6}};
  const int nout = 6;
  host_copy(&hv, &dv, out, nout, 0, layers, bb);
  clpa_swap_blocks_params p;
  clpa_swap_blocks_params_init(&p);
  cl_event ev = NULL;
  p.src = d, p.dst = h, p.pairs = out, p.num_pairs = nout, p.event = &ev;
  ok(clpa_swap_blocks(ctx, &p) == CLPA_OK && ev, "swap out %s to %s host memory%s",
     clpa_dtype_name(dtype), pinned ? "pinned" : "plain", pinned && !hi.pinned ? " (fell back to plain)" : "");
  /* The event alone must cover every transfer: read the host memory
   * without finishing the queue. */
  clWaitForEvents(1, &ev), clReleaseEvent(ev);
  int same = 1;
  for (int s = 0; s < 2 * layers; s++) {
    const void *m = s & 1 ? clpa_cache_value_host(h, s / 2) : clpa_cache_key_host(h, s / 2);
    same &= memcmp(m, hv.slices[s], hv.bytes) == 0;
  }
  ok(same, "host cache holds the swapped-out blocks once the event completes");

  /* in: layer 1 only */
  clpa_block_copy in[] = {{10, 7}, {2, 8}, {1, 14}};
  host_copy(&dv, &hv, in, 3, 1, 2, bb);
  clpa_swap_blocks_params_init(&p);
  p.src = h, p.dst = d, p.pairs = in, p.num_pairs = 3, p.first_layer = 1;
  ok(clpa_swap_blocks(ctx, &p) == CLPA_OK, "swap in, layer 1 only");
  cache_image got = cache_snapshot(ctx, d);
  ok(image_equal(&got, &dv, bb, "swap in"), "device cache: swapped-in blocks, the rest untouched");
  image_free(&got);
  got = cache_snapshot(ctx, h);
  ok(image_equal(&got, &hv, bb, "swap in (source)"), "host cache unchanged by swapping in");
  image_free(&got);

  /* device -> device (a wrapped cache of fewer blocks) */
  clpa_block_copy dd[] = {{8, 0}, {9, 1}, {7, 6}};
  host_copy(&d2v, &dv, dd, 3, 0, layers, bb);
  clpa_swap_blocks_params_init(&p);
  p.src = d, p.dst = d2, p.pairs = dd, p.num_pairs = 3;
  ok(clpa_swap_blocks(ctx, &p) == CLPA_OK, "device to device");
  got = cache_snapshot(ctx, d2);
  ok(image_equal(&got, &d2v, bb, "device to device"), "destination device cache matches");
  image_free(&got);

  image_free(&dv), image_free(&hv), image_free(&d2v);
  clpa_cache_destroy(d), clpa_cache_destroy(h), clpa_cache_destroy(d2);
}

static void test_swap_refusals(void) {
  clpa_cache *d = new_cache(CLPA_DTYPE_BF16, 2, 8, CLPA_CACHE_DEVICE, 0);
  clpa_cache *h = new_cache(CLPA_DTYPE_BF16, 2, 4, CLPA_CACHE_HOST, 1);
  clpa_cache *h2 = new_cache(CLPA_DTYPE_BF16, 2, 4, CLPA_CACHE_HOST, 0);
  clpa_cache *other = new_cache(CLPA_DTYPE_F16, 2, 8, CLPA_CACHE_HOST, 0);
  kind = CLPA_KV_LAYOUT_NHD;
  clpa_cache *nhd = new_cache(CLPA_DTYPE_BF16, 2, 8, CLPA_CACHE_HOST, 0);
  kind = CLPA_KV_LAYOUT_SPLIT_KEY;
  cache_image before = cache_randomize(ctx, h);
  const struct {
    const char *what, *needle;
    clpa_status want;
  } t[] = {{"host to host", "both host caches", CLPA_ERR_UNSUPPORTED},
           {"the same cache twice", "same cache", CLPA_ERR_INVALID_ARG},
           {"different dtypes", "differ", CLPA_ERR_INVALID_ARG},
           {"a dst past the host cache", "pairs[1]", CLPA_ERR_INVALID_ARG},
           {"a repeated destination", "destination of two pairs", CLPA_ERR_INVALID_ARG},
           {"NULL src", "src", CLPA_ERR_INVALID_ARG},
           {"NULL pairs", "pairs", CLPA_ERR_INVALID_ARG},
           {"different layout kinds", "split_key) and dst (2, 2, 64, 8, bf16, nhd) differ",
            CLPA_ERR_INVALID_ARG}};
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    clpa_block_copy pairs[2] = {{0, 0}, {1, 3}};
    clpa_swap_blocks_params p;
    clpa_swap_blocks_params_init(&p);
    p.src = d, p.dst = h, p.pairs = pairs, p.num_pairs = 2;
    switch (i) {
      case 0: p.src = h2; break;
      case 1: p.src = h; break;
      case 2: p.dst = other; break;
      case 3: pairs[1].dst = 4; break;
      case 4: pairs[1].dst = 0; break;
      case 5: p.src = NULL; break;
      case 6: p.pairs = NULL; break;
      case 7: p.dst = nhd; break;
    }
    clpa_status st = clpa_swap_blocks(ctx, &p);
    if (!ok(st == t[i].want && strstr(clpa_context_last_error(ctx), t[i].needle) &&
                strncmp(clpa_context_last_error(ctx), "clpa_swap_blocks: ", 18) == 0,
            "swap_blocks refuses %s", t[i].what))
      diag("%s: %s", clpa_status_name(st), clpa_context_last_error(ctx));
  }
  cache_image after = cache_snapshot(ctx, h);
  ok(image_equal(&after, &before, block_bytes(h), "after refusals"), "refused swaps wrote nothing");

  /* A swap waits for its wait list, and its event covers every transfer. */
  cl_int err;
  cl_event gate = clCreateUserEvent(clpa_context_cl_context(ctx), &err), ev = NULL;
  clpa_block_copy pairs[] = {{0, 0}, {5, 2}, {7, 3}};
  clpa_swap_blocks_params p;
  clpa_swap_blocks_params_init(&p);
  p.src = d, p.dst = h, p.pairs = pairs, p.num_pairs = 3;
  p.num_wait_events = 1, p.wait_events = &gate, p.event = &ev;
  ok(clpa_swap_blocks(ctx, &p) == CLPA_OK, "swap behind a user event");
  cl_int status = CL_COMPLETE;
  clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
  ok(status != CL_COMPLETE, "not done before its wait event");
  clSetUserEventStatus(gate, CL_COMPLETE);
  ok(clWaitForEvents(1, &ev) == CL_SUCCESS, "done after it");
  clReleaseEvent(ev), clReleaseEvent(gate);
  image_free(&before), image_free(&after);
  clpa_cache_destroy(d), clpa_cache_destroy(h), clpa_cache_destroy(h2), clpa_cache_destroy(other);
  clpa_cache_destroy(nhd);
}

/* regress_swap_shared_buffer_overlap: two caches that wrap the same
 * buffers, and pairs whose second copies a block onto itself there. The
 * first transfer was enqueued, then the second failed
 * (CL_MEM_COPY_OVERLAP): CLPA_ERR_OPENCL after writing block 3. Now
 * refused before any transfer, naming the blocks; a pair that does not
 * overlap still swaps. */
static void regress_swap_shared_buffer_overlap(void) {
  clpa_cache *a = wrapped_cache(CLPA_DTYPE_F16, 1, 4);
  clpa_cache_config cfg;
  clpa_cache_config_init(&cfg);
  cfg.num_layers = 1, cfg.num_kv_heads = 2, cfg.head_size = 64, cfg.block_size = 8;
  cl_mem k = clpa_cache_key(a, 0), v = clpa_cache_value(a, 0);
  clpa_cache *b = NULL;
  ok(clpa_cache_wrap(ctx, &cfg, &k, &v, &b) == CLPA_OK, "a second cache over the same buffers");
  cache_image before = cache_randomize(ctx, a);
  clpa_block_copy pairs[] = {{2, 3}, {0, 0}};
  clpa_swap_blocks_params p;
  clpa_swap_blocks_params_init(&p);
  p.src = a, p.dst = b, p.pairs = pairs, p.num_pairs = 2;
  clpa_status st = clpa_swap_blocks(ctx, &p);
  if (!ok(st == CLPA_ERR_INVALID_ARG && strstr(clpa_context_last_error(ctx), "same memory"),
          "swap_blocks refuses a block onto itself through a shared buffer"))
    diag("%s: %s", clpa_status_name(st), clpa_context_last_error(ctx));
  cache_image after = cache_snapshot(ctx, a);
  ok(image_equal(&after, &before, block_bytes(a), "after the refusal"), "it wrote nothing");
  image_free(&after);
  p.num_pairs = 1;
  host_copy(&before, &before, pairs, 1, 0, 1, block_bytes(a));
  ok(clpa_swap_blocks(ctx, &p) == CLPA_OK, "block 2 onto block 3 of the shared buffer swaps");
  after = cache_snapshot(ctx, a);
  ok(image_equal(&after, &before, block_bytes(a), "shared buffer"), "block 3 holds block 2");
  image_free(&before), image_free(&after);
  clpa_cache_destroy(a), clpa_cache_destroy(b);
}

int main(void) {
  rng_seed_from_env();
  ctx = test_context(0);
  for (int d = 0; d < CLPA_DTYPE_COUNT_; d++) {
    test_copy((clpa_dtype)d, d % 2, 0, 0);
    test_swap((clpa_dtype)d, d != CLPA_DTYPE_BF16);
  }
  test_copy(CLPA_DTYPE_FP8_E5M2, 0, 1, 1);
  test_copy(CLPA_DTYPE_F32, 1, 1, 2);
  /* Own caches split over arenas of two slices: launches per arena, layer
   * ranges across arenas, swaps from and to later arenas. */
  arena_cap = 2 * 20 * (2 * 64 * 8 * 2);
  test_copy(CLPA_DTYPE_F16, 0, 0, 0);
  test_copy(CLPA_DTYPE_BF16, 0, 1, 2);
  test_swap(CLPA_DTYPE_F16, 1);
  arena_cap = 0;
  for (kind = CLPA_KV_LAYOUT_HND; kind <= CLPA_KV_LAYOUT_NHD; kind++) {
    test_copy(kind == CLPA_KV_LAYOUT_HND ? CLPA_DTYPE_F16 : CLPA_DTYPE_FP8_E4M3, 0, 0, 0);
    test_swap(kind == CLPA_KV_LAYOUT_HND ? CLPA_DTYPE_F32 : CLPA_DTYPE_BF16, 1);
  }
  kind = CLPA_KV_LAYOUT_SPLIT_KEY;
  test_copy_refusals();
  test_swap_refusals();
  regress_swap_shared_buffer_overlap();
  test_no_faults_left(ctx);
  clpa_context_destroy(ctx);
  return done_testing();
}
