"""The annotate benchmark's floor view: mounted only by the benchmark's URL configuration, refused in production, and
as secure as the annotator API it is measured against."""

import subprocess
import sys

import pytest
from django.test import override_settings
from django.urls import NoReverseMatch, reverse
from rest_framework.test import APIClient

from annotations.models import Assignment, AssignmentStatus, Submission
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotate.test_annotator_api import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def campaign(researcher, annotators):  # type: ignore[no-untyped-def]
    return make_campaign(make_dataset(owner=researcher, items=2), annotators, name="floor", raters_per_item=2)


def floor_url(campaign) -> str:  # type: ignore[no-untyped-def]
    return reverse("bench-floor-submit", args=[campaign.pk], urlconf="bench.floor_urls")


def test_the_product_urls_do_not_mount_the_floor(campaign) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(NoReverseMatch):
        reverse("bench-floor-submit", args=[campaign.pk])


@override_settings(ROOT_URLCONF="bench.floor_urls")
def test_floor_claims_one_free_slot_per_task_and_stores_one_row(campaign, annotator1) -> None:  # type: ignore[no-untyped-def]
    client = token_client(annotator1)
    stored = []
    for key in ("floor-key-0001", "floor-key-0002"):
        response = client.post(floor_url(campaign), {"idempotency_key": key}, format="json")
        assert response.status_code == 201
        stored.append(response.json()["stored"])
    submissions = Submission.objects.filter(pk__in=stored).select_related("assignment")
    assert sorted(s.idempotency_key for s in submissions) == ["floor-key-0001", "floor-key-0002"]
    slots = [s.assignment for s in submissions]
    assert {slot.annotator_id for slot in slots} == {annotator1.pk}
    assert {slot.status for slot in slots} == {AssignmentStatus.SUBMITTED}
    assert len({slot.task_id for slot in slots}) == 2  # never two slots of one task
    # Both tasks hold a slot of this annotator now: nothing is left for them.
    assert client.post(floor_url(campaign), {"idempotency_key": "floor-key-0003"}, format="json").status_code == 204
    assert Assignment.objects.filter(annotator=annotator1).count() == 2


@override_settings(ROOT_URLCONF="bench.floor_urls")
def test_floor_refuses_wrong_method_strangers_and_bad_keys(campaign, annotator1, outsider) -> None:  # type: ignore[no-untyped-def]
    url = floor_url(campaign)
    assert token_client(annotator1).get(url).status_code == 405
    assert APIClient().post(url, {"idempotency_key": "floor-key-0001"}, format="json").status_code == 403
    refused = token_client(outsider).post(url, {"idempotency_key": "floor-key-0001"}, format="json")
    assert refused.status_code == 403
    bad = token_client(annotator1).post(url, {"idempotency_key": "x"}, format="json")
    assert bad.status_code == 400
    assert "idempotency_key" in bad.json()["detail"]
    assert not Submission.objects.exists()
    assert not Assignment.objects.filter(annotator__isnull=False).exists()


def test_production_refuses_the_floor() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='evalsite.settings'; django.setup()",
        ],
        env={
            "EVALSITE_PRODUCTION": "true",
            "SECRET_KEY": "a-secret-key-for-this-test-only-0123456789-abcdefghijklmnop",
            "EVALSITE_BENCH_FLOOR": "true",
            "PATH": "/usr/bin:/bin",
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "EVALSITE_BENCH_FLOOR" in result.stderr
