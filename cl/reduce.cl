/*
 * reduce.cl — merges decode v2's partitions by their softmax states
 * (common.cl's softmax_merge, the online-softmax identity):
 *
 *   state = merge over partitions p of (max_logits[p], exp_sums[p]), and
 *           the sink as one more logit when there is one
 *   out   = sum_p softmax_weight(p, state) * tmp_out[p],  lse = softmax_lse(state)
 *
 * clpa_decode_reduce is vLLM's paged_attention_v2_reduce_kernel, for the
 * rows path (decode_rows.cl: a work-group of one work-item, on CPUs); the
 * work-group kernels merge their partitions themselves (kv.cl's
 * decode_merge_parts). Checked through tests/test_decode.c.
 *
 * Grid:  (num_heads * NUM_THREADS, num_seqs); one work-group per (seq, head).
 * Buffers:
 *   tmp_out    [num_seqs, num_heads, max_parts, HEAD_SIZE]  float, normalised per partition
 *   max_logits [num_seqs, num_heads, max_parts]             float
 *   exp_sums   [num_seqs, num_heads, max_parts]             float
 *   out        [num_seqs, num_heads, HEAD_SIZE]             io_t
 *   lse        [num_seqs, num_heads] or NULL                float
 *   weights    local, max_parts floats
 */
#ifndef CLPA_HEAD_SIZE
#define CLPA_HEAD_SIZE 128
#endif
#ifndef CLPA_NUM_THREADS
#define CLPA_NUM_THREADS 128
#endif
#ifndef CLPA_PARTITION_SIZE
#define CLPA_PARTITION_SIZE 512
#endif
#define HEAD_SIZE CLPA_HEAD_SIZE
#define NUM_THREADS CLPA_NUM_THREADS
#define PARTITION_SIZE CLPA_PARTITION_SIZE

__kernel __attribute__((reqd_work_group_size(NUM_THREADS, 1, 1))) void clpa_decode_reduce(
    __global io_t *out, __global float *lse, __global const float *max_logits,
    __global const float *exp_sums, __global const float *tmp_out,
    __global const int *context_lens, int max_context_len, int num_heads, int max_parts,
    __global const float *sinks, __local float *weights) {
  const int lid = get_local_id(0);
  const int head = get_group_id(0);
  const int seq = get_group_id(1);
  const size_t sh = (size_t)seq * num_heads + head;
  int L = context_lens[seq];
  if (L < 0 || L > max_context_len) L = 0; /* the decode kernel reported it */
  const int parts = (L + PARTITION_SIZE - 1) / PARTITION_SIZE;
  __global const float *m = max_logits + sh * max_parts, *l = exp_sums + sh * max_parts;

  /* Every work-item merges the states itself: parts is small, and it
   * saves two barriers and a reduction. */
  softmax_state all = sinks ? softmax_logit(sinks[head]) : softmax_empty();
  for (int p = 0; p < parts; p++) all = softmax_merge(all, softmax_state_of(m[p], l[p]));
  for (int p = lid; p < parts; p += NUM_THREADS)
    weights[p] = softmax_weight(softmax_state_of(m[p], l[p]), all);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int d = lid; d < HEAD_SIZE; d += NUM_THREADS) {
    float acc = 0.0f;
    for (int p = 0; p < parts; p++)
      if (weights[p] != 0.0f) acc += weights[p] * tmp_out[(sh * max_parts + p) * HEAD_SIZE + d];
    IO_STORE(acc, out, sh * HEAD_SIZE + d);
  }
  if (lid == 0 && lse) lse[sh] = softmax_lse(all);
}

