"""Paddle 1.8's sequence/test_sequence_pool.py, ported: each pool type over LoD sequences
(here a padded batch with the lengths of the level pooled, its padding holding a non-zero
value), an empty sequence giving pad_value, and the gradients. In the two-level cases
Paddle pools the last level and keeps the first as the output's LoD: the rows are the
same. Paddle's is_test (MaxIndex kept or not) has no counterpart: the op is run as it is."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from paddle.common import lod_batch

POOL = {"AVERAGE": lambda s: s.mean(axis=0), "SUM": lambda s: s.sum(axis=0),
        "SQRT": lambda s: s.sum(axis=0) / np.sqrt(len(s)), "MAX": lambda s: np.amax(s, axis=0),
        "LAST": lambda s: s[-1], "FIRST": lambda s: s[0]}

# class -> (pooltype, pad_value, lod, step shape, max_relative_error of the gradient)
CASES = {}


def _cases(prefix, pooltype, pad_value, lods, step, grad_error=0.005, check_grad=True):
    for suffix, lod in lods.items():
        CASES[prefix + suffix] = (pooltype, pad_value, lod, step, grad_error, check_grad)


ONE_D = {"": [[11]], "Len0": [[0, 4, 0, 7, 0]], "Len0LoDLevel2": [[2, 0, 1, 2], [0, 4, 0, 7, 0]]}
CASES["TestSeqAvgPoolBatch1"] = ("AVERAGE", 0.0, [[11]], [23], 0.005, True)
CASES["TestSeqAvgPoolInstance0"] = ("AVERAGE", 0.0, [[0, 0, 4, 0, 3, 0, 0, 5, 0, 0]], [10],
                                    0.005, True)
_cases("TestSeqAvgPool", "AVERAGE", 0.0, ONE_D, [23])
_cases("TestSeqSumPool", "SUM", 0.1, ONE_D, [23])
_cases("TestSeqMaxPool", "MAX", 0.5, {"": [[13]], "Len0": [[0, 1, 1, 5, 6, 0]],
                                      "Len0LoDLevel2": [[2, 0, 3, 1], [0, 1, 1, 5, 6, 0]]}, [23])
_cases("TestSeqSqrtPool", "SQRT", 0.0, {"": [[11]], "Len0": [[0, 7, 0, 2, 2, 0]],
                                        "Len0LoDLevel2": [[1, 2, 0, 3], [0, 7, 0, 2, 2, 0]]},
       [23])
_cases("TestSeqLastPool", "LAST", 0.0, {"": [[11]], "Len0": [[0, 3, 4, 0, 4, 0]],
                                        "Len0LoDLevel2": [[1, 0, 2, 3], [0, 3, 4, 0, 4, 0]]},
       [23])
_cases("TestSeqFirstPool", "FIRST", 0.3, {"": [[11]], "Len0": [[0, 2, 0, 3, 6, 0]],
                                          "Len0LoDLevel2": [[1, 0, 2, 3], [0, 2, 0, 3, 6, 0]]},
       [23])
_cases("TestSeqAvgPool2D", "AVERAGE", 0.0, {"": [[4, 1, 3, 5]], "Len0": [[0, 5, 0, 8, 0]],
                                            "Len0LoDLevel2": [[1, 0, 4], [0, 5, 0, 8, 0]]},
       [3, 17])
_cases("TestSeqSumPool2D", "SUM", 0.2, {"": [[4, 1, 3, 5]], "Len0": [[0, 8, 0, 5, 0]],
                                        "Len0LoDLevel2": [[1, 0, 4], [0, 8, 0, 5, 0]]}, [3, 17])
_cases("TestSeqSqrtPool2D", "SQRT", 0.0, {"": [[4, 1, 3, 5]], "Len0": [[0, 8, 0, 5, 0]],
                                          "Len0LoDLevel2": [[1, 0, 2, 2], [0, 8, 0, 5, 0]]},
       [3, 17], grad_error=0.06)
MAX_2D = {"": [[4, 1, 3, 5]], "Len0": [[0, 3, 0, 10, 0]],
          "Len0LoDLevel2": [[1, 0, 2, 2], [0, 3, 0, 10, 0]]}
_cases("TestSeqMaxPool2D", "MAX", 0.0, MAX_2D, [3, 11])
_cases("TestSeqMaxPool2DInference", "MAX", 1.0, MAX_2D, [3, 11], check_grad=False)
_cases("TestSeqLastPool2D", "LAST", 0.0, {"": [[4, 1, 3, 5]], "Len0": [[0, 3, 0, 1, 9, 0]],
                                          "Len0LoDLevel2": [[1, 0, 2, 3], [0, 3, 0, 1, 9, 0]]},
       [3, 17])
_cases("TestSeqFirstPool2D", "FIRST", 0.0, {"": [[4, 1, 3, 5]], "Len0": [[0, 3, 0, 3, 7, 0]],
                                            "Len0LoDLevel2": [[1, 0, 2, 3],
                                                              [0, 3, 0, 3, 7, 0]]}, [3, 17])


def pool_case(name):
    pooltype, pad_value, lod, step, _, _ = CASES[name]
    lengths = lod[-1]   # the level pooled
    rng = np.random.RandomState(0)
    x = rng.uniform(0.1, 1, [sum(lengths)] + step).astype('float32')
    offsets = np.cumsum([0] + lengths)
    if pooltype == "MAX":   # one clear maximum per sequence (Paddle adds 2.0, or 1.0 in 2-d)
        for i, n in enumerate(lengths):
            if n:
                x[offsets[i] + rng.randint(n)] += 2.0 if len(step) == 1 else 1.0
    out = np.empty((len(lengths),) + tuple(step), 'float32')
    for i, n in enumerate(lengths):
        out[i] = pad_value if n == 0 else POOL[pooltype](x[offsets[i]:offsets[i + 1]])
    batch, lens = lod_batch(x, lengths)
    return {"X": batch, "Lengths": lens}, {"pooltype": pooltype, "pad_value": pad_value}, out


@pytest.mark.parametrize("name", list(CASES))
def test_check_output(name):   # OpTest's atol 1e-5
    inputs, attrs, out = pool_case(name)
    check_op("sequence_pool", inputs, attrs, reference=lambda **_: {"Out": out}, rtol=0,
             atol=1e-5, batch_unknown=False)


@pytest.mark.parametrize("name", list(CASES))
def test_check_grad(name):
    if not CASES[name][5]:
        return   # Paddle: no gradient check for the inference MAX pool
    inputs, attrs, _ = pool_case(name)
    kept = {"MaxIndex": 1} if attrs["pooltype"] == "MAX" else None   # as Paddle's outputs
    check_grad("sequence_pool", inputs, attrs, wrt=["X"], through=["Out"], output_counts=kept,
               rtol=CASES[name][4], atol=1e-8, max_elements=200)
