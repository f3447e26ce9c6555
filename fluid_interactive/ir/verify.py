"""`check_structure`: structural invariants of a program description.

Op-level checks (slots, attrs, shape inference) need the op registry, which lives above
this layer: `fluid_interactive.passes.verify.check_program` runs this with an ``op_checker``
for those, and is the one check every loaded or compiled program goes through.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, NoReturn

from ..errors import VerifyError
from .blocks import SUB_BLOCK, check_nesting, nested_blocks, sub_block_index
from .names import name_problem, printable, unprintable
from .records import BlockDesc, OpDesc, OpRole, ProgramDesc, returned_names
from .text import format_op

OpChecker = Callable[[ProgramDesc, BlockDesc, OpDesc], str | None]
# Whether an op may write a var it also reads (an in-place update such as ``increment``);
# the op registry knows, so the caller says.
UpdateRule = Callable[[OpDesc, str], bool]


def _fail(program: ProgramDesc, block: BlockDesc, index: int, problem: str) -> NoReturn:
    lo, hi = max(0, index - 5), min(len(block.ops), index + 6)
    window = []
    for i in range(lo, hi):
        mark = ">>" if i == index else "  "
        window.append(f"{mark} {i:3d}  "
                      f"{format_op(block.ops[i], lambda n: program.find_var(block, n))}")
    raise VerifyError(f"block {block.idx} ({block.name or 'global'}), op {index}: {problem}\n"
                      + "\n".join(window))


def _check_owners(program: ProgramDesc) -> None:
    """Each sub-block has exactly one owner, and a block nested in a method is owned."""
    owner: dict[int, tuple[int, int]] = {}
    for block in program.blocks:
        for index, op in enumerate(block.ops):
            idx = sub_block_index(op)
            if idx is None:
                continue
            if idx in owner:
                b, i = owner[idx]
                _fail(program, block, index, f"owns block {idx}, which op {i} of block {b} "
                                             f"owns already")
            owner[idx] = (block.idx, index)
    for block in program.blocks[1:]:
        if block.parent_idx > 0 and block.idx not in owner:
            raise VerifyError(f"block {block.idx} lies in block {block.parent_idx} but no op "
                              f"owns it (an op owns a block through its {SUB_BLOCK!r} attr)")


def _may_write_again(block: BlockDesc, op: OpDesc, name: str,
                     updates: UpdateRule | None) -> bool:
    """A var is written once, except by an op that updates it in place (as its spec
    allows, or by running a sub-block), or inside a sub-block that carries a var declared
    around it from one run to the next."""
    return (sub_block_index(op) is not None or name not in block.vars
            or (updates is not None and name in op.input_names() and updates(op, name)))


def _undeclared(program: ProgramDesc, block: BlockDesc, name: str, what: str) -> str:
    inner = [b.idx for b in nested_blocks(program, block) if b is not block and name in b.vars]
    if not inner:
        return f"{what} {name!r}, which is " + (
            "declared nowhere" if what == "reads" else "not declared")
    return (f"{what} {name!r}, which is declared only inside block {inner[0]}: a value that "
            f"leaves a sub-block must be declared outside it (write it into an outer var, "
            f"e.g. with fluid.layers.assign(value, output=outer_var))")


def _check_op(program: ProgramDesc, block: BlockDesc, index: int, op: OpDesc,
              written: set[str], checks: _Checks) -> None:
    if op.role not in OpRole.ALLOWED:
        _fail(program, block, index, f"op_role {op.role:#x} is not an allowed role value")
    if len(op.role_var) % 2:
        _fail(program, block, index, "op_role_var must hold (param, grad) pairs")
    for name in op.input_names():
        var = program.find_var(block, name)
        if var is None:
            _fail(program, block, index, _undeclared(program, block, name, "reads"))
        if not (var.persistable or var.is_data or name in written):
            _fail(program, block, index, f"reads {name!r} before any op of the block writes it")
    idx = sub_block_index(op)
    if idx is not None:   # its ops run here, seeing what is written so far
        _check_block_ops(program, program.blocks[idx], set(written), checks)
    for name in op.output_names():
        var = program.find_var(block, name)
        if var is None:
            _fail(program, block, index, _undeclared(program, block, name, "writes"))
        if name in written and not var.persistable and not _may_write_again(
                block, op, name, checks.updates):
            _fail(program, block, index, f"writes temporary {name!r} a second time")
        written.add(name)
    for name in op.role_var:
        if program.find_var(block, name) is None:
            _fail(program, block, index, f"op_role_var names {name!r}, which is not declared")
    if checks.op_checker is not None:
        problem = checks.op_checker(program, block, op)
        if problem:
            _fail(program, block, index, problem)


class _Checks(NamedTuple):
    op_checker: OpChecker | None
    updates: UpdateRule | None


def _check_block_ops(program: ProgramDesc, block: BlockDesc, written: set[str],
                     checks: _Checks) -> None:
    """The ops of ``block`` in order; ``written`` holds what the blocks around it wrote
    before it runs. A sub-block's feeds are written when it starts."""
    if block.parent_idx > 0:
        written.update(block.feeds)
    for index, op in enumerate(block.ops):
        _check_op(program, block, index, op, written, checks)


