"""Paddle 1.8's public names (tools/paddle18.py) against `fluid`: at least 95 % of those
in scope are here, every absent one has its reason, and the lists of reasons name only
Paddle names that are really absent (a name added later leaves its reason behind)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from paddle18 import GROUPS, LEFT_OUT, OUT_OF_SCOPE  # noqa: E402

import fluid  # noqa: E402


def _present(module: str, name: str) -> bool:
    owner = getattr(fluid, module, None) if module else fluid
    return owner is not None and hasattr(owner, name)


def _names() -> list[tuple[str, str]]:
    return [(module, name) for _, module, names in GROUPS for name in names]


def test_at_least_95_percent_of_paddles_names_are_here():
    in_scope = [(m, n) for m, n in _names() if n not in OUT_OF_SCOPE]
    here = [(m, n) for m, n in in_scope if _present(m, n)]
    assert len(here) >= 0.95 * len(in_scope), (len(here), len(in_scope))


def test_every_absent_name_says_why():
    absent = [n for m, n in _names() if not _present(m, n)]
    unexplained = [n for n in absent if n not in LEFT_OUT and n not in OUT_OF_SCOPE]
    assert unexplained == [], "absent without a reason in tools/paddle18.py"
    assert all(len(why) > 30 for why in {**LEFT_OUT, **OUT_OF_SCOPE}.values())


def test_the_reasons_name_only_absent_paddle_names():
    listed = {n for _, n in _names()}
    present = {n for m, n in _names() if _present(m, n)}
    stale = sorted(n for n in LEFT_OUT if n not in listed or n in present)
    assert stale == [], "LEFT_OUT names a name that is here now (or no Paddle name)"
    assert set(OUT_OF_SCOPE) <= listed
