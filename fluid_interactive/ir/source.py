"""Finding the user's line (the first frame of the live stack outside our own packages), and
printing it.

Every place that prints where an op was recorded (the text form, graph tooltips, error
messages) goes through `format_location`. A file is shown as ``fit.py:21`` (or its full path
in errors). A front end whose code lives in generated files can say how to name them:
the Jupyter extension registers a *file labeller* that names a cell's temporary file
``Cell In[14]``, so locations read ``Cell In[14], line 12`` as IPython's own tracebacks do.
The engine itself never imports IPython.
"""
from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Callable
from types import FrameType

from .records import SourceLoc

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_excluded: list[str] = [_PACKAGE_ROOT + os.sep]

#: file name -> a label such as 'Cell In[14]', or None when the labeller does not know it
FileLabeller = Callable[[str], str | None]
_labellers: list[FileLabeller] = []


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


def _is_ours(frame: FrameType) -> bool:
    name = frame.f_code.co_filename
    return is_internal(name if name.startswith("<") else os.path.abspath(name))


def user_location(skip: int = 1) -> SourceLoc | None:
    """The innermost frame of the caller's stack that is not ours."""
    frame: FrameType | None = sys._getframe(skip)
    while frame is not None:
        if not _is_ours(frame):
            return SourceLoc(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return None


def warn_at_user(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the user's line (the frame `user_location` finds),
    so that the warning names it and the warning filters' once-per-line rule applies
    there, however deep in our code it is raised."""
    frame: FrameType | None = sys._getframe(1)
    level = 2
    while frame is not None and _is_ours(frame):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level if frame is not None else 2)


# --- printing locations ------------------------------------------------------------------------

def add_file_labeller(labeller: FileLabeller) -> None:
    """Ask ``labeller(filename)`` first when printing a location in that file; it returns a
    label (``'Cell In[14]'``) or None. Added once however often it is called."""
    if labeller not in _labellers:
        _labellers.insert(0, labeller)


def remove_file_labeller(labeller: FileLabeller) -> None:
    if labeller in _labellers:
        _labellers.remove(labeller)


def file_label(filename: str) -> str | None:
    """The label a registered labeller gives ``filename``, or None."""
    for labeller in list(_labellers):
        try:
            label = labeller(filename)
        except Exception:   # a broken labeller must never hide an error message
            label = None
        if label:
            return label
    return None


def format_location(loc: SourceLoc | None, *, short: bool = False,
                    function: bool = False) -> str:
    """``'fit.py:21'`` (``short``: the file's base name, else its full path), or
    ``'Cell In[14], line 12'`` for a file a labeller knows; ``''`` for no location.
    ``function`` adds ``' (in f())'``."""
    if loc is None:
        return ""
    label = file_label(loc.file)
    if label is not None:
        text = f"{label}, line {loc.line}"
    else:
        text = f"{os.path.basename(loc.file) if short else loc.file}:{loc.line}"
    if function and loc.function and not loc.function.startswith("<"):
        text += f" (in {loc.function}())"
    return text
