"""Upload size caps, line length, JSON nesting depth, NUL bytes and bad UTF-8 on imports (API and
admin), rubrics and API bodies end in a 400 or 413 with a clear message, never a 500. Downloads are attachments
with nosniff."""

import io
import json

import pytest
from django.contrib.auth.models import User
from django.test import Client

from annotations.models import Dataset
from evalsite.middleware import json_nesting_exceeds

GOOD_LINE = b'{"id": 1, "turns": [{"prompt": "p", "responses": {"a": {"response": "r", "human_evals": {"x": [1]}}}}]}\n'
GOOD_RUBRIC = {"aspects": [{"name": "x", "min": 1, "max": 5}]}


def _deep(levels: int) -> bytes:
    return b'{"id": 1, "turns": [{"prompt": "p"}], "meta": ' + b"[" * levels + b"]" * levels + b"}\n"


BAD_FILES = {
    "bad UTF-8": (b"\xff\xfe" + GOOD_LINE, "not valid UTF-8"),
    "bad UTF-8 mid-line": (GOOD_LINE.replace(b'"p"', b'"p\xc3\x28"'), "not valid UTF-8"),
    "NUL escape in a string": (GOOD_LINE.replace(b'"p"', b'"p\\u0000"'), "NUL"),
    "NUL escape in a key": (GOOD_LINE.replace(b'"prompt": "p"', b'"prompt": "p", "m": {"k\\u0000": 1}'), "NUL"),
    "raw NUL byte": (GOOD_LINE.replace(b'"p"', b'"p\x00"'), "invalid JSON"),
    "nesting beyond the limit": (_deep(200), "nested too deeply"),
    "nesting beyond the recursion limit": (_deep(100_000), "nested too deeply"),
    "unpaired surrogate": (GOOD_LINE.replace(b'"p"', b'"p\\ud800"'), ""),
    "infinite number": (GOOD_LINE.replace(b"[1]", b"[1e400]"), "finite"),
    "NaN": (GOOD_LINE.replace(b"[1]", b"[NaN]"), ""),
    "not JSON": (b"this is not json\n", "invalid JSON"),
    "a JSON list per line": (b"[1, 2]\n", "not an item"),
    "empty file": (b"", "empty"),
}

BAD_RUBRICS = {
    "deep nesting": (b"[" * 100_000 + b"]" * 100_000, "nested"),
    "not UTF-8": (b'\xff{"aspects": []}', "UTF-8"),
    "NUL in a description": (json.dumps({"aspects": [{"name": "x", "min": 1, "max": 5, "description": "d\0"}]}), "NUL"),
    "NUL in a scale label": (
        json.dumps({"aspects": [{"name": "x", "min": 1, "max": 5, "labels": {"1": "a\0"}}]}),
        "NUL",
    ),
    "NUL in an unused aspect name": (
        json.dumps({"aspects": [{"name": "x", "min": 1, "max": 5}, {"name": "y\0", "min": 1, "max": 5}]}),
        "NUL",
    ),
    "NUL in a model name": (json.dumps({**GOOD_RUBRIC, "systems": {"a": "m\0"}}), "NUL"),
    "NUL in a missing code": (json.dumps({"aspects": [{"name": "x", "min": 1, "max": 5, "missing": ["N\0"]}]}), "NUL"),
    "NaN missing code": (b'{"aspects": [{"name": "x", "min": 1, "max": 5, "missing": [NaN]}]}', "NaN"),
    "infinite missing code": (b'{"aspects": [{"name": "x", "min": 1, "max": 5, "missing": [1e400]}]}', "finite"),
    "over-long aspect name": (json.dumps({"aspects": [{"name": "x" * 300, "min": 1, "max": 5}]}), "200"),
    "larger than a megabyte": (json.dumps({**GOOD_RUBRIC, "pad": "x" * 1_100_000}), "larger than"),
}


@pytest.fixture
def api(researcher: User) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(researcher)
    return client


@pytest.fixture
def admin_client_(db: None) -> Client:
    root = User.objects.create_superuser(username="root", password="x-" * 12, email="root@example.test")
    client = Client(raise_request_exception=False)
    client.force_login(root)
    return client


def _import(client: Client, content: bytes, *, rubric: bytes | str | None = None, name: str = "limits") -> object:
    data: dict[str, object] = {"name": name, "file": io.BytesIO(content)}
    if rubric is not None:
        data["rubric"] = io.BytesIO(rubric.encode() if isinstance(rubric, str) else rubric)
    return client.post("/api/datasets/import/", data)


