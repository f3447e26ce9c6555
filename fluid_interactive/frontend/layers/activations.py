"""Activation layers: one op each, also reachable through ``act=`` on fc and friends."""
from __future__ import annotations

from ..variable import Variable
from .helpers import append_simple


def relu(x: Variable, name: str | None = None) -> Variable:
    """max(x, 0), elementwise."""
    return append_simple("relu", {"X": x}, name=name)


def sigmoid(x: Variable, name: str | None = None) -> Variable:
    """1 / (1 + exp(-x)), elementwise."""
    return append_simple("sigmoid", {"X": x}, name=name)


def tanh(x: Variable, name: str | None = None) -> Variable:
    """tanh(x), elementwise."""
    return append_simple("tanh", {"X": x}, name=name)


def leaky_relu(x: Variable, alpha: float = 0.02, name: str | None = None) -> Variable:
    """x where x > 0, else alpha * x."""
    return append_simple("leaky_relu", {"X": x}, {"alpha": float(alpha)}, name=name)


def exp(x: Variable, name: str | None = None) -> Variable:
    """exp(x), elementwise."""
    return append_simple("exp", {"X": x}, name=name)


def log(x: Variable, name: str | None = None) -> Variable:
    """Natural log of x, elementwise."""
    return append_simple("log", {"X": x}, name=name)


def sqrt(x: Variable, name: str | None = None) -> Variable:
    """Square root of x, elementwise."""
    return append_simple("sqrt", {"X": x}, name=name)


def square(x: Variable, name: str | None = None) -> Variable:
    """x * x, elementwise."""
    return append_simple("square", {"X": x}, name=name)


def abs(x: Variable, name: str | None = None) -> Variable:
    return append_simple("abs", {"X": x}, name=name)


def softmax(x: Variable, axis: int = -1, name: str | None = None) -> Variable:
    """exp(x) / sum(exp(x)) along ``axis`` (the last by default), computed stably."""
    return append_simple("softmax", {"X": x}, {"axis": int(axis)}, name=name)


def log_softmax(x: Variable, axis: int = -1, name: str | None = None) -> Variable:
    """x - log(sum(exp(x))) along ``axis`` (the last by default), computed stably: the log
    of `softmax` without its rounding to 0 for very unlikely classes."""
    return append_simple("log_softmax", {"X": x}, {"axis": int(axis)}, name=name)


__all__ = ['relu', 'sigmoid', 'tanh', 'leaky_relu', 'exp', 'log', 'sqrt', 'square', 'abs',
           'softmax',
           'log_softmax']
