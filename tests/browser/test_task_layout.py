"""The task page for long sessions, in real Chromium: one click per score in the button rows, the keyboard alone on
the lfqa-multiaspect preset (signed scales included), the first candidate above the fold, side-by-side and stacked
layouts without sideways scrolling, and axe-core (vendored in static/) finding no serious or critical violation.

Screenshots go to tests/artifacts/ (gitignored)."""

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import Browser, BrowserContext, Page, expect

from annotations.campaigns.setup import campaign_create
from annotations.campaigns.tasks import task_candidates
from annotations.datasets.importing import dataset_import
from annotations.models import Assignment, Rating, Submission
from annotations.rubrics.specs import preset_rubric
from tests.browser.pages import ARTIFACTS, axe_violations, log_in, shooter

SAMPLE = Path(settings.BASE_DIR) / "annotations" / "sample_data" / "lfqa_sample.jsonl"
SYSTEM_KEYS = ("model_formal", "model_casual", "human_top", "human_random")
ASPECTS = ("factuality", "acceptability", "amount_info", "formality")  # the preset's order on the page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def new_page(browser: Browser, *, width: int, height: int, scale: float = 1, locale: str = "en-US") -> Page:
    context = browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=scale, locale=locale)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    page.on("console", lambda msg: problems.append(f"console: {msg.text}") if msg.type == "error" else None)
    page.problems = problems  # type: ignore[attr-defined]
    return page


@pytest.fixture
def pages(browser: Browser) -> Iterator[list[Page]]:
    opened: list[Page] = []
    yield opened
    for page in opened:
        context: BrowserContext = page.context
        context.close()


shot = shooter("task-layout")


def make_campaign(owner, annotators, **options):  # type: ignore[no-untyped-def]
    with SAMPLE.open("rb") as stream:
        result = dataset_import(
            stream=stream, name="lfqa sample", rubric=preset_rubric("lfqa-multiaspect"), owner=owner
        )
    return campaign_create(
        name="Long session",
        dataset=result.dataset,
        raters_per_item=1,
        annotators=annotators,
        guidelines="Rate **every** candidate on every aspect.\n\n" + "Read the whole answer first. " * 30,
        **options,
    )


@pytest.fixture
def campaign(live_server, researcher, annotator1):  # type: ignore[no-untyped-def]
    return make_campaign(researcher, [annotator1])


def open_task(page: Page, base: str, campaign) -> str:  # type: ignore[no-untyped-def]
    page.goto(f"{base}/annotate/{campaign.pk}/")
    expect(page.locator("form button.primary[autofocus]")).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/tasks/[a-z2-7]{13}/$"))
    return page.url


def assert_blind(page: Page) -> None:
    html = page.content()
    for key in SYSTEM_KEYS:
        assert key not in html


def assert_no_horizontal_scroll(page: Page) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"page scrolls sideways by {overflow}px"


def stored_values(campaign, user) -> dict[tuple[int, str], float]:  # type: ignore[no-untyped-def]
    """(candidate number, aspect) -> stored value of the user's submitted task."""
    assignment = Assignment.objects.get(campaign=campaign, annotator=user, submission__isnull=False)
    numbers = {c.response_id: c.number for c in task_candidates(assignment=assignment, user_id=user.pk)}
    ratings = Rating.objects.filter(response_id__in=numbers, rater__user=user).select_related("aspect")
    return {(numbers[r.response_id], r.aspect.name): r.value for r in ratings}


def assert_first_candidate_above_the_fold(page: Page, name: str) -> None:
    """After the first task: the instructions closed, and the first candidate's answer and every one of its
    scores inside the window without scrolling."""
    expect(page.locator("details.instructions")).not_to_have_attribute("open", "")
    assert page.evaluate("window.scrollY") == 0
    page.screenshot(path=str(ARTIFACTS / f"task-layout-above-the-fold-{name}.png"))
    height = page.viewport_size["height"]  # type: ignore[index]
    answer = page.locator(".candidate").first.locator(".answer").bounding_box()
    assert answer and answer["y"] + 48 < height, "the first answer starts below the fold"
    for control in page.locator(".candidate").first.locator("[data-aspect-control]").all():
        box = control.bounding_box()
        assert box and box["y"] + box["height"] <= height, f"{control.get_attribute('id')} is below the fold"


def layout(page: Page) -> tuple[list[int], list[list[int]]]:
    """The top of each candidate, and for each aspect the tops of its score across the candidates."""
    return page.evaluate(
        """() => {
          const tops = (els) => els.map((el) => Math.round(el.getBoundingClientRect().top));
          const candidates = tops(Array.from(document.querySelectorAll(".candidate")));
          const cols = [...new Set(Array.from(document.querySelectorAll("[data-col]")).map((el) => el.dataset.col))];
          const rows = cols.map((col) => tops(Array.from(document.querySelectorAll(`[data-col='${col}']`))
            .map((el) => el.closest(".rating"))));
          return [candidates, rows];
        }"""
    )


