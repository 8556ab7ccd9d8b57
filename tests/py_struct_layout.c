/*
 * py_struct_layout.c — the public structs as the C compiler lays them out,
 * printed as JSON for python/tests/test_layout.py, which compares them with
 * the ctypes mirrors in python/clpa/structs.py:
 *
 *   {"structs": {"clpa_kv_layout": {"size": 48, "fields": {"dtype": [0, 4], ...}}, ...},
 *    "scalars": {"clpa_status": 4, ...}}
 *
 * Each field is [offset, size]. The lists below name the fields the mirrors
 * name; a field added in C moves a later offset or the struct's size, and
 * one renamed or removed stops this file compiling, so either way the
 * test sees it.
 */
#include <clpa.h>
#include <stddef.h>
#include <stdio.h>

static int first_struct = 1, first_field = 1;

static void begin(const char *name, size_t size) {
  printf("%s\n    \"%s\": {\"size\": %zu, \"fields\": {", first_struct ? "" : ",", name, size);
  first_struct = 0, first_field = 1;
}

static void field(const char *name, size_t offset, size_t size) {
  printf("%s\"%s\": [%zu, %zu]", first_field ? "" : ", ", name, offset, size);
  first_field = 0;
}

static void end(void) { printf("}}"); }

#define S(T) begin(#T, sizeof(T))
#define F(T, f) field(#f, offsetof(T, f), sizeof(((T *)0)->f))

