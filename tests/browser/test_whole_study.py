"""The whole study in one real Chromium session per language, never through the admin: a researcher imports a
dataset with its rubric, marks a gold item from its page, builds a campaign and its adjudication rule, invites three
annotators who set their passwords and rate so that exactly two tasks are disputed; an adjudicator settles both; the
researcher excludes a rater and sees the quality panel change without a reload (the rater model's reliabilities, as
`manage.py rater_model` fits them, refitted without the excluded rater), then downloads the JSONL export with the
consensus beside the untouched raw ratings.

Two more studies share its sessions, one seam each, in the same two languages: two annotators mark error spans on an
MQM span aspect (one by keys, one with the mouse) and one corrects a category on a revisit, and the stored ratings, the
JSONL and flat CSV downloads and the quality panel's span agreement must all say what was marked, before and after;
and a hybrid campaign samples its human tasks by the judge's uncertainty until its stopping rule is met, and the
progress page, the annotator's next claim (from a tab opened before the stop) and the downloaded exports must all
agree with the database. (One study holding all three would run past a few minutes.)

Screenshots of every step go to tests/artifacts/ (gitignored)."""

import csv
import io
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import Browser, Page, expect

from annotations.models import (
    Adjudication,
    Assignment,
    AssignmentStatus,
    Campaign,
    Dataset,
    Dispute,
    GoldItem,
    Item,
    Rater,
    Rating,
    RatingOrigin,
    Task,
)
from judging.models import HybridApplyStatus, HybridCalibration
from judging.statistics.sequences import confidence_sequence
from tests.annotate.factories import lfqa_lines
from tests.browser import test_hybrid_campaign as hybrid_browser
from tests.browser.pages import ARTIFACTS, log_in
from tests.browser.test_active_sampling_stop import rate_until_stopped
from tests.browser.test_error_spans import WRONG, drag_over, graphemes, keyboard_mark, task_text
from tests.commands import command_json
from tests.conftest import CAST_PASSWORD, wait_for
from tests.fakeprovider import FakeProvider
from tests.spans.world import ANSWERS, SPAN_RUBRIC, span_campaign

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


@pytest.fixture(params=["en-US", "ja-JP"])
def locale(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Session:
    """Fresh browser contexts in one language; collects page errors and every request that reaches the admin."""

    def __init__(self, browser: Browser, locale: str) -> None:
        self.browser = browser
        self.locale = locale
        self.contexts: list = []  # type: ignore[type-arg]
        self.problems: list[str] = []
        self.admin_requests: list[str] = []

    def page(self) -> Page:
        context = self.browser.new_context(
            viewport={"width": 1280, "height": 900}, locale=self.locale, accept_downloads=True
        )
        self.contexts.append(context)
        context.on("request", lambda request: self._record(request.url))
        page = context.new_page()
        page.on("pageerror", lambda exc: self.problems.append(f"pageerror: {exc}"))
        page.on("console", lambda msg: self.problems.append(msg.text) if msg.type == "error" else None)
        return page

    def _record(self, url: str) -> None:
        if "/admin/" in url:
            self.admin_requests.append(url)


@pytest.fixture
def session(browser: Browser, locale: str) -> Iterator[Session]:
    opened = Session(browser, locale)
    yield opened
    for context in opened.contexts:
        context.close()
    assert opened.problems == []


def shot(page: Page, tag: str, step: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"whole-study-{tag}-{step}.png"), full_page=True)


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


# ---------------------------------------------------------------- error spans: the rating, the downloads, the panel

# What each annotator marks on every answer of the span world: the first, by keys, the wrong word as a major grammar
# error; the second, with the mouse, a wider stretch around it (test_error_spans.WRONG) as a minor grammar error.
SPAN_MARKS = {"annotator1": (0, "Fluency/Grammar", "major"), "annotator2": (1, "Fluency/Grammar", "minor")}
# The first annotator then corrects the category of the first answer's error, which leaves its MQM score as it was.
CORRECTED = (ANSWERS[0], "Fluency/Spelling")
SEVERITY_WEIGHTS = SPAN_RUBRIC["aspects"][0]["spans"]["severities"]
SPAN_COUNTS = {
    "en": "3 answers marked by two or more raters; 2 raters.",
    "ja": "2人以上の評価者が付けた回答 3 件、評価者 2 人。",
}
ONE_PAIR = {"en": "1 of 1", "ja": "1 組中 1 組"}
Located = list[tuple[int, int, str]]  # one rating's spans: start, end (code points), category


