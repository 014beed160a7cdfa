"""The certification page, its two actions, the certification labels on the judges page, its table and the API, and
`manage.py certify`: success, wrong method and no access."""

import csv
import io
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from judging.certification.certificates import certificate_suspend
from judging.certification.reference_sets import reference_set_create
from judging.models import Certificate, CertificateStatus, JudgeRun, ReferenceSet
from tests.conftest import client_for
from tests.fakeprovider import FakeProvider
from tests.judging.certification_data import SNAPSHOT, answer_with_truth, rated_dataset, versioned_run_in_process

pytestmark = pytest.mark.django_db


def owned_dataset(owner: User) -> Any:
    dataset = rated_dataset()
    dataset.owner = owner
    dataset.save(update_fields=["owner"])
    return dataset


def judged(dataset: Any, fake: FakeProvider, capture: Any) -> JudgeRun:
    run = versioned_run_in_process(dataset, fake, capture, name="page-judge", content_fn=answer_with_truth())
    return run


def urls(dataset: Any) -> dict[str, str]:
    return {
        "page": reverse("dashboard-certification", args=[dataset.pk]),
        "name": reverse("dashboard-reference-set-name", args=[dataset.pk]),
        "certify": reverse("dashboard-certify", args=[dataset.pk]),
    }


def test_page_access_and_method(researcher: User, other_researcher: User, annotator: User) -> None:
    dataset = owned_dataset(researcher)
    url = urls(dataset)["page"]
    page = client_for(researcher).get(url)
    assert page.status_code == 200
    assert "Name a reference set" in page.content.decode()
    assert client_for(researcher).post(url).status_code == 405
    anonymous = client_for(None).get(url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    assert client_for(annotator).get(url).status_code == 403
    assert client_for(other_researcher).get(url).status_code == 404


def test_naming_a_reference_set(researcher: User, other_researcher: User, annotator: User) -> None:
    dataset = owned_dataset(researcher)
    url = urls(dataset)["name"]
    data = {"reference-name": "gold set", "reference-source": "import"}
    assert client_for(researcher).get(url).status_code == 405
    assert client_for(annotator).post(url, data).status_code == 403
    assert client_for(other_researcher).post(url, data).status_code == 404
    assert client_for(None).post(url, data).status_code == 302
    assert not ReferenceSet.objects.exists()
    response = client_for(researcher).post(url, data)
    assert response.status_code == 302 and response["Location"] == urls(dataset)["page"]
    reference = ReferenceSet.objects.get(dataset=dataset)
    assert reference.name == "gold set" and reference.owner == researcher and reference.ratings.count() == 120
    again = client_for(researcher).post(url, data)
    assert again.status_code == 400 and "already exists" in again.content.decode()
    assert ReferenceSet.objects.count() == 1


def test_csrf_is_enforced_on_the_actions(researcher: User) -> None:
    dataset = owned_dataset(researcher)
    client = Client(enforce_csrf_checks=True)
    client.force_login(researcher)
    response = client.post(urls(dataset)["name"], {"reference-name": "x", "reference-source": "all"})
    assert response.status_code == 403 and not ReferenceSet.objects.exists()


def test_certifying_from_the_page_labels_the_judge_everywhere(
    researcher: User,
    other_researcher: User,
    annotator: User,
    fake_provider: FakeProvider,
    eager: None,
    django_capture_on_commit_callbacks,
) -> None:  # type: ignore[no-untyped-def]
    dataset = owned_dataset(researcher)
    run = judged(dataset, fake_provider, django_capture_on_commit_callbacks)
    assert run.version is not None
    judges_page = client_for(researcher).get(reverse("dashboard-judges", args=[dataset.pk]), {"judge": run.judge.name})
    assert judges_page.content.decode().count('class="badge uncertified"') >= 2  # the table and the panel heading
    reference = reference_set_create(dataset=dataset, name="gold", owner=researcher)
    url = urls(dataset)["certify"]
    data = {"version": run.version.fingerprint, "reference_set": str(reference.pk), "epsilon": "0.2", "q": "0.05"}
    assert client_for(researcher).get(url).status_code == 405
    assert client_for(annotator).post(url, data).status_code == 403
    assert client_for(other_researcher).post(url, data).status_code == 404
    assert not Certificate.objects.exists()
    bad = client_for(researcher).post(url, {**data, "epsilon": "1.5"})
    assert bad.status_code == 400 and not Certificate.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(researcher).post(url, data)
    assert response.status_code == 302
    certificate = Certificate.objects.get()
    assert certificate.status == CertificateStatus.PASSED and certificate.requested_by == researcher

    page = client_for(researcher).get(urls(dataset)["page"]).content.decode()
    assert 'class="badge certified"' in page and certificate.version.short in page
    omega = f"{certificate.results['overall']['omega']:.2f}"
    assert f"<td>{omega}</td>" in page
    judges_page = client_for(researcher).get(reverse("dashboard-judges", args=[dataset.pk]), {"judge": run.judge.name})
    assert 'class="badge certified"' in judges_page.content.decode()
    overview = client_for(researcher).get(reverse("dashboard-overview", args=[dataset.pk])).content.decode()
    assert overview.count('class="badge certified"') == 2  # the judged run and the certification run
    table = client_for(researcher).get(reverse("dashboard-dataset-table", args=[dataset.pk, "judges", "csv"]))
    rows = list(csv.DictReader(io.StringIO(table.content.decode())))
    standing = {row["judge"]: row["certification"] for row in rows}
    assert standing[run.judge.name] == "certified"
    assert standing[certificate.run.judge.name] == "certified"  # type: ignore[union-attr]
    api = client_for(researcher).get(
        reverse("api-stats-alt-test", args=[dataset.pk]), {"judge": run.judge.name, "aspect": "overall"}
    )
    assert api.status_code == 200
    assert api.json()["certification"] == {"standing": "certified", "version": run.version.fingerprint}
    detail = client_for(researcher).get(reverse("api-judge-run-detail", args=[run.pk])).json()
    assert detail["version"] == run.version.fingerprint and detail["certification"] == "certified"
    judgments = client_for(researcher).get(reverse("api-judge-run-judgments", args=[run.pk])).json()
    listed = judgments["results"] if isinstance(judgments, dict) else judgments
    assert {row["provider_model"] for row in listed} == {SNAPSHOT}

    # A suspension is told to the researcher who asked for the certificate, on the page, with its reason.
    certificate_suspend(certificate_id=certificate.pk, reason="the provider now reports model X")
    page = client_for(researcher).get(urls(dataset)["page"]).content.decode()
    assert 'role="alert"' in page and "the provider now reports model X" in page
    assert 'class="badge suspended"' in page
    judges_page = client_for(researcher).get(reverse("dashboard-judges", args=[dataset.pk]), {"judge": run.judge.name})
    assert 'class="badge suspended"' in judges_page.content.decode()


def test_certify_command(
    researcher: User, fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks, capsys
) -> None:  # type: ignore[no-untyped-def]
    dataset = owned_dataset(researcher)
    run = judged(dataset, fake_provider, django_capture_on_commit_callbacks)
    call_command("certify", "reference-set", "--dataset", dataset.name, "--name", "cli gold", "--origin", "import")
    assert "frozen with 120 ratings" in capsys.readouterr().out
    with django_capture_on_commit_callbacks(execute=True):
        call_command(
            "certify", "version", "--dataset", dataset.name, "--judge", run.judge.name, "--reference-set", "cli gold"
        )
    out = capsys.readouterr().out
    assert "certificate" in out
    call_command("certify", "status", "--dataset", dataset.name)
    status = capsys.readouterr().out
    assert f"[{run.version.short}]" in status and ": certified, 2 run(s)" in status and "omega" in status  # type: ignore[union-attr]
    with pytest.raises(CommandError, match="no reference set named"):
        call_command("certify", "version", "--dataset", dataset.name, "--judge", run.judge.name, "--reference-set", "x")
    with pytest.raises(CommandError, match="already exists"):
        call_command("certify", "reference-set", "--dataset", dataset.name, "--name", "cli gold")
