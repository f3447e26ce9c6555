"""`fluid.heatmap`: a 2-D array as an SVG with axes, ticks, a colour scale and outlined
columns, coloured on a scale as wide as the values (small values are not pale)."""
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import fluid
from fluid.heatmap import _colour, _ticks

SVG = "{http://www.w3.org/2000/svg}"


def _parse(h):
    return ET.fromstring(h.svg)


def test_cells_axes_scale_and_marks():
    values = np.linspace(-0.2, 0.1, 64 * 20).reshape(64, 20)
    h = fluid.heatmap(values, x_label="step", y_label="hidden unit", marked=[3, 14],
                      title="hidden state")
    root = _parse(h)
    rects = root.findall(f"{SVG}rect")
    assert sum(r.get("class") == "cell" for r in rects) == 64 * 20
    assert [r.get("x") for r in rects if r.get("class") == "mark"] == \
        [f"{58 + 3 * 28:.1f}", f"{58 + 14 * 28:.1f}"]
    texts = {t.get("class"): [] for t in root.findall(f"{SVG}text")}
    for t in root.findall(f"{SVG}text"):
        texts[t.get("class")].append(t.text)
    assert texts["axis"] == ["step", "hidden unit"] and texts[None] == ["hidden state"]
    ticks = texts["tick"]
    assert ticks[:10] == [str(k) for k in range(0, 20, 2)]          # x: every 2nd step
    assert ticks[10:] == [str(k) for k in range(0, 64, 10)]          # y: every 10th unit
    assert texts["scale-label"] == ["0.2", "0", "-0.2"]               # the largest magnitude
    assert h.limit == pytest.approx(0.2)
    # the most negative value takes the scale's full blue, not a pale tint of it
    first = next(r for r in rects if r.get("class") == "cell")
    assert first.get("fill") == _colour(-1.0) == "#2166ac"
    assert re.search(r"<title>\[0, 0\] = -0.2</title>", h.svg)


def test_the_scale_is_white_at_zero_and_symmetric():
    assert _colour(0.0) == "#f7f7f7" and _colour(1.0) == "#b2182b"
    assert _colour(2.0) == _colour(1.0)                        # clipped at the limit
    h = fluid.heatmap(np.array([[0.0, 0.5], [-1.0, 3.0]]), limit=1.0)
    fills = [r.get("fill") for r in _parse(h).findall(f"{SVG}rect") if r.get("class") == "cell"]
    assert fills == [_colour(0.0), _colour(0.5), _colour(-1.0), _colour(1.0)]


def test_ticks_stay_few():
    assert _ticks(5) == [0, 1, 2, 3, 4]
    assert _ticks(64) == list(range(0, 64, 10))
    assert _ticks(400) == list(range(0, 400, 50))


def test_shows_in_jupyter_and_saves(tmp_path):
    h = fluid.heatmap(np.eye(3))
    assert h._repr_svg_() == h.svg and h.svg.startswith("<svg")
    h.save(str(tmp_path / "h.svg"))
    assert (tmp_path / "h.svg").read_text() == h.svg
    assert "±1" in repr(h)


@pytest.mark.parametrize("bad", [np.zeros(3), np.zeros((0, 2)), np.zeros((2, 2, 2))])
def test_wants_a_non_empty_2d_array(bad):
    with pytest.raises(ValueError, match="non-empty 2-D array"):
        fluid.heatmap(bad)


def test_labels_are_escaped():
    h = fluid.heatmap(np.ones((2, 2)), x_label="<b>&", title="a < b")
    assert "&lt;b&gt;&amp;" in h.svg and "a &lt; b" in h.svg
    _parse(h)     # well-formed
