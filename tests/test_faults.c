/*
 * Fault reporting and event wait lists.
 *
 * regress_context_len_fault_has_its_own_status: a decode whose only fault
 * is a context length beyond max_context_len used to come back from
 * clpa_context_check_faults as CLPA_ERR_BAD_BLOCK; it is
 * CLPA_ERR_BAD_CONTEXT_LEN now, with only that bit set.
 *
 * regress_wait_list_null_entry: the shared wait-list check
 * (clpa_check_wait_list, lib/buffers.c) refuses NULL entries, a count
 * without a list, a list without a count, and events of another OpenCL
 * context; a good list passes. It is internal, so this test declares it;
 * the test links the static library.
 */
#include <stdio.h>
#include <string.h>

#include "cl_util.h"

clpa_status clpa_check_wait_list(clpa_context *ctx, cl_uint n, const cl_event *evs);

static void test_status_names(void) {
  ok(strcmp(clpa_status_name(CLPA_ERR_BAD_CONTEXT_LEN), "CLPA_ERR_BAD_CONTEXT_LEN") == 0 &&
         strcmp(clpa_status_name(CLPA_ERR_LANE_MISMATCH), "CLPA_ERR_LANE_MISMATCH") == 0 &&
         CLPA_ERR_BAD_CONTEXT_LEN == -1006 && CLPA_ERR_LANE_MISMATCH == -1007,
     "the fault statuses have names and frozen numbers");
}

/* One sequence, one head, head_size 32, f16 cache of one block of 16. */
static void test_context_len_fault(clpa_context *ctx) {
  enum { HS = 32, BS = 16 };
  float q[HS], out[HS];
  uint16_t kv[HS * BS];
  for (int i = 0; i < HS; i++) q[i] = 0.01f * (float)i;
  memset(kv, 0, sizeof kv); /* f16 zeros */
  int32_t table[1] = {0}, lens[1] = {1000};
  clpa_decode_params p;
  clpa_decode_params_init(&p);
  p.num_seqs = 1;
  p.num_heads = 1;
  ok(clpa_kv_layout_init(&p.kv, CLPA_DTYPE_F16, 1, BS, 1, HS) == CLPA_OK, "layout: %s",
     clpa_last_error());
  p.max_blocks_per_seq = 1;
  p.max_context_len = BS;
  p.q_dtype = CLPA_DTYPE_F32;
  p.scale = 0.17677669f;
  p.variant = CLPA_DECODE_V1;
  p.query = test_buffer(ctx, q, sizeof q);
  p.key_cache = test_buffer(ctx, kv, sizeof kv);
  p.value_cache = test_buffer(ctx, kv, sizeof kv);
  p.block_tables = test_buffer(ctx, table, sizeof table);
  p.context_lens = test_buffer(ctx, lens, sizeof lens);
  p.out = test_buffer(ctx, NULL, sizeof out);
  int32_t f = -1;
  clpa_status st = clpa_context_check_faults(ctx, &f);
  ok(st == CLPA_OK && f == 0, "no faults before");
  st = clpa_decode(ctx, &p);
  ok(st == CLPA_OK, "decode with context length 1000 > max_context_len 16 is enqueued: %s",
     clpa_context_last_error(ctx));
  st = clpa_context_check_faults(ctx, &f);
  ok(st == CLPA_ERR_BAD_CONTEXT_LEN && f == CLPA_FAULT_BAD_CONTEXT_LEN &&
         strstr(clpa_context_last_error(ctx), "context length"),
     "a context-length fault alone gives CLPA_ERR_BAD_CONTEXT_LEN (got %s, bits 0x%x): %s",
     clpa_status_name(st), (unsigned)f, clpa_context_last_error(ctx));
  ok(clpa_context_check_faults(ctx, &f) == CLPA_OK && f == 0, "reading the faults cleared them");
  cl_mem bufs[] = {p.query, p.key_cache, p.value_cache, p.block_tables, p.context_lens, p.out};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) clReleaseMemObject(bufs[i]);
}

static void test_wait_list(clpa_context *ctx) {
  cl_int err;
  cl_event user = clCreateUserEvent(clpa_context_cl_context(ctx), &err);
  ok(err == CL_SUCCESS, "a user event");
  clSetUserEventStatus(user, CL_COMPLETE);
  cl_event good[2] = {user, user}, with_null[3] = {user, NULL, user};
  ok(clpa_check_wait_list(ctx, 0, NULL) == CLPA_OK, "an empty list passes");
  ok(clpa_check_wait_list(ctx, 2, good) == CLPA_OK, "two valid events pass: %s",
     clpa_context_last_error(ctx));
  ok(clpa_check_wait_list(ctx, 3, with_null) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_context_last_error(ctx), "wait_events[1] is NULL"),
     "a NULL entry is refused and named: %s", clpa_context_last_error(ctx));
  ok(clpa_check_wait_list(ctx, 1, NULL) == CLPA_ERR_INVALID_ARG,
     "a count without a list is refused: %s", clpa_context_last_error(ctx));
  ok(clpa_check_wait_list(ctx, 0, good) == CLPA_ERR_INVALID_ARG,
     "a list without a count is refused: %s", clpa_context_last_error(ctx));
  cl_device_id dev = clpa_context_cl_device(ctx);
  cl_context other = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  cl_event foreign = other ? clCreateUserEvent(other, &err) : NULL;
  if (foreign) {
    clSetUserEventStatus(foreign, CL_COMPLETE);
    ok(clpa_check_wait_list(ctx, 1, &foreign) == CLPA_ERR_INVALID_ARG &&
           strstr(clpa_context_last_error(ctx), "another OpenCL context"),
       "an event of another context is refused: %s", clpa_context_last_error(ctx));
    clReleaseEvent(foreign);
  }
  if (other) clReleaseContext(other);
  clReleaseEvent(user);
}

int main(void) {
  clpa_context *ctx = test_context(0);
  test_status_names();
  test_context_len_fault(ctx);
  test_wait_list(ctx);
  clpa_context_destroy(ctx);
  return done_testing();
}
