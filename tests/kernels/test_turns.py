"""A fused update writing its parameters over its gradients (runtime/plan/turns.py): two
plan instances take turns, each computing its gradients into the parameter array of the
generation it writes. Checked against the same program with a gradient arena of its own
(`LEND_MIN_BYTES` out of reach): bit-identical values with the compiled loops and with the
NumPy kernels in blocks, one array of the parameters' size less at the peak, and the state
contract kept while a user, the history or a failed step holds or leaves arrays behind."""
import tracemalloc

import numpy as np
import pytest
from adversarial.test_threads import assert_whole_steps
from kernels.test_tier import OPTIMIZERS, kernel_cache, tier_on  # noqa: F401

import fluid
from fluid_interactive.errors import KernelError
from fluid_interactive.frontend.variable import Variable
from fluid_interactive.kernels.tier import Kernel, PlanTier
from fluid_interactive.runtime.plan import runner as plan_runner

pytest.importorskip("numba")

#: the parameters of `mlp`: 150,794 float32 (603 KB), above the size given a lent arena
PARAM_BYTES = (32 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10) * 4


def mlp(optimizer, dropout=False, read_grad=False):
    """``dropout``: a random op in the step; ``read_grad``: the step also returns the sum
    of squares of a gradient, read after the update."""
    def net(x, train=False):
        with fluid.var_scope("net"):   # the same weights in both methods
            h = fluid.layers.fc(x, size=512, act="relu")
            if dropout and train:
                h = fluid.layers.dropout(h, dropout_prob=0.5)
            h = fluid.layers.fc(h, size=256, act="relu")
            return fluid.layers.fc(h, size=10)

    class MLP(fluid.Program):
        @fluid.network("x", "y")
        def train(self, x, y):
            x = fluid.layers.data(name="x", shape=[32], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="int64")
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(net(x, True),
                                                                             y))
            _, pairs = optimizer().minimize(loss)
            if read_grad:
                grad = pairs[0][1]
                return loss, fluid.layers.reduce_sum(fluid.layers.square(grad))
            return loss

        @fluid.network("x")
        def infer(self, x):
            return net(fluid.layers.data(name="x", shape=[32], dtype="float32"))
    return MLP


def batches(n=6, size=64):
    rng = np.random.default_rng(11)
    return [(rng.standard_normal((size, 32)).astype(np.float32),
             rng.integers(0, 10, (size, 1))) for _ in range(n)]


def compiled(cls, lend: bool, monkeypatch, compiled_kernels: bool = True):
    """The program compiled with or without the lent arena; with the compiled kernels
    loaded (their build awaited on a throwaway program first), or NumPy kernels only
    (the tier never switches: the updates over the gradients then run in blocks)."""
    monkeypatch.setattr(plan_runner, "LEND_MIN_BYTES", 256 << 10 if lend else 1 << 62)
    if compiled_kernels:
        warm = cls().Compile(seed=3)
        warm.train(*batches(1)[0])
        tier = warm.train.runner.plan_tier()
        assert tier is not None and tier.wait(300)
    else:
        monkeypatch.setattr(PlanTier, "start", lambda self: None)
    return cls().Compile(seed=3)


def train(prog, data):
    losses = [prog.train(x, y) for x, y in data]
    return losses, prog.parameters()


