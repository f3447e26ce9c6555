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


def check_export(net, path: str, feeds_of, batches, opset: int = 17, rtol: float = 1e-5,
                 atol: float = 1e-5, import_atol: float = 1e-6):
    """Export ``net.infer`` to ``path`` (full onnx.checker), import the file back, and for
    the feeds ``feeds_of(batch)`` of each batch size check that onnxruntime and the
    imported program give what ``infer`` gives (shapes and dtypes too). Returns the
    imported program."""
    import fluid
    fluid.export_onnx(net, path, opset=opset)
    onnx.checker.check_model(onnx.load(path), full_check=True)
    back = fluid.import_onnx(path)
    for batch in batches:
        feeds = feeds_of(batch)
        want = as_list(net.infer(**feeds))
        got = ort_run(path, feeds)
        again = as_list(back.infer(**feeds))
        assert len(got) == len(want) == len(again)
        for w, g, a in zip(want, got, again):
            if isinstance(w, float):   # a 0-d float result comes back as a Python float
                w = np.float32(w)
            assert g.shape == np.shape(w) and g.dtype == np.asarray(w).dtype
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
            np.testing.assert_allclose(a, w, rtol=rtol, atol=import_atol)
    return back


def check_exported(net, path: str, batches: list, opset: int = 17):
    """`check_export` for ``batches`` given as the feed dicts themselves."""
    return check_export(net, path, lambda feeds: feeds, batches, opset)
