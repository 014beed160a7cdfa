"""Import then export gives JSON-equal lines in the same order, for every field of the import format."""

import json
from pathlib import Path
from typing import Any

import pytest

from annotations.models import Dataset, Rater, Rating, Response, Turn
from bench.datagen import generate_lfqa_jsonl, generate_llm_jp_jsonl
from judging.models import Judge, JudgeKind, JudgeScore
from tests.io.helpers import assert_json_equal, export_lines, export_objects, read_objects, run_import_cli, write_lines

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "annotations" / "sample_data"


def _raters(count: int, prefix: str) -> list[str]:
    return [f"{prefix}{n:03d}" for n in range(count)]


def kitchen_sink() -> list[dict[str, Any]]:
    """Every optional field, odd value and shape the format allows, spread over a few lines."""
    long_raters = _raters(120, "crowd-")
    return [
        {
            "id": "elyza###0",
            "turns": [
                {
                    "prompt": "仕事の熱意を取り戻すためのアイデアを5つ挙げてください。🔥",
                    "reference": "小さな目標を立てる…",
                    "context": "一つの文章としての知識。",
                    "responses": {
                        "llm_a": {
                            "response": "- 目標を立てる\n- 休む 😴\n```py\nprint('x')\n```",
                            "human_evals": {
                                "relevance": [4, 4, 5],
                                "fluency": [5, 3, "NA"],
                                "detailedness": [0, 5, None],
                                "factuality": [5.0, 4.5, 1],
                                "overall": [5, 4, 4],
                            },
                            "auto_evals": {"unieval": {"fluency": 0.83, "coherence": 1}, "odd judge": {"x": "y"}},
                            "meta": {"latency_ms": 1234, "tokens": [1, 2, 3], "nested": {"a": None}},
                            "vendor_field": "kept verbatim",
                        },
                        "llm_e": {"response": "短い答え", "human_evals": {"overall": [1]}},
                        "llm_x": {"response": "no ratings at all"},
                    },
                    "turn_extra": {"keep": True},
                },
                {
                    "prompt": "続けて",
                    "reference": None,
                    "context": ["passage one", "パッセージ二", ""],
                    "responses": {
                        "llm_a": {
                            "response": "second turn answer",
                            "raters": long_raters,
                            "human_evals": {"overall": [1 + n % 5 for n in range(120)], "fluency": ["NA"] * 120},
                        },
                        "llm_e": {
                            "response": "",
                            "raters": ["w17"],
                            "human_evals": {"overall": [0]},
                            "auto_evals": {},
                        },
                    },
                },
                {"prompt": "third turn with empty responses", "responses": {}},
            ],
            "meta": {"source": "elyza", "tags": ["a", "b"], "score": 3.25},
            "unknown_top_level": [1, {"two": 2}],
        },
        {
            "id": 42,
            "turns": [
                {
                    "prompt": 'Quotes " and backslashes \\ and tabs \t and newlines \n survive.',
                    "responses": {
                        "llm_b": {
                            "response": "=SUM(A1:A2)",
                            "raters": [7, "w03", "w22", "ü-rater"],
                            "human_evals": {"overall": [3, None, "NA", 2], "relevance": [1, 2, 3, 4]},
                            "auto_evals": {"rouge": {"overall": -0.5, "relevance": 1e-9}},
                        },
                        "llm_a": {
                            "response": "two raters here",
                            "raters": ["w03", "w99"],
                            "human_evals": {"overall": [5, 5]},
                        },
                    },
                }
            ],
        },
        {"id": "no-meta", "turns": [{"prompt": "only a prompt"}]},
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["preset", "inferred"])
def test_kitchen_sink_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str) -> None:
    lines = kitchen_sink()
    path = write_lines(tmp_path / "sink.jsonl", lines)
    extra = ("--preset", "llm-human-eval-jp") if mode == "preset" else ()
    code, _out, err = run_import_cli(path, "sink", *extra, capsys=capsys)
    assert code == 0, err
    exported = export_objects("sink")
    assert len(exported) == len(lines)
    for got, want in zip(exported, lines, strict=True):
        assert_json_equal(got, want)
    if mode == "inferred":
        assert "No rubric was given" in err
        assert Dataset.objects.get(name="sink").notice.startswith("No rubric was given")


