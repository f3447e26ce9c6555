"""`Table`: rows under a header that print as aligned text and display as an HTML table
in a notebook (``%fluid vars``, ``%fluid programs``, ``prog.summary()``). Every cell is
HTML-escaped."""
from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["Table"]


class Table:
    """Rows under a header; prints as aligned text and displays as an HTML table.

    ``footer`` lines follow the rows (totals); rows whose index is in ``strong`` are bold in
    HTML (group headings)."""

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "",
                 align: str = "", *, footer: Sequence[str] = (), strong: Iterable[int] = ()):
        self.columns = list(columns)
        self.rows = [["" if v is None else str(v) for v in row] for row in rows]
        self.title = title
        self.footer = list(footer)
        self.strong = set(strong)
        # one letter per column: 'l' or 'r' (default: left for the first, right for numbers)
        self.align = align or "".join(
            "l" if i == 0 or not all(_numeric(r[i]) for r in self.rows if r[i]) else "r"
            for i in range(len(self.columns)))

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list[str]:
        i = self.columns.index(name)
        return [r[i] for r in self.rows]

    def __repr__(self) -> str:
        widths = [max([len(c)] + [len(r[i]) for r in self.rows])
                  for i, c in enumerate(self.columns)]

        def line(cells: Sequence[str]) -> str:
            return "  ".join(c.rjust(w) if a == "r" else c.ljust(w)
                             for c, w, a in zip(cells, widths, self.align)).rstrip()

        out = [self.title] if self.title else []
        out.append(line(self.columns))
        out.append("  ".join("-" * w for w in widths))
        out += [line(r) for r in self.rows]
        if not self.rows:
            out.append("(none)")
        if self.footer:
            out.append("  ".join("=" * w for w in widths))
            out += self.footer
        return "\n".join(out)

    def _repr_html_(self) -> str:
        style = "text-align:{};padding:2px 8px;font-family:monospace"
        head = "".join(f'<th style="{style.format("left" if a == "l" else "right")}">'
                       f"{html.escape(c)}</th>" for c, a in zip(self.columns, self.align))
        body = "".join(
            "<tr>" + "".join(f'<td style="{style.format("left" if a == "l" else "right")}'
                             f'{";font-weight:bold" if k in self.strong else ""}">'
                             f"{html.escape(v)}</td>" for v, a in zip(r, self.align)) + "</tr>"
            for k, r in enumerate(self.rows))
        caption = (f'<caption style="text-align:left;font-weight:bold">'
                   f"{html.escape(self.title)}</caption>") if self.title else ""
        empty = "" if self.rows else f'<tr><td colspan="{len(self.columns)}">(none)</td></tr>'
        foot = "".join(f'<tr><td colspan="{len(self.columns)}" style="padding:2px 8px">'
                       f"{html.escape(line)}</td></tr>" for line in self.footer)
        foot = f'<tfoot style="border-top:1px solid #999">{foot}</tfoot>' if foot else ""
        return (f'<table class="fluid-table">{caption}<thead><tr>{head}</tr></thead>'
                f"<tbody>{body}{empty}</tbody>{foot}</table>")


def _numeric(text: str) -> bool:
    text = text.replace(",", "").replace(" ", "")
    for unit in ("KiB", "MiB", "GiB", "B"):
        if text.endswith(unit):
            text = text[:-len(unit)]
            break
    try:
        float(text)
        return True
    except ValueError:
        return text in ("-", "nan", "inf", "-inf")
