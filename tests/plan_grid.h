/*
 * plan_grid.h — the grid of decode shapes, devices and forced fields whose
 * plans tests/data/decode_plans.txt records, one line a case:
 *
 *   DEVICE SEQS HEADS/KV HEAD_SIZE DTYPE BLOCK MAX_CTX LENGTHS FORCED : PLAN
 *
 * PLAN is "PATH vV part=P g=G sg=S parts=N thr=T kv=K ls=L chunk=C pipe=I nreg=R", then
 * " list=E" where the device makes a list of E entries, or "STATUS message" where the plan
 * refuses the shape. Every case is
 * valid for clpa_decode_validate (the grid is built so), so what it
 * records is the plan alone. Header-only: tests/test_host_planner.c walks
 * it (its --record writes the data file; tests/plan_record.c at a8c4edf
 * first wrote it from lib/'s plan).
 */
#ifndef CLPA_TESTS_PLAN_GRID_H
#define CLPA_TESTS_PLAN_GRID_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clpa_base.h"

/* A device as the planner sees it: what clpa_device_info says, the lanes
 * the context settles on, and its tuning row's decode partition and
 * residency, and its work list's rule (lib/tuning.c). */
typedef struct grid_device {
  const char *name;
  const char *vendor;
  int is_cpu, is_gpu;
  unsigned compute_units;
  uint64_t local_mem_bytes;
  size_t max_work_group_size;
  unsigned native_float_width;
  int lanes;               /* 0 emulated, 1 subgroup, 2 nv_ptx */
  int subgroup_size;       /* subgroup lanes (subgroup path) */
  int cc;                  /* NVIDIA compute capability, 10 * major + minor */
  int partition, resident; /* the tuning row's */
  int work_list, list_partition; /* the tuning row's mma_work_list and mma_list_partition */
  int device_list;         /* the tuning row's mma_device_list */
} grid_device;

/* PoCL as CI runs it (2 units here), a wider AVX2 CPU, the H200 through
 * NVIDIA's OpenCL (132 units, 48 KiB), an A100 (no fp8 conversion), a T4
 * (no mma.sync m16n8k16), a GPU with 64-lane subgroups and one without. */
static const grid_device grid_devices[] = {
    {"pocl2", "AuthenticAMD", 1, 0, 2, 512 << 10, 4096, 16, 0, 0, 0, 2048, 0, 0, 0, 0},
    {"cpu16", "GenuineIntel", 1, 0, 16, 256 << 10, 4096, 8, 0, 0, 0, 2048, 0, 0, 0, 0},
    {"h200", "NVIDIA Corporation", 0, 1, 132, 48 << 10, 1024, 1, 2, 0, 90, 2048, 4, 2, 1024, 256},
    {"a100", "NVIDIA Corporation", 0, 1, 108, 48 << 10, 1024, 1, 2, 0, 80, 2048, 4, 2, 1024, 256},
    {"t4", "NVIDIA Corporation", 0, 1, 40, 48 << 10, 1024, 1, 2, 0, 75, 2048, 4, 2, 1024, 256},
    {"gpu_sg", "Advanced Micro Devices, Inc.", 0, 1, 104, 64 << 10, 256, 4, 1, 64, 0, 512, 0, 0, 0, 0},
    {"gpu_emu", "Some Vendor", 0, 1, 24, 32 << 10, 256, 4, 0, 0, 0, 512, 0, 0, 0, 0},
};
#define GRID_DEVICES ((int)(sizeof grid_devices / sizeof *grid_devices))

enum { GRID_LENS_NONE, GRID_LENS_UNIFORM, GRID_LENS_SKEW, GRID_LENS_RANDOM };
static const char *const grid_lens_names[] = {"none", "uniform", "skew", "random"};

/* One case: the shape, its host lengths (NULL: none) and the forced
 * fields (clpa_decode_params' values: path, variant, precision). */
typedef struct grid_case {
  int grid; /* 0, 1, 2: which of the grids below */
  const grid_device *dev;
  int num_seqs, num_heads, num_kv_heads, head_size, block_size, max_context_len;
  clpa_dtype dtype;
  int lens;
  const int32_t *host_lens;
  const char *forced; /* "-" or a comma list of the forced fields */
  int path, variant, precision, partition_size, heads_per_group;
} grid_case;

/* The forced fields' sets, as the key writes them. */
static const char *const grid_forced[] = {
    "-",          "lanes",          "mma",     "rows",        "v1",      "v2", "p256", "g2",
    "mma,v2,p64", "lanes,g1,p1024", "f32prec", "mma,f32prec", "rows,v1",
};
#define GRID_FORCED ((int)(sizeof grid_forced / sizeof *grid_forced))

