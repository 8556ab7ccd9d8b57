"""The device side through the package, on PyOpenCL buffers: every result
against NumPy in double precision on fresh random inputs, with the outputs
poisoned (NaN) before the run.

Tolerance: with precision "f32" every path computes in f32 from the f32
queries as given (no tensor-core rounding of the query to the cache's
dtype); with q, k, v in [-1, 1) and head size 64 an f32 sum is off by far
less than TOL_ABS + TOL_REL * |reference| (about 1e-7 on PoCL; test_decode.c
holds the C paths to the same bound). Caches are f16; the reference reads them back, so their
rounding is not part of the error (reshape_and_cache's rounding is
checked on its own, bit for bit against NumPy's float16)."""

import ctypes
import gc

import numpy as np
import pyopencl as cl
import pytest

import clpa

TOL_ABS, TOL_REL = 1e-4, 1e-4
HEADS, KV_HEADS, HEAD, BS = 8, 2, 64, 16   # GQA 4:1, as examples/decode_basic.c
MF = cl.mem_flags


def to_device(ctx, a):
    return cl.Buffer(ctx.cl_context, MF.READ_WRITE | MF.COPY_HOST_PTR,
                     hostbuf=np.ascontiguousarray(a))


def poisoned(ctx, shape, dtype=np.float32):
    return to_device(ctx, np.full(shape, np.nan, dtype))


def read(ctx, buf, shape, dtype=np.float32):
    out = np.empty(shape, dtype)
    cl.enqueue_copy(ctx.queue, out, buf)
    return out


def read_cache(ctx, cache, layer):
    """Layer layer's caches as token-major float64 [num_blocks, block_size, kv_heads, head]."""
    kv = cache.layout
    k = read(ctx, cache.key(layer), kv.key_shape, kv.numpy_dtype)
    v = read(ctx, cache.value(layer), kv.value_shape, kv.numpy_dtype)
    # key [b, h, d / x, t, x] -> [b, t, h, d]; value [b, h, d, t] -> [b, t, h, d]
    k = k.transpose(0, 3, 1, 2, 4).reshape(kv.num_blocks, kv.block_size, kv.num_kv_heads, -1)
    v = v.transpose(0, 3, 1, 2)
    return k.astype(np.float64), v.astype(np.float64)


def fill_cache(ctx, cache, layer, rng):
    """Random f16 contents in every slot of a layer (no zeros to hide behind)."""
    kv = cache.layout
    for buf, shape in ((cache.key(layer), kv.key_shape), (cache.value(layer), kv.value_shape)):
        cl.enqueue_copy(ctx.queue, buf, rng.uniform(-1, 1, shape).astype(kv.numpy_dtype))


def attend(q, k, v, scale):
    """Dense softmax attention in float64: q [n, d], k and v [L, d]; (out, lse)."""
    logits = scale * q @ k.T
    m = logits.max(axis=1, keepdims=True)
    e = np.exp(logits - m)
    s = e.sum(axis=1, keepdims=True)
    return (e / s) @ v, (m + np.log(s))[:, 0]


