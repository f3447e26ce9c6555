"""The layout plan pass (passes/layout.py): pure and verified, it runs a LeNet's chain of
convolutions, pools, bias adds, activations and their gradients batch innermost with
conversions only at the chain's ends, leaves alone what does not pay or cannot be
expressed, keeps the program as written (and drawn, and exported) NCHW, and trains as
the NCHW plan does: within float32 rounding (a GEMM's columns and a bias gradient's sum
run in another order), losses and parameters after several steps."""
import dataclasses

import numpy as np
import pytest

import fluid
from fluid_interactive.ir.records import returned_names
from fluid_interactive.ir.text import format_block
from fluid_interactive.passes.layout import choose_layouts
from fluid_interactive.passes.pipeline import PLAN_PASSES
from fluid_interactive.passes.verify import check_program

WITHOUT = ",".join(name for name in PLAN_PASSES if name != "choose_layouts")


def lenet(act_first: bool = True, extra=None):
    """conv -> (bias, relu) -> max pool -> conv -> pool -> fc: W3's shape, smaller.
    ``extra(h)`` may add ops on the second pool's input."""
    class LeNet(fluid.Program):
        @fluid.network("x", "y")
        def train(self, x, y):
            x = fluid.layers.data(name="x", shape=[1, 12, 12], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="int64")
            if act_first:
                h = fluid.layers.conv2d(x, num_filters=4, filter_size=3, act="relu")
                h = fluid.layers.pool2d(h, pool_size=2, pool_stride=2)
            else:
                h = fluid.nets.simple_img_conv_pool(x, num_filters=4, filter_size=3,
                                                      pool_size=2, pool_stride=2, act="relu")
            h = fluid.layers.conv2d(h, num_filters=6, filter_size=3, padding=1, act="relu")
            if extra is not None:
                h = extra(h)
            h = fluid.layers.pool2d(h, pool_size=2, pool_stride=2)
            logits = fluid.layers.fc(h, size=3)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
            fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
            return loss

        @fluid.network("x")
        def infer(self, x):
            x = fluid.layers.data(name="x", shape=[1, 12, 12], dtype="float32")
            h = fluid.layers.conv2d(x, num_filters=4, filter_size=3, act="relu")
            return fluid.layers.pool2d(h, pool_size=2, pool_stride=2)
    return LeNet


def _data(rng, n=8):
    return (rng.standard_normal((n, 1, 12, 12)).astype(np.float32),
            rng.integers(0, 3, (n, 1)).astype(np.int64))


def _compiled(monkeypatch, cls, layout: bool):
    if layout:
        monkeypatch.delenv("FLUID_PLAN_PASSES", raising=False)
    else:
        monkeypatch.setenv("FLUID_PLAN_PASSES", WITHOUT)
    prog = cls().Compile(seed=5)
    monkeypatch.delenv("FLUID_PLAN_PASSES", raising=False)
    return prog


def _plan_block(prog, method="train"):
    return getattr(prog, method).runner.plan_block


def _with_block(program, old, new):
    return dataclasses.replace(program, blocks=[new if b is old else b
                                                for b in program.blocks])


@pytest.fixture(autouse=True)
def one_thread():
    """A GEMM's last bits may depend on BLAS's thread count: fix it."""
    fluid.set_threads(1)
    yield
    fluid.set_threads(None)


def test_pass_is_pure_verified_and_converts_only_at_the_chain_ends():
    prog = lenet()().Compile(seed=0)
    block = prog.program.block("train")
    before = format_block(prog.program, block)
    out = choose_layouts(prog.program, block)
    assert format_block(prog.program, block) == before        # the input is untouched
    check_program(_with_block(prog.program, block, out))
    transfers = [(op.inputs["X"][0], op.attrs["dst_layout"]) for op in out.ops
                 if op.type == "transfer_layout"]
    # in: the images; out: the second pool's output, which fc reads; in: its gradient
    assert transfers == [("x", "CHWN"), ("pool2d_1.tmp_0@CHWN", "NCHW"),
                         ("pool2d_1.tmp_0@GRAD", "CHWN")]
    layouts = {op.type: op.attrs.get("data_format") for op in out.ops
               if op.type.startswith(("conv2d", "pool2d"))}
    assert layouts == {"conv2d": "CHWN", "pool2d": "CHWN", "conv2d_grad": "CHWN",
                       "pool2d_grad": "CHWN"}
    adds = [op.attrs["axis"] for op in out.ops if op.type.startswith("elementwise_add")
            and op.inputs["X"][0].endswith("@CHWN")]
    assert adds and set(adds) == {0}                          # the bias: channels first
    assert out.vars["conv2d_0.tmp_0@CHWN"].shape == (4, 10, 10, -1)
    untouched = [op for op in out.ops if op.type in ("mul", "mul_grad", "sgd")]
    assert all(any(op is o for o in block.ops) for op in untouched)


