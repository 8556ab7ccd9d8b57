#!/usr/bin/env python3
"""cl_compile_check.py — compiles this tree's kernel families with clang, for every
(family, options) pair clpa has built here, as NVIDIA's OpenCL front end would see them.

Why: NVIDIA's compiler follows OpenCL C 2.0's address spaces (a private array reached
through a struct pointer is a generic pointer, and passing it where a private one is
taken fails the build), which PoCL 3.1 (OpenCL C 1.2) accepts; a lease found that
after the fact. Run this before a GPU lease after changing cl/.

The pairs come from clpa's binary cache (each entry names its family and options:
run the tests once first). Each is compiled for nvptx64 with CLPA_LANES=3 (the inline
PTX branches) and -cl-std=CL2.0, and for spir64 with its own options. Pairs whose
options lack one the sources now require (`#error "CLPA_X: ...; required"`) are
counted as stale and skipped.

With --same-ir REV (a refactor's check: "bit-identical kernel results"), each build is
made at -O2 from this tree's sources and from those of commit REV, and their LLVM IR is
compared: a pair whose IR differs counts as failed. Only families whose sources differ
between REV and the tree are built.

Usage: scripts/cl_compile_check.py [--same-ir REV] [CACHE_DIR]   (default
$XDG_CACHE_HOME/clpa or ~/.cache/clpa). Needs clang-15. Exit status 1 when a pair fails
to compile (or, with --same-ir, gives other IR).
"""
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
args = sys.argv[1:]
rev = None
if args[:1] == ['--same-ir'] and len(args) > 1:
    rev, args = args[1], args[2:]
cache = args[0] if args else os.path.join(
    os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache'), 'clpa')

families = {}
for m in re.finditer(r'\bF\("(\w+)",\s*\w+,([^)]*)\)', open(os.path.join(TREE, 'lib/kernels.c')).read()):
    families[m.group(1)] = re.findall(r'"(\w+)"', m.group(2)) + [m.group(1)]


def source(name, at=None):
    for p in ('cl/%s.cl' % name, 'cl/%s.h' % name, 'include/%s.h' % name):
        if at:
            r = subprocess.run(['git', '-C', TREE, 'show', '%s:%s' % (at, p)], capture_output=True)
            if r.returncode == 0:
                return r.stdout
        elif os.path.exists(os.path.join(TREE, p)):
            return open(os.path.join(TREE, p), 'rb').read()
    raise SystemExit('cl_compile_check: no source for part %s%s' % (name, ' at ' + at if at else ''))


def family_texts(at=None):
    return {f: source('clpa_codes', at) + b''.join(source(p, at) for p in parts)
            for f, parts in families.items()}


texts = family_texts()
old_texts = family_texts(rev) if rev else None
required = {f: set(re.findall(rb'\n#error "(CLPA_\w+):[^"]*required"', t)) for f, t in texts.items()}

pairs = set()
for name in os.listdir(cache) if os.path.isdir(cache) else []:
    head = open(os.path.join(cache, name), 'rb').read(4096)
    fam = re.search(rb'\nfamily (\w+)\n', head)
    opts = re.search(rb'\noptions ([^\n]*)\n', head)
    if fam and opts and fam.group(1).decode() in families and (
            not rev or old_texts[fam.group(1).decode()] != texts[fam.group(1).decode()]):
        pairs.add((fam.group(1).decode(), opts.group(1).decode()))

jobs, stale = [], 0
for fam, opts in sorted(pairs):
    given = set(re.findall(r'-D(CLPA_\w+)=', opts))
    if {r.decode() for r in required[fam]} - given:
        stale += 1
        continue
    jobs.append((fam, opts, 'spir64', '-cl-std=CL1.2'))
    if 'CLPA_LANES=' in opts:
        jobs.append((fam, re.sub(r'-DCLPA_LANES=\d', '-DCLPA_LANES=3', opts), 'nvptx64-nvidia-cuda',
                     '-cl-std=CL2.0'))


def build(text, opts, target, std):
    """clang's LLVM IR for one build (-O2 where IR is compared), without its file names."""
    with tempfile.NamedTemporaryFile(suffix='.cl') as f:
        f.write(text)
        f.flush()
        r = subprocess.run(['clang-15', '-x', 'cl', std, '-O2' if rev else '-O0', '-S', '-emit-llvm',
                            '-o', '-', '-target', target, '-Xclang', '-finclude-default-header',
                            '-fgnu-keywords'] + opts.split() + [f.name],
                           capture_output=True, text=True)
    ir = [l for l in r.stdout.splitlines() if not l.startswith(('; ModuleID', 'source_filename'))]
    first = next((l for l in r.stderr.splitlines() if 'error' in l), r.stderr.strip()[:200])
    return r.returncode, first, ir


def compile_one(job):
    fam, opts, target, std = job
    rc, first, ir = build(texts[fam], opts, target, std)
    if rc == 0 and rev:
        rc_old, first_old, ir_old = build(old_texts[fam], opts, target, std)
        if rc_old or ir_old != ir:
            rc, first = 1, first_old if rc_old else 'LLVM IR differs from %s\'s' % rev
    return job, rc, first


with ThreadPoolExecutor(os.cpu_count() or 2) as ex:
    results = list(ex.map(compile_one, jobs))
failed = [(j, e) for j, rc, e in results if rc]
for (fam, opts, target, std), err in failed:
    print('FAIL %s %s %s %s\n     %s' % (fam, target, std, opts, err))
print('%d pairs from %s%s: %d compiled (%d builds), %d failed, %d stale (options older than the'
      ' sources)' % (len(pairs), cache, ' whose family changed since ' + rev if rev else '',
                     len(pairs) - stale, len(jobs), len(failed), stale))
sys.exit(1 if failed or not jobs else 0)
