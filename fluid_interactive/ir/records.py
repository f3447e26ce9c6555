"""The program description: plain records, the single source of truth.

`ProgramDesc` holds `BlockDesc`s; a block holds `VarDesc`s and a straight-line list of
`OpDesc`s. Block 0 is the global block (persistable state and the startup ops that
initialise it); each traced method is one block whose parent is block 0.

These names are deliberately distinct from the user's `fluid.Program` base class.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# --- dtypes -----------------------------------------------------------------------------

DTYPES: dict[str, str] = {
    "bool": "b1", "int8": "i8", "uint8": "u8", "int16": "i16", "int32": "i32",
    "int64": "i64", "float16": "f16", "float32": "f32", "float64": "f64",
}
SHORT_TO_DTYPE = {v: k for k, v in DTYPES.items()}
FLOAT_DTYPES = frozenset({"float16", "float32", "float64"})
INT_DTYPES = frozenset({"int8", "uint8", "int16", "int32", "int64"})


def canonical_dtype(dtype: Any) -> str:
    """'float32', np.float32, np.dtype('float32') and 'f32' all become 'float32'."""
    name = dtype if isinstance(dtype, str) else getattr(dtype, "__name__", None)
    if name is None:
        name = str(getattr(dtype, "name", dtype))
    name = SHORT_TO_DTYPE.get(name, name)
    if name not in DTYPES:
        # numpy dtype objects and aliases such as 'float' reach here.
        try:
            import numpy as np  # numpy is the one hard dependency; dtypes are its names.
            name = np.dtype(dtype).name
        except TypeError:
            pass
    if name not in DTYPES:
        raise TypeError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    return name


def dtype_kind(dtype: str) -> str:
    """'f' for floats, 'i' for integers, 'b' for bool: casting stays within a kind."""
    if dtype in FLOAT_DTYPES:
        return "f"
    if dtype in INT_DTYPES:
        return "i"
    return "b"


# --- op roles (Paddle's bit-flag values) ---------------------------------------------------

class OpRole:
    FORWARD = 0x0000
    BACKWARD = 0x0001
    OPTIMIZE = 0x0002
    RPC = 0x0004
    DIST = 0x0008
    LRSCHED = 0x0010
    LOSS = 0x0100
    NOT_SPECIFIED = 0x1000

    ALLOWED = frozenset({0x0000, 0x0001, 0x0002, 0x0004, 0x0008, 0x0010, 0x0100, 0x0101,
                         0x0012, 0x1000})

    @staticmethod
    def name(role: int) -> str:
        parts = [label for bit, label in ((0x1, "backward"), (0x2, "optimize"), (0x4, "rpc"),
                                          (0x8, "dist"), (0x10, "lrsched"))
                 if role & bit]
        if role & OpRole.NOT_SPECIFIED:
            parts = ["unspecified"]
        base = "+".join(parts) or "forward"
        return base + ("+loss" if role & OpRole.LOSS else "")


# --- source locations ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SourceLoc:
    """Where the user's code recorded an op: kept on the op, never in its attrs."""
    file: str
    line: int
    function: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


# --- vars, ops, blocks, programs ---------------------------------------------------------------

#: the kind of a var whose value is rows of a tensor (a `fluid.SelectedRows`: the gradient
#: of ``embedding(is_sparse=True)``); its shape and dtype are those of the whole tensor
SELECTED_ROWS = "selected_rows"

BATCH = -1  # an unknown (batch) dimension

Shape = tuple[int, ...]
AttrValue = bool | int | float | str | list | tuple | None


@dataclass(slots=True)
class VarDesc:
    """A variable declaration. ``shape`` uses -1 for the batch dimension."""
    name: str
    shape: Shape
    dtype: str = "float32"
    persistable: bool = False
    stop_gradient: bool = False
    is_data: bool = False
    is_parameter: bool = False
    trainable: bool = True
    kind: str = "tensor"  # 'tensor' | 'reader' | 'tensor_array' | SELECTED_ROWS | ...

    def __post_init__(self) -> None:
        self.shape = tuple(int(d) for d in self.shape)
        self.dtype = canonical_dtype(self.dtype)

    @property
    def has_batch_dim(self) -> bool:
        return any(d < 0 for d in self.shape)


@dataclass(slots=True)
class OpDesc:
    """One op: slot name -> list of var names, attrs, role, and the user's source line."""
    type: str
    inputs: dict[str, list[str]] = field(default_factory=dict)
    outputs: dict[str, list[str]] = field(default_factory=dict)
    attrs: dict[str, AttrValue] = field(default_factory=dict)
    role: int = OpRole.FORWARD
    role_var: tuple[str, ...] = ()
    loc: SourceLoc | None = None

    def input_names(self) -> list[str]:
        return [n for names in self.inputs.values() for n in names]

    def output_names(self) -> list[str]:
        return [n for names in self.outputs.values() for n in names]

    def input(self, slot: str) -> list[str]:
        return self.inputs.get(slot, [])

    def output(self, slot: str) -> list[str]:
        return self.outputs.get(slot, [])


