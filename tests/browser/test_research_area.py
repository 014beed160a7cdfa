"""A researcher runs the set-up of a study in real Chromium without the admin: imports a small dataset with a
preview, builds a campaign (only the dataset's own aspects, a task preview), invites an annotator who sets a password
and signs in, filters the items, opens one and marks it gold with the scale controls. Every research page passes
axe-core (no serious or critical finding) and scrolls no page sideways at 390 px or 1,280 px, in English and Japanese.

Screenshots go to tests/artifacts/ (gitignored)."""

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from annotations.models import AnnotatorInvite, Campaign, Dataset, GoldItem, Item
from tests.annotate.factories import lfqa_lines, make_dataset
from tests.browser import pages
from tests.browser.pages import log_in, open_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NEW_PASSWORD = "a-long-and-unusual-passphrase-91"


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with open_page(browser, clean=True) as page:
        yield page


def study_file(tmp_path) -> str:  # type: ignore[no-untyped-def]
    lines = lfqa_lines(3, systems=2)
    for line in lines:
        for answer in line["turns"][0]["responses"].values():
            answer["human_evals"] = {"factuality": [2, 2]}
    # One answer of q2 splits its raters: a spread of 3 points.
    next(iter(lines[2]["turns"][0]["responses"].values()))["human_evals"] = {"factuality": [1, 4]}
    path = tmp_path / "study.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    return str(path)


def check_layout(page: Page, name: str) -> None:
    pages.check_layout(page, f"research-{name}")


def test_a_study_is_set_up_in_the_research_area(live_server, browser, page: Page, researcher, tmp_path) -> None:  # type: ignore[no-untyped-def]
    base = live_server.url
    make_dataset("other study", owner=researcher, items=1, systems=2)
    log_in(page, base, "researcher")
    with page.expect_navigation():
        page.get_by_role("link", name="Research", exact=True).click()
    check_layout(page, "home-en")

    # Import, with a preview of the rubric and the first items first.
    with page.expect_navigation():
        page.locator(".research-nav").get_by_role("link", name="Import", exact=True).click()
    page.get_by_label("Name").fill("study")
    page.get_by_label("File").set_input_files(study_file(tmp_path))
    with page.expect_navigation():
        page.get_by_role("button", name="Preview").click()
    expect(page.locator(".import-preview")).to_contain_text("factuality")
    expect(page.locator(".item-preview").first).to_contain_text("Question 0 turn 0")
    assert not Dataset.objects.filter(name="study").exists()
    check_layout(page, "import-preview-en")
    page.get_by_label("File").set_input_files(study_file(tmp_path))
    with page.expect_navigation():
        page.get_by_role("button", name="Import", exact=True).click()
    dataset = Dataset.objects.get(name="study")
    expect(page).to_have_url(f"{base}/research/datasets/{dataset.pk}/items/")

    # The campaign builder offers this dataset's one aspect, not the other dataset's two, and previews a task.
    with page.expect_navigation():
        page.get_by_role("link", name="New campaign").click()
    page.get_by_label("Dataset").select_option(label="study")
    with page.expect_navigation():
        page.get_by_role("button", name="Continue").click()
    aspects = page.locator('input[name="aspects"]')
    expect(aspects).to_have_count(1)
    expect(page.locator(".campaign-builder")).not_to_contain_text("Amount Info")
    page.get_by_label("Campaign name").fill("pilot")
    page.get_by_label("Raters per task").fill("1")
    with page.expect_navigation():
        page.get_by_role("button", name="Preview a task").click()
    preview = page.locator("#task-preview")
    expect(preview).to_contain_text("Candidate 1")
    expect(preview).to_contain_text("Question 0 turn 0")
    expect(preview.locator(".scale-buttons").first).to_be_visible()
    assert not Campaign.objects.filter(name="pilot").exists()
    check_layout(page, "builder-preview-en")
    with page.expect_navigation():
        page.get_by_role("button", name="Create the campaign").click()
    campaign = Campaign.objects.get(name="pilot", dataset=dataset)
    expect(page).to_have_url(f"{base}/campaigns/{campaign.pk}/progress/")

    # Invite an annotator into the campaign's pool; they set a password through the link and sign in.
    page.goto(f"{base}/research/annotators/")
    page.get_by_label("User name").fill("newrater")
    page.get_by_label("Add to the pool of").select_option(label="pilot")
    with page.expect_navigation():
        page.get_by_role("button", name="Create the invitation link").click()
    link = page.get_by_label("Invitation link").input_value()
    assert "/research/invite/" in link
    assert link.rsplit("/", 2)[-2] not in AnnotatorInvite.objects.get().token_hash
    check_layout(page, "annotators-en")
    invited = browser.new_context(viewport={"width": 390, "height": 844}, locale="en-US")
    invitee = invited.new_page()
    invitee.goto(link)
    check_layout(invitee, "invite-accept-en")
    invitee.get_by_label("Password", exact=True).fill(NEW_PASSWORD)
    invitee.get_by_label("Password again").fill(NEW_PASSWORD)
    with invitee.expect_navigation():
        invitee.get_by_role("button", name="Set the password").click()
    expect(invitee).to_have_url(f"{base}/accounts/login/")
    invitee.get_by_label("Username").fill("newrater")
    invitee.get_by_label("Password").fill(NEW_PASSWORD)
    with invitee.expect_navigation():
        invitee.keyboard.press("Enter")
    expect(invitee).to_have_url(f"{base}/")
    expect(invitee.locator("main")).to_contain_text("pilot")
    invited.close()
    page.goto(f"{base}/research/annotators/")
    expect(page.locator("tr", has_text="newrater")).to_contain_text("pilot")

    # Browse with a filter, open the item, mark it gold with the scale buttons.
    page.goto(f"{base}/research/datasets/{dataset.pk}/items/")
    page.get_by_label("Spread at least").fill("3")
    with page.expect_navigation():
        page.get_by_role("button", name="Filter").click()
    rows = page.locator(".item-table tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("q2")
    check_layout(page, "items-en")
    with page.expect_navigation():
        page.get_by_role("link", name="q2").click()
    expect(page.locator("main")).to_contain_text("Question 2 turn 0")
    expect(page.locator("main")).to_contain_text("Answer number 1 to 2/0.")
    page.get_by_role("link", name="Mark as gold").first.click()
    first_system = page.locator(".gold-system").first
    first_system.locator(".scale-button", has_text="2").first.click()
    with page.expect_navigation():
        page.get_by_role("button", name="Mark as gold").click()
    expect(page.locator(".messages")).to_contain_text("The item is marked as gold.")
    gold = GoldItem.objects.get(item=Item.objects.get(dataset=dataset, external_id="q2"))
    assert gold.expected == {"sys_alpha": {"factuality": 2}}
    check_layout(page, "item-en")

    # The same pages in Japanese.
    page.locator("#lang-select").select_option("ja")
    page.wait_for_function("document.documentElement.lang === 'ja'")
    expect(page.locator("h2#gold-h")).to_have_text("ゴールドの値")
    check_layout(page, "item-ja")
    for name, path in (
        ("home-ja", "/research/"),
        ("items-ja", f"/research/datasets/{dataset.pk}/items/?spread=3"),
        ("builder-ja", f"/research/campaigns/new/?dataset={dataset.pk}"),
        ("annotators-ja", "/research/annotators/"),
        ("import-ja", "/research/import/"),
    ):
        page.goto(f"{base}{path}")
        expect(page.locator(".research-nav")).to_contain_text("インポート")
        check_layout(page, name)
