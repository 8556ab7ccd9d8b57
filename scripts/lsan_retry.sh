#!/usr/bin/env bash
# lsan_retry.sh TEST [ARGS...] — meson test's wrapper for the ASan build.
#
# Runs the test once, and once more only when LeakSanitizer itself failed
# at exit ("LeakSanitizer has encountered a fatal error", after e.g. "Tracer
# caught signal 11" from its stop-the-world tracer): a fault of the sanitizer
# runtime that strikes at random under load (google/sanitizers#1353), not a
# leak report ("detected memory leaks") and not a failed check. Every other
# outcome is the test's own, and so is the second run's, leak check
# included. The test's output is held until it is final, so that meson
# parses one run's TAP; a rerun says so on both streams. The tools a Python
# test runs get the same rule there (tests/tap.py, run_child).
set -u
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$@" >"$out" 2>"$err"
rc=$?
if [ "$rc" -ne 0 ] && grep -q 'LeakSanitizer has encountered a fatal error' "$err"; then
  first=$(grep -m1 -B1 'LeakSanitizer has encountered a fatal error' "$err" | head -n1)
  "$@" >"$out" 2>"$err"
  rc=$?
  note="lsan_retry: LeakSanitizer failed at exit ($first); ran the test again: exit $rc"
  echo "# $note" >>"$out"
  echo "$note" >>"$err"
fi
cat "$out"
cat "$err" >&2
exit "$rc"
