"""Batch readers over RecordIO files or in-memory arrays.

`BatchReader` turns a source of samples into batches, one array per declared slot, with
optional shuffling, several epochs, and a background thread that reads ahead into a
bounded queue so that reading overlaps compute::

    reader = BatchReader(FileSource("data-*.recordio"), batch_size=128,
                         shapes=[[13], [1]], dtypes=["float32", "float32"])
    x, y = reader.next()        # EOFException at the end of the data; reset() restarts

Sources yield *blocks*: a run of samples as columns (one array per slot, leading sample
dim). `FileSource` yields one block per run of `bulk_read.read_columns` (usually all the
chunks of a piece of up to 16 MB, copied once into fresh arrays), so no per-sample Python
work happens between the file and the batch, and the batches of a block are views of it.

Shuffling (Paddle's ``create_shuffle_reader``): fill a buffer of ``shuffle_buffer``
samples, permute it, emit it, refill. ``shuffle_buffer=None`` (or at least the dataset
size) shuffles the whole dataset, which is then kept in memory across epochs. Epoch ``e``
draws from ``default_rng([seed, e])``: a new order every epoch, the same sequence of orders
for the same seed, and `reset` replays it from epoch 0.
"""
from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Generator, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..errors import EOFException, ReaderError
from . import cache
from .sources import ArraySource, Block, FileSource

__all__ = ["BatchReader", "FileSource", "ArraySource", "Block"]

_GROUP = 64  # batches gathered before a hand-off between the reading thread and caller
_COPIES = 16  # batches copied at once from a block the reader does not own
_POLL_S = 0.05      # how often a blocked producer or consumer re-checks for a stop
_JOIN_S = 30.0      # how long close() waits for the thread to finish its current block


# ================================================================ slots

class _Slot(NamedTuple):
    shape: tuple[int, ...]   # per sample; -1 matches any size
    dtype: np.dtype

    def matches(self, shape: tuple[int, ...]) -> bool:
        return len(shape) == len(self.shape) and all(
            want in (-1, got) for want, got in zip(self.shape, shape))


def _slots(shapes: Sequence[Sequence[int]], dtypes: Sequence[Any]) -> tuple[_Slot, ...]:
    if len(shapes) != len(dtypes):
        raise ReaderError(f"{len(shapes)} shapes but {len(dtypes)} dtypes: give one of each "
                          "per slot")
    slots = []
    for shape, dtype in zip(shapes, dtypes):
        try:
            dims = tuple(-1 if d is None else int(d) for d in shape)
            dt = np.dtype(dtype)
        except TypeError as exc:
            raise ReaderError(f"bad slot shape {shape!r} or dtype {dtype!r}: {exc}") from None
        if any(d < -1 for d in dims):
            raise ReaderError(f"slot shape {list(shape)} has a negative size other than -1")
        slots.append(_Slot(dims, dt))
    if not slots:
        raise ReaderError("a reader needs at least one slot (shape and dtype)")
    return tuple(slots)


def _castable(got: np.dtype, want: np.dtype) -> bool:
    """Lossless casts, and float to float of any width."""
    return np.can_cast(got, want, "safe") or (got.kind == "f" and want.kind == "f")


def _conform(block: Block, slots: tuple[_Slot, ...]) -> Block:
    """Check a block against the declared slots and return it in per-sample form: cast
    where `_castable`, and a leading batch dim (Paddle wrote each sample as a batch of 1)
    folded into the sample dim when the declared shape lacks it."""
    cols = block.columns
    where = f"{block.origin}: record {block.first_record}"
    if len(cols) != len(slots):
        raise ReaderError(f"{where} holds {len(cols)} tensor(s); the reader declares "
                          f"{len(slots)} slot(s)")
    out, fresh, per_record = [], [], []
    for i, (col, slot) in enumerate(zip(cols, slots)):
        shape = col.shape[1:]
        if slot.matches(shape):
            per_record.append(1)
        elif len(shape) == len(slot.shape) + 1 and slot.matches(shape[1:]) and shape[0] >= 1:
            per_record.append(shape[0])
            col = col.reshape((-1,) + shape[1:])
        else:
            raise ReaderError(f"{where}: slot {i}: expected shape {list(slot.shape)} dtype "
                              f"{slot.dtype}, got shape {list(shape)} dtype {col.dtype}")
        owned = block.owned
        if col.dtype != slot.dtype:
            if not _castable(col.dtype, slot.dtype):
                raise ReaderError(f"{where}: slot {i}: expected shape {list(slot.shape)} "
                                  f"dtype {slot.dtype}, got shape {list(shape)} dtype "
                                  f"{col.dtype}, which does not cast safely")
            col, owned = col.astype(slot.dtype), True
        out.append(col)
        fresh.append(owned)
    if len(set(per_record)) > 1:
        raise ReaderError(f"{where}: slots disagree on samples per record (leading dims "
                          f"{per_record}, after matching the declared shapes)")
    return Block(block.origin, block.first_record, tuple(out), all(fresh))


