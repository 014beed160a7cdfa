"""Stats API: access rules, and the same numbers as the CLI and the dashboard downloads."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from annotations.models import Dataset
from tests.commands import command_json as cli
from tests.conftest import client_for
from tests.dashboard.conftest import DATASET_NAME, JUDGE_NAME

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("endpoint", ["api-stats-agreement", "api-stats-correlation"])
def test_api_access_rules(endpoint: str, stats_dataset: Dataset, assert_researchers_only: Callable[..., None]) -> None:
    url = reverse(endpoint, args=[stats_dataset.pk])
    query = {"judge": JUDGE_NAME}
    assert_researchers_only(url, query)


def test_correlation_api_errors(stats_dataset: Dataset, researcher: User) -> None:
    url = reverse("api-stats-correlation", args=[stats_dataset.pk])
    client = client_for(researcher)
    assert client.get(url).status_code == 400
    missing = client.get(url, {"judge": "ghost"})
    assert missing.status_code == 404
    assert "ghost" in missing.json()["detail"]


def test_cli_api_and_dashboard_show_the_same_numbers(stats_dataset: Dataset, researcher: User) -> None:
    client = client_for(researcher)
    agreement_cli = cli("agreement", DATASET_NAME)
    agreement_api = client.get(reverse("api-stats-agreement", args=[stats_dataset.pk])).json()
    assert agreement_api == agreement_cli
    correlation_cli = cli("correlate", "--dataset", DATASET_NAME, "--judge", JUDGE_NAME)
    correlation_api = client.get(
        reverse("api-stats-correlation", args=[stats_dataset.pk]), {"judge": JUDGE_NAME}
    ).json()
    assert correlation_api == correlation_cli

    agreement_download = json.loads(
        client.get(reverse("dashboard-dataset-table", args=[stats_dataset.pk, "agreement", "json"])).content
    )
    columns = agreement_download["columns"]
    for row in agreement_download["rows"]:
        summary = agreement_cli["aspects"][row[0]]
        assert row[columns.index("alpha nominal")] == summary["alpha"]["nominal"]["value"]
        assert row[columns.index("alpha interval")] == summary["alpha"]["interval"]["value"]
        assert row[columns.index("Gwet AC1")] == summary["gwet_ac1"]["value"]
        ci = summary["alpha_ci95"]
        assert row[columns.index("alpha 95% CI")] == [ci["low"], ci["high"]]

    for aspect, levels in correlation_cli["aspects"].items():
        download = json.loads(
            client.get(
                reverse("dashboard-judge-table", args=[stats_dataset.pk, "levels", "json"]),
                {"judge": JUDGE_NAME, "aspect": aspect},
            ).content
        )
        columns = download["columns"]
        for row in download["rows"]:
            entry = levels[row[0]]
            assert row[columns.index("pearson")] == entry["pearson"]["value"]
            assert row[columns.index("kendall")] == entry["kendall"]["value"]
            assert row[columns.index("spearman 95% CI")] == [
                entry["ci95"]["spearman"]["low"],
                entry["ci95"]["spearman"]["high"],
            ]
        page = client.get(
            reverse("dashboard-judges", args=[stats_dataset.pk]), {"judge": JUDGE_NAME, "aspect": aspect}
        ).content.decode()
        assert f"{levels['response']['pearson']['value']:.3f}" in page
