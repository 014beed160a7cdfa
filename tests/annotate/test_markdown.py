from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotations.text.markdown import ALLOWED_ATTRIBUTES, ALLOWED_TAGS, render_markdown


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, attrs))


def test_markdown_renders_structure():
    html = render_markdown(
        "# Title\n\n**bold** and `code`\n\n```py\nprint('<b>')\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    )
    assert "<h1>Title</h1>" in html and "<strong>bold</strong>" in html and "<code>code</code>" in html
    assert "print(&#39;&lt;b&gt;&#39;)" in html or "print('&lt;b&gt;')" in html
    assert "<table>" in html and "<td>1</td>" in html


def test_markdown_neutralises_html_and_links():
    html = render_markdown(
        "<script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n\n[x](javascript:alert(1)) "
        '<div hx-get="/accounts/logout/" hx-trigger="load">hx</div>\n\n[ok](https://example.org "t")\n\n'
        "![pic](https://evil.example/p.png) {{7*7}}"
    )
    parser = _Elements()
    parser.feed(str(html))
    assert {tag for tag, _ in parser.found} == {"p", "a"}
    assert [dict(attrs)["href"] for tag, attrs in parser.found if tag == "a"] == ["https://example.org"]
    assert "&lt;script&gt;" in html and "&lt;img" in html
    assert '<a href="https://example.org" title="t" rel="noopener noreferrer nofollow">ok</a>' in html
    assert "{{7*7}}" in html


def test_markdown_of_nothing():
    assert render_markdown(None) == "" and render_markdown("") == ""


PIECES = [
    *"<>\"'=/:;()[]{}!#*`-_ \nabcdefijlmnoprstvx&",
    "<script>", "<img src=x onerror=a()>", "javascript:", "[l](", "hx-get=", "<svg onload=a()>", "```", "\n\n",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=60).map("".join))
def test_markdown_output_keeps_to_the_allowlist(text):
    parser = _Elements()
    parser.feed(str(render_markdown(text)))
    for tag, attrs in parser.found:
        assert tag in ALLOWED_TAGS
        for name, value in attrs:
            assert name in ALLOWED_ATTRIBUTES.get(tag, set()) | {"rel"}
            if name == "href":
                assert (value or "").strip().lower().startswith(
                    ("http:", "https:", "mailto:", "#", "/")
                ) or ":" not in (value or "")


@pytest.mark.parametrize("target", [":", "x:y", "//evil.example/x", "/admin/", "relative/path", "data:text/html,x"])
def test_links_other_than_absolute_web_mail_or_anchor_lose_their_href(target):
    html = str(render_markdown(f"[label]({target})"))
    assert "href" not in html and "label" in html


@pytest.mark.parametrize("target", ["https://example.org/a?b=1", "http://example.org", "mailto:a@example.org", "#top"])
def test_absolute_web_mail_and_anchor_links_are_kept(target):
    assert f'href="{target}"' in str(render_markdown(f"[label]({target})")).replace("&amp;", "&")
