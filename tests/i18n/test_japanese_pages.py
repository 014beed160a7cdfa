"""In Japanese mode no English is left on a page, except what the data itself says.

Every GET page of the project (found by walking the URL resolver) is rendered for every role that may see it, with
Accept-Language ja. The visible text and the human-readable attributes are split into words; a Latin word counts as
left-over English unless it comes from the data (any string stored in the database: dataset names, item texts,
usernames, model names) or is a term that stays Latin in Japanese technical writing (JSONL, CSV, API, a statistic's
name). The message catalogue itself must have no empty or fuzzy entry.
"""

import html
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.db import models
from django.test import Client

from tests.security.urlwalk import iter_endpoints
from tests.security.world import FullWorld

pytestmark = pytest.mark.django_db

CATALOGUE = Path(__file__).resolve().parents[2] / "locale" / "ja" / "LC_MESSAGES" / "django.po"

# Terms that Japanese researchers write in Latin letters: formats, protocols, statistics and their authors, products.
KEPT_LATIN_TEXT = """
    JSONL JSON CSV API URL ID IDs HTTP HTTPS CLI LLM LLMs htmx Celery Redis Postgres SQLite Django Markdown
    Krippendorff Krippendorff's alpha Fleiss Fleiss' kappa Cohen Cohen's Gwet Gwet's AC1 ICC Spearman Pearson Kendall
    tau rho MAE RMSE BLEU ROUGE ROUGE-L BERTScore chrF sacreBLEU FActScore G-Eval MT-Bench BM25 CI CIs OpenAI
    Prolific MTurk nan NaN min max Ctrl Cmd Enter Esc Tab Shift Alt Space Mac evalsite JP EN PDF SVG PNG UTC ms USD
    LLM-MATE rpm tpm lfqa-multiaspect llm-human-eval-jp gpt claude gemini llama qwen mistral deepseek
    Amazon Mechanical Turk HIT
    Benjamini Yekutieli Benjamini-Yekutieli Calderon Reichart Dror Bradley Terry Bradley-Terry Wald PPI PPI++
    Parquet TSV TOML zip pandas datasets Hugging Face mt-bench-human chatbot-arena helpsteer summeval evalsite-parquet
    Trust Escalate Chatbot Arena Davidson MQM Dawid Skene Dawid–Skene MACE Waudby-Smith Ramdas
"""
KEPT_LATIN = {word.casefold() for word in KEPT_LATIN_TEXT.split()}
LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z'’\-]{2,}")
SKIPPED_BLOCKS = re.compile(r"<(script|style|pre|code|textarea|svg)\b.*?</\1>", re.S | re.I)
READABLE_ATTRIBUTES = re.compile(r'\b(?:title|placeholder|aria-label|alt)="([^"]*)"', re.I)
TAG = re.compile(r"<[^>]+>")
OWN_ADMIN_PAGES = ("/progress/", "dataset/import/", "judgerun/launch/", "judgerun/<path:object_id>/change/")


def catalogue_entries() -> list[tuple[str, str, bool]]:
    """(msgid, msgstr, fuzzy) for each entry of the Japanese catalogue, plural forms joined."""
    entries = []
    text = CATALOGUE.read_text(encoding="utf-8")
    for block in text.split("\n\n"):
        lines = block.strip().splitlines()
        fuzzy = any(line.startswith("#,") and "fuzzy" in line for line in lines)
        msgid, msgstr, current = [], [], None
        for line in lines:
            if line.startswith("msgid "):
                current = msgid
                line = line[len("msgid ") :]
            elif line.startswith("msgid_plural "):
                current = None
                continue
            elif line.startswith("msgstr"):
                current = msgstr
                line = line.split(" ", 1)[1]
            elif not line.startswith('"'):
                continue
            if current is not None:
                current.append(line.strip()[1:-1])
        if msgid:
            entries.append(("".join(msgid), "".join(msgstr), fuzzy))
    return entries


def test_every_message_has_a_japanese_translation() -> None:
    entries = catalogue_entries()
    assert len(entries) > 300
    empty = [msgid for msgid, msgstr, _ in entries if msgid and not msgstr]
    fuzzy = [msgid for msgid, _, is_fuzzy in entries if msgid and is_fuzzy]
    assert empty == [], f"{len(empty)} messages without a Japanese translation: {empty[:20]}"
    assert fuzzy == [], f"fuzzy translations (not used by gettext): {fuzzy[:20]}"


