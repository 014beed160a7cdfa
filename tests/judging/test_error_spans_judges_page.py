"""An error-span judge on the judges page (span agreement with each rater, pooled and with the majority, and the MQM
score's correlation levels), certified and compared through its MQM score like any judge."""

from typing import Any

import pytest
from django.urls import reverse

from annotations.models import Response
from judging.analysis.decisions import judge_comparison_report
from judging.analysis.judge_reports import judge_details
from judging.certification import selectors
from judging.certification.certificates import certificate_request
from judging.certification.reference_sets import reference_set_create
from judging.models import CertificateStatus, JudgeScore, RunStatus
from tests.conftest import client_for
from tests.factories import JudgeFactory
from tests.fakeprovider import FakeProvider
from tests.judging.span_judge_data import rater_errors, run_span_judge, span_rated_dataset, true_errors

pytestmark = pytest.mark.django_db


def _expected_character_agreement(dataset: Any, rater: int) -> tuple[float, float]:
    """Worked from the data's rule: per answer the judge marks characters 0..6 when it reports an error, rater 1
    marks 0..3 when it gives one; both are on "Answer", so they share 3 characters."""
    matched = judge_marked = rater_marked = 0
    for response_id in Response.objects.filter(turn__item__dataset=dataset).values_list("pk", flat=True):
        judge = true_errors(response_id) > 0
        human = rater_errors(response_id, rater) > 0
        matched += 3 if judge and human else 0
        judge_marked += 6 if judge else 0
        rater_marked += 3 if human else 0
    return matched / judge_marked, matched / rater_marked


def test_span_agreement_and_mqm_correlation_of_a_span_judge(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any, researcher: Any
) -> None:
    dataset = span_rated_dataset(owner=researcher)
    run = run_span_judge(dataset, fake_provider, django_capture_on_commit_callbacks, name="spans-a")
    assert run.status == RunStatus.SUCCEEDED, run.notes
    details = judge_details(dataset, "spans-a", "errors")
    spans = details["spans"]
    assert spans["available"] and spans["judged_answers"] == 40
    by_rater = {row["rater"]: row for row in spans["raters"]}
    exact = by_rater["rater-0"]
    assert exact["character"]["f1"]["value"] == 1.0 and exact["span_category"]["f1"]["value"] == 1.0
    precision, recall = _expected_character_agreement(dataset, 1)
    other = by_rater["rater-1"]
    assert other["character"]["precision"]["value"] == pytest.approx(precision)
    assert other["character"]["recall"]["value"] == pytest.approx(recall)
    # Rater 1 marks another category: the spans overlap, their categories never agree.
    assert other["span_category"]["f1"]["value"] == 0.0
    assert spans["consensus"]["answers"] == 40 and spans["consensus"]["character"]["f1"]["value"] is not None
    placed = sum(1 for pk in Response.objects.values_list("pk", flat=True) if true_errors(pk) > 0)
    unplaced = sum(max(0, true_errors(pk) - 1) for pk in Response.objects.values_list("pk", flat=True))
    assert spans["quotes"] == {"found": placed, "not_found": unplaced, "ambiguous": 0, "empty_quote": 0}
    # The MQM scores correlate at every level the page shows for a scale aspect.
    assert details["levels"]["response"]["n"] == 40
    assert details["levels"]["response"]["pearson"]["value"] > 0.7


def test_the_judges_page_shows_span_f1_and_mqm_correlation(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any, researcher: Any, annotator: Any
) -> None:
    dataset = span_rated_dataset(owner=researcher, items=12)
    run_span_judge(dataset, fake_provider, django_capture_on_commit_callbacks, name="spans-a")
    url = reverse("dashboard-judges", args=[dataset.pk])
    query = {"judge": "spans-a", "aspect": "errors"}
    client = client_for(researcher)
    page = client.get(url, query)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="span-agreement"' in html and "span F1 with category" in html and "character F1" in html
    assert "rater-0" in html and "all raters pooled" in html and "majority of the raters" in html
    assert "were not in the answer" in html and "MQM scores" in html
    assert 'id="table-levels"' in html
    japanese = client.get(url, query, HTTP_ACCEPT_LANGUAGE="ja").content.decode()
    assert "文字単位の F1" in japanese and "評価者の過半数" in japanese and "位置を付けず" in japanese
    table = client.get(reverse("dashboard-judge-table", args=[dataset.pk, "spans", "json"]), query)
    assert table.status_code == 200
    rows = table.json()["rows"]
    assert [row[0] for row in rows] == ["rater-0", "rater-1", "rater-2", "all raters pooled", "majority of the raters"]
    assert client.post(url, query).status_code == 405
    assert client_for(annotator).get(url, query).status_code == 403


def test_a_scale_judge_shows_no_span_panel(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any, researcher: Any
) -> None:
    dataset = span_rated_dataset(owner=researcher, items=4)
    run_span_judge(dataset, fake_provider, django_capture_on_commit_callbacks, name="spans-a")
    # Scores on the span aspect from elsewhere (an imported judge): correlated, with no spans to compare.
    imported = JudgeFactory(dataset=dataset, name="imported", kind="imported")
    for response in Response.objects.filter(turn__item__dataset=dataset):
        JudgeScore.objects.create(judge=imported, response=response, aspect_name="errors", value=1.0)
    details = judge_details(dataset, "imported", "errors")
    assert details["spans"] == {"available": False}
    html = client_for(researcher).get(reverse("dashboard-judges", args=[dataset.pk]), {"judge": "imported"})
    assert html.status_code == 200 and 'id="span-agreement"' not in html.content.decode()


def test_a_span_judge_is_certified_and_compared_through_its_mqm_score(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    dataset = span_rated_dataset()
    good = run_span_judge(dataset, fake_provider, django_capture_on_commit_callbacks, name="spans-good")
    assert good.version is not None
    reference = reference_set_create(dataset=dataset, name="gold", owner=None)
    with django_capture_on_commit_callbacks(execute=True):
        certificate = certificate_request(version=good.version, reference_set=reference, requested_by=None)
    certificate.refresh_from_db()
    assert certificate.status == CertificateStatus.PASSED, certificate.reason
    assert certificate.results["errors"]["verdict"] == "passed" and certificate.results["errors"]["n_judged"] == 40
    assert selectors.version_standing(good.version) == selectors.CERTIFIED
    # A judge that reports two errors too many wherever there is one: its scores jump from 0 to 3 and then rise by
    # one, so they follow the raters' counts less closely than the exact judge's.
    worse = run_span_judge(dataset, fake_provider, django_capture_on_commit_callbacks, name="spans-worse", shift=2)
    report = judge_comparison_report(dataset, "spans-good", "spans-worse", aspect="errors")
    entry = report["aspects"]["errors"]
    assert entry["n"] == 40
    first, second = (judge["r"]["value"] for judge in entry["judges"])
    assert first > second and entry["difference"]["value"] == pytest.approx(first - second)
    assert entry["williams"]["p_two_sided"]["value"] is not None
    assert worse.status == RunStatus.SUCCEEDED
