"""`gc_paused` suspends automatic collection inside its block only, nested or not, and
restores it when the block raises; what a block that succeeded built goes straight to the
oldest generation, unless something is frozen."""
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


def _generation_of(obj) -> int | None:
    for gen in range(3):
        if any(o is obj for o in gc.get_objects(generation=gen)):
            return gen
    return None


def test_what_the_block_built_goes_to_the_oldest_generation():
    """So no young collection walks a whole program's records at once after the block."""
    if gc.get_freeze_count():
        pytest.skip("something is frozen here (CPython 3.12 freezes objects at startup): "
                    "gc_paused leaves young objects young then, as the next test checks")
    with gc_paused():
        built = [[] for _ in range(2000)]
    assert _generation_of(built[0]) == 2
    assert gc.get_freeze_count() == 0


def test_a_freeze_is_kept_and_a_failed_block_promotes_nothing():
    froze = not gc.get_freeze_count()
    if froze:
        gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gc_paused():
            built = [[] for _ in range(2000)]
        assert gc.get_freeze_count() == frozen      # nothing thawed, nothing added
        assert _generation_of(built[0]) != 2
    finally:
        if froze:
            gc.unfreeze()
    with pytest.raises(RuntimeError):
        with gc_paused():
            failed = [[] for _ in range(2000)]
            raise RuntimeError
    assert gc.isenabled()
    assert _generation_of(failed[0]) != 2   # garbage now, perhaps: collected as usual
