"""Concrete types of a block's vars for given input types, through its sub-blocks.

Every op's shape rule runs again with the real sizes. An op owning a sub-block types one
run of it with the types its inputs have at that point (its spec's rule checks that a
carried var keeps its type), so a loop's body is typed once, whatever the trip count.
What a forward op keeps for its gradient is typed from its body and handed to the
gradient op that replays it (`Typing.kept`).
"""
from __future__ import annotations

from collections.abc import Callable

from ...errors import ShapeError
from ...ir.blocks import declared_within, sub_block_index
from ...ir.records import BlockDesc, OpDesc, ProgramDesc, VarDesc
from ...ir.source import format_location
from ...ir.text import format_loc, format_op
from ...ops.apply import infer_op
from ...ops.registry import get_spec
from ...ops.spec import TensorType, var_type

Types = dict[str, TensorType]


class Typing:
    """Shared by the typing of one plan and all of its sub-blocks."""

    def __init__(self, program: ProgramDesc):
        self.program = program
        # a keeps var (StepScopes) -> the type of each value its op keeps per run, and of
        # each value a gradient reads for its shape alone (kept as None)
        self.kept: dict[str, Types] = {}
        self.shapes: dict[str, Types] = {}
        # id of an op owning a sub-block -> the types of the sub-block's feeds
        self.feeds: dict[int, Types] = {}

    def replayed(self, op: OpDesc, block: BlockDesc) -> Types:
        """The types of the feeds that a gradient op's sub-block takes from kept runs."""
        rule = get_spec(op.type).sub_block
        if rule is None or not rule.replays:
            return {}
        name = op.input(rule.replays)[0]
        known = {**self.shapes.get(name, {}), **self.kept.get(name, {})}
        return {n: known[n] for n in block.feeds if n in known}


def describe_op(program: ProgramDesc, block: BlockDesc, op: OpDesc) -> str:
    line = format_op(op, lambda n: program.find_var(block, n))
    where = format_loc(op.loc)
    return f"{line}" + (f"\n  recorded at {format_location(op.loc)}" if where else "")


def _fmt_types(types: Types) -> str:
    return ", ".join(f"{n}: {t.dtype}{list(t.shape)}" for n, t in types.items()) or "none"


class InferredTypes:
    """The output types each op's shape rule gave, by the op and its input types: the
    plans of one block for other sizes ask again for every op whose inputs do not follow
    the size (an optimizer's update, what is computed from parameters alone), and a shape
    rule sees nothing but its op and those types. At most ``limit`` are kept (the ops
    that do follow the size add one per size); past it the table starts again."""

    def __init__(self, limit: int = 4096) -> None:
        self.table: dict[tuple, dict[str, list[TensorType]]] = {}
        self.limit = limit

    def infer(self, op: OpDesc, type_of: Callable[[str], TensorType]
              ) -> dict[str, list[TensorType]]:
        key = (id(op), *(type_of(n) for n in op.input_names()))
        out = self.table.get(key)
        if out is None:
            out = infer_op(op, type_of)
            if len(self.table) >= self.limit:
                self.table.clear()
            self.table[key] = out
        return out


def concrete_types(typing: Typing, block: BlockDesc, initial: Types,
                   fed: Types | None = None, inferred: InferredTypes | None = None) -> Types:
    """The type of every var ``block`` uses, starting from ``initial`` (the feeds, and
    for a sub-block the types of the blocks around at its owner); ``fed`` is what error
    messages call the fed shapes. ``inferred``: the types earlier plans of the block
    inferred, for the ops without a sub-block (which the table does not hold)."""
    program = typing.program
    types = dict(initial)

    def type_of(name: str) -> TensorType:
        t = types.get(name)
        if t is None:
            t = types[name] = var_type(_declared(program, block, name))
        return t

    typer = _sub_block_typer(typing, types)
    for op in block.ops:
        try:
            if inferred is not None and get_spec(op.type).sub_block is None:
                out = inferred.infer(op, type_of)
            else:
                out = infer_op(op, type_of, typer)
        except ShapeError as e:
            raise ShapeError(f"{e}\n  in op: {describe_op(program, block, op)}\n"
                             f"  (with the fed shapes {_fmt_types(fed or initial)})") from None
        for slot, ts in out.items():
            types.update(zip(op.outputs[slot], ts))
    return types


def inherited(typing: Typing, sub: BlockDesc, around: Types) -> Types:
    """The types a sub-block starts from: those of the blocks around, except names it
    declares itself."""
    inner = declared_within(typing.program, sub)
    return {n: t for n, t in around.items() if n not in inner}


def _sub_block_typer(typing: Typing, around: Types
                     ) -> Callable[[OpDesc, Types], Callable[[str], TensorType]]:
    program = typing.program

    def typer(op: OpDesc, feeds: Types) -> Callable[[str], TensorType]:
        sub = program.blocks[sub_block_index(op)]   # type: ignore[index]
        start = inherited(typing, sub, around)
        fed = typing.feeds[id(op)] = {**typing.replayed(op, sub), **feeds}
        start.update(fed)
        types = concrete_types(typing, sub, start)
        _record_kept(typing, op, types)

        def type_of(name: str) -> TensorType:
            t = types.get(name)
            return t if t is not None else var_type(_declared(program, sub, name))
        return type_of
    return typer


def _declared(program: ProgramDesc, block: BlockDesc, name: str) -> VarDesc:
    var = program.find_var(block, name)
    if var is None:   # the verifier rules this out for every program that is planned
        raise ShapeError(f"block {block.idx} uses {name!r}, which is declared nowhere")
    return var


def _record_kept(typing: Typing, op: OpDesc, types: Types) -> None:
    spec = get_spec(op.type)
    rule = spec.sub_block
    attrs = spec.full_attrs(op.attrs)
    if rule is not None and rule.keeps and op.output(rule.keeps):
        name = op.output(rule.keeps)[0]
        typing.kept[name] = {n: types[n] for n in attrs.get("keep") or [] if n in types}
        typing.shapes[name] = {n: types[n] for n in attrs.get("keep_shapes") or []
                               if n in types}
