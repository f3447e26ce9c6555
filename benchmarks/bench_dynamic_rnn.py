"""What a cell written by hand in a DynamicRNN costs: one training step of a GRU classifier
(W5's shapes: B=32, T=29, D=12, H=64, 9 classes, Adam; lengths drawn from T/2..T) with the
cell as `gru_unit` in a `DynamicRNN`, against the same model on the fused `dynamic_gru`
(one op for the whole sequence, same parameters: the first losses must agree), and
planning the DynamicRNN's step at a short and a long sequence (T=20, T=2000). Contenders are timed
interleaved in one process, so machine noise hits them alike; the ratios are what to read:

    python benchmarks/bench_dynamic_rnn.py [--rounds 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # one BLAS thread: comparable on a shared machine

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT, os.path.join(ROOT, "extension")]

from _timing import interleaved_us  # noqa: E402

import fluid  # noqa: E402

B, T, D, H, CLASSES = 32, 29, 12, 64, 9
L = fluid.layers
W, BIAS = fluid.ParamAttr(name="gru.w"), fluid.ParamAttr(name="gru.b")


class GruClassifier(fluid.Program):
    fused = True

    def hidden(self, proj, lengths):
        if self.fused:
            return L.dynamic_gru(proj, size=H, lengths=lengths, param_attr=W, bias_attr=BIAS)
        drnn = L.DynamicRNN()
        with drnn.block():
            x_t = drnn.step_input(proj, lengths=lengths)
            h = drnn.memory(shape=[H])
            new_h, _, _ = L.gru_unit(x_t, h, size=3 * H, param_attr=W, bias_attr=BIAS)
            drnn.update_memory(h, new_h)
            drnn.output(new_h)
        return drnn()

    @fluid.network("x", "lengths", "label")
    def train_step(self, x, lengths, label):
        x = L.data(name="x", shape=[-1, -1, D], dtype="float32", append_batch_size=False)
        lengths = L.data(name="lengths", shape=[-1], dtype="int64", append_batch_size=False)
        label = L.data(name="label", shape=[1], dtype="int64")
        proj = L.fc(x, size=3 * H, num_flatten_dims=2, param_attr=fluid.ParamAttr(name="p.w"),
                    bias_attr=fluid.ParamAttr(name="p.b"))
        last = L.sequence_last_step(self.hidden(proj, lengths), lengths=lengths)
        logits = L.fc(last, size=CLASSES, param_attr=fluid.ParamAttr(name="head.w"),
                      bias_attr=fluid.ParamAttr(name="head.b"))
        loss = L.mean(L.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.Adam(learning_rate=0.005).minimize(loss)
        return loss


def batch(rng: np.random.Generator, steps: int = T):
    return (rng.standard_normal((B, steps, D)).astype(np.float32),
            rng.integers(steps // 2, steps + 1, B).astype(np.int64),
            rng.integers(0, CLASSES, (B, 1)).astype(np.int64))


def step_times(rounds: int) -> dict[str, float]:
    """Median ms per training step of each contender on the same batch, after checking
    that both give the same losses over their first steps."""
    fused = GruClassifier(fused=True).Compile(seed=0)
    by_hand = GruClassifier(fused=False).Compile(seed=0)
    by_hand.set_parameters(fused.parameters())
    data = batch(np.random.default_rng(0))
    first = [(fused.train_step(*data), by_hand.train_step(*data)) for _ in range(5)]
    np.testing.assert_allclose(*zip(*first), rtol=1e-4)
    print("losses, fused / by hand:", "  ".join(f"{a:.5f}/{b:.5f}" for a, b in first))
    contenders = {"dynamic_gru (fused)": lambda: fused.train_step(*data),
                  "DynamicRNN + gru_unit": lambda: by_hand.train_step(*data)}
    return {k: v / 1e3 for k, v in interleaved_us(contenders, calls=5, rounds=rounds).items()}


def plan_times(rounds: int) -> dict[str, float]:
    """Median CPU ms (this thread's: the machine may be busy) to plan the DynamicRNN's
    train_step for a fresh program at T=20 and at T=2000, and at T=2000 after T=20; and
    the sources' lengths."""
    rng = np.random.default_rng(1)
    samples: dict[str, list[float]] = {"T=20": [], "T=2000": [], "T=2000 after T=20": []}
    chars = {}
    GruClassifier(fused=False).Compile(seed=0).train_step.runner.plan(list(batch(rng, 5)))
    for _ in range(rounds):
        for label, runs in (("T=20", [20]), ("T=2000", [2000]),
                            ("T=2000 after T=20", [20, 2000])):
            runner = GruClassifier(fused=False).Compile(seed=0).train_step.runner
            for steps in runs:
                args = list(batch(rng, steps))
                t0 = time.thread_time()
                code = runner.plan(args)
                elapsed = time.thread_time() - t0
            samples[label].append(elapsed * 1e3)
            chars[label] = len(code.source)
    return {**{k: statistics.median(v) for k, v in samples.items()},
            **{f"source chars ({k})": float(v) for k, v in chars.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    times = step_times(args.rounds)
    base = times["dynamic_gru (fused)"]
    print(f"one training step, B={B} T={T} D={D} H={H} (ms, median of {args.rounds} rounds):")
    for label, ms in times.items():
        print(f"  {label:24s} {ms:8.2f}   x{ms / base:.2f} of the fused op")
    plans = plan_times(args.rounds)
    print("planning the DynamicRNN's train_step (CPU ms, median of fresh programs):")
    for label, value in plans.items():
        print(f"  {label:32s} {value:9.1f}")
    print(f"  ratio T=2000 / T=20: {plans['T=2000'] / plans['T=20']:.2f}")


if __name__ == "__main__":
    main()
