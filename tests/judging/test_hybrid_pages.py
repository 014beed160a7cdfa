"""The hybrid settings page and the progress page's hybrid panel: success, wrong method, no access (anonymous,
annotator, another researcher), CSRF, the refusal shown on the page, and the panel's figures after applying."""

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotations.models import Assignment, AssignmentStatus
from judging.models import HybridApplyStatus, HybridCalibration
from tests.conftest import client_for
from tests.fakeprovider import FakeProvider
from tests.judging.test_hybrid import DELTA, MIN_KEPT, TARGET, campaign_of, certified

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks, annotators, researcher):  # type: ignore[no-untyped-def]
    dataset, certificate = certified(fake_provider, django_capture_on_commit_callbacks)
    dataset.owner = researcher
    dataset.save(update_fields=["owner"])
    return campaign_of(dataset, annotators), certificate


def form_data(certificate, **overrides):  # type: ignore[no-untyped-def]
    return {"version": certificate.version_id, "target": TARGET, "delta": DELTA, "min_kept": MIN_KEPT, **overrides}


def assert_post_refused(url: str, data: dict[str, object], annotator: User, other_researcher: User) -> None:
    """Anonymous people go to the login page, an annotator gets 403 and another researcher 404."""
    assert client_for(None).post(url, data).status_code == 302
    assert client_for(annotator).post(url, data).status_code == 403
    assert client_for(other_researcher).post(url, data).status_code == 404


def test_settings_page_access_and_methods(setup, researcher, annotator1, other_researcher) -> None:  # type: ignore[no-untyped-def]
    campaign, certificate = setup
    url = reverse("research-campaign-hybrid", args=[campaign.pk])
    page = client_for(researcher).get(url)
    assert page.status_code == 200
    assert certificate.version.short in page.content.decode() and "Every task goes to the human raters" in (
        page.content.decode()
    )
    assert client_for(researcher).post(url).status_code == 405
    assert client_for(None).get(url).status_code == 302
    assert client_for(annotator1).get(url).status_code == 403
    assert client_for(other_researcher).get(url).status_code == 404
    calibrate = reverse("research-campaign-hybrid-calibrate", args=[campaign.pk])
    assert client_for(researcher).get(calibrate).status_code == 405
    assert_post_refused(calibrate, form_data(certificate), annotator1, other_researcher)
    assert not HybridCalibration.objects.exists()
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(researcher)
    assert strict.post(calibrate, form_data(certificate)).status_code == 403


def test_calibrate_and_apply_through_the_pages(  # type: ignore[no-untyped-def]
    setup, researcher, annotator1, django_capture_on_commit_callbacks
) -> None:
    campaign, certificate = setup
    client = client_for(researcher)
    calibrate = reverse("research-campaign-hybrid-calibrate", args=[campaign.pk])
    bad = client.post(calibrate, form_data(certificate, target=1.5))
    assert bad.status_code == 400 and not HybridCalibration.objects.exists()
    done = client.post(calibrate, form_data(certificate), follow=True)
    assert done.status_code == 200 and "Calibrated" in done.content.decode()
    calibration = HybridCalibration.objects.get(campaign=campaign)
    apply = reverse("research-campaign-hybrid-apply", args=[campaign.pk, calibration.pk])
    assert client.get(apply).status_code == 405
    assert client_for(annotator1).post(apply).status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(apply).status_code == 302
    calibration.refresh_from_db()
    assert calibration.apply_status == HybridApplyStatus.DONE
    judged = calibration.judged_tasks
    progress = client.get(reverse("campaign-progress", args=[campaign.pk])).content.decode()
    assert f"{judged} of 60 tasks" in progress
    assert f"{Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.JUDGED).count()} ratings" in progress
    assert f"n = {calibration.n}" in progress
    assert progress.count("rated by the judge") == judged  # the task table marks each of them
    overview = client.get(reverse("dashboard-overview", args=[campaign.dataset_id])).content.decode()
    assert f"0 / {2 * (60 - judged)} (0.0%)" in overview and f"{2 * judged} slots rated by the judge" in overview
    again = client.post(apply, follow=True)
    assert "already" in again.content.decode()


def test_refusal_is_shown_on_the_page(setup, researcher) -> None:  # type: ignore[no-untyped-def]
    campaign, certificate = setup
    from judging.certification.certificates import certificate_suspend

    certificate_suspend(certificate_id=certificate.pk, reason="drifted on purpose")
    response = client_for(researcher).post(
        reverse("research-campaign-hybrid-calibrate", args=[campaign.pk]), form_data(certificate)
    )
    assert response.status_code == 400
    assert "drifted on purpose" in response.content.decode()
    assert not HybridCalibration.objects.exists()


def sampling_data(campaign, **overrides):  # type: ignore[no-untyped-def]
    return {
        "human_sampling": "uncertainty",
        "human_share": 0.5,
        "sampling_stratum": "confidence",
        "stop_rule": "width",
        "stop_aspect": campaign.aspects.get().pk,
        "stop_first": "llm_a",
        "stop_second": "",
        "stop_width": 0.5,
        **overrides,
    }


def test_sampling_and_stopping_rule_through_the_page(  # type: ignore[no-untyped-def]
    setup, researcher, annotator1, other_researcher, django_capture_on_commit_callbacks
) -> None:
    campaign, certificate = setup
    client = client_for(researcher)
    url = reverse("research-campaign-hybrid-sampling", args=[campaign.pk])
    assert client.get(url).status_code == 405
    assert_post_refused(url, sampling_data(campaign), annotator1, other_researcher)
    bad = client.post(url, sampling_data(campaign, stop_width=""))
    assert bad.status_code == 400 and "needs the largest width" in bad.content.decode()
    assert client.post(url, sampling_data(campaign, human_share=0)).status_code == 400
    assert client.post(url, sampling_data(campaign, sampling_stratum="prompt")).status_code == 400
    # "certified" needs only its aspect; without one the page names the problem.
    no_aspect = client.post(url, sampling_data(campaign, stop_rule="certified", stop_aspect=""))
    assert no_aspect.status_code == 400 and "needs the aspect" in no_aspect.content.decode()
    campaign.refresh_from_db()
    assert campaign.stop_rule == "" and campaign.human_sampling == ""
    with django_capture_on_commit_callbacks(execute=True):
        saved = client.post(url, sampling_data(campaign), follow=True)
    assert saved.status_code == 200 and "Sampling policy and stopping rule saved" in saved.content.decode()
    campaign.refresh_from_db()
    assert (
        campaign.human_sampling,
        campaign.human_share,
        campaign.sampling_stratum,
        campaign.stop_rule,
        campaign.stop_width,
    ) == (
        "uncertainty",
        0.5,
        "confidence",
        "width",
        0.5,
    )
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("research-campaign-hybrid-calibrate", args=[campaign.pk]), form_data(certificate))
        calibration = HybridCalibration.objects.get(campaign=campaign)
        client.post(reverse("research-campaign-hybrid-apply", args=[campaign.pk, calibration.pk]))
    progress = client.get(reverse("campaign-progress", args=[campaign.pk])).content.decode()
    assert 'id="active-estimates"' in progress and "valid only at the planned size" in progress
    assert 'id="stopping-pending"' in progress and "width &lt;= 0.5" in progress
