"""`fluid.optimizer`: Paddle 1.8's optimizers, each with its ``*Optimizer`` alias.

An optimizer is made with its hyperparameters, then ``minimize(loss)`` in a traced method
appends the backward ops and one update op per parameter (see `optim_base` for the
steps). Every optimizer takes ``parameter_list``, ``regularization``, ``grad_clip``
(`fluid.clip`) and ``name``, and a float or a Variable (a schedule of
``fluid.layers``) as its learning rate; its state is named as Paddle names it
(``<param>_<key>_N``), lives in block 0, is saved and restored with the parameters and
taken back by ``rewind``.

Here: SGD, Momentum and Adam; the adaptive ones (Adagrad, DecayedAdagrad, RMSProp,
Adadelta, Adamax, Ftrl) in `optim_adaptive`; those scaled by norms (Lamb, LarsMomentum,
Dpsgd) in `optim_norm`; the averages (ModelAverage, ExponentialMovingAverage) in
`optim_average`; the wrappers (Lookahead, Recompute) in `optim_wrappers`.
"""
from __future__ import annotations

from .optim_adaptive import (
                             Adadelta,
                             AdadeltaOptimizer,
                             Adagrad,
                             AdagradOptimizer,
                             Adamax,
                             AdamaxOptimizer,
                             DecayedAdagrad,
                             DecayedAdagradOptimizer,
                             Ftrl,
                             FtrlOptimizer,
                             RMSProp,
                             RMSPropOptimizer,
)
from .optim_average import ExponentialMovingAverage, ModelAverage
from .optim_base import Optimizer, ParamUpdate
from .optim_basic import SGD, Adam, AdamOptimizer, Momentum, MomentumOptimizer, SGDOptimizer
from .optim_norm import (
                             Dpsgd,
                             DpsgdOptimizer,
                             Lamb,
                             LambOptimizer,
                             LarsMomentum,
                             LarsMomentumOptimizer,
)
from .optim_wrappers import (
                             LookaheadOptimizer,
                             RecomputeOptimizer,
)

__all__ = ["Optimizer", "ParamUpdate", "SGD", "Momentum", "Adam", "SGDOptimizer",
           "MomentumOptimizer", "AdamOptimizer",
           "Adagrad", "AdagradOptimizer", "DecayedAdagrad", "DecayedAdagradOptimizer",
           "RMSProp", "RMSPropOptimizer", "Adadelta", "AdadeltaOptimizer", "Adamax",
           "AdamaxOptimizer", "Ftrl", "FtrlOptimizer",
           "Lamb", "LambOptimizer", "LarsMomentum", "LarsMomentumOptimizer", "Dpsgd",
           "DpsgdOptimizer",
           "ModelAverage", "ExponentialMovingAverage", "LookaheadOptimizer",
           "RecomputeOptimizer"]
