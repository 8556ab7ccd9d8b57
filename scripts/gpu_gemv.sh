#!/usr/bin/env bash
# gpu_gemv.sh — on the lent GPU machine (../shared/GPU.md; .gpu carried, with
# libclblast): builds, runs test_demo_linear on NVIDIA, then times clpa-demo's
# few-row tensor-core kernel (clpa-bench linear --engine gemv, cold L2) in
# each shape (column tiles 1, 2, 4 by warps 8, 16 by chunks in flight 2, 4)
# against the table (--engine auto) by rows, and serves the llama-1b preset
# (f16) at 16 and 64 running, with 64 tokens out, and prefill-heavy. The
# figures of docs/decisions/0029-demo-linear-table.md's gemv section (its
# "before" column: the same commands on the tree before, 7aca763); JSON lines
# go to $OUT.
set -u
cd "$(dirname "$0")/.."
B=${B:-/tmp/clpa-build} bash scripts/gpu.sh true > /dev/null 2>&1 || { echo "build failed"; exit 1; }
B=${B:-/tmp/clpa-build}
O=${OUT:-/tmp}
export CLPA_DEVICE=${CLPA_DEVICE:-NVIDIA}
timeout 200 "$B/tests/test_demo_linear" > "$O/test_demo_linear.txt" 2>&1
echo "test_demo_linear rc=$? ok=$(grep -c '^ok' "$O/test_demo_linear.txt") not_ok=$(grep -c '^not ok' "$O/test_demo_linear.txt")"
steps() { # the step lines of a JSON file: rows: us (ratio of copy)
  grep '"step"' "$1" | sed 's/.*"rows":\([0-9]*\).*"us_per_call":\([0-9.]*\).*"ratio":\([0-9.]*\).*/\1: \2 (\3)/' | tr '\n' ';'
  echo
}
L="$B/tools/clpa-bench linear --json --rows 1,4,8,16,24,32,48,64"
timeout 100 $L --engine auto > "$O/auto.jsonl" 2>&1
echo -n "table: "; steps "$O/auto.jsonl"
for c in 1 2 4; do for w in 8 16; do for u in 2 4; do
  timeout 100 $L --engine gemv --gemv-ct $c --gemv-warps $w --gemv-unroll $u > "$O/gemv_${c}_${w}_${u}.jsonl" 2>&1
  echo -n "gemv ct $c, $w warps, $u chunks: "; steps "$O/gemv_${c}_${w}_${u}.jsonl"
done; done; done
D="$B/tools/clpa-demo --preset llama-1b --weight-dtype f16 --kv-dtype f16 --requests 64 --json"
for extra in "" "--max-running 64" "--output-min 64 --output-max 64 --arrival-steps 0" \
  "--no-prefix-cache --output-max 1 --token-budget 4096 --arrival-steps 0"; do
  echo -n "demo $extra: "
  # shellcheck disable=SC2086
  timeout 120 $D $extra 2>/dev/null | tail -1 | tee -a "$O/demo.jsonl" | tr ',' '\n' |
    grep -E 'tokens_per_s"|tpot_p50|ttft_p50|decode_step_ms|tpot_floor_ratio' | tr '\n' ' '
  echo
done
