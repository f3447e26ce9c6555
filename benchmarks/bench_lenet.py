"""One LeNet training step (1x28x28 images, batch 64, SGD lr 0.01, loss fetched as a
float) in fluid_interactive, in hand-written NumPy (numpy_lenet.py) and, where torch
imports, in PyTorch eager: same process, same data, timed in interleaved blocks.

    conv 5x5 20 -> relu -> max-pool 2 -> conv 5x5 50 -> relu -> max-pool 2
    -> fc 500 relu -> fc 10 -> mean softmax cross-entropy

First it checks that the three compute the same losses from the same initial parameters
(fluid's, copied into the others) over a few steps. Run:

    python benchmarks/bench_lenet.py [--calls N] [--rounds N]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "extension")]

from numpy_lenet import NumpyLeNet  # noqa: E402

import fluid  # noqa: E402

try:
    import torch
except ImportError:    # the comparison is optional
    torch = None

BATCH, LR, POOL = 64, 0.01, 8

# fluid's parameter names -> numpy_lenet's
NAMES = {"conv2d_0.w_0": "conv1_w", "conv2d_0.b_0": "conv1_b",
         "conv2d_1.w_0": "conv2_w", "conv2d_1.b_0": "conv2_b",
         "fc_0.w_0": "fc1_w", "fc_0.b_0": "fc1_b", "fc_1.w_0": "fc2_w", "fc_1.b_0": "fc2_b"}


class LeNet(fluid.Program):
    @fluid.network("image", "label")
    def train_step(self, image, label):
        image = fluid.layers.data(name="image", shape=[1, 28, 28], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        h = fluid.nets.simple_img_conv_pool(image, num_filters=20, filter_size=5,
                                              pool_size=2, pool_stride=2, act="relu")
        h = fluid.nets.simple_img_conv_pool(h, num_filters=50, filter_size=5,
                                              pool_size=2, pool_stride=2, act="relu")
        h = fluid.layers.fc(h, size=500, act="relu")
        logits = fluid.layers.fc(h, size=10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(learning_rate=LR).minimize(loss)
        return loss


def make_data(seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """POOL batches of learnable images: a blurred random prototype per class (7x7 noise
    blown up 4x) half-mixed with pixel noise; labels int64 [BATCH, 1]."""
    rng = np.random.default_rng(seed)
    protos = np.kron(rng.random((10, 7, 7)), np.ones((4, 4)))
    xs, ys = [], []
    for _ in range(POOL):
        y = rng.integers(0, 10, BATCH)
        x = 0.5 * protos[y] + 0.5 * rng.random((BATCH, 28, 28))
        xs.append(x.reshape(BATCH, 1, 28, 28).astype(np.float32))
        ys.append(y.reshape(BATCH, 1).astype(np.int64))
    return xs, ys


def torch_lenet(params: dict[str, np.ndarray]):
    """PyTorch eager LeNet from numpy_lenet-named parameters; returns step(x, y)."""
    nn, F = torch.nn, torch.nn.functional
    c1, c2 = nn.Conv2d(1, 20, 5), nn.Conv2d(20, 50, 5)
    f1, f2 = nn.Linear(800, 500), nn.Linear(500, 10)
    with torch.no_grad():
        for mod, prefix in ((c1, "conv1"), (c2, "conv2"), (f1, "fc1"), (f2, "fc2")):
            w = params[prefix + "_w"]
            mod.weight.copy_(torch.from_numpy(w.T.copy() if w.ndim == 2 else w))
            mod.bias.copy_(torch.from_numpy(params[prefix + "_b"]))
    model = nn.Sequential(c1, nn.ReLU(), nn.MaxPool2d(2), c2, nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), f1, nn.ReLU(), f2)
    opt = torch.optim.SGD(model.parameters(), lr=LR)

    def step(x: np.ndarray, y: np.ndarray) -> float:
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y).view(-1))
        loss.backward()
        opt.step()
        return loss.item()
    return step


def thread_note() -> str:
    """'2 CPUs, openblas 2 threads, torch 2 threads' (what can be found out)."""
    parts = [f"{os.cpu_count()} CPUs"]
    try:
        from threadpoolctl import threadpool_info  # comes with scikit-learn
        parts += [f"{d['internal_api']} {d['num_threads']} threads" for d in threadpool_info()
                  if d.get("user_api") == "blas" and "torch" not in d.get("filepath", "")]
    except ImportError:
        pass
    if torch is not None:
        parts.append(f"torch {torch.get_num_threads()} threads")
    return ", ".join(parts)


def cycling(step, xs, ys):
    """A no-argument call of step over the batch pool in turn."""
    i = [0]

    def call():
        k = i[0] % POOL
        i[0] += 1
        return step(xs[k], ys[k])
    return call


def interleaved_ms(contenders: dict, calls: int, rounds: int,
                   settle_s: float = 0.3) -> dict[str, float]:
    """Median ms per call of each contender over ``rounds`` timed blocks of ``calls``,
    the blocks alternating between contenders (as `_timing.interleaved_us`). Before each
    block the process sleeps ``settle_s`` and makes two untimed calls: OpenBLAS's and
    PyTorch's OpenMP worker threads busy-wait for a while after their last job, and on two
    cores the idle pool of the previous contender would otherwise steal a core from the
    next (measured here: torch 40-70 % slower right after a NumPy block)."""
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for fn in contenders.values():   # warm up
        for _ in range(5):
            fn()
    for _ in range(rounds):
        for name, fn in contenders.items():
            time.sleep(settle_s)
            fn()
            fn()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - t0) / calls * 1e3)
    return {name: statistics.median(s) for name, s in samples.items()}


def main(calls: int = 20, rounds: int = 7, check_steps: int = 5) -> dict[str, float]:
    xs, ys = make_data()

    t0 = time.perf_counter()
    prog = LeNet().Compile(seed=0)
    compile_ms = (time.perf_counter() - t0) * 1e3
    params = {NAMES[k]: v for k, v in prog.parameters().items()}
    hand = NumpyLeNet(params, BATCH, LR)
    steps = {"fluid": prog.train_step, "numpy": hand.step}
    if torch is not None:
        steps["torch"] = torch_lenet(params)

    # Same initial parameters, same batches: the losses must agree up to float32 rounding.
    losses = {name: [] for name in steps}
    first_ms = 0.0
    for i in range(check_steps):
        for name, step in steps.items():
            t0 = time.perf_counter()
            losses[name].append(step(xs[i % POOL], ys[i % POOL]))
            if name == "fluid" and i == 0:
                first_ms = (time.perf_counter() - t0) * 1e3
    print(f"loss check: {check_steps} SGD steps from fluid's initial parameters, same "
          f"batches")
    for name, ls in losses.items():
        diff = max(abs(a - b) for a, b in zip(ls, losses["fluid"]))
        print(f"  {name:6s} " + " ".join(f"{v:.6f}" for v in ls)
              + ("" if name == "fluid" else f"   max |diff| vs fluid {diff:.1e}"))
    worst = max(abs(a - b) for ls in losses.values() for a, b in zip(ls, losses["fluid"]))
    after = hand.parameters()
    pdiff = max(float(np.abs(v - after[NAMES[k]]).max()) for k, v in prog.parameters().items())
    ok = worst < 1e-4 and pdiff < 1e-5
    print(f"  parameters after {check_steps} steps, NumPy vs fluid: max |diff| {pdiff:.1e}")
    print(f"  -> {'OK' if ok else 'MISMATCH'} (tolerances: loss 1e-4, parameters 1e-5)")

    ms = interleaved_ms({name: cycling(step, xs, ys) for name, step in steps.items()},
                        calls=calls, rounds=rounds)
    print(f"\nLeNet train step, batch {BATCH}, SGD, loss as float ({thread_note()}; "
          f"median of {rounds} interleaved blocks of {calls} steps)")
    labels = {"fluid": "fluid_interactive", "numpy": "hand-written NumPy",
              "torch": "PyTorch eager"}
    for name in steps:
        print(f"  {labels[name]:18s}: {ms[name]:7.2f} ms/step")
    print(f"  fluid / numpy     : {ms['fluid'] / ms['numpy']:7.2f}x   (target <= 1.2x)")
    if "torch" in ms:
        print(f"  fluid / torch     : {ms['fluid'] / ms['torch']:7.2f}x")
        print(f"  torch / numpy     : {ms['torch'] / ms['numpy']:7.2f}x")
    else:
        print("  (torch not importable: no PyTorch figures)")
    print(f"fluid compile: {compile_ms:.0f} ms; first step (plan + run): {first_ms:.0f} ms")
    if not ok:
        raise SystemExit("loss check failed")
    return ms


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20, help="steps per timed block")
    ap.add_argument("--rounds", type=int, default=7, help="timed blocks per contender")
    args = ap.parse_args()
    main(args.calls, args.rounds)
