"""The quality panel, the quality CSV and the payment export: who may see them, what they hold, and that a crowd
worker's platform id leaves the database through the payment export only."""

import csv
import io

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotations.datasets.downloads import EXPORT_KINDS
from annotations.models import Rater
from annotations.quality.models import RaterExclusion
from annotations.quality.views import PAYMENT_FIELDS, QUALITY_FIELDS
from annotations.recruitment.models import Platform
from tests.annotate.quality_world import careful, crowd_worker, one_value, rate, study
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

CANARY = "CANARY-PID-7f3a9c"
GOLD = {"sys_alpha": {"factuality": 3}, "sys_beta": {"factuality": 0}}


def csv_rows(response) -> list[dict[str, str]]:  # type: ignore[no-untyped-def]
    return list(csv.DictReader(io.StringIO(response.content.decode("utf-8"))))


@pytest.fixture
def crowd_study(researcher, annotator1, annotator2):  # type: ignore[no-untyped-def]
    """Two account annotators and a Prolific worker whose id is the canary; the worker straight-lines."""
    campaign = study(researcher, [annotator1, annotator2], items=5, gold={5: GOLD})
    worker = crowd_worker(campaign, CANARY, completion_code="=HYPERLINK(1)", sessions=2, completed=1)
    for position in range(5):
        rate(campaign, position, annotator1, careful)
        rate(campaign, position, annotator2, careful)
        rate(campaign, position, worker, one_value(1))
    rate(campaign, 5, worker, one_value(1))
    campaign.worker = worker
    return campaign


URL_NAMES = ["campaign-quality-csv", "campaign-payment-csv", "campaign-posterior-labels-csv"]


