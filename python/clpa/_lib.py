"""Finding and loading libclpa, the C prototypes, and errors.

The library is found through $CLPA_LIBRARY (a path to libclpa.so), else
through ctypes.util.find_library("clpa") (the dynamic linker's cache,
LD_LIBRARY_PATH), else by asking the dynamic linker for libclpa.so.
"""

import ctypes
import ctypes.util
import os
from ctypes import POINTER, c_char_p, c_int, c_int32, c_int64, c_size_t, c_uint, c_uint64, c_void_p

from . import structs as S

# CLPA_VERSION_NUMBER of the clpa.h whose structs this package mirrors
# (0.1.0), given to clpa_context_config_init_version as a C application's
# clpa_context_config_init gives its header's. The library must have the
# same ABI: the same minor while the major is 0, the same major after.
HEADER_VERSION = 100


def _abi(number):
    """The ABI a CLPA_VERSION_NUMBER stands for: major and minor in 0.x, the major after."""
    major, minor = number // 10000, number // 100 % 100
    return (major, minor) if major == 0 else (major,)


class LibraryNotFound(ImportError):
    pass


def _load():
    path = os.environ.get("CLPA_LIBRARY")
    if path:
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            raise LibraryNotFound("CLPA_LIBRARY=%s could not be loaded: %s" % (path, e)) from None
    found = ctypes.util.find_library("clpa")
    for name in (found, "libclpa.so"):
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    raise LibraryNotFound(
        "libclpa not found (CLPA_LIBRARY unset, find_library('clpa') gave %s, libclpa.so did "
        "not load): set CLPA_LIBRARY to the path of libclpa.so (build/lib/libclpa.so in a build "
        "tree), or install clpa (meson install) where the dynamic linker finds it (run ldconfig, "
        "or set LD_LIBRARY_PATH for a custom prefix)" % (found,))


lib = _load()

