"""Normalisation ops: batch_norm, layer_norm."""
