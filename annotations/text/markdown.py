"""Markdown for guidelines, prompts and answers: rendered by markdown-it-py with raw HTML off, then cleaned by nh3.

Two layers on purpose: markdown-it escapes HTML typed into the text and refuses javascript: links, and nh3 (the
ammonia sanitizer) keeps only the tags and attributes listed here, so even a renderer bug cannot emit script,
event handlers, styles, htmx attributes or images that fetch from elsewhere.
"""

from collections.abc import Callable

import nh3
from django.utils.html import linebreaks
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_renderer = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)
# Answers are text a model wrote: a single line break in them is meant (one step per line), so Markdown answers
# keep it as a <br> where CommonMark would join the lines into one paragraph.
_answer_renderer = MarkdownIt(
    "commonmark", {"html": False, "linkify": False, "typographer": False, "breaks": True}
).enable(["table", "strikethrough"])

ANSWER_AS_MARKDOWN = "markdown"  # annotations.models.AnswerFormat.MARKDOWN; anything else is plain text

ALLOWED_TAGS = {
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "li", "ol", "p",
    "pre", "s", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
# No style attributes at all: the CSP forbids inline styles, so table alignment is dropped.
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}


SAFE_LINK_PREFIXES = ("http://", "https://", "mailto:", "#")


def _keep_only_absolute_links(element: str, attribute: str, value: str) -> str | None:
    # Relative hrefs from dataset text (":", "x:y", "//host") resolve against our own site, so only absolute web
    # links, mail links and in-page anchors survive.
    if element == "a" and attribute == "href" and not value.strip().lower().startswith(SAFE_LINK_PREFIXES):
        return None
    return value


def render_markdown(text: str | None, *, site_links: str | None = None) -> SafeString:
    """Safe HTML for untrusted markdown.

    `site_links` is a path prefix (such as "/help/") whose links are kept too: only the project's own documents
    link inside the site; dataset text never gets that."""

    def keep_link(element: str, attribute: str, value: str) -> str | None:
        if site_links and element == "a" and attribute == "href" and value.startswith(site_links):
            return value
        return _keep_only_absolute_links(element, attribute, value)

    return _clean(_renderer.render(text or ""), keep_link)


def render_answer(text: str | None, answer_format: str) -> SafeString:
    """Safe HTML for an answer as the model wrote it: plain text with its line breaks (a blank line starts a
    paragraph, a single one breaks the line), or Markdown with single line breaks kept, by the dataset's choice."""
    if not text:
        return SafeString("")
    as_markdown = answer_format == ANSWER_AS_MARKDOWN
    html = _answer_renderer.render(text) if as_markdown else linebreaks(text, autoescape=True)
    return _clean(html, _keep_only_absolute_links)


def _clean(html: str, keep_link: Callable[[str, str, str], str | None]) -> SafeString:
    """The only place that marks dataset text safe, after sanitising it."""
    cleaned = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
        attribute_filter=keep_link,
    )
    return mark_safe(cleaned)  # noqa: S308 - nh3 output restricted to the allowlist above  # nosec B308 B703
