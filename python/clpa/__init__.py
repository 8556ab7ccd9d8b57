"""clpa: portable paged attention over OpenCL, from Python.

A thin ctypes binding of libclpa (found through $CLPA_LIBRARY, else the
dynamic linker) that takes PyOpenCL contexts, queues and buffers:

    clpa.Context, clpa.Cache       the context and the paged KV cache (clpa.device)
    ctx.reshape_and_cache, ctx.decode, ctx.prefill, ctx.plan_decode, ...
    clpa.KVManager, clpa.RadixCache, clpa.Pool    the host side (clpa.kv; no OpenCL)

Any status other than CLPA_OK raises clpa.ClpaError, whose .name is the
status's C name and .message clpa's message. The device part imports
PyOpenCL when first used, so the host part works without it.
"""

import ctypes as _ctypes

from . import structs
from ._lib import (HEADER_VERSION, ClpaError, LibraryNotFound, check, dtype_of, lib, status_name,
                   version)
from .kv import (AdmitResult, Batch, BatchView, InsertResult, KVManager, MatchResult, Pool,
                 RadixCache, RadixNode, Request, kv_layout)
from .structs import (CachePlacement, DecodePath, DecodeVariant, DType, KVLayout, KVLayoutKind,
                      Lanes, PageTable, Precision, PrefillPath, Status)

__version__ = "0.1.0"

__all__ = ["HEADER_VERSION", "AdmitResult", "Batch", "BatchView", "Cache", "CachePlacement",
           "ClpaError", "Context", "DType", "DecodePath", "DecodeVariant", "InsertResult",
           "KVLayout", "KVLayoutKind", "KVManager", "Lanes", "LibraryNotFound", "MatchResult",
           "PageTable", "Plan", "Pool", "Precision", "PrefillPath", "RadixCache", "RadixNode", "Request", "Status", "check",
           "device_select", "devices", "dtype_of", "kv_layout", "lib", "status_name", "structs",
           "version"]

_DEVICE = ("Context", "Cache", "Plan")


def __getattr__(name):
    if name in _DEVICE:
        from . import device
        return getattr(device, name)
    raise AttributeError("module 'clpa' has no attribute %r" % name)


def devices():
    """Every OpenCL device clpa sees (clpa_devices_list), as structs.DeviceInfo."""
    n = _ctypes.c_size_t()
    check(lib.clpa_devices_list(None, 0, _ctypes.byref(n)))
    arr = (structs.DeviceInfo * max(n.value, 1))()
    check(lib.clpa_devices_list(arr, n.value, _ctypes.byref(n)))
    return list(arr[:n.value])


def device_select(spec=None):
    """The index into devices() that spec names (None: $CLPA_DEVICE, else the
    first GPU, else the first device)."""
    idx = _ctypes.c_size_t()
    check(lib.clpa_device_select(spec.encode() if spec else None, _ctypes.byref(idx)))
    return idx.value
