#!/usr/bin/env python3
"""test_tools.py — clpa-bench, clpa-info and clpa-demo as a user runs them (TAP).

Usage: test_tools.py CLPA_BENCH CLPA_INFO [CLPA_DEMO]

--help on the tools and on every subcommand exits 0 and prints the usage,
which cites no tracker numbers; --version prints "NAME (clpa VERSION)"
everywhere; an unknown flag or a bad value exits 2 and says which and why;
--json prints one line that json.loads reads, with "op" (and "device"
where a device is used). The decode runs are tiny shapes on the default
device: hot, cold (a few flushed calls) and mixed lengths; the sweep runs
its --quick grid into a temporary directory, once on a terminal (the
counter and ETA) and once with a stand-in gnuplot (the plot's script).
prefill, xattn and sweep take the CPU's default shapes on a CPU and the
GPU's elsewhere (the expensive ones overridden, so each run is small).
"""
import csv
import json
import math
import os
import pty
import re
import shutil
import subprocess
import sys
import tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import done, ok, run_child, skip  # noqa: E402

BENCH, INFO = sys.argv[1], sys.argv[2]
DEMO = sys.argv[3] if len(sys.argv) > 3 else None
TINY_DECODE = ["--batch", "2", "--context", "64", "--heads", "4", "--kv-heads", "2",
               "--head-size", "64"]


def run(*args, env=None):
    p = run_child(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=240, check=False, env=env)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def show(args, rc, out, err):
    return f"$ {' '.join(args)}\nexit {rc}\nstdout: {out}\nstderr: {err}"


TRACKER = re.compile(r"#\d|\bissues?\b|\btracker\b", re.I)


def check_help(*args):
    rc, out, err = run(*args)
    ok(rc == 0 and "usage" in out, f"{' '.join(args[1:])}: exit 0 with the usage",
       show(args, rc, out, err))
    cited = TRACKER.findall(out)
    ok(not cited, f"{' '.join(args[1:])}: the help cites no tracker numbers",
       f"found {cited} in\n{out}")


def check_refused(args, *needles):
    rc, out, err = run(*args)
    ok(rc == 2 and all(n in err for n in needles) and "--help" in err and out == "",
       f"{' '.join(args[1:])}: exit 2 naming {', '.join(needles)}", show(args, rc, out, err))


def check_json(args, op, keys):
    rc, out, err = run(*args)
    lines = out.splitlines()
    try:
        doc = json.loads(lines[0]) if len(lines) == 1 else None
    except ValueError as e:
        doc = None
        err += f"\njson: {e}"
    good = rc == 0 and doc is not None and doc.get("op") == op
    missing = [k for k in keys if doc is None or k not in doc]
    ok(good and not missing, f"{' '.join(args[1:])}: one JSON line, op {op}",
       show(args, rc, out, err) + (f"\nmissing keys: {missing}" if missing else ""))
    return doc


# The device and clpa's version, from clpa-info.
rc, out, err = run(INFO, "--json")
try:
    info = json.loads(out) if len(out.splitlines()) == 1 else None
except ValueError:
    info = None
ok(rc == 0 and info is not None and info.get("version"),
   "clpa-info --json: clpa's version (for --version) and the device",
   show([INFO, "--json"], rc, out, err))
VERSION = info.get("version", "?") if info else "?"
SELECTED = info["devices"][info["selected"]] if info and info.get("selected") is not None else {}
CPU = SELECTED.get("type") == "cpu"

COMMANDS = ["decode", "sweep", "prefill", "mixed", "xattn", "radix", "kvman"]
if run(BENCH, "linear", "--help")[0] == 0:  # built with CLBlast
    COMMANDS.append("linear")
for cmd in [[]] + [[c] for c in COMMANDS]:
    check_help(BENCH, *cmd, "--help")
    check_help(BENCH, *cmd, "-h")
check_help(INFO, "--help")
if DEMO:
    check_help(DEMO, "--help")


