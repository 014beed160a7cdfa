"""Parse a page and report every way a hostile payload could have become active markup.

    from tests.security.html_checks import assert_no_active_payload
    assert_no_active_payload(response.content, where="annotator task page")

The checks are structural (parsed with html.parser, as a browser would tokenise the bytes), so escaped text that
merely *shows* a payload passes, and a payload that became an element, attribute or URL fails.
"""

import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urlsplit

from tests.security.hostile import EVALUATED_TEMPLATE_FORMS, EVIL_HOST, PWN_ATTRIBUTE, PWN_FLAG

URL_ATTRIBUTES = {
    "href",
    "src",
    "action",
    "formaction",
    "data",
    "poster",
    "background",
    "xlink:href",
    "codebase",
    "cite",
    "longdesc",
    "ping",
    "manifest",
    "lowsrc",
    "dynsrc",
}
HTMX_REQUEST_ATTRIBUTES = {"hx-get", "hx-post", "hx-put", "hx-patch", "hx-delete"}
HTMX_SCRIPTABLE_ATTRIBUTES = {"hx-vals", "hx-vars", "hx-headers", "hx-trigger", "hx-request", "hx-on"}
DANGEROUS_SCHEMES = ("javascript:", "vbscript:", "data:text/html", "data:image/svg", "data:application")
ALWAYS_FORBIDDEN_TAGS = {"iframe", "frame", "object", "embed", "applet", "base", "portal"}
JSON_SCRIPT_TYPES = {"application/json", "application/ld+json", "importmap"}
_STRIP_FOR_SCHEME = re.compile(r"[\x00-\x20\x7f]+")


def _normalise_url(value: str) -> str:
    # Browsers drop control characters and whitespace inside a scheme and decode entities, e.g. "java\tscript:".
    return _STRIP_FOR_SCHEME.sub("", html.unescape(value)).lower()


@dataclass
class Finding:
    line: int
    problem: str
    detail: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.problem}: {self.detail[:200]}"


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.findings: list[Finding] = []
        self.texts: list[str] = []
        self.attribute_values: list[str] = []
        self.open_script: dict[str, str] | None = None
        self.open_style = False
        self.script_text: list[str] = []

    def _add(self, problem: str, detail: str) -> None:
        self.findings.append(Finding(self.getpos()[0], problem, detail))

    def _check_tag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name.lower(): (value or "") for name, value in attrs}
        shown = self.get_starttag_text() or tag
        if PWN_ATTRIBUTE in names or f"data-{PWN_ATTRIBUTE}" in names:
            self._add("payload element became markup", shown)
        if tag in ALWAYS_FORBIDDEN_TAGS:
            self._add(f"<{tag}> element", shown)
        if tag == "meta" and names.get("http-equiv", "").lower() == "refresh":
            self._add("meta refresh", shown)
        for name, value in names.items():
            self.attribute_values.append(value)
            bare = name.removeprefix("data-")
            if name.startswith("on"):
                self._add("inline event handler attribute", f"{name}={value!r} in {shown}")
            if bare.startswith("hx-on"):
                self._add("htmx inline handler attribute", f"{name}={value!r} in {shown}")
            if name == "srcdoc":
                self._add("srcdoc attribute", shown)
            if name == "style" and (PWN_FLAG in value or "expression(" in value.lower() or "url(" in value.lower()):
                self._add("style attribute carrying a payload", shown)
            if name in URL_ATTRIBUTES or name.endswith(":href"):
                normalised = _normalise_url(value)
                if normalised.startswith(DANGEROUS_SCHEMES):
                    self._add("script URL", f"{name}={value!r} in {shown}")
                # A plain link elsewhere is allowed (markdown may link out); loading or posting elsewhere is not.
                is_link = name == "href" and tag in {"a", "area"}
                if EVIL_HOST in urlsplit(normalised).netloc and not is_link:
                    self._add("URL to an attacker host", f"{name}={value!r} in {shown}")
            if bare in HTMX_REQUEST_ATTRIBUTES:
                normalised = _normalise_url(value)
                if normalised.startswith(("http:", "https:", "//")) or normalised.startswith(DANGEROUS_SCHEMES):
                    self._add("htmx request to another origin or a script URL", f"{name}={value!r}")
                if EVIL_HOST in urlsplit(normalised).netloc:
                    self._add("htmx request to an attacker host", f"{name}={value!r}")
            if bare in HTMX_SCRIPTABLE_ATTRIBUTES:
                stripped = value.strip().lower()
                if stripped.startswith(("js:", "javascript:")) or PWN_FLAG in value or "alert(" in value:
                    self._add("htmx attribute that evaluates script", f"{name}={value!r}")
        if tag == "script":
            script_type = names.get("type", "").strip().lower()
            src = names.get("src")
            if src is not None:
                if not src.startswith("/") or src.startswith("//"):
                    self._add("script from another origin", shown)
            elif script_type not in JSON_SCRIPT_TYPES:
                self._add("inline script (the CSP forbids it; data must never reach one)", shown)
            self.open_script = names
            self.script_text = []
        if tag == "style":
            self.open_style = True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._check_tag(tag.lower(), attrs)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._check_tag(tag.lower(), attrs)
        if tag.lower() == "script":
            self.open_script = None
        if tag.lower() == "style":
            self.open_style = False

    def handle_endtag(self, tag: str) -> None:
        if tag.lower() == "script" and self.open_script is not None:
            text = "".join(self.script_text)
            if PWN_FLAG in text or "alert(" in text:
                script_type = (self.open_script.get("type") or "").lower()
                if script_type not in JSON_SCRIPT_TYPES:
                    self._add("script text carrying a payload", text)
            self.open_script = None
        if tag.lower() == "style":
            self.open_style = False

    def handle_data(self, data: str) -> None:
        if self.open_script is not None:
            self.script_text.append(data)
            return
        if self.open_style and (PWN_FLAG in data or "display:none" in data.replace(" ", "")):
            self._add("style element carrying a payload", data)
        self.texts.append(data)


