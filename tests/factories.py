"""Shared factory_boy factories for the annotation and judging models.

Related objects are built inside the same dataset: a Response's System belongs to its Turn's Item's Dataset, and a
Rating's Aspect and Rater belong to the Response's Dataset, so the foreign-id checks of services never trip on data
made here. Pass an existing object to reuse it, e.g. RatingFactory(response=r, aspect=a, rater=x).
"""

from typing import Any

import factory
from django.contrib.auth.models import User
from factory.django import DjangoModelFactory

from annotations.models import (
    Aspect,
    AspectKind,
    Dataset,
    ErrorSpan,
    Item,
    MeasurementLevel,
    Rater,
    Rating,
    RatingOrigin,
    Response,
    Rubric,
    System,
    Turn,
)
from judging.models import Judge, JudgeKind, JudgeScore


class UserFactory(DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.test")
    password = factory.django.Password("factory-password-123")


class DatasetFactory(DjangoModelFactory):
    class Meta:
        model = Dataset
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"dataset {n}")
    owner = None

    @factory.post_generation
    def members(self, create: bool, extracted: Any, **kwargs: Any) -> None:
        if create and extracted:
            self.members.add(*extracted)


class RubricFactory(DjangoModelFactory):
    class Meta:
        model = Rubric

    dataset = factory.SubFactory(DatasetFactory)
    source = "file"
    systems = factory.LazyFunction(dict)


class AspectFactory(DjangoModelFactory):
    class Meta:
        model = Aspect
        django_get_or_create = ("dataset", "name")

    dataset = factory.SubFactory(DatasetFactory)
    name = factory.Sequence(lambda n: f"aspect{n}")
    label = factory.LazyAttribute(lambda a: a.name.title())
    description = ""
    min_value = 1.0
    max_value = 5.0
    ideal = factory.LazyAttribute(lambda a: a.max_value)
    level = MeasurementLevel.ORDINAL
    labels = factory.LazyFunction(dict)
    missing = factory.LazyFunction(lambda: [None, "NA"])
    position = factory.Sequence(lambda n: n)


MQM_TEST_SCHEME = {
    "categories": ["Accuracy/Mistranslation", "Accuracy/Omission", "Fluency/Grammar", "Fluency/Punctuation"],
    "severities": {"minor": 1, "major": 5, "critical": 10},
    "category_severity_weights": [{"category": "Fluency/Punctuation", "severity": "minor", "weight": 0.1}],
    "no_error_confirmation": True,
}


class SpanAspectFactory(AspectFactory):
    """A span aspect with an MQM-like scheme: its ratings' values are MQM scores, 0 the ideal."""

    name = factory.Sequence(lambda n: f"mqm{n}")
    kind = AspectKind.SPANS
    span_scheme = factory.LazyFunction(lambda: dict(MQM_TEST_SCHEME))
    min_value = 0.0
    max_value = 25.0
    ideal = 0.0
    level = MeasurementLevel.RATIO


class SystemFactory(DjangoModelFactory):
    class Meta:
        model = System
        django_get_or_create = ("dataset", "key")

    dataset = factory.SubFactory(DatasetFactory)
    key = factory.Sequence(lambda n: f"sys_{n}")
    model_name = factory.LazyAttribute(lambda s: f"vendor/{s.key}-model")
    position = factory.Sequence(lambda n: n)


class ItemFactory(DjangoModelFactory):
    class Meta:
        model = Item

    dataset = factory.SubFactory(DatasetFactory)
    external_id = factory.Sequence(lambda n: f"item-{n}")
    position = factory.Sequence(lambda n: n)
    source = factory.LazyAttribute(lambda i: {"id": i.external_id})


class TurnFactory(DjangoModelFactory):
    class Meta:
        model = Turn

    item = factory.SubFactory(ItemFactory)
    index = 0
    prompt = factory.Sequence(lambda n: f"Prompt number {n}: explain something.")
    reference = None
    context = None
    source = factory.LazyAttribute(lambda t: {"prompt": t.prompt})


class ResponseFactory(DjangoModelFactory):
    class Meta:
        model = Response

    turn = factory.SubFactory(TurnFactory)
    system = factory.SubFactory(SystemFactory, dataset=factory.SelfAttribute("..turn.item.dataset"))
    position = factory.Sequence(lambda n: n)
    text = factory.Sequence(lambda n: f"Answer number {n}.")
    source = factory.LazyAttribute(lambda r: {"response": r.text})
    eval_aspects = factory.LazyFunction(list)
    has_human_evals = False


class RaterFactory(DjangoModelFactory):
    """An imported rater by default; pass user=... (and external_id=None) for an app rater."""

    class Meta:
        model = Rater

    dataset = factory.SubFactory(DatasetFactory)
    external_id = factory.Sequence(lambda n: f"w{n:03d}")
    user = None
    pseudonym = factory.LazyAttribute(lambda r: r.external_id or f"annotator-{r.user.pk}")
    is_positional = False


class RatingFactory(DjangoModelFactory):
    class Meta:
        model = Rating

    response = factory.SubFactory(ResponseFactory)
    aspect = factory.SubFactory(AspectFactory, dataset=factory.SelfAttribute("..response.turn.item.dataset"))
    rater = factory.SubFactory(RaterFactory, dataset=factory.SelfAttribute("..response.turn.item.dataset"))
    position = 0
    raw = 3
    value = factory.LazyAttribute(lambda r: float(r.raw) if isinstance(r.raw, (int, float)) else None)
    is_missing = factory.LazyAttribute(lambda r: r.value is None)
    origin = RatingOrigin.IMPORT


class ErrorSpanFactory(DjangoModelFactory):
    class Meta:
        model = ErrorSpan

    rating = factory.SubFactory(RatingFactory)
    position = factory.Sequence(lambda n: n)
    start = 0
    end = 1
    category = "Accuracy/Mistranslation"
    severity = "minor"


class JudgeFactory(DjangoModelFactory):
    class Meta:
        model = Judge
        django_get_or_create = ("dataset", "name")

    dataset = factory.SubFactory(DatasetFactory)
    name = factory.Sequence(lambda n: f"judge {n}")
    kind = JudgeKind.IMPORTED
    params = factory.LazyFunction(dict)


class JudgeScoreFactory(DjangoModelFactory):
    class Meta:
        model = JudgeScore

    response = factory.SubFactory(ResponseFactory)
    judge = factory.SubFactory(JudgeFactory, dataset=factory.SelfAttribute("..response.turn.item.dataset"))
    aspect_name = "overall"
    value = 3.0
