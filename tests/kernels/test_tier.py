"""The compiled kernel tier (fluid_interactive/kernels): values equal to the NumPy
kernels' (bit-identical for the updates and the arithmetic and relu members of a chain,
within float32 rounding for exp and tanh), the switch between calls, the disk cache that
a fresh process runs from its first call, and the NumPy path with the tier off."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import fluid
from fluid_interactive import kernels
from fluid_interactive.backend import threads
from fluid_interactive.kernels import loops

numba = pytest.importorskip("numba")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def tier_on(monkeypatch):
    monkeypatch.setenv("FLUID_KERNELS", "auto")


@pytest.fixture(scope="module", autouse=True)
def kernel_cache(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("kernels"))
    old = os.environ.get("FLUID_KERNEL_CACHE")
    os.environ["FLUID_KERNEL_CACHE"] = path
    yield path
    if old is None:
        del os.environ["FLUID_KERNEL_CACHE"]
    else:
        os.environ["FLUID_KERNEL_CACHE"] = old


def mlp(optimizer, act="relu"):
    class MLP(fluid.Program):
        @fluid.network("x", "y")
        def train(self, x, y):
            x = fluid.layers.data(name="x", shape=[32], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="int64")
            h = fluid.layers.fc(x, size=256, act=act)
            h = fluid.layers.fc(h, size=64, act=act)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
                fluid.layers.fc(h, size=10), y))
            optimizer().minimize(loss)
            return loss
    return MLP


OPTIMIZERS = {
    "sgd": lambda: fluid.optimizer.SGD(learning_rate=0.1),
    "momentum": lambda: fluid.optimizer.Momentum(learning_rate=0.05, momentum=0.9),
    "nesterov": lambda: fluid.optimizer.Momentum(learning_rate=0.05, momentum=0.9,
                                                 use_nesterov=True),
    "adam": lambda: fluid.optimizer.Adam(learning_rate=1e-3),
}


def batches(n=6, size=64):
    rng = np.random.default_rng(7)
    return [(rng.standard_normal((size, 32)).astype(np.float32),
             rng.integers(0, 10, (size, 1))) for _ in range(n)]


def train(cls, tier_on: bool, monkeypatch, steps=6, mode="auto"):
    """(losses, parameters, the tier after each call): with the tier on (FLUID_KERNELS
    ``mode``), the first call runs NumPy while the kernels build; the build is awaited,
    and the rest run compiled."""
    monkeypatch.setenv("FLUID_KERNELS", mode if tier_on else "numpy")
    prog = cls().Compile(seed=3)
    losses, tiers = [], []
    for i, (x, y) in enumerate(batches(steps)):
        losses.append(prog.train(x, y))
        tiers.append(prog.train.tier)   # the method says what its runner runs
        if i == 0 and tier_on and tiers[0] == "compiling":
            assert prog.train.runner.plan_tier().wait(300)
    return losses, prog.parameters(), tiers


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_compiled_updates_and_chains_are_bit_identical(name, monkeypatch):
    cls = mlp(OPTIMIZERS[name])
    ref_losses, ref, ref_tiers = train(cls, False, monkeypatch)
    losses, got, tiers = train(cls, True, monkeypatch)
    assert set(ref_tiers) == {"numpy"}
    assert tiers[-1] == "compiled", tiers
    assert losses == ref_losses
    for k in ref:
        assert np.array_equal(got[k], ref[k]), k


@pytest.mark.parametrize("act", ["sigmoid", "tanh"])
def test_chains_with_exp_and_tanh_agree_within_float32_rounding(act, monkeypatch):
    """They run with FLUID_KERNELS=fast only: by default the tier leaves them to NumPy, so
    its values are NumPy's bit for bit."""
    cls = mlp(OPTIMIZERS["sgd"], act)
    ref_losses, ref, _ = train(cls, False, monkeypatch)
    losses, got, tiers = train(cls, True, monkeypatch, mode="fast")
    assert tiers[-1] == "compiled"
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-6)
    losses, got, tiers = train(cls, True, monkeypatch)   # the default: the update alone
    prog = cls().Compile(seed=3)
    prog.train(*batches(1)[0])
    assert tiers[-1] == "compiled" and ".py:chain" not in prog.train.source
    assert losses == ref_losses
    for k in ref:
        assert np.array_equal(got[k], ref[k]), k


