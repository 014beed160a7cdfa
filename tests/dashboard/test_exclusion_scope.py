"""Excluded raters as a statistics scope: left out by default, back in on request, stated wherever they count.

The expected figures come from the reference libraries (krippendorff, statsmodels, scipy and the hand-written
irrCAC and ANOVA definitions) on the subset built from the JSONL file minus the excluded rater's values, never from
the ORM's ratings. Gold items leave the statistics the same way.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from scipy import stats

from annotations.models import GoldItem, Item, Rater, RaterExclusion, Rating
from annotations.quality.services import rater_exclude, rater_exclusion_revoke
from judging.analysis.preference_selectors import stats_preferences
from judging.analysis.reports import agreement_report
from judging.analysis.selectors import ALL_RATINGS, rating_scope
from judging.selectors import dataset_counts
from tests.dashboard.conftest import (
    ASPECTS,
    MISSING,
    SCOPED_DATASET,
    SCOPED_JUDGE,
    AnswerKey,
    ScopedData,
    scope_matrix,
)
from tests.dashboard.test_scopes import assert_agreement_matches, assert_statistic, cli, client_for, run

pytestmark = pytest.mark.django_db

REASON = "straight-lining"


def rater_ids(answer: dict[str, Any], values: list[Any]) -> list[str]:
    """The file's rater ids of an answer's values: its "raters" list, else positions ("#1", "#2", ...)."""
    return list(answer.get("raters") or [f"#{n}" for n in range(1, len(values) + 1)])


def busiest_imported_rater(scoped: ScopedData) -> str:
    counts: Counter[str] = Counter()
    for item in scoped.lines:
        for turn in item["turns"]:
            for answer in turn["responses"].values():
                for values in answer.get("human_evals", {}).values():
                    counts.update(rater_ids(answer, values))
    return counts.most_common(1)[0][0]


def file_values(
    scoped: ScopedData, origin: str, *, without: str | None = None, skip_items: frozenset[str] = frozenset()
) -> dict[str, dict[AnswerKey, list[float]]]:
    """Per aspect and answer, the scope's values from the file (minus one rater's and some items') and from the
    campaigns' submissions."""
    found: dict[str, dict[AnswerKey, list[float]]] = {aspect: {} for aspect in ASPECTS}
    if origin in ("all", "imported"):
        for item in scoped.lines:
            if item["id"] in skip_items:
                continue
            for index, turn in enumerate(item["turns"]):
                for system, answer in turn["responses"].items():
                    for aspect, values in answer.get("human_evals", {}).items():
                        kept = [
                            float(v)
                            for v, who in zip(values, rater_ids(answer, values), strict=True)
                            if v not in MISSING and who != without
                        ]
                        found[aspect].setdefault((item["id"], index, system), []).extend(kept)
    if origin in ("all", "app"):
        for by_aspect in scoped.app.values():
            for aspect, by_answer in by_aspect.items():
                for key, values in by_answer.items():
                    if key[0] not in skip_items:
                        found[aspect].setdefault(key, []).extend(values)
    return found


def one_way_icc(matrix: np.ndarray) -> tuple[float, float]:
    """ICC1 and ICC1k of unbalanced data: one-way ANOVA with k0 (Shrout and Fleiss; McGraw and Wong)."""
    rows = [row[~np.isnan(row)] for row in matrix if np.sum(~np.isnan(row)) > 0]
    values = np.concatenate(rows)
    grand, n, total = values.mean(), len(rows), values.size
    ss_between = sum(row.size * (row.mean() - grand) ** 2 for row in rows)
    ss_within = sum(float(((row - row.mean()) ** 2).sum()) for row in rows)
    msb, msw = ss_between / (n - 1), ss_within / (total - n)
    k0 = (total - sum(row.size**2 for row in rows) / total) / (n - 1)
    return (msb - msw) / (msb + (k0 - 1) * msw), (msb - msw) / msb


