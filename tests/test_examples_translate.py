"""The translation example learns: after 300 teacher-forced steps its encoder-decoder
writes held-out numbers in English words, greedy and with a beam of 4 (which does not lose
to greedy); the rule that makes its data is the English one."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import translate  # noqa: E402


def test_number_words_follow_english():
    cases = {0: "zero", 7: "seven", 13: "thirteen", 40: "forty", 99: "ninety nine",
             100: "one hundred", 105: "one hundred five", 1000: "one thousand",
             40512: "forty thousand five hundred twelve",
             99999: "ninety nine thousand nine hundred ninety nine",
             20019: "twenty thousand nineteen"}
    for n, words in cases.items():
        assert " ".join(translate.number_words(n)) == words


def test_the_batches_are_padded_with_lengths():
    data = translate.batch([7, 40512])
    assert data["src"].tolist() == [[7, 0, 0, 0, 0], [4, 0, 5, 1, 2]]
    assert data["src_len"].tolist() == [1, 5] and data["tgt_len"].tolist() == [2, 6]
    assert data["tgt_in"][0, :2].tolist() == [translate.START, translate.WORD_ID["seven"]]
    assert data["tgt_out"][0, :2, 0].tolist() == [translate.WORD_ID["seven"], translate.END]
    train, test = translate.split()
    assert not set(train) & set(test)


def test_a_short_run_translates_held_out_numbers(capsys):
    greedy, beam = translate.main(steps=300, report_every=300)
    assert greedy > 0.9 and beam >= greedy
    out = capsys.readouterr().out
    assert "held-out exact match on 1000 numbers" in out and "thousand" in out
