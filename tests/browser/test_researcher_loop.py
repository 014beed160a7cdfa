"""A researcher's whole loop in real Chromium, through the UI only: after the login page every step is a click.

Import a dataset, open a campaign, three annotators submit (preference included), launch a metric judge and an LLM
judge (the local fake provider) from the admin after reading the estimate, watch both runs finish on their live
pages, read agreement scoped to the campaign and the judges page, and download the four exports. Screenshots go to
tests/artifacts/ (gitignored)."""

import csv
import io
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import Browser, BrowserContext, Page, expect

from annotations.models import Campaign, Dataset, Rater, Rating, Submission
from annotations.roles import researcher_grant
from judging.models import JudgeRun, RunStatus
from tests.conftest import CAST_PASSWORD, PROJECT_ROOT
from tests.fakeprovider import FakeProvider

# Playwright's sync API runs an event loop in this thread; the ORM calls made by the test are still synchronous.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
SAMPLES = PROJECT_ROOT / "annotations" / "sample_data"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DATASET = "Recorded voices Ξ"
DATASET_FILE = "Recorded-voices-Ξ"  # the download name: the dataset's name made safe as a file name
CAMPAIGN = "Pilot round"
METRIC_JUDGE = "rouge-l"
LLM_JUDGE = "fake-geval"
# The worker runs in its own process: the fake provider on loopback is allowed there through the operator's
# allowlist, exactly as the live server's settings allow it below.
WORKER_ENV = {"JUDGE_API_BASE_ALLOWLIST": "127.0.0.1", "JUDGE_RETRY_BASE_MS": "20", "JUDGE_RETRY_CAP_S": "1"}
NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


@pytest.fixture
def fake(settings) -> Iterator[FakeProvider]:  # type: ignore[no-untyped-def]
    provider = FakeProvider().start()
    provider.script(default={"score": {"min": 0, "max": 3}})
    settings.JUDGE_API_BASE_ALLOWLIST = ["127.0.0.1"]
    yield provider
    provider.stop()


@pytest.fixture
def importing_researcher(researcher: User, annotators: list[User]) -> User:
    """A researcher as a site operator makes one: staff in the Researchers group, and in a lab group with the
    annotators, which puts them in the researcher's pool (the admin offers no one else). This one also operates the
    site (a superuser), which is who the menu offers the admin to."""
    lab = Group.objects.create(name="lab")
    lab.user_set.add(researcher, *annotators)
    researcher.is_superuser = True
    researcher.save(update_fields=["is_superuser"])
    return researcher_grant(user=researcher)


@pytest.fixture
def upload_files(tmp_path: Path) -> tuple[Path, Path]:
    """The first two items of the LFQA sample, each turn given a reference answer so that ROUGE-L has one."""
    lines = [json.loads(line) for line in (SAMPLES / "lfqa_sample.jsonl").read_text(encoding="utf-8").splitlines()]
    lines = lines[:2]
    for line in lines:
        for turn in line["turns"]:
            turn["reference"] = turn["responses"]["human_top"]["response"]
    data = tmp_path / "voices.jsonl"
    data.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return data, SAMPLES / "lfqa_rubric.json"


