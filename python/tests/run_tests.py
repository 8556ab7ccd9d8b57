"""Runs the clpa package's pytest files given as arguments; meson test
(tests/meson.build) calls it with CLPA_LIBRARY set to the build's library.
Fails, saying what to install, when this interpreter lacks the modules."""

import os
import sys

missing = []
for module in ("numpy", "pyopencl", "pytest"):
    try:
        __import__(module)
    except ImportError:
        missing.append(module)
if missing:
    sys.exit("%s cannot import %s, which clpa's Python tests need: apt-get install -y "
             "python3-numpy python3-pyopencl python3-pytest (scripts/bootstrap.sh test "
             "installs them), then reconfigure (meson setup --reconfigure) so that meson "
             "picks that interpreter" % (sys.executable, ", ".join(missing)))

import pytest  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", here, *sys.argv[1:]]))
