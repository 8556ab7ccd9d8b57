"""tap.py — the TAP output the Python test scripts share (meson reads it):
ok() one check, skip() one check that cannot run here (with why), done()
the plan line and the exit status; run_child() runs a tool as the test's
child, under the ASan build's rerun rule (scripts/lsan_retry.sh)."""
import subprocess
import sys

_LSAN_FATAL = "LeakSanitizer has encountered a fatal error"

_count = 0
_failed = 0


def ok(cond, what, detail=""):
    """Prints check number N as passed or failed; detail goes under a failure."""
    global _count, _failed
    _count += 1
    what = " ".join(str(what).split("\n"))  # one line, or TAP reads the rest as unknown output
    print(("ok %d - %s" if cond else "not ok %d - %s") % (_count, what))
    if not cond:
        _failed += 1
        for line in detail.splitlines():
            print("# " + line)
        # meson shows a failed test's stderr, not its TAP comments
        print("not ok %d - %s" % (_count, what), file=sys.stderr)
        for line in detail.splitlines():
            print("  " + line, file=sys.stderr)
    sys.stdout.flush()
    return cond


def skip(what, why):
    """A check that cannot run here: TAP's SKIP, which meson does not count as passed."""
    global _count
    _count += 1
    print("ok %d - %s # SKIP %s" % (_count, what, why))
    sys.stdout.flush()


def done():
    """The plan line, then exit 1 if any check failed."""
    print("1..%d" % _count)
    sys.stdout.flush()
    sys.exit(1 if _failed else 0)


def run_child(args, **kw):
    """subprocess.run(args, **kw), run once more where the child's
    LeakSanitizer itself failed at exit (a sanitizer fault, not a leak):
    the rule scripts/lsan_retry.sh applies to a whole test, applied to the
    tools a test runs, whose stderr the wrapper does not see."""
    p = subprocess.run(args, **kw)
    err = p.stderr if isinstance(p.stderr, str) else (p.stderr or b"").decode("utf-8", "replace")
    if p.returncode != 0 and _LSAN_FATAL in err:
        p = subprocess.run(args, **kw)
        print("lsan_retry: %s: LeakSanitizer failed at exit; ran it again: exit %d"
              % (" ".join(map(str, args)), p.returncode), file=sys.stderr)
    return p
