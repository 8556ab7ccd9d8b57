#!/usr/bin/env bash
# gpu_gemm.sh — on the lent GPU machine (../shared/GPU.md; .gpu carried):
# builds, runs test_demo_linear on NVIDIA, then times clpa-demo's tiled
# GEMM (clpa-bench linear --engine gemm, cold L2) with f32 activations in
# its four tiles (rows a work-group 64 or 128, k a stage 32 or 64), with f16
# activations by cp.async, and with the table's, against the tensor-core
# streaming kernel (mma) by rows, and serves the llama-1b preset (f16) at 16
# and 64 running and prefill-heavy, with and without --time-split's
# events. The figures of docs/decisions/0029-demo-linear-table.md; JSON
# lines go to $OUT.
set -u
cd "$(dirname "$0")/.."
B=${B:-/tmp/clpa-build} bash scripts/gpu.sh true > /dev/null 2>&1 || { echo "build failed"; exit 1; }
B=${B:-/tmp/clpa-build}
O=${OUT:-/tmp}
export CLPA_DEVICE=${CLPA_DEVICE:-NVIDIA}
timeout 200 "$B/tests/test_demo_linear" > "$O/test_demo_linear.txt" 2>&1
echo "test_demo_linear rc=$? ok=$(grep -c '^ok' "$O/test_demo_linear.txt") not_ok=$(grep -c '^not ok' "$O/test_demo_linear.txt")"
steps() { # the step lines of a JSON file: rows: ms
  grep '"step"' "$1" | sed 's/.*"rows":\([0-9]*\).*"us_per_call":\([0-9.]*\).*/\1: \2 us/' | tr '\n' ';'
  echo
}
for v in "64 32" "128 32" "64 64" "128 64"; do
  read -r bm bk <<< "$v"
  timeout 150 "$B/tools/clpa-bench" linear --rows 32,64,128,256,1024,4096 --engine gemm \
    --gemm-bm "$bm" --gemm-bk "$bk" --gemm-f16a 0 --json > "$O/gemm_${bm}_${bk}.jsonl" 2>&1
  echo -n "gemm bm $bm bk $bk: "; steps "$O/gemm_${bm}_${bk}.jsonl"
done
for f in 0 1; do
  timeout 150 "$B/tools/clpa-bench" linear --rows 64,128,256,512,1024,4096 --engine gemm \
    --gemm-f16a $f --json > "$O/gemm_f16a_$f.jsonl" 2>&1
  echo -n "gemm f16a $f: "; steps "$O/gemm_f16a_$f.jsonl"
done
timeout 100 "$B/tools/clpa-bench" linear --rows 16,24,32,48,64,96,128,256,1024,4096 --engine gemm \
  --json > "$O/gemm_table.jsonl" 2>&1
echo -n "gemm, the table's tile: "; steps "$O/gemm_table.jsonl"
timeout 100 "$B/tools/clpa-bench" linear --rows 16,24,32,48,64,96 --engine mma --json > "$O/mma.jsonl" 2>&1
echo -n "mma: "; steps "$O/mma.jsonl"
grep -o '"mma_peak_tflops":[0-9.]*' "$O/gemm_table.jsonl" | head -1
grep -o '"launch_us":[0-9.]*' "$O/gemm_table.jsonl" | head -1
for e in stream mma; do # ggml's Q4_K on the streaming and the tensor-core kernel (random blocks)
  timeout 100 "$B/tools/clpa-bench" linear --dtype q4_K --rows 1,4,16,32 --engine $e --json \
    > "$O/q4k_$e.jsonl" 2>&1
  echo -n "q4_K $e: "; steps "$O/q4k_$e.jsonl"
done
D="$B/tools/clpa-demo --preset llama-1b --weight-dtype f16 --kv-dtype f16 --requests 64 --json"
for extra in "" "--time-split" "--max-running 64" \
  "--no-prefix-cache --output-max 1 --token-budget 4096 --arrival-steps 0" \
  "--output-min 64 --output-max 64 --arrival-steps 0" "--weight-quant q4_K" "--two-attention-calls" \
  "--max-running 64 --two-attention-calls" "--no-warmup"; do
  echo -n "demo $extra: "
  # shellcheck disable=SC2086
  timeout 120 $D $extra 2>/dev/null | tail -1 | tr ',' '\n' |
    grep -E 'tokens_per_s"|tpot_p50|ttft_p50|gemm_s|warmup_s|"seconds|decode_step' | tr '\n' ' '
  echo
done
