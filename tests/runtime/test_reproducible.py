"""Seeded training gives the same bits in every run, whatever the machine's load makes the
timings: the thread policy and the compiled tier never choose by timing between
alternatives whose values differ (backend/threads.py, kernels/build.py).

Each run is a fresh process whose clock (the one the policy's measurements read) is
rigged as a machine's load would make it: one process finds one thread faster, the
other every core, and each finds its compiled kernels or its NumPy ones faster at
random. Before the policy kept to bit-identical choices, the two runs picked different
thread counts, and the GEMMs summed in different orders."""
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = """
import random, sys, types
sys.path[:0] = {paths!r}
import numpy as np
from fluid_interactive.backend import threads

favour_one_thread, out = sys.argv[1] == "1", sys.argv[2]
jitter = random.Random(sys.argv[1])
now = [0.0]

def perf_counter():
    one = threads.STATE.current == 1
    now[0] += (1.0 if one == favour_one_thread else 3.0) * (1.0 + jitter.random())
    return now[0]

threads.time = types.SimpleNamespace(perf_counter=perf_counter)
threads.RECHECK_CALLS = 4   # measure often

import fluid

class Net(fluid.Program):
    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[256], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        h = fluid.layers.fc(x, size=512, act="relu")
        h = fluid.layers.fc(h, size=256, act="tanh")
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            fluid.layers.fc(h, size=10), y))
        fluid.optimizer.Adam(learning_rate=1e-3).minimize(loss)
        return loss

prog = Net().Compile(seed=11)
rng = np.random.default_rng(5)
for step in range(16):
    x = rng.standard_normal((64, 256)).astype(np.float32)
    prog.train(x, rng.integers(0, 10, (64, 1)))
    tier = prog.train.runner.plan_tier()
    if step == 0 and tier is not None:
        assert tier.wait(600)   # the rest may run the compiled kernels
print("TIER", prog.train.tier)
np.savez(out, **prog.parameters())
"""


def _train(tmp_path, favour_one_thread: bool, kernels: str) -> dict:
    out = str(tmp_path / f"params_{int(favour_one_thread)}_{kernels}.npz")
    env = dict(os.environ, FLUID_KERNELS=kernels,
               FLUID_KERNEL_CACHE=str(tmp_path / "kernels"))
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(var, None)   # every core the machine has
    script = SCRIPT.format(paths=[ROOT, os.path.join(ROOT, "extension")])
    done = subprocess.run([sys.executable, "-c", script, str(int(favour_one_thread)), out],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out) as params:
        return dict(params)


def _same_bits(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and np.array_equal(
            a[k].view(np.uint8), b[k].view(np.uint8)), k


def test_two_seeded_trainings_in_fresh_processes_give_the_same_parameters(tmp_path):
    first = _train(tmp_path, True, "auto")
    second = _train(tmp_path, False, "auto")
    _same_bits(first, second)
    # the compiled kernels the tier runs by default give the NumPy kernels' bits
    _same_bits(first, _train(tmp_path, True, "numpy"))
