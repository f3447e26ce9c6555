"""`fluid`: the notebook face of fluid_interactive.

``import fluid`` gives the whole public API of the engine, plus a few notebook helpers that
work in a plain script too: `fluid.train` (a training loop with a progress display),
`fluid.graph` (draw a program), `fluid.heatmap` (a 2-D array with axes and a colour
scale), `fluid.explore` (the variable explorer), `fluid.inspect`
(the activations and gradients a watched call kept, layer by layer) and
`fluid.live_reload` (recompile live programs when their class is redefined), and ONNX in
and out: `fluid.export_onnx`, `fluid.import_onnx`, `fluid.onnx_program` (docs/export.md).
``fluid.scope`` is another name for `fluid.var_scope`.
`fluid.diff` (what differs between two programs) and ``prog.rewind(n)`` come from the
engine; the extension shows diffs as drawings and adds ``%fluid history`` / ``%fluid rewind``.

In IPython or Jupyter, ``%load_ext fluid`` also puts ``fluid`` into the namespace,
registers the ``%fluid`` / ``%%fluid`` magics, graph display of programs, the cell hooks
that keep programs alive across redefinitions, and a traceback filter that ends errors at
your line. A session::

    In [1]: %load_ext fluid
    In [2]: class Net(fluid.Program):
       ...:     @fluid.network("x")
       ...:     def infer(self, x):
       ...:         x = fluid.layers.data(name="x", shape=[4], dtype="float32")
       ...:         return fluid.layers.fc(input=x, size=1)
    In [3]: net = Net().Compile(seed=0)
    In [4]: net                      # a graph (SVG) in Jupyter
    In [5]: %fluid vars net
    name         shape  dtype    bytes  device  min  max  mean
    ...

See docs/notebook.md. Nothing in this package imports IPython until the extension loads.
"""
import os as _os

from fluid_interactive import *  # noqa: F403
from fluid_interactive import __all__ as _engine_all
from fluid_interactive.ir.source import exclude_path as _exclude_path
from fluid_interactive.onnx import OnnxProgram, export_onnx, import_onnx, onnx_program

from .display import Graph, graph
from .heatmap import Heatmap, heatmap
from .inspection import inspect
from .live import live_reload
from .training import History, train
from .widgets import explore

#: The proposal's review thread spells `var_scope` as ``fluid.scope``; both work.
scope = var_scope  # noqa: F405  (var_scope comes from the engine's star import)

# Frames in this package are never reported as the user's line.
_exclude_path(_os.path.dirname(_os.path.abspath(__file__)))


def load_ipython_extension(ipython) -> None:
    """``%load_ext fluid``: see `fluid.ipython`."""
    from .ipython import load_ipython_extension as load
    load(ipython)


def unload_ipython_extension(ipython) -> None:
    """``%unload_ext fluid``: remove everything the load registered."""
    from .ipython import unload_ipython_extension as unload
    unload(ipython)


__all__ = list(_engine_all) + ["scope", "train", "History", "graph", "Graph", "heatmap",
                               "Heatmap", "explore", "inspect",
                               "live_reload", "export_onnx", "import_onnx", "onnx_program",
                               "OnnxProgram",
                               "load_ipython_extension", "unload_ipython_extension"]
