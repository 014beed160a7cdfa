"""Help pages: the reference documents under docs/, rendered in the site's layout for every signed-in user.

The files are the single source: the repository shows them as they are, and the site renders the same text, with
links between documents (`cli.md`) pointed at their help page (`/help/cli/`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET

from annotations.text.markdown import render_markdown

# Reading order on the index; documents not listed here follow in name order.
ORDER = (
    "research",
    "campaigns",
    "formats",
    "rubric",
    "task-page",
    "annotating",
    "crowd",
    "quality",
    "adjudication",
    "judges",
    "judge-config",
    "factscore",
    "statistics",
    "reports",
    "cli",
    "languages",
    "deployment",
    "security",
    "operations",
    "benchmarks",
    "architecture",
)
# The documents are written in English; their names in the index follow the reader's language.
TITLES = {
    "formats": gettext_lazy("Dataset format (JSONL) and exports"),
    "rubric": gettext_lazy("Rubric"),
    "annotating": gettext_lazy("Annotating"),
    "crowd": gettext_lazy("Crowd studies"),
    "quality": gettext_lazy("Rater quality"),
    "adjudication": gettext_lazy("Adjudication"),
    "judge-config": gettext_lazy("Judge config"),
    "statistics": gettext_lazy("Statistics"),
    "cli": gettext_lazy("Command line"),
    "mapped-import": gettext_lazy("Importing other tables"),
    "gate": gettext_lazy("Release gates"),
    "security": gettext_lazy("Security"),
    "operations": gettext_lazy("Operations"),
    "architecture": gettext_lazy("Architecture"),
    "task-page": gettext_lazy("The task page"),
    "campaigns": gettext_lazy("Annotation campaigns"),
    "research": gettext_lazy("The research area"),
    "judges": gettext_lazy("Judges and judge runs"),
    "factscore": gettext_lazy("FActScore"),
    "reports": gettext_lazy("Statistics reports (JSON)"),
    "languages": gettext_lazy("Languages"),
    "deployment": gettext_lazy("Deployment"),
    "benchmarks": gettext_lazy("Benchmarks"),
}
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
_DOCUMENT_LINK = re.compile(r"\]\((?:\./)?([a-z0-9][a-z0-9-]{0,63})\.md(#[^)\s]*)?\)")


@dataclass(frozen=True)
class HelpDocument:
    slug: str
    title: str
    path: Path


def docs_dir() -> Path:
    return Path(settings.BASE_DIR) / "docs"


def _title(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def help_documents() -> list[HelpDocument]:
    found = {path.stem: path for path in docs_dir().glob("*.md") if _SLUG.match(path.stem)}
    ordered = [slug for slug in ORDER if slug in found] + sorted(set(found) - set(ORDER))
    return [
        HelpDocument(slug=slug, title=str(TITLES.get(slug) or _title(found[slug])), path=found[slug])
        for slug in ordered
    ]


def _site_links(text: str) -> str:
    prefix = reverse("help-index")
    return _DOCUMENT_LINK.sub(lambda m: f"]({prefix}{m.group(1)}/{m.group(2) or ''})", text)


@require_GET
@login_required
def help_index(request: HttpRequest) -> HttpResponse:
    return render(request, "help/index.html", {"documents": help_documents()})


@require_GET
@login_required
def help_page(request: HttpRequest, slug: str) -> HttpResponse:
    document = next((d for d in help_documents() if d.slug == slug), None)
    if document is None:
        raise Http404("no such help page")
    text = _site_links(document.path.read_text(encoding="utf-8"))
    body = render_markdown(text, site_links=reverse("help-index"))
    return render(request, "help/page.html", {"document": document, "body": body, "documents": help_documents()})
