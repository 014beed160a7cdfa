"""The shared factories build objects that hang together inside one dataset."""

import pytest

from annotations.services import rating_create
from tests.factories import (
    AspectFactory,
    DatasetFactory,
    JudgeScoreFactory,
    RaterFactory,
    RatingFactory,
    ResponseFactory,
)


@pytest.mark.django_db
def test_rating_factory_keeps_every_part_in_one_dataset() -> None:
    rating = RatingFactory(raw="NA")
    dataset = rating.response.turn.item.dataset
    assert rating.aspect.dataset == dataset
    assert rating.rater.dataset == dataset
    assert rating.response.system.dataset == dataset
    assert rating.is_missing is True and rating.value is None


@pytest.mark.django_db
def test_factories_compose_with_the_rating_service(researcher) -> None:
    dataset = DatasetFactory(owner=researcher, members=[researcher])
    response = ResponseFactory(turn__item__dataset=dataset)
    aspect = AspectFactory(dataset=dataset, name="fluency")
    rater = RaterFactory(dataset=dataset)
    rating = rating_create(response=response, aspect=aspect, rater=rater, raw=4)
    assert rating.value == 4.0
    assert list(dataset.members.all()) == [researcher]
    score = JudgeScoreFactory(response=response, aspect_name="fluency", value=0.5)
    assert score.judge.dataset == dataset
