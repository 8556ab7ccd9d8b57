"""tap.py — the TAP output the Python test scripts share (meson reads it):
ok() one check, skip() one check that cannot run here (with why), done()
the plan line and the exit status."""
import sys

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
