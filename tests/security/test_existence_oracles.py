"""No existence oracles across researchers: names are unique per owner (campaign names per dataset), so a
conflict, a version number or a lookup by name tells a researcher nothing about another researcher's data."""

import io
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse

from annotations.campaigns.errors import CampaignError
from annotations.campaigns.setup import campaign_create
from annotations.datasets.editing import dataset_update
from annotations.errors import DatasetEditError
from annotations.models import Campaign, Dataset
from judging import services
from judging.models import JudgeConfig
from tests.judging.factories import make_dataset

pytestmark = pytest.mark.django_db

SAMPLE = Path(__file__).resolve().parents[2] / "annotations" / "sample_data" / "llm_jp_sample.jsonl"


@pytest.fixture
def researcher_b(db: None) -> User:
    return User.objects.create_user("researcher-b", password="x-password-123", is_staff=True)


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _import(client: Client, name: str) -> tuple[int, str]:
    upload = SimpleUploadedFile("data.jsonl", SAMPLE.read_bytes(), "application/jsonl")
    response = client.post(reverse("api-dataset-import"), {"file": upload, "name": name, "preset": "llm-human-eval-jp"})
    return response.status_code, response.content.decode()


def _metric_config(name: str) -> dict[str, object]:
    return {"name": name, "method": "metric", "metric": "rougeL", "aspects": ["overall"]}


def test_a_dataset_name_another_researcher_uses_is_free_and_the_conflict_speaks_only_of_ones_own(
    researcher: User, researcher_b: User
) -> None:
    status, _ = _import(_client(researcher), "A-blind")
    assert status == 201
    status, body = _import(_client(researcher_b), "A-blind")
    assert status == 201, body
    status, body = _import(_client(researcher_b), "A-blind")
    assert status == 400 and "you already have a dataset named 'A-blind'" in body
    assert Dataset.objects.filter(name="A-blind").count() == 2


def test_renaming_to_another_owners_name_is_allowed_and_to_ones_own_is_refused(
    researcher: User, researcher_b: User
) -> None:
    make_dataset(owner=researcher, name="A-blind", items=1)
    mine = make_dataset(owner=researcher_b, name="B-data", items=1)
    make_dataset(owner=researcher_b, name="B-other", items=1)
    dataset_update(dataset=mine, name="A-blind", owner=researcher_b, members=[])
    with pytest.raises(DatasetEditError, match="its owner already has another dataset named 'B-other'"):
        dataset_update(dataset=mine, name="B-other", owner=researcher_b, members=[])


def test_the_database_keeps_dataset_names_unique_per_owner_only(researcher: User, researcher_b: User) -> None:
    Dataset.objects.create(name="same", owner=researcher)
    Dataset.objects.create(name="same", owner=researcher_b)
    with pytest.raises(IntegrityError), transaction.atomic():
        Dataset.objects.create(name="same", owner=researcher)
    Dataset.objects.create(name="orphan", owner=None)
    with pytest.raises(IntegrityError), transaction.atomic():
        Dataset.objects.create(name="orphan", owner=None)


def test_config_versions_count_only_the_owners_own(researcher: User, researcher_b: User) -> None:
    url = reverse("api-judge-config-create")
    for expected in (1, 2):
        response = _client(researcher).post(url, {"config": _metric_config("A-rouge")}, content_type="application/json")
        assert response.status_code == 201 and response.json()["version"] == expected
    response = _client(researcher_b).post(url, {"config": _metric_config("A-rouge")}, content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["version"] == 1
    assert sorted(JudgeConfig.objects.filter(name="A-rouge").values_list("owner__username", "version")) == [
        ("researcher", 1),
        ("researcher", 2),
        ("researcher-b", 1),
    ]


def test_campaign_names_are_unique_per_dataset(researcher: User, researcher_b: User, annotator1: User) -> None:
    dataset_a = make_dataset(owner=researcher, items=1)
    dataset_b = make_dataset(owner=researcher_b, items=1)
    campaign_create(name="A-pilot", dataset=dataset_a, raters_per_item=1, annotators=[annotator1])
    campaign_create(name="A-pilot", dataset=dataset_b, raters_per_item=1, annotators=[annotator1])
    with pytest.raises(CampaignError, match="this dataset already has a campaign named 'A-pilot'"):
        campaign_create(name="A-pilot", dataset=dataset_b, raters_per_item=1, annotators=[annotator1])
    assert Campaign.objects.filter(name="A-pilot").count() == 2


def test_the_command_line_asks_for_the_owner_when_a_name_is_ambiguous(
    researcher: User, researcher_b: User, capsys: pytest.CaptureFixture[str]
) -> None:
    make_dataset(owner=researcher, name="shared-name", items=1)
    make_dataset(owner=researcher_b, name="shared-name", items=2)
    with pytest.raises(CommandError, match=r"several datasets are named 'shared-name'.*--owner"):
        call_command("export_dataset", "shared-name", "--flat", stdout=io.StringIO())
    with pytest.raises(CommandError, match="no dataset named 'shared-name' owned by 'nobody'"):
        call_command("export_dataset", "shared-name", "--owner", "nobody", stdout=io.StringIO())
    capsys.readouterr()
    call_command("export_dataset", "shared-name", "--owner", "researcher-b")
    assert len(capsys.readouterr().out.splitlines()) == 2
    out = io.StringIO()
    call_command("agreement", "shared-name", "--owner", "researcher", "--json", stdout=out)
    assert '"dataset": "shared-name"' in out.getvalue()
    # An unambiguous name still needs no owner, as before.
    make_dataset(owner=researcher, name="only-one", items=1)
    call_command("export_dataset", "only-one")
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_judge_config_names_reveal_nothing_through_the_service(researcher: User, researcher_b: User) -> None:
    services.judge_config_create(raw=_metric_config("A-secret"), owner=researcher)
    theirs = services.judge_config_create(raw=_metric_config("A-secret"), owner=researcher_b)
    assert theirs.version == 1
