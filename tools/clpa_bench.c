/*
 * clpa-bench — speed of clpa's operations, as achieved bandwidth (or
 * operations per second) next to a ceiling measured in the same run.
 *
 *   clpa-bench decode [--heads 32 --kv-heads 8 --head-size 128 --block-size 16
 *                      --batch 16 --context 4096 --dtype f16 --variant auto
 *                      --partition 512 --heads-per-group 0] [--json]
 *
 *   clpa-bench radix [--json]      (the radix prefix cache on a synthetic trace; no device)
 *   clpa-bench kvman [--json]      (KV-manager host work per decode step; no device)
 *
 * The device is CLPA_DEVICE's, else the default (clpa-info shows it).
 */
#include <stdio.h>
#include <string.h>

#include "bench_common.h"

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "decode") == 0) return bench_decode(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "radix") == 0) return clpa_bench_radix(argc - 1, argv + 1);
  if (argc >= 2 && strcmp(argv[1], "kvman") == 0) return clpa_bench_kvman(argc - 1, argv + 1);
  fprintf(stderr,
          "usage: clpa-bench decode [--heads N --kv-heads N --head-size N --block-size N\n"
          "                          --batch N --context N --dtype f32|f16|bf16|fp8_e4m3|fp8_e5m2\n"
          "                          --variant v1|v2|auto --partition N --heads-per-group N]"
          " [--json]\n"
          "       clpa-bench radix [--requests N --block-size N --blocks N ...] [--json]\n"
          "       clpa-bench kvman [--running N --steps N --width N ...] [--json]\n");
  return 2;
}
