/*
 * tap.h — the one tiny test helper: TAP output (plan, ok, diag) and a
 * seeded random generator, so every failure prints what replays it.
 * Header-only; each test is one program.
 */
#ifndef CLPA_TAP_H
#define CLPA_TAP_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_n, tap_failed;

/* Prints a diagnostic; every line of it starts with "# ", as TAP wants. */
static inline void diag(const char *fmt, ...) {
  char buf[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fputs("# ", stdout);
  for (const char *p = buf; *p; p++) {
    fputc(*p, stdout);
    if (*p == '\n' && p[1]) fputs("# ", stdout);
  }
  fputc('\n', stdout);
  fflush(stdout);
}

/* Records one test point; returns cond so callers can add diagnostics. A
 * description stays on one line (newlines become spaces). */
static inline int ok(int cond, const char *fmt, ...) {
  char buf[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  for (char *p = buf; *p; p++)
    if (*p == '\n') *p = ' ';
  tap_n++;
  printf("%sok %d - %s\n", cond ? "" : "not ", tap_n, buf);
  fflush(stdout);
  if (!cond) tap_failed++;
  return cond;
}

/* Stops the test: a failed setup leaves nothing to check. TAP's "Bail out!". */
#define BAIL_OUT(...)                 \
  do {                                \
    printf("Bail out! ");             \
    printf(__VA_ARGS__);              \
    printf("\n");                     \
    exit(2);                          \
  } while (0)

/* Prints the plan at the end (TAP allows it last) and returns the exit code. */
static inline int done_testing(void) {
  printf("1..%d\n", tap_n);
  if (tap_n == 0) {
    printf("# no test points ran\n");
    return 1;
  }
  return tap_failed ? 1 : 0;
}

/* splitmix64: small, fast, and seeded from CLPA_TEST_SEED or the clock. */
static uint64_t tap_rng_state;
static inline uint64_t rng_next(void) {
  uint64_t z = (tap_rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
/* uniform integer in [0, n) */
static inline uint32_t rng_below(uint32_t n) { return n ? (uint32_t)(rng_next() % n) : 0; }
/* uniform in [lo, hi) */
static inline double rng_uniform(double lo, double hi) {
  return lo + (hi - lo) * ((double)(rng_next() >> 11) * (1.0 / 9007199254740992.0));
}

#include <time.h>
/* Seeds the generator and prints the seed, which CLPA_TEST_SEED replays. */
static inline uint64_t rng_seed_from_env(void) {
  const char *s = getenv("CLPA_TEST_SEED");
  uint64_t seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
  tap_rng_state = seed;
  diag("seed %llu (replay with CLPA_TEST_SEED=%llu)", (unsigned long long)seed,
       (unsigned long long)seed);
  return seed;
}

#endif
