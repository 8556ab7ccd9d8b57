"""ctypes mirrors of clpa's public structs and enums (include/*.h).

Each Structure below copies one C struct field for field, in order, with the
C names, so clpa.h's comments document them. tests/py_struct_layout.c
prints sizeof and offsetof of every field as the C compiler lays them out,
and python/tests/test_layout.py compares that with these mirrors: a struct
that changes in C without its mirror fails that test.

Handle fields use small subclasses of c_void_p (cl_mem, cl_event_p, ...) so
that clpa.device can tell a buffer from a cache when it fills params from
keyword arguments; they have c_void_p's size and alignment.
"""

import ctypes
import enum
from ctypes import (POINTER, c_char, c_double, c_float, c_int, c_int32, c_int64, c_size_t,
                    c_uint, c_uint32, c_uint64, c_void_p)


# ---------------------------------------------------------------------------
# Enums (clpa_base.h, clpa.h, clpa_cache.h). C enums are ints here.
# ---------------------------------------------------------------------------

class Status(enum.IntEnum):
    OK = 0
    ERR_DEVICE_NOT_FOUND = -1
    ERR_DEVICE_MEMORY = -4
    ERR_OUT_OF_RESOURCES = -5
    ERR_OUT_OF_MEMORY = -6
    ERR_BUILD = -11
    ERR_INVALID_ARG = -30
    ERR_OPENCL = -1000
    ERR_UNSUPPORTED = -1001
    ERR_POOL_EXHAUSTED = -1002
    ERR_BAD_BLOCK = -1003
    ERR_IO = -1004
    ERR_STATE = -1005
    ERR_BAD_CONTEXT_LEN = -1006
    ERR_LANE_MISMATCH = -1007
    ERR_VERSION = -1008


class DType(enum.IntEnum):
    F32 = 0
    F16 = 1
    BF16 = 2
    FP8_E4M3 = 3
    FP8_E5M2 = 4


class Lanes(enum.IntEnum):
    AUTO = 0
    EMULATED = 1
    SUBGROUP = 2
    NV_PTX = 3


class Precision(enum.IntEnum):
    AUTO = 0
    F32 = 1


class DecodeVariant(enum.IntEnum):
    AUTO = 0
    V1 = 1
    V2 = 2


class DecodePath(enum.IntEnum):
    AUTO = 0
    LANES = 1
    MMA = 2
    ROWS = 3


class PrefillPath(enum.IntEnum):
    AUTO = 0
    TILES = 1
    ROWS = 2
    MMA = 3


class KVLayoutKind(enum.IntEnum):
    SPLIT_KEY = 0
    HND = 1
    NHD = 2


class PageTable(enum.IntEnum):
    PADDED = 0
    CSR = 1


class CachePlacement(enum.IntEnum):
    DEVICE = 0
    HOST = 1


# Field types: a C enum is an int; each gets its own class so that keyword
# arguments can be given by name ("f16", "rows").
class c_enum(c_int):
    enum = None


def _enum_type(e):
    return type("c_" + e.__name__, (c_enum,), {"enum": e})


c_dtype = _enum_type(DType)
c_kv_layout_kind = _enum_type(KVLayoutKind)
c_lanes = _enum_type(Lanes)
c_precision = _enum_type(Precision)
c_decode_variant = _enum_type(DecodeVariant)
c_decode_path = _enum_type(DecodePath)
c_prefill_path = _enum_type(PrefillPath)
c_page_table = _enum_type(PageTable)
c_cache_placement = _enum_type(CachePlacement)


# Handles: OpenCL objects and clpa's opaque objects.
class cl_mem(c_void_p):
    pass


class cl_context(c_void_p):
    pass


class cl_device_id(c_void_p):
    pass


class cl_command_queue(c_void_p):
    pass


class cl_event_p(c_void_p):       # cl_event * (an out-parameter)
    pass


class cl_event_array(c_void_p):   # const cl_event * (wait lists)
    pass


class clpa_cache_p(c_void_p):     # const clpa_cache *
    pass


class host_int32_array(c_void_p):  # const int32_t * read by the call (host lengths)
    pass


# ---------------------------------------------------------------------------
# Structures
# ---------------------------------------------------------------------------

