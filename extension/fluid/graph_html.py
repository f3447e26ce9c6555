"""The HTML a notebook cell shows for a drawing.

* The SVG is inline and sized to its natural width, but never wider than the cell
  (``max-width: 100%``), so it fits any output area without horizontal scrolling.
* A header holds the title and the natural size. Where JavaScript runs (JupyterLab,
  Notebook 7, VS Code) it also gets zoom buttons (fit, smaller, larger, 1:1; a zoomed
  drawing scrolls inside its own box) and "open" (the SVG in a new browser tab); clicking a
  layer's box opens that layer's op-level drawing, and clicking a loop's box (in the
  drawing or in a body already opened) opens its body, level by level. Where no
  JavaScript runs (a notebook rendered to HTML on a website) the buttons stay hidden and
  the drawing is a static, fitted SVG.
* Under it, what the boxes open into (the layers drawn op by op, the bodies of loops and
  branches), each in a ``<details>`` element: expandable with or without JavaScript.

Every piece of text from a program (names, titles, error messages) is HTML-escaped here;
the SVG comes from graphviz, which escapes its own text.
"""
from __future__ import annotations

import html
import itertools
import re
from collections.abc import Sequence

__all__ = ["graph_html", "error_html", "svg_size", "fit_svg"]

_ids = itertools.count()
_MUTED = "#767676"
_ROOT = re.compile(r"<svg\b[^>]*>")


def _length(value: str) -> float:
    """A CSS length of the root ``<svg>`` in pixels (graphviz writes points)."""
    m = re.fullmatch(r"\s*([\d.]+)\s*(pt|px)?\s*", value or "")
    if m is None:
        return 0.0
    return float(m.group(1)) * (4 / 3 if m.group(2) == "pt" else 1.0)


def svg_size(svg: str) -> tuple[float, float]:
    """(width, height) in CSS pixels at 100% of the root element of ``svg``."""
    root = _ROOT.search(svg)
    if root is None:
        return 0.0, 0.0
    attrs = dict(re.findall(r'(\w+)="([^"]*)"', root.group(0)))
    return _length(attrs.get("width", "")), _length(attrs.get("height", ""))


def fit_svg(svg: str, css_class: str = "fluid-graph-svg") -> str:
    """``svg`` sized in pixels at its natural size and shrunk to the width of its box."""
    width, height = svg_size(svg)
    root = _ROOT.search(svg)
    if root is None:
        return svg
    tag = re.sub(r'\s(width|height|style|class)="[^"]*"', "", root.group(0))
    tag = tag[:-1].rstrip("/") + (
        f' width="{width:.0f}" height="{height:.0f}" class="{css_class}" '
        f'style="max-width:100%;height:auto;display:block">')
    return svg[:root.start()] + tag + svg[root.end():]


_SCRIPT = """<script>
(function () {
  var root = document.getElementById("%(id)s");
  if (!root || root.getAttribute("data-ready")) return;
  root.setAttribute("data-ready", "1");
  var view = root.querySelector(".fluid-graph-view"), svg = view.querySelector("svg");
  var controls = root.querySelector(".fluid-graph-controls");
  var shown = root.querySelector(".fluid-graph-zoom");
  var natural = parseFloat(svg.getAttribute("width")), zoom = 0;
  function fitScale() { return Math.min(1, view.clientWidth / natural); }
  function apply() {
    if (zoom === 0) {
      svg.style.maxWidth = "100%%"; svg.style.width = ""; view.style.maxHeight = "";
    } else {
      svg.style.maxWidth = "none"; svg.style.width = (natural * zoom) + "px";
      view.style.maxHeight = "85vh";
    }
    shown.textContent = Math.round(100 * (zoom || fitScale())) + "%%";
  }
  controls.hidden = false;
  controls.addEventListener("click", function (ev) {
    var act = ev.target.getAttribute && ev.target.getAttribute("data-act");
    if (!act) return;
    if (act === "open") {
      var blob = new Blob([svg.outerHTML], {type: "image/svg+xml"});
      window.open(URL.createObjectURL(blob), "_blank");
      return;
    }
    var z = zoom || fitScale();
    zoom = act === "fit" ? 0 : act === "full" ? 1 : act === "in" ? z * 1.25 : z / 1.25;
    apply();
  });
  var layers = {};
  root.querySelectorAll(".fluid-graph-layer").forEach(function (d) {
    layers[d.getAttribute("data-node")] = d;
  });
  // every drawing: the cell's, and those opened under it (a loop's body holds boxes too)
  root.querySelectorAll("svg g.node").forEach(function (g) {
    var t = g.querySelector("title");
    if (t && layers[t.textContent]) g.style.cursor = "pointer";
  });
  root.addEventListener("click", function (ev) {
    var g = ev.target.closest && ev.target.closest("g.node");
    var t = g && g.querySelector("title");
    var layer = t && layers[t.textContent];
    if (!layer) return;
    layer.parentElement.open = true;
    layer.open = true;
    layer.scrollIntoView({block: "nearest"});
  });
  apply();
})();
</script>"""