def assert_report_matches(report: dict[str, Any], values: dict[str, dict[AnswerKey, list[float]]]) -> None:
    for aspect, summary in report["aspects"].items():
        matrix = scope_matrix(values[aspect])
        assert_agreement_matches(summary, matrix)
        icc1, icc1k = one_way_icc(matrix)
        assert summary["icc"]["ICC1"]["value"] == pytest.approx(icc1, abs=1e-9), aspect
        assert summary["icc"]["ICC1k"]["value"] == pytest.approx(icc1k, abs=1e-9), aspect


def assert_correlation_matches(report: dict[str, Any], values: dict[str, dict[AnswerKey, list[float]]], scoped) -> None:  # type: ignore[no-untyped-def]
    for aspect in ASPECTS:
        judge = scoped.judge_scores(aspect)
        pairs = [(np.mean(rated), judge[key], key[2]) for key, rated in sorted(values[aspect].items()) if rated]
        levels = report["aspects"][aspect]
        assert levels["response"]["n"] == len(pairs)
        human = np.array([p[0] for p in pairs])
        scores = np.array([p[1] for p in pairs])
        assert_statistic(levels["response"]["pearson"], stats.pearsonr(human, scores)[0])
        assert_statistic(levels["response"]["spearman"], stats.spearmanr(human, scores)[0])
        assert_statistic(levels["response"]["kendall"], stats.kendalltau(human, scores)[0])


@pytest.fixture
def excluded(scoped_named: ScopedData, researcher: User) -> tuple[ScopedData, Rater, RaterExclusion]:
    external = busiest_imported_rater(scoped_named)
    rater = Rater.objects.get(dataset=scoped_named.dataset, external_id=external)
    assert not rater.is_positional
    return scoped_named, rater, rater_exclude(rater=rater, reason=REASON, by=researcher)


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
@pytest.mark.parametrize("origin", ["all", "imported"])
def test_statistics_without_the_excluded_rater_equal_the_references_on_that_subset(
    excluded: tuple[ScopedData, Rater, RaterExclusion], origin: str
) -> None:
    scoped, rater, _exclusion = excluded
    without = file_values(scoped, origin, without=rater.external_id)
    assert sum(map(len, without["overall"].values())) < sum(map(len, file_values(scoped, origin)["overall"].values()))
    report = cli("agreement", SCOPED_DATASET, "--origin", origin)
    assert report["scope"]["exclusions"] == {"left_out": True, "raters": [{"rater": rater.pseudonym, "reason": REASON}]}
    assert_report_matches(report, without)
    correlation = cli("correlate", "--dataset", SCOPED_DATASET, "--judge", SCOPED_JUDGE, "--origin", origin)
    assert correlation["scope"]["exclusions"]["raters"] == [{"rater": rater.pseudonym, "reason": REASON}]
    assert_correlation_matches(correlation, without, scoped)
    # Included again, for comparison: the numbers on every rating, and the scope says so.
    included = cli("agreement", SCOPED_DATASET, "--origin", origin, "--include-excluded")
    assert included["scope"]["exclusions"] == {
        "left_out": False,
        "raters": [{"rater": rater.pseudonym, "reason": REASON}],
    }
    assert_report_matches(included, file_values(scoped, origin))


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
def test_revoking_restores_the_numbers_and_the_cache_never_serves_stale_ones(
    scoped_named: ScopedData, researcher: User
) -> None:
    scoped = scoped_named
    before = agreement_report(scoped.dataset)  # computed and cached before anyone is excluded
    correlation_before = cli("correlate", "--dataset", SCOPED_DATASET, "--judge", SCOPED_JUDGE)
    rater = Rater.objects.get(dataset=scoped.dataset, external_id=busiest_imported_rater(scoped))
    exclusion = rater_exclude(rater=rater, reason=REASON, by=researcher)
    during = agreement_report(scoped.dataset)
    assert during != before and during["scope"]["exclusions"]["raters"]
    assert_report_matches(during, file_values(scoped, "all", without=rater.external_id))
    assert agreement_report(scoped.dataset, ALL_RATINGS.with_excluded(True))["aspects"] == before["aspects"]
    rater_exclusion_revoke(exclusion=exclusion, by=researcher)
    after = agreement_report(scoped.dataset)
    assert after == before
    assert cli("correlate", "--dataset", SCOPED_DATASET, "--judge", SCOPED_JUDGE) == correlation_before
    # A second exclusion with another reason is a new state again, not the first one's cached report.
    rater_exclude(rater=rater, reason="second look", by=researcher)
    again = agreement_report(scoped.dataset)
    assert again["scope"]["exclusions"]["raters"] == [{"rater": rater.pseudonym, "reason": "second look"}]


