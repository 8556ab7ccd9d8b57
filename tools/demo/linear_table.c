/*
 * linear_table.c — see linear.h: the table of engines per device and its rules, which engine
 * and which shape a call takes (host code alone: no kernel is built or launched here; linear.c
 * builds and runs them). Each rule's measurements are in docs/decisions/0029-demo-linear-table.md
 * and the records it names.
 */
#include <string.h>

#include "linear_internal.h"

/* The table, first match wins: device → vendor → type → default. One
 * sentence a row; the measurements that chose each (device, date,
 * command, figures) are in docs/decisions/0029-demo-linear-table.md. */
static const demo_linear_tuning table[] = {
    /* NVIDIA: gemv up to 32 rows (16 warps, up to 4 tiles of columns, 2 chunks in flight,
       32 rows a work-group: record 0037), the tiled GEMM from 33 (f16 activations by cp.async
       with f16 weights, else 64 k a stage; k split while the call has fewer work-groups than
       compute units; SwiGLU in its epilogue: record 0038), block forms the same, the GEMM on
       an f16 copy of the weight (record 0029); 16-bit weights in their tiled forms (record
       0036) */
    {"vendor:NVIDIA", 16, 32, 4, 4, 2, 1 << 30, 4, 2, 16, 33, 0, 64, 1, 32, 16, 2, 4, 1, 4, 1, 33, 0},
    /* CPUs (PoCL): one work-item a column group, vector sums; faster than CLBlast at every row
       count; 4 columns a group, row blocks of at most 8 rows so that their sums fit 32
       registers (record 0044) */
    {"type:cpu", 1 << 30, 1, 16, 4, 0, 0, 4, 2, 0, 0, 0, 32, 1, 0, 4, 2, 1, 0, 4, 0, 0, 32},
    {"default", 16, 16, 8, 4, 0, 0, 4, 2, 0, 0, 0, 32, 1, 0, 4, 2, 1, 0, 4, 0, 0, 0},
};

/* The device's vendor into vendor (n bytes), "" where the query fails (the table's
 * default row then). */
static void vendor_of(cl_device_id dev, char *vendor, size_t n) {
  memset(vendor, 0, n);
  if (clGetDeviceInfo(dev, CL_DEVICE_VENDOR, n - 1, vendor, NULL) != CL_SUCCESS) vendor[0] = '\0';
}

int demo_linear_is_nvidia(cl_device_id dev) {
  char vendor[256];
  vendor_of(dev, vendor, sizeof vendor);
  return strstr(vendor, "NVIDIA") != NULL;
}

const demo_linear_tuning *demo_linear_lookup(cl_device_id dev) {
  char vendor[256];
  cl_device_type type = 0;
  vendor_of(dev, vendor, sizeof vendor);
  if (clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL) != CL_SUCCESS) type = 0;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    const char *m = table[i].match, *name = strchr(m, ':');
    if ((strncmp(m, "vendor:", 7) == 0 && name && strstr(vendor, name + 1)) ||
        (strcmp(m, "type:cpu") == 0 && (type & CL_DEVICE_TYPE_CPU)) ||
        (strcmp(m, "type:gpu") == 0 && (type & CL_DEVICE_TYPE_GPU)) || strcmp(m, "default") == 0)
      return &table[i];
  }
  return &table[sizeof table / sizeof table[0] - 1];
}

const demo_linear_tuning *demo_linear_tuning_of(const demo_linear *l) { return &l->tune; }

const char *demo_linear_engine_name(demo_linear_engine e) {
  return e == DEMO_LINEAR_STREAM    ? "stream"
         : e == DEMO_LINEAR_CLBLAST ? "clblast"
         : e == DEMO_LINEAR_MMA     ? "mma"
         : e == DEMO_LINEAR_GEMM    ? "gemm"
         : e == DEMO_LINEAR_GEMV    ? "gemv"
                                    : "auto";
}

int demo_linear_mma_runs(int32_t k, demo_wfmt w) { return k % 32 == 0 && w != DEMO_W_F32; }

int demo_linear_gemm_runs(int32_t k, demo_wfmt w) { return k % 32 == 0 && w != DEMO_W_F32; }

