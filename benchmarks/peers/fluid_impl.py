"""The peer suite's workloads in fluid_interactive."""
from __future__ import annotations

import time

import numpy as np

import fluid

from .seq_workloads import SEQ_MODELS
from .workloads import POOL, RMSPROP_EPS, RMSPROP_RHO, Contender, Workload, batches, infer_inputs

#: fluid's parameter names -> the suite's, per model and W3 variant
NAMES = {
    "W1": {"fc_0.w_0": "w0", "fc_0.b_0": "b0"},
    "W2": {f"fc_{i}.{k}_0": f"{k}{i}" for i in range(3) for k in ("w", "b")},
    "W3": {"conv2d_0.w_0": "conv1_w", "conv2d_0.b_0": "conv1_b",
           "conv2d_1.w_0": "conv2_w", "conv2d_1.b_0": "conv2_b",
           "fc_0.w_0": "fc1_w", "fc_0.b_0": "fc1_b", "fc_1.w_0": "fc2_w", "fc_1.b_0": "fc2_b"},
}


def _optimizer(w: Workload):
    if w.optimizer == "adam":
        return fluid.optimizer.Adam(learning_rate=w.lr)
    if w.optimizer == "rmsprop":
        return fluid.optimizer.RMSProp(learning_rate=w.lr, rho=RMSPROP_RHO,
                                       epsilon=RMSPROP_EPS)
    return fluid.optimizer.SGD(learning_rate=w.lr or 0.01)  # infer workloads: unused


def _w1(x):
    return fluid.layers.fc(input=x, size=1, act=None)


def _w2(x):
    h = fluid.layers.fc(input=x, size=512, act="relu")
    h = fluid.layers.fc(input=h, size=512, act="relu")
    return fluid.layers.fc(input=h, size=10)


def _w3(x, conv_pool: bool):
    if conv_pool:
        h = fluid.nets.simple_img_conv_pool(x, num_filters=20, filter_size=5, pool_size=2,
                                              pool_stride=2, act="relu")
        h = fluid.nets.simple_img_conv_pool(h, num_filters=50, filter_size=5, pool_size=2,
                                              pool_stride=2, act="relu")
    else:
        h = fluid.layers.conv2d(x, num_filters=20, filter_size=5, act="relu")
        h = fluid.layers.pool2d(h, pool_size=2, pool_type="max", pool_stride=2)
        h = fluid.layers.conv2d(h, num_filters=50, filter_size=5, act="relu")
        h = fluid.layers.pool2d(h, pool_size=2, pool_type="max", pool_stride=2)
    h = fluid.layers.fc(h, size=500, act="relu")
    return fluid.layers.fc(h, size=10)


INPUT = {"W1": [13], "W2": [784], "W3": [1, 28, 28]}


def program_class(w: Workload) -> type:
    model, shape = w.model, INPUT[w.model]

    def net(x):   # the same scope in both methods: they share the parameters
        with fluid.var_scope("net"):
            return {"W1": _w1, "W2": _w2}[model](x) if model != "W3" else _w3(
                x, w.name == "W3-scp")

    class Net(fluid.Program):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            x = fluid.layers.data(name="x", shape=shape, dtype="float32")
            if model == "W1":
                y = fluid.layers.data(name="y", shape=[1], dtype="float32")
                loss = fluid.layers.mean(fluid.layers.square_error_cost(net(x), y))
            else:
                y = fluid.layers.data(name="y", shape=[1], dtype="int64")
                loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(net(x), y))
            _optimizer(w).minimize(loss)
            return loss

        @fluid.network("x")
        def infer(self, x):
            x = fluid.layers.data(name="x", shape=shape, dtype="float32")
            return net(x)

    return Net


def compiled(w: Workload, params: dict[str, np.ndarray], device: str = "cpu"):
    t0 = time.perf_counter()
    prog = program_class(w)().Compile(seed=0, device=device)
    compile_ms = (time.perf_counter() - t0) * 1e3
    prog.set_parameters({"net/" + k: params[v] for k, v in NAMES[w.model].items()})
    return prog, compile_ms


def make(w: Workload, params: dict[str, np.ndarray], device: str = "cpu") -> Contender:
    """On 'gpu' the batches are NumPy arrays fed every call, as a user's would be."""
    if w.model in SEQ_MODELS:
        from .seq_fluid import make as make_seq
        return make_seq(w, params, device)
    prog, compile_ms = compiled(w, params, device)
    if w.kind == "train":
        xs, ys = batches(w.model, w.batch)
        step = prog.train_step

        def call(i: int) -> float:
            k = i % POOL
            return step(xs[k], ys[k])
    else:
        inputs = infer_inputs(w)
        infer = prog.infer

        def call(i: int) -> np.ndarray:
            return infer(inputs[i % POOL])
    return Contender(call, compile_ms, lambda: await_compiled_kernels(prog))


def await_compiled_kernels(prog, timeout: float = 600) -> None:
    """Wait until every plan built so far has its compiled kernels (the tier of
    fluid_interactive/kernels; nothing when it is off); the next call switches to them."""
    for method in (prog.train_step, getattr(prog, "infer", None)):
        if method is None:   # the sequence workloads' programs only train
            continue
        for code in list(method.runner.plans.values()):
            tier = method.runner.plan_tier(code)
            if tier is not None and tier.pending:
                tier.wait(timeout)
