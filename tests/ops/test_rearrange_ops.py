"""flip, roll, pixel_shuffle, shuffle_channel, space_to_depth and temporal_shift on the
inputs of Paddle 1.8's unit tests, with each test's own NumPy reference rewritten."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from ops.traced import traced_types

from fluid_interactive.errors import ShapeError


@pytest.mark.parametrize("shape,dims", [((6, 4, 2, 3), [0, 1]), ((2, 3), [0]),
                                        ((3, 4, 5), [-1, 0])])
def test_flip_matches_paddle_cases(rng, shape, dims):
    x = rng.random(shape)
    check_op("flip", {"X": x}, {"dims": dims},
             reference=lambda X, dims: np.flip(X, axis=tuple(dims)))
    check_grad("flip", {"X": x}, {"dims": dims})


@pytest.mark.parametrize("shape,shifts,dims,dtype", [
    ((100, 4, 5), [101, -1], [0, -2], "float64"), ((100, 10, 5), [8, -1], [-1, -2], "float32"),
    ((4, 3), [1], [], "float64"), ((4, 3), [-7], [], "float64"),
])
def test_roll_matches_paddle_cases(rng, shape, shifts, dims, dtype):
    x = rng.random(shape).astype(dtype)
    check_op("roll", {"X": x}, {"shifts": shifts, "dims": dims},
             reference=lambda X, shifts, dims: np.roll(X, shifts, dims or None))
    check_grad("roll", {"X": x}, {"shifts": shifts, "dims": dims})


def test_flip_and_roll_errors():
    with pytest.raises(ShapeError, match="flip: dims must name at least one dim"):
        traced_types("flip", {"X": ((2, 3), "float32")}, {"dims": []})
    with pytest.raises(ShapeError, match=r"flip: dims \[0, -2\] name a dim twice"):
        traced_types("flip", {"X": ((2, 3), "float32")}, {"dims": [0, -2]})
    with pytest.raises(ShapeError, match=r"shifts \[1\] must be non-empty and have one entry "
                                         r"per dim in dims \[0, 1\]"):
        traced_types("roll", {"X": ((2, 3), "float32")}, {"shifts": [1], "dims": [0, 1]})


def _pixel_shuffle_reference(X, upscale_factor):
    """Paddle's test: reshape, transpose, reshape."""
    n, c, h, w = X.shape
    r = upscale_factor
    y = X.reshape(n, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (r * r), h * r, w * r)


def test_pixel_shuffle_matches_paddle_case(rng):
    x = rng.random((2, 9, 4, 4))
    check_op("pixel_shuffle", {"X": x}, {"upscale_factor": 3},
             reference=_pixel_shuffle_reference)
    check_grad("pixel_shuffle", {"X": x}, {"upscale_factor": 3})


def test_shuffle_channel_matches_paddle_case(rng):
    x = rng.random((10, 16, 4, 4)).astype("float32")

    def reference(X, group):
        n, c, h, w = X.shape
        return X.reshape(-1, group, c // group, h, w).transpose(0, 2, 1, 3, 4).reshape(
            -1, c, h, w)
    check_op("shuffle_channel", {"X": x}, {"group": 4}, reference=reference)
    check_grad("shuffle_channel", {"X": x.astype("float64")}, {"group": 4})


def _reorg(X, blocksize):
    """Paddle's test reference for space_to_depth, element by element (written as
    index arithmetic over the flat arrays)."""
    batch, channel, height, width = X.shape
    b = blocksize
    c_out = channel // (b * b)
    flat_in, flat_out = X.reshape(-1), np.zeros(X.size, X.dtype)
    k, j, i = np.meshgrid(np.arange(channel), np.arange(height), np.arange(width),
                          indexing="ij")
    for n in range(batch):
        in_index = i + width * (j + height * (k + channel * n))
        offset = k // c_out
        w2, h2 = i * b + offset % b, j * b + offset // b
        out_index = w2 + width * b * (h2 + height * b * (k % c_out + c_out * n))
        flat_out[out_index] = flat_in[in_index]
    return flat_out.reshape(batch, channel * b * b, height // b, width // b)


@pytest.mark.parametrize("shape,blocksize", [((32, 12, 6, 6), 2), ((32, 8, 6, 6), 2),
                                             ((32, 9, 6, 6), 3), ((2, 8, 4, 6), 2)])
def test_space_to_depth_matches_paddle_cases(rng, shape, blocksize):
    x = rng.random(shape)
    check_op("space_to_depth", {"X": x}, {"blocksize": blocksize}, reference=_reorg)
    check_grad("space_to_depth", {"X": x}, {"blocksize": blocksize}, max_elements=20)


def test_image_rearrangement_errors():
    with pytest.raises(ShapeError, match=r"pixel_shuffle: the channels of X \[2, 8, 4, 4\] "
                                         r"must divide by upscale_factor\*\*2 = 9"):
        traced_types("pixel_shuffle", {"X": ((2, 8, 4, 4), "float32")}, {"upscale_factor": 3})
    with pytest.raises(ShapeError, match="must divide into group=3 groups"):
        traced_types("shuffle_channel", {"X": ((2, 8, 4, 4), "float32")}, {"group": 3})
    with pytest.raises(ShapeError, match=r"space_to_depth: X \[2, 8, 5, 4\] needs channels"):
        traced_types("space_to_depth", {"X": ((2, 8, 5, 4), "float32")}, {"blocksize": 2})
    with pytest.raises(ShapeError, match=r"X must be 4-D \[N, C, H, W\], got \[2, 8\]"):
        traced_types("pixel_shuffle", {"X": ((2, 8), "float32")})
    assert traced_types("pixel_shuffle", {"X": ((-1, 8, -1, 4), "float32")},
                        {"upscale_factor": 2}) == [((-1, 2, -1, 8), "float32")]


def _temporal_reference(X, seg_num, shift_ratio):
    """Paddle's test: pad the time axis, take three slices, join them."""
    shape = X.shape
    x = X.reshape((-1, seg_num) + shape[1:])
    padded = np.pad(x, ((0, 0), (1, 1), (0, 0), (0, 0), (0, 0)), "constant")
    c1, c2 = int(shape[1] * shift_ratio), int(shape[1] * 2 * shift_ratio)
    joined = np.concatenate([padded[:, :seg_num, :c1], padded[:, 2:seg_num + 2, c1:c2],
                             padded[:, 1:seg_num + 1, c2:]], axis=2)
    return joined.reshape(shape)


@pytest.mark.parametrize("shape,seg,ratio", [((6, 4, 4, 4), 3, 0.25), ((4, 9, 7, 7), 2, 0.2),
                                             ((3, 10, 5, 5), 1, 0.3)])
def test_temporal_shift_matches_paddle_cases(rng, shape, seg, ratio):
    x = rng.random(shape)
    attrs = {"seg_num": seg, "shift_ratio": ratio}
    check_op("temporal_shift", {"X": x}, attrs, reference=_temporal_reference)
    check_grad("temporal_shift", {"X": x}, attrs)
    with pytest.raises(ShapeError, match="must be a multiple of seg_num=5"):
        traced_types("temporal_shift", {"X": (shape, "float32")}, {"seg_num": 5})
