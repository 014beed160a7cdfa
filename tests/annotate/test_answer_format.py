"""Answers keep the model's line breaks on every page that shows them (the task page, the campaign builder's preview,
the item page), as plain text by default or as Markdown with line breaks kept when the dataset says so, and stay
sanitised either way."""

import re
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse

from annotations.campaigns.claims import assignment_claim
from annotations.models import AnswerFormat, Dataset, Item
from annotations.text.markdown import render_answer
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotate.test_research_area import builder_post, signed_in
from tests.conftest import CAST_PASSWORD

pytestmark = pytest.mark.django_db

RECIPE = "Boil the water.\nAdd the pasta.\nWait nine minutes.\n\nServe **hot**."
HOSTILE = "First line <script>alert(1)</script>\n<img src=x onerror=alert(1)>\n[x](javascript:alert(1))"


VOID_ELEMENTS = {"br", "hr", "img", "input", "wbr"}


class _Answers(HTMLParser):
    """The inner HTML of each answer box: elements with the class `answer` or `answer-text`."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)  # keep the escapes as the page has them
        self.answers: list[str] = []
        self._depth = 0
        self._buffer: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if self._depth and tag in VOID_ELEMENTS:
            self._buffer.append(self.get_starttag_text() or "")
        elif self._depth:
            self._depth += 1
            self._buffer.append(self.get_starttag_text() or "")
        elif tag == "div" and ({"answer", "answer-text"} & set(classes)):
            self._depth = 1
            self._buffer = []

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._depth:
            self._buffer.append(self.get_starttag_text() or "")

    def handle_endtag(self, tag: str) -> None:
        if not self._depth:
            return
        self._depth -= 1
        if self._depth:
            self._buffer.append(f"</{tag}>")
        else:
            self.answers.append("".join(self._buffer))

    def handle_data(self, data: str) -> None:
        if self._depth:
            self._buffer.append(data)

    def handle_entityref(self, name: str) -> None:
        self.handle_data(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self.handle_data(f"&#{name};")


def answers_in(html: str) -> list[str]:
    parser = _Answers()
    parser.feed(html)
    assert parser.answers, "no answer box on the page"
    return parser.answers


def lines_kept(answer_html: str) -> bool:
    """Each step of the recipe on a line of its own: separated by <br>, never joined into one run of text."""
    return bool(re.search(r"Boil the water\.<br\s*/?>\s*Add the pasta\.<br\s*/?>\s*Wait nine minutes\.", answer_html))


def dataset_with(owner, answer: str, answer_format: str) -> Dataset:  # type: ignore[no-untyped-def]
    dataset = make_dataset(f"recipes-{answer_format}", owner=owner, items=1, systems=2, answer=answer)
    Dataset.objects.filter(pk=dataset.pk).update(answer_format=answer_format)
    dataset.refresh_from_db()
    return dataset


def task_page(dataset: Dataset, annotator) -> str:  # type: ignore[no-untyped-def]
    campaign = make_campaign(dataset, [annotator], name=f"c-{dataset.pk}", raters_per_item=1)
    assignment = assignment_claim(campaign=campaign, user=annotator)
    assert assignment is not None
    client = Client()
    assert client.login(username=annotator.username, password=CAST_PASSWORD)
    response = client.get(reverse("annotate-task", args=[campaign.pk, assignment.task_id]))
    assert response.status_code == 200
    return response.content.decode()


def builder_preview(dataset: Dataset, researcher, annotator) -> str:  # type: ignore[no-untyped-def]
    response = signed_in(researcher).post(
        reverse("research-campaign-new"), builder_post(dataset, annotator, preview="1")
    )
    assert response.status_code == 200
    return response.content.decode()


def item_page(dataset: Dataset, researcher) -> str:  # type: ignore[no-untyped-def]
    item = Item.objects.get(dataset=dataset)
    response = signed_in(researcher).get(reverse("research-item", args=[dataset.pk, item.pk]))
    assert response.status_code == 200
    return response.content.decode()


PAGES = {
    "task page": lambda dataset, researcher, annotator: task_page(dataset, annotator),
    "builder preview": builder_preview,
    "item page": lambda dataset, researcher, annotator: item_page(dataset, researcher),
}


@pytest.mark.parametrize("page", PAGES)
def test_plain_text_is_the_default_and_keeps_line_breaks(page, researcher, annotator1) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset("recipes", owner=researcher, items=1, systems=2, answer=RECIPE)
    assert dataset.answer_format == AnswerFormat.PLAIN
    answers = answers_in(PAGES[page](dataset, researcher, annotator1))
    assert all(lines_kept(answer) for answer in answers), answers
    assert all("Serve **hot**." in answer and "<strong>" not in answer for answer in answers)  # shown as written


@pytest.mark.parametrize("page", PAGES)
def test_markdown_keeps_line_breaks_too(page, researcher, annotator1) -> None:  # type: ignore[no-untyped-def]
    dataset = dataset_with(researcher, RECIPE, AnswerFormat.MARKDOWN)
    answers = answers_in(PAGES[page](dataset, researcher, annotator1))
    assert all(lines_kept(answer) for answer in answers), answers
    assert all("<strong>hot</strong>" in answer for answer in answers)


@pytest.mark.parametrize("answer_format", AnswerFormat.values)
@pytest.mark.parametrize("page", PAGES)
def test_answers_stay_sanitised(page, answer_format, researcher, annotator1) -> None:  # type: ignore[no-untyped-def]
    dataset = dataset_with(researcher, HOSTILE, answer_format)
    for answer in answers_in(PAGES[page](dataset, researcher, annotator1)):
        assert "<script" not in answer and "<img" not in answer and "<a " not in answer  # the link stays text
        assert "&lt;script&gt;" in answer and re.search(r"First line .*<br\s*/?>", answer)


def test_render_answer_of_nothing_and_of_an_unknown_format() -> None:
    assert render_answer("", AnswerFormat.PLAIN) == "" and render_answer(None, AnswerFormat.MARKDOWN) == ""
    assert render_answer("a\nb", "") == "<p>a<br>b</p>"  # anything but Markdown is plain text


def test_the_researcher_chooses_the_format_on_the_item_browser(researcher, annotator1) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset("recipes", owner=researcher, items=1, systems=2, answer=RECIPE)
    client = signed_in(researcher)
    items = client.get(reverse("research-items", args=[dataset.pk])).content.decode()
    assert "Answers are shown as" in items
    assert re.search(r'<option value="plain" selected>Plain text, line breaks kept</option>', items)
    url = reverse("research-dataset-answer-format", args=[dataset.pk])
    changed = client.post(url, {"answer_format": "markdown"}, follow=True).content.decode()
    assert "Answers are now shown as: Markdown, line breaks kept." in changed
    assert re.search(r'<option value="markdown" selected>', changed)
    refused = client.post(url, {"answer_format": "html"}, follow=True).content.decode()
    assert "unknown answer format" in refused and "nothing was changed" in refused
    dataset.refresh_from_db()
    assert dataset.answer_format == AnswerFormat.MARKDOWN
    assert Client().post(url, {"answer_format": "plain"}).status_code == 302  # sign-in first
    annotator_client = Client()
    assert annotator_client.login(username=annotator1.username, password=CAST_PASSWORD)
    assert annotator_client.post(url, {"answer_format": "plain"}).status_code == 403
    assert client.get(url).status_code == 405
