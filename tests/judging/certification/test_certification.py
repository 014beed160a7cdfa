"""Judge versions, certification against a frozen reference set, and drift checks, in this process (Celery eager)
against the fake provider."""

import re
from typing import Any

import pytest
from django.db import DatabaseError, transaction

from annotations.models import Rater, Rating, RatingOrigin, Response
from judging.certification import selectors
from judging.certification.certificates import certificate_evaluate, certificate_request, certificate_suspend
from judging.certification.drift import drift_check_evaluate, drift_checks_start, drift_sample
from judging.certification.evaluations import CertificationError
from judging.certification.reference_sets import reference_set_create
from judging.models import (
    Certificate,
    CertificateStatus,
    DriftCheck,
    FrozenRowError,
    JudgeRun,
    JudgeVersion,
    Judgment,
    ReferenceRating,
    RunStatus,
)
from tests.fakeprovider import FakeProvider
from tests.judging.certification_data import SNAPSHOT, answer_with_truth, rated_dataset
from tests.judging.factories import judge_config, launch, make_dataset

pytestmark = pytest.mark.django_db


def config(fake: FakeProvider, **overrides: Any) -> dict[str, Any]:
    return judge_config(fake, name="certified-judge", max_concurrency=8, max_retries=2) | overrides


def test_a_run_records_the_provider_model_and_gets_a_version(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(default={"score": {"min": 1, "max": 5}, "served_model": SNAPSHOT})
    dataset = make_dataset(items=3, systems=2)
    run = launch(dataset, config(fake_provider), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    assert set(Judgment.objects.filter(run=run).values_list("provider_model", flat=True)) == {SNAPSHOT}
    assert run.version is not None and run.version.provider_model == SNAPSHOT
    assert re.fullmatch(r"[0-9a-f]{64}", run.version.fingerprint)
    # The same config on the same rubric, served by the same snapshot, is the same version.
    again = launch(
        dataset, config(fake_provider, name="renamed", max_concurrency=2), django_capture_on_commit_callbacks
    )
    assert again.version_id == run.version_id
    assert selectors.version_standing(run.version) == selectors.UNCERTIFIED


def test_another_snapshot_behind_the_same_alias_is_another_version(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=2, systems=2)
    fake_provider.script(default={"score": {"min": 1, "max": 5}, "served_model": SNAPSHOT})
    first = launch(dataset, config(fake_provider), django_capture_on_commit_callbacks)
    fake_provider.script(default={"score": {"min": 1, "max": 5}, "served_model": "gpt-4o-mini-2025-01-01"})
    # From the cache, the replies are the old snapshot's, and so is the version.
    cached = launch(dataset, config(fake_provider), django_capture_on_commit_callbacks)
    assert cached.version_id == first.version_id and cached.cache_hits == cached.total
    second = launch(dataset, config(fake_provider, cache=False), django_capture_on_commit_callbacks)
    assert first.version_id != second.version_id
    assert second.version is not None and second.version.provider_model == "gpt-4o-mini-2025-01-01"


def test_a_run_that_saw_two_provider_models_belongs_to_no_version(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(
        default={"score": {"min": 1, "max": 5}, "served_model": SNAPSHOT},
        rules=[{"match": "topic number 0", "behaviour": {"score": {"min": 1, "max": 5}, "served_model": "other-1"}}],
    )
    dataset = make_dataset(items=3, systems=1)
    run = launch(dataset, config(fake_provider), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    assert run.version is None
    assert "2 models" in run.version_problem and "other-1" in run.version_problem and SNAPSHOT in run.version_problem
    assert {entry["model"] for entry in fake_provider.request_log()} == {SNAPSHOT, "other-1"}
    assert run not in [r for row in selectors.versions_of_dataset(dataset) for r in row.runs]


def test_a_reference_set_is_frozen_when_named(eager: None) -> None:
    dataset = rated_dataset(items=4)
    reference = reference_set_create(dataset=dataset, name="gold", owner=None)
    before = sorted(reference.ratings.values_list("response_id", "rater_key", "value"))
    assert len(before) == 12
    rating = Rating.objects.filter(response__turn__item__dataset=dataset).order_by("pk")[0]
    rating.value = 5 if rating.value != 5 else 1
    rating.save()
    Rating.objects.filter(
        pk=Rating.objects.filter(response__turn__item__dataset=dataset).order_by("-pk")[0].pk
    ).delete()
    assert sorted(reference.ratings.values_list("response_id", "rater_key", "value")) == before
    frozen = ReferenceRating.objects.filter(reference_set=reference).order_by("pk")[0]
    frozen.value = 99
    with pytest.raises(FrozenRowError):
        frozen.save()
    # The database refuses too, whatever path the update takes.
    with pytest.raises(DatabaseError), transaction.atomic():
        ReferenceRating.objects.filter(reference_set=reference).update(value=99)
    assert sorted(reference.ratings.values_list("response_id", "rater_key", "value")) == before
    with pytest.raises(CertificationError, match="already exists"):
        reference_set_create(dataset=dataset, name="gold", owner=None)
    with pytest.raises(CertificationError, match="no human ratings"):
        reference_set_create(dataset=make_dataset(items=1), name="empty", owner=None)


def certify(dataset, fake, capture, cfg_overrides=None) -> Certificate:  # type: ignore[no-untyped-def]
    fake.script(default={"served_model": SNAPSHOT})
    fake.content_fn = answer_with_truth()
    run = launch(dataset, config(fake, **(cfg_overrides or {})), capture)
    reference = reference_set_create(dataset=dataset, name=f"gold {run.pk}", owner=None)
    assert run.version is not None
    with capture(execute=True):
        certificate = certificate_request(version=run.version, reference_set=reference, requested_by=None)
    certificate.refresh_from_db()
    return certificate


def test_certification_passes_a_judge_that_agrees_with_the_raters(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = rated_dataset()
    certificate = certify(dataset, fake_provider, django_capture_on_commit_callbacks)
    assert certificate.status == CertificateStatus.PASSED, certificate.reason
    overall = certificate.results["overall"]
    assert overall["n_answers"] == 40 and overall["n_judged"] == 40 and overall["raters_tested"] == 3
    assert overall["omega"] >= 0.5 and overall["verdict"] == "passed" and 0 <= overall["rho"] <= 1
    assert overall["epsilon"] == certificate.epsilon == 0.1
    assert certificate.fingerprint == certificate.version.fingerprint
    assert selectors.version_standing(certificate.version) == selectors.CERTIFIED
    # The certification run asked the provider again instead of reading the cache.
    assert Judgment.objects.filter(run=certificate.run, cache_hit=True).count() == 0
    # Evaluating again changes nothing: the certificate was claimed once.
    assert certificate_evaluate(certificate_id=certificate.pk) == "not claimed"


def test_changing_the_prompt_makes_a_new_version_without_the_old_certificate(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = rated_dataset()
    certificate = certify(dataset, fake_provider, django_capture_on_commit_callbacks)
    assert certificate.status == CertificateStatus.PASSED, certificate.reason
    prompt = "Grade this answer.\nQuestion: {question}\nAnswer: {answer}\n{aspect}: {scale}\nEnd with Score: N"
    changed = launch(dataset, config(fake_provider, prompt=prompt), django_capture_on_commit_callbacks)
    assert changed.status == RunStatus.SUCCEEDED, changed.notes
    assert changed.version is not None and changed.version_id != certificate.version_id
    assert certificate.run is not None
    assert selectors.version_standing(changed.version) == selectors.UNCERTIFIED
    assert not Certificate.objects.filter(version=changed.version).exists()
    standing = selectors.standing_of_judge_ids([changed.judge_id, certificate.run.judge_id])
    assert standing == {changed.judge_id: selectors.UNCERTIFIED, certificate.run.judge_id: selectors.CERTIFIED}
    assert "prompt_templates" in certification_differences(certificate.version, changed.version)


def certification_differences(old: JudgeVersion, new: JudgeVersion) -> list[str]:
    from judging.methods.fingerprint import material_differences

    return material_differences(old.material, new.material)


def test_a_judge_that_disagrees_is_not_certified(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = rated_dataset()
    fake_provider.script(default={"served_model": SNAPSHOT})
    fake_provider.content_fn = lambda body: (
        "Score: 1" if "true quality 5" in body["messages"][-1]["content"] else "Score: 5"
    )
    run = launch(dataset, config(fake_provider), django_capture_on_commit_callbacks)
    reference = reference_set_create(dataset=dataset, name="gold", owner=None)
    assert run.version is not None
    with django_capture_on_commit_callbacks(execute=True):
        certificate = certificate_request(version=run.version, reference_set=reference, requested_by=None)
    certificate.refresh_from_db()
    assert certificate.status == CertificateStatus.FAILED
    assert certificate.results["overall"]["verdict"] == "failed" and certificate.results["overall"]["omega"] < 0.5
    assert selectors.version_standing(run.version) == selectors.UNCERTIFIED


def test_pairwise_judges_cannot_be_certified(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = rated_dataset(items=4)
    version = JudgeVersion.objects.create(
        fingerprint="a" * 64, config_name="p", provider_model="m", material={}, config_snapshot={"method": "pairwise"}
    )
    reference = reference_set_create(dataset=dataset, name="gold", owner=None)
    with pytest.raises(CertificationError, match="pairwise judge cannot be certified"):
        certificate_request(version=version, reference_set=reference, requested_by=None)
    assert not Certificate.objects.exists()


def test_drift_check_suspends_when_the_provider_switches_its_model(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    dataset = rated_dataset()
    certificate = certify(dataset, fake_provider, django_capture_on_commit_callbacks)
    assert certificate.status == CertificateStatus.PASSED, certificate.reason
    fake_provider.script(default={"served_model": "gpt-4o-mini-2025-06-30"})
    from django.conf import settings as django_settings

    from evalsite.celery import app
    from judging.tasks import drift_checks_start

    # The periodic task of the beat schedule, with its sample size from the settings.
    schedule = {entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}
    assert "judging.drift_checks_start" in schedule and "judging.drift_checks_start" in app.tasks
    settings.JUDGE_DRIFT_SAMPLE_SIZE = 10
    with django_capture_on_commit_callbacks(execute=True):
        assert drift_checks_start.delay().get() == 1
    certificate.refresh_from_db()
    assert certificate.status == CertificateStatus.SUSPENDED
    assert "gpt-4o-mini-2025-06-30" in certificate.suspension_reason and SNAPSHOT in certificate.suspension_reason
    check = DriftCheck.objects.get(certificate=certificate)
    assert check.drifted is True and check.sample_size == 10 and check.outcome["seed"] == check.seed
    assert drift_check_evaluate(check_id=check.pk) == "not claimed"  # safe twice
    assert check.outcome["provider_models"] == ["gpt-4o-mini-2025-06-30"]
    # The fake's own log shows the switch: the certified snapshot first, the new one in the drift check's requests.
    served = [entry["model"] for entry in fake_provider.request_log()]
    assert served[-10:] == ["gpt-4o-mini-2025-06-30"] * 10 and SNAPSHOT in served
    assert selectors.version_standing(certificate.version) == selectors.SUSPENDED
    assert selectors.suspension_notices(certificate.requested_by or _anonymous()) == []


def _anonymous() -> Any:
    from django.contrib.auth.models import AnonymousUser

    return AnonymousUser()


def test_drift_check_suspends_when_scores_move_and_not_when_they_hold(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = rated_dataset()
    certificate = certify(dataset, fake_provider, django_capture_on_commit_callbacks)
    assert certificate.status == CertificateStatus.PASSED, certificate.reason
    with django_capture_on_commit_callbacks(execute=True):
        assert drift_checks_start(sample_size=12, seed=3) == 1
    steady = DriftCheck.objects.get(certificate=certificate)
    assert steady.drifted is False, steady.outcome
    assert steady.outcome["aspects"]["overall"]["n_nonzero"] == 0
    certificate.refresh_from_db()
    assert certificate.status == CertificateStatus.PASSED
    # Same snapshot, but every answer now scores one point lower (or higher at the bottom of the scale).
    fake_provider.content_fn = lambda body: answer_with_truth(-1)(body).replace("Score: 0", "Score: 2")
    with django_capture_on_commit_callbacks(execute=True):
        assert drift_checks_start(sample_size=20, seed=4) == 1
    moved = DriftCheck.objects.exclude(pk=steady.pk).get(certificate=certificate)
    certificate.refresh_from_db()
    assert moved.drifted is True
    assert certificate.status == CertificateStatus.SUSPENDED
    assert "Wilcoxon signed-rank" in certificate.suspension_reason and "overall" in certificate.suspension_reason
    assert moved.outcome["decision"]["alpha"] == 0.05
    # A suspended certificate is no longer in use for drift checks.
    with django_capture_on_commit_callbacks(execute=True):
        assert drift_checks_start(sample_size=12, seed=5) == 0


def test_drift_sample_is_reproducible_from_its_seed() -> None:
    ids = list(range(100, 200))
    first = drift_sample(ids, seed=11, size=15)
    assert first == drift_sample(ids, seed=11, size=15)
    assert first != drift_sample(ids, seed=12, size=15)
    assert len(set(first)) == 15 and set(first) <= set(ids)
    assert drift_sample(ids[:5], seed=1, size=15) == ids[:5]


def test_the_release_gate_reads_stored_certificates(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    from judging.analysis.gate import FAIL, PASS, gate_evaluate

    dataset = rated_dataset()
    certificate = certify(dataset, fake_provider, django_capture_on_commit_callbacks)
    assert certificate.status == CertificateStatus.PASSED, certificate.reason
    used = JudgeRun.objects.filter(version=certificate.version, certificate__isnull=True).get()
    rule = {"kind": "judge_certified", "judge": used.judge.name, "aspects": ["overall"]}
    [passed] = gate_evaluate({dataset.name: dataset}, [rule], default_dataset=dataset.name)
    assert passed.outcome == PASS and f"certificate {certificate.pk}" in passed.reason
    assert passed.evidence["overall"]["fingerprint"] == certificate.fingerprint
    certificate_suspend(certificate_id=certificate.pk, reason="the provider now reports model Z")
    [failed] = gate_evaluate({dataset.name: dataset}, [rule], default_dataset=dataset.name)
    assert failed.outcome == FAIL and "suspended: the provider now reports model Z" in failed.reason


def test_a_campaign_reference_set_holds_its_annotators_ratings_outside_gold_tasks(eager: None) -> None:
    from django.contrib.auth.models import User

    from annotations.models import Campaign, Task

    dataset = rated_dataset(items=4)
    aspect = dataset.aspects.get(name="overall")
    annotators = [User.objects.create_user(username=f"campaign-annotator-{n}") for n in range(2)]
    stranger = User.objects.create_user(username="not-in-the-campaign")
    campaign = Campaign.objects.create(name="study", dataset=dataset)
    campaign.aspects.add(aspect)
    campaign.annotators.add(*annotators)
    responses = list(Response.objects.filter(turn__item__dataset=dataset).order_by("turn__item__position"))
    for position, response in enumerate(responses):
        task = Task.objects.create(campaign=campaign, turn=response.turn, position=position, is_gold=position == 3)
        task.responses.add(response)
    for user in [*annotators, stranger]:
        rater = Rater.objects.create(dataset=dataset, user=user, pseudonym=user.username)
        for response in responses:
            Rating.objects.create(
                response=response, aspect=aspect, rater=rater, value=4, raw=4, origin=RatingOrigin.APP
            )
    reference = reference_set_create(dataset=dataset, name="study set", owner=None, campaign=campaign)
    frozen = set(reference.ratings.values_list("response_id", "rater_key"))
    expected = {(response.pk, user.username) for response in responses[:3] for user in annotators}
    assert frozen == expected and reference.campaign == campaign
    imported_only = reference_set_create(dataset=dataset, name="imported", owner=None, origin="import")
    assert imported_only.ratings.count() == 12
    assert set(imported_only.ratings.values_list("rater_key", flat=True)) == {"rater-0", "rater-1", "rater-2"}
