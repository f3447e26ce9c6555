"""One op = one spec: slots, attrs with defaults, shape/dtype inference, kernel, gradient.

The three rule functions of a spec each get a small context object:

``infer(ctx: InferContext)``
    Reads input types (shape, dtype; -1 for an unknown batch dimension while tracing,
    concrete when a plan is built) and sets output types. Calls ``ctx.fail(...)`` on bad
    input; the caller adds the op's text line and the user's ``file:line``.

``kernel(ctx: KernelContext) -> fn``
    Called once when a block is planned for concrete shapes. Precomputes whatever it can
    and returns ``fn(*inputs)``: inputs are the op's input arrays flattened in slot order;
    it returns the single output array, or a tuple of outputs flattened in slot order.
    ``ctx.buffer(slot)`` hands out a preallocated output buffer (or None: allocate) so a
    step allocates nothing. Kernels never write into their inputs. A kernel that may return
    an input or a view of one must set ``aliases=True`` so the planner keeps that input's
    buffer alive as long as the output.

``grad(g: GradContext)``
    Emits backward *ops* (not values) through ``g.emit``. None means no gradient flows
    through the op (argmax, accuracy, random generators).
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NoReturn, Protocol, TypeGuard, TypeVar

from ..errors import DTypeError, OpArgumentError, ShapeError
from ..ir.records import OpDesc, VarDesc
from .layouts import LayoutRule
from .plan_state import PlanState
from .scratch import ScratchArrays
from .sub_block import SubBlockRule, SubGrad


@dataclass(frozen=True, slots=True)
class TensorType:
    """Shape and dtype of a value; -1 marks a dimension unknown until run time. ``kind``
    is the var's kind: 'tensor', or a container such as a 'tensor_array' (a list of
    tensors, each of this shape and dtype) or 'step_scopes' (what a loop keeps)."""
    shape: tuple[int, ...]
    dtype: str
    kind: str = "tensor"

    @property
    def rank(self) -> int:
        return len(self.shape)


def var_type(var: VarDesc) -> TensorType:
    """The type a declared var has (-1 for dims unknown until run time)."""
    return TensorType(var.shape, var.dtype, var.kind)


class BufferSlot:
    """A planned output buffer, allocated only when a kernel asks for it (kernels that
    return views never do). Several vars whose lifetimes do not overlap share one slot."""

    __slots__ = ("shape", "dtype", "xp", "array")

    def __init__(self, shape: tuple[int, ...], dtype: str, xp: Any):
        self.shape, self.dtype, self.xp, self.array = shape, dtype, xp, None

    def materialize(self) -> Any:
        if self.array is None:
            self.array = self.xp.empty(self.shape, self.dtype)
        return self.array


@dataclass(frozen=True, slots=True)
class Forward:
    """A kernel factory may return ``Forward(k)`` instead of a function when, for these
    shapes, the op's single output *is* its k-th input; code generation then binds the name
    and emits no call at all. The spec must set ``aliases=True``."""
    input_index: int


@dataclass(frozen=True, slots=True)
class Slot:
    name: str
    duplicable: bool = False  # takes a list of vars
    optional: bool = False    # may be absent (dispensable)


def slots(*specs: str) -> tuple[Slot, ...]:
    """``slots("X", "Y?", "Xs*", "Zs*?")``: '?' marks optional, '*' duplicable (both: a
    list that may be empty)."""
    out = []
    for s in specs:
        name = s.rstrip("?*")
        suffix = s[len(name):]
        out.append(Slot(name, duplicable="*" in suffix, optional="?" in suffix))
    return tuple(out)


#: The values of `OpSpec.host_access`.
HOST_ACCESS = {
    "": "every array stays on the device",
    "reads": "reads a few device values back as Python numbers every call (a bounds check "
             "of integer inputs, so that a bad label is a clear error; how many distinct "
             "rows a sparse gradient holds)",
    "draws": "draws random values on the host and copies them to the device, so that a "
             "seed gives the same values on every backend: initialisers, which run once "
             "when a program compiles",
    "io": "exchanges data with files or other processes (readers, send/recv): its values "
          "pass through the host by nature",
    "index": "indexes a tensor array (a list on the host): reads its index back as a "
             "Python number, and hands a length or sizes to the device",
    "python": "calls a Python function on NumPy arrays (py_func): its inputs come to the "
              "host and its outputs go back to the device on every call",
}


@dataclass(frozen=True, slots=True)
class RowLookup:
    """An op that reads a table only at the rows its ids name (an embedding lookup, and its
    gradient): the slots and attrs that say so. The distribute transpiler keeps a table
    that such ops read with ``sparse`` or ``distributed`` set on the parameter servers and
    hands the ops the rows of their batch instead (passes/transpiler/tables.py)."""
    table: str = "W"                 # the input slot of the table
    ids: str = "Ids"                 # the input slot of the ids ([..., 1] ints)
    padding: str = "padding_idx"     # the attr naming an id that reads zeros (-1: none)
    sparse: str = "is_sparse"        # the attrs asking for a table on the servers
    distributed: str = "is_distributed"
    out: str = "Out"                 # a lookup's output slot: the rows, table[ids]
    # A lookup's gradient op: the input slot of its output's gradient and the output slot
    # of the table's gradient ("" for the lookup itself).
    out_grad: str = ""
    table_grad: str = ""


@dataclass(frozen=True, slots=True)
class ScalarForm:
    """An elementwise op on one element: ``fn(x, [y,] *constants)``, a plain module-level
    function of floats that may name ``np``, ``abs``, ``min`` and ``max`` (the compiled
    tier compiles it from its source: kernels/chain.py); ``constants``: the numbers from
    the attrs it takes after the element(s), given in the arrays' dtype."""
    fn: Callable[..., Any]
    constants: tuple[float, ...] = ()


