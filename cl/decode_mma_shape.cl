/*
 * decode_mma_shape.cl — decode_mma.cl's build options and the shapes they
 * imply: a chunk's tokens and m-tiles, a key row's k-steps, the n-tiles of
 * heads, the partitions' chunks and the output slices, each checked here
 * (the planner, host/decode_planner.c, only asks for shapes that pass).
 * The first of the decode_mma family's own parts (lib/kernels.c), then
 * decode_mma_chunk.cl, then decode_mma.cl.
 */
#ifndef CLPA_HEAD_SIZE
#error "CLPA_HEAD_SIZE: elements a head; required"
#endif
#ifndef CLPA_BLOCK_SIZE
#error "CLPA_BLOCK_SIZE: tokens a cache block; required"
#endif
#ifndef CLPA_NUM_THREADS
#error "CLPA_NUM_THREADS: work-items a work-group; required"
#endif
#ifndef CLPA_PARTITION_SIZE
#error "CLPA_PARTITION_SIZE: 0 for v1, else tokens a partition (a multiple of BLOCK_SIZE); required"
#endif
#ifndef CLPA_HEADS_PER_WG
#error "CLPA_HEADS_PER_WG: query heads of one KV head a work-group serves; required"
#endif
#ifndef CLPA_CHUNK
#error "CLPA_CHUNK: tokens a warp takes at a time (16, or 32 for fp8); required"
#endif
#ifndef CLPA_PIPE
#error "CLPA_PIPE: 1 where a warp loads its next chunk while it computes one; required"
#endif
#ifndef CLPA_DEVICE_LIST
#error "CLPA_DEVICE_LIST: 1 where the work list is the one clpa_decode_mma_list makes; required"
#endif
#define HEAD_SIZE CLPA_HEAD_SIZE
#define BLOCK_SIZE CLPA_BLOCK_SIZE
#define NUM_THREADS CLPA_NUM_THREADS
#define PARTITION_SIZE CLPA_PARTITION_SIZE
#define G CLPA_HEADS_PER_WG
#define WARPS (NUM_THREADS / 32)
/* A chunk's tokens (CLPA_CHUNK: 16, or 32 for fp8 where lib/decode_plan.c's
 * mma_chunk_for says): MSUB m-tiles of S^T, 16 tokens each, and MSUB
 * k-steps of O^T's product. A lane's value tokens are RUN = 4 MSUB
 * consecutive ones (one 8-byte row piece with fp8's two m-tiles, where
 * one gave 4 bytes), and the chunk's fixed work (the columns' max, the
 * output's rescale, the table reads, the handout) is shared by 32 tokens
 * instead of 16: fp8's chunks are half f16's bytes for the same fixed
 * work. It costs registers; f16 in chunks of 32 (16-byte row pieces) ran
 * slower (docs/decisions/0010-decode-mma-fp8-chunk.md). */
#define CHUNK CLPA_CHUNK /* tokens of a chunk */
#define MSUB (CHUNK / 16)
/* PIPE (lib/decode_plan.c mma_pipe): a warp issues its next chunk's loads as
 * soon as this chunk's have arrived and computes this one while they are
 * in flight; else it loads a chunk, waits and computes it, and other
 * warps' loads fill the wait. It takes a second chunk of registers, so 8
 * warps a compute unit instead of 12
 * (docs/decisions/0011-decode-mma-pipe.md). */
#define PIPE CLPA_PIPE
#define RUN (4 * MSUB)    /* a lane's consecutive value tokens (and key tokens' span) */
/* A lane's 16-byte key row holds X dimensions (8 of f16/bf16, 16 of fp8,
 * 4 of f32) and serves KSPR k-steps (4 of its dimensions each, 2 of f32's:
 * m16n8k8's tf32 k-steps, mma.cl); KROWS rows a token. */
#if KV_BYTES == 4
#define KSPR 2
#else
#define KSPR (X / 4)
#endif
#define KDIMS (X / KSPR) /* a key row's dimensions a k-step */
#define KROWS (HEAD_SIZE / (4 * X))
#define MTILES (HEAD_SIZE / 16)    /* m-tiles of O^T */
/* S^T's products go to QK_ACCS independent sums (the k-steps in turn),
 * so that a chunk's chain of dependent mma is half as long (f32: 48 ->
 * 24; docs/decisions/0012-decode-mma-kernel.md). */
#define QK_ACCS 2
#define KSTEPS (KSPR * KROWS)
#define NH ((G + 7) / 8)           /* n-tiles of heads */

/* Chunks of a partition (v1: all of the row's). */
#if PARTITION_SIZE
#define PCH (PARTITION_SIZE / CHUNK)
#else
#define PCH (1 << 28)
#endif
/* Slices of local memory the warps' outputs go to (step 6): one a warp
 * where they fit in 32 KB, else the most that fit and divide the warps
 * (lib/decode_plan.c mma_slices; warps are 2, 3, 4, 6, 8 or 12). */
#define SLICE_ROOM (8192 / (G * HEAD_SIZE))
#define SLICE_OK(d) ((d) > 0 && WARPS % ((d) > 0 ? (d) : 1) == 0 && (d) <= SLICE_ROOM)
#define SLICES                                                                                    \
  (SLICE_OK(WARPS) ? WARPS : SLICE_OK(WARPS / 2) ? WARPS / 2 : SLICE_OK(WARPS / 3) ? WARPS / 3  \
   : SLICE_OK(WARPS / 4) ? WARPS / 4 : SLICE_OK(WARPS / 6) ? WARPS / 6 : 1)

/* TOKB: blocks of fewer tokens than a lane's run (1 or 2; HND and NHD,
 * f16, bf16 or fp8: a token's key and value are 16-byte rows; split-key
 * at 1 is HND's layout, which the host names so): each of a lane's key
 * tokens is looked up in the table on its own. */
#define TOKB (BLOCK_SIZE < RUN)
#if TOKB && (KV_SPLIT_KEY || KV_BYTES == 4)
#error "decode mma: blocks of 1 or 2 tokens in HND or NHD with f16, bf16 or fp8 caches"
#endif
#if HEAD_SIZE % (4 * X) || G > 16 || NUM_THREADS % 32 || PARTITION_SIZE % CHUNK || \
    (!TOKB && BLOCK_SIZE % RUN)
#error "decode mma: head size a multiple of 32 (fp8: 64, f32: 16), <= 16 heads, partitions of whole chunks"
#endif
#if !KV_SPLIT_KEY && KV_BYTES == 4 && HEAD_SIZE % 32
#error "decode mma: f32 caches in HND and NHD take head sizes of multiples of 32"
#endif
