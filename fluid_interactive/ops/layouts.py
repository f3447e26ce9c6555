"""Memory layouts of 4-D image tensors, and what a spec says about the layouts its kernel
runs in (`LayoutRule`, the value of `OpSpec.layout`).

A program is written, drawn and exported in NCHW, as Paddle's ops are. The plan pass
`passes.layout.choose_layouts` may run a chain of ops in another layout when that is
faster for their kernels, converting only at the chain's ends (``transfer_layout``). The
layouts a kernel may run in besides NCHW:

``CHWN`` batch innermost: what the im2col GEMMs produce ([O, OH*OW*N] = K @ cols), so a
    convolution needs no transposing copy on either side, and im2col, col2im and pooling
    move runs of N (or OW*N) contiguous values instead of strided ones.

Each layout is named by the NCHW dims in its order, so ``LAYOUT_AXES["CHWN"] == (1, 2, 3,
0)``: dim i of a CHWN array is NCHW dim ``(1, 2, 3, 0)[i]``.

A user may also write images channel-last, as Paddle's ``data_format='NHWC'`` (and
``'NDHWC'`` for volumes, whose channel-first form is ``'NCDHW'``). Those are the op's own
layout, chosen when it was written: the plan pass leaves such an op alone (it converts
only ops whose layout attr says NCHW), and the kernels read the arrays channel-last
through strided views of them in channel-first order (`channel_first_view`).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NCHW = "NCHW"
CHWN = "CHWN"
NHWC = "NHWC"
NCDHW = "NCDHW"
NDHWC = "NDHWC"

#: What moving one value between layouts costs (a transposing copy), in ns, on NumPy: the
#: price of each conversion at a chain's ends, weighed against its ops' gains.
TRANSFER_NS = 1.5

#: layout -> the channel-first dims (NCHW, or NCDHW for volumes) in its order
LAYOUT_AXES: dict[str, tuple[int, ...]] = {
    NCHW: (0, 1, 2, 3), CHWN: (1, 2, 3, 0), NHWC: (0, 2, 3, 1),
    NCDHW: (0, 1, 2, 3, 4), NDHWC: (0, 2, 3, 4, 1)}

#: The layouts a user writes images in with Paddle's ``data_format``: channel-first
#: (Paddle's default) and channel-last, by spatial rank.
USER_LAYOUTS: dict[int, tuple[str, str]] = {2: (NCHW, NHWC), 3: (NCDHW, NDHWC)}


def is_channel_last(layout: str) -> bool:
    return layout in (NHWC, NDHWC)


def to_layout(shape: Sequence[int], layout: str) -> tuple[int, ...]:
    """A channel-first shape in ``layout``'s dim order."""
    return tuple(shape[d] for d in LAYOUT_AXES[layout])


def from_layout(shape: Sequence[int], layout: str) -> tuple[int, ...]:
    """A shape in ``layout``'s dim order, back in channel-first order."""
    out = [0] * len(shape)
    for i, d in enumerate(LAYOUT_AXES[layout]):
        out[d] = shape[i]
    return tuple(out)


def channel_first_view(a: Any, layout: str) -> Any:
    """Array ``a`` (in ``layout``) as a view in channel-first order."""
    axes = LAYOUT_AXES[layout]
    if axes == tuple(range(len(axes))):
        return a
    return a.transpose(tuple(axes.index(d) for d in range(len(axes))))


def axis_of(layout: str, nchw_dim: int) -> int:
    """Where NCHW dim ``nchw_dim`` (0 batch, 1 channel, 2 height, 3 width) sits in
    ``layout``."""
    return LAYOUT_AXES[layout].index(nchw_dim)


def permutation(src: str, dst: str) -> tuple[int, ...]:
    """The ``transpose`` axes taking a ``src`` array to ``dst``."""
    return tuple(axis_of(src, d) for d in LAYOUT_AXES[dst])


#: What Paddle's ops also accept as a data_format for images of any spatial rank.
_ALIASES = {"AnyLayout": 0, NCHW: 0, NCDHW: 0, NHWC: 1, NDHWC: 1}