def _admin_import(client: Client, content: bytes, *, rubric: bytes | str | None = None, name: str = "limits") -> object:
    data: dict[str, object] = {"name": name, "file": io.BytesIO(content)}
    if rubric is not None:
        data["rubric"] = io.BytesIO(rubric.encode() if isinstance(rubric, str) else rubric)
    return client.post("/admin/annotations/dataset/import/", data)


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(BAD_FILES))
def test_api_import_refuses_bad_files_with_a_message(case: str, api: Client) -> None:
    content, expected = BAD_FILES[case]
    response = _import(api, content)
    assert response.status_code == 400, response.content[:300]
    assert expected in json.dumps(response.json())
    assert not Dataset.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(BAD_RUBRICS))
def test_api_import_refuses_bad_rubrics_with_a_message(case: str, api: Client) -> None:
    rubric, expected = BAD_RUBRICS[case]
    response = _import(api, GOOD_LINE, rubric=rubric)
    assert response.status_code == 400, response.content[:300]
    assert expected in response.json()["detail"]
    assert not Dataset.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("case", ["bad UTF-8", "NUL escape in a string", "nesting beyond the recursion limit"])
def test_admin_import_refuses_bad_files_with_a_message(case: str, admin_client_: Client) -> None:
    content, expected = BAD_FILES[case]
    response = _admin_import(admin_client_, content)
    assert response.status_code == 400
    assert expected in response.content.decode()
    assert "nothing was imported" in response.content.decode()
    assert not Dataset.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("case", ["deep nesting", "NUL in a description", "NaN missing code"])
def test_admin_import_refuses_bad_rubrics_with_a_message(case: str, admin_client_: Client) -> None:
    rubric, expected = BAD_RUBRICS[case]
    response = _admin_import(admin_client_, GOOD_LINE, rubric=rubric)
    assert response.status_code == 400
    assert expected in response.content.decode()
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_good_file_still_imports(api: Client, admin_client_: Client) -> None:
    assert _import(api, GOOD_LINE, rubric=json.dumps(GOOD_RUBRIC)).status_code == 201
    assert _admin_import(admin_client_, GOOD_LINE, rubric=json.dumps(GOOD_RUBRIC), name="other").status_code == 302


@pytest.mark.django_db
def test_line_length_cap(api: Client, settings) -> None:  # type: ignore[no-untyped-def]
    settings.IMPORT_MAX_LINE_BYTES = 1024
    long_line = GOOD_LINE.replace(b'"p"', b'"' + b"p" * 2000 + b'"')
    response = _import(api, long_line)
    assert response.status_code == 400
    assert "line too long" in response.json()["detail"] and "1024" in response.json()["detail"]


@pytest.mark.django_db
def test_upload_size_cap_in_the_serializer(api: Client, settings) -> None:  # type: ignore[no-untyped-def]
    settings.IMPORT_MAX_UPLOAD_BYTES = 2048
    response = _import(api, GOOD_LINE * 40)
    assert response.status_code in {400, 413}
    assert "limit is 2048 bytes" in json.dumps(response.json())


@pytest.mark.django_db
def test_upload_size_cap_before_the_body_is_read(api: Client, settings) -> None:  # type: ignore[no-untyped-def]
    settings.IMPORT_MAX_UPLOAD_BYTES = 1024
    response = _import(api, GOOD_LINE * 40_000)  # ~4 MB, over the cap plus the 2 MB allowance for the rest
    assert response.status_code == 413
    assert "limit is" in response.json()["detail"]


@pytest.mark.django_db
def test_admin_upload_size_cap(admin_client_: Client, settings) -> None:  # type: ignore[no-untyped-def]
    settings.IMPORT_MAX_UPLOAD_BYTES = 2048
    response = _admin_import(admin_client_, GOOD_LINE * 40)
    assert response.status_code == 400
    assert "larger than 2048 bytes" in response.content.decode()


@pytest.mark.django_db
def test_form_fields_with_nul_are_refused(api: Client) -> None:
    response = _import(api, GOOD_LINE, name="bad\x00name")
    assert response.status_code == 400
    assert "Null characters are not allowed" in json.dumps(response.json())


