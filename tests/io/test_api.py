"""The datasets API (/api/datasets/): upload, streamed download, scoping by researcher, and the OpenAPI schema."""

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from annotations.datasets.importing import dataset_import
from annotations.models import Dataset
from judging.models import JudgeKind, JudgeScore
from tests.conftest import client_for
from tests.factories import JudgeFactory
from tests.io.helpers import assert_json_equal, row_counts

SAMPLE = Path(__file__).resolve().parents[2] / "annotations" / "sample_data" / "llm_jp_sample.jsonl"
LIST_URL = reverse("api-dataset-list")
IMPORT_URL = reverse("api-dataset-import")


def upload(name: str = "uploaded", content: bytes | None = None, **fields: Any) -> dict[str, Any]:
    data = SAMPLE.read_bytes() if content is None else content
    return {"file": SimpleUploadedFile("data.jsonl", data, "application/jsonl"), "name": name, **fields}


@pytest.fixture
def own_dataset(researcher: User) -> Dataset:
    with open(SAMPLE, "rb") as stream:
        return dataset_import(stream=stream, name="mine", preset="llm-human-eval-jp", owner=researcher).dataset


@pytest.fixture
def foreign_dataset(other_researcher: User) -> Dataset:
    with open(SAMPLE, "rb") as stream:
        return dataset_import(stream=stream, name="theirs", preset="llm-human-eval-jp", owner=other_researcher).dataset


def export_url(dataset: Dataset) -> str:
    return reverse("api-dataset-export", args=[dataset.pk])


def body_of(response: Any) -> bytes:
    return b"".join(response.streaming_content)


@pytest.mark.django_db
def test_upload_creates_a_dataset_owned_by_the_uploader(researcher: User) -> None:
    response = client_for(researcher).post(IMPORT_URL, upload(preset="llm-human-eval-jp"))
    assert response.status_code == 201, response.content
    payload = response.json()
    assert payload["items"] == 24 and payload["ratings"] == 1680 and payload["judge_scores"] == 336
    dataset = Dataset.objects.get(name="uploaded")
    assert dataset.owner == researcher
    assert payload["dataset"]["id"] == dataset.pk
    assert dataset.rubric.source == "preset:llm-human-eval-jp"


@pytest.mark.django_db
def test_upload_with_rubric_file(researcher: User) -> None:
    rubric = json.dumps({"aspects": [{"name": n, "min": 0, "max": 5} for n in ("overall", "fluency")]})
    content = json.dumps(
        {"id": 1, "turns": [{"prompt": "p", "responses": {"s": {"response": "r", "human_evals": {"overall": [0]}}}}]}
    ).encode()
    fields = upload(content=content, rubric=SimpleUploadedFile("r.json", rubric.encode(), "application/json"))
    response = client_for(researcher).post(IMPORT_URL, fields)
    assert response.status_code == 201, response.content
    assert Dataset.objects.get(name="uploaded").rubric.source == "file"


@pytest.mark.django_db
def test_upload_without_rubric_reports_the_inference_notice(researcher: User) -> None:
    response = client_for(researcher).post(IMPORT_URL, upload())
    assert response.status_code == 201
    assert response.json()["notice"].startswith("No rubric was given")


@pytest.mark.django_db
def test_bad_upload_is_400_naming_the_line_and_writes_nothing(researcher: User, own_dataset: Dataset) -> None:
    lines = SAMPLE.read_bytes().splitlines()
    lines[-1] = lines[-1].replace(b'"overall": [', b'"overall": [9, ', 1)
    client = client_for(researcher)
    before = row_counts()
    response = client.post(IMPORT_URL, upload(content=b"\n".join(lines), preset="llm-human-eval-jp"))
    assert response.status_code == 400
    payload = response.json()
    assert payload["line"] == 24
    assert payload["field"].endswith("human_evals.overall")
    assert "line 24" in payload["detail"] and "found" in payload["detail"]
    assert row_counts() == before


@pytest.mark.django_db
def test_bad_rubric_upload_is_400(researcher: User) -> None:
    fields = upload(rubric=SimpleUploadedFile("r.json", b"{not json", "application/json"))
    client = client_for(researcher)
    before = row_counts()
    response = client.post(IMPORT_URL, fields)
    assert response.status_code == 400
    assert "rubric" in response.json()["detail"]
    assert row_counts() == before


@pytest.mark.django_db
@pytest.mark.parametrize("extra", [{"owner": "1"}, {"members": "2"}, {"id": "5"}])
def test_over_posted_fields_are_rejected(researcher: User, extra: dict[str, str]) -> None:
    client = client_for(researcher)
    before = row_counts()
    response = client.post(IMPORT_URL, upload(**extra))
    assert response.status_code == 400
    assert "unexpected fields" in response.json()["detail"]
    assert row_counts() == before


@pytest.mark.django_db
def test_oversized_upload_is_refused(researcher: User, settings: Any) -> None:
    settings.IMPORT_MAX_UPLOAD_BYTES = 2048
    client = client_for(researcher)
    before = row_counts()
    response = client.post(IMPORT_URL, upload(content=b" " * 4096))
    assert response.status_code in (400, 413)
    assert "2048" in json.dumps(response.json())
    assert row_counts() == before


@pytest.mark.django_db
def test_missing_file_or_name_is_400(researcher: User) -> None:
    client = client_for(researcher)
    assert client.post(IMPORT_URL, {"name": "x"}).status_code == 400
    assert client.post(IMPORT_URL, {"file": SimpleUploadedFile("d.jsonl", b"{}")}).status_code == 400
    assert client.post(IMPORT_URL, upload(preset="no-such-preset")).status_code == 400


