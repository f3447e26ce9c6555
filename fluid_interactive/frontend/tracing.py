"""The trace context: the program being built while `Compile()` runs the user's methods.

It lives in a `ContextVar` that is always restored (no global "current program" survives
a failing cell). Layers reach it through `current_trace()`.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ..errors import DTypeError, FluidError, NameConflictError, OpArgumentError, ShapeError
from ..ir.blocks import method_of, nested_blocks
from ..ir.names import UniqueNameGenerator, name_problem
from ..ir.records import BlockDesc, OpDesc, OpRole, ProgramDesc, SourceLoc, VarDesc
from ..ir.source import format_location, user_location
from ..ir.text import short_type
from ..ops.apply import declared_typer, infer_op
from ..ops.registry import get_spec
from ..ops.spec import TensorType, var_type

_CURRENT: ContextVar[TraceContext | None] = ContextVar("fluid_trace", default=None)


def current_trace(what: str = "this layer") -> TraceContext:
    trace = _CURRENT.get()
    if trace is None:
        raise FluidError(f"{what} can only be used inside a @fluid.network method while it is "
                         f"traced (that is, while Program.Compile() runs)")
    return trace


def is_tracing() -> bool:
    """Whether a `Compile()` is tracing a method in this context right now."""
    return _CURRENT.get() is not None


def where(loc: SourceLoc | None) -> str:
    return format_location(loc) or "<unknown location>"


class _StateNames(UniqueNameGenerator):
    """Names for optimizer state (``learning_rate_0``, ...) that skip every name the
    program already uses, so a user's parameter named ``learning_rate_0`` is never
    overwritten."""

    def __init__(self, trace: TraceContext):
        super().__init__()
        self._trace = trace

    def generate(self, key: str) -> str:
        name = super().generate(key)
        while any(name in b.vars for b in self._trace.program.blocks):
            name = super().generate(key)
        return name


class TraceContext:
    """Builds one `ProgramDesc`: block 0 for state, one block per traced method."""

    def __init__(self, program_name: str):
        self.program = ProgramDesc(blocks=[BlockDesc(0, -1, "")], name=program_name)
        self.names = UniqueNameGenerator()          # layer names (var_scope swaps it)
        self.state_names: UniqueNameGenerator = _StateNames(self)  # learning rates, ...
        self.block_idx = 0
        self.method = ""
        self.placeholders: dict[str, Any] = {}
        self.param_attrs: dict[str, Any] = {}   # name -> ParamAttr (regularizer, lr scale)
        self.readers: list[Any] = []            # Reader handles, bound at Compile()
        self.initial_values: dict[str, Any] = {}  # persistable name -> array set at Compile()
        self.data_locs: dict[str, SourceLoc | None] = {}  # data var -> where declared
        # what `hints` reads to spot likely mistakes: data vars whose batch dim data()
        # prepended, and vars a sequence layer was given as its lengths
        self.batch_prepended: set[str] = set()
        self.lengths_given: set[str] = set()

    # --- blocks ----------------------------------------------------------------------------

    @property
    def block(self) -> BlockDesc:
        return self.program.blocks[self.block_idx]

    @contextmanager
    def method_block(self, name: str) -> Iterator[BlockDesc]:
        block = BlockDesc(len(self.program.blocks), 0, name)
        self.program.blocks.append(block)
        self.block_idx, self.method = block.idx, name
        token = _CURRENT.set(self)
        try:
            yield block
        finally:
            _CURRENT.reset(token)
            self.block_idx, self.method, self.placeholders = 0, "", {}
            self.data_locs = {}
            self.batch_prepended, self.lengths_given = set(), set()

    @contextmanager
    def sub_block(self) -> Iterator[BlockDesc]:
        """A new block nested in the current one (a loop's body, a branch), current while
        the ``with`` body records its ops; the op that runs it is recorded after it."""
        parent = self.block_idx
        if parent == 0:
            raise error_at(FluidError, "control flow can only be used inside a "
                                       "@fluid.network method")
        block = BlockDesc(len(self.program.blocks), parent)
        self.program.blocks.append(block)
        self.block_idx = block.idx
        try:
            yield block
        except BaseException:
            # no op will own it: drop it and the blocks made inside it (a caught error
            # leaves a program that verifies)
            del self.program.blocks[block.idx:]
            raise
        finally:
            self.block_idx = parent

    @contextmanager
    def in_block(self, block: BlockDesc) -> Iterator[None]:
        """Record into ``block`` (one around the current block) for a while: a StaticRNN's
        initial memory is computed before the loop that uses it."""
        current = self.block_idx
        self.block_idx = block.idx
        try:
            yield
        finally:
            self.block_idx = current

    def declared_in_sub_block(self, name: str) -> bool:
        """Whether ``name`` is declared in a block nested in the current method's block."""
        method = method_of(self.program, self.block)
        return any(name in b.vars for b in nested_blocks(self.program, method)
                   if b is not method)

    def has_value(self, name: str) -> bool:
        """Whether var ``name`` holds a value at this point of the trace: it is state or
        data, or an op recorded so far in the current block or a block around writes it."""
        var = self.find(name)
        if var is None:
            return False
        if var.persistable or var.is_data:
            return True
        b: BlockDesc | None = self.block
        while b is not None:
            if any(name in op.output_names() for op in b.ops):
                return True
            b = self.program.blocks[b.parent_idx] if b.parent_idx >= 0 else None
        return False

    # --- vars ------------------------------------------------------------------------------

    def find(self, name: str) -> VarDesc | None:
        return self.program.find_var(self.block, name)

    def type_of(self, name: str) -> TensorType:
        v = self.find(name)
        if v is None:
            raise OpArgumentError(self.not_visible(name))
        return var_type(v)

    def not_visible(self, name: str) -> str:
        """Why var ``name`` cannot be used here."""
        if self.declared_in_sub_block(name):
            return (f"variable {name!r} is declared inside a loop or branch body and cannot "
                    f"be used outside it; to keep a value, write it into a var made before "
                    f"the body: fluid.layers.assign(value, output=var)")
        return f"variable {name!r} is not defined in {self.method}()"

    def unique_in_block(self, name: str) -> str:
        """``name`` if the block does not use it yet, else ``name_1``, ``name_2``, ..."""
        if self.find(name) is None:
            return name
        k = 1
        while self.find(f"{name}_{k}") is not None:
            k += 1
        return f"{name}_{k}"

    def declare(self, var: VarDesc, in_global: bool = False,
                block: BlockDesc | None = None) -> VarDesc:
        """Add ``var`` to the current block (or block 0, or ``block``); a name already taken
        there is a `NameConflictError`, never a silent replacement."""
        check_name(var.name)
        if block is None:
            block = self.program.global_block() if in_global else self.block
        existing = block.vars.get(var.name)
        if existing is not None:
            raise error_at(NameConflictError,
                           f"cannot declare {var.name!r} as {short_type(var)}: the name is "
                           f"already taken by {_describe(existing)}; choose another name")
        block.vars[var.name] = var
        return var

    def replace_program(self, program: ProgramDesc) -> None:
        """Passes return new programs; trace continues on the result."""
        self.program = program

    # --- ops -------------------------------------------------------------------------------

    def append_op(self, type: str, inputs: Mapping[str, Sequence[str]],
                  outputs: Mapping[str, Sequence[str]], attrs: Mapping | None = None,
                  role: int = OpRole.FORWARD, in_global: bool = False,
                  loc: SourceLoc | None = None, role_var: tuple[str, ...] = ()) -> OpDesc:
        """Record an op; declares its outputs from the spec's shape rule. Errors name the
        op, the shapes and the user's line."""
        spec = get_spec(type)
        loc = loc or user_location()
        for name in [n for names in outputs.values() for n in names]:
            check_name(name)
        op = OpDesc(type, {k: list(v) for k, v in inputs.items() if v},
                    {k: list(v) for k, v in outputs.items() if v}, dict(attrs or {}), role,
                    tuple(role_var), loc=loc)
        self._check_slots(spec, op, loc)
        try:
            spec.full_attrs(op.attrs)
            types = infer_op(op, self.type_of, declared_typer(self.program))
        except (ShapeError, DTypeError, OpArgumentError) as e:
            shapes = ", ".join(f"{slot}={n}:{short_type(self.find(n))}"
                               for slot, names in op.inputs.items() for n in names)
            named = str(e) if str(e).startswith(f"{type}:") else f"{type}: {e}"
            raise type_of_error(e)(
                f"{named}\n  inputs: {shapes or 'none'}\n  at {where(loc)} "
                f"(in {self.method or 'the global block'}())") from None
        block = self.program.global_block() if in_global else self.block
        for slot, ts in types.items():
            for name, t in zip(op.outputs[slot], ts):
                existing = self.find(name) or block.vars.get(name)
                if existing is None:
                    block.vars[name] = VarDesc(name, t.shape, t.dtype, kind=t.kind)
        block.ops.append(op)
        return op

    def _check_slots(self, spec, op: OpDesc, loc) -> None:
        names = {s.name for s in spec.inputs}
        for slot in op.inputs:
            if slot not in names:
                raise OpArgumentError(f"op {op.type!r} has no input slot {slot!r} (it has "
                                      f"{', '.join(sorted(names))}) at {where(loc)}")
        for s in spec.inputs:
            if not s.optional and not op.inputs.get(s.name):
                raise OpArgumentError(f"op {op.type!r} needs input {s.name!r} at {where(loc)}")


def check_name(name: Any, what: str = "variable name") -> None:
    """A name the program will hold must be printable text (see `ir.names`): an
    `OpArgumentError` at the user's line otherwise."""
    problem = name_problem(name, what)
    if problem:
        raise error_at(OpArgumentError, problem)


def type_of_error(e: Exception) -> type:
    return type(e) if isinstance(e, FluidError) else OpArgumentError


def error_at(cls: type, message: str) -> Exception:
    """An error of ``cls`` whose message ends with the user's line and method."""
    trace = _CURRENT.get()
    method = f" (in {trace.method}())" if trace and trace.method else ""
    return cls(f"{message}\n  at {where(user_location())}{method}")


def _describe(var: VarDesc) -> str:
    kind = ("a parameter" if var.is_parameter else "a data var" if var.is_data
            else "a state var" if var.persistable else "a temporary")
    return f"{kind} {var.name}:{short_type(var)}"


def check_parameter_shape(existing: VarDesc, shape: Sequence[int], dtype: str,
                          layer: str = "this layer", detail: str = "") -> None:
    """A layer may reuse ``existing`` as its parameter only if it is a parameter of the
    same shape and dtype; otherwise a `NameConflictError` naming both shapes."""
    wanted = short_type(VarDesc(existing.name, tuple(shape), dtype))
    if not existing.is_parameter:
        raise error_at(NameConflictError,
                       f"{layer}: parameter name {existing.name!r} is already taken by "
                       f"{_describe(existing)}{detail}; give the parameter another name")
    if tuple(existing.shape) != tuple(shape) or existing.dtype != dtype:
        raise error_at(NameConflictError,
                       f"{layer}: parameter {existing.name!r} already exists as "
                       f"{short_type(existing)} but this layer needs {wanted}{detail}. "
                       f"Layers share a parameter only when shapes and dtypes agree: give "
                       f"this one another name (param_attr=...) or another var_scope")


Name = str | Sequence[str]
