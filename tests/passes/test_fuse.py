"""The plan pass that fuses optimizer updates: pure, verified, grouping only what may run
together, and giving bit-identical training to the unfused program (SGD, Momentum, Adam;
weight decay, per-parameter learning rates, two optimizers in one method), while keeping
the runtime's state contract (an interrupted step changes nothing; arrays the scope held
never change; values set from outside are taken)."""
import dataclasses

import numpy as np
import pytest

import fluid
from fluid_interactive.ir.records import OpDesc, OpRole
from fluid_interactive.ir.text import format_block
from fluid_interactive.passes.fuse import fuse_optimizer_updates
from fluid_interactive.passes.verify import check_program


def mlp(optimizer, decay=False, slow_bias=False):
    class MLP(fluid.Program):
        @fluid.network("x", "y")
        def train(self, x, y):
            x = fluid.layers.data(name="x", shape=[6], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="int64")
            bias = fluid.ParamAttr(learning_rate=0.5) if slow_bias else None
            h = fluid.layers.fc(x, size=8, act="relu", bias_attr=bias)
            h = fluid.layers.fc(h, size=8, act="tanh")
            logits = fluid.layers.fc(h, size=3)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
            reg = fluid.regularizer.L2Decay(0.01) if decay else None
            optimizer(regularization=reg).minimize(loss)
            return loss
    return MLP


OPTIMIZERS = {
    "sgd": lambda **k: fluid.optimizer.SGD(learning_rate=0.1, **k),
    "momentum": lambda **k: fluid.optimizer.Momentum(learning_rate=0.1, momentum=0.9, **k),
    "nesterov": lambda **k: fluid.optimizer.Momentum(learning_rate=0.1, momentum=0.9,
                                                     use_nesterov=True, **k),
    "adam": lambda **k: fluid.optimizer.Adam(learning_rate=0.01, **k),
}


def _data(rng, n=16):
    return (rng.standard_normal((n, 6)).astype(np.float32),
            rng.integers(0, 3, (n, 1)).astype(np.int64))


def _compiled(monkeypatch, cls, fused: bool):
    if fused:
        monkeypatch.delenv("FLUID_PLAN_PASSES", raising=False)
    else:
        monkeypatch.setenv("FLUID_PLAN_PASSES", "none")
    return cls().Compile(seed=3)


def test_pass_is_pure_verified_and_fuses_one_op_per_optimizer():
    prog = mlp(OPTIMIZERS["adam"])().Compile(seed=0)
    block = prog.program.block("train")
    before = format_block(prog.program, block)
    fused = fuse_optimizer_updates(prog.program, block)
    assert format_block(prog.program, block) == before          # the input is untouched
    program = dataclasses.replace(prog.program, blocks=[
        fused if b is block else b for b in prog.program.blocks])
    check_program(program)
    updates = [op for op in fused.ops if op.role & OpRole.OPTIMIZE and "adam" in op.type]
    assert [op.type for op in updates] == ["fused_adam"]
    assert len(updates[0].inputs["Params"]) == 6
    assert updates[0].inputs["LearningRate"] == [n for op in block.ops if op.type == "adam"
                                                 for n in op.inputs["LearningRate"]][:1]
    assert len(fused.ops) == len(block.ops) - 5


def test_groups_split_by_learning_rate_var():
    prog = mlp(OPTIMIZERS["sgd"], slow_bias=True)().Compile(seed=0)
    fused = fuse_optimizer_updates(prog.program, prog.program.block("train"))
    sizes = sorted(len(op.inputs["Params"]) for op in fused.ops if op.type == "fused_sgd")
    assert sizes == [5]
    # the bias with its own (scaled) learning rate forms a group of one small parameter,
    # which is not worth fusing
    assert [op.type for op in fused.ops if op.role & OpRole.OPTIMIZE and "sgd" in op.type] \
        == ["sgd", "fused_sgd"]


def test_small_groups_stay_unfused():
    class Line(fluid.Program):
        @fluid.network("x", "y")
        def train(self, x, y):
            x = fluid.layers.data(name="x", shape=[13], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="float32")
            loss = fluid.layers.mean(fluid.layers.square_error_cost(
                fluid.layers.fc(x, size=1), y))
            fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
            return loss
    prog = Line().Compile(seed=0)
    block = prog.program.block("train")
    assert fuse_optimizer_updates(prog.program, block) is block


def test_an_op_reading_an_updated_parameter_in_between_stops_fusion():
    prog = mlp(OPTIMIZERS["sgd"])().Compile(seed=0)
    block = prog.program.block("train")
    ops = list(block.ops)
    first = next(i for i, op in enumerate(ops) if op.type == "sgd")
    param = ops[first].outputs["ParamOut"][0]
    reader = OpDesc("scale", {"X": [param]}, {"Out": [ops[first].inputs["Grad"][0]]},
                    role=OpRole.OPTIMIZE)
    ops.insert(first + 1, reader)    # reads the new value of the first parameter
    fused = fuse_optimizer_updates(prog.program, dataclasses.replace(block, ops=ops))
    assert not any(op.type == "fused_sgd" for op in fused.ops)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("decay", [False, True])
