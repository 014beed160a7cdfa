"""The import remembers how each aspect classified each token; equal Python keys that are different JSON tokens
(1, 1.0, true; 0 and "0") must still be classified each on its own."""

from typing import Any

import pytest

from annotations.datasets.import_checks import ScoreClassifier, classify_score
from annotations.rubrics.specs import AspectSpec

ASPECT = AspectSpec(name="fluency", min_value=0, max_value=5, ideal=5, missing=[None, "NA", -1], step=1)


@pytest.mark.parametrize(
    "tokens",
    [
        [1, True, 1.0, True],
        [True, 1, 1.0],
        [0, False, "0", 0.0],
        [-1, -1.0, "NA", None, "na"],
        [2.5, 2, [2], {"v": 2}],
    ],
)
def test_remembered_classification_is_the_direct_one_for_every_token(tokens: list[Any]) -> None:
    classifier = ScoreClassifier()
    for token in tokens + tokens:
        assert classifier.classify(token, ASPECT) == classify_score(token, ASPECT), token


def test_a_boolean_after_the_same_number_is_still_refused() -> None:
    classifier = ScoreClassifier()
    assert classifier.classify(1, ASPECT) == (1.0, False)
    assert classifier.classify(True, ASPECT) is None
