"""FActScore pages and API: success, wrong method, no access; blinding of the review page."""

import io

import pytest
from django.test import Client
from django.urls import reverse

from judging.factscore import services
from judging.factscore.models import FactAnswer, FactLabel, KnowledgeCorpus
from tests.conftest import login
from tests.factscore.corpora import ENGLISH_DOCUMENTS, as_jsonl
from tests.factscore.factories import make_fact_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def campaign(run, annotator1, annotator2):  # type: ignore[no-untyped-def]
    return services.fact_review_campaign_create(
        name="views", run=run, raters_per_answer=2, annotators=[annotator1, annotator2]
    )


def open_task(client: Client, campaign) -> str:  # type: ignore[no-untyped-def]
    response = client.post(reverse("factscore:review-next", args=[campaign.pk]))
    assert response.status_code == 302
    return response["Location"]


# --- researcher pages ---------------------------------------------------------------------------


def test_report_page(run, researcher, other_researcher, outsider) -> None:  # type: ignore[no-untyped-def]
    url = reverse("factscore:report", args=[run.pk])
    page = login(researcher).get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "alpha" in html and "0.500" in html and "66.7" in html and "en_sorry" in html
    assert login(researcher).post(url).status_code == 405
    assert login(other_researcher).get(url).status_code == 404
    assert login(outsider).get(url).status_code == 403
    assert Client().get(url).status_code == 302
    assert login(researcher).get(reverse("factscore:report", args=[run.pk + 1000])).status_code == 404


def test_answer_drilldown_shows_facts_verdicts_and_evidence(run, researcher, other_researcher, annotator1) -> None:  # type: ignore[no-untyped-def]
    answer = FactAnswer.objects.get(
        run=run, response__system__key="alpha", response__turn__item__external_id="lovelace"
    )
    url = reverse("factscore:answer", args=[answer.pk])
    page = login(researcher).get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Ada Lovelace was born in Paris." in html and "false" in html and "London in 1815" in html
    assert login(researcher).post(url).status_code == 405
    assert login(other_researcher).get(url).status_code == 404
    assert login(annotator1).get(url).status_code == 403


def test_report_api(run, researcher, other_researcher, annotator1) -> None:  # type: ignore[no-untyped-def]
    url = reverse("factscore:api-report", args=[run.pk])
    data = login(researcher).get(url + "?answers=1").json()
    assert data["systems"][0]["factscore"] == pytest.approx(0.5) and len(data["answers"]) == 6
    assert login(researcher).post(url).status_code == 405
    assert login(other_researcher).get(url).status_code == 404
    assert login(annotator1).get(url).status_code == 403
    assert Client().get(url).status_code in (401, 403)


def test_corpus_api_lists_and_uploads(researcher, other_researcher, annotator1) -> None:  # type: ignore[no-untyped-def]
    dataset = make_fact_dataset(owner=researcher, with_corpus=False)
    url = reverse("factscore:api-corpora", args=[dataset.pk])
    client = login(researcher)
    upload = io.BytesIO(as_jsonl(ENGLISH_DOCUMENTS).encode())
    upload.name = "wiki.jsonl"
    created = client.post(url, {"name": "wiki", "file": upload, "passage_tokens": 64})
    assert created.status_code == 201, created.content
    assert created.json()["n_documents"] == 3
    assert [c["name"] for c in client.get(url).json()] == ["wiki"]
    bad = io.BytesIO(b'{"id": "x"}\n')
    bad.name = "bad.jsonl"
    refused = client.post(url, {"name": "bad", "file": bad})
    assert refused.status_code == 400 and "line 1" in refused.json()["detail"]
    assert KnowledgeCorpus.objects.filter(dataset=dataset).count() == 1
    assert client.delete(url).status_code == 405
    assert login(other_researcher).get(url).status_code == 404
    assert login(annotator1).get(url).status_code == 403


# --- review pages -------------------------------------------------------------------------------


def test_review_home_lists_only_my_campaigns(campaign, annotator1, annotator3) -> None:  # type: ignore[no-untyped-def]
    url = reverse("factscore:review-home")
    assert "views" in login(annotator1).get(url).content.decode()
    assert "views" not in login(annotator3).get(url).content.decode()
    assert login(annotator1).post(url).status_code == 405
    assert Client().get(url).status_code == 302


