#!/usr/bin/env bash
# gpu_ab.sh BASE [LIST] — on the lent GPU machine (../shared/GPU.md; .gpu and the
# base tree carried): builds the base tree (a `git worktree add` of the
# commit to compare with, in a folder git ignores) and this one, release,
# then runs each bench of the list on both, alternating, so that both are
# measured in the same lease and the same minutes. A list line is a
# clpa-bench command and its options (`decode --cold --layout nhd`); LIST is
# a file of them, else the default below (cold decode S2-S5 and prefill
# 8 x 2048 / 1 x 8192 in each layout, then decode variants). Prints one
# JSON line a run, tagged "base" or "new".
set -euo pipefail
cd "$(dirname "$0")/.."
base=$1
list=${2:-}
B=/tmp/ab-new "$(dirname "$0")/gpu.sh" true > /dev/null
(cd "$base" && meson setup /tmp/ab-base --buildtype=release > /dev/null && ninja -C /tmp/ab-base > /dev/null)
export CLPA_DEVICE=${CLPA_DEVICE:-NVIDIA}
run() { # tag build command args...
  local tag=$1 b=$2
  shift 2
  printf '{"tree":"%s","args":"%s",' "$tag" "$*"
  XDG_CACHE_HOME=/tmp/ab-cache-$tag timeout 120 "$b/tools/clpa-bench" "$@" --json | tail -n 1 | cut -c2-
}
default_list() {
  for L in split_key nhd hnd; do
    echo "decode --cold --layout $L --batch 16 --context 4096"
    echo "decode --cold --layout $L --batch 64 --context 2048"
    echo "decode --cold --layout $L --batch 32 --context 1024 --kv-heads 32"
    echo "decode --cold --layout $L --batch 8 --context 32768"
    echo "prefill --layout $L"
    echo "prefill --layout $L --batch 1 --new-tokens 8192"
  done
  sed 's/^/decode /' <<'LIST'
--batch 1 --context 4096
--batch 16 --context 4096 --variant v2
--batch 16 --context 4096 --lengths one-long
--batch 64 --context 8192 --lengths loguniform
--batch 16 --context 4096 --dtype fp8_e4m3
--batch 8 --context 32768 --dtype fp8_e4m3
--batch 16 --context 4096 --path lanes
--batch 8 --context 32768 --path lanes
LIST
}
while IFS= read -r line; do
  [ -z "$line" ] && continue
  # shellcheck disable=SC2086
  run base /tmp/ab-base $line
  # shellcheck disable=SC2086
  run new /tmp/ab-new $line
done < <(if [ -n "$list" ]; then cat "$list"; else default_list; fi)
