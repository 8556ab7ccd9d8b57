/* reserved.c — the reserved words of configs and params (see reserved.h). */
#include "reserved.h"

int clpa_reserved_used(const uint64_t *reserved, int n) {
  for (int i = 0; i < n; i++)
    if (reserved[i] != 0) return i;
  return -1;
}
