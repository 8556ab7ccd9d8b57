/*
 * tuning.c — the per-device tuning table: what decode and prefill pick
 * when their params leave a choice open. Looked up once per context, as
 * CLBlast does: the device's name, else its vendor, else its type, else
 * the defaults. Entries come from `clpa-bench prefill --tune` and
 * `clpa-bench decode --tune` on the device (they print the values to
 * enter here), and say when and how they were measured.
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
    /* PoCL 3.1 on 2 AVX-512 cores, 2026-11-23 (notes/perf.md): `clpa-bench decode --tune`
     * (16 x 4096, 32/8 heads, f16, rows path): partition 128/256/512/1024/2048/4096 =
     * 31.9/21.0/15.9/15.3/15.4/15.5 ms (1024-4096 within noise; lanes at 1024: 63.1 ms);
     * `clpa-bench prefill --batch 1 --new-tokens 1024 --heads 8 --kv-heads 2 --tune` (rows
     * path with 4 blocks a step): rows 1/2/4/8/16 per work-item = 0.096/0.105/0.164/0.164/0.075
     * TFLOP/s (tiles 0.030-0.041). PoCL 3.1 on 2 AVX2 cores (AMD EPYC), 2026-11-25, after the
     * rows kernel's register-sized key steps: 128/256/512/1024/2048/4096 = 60.2/48.3/34.4/23.9/
     * 25.3/33.6 ms (1024 and 2048 within this machine's noise, so 2048 stays). */
    {BY_TYPE_CPU, NULL, {"", 2048, CLPA_PREFILL_ROWS, 4, 16, 0, {0}}},
    /* NVIDIA (H100, notes/perf.md): prefill on tensor cores where it applies (f16/bf16 caches,
     * else the tiles heuristic), 128 rows and 32-key tiles (2026-11-24, registers capped at 128;
     * 32/8 heads, head 128, f16, TFLOP/s for rows 64 / 128 with 32 keys, then 64 / 128 with 64
     * keys): 8 x 2048 157.3/163.5, 140.9/152.3; 1 x 8192 196.5/214.1, 177.5/197.7; 8 x 2048 over
     * 6144 cached 207.1/227.5, 185.1/213.9 (tiles, 64 x 64: 23.1; 27.4, then 31.3 on
     * 2026-11-25). Decode on tensor cores (f16/bf16) plans its own partitions; this one is the
     * lanes path's (f32, fp8):
     * `clpa-bench decode --batch 16 --context 4096 --path lanes --tune` (2026-11-24, cold):
     * partition 128/256/512/1024/2048/4096 = 214.2/149.7/137.0/129.2/229.1/335.9 us. Since
     * the lanes kernel merges its own partitions (2026-11-27, f32, `--tune`, us for
     * 512/1024/2048): 64 x 2048 386.8/376.9/368.9, 8 x 32768 761.2/739.8/731.2, 16 x 4096
     * 200.5/195.2/253.7: 2048, halved where the grid is thin, its waves ragged or its logits
     * too many for local memory, 4 work-groups a compute unit (f32 with up to 4 heads a
     * work-group, at 128 registers; f16 and fp8 take 3, where 4 gives the same plans at batch
     * 16 x 4096) — lib/decode_plan.c lanes_partition. */
    {BY_VENDOR, "NVIDIA", {"", 2048, CLPA_PREFILL_MMA, 128, 32, 4, {0}}},
    /* GPUs without an entry of their own: 512-token partitions (H100, 2026-11-22: 256/512/1024
     * within 8 % of each other at batch 16 x 4096) and the largest prefill tiles that fit. */
    {BY_TYPE_GPU, NULL, {"", 512, CLPA_PREFILL_TILES, 0, 0, 0, {0}}},
    {BY_DEFAULT, NULL, {"", 512, CLPA_PREFILL_AUTO, 0, 0, 0, {0}}},
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
