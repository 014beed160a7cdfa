"""Gold on span aspects: a gold item expects error spans, and a rater's answer passes when each expected span is
matched by an overlapping span of theirs in the same category (or one under it) and, when named, the same severity.
Set from the item page, the admin's service and the JSONL gold field; the verdicts and their reasons appear on the
item page."""

import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotations.datasets.exporting import iter_export_lines
from annotations.datasets.importing import dataset_import
from annotations.errors import DatasetImportError
from annotations.gold.rules import GoldSpan, gold_problem, span_gold_verdict
from annotations.gold.selectors import span_gold_answers
from annotations.gold.services import GoldError, gold_item_set
from annotations.models import GoldItem, Item
from annotations.rubrics.specs import parse_rubric
from annotations.spans.error_spans import Span
from annotations.spans.schemes import SpanScheme
from tests.conftest import login
from tests.spans.world import ANSWERS, SPAN_RUBRIC

TEXT = ANSWERS[0]  # "The cat 😀 eat the fish quickly." — "eat" is 10..13 in code points
EAT = GoldSpan(10, 13, "Fluency/Grammar", "major")


def given(*spans: tuple[int | None, int | None, str, str]) -> list[Span]:
    return [Span(*span) for span in spans]


# --- the rule, pure -----------------------------------------------------------------------------------------------


def test_one_overlapping_character_in_the_same_category_passes() -> None:
    verdict = span_gold_verdict([EAT], given((12, 20, "Fluency/Grammar", "major")))
    assert verdict.passed and verdict.matched == 1 and verdict.extra == 0


def test_touching_without_overlap_fails() -> None:
    verdict = span_gold_verdict([EAT], given((13, 17, "Fluency/Grammar", "major")))
    assert not verdict.passed and verdict.missing == (EAT,) and verdict.extra == 1


def test_category_must_be_the_expected_one_or_under_it() -> None:
    assert not span_gold_verdict([EAT], given((10, 13, "Fluency/Spelling", "major"))).passed
    top = GoldSpan(10, 13, "Fluency")
    assert span_gold_verdict([top], given((10, 13, "Fluency/Spelling", "minor"))).passed
    # "Fluency/Grammar" does not hold "Fluency/GrammarX": levels are split at "/".
    assert not span_gold_verdict([top], given((10, 13, "FluencyX/Grammar", "minor"))).passed


def test_a_named_severity_must_match_and_an_absent_one_accepts_any() -> None:
    assert not span_gold_verdict([EAT], given((10, 13, "Fluency/Grammar", "minor"))).passed
    assert span_gold_verdict([GoldSpan(10, 13, "Fluency/Grammar")], given((10, 13, "Fluency/Grammar", "minor"))).passed


def test_extra_spans_are_counted_but_do_not_fail() -> None:
    verdict = span_gold_verdict(
        [EAT], given((10, 13, "Fluency/Grammar", "major"), (0, 3, "Accuracy/Mistranslation", "minor"))
    )
    assert verdict.passed and verdict.extra == 1


def test_every_expected_span_must_be_found_and_one_span_may_cover_two() -> None:
    cat = GoldSpan(4, 7, "Fluency")
    assert not span_gold_verdict([EAT, cat], given((10, 13, "Fluency/Grammar", "major"))).passed
    both = [GoldSpan(4, 7, "Fluency"), GoldSpan(10, 13, "Fluency")]
    assert span_gold_verdict(both, given((4, 13, "Fluency/Grammar", "major"))).passed


def test_no_error_expected_passes_only_an_answer_without_errors() -> None:
    assert span_gold_verdict([], given()).passed
    failed = span_gold_verdict([], given((None, None, "Accuracy/Mistranslation", "minor")))
    assert not failed.passed and failed.extra == 1


def test_an_unplaced_span_or_no_answer_matches_nothing() -> None:
    assert not span_gold_verdict([EAT], given((None, None, "Fluency/Grammar", "major"))).passed
    missing = span_gold_verdict([EAT], None)
    assert not missing.passed and not missing.answered


SCHEME = SpanScheme.from_json(SPAN_RUBRIC["aspects"][0]["spans"])


