"""The one word error rate (jiwer over ``WER_TRANSFORM``): what it counts and what it forgives."""
from __future__ import annotations

import pytest

from media_clients import scoring


@pytest.mark.parametrize("n, words", [(0, "zero"), (13, "thirteen"), (20, "twenty"), (21, "twenty one"),
                                      (105, "one hundred five"), (1990, "one thousand nine hundred ninety"),
                                      (2_000_003, "two million three")])
def test_spell_number(n, words):
    assert scoring.spell_number(n) == words


def test_numbers_written_as_digits_or_words_compare_equal():
    assert scoring.word_errors("The train leaves every twenty minutes.", "The train leaves every 20 minutes") == (0, 6)
    assert scoring.word_errors("seven days and twelve months", "7 days and 12 months") == (0, 5)
    assert scoring.word_errors("twenty-one", "21") == (0, 2)
    assert scoring.word_errors("one thousand", "1,000") == (0, 2)
    assert scoring.normalise_words("Meet at 3 o'clock.") == ["meet", "at", "three", "oclock"]
    assert scoring.normalise_words("the 3rd") == ["the", "3rd"]  # only whole numbers are spelled out


def test_errors_are_substitutions_deletions_and_insertions_over_reference_words():
    assert scoring.word_errors("The quick brown fox.", "the quick brown fox") == (0, 4)
    assert scoring.word_errors("a b c d", "a x c") == (2, 4)  # one substitution, one deletion
    assert scoring.word_errors("a b", "a b c d") == (2, 2)  # two insertions: a rate may pass 1
    assert scoring.word_errors("a b", "") == (2, 2)


def test_corpus_rate_is_total_errors_over_total_words_and_matches_jiwer_over_lists():
    pairs = [("a b", "a b"), ("c d e f", "c x"), ("Twenty cats.", "20 cats")]
    assert scoring.corpus_wer(pairs) == pytest.approx(3 / 8)
    assert scoring.word_error_rate([r for r, _ in pairs], [h for _, h in pairs]) == pytest.approx(3 / 8)
    assert scoring.word_error_rate("twenty cats", "20 dogs") == 0.5
