"""The host side through the package: the KV manager and the radix cache
driven by short random operation sequences and checked after every step
against plain Python models (what is cached, who holds which block), plus
the errors a caller sees. No device."""

import gc

import numpy as np
import pytest

import clpa


def prompt(rng, prefixes, bs):
    """A prompt that often starts with one of a few shared prefixes."""
    head = list(prefixes[rng.integers(len(prefixes))]) if rng.random() < 0.8 else []
    cut = rng.integers(0, len(head) + 1) if head else 0
    tail = rng.integers(0, 50, size=rng.integers(1, 3 * bs)).tolist()
    return head[:cut] + tail


# ---------------------------------------------------------------------------
# KV manager
# ---------------------------------------------------------------------------

class KVModel:
    """What the manager must hold: running requests in row order with their
    tokens, and every whole-block prefix ever published to the cache."""

    def __init__(self, bs):
        self.bs = bs
        self.rows = []          # [Request], row order
        self.tokens = {}        # Request -> [tokens]
        self.ns = {}
        self.published = set()  # (ns, tuple of tokens): whole-block prefixes

    def publish(self, ns, tokens, n):
        for j in range(1, n // self.bs + 1):
            self.published.add((ns, tuple(tokens[:j * self.bs])))

    def longest_hit(self, ns, tokens):
        """The longest published prefix, leaving one token to compute."""
        best = 0
        for j in range(1, (len(tokens) - 1) // self.bs + 1):
            if (ns, tuple(tokens[:j * self.bs])) in self.published:
                best = j * self.bs
        return best


def check_manager(km, model):
    bs = model.bs
    km.check()
    st = km.stats()
    assert st.running == len(model.rows) == km.num_running
    assert km.running == model.rows
    assert st.blocks_free + st.blocks_used == st.blocks_total
    holders = {}
    for row, req in enumerate(model.rows):
        toks = model.tokens[req]
        assert req.row == row
        assert req.num_tokens == len(toks) and req.tokens.tolist() == toks
        assert req.ns == model.ns[req]
        table = req.block_table
        assert len(table) == -(-len(toks) // bs)
        assert len(set(table.tolist())) == len(table), "a request holds a block twice"
        # slot = table[t / bs] * bs + t % bs, for every token
        t = np.arange(len(toks))
        assert (req.slots() == table[t // bs].astype(np.int64) * bs + t % bs).all()
        for i, b in enumerate(table.tolist()):
            holders.setdefault(b, []).append((req, i))
    for b, hs in holders.items():
        assert km.refcount(b) >= len(hs)
        if len(hs) > 1:
            # A shared block is a whole block at the same position of the
            # same token prefix in the same namespace.
            keys = {(model.ns[r], i, tuple(model.tokens[r][:(i + 1) * bs])) for r, i in hs}
            assert len(keys) == 1, "block %d shared by different prefixes: %s" % (b, keys)
            assert all(len(model.tokens[r]) >= (i + 1) * bs for r, i in hs)


def test_kvman_random_ops_against_a_model(rng):
    bs, num_blocks = 4, 64
    km = clpa.KVManager(num_blocks=num_blocks, block_size=bs, free_watermark=4)
    model = KVModel(bs)
    prefixes = [rng.integers(100, 200, size=n).tolist() for n in (8, 12, 16)]
    batch = km.batch()
    last_rows = None  # (request, block table) per row at the previous build
    counts = {"admit": 0, "hit": 0, "exhausted": 0, "finish": 0, "evicted": 0}
    for step in range(600):
        op = rng.random()
        running = model.rows
        if op < 0.3 or not running:
            toks, ns = prompt(rng, prefixes, bs), int(rng.integers(2))
            want = model.longest_hit(ns, toks)
            evicted_before = km.stats().evicted_blocks
            try:
                r = km.admit(toks, ns=ns, reserve_tokens=int(rng.integers(0, 8)))
            except clpa.ClpaError as e:
                assert e.name == "CLPA_ERR_POOL_EXHAUSTED", e
                assert "free" in e.message  # clpa names the shortage
                counts["exhausted"] += 1
            else:
                counts["admit"] += 1
                counts["hit"] += r.cached_tokens > 0
                assert r.cached_tokens % bs == 0 and r.cached_tokens <= want
                if km.stats().evicted_blocks == evicted_before == 0:
                    assert r.cached_tokens == want  # nothing evicted: every published prefix hits
                assert r.num_new_tokens == len(toks) - r.cached_tokens
                assert (r.slots == r.req.slots(r.cached_tokens)).all()
                model.rows.append(r.req)
                model.tokens[r.req], model.ns[r.req] = toks, ns
        elif op < 0.45:
            req = running[rng.integers(len(running))]
            toks = rng.integers(0, 50, size=rng.integers(1, bs + 2)).tolist()
            try:
                slots = km.append(req, toks)
            except clpa.ClpaError as e:
                assert e.name == "CLPA_ERR_POOL_EXHAUSTED", e
            else:
                n = len(model.tokens[req])
                assert (slots == req.slots(n)).all()
                model.tokens[req] += toks
        elif op < 0.6:
            cnt = rng.integers(0, 3, size=len(running))
            toks = rng.integers(0, 50, size=int(cnt.sum())).tolist()
            before = [len(model.tokens[r]) for r in running]
            try:
                slots = km.append_batch(running, toks, counts=cnt)
            except clpa.ClpaError as e:
                assert e.name == "CLPA_ERR_POOL_EXHAUSTED", e
            else:
                at = 0
                for r, c, n in zip(running, cnt.tolist(), before):
                    assert (slots[at:at + c] == r.slots(n, c)).all()
                    model.tokens[r] += toks[at:at + c]
                    at += c
        elif op < 0.7:
            req = running[rng.integers(len(running))]
            n = int(rng.integers(0, len(model.tokens[req]) + 1))
            km.checkpoint(req, n)
            model.publish(model.ns[req], model.tokens[req], n)
        elif op < 0.88:
            row = int(rng.integers(len(running)))
            req, cache = running[row], bool(rng.random() < 0.8)
            km.finish(req, cache=cache)
            counts["finish"] += 1
            if cache:
                model.publish(model.ns[req], model.tokens[req], len(model.tokens[req]))
            last = model.rows.pop()
            if last is not req:
                model.rows[row] = last
            del model.tokens[req]
            assert not req.alive
            with pytest.raises(ValueError):
                req.num_tokens
        elif op < 0.94:
            want = int(rng.integers(0, num_blocks + 1))
            counts["evicted"] += km.evict(want)
            st = km.stats()
            assert st.blocks_free >= want or st.blocks_evictable == 0
        else:
            counts["evicted"] += km.reclaim()
            st = km.stats()
            assert st.blocks_free >= 4 or st.blocks_evictable == 0
        check_manager(km, model)
        if rng.random() < 0.3:
            view = km.batch_build(batch)
            rows = [(r, r.block_table) for r in model.rows]
            assert view.num_seqs == len(rows)
            assert view.context_lens.tolist() == [len(model.tokens[r]) for r in model.rows]
            assert view.max_context_len == max(view.context_lens.tolist(), default=0)
            for i, (r, table) in enumerate(rows):
                assert (view.block_tables[i, :len(table)] == table).all()
                assert (view.block_tables[i, len(table):] == 0).all()  # padding: block 0
                if last_rows is not None and i < len(last_rows):
                    pr, pt = last_rows[i]
                    if pr != r or len(pt) != len(table) or (pt != table).any():
                        assert i in view.changed_rows, "row %d changed but is not listed" % i
            last_rows = rows
    # The sequence did what it is for: hits, evictions and a full pool.
    assert counts["hit"] > 0 and counts["finish"] > 0 and km.stats().evicted_blocks > 0, counts
    for r in list(model.rows):
        km.finish(r)
    km.close()
    assert not any(r.alive for r in model.tokens)


def test_kvman_errors_and_lifetime():
    km = clpa.KVManager(num_blocks=4, block_size=4)
    with pytest.raises(clpa.ClpaError) as e:
        km.admit([])
    assert e.value.name == "CLPA_ERR_INVALID_ARG" and "num_tokens" in e.value.message
    r = km.admit(list(range(10)))
    assert (r.cached_tokens, r.num_new_tokens) == (0, 10)
    with pytest.raises(clpa.ClpaError) as e:
        km.admit(list(range(100, 110)))
    assert e.value.status == clpa.Status.ERR_POOL_EXHAUSTED
    other = clpa.KVManager(num_blocks=4, block_size=4)
    with pytest.raises(ValueError):
        other.append(r.req, [1])
    with pytest.raises(clpa.ClpaError) as e:
        clpa.KVManager(num_blocks=4, block_size=4, free_watermark=5)
    assert "free_watermark" in e.value.message
    km.close()
    assert not r.req.alive
    with pytest.raises(ValueError):
        km.admit([1, 2])


# ---------------------------------------------------------------------------
# Radix cache
# ---------------------------------------------------------------------------

def test_radix_random_ops_against_a_model(rng):
    bs, num_blocks = 2, 48
    pool = clpa.Pool(num_blocks, bs)
    tree = clpa.RadixCache(pool)
    model = {}     # (ns, prefix tokens), a whole number of blocks -> the block of its last one
    locked = []    # (node, ns, tokens) of each lock held
    prefixes = [rng.integers(0, 6, size=n).tolist() for n in (6, 10)]
    seen = {"evicted": 0, "hit": 0}

    def cached_prefix(ns, toks):
        blocks = []
        for j in range(1, len(toks) // bs + 1):
            b = model.get((ns, tuple(toks[:j * bs])))
            if b is None:
                break
            blocks.append(b)
        return blocks

    for step in range(800):
        op = rng.random()
        toks, ns = prompt(rng, prefixes, bs), int(rng.integers(2))
        if op < 0.35:
            nb = len(toks) // bs
            if pool.stats().free < nb:
                tree.evict(nb)
                for key in [k for k, b in model.items() if pool.refcount(b) == 0]:
                    del model[key]
            if pool.stats().free < nb:
                continue
            have = cached_prefix(ns, toks)
            mine = pool.alloc(nb)
            res = tree.insert(toks, mine, ns=ns)
            assert res.num_tokens == nb * bs and res.cached_tokens == len(have) * bs
            for j in range(len(have), nb):
                model[(ns, tuple(toks[:(j + 1) * bs]))] = int(mine[j])
            for b in mine:     # the tree keeps its own references
                pool.unref(b)
        elif op < 0.65:
            m = tree.match(toks, ns=ns)
            want = cached_prefix(ns, toks)
            assert m.blocks.tolist() == want and m.num_tokens == len(want) * bs
            seen["hit"] += bool(want)
            if want and rng.random() < 0.5:
                tree.lock(m.node)
                locked.append((m.node, ns, toks[:m.num_tokens]))
                assert m.node.info()["lock_count"] >= 1
        elif op < 0.8 and locked:
            node, _, _ = locked.pop(int(rng.integers(len(locked))))
            tree.unlock(node)
        else:
            want = int(rng.integers(1, 12))
            freed = tree.evict(want)
            gone = [k for k, b in model.items() if pool.refcount(b) == 0]
            assert freed == len(gone)
            assert freed >= want or tree.stats().evictable_blocks == 0
            for key in gone:
                del model[key]
            seen["evicted"] += freed
            # Leaves go first: no cached prefix lost its parent.
            for (kns, ktoks) in model:
                if len(ktoks) > bs:
                    assert (kns, ktoks[:-bs]) in model
        # Locked prefixes are never evicted.
        for node, lns, ltoks in locked:
            assert len(cached_prefix(lns, ltoks)) == len(ltoks) // bs
        tree.check()
        pool.check()
        st = tree.stats()
        assert st.cached_blocks == len(model)
        assert st.evictable_blocks + st.protected_blocks == st.cached_blocks
        assert pool.stats().free == num_blocks - len(model)
        assert all(pool.refcount(b) == 1 for b in model.values())
    assert seen["evicted"] > 0 and seen["hit"] > 0, seen
    for node, _, _ in locked:
        tree.unlock(node)
    assert tree.stats().protected_blocks == 0
    tree.evict(num_blocks)
    fresh = [7, 7, 7, 7]
    res = tree.insert(fresh, pool.alloc(2), ns=5)
    with pytest.raises(clpa.ClpaError) as e:
        tree.unlock(res.node)
    assert e.value.name == "CLPA_ERR_STATE"
    with pytest.raises(clpa.ClpaError) as e:
        tree.insert([1, 2], [num_blocks + 5])
    assert e.value.name == "CLPA_ERR_INVALID_ARG"
    tree.close()
    pool.close()


def test_radix_refuses_another_trees_node():
    """A node handle carries its tree: lock, unlock and node_info refuse one of
    another tree (lock walked its parents to a root it never reached: a crash)."""
    p1, p2 = clpa.Pool(8, 2), clpa.Pool(8, 2)
    t1, t2 = clpa.RadixCache(p1), clpa.RadixCache(p2)
    n1 = t1.insert([1, 2, 3, 4], p1.alloc(2)).node
    for call in (t2.lock, t2.unlock, t2.node_info):
        with pytest.raises(ValueError, match="not a node of this tree"):
            call(n1)
    t1.lock(n1)
    with pytest.raises(ValueError, match="not a node of this tree"):
        t2.unlock(n1)
    t1.unlock(n1)
    t1.check()
    t2.check()
    assert t2.stats().protected_blocks == 0 and t2.stats().cached_blocks == 0


def record_destroys(monkeypatch, classes):
    """The names of classes whose C object is destroyed, in order."""
    order = []
    for cls in classes:
        def destroy(h, real=cls._destroy, name=cls.__name__):
            order.append(name)
            real(h)
        monkeypatch.setattr(cls, "_destroy", staticmethod(destroy))
    return order


def test_a_cycle_destroys_children_first(monkeypatch):
    """A pool and its tree, a manager and its batch that die together in a reference
    cycle: the collector clears weak references (the parent's set of children) before it
    finalizes anything, then finalizes in its own order (the parent first, made first).
    The parent went first, and clpa_radix_destroy unreferenced its blocks in the freed
    pool, clpa_batch_destroy read the freed pool's allocator (valgrind: invalid reads)."""
    order = record_destroys(monkeypatch, (clpa.Pool, clpa.RadixCache, clpa.KVManager,
                                          clpa.Batch))
    pool = clpa.Pool(8, 2)
    tree = clpa.RadixCache(pool)
    tree.insert([1, 2, 3, 4], pool.alloc(2))
    km = clpa.KVManager(num_blocks=8, block_size=2)
    batch = km.batch()
    km.admit([1, 2, 3])
    km.batch_build(batch)
    cycle = [pool, tree, km, batch]
    cycle.append(cycle)
    del pool, tree, km, batch, cycle
    gc.collect()
    assert sorted(order) == ["Batch", "KVManager", "Pool", "RadixCache"], order
    assert order.index("RadixCache") < order.index("Pool"), order
    assert order.index("Batch") < order.index("KVManager"), order


def test_pool_errors():
    pool = clpa.Pool(3, 16)
    blocks = pool.alloc(3)
    assert sorted(blocks.tolist()) == [0, 1, 2] and pool.stats().free == 0
    with pytest.raises(clpa.ClpaError) as e:
        pool.alloc(1)
    assert e.value.name == "CLPA_ERR_POOL_EXHAUSTED"
    pool.unref(blocks[0])
    with pytest.raises(clpa.ClpaError) as e:
        pool.unref(blocks[0])
    assert e.value.name == "CLPA_ERR_STATE" and str(int(blocks[0])) in e.value.message
    # an id past 32 bits is refused, not cut to its low bits (2**32 + 1 was block 1)
    before = pool.refcount(blocks[1])
    with pytest.raises(Exception, match="does not fit c_int"):
        pool.ref(2**32 + int(blocks[1]))
    assert pool.refcount(blocks[1]) == before
    with pytest.raises(clpa.ClpaError) as e:  # more than the pool holds: no array that long
        pool.alloc(2**31 - 1)
    assert e.value.name == "CLPA_ERR_POOL_EXHAUSTED"
