/*
 * last_error.c — this thread's last-error message and the name of the
 * public call it is about (see last_error.h).
 */
#include "last_error.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char tls_error[CLPA_ERROR_MAX];

const char *clpa_last_error(void) { return tls_error; }

clpa_status clpa_err_within(char *ctx_buf, clpa_status status, const char *field) {
  char why[sizeof tls_error];
  const char *sep = strstr(tls_error, ": ");
  const size_t head = sep ? (size_t)(sep - tls_error) + 2 : 0;
  snprintf(why, sizeof why, "%s", tls_error + head);
  snprintf(tls_error + head, sizeof tls_error - head, "%s: %s", field, why);
  if (ctx_buf) memcpy(ctx_buf, tls_error, sizeof tls_error);
  return status;
}

void clpa_err_keep(char *ctx_buf) { memcpy(ctx_buf, tls_error, sizeof tls_error); }

void clpa_err_clear(void) { tls_error[0] = '\0'; }

static _Thread_local const char *tls_api;

int clpa_api_begin(const char *name) {
  if (tls_api) return 0;
  tls_api = name;
  tls_error[0] = '\0';
  return 1;
}

void clpa_api_end(int token) {
  if (token) tls_api = NULL;
}

clpa_status clpa_err_vset(char *ctx_buf, clpa_status status, const char *func,
                          const char *fmt, va_list ap) {
  int n = snprintf(tls_error, sizeof tls_error, "%s: ", tls_api ? tls_api : func);
  if (n < 0 || (size_t)n >= sizeof tls_error) n = 0;
  vsnprintf(tls_error + n, sizeof tls_error - (size_t)n, fmt, ap);
  if (ctx_buf) memcpy(ctx_buf, tls_error, sizeof tls_error);
  return status;
}

clpa_status clpa_err_set(char *ctx_buf, clpa_status status, const char *func,
                         const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  clpa_err_vset(ctx_buf, status, func, fmt, ap);
  va_end(ap);
  return status;
}

void clpa_err_append(char *ctx_buf, const char *text) {
  size_t n = strlen(tls_error);
  snprintf(tls_error + n, sizeof tls_error - n, "%s", text);
  if (ctx_buf) memcpy(ctx_buf, tls_error, sizeof tls_error);
}
