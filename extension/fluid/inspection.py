"""``%fluid inspect PROG``: what the last call kept of the vars ``prog.watch(...)`` names,
layer by layer.

For each layer of the method that ran: its activation (the output of its last forward op)
with a histogram, its mean and spread, and the fraction of *dead units* (units that gave 0
for every sample of the batch: dead ReLUs); and for each of its parameters the gradient's
norm, the ratio of that norm to the parameter's (``x |w|``: how far a plain SGD step moves
it, per unit of learning rate) and a histogram of the gradient. Watch what you want to see first::

    prog.watch("mlp")            # every activation and gradient under var_scope 'mlp'
    prog.train_step(x, y)
    %fluid inspect prog          # or fluid.inspect(prog)

Nothing here imports IPython.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fluid_interactive.backend import to_host
from fluid_interactive.ir.layers import model_ops
from fluid_interactive.runtime.live.compiled import CompiledProgram
from fluid_interactive.util.table import Table

from .var_stats import histogram_svg

__all__ = ["inspect", "Inspection", "LayerValues"]

def _host(value: Any) -> np.ndarray:
    return np.asarray(to_host(value), dtype=np.float64)


def dead_fraction(activation: np.ndarray) -> float | None:
    """The fraction of units (everything but the batch dimension) that are 0 for every
    sample; None for a value without a batch of units."""
    if activation.ndim < 2 or activation.shape[0] == 0:
        return None
    alive = np.any(activation != 0, axis=0)
    return float(1.0 - alive.mean())


@dataclass
class ParamGrad:
    param: str
    grad: str
    norm: float
    relative: float | None          # ||grad|| / ||param||
    values: np.ndarray


@dataclass
class LayerValues:
    """One layer's watched values from the last call."""
    layer: str
    activation: str | None = None
    values: np.ndarray | None = None
    dead: float | None = None
    grads: list[ParamGrad] = field(default_factory=list)

    def stats(self) -> str:
        if self.values is None or not self.values.size:
            return "-"
        v = self.values
        return f"mean {v.mean():.4g}, std {v.std():.4g}"


@dataclass
class Inspection:
    """The last watched call of a program, per layer; a text table, or HTML with
    histograms in a notebook."""
    title: str
    layers: list[LayerValues]
    note: str = ""

    def table(self) -> Table:
        rows = []
        for lv in self.layers:
            grads = "; ".join(
                f"{g.param.rpartition('/')[2]}: {g.norm:.3g}"
                + (f" ({g.relative:.2g} x |w|)" if g.relative is not None else "")
                for g in lv.grads)
            shape = list(lv.values.shape) if lv.values is not None else ""
            rows.append([lv.layer, lv.activation or "-", str(shape), lv.stats(),
                         "-" if lv.dead is None else f"{100 * lv.dead:.0f}%", grads or "-"])
        return Table(["layer", "activation", "shape", "values", "dead units",
                      "gradient norm"], rows, title=self.title, align="llllrl",
                     footer=[self.note] if self.note else [])

    def __repr__(self) -> str:
        if not self.layers:
            return f"{self.title}\n{self.note}"
        return repr(self.table())

    def _repr_html_(self) -> str:
        if not self.layers:
            return (f'<div class="fluid-inspect"><b>{html.escape(self.title)}</b><br>'
                    f"{html.escape(self.note)}</div>")
        cells = []
        for lv in self.layers:
            act = ("" if lv.values is None else
                   f"<div>{html.escape(lv.activation or '')} {list(lv.values.shape)}: "
                   f"{html.escape(lv.stats())}"
                   + ("" if lv.dead is None else
                      f", <b>{100 * lv.dead:.0f}%</b> dead units") + "</div>"
                   + histogram_svg(lv.values, width=260, height=80))
            grads = "".join(
                f"<div>{html.escape(g.grad)}: norm {g.norm:.3g}"
                + ("" if g.relative is None else f", {g.relative:.2g} &#215; |w|")
                + "</div>" + histogram_svg(g.values, width=260, height=60)
                for g in lv.grads)
            cells.append(f'<tr><td style="vertical-align:top;padding:4px 8px;'
                         f'font-family:monospace"><b>{html.escape(lv.layer)}</b></td>'
                         f'<td style="vertical-align:top;padding:4px 8px">{act or "-"}</td>'
                         f'<td style="vertical-align:top;padding:4px 8px">{grads or "-"}</td>'
                         f"</tr>")
        note = f"<div>{html.escape(self.note)}</div>" if self.note else ""
        return (f'<div class="fluid-inspect"><b>{html.escape(self.title)}</b>'
                f'<table class="fluid-table"><thead><tr><th>layer</th><th>activation</th>'
                f"<th>parameter gradients</th></tr></thead><tbody>{''.join(cells)}"
                f"</tbody></table>{note}</div>")


def inspect(program: CompiledProgram, method: str | None = None) -> Inspection:
    """The watched values of ``program``'s last call (of ``method``, when given), layer by
    layer: activations with dead units, parameter gradients with their norms."""
    if not isinstance(program, CompiledProgram):
        raise TypeError(f"inspect() takes a compiled program; got {type(program).__name__}")
    kept = program.watched if method is None else program.methods[method].watched
    if not kept:
        return Inspection("nothing watched yet", [], note=(
            "Name what to keep, then call a method: prog.watch('mlp') (a var_scope, a layer "
            "or a var; prog.watch('*') keeps everything), prog.train_step(...), and inspect "
            "again."))
    block = program.methods[kept.method].block
    grads_of = {op.role_var[0]: op.role_var[1] for op in block.ops if len(op.role_var) == 2}
    layers: dict[str, LayerValues] = {}
    for layer, op in model_ops(block):
        out = op.output_names()[0]
        lv = layers.setdefault(layer, LayerValues(layer))
        if out in kept:
            lv.activation, lv.values = out, _host(kept[out])
        for param in op.input_names():
            grad = grads_of.get(param)
            if grad is None or grad not in kept or any(g.param == param for g in lv.grads):
                continue
            g = _host(kept[grad])
            weights = np.linalg.norm(_host(program.get_var(param)))
            lv.grads.append(ParamGrad(param, grad, float(np.linalg.norm(g)),
                                      float(np.linalg.norm(g) / weights) if weights else None,
                                      g))
    for lv in layers.values():
        if lv.values is not None:
            lv.dead = dead_fraction(lv.values)
    shown = [lv for lv in layers.values() if lv.values is not None or lv.grads]
    return Inspection(f"{program.program.name}.{kept.method}(), call {kept.call}", shown)
