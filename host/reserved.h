/*
 * reserved.h — the reserved words every config and params struct ends
 * in. Not installed.
 */
#ifndef CLPA_HOST_RESERVED_H
#define CLPA_HOST_RESERVED_H

#include <stdint.h>

#include "last_error.h"

/* Every config and params struct ends in reserved words that must be 0
 * (README's ABI: room for fields to come). Returns the index of the first
 * nonzero one, or -1. */
int clpa_reserved_used(const uint64_t *reserved, int n);
/* Refuses s (a pointer to such a struct; `name` its access path in the
 * message, as "p->" or "p->decode.") whose reserved words are not all 0. */
#define CLPA_CHECK_RESERVED(buf, s, name)                                                   \
  do {                                                                                     \
    const int used_ = clpa_reserved_used((s)->reserved,                                    \
                                         (int)(sizeof (s)->reserved / sizeof *(s)->reserved)); \
    CLPA_CHECK(buf, used_ >= 0, CLPA_ERR_INVALID_ARG,                                      \
               "%sreserved[%d] = %llu (reserved words must be 0: fill the struct with its " \
               "_init function)",                                                          \
               name, used_, used_ >= 0 ? (unsigned long long)(s)->reserved[used_] : 0ull);  \
  } while (0)

#endif
