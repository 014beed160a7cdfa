"""An annotator in real Chromium: keyboard-only rating, validation that keeps values, blinding, Japanese, layout.

Screenshots go to tests/artifacts/ (gitignored)."""

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from annotations.campaigns.setup import campaign_create
from annotations.models import AnswerFormat, AssignmentDraft, Dataset, Submission
from tests.annotate.factories import SYSTEM_NAMES, lfqa_lines, make_dataset
from tests.browser.pages import log_in, open_page, shooter

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_MARKDOWN = (
    "## Why your recorded voice sounds strange\n\n"
    + "When you speak, **bone conduction** carries low frequencies to your inner ear. " * 40
    + "\n\n```python\n"
    + "\n".join(f"def frequency_response_{i}(signal, sample_rate=48000):  # {'x' * 90}" for i in range(30))
    + "\n```\n\n| source | path |\n|---|---|\n| air | outside the head |\n| bone | through the skull |\n\n"
    + "- "
    + "\n- ".join(f"point {i}: " + "a fairly long sentence about acoustics " * 4 for i in range(40))
    + "\n\n"
    + "unbroken" * 200
    + "\n\n"
)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    # The refused submit is an expected 422; every other console error is a failure.
    with open_page(browser, height=720, expected=["status of 422"], dialogs=True) as page:
        yield page


shot = shooter("annotator")


def assert_blind(page: Page) -> None:
    html = page.content()
    text = page.inner_text("body")
    for key, model in SYSTEM_NAMES.items():
        assert key not in html and model not in html and model not in text
    assert "unieval" not in html


def assert_no_horizontal_scroll(page: Page) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"page scrolls sideways by {overflow}px"


def type_scores(page: Page, keys: list[str]) -> None:
    for key in keys:
        page.keyboard.press(key)


@pytest.fixture
def campaign(live_server, researcher, annotator1):  # type: ignore[no-untyped-def]
    lines = lfqa_lines(2, systems=3)
    for line in lines:
        line["turns"][0]["responses"]["sys_alpha"]["response"] = LONG_MARKDOWN
    dataset = make_dataset("browser set", owner=researcher, lines=lines)
    return campaign_create(
        name="Browser study",
        dataset=dataset,
        raters_per_item=1,
        annotators=[annotator1],
        guidelines="Rate **every** candidate.",
        scale_dropdowns=True,  # the drop-down path; tests/browser/test_task_layout.py drives the button rows
    )


def test_keyboard_only_two_tasks_with_validation_and_japanese(page: Page, live_server, campaign, annotator1):
    base = live_server.url
    log_in(page, base, annotator1.username)
    expect(page.get_by_text("0 of 2 tasks done")).to_be_visible()
    shot(page, "home")

    page.goto(f"{base}/annotate/{campaign.pk}/")
    # autofocus lands after the load event; pressing Enter before it would go nowhere
    expect(page.locator("form button.primary[autofocus]")).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/tasks/[a-z2-7]{13}/$"))
    first_task_url = page.url
    expect(page.locator("#r-1-1")).to_be_focused()
    assert_blind(page)
    assert_no_horizontal_scroll(page)
    shot(page, "task1-1280x720")

    # 3 candidates x (factuality 0-3 typed as the value, amount info -1..1 as "-", "0", "+" or n)
    for select in ("#r-1-2", "#r-2-2", "#r-3-2"):
        expect(page.locator(f"{select} option[value='-1']")).to_have_text(re.compile(r"^\[-\] -1 "))
        expect(page.locator(f"{select} option[value='0']")).to_have_text(re.compile(r"^\[0\] 0 "))
        expect(page.locator(f"{select} option[value='1']")).to_have_text(re.compile(r"^\[\+\] 1 "))
    type_scores(page, ["3", "0", "2", "n", "1"])
    page.keyboard.type("-")
    expect(page.locator("#r-3-2")).to_have_value("-1")
    # the focus order reaches "none is appropriate" before the candidates
    expect(page.locator("input[name='none_appropriate']")).to_be_focused()
    page.keyboard.press("2")  # prefer Candidate 2 and move on to the reason
    expect(page.locator("#rationale")).to_be_focused()
    page.keyboard.type("Candidate 2 is accurate and just long enough.")
    page.keyboard.press("Tab")
    page.keyboard.type("no comment")
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Control+Enter")
    page.wait_for_url(lambda url: url != first_task_url and "/tasks/" in url)
    expect(page.get_by_text("Saved. Here is your next task.")).to_be_visible()
    assert Submission.objects.count() == 1

    # second task: submit too early, find the problems listed and the values kept, then finish by keyboard
    second_task_url = page.url
    expect(page.locator("#r-1-1")).to_be_focused()
    page.keyboard.press("3")
    page.keyboard.press("Control+Enter")
    summary = page.locator("#error-summary")
    expect(summary).to_be_visible()
    expect(summary).to_be_focused()
    expect(summary).to_contain_text("Candidate 1: choose a value for Amount Info.")
    expect(summary).to_contain_text("Preference: choose the candidate you prefer.")
    expect(summary).to_contain_text("Reason: explain your ratings")
    expect(page.locator("#r-1-1")).to_have_value("3")
    expect(page.locator("#r-1-2")).to_have_attribute("aria-invalid", "true")
    shot(page, "task2-validation")
    assert page.url == second_task_url
    page.keyboard.press("Tab")  # the first problem link
    page.keyboard.press("Enter")
    expect(page.locator("#r-1-2")).to_be_focused()
    type_scores(page, ["0", "1"])
    page.keyboard.type("+")
    type_scores(page, ["0", "0"])
    expect(page.locator("#r-1-2")).to_have_value("0")
    expect(page.locator("#r-2-2")).to_have_value("1")
    page.keyboard.press("1")
    page.keyboard.type("Only the first one answers the question.")
    page.keyboard.press("Meta+Enter")
    page.wait_for_url(re.compile(rf".*/annotate/{campaign.pk}/$"))
    expect(page.get_by_text("no more tasks for you")).to_be_visible()
    assert Submission.objects.count() == 2
    assert set(Submission.objects.values_list("assignment__annotator", flat=True)) == {annotator1.pk}

    # switch to Japanese with the keyboard-operable language menu
    page.locator("#lang-select").select_option("ja")
    page.wait_for_load_state("load")
    expect(page.locator("html")).to_have_attribute("lang", "ja")
    expect(page.get_by_text("担当できるタスクはもうありません。ありがとうございました！")).to_be_visible()
    shot(page, "done-ja")
    assert page.problems == []  # type: ignore[attr-defined]


