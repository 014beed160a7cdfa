"""Hypothesis properties over the importer, the CSV escaper, the markdown sanitizer and the score
parser (never an uncaught exception, never active output), and schemathesis over our OpenAPI schema in-process
(no 5xx; authentication and the researcher role are honoured on every operation)."""

import csv
import io
import json
import time
import uuid
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.urls import Resolver404, resolve
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token

from annotations.datasets.exporting import FORMULA_PREFIXES, csv_safe
from annotations.datasets.flat_export import iter_flat_csv
from annotations.datasets.importing import dataset_import
from annotations.errors import DatasetImportError, RubricError
from annotations.rubrics.specs import load_rubric_bytes
from annotations.text.markdown import ALLOWED_ATTRIBUTES, ALLOWED_TAGS, render_markdown
from judging.methods.parsing import parse_score
from tests.security.hostile import CORPUS, MARKDOWN_PAYLOADS, MARKUP_PAYLOADS
from tests.security.html_checks import find_active_payloads

DB_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

# --- importer ------------------------------------------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.sampled_from(CORPUS),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
score_tokens = st.one_of(st.integers(-2, 7), st.sampled_from(["NA", None, 0, 2.5, "x", True]), json_values)
answers = st.fixed_dictionaries(
    {"response": st.one_of(st.text(max_size=40), st.sampled_from(CORPUS), json_values)},
    optional={
        "human_evals": st.dictionaries(
            st.sampled_from(["fluency", "overall", MARKUP_PAYLOADS[0]]), st.lists(score_tokens, max_size=4), max_size=3
        )
        | json_values,
        "raters": st.lists(st.one_of(st.text(max_size=8), st.integers(), json_scalars), max_size=4) | json_values,
        "auto_evals": st.dictionaries(st.text(max_size=8), st.dictionaries(st.text(max_size=8), json_scalars))
        | json_values,
        "meta": json_values,
    },
)
turns = st.fixed_dictionaries(
    {"prompt": st.one_of(st.text(max_size=40), st.sampled_from(CORPUS), json_values)},
    optional={
        "reference": st.one_of(st.none(), st.text(max_size=20), json_values),
        "context": st.one_of(st.text(max_size=20), st.lists(st.text(max_size=10), max_size=3), json_values),
        "responses": st.dictionaries(st.one_of(st.text(max_size=12), st.sampled_from(CORPUS)), answers, max_size=3)
        | json_values,
    },
)
items = st.fixed_dictionaries(
    {"id": st.one_of(st.text(max_size=12), st.integers(), st.sampled_from(CORPUS), json_scalars)},
    optional={"turns": st.lists(turns, max_size=3) | json_values, "meta": json_values},
)


def _line(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


raw_files = st.one_of(
    st.lists(items.map(_line), min_size=1, max_size=4).map(lambda lines: b"\n".join(lines) + b"\n"),
    st.binary(max_size=300),
    st.lists(st.one_of(items.map(_line), st.binary(max_size=40)), max_size=4).map(b"\n".join),
)


@pytest.mark.django_db
@DB_SETTINGS
@given(content=raw_files)
def test_importer_never_raises_anything_but_a_located_import_error(content: bytes) -> None:
    try:
        dataset_import(stream=io.BytesIO(content), name=f"fuzz-{uuid.uuid4().hex}")
    except DatasetImportError as exc:
        assert str(exc)


@pytest.mark.django_db
@DB_SETTINGS
@given(rubric=st.one_of(json_values.map(_line), st.binary(max_size=200)), content=raw_files)
def test_rubric_loader_and_importer_never_crash(rubric: bytes, content: bytes) -> None:
    try:
        spec = load_rubric_bytes(rubric)
    except RubricError as exc:
        assert str(exc)
        return
    try:
        dataset_import(stream=io.BytesIO(content), name=f"fuzz-{uuid.uuid4().hex}", rubric=spec)
    except DatasetImportError as exc:
        assert str(exc)


# --- CSV escaper ---------------------------------------------------------------------------------------------------

cell_text = st.one_of(
    st.text(),
    st.sampled_from(CORPUS),
    st.tuples(st.sampled_from(FORMULA_PREFIXES), st.text()).map("".join),
    st.tuples(st.text(max_size=5), st.sampled_from(["\r", "\n", "\r\n"]), st.sampled_from(FORMULA_PREFIXES)).map(
        lambda parts: parts[0] + parts[1] + parts[2] + "1+1"
    ),
)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(cell_text, min_size=1, max_size=5))
def test_flat_csv_has_no_live_formula_and_reads_back_exactly(values: list[str]) -> None:
    rows = [
        {"item_id": value, "turn": 1, "system": value, "aspect": value, "rater": value, "rationale": value}
        for value in values
    ]
    text = "".join(iter_flat_csv(rows))
    parsed = list(csv.DictReader(io.StringIO(text, newline="")))
    assert len(parsed) == len(values), "a cell broke out of its row"
    for row, value in zip(parsed, values, strict=True):
        assert row["rationale"] == csv_safe(value)
        for cell in row.values():
            assert not (cell or "").startswith(FORMULA_PREFIXES)


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(st.text(), st.integers(), st.floats(allow_nan=False), st.none(), st.booleans()))
def test_csv_safe_is_idempotent_and_only_touches_formula_text(value: Any) -> None:
    once = csv_safe(value)
    assert csv_safe(once) == once
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        assert once == "'" + value
    else:
        assert once == value


