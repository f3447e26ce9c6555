"""The sequence workloads in fluid_interactive, written as a user would: `dynamic_lstm`
on an fc projection (W4, W5) and an encoder block of `fluid.nets` attention, fc and
layer_norm (W6)."""
from __future__ import annotations

import time

import numpy as np

import fluid

from .seq_workloads import ENCODER_SHAPE, LSTM_SHAPES, seq_batches
from .workloads import POOL, Contender, Workload

#: fluid's parameter names -> the suite's
LSTM_NAMES = {"fc_0.w_0": "wx", "fc_0.b_0": "bx", "lstm_0.w_0": "wh", "lstm_0.b_0": "bh",
              "fc_1.w_0": "wo", "fc_1.b_0": "bo"}
ENCODER_NAMES = dict(
    {f"fc_{i}.{k}_0": f"{n}_{k}" for i, n in enumerate(("q", "k", "v", "o", "f1", "f2", "out"))
     for k in ("w", "b")},
    **{f"layer_norm_{i}.{k}_0": f"ln{i + 1}_{s}" for i in (0, 1) for k, s in (("w", "g"),
                                                                            ("b", "b"))})


def lstm_model(x, w: Workload):
    _, _, _, h, classes = LSTM_SHAPES[w.model]
    proj = fluid.layers.fc(input=x, size=4 * h, num_flatten_dims=2)
    hidden, _ = fluid.layers.dynamic_lstm(input=proj, size=4 * h, use_peepholes=False)
    return fluid.layers.fc(input=fluid.layers.sequence_last_step(hidden), size=classes or 1)


def encoder_model(x, w: Workload, keep: list | None = None):
    """The block; ``keep`` (a list) gets its sublayers' outputs (the attention, the two
    layer norms), checkpoints for `RecomputeOptimizer` (benchmarks/bench_recompute.py)."""
    _, _, d, heads, ffn, classes = ENCODER_SHAPE
    a = fluid.nets.scaled_dot_product_attention(x, x, x, num_heads=heads)
    a = fluid.layers.fc(a, size=d, num_flatten_dims=2)
    h = fluid.layers.layer_norm(x + a, begin_norm_axis=2)
    f = fluid.layers.fc(h, size=ffn, num_flatten_dims=2, act="relu")
    f = fluid.layers.fc(f, size=d, num_flatten_dims=2)
    h2 = fluid.layers.layer_norm(h + f, begin_norm_axis=2)
    if keep is not None:
        keep += [a, h, h2]
    return fluid.layers.fc(fluid.layers.sequence_pool(h2, "average"), size=classes)


def program_class(w: Workload) -> type:
    if w.model == "W6":
        _, t, d, _, _, _ = ENCODER_SHAPE
        shape, model, regression = [t, d], encoder_model, False
    else:
        _, t, d, _, classes = LSTM_SHAPES[w.model]
        shape, model, regression = [t, d], lstm_model, not classes

    class Net(fluid.Program):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            x = fluid.layers.data(name="x", shape=shape, dtype="float32")
            y = fluid.layers.data(name="y", shape=[1],
                                  dtype="float32" if regression else "int64")
            with fluid.var_scope("net"):
                out = model(x, w)
            cost = (fluid.layers.square_error_cost(out, y) if regression else
                    fluid.layers.softmax_with_cross_entropy(out, y))
            loss = fluid.layers.mean(cost)
            fluid.optimizer.Adam(learning_rate=w.lr).minimize(loss)
            return loss
    return Net


def compiled(w: Workload, params: dict[str, np.ndarray], device: str = "cpu"):
    """(the program with the suite's parameters, its compile time in ms)."""
    t0 = time.perf_counter()
    prog = program_class(w)().Compile(seed=0, device=device)
    compile_ms = (time.perf_counter() - t0) * 1e3
    names = ENCODER_NAMES if w.model == "W6" else LSTM_NAMES
    current = prog.parameters()
    prog.set_parameters({"net/" + k: params[v].reshape(current["net/" + k].shape)
                         for k, v in names.items()})
    return prog, compile_ms


def make(w: Workload, params: dict[str, np.ndarray], device: str = "cpu") -> Contender:
    prog, compile_ms = compiled(w, params, device)
    xs, ys = seq_batches(w.model, w.batch)
    step = prog.train_step

    def call(i: int) -> float:
        k = i % POOL
        return step(xs[k], ys[k])
    return Contender(call, compile_ms)
