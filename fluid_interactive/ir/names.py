"""What text a program may carry, and how to show text that came from a file.

Names, attr keys and source locations travel in program JSON and checkpoints, so they are
untrusted input. They end up in generated Python (as comments), in error messages and in
drawings, where a line break or a control character could end a comment, forge a line or
hide a part of the text. A program may therefore hold only *printable* text in them
(`str.isprintable`: no control, format, separator or unassigned characters other than the
ASCII space); the verifier rejects anything else, and tracing refuses such a name at the
user's line.
"""
from __future__ import annotations

from collections.abc import Callable


def unprintable(text: str) -> str | None:
    """A description of the first character of ``text`` that a program may not hold
    (e.g. ``"'\\n' at position 3"``), or None when all of it is printable."""
    if text.isprintable():
        return None
    for i, ch in enumerate(text):
        if not ch.isprintable():
            return f"{ch!r} (U+{ord(ch):04X}) at position {i}"
    return None  # pragma: no cover - isprintable() disagreed with itself


def name_problem(name: object, what: str = "name") -> str | None:
    """Why ``name`` cannot be a name in a program (or None if it can)."""
    if not isinstance(name, str):
        return f"{what} {name!r} is a {type(name).__name__}, not a string"
    if not name:
        return f"{what} is empty"
    bad = unprintable(name)
    if bad is not None:
        return (f"{what} {printable(name)} contains the control character {bad}; names "
                f"may hold printable characters only")
    return None


def printable(text: str, limit: int = 200) -> str:
    """``text`` quoted, with every non-printable character escaped and long text cut:
    safe to put into a message, a comment of generated code or a drawing."""
    shown = text if len(text) <= limit else text[:limit] + "..."
    return repr(shown)


def escape_unprintable(text: str) -> str:
    """``text`` with only its non-printable characters escaped (``\\n``, ``\\x00``,
    ``\\u2028``): printable text stays as it is, so a comment reads naturally."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class UniqueNameGenerator:
    """Names ``<prefix><key>_<n>``, counting per key from 0: ``fc_0``, ``fc_1``, ``mlp/fc_0``."""

    def __init__(self, prefix: str = ""):
        self.prefix = prefix
        self.counters: dict[str, int] = {}

    def generate(self, key: str) -> str:
        n = self.counters.get(key, 0)
        self.counters[key] = n + 1
        return f"{self.prefix}{key}_{n}"


def fresh_name(base: str, taken: Callable[[str], bool], sep: str = "@", start: int = 1) -> str:
    """``base`` if ``taken(base)`` is false, else ``base<sep><k>`` for the first ``k`` from
    ``start`` that is not taken: the one way a pass, the planner or the exporter makes a
    name nothing else has (``x@GRAD@1``, ``fc_0_tmp_2``, ``w_0#2``)."""
    if not taken(base):
        return base
    k = start
    while taken(f"{base}{sep}{k}"):
        k += 1
    return f"{base}{sep}{k}"
