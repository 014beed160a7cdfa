"""The authorization matrix.

Roles: anonymous, annotator (pool A), annotator_b (pool B), outsider, researcher (owns A), researcher_b (owns B),
superuser. Every URL pattern is requested with tenant A's ids (GET, and POST with a valid CSRF token), and the status
must match the role: wrong role 403 (anonymous: the login page or 401/403), out of scope 404, the right role and
scope succeeds. Refused requests change nothing in the database. Users outside tenant A never receive A's data,
and annotators never receive system names, model names, other raters' ratings or judge names (tenant B marks all
of these with ZQSECRET)."""

import json
from collections.abc import Iterable
from typing import Any

import pytest
from django.test import Client

from annotations.text.opaque import opaque_ref
from tests.security.test_csrf import database_snapshot
from tests.security.test_xss_sweep import _body, admin_model
from tests.security.urlwalk import Endpoint, iter_endpoints
from tests.security.world import SECRET, FullWorld

pytestmark = pytest.mark.django_db

# An annotator invitation is open to whoever holds its link: the single-use token is the credential.
PUBLIC_ROUTES = {
    "accounts/login/", "api/token/", "i18n/setlang/", "admin/login/", "admin/logout/", "research/invite/<str:token>/",
    "favicon.ico",
}  # fmt: skip
ANY_USER_ROUTES = {"", "accounts/logout/", "help/", "help/<str:slug>/", "api/token/mine/"}
ANNOTATOR_PREFIXES = ("annotate/", "api/annotate/", "factscore/review/")
# Study links are open to anyone holding them: they refuse signed-in accounts and bad parameters with a page.
WORKER_ENTRY_ROUTES = {"join/<str:token>/", "join/<str:token>/mturk/"}
WORKER_ONLY_ROUTES = {"join/done/"}
WORKER_REFUSED_ROUTES = {"api/token/mine/"}
TENANT_A_MARKERS = (b"data-pwn", b"__pwned")  # every hostile payload of tenant A carries one


def family(route: str) -> str:
    if route in PUBLIC_ROUTES:
        return "public"
    if route in WORKER_ENTRY_ROUTES:
        return "entry"
    if route in WORKER_ONLY_ROUTES:
        return "worker"
    if route in ANY_USER_ROUTES:
        return "any"
    if route.startswith("admin/"):
        return "admin"
    if route.startswith(ANNOTATOR_PREFIXES):
        return "annotator"
    return "researcher"


def is_api(route: str) -> bool:
    return route.startswith(("api/", "factscore/api/"))


def login_redirect(response: Any, route: str) -> bool:
    location = response.get("Location", "")
    return response.status_code == 302 and ("/accounts/login/" in location or "/admin/login/" in location)


def anonymous_refused(response: Any, route: str) -> bool:
    if is_api(route):
        return response.status_code in {401, 403, 405}
    return login_redirect(response, route) or response.status_code == 405


def succeeded(response: Any, route: str) -> bool:
    # Past the access checks a request may still be invalid (400, e.g. a missing ?judge=) or the wrong method.
    ok = 200 <= response.status_code < 400 and not login_redirect(response, route)
    return ok or response.status_code in {400, 405}


def lists_only_own(endpoint: Endpoint) -> bool:
    return not endpoint.parameters


def expectation(endpoint: Endpoint, role: str) -> str:
    """ "ok", "403", "404", "login", "no-data" (a list page: allowed, but nothing of tenant A) or "any"."""
    route = endpoint.route
    kind = family(route)
    if kind == "public":
        return "any"
    if kind == "entry":
        return "entry"
    if role == "anonymous":
        return "login"
    if kind == "worker":
        return "ok" if role == "worker" else "refused"
    if role == "worker":
        return worker_expectation(endpoint, kind)
    if kind == "any":
        return "ok"
    if kind == "admin":
        if role in {"annotator", "annotator_b", "outsider"}:
            return "login"  # Django's admin sends signed-in non-staff users to its login form
        if role == "researcher_b":
            return "no-data"
        return "any"  # some admin pages are off for everyone (add a run by form, dummy ids); none may 500
    if kind == "researcher":
        if role in {"annotator", "annotator_b", "outsider"}:
            return "403"
        if role == "researcher_b":
            return "no-data" if lists_only_own(endpoint) else "404"
        return "ok"
    # annotator pages
    if not endpoint.parameters:
        return "ok" if role == "annotator" else "no-data"
    if role == "annotator":
        return "ok"
    # Outside the pool: refused. The annotation and review views answer 403 ("not an annotator of this
    # campaign") rather than 404 for an existing campaign; see the report to the lead.
    return "refused"


