"""What notebooks/06_sequences.ipynb claims, checked on a real run: the LSTM remembers the
marked values of the adding problem far better than no memory can, the watched hidden
state is one row per step, and the LSTM, a GRU cell written by hand in a DynamicRNN (over
digits cut to 5 to 8 rows; equal to dynamic_gru with the same parameters, deaf to the
padding) and the Transformer encoder learn the digits read row by row. (test_notebooks.py
runs it too, for errors, graphs and widgets.)"""
import pytest

from tests.extension.test_notebook_content import HAS_DOT, run, svgs_of

pytest.importorskip("sklearn")


def test_sequences_story(tmp_path, kernel_env):
    nb, facts = run("06_sequences.ipynb", """{
        'mse': adding_mse, 'baseline': NO_MEMORY_MSE, 'steps': history.steps,
        'hidden': list(hidden_seq.shape), 'marked': marked,
        'lstm': lstm_accuracy, 'encoder': encoder_accuracy, 'gru': gru_accuracy,
        'gru_vs_fused': gru_difference, 'other_noise': noise_difference}""", tmp_path)
    assert facts["steps"] == 800
    assert facts["mse"] < 0.3 * facts["baseline"]
    assert facts["hidden"] == [20, 64] and len(facts["marked"]) == 2
    assert facts["lstm"] > 0.9 and facts["encoder"] > 0.8
    assert facts["gru"] > 0.8 and facts["gru_vs_fused"] < 1e-5 and facts["other_noise"] == 0
    if HAS_DOT:
        assert svgs_of(nb, "fluid.graph(adding.train_step)")
    (heatmap,) = svgs_of(nb, 'adding.watch("lstm/lstm_0.tmp_0"')      # fluid.heatmap
    assert heatmap.count('class="cell"') == 20 * 64 and heatmap.count('class="mark"') == 2
    assert ">step</text>" in heatmap and ">hidden unit</text>" in heatmap    # the axes
    assert heatmap.count('class="scale-label"') == 3                         # the scale
