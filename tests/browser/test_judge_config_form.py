"""A researcher writes a judge config in real Chromium: a template, labelled fields, the preview, an error shown at
its field, and the save; what is stored equals what was entered.

Screenshots go to tests/artifacts/ (gitignored)."""

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from judging.admin_forms import config_template
from judging.models import JudgeConfig
from tests.browser.pages import open_page, shooter
from tests.conftest import CAST_PASSWORD
from tests.judging.factories import make_dataset

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    # A failed load is reported by its response, with its URL; every other console error fails.
    with open_page(browser, expected=["Failed to load resource"], responses=True, dialogs=True) as page:
        yield page


shot = shooter("judge-config")


def json_view(page: Page) -> dict:  # type: ignore[type-arg]
    return json.loads(page.locator("#id_config_json").input_value())  # type: ignore[no-any-return]


def test_template_fields_preview_and_save(page: Page, live_server, researcher) -> None:  # type: ignore[no-untyped-def]
    base = live_server.url
    dataset = make_dataset(owner=researcher, items=2, aspects=(("fluency", 1, 5), ("accuracy", 0, 3)), name="qa set")
    page.goto(f"{base}/admin/login/?next=/admin/judging/judgeconfig/add/")
    page.get_by_label("Username").fill(researcher.username)
    page.get_by_label("Password").fill(CAST_PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.locator("#judgeconfig_form")).to_be_visible()
    expect(page.get_by_role("link", name="judge config reference")).to_have_attribute("href", "/help/judge-config/")

    # A template fills the fields and the JSON view with the method's defaults.
    page.locator("#id_template").select_option("reference")
    expect(page.locator("#id_method")).to_have_value("reference")
    expect(page.locator("#id_model")).to_have_value("openai/gpt-4o-mini")
    assert json_view(page) == config_template("reference")

    # Another template keeps the name, the model and the provider connection typed so far (the form's kept_keys).
    page.locator("#id_model").fill("anthropic/claude-3-5-haiku")
    page.locator("#id_api_base").fill("https://llm.example.org/v1")
    page.locator("#id_template").select_option("single")
    expect(page.locator("#id_method")).to_have_value("single")
    assert json_view(page) == {
        **config_template("single"),
        "name": config_template("reference")["name"],
        "model": "anthropic/claude-3-5-haiku",
        "api_base": "https://llm.example.org/v1",
    }
    page.locator("#id_model").fill("openai/gpt-4o-mini")
    page.locator("#id_api_base").fill("")
    page.locator("#id_template").select_option("reference")
    assert json_view(page) == config_template("reference")

    # The labelled fields edit the JSON view; aspects come from the chosen dataset's rubric.
    page.locator("#id_name").fill("browser judge")
    page.locator("#id_dataset").select_option(label="qa set")
    page.get_by_label("Accuracy").check()
    page.locator("#id_max_tokens").fill("300")
    page.locator("#id_rpm").fill("60")
    assert json_view(page)["aspects"] == ["accuracy"] and json_view(page)["rpm"] == 60

    # The preview shows the prompt on the dataset's second item, with nothing saved.
    page.locator("#id_preview_item").fill("2")
    page.get_by_role("button", name="Preview the prompt").click()
    preview = page.locator("#judge-config-preview")
    # The first request of the server's thread may import the provider library: allow it time.
    expect(preview).to_contain_text("Answer 1 from system 0: topic 1 is explained.", timeout=60_000)
    expect(preview).to_contain_text("Topic 1 is explained like this.")
    expect(preview).to_contain_text("Aspect accuracy")
    assert JudgeConfig.objects.count() == 0
    shot(page, "preview")

    # Three samples at temperature 0 are refused, and the problem is shown at the samples field.
    page.locator("#id_samples").fill("3")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".errornote")).to_be_visible()
    expect(page.locator(".field-samples .errorlist")).to_contain_text("samples 3 at temperature 0 refused")
    assert JudgeConfig.objects.count() == 0
    # The form came back with the JSON view as entered, and the fields follow it.
    expect(page.locator("#id_samples")).to_have_value("3")
    expect(page.get_by_label("Accuracy")).to_be_checked()
    shot(page, "error")

    page.locator("#id_temperature").fill("0.7")
    # A power user's edit of the JSON view reaches the fields.
    edited = {**json_view(page), "parse_retries": 2}
    page.locator("#id_config_json").fill(json.dumps(edited, indent=2))
    expect(page.locator("#id_parse_retries")).to_have_value("2")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text("browser judge")
    saved = JudgeConfig.objects.get()
    expected = {
        **config_template("reference"),
        "name": "browser judge",
        "aspects": ["accuracy"],
        "samples": 3,
        "temperature": 0.7,
        "max_tokens": 300,
        "rpm": 60,
        "parse_retries": 2,
    }
    assert saved.config == expected and saved.owner == researcher
    shot(page, "saved")
    assert dataset.items.count() == 2
    assert page.problems == []  # type: ignore[attr-defined]