def find_active_payloads(page: bytes | str, *, secret_key: str | None = None) -> list[Finding]:
    text = page.decode("utf-8", errors="replace") if isinstance(page, bytes) else page
    collector = _Collector()
    collector.feed(text)
    collector.close()
    findings = list(collector.findings)
    visible = "".join(collector.texts) + "\n" + "\n".join(collector.attribute_values)
    for evaluated in EVALUATED_TEMPLATE_FORMS:
        if evaluated in visible:
            findings.append(Finding(0, "template syntax from data was evaluated", evaluated))
    shown_text = "".join(collector.texts)
    for match in re.finditer(r"TPLD(.)", shown_text):
        if match.group(1) not in "{…":
            context = shown_text[match.start() : match.end() + 40]
            findings.append(Finding(0, "template tag from data was evaluated", context))
    if secret_key is None:
        from django.conf import settings

        secret_key = settings.SECRET_KEY
    if secret_key and secret_key in text:
        findings.append(Finding(0, "SECRET_KEY appears in the page", "(value withheld)"))
    return findings


def assert_no_active_payload(page: bytes | str, *, where: str = "page", secret_key: str | None = None) -> None:
    findings = find_active_payloads(page, secret_key=secret_key)
    if findings:
        listed = "\n  ".join(str(f) for f in findings[:30])
        raise AssertionError(f"{where}: {len(findings)} active payload(s)\n  {listed}")


class _SelectOptions(HTMLParser):
    """Collects the option values of one named select, so a primary key that happens to equal another select's
    option value (an aspect's, say) is not mistaken for an offered account."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.inside = False
        self.found = False
        self.values: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "select":
            self.inside = attributes.get("name") == self.name
            self.found = self.found or self.inside
        elif tag == "option" and self.inside and attributes.get("value"):
            self.values.add(str(attributes["value"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self.inside = False


def offered(page: str, field: str) -> set[str]:
    parser = _SelectOptions(field)
    parser.feed(page)
    assert parser.found, f"the page has no select named {field!r}"
    return parser.values
