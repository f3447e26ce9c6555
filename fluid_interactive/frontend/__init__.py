"""The user-facing builder: Program classes, tracing, layers, optimizers."""
from . import operators  # noqa: F401  (gives a Variable's operators the layers they record)
