/*
 * reshape_and_cache (cl/cache.cl, clpa_cache_reshape) against the host:
 * clpa_ref_reshape_and_cache says where each source element lands (it is
 * run on element indices), clpa_dtype_encode says which bits it becomes. Every
 * cache dtype with every source dtype, fused QKV rows and padded strides,
 * several block sizes, head sizes and layers, in each layout kind
 * (split-key, HND, NHD: the reference places elements through
 * clpa_kv_key_index / clpa_kv_value_index).
 *
 * The caches start as random bytes (the poison): every byte no token
 * targets must come back unchanged, in the written layer and the others.
 * Source values cover each dtype's whole range: subnormals, overflow and
 * saturation, +-0, +-inf, NaN, the exact rounding midpoints of fp8 (with
 * scale 1), random f32 bit patterns. Elements must match bit for bit,
 * except that two NaNs match by class (dtype_convert.h).
 *
 * Bad slots (>= num_blocks * block_size) must set CLPA_FAULT_BAD_BLOCK
 * and write nothing: those cases wrap application buffers two blocks
 * larger than the cache says, and check that tail too.
 */
#include <stdio.h>

#include "cache_util.h"
#include "ref_attention.h"

#define F32 CLPA_DTYPE_F32
#define F16 CLPA_DTYPE_F16
#define BF16 CLPA_DTYPE_BF16
#define E4M3 CLPA_DTYPE_FP8_E4M3
#define E5M2 CLPA_DTYPE_FP8_E5M2

typedef struct rcase {
  clpa_dtype kv, src;
  int kv_heads, hs, bs, blocks, tokens;
  int fused;      /* key and value inside one QKV buffer */
  int pad;        /* extra elements per row (and before the first row) */
  int layers, layer;
  int unit_scale; /* fp8: scale 1, so the special values hit exact midpoints */
  int bad;        /* some slots past the cache: wrapped buffers with a guard tail */
} rcase;

static clpa_context *ctx;
static clpa_kv_layout_kind kind; /* the caches' layout, for every case of a run */

static int is_fp8(clpa_dtype d) { return d == E4M3 || d == E5M2; }

/* Values that sit on every dtype's edges (scale 1). */
static const float specials[] = {
    0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN,
    448.0f, -448.0f, 464.0f, 480.0f, 1e30f, -1e30f,                  /* e4m3 max, its midpoint, overflow */
    57344.0f, 61440.0f, 61439.0f, -65536.0f,                          /* e5m2 max, midpoint, overflow */
    65504.0f, 65519.0f, 65520.0f, -65520.0f,                          /* f16 max, just below and at the inf midpoint */
    1.0625f, 1.1875f, -1.0625f, 1.125f, 1.25f, 1.375f,                /* e4m3 / e5m2 midpoints near 1 */
    0x1p-9f, 0x1p-10f, 0x3p-10f, 0x1p-16f, 0x1p-17f, 0x3p-17f,        /* fp8 subnormals and their midpoints */
    0x1p-24f, 0x1p-25f, 0x3p-25f, 0x1p-14f,                           /* f16 subnormals, midpoint, min normal */
    0x1p-126f, 0x1p-149f, -0x1p-140f,                                 /* f32 subnormals */
    0x1.0101p0f, 0x1.0180p0f, 0x1.0080p0f,                            /* bf16 midpoints (ties to even) */
    3.4e38f, -3.4e38f};
#define NSPECIAL (sizeof specials / sizeof *specials)

/* A value for dtype kv with fp8 scale s: mostly log-uniform magnitudes over
 * the dtype's range, sometimes an edge value or random f32 bits. */
static float draw(clpa_dtype kv, float s) {
  uint32_t r = rng_below(100);
  if (r < 6) return specials[rng_below(NSPECIAL)] * (is_fp8(kv) ? s : 1.0f);
  if (r < 10) {
    uint32_t bits = (uint32_t)rng_next();
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
  }
  double lo = -30, hi = 20; /* log2 of the magnitude */
  if (kv == F32 || kv == BF16) lo = -140, hi = 127;
  if (is_fp8(kv)) lo = -20, hi = 17;
  double m = exp2(rng_uniform(lo, hi)) * (is_fp8(kv) ? s : 1.0f);
  return (float)(rng_below(2) ? -m : m);
}