def image_layout(ctx: Any, name: str, rank: int, internal: Sequence[str] = ()) -> str:
    """The user layout an image op's attr ``name`` says, for images of ``rank`` spatial
    dims: Paddle's ops take NCHW and NHWC (and AnyLayout, channel-first) for volumes as
    well, so each is read as the channel-first or channel-last layout of that rank.
    ``internal`` lists layouts only the plan pass sets (CHWN), taken as they are."""
    value = ctx.attrs[name]
    if value in internal:
        return str(value)
    if value not in _ALIASES:
        allowed = list(USER_LAYOUTS[rank]) + list(internal)
        ctx.fail(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return USER_LAYOUTS[rank][_ALIASES[value]]


def check_layout(ctx: Any, name: str, allowed: Sequence[str]) -> str:
    """The layout attr ``name`` of an op, which must be one of ``allowed``."""
    layout = ctx.attrs[name]
    if layout not in allowed:
        ctx.fail(f"{name} must be one of {', '.join(map(repr, allowed))}, got {layout!r}")
    return layout


#: A rule's attr adapter: (the op's attrs, the layout, the declared NCHW shapes of the
#: op's vars by slot, first var of each) -> the attrs for that layout, or None when these
#: attrs cannot be expressed in it (the op then stays in NCHW).
AdaptAttrs = Callable[[Mapping[str, Any], str, Mapping[str, tuple[int, ...]]],
                      "dict[str, Any] | None"]
#: A rule's gain: (the op's attrs, declared NCHW shapes by slot) -> nanoseconds per image
#: its kernel saves by running in the rule's first layout instead of NCHW.
Gain = Callable[[Mapping[str, Any], Mapping[str, tuple[int, ...]]], float]


@dataclass(frozen=True)
class LayoutRule:
    """How an op runs in layouts other than NCHW.

    ``images``: the slots (inputs and outputs, gradient slots included) whose 4-D vars
    are images in the op's layout; a var of another rank in one of them is left as it is
    and `adapt` decides whether the op can take it (an elementwise op's per-channel Y).
    ``layouts``: the layouts its kernel runs besides NCHW, best first.
    ``attr``: the attr that names the layout the kernel runs in (``data_format``); None
    when the op works in any layout as it is (elementwise ops), given `adapt`'s attrs.
    ``adapt``: maps the op's other attrs to a layout (None: they do not depend on it).
    ``gain``: what the kernel saves in ``layouts[0]`` (None: nothing, it merely runs
    there): the pass converts a chain of ops only when its gains outweigh the
    conversions at its ends.
    """
    images: tuple[str, ...]
    layouts: tuple[str, ...] = (CHWN,)
    attr: str | None = None
    adapt: AdaptAttrs | None = None
    gain: Gain | None = None

    def attrs_in(self, attrs: Mapping[str, Any], layout: str,
                 shapes: Mapping[str, tuple[int, ...]]) -> dict[str, Any] | None:
        """The op's attrs to run in ``layout`` (or None when it cannot)."""
        if layout not in self.layouts:
            return None
        new = dict(attrs) if self.adapt is None else self.adapt(attrs, layout, shapes)
        if new is not None and self.attr is not None:
            new[self.attr] = layout
        return new


def trailing_ones_trimmed(shape: Sequence[int]) -> tuple[int, ...]:
    s = list(shape)
    while len(s) > 1 and s[-1] == 1:
        s.pop()
    return tuple(s)


def adapt_broadcast_axis(attrs: Mapping[str, Any], layout: str,
                         shapes: Mapping[str, tuple[int, ...]]) -> dict[str, Any] | None:
    """The ``axis`` attr of a binary elementwise op (Paddle's broadcasting) in ``layout``,
    for an image X: a Y of X's rank is an image too (both permuted alike, NumPy's
    broadcasting is unchanged); a Y of lower rank covers a run of X's dims from ``axis``
    (trailing size-1 dims aside), which must stay a run, in order, in ``layout``."""
    x, y = shapes.get("X"), shapes.get("Y")
    if x is None or len(x) != 4:
        return None
    if y is None or len(y) == len(x):
        return dict(attrs)
    axis = int(attrs.get("axis", -1))
    core = trailing_ones_trimmed(y)
    start = axis if axis >= 0 else len(x) - len(y)
    moved = [axis_of(layout, d) for d in range(start, start + len(core))]
    if moved != list(range(moved[0], moved[0] + len(moved))):
        return None
    return {**attrs, "axis": moved[0]}
