"""Rubric texts per language: parsed, stored, shown in the reader's language and written back by the export."""

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotations.campaigns.claims import assignment_claim
from annotations.datasets.importing import dataset_import
from annotations.errors import RubricError
from annotations.models import Aspect, Dataset
from annotations.rubrics.specs import PRESETS, parse_rubric, preset_rubric
from tests.annotate.factories import make_campaign
from tests.conftest import CAST_PASSWORD
from tests.io.helpers import export_lines, run_import_cli, write_lines

BILINGUAL = {
    "aspects": [
        {
            "name": "fluency",
            "label": {"en": "Fluency", "ja": "流暢さ"},
            "description": {"en": "Is it natural?", "ja": "自然か。"},
            "min": 1,
            "max": 5,
            "labels": {"1": {"en": "very poor", "ja": "非常に悪い"}, "5": "excellent"},
        },
        {"name": "tone", "label": "Tone", "min": 0, "max": 3, "labels": {"0": "cold"}},
        {"name": "nur-ja", "label": {"ja": "日本語だけ"}, "min": 1, "max": 3},
    ],
    "systems": {"a": "openai/gpt-4o"},
}
LINES = [
    {"id": "q1", "turns": [{"prompt": "p", "responses": {"a": {"response": "x", "human_evals": {"fluency": [5, 4]}}}}]}
]


def test_plain_strings_stay_plain() -> None:
    spec = parse_rubric(
        {"aspects": [{"name": "x", "label": "X", "min": 0, "max": 1, "labels": {"0": "no"}}]}, source="t"
    )
    assert spec.aspects[0].label == "X" and spec.aspects[0].labels == {"0": "no"}
    assert spec.aspects[0].translations == {}


def test_language_objects_split_into_default_and_translations() -> None:
    fluency, tone, only_ja = parse_rubric(BILINGUAL, source="t").aspects
    assert (fluency.label, fluency.description) == ("Fluency", "Is it natural?")
    assert fluency.labels == {"1": "very poor", "5": "excellent"}
    assert fluency.translations["ja"] == {"label": "流暢さ", "description": "自然か。", "labels": {"1": "非常に悪い"}}
    assert tone.translations == {}
    # Without English the first language given is the default text.
    assert only_ja.label == "日本語だけ" and "ja" not in only_ja.translations


@pytest.mark.parametrize(
    ("label", "message"),
    [
        ({"english": "x"}, "'english' is not a language code"),
        ({"en": 3}, "the 'en' text must be a string"),
        ({}, "expected a string or an object of texts per language"),
        (["x"], "expected a string or an object of texts per language"),
    ],
)
def test_bad_language_texts_are_named(label: Any, message: str) -> None:
    with pytest.raises(RubricError, match=message):
        parse_rubric({"aspects": [{"name": "x", "label": label, "min": 0, "max": 1}]}, source="t")


def test_bad_value_label_names_the_value() -> None:
    with pytest.raises(RubricError, match=r"'labels' '1'"):
        parse_rubric({"aspects": [{"name": "x", "min": 0, "max": 1, "labels": {"1": {"ja": 5}}}]}, source="t")


@pytest.mark.django_db
def test_rubric_download_round_trips_every_language(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rubric_path = tmp_path / "rubric.json"
    rubric_path.write_text(json.dumps(BILINGUAL, ensure_ascii=False), encoding="utf-8")
    data = write_lines(tmp_path / "d.jsonl", LINES)
    code, _, err = run_import_cli(data, "bilingual", "--rubric", str(rubric_path), capsys=capsys)
    assert code == 0, err
    exported_rubric = tmp_path / "out.rubric.json"
    call_command("export_dataset", "bilingual", "--rubric", "--out", str(exported_rubric))
    written = json.loads(exported_rubric.read_text(encoding="utf-8"))
    assert written["aspects"][0]["label"] == {"en": "Fluency", "ja": "流暢さ"}
    assert written["aspects"][0]["labels"] == {"1": {"en": "very poor", "ja": "非常に悪い"}, "5": {"en": "excellent"}}
    assert written["aspects"][1]["label"] == "Tone" and written["aspects"][1]["labels"] == {"0": "cold"}
    assert written["aspects"][2]["label"] == {"ja": "日本語だけ"}
    assert written["systems"] == {"a": "openai/gpt-4o"}

    again = tmp_path / "again.jsonl"
    again.write_text("\n".join(export_lines("bilingual")) + "\n", encoding="utf-8")
    code, _, err = run_import_cli(again, "bilingual-again", "--rubric", str(exported_rubric), capsys=capsys)
    assert code == 0, err
    fields = ["name", "label", "description", "min_value", "max_value", "ideal", "level", "labels", "missing"]
    fields.append("translations")

    def aspects(name: str) -> list[dict[str, Any]]:
        return list(Aspect.objects.filter(dataset__name=name).order_by("position").values(*fields))

    assert aspects("bilingual-again") == aspects("bilingual")


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_presets_ship_english_and_japanese(preset: str) -> None:
    for aspect in parse_rubric(PRESETS[preset], source="preset").aspects:
        japanese = aspect.translations["ja"]
        assert aspect.label and japanese["label"] and japanese["description"]
        assert set(japanese["labels"]) == set(aspect.labels)


@pytest.mark.django_db
def test_task_page_speaks_the_readers_language(researcher: Any, annotator1: Any) -> None:
    lines = [{"id": "i1", "turns": [{"prompt": "p", "responses": {"s1": {"response": "a"}, "s2": {"response": "b"}}}]}]
    body = "\n".join(json.dumps(line) for line in lines).encode()
    dataset_import(
        stream=io.BytesIO(body), name="jp-preset", rubric=preset_rubric("llm-human-eval-jp"), owner=researcher
    )
    campaign = make_campaign(Dataset.objects.get(name="jp-preset"), [annotator1], raters_per_item=1)
    lease = assignment_claim(campaign=campaign, user=annotator1)
    url = reverse("annotate-task", args=[campaign.pk, lease.task_id])

    japanese = Client(HTTP_ACCEPT_LANGUAGE="ja")
    japanese.login(username=annotator1.username, password=CAST_PASSWORD)
    page = japanese.get(url).content.decode()
    assert "流暢さ" in page and "非常に悪い" in page and "日本語が自然で" in page
    assert "Fluency" not in page and "very poor" not in page
    refused = japanese.post(url + "submit/", {"idempotency_key": "ja-rubric-0001"}).content.decode()
    assert "候補 1：詳細さ の値を選んでください。" in refused

    english = Client(HTTP_ACCEPT_LANGUAGE="en")
    english.login(username=annotator1.username, password=CAST_PASSWORD)
    page = english.get(url).content.decode()
    assert "Fluency" in page and "very poor" in page and "流暢さ" not in page
