#!/usr/bin/env python3
"""clpa-demo end to end, with --check (every generated token against the
host reference engine), as TAP: the prefix cache computes fewer prompt
tokens than --no-prefix-cache and both produce tokens identical to the
reference; a cache too small for the batch forces preemptions, which still
produce the reference's tokens; one too small for every request fails
(exit 1) saying what the smallest needs (its prompt and output but the
last token, never fed back), and that many blocks serve it, filling the
last slot, with the reference's tokens; one sized from the workload
past --blocks' limit is refused (exit 2); a bad option is named with exit
status 2; sampling serves the synthetic workload and says so; --check
refuses it; --output-max alone sets both bounds; the fused ops serve the
unfused run's tokens in fewer ops a layer; --trace writes every op.

usage: test_demo.py CLPA_DEMO"""
import json
import os
import re
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import done, ok, run_child  # noqa: E402

demo = sys.argv[1]


def run(*args):
    p = run_child([demo, *args], capture_output=True, text=True, timeout=600)
    try:
        j = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else None
    except json.JSONDecodeError:
        j = None
    if p.returncode != 0 or j is None:
        print("# exit %d\n# stdout: %s\n# stderr: %s" % (p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    return p.returncode, j


def checked(j):
    """--check passed, and over every served request and every generated token: its verdict
    counts them (a check that looked at nothing would pass too)."""
    m = re.match(r"passed: (\d+) requests, (\d+) generated tokens ", j.get("check", ""))
    good = bool(j.get("check_ok") and m and int(m.group(1)) == j["requests"] - j["refused"] > 0
                and int(m.group(2)) == j["generated_tokens"] > 0)
    if not good:
        print("# --check: %s (%s requests, %s refused, %s generated tokens)"
              % (j.get("check"), j.get("requests"), j.get("refused"), j.get("generated_tokens")))
    return good


small = ["--requests", "10", "--output-min", "4", "--output-max", "8", "--check", "--json"]
rc, on = run(*small)
ok(rc == 0 and on and checked(on), "prefix cache on: --check passes: %s" % (on or {}).get("check"))
rc, off = run(*small, "--no-prefix-cache")
ok(rc == 0 and off and checked(off), "prefix cache off: --check passes")
# f16 weights, on the table's engines and forced onto the tiled GEMM and gemv (emulated off
# NVIDIA), which round the activations to f16: --check's tolerance for 16-bit weights holds
rc, h = run(*small, "--weight-dtype", "f16")
ok(rc == 0 and h and checked(h), "f16 weights: --check passes: %s" % (h or {}).get("check"))
# (the GEMM makes SwiGLU in its epilogue: one op fewer a layer)
rc, h = run(*small, "--weight-dtype", "f16", "--linear", "gemm")
ok(rc == 0 and h and checked(h) and h["linear"] == "gemm (forced)" and on
   and h["ops_decode_layer"] == on["ops_decode_layer"] - 1,
   "f16 weights on the tiled GEMM: --check passes, SwiGLU made in its epilogue (%s ops a decode"
   " layer, %s on the table's engine): %s" % ((h or {}).get("ops_decode_layer"),
                                               (on or {}).get("ops_decode_layer"), (h or {}).get("check")))
# and forced onto gemv (few rows on tensor cores; emulated off NVIDIA), which takes the model's
# f16 activations with f16 weights, and makes SwiGLU in the gate and up projection's epilogue and
# RoPE with the cache write in the QKV projection's: two ops fewer a layer; f16 and f32 caches,
# blocks of 16 and of 1
for extra in ([], ["--kv-dtype", "f32", "--block-size", "1"]):
    rc, h = run(*small, "--weight-dtype", "f16", "--linear", "gemv", *extra)
    ok(rc == 0 and h and checked(h) and h["linear"] == "gemv (forced)" and on
       and h["ops_decode_layer"] == on["ops_decode_layer"] - 2
       and abs(h["ops_mixed_layer"] - (on["ops_mixed_layer"] - 2)) < 1e-6,
       "f16 weights on gemv %s: --check passes; SwiGLU, and RoPE with the cache write, made in"
       " epilogues: %s ops a decode layer, %s a mixed one (%s, %s without gemv): %s"
       % (" ".join(extra) or "(defaults)", (h or {}).get("ops_decode_layer"),
          (h or {}).get("ops_mixed_layer"), (on or {}).get("ops_decode_layer"),
          (on or {}).get("ops_mixed_layer"), (h or {}).get("check")))
# f16 matrices held as tiles of 16 rows x 32 (linear.h's tiled forms; the embedding too, which
# the LM head shares): --check passes on the table's engine and forced onto gemv, with the same
# ops a layer as row-major weights; rows is row-major; f32 weights refuse tiles, exit 1
for eng in ([], ["--linear", "gemv"]):
    rc, t = run(*small, "--weight-dtype", "f16", "--weight-layout", "tiles", *eng)
    rc2, r = run(*small, "--weight-dtype", "f16", "--weight-layout", "rows", *eng)
    ok(rc == 0 and rc2 == 0 and t and r and checked(t) and checked(r)
       and t["weight_dtype"] == "f16_tiled" and r["weight_dtype"] == "f16"
       and t["ops_decode_layer"] == r["ops_decode_layer"],
       "--weight-layout tiles %s: --check passes (%s), as rows does (%s): %s"
       % (" ".join(eng) or "(the table's engine)", (t or {}).get("weight_dtype"),
          (r or {}).get("weight_dtype"), (t or {}).get("check")))
p = run_child([demo, "--weight-layout", "tiles", "--requests", "2"], capture_output=True, text=True)
ok(p.returncode == 1 and "--weight-layout tiles" in p.stderr and "f16 weights" in p.stderr,
   "--weight-layout tiles with f32 weights: exit 1, a message naming the option: %s"
   % p.stderr.strip()[-160:])
p = run_child([demo, "--weight-layout", "columns"], capture_output=True, text=True)
ok(p.returncode == 2 and "auto, rows or tiles" in p.stderr, "--weight-layout columns: exit 2")
# each layer's attention as one clpa_prefill over the step's sequences (issue 45's mixed step: the
# default) against a decode and a prefill call
rc, h = run(*small, "--two-attention-calls")
ok(rc == 0 and h and checked(h) and h["attention_calls"] == 2 and on and on["attention_calls"] == 1
   and h["generated_tokens"] == on["generated_tokens"],
   "--two-attention-calls: --check passes, the same tokens served: %s" % (h or {}).get("check"))
# the fused ops (issue 42: RoPE with the cache write, the step's inputs in one write) against
# every op its own launch (--unfused): fewer ops a layer (4 in the tiny model) and outside the
# layers, the same tokens and logits (the check's verdict names the
# worst difference and where it is), f16 and f32 caches, blocks of 16 and of 1
for extra in ([], ["--kv-dtype", "f32", "--block-size", "1"]):
    rc, f = run(*small, *extra) if extra else (0, on)
    rc2, u = run(*small, *extra, "--unfused")
    ok(rc == 0 and rc2 == 0 and f and u and checked(f) and f["check"] == u["check"]
       and f["generated_tokens"] == u["generated_tokens"]
       and 0 < f["ops_decode_layer"] < u["ops_decode_layer"]
       and 0 < f["ops_mixed_layer"] < u["ops_mixed_layer"]
       and f["ops_decode_step"] - f["ops_decode_layer"] * 4 < u["ops_decode_step"] - u["ops_decode_layer"] * 4,
       "fused %s: the unfused run's tokens and check, in %s ops a decode layer against %s (%s a"
       " decode step against %s): %s"
       % (" ".join(extra) or "(defaults)", (f or {}).get("ops_decode_layer"),
          (u or {}).get("ops_decode_layer"), (f or {}).get("ops_decode_step"),
          (u or {}).get("ops_decode_step"), (f or {}).get("check")))
# page sizes (issue 46): SGLang's token pool and a large block, through the KV manager, the radix
# cache and clpa's attention; --check against the host reference
for bs in ("1", "64"):
    rc, h = run(*small, "--block-size", bs)
    ok(rc == 0 and h and checked(h) and h["block_size"] == int(bs) and on
       and h["generated_tokens"] == on["generated_tokens"] and h["cached_tokens"] > 0,
       "--block-size %s: --check passes, prefixes shared: %s" % (bs, (h or {}).get("check")))
p = run_child([demo, "--block-size", "12"], capture_output=True, text=True, timeout=600)
ok(p.returncode == 2 and "--block-size takes a power of two from 1 to 256, not 12" in p.stderr,
   "--block-size 12: refused, exit 2")
# a random model quantized on the host (--weight-quant): every layer matrix and the LM head in
# ggml's blocks, the reference engine on their decoding
rc, h = run(*small, "--weight-dtype", "f16", "--weight-quant", "q8_0")
# (the embedding stays f16, tiled where the device's table holds 16-bit weights as tiles)
ok(rc == 0 and h and checked(h) and h["weight_dtype"] in ("f16, blocks q8_0", "f16_tiled, blocks q8_0")
   and on and h["step_floor_ms"] < on["step_floor_ms"],
   "--weight-quant q8_0: --check passes, the step reads fewer bytes: %s" % (h or {}).get("check"))
p = run_child([demo, "--weight-quant", "q4_K"], capture_output=True, text=True, timeout=600)
ok(p.returncode == 1 and "qkv rows of 128 do not make whole q4_K blocks of 256" in p.stderr,
   "--weight-quant q4_K on the tiny model (hidden 128): refused, exit 1: %s" % p.stderr.strip()[-200:])
p = run_child([demo, "--weight-quant", "q3_K"], capture_output=True, text=True, timeout=600)
ok(p.returncode == 2 and "q3_K" in p.stderr and "q4_0, q8_0, q4_K, q5_K and q6_K" in p.stderr,
   "--weight-quant q3_K: named, the forms listed, exit 2")
if on and off:
    ok(on["prompt_tokens"] == off["prompt_tokens"] and on["generated_tokens"] == off["generated_tokens"],
       "same prompts and outputs both ways (%d prompt, %d generated tokens)"
       % (on["prompt_tokens"], on["generated_tokens"]))
    ok(on["cached_tokens"] > 0 and on["computed_tokens"] < off["computed_tokens"]
       and off["cached_tokens"] == 0 and off["computed_tokens"] == off["prompt_tokens"],
       "the prefix cache computes fewer tokens: %d (%d cached) against %d"
       % (on["computed_tokens"], on["cached_tokens"], off["computed_tokens"]))
    ok(on["cached_tokens"] + on["computed_tokens"] == on["prompt_tokens"],
       "cached + computed = prompt tokens without preemption")
    # The step floor: the copy bandwidth measured in the run, TPOT over it, the engines named.
    # (the rule's words depend on the device's table: gemm first on NVIDIA, stream on a CPU)
    ok(on["copy_gbps"] > 0 and on["step_floor_ms"] > 0
       and re.fullmatch(r"(stream|mma|gemm|gemv|clblast)\b.* \(table [a-z]+:[^)]+\)", on["linear"])
       # the JSON rounds TPOT to 0.01 ms, the floor to 1e-6 ms and the ratio to 0.01
       and abs(on["tpot_floor_ratio"] - on["tpot_p50_ms"] / on["step_floor_ms"])
       <= (0.005 + 5e-7 * on["tpot_floor_ratio"]) / on["step_floor_ms"] + 0.005 + 1e-9,
       "the summary's step floor %.3f ms at %.1f GB/s, TPOT %.1fx it; linear layers: %s"
       % (on["step_floor_ms"], on["copy_gbps"], on["tpot_floor_ratio"], on["linear"]))

rc, pre = run("--requests", "10", "--output-min", "40", "--output-max", "48", "--blocks", "30",
              "--kv-dtype", "f32", "--check", "--json")
ok(rc == 0 and pre and pre["preemptions"] > 0 and checked(pre),
   "a 30-block cache preempts (%s times) and still matches the reference"
   % (pre or {}).get("preemptions"))
ok(pre and pre["refused"] == 0 and pre["requests"] == 10, "and serves every request")

# regress (issue 41): --blocks too small for every request served nothing,
# yet exited 0 with a summary of zeros. It fails, saying what the smallest
# request needs; that many blocks serve it (and refuse only the larger ones,
# counted in the summary), one fewer fails again.
tiny = ["--requests", "10", "--output-min", "2", "--output-max", "2", "--json"]
p = run_child([demo, *tiny, "--blocks", "2"], capture_output=True, text=True, timeout=600)
m = re.search(r"clpa-demo: --blocks 2 is too small for every request: the smallest needs (\d+) blocks "
              r"\((\d+) tokens, 16 a block\)", p.stderr)
ok(p.returncode == 1 and not p.stdout.strip() and m and int(m.group(1)) == (int(m.group(2)) + 15) // 16 > 2,
   "regress: --blocks 2 fails (exit %d) naming the smallest request's need: %s"
   % (p.returncode, p.stderr.strip()[-200:]))
need = int(m.group(1)) if m else 3
rc, some = run(*tiny, "--blocks", str(need))
ok(rc == 0 and some and 0 < some["refused"] < some["requests"] and some["generated_tokens"] > 0,
   "--blocks %d: the larger requests are refused and counted (%s of %s), the rest served"
   % (need, (some or {}).get("refused"), (some or {}).get("requests")))
p = run_child([demo, *tiny, "--blocks", str(need - 1)], capture_output=True, text=True, timeout=600)
ok(p.returncode == 1 and "the smallest needs %d blocks" % need in p.stderr,
   "--blocks %d fails the same way: %s" % (need - 1, p.stderr.strip()[-200:]))

# regress: a request was refused when prompt + max_tokens did not fit the cache, yet the last
# generated token is never fed back, so its K/V is never written: prompt + max_tokens - 1 tokens
# must fit. The 120-token prompts with 9 tokens out hold 128 tokens at their longest, 16 blocks of
# 8, the last filled by decodes: 16 blocks serve them (the 312-token ones refused), matching the
# reference; 15 fail, naming 16 blocks (128 tokens).
exact = ["--requests", "10", "--output-max", "9", "--block-size", "8", "--kv-dtype", "f32"]
rc, j = run(*exact, "--blocks", "16", "--check", "--json")
ok(rc == 0 and j and checked(j) and 0 < j["refused"] < j["requests"] and j["peak_blocks"] == 16,
   "regress: a request whose K/V fills the cache to its last slot is served (%s of %s refused):"
   " %s" % ((j or {}).get("refused"), (j or {}).get("requests"), (j or {}).get("check")))
p = run_child([demo, *exact, "--blocks", "15"], capture_output=True, text=True, timeout=600)
ok(p.returncode == 1 and "the smallest needs 16 blocks (128 tokens, 8 a block)" in p.stderr,
   "--blocks 15 fails, naming what the smallest needs: %s" % p.stderr.strip()[-200:])

# regress: the cache sized from the workload (no --blocks) was 2 x --max-running x the longest
# request's blocks in 32 bits, which --max-running 4096 with --output-max 2^20 in blocks of 1
# overflowed (UBSan: signed integer overflow; else a wrapped block count). It is counted in 64
# bits, and past --blocks' own limit refused, exit 2, asking for --blocks.
p = run_child([demo, "--max-running", "4096", "--output-max", "1048576", "--block-size", "1",
                    "--requests", "1", "--no-warmup"], capture_output=True, text=True, timeout=600)
ok(p.returncode == 2 and "runtime error" not in p.stderr
   and "takes 34363080704 blocks of 1, more than 16777216: give --blocks" in p.stderr,
   "regress: a workload-sized cache past 2^31 blocks is refused, exit %d: %s"
   % (p.returncode, p.stderr.strip()[-240:]))

# By default the workload is served once untimed first, so the timed run
# finds every program ready; with --no-warmup a fresh process gets its
# programs during the run (from source or the binary cache) and says so;
# built from source (no binary cache), the summary names the builds.
ok(on and on["warmup_s"] > 0 and on["programs_built"] + on["programs_loaded"] == 0,
   "the warm-up (%s s) took every program: the timed run built %s, loaded %s"
   % ((on or {}).get("warmup_s"), (on or {}).get("programs_built"), (on or {}).get("programs_loaded")))
rc, cold = run(*small, "--no-warmup")
ok(rc == 0 and cold and cold["warmup_s"] == -1 and cold["programs_built"] + cold["programs_loaded"] >= 1
   and cold["build_s"] > 0 and checked(cold),
   "--no-warmup: the run's program builds and loads are counted: %s built, %s loaded, %s s"
   % ((cold or {}).get("programs_built"), (cold or {}).get("programs_loaded"), (cold or {}).get("build_s")))
env = dict(os.environ, CLPA_NO_BINARY_CACHE="1")
p = run_child([demo, "--requests", "2", "--output-min", "2", "--output-max", "2", "--no-warmup"],
                   capture_output=True, text=True, timeout=600, env=env)
line = [l for l in p.stdout.splitlines() if l.strip().startswith("kernel builds")]
ok(p.returncode == 0 and len(line) == 1 and re.search(r"\(([1-9][0-9]*) programs built on first use", line[0]),
   "without the binary cache the summary names the builds: %s" % (line[0].strip() if line else p.stdout[-300:]))
p = run_child([demo, "--requests", "2", "--output-min", "2", "--output-max", "2"],
                   capture_output=True, text=True, timeout=600, env=env)
line = [l for l in p.stdout.splitlines() if l.strip().startswith("warm-up")]
ok(p.returncode == 0 and len(line) == 1 and re.search(r"untimed first, ([1-9][0-9]*) programs built", line[0])
   and "kernel builds" not in p.stdout,
   "without the binary cache and with the warm-up, the warm-up line names the builds: %s"
   % (line[0].strip() if line else p.stdout[-300:]))
for _ in range(2):  # the first stores what the second loads
    p = run_child([demo, "--requests", "2", "--output-min", "2", "--output-max", "2"],
                       capture_output=True, text=True, timeout=600)
ok(p.returncode == 0 and "kernel builds" not in p.stdout and "device time           not split" in p.stdout,
   "with a warm binary cache it does not; without --time-split the device time is not split")
p = run_child([demo, "--requests", "2", "--output-min", "2", "--output-max", "2", "--time-split", "--json"],
                   capture_output=True, text=True, timeout=600)
h = json.loads(p.stdout.splitlines()[-1]) if p.returncode == 0 else {}
ok(h.get("time_split") is True and h["gemm_s"] > 0 and h["attention_s"] > 0 and h["other_s"] > 0
   and 0 < h["decode_step_device_ms"] <= h["decode_step_ms"] * 1.05,
   "--time-split: device seconds by kind, and a decode step's device time within its wall time: %s"
   % {k: h.get(k) for k in ("time_split", "gemm_s", "attention_s", "other_s", "decode_step_ms",
                            "decode_step_device_ms")})

# --trace (every request there at once: no idle step): a line a step, then a line an op (as many as the step says), every op named, its device
# stamps in order; the decode steps' ops as the summary counts them; the script reads it
trace = os.path.join(os.environ.get("TMPDIR", "/tmp"), "clpa-test-trace-%d.jsonl" % os.getpid())
rc, h = run("--requests", "3", "--output-min", "3", "--output-max", "3", "--arrival-steps", "0",
            "--trace", trace, "--json")
try:
    with open(trace) as f:
        lines = [json.loads(l) for l in f]
except (OSError, ValueError):
    lines = []
heads = [l for l in lines if "op" not in l]
opl = [l for l in lines if "op" in l]
stamps = ("queued_us", "submit_us", "start_us", "end_us")
ordered = all(None not in [o[k] for k in stamps] and
              all(o[a] <= o[b] for a, b in zip(stamps, stamps[1:])) for o in opl)
counts = all(sum(1 for o in opl if o["step"] == s["step"]) == s["ops"] for s in heads)
dec = [s["ops"] for s in heads if s["decode_seqs"] == s["seqs"]]
trace_script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "demo_trace.py")
summary = run_child([sys.executable, trace_script, trace], capture_output=True, text=True)
by_rows = run_child([sys.executable, trace_script, trace, "--by-rows"], capture_output=True, text=True)
groups = [l.split() for l in by_rows.stdout.splitlines()[1:]]
ok(rc == 0 and h and len(heads) == h["steps"] and opl and counts and ordered and
   all(o["name"] for o in opl) and dec and abs(sum(dec) / len(dec) - h["ops_decode_step"]) < 0.1 and
   summary.returncode == 0 and "decode-only" in summary.stdout and by_rows.returncode == 0 and
   sum(int(g[-6]) for g in groups) == len(heads) and any(g[0] == "with" for g in groups),
   "--trace: %d steps (summary %s), %d ops, counts %s, stamps in order %s, script rc %d; --by-rows"
   " groups every step: %s" % (len(heads), (h or {}).get("steps"), len(opl), counts, ordered,
                               summary.returncode, [" ".join(g[:-6]) for g in groups]))
if os.path.exists(trace):
    os.remove(trace)
rc, h = run("--requests", "1", "--trace", "/nonexistent-dir/t.jsonl", "--json")
ok(rc == 1 and h is None, "--trace into a folder that does not exist fails, exit 1")

p = run_child([demo, "--no-such-flag"], capture_output=True, text=True)
ok(p.returncode == 2 and "no-such-flag" in p.stderr, "an unknown flag is named, exit 2")
p = run_child([demo, "--schedule", "sjf"], capture_output=True, text=True)
ok(p.returncode == 2 and "lpm or fcfs" in p.stderr, "a bad --schedule says what it takes")
p = run_child([demo, "--help"], capture_output=True, text=True)
ok(p.returncode == 0 and "--no-prefix-cache" in p.stdout and "--check" in p.stdout,
   "--help explains the flags")
# regress: decode throughput divided every generated token by the decode rows' share of the time,
# the first tokens too, which the prefill rows make (their time is prefill's). One request of 2
# tokens: a prefill step (the first token), then one decode-only step (the second): 1 token in
# decode_step_ms, where the old figure said 2.
rc, j = run("--requests", "1", "--output-max", "2", "--arrival-steps", "0", "--json")
ok(rc == 0 and j and j["generated_tokens"] == 2 and j["decode_step_ms"] > 0
   and abs(j["decode_tokens_per_s"] * j["decode_step_ms"] / 1e3 - 1) < 0.02,
   "regress: decode throughput counts the decode rows' tokens: %s tokens/s, a decode step %s ms"
   % ((j or {}).get("decode_tokens_per_s"), (j or {}).get("decode_step_ms")))
rc, fc = run("--requests", "6", "--output-min", "2", "--output-max", "4", "--schedule", "fcfs",
             "--check", "--json")
ok(rc == 0 and fc and checked(fc) and fc["schedule"] == "fcfs", "fcfs schedule passes --check")

# regress (issue 42): --output-max below --output-min's default was refused
# when given alone; now it sets both bounds (every answer that long: the
# random model has no end token), and --output-min alone above the
# default maximum raises it.
rc, j = run("--requests", "6", "--output-max", "3", "--json")
ok(rc == 0 and j and j["generated_tokens"] == 18 and j["requests"] == 6,
   "regress: --output-max 3 alone: 6 answers of 3 tokens (%s)" % (j or {}).get("generated_tokens"))
rc, j = run("--requests", "3", "--output-min", "40", "--json")
ok(rc == 0 and j and j["generated_tokens"] == 120,
   "--output-min 40 alone: 3 answers of 40 tokens (%s)" % (j or {}).get("generated_tokens"))
p = run_child([demo, "--output-min", "50", "--output-max", "40"], capture_output=True, text=True)
ok(p.returncode == 2 and "--output-max 40 is below --output-min 50" in p.stderr, "both given, crossed: exit 2")

rc, j = run("--requests", "6", "--output-min", "4", "--output-max", "4", "--temperature", "0.8", "--top-k", "40",
            "--top-p", "0.9", "--json")
ok(rc == 0 and j and j["generated_tokens"] == 24 and j["temperature"] == 0.8 and j["top_k"] == 40
   and j["top_p"] == 0.9, "sampling serves the synthetic workload, the settings in the JSON")
# --top-k -1 is off, as vLLM's top_k -1 (it was refused, exit 2)
rc, j = run("--requests", "2", "--output-max", "3", "--temperature", "0.9", "--top-k", "-1", "--json")
ok(rc == 0 and j and j["top_k"] == 0 and j["generated_tokens"] == 6,
   "--top-k -1 is off, reported as 0 (exit %d)" % rc)
p = run_child([demo, "--top-k", "-2"], capture_output=True, text=True)
ok(p.returncode == 2 and "--top-k takes an integer from -1 to 1073741824, not '-2'" in p.stderr,
   "--top-k -2 is refused, the range named: %s" % p.stderr.strip()[:120])
# regress: the JSON had temperature and top-p to 4 decimals (1e-05 as 0.0000, a sampling run
# reading as greedy; 0.99999 as 1.0000) and the seed as a signed integer (2^64 - 1 as -1).
rc, j = run("--requests", "2", "--output-max", "2", "--temperature", "0.00001",
            "--top-p", "0.99999", "--seed", "18446744073709551615", "--no-warmup", "--json")
ok(rc == 0 and j and j["temperature"] == 0.00001 and j["top_p"] == 0.99999
   and j["seed"] == 2**64 - 1,
   "regress: the JSON gives temperature 1e-05, top-p 0.99999 and seed 2^64 - 1 as given: %s"
   % {k: (j or {}).get(k) for k in ("temperature", "top_p", "seed")})
p = run_child([demo, "--top-p", "0"], capture_output=True, text=True)
ok(p.returncode == 2 and "--top-p" in p.stderr, "--top-p 0 is refused: %s" % p.stderr.strip().split("\n")[0])
p = run_child([demo, "--temperature", "0.7", "--check"], capture_output=True, text=True)
ok(p.returncode == 2 and "--temperature 0" in p.stderr, "--check with sampling is refused, exit 2")

done()
