"""The indexing and rearranging ops against PyTorch, forward and backward in float64:
gather (index_select on dim 0), topk, and the others where torch has the same op."""
import numpy as np
import pytest
from ops.harness import check_op
from ops.test_against_torch import close, ours, t

torch = pytest.importorskip("torch")


def _backward(outputs, cot, *leaves):
    (outputs * torch.tensor(cot)).sum().backward()
    return [leaf.grad for leaf in leaves]


def test_gather_accumulating_matches_torch_index_select(rng):
    x = rng.standard_normal((7, 3, 2))
    idx = np.array([4, 0, 4, 6, 4], "int64")
    got, grads, cot = ours("gather", {"X": x, "Index": idx}, {"overwrite": False}, ["X"],
                           "Out")
    tx = t(x)
    y = torch.index_select(tx, 0, torch.tensor(idx))
    close(got["Out"], y)
    close(grads["X"], _backward(y, cot, tx)[0])


def test_top_k_matches_torch(rng):
    x = rng.standard_normal((4, 3, 30))
    got, grads, cot = ours("top_k", {"X": x}, {"k": 5}, ["X"], "Out")
    tx = t(x)
    values, indices = torch.topk(tx, 5, dim=-1)
    close(got["Out"], values)
    np.testing.assert_array_equal(got["Indices"], indices.numpy())
    close(grads["X"], _backward(values, cot, tx)[0])


def test_unique_with_counts_matches_torch(rng):
    x = rng.integers(0, 20, 300).astype("int64")
    got = check_op("unique_with_counts", {"X": x}, {"dtype": "int64"},
                   output_counts={"Out": 1, "Index": 1, "Count": 1})
    got = {slot: values[0] for slot, values in got.items()}
    values, counts = torch.unique(torch.tensor(x), sorted=True, return_counts=True)
    order = np.argsort(got["Out"])
    np.testing.assert_array_equal(got["Out"][order], values.numpy())
    np.testing.assert_array_equal(got["Count"][order], counts.numpy())
    np.testing.assert_array_equal(got["Out"][got["Index"]], x)


def _check(op_type, inputs, attrs, wrt, torch_fn, out_slot="Out"):
    """Our op against ``torch_fn(*leaves)`` (leaves: the float inputs in ``wrt``, as torch
    tensors that require a gradient): the output and the gradients of sum(out * cot)."""
    got, grads, cot = ours(op_type, inputs, attrs, wrt, out_slot)
    leaves = [t(inputs[s]) for s in wrt]
    y = torch_fn(*leaves)
    close(got[out_slot], y)
    for slot, g in zip(wrt, _backward(y, cot, *leaves)):
        close(grads[slot], g)


def test_index_select_and_index_sample_match_torch(rng):
    x = rng.standard_normal((4, 6, 3))
    idx = np.array([5, 0, 5, 2])
    _check("index_select", {"X": x, "Index": idx}, {"dim": 1}, ["X"],
           lambda a: torch.index_select(a, 1, torch.tensor(idx)))
    x2 = rng.standard_normal((5, 7))
    cols = rng.integers(0, 7, (5, 9))
    _check("index_sample", {"X": x2, "Index": cols}, {}, ["X"],
           lambda a: torch.take_along_dim(a, torch.tensor(cols), dim=1))


def test_gather_nd_and_scatter_nd_add_match_torch(rng):
    x = rng.standard_normal((4, 5, 3))
    index = np.stack([rng.integers(0, 4, 7), rng.integers(0, 5, 7)], -1)
    at = tuple(torch.tensor(index[:, i]) for i in range(2))
    _check("gather_nd", {"X": x, "Index": index}, {}, ["X"], lambda a: a[at])
    updates = rng.standard_normal((7, 3))
    _check("scatter_nd_add", {"X": x, "Index": index, "Updates": updates}, {},
           ["X", "Updates"], lambda a, u: a.index_put(at, u, accumulate=True))


def test_scatter_accumulating_matches_torch(rng):
    x, ids = rng.standard_normal((6, 3)), np.array([4, 1, 4])
    updates = rng.standard_normal((3, 3))
    rows = torch.tensor(ids)

    def reference(a, u):   # the listed rows zeroed, then every update added
        keep = torch.ones(6, 1, dtype=a.dtype).index_fill(0, rows, 0.0)
        return (a * keep).index_add(0, rows, u)
    _check("scatter", {"X": x, "Ids": ids, "Updates": updates}, {"overwrite": False},
           ["X", "Updates"], reference)


def test_flip_roll_stack_unstack_expand_match_torch(rng):
    x = rng.standard_normal((3, 4, 5))
    _check("flip", {"X": x}, {"dims": [0, 2]}, ["X"], lambda a: torch.flip(a, [0, 2]))
    _check("roll", {"X": x}, {"shifts": [2, -3], "dims": [1, 2]}, ["X"],
           lambda a: torch.roll(a, [2, -3], [1, 2]))
    _check("expand", {"X": x}, {"expand_times": [2, 1, 3]}, ["X"],
           lambda a: a.repeat(2, 1, 3))
    ys = [rng.standard_normal((3, 4)) for _ in range(3)]
    got, grads, cot = ours("stack", {"X": ys}, {"axis": 1}, ["X"], "Y")
    leaves = [t(y) for y in ys]
    stacked = torch.stack(leaves, dim=1)
    close(got["Y"], stacked)
    for g, want in zip(grads["X"] if isinstance(grads["X"], list) else [grads["X"]],
                       _backward(stacked, cot, *leaves)):
        close(g, want)
    parts = check_op("unstack", {"X": x}, {"axis": 1, "num": 4}, output_counts={"Y": 4})["Y"]
    for part, want in zip(parts, torch.unbind(t(x, grad=False), dim=1)):
        close(part, want)


def test_image_rearrangements_match_torch(rng):
    F = torch.nn.functional
    x = rng.standard_normal((2, 8, 3, 5))
    _check("pixel_shuffle", {"X": x}, {"upscale_factor": 2}, ["X"],
           lambda a: F.pixel_shuffle(a, 2))
    _check("shuffle_channel", {"X": x}, {"group": 4}, ["X"],
           lambda a: F.channel_shuffle(a, 4))
    for mode, torch_mode in (("constant", "constant"), ("reflect", "reflect"),
                             ("edge", "replicate")):
        _check("pad2d", {"X": x}, {"paddings": [2, 1, 0, 3], "mode": mode}, ["X"],
               lambda a, m=torch_mode: F.pad(a, (0, 3, 2, 1), mode=m))


def test_strided_slice_matches_torch(rng):
    x = rng.standard_normal((6, 7, 5))
    attrs = {"axes": [0, 2], "starts": [1, -4], "ends": [100, 5], "strides": [2, 3]}
    _check("strided_slice", {"Input": x}, attrs, ["Input"], lambda a: a[1::2, :, -4:5:3])
