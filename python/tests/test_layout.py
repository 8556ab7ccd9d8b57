"""The ctypes mirrors (clpa/structs.py) against the C compiler's layout of
the public structs (tests/py_struct_layout.c, built by meson, whose path
meson passes in CLPA_STRUCT_LAYOUT), and the package against the library."""

import ctypes
import json
import os
import subprocess
import sys

import pytest

import clpa
from clpa import structs


def c_layout():
    prog = os.environ.get("CLPA_STRUCT_LAYOUT")
    if not prog:
        pytest.skip("CLPA_STRUCT_LAYOUT is not set: meson test sets it to the path of "
                    "tests/py_struct_layout in the build")
    return json.loads(subprocess.run([prog], check=True, capture_output=True, text=True).stdout)


def test_mirrors_match_the_c_layout():
    layout = c_layout()
    mirrors = {m.c_name: m for m in structs.MIRRORS}
    assert sorted(layout["structs"]) == sorted(mirrors), "structs printed vs mirrored differ"
    problems = []
    for name, mirror in mirrors.items():
        c = layout["structs"][name]
        py_fields = [f for f, _ in mirror._fields_]
        if py_fields != list(c["fields"]):
            problems.append("%s: fields %s in C, %s in the mirror" % (name, list(c["fields"]),
                                                                      py_fields))
            continue
        for field, (offset, size) in c["fields"].items():
            f = getattr(mirror, field)
            if (f.offset, f.size) != (offset, size):
                problems.append("%s.%s: offset %d size %d in C, offset %d size %d in the mirror"
                                % (name, field, offset, size, f.offset, f.size))
        if ctypes.sizeof(mirror) != c["size"]:
            problems.append("%s: sizeof %d in C, %d in the mirror (a field added or removed?)"
                            % (name, c["size"], ctypes.sizeof(mirror)))
    for name, size in layout["scalars"].items():
        if ctypes.sizeof(structs.SCALARS[name]) != size:
            problems.append("%s: %d bytes in C, %d in the mirrors"
                            % (name, size, ctypes.sizeof(structs.SCALARS[name])))
    assert not problems, "the mirrors in python/clpa/structs.py differ from the C structs:\n" + \
        "\n".join(problems)


def test_version_and_status_names():
    want = os.environ.get("CLPA_VERSION_EXPECTED")
    if want:
        assert clpa.version() == want
    assert clpa.__version__ == clpa.version()
    major, minor, patch = map(int, clpa.__version__.split("."))
    assert clpa.HEADER_VERSION == major * 10000 + minor * 100 + patch
    for s in clpa.Status:
        assert clpa.status_name(s) == "CLPA_" + s.name
    assert clpa.status_name(12345) == "CLPA_ERR_UNKNOWN"


def test_a_missing_library_is_named():
    env = dict(os.environ, CLPA_LIBRARY="/nonexistent/libclpa.so")
    r = subprocess.run([sys.executable, "-c", "import clpa"], env=env, capture_output=True,
                       text=True)
    assert r.returncode != 0
    assert "LibraryNotFound" in r.stderr and "CLPA_LIBRARY=/nonexistent/libclpa.so" in r.stderr


def test_dtype_names():
    assert clpa.dtype_of("f16") == clpa.DType.F16
    assert clpa.dtype_of("FP8_E4M3") == clpa.DType.FP8_E4M3
    with pytest.raises(clpa.ClpaError) as e:
        clpa.dtype_of("f64")
    assert e.value.name == "CLPA_ERR_INVALID_ARG" and "f64" in e.value.message


def test_kv_layout_block_pitch():
    """K and V interleaved in one buffer (FlashInfer's [pages, 2, ...]): blocks two
    blocks apart, the span to hold, the index functions through the pitch, and the
    pitches the library refuses."""
    packed = clpa.kv_layout("f16", 10, 16, 2, 64, kind="nhd")
    assert packed.block_pitch == 0 and packed.block_stride == 2048
    kv = clpa.kv_layout("f16", 10, 16, 2, 64, kind="nhd", block_pitch=2 * 2048)
    assert kv.block_stride == 4096 and kv.block_bytes == 2048 * 2
    assert kv.cache_bytes == (9 * 4096 + 2048) * 2
    assert clpa.lib.clpa_kv_value_index(ctypes.byref(kv), 3, 1, 2, 5) == 3 * 4096 + 2 * 128 + 64 + 5
    for bad, words in ((2048 + 4, "multiple of x = 8"), (2040, "at least a block's 2048")):
        with pytest.raises(clpa.ClpaError) as e:
            clpa.kv_layout("f16", 10, 16, 2, 64, kind="nhd", block_pitch=bad)
        assert "block_pitch = %d" % bad in e.value.message and words in e.value.message
