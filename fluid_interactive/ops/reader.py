"""Reader ops. ``create_batch_reader`` (block 0, run when a program compiles) makes a
`BatchReader` that lives in the scope and holds the reading position; ``read`` (in a
method's block) takes its next batch.

The runtime runs a block's ``read`` ops before the rest of the block, as part of the call's
entry, so the batch's actual size (a short last batch) picks the plan like fed arguments do;
the `read` kernel below is what the reference interpreter uses.
"""
from __future__ import annotations

from typing import Any

from .registry import register
from .spec import InferContext, KernelContext, OpSpec, TensorType, slots

_FILE_PREFETCH = 64  # batches

READER_ATTRS = {
    "files": [], "batch_size": 1, "shapes": [], "dtypes": [], "shuffle": False,
    "shuffle_buffer": -1, "seed": -1, "epochs": 1, "drop_last": False, "format": "recordio",
    "shard_index": 0, "num_shards": 1, "trainer_shard": True,
}


def _reader_infer(ctx: InferContext) -> None:
    ctx.set_output("Out", (), "float32")  # a reader var: kind 'reader', no tensor type


def _optional(value: int) -> Any:
    return None if value < 0 else value


def make_reader(attrs: dict, data: tuple) -> Any:
    """A `BatchReader` as the op's attrs describe it (imported here: the io layer starts
    threads only when a reader opens, and most programs have none)."""
    from ..io.reader import ArraySource, BatchReader, FileSource
    source = ArraySource(data) if data else FileSource(list(attrs["files"]))
    # Arrays in memory have no I/O to overlap: a thread would only add hand-offs. Files
    # read ahead generously, since a hand-off costs more than a small training step.
    kwargs: dict[str, Any] = {"prefetch": 0 if data else _FILE_PREFETCH}
    if attrs["num_shards"] > 1:
        kwargs["shard"] = (attrs["shard_index"], attrs["num_shards"])
    return BatchReader(source, attrs["batch_size"], [tuple(s) for s in attrs["shapes"]],
                       list(attrs["dtypes"]), shuffle=attrs["shuffle"],
                       shuffle_buffer=_optional(attrs["shuffle_buffer"]),
                       seed=_optional(attrs["seed"]), epochs=_optional(attrs["epochs"]),
                       drop_last=attrs["drop_last"], **kwargs)


def _create_kernel(ctx: KernelContext):
    attrs = dict(ctx.attrs)

    def create(*data):
        # Host arrays: the reader runs on the CPU and batches move to the device per step.
        return make_reader(attrs, tuple(d.get() if hasattr(d, "get") else d for d in data))
    return create


register(OpSpec("create_batch_reader", slots("Data*?"), slots("Out"), _reader_infer,
                _create_kernel, attrs=READER_ATTRS, host_access="io", path_attrs=("files",),
                doc="Out = a batch reader over `files` (RecordIO) or the arrays in Data; "
                    "it opens lazily, on the first read"))


def _read_infer(ctx: InferContext) -> None:
    shapes, dtypes = ctx.attrs["shapes"], ctx.attrs["dtypes"]
    if len(shapes) != ctx.output_count("Out"):
        ctx.fail(f"read has {ctx.output_count('Out')} outputs for {len(shapes)} slots")
    ctx.set_outputs("Out", [TensorType((-1,) + tuple(s), d) for s, d in zip(shapes, dtypes)])


def _read_kernel(ctx: KernelContext):
    n = len(ctx.out_types)

    def read(reader):
        batch = reader.take()   # kernels never write into their inputs: no copy needed
        return batch[0] if n == 1 else tuple(batch)
    return read


register(OpSpec("read", slots("Reader"), slots("Out*"), _read_infer, _read_kernel,
                attrs={"shapes": [], "dtypes": []}, random=True, entry=True,
                host_access="io",
                doc="Out = the next batch of Reader, one var per slot; raises "
                    "fluid.EOFException at the end of the data"))