# ---------------------------------------------------------------------------
# Prototypes: (name, restype, argtypes). Only what the package calls.
# ---------------------------------------------------------------------------
_st = c_int  # clpa_status
_p = c_void_p
_P32 = POINTER(c_int32)
_P64 = POINTER(c_int64)
_PROTOS = [
    ("clpa_version_number", c_uint, []),
    ("clpa_version_string", c_char_p, []),
    ("clpa_status_name", c_char_p, [c_int]),
    ("clpa_last_error", c_char_p, []),
    ("clpa_dtype_parse", _st, [c_char_p, POINTER(c_int)]),
    ("clpa_dtype_name", c_char_p, [c_int]),
    ("clpa_dtype_size", c_size_t, [c_int]),
    # context, devices
    ("clpa_context_config_init_version", None, [POINTER(S.ContextConfig), c_uint]),
    ("clpa_context_create", _st, [POINTER(S.ContextConfig), POINTER(_p)]),
    ("clpa_context_destroy", None, [_p]),
    ("clpa_context_last_error", c_char_p, [_p]),
    ("clpa_context_cl_context", _p, [_p]),
    ("clpa_context_cl_device", _p, [_p]),
    ("clpa_context_cl_queue", _p, [_p]),
    ("clpa_context_finish", _st, [_p]),
    ("clpa_context_check_faults", _st, [_p, _P32]),
    ("clpa_context_device_info", _st, [_p, POINTER(S.DeviceInfo)]),
    ("clpa_devices_list", _st, [POINTER(S.DeviceInfo), c_size_t, POINTER(c_size_t)]),
    ("clpa_device_select", _st, [c_char_p, POINTER(c_size_t)]),
    ("clpa_smoke_test", _st, [_p, c_size_t]),
    # layout, cache, ops
    ("clpa_kv_layout_init", _st, [POINTER(S.KVLayout), c_int, c_int32, c_int32, c_int32, c_int32]),
    ("clpa_kv_layout_init_kind", _st,
     [POINTER(S.KVLayout), c_int, c_int, c_int32, c_int32, c_int32, c_int32]),
    ("clpa_kv_layout_check", _st, [POINTER(S.KVLayout), POINTER(S.KVLayout)]),
    ("clpa_kv_key_index", c_uint64, [POINTER(S.KVLayout), c_int32, c_int32, c_int32, c_int32]),
    ("clpa_kv_value_index", c_uint64, [POINTER(S.KVLayout), c_int32, c_int32, c_int32, c_int32]),
    ("clpa_cache_config_init", None, [POINTER(S.CacheConfig)]),
    ("clpa_cache_create", _st, [_p, POINTER(S.CacheConfig), POINTER(_p)]),
    ("clpa_cache_destroy", None, [_p]),
    ("clpa_cache_get_info", _st, [_p, POINTER(S.CacheInfo)]),
    ("clpa_cache_get_layout", _st, [_p, POINTER(S.KVLayout)]),
    ("clpa_cache_key", _p, [_p, c_int32]),
    ("clpa_cache_value", _p, [_p, c_int32]),
    ("clpa_reshape_and_cache_params_init", None, [POINTER(S.ReshapeAndCacheParams)]),
    ("clpa_reshape_and_cache", _st, [_p, POINTER(S.ReshapeAndCacheParams)]),
    # attention and plans
    ("clpa_decode_params_init", None, [POINTER(S.DecodeParams)]),
    ("clpa_decode", _st, [_p, POINTER(S.DecodeParams)]),
    ("clpa_prefill_params_init", None, [POINTER(S.PrefillParams)]),
    ("clpa_prefill", _st, [_p, POINTER(S.PrefillParams)]),
    ("clpa_attn_inputs_init", None, [POINTER(S.AttnInputs)]),
    ("clpa_plan_decode", _st, [_p, POINTER(S.DecodeParams), POINTER(_p)]),
    ("clpa_plan_prefill", _st, [_p, POINTER(S.PrefillParams), POINTER(_p)]),
    ("clpa_run", _st, [_p, POINTER(S.AttnInputs)]),
    ("clpa_plan_describe", _st, [_p, POINTER(S.PlanInfo)]),
    ("clpa_plan_release", None, [_p]),
    # pool, sequences, batch
    ("clpa_pool_config_init", None, [POINTER(S.PoolConfig)]),
    ("clpa_pool_create", _st, [POINTER(S.PoolConfig), POINTER(_p)]),
    ("clpa_pool_destroy", None, [_p]),
    ("clpa_pool_alloc", _st, [_p, c_int32, _P32]),
    ("clpa_pool_ref", _st, [_p, c_int32]),
    ("clpa_pool_unref", _st, [_p, c_int32]),
    ("clpa_pool_refcount", c_int32, [_p, c_int32]),
    ("clpa_pool_stats_get", None, [_p, POINTER(S.PoolStats)]),
    ("clpa_pool_block_size", c_int32, [_p]),
    ("clpa_pool_check", _st, [_p]),
    ("clpa_seq_num_tokens", c_int32, [_p]),
    ("clpa_seq_num_blocks", c_int32, [_p]),
    ("clpa_seq_block_table", _P32, [_p]),
    ("clpa_seq_slots", _st, [_p, c_int32, c_int32, _P64]),
    ("clpa_batch_config_init", None, [POINTER(S.BatchConfig)]),
    ("clpa_batch_create", _st, [_p, POINTER(S.BatchConfig), POINTER(_p)]),
    ("clpa_batch_destroy", None, [_p]),
    # radix
    ("clpa_radix_config_init", None, [POINTER(S.RadixConfig)]),
    ("clpa_radix_create", _st, [_p, POINTER(S.RadixConfig), POINTER(_p)]),
    ("clpa_radix_destroy", None, [_p]),
    ("clpa_radix_match", _st, [_p, c_uint64, _P32, c_int32, _P32, c_int32,
                               POINTER(S.RadixMatchResult)]),
    ("clpa_radix_insert", _st, [_p, c_uint64, _P32, c_int32, _P32,
                                POINTER(S.RadixInsertResult)]),
    ("clpa_radix_lock", _st, [_p, _p]),
    ("clpa_radix_unlock", _st, [_p, _p]),
    ("clpa_radix_stats_get", None, [_p, POINTER(S.RadixStats)]),
    ("clpa_radix_evict", _st, [_p, c_int32, _P32]),
    ("clpa_radix_root", _p, [_p]),
    ("clpa_radix_node_get", _st, [_p, _p, POINTER(S.RadixNodeInfo)]),
    ("clpa_radix_check", _st, [_p]),
    # KV manager
    ("clpa_kvman_config_init", None, [POINTER(S.KVManConfig)]),
    ("clpa_kvman_config_from_layout", None, [POINTER(S.KVManConfig), POINTER(S.KVLayout)]),
    ("clpa_kvman_create", _st, [POINTER(S.KVManConfig), POINTER(_p)]),
    ("clpa_kvman_destroy", None, [_p]),
    ("clpa_kvman_admit_options_init", None, [POINTER(S.KVManAdmitOptions)]),
    ("clpa_kvman_admit_ex", _st, [_p, c_uint64, _P32, c_int32, POINTER(S.KVManAdmitOptions),
                                  _P64, POINTER(S.KVManAdmitResult)]),
    ("clpa_kvman_append", _st, [_p, _p, _P32, c_int32, _P64]),
    ("clpa_kvman_append_batch", _st, [_p, POINTER(_p), c_int32, _P32, _P32, _P64]),
    ("clpa_kvman_checkpoint", _st, [_p, _p, c_int32]),
    ("clpa_kvman_finish", _st, [_p, _p, c_int]),
    ("clpa_kvman_evict", _st, [_p, c_int32, _P32]),
    ("clpa_kvman_reclaim", _st, [_p, _P32]),
    ("clpa_kvman_num_running", c_int32, [_p]),
    ("clpa_kvman_running", POINTER(_p), [_p]),
    ("clpa_kvman_batch_build", _st, [_p, _p, POINTER(S.BatchView)]),
    ("clpa_kvman_stats_get", None, [_p, POINTER(S.KVManStats)]),
    ("clpa_kvman_pool", _p, [_p]),
    ("clpa_kvman_radix", _p, [_p]),
    ("clpa_kvreq_seq", _p, [_p]),
    ("clpa_kvreq_num_tokens", c_int32, [_p]),
    ("clpa_kvreq_tokens", _P32, [_p]),
    ("clpa_kvreq_ns", c_uint64, [_p]),
    ("clpa_kvreq_row", c_int32, [_p]),
]

