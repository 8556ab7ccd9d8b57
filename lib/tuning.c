/*
 * tuning.c — the per-device tuning table: what decode and prefill pick
 * when their params leave a choice open. Looked up once per context, as
 * CLBlast does: the device's name, else its vendor, else its type, else
 * the defaults. Entries come from `clpa-bench prefill --tune` (it prints
 * the values to enter here) and `clpa-bench decode --partition N` on the
 * device, and say when and how they were measured.
 */
#include <string.h>

#include "internal.h"

typedef enum { BY_DEVICE, BY_VENDOR, BY_TYPE_CPU, BY_TYPE_GPU, BY_DEFAULT } match_kind;

typedef struct tuning_entry {
  match_kind kind;
  const char *text; /* a case-sensitive substring of the name or vendor; NULL for the others */
  clpa_tuning t;    /* .matched is filled by the lookup */
} tuning_entry;

static const tuning_entry table[] = {
    /* PoCL 3.1 on 2 AVX-512 cores, 2026-11-23 (notes/perf.md): decode v2 batch
     * 4 x 4096, 32/8 heads, f16: partition 256/512/1024/2048 = 22.0/17.8/16.1/15.4 ms (lanes;
     * the rows decode path: 512/1024/2048/4096 = 21.7/19.4/17.4/17.7 ms at batch 16); prefill
     * 1 x 1024, 8/2 heads, head 128, rows path with 16-lane key vectors: rows 1/2/4/8/16 per
     * work-item = 0.066/0.076/0.108/0.105/0.043 TFLOP/s (tiles 0.019). */
    {BY_TYPE_CPU, NULL, {"", 2048, CLPA_PREFILL_ROWS, 4, 16}},
    /* NVIDIA (H100, 2026-11-23, notes/perf.md): prefill on tensor cores where it applies
     * (f16/bf16 caches, else the tiles heuristic), 32-key tiles: 8 x 2048, 32/8 heads, head 128,
     * f16: 108.5 TFLOP/s against 95.6 with 64 keys (tiles: 2.2). Decode partitions as the GPU
     * entry's. */
    {BY_VENDOR, "NVIDIA", {"", 512, CLPA_PREFILL_MMA, 64, 32}},
    /* GPUs without an entry of their own: 512-token partitions (H100, 2026-11-22: 256/512/1024
     * within 8 % of each other at batch 16 x 4096) and the largest prefill tiles that fit. */
    {BY_TYPE_GPU, NULL, {"", 512, CLPA_PREFILL_TILES, 0, 0}},
    {BY_DEFAULT, NULL, {"", 512, CLPA_PREFILL_AUTO, 0, 0}},
};

static int matches(const tuning_entry *e, const clpa_device_info *in) {
  switch (e->kind) {
    case BY_DEVICE: return strstr(in->name, e->text) != NULL;
    case BY_VENDOR: return strstr(in->vendor, e->text) != NULL;
    case BY_TYPE_CPU: return in->is_cpu;
    case BY_TYPE_GPU: return in->is_gpu;
    default: return 1;
  }
}

void clpa_tuning_lookup(const clpa_device_info *in, clpa_tuning *out) {
  static const char *const kinds[] = {"device", "vendor", "type", "type", "default"};
  for (match_kind k = BY_DEVICE; k <= BY_DEFAULT; k++)
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
      const tuning_entry *e = &table[i];
      if (e->kind != k || !matches(e, in)) continue;
      *out = e->t;
      const char *what = e->text ? e->text
                         : k == BY_TYPE_CPU ? "cpu"
                         : k == BY_TYPE_GPU ? "gpu"
                                            : "";
      snprintf(out->matched, sizeof out->matched, "%s%s%s", kinds[k], *what ? ":" : "", what);
      return;
    }
}

clpa_status clpa_context_tuning(const clpa_context *ctx, clpa_tuning *out) {
  CLPA_CHECK(NULL, !ctx || !out, CLPA_ERR_INVALID_ARG, "ctx and out must not be NULL");
  *out = ctx->tuning;
  return CLPA_OK;
}
