"""docs/export.md's table of every op type is current: each registered op (gradients
aside) is listed once, under "Every op type" exactly when it has an export rule and under
"Not exported, and why" (with a reason) otherwise."""
from __future__ import annotations

import os
import re

from fluid_interactive.onnx import EXPORT_RULES
from fluid_interactive.ops.registry import registered_ops

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "docs", "export.md")


def _rows(section: str) -> dict[str, str]:
    with open(DOC) as f:
        text = f.read().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9_]+)` \| (.+) \|$", text, re.M)
    names = [name for name, _ in rows]
    assert len(names) == len(set(names)), f"listed twice under {section!r}"
    return dict(rows)


def test_every_op_type_is_in_the_table_once_with_its_export_or_a_reason():
    ops = {t for t in registered_ops() if not t.endswith("_grad")}
    exported, refused = _rows("Every op type"), _rows("Not exported, and why")
    assert not set(exported) & set(refused)
    assert sorted(ops - set(exported) - set(refused)) == [], "ops missing from the table"
    assert sorted(set(exported) - set(EXPORT_RULES)) == [], "listed as exported, no rule"
    assert sorted(set(refused) & set(EXPORT_RULES)) == [], "listed as refused, has a rule"
    assert all(len(why) > 20 for why in refused.values())