def test_an_excluded_app_rater_leaves_the_campaigns_statistics(scoped: ScopedData, researcher: User) -> None:
    first = scoped.campaign_a.annotators.order_by("username").first()
    rater = Rater.objects.get(dataset=scoped.dataset, user=first)
    scope = rating_scope(campaign=scoped.campaign_a)
    before = agreement_report(scoped.dataset, scope)
    rater_exclude(rater=rater, reason=REASON, by=researcher, campaign=scoped.campaign_a)
    after = agreement_report(scoped.dataset, scope)
    for aspect in ("factuality", "overall"):
        # Two raters per task in campaign A: without one, half the ratings stay and no answer has two.
        assert after["aspects"][aspect]["n_ratings"] * 2 == before["aspects"][aspect]["n_ratings"]
        assert after["aspects"][aspect]["alpha"]["nominal"]["undefined"] == "no answer has two or more ratings"
    assert after["scope"]["exclusions"]["raters"] == [{"rater": rater.pseudonym, "reason": REASON}]
    # Ratings of other scopes name the exclusion only where the rater has ratings.
    imported = agreement_report(scoped.dataset, rating_scope("imported"))
    assert imported["scope"]["exclusions"]["raters"] == []


def test_cli_text_states_the_exclusions(excluded: tuple[ScopedData, Rater, RaterExclusion]) -> None:
    _scoped, rater, _exclusion = excluded
    text = run("agreement", SCOPED_DATASET)
    assert f"Leaving out 1 excluded rater(s): {rater.pseudonym} ({REASON}); --include-excluded" in text
    text = run("correlate", "--dataset", SCOPED_DATASET, "--judge", SCOPED_JUDGE, "--include-excluded")
    assert f"Including 1 excluded rater(s): {rater.pseudonym} ({REASON})" in text
    assert "Ratings: All ratings, excluded raters included" in text


def test_api_states_and_toggles_the_exclusions(excluded: tuple[ScopedData, Rater, RaterExclusion], researcher: User):  # type: ignore[no-untyped-def]
    scoped, rater, _exclusion = excluded
    client = client_for(researcher)
    url = reverse("api-stats-agreement", args=[scoped.dataset.pk])
    assert client.get(url).json() == cli("agreement", SCOPED_DATASET)
    assert client.get(url, {"excluded": "include"}).json() == cli("agreement", SCOPED_DATASET, "--include-excluded")
    assert client.get(url, {"excluded": "leave-out"}).json()["scope"]["exclusions"]["left_out"] is True
    bad = client.get(url, {"excluded": "yes"})
    assert bad.status_code == 400 and "excluded must be one of leave-out, include" in bad.json()["excluded"][0]
    correlation = reverse("api-stats-correlation", args=[scoped.dataset.pk])
    body = client.get(correlation, {"judge": SCOPED_JUDGE}).json()
    assert body["scope"]["exclusions"]["raters"] == [{"rater": rater.pseudonym, "reason": REASON}]


