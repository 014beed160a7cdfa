"""Each rater against the gold spans on a campaign's span-agreement panel: a hand-worked three-rater example through
the real submit path (the gold task handed out by the claim), an exclusion, the view's query count and the Japanese
render. The figures' definitions are checked in tests/stats/test_spans.py."""

from typing import Any

import pytest
from django.urls import reverse

from annotations.gold.services import gold_item_set
from annotations.models import Item, Rater
from annotations.quality.services import rater_exclude
from judging.analysis.reports import campaign_span_agreement
from judging.analysis.span_selectors import campaign_gold_spans, campaign_spans
from tests.spans.test_span_gold import _answer_everything, _gold_campaign

pytestmark = pytest.mark.django_db

# "The cat 😀 eat the fish quickly." (31 code points): "eat" is 10..13, "fish" 18..22. The gold expects a "Fluency"
# error on "eat" (any category under Fluency passes) and an "Accuracy/Mistranslation" on "fish".
GOLD = {
    "spans": [
        {"start": 10, "end": 13, "category": "Fluency"},
        {"start": 18, "end": 22, "category": "Accuracy/Mistranslation", "severity": "major"},
    ]
}
MARKS: dict[str, list[dict[str, Any]]] = {
    # "t eat" 8..13, under Fluency.
    "annotator1": [{"start": 8, "end": 13, "category": "Fluency/Grammar", "severity": "major"}],
    # Both places, the second with a category that is not the gold's.
    "annotator2": [
        {"start": 10, "end": 13, "category": "Fluency/Spelling", "severity": "minor"},
        {"start": 18, "end": 22, "category": "Fluency/Grammar", "severity": "minor"},
    ],
    # Nothing.
    "annotator3": [],
}


@pytest.fixture
def answered(researcher: Any, annotators: list[Any]) -> Any:
    campaign, item = _gold_campaign(researcher, annotators, GOLD)
    for user in annotators:
        _answer_everything(campaign, item, user, MARKS[user.username])
    return campaign


def _rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (aspect,) = report["aspects"]
    return {row["rater"]: row for row in aspect["gold"]["raters"]}


def _values(row: dict[str, Any], convention: str) -> tuple[float | None, ...]:
    figures = row["conventions"][convention]
    return tuple(figures[key]["value"] for key in ("precision", "recall", "f1"))


def pseudonyms(campaign: Any) -> dict[str, str]:
    return dict(Rater.objects.filter(dataset=campaign.dataset).values_list("user__username", "pseudonym"))


def test_each_rater_against_gold_hand_worked(answered: Any) -> None:
    report = campaign_span_agreement(answered)
    (aspect,) = report["aspects"]
    assert aspect["gold"]["expecting"] is True and aspect["gold"]["answers"] == 3
    rows = _rows(report)
    name = pseudonyms(answered)
    one, two, three = (rows[name[f"annotator{n}"]] for n in (1, 2, 3))
    assert (one["answers"], two["answers"], three["answers"]) == (1, 1, 1)
    # Gold characters: {10, 11, 12} Fluency and {18..21} Accuracy/Mistranslation, 7 in all.
    # Rater 1 marks {8..12}, 5 characters, 3 of them the gold's: P = 3/5, R = 3/7, F1 = 2 * 3 / (5 + 7) = 1/2; the
    # three carry Fluency/Grammar, under the gold's Fluency, so with the category it is the same.
    assert _values(one, "character") == pytest.approx((0.6, 3 / 7, 0.5))
    assert _values(one, "character_category") == pytest.approx((0.6, 3 / 7, 0.5))
    # Spans: its one span meets "eat" (P = 1/1) and nothing meets "fish" (R = 1/2): F1 = 2/3, with the category too.
    assert _values(one, "span_overlap") == pytest.approx((1.0, 0.5, 2 / 3))
    assert _values(one, "span_overlap_category") == pytest.approx((1.0, 0.5, 2 / 3))
    # Rater 2 marks the gold's 7 characters exactly: 1, 1, 1. With the category only "eat" agrees (Fluency/Spelling
    # under Fluency; Fluency/Grammar is not under Accuracy/Mistranslation): P = R = 3/7, F1 = 3/7.
    assert _values(two, "character") == pytest.approx((1.0, 1.0, 1.0))
    assert _values(two, "character_category") == pytest.approx((3 / 7, 3 / 7, 3 / 7))
    # Spans: both meet a gold span (1, 1, 1); with the category one of two on each side: 1/2, 1/2, 1/2.
    assert _values(two, "span_overlap") == pytest.approx((1.0, 1.0, 1.0))
    assert _values(two, "span_overlap_category") == pytest.approx((0.5, 0.5, 0.5))
    # Rater 3 marks nothing: precision undefined, recall 0 and F1 0 under every convention.
    for convention in ("character", "character_category", "span_overlap", "span_overlap_category"):
        figures = three["conventions"][convention]
        assert figures["precision"]["undefined"] == "the rater marked nothing on their gold answers"
        assert (figures["recall"]["value"], figures["f1"]["value"]) == (0.0, 0.0)
    # The gold answers are not among the answers the raters are compared with each other on.
    assert aspect["answers"] == 2 and aspect["raters"] == 3


