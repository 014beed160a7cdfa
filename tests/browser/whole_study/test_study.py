"""The whole study in one real Chromium session per language, never through the admin: a researcher imports a
dataset with its rubric, marks a gold item from its page, builds a campaign and its adjudication rule, invites three
annotators who set their passwords and rate so that exactly two tasks are disputed; an adjudicator settles both; the
researcher excludes a rater and sees the quality panel change without a reload (the rater model's reliabilities, as
`manage.py rater_model` fits them, refitted without the excluded rater), then downloads the JSONL export with the
consensus beside the untouched raw ratings.

Screenshots of every step go to tests/artifacts/ (gitignored)."""

import json
import re
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import Page, expect

from annotations.models import (
    Adjudication,
    Campaign,
    Dataset,
    Dispute,
    GoldItem,
    Item,
    Rater,
    Rating,
)
from tests.annotate.factories import lfqa_lines
from tests.browser.pages import log_in
from tests.browser.whole_study.sessions import Session, shot
from tests.commands import command_json
from tests.conftest import CAST_PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


NEW_PASSWORD = "a-long-and-unusual-passphrase-91"
RATERS = ("rater_a", "rater_b", "rater_c")
# What each rater gives answer k (the k-th system) of item qi, on the 0-3 accuracy scale. With the rule "disputed
# when the ratings of one answer differ by more than 1", q0 (answer 0: 0, 3, 1) and q1 (answer 1: 3, 0, 3) are
# disputed; the answers of q2-q5 spread by 1 at most, so they are not; q6 is the gold item, where everyone gives its
# value. rater_b disagrees with the others: rater_a's agreement (Spearman's rho against the mean of the other raters
# over the twelve answers of q0-q5) is 0.69 with rater_b counted and 0.92 against rater_c alone, computed with
# scipy.stats.spearmanr (average ranks for ties) on the lists below.
RATED = {
    "rater_a": [(0, 1), (2, 3), (0, 3), (1, 2), (3, 0), (2, 1)],
    "rater_b": [(3, 1), (2, 0), (0, 3), (2, 3), (2, 0), (3, 2)],
    "rater_c": [(1, 1), (2, 3), (1, 2), (1, 2), (3, 1), (2, 1)],
}
GOLD_ITEM, GOLD_VALUE = "q6", 2
VALUES = {
    username: {(f"q{i}", k): value for i, pair in enumerate(pairs) for k, value in enumerate(pair)}
    | {(GOLD_ITEM, 0): GOLD_VALUE, (GOLD_ITEM, 1): GOLD_VALUE}
    for username, pairs in RATED.items()
}
ADJUDICATED = 2
RUBRIC = {
    "aspects": [
        {
            "name": "accuracy",
            "label": {"en": "Accuracy", "ja": "正確さ"},
            "description": {"en": "Are the claims correct?", "ja": "記述は正しいか。"},
            "min": 0,
            "max": 3,
            "ideal": 3,
            "level": "ordinal",
            "labels": {"0": {"en": "wrong", "ja": "誤り"}, "3": {"en": "correct", "ja": "正しい"}},
        }
    ]
}
EXCLUDED = {"en": "excluded", "ja": "除外中"}
COUNTED = {"en": "counted", "ja": "集計対象"}


def write_files(tmp_path: Path) -> tuple[str, str]:
    lines = lfqa_lines(7, systems=2)
    data = tmp_path / "whole-study.jsonl"
    data.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    rubric = tmp_path / "whole-study.rubric.json"
    rubric.write_text(json.dumps(RUBRIC, ensure_ascii=False), encoding="utf-8")
    return str(data), str(rubric)


def reliabilities_shown(page: Page) -> dict[str, str]:
    """The quality panel's rater-model table: account name → reliability as shown."""
    rows = page.locator("section.quality-panel table.reliability-table tbody tr")
    return {
        rows.nth(index).locator("th").inner_text().strip(): rows.nth(index).locator("td").inner_text().strip()
        for index in range(rows.count())
    }


def reliabilities_fitted(campaign: Campaign) -> dict[str, str]:
    """`manage.py rater_model --model severity --campaign C --json` on the same ratings, by account name, as shown."""
    report = command_json(
        "rater_model", "--dataset", campaign.dataset.name, "--model", "severity", "--campaign", campaign.name
    )
    accounts = dict(Rater.objects.filter(dataset=campaign.dataset).values_list("pseudonym", "user__username"))
    return {
        accounts[rater["rater"]]: f"{rater['reliability']['value']:.2f}"
        for rater in report["aspects"]["accuracy"]["raters"]
    }


