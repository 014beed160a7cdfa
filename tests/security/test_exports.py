"""Every CSV download neutralises cells that start with = + - @ tab or CR; JSONL stays unchanged.

The hostile dataset puts formula payloads in item ids, system keys, rater ids, judge names and aspect names, and
app ratings carry them in rationales and comments, so every CSV below has hostile cells to neutralise."""

import csv
import io
import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from annotations.datasets.exporting import FORMULA_PREFIXES, csv_safe
from annotations.models import Aspect, Dataset, Response
from annotations.services import rater_for_user, rating_create
from tests.security.hostile import (
    CORPUS,
    FORMULA_PAYLOADS,
    MARKUP_PAYLOADS,
    hostile_dataset_bytes,
    import_hostile_dataset,
)

ASPECTS = [MARKUP_PAYLOADS[0], FORMULA_PAYLOADS[0], FORMULA_PAYLOADS[5], FORMULA_PAYLOADS[3]]


def formula_cells(text: str) -> list[str]:
    """Cells a spreadsheet would run as a formula (numbers such as -1 are numbers, not formulas)."""
    bad = []
    for row in csv.reader(io.StringIO(text, newline="")):
        for cell in row:
            if cell.startswith(FORMULA_PREFIXES):
                try:
                    float(cell)
                except ValueError:
                    bad.append(cell)
    return bad


def neutralised_cells(text: str) -> list[str]:
    return [
        cell
        for row in csv.reader(io.StringIO(text, newline=""))
        for cell in row
        if cell.startswith("'") and cell[1:].startswith(FORMULA_PREFIXES)
    ]


@pytest.fixture
def hostile(researcher: User, annotator1: User) -> Dataset:
    dataset = import_hostile_dataset(name="hostile-export", owner=researcher, aspects=ASPECTS).dataset
    rater = rater_for_user(dataset=dataset, user=annotator1)
    aspects = list(Aspect.objects.filter(dataset=dataset))
    for index, response in enumerate(Response.objects.filter(turn__item__dataset=dataset).order_by("pk")[:12]):
        payload = FORMULA_PAYLOADS[index % len(FORMULA_PAYLOADS)]
        rating_create(
            response=response,
            aspect=aspects[index % len(aspects)],
            rater=rater,
            raw=3,
            rationale=payload,
            comment=payload,
        )
    return dataset


def _body(response) -> str:  # type: ignore[no-untyped-def]
    raw = b"".join(response.streaming_content) if response.streaming else response.content
    return raw.decode("utf-8")


def _assert_download(response, content_type: str) -> str:  # type: ignore[no-untyped-def]
    assert response.status_code == 200
    assert response["Content-Type"].startswith(content_type)
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["X-Content-Type-Options"] == "nosniff"
    return _body(response)


def test_checker_sees_raw_formulas() -> None:
    buffer = io.StringIO()
    csv.writer(buffer).writerows([[payload, -1, "-1", "1.5"] for payload in FORMULA_PAYLOADS])
    assert len(formula_cells(buffer.getvalue())) == len(FORMULA_PAYLOADS)


@pytest.mark.parametrize("payload", FORMULA_PAYLOADS)
def test_csv_safe_neutralises_every_prefix(payload: str) -> None:
    assert csv_safe(payload) == "'" + payload
    assert formula_cells(_csv_line([csv_safe(payload)])) == []


@pytest.mark.parametrize("value", [-1, -0.5, 3, 2.5, None, True, "plain", "a=b", "日本語", ""])
def test_csv_safe_leaves_numbers_and_plain_text(value: object) -> None:
    assert csv_safe(value) == value


def _csv_line(cells: list[object]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerow(cells)
    return buffer.getvalue()


@pytest.mark.django_db
def test_api_flat_csv_is_neutralised(hostile: Dataset, researcher: User) -> None:
    client = Client()
    client.force_login(researcher)
    body = _assert_download(client.get(f"/api/datasets/{hostile.pk}/export/", {"flat": "csv"}), "text/csv")
    assert formula_cells(body) == []
    neutralised = neutralised_cells(body)
    for payload in FORMULA_PAYLOADS:
        assert "'" + payload in neutralised, payload  # ids, systems, raters, rationales are all present


@pytest.mark.django_db
def test_cli_flat_csv_is_neutralised(hostile: Dataset, tmp_path: Path) -> None:
    out = tmp_path / "flat.csv"
    call_command("export_dataset", hostile.name, "--flat", "--out", str(out))
    body = out.read_text(encoding="utf-8")
    assert formula_cells(body) == []
    assert len(neutralised_cells(body)) > 20


@pytest.mark.django_db
def test_jsonl_exports_keep_hostile_text_verbatim(hostile: Dataset, researcher: User) -> None:
    client = Client()
    client.force_login(researcher)
    flat = _assert_download(client.get(f"/api/datasets/{hostile.pk}/export/", {"flat": "jsonl"}), "application/jsonl")
    rationales = {json.loads(line)["rationale"] for line in flat.splitlines()}
    assert set(FORMULA_PAYLOADS) <= rationales  # no leading quote added in JSON
    nested = _assert_download(client.get(f"/api/datasets/{hostile.pk}/export/"), "application/jsonl")
    assert all(payload in nested for payload in [json.dumps(p, ensure_ascii=False)[1:-1] for p in CORPUS])


@pytest.mark.django_db
def test_jsonl_round_trip_of_the_hostile_file_is_exact(researcher: User) -> None:
    dataset = import_hostile_dataset(name="hostile-roundtrip", owner=researcher, aspects=ASPECTS).dataset
    client = Client()
    client.force_login(researcher)
    body = _assert_download(client.get(f"/api/datasets/{dataset.pk}/export/"), "application/jsonl")
    original = hostile_dataset_bytes(aspects=ASPECTS).decode("utf-8").splitlines()
    assert [json.loads(line) for line in body.splitlines()] == [json.loads(line) for line in original]


def _dashboard_tables() -> tuple[list[str], list[str]]:
    from judging.analysis.views import DATASET_TABLES, JUDGE_TABLES

    return sorted(DATASET_TABLES), sorted(JUDGE_TABLES)


@pytest.mark.django_db
def test_every_dashboard_csv_is_neutralised(hostile: Dataset, researcher: User) -> None:
    from judging.models import Judge

    dataset_tables, judge_tables = _dashboard_tables()
    client = Client()
    client.force_login(researcher)
    # A judge whose name survives the dashboard's query-parameter trimming, and that scored every aspect.
    judge = (
        Judge.objects.filter(dataset=hostile, scores__aspect_name=ASPECTS[1], name__startswith="=").distinct().first()
    )
    assert judge is not None
    downloads = []
    for aspect in [a for a in ASPECTS if a == a.strip()]:
        for table in dataset_tables:
            url = f"/dashboard/{hostile.pk}/tables/{table}.csv"
            downloads.append((url, client.get(url, {"aspect": aspect})))
        for table in judge_tables:
            url = f"/dashboard/{hostile.pk}/judges/tables/{table}.csv"
            downloads.append((url, client.get(url, {"aspect": aspect, "judge": judge.name})))
    all_neutralised = []
    for url, response in downloads:
        body = _assert_download(response, "text/csv")
        assert formula_cells(body) == [], url
        all_neutralised.extend(neutralised_cells(body))
    assert all_neutralised, "no hostile cell reached any dashboard table; the test proves nothing"
