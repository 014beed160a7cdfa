"""Every state-changing request without a CSRF token is refused, on every URL pattern of the
project and for every role (htmx requests included), and GET requests change nothing in the database."""

from collections.abc import Iterable

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.db import connection
from django.http import HttpResponse
from django.test import Client, override_settings

from tests.security.urlwalk import Endpoint, iter_endpoints
from tests.security.world import World, build_world

UNSAFE_METHODS = ["post", "put", "patch", "delete"]

# Endpoints that accept unsafe requests without a CSRF token, each with the reason it is safe.
CSRF_EXEMPT_ON_PURPOSE = {
    # Authenticates only with the credentials in the body, reads no cookie, sets none, and its answer is not
    # readable cross-origin (no CORS): a forged request gains the attacker nothing.
    "api-token",
}
# Tables whose rows a GET may legitimately touch: the session store (a read can refresh a session).
GET_MAY_WRITE = {"django_session"}


pytestmark = pytest.mark.usefixtures("fresh_cache")


@pytest.fixture
def world(researcher: User, annotator1: User, annotator2: User, outsider: User) -> World:
    return build_world(researcher=researcher, annotator=annotator1, annotator_b=annotator2, outsider=outsider)


def _client(user: User | None) -> Client:
    client = Client(enforce_csrf_checks=True)
    if user is not None:
        client.force_login(user)
    return client


def _refused_for_csrf(response: HttpResponse, *, anonymous: bool) -> bool:
    if response.status_code != 403:
        return False
    if anonymous:
        return True  # no session to ride on; a 403 from the permission check is as good
    body = response.content.decode("utf-8", errors="replace")
    # The site's own page for a failed CSRF check, or DRF's JSON answer ("CSRF Failed: ...") on the API.
    return 'data-error="csrf"' in body or "CSRF Failed" in body


def csrf_offenders(endpoints: Iterable[Endpoint], roles: dict[str, User | None]) -> list[str]:
    offenders = []
    clients = {role: _client(user) for role, user in roles.items()}
    for endpoint in endpoints:
        if endpoint.name in CSRF_EXEMPT_ON_PURPOSE:
            continue
        for role, client in clients.items():
            for method in UNSAFE_METHODS:
                for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
                    send = getattr(client, method)
                    if method == "post":
                        response = send(endpoint.path, {"name": "x", "value": "1"}, **headers)
                    else:
                        response = send(endpoint.path, "name=x", content_type="application/x-www-form-urlencoded")
                    if not _refused_for_csrf(response, anonymous=roles[role] is None):
                        kind = "htmx " if headers else ""
                        offenders.append(
                            f"{kind}{method.upper()} {endpoint.path} ({endpoint.route}) as {role}: "
                            f"{response.status_code}"
                        )
    return offenders


@pytest.mark.django_db
def test_every_url_refuses_unsafe_methods_without_a_csrf_token(world: World) -> None:
    endpoints = list(iter_endpoints(world.params_a))
    assert len(endpoints) >= 20, "the URL walk found too few patterns; is the resolver walk broken?"
    assert {"login", "logout", "set_language", "api-dataset-import"} <= {e.name for e in endpoints}
    assert csrf_offenders(endpoints, world.roles) == []


