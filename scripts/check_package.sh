#!/usr/bin/env bash
# check_package.sh — what a user of clpa gets, checked from the outside
# (CI runs it from bootstrap.sh test; about a minute on 2 cores):
#  1. installed into a temporary prefix, an application that uses OpenCL
#     itself compiles and links with exactly
#       cc app.c $(pkg-config --cflags --libs clpa)
#     and runs;
#  2. a CMake application finds it with find_package(clpa) and links
#     clpa::clpa;
#  3. as a Meson subproject (subprojects/clpa a symlink to this tree) clpa
#     builds only the library — no tests, no tools — without -Werror, and a
#     parent links it through dependency('clpa').
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clpa-package.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# An app that takes clpa's OpenCL types and calls OpenCL directly, so it
# links only if the .pc file brings OpenCL in.
cat >"$tmp/app.c" <<'EOF'
#include <clpa.h>
#include <stdio.h>
int main(void) {
  cl_uint platforms = 0;
  cl_int err = clGetPlatformIDs(0, NULL, &platforms);
  size_t n = 0;
  clpa_status st = clpa_devices_list(NULL, 0, &n);
  printf("clpa %s: %s, %zu device(s); OpenCL: %d, %u platform(s)\n", clpa_version_string(),
         clpa_status_name(st), n, (int)err, (unsigned)platforms);
  return clpa_version_number() == CLPA_VERSION_NUMBER && st == CLPA_OK ? 0 : 1;
}
EOF

echo "== install into a temporary prefix, build an app with pkg-config"
meson setup "$tmp/build" "$src" --prefix="$tmp/prefix" --libdir=lib --buildtype=plain \
  -Ddefault_library=shared -Dtests=disabled -Dtools=disabled >"$tmp/setup.log" ||
  { cat "$tmp/setup.log"; exit 1; }
ninja -C "$tmp/build" >/dev/null
meson install -C "$tmp/build" --no-rebuild >/dev/null
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
echo "pkg-config --cflags --libs clpa: $(pkg-config --cflags --libs clpa)"
(cd "$tmp" && cc app.c $(pkg-config --cflags --libs clpa) -o app)
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/app"
echo "== the examples, built the same way"
for ex in decode_basic prefix_prefill engine_loop nhd_cache; do
  (cd "$tmp" && cc "$src/examples/$ex.c" $(pkg-config --cflags --libs clpa) -lm -o "$ex")
  LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/$ex"
done

echo "== a CMake application: find_package(clpa), target clpa::clpa (README's)"
mkdir -p "$tmp/cmake-app"
cp "$tmp/app.c" "$src/examples/decode_basic.c" "$tmp/cmake-app/"
abi=$(pkg-config --modversion clpa | cut -d. -f1,2)
cat >"$tmp/cmake-app/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(app C)
find_package(clpa $abi REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE clpa::clpa)
add_executable(decode_basic decode_basic.c)
target_link_libraries(decode_basic PRIVATE clpa::clpa m)
EOF
cmake -S "$tmp/cmake-app" -B "$tmp/cmake-app/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; exit 1; }
cmake --build "$tmp/cmake-app/build" >"$tmp/cmake-build.log" 2>&1 ||
  { cat "$tmp/cmake-build.log"; exit 1; }
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/cmake-app/build/app"
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/cmake-app/build/decode_basic"
# Another minor version is another ABI: find_package must not take it.
sed -i "s/find_package(clpa $abi REQUIRED)/find_package(clpa ${abi%.*}.99 REQUIRED)/" \
  "$tmp/cmake-app/CMakeLists.txt"
if cmake -S "$tmp/cmake-app" -B "$tmp/cmake-app/build2" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  >"$tmp/cmake2.log" 2>&1; then
  echo "FAIL: find_package(clpa ${abi%.*}.99) took clpa $abi" >&2; exit 1
fi

echo "== clpa as a subproject builds the library only"
mkdir -p "$tmp/parent/subprojects"
ln -s "$src" "$tmp/parent/subprojects/clpa"
cp "$tmp/app.c" "$tmp/parent/app.c"
cat >"$tmp/parent/meson.build" <<'EOF'
project('parent', 'c', default_options : ['warning_level=0'])
executable('app', 'app.c', dependencies : dependency('clpa'))
EOF
unset PKG_CONFIG_PATH
meson setup "$tmp/parent/build" "$tmp/parent" --buildtype=plain --force-fallback-for=clpa \
  >"$tmp/parent.log" ||
  { cat "$tmp/parent.log"; exit 1; }
targets=$(meson introspect --targets "$tmp/parent/build" |
  python3 -c 'import json,sys; print(" ".join(t["name"] for t in json.load(sys.stdin)))')
echo "targets: $targets"
case " $targets " in
  *" clpa "*) ;;
  *) echo "FAIL: the parent did not build clpa as its subproject" >&2; exit 1 ;;
esac
for t in $targets; do
  case "$t" in
    test_*|header_*|clpa-info|clpa-bench|fuzz_*)
      echo "FAIL: the subproject builds $t" >&2; exit 1 ;;
  esac
done
if grep -q -- '-Werror' "$tmp/parent/build/build.ninja"; then
  echo "FAIL: the subproject compiles with -Werror" >&2; exit 1
fi
ninja -C "$tmp/parent/build" >/dev/null
LD_LIBRARY_PATH="$tmp/parent/build/subprojects/clpa/lib" "$tmp/parent/build/app"
echo "package checks passed"