# ================================================================ the pipeline

class _Config(NamedTuple):
    source: Any
    slots: tuple[_Slot, ...]
    batch_size: int
    shuffle: bool
    shuffle_buffer: int | None
    seed: int
    epochs: int | None
    drop_last: bool
    shard: tuple[int, int]


def _conformed(source: Any, cfg: _Config) -> Iterator[Block]:
    index, count = cfg.shard
    seen = 0
    for block in source.blocks():
        block = _conform(block, cfg.slots)
        n = len(block.columns[0])
        if count > 1:  # strided views: batches of them must be copied
            first = (index - seen) % count
            block = block._replace(columns=tuple(c[first::count] for c in block.columns),
                                   owned=False)
        seen += n
        if len(block.columns[0]):
            yield block


def _concat(pieces: list[tuple[np.ndarray, ...]], origin: str) -> tuple[np.ndarray, ...]:
    try:
        return tuple(np.concatenate([p[i] for p in pieces]) for i in range(len(pieces[0])))
    except ValueError as exc:
        raise ReaderError(f"{origin}: samples of one batch differ in shape (a slot declared "
                          f"with -1): {exc}") from exc


def _batched(blocks: Iterator[Block], batch_size: int, drop_last: bool
             ) -> Iterator[list[tuple[np.ndarray, ...]]]:
    """Lists of consecutive batches, one per block: the batch that spans into the block
    from earlier ones, then the whole batches inside it (in lists of at most `_COPIES` when
    they must be copied)."""
    pending: list[tuple[np.ndarray, ...]] = []
    count, origin = 0, ""
    for block in blocks:
        cols, origin = block.columns, block.origin
        n, start, out = len(cols[0]), 0, []
        if count:
            take = min(batch_size - count, n)
            pending.append(tuple(c[:take] for c in cols))
            count, start = count + take, take
            if count == batch_size:
                out.append(_concat(pending, origin))
                pending, count = [], 0
        most = n if block.owned else batch_size * _COPIES
        while n - start >= batch_size:
            stop = start + min(n - start, most) // batch_size * batch_size
            out += _split(cols, start, stop, batch_size, block.owned)
            start = stop
            if len(out) >= _COPIES and not block.owned:
                yield out
                out = []
        if start < n:
            pending.append(tuple(c[start:] for c in cols))
            count += n - start
        if out:
            yield out
    if count and not drop_last:
        yield [_concat(pending, origin)]