@pytest.mark.django_db
def test_the_same_requests_with_a_token_are_not_refused_for_csrf(world: World) -> None:
    """Shows the sweep above measures CSRF and not something else: with a token, no CSRF failure."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.researcher)
    client.get("/accounts/login/")  # sets the csrftoken cookie
    home = client.get("/")
    token = home.cookies.get("csrftoken") or client.cookies["csrftoken"]
    endpoint_paths = [e.path for e in iter_endpoints(world.params_a) if e.name in {"logout", "set_language"}]
    for endpoint_path in endpoint_paths:
        response = client.post(endpoint_path, {"language": "en"}, HTTP_X_CSRFTOKEN=token.value)
        assert response.status_code != 403, endpoint_path
        client.force_login(world.researcher)


@pytest.mark.django_db
@override_settings(ROOT_URLCONF="tests.security.broken_urls")
def test_sweep_catches_a_csrf_exempt_view(researcher: User) -> None:
    offenders = csrf_offenders(list(iter_endpoints()), {"researcher": researcher, "anonymous": None})
    assert any("/exempt/" in line for line in offenders)
    assert not any("/plain/" in line for line in offenders)


# --- GET changes nothing -------------------------------------------------------------------------------------------


def database_snapshot() -> dict[str, str]:
    """Row count and, on Postgres, a content digest of every table of every installed model."""
    snapshot = {}
    tables = sorted({model._meta.db_table for model in apps.get_models(include_auto_created=True)} - GET_MAY_WRITE)
    with connection.cursor() as cursor:
        existing = set(connection.introspection.table_names(cursor))
        tables = [table for table in tables if table in existing]
        for table in tables:
            quoted = connection.ops.quote_name(table)
            if connection.vendor == "postgresql":
                cursor.execute(
                    f"SELECT count(*), coalesce(md5(string_agg(md5(t::text), '' ORDER BY md5(t::text))), '') "  # noqa: S608
                    f"FROM {quoted} t"
                )
                count, digest = cursor.fetchone()
                snapshot[table] = f"{count}:{digest}"
            else:
                cursor.execute(f"SELECT count(*) FROM {quoted}")  # noqa: S608
                snapshot[table] = str(cursor.fetchone()[0])
    return snapshot


def _admin_object_params(endpoint: Endpoint) -> dict[str, str]:
    """For admin object URLs, the id of a real row of that model, so the change and delete pages render."""
    if not endpoint.name or not endpoint.name.startswith("admin:") or "object_id" not in endpoint.parameters:
        return {}
    label = endpoint.name.removeprefix("admin:")
    for model in apps.get_models():
        prefix = f"{model._meta.app_label}_{model._meta.model_name}_"
        if label.startswith(prefix):
            first = model._default_manager.order_by("pk").first()
            return {"object_id": str(first.pk)} if first else {}
    return {}


def _get_everything(clients: Iterable[Client], target: str, query: dict[str, str] | None = None) -> None:
    # HEAD runs the GET view in Django, so GET covers it; the admin has no htmx partials.
    for client in clients:
        client.get(target, query)
        if not target.startswith("/admin/"):
            client.get(target, query, HTTP_HX_REQUEST="true")


def get_writers(endpoints: Iterable[Endpoint], roles: dict[str, User | None], params: dict[str, str]) -> list[str]:
    clients = [_client(user) for user in roles.values()]
    targets = [
        (endpoint, endpoint.path_with({**params, **_admin_object_params(endpoint)}) or endpoint.path)
        for endpoint in endpoints
    ]
    before = database_snapshot()
    for _, target in targets:
        _get_everything(clients, target)
    if database_snapshot() == before:
        return []
    # Something wrote: go again one URL at a time to name it (a write that happens only once is named by the
    # first pass's table list).
    writers = []
    for endpoint, target in targets:
        start = database_snapshot()
        _get_everything(clients, target)
        end = database_snapshot()
        changed = sorted(table for table in start if start[table] != end.get(table))
        if changed:
            writers.append(f"GET {target} ({endpoint.route}) changed {', '.join(changed)}")
    final = database_snapshot()
    if not writers:
        changed = sorted(table for table in before if before[table] != final.get(table))
        writers.append(f"the first pass of GETs changed {', '.join(changed)}")
    return writers


@pytest.mark.django_db
def test_get_changes_nothing_on_any_url_for_any_role(world: World) -> None:
    endpoints = list(iter_endpoints(world.params_a))
    assert get_writers(endpoints, world.roles, world.params_a) == []


@pytest.mark.django_db
@override_settings(ROOT_URLCONF="tests.security.broken_urls")
def test_get_sweep_catches_a_view_that_writes(researcher: User) -> None:
    writers = get_writers(list(iter_endpoints()), {"researcher": researcher}, {})
    assert len(writers) == 2 and all("auth_user" in line for line in writers)


@pytest.mark.django_db
def test_get_changes_nothing_in_the_full_world(  # type: ignore[no-untyped-def]
    full_world, django_capture_on_commit_callbacks, _fact_provider_server, monkeypatch
) -> None:
    """Every feature present (judge runs, FActScore review, both campaigns), plus what a read could be tempted to fix:
    runs whose task was lost and FActScore runs whose judgments were never projected. GET as every role, on every
    URL and on the pages of those runs, writes nothing and enqueues no task."""
    from tests.judging.stalled import recording_enqueued_tasks
    from tests.security.test_authorization import _target
    from tests.security.world import age_full_world

    old = age_full_world(full_world, capture=django_capture_on_commit_callbacks, fact_provider=_fact_provider_server)
    targets = [
        (
            endpoint.route,
            _target(full_world, endpoint, full_world.params_for(endpoint.route)),
            full_world.query_for(endpoint.route),
        )
        for endpoint in iter_endpoints()
    ]
    targets += [("(old work)", path, query) for path, query in old.targets]
    clients = [_client(user) for user in full_world.roles.values()]
    writers = []
    with (
        recording_enqueued_tasks(monkeypatch) as enqueued,
        django_capture_on_commit_callbacks(execute=False) as on_commit,
    ):
        for route, target, query in targets:
            before = database_snapshot()
            sent_before = len(enqueued.calls) + len(on_commit)
            _get_everything(clients, target, query)
            after = database_snapshot()
            changed = sorted(table for table in before if before[table] != after.get(table))
            if changed:
                writers.append(f"GET {target} {query} ({route}) changed {', '.join(changed)}")
            if len(enqueued.calls) + len(on_commit) != sent_before:
                writers.append(f"GET {target} {query} ({route}) enqueued {enqueued.calls[-1:] or 'a task on commit'}")
    assert writers == [], "\n".join(writers)
    report = Client()
    report.force_login(full_world.researcher)
    page = report.get(old.targets[3][0])
    assert page.status_code == 200 and b"data-results-pending" in page.content
