"""The device side (clpa.h, clpa_cache.h) over PyOpenCL: the context, the
paged KV cache, reshape_and_cache, decode, prefill and their plans.

Every call that enqueues work takes the fields of its C params struct as
keyword arguments, with clpa.h's names and meanings:

    ctx.decode(num_seqs=4, num_heads=8, cache=cache, layer=0, max_blocks_per_seq=8,
               max_context_len=128, scale=0.125, query=q, block_tables=bt,
               context_lens=lens, out=out)

Buffers are pyopencl.Buffer (or pyopencl.array.Array at offset 0); the
cache is a clpa.Cache; dtypes, paths and variants are names ("f16", "rows",
"v2") or the enums in clpa.structs; host arrays (cu_seqlens_q,
cached_lens, host_context_lens) are anything NumPy turns into int32. Each
such call takes wait_for (a list of pyopencl.Event) and returns a
pyopencl.Event that completes with its last command. A status other than
CLPA_OK raises clpa.ClpaError with clpa's message.
"""

import ctypes
from ctypes import byref, c_int32, c_void_p

import numpy as np
import pyopencl as cl

from . import structs as S
from ._lib import HEADER_VERSION, ClpaError, check, dtype_of, int_bounds, lib
from .kv import _Handle


def _mem(value, name):
    if value is None or isinstance(value, int):
        return value
    if hasattr(value, "base_data") and hasattr(value, "offset"):  # pyopencl.array.Array
        if value.offset:
            raise ValueError("%s: an array at offset %d; clpa takes whole buffers (use the "
                             "call's offset or stride fields)" % (name, value.offset))
        value = value.base_data
    if isinstance(value, cl.MemoryObjectHolder):
        return value.int_ptr
    raise TypeError("%s: expected a pyopencl.Buffer, got %s" % (name, type(value).__name__))


def _convert(ftype, value, name, keep):
    if issubclass(ftype, S.cl_mem):
        return _mem(value, name)
    if issubclass(ftype, S.clpa_cache_p):
        if value is None:
            return None
        if not isinstance(value, Cache):
            raise TypeError("%s: expected a clpa.Cache, got %s" % (name, type(value).__name__))
        return value._handle
    if issubclass(ftype, S.host_int32_array):
        if value is None:
            return None
        a = np.asarray(value)
        if a.dtype.kind in "iu" and a.size and (a.min() < -2**31 or a.max() >= 2**31):
            raise OverflowError("%s: an entry does not fit int32 (%d to %d)"
                                % (name, int(a.min()), int(a.max())))
        a = np.ascontiguousarray(a, dtype=np.int32).reshape(-1)
        keep[name] = a
        return a.ctypes.data
    if issubclass(ftype, S.c_enum):
        if ftype is S.c_dtype:
            return int(dtype_of(value))
        if isinstance(value, str):
            try:
                return int(ftype.enum[value.upper()])
            except KeyError:
                raise ValueError("%s: %r is not one of %s" % (
                    name, value, ", ".join(m.lower() for m in ftype.enum.__members__))) from None
        return int(value)
    if issubclass(ftype, (S.cl_event_p, S.cl_event_array)) or name == "num_wait_events":
        raise TypeError("%s: pass wait_for=[events]; the call returns its event" % name)
    integer = issubclass(ftype, ctypes._SimpleCData) and ftype._type_ in "bBhHiIlLqQ"
    if isinstance(value, int) and integer:
        lo, hi = int_bounds(ftype)  # ctypes would keep the low bits
        if not lo <= value <= hi:
            raise OverflowError("%s: %d does not fit %s (%d to %d)"
                                % (name, value, ftype.__name__, lo, hi))
    return value


# Host arrays a call reads, and how many entries it reads from each.
_HOST_LENGTHS = {
    "host_context_lens": lambda p: p.num_seqs,
    "cu_seqlens_q": lambda p: p.num_seqs + 1,
    "cached_lens": lambda p: p.num_seqs,
}


