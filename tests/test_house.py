#!/usr/bin/env python3
"""test_house.py ROOT — the source tree's shape (issue 44): no two files include
or call each other in a circle.

- Includes: every `#include "..."` among the tree's own files (lib/, host/,
  include/, cl/, tools/, tools/demo/) as a graph; no cycle.
- Calls: every C file of lib/, host/, tools/ and tools/demo/ that calls a
  non-static function defined in another (comments and string literals
  stripped first, so the kernels' source strings and prose do not count);
  no cycle.
The cycle finder is first run on made-up graphs with and without a circle, so
that a finder that sees nothing cannot pass."""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import done, ok  # noqa: E402

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..')
DIRS = ('lib', 'host', 'include', 'cl', 'tools', 'tools/demo')


def files(exts):
    out = []
    for d in DIRS:
        for e in exts:
            out += sorted(glob.glob(os.path.join(ROOT, d, '*.' + e)))
    return out


def rel(f):
    return os.path.relpath(f, ROOT)


def strip(src):
    """C source without comments and string or character literals."""
    pat = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pat.sub(lambda m: ' ' if m.group(0).startswith('/') else '""', src)


def cycles(graph):
    """Every elementary cycle, as the rotation that starts at its smallest node: a
    depth-first walk from each node through larger ones only (fine for a few
    hundred nodes with few edges)."""
    found = set()
    nodes = sorted(graph)
    for start in nodes:
        stack = [(start, [start])]
        while stack:
            u, path = stack.pop()
            for v in sorted(graph.get(u, ())):
                if v == start:
                    found.add(tuple(path))
                elif v > start and v not in path:
                    stack.append((v, path + [v]))
    return sorted(found)


# the finder on made-up graphs
ok(cycles({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == [('a', 'b', 'c')] and
   cycles({'a': {'b'}, 'b': {'a'}}) == [('a', 'b')] and cycles({'a': {'b'}, 'b': {'c'}, 'c': set()}) == [],
   "the cycle finder finds a circle of three and of two, and none in a chain")

# includes
own = files(('c', 'h', 'cl'))
by_name = {}
for f in own:
    by_name.setdefault(os.path.basename(f), f)
inc = {}
edges = 0
for f in own:
    names = re.findall(r'^\s*#\s*include\s+"([^"]+)"', open(f, encoding='utf-8').read(), re.M)
    inc[rel(f)] = {rel(by_name[os.path.basename(n)]) for n in names if os.path.basename(n) in by_name}
    edges += len(inc[rel(f)])
found = cycles(inc)
ok(edges > 100 and not found, "no circle of includes among %d files (%d includes)" % (len(own), edges),
   "\n".join(" -> ".join(c + (c[0],)) for c in found))

# calls
cs = files(('c',))
text = {rel(f): strip(open(f, encoding='utf-8').read()) for f in cs}
defined = {}
defn = re.compile(r'^(?!static\b)(?!typedef\b)[A-Za-z_][\w \t\*]*?\b(\w+)\s*\([^;{}]*\)\s*\{', re.M)
for f, s in text.items():
    for m in defn.finditer(s):
        defined.setdefault(m.group(1), f)
calls = {f: set() for f in text}
for f, s in text.items():
    for name in set(re.findall(r'\b(\w+)\s*\(', s)):
        if name in defined and defined[name] != f:
            calls[f].add(defined[name])
found = cycles(calls)
ok(len(defined) > 300 and not found,
   "no circle of calls among %d C files (%d functions defined)" % (len(cs), len(defined)),
   "\n".join(" -> ".join(c + (c[0],)) for c in found))
done()
