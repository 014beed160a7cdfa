"""An annotator in real Chromium marks error spans: with the keyboard only (s/e and Shift+arrows to select, m to
mark, keys to pick the category and severity, Enter on Edit and Remove) and with the mouse (dragging over the text,
clicking Mark, Edit and Remove, taps at phone width), in English and Japanese at 1,280 px and 390 px. Answers hold an
emoji, Japanese without spaces and a combining mark; the stored spans must cover exactly the words marked. A draft
survives a reload, and a revisit corrects a span. axe-core finds nothing serious; screenshots go to tests/artifacts/.
"""

import os
import re
import unicodedata
from collections.abc import Iterator

import pytest
from django.test import Client
from playwright.sync_api import Browser, Page, expect

from annotations.models import ErrorSpan, Rating
from tests.browser.pages import ARTIFACTS, axe_violations
from tests.browser.test_annotator_flow import assert_no_horizontal_scroll
from tests.conftest import CAST_PASSWORD
from tests.spans.world import ANSWERS, span_campaign

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The word each answer has wrong, and a second stretch that overlaps it.
WRONG = {ANSWERS[0]: ("eat", "😀 eat"), ANSWERS[1]: ("たべ", "魚をたべ"), ANSWERS[2]: ("cafe\u0301", "Un cafe\u0301")}

CHARACTER_BOX_JS = """([id, start, end]) => {
  const root = document.getElementById(id);
  root.scrollIntoView({block: "center"});
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  let position = 0, started = false;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const length = node.textContent.length;
    if (!started && start < position + length) { range.setStart(node, start - position); started = true; }
    if (started && end <= position + length) { range.setEnd(node, end - position); break; }
    position += length;
  }
  const boxes = range.getClientRects();
  const first = boxes[0], last = boxes[boxes.length - 1];
  return [first.left + 1, first.top + first.height / 2, last.right - 1, last.top + last.height / 2];
}"""


def graphemes(text: str) -> int:
    """User-perceived characters in these answers: every code point but a combining mark starts one."""
    return sum(1 for character in text if not unicodedata.combining(character))


def units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@pytest.fixture(
    params=[("en-US", 1280), ("en-US", 390), ("ja-JP", 1280), ("ja-JP", 390)],
    ids=["english-1280", "english-390", "japanese-1280", "japanese-390"],
)
def setting(request: pytest.FixtureRequest) -> tuple[str, int]:
    return request.param


@pytest.fixture
def page(browser: Browser, live_server, annotator1, setting) -> Iterator[Page]:  # type: ignore[no-untyped-def]
    locale, width = setting
    context = browser.new_context(viewport={"width": width, "height": 900}, locale=locale, has_touch=width < 500)
    client = Client()
    assert client.login(username=annotator1.username, password=CAST_PASSWORD)
    host = live_server.url.split("//", 1)[1].split(":")[0]
    context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "domain": host, "path": "/"}]
    )
    page = context.new_page()
    page.problems = []  # type: ignore[attr-defined]
    page.on("pageerror", lambda exc: page.problems.append(f"pageerror: {exc}"))  # type: ignore[attr-defined]
    yield page
    context.close()


def shot(page: Page, name: str, setting: tuple[str, int]) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"spans-{setting[0]}-{setting[1]}-{name}.png"), full_page=True)


def task_text(page: Page) -> str:
    return str(page.locator("#r-1-1").get_attribute("data-text"))


def keyboard_mark(page: Page, start: int, length: int, *, with_shift: bool) -> None:
    """From the start of the text: move to the stretch, select it and open the editor, all by keys."""
    page.keyboard.press("Home")
    for _ in range(start):
        page.keyboard.press("ArrowRight")
    if with_shift:
        for _ in range(length):
            page.keyboard.press("Shift+ArrowRight")
    else:
        page.keyboard.press("s")
        for _ in range(length):
            page.keyboard.press("ArrowRight")
        page.keyboard.press("e")
    page.keyboard.press("m")
    expect(page.locator("[data-span-category]")).to_be_focused()