static void grid_parse_forced(grid_case *c) {
  const char *f = c->forced;
  c->path = c->variant = c->precision = c->partition_size = c->heads_per_group = 0;
  if (strstr(f, "lanes")) c->path = 1;
  if (strstr(f, "mma")) c->path = 2;
  if (strstr(f, "rows")) c->path = 3;
  if (strstr(f, "v1")) c->variant = 1;
  if (strstr(f, "v2")) c->variant = 2;
  if (strstr(f, "f32prec")) c->precision = 1;
  const char *q = strchr(f, 'p');
  while (q && !(q[1] >= '0' && q[1] <= '9')) q = strchr(q + 1, 'p');
  if (q) c->partition_size = atoi(q + 1);
  const char *g = strchr(f, 'g');
  if (g && g[1] >= '0' && g[1] <= '9') c->heads_per_group = atoi(g + 1);
}

/* The host lengths of a case: uniform (all at max), skew (one at max, the
 * rest at 100 or max / 2 where max is shorter), random (uniform in [0,
 * max], splitmix64 seeded from the shape so both sides draw the same). */
static void grid_fill_lens(const grid_case *c, int32_t *out) {
  const int max = c->max_context_len;
  uint64_t s = (uint64_t)c->num_seqs * 1000003u + (uint64_t)max;
  for (int i = 0; i < c->num_seqs; i++) {
    switch (c->lens) {
      case GRID_LENS_UNIFORM:
        out[i] = max;
        break;
      case GRID_LENS_SKEW:
        out[i] = i == 0 ? max : max < 100 ? max / 2 : 100;
        break;
      default: {
        uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        out[i] = (int32_t)(z % ((uint64_t)max + 1));
      }
    }
  }
}

static const char *grid_dtype_name(clpa_dtype d) {
  switch (d) {
    case CLPA_DTYPE_F32:
      return "f32";
    case CLPA_DTYPE_F16:
      return "f16";
    case CLPA_DTYPE_BF16:
      return "bf16";
    case CLPA_DTYPE_FP8_E4M3:
      return "fp8";
    default:
      return "?";
  }
}

static void grid_key(const grid_case *c, char *buf, size_t n) {
  snprintf(buf, n, "%s %d %d/%d %d %s %d %d %s %s", c->dev->name, c->num_seqs, c->num_heads,
           c->num_kv_heads, c->head_size, grid_dtype_name(c->dtype), c->block_size,
           c->max_context_len, grid_lens_names[c->lens], c->forced);
}

/* What a plan says, as the data file writes it. */
typedef struct grid_plan {
  int path; /* 1 lanes, 2 mma, 3 rows */
  int v2, partition, heads_per_group, sg, max_parts, threads, key_vectors, logits_stride;
  int chunk, pipe, maxnreg;
  int list_entries; /* the device's list (0: none) */
} grid_plan;

static void grid_plan_text(clpa_status st, const char *msg, const grid_plan *p, char *buf,
                           size_t n) {
  static const char *const paths[] = {"?", "lanes", "mma", "rows"};
  if (st != CLPA_OK) {
    const char *why = strstr(msg, ": "); /* past "function: " */
    if (snprintf(buf, n, "%s %s", clpa_status_name(st), why ? why + 2 : msg) >= (int)n && n > 1)
      buf[n - 2] = '~'; /* cut: marked */
    return;
  }
  const int at = snprintf(buf, n, "%s v%d part=%d g=%d sg=%d parts=%d thr=%d kv=%d ls=%d chunk=%d"
                          " pipe=%d nreg=%d", paths[p->path & 3], p->v2 ? 2 : 1, p->partition,
                          p->heads_per_group, p->sg, p->max_parts, p->threads, p->key_vectors,
                          p->logits_stride, p->chunk, p->pipe, p->maxnreg);
  if (p->list_entries && at > 0 && (size_t)at < n)
    snprintf(buf + at, n - (size_t)at, " list=%d", p->list_entries);
}

/* 64-bit FNV-1a over the lines of a grid. */
static uint64_t grid_hash(uint64_t h, const char *s) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
  return h;
}
#define GRID_HASH_START 0xcbf29ce484222325ULL

