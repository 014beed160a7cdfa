"""Property tests: random valid files round-trip exactly; random corruptions are always a located DatasetImportError
that leaves the database as it was, never another exception."""

import io
import json
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from annotations.datasets.exporting import RATER_EXCLUDED_KEY, iter_export_lines
from annotations.datasets.importing import dataset_import
from annotations.errors import DatasetImportError
from annotations.gold.rules import GOLD_KEY
from annotations.rubrics.specs import parse_rubric
from tests.io.helpers import assert_json_equal, row_counts

# Free-text aspect names, a negative range and an extra missing code, as rubric files allow.
RUBRIC_DATA = {
    "aspects": [
        {"name": "Maintains Context", "min": 1, "max": 5, "missing": [None, "NA", 0]},
        {"name": "BLEU Ξ§", "min": 0, "max": 1, "level": "ratio"},
        {"name": "formality", "min": -1, "max": 1, "ideal": 0, "missing": [None, "NA", "skip"]},
    ]
}
RUBRIC = parse_rubric(RUBRIC_DATA, source="file")
RANGES = {a.name: (a.min_value, a.max_value, a.missing) for a in RUBRIC.aspects}

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

text = st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=24)
name = text.filter(lambda s: 0 < len(s) <= 60)
leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**62), max_value=2**62),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)
json_value = st.recursive(
    leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3), max_leaves=8
)
finite = st.floats(allow_nan=False, allow_infinity=False)


