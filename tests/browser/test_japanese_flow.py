"""The whole annotator flow in Japanese, in real Chromium: no English word is left on any screen.

The browser asks for Japanese (ja-JP); the dataset uses the bilingual built-in preset, so even the rubric reads in
Japanese. On every screen the visible text and the readable attributes (title, aria-label, placeholder, alt) are
checked with the same word list as the page sweep of tests/i18n: a Latin word is allowed only if the data holds it
or it is a term kept in Latin letters. Screenshots go to tests/artifacts/."""

import io
import json
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from annotations.campaigns.setup import campaign_create
from annotations.datasets.importing import dataset_import
from annotations.models import Dataset
from annotations.rubrics.specs import preset_rubric
from tests.browser.pages import ARTIFACTS, open_page
from tests.conftest import CAST_PASSWORD
from tests.i18n.test_japanese_pages import KEPT_LATIN, LATIN_WORD, data_words

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Everything a person can read: rendered text, and the attributes that screen readers and tooltips show.
READABLE_TEXT_JS = """() => {
  const parts = [document.body.innerText];
  for (const el of document.querySelectorAll('[title], [aria-label], [placeholder], img[alt]')) {
    for (const name of ['title', 'aria-label', 'placeholder', 'alt']) {
      const value = el.getAttribute(name);
      if (value) parts.push(value);
    }
  }
  return parts.join('\\n');
}"""

LINES = [
    {
        "id": f"jp-{n}",
        "turns": [
            {
                "prompt": f"日本の首都について説明してください（{n}）。",
                "responses": {
                    "sys_a": {"response": "東京は日本の首都で、人口が最も多い都市です。"},
                    "sys_b": {"response": "日本の首都は東京です。政治と経済の中心でもあります。"},
                },
            }
        ],
    }
    for n in (1, 2)
]


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    # The refused submit is an expected 422; every other console error is a failure.
    with open_page(browser, height=800, locale="ja-JP", expected=["status of 422"]) as page:
        yield page


@pytest.fixture
def campaign(live_server, researcher, annotator1):  # type: ignore[no-untyped-def]
    body = "\n".join(json.dumps(line, ensure_ascii=False) for line in LINES).encode()
    result = dataset_import(
        stream=io.BytesIO(body), name="日本語の調査", rubric=preset_rubric("llm-human-eval-jp"), owner=researcher
    )
    assert result.items == 2
    return campaign_create(
        name="日本語キャンペーン",
        dataset=Dataset.objects.get(name="日本語の調査"),
        raters_per_item=1,
        annotators=[annotator1],
        guidelines="すべての候補を評価してください。",
    )


def english_on_screen(page: Page, allowed: set[str]) -> list[str]:
    text = page.evaluate(READABLE_TEXT_JS)
    return sorted({word for word in LATIN_WORD.findall(text) if word.casefold().strip("'’-") not in allowed})


def check_screen(page: Page, name: str, allowed: set[str], seen: dict[str, list[str]]) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"japanese-{name}.png"), full_page=True)
    assert page.locator("html").get_attribute("lang") == "ja", f"{name} is not in Japanese mode"
    seen[name] = english_on_screen(page, allowed)


def test_the_annotator_flow_in_japanese_leaves_no_english(page: Page, live_server, campaign, annotator1) -> None:
    base = live_server.url
    allowed = KEPT_LATIN | data_words()
    seen: dict[str, list[str]] = {}

    page.goto(f"{base}/accounts/login/")
    check_screen(page, "login", allowed, seen)
    page.locator("#id_username").fill(annotator1.username)
    page.locator("#id_password").fill(CAST_PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    check_screen(page, "home", allowed, seen)

    page.locator(".campaign-card", has_text="日本語キャンペーン").locator("a, button").first.click()
    page.wait_for_load_state()
    if not re.search(r"/tasks/[a-z2-7]{13}/$", page.url):
        check_screen(page, "campaign", allowed, seen)
        with page.expect_navigation():
            page.locator("form button.primary").click()
    expect(page).to_have_url(re.compile(r".*/tasks/[a-z2-7]{13}/$"))
    expect(page.get_by_text("流暢さ").first).to_be_visible()
    check_screen(page, "task", allowed, seen)

    # An incomplete submit: the error list names the missing fields in Japanese, rubric labels included.
    page.locator("#rationale").fill("理由を書きます。")
    page.get_by_role("button", name="送信して次のタスクへ").click()
    expect(page.get_by_text("詳細さ の値を選んでください", exact=False).first).to_be_visible()
    check_screen(page, "task-errors", allowed, seen)

    for task_number in (1, 2):
        rows = page.locator("[role=radiogroup][data-aspect-control]")
        assert rows.count() == 10  # 2 candidates x 5 aspects
        for position in range(rows.count()):
            row = rows.nth(position)
            row.locator("label").filter(has=page.locator("input[value='3']")).click()
        page.locator("input[data-preference]").first.check()
        page.locator("#rationale").fill(f"候補 1 の方が具体的です（{task_number}）。")
        task_url = page.url
        page.get_by_role("button", name="送信して次のタスクへ").click()
        page.wait_for_url(lambda url, before=task_url: url != before)  # type: ignore[misc]
        if task_number == 1:
            check_screen(page, "second-task", allowed, seen)
    check_screen(page, "done", allowed, seen)

    page.goto(f"{base}/")
    check_screen(page, "home-after", allowed, seen)
    left = {name: words for name, words in seen.items() if words}
    assert left == {}, f"English left on Japanese screens: {left}"
    assert page.problems == []  # type: ignore[attr-defined]
