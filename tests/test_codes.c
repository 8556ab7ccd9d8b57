/*
 * The C/OpenCL C contract. clpa_codes.h is read by both compilers and
 * kv.cl's paged addressing has one host twin (clpa_kv_key_index,
 * clpa_kv_value_index); this test proves the two sides agree. For every
 * storage dtype and layout kind, a probe kernel built through the
 * library's own program path (the prepended header and kv.cl, exactly as
 * the cache family gets them) writes the codes, fault bits and X it sees
 * and the index of every element of a block's KV heads (a 16-byte row's
 * first through the tensor-core paths' key_row16 and value_row16); the
 * host compares
 * with the public enum and macros and with the layout (odd dtypes with
 * blocks a block_pitch apart, past their packed size). It also pins the
 * canonical options: the same defines in another order are one program.
 */
#include <string.h>

#include "cl_util.h"

#define BS 16
#define HS 64
#define NKV 3 /* KV heads: the NHD token stride is NKV * HS */

static void check_dtype(clpa_context *ctx, clpa_dtype dt, clpa_kv_layout_kind kind) {
  char opts[64];
  snprintf(opts, sizeof opts, "-DCLPA_KV_DTYPE=%d -DCLPA_KV_LAYOUT=%d", (int)dt, (int)kind);
  const char *kn = clpa_kv_layout_kind_name(kind);
  cl_program prog;
  if (!ok(clpa_program_get(ctx, "cache", opts, &prog) == CLPA_OK,
          "cache family for %s, %s builds", clpa_dtype_name(dt), kn)) {
    diag("%s", clpa_context_last_error(ctx));
    return;
  }
  clpa_kv_layout l;
  const int layout_ok = clpa_kv_layout_init_kind(&l, kind, dt, 2, BS, NKV, HS) == CLPA_OK;
  if (layout_ok && dt % 2) { /* blocks further apart than their size */
    l.block_pitch = l.block_stride + 8 * (uint64_t)l.x;
    ok(clpa_kv_layout_check(&l, &l) == CLPA_OK && l.block_stride == l.block_pitch,
       "%s, %s: block_pitch %llu is the block stride", clpa_dtype_name(dt), kn,
       (unsigned long long)l.block_pitch);
  }
  cl_ulong bst = l.block_stride;
  enum { N = 10 + 2 * NKV * BS * HS };
  static int got[N];
  memset(got, 0x55, sizeof got);
  cl_mem out = test_buffer(ctx, NULL, sizeof got);
  cl_int err;
  cl_kernel k = clCreateKernel(prog, "clpa_cache_contract", &err);
  int bs = BS, hs = HS, nkv = NKV;
  size_t global = 1;
  if (err == CL_SUCCESS) {
    err = clSetKernelArg(k, 0, sizeof out, &out);
    err |= clSetKernelArg(k, 1, sizeof bs, &bs);
    err |= clSetKernelArg(k, 2, sizeof hs, &hs);
    err |= clSetKernelArg(k, 3, sizeof nkv, &nkv);
    err |= clSetKernelArg(k, 4, sizeof bst, &bst);
    if (err == CL_SUCCESS)
      err = clEnqueueNDRangeKernel(clpa_context_cl_queue(ctx), k, 1, NULL, &global, NULL, 0, NULL,
                                   NULL);
    clReleaseKernel(k);
  }
  test_read(ctx, out, got, sizeof got);
  clReleaseMemObject(out);
  ok(err == CL_SUCCESS, "%s: the probe kernel ran (%d)", clpa_dtype_name(dt), (int)err);
  const int want[9] = {CLPA_DTYPE_F32,       CLPA_DTYPE_F16,      CLPA_DTYPE_BF16,
                       CLPA_DTYPE_FP8_E4M3,  CLPA_DTYPE_FP8_E5M2, CLPA_DTYPE_COUNT_,
                       CLPA_FAULT_BAD_BLOCK, CLPA_FAULT_BAD_CONTEXT_LEN, CLPA_FAULT_LANES};
  int codes_ok = 1;
  for (int i = 0; i < 9; i++) codes_ok &= got[i] == want[i];
  ok(codes_ok, "%s: the device sees the host's dtype codes and fault bits", clpa_dtype_name(dt));
  ok(layout_ok && got[9] == l.x &&
         l.x == (int)(16 / clpa_dtype_size(dt)),
     "%s: device X %d, layout x %d", clpa_dtype_name(dt), got[9], l.x);
  int bad = -1; /* the probe's order: block 1, head-, then token-major */
  for (int i = 0; i < NKV * BS * HS && bad < 0; i++) {
    const int h = i / (BS * HS), t = i / HS % BS, d = i % HS;
    if ((uint64_t)got[10 + i] != clpa_kv_key_index(&l, 1, h, t, d) ||
        (uint64_t)got[10 + NKV * BS * HS + i] != clpa_kv_value_index(&l, 1, h, t, d))
      bad = i;
  }
  ok(bad < 0, "%s, %s: kv.cl's key_index and value_index equal the host's for every element",
     clpa_dtype_name(dt), kn);
  if (bad >= 0) {
    const int h = bad / (BS * HS), t = bad / HS % BS, d = bad % HS;
    diag("head %d tok %d dim %d: device key %d value %d, host %llu %llu", h, t, d, got[10 + bad],
         got[10 + NKV * BS * HS + bad], (unsigned long long)clpa_kv_key_index(&l, 1, h, t, d),
         (unsigned long long)clpa_kv_value_index(&l, 1, h, t, d));
  }
}

