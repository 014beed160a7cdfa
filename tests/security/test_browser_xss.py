"""In real Chromium, no payload of the hostile world executes on the annotator, researcher,
dashboard, admin and run pages. Every payload script sets window.__pwned or calls alert(); the test listens for
dialogs, reads window.__pwned after each page settles, and counts CSP refusals (a blocked injection is still one)."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from playwright.sync_api import sync_playwright

from annotations.text.opaque import opaque_ref
from tests.chromium import launch_chromium
from tests.security.hostile import MARKUP_PAYLOADS
from tests.security.world import FullWorld


def _session(user: User) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def pages_by_role(world: FullWorld) -> dict[str, list[str]]:
    dataset, run, campaign = world.dataset, world.run, world.campaign
    return {
        "annotator": [
            "/",
            f"/annotate/{campaign.pk}/",
            f"/annotate/{campaign.pk}/tasks/{opaque_ref('task', world.task.pk)}/",
            "/factscore/review/",
            f"/factscore/review/{world.review_campaign.pk}/tasks/{world.review_task.pk}/",
        ],
        "researcher": [
            "/",
            f"/dashboard/{dataset.pk}/",
            f"/dashboard/{dataset.pk}/?aspect={MARKUP_PAYLOADS[0]}",
            f"/dashboard/{dataset.pk}/judges/?judge={run.name}",
            f"/campaigns/{campaign.pk}/progress/",
            f"/factscore/runs/{world.fact_run.pk}/",
            f"/factscore/answers/{world.fact_answer.pk}/",
        ],
        "superuser": [
            "/admin/",
            f"/admin/annotations/dataset/{dataset.pk}/change/",
            f"/admin/annotations/response/?q={MARKUP_PAYLOADS[0]}",
            "/admin/annotations/system/",
            "/admin/annotations/rating/",
            f"/admin/annotations/campaign/{campaign.pk}/change/",
            "/admin/judging/judgerun/",
            f"/admin/judging/judgerun/{run.pk}/change/",
            f"/admin/judging/judgerun/{run.pk}/progress/",
            "/admin/judging/judgeconfig/",
            # The config form draws the chosen dataset's aspect names with its script.
            f"/admin/judging/judgeconfig/add/?template=single&dataset={dataset.pk}",
            f"/admin/judging/factreviewcampaign/{world.review_campaign.pk}/change/",
        ],
    }


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_no_payload_executes_in_chromium(live_server: Any, full_world: FullWorld) -> None:
    users = {"annotator": full_world.annotator, "researcher": full_world.researcher, "superuser": full_world.superuser}
    # Everything that touches the database happens before Playwright starts its event loop in this thread.
    plan = pages_by_role(full_world)
    sessions = {role: _session(user) for role, user in users.items()}
    dialogs: list[str] = []
    csp_refusals: list[str] = []
    pwned: list[str] = []
    visited = 0
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            # The listener works: a payload outside our site (no CSP) fires a dialog and sets the flag.
            probe = browser.new_page()
            probe.on("dialog", lambda dialog: (dialogs.append("probe"), dialog.dismiss()))
            probe.set_content(MARKUP_PAYLOADS[1])
            probe.wait_for_timeout(300)
            assert dialogs == ["probe"] and probe.evaluate("window.__pwned") == 1
            dialogs.clear()
            probe.close()

            for role, urls in plan.items():
                context = browser.new_context()
                context.add_cookies([{"name": "sessionid", "value": sessions[role], "url": live_server.url}])
                page = context.new_page()
                current = {"url": ""}

                def on_dialog(dialog: Any, current: dict[str, str] = current) -> None:
                    dialogs.append(f"{current['url']}: {dialog.message}")
                    dialog.dismiss()

                def on_console(message: Any, current: dict[str, str] = current) -> None:
                    # Script refusals only: Django's admin JavaScript sets inline styles itself (style-src
                    # refusals on admin pages), which no data can cause; a refused script is a blocked injection.
                    text = message.text
                    if "Content Security Policy" in text and ("script-src" in text or "eval" in text):
                        csp_refusals.append(f"{current['url']}: {text[:160]}")

                page.on("dialog", on_dialog)
                page.on("console", on_console)
                for url in urls:
                    current["url"] = f"{role} {url}"
                    response = page.goto(live_server.url + url)
                    assert response is not None and response.status == 200, (role, url, response and response.status)
                    page.wait_for_load_state("networkidle")
                    page.wait_for_timeout(200)
                    if page.evaluate("typeof window.__pwned !== 'undefined'"):
                        pwned.append(current["url"])
                    visited += 1
                context.close()
        finally:
            browser.close()
    assert visited >= 20
    assert dialogs == [], dialogs
    assert pwned == [], pwned
    assert csp_refusals == [], csp_refusals