demo_linear_engine demo_linear_pick(const demo_linear *l, int32_t rows, int32_t k, demo_wfmt w) {
  /* block forms skip mma (it takes them forced, unmeasured on a GPU) and take gemv and the GEMM
   * at the rows 16-bit weights do (record 0029, "Block forms past 16 rows") */
  const int tc16 = l->nvidia && demo_linear_gemm_runs(k, w); /* the 16-bit tensor-core kernels */
  if (l->tune.gemm_min_rows && rows >= l->tune.gemm_min_rows && tc16)
    return DEMO_LINEAR_GEMM;
  if (rows <= l->tune.gemv_max_rows && tc16) return DEMO_LINEAR_GEMV;
  if (rows >= l->tune.mma_min_rows && rows <= l->tune.mma_max_rows && l->nvidia &&
      demo_linear_mma_runs(k, w) && !demo_wfmt_is_block(w))
    return DEMO_LINEAR_MMA;
  return rows <= l->tune.stream_max_rows && k % 8 == 0 ? DEMO_LINEAR_STREAM : DEMO_LINEAR_CLBLAST;
}

/* linear_internal.h. One lane: blocks of up to stream_sums / nc rows, except Q4_K and Q5_K,
 * whose weights cost more to decode than their rows' A loads: up to 16 rows, nc lowered so that
 * the sums still fit (record 0044). */
int demo_linear_stream_block(const demo_linear_tuning *t, demo_wfmt w, int32_t rows,
                             int32_t *nc) {
  const int one = t->lanes == 1 && t->stream_sums;
  const int wide = one && (w == DEMO_W_Q4_K || w == DEMO_W_Q5_K);
  int best = 0;
  for (int b = 0; b < NBLOCKS; b++) {
    if (!one && row_blocks[b] == 8) continue; /* several lanes: 1, 4 and 16 rows, as measured */
    if (one && !wide && b > 0 && row_blocks[b] * t->nc > t->stream_sums) break;
    best = b;
    if (rows <= row_blocks[b]) break;
  }
  const int32_t fit = one ? t->stream_sums / row_blocks[best] : t->nc;
  *nc = fit < 1 ? 1 : fit < t->nc ? fit : t->nc;
  return best;
}

void demo_linear_stream_shape(const demo_linear_tuning *t, demo_wfmt w, int32_t rows,
                              int32_t *block, int32_t *nc) {
  *block = row_blocks[demo_linear_stream_block(t, w, rows, nc)];
}

int demo_linear_block_in(const int32_t *blocks, int count, int32_t rows) {
  for (int b = 0; b < count; b++)
    if (rows <= blocks[b]) return b;
  return count - 1;
}
/* linear.h; the aim (mma_fill) is the table's, docs/decisions/0029-demo-linear-table.md. */
int32_t demo_linear_mma_split(const demo_linear *l, int32_t rows, int32_t n, int32_t k) {
  const int b = demo_linear_block_in(mma_blocks, NMMA, rows);
  const int64_t rb = mma_blocks[b], cols = demo_linear_mma_cols(l);
  const int64_t warps = (((int64_t)n + cols - 1) / cols) * (((int64_t)rows + rb - 1) / rb) * l->tune.mwarps;
  const int64_t want = (int64_t)l->cus * l->tune.mma_fill;
  const int64_t least = 2 * demo_linear_mma_stage((int)rb / 8); /* chunks a split: two stages */
  int32_t s = 1;
  while (s < 64 && warps * s < want && k % (64 * s) == 0 && k / (64 * s) >= least) s *= 2;
  return s;
}

/* linear.h: the table's gemm_bm, else 128 rows a work-group past 64 rows
 * where that gives at least a work-group to two compute units
 * (docs/decisions/0029-demo-linear-table.md). */
int32_t demo_linear_gemm_rows(const demo_linear *l, int32_t rows, int32_t n) {
  if (l->tune.gemm_bm) return l->tune.gemm_bm;
  const int64_t groups = (((int64_t)rows + 127) / 128) * (((int64_t)n + 127) / 128);
  return rows > 64 && 2 * groups >= l->cus ? 128 : 64;
}

int32_t demo_linear_gemm_stage_k(const demo_linear *l, int32_t k, int half) {
  return !half && l->tune.gemm_bk == 64 && k % 64 == 0 ? 64 : 32;
}

