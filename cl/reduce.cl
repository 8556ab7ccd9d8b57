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
 * work-group kernels merge their partitions themselves (decode_merge.cl's
 * decode_merge_parts). Shaped like the rows path: one work-item per
 * (seq, head) merges the states once and adds the partitions' outputs a
 * partition at a time over contiguous dimensions, which the compiler
 * vectorizes. (It had 128 work-items, each merging every state itself: on
 * a CPU that is 128 times the exponentials;
 * docs/decisions/0016-decode-rows-kernel.md.) Checked through
 * tests/test_decode.c.
 *
 * Grid:  (num_heads, num_seqs), work-groups of 1.
 * Buffers:
 *   tmp_out    [num_seqs, num_heads, max_parts, HEAD_SIZE]  float, normalised per partition
 *   max_logits [num_seqs, num_heads, max_parts]             float
 *   exp_sums   [num_seqs, num_heads, max_parts]             float
 *   out        [num_seqs, num_heads, HEAD_SIZE]             io_t
 *   lse        [num_seqs, num_heads] or NULL                float
 */
#ifndef CLPA_HEAD_SIZE
#error "CLPA_HEAD_SIZE: elements a head; required"
#endif
#ifndef CLPA_PARTITION_SIZE
#error "CLPA_PARTITION_SIZE: tokens a partition; required"
#endif
#define HEAD_SIZE CLPA_HEAD_SIZE
#define PARTITION_SIZE CLPA_PARTITION_SIZE

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void clpa_decode_reduce(
    KERNEL_PARAMS(REDUCE_ARG_LIST) PAGE_PARAMS) {
  const int head = get_group_id(0), seq = get_group_id(1);
  const size_t sh = (size_t)seq * num_heads + head;
  int L = SEQ_LEN(seq);
  if (L < 0 || L > max_context_len) L = 0; /* the decode kernel reported it */
  const int parts = (L + PARTITION_SIZE - 1) / PARTITION_SIZE;
  __global const float *m = max_logits + sh * max_parts, *l = exp_sums + sh * max_parts;

  softmax_state all = sinks ? softmax_logit(sinks[head]) : softmax_empty();
  for (int p = 0; p < parts; p++) all = softmax_merge(all, softmax_state_of(m[p], l[p]));
  float acc[HEAD_SIZE];
  for (int d = 0; d < HEAD_SIZE; d++) acc[d] = 0.0f;
  for (int p = 0; p < parts; p++) {
    const float w = softmax_weight(softmax_state_of(m[p], l[p]), all);
    if (w == 0.0f) continue; /* an empty partition's output is not read: 0 * NaN is NaN */
    __global const float *t = tmp_out + (sh * max_parts + p) * HEAD_SIZE;
    for (int d = 0; d < HEAD_SIZE; d++) acc[d] += w * t[d];
  }
  for (int d = 0; d < HEAD_SIZE; d++) IO_STORE(acc[d], out, sh * HEAD_SIZE + d);
  if (lse) lse[sh] = softmax_lse(all);
}