# Hypothesis also draws the string constants of the code under test, so a free extra key can be a field the importer
# gives a meaning to (a turn's "preferences", an answer's exclusion marks, an item's gold answers): those are reserved.
def extras(reserved: set[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(text.filter(lambda k: k not in reserved), json_value, max_size=2)


def score_for(aspect: str | None) -> st.SearchStrategy[Any]:
    if aspect is None:  # no rubric: numbers, null and "NA"
        return st.one_of(st.integers(-3, 10), st.floats(-5, 10, allow_nan=False), st.none(), st.just("NA"), st.just(0))
    lo, hi, missing = RANGES[aspect]
    return st.one_of(st.integers(int(lo), int(hi)), st.floats(lo, hi), st.sampled_from(missing))


@st.composite
def answers(draw: st.DrawFn, with_rubric: bool) -> dict[str, Any]:
    answer: dict[str, Any] = {"response": draw(text)}
    answer.update(draw(extras({"response", "human_evals", "raters", "auto_evals", RATER_EXCLUDED_KEY, "judge_filled"})))
    if draw(st.booleans()):
        aspect_names = (
            draw(st.lists(st.sampled_from(sorted(RANGES)), unique=True, max_size=3))
            if with_rubric
            else draw(st.lists(name, unique=True, max_size=3))
        )
        if draw(st.booleans()):
            raters = draw(
                st.lists(
                    st.one_of(name.filter(lambda s: len(s) <= 200), st.integers(0, 10**6)),
                    unique_by=str,
                    max_size=6,
                )
            )
            widths = {aspect: len(raters) for aspect in aspect_names}
            answer["raters"] = raters
        else:
            widths = {aspect: draw(st.integers(0, 5)) for aspect in aspect_names}
        answer["human_evals"] = {
            aspect: draw(st.lists(score_for(aspect if with_rubric else None), min_size=n, max_size=n))
            for aspect, n in widths.items()
        }
    if draw(st.booleans()):
        answer["auto_evals"] = draw(
            st.dictionaries(
                name,
                st.one_of(st.dictionaries(name, st.one_of(finite, json_value), max_size=3), json_value),
                max_size=2,
            )
        )
    if draw(st.booleans()):
        answer["meta"] = draw(json_value)
    return answer


@st.composite
def turns(draw: st.DrawFn, with_rubric: bool) -> dict[str, Any]:
    turn: dict[str, Any] = {"prompt": draw(text)}
    if draw(st.booleans()):
        turn["reference"] = draw(st.one_of(st.none(), text))
    if draw(st.booleans()):
        turn["context"] = draw(st.one_of(text, st.lists(text, max_size=3)))
    turn.update(draw(extras({"prompt", "reference", "context", "responses", "preferences"})))
    if draw(st.integers(0, 4)):
        turn["responses"] = draw(st.dictionaries(name, answers(with_rubric), max_size=3))
    return turn


@st.composite
def items(draw: st.DrawFn, with_rubric: bool) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": draw(st.one_of(name, st.integers(0, 10**12))),
        "turns": draw(st.lists(turns(with_rubric), min_size=1, max_size=3)),
    }
    if draw(st.booleans()):
        item["meta"] = draw(json_value)
    item.update(draw(extras({"id", "turns", "meta", GOLD_KEY})))
    return item


@st.composite
def files(draw: st.DrawFn) -> tuple[bool, list[dict[str, Any]]]:
    with_rubric = draw(st.booleans())
    lines = draw(st.lists(items(with_rubric), min_size=1, max_size=5, unique_by=lambda item: str(item["id"])))
    return with_rubric, lines


def _encode(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")


def _import(data: bytes, with_rubric: bool, dataset_name: str) -> Any:
    return dataset_import(stream=io.BytesIO(data), name=dataset_name, rubric=RUBRIC if with_rubric else None)


@pytest.mark.django_db
@SETTINGS
@given(case=files())
def test_random_valid_files_round_trip(case: tuple[bool, list[dict[str, Any]]]) -> None:
    with_rubric, lines = case
    savepoint = transaction.savepoint()
    try:
        result = _import(_encode(lines), with_rubric, "prop")
        exported = [json.loads(line) for line in iter_export_lines(dataset=result.dataset)]
        assert len(exported) == len(lines)
        for got, want in zip(exported, lines, strict=True):
            assert_json_equal(got, want)
    finally:
        transaction.savepoint_rollback(savepoint)


def _answers_of(line: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for turn in line["turns"] for a in turn.get("responses", {}).values()]


CORRUPTIONS = ["bad_utf8", "truncate", "drop_id", "duplicate_id", "wrong_type", "nan", "out_of_range", "raters"]


def corrupt(kind: str, lines: list[dict[str, Any]], index: int, data: st.DataObject) -> bytes | None:
    """The file with line `index` made invalid in the way `kind` says, or None when that line cannot be."""
    line = json.loads(json.dumps(lines[index]))
    encoded = [json.dumps(x, ensure_ascii=False).encode("utf-8") for x in lines]
    if kind == "bad_utf8":
        at = data.draw(st.integers(0, len(encoded[index])))
        encoded[index] = (
            encoded[index][:at] + data.draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + encoded[index][at:]
        )
    elif kind == "truncate":
        encoded[index] = encoded[index][: data.draw(st.integers(1, len(encoded[index]) - 1))]
    elif kind == "nan":
        encoded[index] = encoded[index][:-1] + b', "zz": NaN}'
    else:
        if kind == "drop_id":
            del line["id"]
        elif kind == "duplicate_id":
            if index == 0:
                return None
            line["id"] = lines[data.draw(st.integers(0, index - 1))]["id"]
        elif kind == "wrong_type":
            turn = data.draw(st.sampled_from(line["turns"]))
            turn["prompt"] = data.draw(st.one_of(st.none(), st.integers(), st.lists(st.integers(), max_size=2)))
        elif kind == "out_of_range":
            scored = [a for a in _answers_of(line) if any(a.get("human_evals", {}).values())]
            if not scored:
                return None
            answer = data.draw(st.sampled_from(scored))
            aspect = data.draw(st.sampled_from([k for k, v in answer["human_evals"].items() if v]))
            position = data.draw(st.integers(0, len(answer["human_evals"][aspect]) - 1))
            answer["human_evals"][aspect][position] = RANGES[aspect][1] + data.draw(st.sampled_from([0.5, 1, 100]))
        elif kind == "raters":
            rated = [a for a in _answers_of(line) if "raters" in a and a.get("human_evals")]
            if not rated:
                return None
            answer = data.draw(st.sampled_from(rated))
            aspect = data.draw(st.sampled_from(sorted(answer["human_evals"])))
            answer["human_evals"][aspect].append("NA")
        encoded[index] = json.dumps(line, ensure_ascii=False).encode("utf-8")
    return b"\n".join(encoded) + b"\n"


@pytest.mark.django_db
@settings(SETTINGS, max_examples=80)
@given(case=files(), kind=st.sampled_from(CORRUPTIONS), data=st.data())
def test_random_corruptions_are_located_errors_and_write_nothing(
    case: tuple[bool, list[dict[str, Any]]], kind: str, data: st.DataObject
) -> None:
    _, lines = case
    with_rubric = True  # out-of-range needs declared ranges; every other corruption is invalid either way
    assume(kind != "out_of_range" or any(a.get("human_evals") for line in lines for a in _answers_of(line)))
    lines = [line for line in lines if _fits_rubric(line)] or lines[:0]
    assume(lines)
    index = data.draw(st.integers(0, len(lines) - 1), label="corrupted line index")
    corrupted = corrupt(kind, lines, index, data)
    assume(corrupted is not None)
    before = row_counts()
    savepoint = transaction.savepoint()
    try:
        with pytest.raises(DatasetImportError) as caught:
            _import(corrupted, with_rubric, "corrupt")
    finally:
        transaction.savepoint_rollback(savepoint)
    assert caught.value.line == index + 1, str(caught.value)
    assert f"line {index + 1}" in str(caught.value)
    assert row_counts() == before


def _fits_rubric(line: dict[str, Any]) -> bool:
    return all(
        aspect in RANGES and all(_token_ok(t, aspect) for t in tokens)
        for answer in _answers_of(line)
        for aspect, tokens in answer.get("human_evals", {}).items()
    )


def _token_ok(token: Any, aspect: str) -> bool:
    lo, hi, missing = RANGES[aspect]
    if any(type(token) is type(code) and token == code for code in missing) or token is None:
        return True
    return isinstance(token, (int, float)) and not isinstance(token, bool) and lo <= token <= hi


@pytest.mark.django_db
@settings(SETTINGS, max_examples=60)
@given(case=files(), data=st.data())
def test_random_byte_damage_is_either_a_clean_import_or_a_clean_error(
    case: tuple[bool, list[dict[str, Any]]], data: st.DataObject
) -> None:
    with_rubric, lines = case
    raw = bytearray(_encode(lines))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    before = row_counts()
    savepoint = transaction.savepoint()
    try:
        result = _import(bytes(raw), with_rubric, "damaged")
    except DatasetImportError as exc:
        transaction.savepoint_rollback(savepoint)
        assert exc.line is not None or exc.reason in ("empty file",), str(exc)
        assert row_counts() == before
        return
    try:
        # Damage that left valid JSON imports; then the export must reproduce what was actually read.
        survivors = [json.loads(x) for x in bytes(raw).decode("utf-8").split("\n") if x.strip()]
        exported = [json.loads(x) for x in iter_export_lines(dataset=result.dataset)]
        assert_json_equal(exported, survivors)
    finally:
        transaction.savepoint_rollback(savepoint)