def test_dashboard_pages_state_the_exclusions_with_a_link_to_include_them(
    excluded: tuple[ScopedData, Rater, RaterExclusion], researcher: User
) -> None:
    scoped, rater, _exclusion = excluded
    client = client_for(researcher)
    page = reverse("dashboard-dataset", args=[scoped.dataset.pk])
    html = client.get(page, {"aspect": "overall", "origin": "imported"}).content.decode()
    assert "Leaving out 1 excluded rater:" in html
    assert f"{rater.pseudonym} ({REASON})" in html
    assert f'href="{page}?aspect=overall&amp;origin=imported&amp;excluded=include"' in html
    included = client.get(page, {"aspect": "overall", "origin": "imported", "excluded": "include"})
    body = included.content.decode()
    assert included.context["report"] == cli("agreement", SCOPED_DATASET, "--origin", "imported", "--include-excluded")
    assert "Including 1 excluded rater:" in body and "Imported raters only, excluded raters included" in body
    assert '<input type="hidden" name="excluded" value="include">' in body  # the scope buttons keep the choice
    judges = reverse("dashboard-judges", args=[scoped.dataset.pk])
    html = client.get(judges, {"judge": SCOPED_JUDGE}).content.decode()
    assert "Leaving out 1 excluded rater:" in html and f"{rater.pseudonym} ({REASON})" in html
    partial = client.get(page, {"aspect": "factuality"}, HTTP_HX_REQUEST="true").content.decode()
    assert "Leaving out 1 excluded rater:" in partial  # in the selector swapped out of band
    assert client.get(page, {"excluded": "maybe"}).status_code == 400
    download = json.loads(
        client.get(reverse("dashboard-dataset-table", args=[scoped.dataset.pk, "agreement", "json"])).content
    )
    column = download["columns"].index("alpha ordinal")
    expected = cli("agreement", SCOPED_DATASET)
    for row in download["rows"]:
        assert row[column] == expected["aspects"][row[0]]["alpha"]["ordinal"]["value"]


def test_pages_without_exclusions_say_nothing_about_them(scoped: ScopedData, researcher: User) -> None:
    html = client_for(researcher).get(reverse("dashboard-dataset", args=[scoped.dataset.pk])).content.decode()
    assert "excluded rater" not in html and 'id="exclusion-notice"' not in html


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
def test_gold_items_ratings_and_preferences_do_not_enter_the_statistics(scoped: ScopedData) -> None:
    before = agreement_report(scoped.dataset)
    rated_by_campaign = sorted(
        {key[0] for by_answer in scoped.app[next(iter(scoped.app))].values() for key in by_answer}
    )
    gold_ids = frozenset([*rated_by_campaign[:1], scoped.lines[-1]["id"]])
    preferences_before = len(stats_preferences(scoped.dataset).turn_ids)
    stored = Rating.objects.filter(rater__dataset=scoped.dataset).count()
    on_gold = Rating.objects.filter(response__turn__item__external_id__in=gold_ids, rater__dataset=scoped.dataset)
    for item in Item.objects.filter(dataset=scoped.dataset, external_id__in=gold_ids):
        GoldItem.objects.create(item=item, expected={})
    assert on_gold.count() > 0
    assert dataset_counts(scoped.dataset).ratings == stored - on_gold.count()  # the overview's "ratings" count
    report = agreement_report(scoped.dataset)
    assert report != before  # not a stale cached report
    assert_report_matches(report, file_values(scoped, "all", skip_items=gold_ids))
    correlation = cli("correlate", "--dataset", SCOPED_DATASET, "--judge", SCOPED_JUDGE)
    assert_correlation_matches(correlation, file_values(scoped, "all", skip_items=gold_ids), scoped)
    # The campaigns asked no preference, so only the file's preferences of non-gold turns remain, if any.
    assert len(stats_preferences(scoped.dataset).turn_ids) <= preferences_before


def test_calibration_states_the_raters_it_leaves_out(excluded: tuple[ScopedData, Rater, RaterExclusion]) -> None:
    _scoped, rater, _exclusion = excluded
    inputs = ",".join(aspect for aspect in ASPECTS if aspect != "overall")
    base = ["calibrate", "--dataset", SCOPED_DATASET, "--judge", SCOPED_JUDGE, "--target", "overall"]
    result = json.loads(run(*base, "--inputs", inputs, "--json"))
    assert result["scope"]["exclusions"] == {"left_out": True, "raters": [{"rater": rater.pseudonym, "reason": REASON}]}
    text = run(*base, "--inputs", inputs, "--name", "MATE again")
    assert f"Leaving out 1 excluded rater(s): {rater.pseudonym} ({REASON})" in text
