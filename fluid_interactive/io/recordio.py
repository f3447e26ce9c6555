"""Paddle Fluid's RecordIO format: chunks of length-prefixed records, each record one
sample as serialized tensors."""
