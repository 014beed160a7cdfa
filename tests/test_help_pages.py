"""Help pages: the reference documents under docs/, served to signed-in users in the site's layout."""

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from evalsite.help_pages import ORDER, help_documents
from tests.conftest import client_for

pytestmark = pytest.mark.django_db
DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_every_reference_document_is_listed_in_reading_order(researcher: User) -> None:
    response = client_for(researcher).get(reverse("help-index"))
    assert response.status_code == 200
    slugs = [document.slug for document in help_documents()]
    present = [slug for slug in ORDER if (DOCS / f"{slug}.md").exists()]
    assert slugs[: len(present)] == present
    assert {"formats", "rubric", "judge-config", "cli"} <= set(slugs)
    html = response.content.decode()
    for document in help_documents():
        assert reverse("help-page", args=[document.slug]) in html and document.title in html


@pytest.mark.parametrize("role", ["researcher", "annotator1", "outsider"])
def test_a_page_renders_its_markdown_with_links_between_documents(role: str, request: pytest.FixtureRequest) -> None:
    user = request.getfixturevalue(role)
    response = client_for(user).get(reverse("help-page", args=["cli"]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1>Command line</h1>" in html and "<table>" in html
    # "[JSONL file](formats.md)" in the file becomes a link to its help page
    assert f'href="{reverse("help-page", args=["formats"])}"' in html
    assert 'aria-current="page"' in html


def test_help_needs_a_signed_in_user() -> None:
    for url in (reverse("help-index"), reverse("help-page", args=["cli"])):
        response = Client().get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_help_refuses_other_methods(researcher: User) -> None:
    client = client_for(researcher)
    assert client.post(reverse("help-index")).status_code == 405
    assert client.post(reverse("help-page", args=["cli"])).status_code == 405


@pytest.mark.parametrize("slug", ["nope", "..", "README", "cli.md", "%2e%2e%2fevalsite%2fsettings"])
def test_unknown_pages_are_not_found(researcher: User, slug: str) -> None:
    assert client_for(researcher).get(f"/help/{slug}/").status_code == 404


def test_the_menu_links_to_help(annotator1: User) -> None:
    html = client_for(annotator1).get(reverse("home")).content.decode()
    assert f'href="{reverse("help-index")}"' in html


def test_every_judge_config_field_is_documented() -> None:
    from judging.methods.judge_settings import JudgeSettings

    reference = (DOCS / "judge-config.md").read_text(encoding="utf-8")
    undocumented = [name for name in JudgeSettings.model_fields if f"`{name}`" not in reference]
    assert undocumented == []


def test_nothing_cites_a_design_document_the_repository_does_not_hold() -> None:
    # Spelt in two pieces so that this file is not a hit of the search it stands for.
    word = "DES" + "IGN"
    root = DOCS.parent
    tops = [top for top in root.iterdir() if not top.name.startswith(".") and top.name != "node_modules"]
    sources = [
        path
        for top in tops
        for pattern in ("*.py", "*.html", "*.md")
        for path in ([top] if top.is_file() and top.match(pattern) else top.rglob(pattern) if top.is_dir() else [])
        if "artifacts" not in path.parts
    ]
    assert len(sources) > 100
    citing = [str(path.relative_to(root)) for path in sources if word in path.read_text(encoding="utf-8")]
    assert citing == []