def check_version(tool, *args):
    name = " ".join([os.path.basename(tool).split(".")[0], *args])
    rc, out, err = run(tool, *args, "--version")
    ok(rc == 0 and out == f"{name} (clpa {VERSION})\n" and err == "",
       f"{name} --version: '{name} (clpa {VERSION})'",
       show([tool, *args, "--version"], rc, out, err))


check_version(BENCH)
for cmd in COMMANDS:
    check_version(BENCH, cmd)
check_version(INFO)
if DEMO:
    check_version(DEMO)
    # the demo's JSON names its op too (one request of one token: a second)
    doc = None
    args = [DEMO, "--requests", "1", "--output-max", "1", "--json"]
    rc, out, err = run(*args)
    try:
        doc = json.loads(out.splitlines()[-1]) if rc == 0 and out.strip() else None
    except ValueError:
        pass
    ok(doc is not None and doc.get("op") == "demo" and doc.get("requests") == 1,
       "clpa-demo --json: op demo", show(args, rc, out, err))

if "linear" in COMMANDS:
    # ggml's block forms, timed from random blocks; a model whose rows are not whole blocks refused
    args = [BENCH, "linear", "--model", "tiny", "--dtype", "q4_0", "--rows", "2", "--engine", "stream",
            "--json"]
    rc, out, err = run(*args)
    docs = [json.loads(l) for l in out.splitlines() if l.startswith("{")] if rc == 0 else []
    ok(len(docs) == 6 and all(d["op"] == "linear" and d["dtype"] == "q4_0" and d["us_per_call"] > 0
                              for d in docs)
       and all(d.get("launch_us", 0) > 0 for d in docs[:5]) and docs[5]["shape"] == "step"
       and docs[0]["weight_bytes"] == 256 * 128 // 32 * 18
       and all(d.get("mode") in ("hot", "cold") for d in docs),
       "linear --dtype q4_0: five shapes and the step, the weights' bytes in blocks (18 a 32),"
       " each line's mode",
       show(args, rc, out, err))
    # each shape's read floor, and the step's: the calls' reads summed, each counted per_step
    # the JSON prints µs to 0.01 and ratios to 0.0001, so a ratio recomputed from the printed
    # figures may differ by each rounding carried through the quotient
    def ratio_close(d):
        r, u = d["read_us"], d["us_per_call"]
        return abs(d["read_ratio"] - r / u) <= 0.005 / u + 0.005 * r / (u * (u - 0.005)) + 5e-5 + 1e-9
    floors = [d.get("read_us", 0) for d in docs[:5]]
    ok(len(docs) == 6 and all(f > 0 for f in floors)
       and all(ratio_close(d) for d in docs[:5])
       and abs(docs[5].get("read_floor_us", 0) - (4 * sum(floors[:4]) + floors[4])) <= 0.2  # tiny: 4 layers
       and docs[5].get("read_ratio", 0) > 0,
       "linear: read_us a shape (read_ratio its share of the call), the step's read_floor_us",
       show(args, rc, out, err))
    check_refused([BENCH, "linear", "--model", "tiny", "--dtype", "q4_K"],
                  "--dtype q4_K: qkv's rows of 128 are not whole blocks")
    check_refused([BENCH, "linear", "--dtype", "q3_K"], "--dtype q3_K (f32, f16, bf16, f16_tiled, bf16_tiled, q8_0")
for cmd in ("decode", "sweep", "prefill", "mixed", "xattn", "radix", "kvman"):
    check_refused([BENCH, cmd, "--foo"], "unknown option '--foo'")
check_refused([INFO, "--foo=1"], "unknown option '--foo'")
check_refused([BENCH, "frobnicate"], "unknown command 'frobnicate'", *COMMANDS)  # it lists them
check_refused([BENCH, "decode", "--batch", "x"], "--batch takes a positive integer, not 'x'")
check_refused([BENCH, "decode", "--batch=0"], "--batch takes a positive integer, not '0'")
check_refused([BENCH, "decode", "--context"], "--context needs a value")
check_refused([BENCH, "decode", "--dtype", "f64"], "--dtype takes", "not 'f64'")
check_refused([BENCH, "decode", "--json=yes"], "--json takes no value")
check_refused([BENCH, "decode", "--he", "4"], "ambiguous option '--he'")
for cmd in ["decode", "mixed"] + (["linear"] if "linear" in COMMANDS else []):
    check_refused([BENCH, cmd, "--cold", "--hot"], "--cold and --hot exclude each other")
