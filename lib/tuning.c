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
  const char *text;     /* a case-sensitive substring of the name or vendor; NULL for others */
  clpa_tuning t;        /* .matched, .decode_partition and .decode_resident: the lookup's */
  clpa_decode_tuning d; /* decode's values and the device facts its planner counts with */
  clpa_prefill_tuning p; /* prefill's device facts */
} tuning_entry;

/* Decode's device facts as NVIDIA's Hopper GPUs gave them, the only devices measured (the
 * mma path runs natively on NVIDIA alone; elsewhere it runs emulated, for tests), so every
 * entry takes them until its device is measured:
 * - decode_mma.cl's warps a compute unit: 12, 8 for its f32 build
 *   (docs/decisions/0008-decode-mma-warps.md);
 * - its PIPE build's work-groups: 8 warps at most (docs/decisions/0011-decode-mma-pipe.md);
 * - without host lengths, no partition need be shorter than 512 tokens
 *   (docs/decisions/0013-decode-blind-partitions.md);
 * - the lanes kernel's f32 build with up to 4 heads a work-group: 128 registers, which only
 *   NVIDIA's build honours (docs/decisions/0004-decode-lanes-f32-register-cap.md).
 * The work list of busy partitions (mma_work_list) is each row's own: only NVIDIA's is measured
 * (CLPA_DECODE_WORK_LIST forces it anywhere). */
#define HOPPER_DECODE_FACTS                                                   \
  .mma_warps_per_cu = 12, .mma_f32_warps_per_cu = 8, .mma_pipe_warps = 8, \
  .blind_partition = 512, .lanes_f32_maxnreg = 128

static const tuning_entry table[] = {
    /* CPUs: 2048-token partitions, prefill on the rows path with 4 rows a work-item
     * (docs/decisions/0017-tuning-cpu.md); a mixed call's leading decode rows on decode's
     * kernel whatever their length (docs/decisions/0042-prefill-mixed-step-splits.md, "CPUs"). */
    {BY_TYPE_CPU, NULL, {.prefill_path = CLPA_PREFILL_ROWS, .prefill_rows = 4, .prefill_keys = 16},
     {.partition = 2048, .resident = 0, HOPPER_DECODE_FACTS},
     {.decode_rows_alone = 1, .decode_rows_from_keys = 1}},
    /* NVIDIA: prefill on tensor cores where it applies (f16/bf16 caches, else the tiles
     * heuristic) with 128 rows and 32-key tiles (docs/decisions/0020-prefill-mma-tile.md);
     * the lanes path's partitions from 2048, 4 of its work-groups a compute unit
     * (docs/decisions/0003-decode-lanes-partition.md). Decode on tensor cores plans its own;
     * from host lengths it lists the busy partitions where at most 1 in 2 of the grid's
     * work-groups would be busy, in partitions of 1024 tokens at most; without host lengths
     * (more than one sequence) the device makes a list, in partitions of 256 tokens at least
     * (docs/decisions/0013-decode-blind-partitions.md). Prefill's mma path takes 32 rows a
     * warp where a call's work-groups walk 16 key tiles or more on average
     * (docs/decisions/0041-prefill-mma-warp-rows.md), in kernels that declare up to 96 KiB of
     * local memory (more than the device reports: built and ran), and with heads of 128 in
     * f16 or bf16 tiles of 64 keys where they walk 16 such tiles or more on average
     * (docs/decisions/0046-prefill-mma-local-and-keys.md). A mixed call's leading decode rows run
     * on decode's kernel where one walks more than 512 keys or they are the call's only rows,
     * else 64 rows a work-group where decode rows lead, and long ones split into parts of a
     * fair share of 4 work-groups a compute unit, 512 keys at least
     * (docs/decisions/0042-prefill-mixed-step-splits.md). */
    {BY_VENDOR, "NVIDIA",
     {.prefill_path = CLPA_PREFILL_MMA, .prefill_rows = 128, .prefill_keys = 32},
     {.partition = 2048, .resident = 4, HOPPER_DECODE_FACTS, .mma_work_list = 2,
      .mma_list_partition = 1024, .mma_device_list = 256},
     {.mma_warp_rows_from = 16, .mma_local_bytes = 96 * 1024, .mma_keys64_from = 16,
      .split_groups_per_cu = 4, .split_min_keys = 512, .decode_rows_alone = 1,
      .decode_rows_from_keys = 512, .mixed_rows = 64}},
    /* GPUs without an entry of their own: 512-token partitions and the largest prefill
     * tiles that fit, a default no such GPU measured
     * (docs/decisions/0018-tuning-gpu-default.md). */
    {BY_TYPE_GPU, NULL, {.prefill_path = CLPA_PREFILL_TILES},
     {.partition = 512, HOPPER_DECODE_FACTS}, {0}},
    /* Anything else: vLLM's 512-token partitions and prefill's own choice
     * (docs/decisions/0018-tuning-gpu-default.md). */
    {BY_DEFAULT, NULL, {.prefill_path = CLPA_PREFILL_AUTO},
     {.partition = 512, HOPPER_DECODE_FACTS}, {0}},
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

void clpa_tuning_lookup(const clpa_device_info *in, clpa_tuning *out, clpa_decode_tuning *decode,
                        clpa_prefill_tuning *prefill) {
  static const char *const kinds[] = {"device", "vendor", "type", "type", "default"};
  for (match_kind k = BY_DEVICE; k <= BY_DEFAULT; k++)
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
      const tuning_entry *e = &table[i];
      if (e->kind != k || !matches(e, in)) continue;
      *out = e->t;
      *decode = e->d;
      *prefill = e->p;
      out->decode_partition = e->d.partition, out->decode_resident = e->d.resident;
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