def _check_interface(program: ProgramDesc, block: BlockDesc) -> None:
    for key, var in block.vars.items():
        if key != var.name:
            raise VerifyError(f"block {block.idx} lists var {var.name!r} under the key {key!r}")
    if len(set(block.feeds)) != len(block.feeds):
        raise VerifyError(f"block {block.name!r} feeds a data var twice: {block.feeds}")
    for name in block.feeds:
        fed = block.vars.get(name)
        if block.parent_idx > 0 and fed is None:   # a sub-block's per-run values
            raise VerifyError(f"block {block.idx} takes {name!r}, which it does not declare")
        if block.parent_idx <= 0 and (fed is None or not fed.is_data):
            raise VerifyError(f"block {block.name!r} feeds {name!r}, which is not a data var of it")

    for r in returned_names(block.returns):
        if program.find_var(block, r) is None:
            raise VerifyError(f"block {block.name!r} returns undeclared var {r!r}")


def _check_name(name: object, what: str) -> None:
    problem = name_problem(name, what)
    if problem:
        raise VerifyError(problem)


def _check_attr_value(value: object, where: str) -> None:
    if isinstance(value, str):
        bad = unprintable(value)
        if bad:
            raise VerifyError(f"{where} holds the control character {bad}")
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_attr_value(item, where)


def _check_op_text(op: OpDesc, where: str) -> None:
    _check_name(op.type, f"{where}: op type")
    for kind, slots in (("input", op.inputs), ("output", op.outputs)):
        for slot, names in slots.items():
            _check_name(slot, f"{where}: {kind} slot")
            for name in names:
                _check_name(name, f"{where}: {kind} {slot}")
    for key, value in op.attrs.items():
        _check_name(key, f"{where}: attr key")
        _check_attr_value(value, f"{where}: attr {key}")
    for name in op.role_var:
        _check_name(name, f"{where}: op_role_var")
    if op.loc is not None:
        for part, label in ((op.loc.file, "file"), (op.loc.function, "function")):
            bad = unprintable(part) if isinstance(part, str) else "a non-string"
            if bad:
                raise VerifyError(f"{where}: its source location's {label} "
                                  f"{printable(str(part))} holds {bad}")


def _return_names(returns) -> list:
    if returns is None or isinstance(returns, str):
        return [returns] if returns is not None else []
    if isinstance(returns, tuple):
        return [n for r in returns for n in _return_names(r)]
    return [n for k, r in returns.items() for n in [k, *_return_names(r)]]


def check_text(program: ProgramDesc) -> None:
    """Every name, attr key, string attr and source location of ``program`` is printable
    text (see `ir.names`): they reach generated code, messages and drawings."""
    if program.name:
        _check_name(program.name, "program name")
    for block in program.blocks:
        where = f"block {block.idx}"
        if block.name:
            _check_name(block.name, f"{where}: method name")
        for key, var in block.vars.items():
            _check_name(key, f"{where}: var")
            _check_name(var.name, f"{where}: var")
        for name in [*block.feeds, *_return_names(block.returns)]:
            _check_name(name, f"{where}: feed or return")
        for index, op in enumerate(block.ops):
            _check_op_text(op, f"{where}, op {index}")


def check_structure(program: ProgramDesc, op_checker: OpChecker | None = None,
                    updates: UpdateRule | None = None) -> None:
    """Raise `VerifyError` naming the first violated invariant, with a window of ops.
    ``op_checker`` checks each op against its spec; ``updates(op, name)`` says whether op
    may update var ``name`` in place (write a var it reads)."""
    check_text(program)
    check_nesting(program)
    _check_owners(program)
    checks = _Checks(op_checker, updates)
    for block in program.blocks:
        if block.parent_idx <= 0:   # sub-blocks are checked where their owner runs them
            _check_block_ops(program, block, set(), checks)
        _check_interface(program, block)