def _split(cols: tuple[np.ndarray, ...], start: int, stop: int, batch_size: int, owned: bool
           ) -> list[tuple[np.ndarray, ...]]:
    """The batches of rows [start, stop) (a whole number of them) as views of one
    C-contiguous array per slot: the block's own when it is owned, else a copy. One reshape
    per slot makes them all, so a batch costs no NumPy call of its own."""
    per_slot = []
    for c in cols:
        part = np.ascontiguousarray(c[start:stop]) if owned else np.array(c[start:stop])
        per_slot.append(list(part.reshape(((stop - start) // batch_size, batch_size)
                                          + c.shape[1:])))
    return list(zip(*per_slot))


def _gather(cols: tuple[np.ndarray, ...], order: np.ndarray, origin: str, step: int
            ) -> Iterator[Block]:
    for i in range(0, len(order), step):
        idx = order[i:i + step]
        yield Block(origin, 0, tuple(c[idx] for c in cols), True)


class _Whole(NamedTuple):
    columns: tuple[np.ndarray, ...]
    origin: str


def _shuffled(blocks: Iterator[Block], buffer: int | None, rng: np.random.Generator,
              step: int, keep: list) -> Iterator[Block]:
    """Fill ``buffer`` samples, permute, emit, refill. When the first fill exhausts the
    source, the whole dataset is appended to ``keep`` for later epochs."""
    pending: list[tuple[np.ndarray, ...]] = []
    count, origin, first_fill = 0, "", True
    limit = buffer if buffer is not None else float("inf")
    for block in blocks:
        pending.append(block.columns)
        count, origin = count + len(block.columns[0]), block.origin
        while count >= limit:
            cols = _concat(pending, origin)
            buf, rest = tuple(c[:buffer] for c in cols), tuple(c[buffer:] for c in cols)
            pending, count, first_fill = [rest], count - int(limit), False
            yield from _gather(buf, rng.permutation(len(buf[0])), origin, step)
    if count:
        cols = _concat(pending, origin)
        if first_fill:
            keep.append(_Whole(cols, origin))
        yield from _gather(cols, rng.permutation(count), origin, step)


def _pipeline(cfg: _Config) -> Generator[tuple[int, list[tuple[np.ndarray, ...]]], None, None]:
    """(epoch, batches) for every batch of every epoch, in lists (see `_batched`)."""
    source = cfg.source.resolved()
    keep: list[_Whole] = []
    epoch = 0
    while cfg.epochs is None or epoch < cfg.epochs:
        blocks = _conformed(source, cfg)
        if cfg.shuffle:
            rng = np.random.default_rng([cfg.seed, epoch])
            if keep:  # the whole dataset fits the buffer: reuse it, same draws as a refill
                whole = keep[0]
                order = rng.permutation(len(whole.columns[0]))
                blocks = _gather(whole.columns, order, whole.origin, cfg.batch_size)
            else:
                blocks = _shuffled(blocks, cfg.shuffle_buffer, rng, cfg.batch_size, keep)
        emitted = False
        for batches in _batched(blocks, cfg.batch_size, cfg.drop_last):
            emitted = True
            yield epoch, batches
        if not emitted:  # no data (or less than one batch with drop_last): never spin
            return
        epoch += 1


class _Sync:
    """Runs the pipeline in the caller's thread (``prefetch=0``). `get` gives ("items",
    epoch, batches), ("end", None, None) or ("error", exception, None)."""

    def __init__(self, cfg: _Config):
        self._gen: Generator | None = _pipeline(cfg)

    def get(self) -> tuple[str, Any, Any]:
        if self._gen is None:
            return "end", None, None
        try:
            epoch, batches = next(self._gen)
            return "items", epoch, batches
        except StopIteration:
            return "end", None, None
        except Exception as exc:
            return "error", exc, None

    def stop(self) -> None:
        gen, self._gen = self._gen, None
        if gen is not None:
            gen.close()


class _Threaded:
    """Runs the pipeline in a daemon thread that hands batches over through a queue; `get`
    as `_Sync`'s. Holds no reference to the `BatchReader`, so a reader that is dropped gets
    collected and its finalizer stops this.

    Batches cross the thread boundary in lists of one epoch: at least `_GROUP` batches (or
    ``prefetch``, if fewer), gathered from what the pipeline makes (for a file, all the
    batches of a piece of up to 16 MB). Every hand-off costs locking and waking the other
    thread, which must then win the GIL back from a caller busy training, so the caller
    takes a whole list at once and `BatchReader.next` hands its batches out without
    touching the queue.

    The thread waits for room before a hand-off (until fewer than ``prefetch`` batches
    wait), not after it: a thread that is behind finds the caller has already taken what
    it was waiting for, and goes straight on to the next piece. It reads ahead at most
    ``prefetch`` batches, one list, and the piece it is decoding (and, for a file, the
    bytes of the next piece, see `bulk_read.read_columns`)."""

    def __init__(self, cfg: _Config, prefetch: int):
        self.limit = max(1, prefetch)
        self.group = max(1, min(_GROUP, prefetch))
        self.queue: queue.Queue = queue.Queue()  # unbounded: `waiting` bounds it
        self.room = threading.Condition()
        self.waiting = 0  # batches in the queue
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(cfg,), daemon=True,
                                       name="fluid-batch-reader")
        self.thread.start()

    def _hand(self, item: tuple) -> bool:
        """Queue ``item`` once fewer than ``prefetch`` batches wait; False once stopping.
        Waiting before the hand-off, not after it, lets a thread that is behind go straight
        on to the next piece: by then the caller has taken what it was waiting for."""
        with self.room:
            while self.waiting >= self.limit and not self.stopping.is_set():
                self.room.wait(_POLL_S)
            if self.stopping.is_set():
                return False
            if item[0] == "items":
                self.waiting += len(item[2])
            self.queue.put(item)
        return True

    def _run(self, cfg: _Config) -> None:
        group: list = []  # batches of `epoch` not handed over yet
        epoch = 0
        try:
            gen = _pipeline(cfg)
            try:
                for e, batches in gen:
                    if e != epoch:  # a hand-off holds batches of one epoch
                        if group and not self._hand(("items", epoch, group)):
                            return
                        group, epoch = [], e
                    group += batches
                    if len(group) >= self.group:
                        if not self._hand(("items", epoch, group)):
                            return
                        group = []
            finally:
                gen.close()  # closes the open file now, in this thread
            if group and not self._hand(("items", epoch, group)):
                return
            self._hand(("end", None, None))
        except BaseException as exc:  # everything reaches the consumer; nothing is lost
            if not group or self._hand(("items", epoch, group)):
                self._hand(("error", exc, None))

    def get(self) -> tuple[str, Any, Any]:
        item = self._take()
        if item[0] == "items":
            with self.room:
                self.waiting -= len(item[2])
                self.room.notify()
        return item

    def _take(self) -> tuple[str, Any, Any]:
        try:
            return self.queue.get_nowait()
        except queue.Empty:
            pass
        while True:
            try:
                return self.queue.get(timeout=_POLL_S)
            except queue.Empty:
                if not self.thread.is_alive() and self.queue.empty():
                    return "error", ReaderError("the background reading thread ended "
                                                "without a result"), None

    def _drain(self) -> None:
        try:
            while True:
                self.queue.get_nowait()
        except queue.Empty:
            pass

    def stop(self) -> None:
        self.stopping.set()
        with self.room:
            self.room.notify_all()  # wakes a thread waiting for room
        if self.thread is not threading.current_thread():
            self.thread.join(_JOIN_S)
        self._drain()


