"""`import_onnx` and `onnx_program`: an ONNX model as a `fluid.Program` subclass.

The class has one network method, ``infer``, whose data vars are the graph's inputs and
which returns its outputs. Its helper ``self.onnx_graph(*inputs, outputs=...)`` replays the
graph (or the part of it that the named values need) inside any network method, so a
subclass can train on the imported layers::

    Base = fluid.onnx_program("cnn.onnx")

    class FineTune(Base):
        @fluid.network("image", "label")
        def train_step(self, image, label):
            image = fluid.layers.data("image", shape=[1, 8, 8])
            label = fluid.layers.data("label", shape=[1], dtype="int64")
            features = self.onnx_graph(image, outputs="cnn/fc_0.tmp_2")
            with fluid.var_scope("head"):
                logits = fluid.layers.fc(features, size=10)
            ...

Initializers become parameters named as in the file, starting at the file's values, and
shared by every method that replays the graph.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar

from ..errors import OnnxError
from ..frontend.layers.helpers import as_variable
from ..frontend.layers.io import data
from ..frontend.program import Program, network
from ..frontend.tracing import current_trace
from ..frontend.variable import Variable
from ..runtime.live.compiled import CompiledProgram
from . import (  # noqa: F401  (the rules)
    import_array,
    import_control,
    import_creation,
    import_detect,
    import_index,
    import_math,
    import_math2,
    import_nn,
    import_query,
    import_rnn,
    import_shape,
    import_vision,
)
from .import_graph import OnnxGraph, read_onnx
from .import_registry import IMPORT_RULES, Replay


class OnnxProgram(Program):
    """Base class of imported ONNX models (made by `onnx_program`)."""

    _onnx: ClassVar[OnnxGraph | None] = None

    def onnx_graph(self, *inputs: Variable,
                   outputs: None | str | Sequence[str] = None) -> Any:
        """Replay the imported graph inside a network method, on ``inputs`` (one Variable
        per graph input, in order). Returns what ``infer`` returns, or with ``outputs`` the
        named ONNX value (a name) or values (a list of names, giving a tuple); only the
        nodes those values need are replayed. `onnx_values()` lists the names."""
        graph = self._graph()
        if len(inputs) != len(graph.inputs):
            raise OnnxError(f"onnx_graph takes {len(graph.inputs)} input(s) "
                            f"({', '.join(i.name for i in graph.inputs)}), got {len(inputs)}")
        trace = current_trace("onnx_graph")
        names = [as_variable(v, "an onnx_graph input").name for v in inputs]
        wanted = graph.outputs if outputs is None else \
            [outputs] if isinstance(outputs, str) else list(outputs)
        known = set(self.onnx_values())
        for name in wanted:
            if name not in known:
                raise OnnxError(f"onnx_graph: the graph has no value {name!r}; see "
                                f"onnx_values() for the names")
        result = [Variable(trace, v) for v in Replay(graph, trace).run(names, wanted)]
        if outputs is not None:
            return result[0] if isinstance(outputs, str) else tuple(result)
        return _structure(graph, dict(zip(wanted, result)))

    @classmethod
    def onnx_values(cls) -> list[str]:
        """The names of the graph's values that `onnx_graph` can return: its inputs, then
        every node's outputs in graph order."""
        graph = cls._graph()
        return [i.name for i in graph.inputs] + \
            [o for node in graph.nodes for o in node.outputs if o]

    @classmethod
    def onnx_nodes(cls) -> list[tuple[str, list[str], list[str]]]:
        """(node type, input names, output names) of every node, in graph order."""
        return [(n.op_type, list(n.inputs), list(n.outputs)) for n in cls._graph().nodes]

    @classmethod
    def _graph(cls) -> OnnxGraph:
        if cls._onnx is None:
            raise OnnxError(f"{cls.__name__} holds no ONNX graph; make the class with "
                            f"fluid.onnx_program(path)")
        return cls._onnx


def _structure(graph: OnnxGraph, values: dict[str, Variable]) -> Any:
    """The graph's outputs as the exporting method returned them (recorded in the file),
    else one value or a tuple."""
    def build(r: Any) -> Any:
        if isinstance(r, str):
            return values[r]
        if isinstance(r, dict):
            return {k: build(v) for k, v in r.items()}
        return tuple(build(v) for v in r)
    if graph.returns is not None:
        return build(graph.returns)
    outs = [values[n] for n in graph.outputs]
    return outs[0] if len(outs) == 1 else tuple(outs)


def onnx_program(path: str | os.PathLike) -> type:
    """The `fluid.Program` subclass of the ONNX model at ``path``: an ``infer`` network
    method running the graph, and ``onnx_graph(...)`` to replay it in methods a subclass
    adds. Node types without an import rule are an `OnnxError` listing them with counts."""
    graph = read_onnx(os.fspath(path), IMPORT_RULES)
    feeds = [i.name for i in graph.inputs]

    def infer(self: OnnxProgram) -> Any:
        return self.onnx_graph(*[data(i.name, list(i.shape), i.dtype, append_batch_size=False)
                                 for i in graph.inputs])
    infer.__doc__ = f"Run the ONNX graph of {os.path.basename(graph.path)}."
    return type("OnnxModel", (OnnxProgram,), {"_onnx": graph, "infer": network(*feeds)(infer),
                                              "__module__": __name__})


def import_onnx(path: str | os.PathLike, seed: int | None = None,
                device: str | None = None) -> CompiledProgram:
    """The ONNX model at ``path`` as a compiled program: ``infer(...)`` runs the graph, its
    initializers are the program's parameters (trainable), and it prints and draws like any
    other. Subclass ``onnx_program(path)`` (or ``result.source_class``) to add training
    methods."""
    return onnx_program(path)().Compile(seed=seed, device=device)