# A method's return structure: None, a var name, or a tuple/dict of them (nested allowed).
ReturnSpec = None | str | tuple | dict


def map_returns(returns: ReturnSpec, leaf: Callable[[str], Any]) -> Any:
    """The return structure with each var name replaced by ``leaf(name)``: tuples stay
    tuples, dicts keep their keys and order, None stays None."""
    if returns is None:
        return None
    if isinstance(returns, str):
        return leaf(returns)
    if isinstance(returns, tuple):
        return tuple(map_returns(r, leaf) for r in returns)
    return {k: map_returns(v, leaf) for k, v in returns.items()}


def returns_source(structure: Any) -> str:
    """A structure of source texts (what `map_returns` makes with a leaf returning text)
    written as a Python expression: ``(a, b)``, ``(a,)``, ``{'loss': a}``, ``None``."""
    if structure is None:
        return "None"
    if isinstance(structure, str):
        return structure
    if isinstance(structure, tuple):
        inner = ", ".join(returns_source(s) for s in structure)
        return f"({inner},)" if len(structure) == 1 else f"({inner})"
    return "{" + ", ".join(f"{k!r}: {returns_source(v)}" for k, v in structure.items()) + "}"


def returned_names(returns: ReturnSpec) -> list[str]:
    """The var names a return structure holds, in order (a name returned twice, twice)."""
    if returns is None:
        return []
    if isinstance(returns, str):
        return [returns]
    values = returns if isinstance(returns, tuple) else returns.values()
    return [n for r in values for n in returned_names(r)]


@dataclass(slots=True)
class BlockDesc:
    """A lexical block: declarations and a straight-line op list.

    For a traced method, ``name`` is the method's name, ``feeds`` the data vars its call
    arguments feed (in order) and ``returns`` the structure its call gives back.
    """
    idx: int
    parent_idx: int = -1
    name: str = ""
    vars: dict[str, VarDesc] = field(default_factory=dict)
    ops: list[OpDesc] = field(default_factory=list)
    feeds: list[str] = field(default_factory=list)
    returns: ReturnSpec = None
    is_test: bool | None = None  # None: decided by whether the block optimizes


@dataclass(slots=True)
class ProgramDesc:
    """An ordered list of blocks; block 0 is the global block."""
    blocks: list[BlockDesc] = field(default_factory=list)
    name: str = ""
    version: int = 1

    def global_block(self) -> BlockDesc:
        return self.blocks[0]

    def block(self, name_or_idx: int | str) -> BlockDesc:
        if isinstance(name_or_idx, int):
            return self.blocks[name_or_idx]
        for b in self.blocks:
            if b.name == name_or_idx:
                return b
        known = ", ".join(b.name for b in self.blocks[1:] if b.name)
        raise KeyError(f"program has no method block named {name_or_idx!r}; it has: {known}")

    def method_blocks(self) -> list[BlockDesc]:
        return [b for b in self.blocks if b.idx != 0 and b.name]

    def find_var(self, block: BlockDesc, name: str) -> VarDesc | None:
        """Look a name up in ``block`` and then its ancestors."""
        b: BlockDesc | None = block
        while b is not None:
            v = b.vars.get(name)
            if v is not None:
                return v
            b = self.blocks[b.parent_idx] if b.parent_idx >= 0 else None
        return None

    def var(self, block: BlockDesc, name: str) -> VarDesc:
        """`find_var` for a name that must be declared, as every name the ops of a checked
        program use is; KeyError when it is not."""
        v = self.find_var(block, name)
        if v is None:
            raise KeyError(f"{name!r} is declared neither in block {block.idx} "
                           f"({block.name or 'global'}) nor in a block around it")
        return v

    def clone(self) -> ProgramDesc:
        """A deep copy, made record by record (``copy.deepcopy`` of a program of thousands
        of ops costs seconds; this, linear time at a few µs per op)."""
        return ProgramDesc([_clone_block(b) for b in self.blocks], self.name, self.version)


def _copy_value(value: Any) -> Any:
    """Attr values and return specs: lists and dicts are copied, the rest is immutable."""
    if isinstance(value, list):
        return [_copy_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _copy_value(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_copy_value(v) for v in value)
    return value


def clone_op(op: OpDesc) -> OpDesc:
    """A copy of ``op`` that shares nothing mutable with it."""
    return OpDesc(op.type, {k: list(v) for k, v in op.inputs.items()},
                  {k: list(v) for k, v in op.outputs.items()},
                  {k: _copy_value(v) for k, v in op.attrs.items()}, op.role, op.role_var,
                  op.loc)


def clone_var(v: VarDesc) -> VarDesc:
    return VarDesc(v.name, v.shape, v.dtype, v.persistable, v.stop_gradient, v.is_data,
                   v.is_parameter, v.trainable, v.kind)


def _clone_block(b: BlockDesc) -> BlockDesc:
    return BlockDesc(b.idx, b.parent_idx, b.name,
                     {k: clone_var(v) for k, v in b.vars.items()},
                     [clone_op(op) for op in b.ops], list(b.feeds), _copy_value(b.returns),
                     b.is_test)
