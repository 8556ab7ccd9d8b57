/* Status names, dtype names and parsing, the allocator hook, error text. */
#include <string.h>

#include "tap.h"
#include "util.h"

int main(void) {
  ok(clpa_version_number() == CLPA_VERSION_NUMBER, "library version %u matches header %u",
     clpa_version_number(), (unsigned)CLPA_VERSION_NUMBER);
  ok(strcmp(clpa_status_name(CLPA_ERR_INVALID_ARG), "CLPA_ERR_INVALID_ARG") == 0,
     "status name of CLPA_ERR_INVALID_ARG");
  ok(CLPA_ERR_INVALID_ARG == -30 && CLPA_ERR_BUILD == -11, "status values are OpenCL's");
  ok(strcmp(clpa_status_name((clpa_status)12345), "CLPA_ERR_UNKNOWN") == 0,
     "unknown status has a name");
  for (int d = 0; d < CLPA_DTYPE_COUNT_; d++) {
    clpa_dtype back;
    ok(clpa_dtype_parse(clpa_dtype_name((clpa_dtype)d), &back) == CLPA_OK && back == (clpa_dtype)d,
       "dtype %s round-trips through its name", clpa_dtype_name((clpa_dtype)d));
  }
  clpa_dtype d;
  ok(clpa_dtype_parse("f64", &d) == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "f64"),
     "unknown dtype rejected with a message naming it: %s", clpa_last_error());
  ok(clpa_dtype_size(CLPA_DTYPE_BF16) == 2 && clpa_dtype_size((clpa_dtype)99) == 0,
     "dtype sizes");
  uint64_t h1 = clpa_hash64(CLPA_HASH64_INIT, "abc", 3);
  uint64_t h2 = clpa_hash64(CLPA_HASH64_INIT, "abd", 3);
  ok(h1 != h2 && h1 == clpa_hash64(CLPA_HASH64_INIT, "abc", 3), "hash is stable and separates");
  /* Block-sparse prefill's coverage rule: seq 0 has 64 new tokens over 60
   * cached (124 keys: 2 key blocks of 64), seq 1 none, seq 2 65 new (2
   * query blocks) over 0. */
  const int32_t cu[4] = {10, 74, 74, 139}, cached[3] = {60, 5000, 0};
  ok(clpa_block_mask_uncovered(3, cu, cached, 64, 2, 3) == -1 &&
         clpa_block_mask_uncovered(3, cu, cached, 64, 2, 1) == 0 &&
         clpa_block_mask_uncovered(3, cu, cached, 64, 1, 2) == 2 &&
         clpa_block_mask_uncovered(3, cu, cached, 128, 1, 1) == -1 &&
         clpa_block_mask_uncovered(2, cu, cached, 64, 1, 2) == -1,
     "block mask coverage: the first sequence with new tokens past the blocks, else -1");
  return done_testing();
}
