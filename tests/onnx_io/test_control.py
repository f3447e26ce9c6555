"""Control flow in ONNX: a While exported as an ONNX Loop, a cond and a Switch case as If, a
StaticRNN as a Loop with scan outputs; each checked against onnxruntime and imported back
at several trip counts, batch sizes and sequence lengths."""
import warnings

import numpy as np
import pytest

import fluid

from .helpers import check_export, check_exported, onnx, ort_run

L = fluid.layers


class Loops(fluid.Program):
    @fluid.network("x", "n")
    def infer(self, x, n):
        x = L.data("x", shape=[4])
        n = L.data("n", shape=[1], dtype="int64", append_batch_size=False)
        w = L.create_parameter([4, 4], "float32", name="w")
        h = L.fill_constant_batch_size_like(x, [-1, 4], "float32", 0.0)
        i = L.fill_constant([1], "int64", 0)
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            L.assign(L.tanh(L.matmul(h, w) + x), output=h)
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=cond)
        positive = L.greater_than(L.reshape(L.reduce_sum(h), [1]),
                                  L.fill_constant([1], "float32", 0.0))
        chosen = L.cond(positive, lambda: h * 2.0, lambda: h - 1.0)
        scale = L.fill_constant([1], "float32", 1.0)
        with L.Switch() as switch:
            with switch.case(L.less_than(i, L.fill_constant([1], "int64", 2))):
                L.assign(L.fill_constant([1], "float32", 10.0), output=scale)
            with switch.case(L.equal(L.elementwise_mod(i, L.fill_constant([1], "int64", 2)),
                                     L.fill_constant([1], "int64", 1))):
                L.assign(L.fill_constant([1], "float32", -3.0), output=scale)
        return chosen * scale, i


def test_a_while_loop_matches_onnxruntime_and_imports_back(tmp_path, rng):
    prog = Loops().Compile(seed=0)
    path = str(tmp_path / "loops.onnx")
    feeds = [{"x": rng.standard_normal((rows, 4)).astype(np.float32), "n": np.array([n])}
             for rows in (3, 1) for n in (0, 1, 2, 5, 8)]
    back = check_exported(prog, path, feeds)
    graph = onnx.load(path).graph
    types = [node.op_type for node in graph.node]
    # one If for the cond (both blocks and the choice), one per Switch case
    assert types.count("Loop") == 1 and types.count("If") == 3
    read = {n for node in graph.node for n in node.input} | {v.name for v in graph.output}
    read |= {n for node in graph.node for a in node.attribute if a.g.name
             for inner in a.g.node for n in inner.input}
    assert all(set(node.output) & read for node in graph.node)   # no node left unread
    ops = [op.type for op in back.program.block("infer").ops]
    assert ops.count("while") == 1 and ops.count("select_input") == 1


def _rnn(hidden=5):
    class RNN(fluid.Program):
        @fluid.network("x")
        def infer(self, x):
            x = L.data("x", shape=[-1, -1, 3], append_batch_size=False)
            rnn = L.StaticRNN()
            with rnn.step():
                x_t = rnn.step_input(x)
                h_prev = rnn.memory(shape=[-1, hidden], batch_ref=x_t)
                c_prev = rnn.memory(shape=[-1, hidden], batch_ref=x_t)
                i, f, o, g = L.split(L.fc(input=[x_t, h_prev], size=4 * hidden), 4, dim=1)
                c = L.sigmoid(f) * c_prev + L.sigmoid(i) * L.tanh(g)
                h = L.sigmoid(o) * L.tanh(c)
                rnn.update_memory(h_prev, h)
                rnn.update_memory(c_prev, c)
                rnn.step_output(h)
            hs = rnn()
            return hs, L.fc(hs[-1], size=1)
    return RNN


def test_a_static_rnn_matches_onnxruntime_and_imports_back(tmp_path, rng):
    prog = _rnn()().Compile(seed=0)
    path = str(tmp_path / "rnn.onnx")
    check_export(prog, path, lambda shape: {"x": rng.standard_normal(shape).astype(np.float32)},
                 [(1, 2, 3), (4, 1, 3), (11, 5, 3)])
    assert [node.op_type for node in onnx.load(path).graph.node].count("Loop") == 1


