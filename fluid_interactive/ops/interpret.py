"""A reference interpreter: run ops one by one over a dict of arrays.

No planning, no buffers, no caching: the executable definition of what a list of ops
means. Tests compare the compiled runtime against it; the op-test harness runs gradient
ops with it. An op owning a sub-block runs it through its spec's rule
(`SubBlockRule.interpret`), which needs the program the block belongs to.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Any

import numpy as np

from ..errors import OpArgumentError
from ..ir.blocks import declared_within, sub_block_index
from ..ir.records import SELECTED_ROWS, BlockDesc, OpDesc, ProgramDesc, returned_names
from ..util.selected_rows import SelectedRows
from .apply import flat_inputs, flat_outputs, infer_op, prepare_kernel
from .array_value import TensorArray
from .registry import get_spec
from .spec import Forward, TensorType, var_type


def _type_of(env: Mapping[str, Any], name: str, program: ProgramDesc | None,
             block: BlockDesc | None) -> TensorType:
    """The type of a value; a var a branch that did not run left unset (None) has its
    declared type."""
    a = env[name]
    declared = program.find_var(block, name) if program and block else None
    if a is None and declared is not None:
        return var_type(declared)
    if isinstance(a, TensorArray):   # a tensor array: the type of its elements
        first = next((e for _, e in a.items()), None)
        if first is not None:
            return TensorType(tuple(first.shape), np.dtype(first.dtype).name, "tensor_array")
        return var_type(declared) if declared else TensorType((), "float32", "tensor_array")
    if isinstance(a, SelectedRows):   # rows only: the type of the tensor it stands for
        return TensorType(a.shape, np.dtype(a.dtype).name, SELECTED_ROWS)
    return TensorType(tuple(a.shape), np.dtype(a.dtype).name)


def run_ops(ops: Iterable[OpDesc], env: MutableMapping[str, Any], xp: Any = np,
            rng: Any = None, is_test: bool = False, program: ProgramDesc | None = None,
            block: BlockDesc | None = None) -> MutableMapping[str, Any]:
    """Execute ``ops`` in order, reading and writing ``env`` (name -> array). Ops owning
    a sub-block need ``program``; ``block`` (the ops' block) types vars left unset."""
    rng = rng or np.random.default_rng(0)
    for op in ops:
        spec = get_spec(op.type)
        if spec.sub_block is not None:
            _Run(op, env, xp, rng, is_test, program).start()
            continue
        known = {n: _type_of(env, n, program, block) for n in op.input_names()}
        out_types = infer_op(op, known.__getitem__)
        types = dict(known)
        for slot, names in op.outputs.items():
            types.update(zip(names, out_types[slot]))
        fn = prepare_kernel(op, types.__getitem__, xp, rng=rng, is_test=is_test)
        args = [env[n] for n in flat_inputs(spec, op)]
        result = args[fn.input_index] if isinstance(fn, Forward) else fn(*args)
        outs = flat_outputs(spec, op)
        values = (result,) if len(outs) == 1 else tuple(result)
        for name, value in zip(outs, values):
            env[name] = value
    return env


class _Nested(MutableMapping):
    """The values a sub-block sees: its own vars, then those of the blocks around; a
    write to a var declared around goes there."""

    def __init__(self, outer: MutableMapping[str, Any], inner: set[str]):
        self.outer, self.inner = outer, inner
        self.local: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        return self.local[name] if name in self.local else self.outer[name]

    def __setitem__(self, name: str, value: Any) -> None:
        (self.local if name in self.inner else self.outer)[name] = value

    def __delitem__(self, name: str) -> None:
        del self.local[name]

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self.outer), **dict.fromkeys(self.local)})

    def __len__(self) -> int:
        return len(set(self.outer) | set(self.local))


def _shape_only(xp: Any, value: Any) -> Any:
    """What a gradient that reads a value for its shape alone replays: an array of the
    value's shape and dtype holding one broadcast zero (no copy), so its kernel is prepared
    for the shape the run had, not the declared one (-1 for a batch unknown when traced)."""
    if value is None or isinstance(value, TensorArray):   # an array: its type is declared
        return None
    return xp.broadcast_to(xp.zeros((), value.dtype), value.shape)


class _Run:
    """The `RunContext` of one op owning a sub-block."""

    def __init__(self, op: OpDesc, env: MutableMapping[str, Any], xp: Any, rng: Any,
                 is_test: bool, program: ProgramDesc | None):
        if program is None:
            raise OpArgumentError(f"op {op.type!r} runs a sub-block: run_ops needs the "
                                  f"program (run_ops(ops, env, program=...))")
        self.op, self.env, self.xp, self.rng, self.is_test = op, env, xp, rng, is_test
        self.program = program
        rule = get_spec(op.type).sub_block
        assert rule is not None
        self.rule = rule
        self.attrs: Mapping[str, Any] = get_spec(op.type).full_attrs(op.attrs)
        self.block = program.blocks[sub_block_index(op)]   # type: ignore[index]
        kept = op.output(rule.keeps) if rule.keeps else []
        self.kept_var: str | None = kept[0] if kept else None
        self.keep = list(self.attrs.get("keep") or ())
        self.shapes = list(self.attrs.get("keep_shapes") or ())   # read for shape: None

    def start(self) -> None:
        if self.kept_var is not None:
            self.env[self.kept_var] = []
        for name in self.rule.body_outputs(self.op):
            if name not in self.env:
                self.env[name] = None   # a run that does not happen leaves it unset
        self.rule.interpret(self)

    def value(self, var: str) -> Any:
        return self.env[var]

    def set(self, var: str, value: Any) -> None:
        self.env[var] = value

    def run_body(self, feeds: Mapping[str, Any] | None = None) -> dict[str, Any]:
        nested = _Nested(self.env, declared_within(self.program, self.block))
        nested.local.update(feeds or {})
        run_ops(self.block.ops, nested, self.xp, self.rng, self.is_test, self.program,
                self.block)
        names = returned_names(self.block.returns)
        if self.kept_var is not None and not self.attrs.get("is_test"):
            # one entry per run, even with nothing kept: a gradient replays each run
            shapes = {n: _shape_only(self.xp, nested.get(n))
                      for n in self.shapes}
            self.env[self.kept_var].append({**shapes, **{n: nested[n] for n in self.keep}})
        return {n: nested[n] for n in names}

    def replayed(self, kept: Mapping[str, Any]) -> dict[str, Any]:
        return {n: kept[n] for n in self.block.feeds if n in kept}
