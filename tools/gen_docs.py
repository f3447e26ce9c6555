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
sys.path[:0] = [ROOT, os.path.join(ROOT, "extension")]

import fluid  # noqa: E402
import fluid_interactive.errors as errors  # noqa: E402

MODULES = ["layers", "optimizer", "initializer", "regularizer", "backward", "recordio"]


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
    lines += ["", "Errors: see [errors.md](errors.md).", ""]
    return "\n".join(lines)


def errors_page() -> str:
    lines = ["# Errors", "",
             "Generated from the code by `python tools/gen_docs.py`; do not edit by hand.", "",
             "Every error fluid_interactive raises on purpose is a `fluid.FluidError`. Each class",
             "also subclasses the builtin exception that describes it best, so `except ValueError`",
             "keeps working. Messages say what was wrong, where (your `file:line`), and how to",
             "fix it.", ""]
    for name, cls in inspect.getmembers(errors, inspect.isclass):
        if issubclass(cls, errors.FluidError):
            bases = ", ".join(b.__name__ for b in cls.__bases__)
            lines += [f"## `fluid.{name}` ({bases})", "", inspect.cleandoc(cls.__doc__ or ""), ""]
    return "\n".join(lines)


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
