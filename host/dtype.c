/* dtype.c — the storage dtypes' sizes and names (clpa_base.h). */
#include <string.h>

#include "clpa_base.h"
#include "last_error.h"

size_t clpa_dtype_size(clpa_dtype dtype) {
  switch (dtype) {
    case CLPA_DTYPE_F32: return 4;
    case CLPA_DTYPE_F16:
    case CLPA_DTYPE_BF16: return 2;
    case CLPA_DTYPE_FP8_E4M3:
    case CLPA_DTYPE_FP8_E5M2: return 1;
    default: return 0;
  }
}

static const char *const dtype_names[CLPA_DTYPE_COUNT_] = {"f32", "f16", "bf16", "fp8_e4m3",
                                                           "fp8_e5m2"};

const char *clpa_dtype_name(clpa_dtype dtype) {
  if ((unsigned)dtype >= CLPA_DTYPE_COUNT_) return "invalid";
  return dtype_names[dtype];
}

clpa_status clpa_dtype_parse(const char *name, clpa_dtype *out) {
  CLPA_CHECK(NULL, !name || !out, CLPA_ERR_INVALID_ARG, "name and out must not be NULL");
  for (int i = 0; i < CLPA_DTYPE_COUNT_; i++) {
    if (strcmp(name, dtype_names[i]) == 0) {
      *out = (clpa_dtype)i;
      return CLPA_OK;
    }
  }
  return CLPA_FAIL(NULL, CLPA_ERR_INVALID_ARG,
                   "unknown dtype '%s' (expected f32, f16, bf16, fp8_e4m3 or fp8_e5m2)", name);
}
