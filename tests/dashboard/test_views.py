"""Dashboard views: success, wrong method, no access per role, htmx partials, downloads, cache invalidation."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotations.models import Aspect, Dataset, Rating
from judging.models import Judge, JudgeKind
from tests.conftest import CAST_PASSWORD, client_for
from tests.dashboard.conftest import ASPECTS, DATASET_NAME, JUDGE_NAME
from tests.factories import JudgeFactory, JudgeScoreFactory

pytestmark = pytest.mark.django_db


def page_urls(dataset: Dataset) -> dict[str, str]:
    judge_query = f"?judge={JUDGE_NAME}"
    return {
        "index": reverse("dashboard-index"),
        "dataset": reverse("dashboard-dataset", args=[dataset.pk]),
        "dataset_table": reverse("dashboard-dataset-table", args=[dataset.pk, "agreement", "csv"]),
        "judges": reverse("dashboard-judges", args=[dataset.pk]) + judge_query,
        "judge_table": reverse("dashboard-judge-table", args=[dataset.pk, "levels", "json"]) + judge_query,
        "calibrate": reverse("dashboard-calibrate", args=[dataset.pk]),
    }


@pytest.mark.parametrize("page", ["index", "dataset", "dataset_table", "judges", "judge_table", "calibrate"])
def test_access_by_role(
    page: str,
    stats_dataset: Dataset,
    researcher: User,
    other_researcher: User,
    annotator1: User,
    outsider: User,
) -> None:
    url = page_urls(stats_dataset)[page]
    assert client_for(researcher).get(url).status_code == 200
    anonymous = client_for(None).get(url)
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith(reverse("login"))
    assert client_for(annotator1).get(url).status_code == 403
    assert client_for(outsider).get(url).status_code == 403
    expected_other = 200 if page == "index" else 404
    assert client_for(other_researcher).get(url).status_code == expected_other


@pytest.mark.parametrize("page", ["index", "dataset", "dataset_table", "judges", "judge_table"])
def test_read_only_pages_reject_post(page: str, stats_dataset: Dataset, researcher: User) -> None:
    assert client_for(researcher).post(page_urls(stats_dataset)[page]).status_code == 405


def test_calibrate_rejects_put(stats_dataset: Dataset, researcher: User) -> None:
    assert client_for(researcher).put(page_urls(stats_dataset)["calibrate"]).status_code == 405


def test_index_lists_only_own_datasets(stats_dataset: Dataset, researcher: User, other_researcher: User) -> None:
    assert DATASET_NAME in client_for(researcher).get(reverse("dashboard-index")).content.decode()
    assert DATASET_NAME not in client_for(other_researcher).get(reverse("dashboard-index")).content.decode()


def test_dataset_page_shows_agreement_plots_raters_and_drilldown(stats_dataset: Dataset, researcher: User) -> None:
    client = client_for(researcher)
    response = client.get(reverse("dashboard-dataset", args=[stats_dataset.pk]), {"aspect": "fluency"})
    html = response.content.decode()
    assert "<svg" in html
    for aspect in ASPECTS:
        assert aspect in html
    assert "Most disagreed answers" in html
    assert "Outlier rule" in html
    assert "<script>" not in html
    assert ' style="' not in html
    partial = client.get(
        reverse("dashboard-dataset", args=[stats_dataset.pk]),
        {"aspect": "overall", "system": "llm_b"},
        HTTP_HX_REQUEST="true",
    )
    body = partial.content.decode()
    assert partial.status_code == 200
    assert "<html" not in body
    assert "Raters" in body
    assert "llm_b" in body


def test_judges_page_sections(stats_dataset: Dataset, researcher: User) -> None:
    response = client_for(researcher).get(
        reverse("dashboard-judges", args=[stats_dataset.pk]), {"judge": JUDGE_NAME, "aspect": "overall"}
    )
    html = response.content.decode()
    for text in (
        "human ceiling",
        "Alternative-annotator test",
        "Confusion matrix",
        "Per-system means and ranks",
        "Bias diagnostics",
        "<circle",
    ):
        assert text in html, text
    assert "Ξ§" in html
    unknown = client_for(researcher).get(reverse("dashboard-judges", args=[stats_dataset.pk]), {"judge": "ghost"})
    assert unknown.status_code == 404


def test_downloads_match_report_and_neutralise_formulas(stats_dataset: Dataset, researcher: User) -> None:
    Aspect.objects.filter(dataset=stats_dataset, name="fluency").update(name="=HYPERLINK(1)")
    client = client_for(researcher)
    csv_body = client.get(reverse("dashboard-dataset-table", args=[stats_dataset.pk, "agreement", "csv"]))
    assert csv_body["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(csv_body.content.decode())))
    names = [row[0] for row in rows[1:]]
    assert "'=HYPERLINK(1)" in names
    assert "=HYPERLINK(1)" not in names
    json_body = json.loads(
        client.get(reverse("dashboard-dataset-table", args=[stats_dataset.pk, "agreement", "json"])).content
    )
    api = client.get(reverse("api-stats-agreement", args=[stats_dataset.pk])).json()
    alpha_column = json_body["columns"].index("alpha ordinal")
    for row in json_body["rows"]:
        assert row[alpha_column] == api["aspects"][row[0]]["alpha"]["ordinal"]["value"]
    judges = json.loads(
        client.get(reverse("dashboard-dataset-table", args=[stats_dataset.pk, "judges", "json"])).content
    )
    # An imported judge has no version, so it is never certified.
    assert judges["columns"] == ["judge", "kind", "scores", "certification", "version"]
    assert judges["rows"] == [[JUDGE_NAME, "imported", 600, "uncertified", ""]]
    for table in ("raters", "disagreements", "distribution"):
        response = client.get(
            reverse("dashboard-dataset-table", args=[stats_dataset.pk, table, "csv"]), {"aspect": "overall"}
        )
        assert response.status_code == 200
        assert len(list(csv.reader(io.StringIO(response.content.decode())))) > 1
    for table in ("levels", "alternative", "systems", "confusion", "bias", "scatter"):
        response = client.get(
            reverse("dashboard-judge-table", args=[stats_dataset.pk, table, "json"]),
            {"judge": JUDGE_NAME, "aspect": "overall"},
        )
        assert response.status_code == 200, table
        assert json.loads(response.content)["rows"], table
    missing = client.get(reverse("dashboard-dataset-table", args=[stats_dataset.pk, "secrets", "csv"]))
    assert missing.status_code == 404


def test_cache_is_invalidated_when_ratings_or_judge_scores_change(stats_dataset: Dataset, researcher: User) -> None:
    client = client_for(researcher)
    url = reverse("api-stats-agreement", args=[stats_dataset.pk])
    before = client.get(url).json()["aspects"]["overall"]["alpha"]["interval"]["value"]
    assert client.get(url).json()["aspects"]["overall"]["alpha"]["interval"]["value"] == before
    rating = Rating.objects.filter(aspect__dataset=stats_dataset, aspect__name="overall", is_missing=False).first()
    assert rating is not None
    rating.value = 1.0 if rating.value != 1.0 else 5.0
    rating.save()
    after_save = client.get(url).json()["aspects"]["overall"]["alpha"]["interval"]["value"]
    assert after_save != before
    # queryset.update() skips auto_now, yet the report must still follow the new value.
    Rating.objects.filter(pk=rating.pk).update(value=3.0 if rating.value != 3.0 else 2.0)
    assert client.get(url).json()["aspects"]["overall"]["alpha"]["interval"]["value"] != after_save
    correlation_url = reverse("api-stats-correlation", args=[stats_dataset.pk])
    judge = JudgeFactory(dataset=stats_dataset, name="late judge", kind=JudgeKind.IMPORTED)
    assert client.get(correlation_url, {"judge": "late judge"}).json()["aspects"] == {}
    JudgeScoreFactory(judge=judge, response=rating.response, aspect_name="overall", value=4.0)
    report = client.get(correlation_url, {"judge": "late judge"}).json()
    assert report["aspects"]["overall"]["response"]["n"] == 1


def test_calibration_form(stats_dataset: Dataset, researcher: User, other_researcher: User) -> None:
    client = client_for(researcher)
    url = reverse("dashboard-calibrate", args=[stats_dataset.pk])
    page = client.get(url).content.decode()
    assert JUDGE_NAME in page
    response = client.post(
        url, {"judge": JUDGE_NAME, "target": "overall", "inputs": ["fluency", "relevance"], "name": "", "seed": 0}
    )
    assert response.status_code == 200
    derived_name = f"{JUDGE_NAME} MATE overall"
    assert derived_name in response.content.decode()
    assert Judge.objects.get(dataset=stats_dataset, name=derived_name).kind == JudgeKind.DERIVED
    judges_page = client.get(reverse("dashboard-judges", args=[stats_dataset.pk])).content.decode()
    assert derived_name in judges_page
    # A judge name from another dataset is not a valid choice here.
    foreign = JudgeFactory(name="foreign judge")
    rejected = client.post(url, {"judge": foreign.name, "target": "overall", "inputs": ["fluency"], "seed": 0})
    assert rejected.status_code == 400
    assert not Judge.objects.filter(name__startswith="foreign judge MATE").exists()
    same_as_input = client.post(url, {"judge": JUDGE_NAME, "target": "overall", "inputs": ["overall"], "seed": 0})
    assert same_as_input.status_code == 400
    assert client_for(other_researcher).post(url, {"judge": JUDGE_NAME}).status_code == 404


def test_calibration_post_requires_csrf(stats_dataset: Dataset, researcher: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.login(username=researcher.username, password=CAST_PASSWORD)
    data: dict[str, Any] = {"judge": JUDGE_NAME, "target": "overall", "inputs": ["fluency"], "seed": 0}
    assert client.post(reverse("dashboard-calibrate", args=[stats_dataset.pk]), data).status_code == 403


def test_bias_panel_reads_judge_model_and_pairwise_consistency(stats_dataset: Dataset, researcher: User) -> None:
    from annotations.models import System
    from judging.analysis.judge_reports import judge_details

    System.objects.filter(dataset=stats_dataset, key="llm_a").update(model_name="openai/gpt-4o")
    judge = Judge.objects.get(dataset=stats_dataset, name=JUDGE_NAME)
    judge.params = {"model": "openai/gpt-4o-mini", "position_consistency": {"consistent": 30, "n": 40}}
    judge.save()
    bias = judge_details(stats_dataset, JUDGE_NAME, "overall")["bias"]
    assert bias["position_consistency"] == {"rate": {"value": 0.75, "undefined": None}, "n": 40}
    assert bias["self_preference"]["family"] == "gpt"
    assert bias["self_preference"]["systems"] == ["llm_a"]
    assert bias["self_preference"]["value"]["value"] is not None
    html = client_for(researcher).get(
        reverse("dashboard-judges", args=[stats_dataset.pk]), {"judge": JUDGE_NAME, "aspect": "overall"}
    )
    assert "self-preference (gpt)" in html.content.decode()


@pytest.mark.parametrize("page", ["dataset", "judges"])
def test_a_page_reads_the_statistics_version_once_and_still_follows_new_ratings(
    page: str, stats_dataset: Dataset, researcher: User
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = client_for(researcher)
    url = page_urls(stats_dataset)[page]
    assert client.get(url).status_code == 200
    with CaptureQueriesContext(connection) as captured:
        warm = client.get(url)
    assert warm.status_code == 200
    # The version is the only query that takes the latest update time of the dataset's ratings.
    version_reads = [q for q in captured.captured_queries if 'MAX("annotations_rating"."updated_at")' in q["sql"]]
    assert len(version_reads) == 1
    rating = Rating.objects.filter(aspect__dataset=stats_dataset, is_missing=False).first()
    assert rating is not None
    Rating.objects.filter(pk=rating.pk).update(value=1.0 if rating.value != 1.0 else 5.0)
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    # A new request reads the version again, so the changed rating is not hidden behind the cache.
    assert sum('MAX("annotations_rating"."updated_at")' in q["sql"] for q in captured.captured_queries) == 1
    assert len(captured.captured_queries) > len(version_reads) + 5