check_refused([BENCH, "decode", "--lengths", "zipf"], "--lengths takes", "not 'zipf'")
# one-long's others past the longest: decode's block tables have --context's room (it overran them)
check_refused([BENCH, "decode", *TINY_DECODE, "--lengths", "one-long", "--short", "40000"],
              "--short 40000 is longer than --context 64")
check_refused([BENCH, "mixed", "--decode-lengths", "one-long", "--decode-context", "80",
               "--decode-short", "200"], "--decode-short 200 is longer than --decode-context 80")
check_refused([BENCH, "decode", "--layout", "nchw"], "--layout takes split_key, hnd or nhd", "not 'nchw'")
check_refused([BENCH, "prefill", "--layout", "nchw"], "--layout takes split_key, hnd or nhd", "not 'nchw'")
check_refused([BENCH, "sweep", "--batch", "1,,4"], "--batch takes a comma-separated list")
check_refused([BENCH, "sweep", "--dtypes", "f16,f64"], "--dtypes takes", "not 'f16,f64'")
check_refused([BENCH, "sweep", "--paths", "lanes,auto"], "--paths takes", "not 'lanes,auto'")
check_refused([BENCH, "radix", "--requests", "-5"], "--requests takes a positive integer")
check_refused([BENCH, "kvman", "--out-min", "100", "--out-max", "50"], "--out-max (50)")
check_refused([BENCH, "kvman", "stray"], "unexpected argument 'stray'")
check_refused([BENCH, "xattn", "--tau", "0"], "--tau takes a number in (0, 1]")
check_refused([BENCH, "xattn", "--tokens", "512,x"], "--tokens takes")
check_refused([BENCH, "xattn", "--input", "zipf"], "--input takes", "not 'zipf'")
check_refused([BENCH, "xattn", "--path", "tc"], "--path takes auto, f32 or mma", "not 'tc'")
check_refused([BENCH, "prefill", "--shapes", "tpu"], "--shapes takes auto, gpu or cpu", "not 'tpu'")
check_refused([BENCH, "mixed", "--split-keys", "100"], "--split-keys 100: a multiple of 64")
check_refused([BENCH, "mixed", "--decode-rows", "0", "--batch", "0"], "no sequences")
check_refused([BENCH, "mixed", "--decode-kernel", "2"], "--decode-kernel")
check_refused([BENCH, "sweep", "--quick", "--shapes", "cpu"],
              "--quick and --shapes exclude each other")

# The default shapes: the CPU's on a CPU, the GPU's elsewhere; the JSON
# says which. The costly options are given, the ones the sets differ in
# are not: prefill's batch (CPU 1, GPU 8), xattn's heads (CPU 8/2, GPU
# 32/8), sweep's GQA ratios, batches and lengths (CPU 3 points here).
SHAPES = "cpu" if CPU else "gpu"
TINY_PREFILL = ["--new-tokens", "64", "--heads", "4", "--kv-heads", "1", "--head-size", "64"]
# every device command names its timing mode as decode does ("mode": prefill and xattn time hot)
doc = check_json([BENCH, "prefill", "--json", *TINY_PREFILL], "prefill", ["shapes", "batch", "mode"])
# a mixed step, one call against two: both timed, the plan's choices named
doc_m = check_json([BENCH, "mixed", "--json", "--decode-rows", "3", "--decode-context", "80",
                    "--new-tokens", "16", "--heads", "4", "--kv-heads", "2", "--head-size", "32",
                    "--dtype", "f32", "--q-dtype", "f32", "--split-keys", "64", "--decode-kernel", "-1"],
                   "mixed", ["us_one_call", "us_two_calls", "split_rows", "decode_kernel_rows",
                             "mode"])
