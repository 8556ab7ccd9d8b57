"""The host side of the paged KV cache (clpa_kv.h, clpa_radix.h, clpa_kvman.h):
the block pool, the radix prefix cache and the KV manager. No OpenCL.

Token ids and block ids are int32 and slots int64, as NumPy arrays; every
array a call returns is a copy, valid after the next call.
"""

import weakref
from ctypes import POINTER, byref, c_int32, c_int64, c_void_p

import numpy as np

from . import structs as S
from ._lib import check, dtype_of, lib

_P32 = POINTER(c_int32)
_P64 = POINTER(c_int64)


def _i32(a):
    a = np.ascontiguousarray(a, dtype=np.int32)
    if a.ndim != 1:
        raise ValueError("expected a 1-D array of int32, got shape %s" % (a.shape,))
    return a


def _p32(a):
    return a.ctypes.data_as(_P32)


def _p64(a):
    return a.ctypes.data_as(_P64)


def _copy32(ptr, n):
    if n <= 0 or not ptr:
        return np.zeros(0, np.int32)
    return np.ctypeslib.as_array(ptr, shape=(n,)).copy()


class _Owned:
    """A C object's handle, its class (whose _destroy frees it) and the _Owned of
    what was made from it, held strongly: what a _Handle closes, children first.
    The Python objects are not referenced, so they are collected as before."""

    __slots__ = ("h", "cls", "parent", "children")

    def __init__(self, h, cls, parent):
        self.h, self.cls, self.parent, self.children = h, cls, parent, set()
        if parent is not None:
            parent.children.add(self)

    def close(self):
        for child in list(self.children):
            child.close()
        if self.parent is not None:
            self.parent.children.discard(self)
            self.parent = None
        h, self.h = self.h, None
        if h and self.cls._destroy is not None:
            self.cls._destroy(h)


class _Handle:
    """An owned C object: closed once (close(), `with`, or garbage collection).

    Objects made from it (a tree from a pool, a batch from a manager, a cache
    from a context) hold a reference to it, so it outlives them; an explicit
    close() closes them first, as C requires. So does its garbage collection
    where both die in one reference cycle (the collector then finalizes them in
    any order): the parent's _Owned holds its children's handles, not weak
    references to their objects, which the collector clears first."""

    _destroy = None
    _owned = None

    def __init__(self, handle, parent=None):
        self._owned = _Owned(handle, type(self), parent._owned if parent is not None else None)

    @property
    def _h(self):
        return self._owned.h if self._owned is not None else None

    @property
    def _handle(self):
        if not self._h:
            raise ValueError("%s is closed" % type(self).__name__)
        return self._h

    def close(self):
        if self._owned is not None:
            self._owned.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


# ---------------------------------------------------------------------------
# Block pool
# ---------------------------------------------------------------------------

class Pool(_Handle):
    """clpa_pool: num_blocks blocks of block_size tokens with reference counts."""

    _destroy = staticmethod(lib.clpa_pool_destroy)

    def __init__(self, num_blocks, block_size=16):
        cfg = S.PoolConfig()
        lib.clpa_pool_config_init(byref(cfg))
        cfg.num_blocks, cfg.block_size = num_blocks, block_size
        h = c_void_p()
        check(lib.clpa_pool_create(byref(cfg), byref(h)))
        super().__init__(h.value)

    @property
    def block_size(self):
        return lib.clpa_pool_block_size(self._handle)

    def alloc(self, n):
        """Takes n free blocks (all or nothing); returns their ids."""
        # more than the pool has: refused before anything is written, so no array of n
        out = np.zeros(max(min(n, self.stats().num_blocks), 1), np.int32)
        check(lib.clpa_pool_alloc(self._handle, n, _p32(out)))
        return out[:n].copy()

    def ref(self, block):
        check(lib.clpa_pool_ref(self._handle, int(block)))

    def unref(self, block):
        check(lib.clpa_pool_unref(self._handle, int(block)))

    def refcount(self, block):
        return lib.clpa_pool_refcount(self._handle, int(block))

    def stats(self):
        out = S.PoolStats()
        lib.clpa_pool_stats_get(self._handle, byref(out))
        return out

    def check(self):
        """clpa_pool_check: raises ClpaError on a broken invariant."""
        check(lib.clpa_pool_check(self._handle))


