#!/usr/bin/env bash
# gpu_variants.sh — timing ablations on the lent GPU (../shared/GPU.md; run
# from the repository root with .gpu/ carried): builds clpa-bench from a
# patched copy of the tree per variant and runs the given bench command
# lines on each. The patched kernels may compute garbage: this measures
# time only. Output: $OUT/variants.txt (or ./gpu-out).
#
#   scripts/gpu_variants.sh 'prefill --json' 'prefill --batch 1 --new-tokens 8192 --json' -- \
#     base - - \
#     notable cl/prefill.cl 's|const int phys = table\[j / BLOCK_SIZE\];|const int phys = 0;|'
#
# Each variant is NAME FILE SED-EXPRESSION ('-' '-' for the tree as it is).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
L=$OUT/variants.txt
: > "$L"
cmds=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do cmds+=("$1"); shift; done
shift
export CLPA_DEVICE=${CLPA_DEVICE:-NVIDIA}
"$(dirname "$0")/gpu.sh" true > /dev/null || { echo "set-up failed" >> "$L"; exit 1; }
while [ $# -ge 3 ]; do
  name=$1 file=$2 expr=$3; shift 3
  d=/tmp/variant_$name
  rm -rf "$d" && mkdir -p "$d"
  tar --exclude=./.git --exclude=./.gpu --exclude=./gpu-out --exclude='./build*' -cf - . | tar -xf - -C "$d"
  if [ "$file" != - ]; then
    cp "$d/$file" "$d/$file.orig" && sed -i "$expr" "$d/$file"
    cmp -s "$d/$file" "$d/$file.orig" && { echo "== $name: the expression changed nothing" >> "$L"; continue; }
  fi
  (cd "$d" && meson setup b --buildtype=release > /dev/null && ninja -C b tools/clpa-bench > /dev/null) \
    >> "$L" 2>&1 || { echo "== $name: build failed" >> "$L"; continue; }
  for c in "${cmds[@]}"; do
    echo "== $name: clpa-bench $c" >> "$L"
    XDG_CACHE_HOME=/tmp/variant_cache_$name timeout 120 "$d/b/tools/clpa-bench" $c >> "$L" 2>&1
  done
done
