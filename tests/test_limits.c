/*
 * Every numeric argument of the cache ops, merge_states, the smoke test
 * and the host converters at its limits (0, -1, 1, INT32_MAX, INT32_MIN,
 * and SIZE_MAX or 2^63 for sizes), one field at a time on a valid call:
 * each call returns (never crashes: ASan/UBSan run this too), a refused
 * call names the public call in its message and leaves the poisoned
 * output as it was, and an accepted one leaves no fault behind. Decode
 * and prefill have the same sweep in their own tests.
 */
#include <stdio.h>

#include "cl_util.h"

static clpa_context *ctx;

static const int64_t limits[] = {0, -1, 1, INT32_MAX, INT32_MIN, (int64_t)1 << 40, INT64_MAX};
#define NLIMITS (sizeof limits / sizeof *limits)

/* Sets field `f` of a struct to v, by its size (int32_t, size_t, float
 * fields: floats take the value as a float). */
typedef enum { I32, SZ, FLT } kind;
static void set(void *base, size_t off, kind k, int64_t v) {
  char *p = (char *)base + off;
  if (k == I32) {
    int32_t x = (int32_t)v;
    memcpy(p, &x, sizeof x);
  } else if (k == SZ) {
    size_t x = (size_t)v;
    memcpy(p, &x, sizeof x);
  } else {
    float x = (float)v;
    memcpy(p, &x, sizeof x);
  }
}

typedef struct field {
  const char *name;
  size_t off;
  kind k;
} field;
#define F(type, member, k) {#member, offsetof(type, member), k}

static int named(const char *call) {
  return strncmp(clpa_context_last_error(ctx), call, strlen(call)) == 0;
}

static void sweep_reshape(clpa_cache *cache, const clpa_cache_info *in) {
  const int32_t n = 4;
  const size_t row = (size_t)in->num_kv_heads * in->head_size;
  cl_mem src = test_buffer(ctx, NULL, sizeof(float) * row * n);
  int64_t slots[4] = {0, 1, 17, 30};
  cl_mem sm = test_buffer(ctx, slots, sizeof slots);
  clpa_reshape_and_cache_params good;
  clpa_reshape_and_cache_params_init(&good);
  good.cache = cache, good.num_tokens = n, good.key = good.value = src, good.slot_mapping = sm;
  const field fs[] = {F(clpa_reshape_and_cache_params, layer, I32),
                      F(clpa_reshape_and_cache_params, num_tokens, I32),
                      F(clpa_reshape_and_cache_params, key_offset, SZ),
                      F(clpa_reshape_and_cache_params, value_offset, SZ),
                      F(clpa_reshape_and_cache_params, key_stride, SZ),
                      F(clpa_reshape_and_cache_params, value_stride, SZ),
                      F(clpa_reshape_and_cache_params, k_scale, FLT),
                      F(clpa_reshape_and_cache_params, v_scale, FLT)};
  int bad = 0, calls = 0;
  for (size_t f = 0; f < sizeof fs / sizeof *fs; f++)
    for (size_t v = 0; v < NLIMITS; v++) {
      clpa_reshape_and_cache_params p = good;
      set(&p, fs[f].off, fs[f].k, limits[v]);
      test_poison(ctx, clpa_cache_key(cache, 0), in->layer_bytes);
      const clpa_status st = clpa_reshape_and_cache(ctx, &p);
      int32_t faults = 0;
      clpa_context_check_faults(ctx, &faults);
      const int fine = st == CLPA_OK ? faults == 0 || fs[f].off == offsetof(clpa_reshape_and_cache_params, num_tokens)
                                     : named("clpa_reshape_and_cache: ") &&
                                           test_untouched(ctx, clpa_cache_key(cache, 0), in->layer_bytes);
      calls++;
      if (!fine && bad++ < 5)
        diag("reshape_and_cache %s = %lld: %s, faults 0x%x: %s", fs[f].name, (long long)limits[v],
             clpa_status_name(st), faults, clpa_context_last_error(ctx));
    }
  ok(bad == 0, "reshape_and_cache: %d calls at the limits of %zu fields, each refused cleanly or"
     " run cleanly", calls, sizeof fs / sizeof *fs);
  clReleaseMemObject(src), clReleaseMemObject(sm);
}