@pytest.mark.django_db
def test_json_api_bodies_are_capped_and_depth_limited(api: Client, researcher: User) -> None:
    big = json.dumps({"username": "a", "password": "b", "pad": "x" * 3_000_000})
    response = api.post("/api/token/", big, content_type="application/json")
    assert response.status_code == 413 and "limit is" in response.json()["detail"]
    deep = "[" * 100_000 + "]" * 100_000
    response = api.post("/api/token/", deep, content_type="application/json")
    assert response.status_code == 400 and "nested" in response.json()["detail"]
    html_big = api.post("/accounts/login/", big, content_type="application/json")
    assert html_big.status_code == 413


@pytest.mark.django_db
def test_every_json_api_endpoint_survives_hostile_bodies(api: Client) -> None:
    from tests.security.urlwalk import iter_endpoints

    bodies = [
        "[" * 100_000 + "]" * 100_000,
        '{"a": ' * 10_000 + "1" + "}" * 10_000,
        '{"x": "\\u0000", "name": "\\ud800"}',
        "{not json",
        "[1, 2, 3]",
        "null",
        '"text"',
        '{"pad": "' + "x" * 100_000 + '"}',
    ]
    failures = []
    for endpoint in iter_endpoints():
        if not endpoint.path.startswith("/api/"):
            continue
        for body in bodies:
            for method in ("post", "put", "patch"):
                response = getattr(api, method)(endpoint.path, body, content_type="application/json")
                if response.status_code >= 500:
                    failures.append(f"{method.upper()} {endpoint.path} {body[:20]!r}: {response.status_code}")
    assert failures == []


@pytest.mark.parametrize(
    ("body", "exceeds"),
    [
        (b"[" * 65 + b"]" * 65, True),
        (b"[" * 64 + b"]" * 64, False),
        (b'{"a": "' + b"[" * 500 + b'"}', False),  # brackets inside a string do not nest
        (b'{"a": "\\"' + b"[" * 500 + b'"}', False),  # nor after an escaped quote
        (b"[]" * 10_000, False),
        (b'{"a":' * 70 + b"1" + b"}" * 70, True),
    ],
)
def test_json_nesting_scanner(body: bytes, exceeds: bool) -> None:
    assert json_nesting_exceeds(body, 64) is exceeds


@pytest.mark.django_db
def test_downloads_are_attachments_with_nosniff(api: Client) -> None:
    assert _import(api, GOOD_LINE).status_code == 201
    dataset = Dataset.objects.get()
    for query in ({}, {"flat": "csv"}, {"flat": "jsonl"}):
        response = api.get(f"/api/datasets/{dataset.pk}/export/", query)
        assert response.status_code == 200
        assert response["Content-Disposition"].startswith("attachment;")
        assert response["X-Content-Type-Options"] == "nosniff"
        assert 'filename="limits.' in response["Content-Disposition"]


CORPUS_CASES = {
    "NUL escape": (b'{"id": "d1", "title": "t\\u0000", "text": "x y z"}\n', "U+0000"),
    "raw NUL byte": (b'{"id": "d1", "title": "t", "text": "x\x00 y"}\n', "not valid JSON"),
    "bad UTF-8": (b'{"id": "d1", "title": "t", "text": "\xff\xfe"}\n', "UTF-8"),
    "deep nesting": (b'{"id": "d1", "text": "x", "m": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", "nested"),
    "unpaired surrogate": (b'{"id": "d1", "title": "t", "text": "\\ud800"}\n', "surrogate"),
    "not JSON": (b"nope\n", "not valid JSON"),
    "a list": (b"[1]\n", "expected an object"),
    "huge document": (b'{"id": "d1", "title": "t", "text": "' + b"x" * 2_100_000 + b'"}\n', "longer than"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(CORPUS_CASES))
def test_factscore_corpus_upload_refuses_bad_files_with_a_message(case: str, api: Client, researcher: User) -> None:
    from judging.factscore.models import KnowledgeCorpus

    assert _import(api, GOOD_LINE).status_code == 201
    dataset = Dataset.objects.get()
    content, expected = CORPUS_CASES[case]
    response = api.post(f"/factscore/api/datasets/{dataset.pk}/corpora/", {"name": "c", "file": io.BytesIO(content)})
    assert response.status_code == 400, response.content[:200]
    assert expected in json.dumps(response.json())
    assert not KnowledgeCorpus.objects.exists()
