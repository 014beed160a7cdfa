from django import template
from django.utils.safestring import SafeString

from annotations.text.markdown import render_answer, render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str | None) -> SafeString:
    """Sanitised HTML for untrusted markdown (see annotations.text.markdown)."""
    return render_markdown(text)


@register.filter(name="answer")
def answer_filter(text: str | None, answer_format: str) -> SafeString:
    """Sanitised HTML for an answer, line breaks kept, as plain text or Markdown by the dataset's answer format."""
    return render_answer(text, answer_format)
