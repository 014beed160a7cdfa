"""The hostile corpus and the page checker are themselves tested: the checker must see a live payload and must pass
escaped text, and the hostile dataset must import and export unchanged."""

import io
import json

import pytest
from django.template import Context, Template
from django.utils.html import escape

from annotations.datasets.exporting import iter_export_lines
from annotations.models import Aspect, Rater, Rating, Response, System
from judging.models import Judge
from tests.security.hostile import (
    CORPUS,
    EVALUATED_TEMPLATE_FORMS,
    MARKUP_PAYLOADS,
    NAME_CORPUS,
    TEMPLATE_PAYLOADS,
    hostile_dataset_bytes,
    hostile_items,
    hostile_judge_output,
    import_hostile_dataset,
)
from tests.security.html_checks import find_active_payloads

SECRET = "test-secret-key-that-is-long-enough-0123456789"


def _page(body: str) -> str:
    return f'<!DOCTYPE html><html><head><script src="/static/js/app.js"></script></head><body>{body}</body></html>'


@pytest.mark.parametrize("payload", MARKUP_PAYLOADS)
def test_checker_sees_every_markup_payload_when_it_lands_raw(payload: str) -> None:
    # Payloads that break out of an attribute are shown in the context they were written for.
    contexts = [_page(f"<p>{payload}</p>"), _page(f'<p title="{payload}">x</p>'), _page(f"<p title='{payload}'>x</p>")]
    contexts.append(_page(f"<script>var x = '{payload}';</script>"))
    assert any(find_active_payloads(page, secret_key=SECRET) for page in contexts), payload


@pytest.mark.parametrize("payload", CORPUS)
def test_checker_passes_the_corpus_when_django_escapes_it(payload: str) -> None:
    rendered = Template(
        '<p title="{{ v }}">{{ v }}</p><textarea>{{ v }}</textarea><a href="/x?q={{ v|urlencode }}">l</a>'
    )
    page = _page(rendered.render(Context({"v": payload})))
    assert find_active_payloads(page, secret_key=SECRET) == []


def test_checker_sees_data_marked_safe() -> None:
    page = _page(Template("{{ v|safe }}").render(Context({"v": MARKUP_PAYLOADS[0]})))
    problems = {finding.problem for finding in find_active_payloads(page, secret_key=SECRET)}
    assert "payload element became markup" in problems
    assert "inline script (the CSP forbids it; data must never reach one)" in problems


@pytest.mark.parametrize("evaluated", EVALUATED_TEMPLATE_FORMS)
def test_checker_sees_template_syntax_evaluated_from_data(evaluated: str) -> None:
    assert find_active_payloads(_page(f"<p>{evaluated}</p>"), secret_key=SECRET)


def test_checker_sees_a_django_tag_from_data_that_was_rendered() -> None:
    payload = next(p for p in TEMPLATE_PAYLOADS if "debug" in p)
    rendered = Template(payload).render(Context({}))
    assert rendered != payload
    assert find_active_payloads(_page(f"<p>{escape(rendered)}</p>"), secret_key=SECRET)


def test_checker_sees_the_secret_key_and_script_urls() -> None:
    assert find_active_payloads(_page(f"<p>{SECRET}</p>"), secret_key=SECRET)
    assert find_active_payloads(_page('<a href="java&#x09;script:alert(1)">x</a>'), secret_key=SECRET)
    assert find_active_payloads(_page('<div hx-get="https://evil.example/">x</div>'), secret_key=SECRET)
    assert find_active_payloads(_page('<div hx-on::after-request="alert(1)">x</div>'), secret_key=SECRET)


def test_corpus_covers_every_attack_class() -> None:
    joined = "\n".join(CORPUS)
    for needle in ["<script", "onerror=", "javascript:", "hx-get", "hx-on", "<svg", "](javascript:", "{{7*7}}"]:
        assert needle in joined, needle
    assert "{settings.SECRET_KEY}" in joined
    for prefix in ["=", "+", "-", "@", "\t", "\r"]:
        assert any(payload.startswith(prefix) for payload in CORPUS), prefix


def test_hostile_items_put_every_name_payload_in_every_name_field() -> None:
    items = list(hostile_items())
    system_keys = {key for item in items for turn in item["turns"] for key in turn["responses"]}
    rater_ids = {r for item in items for turn in item["turns"] for a in turn["responses"].values() for r in a["raters"]}
    judge_names = {
        name for item in items for a in item["turns"][0]["responses"].values() for name in a.get("auto_evals", {})
    }
    prompts = {turn["prompt"] for item in items for turn in item["turns"]}
    assert set(NAME_CORPUS) <= system_keys
    assert set(NAME_CORPUS) <= rater_ids
    assert set(NAME_CORPUS) <= judge_names
    assert set(CORPUS) <= prompts


@pytest.mark.django_db
def test_hostile_dataset_imports_and_round_trips_unchanged(researcher) -> None:  # type: ignore[no-untyped-def]
    result = import_hostile_dataset(owner=researcher)
    dataset = result.dataset
    assert result.items == len(CORPUS)
    assert set(System.objects.filter(dataset=dataset).values_list("key", flat=True)) >= set(NAME_CORPUS)
    assert set(Aspect.objects.filter(dataset=dataset).values_list("name", flat=True)) == set(NAME_CORPUS[:6])
    assert Rater.objects.filter(dataset=dataset).count() == len(NAME_CORPUS)
    assert set(Judge.objects.filter(dataset=dataset).values_list("name", flat=True)) == set(NAME_CORPUS)
    assert Rating.objects.filter(aspect__dataset=dataset).count() > 0
    assert Response.objects.filter(turn__item__dataset=dataset, text__contains="<script").exists()
    exported = [json.loads(line) for line in iter_export_lines(dataset=dataset)]
    original = [json.loads(line) for line in io.BytesIO(hostile_dataset_bytes()).read().decode().splitlines()]
    assert exported == original


def test_hostile_judge_output_keeps_a_parseable_score() -> None:
    assert hostile_judge_output(CORPUS[0], score=4).endswith("Score: 4")
    assert json.loads(hostile_judge_output(CORPUS[0], as_json=True))["score"] == 3
