"""Regenerate the reference pages built from the code: docs/api.md (every public name of
`fluid` with its signature and docstring summary) and docs/errors.md (the error classes).

    python tools/gen_docs.py          # rewrite the pages
    python tools/gen_docs.py --check  # exit 1 when a page is stale (the test suite runs it)
"""
from __future__ import annotations

import inspect
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "extension"),
                os.path.dirname(os.path.abspath(__file__))]

from paddle18 import GROUPS, LEFT_OUT, OUT_OF_SCOPE  # noqa: E402

import fluid  # noqa: E402
import fluid_interactive.errors as errors  # noqa: E402

# every public module of `fluid` gets a section: derived, so a new one is never left out
MODULES = [n for n in sorted(fluid.__all__) if inspect.ismodule(getattr(fluid, n))]


def _summary(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


def _signature(obj) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return ""


def _entry(prefix: str, name: str, obj) -> str:
    if inspect.ismodule(obj):
        return f"- `{prefix}{name}` — module, see below"
    kind = "class " if inspect.isclass(obj) else ""
    return f"- `{kind}{prefix}{name}{_signature(obj)}` — {_summary(obj)}".rstrip(" —")


def _public(module) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_")
                 and getattr(v, "__module__", module.__name__) == module.__name__
                 and (inspect.isfunction(v) or inspect.isclass(v))]
    return sorted(names)


def api_page() -> str:
    lines = ["# API reference", "",
             "Generated from the code by `python tools/gen_docs.py`; do not edit by hand.", "",
             "## `fluid`", ""]
    for name in sorted(fluid.__all__):
        obj = getattr(fluid, name)
        if name.startswith("__") or (inspect.isclass(obj) and issubclass(obj, Exception)):
            continue
        lines.append(_entry("fluid.", name, obj))
    for mod_name in MODULES:
        module = getattr(fluid, mod_name, None)
        if module is None:
            continue
        lines += ["", f"## `fluid.{mod_name}`", ""]
        lines += [_entry(f"fluid.{mod_name}.", n, getattr(module, n)) for n in _public(module)
                  if hasattr(module, n)]
    lines += ["", CONCURRENCY, "", *paddle_section(), "", "Errors: see [errors.md](errors.md).", ""]
    return "\n".join(lines)


def present(module: str, name: str) -> bool:
    """Whether ``fluid.<module>.<name>`` (``fluid.<name>`` for module '') exists."""
    owner = getattr(fluid, module, None) if module else fluid
    return owner is not None and hasattr(owner, name)


def paddle_coverage() -> tuple[int, int]:
    """(present, in scope) over every group of Paddle 1.8's names."""
    counted = [present(m, n) for _, m, names in GROUPS for n in names if n not in OUT_OF_SCOPE]
    return sum(counted), len(counted)


def paddle_section() -> list[str]:
    have, total = paddle_coverage()
    lines = ["## Paddle 1.8's names", "",
             f"Every public name of Paddle 1.8's `fluid.layers`, `optimizer`, `clip`, `metrics`, "
             f"`nets`, `initializer`, `regularizer` and `input.py`: {have} of the {total} in "
             f"scope are here ({100 * have / total:.1f} %). Each name absent says why.", "",
             "| Paddle 1.8 | here | left out | out of scope |", "|---|---|---|---|"]
    for title, module, names in GROUPS:
        here = sum(present(module, n) for n in names)
        out = sum(n in OUT_OF_SCOPE and not present(module, n) for n in names)
        lines.append(f"| {title} | {here} of {len(names)} | {len(names) - here - out} | {out} |")
    for title, module, names in GROUPS:
        prefix = f"fluid.{module}." if module else "fluid."
        lines += ["", f"### {title}", "",
                  "Here: " + (", ".join(f"`{n}`" for n in names if present(module, n))
                              or "none"), ""]
        for n in names:
            if not present(module, n):
                why = OUT_OF_SCOPE.get(n) or LEFT_OUT.get(n) or "not yet written"
                lines.append(f"- `{prefix}{n}`: {why}")
    return lines


CONCURRENCY = """## Concurrency

One compiled program may be called from several threads, e.g. training in a background
thread while the notebook calls `infer`:

- A method that **changes state** (it writes a parameter or other persistable var, takes
  batches from a reader, or draws random numbers) runs under its program's lock. N
  concurrent calls give exactly the results of some sequential order of the same N calls,
  and every reader sample goes to exactly one call. `prog.<method>.changes_state` says
  which kind a method is.
- A method that **changes nothing** (`infer`, `evaluate` without a reader) runs without a
  lock: each concurrent call gets its own instance of the plan (buffers and kernel state),
  and reads every parameter it needs in one step, so its results are identical to a
  sequential call's and it never mixes parameters of two training steps.
- `set_var`, `set_parameters`, `reset_readers`, `close`, `rewind` and `recompile` (and so a
  class redefined in a notebook) take the lock too, so they land between steps;
  `parameters()` and `save` read one consistent moment of the scope.
- The cost: a state-changing call takes an uncontended lock (well under a microsecond);
  a concurrent call of a read-only method builds one more plan instance the first time two
  calls overlap.

Arrays in the scope are never changed in place: a step puts new arrays in and commits them
in one update, which is what makes the rules above hold. Programs are independent: calls to
two compiled programs never wait for each other."""


def errors_page() -> str:
    lines = ["# Errors", "",
             "Generated from the code by `python tools/gen_docs.py`; do not edit by hand.", "",
             "Every error fluid_interactive raises on purpose is a `fluid.FluidError`. Each class",
             "also subclasses the builtin exception that describes it best, so `except ValueError`",
             "keeps working. Messages say what was wrong, where (your `file:line`), and how to",
             "fix it.", ""]
    lines += _classes(errors.FluidError, "##")
    lines += ["## Warnings", "",
              "A `fluid.FluidWarning` says that something runs but probably not as you meant it.",
              "It names your line; `warnings.filterwarnings('error', category=fluid.FluidWarning)`",
              "makes it an error.", ""]
    lines += _classes(errors.FluidWarning, "###")
    return "\n".join(lines)


def _classes(base: type, heading: str) -> list[str]:
    lines = []
    for name, cls in inspect.getmembers(errors, inspect.isclass):
        if issubclass(cls, base):
            bases = ", ".join(b.__name__ for b in cls.__bases__)
            lines += [f"{heading} `fluid.{name}` ({bases})", "",
                      inspect.cleandoc(cls.__doc__ or ""), ""]
    return lines


PAGES = {"docs/api.md": api_page, "docs/errors.md": errors_page}


def main(check: bool) -> int:
    stale = []
    for rel, make in PAGES.items():
        path = os.path.join(ROOT, rel)
        text = make()
        current = None
        if os.path.exists(path):
            with open(path) as f:
                current = f.read()
        if current != text:
            stale.append(rel)
            if not check:
                with open(path, "w") as f:
                    f.write(text)
    if check and stale:
        print("stale: " + ", ".join(stale) + " (run python tools/gen_docs.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv))
