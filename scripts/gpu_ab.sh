#!/usr/bin/env bash
# gpu_ab.sh BASE — on the lent GPU machine (../shared/GPU.md; .gpu and the
# base tree carried): builds the base tree (a `git worktree add` of the
# commit to compare with, in a folder git ignores) and this one, release,
# then runs each decode bench of the list on both, alternating, so that
# both are measured in the same lease and the same minutes. Prints one
# JSON line a run, tagged "base" or "new".
set -euo pipefail
cd "$(dirname "$0")/.."
base=$1
shift
B=/tmp/ab-new "$(dirname "$0")/gpu.sh" true > /dev/null
(cd "$base" && meson setup /tmp/ab-base --buildtype=release > /dev/null && ninja -C /tmp/ab-base > /dev/null)
export CLPA_DEVICE=${CLPA_DEVICE:-NVIDIA}
run() { # tag build args...
  local tag=$1 b=$2
  shift 2
  printf '{"tree":"%s","args":"%s",' "$tag" "$*"
  XDG_CACHE_HOME=/tmp/ab-cache-$tag timeout 120 "$b/tools/clpa-bench" decode "$@" --json | tail -n 1 | cut -c2-
}
while IFS= read -r line; do
  [ -z "$line" ] && continue
  # shellcheck disable=SC2086
  run base /tmp/ab-base $line
  # shellcheck disable=SC2086
  run new /tmp/ab-new $line
done <<'LIST'
--batch 1 --context 4096
--batch 16 --context 4096
--batch 16 --context 4096 --variant v2
--batch 8 --context 32768
--batch 16 --context 4096 --lengths one-long
--batch 64 --context 8192 --lengths loguniform
--batch 16 --context 4096 --dtype fp8_e4m3
--batch 8 --context 32768 --dtype fp8_e4m3
--batch 16 --context 4096 --path lanes
--batch 8 --context 32768 --path lanes
LIST
