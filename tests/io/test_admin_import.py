"""The admin upload page (/admin/annotations/dataset/import/): imports all or nothing, refuses non-staff."""

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from annotations.models import Dataset
from tests.conftest import client_for
from tests.io.helpers import row_counts

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "annotations" / "sample_data"
URL = reverse("admin:annotations_dataset_import")


@pytest.fixture
def importer(researcher: User) -> User:
    """A researcher with the admin permissions a site operator grants to researchers who import data."""
    researcher.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="annotations", codename__in=["add_dataset", "view_dataset", "change_dataset"]
        )
    )
    return User.objects.get(pk=researcher.pk)


def form(name: str, filename: str = "llm_jp_sample.jsonl", content: bytes | None = None, **extra: Any) -> dict:
    data = (SAMPLE_DIR / filename).read_bytes() if content is None else content
    return {"name": name, "file": SimpleUploadedFile(filename, data), **extra}


@pytest.mark.django_db
def test_get_shows_the_upload_form(importer: User) -> None:
    response = client_for(importer).get(URL)
    assert response.status_code == 200
    body = response.content.decode()
    assert 'enctype="multipart/form-data"' in body and "csrfmiddlewaretoken" in body
    assert "llm-human-eval-jp" in body
    # the format the page expects is one click away
    assert f'href="{reverse("help-page", args=["formats"])}"' in body
    assert f'href="{reverse("help-page", args=["rubric"])}"' in body


@pytest.mark.django_db
def test_the_imported_datasets_admin_page_leads_to_its_overview_and_the_launcher(importer: User) -> None:
    client = client_for(importer)
    client.post(URL, form("linked", preset="llm-human-eval-jp"))
    dataset = Dataset.objects.get(name="linked")
    body = client.get(reverse("admin:annotations_dataset_change", args=[dataset.pk])).content.decode()
    assert f'href="{reverse("dashboard-overview", args=[dataset.pk])}"' in body
    assert f'href="{reverse("admin:judging_dataset_launch", args=[dataset.pk])}"' in body


@pytest.mark.django_db
def test_upload_imports_and_redirects_to_the_dataset(importer: User) -> None:
    response = client_for(importer).post(URL, form("via admin", preset="llm-human-eval-jp"))
    dataset = Dataset.objects.get(name="via admin")
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:annotations_dataset_change", args=[dataset.pk])
    assert dataset.owner == importer
    assert dataset.items.count() == 24


@pytest.mark.django_db
def test_upload_with_rubric_file(importer: User) -> None:
    rubric = SimpleUploadedFile("rubric.json", (SAMPLE_DIR / "lfqa_rubric.json").read_bytes())
    response = client_for(importer).post(URL, form("lfqa via admin", "lfqa_sample.jsonl", rubric=rubric))
    assert response.status_code == 302
    assert Dataset.objects.get(name="lfqa via admin").aspects.count() == 4


@pytest.mark.django_db
def test_bad_file_shows_the_error_and_writes_nothing(importer: User) -> None:
    good = (SAMPLE_DIR / "llm_jp_sample.jsonl").read_bytes().splitlines()
    bad = b"\n".join([*good[:10], b'{"id": "x", "turns": [{"prompt": 1}]}'])
    client = client_for(importer)
    before = row_counts()
    response = client.post(URL, form("broken", content=bad, preset="llm-human-eval-jp"))
    assert response.status_code == 400  # the form again, with the error
    body = response.content.decode()
    assert "line 11" in body and "turns[0].prompt" in body and "nothing was imported" in body
    assert row_counts() == before


@pytest.mark.django_db
def test_preset_and_rubric_together_are_refused(importer: User) -> None:
    rubric = SimpleUploadedFile("rubric.json", (SAMPLE_DIR / "lfqa_rubric.json").read_bytes())
    client = client_for(importer)
    before = row_counts()
    response = client.post(URL, form("both", preset="lfqa-multiaspect", rubric=rubric))
    assert response.status_code == 400
    assert "not both" in response.content.decode()
    assert row_counts() == before


@pytest.mark.django_db
def test_staff_without_add_permission_is_403(researcher: User) -> None:
    client = client_for(researcher)
    before = row_counts()
    assert client.get(URL).status_code == 403
    assert client.post(URL, form("denied")).status_code == 403
    assert row_counts() == before


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["annotator1", "outsider"])
def test_non_staff_are_sent_to_the_admin_login(request: pytest.FixtureRequest, who: str) -> None:
    client = client_for(request.getfixturevalue(who))
    before = row_counts()
    for response in (client.get(URL), client.post(URL, form("sneaky"))):
        assert response.status_code == 302
        assert "/admin/login/" in response["Location"]
    assert row_counts() == before


@pytest.mark.django_db
def test_anonymous_is_sent_to_the_admin_login() -> None:
    response = Client().post(URL, form("anon"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert not Dataset.objects.filter(name="anon").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["put", "delete", "patch"])
def test_other_methods_are_405(importer: User, method: str) -> None:
    before = Dataset.objects.count()
    response = getattr(client_for(importer), method)(URL)
    assert response.status_code == 405
    assert Dataset.objects.count() == before
