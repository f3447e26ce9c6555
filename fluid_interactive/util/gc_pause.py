"""Pausing Python's cyclic garbage collector while a large program is built.

Tracing, planning and transpiling a program of thousands of ops allocate many objects that
all stay alive (records, dicts, lists). The collector's full passes, triggered by the
allocation count, walk every live object each time, so building a program gets
quadratic in its size (measured: transpiling an 800-layer MLP spent 55% of its time in
collections). Pausing it while building keeps the cost linear; once it runs again, its
own next passes collect whatever the build left behind.
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
    finally:
        gc.enable()