if doc_m:
    ok(doc_m["us_one_call"] > 0 and doc_m["us_two_calls"] > 0 and doc_m["decode_rows"] == 3
       and doc_m["split_rows"] == 3 and doc_m["split_keys"] == 64 and doc_m["decode_kernel_rows"] == 0,
       "mixed --split-keys 64 --decode-kernel -1: both timed, the three decode rows split",
       json.dumps(doc_m))
if doc:
    ok(doc["shapes"] == SHAPES and doc["batch"] == (1 if CPU else 8) and doc["new_tokens"] == 64
       and doc.get("mode") == "hot",
       f"prefill on a {SELECTED.get('type')} device: the {SHAPES} shapes (batch "
       f"{1 if CPU else 8})", json.dumps(doc))
# --shapes gpu anywhere; the time in a unit that suits it (under 1000 of it)
args = [BENCH, "prefill", "--shapes", "gpu", *TINY_PREFILL]
rc, out, err = run(*args)
m = re.search(r"^time +(\d+\.\d+) (µs|ms|s) per call", out, re.M)
ok(rc == 0 and "batch 8 x 64 new tokens" in out and "GPU defaults" in out and m and
   float(m.group(1)) < 1000, "prefill --shapes gpu: batch 8, the time in µs, ms or s",
   show(args, rc, out, err))
doc = check_json([BENCH, "xattn", "--json", "--tokens", "256", "--head-size", "64", "--block",
                  "64", "--input", "structured"], "xattn", ["shapes", "heads", "kv_heads", "mode"])
if doc:
    ok(doc["shapes"] == SHAPES and (doc["heads"], doc["kv_heads"]) == ((8, 2) if CPU else (32, 8)),
       f"xattn: the {SHAPES} shapes' heads", json.dumps(doc))

# xattn on a tiny prompt: both inputs, a density in (0, 1], the structured
# one sparser than the random one, every time positive.
doc = check_json([BENCH, "xattn", "--json", "--tokens", "256", "--heads", "2", "--kv-heads", "1",
                  "--head-size", "64", "--block", "64"], "xattn",
                 ["device", "tau", "stride", "block", "path", "runs"])
if doc:
    runs = {r["input"]: r for r in doc["runs"]}
    ok(set(runs) == {"structured", "random"} and
       all(r["tokens"] == 256 and 0 < r["density"] <= 1 and r["dense_ms"] > 0 and
           r["estimate_ms"] > 0 and r["sparse_ms"] > 0 and r["speedup"] > 0 for r in runs.values())
       and runs["structured"]["density"] < runs["random"]["density"],
       "xattn --json: both inputs, times, the structured input sparser", json.dumps(doc))

# --path mma: the estimation on (emulated, off NVIDIA) tensor cores, named in the JSON.
doc = check_json([BENCH, "xattn", "--json", "--tokens", "256", "--heads", "2", "--kv-heads", "1",
                  "--head-size", "64", "--block", "64", "--input", "structured", "--path", "mma"],
                 "xattn", ["path", "runs"])
if doc:
    ok(doc["path"] == "mma" and doc["runs"][0]["estimate_ms"] > 0 and
       0 < doc["runs"][0]["density"] <= 1, "xattn --path mma: timed and named", json.dumps(doc))

# --gemm: the GEMM route's time where clpa-bench has CLBlast, else a clean refusal.
GEMM_ARGS = [BENCH, "xattn", "--json", "--gemm", "--tokens", "256", "--heads", "2", "--kv-heads",
             "1", "--head-size", "64", "--block", "64", "--input", "structured"]
rc, out, err = run(*GEMM_ARGS)
if rc == 0:
    doc = json.loads(out.splitlines()[0]) if out.strip() else {}
    ok(all(r.get("gemm_ms", 0) > 0 for r in doc.get("runs", [{}])),
       "xattn --gemm: the GEMM route timed", show(GEMM_ARGS, rc, out, err))
else:
    ok(rc == 2 and "needs a build with CLBlast" in err, "xattn --gemm: refused without CLBlast",
       show(GEMM_ARGS, rc, out, err))

