"""import_dataset rejects bad input atomically: non-zero exit, the line, field, expected and found value are named, and
not one row of any table changes, also when the bad line comes last after many good ones."""

import json
from pathlib import Path
from typing import Any

import pytest
from django.db import IntegrityError

from annotations.datasets import import_writer
from annotations.models import Dataset
from bench.datagen import generate_llm_jp_jsonl
from tests.io.helpers import row_counts, run_import_cli, write_lines

PRESET = ("--preset", "llm-human-eval-jp")


def good(index: int) -> dict[str, Any]:
    return {
        "id": f"good###{index}",
        "turns": [
            {
                "prompt": f"質問 {index}",
                "responses": {
                    "llm_a": {"response": "答え", "human_evals": {"fluency": [5, 3, "NA"], "overall": [0, 4, 2]}},
                    "llm_b": {"response": "answer", "human_evals": {"fluency": [1, 2, 3]}},
                },
            }
        ],
    }


def answer_with(**fields: Any) -> dict[str, Any]:
    line = good(999)
    line["turns"][0]["responses"]["llm_a"].update(fields)
    return line


def turn_with(**fields: Any) -> dict[str, Any]:
    line = good(999)
    line["turns"][0].update(fields)
    return line


def deep(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


# (case id, bad line as object/str/bytes, extra CLI args, fragments the error must contain)
CASES: list[tuple[str, Any, tuple[str, ...], list[str]]] = [
    ("invalid-json", '{"id": "x", "turns": [}', PRESET, ["invalid JSON", "expected one JSON object per line", "found"]),
    ("truncated-json", '{"id": "x", "turns": [', PRESET, ["invalid JSON", "column"]),
    ("not-an-object", "[1, 2, 3]", PRESET, ["not an item", "expected a JSON object, found a list"]),
    (
        "missing-id",
        {"turns": good(0)["turns"]},
        PRESET,
        ["missing id", "field id", "expected a string or integer id", "found no 'id' field"],
    ),
    ("duplicate-id", good(0), PRESET, ["duplicate id", "field id", 'found "good###0"']),
    ("empty-id", {**good(999), "id": ""}, PRESET, ["field id", "expected a non-empty string or integer"]),
    ("boolean-id", {**good(999), "id": True}, PRESET, ["field id", "found a boolean"]),
    (
        "score-out-of-range",
        answer_with(human_evals={"fluency": [5, 6, 3]}),
        PRESET,
        [
            "score out of range",
            "field turns[0].responses.llm_a.human_evals.fluency[1]",
            'expected a number in [1, 5] or a missing code (null, "NA", 0)',
            "found 6",
        ],
    ),
    (
        "negative-score",
        answer_with(human_evals={"overall": [-1]}),
        PRESET,
        ["score out of range", "human_evals.overall[0]", "found -1"],
    ),
    (
        "raters-length-mismatch",
        answer_with(raters=["w1", "w2"], human_evals={"fluency": [5, 3, 4]}),
        PRESET,
        [
            "scores and raters differ in length",
            "field turns[0].responses.llm_a.human_evals.fluency",
            "expected 2 scores, one per entry of 'raters'",
            "found 3",
        ],
    ),
    (
        "duplicate-rater",
        answer_with(raters=["w1", "w1", "w2"]),
        PRESET,
        ["duplicate rater", "responses.llm_a.raters", 'found "w1"'],
    ),
    (
        "unknown-aspect",
        answer_with(human_evals={"beauty": [5, 5, 5]}),
        PRESET,
        ["unknown aspect", "human_evals.beauty", "expected one of the rubric's aspects", 'found "beauty"'],
    ),
    ("turns-not-list", {"id": "t", "turns": "hello"}, PRESET, ["field turns", "expected a non-empty list of turns"]),
    ("turns-empty", {"id": "t", "turns": []}, PRESET, ["field turns", "expected a non-empty list of turns"]),
    ("turn-not-object", {"id": "t", "turns": [5]}, PRESET, ["field turns[0]", "expected an object"]),
    (
        "prompt-number",
        turn_with(prompt=5),
        PRESET,
        ["field turns[0].prompt", "expected a string", "found the number 5"],
    ),
    ("prompt-missing", {"id": "t", "turns": [{"responses": {}}]}, PRESET, ["field turns[0].prompt", "found null"]),
    ("reference-number", turn_with(reference=3), PRESET, ["field turns[0].reference", "expected a string or null"]),
    (
        "context-object",
        turn_with(context={"a": 1}),
        PRESET,
        ["field turns[0].context", "a string or a list of strings", "found an object"],
    ),
    ("context-list-of-numbers", turn_with(context=["ok", 1]), PRESET, ["field turns[0].context"]),
    ("responses-list", turn_with(responses=[]), PRESET, ["field turns[0].responses", "an object keyed by system"]),
    ("answer-string", turn_with(responses={"llm_a": "text"}), PRESET, ["field turns[0].responses.llm_a"]),
    ("response-null", answer_with(response=None), PRESET, ["field turns[0].responses.llm_a.response", "found null"]),
    ("human-evals-list", answer_with(human_evals=[5]), PRESET, ["responses.llm_a.human_evals", "found a list"]),
    (
        "scores-not-list",
        answer_with(human_evals={"fluency": 5}),
        PRESET,
        ["human_evals.fluency", "a list with one score per rater", "found the number 5"],
    ),
    (
        "score-string",
        answer_with(human_evals={"fluency": ["five"]}),
        PRESET,
        ["invalid score", "human_evals.fluency[0]", 'found "five"'],
    ),
    ("score-boolean", answer_with(human_evals={"fluency": [True]}), PRESET, ["invalid score", "found true"]),
    (
        "score-string-inferred",
        answer_with(human_evals={"fluency": ["5"]}),
        (),
        ["invalid score", "human_evals.fluency[0]", 'found "5"'],
    ),
    ("raters-not-list", answer_with(raters="w1"), PRESET, ["responses.llm_a.raters", "a list of rater ids"]),
    ("raters-null-entry", answer_with(raters=["w1", None, "w3"]), PRESET, ["responses.llm_a.raters"]),
    ("auto-evals-list", answer_with(auto_evals=[1]), PRESET, ["responses.llm_a.auto_evals", "keyed by judge name"]),
    (
        "aspect-name-too-long",
        answer_with(human_evals={"a" * 201: [1]}),
        (),
        ["human_evals." + "a" * 201, "an aspect name of at most 200 characters"],
    ),
    (
        "judge-name-too-long",
        answer_with(auto_evals={"j" * 201: {"x": 1}}),
        PRESET,
        ["responses.llm_a.auto_evals", "judge names of at most 200 characters"],
    ),
    (
        "judge-aspect-too-long",
        answer_with(auto_evals={"judge": {"x" * 201: 1}}),
        PRESET,
        ["responses.llm_a.auto_evals.judge", "aspect names of at most 200 characters"],
    ),
    ("non-utf8", b'{"id": "caf\xe9", "turns": []}', PRESET, ["not valid UTF-8", "byte 0xe9 at column 12"]),
    ("nul-in-string", turn_with(prompt="a\u0000b"), PRESET, ["NUL character", "found U+0000"]),
    ("nul-in-key", {**good(999), "meta": {"k\u0000": 1}}, PRESET, ["NUL character in a key"]),
    ("too-deep", {**good(999), "meta": deep(200)}, PRESET, ["nested too deeply", "expected at most 64 levels"]),
    ("one-level-too-deep", {**good(999), "meta": deep(64)}, PRESET, ["nested too deeply", "at most 64 levels"]),
    (
        "vote-rater-boolean",
        turn_with(
            preferences=[
                {"rater": "r1", "candidates": ["llm_a", "llm_b"], "preferred": "llm_a"},
                {"rater": True, "candidates": ["llm_a", "llm_b"], "preferred": None, "tie": True},
            ]
        ),
        PRESET,
        ["turns[0].preferences[1].rater", "a rater id (string or integer) or null", "found a boolean"],
    ),
    (
        "vote-candidate-number",
        turn_with(preferences=[{"rater": "r1", "candidates": ["llm_a", 2], "preferred": "llm_a"}]),
        PRESET,
        ["turns[0].preferences[0].candidates", "a list of system keys"],
    ),
    (
        "vote-candidates-null",
        turn_with(preferences=[{"rater": "r1", "candidates": None, "preferred": "llm_a"}]),
        PRESET,
        ["turns[0].preferences[0].candidates", "a list of system keys", "found null"],
    ),
    ("nan-score", '{"id": "n", "turns": [{"prompt": "p", "responses": {}}], "meta": NaN}', PRESET, ["finite"]),
    (
        "infinity-score",
        '{"id": "n", "turns": [{"prompt": "p", "responses": {"llm_a": {"response": "r", '
        '"human_evals": {"fluency": [Infinity]}}}}]}',
        PRESET,
        ["invalid JSON", "finite numbers", "Infinity"],
    ),
    (
        "overflowing-number",
        '{"id": "n", "turns": [{"prompt": "p"}], "meta": 1e400}',
        PRESET,
        ["invalid JSON", "found 1e400 is not a finite number"],
    ),
    (
        "lone-surrogate",
        '{"id": "s", "turns": [{"prompt": "bad \\ud800 text"}]}',
        PRESET,
        ["unpaired surrogate", "found the lone surrogate U+D800"],
    ),
]


@pytest.fixture
def existing_dataset(db: None, tmp_path: Path, researcher: Any) -> Dataset:
    """A dataset already in the database, so "unchanged" covers non-empty tables too."""
    path = tmp_path / "existing.jsonl"
    generate_llm_jp_jsonl(path, items=3, systems=2, seed=7, max_chars=200)
    from annotations.datasets.importing import dataset_import

    with open(path, "rb") as stream:
        return dataset_import(stream=stream, name="existing", preset="llm-human-eval-jp", owner=researcher).dataset


def _assert_rejected(
    path: Path, extra: tuple[str, ...], fragments: list[str], line: int, capsys: pytest.CaptureFixture[str]
) -> str:
    before = row_counts()
    code, out, err = run_import_cli(path, "incoming", *extra, capsys=capsys)
    assert code != 0, out
    assert f"line {line}" in err, err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    assert "nothing was imported" in err
    assert row_counts() == before
    assert not Dataset.objects.filter(name="incoming").exists()
    return err


@pytest.mark.django_db
@pytest.mark.parametrize(("case", "bad", "extra", "fragments"), CASES, ids=[c[0] for c in CASES])
def test_bad_line_after_two_good_lines(
    existing_dataset: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, bad: Any, extra, fragments
) -> None:
    path = write_lines(tmp_path / f"{case}.jsonl", [good(0), good(1), bad, good(2)])
    _assert_rejected(path, extra, fragments, 3, capsys)


@pytest.mark.django_db
@pytest.mark.parametrize(("case", "bad", "extra", "fragments"), CASES, ids=[c[0] for c in CASES])
def test_bad_last_line_after_many_chunks(
    existing_dataset: Dataset,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    settings: Any,
    case: str,
    bad: Any,
    extra,
    fragments,
) -> None:
    settings.IMPORT_CHUNK_ITEMS = 4
    lines: list[Any] = [good(i) for i in range(41)]
    if case == "duplicate-id":
        bad = good(17)
        fragments = [*fragments[:2], 'found "good###17"']
    path = write_lines(tmp_path / f"{case}-last.jsonl", [*lines, bad])
    _assert_rejected(path, extra, fragments, 42, capsys)


@pytest.mark.django_db
def test_oversized_line_is_rejected_without_reading_it_whole(
    existing_dataset: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str], settings: Any
) -> None:
    settings.IMPORT_MAX_LINE_BYTES = 4096
    huge = answer_with(response="x" * 10_000)
    path = write_lines(tmp_path / "huge.jsonl", [good(0), huge])
    _assert_rejected(path, PRESET, ["line too long", "expected at most 4096 bytes per line"], 2, capsys)