def mark_with_keyboard(page: Page, text: str) -> None:
    word, wider = WRONG[text]
    page.locator("input[name='r-1-2']").first.focus()  # the page starts on its first score
    # Back to the text by keys alone; the controls between it and the score depend on what is marked.
    for _ in range(6):
        if page.evaluate("document.activeElement.id") == "r-1-1":
            break
        page.keyboard.press("Shift+Tab")
    expect(page.locator("#r-1-1")).to_be_focused()
    # The wrong word: s … e, then the second category (ArrowDown) and the second severity (ArrowRight), Enter saves.
    keyboard_mark(page, graphemes(text[: text.index(word)]), graphemes(word), with_shift=False)
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Tab")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")
    expect(page.locator("#r-1-1")).to_be_focused()
    # An overlapping stretch with Shift+arrows, saved as it comes (first category, first severity).
    keyboard_mark(page, graphemes(text[: text.index(wider)]), graphemes(wider), with_shift=True)
    page.keyboard.press("Enter")
    expect(page.locator("[data-span-list] li")).to_have_count(2)
    expect(page.locator(".span-overlap")).not_to_have_count(0)
    # Edit the second by keyboard: Enter on Edit, a new severity, Enter saves; then remove it with Enter on Remove.
    page.locator("[data-span-list] li").nth(1).locator("[data-span-edit]").focus()
    page.keyboard.press("Enter")
    expect(page.locator("[data-span-category]")).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")
    expect(page.locator("[data-span-list] li").nth(1)).to_contain_text(wider)
    page.locator("[data-span-list] li").nth(1).locator("[data-span-remove]").focus()
    page.keyboard.press("Enter")
    expect(page.locator("[data-span-list] li")).to_have_count(1)
    page.locator("input[name='r-1-2']").first.focus()
    page.keyboard.press("4")


def drag_over(page: Page, text: str, stretch: str) -> None:
    start = units(text[: text.index(stretch)])
    box = page.evaluate(CHARACTER_BOX_JS, ["r-1-1", start, start + units(stretch)])
    page.mouse.move(box[0], box[1])
    page.mouse.down()
    page.mouse.move((box[0] + box[2]) / 2, box[3], steps=3)
    page.mouse.move(box[2], box[3], steps=3)
    page.mouse.up()


def press(page: Page, selector: str, touch: bool) -> None:
    if touch:
        page.locator(selector).tap()
    else:
        page.locator(selector).click()


def mark_with_mouse(page: Page, text: str, touch: bool) -> None:
    word, wider = WRONG[text]
    drag_over(page, text, word)
    press(page, "[data-span-mark]", touch)
    page.locator("[data-span-category]").select_option(index=2)
    press(page, "[data-span-severity][value='major']", touch)
    press(page, "[data-span-save]", touch)
    drag_over(page, text, wider)
    press(page, "[data-span-mark]", touch)
    press(page, "[data-span-save]", touch)
    expect(page.locator("[data-span-list] li")).to_have_count(2)
    press(page, "[data-span-list] li:nth-child(2) [data-span-edit]", touch)
    press(page, "[data-span-severity][value='major']", touch)
    press(page, "[data-span-save]", touch)
    press(page, "[data-span-list] li:nth-child(2) [data-span-remove]", touch)
    expect(page.locator("[data-span-list] li")).to_have_count(1)
    press(page, "label.scale-button:has(input[name='r-1-2'][value='3'])", touch)


def stored(text: str) -> list[tuple[str, str, str]]:
    rating = Rating.objects.get(aspect__name="mqm", response__text=text)
    return [
        (text[span.start : span.end], span.category, span.severity)  # type: ignore[misc]
        for span in ErrorSpan.objects.filter(rating=rating).order_by("position")
    ]