DECODE_KEYS = ["op", "device", "lanes", "heads", "kv_heads", "head_size", "block_size", "batch",
               "context", "dtype", "variant", "us_per_call", "kv_bytes", "gbps", "copy_gbps",
               "ratio", "flops", "fma_peak_tflops", "floor_us", "bound", "roofline_ratio"]
doc = check_json([BENCH, "decode", "--json", *TINY_DECODE], "decode", DECODE_KEYS)
if doc:
    ok(doc["batch"] == 2 and doc["context"] == 64 and doc["heads"] == 4 and doc["gbps"] > 0,
       "decode --json: the shape asked for, a positive bandwidth", json.dumps(doc))
    # the floor is the longer of the bytes at the copy bandwidth and the
    # FLOPs (4 * D per token and query head) at the FMA peak
    mem_us = doc["kv_bytes"] / (doc["copy_gbps"] * 1e9) * 1e6
    math_us = doc["flops"] / (doc["fma_peak_tflops"] * 1e12) * 1e6
    floor = max(mem_us, math_us)
    ok(doc["flops"] == 4 * doc["head_size"] * doc["tokens"] * doc["heads"] and
       abs(doc["floor_us"] - floor) <= 1e-3 + 1e-2 * floor and
       doc["bound"] == ("compute" if math_us > mem_us else "memory") and
       abs(doc["roofline_ratio"] - doc["floor_us"] / doc["us_per_call"]) <= 2e-3,
       "decode --json: the roofline floor and ratio from the measured ceilings", json.dumps(doc))
    ok(doc.get("paged_read_gbps", 0) > 0 and
       abs(doc["paged_ratio"] - doc["gbps"] / doc["paged_read_gbps"]) <= 2e-3 + 1e-3 * doc["paged_ratio"],
       "decode --json: the paged-read probe's bandwidth and decode's ratio to it", json.dumps(doc))
check_refused([BENCH, "decode", *TINY_DECODE, "--heads", "5"], "num_heads = 5")
TUNE = [BENCH, "decode", "--tune", *TINY_DECODE]
rc, out, err = run(*TUNE)
ok(rc == 0 and re.search(r"^partition  128, \w+ +path: +\d+\.\d+ (µs|ms|s), ", out, re.M) and
   "tuning table (lib/tuning.c): decode_partition 128 (" in out,
   "decode --tune: a time per candidate and the table's partition", show(TUNE, rc, out, err))

doc = check_json([BENCH, "decode", "--cold", "--repeats", "3", "--json", *TINY_DECODE], "decode",
                 DECODE_KEYS + ["mode", "repeats", "lengths", "tokens"])
if doc:
    ok(doc["mode"] == "cold" and doc["repeats"] == 3 and doc["us_per_call"] > 0 and
       doc["copy_gbps"] > 0, "decode --cold: mode cold, 3 repeats, a time and a ceiling",
       json.dumps(doc))
doc = check_json([BENCH, "decode", "--hot", "--lengths", "one-long", "--json", *TINY_DECODE],
                 "decode", DECODE_KEYS + ["mode", "lengths", "tokens"])
if doc:
    # one sequence at 64, the other at max(16, 64 / 64) = 16 tokens
    ok(doc["mode"] == "hot" and doc["lengths"] == "one-long" and doc["tokens"] == 80 and
       doc["kv_bytes"] == 2 * 80 * 2 * 64 * 2,
       "decode --lengths one-long: 64 + 16 tokens, K/V bytes from the lengths", json.dumps(doc))

# a plan from host lengths on the mma path (emulated off NVIDIA) with its busy partitions listed:
# the long sequence's 64 tokens in partitions of 16, the other's 16 in one
doc = check_json([BENCH, "decode", "--hot", "--lengths", "one-long", "--path", "mma", "--variant",
                  "v2", "--partition", "16", "--plan-run", "--work-list", "on", "--json",
                  *TINY_DECODE], "decode", DECODE_KEYS + ["plan_host_us", "work_pairs"])
