"""Statistics scoped by origin and campaign: imported raters only, app raters only, one campaign, or all ratings.

The expected figures come from the reference libraries (krippendorff, statsmodels, scipy, and for Gwet's AC1 the
irrCAC definitions written out in tests/stats/reference.py) on the scope's own matrix, built from the JSONL file and
from the values the annotators submitted, never from the ORM's ratings.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import krippendorff
import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from scipy import stats
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from annotations.campaigns.setup import campaign_create
from annotations.models import Rating
from tests.annotate.factories import make_dataset
from tests.commands import command_output as run
from tests.conftest import client_for
from tests.dashboard.conftest import (
    ASPECTS,
    CAMPAIGN_A,
    CAMPAIGN_B,
    SCOPED_DATASET,
    SCOPED_JUDGE,
    ScopedData,
    scope_matrix,
)
from tests.stats.reference import ac1_by_hand

pytestmark = pytest.mark.django_db

CAMPAIGN_ASPECTS = {"factuality", "overall"}
NO_EXCLUSIONS = {"left_out": True, "raters": []}


def cli(*args: str) -> dict[str, Any]:
    return json.loads(run(*args, "--json"))


def assert_agreement_matches(summary: dict[str, Any], matrix: np.ndarray) -> None:
    rated = matrix[np.any(~np.isnan(matrix), axis=1)]
    assert summary["n_ratings"] == int(np.sum(~np.isnan(rated)))
    assert summary["n_items"] == rated.shape[0]
    counts = np.sum(~np.isnan(rated), axis=1)
    if counts.max() < 2:
        for level in ("nominal", "ordinal", "interval"):
            assert summary["alpha"][level]["undefined"] == "no answer has two or more ratings"
        assert summary["fleiss_kappa"]["undefined"] == "one rating per answer"
        return
    for level in ("nominal", "ordinal", "interval"):
        expected = krippendorff.alpha(reliability_data=rated.T, level_of_measurement=level)
        assert summary["alpha"][level]["value"] == pytest.approx(expected, abs=1e-9), level
    assert summary["gwet_ac1"]["value"] == pytest.approx(ac1_by_hand(rated), abs=1e-9)
    if counts.min() == counts.max():
        table, _ = aggregate_raters(rated.astype(int))
        assert summary["fleiss_kappa"]["value"] == pytest.approx(fleiss_kappa(table), abs=1e-9)
    else:
        reason = f"unequal numbers of ratings per answer ({counts.min()} to {counts.max()})"
        assert summary["fleiss_kappa"]["undefined"] == reason


def assert_statistic(stat: dict[str, Any], expected: float) -> None:
    """scipy answers NaN where the report gives the reason instead (constant scores, say)."""
    if np.isnan(expected):
        assert stat["value"] is None and stat["undefined"]
    else:
        assert stat["value"] == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(
    ("options", "origin", "campaign", "scope"),
    [
        ([], "all", None, {"origin": "all", "campaign": None}),
        (["--origin", "all"], "all", None, {"origin": "all", "campaign": None}),
        (["--origin", "imported"], "imported", None, {"origin": "imported", "campaign": None}),
        (["--origin", "app"], "app", None, {"origin": "app", "campaign": None}),
        (["--campaign", CAMPAIGN_A], "app", CAMPAIGN_A, {"origin": "app", "campaign": CAMPAIGN_A}),
        (["--campaign", CAMPAIGN_B, "--origin", "app"], "app", CAMPAIGN_B, {"origin": "app", "campaign": CAMPAIGN_B}),
    ],
)
def test_agreement_of_each_scope_equals_the_reference_libraries_on_its_subset(
    scoped: ScopedData, options: list[str], origin: str, campaign: str | None, scope: dict[str, Any]
) -> None:
    report = cli("agreement", SCOPED_DATASET, *options)
    assert report["scope"] == {**scope, "human_score": "raw", "exclusions": NO_EXCLUSIONS}
    assert report["dataset"] == SCOPED_DATASET
    assert list(report["aspects"]) == ASPECTS
    values = scoped.values(origin, campaign)
    for aspect, summary in report["aspects"].items():
        matrix = scope_matrix(values[aspect])
        if matrix.shape[0] == 0:
            assert summary["n_ratings"] == 0
            assert summary["fleiss_kappa"]["undefined"] == "no ratings"
            continue
        assert_agreement_matches(summary, matrix)


def test_the_scopes_split_the_ratings_as_described(scoped: ScopedData) -> None:
    """The finding: campaign ratings merged into the imported ones leave Fleiss' kappa undefined everywhere they
    reach; each scope on its own has equal counts again."""
    merged = cli("agreement", SCOPED_DATASET)["aspects"]
    imported = cli("agreement", SCOPED_DATASET, "--origin", "imported")["aspects"]
    campaign = cli("agreement", SCOPED_DATASET, "--campaign", CAMPAIGN_A)["aspects"]
    app = cli("agreement", SCOPED_DATASET, "--origin", "app")["aspects"]
    for aspect in CAMPAIGN_ASPECTS:
        assert merged[aspect]["fleiss_kappa"]["undefined"].startswith("unequal numbers of ratings per answer (3 to")
        assert imported[aspect]["fleiss_kappa"]["value"] is not None
        assert campaign[aspect]["fleiss_kappa"]["value"] is not None
        assert merged[aspect]["n_ratings"] == imported[aspect]["n_ratings"] + app[aspect]["n_ratings"]
    # Campaign B adds one more app rater on "overall" only, so the app scope differs from campaign A's there.
    assert app["overall"]["n_ratings"] > campaign["overall"]["n_ratings"]
    assert app["factuality"] == campaign["factuality"]
    assert imported["fluency"] == merged["fluency"]
    n_answers = sum(len(turn["responses"]) for item in scoped.lines for turn in item["turns"])
    assert imported["overall"]["n_ratings"] == 3 * n_answers


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
@pytest.mark.parametrize(
    ("options", "origin", "campaign"),
    [
        ([], "all", None),
        (["--origin", "imported"], "imported", None),
        (["--origin", "app"], "app", None),
        (["--campaign", CAMPAIGN_A], "app", CAMPAIGN_A),
    ],
)
def test_correlate_of_each_scope_equals_scipy_on_its_subset(
    scoped: ScopedData, options: list[str], origin: str, campaign: str | None
) -> None:
    report = cli("correlate", "--dataset", SCOPED_DATASET, "--judge", SCOPED_JUDGE, *options)
    assert report["scope"] == {
        "origin": origin,
        "campaign": campaign,
        "human_score": "raw",
        "exclusions": NO_EXCLUSIONS,
    }
    assert report["judge"] == SCOPED_JUDGE
    values = scoped.values(origin, campaign)
    for aspect in ASPECTS:
        judge = scoped.judge_scores(aspect)
        pairs = [(np.mean(rated), judge[key], key[2]) for key, rated in sorted(values[aspect].items()) if rated]
        levels = report["aspects"][aspect]
        assert levels["response"]["n"] == len(pairs)
        if len(pairs) < 3:
            assert levels["response"]["pearson"]["value"] is None
            continue
        human = np.array([p[0] for p in pairs])
        scores = np.array([p[1] for p in pairs])
        assert_statistic(levels["response"]["pearson"], stats.pearsonr(human, scores)[0])
        assert_statistic(levels["response"]["spearman"], stats.spearmanr(human, scores)[0])
        assert_statistic(levels["response"]["kendall"], stats.kendalltau(human, scores)[0])
        systems = sorted({p[2] for p in pairs})
        means_h = [np.mean([p[0] for p in pairs if p[2] == s]) for s in systems]
        means_j = [np.mean([p[1] for p in pairs if p[2] == s]) for s in systems]
        assert levels["system"]["n"] == len(systems)
        assert_statistic(levels["system"]["pearson"], stats.pearsonr(means_h, means_j)[0])


def test_scope_options_are_checked(scoped: ScopedData, researcher: User) -> None:
    with pytest.raises(CommandError, match="no campaign named 'ghost' on this dataset"):
        run("agreement", SCOPED_DATASET, "--campaign", "ghost")
    campaign_create(name="elsewhere", dataset=make_dataset("other data", owner=researcher))
    with pytest.raises(CommandError, match="no campaign named 'elsewhere' on this dataset"):
        run("correlate", "--dataset", SCOPED_DATASET, "--judge", SCOPED_JUDGE, "--campaign", "elsewhere")
    with pytest.raises(CommandError, match="with a campaign, origin must be app or all"):
        run("agreement", SCOPED_DATASET, "--campaign", CAMPAIGN_A, "--origin", "imported")
    with pytest.raises(CommandError, match="invalid choice: 'human'"):
        run("agreement", SCOPED_DATASET, "--origin", "human")


def test_text_output_names_the_scope(scoped: ScopedData) -> None:
    assert "Ratings: Imported raters only" in run("agreement", SCOPED_DATASET, "--origin", "imported")
    assert "Ratings: All ratings" in run("agreement", SCOPED_DATASET)
    text = run("correlate", "--dataset", SCOPED_DATASET, "--judge", SCOPED_JUDGE, "--campaign", CAMPAIGN_A)
    assert f"Ratings: Campaign: {CAMPAIGN_A}" in text


# ---------------------------------------------------------------- API


@pytest.mark.parametrize("endpoint", ["api-stats-agreement", "api-stats-correlation"])
def test_api_scopes_equal_the_cli(endpoint: str, scoped: ScopedData, researcher: User) -> None:
    url = reverse(endpoint, args=[scoped.dataset.pk])
    client = client_for(researcher)
    command = (
        ["agreement", SCOPED_DATASET]
        if endpoint == "api-stats-agreement"
        else ["correlate", "--dataset", SCOPED_DATASET, "--judge", SCOPED_JUDGE]
    )
    judge = {"judge": SCOPED_JUDGE} if endpoint == "api-stats-correlation" else {}
    cases = [
        ({}, []),
        ({"origin": "imported"}, ["--origin", "imported"]),
        ({"origin": "app"}, ["--origin", "app"]),
        ({"campaign": scoped.campaign_a.pk}, ["--campaign", CAMPAIGN_A]),
        ({"campaign": scoped.campaign_b.pk, "origin": "app"}, ["--campaign", CAMPAIGN_B]),
    ]
    for query, options in cases:
        response = client.get(url, {**judge, **query})
        assert response.status_code == 200, query
        assert response.json() == cli(*command, *options), query


@pytest.mark.parametrize("endpoint", ["api-stats-agreement", "api-stats-correlation"])
def test_api_rejects_bad_scopes(endpoint: str, scoped: ScopedData, researcher: User, other_researcher: User) -> None:
    url = reverse(endpoint, args=[scoped.dataset.pk])
    client = client_for(researcher)
    judge = {"judge": SCOPED_JUDGE}
    bad_origin = client.get(url, {**judge, "origin": "humans"})
    assert bad_origin.status_code == 400
    assert bad_origin.json()["origin"] == ['origin must be one of all, imported, app, not "humans".']
    for value in ("A", "-1", "0", "1.5", str(10**30)):
        bad_id = client.get(url, {**judge, "campaign": value})
        assert bad_id.status_code == 400, value
        assert "campaign must be a campaign id" in bad_id.json()["campaign"][0]
    contradiction = client.get(url, {**judge, "campaign": scoped.campaign_a.pk, "origin": "imported"})
    assert contradiction.status_code == 400
    assert "with a campaign, origin must be app or all" in contradiction.json()["origin"][0]
    foreign = campaign_create(name="not yours", dataset=make_dataset("their data", owner=other_researcher))
    mine_elsewhere = campaign_create(name="other dataset", dataset=make_dataset("my data", owner=researcher))
    for campaign in (foreign, mine_elsewhere):
        missing = client.get(url, {**judge, "campaign": campaign.pk})
        assert missing.status_code == 404, campaign.name
        assert "campaign" in missing.json()["detail"]
    assert client.get(url, {**judge, "campaign": 10**12}).status_code == 404


@pytest.mark.parametrize("endpoint", ["api-stats-agreement", "api-stats-correlation"])
def test_api_scope_access_and_method(
    endpoint: str,
    scoped: ScopedData,
    annotators: list[User],
    assert_researchers_only: Callable[..., None],
) -> None:
    url = reverse(endpoint, args=[scoped.dataset.pk])
    query = {"judge": SCOPED_JUDGE, "campaign": scoped.campaign_a.pk}
    # The campaign's own annotators see no statistics, not even of the campaign they rated in.
    assert_researchers_only(url, query, annotator=annotators[0])


# ---------------------------------------------------------------- dashboard


@pytest.mark.parametrize(
    ("query", "options", "label"),
    [
        ({}, [], "All ratings"),
        ({"origin": "imported"}, ["--origin", "imported"], "Imported raters only"),
        ({"origin": "app"}, ["--origin", "app"], "App raters only"),
        ({"campaign": "A"}, ["--campaign", CAMPAIGN_A], f"Campaign: {CAMPAIGN_A}"),
    ],
)
def test_dataset_page_names_the_scope_and_shows_the_clis_numbers(
    scoped: ScopedData, researcher: User, query: dict[str, str], options: list[str], label: str
) -> None:
    if query.get("campaign") == "A":
        query = {"campaign": str(scoped.campaign_a.pk)}
    client = client_for(researcher)
    url = reverse("dashboard-dataset", args=[scoped.dataset.pk])
    response = client.get(url, {**query, "aspect": "overall"})
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<strong id="scope-label">{label}</strong>' in html
    expected = cli("agreement", SCOPED_DATASET, *options)
    assert response.context["report"] == expected
    for aspect, summary in expected["aspects"].items():
        value = summary["alpha"]["ordinal"]["value"]
        if value is not None:
            assert f"{value:.3f}" in html, aspect
    download = json.loads(
        client.get(reverse("dashboard-dataset-table", args=[scoped.dataset.pk, "agreement", "json"]), query).content
    )
    column = download["columns"].index("alpha ordinal")
    for row in download["rows"]:
        assert row[column] == expected["aspects"][row[0]]["alpha"]["ordinal"]["value"]
    # Every scope is offered, the current one pressed, and the filters and links carry the scope along.
    for offered in ("All ratings", "Imported raters only", "App raters only", CAMPAIGN_A, CAMPAIGN_B):
        assert offered in html
    assert html.count('aria-pressed="true"') == 1
    for origin in ("all", "imported", "app"):
        assert f'name="origin" value="{origin}"' in html
    for campaign in (scoped.campaign_a, scoped.campaign_b):
        assert f'name="campaign" value="{campaign.pk}"' in html
    for name, value in query.items():
        assert f'<input type="hidden" name="{name}" value="{value}">' in html
        assert f"&amp;{name}={value}" in html


def test_judges_page_names_the_scope_and_shows_the_clis_numbers(scoped: ScopedData, researcher: User) -> None:
    client = client_for(researcher)
    url = reverse("dashboard-judges", args=[scoped.dataset.pk])
    query = {"judge": SCOPED_JUDGE, "aspect": "overall", "campaign": str(scoped.campaign_b.pk)}
    html = client.get(url, query).content.decode()
    assert f'<strong id="scope-label">Campaign: {CAMPAIGN_B}</strong>' in html
    expected = cli("correlate", "--dataset", SCOPED_DATASET, "--judge", SCOPED_JUDGE, "--campaign", CAMPAIGN_B)
    levels = expected["aspects"]["overall"]
    assert levels["response"]["n"] == 4 * len(scoped.lines[0]["turns"][0]["responses"])
    assert f"{levels['response']['pearson']['value']:.3f}" in html
    download = json.loads(
        client.get(reverse("dashboard-judge-table", args=[scoped.dataset.pk, "levels", "json"]), query).content
    )
    pearson = download["columns"].index("pearson")
    for row in download["rows"]:
        assert row[pearson] == levels[row[0]]["pearson"]["value"]
    imported = client.get(url, {"judge": SCOPED_JUDGE, "origin": "imported"}).content.decode()
    assert '<strong id="scope-label">Imported raters only</strong>' in imported


def test_htmx_filters_keep_the_scope_and_refresh_the_selector(scoped: ScopedData, researcher: User) -> None:
    campaign = str(scoped.campaign_a.pk)
    partial = client_for(researcher).get(
        reverse("dashboard-dataset", args=[scoped.dataset.pk]),
        {"aspect": "factuality", "campaign": campaign},
        HTTP_HX_REQUEST="true",
    )
    body = partial.content.decode()
    assert partial.status_code == 200
    assert "<html" not in body
    assert 'id="scope-selector" class="dash-scope" method="get"' in body and 'hx-swap-oob="true"' in body
    assert '<input type="hidden" name="aspect" value="factuality">' in body
    assert f"Campaign: {CAMPAIGN_A}" in body
    judges = client_for(researcher).get(
        reverse("dashboard-judges", args=[scoped.dataset.pk]),
        {"judge": SCOPED_JUDGE, "origin": "app"},
        HTTP_HX_REQUEST="true",
    )
    assert '<strong id="scope-label">App raters only</strong>' in judges.content.decode()


def test_dashboard_rejects_bad_scopes(scoped: ScopedData, researcher: User, other_researcher: User) -> None:
    client = client_for(researcher)
    foreign = campaign_create(name="not yours", dataset=make_dataset("their data", owner=other_researcher))
    for page in ("dashboard-dataset", "dashboard-judges"):
        url = reverse(page, args=[scoped.dataset.pk])
        assert client.get(url, {"origin": "humans"}).status_code == 400
        assert client.get(url, {"campaign": "x"}).status_code == 400
        assert client.get(url, {"campaign": "9" * 40}).status_code == 400
        assert client.get(url, {"campaign": scoped.campaign_a.pk, "origin": "imported"}).status_code == 400
        assert client.get(url, {"campaign": foreign.pk}).status_code == 404
        assert client.post(url, {"origin": "app"}).status_code == 405
        assert client_for(other_researcher).get(url, {"campaign": foreign.pk}).status_code == 404
    table = reverse("dashboard-dataset-table", args=[scoped.dataset.pk, "agreement", "csv"])
    assert client.get(table, {"campaign": foreign.pk}).status_code == 404


def test_scoped_reads_write_nothing(scoped: ScopedData, researcher: User) -> None:
    client = client_for(researcher)
    ratings_before = list(Rating.objects.order_by("pk").values_list("pk", "value", "updated_at"))
    with CaptureQueriesContext(connection) as queries:
        for query in ({"origin": "imported"}, {"origin": "app"}, {"campaign": scoped.campaign_a.pk}):
            assert client.get(reverse("dashboard-dataset", args=[scoped.dataset.pk]), query).status_code == 200
            judges_query = {"judge": SCOPED_JUDGE, **query}
            assert client.get(reverse("dashboard-judges", args=[scoped.dataset.pk]), judges_query).status_code == 200
            api = reverse("api-stats-correlation", args=[scoped.dataset.pk])
            assert client.get(api, judges_query).status_code == 200
    writes = [
        query["sql"]
        for query in queries.captured_queries
        if query["sql"].lstrip().split(None, 1)[0].upper() in {"INSERT", "UPDATE", "DELETE"}
    ]
    # The session middleware may refresh the login session; nothing of the evaluation data is written.
    assert all("django_session" in sql for sql in writes), writes
    assert list(Rating.objects.order_by("pk").values_list("pk", "value", "updated_at")) == ratings_before
