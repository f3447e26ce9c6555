"""SVG from DOT text through the graphviz ``dot`` binary, when it is installed.

No Python graphviz package is needed: the text goes to ``dot -Tsvg`` on stdin and the SVG
comes back on stdout. Without the binary, `dot_to_svg` returns None so callers (the
notebook display objects) can fall back to showing the DOT text. When ``dot`` fails, the
`DotError` says what happened and how to fix it, so a notebook can show both.
"""
from __future__ import annotations

import shutil
import signal
import subprocess
from collections.abc import Sequence

__all__ = ["DotError", "dot_to_svg", "dots_to_svgs", "has_dot"]

DEFAULT_TIMEOUT = 30.0


class DotError(RuntimeError):
    """The graphviz ``dot`` binary rejected the text, crashed or timed out.

    ``reason`` is what happened (one line, with dot's own message where it gave one) and
    ``fix`` what to do about it; ``str(error)`` is both."""

    def __init__(self, reason: str, fix: str):
        super().__init__(f"{reason}\n{fix}")
        self.reason = reason
        self.fix = fix


def _dot_path() -> str | None:
    return shutil.which("dot")


def has_dot() -> bool:
    """Whether graphviz's ``dot`` is on the PATH."""
    return _dot_path() is not None


def _run(exe: str, text: str, timeout: float | None) -> str:
    try:
        proc = subprocess.run([exe, "-Tsvg"], input=text.encode("utf-8"),
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise DotError(
            f"graphviz dot ({exe}) did not finish within {timeout:g} s.",
            "On a fresh machine its first run builds the font cache, which can take that "
            "long: run `dot -V` (or `fc-cache -f`) once in a terminal and try again. A very "
            "large drawing lays out slowly: draw fewer methods (methods=...), leave out the "
            "training ops (forward_only=True), or allow more time (timeout=...).") from exc
    except OSError as exc:
        raise DotError(f"could not run graphviz dot ({exe}): {exc}.",
                       "Check that graphviz is installed and runs: `dot -V` in a terminal; "
                       "reinstall it with `apt install graphviz`, `brew install graphviz` "
                       "or `conda install graphviz`.") from exc
    err = proc.stderr.decode("utf-8", "replace").strip()
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        raise DotError(
            f"graphviz dot ({exe}) crashed ({name})" + (f": {err}" if err else "") + ".",
            "This is a bug in graphviz, not in your program. Another layout often avoids "
            "it: detail='ops' instead of the grouped drawing, or fewer methods "
            "(methods=...). Updating graphviz may fix it for good.")
    if proc.returncode != 0:
        raise DotError(
            f"graphviz dot ({exe}) failed with exit status {proc.returncode}:\n"
            f"{err or '(no message)'}",
            "If the message names a syntax error, save the DOT text (Graph.save('x.dot')) "
            "and report it; otherwise check the graphviz installation with `dot -V`.")
    return proc.stdout.decode("utf-8")


def dot_to_svg(dot_text: str, timeout: float | None = DEFAULT_TIMEOUT) -> str | None:
    """Lay ``dot_text`` out with ``dot -Tsvg`` and return the SVG document as text.

    Returns None when ``dot`` is not installed. Raises `DotError` when dot exits with an
    error, crashes or takes longer than ``timeout`` seconds (None: no limit).
    """
    exe = _dot_path()
    if exe is None:
        return None
    return _run(exe, dot_text, timeout)


def dots_to_svgs(dot_texts: Sequence[str], timeout: float | None = DEFAULT_TIMEOUT
                 ) -> list[str] | None:
    """Several drawings laid out by one run of ``dot`` (one process start instead of many):
    one SVG document per DOT text, in order. None without ``dot``."""
    exe = _dot_path()
    if exe is None:
        return None
    if not dot_texts:
        return []
    out = _run(exe, "".join(dot_texts), timeout)
    docs = ["<svg" + part.split("</svg>")[0] + "</svg>" for part in out.split("<svg")[1:]]
    if len(docs) != len(dot_texts):
        raise DotError(f"graphviz dot drew {len(docs)} of {len(dot_texts)} drawings.",
                       "Draw them one at a time with dot_to_svg to find the one it skipped.")
    return docs
