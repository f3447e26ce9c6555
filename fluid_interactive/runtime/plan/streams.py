"""The generators of a compiled method's random ops, one per op, kept for the method's
whole life.

Every plan of the method (one per feed signature, the instances taking turns, the plan
that also returns watched vars) and every sub-block function it calls draws from the same
generator for a given op, so a method draws one stream per op whatever shapes it is
called with: a last short batch, a plan evicted and built again or watching switched on
continues the stream instead of starting it again from the seed.

`tell` and `seek` take and put back the generators' states, as a reader's position is: the
program's history records the states before each call of a method that draws, and a rewind
puts them back, so the calls after a rewind draw what the rewound calls drew.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .analysis import op_rng

#: A generator's key: (block index, op index in the block as written)
StreamKey = tuple[int, int]


class RandomStreams:
    """The generators of one method's random ops, made on first use from the program's
    seed (`op_rng`: the same seed gives the same streams)."""

    __slots__ = ("seed", "_generators")

    def __init__(self, seed: int | None):
        self.seed = seed
        self._generators: dict[StreamKey, np.random.Generator] = {}

    def get(self, block: int, index: int) -> np.random.Generator:
        key = (block, index)
        gen = self._generators.get(key)
        if gen is None:
            gen = self._generators[key] = op_rng(self.seed, block, index, np)
        return gen

    def rng_for(self, block: int) -> Callable[[int], Any]:
        """``rng_for(op index)`` for the ops of ``block``; index -1 (the generator constant
        folding is given, which no random op uses) is not kept."""
        def rng(index: int) -> Any:
            return op_rng(self.seed, block, index, np) if index < 0 else self.get(block, index)
        return rng

    def tell(self) -> dict[StreamKey, Mapping[str, Any]]:
        """The state of every generator made so far."""
        return {key: gen.bit_generator.state for key, gen in self._generators.items()}

    def seek(self, states: Mapping[StreamKey, Mapping[str, Any]]) -> None:
        """Put back the states ``tell`` gave; a generator made after that starts its stream
        again, as it did when it was made. Kernels keep their generator objects, so the
        states are set on those objects."""
        for key, gen in self._generators.items():
            state = states.get(key)
            if state is None:
                state = op_rng(self.seed, *key, np).bit_generator.state
            gen.bit_generator.state = state

    def __len__(self) -> int:
        return len(self._generators)
