"""The errors of a failing plan: the op whose kernel raised, read from the generated line
the traceback passed through, with the user's file:line where the layer was called, and,
inside sub-blocks, each op around it with the run (iteration) that failed."""
from __future__ import annotations

import types
from dataclasses import dataclass

from ...errors import KernelError
from ...ir.records import BlockDesc, ProgramDesc
from ...ir.source import format_location
from .analysis import describe_op
from .emitter import GeneratedCode

_Frame = tuple  # (GeneratedCode, op index, frame)

_UNCHANGED = "  No state was changed: the step's updates were not committed."


@dataclass(frozen=True)
class FailureSite:
    """The block a plan runs: ``block`` as written (its name), ``plan_block`` as planned
    (after the plan passes: the ops the generated lines run)."""
    program: ProgramDesc
    block: BlockDesc
    plan_block: BlockDesc

    def kernel_error(self, error: Exception, code: GeneratedCode | None) -> KernelError:
        """The error of a call of ``code`` (None: no plan yet) that raised ``error``."""
        chain = [] if code is None else _failing_chain(error.__traceback__, code)
        if len(chain) <= 1:
            return self.op_error(error, chain[0][1] if chain else None)
        return self._nested_error(error, chain)

    def op_error(self, error: Exception, index: int | None) -> KernelError:
        """The error of op ``index`` of the block (None: no op known) failing."""
        if index is None:
            return KernelError(f"{self.block.name or 'block'} failed: "
                               f"{type(error).__name__}: {error}")
        op = self.plan_block.ops[index]   # the index is the generated line's op
        return KernelError(
            f"op {index} of {self.block.name or 'block ' + str(self.block.idx)} failed: "
            f"{type(error).__name__}: {error}\n  in op: "
            f"{describe_op(self.program, self.plan_block, op)}\n{_UNCHANGED}")

    def _nested_error(self, error: Exception, chain: list[_Frame]) -> KernelError:
        code, index, _ = chain[-1]
        block = self.program.blocks[code.block]
        lines = [f"op {index} of block {block.idx} failed: {type(error).__name__}: {error}",
                 f"  in op: {describe_op(self.program, block, block.ops[index])}"]
        for code, index, frame in reversed(chain[:-1]):
            outer = self.plan_block if code.block == self.block.idx else \
                self.program.blocks[code.block]
            op = outer.ops[index]
            counter = code.counters.get(index)
            run = frame.f_locals.get(counter) if counter else None
            where = format_location(op.loc) or "an unknown line"
            at = f" in its iteration {run} (counting from 0)" if isinstance(run, int) else ""
            lines.append(f"  inside {op.type} (op {index} of block {outer.idx}, recorded at "
                         f"{where}){at}")
        lines.append(_UNCHANGED)
        return KernelError("\n".join(lines))


def _failing_chain(tb: types.TracebackType | None, code: GeneratedCode) -> list[_Frame]:
    """The generated frames a traceback passed through, outermost first, each with the op
    its line runs: the method's plan, then the sub-block functions it called."""
    codes = {code.filename: code, **code.children}
    chain: list[_Frame] = []
    while tb is not None:
        found = codes.get(tb.tb_frame.f_code.co_filename)
        if found is not None:
            index = found.line_to_op.get(tb.tb_lineno)
            if index is not None:
                chain.append((found, index, tb.tb_frame))
        tb = tb.tb_next
    return chain
