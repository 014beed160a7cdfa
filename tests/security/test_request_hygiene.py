"""NUL bytes, unpaired surrogates and deep JSON end in a 400 naming the field, wherever they arrive: the path, the
query, urlencoded and multipart form fields (names and values), JSON bodies at any depth and JSON sent as a form
field. Anonymous bodies are capped before anything parses them; uploaded files are left to the importer.

The fuzz sweep sends each bad value to every URL pattern as every role, GET and POST; the targeted tests replay the
findings of a live probe, each of which used to be a 500."""

import io
import json
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotations.text.opaque import opaque_ref
from evalsite.middleware import field_problem, json_problem, printable
from tests.conftest import CAST_PASSWORD
from tests.security.test_authorization import _target
from tests.security.urlwalk import iter_endpoints
from tests.security.world import FullWorld

DEEP = "[" * 5000 + "]" * 5000
JUDGE_CONFIG = {"name": "hygiene", "method": "metric", "metric": "length"}


def _client(user: User | None) -> Client:
    client = Client(raise_request_exception=False)
    if user is not None:
        client.force_login(user)
    return client


def _named(response: Any, field: str) -> bool:
    """The refusal names the field: in the JSON `field` of an API answer, or in the plain-text message of a page."""
    if response["Content-Type"].startswith("application/json"):
        return response.json().get("field") == field and field in response.json()["detail"]
    return f"field: {field})" in response.content.decode()


# --- the sweep -----------------------------------------------------------------------------------------------------


def _send(client: Client, method: str, target: str, payload: str) -> Any:
    if payload == "NUL in the query":
        query = urlencode({"judge": "\x00", "q": "ok", "x\x00": "1"})
        return client.generic(method, f"{target}?{query}")
    if payload == "NUL in form fields":
        if method == "GET":
            return client.get(target, {"rationale": "a\x00b", "note": "\x00"})
        fields = {"name": "x\x00", "rationale": "a\x00b", "note": "\x00", "text": "\x00", "username": "a\x00"}
        return client.post(target, fields)  # multipart
    if payload == "NUL in urlencoded form fields":
        body = urlencode({"name": "ok", "rationale": "a\x00b", "username": "a\x00", "password": "x"})
        if method == "GET":  # a GET's form is its query; Django never parses a GET's body
            return client.get(f"{target}?{body}")
        return client.generic(method, target, body, content_type="application/x-www-form-urlencoded")
    if payload == "surrogate in JSON":
        body = '{"name": "\\ud800", "prompt": "x", "config": {"name": "ok", "prompt": "\\udfff"}}'
        return client.generic(method, target, body, content_type="application/json")
    if payload == "deep JSON in a multipart field":
        if method == "GET":
            return client.get(target, {"config": DEEP})
        return client.post(target, {"name": "x", "config": DEEP})
    raise AssertionError(payload)


PAYLOADS = [
    "NUL in the query",
    "NUL in form fields",
    "NUL in urlencoded form fields",
    "surrogate in JSON",
    "deep JSON in a multipart field",
]
SWEEP_ROLES = ("anonymous", "researcher", "annotator", "outsider")


@pytest.mark.django_db
@pytest.mark.parametrize("payload", PAYLOADS)
def test_bad_input_is_a_400_on_every_url_for_every_role(full_world: FullWorld, payload: str) -> None:
    clients = {role: _client(full_world.roles[role]) for role in SWEEP_ROLES}
    endpoints = list(iter_endpoints())
    assert len(endpoints) > 100
    problems = []
    for endpoint in endpoints:
        target = _target(full_world, endpoint, full_world.params_for(endpoint.route))
        for role, client in clients.items():
            for method in ("GET", "POST"):
                response = _send(client, method, target, payload)
                if response.status_code != 400:
                    problems.append(f"{method} {target} ({endpoint.route}) as {role}: {response.status_code}")
    # Every request carries a bad value, so the one early check must have refused each of them, 5xx or not.
    assert problems == [], "\n".join(problems[:60])


# --- the findings, one by one --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_annotator_submit_and_skip_refuse_nul_naming_the_field(full_world: FullWorld) -> None:
    client = _client(full_world.annotator)
    base = f"/annotate/{full_world.campaign.pk}/tasks/{opaque_ref('task', full_world.task.pk)}"
    submit = client.post(f"{base}/submit/", {"rationale": "because\x00", "idempotency_key": "hygiene-1"})
    assert submit.status_code == 400 and _named(submit, "rationale")
    skip = client.post(f"{base}/skip/", {"reason": "other", "note": "n\x00"})
    assert skip.status_code == 400 and _named(skip, "note")
    # Named even when the bad character is in the field's name.
    odd = client.post(f"{base}/skip/", {"reason": "other", "no\x00te": "n"})
    assert odd.status_code == 400 and _named(odd, "no\\u0000te")
    # The same form without the NUL still goes through to the view.
    assert client.post(f"{base}/skip/", {"reason": "other", "note": "fine"}).status_code in {200, 302, 303}


