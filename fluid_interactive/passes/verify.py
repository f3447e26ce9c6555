"""`check_program` with the op registry: the structural checks of `ir.verify` plus, per op,
known slots, known attrs, and declared types that agree with the op's shape rule."""
from __future__ import annotations

from ..errors import FluidError
from ..ir.blocks import SUB_BLOCK, declared_within, outer_interface, sub_block_index
from ..ir.records import BlockDesc, OpDesc, ProgramDesc
from ..ir.text import format_shape
from ..ir.verify import check_structure
from ..ops.apply import declared_typer, infer_op
from ..ops.registry import get_spec
from ..ops.spec import TensorType, var_type
from ..ops.sub_block import SubBlockRule


def _op_problem(program: ProgramDesc, block: BlockDesc, op: OpDesc) -> str | None:
    try:
        spec = get_spec(op.type)
        spec.full_attrs(op.attrs)
    except FluidError as e:
        return str(e)
    known_in = {s.name for s in spec.inputs}
    known_out = {s.name for s in spec.outputs}
    bad = [s for s in op.inputs if s not in known_in] + [s for s in op.outputs
                                                          if s not in known_out]
    if bad:
        return f"op {op.type!r} has no slot(s) {', '.join(bad)}"

    def type_of(name: str) -> TensorType:
        v = program.var(block, name)  # check_structure found every name declared
        return var_type(v)
    if spec.sub_block is not None:
        problem = _sub_block_problem(program, op, spec.sub_block)
        if problem:
            return problem
    try:
        inferred = infer_op(op, type_of, declared_typer(program))
    except FluidError as e:
        return f"shape rule fails: {e}"
    for slot, types in inferred.items():
        for name, t in zip(op.outputs[slot], types):
            declared = program.var(block, name)
            if declared.kind != "tensor":
                continue  # readers and other objects have no tensor type to compare
            if declared.dtype != t.dtype or len(declared.shape) != len(t.shape) or any(
                    a >= 0 and b >= 0 and a != b for a, b in zip(declared.shape, t.shape)):
                return (f"{name!r} is declared {declared.dtype}{format_shape(declared.shape)} "
                        f"but {op.type} produces {t.dtype}{format_shape(t.shape)}")
    return None


def _sub_block_problem(program: ProgramDesc, op: OpDesc, rule: SubBlockRule) -> str | None:
    """The op's slots list every var of the blocks around that its sub-block reads and
    writes (they are what the op passes in and takes back)."""
    idx = sub_block_index(op)
    if idx is None:
        return f"op {op.type!r} runs a sub-block but has no {SUB_BLOCK!r} attr"
    reads, writes = outer_interface(program, program.blocks[idx])
    missing_in = [n for n in reads if n not in op.input(rule.reads)]
    missing_out = [n for n in writes if n not in op.output(rule.writes)]
    if missing_in or missing_out:
        return (f"its block {idx} reads {missing_in or 'nothing missing'} and writes "
                f"{missing_out or 'nothing missing'} of the blocks around, which its slots "
                f"{rule.reads}/{rule.writes} do not list")
    return _var_attr_problem(program, op, rule, program.blocks[idx])


def _var_attr_problem(program: ProgramDesc, op: OpDesc, rule: SubBlockRule,
                      body: BlockDesc) -> str | None:
    """Each attr that lists vars (`SubBlockRule.var_attrs`) names vars the body declares
    or sees: a checkpoint naming another fails here, at load, not at the first call."""
    known = declared_within(program, body)
    for attr in rule.var_attrs:
        names = op.attrs.get(attr, [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return f"attr {attr!r} must list var names; got {names!r}"
        unknown = [n for n in names if n not in known and program.find_var(body, n) is None]
        if unknown:
            return (f"attr {attr!r} names {', '.join(map(repr, unknown))}, which neither its "
                    f"block {body.idx} nor a block around it declares")
    return None


def _may_update(op: OpDesc, name: str) -> bool:
    try:
        return get_spec(op.type).may_update(op, name)
    except FluidError:
        return False


def check_program(program: ProgramDesc) -> None:
    """Raise `fluid.VerifyError` at the first broken invariant, showing the ops around it.

    The one meaning of checking a program: `Compile()`, `fluid.load` and the transpiler's
    tests all run this full check (text, structure, and every op against its spec)."""
    check_structure(program, _op_problem, _may_update)
