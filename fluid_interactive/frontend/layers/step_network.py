"""What `StaticRNN` and `DynamicRNN` share: one step traced once, under ``with``, into the
sub-block of the op that runs it; verbs that only make sense inside that block; and the
outputs, read by calling the network after it."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...errors import ProgramDefinitionError
from ...ir.records import BlockDesc
from ...ir.source import user_location
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper


class StepNetwork:
    """The skeleton of a recurrent network; a subclass records the op in `_finish`."""

    _kind = ""                   # the class users see in errors: "StaticRNN"
    _enter = ("rnn", "step")     # the body is traced by ``with rnn.step():``

    def __init__(self, layer_type: str, name: str | None):
        self._helper = LayerHelper(layer_type, name)
        self._block: BlockDesc | None = None
        self._parent: BlockDesc | None = None
        self._result: list[Variable] | None = None
        self._loc = user_location()

    @property
    def _with(self) -> str:
        return f"'with {self._enter[0]}.{self._enter[1]}():'"

    @contextmanager
    def _tracing(self) -> Iterator[None]:
        """The body of the ``with``: traced into a new sub-block, then `_finish`ed."""
        if self._block is not None:
            raise error_at(ProgramDefinitionError,
                           f"a {self._kind} has one {self._enter[1]}(); make another "
                           f"{self._kind} for another network")
        trace = self._helper.trace
        self._parent = trace.block
        with trace.sub_block() as body:
            self._block = body
            yield
        self._finish(body)

    def _inside(self, what: str) -> BlockDesc:
        """The body's block, or an error: ``what`` is used outside it."""
        if self._block is None or self._result is not None or \
                self._helper.trace.block_idx != self._block.idx:
            raise error_at(ProgramDefinitionError, f"{self._kind}.{what} is used inside "
                                                   f"{self._with}")
        return self._block

    def __call__(self) -> Any:
        """The outputs: one var, or a list of them in the order they were given."""
        if self._result is None:
            raise error_at(ProgramDefinitionError, f"call the {self._kind} after its "
                                                   f"{self._with} block")
        return self._result[0] if len(self._result) == 1 else list(self._result)

    def _finish(self, body: BlockDesc) -> None:
        raise NotImplementedError
