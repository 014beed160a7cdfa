"""Adjudication of error spans: a span aspect's answer is disputed when two raters' spans agree with a span-level F1
below the campaign's threshold; the adjudicator sees every rater's spans highlighted on the answer and records a
final span set, stored as the adjudication's token and AdjudicatedSpan rows (valued at its MQM score) and exported as
the consensus. Refused input writes nothing; the pages are secured like the other adjudication pages."""

import json
import uuid

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from annotations.adjudication.rules import lowest_pair_span_f1, pair_span_f1
from annotations.adjudication.services import adjudication_rule_set
from annotations.campaigns.answers import TaskAnswer
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.submissions import submission_create
from annotations.campaigns.tasks import task_candidates
from annotations.datasets.exporting import CONSENSUS_KEY, iter_export_objects
from annotations.datasets.flat_export import iter_flat_rows
from annotations.models import AdjudicatedSpan, Adjudication, AdjudicationRule, Dispute, Response
from annotations.roles import adjudicator_grant
from annotations.spans.error_spans import Span
from tests.annotations.adjudication.test_adjudication_views import client_for, first_dispute, post
from tests.spans.world import span_campaign

# --- the rule, pure: hand-worked examples of the span-level F1 (overlap matching, with categories) -------------------


def test_pair_span_f1_hand_worked() -> None:
    x, y = Span(0, 3, "X", "minor"), Span(5, 8, "Y", "major")
    assert pair_span_f1([x, y], [x, y]) == 1.0
    # precision 1/2 (only x is matched), recall 1/1: F1 = 2 * 0.5 * 1 / 1.5 = 2/3
    assert pair_span_f1([x, y], [Span(1, 2, "X", "major")]) == pytest.approx(2 / 3)
    assert pair_span_f1([x], [Span(0, 3, "Y", "minor")]) == 0.0  # same place, another category
    assert pair_span_f1([x], [Span(3, 5, "X", "minor")]) == 0.0  # touching is not overlapping
    assert pair_span_f1([], []) == 1.0  # both found no error: they agree
    assert pair_span_f1([x], []) == 0.0
    assert pair_span_f1([Span(None, None, "X", "minor")], []) == 1.0  # unplaced errors are left out
    assert lowest_pair_span_f1([[x], [x], []]) == 0.0
    assert lowest_pair_span_f1([[x]]) is None


# --- through the campaign -------------------------------------------------------------------------------------------

pytestmark_db = pytest.mark.django_db(transaction=True)


def _submit_all(campaign, user, marks: bool) -> None:  # type: ignore[no-untyped-def]
    """Every task: with `marks`, the answer's first character as a major grammar error; otherwise "no error"."""
    while (assignment := assignment_claim(campaign=campaign, user=user)) is not None:
        (candidate,) = task_candidates(assignment=assignment, user_id=user.pk)
        spans = [{"start": 0, "end": 1, "category": "Fluency/Grammar", "severity": "major"}] if marks else []
        value = json.dumps({"offsets": "codepoints", "no_error": not marks, "spans": spans})
        submission_create(
            campaign=campaign, task_id=assignment.task_id, user=user, idempotency_key=uuid.uuid4().hex,
            answer=TaskAnswer(ratings={(candidate.number, 1): value, (candidate.number, 2): 4.0}),
        )  # fmt: skip


@pytest.fixture
def disputed(researcher, annotators, adjudicator):  # type: ignore[no-untyped-def]
    campaign = span_campaign(annotators[:2], owner=researcher, raters_per_item=2)
    adjudication_rule_set(
        campaign=campaign, max_spread=None, preference_splits=False, min_span_f1=0.5, adjudicators=[adjudicator]
    )
    _submit_all(campaign, annotators[0], marks=True)
    _submit_all(campaign, annotators[1], marks=False)
    return campaign


@pytestmark_db
def test_spans_that_disagree_are_disputed_with_their_f1(disputed) -> None:  # type: ignore[no-untyped-def]
    disputes = list(Dispute.objects.filter(campaign=disputed))
    assert len(disputes) == 3
    for dispute in disputes:
        (entry,) = dispute.spreads
        assert entry["span_f1"] == 0.0 and entry["spread"] == 5.0  # MQM scores 5 and 0


@pytestmark_db
def test_spans_that_agree_are_not_disputed(researcher, annotators, adjudicator) -> None:  # type: ignore[no-untyped-def]
    campaign = span_campaign(annotators[:2], owner=researcher, raters_per_item=2)
    adjudication_rule_set(
        campaign=campaign, max_spread=None, preference_splits=False, min_span_f1=0.5, adjudicators=[adjudicator]
    )
    _submit_all(campaign, annotators[0], marks=True)
    _submit_all(campaign, annotators[1], marks=True)
    assert not Dispute.objects.filter(campaign=campaign).exists()


