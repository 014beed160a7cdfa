"""The pass rule for one rating of a gold answer, which rater-quality scoring uses."""

import pytest

from annotations.gold.rules import gold_value_passes


@pytest.mark.parametrize(
    ("value", "expected", "tolerance", "passes"),
    [
        (3, 3, 0, True),
        (2, 3, 0, False),
        (2.5, 3, 0.5, True),
        (2.4, 3, 0.5, False),
        (3.5, 3, 0.5, True),
        (0.1 + 0.2, 0.3, 0, True),
        (-1, 0, 1, True),
        (None, 2, 10, False),
    ],
)
def test_a_rating_passes_within_the_tolerance(value, expected, tolerance, passes):
    assert gold_value_passes(value=value, expected=expected, tolerance=tolerance) is passes
