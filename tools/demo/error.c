/*
 * error.c — see error.h.
 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

static char demo_err[2048];

const char *demo_last_error(void) { return demo_err; }

clpa_status demo_model_fail(clpa_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(demo_err, sizeof demo_err, fmt, ap);
  va_end(ap);
  return st;
}

clpa_status demo_cl_status(cl_int e) {
  switch (e) {
  case CL_MEM_OBJECT_ALLOCATION_FAILURE: return CLPA_ERR_DEVICE_MEMORY;
  case CL_OUT_OF_RESOURCES: return CLPA_ERR_OUT_OF_RESOURCES;
  case CL_OUT_OF_HOST_MEMORY: return CLPA_ERR_OUT_OF_MEMORY;
  case CL_BUILD_PROGRAM_FAILURE: return CLPA_ERR_BUILD;
  default: return CLPA_ERR_OPENCL;
  }
}

clpa_status demo_cl_check(cl_int e, const char *what) {
  return e == CL_SUCCESS ? CLPA_OK
                         : demo_model_fail(demo_cl_status(e), "%s: OpenCL error %d", what, (int)e);
}

clpa_status demo_clpa_check(clpa_status st, const char *what, int32_t layer) {
  if (st == CLPA_OK) return CLPA_OK;
  return demo_model_fail(st, "%s (layer %d): %s: %s", what, (int)layer, clpa_status_name(st),
                         clpa_last_error());
}