def worker_expectation(endpoint: Endpoint, kind: str) -> str:
    """A study participant is an annotator of campaign A only, and nothing more: no API tokens, no researcher page."""
    if endpoint.route in WORKER_REFUSED_ROUTES:
        return "403"
    if kind == "any":
        return "ok"
    if kind == "admin":
        return "login"
    if kind == "researcher":
        return "403"
    # In campaign A's pool without a lease of their own: their own pages work, other people's tasks are refused.
    return "pool" if endpoint.parameters else "ok"


def check(response: Any, endpoint: Endpoint, role: str, expected: str, body: bytes) -> str | None:
    route = endpoint.route
    status = response.status_code
    if status >= 500:
        return f"{status}"
    if expected == "login" and not anonymous_refused(response, route):
        return f"{status}, expected the login page / 401 / 403"
    if expected == "403" and status not in {403, 405}:
        return f"{status}, expected 403 (wrong role)"
    if expected == "404" and status not in {404, 405}:
        return f"{status}, expected 404 (outside scope)"
    if expected == "refused" and status not in {403, 404, 405}:
        return f"{status}, expected 403/404"
    if expected == "entry" and status not in {200, 400, 403, 404, 405, 410, 429}:
        return f"{status}, expected a study page or its refusal"
    if expected == "pool" and not (succeeded(response, route) or status in {403, 404}):
        return f"{status}, expected success or 403/404"
    if expected == "ok" and not succeeded(response, route):
        return f"{status}, expected success"
    if expected in {"no-data", "entry"} and 200 <= status < 300 and any(marker in body for marker in TENANT_A_MARKERS):
        return f"{status} with tenant A data in it"
    return None


def _clients(world: FullWorld) -> dict[str, Client]:
    clients = {}
    for role, user in {**world.roles, "worker": world.worker}.items():
        client = Client()
        if user is not None:
            client.force_login(user)
        clients[role] = client
    return clients


def _target(world: FullWorld, endpoint: Endpoint, params: dict[str, str]) -> str:
    model = admin_model(endpoint)
    if model is not None and "object_id" in endpoint.parameters:
        object_id = world.admin_object_id(model)
        if object_id:
            params = {**params, "object_id": object_id}
    return endpoint.path_with(params) or endpoint.path


def get_matrix(world: FullWorld, endpoints: Iterable[Endpoint]) -> list[str]:
    problems = []
    clients = _clients(world)
    for endpoint in endpoints:
        target = _target(world, endpoint, world.params_for(endpoint.route))
        for role, client in clients.items():
            expected = expectation(endpoint, role)
            response = client.get(target, world.query_for(endpoint.route))
            body = _body(response)
            problem = check(response, endpoint, role, expected, body)
            if problem:
                problems.append(f"GET {target} ({endpoint.route}) as {role}: {problem}")
    return problems


def test_get_matrix(full_world: FullWorld) -> None:
    endpoints = list(iter_endpoints())
    assert len(endpoints) > 100
    problems = get_matrix(full_world, endpoints)
    assert problems == [], "\n".join(problems[:60])


def post_matrix(
    world: FullWorld, endpoints: Iterable[Endpoint], clients: dict[str, Client]
) -> tuple[list[str], list[tuple[Endpoint, str]]]:
    problems = []
    refused: list[tuple[Endpoint, str]] = []
    for endpoint in endpoints:
        target = _target(world, endpoint, world.params_for(endpoint.route))
        for role, client in clients.items():
            expected = expectation(endpoint, role)
            if expected in {"ok", "any", "no-data", "pool"}:
                continue  # allowed roles may change things; the refused ones are checked below
            response = client.post(target, {"name": "x", "rationale": "x", "idempotency_key": "matrix-post-1"})
            problem = check(response, endpoint, role, expected, _body(response))
            if problem:
                problems.append(f"POST {target} ({endpoint.route}) as {role}: {problem}")
            refused.append((endpoint, role))
    return problems, refused


