"""Recompiling (the notebook's everyday action: a class redefined in a cell) costs about
what compiling costs, at any program size. Work is counted as Python function calls,
which are deterministic, instead of timed: a quadratic step (a scan of every op for every
var) shows as calls growing with the square of the program's size."""
import sys

import fluid


def _mlp(depth: int) -> type:
    class Deep(fluid.Program):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            x = fluid.layers.data(name="x", shape=[8], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="float32")
            for _ in range(depth):
                x = fluid.layers.fc(input=x, size=8, act="relu")
            pred = fluid.layers.fc(input=x, size=1)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
            fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
            return loss
    return Deep


def _calls(fn):
    """(Python calls made by ``fn()``, its result)."""
    count = [0]

    def profile(frame, event, arg):
        if event == "call":
            count[0] += 1
    sys.setprofile(profile)
    try:
        result = fn()
    finally:
        sys.setprofile(None)
    return count[0], result


def test_recompiling_costs_about_what_compiling_costs_at_any_size():
    costs = {}
    for depth in (20, 80):
        compile_calls, prog = _calls(lambda d=depth: _mlp(d)().Compile(seed=0))
        recompile_calls, _ = _calls(lambda d=depth, p=prog: p.recompile(_mlp(d)))
        costs[depth] = (compile_calls, recompile_calls)
        assert recompile_calls <= 1.5 * compile_calls, (depth, costs[depth])
    compile_growth = costs[80][0] / costs[20][0]
    recompile_growth = costs[80][1] / costs[20][1]
    assert recompile_growth <= 1.2 * compile_growth, costs
