"""Golden files: a test's output compared with the file written when it was last meant to
change; ``FLUID_UPDATE_GOLDEN=1`` rewrites the files instead (then review the diff)."""
import os
from collections.abc import Callable


def golden_text(path: str, text: str) -> str:
    """The expected text at ``path``: ``text`` itself, written there first, when
    FLUID_UPDATE_GOLDEN is set."""
    if os.environ.get("FLUID_UPDATE_GOLDEN"):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    assert os.path.exists(path), f"missing {path}; create it with FLUID_UPDATE_GOLDEN=1"
    with open(path, encoding="utf-8") as f:
        return f.read()


def check_golden(path: str, text: str, what: str,
                 same: Callable[[str], object] = lambda t: t) -> None:
    """``text`` equals the golden file at ``path`` (compared as ``same`` sees them)."""
    expected = golden_text(path, text)
    assert same(text) == same(expected), (
        f"{what} differs from {path}; if the change is intended, rerun with "
        f"FLUID_UPDATE_GOLDEN=1 and review the diff")