def problem(value: Any, texts: dict[str, str] | None = None) -> Any:
    gold = {"kind": "gold", "expected": {"sys_a": {"mqm": value}}}
    return gold_problem(
        gold,
        systems={"sys_a"},
        aspects={"mqm": (0, 25), "overall": (1, 5)},
        schemes={"mqm": SCHEME},
        texts={"sys_a": TEXT} if texts is None else texts,
    )


AT = "gold.expected.sys_a.mqm"


@pytest.mark.parametrize(
    ("value", "field", "expected"),
    [
        ({"spans": [{"start": 10, "end": 10, "category": "Fluency"}]}, f"{AT}.spans[0]", "0 <= start < end <= 31"),
        ({"spans": [{"start": 10, "end": 99, "category": "Fluency"}]}, f"{AT}.spans[0]", "0 <= start < end"),
        ({"spans": [{"start": 1, "end": 2, "category": "Style"}]}, f"{AT}.spans[0].category", "a category of the"),
        (
            {"spans": [{"start": 1, "end": 2, "category": "Fluency", "severity": "critical"}]},
            f"{AT}.spans[0].severity",
            "minor, major",
        ),
        ({"spans": [{"start": 1, "end": 2}]}, f"{AT}.spans[0]", "start, end, category"),
        ({"spans": [], "no_error": True}, AT, 'only "spans"'),
        (30, AT, "a number from 0 to 25"),
    ],
)
def test_bad_span_expectations_are_named(value: Any, field: str, expected: str) -> None:
    found = problem(value)
    assert found is not None and found.field == field and expected in found.expected


def test_good_span_expectations_and_scores_are_accepted() -> None:
    assert problem({"spans": [{"start": 10, "end": 13, "category": "Fluency/Grammar", "severity": "major"}]}) is None
    assert problem({"spans": [{"start": 10, "end": 13, "category": "Fluency"}]}) is None
    assert problem({"spans": []}) is None
    assert problem(7) is None  # an expected MQM score, within the tolerance, as for any scale
    multi_turn = problem({"spans": []}, texts={})
    assert multi_turn is not None and "one turn" in multi_turn.expected


# --- storage, import and the item page ----------------------------------------------------------------------------

GOLD_SPANS = {"spans": [{"start": 10, "end": 13, "category": "Fluency/Grammar", "severity": "major"}]}
RATED = {
    "w1": {"no_error": False, "spans": [{"start": 8, "end": 13, "category": "Fluency/Grammar", "severity": "major"}]},
    "w2": {"no_error": False, "spans": [{"start": 10, "end": 13, "category": "Fluency/Spelling", "severity": "major"}]},
    "w3": {"no_error": True, "spans": []},
}


def span_line(gold: Any = None, rated: bool = True) -> bytes:
    answer: dict[str, Any] = {"response": TEXT}
    if rated:
        answer |= {"raters": list(RATED), "human_evals": {"mqm": list(RATED.values())}}
    line: dict[str, Any] = {"id": "q0", "turns": [{"prompt": "Translate.", "responses": {"sys_a": answer}}]}
    if gold is not None:
        line["gold"] = gold
    return json.dumps(line, ensure_ascii=False).encode()


def import_span(body: bytes, name: str = "span gold", owner: User | None = None) -> Any:
    rubric = parse_rubric(SPAN_RUBRIC, source="file")
    return dataset_import(stream=io.BytesIO(body), name=name, rubric=rubric, owner=owner).dataset


@pytest.mark.django_db
def test_the_jsonl_gold_field_carries_expected_spans_and_round_trips() -> None:
    gold = {"kind": "gold", "expected": {"sys_a": {"mqm": GOLD_SPANS}}, "tolerance": 0}
    dataset = import_span(span_line(gold))
    assert GoldItem.objects.get(item__dataset=dataset).expected == {"sys_a": {"mqm": GOLD_SPANS}}
    exported = json.loads(next(iter(iter_export_lines(dataset=dataset))))
    assert exported["gold"] == gold
    bad = {"kind": "gold", "expected": {"sys_a": {"mqm": {"spans": [{"start": 0, "end": 99, "category": "Fluency"}]}}}}
    with pytest.raises(DatasetImportError, match="invalid gold field"):
        import_span(span_line(bad), name="bad")
    assert not GoldItem.objects.filter(item__dataset__name="bad").exists()


