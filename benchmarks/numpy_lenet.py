"""LeNet's training step written by hand in NumPy: the reference that
`bench_lenet.py` holds fluid_interactive against.

The network: conv 5x5 (1 -> 20) -> relu -> max-pool 2 -> conv 5x5 (20 -> 50) -> relu ->
max-pool 2 -> fc 800 -> 500 relu -> fc 500 -> 10, mean softmax cross-entropy, plain SGD.
Parameters use fluid's layouts (conv filter [O, C, kh, kw], fc weight [in, out] with the
input flattened in C, H, W order), so a fluid program's parameters copy straight in.

What makes it fast (each line is one NumPy call over a whole array; a step allocates
nothing but a few [N]-sized temporaries; about 11-12 ms a step on the project's 2-core
machine when it is quiet, against 17-26 ms for the NHWC NumPy step measured in
shared/notes/benchmarks.md):

* Activations live as [C, H, W, N] ("batch innermost"). Each im2col copy, each col2im add
  and each pooling step then moves runs of W*N or N contiguous floats instead of the
  C-sized runs of NHWC or the W-sized runs of NCHW, and the conv GEMMs write their output
  straight in that layout ([O, OH*OW*N] = K @ cols), so the only transposing copy is the
  one of the 1-channel input. The flattened conv output [800, N] is the fc input
  transposed, which the GEMMs take as it is.
* Max-pool commutes with a per-channel bias and with relu, so each conv block is GEMM ->
  pool (3 `maximum` calls) -> bias + relu on the pooled quarter-size array. The mask of
  window maxima is taken right after pooling, while the conv output is still in cache;
  backward, the relu mask is taken on the pooled array and the gradient routed to the
  maxima with one `multiply`, into the (now dead) conv output buffer.
* Bias gradients are row sums of C-major arrays; filter gradients are one GEMM each, in
  the orientation BLAS runs fastest (conv2's as cols @ dY^T, conv1's long-K GEMM as
  batched chunks); conv2's input gradient is one GEMM plus 25 window adds of W*N-float
  runs, and conv1 needs none.
* Parameters and gradients are views into two flat buffers, and the loss gradient is
  scaled by lr up front, so every gradient comes out times lr and SGD is one subtraction.
"""
from __future__ import annotations

import numpy as np

f32 = np.float32

#: name, shape in fluid's layout; the order of the flat parameter buffer.
PARAMS = (("conv1_w", (20, 1, 5, 5)), ("conv1_b", (20,)),
          ("conv2_w", (50, 20, 5, 5)), ("conv2_b", (50,)),
          ("fc1_w", (800, 500)), ("fc1_b", (500,)),
          ("fc2_w", (500, 10)), ("fc2_b", (10,)))


class SoftmaxCrossEntropy:
    """Mean softmax cross-entropy of logits [N, K] and its gradient, with buffers made
    once: ``loss = xent(z, y, dz)`` shifts ``z`` in place and writes N * dloss/dz into
    ``dz`` (the caller scales it, by 1/N or by lr/N)."""

    def __init__(self, n: int):
        self.n = n
        self.zmax, self.zsum = np.empty((n, 1), f32), np.empty((n, 1), f32)
        self.rows = np.arange(n)

    def __call__(self, z: np.ndarray, y: np.ndarray, dz: np.ndarray) -> float:
        np.max(z, axis=1, keepdims=True, out=self.zmax)
        z -= self.zmax
        np.exp(z, out=dz)
        np.sum(dz, axis=1, keepdims=True, out=self.zsum)
        loss = float(np.log(self.zsum).sum() - z[self.rows, y].sum()) / self.n
        dz /= self.zsum
        dz[self.rows, y] -= 1.0
        return loss


