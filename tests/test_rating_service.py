import pytest

from annotations.errors import RatingOutOfRange
from annotations.models import Aspect, Dataset, Item, Response, System, Turn
from annotations.services import rater_for_user, rating_create


@pytest.fixture
def setup(db: None):  # type: ignore[no-untyped-def]
    dataset = Dataset.objects.create(name="svc")
    system = System.objects.create(dataset=dataset, key="sys_a")
    item = Item.objects.create(dataset=dataset, external_id="q1", position=0)
    turn = Turn.objects.create(item=item, index=0, prompt="p")
    response = Response.objects.create(turn=turn, system=system, position=0, text="a")
    balanced = Aspect.objects.create(
        dataset=dataset, name="formality", min_value=-1, max_value=1, ideal=0, missing=[None, "NA"]
    )
    return dataset, response, balanced


def test_rating_create_accepts_in_range_and_missing_tokens(setup, annotator1, annotator2) -> None:  # type: ignore[no-untyped-def]
    dataset, response, aspect = setup
    rating = rating_create(
        response=response,
        aspect=aspect,
        rater=rater_for_user(dataset=dataset, user=annotator1),
        raw=-1,
        seconds_spent=12.5,
    )
    assert (rating.value, rating.is_missing, rating.origin) == (-1.0, False, "app")
    missing = rating_create(
        response=response, aspect=aspect, rater=rater_for_user(dataset=dataset, user=annotator2), raw="NA"
    )
    assert missing.is_missing and missing.value is None


@pytest.mark.parametrize("raw", [2, -1.5, "1", True, [1], {"v": 0}])
def test_rating_create_names_the_aspect_and_scale_when_out_of_range(setup, annotator1, raw) -> None:  # type: ignore[no-untyped-def]
    dataset, response, aspect = setup
    rater = rater_for_user(dataset=dataset, user=annotator1)
    with pytest.raises(RatingOutOfRange, match=r"formality: expected a number in \[-1, 1\]"):
        rating_create(response=response, aspect=aspect, rater=rater, raw=raw)


def test_rater_for_user_is_stable_and_pseudonymous(setup, annotator1) -> None:  # type: ignore[no-untyped-def]
    dataset, _, _ = setup
    first = rater_for_user(dataset=dataset, user=annotator1)
    assert rater_for_user(dataset=dataset, user=annotator1) == first
    assert annotator1.username not in first.pseudonym
