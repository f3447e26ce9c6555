"""Losses over a sample of the classes, for large vocabularies: noise-contrastive estimation
(``nce``) and the sampled logits behind ``sampled_softmax_with_cross_entropy``
(``sample_logits``).

Both draw their samples on the host from the op's generator (its ``seed`` attr when not 0,
else the program's seeded per-op generator), so a seed gives the same samples on every
backend, and move them to the device: a few integers per row.

``nce``            Input [N, D], Label [N, NT] int64 (NT true classes per row), Weight
                   [C, D], Bias [C, 1]; for each row the true classes and
                   ``num_neg_samples`` classes drawn from ``sampler`` (0 uniform, 1
                   log-uniform over [0, C - 1), 2 the distribution CustomDistProbs [C]), or
                   the attr ``custom_neg_classes`` when given. With o = sigmoid(w_k . x +
                   b_k) and q = num_neg_samples * P(k): Cost [N, 1] = SampleWeight * (sum
                   over true k of -log(o / (o + q)) + over sampled k of -log(q / (o + q))).
                   SampleLogits holds o, SampleLabels the classes. SampleWeight gives
                   its first N values to the N rows, as Paddle's kernel reads it.
``sample_logits``  Logits [N, K], Labels [N, NT]: ``num_samples`` distinct classes drawn
                   log-uniformly (shared by the batch) after each row's true classes;
                   SampledLogits [N, NT + S] = the logits of those classes - log Q (Q the
                   probability that the class is among the samples), 1e20 less where a
                   sample is one of the row's true classes (``remove_accidental_hits``);
                   SampledLabels [N, NT] = 0..NT-1. Or CustomizedSamples /
                   CustomizedProbabilities give the samples and Q.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.text import format_shape as fmt
from .loss_common import (
    check_range,
    check_rows,
    first_values,
    host_generator,
)
from .loss_grads import register_with_grad
from .spec import InferContext, KernelContext, dims_compatible

# --- samplers (on the host) -------------------------------------------------------------------


def log_uniform_draw(rng: np.random.Generator, size: Any, vocab: int) -> np.ndarray:
    """Classes in [0, vocab) with P(k) = log((k + 2) / (k + 1)) / log(vocab + 1)."""
    u = rng.random(size)
    return (np.exp(u * np.log(vocab + 1)).astype(np.int64) - 1) % vocab


def log_uniform_prob(xp: Any, k: Any, vocab: int) -> Any:
    return xp.log((k + 2.0) / (k + 1.0)) / np.log(vocab + 1)


# --- nce ----------------------------------------------------------------------------------------

_NCE_ATTRS = {"num_total_classes": 1, "num_neg_samples": 10, "seed": 0, "sampler": 0,
              "is_sparse": False, "remote_prefetch": False, "custom_neg_classes": []}
_NCE_IN = ("Input", "Label", "Weight", "Bias?", "SampleWeight?", "CustomDistProbs?")


def _nce_negatives(ctx: Any) -> int:
    custom = list(ctx.attrs["custom_neg_classes"])
    return len(custom) if custom else int(ctx.attrs["num_neg_samples"])


def _nce_infer(ctx: InferContext) -> None:
    x, lab = check_rows(ctx, "Input", "Label", "nce")
    w, c = ctx.input("Weight"), int(ctx.attrs["num_total_classes"])
    if lab.rank != 2:
        ctx.fail(f"nce: Label must be [N, NT] (NT true classes per row), got {fmt(lab.shape)}")
    if w.rank != 2 or not dims_compatible(w.shape[0], c) or \
            not dims_compatible(w.shape[1], x.shape[1]):
        ctx.fail(f"nce: Weight must be [num_total_classes, D] = {fmt((c, x.shape[1]))}, got "
                 f"{fmt(w.shape)}")
    if int(ctx.attrs["sampler"]) not in (0, 1, 2):
        ctx.fail(f"nce: sampler must be 0 (uniform), 1 (log_uniform) or 2 (custom_dist), got "
                 f"{ctx.attrs['sampler']!r}")
    if int(ctx.attrs["sampler"]) == 2 and not ctx.has_input("CustomDistProbs"):
        ctx.fail("nce: the custom_dist sampler needs CustomDistProbs")
    s = lab.shape[1] + _nce_negatives(ctx) if lab.shape[1] >= 0 else -1
    ctx.set_output("Cost", (x.shape[0], 1), x.dtype)
    ctx.set_output("SampleLogits", (x.shape[0], s), x.dtype)
    ctx.set_output("SampleLabels", (x.shape[0], s), "int64")


class _NceSampler:
    """Draws the negative classes of a batch and gives P(k) for any class."""

    def __init__(self, ctx: KernelContext):
        self.xp, self.c = ctx.xp, int(ctx.attrs["num_total_classes"])
        self.kind = int(ctx.attrs["sampler"])
        self.custom = [int(v) for v in ctx.attrs["custom_neg_classes"]]
        self.neg = _nce_negatives(ctx)
        self.rng = host_generator(ctx) if ctx.rng is not None or ctx.attrs["seed"] else None

    def draw(self, n: int, dist: Any) -> Any:
        """[n, num_neg_samples] classes: uniform numbers drawn on the host, turned into
        classes on the device (the custom distribution stays there)."""
        xp = self.xp
        if self.custom:
            return xp.broadcast_to(xp.asarray(self.custom, dtype="int64"), (n, self.neg))
        if self.rng is None:
            raise ValueError("nce draws random samples: run it with a generator")
        u = xp.asarray(self.rng.random((n, self.neg)))
        if self.kind == 0:
            drawn = xp.floor(u * self.c)
        elif self.kind == 1:
            drawn = (xp.floor(xp.exp(u * np.log(self.c))) - 1) % (self.c - 1)
        else:
            cdf = xp.cumsum(dist.reshape(-1).astype("float64"))
            drawn = xp.searchsorted(cdf / cdf[-1], u.reshape(-1), side="right").reshape(u.shape)
        return xp.minimum(drawn, self.c - 1).astype("int64")

    def prob(self, k: Any, dist: Any) -> Any:
        if self.kind == 0:
            return self.xp.full(k.shape, 1.0 / self.c)
        if self.kind == 1:
            return log_uniform_prob(self.xp, k, self.c - 1)
        return dist.reshape(-1)[k].astype("float64")


class _NceArgs:
    """A kernel's arguments by slot (optional slots may be absent)."""

    def __init__(self, ctx: KernelContext, names: tuple[str, ...]):
        self.present = [n.rstrip("?") for n in names if ctx.has_input(n.rstrip("?"))]

    def __call__(self, args: tuple) -> dict[str, Any]:
        return dict(zip(self.present, args))


