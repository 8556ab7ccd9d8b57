/*
 * error.c — see error.h: the demo's message, one a thread.
 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char demo_err[2048];

const char *demo_last_error(void) { return demo_err; }

clpa_status demo_fail(clpa_status st, const char *fmt, ...) {
  char msg[sizeof demo_err]; /* the arguments may point into demo_err */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  memcpy(demo_err, msg, sizeof msg);
  return st;
}

clpa_status demo_clpa_check(clpa_status st, const char *what, int32_t layer) {
  if (st == CLPA_OK) return CLPA_OK;
  if (layer < 0)
    return demo_fail(st, "%s: %s: %s", what, clpa_status_name(st), clpa_last_error());
  return demo_fail(st, "%s (layer %d): %s: %s", what, (int)layer, clpa_status_name(st),
                   clpa_last_error());
}
