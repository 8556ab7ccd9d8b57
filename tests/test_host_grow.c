/*
 * The checked capacity growth every host array uses (host/grow.h): it
 * doubles, reaches what is needed, and never passes the element limit
 * (int32 indices) or SIZE_MAX bytes; the radix heap's int32 capacity used
 * to double past INT32_MAX.
 */
#include "grow.h"
#include "tap.h"

int main(void) {
  ok(clpa_grow_cap(0, 1, 64, INT32_MAX, 8) == 64, "an empty array starts at first");
  ok(clpa_grow_cap(0, 100, 64, INT32_MAX, 8) == 128, "and doubles to reach need");
  ok(clpa_grow_cap(64, 65, 64, INT32_MAX, 8) == 128, "a full array doubles");
  ok(clpa_grow_cap(64, 1000, 64, INT32_MAX, 8) == 1024, "several doublings at once");
  ok(clpa_grow_cap(0, 5, 0, INT32_MAX, 4) == 8, "first <= 0 counts as 1");
  /* regress: the radix heap doubled an int32 capacity without a check */
  int64_t c = clpa_grow_cap(1 << 30, (int64_t)(1 << 30) + 1, 64, INT32_MAX, 4);
  ok(c == INT32_MAX, "regress: doubling past INT32_MAX stops at INT32_MAX (%lld)", (long long)c);
  ok(clpa_grow_cap(INT32_MAX, (int64_t)INT32_MAX + 1, 64, INT32_MAX, 4) == -1,
     "regress: more than INT32_MAX elements is refused, not wrapped");
  ok(clpa_grow_cap(1000, 1500, 64, 1200, 4) == -1, "need above max is refused");
  ok(clpa_grow_cap(1000, 1100, 64, 1200, 4) == 1200, "the doubling is clamped to max");
  ok(clpa_grow_cap(0, -1, 64, INT32_MAX, 4) == -1, "a negative need is refused");
  int64_t big = (int64_t)(SIZE_MAX / 8 < (uint64_t)INT64_MAX ? SIZE_MAX / 8 : INT64_MAX / 2);
  ok(clpa_grow_cap(0, big + 1, 64, INT64_MAX, 8) == -1,
     "more elements than SIZE_MAX bytes hold is refused");
  c = clpa_grow_cap(big / 2 + 1, big, 64, INT64_MAX, 8);
  ok(c == big, "the byte limit clamps the doubling too (%lld)", (long long)c);
  int monotone = 1;
  for (int64_t need = 1; need < 100000; need += 997) {
    int64_t g = clpa_grow_cap(need / 3, need, 4, INT32_MAX, 4);
    monotone &= g >= need && g <= 2 * need + 4;
  }
  ok(monotone, "always enough, never more than twice what is needed");
  return done_testing();
}