def test_the_switch_happens_between_calls_and_the_source_names_the_kernels(monkeypatch):
    monkeypatch.setenv("FLUID_KERNEL_CACHE", os.environ["FLUID_KERNEL_CACHE"] + "/switch")
    prog = mlp(OPTIMIZERS["adam"])().Compile(seed=0)
    x, y = batches(1)[0]
    prog.train(x, y)
    tier = prog.train.runner.plan_tier()
    assert prog.train.tier == prog.train.runner.tier == "compiling"
    assert all(k.fn is None for k in tier.kernels)   # NumPy meanwhile
    source = prog.train.source
    assert any("tier.poll()" in line for line in source.splitlines()[1:3])
    assert "| compiled: fluid_interactive/kernels/loops.py:adam" in source
    assert ".py:chain" in source
    assert tier.wait(300)
    assert all(k.fn is None for k in tier.kernels)   # not until the next call starts
    prog.train(x, y)
    assert prog.train.runner.tier == "compiled"
    assert all(k.fn is not None for k in tier.kernels)


def test_a_new_batch_size_takes_the_kernels_this_process_loaded_without_the_disk(
        monkeypatch):
    """A plan for another batch size asks for the same compiled kernels: loaded once, they
    serve it from its first call, with no look at the cache folder (emptied here)."""
    folder = os.environ["FLUID_KERNEL_CACHE"] + "/sizes"
    monkeypatch.setenv("FLUID_KERNEL_CACHE", folder)
    prog = mlp(OPTIMIZERS["adam"])().Compile(seed=0)
    x, y = batches(1)[0]
    prog.train(x, y)
    assert prog.train.runner.plan_tier().wait(300)
    prog.train(x, y)
    assert prog.train.runner.tier == "compiled"
    shutil.rmtree(folder)
    prog.train(x[:17], y[:17])
    new = prog.train.runner.plans[((17, 32), (17, 1))]
    assert new.tier is not None and new.tier.state == "compiled"
    assert all(k.fn is not None for k in new.tier.kernels)
    assert "tier.poll()" not in new.code.text


def test_a_large_plan_measures_its_thread_count_again_once_it_runs_compiled_kernels(
        monkeypatch, thread_policy):
    """The thread policy's measurement on the NumPy kernels (taken beside their build) does
    not stand for the compiled ones: the switch starts a new one two calls later."""
    monkeypatch.setenv("FLUID_KERNEL_CACHE", os.environ["FLUID_KERNEL_CACHE"] + "/threads")
    monkeypatch.setattr(threads, "SMALL_WORK", 0)       # a large plan: the policy measures it
    monkeypatch.setattr(threads.STATE, "cores", 2)
    prog = mlp(OPTIMIZERS["adam"])().Compile(seed=0)
    x, y = batches(1)[0]
    for _ in range(2 + 2 * threads.PROBE_CALLS + 2):   # the first measurement, and after
        prog.train(x, y)
    entry = next(iter(prog.train.runner.plans.values())).fn
    assert isinstance(entry, threads.AdaptiveThreads)
    assert not entry.probe and entry.countdown > 100    # the next one hundreds of calls away
    assert prog.train.runner.plan_tier().wait(300)
    prog.train(x, y)                                    # switches to the compiled kernels
    assert prog.train.runner.tier == "compiled" and not entry.probe
    prog.train(x, y)
    assert not entry.probe
    prog.train(x, y)
    # measuring, one call timed: each thread count with the compiled kernels and without
    assert len(entry.probe) == 4 * threads.PROBE_CALLS - 1
    for _ in range(4 * threads.PROBE_CALLS):
        prog.train(x, y)
    assert not entry.probe and entry.compiled is not None   # and kept the faster kernels
    assert prog.train.runner.plan_tier().using == entry.compiled