def test_long_markdown_answer_at_200_percent_zoom_in_japanese(browser: Browser, live_server, campaign, annotator1):
    # Answers show as plain text unless the researcher chooses Markdown for the dataset; this one does.
    Dataset.objects.filter(pk=campaign.dataset_id).update(answer_format=AnswerFormat.MARKDOWN)
    # 200% zoom of a 1280x720 window = a 640x360 CSS-pixel viewport at device scale 2.
    context = browser.new_context(viewport={"width": 640, "height": 360}, device_scale_factor=2, locale="ja-JP")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    try:
        log_in(page, live_server.url, annotator1.username, by_label=False)
        page.goto(f"{live_server.url}/annotate/{campaign.pk}/")
        expect(page.locator("form button.primary[autofocus]")).to_be_focused()
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/tasks/[a-z2-7]{13}/$"))
        expect(page.get_by_role("heading", name="候補 1")).to_be_visible()
        expect(page.locator("html")).to_have_attribute("lang", "ja")
        assert_blind(page)
        expect(page.get_by_role("heading", name="Why your recorded voice sounds strange")).to_be_visible()
        assert page.locator(".answer pre code").count() == 1 and page.locator(".answer table").count() == 1
        assert_no_horizontal_scroll(page)
        assert page.evaluate("document.querySelectorAll('script:not([src])').length") == 0
        shot(page, "task-200pct-ja")
        labelled = page.evaluate(
            "Array.from(document.querySelectorAll('select, textarea, input:not([type=hidden])'))"
            ".filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')).map(el => el.name)"
        )
        assert labelled == []
        assert errors == []
    finally:
        context.close()


def draft_values(campaign) -> dict:  # type: ignore[no-untyped-def]
    draft = AssignmentDraft.objects.filter(assignment__campaign=campaign).first()
    return draft.values if draft else {}


def test_half_filled_task_survives_a_reload_and_another_device(
    page: Page, browser: Browser, live_server, campaign, annotator1
):
    base = live_server.url
    log_in(page, base, annotator1.username)
    page.goto(f"{base}/annotate/{campaign.pk}/")
    expect(page.locator("form button.primary[autofocus]")).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/tasks/[a-z2-7]{13}/$"))
    task_url = page.url
    expect(page.locator("#draft-status")).to_have_text("")

    # half of the task: two scores, a preference and the start of a reason
    half = {"r-1-1": "3", "r-1-2": "-1", "preference": "2", "rationale": "Candidate 2 is the most careful"}
    with page.expect_response(lambda r: r.url.endswith("/draft/") and r.status == 204):
        page.locator("#r-1-1").select_option("3")
        page.locator("#r-1-2").select_option("-1")
        page.locator("input[data-preference][value='2']").check()
        page.locator("#rationale").fill(half["rationale"])
    expect(page.locator("#draft-status")).to_have_text("Draft saved")
    expect(page.locator("#draft-status")).to_have_attribute("role", "status")
    for _attempt in range(50):  # the save that answered may be one that started before the last keystroke
        if draft_values(campaign) == half:
            break
        page.wait_for_timeout(100)
    assert draft_values(campaign) == half
    assert Submission.objects.count() == 0

    page.reload()
    expect(page.locator("#r-1-1")).to_have_value("3")
    expect(page.locator("#r-1-2")).to_have_value("-1")
    expect(page.locator("#r-2-1")).to_have_value("")
    expect(page.locator("input[data-preference][value='2']")).to_be_checked()
    expect(page.locator("#rationale")).to_have_value(half["rationale"])
    expect(page.locator("#draft-status")).to_have_text("Draft saved")
    shot(page, "draft-restored")

    # another device: a fresh session of the same annotator finds the same values
    other = browser.new_context(viewport={"width": 1280, "height": 720}, locale="en-US")
    try:
        elsewhere = other.new_page()
        log_in(elsewhere, base, annotator1.username)
        elsewhere.goto(task_url)
        expect(elsewhere.locator("#r-1-1")).to_have_value("3")
        expect(elsewhere.locator("#rationale")).to_have_value(half["rationale"])
    finally:
        other.close()

    # finish and submit: the draft goes with the lease
    for row in (1, 2, 3):
        page.locator(f"#r-{row}-1").select_option("2" if row > 1 else "3")
        page.locator(f"#r-{row}-2").select_option("0" if row > 1 else "-1")
    page.locator("#rationale").press("Control+Enter")
    page.wait_for_url(lambda url: url != task_url and "/tasks/" in url)
    expect(page.get_by_text("Saved. Here is your next task.")).to_be_visible()
    assert Submission.objects.count() == 1
    page.wait_for_timeout(1500)  # longer than the save delay: nothing late may bring the draft back
    assert not AssignmentDraft.objects.exists()
    assert page.problems == []  # type: ignore[attr-defined]
