"""export_dataset: flat JSONL and CSV (formula-safe), --include-judges, and app ratings appended as extra raters."""

import contextlib
import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from annotations.datasets.exporting import csv_safe
from annotations.models import Aspect, Dataset, Rating, RatingOrigin, Response
from annotations.services import rater_for_user, rating_create
from judging.models import JudgeKind, JudgeScore
from tests.factories import JudgeFactory
from tests.io.helpers import assert_json_equal, export_objects, run_import_cli, write_lines

HOSTILE_ID = '=HYPERLINK("http://evil.example","x")'
LINES: list[dict[str, Any]] = [
    {
        "id": HOSTILE_ID,
        "turns": [
            {
                "prompt": "p",
                "responses": {
                    "+sys": {
                        "response": "a",
                        "raters": ["@w1", "-w2"],
                        "human_evals": {"formality": [-1, "NA"], "factuality": [3, 0]},
                    },
                    "plain": {"response": "b", "human_evals": {"formality": [0, 1, None]}},
                },
            }
        ],
    },
    {"id": 7, "turns": [{"prompt": "q", "responses": {"plain": {"response": "c"}}}]},
]
# The flat export's columns in their order, which scripts that read the CSV by position rely on.
FLAT_HEADER = (
    "item_id,turn,system,aspect,rater,origin,raw,value,is_missing,rationale,comment,seconds_spent,created_at,kind,"
    "campaign,preferred,none_appropriate,candidates,rater_excluded,consensus,filled_by,judge_version,human_probability"
)


@pytest.fixture
def lfqa(db: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Dataset:
    path = write_lines(tmp_path / "flat.jsonl", LINES)
    code, _, err = run_import_cli(path, "flat", "--preset", "lfqa-multiaspect", capsys=capsys)
    assert code == 0, err
    return Dataset.objects.get(name="flat")


def _export_text(*args: str, tmp_path: Path, filename: str) -> str:
    target = tmp_path / filename
    call_command("export_dataset", "flat", "--out", str(target), *args)
    return target.read_text(encoding="utf-8")


@pytest.mark.django_db
def test_flat_jsonl_has_one_row_per_rating_in_file_order(lfqa: Dataset, tmp_path: Path) -> None:
    rows = [json.loads(x) for x in _export_text("--flat", tmp_path=tmp_path, filename="f.jsonl").splitlines()]
    assert len(rows) == Rating.objects.filter(aspect__dataset=lfqa).count() == 7
    first = rows[0]
    assert list(first) == FLAT_HEADER.split(",")
    assert {r["kind"] for r in rows} == {"rating"}
    assert (first["item_id"], first["turn"], first["system"], first["rater"]) == (HOSTILE_ID, 1, "+sys", "@w1")
    assert [(r["aspect"], r["raw"], r["value"], r["is_missing"]) for r in rows[:4]] == [
        ("factuality", 3, 3.0, False),
        ("factuality", 0, 0.0, False),  # 0 is a real score on a 0-3 scale, not a missing code
        ("formality", -1, -1.0, False),
        ("formality", "NA", None, True),
    ]
    assert [r["rater"] for r in rows[4:]] == ["#1", "#2", "#3"]
    assert rows[6]["raw"] is None and rows[6]["is_missing"] is True


@pytest.mark.django_db
def test_flat_csv_neutralises_formulas_but_keeps_numbers(lfqa: Dataset, tmp_path: Path) -> None:
    text = _export_text("--flat", tmp_path=tmp_path, filename="f.csv")
    assert text.splitlines()[0] == FLAT_HEADER
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 7
    first = rows[0]
    assert first["item_id"] == "'" + HOSTILE_ID
    assert first["system"] == "'+sys"
    assert first["rater"] == "'@w1"
    assert rows[1]["rater"] == "'-w2"
    formality = next(r for r in rows if r["aspect"] == "formality" and r["rater"] == "'@w1")
    assert formality["raw"] == "-1" and formality["value"] == "-1.0"
    for row in rows:
        for cell in row.values():
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
            assert not (cell.startswith("-") and not _is_number(cell)), cell


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("-x", "'-x"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("safe", "safe"),
        (-1, -1),
        (2.5, 2.5),
        (None, None),
    ],
)
def test_csv_safe(value: Any, expected: Any) -> None:
    assert csv_safe(value) == expected


@pytest.mark.django_db
def test_flat_format_flag_overrides_extension(lfqa: Dataset, tmp_path: Path) -> None:
    text = _export_text("--flat", "--format", "csv", tmp_path=tmp_path, filename="f.txt")
    assert text.splitlines()[0].startswith("item_id,turn,system,aspect,rater")
    with pytest.raises(CommandError, match="needs --flat"):
        call_command("export_dataset", "flat", "--format", "csv", "--out", str(tmp_path / "x"))