def test_keyboard_only_on_the_multiaspect_preset_with_signed_scales(browser, pages, live_server, campaign, annotator1):
    page = new_page(browser, width=1280, height=800)
    pages.append(page)
    base = live_server.url
    log_in(page, base, annotator1.username, by_label=False)
    open_task(page, base, campaign)
    assert_blind(page)
    # four candidates of four aspects: every aspect a row of buttons, the first value focused
    assert page.locator("[role=radiogroup][data-aspect-control]").count() == 16
    assert page.locator("form[data-task-form] select").count() == 0
    expect(page.locator("#r-1-1 input[value='0']")).to_be_focused()
    # the key of a signed value is shown on its button; a digit that is its own value needs no hint
    expect(page.locator("#r-1-3 label").nth(0)).to_have_text(re.compile(r"^-\s+-1 · too little$"))
    expect(page.locator("#r-1-3 label").nth(2)).to_have_text(re.compile(r"^\+\s+1 · too much$"))
    expect(page.locator("#r-1-1 label").nth(3)).to_have_text("3 · accurate")
    shot(page, "keyboard-start")

    # the arrows step along a row (the browser's own radio keys), then a digit sets a value by value and moves on
    page.keyboard.press("ArrowRight")
    expect(page.locator("#r-1-1 input[value='1']")).to_be_checked()
    page.keyboard.press("ArrowRight")
    expect(page.locator("#r-1-1 input[value='2']")).to_be_checked()
    page.keyboard.press("ArrowDown")  # the next score, leaving 2 in place
    expect(page.locator("#r-1-2 input").first).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(page.locator("#r-1-1 input[value='2']")).to_be_focused()
    keys = {
        1: ["3", "2", "0", "-"],  # 0 sets 0 on a signed scale; "-" from nothing steps 0 -> -1, its end
        2: ["1", "3", "+", "0"],
        3: ["2", "2", "-", "+"],
        4: ["0", "1", "0", "0"],
    }
    for row_keys in keys.values():
        for key in row_keys:
            page.keyboard.press(key)
    # after the last score the focus reaches "none is appropriate", then the preference by its number
    expect(page.locator("input[name='none_appropriate']")).to_be_focused()
    page.keyboard.press("Space")
    expect(page.locator("input[name='none_appropriate']")).to_be_checked()
    page.keyboard.press("3")
    expect(page.locator("#rationale")).to_be_focused()
    page.keyboard.type("Candidate 3 is the least bad of them.")
    # Enter in the reason box is a newline; from a choice it submits
    page.keyboard.press("Shift+Tab")
    expect(page.locator("input[data-preference][value='3']")).to_be_focused()
    shot(page, "keyboard-filled")
    page.keyboard.press("Enter")
    expect(page.get_by_text("Saved. Here is your next task.")).to_be_visible()
    # four candidates do not fit side by side at 1280 px: they stack, and the first one is still in sight
    candidates, _rows = layout(page)
    assert candidates == sorted(candidates) and len(set(candidates)) == 4
    assert_first_candidate_above_the_fold(page, "4-candidates-1280x800")

    submission = Submission.objects.get()
    assert submission.none_appropriate and submission.rationale == "Candidate 3 is the least bad of them."
    expected = {1: [3, 2, 0, -1], 2: [1, 3, 1, 0], 3: [2, 2, -1, 1], 4: [0, 1, 0, 0]}
    stored = stored_values(campaign, annotator1)
    assert stored == {(n, aspect): values[i] for n, values in expected.items() for i, aspect in enumerate(ASPECTS)}
    assert page.problems == []  # type: ignore[attr-defined]


def test_one_click_per_cell_side_by_side_then_the_next_task_fits_above_the_fold(
    browser, pages, live_server, researcher, annotator1
):
    campaign = make_campaign(researcher, [annotator1], candidates_per_task=2)
    page = new_page(browser, width=1280, height=800)
    pages.append(page)
    base = live_server.url
    log_in(page, base, annotator1.username, by_label=False)
    first_url = open_task(page, base, campaign)
    # the annotator's first task opens with the instructions; two candidates sit side by side, aspects in rows
    expect(page.locator("details.instructions")).to_have_attribute("open", "")
    candidates, rows = layout(page)
    assert len(candidates) == 2 and len(set(candidates)) == 1, candidates
    assert len(rows) == 4 and all(len(row) == 2 and len(set(row)) == 1 for row in rows), rows
    shot(page, "side-by-side-first-task")

    chosen = {1: ["3", "2", "-1", "na"], 2: ["0", "1", "1", "0"]}
    clicks = 0
    for number, values in chosen.items():
        for col, value in enumerate(values, start=1):
            page.locator(f"#r-{number}-{col} label").filter(has=page.locator(f"input[value='{value}']")).click()
            clicks += 1
    assert clicks == 8
    for number, values in chosen.items():
        for col, value in enumerate(values, start=1):
            expect(page.locator(f"#r-{number}-{col} input[value='{value}']")).to_be_checked()
    page.get_by_role("radio", name="Candidate 1").click()
    page.locator("#rationale").fill("The first candidate answers best.")
    shot(page, "one-click-filled")
    page.get_by_role("button", name="Submit and go to the next task").click()
    page.wait_for_url(lambda url: url != first_url and "/tasks/" in url)
    stored = stored_values(campaign, annotator1)
    assert stored == {
        (n, aspect): None if values[i] == "na" else float(values[i])
        for n, values in chosen.items()
        for i, aspect in enumerate(ASPECTS)
    }

    assert_first_candidate_above_the_fold(page, "2-candidates-1280x800")
    # "i" opens the instructions from a score and closes them again, giving the focus back
    expect(page.locator("#r-1-1 input").first).to_be_focused()
    page.keyboard.press("i")
    expect(page.locator("details.instructions")).to_have_attribute("open", "")
    expect(page.locator("details.instructions summary")).to_be_focused()
    page.keyboard.press("i")
    expect(page.locator("details.instructions")).not_to_have_attribute("open", "")
    expect(page.locator("#r-1-1 input").first).to_be_focused()
    assert page.problems == []  # type: ignore[attr-defined]