def _nce_terms(xp: Any, z: Any, q: Any, nt: int) -> tuple[Any, Any]:
    """(o, per-sample costs) for logits z and noise masses q, the first nt columns true."""
    log_o = -(xp.maximum(-z, 0) + xp.log1p(xp.exp(-xp.abs(z))))     # log sigmoid(z)
    log_q = xp.log(q)
    log_sum = xp.logaddexp(log_o, log_q)
    cost = log_sum - xp.where(xp.arange(z.shape[1]) < nt, log_o, log_q)
    return xp.exp(log_o), cost


def _nce_kernel(ctx: KernelContext):
    xp = ctx.xp
    sampler = _NceSampler(ctx)
    unpack = _NceArgs(ctx, _NCE_IN)
    n, nt = ctx.input("Input").shape[0], ctx.input("Label").shape[1]
    dtype = ctx.input("Input").dtype

    def fn(*args):
        a = unpack(args)
        check_range(xp, a["Label"], sampler.c, "nce: label")
        dist = a.get("CustomDistProbs")
        labels = xp.concatenate([a["Label"].astype("int64"), sampler.draw(n, dist)], axis=1)
        z = xp.einsum("nd,nsd->ns", a["Input"], a["Weight"][labels])
        if "Bias" in a:
            z = z + a["Bias"].reshape(-1)[labels]
        q = sampler.prob(labels, dist) * sampler.neg
        o, cost = _nce_terms(xp, z.astype("float64"), q, nt)
        per_row = cost.sum(axis=1, keepdims=True)
        if "SampleWeight" in a:
            per_row = per_row * first_values(a["SampleWeight"], n, "nce: SampleWeight")
        return per_row.astype(dtype), o.astype(dtype), labels
    return fn


