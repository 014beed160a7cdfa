"""Login and token endpoints are rate-limited, `next` stays on our host, the session rotates at
login and dies at logout, and no account has a default password."""

import ast
import io
import re
import uuid
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from django.core.management import call_command
from django.test import Client, RequestFactory
from django.urls import reverse

from evalsite import settings as project_settings
from evalsite.auth import attempts_blocked, record_failed_attempt, username_key
from tests.conftest import CAST_PASSWORD

PROJECT_ROOT = Path(__file__).resolve().parents[2]
LIMIT = int(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["login"].split("/")[0])
TOKEN_LIMIT = int(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["token"].split("/")[0])

pytestmark = pytest.mark.usefixtures("fresh_cache")


def _login(client: Client, username: str, password: str, *, addr: str = "10.0.0.1", **extra: str):  # type: ignore[no-untyped-def]
    return client.post(reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=addr, **extra)


# --- rate limiting -------------------------------------------------------------------------------------------------


def test_login_refuses_an_address_after_too_many_failures_even_with_the_right_password(researcher: User) -> None:
    client = Client()
    for attempt in range(LIMIT):
        response = _login(client, f"nobody{attempt}", "wrong-password")
        assert response.status_code == 200, attempt
    blocked = _login(client, "researcher", CAST_PASSWORD)
    assert blocked.status_code == 429
    assert blocked["Retry-After"] == "60"
    assert "Too many failed login attempts" in blocked.content.decode()
    assert "_auth_user_id" not in client.session
    # Another address is not affected.
    assert _login(Client(), "researcher", CAST_PASSWORD, addr="10.0.0.2").status_code == 302


def test_login_refuses_a_username_sprayed_from_many_addresses(researcher: User) -> None:
    for attempt in range(LIMIT):
        assert _login(Client(), "researcher", "wrong", addr=f"10.1.0.{attempt + 1}").status_code == 200
    # Every spraying address is held back, even with the right password, under any spelling of the name.
    assert _login(Client(), "researcher", CAST_PASSWORD, addr="10.1.0.1").status_code == 429
    assert _login(Client(), "RESEARCHER ", CAST_PASSWORD, addr="10.1.0.2").status_code == 429
    # A fresh address gets one guess: its first failure puts it among the held-back ones.
    assert _login(Client(), "researcher", "wrong", addr="10.1.1.1").status_code == 200
    assert _login(Client(), "researcher", CAST_PASSWORD, addr="10.1.1.1").status_code == 429


def test_a_sprayed_username_still_lets_its_owner_in_from_a_clean_address(researcher: User) -> None:
    for attempt in range(LIMIT * 3):
        _login(Client(), "researcher", "wrong", addr=f"10.11.0.{attempt + 1}")
    owner = Client()
    assert _login(owner, "researcher", CAST_PASSWORD, addr="10.11.9.9").status_code == 302
    assert "_auth_user_id" in owner.session
    # The success clears the username counter, so the addresses that sprayed fall back to their own limit.
    assert _login(Client(), "researcher", CAST_PASSWORD, addr="10.11.0.1").status_code == 302


@pytest.mark.parametrize("spelling", ["ｒｅｓＢ", "𝐫𝐞𝐬𝐁", "RESB", "resB", " resb "])
def test_look_alike_usernames_share_one_counter(db: None, spelling: str) -> None:
    User.objects.create_user(username="resB", password=CAST_PASSWORD)
    # The login form reads every one of these as resB (NFKC), so each is a guess at the same account.
    look_alikes = ["ｒｅｓＢ", "𝐫𝐞𝐬𝐁", "RESB", "resB"]
    assert {username_key(name) for name in look_alikes} == {username_key("resB")}
    assert _login(Client(), "𝐫𝐞𝐬𝐁", CAST_PASSWORD, addr="10.12.9.1").status_code == 302
    for attempt in range(LIMIT):
        name = look_alikes[attempt % len(look_alikes)]
        assert _login(Client(), name, "wrong", addr=f"10.12.0.{attempt + 1}").status_code == 200
    # The 10 failures, spread over four spellings, used up the one counter: any spelling is now held back.
    blocked = _login(Client(), spelling, CAST_PASSWORD, addr="10.12.0.1")
    assert blocked.status_code == 429
    token = Client().post(reverse("api-token"), {"username": spelling, "password": "x"}, REMOTE_ADDR="10.12.0.2")
    assert token.status_code == 400  # the token scope counts apart, but under the same key
    for attempt in range(TOKEN_LIMIT):
        name = look_alikes[attempt % len(look_alikes)]
        Client().post(reverse("api-token"), {"username": name, "password": "x"}, REMOTE_ADDR=f"10.13.0.{attempt + 1}")
    again = Client().post(
        reverse("api-token"), {"username": spelling, "password": CAST_PASSWORD}, REMOTE_ADDR="10.13.0.1"
    )
    assert again.status_code == 429