# Every struct but clpa_allocator ends in uint64_t reserved words (8 of them
# until fields came out of them): room for fields to come (README's ABI);
# inputs must leave them 0, as _init does.
RESERVED = ("reserved", c_uint64 * 8)


class Struct(ctypes.Structure):
    """A mirror of a C struct: field access by C name, as_dict(), a repr."""

    c_name = None

    def as_dict(self):
        out = {}
        for name, _ in self._fields_:
            v = getattr(self, name)
            if isinstance(v, bytes):
                v = v.decode(errors="replace")
            elif isinstance(v, ctypes.Array):
                v = list(v)
            elif isinstance(v, (ctypes._SimpleCData,)):
                v = v.value
            elif isinstance(v, Struct):
                v = v.as_dict()
            out[name] = v
        return out

    def __repr__(self):
        items = ", ".join("%s=%r" % kv for kv in self.as_dict().items())
        return "%s(%s)" % (type(self).__name__, items)


class Allocator(Struct):
    c_name = "clpa_allocator"
    _fields_ = [("fn", c_void_p), ("user", c_void_p)]


class ContextConfig(Struct):
    c_name = "clpa_context_config"
    _fields_ = [
        ("header_version", c_uint),
        ("device", ctypes.c_char_p),
        ("cl_ctx", cl_context),
        ("cl_dev", cl_device_id),
        ("cl_queue", cl_command_queue),
        ("profiling", c_int),
        ("binary_cache", c_int),
        ("cache_dir", ctypes.c_char_p),
        ("lanes", c_lanes),
        ("cache_max_bytes", c_uint64),
        RESERVED,
    ]


class DeviceInfo(Struct):
    c_name = "clpa_device_info"
    _fields_ = [
        ("platform_index", c_int),
        ("device_index", c_int),
        ("platform_name", c_char * 128),
        ("platform_version", c_char * 128),
        ("name", c_char * 128),
        ("vendor", c_char * 128),
        ("driver_version", c_char * 128),
        ("device_version", c_char * 128),
        ("c_version", c_char * 64),
        ("is_gpu", c_int),
        ("is_cpu", c_int),
        ("compute_units", c_uint),
        ("global_mem_bytes", c_uint64),
        ("local_mem_bytes", c_uint64),
        ("max_alloc_bytes", c_uint64),
        ("max_work_group_size", c_size_t),
        ("has_subgroups", c_int),
        ("has_subgroup_shuffle", c_int),
        ("has_fp16", c_int),
        ("has_fp64", c_int),
        ("lanes", c_lanes),
        ("nv_compute_capability", c_int),
        ("native_float_width", c_uint),
        RESERVED,
    ]


