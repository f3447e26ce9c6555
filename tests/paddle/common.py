"""What the ports of Paddle 1.8's unit tests share: a Paddle program as a compiled method.

A Paddle test builds ops under ``program_guard`` and runs ``exe.run(main, feed=...,
fetch_list=[...])``. Here the same layers are called in a traced method whose arguments
feed the data vars of ``feeds`` and whose return values are the fetch list; gradients a
Paddle test fetches by ``x.grad_name`` come from ``fluid.gradients``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import fluid


def compile_fetches(build: Callable[[], Sequence[Any]], feeds: Sequence[str] = (),
                    seed: int = 0) -> Callable[..., list[np.ndarray]]:
    """A function of the arrays of ``feeds`` (by name, as Paddle's feed dict) returning
    the values of what ``build()`` returns (Paddle's fetch list), each an array of at
    least one dim (as Paddle's fetches are)."""
    shapes: list[tuple[int, ...]] = []

    class Ported(fluid.Program):
        @fluid.network(*feeds)
        def main(self):
            fetches = tuple(build())
            shapes[:] = [tuple(v.shape) for v in fetches]
            return fetches

    prog = Ported().Compile(seed=seed)

    def run(**feed: Any) -> list[np.ndarray]:
        values = prog.main(*[feed[n] for n in feeds])
        # a one-element value comes back as a number: give it its var's shape
        return [np.asarray(v).reshape(s) if np.ndim(v) == 0 and min(s, default=0) > 0
                else np.atleast_1d(np.asarray(v)) for v, s in zip(values, shapes)]
    run.program = prog   # type: ignore[attr-defined]
    return run


def run_fetches(build: Callable[[], Sequence[Any]], **feed: Any) -> list[np.ndarray]:
    """One run: ``exe.run(main, feed=feed, fetch_list=build())``."""
    return compile_fetches(build, list(feed))(**feed)


def paddle_layer(name: str, stand_in: Callable[..., Any]) -> Callable[..., Any]:
    """``fluid.layers.<name>`` where the project has it, else ``stand_in`` (the same
    values from layers it has): the ports use Paddle's names either way."""
    return getattr(fluid.layers, name, None) or stand_in


zeros = paddle_layer("zeros", lambda shape, dtype, force_cpu=False:
                     fluid.layers.fill_constant(shape, dtype, 0.0))
create_global_var = paddle_layer(
    "create_global_var", lambda shape, value, dtype, persistable=False, force_cpu=False,
    name=None: fluid.layers.fill_constant(shape, dtype, value))


def fill(value: Any, shape: Sequence[int], dtype: str = 'int32') -> Callable[[], Any]:
    """A branch function: ``fill_constant(shape, dtype, value)``."""
    return lambda: fluid.layers.fill_constant(shape=shape, dtype=dtype, value=value)


def tuple_branches() -> list[Callable[[], Any]]:
    """test_case's and test_switch_case's three branches returning an (int32, float32)
    pair, of different shapes each."""
    return [lambda a=a, b=b, sa=sa, sb=sb: (fill(a, sa)(), fill(b, sb, 'float32')())
            for a, b, sa, sb in ((1, 2, [1, 2], [2, 3]), (3, 4, [3, 4], [4, 5]),
                                 (5, 6, [5], [5, 6]))]


def three_point_preds() -> tuple[Any, Any, Any, Any]:
    """test_case's x = 0.3, y = 0.1, z = 0.2 and its two preds: pred_1 = z < x (true),
    pred_2 = x < y (false); returns (x, y, z, (pred_1, pred_2))."""
    x = fluid.layers.fill_constant(shape=[1], dtype='float32', value=0.3)
    y = fluid.layers.fill_constant(shape=[1], dtype='float32', value=0.1)
    z = fluid.layers.fill_constant(shape=[1], dtype='float32', value=0.2)
    return x, y, z, (fluid.layers.less_than(z, x), fluid.layers.less_than(x, y))


def three_element_arrays() -> tuple[Any, Any]:
    """test_while_op's and test_while_loop_op's arrays: ``mem_array`` = [zeros(10)] and
    ``data_array`` = [d0, d1, d2], the data vars d0, d1, d2 (float32 [10])."""
    layers = fluid.layers
    d = [layers.data(f"d{k}", shape=[10], append_batch_size=False, dtype='float32')
         for k in range(3)]
    i = zeros(shape=[1], dtype='int64')
    i.stop_gradient = True
    mem_array = layers.array_write(x=zeros(shape=[10], dtype='float32'), i=i)
    data_array = layers.array_write(x=d[0], i=i)
    i = layers.increment(i)
    layers.array_write(d[1], i, array=data_array)
    i = layers.increment(i)
    layers.array_write(d[2], i, array=data_array)
    return mem_array, data_array


#: What the padded positions of a batch made from LoD sequences hold: not zero, so that an
#: op that ignored the lengths would show it.
PAD = 7


def padded(sequences: Sequence[Any], dtype: str, pad: Any = PAD) -> tuple[np.ndarray,
                                                                          np.ndarray]:
    """A LoD level of sequences (each an array [len, ...]) as Paddle fed them, as a padded
    batch ``[B, T, ...]`` (T the longest length) and its int64 ``lengths`` [B]."""
    arrays = [np.asarray(s, dtype=dtype) for s in sequences]
    lengths = np.array([len(a) for a in arrays], np.int64)
    batch = np.full((len(arrays), max(lengths, default=0)) + arrays[0].shape[1:], pad, dtype)
    for b, a in enumerate(arrays):
        batch[b, :len(a)] = a
    return batch, lengths


def lod_batch(flat: np.ndarray, lod: Sequence[int], pad: Any = PAD
              ) -> tuple[np.ndarray, np.ndarray]:
    """A LoD tensor (its rows and one level of sequence lengths) as a padded batch and
    its lengths."""
    return padded(np.split(np.asarray(flat), np.cumsum(lod)[:-1]), np.asarray(flat).dtype.name,
                  pad)


def lod_rows(batch: np.ndarray, lengths: Sequence[int]) -> np.ndarray:
    """The valid rows of a padded batch, one sequence after another (Paddle's LoD
    tensor)."""
    return np.concatenate([batch[b, :n] for b, n in enumerate(lengths)])


def check_op_output(op_type: str, inputs: dict, expected: Any, attrs: dict | None = None
                    ) -> None:
    """OpTest.check_output: the op on ``inputs`` gives ``expected`` (an array for its first
    output, or a dict of them), to OpTest's default tolerance."""
    from ops.harness import check_op
    check_op(op_type, inputs, attrs or {}, reference=lambda **_: expected,
             batch_unknown=False)


def check_op_grad(op_type: str, inputs: dict, wrt: Sequence[str], attrs: dict | None = None,
                  rtol: float = 5e-3) -> None:
    """OpTest.check_grad: the gradients of ``wrt`` against central differences, to
    OpTest's default max_relative_error (0.005), on up to 200 values of each."""
    from ops.harness import check_grad
    check_grad(op_type, inputs, attrs or {}, wrt=wrt, rtol=rtol, max_elements=200)
