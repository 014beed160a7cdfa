"""The span data layer: span aspects in the rubric, error spans with their invariants in the database, and the
selector the span statistics read."""

import pytest
from django.db import IntegrityError, transaction

from annotations.datasets.downloads import dataset_rubric
from annotations.errors import RubricError
from annotations.models import Aspect, AspectKind, ErrorSpan
from annotations.rubrics.specs import parse_rubric
from annotations.selectors import human_error_spans
from annotations.spans.error_spans import Span
from annotations.spans.schemes import SpanScheme
from tests.factories import (
    DatasetFactory,
    ErrorSpanFactory,
    RaterFactory,
    RatingFactory,
    ResponseFactory,
    SpanAspectFactory,
)

MIXED_RUBRIC = {
    "aspects": [
        {"name": "overall", "min": 1, "max": 5},
        {
            "name": "mqm",
            "kind": "spans",
            "label": {"en": "Errors", "ja": "誤り"},
            "spans": {
                "categories": ["Accuracy/Mistranslation", "Fluency/Grammar", "Non-translation"],
                "severities": {"minor": 1, "major": 5, "critical": 10},
                "category_weights": {"Non-translation": 25},
                "normalisation": "100_characters",
                "no_error_confirmation": True,
                "labels": {"ja": {"Fluency/Grammar": "流暢さ/文法", "minor": "軽微"}},
            },
        },
    ]
}


def test_a_rubric_mixes_scale_and_span_aspects() -> None:
    rubric = parse_rubric(MIXED_RUBRIC, source="file")
    scale, spans = rubric.aspects
    assert (scale.kind, scale.span_scheme) == (AspectKind.SCALE, None)
    assert spans.kind == AspectKind.SPANS
    assert (spans.min_value, spans.max_value, spans.ideal, spans.level) == (0, 25, 0, "ratio")
    assert spans.span_scheme is not None
    assert spans.span_scheme.categories == ("Accuracy/Mistranslation", "Fluency/Grammar", "Non-translation")
    assert spans.span_scheme.label("minor", "ja") == "軽微"
    assert spans.span_scheme.label("major", "ja") == "major"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"severities": {"tiny": 1}}, "unknown severity 'tiny'"),
        ({"categories": []}, "'categories' must be a non-empty list"),
        ({"categories": ["Accuracy/"]}, "has an empty level"),
        ({"categories": ["A", "A"]}, "category 'A' appears twice"),
        ({"normalisation": "per_token"}, "'normalisation' must be one of"),
        ({"category_weights": {"Style": 2}}, "'Style', which is not among the categories"),
        ({"severities": {"minor": -1}}, "a weight must be a number of at least 0"),
        ({"colour": "red"}, "unknown key 'colour'"),
    ],
)
def test_a_bad_span_scheme_is_named(change: dict, message: str) -> None:
    scheme = {**MIXED_RUBRIC["aspects"][1]["spans"], **change}  # type: ignore[index]
    if "categories" in change:
        scheme.pop("category_weights")
        scheme.pop("labels")
    aspect = {**MIXED_RUBRIC["aspects"][1], "spans": scheme}  # type: ignore[dict-item]
    with pytest.raises(RubricError, match=message):
        parse_rubric({"aspects": [aspect]}, source="file")


def test_spans_on_a_scale_aspect_are_refused() -> None:
    with pytest.raises(RubricError, match='add "kind": "spans"'):
        parse_rubric({"aspects": [{"name": "x", "min": 1, "max": 5, "spans": {}}]}, source="file")


def test_scores_normalise_as_the_scheme_says() -> None:
    spans = [Span(0, 3, "Fluency/Grammar", "major"), Span(None, None, "Non-translation", "minor")]
    base = SpanScheme(
        categories=("Fluency/Grammar", "Non-translation"),
        severities={"minor": 1, "major": 5},
        category_weights={"Non-translation": 25},
    )
    assert base.score(spans, "one two three four") == 30
    per_words = SpanScheme.from_json({**base.to_json(), "normalisation": "100_words"})
    assert per_words.score(spans, "one two three four") == 750
    per_characters = SpanScheme.from_json({**base.to_json(), "normalisation": "100_characters"})
    assert per_characters.score(spans, "日本語の文") == 600
    assert base.score([], "") == 0


@pytest.mark.django_db
def test_the_rubric_export_gives_back_the_span_scheme() -> None:
    dataset = DatasetFactory()
    aspect = SpanAspectFactory(dataset=dataset, name="mqm")
    exported = dataset_rubric(dataset)["aspects"][0]
    assert exported["kind"] == "spans"
    reread = parse_rubric({"aspects": [exported]}, source="file").aspects[0]
    assert reread.span_scheme == aspect.scheme


@pytest.mark.django_db
def test_the_database_keeps_span_offsets_ordered_and_severities_known() -> None:
    rating = RatingFactory(aspect=SpanAspectFactory(), raw={"no_error": False}, value=1.0, is_missing=False)
    for bad in (
        {"start": 5, "end": 4},
        {"start": 1, "end": None},
        {"severity": "tiny"},
        {"category": ""},
        {"source_start": None, "source_end": 3},
    ):
        with pytest.raises(IntegrityError), transaction.atomic():
            ErrorSpanFactory(rating=rating, **bad)
    ErrorSpanFactory(rating=rating, start=None, end=None)
    ErrorSpanFactory(rating=rating, start=2, end=2)
    rating.delete()
    assert not ErrorSpan.objects.exists()


@pytest.mark.django_db
def test_a_scale_aspect_holds_no_scheme_and_a_span_aspect_needs_one() -> None:
    dataset = DatasetFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        Aspect.objects.create(dataset=dataset, name="a", min_value=0, max_value=25, ideal=0, kind=AspectKind.SPANS)
    with pytest.raises(IntegrityError), transaction.atomic():
        Aspect.objects.create(
            dataset=dataset,
            name="b",
            min_value=1,
            max_value=5,
            ideal=5,
            span_scheme={"categories": [], "severities": {}},
        )
    with pytest.raises(IntegrityError), transaction.atomic():
        Aspect.objects.create(dataset=dataset, name="c", min_value=1, max_value=5, ideal=5, kind="stars")


@pytest.mark.django_db
def test_human_error_spans_by_answer_and_rater() -> None:
    response = ResponseFactory(text="Der Hund bellt.")
    dataset = response.turn.item.dataset
    aspect = SpanAspectFactory(dataset=dataset)
    first, second, silent = (RaterFactory(dataset=dataset) for _ in range(3))
    marked = RatingFactory(
        response=response, aspect=aspect, rater=first, raw={"no_error": False}, value=6.0, is_missing=False
    )
    ErrorSpanFactory(rating=marked, position=1, start=4, end=8, category="Fluency/Grammar", severity="minor")
    ErrorSpanFactory(rating=marked, position=0, start=0, end=3, category="Accuracy/Mistranslation", severity="major")
    RatingFactory(response=response, aspect=aspect, rater=second, raw={"no_error": True}, value=0.0, is_missing=False)
    RatingFactory(response=response, aspect=aspect, rater=silent, raw="NA", value=None, is_missing=True)
    assert human_error_spans(aspect_id=aspect.pk) == {
        (response.pk, first.pk): [
            Span(0, 3, "Accuracy/Mistranslation", "major"),
            Span(4, 8, "Fluency/Grammar", "minor"),
        ],
        (response.pk, second.pk): [],
    }
