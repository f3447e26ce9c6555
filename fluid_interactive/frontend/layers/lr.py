"""Learning-rate schedules: exponential, piecewise and cosine decay."""
from __future__ import annotations

__all__: list[str] = []
