#!/usr/bin/env bash
# gpu_plan.sh — on the lent GPU machine (../shared/GPU.md; .gpu carried):
# builds (release), runs the plan, cascade and decode tests on NVIDIA, then
# the decode benches of the plan/run work (issue 43): each shape planned
# with and without host_context_lens, cold, f16, 32/8 heads, head 128 unless
# said, one JSON line a run, tagged by its arguments.
# `gpu_plan.sh partitions`: instead, the mixed-length shapes at every forced
# partition from 512 to 4096 tokens and at the plan's own (used_partition),
# with host lengths: where a partition rule for skewed lengths is to be found
# (docs/decisions/0013-decode-blind-partitions.md).
# `gpu_plan.sh worklist`: instead, test_plan (its listed plan) with both merges and
# test_decode --mma and --many-seqs (grids past 65535 sequences), then
# the mixed-length and uniform shapes as plans (--plan-run) with host lengths, at
# the plan's partition and forced ones, each without and with the work list of
# busy partitions next to each other (CLPA_DECODE_WORK_LIST off, on), and as one call:
# cold at the rule's choice, then --hot (host included) with the list off and on.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export B=${B:-/tmp/clpa-build}
"$(dirname "$0")/gpu.sh" true > /dev/null
export CLPA_DEVICE=${CLPA_DEVICE:-NVIDIA}
if [ "${1:-}" = worklist ]; then
for t in "" --merge-kernel; do timeout 300 "$B/tests/test_plan" $t > /tmp/t.log; echo "test_plan $t: rc $?, $(grep -c "^ok" /tmp/t.log) ok, $(grep -c "^not ok" /tmp/t.log) not ok"; grep "^not ok" /tmp/t.log | head -5; done
# does NVIDIA's OpenCL run grids past 65535 work-groups in their second dimension whole (the
# rectangle's sequences; the work list stays under it: host/decode_planner.h)? (A bench of
# 70 000 sequences launched without an error in session 34; this checks the outputs.)
timeout 200 "$B/tests/test_decode" --many-seqs > /tmp/t.log; echo "test_decode --many-seqs: rc $?, $(grep -c "^ok" /tmp/t.log) ok, $(grep -c "^not ok" /tmp/t.log) not ok"; grep -A2 "^not ok" /tmp/t.log | head -9
elif [ "${1:-}" != partitions ]; then
for t in plan cascade; do timeout 300 "$B/tests/test_$t" > /tmp/t.log; echo "test_$t: rc $?, $(grep -c "^ok" /tmp/t.log) ok, $(grep -c "^not ok" /tmp/t.log) not ok"; done
timeout 300 "$B/tests/test_decode" --mma > /tmp/t.log; echo "test_decode --mma: rc $?, $(grep -c "^ok" /tmp/t.log) ok, $(grep -c "^not ok" /tmp/t.log) not ok"; grep "^not ok" /tmp/t.log | head -5
fi
out=${OUT:-.}/plan.jsonl
: > "$out"
run() {
  { printf '{"args":"%s",' "$*"
    timeout 120 "$B/tools/clpa-bench" decode "$@" --cold --json | tail -n 1 | cut -c2-; } >> "$out"
}
show() {
  python3 - "$out" <<'P'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    host = f' plan {d["plan_host_us"]} run {d["run_host_us"]} call {d["call_host_us"]} us' if "plan_host_us" in d else ""
    host += f', {d["work_pairs"]} listed' if "work_pairs" in d else ""
    print(f'{d["args"]:80s} {d["us_per_call"]:8.2f} us {d["ratio"]:.3f} {d["used_variant"]} {d["used_partition"]}{host}')
P
}
if [ "${1:-}" = worklist ]; then
  for shape in "--batch 64 --context 32768 --lengths one-long --short 256" \
               "--batch 32 --context 16384 --lengths loguniform" \
               "--batch 64 --context 8192 --lengths loguniform" \
               "--batch 16 --context 4096 --lengths one-long" \
               "--batch 16 --context 4096" \
               "--batch 64 --context 2048"; do
    for p in 0 512 1024; do
      for w in off on; do
        # shellcheck disable=SC2086
        run $shape --partition $p --plan-run --work-list $w
      done
    done
    # one call (it makes the plan's list too), the rule's choice; then back-to-back by the wall
    # clock, host included, with the list and without
    # shellcheck disable=SC2086
    run $shape
    for w in off on; do
      # shellcheck disable=SC2086
      { printf '{"args":"%s",' "$shape --hot --work-list $w"
        timeout 120 "$B/tools/clpa-bench" decode $shape --hot --work-list $w --json | tail -n 1 | cut -c2-; } >> "$out"
    done
  done
  show
  # decode_mma.cl's suite last, so the benches' figures come back within one call (gpu_check.sh quick 1 runs it too)
  timeout 300 "$B/tests/test_decode" --mma > /tmp/t.log; echo "test_decode --mma: rc $?, $(grep -c "^ok" /tmp/t.log) ok, $(grep -c "^not ok" /tmp/t.log) not ok"; grep "^not ok" /tmp/t.log | head -5
  exit 0
fi
if [ "${1:-}" = partitions ]; then
  for shape in "--batch 64 --context 32768 --lengths one-long --short 256" \
               "--batch 32 --context 16384 --lengths loguniform" \
               "--batch 64 --context 8192 --lengths loguniform" \
               "--batch 16 --context 4096 --lengths one-long" \
               "--batch 16 --context 16384 --lengths one-long --short 1024"; do
    for p in 0 512 768 1024 1536 2048 3072 4096; do
      # shellcheck disable=SC2086
      run $shape --partition $p
    done
  done
  show
  exit 0
fi
while IFS= read -r line; do
  [ -z "$line" ] && continue
  # shellcheck disable=SC2086
  run $line
  # shellcheck disable=SC2086
  run $line --no-host-lengths
done <<'LIST'
--batch 64 --context 32768 --lengths one-long --short 256
--batch 32 --context 16384 --lengths loguniform
--batch 16 --context 4096 --lengths one-long
--batch 64 --context 8192 --lengths loguniform
--batch 1 --context 4096
--batch 16 --context 4096
--batch 64 --context 2048
--batch 8 --context 32768
--batch 16 --context 4096 --dtype fp8_e4m3
--batch 128 --context 512 --heads 64 --kv-heads 8
LIST
run --batch 16 --context 4096 --plan-run
run --batch 64 --context 32768 --lengths one-long --short 256 --plan-run --no-host-lengths
show
timeout 240 "$B/tests/test_prefill" > /tmp/t.log; echo "test_prefill: rc $?, $(grep -c "^ok" /tmp/t.log) ok, $(grep -c "^not ok" /tmp/t.log) not ok"
grep "^not ok" /tmp/t.log | head -5
