"""The raters' span agreement on a campaign's quality panel: a hand-worked three-rater example through the real
submit path, exclusions, the MQM score's agreement as an aspect value, and the panel's view (success, wrong method,
no access) and query count."""

import json
from typing import Any

import pytest
from django.urls import reverse

from annotations.campaigns.answers import TaskAnswer
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.submissions import submission_create
from annotations.campaigns.tasks import task_candidates
from annotations.models import Rater
from annotations.quality.services import rater_exclude
from annotations.spans.error_spans import Span
from judging.analysis.reports import agreement_report, campaign_span_agreement
from judging.analysis.selectors import rating_scope
from judging.analysis.span_selectors import campaign_spans
from judging.statistics.unitizing import UnitizedItem, unitizing_alpha
from tests.conftest import CAST_PASSWORD
from tests.spans.world import ANSWERS, span_campaign

pytestmark = pytest.mark.django_db

# "The cat 😀 eat the fish quickly.": in code points "eat" is 10..13, "eat the" 10..17, "fish" 18..22 (the emoji is
# one code point). Every rater confirms the two other answers have no error.
GRAMMAR, MISTRANSLATION = "Fluency/Grammar", "Accuracy/Mistranslation"
MARKS = {
    "annotator1": [(10, 13, GRAMMAR, "minor")],
    "annotator2": [(10, 13, GRAMMAR, "minor"), (18, 22, MISTRANSLATION, "major")],
    "annotator3": [(10, 17, GRAMMAR, "minor")],
}


def _answer(spans: list[tuple[int, int, str, str]]) -> str:
    return json.dumps(
        {
            "offsets": "codepoints",
            "no_error": not spans,
            "spans": [{"start": s, "end": e, "category": c, "severity": v} for s, e, c, v in spans],
        }
    )


def rate_everything(campaign: Any, users: list[Any]) -> None:
    for user in users:
        for turn in range(len(ANSWERS)):
            assignment = assignment_claim(campaign=campaign, user=user)
            assert assignment is not None
            (candidate,) = task_candidates(assignment=assignment, user_id=user.pk)
            spans = MARKS[user.username] if candidate.text == ANSWERS[0] else []
            submission_create(
                campaign=campaign,
                task_id=assignment.task_id,
                user=user,
                idempotency_key=f"{user.username}-{turn}-key",
                answer=TaskAnswer(ratings={(1, 1): _answer(spans), (1, 2): 4.0}),
            )


@pytest.fixture
def rated(annotators: list[Any], researcher: Any) -> Any:
    campaign = span_campaign(annotators, owner=researcher, raters_per_item=3)
    rate_everything(campaign, annotators)
    return campaign


def _mean_f1(aspect: dict[str, Any], convention: str) -> float | None:
    value: float | None = aspect["pairwise"][convention]["mean_f1"]["value"]
    return value


def test_hand_worked_three_raters(rated: Any, annotators: list[Any]) -> None:
    (aspect,) = campaign_span_agreement(rated)["aspects"]
    assert aspect["aspect"] == "mqm"
    assert (aspect["answers"], aspect["raters"]) == (3, 3)
    # Characters (answers 2 and 3 add none): A={10,11,12}, B={10..12, 18..21}, C={10..16}.
    # F1 = 2 * common / (|X| + |Y|): (A,B) 6/10 = 0.6, (A,C) 6/10 = 0.6, (B,C) 6/14 = 3/7; mean (6/5 + 3/7)/3 = 19/35.
    # The common characters all carry Fluency/Grammar on both sides, so with categories it is the same.
    assert _mean_f1(aspect, "character") == pytest.approx(19 / 35)
    assert _mean_f1(aspect, "character_category") == pytest.approx(19 / 35)
    # Spans by overlap: A's "eat" meets B's "eat" but B's "fish" meets nothing of A: P = 1, R = 1/2, F1 = 2/3 for
    # (A,B); (A,C) 1; (B,C) 2/3 as (A,B). Mean (2/3 + 1 + 2/3)/3 = 7/9, with or without categories.
    assert _mean_f1(aspect, "span_overlap") == pytest.approx(7 / 9)
    assert _mean_f1(aspect, "span_overlap_category") == pytest.approx(7 / 9)
    # Same offsets: only A's and B's "eat": (A,B) 2/3, the others 0 (both marked, nothing equal). Mean 2/9.
    assert _mean_f1(aspect, "span_exact_category") == pytest.approx(2 / 9)
    for figures in aspect["pairwise"].values():
        assert (figures["pairs"], figures["counted_pairs"], figures["answers"]) == (3, 3, 3)
    # Unitizing alpha is the tested statistic (tests/stats/test_unitizing.py, Krippendorff 2004) on the same units,
    # raters numbered in pseudonym order, answers laid end to end in response order.
    pseudonym = dict(Rater.objects.filter(user__in=annotators).values_list("user__username", "pseudonym"))
    order = sorted(MARKS, key=lambda name: pseudonym[name])
    items = [
        UnitizedItem(
            len(text),
            {
                f"#{n + 1}": [Span(*mark) for mark in MARKS[name]] if text == ANSWERS[0] else []
                for n, name in enumerate(order)
            },
        )
        for text in ANSWERS
    ]
    expected = unitizing_alpha(items, with_category=True)["alpha"]["value"]
    alpha = aspect["alpha"]["category"]
    assert alpha["alpha"]["value"] == pytest.approx(expected)
    assert (alpha["answers"], alpha["raters"], alpha["left_out"]) == (3, 3, 0)
    assert alpha["interval"]["low"] is not None and alpha["interval"]["low"] <= alpha["interval"]["high"]