def rate_every_task(page: Page, base: str, campaign: Campaign, values: dict[tuple[str, int], int]) -> int:
    """Rates the tasks the campaign gives this rater until it has none left, reading which item and which answer
    each candidate is from the texts shown; returns how many tasks were rated."""
    page.goto(f"{base}/annotate/{campaign.pk}/")
    with page.expect_navigation():
        page.locator("form button.primary[autofocus]").click()
    rated = 0
    while "/tasks/" in page.url:
        prompt = page.locator(".turn.prompt").inner_text()
        item = "q" + re.search(r"Question (\d+) turn", prompt).group(1)  # type: ignore[union-attr]
        candidates = page.locator("#task-form section.candidate")
        expect(candidates).to_have_count(2)
        for index in range(2):
            candidate = candidates.nth(index)
            answer = re.search(r"Answer number (\d+) to", candidate.locator(".answer").inner_text())
            value = values[(item, int(answer.group(1)))]  # type: ignore[union-attr]
            buttons = candidate.locator(".scale-buttons")
            buttons.locator("label").filter(has=page.locator(f"input[value='{value}']")).click()
            expect(buttons.locator(f"input[value='{value}']")).to_be_checked()
        previous = page.url
        page.locator("#task-form button[type=submit].primary").click()
        page.wait_for_url(lambda url, previous=previous: url != previous)  # type: ignore[misc]
        rated += 1
    expect(page).to_have_url(f"{base}/annotate/{campaign.pk}/")
    return rated