def mark_by_keys(page: Page, text: str, stretch: str) -> None:
    """s … e over the stretch, m, then the second category (ArrowDown) and severity (ArrowRight); Enter saves."""
    page.locator("#r-1-1").focus()
    keyboard_mark(page, graphemes(text[: text.index(stretch)]), graphemes(stretch), with_shift=False)
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Tab")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")


def mark_by_mouse(page: Page, text: str, stretch: str) -> None:
    drag_over(page, text, stretch)
    page.locator("[data-span-mark]").click()
    page.locator("[data-span-category]").select_option("Fluency/Grammar")
    page.locator("[data-span-severity][value='minor']").click()
    page.locator("[data-span-save]").click()


def submit_task(page: Page) -> None:
    previous = page.url
    page.locator("form[data-task-form] button[type=submit]").click()
    page.wait_for_url(lambda url: url != previous)


def mark_every_task(page: Page, base: str, campaign: Campaign, username: str, tag: str) -> int:
    """Marks, on every task the campaign gives this annotator, the stretch SPAN_MARKS names, gives the scale aspect
    a 3 and submits; returns how many tasks were marked."""
    page.goto(f"{base}/annotate/{campaign.pk}/")
    with page.expect_navigation():
        page.locator("form button.primary[autofocus]").click()
    marked = 0
    while "/tasks/" in page.url:
        text = task_text(page)
        stretch = WRONG[text][SPAN_MARKS[username][0]]
        (mark_by_keys if username == "annotator1" else mark_by_mouse)(page, text, stretch)
        expect(page.locator("[data-span-list] li")).to_have_count(1)
        expect(page.locator("[data-span-list] li").first).to_contain_text(stretch)
        page.locator("label.scale-button:has(input[name='r-1-2'][value='3'])").click()
        if marked == 0:
            shot(page, tag, f"spans-{username}-marked")
        submit_task(page)
        marked += 1
    expect(page).to_have_url(f"{base}/annotate/{campaign.pk}/")
    return marked


def stored_spans(campaign: Campaign, corrected: bool) -> tuple[dict[tuple[str, str], Rating], dict[str, Located]]:
    """The span ratings by (item, pseudonym), each checked to hold what was marked (with the correction once made)
    in its ErrorSpan rows, its token and its MQM value; and each rating's spans by "text|pseudonym"."""
    ratings = Rating.objects.filter(aspect__dataset=campaign.dataset, aspect__name="mqm").select_related(
        "rater__user", "response__turn__item"
    )
    assert ratings.count() == len(SPAN_MARKS) * len(ANSWERS)
    located: dict[str, Located] = {}
    for rating in ratings:
        text, username = rating.response.text, rating.rater.user.username  # type: ignore[union-attr]
        index, category, severity = SPAN_MARKS[username]
        if corrected and (text, username) == (CORRECTED[0], "annotator1"):
            category = CORRECTED[1]
        spans: list[dict[str, Any]] = [
            dict(span)
            for span in rating.error_spans.order_by("position").values("start", "end", "category", "severity")
        ]
        assert [(text[s["start"] : s["end"]], s["category"], s["severity"]) for s in spans] == [
            (WRONG[text][index], category, severity)
        ], (username, text)
        assert isinstance(rating.raw, dict)
        assert [{key: span[key] for key in spans[0]} for span in rating.raw["spans"]] == spans
        assert rating.value == SEVERITY_WEIGHTS[severity]
        located[f"{text}|{rating.rater.pseudonym}"] = [(s["start"], s["end"], s["category"]) for s in spans]
    return {(r.response.turn.item.external_id, r.rater.pseudonym): r for r in ratings}, located


def download(page: Page, href: str) -> str:
    with page.expect_download() as info:
        page.locator(f".export-links a[href='{href}']").first.click()
    return Path(info.value.path()).read_text(encoding="utf-8")