@pytest.mark.django_db
def test_fact_review_edit_refuses_nul_naming_the_field(full_world: FullWorld) -> None:
    client = _client(full_world.annotator)
    url = f"/factscore/review/{full_world.review_campaign.pk}/tasks/{full_world.review_task.pk}/edit/"
    response = client.post(url, {"operation": "add", "text": "a fact\x00"})
    assert response.status_code == 400 and _named(response, "text")
    urlencoded = client.post(
        url, urlencode({"operation": "add", "text": "x\x00"}), content_type="application/x-www-form-urlencoded"
    )
    assert urlencoded.status_code == 400 and _named(urlencoded, "text")


@pytest.mark.django_db
def test_dashboard_judge_page_and_csv_refuse_nul_in_the_query(full_world: FullWorld) -> None:
    client = _client(full_world.researcher)
    pk = full_world.dataset.pk
    for url in (f"/dashboard/{pk}/judges/", f"/dashboard/{pk}/judges/tables/levels.csv"):
        response = client.get(url + "?judge=%00")
        assert response.status_code == 400, (url, response.status_code)
        assert _named(response, "judge")
    assert client.get(f"/dashboard/{pk}/judges/", {"judge": full_world.run.name}).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["name", "prompt"])
@pytest.mark.parametrize("bad", ["\\u0000", "\\ud800", "\\udc00 tail"])
def test_judge_config_api_refuses_nul_and_lone_surrogates(full_world: FullWorld, field: str, bad: str) -> None:
    client = _client(full_world.researcher)
    config = {**JUDGE_CONFIG, "method": "single", "model": "openai/gpt-4o-mini", "prompt": "Rate {response}"}
    body = json.dumps({"config": config}).replace(json.dumps(config[field]), f'"x{bad}"', 1)
    response = client.post("/api/judging/configs/new/", body, content_type="application/json")
    assert response.status_code == 400, response.content[:200]
    assert response.json()["field"] == f"config.{field}"
    assert "not allowed" in response.json()["detail"]


@pytest.mark.django_db
def test_judge_config_api_refuses_deep_json_in_a_multipart_field(full_world: FullWorld) -> None:
    client = _client(full_world.researcher)
    response = client.post("/api/judging/configs/new/", {"config": DEEP})
    assert response.status_code == 400
    assert response.json()["field"] == "config" and "nested" in response.json()["detail"]
    # A form field with JSON inside it is checked inside too, as a JSON body is.
    escaped = client.post("/api/judging/configs/new/", {"config": '{"name": "a\\u0000"}'})
    assert escaped.status_code == 400 and escaped.json()["field"] == "config.name"
    # A sound config sent the same way is still created.
    created = client.post("/api/judging/configs/new/", {"config": json.dumps(JUDGE_CONFIG)})
    assert created.status_code == 201, created.content[:300]


