"""Paddle 1.8's sequence/test_sequence_first_step.py and test_sequence_last_step.py,
ported (both test the errors of `sequence_last_step`: an input that is not a Variable,
and int64 ids, which the pool takes in Paddle only as floats)."""
import numpy as np
import pytest
from paddle.common import compile_fetches

import fluid


@pytest.mark.parametrize("paddle_file", ["test_sequence_first_step",
                                         "test_sequence_last_step"])
def test_errors(paddle_file):   # TestSequenceFirstStepOpError, TestSequenceLastStepOpError
    def build():
        with pytest.raises(TypeError):
            fluid.layers.sequence_last_step(np.random.randint(1, 5, [4]).astype("int64"))
        type_data = fluid.layers.data(name='type_data', shape=[7, 1], append_batch_size=False,
                                      dtype='int64')
        with pytest.raises(TypeError):
            fluid.layers.sequence_last_step(type_data)
        return [type_data]
    compile_fetches(build, ["type_data"])