def test_an_excluded_rater_is_left_out_and_named(answered: Any, researcher: Any, annotator2: Any) -> None:
    before = _rows(campaign_span_agreement(answered))  # cached: the exclusion must change the key
    rater = Rater.objects.get(user=annotator2, dataset=answered.dataset)
    assert rater.pseudonym in before
    rater_exclude(rater=rater, reason="marks at random", by=researcher, campaign=answered)
    report = campaign_span_agreement(answered)
    assert rater.pseudonym not in _rows(report)
    assert len(_rows(report)) == 2
    assert report["excluded"] == [{"rater": rater.pseudonym, "reason": "marks at random"}]
    (aspect,) = report["aspects"]
    assert aspect["gold"]["answers"] == 2


def test_editing_the_gold_changes_the_figures(answered: Any, researcher: Any) -> None:
    name = pseudonyms(answered)
    before = _rows(campaign_span_agreement(answered))[name["annotator1"]]
    assert _values(before, "span_overlap")[1] == pytest.approx(0.5)
    item = Item.objects.get(dataset=answered.dataset, position=0)
    only_eat = {"spans": [GOLD["spans"][0]]}
    gold_item_set(item=item, kind="gold", expected={"sys_a": {"mqm": only_eat}}, by=researcher)
    after = _rows(campaign_span_agreement(answered))[name["annotator1"]]
    assert _values(after, "span_overlap") == pytest.approx((1.0, 1.0, 1.0))


def test_both_sides_empty_is_undefined(researcher: Any, annotators: list[Any]) -> None:
    campaign, item = _gold_campaign(researcher, annotators[:1], {"spans": []})
    _answer_everything(campaign, item, annotators[0], [])
    (aspect,) = campaign_span_agreement(campaign)["aspects"]
    # {"spans": []} expects no error and the rater marked none: nothing to compare on either side.
    (row,) = aspect["gold"]["raters"]
    assert row["answers"] == 1
    assert row["conventions"]["character"]["f1"]["undefined"] == "neither the rater nor the gold marks anything"


def test_a_campaign_without_span_gold_says_so(researcher: Any, annotators: list[Any], client: Any) -> None:
    from tests.judging.test_span_rater_agreement import rate_everything
    from tests.spans.world import span_campaign

    campaign = span_campaign(annotators, owner=researcher, raters_per_item=3)
    rate_everything(campaign, annotators)
    (aspect,) = campaign_span_agreement(campaign)["aspects"]
    assert aspect["gold"]["expecting"] is False
    client.force_login(researcher)
    text = client.get(reverse("campaign-span-agreement", args=[campaign.pk])).content.decode()
    assert "data-span-gold-none" in text and 'class="span-gold"' not in text


def test_the_selector_reads_in_bounded_queries(answered: Any, django_assert_max_num_queries: Any) -> None:
    aspects = campaign_spans(answered).aspects
    # Gold fields, the ratings of their answers, exclusions: the same for any number of raters or gold items.
    with django_assert_max_num_queries(3):
        gold = campaign_gold_spans(answered, aspects)
    assert sum(len(answers) for answers in gold.answers[aspects[0].id].values()) == 3


def test_the_panel_shows_the_gold_table(answered: Any, client: Any, researcher: Any) -> None:
    client.force_login(researcher)
    url = reverse("campaign-span-agreement", args=[answered.pk])
    page = client.get(url)
    assert page.status_code == 200
    text = page.content.decode()
    assert 'class="span-gold"' in text and "Each rater against the gold spans" in text
    assert "0.429" in text  # 3/7, rater 1's character recall
    assert "the rater marked nothing on their gold answers" in text
    assert "Gold spans are not compared here" not in text


def test_the_gold_table_in_japanese_leaves_no_english(answered: Any, client: Any, researcher: Any) -> None:
    from tests.i18n.test_japanese_pages import KEPT_LATIN, data_words, english_left

    client.force_login(researcher)
    page = client.get(reverse("campaign-span-agreement", args=[answered.pk]), HTTP_ACCEPT_LANGUAGE="ja")
    body = page.content.decode()
    assert "評価者ごとのゴールドスパンとの一致" in body
    assert english_left(body, KEPT_LATIN | data_words()) == []


def test_a_rater_who_answered_no_span_gold_is_listed_as_undefined(researcher: Any, annotators: list[Any]) -> None:
    # The claim hands a span gold task to every rater of a campaign, so the report is given gold read for no rater.
    from judging.analysis.span_reports import rater_span_agreement_report
    from judging.analysis.span_selectors import CampaignGoldSpans
    from tests.judging.test_span_rater_agreement import rate_everything
    from tests.spans.world import span_campaign

    campaign = span_campaign(annotators, owner=researcher, raters_per_item=3)
    rate_everything(campaign, annotators)
    spans = campaign_spans(campaign)
    (aspect,) = spans.aspects
    gold = CampaignGoldSpans(answers={aspect.id: {}}, excluded=(), expecting=frozenset({aspect.id}))
    (report,) = rater_span_agreement_report(spans, gold, n_resamples=10)["aspects"]
    assert set(pseudonyms(campaign).values()) == {row["rater"] for row in report["gold"]["raters"]}
    for row in report["gold"]["raters"]:
        assert row["answers"] == 0
        assert row["conventions"]["span_overlap"]["f1"] == {
            "value": None,
            "undefined": "the rater answered no gold item that expects spans",
        }
