#!/usr/bin/env bash
# The NVIDIA check, run on the lent GPU machine from the repository root with the
# `.gpu` folder of Debian packages carried along (../shared/GPU.md says how to
# fetch them: ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-c-headers clinfo
# libclblast1 libclblast-dev). scripts/gpu.sh installs the ICD loader and
# NVIDIA's ICD file and builds release in /tmp/b; then this runs the cl and
# tools suites on NVIDIA and the
# standard benches, and writes everything under $OUT (or ./gpu-out):
#   check.txt    suite summary, failures, bench JSON lines, clpa-info
#   tests.txt    meson test's full output
# Usage: scripts/gpu_check.sh [quick [1|2] | bench]   (quick: tests only, 1 the
# decode, plan and prefill suites alone, 2 every other one, neither all; bench: the
# benches only; no argument: all tests, then the benches)
# The GPU tests run one at a time (is_parallel false). On a fresh H200 (kernels
# built cold, session 31) decode took 284 s and prefill 158, the others 276 s
# together: past one 600 s device call, so a lease runs `quick 1` and `quick 2`
# (each with the build, ~40 s on a fresh machine), and the benches without quick
# in a third call.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
L=$OUT/check.txt
: > "$L"
export CLPA_DEVICE=${CLPA_DEVICE:-NVIDIA} XDG_CACHE_HOME=/tmp/clpa-cache B=/tmp/b
"$(dirname "$0")/gpu.sh" true > /dev/null || { echo "set-up or build failed" >> "$L"; exit 1; }
/tmp/b/tools/clpa-info --smoke >> "$L" 2>&1
start=$(date +%s)
part=${2:-}
# quick 1: every suite that runs decode_mma.cl's partitioned builds (the merge kernel's and the plans'
# too: session 34 found an NVIDIA-only failure in decode_merge_kernel that quick 1 then left out)
DECODE_SUITES='decode|decode_merge_kernel|plan|plan_merge_kernel|prefill'
if [ "${1:-}" != bench ]; then
tests=$(meson test -C /tmp/b --list --suite cl --suite tools 2>/dev/null | sed 's/.*clpa://')
case "$part" in
  1) tests=$(grep -xE "$DECODE_SUITES" <<< "$tests") ;;
  2) tests=$(grep -vxE "$DECODE_SUITES" <<< "$tests") ;;
esac
# shellcheck disable=SC2086
timeout 520 meson test -C /tmp/b --num-processes 8 --print-errorlogs $tests > "$OUT/tests.txt" 2>&1
echo "tests rc=$? in $(( $(date +%s) - start )) s" >> "$L"
grep -E "^ *[0-9]+/[0-9]+ |^not ok" "$OUT/tests.txt" >> "$L"
fi
[ "${1:-}" = quick ] && exit 0
export XDG_CACHE_HOME=/tmp/clpa-cache-bench # only the benches' builds, for the audit
bench() { echo "== clpa-bench $*" >> "$L"; timeout 120 /tmp/b/tools/clpa-bench "$@" --json >> "$L" 2>&1; }
bench decode --batch 1 --context 4096
bench decode --batch 16 --context 4096
bench decode --batch 64 --context 2048
bench decode --kv-heads 32 --batch 32 --context 1024
bench decode --batch 8 --context 32768
bench decode --batch 16 --context 4096 --path lanes
bench decode --batch 16 --context 4096 --dtype bf16
bench decode --batch 8 --context 32768 --dtype bf16
bench decode --batch 16 --context 4096 --dtype fp8_e4m3
bench decode --batch 16 --context 4096 --dtype fp8_e4m3
bench decode --batch 8 --context 32768 --dtype fp8_e4m3
bench decode --batch 16 --context 4096 --dtype f32
bench decode --batch 16 --context 4096 --lengths one-long
bench decode --batch 64 --context 8192 --lengths loguniform
bench prefill
bench prefill --batch 1 --new-tokens 8192
bench prefill --cached-tokens 6144
bench prefill --path tiles
bench xattn --tokens 8192,32768,65536 --input structured
echo "done in $(( $(date +%s) - start )) s" >> "$L"
# registers and spills of the hot kernels (PTX from the binary cache through ptxas)
python3 "$(dirname "$0")/ptx_audit.py" "$XDG_CACHE_HOME" "$OUT/ptx" clpa_prefill_mma clpa_decode_mma clpa_xattn_stats_mma >> "$L" 2>&1
