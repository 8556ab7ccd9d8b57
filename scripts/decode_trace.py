#!/usr/bin/env python3
"""decode_trace.py DIR — instruments a copy of the tree (DIR, never the
checkout itself) with a timeline of the tensor-core decode on NVIDIA: every
warp of cl/decode_mma.cl records %globaltimer (ns, the clock the profiling
events use) at its start, after its first chunk's S^T, at the end of its
chunk loop, after the warps' merge (step 6) and at its end, with its SM
(%smid); the reduce kernel, where a call has one, records each
work-group's start and end. The records go to an enlarged fault buffer;
with CLPA_TRACE=FILE, clpa_decode waits for each call and writes them to
FILE (the last call wins) with the kernels' profiling times, and
clpa-bench's cold mode appends every flush's end to FILE.ev. Then
scripts/decode_trace_report.py FILE says where the time went. Timing only
(the extra work shifts figures by ~1 %); elsewhere than NVIDIA the timer
reads constants. On the GPU machine (scripts/gpu.sh's set-up first):

  cp -r . /tmp/t && python3 scripts/decode_trace.py /tmp/t
  (cd /tmp/t && meson setup b --buildtype=release -Dtests=disabled && ninja -C b)
  CLPA_TRACE=/tmp/tr.txt /tmp/t/b/tools/clpa-bench decode --cold --batch 16 --context 4096
  python3 scripts/decode_trace_report.py /tmp/tr.txt S2

It patches by anchors in the sources (sys.exit names the one it misses)."""
import sys, os
d = sys.argv[1]
def sub(path, old, new, count=1):
    p = os.path.join(d, path); s = open(p).read()
    if old not in s: sys.exit(f"anchor not found in {path}: {old[:60]!r}")
    s = s.replace(old, new, count); open(p, 'w').write(s)

TIMER = r'''
#if CLPA_LANES == 3
inline ulong tr_now(void) { ulong t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
inline ulong tr_after(float x) { ulong t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) : "f"(x)); return t; }
inline uint tr_sm(void) { uint s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }
#else
inline ulong tr_now(void) { return 1; }
inline ulong tr_after(float x) { return x == 12345.0f ? 3 : 2; }
inline uint tr_sm(void) { return 7; }
#endif
#define TR_BASE(f) ((__global ulong *)((__global int *)(f) + 16))
#define TR_RECS 80000
#define TR_REC \
  if (lane == 0) { \
    const ulong tr3 = tr_now(); \
    const uint rec = ((part * get_num_groups(1) + seq) * get_num_groups(0) + get_group_id(0)) * WARPS + warp; \
    __global ulong *tr = TR_BASE(faults) + 6 * (size_t)rec; \
    if (rec < TR_RECS) { tr[0] = tr_sm(); tr[1] = tr0; tr[2] = tr1; tr[3] = tr2; tr[4] = tr25; tr[5] = tr3; } \
  }
'''
sub('cl/decode_mma.cl', '__kernel __attribute__((reqd_work_group_size(NUM_THREADS, 1, 1))) void clpa_decode_mma(',
    TIMER + '__kernel __attribute__((reqd_work_group_size(NUM_THREADS, 1, 1))) void clpa_decode_mma(')
sub('cl/decode_mma.cl', 'const int lid = get_local_id(0), lane = lid % 32, warp = lid / 32, g = lane / 4, t = lane % 4;\n',
    'const int lid = get_local_id(0), lane = lid % 32, warp = lid / 32, g = lane / 4, t = lane % 4;\n  const ulong tr0 = tr_now(); ulong tr1 = 0;\n')
sub('cl/decode_mma.cl', '    /* ---- 5. O^T = O^T alpha', '    if (!tr1) tr1 = tr_after(sc[0][0].x); /* the first chunk (the NVIDIA loop has no counter) */\n    /* ---- 5. O^T = O^T alpha')
sub('cl/decode_mma.cl', '  /* ---- 6. merge the warps', '  const ulong tr2 = tr_after(o[MTILES - 1][NH - 1].w);\n  /* ---- 6. merge the warps')
sub('cl/decode_mma.cl', '  /* ---- 7. write the output', '  const ulong tr25 = tr_now();\n  /* ---- 7. write the output')
p = os.path.join(d, 'cl/decode_mma.cl'); s = open(p).read().rstrip()
assert s.endswith('}')  # every work-group ends there: the kernel has no return past step 6
s = s[:-1] + '  TR_REC\n}\n'
open(p, 'w').write(s)

# reduce: needs the fault buffer: it has none, so pass it as an extra argument
sub('cl/reduce.cl', '__kernel __attribute__', TIMER + '__kernel __attribute__')
sub('cl/reduce.cl', '    __global const float *sinks) {',
    '    __global const float *sinks, __global volatile int *faults) {\n  const ulong r0 = tr_now();')
p = os.path.join(d, 'cl/reduce.cl'); s = open(p).read().rstrip()
s = s[:-1] + r'''  {
    const size_t w = (size_t)seq * num_heads + head;
    __global ulong *tr = TR_BASE(faults) + 6 * (size_t)TR_RECS + 3 * w;
    if (w < 20000) { tr[0] = tr_sm(); tr[1] = r0; tr[2] = tr_now(); }
  }
}
'''
open(p, 'w').write(s)

