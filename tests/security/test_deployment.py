"""The deployment gate. Production settings pass `check --deploy`, responses carry the security
headers, DRF renders JSON only in production, and Celery accepts JSON only."""

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from kombu.exceptions import ContentDisallowed
from kombu.serialization import dumps, loads

from evalsite.celery import app as celery_app

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def production_env(**overrides: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "PYTEST"))}
    env.update(
        {
            "EVALSITE_PRODUCTION": "true",
            "DEBUG": "false",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "evalsite.example.org",
            "DJANGO_SETTINGS_MODULE": "evalsite.settings",
            "DATABASE_URL": "sqlite:////tmp/evalsite-deploy-check.sqlite3",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
    )
    env.update(overrides)
    return env


def run_manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_is_clean_under_production_settings() -> None:
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", env=production_env())
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_deploy_gate_fails_when_production_runs_with_debug() -> None:
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", env=production_env(DEBUG="true"))
    assert result.returncode != 0
    assert "security.W018" in result.stdout + result.stderr


def test_production_refuses_to_start_without_a_secret_key() -> None:
    result = run_manage("check", env=production_env(SECRET_KEY=""))
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_production_refuses_a_short_secret_key() -> None:
    result = run_manage("check", env=production_env(SECRET_KEY="short"))
    assert result.returncode != 0
    assert "at least 32 characters" in result.stderr


PRODUCTION_PROBE = """
import json, django
django.setup()
from django.conf import settings
from django.test import Client
from rest_framework.settings import api_settings
from evalsite.celery import app
client = Client(HTTP_HOST="evalsite.example.org")
page = client.get("/accounts/login/", secure=True)
api = client.get("/api/datasets/", secure=True, HTTP_ACCEPT="text/html")
plain = client.get("/accounts/login/", secure=False)
print(json.dumps({
    "page_status": page.status_code,
    "page_headers": dict(page.headers),
    "page_cookies": {name: dict(morsel) for name, morsel in page.cookies.items()},
    "api_status": api.status_code,
    "api_type": api["Content-Type"],
    "renderers": [cls.__name__ for cls in api_settings.DEFAULT_RENDERER_CLASSES],
    "plain_status": plain.status_code,
    "plain_location": plain.get("Location", ""),
    "debug": settings.DEBUG,
    "celery_accept": list(app.conf.accept_content),
    "celery_task_serializer": app.conf.task_serializer,
    "celery_result_accept": app.conf.result_accept_content,
    "session_secure": settings.SESSION_COOKIE_SECURE,
    "csrf_secure": settings.CSRF_COOKIE_SECURE,
}))
"""


@pytest.fixture(scope="module")
def production_probe() -> dict:
    result = run_python(PRODUCTION_PROBE, production_env())
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_production_page_headers(production_probe: dict) -> None:
    headers = {key.lower(): value for key, value in production_probe["page_headers"].items()}
    assert production_probe["page_status"] == 200
    assert headers["strict-transport-security"].startswith("max-age=31536000")
    assert "includeSubDomains" in headers["strict-transport-security"]
    assert_security_headers(headers)
    assert production_probe["session_secure"] is True and production_probe["csrf_secure"] is True
    csrf_cookie = production_probe["page_cookies"]["csrftoken"]
    assert csrf_cookie["secure"] is True and csrf_cookie["samesite"] == "Lax"


def test_production_redirects_plain_http_to_https(production_probe: dict) -> None:
    assert production_probe["plain_status"] == 301
    assert production_probe["plain_location"].startswith("https://evalsite.example.org/")


def test_production_drf_renders_json_only(production_probe: dict) -> None:
    assert production_probe["renderers"] == ["JSONRenderer"]
    # Asked for HTML, the API answers in JSON: a refusal (403) or "not acceptable" (406), never a browsable page.
    assert production_probe["api_status"] in {403, 406}
    assert production_probe["api_type"].startswith("application/json")
    assert production_probe["debug"] is False


def test_production_celery_accepts_json_only(production_probe: dict) -> None:
    assert production_probe["celery_accept"] == ["json"]
    assert production_probe["celery_task_serializer"] == "json"
    assert production_probe["celery_result_accept"] in (None, ["json"])


def test_debug_is_off_unless_asked_for() -> None:
    env = production_env()
    for key in ("EVALSITE_PRODUCTION", "DEBUG", "SECRET_KEY"):
        env.pop(key)
    result = run_python("import django; django.setup(); from django.conf import settings; print(settings.DEBUG)", env)
    assert result.stdout.strip().splitlines()[-1] == "False", result.stderr


# --- in-process (the test settings are the non-production defaults) ------------------------------------------------


def assert_security_headers(headers: dict[str, str]) -> None:
    lowered = {key.lower(): value for key, value in headers.items()}
    assert lowered["x-frame-options"] == "DENY"
    assert lowered["x-content-type-options"] == "nosniff"
    assert lowered["referrer-policy"] in {"same-origin", "strict-origin-when-cross-origin", "no-referrer"}
    assert lowered["cross-origin-opener-policy"] == "same-origin"
    csp = lowered["content-security-policy"]
    directives = {part.split()[0]: part.split()[1:] for part in csp.split(";") if part.strip()}
    for directive in ("default-src", "script-src", "style-src"):
        assert directive in directives or "default-src" in directives, directive
    for name, sources in directives.items():
        assert "'unsafe-inline'" not in sources and "'unsafe-eval'" not in sources, csp
        assert "*" not in sources, csp
        if "data:" in sources:
            assert name in {"img-src", "font-src"}, csp
    assert directives["script-src"] == ["'self'"]
    assert directives["object-src"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert directives["base-uri"] == ["'self'"]


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["anonymous", "researcher", "annotator"])
def test_security_headers_on_pages_api_and_errors(role: str, researcher: User, annotator1: User) -> None:
    client = Client()
    if role == "researcher":
        client.force_login(researcher)
    elif role == "annotator":
        client.force_login(annotator1)
    for url in ["/accounts/login/", "/", "/admin/login/", "/api/datasets/", "/no-such-page/", "/api/schema/"]:
        response = client.get(url)
        assert_security_headers(dict(response.headers))


def test_security_header_check_rejects_a_weak_policy() -> None:
    good = {
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Content-Security-Policy": settings.CONTENT_SECURITY_POLICY,
    }
    assert_security_headers(good)
    csp = settings.CONTENT_SECURITY_POLICY
    for key, weak in [
        ("Content-Security-Policy", csp.replace("script-src 'self'", "script-src 'self' 'unsafe-inline'")),
        ("Content-Security-Policy", csp.replace("script-src 'self'", "script-src 'self' 'unsafe-eval'")),
        ("Content-Security-Policy", csp.replace("object-src 'none'", "object-src *")),
        ("X-Frame-Options", "SAMEORIGIN"),
        ("X-Content-Type-Options", ""),
    ]:
        with pytest.raises(AssertionError):
            assert_security_headers({**good, key: weak})


def test_celery_accepts_json_only_and_refuses_pickle() -> None:
    assert list(celery_app.conf.accept_content) == ["json"]
    assert celery_app.conf.task_serializer == "json"
    assert celery_app.conf.result_serializer == "json"
    content_type, encoding, body = dumps({"x": 1}, serializer="pickle")
    with pytest.raises(ContentDisallowed):
        loads(body, content_type, encoding, accept=celery_app.conf.accept_content)


def test_password_hashing_default_is_a_slow_hash() -> None:
    from evalsite import settings as project_settings

    hashers = getattr(project_settings, "PASSWORD_HASHERS", None)
    if hashers is None:
        from django.conf import global_settings

        hashers = global_settings.PASSWORD_HASHERS
    assert hashers[0].rsplit(".", 1)[-1] in {"PBKDF2PasswordHasher", "Argon2PasswordHasher", "ScryptPasswordHasher"}
    assert len(project_settings.AUTH_PASSWORD_VALIDATORS) >= 3


def test_static_and_api_downloads_do_not_sniff() -> None:
    assert settings.SECURE_CONTENT_TYPE_NOSNIFF is True
    assert settings.X_FRAME_OPTIONS == "DENY"
