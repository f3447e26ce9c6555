"""unfold, im2sequence, affine_grid and grid_sampler: forwards against NumPy references
written from Paddle 1.8's test_unfold_op, test_im2sequence_op, test_affine_grid_op and
test_grid_sampler_op on their inputs, gradients against finite differences, and
PyTorch's F.unfold, F.affine_grid and F.grid_sample (align_corners=True)."""
from itertools import product

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from ops.harness import check_grad, check_op, run_forward

from fluid_interactive.errors import ShapeError


def ref_patches(x, kernel, strides, pads, dilations, ceil):
    """[N, OH, OW, C*kh*kw] of x's windows; pads [top, left, bottom, right]."""
    n, c, h, w = x.shape
    kh, kw = kernel
    outs = []
    for size, k, s, d, p0, p1 in ((h, kh, strides[0], dilations[0], pads[0], pads[2]),
                                  (w, kw, strides[1], dilations[1], pads[1], pads[3])):
        span = size + p0 + p1 - (d * (k - 1) + 1)
        outs.append((span + (s - 1 if ceil else 0)) // s + 1)
    y = np.zeros((n, outs[0], outs[1], c * kh * kw))
    for oh, ow in product(range(outs[0]), range(outs[1])):
        for ci, i, j in product(range(c), range(kh), range(kw)):
            hi = oh * strides[0] - pads[0] + i * dilations[0]
            wi = ow * strides[1] - pads[1] + j * dilations[1]
            if 0 <= hi < h and 0 <= wi < w:
                y[:, oh, ow, (ci * kh + i) * kw + j] = x[:, ci, hi, wi]
    return y


def ref_affine_grid(theta, h, w):
    ys, xs = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    base = np.stack([xs, ys, np.ones_like(xs)], axis=-1).reshape(-1, 3)
    return np.einsum("pk,nck->npc", base, theta).reshape(len(theta), h, w, 2)


def ref_grid_sampler(x, grid):
    n, c, h, w = x.shape
    gx = (grid[..., 0] + 1) * 0.5 * (w - 1)
    gy = (grid[..., 1] + 1) * 0.5 * (h - 1)
    out = np.zeros((n, c) + grid.shape[1:3])
    for b, i, j in product(range(n), range(grid.shape[1]), range(grid.shape[2])):
        x0, y0 = int(np.floor(gx[b, i, j])), int(np.floor(gy[b, i, j]))
        for cx, cy in ((x0, y0), (x0, y0 + 1), (x0 + 1, y0), (x0 + 1, y0 + 1)):
            weight = (1 - abs(gx[b, i, j] - cx)) * (1 - abs(gy[b, i, j] - cy))
            if 0 <= cx < w and 0 <= cy < h:
                out[b, :, i, j] += weight * x[b, :, cy, cx]
    return out


# --- unfold, im2sequence --------------------------------------------------------------------

@pytest.mark.parametrize("shape,kernel,strides,pads,dils", [
    ((3, 3, 20, 20), [3, 3], [1, 1], [1, 1, 1, 1], [1, 1]),     # test_unfold_op's case
    ((2, 2, 7, 6), [3, 2], [2, 1], [1, 0, 2, 1], [1, 2]),
    ((1, 3, 5, 5), [2, 2], [3, 3], [0, 0, 0, 0], [1, 1]),
])
def test_unfold_forward_and_grad(rng, shape, kernel, strides, pads, dils):
    x = rng.random(shape)
    attrs = {"kernel_sizes": kernel, "strides": strides, "paddings": pads, "dilations": dils}

    def ref(X, **_):
        p = ref_patches(X, kernel, strides, pads, dils, False)
        return p.reshape(len(X), -1, p.shape[-1]).transpose(0, 2, 1)
    check_op("unfold", {"X": x}, attrs, reference=ref, rtol=0, atol=0)
    check_grad("unfold", {"X": x[:1, :2]}, attrs, max_elements=30)
    padded = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    want = F.unfold(torch.tensor(padded), kernel, dilation=dils, stride=strides)
    np.testing.assert_array_equal(run_forward("unfold", {"X": x}, attrs)["Y"][0], want.numpy())


@pytest.mark.parametrize("shape,kernel,strides,pads", [
    ((1, 3, 4, 10), [2, 2], [1, 1], [1, 1, 1, 1]), ((2, 3, 4, 5), [2, 1], [2, 1], [2, 1, 2, 1]),
    ((6, 1, 4, 5), [2, 1], [2, 1], [2, 0, 2, 0]), ((6, 2, 3, 3), [2, 2], [1, 1], [0, 0, 0, 0]),
    ((2, 2, 5, 4), [3, 2], [2, 3], [0, 0, 0, 0]),      # rounded up: a last window overhangs
])
def test_im2sequence_forward_and_grad(rng, shape, kernel, strides, pads):
    x = rng.uniform(0.1, 1, shape)
    attrs = {"kernels": kernel, "strides": strides, "paddings": pads}

    def ref(X, **_):
        p = ref_patches(X, kernel, strides, pads, [1, 1], True)
        return p.reshape(len(X), -1, p.shape[-1])
    check_op("im2sequence", {"X": x}, attrs, reference=ref, rtol=0, atol=0)
    check_grad("im2sequence", {"X": x[:1]}, attrs, max_elements=30)


# --- affine_grid, grid_sampler ------------------------------------------------------------------

@pytest.mark.parametrize("theta_shape,size", [((17, 2, 3), [17, 2, 5, 7]),
                                              ((3, 2, 3), [3, 1, 1, 4])])
def test_affine_grid_forward_and_grad(rng, theta_shape, size):
    theta = rng.random(theta_shape)
    check_op("affine_grid", {"Theta": theta}, {"output_shape": size},
             reference=lambda Theta, **_: ref_affine_grid(Theta, size[2], size[3]), rtol=1e-12)
    check_grad("affine_grid", {"Theta": theta}, {"output_shape": size}, wrt=["Theta"])
    if min(size[2:]) == 1:
        return   # a grid of one point sits at -1 (linspace) in Paddle 1.8, at 0 in PyTorch
    want = F.affine_grid(torch.tensor(theta), size, align_corners=True)
    got = run_forward("affine_grid", {"Theta": theta}, {"output_shape": size})["Output"][0]
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-14)


