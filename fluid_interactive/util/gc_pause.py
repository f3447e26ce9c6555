"""Pausing Python's cyclic garbage collector while a large program is built.

Tracing, planning and transpiling a program of thousands of ops allocate many objects that
all stay alive (records, dicts, lists). The collector's full passes, triggered by the
allocation count, walk every live object each time, so building a program gets
quadratic in its size (measured: transpiling an 800-layer MLP spent 55% of its time in
collections). Pausing it while building keeps the cost linear.

What a block builds is long-lived by construction, so when the block succeeds every
tracked object goes straight to the oldest generation (``gc.freeze`` then ``gc.unfreeze``:
two list splices, no walk). Merely re-enabling the collector would make its next young
collection walk all of it at once, out of cache: after transpiling an 800-layer MLP that
walk took 150-190 ms of about a second, 5 µs per op against 2 µs per op at 10 layers,
the largest part of the transpiler's cost growing faster than the program. The objects
are still examined by full collections, as all old ones are. Young objects made before
the block are promoted too, which only means a cycle among them is freed by the next full
collection instead of a young one. When something is frozen (CPython 3.12 freezes some
objects at startup), ``gc.unfreeze`` would thaw it, so the block's objects stay young.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Suspend automatic collection in this block (nested uses are free)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    except BaseException:
        gc.enable()   # what the block built may be garbage now: collect it as usual
        raise
    # unfreeze thaws everything frozen, not only what this freeze moved.
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
    gc.enable()
