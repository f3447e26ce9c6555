"""The digits CNN example (conv, batch_norm, pool, dropout, fc) learns in a short run, and
its evaluate/infer methods run in inference mode."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))


def test_digits_cnn_short_run_learns_and_evaluates_in_inference_mode(tmp_path, capsys):
    pytest.importorskip("sklearn")
    import digits_cnn
    from digits_data import load_split, write_recordio

    train_file, test_file = write_recordio(str(tmp_path))
    prog = digits_cnn.DigitsCNN(train_file=train_file, test_file=test_file,
                                epochs=2).Compile(seed=0)
    try:
        accuracy = digits_cnn.run_epochs(prog, 2)
        assert accuracy > 0.9                  # chance is 0.10; the full run reaches 0.98+
        out = capsys.readouterr().out
        assert "epoch  2" in out and "test accuracy" in out

        # batch_norm's moving statistics: training moves them, evaluate leaves them alone.
        moving = [n for n in prog.var_names() if n.endswith((".w_1", ".w_2"))
                  and "batch_norm" in n]
        assert len(moving) == 8
        before = {n: prog.get_var(n) for n in moving}
        assert not np.allclose(before["cnn/batch_norm_0.w_1"], 0.0)   # started at 0
        assert prog.evaluate() == pytest.approx(accuracy)             # no dropout noise
        prog.reset_readers()
        for n in moving:
            np.testing.assert_array_equal(prog.get_var(n), before[n])

        # Inference mode: a sample's prediction does not depend on the rest of its batch
        # (batch statistics would make it so) nor on the call (dropout would).
        _, _, x_test, y_test = load_split()
        pred = np.asarray(prog.infer(x_test)).ravel()
        np.testing.assert_array_equal(np.asarray(prog.infer(x_test[:7])).ravel(), pred[:7])
        np.testing.assert_array_equal(np.asarray(prog.infer(x_test[3:4])).ravel(), pred[3:4])
        # ... and the data-var path agrees with the reader path of evaluate.
        assert np.mean(pred == y_test.ravel()) == pytest.approx(accuracy, abs=1e-6)

        # One training step does change the moving statistics.
        prog.train()
        assert not np.array_equal(prog.get_var("cnn/batch_norm_0.w_1"),
                                  before["cnn/batch_norm_0.w_1"])
    finally:
        prog.close()
