"""``prog.summary()``: a table of the model's layers, like Keras' ``model.summary()``.

One row per layer (grouped under its ``var_scope``, with the scope's subtotal), with the
layer's type, its output shape and its parameter count; then the totals: trainable
parameters, non-trainable ones (frozen parameters and state such as batch norm's running
statistics), and the optimizer's own state, which is not part of the model but lives in the
same scope. Layers are read from the program description alone (see `ir.layers`), so the
summary needs no call of the program. In a notebook it displays as an HTML table.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..ir.blocks import nested_blocks
from ..ir.layers import layer_type, model_ops, scope_of
from ..ir.records import BlockDesc, OpRole, ProgramDesc, VarDesc
from ..ir.text import format_shape
from ..util.table import Table

__all__ = ["LayerRow", "Summary", "summarize"]

def _size(var: VarDesc) -> int:
    n = 1
    for d in var.shape:
        n *= max(d, 0)
    return n


def _shape(var: VarDesc | None) -> str:
    if var is None:
        return "?"
    return format_shape(var.shape)


def _count(n: int) -> str:
    return f"{n:,}"


@dataclass
class LayerRow:
    """One layer: its name, type, output shape and the state its ops read."""
    layer: str
    type: str
    output: str
    params: list[str] = field(default_factory=list)
    trainable: int = 0
    non_trainable: int = 0
    calls: int = 1

    @property
    def scope(self) -> str:
        return scope_of(self.layer)

    @property
    def total(self) -> int:
        return self.trainable + self.non_trainable


@dataclass
class Summary:
    """The layers of a program and its parameter counts; prints as a text table and
    displays as an HTML one."""
    name: str
    methods: list[str]
    rows: list[LayerRow]
    inputs: list[tuple[str, str]]                 # (data var, shape)
    trainable: int = 0
    non_trainable: int = 0
    optimizer_state: int = 0
    optimizer_vars: list[str] = field(default_factory=list)
    bytes: int = 0

    @property
    def total(self) -> int:
        return self.trainable + self.non_trainable

    def table(self) -> Table:
        rows: list[list[str]] = []
        strong: list[int] = []
        for name, shape in self.inputs:
            rows.append([name, "data", shape, "0"])
        seen_scopes: set[str] = set()
        for row in self.rows:
            scope = row.scope
            if scope and scope not in seen_scopes:
                for k, part in enumerate(scope.split("/")):
                    path = "/".join(scope.split("/")[:k + 1])
                    if path in seen_scopes:
                        continue
                    seen_scopes.add(path)
                    subtotal = sum(r.total for r in self.rows
                                   if r.scope == path or r.scope.startswith(path + "/"))
                    strong.append(len(rows))
                    rows.append(["  " * k + part + "/", "scope", "", _count(subtotal)])
            depth = len(scope.split("/")) if scope else 0
            short = row.layer.rpartition("/")[2] if scope else row.layer
            calls = f" (x{row.calls})" if row.calls > 1 else ""
            rows.append([f"{'  ' * depth}{short}{calls}", row.type, row.output,
                         _count(row.total)])
        footer = [f"total parameters: {_count(self.total)} ({format_bytes(self.bytes)})",
                  f"trainable: {_count(self.trainable)}   "
                  f"non-trainable: {_count(self.non_trainable)}"]
        if self.optimizer_state:
            footer.append(f"optimizer state (not part of the model): "
                          f"{_count(self.optimizer_state)} values in "
                          f"{len(self.optimizer_vars)} vars")
        title = f"{self.name}: {', '.join(self.methods)}" if self.methods else self.name
        return Table(["layer", "type", "output shape", "parameters"], rows, title=title,
                     align="llrr", footer=footer, strong=strong)

    def __repr__(self) -> str:
        return repr(self.table())

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()


def format_bytes(n: int) -> str:
    """``n`` bytes for people: "512 B", "3.1 KiB", "256.0 MiB", "1.5 GiB"."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def _blocks(program: ProgramDesc, methods: None | str | Sequence[str]) -> list[BlockDesc]:
    if methods is None:
        return program.method_blocks()
    names = [methods] if isinstance(methods, str) else list(methods)
    return [program.block(n) for n in names]


def summarize(program: ProgramDesc, methods: None | str | Sequence[str] = None
              ) -> Summary:
    """The summary of ``program``'s layers, over the given methods (default: all; a layer
    several methods share is one row)."""
    blocks = _blocks(program, methods)
    g0 = program.global_block()
    rows: dict[str, LayerRow] = {}
    counted: set[str] = set()
    inputs: dict[str, str] = {}
    trainable = non_trainable = nbytes = 0
    for block in blocks:
        for n in block.feeds:
            inputs.setdefault(n, _shape(program.find_var(block, n)))
        calls: dict[str, int] = {}
        last: str | None = None
        for layer, op in model_ops(block, program):   # loop bodies' layers too
            row = rows.get(layer)
            if row is None:
                row = rows[layer] = LayerRow(layer, layer_type(layer), "")
            if layer != last:
                calls[layer] = calls.get(layer, 0) + 1
                row.calls = max(row.calls, calls[layer])
            last = layer
            if block is blocks[0] or not row.output:
                row.output = _shape(_declared(program, block, op.output_names()[0]))
            for n in op.input_names() + op.output_names():
                var = g0.vars.get(n)
                if var is None or not var.persistable or var.kind != "tensor" or n in counted:
                    continue
                if not var.is_parameter and n not in op.input_names():
                    continue
                counted.add(n)
                row.params.append(n)
                size = _size(var)
                nbytes += size * _itemsize(var.dtype)
                if var.is_parameter and var.trainable:
                    row.trainable += size
                    trainable += size
                else:
                    row.non_trainable += size
                    non_trainable += size
    opt_vars = [n for block in blocks for op in block.ops if op.role & OpRole.OPTIMIZE
                for n in op.output_names()
                if (v := g0.vars.get(n)) is not None and v.persistable and not v.is_parameter]
    opt_vars = [n for n in dict.fromkeys(opt_vars) if n not in counted]
    return Summary(program.name or "program", [b.name for b in blocks], list(rows.values()),
                   list(inputs.items()), trainable, non_trainable,
                   sum(_size(g0.vars[n]) for n in opt_vars), opt_vars, nbytes)


def _declared(program: ProgramDesc, block: BlockDesc, name: str) -> VarDesc | None:
    """A var of ``block`` or of a block nested in it."""
    var = program.find_var(block, name)
    if var is None:
        var = next((b.vars[name] for b in nested_blocks(program, block) if name in b.vars),
                   None)
    return var


def _itemsize(dtype: str) -> int:
    import numpy as np  # the one hard dependency; dtype sizes are its business
    return np.dtype(dtype).itemsize
