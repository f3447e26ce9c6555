"""Ops without gradients that measure: argmax, accuracy."""
