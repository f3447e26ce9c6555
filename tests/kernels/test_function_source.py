"""A tier function's text read without tokenizing (kernels/build.py, `function_source`):
the same text `inspect.getsource` gives, for every function the package defines (the
compiled kernels' cache keys are digests of these texts)."""
import importlib
import inspect
import pkgutil
import types

import fluid_interactive
from fluid_interactive.kernels.build import function_source


def _edge(x):
    y = (x +
         1
         )
    # a comment after the last statement belongs to the body
    return y


def _trailing(x):
    return x
    # after the last statement


def _docstring_only():
    """Nothing but
    a docstring."""


def _with_nested(x):
    def inner(y):
        return (y
                * 2)
    return inner(x)


def test_the_text_is_inspects_for_edge_cases():
    for fn in (_edge, _trailing, _docstring_only, _with_nested):
        assert function_source(fn).rstrip() == inspect.getsource(fn).rstrip(), fn


def test_the_text_is_inspects_for_every_function_of_the_package():
    checked = 0
    for info in pkgutil.walk_packages(fluid_interactive.__path__, "fluid_interactive."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if isinstance(obj, types.FunctionType) and obj.__module__ == module.__name__:
                assert function_source(obj).rstrip() == inspect.getsource(obj).rstrip(), \
                    f"{module.__name__}.{name}"
                checked += 1
    assert checked > 1000