def test_an_exclusion_leaves_the_rater_out(rated: Any, annotator3: Any, researcher: Any) -> None:
    before = campaign_span_agreement(rated)  # cached: the exclusion must change the key
    assert before["excluded"] == []
    rater = Rater.objects.get(user=annotator3, dataset=rated.dataset)
    rater_exclude(rater=rater, reason="marks whole phrases", by=researcher, campaign=rated)
    after = campaign_span_agreement(rated)
    (aspect,) = after["aspects"]
    assert after["excluded"] == [{"rater": rater.pseudonym, "reason": "marks whole phrases"}]
    assert aspect["raters"] == 2
    # Only A and B: characters 0.6, spans by overlap 2/3, same offsets 2/3 (see the hand-worked test).
    assert _mean_f1(aspect, "character") == pytest.approx(0.6)
    assert _mean_f1(aspect, "span_overlap") == pytest.approx(2 / 3)
    assert _mean_f1(aspect, "span_exact_category") == pytest.approx(2 / 3)
    assert aspect["pairwise"]["character"]["pairs"] == 1
    assert rater.pseudonym not in {
        name for by_rater in campaign_spans(rated).spans[aspect_id(rated)].values() for name in by_rater
    }


def aspect_id(campaign: Any) -> int:
    return int(campaign.aspects.get(name="mqm").pk)


def test_the_mqm_score_is_already_an_aspect_value_in_the_agreement_report(rated: Any) -> None:
    # Each rating of the span aspect stores its MQM score (minor 1, major 5) as the value: on "The cat…" A 1, B 6,
    # C 1; 0 on the two answers confirmed free of errors. The agreement report reads it as any aspect's value.
    report = agreement_report(rated.dataset, rating_scope(campaign=rated))
    mqm = report["aspects"]["mqm"]
    assert (mqm["n_items"], mqm["n_ratings"]) == (3, 9)
    assert mqm["alpha"]["interval"]["value"] is not None
    # The quality panel's per-rater agreement reads them too: each rater shares 3 answers on each of 2 aspects, the
    # span aspect's MQM scores and the "overall" scale.
    from annotations.quality.selectors import quality_panel

    assert {row.agreement.shared for row in quality_panel(rated).rows} == {6}


def test_too_little_data_is_undefined_with_a_reason(annotator1: Any, researcher: Any) -> None:
    campaign = span_campaign([annotator1], owner=researcher, raters_per_item=1)
    rate_everything(campaign, [annotator1])
    (aspect,) = campaign_span_agreement(campaign)["aspects"]
    assert aspect["pairwise"]["character"]["mean_f1"] == {
        "value": None,
        "undefined": "no answer was marked by two raters",
    }
    assert aspect["alpha"]["whole"]["alpha"]["undefined"] == "no answer was marked by two raters"


def test_panel_view_success_wrong_method_and_access(
    rated: Any,
    client: Any,
    researcher: Any,
    annotator1: Any,
    django_user_model: Any,
    django_assert_max_num_queries: Any,
) -> None:
    url = reverse("campaign-span-agreement", args=[rated.pk])
    assert client.get(url).status_code == 302  # to the login page
    client.force_login(annotator1)
    assert client.get(url).status_code == 403  # not a researcher
    other = django_user_model.objects.create_user("other-researcher", password=CAST_PASSWORD, is_staff=True)
    client.force_login(other)
    assert client.get(url).status_code == 404  # not their campaign
    client.force_login(researcher)
    assert client.post(url).status_code == 405
    # The reads are a fixed number of queries whatever the campaign's size (no query per answer or rater): aspects,
    # ratings, exclusions, raters, lengths, spans and the campaign's dataset.
    with django_assert_max_num_queries(7):
        campaign_spans(rated)
    with django_assert_max_num_queries(40):
        page = client.get(url)
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="span-rater-agreement"' in text
    assert "0.543" in text  # 19/35, character F1
    assert "0.778" in text  # 7/9, spans by overlap
    # The quality panel loads it, and so does the panel an exclusion redraws.
    progress = client.get(reverse("campaign-progress", args=[rated.pk])).content.decode()
    assert url in progress
    rater = Rater.objects.get(user=annotator1, dataset=rated.dataset)
    redrawn = client.post(
        reverse("rater-exclude", args=[rated.pk, rater.pk]), {"reason": "too fast"}, HTTP_HX_REQUEST="true"
    )
    assert redrawn.status_code == 200 and url in redrawn.content.decode()
    assert rater.pseudonym in client.get(url).content.decode()  # named as left out


def test_panel_is_empty_for_a_campaign_without_span_aspects(
    client: Any, researcher: Any, annotator1: Any, django_assert_max_num_queries: Any
) -> None:
    from tests.annotate.factories import make_campaign, make_dataset

    campaign = make_campaign(make_dataset(owner=researcher), [annotator1])
    client.force_login(researcher)
    with django_assert_max_num_queries(6):  # session, user, campaign, the span-aspect check: no version read
        page = client.get(reverse("campaign-span-agreement", args=[campaign.pk]))
    assert page.status_code == 200 and page.content.decode().strip() == ""


def test_panel_in_japanese_leaves_no_english(rated: Any, client: Any, researcher: Any) -> None:
    from tests.i18n.test_japanese_pages import KEPT_LATIN, data_words, english_left

    client.force_login(researcher)
    page = client.get(reverse("campaign-span-agreement", args=[rated.pk]), HTTP_ACCEPT_LANGUAGE="ja")
    body = page.content.decode()
    assert "評価者間の誤りスパンの一致度" in body and "95% 区間" in body
    assert '<h4 id="span-agreement-1">誤り</h4>' in body  # the aspect's Japanese label, not its name
    assert english_left(body, KEPT_LATIN | data_words()) == []
