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

A layer inside a loop's body (a ``While``, a ``StaticRNN`` step) kept its value of every
iteration, stacked along a new first dim: it is shown per iteration (`iterations`), with
its mean and spread across the iterations, a strip of histograms of a few of them on one
scale, the norm of its gradient in each iteration when that is watched too, and a table
of every iteration; its dead units are those silent in every iteration.

Nothing here imports IPython.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fluid_interactive.backend import to_host
from fluid_interactive.ir.blocks import nested_blocks
from fluid_interactive.ir.layers import model_ops
from fluid_interactive.ir.records import BlockDesc, ProgramDesc
from fluid_interactive.passes import grad_var_name
from fluid_interactive.render.nesting import construct_name, owner_of
from fluid_interactive.runtime.live.compiled import CompiledProgram
from fluid_interactive.util.selected_rows import SelectedRows
from fluid_interactive.util.table import Table

from .iterations import chart_svg, iteration_stats, sample, shape_text, strip_html, table_html
from .var_stats import histogram_svg

__all__ = ["inspect", "Inspection", "LayerValues"]

_GRAD_COLOUR = "#c0661c"


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
    rows: str = ""                  # a rows-only gradient: "SelectedRows, 3 of 50 rows"


@dataclass
class LayerValues:
    """One layer's watched values from the last call. A layer of a loop's body names the
    loop (``loop``: ``while_1``, or ``while_0 › while_1`` when nested): its ``values``
    hold one value per iteration along the first dim, and ``grad_values`` the gradient of
    its activation per iteration (when that was watched too)."""
    layer: str
    activation: str | None = None
    values: np.ndarray | None = None
    dead: float | None = None
    grads: list[ParamGrad] = field(default_factory=list)
    loop: str = ""
    grad: str | None = None
    grad_values: np.ndarray | None = None

    @property
    def per_iteration(self) -> bool:
        return bool(self.loop) and self.values is not None and self.values.ndim >= 1

    def stats(self) -> str:
        if self.values is None or not self.values.size:
            return "-"
        v = self.values
        return f"mean {v.mean():.4g}, std {v.std():.4g}"

    def shape(self) -> str:
        if self.values is None:
            return ""
        return shape_text(self.values) if self.per_iteration else str(list(self.values.shape))

    def units(self) -> np.ndarray | None:
        """The values as samples of units: a loop's iterations and batch as one axis."""
        if self.values is None:
            return None
        if self.per_iteration and self.values.ndim >= 3:
            return self.values.reshape(-1, *self.values.shape[2:])
        return None if self.per_iteration else self.values


