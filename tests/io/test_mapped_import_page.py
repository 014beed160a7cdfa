"""The mapped import page: researchers preview and import a table (GET and POST only, researchers only); a bad row
is shown with its number and nothing is written."""

import csv
import io
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings
from django.urls import reverse

from annotations.models import Dataset
from tests.conftest import CAST_PASSWORD
from tests.io.helpers import row_counts
from tests.io.test_mapped_tables import long_header, zstd_bomb

URL = "/datasets/import-mapped/"


def helpsteer_csv(score: str = "3") -> SimpleUploadedFile:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["prompt", "response", "helpfulness", "correctness", "coherence", "complexity", "verbosity"])
    writer.writerow(["c#", "C# is a language.", score, "4", "4", "2", "1"])
    writer.writerow(["c#", "C# is a note.", "0", "1", "3", "1", "1"])
    return SimpleUploadedFile("train.csv", buffer.getvalue().encode(), content_type="text/csv")


def login(client: Client, user: User) -> None:
    assert client.login(username=user.username, password=CAST_PASSWORD)


@pytest.mark.django_db
def test_preview_then_import(client: Client, researcher: User) -> None:
    login(client, researcher)
    assert reverse("dataset-import-mapped") == URL
    page = client.get(URL)
    assert page.status_code == 200 and b"helpsteer2" in page.content
    preview = client.post(URL, {"file": helpsteer_csv(), "mapping": "helpsteer2", "preview": "1"})
    assert preview.status_code == 200
    text = preview.content.decode()
    assert "2 rows give 1 items, 2 answers, 10 ratings, 0 preferences and 0 judge scores" in text
    assert "C# is a note." in text and "verbosity" in text
    assert Dataset.objects.count() == 0
    done = client.post(URL, {"file": helpsteer_csv(), "mapping": "helpsteer2", "name": "hs", "import": "1"})
    dataset = Dataset.objects.get(name="hs", owner=researcher)
    assert done.status_code == 302 and done["Location"] == reverse("dashboard-overview", args=[dataset.pk])


@pytest.mark.django_db
def test_bad_row_and_bad_form(client: Client, researcher: User) -> None:
    login(client, researcher)
    before = row_counts()
    response = client.post(URL, {"file": helpsteer_csv("7"), "mapping": "helpsteer2", "name": "hs", "import": "1"})
    assert response.status_code == 400
    text = response.content.decode()
    assert "row 1, field turns[0].responses.response_1.human_evals.helpfulness[0]: score out of range" in text
    assert "nothing was imported" in text
    response = client.post(URL, {"file": helpsteer_csv(), "name": "hs", "import": "1"})
    assert response.status_code == 400 and "choose a ready-made mapping or upload a mapping file" in (
        response.content.decode()
    )
    response = client.post(URL, {"file": helpsteer_csv(), "mapping": "helpsteer2", "import": "1"})
    assert response.status_code == 400 and "give the dataset a name" in response.content.decode()
    assert row_counts() == before


@pytest.mark.django_db
def test_wrong_method_and_no_access(client: Client, researcher: User, annotator1: User) -> None:
    assert client.get(URL).status_code == 302  # anonymous: to the login page
    login(client, annotator1)
    assert client.get(URL).status_code == 403
    assert client.post(URL, {"file": helpsteer_csv(), "mapping": "helpsteer2", "name": "x"}).status_code == 403
    login(client, researcher)
    assert client.put(URL).status_code == 405
    assert client.delete(URL).status_code == 405
    assert Dataset.objects.count() == 0


@pytest.mark.django_db
def test_preview_shows_how_the_table_was_read_and_the_duplicates_choice(client: Client, researcher: User) -> None:
    login(client, researcher)
    upload = SimpleUploadedFile("train.csv", helpsteer_csv().read().replace(b",", b";"), content_type="text/csv")
    preview = client.post(URL, {"file": upload, "mapping": "helpsteer2", "duplicates": "drop", "preview": "1"})
    assert preview.status_code == 200
    text = preview.content.decode()
    assert "train.csv: CSV, UTF-8, delimiter &#x27;;&#x27;, 2 rows" in text
    assert "Exactly repeated rows: dropped, the first of each kept (0 dropped)." in text


@pytest.mark.django_db
@override_settings(IMPORT_MAX_TABLE_BYTES=2 * 1024 * 1024)
def test_hostile_uploads_are_a_400_with_the_limit_named(client: Client, researcher: User, tmp_path: Path) -> None:
    login(client, researcher)
    before = row_counts()
    wide = SimpleUploadedFile("wide.csv", long_header(20_000).encode(), content_type="text/csv")
    for action in ("preview", "import"):
        response = client.post(URL, {"file": wide, "mapping": "helpsteer2", "name": "w", action: "1"})
        wide.seek(0)
        assert response.status_code == 400
        assert "too many columns: expected at most 1000 columns (limit IMPORT_MAX_COLUMNS), found at least" in (
            response.content.decode()
        )
    bomb = zstd_bomb(tmp_path / "bomb.parquet", rows=400, cell=20_000)
    for action in ("preview", "import"):
        upload = SimpleUploadedFile("bomb.parquet", bomb.read_bytes(), content_type="application/octet-stream")
        response = client.post(URL, {"file": upload, "mapping": "helpsteer2", "name": "b", action: "1"})
        assert response.status_code == 400
        text = response.content.decode()
        assert "table too large" in text and "IMPORT_MAX_TABLE_BYTES" in text
        assert "declared by the file&#x27;s metadata" in text
    assert row_counts() == before