static void sweep_copy(clpa_cache *cache, clpa_cache *host, const clpa_cache_info *in) {
  clpa_block_copy pairs[2] = {{1, 2}, {3, 4}};
  const field fs[] = {F(clpa_copy_blocks_params, first_layer, I32),
                      F(clpa_copy_blocks_params, num_layers, I32),
                      F(clpa_copy_blocks_params, num_pairs, I32)};
  int bad = 0, calls = 0;
  for (int swap = 0; swap < 2; swap++)
    for (size_t f = 0; f < sizeof fs / sizeof *fs; f++)
      for (size_t v = 0; v < NLIMITS; v++) {
        clpa_status st;
        test_poison(ctx, clpa_cache_key(cache, 1), in->layer_bytes);
        if (!swap) {
          clpa_copy_blocks_params p;
          clpa_copy_blocks_params_init(&p);
          p.cache = cache, p.pairs = pairs, p.num_pairs = 2;
          set(&p, fs[f].off, fs[f].k, limits[v]);
          /* More pairs than the array holds is the caller's overrun, not a
           * value clpa can see: skip those. */
          if (limits[v] > 2 && fs[f].off == offsetof(clpa_copy_blocks_params, num_pairs)) continue;
          st = clpa_copy_blocks(ctx, &p);
        } else {
          clpa_swap_blocks_params p;
          clpa_swap_blocks_params_init(&p);
          p.src = host, p.dst = cache, p.pairs = pairs, p.num_pairs = 2;
          const size_t off = fs[f].off == offsetof(clpa_copy_blocks_params, first_layer)
                                 ? offsetof(clpa_swap_blocks_params, first_layer)
                             : fs[f].off == offsetof(clpa_copy_blocks_params, num_layers)
                                 ? offsetof(clpa_swap_blocks_params, num_layers)
                                 : offsetof(clpa_swap_blocks_params, num_pairs);
          if (limits[v] > 2 && off == offsetof(clpa_swap_blocks_params, num_pairs)) continue;
          set(&p, off, I32, limits[v]);
          st = clpa_swap_blocks(ctx, &p);
        }
        clpa_context_finish(ctx);
        const int fine = st == CLPA_OK || named(swap ? "clpa_swap_blocks: " : "clpa_copy_blocks: ");
        calls++;
        if (!fine && bad++ < 5)
          diag("%s %s = %lld: %s: %s", swap ? "swap" : "copy", fs[f].name, (long long)limits[v],
               clpa_status_name(st), clpa_context_last_error(ctx));
      }
  ok(bad == 0, "copy_blocks and swap_blocks: %d calls at the limits, each refused with the call"
     " named or run", calls);
}

static void sweep_create(void) {
  const field fs[] = {F(clpa_cache_config, num_layers, I32), F(clpa_cache_config, num_kv_heads, I32),
                      F(clpa_cache_config, head_size, I32), F(clpa_cache_config, block_size, I32),
                      F(clpa_cache_config, num_blocks, I32)};
  int bad = 0, calls = 0;
  for (size_t f = 0; f < sizeof fs / sizeof *fs; f++)
    for (size_t v = 0; v < NLIMITS; v++) {
      clpa_cache_config cc;
      clpa_cache_config_init(&cc);
      cc.num_layers = 2, cc.num_kv_heads = 2, cc.head_size = 64, cc.block_size = 16, cc.num_blocks = 8;
      cc.mem_fraction = 0.001; /* num_blocks 0 sizes from it: keep that small */
      set(&cc, fs[f].off, fs[f].k, limits[v]);
      clpa_cache *c = (clpa_cache *)&cc;
      const clpa_status st = clpa_cache_create(ctx, &cc, &c);
      const int fine = st == CLPA_OK ? c != NULL : c == NULL && named("clpa_cache_create: ");
      calls++;
      if (!fine && bad++ < 5)
        diag("cache_create %s = %lld: %s: %s", fs[f].name, (long long)limits[v],
             clpa_status_name(st), clpa_context_last_error(ctx));
      if (st == CLPA_OK) clpa_cache_destroy(c);
    }
  ok(bad == 0, "cache_create: %d configs at the limits, each refused with the call named (and no"
     " cache) or made", calls);
}

