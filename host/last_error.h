/*
 * last_error.h — error reporting shared by host/ and lib/: this thread's
 * last-error message, the public call it names, and the one-line checks.
 * Not installed.
 */
#ifndef CLPA_HOST_LAST_ERROR_H
#define CLPA_HOST_LAST_ERROR_H

#include <stdarg.h>

#include "clpa_base.h"

/* Records a failure: formats "<func>: <message>" into this thread's
 * last-error buffer (and into ctx_buf when it is not NULL, a
 * CLPA_ERROR_MAX-byte buffer owned by a context). Returns status so it can
 * end a return statement. */
#define CLPA_ERROR_MAX 16384
clpa_status clpa_err_set(char *ctx_buf, clpa_status status, const char *func,
                         const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
clpa_status clpa_err_vset(char *ctx_buf, clpa_status status, const char *func,
                          const char *fmt, va_list ap);
/* Appends text to the last-error message of this thread (and ctx_buf). */
void clpa_err_append(char *ctx_buf, const char *text);
/* Names the field the last message is about: "<call>: <why>" becomes
 * "<call>: <field>: <why>" (a nested check's message, the call named once);
 * copies it into ctx_buf too. Returns status. */
clpa_status clpa_err_within(char *ctx_buf, clpa_status status, const char *field);
/* Copies this thread's last-error message into ctx_buf. */
void clpa_err_keep(char *ctx_buf);
/* Clears this thread's last-error message. */
void clpa_err_clear(void);

/* Messages name the public call the user made, not the internal function
 * that found the problem: clpa_api_begin(name) makes `name` the prefix of
 * every message this thread records until clpa_api_end, and clears the
 * last error. Nested public calls keep the outermost name. Returns the
 * token clpa_api_end takes. */
int clpa_api_begin(const char *name);
void clpa_api_end(int token);
/* The body of a public entry point that calls its implementation. */
#define CLPA_API_CALL(call)                        \
  do {                                             \
    const int api_token_ = clpa_api_begin(__func__); \
    const clpa_status api_status_ = (call);        \
    clpa_api_end(api_token_);                      \
    return api_status_;                            \
  } while (0)

/* One line per check, as zstd's RETURN_ERROR_IF: the message says where
 * and why. For host objects (no context) pass NULL as the buffer. */
#define CLPA_FAIL(buf, status, ...) clpa_err_set((buf), (status), __func__, __VA_ARGS__)
#define CLPA_CHECK(buf, cond, status, ...)                    \
  do {                                                        \
    if (cond) return clpa_err_set((buf), (status), __func__, __VA_ARGS__); \
  } while (0)

#endif