@pytest.mark.django_db
def test_kitchen_sink_storage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_lines(tmp_path / "sink.jsonl", kitchen_sink())
    code, _out, err = run_import_cli(path, "sink", "--preset", "llm-human-eval-jp", capsys=capsys)
    assert code == 0, err
    dataset = Dataset.objects.get(name="sink")
    first = Response.objects.get(turn__item__external_id="elyza###0", turn__index=0, system__key="llm_a")
    fluency = list(first.ratings.filter(aspect__name="fluency").order_by("position").values_list("raw", "value"))
    assert fluency == [(5, 5.0), (3, 3.0), ("NA", None)]
    detail = list(first.ratings.filter(aspect__name="detailedness").order_by("position"))
    assert [(r.raw, r.value, r.is_missing) for r in detail] == [(0, None, True), (5, 5.0, False), (None, None, True)]
    # Positional raters when no list is given; named raters otherwise, shared across answers ("w03").
    assert {r.rater.external_id for r in detail} == {"#1", "#2", "#3"}
    assert all(r.rater.is_positional for r in detail)
    assert Rater.objects.filter(dataset=dataset, external_id="w03", is_positional=False).count() == 1
    assert Rater.objects.get(dataset=dataset, external_id="w03").ratings.count() == 3
    assert Rating.objects.filter(response__turn__item__dataset=dataset, rater__external_id="crowd-119").count() == 2
    second = Turn.objects.get(item__external_id="elyza###0", index=1)
    assert second.context == ["passage one", "パッセージ二", ""]
    assert second.reference is None
    assert Turn.objects.get(item__external_id="elyza###0", index=0).context == "一つの文章としての知識。"
    # auto_evals become imported judges; non-numeric values stay only in the verbatim source.
    unieval = Judge.objects.get(dataset=dataset, name="unieval")
    assert unieval.kind == JudgeKind.IMPORTED
    assert dict(unieval.scores.values_list("aspect_name", "value")) == {"fluency": 0.83, "coherence": 1.0}
    assert not JudgeScore.objects.filter(judge__name="odd judge").exists()
    assert JudgeScore.objects.get(judge__name="rouge", aspect_name="relevance").value == pytest.approx(1e-9)
    assert dataset.items.get(external_id="42").source["id"] == 42


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("filename", "preset"),
    [("llm_jp_sample.jsonl", "llm-human-eval-jp"), ("lfqa_sample.jsonl", "lfqa-multiaspect")],
)
def test_sample_data_round_trips(filename: str, preset: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = SAMPLE_DIR / filename
    code, _out, err = run_import_cli(path, "sample", "--preset", preset, capsys=capsys)
    assert code == 0, err
    assert_json_equal(export_objects("sample"), read_objects(path))


@pytest.mark.django_db
def test_lfqa_sample_imports_with_its_rubric_file(capsys: pytest.CaptureFixture[str]) -> None:
    path = SAMPLE_DIR / "lfqa_sample.jsonl"
    code, _out, err = run_import_cli(path, "lfqa", "--rubric", str(SAMPLE_DIR / "lfqa_rubric.json"), capsys=capsys)
    assert code == 0, err
    dataset = Dataset.objects.get(name="lfqa")
    amount = dataset.aspects.get(name="amount_info")
    assert (amount.min_value, amount.max_value, amount.ideal) == (-1.0, 1.0, 0.0)
    assert dataset.rubric.source == "file"
    assert dataset.systems.get(key="model_formal").model_name.startswith("model answer")
    assert_json_equal(export_objects("lfqa"), read_objects(path))


@pytest.mark.django_db
def test_generated_files_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str], settings: Any) -> None:
    settings.IMPORT_CHUNK_ITEMS = 7
    jp = tmp_path / "jp.jsonl"
    generate_llm_jp_jsonl(jp, items=30, systems=4, raters=3, seed=3, max_chars=300, missing_rate=0.2)
    lfqa = tmp_path / "lfqa.jsonl"
    generate_lfqa_jsonl(lfqa, questions=12, seed=5)
    named = tmp_path / "named.jsonl"
    generate_llm_jp_jsonl(named, items=9, systems=3, raters=5, seed=9, max_chars=100, with_rater_ids=True)
    for name, path, preset in [
        ("jp", jp, "llm-human-eval-jp"),
        ("lfqa", lfqa, "lfqa-multiaspect"),
        ("named", named, "llm-human-eval-jp"),
    ]:
        code, _out, err = run_import_cli(path, name, "--preset", preset, capsys=capsys)
        assert code == 0, err
        assert_json_equal(export_objects(name), read_objects(path))