@dataclass(frozen=True)
class OpSpec:
    type: str
    inputs: tuple[Slot, ...]
    outputs: tuple[Slot, ...]
    infer: Callable[[InferContext], None]
    kernel: Callable[[KernelContext], Callable | Forward] | None = None
    grad: Callable[[GradContext], None] | None = None
    attrs: Mapping[str, Any] = field(default_factory=dict)
    cupy_kernel: Callable[[KernelContext], Callable | Forward] | None = None
    random: bool = False      # draws random numbers: never constant-folded
    # Does something besides computing its outputs (prints, calls a Python function): a
    # plan runs it on every call even when nothing reads its outputs, never folds it into
    # a constant, and its method runs one call at a time.
    effects: bool = False
    # In inference mode (its ``is_test`` attr, else its block's mode) the op draws nothing
    # and its persistable outputs are its inputs, unchanged (dropout, batch_norm).
    inert_in_test: bool = False
    entry: bool = False       # runs in a method's entry, before its plan (a reader's read)
    aliases: bool = False     # the kernel may return an input, or a view of one
    shape_only: tuple[str, ...] = ()  # input slots read for their type alone, never values
    # What the kernel does on the host when arrays live on a device (CuPy); "" for kernels
    # that keep every array on the device (most ops). See HOST_ACCESS.
    host_access: str = ""
    # Several ops of this type (one per parameter) may run as one op of type `fused`
    # (see passes/fuse.py): its slots are this spec's with an "s" appended and duplicable,
    # except the `fused_shared` input slots, which all the ops read from one var.
    fused: str = ""
    fused_shared: tuple[str, ...] = ()
    # (output slot, input slot) pairs: the kernel may write that output into the array of
    # that input (an elementwise ufunc with ``out=``); the planner does so when the input
    # has the output's shape and dtype, is a temporary, and this op is its last reader.
    inplace: tuple[tuple[str, str], ...] = ()
    # Input slots whose vars the planner lays out one after another in one flat array
    # (runtime/plan/buffers.py), so that the kernel reads them as one (a fused update's grads).
    contiguous: tuple[str, ...] = ()
    # Input slots the kernel reads whole (a norm over every element): the distribute
    # transpiler never cuts the parameter of such an update into row blocks.
    reads_whole: tuple[str, ...] = ()
    # The op reads a table at the rows of its ids only (RowLookup above); None otherwise.
    row_lookup: RowLookup | None = None
    # An initialiser's values at given rows of the var it fills, each row drawn from a
    # stream of its own: ``rows(attrs, draws)`` with ``draws`` a `row_random.RowDraws`.
    # A table kept on parameter servers makes its rows on first use with it, so a row's
    # first value does not depend on which rows came before (ops/row_random.py).
    rows: Callable[[Mapping[str, Any], Any], Any] | None = None
    # Attrs naming files on the machine that runs the op (a reader's data files): where the
    # data lives, not what the program computes, so two processes that agree on the program
    # may disagree on them (distributed roles compare programs without them).
    path_attrs: tuple[str, ...] = ()
    # (output slot, input slot) pairs whose var may be one and the same: the op updates
    # that var in place (``increment(x, in_place=True)``, an array write); the verifier
    # lets such an op write a var a second time.
    updates: tuple[tuple[str, str], ...] = ()
    # Input slots whose kernel takes a rows-only value (a var of kind selected_rows, a
    # `SelectedRows`) as it is. Any other slot is handed such a value densified
    # (`SelectedRows.to_dense`, which costs the whole tensor; ops/apply.py).
    sparse_inputs: tuple[str, ...] = ()
    # The op maps zero to zero, element by element, in X (clip around zero, a product
    # with a number): given a rows-only X, it maps that value's rows (merged first) and
    # gives rows-only Out, whose other rows stay zero (ops/apply.py).
    rows_values: bool = False
    # ``row_writes(attrs, input kinds)``: the (output slot, input slot) pairs whose var the
    # kernel writes by rows, in place, when a plan gives it a journal (a sparse update of
    # a table; ops/row_journal.py). None: it never writes in place.
    row_writes: Callable[[Mapping[str, Any], Mapping[str, str]],
                         tuple[tuple[str, str], ...]] | None = None
    # The op owns a sub-block and runs it (while, conditional_block, recurrent, ...).
    sub_block: SubBlockRule | None = None
    # The op on one element, for the compiled tier's elementwise chains (ops/chain.py):
    # ``scalar(attrs)`` gives the function computing what the kernel computes for these
    # attrs, with its constants; None (or a None result for these attrs): no compiled form.
    scalar: Callable[[Mapping[str, Any]], ScalarForm | None] | None = None
    # The layouts other than NCHW the kernel runs its 4-D images in, and how its attrs
    # follow (ops/layouts.py; the plan pass passes/layout.py asks it).
    layout: LayoutRule | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "attrs", MappingProxyType(dict(self.attrs)))
        if self.host_access not in HOST_ACCESS:
            raise ValueError(f"op {self.type!r}: host_access must be one of "
                             f"{sorted(HOST_ACCESS)}, got {self.host_access!r}")

    def may_update(self, op: OpDesc, name: str) -> bool:
        """Whether ``op`` may write ``name`` while also reading it (see ``updates``)."""
        return any(name in op.output(o) and name in op.input(i) for o, i in self.updates)

    def input_slot(self, name: str) -> Slot:
        for s in self.inputs:
            if s.name == name:
                return s
        raise KeyError(name)

    def inert(self, attrs: Mapping[str, Any], block_is_test: bool) -> bool:
        """Whether the op, with these attrs in a block of this mode, changes nothing that
        outlives a call (no draw, no new value for a persistable output)."""
        if not self.inert_in_test:
            return False
        flag = attrs.get("is_test")
        return block_is_test if flag is None else bool(flag)

    def full_attrs(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        """The op's attrs with defaults filled in; unknown names are an error."""
        unknown = set(attrs) - set(self.attrs)
        if unknown:
            known = ", ".join(sorted(self.attrs)) or "none"
            raise OpArgumentError(f"op {self.type!r} has no attribute(s) "
                                  f"{', '.join(sorted(unknown))}; its attributes are: {known}")
        merged = dict(self.attrs)
        merged.update(attrs)
        return merged


class InferContext:
    """What a shape rule sees: input types by slot, attrs, and where to put output types."""

    __slots__ = ("spec", "attrs", "_inputs", "outputs", "_output_counts", "op",
                 "_sub_block")

    def __init__(self, spec: OpSpec, inputs: Mapping[str, Sequence[TensorType]],
                 attrs: Mapping[str, Any], output_counts: Mapping[str, int],
                 op: OpDesc | None = None, sub_block: SubBlockTyper | None = None):
        self.spec = spec
        self.attrs = attrs
        self._inputs = inputs
        self.outputs: dict[str, list[TensorType]] = {}
        self._output_counts = output_counts
        self.op = op   # the op itself: rules of ops owning a sub-block read var names
        self._sub_block = sub_block

    def sub_block_types(self, feeds: Mapping[str, TensorType] | None = None
                        ) -> Callable[[str], TensorType]:
        """For an op owning a sub-block: the types of the vars after one run of it, given
        the types of its feeds (the vars of the blocks around have theirs)."""
        if self._sub_block is None or self.op is None:
            self.fail("this op runs a sub-block, whose types are not available here")
        return self._sub_block(self.op, dict(feeds or {}))

    def has_input(self, slot: str) -> bool:
        return bool(self._inputs.get(slot))

    def input(self, slot: str) -> TensorType:
        types = self._inputs.get(slot)
        if not types:
            raise ShapeError(f"input slot {slot!r} is missing")
        return types[0]

    def inputs(self, slot: str) -> list[TensorType]:
        return list(self._inputs.get(slot, ()))

    def has_output(self, slot: str) -> bool:
        return self._output_counts.get(slot, 0) > 0

    def output_count(self, slot: str) -> int:
        return self._output_counts.get(slot, 0)

    def set_output(self, slot: str, shape: Sequence[int], dtype: str,
                   kind: str = "tensor") -> None:
        if self.has_output(slot):
            self.outputs[slot] = [TensorType(tuple(int(d) for d in shape), dtype, kind)]

    def set_outputs(self, slot: str, types: Sequence[TensorType]) -> None:
        if types or self.has_output(slot):   # an empty slot the op left out stays out
            self.outputs[slot] = list(types)

    def fail(self, message: str) -> NoReturn:
        raise ShapeError(message)

    def fail_dtype(self, message: str) -> NoReturn:
        raise DTypeError(message)


_T = TypeVar("_T")

# (op, feed types) -> the type of each var after one run of the op's sub-block
SubBlockTyper = Callable[[OpDesc, dict[str, TensorType]], Callable[[str], TensorType]]


class KernelContext:
    """What a kernel factory sees when a block is planned for concrete shapes."""

    __slots__ = ("spec", "attrs", "xp", "in_types", "out_types", "in_slots", "out_slots",
                 "buffers", "rng", "is_test", "_constants", "_in_names", "state")

    def __init__(self, spec: OpSpec, attrs: Mapping[str, Any], xp: Any,
                 in_slots: Mapping[str, list[TensorType]],
                 out_slots: Mapping[str, list[TensorType]],
                 buffers: Mapping[str, list[Any]], rng: Any = None, is_test: bool = False,
                 constants: Mapping[str, list[Any]] | None = None,
                 in_names: Mapping[str, list[str]] | None = None,
                 state: PlanState | None = None):
        self.spec, self.attrs, self.xp = spec, attrs, xp
        self.in_slots, self.out_slots = in_slots, out_slots
        self.in_types = [t for s in spec.inputs for t in in_slots.get(s.name, ())]
        self.out_types = [t for s in spec.outputs for t in out_slots.get(s.name, ())]
        self.buffers, self.rng, self.is_test = buffers, rng, is_test
        self._constants = constants or {}
        self._in_names = in_names or {}
        self.state = PlanState() if state is None else state

    def input_name(self, slot: str, i: int = 0) -> str:
        """The var name bound to an input slot (kernels use it to key `shared` state)."""
        return self._in_names[slot][i]

    def shared(self, kind: type[_T], key: Hashable, make: Callable[[], _T] | None = None
               ) -> _T:
        """The ``kind`` value the kernels of one plan share under ``key`` (`PlanState`),
        made on first request: e.g. a convolution's geometry and columns, filled by the
        forward op and read back by its gradient op instead of being recomputed. Outside a
        plan (the reference interpreter) every kernel gets its own."""
        return self.state.shared(kind, key, make)

    def shared_by_sizes(self, kind: type[_T], key: Hashable,
                        make: Callable[[], _T] | None = None) -> _T:
        """As `shared`, for a value that depends on no size, which the plans of every
        batch size and length of a method share (a fused update's generations of the
        parameters): kept once, not once per size."""
        return self.state.shared_by_sizes(kind, key, make)

    def scratch_arrays(self, slot: str, dtype: Any,
                       shapes: Mapping[str, tuple[int, ...]]) -> ScratchArrays:
        """Working arrays a kernel needs during a call only (ops/scratch.py), named by
        attribute: ``bind`` them at the start of each call and ``unbind`` at its end. They
        are keyed by the var bound to input ``slot``, which must be one that only this op
        reads (its forward op's intermediate), so two ops never share a block."""
        names = self._in_names.get(slot)
        key: Hashable = names[0] if names else object()   # no names: a kernel of its own
        return ScratchArrays(self.state.scratch, key, self.xp, dtype, shapes)

    def constant(self, slot: str, i: int = 0) -> Any:
        """The value of an input known when the plan is built (or None): kernels may
        specialise on it, e.g. a gradient that is the same number everywhere."""
        values = self._constants.get(slot)
        return values[i] if values else None

    def uniform_constant(self, slot: str, i: int = 0) -> float | None:
        """The single value of an input that is a plan-time constant with every element
        equal, else None."""
        value = self.constant(slot, i)
        if value is None or getattr(value, "size", 0) == 0:
            return None
        flat = value.reshape(-1)
        first = flat[0]
        return float(first) if bool((flat == first).all()) else None

    def has_input(self, slot: str) -> bool:
        return bool(self.in_slots.get(slot))

    def has_output(self, slot: str) -> bool:
        return bool(self.out_slots.get(slot))

    def input(self, slot: str) -> TensorType:
        return self.in_slots[slot][0]

    def inputs(self, slot: str) -> list[TensorType]:
        return list(self.in_slots.get(slot, ()))

    def output(self, slot: str) -> TensorType:
        return self.out_slots[slot][0]

    def buffer(self, slot: str, i: int = 0) -> Any:
        """A preallocated output array for ``slot`` (or None: the kernel allocates)."""
        bufs = self.buffers.get(slot)
        if not bufs:
            return None
        buf = bufs[i]
        return buf.materialize() if isinstance(buf, BufferSlot) else buf


class KeptFrom:
    """A value a kernel derived from one input array, kept with that array in
    `KernelContext.shared` state so that a gradient op can take it back instead of deriving
    it again (a convolution's im2col columns, a max pooling's split windows).

    A forward op always derives afresh and `keep`s (its input may hold new data since the
    last call, in the same array). A gradient op asks `get` with the array it received and
    gets the value only when it is that very array: then the forward op derived it earlier
    in the same call, and a var's array stays unchanged while the var is live (no other op
    writes a live var's buffer), so the value still matches."""

    __slots__ = ("_source", "_value")

    def __init__(self) -> None:
        self._source: Any = None
        self._value: Any = None

    def keep(self, source: Any, value: Any) -> Any:
        self._source, self._value = source, value
        return value

    def get(self, source: Any) -> Any:
        """The value kept from ``source`` itself, else None."""
        return self._value if source is self._source else None

    def forget(self) -> None:
        """The value's memory is about to hold something else: keep nothing."""
        self._source = self._value = None


class GradContext:
    """What a gradient maker sees: the forward op, its vars' gradient names, and `emit`."""

    def __init__(self, op: OpDesc, attrs: Mapping[str, Any],
                 out_grads: Mapping[str, list[str | None]],
                 in_grads: Mapping[str, list[str | None]],
                 emit: Callable[..., None], tmp: Callable[[str], str],
                 blocks: BlockGrads | None = None, zeros: AbstractSet[str] = frozenset()):
        self.op, self.attrs = op, attrs
        self._out_grads, self._in_grads = out_grads, in_grads
        self._emit, self._tmp = emit, tmp
        self._blocks = blocks
        # gradients the backward pass filled with zeros: an output no gradient reached
        self._zeros = zeros

    # --- for ops owning a sub-block (supplied by passes.backward) ----------------------

    def var_type(self, name: str) -> TensorType:
        """The declared type of a var the op reads or writes."""
        return self._block_grads().var_type(name)

    def differentiate(self, seeds: Seeds, wanted: Sequence[str],
                      feeds: Sequence[str] = ()) -> SubGrad:
        """Differentiate the op's sub-block into a new gradient block (a child of the block
        this gradient goes into): ``seeds`` maps each var the sub-block gives back, whose
        gradient flows in, to the name holding that gradient (a mapping, or pairs when a
        var gets several); ``wanted`` lists the vars it receives whose gradients are asked
        for; ``feeds`` are seed names the gradient block takes per run (declared in it,
        before the values it takes from the forward runs). See `SubGrad`."""
        return self._block_grads().differentiate(self.op, seeds, wanted, feeds)

    def _block_grads(self) -> BlockGrads:
        if self._blocks is None:
            raise OpArgumentError(f"the gradient of {self.op.type!r} needs its program (it "
                                  f"runs a sub-block); use passes.backward")
        return self._blocks

    def flowing(self, slot: str) -> str | None:
        """The gradient of a single-var output slot, or None when nothing flows into it
        (none reached it, or the backward pass gave it zeros): a maker may then leave that
        output's contribution out."""
        names = self._out_grads.get(slot) or [None]
        return None if names[0] is None or names[0] in self._zeros else names[0]

    def input(self, slot: str) -> list[str]:
        return self.op.inputs.get(slot, [])

    def output(self, slot: str) -> list[str]:
        return self.op.outputs.get(slot, [])

    def out_grad(self, slot: str) -> list[str | None]:
        """Gradient var names of an output slot; None where no gradient reaches it."""
        return self._out_grads.get(slot, [])

    def in_grad(self, slot: str) -> list[str | None]:
        """Names to write for an input slot's gradients; None where none is wanted."""
        return self._in_grads.get(slot, [])

    def wants(self, slot: str) -> bool:
        return any(n is not None for n in self._in_grads.get(slot, []))

    def emit(self, type: str, inputs: Mapping[str, Sequence[str | None]],
             outputs: Mapping[str, Sequence[str | None]],
             attrs: Mapping[str, Any] | None = None) -> None:
        """Append a backward op; empty slots are dropped."""
        self._emit(type, {k: list(v) for k, v in inputs.items() if v},
                   {k: list(v) for k, v in outputs.items() if v}, dict(attrs or {}))

    def tmp(self, hint: str) -> str:
        """A fresh temporary name; its type comes from the emitting op's shape rule."""
        return self._tmp(hint)


Seeds = Mapping[str, str] | Sequence[tuple[str, str]]


class BlockGrads(Protocol):
    """What the backward pass lends the gradient makers of ops owning a sub-block."""

    def var_type(self, name: str) -> TensorType: ...

    def differentiate(self, op: OpDesc, seeds: Seeds, wanted: Sequence[str],
                      feeds: Sequence[str]) -> SubGrad: ...



# --- helpers shared by many specs -------------------------------------------------------------

def dims_compatible(a: int, b: int) -> bool:
    return a < 0 or b < 0 or a == b


def grad_names(names: Sequence[str | None]) -> list[str]:
    """The gradient names of a slot that are there, in order (None: no gradient)."""
    return [n for n in names if n is not None]


def grad_slot(slot: str) -> str:
    return slot + "@GRAD"


def present(names: Sequence[str | None]) -> TypeGuard[Sequence[str]]:
    """Whether every gradient name is there (no None), as `GradContext.emit` needs."""
    return all(n is not None for n in names)


def infer_like(mapping: Mapping[str, str]) -> Callable[[InferContext], None]:
    """A shape rule for grad ops: output slot -> the input slot whose types it copies."""
    def infer(ctx: InferContext) -> None:
        for out_slot, in_slot in mapping.items():
            if ctx.has_output(out_slot):
                ctx.set_outputs(out_slot, ctx.inputs(in_slot)[:ctx.output_count(out_slot)])
    return infer


def emit_default_grad(g: GradContext, uses: Sequence[str], grad_type: str,
                      in_slots: Sequence[str], out_slots: Sequence[str] = ("Out",),
                      attrs: Mapping[str, Any] | None = None) -> None:
    """Emit one ``<type>_grad`` op reading the forward slots in ``uses`` and the output
    gradients, writing ``S@GRAD`` for each wanted input slot. Skips when nothing flows."""
    wanted = {s: g.in_grad(s) for s in in_slots if g.wants(s)}
    ograds = {grad_slot(s): g.out_grad(s) for s in out_slots}
    if not wanted or not any(n for names in ograds.values() for n in names):
        return
    if any(n is None for names in ograds.values() for n in names):
        return  # makers that accept partial output gradients handle that themselves
    inputs: dict[str, list[str]] = {s: (g.input(s) or g.output(s)) for s in uses}
    inputs.update({k: [n for n in v if n] for k, v in ograds.items()})
    # The grad kernel writes one gradient per input of a slot, in order: inputs whose
    # gradient nobody wants still get a (discarded) temporary, so positions stay aligned.
    outputs = {grad_slot(s): [n if n else g.tmp(f"{s}_unused") for n in names]
               for s, names in wanted.items()}
    g.emit(grad_type, inputs, outputs, dict(g.attrs if attrs is None else attrs))