int main(void) {
  rng_seed_from_env();
  clpa_context *ctx = test_context(0);
  for (int k = 0; k < CLPA_KV_LAYOUT_COUNT_; k++)
    for (int d = 0; d < CLPA_DTYPE_COUNT_; d++) check_dtype(ctx, (clpa_dtype)d, (clpa_kv_layout_kind)k);
  const int kinds[4] = {CLPA_KV_LAYOUT_SPLIT_KEY, CLPA_KV_LAYOUT_HND, CLPA_KV_LAYOUT_NHD,
                        CLPA_KV_LAYOUT_COUNT_};
  ok(kinds[0] == CLPA_CODE_LAYOUT_SPLIT_KEY && kinds[1] == CLPA_CODE_LAYOUT_HND &&
         kinds[2] == CLPA_CODE_LAYOUT_NHD && kinds[3] == CLPA_CODE_LAYOUT_COUNT,
     "the layout kinds are clpa_codes.h's layout codes");
  cl_program none;
  ok(clpa_program_get(ctx, "cache", "-DCLPA_KV_DTYPE=1", &none) == CLPA_ERR_BUILD &&
         strstr(clpa_context_last_error(ctx), "CLPA_KV_LAYOUT"),
     "the cache family without CLPA_KV_LAYOUT fails its build, naming it");
  cl_program a, b, c;
  ok(clpa_program_get(ctx, "blocks", "", &c) == CLPA_OK,
     "the dtype-blind family builds with no dtype: %s", clpa_last_error());
  clpa_program_stats before, after;
  clpa_context_program_stats(ctx, &before);
  ok(clpa_program_get(ctx, "smoke", "-DCLPA_A=1 -DCLPA_B=2", &a) == CLPA_OK &&
         clpa_program_get(ctx, "smoke", " -DCLPA_B=2   -DCLPA_A=1 ", &b) == CLPA_OK && a == b,
     "the same defines in another order name the same program");
  clpa_context_program_stats(ctx, &after);
  ok(after.built_from_source + after.loaded_from_disk ==
         before.built_from_source + before.loaded_from_disk + 1,
     "and it was built (or loaded) once");
  clpa_context_destroy(ctx);
  return done_testing();
}
