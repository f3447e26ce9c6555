"""``prog.summary()``: a table of the model's layers, like Keras' ``model.summary()``.

One row per layer (grouped under its ``var_scope``, with the scope's subtotal), with the
layer's type, its output shape and its parameter count; a loop or a branch is a row of its
own (the op running its body, and its body's subtotal) with its body's layers under it;
then the totals: trainable parameters, non-trainable ones (frozen parameters and state
such as batch norm's running statistics), and the optimizer's own state, which is not
part of the model but lives in the same scope. Layers are read from the program
description alone (see `ir.layers`), so the summary needs no call of the program. In a
notebook it displays as an HTML table.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from ..ir.blocks import nested_blocks, owned_block
from ..ir.layers import NOT_MODEL, construct_name, layer_of, layer_type, scope_of
from ..ir.records import BlockDesc, OpDesc, OpRole, ProgramDesc, VarDesc
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
    """One layer: its name, type, output shape and the state its ops read. A loop (or a
    branch) is a row too, of the op that runs its body (``loop_type``), and the layers of
    its body name it in ``loop``; its own counts stay 0 (its body's rows hold them)."""
    layer: str
    type: str
    output: str
    params: list[str] = field(default_factory=list)
    trainable: int = 0
    non_trainable: int = 0
    calls: int = 1
    loop: str = ""          # the loop (or branch) whose body holds this layer
    loop_type: str = ""     # for a loop's own row: the op running the body

    @property
    def scope(self) -> str:
        return scope_of(self.layer)

    @property
    def total(self) -> int:
        return self.trainable + self.non_trainable


@dataclass
class _Node:
    """A line of the table: a scope, a layer, or a loop with its body's lines under it."""
    name: str
    row: LayerRow | None = None
    children: list[_Node] = field(default_factory=list)
    by_name: dict[str, _Node] = field(default_factory=dict)

    def child(self, name: str, row: LayerRow | None = None) -> _Node:
        node = self.by_name.get(name)
        if node is None or row is not None:
            node = _Node(name, row)
            self.children.append(node)
            self.by_name.setdefault(name, node)
        return node

    def total(self) -> int:
        own = self.row.total if self.row is not None else 0
        return own + sum(c.total() for c in self.children)


def _tree(rows: list[LayerRow]) -> _Node:
    """Rows as nested lines: each row under its loop's line (or the top), inside the
    scopes its name adds to that loop's scope."""
    root = _Node("")
    loops: dict[str, tuple[_Node, str]] = {"": (root, "")}
    for row in rows:
        holder, base = loops.get(row.loop, (root, ""))
        parts = row.scope.split("/") if row.scope else []
        shared = base.split("/") if base else []
        if parts[:len(shared)] == shared:
            parts = parts[len(shared):]
        for part in parts:
            holder = holder.child(part + "/")
        node = holder.child(row.layer.rpartition("/")[2], row)
        if row.loop_type:
            loops[row.layer] = (node, row.scope)
    return root


@dataclass
class Summary:
    """The layers of a program and its parameter counts; prints as a text table and
    displays as an HTML one. A loop's body is listed under the loop's row, indented."""
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
        rows: list[list[str]] = [[name, "data", shape, "0"] for name, shape in self.inputs]
        strong: list[int] = []

        def add(node: _Node, depth: int) -> None:
            row, pad = node.row, "  " * depth
            if row is None:
                strong.append(len(rows))
                rows.append([pad + node.name, "scope", "", _count(node.total())])
            elif row.loop_type:
                strong.append(len(rows))
                rows.append([pad + node.name, row.loop_type, row.output,
                             _count(node.total())])
            else:
                calls = f" (x{row.calls})" if row.calls > 1 else ""
                rows.append([pad + node.name + calls, row.type, row.output,
                             _count(row.total)])
            for c in node.children:
                add(c, depth + 1)

        for node in _tree(self.rows).children:
            add(node, 0)
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


def _model_ops(program: ProgramDesc, block: BlockDesc, loop: str = ""
               ) -> Iterator[tuple[str, str, OpDesc]]:
    """``(loop, layer, op)`` for each op of the model in ``block``, in order (`ir.layers`:
    forward ops that write something); an op running a block comes as the layer named
    after what it runs (``static_rnn_0``), followed by its body's ops with that name as
    their ``loop``."""
    for op in block.ops:
        if op.role & NOT_MODEL:
            continue
        body = owned_block(program, op)
        if body is not None:
            name = construct_name(program, block, op)
            yield loop, name, op
            yield from _model_ops(program, body, name)
        elif op.output_names():
            yield loop, layer_of(op.output_names()[0]), op


class _Count:
    """The rows and totals `summarize` gathers, method by method."""

    def __init__(self, program: ProgramDesc):
        self.program, self.g0 = program, program.global_block()
        self.rows: dict[str, LayerRow] = {}
        self.counted: set[str] = set()
        self.trainable = self.non_trainable = self.bytes = 0

    def method(self, block: BlockDesc, first: bool) -> None:
        calls: dict[str, int] = {}
        last: str | None = None
        for loop, layer, op in _model_ops(self.program, block):
            row = self.rows.get(layer)
            if row is None:
                runs = owned_block(self.program, op) is not None
                row = self.rows[layer] = LayerRow(layer, layer_type(layer), "", loop=loop,
                                                  loop_type=op.type if runs else "")
            if layer != last:
                calls[layer] = calls.get(layer, 0) + 1
                row.calls = max(row.calls, calls[layer])
            last = layer
            if first or not row.output:
                tensors = [n for n in op.output_names()
                           if (v := _declared(self.program, block, n)) is not None
                           and v.kind == "tensor"]
                row.output = _shape(_declared(self.program, block, tensors[0])
                                    if tensors else None)
            if not row.loop_type:
                self.state(row, op)

    def state(self, row: LayerRow, op: OpDesc) -> None:
        """Count the parameters and other state ``op`` reads (or, parameters, writes)
        once, in the row of the first layer that touches them."""
        for n in op.input_names() + op.output_names():
            var = self.g0.vars.get(n)
            if var is None or not var.persistable or var.kind != "tensor" or n in self.counted:
                continue
            if not var.is_parameter and n not in op.input_names():
                continue
            self.counted.add(n)
            row.params.append(n)
            size = _size(var)
            self.bytes += size * _itemsize(var.dtype)
            if var.is_parameter and var.trainable:
                row.trainable += size
                self.trainable += size
            else:
                row.non_trainable += size
                self.non_trainable += size


def summarize(program: ProgramDesc, methods: None | str | Sequence[str] = None
              ) -> Summary:
    """The summary of ``program``'s layers, over the given methods (default: all; a layer
    several methods share is one row); the layers of a loop's body are rows under the
    loop's own."""
    blocks = _blocks(program, methods)
    count = _Count(program)
    inputs: dict[str, str] = {}
    for block in blocks:
        for n in block.feeds:
            inputs.setdefault(n, _shape(program.find_var(block, n)))
        count.method(block, block is blocks[0])
    g0 = count.g0
    opt_vars = [n for block in blocks for op in block.ops if op.role & OpRole.OPTIMIZE
                for n in op.output_names()
                if (v := g0.vars.get(n)) is not None and v.persistable and not v.is_parameter]
    opt_vars = [n for n in dict.fromkeys(opt_vars) if n not in count.counted]
    return Summary(program.name or "program", [b.name for b in blocks],
                   list(count.rows.values()), list(inputs.items()), count.trainable,
                   count.non_trainable, sum(_size(g0.vars[n]) for n in opt_vars), opt_vars,
                   count.bytes)


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
