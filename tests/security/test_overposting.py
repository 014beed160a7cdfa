"""Extra fields on writable endpoints are rejected or ignored with the database unchanged;
filter and ordering parameters cannot reach relations (rater__password__startswith does nothing); a user-supplied
output regex cannot hang a worker: (a|aa)+$ on 30 a's fails fast as a parse error."""

import io
import json
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from annotations.models import Dataset, Rater, Rating
from annotations.text.opaque import opaque_ref
from judging.models import JudgeConfig, JudgeRun, Judgment
from tests.security.test_csrf import database_snapshot
from tests.security.test_xss_sweep import _body
from tests.security.urlwalk import iter_endpoints
from tests.security.world import FullWorld

pytestmark = pytest.mark.django_db

HOSTILE_EXTRAS: dict[str, Any] = {
    "is_staff": True,
    "is_superuser": True,
    "rater": 1,
    "rater_id": 1,
    "annotator": 1,
    "dataset": 1,
    "dataset_id": 1,
    "owner": 1,
    "status": "succeeded",
    "origin": "import",
    "api_key": "sk-overposted",
    "launched_by": 1,
    "created_by": 1,
    "cost_usd": 0,
}
GOOD_LINE = b'{"id": 1, "turns": [{"prompt": "p", "responses": {"a": {"response": "r", "human_evals": {"x": [1]}}}}]}\n'


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _flags(*users: User) -> list[tuple[bool, bool]]:
    return [tuple(User.objects.filter(pk=u.pk).values_list("is_staff", "is_superuser").get()) for u in users]  # type: ignore[misc]


def test_import_api_rejects_extra_fields(researcher: User, annotator1: User) -> None:
    client = _client(researcher)
    response = client.post(
        "/api/datasets/import/",
        {"name": "over", "file": io.BytesIO(GOOD_LINE), **HOSTILE_EXTRAS, "owner": annotator1.pk},
    )
    assert response.status_code == 400 and "unexpected fields" in response.json()["detail"]
    assert not Dataset.objects.exists()
    assert _flags(researcher) == [(True, False)]


def test_judge_config_and_run_apis_ignore_or_reject_extra_fields(full_world: FullWorld) -> None:
    client = _client(full_world.researcher)
    config = {"name": "overposted", "method": "metric", "metric": "length"}
    response = client.post(
        "/api/judging/configs/new/",
        {"config": {**config, "api_key": "sk-overposted", "owner": full_world.researcher_b.pk}, **HOSTILE_EXTRAS},
        content_type="application/json",
    )
    assert response.status_code in {201, 400}
    for row in JudgeConfig.objects.all():
        assert "sk-overposted" not in json.dumps(row.config)
        assert row.owner_id in {full_world.researcher.pk, full_world.researcher_b.pk, None}
    stored = JudgeConfig.objects.filter(name="overposted").first()
    if stored is not None:
        assert stored.owner_id == full_world.researcher.pk
    runs_before = set(JudgeRun.objects.values_list("pk", flat=True))
    response = client.post(
        "/api/judging/runs/launch/",
        {
            "dataset": full_world.dataset.pk,
            "config": config,
            **{k: v for k, v in HOSTILE_EXTRAS.items() if k != "dataset"},
        },
        content_type="application/json",
    )
    assert response.status_code in {201, 400}
    for run in JudgeRun.objects.exclude(pk__in=runs_before):
        assert run.launched_by_id == full_world.researcher.pk
        assert run.dataset_id == full_world.dataset.pk
        assert run.cost_usd != 0 or run.status != "succeeded" or run.calls == 0
    assert _flags(full_world.researcher) == [(True, False)]


def _task_payload(client: Client, world: FullWorld) -> dict[str, Any]:
    task = client.get(f"/api/annotate/campaigns/{world.campaign.pk}/tasks/{opaque_ref('task', world.task.pk)}/")
    assert task.status_code == 200, task.content[:300]
    data = task.json()
    ratings = {
        str(candidate["number"]): {aspect["name"]: aspect["min"] for aspect in data["aspects"]}
        for candidate in data["candidates"]
    }
    return {
        "idempotency_key": "overposting-1",
        "ratings": ratings,
        "preference": data["candidates"][0]["number"],
        "rationale": "fine",
    }


def test_annotator_submit_rejects_or_ignores_extra_fields(full_world: FullWorld) -> None:
    client = _client(full_world.annotator)
    payload = _task_payload(client, full_world)
    foreign_rater = Rater.objects.filter(dataset=full_world.dataset_b).first()
    extras = {
        **HOSTILE_EXTRAS,
        "rater": foreign_rater.pk,
        "dataset": full_world.dataset_b.pk,
        "annotator": full_world.annotator_b.pk,
    }
    url = f"/api/annotate/campaigns/{full_world.campaign.pk}/tasks/{opaque_ref('task', full_world.task.pk)}/submit/"
    before = database_snapshot()
    refused = client.post(url, {**payload, **extras}, content_type="application/json")
    if refused.status_code == 400:
        assert database_snapshot() == before
        accepted = client.post(url, payload, content_type="application/json")
    else:
        accepted = refused
    assert accepted.status_code in {200, 201}, accepted.content[:300]
    mine = Rater.objects.get(dataset=full_world.dataset, user=full_world.annotator)
    new = Rating.objects.filter(response__turn=full_world.task.turn, origin="app")
    assert new.exists()
    assert set(new.values_list("rater_id", flat=True)) == {mine.pk}
    assert not Rating.objects.filter(rater=foreign_rater, origin="app").exists()
    assert _flags(full_world.annotator) == [(False, False)]


