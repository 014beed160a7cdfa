"""Japanese from the browser's Accept-Language or from the language switch; English otherwise."""

import pytest
from django.test import Client
from django.urls import reverse

from annotations.campaigns.claims import assignment_claim
from tests.annotate.factories import make_campaign, make_dataset
from tests.conftest import CAST_PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def task_url(researcher, annotator1) -> str:
    campaign = make_campaign(make_dataset(owner=researcher, items=1), [annotator1], raters_per_item=1)
    lease = assignment_claim(campaign=campaign, user=annotator1)
    return reverse("annotate-task", args=[campaign.pk, lease.task_id])


def test_browser_language_picks_japanese(task_url, annotator1):
    client = Client(HTTP_ACCEPT_LANGUAGE="ja,en;q=0.5")
    client.login(username=annotator1.username, password=CAST_PASSWORD)
    body = client.get(task_url).content.decode()
    assert '<html lang="ja">' in body
    assert "候補 1" in body and "キーボードショートカット" in body and "送信して次のタスクへ" in body
    assert "適切な候補はないが、選ぶとすれば…" in body


def test_language_switch_persists(task_url, annotator1):
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.login(username=annotator1.username, password=CAST_PASSWORD)
    assert "Candidate 1" in client.get(task_url).content.decode()
    response = client.post(reverse("set_language"), {"language": "ja", "next": task_url})
    assert response.status_code == 302 and response["Location"] == task_url
    assert "候補 1" in client.get(task_url).content.decode()


def test_validation_messages_are_translated(task_url, annotator1):
    client = Client(HTTP_ACCEPT_LANGUAGE="ja")
    client.login(username=annotator1.username, password=CAST_PASSWORD)
    body = client.post(task_url + "submit/", {"idempotency_key": "ja-key-0001"}).content.decode()
    assert "候補 1：Factuality の値を選んでください。" in body and "件の問題を修正してください" in body
