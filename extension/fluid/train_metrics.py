"""The ``metrics=`` of `fluid.train`: values shown beside the loss, step by step.

``metrics`` maps a name to what it shows:

* a key of the step's result (a dict key or a tuple index) or a function of the result:
  that value at each step (``metrics={"acc": "acc"}``);
* ``(metric, feed)``: a `fluid.metrics` metric and a function of the step's result giving
  the arguments of its ``update`` (a tuple, or one value); after each step the metric is
  updated and its ``eval()`` is shown (``metrics={"auc": (fluid.metrics.Auc("auc"),
  lambda r: (r["prob"], r["label"]))}``). The metric keeps counting across calls of
  `train`; ``reset()`` it for a fresh count.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from fluid_interactive.frontend.metrics import MetricBase


def _shown(value: Any) -> Any:
    """A number (or a tuple of numbers) for the history and the progress line."""
    if isinstance(value, (tuple, list)):
        return tuple(_shown(v) for v in value)
    array = np.asarray(value)
    return float(array.reshape(())) if array.size == 1 else array


def _text(value: Any) -> str:
    if isinstance(value, tuple):
        return "/".join(_text(v) for v in value)
    return f"{value:.4g}" if isinstance(value, float) else "[...]"


def metrics_text(series: Mapping[str, list]) -> str:
    """Each metric's last value, as the progress line shows it ('' for none)."""
    return "  ".join(f"{name} {_text(values[-1])}" for name, values in series.items() if values)


class MetricColumns:
    """The metrics of one `train` call: `record` a step's result."""

    def __init__(self, metrics: Mapping[str, Any] | None):
        self.readers: dict[str, Callable[[Any], Any]] = {}
        for name, spec in (metrics or {}).items():
            self.readers[str(name)] = self._reader(str(name), spec)

    @staticmethod
    def _reader(name: str, spec: Any) -> Callable[[Any], Any]:
        if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], MetricBase):
            metric, feed = spec
            if not callable(feed):
                raise TypeError(f"metrics[{name!r}]: the second item of (metric, feed) must be "
                                f"a function of the step's result giving {metric!s}.update's "
                                f"arguments; got {feed!r}")

            def update_and_eval(result: Any) -> Any:
                args = feed(result)
                metric.update(*(args if isinstance(args, tuple) else (args,)))
                return metric.eval()
            return update_and_eval
        if isinstance(spec, MetricBase):
            raise TypeError(f"metrics[{name!r}]: a metric needs a feed, the function giving "
                            f"its update's arguments from the step's result: "
                            f"metrics={{{name!r}: (metric, lambda result: (...))}}")
        if callable(spec):
            return spec
        if isinstance(spec, (str, int)):
            return lambda result: result[spec]
        raise TypeError(f"metrics[{name!r}] must be a key of the step's result, a function of "
                        f"it, or (a fluid.metrics metric, a feed function); got {spec!r}")

    def record(self, result: Any, series: dict[str, list]) -> None:
        """Append each metric after this step to its list in ``series``."""
        for name, read in self.readers.items():
            series.setdefault(name, []).append(_shown(read(result)))