@pytest.mark.parametrize("act_first", [True, False], ids=["conv2d+pool2d", "conv_pool"])
def test_training_matches_the_nchw_plan(monkeypatch, rng, act_first):
    cls = lenet(act_first)
    plain, chosen = _compiled(monkeypatch, cls, False), _compiled(monkeypatch, cls, True)
    for _ in range(6):
        x, y = _data(rng)
        np.testing.assert_allclose(chosen.train(x, y), plain.train(x, y), rtol=1e-5)
        np.testing.assert_allclose(chosen.infer(x), plain.infer(x), rtol=1e-5, atol=1e-6)
    assert "transfer_layout" in chosen.train.source
    assert "transfer_layout" not in plain.train.source
    for k, v in plain.parameters().items():
        np.testing.assert_allclose(chosen.parameters()[k], v, rtol=1e-4, atol=1e-6)


def _residual(h):
    """A residual branch: the image read twice (its gradient summed), a 1x1 conv, batch
    norm, an average pool of stride 1 and a transposed conv that keep the size."""
    b = fluid.layers.batch_norm(fluid.layers.conv2d(h, num_filters=6, filter_size=1))
    b = fluid.layers.pool2d(b, pool_size=3, pool_type="avg", pool_stride=1, pool_padding=1)
    b = fluid.layers.conv2d_transpose(b, num_filters=6, filter_size=3, padding=1)
    return fluid.layers.relu(h + b)


def test_a_residual_branch_with_batch_norm_trains_as_in_nchw(monkeypatch, rng):
    cls = lenet(extra=_residual)
    plain, chosen = _compiled(monkeypatch, cls, False), _compiled(monkeypatch, cls, True)
    block = _plan_block(chosen)
    check_program(_with_block(chosen.program, chosen.program.block("train"), block))
    kinds = {op.type for op in block.ops if any(n.endswith("@CHWN")
                                                for n in op.output_names())}
    assert {"batch_norm", "batch_norm_grad", "conv2d_transpose", "conv2d_transpose_grad",
            "sum", "elementwise_add", "elementwise_add_grad"} <= kinds
    assert sum(op.type == "transfer_layout" for op in block.ops) == 3
    for _ in range(5):
        x, y = _data(rng)
        np.testing.assert_allclose(chosen.train(x, y), plain.train(x, y), rtol=1e-5)
    for k, v in plain.parameters().items():
        np.testing.assert_allclose(chosen.parameters()[k], v, rtol=1e-4, atol=1e-5)


def test_the_program_as_written_drawn_and_printed_stays_nchw(rng):
    prog = lenet()().Compile(seed=0)
    x, y = _data(rng)
    prog.train(x, y)
    assert "CHWN" in prog.train.source
    assert "CHWN" not in repr(prog) and "transfer_layout" not in repr(prog)
    assert "CHWN" not in format_block(prog.program, prog.program.block("train"))
    drawn = fluid.graph(prog)
    assert "conv2d" in drawn.dot and "CHWN" not in drawn.dot + drawn.text
    prog.infer(x)
    assert "CHWN" in prog.infer.source
    model = fluid.export_onnx(prog, None, method="infer")
    kinds = [n.op_type for n in model.graph.node]
    assert "Conv" in kinds and "MaxPool" in kinds and "Transpose" not in kinds


def test_the_pass_can_be_turned_off(monkeypatch, rng):
    prog = _compiled(monkeypatch, lenet(), False)
    assert not any(op.type == "transfer_layout" for op in _plan_block(prog).ops)
    monkeypatch.setenv("FLUID_PLAN_PASSES", "choose_layouts")
    alone = lenet()().Compile(seed=0)
    ops = {op.type for op in _plan_block(alone).ops}
    assert "transfer_layout" in ops and "fused_elementwise" not in ops


