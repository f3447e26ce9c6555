"""The ops behind IfElse and is_empty, one at a time through the op harness (their
gradients go through IfElse in tests/frontend/test_control_flow2.py)."""
import numpy as np
import pytest

from .harness import check_op, run_forward


def test_row_split_and_merge_ops(rng):
    x, mask = rng.standard_normal((4, 2)), np.array([[True], [False], [False], [True]])
    got = run_forward("split_lod_tensor", {"X": x, "Mask": mask})   # sizes known when run
    np.testing.assert_array_equal(got["OutTrue"][0], x[[0, 3]])
    np.testing.assert_array_equal(got["OutFalse"][0], x[[1, 2]])
    check_op("merge_lod_tensor", {"X": mask, "Mask": mask, "InTrue": x[:2], "InFalse": x[2:]},
             reference=lambda **_: x[[0, 2, 3, 1]], batch_unknown=False)
    # their gradients (each other) against finite differences: through IfElse, in
    # tests/frontend/test_control_flow2.py
    with pytest.raises(ValueError, match="one row per input row"):
        run_forward("merge_lod_tensor", {"X": mask, "Mask": mask, "InTrue": x[:1],
                                         "InFalse": x[1:]})


def test_is_empty_op():
    for shape, want in (((0, 3), True), ((2, 3), False)):
        got = run_forward("is_empty", {"X": np.zeros(shape)})["Out"][0]
        assert got.dtype == bool and got.tolist() == [want]