def test_compiled_catalogue_is_current_and_well_formed(tmp_path: Path) -> None:
    """The .mo the app loads is the .po compiled with format checks: a stale or malformed one fails here."""
    compiled = tmp_path / "django.mo"
    result = subprocess.run(
        ["msgfmt", "--check", "-o", str(compiled), str(CATALOGUE)],  # noqa: S607 - gettext's compiler from PATH
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert compiled.read_bytes() == CATALOGUE.with_suffix(".mo").read_bytes(), "django.mo is stale: run msgfmt"


def data_words() -> set[str]:
    """Every Latin word stored in the database: a page may repeat data in any language."""
    words: set[str] = set()
    for model in apps.get_models():
        text_fields = [
            field.attname
            for field in model._meta.concrete_fields
            if isinstance(field, models.CharField | models.TextField | models.JSONField)
        ]
        if not text_fields:
            continue
        for row in model._default_manager.values_list(*text_fields):
            for value in row:
                if value is not None:
                    words.update(w.casefold() for w in LATIN_WORD.findall(str(value)))
    return words


def readable_text(body: str) -> str:
    attributes = " ".join(READABLE_ATTRIBUTES.findall(body))
    visible = TAG.sub(" ", SKIPPED_BLOCKS.sub(" ", body))
    return html.unescape(f"{visible} {attributes}")


def english_left(body: str, allowed: set[str]) -> list[str]:
    return sorted(
        {
            word
            for word in LATIN_WORD.findall(readable_text(body))
            if word.casefold().strip("'’-") not in allowed and word.casefold() not in allowed
        }
    )


def japanese_pages(world: FullWorld) -> list[tuple[str, str, Any]]:
    """(role, path, client) for every HTML page a researcher or an annotator may open."""
    clients = {}
    for role in ("researcher", "annotator"):
        client = Client(HTTP_ACCEPT_LANGUAGE="ja")
        client.force_login(world.roles[role])
        clients[role] = client
    pages = []
    for endpoint in iter_endpoints():
        if endpoint.route.startswith(("api/", "help/<", "i18n/", "accounts/logout")):
            continue
        # Django's own admin pages are translated by Django; the project's admin pages are checked here.
        if endpoint.route.startswith("admin/") and not any(part in endpoint.route for part in OWN_ADMIN_PAGES):
            continue
        params = world.params_for(endpoint.route)
        if "object_id" in endpoint.parameters and "judgerun" in endpoint.route:
            params = {**params, "object_id": str(world.run.pk)}
        target = endpoint.path_with(params) or endpoint.path
        for role, client in clients.items():
            pages.append((role, target, client, world.query_for(endpoint.route)))
    return pages


def judge_config_vocabulary() -> set[str]:
    """The judge config form shows the config's own keys and values as they are written in its JSON (method and
    metric names, scoring modes, the provider settings' names and examples), in every language."""
    from judging.admin_forms import EDITOR_FIELDS
    from judging.config import METHODS
    from judging.methods.judge_settings import LOGPROB_SCORING_MODES, OUTPUT_FORMATS
    from judging.methods.metrics import BLEU_TOKENIZERS, METRICS

    names = [*METHODS, *METRICS, *BLEU_TOKENIZERS, *LOGPROB_SCORING_MODES, *OUTPUT_FORMATS, "per_item", "baseline"]
    names += [key for _field, (key, _kind) in EDITOR_FIELDS.items()]
    # Provider names, the api-version parameter, region and location examples, and the {summary} placeholder.
    names += [
        "Azure",
        "Bedrock",
        "Google",
        "Cloud",
        "litellm",
        "api-version",
        "us-east-1",
        "us-central1",
        "global",
        "summary",
    ]
    return {word.casefold() for name in names for word in LATIN_WORD.findall(name.replace("_", " "))}


def test_no_english_left_on_japanese_pages(full_world: FullWorld) -> None:
    allowed = KEPT_LATIN | data_words() | judge_config_vocabulary()
    problems = []
    seen = 0
    for role, target, client, query in japanese_pages(full_world):
        response = client.get(target, query)
        content_type = response.get("Content-Type", "")
        if not content_type.startswith("text/html") or response.streaming:
            continue
        seen += 1
        body = response.content.decode()
        assert '<html lang="ja"' in body or "<html" not in body, f"{target} as {role} is not in Japanese mode"
        left = english_left(body, allowed)
        if left:
            problems.append(f"{target} as {role}: {', '.join(left)}")
    assert seen > 30
    assert problems == [], "\n".join(problems)
