#!/usr/bin/env bash
# gpu.sh — on the lent GPU machine (../shared/GPU.md): unpack the OpenCL
# loader and headers carried in .gpu/, register NVIDIA's ICD, build, then
# run whatever is given as arguments (a command line) with $B the build dir.
set -euo pipefail
cd "$(dirname "$0")/.."
for f in .gpu/*.deb; do dpkg -x "$f" /; done
ldconfig
mkdir -p /etc/OpenCL/vendors
echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export B=${B:-/tmp/clpa-build}
[ -f "$B/build.ninja" ] || meson setup "$B" --buildtype=release >/dev/null  # CLBlast when .gpu has it
# a build folder set up for another tree would rebuild that tree's sources, not these
src=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["directories"]["source"])' \
  "$B/meson-info/meson-info.json")
[ "$(realpath "$src")" = "$(realpath .)" ] || {
  echo "gpu.sh: $B holds a build of $src, not of $(realpath .): set B to another folder" >&2
  exit 1
}
ninja -C "$B" >/dev/null
"$B/tools/clpa-info"
[ $# -gt 0 ] && eval "$@"