def test_post_matrix_refuses_and_changes_nothing(full_world: FullWorld) -> None:
    endpoints = list(iter_endpoints())
    clients = _clients(full_world)  # before the snapshot: logging in records last_login
    before = database_snapshot()
    problems, refused = post_matrix(full_world, endpoints, clients)
    after = database_snapshot()
    assert len(refused) > 200
    assert problems == [], "\n".join(problems[:60])
    changed = sorted(table for table in before if before[table] != after.get(table))
    assert changed == [], f"refused POSTs changed {changed}"


def test_annotators_never_see_system_names_raters_or_judges(full_world: FullWorld) -> None:
    """annotator_b works in campaign B, whose names all carry ZQSECRET; no URL may show them the marker."""
    leaks = []
    for role in ("annotator_b", "annotator", "outsider", "anonymous"):
        user = full_world.roles[role]
        client = Client()
        if user is not None:
            client.force_login(user)
        for endpoint in iter_endpoints():
            for params in (full_world.params_for_b(endpoint.route), full_world.params_for(endpoint.route)):
                target = _target(full_world, endpoint, params)
                # (No query names the secret: pages echo their own URL, e.g. in the language form.)
                for query in ({}, {"include_judges": "true", "flat": "csv"}):
                    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
                        body = _body(client.get(target, query, **headers))
                        if SECRET.encode() in body:
                            leaks.append(f"GET {target} {query} as {role}")
    # annotator_b's own task page renders, so the check above looked at real content.
    own = Client()
    own.force_login(full_world.annotator_b)
    page = own.get(f"/annotate/{full_world.campaign_b.pk}/tasks/{opaque_ref('task', full_world.task_b.pk)}/")
    assert page.status_code == 200
    api = own.get(
        f"/api/annotate/campaigns/{full_world.campaign_b.pk}/tasks/{opaque_ref('task', full_world.task_b.pk)}/"
    )
    assert api.status_code == 200 and SECRET not in json.dumps(api.json())
    assert leaks == [], "\n".join(leaks[:40])


def test_researcher_sees_own_secrets_but_not_across_tenants(full_world: FullWorld) -> None:
    """The marker check is live: researcher_b does see B's names; researcher A never does."""
    owner = Client()
    owner.force_login(full_world.researcher_b)
    export = owner.get(f"/api/datasets/{full_world.dataset_b.pk}/export/", {"include_judges": "true"})
    assert SECRET.encode() in _body(export)
    other = Client()
    other.force_login(full_world.researcher)
    for url in [
        f"/api/datasets/{full_world.dataset_b.pk}/export/",
        f"/dashboard/{full_world.dataset_b.pk}/",
        f"/api/judging/runs/{full_world.run_b.pk}/",
        f"/campaigns/{full_world.campaign_b.pk}/progress/",
        f"/admin/annotations/dataset/{full_world.dataset_b.pk}/change/",
        "/api/datasets/",
        "/api/judging/runs/",
        "/dashboard/",
        "/admin/annotations/system/",
        "/admin/annotations/rater/",
        "/admin/annotations/rating/",
        "/admin/judging/judgerun/",
    ]:
        response = other.get(url)
        assert SECRET.encode() not in _body(response), url
        assert response.status_code in {200, 302, 403, 404}, url


def test_admin_add_forms_offer_only_own_tenant_objects(full_world: FullWorld) -> None:
    """A foreign-key dropdown listing every dataset would leak tenant B's names and let A attach to them."""
    client = Client()
    client.force_login(full_world.researcher)
    leaks = []
    for endpoint in iter_endpoints():
        if endpoint.name and endpoint.name.startswith("admin:") and endpoint.name.endswith(("_add", "_change")):
            target = _target(full_world, endpoint, full_world.params_for(endpoint.route))
            response = client.get(target)
            if response.status_code == 200 and (b"tenant-b" in response.content or SECRET.encode() in response.content):
                leaks.append(target)
    assert leaks == []


