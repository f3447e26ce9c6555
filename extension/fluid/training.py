"""`fluid.train`: run a compiled method for many steps and watch it.

    history = fluid.train(prog.train_step, steps=1000, data=batches)

In a Jupyter kernel the progress bar and a live loss curve are one ipywidgets box that
updates in place, at most ten times a second. Elsewhere (a script, a terminal IPython) it
prints a tqdm bar when tqdm is installed, plain text lines otherwise. Ctrl-C (the
notebook's stop button) and `fluid.EOFException` (a reader's end of data) stop the loop
cleanly and return the history so far. Ctrl-C lets the running step finish, so the
parameters are exactly those after the last step in the history. A second Ctrl-C abandons
that step, and the runtime drops its updates, which commit only when a step completes.
"""
from __future__ import annotations

import html
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fluid_interactive.errors import EOFException

__all__ = ["train", "History", "loss_curve_svg", "REFRESH_SECONDS"]

#: The shortest time between two redraws of the progress display (~10 Hz).
REFRESH_SECONDS = 0.1

#: How much a loss curve is smoothed by default (an exponential moving average with this
#: weight on the past, debiased at the start, as TensorBoard draws it; 0: raw losses only).
DEFAULT_SMOOTHING = 0.6


def _rate(per_second: float | None) -> str:
    """Steps per second, spelled the same in the progress line and the History."""
    return "- steps/s" if per_second is None else f"{per_second:,.0f} steps/s"


@dataclass
class History:
    """What `train` did: the loss of every completed step, and why it stopped."""
    steps: int = 0                       # completed steps
    requested: int = 0
    loss: list[float] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)  # only with keep_results=True
    stopped: str = "running"             # 'finished', 'interrupted', 'end of data'
    seconds: float = 0.0

    @property
    def last_loss(self) -> float | None:
        return self.loss[-1] if self.loss else None

    @property
    def steps_per_second(self) -> float | None:
        """Completed steps per second of the whole loop (what the progress line shows at
        the end, too)."""
        return self.steps / self.seconds if self.seconds > 0 else None

    def plot(self, width: int = 480, height: int = 160,
             smoothing: float = DEFAULT_SMOOTHING) -> LossCurve:
        """The loss curve as a displayable SVG; ``smoothing`` as in `train`."""
        return LossCurve(loss_curve_svg(self.loss, self.requested or self.steps, width, height,
                                        smoothing=smoothing))

    def __repr__(self) -> str:
        loss = f", last loss {self.last_loss:.6g}" if self.loss else ""
        rate = f", {_rate(self.steps_per_second)}" if self.seconds > 0 else ""
        return (f"<fluid.History: {self.steps}/{self.requested} steps, {self.stopped}"
                f"{loss}{rate}>")


class LossCurve:
    def __init__(self, svg: str):
        self.svg = svg

    def _repr_svg_(self) -> str:
        return self.svg


# --- the loss value of a step ----------------------------------------------------------------

def _scalar(value: Any) -> float | None:
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return float(value)
    size = getattr(value, "size", None)
    if size == 1 and hasattr(value, "dtype"):
        try:
            return float(np.asarray(value).reshape(()))
        except (TypeError, ValueError):
            return None
    return None


def _loss_of(result: Any, loss: None | str | int | Callable) -> float | None:
    """The step's loss: ``loss`` picks it (a dict key, a tuple index or a function);
    otherwise a scalar result, the first element of a tuple, or a dict's 'loss'/'cost'
    entry (else its first scalar)."""
    if callable(loss):
        return _scalar(loss(result))
    if loss is not None:
        return _scalar(result[loss])
    value = _scalar(result)
    if value is not None:
        return value
    if isinstance(result, (tuple, list)) and result:
        return _scalar(result[0])
    if isinstance(result, dict):
        for key in result:
            if "loss" in key.lower() or "cost" in key.lower():
                return _scalar(result[key])
        for v in result.values():
            if _scalar(v) is not None:
                return _scalar(v)
    return None


# --- the SVG loss curve ------------------------------------------------------------------------

