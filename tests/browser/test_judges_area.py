"""The judge half of a study in real Chromium, without the admin, in English and in Japanese: from the menu, a
G-Eval config from its template with the local fake provider's URL typed into its field, the prompt previewed, the
estimate read, a pilot and then the whole run launched and followed on the live page to the end (a real Celery
worker), a second judge config on another model launched the same way, the two judges compared on the judges page
(a defined difference of their correlations with the humans, its interval, n and Williams's p), one version
certified against a named reference set, and the campaign's settings page. Every page visited passes axe-core (no
serious or critical finding) and scrolls no page sideways at 390 px or 1,280 px.

Screenshots go to tests/artifacts/ (gitignored)."""

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from annotations.campaigns.setup import campaign_create
from judging.models import Certificate, CertificateStatus, JudgeConfig, JudgeRun, RunStatus
from tests.browser import pages
from tests.browser.pages import log_in, new_page
from tests.conftest import wait_for
from tests.fakeprovider import FakeProvider
from tests.judging.certification_data import SNAPSHOT, TRUE_SCORE, answer_with_truth, rated_dataset

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The worker runs in its own process: the fake provider on loopback is allowed there through the operator's
# allowlist, as the live server's settings allow it below.
WORKER_ENV = {"JUDGE_API_BASE_ALLOWLIST": "127.0.0.1", "JUDGE_RETRY_BASE_MS": "20", "JUDGE_RETRY_CAP_S": "1"}
ITEMS = 40
# The second judge's model: the fake makes it confuse neighbouring grades (2 for 1, 4 for 3 and back), so its
# scores differ from the first judge's and track the humans less closely.
SECOND_MODEL = "openai/gpt-4o"
CONFUSED_GRADES = {1: 2, 2: 1, 3: 4, 4: 3, 5: 5}


def answer_per_model() -> Callable[[dict[str, Any]], str]:
    """The true score for the template's model; the confused grade for the second judge's."""
    exact = answer_with_truth()

    def content(body: dict[str, Any]) -> str:
        if body.get("model") != SECOND_MODEL.split("/", 1)[1]:
            return exact(body)
        found = TRUE_SCORE.search(body["messages"][-1]["content"])
        truth = int(found.group(1)) if found else 3
        return f"The answer is close to what it says. Score: {CONFUSED_GRADES[truth]}"

    return content


@pytest.fixture
def fake(settings) -> Iterator[FakeProvider]:  # type: ignore[no-untyped-def]
    provider = FakeProvider().start()
    provider.script(default={"served_model": SNAPSHOT})
    provider.content_fn = answer_per_model()
    settings.JUDGE_API_BASE_ALLOWLIST = ["127.0.0.1"]
    yield provider
    provider.stop()


def check_layout(page: Page, name: str) -> None:
    pages.check_layout(page, f"judges-{name}")


def go(page: Page, selector: str) -> None:
    with page.expect_navigation():
        page.locator(selector).first.click()


def follow_to_the_end(page: Page, run: JudgeRun) -> None:
    """The live part polls until the run ends; the final partial no longer asks to be polled."""
    expect(page.locator("#run-progress")).not_to_have_attribute("hx-get", re.compile(".*"), timeout=90_000)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.done == run.total and run.failed == 0
    expect(page.locator("#run-progress .judging-percent")).to_contain_text(f"100.0% · {run.total} / {run.total}")
    expect(page.locator("#run-progress [data-estimate]")).to_be_visible()


