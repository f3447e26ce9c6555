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
