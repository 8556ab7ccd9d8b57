#!/usr/bin/env python3
"""demo_trace.py FILE [--all] [--by-rows] — where clpa-demo's steps go, from its --trace file.

Over the decode-only steps (every step with --all), per step: the host's
enqueue and wall time, the device's span (first start to last end), its
busy time (the ops' start-to-end, summed), the gaps between ops, and of
those the part where the next op was not yet enqueued when the one before
it ended (the device waited on the host). Then per op name: how many a
step, median µs each, and their median gap before. Medians over steps.
An op of several kernels shows its last kernel: the others fall in its gap.

--by-rows: every step instead, grouped by its rows (the step's tokens): how
many steps, their summed host wall time, and medians of the host wall and of
the ops' busy time by kind (gemm, attention, other); decode-only steps and
the others (with prefill rows) apart.
"""
import json
import statistics as st
import sys


def by_rows(steps, ops):
    """Steps grouped by their rows: decode-only ones, then the others by rows bucket."""
    groups = {}
    for s, h in steps.items():
        o = [x for x in ops.get(s, []) if x["start_us"] is not None and x["end_us"] is not None]
        kinds = {}
        for x in o:
            kinds[x["kind"]] = kinds.get(x["kind"], 0.0) + x["end_us"] - x["start_us"]
        dec = h["decode_seqs"] == h["seqs"]
        top = next(b for b in (16, 32, 48, 64, 128, 256, 512, 1 << 30) if h["tokens"] <= b)
        key = (0 if dec else 1, top)
        groups.setdefault(key, []).append((h["host_wall_us"], kinds))
    print(f"  {'steps':<26} {'n':>4} {'wall ms':>8} {'us each':>8} {'gemm':>7} {'attn':>7} {'other':>7}")
    for (mixed, top), g in sorted(groups.items()):
        med = lambda k: st.median(kd.get(k, 0.0) for _, kd in g)
        what = f"{'with prefill' if mixed else 'decode-only'}, rows <= {top if top < 1 << 30 else 'any'}"
        print(f"  {what:<26} {len(g):4d} {sum(w for w, _ in g) / 1e3:8.1f} "
              f"{st.median(w for w, _ in g):8.0f} {med('gemm'):7.0f} {med('attention'):7.0f} {med('other'):7.0f}")
    return 0


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    every = "--all" in sys.argv
    if len(args) != 1:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    steps, ops = {}, {}
    with open(args[0]) as f:
        for line in f:
            j = json.loads(line)
            if "op" in j:
                ops.setdefault(j["step"], []).append(j)
            else:
                steps[j["step"]] = j
    if "--by-rows" in sys.argv:
        return by_rows(steps, ops)
    chosen = [s for s, h in steps.items() if every or (h["decode_seqs"] == h["seqs"] and h["seqs"] > 0)]
    if not chosen:
        print("no step to summarize", file=sys.stderr)
        return 1
    rows, per = [], {}
    for s in chosen:
        o = [x for x in ops.get(s, []) if x["start_us"] is not None and x["end_us"] is not None]
        if not o:
            continue
        busy = sum(x["end_us"] - x["start_us"] for x in o)
        gaps = host_gaps = 0.0
        for a, b in zip(o, o[1:]):
            g = max(0.0, b["start_us"] - a["end_us"])
            gaps += g
            if b["queued_us"] is not None and b["queued_us"] > a["end_us"]:
                host_gaps += min(g, b["queued_us"] - a["end_us"])
        span = o[-1]["end_us"] - o[0]["start_us"]
        h = steps[s]
        rows.append((h["host_enqueue_us"], h["host_wall_us"], span, busy, gaps, host_gaps, o[0]["start_us"]))
        prev = None
        for x in o:
            d = per.setdefault(x["name"], {"n": 0, "us": [], "gap": []})
            d["n"] += 1
            d["us"].append(x["end_us"] - x["start_us"])
            if prev is not None:
                d["gap"].append(max(0.0, x["start_us"] - prev["end_us"]))
            prev = x
    med = lambda i: st.median(r[i] for r in rows)
    print(f"{len(rows)} steps ({'all' if every else 'decode-only'}), medians in us:")
    print(f"  host enqueue {med(0):.0f}, host wall {med(1):.0f}; device span {med(2):.0f} = "
          f"busy {med(3):.0f} + gaps {med(4):.0f} (waiting on the host {med(5):.0f}); "
          f"first op starts {med(6):.0f} after it was queued")
    print(f"  {'op':<28} {'a step':>7} {'us each':>8} {'gap before':>10} {'us a step':>10}")
    for name, d in sorted(per.items(), key=lambda kv: -sum(kv[1]["us"])):
        n = d["n"] / len(rows)
        each = st.median(d["us"])
        gap = st.median(d["gap"]) if d["gap"] else 0.0
        print(f"  {name:<28} {n:7.1f} {each:8.1f} {gap:10.1f} {n * (each + gap):10.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