def ref_paged(q_rows, positions, table, kc, vc, scale, causal_end):
    """Reference over the paged caches: query rows [n, heads, head] at
    positions, keys of table's tokens up to causal_end(position)."""
    group = HEADS // KV_HEADS
    out = np.zeros((len(q_rows), HEADS, HEAD))
    lse = np.zeros((len(q_rows), HEADS))
    for i, (q, p) in enumerate(zip(q_rows, positions)):
        n = causal_end(p)
        t = np.arange(n)
        k, v = kc[table[t // BS], t % BS], vc[table[t // BS], t % BS]  # [n, kv_heads, head]
        for h in range(HEADS):
            o, l = attend(q[h][None].astype(np.float64), k[:, h // group], v[:, h // group], scale)
            out[i, h], lse[i, h] = o[0], l[0]
    return out, lse


def assert_close(got, want, what):
    err = np.abs(got - want) - (TOL_ABS + TOL_REL * np.abs(want))
    worst = np.unravel_index(np.argmax(err), err.shape)
    assert np.isfinite(got).all(), "%s: not finite at %s" % (
        what, np.argwhere(~np.isfinite(got))[:3].tolist())
    assert err[worst] <= 0, "%s: worst element %s: %r vs reference %r" % (
        what, worst, got[worst], want[worst])


@pytest.fixture
def cache(ctx):
    c = clpa.Cache(ctx, num_layers=2, num_kv_heads=KV_HEADS, head_size=HEAD, block_size=BS,
                   dtype="f16", num_blocks=32)
    yield c
    c.close()


def test_context_wraps_the_pyopencl_queue(ctx, cl_queue):
    assert ctx.queue is cl_queue and ctx.cl_context == cl_queue.context
    assert clpa.lib.clpa_context_cl_queue(ctx._handle) == cl_queue.int_ptr
    assert ctx.device_info().name.decode() == cl_queue.device.name.strip()
    with clpa.Context(cl_queue.context) as c2:  # a context alone: a new in-order queue on it
        assert c2.cl_context == cl_queue.context and c2.queue != cl_queue
        assert clpa.lib.clpa_context_cl_queue(c2._handle) == c2.queue.int_ptr
    # clpa's own context, handed back as PyOpenCL objects
    own = clpa.Context(device="%d:%d" % (ctx.device_info().platform_index,
                                         ctx.device_info().device_index))
    assert own.queue.int_ptr == clpa.lib.clpa_context_cl_queue(own._handle)
    own.smoke_test()
    c = own.cache(num_kv_heads=1, head_size=64, num_blocks=2)
    own.close()  # closes the cache first
    with pytest.raises(ValueError):
        c.layout
    # A header of another ABI is refused by name (what the binding's
    # HEADER_VERSION guards against).
    cfg, h = clpa.structs.ContextConfig(), ctypes.c_void_p()
    clpa.lib.clpa_context_config_init_version(cfg, clpa.HEADER_VERSION + 100)
    with pytest.raises(clpa.ClpaError) as e:
        clpa.check(clpa.lib.clpa_context_create(cfg, ctypes.byref(h)))
    assert e.value.status == clpa.Status.ERR_VERSION and not h.value
    with pytest.raises(clpa.ClpaError) as e:
        clpa.Context(device="no such device, really")
    assert e.value.name == "CLPA_ERR_DEVICE_NOT_FOUND" and "no such device" in e.value.message


def test_a_cycle_destroys_caches_and_plans_first(cl_queue, monkeypatch):
    """A context, its caches and a plan that die together in a reference cycle: the
    collector clears the context's weak set of children, then finalizes the context
    first (made first). clpa_cache_destroy of a host cache then waited on the freed
    context's queue (a crash), and C wants plans and caches released before it."""
    order = []
    for cls in (clpa.Context, clpa.Cache, clpa.Plan):
        def destroy(h, real=cls._destroy, name=cls.__name__):
            order.append(name)
            real(h)
        monkeypatch.setattr(cls, "_destroy", staticmethod(destroy))
    c = clpa.Context(queue=cl_queue)
    shape = dict(num_kv_heads=KV_HEADS, head_size=HEAD, block_size=BS, num_blocks=4)
    cycle = [c, c.cache(**shape), c.cache(placement="host", **shape)]
    cycle.append(c.plan_decode(num_seqs=1, num_heads=HEADS, cache=cycle[1],
                               max_blocks_per_seq=4, max_context_len=4 * BS, scale=0.125))
    cycle.append(cycle)
    del c, cycle
    gc.collect()
    assert sorted(order) == ["Cache", "Cache", "Context", "Plan"], order
    assert order[-1] == "Context", order


def test_reshape_and_cache_bit_for_bit(ctx, cache, rng):
    kv = cache.layout
    row = KV_HEADS * HEAD
    nslots = kv.num_blocks * BS
    # First every slot of layer 1, in a random order ...
    order = rng.permutation(nslots).astype(np.int64)
    k1 = rng.uniform(-4, 4, (nslots, row)).astype(np.float32)
    v1 = rng.uniform(-4, 4, (nslots, row)).astype(np.float32)
    ev = ctx.reshape_and_cache(cache=cache, layer=1, num_tokens=nslots, key=to_device(ctx, k1),
                               value=to_device(ctx, v1), slot_mapping=to_device(ctx, order))
    # ... then some of them again, from a fused QKV buffer, with padding slots (-1).
    n = 40
    qkv = rng.uniform(-4, 4, (n, (HEADS + 2 * KV_HEADS) * HEAD)).astype(np.float32)
    slots = rng.choice(nslots, n, replace=False).astype(np.int64)
    slots[rng.random(n) < 0.2] = -1
    ev = ctx.reshape_and_cache(cache=cache, layer=1, num_tokens=n, src_dtype="f32",
                               key=to_device(ctx, qkv), value=to_device(ctx, qkv),
                               key_offset=HEADS * HEAD, value_offset=(HEADS + KV_HEADS) * HEAD,
                               key_stride=qkv.shape[1], value_stride=qkv.shape[1],
                               slot_mapping=to_device(ctx, slots), wait_for=[ev])
    assert isinstance(ev, cl.Event)
    ev.wait()
    ctx.check_faults()
    want_k, want_v = np.zeros((nslots, row), np.float16), np.zeros((nslots, row), np.float16)
    want_k[order], want_v[order] = k1.astype(np.float16), v1.astype(np.float16)
    keep = slots >= 0
    want_k[slots[keep]] = qkv[keep, HEADS * HEAD:(HEADS + KV_HEADS) * HEAD].astype(np.float16)
    want_v[slots[keep]] = qkv[keep, (HEADS + KV_HEADS) * HEAD:].astype(np.float16)
    k, v = read_cache(ctx, cache, 1)
    k = k.reshape(nslots, row).astype(np.float16)
    v = v.reshape(nslots, row).astype(np.float16)
    assert (k.view(np.uint16) == want_k.view(np.uint16)).all()
    assert (v.view(np.uint16) == want_v.view(np.uint16)).all()
    # the layout's index formula agrees with the NumPy shapes used above
    d, t, b, h = 37, 5, 3, 1
    assert clpa.lib.clpa_kv_key_index(kv, b, h, t, d) == np.ravel_multi_index(
        (b, h, d // kv.x, t, d % kv.x), kv.key_shape)
    assert clpa.lib.clpa_kv_value_index(kv, b, h, t, d) == np.ravel_multi_index(
        (b, h, d, t), kv.value_shape)
    # layer 0 was never written
    k0, v0 = read_cache(ctx, cache, 0)
    assert not k0.any() and not v0.any()


def test_decode_against_numpy(ctx, cache, rng):
    lens = np.array([1, 17, 100, 250, 64], np.int32)  # up to 16 blocks a sequence
    nseq, width = len(lens), 16
    for layer in (0, 1):
        fill_cache(ctx, cache, layer, rng)
    tables = np.stack([rng.choice(cache.layout.num_blocks, width, replace=False)
                       for _ in range(nseq)]).astype(np.int32)
    q = rng.uniform(-1, 1, (nseq, HEADS, HEAD)).astype(np.float32)
    scale = 1 / np.sqrt(HEAD)
    bt, cl_lens = to_device(ctx, tables), to_device(ctx, lens)
    qb = to_device(ctx, q)
    shape = dict(num_seqs=nseq, num_heads=HEADS, max_blocks_per_seq=width,
                 max_context_len=int(lens.max()), scale=scale, precision="f32")
    outs = {}
    for layer in (0, 1):
        out, lse = poisoned(ctx, q.shape), poisoned(ctx, (nseq, HEADS))
        ctx.decode(cache=cache, layer=layer, query=qb, block_tables=bt, context_lens=cl_lens,
                   out=out, lse=lse, host_context_lens=lens, **shape).wait()
        kc, vc = read_cache(ctx, cache, layer)
        want, want_lse = np.zeros(q.shape), np.zeros((nseq, HEADS))
        for s in range(nseq):
            o, l = ref_paged(q[s][None], [lens[s] - 1], tables[s], kc, vc, scale, lambda p: p + 1)
            want[s], want_lse[s] = o[0], l[0]
        outs[layer] = read(ctx, out, q.shape)
        assert_close(outs[layer], want, "decode layer %d out" % layer)
        assert_close(read(ctx, lse, (nseq, HEADS)), want_lse, "decode layer %d lse" % layer)
    ctx.check_faults()
    # A plan made once runs each layer with the same results, bit for bit, also
    # over raw buffers with the cache's layout.
    plan = ctx.plan_decode(cache=cache, host_context_lens=lens, **shape)
    info = plan.describe()
    assert info.heads_per_group >= 1
    for layer in (0, 1):
        out = poisoned(ctx, q.shape)
        plan.run(cache=cache, layer=layer, query=qb, block_tables=bt, context_lens=cl_lens,
                 out=out).wait()
        assert (read(ctx, out, q.shape) == outs[layer]).all()
    out = poisoned(ctx, q.shape)
    ctx.decode(key_cache=cache.key(1), value_cache=cache.value(1), kv=cache.layout, query=qb,
               block_tables=bt, context_lens=cl_lens, out=out, host_context_lens=lens,
               **shape).wait()
    assert (read(ctx, out, q.shape) == outs[1]).all()
    plan.close()
    # A block id outside the cache is skipped and reported.
    bad = tables.copy()
    bad[2, 0] = 1000
    ctx.decode(cache=cache, layer=0, query=qb, block_tables=to_device(ctx, bad),
               context_lens=cl_lens, out=poisoned(ctx, q.shape), **shape)
    with pytest.raises(clpa.ClpaError) as e:
        ctx.check_faults()
    assert e.value.name == "CLPA_ERR_BAD_BLOCK" and e.value.faults & 1


def test_prefill_against_numpy(ctx, cache, rng):
    cached = np.array([40, 0, 17], np.int32)
    new = np.array([25, 30, 1], np.int32)
    cu = np.concatenate([[0], np.cumsum(new)]).astype(np.int32)
    width = 8
    fill_cache(ctx, cache, 0, rng)
    tables = np.stack([rng.choice(cache.layout.num_blocks, width, replace=False)
                       for _ in cached]).astype(np.int32)
    q = rng.uniform(-1, 1, (cu[-1], HEADS, HEAD)).astype(np.float32)
    scale = 1 / np.sqrt(HEAD)
    out, lse = poisoned(ctx, q.shape), poisoned(ctx, (cu[-1], HEADS))
    ev = ctx.prefill(num_seqs=len(cached), num_heads=HEADS, cache=cache, layer=0,
                     max_blocks_per_seq=width, cu_seqlens_q=cu, cached_lens=cached, scale=scale,
                     precision=clpa.Precision.F32,
                     query=to_device(ctx, q), block_tables=to_device(ctx, tables), out=out,
                     lse=lse)
    ev.wait()
    ctx.check_faults()
    kc, vc = read_cache(ctx, cache, 0)
    want, want_lse = np.zeros(q.shape), np.zeros((cu[-1], HEADS))
    for s in range(len(cached)):
        rows = slice(cu[s], cu[s + 1])
        pos = cached[s] + np.arange(new[s])
        want[rows], want_lse[rows] = ref_paged(q[rows], pos, tables[s], kc, vc, scale,
                                               lambda p: p + 1)
    assert_close(read(ctx, out, q.shape), want, "prefill out")
    assert_close(read(ctx, lse, (cu[-1], HEADS)), want_lse, "prefill lse")
    # Host arrays too short for num_seqs are refused before C reads them.
    with pytest.raises(ValueError, match="cu_seqlens_q"):
        ctx.prefill(num_seqs=3, num_heads=HEADS, cache=cache, cu_seqlens_q=cu[:3],
                    cached_lens=cached)


def test_engine_flow_with_a_prefix_hit(ctx, cache, rng):
    """KV manager + cache: a prompt prefilled and finished into the prefix
    cache, a second prompt that shares its first 32 tokens (computing only
    the rest), then a decode step; against attention over the tokens' K/V."""
    km = clpa.KVManager.from_layout(cache.layout)
    row, scale = KV_HEADS * HEAD, 1 / np.sqrt(HEAD)
    fill_cache(ctx, cache, 0, rng)

    def kv_of(n):
        return [rng.uniform(-1, 1, (n, row)).astype(np.float16).astype(np.float32)
                for _ in range(2)]

    def write(slots, k, v):
        ctx.reshape_and_cache(cache=cache, layer=0, num_tokens=len(slots), key=to_device(ctx, k),
                              value=to_device(ctx, v), slot_mapping=to_device(ctx, slots))

    def want(q, positions, k, v):
        k = k.reshape(-1, KV_HEADS, HEAD).astype(np.float64)
        v = v.reshape(-1, KV_HEADS, HEAD).astype(np.float64)
        out = np.zeros((len(q), HEADS, HEAD))
        for i, p in enumerate(positions):
            for h in range(HEADS):
                g = h // (HEADS // KV_HEADS)
                out[i, h] = attend(q[i, h][None].astype(np.float64), k[:p + 1, g], v[:p + 1, g],
                                   scale)[0][0]
        return out

    def prefill(req, cached, q):
        n = len(q)
        table = req.block_table
        out = poisoned(ctx, q.shape)
        ctx.prefill(num_seqs=1, num_heads=HEADS, cache=cache, layer=0,
                    max_blocks_per_seq=len(table), cu_seqlens_q=[0, n], cached_lens=[cached],
                    scale=scale, precision="f32", query=to_device(ctx, q),
                    block_tables=to_device(ctx, table), out=out)
        return read(ctx, out, q.shape)

    a_tokens = rng.integers(0, 1000, 45).tolist()
    ka, va = kv_of(45)
    ra = km.admit(a_tokens)
    assert ra.cached_tokens == 0
    write(ra.slots, ka, va)
    qa = rng.uniform(-1, 1, (45, HEADS, HEAD)).astype(np.float32)
    assert_close(prefill(ra.req, 0, qa), want(qa, range(45), ka, va), "prefill A")
    km.finish(ra.req)

    b_tokens = a_tokens[:32] + rng.integers(0, 1000, 20).tolist()
    rb = km.admit(b_tokens)
    assert rb.cached_tokens == 32 and rb.num_new_tokens == 20
    kb, vb = kv_of(20)
    write(rb.slots, kb, vb)
    k = np.concatenate([ka[:32], kb])
    v = np.concatenate([va[:32], vb])
    qb = rng.uniform(-1, 1, (20, HEADS, HEAD)).astype(np.float32)
    assert_close(prefill(rb.req, 32, qb), want(qb, range(32, 52), k, v), "prefill B over a hit")

    # One decode step: append a token, write its K/V, attend over all 53.
    slots = km.append_batch(km.running, [7])
    kd, vd = kv_of(1)
    write(slots, kd, vd)
    view = km.batch_build(km.batch())
    assert view.context_lens.tolist() == [53] and view.changed_rows.tolist() == [0]
    q = rng.uniform(-1, 1, (1, HEADS, HEAD)).astype(np.float32)
    out = poisoned(ctx, q.shape)
    ctx.decode(num_seqs=1, num_heads=HEADS, cache=cache, layer=0,
               max_blocks_per_seq=view.max_blocks_per_seq, max_context_len=view.max_context_len,
               scale=scale, precision="f32", query=to_device(ctx, q),
               block_tables=to_device(ctx, view.block_tables),
               context_lens=to_device(ctx, view.context_lens), out=out)
    k, v = np.concatenate([k, kd]), np.concatenate([v, vd])
    assert_close(read(ctx, out, q.shape), want(q, [52], k, v), "decode after the hit")
    ctx.check_faults()
    km.close()


def test_errors_name_the_field(ctx, cache):
    with pytest.raises(clpa.ClpaError) as e:
        ctx.decode(num_seqs=1, num_heads=3, cache=cache, max_blocks_per_seq=1, max_context_len=1)
    assert e.value.name == "CLPA_ERR_INVALID_ARG" and e.value.status == -30
    assert "num_heads" in e.value.message and e.value.message == ctx.last_error
    with pytest.raises(TypeError, match="num_head"):
        ctx.decode(num_head=8)
    with pytest.raises(TypeError, match="reserved"):
        ctx.decode(reserved=[1] * 8)  # stays 0, as clpa_decode_params_init leaves it
    with pytest.raises(TypeError, match="wait_for"):
        ctx.decode(event=None)
    with pytest.raises(ValueError, match="'tiles'"):
        ctx.decode(path="tiles")
    # past the field's type: refused, not cut to the low bits (2**32 + 1 would be 1 sequence)
    with pytest.raises(OverflowError, match="num_seqs: 4294967297 does not fit"):
        ctx.decode(num_seqs=2**32 + 1)
    with pytest.raises(OverflowError, match="host_context_lens"):
        ctx.decode(num_seqs=1, host_context_lens=[2**32 + 5])
    with pytest.raises(clpa.ClpaError) as e:
        clpa.Cache(ctx, num_kv_heads=2, head_size=64, num_blocks=4, block_size=0)
    assert "block_size" in e.value.message
