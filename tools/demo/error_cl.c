/*
 * error_cl.c — see error.h: OpenCL's results as clpa statuses, with the
 * demo's message.
 */
#include "clpa.h" /* <CL/cl.h> as clpa builds it */

#include "error.h"

clpa_status demo_cl_status(int32_t e) {
  switch (e) {
  case CL_MEM_OBJECT_ALLOCATION_FAILURE: return CLPA_ERR_DEVICE_MEMORY;
  case CL_OUT_OF_RESOURCES: return CLPA_ERR_OUT_OF_RESOURCES;
  case CL_OUT_OF_HOST_MEMORY: return CLPA_ERR_OUT_OF_MEMORY;
  case CL_BUILD_PROGRAM_FAILURE: return CLPA_ERR_BUILD;
  default: return CLPA_ERR_OPENCL;
  }
}

clpa_status demo_cl_check(int32_t e, const char *what) {
  return e == CL_SUCCESS ? CLPA_OK
                         : demo_fail(demo_cl_status(e), "%s: OpenCL error %d", what, (int)e);
}
