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

import math
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fluid_interactive.errors import EOFException, RewindError

from .loss_curve import COLUMNS, DEFAULT_SMOOTHING, CurveData, loss_curve_svg, smooth
from .train_metrics import MetricColumns, metrics_text

__all__ = ["train", "History", "loss_curve_svg", "smooth", "CurveData", "COLUMNS",
           "REFRESH_SECONDS", "ON_NAN"]

#: The shortest time between two redraws of the progress display (~10 Hz).
REFRESH_SECONDS = 0.1

#: What `train` does when a step's loss is NaN or infinite.
ON_NAN = ("stop", "warn", "ignore")


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
    metrics: dict[str, list[Any]] = field(default_factory=dict)  # name -> value per step
    # 'finished', 'interrupted', 'end of data', 'stopped by callback', 'error', or
    # 'loss nan at step N' (on_nan='stop')
    stopped: str = "running"
    seconds: float = 0.0
    curve: CurveData = field(default_factory=CurveData, repr=False, compare=False)

    def record(self, value: float) -> None:
        """Add one step's loss (to the list, and to the curve's summary)."""
        self.loss.append(value)
        self.curve.add(value)

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
        curve = self.curve if self.curve.count == len(self.loss) and \
            self.curve.smoothing == smoothing else self.loss
        return LossCurve(loss_curve_svg(curve, width, height, smoothing=smoothing))

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
    otherwise a scalar result, the obvious scalar of a tuple (its first element, or its
    only scalar) or of a dict (its 'loss'/'cost' entry, or its only scalar). A tuple or
    dict without an obvious one is a `ValueError` asking for ``loss=``; any other result
    (None, an array) has no loss."""
    if callable(loss):
        return _scalar(loss(result))
    if loss is not None:
        return _scalar(result[loss])
    value = _scalar(result)
    if value is not None or not isinstance(result, (tuple, list, dict)) or not result:
        return value
    if isinstance(result, dict):
        keys = [k for k in result if "loss" in str(k).lower() or "cost" in str(k).lower()]
        if keys:
            return _scalar(result[keys[0]])
        picks = list(result)
    else:
        if _scalar(result[0]) is not None:
            return _scalar(result[0])
        picks = list(range(len(result)))
    scalars = [k for k in picks if _scalar(result[k]) is not None]
    if len(scalars) == 1:
        return _scalar(result[scalars[0]])
    raise ValueError(_ambiguous(result, picks, scalars))


def _describe(value: Any) -> str:
    if _scalar(value) is not None:
        return f"scalar {_scalar(value):.5g}"
    shape = getattr(value, "shape", None)
    return f"array {list(shape)}" if shape is not None else type(value).__name__


def _ambiguous(result: Any, picks: list, scalars: list) -> str:
    kind = "dict" if isinstance(result, dict) else "tuple"
    listed = ", ".join(f"{k!r}: {_describe(result[k])}" for k in picks[:8])
    which = "none of them is a scalar" if not scalars else \
        f"{len(scalars)} of them are scalars"
    example = scalars[0] if scalars else picks[0]
    return (f"the step returned a {kind} ({listed}) and {which}, so fluid.train cannot tell "
            f"which is the loss; pass loss={example!r} (the {'key' if kind == 'dict' else 'index'}"
            f" of the loss) or loss=lambda result: ...")


# --- progress views ----------------------------------------------------------------------------

def _status(history: History, total: int, seconds: float, final: bool = False) -> str:
    """The progress line: the same steps/s as the History's repr once training ended."""
    text = f"{history.steps}/{total}"
    if history.last_loss is not None:
        text += f"  loss {history.last_loss:.5g}"
    if history.metrics:
        text += f"  {metrics_text(history.metrics)}"
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
        self.curve = w.HTML(value=loss_curve_svg(CurveData(smoothing)))
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
        self.curve.value = loss_curve_svg(history.curve)   # bounded work, however long the run
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


@dataclass
class _Step:
    """What `train` does with each step's result."""
    method: Callable
    name: str
    loss: None | str | int | Callable
    keep_results: bool
    callback: Callable[[int, Any], Any] | None
    on_nan: str
    columns: MetricColumns
    warned: bool = False


def _take_back(method: Callable) -> bool:
    """Undo the method's last call when its program keeps a history (`prog.rewind(1)`)."""
    owner = getattr(method, "owner", None)
    if not getattr(getattr(owner, "history", None), "enabled", False):
        return False
    try:
        owner.rewind(1)   # type: ignore[union-attr]
    except RewindError:
        return False
    return True


def _non_finite(how: _Step, history: History, value: float) -> bool:
    """A NaN or infinite loss: whether training goes on. 'stop' takes the step back when
    the program keeps a history, so the parameters are the last finite ones."""
    if how.on_nan == "warn" and not how.warned:
        how.warned = True
        warnings.warn(f"{how.name}: the loss is {value} at step {history.steps}; training "
                      f"goes on (on_nan='warn')", RuntimeWarning, stacklevel=5)
    if how.on_nan != "stop":
        return True
    step = history.steps
    if _take_back(how.method):
        history.steps -= 1
        history.stopped = f"loss {value} at step {step}; that step was taken back"
    else:
        history.record(value)
        history.stopped = (f"loss {value} at step {step}; the parameters are those after it "
                           f"(keep_history() on the program keeps the last finite ones)")
    return False


