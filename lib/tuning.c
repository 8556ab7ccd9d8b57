/*
 * tuning.c — the per-device tuning table: what decode and prefill pick
 * when their params leave a choice open. Looked up once per context, as
 * CLBlast does: the device's name, else its vendor, else its type, else
 * the defaults. Entries come from `clpa-bench prefill --tune` and
 * `clpa-bench decode --tune` on the device (they print the values to
 * enter here); each names the decision record (docs/decisions/) that
 * says when, where and how it was measured.
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
    /* CPUs: 2048-token partitions, prefill on the rows path with 4 rows a work-item
     * (docs/decisions/0017-tuning-cpu.md). */
    {BY_TYPE_CPU, NULL, {"", 2048, CLPA_PREFILL_ROWS, 4, 16, 0, {0}}},
    /* NVIDIA: prefill on tensor cores where it applies (f16/bf16 caches, else the tiles
     * heuristic) with 128 rows and 32-key tiles (docs/decisions/0020-prefill-mma-tile.md);
     * the lanes path's partitions from 2048, 4 of its work-groups a compute unit
     * (docs/decisions/0003-decode-lanes-partition.md). Decode on tensor cores plans its own. */
    {BY_VENDOR, "NVIDIA", {"", 2048, CLPA_PREFILL_MMA, 128, 32, 4, {0}}},
    /* GPUs without an entry of their own: 512-token partitions and the largest prefill
     * tiles that fit, a default no such GPU measured (docs/decisions/0018-tuning-gpu-default.md). */
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
