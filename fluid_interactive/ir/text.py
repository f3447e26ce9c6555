"""The canonical text form of programs, blocks and ops.

One op per line, jaxpr-like, with short types and the user's ``file:line``::

    prediction/fc_0.tmp_0:f32[?,1] = mul(X=x, Y=prediction/fc_0.w_0) {x_num_col_dims=1}   # fit.py:21

`repr`, error messages and golden tests all use this one printer.
"""
from __future__ import annotations

from collections.abc import Sequence

from .blocks import check_nesting, sub_block_index
from .names import escape_unprintable
from .records import (
    DTYPES,
    SELECTED_ROWS,
    BlockDesc,
    OpDesc,
    OpRole,
    ProgramDesc,
    ReturnSpec,
    VarDesc,
    map_returns,
    returns_source,
)
from .source import format_location


def short_shape(shape: tuple[int, ...]) -> str:
    return "[" + ",".join("?" if d < 0 else str(d) for d in shape) + "]"


def format_shape(shape: Sequence[int]) -> str:
    """A shape as messages spell it: ``[?, 13]``, '?' for a dim unknown while tracing (the
    batch dimension), as in the text form's ``f32[?,13]``."""
    return "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"


def short_type(var: VarDesc | None) -> str:
    """'f32[?,13]' for a float32 var with a batch dimension; '?' when undeclared."""
    if var is None:
        return "?"
    if var.kind == SELECTED_ROWS:   # a rows-only value: some rows of a tensor of this type
        return "SelectedRows " + DTYPES[var.dtype] + short_shape(var.shape)
    if var.kind != "tensor":
        return var.kind
    return DTYPES[var.dtype] + short_shape(var.shape)


def _format_attr(value) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_format_attr(v) for v in value) + "]"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def format_loc(loc) -> str:
    """``fit.py:21``, or ``Cell In[3], line 7`` for a notebook cell (see `source`)."""
    return format_location(loc, short=True)


def format_op(op: OpDesc, lookup=None) -> str:
    """One line. ``lookup(name) -> VarDesc | None`` supplies output types when given."""
    def typed(name: str) -> str:
        return f"{name}:{short_type(lookup(name))}" if lookup else name

    many_slots = len(op.outputs) > 1
    outs = []
    for slot, names in op.outputs.items():
        for n in names:
            outs.append(f"{slot}={typed(n)}" if many_slots else typed(n))
    ins = []
    for slot, names in op.inputs.items():
        if not names:
            continue
        arg = names[0] if len(names) == 1 else "[" + ", ".join(names) + "]"
        ins.append(f"{slot}={arg}")
    line = (", ".join(outs) + " = " if outs else "") + f"{op.type}({', '.join(ins)})"
    if op.attrs:
        line += " {" + ", ".join(f"{k}={_format_attr(v)}" for k, v in op.attrs.items()) + "}"
    if op.role != OpRole.FORWARD or op.role_var:
        tag = OpRole.name(op.role)
        if op.role_var:
            tag += "; " + ", ".join(op.role_var)
        line += f" <{tag}>"
    loc = format_loc(op.loc)
    # Names and locations may come from a file: never let one break the line.
    return escape_unprintable(f"{line}   # {loc}" if loc else line)


def format_returns(returns: ReturnSpec) -> str:
    """What a method returns, as its text form's header shows it: ``(loss, acc)``."""
    return returns_source(map_returns(returns, str))


def _block_header(program: ProgramDesc, block: BlockDesc) -> str:
    if block.idx == 0:
        return "block 0 (global state and its initialisers):"
    if block.name:
        args = ", ".join(f"{n}:{short_type(block.vars.get(n))}" for n in block.feeds)
        return f"block {block.idx} {block.name}({args}) -> {format_returns(block.returns)}:"
    # a sub-block: what it takes per run (its feeds) and gives back (its returns)
    parts = [f"block {block.idx} (in block {block.parent_idx})"]
    if block.feeds:
        parts.append("takes " + ", ".join(
            f"{n}:{short_type(block.vars.get(n))}" for n in block.feeds))
    if block.returns is not None:
        parts.append("gives " + format_returns(block.returns))
    return "; ".join(parts) + ":"


def _block_lines(program: ProgramDesc, block: BlockDesc, indent: str, depth: int,
                 seen: set[int]) -> list[str]:
    """The ops of ``block`` one per line; a sub-block follows its op, one level deeper."""
    def lookup(name: str):
        return program.find_var(block, name)

    pad = indent * depth
    lines = []
    for op in block.ops:
        lines.append(pad + format_op(op, lookup))
        idx = sub_block_index(op)
        if idx is None or not 0 < idx < len(program.blocks) or idx in seen:
            continue
        seen.add(idx)
        sub = program.blocks[idx]
        lines.append(pad + indent + escape_unprintable(_block_header(program, sub)))
        lines.extend(_block_lines(program, sub, indent, depth + 2, seen))
    return lines


def format_block(program: ProgramDesc, block: BlockDesc, indent: str = "  ") -> str:
    """A block with its declarations (block 0) or signature (a method), one op per line;
    the sub-block an op owns is printed under it, indented."""
    lines = [escape_unprintable(_block_header(program, block))]
    if block.idx == 0:
        for var in block.vars.values():
            label = "param" if var.is_parameter else ("state" if var.persistable else "var")
            lines.append(escape_unprintable(f"{indent}{label} {var.name}:{short_type(var)}"))
    lines.extend(_block_lines(program, block, indent, 1, {block.idx}))
    return "\n".join(lines)


def format_program(program: ProgramDesc) -> str:
    """Every block; a sub-block is printed under the op that owns it (a block no op owns,
    which only a malformed program has, on its own). A program whose blocks do not nest
    as a tree (`check_nesting`) is a `VerifyError`."""
    check_nesting(program)
    nested = {i for b in program.blocks for op in b.ops
              if (i := sub_block_index(op)) is not None}
    return "\n\n".join(format_block(program, b) for b in program.blocks
                        if b.idx == 0 or b.idx not in nested)