def test_next_and_task_page_are_blinded(campaign, annotator1, annotator2, annotator3) -> None:  # type: ignore[no-untyped-def]
    client = login(annotator1)
    task_url = open_task(client, campaign)
    page = client.get(task_url)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="label-' in html and "js/factscore.js" in html
    for secret in ("alpha", "beta", "P(true)", "gpt-4o-mini", campaign.run.judge.name):
        assert secret not in html
    assert "<script>" not in html and "style=" not in html
    assert client.post(task_url).status_code == 405
    assert login(annotator2).get(task_url).status_code == 404  # not their lease
    assert login(annotator3).post(reverse("factscore:review-next", args=[campaign.pk])).status_code == 404
    assert client.post(reverse("factscore:review-next", args=[campaign.pk + 1000])).status_code == 404
    assert client.get(reverse("factscore:review-next", args=[campaign.pk])).status_code == 405


def test_edit_split_with_htmx_and_without(campaign, annotator1) -> None:  # type: ignore[no-untyped-def]
    client = login(annotator1)
    task_url = open_task(client, campaign)
    assignment = campaign.assignments.get(annotator=annotator1)
    fact = services.reviewer_facts(assignment)[0]
    edit_url = task_url + "edit/"
    partial = client.post(
        edit_url,
        {"operation": "split", "fact_id": fact.pk, "text": "First half.\nSecond half."},
        HTTP_HX_REQUEST="true",
    )
    assert partial.status_code == 200
    assert "First half." in partial.content.decode() and "<html" not in partial.content.decode()
    invalid = client.post(
        edit_url, {"operation": "split", "fact_id": fact.pk, "text": "only one"}, HTTP_HX_REQUEST="true"
    )
    assert invalid.status_code == 422 and "at least two" in invalid.content.decode()
    plain = client.post(edit_url, {"operation": "add", "text": "Another fact."})
    assert plain.status_code == 302 and plain["Location"] == task_url
    foreign = client.post(edit_url, {"operation": "reword", "fact_id": 10**9, "text": "x"})
    assert foreign.status_code == 422
    assert client.get(edit_url).status_code == 405


def test_submit_then_next_task(campaign, annotator1) -> None:  # type: ignore[no-untyped-def]
    client = login(annotator1)
    task_url = open_task(client, campaign)
    assignment = campaign.assignments.get(annotator=annotator1)
    facts = services.reviewer_facts(assignment)
    submit_url = task_url + "submit/"
    missing = client.post(submit_url, {"label-" + str(facts[0].pk): "supported"} if len(facts) > 1 else {})
    assert missing.status_code == 422 and "no label yet" in missing.content.decode()
    foreign = client.post(submit_url, {**{f"label-{f.pk}": "supported" for f in facts}, "label-999999999": "supported"})
    assert foreign.status_code == 422
    done = client.post(submit_url, {**{f"label-{f.pk}": "irrelevant" for f in facts}, "started": "1"})
    # Straight on to the next review (or the "all done" page): no redirect through a state-changing GET.
    assert (done.status_code == 302 and "/tasks/" in done["Location"]) or done.status_code == 200
    assert FactLabel.objects.filter(assignment=assignment).count() == len(facts)
    assignment.refresh_from_db()
    assert assignment.status == "submitted" and assignment.seconds_spent > 0
    assert client.get(submit_url).status_code == 405
    assert client.post(submit_url, {}).status_code == 404  # the task is no longer leased to them


def test_skip_releases_the_slot(campaign, annotator1) -> None:  # type: ignore[no-untyped-def]
    client = login(annotator1)
    task_url = open_task(client, campaign)
    assert client.get(task_url + "skip/").status_code == 405
    skipped = client.post(task_url + "skip/", {"reason": "unsure"})
    assert skipped.status_code == 302
    next_url = open_task(client, campaign)
    assert next_url != task_url


def test_run_index_lists_my_factscore_runs(run, researcher, other_researcher, annotator1) -> None:  # type: ignore[no-untyped-def]
    url = reverse("factscore:runs")
    assert run.judge.name in login(researcher).get(url).content.decode()
    assert run.judge.name not in login(other_researcher).get(url).content.decode()
    assert login(annotator1).get(url).status_code == 403
    assert login(researcher).post(url).status_code == 405
    assert Client().get(url).status_code == 302