# --- markdown sanitizer --------------------------------------------------------------------------------------------

markdown_text = st.lists(
    st.one_of(
        st.sampled_from(MARKDOWN_PAYLOADS + MARKUP_PAYLOADS),
        st.text(alphabet=st.sampled_from("<>\"'`()[]{}!:/=&#;\\ \njavascriptonerrorhx-svg*_"), max_size=40),
        st.text(max_size=20),
    ),
    max_size=6,
).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(text=markdown_text)
def test_markdown_output_is_never_active(text: str) -> None:
    html = str(render_markdown(text))
    page = f'<!DOCTYPE html><html><head><script src="/static/js/app.js"></script></head><body>{html}</body></html>'
    assert find_active_payloads(page, secret_key="not-in-output-" * 4) == []
    collector = _TagCollector()
    collector.feed(html)
    for tag, attrs in collector.seen:
        assert tag in ALLOWED_TAGS, tag
        for name, value in attrs:
            assert name in ALLOWED_ATTRIBUTES.get(tag, set()) | {"rel"}, (tag, name)
            if name == "href":
                assert urlsplit(value or "").scheme in {"", "http", "https", "mailto"}, value


class _TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.seen: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append((tag, attrs))


# --- score parser --------------------------------------------------------------------------------------------------

scales = st.one_of(st.none(), st.sampled_from([(1.0, 5.0), (0.0, 3.0), (-1.0, 1.0), (1.0, 10.0)]))
judge_text = st.one_of(
    st.none(),
    st.text(max_size=300),
    st.sampled_from(CORPUS).map(lambda p: f"Reasoning: {p}\nScore: 4"),
    st.builds(lambda r, s: json.dumps({"reasoning": r, "score": s}), st.text(max_size=30), json_scalars),
    st.text(alphabet='Score: 0123456789０１２３４５/.-+{}"[]総合評価スコア\n', max_size=80),
)
output_configs = st.one_of(
    st.just({}),
    st.just({"format": "auto"}),
    st.just({"format": "json"}),
    st.builds(lambda rx: {"format": "regex", "regex": rx}, st.text(max_size=40)),
    st.sampled_from([{"format": "regex", "regex": r"Score: (\d)"}, {"format": "regex", "regex": "(a|aa)+$"}]),
)


@settings(max_examples=400, deadline=None)
@given(text=judge_text, output=output_configs, scale=scales)
def test_score_parser_never_raises_and_stays_in_scale(text: str | None, output: dict, scale: Any) -> None:
    started = time.monotonic()
    result = parse_score(text, output, scale)
    assert time.monotonic() - started < 1.0
    if result.score is not None and not result.error and scale is not None:
        assert scale[0] <= result.score <= scale[1]
    if result.error:
        assert result.error_kind


# --- schemathesis against our OpenAPI schema, in-process ----------------------------------------------------------

API_SCHEMA = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
API_SCHEMA.app = get_wsgi_application()
# Operations that anyone may call: exchanging credentials for a token.
PUBLIC_OPERATIONS = {"/api/token/"}
# Operations on the signed-in user's own account (their API tokens): annotators may use them too.
OWN_ACCOUNT_OPERATIONS = {"/api/token/mine/"}


@pytest.fixture
def tokens(db: None, researcher: User, annotator1: User, fresh_cache: None) -> Iterator[dict[str, str]]:
    # Requests go through the real WSGI handler; like Django's test client, keep it from closing the test's
    # database connection at the end of each request.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield {
            "researcher": Token.objects.create(user=researcher).key,
            "annotator": Token.objects.create(user=annotator1).key,
        }
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.mark.django_db
@API_SCHEMA.parametrize()
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_never_5xx_and_honours_authentication(case: Any, tokens: dict[str, str]) -> None:
    authed = case.call(headers={"Authorization": f"Token {tokens['researcher']}"})
    assert authed.status_code < 500, f"{case.method} {case.formatted_path}: {authed.status_code}"
    anonymous = case.call()
    assert anonymous.status_code < 500
    public = case.path in PUBLIC_OPERATIONS
    # A generated path value that no URL pattern accepts ("AAA" for an id) ends in Django's 404 before any view.
    routed = _routes(case.formatted_path)
    if not public and routed and not _refused_as_malformed(anonymous):
        assert anonymous.status_code in {401, 403}, f"{case.method} {case.path} answered {anonymous.status_code}"
    annotator = case.call(headers={"Authorization": f"Token {tokens['annotator']}"})
    assert annotator.status_code < 500
    own_account = case.path in OWN_ACCOUNT_OPERATIONS
    if (
        not public
        and routed
        and not own_account
        and not case.path.startswith("/api/annotate/")
        and not _refused_as_malformed(annotator)
    ):
        # Every researcher operation refuses an annotator before looking at the request; a 2xx would be a leak.
        assert annotator.status_code == 403, f"{case.method} {case.path}: {annotator.status_code}"


def _refused_as_malformed(response: Any) -> bool:
    """The request hygiene check refuses a NUL, a lone surrogate or deep JSON before anyone is asked who they are;
    it names the field and runs no view, so it discloses nothing about the operation."""
    if response.status_code != 400:
        return False
    try:
        body = json.loads(response.content)
    except ValueError:
        return False
    return isinstance(body, dict) and "field" in body and "not allowed" in str(body.get("detail"))


def _routes(path: str) -> bool:
    try:
        resolve(path.split("?", 1)[0])
    except Resolver404:
        return False
    return True