@pytest.mark.django_db
def test_the_service_refuses_bad_spans_and_writes_nothing(researcher: User) -> None:
    dataset = import_span(span_line(rated=False), owner=researcher)
    item = Item.objects.get(dataset=dataset)
    with pytest.raises(GoldError) as refused:
        gold_item_set(
            item=item,
            kind="gold",
            expected={"sys_a": {"mqm": {"spans": [{"start": 3, "end": 1, "category": "Fluency"}]}}},
            by=researcher,
        )
    assert refused.value.field == "gold.expected.sys_a.mqm.spans[0]"
    assert not GoldItem.objects.exists()
    gold_item_set(item=item, kind="gold", expected={"sys_a": {"mqm": GOLD_SPANS}}, by=researcher)
    assert GoldItem.objects.get(item=item).expected == {"sys_a": {"mqm": GOLD_SPANS}}


@pytest.mark.django_db
def test_verdicts_with_their_reasons() -> None:
    gold = {"kind": "gold", "expected": {"sys_a": {"mqm": GOLD_SPANS}}}
    dataset = import_span(span_line(gold))
    answers = span_gold_answers(Item.objects.get(dataset=dataset))
    assert [(a.rater, a.verdict.passed) for a in answers] == [("w1", True), ("w2", False), ("w3", False)]
    assert answers[0].reason == "The 1 expected error was found."
    assert answers[1].reason == (
        "0 of 1 expected errors found; missing: «eat» (Fluency/Grammar, major). "
        "1 more error marked that the gold does not list."
    )
    assert answers[2].reason.startswith("0 of 1 expected errors found")


@pytest.mark.django_db
def test_the_item_page_marks_span_gold_and_shows_the_verdicts(researcher: User, annotator1: User) -> None:
    dataset = import_span(span_line(), owner=researcher)
    item = Item.objects.get(dataset=dataset)
    page_url = reverse("research-item", args=[dataset.pk, item.pk])
    url = reverse("research-item-gold", args=[dataset.pk, item.pk])
    client = login(researcher)
    page = client.get(page_url).content.decode()
    assert 'textarea id="gold-1-1" name="gold-1-1"' in page
    # a line that cannot be read, and spans beside "no error", are named; nothing is stored
    bad = client.post(url, {"gold-1-1": "ten-13 Fluency", "kind": "gold", "tolerance": "0"})
    assert bad.status_code == 400 and "line 1" in bad.content.decode()
    both = client.post(url, {"gold-1-1": "10-13 Fluency", "gold-1-1-none": "on", "kind": "gold", "tolerance": "0"})
    assert both.status_code == 400 and "not both" in both.content.decode()
    off = client.post(url, {"gold-1-1": "10-99 Fluency", "kind": "gold", "tolerance": "0"})
    assert off.status_code == 400 and "0 &lt;= start &lt; end &lt;= 31" in off.content.decode()
    assert not GoldItem.objects.exists()
    done = client.post(url, {"gold-1-1": "10-13 Fluency/Grammar major  # eat", "kind": "gold", "tolerance": "0"})
    assert done.status_code == 302
    assert GoldItem.objects.get(item=item).expected == {"sys_a": {"mqm": GOLD_SPANS}}
    again = client.get(page_url).content.decode()
    assert "10-13 Fluency/Grammar major  # eat" in again
    assert "Gold answers on error spans" in again and "missing: «eat» (Fluency/Grammar, major)" in again
    japanese = client.get(page_url, HTTP_ACCEPT_LANGUAGE="ja").content.decode()
    assert "誤り箇所のゴールド回答" in japanese
    # no error expected
    assert client.post(url, {"gold-1-1-none": "on", "kind": "gold", "tolerance": "0"}).status_code == 302
    assert GoldItem.objects.get(item=item).expected == {"sys_a": {"mqm": {"spans": []}}}
    assert [a.verdict.passed for a in span_gold_answers(item)] == [False, False, True]
    # wrong method, no access
    assert client.get(url).status_code == 405
    assert login(annotator1).post(url, {"gold-1-1-none": "on", "kind": "gold"}).status_code == 403
    assert Client().post(url, {"gold-1-1-none": "on", "kind": "gold"}).status_code == 302