/* Calls fn on every case of the three grids, in order:
 * 0: every device x num_seqs {1,3,16,64,128,257} x heads {32/8, 64/8,
 *    32/32, 8/1, 28/4} x head sizes {64,128,256,96} x f32/f16/bf16/fp8 x
 *    max_context_len {1,15,16,100,512,4096,32768,2^30} x lengths {none,
 *    uniform, skew, random}, block 16, nothing forced;
 * 1: every device and forced set over a smaller grid (1, 16, 257
 *    sequences; 32/8, 8/1, 28/4; head 64, 128; the four dtypes; 15, 512,
 *    4096, 2^30 tokens; no lengths or skewed ones), where the forced heads
 *    per group divide the KV head's queries;
 * 2: blocks of 8 and 32: 3 and 64 sequences, 32/8, head 128 and 96, the
 *    dtypes and lengths of grid 0 (none or random), nothing, mma, v2 or a
 *    256-token partition forced.
 * fn returns nonzero to stop. The case's host_lens point into a buffer
 * that lives until fn returns. */
typedef int (*grid_fn)(const grid_case *c, void *arg);
static int grid_walk(grid_fn fn, void *arg) {
  static int32_t lens[257];
  static const int seqs0[] = {1, 3, 16, 64, 128, 257}, seqs1[] = {1, 16, 257}, seqs2[] = {3, 64};
  static const int heads0[][2] = {{32, 8}, {64, 8}, {32, 32}, {8, 1}, {28, 4}};
  static const int heads1[][2] = {{32, 8}, {8, 1}, {28, 4}};
  static const int hs0[] = {64, 128, 256, 96}, hs1[] = {64, 128}, hs2[] = {128, 96};
  static const clpa_dtype dts[] = {CLPA_DTYPE_F32, CLPA_DTYPE_F16, CLPA_DTYPE_BF16,
                                   CLPA_DTYPE_FP8_E4M3};
  static const int ctx0[] = {1, 15, 16, 100, 512, 4096, 32768, 1 << 30};
  static const int ctx1[] = {15, 512, 4096, 1 << 30};
  static const int lens1[] = {GRID_LENS_NONE, GRID_LENS_SKEW};
  static const int lens2[] = {GRID_LENS_NONE, GRID_LENS_RANDOM};
  static const int bs2[] = {8, 32};
  static const char *const forced2[] = {"-", "mma", "v2", "p256"};
#define N(a) (int)(sizeof(a) / sizeof *(a))
  for (int grid = 0; grid < 3; grid++) {
    const int *seqs = grid == 0 ? seqs0 : grid == 1 ? seqs1 : seqs2;
    const int nseqs = grid == 0 ? N(seqs0) : grid == 1 ? N(seqs1) : N(seqs2);
    const int(*heads)[2] = grid == 1 ? heads1 : grid == 0 ? heads0 : heads0; /* grid 2: 32/8 */
    const int nheads = grid == 0 ? N(heads0) : grid == 1 ? N(heads1) : 1;
    const int *hs = grid == 0 ? hs0 : grid == 1 ? hs1 : hs2;
    const int nhs = grid == 0 ? N(hs0) : grid == 1 ? N(hs1) : N(hs2);
    const int *ctx = grid == 1 ? ctx1 : ctx0;
    const int nctx = grid == 1 ? N(ctx1) : N(ctx0);
    const int nlens = grid == 0 ? 4 : 2;
    const int nbs = grid == 2 ? N(bs2) : 1;
    const int nforced = grid == 0 ? 1 : grid == 1 ? GRID_FORCED : N(forced2);
    for (int d = 0; d < GRID_DEVICES; d++)
      for (int b = 0; b < nbs; b++)
        for (int f = 0; f < nforced; f++)
          for (int s = 0; s < nseqs; s++)
            for (int h = 0; h < nheads; h++)
              for (int z = 0; z < nhs; z++)
                for (int t = 0; t < N(dts); t++)
                  for (int m = 0; m < nctx; m++)
                    for (int l = 0; l < nlens; l++) {
                      grid_case c;
                      memset(&c, 0, sizeof c);
                      c.grid = grid, c.dev = &grid_devices[d];
                      c.num_seqs = seqs[s], c.num_heads = heads[h][0];
                      c.num_kv_heads = heads[h][1], c.head_size = hs[z];
                      c.block_size = grid == 2 ? bs2[b] : 16, c.dtype = dts[t];
                      c.max_context_len = ctx[m];
                      c.lens = grid == 0 ? l : grid == 1 ? lens1[l] : lens2[l];
                      c.forced = grid == 2 ? forced2[f] : grid_forced[f];
                      grid_parse_forced(&c);
                      const int qpk = c.num_heads / c.num_kv_heads;
                      if (c.heads_per_group && qpk % c.heads_per_group) continue;
                      if (c.lens != GRID_LENS_NONE) {
                        grid_fill_lens(&c, lens);
                        c.host_lens = lens;
                      }
                      if (fn(&c, arg)) return 1;
                    }
  }
#undef N
  return 0;
}

#endif