class KVLayout(Struct):
    """clpa_kv_layout, with the NumPy shapes of vLLM's cache layouts."""

    c_name = "clpa_kv_layout"
    _fields_ = [
        ("dtype", c_dtype),
        ("num_blocks", c_int32),
        ("block_size", c_int32),
        ("num_kv_heads", c_int32),
        ("head_size", c_int32),
        ("x", c_int32),
        ("head_stride", c_uint64),
        ("block_stride", c_uint64),
        ("block_bytes", c_uint64),
        ("cache_bytes", c_uint64),
        ("kind", c_kv_layout_kind),
        ("reserved32", c_int32),
        ("key_token_stride", c_uint64),
        ("value_token_stride", c_uint64),
        ("block_pitch", c_uint64),
        ("reserved", c_uint64 * 4),
    ]

    def _token_major_shape(self):
        n, h, b, d = self.num_blocks, self.num_kv_heads, self.block_size, self.head_size
        return (n, h, b, d) if self.kind.value == KVLayoutKind.HND else (n, b, h, d)

    @property
    def key_shape(self):
        """split-key: [num_blocks, num_kv_heads, head_size / x, block_size, x];
        HND: [num_blocks, num_kv_heads, block_size, head_size]; NHD:
        [num_blocks, block_size, num_kv_heads, head_size]"""
        if self.kind.value != KVLayoutKind.SPLIT_KEY:
            return self._token_major_shape()
        x = self.x
        return (self.num_blocks, self.num_kv_heads, self.head_size // x, self.block_size, x)

    @property
    def value_shape(self):
        """split-key: [num_blocks, num_kv_heads, head_size, block_size]; HND, NHD
        as key_shape"""
        if self.kind.value != KVLayoutKind.SPLIT_KEY:
            return self._token_major_shape()
        return (self.num_blocks, self.num_kv_heads, self.head_size, self.block_size)

    @property
    def numpy_dtype(self):
        """The NumPy type of one stored element: float32, float16, or the raw
        bits of bf16 (uint16) and fp8 (uint8)."""
        import numpy as np
        return {DType.F32: np.float32, DType.F16: np.float16, DType.BF16: np.uint16,
                DType.FP8_E4M3: np.uint8, DType.FP8_E5M2: np.uint8}[DType(self.dtype.value)]


class CacheConfig(Struct):
    c_name = "clpa_cache_config"
    _fields_ = [
        ("num_layers", c_int32),
        ("num_kv_heads", c_int32),
        ("head_size", c_int32),
        ("block_size", c_int32),
        ("dtype", c_dtype),
        ("num_blocks", c_int32),
        ("mem_fraction", c_double),
        ("placement", c_cache_placement),
        ("pinned", c_int),
        ("max_arena_bytes", c_uint64),
        ("layout", c_kv_layout_kind),
        ("reserved32", c_int32),
        ("reserved", c_uint64 * 7),
    ]


class CacheInfo(Struct):
    c_name = "clpa_cache_info"
    _fields_ = [
        ("num_layers", c_int32),
        ("num_kv_heads", c_int32),
        ("head_size", c_int32),
        ("block_size", c_int32),
        ("num_blocks", c_int32),
        ("dtype", c_dtype),
        ("x", c_int32),
        ("block_bytes", c_uint64),
        ("layer_bytes", c_uint64),
        ("bytes_per_block", c_uint64),
        ("allocated_bytes", c_uint64),
        ("num_arenas", c_int32),
        ("placement", c_cache_placement),
        ("pinned", c_int),
        ("wrapped", c_int),
        ("layout", c_kv_layout_kind),
        ("reserved32", c_int32),
        ("reserved", c_uint64 * 7),
    ]


class ReshapeAndCacheParams(Struct):
    c_name = "clpa_reshape_and_cache_params"
    _fields_ = [
        ("cache", clpa_cache_p),
        ("layer", c_int32),
        ("num_tokens", c_int32),
        ("src_dtype", c_dtype),
        ("key", cl_mem),
        ("value", cl_mem),
        ("key_offset", c_size_t),
        ("value_offset", c_size_t),
        ("key_stride", c_size_t),
        ("value_stride", c_size_t),
        ("slot_mapping", cl_mem),
        ("k_scale", c_float),
        ("v_scale", c_float),
        ("num_wait_events", c_uint32),
        ("wait_events", cl_event_array),
        ("event", cl_event_p),
        RESERVED,
    ]


class DecodeParams(Struct):
    c_name = "clpa_decode_params"
    _fields_ = [
        ("num_seqs", c_int32),
        ("num_heads", c_int32),
        ("cache", clpa_cache_p),
        ("layer", c_int32),
        ("key_cache", cl_mem),
        ("value_cache", cl_mem),
        ("kv", KVLayout),
        ("max_blocks_per_seq", c_int32),
        ("max_context_len", c_int32),
        ("q_dtype", c_dtype),
        ("scale", c_float),
        ("k_scale", c_float),
        ("v_scale", c_float),
        ("k_scale_buffer", cl_mem),
        ("v_scale_buffer", cl_mem),
        ("soft_cap", c_float),
        ("sliding_window", c_int32),
        ("q_stride", c_size_t),
        ("query", cl_mem),
        ("block_tables", cl_mem),
        ("context_lens", cl_mem),
        ("out", cl_mem),
        ("lse", cl_mem),
        ("alibi_slopes", cl_mem),
        ("sinks", cl_mem),
        ("host_context_lens", host_int32_array),
        ("variant", c_decode_variant),
        ("partition_size", c_int32),
        ("heads_per_group", c_int32),
        ("path", c_decode_path),
        ("precision", c_precision),
        ("num_wait_events", c_uint32),
        ("wait_events", cl_event_array),
        ("event", cl_event_p),
        ("page_table", c_page_table),
        ("num_page_indices", c_int32),
        ("page_indptr", cl_mem),
        ("page_indices", cl_mem),
        ("last_page_len", cl_mem),
        ("reserved", c_uint64 * 4),
    ]


class PrefillParams(Struct):
    c_name = "clpa_prefill_params"
    _fields_ = [
        ("num_seqs", c_int32),
        ("num_heads", c_int32),
        ("cache", clpa_cache_p),
        ("layer", c_int32),
        ("key_cache", cl_mem),
        ("value_cache", cl_mem),
        ("kv", KVLayout),
        ("max_blocks_per_seq", c_int32),
        ("cu_seqlens_q", host_int32_array),
        ("cached_lens", host_int32_array),
        ("causal", c_int),
        ("q_dtype", c_dtype),
        ("scale", c_float),
        ("k_scale", c_float),
        ("v_scale", c_float),
        ("k_scale_buffer", cl_mem),
        ("v_scale_buffer", cl_mem),
        ("soft_cap", c_float),
        ("sliding_window", c_int32),
        ("q_stride", c_size_t),
        ("query", cl_mem),
        ("block_tables", cl_mem),
        ("out", cl_mem),
        ("lse", cl_mem),
        ("alibi_slopes", cl_mem),
        ("sinks", cl_mem),
        ("path", c_prefill_path),
        ("rows_per_group", c_int32),
        ("keys_per_tile", c_int32),
        ("precision", c_precision),
        ("block_mask", cl_mem),
        ("mask_block", c_int32),
        ("mask_q_blocks", c_int32),
        ("mask_k_blocks", c_int32),
        ("num_wait_events", c_uint32),
        ("wait_events", cl_event_array),
        ("event", cl_event_p),
        ("page_table", c_page_table),
        ("num_page_indices", c_int32),
        ("page_indptr", cl_mem),
        ("page_indices", cl_mem),
        ("last_page_len", cl_mem),
        ("rows_per_warp", c_int32),
        ("split_keys", c_int32),
        ("decode_rows_kernel", c_int32),
        ("reserved32", c_int32),
        ("reserved", c_uint64 * 2),
    ]


class AttnInputs(Struct):
    c_name = "clpa_attn_inputs"
    _fields_ = [
        ("cache", clpa_cache_p),
        ("layer", c_int32),
        ("key_cache", cl_mem),
        ("value_cache", cl_mem),
        ("query", cl_mem),
        ("out", cl_mem),
        ("lse", cl_mem),
        ("block_tables", cl_mem),
        ("context_lens", cl_mem),
        ("k_scale", c_float),
        ("v_scale", c_float),
        ("k_scale_buffer", cl_mem),
        ("v_scale_buffer", cl_mem),
        ("alibi_slopes", cl_mem),
        ("sinks", cl_mem),
        ("block_mask", cl_mem),
        ("mass", cl_mem),
        ("num_wait_events", c_uint32),
        ("wait_events", cl_event_array),
        ("event", cl_event_p),
        ("num_page_indices", c_int32),
        ("page_indptr", cl_mem),
        ("page_indices", cl_mem),
        ("last_page_len", cl_mem),
        ("reserved", c_uint64 * 4),
    ]


class PlanInfo(Struct):
    c_name = "clpa_plan_info"
    _fields_ = [
        ("path", c_int32),
        ("variant", c_decode_variant),
        ("partition_size", c_int32),
        ("heads_per_group", c_int32),
        ("rows", c_int32),
        ("keys", c_int32),
        ("work_pairs", c_int64),
        ("list_entries", c_int32),
        ("rows_per_warp", c_int32),
        ("split_keys", c_int32),
        ("split_rows", c_int32),
        ("decode_rows", c_int32),
        ("reserved32", c_int32),
        ("reserved", c_uint64 * 4),
    ]


class PoolConfig(Struct):
    c_name = "clpa_pool_config"
    _fields_ = [("num_blocks", c_int32), ("block_size", c_int32), ("allocator", Allocator),
                RESERVED]


class PoolStats(Struct):
    c_name = "clpa_pool_stats"
    _fields_ = [("num_blocks", c_int32), ("free", c_int32), ("used", c_int32),
                ("shared", c_int32), RESERVED]


class BatchConfig(Struct):
    c_name = "clpa_batch_config"
    _fields_ = [("min_blocks_per_seq", c_int32), RESERVED]


class BatchView(Struct):
    c_name = "clpa_batch_view"
    _fields_ = [
        ("block_tables", POINTER(c_int32)),
        ("context_lens", POINTER(c_int32)),
        ("num_seqs", c_int32),
        ("max_blocks_per_seq", c_int32),
        ("max_context_len", c_int32),
        ("changed_rows", POINTER(c_int32)),
        ("num_changed_rows", c_int32),
        RESERVED,
    ]


class RadixConfig(Struct):
    c_name = "clpa_radix_config"
    _fields_ = [("allocator", Allocator), ("on_evict", c_void_p), ("on_evict_user", c_void_p),
                RESERVED]


class RadixMatchResult(Struct):
    c_name = "clpa_radix_match_result"
    _fields_ = [("num_blocks", c_int32), ("num_tokens", c_int32), ("node", c_void_p),
                RESERVED]


class RadixInsertResult(Struct):
    c_name = "clpa_radix_insert_result"
    _fields_ = [("num_tokens", c_int32), ("cached_tokens", c_int32), ("node", c_void_p),
                RESERVED]


class RadixStats(Struct):
    c_name = "clpa_radix_stats"
    _fields_ = [
        ("block_size", c_int32),
        ("num_nodes", c_int32),
        ("cached_blocks", c_int32),
        ("evictable_blocks", c_int32),
        ("protected_blocks", c_int32),
        ("evictable_tokens", c_int64),
        ("protected_tokens", c_int64),
        ("evicted_blocks", c_int64),
        ("evicted_nodes", c_int64),
        ("splits", c_int64),
        RESERVED,
    ]


class RadixNodeInfo(Struct):
    c_name = "clpa_radix_node_info"
    _fields_ = [
        ("parent", c_void_p),
        ("ns", c_uint64),
        ("tokens", POINTER(c_int32)),
        ("blocks", POINTER(c_int32)),
        ("num_blocks", c_int32),
        ("depth_blocks", c_int32),
        ("num_children", c_int32),
        ("lock_count", c_int32),
        ("last_access", c_uint64),
        RESERVED,
    ]


class KVManConfig(Struct):
    c_name = "clpa_kvman_config"
    _fields_ = [
        ("num_blocks", c_int32),
        ("block_size", c_int32),
        ("prefix_cache", c_int32),
        ("allocator", Allocator),
        ("free_watermark", c_int32),
        RESERVED,
    ]


class KVManAdmitResult(Struct):
    c_name = "clpa_kvman_admit_result"
    _fields_ = [("req", c_void_p), ("cached_tokens", c_int32), ("num_new_tokens", c_int32),
                RESERVED]


class KVManAdmitOptions(Struct):
    c_name = "clpa_kvman_admit_options"
    _fields_ = [("reserve_tokens", c_int32), RESERVED]


class KVManStats(Struct):
    c_name = "clpa_kvman_stats"
    _fields_ = [
        ("requests", c_int64),
        ("prompt_tokens", c_int64),
        ("hit_tokens", c_int64),
        ("computed_tokens", c_int64),
        ("evicted_blocks", c_int64),
        ("evictions", c_int64),
        ("running", c_int32),
        ("blocks_total", c_int32),
        ("blocks_free", c_int32),
        ("blocks_used", c_int32),
        ("blocks_cached", c_int32),
        ("blocks_evictable", c_int32),
        ("hot_evictions", c_int64),
        RESERVED,
    ]


# Every mirror, for the layout test.
MIRRORS = [Allocator, ContextConfig, DeviceInfo, KVLayout, CacheConfig, CacheInfo,
           ReshapeAndCacheParams, DecodeParams, PrefillParams, AttnInputs, PlanInfo, PoolConfig,
           PoolStats, BatchConfig, BatchView, RadixConfig, RadixMatchResult, RadixInsertResult,
           RadixStats, RadixNodeInfo, KVManConfig, KVManAdmitResult, KVManAdmitOptions,
           KVManStats]

# C scalar types whose size the mirrors assume.
SCALARS = {"clpa_status": c_int, "clpa_dtype": c_int, "clpa_lanes": c_int,
           "clpa_precision": c_int, "clpa_decode_variant": c_int, "clpa_decode_path": c_int,
           "clpa_prefill_path": c_int, "clpa_cache_placement": c_int, "clpa_page_table": c_int,
           "size_t": c_size_t,
           "cl_uint": c_uint32, "cl_mem": c_void_p}
