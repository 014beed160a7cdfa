"""The English a researcher still met in Japanese mode: the import page's title, the judge run page's title, status
and fallback note, a run's status on the dataset overview, and the campaign form. Their words are also stored data
(a run's status, a campaign's field names), which is why the page-wide sweep of test_japanese_pages let them pass."""

import pytest
from django.test import Client

from judging.models import JudgeRun, RunStatus
from judging.selectors import judge_run_logprob_fallback_note
from tests.security.world import FullWorld

pytestmark = pytest.mark.django_db


def japanese(world: FullWorld) -> Client:
    client = Client(HTTP_ACCEPT_LANGUAGE="ja")
    client.force_login(world.roles["researcher"])
    return client


def test_the_pages_a_researcher_reported_have_no_english_left(full_world: FullWorld) -> None:
    run: JudgeRun = full_world.run
    JudgeRun.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED, logprob_fallbacks=2, sampled_fallbacks=2)
    run.refresh_from_db()
    english_note = judge_run_logprob_fallback_note(run)
    assert english_note.startswith("Log-probabilities were unavailable")
    JudgeRun.objects.filter(pk=run.pk).update(notes=english_note)
    client = japanese(full_world)

    page = client.get("/admin/annotations/dataset/import/").content.decode()
    assert "Import a JSONL dataset" not in page and "JSONL データセットの読み込み" in page

    page = client.get(f"/admin/judging/judgerun/{run.pk}/change/").content.decode()
    assert f"Judge run {run.name}" not in page
    assert "<strong>succeeded</strong>" not in page and "<strong>成功</strong>" in page
    assert "Log-probabilities were unavailable" not in page and "対数確率" in page

    page = client.get(f"/dashboard/{full_world.dataset.pk}/overview/").content.decode()
    assert "Succeeded" not in page and "成功" in page

    page = client.get("/admin/annotations/campaign/add/").content.decode()
    for english in ("What annotators see", "Raters per item", "Leave empty to show every aspect", "Annotator pool"):
        assert english not in page, english
    assert "アノテーターに見せるもの" in page
