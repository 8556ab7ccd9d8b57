/*
 * reduce.cl — merges partial attention results by their softmax
 * statistics (the online-softmax identity):
 *
 *   M = max_p m_p,  w_p = s_p * exp(m_p - M),  l = sum_p w_p (+ exp(sink - M))
 *   out = sum_p w_p * o_p / l,  lse = M + log(l)
 *
 * clpa_decode_reduce merges decode v2's partitions (vLLM's
 * paged_attention_v2_reduce_kernel), checked through tests/test_decode.c.
 *
 * Grid:  (num_heads * NUM_THREADS, num_seqs); one work-group per (seq, head).
 * Buffers:
 *   tmp_out    [num_seqs, num_heads, max_parts, HEAD_SIZE]  float, normalised per partition
 *   exp_sums   [num_seqs, num_heads, max_parts]             float
 *   max_logits [num_seqs, num_heads, max_parts]             float
 *   out        [num_seqs, num_heads, HEAD_SIZE]             io_t
 *   lse        [num_seqs, num_heads] or NULL                float
 *   weights    local, max_parts floats
 */
#ifndef HEAD_SIZE
#define HEAD_SIZE 128
#endif
#ifndef NUM_THREADS
#define NUM_THREADS 128
#endif
#ifndef PARTITION_SIZE
#define PARTITION_SIZE 512
#endif

__kernel __attribute__((reqd_work_group_size(NUM_THREADS, 1, 1))) void clpa_decode_reduce(
    __global io_t *out, __global float *lse, __global const float *exp_sums,
    __global const float *max_logits, __global const float *tmp_out,
    __global const int *context_lens, int max_context_len, int num_heads, int max_parts,
    __global const float *sinks, __local float *weights) {
  const int lid = get_local_id(0);
  const int head = get_group_id(0);
  const int seq = get_group_id(1);
  const size_t sh = (size_t)seq * num_heads + head;
  int L = context_lens[seq];
  if (L < 0 || L > max_context_len) L = 0; /* the decode kernel reported it */
  const int parts = (L + PARTITION_SIZE - 1) / PARTITION_SIZE;

  /* Every work-item finds M and l itself: parts is small, and it saves
   * two barriers and a reduction. */
  float M = sinks ? sinks[head] : -INFINITY;
  for (int p = 0; p < parts; p++) M = fmax(M, max_logits[sh * max_parts + p]);
  float l = (sinks && M > -INFINITY) ? exp(sinks[head] - M) : 0.0f;
  for (int p = 0; p < parts; p++) {
    float m = max_logits[sh * max_parts + p];
    l += m == -INFINITY ? 0.0f : exp_sums[sh * max_parts + p] * exp(m - M);
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int p = lid; p < parts; p += NUM_THREADS) {
    float m = max_logits[sh * max_parts + p];
    weights[p] = m == -INFINITY ? 0.0f : exp_sums[sh * max_parts + p] * exp(m - M) * inv;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int d = lid; d < HEAD_SIZE; d += NUM_THREADS) {
    float acc = 0.0f;
    for (int p = 0; p < parts; p++)
      if (weights[p] != 0.0f) acc += weights[p] * tmp_out[(sh * max_parts + p) * HEAD_SIZE + d];
    IO_STORE(acc, out, sh * HEAD_SIZE + d);
  }
  if (lid == 0 && lse) lse[sh] = l > 0.0f ? M + log(l) : -INFINITY;
}