def test_the_form_posts_without_script_and_the_server_still_checks_it(
    browser, pages, live_server, campaign, annotator1
):
    page = new_page(browser, width=1280, height=800)
    pages.append(page)
    page.context.route("**/*.js", lambda route: route.abort())
    base = live_server.url
    log_in(page, base, annotator1.username, by_label=False)
    page.goto(f"{base}/annotate/{campaign.pk}/")
    with page.expect_navigation():
        page.locator("form button.primary").click()
    page.locator("#r-1-1 label").filter(has=page.locator("input[value='2']")).click()
    with page.expect_navigation():
        page.get_by_role("button", name="Submit and go to the next task").click()
    summary = page.locator("#error-summary")
    expect(summary).to_contain_text("Candidate 1: choose a value for Acceptability.")
    expect(page.locator("#r-1-1 input[value='2']")).to_be_checked()
    expect(page.locator("#r-1-2")).to_have_attribute("aria-invalid", "true")
    shot(page, "no-script-validation")
    assert Submission.objects.count() == 0


@pytest.mark.parametrize("locale", ["en", "ja"])
def test_layouts_do_not_scroll_sideways_and_axe_finds_nothing_serious(
    browser, pages, live_server, researcher, annotator1, locale
):
    campaign = make_campaign(researcher, [annotator1])
    base = live_server.url
    sizes = {
        "1680x1050": (1680, 1050, 1),
        "1280x800": (1280, 800, 1),
        "390x844": (390, 844, 3),
        "1280x720-zoom200": (640, 360, 2),
    }
    for name, (width, height, scale) in sizes.items():
        page = new_page(browser, width=width, height=height, scale=scale, locale="ja-JP" if locale == "ja" else "en-US")
        pages.append(page)
        log_in(page, base, annotator1.username, by_label=False)
        if locale == "ja":
            with page.expect_navigation():
                page.locator("#lang-select").select_option("ja")
        open_task(page, base, campaign)
        expect(page.locator("html")).to_have_attribute("lang", locale)
        candidates, rows = layout(page)
        if width >= 1600:  # wide enough for four columns of about 24rem
            assert len(set(candidates)) == 1 and all(len(set(row)) == 1 for row in rows), (name, candidates, rows)
        else:
            assert candidates == sorted(candidates) and len(set(candidates)) == 4, (name, candidates)
        assert_no_horizontal_scroll(page)
        assert_blind(page)
        assert axe_violations(page) == [], name
        # the refused form, with its error summary and invalid fields, too
        page.keyboard.press("Control+Enter")
        expect(page.locator("#error-summary")).to_be_focused()
        assert_no_horizontal_scroll(page)
        assert axe_violations(page) == [], f"{name} with errors"
        page.keyboard.press("Tab")
        page.keyboard.press("Tab")  # the second problem's link leads into its row of buttons
        page.keyboard.press("Enter")
        expect(page.locator("#r-1-2 input").first).to_be_focused()
        shot(page, f"{locale}-{name}")
        assert page.problems == [] or all("status of 422" in p for p in page.problems)  # type: ignore[attr-defined]


def test_drop_downs_when_the_campaign_asks_for_them(browser, pages, live_server, researcher, annotator1):
    campaign = make_campaign(researcher, [annotator1], scale_dropdowns=True)
    page = new_page(browser, width=1280, height=800)
    pages.append(page)
    log_in(page, live_server.url, annotator1.username, by_label=False)
    open_task(page, live_server.url, campaign)
    assert page.locator("[role=radiogroup]").count() == 0
    assert page.locator("select[data-aspect-control]").count() == 16
    expect(page.locator("#r-1-1")).to_be_focused()
    assert_no_horizontal_scroll(page)
    assert axe_violations(page) == []
    shot(page, "drop-downs")