@pytest.mark.django_db
def test_duplicate_name_is_400(researcher: User, own_dataset: Dataset) -> None:
    response = client_for(researcher).post(IMPORT_URL, upload(name="mine"))
    assert response.status_code == 400 and "you already have a dataset named" in response.json()["detail"]


@pytest.mark.django_db
def test_download_streams_the_lossless_export(researcher: User, own_dataset: Dataset) -> None:
    response = client_for(researcher).get(export_url(own_dataset))
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"].startswith("application/jsonl")
    assert 'filename="mine.jsonl"' in response["Content-Disposition"]
    exported = [json.loads(x) for x in body_of(response).decode("utf-8").splitlines()]
    assert_json_equal(exported, [json.loads(x) for x in SAMPLE.read_text(encoding="utf-8").splitlines()])


@pytest.mark.django_db
def test_download_flat_csv_and_jsonl(researcher: User, own_dataset: Dataset) -> None:
    client = client_for(researcher)
    csv_response = client.get(export_url(own_dataset), {"flat": "csv"})
    assert csv_response.status_code == 200 and csv_response["Content-Type"].startswith("text/csv")
    assert len(body_of(csv_response).decode("utf-8").splitlines()) == 1680 + 1
    jsonl_response = client.get(export_url(own_dataset), {"flat": "jsonl"})
    rows = [json.loads(x) for x in body_of(jsonl_response).decode("utf-8").splitlines()]
    assert len(rows) == 1680 and rows[0]["item_id"] == "demo-en###1"
    assert client.get(export_url(own_dataset), {"flat": "xml"}).status_code == 400


@pytest.mark.django_db
def test_download_include_judges(researcher: User, own_dataset: Dataset) -> None:
    answer = own_dataset.items.get(external_id="demo-en###1").turns.get().responses.get(system__key="sys_a")
    run = JudgeFactory(dataset=own_dataset, name="my run", kind=JudgeKind.RUN)
    JudgeScore.objects.create(judge=run, response=answer, aspect_name="overall", value=4.5)
    client = client_for(researcher)
    plain = body_of(client.get(export_url(own_dataset))).decode("utf-8")
    assert "my run" not in plain
    judged = body_of(client.get(export_url(own_dataset), {"include_judges": "true"})).decode("utf-8")
    first = json.loads(judged.splitlines()[0])
    assert first["turns"][0]["responses"]["sys_a"]["auto_evals"]["my run"] == {"overall": 4.5}


@pytest.mark.django_db
def test_list_shows_owned_and_shared_datasets_only(
    researcher: User, own_dataset: Dataset, foreign_dataset: Dataset, other_researcher: User
) -> None:
    response = client_for(researcher).get(LIST_URL)
    assert response.status_code == 200
    assert [d["name"] for d in response.json()] == ["mine"]
    foreign_dataset.members.add(researcher)
    assert [d["name"] for d in client_for(researcher).get(LIST_URL).json()] == ["mine", "theirs"]


@pytest.mark.django_db
def test_another_researchers_dataset_is_404_until_shared(researcher: User, foreign_dataset: Dataset) -> None:
    assert client_for(researcher).get(export_url(foreign_dataset)).status_code == 404
    assert client_for(researcher).get(reverse("api-dataset-export", args=[999_999])).status_code == 404
    foreign_dataset.members.add(researcher)
    assert client_for(researcher).get(export_url(foreign_dataset)).status_code == 200


@pytest.mark.django_db
def test_wrong_methods_are_405(researcher: User, own_dataset: Dataset) -> None:
    client = client_for(researcher)
    assert client.get(IMPORT_URL).status_code == 405
    assert client.put(IMPORT_URL).status_code == 405
    assert client.post(LIST_URL).status_code == 405
    assert client.delete(LIST_URL).status_code == 405
    assert client.post(export_url(own_dataset)).status_code == 405
    assert client.delete(export_url(own_dataset)).status_code == 405


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["annotator1", "outsider"])
def test_non_researchers_are_403_everywhere(request: pytest.FixtureRequest, who: str, own_dataset: Dataset) -> None:
    client = client_for(request.getfixturevalue(who))
    before = row_counts()
    assert client.get(LIST_URL).status_code == 403
    assert client.post(IMPORT_URL, upload(name="sneaky")).status_code == 403
    assert client.get(export_url(own_dataset)).status_code == 403
    assert row_counts() == before


@pytest.mark.django_db
def test_anonymous_is_refused(own_dataset: Dataset) -> None:
    client = Client()
    before = row_counts()
    for response in (
        client.get(LIST_URL),
        client.post(IMPORT_URL, upload(name="anon")),
        client.get(export_url(own_dataset)),
    ):
        assert response.status_code in (401, 403)
    assert row_counts() == before


@pytest.mark.django_db
def test_csrf_is_enforced_for_session_uploads(researcher: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(researcher)
    response = client.post(IMPORT_URL, upload())
    assert response.status_code == 403
    assert not Dataset.objects.filter(name="uploaded").exists()


@pytest.mark.django_db
def test_openapi_schema_is_served_to_researchers_only(researcher: User, annotator1: User) -> None:
    response = client_for(researcher).get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.")
    assert {"/api/datasets/", "/api/datasets/import/", "/api/datasets/{id}/export/"} <= set(schema["paths"])
    assert "post" in schema["paths"]["/api/datasets/import/"]
    assert client_for(annotator1).get("/api/schema/").status_code == 403
    assert Client().get("/api/schema/").status_code in (401, 403)