def check_downloads(page: Page, campaign: Campaign, stored: dict[tuple[str, str], Rating]) -> None:
    """The JSONL's span tokens are the stored ones; the flat CSV has each rating's MQM value and one error_span row
    per stored span."""
    exported = download(page, f"/datasets/{campaign.dataset_id}/export/jsonl/")
    tokens = {
        (line["id"], rater): token
        for line in map(json.loads, exported.splitlines())
        for answer in line["turns"][0]["responses"].values()
        for rater, token in zip(answer["raters"], answer["human_evals"]["mqm"], strict=True)
    }
    assert tokens == {key: rating.raw for key, rating in stored.items()}
    assert all(not token["no_error"] and len(token["spans"]) == 1 for token in tokens.values())
    flat = csv.DictReader(io.StringIO(download(page, f"/datasets/{campaign.dataset_id}/export/flat-csv/")))
    rows = [row for row in flat if row["aspect"] == "mqm"]
    values = {(row["item_id"], row["rater"]): float(row["value"]) for row in rows if row["kind"] == "rating"}
    assert values == {key: rating.value for key, rating in stored.items()}
    spans = {(row["item_id"], row["rater"]): json.loads(row["raw"]) for row in rows if row["kind"] == "error_span"}
    assert len(spans) == len([row for row in rows if row["kind"] == "error_span"])
    assert spans == {
        key: {name: span[name] for name in ("start", "end", "category", "severity")}
        for key, rating in stored.items()
        for span in rating.error_spans.values("start", "end", "category", "severity")
    }


def pair_figures(marked: list[tuple[Located, Located]], convention: str) -> tuple[float, float, float]:
    """Precision, recall and F1 of the first rater's spans against the second's over the answers both marked, by
    the panel's conventions (docs/statistics.md): characters pooled, or spans matched by overlap or by the same
    offsets, with or without the category."""
    with_category = convention.endswith("category")
    if convention.startswith("character"):
        found = [
            (
                {(p, c if with_category else "") for s, e, c in a for p in range(s, e)},
                {(p, c if with_category else "") for s, e, c in b for p in range(s, e)},
            )
            for a, b in marked
        ]
        common = sum(len(a & b) for a, b in found)
        precision = common / sum(len(a) for a, _b in found)
        recall = common / sum(len(b) for _a, b in found)
    else:

        def matches(x: tuple[int, int, str], y: tuple[int, int, str]) -> bool:
            same_place = x[:2] == y[:2] if convention == "exact_category" else x[0] < y[1] and y[0] < x[1]
            return same_place and (not with_category or x[2] == y[2])

        precision = sum(any(matches(x, y) for y in b) for a, b in marked for x in a) / sum(len(a) for a, _b in marked)
        recall = sum(any(matches(x, y) for x in a) for a, b in marked for y in b) / sum(len(b) for _a, b in marked)
    return precision, recall, 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


CONVENTIONS = ("character", "character_category", "overlap", "overlap_category", "exact_category")  # panel order


def check_span_panel(page: Page, tag: str, located: dict[str, Located]) -> dict[str, float]:
    """The quality panel's span agreement shows the figures of the stored spans, worked out here from their offsets;
    returns each convention's F1."""
    first, second = sorted({key.split("|")[1] for key in located})
    marked = [(located[f"{text}|{first}"], located[f"{text}|{second}"]) for text in ANSWERS]
    figures = {convention: pair_figures(marked, convention) for convention in CONVENTIONS}
    panel = page.locator("#span-rater-agreement")
    expect(panel.locator("[data-span-counts]")).to_have_text(SPAN_COUNTS[tag])
    rows = panel.locator("table.span-pairwise tbody tr")
    expect(rows).to_have_count(len(CONVENTIONS))
    pairs = panel.locator("table.span-pairs tbody tr")
    panel.locator("details summary").click()
    for index, convention in enumerate(CONVENTIONS):
        precision, recall, f1 = figures[convention]
        expect(rows.nth(index).locator("td")).to_have_text([f"{f1:.3f}", ONE_PAIR[tag]])
        # The rater whose pseudonym sorts first is the candidate, the other the reference.
        expect(pairs.nth(index).locator("td")).to_have_text(
            [first, second, str(len(ANSWERS)), f"{precision:.3f}", f"{recall:.3f}", f"{f1:.3f}"]
        )
    return {convention: f1 for convention, (_p, _r, f1) in figures.items()}