@pytest.mark.parametrize("compiled_kernels", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_values_are_those_of_a_plan_with_its_own_gradient_arena(name, compiled_kernels,
                                                                monkeypatch):
    cls, data = mlp(OPTIMIZERS[name]), batches()
    runs = []
    for lend in (False, True):
        prog = compiled(cls, lend, monkeypatch, compiled_kernels)
        runs.append(train(prog, data))
        if compiled_kernels:
            assert prog.train.tier == "compiled"
    (losses_own, params_own), (losses_lent, params_lent) = runs
    assert losses_lent == losses_own
    for k in params_own:
        assert np.array_equal(params_lent[k], params_own[k]), k


@pytest.mark.parametrize("case", ["dropout", "read_grad"])
def test_random_ops_and_gradients_read_after_the_update_give_the_same_values(case,
                                                                            monkeypatch):
    """A random op draws one stream whichever instance runs a call; a gradient read after
    the update is the gradient (such a plan keeps its own arena)."""
    cls, data = mlp(OPTIMIZERS["sgd"], **{case: True}), batches(size=16)
    results = []
    for lend in (False, True):
        prog = compiled(cls, lend, monkeypatch)
        results.append(train(prog, data))
        # the source says which loop the update runs
        lent = "over the gradients" in prog.train.source
        assert lent == (lend and case == "dropout"), prog.train.source
    (out_own, params_own), (out_lent, params_lent) = results
    assert out_lent == out_own
    for k in params_own:
        assert np.array_equal(params_lent[k], params_own[k]), k


class BranchOnGradient(fluid.optimizer.SGD):
    """SGD that, before updating the first layer's weights, reads their gradient in a
    branch (a sub-block): a view of the gradient, ``net/grad_view``, that `watch` can
    return, stacked when the call ends (after the update)."""

    def _regularize(self, trace, param, grad, role_grad):
        if param == "net/fc_0.w_0":
            g = Variable(trace, grad)
            always = fluid.layers.greater_than(
                fluid.layers.reshape(fluid.layers.reduce_sum(g), [1]),
                fluid.layers.fill_constant([1], "float32", -1e30))
            with fluid.layers.Switch() as switch:
                with switch.case(always):
                    fluid.layers.reshape(g, [-1], name="net/grad_view")
        return super()._regularize(trace, param, grad, role_grad)


def test_a_watched_view_of_a_gradient_in_a_sub_block_is_the_gradient(monkeypatch):
    """A plan returning values of sub-block runs keeps its own arena: one of them may be a
    view of a gradient, stacked after the update has written over the gradients."""
    cls, data = mlp(lambda: BranchOnGradient(learning_rate=0.1)), batches(3, size=16)
    for lend in (False, True):
        prog = compiled(cls, lend, monkeypatch)
        prog.watch("net/grad_view")
        for x, y in data:
            before = prog.get_var("net/fc_0.w_0")
            prog.train(x, y)
            grad = np.asarray(prog.train.watched["net/grad_view"]).reshape(before.shape)
            assert np.array_equal(prog.get_var("net/fc_0.w_0"),
                                  (before - grad * np.float32(0.1)).astype(np.float32))


def _peak(prog, data) -> int:
    tracemalloc.start()
    try:
        train(prog, data)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_the_lent_arena_saves_one_array_of_the_parameters_size(name, monkeypatch):
    cls, data = mlp(OPTIMIZERS[name]), batches()
    peaks = {}
    for lend in (False, True):
        prog = compiled(cls, lend, monkeypatch)
        assert sum(a.nbytes for a in prog.parameters().values()) == PARAM_BYTES
        peaks[lend] = _peak(prog, data)
    # (the second instance's own small scratch, a kernel's, takes a little of it back)
    assert peaks[True] <= peaks[False] - 0.8 * PARAM_BYTES, peaks


def test_arrays_a_user_holds_never_change_and_training_goes_on_the_same(monkeypatch):
    cls, data = mlp(OPTIMIZERS["adam"]), batches(8)
    _, reference = train(compiled(cls, False, monkeypatch), data)
    prog = compiled(cls, True, monkeypatch)
    name = "net/fc_1.w_0"
    assert name in prog.parameters()
    held = []
    for i, (x, y) in enumerate(data):
        prog.train(x, y)
        if i in (1, 2):   # the scope's array itself, and a view derived from it
            array = prog.scope[name]
            held.append((array if i == 1 else array[3:7], array.copy()
                         if i == 1 else array[3:7].copy()))
        for array, copy in held:
            assert np.array_equal(array, copy)
        if i == 5:
            held.clear()   # let go: the plan may write over them again
    params = prog.parameters()
    for k in reference:
        assert np.array_equal(params[k], reference[k]), k


def test_history_and_rewind_with_a_lent_arena(monkeypatch):
    cls, data = mlp(OPTIMIZERS["momentum"]), batches(6)
    expected = []
    ref = compiled(cls, False, monkeypatch)
    for x, y in data:
        ref.train(x, y)
        expected.append(ref.parameters())
    prog = compiled(cls, True, monkeypatch)
    prog.train(*data[0])
    prog.train(*data[1])
    prog.keep_history()
    for x, y in data[2:]:
        prog.train(x, y)
    prog.rewind(3)
    for k, v in prog.parameters().items():
        assert np.array_equal(v, expected[2][k]), k
    prog.keep_history(False)
    for x, y in data[3:]:
        prog.train(x, y)
    for k, v in prog.parameters().items():
        assert np.array_equal(v, expected[-1][k]), k


def test_a_step_that_fails_after_its_gradients_changes_nothing(monkeypatch):
    cls, data = mlp(OPTIMIZERS["adam"]), batches(6)
    _, reference = train(compiled(cls, False, monkeypatch), data[:2] + data[3:])
    prog = compiled(cls, True, monkeypatch)
    prog.train(*data[0])
    prog.train(*data[1])
    before = prog.parameters()
    run = Kernel.run

    def failing(self, *args):
        if "adam" in self.label:
            raise RuntimeError("injected")
        return run(self, *args)

    monkeypatch.setattr(Kernel, "run", failing)
    with pytest.raises(KernelError) as err:
        prog.train(*data[2])   # its gradients were written, its update failed
    assert "fused_adam" in str(err.value) and "test_turns.py" in str(err.value)
    assert "No state was changed" in str(err.value)
    monkeypatch.setattr(Kernel, "run", run)
    for k, v in prog.parameters().items():
        assert np.array_equal(v, before[k]), k
    for x, y in data[3:]:
        prog.train(x, y)
    for k, v in prog.parameters().items():
        assert np.array_equal(v, reference[k]), k


def test_running_out_of_memory_for_the_second_instance_changes_nothing(monkeypatch):
    cls, data = mlp(OPTIMIZERS["adam"]), batches(3)
    prog = compiled(cls, True, monkeypatch)
    prog.train(*data[0])
    before = prog.parameters()
    make = plan_runner._Instances.__call__

    def no_memory(self, lend):
        raise MemoryError()

    monkeypatch.setattr(plan_runner._Instances, "__call__", no_memory)
    with pytest.raises(KernelError, match="out of memory.*No state was changed"):
        prog.train(*data[1])   # the second call makes the second instance
    for k, v in prog.parameters().items():
        assert np.array_equal(v, before[k]), k
    monkeypatch.setattr(plan_runner._Instances, "__call__", make)
    prog.train(*data[1])
    assert any(not np.array_equal(v, before[k]) for k, v in prog.parameters().items())


def test_infer_beside_training_reads_whole_steps(monkeypatch):
    """A method that changes nothing reads the scope without the lock: each of its results
    is that of the parameters of one whole step, never of arrays being written."""
    import threading
    cls, data = mlp(OPTIMIZERS["adam"]), batches(12)
    prog = compiled(cls, True, monkeypatch)
    x = data[0][0][:8]
    outputs, stop = [], threading.Event()

    def reader():
        while not stop.is_set():
            outputs.append(prog.infer(x))

    thread = threading.Thread(target=reader)
    states = [prog.parameters()]
    thread.start()
    try:
        for xb, yb in data:
            prog.train(xb, yb)
            states.append(prog.parameters())
    finally:
        stop.set()
        thread.join()
    assert_whole_steps(outputs, cls().Compile(seed=3), states, x)


def test_kept_history_from_the_start_costs_little_more_than_a_plain_plan(monkeypatch):
    """With history kept, both generations stay referenced: the plan runs its plain
    instance from the third call on; the lent instances add only their kernels' scratch
    (the generations they wrote are the history's)."""
    cls, data = mlp(OPTIMIZERS["adam"]), batches(6)
    peaks, params = {}, {}
    for lend in (False, True):
        prog = compiled(cls, lend, monkeypatch)
        prog.keep_history()
        peaks[lend] = _peak(prog, data)
        params[lend] = prog.parameters()
    assert peaks[True] <= peaks[False] + 0.5 * PARAM_BYTES, peaks
    for k in params[False]:
        assert np.array_equal(params[True][k], params[False][k]), k