def test_a_fresh_process_with_a_warm_cache_runs_compiled_kernels_from_its_first_call():
    paths = [ROOT, os.path.join(ROOT, "extension")]
    script = (
        f"import sys, time, numpy as np\nsys.path[:0] = {paths!r}\n"
        "from tests.kernels.test_tier import mlp, OPTIMIZERS, batches\n"
        "from fluid_interactive.kernels import build\n"
        "build.preload()\n"   # as the package does in an interactive session
        "deadline = time.monotonic() + 120\n"   # a notebook's first cell runs later
        "while sys.argv[1] == 'warm' and build.preload_running() and "
        "time.monotonic() < deadline:\n"
        "    time.sleep(0.01)\n"
        "prog = mlp(OPTIMIZERS['adam'])().Compile(seed=0)\n"
        "x, y = batches(1)[0]\n"
        "prog.train(x, y)\n"
        "t = prog.train.runner.plan_tier()\n"
        "if t.state != 'compiled':\n"
        "    t.wait(300)\n"
        "    prog.train(x, y)\n"
        "print('TIER', prog.train.runner.tier, 'poll' in prog.train.source)\n"
    )
    env = dict(os.environ, FLUID_KERNEL_CACHE=os.environ["FLUID_KERNEL_CACHE"] + "/warm")
    first = subprocess.run([sys.executable, "-c", script, "cold"], env=env,
                           capture_output=True, text=True, timeout=600)
    assert "TIER compiled True" in first.stdout, first.stderr   # built in the background
    second = subprocess.run([sys.executable, "-c", script, "warm"], env=env,
                            capture_output=True, text=True, timeout=600)
    assert "TIER compiled False" in second.stdout, second.stderr   # loaded before call one


def test_arguments_of_another_layout_run_the_numpy_kernel(monkeypatch):
    from fluid_interactive.kernels.build import load
    from fluid_interactive.kernels.optim import update_source
    from fluid_interactive.kernels.tier import Kernel
    from fluid_interactive.ops.compiled import run_compiled
    kernel = Kernel(update_source("sgd", "float32"), "sgd")
    p = np.arange(8, dtype=np.float32)
    out = np.empty(8, np.float32)
    lr = np.float32(0.5)
    assert not run_compiled(kernel, lambda: (p, p, lr, out))       # the plan runs NumPy
    assert not run_compiled(None, lambda: (p, p, lr, out))         # no compiled form
    kernel.fn = load(kernel.source)
    assert run_compiled(kernel, lambda: (p, p, lr, out))
    np.testing.assert_array_equal(out, p - p * lr)
    assert not run_compiled(kernel, lambda: (p[::2], p[::2], lr, out[:4]))   # strided
    assert not run_compiled(kernel, lambda: (p.astype(np.float64), p, lr, out))  # a dtype


def test_relu_keeps_numpys_signed_zero_and_nan(monkeypatch):
    from fluid_interactive.kernels.build import load
    from fluid_interactive.kernels.chain import Member, chain_source
    from fluid_interactive.ops.registry import get_spec
    form = get_spec("relu").scalar({})
    fn = load(chain_source([Member("relu", form.fn, form.constants)], 1, [], "float32"))
    for n in (1, 7, 64, 1000):
        x = np.resize(np.array([-0.0, 0.0, np.nan, -1.5, 2.5, -np.inf, np.inf],
                               np.float32), n)
        out = np.empty_like(x)
        fn(x, out)
        want = np.maximum(x, 0)
        assert np.array_equal(out.view(np.int32), want.view(np.int32)), (n, out, want)


def test_with_the_tier_off_nothing_is_requested_or_built(monkeypatch):
    monkeypatch.setenv("FLUID_KERNELS", "numpy")
    assert not kernels.enabled()
    prog = mlp(OPTIMIZERS["adam"])().Compile(seed=0)
    prog.train(*batches(1)[0])
    assert prog.train.runner.tier == "numpy"
    assert "tier.poll" not in prog.train.source


def test_the_loops_uncompiled_compute_the_numpy_updates():
    """The loops as plain Python (what the tier compiles) against ops/optim.py's NumPy."""
    from fluid_interactive.ops.optim import adam_update
    rng = np.random.default_rng(0)
    p, g, m1, m2 = (rng.standard_normal(5).astype(np.float32) for _ in range(4))
    m2 = np.abs(m2)
    outs = [np.empty(5, np.float32) for _ in range(3)]
    f = np.float32
    loops.adam(p, g, m1, m2, f(0.9), f(1 - 0.9), f(0.999), f(1 - 0.999), f(1e-8), f(0.01),
               *outs)
    want = adam_update(np, 0.9, 0.999, 1e-8, p, g, m1, m2, 0.01, *[np.empty(5, np.float32)
                                                                    for _ in range(4)])
    for a, b in zip(outs, want):
        np.testing.assert_array_equal(a, b)
