"""The data model's invariants hold in the database itself, not only in Python."""

import pytest
from django.db import IntegrityError, transaction

from annotations.models import Aspect, Dataset, Item, Rater, Rating, Response, System, Turn


@pytest.fixture
def answer(db: None) -> Response:
    dataset = Dataset.objects.create(name="constraints")
    system = System.objects.create(dataset=dataset, key="sys_a")
    item = Item.objects.create(dataset=dataset, external_id="q1", position=0)
    turn = Turn.objects.create(item=item, index=0, prompt="p")
    return Response.objects.create(turn=turn, system=system, position=0, text="a")


def _aspect(dataset: Dataset, name: str = "overall") -> Aspect:
    return Aspect.objects.create(dataset=dataset, name=name, min_value=1, max_value=5, ideal=5)


def test_item_id_is_unique_per_dataset(answer: Response) -> None:
    dataset = answer.system.dataset
    with pytest.raises(IntegrityError), transaction.atomic():
        Item.objects.create(dataset=dataset, external_id="q1", position=1)
    other = Dataset.objects.create(name="other")
    Item.objects.create(dataset=other, external_id="q1", position=0)


def test_one_response_per_turn_and_system(answer: Response) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Response.objects.create(turn=answer.turn, system=answer.system, position=1, text="again")


def test_one_rating_per_rater_answer_and_aspect(answer: Response) -> None:
    dataset = answer.system.dataset
    aspect = _aspect(dataset)
    rater = Rater.objects.create(dataset=dataset, external_id="w1", pseudonym="w1")
    Rating.objects.create(response=answer, aspect=aspect, rater=rater, raw=3, value=3)
    with pytest.raises(IntegrityError), transaction.atomic():
        Rating.objects.create(response=answer, aspect=aspect, rater=rater, position=1, raw=4, value=4)


def test_a_rating_without_value_must_be_marked_missing(answer: Response) -> None:
    dataset = answer.system.dataset
    aspect = _aspect(dataset)
    rater = Rater.objects.create(dataset=dataset, external_id="w1", pseudonym="w1")
    with pytest.raises(IntegrityError), transaction.atomic():
        Rating.objects.create(response=answer, aspect=aspect, rater=rater, raw="NA", value=None, is_missing=False)
    Rating.objects.create(response=answer, aspect=aspect, rater=rater, raw="NA", value=None, is_missing=True)


def test_aspect_range_and_ideal_are_checked(db: None) -> None:
    dataset = Dataset.objects.create(name="ranges")
    with pytest.raises(IntegrityError), transaction.atomic():
        Aspect.objects.create(dataset=dataset, name="inverted", min_value=5, max_value=1, ideal=5)
    with pytest.raises(IntegrityError), transaction.atomic():
        Aspect.objects.create(dataset=dataset, name="ideal-outside", min_value=-1, max_value=1, ideal=2)
    Aspect.objects.create(dataset=dataset, name="balanced", min_value=-1, max_value=1, ideal=0)


def test_a_rater_is_either_imported_or_an_app_user(db: None, annotator1) -> None:  # type: ignore[no-untyped-def]
    dataset = Dataset.objects.create(name="raters")
    with pytest.raises(IntegrityError), transaction.atomic():
        Rater.objects.create(dataset=dataset, external_id="w1", user=annotator1, pseudonym="both")
    with pytest.raises(IntegrityError), transaction.atomic():
        Rater.objects.create(dataset=dataset, pseudonym="neither")
