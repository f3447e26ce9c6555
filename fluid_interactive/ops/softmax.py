"""Softmax and the classification losses built on it."""
