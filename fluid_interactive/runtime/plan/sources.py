"""Generated source code: compiled from text, shown in tracebacks, released with its owner.

Generated functions register their text with `linecache` so tracebacks, `inspect` and
debuggers show the generated lines. The entry is removed when the object that owns the
code (a plan, an entry point) is collected, so a long notebook session that compiles
thousands of programs keeps no text of the ones it dropped.
"""
from __future__ import annotations

import linecache
import weakref
from itertools import count
from typing import Any

from ...ir.names import escape_unprintable

_counter = count()


def source_filename(tag: str) -> str:
    """A unique pseudo file name such as ``<fluid:FitALine.train_step:12>``; ``tag`` may
    hold names from a file, so it is escaped."""
    return f"<fluid:{escape_unprintable(tag)}:{next(_counter)}>"


def compile_source(source: str, filename: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """Run ``source`` (a module of definitions we generated) in ``namespace`` and register
    its text under ``filename``; `release_with` says when to drop the text."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def release_with(owner: Any, filename: str) -> None:
    """Drop ``filename``'s text from `linecache` when ``owner`` is collected."""
    weakref.finalize(owner, linecache.cache.pop, filename, None)