int main(void) {
  printf("{\"structs\": {");
  S(clpa_allocator);
  F(clpa_allocator, fn), F(clpa_allocator, user);
  end();

  S(clpa_context_config);
  F(clpa_context_config, header_version), F(clpa_context_config, device);
  F(clpa_context_config, cl_ctx);
  F(clpa_context_config, cl_dev), F(clpa_context_config, cl_queue);
  F(clpa_context_config, profiling), F(clpa_context_config, binary_cache);
  F(clpa_context_config, cache_dir), F(clpa_context_config, lanes);
  F(clpa_context_config, cache_max_bytes);
  F(clpa_context_config, reserved);
  end();

  S(clpa_device_info);
  F(clpa_device_info, platform_index), F(clpa_device_info, device_index);
  F(clpa_device_info, platform_name), F(clpa_device_info, platform_version);
  F(clpa_device_info, name), F(clpa_device_info, vendor);
  F(clpa_device_info, driver_version), F(clpa_device_info, device_version);
  F(clpa_device_info, c_version), F(clpa_device_info, is_gpu), F(clpa_device_info, is_cpu);
  F(clpa_device_info, compute_units), F(clpa_device_info, global_mem_bytes);
  F(clpa_device_info, local_mem_bytes), F(clpa_device_info, max_alloc_bytes);
  F(clpa_device_info, max_work_group_size), F(clpa_device_info, has_subgroups);
  F(clpa_device_info, has_subgroup_shuffle), F(clpa_device_info, has_fp16);
  F(clpa_device_info, has_fp64), F(clpa_device_info, lanes);
  F(clpa_device_info, nv_compute_capability), F(clpa_device_info, native_float_width);
  F(clpa_device_info, reserved);
  end();

  S(clpa_kv_layout);
  F(clpa_kv_layout, dtype), F(clpa_kv_layout, num_blocks), F(clpa_kv_layout, block_size);
  F(clpa_kv_layout, num_kv_heads), F(clpa_kv_layout, head_size), F(clpa_kv_layout, x);
  F(clpa_kv_layout, head_stride), F(clpa_kv_layout, block_stride);
  F(clpa_kv_layout, block_bytes), F(clpa_kv_layout, cache_bytes);
  F(clpa_kv_layout, kind), F(clpa_kv_layout, reserved32);
  F(clpa_kv_layout, key_token_stride), F(clpa_kv_layout, value_token_stride);
  F(clpa_kv_layout, block_pitch);
  F(clpa_kv_layout, reserved);
  end();

  S(clpa_cache_config);
  F(clpa_cache_config, num_layers), F(clpa_cache_config, num_kv_heads);
  F(clpa_cache_config, head_size), F(clpa_cache_config, block_size);
  F(clpa_cache_config, dtype), F(clpa_cache_config, num_blocks);
  F(clpa_cache_config, mem_fraction), F(clpa_cache_config, placement);
  F(clpa_cache_config, pinned), F(clpa_cache_config, max_arena_bytes);
  F(clpa_cache_config, layout), F(clpa_cache_config, reserved32);
  F(clpa_cache_config, reserved);
  end();

  S(clpa_cache_info);
  F(clpa_cache_info, num_layers), F(clpa_cache_info, num_kv_heads);
  F(clpa_cache_info, head_size), F(clpa_cache_info, block_size);
  F(clpa_cache_info, num_blocks), F(clpa_cache_info, dtype), F(clpa_cache_info, x);
  F(clpa_cache_info, block_bytes), F(clpa_cache_info, layer_bytes);
  F(clpa_cache_info, bytes_per_block), F(clpa_cache_info, allocated_bytes);
  F(clpa_cache_info, num_arenas), F(clpa_cache_info, placement);
  F(clpa_cache_info, pinned), F(clpa_cache_info, wrapped);
  F(clpa_cache_info, layout), F(clpa_cache_info, reserved32);
  F(clpa_cache_info, reserved);
  end();

  S(clpa_reshape_and_cache_params);
  F(clpa_reshape_and_cache_params, cache), F(clpa_reshape_and_cache_params, layer);
  F(clpa_reshape_and_cache_params, num_tokens), F(clpa_reshape_and_cache_params, src_dtype);
  F(clpa_reshape_and_cache_params, key), F(clpa_reshape_and_cache_params, value);
  F(clpa_reshape_and_cache_params, key_offset), F(clpa_reshape_and_cache_params, value_offset);
  F(clpa_reshape_and_cache_params, key_stride), F(clpa_reshape_and_cache_params, value_stride);
  F(clpa_reshape_and_cache_params, slot_mapping);
  F(clpa_reshape_and_cache_params, k_scale), F(clpa_reshape_and_cache_params, v_scale);
  F(clpa_reshape_and_cache_params, num_wait_events);
  F(clpa_reshape_and_cache_params, wait_events), F(clpa_reshape_and_cache_params, event);
  F(clpa_reshape_and_cache_params, reserved);
  end();

  S(clpa_decode_params);
  F(clpa_decode_params, num_seqs), F(clpa_decode_params, num_heads);
  F(clpa_decode_params, cache), F(clpa_decode_params, layer);
  F(clpa_decode_params, key_cache), F(clpa_decode_params, value_cache);
  F(clpa_decode_params, kv), F(clpa_decode_params, max_blocks_per_seq);
  F(clpa_decode_params, max_context_len), F(clpa_decode_params, q_dtype);
  F(clpa_decode_params, scale), F(clpa_decode_params, k_scale), F(clpa_decode_params, v_scale);
  F(clpa_decode_params, k_scale_buffer), F(clpa_decode_params, v_scale_buffer);
  F(clpa_decode_params, soft_cap), F(clpa_decode_params, sliding_window);
  F(clpa_decode_params, q_stride), F(clpa_decode_params, query);
  F(clpa_decode_params, block_tables), F(clpa_decode_params, context_lens);
  F(clpa_decode_params, out), F(clpa_decode_params, lse);
  F(clpa_decode_params, alibi_slopes), F(clpa_decode_params, sinks);
  F(clpa_decode_params, host_context_lens), F(clpa_decode_params, variant);
  F(clpa_decode_params, partition_size), F(clpa_decode_params, heads_per_group);
  F(clpa_decode_params, path), F(clpa_decode_params, precision);
  F(clpa_decode_params, num_wait_events), F(clpa_decode_params, wait_events);
  F(clpa_decode_params, event);
  F(clpa_decode_params, page_table), F(clpa_decode_params, num_page_indices);
  F(clpa_decode_params, page_indptr), F(clpa_decode_params, page_indices);
  F(clpa_decode_params, last_page_len);
  F(clpa_decode_params, reserved);
  end();

  S(clpa_prefill_params);
  F(clpa_prefill_params, num_seqs), F(clpa_prefill_params, num_heads);
  F(clpa_prefill_params, cache), F(clpa_prefill_params, layer);
  F(clpa_prefill_params, key_cache), F(clpa_prefill_params, value_cache);
  F(clpa_prefill_params, kv), F(clpa_prefill_params, max_blocks_per_seq);
  F(clpa_prefill_params, cu_seqlens_q), F(clpa_prefill_params, cached_lens);
  F(clpa_prefill_params, causal), F(clpa_prefill_params, q_dtype);
  F(clpa_prefill_params, scale), F(clpa_prefill_params, k_scale);
  F(clpa_prefill_params, v_scale), F(clpa_prefill_params, k_scale_buffer);
  F(clpa_prefill_params, v_scale_buffer), F(clpa_prefill_params, soft_cap);
  F(clpa_prefill_params, sliding_window), F(clpa_prefill_params, q_stride);
  F(clpa_prefill_params, query), F(clpa_prefill_params, block_tables);
  F(clpa_prefill_params, out), F(clpa_prefill_params, lse);
  F(clpa_prefill_params, alibi_slopes), F(clpa_prefill_params, sinks);
  F(clpa_prefill_params, path), F(clpa_prefill_params, rows_per_group);
  F(clpa_prefill_params, keys_per_tile), F(clpa_prefill_params, precision);
  F(clpa_prefill_params, block_mask), F(clpa_prefill_params, mask_block);
  F(clpa_prefill_params, mask_q_blocks), F(clpa_prefill_params, mask_k_blocks);
  F(clpa_prefill_params, num_wait_events), F(clpa_prefill_params, wait_events);
  F(clpa_prefill_params, event);
  F(clpa_prefill_params, page_table), F(clpa_prefill_params, num_page_indices);
  F(clpa_prefill_params, page_indptr), F(clpa_prefill_params, page_indices);
  F(clpa_prefill_params, last_page_len);
  F(clpa_prefill_params, rows_per_warp), F(clpa_prefill_params, split_keys);
  F(clpa_prefill_params, decode_rows_kernel), F(clpa_prefill_params, reserved32);
  F(clpa_prefill_params, reserved);
  end();

  S(clpa_attn_inputs);
  F(clpa_attn_inputs, cache), F(clpa_attn_inputs, layer);
  F(clpa_attn_inputs, key_cache), F(clpa_attn_inputs, value_cache);
  F(clpa_attn_inputs, query), F(clpa_attn_inputs, out), F(clpa_attn_inputs, lse);
  F(clpa_attn_inputs, block_tables), F(clpa_attn_inputs, context_lens);
  F(clpa_attn_inputs, k_scale), F(clpa_attn_inputs, v_scale);
  F(clpa_attn_inputs, k_scale_buffer), F(clpa_attn_inputs, v_scale_buffer);
  F(clpa_attn_inputs, alibi_slopes), F(clpa_attn_inputs, sinks);
  F(clpa_attn_inputs, block_mask), F(clpa_attn_inputs, mass);
  F(clpa_attn_inputs, num_wait_events);
  F(clpa_attn_inputs, wait_events), F(clpa_attn_inputs, event);
  F(clpa_attn_inputs, num_page_indices), F(clpa_attn_inputs, page_indptr);
  F(clpa_attn_inputs, page_indices), F(clpa_attn_inputs, last_page_len);
  F(clpa_attn_inputs, reserved);
  end();

  S(clpa_plan_info);
  F(clpa_plan_info, path), F(clpa_plan_info, variant), F(clpa_plan_info, partition_size);
  F(clpa_plan_info, heads_per_group), F(clpa_plan_info, rows), F(clpa_plan_info, keys);
  F(clpa_plan_info, work_pairs), F(clpa_plan_info, list_entries), F(clpa_plan_info, rows_per_warp);
  F(clpa_plan_info, split_keys), F(clpa_plan_info, split_rows), F(clpa_plan_info, decode_rows);
  F(clpa_plan_info, reserved32);
  F(clpa_plan_info, reserved);
  end();

  S(clpa_pool_config);
  F(clpa_pool_config, num_blocks), F(clpa_pool_config, block_size);
  F(clpa_pool_config, allocator);
  F(clpa_pool_config, reserved);
  end();

  S(clpa_pool_stats);
  F(clpa_pool_stats, num_blocks), F(clpa_pool_stats, free), F(clpa_pool_stats, used);
  F(clpa_pool_stats, shared);
  F(clpa_pool_stats, reserved);
  end();

  S(clpa_batch_config);
  F(clpa_batch_config, min_blocks_per_seq);
  F(clpa_batch_config, reserved);
  end();

  S(clpa_batch_view);
  F(clpa_batch_view, block_tables), F(clpa_batch_view, context_lens);
  F(clpa_batch_view, num_seqs), F(clpa_batch_view, max_blocks_per_seq);
  F(clpa_batch_view, max_context_len), F(clpa_batch_view, changed_rows);
  F(clpa_batch_view, num_changed_rows);
  F(clpa_batch_view, reserved);
  end();

  S(clpa_radix_config);
  F(clpa_radix_config, allocator), F(clpa_radix_config, on_evict);
  F(clpa_radix_config, on_evict_user);
  F(clpa_radix_config, reserved);
  end();

  S(clpa_radix_match_result);
  F(clpa_radix_match_result, num_blocks), F(clpa_radix_match_result, num_tokens);
  F(clpa_radix_match_result, node);
  F(clpa_radix_match_result, reserved);
  end();

  S(clpa_radix_insert_result);
  F(clpa_radix_insert_result, num_tokens), F(clpa_radix_insert_result, cached_tokens);
  F(clpa_radix_insert_result, node);
  F(clpa_radix_insert_result, reserved);
  end();

  S(clpa_radix_stats);
  F(clpa_radix_stats, block_size), F(clpa_radix_stats, num_nodes);
  F(clpa_radix_stats, cached_blocks), F(clpa_radix_stats, evictable_blocks);
  F(clpa_radix_stats, protected_blocks), F(clpa_radix_stats, evictable_tokens);
  F(clpa_radix_stats, protected_tokens), F(clpa_radix_stats, evicted_blocks);
  F(clpa_radix_stats, evicted_nodes), F(clpa_radix_stats, splits);
  F(clpa_radix_stats, reserved);
  end();

  S(clpa_radix_node_info);
  F(clpa_radix_node_info, parent), F(clpa_radix_node_info, ns);
  F(clpa_radix_node_info, tokens), F(clpa_radix_node_info, blocks);
  F(clpa_radix_node_info, num_blocks), F(clpa_radix_node_info, depth_blocks);
  F(clpa_radix_node_info, num_children), F(clpa_radix_node_info, lock_count);
  F(clpa_radix_node_info, last_access);
  F(clpa_radix_node_info, reserved);
  end();

  S(clpa_kvman_config);
  F(clpa_kvman_config, num_blocks), F(clpa_kvman_config, block_size);
  F(clpa_kvman_config, prefix_cache), F(clpa_kvman_config, allocator);
  F(clpa_kvman_config, free_watermark);
  F(clpa_kvman_config, reserved);
  end();

  S(clpa_kvman_admit_result);
  F(clpa_kvman_admit_result, req), F(clpa_kvman_admit_result, cached_tokens);
  F(clpa_kvman_admit_result, num_new_tokens);
  F(clpa_kvman_admit_result, reserved);
  end();

  S(clpa_kvman_admit_options);
  F(clpa_kvman_admit_options, reserve_tokens);
  F(clpa_kvman_admit_options, reserved);
  end();

  S(clpa_kvman_stats);
  F(clpa_kvman_stats, requests), F(clpa_kvman_stats, prompt_tokens);
  F(clpa_kvman_stats, hit_tokens), F(clpa_kvman_stats, computed_tokens);
  F(clpa_kvman_stats, evicted_blocks), F(clpa_kvman_stats, evictions);
  F(clpa_kvman_stats, running), F(clpa_kvman_stats, blocks_total);
  F(clpa_kvman_stats, blocks_free), F(clpa_kvman_stats, blocks_used);
  F(clpa_kvman_stats, blocks_cached), F(clpa_kvman_stats, blocks_evictable);
  F(clpa_kvman_stats, hot_evictions);
  F(clpa_kvman_stats, reserved);
  end();

  printf("\n  },\n  \"scalars\": {\"clpa_status\": %zu, \"clpa_dtype\": %zu, \"clpa_lanes\": %zu, "
         "\"clpa_precision\": %zu, \"clpa_decode_variant\": %zu, \"clpa_decode_path\": %zu, "
         "\"clpa_prefill_path\": %zu, \"clpa_cache_placement\": %zu, \"clpa_page_table\": %zu, "
         "\"size_t\": %zu, "
         "\"cl_uint\": %zu, \"cl_mem\": %zu}\n}\n",
         sizeof(clpa_status), sizeof(clpa_dtype), sizeof(clpa_lanes), sizeof(clpa_precision),
         sizeof(clpa_decode_variant), sizeof(clpa_decode_path), sizeof(clpa_prefill_path),
         sizeof(clpa_cache_placement), sizeof(clpa_page_table), sizeof(size_t), sizeof(cl_uint),
         sizeof(cl_mem));
  return 0;
}
