/*
 * size_math.h — checked size arithmetic on numbers that come from users.
 * Not installed.
 */
#ifndef CLPA_HOST_SIZE_MATH_H
#define CLPA_HOST_SIZE_MATH_H

#include <stddef.h>

/* Size arithmetic on numbers that come from users: *out = a * b + c.
 * Returns 1, or 0 (and leaves *out alone) when the result does not fit
 * in size_t. Every size computed from user input goes through it. */
int clpa_size_mul_add(size_t a, size_t b, size_t c, size_t *out);

#endif
