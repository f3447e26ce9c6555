"""Layers that measure without a gradient: argmax, accuracy."""
from __future__ import annotations

__all__: list[str] = []
