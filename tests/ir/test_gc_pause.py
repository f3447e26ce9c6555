"""`gc_paused` suspends automatic collection inside its block only, nested or not, and
restores it when the block raises."""
import gc

import pytest

from fluid_interactive.util.gc_pause import gc_paused


def test_paused_inside_restored_after_even_on_error():
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()      # the inner block leaves the outer's pause
            raise RuntimeError
    assert gc.isenabled()


def test_a_caller_that_disabled_collection_keeps_it_disabled():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
