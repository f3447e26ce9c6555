"""The proposal's own spellings: ``fluid.scope`` is `var_scope`, an unknown layer name
suggests the closest one under its public module, and the end-of-data message says how
to read for ever or N passes."""
import numpy as np
import pytest

import fluid


def test_fluid_scope_is_var_scope_and_shares_weights():
    assert fluid.scope is fluid.var_scope and "scope" in fluid.__all__

    class Shared(fluid.Program):
        @fluid.network("x")
        def a(self, x):
            x = fluid.layers.data(name="x", shape=[2], dtype="float32")
            with fluid.scope("prediction"):
                return fluid.layers.fc(input=x, size=1)

        @fluid.network("x")
        def b(self, x):
            x = fluid.layers.data(name="x", shape=[2], dtype="float32")
            with fluid.var_scope("prediction"):
                return fluid.layers.fc(input=x, size=1)

    prog = Shared().Compile(seed=0)
    x = np.ones((3, 2), "float32")
    np.testing.assert_array_equal(prog.a(x), prog.b(x))
    assert all(name.startswith("prediction/") for name in prog.parameters())


def test_an_unknown_layer_suggests_the_closest_and_names_the_public_module():
    with pytest.raises(AttributeError, match=r"fluid\.layers has no layer 'fcc'; did you "
                                              r"mean fluid\.layers\.fc\b"):
        fluid.layers.fcc  # noqa: B018
    with pytest.raises(AttributeError) as info:
        fluid.layers.no_such_thing_at_all  # noqa: B018
    assert "fluid_interactive" not in str(info.value) and "dir(fluid.layers)" in str(info.value)
    assert not hasattr(fluid.layers, "fcc") and hasattr(fluid.layers, "fc")


def test_the_end_of_data_message_says_how_to_read_for_ever_or_n_passes():
    class Reads(fluid.Program):
        @fluid.network()
        def step(self):
            reader = fluid.batch_reader(data=(np.zeros((4, 3), "float32"),), batch_size=4,
                                        shape=[[3]], dtype=["float32"])
            return fluid.layers.mean(reader.next_item())

    prog = Reads().Compile(seed=0)
    prog.step()
    with pytest.raises(fluid.EOFException) as info:
        prog.step()
    message = str(info.value)
    assert "epochs=1" in message and "epochs=None" in message and "epochs=N" in message
