"""Crowd workers in real Chromium: a Prolific worker from the link to the platform's completion URL, an MTurk
preview and an accepted assignment posting back to turkSubmitTo, a returning worker resuming and a second one
getting other tasks.

The platforms are played by a small HTTP server on 127.0.0.1 that records what reaches it. Screenshots go to
tests/artifacts/ (gitignored)."""

import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode

import pytest
from django.db.models import Count
from playwright.sync_api import Browser, Page, expect

from annotations.campaigns.setup import campaign_create
from annotations.gold.models import GoldItem
from annotations.models import Assignment, AssignmentStatus, Campaign, Task
from annotations.recruitment.models import CrowdSession, CrowdWorker, Platform, RecruitmentLink
from annotations.recruitment.services import link_create
from tests.annotate.factories import SYSTEM_NAMES, lfqa_lines, make_dataset
from tests.annotate.test_recruitment import row_counts
from tests.browser.pages import log_in, page_factory, shooter

PID = "PROLIFIC-canary-5f0c0ffee"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class PlatformStandIn:
    """A stand-in for the crowd platform: answers every GET and POST with a small page and records them."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, list[str]]]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                recorder.requests.append((method, self.path, parse_qs(body)))
                page = b"<!DOCTYPE html><title>platform</title><h1>Back on the platform</h1>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep the test output quiet

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "PlatformStandIn":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def platform_server() -> Iterator[PlatformStandIn]:
    with PlatformStandIn() as server:
        yield server


@pytest.fixture
def new_page(browser: Browser) -> Iterator[Callable[[], Page]]:
    with page_factory(browser, height=800, clean=False) as make:
        yield make


shot = shooter("crowd")


def make_campaign(researcher: Any, *, items: int = 4, raters: int = 2, name: str = "Crowd study") -> Campaign:
    dataset = make_dataset(name, owner=researcher, lines=lfqa_lines(items, systems=2))
    return campaign_create(
        name=name,
        dataset=dataset,
        raters_per_item=raters,
        annotators=[],
        guidelines="Rate **every** answer.",
        scale_dropdowns=True,
        ask_preference=False,
        rationale_required=False,
    )


TASK_URL = re.compile(r".*/tasks/[a-z2-7]{13}/$")
DONE_URL = re.compile(r".*/join/done/$")


def rate_current_task(page: Page, then: re.Pattern[str] = TASK_URL) -> None:
    """Chooses the first value of every scale, submits, and waits for the next page (a new URL)."""
    expect(page.locator("select[id^='r-']").first).to_be_visible()
    for select in page.locator("select[id^='r-']").all():
        values = [v for v in select.locator("option").evaluate_all("os => os.map(o => o.value)") if v]
        select.select_option(values[0])
    before = page.url
    page.get_by_role("button", name="Submit and go to the next task").click()
    page.wait_for_url(lambda url: url != before and bool(then.match(url)))
    page.wait_for_load_state("load")


def assert_blind(page: Page) -> None:
    html = page.content()
    for key, model in SYSTEM_NAMES.items():
        assert key not in html and model not in html


def start(page: Page, url: str) -> None:
    page.goto(url)
    expect(page.get_by_role("heading", name="Welcome to this study")).to_be_visible()
    page.get_by_role("button", name="Start").click()
    page.wait_for_url(re.compile(r".*/annotate/\d+/$"))


def prolific_url(base: str, link: RecruitmentLink, pid: str, session: str) -> str:
    query = urlencode({"PROLIFIC_PID": pid, "STUDY_ID": "study-1", "SESSION_ID": session})
    return f"{base}/join/{link.token}/?{query}"


def test_prolific_worker_rates_three_tasks_one_gold_and_lands_on_the_completion_url(
    new_page, live_server, researcher, platform_server
):
    dataset_lines = lfqa_lines(4, systems=2)
    dataset = make_dataset("gold set", owner=researcher, lines=dataset_lines)
    gold_item = dataset.items.order_by("pk").first()
    assert gold_item is not None
    GoldItem.objects.create(
        item=gold_item, expected={"sys_alpha": {"factuality": 3}}, tolerance=1, created_by=researcher
    )
    campaign = campaign_create(
        name="Gold study",
        dataset=dataset,
        raters_per_item=2,
        annotators=[],
        guidelines="Rate **every** answer.",
        scale_dropdowns=True,
        ask_preference=False,
        rationale_required=False,
        gold_rate=0.34,
    )
    completion_url = f"{platform_server.origin}/submissions/complete?cc=CROWD42"
    link = link_create(
        campaign=campaign,
        platform=Platform.PROLIFIC,
        created_by=researcher,
        tasks_per_worker=3,
        completion_code="CROWD42",
        completion_url=completion_url,
    )
    page = new_page()
    page.goto(prolific_url(live_server.url, link, PID, "session-1"))
    shot(page, "prolific-start")
    assert PID not in page.content()
    page.get_by_role("button", name="Start").click()
    page.wait_for_url(re.compile(r".*/annotate/\d+/$"))
    shot(page, "prolific-campaign")
    page.locator("form button.primary").click()
    page.wait_for_url(TASK_URL)
    for n in range(1, 4):
        assert_blind(page)
        assert PID not in page.content()
        shot(page, f"prolific-task-{n}")
        rate_current_task(page, TASK_URL if n < 3 else DONE_URL)
    expect(page.locator("#completion-code")).to_have_text("CROWD42")
    shot(page, "prolific-done")
    page.wait_for_url(completion_url, timeout=15_000)
    shot(page, "prolific-back-on-platform")
    assert ("GET", "/submissions/complete?cc=CROWD42", {}) in platform_server.requests

    worker = CrowdWorker.objects.get()
    assert worker.platform_worker_id == PID and PID not in worker.user.username
    submitted = Assignment.objects.filter(annotator=worker.user, status=AssignmentStatus.SUBMITTED)
    assert submitted.count() == 3
    assert CrowdSession.objects.get().completed_at is not None
    # The gold item's task is one of the three (a rate of 0.34 puts one gold task in each block of three), and it
    # counted toward the quota of three.
    assert Task.objects.filter(campaign=campaign, is_gold=True).count() == 1
    assert submitted.filter(is_gold=True).count() == 1
    assert page.problems == []  # type: ignore[attr-defined]


def test_mturk_preview_stores_nothing_and_the_assignment_posts_back(new_page, live_server, researcher, platform_server):
    campaign = make_campaign(researcher, name="MTurk study")
    link = link_create(
        campaign=campaign, platform=Platform.MTURK, created_by=researcher, tasks_per_worker=1, completion_code="MT-7"
    )
    base = f"{live_server.url}/join/{link.token}/mturk/"
    page = new_page()
    before = row_counts()
    preview = {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "HIT-9"}
    page.goto(f"{base}?{urlencode(preview)}")
    expect(page.get_by_role("heading", name="Preview of this task")).to_be_visible()
    # The real task form, but inert: visible, and nothing in it takes the focus or a click.
    assert page.locator("form").count() == 1
    expect(page.locator(".task-preview form.task-form [data-aspect-control]").first).to_be_visible()
    assert page.evaluate(
        """() => { const reason = document.querySelector('.task-preview #rationale');
                  reason.focus();
                  return document.querySelector('.task-preview').inert && document.activeElement !== reason; }"""
    )
    assert_blind(page)
    shot(page, "mturk-preview")
    assert row_counts() == before

    accepted = {
        "assignmentId": "ASSIGNMENT-77",
        "hitId": "HIT-9",
        "workerId": "A2MTURKCANARY",
        "turkSubmitTo": platform_server.origin,
    }
    start(page, f"{base}?{urlencode(accepted)}")
    shot(page, "mturk-campaign")
    page.locator("form button.primary").click()
    page.wait_for_url(re.compile(r".*/tasks/[a-z2-7]{13}/$"))
    shot(page, "mturk-task")
    submitted_url = f"{platform_server.origin}/mturk/externalSubmit"
    rate_current_task(page, re.compile(f"({re.escape(submitted_url)}|.*/join/done/)$"))
    page.wait_for_url(submitted_url, timeout=15_000)
    shot(page, "mturk-submitted")
    posts = [request for request in platform_server.requests if request[0] == "POST"]
    assert len(posts) == 1
    _, path, body = posts[0]
    assert path == "/mturk/externalSubmit"
    assert body["assignmentId"] == ["ASSIGNMENT-77"] and body["completion_code"] == ["MT-7"]
    assert page.problems == []  # type: ignore[attr-defined]


def test_returning_worker_resumes_and_a_second_worker_gets_other_tasks(new_page, live_server, researcher):
    campaign = make_campaign(researcher, items=3, raters=1, name="Resume study")
    link = link_create(campaign=campaign, platform=Platform.PROLIFIC, created_by=researcher, completion_code="R1")
    first = new_page()
    start(first, prolific_url(live_server.url, link, "worker-one", "s-1"))
    first.locator("form button.primary").click()
    first.wait_for_url(re.compile(r".*/tasks/[a-z2-7]{13}/$"))
    open_task = first.url
    shot(first, "resume-first-visit")
    first.context.close()

    back = new_page()  # the same worker in a fresh browser, from a new Prolific session
    start(back, prolific_url(live_server.url, link, "worker-one", "s-2"))
    expect(back.locator("form button.primary")).to_have_text("Continue")
    back.locator("form button.primary").click()
    back.wait_for_url(open_task)
    shot(back, "resume-same-task")

    second = new_page()
    start(second, prolific_url(live_server.url, link, "worker-two", "s-3"))
    second.locator("form button.primary").click()
    second.wait_for_url(re.compile(r".*/tasks/[a-z2-7]{13}/$"))
    assert second.url != open_task
    rate_current_task(second)
    assert second.url != open_task
    shot(second, "resume-second-worker")
    # Every other task is taken: with one rater per task the second worker is done.
    rate_current_task(second, DONE_URL)
    shot(second, "resume-second-worker-done")

    assert CrowdWorker.objects.count() == 2
    held = (
        Assignment.objects.filter(campaign=campaign, annotator__isnull=False)
        .values("task_id")
        .annotate(raters=Count("annotator", distinct=True), rows=Count("pk"))
    )
    assert held and all(row["raters"] <= campaign.raters_per_item and row["rows"] <= 1 for row in held)
    assert Assignment.objects.filter(campaign=campaign).count() == 3 * campaign.raters_per_item

    panel = new_page()
    log_in(panel, live_server.url, researcher.username)
    panel.goto(f"{live_server.url}/campaigns/{campaign.pk}/progress/")
    section = panel.locator("#recruitment")
    expect(section.locator("input.link-url")).to_have_value(
        re.compile(r"/join/.+/\?PROLIFIC_PID=\{\{%PROLIFIC_PID%\}\}")
    )
    expect(section).to_contain_text("2 workers (1 active, 1 done), 2 tasks submitted.")
    assert "worker-one" not in panel.content() and "worker-two" not in panel.content()
    section.scroll_into_view_if_needed()
    shot(panel, "researcher-panel")
    for page in (back, second, panel):
        assert page.problems == []  # type: ignore[attr-defined]
