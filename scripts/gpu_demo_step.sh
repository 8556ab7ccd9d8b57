#!/usr/bin/env bash
# gpu_demo_step.sh — on the lent GPU machine (../shared/GPU.md; .gpu carried,
# with libclblast): builds, then serves clpa-demo's llama-1b preset (f16) at 16
# and 64 running and with 64 tokens out, and once more with --trace, summed
# by scripts/demo_trace.py: the figures of
# docs/decisions/0033-demo-step-trace.md (its "before" column: the same
# commands on the tree before, 6cc78a3). JSON lines go to $OUT.
set -u
cd "$(dirname "$0")/.." || exit 1
B=${B:-/tmp/clpa-build} bash scripts/gpu.sh true > /dev/null 2>&1 || { echo "build failed"; exit 1; }
B=${B:-/tmp/clpa-build}
O=${OUT:-/tmp}
export CLPA_DEVICE=${CLPA_DEVICE:-NVIDIA}
D="$B/tools/clpa-demo --preset llama-1b --weight-dtype f16 --kv-dtype f16 --requests 64 --json"
for extra in "" "--max-running 64" "--output-min 64 --output-max 64 --arrival-steps 0"; do
  echo -n "demo $extra: "
  # shellcheck disable=SC2086
  timeout 120 $D $extra 2>/dev/null | tail -1 | tee -a "$O/demo.jsonl" | tr ',' '\n' |
    grep -E 'tokens_per_s"|tpot_p50|decode_step_ms|ops_decode_step' | tr '\n' ' '
  echo
done
# shellcheck disable=SC2086
timeout 120 $D --trace "$O/trace.jsonl" > /dev/null 2>&1 && python3 scripts/demo_trace.py "$O/trace.jsonl"
