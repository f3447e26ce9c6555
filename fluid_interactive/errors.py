"""The package's own exception hierarchy.

Every error a user can provoke is a `FluidError`; each also subclasses the builtin that
describes it best (`ValueError`, `TypeError`, ...) so code that catches builtins keeps working.
Messages say what was wrong, where (the user's ``file:line``), and how to fix it.
"""
from __future__ import annotations


class FluidError(Exception):
    """Base class of every error raised by fluid_interactive."""


class ShapeError(FluidError, ValueError):
    """An op received inputs whose shapes do not fit together.

    Raised while a method is traced (``Compile()``), naming the op, the shapes, and the
    line of the user's method that recorded it. Fix the shapes at that line.
    """


class DTypeError(FluidError, TypeError):
    """An op or a fed value has a dtype that cannot be used there."""


class OpArgumentError(FluidError, ValueError, TypeError):
    """A layer or op was called with an argument it cannot accept (unknown activation,
    bad attribute value, missing input, a NumPy array where a Variable belongs).

    Both a `ValueError` and a `TypeError`: Paddle raises `TypeError` for an argument of
    the wrong type, and code written against either keeps catching it."""


class FeedError(FluidError, ValueError):
    """A value passed to a compiled method does not fit the data var it feeds."""


class ProgramDefinitionError(FluidError, TypeError):
    """A `fluid.Program` subclass is malformed (a method name collides with the compiled
    program's own API, a mapped argument is never declared, ...)."""


class NotCompiledError(FluidError, TypeError):
    """A ``@fluid.network`` method was called on a `fluid.Program` instance, which only
    describes the program. Compile it and call the compiled method:
    ``prog = MyProgram().Compile()``, then ``prog.infer(...)``."""


class NameConflictError(FluidError, ValueError):
    """Two layers bind the same parameter name with different shapes or dtypes."""


class KernelError(FluidError, RuntimeError):
    """A kernel failed while a compiled method ran. The message carries the op's text line
    and the user's line that recorded the op; the original exception is chained."""


class LoopLimitError(FluidError, RuntimeError):
    """A ``While`` (or ``while_loop``) made with ``max_iterations=N`` was about to start
    iteration N+1 of one call: its condition still held after N iterations. The call
    stops, and commits nothing. The message names the loop and the line that made it.
    A loop that does not end usually has a condition its body never makes false (a
    counter it does not increment); raise ``max_iterations`` if it needs more."""


class VerifyError(FluidError, ValueError):
    """`check_program` found a structural problem in a program description."""


class CheckpointError(FluidError, ValueError):
    """A checkpoint directory is missing, incomplete, corrupt or does not match the program."""


class RewindError(FluidError, ValueError):
    """`CompiledProgram.rewind` cannot go back as far as asked: the program keeps no
    history, or its history holds fewer changes (its bounds forgot older ones). Nothing
    was changed."""


class EOFException(FluidError):
    """A reader reached the end of its data. Call ``reset()`` to start again."""


class RecordIOError(FluidError, ValueError):
    """A RecordIO file is malformed (bad magic, CRC mismatch, truncated chunk or record,
    unknown compressor, tensor bytes that disagree with their declared shape). The message
    names the file and the byte offset."""


class ReaderError(FluidError, RuntimeError):
    """A batch reader failed: a sample of the wrong shape or dtype, an unreadable file, or an
    exception in the background reading thread (chained)."""


class OnnxError(FluidError, ValueError):
    """An ONNX export or import failed: an op of the exported method has no ONNX mapping
    (the message names the op and the user's line that recorded it), a node type of the
    imported file has no rule (all of them are listed with their counts), a name in the file
    cannot be a var name, or the file is malformed. Nothing is written or created."""


class FluidWarning(UserWarning):
    """Base class of every warning fluid_interactive gives: something runs, but probably
    not as meant. Warnings point at the user's line; ``warnings.filterwarnings('error',
    category=fluid.FluidWarning)`` turns them into errors."""


class KernelCacheWarning(FluidWarning):
    """The compiled kernel tier cannot use its cache folder (``FLUID_KERNEL_CACHE``, by
    default ``~/.cache/fluid_interactive/kernels``): the name is a file's, HOME is a
    file, or the folder cannot be made or written (HOME=/proc). The tier is only a
    speed-up, so it turns itself off and every kernel runs NumPy; given once per
    process and folder. Set ``FLUID_KERNEL_CACHE`` to a folder you can write, or
    ``FLUID_KERNELS=numpy`` to turn the tier off."""


class LoopMemoryWarning(FluidWarning):
    """One call of a training ``While`` keeps more values for its gradient than
    ``fluid.loop_saved_limit()`` (default 1 GiB; ``FLUID_LOOP_SAVED_WARN=512M`` sets it
    for a process): a loop that does not end grows them until memory runs out. Given at
    the line that made the loop, once per loop and limit. Give the loop
    ``max_iterations=``, or ``is_test=True`` where no gradient goes through it."""


class SequenceWarning(FluidWarning):
    """A sequence is probably fed the wrong way, in a form that runs and learns nothing,
    or learns from padding. Given while a method is traced, at the line of the layer:

    * a ``StaticRNN`` stepping over the batch: its step input's dim 0 is the batch dim a
      data var got from ``append_batch_size`` and its dim 1 the sequence (batch-major
      ``[B, T, ...]``), but a ``StaticRNN`` steps over dim 0 (time-major ``[T, B, ...]``).
      Transpose it first (``fluid.layers.transpose(x, perm=[1, 0, 2])``), or use
      ``DynamicRNN``, which takes batch-major sequences with their lengths;
    * a pool over padded sequences without their lengths (``sequence_last_step``,
      ``sequence_pool``): the method declares an int data var that holds the rows'
      lengths (it is named so, or another sequence layer takes it as ``lengths``) and
      does not pass it, so every row counts as ``T`` long and the padding is pooled. Pass
      ``lengths=``.
    """
