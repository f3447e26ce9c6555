"""SVG from DOT text through the graphviz ``dot`` binary, when it is installed.

No Python graphviz package is needed: the text goes to ``dot -Tsvg`` on stdin and the SVG
comes back on stdout. Without the binary, `dot_to_svg` returns None so callers (the
notebook display objects) can fall back to showing the DOT text.
"""
from __future__ import annotations

import shutil
import subprocess
from typing import Optional

__all__ = ["DotError", "dot_to_svg", "has_dot"]

DEFAULT_TIMEOUT = 30.0


class DotError(RuntimeError):
    """The graphviz ``dot`` binary rejected the text, crashed or timed out."""


def _dot_path() -> Optional[str]:
    return shutil.which("dot")


def has_dot() -> bool:
    """Whether graphviz's ``dot`` is on the PATH."""
    return _dot_path() is not None


def dot_to_svg(dot_text: str, timeout: Optional[float] = DEFAULT_TIMEOUT) -> Optional[str]:
    """Lay ``dot_text`` out with ``dot -Tsvg`` and return the SVG document as text.

    Returns None when ``dot`` is not installed. Raises `DotError` (with dot's stderr) when
    dot exits with an error or takes longer than ``timeout`` seconds (None: no limit).
    """
    exe = _dot_path()
    if exe is None:
        return None
    try:
        proc = subprocess.run([exe, "-Tsvg"], input=dot_text.encode("utf-8"),
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise DotError(f"graphviz dot ({exe}) did not finish within {timeout} s; a very large "
                       f"graph may need collapse_grads=True or forward_only=True, or a longer "
                       f"timeout") from exc
    except OSError as exc:
        raise DotError(f"could not run graphviz dot ({exe}): {exc}") from exc
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip() or "(no message)"
        raise DotError(f"graphviz dot ({exe}) failed with exit status {proc.returncode}:\n{err}")
    return proc.stdout.decode("utf-8")
