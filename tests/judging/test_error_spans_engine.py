"""The error-span judge end to end in this process (Celery eager), against the fake provider on a real socket."""

import json
from typing import Any

import pytest
from django.urls import reverse

from judging import services
from judging.models import JudgeRun, JudgeScore, Judgment, RunStatus
from judging.selectors import judge_run_progress
from judging.services import LaunchError
from tests.conftest import client_for
from tests.factories import AspectFactory
from tests.fakeprovider import FakeProvider
from tests.judging.factories import make_dataset

pytestmark = pytest.mark.django_db

SCHEME = {
    "categories": ["Accuracy/Mistranslation", "Fluency/Grammar"],
    "severities": {"minor": 1, "major": 5},
}


def span_dataset(owner: Any = None) -> Any:
    """Two items by two systems; a scale aspect "overall" and a span aspect "errors". Answers read
    "Answer <item> from system <system>: topic <item> is explained."."""
    dataset = make_dataset(items=2, systems=2, owner=owner)
    AspectFactory(
        dataset=dataset,
        name="errors",
        label="Errors",
        kind="spans",
        span_scheme=SCHEME,
        min_value=0,
        max_value=25,
        ideal=0,
        position=1,
    )
    return dataset


def config(fake: FakeProvider, **overrides: Any) -> dict[str, Any]:
    return {
        "name": "spans",
        "method": "error_spans",
        "model": "openai/gpt-4o-mini",
        "api_base": fake.base_url,
        "timeout_s": 5,
        "max_retries": 2,
        **overrides,
    }


def launch(dataset: Any, cfg: dict[str, Any], capture: Any) -> JudgeRun:
    with capture(execute=True):
        run = services.judge_run_launch(dataset=dataset, config=cfg, launched_by=None)
    run.refresh_from_db()
    return run


def _errors(*errors: tuple[str, str, str]) -> str:
    listed = [{"quote": q, "category": c, "severity": s} for q, c, s in errors]
    return "I read the answer closely.\n" + json.dumps({"errors": listed})


def test_a_span_judge_places_quotes_reports_the_others_and_scores_mqm(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any, researcher: Any, annotator: Any
) -> None:
    dataset = span_dataset(owner=researcher)
    fake_provider.script(
        default={"content": _errors()},
        rules=[
            {
                "match": "Answer 0 from system 0",
                "behaviour": {
                    "content": _errors(
                        ("topic 0 is explained", "Accuracy/Mistranslation", "major"),
                        ("the moon is made of cheese", "Accuracy/Mistranslation", "minor"),
                        ("0", "Fluency/Grammar", "minor"),
                    )
                },
            }
        ],
    )
    run = launch(dataset, config(fake_provider), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    # Only the span aspect: the method judges the aspects of its kind.
    assert (run.total, run.done, run.parse_errors) == (4, 4, 0)
    assert set(Judgment.objects.filter(run=run).values_list("aspect_name", flat=True)) == {"errors"}
    marked = Judgment.objects.get(run=run, response__text__startswith="Answer 0 from system 0")
    assert [(s["status"], s["start"], s["end"]) for s in marked.spans] == [
        ("found", 24, 44),
        ("not found", None, None),
        ("ambiguous", None, None),
    ]
    assert marked.response.text[24:44] == "topic 0 is explained"
    assert marked.spans[2]["occurrences"] == 3
    # Every reported error counts in the MQM score, placed or not: major 5 + minor 1 + minor 1.
    assert marked.score == 7.0 and marked.score_mode == "mqm"
    scores = dict(JudgeScore.objects.filter(judge=run.judge).values_list("response__text", "value"))
    assert sorted(scores.values()) == [0.0, 0.0, 0.0, 7.0]
    progress = judge_run_progress(run)
    assert progress.quote_placement == {"found": 1, "not found": 1, "ambiguous": 1, "empty quote": 0}
    assert progress.unplaced_quotes == 2
    # The run page counts them, in English and Japanese.
    url = reverse("research-judge-run", args=[run.pk])
    page = client_for(researcher).get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Error quotes not placed" in html and "1 not found, 1 ambiguous" in html
    japanese = client_for(researcher).get(url, HTTP_ACCEPT_LANGUAGE="ja").content.decode()
    assert "位置を特定できなかった誤りの引用" in japanese and "見つからない 1 件、複数箇所に該当 1 件" in japanese
    assert client_for(researcher).post(url).status_code == 405
    assert client_for(annotator).get(url).status_code == 403


def test_a_reply_outside_the_scheme_is_a_parse_error_and_nothing_is_stored(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    dataset = span_dataset()
    fake_provider.script(default={"content": _errors(("topic", "Style/Awkward", "minor"))})
    run = launch(dataset, config(fake_provider), django_capture_on_commit_callbacks)
    assert run.parse_errors == 4 and run.status == RunStatus.FAILED
    judgment = Judgment.objects.filter(run=run).first()
    assert judgment.spans is None and judgment.score is None and "Style/Awkward" in judgment.error
    assert not JudgeScore.objects.filter(judge=run.judge).exists()


def test_methods_and_aspects_of_different_kinds_are_refused_at_launch(
    fake_provider: FakeProvider, django_capture_on_commit_callbacks: Any
) -> None:
    dataset = span_dataset()
    with pytest.raises(LaunchError, match="not a span aspect: overall"):
        launch(dataset, config(fake_provider, aspects=["overall"]), django_capture_on_commit_callbacks)
    with pytest.raises(LaunchError, match="needs the error_spans method: errors"):
        launch(dataset, config(fake_provider, method="single", aspects=["errors"]), django_capture_on_commit_callbacks)