# ================================================================ the reader

class BatchReader:
    """Batches from ``source`` (`FileSource` or `ArraySource`), one array per slot.

    ``shapes`` are per-sample shapes (no batch dim; -1 matches any size) and ``dtypes``
    one dtype per slot. ``epochs=None`` reads forever; the last batch of each epoch is
    short unless ``drop_last``. ``prefetch`` batches are read ahead by a background thread
    (``prefetch=0``: no thread, read on demand). ``shard=(i, n)`` keeps samples ``i, i+n,
    ...`` of the source (one trainer of ``n``). The thread starts on the first `next`.
    Files whose decoded data fit ``cache_bytes`` (default 256 MB; 0: never) are decoded
    once and later epochs served from memory (io/cache.py).
    """

    def __init__(self, source: Any, batch_size: int, shapes: Sequence[Sequence[int]],
                 dtypes: Sequence[Any], shuffle: bool = False, shuffle_buffer: int | None = None,
                 seed: int | None = None, epochs: int | None = 1, drop_last: bool = False,
                 prefetch: int = 4, shard: tuple[int, int] = (0, 1),
                 cache_bytes: int | None = None):
        if not hasattr(source, "blocks"):
            raise ReaderError(f"source must be a FileSource or an ArraySource, got "
                              f"{type(source).__name__}")
        _positive("batch_size", batch_size)
        if epochs is not None:
            _positive("epochs", epochs)
        if shuffle_buffer is not None:
            _positive("shuffle_buffer", shuffle_buffer)
        if not isinstance(prefetch, (int, np.integer)) or prefetch < 0:
            raise ReaderError(f"prefetch must be an int >= 0, got {prefetch!r}")
        if seed is None:
            entropy = np.random.SeedSequence().entropy  # one int, drawn fresh from the OS
            assert isinstance(entropy, int)
            seed = entropy  # fixed now: reset() replays it
        elif not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ReaderError(f"seed must be an int >= 0 or None, got {seed!r}")
        index, count = shard
        if not 0 <= index < count:
            raise ReaderError(f"shard must be (index, count) with 0 <= index < count, got "
                              f"{shard!r}")
        self.source = source
        self._cfg = _Config(_cached(source, cache_bytes), _slots(shapes, dtypes),
                            int(batch_size), bool(shuffle),
                            None if shuffle_buffer is None else int(shuffle_buffer), int(seed),
                            None if epochs is None else int(epochs), bool(drop_last),
                            (int(index), int(count)))
        self.prefetch = int(prefetch)
        self._pipe: _Sync | _Threaded | None = None
        self._finalizer: weakref.finalize | None = None
        self._closed = False
        self._rewind()

    # -- state
    def _rewind(self) -> None:
        self._done: BaseException | None = None  # EOFException or the ReaderError to repeat
        # batches and samples of the epoch returned before the current group
        self._epoch, self._batch, self._samples = 0, 0, 0
        self._taken = 0  # batches returned since the last reset, before the current group
        self._group: list = []  # batches handed over by the pipeline; `next` walks them
        self._pos = self._have = 0

    def _taken_from_group(self) -> tuple[int, int]:
        """(batches, samples) returned from the current group so far."""
        taken = self._group[:self._pos]
        return len(taken), sum(len(b[0]) for b in taken)

    def _forget_group(self) -> None:
        """Count the batches taken from the current group, and drop the rest."""
        batches, samples = self._taken_from_group()
        self._batch, self._samples = self._batch + batches, self._samples + samples
        self._taken += batches
        self._group, self._pos, self._have = [], 0, 0

    def state(self) -> dict[str, int]:
        """Where the reader stands: the epoch of the last batch returned, how many batches
        of that epoch were returned, and the samples returned since the last `reset`.
        After the end of the data, ``epoch`` is the number of epochs read."""
        batches, samples = self._taken_from_group()
        return {"epoch": self._epoch, "batch": self._batch + batches,
                "samples": self._samples + samples}

    def tell(self) -> int:
        """How many batches `next` returned since the last `reset` (or since creation)."""
        return self._taken + self._pos

    def seek(self, position: int) -> None:
        """Make the next `next` return the batch it returned as number ``position``
        (counting from 0 at the last `reset`), with the same contents: batches the reader
        still holds are handed out again; otherwise it starts again from the first epoch
        (the same shuffle orders) and reads up to ``position``. A closed reader or one at
        the end of its data reads again."""
        if isinstance(position, bool) or not isinstance(position, (int, np.integer)) or \
                position < 0:
            raise ReaderError(f"seek takes a batch count >= 0, got {position!r}")
        position = int(position)
        if self._taken <= position <= self._taken + self._have and not self._closed:
            self._pos = position - self._taken
            return
        self.reset()
        for _ in range(position):
            self.next()

    @property
    def batch_size(self) -> int:
        return self._cfg.batch_size

    # -- reading
    def next(self) -> tuple[np.ndarray, ...]:
        """The next batch: one C-contiguous, writable array per slot, shaped
        ``(batch, *shape)``. Raises `EOFException` at the end of the data, `ReaderError`
        for bad data or a failure in the reading thread (the cause chained)."""
        batch = self.take()
        if batch[0].flags.writeable:
            return batch
        return tuple(a.copy() for a in batch)   # a view of the cache: the caller's own copy

    def take(self) -> tuple[np.ndarray, ...]:
        """The next batch as `next` gives it, except that its arrays may be read-only
        views of the reader's cache (io/cache.py) instead of copies: for a consumer that
        never writes into a batch, like the `read` op of a compiled program."""
        pos = self._pos
        if pos < self._have:  # the usual case: called once per training step, keep it short
            self._pos = pos + 1
            return self._group[pos]
        return self._next_group()

    def unread(self) -> None:
        """Give back the batch the last `next` (or `take`) returned, so that the next call
        returns it again: a training step that fails after taking its batch calls this, so
        that no sample is skipped. Only the most recent batch can be given back."""
        if self._pos == 0:
            raise ReaderError("unread() gives back the batch the last next() returned, "
                              "and there is none to give back")
        self._pos -= 1

    def skip(self, batches: int = 1) -> None:
        """Drop the next ``batches`` batches, as if they were read: for a batch that makes
        every step fail (the failing step gives it back with `unread`, so the next call
        would read it again for ever). Raises `EOFException` when the data ends first."""
        if isinstance(batches, bool) or not isinstance(batches, (int, np.integer)) or \
                batches < 0:
            raise ReaderError(f"skip takes a batch count >= 0, got {batches!r}")
        for _ in range(int(batches)):
            self.take()

    def _next_group(self) -> tuple[np.ndarray, ...]:
        if self._closed:
            raise ReaderError("this reader is closed; create a new one or call reset()")
        if self._done is not None:
            raise _again(self._done)
        if self._pipe is None:
            self._start()
        assert self._pipe is not None
        kind, value, batches = self._pipe.get()
        self._forget_group()
        if kind == "items":
            if value != self._epoch:
                self._epoch, self._batch = value, 0
            self._group, self._have, self._pos = batches, len(batches), 1
            return batches[0]
        self._stop()
        if kind == "end":
            self._epoch, self._batch = self._epoch + 1, 0
            self._done = EOFException(_end_of_data(self._epoch, self.source, self._cfg.epochs))
        elif isinstance(value, ReaderError):
            self._done = value
        else:
            try:
                raise ReaderError(f"reading {self.source!r} failed: {type(value).__name__}: "
                                  f"{value}") from value
            except ReaderError as err:
                self._done = err
        raise self._done

    def __iter__(self) -> Iterator[tuple[np.ndarray, ...]]:
        """Batches until the end of the data (the EOFException ends the loop)."""
        while True:
            try:
                yield self.next()
            except EOFException:
                return

    def _start(self) -> None:
        pipe: _Sync | _Threaded = (_Threaded(self._cfg, self.prefetch) if self.prefetch
                                   else _Sync(self._cfg))
        self._pipe = pipe
        self._finalizer = weakref.finalize(self, pipe.stop)

    def _stop(self) -> None:
        self._forget_group()  # so that `next` takes the slow path, which checks the state
        if self._finalizer is not None:
            self._finalizer()  # runs pipe.stop once, then detaches
        self._pipe = self._finalizer = None

    def reset(self) -> None:
        """Start again from the first epoch (the same shuffle orders). Safe at any time:
        mid-epoch, after EOF, after an error, after `close` (which it undoes)."""
        self._stop()
        self._closed = False
        self._rewind()

    def close(self) -> None:
        """Stop the reading thread and close the files. Idempotent."""
        self._stop()
        self._closed = True

    def __enter__(self) -> BatchReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        slots = ", ".join(f"{s.dtype}{list(s.shape)}" for s in self._cfg.slots)
        return (f"BatchReader({self.source!r}, batch_size={self._cfg.batch_size}, "
                f"slots=[{slots}], epoch={self._epoch}, batch={self.state()['batch']})")


def _cached(source: Any, budget: int | None) -> Any:
    """A file source that keeps its first pass in memory (io/cache.py) when it fits."""
    if budget is None:
        budget = cache.DEFAULT_BUDGET   # read now: a session may change it
    if not isinstance(budget, (int, np.integer)) or isinstance(budget, bool) or budget < 0:
        raise ReaderError(f"cache_bytes must be an int >= 0 or None, got {budget!r}")
    return cache.CachedSource(source, int(budget)) if isinstance(source, FileSource) and budget \
        else source


def _end_of_data(epochs_read: int, source: Any, epochs: int | None) -> str:
    """The end-of-data message: how far the reader went, and how to read further."""
    return (f"end of data after {epochs_read} epoch(s) of {source!r} (the reader was made "
            f"with epochs={epochs}); call reset() to start again, or make the reader with "
            f"epochs=None to read for ever, or epochs=N for N passes over the data")


def _again(exc: BaseException) -> BaseException:
    """A fresh copy of a stored end-of-data or failure (re-raising one object would grow
    its traceback on every call)."""
    fresh = type(exc)(*exc.args)
    fresh.__cause__ = exc.__cause__
    return fresh


def _positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ReaderError(f"{name} must be a positive int, got {value!r}")