@pytest.mark.parametrize("name", URL_NAMES)
def test_downloads_are_csv_attachments_for_the_researcher(crowd_study, researcher, name):
    response = client_for(researcher).get(reverse(name, args=[crowd_study.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith("attachment; filename=")
    assert response["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("name", URL_NAMES)
def test_downloads_refuse_other_methods(crowd_study, researcher, name):
    url = reverse(name, args=[crowd_study.pk])
    for method in ("post", "put", "delete"):
        assert getattr(client_for(researcher), method)(url).status_code == 405


@pytest.mark.parametrize("name", URL_NAMES)
def test_downloads_refuse_everyone_else(crowd_study, annotator1, outsider, name, django_user_model):
    url = reverse(name, args=[crowd_study.pk])
    anonymous = client_for(None).get(url)
    assert anonymous.status_code == 302 and reverse("login") in anonymous["Location"]
    assert client_for(annotator1).get(url).status_code == 403
    assert client_for(outsider).get(url).status_code == 403
    assert client_for(crowd_study.worker).get(url).status_code == 403
    other = django_user_model.objects.create_user(username="researcher_b", password="x-pass-1234", is_staff=True)
    assert client_for(other).get(url).status_code == 404
    assert client_for(other).get(reverse(name, args=[crowd_study.pk + 1000])).status_code == 404


def test_quality_csv_holds_every_measure_per_rater(crowd_study, researcher, annotator1):
    rows = csv_rows(client_for(researcher).get(reverse("campaign-quality-csv", args=[crowd_study.pk])))
    assert list(rows[0]) == QUALITY_FIELDS
    worker_rater = Rater.objects.get(user=crowd_study.worker)
    assert rows[0]["rater"] == worker_rater.pseudonym  # flagged first
    first = rows[0]
    assert first["platform"] == Platform.PROLIFIC
    assert (first["submissions"], first["straight_lined"], first["straight_lining_counted"]) == ("5", "5", "5")
    assert first["flagged"] == "yes" and "one value everywhere" in first["flag_reasons"]
    assert (first["gold_passed"], first["gold_answered"]) == ("0", "1")
    careful_row = next(row for row in rows if row["user_id"] == str(annotator1.pk))
    assert careful_row["platform"] == "" and careful_row["flagged"] == "no" and careful_row["flag_reasons"] == ""
    assert careful_row["median_seconds"] == "30.0"


def test_csv_cells_cannot_become_formulas(crowd_study, researcher):
    rater = Rater.objects.get(user=crowd_study.worker)
    RaterExclusion.objects.create(
        rater=rater, campaign=crowd_study, reason="=cmd|' /C calc'!A0", excluded_by=researcher
    )
    quality = client_for(researcher).get(reverse("campaign-quality-csv", args=[crowd_study.pk]))
    assert csv_rows(quality)[0]["exclusion_reason"] == "'=cmd|' /C calc'!A0"
    payments = csv_rows(client_for(researcher).get(reverse("campaign-payment-csv", args=[crowd_study.pk])))
    assert payments[0]["completion_code"] == "'=HYPERLINK(1)"


def test_payment_export_has_the_platform_id_work_time_sessions_and_flags(crowd_study, researcher, annotator2):
    rows = csv_rows(client_for(researcher).get(reverse("campaign-payment-csv", args=[crowd_study.pk])))
    assert list(rows[0]) == PAYMENT_FIELDS
    worker = rows[0]
    assert (worker["platform"], worker["worker_id"]) == ("prolific", CANARY)
    assert worker["rater"] == Rater.objects.get(user=crowd_study.worker).pseudonym
    assert (worker["tasks_done"], worker["gold_tasks"]) == ("6", "1")  # gold tasks are paid work too
    assert float(worker["seconds_spent"]) == pytest.approx(6 * 30)
    assert worker["first_activity"] and worker["last_activity"] >= worker["first_activity"]
    assert (worker["sessions"], worker["sessions_completed"]) == ("2", "1")
    assert worker["session_ids"] == "session-0 session-1"
    assert worker["flagged"] == "yes" and "one value everywhere" in worker["flag_reasons"]
    account = next(row for row in rows if row["user_id"] == str(annotator2.pk))
    assert (account["platform"], account["worker_id"], account["completion_code"]) == ("", "", "")
    assert (account["tasks_done"], account["gold_tasks"], account["flagged"]) == ("5", "0", "no")


def test_a_worker_who_joined_but_did_nothing_is_still_listed(crowd_study, researcher):
    crowd_worker(crowd_study, "PID-IDLE-1", sessions=1, completed=0)
    rows = csv_rows(client_for(researcher).get(reverse("campaign-payment-csv", args=[crowd_study.pk])))
    idle = next(row for row in rows if row["worker_id"] == "PID-IDLE-1")
    assert (idle["tasks_done"], idle["rater"], idle["sessions"], idle["sessions_completed"]) == ("0", "", "1", "0")


def test_the_platform_id_leaves_only_through_the_payment_export(crowd_study, researcher):
    researcher_client = client_for(researcher)
    dataset = crowd_study.dataset
    leaks = []
    for kind in EXPORT_KINDS:
        body = b"".join(researcher_client.get(reverse("dataset-export", args=[dataset.pk, kind])).streaming_content)
        assert body, kind
        if CANARY.encode() in body:
            leaks.append(f"download {kind}")
    api = APIClient()
    api.force_authenticate(researcher)
    for query in (
        {},
        {"include_judges": "true"},
        {"flat": "csv"},
        {"flat": "jsonl"},
        {"flat": "csv", "history": "true"},
        {"flat": "jsonl", "history": "true"},
        {"rubric": "true"},
    ):
        response = api.get(reverse("api-dataset-export", args=[dataset.pk]), query)
        assert response.status_code == 200, query
        if CANARY.encode() in b"".join(response.streaming_content):
            leaks.append(f"API {query}")
    flat = b"".join(researcher_client.get(reverse("dataset-export", args=[dataset.pk, "flat-csv"])).streaming_content)
    assert Rater.objects.get(user=crowd_study.worker).pseudonym.encode() in flat  # the worker's ratings are there
    quality = researcher_client.get(reverse("campaign-quality-csv", args=[crowd_study.pk]))
    if CANARY.encode() in quality.content:
        leaks.append("quality CSV")
    progress = researcher_client.get(reverse("campaign-progress", args=[crowd_study.pk]))
    if CANARY.encode() in progress.content:
        leaks.append("progress page")
    assert leaks == []
    payments = researcher_client.get(reverse("campaign-payment-csv", args=[crowd_study.pk]))
    assert CANARY.encode() in payments.content


def test_progress_page_shows_the_quality_panel(crowd_study, researcher):
    response = client_for(researcher).get(reverse("campaign-progress", args=[crowd_study.pk]), {"names": "pseudonyms"})
    assert response.status_code == 200
    html = response.content.decode()
    pseudonym = Rater.objects.get(user=crowd_study.worker).pseudonym
    assert "Rater quality" in html and "Flagged workers" in html
    assert crowd_study.worker.username not in html[html.index('id="quality-panel"') :]
    assert f"<strong>{pseudonym}</strong>" in html
    assert "one value everywhere in 100% of submissions" in html
    assert reverse("campaign-quality-csv", args=[crowd_study.pk]) in html
    assert reverse("campaign-payment-csv", args=[crowd_study.pk]) in html
    assert 'role="img"' in html and "Gold accuracy as a table" in html
    # The flagged rater's row comes before the careful raters' rows.
    table = html[html.index('class="quality-table"') :]
    assert table.index(pseudonym) < min(
        table.index(p) for p in Rater.objects.exclude(user=crowd_study.worker).values_list("pseudonym", flat=True)
    )


def test_progress_page_without_submissions_says_so(researcher, annotator1):
    campaign = study(researcher, [annotator1], items=2, raters_per_item=1)
    html = client_for(researcher).get(reverse("campaign-progress", args=[campaign.pk])).content.decode()
    assert "No submitted tasks yet." in html and "No gold item has been answered yet." in html
    assert "No rater is flagged." in html


def test_the_authorization_matrix_walks_both_downloads_as_researcher_pages() -> None:
    from tests.security.test_authorization import family
    from tests.security.urlwalk import iter_endpoints

    routes = {endpoint.route for endpoint in iter_endpoints()}
    for route in ("campaigns/<int:campaign_id>/quality.csv", "campaigns/<int:campaign_id>/payments.csv"):
        assert route in routes and family(route) == "researcher"


def test_the_panel_and_the_exports_read_in_a_fixed_number_of_queries(researcher, annotators, django_user_model):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotations.quality.payment_selectors import payment_rows
    from annotations.quality.selectors import quality_panel

    def queries(campaign) -> tuple[int, int]:  # type: ignore[no-untyped-def]
        with CaptureQueriesContext(connection) as panel:
            quality_panel(campaign)
        with CaptureQueriesContext(connection) as payments:
            payment_rows(campaign)
        return len(panel), len(payments)

    small = study(researcher, annotators[:1], items=2, gold={2: GOLD}, raters_per_item=1)
    rate(small, 0, annotators[0], careful)
    rate(small, 2, annotators[0], careful)
    large = study(researcher, annotators, items=4, gold={4: GOLD, 5: GOLD}, raters_per_item=5)
    for index in range(2):
        crowd_worker(large, f"PID-{index}")
    for user in [*annotators, *large.annotators.filter(crowd_worker__isnull=False)]:
        for position in range(6):
            rate(large, position, user, careful)
    assert queries(small) == queries(large)


def test_the_panel_counts_the_shared_answers_its_agreement_is_computed_from(researcher, annotator1, annotator2):
    # 9 items x 2 systems = 18 answers per aspect. annotator2 gives amount_info 0 everywhere, so annotator1's
    # amount_info has nothing to correlate with: 36 answers are shared, 18 (factuality) make the figure.
    campaign = study(researcher, [annotator1, annotator2], items=9, raters_per_item=2)
    for position in range(9):
        rate(campaign, position, annotator1, careful)
        rate(campaign, position, annotator2, lambda p, s, a: careful(p, s, a) if a == "factuality" else 0.0)
    html = client_for(researcher).get(reverse("campaign-progress", args=[campaign.pk])).content.decode()
    pseudonym = Rater.objects.get(user=annotator1).pseudonym
    row = html[html.index(f'<th scope="row">{annotator1.username}</th>') :]
    row = row[: row.index("</tr>")]
    assert "18 of 36 shared answers counted" in row
    assert "36 shared answers</span>" not in row
    quality = {
        r["rater"]: r for r in csv_rows(client_for(researcher).get(reverse("campaign-quality-csv", args=[campaign.pk])))
    }
    assert (quality[pseudonym]["agreement_shared"], quality[pseudonym]["agreement_counted"]) == ("36", "18")