def int_bounds(t):
    """The least and greatest values of the ctypes integer type t."""
    bits = 8 * ctypes.sizeof(t)
    return (0, 2**bits - 1) if t(-1).value > 0 else (-2**(bits - 1), 2**(bits - 1) - 1)


def _checked(t):
    """t as an argument type that refuses a Python int it cannot hold (ctypes keeps its low
    bits: block 2**32 + 1 would be block 1) with an OverflowError naming the type."""
    lo, hi = int_bounds(t)

    class Checked(t):
        @classmethod
        def from_param(cls, v):
            if isinstance(v, int) and not lo <= v <= hi:
                raise OverflowError("%d does not fit %s (%d to %d)" % (v, t.__name__, lo, hi))
            return t.from_param(v)

    Checked.__name__ = t.__name__
    return Checked


_CHECKED = {t: _checked(t) for t in (c_int, c_int32, c_int64, c_uint, c_uint64, c_size_t)}

for _name, _res, _args in _PROTOS:
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = [_CHECKED.get(a, a) for a in _args]


def version():
    """The linked library's version, "MAJOR.MINOR.PATCH"."""
    return lib.clpa_version_string().decode()


if _abi(lib.clpa_version_number()) != _abi(HEADER_VERSION):
    raise ImportError("libclpa %s (%s) has another ABI than the clpa.h this package mirrors "
                      "(%d.%d.%d): install the package from the same clpa source tree as the "
                      "library" % (version(), getattr(lib, "_name", "?"), HEADER_VERSION // 10000,
                                   HEADER_VERSION // 100 % 100, HEADER_VERSION % 100))


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

def status_name(status):
    return lib.clpa_status_name(int(status)).decode()


class ClpaError(Exception):
    """A clpa call returned a status other than CLPA_OK.

    status: the clpa_status (a clpa.Status where known), name: its C name
    ("CLPA_ERR_INVALID_ARG"), message: clpa's message for the failed call
    ("clpa_decode: ..."), as clpa_context_last_error / clpa_last_error give it.
    """

    def __init__(self, status, message):
        try:
            status = S.Status(status)
        except ValueError:
            pass
        self.status = status
        self.name = status_name(status)
        self.message = message
        super().__init__("%s: %s" % (self.name, message))


def check(status, ctx=None):
    """Raises ClpaError for a status other than CLPA_OK, with the context's
    last error (ctx a clpa_context pointer) or the thread's."""
    if status == 0:
        return
    msg = lib.clpa_context_last_error(ctx) if ctx else lib.clpa_last_error()
    raise ClpaError(status, (msg or b"").decode(errors="replace"))


def dtype_of(value):
    """A clpa.DType from a DType, an int, a name ("f16", "bf16", ...) or a NumPy dtype."""
    if isinstance(value, S.DType):
        return value
    if isinstance(value, int):
        return S.DType(value)
    if isinstance(value, str):
        out = c_int()
        check(lib.clpa_dtype_parse(value.lower().encode(), ctypes.byref(out)))
        return S.DType(out.value)
    import numpy as np
    dt = np.dtype(value)
    table = {np.dtype(np.float32): S.DType.F32, np.dtype(np.float16): S.DType.F16}
    if dt in table:
        return table[dt]
    raise TypeError("no clpa dtype for %r (give a name: 'f32', 'f16', 'bf16', 'fp8_e4m3', "
                    "'fp8_e5m2')" % (value,))