def test_affine_grid_size_from_a_tensor(rng):
    theta = rng.random((20, 2, 3))
    got = run_forward("affine_grid", {"Theta": theta,
                                      "OutputShape": np.array([20, 2, 5, 7], np.int32)},
                      {})["Output"][0]
    np.testing.assert_allclose(got, ref_affine_grid(theta, 5, 7), rtol=1e-12)


@pytest.mark.parametrize("x_shape,grid_hw", [((2, 5, 7, 3), (7, 3)), ((1, 2, 4, 6), (3, 5))])
def test_grid_sampler_forward_and_grads(rng, x_shape, grid_hw):
    x = rng.integers(0, 255, x_shape).astype(np.float64)
    theta = rng.random((x_shape[0], 2, 3))
    grid = ref_affine_grid(theta, *grid_hw)
    check_op("grid_sampler", {"X": x, "Grid": grid}, {}, reference=lambda X, Grid, **_:
             ref_grid_sampler(X, Grid), rtol=1e-10, atol=1e-9)
    grid = rng.uniform(-1.3, 1.3, (x_shape[0],) + grid_hw + (2,))   # some points outside
    check_grad("grid_sampler", {"X": x / 255, "Grid": grid}, {}, wrt=["X", "Grid"],
               max_elements=30)
    want = F.grid_sample(torch.tensor(x), torch.tensor(grid), mode="bilinear",
                         padding_mode="zeros", align_corners=True)
    got = run_forward("grid_sampler", {"X": x, "Grid": grid}, {})["Output"][0]
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("op,inputs,attrs,match", [
    ("unfold", {"X": np.zeros((1, 1, 2, 2))}, {"kernel_sizes": [3, 3]}, "leaves no position"),
    ("affine_grid", {"Theta": np.zeros((2, 3, 3))}, {"output_shape": [2, 1, 3, 3]},
     r"Theta must be \[N, 2, 3\]"),
    ("grid_sampler", {"X": np.zeros((2, 1, 3, 3)), "Grid": np.zeros((2, 3, 3, 3))}, {},
     r"Grid \[N, Hg, Wg, 2\]"),
])
def test_sampling_errors(op, inputs, attrs, match):
    with pytest.raises(ShapeError, match=match):
        run_forward(op, inputs, attrs)