@pytest.mark.django_db
def test_unknown_dataset_is_a_clean_error() -> None:
    with pytest.raises(CommandError, match="no dataset named 'nope'"):
        call_command("export_dataset", "nope")


@pytest.mark.django_db
def test_include_judges_adds_run_scores_only_on_request(lfqa: Dataset) -> None:
    answer = Response.objects.get(turn__item__external_id=HOSTILE_ID, system__key="plain")
    run = JudgeFactory(dataset=lfqa, name="gpt judge run #1", kind=JudgeKind.RUN)
    JudgeScore.objects.create(judge=run, response=answer, aspect_name="factuality", value=2.5)
    JudgeScore.objects.create(judge=run, response=answer, aspect_name="formality", value=0.0)
    assert_json_equal(export_objects("flat"), LINES)
    with_judges = export_objects("flat", "--include-judges")
    got = with_judges[0]["turns"][0]["responses"]["plain"]
    assert got["auto_evals"] == {"gpt judge run #1": {"factuality": 2.5, "formality": 0.0}}
    untouched = with_judges[0]["turns"][0]["responses"]["+sys"]
    assert "auto_evals" not in untouched
    assert with_judges[1] == LINES[1]


@pytest.mark.django_db
def test_include_judges_keeps_imported_auto_evals_beside_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = {
        "id": "j",
        "turns": [{"prompt": "p", "responses": {"s": {"response": "r", "auto_evals": {"unieval": {"fluency": 0.8}}}}}],
    }
    code, _, err = run_import_cli(write_lines(tmp_path / "j.jsonl", [line]), "judged", capsys=capsys)
    assert code == 0, err
    dataset = Dataset.objects.get(name="judged")
    run = JudgeFactory(dataset=dataset, name="run-1", kind=JudgeKind.RUN)
    JudgeScore.objects.create(
        judge=run, response=Response.objects.get(turn__item=dataset.items.get()), aspect_name="fluency", value=4
    )
    exported = export_objects("judged", "--include-judges")[0]["turns"][0]["responses"]["s"]["auto_evals"]
    assert exported == {"unieval": {"fluency": 0.8}, "run-1": {"fluency": 4.0}}
    assert JudgeScore.objects.filter(judge__kind=JudgeKind.IMPORTED).count() == 1


@pytest.mark.django_db
def test_app_ratings_are_appended_as_pseudonymous_raters(lfqa: Dataset, annotator1: Any, annotator2: Any) -> None:
    named = Response.objects.get(turn__item__external_id=HOSTILE_ID, system__key="+sys")
    positional = Response.objects.get(turn__item__external_id=HOSTILE_ID, system__key="plain")
    unrated = Response.objects.get(turn__item__external_id="7")
    formality = Aspect.objects.get(dataset=lfqa, name="formality")
    acceptability = Aspect.objects.get(dataset=lfqa, name="acceptability")
    first = rater_for_user(dataset=lfqa, user=annotator1)
    second = rater_for_user(dataset=lfqa, user=annotator2)
    rating_create(response=named, aspect=formality, rater=first, raw=0, rationale="fine", seconds_spent=12.5)
    rating_create(response=named, aspect=acceptability, rater=first, raw=2)
    rating_create(response=named, aspect=formality, rater=second, raw="NA")
    rating_create(response=positional, aspect=formality, rater=second, raw=1)
    rating_create(response=unrated, aspect=acceptability, rater=first, raw=3)

    exported = export_objects("flat")
    got = exported[0]["turns"][0]["responses"]["+sys"]
    assert got["raters"] == ["@w1", "-w2", first.pseudonym, second.pseudonym]
    assert got["human_evals"] == {
        "formality": [-1, "NA", 0, "NA"],
        "factuality": [3, 0, None, None],
        "acceptability": [None, None, 2, None],
    }
    plain = exported[0]["turns"][0]["responses"]["plain"]
    assert plain["raters"] == ["#1", "#2", "#3", second.pseudonym]
    assert plain["human_evals"] == {"formality": [0, 1, None, 1]}
    late = exported[1]["turns"][0]["responses"]["plain"]
    assert late["raters"] == [first.pseudonym] and late["human_evals"] == {"acceptability": [3]}
    # The pseudonym never reveals the account.
    assert annotator1.username not in json.dumps(exported)

    flat = [r for r in (json.loads(x) for x in _flat_lines()) if r["origin"] == RatingOrigin.APP]
    assert len(flat) == 5
    with_rationale = next(r for r in flat if r["rationale"])
    assert (with_rationale["rationale"], with_rationale["seconds_spent"]) == ("fine", 12.5)
    assert with_rationale["created_at"]


def _flat_lines() -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        call_command("export_dataset", "flat", "--flat")
    return out.getvalue().splitlines()