def test_marked_error_spans_agree_in_the_rating_the_downloads_and_the_span_agreement_panel(  # type: ignore[no-untyped-def]
    live_server, session: Session, locale: str, researcher, annotator1, annotator2
) -> None:
    base = live_server.url
    tag = locale[:2]
    # Three answers (an emoji, Japanese without spaces, a combining mark), each a task for both annotators.
    campaign = span_campaign([annotator1, annotator2], owner=researcher, raters_per_item=2)
    annotators = {}
    for username in SPAN_MARKS:
        annotators[username] = session.page()
        log_in(annotators[username], base, username, by_label=False)
        assert mark_every_task(annotators[username], base, campaign, username, tag) == len(ANSWERS)

    # 1. The stored ratings hold what was marked; the downloads from the progress page say the same.
    stored, located = stored_spans(campaign, corrected=False)
    page = session.page()
    log_in(page, base, "researcher", by_label=False)
    page.goto(f"{base}/campaigns/{campaign.pk}/progress/")
    check_downloads(page, campaign, stored)

    # 2. The quality panel's span agreement: 2·10 / (10 + 17) code points of WRONG's stretches agree.
    before = check_span_panel(page, tag, located)
    assert f"{before['character']:.3f}" == "0.741" and before["overlap"] == 1.0 and before["exact_category"] == 0.0
    page.locator("#span-rater-agreement").screenshot(path=str(ARTIFACTS / f"whole-study-{tag}-spans-panel.png"))

    # 3. The first annotator corrects a category on a revisit: the score stays, the panel and the downloads follow.
    corrector = annotators["annotator1"]
    corrector.goto(f"{base}/annotate/{campaign.pk}/")
    prompt = f"Translate sentence {ANSWERS.index(CORRECTED[0])}."
    with corrector.expect_navigation():
        corrector.locator(".submitted-list a", has_text=prompt).click()
    expect(corrector.locator(".editing-notice")).to_be_visible()
    corrector.locator("[data-span-list] li").first.locator("[data-span-edit]").click()
    corrector.locator("[data-span-category]").select_option(CORRECTED[1])
    corrector.locator("[data-span-save]").click()
    expect(corrector.locator("[data-span-list] li").first).to_contain_text(WRONG[CORRECTED[0]][0])
    shot(corrector, tag, "spans-corrected")
    submit_task(corrector)
    stored, located = stored_spans(campaign, corrected=True)
    page.goto(f"{base}/campaigns/{campaign.pk}/progress/")
    after = check_span_panel(page, tag, located)
    assert after["character"] == before["character"] and after["character_category"] < before["character_category"]
    check_downloads(page, campaign, stored)
    assert session.admin_requests == []


# ---------------------------------------------------------------- a hybrid campaign sampled by uncertainty, to its stop

fake = hybrid_browser.fake  # the hybrid test's fake judge: sure below quality 5, hesitant at 5, on a real socket
HYBRID_ITEMS = hybrid_browser.ITEMS
STOP_WIDTH = 2.5
STOPPED_AFTER = {"en": "after {n} ratings", "ja": "{n} 件の評価の後"}