def test_what_does_not_pay_or_cannot_follow_stays_nchw():
    class Small(fluid.Program):
        @fluid.network("x", "s")
        def infer(self, x, s):
            x = fluid.layers.data(name="x", shape=[3, 8, 8], dtype="float32")
            s = fluid.layers.data(name="s", shape=[3], dtype="float32")   # [N, C]
            lone = fluid.layers.pool2d(fluid.layers.relu(x), pool_size=2, pool_stride=2)
            scaled = fluid.layers.elementwise_mul(lone, s, axis=0)       # cannot follow
            return fluid.layers.relu(scaled)
    prog = Small().Compile(seed=0)
    block = prog.program.block("infer")
    # a pool alone saves less than converting its input and output costs
    assert choose_layouts(prog.program, block) is block

    class Split(fluid.Program):
        @fluid.network("x", "s")
        def infer(self, x, s):
            x = fluid.layers.data(name="x", shape=[3, 10, 10], dtype="float32")
            s = fluid.layers.data(name="s", shape=[4], dtype="float32")
            h = fluid.layers.conv2d(x, num_filters=4, filter_size=3, act="relu")
            h = fluid.layers.elementwise_mul(h, s, axis=0)               # per sample
            return fluid.layers.pool2d(fluid.layers.conv2d(h, num_filters=4, filter_size=3),
                                       pool_size=2, pool_stride=2)
    prog = Split().Compile(seed=0)
    block = prog.program.block("infer")
    out = choose_layouts(prog.program, block)
    mul = next(op for op in out.ops if op.type == "elementwise_mul")
    assert any(mul is op for op in block.ops)                  # it stays as written
    moves = [op.attrs["dst_layout"] for op in out.ops if op.type == "transfer_layout"]
    assert moves and moves == ["CHWN", "NCHW"] * (len(moves) // 2)   # each chain: in, out


def test_inference_of_one_image_matches(rng):
    prog = lenet()().Compile(seed=0)
    x = rng.standard_normal((1, 1, 12, 12)).astype(np.float32)
    got = prog.infer(x)
    assert got.shape == (1, 4, 5, 5)
    plain = lenet()
    import os
    os.environ["FLUID_PLAN_PASSES"] = WITHOUT
    try:
        want = plain().Compile(seed=0).infer(x)
    finally:
        del os.environ["FLUID_PLAN_PASSES"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_returned_image_inside_the_chain_leaves_in_nchw(rng):
    class Both(fluid.Program):
        @fluid.network("x")
        def infer(self, x):
            x = fluid.layers.data(name="x", shape=[2, 10, 10], dtype="float32")
            a = fluid.layers.conv2d(x, num_filters=3, filter_size=3, act="relu")
            b = fluid.layers.pool2d(a, pool_size=2, pool_stride=2)
            return a, fluid.layers.conv2d(b, num_filters=5, filter_size=2)
    prog = Both().Compile(seed=1)
    block = _plan_block(prog, "infer")
    assert [op.attrs["dst_layout"] for op in block.ops if op.type == "transfer_layout"] \
        == ["CHWN", "NCHW", "NCHW"]
    x = rng.standard_normal((4, 2, 10, 10)).astype(np.float32)
    a, c = prog.infer(x)
    assert a.shape == (4, 3, 8, 8) and c.shape == (4, 5, 3, 3)
    ref = prog.program.clone()
    from fluid_interactive.ops.interpret import run_ops
    env = {"x": x, **prog.parameters()}
    run_ops(ref.block("infer").ops, env)
    np.testing.assert_allclose(a, env[ref.block("infer").returns[0]], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, env[ref.block("infer").returns[1]], rtol=1e-5, atol=1e-6)


def test_an_image_a_member_reads_through_another_slot_is_converted_back(rng):
    """A chain's conv output that a member of the chain also reads as its Filter (not an
    image slot) must be there in NCHW too: it leaves the chain, though no op outside it
    reads it."""
    from fluid_interactive.ir.records import OpDesc, VarDesc
    from fluid_interactive.ops.interpret import run_ops

    class Fixed(fluid.Program):
        @fluid.network("x")
        def infer(self, x):
            x = fluid.layers.data(name="x", shape=[3, 2, 10, 10], dtype="float32",
                                  append_batch_size=False)
            a = fluid.layers.conv2d(x, num_filters=3, filter_size=3, act="relu")
            return fluid.layers.pool2d(a, pool_size=2, pool_stride=2)
    prog = Fixed().Compile(seed=0)
    block = prog.program.block("infer")
    a = next(op for op in block.ops if op.type == "pool2d").inputs["X"][0]   # [3, 3, 8, 8]
    self_filtered = OpDesc("conv2d", {"Input": [a], "Filter": [a]}, {"Output": ["z"]},
                           {"strides": [1, 1], "paddings": [0, 0]})
    block = dataclasses.replace(block, ops=block.ops + [self_filtered],
                                vars={**block.vars, "z": VarDesc("z", (3, 3, 1, 1))},
                                returns=(block.returns, "z"))
    program = _with_block(prog.program, prog.program.block("infer"), block)
    out = choose_layouts(program, block)
    check_program(_with_block(program, block, out))
    conv = next(op for op in out.ops if op.outputs.get("Output") == ["z@CHWN"])
    assert conv.inputs == {"Input": [a + "@CHWN"], "Filter": [a]}
    assert any(op.type == "transfer_layout" and op.outputs["Out"] == [a] for op in out.ops)
    env = {"x": rng.standard_normal((3, 2, 10, 10)).astype(np.float32), **prog.parameters()}
    want, got = dict(env), dict(env)
    run_ops(block.ops, want)
    run_ops(out.ops, got)
    for name in returned_names(block.returns):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)
