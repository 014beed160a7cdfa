"""No active content from data, on every page and htmx partial, for every role.

The full world (tests/security/world.py) imports the hostile dataset (the corpus in every imported field), runs a
judge whose provider answers with the corpus as reasoning, opens a campaign whose guidelines are markdown payloads,
and a FActScore run with a review campaign. Every URL pattern is then fetched as every role, as a page and as an
htmx partial, and every HTML answer is parsed: no payload may have become an element, attribute or URL."""

import html
from typing import Any

import pytest
from django.apps import apps
from django.test import Client

from annotations.text.opaque import opaque_ref
from tests.security.hostile import MARKUP_PAYLOADS, NAME_CORPUS
from tests.security.html_checks import assert_no_active_payload, find_active_payloads
from tests.security.urlwalk import Endpoint, iter_endpoints
from tests.security.world import FullWorld

pytestmark = pytest.mark.django_db


def admin_model(endpoint: Endpoint) -> Any:
    if not endpoint.name or not endpoint.name.startswith("admin:"):
        return None
    label = endpoint.name.removeprefix("admin:")
    for model in apps.get_models():
        if label.startswith(f"{model._meta.app_label}_{model._meta.model_name}_"):
            return model
    return None


def target_for(world: FullWorld, endpoint: Endpoint) -> str:
    params = world.params_for(endpoint.route)
    model = admin_model(endpoint)
    if model is not None and "object_id" in endpoint.parameters:
        object_id = world.admin_object_id(model)
        if object_id:
            params["object_id"] = object_id
    return endpoint.path_with(params) or endpoint.path


def _body(response: Any) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def query_variants(world: FullWorld, endpoint: Endpoint) -> list[dict[str, str]]:
    """Plain, plus filters that echo hostile names back into the page (aspect, system, judge)."""
    base = world.query_for(endpoint.route)
    variants = [base]
    if endpoint.route.startswith("dashboard/"):
        variants.append({**base, "aspect": NAME_CORPUS[0], "system": NAME_CORPUS[1]})
        variants.append({**base, "aspect": MARKUP_PAYLOADS[2], "judge": MARKUP_PAYLOADS[0]})
    if endpoint.name and endpoint.name.endswith("_changelist"):
        variants.append({"q": MARKUP_PAYLOADS[0]})
    return variants


def sweep(world: FullWorld) -> tuple[list[str], dict[str, int]]:
    problems: list[str] = []
    stats = {"html": 0, "html_ok": 0, "escaped_payload_seen": 0, "json": 0}
    clients = {}
    for role, user in world.roles.items():
        client = Client()
        if user is not None:
            client.force_login(user)
        clients[role] = client
    escaped_marker = html.escape(MARKUP_PAYLOADS[0]).encode()
    for endpoint in iter_endpoints():
        target = target_for(world, endpoint)
        for role, client in clients.items():
            for query in query_variants(world, endpoint):
                for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
                    if headers and target.startswith("/admin/"):
                        continue
                    response = client.get(target, query, **headers)
                    content_type = response.get("Content-Type", "")
                    body = _body(response)
                    where = f"GET {target} {query or ''} as {role}{' (htmx)' if headers else ''}"
                    if response.status_code >= 500:
                        problems.append(f"{where}: {response.status_code}")
                        continue
                    if content_type.startswith("text/html"):
                        stats["html"] += 1
                        stats["html_ok"] += response.status_code == 200
                        stats["escaped_payload_seen"] += escaped_marker in body
                        findings = find_active_payloads(body)
                        problems.extend(f"{where}: {finding}" for finding in findings)
                    elif content_type.startswith("application/json"):
                        stats["json"] += 1
                    if response.get("X-Content-Type-Options") != "nosniff":
                        problems.append(f"{where}: no nosniff")
    return problems, stats


def test_no_page_or_partial_renders_a_payload_active(full_world: FullWorld) -> None:
    problems, stats = sweep(full_world)
    assert problems == [], "\n".join(problems[:40])
    # The sweep must have rendered real pages full of hostile data, or it proves nothing.
    assert stats["html_ok"] > 150, stats
    assert stats["escaped_payload_seen"] > 40, stats
    assert stats["json"] > 20, stats


def test_annotator_task_page_and_error_partial_show_payloads_inert(full_world: FullWorld) -> None:
    client = Client()
    client.force_login(full_world.annotator)
    page = client.get(f"/annotate/{full_world.campaign.pk}/tasks/{opaque_ref('task', full_world.task.pk)}/")
    assert page.status_code == 200
    body = page.content
    assert html.escape(MARKUP_PAYLOADS[0]).encode() in body, "the prompt payload should be shown, escaped"
    assert_no_active_payload(body, where="annotator task page")
    # An incomplete submission re-renders the form (htmx partial) with the annotator's own hostile text in it.
    invalid = client.post(
        f"/annotate/{full_world.campaign.pk}/tasks/{opaque_ref('task', full_world.task.pk)}/submit/",
        {"rationale": MARKUP_PAYLOADS[1], "comment": MARKUP_PAYLOADS[4], "r-1-0": MARKUP_PAYLOADS[2]},
        HTTP_HX_REQUEST="true",
    )
    assert invalid.status_code in {200, 400, 422}
    assert_no_active_payload(invalid.content, where="annotator submit error partial")


def test_judge_run_pages_show_provider_output_inert(full_world: FullWorld) -> None:
    from judging.models import Judgment

    client = Client()
    client.force_login(full_world.superuser)
    judgment = Judgment.objects.filter(run=full_world.run).order_by("pk").first()
    assert judgment is not None and "<script" in judgment.raw_output
    pages = [
        f"/admin/judging/judgerun/{full_world.run.pk}/change/",
        f"/admin/judging/judgerun/{full_world.run.pk}/progress/",
        f"/dashboard/{full_world.dataset.pk}/judges/?judge={full_world.run.name}",
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        assert_no_active_payload(response.content, where=url)
    response = client.get(f"/admin/judging/judgerun/{full_world.run.pk}/progress/", HTTP_HX_REQUEST="true")
    assert_no_active_payload(response.content, where="run progress partial")


def test_sweep_would_catch_a_template_that_marks_data_safe(full_world: FullWorld) -> None:
    """The same check over a page that renders a hostile prompt with |safe finds it."""
    from django.template import Context, Template

    from annotations.models import Turn

    prompt = Turn.objects.filter(item__dataset=full_world.dataset, prompt__contains="<script").first().prompt
    page = Template("<html><body>{{ prompt|safe }}</body></html>").render(Context({"prompt": prompt}))
    assert find_active_payloads(page), prompt
