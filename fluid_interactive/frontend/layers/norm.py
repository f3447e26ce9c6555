"""Normalisation, dropout, embedding and the other neural-network layers."""
from __future__ import annotations

__all__: list[str] = []