def test_a_campaign_sampled_by_uncertainty_stops_and_its_outputs_agree_with_the_database(  # type: ignore[no-untyped-def]
    live_server,
    session: Session,
    locale: str,
    researcher,
    annotator1,
    fake: FakeProvider,
    celery_worker_factory: Any,
    clean_broker: None,
) -> None:
    base = live_server.url
    tag = locale[:2]
    worker = celery_worker_factory(extra_env=hybrid_browser.WORKER_ENV)
    dataset, campaign, version = hybrid_browser.certified_campaign_with_a_judge_version(
        name="whole study hybrid", researcher=researcher, annotator=annotator1, fake=fake, worker=worker
    )

    # 1. On the hybrid settings page: uncertainty sampling and "width ≤ w" on llm_a, then calibrate and apply.
    page = session.page()
    log_in(page, base, "researcher", by_label=False)
    page.goto(f"{base}/research/campaigns/{campaign.pk}/hybrid/")
    sampling = page.locator("form.sampling-form")
    sampling.locator("select[name=human_sampling]").select_option("uncertainty")
    sampling.locator("input[name=human_share]").fill("0.5")
    sampling.locator("select[name=stop_rule]").select_option("width")
    sampling.locator("select[name=stop_aspect]").select_option(index=1)
    sampling.locator("select[name=stop_first]").select_option("llm_a")
    sampling.locator("input[name=stop_width]").fill(str(STOP_WIDTH))
    with page.expect_navigation():
        sampling.locator("button[type=submit]").click()
    expect(page.locator("ul.messages")).to_be_visible()
    campaign.refresh_from_db()
    assert (campaign.human_sampling, campaign.stop_rule, campaign.stop_width) == ("uncertainty", "width", STOP_WIDTH)
    calibrate = page.locator("form.hybrid-form")
    calibrate.locator("select[name=version]").select_option(str(version.pk))
    calibrate.locator("input[name=target]").fill("0.8")
    calibrate.locator("input[name=min_kept]").fill("10")
    with page.expect_navigation():
        calibrate.locator("button[type=submit]").click()
    shot(page, tag, "hybrid-settings")
    with page.expect_navigation():
        page.locator("form[action$='/apply/'] button[type=submit]").click()
    calibration = HybridCalibration.objects.get(campaign=campaign)
    wait_for(
        lambda: HybridCalibration.objects.filter(pk=calibration.pk, apply_status=HybridApplyStatus.DONE).exists(),
        timeout=180,
        message=f"the judge to fill its tasks; worker log:\n{worker.log()[-3000:]}",
    )
    tasks = Task.objects.filter(campaign=campaign).select_related("turn__item")
    probability = {task.turn.item.external_id: task.human_probability for task in tasks}
    assert len(probability) == HYBRID_ITEMS and all(p is not None and 0 < p <= 1 for p in probability.values())
    assert len(set(probability.values())) == 2  # the hesitant tasks are likelier to go to the raters
    sent = Assignment.objects.filter(campaign=campaign).exclude(status=AssignmentStatus.JUDGED).count()
    assert 0 < sent < HYBRID_ITEMS

    # 2. The annotator rates until the rule is met; a tab opened before that, still offering to start, is refused.
    rater = session.page()
    log_in(rater, base, annotator1.username, by_label=False)
    stale = rater.context.new_page()
    stale.on("pageerror", lambda exc: session.problems.append(f"pageerror: {exc}"))
    stale.goto(f"{base}/annotate/{campaign.pk}/")
    expect(stale.locator("form button.primary[autofocus]")).to_be_visible()
    rated = rate_until_stopped(rater, base, campaign)
    campaign.refresh_from_db()
    evidence = campaign.stop_evidence
    n = evidence["n"]
    assert campaign.stopped_at is not None and evidence["met"] and evidence["high"] - evidence["low"] <= STOP_WIDTH
    assert n <= rated <= n + 1  # at most the task leased before the stop was rated after it
    expect(rater.locator("#campaign-stopped")).to_contain_text(STOPPED_AFTER[tag].format(n=n))
    expect(rater.locator("form button.primary")).to_have_count(0)
    shot(rater, tag, "hybrid-annotator-stopped")
    free = Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.FREE).count()
    assert free == sent - rated > 0
    with stale.expect_navigation():
        stale.locator("form button.primary[autofocus]").click()
    expect(stale).to_have_url(f"{base}/annotate/{campaign.pk}/")
    expect(stale.locator("#campaign-stopped")).to_be_visible()
    assert Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.FREE).count() == free
    assert not Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.LEASED).exists()

    # 3. The progress page states the stored evidence, which is the confidence sequence of the stored ratings.
    aspect = campaign.stop_aspect
    assert aspect is not None
    given = Rating.objects.filter(response__turn__item__dataset=dataset, aspect=aspect, origin=RatingOrigin.APP)
    values = [
        float(value)
        for value in given.order_by("created_at", "pk").values_list("value", flat=True)
        if value is not None
    ]
    assert len(values) == rated
    last_look = confidence_sequence(values[:n], lower=aspect.min_value, upper=aspect.max_value)[-1]["interval"]
    assert (evidence["low"], evidence["high"]) == pytest.approx((last_look["low"], last_look["high"]))
    page.goto(f"{base}/campaigns/{campaign.pk}/progress/")
    stopped = page.locator("#stopping-met")
    expect(stopped).to_contain_text(f"n = {n}")
    expect(stopped).to_contain_text(evidence["decision"])
    expect(page.locator("svg.sequence-plot polyline")).to_have_count(2)
    expect(page.locator("#active-estimates tbody tr").first.locator("td").last).to_have_text(f"{rated} / {sent}")
    page.locator("#active-panel").screenshot(path=str(ARTIFACTS / f"whole-study-{tag}-hybrid-progress.png"))

    # 4. The downloads: each task's probability in the JSONL's answers and on the flat CSV's rows is the database's.
    exported = [json.loads(line) for line in download(page, f"/datasets/{dataset.pk}/export/jsonl/").splitlines()]
    sampled = {
        line["id"]: entry["probability"]
        for line in exported
        for answer in line["turns"][0]["responses"].values()
        for entry in answer.get("human_sampling", [])
        if entry["campaign"] == campaign.name
    }
    assert sampled == probability
    flat = list(csv.DictReader(io.StringIO(download(page, f"/datasets/{dataset.pk}/export/flat-csv/"))))
    rows = [row for row in flat if row["campaign"] == campaign.name and row["kind"] == "rating"]
    assert Counter(row["filled_by"] for row in rows) == {"judge": HYBRID_ITEMS - sent, "human": rated}
    assert {row["item_id"]: float(row["human_probability"]) for row in rows} == {
        row["item_id"]: probability[row["item_id"]] for row in rows
    }
    assert session.admin_requests == []
