"""The whole study's seams of the MQM span aspect: the ratings, the exports, the exclusion and the span judge."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from annotations.models import (
    ErrorSpan,
    Rating,
)
from judging.analysis.judge_reports import judge_details
from judging.analysis.selectors import rating_scope
from judging.models import (
    JudgeScore,
    Judgment,
)
from tests.io.whole_study.building import Study, command
from tests.io.whole_study.design import (
    EXCLUDED,
    GOLD_ITEM,
    NAME,
    SPAN_JUDGE,
    SPANS,
    SYSTEMS,
    item_id,
    mqm_score,
    span_token,
)
from tests.io.whole_study.outputs import (
    ANSWERS,
    COLLECTED,
    POSTGRES,
    answers_of,
    app_rating_rows,
    cli_json,
    export_file,
    read_jsonl,
)

pytestmark = pytest.mark.django_db


# ---------------------------------------------------------------- the span aspect


def span_ratings(study: Study) -> Any:
    """The annotators' span ratings of the regular answers (the gold item's measure the annotators)."""
    return (
        Rating.objects.filter(aspect__dataset=study.dataset, aspect__name=SPANS)
        .exclude(response__turn__item__external_id=item_id(GOLD_ITEM))
        .select_related("rater", "response__turn__item", "response__system")
    )


def span_tokens(lines: list[dict[str, Any]]) -> dict[tuple[str, str, str], Any]:
    """(item, system, rater) → the span token the JSONL export holds (the experts marked no spans)."""
    return {
        (item, system, rater): token
        for item, system, answer in answers_of(lines)
        for rater, token in zip(answer.get("raters", []), answer.get("human_evals", {}).get(SPANS, []), strict=True)
        if token is not None
    }


def spans_by_rater(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(row["rater"] for row in rows if row["kind"] == "error_span" and row["aspect"] == SPANS)


def test_a_span_rating_is_the_mqm_score_of_its_spans_in_the_database_and_every_export(
    study: Study, exports: dict[str, Any]
) -> None:
    ratings = list(span_ratings(study))
    assert len(ratings) == COLLECTED
    stored = {}
    for rating in ratings:
        spans = list(rating.error_spans.order_by("position").values("start", "end", "category", "severity"))
        assert rating.value == mqm_score({"spans": spans}) == mqm_score(rating.raw), rating.raw
        username = rating.rater.user.username  # type: ignore[union-attr]
        assert rating.raw == span_token(username, rating.response.text)  # what the annotator marked, in code points
        assert spans == rating.raw["spans"]
        stored[(rating.response.turn.item.external_id, rating.response.system.key, rating.rater.pseudonym)] = rating
    assert span_tokens(exports["jsonl"]) == {key: rating.raw for key, rating in stored.items()}
    for name, rows in (("flat csv", exports["flat_csv"]), ("flat jsonl", exports["flat_jsonl"])):
        values = {
            (row["item_id"], row["system"], row["rater"]): float(row["value"]) for row in app_rating_rows(rows, SPANS)
        }
        assert values == {key: rating.value for key, rating in stored.items()}, name


def test_the_flat_exports_have_one_error_span_row_per_span(study: Study, exports: dict[str, Any]) -> None:
    in_database = Counter(
        ErrorSpan.objects.filter(rating__in=span_ratings(study)).values_list("rating__rater__pseudonym", flat=True)
    )
    assert in_database[study.excluded_pseudonym] == sum(
        len(span_token(EXCLUDED, text)["spans"])
        for text in (
            Rating.objects.filter(
                pk__in=span_ratings(study).filter(rater__pseudonym=study.excluded_pseudonym)
            ).values_list("response__text", flat=True)
        )
    )
    for name, rows in (("flat csv", exports["flat_csv"]), ("flat jsonl", exports["flat_jsonl"])):
        assert spans_by_rater(rows) == in_database, name
    # Each row holds one span of the rating's token, as the JSONL export has it.
    exported = Counter(
        json.dumps([row["item_id"], row["system"], row["rater"], row["raw"]])
        for row in exports["flat_jsonl"]
        if row["kind"] == "error_span" and row["aspect"] == SPANS
    )
    assert exported == Counter(
        json.dumps([*key, span]) for key, token in span_tokens(exports["jsonl"]).items() for span in token["spans"]
    )


def test_the_jsonl_export_round_trips_the_spans(study: Study, exports: dict[str, Any]) -> None:
    """export → import → export: every span token again, with its rater, and the same ErrorSpan rows."""
    rubric = export_file(NAME, study.work / "spans-rubric.json", "--rubric")
    copy = f"{NAME} spans copy"
    command("import_dataset", str(study.work / "exports" / "study.jsonl"), "--name", copy, "--rubric", str(rubric))
    again = read_jsonl(export_file(copy, study.work / "spans-copy.jsonl"))

    def marked(lines: list[dict[str, Any]]) -> dict[tuple[str, str], Any]:
        return {
            (item, system): (answer.get("raters"), answer.get("human_evals", {}).get(SPANS))
            for item, system, answer in answers_of(lines)
        }

    assert marked(again) == marked(exports["jsonl"])
    fields = ("rating__response__text", "position", "start", "end", "category", "severity", "note")
    # The copy's raters are the exported names: the original's pseudonyms.
    original = span_ratings(study).filter(origin="app")
    copied = Rating.objects.filter(aspect__dataset__name=copy, aspect__name=SPANS)
    assert sorted(ErrorSpan.objects.filter(rating__in=copied).values_list("rating__rater__external_id", *fields)) == (
        sorted(ErrorSpan.objects.filter(rating__in=original).values_list("rating__rater__pseudonym", *fields))
    )


def test_an_exclusion_marks_the_excluded_raters_spans_and_leaves_them_out_of_the_statistics(
    study: Study, exports: dict[str, Any]
) -> None:
    pseudonym = study.excluded_pseudonym
    for name, rows in (("flat csv", exports["flat_csv"]), ("flat jsonl", exports["flat_jsonl"])):
        span_rows = [row for row in rows if row["kind"] == "error_span"]
        marked = {row["rater"] for row in span_rows if str(row["rater_excluded"]).lower() == "true"}
        assert marked == {pseudonym}, name
        assert all(str(row["rater_excluded"]).lower() == "false" for row in span_rows if row["rater"] != pseudonym), (
            name
        )
    for item, system, answer in answers_of(exports["jsonl"]):
        if SPANS in answer.get("human_evals", {}):
            marks = [rater == pseudonym for rater in answer["raters"]]
            assert answer.get("rater_excluded") == marks, (item, system)
    report = cli_json("agreement", NAME)["aspects"][SPANS]
    included = cli_json("agreement", NAME, "--include-excluded")["aspects"][SPANS]
    assert (report["n_ratings"], included["n_ratings"]) == (COLLECTED - ANSWERS, COLLECTED)
    details = judge_details(study.dataset, SPAN_JUDGE, SPANS)["spans"]
    everyone = judge_details(study.dataset, SPAN_JUDGE, SPANS, scope=rating_scope(include_excluded=True))["spans"]
    assert pseudonym not in {row["rater"] for row in details["raters"]}
    assert pseudonym in {row["rater"] for row in everyone["raters"]}


def test_the_span_judge_reads_as_succeeded_only_with_every_judgment_and_score(
    study: Study, exports: dict[str, Any]
) -> None:
    run = study.span_run
    assert run.total == ANSWERS + len(SYSTEMS)  # the span aspect only, on every answer
    assert set(Judgment.objects.filter(run=run).values_list("aspect_name", flat=True)) == {SPANS}
    if POSTGRES:
        assert study.span_when_succeeded == (run.total, run.total)
    scores = dict(JudgeScore.objects.filter(judge=run.judge).values_list("response_id", "value"))
    assert len(scores) == run.total
    # The judge marks what the first annotator marks, so its MQM score is that annotator's rating.
    first = dict(span_ratings(study).filter(rater__user__username="annotator1").values_list("response_id", "value"))
    assert {pk: scores[pk] for pk in first} == first
    exported = {
        answer["response"]: answer["auto_evals"][SPAN_JUDGE][SPANS] for _i, _s, answer in answers_of(exports["judges"])
    }
    assert exported == dict(JudgeScore.objects.filter(judge=run.judge).values_list("response__text", "value"))
