from django import template
from django.utils.safestring import SafeString

from annotations.markdown import render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str | None) -> SafeString:
    """Sanitised HTML for untrusted markdown (see annotations.markdown)."""
    return render_markdown(text)