def _head(title: str, width: float, height: float, interactive: bool) -> str:
    parts = []
    if title:
        parts.append(f'<span class="fluid-graph-title" style="font-weight:bold">'
                     f"{html.escape(title)}</span>")
    parts.append(f'<span class="fluid-graph-size" style="color:{_MUTED}">'
                 f"{width:,.0f} &#215; {height:,.0f} px</span>")
    if interactive:
        buttons = "".join(
            f'<button type="button" data-act="{act}" title="{tip}" '
            f'style="font:12px sans-serif;padding:0 6px">{text}</button>'
            for act, text, tip in (("fit", "fit", "fit the width of the cell"),
                                   ("out", "&#8722;", "smaller"), ("in", "+", "larger"),
                                   ("full", "1:1", "full size"),
                                   ("open", "open &#8599;", "open the drawing in a new tab")))
        parts.append(f'<span class="fluid-graph-controls" hidden>{buttons} '
                     f'<span class="fluid-graph-zoom" style="color:{_MUTED}"></span></span>')
    return ('<div class="fluid-graph-head" style="display:flex;flex-wrap:wrap;'
            'align-items:center;gap:4px 10px;font:13px/1.5 sans-serif;margin:0 0 4px">'
            + "".join(parts) + "</div>")


def _layers(layers: Sequence[tuple[str, str, str]], title: str) -> str:
    if not layers:
        return ""
    items = "".join(
        f'<details class="fluid-graph-layer" data-node="{html.escape(node)}" '
        f'style="margin:2px 0 2px 12px"><summary>{html.escape(label)}</summary>'
        f'<div style="max-width:100%;overflow:auto">{fit_svg(svg, "fluid-graph-layer-svg")}'
        f"</div></details>"
        for node, label, svg in layers if svg)
    return (f'<details class="fluid-graph-layers" style="font:13px/1.5 sans-serif;'
            f'margin-top:4px"><summary>{html.escape(title)} ({len(layers)})</summary>'
            f"{items}</details>")


def graph_html(svg: str, title: str = "", layers: Sequence[tuple[str, str, str]] = (),
               layers_title: str = "the layers op by op") -> str:
    """A drawing for a notebook cell: header, fitted SVG, what its boxes open into
    (``layers``, under ``layers_title``)."""
    dom_id = f"fluid-graph-{next(_ids)}"
    width, height = svg_size(svg)
    return (f'<div class="fluid-graph" id="{dom_id}" style="max-width:100%">'
            + _head(title, width, height, interactive=True)
            + '<div class="fluid-graph-view" style="max-width:100%;overflow:auto">'
            + fit_svg(svg) + "</div>" + _layers(layers, layers_title)
            + _SCRIPT % {"id": dom_id} + "</div>")


def error_html(title: str, reason: str, fix: str, text: str) -> str:
    """What a cell shows when graphviz failed: why, how to fix it, and the text form."""
    head = f"{html.escape(title)}: the" if title else "The"
    return ('<div class="fluid-graph fluid-graph-error" style="border-left:4px solid '
            '#d62728;background:#fdf3f3;padding:6px 10px;font:13px/1.5 sans-serif">'
            f"<div><b>{head} graph could not be drawn.</b></div>"
            f'<div class="fluid-graph-error-reason" style="white-space:pre-wrap">'
            f"{html.escape(reason)}</div>"
            f'<div class="fluid-graph-error-fix"><b>How to fix it:</b> {html.escape(fix)}</div>'
            f"<details><summary>the program as text</summary>"
            f'<pre style="font-size:12px">{html.escape(text)}</pre></details></div>')