@pytest.mark.django_db
def test_launch_refuses_deep_json_in_a_urlencoded_field(full_world: FullWorld) -> None:
    client = _client(full_world.researcher)
    body = urlencode({"dataset": full_world.dataset.pk, "config": DEEP})
    response = client.post("/api/judging/runs/estimate/", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400 and response.json()["field"] == "config"


# --- the rest of the rules -----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_nul_in_the_path_and_json_keys_are_named(researcher: User) -> None:
    client = _client(researcher)
    response = client.get("/dashboard/%00/")
    assert response.status_code == 400 and _named(response, "path")
    refused = {_client(None).get(endpoint.path + "%00").status_code for endpoint in iter_endpoints()}
    assert refused == {400}
    keyed = client.post(
        "/api/judging/configs/new/",
        '{"config": {"aspects": [{"ok": 1}, {"a\\u0000b": 1}]}}',
        content_type="application/json",
    )
    assert keyed.status_code == 400 and keyed.json()["field"] == "config.aspects[1].a\\u0000b"
    deep = client.post("/api/judging/configs/new/", '{"config": ' + DEEP + "}", content_type="application/json")
    assert deep.status_code == 400 and deep.json()["field"] == "body" and "nested" in deep.json()["detail"]


@pytest.mark.django_db
def test_factscore_api_refusals_are_json(full_world: FullWorld) -> None:
    client = _client(full_world.researcher)
    response = client.get(f"/factscore/api/runs/{full_world.fact_run.pk}/report/", {"answers": "\x00"})
    assert response.status_code == 400 and response.json()["field"] == "answers"


@pytest.mark.django_db
def test_uploaded_files_are_left_to_the_importer(researcher: User) -> None:
    client = _client(researcher)
    line = b'{"id": 1, "turns": [{"prompt": "p\\u0000", "responses": {"a": {"response": "r"}}}]}\n'
    response = client.post("/api/datasets/import/", {"name": "files", "file": io.BytesIO(line)})
    # The importer's own message, with its line number, not the middleware's.
    assert response.status_code == 400 and response.json().get("line") == 1 and "NUL" in response.json()["detail"]
    good = b'{"id": 1, "turns": [{"prompt": "p", "responses": {"a": {"response": "r"}}}]}\n'
    assert client.post("/api/datasets/import/", {"name": "files", "file": io.BytesIO(good)}).status_code == 201


@pytest.mark.django_db
def test_anonymous_bodies_are_capped_before_parsing(settings, researcher: User) -> None:  # type: ignore[no-untyped-def]
    settings.ANONYMOUS_MAX_BODY_BYTES = 4096
    padding = "x" * 8000
    anonymous = _client(None).post("/accounts/login/", {"username": "researcher", "password": "p", "pad": padding})
    assert anonymous.status_code == 413 and "4096" in anonymous.content.decode()
    token = _client(None).post("/api/token/", {"username": "researcher", "password": "p", "pad": padding})
    assert token.status_code == 413 and "limit without signing in" in token.json()["detail"]
    bogus = _client(None).post("/api/judging/configs/new/", {"pad": padding}, HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert bogus.status_code == 413
    # Signed in by session or by token, the same body reaches the view.
    config = {"config": json.dumps(JUDGE_CONFIG), "pad": padding}
    assert _client(researcher).post("/api/judging/configs/new/", config).status_code == 201
    key = Token.objects.create(user=researcher).key
    by_token = _client(None).post(
        "/api/judging/configs/new/",
        {**config, "config": json.dumps({**JUDGE_CONFIG, "name": "other"})},
        HTTP_AUTHORIZATION=f"Token {key}",
    )
    assert by_token.status_code == 201, by_token.content[:200]
    # Below the cap an anonymous login is parsed as before.
    assert (
        _client(None).post("/accounts/login/", {"username": "researcher", "password": CAST_PASSWORD}).status_code == 302
    )


def test_field_checks_name_nested_paths() -> None:
    assert json_problem({"a": [{"b": "ok"}, {"c": "x\x00"}]}, "") is not None
    assert json_problem({"a": [{"b": "ok"}, {"c": "x\x00"}]}, "").field == "a[1].c"  # type: ignore[union-attr]
    assert json_problem({"a": "\U0001f600 paired"}, "") is None
    assert json_problem({"k\ud800": 1}, "f").field == "f.k\ud800"  # type: ignore[union-attr]
    assert field_problem("config", "[" * 65 + "]" * 65, 64) is not None
    assert field_problem("config", "[" * 64 + "]" * 64, 64) is None
    assert field_problem("config", "[not json", 64) is None
    assert field_problem("note", "plain text with [brackets", 64) is None
    assert printable("a\x00b\ud800c\nd") == "a\\u0000b\\ud800c\\u000ad"
    assert len(printable("x" * 500)) == 103


@pytest.mark.django_db
def test_unparseable_multipart_is_left_to_the_view(researcher: User) -> None:
    # Without a boundary Django cannot read the form; the API view still authenticates first.
    response = _client(None).generic("POST", "/api/judging/configs/new/", b"x", content_type="multipart/form-data")
    assert response.status_code in {401, 403}
    signed_in = _client(researcher).generic(
        "POST", "/api/judging/configs/new/", b"x", content_type="multipart/form-data"
    )
    assert signed_in.status_code == 400


@pytest.mark.django_db
def test_an_expired_token_does_not_lift_the_anonymous_cap(settings, researcher: User) -> None:  # type: ignore[no-untyped-def]
    """Only a token the API itself would accept lifts the cap: an expired one leaves the body capped at the default
    64 KiB and never reaches the parser."""
    assert settings.ANONYMOUS_MAX_BODY_BYTES == 64 * 1024
    token = Token.objects.create(user=researcher)
    Token.objects.filter(pk=token.pk).update(created=timezone.now() - timedelta(hours=settings.API_TOKEN_TTL_HOURS + 1))
    body = {"config": json.dumps(JUDGE_CONFIG), "pad": "x" * (80 * 1024)}
    expired = _client(None).post("/api/judging/configs/new/", body, HTTP_AUTHORIZATION=f"Token {token.key}")
    assert expired.status_code == 413 and "limit without signing in" in expired.json()["detail"]
    Token.objects.filter(pk=token.pk).update(created=timezone.now())
    fresh = _client(None).post("/api/judging/configs/new/", body, HTTP_AUTHORIZATION=f"Token {token.key}")
    assert fresh.status_code == 201, fresh.content[:200]
