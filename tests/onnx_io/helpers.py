"""Shared pieces of the ONNX tests: running a file in onnxruntime, building one-method
programs, and the text of a method's ops with names and source lines factored out."""
from __future__ import annotations

import numpy as np
import pytest

import fluid
from fluid_interactive.ops.registry import get_spec

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

#: Attrs that ONNX cannot carry and that only matter while training (a dropout's seed)
#: or never (use_cudnn): left out when comparing ops across a round trip.
NOT_CARRIED = frozenset({"use_cudnn", "fix_seed", "seed"})


def ort_run(model_or_path, feeds: dict) -> list[np.ndarray]:
    """Run a model (a path or a ModelProto) in onnxruntime on one CPU thread."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    source = model_or_path if isinstance(model_or_path, str) else \
        model_or_path.SerializeToString()
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def one_method(build, feeds: dict, name: str = "Net"):
    """A Program class whose ``infer`` declares ``feeds`` (name -> (shape, dtype)) as data
    vars and returns ``build(*vars)``."""
    def infer(self, *args):
        xs = [fluid.layers.data(n, shape=list(s), dtype=d) for n, (s, d) in feeds.items()]
        return build(*xs)
    return type(name, (fluid.Program,), {"infer": fluid.network(*feeds)(infer)})


def canonical_ops(compiled, method: str = "infer") -> list[str]:
    """The method's ops as text with every var renamed by first appearance, all attrs with
    their defaults (less `NOT_CARRIED`), the output types, and no source lines."""
    block = compiled.methods[method].block
    program = compiled.program
    names: dict[str, str] = {n: f"in{i}" for i, n in enumerate(block.feeds)}

    def rename(n: str) -> str:
        if n not in names:
            names[n] = f"v{len(names)}"
        return names[n]
    lines = []
    for op in block.ops:
        spec = get_spec(op.type)
        ins = [f"{s.name}={[rename(n) for n in op.input(s.name)]}" for s in spec.inputs
               if op.input(s.name)]
        outs = []
        for s in spec.outputs:
            for n in op.output(s.name):
                var = program.find_var(block, n)
                outs.append(f"{s.name}={rename(n)}:{var.dtype}{list(var.shape)}")
        attrs = {k: v for k, v in sorted(spec.full_attrs(op.attrs).items())
                 if k not in NOT_CARRIED}
        lines.append(f"{', '.join(outs)} = {op.type}({', '.join(ins)}) {attrs}")
    return lines


def as_list(result) -> list:
    """A method's result as a list (a tuple's items, else the one value)."""
    return list(result) if isinstance(result, tuple) else [result]


#: The ONNX node types of every model exported in this session (subgraphs included):
#: conftest.py records them, test_zz_import_coverage.py checks each has an import rule.
WRITTEN: set[str] = set()


def record_written(graph) -> None:
    for node in graph.node:
        WRITTEN.add(node.op_type)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                record_written(attr.g)


def assert_same(got, want, rtol: float, atol: float, what: str = "") -> None:
    """``got`` (from onnxruntime or an imported program) is ``want`` (from the program):
    the same shape, dtype and values; a tensor array element by element; a number
    (one value without a batch dim, which methods return as a Python number) as any
    one-element array."""
    if not isinstance(want, (np.ndarray, np.generic, bool, int, float)):   # an array
        assert not isinstance(got, np.ndarray) and len(got) == len(want), (what, type(got))
        for k in range(len(want)):   # onnxruntime gives a list, a program its array value
            assert_same(got[k], want[k], rtol, atol, f"{what}[{k}]")
        return
    if isinstance(want, (bool, int, float)):
        assert np.size(got) == 1, (what, np.shape(got))
        np.testing.assert_allclose(np.reshape(got, ()), want, rtol=rtol, atol=atol,
                                   err_msg=what)
        return
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, \
        (what, got.shape, want.shape, got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def check_export(net, path: str, feeds_of, batches, opset: int = 17, rtol: float = 1e-5,
                 atol: float = 1e-5, import_atol: float = 1e-6, method: str = "infer"):
    """Export ``net.<method>`` to ``path`` (full onnx.checker), import the file back, and
    for the feeds ``feeds_of(batch)`` of each batch size check that onnxruntime and the
    imported program give what the method gives (shapes and dtypes too). Returns the
    imported program."""
    import fluid
    fluid.export_onnx(net, path, method=method, opset=opset)
    onnx.checker.check_model(onnx.load(path), full_check=True)
    back = fluid.import_onnx(path)
    for batch in batches:
        feeds = feeds_of(batch)
        want = as_list(getattr(net, method)(**feeds))
        got = ort_run(path, feeds)
        again = as_list(back.infer(**feeds))
        assert len(got) == len(want) == len(again)
        for k, (w, g, a) in enumerate(zip(want, got, again)):
            assert_same(g, w, rtol, atol, f"onnxruntime's output {k} at {batch}")
            assert_same(a, w, rtol, import_atol, f"the import's output {k} at {batch}")
    return back


def check_exported(net, path: str, batches: list, opset: int = 17, **tolerances):
    """`check_export` for ``batches`` given as the feed dicts themselves."""
    return check_export(net, path, lambda feeds: feeds, batches, opset, **tolerances)
