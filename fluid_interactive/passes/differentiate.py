"""The core of reverse-mode autodiff: differentiate the ops of one block, through the
sub-blocks they own.

`Differentiation` walks a block's forward ops in reverse and asks each op's spec to emit
its gradient ops (`_Accumulator` names each read's gradient and sums several before use).
Two things make it correct for blocks that update vars in place (a loop's carried vars, a
branch writing a var declared around it, ``increment(in_place=True)``):

* **gradients by version**: when the walk passes an op writing var ``v``, the gradient
  gathered so far belongs to the value that op wrote; what is gathered afterwards belongs
  to the value before it, so the accumulator starts afresh for ``v``;
* **forward values by version**: a gradient op reads forward values by name. If the value
  it needs is overwritten later in the block (a var read before a loop and carried by it),
  a snapshot (``assign``) is inserted into the forward block just before the overwrite,
  and the gradient op reads the snapshot instead.

An op owning a sub-block differentiates it through `GradContext.differentiate`: a new
gradient block (`SubGrad`) is built by a nested `Differentiation` of the sub-block; the
forward values its ops read are taken from the values the forward op keeps per run (its
``keep`` attr), and become the gradient block's feeds.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from ..ir.blocks import declared_within, nested_blocks, outer_interface, sub_block_index
from ..ir.names import fresh_name
from ..ir.records import (
    FLOAT_DTYPES,
    BlockDesc,
    OpDesc,
    OpRole,
    ProgramDesc,
    SourceLoc,
    VarDesc,
    clone_var,
)
from ..ops.apply import declared_typer, infer_op
from ..ops.registry import get_spec
from ..ops.spec import GradContext, Seeds, TensorType, var_type

GRAD = "@GRAD"
FORWARD_ROLES = (OpRole.FORWARD, OpRole.FORWARD | OpRole.LOSS)


def grad_var_name(name: str) -> str:
    return name + GRAD


def unique_name(block: BlockDesc, program: ProgramDesc, name: str) -> str:
    """``name``, or ``name@k`` when a previous backward pass in the block already used it."""
    return fresh_name(name, lambda n: program.find_var(block, n) is not None)


def ops_on_path(ops: Sequence[OpDesc], targets: Iterable[str], leaves: set[str]
                ) -> tuple[list[OpDesc], set[str]]:
    """Forward ops through which a wanted leaf reaches a target, and the vars that carry a
    gradient (those depending on a leaf)."""
    needed = set(targets)
    on_target_path = []
    for op in reversed(ops):
        if op.role in FORWARD_ROLES and needed.intersection(op.output_names()):
            on_target_path.append(op)
            needed.update(op.input_names())
    on_target_path.reverse()
    carries = set(leaves)
    path = []
    for op in on_target_path:
        if carries.intersection(op.input_names()) and get_spec(op.type).grad is not None:
            path.append(op)
            carries.update(op.output_names())
    return path, carries


def float_only(program: ProgramDesc, block: BlockDesc, names: set[str],
               rewritten: AbstractSet[str] = frozenset()) -> set[str]:
    """The names of ``names`` that can carry a gradient: float tensors (or arrays of them)
    not marked ``stop_gradient``, unless ``rewritten``: a var's ``stop_gradient`` marks the
    value its first writer makes (a constant's), so a later write that a gradient flows
    through (a loop carrying the var, ``assign(..., output=h)``) carries it."""
    return {n for n in names
            if (v := program.find_var(block, n)) is not None and v.dtype in FLOAT_DTYPES
            and v.kind in ("tensor", "tensor_array")
            and (not v.stop_gradient or v.is_parameter or n in rewritten)}


def rewritten_on_path(ops: Sequence[OpDesc], path: set[int]) -> set[str]:
    """Vars written by an op of the path (``path``: op ids) after an earlier op off the path
    wrote them first."""
    first: dict[str, bool] = {}   # var -> whether its first writer is on the path
    out: set[str] = set()
    for op in ops:
        on_path = id(op) in path
        for n in op.output_names():
            if n not in first:
                first[n] = on_path
            elif on_path and not first[n]:
                out.add(n)
    return out


class _Accumulator:
    """Names each read's gradient and sums several into one before it is used."""

    def __init__(self, program: ProgramDesc, block: BlockDesc, path: Sequence[OpDesc],
                 carries: set[str]):
        self.program, self.block = program, block
        self.reads: dict[str, int] = {}
        for op in path:
            for n in op.input_names():
                if n in carries:
                    self.reads[n] = self.reads.get(n, 0) + 1
        self.parts: dict[str, list[str]] = {}
        self.final: dict[str, str] = {}
        self.reserved: set[str] = set()
        self.loc_of: dict[str, SourceLoc | None] = {}   # gradient part -> the forward op's line

    def new_part(self, var: str) -> str:
        base = grad_var_name(var)
        if self.reads.get(var, 0) > 1:
            base = f"{base}@RENAME@{len(self.parts.get(var, []))}"
        name = self.fresh(base)
        self.parts.setdefault(var, []).append(name)
        return name

    def fresh(self, base: str) -> str:
        name = fresh_name(base, lambda n: n in self.reserved or
                          self.program.find_var(self.block, n) is not None)
        self.reserved.add(name)
        return name

    def reset(self, var: str) -> None:
        """An op writing ``var`` was passed: what comes next is the gradient of the value
        ``var`` had before it."""
        self.parts.pop(var, None)
        self.final.pop(var, None)

    def resolve(self, var: str, written: set[str], emit: Callable[[OpDesc], None]
                ) -> str | None:
        """The single gradient name of ``var``, summing its parts first if needed."""
        if var in self.final:
            return self.final[var]
        parts = [p for p in self.parts.get(var, []) if p in written]
        if not parts:
            return None
        if len(parts) == 1:
            self.final[var] = parts[0]
            return parts[0]
        total = self.fresh(grad_var_name(var))
        emit(OpDesc("sum", {"X": parts}, {"Out": [total]}, loc=self.loc_of.get(parts[0])))
        self.final[var] = total
        return total


class _Versions:
    """Where each var is written among a block's forward ops, and the snapshots of values
    that gradient ops need after they were overwritten."""

    def __init__(self, program: ProgramDesc, block: BlockDesc, ops: Sequence[OpDesc]):
        self.program, self.block = program, block
        self.writers: dict[str, list[int]] = {}
        for j, op in enumerate(ops):
            for n in op.output_names():
                self.writers.setdefault(n, []).append(j)
        self.ops = list(ops)
        self.snapshots: dict[tuple[str, int], str] = {}

    def value_at(self, name: str, j: int, written_by_j: bool) -> str:
        """The name holding the value of ``name`` that op ``j`` read (or wrote): ``name``
        itself unless a later op overwrites it, else a snapshot taken before that op."""
        later = [k for k in self.writers.get(name, ())
                 if k > j or (k == j and not written_by_j)]
        if not later:
            return name
        key = (name, later[0])
        if key not in self.snapshots:
            # unique in the whole program: blocks nested in this one may see it
            taken = {n for b in self.program.blocks for n in b.vars}
            snap = fresh_name(f"{name}@SNAPSHOT", taken.__contains__)
            self.snapshots[key] = snap
            var = self.program.find_var(self.block, name)
            assert var is not None   # it has writers in this block
            copy = clone_var(var)
            copy.name, copy.persistable, copy.is_parameter = snap, False, False
            copy.is_data = False
            self.block.vars[snap] = copy
        return self.snapshots[key]

    def apply(self) -> None:
        """Insert each snapshot ``assign`` just before the op that overwrites the value."""
        for (name, k), snap in sorted(self.snapshots.items(), key=lambda kv: -kv[0][1]):
            at = next(i for i, op in enumerate(self.block.ops) if op is self.ops[k])
            self.block.ops.insert(at, OpDesc("assign", {"X": [name]}, {"Out": [snap]},
                                             loc=self.ops[k].loc))
        self.snapshots.clear()


def rename_outer(program: ProgramDesc, block: BlockDesc, old: str, new: str) -> None:
    """Rename var ``old`` to ``new`` in ``block`` and the blocks nested in it, where the
    name means the var declared around them."""
    for b in nested_blocks(program, block):
        if old in b.vars:
            continue
        for op in b.ops:
            for names in (*op.inputs.values(), *op.outputs.values()):
                names[:] = [new if n == old else n for n in names]


class Differentiation:
    """One block's forward ops differentiated, the gradient ops going into ``grad_block``
    (the block itself for a method; a new gradient block for a sub-block)."""

    def __init__(self, program: ProgramDesc, forward: BlockDesc, grad_block: BlockDesc,
                 targets: Sequence[str], leaves: set[str], no_grad: set[str],
                 keep_written_leaves: bool = False):
        self.program, self.forward, self.grad_block = program, forward, grad_block
        self.keep_written_leaves = keep_written_leaves
        self.no_grad, self.leaves = no_grad, leaves
        # the gradient of a wanted var some op of the block writes: that of the value its
        # first writer made (the walk meets the writers newest first)
        self.written_leaf: dict[str, str | None] = {}
        self.ops = list(forward.ops)
        path, carries = ops_on_path(self.ops, targets, leaves)
        self.path = {id(op) for op in path}
        # a wanted var carries a gradient even when marked stop_gradient, if it is a float
        self.carries = float_only(program, forward, carries - no_grad,
                                  rewritten_on_path(self.ops, self.path) | leaves)
        self.acc = _Accumulator(program, grad_block, path, self.carries)
        self.versions = _Versions(program, forward, self.ops)
        self.written: set[str] = set()
        self.new_ops: list[OpDesc] = []
        self._at: int | None = None     # the forward op whose gradient is being emitted
        #: var -> the gradient its writer's gradient op read (an error clip clips it)
        self.output_grads: dict[str, str] = {}

    # --- emitting ----------------------------------------------------------------------

    def emit(self, op: OpDesc, loc=None) -> None:
        """Append a gradient op: it reads forward values as the forward op saw them, is
        declared from its shape rule, and gets role Backward."""
        op.role = op.role if op.role != OpRole.FORWARD else OpRole.BACKWARD
        op.loc = op.loc or loc
        if self._at is not None:
            self._read_versions(op, self._at)
        self._declare(op)
        self.grad_block.ops.append(op)
        self.new_ops.append(op)
        self.written.update(op.output_names())

    def _read_versions(self, op: OpDesc, j: int) -> None:
        spec = get_spec(op.type)
        forward = self.ops[j]
        for slot, names in op.inputs.items():
            if slot in spec.shape_only:
                continue
            for i, name in enumerate(names):
                if name not in self.versions.writers:
                    continue
                written = name in forward.output_names() and name not in forward.input_names()
                value = self.versions.value_at(name, j, written)
                if value != name:
                    names[i] = value
                    idx = sub_block_index(op)
                    if idx is not None:
                        rename_outer(self.program, self.program.blocks[idx], name, value)

    def _declare(self, op: OpDesc) -> None:
        """Declare the op's new outputs in the gradient block; inputs are looked up there
        and, failing that, among the forward values (a gradient block takes those as
        feeds when it is closed)."""
        program, grad_block, forward = self.program, self.grad_block, self.forward

        def type_of(name: str) -> TensorType:
            # a forward value of the block (one the gradient block will take as a feed)
            # before any var of that name around it
            v = (grad_block.vars.get(name) or forward.vars.get(name)
                 or program.find_var(grad_block, name) or program.find_var(forward, name))
            assert v is not None, name   # the verified forward declares what it reads
            return var_type(v)
        for slot, types in infer_op(op, type_of, declared_typer(program)).items():
            for name, t in zip(op.outputs[slot], types):
                if program.find_var(grad_block, name) is None:
                    grad_block.vars[name] = VarDesc(name, t.shape, t.dtype, kind=t.kind)

    # --- the walk ----------------------------------------------------------------------

    def seed(self, var: str, grad: str) -> None:
        """``grad`` holds the gradient of ``var``'s last value."""
        self.acc.parts.setdefault(var, []).append(grad)
        self.written.add(grad)

    def run(self) -> None:
        """Walk the forward ops in reverse, emitting the gradient of each on the path."""
        for j in reversed(range(len(self.ops))):
            op = self.ops[j]
            if id(op) in self.path:
                self._grad_of(op, j)
            else:
                self._passed_writer(op)

    def resolve(self, var: str) -> str | None:
        """The gradient of ``var``'s value before the block's ops."""
        return self.acc.resolve(var, self.written, self.emit)

    def wanted_grad(self, var: str) -> str | None:
        """The gradient of a wanted var: of its value before the block's ops (a feed, a
        parameter, a loop's initial value) or, when the block makes it (an intermediate, a
        constant), of the value its first writer made."""
        return self.resolve(var) or self.written_leaf.get(var)

    def _passed_writer(self, op: OpDesc, resolved: dict[str, str | None] | None = None
                       ) -> None:
        """The walk passed ``op``: what is gathered next for a var it writes belongs to the
        value before it. A wanted var keeps the gradient of the value ``op`` wrote."""
        for n in op.output_names():
            if self.keep_written_leaves and n in self.leaves and n in self.carries:
                self.written_leaf[n] = (resolved.get(n) if resolved is not None else
                                        self.acc.resolve(n, self.written,
                                                         lambda o: self.emit(o, op.loc)))
            self.acc.reset(n)

    def _grad_of(self, op: OpDesc, j: int) -> None:
        spec = get_spec(op.type)
        emit_at = lambda o: self.emit(o, op.loc)   # noqa: E731
        out_grads = {slot: [self.acc.resolve(n, self.written, emit_at) for n in names]
                     for slot, names in op.outputs.items()}
        resolved = {n: g for slot, names in op.outputs.items()
                    for n, g in zip(names, out_grads[slot])}
        self.output_grads.update((n, g) for n, g in resolved.items() if g is not None)
        self._passed_writer(op, resolved)
        if not any(n for names in out_grads.values() for n in names):
            return
        zeros: set[str] = set()
        if spec.sub_block is None and sum(len(v) for v in out_grads.values()) > 1:
            out_grads = self._fill_missing(op, out_grads, zeros)
        in_grads = {slot: [self.acc.new_part(n) if n in self.carries else None
                           for n in names]
                    for slot, names in op.inputs.items()}
        for names in in_grads.values():
            self.acc.loc_of.update((n, op.loc) for n in names if n is not None)

        def emit_op(type_, inputs, outputs, attrs):
            self.emit(OpDesc(type_, inputs, outputs, attrs), op.loc)

        ctx = GradContext(op, spec.full_attrs(op.attrs), out_grads, in_grads, emit_op,
                          lambda hint: self.acc.fresh(f"{hint}@GRAD_TMP"), self, zeros)
        self._at = j
        try:
            spec.grad(ctx)   # type: ignore[misc]
        finally:
            self._at = None

    def _fill_missing(self, op: OpDesc, out_grads, zeros: set[str]):
        """Outputs of a multi-output op that no gradient reached get zeros, so gradient
        makers always see a complete set (``zeros`` collects their names: a maker may
        leave them out, `GradContext.flowing`)."""
        filled: dict[str, list[str]] = {}
        for slot, names in out_grads.items():
            filled[slot] = []
            for fwd, g in zip(op.outputs[slot], names):
                if g is None:
                    g = self.acc.fresh(grad_var_name(fwd) + "@ZERO")
                    self.emit(OpDesc("fill_zeros_like", {"X": [fwd]}, {"Out": [g]}), op.loc)
                    zeros.add(g)
                filled[slot].append(g)
        return filled

    # --- what gradient makers of ops owning a sub-block use (spec.BlockGrads) ---------

    def var_type(self, name: str) -> TensorType:
        v = self.program.find_var(self.forward, name)
        assert v is not None, name
        return var_type(v)

    def differentiate(self, op: OpDesc, seeds: Seeds, wanted: Sequence[str],
                      feeds: Sequence[str] = ()) -> SubGrad:
        body = self.program.blocks[sub_block_index(op)]   # type: ignore[index]
        grads = BlockDesc(len(self.program.blocks), self.grad_block.idx)
        self.program.blocks.append(grads)
        pairs = list(seeds.items()) if isinstance(seeds, Mapping) else list(seeds)
        for var, grad in pairs:   # the per-run seeds: vars of the gradient block
            if grad in feeds and grad not in grads.vars:
                grads.vars[grad] = _local_copy(self.program.find_var(body, var), grad)
        grads.feeds = list(feeds)
        inner = Differentiation(self.program, body, grads, [v for v, _ in pairs],
                                set(wanted), self.no_grad)
        for var, grad in pairs:
            inner.seed(var, grad)
        inner.run()
        return SubGrad(inner, op)


class SubGrad:
    """The gradient block of a sub-block (see `ops.sub_block.SubGrad`)."""

    def __init__(self, inner: Differentiation, forward: OpDesc):
        self.inner, self.forward = inner, forward
        self.block = inner.grad_block.idx

    def grad(self, var: str) -> str | None:
        return self.inner.resolve(var)

    def emit(self, type: str, inputs: Mapping[str, Sequence[str]],
             outputs: Mapping[str, Sequence[str]], attrs: Mapping | None = None) -> None:
        self.inner.emit(OpDesc(type, {k: list(v) for k, v in inputs.items() if v},
                               {k: list(v) for k, v in outputs.items() if v},
                               dict(attrs or {})))

    def tmp(self, hint: str) -> str:
        return self.inner.acc.fresh(f"{hint}@GRAD_TMP")

    def zeros_like(self, var: str) -> str:
        name = self.tmp(var)
        self.emit("fill_zeros_like", {"X": [var]}, {"Out": [name]})
        return name

    def finish(self, returns: Sequence[str] = ()) -> tuple[list[str], list[str]]:
        """The forward values the gradient block reads become its feeds (declared in it,
        so they shadow a var of the same name around it) and what the forward op keeps
        per run; what else it reads and what it writes of the blocks around go into its
        op's slots."""
        inner = self.inner
        inner.versions.apply()
        program, body, grads = inner.program, inner.forward, inner.grad_block
        reads, writes = outer_interface(program, grads)
        values = declared_within(program, body) | {n for op in body.ops
                                                    for n in op.output_names()}
        taken = [n for n in reads if n in values]
        for n in taken:
            grads.vars[n] = _local_copy(program.find_var(body, n))
        grads.feeds = [*grads.feeds, *taken]
        grads.returns = tuple(returns) if returns else None
        shapes = _read_for_shape_only(grads, taken)
        _add_to_list_attr(self.forward, "keep", [n for n in taken if n not in shapes])
        _add_to_list_attr(self.forward, "keep_shapes", [n for n in taken if n in shapes])
        return [n for n in reads if n not in values], writes


def _read_for_shape_only(block: BlockDesc, names: Sequence[str]) -> set[str]:
    """Those of ``names`` that the ops of ``block`` read only through a slot their spec
    reads for the type alone: their values need not be kept."""
    valued: set[str] = set()
    for op in block.ops:
        spec = get_spec(op.type)
        for slot, slot_names in op.inputs.items():
            if slot not in spec.shape_only:
                valued.update(slot_names)
    return {n for n in names if n not in valued}


def _add_to_list_attr(op: OpDesc, key: str, names: Sequence[str]) -> None:
    before = op.attrs.get(key)
    current = list(before) if isinstance(before, (list, tuple)) else []
    op.attrs[key] = current + [n for n in names if n not in current]


def _local_copy(var: VarDesc | None, name: str | None = None) -> VarDesc:
    """A var of a gradient block like ``var`` (a value it takes per run)."""
    assert var is not None
    copy = clone_var(var)
    copy.persistable = copy.is_parameter = copy.is_data = False
    copy.name = name or copy.name
    return copy