/* Prefill's tiles path with q_stride past 2^31 - 1 elements: the second query row starts 2^31 +
 * 64 halves in (a 4 GiB buffer, written only where the rows lie), and the call must give the
 * row of a compact query, bit for bit. */
static void regress_prefill_tiles_wide_q_stride(void) {
  enum { HS = 64, BS = 16 };
  clpa_kv_layout kv;
  clpa_kv_layout_init(&kv, CLPA_DTYPE_F32, 1, BS, 1, HS);
  float kvh[BS * HS], qf[HS];
  for (int i = 0; i < BS * HS; i++) kvh[i] = (float)rng_uniform(-1, 1);
  for (int i = 0; i < HS; i++) qf[i] = (float)rng_uniform(-4, 4);
  uint16_t qh[2 * HS] = {0};
  clpa_dtype_encode(CLPA_DTYPE_F16, qf, qh + HS, HS, 1.0f);
  const int32_t table[1] = {0}, cu[2] = {1, 2}, cached[1] = {3};
  const size_t wide = ((size_t)1 << 31) + 64;
  cl_int err;
  cl_mem big = clCreateBuffer(clpa_context_cl_context(ctx), CL_MEM_READ_WRITE,
                              (wide + HS) * 2, NULL, &err);
  if (err != CL_SUCCESS) {
    ok(1, "# SKIP prefill tiles, q_stride 2^31 + 64: no buffer of %zu bytes here (%d)",
       (wide + HS) * 2, (int)err);
    return;
  }
  test_write_at(ctx, big, wide * 2, qh + HS, HS * 2);
  cl_mem k = test_buffer(ctx, kvh, sizeof kvh), v = test_buffer(ctx, kvh, sizeof kvh);
  cl_mem q = test_buffer(ctx, qh, sizeof qh), bt = test_buffer(ctx, table, sizeof table);
  cl_mem o1 = test_buffer(ctx, NULL, 4 * HS), o2 = test_buffer(ctx, NULL, 4 * HS);
  clpa_prefill_params p;
  clpa_prefill_params_init(&p);
  p.num_seqs = 1, p.num_heads = 1, p.key_cache = k, p.value_cache = v, p.kv = kv;
  p.max_blocks_per_seq = 1, p.cu_seqlens_q = cu, p.cached_lens = cached;
  p.q_dtype = CLPA_DTYPE_F16, p.path = CLPA_PREFILL_TILES, p.block_tables = bt;
  p.query = q, p.out = o1;
  const clpa_status s1 = clpa_prefill(ctx, &p);
  p.query = big, p.q_stride = wide, p.out = o2;
  const clpa_status s2 = clpa_prefill(ctx, &p);
  uint16_t a[2 * HS], b[2 * HS];
  test_read(ctx, o1, a, sizeof a), test_read(ctx, o2, b, sizeof b);
  int32_t faults = 0;
  clpa_context_check_faults(ctx, &faults);
  if (!ok(s1 == CLPA_OK && s2 == CLPA_OK && faults == 0 && memcmp(a + HS, b + HS, HS * 2) == 0,
          "prefill tiles, q_stride 2^31 + 64: the row a compact query gives, bit for bit"))
    diag("%s, %s, faults 0x%x: %s", clpa_status_name(s1), clpa_status_name(s2), faults,
         clpa_context_last_error(ctx));
  clReleaseMemObject(big), clReleaseMemObject(k), clReleaseMemObject(v), clReleaseMemObject(q);
  clReleaseMemObject(bt), clReleaseMemObject(o1), clReleaseMemObject(o2);
}

/* reshape_and_cache into a cache whose token rows hold 2^31 elements (2^23 KV heads of 256 fp8
 * elements: one 2 GiB block a layer, wrapped, never touched): refused with the call named, or
 * run, its last element written. */
