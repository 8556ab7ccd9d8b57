/* size_math.c — checked size arithmetic (see size_math.h). */
#include "size_math.h"

#include <stdint.h>

int clpa_size_mul_add(size_t a, size_t b, size_t c, size_t *out) {
  if (b && a > (SIZE_MAX - c) / b) return 0;
  *out = a * b + c;
  return 1;
}