@pytestmark_db
def test_the_adjudicator_sees_every_raters_spans_and_settles_a_final_set(disputed, adjudicator, researcher) -> None:  # type: ignore[no-untyped-def]
    dispute = first_dispute()
    (entry,) = dispute.spreads
    response = Response.objects.get(pk=entry["response_id"])
    field = f"v-{entry['response_id']}-{entry['aspect_id']}"
    client = client_for(adjudicator)
    page = client.get(reverse("adjudication-dispute", args=[dispute.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count('class="rater-spans"') == 2 and '<mark class="span-mark span-major"' in html
    assert "No error marked." in html and "The lowest span F1 between two raters is 0." in html
    assert f'data-span-target="{field}"' in html and f'name="{field}"' in html and "data-span-cell" in html

    url = reverse("adjudication-resolve", args=[dispute.pk])
    # refused: nothing, a span past the end of the answer, an unknown category; nothing is stored
    past = json.dumps({"spans": [{"start": 0, "end": 999, "category": "Fluency/Grammar", "severity": "minor"}]})
    unknown = json.dumps({"spans": [{"start": 0, "end": 2, "category": "Style", "severity": "minor"}]})
    for value in ("", past, unknown, "not json"):
        refused = post(client, url, {field: value, "reason": "checked"})
        assert refused.status_code == 422, value
    assert not Adjudication.objects.exists() and not AdjudicatedSpan.objects.exists()
    assert Dispute.objects.get(pk=dispute.pk).resolved_at is None

    final = {
        "offsets": "codepoints",
        "spans": [
            {"start": 0, "end": 3, "category": "Fluency/Grammar", "severity": "minor", "note": "the first word"},
            {"start": 4, "end": 7, "category": "Accuracy/Mistranslation", "severity": "major"},
        ],
    }
    done = post(client, url, {field: json.dumps(final), "reason": "Both errors are real."})
    assert done.status_code == 303
    adjudication = Adjudication.objects.get()
    assert adjudication.value == 6.0  # minor 1 + major 5
    assert adjudication.raw == {
        "no_error": False,
        "spans": [
            {"start": 0, "end": 3, "category": "Fluency/Grammar", "severity": "minor", "note": "the first word"},
            {"start": 4, "end": 7, "category": "Accuracy/Mistranslation", "severity": "major"},
        ],
    }
    rows = list(
        AdjudicatedSpan.objects.filter(adjudication=adjudication).values_list("position", "start", "end", "note")
    )
    assert rows == [(0, 0, 3, "the first word"), (1, 4, 7, "")]
    settled = client.get(reverse("adjudication-dispute", args=[dispute.pk])).content.decode()
    assert f"«{response.text[0:3]}»" in settled and "data-span-cell" not in settled
    # settled once only
    assert post(client, url, {field: json.dumps(final), "reason": "again"}).status_code == 422
    assert Adjudication.objects.count() == 1

    # exported as the consensus where the scale consensus is: the token in JSONL, the score in the flat layout
    dataset = disputed.dataset
    answers = [
        answer
        for item in iter_export_objects(dataset=dataset)
        for turn in item["turns"]
        for answer in turn["responses"].values()
        if answer.get(CONSENSUS_KEY)
    ]
    assert [answer[CONSENSUS_KEY] for answer in answers] == [{"mqm": adjudication.raw}]
    flat = [row for row in iter_flat_rows(dataset=dataset) if row["kind"] == "rating" and row["aspect"] == "mqm"]
    assert sorted(row[CONSENSUS_KEY] for row in flat if row[CONSENSUS_KEY] is not None) == [6.0, 6.0]


@pytestmark_db
def test_span_adjudication_pages_are_secured(disputed, adjudicator, annotators, researcher) -> None:  # type: ignore[no-untyped-def]
    dispute = first_dispute()
    page, url = reverse("adjudication-dispute", args=[dispute.pk]), reverse("adjudication-resolve", args=[dispute.pk])
    assert client_for(adjudicator).get(url).status_code == 405
    assert post(client_for(adjudicator), page, {}).status_code == 405
    assert client_for(annotators[2]).get(page).status_code == 403
    assert post(client_for(annotators[2]), url, {"reason": "x"}).status_code == 403
    # a rater of the task never settles it
    adjudicator_grant(user=annotators[0])
    AdjudicationRule.objects.get(campaign=disputed).adjudicators.add(annotators[0])
    assert client_for(annotators[0]).get(page).status_code == 404
    anonymous = client_for(None).get(page)
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]
    assert not Adjudication.objects.exists()


@pytestmark_db
def test_the_rule_page_sets_the_span_threshold(disputed, researcher) -> None:  # type: ignore[no-untyped-def]
    client = client_for(researcher)
    url = reverse("adjudication-rule", args=[disputed.pk])
    assert "span F1 below" in client.get(url).content.decode()
    assert post(client, url, {"min_span_f1": "1.5"}).status_code == 422
    assert AdjudicationRule.objects.get(campaign=disputed).min_span_f1 == 0.5
    assert post(client, url, {"min_span_f1": "0.8"}).status_code == 303
    assert AdjudicationRule.objects.get(campaign=disputed).min_span_f1 == 0.8
    japanese = client.get(url, HTTP_ACCEPT_LANGUAGE="ja").content.decode()
    assert "スパン F1" in japanese


@pytestmark_db
def test_the_database_refuses_broken_span_adjudications(disputed) -> None:  # type: ignore[no-untyped-def]
    rule = AdjudicationRule.objects.get(campaign=disputed)
    rule.min_span_f1 = 1.5
    with pytest.raises(IntegrityError), transaction.atomic():
        rule.save()
    dispute = first_dispute()
    (entry,) = dispute.spreads
    adjudication = Adjudication.objects.create(
        dispute=dispute, task=dispute.task, response_id=entry["response_id"], aspect_id=entry["aspect_id"],
        value=1, raw={"spans": []}, scale_min=0, scale_max=25,
    )  # fmt: skip
    for broken in (
        {"start": 3, "end": 3, "category": "Fluency/Grammar", "severity": "minor"},
        {"start": 0, "end": 3, "category": "", "severity": "minor"},
        {"start": 0, "end": 3, "category": "Fluency/Grammar", "severity": "awful"},
    ):
        with pytest.raises(IntegrityError), transaction.atomic():
            AdjudicatedSpan.objects.create(adjudication=adjudication, position=0, **broken)
    AdjudicatedSpan.objects.create(
        adjudication=adjudication, position=0, start=0, end=3, category="F", severity="minor"
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        AdjudicatedSpan.objects.create(
            adjudication=adjudication, position=0, start=1, end=3, category="F", severity="minor"
        )
