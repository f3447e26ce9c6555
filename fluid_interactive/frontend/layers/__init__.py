"""`fluid.layers`: functions that append ops to the method being traced.

Each layer module lists its public layers in ``__all__``; this package re-exports exactly
those (modules of helpers for layers define no ``__all__``).
"""
import difflib as _difflib
import sys as _sys
import types as _types

from .activations import *  # noqa: F403
from .beam_decoder import *  # noqa: F403
from .beam_search import *  # noqa: F403
from .branches import *  # noqa: F403
from .compare import *  # noqa: F403
from .control_flow import *  # noqa: F403
from .conv import *  # noqa: F403
from .creation import *  # noqa: F403
from .crf import *  # noqa: F403
from .ctc import *  # noqa: F403
from .ctr import *  # noqa: F403
from .decode import *  # noqa: F403
from .decode_helpers import *  # noqa: F403
from .dynamic_rnn import *  # noqa: F403
from .index import *  # noqa: F403
from .io import *  # noqa: F403
from .loss import *  # noqa: F403
from .lr import *  # noqa: F403
from .lstm_layers import *  # noqa: F403
from .math import *  # noqa: F403
from .metric import *  # noqa: F403
from .nn import *  # noqa: F403
from .norm import *  # noqa: F403
from .normalization import *  # noqa: F403
from .pointwise_loss import *  # noqa: F403
from .pool import *  # noqa: F403
from .products import *  # noqa: F403
from .python_func import *  # noqa: F403
from .random import *  # noqa: F403
from .ranking import *  # noqa: F403
from .rearrange import *  # noqa: F403
from .recurrent import *  # noqa: F403
from .reductions import *  # noqa: F403
from .resize import *  # noqa: F403
from .rnn import *  # noqa: F403
from .rnn_cells import *  # noqa: F403
from .rnn_loop import *  # noqa: F403
from .roi import *  # noqa: F403
from .sampled import *  # noqa: F403
from .selected_rows import *  # noqa: F403
from .sequence import *  # noqa: F403
from .sequence_edit import *  # noqa: F403
from .sequence_filters import *  # noqa: F403
from .slicing import *  # noqa: F403
from .tensor import *  # noqa: F403
from .tensor_array import *  # noqa: F403
from .unary import *  # noqa: F403
from .utility import *  # noqa: F403
from .vision import *  # noqa: F403

# every layer module imported above (derived, so a new module is never left out; read from
# sys.modules, since a layer may take its module's name here: fluid.layers.rnn)
_MODULES = [m for n, m in list(_sys.modules.items())
            if isinstance(m, _types.ModuleType) and n.startswith(__name__ + ".")
            and "." not in n[len(__name__) + 1:]]
__all__ = sorted({name for module in _MODULES for name in getattr(module, '__all__', ())})


def __getattr__(name: str) -> object:
    """An unknown layer name: an `AttributeError` that suggests the closest layers."""
    if name.startswith("__"):
        raise AttributeError(name)
    close = _difflib.get_close_matches(name, __all__, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(f'fluid.layers.{c}' for c in close)}?" if close \
        else "; dir(fluid.layers) lists them"
    raise AttributeError(f"fluid.layers has no layer {name!r}{hint}", name=name)
