"""What notebooks/09_translation.ipynb claims, checked on a real run: the encoder-decoder
trained by teacher forcing writes held-out numbers in words, the beam does not lose to
greedy, greedy decoding is a Python while loop, the attention heatmap has a cell per word
and digit, and early stopping takes no more steps and keeps every best hypothesis.
(test_notebooks.py runs it too, for errors, graphs and widgets.)"""
from tests.extension.test_notebook_content import HAS_DOT, run, svgs_of


def test_translation_story(tmp_path, kernel_env):
    nb, facts = run("09_translation.ipynb", """{
        'steps': history.steps, 'greedy': greedy_accuracy, 'beam': beam_accuracy,
        'loop': loop_lines, 'written': written, 'weights': weights.tolist(),
        'plain': plain_steps, 'tuned': tuned_steps, 'same_best': same_best}""", tmp_path)
    assert facts["steps"] == 400
    assert facts["greedy"] > 0.9 and facts["beam"] >= facts["greedy"]
    assert len(facts["loop"]) == 1 and facts["loop"][0].startswith("while ")
    assert facts["written"] == ["forty", "thousand", "five", "hundred", "twelve", "</s>"]
    rows = facts["weights"]
    assert len(rows) == 6 and all(abs(sum(r) - 1) < 1e-5 for r in rows)
    assert facts["tuned"] <= facts["plain"] and facts["same_best"] == 1.0
    if HAS_DOT:
        assert svgs_of(nb, "fluid.graph(translator.attention)")
        heatmap = svgs_of(nb, "from html import escape")
        assert heatmap and heatmap[0].count("<rect") == 6 * 5
