/*
 * error.h — the demo's one error message: every demo module that fails
 * records what failed here and returns a clpa_status (error.c).
 */
#ifndef CLPA_DEMO_ERROR_H
#define CLPA_DEMO_ERROR_H

#include "clpa.h"

/* The message of the demo's last failed call: what failed and why. */
const char *demo_last_error(void);
/* Records the message (printf format) and returns st. */
clpa_status demo_model_fail(clpa_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* An OpenCL error as a clpa status. */
clpa_status demo_cl_status(cl_int e);
/* An OpenCL result: CLPA_OK, or the mapped status with `what` and the error. */
clpa_status demo_cl_check(cl_int e, const char *what);
/* A clpa result: its message, prefixed with where the demo called it. */
clpa_status demo_clpa_check(clpa_status st, const char *what, int32_t layer);

#endif
