#!/usr/bin/env bash
# bootstrap.sh demo|test — install what is missing (Debian), configure,
# build, then run the main job (demo) or the whole test suite (test).
# Idempotent and quick when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

want=(pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo meson ninja-build pkg-config
      gcc libclblast-dev python3)
# The test command also runs the KV-manager fuzz target under libFuzzer,
# checks the CMake package with a CMake application, and runs the Python
# package's tests (pytest over PyOpenCL and NumPy).
if [ "${1:-demo}" = test ]; then
  want+=(clang libclang-rt-14-dev cmake python3-numpy python3-pyopencl python3-pytest)
fi
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

build=${CLPA_BUILD_DIR:-build}
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
ninja -C "$build"

case "${1:-demo}" in
  demo)
    if [ -x "$build/tools/clpa-demo" ]; then
      "$build/tools/clpa-demo"
    else
      "$build/tools/clpa-info" --smoke
    fi
    ;;
  test)
    meson test -C "$build" --print-errorlogs
    # A release build (-O3 finds warnings, as errors, that -O2 does not);
    # built only, the library and tools, to keep it cheap.
    rel="$build-rel"
    [ -f "$rel/build.ninja" ] || meson setup "$rel" --buildtype=release -Dtests=disabled >/dev/null
    ninja -C "$rel"
    # Install + pkg-config app, and the Meson subproject build.
    scripts/check_package.sh
    # Everything again under AddressSanitizer + UndefinedBehaviorSanitizer
    # (kernels come from the binary cache the first run filled).
    asan="$build-asan"
    [ -f "$asan/build.ninja" ] || meson setup "$asan" -Db_sanitize=address,undefined \
      -Db_lundef=false >/dev/null
    ninja -C "$asan"
    # The wrapper reruns a test once where LeakSanitizer itself failed
    # at exit (a sanitizer fault, not a leak): scripts/lsan_retry.sh says why.
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 meson test -C "$asan" --print-errorlogs \
      --wrapper "$PWD/scripts/lsan_retry.sh"
    # A short, seeded libFuzzer run of the KV manager (the slow suite runs 300k),
    # from a clang build of everything: clang's warnings are errors too.
    fuzz="$build-fuzz"
    [ -f "$fuzz/build.ninja" ] || CC=clang meson setup "$fuzz" -Dfuzz=true >/dev/null
    ninja -C "$fuzz"
    "$fuzz/tests/fuzz_kvman" -runs=200000 -max_len=2048 -seed=1 2>&1 | tail -n 3
    ;;
  *)
    echo "usage: $0 demo|test" >&2
    exit 2
    ;;
esac