def test_a_loop_body_op_without_a_mapping_names_the_loop():
    class Unmapped(fluid.Program):
        @fluid.network("x")
        def infer(self, x):
            x = L.data("x", shape=[3])
            h = L.scale(x, 1.0)
            i, n = L.fill_constant([1], "int64", 0), L.fill_constant([1], "int64", 2)
            cond = L.less_than(i, n)
            loop = L.While(cond)
            with loop.block():   # a random draw: no ONNX mapping
                L.assign(h * L.uniform_random_batch_size_like(h, [-1, 3]), output=h)
                L.increment(i, in_place=True)
                L.less_than(i, n, cond=cond)
            return h
    with pytest.raises(fluid.OnnxError, match=r"(?s)op 'while' runs an op "
                                              r"'uniform_random_batch_size_like' in "
                                              r"its block.*test_control.py:"):
        fluid.export_onnx(Unmapped().Compile(), None)


def _scripted_loop_model(path: str):
    """torch.onnx.export of a scripted module with a for loop (an ONNX Loop with a trip
    count) and an if (an If): the form the importer reads."""
    torch = pytest.importorskip("torch")

    class Recurrence(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 4) * 0.5)

        def forward(self, x, n: int):
            h = torch.zeros_like(x)
            for _ in range(n):
                h = torch.tanh(h @ self.w + x)
            if h.sum() > 0:
                h = h * 2
            else:
                h = h - 1
            return h

    torch.manual_seed(0)
    with warnings.catch_warnings():   # scripting: how loops reach ONNX without tracing
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.script(Recurrence())
        torch.onnx.export(module, (torch.randn(3, 4), 3), path, dynamo=False,
                          input_names=["x", "n"], output_names=["h"],
                          dynamic_axes={"x": {0: "batch"}})
    return module


def test_a_scripted_torch_loop_imports_as_a_while(tmp_path, rng):
    torch = pytest.importorskip("torch")
    path = str(tmp_path / "scripted.onnx")
    module = _scripted_loop_model(path)
    prog = fluid.import_onnx(path)
    types = {op.type for op in prog.program.block("infer").ops}
    assert {"while", "conditional_block", "select_input"} <= types
    x = rng.standard_normal((5, 4)).astype(np.float32)
    for n in (0, 1, 4):
        ours = prog.infer(x, np.array(n))
        with torch.no_grad():
            eager = module(torch.from_numpy(x), n).numpy()
        np.testing.assert_allclose(ours, eager, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ort_run(path, {"x": x, "n": np.array(n)})[0], ours,
                                   rtol=1e-5, atol=1e-6)


def test_an_exported_while_loop_imports_back(tmp_path, rng):
    class Counting(fluid.Program):
        @fluid.network("x", "n")
        def infer(self, x, n):   # n is 0-d: one value per call, as ONNX files take it
            x = L.data("x", shape=[3])
            n = L.data("n", shape=[], dtype="int64", append_batch_size=False)
            h = L.scale(x, 1.0)
            i = L.fill_constant([1], "int64", 0)
            cond = L.less_than(i, n)
            loop = L.While(cond)
            with loop.block():
                L.assign(L.sigmoid(h) * 2.0 - 0.5, output=h)
                L.increment(i, in_place=True)
                L.less_than(i, n, cond=cond)
            return h
    prog = Counting().Compile(seed=0)
    check_exported(prog, str(tmp_path / "counting.onnx"),
                   [{"x": rng.standard_normal((rows, 3)).astype(np.float32), "n": np.array(n)}
                    for rows in (2, 5) for n in (0, 3)])


def test_a_loop_over_a_state_shaped_like_the_batch_imports_back(tmp_path, rng):
    """fill_constant_batch_size_like exports as Shape -> Gather -> Concat ->
    ConstantOfShape: a shape computed in the graph, which imports as a fill and an
    expand; the While's body reads values computed before the Loop."""
    class Accumulate(fluid.Program):
        @fluid.network("x")
        def infer(self, x):
            x = L.data("x", shape=[4])
            w = L.create_parameter([4, 4], "float32", name="w")
            h = L.fill_constant_batch_size_like(x, [-1, 4], "float32", 0.5)
            i = L.fill_constant([1], "int64", 0)
            n = L.fill_constant([1], "int64", 3)
            cond = L.less_than(i, n)
            loop = L.While(cond)
            with loop.block():
                L.assign(L.tanh(L.matmul(h, w) + x), output=h)
                L.increment(i, in_place=True)
                L.less_than(i, n, cond=cond)
            return h
    prog = Accumulate().Compile(seed=0)
    check_export(prog, str(tmp_path / "accumulate.onnx"),
                 lambda rows: {"x": rng.standard_normal((rows, 4)).astype(np.float32)}, (1, 6))