def _downsample(values: list[float], limit: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``limit`` points: the mean of equal buckets, at each bucket's middle step."""
    y = np.asarray(values, dtype=np.float64)
    x = np.arange(1, len(y) + 1, dtype=np.float64)
    if len(y) <= limit:
        return x, y
    edges = np.linspace(0, len(y), limit + 1).astype(int)
    xs = np.array([(x[a] + x[b - 1]) / 2 for a, b in zip(edges[:-1], edges[1:])])
    ys = np.array([y[a:b].mean() for a, b in zip(edges[:-1], edges[1:])])
    return xs, ys


def smooth(values: np.ndarray, weight: float) -> np.ndarray:
    """An exponential moving average with ``weight`` on the past, debiased so the first
    points are not pulled towards 0 (TensorBoard's smoothing). NaNs are carried over."""
    if weight <= 0:
        return np.asarray(values, dtype=np.float64)
    if not 0 <= weight < 1:
        raise ValueError(f"smoothing must be in [0, 1), got {weight!r}")
    out = np.empty(len(values))
    last, n = 0.0, 0
    for i, v in enumerate(values):
        if not math.isfinite(v):
            out[i] = v
            continue
        n += 1
        last = last * weight + (1 - weight) * v
        out[i] = last / (1 - weight ** n)
    return out


def loss_curve_svg(loss: list[float], total: int = 0, width: int = 480, height: int = 160,
                   max_points: int = 400, smoothing: float = DEFAULT_SMOOTHING) -> str:
    """An inline SVG line of ``loss`` against the step; a log scale when the losses are
    positive and span more than two decades. With ``smoothing`` (in [0, 1)) the raw losses
    are drawn faint and their moving average over them, so a noisy loss reads as a line
    instead of a band."""
    pad_l, pad_r, pad_t, pad_b = 52, 10, 16, 20
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'class="fluid-loss-curve" style="font:10px sans-serif">',
             f'<rect x="{pad_l}" y="{pad_t}" width="{w}" height="{h}" fill="#fcfcfc" '
             f'stroke="#ccc"/>']
    finite = [v for v in loss if math.isfinite(v)]
    if finite:
        log = min(finite) > 0 and max(finite) / min(finite) > 100
        n = max(total, len(loss), 2)
        lines = [(list(loss), "#d6604d", 1.5, 1.0)]
        smoothed = smooth(loss, smoothing) if smoothing > 0 and len(finite) > 2 else None
        if smoothed is not None:
            lines = [(list(loss), "#d6604d", 1.0, 0.3), (list(smoothed), "#b2182b", 1.8, 1.0)]
        shapes = []
        for values, colour, width_px, opacity in lines:
            xs, ys = _downsample(values, max_points)
            keep = np.isfinite(ys)
            shapes.append((xs[keep], np.log10(ys[keep]) if log else ys[keep], colour,
                           width_px, opacity))
        ty_all = shapes[0][1]
        lo, hi = float(ty_all.min()), float(ty_all.max())
        if hi - lo < 1e-12:
            lo, hi = lo - 0.5, hi + 0.5
        for xs, ty, colour, width_px, opacity in shapes:
            px = pad_l + (xs - 1) / (n - 1) * w
            py = pad_t + (hi - ty) / (hi - lo) * h
            points = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px, py))
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="{width_px}" '
                         f'stroke-opacity="{opacity}" points="{points}"/>')
        top, bottom = (10 ** hi, 10 ** lo) if log else (hi, lo)
        parts.append(f'<text x="{pad_l - 4}" y="{pad_t + 8}" text-anchor="end">{top:.3g}</text>')
        parts.append(f'<text x="{pad_l - 4}" y="{pad_t + h}" text-anchor="end">'
                     f'{bottom:.3g}</text>')
        if log:
            parts.append(f'<text x="{pad_l - 4}" y="{pad_t + h / 2 + 4}" text-anchor="end" '
                         f'fill="#888">log</text>')
        label = f"loss {finite[-1]:.5g} at step {len(loss)}" + (
            f" (smoothed {float(smoothed[-1]):.5g})" if smoothed is not None else "")
    else:
        label = "loss: no values yet"
    parts.append(f'<text x="{pad_l}" y="{pad_t - 4}">{html.escape(label)}</text>')
    parts.append(f'<text x="{pad_l}" y="{height - 6}">0</text>')
    parts.append(f'<text x="{width - pad_r}" y="{height - 6}" text-anchor="end">'
                 f'{max(total, len(loss))} steps</text>')
    parts.append("</svg>")
    return "".join(parts)


# --- progress views ----------------------------------------------------------------------------

def _status(history: History, total: int, seconds: float, final: bool = False) -> str:
    """The progress line: the same steps/s as the History's repr once training ended."""
    text = f"{history.steps}/{total}"
    if history.last_loss is not None:
        text += f"  loss {history.last_loss:.5g}"
    text += f"  {_rate(history.steps / seconds if seconds > 0 else None)}"
    if final and history.stopped != "finished":
        text += f"  ({history.stopped})"
    return text