# --- the campaign's quality panel counts span gold like numeric gold ---------------------------------------------


def _gold_campaign(researcher: User, annotators: list[User], expected: dict[str, Any]) -> Any:
    """A span campaign whose first item (the English answer) is a gold item expecting `expected` on sys_a; marking
    it gold makes its task a personal one, handed to every annotator by the claim."""
    from tests.spans.world import span_campaign

    campaign = span_campaign(annotators, owner=researcher, raters_per_item=len(annotators), gold_rate=0.5)
    item = Item.objects.get(dataset=campaign.dataset, position=0)
    gold_item_set(item=item, kind="gold", expected={"sys_a": {"mqm": expected}}, by=researcher)
    return campaign, item


def _answer_everything(campaign: Any, item: Item, user: User, gold_marks: list[dict[str, Any]]) -> None:
    """`user` answers every task handed to them: `gold_marks` on the gold item, "no error" elsewhere."""
    import uuid

    from annotations.campaigns.answers import TaskAnswer
    from annotations.campaigns.claims import assignment_claim
    from annotations.campaigns.submissions import submission_create
    from annotations.campaigns.tasks import task_candidates

    answered_gold = False
    while (assignment := assignment_claim(campaign=campaign, user=user)) is not None:
        (candidate,) = task_candidates(assignment=assignment, user_id=user.pk)
        on_gold = assignment.task.turn.item_id == item.pk
        answered_gold |= on_gold
        spans = gold_marks if on_gold else []
        token = json.dumps({"offsets": "codepoints", "no_error": not spans, "spans": spans})
        submission_create(
            campaign=campaign, task_id=assignment.task_id, user=user, idempotency_key=uuid.uuid4().hex,
            answer=TaskAnswer(ratings={(candidate.number, 1): token, (candidate.number, 2): 3.0}),
        )  # fmt: skip
    assert answered_gold, "the gold task was never handed out"


@pytest.mark.django_db
def test_the_quality_panel_scores_span_gold_by_the_span_rule(researcher: User, annotators: list[User]) -> None:
    from annotations.quality.selectors import rater_quality

    campaign, item = _gold_campaign(researcher, annotators, GOLD_SPANS)
    found, wrong_category, nothing = annotators
    grammar = {"start": 8, "end": 13, "category": "Fluency/Grammar", "severity": "major"}
    _answer_everything(campaign, item, found, [grammar])
    _answer_everything(campaign, item, wrong_category, [{**grammar, "category": "Fluency/Spelling"}])
    _answer_everything(campaign, item, nothing, [])
    rows = {row.user_id: row for row in rater_quality(campaign)}
    assert (rows[found.pk].gold_passed, rows[found.pk].gold_answered) == (1, 1)
    assert (rows[wrong_category.pk].gold_passed, rows[wrong_category.pk].gold_answered) == (0, 1)
    assert (rows[nothing.pk].gold_passed, rows[nothing.pk].gold_answered) == (0, 1)
    # The panel's verdict is the item page's, rater by rater.
    page = {answer.rater: answer.verdict.passed for answer in span_gold_answers(item)}
    from annotations.models import Rater

    pseudonym = dict(Rater.objects.filter(dataset=campaign.dataset).values_list("user_id", "pseudonym"))
    assert page == {pseudonym[user.pk]: rows[user.pk].gold_passed == 1 for user in annotators}


@pytest.mark.django_db
def test_span_gold_expecting_no_error_passes_only_a_clean_answer(researcher: User, annotators: list[User]) -> None:
    from annotations.quality.selectors import rater_quality

    campaign, item = _gold_campaign(researcher, annotators[:2], {"spans": []})
    _answer_everything(campaign, item, annotators[0], [])
    marked = [{"start": 0, "end": 3, "category": "Fluency/Grammar", "severity": "minor"}]
    _answer_everything(campaign, item, annotators[1], marked)
    rows = {row.user_id: row for row in rater_quality(campaign)}
    assert (rows[annotators[0].pk].gold_passed, rows[annotators[0].pk].gold_answered) == (1, 1)
    assert (rows[annotators[1].pk].gold_passed, rows[annotators[1].pk].gold_answered) == (0, 1)