def test_training_is_bit_identical_with_and_without_fusion(monkeypatch, rng, name, decay):
    cls = mlp(OPTIMIZERS[name], decay=decay, slow_bias=True)
    plain, fused = _compiled(monkeypatch, cls, False), _compiled(monkeypatch, cls, True)
    batches = [_data(rng) for _ in range(3)]
    for step in range(6):
        x, y = batches[step % 3]
        assert fused.train(x, y) == plain.train(x, y)
        if step == 2:    # state set from outside between steps is taken as it is
            new = {k: v * 0.5 for k, v in plain.parameters().items()}
            plain.set_parameters(new)
            fused.set_parameters(new)
    for k, v in plain.parameters().items():
        np.testing.assert_array_equal(fused.parameters()[k], v)
    assert "fused_" in fused.train.source and "fused_" not in plain.train.source


def test_arrays_the_scope_held_never_change(monkeypatch, rng):
    prog = _compiled(monkeypatch, mlp(OPTIMIZERS["adam"]), True)
    x, y = _data(rng)
    prog.train(x, y)
    snapshot = prog.scope.snapshot()
    copies = {k: np.array(v) for k, v in snapshot.items() if isinstance(v, np.ndarray)}
    for _ in range(5):
        prog.train(x, y)
    for k, v in copies.items():
        np.testing.assert_array_equal(snapshot[k], v)
        if k in prog.parameters():
            assert not np.array_equal(prog.get_var(k), v)   # while training went on


def test_an_interrupted_fused_update_changes_nothing(monkeypatch, rng):
    prog = _compiled(monkeypatch, mlp(OPTIMIZERS["adam"]), True)
    x, y = _data(rng)
    prog.train(x, y)
    ns = next(iter(prog.train._runner.plans.values())).fn.__globals__
    name = next(k for k in ns if k.endswith("_fused_adam"))
    original = ns[name]

    def update_then_interrupt(*args):
        original(*args)              # the new values are written: then the step stops
        raise KeyboardInterrupt
    ns[name] = update_then_interrupt
    before = {k: prog.get_var(k) for k in prog.var_names()}
    with pytest.raises(KeyboardInterrupt):
        prog.train(x, y)
    for k, v in before.items():
        np.testing.assert_array_equal(prog.get_var(k), v)
    ns[name] = original
    reference = _compiled(monkeypatch, mlp(OPTIMIZERS["adam"]), False)
    reference.set_parameters(prog.parameters())
    for k in prog.var_names():
        reference.set_var(k, prog.get_var(k))
    assert prog.train(x, y) == reference.train(x, y)   # and it goes on from there


# --- elementwise chains ----------------------------------------------------------------------

class Infer(fluid.Program):
    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[6], dtype="float32")
        h = fluid.layers.fc(x, size=8, act="relu")
        h = fluid.layers.dropout(h, dropout_prob=0.3)     # random: never fused
        h = fluid.layers.scale(fluid.layers.tanh(h), scale=2.0, bias=1.0)
        both = fluid.layers.sigmoid(h) + h
        return fluid.layers.fc(both, size=2, act="tanh")


def test_chain_pass_is_pure_verified_and_leaves_shared_values_alone():
    prog = Infer().Compile(seed=0)
    block = prog.program.block("infer")
    before = format_block(prog.program, block)
    from fluid_interactive.passes.fuse import fuse_elementwise_chains
    fused = fuse_elementwise_chains(prog.program, block)
    assert format_block(prog.program, block) == before
    check_program(dataclasses.replace(prog.program, blocks=[
        fused if b is block else b for b in prog.program.blocks]))
    chains = [[m[0] for m in op.attrs["ops"]] for op in fused.ops
              if op.type == "fused_elementwise"]
    # h (scale's result) is read by sigmoid and by the add: it ends one chain, and the add
    # takes it as its side input in the next
    assert chains == [["elementwise_add", "relu"], ["tanh", "scale"],
                      ["sigmoid", "elementwise_add"], ["elementwise_add", "tanh"]]
    assert any(op.type == "dropout" for op in fused.ops)


def test_chains_change_no_value_nor_any_random_draw(monkeypatch, rng):
    x = rng.standard_normal((5, 6)).astype(np.float32)

    class Train(fluid.Program):
        @fluid.network("x", "y")
        def train(self, x, y):
            x = fluid.layers.data(name="x", shape=[6], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="int64")
            h = fluid.layers.fc(x, size=8, act="relu")
            h = fluid.layers.dropout(h, dropout_prob=0.3)
            logits = fluid.layers.fc(fluid.layers.scale(h, scale=0.5), size=3, act="tanh")
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
            fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
            return loss

    y = rng.integers(0, 3, (5, 1))
    for cls, method, args in ((Infer, "infer", (x,)), (Train, "train", (x, y))):
        plain, fused = _compiled(monkeypatch, cls, False), _compiled(monkeypatch, cls, True)
        for _ in range(3):   # dropout draws the same masks: its index is kept
            np.testing.assert_array_equal(getattr(fused, method)(*args),
                                          getattr(plain, method)(*args))
        assert "fused_elementwise" in getattr(fused, method).source
        assert "fused_elementwise" not in getattr(plain, method).source