def test_forged_x_forwarded_for_does_not_give_a_fresh_address(researcher: User) -> None:
    client = Client()
    for attempt in range(LIMIT):
        _login(client, f"user{attempt}", "wrong", HTTP_X_FORWARDED_FOR=f"203.0.113.{attempt}")
    response = _login(client, "researcher", CAST_PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.7")
    assert response.status_code == 429


def test_trusted_proxy_count_uses_the_proxy_supplied_address(settings, researcher: User) -> None:  # type: ignore[no-untyped-def]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    client = Client()
    for attempt in range(LIMIT):
        _login(client, f"user{attempt}", "wrong", addr="10.9.9.9", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.5")
    # Same proxy, different real client: allowed. The forged left-most hop is ignored.
    allowed = _login(client, "researcher", CAST_PASSWORD, addr="10.9.9.9", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.6")
    assert allowed.status_code == 302
    blocked = _login(Client(), "researcher", "x", addr="10.9.9.9", HTTP_X_FORWARDED_FOR="7.7.7.7, 203.0.113.5")
    assert blocked.status_code == 429


def test_successful_login_is_not_counted_and_clears_the_username_counter(researcher: User) -> None:
    for round_number in range(3):
        for attempt in range(LIMIT - 1):
            _login(Client(), "researcher", "wrong", addr=f"10.2.{round_number}.{attempt + 1}")
        assert _login(Client(), "researcher", CAST_PASSWORD, addr=f"10.3.{round_number}.1").status_code == 302


def test_admin_login_is_limited_too_and_counts_guesses_by_signed_in_users(researcher: User, annotator1: User) -> None:
    client = Client()
    client.force_login(annotator1)
    admin_login = reverse("admin:login")
    for _ in range(LIMIT):
        response = client.post(admin_login, {"username": "researcher", "password": "guess"}, REMOTE_ADDR="10.4.0.1")
        assert response.status_code == 200
    blocked = Client().post(admin_login, {"username": "researcher", "password": CAST_PASSWORD}, REMOTE_ADDR="10.4.0.1")
    assert blocked.status_code == 429
    # The signed-in guesses used up the username counter too: another address is held back after one failure.
    other = Client()
    assert (
        other.post(admin_login, {"username": "researcher", "password": "x"}, REMOTE_ADDR="10.4.0.2").status_code == 200
    )
    again = other.post(admin_login, {"username": "researcher", "password": CAST_PASSWORD}, REMOTE_ADDR="10.4.0.2")
    assert again.status_code == 429


def test_login_counters_work_on_the_configured_cache_backend(settings, researcher: User) -> None:  # type: ignore[no-untyped-def]
    # Undo fresh_cache: this test runs against the real backend (Redis under CI), with keys no other test uses.
    settings.CACHES = project_settings.CACHES
    request = RequestFactory().post("/accounts/login/", REMOTE_ADDR=f"10.77.{uuid.uuid4().int % 250}.1")
    username = f"probe-{uuid.uuid4().hex}"
    for _ in range(LIMIT - 1):
        record_failed_attempt("login", request, username)
    assert not attempts_blocked("login", request, username)
    record_failed_attempt("login", request, username)
    assert attempts_blocked("login", request, username)


def test_token_endpoint_issues_a_token_and_limits_failures_per_username(researcher: User) -> None:
    url = reverse("api-token")
    ok = Client().post(url, {"username": "researcher", "password": CAST_PASSWORD}, REMOTE_ADDR="10.5.0.1")
    assert ok.status_code == 200 and len(ok.json()["token"]) == 40
    for attempt in range(TOKEN_LIMIT):
        bad = Client().post(url, {"username": "researcher", "password": "x"}, REMOTE_ADDR=f"10.5.1.{attempt + 1}")
        assert bad.status_code == 400
        assert "token" not in bad.json()
    blocked = Client().post(url, {"username": "researcher", "password": CAST_PASSWORD}, REMOTE_ADDR="10.5.1.1")
    assert blocked.status_code == 429
    assert "token" not in blocked.json()
    # The owner, from an address that has not failed, still gets a token.
    owner = Client().post(url, {"username": "researcher", "password": CAST_PASSWORD}, REMOTE_ADDR="10.5.2.1")
    assert owner.status_code == 200 and len(owner.json()["token"]) == 40


def test_token_endpoint_throttles_every_request_per_address(researcher: User) -> None:
    url = reverse("api-token")
    client = Client()
    statuses = [
        client.post(url, {"username": "researcher", "password": CAST_PASSWORD}, REMOTE_ADDR="10.6.0.1").status_code
        for _ in range(TOKEN_LIMIT + 1)
    ]
    assert statuses[:TOKEN_LIMIT] == [200] * TOKEN_LIMIT
    assert statuses[TOKEN_LIMIT] == 429


def test_token_endpoint_refuses_get_and_bad_bodies_without_500(researcher: User) -> None:
    url = reverse("api-token")
    assert Client().get(url, REMOTE_ADDR="10.7.0.1").status_code == 405
    bad_json = Client().post(url, "{not json", content_type="application/json", REMOTE_ADDR="10.7.0.2")
    assert bad_json.status_code == 400
    a_list = Client().post(url, "[1, 2]", content_type="application/json", REMOTE_ADDR="10.7.0.3")
    assert a_list.status_code == 400


# --- open redirects ------------------------------------------------------------------------------------------------

OPEN_REDIRECT_VARIANTS = [
    "https://evil.example/",
    "http://evil.example",
    "//evil.example",
    "///evil.example",
    "////evil.example/",
    "\\\\evil.example",
    "/\\evil.example",
    "\\/evil.example",
    "/\\/evil.example",
    "http:evil.example",
    "https:/evil.example",
    "https:\\\\evil.example",
    " //evil.example",
    "\t//evil.example",
    "/\t/evil.example",
    "\n//evil.example",
    "javascript:alert(1)",
    "JavaScript:alert(document.domain)",
    "data:text/html,<script>alert(1)</script>",
    "http://testserver@evil.example/",
    "http://evil.example\\@testserver/",
    "http://evil.example#@testserver/",
    "http://evil.example?@testserver/",
    "https://testserver.evil.example/",
    "https://evil.example:443@testserver/",
    "//evil.example/%2F..",
    "//evil%E3%80%82example",
    "http://ⓔⓥⓘⓛ.example/",
    "ftp://evil.example/",
    "http://[::1]/",
    "http://127.0.0.1:8000/",
]


def _stays_on_our_host(location: str, base: str) -> bool:
    # Browsers treat backslashes like slashes and drop tabs and newlines in URLs (WHATWG URL parsing).
    cleaned = re.sub(r"[\t\n\r]", "", location).replace("\\", "/").strip()
    target = urlsplit(urljoin(base, cleaned))
    return target.scheme in {"http", "https"} and target.hostname == "testserver"


@pytest.mark.parametrize("variant", OPEN_REDIRECT_VARIANTS)
def test_login_next_never_leaves_our_host(variant: str, researcher: User) -> None:
    client = Client()
    response = client.post(
        reverse("login"), {"username": "researcher", "password": CAST_PASSWORD, "next": variant}, REMOTE_ADDR="10.8.0.1"
    )
    assert response.status_code == 302
    assert _stays_on_our_host(response["Location"], "http://testserver/accounts/login/"), response["Location"]
    # The login page does not carry the hostile target into its form either.
    page = Client().get(reverse("login"), {"next": variant})
    assert 'name="next" value="evil' not in page.content.decode()
    assert "evil.example" not in re.findall(r'name="next" value="([^"]*)"', page.content.decode())[0]


@pytest.mark.parametrize("variant", OPEN_REDIRECT_VARIANTS)
def test_logout_set_language_and_signed_in_login_next_never_leave_our_host(variant: str, researcher: User) -> None:
    client = Client()
    client.force_login(researcher)
    signed_in = client.get(reverse("login"), {"next": variant})
    assert signed_in.status_code == 302
    assert _stays_on_our_host(signed_in["Location"], "http://testserver/accounts/login/"), signed_in["Location"]
    language = client.post(reverse("set_language"), {"language": "ja", "next": variant})
    assert language.status_code == 302
    assert _stays_on_our_host(language["Location"], "http://testserver/i18n/setlang/"), language["Location"]
    logout = client.post(reverse("logout"), {"next": variant})
    assert logout.status_code == 302
    assert _stays_on_our_host(logout["Location"], "http://testserver/accounts/logout/"), logout["Location"]


def test_redirect_check_itself_rejects_an_offsite_location() -> None:
    assert not _stays_on_our_host("//evil.example", "http://testserver/")
    assert not _stays_on_our_host("/\\evil.example", "http://testserver/")
    assert _stays_on_our_host("/datasets/1/", "http://testserver/")


# --- sessions ------------------------------------------------------------------------------------------------------


def test_session_key_rotates_at_login_and_a_planted_key_is_not_adopted(researcher: User) -> None:
    client = Client()
    planted = client.session  # an anonymous session the attacker could have planted
    planted["marker"] = "before-login"
    planted.save()
    before = planted.session_key
    client.cookies[settings.SESSION_COOKIE_NAME] = before
    response = _login(client, "researcher", CAST_PASSWORD)
    assert response.status_code == 302
    after = client.cookies[settings.SESSION_COOKIE_NAME].value
    assert after and after != before
    assert not SessionStore().exists(before)
    assert SessionStore(session_key=after).get("_auth_user_id") == str(researcher.pk)


def test_logout_destroys_the_server_side_session(researcher: User) -> None:
    client = Client()
    assert _login(client, "researcher", CAST_PASSWORD).status_code == 302
    key = client.cookies[settings.SESSION_COOKIE_NAME].value
    assert client.get(reverse("home")).status_code == 200
    assert client.post(reverse("logout")).status_code == 302
    assert not SessionStore().exists(key)
    replay = Client()
    replay.cookies[settings.SESSION_COOKIE_NAME] = key
    home = replay.get(reverse("home"))
    assert home.status_code == 302 and home["Location"].startswith(reverse("login"))


def test_logout_by_get_is_refused(researcher: User) -> None:
    client = Client()
    client.force_login(researcher)
    assert client.get(reverse("logout")).status_code == 405
    assert client.get(reverse("home")).status_code == 200


def test_session_cookie_flags() -> None:
    assert settings.SESSION_COOKIE_HTTPONLY is True
    assert settings.SESSION_COOKIE_SAMESITE in {"Lax", "Strict"}


# --- default passwords ---------------------------------------------------------------------------------------------

PASSWORD_SETTERS = {"set_password", "create_user", "create_superuser"}
SCANNED_DIRS = ["annotations", "judging", "evalsite", "bench"]
DEMO_COMMAND = PROJECT_ROOT / "judging" / "management" / "commands" / "rundemo.py"


def literal_passwords_in(source: str) -> list[str]:
    """Calls that give an account a password written in the code."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name not in PASSWORD_SETTERS:
            continue
        candidates = [kw.value for kw in node.keywords if kw.arg == "password"]
        if name == "set_password" and node.args:
            candidates.append(node.args[0])
        if name in {"create_user", "create_superuser"} and len(node.args) >= 3:
            candidates.append(node.args[2])
        for value in candidates:
            if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value:
                found.append(f"line {node.lineno}: {name}(... {value.value!r})")
    return found


def test_password_scanner_finds_literal_passwords() -> None:
    assert literal_passwords_in("u.set_password('admin')")
    assert literal_passwords_in("User.objects.create_superuser('a', 'a@x', 'admin')")
    assert literal_passwords_in("User.objects.create_user(username='a', password='changeme')")
    assert not literal_passwords_in("u.set_password(secrets.token_urlsafe(12))")


def test_no_account_gets_a_password_written_in_the_code() -> None:
    offenders = {}
    for directory in SCANNED_DIRS:
        for path in sorted((PROJECT_ROOT / directory).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            found = literal_passwords_in(path.read_text(encoding="utf-8"))
            if found:
                offenders[str(path.relative_to(PROJECT_ROOT))] = found
    assert offenders == {}


def test_no_default_superuser_password_in_deployment_files() -> None:
    for name in ["docker-compose.yml", "README.md", ".ci/run", "Dockerfile", ".env", ".env.example"]:
        path = PROJECT_ROOT / name
        if path.exists():
            text = path.read_text(encoding="utf-8")
            assert "DJANGO_SUPERUSER_PASSWORD" not in text, name
            assert not re.search(r"createsuperuser[^\n]*--noinput", text), name


@pytest.mark.django_db
def test_rundemo_prints_fresh_random_passwords_that_work() -> None:
    runs = []
    for _ in range(2):
        out = io.StringIO()
        call_command("rundemo", setup_only=True, stdout=out)
        runs.append(dict(re.findall(r"^\s+(?:researcher|annotator|admin)\s+(\S+)\s+(\S+)\s*$", out.getvalue(), re.M)))
    first, second = runs
    assert set(first) == {"researcher", "annotator1", "annotator2", "annotator3", "site-admin"}
    # the researcher is a plain researcher; only the separate admin account administers the site
    assert User.objects.get(username="researcher").is_superuser is False
    assert User.objects.get(username="researcher").is_staff is True
    # ... who can still import data and open campaigns in the admin
    demo_researcher = User.objects.get(username="researcher")
    assert demo_researcher.has_perms(["annotations.add_dataset", "annotations.add_campaign", "judging.add_judgerun"])
    assert not demo_researcher.has_perm("auth.change_user")
    assert User.objects.get(username="site-admin").is_superuser is True
    for username, password in second.items():
        assert password != first[username]
        assert len(password) >= 16
        assert authenticate(username=username, password=password) is not None
        assert authenticate(username=username, password=first[username]) is None
        for guess in ["password", "admin", "demo", username, "changeme", "evalsite"]:
            assert authenticate(username=username, password=guess) is None