@pytest.mark.parametrize("locale", ["en-US", "ja-JP"])
def test_the_judge_half_of_a_study(  # type: ignore[no-untyped-def]
    live_server,
    browser: Browser,
    researcher,
    annotators,
    fake: FakeProvider,
    celery_worker_factory,
    clean_broker,
    locale: str,
) -> None:
    celery_worker_factory(extra_env=WORKER_ENV)
    dataset = rated_dataset(items=ITEMS)
    dataset.owner = researcher
    dataset.save(update_fields=["owner"])
    campaign = campaign_create(name="round one", dataset=dataset, raters_per_item=2, annotators=annotators)
    tag = locale[:2]
    page = new_page(browser, locale=locale)
    base = live_server.url
    log_in(page, base, researcher.username, by_label=False)
    expect(page.locator("html")).to_have_attribute("lang", tag)
    # The menu leads to the judges area and never to the admin.
    assert page.locator("header a[href^='/admin/']").count() == 0
    go(page, "header a[href='/research/judges/']")
    expect(page.locator("h1")).to_have_text({"en": "Judges", "ja": "ジャッジ"}[tag])
    check_layout(page, f"home-{tag}")

    # A G-Eval config from its template: the fields follow the JSON, only this dataset's aspects are offered.
    go(page, "a[href$='?template=geval']")
    expect(page.locator("#id_method")).to_have_value("single")
    expect(page.locator("#id_logprobs")).to_be_checked()
    page.locator("#id_dataset").select_option(str(dataset.pk))
    expect(page.locator("#id_aspects input[type=checkbox]")).to_have_count(1)
    page.locator("#id_name").fill(f"geval-{tag}")
    page.locator("#id_api_base").fill(fake.base_url)
    expect(page.locator("#id_config_json")).to_have_value(re.compile(re.escape(fake.base_url)))
    expect(page.locator("tr[data-provider]")).to_have_count(7)
    page.locator("#judge-config-preview-button").click()
    prompt = page.locator("#judge-config-preview .judge-config-prompt").last
    expect(prompt).to_contain_text("true quality")
    check_layout(page, f"config-{tag}")
    with page.expect_navigation():
        page.locator("#judgeconfig_form button.primary").click()
    config = JudgeConfig.objects.get(name=f"geval-{tag}")
    assert config.config["api_base"] == fake.base_url and config.config["logprobs"] is True
    assert config.config["logprob_scoring"] == "weighted"

    # The estimate first, then a pilot on a few items, followed to its end.
    expect(page.locator("#id_config")).to_have_value(str(config.pk))
    go(page, "button[name=action][value=estimate]")
    expect(page.locator("table.judging-estimate")).to_be_visible()
    check_layout(page, f"launch-{tag}")
    assert not JudgeRun.objects.exists()
    expect(page.locator("button[name=action][value=pilot]")).to_have_text(
        {"en": "Pilot on a few items", "ja": "少数の項目で試行"}[tag]
    )
    go(page, "button[name=action][value=pilot]")
    pilot = JudgeRun.objects.get()
    assert 5 <= pilot.total < ITEMS
    follow_to_the_end(page, pilot)
    check_layout(page, f"pilot-{tag}")

    # The whole dataset, launched again from the run page, followed to its end.
    go(page, "nav.judge-run-links a[href*='/launch/']")
    go(page, "button[name=action][value=estimate]")
    go(page, "button[name=action][value=launch]")
    run = JudgeRun.objects.exclude(pk=pilot.pk).get()
    assert run.total == ITEMS
    follow_to_the_end(page, run)
    page.reload()
    run.refresh_from_db()
    expect(page.locator("[data-version]")).to_contain_text(run.version.short)
    check_layout(page, f"run-{tag}")

    # The dataset's runs.
    go(page, f"a[href='/research/judges/datasets/{dataset.pk}/runs/']")
    expect(page.locator("table.judge-runs tbody tr")).to_have_count(2)
    check_layout(page, f"runs-{tag}")

    # A second judge config, on another model, from the same template: launched on the whole dataset and followed.
    go(page, "header a[href='/research/judges/']")
    go(page, "a[href$='?template=geval']")
    page.locator("#id_dataset").select_option(str(dataset.pk))
    page.locator("#id_name").fill(f"geval-4o-{tag}")
    page.locator("#id_model").fill(SECOND_MODEL)
    page.locator("#id_api_base").fill(fake.base_url)
    expect(page.locator("#id_config_json")).to_have_value(re.compile(re.escape(SECOND_MODEL)))
    with page.expect_navigation():
        page.locator("#judgeconfig_form button.primary").click()
    second_config = JudgeConfig.objects.get(name=f"geval-4o-{tag}")
    assert second_config.config["model"] == SECOND_MODEL
    expect(page.locator("#id_config")).to_have_value(str(second_config.pk))
    go(page, "button[name=action][value=estimate]")
    go(page, "button[name=action][value=launch]")
    second = JudgeRun.objects.get(config=second_config)
    follow_to_the_end(page, second)
    assert second.judge_id != run.judge_id

    # The two judges compared on the judges page (Williams's test between them), reached from the run page.
    go(page, "nav.judge-run-links a[href*='/judges/?judge=']")
    # This is the judge-vs-human page: each judge against the human raters, and the judges against each other.
    expect(page.locator("h1")).to_contain_text({"en": "judges versus humans", "ja": "ジャッジと人手の比較"}[tag])
    expect(page.locator("#judge-matrix")).to_contain_text(pilot.judge.name)
    expect(page.locator("#judge-matrix")).to_contain_text(run.judge.name)
    expect(page.locator("#judge-matrix")).to_contain_text(second.judge.name)
    # The cell of the second judge's row and the first judge's column holds a defined comparison: a negative
    # difference (the confused grades track the humans less closely), its interval, n and the Holm-adjusted p.
    matrix = page.locator("#judge-matrix table.judge-matrix")
    column = matrix.locator("thead th").all_inner_texts().index(run.judge.name)
    row = matrix.locator("tbody tr").filter(has=page.locator("th", has_text=second.judge.name))
    cell = row.locator("td").nth(column - 1)
    expect(cell.locator("strong")).to_have_text(re.compile(r"^-0\.\d{3}$"))
    expect(cell.locator("strong")).not_to_have_text("-0.000")
    expect(cell.locator(".ci")).to_have_text(re.compile(r"^\[[+-]\d\.\d{3}, [+-]\d\.\d{3}\]$"))
    holm = {"en": "Holm-adjusted p", "ja": "ホルム補正後の p"}[tag]
    expect(cell.locator("small")).to_have_text(re.compile(rf"^n = {ITEMS} · {holm} [=<] [01]\.\d{{3}}$"))
    expect(cell.locator(".why")).to_have_count(0)
    expect(page.locator("#judge-panels")).to_be_visible()
    check_layout(page, f"judges-vs-humans-{tag}")

    # One version certified against a reference set named here.
    page.go_back()
    go(page, "nav.judge-run-links a[href$='/certification/']")
    page.locator("#id_reference-name").fill("experts")
    page.locator("#id_reference-source").select_option("import")
    go(page, "form[action$='/reference-sets/'] button[type=submit]")
    page.locator("form[action$='/certify/'] select[name=version]").select_option(run.version.fingerprint)
    go(page, "form[action$='/certify/'] button[type=submit]")
    wait_for(
        lambda: Certificate.objects.filter(
            version=run.version,
            status__in=[CertificateStatus.PASSED, CertificateStatus.FAILED, CertificateStatus.UNDEFINED],
        ).exists(),
        timeout=90,
        message="the certificate's evaluation",
    )
    certificate = Certificate.objects.get(version=run.version)
    assert certificate.status == CertificateStatus.PASSED, (certificate.status, certificate.reason, certificate.results)
    page.reload()
    expect(page.locator(".badge.certified")).to_have_count(1)
    check_layout(page, f"certification-{tag}")

    # The campaign's settings, from the research home.
    go(page, "header a[href='/research/']")
    go(page, f"a[href='/research/campaigns/{campaign.pk}/settings/']")
    expect(page.locator("[data-fixed-reason]")).to_be_visible()
    check_layout(page, f"campaign-settings-{tag}")
    assert page.problems == []  # type: ignore[attr-defined]
    page.context.close()
