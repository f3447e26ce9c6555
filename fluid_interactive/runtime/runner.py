"""Running one block: a plan per feed signature, built once and cached, and errors that
name the failing op and the user's line."""
from __future__ import annotations

import types
from typing import Any, Callable, Optional

import numpy as np

from ..errors import FluidError, KernelError
from ..ir.records import BlockDesc, OpRole, ProgramDesc
from ..ops.spec import TensorType
from .analysis import analyse_block, describe_op, op_rng
from .codegen import GeneratedCode, generate
from .feed import check_batch_sizes

SignatureKey = tuple


class BlockRunner:
    """Compiles ``block`` lazily for each distinct feed signature and runs it on a scope."""

    def __init__(self, program: ProgramDesc, block: BlockDesc, xp: Any,
                 seed: Optional[int], rng_for: Optional[Callable[[int], Any]] = None,
                 is_test: Optional[bool] = None):
        self.program, self.block, self.xp, self.seed = program, block, xp, seed
        self.feed_names = list(block.feeds)
        self._rng_for = rng_for or (lambda i: op_rng(seed, block.idx, i, np))
        self.is_test = is_test if is_test is not None else not _optimizes(block)
        # One plan per feed signature (the first one built, for callers that take turns).
        self.plans: dict[SignatureKey, GeneratedCode] = {}
        # Idle plan instances per signature, for callers that run concurrently.
        self.pools: dict[SignatureKey, list[GeneratedCode]] = {}

    def plan(self, arrays: list[Any]) -> GeneratedCode:
        """The plan for these arrays' shapes, built on first use. Callers must take turns
        (a plan's buffers and kernel state serve one call at a time)."""
        key = tuple(a.shape for a in arrays)
        code = self.plans.get(key)
        if code is None:
            code = self._build(arrays)
            self.plans.setdefault(key, code)
        return code

    def instance(self, arrays: list[Any]) -> GeneratedCode:
        """A new plan instance for these shapes, for a call that runs beside others; the
        caller hands it back with ``code.pool.append(code)``."""
        key = tuple(a.shape for a in arrays)
        code = self._build(arrays)
        code.pool = self.pools.setdefault(key, [])
        self.plans.setdefault(key, code)
        return code

    def _build(self, arrays: list[Any]) -> GeneratedCode:
        check_batch_sizes(self.block, self.feed_names, arrays)
        feed_types = {n: TensorType(tuple(a.shape), a.dtype.name)
                      for n, a in zip(self.feed_names, arrays)}
        analysis = analyse_block(self.program, self.block, feed_types, self.xp, self._rng_for)
        return generate(self.program, self.block, analysis, self.feed_names, self.xp,
                        self._rng_for, self.is_test,
                        tag=f"{self.program.name}.{self.block.name or self.block.idx}")

    def run(self, scope_values: dict, arrays: list[Any]) -> Any:
        code = self.plans.get(tuple(a.shape for a in arrays)) or self.plan(arrays)
        try:
            return code.fn(scope_values, *arrays)
        except FluidError:
            raise
        except Exception as e:
            raise self.kernel_error(e, code) from e

    def kernel_error(self, error: Exception, code: Optional[GeneratedCode]) -> KernelError:
        index = None if code is None else _failing_op(error.__traceback__, code)
        if index is None:
            return KernelError(f"{self.block.name or 'block'} failed: "
                               f"{type(error).__name__}: {error}")
        op = self.block.ops[index]
        return KernelError(
            f"op {index} of {self.block.name or 'block ' + str(self.block.idx)} failed: "
            f"{type(error).__name__}: {error}\n  in op: "
            f"{describe_op(self.program, self.block, op)}\n"
            f"  No state was changed: the step's updates were not committed.")


def _failing_op(tb: Optional[types.TracebackType], code: GeneratedCode) -> Optional[int]:
    found = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == code.filename:
            found = code.line_to_op.get(tb.tb_lineno, found)
        tb = tb.tb_next
    return found


def _optimizes(block: BlockDesc) -> bool:
    return any(op.role & OpRole.OPTIMIZE for op in block.ops)
