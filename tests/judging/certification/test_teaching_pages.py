"""Teaching from the certification page and from `manage.py teach_judge`: success, wrong method and no access."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse

from judging.certification.reference_sets import reference_set_create
from judging.models import JudgeRun, JudgeTeaching, TeachingDecision
from tests.conftest import client_for
from tests.fakeprovider import FakeProvider
from tests.judging.certification_data import rated_dataset, versioned_run_in_process
from tests.judging.teaching_data import learns_from_examples

pytestmark = pytest.mark.django_db


def judged_dataset(owner: User, fake: FakeProvider, capture: Any) -> tuple[Any, JudgeRun]:
    dataset = rated_dataset()
    dataset.owner = owner
    dataset.save(update_fields=["owner"])
    run = versioned_run_in_process(dataset, fake, capture, name="page-taught", content_fn=learns_from_examples())
    return dataset, run


def test_teaching_from_the_page(
    researcher: User,
    other_researcher: User,
    annotator: User,
    fake_provider: FakeProvider,
    eager: None,
    django_capture_on_commit_callbacks,
) -> None:  # type: ignore[no-untyped-def]
    dataset, run = judged_dataset(researcher, fake_provider, django_capture_on_commit_callbacks)
    assert run.version is not None
    reference = reference_set_create(dataset=dataset, name="gold", owner=researcher)
    url = reverse("dashboard-teach", args=[dataset.pk])
    data = {
        "teach-version": run.version.fingerprint,
        "teach-reference_set": str(reference.pk),
        "teach-per_level": "2",
        "teach-seed": "4",
        "teach-alpha": "0.05",
    }
    page = client_for(researcher).get(reverse("dashboard-certification", args=[dataset.pk])).content.decode()
    assert "Teach a judge version from human ratings" in page and "No teaching yet." in page
    assert client_for(researcher).get(url).status_code == 405
    assert client_for(annotator).post(url, data).status_code == 403
    assert client_for(other_researcher).post(url, data).status_code == 404
    anonymous = client_for(None).post(url, data)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    bad = client_for(researcher).post(url, {**data, "teach-per_level": "0"})
    assert bad.status_code == 400
    refused = client_for(researcher).post(url, {**data, "teach-per_level": "10"})
    assert refused.status_code == 400 and "held-out answers" in refused.content.decode()
    assert not JudgeTeaching.objects.exists()

    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(researcher).post(url, data)
    assert response.status_code == 302
    teaching = JudgeTeaching.objects.get()
    assert teaching.decision == TeachingDecision.KEPT and teaching.requested_by == researcher
    assert teaching.seed == 4 and teaching.per_level == 2
    page = client_for(researcher).get(reverse("dashboard-certification", args=[dataset.pk])).content.decode()
    assert teaching.taught_version is not None and teaching.taught_version.short in page
    assert "n = 30" in page and "kept" in page


def test_teach_judge_command(
    researcher: User, fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks, capsys
) -> None:  # type: ignore[no-untyped-def]
    dataset, run = judged_dataset(researcher, fake_provider, django_capture_on_commit_callbacks)
    reference_set_create(dataset=dataset, name="cli gold", owner=None)
    arguments = ["--dataset", dataset.name, "--judge", run.judge.name, "--reference-set", "cli gold"]
    with django_capture_on_commit_callbacks(execute=True):
        call_command("teach_judge", *arguments, "--per-level", "1")
    out = capsys.readouterr().out
    assert "overall: 5 example(s); levels without one: none" in out
    assert "both versions judge 35 held-out answers" in out
    teaching = JudgeTeaching.objects.get()
    # The command returns before the runs are handed to the workers (when its transaction commits).
    assert f"teaching {teaching.pk}: running" in out
    teaching.refresh_from_db()
    assert teaching.decision == TeachingDecision.KEPT and "n = 35" in teaching.reason
    # With --wait it polls for the decision; nothing is committed in this test, so none comes, and it says so.
    call_command("teach_judge", *arguments, "--wait", "1")
    waiting = JudgeTeaching.objects.exclude(pk=teaching.pk).get()
    assert f"teaching {waiting.pk}: running" in capsys.readouterr().out
    with pytest.raises(CommandError, match="no reference set named"):
        call_command("teach_judge", "--dataset", dataset.name, "--judge", run.judge.name, "--reference-set", "x")
    with pytest.raises(CommandError, match="no judge run named"):
        call_command("teach_judge", "--dataset", dataset.name, "--judge", "nobody", "--reference-set", "cli gold")
    with pytest.raises(CommandError, match="between 1 and 10"):
        call_command("teach_judge", *arguments, "--per-level", "11")