def _after_step(how: _Step, history: History, step: int, result: Any) -> bool:
    """Record a completed step; whether training goes on."""
    history.steps += 1
    try:
        value = _loss_of(result, how.loss)
    except ValueError:
        if _take_back(how.method):
            history.steps -= 1
        raise
    if value is not None:
        if not math.isfinite(value) and how.on_nan != "ignore" and \
                not _non_finite(how, history, value):
            return False
        history.record(value)
    how.columns.record(result, history.metrics)
    if how.keep_results:
        history.results.append(result)
    if how.callback is not None and how.callback(step, result) is False:
        history.stopped = "stopped by callback"
        return False
    return True


def _loop(how: _Step, steps: int, next_batch: Callable[[int], Any], history: History,
          view: _View, guard: _DeferInterrupt) -> None:
    for step in range(steps):
        if guard.pending:
            raise KeyboardInterrupt
        try:
            batch = next_batch(step)
        except StopIteration:
            history.stopped = "end of data"
            break
        guard.in_step = True
        result = _call(how.method, batch)
        guard.in_step = False
        if not _after_step(how, history, step, result):
            break
        view.update(history)
    else:
        history.stopped = "finished"
    if guard.pending:
        raise KeyboardInterrupt


def _check_arguments(method: Callable, steps: int, smoothing: float, on_nan: str) -> None:
    if not callable(method):
        raise TypeError(f"train() needs a callable method, e.g. prog.train_step; got "
                        f"{type(method).__name__}")
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be a non-negative int, got {steps!r}")
    if not isinstance(smoothing, (int, float)) or not 0 <= smoothing < 1:
        raise ValueError(f"smoothing must be a number in [0, 1), got {smoothing!r}")
    if on_nan not in ON_NAN:
        raise ValueError(f"on_nan must be one of {', '.join(map(repr, ON_NAN))}; got "
                         f"{on_nan!r}")


def train(method: Callable, steps: int = 1000, data: Any = None, *,
          loss: None | str | int | Callable = None, metrics: Mapping[str, Any] | None = None,
          progress: bool | str = True,
          title: str | None = None, keep_results: bool = False,
          callback: Callable[[int, Any], Any] | None = None,
          smoothing: float = DEFAULT_SMOOTHING, on_nan: str = "stop") -> History:
    """Call ``method`` up to ``steps`` times and return the `History`.

    ``data`` gives each step's arguments: None (the method reads its own data, e.g. from a
    `fluid.batch_reader`), a function ``step -> batch`` or an iterable of batches. A batch
    that is a tuple is passed as positional arguments, a dict as keywords, anything else as
    the one argument. The loop ends early, without an error, at `fluid.EOFException`, when
    ``data`` runs out, or on Ctrl-C (the notebook's stop button): the running step
    finishes first, so the parameters are those after the history's last step (press it
    twice to abandon a long step; its updates are then dropped).

    ``loss`` picks the loss from a step's result (a dict key, a tuple index or a function;
    by default a scalar result, a tuple's first element or only scalar, a dict's
    'loss'/'cost' entry or only scalar; a tuple or dict with no obvious loss is a
    `ValueError` asking for ``loss=``). ``metrics`` shows more values beside the loss and
    keeps them in ``History.metrics``: name -> a key of the result (or a function of it),
    or ``(metric, feed)``, a `fluid.metrics` metric updated with ``feed(result)`` after each
    step and shown by its ``eval()`` (see `train_metrics`). ``on_nan``: a NaN or infinite
    loss stops training ('stop', the default: the history says at which step, and a
    program that keeps a history takes that step back, so its parameters are the last
    finite ones), warns once ('warn') or is recorded like any other ('ignore').
    ``progress``: True/'auto' (a widget in Jupyter, tqdm or text elsewhere), 'widget',
    'tqdm', 'text', or False. ``callback(step, result)`` runs after every step; returning
    False stops the loop. ``smoothing`` (in [0, 1), default 0.6) draws a moving average of
    the loss over the faint raw curve, as TensorBoard does; 0 draws the raw losses only.
    The curve is redrawn from a summary of at most ~840 columns, so a long run trains as
    fast at its millionth step as at its first.
    """
    _check_arguments(method, steps, smoothing, on_nan)
    next_batch = _batches(data)
    name = title if title is not None else getattr(method, "__name__", "train")
    history = History(requested=steps, curve=CurveData(float(smoothing)))
    view = _make_view(progress, steps, name, float(smoothing))
    how = _Step(method, name, loss, keep_results, callback, on_nan,
                MetricColumns(metrics))
    started = view.started = time.perf_counter()
    guard = _DeferInterrupt()
    try:
        with guard:
            _loop(how, steps, next_batch, history, view, guard)
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
