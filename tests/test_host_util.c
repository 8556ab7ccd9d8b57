/* Status names, dtype names and parsing, the allocator hook, error text. */
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "block_mask.h"
#include "hash.h"
#include "last_error.h"
#include "ptx.h"

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
  /* The register cap written into PTX (lib/program.c on NVIDIA): after each
   * entry's directives, before its body; other functions and the NUL
   * padding untouched; refused where there is nothing to cap or a cap. */
  static const char ptx[] =
      "//\n.version 9.0\n.func (.reg .f32 x) helper(\n)\n{\n\tret;\n}\n"
      ".entry a(\n\t.param .u64 a_0\n)\n.reqntid 128, 1, 1\n{\n\tret;\n}\n"
      ".entry b(\n)\n{\n\tret;\n}\n\0\0";
  static const char want[] =
      "//\n.version 9.0\n.func (.reg .f32 x) helper(\n)\n{\n\tret;\n}\n"
      ".entry a(\n\t.param .u64 a_0\n)\n.reqntid 128, 1, 1\n.maxnreg 128\n{\n\tret;\n}\n"
      ".entry b(\n)\n.maxnreg 128\n{\n\tret;\n}\n\0\0";
  size_t out_len = 0;
  unsigned char *out = clpa_ptx_with_maxnreg((const unsigned char *)ptx, sizeof ptx - 1, 128,
                                             &out_len);
  ok(out && out_len == sizeof want - 1 && memcmp(out, want, out_len) == 0,
     "ptx: .maxnreg 128 before each entry's body (%zu bytes, want %zu)", out_len,
     sizeof want - 1);
  size_t again_len = 0;
  unsigned char *again = out ? clpa_ptx_with_maxnreg(out, out_len, 96, &again_len) : NULL;
  ok(out && !again, "ptx: an entry that has a cap is left alone");
  free(out), free(again);
  static const char no_entry[] = ".version 9.0\n.func f(\n)\n{\n}\n";
  static const char no_body[] = ".entry a(\n)\n.reqntid 32";
  ok(!clpa_ptx_with_maxnreg((const unsigned char *)no_entry, sizeof no_entry - 1, 128, &out_len) &&
         !clpa_ptx_with_maxnreg((const unsigned char *)no_body, sizeof no_body - 1, 128,
                                &out_len) &&
         !clpa_ptx_with_maxnreg((const unsigned char *)ptx, sizeof ptx - 1, 0, &out_len),
     "ptx: no entry, an entry without a body, or no cap: NULL");
  return done_testing();
}
