#!/usr/bin/env bash
# gpu_linear.sh — on the lent GPU machine (../shared/GPU.md; .gpu carried):
# builds, runs test_demo_linear on NVIDIA, then times clpa-demo's linear
# layers on llama-1b's shapes (clpa-bench linear, cold L2): the streaming
# kernel and the tensor-core kernel in the shapes given as "mwarps ct
# fill" arguments (default: the table's and its neighbours). Lines go to
# $OUT/linear.jsonl; a decode step's sum per shape and row count to stdout.
set -u
cd "$(dirname "$0")/.."
B=${B:-/tmp/clpa-build} bash scripts/gpu.sh true > /dev/null 2>&1 || { echo "build failed"; exit 1; }
B=${B:-/tmp/clpa-build}
export CLPA_DEVICE=${CLPA_DEVICE:-NVIDIA}
out=${OUT:-/tmp}/linear.jsonl
timeout 200 "$B/tests/test_demo_linear" > "${OUT:-/tmp}/test_demo_linear.txt" 2>&1
echo "test_demo_linear rc=$? ok=$(grep -c '^ok' "${OUT:-/tmp}/test_demo_linear.txt")"
steps() { grep '"step"' "$out" | tail -"$1" | sed 's/.*"rows":\([0-9]*\).*"us_per_call":\([0-9.]*\).*"ratio":\([0-9.]*\).*/\1: \2 us (\3)/' | tr '\n' ';'; echo; }
rows=1,4,16,64,256,1024
timeout 100 "$B/tools/clpa-bench" linear --rows 1,4,16 --engine stream --json >> "$out"
echo -n "stream: "; steps 3
[ $# -gt 0 ] || set -- "4 2 16" "4 2 0" "4 4 16" "8 2 16" "2 2 16" "4 1 16"
for shape in "$@"; do
  read -r mw ct fill <<< "$shape"
  timeout 100 "$B/tools/clpa-bench" linear --rows $rows --engine mma --mwarps "$mw" --ct "$ct" --fill "$fill" --json >> "$out"
  echo -n "mma mwarps $mw ct $ct fill $fill: "; steps 6
done
timeout 150 "$B/tools/clpa-bench" linear --rows 256,1024 --engine clblast --json >> "$out"
echo -n "clblast: "; steps 2
