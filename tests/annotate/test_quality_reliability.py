"""The quality panel's reliability from a rater model: the figures are the ones judging.statistics.rater_models
computes on the same ratings (here fitted from the test's own plan of who gave which value), an aspect with too
little data says "undefined" with the reason, and an excluded rater leaves the fit."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from annotations.models import Campaign, Rater
from annotations.quality.selectors import quality_panel
from judging.statistics.rater_models import fit_rater_model
from tests.annotate.quality_world import Scores, rate, study
from tests.annotate.test_exclusion_views import client_for, post

pytestmark = pytest.mark.django_db

ITEMS = 8
SYSTEMS = ("sys_alpha", "sys_beta")


def truth(position: int, system: str, aspect: str) -> float:
    base = (position * 5 + (2 if system == "sys_alpha" else 0)) % 4
    return float(base) if aspect == "factuality" else float(base % 3 - 1)


def off_on(every: int, shift: int) -> Scores:
    """The truth, except on every `every`-th item where the rater moves one step (staying on the scale)."""

    def scores(position: int, system: str, aspect: str) -> float:
        value = truth(position, system, aspect)
        if (position + shift + (system == "sys_beta")) % every:
            return value
        top = 3.0 if aspect == "factuality" else 1.0
        return value - 1 if value == top else value + 1

    return scores


PLANS: dict[str, Scores] = {"exact": truth, "mostly": off_on(4, 1), "often_off": off_on(2, 0)}
# The panel's columns: Dawid–Skene and MACE on the nominal aspect, rater severity on the ordered one.
COLUMNS = [("factuality", "dawid-skene"), ("factuality", "mace"), ("amount_info", "severity")]


def campaign_rated(researcher: User, users: list[User], plans: list[Scores]) -> Campaign:
    campaign = study(researcher, users, items=ITEMS, raters_per_item=len(users))
    # factuality's labels become unordered classes, so the panel fits Dawid–Skene and MACE to it and severity to
    # amount_info.
    campaign.dataset.aspects.filter(name="factuality").update(level="nominal")
    for position in range(ITEMS):
        for user, plan in zip(users, plans, strict=True):
            rate(campaign, position, user, plan)
    return campaign


def expected(plans: dict[str, Scores], aspect: str, model: str) -> dict[str, float | None]:
    """Each rater's reliability, fitted here from the plan (items are (position, system)), not from the database."""
    triples = [
        ((position, system), rater, plan(position, system, aspect))
        for rater, plan in plans.items()
        for position in range(ITEMS)
        for system in SYSTEMS
    ]
    result = fit_rater_model(model, triples)
    assert result["undefined"] is None
    return {str(r["rater"]): r["reliability"]["value"] for r in result["raters"]}


def shown(html: str, name: str) -> list[float]:
    """The figures of `name`'s row in the reliability table, as printed (two decimals)."""
    table = html[html.index('class="reliability-table"') :]
    table = table[: table.index("</table>")]
    row = table[table.index(f'<th scope="row">{name}</th>') :]
    row = row[: row.index("</tr>")]
    return [float(cell) for cell in re.findall(r"<td>(.*?)</td>", row)]


def printed(values: list[float | None]) -> list[object]:
    """What two printed decimals of `values` may read: the fit on the database's ratings and the one on the plan
    agree to rounding error, which may tip a value that lies on a rounding boundary either way."""
    return [pytest.approx(value, abs=0.005 + 1e-6) for value in values]


@pytest.fixture
def three(researcher, annotators):  # type: ignore[no-untyped-def]
    campaign = campaign_rated(researcher, annotators, list(PLANS.values()))
    pseudonym = {user.pk: Rater.objects.get(user=user).pseudonym for user in annotators}
    return campaign, {plan: pseudonym[user.pk] for plan, user in zip(PLANS, annotators, strict=True)}


def test_the_panel_shows_the_rater_models_reliabilities(three, researcher, annotators):
    campaign, rater_of = three
    plans = {rater_of[name]: plan for name, plan in PLANS.items()}
    want = {column: expected(plans, *column) for column in COLUMNS}
    table = quality_panel(campaign).reliability
    assert [model for _aspect, model in table.columns] == ["Dawid–Skene", "MACE", "rater severity"]
    assert table.undefined == []
    got = {row.pseudonym: [cell.value for cell in cells] for row, cells in table.rows}
    for rater in plans:
        assert got[rater] == pytest.approx([want[column][rater] for column in COLUMNS], abs=1e-9)
    # The careful rater is the most reliable on the ordered aspect, the often-wrong one the least; MACE finds the
    # exact rater the most competent on the nominal one.
    competence = want[("factuality", "mace")]
    assert competence[rater_of["exact"]] == max(competence.values())
    severity = want[("amount_info", "severity")]
    assert severity[rater_of["exact"]] > severity[rater_of["mostly"]] > severity[rater_of["often_off"]]
    response = client_for(researcher).get(reverse("campaign-progress", args=[campaign.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Reliability (rater model)" in html
    for user in annotators:
        pseudonym = Rater.objects.get(user=user).pseudonym
        assert shown(html, user.username) == printed([want[column][pseudonym] for column in COLUMNS])


def test_one_rater_leaves_every_aspect_undefined_with_the_reason(researcher, annotator1):
    campaign = campaign_rated(researcher, [annotator1], [truth])
    table = quality_panel(campaign).reliability
    reason = "one rater: a rater model needs at least two raters to compare"
    assert table.rows == [] and table.columns == []
    assert [(model, why) for _aspect, model, why in table.undefined] == [
        ("Dawid–Skene", reason),
        ("MACE", reason),
        ("rater severity", reason),
    ]
    html = client_for(researcher).get(reverse("campaign-progress", args=[campaign.pk])).content.decode()
    assert 'class="reliability-table"' not in html
    for model in ("Dawid–Skene", "MACE", "rater severity"):
        assert f"({model}): undefined: {reason}" in html


def test_an_exclusion_removes_the_rater_from_the_fit(three, researcher, annotators):
    campaign, rater_of = three
    left_out = Rater.objects.get(pseudonym=rater_of["often_off"], user__isnull=False)
    response = post(
        client_for(researcher),
        reverse("rater-exclude", args=[campaign.pk, left_out.pk]),
        {"reason": "often off"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    html = response.content.decode()
    kept = {rater_of[name]: PLANS[name] for name in ("exact", "mostly")}
    want = {column: expected(kept, *column) for column in COLUMNS}
    table = html[html.index('class="reliability-table"') :]
    assert f'<th scope="row">{left_out.user.username}</th>' not in table[: table.index("</table>")]
    for user in annotators[:2]:
        pseudonym = Rater.objects.get(user=user).pseudonym
        assert shown(html, user.username) == printed([want[column][pseudonym] for column in COLUMNS])