class NumpyLeNet:
    """One SGD step per `step(x, y)`: x float32 [N, 1, 28, 28], y int [N] or [N, 1];
    returns the mean cross-entropy before the update, as a Python float."""

    def __init__(self, params: dict[str, np.ndarray], batch: int = 64, lr: float = 0.01):
        n = self.n = batch
        self.lr = f32(lr)
        size = sum(int(np.prod(s)) for _, s in PARAMS)
        self.flat_p = np.empty(size, f32)
        self.flat_g = np.zeros(size, f32)
        self.p, self.g = {}, {}            # g: the last step's gradients times lr
        o = 0
        for name, shape in PARAMS:
            k = int(np.prod(shape))
            self.p[name] = self.flat_p[o:o + k].reshape(shape)
            self.g[name] = self.flat_g[o:o + k].reshape(shape)
            o += k
        self.set_parameters(params)
        p, g = self.p, self.g
        # 2-D views of the filters: [O, C*kh*kw], rows in (c, ki, kj) order.
        self.w1, self.dw1 = p["conv1_w"].reshape(20, 25), g["conv1_w"].reshape(20, 25)
        self.w2, self.dw2 = p["conv2_w"].reshape(50, 500), g["conv2_w"].reshape(50, 500)
        self.b1, self.b2 = p["conv1_b"].reshape(20, 1, 1, 1), p["conv2_b"].reshape(50, 1, 1, 1)

        e = np.empty
        # forward buffers, [C, H, W, N]
        self.xt = e((28, 28, n), f32)
        self.cols1 = e((25, 24 * 24 * n), f32)
        self.a1 = e((20, 24 * 24 * n), f32)
        self.q1 = e((20, 12, 12, n), f32)            # pooled, before bias and relu
        self.p1 = e((20, 12, 12, n), f32)
        self.cols2 = e((500, 8 * 8 * n), f32)
        self.a2 = e((50, 8 * 8 * n), f32)
        self.q2 = e((50, 4, 4, n), f32)
        self.p2 = e((800, n), f32)                   # = [50, 4, 4, N], the fc input^T
        self.h3 = e((n, 500), f32)
        self.z = e((n, 10), f32)
        # backward buffers
        self.dz = e((n, 10), f32)
        self.dh3 = e((n, 500), f32)
        self.m3 = e((n, 500), bool)
        self.dp2 = e((800, n), f32)
        self.pos2 = e((800, n), bool)
        self.mask2 = e((50, 4, 2, 4, 2, n), bool)
        self.da2 = self.a2                           # a2 is dead once mask2 is taken
        self.dw2t = e((500, 50), f32)
        self.dcols2 = e((500, 8 * 8 * n), f32)
        self.dp1 = e((20, 12, 12, n), f32)
        self.pos1 = e((20, 12, 12, n), bool)
        self.mask1 = e((20, 12, 2, 12, 2, n), bool)
        self.da1 = self.a1                           # likewise a1 once mask1 is taken
        # conv1's filter gradient sums over 36,864 positions per batch of 64; BLAS does
        # that GEMM (M=20, N=25) ~2x faster as 36 batched chunks of 1,024 plus a sum.
        positions = 24 * 24 * n
        self.chunks1 = positions // (1024 if positions % 1024 == 0 else 576)
        self.dw1_parts = e((self.chunks1, 20, 25), f32)
        self.xent = SoftmaxCrossEntropy(n)

        # strided views, built once
        def windows(img: np.ndarray, k: int, out_hw: int) -> np.ndarray:
            """[C, H, W, N] -> its k x k windows as [C, k, k, OH, OW, N] (a view)."""
            sc, sh, sw, sn = img.strides
            c = img.shape[0]
            return np.lib.stride_tricks.as_strided(
                img, (c, k, k, out_hw, out_hw, n), (sc, sh, sw, sh, sw, sn), writeable=False)

        self.x_win = windows(self.xt[None], 5, 24)
        self.cols1_v = self.cols1.reshape(1, 5, 5, 24, 24, n)
        self.p1_win = windows(self.p1, 5, 8)
        self.cols2_v = self.cols2.reshape(20, 5, 5, 8, 8, n)
        self.a1_w = self.a1.reshape(20, 12, 2, 12, 2, n)       # pooling windows of a1
        self.a2_w = self.a2.reshape(50, 4, 2, 4, 2, n)
        self.da1_w = self.da1.reshape(20, 12, 2, 12, 2, n)
        self.da2_w = self.da2.reshape(50, 4, 2, 4, 2, n)
        self.q1_b = self.q1[:, :, None, :, None, :]
        self.q2_b = self.q2[:, :, None, :, None, :]
        self.dp1_b = self.dp1[:, :, None, :, None, :]
        self.dp2_4 = self.dp2.reshape(50, 4, 4, n)
        self.dp2_b = self.dp2_4[:, :, None, :, None, :]
        self.p2_4 = self.p2.reshape(50, 4, 4, n)
        self.dcols2_v = self.dcols2.reshape(20, 5, 5, 8, 8, n)
        k = self.chunks1
        self.da1_chunks = self.da1.reshape(20, k, -1).transpose(1, 0, 2)
        self.cols1_chunks_t = self.cols1.reshape(25, k, -1).transpose(1, 2, 0)
        self.col2im = [(self.dp1[:, i:i + 8, j:j + 8, :], self.dcols2_v[:, i, j])
                       for i in range(5) for j in range(5)]

    # --- parameters ----------------------------------------------------------------------

    def set_parameters(self, params: dict[str, np.ndarray]) -> None:
        for name, _ in PARAMS:
            self.p[name][...] = params[name]

    def parameters(self) -> dict[str, np.ndarray]:
        return {name: self.p[name].copy() for name, _ in PARAMS}

    # --- the step ------------------------------------------------------------------------

    @staticmethod
    def _pool(a_w: np.ndarray, out: np.ndarray) -> None:
        """2x2 max-pool of [C, OH, 2, OW, 2, N] windows into [C, OH, OW, N]."""
        np.maximum(a_w[:, :, 0, :, 0], a_w[:, :, 0, :, 1], out=out)
        np.maximum(out, a_w[:, :, 1, :, 0], out=out)
        np.maximum(out, a_w[:, :, 1, :, 1], out=out)

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Logits [N, 10] of images x [N, 1, 28, 28]; also keeps what `step` needs for the
        backward pass (im2col columns, pooling masks, activations)."""
        n, p = self.n, self.p
        np.copyto(self.xt, x.reshape(n, 28, 28).transpose(1, 2, 0))
        # conv1 -> pool -> bias -> relu
        np.copyto(self.cols1_v, self.x_win)
        np.matmul(self.w1, self.cols1, out=self.a1)
        self._pool(self.a1_w, self.q1)
        np.equal(self.a1_w, self.q1_b, out=self.mask1)   # where the maxima are, for backward
        np.add(self.q1, self.b1, out=self.p1)
        np.maximum(self.p1, 0, out=self.p1)
        # conv2 -> pool -> bias -> relu
        np.copyto(self.cols2_v, self.p1_win)
        np.matmul(self.w2, self.cols2, out=self.a2)
        self._pool(self.a2_w, self.q2)
        np.equal(self.a2_w, self.q2_b, out=self.mask2)
        np.add(self.q2, self.b2, out=self.p2_4)
        np.maximum(self.p2, 0, out=self.p2)
        # fc1 (input p2^T) -> relu -> fc2
        np.matmul(self.p2.T, p["fc1_w"], out=self.h3)
        np.add(self.h3, p["fc1_b"], out=self.h3)
        np.maximum(self.h3, 0, out=self.h3)
        np.matmul(self.h3, p["fc2_w"], out=self.z)
        np.add(self.z, p["fc2_b"], out=self.z)
        return self.z

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        n, p, g = self.n, self.p, self.g
        y = y.reshape(n)
        z = self.forward(x)
        # mean softmax cross-entropy and its gradient dz (z is shifted in place)
        dz = self.dz
        loss = self.xent(z, y, dz)
        dz *= self.lr / f32(n)      # every gradient below comes out times lr: SGD is one call
        # fc2, fc1
        np.matmul(self.h3.T, dz, out=g["fc2_w"])
        np.sum(dz, axis=0, out=g["fc2_b"])
        np.matmul(dz, p["fc2_w"].T, out=self.dh3)
        np.greater(self.h3, 0, out=self.m3)
        np.multiply(self.dh3, self.m3, out=self.dh3)
        np.matmul(self.p2, self.dh3, out=g["fc1_w"])
        np.sum(self.dh3, axis=0, out=g["fc1_b"])
        np.matmul(p["fc1_w"], self.dh3.T, out=self.dp2)
        # relu2 (on the pooled array), bias2, pool2 routing
        np.greater(self.p2, 0, out=self.pos2)
        np.multiply(self.dp2, self.pos2, out=self.dp2)
        np.sum(self.dp2.reshape(50, 16 * n), axis=1, out=g["conv2_b"])
        np.multiply(self.mask2, self.dp2_b, out=self.da2_w)
        # conv2: filter gradient, input gradient (GEMM + col2im)
        np.matmul(self.cols2, self.da2.T, out=self.dw2t)   # faster than da2 @ cols2.T
        np.copyto(self.dw2, self.dw2t.T)
        np.matmul(self.w2.T, self.da2, out=self.dcols2)
        self.dp1.fill(0)
        for dst, src in self.col2im:
            np.add(dst, src, out=dst)
        # relu1, bias1, pool1 routing, conv1 filter gradient
        np.greater(self.p1, 0, out=self.pos1)
        np.multiply(self.dp1, self.pos1, out=self.dp1)
        np.sum(self.dp1.reshape(20, 144 * n), axis=1, out=g["conv1_b"])
        np.multiply(self.mask1, self.dp1_b, out=self.da1_w)
        np.matmul(self.da1_chunks, self.cols1_chunks_t, out=self.dw1_parts)
        np.sum(self.dw1_parts, axis=0, out=self.dw1)
        # SGD on the flat buffers (the gradients already carry the factor lr)
        self.flat_p -= self.flat_g
        return loss
