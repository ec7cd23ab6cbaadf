"""Policy state parsing: cluster labels read from a list or from a digit string alike."""

from __future__ import annotations

import pytest

from kernelband.bandit.state import parse_labels


def test_labels_parse_from_a_digit_string_as_from_a_list() -> None:
    assert parse_labels("0129") == [0, 1, 2, 9] == parse_labels([0, 1, 2, 9])
    assert parse_labels(["3", 4.0]) == [3, 4]
    assert parse_labels("") == [] == parse_labels([])


def test_a_label_string_with_anything_but_ascii_digits_is_rejected() -> None:
    for text in ("01a", "0-1", "0\u00b2"):
        with pytest.raises(ValueError):
            parse_labels(text)