class Session:
    """One person's browser context; every script error, console error and failed request is collected."""

    def __init__(self, browser: Browser, base: str, name: str) -> None:
        self.context: BrowserContext = browser.new_context(
            viewport={"width": 1280, "height": 900}, locale="en-US", accept_downloads=True
        )
        self.page = self.context.new_page()
        self.base = base
        self.name = name
        self.problems: list[str] = []
        self.page.on("pageerror", lambda exc: self.problems.append(f"{name} pageerror: {exc}"))
        # Failed loads are checked by status below, where the problem names their URL.
        self.page.on(
            "console",
            lambda msg: (
                self.problems.append(f"{name} console: {msg.text} at {self.page.url}")
                if msg.type == "error" and not msg.text.startswith("Failed to load resource")
                else None
            ),
        )
        self.page.on(
            "response",
            lambda response: (
                self.problems.append(f"{name} got {response.status} from {response.url}")
                if response.status >= 400
                else None
            ),
        )

    def shot(self, step: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"researcher-loop-{step}.png"), full_page=True)

    def log_in(self, username: str) -> None:
        """The one address typed in the whole test."""
        page = self.page
        page.goto(f"{self.base}/accounts/login/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(CAST_PASSWORD)
        with page.expect_navigation():
            page.get_by_role("button", name="Log in").click()
        expect(page).to_have_url(f"{self.base}/")


def click(page: Page, name: str, *, within: str = "body", exact: bool = True) -> None:
    with page.expect_navigation():
        page.locator(within).get_by_role("link", name=name, exact=exact).first.click()


def admin_save(page: Page) -> None:
    with page.expect_navigation():
        page.locator("input[name='_save']").click()


def create_judge_config_in_admin(page: Page, config: dict[str, Any]) -> None:
    """From any admin page but the index: Home, then Judge configs, Add, and the config as JSON.

    The admin's config form may change shape; this is the one place that knows how it is filled in."""
    click(page, "Home", within=".breadcrumbs")
    click(page, "Judge configs", within="#content-main")
    click(page, "Add judge config", within="#content-main", exact=False)
    page.locator("#id_config_json").fill(json.dumps(config, indent=2))
    admin_save(page)
    expect(page.locator(".messagelist .success")).to_contain_text(config["name"])


def back_to_overview_from_admin(page: Page) -> None:
    """The admin's "View site" leads home, whose dataset list leads to the overview."""
    click(page, "View site", within="#user-tools")
    click(page, DATASET, within="section[aria-labelledby='my-datasets']")
    expect(page.get_by_role("heading", name=DATASET, level=1)).to_be_visible()


def launch_from_overview(session: Session, config_label: str, *, units: int, calls: int, step: str) -> JudgeRun:
    page = session.page
    click(page, "Launch a judge run", within="#main")
    page.locator("#id_config").select_option(label=config_label)
    with page.expect_navigation():
        page.get_by_role("button", name="Show the estimate").click()
    estimate = page.locator("table.judging-estimate")
    expect(estimate).to_be_visible()
    expect(estimate.locator("tr", has_text="Units")).to_contain_text(str(units))
    expect(estimate.locator("tr", has_text="Provider calls")).to_contain_text(str(calls))
    expect(estimate.locator("tr", has_text="Cost (estimated)")).to_contain_text("$")
    session.shot(f"{step}-estimate")
    assert not JudgeRun.objects.filter(config_snapshot__name=config_label.rsplit(" v", 1)[0]).exists()
    with page.expect_navigation():
        page.get_by_role("button", name="Confirm and launch").click()
    expect(page.locator("ul.messages")).to_contain_text(f"({units} units)")
    run = JudgeRun.objects.get(config_snapshot__name=config_label.rsplit(" v", 1)[0])
    watch_run_finish(session, run, step)
    return run


def watch_run_finish(session: Session, run: JudgeRun, step: str) -> None:
    """The run page is not reloaded: a mark left on its window survives only if htmx swapped the status in."""
    page = session.page
    page.evaluate("window.__notReloaded = true")
    status = page.locator("#run-progress .judging-status strong")
    expect(status).to_have_text(RunStatus.SUCCEEDED, timeout=90_000)
    assert page.evaluate("window.__notReloaded === true"), "the run page was reloaded"
    # polling stopped with the run: the final partial no longer asks to be polled, and offers no cancel
    expect(page.locator("#run-progress")).not_to_have_attribute("hx-get", re.compile(".*"))
    expect(page.locator("#run-progress")).not_to_contain_text("Cancel run")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.done == run.total and run.failed == 0
    expect(page.locator("#run-progress .judging-percent")).to_contain_text(f"100.0% · {run.total} / {run.total}")
    session.shot(f"{step}-finished")


def annotate_all_tasks(session: Session, campaign_name: str, annotator_index: int) -> None:
    page = session.page
    card = page.locator(".campaign-card", has_text=campaign_name)
    expect(card).to_contain_text("0 of 2 tasks done")
    with page.expect_navigation():
        card.get_by_role("button", name="Start").click()
    for task_number in (1, 2):
        expect(page).to_have_url(re.compile(r".*/tasks/[a-z2-7]{13}/$"))
        task_url = page.url
        rows = page.locator("[role=radiogroup][data-aspect-control]")
        assert rows.count() == 16  # 4 candidates x 4 aspects, each a row of one-click buttons
        for position in range(rows.count()):
            row = rows.nth(position)
            values = [v for v in row.locator("input").evaluate_all("ins => ins.map(i => i.value)") if NUMBER.match(v)]
            chosen = values[(position + annotator_index + task_number) % len(values)]
            row.locator("label").filter(has=page.locator(f"input[value='{chosen}']")).click()
        if annotator_index == 1 and task_number == 1:
            page.get_by_label("No candidate is appropriate, but if I have to choose one…").check()
        page.locator("input[data-preference]").nth((annotator_index + task_number) % 4).check()
        page.locator("#rationale").fill(f"reason of annotator {annotator_index} on task {task_number}")
        if task_number == 1:
            session.shot(f"annotator{annotator_index}-task")
        page.get_by_role("button", name="Submit and go to the next task").click()
        page.wait_for_url(lambda url, before=task_url: url != before)  # type: ignore[misc]
    expect(page.get_by_text("no more tasks for you", exact=False)).to_be_visible()


def download(page: Page, link_text: str, target: Path) -> tuple[str, bytes]:
    with page.expect_download() as info:
        page.locator(".dash-exports .export-links").get_by_role("link", name=link_text, exact=True).click()
    item = info.value
    item.save_as(target / item.suggested_filename)
    return item.suggested_filename, (target / item.suggested_filename).read_bytes()


def expected_preferences(dataset: Dataset) -> dict[tuple[str, str], dict[str, Any]]:
    """(item id, app rater id) -> what the export must carry, from the submissions in the database."""
    expected = {}
    submissions = Submission.objects.filter(assignment__campaign__dataset=dataset).select_related(
        "assignment__task__turn__item", "preferred_response__system", "assignment__annotator"
    )
    for submission in submissions:
        rater = Rater.objects.get(dataset=dataset, user=submission.assignment.annotator)
        expected[(submission.assignment.task.turn.item.external_id, rater.pseudonym)] = {
            "preferred": submission.preferred_response.system.key if submission.preferred_response else None,
            "none_appropriate": submission.none_appropriate,
            "reason": submission.rationale,
        }
    return expected


def check_jsonl(body: bytes, dataset: Dataset, *, judges: bool) -> None:
    lines = [json.loads(line) for line in body.decode("utf-8").splitlines()]
    assert [line["id"] for line in lines] == ["lfqa-demo-001", "lfqa-demo-002"]
    found = {}
    for line in lines:
        (turn,) = line["turns"]
        for entry in turn["preferences"]:
            assert entry["campaign"] == CAMPAIGN
            assert sorted(entry["candidates"]) == sorted(turn["responses"])
            found[(line["id"], entry["rater"])] = {
                key: entry[key] for key in ("preferred", "none_appropriate", "reason")
            }
        for answer in turn["responses"].values():
            # three imported raters, then the three annotators of the campaign
            assert len(answer["raters"]) == 6 and all(len(v) == 6 for v in answer["human_evals"].values())
            auto = answer.get("auto_evals", {})
            assert (METRIC_JUDGE in auto and LLM_JUDGE in auto) is judges
    assert found == expected_preferences(dataset)
    assert sum(entry["none_appropriate"] for entry in found.values()) == 1


def check_flat(rows: list[dict[str, Any]], dataset: Dataset) -> None:
    ratings = Rating.objects.filter(response__turn__item__dataset=dataset).count()
    submissions = Submission.objects.filter(assignment__campaign__dataset=dataset).count()
    assert submissions == 6
    assert len(rows) == ratings + submissions
    assert Counter(row["kind"] for row in rows) == {"rating": ratings, "preference": submissions}
    preferences = {
        (row["item_id"], row["rater"]): (row["preferred"], row["none_appropriate"], row["rationale"])
        for row in rows
        if row["kind"] == "preference"
    }
    expected = {
        key: (value["preferred"], value["none_appropriate"], value["reason"])
        for key, value in expected_preferences(dataset).items()
    }
    assert preferences == expected
    # the task's reason is on its preference row, not repeated on the ratings entered with the form
    assert all(row["rationale"] in ("", None) for row in rows if row["kind"] == "rating" and row["origin"] == "app")


def csv_rows(body: bytes) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = list(csv.DictReader(io.StringIO(body.decode("utf-8-sig"))))
    for row in rows:
        if row["kind"] == "preference":
            row["none_appropriate"] = {"true": True, "false": False}[row["none_appropriate"].lower()]
    return rows


def test_a_researcher_walks_the_whole_loop_through_the_ui(
    browser: Browser,
    live_server: Any,
    importing_researcher: User,
    annotators: list[User],
    fake: FakeProvider,
    celery_worker_factory: Any,
    clean_broker: None,
    upload_files: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    celery_worker_factory(extra_env=WORKER_ENV)
    base = live_server.url
    sessions: list[Session] = []
    try:
        me = Session(browser, base, "researcher")
        sessions.append(me)
        page = me.page
        me.log_in(importing_researcher.username)
        me.shot("01-home")

        # import through the import page, reached from the admin's dataset list
        click(page, "Open the admin", within="#main")
        click(page, "Datasets", within="#content-main")
        click(page, "Import JSONL", within="#content-main")
        # the import page says where its format is described
        click(page, "The JSONL format", within="#content")
        expect(page.get_by_role("heading", name="Dataset format (JSONL)", level=1)).to_be_visible()
        with page.expect_navigation():
            page.go_back()
        data_file, rubric_file = upload_files
        page.get_by_label("Name").fill(DATASET)
        page.get_by_label("File").set_input_files(data_file)
        page.get_by_label("Rubric").set_input_files(rubric_file)
        me.shot("02-import")
        with page.expect_navigation():
            page.get_by_role("button", name="Import", exact=True).click()
        expect(page.locator(".messagelist")).to_contain_text("Imported 2 items, 8 answers, 96 ratings.")
        dataset = Dataset.objects.get(name=DATASET)
        me.shot("03-imported")

        # the dataset's admin page leads to its overview, whose campaign link opens the add form on this dataset
        click(page, "Dataset overview", within="#content-main")
        expect(page.get_by_role("heading", name=DATASET, level=1)).to_be_visible()
        expect(page.locator("#main")).to_contain_text("No campaign yet.")
        click(page, "New campaign", within="#main")
        page.get_by_label("Campaign name").fill(CAMPAIGN)
        page.get_by_label("Raters per task").fill("3")
        for user in annotators:
            page.locator("#main").get_by_label(user.username, exact=True).check()
        me.shot("04-campaign-form")
        with page.expect_navigation():
            page.get_by_role("button", name="Create the campaign").click()
        expect(page.locator("ul.messages")).to_contain_text("Built 2 tasks with 3 rater slots each.")
        campaign = Campaign.objects.get(name=CAMPAIGN)
        assert campaign.dataset_id == dataset.pk and campaign.ask_preference

        # three annotators, each in a browser of their own
        for index, annotator in enumerate(annotators, start=1):
            session = Session(browser, base, annotator.username)
            sessions.append(session)
            session.log_in(annotator.username)
            annotate_all_tasks(session, CAMPAIGN, index)
        assert Submission.objects.filter(assignment__campaign=campaign).count() == 6

        # two judge configs in the admin, then each run launched from the overview after reading its estimate
        click(page, "Admin", within="header")
        click(page, "Judge configs", within="#content-main")
        create_judge_config_in_admin(page, {"name": METRIC_JUDGE, "method": "metric", "metric": "rougeL"})
        create_judge_config_in_admin(
            page,
            {
                "name": LLM_JUDGE,
                "method": "single",
                "model": "openai/gpt-4o-mini",
                "api_base": fake.base_url,
                "aspects": ["factuality"],
                "max_concurrency": 4,
                "timeout_s": 30,
                "max_retries": 3,
            },
        )
        back_to_overview_from_admin(page)
        expect(page.locator("section[aria-labelledby='overview-campaigns']")).to_contain_text("6 / 6 (100.0%)")
        me.shot("05-overview-campaign-done")
        metric_run = launch_from_overview(me, f"{METRIC_JUDGE} v1", units=32, calls=0, step="06-metric")
        click(page, "Dataset overview", within="#main")
        llm_run = launch_from_overview(me, f"{LLM_JUDGE} v1", units=8, calls=8, step="07-llm")
        assert len(fake.successes_per_request()) == 8  # one provider call per unit

        # the overview lists both runs; agreement scoped to the campaign, then the judges page
        click(page, "Dataset overview", within="#main")
        runs = page.locator("section[aria-labelledby='overview-runs']")
        for run in (metric_run, llm_run):
            expect(runs.locator("tr", has_text=run.judge.name)).to_contain_text("Succeeded")
        me.shot("08-overview-runs")
        click(page, "agreement in this campaign", within="section[aria-labelledby='overview-campaigns']")
        expect(page.locator("#scope-label")).to_have_text(f"Campaign: {CAMPAIGN}")
        # only the campaign's ratings: 3 annotators x 8 answers on each aspect, not the imported raters' too
        factuality = page.locator("#table-agreement tbody tr", has_text="factuality")
        expect(factuality.locator("td").nth(2)).to_have_text("8")
        expect(factuality.locator("td").nth(3)).to_have_text("24")
        me.shot("09-agreement-campaign")
        click(page, "Judges", within="nav.dash-tabs")
        expect(page.locator("#scope-label")).to_have_text(f"Campaign: {CAMPAIGN}")
        judges = page.locator(".dash-panel table").first
        for name in (METRIC_JUDGE, LLM_JUDGE):
            expect(judges).to_contain_text(name)
        page.locator(".dash-panel table").first.get_by_role("link", name=LLM_JUDGE, exact=True).click()
        page.wait_for_url(re.compile(r".*judge=fake-geval.*"))
        expect(page.locator("#judge-panels")).to_contain_text(LLM_JUDGE)
        me.shot("10-judges")

        # the four downloads, named after the dataset, and what each holds
        files = {
            text: download(page, text, tmp_path) for text in ("JSONL", "JSONL with judges", "flat CSV", "flat JSONL")
        }
        assert {text: name for text, (name, _) in files.items()} == {
            "JSONL": f"{DATASET_FILE}.jsonl",
            "JSONL with judges": f"{DATASET_FILE}.judges.jsonl",
            "flat CSV": f"{DATASET_FILE}.flat.csv",
            "flat JSONL": f"{DATASET_FILE}.flat.jsonl",
        }
        check_jsonl(files["JSONL"][1], dataset, judges=False)
        check_jsonl(files["JSONL with judges"][1], dataset, judges=True)
        check_flat(csv_rows(files["flat CSV"][1]), dataset)
        check_flat([json.loads(line) for line in files["flat JSONL"][1].decode("utf-8").splitlines()], dataset)
        me.shot("11-downloaded")
        problems = [problem for session in sessions for problem in session.problems]
        assert problems == [], "\n".join(problems)
    finally:
        for session in sessions:
            session.context.close()
