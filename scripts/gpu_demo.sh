#!/usr/bin/env bash
# gpu_demo.sh — on the lent GPU machine (../shared/GPU.md; .gpu carried):
# builds, then serves the llama-1b preset (f16 weights and cache, 64
# requests) twice in a row at 16 running and at 64 (the first run of a
# fresh machine includes program builds), printing the summary's figures.
set -u
cd "$(dirname "$0")/.."
B=${B:-/tmp/clpa-build} bash scripts/gpu.sh true > /dev/null 2>&1 || { echo "build failed"; exit 1; }
B=${B:-/tmp/clpa-build}
export CLPA_DEVICE=${CLPA_DEVICE:-NVIDIA}
D="$B/tools/clpa-demo --preset llama-1b --weight-dtype f16 --kv-dtype f16 --requests 64 --json"
for extra in "" "" "--max-running 64" "--max-running 64" "$@"; do
  echo -n "demo $extra: "
  timeout 200 $D $extra 2>/dev/null | tail -1 | tr ',' '\n' |
    grep -E 'tokens_per_s"|tpot_p50|ttft_p50|gemm_s|attention_s|other_s|"seconds|build_s' | tr '\n' ' '
  echo
done