if doc:
    ok(doc["work_pairs"] == 4 + 1 and doc["used_partition"] == 16 and doc["us_per_call"] > 0,
       "decode --plan-run --work-list on: 4 + 1 busy partitions listed, timed", json.dumps(doc))
# the one call makes the same list (and so the same partitions and bits) as the plan
doc = check_json([BENCH, "decode", "--hot", "--lengths", "one-long", "--path", "mma", "--variant",
                  "v2", "--partition", "16", "--work-list", "on", "--json", *TINY_DECODE],
                 "decode", DECODE_KEYS + ["work_pairs"])
if doc:
    ok(doc["work_pairs"] == 4 + 1 and "plan_host_us" not in doc and doc["us_per_call"] > 0,
       "decode --work-list on (one call): the same 4 + 1 busy partitions listed, timed",
       json.dumps(doc))
# without host lengths, v2 at the plan's partition: the device makes the list (more entries than
# sequences: the void ones its bound leaves), no host list
doc = check_json([BENCH, "decode", "--hot", "--lengths", "one-long", "--path", "mma", "--variant",
                  "v2", "--no-host-lengths", "--work-list", "on", "--json", *TINY_DECODE],
                 "decode", DECODE_KEYS + ["work_pairs", "list_entries"])
if doc:
    ok(doc["list_entries"] > 2 and doc["work_pairs"] == 0 and doc["us_per_call"] > 0,
       "decode --no-host-lengths --work-list on: a list the device makes, timed", json.dumps(doc))
check_refused([BENCH, "decode", "--work-list", "sometimes", *TINY_DECODE], "--work-list")

CSV_HEADER = ["device", "mode", "dtype", "heads", "kv_heads", "head_size", "block_size", "batch",
              "context", "lengths", "us_per_call", "gbps", "copy_gbps", "ratio", "path",
              "best_path", "best_us", "auto_vs_best"]
PATHS = ("lanes", "mma", "rows")


def read_csv(path):
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return list(csv.reader(f)), ""
    except OSError as e:
        return [], f"\ncsv: {e}"