def _nce_grad_kernel(ctx: KernelContext):
    """d cost / d logit: q (o - 1) / (o + q) for a true class, o (1 - o) / (o + q) for a
    sampled one; then to Input, Weight and Bias through the gathered rows."""
    xp = ctx.xp
    sampler = _NceSampler(ctx)
    unpack = _NceArgs(ctx, _NCE_IN + ("SampleLogits", "SampleLabels", "Cost@GRAD"))
    n, nt = ctx.input("Input").shape[0], ctx.input("Label").shape[1]
    wants = [s for s in ("Input", "Weight", "Bias") if ctx.has_output(f"{s}@GRAD")]

    def fn(*args):
        a = unpack(args)
        labels, o = a["SampleLabels"], a["SampleLogits"]
        q = sampler.prob(labels, a.get("CustomDistProbs")) * sampler.neg
        true = xp.arange(labels.shape[1]) < nt
        g = xp.where(true, q * (o - 1), o * (1 - o)) / (o + q)
        scale = a["Cost@GRAD"].reshape(n, 1)
        if "SampleWeight" in a:
            scale = scale * first_values(a["SampleWeight"], n, "nce: SampleWeight")
        g = (g * scale).astype(o.dtype)
        x, w = a["Input"], a["Weight"]
        res = {"Input": lambda: xp.einsum("ns,nsd->nd", g, w[labels])}
        res["Weight"] = lambda: scatter_rows(xp, w.shape, labels, g[:, :, None] *
                                             x[:, None, :])
        res["Bias"] = lambda: scatter_rows(xp, a["Bias"].shape, labels, g[:, :, None])
        out = tuple(res[s]() for s in wants)
        return out[0] if len(out) == 1 else out
    return fn


def scatter_rows(xp: Any, shape: tuple[int, ...], rows: Any, values: Any) -> Any:
    """A zero array of ``shape`` with ``values`` [..., W] added at ``rows`` [...]."""
    out = xp.zeros(shape, values.dtype)
    xp.add.at(out.reshape(shape[0], -1), rows.reshape(-1),
              values.reshape(rows.size, -1))
    return out


register_with_grad(
    "nce", _NCE_IN, ("Cost", "SampleLogits", "SampleLabels"), _nce_infer, _nce_kernel,
    _nce_grad_kernel, uses=_NCE_IN + ("SampleLogits", "SampleLabels"),
    wrt=("Input", "Weight", "Bias"), out_slot="Cost", attrs=_NCE_ATTRS, random=True,
    host_access="draws",
    doc="Noise-contrastive estimation: Cost [N, 1] of each row's true classes Label [N, NT] "
        "against num_neg_samples classes drawn by sampler (uniform, log-uniform, custom "
        "distribution); SampleLogits [N, NT + S] the sigmoid scores, SampleLabels the "
        "classes.")


# --- sample_logits ------------------------------------------------------------------------------

_SL_ATTRS = {"num_samples": 1, "use_customized_samples": False, "uniq": True,
             "remove_accidental_hits": True, "seed": 0}
_SL_IN = ("Logits", "Labels", "CustomizedSamples?", "CustomizedProbabilities?")


def _sl_infer(ctx: InferContext) -> None:
    x, lab = check_rows(ctx, "Logits", "Labels", "sample_logits")
    if lab.rank != 2:
        ctx.fail(f"sample_logits: Labels must be [N, NT], got {fmt(lab.shape)}")
    s = int(ctx.attrs["num_samples"])
    if s < 1 or (x.shape[1] >= 0 and s > x.shape[1]):
        ctx.fail(f"sample_logits: num_samples must lie in [1, K] = [1, {x.shape[1]}] (the "
                 f"samples are distinct classes), got {s}")
    width = lab.shape[1] + s if lab.shape[1] >= 0 else -1
    if ctx.attrs["use_customized_samples"]:
        for slot in ("CustomizedSamples", "CustomizedProbabilities"):
            if not ctx.has_input(slot):
                ctx.fail(f"sample_logits: use_customized_samples needs {slot}")
            t = ctx.input(slot)
            if t.rank != 2 or not dims_compatible(t.shape[1], width):
                ctx.fail(f"sample_logits: {slot} must be [N, NT + num_samples] = "
                         f"{fmt((x.shape[0], width))}, got {fmt(t.shape)}")
    ctx.set_output("Samples", (x.shape[0], width), "int64")
    ctx.set_output("Probabilities", (x.shape[0], width), x.dtype)
    ctx.set_output("SampledLogits", (x.shape[0], width), x.dtype)
    ctx.set_output("SampledLabels", lab.shape, "int64")


