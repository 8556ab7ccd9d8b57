"""Fixtures of the clpa package's tests: a seeded generator whose seed is
printed (pytest shows it on failure; CLPA_TEST_SEED=N replays), and a
PyOpenCL queue on the device clpa itself would pick ($CLPA_DEVICE, else
the first GPU, else the first device) with a clpa.Context wrapping it."""

import os

import numpy as np
import pytest

import clpa


@pytest.fixture
def rng(request):
    seed = int(os.environ.get("CLPA_TEST_SEED") or np.random.SeedSequence().entropy % 2**32)
    print("%s: seed %d (CLPA_TEST_SEED=%d replays it)" % (request.node.name, seed, seed))
    return np.random.default_rng(seed)


@pytest.fixture(scope="session")
def cl_queue():
    import pyopencl as cl
    info = clpa.devices()[clpa.device_select()]
    device = cl.get_platforms()[info.platform_index].get_devices()[info.device_index]
    return cl.CommandQueue(cl.Context([device]))


@pytest.fixture(scope="session")
def ctx(cl_queue):
    c = clpa.Context(queue=cl_queue)
    yield c
    c.close()
