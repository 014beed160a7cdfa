"""A researcher runs a study without the admin: no page a researcher may open links or posts to /admin/, and the
menu offers the admin only to the operators who run the site (superusers). Every URL pattern is walked, so a page
added later is covered without editing a list."""

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.security.urlwalk import iter_endpoints
from tests.security.world import FullWorld

pytestmark = pytest.mark.django_db

ADMIN_TARGET = re.compile(r"""(?:href|action|hx-get|hx-post)=["'](?:https?://[^/"']+)?/admin/""")


def researcher_pages(world: FullWorld) -> list[tuple[str, dict[str, str]]]:
    pages = []
    for endpoint in iter_endpoints():
        if endpoint.route.startswith(("admin/", "api/", "i18n/", "accounts/logout", "help/<")):
            continue
        target = endpoint.path_with(world.params_for(endpoint.route)) or endpoint.path
        pages.append((target, world.query_for(endpoint.route)))
    return pages


def test_no_researcher_page_leads_to_the_admin(full_world: FullWorld) -> None:
    researcher = full_world.roles["researcher"]
    assert researcher.is_staff and not researcher.is_superuser
    client = Client()
    client.force_login(researcher)
    seen, problems = 0, []
    for target, query in researcher_pages(full_world):
        response = client.get(target, query)
        if response.status_code != 200 or not response.get("Content-Type", "").startswith("text/html"):
            continue
        if response.streaming:
            continue
        seen += 1
        found = ADMIN_TARGET.findall(response.content.decode())
        if found:
            problems.append(f"{target}: {len(found)} link(s) to /admin/")
    assert seen > 30
    assert problems == [], "\n".join(problems)


def test_the_menu_shows_the_admin_to_operators_only(full_world: FullWorld) -> None:
    researcher = Client()
    researcher.force_login(full_world.roles["researcher"])
    assert 'href="/admin/"' not in researcher.get("/research/").content.decode()
    operator = User.objects.create_superuser("operator", password="an-operator-passphrase-1")
    admin_client = Client()
    admin_client.force_login(operator)
    assert 'href="/admin/"' in admin_client.get("/research/").content.decode()
