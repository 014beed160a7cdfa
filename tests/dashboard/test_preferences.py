"""The preference panel: annotators answer the preference question through the services, the agreement report's
``preferences`` section, the dashboard panel and the CLI/API show the same numbers, and a pairwise judge run is
compared with the humans' majority."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import krippendorff
import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotations.campaigns.answers import TaskAnswer
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.tasks import task_candidates
from annotations.models import Assignment, Campaign, Dataset, GoldItem, Item, Rater, Response, Submission
from annotations.quality.services import rater_exclude
from annotations.rubrics.task_sheet import campaign_scales
from judging.analysis.preference_selectors import stats_preferences
from judging.analysis.reports import agreement_report
from judging.analysis.selectors import ALL_RATINGS, rating_scope
from tests.annotate.factories import lfqa_lines, make_campaign, make_dataset, submit_answer
from tests.dashboard.decision_data import pairwise_run

pytestmark = pytest.mark.django_db

SYSTEMS = ["sys_alpha", "sys_beta", "sys_gamma"]
# Per annotator, the system each prefers on the prompts q0..q3 (the campaign shows all three answers).
FAVOURITES = {
    0: ["sys_alpha", "sys_alpha", "sys_beta", "sys_gamma"],
    1: ["sys_alpha", "sys_beta", "sys_beta", "sys_gamma"],
    2: ["sys_beta", "sys_alpha", "sys_beta", "sys_alpha"],
}
PAIRWISE_JUDGE = "pairwise Ξ judge"


@dataclass
class PreferenceSetup:
    dataset: Dataset
    campaign: Campaign
    none_appropriate: set[tuple[int, str]]  # (annotator index, prompt id)


def _lines() -> list[dict[str, Any]]:
    lines = lfqa_lines(4, systems=3)
    # Two imported preferences on q0, one of them among two candidates only.
    lines[0]["turns"][0]["preferences"] = [
        {"rater": "w1", "campaign": "old", "candidates": ["sys_alpha", "sys_gamma"], "preferred": "sys_gamma"},
        {"rater": "w2", "preferred": "sys_alpha", "none_appropriate": True},
        {"rater": "w3", "preferred": None},
    ]
    return lines


@pytest.fixture
def setup(researcher: User, annotators: list[User]) -> PreferenceSetup:
    cache.clear()
    dataset = make_dataset("prefs Ξ", owner=researcher, lines=_lines())
    campaign = make_campaign(dataset, annotators, name="pref campaign", raters_per_item=3)
    keys = dict(Response.objects.filter(turn__item__dataset=dataset).values_list("pk", "system__key"))
    prompt_of = dict(Response.objects.filter(turn__item__dataset=dataset).values_list("pk", "turn__item__external_id"))
    none_appropriate = {(0, "q3"), (2, "q3")}
    for _ in range(4):
        for index, user in enumerate(annotators):
            assignment = assignment_claim(campaign=campaign, user=user)
            assert assignment is not None
            candidates = task_candidates(assignment=assignment, user_id=user.pk)
            prompt = prompt_of[candidates[0].response_id]
            wanted = FAVOURITES[index][int(prompt[1:])]
            number = next(c.number for c in candidates if keys[c.response_id] == wanted)
            ratings = {(c.number, s.index): 1 for c in candidates for s in campaign_scales(campaign)}
            answer = TaskAnswer(
                ratings=ratings,
                preference=number,
                none_appropriate=(index, prompt) in none_appropriate,
                rationale="because",
            )
            submit_answer(campaign, assignment, user, f"preference-{assignment.pk}", answer)
    return PreferenceSetup(dataset, campaign, none_appropriate)


def _add_pairwise_run(dataset: Dataset) -> None:
    """A pairwise run that prefers alpha to beta everywhere, and beta to gamma on q2 only (a tie elsewhere)."""
    pairwise_run(
        dataset,
        PAIRWISE_JUDGE,
        (
            (item, first, second, order, score)
            for item in ("q0", "q1", "q2", "q3")
            for first, second, score in (
                ("sys_alpha", "sys_beta", 1.0),
                ("sys_beta", "sys_gamma", 1.0 if item == "q2" else 0.5),
            )
            for order in (0, 1)
        ),
    )


def _by_system(section: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["system"]: row for row in section["systems"]}


def test_campaign_scope_win_rates_none_appropriate_and_alpha_by_hand(setup: PreferenceSetup) -> None:
    scope = rating_scope(campaign=setup.campaign)
    section = agreement_report(setup.dataset, scope)["preferences"]
    assert section["n_preferences"] == 12 and section["n_prompts"] == 4 and section["n_skipped"] == 0
    rows = _by_system(section)
    # Every task shows all three systems: each is shown 12 times. alpha is chosen 5 times, beta 5, gamma 2.
    assert [rows[key]["shown"] for key in SYSTEMS] == [12, 12, 12]
    assert [rows[key]["chosen"] for key in SYSTEMS] == [5, 5, 2]
    assert rows["sys_alpha"]["win_rate"]["value"] == pytest.approx(5 / 12)
    assert rows["sys_gamma"]["win_rate"]["value"] == pytest.approx(2 / 12)
    for key in SYSTEMS:
        ci = rows[key]["win_rate_ci95"]
        assert ci["low"] <= rows[key]["win_rate"]["value"] <= ci["high"]
    # "None appropriate": annotator 0 chose gamma on q3, annotator 2 alpha on q3.
    assert section["none_appropriate"]["value"] == pytest.approx(2 / 12)
    assert rows["sys_gamma"]["none_appropriate"]["value"] == pytest.approx(1 / 2)
    assert rows["sys_alpha"]["none_appropriate"]["value"] == pytest.approx(1 / 5)
    assert rows["sys_beta"]["none_appropriate"]["value"] == 0.0
    codes = {key: code for code, key in enumerate(SYSTEMS)}
    matrix = np.array([[codes[key] for key in FAVOURITES[index]] for index in range(3)], dtype=float)
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    assert section["agreement"]["alpha"]["value"] == pytest.approx(expected, abs=1e-9)
    assert section["agreement"]["n_units"] == 4


def test_scopes_pick_imported_and_app_preferences(setup: PreferenceSetup) -> None:
    imported = agreement_report(setup.dataset, rating_scope("imported"))["preferences"]
    # The entry with no preferred key is not a preference; the one without candidates chose among all three.
    assert (imported["n_preferences"], imported["n_skipped"]) == (2, 1)
    rows = _by_system(imported)
    assert (rows["sys_alpha"]["shown"], rows["sys_alpha"]["chosen"]) == (2, 1)
    assert (rows["sys_beta"]["shown"], rows["sys_beta"]["chosen"]) == (1, 0)
    assert rows["sys_alpha"]["none_appropriate"]["value"] == 1.0
    assert agreement_report(setup.dataset, rating_scope("app"))["preferences"]["n_preferences"] == 12
    everything = agreement_report(setup.dataset, ALL_RATINGS)["preferences"]
    assert everything["n_preferences"] == 14
    # On q0 the two candidate sets are two questions: the imported (alpha, gamma) one has a single preference and
    # pairs with nothing, the imported entry without candidates joins the campaign's question.
    assert everything["agreement"]["n_units"] == 4


def test_pairwise_judge_agrees_with_the_human_majority(setup: PreferenceSetup) -> None:
    before = agreement_report(setup.dataset, rating_scope(campaign=setup.campaign))
    assert before["preferences"]["judges"] == {}
    _add_pairwise_run(setup.dataset)
    # The new run changes the data version: the cached report is not reused.
    result = agreement_report(setup.dataset, rating_scope(campaign=setup.campaign))["preferences"]["judges"]
    entry = result[PAIRWISE_JUDGE]["overall"]
    # alpha vs beta, human votes (alpha-beta): q0 2-1, q1 2-1, q2 0-3, q3 1-0 -> judge (alpha) agrees on q0, q1, q3.
    # beta vs gamma: the judge ties on q0, q1, q3 and says beta on q2, where the humans chose beta 3-0.
    assert entry["n_pairs"] == 8
    assert (entry["judge_ties"], entry["human_ties"]) == (3, 0)
    assert (entry["n_decided"], entry["n_agree"]) == (5, 4)
    assert entry["agreement"]["value"] == pytest.approx(4 / 5)


def _stat_text(value: float) -> str:
    return f"{value:.3f}"


def test_panel_json_and_cli_show_the_same_numbers(setup: PreferenceSetup, researcher: User) -> None:
    client = Client()
    client.force_login(researcher)
    query = f"?campaign={setup.campaign.pk}"
    page = client.get(reverse("dashboard-dataset", args=[setup.dataset.pk]) + query)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="preference-panel"' in html
    out = io.StringIO()
    call_command("agreement", setup.dataset.name, "--campaign", setup.campaign.name, "--json", stdout=out)
    cli = json.loads(out.getvalue())["preferences"]
    api = client.get(reverse("api-stats-agreement", args=[setup.dataset.pk]) + query)
    assert api.status_code == 200
    assert api.json()["preferences"] == cli
    rows = _by_system(cli)
    assert _stat_text(rows["sys_alpha"]["win_rate"]["value"]) in html  # 0.417
    ci = rows["sys_alpha"]["win_rate_ci95"]
    assert f"[{_stat_text(ci['low'])}, {_stat_text(ci['high'])}]" in html
    assert _stat_text(cli["agreement"]["alpha"]["value"]) in html
    assert _stat_text(cli["none_appropriate"]["value"]) in html
    download = client.get(reverse("dashboard-dataset-table", args=[setup.dataset.pk, "preferences", "json"]) + query)
    table = json.loads(download.content)
    assert [row[0] for row in table["rows"]] == SYSTEMS
    assert [row[3] for row in table["rows"]] == [rows[key]["win_rate"]["value"] for key in SYSTEMS]


def test_panel_says_so_when_there_is_no_preference(researcher: User) -> None:
    client = Client()
    client.force_login(researcher)
    other = make_dataset("no prefs", owner=researcher)
    html = client.get(reverse("dashboard-dataset", args=[other.pk])).content.decode()
    assert "No preference was given in these ratings." in html


def test_panel_in_japanese(setup: PreferenceSetup, researcher: User) -> None:
    client = Client()
    client.force_login(researcher)
    url = reverse("dashboard-dataset", args=[setup.dataset.pk]) + f"?campaign={setup.campaign.pk}"
    html = client.get(url, HTTP_ACCEPT_LANGUAGE="ja").content.decode()
    for text in ("選ばれた回答", "適切な候補なし", "4 件のプロンプト", "選好が2件以上ある設問 4 件", "勝率："):
        assert text in html
    other = make_dataset("no prefs", owner=researcher)
    assert (
        "この評価には選好がありません。"
        in client.get(reverse("dashboard-dataset", args=[other.pk]), HTTP_ACCEPT_LANGUAGE="ja").content.decode()
    )


def test_cli_text_shows_the_preferences(setup: PreferenceSetup) -> None:
    out = io.StringIO()
    call_command("agreement", setup.dataset.name, "--campaign", setup.campaign.name, stdout=out)
    text = out.getvalue()
    assert "Preferences: 12 on 4 prompts; none appropriate 0.167" in text
    assert "sys_alpha" in text and "0.417" in text


def test_an_edited_preference_is_not_served_from_the_cache(setup: PreferenceSetup) -> None:
    scope = rating_scope(campaign=setup.campaign)
    assert agreement_report(setup.dataset, scope)["preferences"]["none_appropriate"]["value"] == pytest.approx(2 / 12)
    # A queryset update touches no rating and adds no row: only the preferences themselves changed.
    Submission.objects.filter(assignment__campaign=setup.campaign).update(none_appropriate=True)
    assert agreement_report(setup.dataset, scope)["preferences"]["none_appropriate"]["value"] == 1.0
    gamma = Response.objects.filter(turn__item__dataset=setup.dataset, system__key="sys_gamma")
    for submission in Submission.objects.filter(assignment__campaign=setup.campaign).select_related("assignment__task"):
        Submission.objects.filter(pk=submission.pk).update(
            preferred_response=gamma.get(turn_id=submission.assignment.task.turn_id)
        )
    rows = _by_system(agreement_report(setup.dataset, scope)["preferences"])
    assert rows["sys_gamma"]["win_rate"]["value"] == 1.0


def test_preferences_leave_out_gold_tasks_and_excluded_raters(setup: PreferenceSetup, researcher: User) -> None:
    """12 app preferences (3 annotators x 4 prompts) and 3 imported ones on q0."""
    app = rating_scope("app")
    assert agreement_report(setup.dataset, app)["preferences"]["n_preferences"] == 12
    first = setup.campaign.annotators.order_by("username").first()
    one = Assignment.objects.filter(campaign=setup.campaign, annotator=first, status="submitted").first()
    assert one is not None
    Assignment.objects.filter(pk=one.pk).update(is_gold=True)
    cache.clear()  # gold slots are made with their task, never marked later; here the report is read afresh
    assert len(stats_preferences(setup.dataset, app).turn_ids) == 11
    rater_exclude(rater=Rater.objects.get(dataset=setup.dataset, user=first), reason="straight-lining", by=researcher)
    assert agreement_report(setup.dataset, app)["preferences"]["n_preferences"] == 8  # 3 left of theirs go too
    assert agreement_report(setup.dataset, app.with_excluded(True))["preferences"]["n_preferences"] == 11
    assert len(stats_preferences(setup.dataset, ALL_RATINGS).turn_ids) == 8 + 3
    GoldItem.objects.create(item=Item.objects.get(dataset=setup.dataset, external_id="q0"), expected={})
    # q0's imported preferences and the two remaining app ones on q0 leave too.
    assert len(stats_preferences(setup.dataset, ALL_RATINGS).turn_ids) == 8 - 2