def test_the_whole_study_from_login_to_the_consensus_export_without_the_admin(  # type: ignore[no-untyped-def]
    live_server, session: Session, locale: str, researcher, tmp_path
) -> None:
    base = live_server.url
    tag = locale[:2]
    # The adjudicator is put in a team the researcher belongs to, which is how an operator makes two people work
    # together; naming them on the campaign's adjudication page gives them the adjudicator role.
    adjudicator = User.objects.create_user("adjudicator1", password=CAST_PASSWORD)
    team = Group.objects.create(name="whole-study team")
    team.user_set.add(researcher, adjudicator)
    data_file, rubric_file = write_files(tmp_path)

    # 1. Import with a preview first.
    page = session.page()
    log_in(page, base, "researcher", by_label=False)
    page.goto(f"{base}/research/import/")
    page.locator("#id_name").fill("whole study")
    page.locator("#id_file").set_input_files(data_file)
    page.locator("#id_rubric").set_input_files(rubric_file)
    with page.expect_navigation():
        page.locator("button[name=preview]").click()
    preview = page.locator(".import-preview")
    expect(preview).to_contain_text("accuracy")
    expect(preview).to_contain_text("0–3")
    expect(page.locator(".item-preview").first).to_contain_text("Question 0 turn 0")
    assert not Dataset.objects.filter(name="whole study").exists()
    shot(page, tag, "1-import-preview")
    page.locator("#id_file").set_input_files(data_file)
    page.locator("#id_rubric").set_input_files(rubric_file)
    with page.expect_navigation():
        page.locator("button[name=import]").click()
    dataset = Dataset.objects.get(name="whole study")
    expect(page).to_have_url(f"{base}/research/datasets/{dataset.pk}/items/")
    expect(page.locator(".item-table tbody tr")).to_have_count(7)
    shot(page, tag, "1-imported-items")

    # 2. The researcher marks the gold item from its page with the scale buttons. This comes before the campaign: an
    # item a campaign already handed out as a regular task cannot become gold there, its ratings count as the dataset's.
    gold_item = Item.objects.get(dataset=dataset, external_id=GOLD_ITEM)
    page.goto(f"{base}/research/datasets/{dataset.pk}/items/")
    with page.expect_navigation():
        page.locator(".item-table").get_by_role("link", name=GOLD_ITEM, exact=True).click()
    expect(page).to_have_url(f"{base}/research/datasets/{dataset.pk}/items/{gold_item.pk}/")
    systems = page.locator(".gold-form fieldset.gold-system")
    expect(systems).to_have_count(2)
    for index in range(2):
        systems.nth(index).locator("label.scale-button").filter(
            has=page.locator(f"input[value='{GOLD_VALUE}']")
        ).click()
    shot(page, tag, "2-gold-marking")
    with page.expect_navigation():
        page.locator(".gold-form button[type=submit]").click()
    expect(page.locator(".messages")).to_be_visible()
    gold = GoldItem.objects.get(item=gold_item)
    assert gold.expected == {system: {"accuracy": GOLD_VALUE} for system in ("sys_alpha", "sys_beta")}
    shot(page, tag, "2-gold-marked")

    # 3. The campaign builder (a gold rate of one task in two), then the adjudication rule from the progress page.
    page.goto(f"{base}/research/campaigns/new/?dataset={dataset.pk}")
    aspects = page.locator("input[name=aspects]")
    expect(aspects).to_have_count(1)
    aspects.check()
    page.locator("#id_name").fill("whole study pilot")
    page.locator("#id_raters_per_item").fill("3")
    page.locator("#id_ask_preference").uncheck()
    page.locator("#id_rationale_required").uncheck()
    page.locator("#id_gold_rate").fill("0.5")
    shot(page, tag, "3-builder")
    with page.expect_navigation():
        page.locator("button[name=create]").click()
    campaign = Campaign.objects.get(name="whole study pilot", dataset=dataset)
    expect(page).to_have_url(f"{base}/campaigns/{campaign.pk}/progress/")
    assert campaign.raters_per_item == 3
    assert list(campaign.aspects.values_list("name", flat=True)) == ["accuracy"]
    with page.expect_navigation():
        page.locator(f"a[href='/campaigns/{campaign.pk}/adjudication/']").click()
    page.locator("#id_max_spread").fill("1")
    page.locator("label", has_text="adjudicator1").locator("input[name=adjudicators]").check()
    expect(page.locator("input[name=adjudicators]")).to_have_count(1)
    shot(page, tag, "3-adjudication-rule")
    with page.expect_navigation():
        page.locator("form.settings-form button[type=submit]").click()
    expect(page.locator(".messages")).to_be_visible()
    assert list(campaign.adjudication_rule.adjudicators.all()) == [adjudicator]

    # 4. Three invitations; each annotator opens the link in a fresh context, sets a password, signs in and rates.
    links = {}
    for username in RATERS:
        page.goto(f"{base}/research/annotators/")
        invite_form = page.locator("form[action='/research/annotators/invite/']")
        invite_form.locator("input[name=username]").fill(username)
        invite_form.locator("select[name=campaign]").select_option(str(campaign.pk))
        with page.expect_navigation():
            invite_form.locator("button[type=submit]").click()
        links[username] = page.locator("#invite-link").input_value()
        assert links[username].startswith(f"{base}/research/invite/")
    shot(page, tag, "4-invitation")
    for username in RATERS:
        rater = session.page()
        rater.goto(links[username])
        expect(rater.locator("html")).to_have_attribute("lang", tag)
        if username == RATERS[0]:
            shot(rater, tag, "4-set-password")
        rater.locator("#id_password1").fill(NEW_PASSWORD)
        rater.locator("#id_password2").fill(NEW_PASSWORD)
        with rater.expect_navigation():
            rater.locator("form.research-form button[type=submit]").click()
        expect(rater).to_have_url(f"{base}/accounts/login/")
        rater.locator("#id_username").fill(username)
        rater.locator("#id_password").fill(NEW_PASSWORD)
        with rater.expect_navigation():
            rater.keyboard.press("Enter")
        expect(rater).to_have_url(f"{base}/")
        expect(rater.locator("main")).to_contain_text("whole study pilot")
        assert rate_every_task(rater, base, campaign, VALUES[username]) == 7
        shot(rater, tag, f"4-{username}-done")
    # Six regular tasks of two answers and the gold task for each rater; the imported file holds no ratings.
    assert Rating.objects.count() == 3 * 7 * 2
    disputes = Dispute.objects.filter(campaign=campaign).select_related("task")
    assert disputes.count() == 2
    raw_before = sorted(Rating.objects.values_list("id", "value"))

    # 5. The adjudicator settles both disputes with the scale buttons and a reason.
    judge = session.page()
    log_in(judge, base, "adjudicator1", by_label=False)
    with judge.expect_navigation():
        judge.locator("section[aria-labelledby=my-disputes] a").click()
    expect(judge.locator("#dispute-queue tbody tr")).to_have_count(2)
    shot(judge, tag, "5-queue")
    for round_number in (1, 2):
        with judge.expect_navigation():
            judge.locator("#dispute-queue tbody tr a").first.click()
        for username in RATERS:
            expect(judge.locator("main")).not_to_contain_text(username)
        fieldsets = judge.locator("#adjudication-form fieldset.scale-field")
        expect(fieldsets).not_to_have_count(0)
        for index in range(fieldsets.count()):
            fieldsets.nth(index).locator("label.scale-button").filter(
                has=judge.locator(f"input[value='{ADJUDICATED}']")
            ).click()
        judge.locator("#adjudication-reason").fill(f"the claims are mostly right (round {round_number})")
        if round_number == 1:
            shot(judge, tag, "5-dispute")
        with judge.expect_navigation():
            judge.locator("#adjudication-form button[type=submit]").click()
        expect(judge.locator(".messages .success")).to_be_visible()
    expect(judge.locator("#dispute-queue tbody tr")).to_have_count(1)  # the empty-queue row
    shot(judge, tag, "5-queue-empty")
    assert set(Adjudication.objects.values_list("value", flat=True)) == {ADJUDICATED}
    assert sorted(Rating.objects.values_list("id", "value")) == raw_before

    # 6. Excluding rater_b changes the panel in place: the row says excluded, rater_a's agreement changes.
    page.goto(f"{base}/campaigns/{campaign.pk}/progress/")
    panel = page.locator("section.quality-panel")
    rows = panel.locator(".quality-table tbody tr")
    excluded_row = rows.filter(has=page.get_by_role("rowheader", name="rater_b", exact=True))
    other_row = rows.filter(has=page.get_by_role("rowheader", name="rater_a", exact=True))
    # The status cell opens with the status word; its help texts may use the same words further on.
    expect(excluded_row.locator("td").last).to_have_text(re.compile(rf"^\s*{COUNTED[tag]}"))
    expect(other_row.locator("td").nth(4)).to_contain_text("0.69")
    before = reliabilities_fitted(campaign)
    assert set(before) == set(RATERS)
    assert reliabilities_shown(page) == before
    page.evaluate("window.notReloaded = true")
    shot(page, tag, "6-panel-before")
    excluded_row.locator("input[name=reason]").fill("disagrees with everyone on the disputed answers")
    excluded_row.locator("button[type=submit]").click()
    expect(excluded_row.locator("td").last).to_have_text(re.compile(rf"^\s*{EXCLUDED[tag]}"))
    expect(other_row.locator("td").nth(4)).to_contain_text("0.92")
    # The rater model is refitted without rater_b, as the command fits it now the exclusion is recorded.
    after = reliabilities_fitted(campaign)
    assert set(after) == {"rater_a", "rater_c"} and after != {rater: before[rater] for rater in after}
    expect(page.locator("section.quality-panel table.reliability-table tbody tr")).to_have_count(2)
    assert reliabilities_shown(page) == after
    assert page.evaluate("window.notReloaded") is True
    shot(page, tag, "6-panel-after")

    # 7. The JSONL export: the consensus beside the raw ratings of the two adjudicated tasks.
    with page.expect_download() as download:
        page.locator(f"a[href='/datasets/{dataset.pk}/export/jsonl/']").click()
    exported = {
        line["id"]: line
        for line in map(json.loads, Path(download.value.path()).read_text(encoding="utf-8").splitlines())
    }
    assert sorted(exported) == [f"q{i}" for i in range(7)]
    systems_by_index = ("sys_alpha", "sys_beta")
    for item_id in ("q0", "q1"):
        responses = exported[item_id]["turns"][0]["responses"]
        for index, system in enumerate(systems_by_index):
            raw = sorted(VALUES[username][(item_id, index)] for username in RATERS)
            assert sorted(responses[system]["human_evals"]["accuracy"]) == raw, (item_id, system)
        disputed_index = 0 if item_id == "q0" else 1
        assert responses[systems_by_index[disputed_index]]["consensus"] == {"accuracy": ADJUDICATED}
    for item_id in sorted(set(exported) - {"q0", "q1"}):
        for answer in exported[item_id]["turns"][0]["responses"].values():
            assert "consensus" not in answer, item_id
    assert sorted(Rating.objects.values_list("id", "value")) == raw_before
    assert session.admin_requests == []
