"""Paddle 1.8's book networks (examples/book/) compile and train with a falling loss.

The image and LSTM networks run here thinner (fewer channels, a smaller hidden size,
ResNet-8 for ResNet-32) and on small batches, the same layer structure, so that each test
takes seconds on a CPU; their book-size programs are compiled (not trained) and their
depth checked. A loss "falls" on one batch trained on again and again (the networks
memorise it), or on fresh batches where the synthetic pattern is quick to learn.
"""
import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOOK = os.path.join(ROOT, "examples", "book")
sys.path.insert(0, BOOK)



def on_one_batch(prog, batch, steps):
    """The losses of ``steps`` train steps on the same batch."""
    from book_common import train
    return train(prog.train_step, itertools.repeat(batch), steps, every=steps)


def parameters_named(prog, fragment):
    return [n for n in prog.var_names() if fragment in n and n.endswith(".w_0")]


@pytest.mark.parametrize("net", ["mlp", "conv"])
def test_recognize_digits_learns(net, capsys):
    import recognize_digits
    losses, accuracy = recognize_digits.main(net, steps=10, batch_size=32)
    assert np.mean(losses[-2:]) < 0.5 * losses[0]
    assert accuracy > 0.5                                    # chance: 0.1
    assert "test loss" in capsys.readouterr().out


@pytest.mark.parametrize("net,sizes", [
    ("resnet", {"depth": 8, "resnet_channels": (8, 16, 32)}),
    ("vgg", {"vgg_channels": (8, 16, 32, 32, 32), "vgg_fc": 64}),
])
def test_image_classification_thin_nets_learn_a_batch(net, sizes):
    import image_classification as ic
    prog = ic.ImageClassification(net=net, **sizes).Compile(seed=0)
    losses = on_one_batch(prog, next(ic.batches(0, 16)), 20)
    assert np.mean(losses[-3:]) < np.mean(losses[:3]) - 0.2, losses
    loss, acc = prog.test(**next(ic.batches(1, 16)))
    assert np.isfinite(loss) and 0 <= acc <= 1


@pytest.mark.parametrize("net,convs", [("resnet", 33), ("vgg", 13)])
def test_image_classification_book_size_programs_compile(net, convs):
    import image_classification as ic
    prog = ic.ImageClassification(net=net).Compile(seed=0)
    # ResNet-32: a first conv, 3 stages x 5 basic blocks x 2 convs, 2 shortcut convs
    assert len(parameters_named(prog, "conv2d")) == convs
    if net == "vgg":
        assert prog.get_var("classifier/fc_1.w_0").shape == (4096, 4096)
    prog.close()


def test_word2vec_learns():
    import word2vec
    prog = word2vec.Word2Vec().Compile(seed=0)             # the book's SGD(0.001)
    losses = on_one_batch(prog, next(word2vec.batches(0, 32, 2073)), 5)
    assert all(np.diff(losses) < 0), losses
    fast = word2vec.main(steps=60, learning_rate=1.0)
    assert np.mean(fast[-10:]) < fast[0] - 1.0               # from log(2073) = 7.6


def test_word2vec_shares_one_table_and_infers_next_word_probabilities():
    import word2vec
    prog = word2vec.Word2Vec().Compile(seed=0)
    assert [n for n in prog.var_names() if "shared_w" in n] == ["shared_w"]   # named: exact
    batch = next(word2vec.batches(0, 4, 2073))
    probs = prog.infer(*[batch[n] for n in word2vec.WORDS])
    assert probs.shape == (4, 2073)
    np.testing.assert_allclose(probs.sum(1), 1, rtol=1e-5)


def test_recommender_system_learns():
    import recommender_system
    losses = recommender_system.main(steps=12, batch_size=64)
    assert np.mean(losses[-3:]) < 0.3 * losses[0]


@pytest.mark.parametrize("net,sizes", [
    ("conv", {}),
    ("stacked_lstm", {"emb_dim": 32, "hid_dim": 64}),
    ("dyn_rnn", {"emb_dim": 16, "lstm_size": 16}),
])
def test_understand_sentiment_learns_a_batch(net, sizes):
    import understand_sentiment as us
    prog = us.UnderstandSentiment(net=net, sizes=sizes).Compile(seed=0)
    losses = on_one_batch(prog, next(us.batches(0, 16, max_len=12)), 12)
    assert np.mean(losses[-3:]) < np.mean(losses[:3]), losses


def test_label_semantic_roles_learns_a_batch_and_decodes():
    import label_semantic_roles as srl
    prog = srl.LabelSemanticRoles(hidden_dim=64).Compile(seed=0)
    assert len(parameters_named(prog, "lstm_")) == 8
    assert prog.get_var("emb").shape == (srl.WORD_DICT_LEN, 32)
    emb = prog.get_var("emb").copy()
    batch = next(srl.batches(0, 10, max_len=12))
    losses = on_one_batch(prog, batch, 8)
    assert losses[-1] < losses[0], losses
    np.testing.assert_array_equal(prog.get_var("emb"), emb)      # trainable=False
    path = prog.decode(**{n: batch[n] for n in srl.FEEDS})
    valid = np.arange(12)[None, :] < batch["length"][:, None]
    assert path.shape == (10, 12) and (path[~valid] == 0).all()
    assert (path[valid] < srl.LABEL_DICT_LEN).all()


def test_label_semantic_roles_book_size_program_compiles():
    import label_semantic_roles as srl
    prog = srl.LabelSemanticRoles().Compile(seed=0)
    lstm = parameters_named(prog, "lstm_")
    assert len(lstm) == 8 and all(prog.get_var(n).shape == (128, 512) for n in lstm)
    assert prog.get_var("crfw").shape == (srl.LABEL_DICT_LEN + 2, srl.LABEL_DICT_LEN)
    prog.close()


@pytest.mark.parametrize("script", ["recognize_digits.py", "word2vec.py"])
def test_a_book_example_runs_as_a_script(script):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "extension")]))
    out = subprocess.run([sys.executable, os.path.join(BOOK, script), "--steps", "3"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "step    3  loss" in out.stdout
