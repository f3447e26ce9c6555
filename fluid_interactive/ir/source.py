"""Finding the user's line: the first frame of the live stack outside our own packages."""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Optional

from .records import SourceLoc

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_excluded: list[str] = [_PACKAGE_ROOT + os.sep]


def exclude_path(path: str) -> None:
    """Frames under ``path`` are never reported as the user's line (the Jupyter extension
    registers its own folder here)."""
    prefix = os.path.abspath(path) + os.sep
    if prefix not in _excluded:
        _excluded.append(prefix)


# The standard library's context-manager plumbing sits between a `with fluid.var_scope()`
# line and our code: it is never the user's line either.
_excluded_files = {os.path.abspath(contextlib.__file__)}


def is_internal(filename: str) -> bool:
    return (any(filename.startswith(p) for p in _excluded) or filename.startswith("<frozen")
            or filename in _excluded_files)


def user_location(skip: int = 1) -> Optional[SourceLoc]:
    """The innermost frame of the caller's stack that is not ours."""
    frame = sys._getframe(skip)
    while frame is not None:
        code = frame.f_code
        if not is_internal(os.path.abspath(code.co_filename) if not code.co_filename.startswith("<")
                           else code.co_filename):
            return SourceLoc(code.co_filename, frame.f_lineno, code.co_name)
        frame = frame.f_back
    return None