class _View:
    """Shows progress; `update` may be called every step and redraws at most every
    ``REFRESH_SECONDS`` (``final`` redraws regardless)."""
    renders = 0

    def __init__(self, total: int, title: str, smoothing: float = DEFAULT_SMOOTHING):
        self.total, self.title, self.smoothing = total, title, smoothing
        self.started = time.perf_counter()     # train() sets the loop's own start
        self._last = -math.inf

    def update(self, history: History, final: bool = False) -> None:
        now = time.perf_counter()
        if not final and now - self._last < REFRESH_SECONDS:
            return
        self._last = now
        self.renders += 1
        self.render(history, final)

    def status(self, history: History, final: bool) -> str:
        seconds = history.seconds if final else time.perf_counter() - self.started
        return _status(history, self.total, seconds, final)

    def render(self, history: History, final: bool) -> None:  # pragma: no cover
        raise NotImplementedError


class _NoView(_View):
    def render(self, history: History, final: bool) -> None:
        pass


class _TextView(_View):
    """Plain lines on stdout, at most one a second, and one at the end."""

    def __init__(self, total: int, title: str, smoothing: float = DEFAULT_SMOOTHING):
        super().__init__(total, title, smoothing)
        self._printed = -math.inf

    def render(self, history: History, final: bool) -> None:
        now = time.perf_counter()
        if final or now - self._printed >= 1.0:
            self._printed = now
            prefix = f"{self.title}: " if self.title else ""
            print(prefix + self.status(history, final), flush=True)


class _TqdmView(_View):
    def __init__(self, total: int, title: str, smoothing: float = DEFAULT_SMOOTHING):
        super().__init__(total, title, smoothing)
        from tqdm import tqdm
        self.bar = tqdm(total=total, desc=title or "train", leave=True)
        self._shown = 0

    def render(self, history: History, final: bool) -> None:
        self.bar.update(history.steps - self._shown)
        self._shown = history.steps
        if history.last_loss is not None:
            self.bar.set_postfix(loss=f"{history.last_loss:.5g}", refresh=False)
        if final:
            if history.stopped != "finished":
                self.bar.set_description(f"{self.title or 'train'} ({history.stopped})")
            self.bar.close()


class _WidgetView(_View):
    """A title, a progress bar, a status line and the loss curve in one ipywidgets box.

    Its plain-text form (what a front end without widgets shows: a notebook rendered as
    text, a console) is the progress line itself, brought up to date when training ends,
    never the widgets' own repr."""

    def __init__(self, total: int, title: str, smoothing: float = DEFAULT_SMOOTHING):
        super().__init__(total, title, smoothing)
        import ipywidgets as w
        from IPython.display import display
        # the title in its own label, at its full length: a progress bar's description
        # would cut it to a few characters
        self.heading = w.Label(value=title or "train")
        self.heading.add_class("fluid-train-title")
        self.bar = w.IntProgress(value=0, min=0, max=max(total, 1), bar_style="info",
                                 layout=w.Layout(width="360px"))
        self.label = w.Label(value=f"0/{total}")
        self.label.add_class("fluid-train-status")
        self.curve = w.HTML(value=loss_curve_svg([], total, smoothing=smoothing))
        self.box = w.VBox([w.HBox([self.heading, self.bar, self.label]), self.curve])
        self.box.add_class("fluid-train")
        self.handle = display(self._bundle(f"0/{total}"), raw=True, display_id=True)

    def _bundle(self, status: str) -> dict:
        bundle = dict(self.box._repr_mimebundle_())
        bundle["text/plain"] = f"{self.title or 'train'}: {status}"
        return bundle

    def render(self, history: History, final: bool) -> None:
        self.bar.value = history.steps
        self.label.value = self.status(history, final)
        self.curve.value = loss_curve_svg(history.loss, self.total, smoothing=self.smoothing)
        if final:
            self.bar.bar_style = {"finished": "success", "interrupted": "warning"}.get(
                history.stopped, "info")
            if self.handle is not None:
                self.handle.update(self._bundle(self.label.value), raw=True)


def in_kernel() -> bool:
    """Whether this runs in a Jupyter kernel (never imports IPython itself)."""
    if "IPython" not in sys.modules or "ipykernel" not in sys.modules:
        return False
    shell = sys.modules["IPython"].get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _make_view(progress: bool | str, total: int, title: str,
               smoothing: float = DEFAULT_SMOOTHING) -> _View:
    if progress is False or progress == "none":
        return _NoView(total, title, smoothing)
    choice = progress if isinstance(progress, str) else "auto"
    if choice not in ("auto", "widget", "tqdm", "text"):
        raise ValueError(f"progress must be True, False, 'auto', 'widget', 'tqdm', 'text' or "
                         f"'none'; got {progress!r}")
    if choice == "auto":
        if in_kernel():
            try:
                import ipywidgets  # noqa: F401
                choice = "widget"
            except ImportError:
                choice = "text"
        else:
            try:
                import tqdm  # noqa: F401
                choice = "tqdm"
            except ImportError:
                choice = "text"
    return {"widget": _WidgetView, "tqdm": _TqdmView, "text": _TextView}[choice](
        total, title, smoothing)


