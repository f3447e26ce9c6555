"""The recurrent ops' gate activations (ops/rnn.py, `activation`): a whole row of tanh
and sigmoid spans runs as one ufunc call per pass with per-column operands, giving the
bits of each span activated on its own view (NaN, infinities, -0 and inputs beyond the
sigmoid clip included); a strided row takes the per-span calls."""
import numpy as np
import pytest

from fluid_interactive.ops import rnn

H = 7


def gates(dtype, width):
    rng = np.random.default_rng(0)
    v = (rng.standard_normal((9, width)) * 6).astype(dtype)
    v[0, :6] = [-0.0, 0.0, np.nan, np.inf, -np.inf, 40.0]
    v[1, H:H + 4] = [-0.0, np.nan, 6.5, 13.0]
    return v


def each_span(v, clip):
    """The activation span by span, on views (what the strided path does)."""
    np.tanh(v[:, :H], out=v[:, :H])
    s = v[:, H:4 * H]
    if clip:
        np.minimum(s, rnn.SIGMOID_RANGE[1] * rnn.PRE_SCALE["sigmoid"], out=s)
    np.tanh(s, out=s)
    np.multiply(s, 0.5, out=s)
    np.add(s, 0.5, out=s)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("clip", [True, False])
def test_a_whole_row_gives_the_bits_of_each_span_alone(dtype, clip):
    act = rnn.activation(np, [(0, H, "tanh"), (H, 4 * H, "sigmoid")], clip=clip)
    bits = {"float16": np.int16, "float32": np.int32, "float64": np.int64}[dtype]
    with np.errstate(invalid="ignore"):
        for v in (gates(dtype, 4 * H), gates(dtype, 5 * H)[:, :4 * H]):   # whole, strided
            got, want = v.copy(), v.copy()
            act(got)
            each_span(want, clip)
            assert np.array_equal(got.view(bits), want.view(bits))


def test_the_whole_row_takes_one_call_per_pass(monkeypatch):
    calls = []

    def counted(name):
        ufunc = getattr(np, name)
        return lambda *a, **k: calls.append(name) or ufunc(*a, **k)
    act = rnn.activation(np, [(0, H, "tanh"), (H, 4 * H, "sigmoid")], clip=True)
    for name in ("minimum", "tanh", "multiply", "add"):
        monkeypatch.setattr(np, name, counted(name))
    act(gates("float32", 4 * H))
    assert calls == ["minimum", "tanh", "multiply", "add"]