static void regress_reshape_row_past_int32(void) {
  clpa_cache_config cc;
  clpa_cache_config_init(&cc);
  cc.num_kv_heads = 1 << 23, cc.head_size = 256, cc.block_size = 1, cc.num_blocks = 1;
  cc.dtype = CLPA_DTYPE_FP8_E4M3;
  const size_t row = (size_t)1 << 31;
  cl_context cl = clpa_context_cl_context(ctx);
  cl_int e1, e2, e3;
  cl_mem kc = clCreateBuffer(cl, CL_MEM_READ_WRITE, row, NULL, &e1);
  cl_mem vc = clCreateBuffer(cl, CL_MEM_READ_WRITE, row, NULL, &e2);
  cl_mem src = clCreateBuffer(cl, CL_MEM_READ_WRITE, 2 * row, NULL, &e3);
  clpa_cache *cache = NULL;
  if (e1 || e2 || e3 || clpa_cache_wrap(ctx, &cc, &kc, &vc, &cache) != CLPA_OK) {
    ok(1, "# SKIP reshape_and_cache, rows of 2^31 elements: no 2 GiB cache here (%s)",
       clpa_context_last_error(ctx));
  } else {
    const uint16_t one = 0x3C00; /* 1.0 in f16 */
    const unsigned char poison = 0xFF;
    const int64_t slot = 0;
    cl_mem sm = test_buffer(ctx, &slot, sizeof slot);
    test_write_at(ctx, src, 2 * (row - 1), &one, 2);
    test_write_at(ctx, kc, row - 1, &poison, 1);
    clpa_reshape_and_cache_params p;
    clpa_reshape_and_cache_params_init(&p);
    p.cache = cache, p.num_tokens = 1, p.key = p.value = src, p.slot_mapping = sm;
    p.src_dtype = CLPA_DTYPE_F16;
    const clpa_status st = clpa_reshape_and_cache(ctx, &p);
    unsigned char last = poison;
    test_read_at(ctx, kc, row - 1, &last, 1);
    int32_t faults = 0;
    clpa_context_check_faults(ctx, &faults);
    if (!ok(st == CLPA_OK ? last != poison && faults == 0 : named("clpa_reshape_and_cache: "),
            "reshape_and_cache, rows of 2^31 elements: refused with the call named, or the"
            " row's last element written"))
      diag("%s, last key byte 0x%02x, faults 0x%x: %s", clpa_status_name(st), last, faults,
           clpa_context_last_error(ctx));
    else
      diag("%s: %s", clpa_status_name(st), st == CLPA_OK ? "" : clpa_context_last_error(ctx));
    clReleaseMemObject(sm);
  }
  clpa_cache_destroy(cache);
  if (!e1) clReleaseMemObject(kc);
  if (!e2) clReleaseMemObject(vc);
  if (!e3) clReleaseMemObject(src);
}

/* Decode v2 whose partials (f32 [num_seqs, num_heads, max_parts, head_size]) pass 2^64 bytes:
 * 2^24 heads of 256 over 2^30 tokens in partitions of one (the buffers would be legal: an 8 GiB
 * query and output, a 4 GiB table). Asked of clpa_decode_choice, which reads no buffer. */
static void regress_decode_v2_partials_overflow(void) {
  clpa_kv_layout kv;
  clpa_kv_layout_init(&kv, CLPA_DTYPE_F16, 1, 1, 1, 256);
  clpa_decode_params p;
  clpa_decode_params_init(&p);
  p.num_seqs = 1, p.num_heads = 1 << 24, p.kv = kv, p.max_blocks_per_seq = 1 << 30;
  p.max_context_len = 1 << 30, p.q_dtype = CLPA_DTYPE_F16, p.variant = CLPA_DECODE_V2;
  p.partition_size = 1;
  const clpa_status st = clpa_decode_choice(ctx, &p, NULL, NULL, NULL, NULL);
  if (!ok(st == CLPA_ERR_UNSUPPORTED && named("clpa_decode_choice: "),
          "decode v2, partials of 2^64 bytes: refused with the call named"))
    diag("%s: %s", clpa_status_name(st), clpa_context_last_error(ctx));
}