def test_foreign_ids_in_post_bodies_are_rejected(full_world: FullWorld) -> None:
    from annotations.models import Campaign, Rating
    from judging.models import JudgeRun

    client = Client()
    client.force_login(full_world.researcher)
    runs_before = JudgeRun.objects.count()
    config = {"name": "foreign", "method": "metric", "metric": "length"}
    for body in [
        {"dataset": full_world.dataset_b.pk, "config": config},
        {"dataset": full_world.dataset.pk, "campaign": full_world.campaign_b.pk, "config": config},
    ]:
        for url in ("/api/judging/runs/launch/", "/api/judging/runs/estimate/"):
            response = client.post(url, body, content_type="application/json")
            assert response.status_code == 404, (url, body, response.content[:200])
    assert JudgeRun.objects.count() == runs_before
    # Admin forms: attaching a campaign or a run to tenant B's dataset is refused.
    campaigns_before = Campaign.objects.count()
    response = client.post(
        "/admin/annotations/campaign/add/",
        {"name": "foreign-campaign", "dataset": full_world.dataset_b.pk, "raters_per_item": 2, "lease_minutes": 30},
    )
    assert response.status_code in {200, 400, 403}
    assert Campaign.objects.count() == campaigns_before
    # Annotator API: ratings for candidates that are not in the task are refused.
    ratings_before = Rating.objects.count()
    annotator = Client()
    annotator.force_login(full_world.annotator)
    response = annotator.post(
        f"/api/annotate/campaigns/{full_world.campaign.pk}/tasks/{opaque_ref('task', full_world.task.pk)}/submit/",
        {"idempotency_key": "foreign-ids-1", "ratings": {"999": {"1": 3}}, "rationale": "x", "preference": 1},
        content_type="application/json",
    )
    assert response.status_code in {400, 422}
    # ... and an annotator cannot submit into another pool's task, by URL or by body.
    response = annotator.post(
        f"/api/annotate/campaigns/{full_world.campaign_b.pk}/tasks/{opaque_ref('task', full_world.task_b.pk)}/submit/",
        {"idempotency_key": "foreign-ids-2", "ratings": {"1": {"1": 3}}, "rationale": "x", "preference": 1},
        content_type="application/json",
    )
    assert response.status_code in {403, 404}
    response = annotator.post(
        f"/api/annotate/campaigns/{full_world.campaign.pk}/tasks/{opaque_ref('task', full_world.task_b.pk)}/submit/",
        {"idempotency_key": "foreign-ids-3", "ratings": {"1": {"1": 3}}, "rationale": "x", "preference": 1},
        content_type="application/json",
    )
    assert response.status_code in {400, 404, 409}
    assert Rating.objects.count() == ratings_before


def test_admin_pages_with_every_permission_show_no_other_tenant(full_world: FullWorld) -> None:
    """Changelists, their filter sidebars, and the foreign-key dropdowns of add and change forms must list only
    the researcher's own datasets and their rows, even with every model permission granted."""
    client = Client()
    client.force_login(full_world.researcher)
    leaks = []
    pages = 0
    for endpoint in iter_endpoints():
        if not endpoint.name or not endpoint.name.startswith("admin:"):
            continue
        if not endpoint.name.endswith(("_changelist", "_add", "_change")):
            continue
        target = _target(full_world, endpoint, full_world.params_for(endpoint.route))
        response = client.get(target)
        if response.status_code != 200:
            continue
        pages += 1
        if b"tenant-b" in response.content or SECRET.encode() in response.content:
            leaks.append(target)
    assert pages > 20
    assert leaks == [], "\n".join(leaks)


def test_the_icon_address_is_public_and_read_only(client) -> None:  # type: ignore[no-untyped-def]
    answer = client.get("/favicon.ico")
    assert answer.status_code == 302 and answer["Location"].endswith("favicon.svg")
    assert client.post("/favicon.ico").status_code == 405