def unique_log_uniform(rng: np.random.Generator, count: int, vocab: int
                       ) -> tuple[np.ndarray, int]:
    """``count`` distinct classes drawn log-uniformly in the order they first came, and
    how many draws that took."""
    drawn = np.empty(0, np.int64)
    while True:
        drawn = np.concatenate([drawn, log_uniform_draw(rng, max(2 * count, 16), vocab)])
        _, first = np.unique(drawn, return_index=True)
        if len(first) >= count:
            order = np.sort(first)[:count]
            return drawn[order], int(order[-1]) + 1


def _adjusted(xp: Any, p: Any, samples: int, tries: int) -> Any:
    """The probability that a class is among the distinct samples after ``tries`` draws."""
    if samples == tries:
        return p * samples
    return -xp.expm1(tries * xp.log1p(-p))


def _sl_kernel(ctx: KernelContext):
    xp = ctx.xp
    n, k = ctx.input("Logits").shape
    nt = ctx.input("Labels").shape[1]
    s = int(ctx.attrs["num_samples"])
    custom = bool(ctx.attrs["use_customized_samples"])
    hits = bool(ctx.attrs["remove_accidental_hits"])
    rng = None if custom else host_generator(ctx)
    dtype = ctx.input("Logits").dtype
    rows = xp.arange(n)[:, None]
    sampled_labels = xp.broadcast_to(xp.arange(nt, dtype="int64"), (n, nt))

    def fn(logits, labels, *given):
        check_range(xp, labels, k, "sample_logits: label")
        if custom:
            samples, probs = given[0].astype("int64"), given[1].astype(dtype)
        else:
            drawn, tries = unique_log_uniform(rng, s, k)
            cols = xp.concatenate([labels.astype("int64"),
                                   xp.broadcast_to(xp.asarray(drawn), (n, s))], axis=1)
            samples = cols
            probs = _adjusted(xp, log_uniform_prob(xp, cols, k), s, tries).astype(dtype)
        picked = logits[rows, samples]
        if hits:
            accidental = (samples[:, nt:, None] == labels[:, None, :]).any(axis=2)
            picked[:, nt:] = picked[:, nt:] - 1e20 * accidental
        with np.errstate(divide="ignore"):
            log_q = xp.clip(xp.log(probs), -1e20, 1e20)
        out = xp.clip(picked - log_q, -1e20, 1e20).astype(dtype)
        return samples, probs, out, xp.ascontiguousarray(sampled_labels)
    return fn


def _sl_grad_kernel(ctx: KernelContext):
    """dLogits[n, samples[n, j]] += dSampledLogits[n, j]."""
    xp = ctx.xp
    n, k = ctx.input("Logits").shape

    def fn(logits, samples, g):
        out = xp.zeros((n, k), g.dtype)
        xp.add.at(out, (xp.arange(n)[:, None], samples), g)
        return out
    return fn


register_with_grad(
    "sample_logits", _SL_IN, ("Samples", "Probabilities", "SampledLogits", "SampledLabels"),
    _sl_infer, _sl_kernel, _sl_grad_kernel, uses=("Logits", "Samples"), wrt=("Logits",),
    out_slot="SampledLogits", attrs=_SL_ATTRS, random=True, host_access="draws",
    doc="Logits of each row's true classes and num_samples distinct log-uniform samples "
        "(shared by the batch), minus log Q; accidental hits of a true class pushed 1e20 "
        "down. SampledLabels: the true classes' columns.")