# ---------------------------------------------------------------------------
# Radix prefix cache
# ---------------------------------------------------------------------------

class RadixNode:
    """A node handle of a RadixCache. As in C, it stays valid until its node
    is evicted; a locked node never is."""

    __slots__ = ("tree", "ptr")

    def __init__(self, tree, ptr):
        self.tree, self.ptr = tree, ptr

    def __eq__(self, other):
        return isinstance(other, RadixNode) and other.ptr == self.ptr

    def __hash__(self):
        return hash(self.ptr)

    def info(self):
        """clpa_radix_node_get, with tokens and blocks copied to arrays."""
        return self.tree.node_info(self)

    def __repr__(self):
        return "RadixNode(0x%x)" % self.ptr


class MatchResult:
    def __init__(self, blocks, num_tokens, node):
        self.blocks, self.num_tokens, self.node = blocks, num_tokens, node

    @property
    def num_blocks(self):
        return len(self.blocks)


class InsertResult:
    def __init__(self, num_tokens, cached_tokens, node):
        self.num_tokens, self.cached_tokens, self.node = num_tokens, cached_tokens, node


class RadixCache(_Handle):
    """clpa_radix: the prefix cache over a Pool (kept alive by the tree)."""

    _destroy = staticmethod(lib.clpa_radix_destroy)

    def __init__(self, pool):
        cfg = S.RadixConfig()
        lib.clpa_radix_config_init(byref(cfg))
        h = c_void_p()
        check(lib.clpa_radix_create(pool._handle, byref(cfg), byref(h)))
        super().__init__(h.value, pool)
        self.pool = pool

    @property
    def root(self):
        return RadixNode(self, lib.clpa_radix_root(self._handle))

    def match(self, tokens, ns=0, max_blocks=None):
        """The longest cached prefix of tokens in namespace ns, in whole blocks:
        a MatchResult (blocks, num_tokens, node)."""
        t = _i32(tokens)
        if max_blocks is None:
            max_blocks = len(t) // self.pool.block_size
        blocks = np.zeros(max(max_blocks, 1), np.int32)
        out = S.RadixMatchResult()
        check(lib.clpa_radix_match(self._handle, ns, _p32(t), len(t), _p32(blocks), max_blocks,
                                   byref(out)))
        return MatchResult(blocks[:out.num_blocks].copy(), out.num_tokens,
                           RadixNode(self, out.node))

    def insert(self, tokens, blocks, ns=0):
        """Caches the whole blocks of tokens, whose KV lives in blocks: an
        InsertResult (num_tokens, cached_tokens, node)."""
        t, b = _i32(tokens), _i32(blocks)
        if len(b) < len(t) // self.pool.block_size:
            raise ValueError("insert: %d tokens need %d blocks, got %d"
                             % (len(t), len(t) // self.pool.block_size, len(b)))
        out = S.RadixInsertResult()
        check(lib.clpa_radix_insert(self._handle, ns, _p32(t), len(t), _p32(b), byref(out)))
        return InsertResult(out.num_tokens, out.cached_tokens, RadixNode(self, out.node))

    def _node(self, node):
        """node's pointer, refusing a node of another tree: C walks its parents up to
        this tree's root, which another tree's node never reaches (a crash)."""
        if not isinstance(node, RadixNode) or node.tree is not self:
            raise ValueError("not a node of this tree: %r" % (node,))
        return node.ptr

    def lock(self, node):
        check(lib.clpa_radix_lock(self._handle, self._node(node)))

    def unlock(self, node):
        check(lib.clpa_radix_unlock(self._handle, self._node(node)))

    def evict(self, num_blocks):
        """Evicts least recently used unlocked leaves; returns the blocks freed."""
        freed = c_int32()
        check(lib.clpa_radix_evict(self._handle, num_blocks, byref(freed)))
        return freed.value

    def stats(self):
        out = S.RadixStats()
        lib.clpa_radix_stats_get(self._handle, byref(out))
        return out

    def node_info(self, node):
        out = S.RadixNodeInfo()
        check(lib.clpa_radix_node_get(self._handle, self._node(node), byref(out)))
        bs = self.pool.block_size
        return {"parent": RadixNode(self, out.parent) if out.parent else None, "ns": out.ns,
                "tokens": _copy32(out.tokens, out.num_blocks * bs),
                "blocks": _copy32(out.blocks, out.num_blocks), "num_blocks": out.num_blocks,
                "depth_blocks": out.depth_blocks, "num_children": out.num_children,
                "lock_count": out.lock_count, "last_access": out.last_access}

    def check(self):
        """clpa_radix_check: raises ClpaError on a broken invariant."""
        check(lib.clpa_radix_check(self._handle))


# ---------------------------------------------------------------------------
# KV manager
# ---------------------------------------------------------------------------

class Request:
    """An admitted request (clpa_kvreq). Finishing it (KVManager.finish) or
    closing its manager ends it; using it afterwards raises ValueError.
    A manager gives one Request object per request (compare with `is`)."""

    __slots__ = ("_ptr", "manager", "__weakref__")

    def __init__(self, manager, ptr):
        self._ptr, self.manager = ptr, manager

    @property
    def ptr(self):
        if not self._ptr:
            raise ValueError("the request is finished")
        return self._ptr

    @property
    def alive(self):
        return bool(self._ptr)

    @property
    def num_tokens(self):
        return lib.clpa_kvreq_num_tokens(self.ptr)

    @property
    def tokens(self):
        return _copy32(lib.clpa_kvreq_tokens(self.ptr), self.num_tokens)

    @property
    def ns(self):
        return lib.clpa_kvreq_ns(self.ptr)

    @property
    def row(self):
        return lib.clpa_kvreq_row(self.ptr)

    @property
    def block_table(self):
        seq = lib.clpa_kvreq_seq(self.ptr)
        return _copy32(lib.clpa_seq_block_table(seq), lib.clpa_seq_num_blocks(seq))

    def slots(self, start=0, n=None):
        """The slots of tokens [start, start + n) (all from start by default)."""
        seq = lib.clpa_kvreq_seq(self.ptr)
        if n is None:
            n = lib.clpa_seq_num_tokens(seq) - start
        out = np.zeros(max(n, 1), np.int64)
        check(lib.clpa_seq_slots(seq, start, n, _p64(out)))
        return out[:n].copy()

    def __repr__(self):
        if not self._ptr:
            return "Request(finished)"
        return "Request(row=%d, num_tokens=%d)" % (self.row, self.num_tokens)


class AdmitResult:
    """What KVManager.admit returns: the request, its cached (matched) tokens
    and the slots of the num_new_tokens tokens to compute."""

    def __init__(self, req, cached_tokens, slots):
        self.req, self.cached_tokens, self.slots = req, cached_tokens, slots

    @property
    def num_new_tokens(self):
        return len(self.slots)


class BatchView:
    """clpa_batch_view as arrays: block_tables [num_seqs, max_blocks_per_seq],
    context_lens [num_seqs], changed_rows (the rows this build rewrote)."""

    def __init__(self, v):
        n, w = v.num_seqs, v.max_blocks_per_seq
        if n > 0:
            flat = np.ctypeslib.as_array(v.block_tables, shape=(n * w,))
            self.block_tables = flat.reshape(n, w).copy()
        else:
            self.block_tables = np.zeros((0, w), np.int32)
        self.context_lens = _copy32(v.context_lens, n)
        self.changed_rows = _copy32(v.changed_rows, v.num_changed_rows)
        self.num_seqs, self.max_blocks_per_seq = n, w
        self.max_context_len = v.max_context_len


class Batch(_Handle):
    """clpa_batch over a manager's pool: the arrays kept between steps."""

    _destroy = staticmethod(lib.clpa_batch_destroy)

    def __init__(self, manager, min_blocks_per_seq=0):
        cfg = S.BatchConfig()
        lib.clpa_batch_config_init(byref(cfg))
        cfg.min_blocks_per_seq = min_blocks_per_seq
        h = c_void_p()
        check(lib.clpa_batch_create(lib.clpa_kvman_pool(manager._handle), byref(cfg), byref(h)))
        super().__init__(h.value, manager)
        self.manager = manager


class KVManager(_Handle):
    """clpa_kvman: admit, append, checkpoint and finish requests over a block
    pool and a radix prefix cache.

        km = clpa.KVManager(num_blocks=256, block_size=16)   # or from_layout(cache.layout)
        r = km.admit(prompt)             # r.cached_tokens found, r.slots for the rest
        slots = km.append(r.req, [tok])  # a decode step
        km.finish(r.req)                 # its blocks go into the prefix cache
    """

    _destroy = staticmethod(lib.clpa_kvman_destroy)

    def __init__(self, num_blocks, block_size=16, prefix_cache=True, free_watermark=0,
                 layout=None):
        cfg = S.KVManConfig()
        lib.clpa_kvman_config_init(byref(cfg))
        if layout is not None:
            lib.clpa_kvman_config_from_layout(byref(cfg), byref(layout))
        else:
            cfg.num_blocks, cfg.block_size = num_blocks, block_size
        cfg.prefix_cache = int(bool(prefix_cache))
        cfg.free_watermark = free_watermark
        h = c_void_p()
        check(lib.clpa_kvman_create(byref(cfg), byref(h)))
        super().__init__(h.value)
        self.block_size = cfg.block_size
        self.num_blocks = cfg.num_blocks
        self._reqs = weakref.WeakValueDictionary()  # clpa_kvreq * -> its one Request

    @classmethod
    def from_layout(cls, layout, **kw):
        """A manager for a cache's layout (its blocks and block size)."""
        return cls(None, layout=layout, **kw)

    def close(self):
        for r in list(getattr(self, "_reqs", {}).values()):
            r._ptr = None
        super().close()

    def _req(self, ptr):
        r = self._reqs.get(ptr)
        if r is None:
            r = Request(self, ptr)
            self._reqs[ptr] = r
        return r

    def _own(self, req):
        if not isinstance(req, Request) or req.manager is not self:
            raise ValueError("not a request of this manager: %r" % (req,))
        return req.ptr

    def admit(self, tokens, ns=0, reserve_tokens=0):
        """Admits a prompt: an AdmitResult (req, cached_tokens, slots of the
        tokens to compute, at positions cached_tokens + i)."""
        t = _i32(tokens)
        slots = np.zeros(max(len(t), 1), np.int64)
        opt = S.KVManAdmitOptions()
        lib.clpa_kvman_admit_options_init(byref(opt))
        opt.reserve_tokens = reserve_tokens
        out = S.KVManAdmitResult()
        check(lib.clpa_kvman_admit_ex(self._handle, ns, _p32(t), len(t), byref(opt), _p64(slots),
                                      byref(out)))
        return AdmitResult(self._req(out.req), out.cached_tokens,
                           slots[:out.num_new_tokens].copy())

    def append(self, req, tokens):
        """Appends tokens to req; returns their slots."""
        t = _i32(tokens)
        slots = np.zeros(max(len(t), 1), np.int64)
        check(lib.clpa_kvman_append(self._handle, self._own(req), _p32(t), len(t), _p64(slots)))
        return slots[:len(t)].copy()

    def append_batch(self, reqs, tokens, counts=None):
        """Appends counts[i] tokens (one each when counts is None) to reqs[i],
        all or nothing; returns the slots in the order of tokens."""
        ptrs = (c_void_p * max(len(reqs), 1))(*[self._own(r) for r in reqs])
        t = _i32(tokens)
        c = None
        if counts is not None:
            c = _i32(counts)
            if len(c) != len(reqs):
                raise ValueError("append_batch: %d counts for %d requests" % (len(c), len(reqs)))
            want = int(np.maximum(c, 0).astype(np.int64).sum())
        else:
            want = len(reqs)
        if len(t) != want:
            raise ValueError("append_batch: %d tokens given, the counts take %d" % (len(t), want))
        slots = np.zeros(max(len(t), 1), np.int64)
        check(lib.clpa_kvman_append_batch(self._handle, ptrs, len(reqs),
                                          _p32(c) if c is not None else None, _p32(t),
                                          _p64(slots)))
        return slots[:len(t)].copy()

    def checkpoint(self, req, num_computed):
        check(lib.clpa_kvman_checkpoint(self._handle, self._own(req), num_computed))

    def finish(self, req, cache=True):
        """Ends req; with cache its whole blocks go into the prefix cache."""
        ptr = self._own(req)
        status = lib.clpa_kvman_finish(self._handle, ptr, int(bool(cache)))
        if status != S.Status.ERR_INVALID_ARG:  # released in every other case
            req._ptr = None
            self._reqs.pop(ptr, None)
        check(status)

    def evict(self, num_blocks):
        """Evicts cached prefixes until num_blocks are free; returns how many it freed."""
        freed = c_int32()
        check(lib.clpa_kvman_evict(self._handle, num_blocks, byref(freed)))
        return freed.value

    def reclaim(self):
        """Evicts down to the free watermark; returns the blocks freed."""
        freed = c_int32()
        check(lib.clpa_kvman_reclaim(self._handle, byref(freed)))
        return freed.value

    @property
    def num_running(self):
        return lib.clpa_kvman_num_running(self._handle)

    @property
    def running(self):
        """The running requests in row order."""
        n = self.num_running
        if n <= 0:
            return []
        arr = lib.clpa_kvman_running(self._handle)
        return [self._req(arr[i]) for i in range(n)]

    def batch(self, min_blocks_per_seq=0):
        """A Batch for batch_build (kept between steps so that only changed rows
        are rewritten)."""
        return Batch(self, min_blocks_per_seq)

    def batch_build(self, batch):
        """The block tables and lengths of every running request, row i being
        running[i]: a BatchView."""
        if batch.manager is not self:
            raise ValueError("batch_build: the batch belongs to another manager")
        v = S.BatchView()
        check(lib.clpa_kvman_batch_build(self._handle, batch._handle, byref(v)))
        return BatchView(v)

    def stats(self):
        out = S.KVManStats()
        lib.clpa_kvman_stats_get(self._handle, byref(out))
        return out

    def radix_stats(self):
        out = S.RadixStats()
        lib.clpa_radix_stats_get(lib.clpa_kvman_radix(self._handle), byref(out))
        return out

    def refcount(self, block):
        """The pool's reference count of block (0: free)."""
        return lib.clpa_pool_refcount(lib.clpa_kvman_pool(self._handle), int(block))

    def check(self):
        """Checks the pool's and the tree's invariants; raises ClpaError."""
        check(lib.clpa_pool_check(lib.clpa_kvman_pool(self._handle)))
        check(lib.clpa_radix_check(lib.clpa_kvman_radix(self._handle)))


def kv_layout(dtype, num_blocks, block_size, num_kv_heads, head_size, kind=S.KVLayoutKind.SPLIT_KEY,
              block_pitch=0):
    """clpa_kv_layout_init_kind: the layout of caches of that shape (for buffers
    the application allocates, and for a KVManager); kind a clpa.KVLayoutKind
    (split-key by default) or its name ("nhd"); block_pitch the elements from one
    block to the next where they are not packed (K and V interleaved in one buffer:
    clpa_layout.h), through clpa_kv_layout_check."""
    if isinstance(kind, str):
        kind = S.KVLayoutKind[kind.upper()]
    out = S.KVLayout()
    check(lib.clpa_kv_layout_init_kind(byref(out), int(kind), int(dtype_of(dtype)), num_blocks,
                                       block_size, num_kv_heads, head_size))
    if block_pitch:
        out.block_pitch = block_pitch
        check(lib.clpa_kv_layout_check(byref(out), byref(out)))
    return out