def test_marking_editing_and_removing_spans(page: Page, live_server, annotator1, researcher, setting) -> None:  # type: ignore[no-untyped-def]
    campaign = span_campaign([annotator1], owner=researcher)
    base = live_server.url
    touch = setting[1] < 500
    page.goto(f"{base}/annotate/{campaign.pk}/")
    page.locator("form button[type=submit].primary").first.click()
    page.wait_for_url(re.compile(r".*/tasks/[a-z2-7]{13}/$"))
    first_url, first_text = page.url, task_text(page)

    mark_with_keyboard(page, first_text)
    shot(page, "keyboard-marked", setting)
    assert axe_violations(page) == []
    assert_no_horizontal_scroll(page)
    # the draft keeps the spans through a reload
    expect(page.locator("#draft-status")).not_to_be_empty(timeout=15_000)
    page.reload()
    expect(page.locator("[data-span-list] li")).to_have_count(1)
    page.keyboard.press("Control+Enter")
    page.wait_for_url(lambda url: url != first_url)
    word = WRONG[first_text][0]
    assert stored(first_text) == [(word, "Fluency/Grammar", "major")]

    second_text = task_text(page)
    mark_with_mouse(page, second_text, touch)
    shot(page, "mouse-marked", setting)
    assert axe_violations(page) == []
    assert_no_horizontal_scroll(page)
    second_url = page.url
    page.locator("form[data-task-form] button[type=submit]").click()
    page.wait_for_url(lambda url: url != second_url)
    assert stored(second_text) == [(WRONG[second_text][0], "Fluency/Spelling", "major")]

    # the third answer is confirmed free of errors
    third_text, third_url = task_text(page), page.url
    press(page, "[data-span-none]", touch)
    page.locator("input[name='r-1-2']").first.focus()
    page.keyboard.press("5")
    page.keyboard.press("Control+Enter")
    page.wait_for_url(lambda url: url != third_url)
    assert stored(third_text) == []
    assert Rating.objects.get(aspect__name="mqm", response__text=third_text).value == 0

    # a revisit corrects the first answer's span: minor instead of major
    page.goto(first_url)
    expect(page.locator(".editing-notice")).to_be_visible()
    expect(page.locator("[data-span-list] li")).to_have_count(1)
    press(page, "[data-span-list] li:nth-child(1) [data-span-edit]", touch)
    press(page, "[data-span-severity][value='minor']", touch)
    press(page, "[data-span-save]", touch)
    shot(page, "revisit-corrected", setting)
    page.locator("form[data-task-form] button[type=submit]").click()
    page.wait_for_url(lambda url: url != first_url)
    assert stored(first_text) == [(word, "Fluency/Grammar", "minor")]
    assert page.problems == []  # type: ignore[attr-defined]


def test_the_browser_copy_of_a_draft_restores_spans(page: Page, live_server, annotator1, researcher, setting) -> None:  # type: ignore[no-untyped-def]
    """The server never gets the draft (every draft save fails), so only the browser's own copy can put the marks back
    after a reload; the spans restored are the ones then stored by the submit."""
    campaign = span_campaign([annotator1], owner=researcher)
    page.goto(f"{live_server.url}/annotate/{campaign.pk}/")
    page.locator("form button[type=submit].primary").first.click()
    page.wait_for_url(re.compile(r".*/tasks/[a-z2-7]{13}/$"))
    task_url, text = page.url, task_text(page)
    page.route(re.compile(r".*/tasks/[a-z2-7]{13}/draft/$"), lambda route: route.abort())

    mark_with_keyboard(page, text)
    word = WRONG[text][0]
    copies = page.evaluate(
        "Object.entries(window.localStorage).filter(([key]) => key.startsWith('evalsite:task-draft:'))"
        ".map(([, value]) => JSON.parse(value))"
    )
    assert len(copies) == 1 and not copies[0]["confirmed"]
    assert any(name == "r-1-1" and '"spans"' in value for name, value in copies[0]["fields"])

    page.reload()
    expect(page.locator("[data-span-list] li")).to_have_count(1)
    expect(page.locator("[data-span-list] li").first).to_contain_text(word)
    expect(page.locator(".span-mark")).not_to_have_count(0)
    shot(page, "local-draft-restored", setting)
    assert axe_violations(page) == []

    page.unroute(re.compile(r".*/tasks/[a-z2-7]{13}/draft/$"))
    page.locator("form[data-task-form] button[type=submit]").click()
    page.wait_for_url(lambda url: url != task_url)
    assert stored(text) == [(word, "Fluency/Grammar", "major")]
    assert page.problems == []  # type: ignore[attr-defined]