sub('lib/buffers.c', '''    cl_int zero = 0, err;
    ctx->faults = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero,
                                 &zero, &err);''', '''    cl_int err;
    static char zeros[4 << 20];
    ctx->faults = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zeros,
                                 zeros, &err);''')

sub('lib/decode.c', '''                           CLPA_ARG(mp),             CLPA_ARG(p->sinks)};''', '''                           CLPA_ARG(mp),             CLPA_ARG(p->sinks), CLPA_ARG(trf)};''')
sub('lib/decode.c', '''  const cl_int maxc = p->max_context_len, nh = p->num_heads, mp = c->max_parts;
  const clpa_arg args[] = {CLPA_ARG(p->out),''', '''  const cl_int maxc = p->max_context_len, nh = p->num_heads, mp = c->max_parts;
  cl_mem trf;
  clpa_faults_buffer(ctx, &trf);
  const clpa_arg args[] = {CLPA_ARG(p->out),''')
sub('lib/decode.c', '''  if ((st = launch_decode(ctx, p, c, tmp_out, max_logits, exp_sums, NULL)) != CLPA_OK) {''',
    '''  if ((st = launch_decode(ctx, p, c, tmp_out, max_logits, exp_sums, &tr_dec_ev)) != CLPA_OK) {''')
sub('lib/decode.c', '''static clpa_status decode_v2(''', '''static cl_event tr_dec_ev;
static void tr_times(FILE *f, cl_event e) {
  cl_ulong v[4] = {0};
  const cl_profiling_info w[4] = {CL_PROFILING_COMMAND_QUEUED, CL_PROFILING_COMMAND_SUBMIT,
                                  CL_PROFILING_COMMAND_START, CL_PROFILING_COMMAND_END};
  for (int i = 0; e && i < 4; i++) clGetEventProfilingInfo(e, w[i], sizeof v[i], &v[i], NULL);
  fprintf(f, " %llu %llu %llu %llu", (unsigned long long)v[0], (unsigned long long)v[1],
          (unsigned long long)v[2], (unsigned long long)v[3]);
}
static void tr_dump(clpa_context *ctx, const clpa_decode_params *p, const decode_call *c) {
  const char *path = getenv("CLPA_TRACE");
  if (!path) return;
  clFinish(ctx->queue);
  static cl_ulong buf[(4 << 20) / 8];
  cl_mem f;
  clpa_faults_buffer(ctx, &f);
  clEnqueueReadBuffer(ctx->queue, f, CL_TRUE, 0, sizeof buf, buf, 0, NULL, NULL);
  FILE *o = fopen(path, "w");
  if (!o) return;
  fprintf(o, "grid %d %d %d warps %d v2 %d part %d\\nev", p->num_heads / c->heads_per_group,
          p->num_seqs, c->max_parts, c->threads / 32, c->v2, c->partition);
  tr_times(o, tr_dec_ev ? tr_dec_ev : (p->event ? *p->event : NULL));
  tr_times(o, tr_dec_ev && p->event ? *p->event : NULL);
  fprintf(o, "\\n");
  const size_t recs = (size_t)(p->num_heads / c->heads_per_group) * p->num_seqs * c->max_parts * (c->threads / 32);
  for (size_t r = 0; r < recs && r < 80000; r++)
    fprintf(o, "d %llu %llu %llu %llu %llu %llu\\n", (unsigned long long)buf[8 + 6 * r], (unsigned long long)buf[8 + 6 * r + 1],
            (unsigned long long)buf[8 + 6 * r + 2], (unsigned long long)buf[8 + 6 * r + 3], (unsigned long long)buf[8 + 6 * r + 4], (unsigned long long)buf[8 + 6 * r + 5]);
  for (size_t w = 0; tr_dec_ev && w < (size_t)p->num_seqs * p->num_heads && w < 20000; w++) {
    const cl_ulong *r = buf + 8 + 6 * 80000 + 3 * w;
    fprintf(o, "r %llu %llu %llu\\n", (unsigned long long)r[0], (unsigned long long)r[1], (unsigned long long)r[2]);
  }
  fclose(o);
  if (tr_dec_ev) clReleaseEvent(tr_dec_ev), tr_dec_ev = NULL;
}

static clpa_status decode_v2(''')
sub('lib/decode.c', '''  if (!c.v2) return launch_decode(ctx, p, &c, NULL, NULL, NULL, p->event);
  return decode_v2(ctx, p, &c);''', '''  if (!c.v2) st = launch_decode(ctx, p, &c, NULL, NULL, NULL, p->event);
  else st = decode_v2(ctx, p, &c);
  if (st == CLPA_OK) tr_dump(ctx, p, &c);
  return st;''')
sub('lib/decode.c', '#include <string.h>', '#include <string.h>\n#include <stdlib.h>')
sub('tools/bench_common.c', '''  *seconds = end_call > end_flush ? 1e-9 * (double)(end_call - end_flush) : 0;''', '''  *seconds = end_call > end_flush ? 1e-9 * (double)(end_call - end_flush) : 0;
  if (getenv("CLPA_TRACE")) {
    char path[512];
    snprintf(path, sizeof path, "%s.ev", getenv("CLPA_TRACE"));
    FILE *o = fopen(path, "a");
    if (o) fprintf(o, "%llu %llu\\n", (unsigned long long)end_flush, (unsigned long long)end_call), fclose(o);
  }''')
print("instrumented", d)
