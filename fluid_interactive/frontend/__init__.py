"""The user-facing builder: Program classes, tracing, layers, optimizers."""