# --- the loop ----------------------------------------------------------------------------------

def _batches(data: Any) -> Callable[[int], Any]:
    """A function step -> batch for the ``data`` argument (None: no arguments)."""
    if data is None:
        return lambda step: ()
    if callable(data):
        return data
    if isinstance(data, Iterable):
        it = iter(data)
        return lambda step: next(it)
    raise TypeError(f"data must be None, a function step -> batch, or an iterable of batches; "
                    f"got {type(data).__name__}")


def _call(method: Callable, batch: Any) -> Any:
    if isinstance(batch, dict):
        return method(**batch)
    if isinstance(batch, (tuple, list)):
        return method(*batch)
    return method(batch)


class _DeferInterrupt:
    """While training in the main thread, Ctrl-C (the notebook's stop button) stops the
    loop at the next step boundary: the step that is running finishes and is counted, so
    the history and the parameters agree exactly. A second Ctrl-C during that step stops
    at once: the runtime then drops the step's updates (they commit only when a step
    completes)."""

    def __init__(self) -> None:
        self.in_step = False
        self.pending = False
        self.previous: Any = None
        self.active = False

    def _handler(self, signum: int, frame: Any) -> None:
        if self.pending and self.in_step:
            raise KeyboardInterrupt
        self.pending = True

    def __enter__(self) -> _DeferInterrupt:
        if threading.current_thread() is threading.main_thread():
            try:
                self.previous = signal.signal(signal.SIGINT, self._handler)
                self.active = True
            except (ValueError, OSError):  # not allowed here: plain KeyboardInterrupt
                self.active = False
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.active:
            signal.signal(signal.SIGINT, self.previous)


def train(method: Callable, steps: int = 1000, data: Any = None, *,
          loss: None | str | int | Callable = None, progress: bool | str = True,
          title: str | None = None, keep_results: bool = False,
          callback: Callable[[int, Any], Any] | None = None,
          smoothing: float = DEFAULT_SMOOTHING) -> History:
    """Call ``method`` up to ``steps`` times and return the `History`.

    ``data`` gives each step's arguments: None (the method reads its own data, e.g. from a
    `fluid.batch_reader`), a function ``step -> batch`` or an iterable of batches. A batch
    that is a tuple is passed as positional arguments, a dict as keywords, anything else as
    the one argument. The loop ends early, without an error, at `fluid.EOFException`, when
    ``data`` runs out, or on Ctrl-C (the notebook's stop button): the running step
    finishes first, so the parameters are those after the history's last step (press it
    twice to abandon a long step; its updates are then dropped).

    ``loss`` picks the loss from a step's result (a dict key, a tuple index or a function;
    by default a scalar result, a tuple's first element, or a dict's 'loss'/'cost' entry).
    ``progress``: True/'auto' (a widget in Jupyter, tqdm or text elsewhere), 'widget',
    'tqdm', 'text', or False. ``callback(step, result)`` runs after every step; returning
    False stops the loop. ``smoothing`` (in [0, 1), default 0.6) draws a moving average of
    the loss over the faint raw curve, as TensorBoard does; 0 draws the raw losses only.
    """
    if not callable(method):
        raise TypeError(f"train() needs a callable method, e.g. prog.train_step; got "
                        f"{type(method).__name__}")
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be a non-negative int, got {steps!r}")
    if not isinstance(smoothing, (int, float)) or not 0 <= smoothing < 1:
        raise ValueError(f"smoothing must be a number in [0, 1), got {smoothing!r}")
    next_batch = _batches(data)
    name = title if title is not None else getattr(method, "__name__", "train")
    history = History(requested=steps)
    view = _make_view(progress, steps, name, float(smoothing))
    started = view.started = time.perf_counter()
    guard = _DeferInterrupt()
    try:
        with guard:
            for step in range(steps):
                if guard.pending:
                    raise KeyboardInterrupt
                try:
                    batch = next_batch(step)
                except StopIteration:
                    history.stopped = "end of data"
                    break
                guard.in_step = True
                result = _call(method, batch)
                guard.in_step = False
                history.steps += 1
                value = _loss_of(result, loss)
                if value is not None:
                    history.loss.append(value)
                if keep_results:
                    history.results.append(result)
                if callback is not None and callback(step, result) is False:
                    history.stopped = "stopped by callback"
                    break
                view.update(history)
            else:
                history.stopped = "finished"
            if guard.pending:
                raise KeyboardInterrupt
    except KeyboardInterrupt:
        history.stopped = "interrupted"
    except EOFException:
        history.stopped = "end of data"
    finally:
        guard.in_step = False
        history.seconds = time.perf_counter() - started
        if history.stopped == "running":   # an error in the step: show where it stopped
            history.stopped = "error"
        view.update(history, final=True)
    return history