@dataclass
class Inspection:
    """The last watched call of a program, per layer; a text table, or HTML with
    histograms in a notebook. A layer of a loop's body is shown per iteration."""
    title: str
    layers: list[LayerValues]
    note: str = ""

    def table(self) -> Table:
        rows = []
        for lv in self.layers:
            grads = "; ".join(
                f"{g.param.rpartition('/')[2]}: {g.norm:.3g}"
                + (f" ({g.relative:.2g} x |w|)" if g.relative is not None else "")
                + (f" [{g.rows}]" if g.rows else "")
                for g in lv.grads)
            layer = lv.layer + (f", in {lv.loop}" if lv.loop else "")
            rows.append([layer, lv.activation or "-", lv.shape(), lv.stats(),
                         "-" if lv.dead is None else f"{100 * lv.dead:.0f}%", grads or "-"])
        footer = [self.note] if self.note else []
        if any(lv.per_iteration for lv in self.layers):
            footer.append("T × [...]: a layer inside a loop kept one value per iteration, "
                          "stacked along the first dim (T iterations)")
        return Table(["layer", "activation", "shape", "values", "dead units",
                      "gradient norm"], rows, title=self.title, align="llllrl",
                     footer=footer)

    def iteration_table(self) -> Table:
        """A few iterations of each layer inside a loop: mean, spread, norm, and the norm
        of the activation's gradient."""
        rows = []
        for lv in self.layers:
            if not lv.per_iteration or lv.values is None:
                continue
            st = iteration_stats(lv.values)
            gn = iteration_stats(lv.grad_values).norm if lv.grad_values is not None else None
            for t in sample(st.count, 6):
                rows.append([lv.activation or lv.layer, str(t), f"{st.mean[t]:.4g}",
                             f"{st.std[t]:.4g}", f"{st.norm[t]:.4g}",
                             f"{gn[t]:.4g}" if gn is not None and t < len(gn) else "-"])
        return Table(["activation", "iteration", "mean", "std", "norm", "gradient norm"],
                     rows, title="per iteration (a few of them)", align="lrrrrr")

    def __repr__(self) -> str:
        if not self.layers:
            return f"{self.title}\n{self.note}"
        text = repr(self.table())
        if any(lv.per_iteration for lv in self.layers):
            text += "\n\n" + repr(self.iteration_table())
        return text

    def _repr_html_(self) -> str:
        if not self.layers:
            return (f'<div class="fluid-inspect"><b>{html.escape(self.title)}</b><br>'
                    f"{html.escape(self.note)}</div>")
        cells = []
        for lv in self.layers:
            act, grads = _activation_html(lv), _gradients_html(lv)
            layer = f"<b>{html.escape(lv.layer)}</b>" + (
                f'<div style="font-family:sans-serif;color:#767676">in {html.escape(lv.loop)}'
                f"</div>" if lv.loop else "")
            cells.append(f'<tr><td style="vertical-align:top;padding:4px 8px;'
                         f'font-family:monospace">{layer}</td>'
                         f'<td style="vertical-align:top;padding:4px 8px">{act or "-"}</td>'
                         f'<td style="vertical-align:top;padding:4px 8px">{grads or "-"}</td>'
                         f"</tr>")
        note = f"<div>{html.escape(self.note)}</div>" if self.note else ""
        return (f'<div class="fluid-inspect"><b>{html.escape(self.title)}</b>'
                f'<table class="fluid-table"><thead><tr><th>layer</th><th>activation</th>'
                f"<th>parameter gradients</th></tr></thead><tbody>{''.join(cells)}"
                f"</tbody></table>{note}</div>")


def _activation_html(lv: LayerValues) -> str:
    """A layer's activation: its statistics and a histogram; per iteration for a layer
    inside a loop."""
    if lv.values is None:
        return ""
    head = (f"<div>{html.escape(lv.activation or '')} {html.escape(lv.shape())}: "
            f"{html.escape(lv.stats())}"
            + ("" if lv.dead is None else f", <b>{100 * lv.dead:.0f}%</b> dead units")
            + "</div>")
    if not lv.per_iteration:
        return head + histogram_svg(lv.values, width=260, height=80)
    st = iteration_stats(lv.values)
    grad = iteration_stats(lv.grad_values) if lv.grad_values is not None else None
    return (head + f'<div class="fluid-per-iteration">one value per iteration of '
            f"<b>{html.escape(lv.loop)}</b>: the first dim ({st.count}) is the iteration"
            f"</div>"
            + chart_svg([("mean", st.mean, "#2b6ca3")], band=(st.mean - st.std,
                                                              st.mean + st.std))
            + '<div style="font:11px sans-serif;color:#767676">mean &#177; std per '
              "iteration; histograms of a few iterations on one scale:</div>"
            + strip_html(lv.values) + table_html(st, grad))


def _gradients_html(lv: LayerValues) -> str:
    """The parameters' gradients, and for a layer inside a loop the norm of its
    activation's gradient in each iteration."""
    out = "".join(
        f"<div>{html.escape(g.grad)}: norm {g.norm:.3g}"
        + ("" if g.relative is None else f", {g.relative:.2g} &#215; |w|")
        + (f" ({html.escape(g.rows)})" if g.rows else "")
        + "</div>" + histogram_svg(g.values, width=260, height=60)
        for g in lv.grads)
    if lv.per_iteration and lv.grad_values is not None and lv.grad:
        norms = iteration_stats(lv.grad_values).norm
        out += (f'<div>{html.escape(lv.grad)}: norm per iteration</div>'
                + chart_svg([("gradient norm", norms, _GRAD_COLOUR)]))
    return out


