"""`fluid.load`: a compiled program from a checkpoint directory."""
from __future__ import annotations

import os

from ...errors import CheckpointError, FluidError
from .checkpoint import PROGRAM, PathLike, read
from .compiled import CompiledProgram


def load(path: PathLike, device: str | None = None) -> CompiledProgram:
    """Load a checkpoint written by `CompiledProgram.save` into a new `CompiledProgram`
    that continues where the saved one was: every persistable var as saved, what no file
    can hold made anew by the program's initialisers (readers, above all), and each
    reader back at the batch it had reached.

    Everything is verified first (manifest, file sizes and hashes, array dtypes and shapes
    against the program); any problem raises `CheckpointError` naming the file and what is
    wrong. ``device`` is 'cpu', 'gpu' or 'auto' (default: `fluid.set_device`'s choice).
    """
    saved = read(path)
    try:
        compiled = CompiledProgram(saved.program, seed=saved.seed, device=device,
                                   initial_values=saved.values, positions=saved.positions)
    except FluidError as e:  # e.g. a method named like the compiled program's own API
        raise CheckpointError(f"checkpoint {os.path.abspath(os.fspath(path))}: {PROGRAM}: "
                              f"cannot be compiled ({type(e).__name__}: {e})") from None
    return compiled