@pytest.mark.django_db
@pytest.mark.parametrize("content", [b"", b"\n\n   \n"], ids=["zero-bytes", "blank-lines"])
def test_empty_file_is_rejected(
    existing_dataset: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    before = row_counts()
    code, _, err = run_import_cli(path, "incoming", *PRESET, capsys=capsys)
    assert code != 0
    assert "empty file" in err and "expected at least one JSON object line, found no items" in err
    assert row_counts() == before


@pytest.mark.django_db
def test_failure_while_writing_late_chunk_rolls_back_earlier_chunks(
    existing_dataset: Dataset,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Validation catches bad data before writing; this proves the write pass itself is all-or-nothing."""
    settings.IMPORT_CHUNK_ITEMS = 3
    real_write = import_writer.ImportWriter.write_chunk
    calls: list[int] = []

    def failing_write(self: Any, chunk: list[dict[str, Any]], result: Any) -> None:
        calls.append(len(chunk))
        if len(calls) == 5:
            raise IntegrityError("simulated failure in the fifth chunk")
        real_write(self, chunk, result)

    monkeypatch.setattr(import_writer.ImportWriter, "write_chunk", failing_write)
    path = write_lines(tmp_path / "many.jsonl", [good(i) for i in range(20)])
    before = row_counts()
    code, _, err = run_import_cli(path, "incoming", *PRESET, capsys=capsys)
    assert code != 0
    assert "simulated failure" in err
    assert calls == [3, 3, 3, 3, 3]
    assert row_counts() == before


@pytest.mark.django_db
def test_existing_name_is_refused(
    existing_dataset: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_lines(tmp_path / "ok.jsonl", [good(0)])
    before = row_counts()
    code, _, err = run_import_cli(path, "existing", *PRESET, "--owner", "researcher", capsys=capsys)
    assert code != 0 and "you already have a dataset named" in err
    assert row_counts() == before


@pytest.mark.django_db
def test_bad_rubric_file_is_refused(
    existing_dataset: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps({"aspects": [{"name": "x", "min": 5, "max": 1}]}))
    path = write_lines(tmp_path / "ok.jsonl", [good(0)])
    before = row_counts()
    code, _, err = run_import_cli(path, "incoming", "--rubric", str(rubric), capsys=capsys)
    assert code != 0 and "'min' (5) must be below 'max' (1)" in err
    assert row_counts() == before


@pytest.mark.django_db
def test_missing_file_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = row_counts()
    code, _, err = run_import_cli(tmp_path / "absent.jsonl", "incoming", capsys=capsys)
    assert code != 0 and "cannot read" in err
    assert row_counts() == before


@pytest.mark.django_db
@pytest.mark.parametrize("missing", [[0, "NA"], [3], [2.5]])
def test_missing_code_inside_the_scale_is_refused(
    existing_dataset: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str], missing: list[Any]
) -> None:
    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps({"aspects": [{"name": "overall", "min": 0, "max": 3, "missing": missing}]}))
    path = write_lines(tmp_path / "ok.jsonl", [good(0)])
    before = row_counts()
    code, _, err = run_import_cli(path, "incoming", "--rubric", str(rubric), capsys=capsys)
    assert code != 0
    assert "lies inside the scale [0, 3]" in err and "would be read as missing" in err
    assert row_counts() == before


@pytest.mark.parametrize("missing", [[-1], ["0"], [None, 99], [False]])
def test_missing_codes_outside_the_scale_are_kept(missing: list[Any]) -> None:
    from annotations.rubrics.specs import parse_rubric

    spec = parse_rubric({"aspects": [{"name": "overall", "min": 0, "max": 3, "missing": missing}]}, source="file")
    assert spec.aspects[0].missing == missing


@pytest.mark.django_db
def test_depth_counts_containers_not_brackets_inside_strings(researcher: Any) -> None:
    """The deepest nesting the limit allows imports, beside text full of brackets and escaped quotes."""
    import io

    from annotations.datasets.importing import dataset_import

    line = {**good(0), "meta": deep(63), "note": '[{"\\' * 100}
    stream = io.BytesIO(json.dumps(line, ensure_ascii=False).encode() + b"\n")
    result = dataset_import(stream=stream, name="deep enough", preset="llm-human-eval-jp", owner=researcher)
    assert result.items == 1