def _loop_path(program: ProgramDesc, block: BlockDesc, method: BlockDesc) -> str:
    """The loops (and branches) ``block`` lies in, outermost first: ``while_0 ›
    while_1``."""
    names = []
    b = block
    while b.idx != method.idx and (owner := owner_of(program, b)) is not None:
        names.append(construct_name(program, owner.block, owner.op))
        b = owner.block
    return " › ".join(reversed(names))


def _loops(program: ProgramDesc, method: BlockDesc) -> dict[str, str]:
    """var -> the loops whose iterations its watched value stacks, for the vars declared
    in the blocks nested in ``method`` (a loop's body, its gradient block)."""
    found: dict[str, str] = {}
    for block in nested_blocks(program, method):
        if block.idx != method.idx:
            path = _loop_path(program, block, method)
            for name in block.vars:
                found.setdefault(name, path)
    return found


def _param_grads(program: CompiledProgram, kept: Any, lv: LayerValues, inputs: list[str],
                 grads_of: dict[str, str]) -> None:
    for param in inputs:
        grad = grads_of.get(param)
        if grad is None or grad not in kept or any(g.param == param for g in lv.grads):
            continue
        g, rows = _grad_values(kept[grad])
        weights = np.linalg.norm(_host(program.get_var(param)))
        lv.grads.append(ParamGrad(param, grad, float(np.linalg.norm(g)),
                                  float(np.linalg.norm(g) / weights) if weights else None, g,
                                  rows))


def _grad_values(value: Any) -> tuple[np.ndarray, str]:
    """A gradient's values as a host array, and for a rows-only one (a `SelectedRows`) the
    rows it holds: its histogram and norm are those of its rows (each id once), the
    other rows being zero."""
    if not isinstance(value, SelectedRows):
        return _host(value), ""
    merged = value.get().merged()
    return (np.asarray(merged.values, dtype=np.float64),
            f"SelectedRows, {len(merged.rows)} of {merged.height} rows")


def inspect(program: CompiledProgram, method: str | None = None) -> Inspection:
    """The watched values of ``program``'s last call (of ``method``, when given), layer by
    layer: activations with dead units, parameter gradients with their norms; a layer
    inside a loop per iteration."""
    if not isinstance(program, CompiledProgram):
        raise TypeError(f"inspect() takes a compiled program; got {type(program).__name__}")
    kept = program.watched if method is None else program.methods[method].watched
    if not kept:
        return Inspection("nothing watched yet", [], note=(
            "Name what to keep, then call a method: prog.watch('mlp') (a var_scope, a layer "
            "or a var; prog.watch('*') keeps everything), prog.train_step(...), and inspect "
            "again."))
    block = program.methods[kept.method].block
    loops = _loops(program.program, block)
    grads_of = {op.role_var[0]: op.role_var[1] for op in block.ops if len(op.role_var) == 2}
    layers: dict[str, LayerValues] = {}
    for layer, op in model_ops(block, program.program):
        out = op.output_names()[0]
        lv = layers.setdefault(layer, LayerValues(layer))
        if out in kept:
            lv.activation, lv.values, lv.loop = out, _host(kept[out]), loops.get(out, "")
            grad = grad_var_name(out)
            lv.grad, lv.grad_values = (grad, _host(kept[grad])) if lv.loop and grad in kept \
                else (None, None)
        _param_grads(program, kept, lv, op.input_names(), grads_of)
    for lv in layers.values():
        units = lv.units()
        lv.dead = dead_fraction(units) if units is not None else None
    shown = [lv for lv in layers.values() if lv.values is not None or lv.grads]
    return Inspection(f"{program.program.name}.{kept.method}(), call {kept.call}", shown)
