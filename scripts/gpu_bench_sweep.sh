#!/usr/bin/env bash
# A decode sweep for the GPU machine: prints one JSON line per configuration.
B=${B:-build}
for dt in f16 bf16 f32 fp8_e4m3; do
  for v in auto v1 v2; do
    "$B/tools/clpa-bench" decode --dtype $dt --variant $v --json "$@"
  done
done
