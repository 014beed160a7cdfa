"""A study's seam of error spans in real Chromium, per language: two annotators mark error spans on an MQM span
aspect (one by keys, one with the mouse) and one corrects a category on a revisit, and the stored ratings, the
JSONL and flat CSV downloads and the quality panel's span agreement must all say what was marked, before and after.

Screenshots of every step go to tests/artifacts/ (gitignored)."""

import csv
import io
import json
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from annotations.models import (
    Campaign,
    Rating,
)
from tests.browser.pages import ARTIFACTS, log_in
from tests.browser.test_error_spans import WRONG, drag_over, graphemes, keyboard_mark, task_text
from tests.browser.whole_study.sessions import Session, download, shot
from tests.spans.world import ANSWERS, SPAN_RUBRIC, span_campaign

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


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