/* linear.h; the aim (gemm_fill) is the table's, docs/decisions/0038-demo-gemm-split-k.md. */
int32_t demo_linear_gemm_split(const demo_linear *l, int32_t rows, int32_t n, int32_t k, int half) {
  const int64_t bm = demo_linear_gemm_rows(l, rows, n);
  const int64_t groups = (((int64_t)rows + bm - 1) / bm) * (((int64_t)n + 127) / 128);
  const int64_t want = (int64_t)l->cus * l->tune.gemm_fill;
  const int32_t stages = k / demo_linear_gemm_stage_k(l, k, half);
  int32_t s = 1;
  while (s < 16 && groups * s < want && stages % (2 * s) == 0 && stages / (2 * s) >= 8) s *= 2;
  return s;
}

/* The few-row kernel's warps for nt row tiles and ct column tiles: the
 * table's, fewer where their sums (nt ct 512 bytes a warp) would pass 32 KB. */
int32_t demo_linear_gemv_warps(const demo_linear *l, int32_t nt, int32_t ct) {
  int32_t kw = l->tune.gemv_warps;
  while (kw > 1 && kw * nt * ct > 64) kw /= 2;
  return kw;
}

/* gemv's row block for a call: the smallest that holds its rows, else the largest the
 * table's gemv_nt allows */
int demo_linear_gemv_block(const demo_linear *l, int32_t rows) {
  return demo_linear_block_in(gemv_blocks, l->tune.gemv_nt == 8 ? NGEMV : NGEMV - 1, rows);
}

/* linear.h; the aim (16 warps a compute unit) is docs/decisions/0029-demo-linear-table.md's. */
void demo_linear_gemv_shape(const demo_linear *l, int32_t rows, int32_t n, int32_t *ct, int32_t *kw) {
  const int32_t rb = gemv_blocks[demo_linear_gemv_block(l, rows)], nt = rb / 8;
  const int64_t blocks = ((int64_t)rows + rb - 1) / rb;
  int32_t c = l->tune.gemv_ct;
  while (c > 1 && blocks * (((int64_t)n + 16 * c - 1) / (16 * c)) * demo_linear_gemv_warps(l, nt, c) <
                      16 * (int64_t)l->cus)
    c /= 2;
  *ct = c, *kw = demo_linear_gemv_warps(l, nt, c);
}

/* Whether the tiled GEMM takes a call over ggml's blocks through an f16 copy of the weight. */
int demo_linear_gemm_dq(const demo_linear *l, int d, int32_t rows) {
  return demo_wfmt_is_block((demo_wfmt)d) && l->tune.gemm_dq_rows && rows >= l->tune.gemm_dq_rows;
}

int demo_linear_takes_swiglu_out(const demo_linear *l, demo_linear_engine e, int32_t rows,
                                 int32_t n, int32_t k, demo_wfmt w) {
  if (e == DEMO_LINEAR_AUTO) e = demo_linear_pick(l, rows, k, w);
  return (e == DEMO_LINEAR_GEMV || e == DEMO_LINEAR_GEMM) && demo_linear_gemm_runs(k, w) &&
         n % 16 == 0;
}

int demo_linear_takes_qkv_rope(const demo_linear *l, demo_linear_engine e, int32_t rows, int32_t k,
                               demo_wfmt w) {
  if (e == DEMO_LINEAR_AUTO) e = demo_linear_pick(l, rows, k, w);
  return e == DEMO_LINEAR_GEMV && demo_linear_gemm_runs(k, w);
}

int demo_linear_takes_f16(const demo_linear *l, demo_linear_engine e, int32_t rows, int32_t k,
                          demo_wfmt w) {
  if (e == DEMO_LINEAR_AUTO) e = demo_linear_pick(l, rows, k, w);
  /* gemv on ggml's blocks rounds f32 activations to f16 on the way in: f16 ones are the same
   * bits at half the bytes, which every work-group reads (record 0029, "f16 activations") */
  if (demo_wfmt_is_block(w))
    return k % 32 == 0 &&
           (e == DEMO_LINEAR_GEMV ||
            (e == DEMO_LINEAR_GEMM && l->tune.gemm_f16a && demo_linear_gemm_dq(l, (int)w, rows)));
  return demo_wfmt_untiled(w) == DEMO_W_F16 && k % 32 == 0 &&
         (e == DEMO_LINEAR_GEMV || (e == DEMO_LINEAR_GEMM && l->tune.gemm_f16a));
}