static void describe(const rcase *c, char *buf, size_t cap) {
  snprintf(buf, cap, "%s kv %s src %s heads %d hs %d bs %d blocks %d tokens %d%s pad %d layer %d/%d%s%s",
           clpa_kv_layout_kind_name(kind), clpa_dtype_name(c->kv), clpa_dtype_name(c->src), c->kv_heads, c->hs, c->bs, c->blocks,
           c->tokens, c->fused ? " fused" : "", c->pad, c->layer, c->layers,
           c->unit_scale ? " scale 1" : "", c->bad ? " bad slots" : "");
}

/* Slots: distinct random ones, some padding (negative), some bad. */
static int64_t *make_slots(const rcase *c, int64_t *ref_slots) {
  const int64_t nslots = (int64_t)c->blocks * c->bs;
  int64_t *perm = malloc(sizeof(int64_t) * (size_t)nslots);
  for (int64_t i = 0; i < nslots; i++) perm[i] = i;
  for (int64_t i = nslots - 1; i > 0; i--) {
    int64_t j = (int64_t)rng_below((uint32_t)i + 1), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  int64_t *slots = malloc(sizeof(int64_t) * (size_t)c->tokens);
  static const int64_t pads[] = {-1, -2, INT64_MIN};
  static const int64_t bads[] = {0, 1, 7}; /* added to nslots */
  for (int t = 0; t < c->tokens; t++) {
    slots[t] = perm[t];
    if (rng_below(100) < 15) slots[t] = pads[rng_below(3)];
    if (c->bad && (t == 0 || rng_below(100) < 10))
      slots[t] = t == 1 ? INT64_MAX : nslots + bads[rng_below(3)] * c->bs;
    ref_slots[t] = slots[t] >= nslots ? -1 : slots[t];
  }
  free(perm);
  return slots;
}

/* The caches for a case: clpa's own, or (bad slots) the application's
 * buffers two blocks longer than the cache, whose tails are kept in
 * *tails to be checked. */
static clpa_cache *make_cache(const rcase *c, cl_mem *bufs, unsigned char **tails,
                              size_t *tail_bytes) {
  clpa_cache_config cfg;
  clpa_cache_config_init(&cfg);
  cfg.num_layers = c->layers, cfg.num_kv_heads = c->kv_heads, cfg.head_size = c->hs;
  cfg.block_size = c->bs, cfg.dtype = c->kv, cfg.num_blocks = c->blocks, cfg.layout = kind;
  clpa_cache *cache = NULL;
  if (!c->bad) {
    if (clpa_cache_create(ctx, &cfg, &cache) != CLPA_OK) diag("%s", clpa_last_error());
    return cache;
  }
  const size_t bb = clpa_cache_bytes_per_block(&cfg) / (2 * (size_t)c->layers);
  const size_t size = bb * (size_t)(c->blocks + 2);
  *tail_bytes = 2 * bb;
  for (int s = 0; s < 2 * c->layers; s++) {
    unsigned char *init = malloc(size);
    fill_random_bytes(init, size);
    bufs[s] = test_buffer(ctx, init, size);
    tails[s] = malloc(2 * bb);
    memcpy(tails[s], init + bb * c->blocks, 2 * bb);
    free(init);
  }
  cl_mem keys[8], values[8];
  for (int l = 0; l < c->layers; l++) keys[l] = bufs[2 * l], values[l] = bufs[2 * l + 1];
  if (clpa_cache_wrap(ctx, &cfg, keys, values, &cache) != CLPA_OK) diag("%s", clpa_last_error());
  return cache;
}

/* Compares the written layer's slice v element by element: mapped elements
 * against their encoded source, the rest against the poison. */
static int check_slice(const rcase *c, const unsigned char *got, const unsigned char *poison,
                       const float *map, const unsigned char *src_bytes, const float *src_f,
                       float scale, const char *what) {
  const size_t es = clpa_dtype_size(c->kv), ss = clpa_dtype_size(c->src);
  const size_t n = (size_t)c->blocks * c->kv_heads * c->hs * c->bs;
  unsigned char want[4];
  for (size_t e = 0; e < n; e++) {
    const unsigned char *w = poison + e * es;
    size_t i = 0;
    if (map[e] >= 0) {
      i = (size_t)map[e];
      if (c->src == c->kv)
        memcpy(want, src_bytes + i * ss, es); /* same dtype: the bits are copied */
      else
        clpa_dtype_encode(c->kv, &src_f[i], want, 1, scale);
      w = want;
    }
    if (!elem_equal(c->kv, got + e * es, w)) {
      uint32_t g = 0, x = 0, sb = 0;
      memcpy(&g, got + e * es, es);
      memcpy(&x, w, es);
      if (map[e] >= 0) memcpy(&sb, &src_f[i], sizeof sb);
      size_t per_block = (size_t)c->kv_heads * c->hs * c->bs;
      diag("%s element %zu (block %zu): got 0x%x want 0x%x (%s; source %.9g = 0x%08x, scale %g)",
           what, e, e / per_block, (unsigned)g, (unsigned)x,
           map[e] >= 0 ? "written" : "untouched", map[e] >= 0 ? (double)src_f[i] : 0.0,
           (unsigned)sb, (double)scale);
      return 0;
    }
  }
  return 1;
}

static int run_case(const rcase *c) {
  char name[256];
  describe(c, name, sizeof name);
  const int nq = 2 * c->kv_heads; /* query heads in a fused row */
  const size_t row = (size_t)c->kv_heads * c->hs;
  const size_t stride = (c->fused ? (size_t)(nq + 2 * c->kv_heads) * c->hs : row) + c->pad;
  const size_t koff = c->fused ? (size_t)nq * c->hs + c->pad : (size_t)c->pad;
  const size_t voff = c->fused ? koff + row : (size_t)c->pad / 2;
  const size_t total = koff + stride * c->tokens + row; /* elements per source buffer, generous */
  const float ks = is_fp8(c->kv) && !c->unit_scale ? (float)exp2(rng_uniform(-6, 6)) : 1.0f;
  const float vs = is_fp8(c->kv) && !c->unit_scale ? (float)exp2(rng_uniform(-6, 6)) : 1.0f;

  /* Sources: one buffer when fused, else two; values rounded through src. */
  const size_t ss = clpa_dtype_size(c->src);
  float *kf = malloc(sizeof(float) * total), *vf = c->fused ? kf : malloc(sizeof(float) * total);
  unsigned char *kb = malloc(ss * total), *vb = c->fused ? kb : malloc(ss * total);
  for (size_t i = 0; i < total; i++) {
    kf[i] = draw(c->kv, ks);
    if (!c->fused) vf[i] = draw(c->kv, vs);
  }
  for (int v = 0; v <= !c->fused; v++) {
    float *f = v ? vf : kf;
    unsigned char *b = v ? vb : kb;
    if (c->src == F32) { /* keep NaN payloads and signalling NaNs as drawn */
      memcpy(b, f, ss * total);
    } else {
      clpa_dtype_encode(c->src, f, b, total, 1.0f);
      clpa_dtype_decode(c->src, b, f, total, 1.0f);
    }
  }

  int64_t *ref_slots = malloc(sizeof(int64_t) * (size_t)c->tokens);
  int64_t *slots = make_slots(c, ref_slots);

  /* Where each source element lands: the reference run on indices. */
  const size_t n = (size_t)c->blocks * c->kv_heads * c->hs * c->bs;
  float *idx = malloc(sizeof(float) * total), *kmap = malloc(sizeof(float) * n);
  float *vmap = malloc(sizeof(float) * n);
  for (size_t i = 0; i < total; i++) idx[i] = (float)i;
  for (size_t e = 0; e < n; e++) kmap[e] = vmap[e] = -1.0f;
  clpa_ref_cache_args ra = {.num_tokens = c->tokens, .key = idx + koff,
                            .key_stride = stride, .value = idx + voff, .value_stride = stride,
                            .slot_mapping = ref_slots, .key_cache = kmap, .value_cache = vmap};
  int good = ok(clpa_kv_layout_init_kind(&ra.kv, kind, c->kv, c->blocks, c->bs, c->kv_heads,
                                         c->hs) == CLPA_OK &&
                    clpa_ref_reshape_and_cache(&ra) == CLPA_OK,
                "reference map for %s", name);

  cl_mem bufs[16] = {0};
  unsigned char *tails[16] = {0};
  size_t tail_bytes = 0;
  clpa_cache *cache = make_cache(c, bufs, tails, &tail_bytes);
  good &= ok(cache != NULL, "cache for %s", name);
  if (!cache) return 0;
  clpa_cache_info info;
  clpa_cache_get_info(cache, &info);
  cache_image poison = cache_randomize(ctx, cache);

  cl_mem kbuf = test_buffer(ctx, kb, ss * total);
  cl_mem vbuf = c->fused ? kbuf : test_buffer(ctx, vb, ss * total);
  cl_mem sbuf = test_buffer(ctx, slots, sizeof(int64_t) * (size_t)c->tokens);
  clpa_reshape_and_cache_params p;
  clpa_reshape_and_cache_params_init(&p);
  p.cache = cache, p.layer = c->layer, p.num_tokens = c->tokens, p.src_dtype = c->src;
  p.key = kbuf, p.value = vbuf, p.key_offset = koff, p.value_offset = voff;
  p.key_stride = stride, p.value_stride = stride, p.slot_mapping = sbuf;
  p.k_scale = ks, p.v_scale = vs;
  clpa_status st = clpa_reshape_and_cache(ctx, &p);
  good &= ok(st == CLPA_OK, "reshape_and_cache %s", name);
  if (st != CLPA_OK) diag("%s: %s", clpa_status_name(st), clpa_context_last_error(ctx));
  int32_t faults = 0;
  st = clpa_context_check_faults(ctx, &faults);
  if (c->bad)
    good &= ok(st == CLPA_ERR_BAD_BLOCK && faults == CLPA_FAULT_BAD_BLOCK,
               "bad slots set the fault bit (faults 0x%x)", faults);
  else
    good &= ok(st == CLPA_OK && faults == 0, "no faults (0x%x)", faults);

  cache_image got = cache_snapshot(ctx, cache);
  int same = 1;
  for (int s = 0; s < got.n && same; s++) {
    if (s / 2 == c->layer) {
      const float *map = s & 1 ? vmap : kmap;
      same = check_slice(c, got.slices[s], poison.slices[s], map, s & 1 ? vb : kb, s & 1 ? vf : kf,
                         s & 1 ? vs : ks, s & 1 ? "value" : "key");
    } else {
      same = memcmp(got.slices[s], poison.slices[s], got.bytes) == 0;
      if (!same) diag("layer %d %s was written", s / 2, s & 1 ? "value" : "key");
    }
  }
  good &= ok(same, "cache bytes: written elements encoded, the rest untouched");
  if (c->bad) {
    int intact = 1;
    unsigned char *tail = malloc(tail_bytes);
    for (int s = 0; s < 2 * c->layers; s++) {
      clEnqueueReadBuffer(clpa_context_cl_queue(ctx), bufs[s], CL_TRUE, info.layer_bytes,
                          tail_bytes, tail, 0, NULL, NULL);
      intact &= memcmp(tail, tails[s], tail_bytes) == 0;
      free(tails[s]);
      clReleaseMemObject(bufs[s]);
    }
    free(tail);
    good &= ok(intact, "nothing written past the cache's num_blocks");
  }
  if (!good) diag("failed case: %s", name);
  image_free(&poison), image_free(&got);
  clpa_cache_destroy(cache);
  clReleaseMemObject(kbuf), clReleaseMemObject(sbuf);
  if (!c->fused) clReleaseMemObject(vbuf);
  free(kf), free(kb), free(idx), free(kmap), free(vmap);
  if (!c->fused) free(vf), free(vb);
  free(slots), free(ref_slots);
  return good;
}

/* kv src heads hs bs blocks tokens fused pad layers layer unit_scale bad */
static const rcase cases[] = {
    {F32, F32, 2, 64, 16, 9, 100, 1, 3, 2, 1, 0, 0},
    {F32, F16, 3, 32, 8, 10, 60, 0, 5, 1, 0, 0, 0},
    {F32, BF16, 1, 80, 16, 6, 70, 1, 0, 2, 0, 0, 0},
    {F16, F32, 2, 128, 16, 8, 100, 0, 2, 2, 1, 0, 0},
    {F16, F16, 4, 80, 32, 4, 90, 1, 1, 1, 0, 0, 0},
    {F16, BF16, 2, 120, 5, 20, 80, 0, 0, 2, 1, 0, 0},
    {BF16, F32, 2, 64, 16, 8, 100, 1, 4, 2, 0, 0, 0},
    {BF16, F16, 1, 96, 8, 12, 70, 0, 8, 1, 0, 0, 0},
    {BF16, BF16, 3, 32, 16, 6, 80, 1, 0, 2, 1, 0, 0},
    {E4M3, F32, 2, 64, 16, 32, 480, 0, 3, 2, 1, 0, 0},
    {E4M3, F32, 2, 32, 16, 8, 110, 1, 0, 1, 0, 1, 0},
    {E4M3, F16, 1, 128, 8, 14, 90, 1, 2, 2, 0, 0, 0},
    {E4M3, BF16, 2, 96, 32, 4, 100, 0, 0, 1, 0, 0, 0},
    {E5M2, F32, 2, 64, 16, 32, 480, 1, 1, 2, 0, 0, 0},
    {E5M2, F32, 3, 32, 8, 12, 90, 0, 0, 1, 0, 1, 0},
    {E5M2, F16, 2, 80 + 16, 16, 6, 80, 0, 6, 2, 1, 0, 0},
    {E5M2, BF16, 1, 256, 16, 6, 70, 1, 0, 1, 0, 0, 0},
    /* bad slots: wrapped buffers with guard tails */
    {F16, F32, 2, 64, 16, 6, 60, 0, 0, 2, 1, 0, 1},
    {E4M3, F16, 2, 32, 8, 6, 40, 1, 2, 1, 0, 0, 1},
    {F32, F32, 1, 32, 16, 4, 40, 0, 0, 1, 0, 0, 1},
    /* page sizes 1 (SGLang's token pool) and 64 */
    {F16, F32, 2, 64, 1, 48, 40, 0, 0, 1, 0, 0, 0},
    {BF16, F16, 3, 64, 64, 3, 150, 1, 0, 2, 1, 0, 0},
};

/* Refused calls: status, a message naming the argument, nothing written. */
static void test_refusals(void) {
  clpa_cache_config cfg;
  clpa_cache_config_init(&cfg);
  cfg.num_layers = 2, cfg.num_kv_heads = 2, cfg.head_size = 32, cfg.num_blocks = 4;
  clpa_cache *cache = NULL, *host;
  cfg.layout = CLPA_KV_LAYOUT_COUNT_;
  ok(clpa_cache_create(ctx, &cfg, &cache) == CLPA_ERR_INVALID_ARG && !cache &&
         strstr(clpa_last_error(), "cfg->layout = 3 is not a clpa_kv_layout_kind"),
     "a cache of an unknown layout kind is refused, naming the field: %s", clpa_last_error());
  cfg.layout = CLPA_KV_LAYOUT_SPLIT_KEY;
  clpa_cache_create(ctx, &cfg, &cache);
  cfg.placement = CLPA_CACHE_HOST;
  clpa_cache_create(ctx, &cfg, &host);
  cache_image before = cache_randomize(ctx, cache);
  const int tokens = 3;
  cl_mem rows = test_buffer(ctx, NULL, sizeof(float) * 64 * tokens);
  cl_mem small = test_buffer(ctx, NULL, sizeof(float) * 64 * tokens - 4);
  int64_t sl[3] = {0, 1, 2};
  cl_mem slots = test_buffer(ctx, sl, sizeof sl);
  clpa_reshape_and_cache_params good, p;
  clpa_reshape_and_cache_params_init(&good);
  good.cache = cache, good.layer = 1, good.num_tokens = tokens;
  good.key = good.value = rows, good.slot_mapping = slots;
  struct {
    const char *field, *needle;
    clpa_status want;
  } t[] = {{"cache NULL", "cache", CLPA_ERR_INVALID_ARG},
           {"host cache", "host cache", CLPA_ERR_INVALID_ARG},
           {"layer 2", "layer", CLPA_ERR_INVALID_ARG},
           {"num_tokens -1", "num_tokens", CLPA_ERR_INVALID_ARG},
           {"src fp8", "src_dtype", CLPA_ERR_UNSUPPORTED},
           {"k_scale 0", "k_scale", CLPA_ERR_INVALID_ARG},
           {"v_scale nan", "v_scale", CLPA_ERR_INVALID_ARG},
           {"key_stride short", "key_stride", CLPA_ERR_INVALID_ARG},
           {"value too small", "value", CLPA_ERR_INVALID_ARG},
           {"key offset past the end", "key", CLPA_ERR_INVALID_ARG},
           {"slot_mapping NULL", "slot_mapping", CLPA_ERR_INVALID_ARG},
           {"wait list NULL", "wait_events", CLPA_ERR_INVALID_ARG}};
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    p = good;
    switch (i) {
      case 0: p.cache = NULL; break;
      case 1: p.cache = host; break;
      case 2: p.layer = 2; break;
      case 3: p.num_tokens = -1; break;
      case 4: p.src_dtype = E4M3; break;
      case 5: p.k_scale = 0; break;
      case 6: p.v_scale = NAN; break;
      case 7: p.key_stride = 63; break;
      case 8: p.value = small; break;
      case 9: p.key_offset = 1; break;
      case 10: p.slot_mapping = NULL; break;
      case 11: p.num_wait_events = 1; break;
    }
    clpa_status st = clpa_reshape_and_cache(ctx, &p);
    const char *msg = clpa_context_last_error(ctx);
    if (!ok(st == t[i].want && strstr(msg, t[i].needle) &&
                strncmp(msg, "clpa_reshape_and_cache: ", 24) == 0,
            "refused: %s", t[i].field))
      diag("got %s: %s", clpa_status_name(st), msg);
  }
  ok(clpa_reshape_and_cache(NULL, &good) == CLPA_ERR_INVALID_ARG, "refused: ctx NULL");
  ok(clpa_reshape_and_cache(ctx, NULL) == CLPA_ERR_INVALID_ARG, "refused: p NULL");
  cache_image after = cache_snapshot(ctx, cache);
  ok(image_equal(&after, &before, 64 * 16 * 2, "after refusals"), "refused calls wrote nothing");

  /* num_tokens 0 with an event: a marker that completes. */
  p = good;
  p.num_tokens = 0;
  cl_event ev = NULL;
  p.event = &ev;
  ok(clpa_reshape_and_cache(ctx, &p) == CLPA_OK && ev && clWaitForEvents(1, &ev) == CL_SUCCESS,
     "num_tokens 0 gives an event that completes");
  if (ev) clReleaseEvent(ev);

  /* The write waits for its wait list. */
  cl_int err;
  cl_event gate = clCreateUserEvent(clpa_context_cl_context(ctx), &err);
  p = good;
  p.num_wait_events = 1, p.wait_events = &gate, p.event = &ev;
  ok(clpa_reshape_and_cache(ctx, &p) == CLPA_OK, "reshape_and_cache behind a user event");
  cl_int status = CL_COMPLETE;
  clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
  ok(status != CL_COMPLETE, "not done before its wait event");
  clSetUserEventStatus(gate, CL_COMPLETE);
  ok(clWaitForEvents(1, &ev) == CL_SUCCESS, "done after it");
  clReleaseEvent(ev), clReleaseEvent(gate);

  image_free(&before), image_free(&after);
  clReleaseMemObject(rows), clReleaseMemObject(small), clReleaseMemObject(slots);
  clpa_cache_destroy(cache);
  clpa_cache_destroy(host);
}

int main(void) {
  rng_seed_from_env();
  ctx = test_context(0);
  int failed = 0;
  for (kind = 0; kind < CLPA_KV_LAYOUT_COUNT_; kind++)
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) failed += !run_case(&cases[i]);
  kind = CLPA_KV_LAYOUT_SPLIT_KEY;
  test_refusals();
  if (failed) diag("%d case(s) failed", failed);
  test_no_faults_left(ctx);
  clpa_context_destroy(ctx);
  return done_testing();
}