@pytest.mark.django_db
def test_export_is_one_compact_line_per_item_in_input_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = [f"z{n}" for n in range(9, -1, -1)]
    path = write_lines(tmp_path / "order.jsonl", [{"id": i, "turns": [{"prompt": "日本語"}]} for i in ids])
    code, _, err = run_import_cli(path, "order", capsys=capsys)
    assert code == 0, err
    lines = export_lines("order")
    assert [json.loads(line)["id"] for line in lines] == ids
    assert "日本語" in lines[0]  # not \\u-escaped


@pytest.mark.django_db
def test_rater_lists_of_any_length_differ_between_answers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = []
    for n in range(1, 121, 7):
        raters = _raters(n, "r")
        lines.append(
            {
                "id": f"len-{n}",
                "turns": [
                    {
                        "prompt": "p",
                        "responses": {
                            "a": {"response": "x", "raters": raters, "human_evals": {"q": [n % 5 + 1] * n}},
                            "b": {"response": "y", "raters": raters[:1], "human_evals": {"q": ["NA"]}},
                        },
                    }
                ],
            }
        )
    path = write_lines(tmp_path / "lengths.jsonl", lines)
    code, _, err = run_import_cli(path, "lengths", capsys=capsys)
    assert code == 0, err
    assert_json_equal(export_objects("lengths"), lines)
    assert Rating.objects.filter(response__turn__item__dataset__name="lengths").count() == sum(
        n + 1 for n in range(1, 121, 7)
    )


@pytest.mark.django_db
def test_named_raters_that_look_positional_do_not_clash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file may name a rater "#1" while other answers have no rater list (positional "#1", "#2")."""
    lines = [
        {"id": 1, "turns": [{"prompt": "p", "responses": {"a": {"response": "x", "human_evals": {"q": [1, 2]}}}}]},
        {
            "id": 2,
            "turns": [
                {
                    "prompt": "p",
                    "responses": {"a": {"response": "y", "raters": ["#1", "#2"], "human_evals": {"q": [3, 4]}}},
                }
            ],
        },
    ]
    path = write_lines(tmp_path / "hash.jsonl", lines)
    code, _, err = run_import_cli(path, "hash", capsys=capsys)
    assert code == 0, err
    assert_json_equal(export_objects("hash"), lines)
    named = Rater.objects.get(dataset__name="hash", external_id="#1")
    assert named.is_positional is False
    assert list(named.ratings.values_list("raw", flat=True)) == [3]
    positional = Rater.objects.filter(dataset__name="hash", is_positional=True)
    assert sorted(r.ratings.get().raw for r in positional) == [1, 2]


@pytest.mark.django_db
def test_rubric_with_overlong_aspect_name_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps({"aspects": [{"name": "n" * 201, "min": 1, "max": 5}]}))
    path = write_lines(tmp_path / "ok.jsonl", [{"id": 1, "turns": [{"prompt": "p"}]}])
    code, _, err = run_import_cli(path, "long", "--rubric", str(rubric), capsys=capsys)
    assert code != 0 and "rubric aspect name or label too long" in err
    assert not Dataset.objects.filter(name="long").exists()
