#!/usr/bin/env python3
"""ptx_audit.py CACHE_DIR OUT_DIR [NAME...] — on the GPU machine (NVIDIA's
OpenCL stores PTX as the program binary): extracts the PTX of every clpa
binary-cache file (format: lib/binary_cache.c's write_file), runs
`ptxas -arch=sm_90 -v` on those whose PTX defines one of the NAMEs (kernel
name substrings; all when none) and prints, per kernel, registers, spills
and shared memory, with the build key's options."""
import glob, os, re, shutil, struct, subprocess, sys

cache, out = sys.argv[1], sys.argv[2]
names = sys.argv[3:]
os.makedirs(out, exist_ok=True)
ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
for n, path in enumerate(sorted(glob.glob(os.path.join(cache, "**", "clpa-*"), recursive=True))):
    buf = open(path, "rb").read()
    if buf[:8] != b"CLPABIN1":
        continue
    (kl,) = struct.unpack_from("<I", buf, 8)
    key = buf[12:12 + kl].decode(errors="replace")
    (bl,) = struct.unpack_from("<Q", buf, 12 + kl)
    ptx = buf[20 + kl:20 + kl + bl].rstrip(b"\0")
    kernels = re.findall(rb"\.entry\s+(\w+)", ptx)
    if not kernels or (names and not any(nm.encode() in k for nm in names for k in kernels)):
        continue
    f = os.path.join(out, "p%03d.ptx" % n)
    open(f, "wb").write(ptx)
    opts = " ".join(w for w in key.split() if w.startswith("-D"))
    print("== %s  %s" % (os.path.basename(f), opts[:600]))
    r = subprocess.run([ptxas, "-arch=sm_90", "-v", f, "-o", f + ".cubin"],
                       capture_output=True, text=True)
    for line in (r.stdout + r.stderr).splitlines():
        if any(w in line for w in ("Compiling entry", "Used", "spill", "error")):
            print("   " + line.strip())
    if r.returncode == 0 and shutil.which("cuobjdump"):
        sass = subprocess.run(["cuobjdump", "-sass", f + ".cubin"], capture_output=True,
                              text=True).stdout
        open(f + ".sass", "w").write(sass)