def _params(cls, init, fields, what):
    """A params struct from its _init and keyword fields; returns (params, keep)."""
    p = cls()
    init(byref(p))
    types = dict(cls._fields_)
    keep = {}
    for name, value in fields.items():
        ftype = types.get(name)
        if ftype is None or name == "reserved":  # reserved stays 0, as _init left it
            raise TypeError("%s: no field %r in %s (fields: %s)" % (
                what, name, cls.c_name, ", ".join(types)))
        setattr(p, name, _convert(ftype, value, name, keep))
    for name, a in keep.items():
        need = _HOST_LENGTHS[name](p)
        if len(a) < need:
            raise ValueError("%s: %s has %d entries, num_seqs = %d needs %d"
                             % (what, name, len(a), p.num_seqs, need))
    return p, keep


def _events(p, wait_for, keep):
    if wait_for:
        arr = (c_void_p * len(wait_for))(*[e.int_ptr for e in wait_for])
        keep["wait_events"] = arr
        p.num_wait_events = len(wait_for)
        p.wait_events = ctypes.addressof(arr)
    ev = c_void_p()
    keep["event"] = ev
    p.event = ctypes.addressof(ev)
    return ev


def _event(ev):
    return cl.Event.from_int_ptr(ev.value, retain=False) if ev.value else None


class Context(_Handle):
    """clpa_context over PyOpenCL.

    Context(queue=q) (or Context(ctx, q), or Context(ctx) with a new in-order
    queue) wraps the application's OpenCL objects: clpa retains them, takes
    buffers of that context and enqueues on that queue (it must be in order).
    Context(device="0:0") (or no argument: $CLPA_DEVICE, else the first GPU,
    else the first device) lets clpa open its own; .cl_context and .queue
    are then PyOpenCL objects for them.
    """

    _destroy = staticmethod(lib.clpa_context_destroy)

    def __init__(self, context=None, queue=None, *, device=None, binary_cache=None,
                 cache_dir=None, lanes=None, profiling=False, cache_max_bytes=0):
        cfg = S.ContextConfig()
        lib.clpa_context_config_init_version(byref(cfg), HEADER_VERSION)
        if queue is None and context is not None:
            queue = cl.CommandQueue(context)
        if queue is not None:
            if context is None:
                context = queue.context
            cfg.cl_ctx, cfg.cl_dev, cfg.cl_queue = (context.int_ptr, queue.device.int_ptr,
                                                    queue.int_ptr)
        if device is not None:
            cfg.device = device.encode()
        if binary_cache is not None:
            cfg.binary_cache = int(bool(binary_cache))
        if cache_dir is not None:
            cfg.cache_dir = str(cache_dir).encode()
        if lanes is not None:
            cfg.lanes = _convert(S.c_lanes, lanes, "lanes", {})
        cfg.profiling = int(bool(profiling))
        cfg.cache_max_bytes = cache_max_bytes
        h = c_void_p()
        check(lib.clpa_context_create(byref(cfg), byref(h)))
        super().__init__(h.value)
        if queue is None:
            context = cl.Context.from_int_ptr(lib.clpa_context_cl_context(h), retain=True)
            queue = cl.CommandQueue.from_int_ptr(lib.clpa_context_cl_queue(h), retain=True)
        self.cl_context, self.queue = context, queue

    def _check(self, status):
        check(status, self._h)

    @property
    def last_error(self):
        return lib.clpa_context_last_error(self._handle).decode(errors="replace")

    def device_info(self):
        out = S.DeviceInfo()
        self._check(lib.clpa_context_device_info(self._handle, byref(out)))
        return out

    def finish(self):
        self._check(lib.clpa_context_finish(self._handle))

    def check_faults(self):
        """Waits for the queue and reads and clears the fault word; raises
        ClpaError (with .faults, the CLPA_FAULT_* bits) when a kernel set one."""
        faults = c_int32()
        status = lib.clpa_context_check_faults(self._handle, byref(faults))
        try:
            self._check(status)
        except ClpaError as e:
            e.faults = faults.value
            raise

    def smoke_test(self, n=1024):
        self._check(lib.clpa_smoke_test(self._handle, n))

    def cache(self, **config):
        """A clpa.Cache on this context (clpa_cache_config's fields)."""
        return Cache(self, **config)

    def _enqueue(self, fn, cls, init, fields, wait_for, what):
        p, keep = _params(cls, init, fields, what)
        ev = _events(p, wait_for, keep)
        self._check(fn(self._handle, byref(p)))
        return _event(ev)

    def reshape_and_cache(self, wait_for=None, **fields):
        """clpa_reshape_and_cache with clpa_reshape_and_cache_params' fields."""
        return self._enqueue(lib.clpa_reshape_and_cache, S.ReshapeAndCacheParams,
                             lib.clpa_reshape_and_cache_params_init, fields, wait_for,
                             "reshape_and_cache")

    def decode(self, wait_for=None, **fields):
        """clpa_decode with clpa_decode_params' fields."""
        return self._enqueue(lib.clpa_decode, S.DecodeParams, lib.clpa_decode_params_init,
                             fields, wait_for, "decode")

    def prefill(self, wait_for=None, **fields):
        """clpa_prefill with clpa_prefill_params' fields."""
        return self._enqueue(lib.clpa_prefill, S.PrefillParams, lib.clpa_prefill_params_init,
                             fields, wait_for, "prefill")

    def plan_decode(self, **fields):
        """clpa_plan_decode: a Plan from clpa_decode_params' fields (buffers may
        be left out); run it per layer with Plan.run."""
        p, _ = _params(S.DecodeParams, lib.clpa_decode_params_init, fields, "plan_decode")
        return Plan(self, lib.clpa_plan_decode, p)

    def plan_prefill(self, **fields):
        """clpa_plan_prefill: a Plan from clpa_prefill_params' fields."""
        p, _ = _params(S.PrefillParams, lib.clpa_prefill_params_init, fields, "plan_prefill")
        return Plan(self, lib.clpa_plan_prefill, p)


