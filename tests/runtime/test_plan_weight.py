"""What keeping a plan costs the plan cache (runtime/plan/record.py, `kernel_bytes`): the
arrays its kernels made for themselves, and not the memory every size's plan shares (the
method's buffers, the family's scratch)."""
from functools import partial

import numpy as np

import fluid
from fluid_interactive.ops.plan_state import PlanState
from fluid_interactive.runtime.plan.buffers import PlanMemory
from fluid_interactive.runtime.plan.record import kernel_bytes


class _Held:
    """An object of the package holding an array (as a kernel's helper does)."""

    def __init__(self, array):
        self.array = array

    def run(self):
        return self.array


def _plan_function(names: dict):
    """A stand-in for a generated function: what it reaches is its globals."""
    return type("Generated", (), {"__globals__": names})()


def test_arrays_a_kernel_made_are_counted_however_it_holds_them():
    own = [np.zeros(n, np.float32) for n in (10, 20, 30, 40, 50)]
    closure_array, method_array, partial_array, default_array, attribute_array = own

    def in_closure():
        return closure_array

    def with_default(out=default_array):
        return out

    with_default.kept = attribute_array

    names = {"k0": in_closure, "k1": _Held(method_array).run,
             "k2": partial(np.add, partial_array), "k3": with_default,
             "again": in_closure}   # one array reached twice counts once
    weight = kernel_bytes(_plan_function(names), PlanState(), PlanMemory(np))
    assert weight == sum(a.nbytes for a in own)


def test_views_of_shared_memory_and_scratch_are_not_the_plans():
    memory, state = PlanMemory(np), PlanState()
    block = memory.take(("float32", 0), 1000)
    scratch_view = state.scratch.take(np, "columns", (50, 10), "float32")
    own = np.ones(7, np.float64)
    names = {"k0": _Held(block[:100].reshape(10, 10)), "k1": _Held(scratch_view[3:]),
             "k2": _Held(own)}
    assert kernel_bytes(_plan_function(names), state, memory) == own.nbytes


class _Conv(fluid.Program):
    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[1, 12, 12], dtype="float32")
        h = fluid.layers.conv2d(x, num_filters=8, filter_size=3, act="relu")
        return fluid.layers.fc(input=h, size=4)


def test_a_convolutions_columns_are_weighed_once_for_every_batch_size():
    """The columns are the family's scratch (ops/scratch.py): a convolution keeps a view of
    them after its call (its gradient reads them), and counting that view per plan made
    each size's plan weigh the columns' bytes again, so the cache dropped plans early."""
    prog = _Conv().Compile(seed=0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 1, 12, 12)).astype("float32")
    want = prog.infer(x)
    for size in (30, 31, 32, 33, 40):
        np.testing.assert_allclose(prog.infer(x[:size]), want[:size], rtol=1e-5, atol=1e-6)
    runner = prog.infer.runner
    (family,) = runner.lanes[0].families.values()
    assert family.scratch.nbytes >= 40 * 100 * 9 * 4   # the columns at batch 40
    assert len(runner.plans) == 5
    assert runner.cache.nbytes < family.scratch.nbytes / 2, (runner.cache.nbytes,
                                                             family.scratch.nbytes)
