/* status.c — clpa_status_name (clpa_base.h). */
#include "clpa_base.h"

const char *clpa_status_name(clpa_status status) {
  switch (status) {
#define CASE(x) \
  case x:       \
    return #x
    CASE(CLPA_OK);
    CASE(CLPA_ERR_DEVICE_NOT_FOUND);
    CASE(CLPA_ERR_DEVICE_MEMORY);
    CASE(CLPA_ERR_OUT_OF_RESOURCES);
    CASE(CLPA_ERR_OUT_OF_MEMORY);
    CASE(CLPA_ERR_BUILD);
    CASE(CLPA_ERR_INVALID_ARG);
    CASE(CLPA_ERR_OPENCL);
    CASE(CLPA_ERR_UNSUPPORTED);
    CASE(CLPA_ERR_POOL_EXHAUSTED);
    CASE(CLPA_ERR_BAD_BLOCK);
    CASE(CLPA_ERR_IO);
    CASE(CLPA_ERR_STATE);
    CASE(CLPA_ERR_BAD_CONTEXT_LEN);
    CASE(CLPA_ERR_LANE_MISMATCH);
    CASE(CLPA_ERR_VERSION);
#undef CASE
  }
  return "CLPA_ERR_UNKNOWN";
}