class Plan(_Handle):
    """clpa_plan: made once per step, run per layer with that layer's buffers."""

    _destroy = staticmethod(lib.clpa_plan_release)

    def __init__(self, ctx, make, params):
        h = c_void_p()
        ctx._check(make(ctx._handle, byref(params), byref(h)))
        super().__init__(h.value, ctx)
        self.ctx = ctx

    def run(self, wait_for=None, **fields):
        """clpa_run with clpa_attn_inputs' fields; returns its event."""
        p, keep = _params(S.AttnInputs, lib.clpa_attn_inputs_init, fields, "run")
        ev = _events(p, wait_for, keep)
        self.ctx._check(lib.clpa_run(self._handle, byref(p)))
        return _event(ev)

    def describe(self):
        out = S.PlanInfo()
        self.ctx._check(lib.clpa_plan_describe(self._handle, byref(out)))
        return out


class Cache(_Handle):
    """clpa_cache: every layer's paged K and V caches on the device.

        cache = clpa.Cache(ctx, num_layers=2, num_kv_heads=2, head_size=64,
                           block_size=16, dtype="f16", num_blocks=64)

    takes clpa_cache_config's fields (its defaults from clpa_cache_config_init).
    """

    _destroy = staticmethod(lib.clpa_cache_destroy)

    def __init__(self, ctx, **config):
        cfg, _ = _params(S.CacheConfig, lib.clpa_cache_config_init, config, "Cache")
        h = c_void_p()
        ctx._check(lib.clpa_cache_create(ctx._handle, byref(cfg), byref(h)))
        super().__init__(h.value, ctx)
        self.ctx = ctx

    @property
    def layout(self):
        """The caches' shape (clpa_kv_layout): what the KV manager and raw-buffer
        calls take."""
        out = S.KVLayout()
        check(lib.clpa_cache_get_layout(self._handle, byref(out)))
        return out

    @property
    def info(self):
        out = S.CacheInfo()
        check(lib.clpa_cache_get_info(self._handle, byref(out)))
        return out

    def _buffer(self, fn, layer):
        ptr = fn(self._handle, layer)
        if not ptr:
            raise IndexError("layer %d outside the cache's %d layers (or a host cache)"
                             % (layer, self.info.num_layers))
        return cl.Buffer.from_int_ptr(ptr, retain=True)

    def key(self, layer):
        """Layer layer's key cache as a pyopencl.Buffer (layout.key_shape)."""
        return self._buffer(lib.clpa_cache_key, layer)

    def value(self, layer):
        """Layer layer's value cache as a pyopencl.Buffer (layout.value_shape)."""
        return self._buffer(lib.clpa_cache_value, layer)