with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "sweep.csv")
    args = [BENCH, "sweep", "--quick", "--csv", path]
    rc, out, err = run(*args)
    quick_run = (args, rc, out, err)  # the PNG's checks at the end read it
    rows, why = read_csv(path)
    ok(rc == 0 and rows and rows[0] == CSV_HEADER and len(rows) >= 2 and
       all(len(r) == len(CSV_HEADER) and float(r[13]) > 0 and r[14] in PATHS and
           r[15:] == ["", "", ""] for r in rows[1:]),
       "sweep --quick --csv: the header and rows of 18 fields with a ratio and auto's path, no"
       " comparison without --paths", show(args, rc, out, err + why) + f"\ncsv: {rows}")
    # --paths: each point also on the lanes path; auto against the fastest
    path2 = os.path.join(tmp, "paths.csv")
    args2 = [BENCH, "sweep", "--quick", "--paths", "lanes", "--csv", path2, "--png", "none",
             "--json"]
    doc = check_json(args2, "sweep", ["worst_auto_vs_best", "worst_point", "below_0_8", "shapes"])
    ok(doc is not None and doc["shapes"] == "quick", "sweep --quick: the JSON names the quick grid",
       f"{doc}")
    rows2, why = read_csv(path2)
    good = rows2 and rows2[0] == CSV_HEADER and len(rows2) >= 2
    for r in (rows2[1:] if good else []):
        us, best, vs = float(r[10]), float(r[16]), float(r[17])
        good = good and r[15] in (r[14], "lanes") and 0 < best <= us and 0 < vs <= 1 and \
            abs(vs - best / us) < 1e-3 + 1e-3 * vs
    worst = min((float(r[17]) for r in rows2[1:]), default=None) if good else None
    ok(good and doc is not None and worst is not None and
       abs(doc["worst_auto_vs_best"] - worst) < 1e-3 and
       doc["below_0_8"] == sum(float(r[16]) < 0.8 * float(r[10]) for r in rows2[1:]),
       "sweep --paths lanes: every row's fastest path, its time and auto's share of it agree,"
       " and the summary's worst and count match the rows", f"{doc}\ncsv: {rows2}{why}")
    # log-uniform lengths: every path draws the lengths auto's call drew (a
    # path whose call reads other tokens fails the point)
    path3 = os.path.join(tmp, "loguniform.csv")
    args3 = [BENCH, "sweep", "--quick", "--lengths", "loguniform", "--paths", "lanes,rows",
             "--csv", path3, "--png", "none", "--json"]
    doc = check_json(args3, "sweep", ["measured", "failed"])
    ok(doc is not None and doc["measured"] >= 2 and doc["failed"] == 0,
       "sweep --lengths loguniform --paths lanes,rows: every path on auto's lengths, none failed",
       f"{doc}")
    # the device's default grid, its costly lists given
    args4 = [BENCH, "sweep", "--dtypes", "f16", "--heads", "4", "--head-size", "64", "--context",
             "64", "--csv", os.path.join(tmp, "shapes.csv"), "--png", "none", "--json"]
    doc = check_json(args4, "sweep", ["shapes", "points", "measured"])
    if doc and CPU:
        # GQA 4 on 4 heads; batch 1 uniform, batch 16 uniform and one-long
        ok(doc["shapes"] == "cpu" and doc["points"] == 3 and doc["measured"] == 3,
           "sweep on a CPU: the CPU grid (3 points with these lists)", json.dumps(doc))
    elif doc:
        # GQA 1 and 4 on 4 heads; batch 1 uniform, batches 16 and 256 in 3 lengths
        ok(doc["shapes"] == "gpu" and doc["points"] == 14,
           "sweep off a CPU: the GPU grid (14 points with these lists)", json.dumps(doc))

    # On a terminal, every progress line of a point carries the counter,
    # and from the second point on the ETA.
    path5 = os.path.join(tmp, "tty.csv")
    args5 = [BENCH, "sweep", "--quick", "--csv", path5, "--png", "none"]
    try:
        master, slave = pty.openpty()
    except OSError as e:
        master = None
        skip("sweep on a terminal: the counter and the ETA", f"no pseudo-terminal ({e})")
    if master is not None:
        p = subprocess.Popen(args5, stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        tty = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the program closed its end
                break
            if not chunk:
                break
            tty += chunk
        os.close(master)
        out = p.stdout.read().decode("utf-8", "replace")
        p.stdout.close()
        rc = p.wait(timeout=240)
        lines = [l for l in re.split(r"[\r\n]", tty.decode("utf-8", "replace")) if l.strip()]
        counters = {int(m.group(1)) for m in (re.match(r"sweep (\d+)/6[:,]", l) for l in lines)
                    if m}
        etas = [l for l in lines if re.match(r"sweep [2-6]/6, ETA \d+ (s|min \d\d s): ", l)]
        ok(rc == 0 and counters == set(range(1, 7)) and len(etas) >= 5 and
           all(re.match(r"sweep \d/6", l) for l in lines) and "ETA" not in out,
           "sweep on a terminal: every progress line counts i/6, an ETA from the second point",
           show(args5, rc, out, "\n".join(lines[:40])))

    # The plot's script, through a stand-in gnuplot that keeps it: literal
    # text (fp8_e4m3 is no subscript) and one y range for every panel,
    # just above the highest ratio.
    fake = os.path.join(tmp, "bin")
    os.mkdir(fake)
    script = os.path.join(tmp, "plot.gp")
    with open(os.path.join(fake, "gnuplot"), "w", encoding="utf-8") as f:
        f.write("#!/bin/sh\ncat > \"$CLPA_TEST_PLOT\"\n"
                "out=$(sed -n \"s/^set output '\\(.*\\)'$/\\1/p\" \"$CLPA_TEST_PLOT\")\n"
                "printf 'stand-in' > \"$out\"\n")
    os.chmod(os.path.join(fake, "gnuplot"), 0o755)
    env = dict(os.environ, PATH=fake + os.pathsep + os.environ.get("PATH", ""),
               CLPA_TEST_PLOT=script)
    path6 = os.path.join(tmp, "plot.csv")
    args6 = [BENCH, "sweep", "--quick", "--dtypes", "f16,fp8_e4m3", "--csv", path6]
    rc, out, err = run(*args6, env=env)
    rows6, why = read_csv(path6)
    try:
        with open(script, encoding="utf-8") as f:
            gp = f.read()
    except OSError as e:
        gp = f"(no script: {e})"
    top = max((float(r[13]) for r in rows6[1:]), default=0)
    ranges = [float(y) for y in re.findall(r"^set yrange \[0:(\d+(?:\.\d+)?)\]$", gp, re.M)]
    ok(rc == 0 and gp.startswith("set terminal png noenhanced ") and
       "set title 'fp8_e4m3, uniform lengths'" in gp and "[0:*]" not in gp and
       len(ranges) == 1 and top > 0 and top <= ranges[0] <= math.ceil(top * 11) / 10 + 1e-9 and
       os.path.exists(os.path.join(tmp, "plot.png")),
       "sweep's plot: literal labels, one y range over every panel, just above the top ratio",
       show(args6, rc, out, err + why) + f"\ntop ratio {top}, y ranges {ranges}\n{gp[:600]}")

    png = os.path.join(tmp, "sweep.png")
    if shutil.which("gnuplot"):
        ok(os.path.exists(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n",
           "sweep --quick: gnuplot drew the PNG next to the CSV", show(*quick_run))
    else:
        ok(not os.path.exists(png) and "skipped the plot" in quick_run[3],
           "sweep --quick without gnuplot: no PNG, says it skipped the plot", show(*quick_run))

check_json([BENCH, "radix", "--json", "--requests", "200"], "radix",
           ["requests", "block_size", "num_blocks", "window", "prompt_tokens", "hit_tokens",
            "hit_rate", "ops", "ops_per_s", "seconds"])
doc = check_json([BENCH, "kvman", "--json", "--running", "8", "--steps", "20", "--warmup", "5"],
                 "kvman", ["api", "block_size", "width", "out_min", "out_max", "runs"])
if doc:
    ok(len(doc["runs"]) == 1 and doc["runs"][0]["running"] == 8, "kvman --json: one run of 8",
       json.dumps(doc))

rc, out, err = run(INFO, "--json")
try:
    info = json.loads(out) if len(out.splitlines()) == 1 else None
except ValueError:
    info = None
ok(rc == 0 and info is not None and info.get("op") == "info" and len(info["devices"]) >= 1 and
   sum(d["selected"] for d in info["devices"]) == 1 and
   all(k in info["devices"][0] for k in ("name", "vendor", "platform", "type", "compute_units",
                                         "global_mem_bytes", "local_mem_bytes", "lanes")),
   "clpa-info --json: one line, op info, the devices as an array, one selected",
   show([INFO, "--json"], rc, out, err))

# --smoke runs a kernel and names the tuning-table entry the context uses,
# which matches the selected device's type (or its name or vendor).
rc, out, err = run(INFO, "--json", "--smoke")
try:
    info = json.loads(out) if len(out.splitlines()) == 1 else None
except ValueError:
    info = None
smoke = info.get("smoke", {}) if info else {}
sel = info["devices"][info["selected"]] if info and info.get("selected") is not None else {}
ok(rc == 0 and smoke.get("ok") is True and smoke.get("decode_partition", 0) > 0 and
   (smoke.get("tuning") in (f"type:{sel.get('type')}", "default") or
    str(smoke.get("tuning", "")).startswith(("device:", "vendor:"))),
   "clpa-info --json --smoke: the kernel ran, a tuning entry for this device",
   show([INFO, "--json", "--smoke"], rc, out, err))
rc, out, err = run(INFO, "--smoke")
ok(rc == 0 and any(l.startswith("tuning:") and "decode partition" in l for l in out.splitlines()),
   "clpa-info --smoke prints the tuning line", show([INFO, "--smoke"], rc, out, err))

done()