int main(void) {
  rng_seed_from_env();
  ctx = test_context(0);
  clpa_cache_config cc;
  clpa_cache_config_init(&cc);
  cc.num_layers = 2, cc.num_kv_heads = 2, cc.head_size = 64, cc.block_size = 16, cc.num_blocks = 8;
  clpa_cache *cache = NULL, *host = NULL;
  if (clpa_cache_create(ctx, &cc, &cache) != CLPA_OK) BAIL_OUT("cache: %s", clpa_last_error());
  cc.placement = CLPA_CACHE_HOST;
  if (clpa_cache_create(ctx, &cc, &host) != CLPA_OK) BAIL_OUT("host cache: %s", clpa_last_error());
  clpa_cache_info in;
  clpa_cache_get_info(cache, &in);
  sweep_reshape(cache, &in);
  sweep_copy(cache, host, &in);
  sweep_create();
  regress_prefill_tiles_wide_q_stride();
  regress_reshape_row_past_int32();
  regress_decode_v2_partials_overflow();

  /* smoke test n, merge_states sizes, the host converters' n and scale. */
  const size_t ns[] = {0, 1, (size_t)1 << 26, ((size_t)1 << 26) + 1, SIZE_MAX};
  int bad = 0;
  for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
    const clpa_status st = clpa_smoke_test(ctx, ns[i]);
    const int want_ok = ns[i] >= 1 && ns[i] <= ((size_t)1 << 26);
    if ((st == CLPA_OK) != want_ok || (st != CLPA_OK && !named("clpa_smoke_test: "))) bad++;
  }
  ok(bad == 0, "smoke_test: n = 0, 1, 2^26, 2^26 + 1, SIZE_MAX answered as documented");
  float f[4] = {1, 2, 3, 4};
  unsigned char o[16];
  memset(o, 0xEE, sizeof o);
  ok(clpa_dtype_encode(CLPA_DTYPE_FP8_E4M3, f, o, 4, 0.0f) == CLPA_ERR_INVALID_ARG &&
         clpa_dtype_encode(CLPA_DTYPE_FP8_E4M3, f, o, 4, -1.0f) == CLPA_ERR_INVALID_ARG &&
         clpa_dtype_encode(CLPA_DTYPE_FP8_E4M3, f, o, 4, INFINITY) == CLPA_ERR_INVALID_ARG &&
         clpa_dtype_encode((clpa_dtype)-1, f, o, 4, 1.0f) == CLPA_ERR_INVALID_ARG &&
         clpa_dtype_encode(CLPA_DTYPE_F16, NULL, o, 4, 1.0f) == CLPA_ERR_INVALID_ARG &&
         clpa_dtype_encode(CLPA_DTYPE_F16, NULL, NULL, 0, 1.0f) == CLPA_OK && o[0] == 0xEE,
     "dtype_encode: scales 0, -1, inf, a bad dtype and NULL pointers refused, writing nothing;"
     " n = 0 fine");
  ok(clpa_dtype_decode(CLPA_DTYPE_FP8_E5M2, o, f, 4, NAN) == CLPA_ERR_INVALID_ARG && f[0] == 1,
     "dtype_decode: a NaN fp8 scale refused, writing nothing");
  clpa_merge_states_params mp;
  clpa_merge_states_params_init(&mp);
  cl_mem b = test_buffer(ctx, NULL, 1024);
  mp.head_size = 64, mp.outs[0] = mp.outs[1] = mp.out = b, mp.lses[0] = mp.lses[1] = b;
  const int32_t rows[] = {-1, 0, 1, INT32_MAX, INT32_MIN};
  bad = 0;
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    mp.num_rows = rows[i];
    const clpa_status st = clpa_merge_states(ctx, &mp);
    if ((st == CLPA_OK) != (rows[i] == 0 || rows[i] == 1) ||
        (st != CLPA_OK && !named("clpa_merge_states: ")))
      bad++;
  }
  mp.num_rows = 1;
  const int32_t hss[] = {0, -1, INT32_MAX, INT32_MIN};
  for (size_t i = 0; i < sizeof hss / sizeof *hss; i++) {
    mp.head_size = hss[i];
    if (clpa_merge_states(ctx, &mp) == CLPA_OK) bad++;
  }
  clpa_context_finish(ctx);
  ok(bad == 0, "merge_states: num_rows and head_size at the limits refused unless they fit");
  clReleaseMemObject(b);
  clpa_cache_destroy(host);
  clpa_cache_destroy(cache);
  test_no_faults_left(ctx);
  clpa_context_destroy(ctx);
  return done_testing();
}
