"""Layers that reshape, combine, convert and reduce tensors."""
from __future__ import annotations

__all__: list[str] = []
