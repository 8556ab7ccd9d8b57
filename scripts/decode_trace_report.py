#!/usr/bin/env python3
"""decode_trace_report.py FILE [TAG] — reads a decode timeline (written by a
tree that scripts/decode_trace.py instrumented: FILE and FILE.ev, the last
call) and prints where the time went, in us: the gap from the flush's end
to the kernel's start and first warp, the quantiles of the warps' start,
first S^T, loop end, merge and end, the work-groups per SM, and the reduce
kernel's gap and work-groups where there is one."""
import sys, collections
path, tag = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ''
L = open(path).read().split('\n')
grid = L[0]
ev = [int(x) for x in L[1].split()[1:]]
dq, ds, dst, den, rq, rs, rst, ren = ev
last = ren if rst else den
evs = [[int(x) for x in l.split()] for l in open(path + '.ev').read().split('\n') if l.strip()]
m = [e for e in evs if e[1] == last]
if not m: sys.exit(f'{tag}: no flush matches the traced call')
fe, ce = m[-1]
d = [[int(x) for x in l.split()[1:]] for l in L if l.startswith('d ')]
r = [[int(x) for x in l.split()[1:]] for l in L if l.startswith('r ')]
us = lambda x: x / 1000.0
def q(v):
    v = sorted(v); n = len(v)
    if not n: return 'none'
    return 'min %.2f p10 %.2f p50 %.2f p90 %.2f max %.2f' % tuple(us(v[int(f * (n - 1))]) for f in (0, .1, .5, .9, 1))
print(f'== {tag} {grid}')
print(f'call {us(ce - fe):.2f}  dec queued {us(dq - fe):+.2f} submit {us(ds - fe):+.2f} start {us(dst - fe):+.2f} dur {us(den - dst):.2f}', end='')
if rst: print(f'  red gap {us(rst - den):.2f} dur {us(ren - rst):.2f} (queued {us(rq - fe):+.2f})')
else: print()
live = [x for x in d if x[1]]
if not live: sys.exit()
t0 = min(x[1] for x in live)
print(f'clock: first warp start - dec start {us(t0 - dst):+.2f}; last warp end - dec end {us(max(x[5] for x in live) - den):+.2f}')
print('warp start   (from first)', q([x[1] - t0 for x in live]))
print('first S      (from start)', q([x[2] - x[1] for x in live if x[2]]))
print('loop end     (from first)', q([x[3] - t0 for x in live]))
print('warp merge   (step 6)    ', q([x[4] - x[3] for x in live]))
print('write/merge  (step 7)    ', q([x[5] - x[4] for x in live]))
print('epilogue     (end-loop)  ', q([x[5] - x[3] for x in live]))
print('warp end     (from first)', q([x[5] - t0 for x in live]))
lastw = max(live, key=lambda x: x[5]); print('last warp: start %.2f loop end %.2f step6 %.2f end %.2f' % tuple(us(v - t0) for v in lastw[1:2] + lastw[3:6]))
wg = collections.defaultdict(list)
W = int(grid.split()[5])
for i, x in enumerate(d):
    if x[1]: wg[i // W].append(x)
spread = [max(y[3] for y in v) - min(y[3] for y in v) for v in wg.values()]
print('in-WG loop-end spread    ', q(spread))
sm = collections.Counter(x[0] for v in wg.values() for x in v[:1])
print('WGs per SM:', sorted(collections.Counter(sm.values()).items()), 'SMs used', len(sm))
if r and rst:
    rl = [x for x in r if x[1]]
    r0 = min(x[1] for x in rl)
    print(f'reduce: first WG start - red start {us(r0 - rst):+.2f}; first start - last decode warp end {us(r0 - max(x[5] for x in live)):+.2f}')
    print('reduce WG start (from first)', q([x[1] - r0 for x in rl]))
    print('reduce WG dur              ', q([x[2] - x[1] for x in rl]))