def test_annotator_form_submit_ignores_extra_fields(full_world: FullWorld) -> None:
    client = _client(full_world.annotator)
    url = f"/annotate/{full_world.campaign.pk}/tasks/{opaque_ref('task', full_world.task.pk)}/submit/"
    response = client.post(url, {**{k: str(v) for k, v in HOSTILE_EXTRAS.items()}, "rationale": "x"})
    assert response.status_code in {200, 302, 400, 422}
    assert not Rating.objects.filter(origin="app", rater__user=full_world.annotator_b).exists()
    assert _flags(full_world.annotator) == [(False, False)]


INJECTED_QUERY = {
    "rater__password__startswith": "pbkdf2",
    "owner__password__startswith": "pbkdf2",
    "dataset__owner__password__startswith": "pbkdf2",
    "annotators__password__startswith": "pbkdf2",
    "launched_by__password__regex": "^p",
    "ordering": "rater__password",
    "order_by": "-owner__password",
    "o": "rater__password",
    "sort": "password",
    "fields": "password",
    "expand": "owner",
}


def test_filter_and_ordering_parameters_cannot_reach_relations(full_world: FullWorld) -> None:
    """Every GET endpoint answers the same with relation lookups added to the query (or refuses them with 400)."""
    problems = []
    compared = 0
    for role in ("researcher", "annotator", "superuser"):
        client = _client(full_world.roles[role])  # type: ignore[arg-type]
        for endpoint in iter_endpoints():
            target = endpoint.path_with(full_world.params_for(endpoint.route)) or endpoint.path
            base = full_world.query_for(endpoint.route)
            plain = client.get(target, base)
            injected = client.get(target, {**base, **INJECTED_QUERY})
            if injected.status_code >= 500:
                problems.append(f"{target} as {role}: {injected.status_code}")
                continue
            refused = injected.status_code == 400 or injected.get("Location", "").endswith("?e=1")  # admin: "?e=1"
            if refused or plain.status_code != 200:
                continue
            if injected.status_code != 200:
                problems.append(f"{target} as {role}: {plain.status_code} -> {injected.status_code}")
                continue
            content_type = plain.get("Content-Type", "")
            if content_type.startswith(("application/json", "text/csv", "application/jsonl")):
                compared += 1
                if _body(plain) != _body(injected):
                    problems.append(f"{target} as {role}: the injected lookups changed the answer")
    assert compared > 15
    assert problems == [], "\n".join(problems)


def test_admin_changelist_refuses_lookups_through_relations(full_world: FullWorld) -> None:
    client = _client(full_world.superuser)
    for url, lookup in [
        ("/admin/annotations/rating/", "rater__user__password__startswith"),
        ("/admin/annotations/dataset/", "owner__password__startswith"),
        ("/admin/judging/judgerun/", "launched_by__password__startswith"),
    ]:
        response = client.get(url, {lookup: "pbkdf2"})
        assert response.status_code in {400, 302}, (url, response.status_code)
        assert b"pbkdf2_sha256$" not in response.content


# --- the user-supplied output regex --------------------------------------------------------------------------------


def test_catastrophic_regex_fails_fast_as_a_parse_error() -> None:
    from judging.methods.parsing import parse_score

    for text in ["a" * 30, "a" * 30 + "!", "a" * 100_000 + "!"]:
        started = time.monotonic()
        result = parse_score(text, {"format": "regex", "regex": "(a|aa)+$"}, (1.0, 5.0))
        assert time.monotonic() - started < 0.5
        assert result.score is None and result.error_kind


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("(a*)\\1", "backreference"), ("(?=a)a", "lookahead"), ("a" * 600, "too long"), ("(", "syntax"), ("", "empty")],
)
def test_unsafe_or_broken_regexes_are_refused_when_saved(pattern: str, why: str) -> None:
    from judging.config import ConfigError, validate_config

    with pytest.raises(ConfigError):
        validate_config(
            {"name": "rx", "method": "metric", "metric": "length", "output": {"format": "regex", "regex": pattern}}
        )


def test_judge_run_with_a_catastrophic_regex_marks_parse_errors_quickly(
    full_world: FullWorld, django_capture_on_commit_callbacks: Any
) -> None:
    from judging import services
    from tests.security.recorder import RecordingServer

    server = RecordingServer("127.0.0.1").start()
    try:
        server.content = "a" * 30
        config = {
            "name": "regex-run",
            "method": "single",
            "model": "openai/gpt-4o-mini",
            "api_base": server.base_url,
            "output": {"format": "regex", "regex": "(a|aa)+$"},
            "aspects": [full_world.dataset.aspects.first().name],
            "max_retries": 0,
            "cache": False,
        }
        started = time.monotonic()
        with django_capture_on_commit_callbacks(execute=True):
            run = services.judge_run_launch(dataset=full_world.dataset, config=config, launched_by=None, limit=5)
        elapsed = time.monotonic() - started
    finally:
        server.stop()
    run.refresh_from_db()
    judgments = Judgment.objects.filter(run=run)
    assert judgments.count() == 5
    assert all(j.score is None and j.error_kind for j in judgments), [(j.score, j.error_kind) for j in judgments]
    assert run.parse_errors == 5
    assert elapsed < 20
