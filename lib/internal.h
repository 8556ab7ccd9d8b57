/*
 * internal.h — what lib/ files share: the context, OpenCL error handling,
 * the program cache. Not installed.
 */
#ifndef CLPA_LIB_INTERNAL_H
#define CLPA_LIB_INTERNAL_H

#include "clpa.h"
#include "util.h"

typedef struct clpa_program_entry {
  struct clpa_program_entry *next;
  char *key; /* family + '\n' + full build options */
  cl_program program;
} clpa_program_entry;

struct clpa_context {
  cl_platform_id platform;
  cl_device_id dev;
  cl_context cl;
  cl_command_queue queue;
  int owns_queue; /* clpa created the queue (and the context) */
  clpa_device_info info;
  clpa_lanes lanes;
  int binary_cache;
  char *cache_dir;
  clpa_program_entry *programs;
  clpa_program_stats stats;
  char error[CLPA_ERROR_MAX];
};

/* Name of an OpenCL error code ("CL_INVALID_VALUE"), or "CL_UNKNOWN_ERROR". */
const char *clpa_cl_error_name(cl_int err);
/* Maps an OpenCL error to the closest clpa_status. */
clpa_status clpa_status_from_cl(cl_int err);

/* Records an OpenCL failure in the context: "<what> failed: CL_X (n)". */
#define CLPA_CL_FAIL(ctx, err, what)                                                     \
  clpa_err_set((ctx) ? (ctx)->error : NULL, clpa_status_from_cl(err), __func__,           \
               "%s failed: %s (%d)", (what), clpa_cl_error_name(err), (int)(err))
#define CLPA_CL_CHECK(ctx, err, what)                              \
  do {                                                             \
    cl_int e_ = (err);                                             \
    if (e_ != CL_SUCCESS) return CLPA_CL_FAIL((ctx), e_, (what));  \
  } while (0)
/* Argument checks that record in the context. */
#define CLPA_CTX_CHECK(ctx, cond, status, ...) CLPA_CHECK((ctx)->error, cond, status, __VA_ARGS__)

/* Fills info for one device; lanes is the path clpa would pick. */
clpa_status clpa_device_query(cl_platform_id p, cl_device_id d, clpa_device_info *info);

/* Program cache (program.c). */
clpa_status clpa_program_get_internal(clpa_context *ctx, const char *family, const char *options,
                                      cl_program *out);
void clpa_programs_release(clpa_context *ctx);
/* Creates a kernel by name from a family's program. */
clpa_status clpa_kernel_create(clpa_context *ctx, const char *family, const char *options,
                               const char *name, cl_kernel *out);

/* Sets kernel argument i from a value, recording failures. */
#define CLPA_SET_ARG(ctx, k, i, v)                                                  \
  do {                                                                             \
    cl_int e_ = clSetKernelArg((k), (i), sizeof(v), &(v));                         \
    if (e_ != CL_SUCCESS) {                                                        \
      clReleaseKernel(k);                                                          \
      return clpa_err_set((ctx)->error, clpa_status_from_cl(e_), __func__,          \
                          "clSetKernelArg(%d) failed: %s", (int)(i), clpa_cl_error_name(e_)); \
    }                                                                              \
  } while (0)

#endif
