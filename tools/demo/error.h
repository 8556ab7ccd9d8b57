/*
 * error.h — the demo's one error message. Every demo module that fails
 * (the model and its step, the linear layers, the GGUF reader, the
 * tokenizer, the quantized blocks, the prompts file, the engine) records
 * what failed here with demo_fail and returns a clpa_status; the caller
 * reads it with demo_last_error(). Kept per thread, like
 * clpa_last_error().
 *
 * error.c needs libc and clpa_base.h only, so the host-only modules link
 * it without OpenCL; error_cl.c turns OpenCL's results into statuses.
 */
#ifndef CLPA_DEMO_ERROR_H
#define CLPA_DEMO_ERROR_H

#include <stdint.h>

#include "clpa_base.h"

/* The message of this thread's last failed demo call: what failed and
 * why ("" when none failed). Valid until that thread's next failure. */
const char *demo_last_error(void);
/* Records the message (printf format) and returns st. The arguments may
 * be demo_last_error() itself, so that a caller puts its context in front
 * of a callee's message: demo_fail(st, "%s: %s", path, demo_last_error()). */
clpa_status demo_fail(clpa_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* A clpa result: CLPA_OK, or st with clpa's message, prefixed with the
 * call and, when layer >= 0, the layer. */
clpa_status demo_clpa_check(clpa_status st, const char *what, int32_t layer);

/* OpenCL (error_cl.c); e is a cl_int. */
/* An OpenCL error as a clpa status. */
clpa_status demo_cl_status(int32_t e);
/* An OpenCL result: CLPA_OK, or the mapped status with `what` and the error. */
clpa_status demo_cl_check(int32_t e, const char *what);

#endif
