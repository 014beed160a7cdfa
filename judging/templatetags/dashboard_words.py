"""Template filters that show the statistics' English wording in the reader's language (see analysis.wording)."""

from django import template

from judging.analysis.wording import phrase as phrase_of

register = template.Library()


@register.filter
def phrase(text: object) -> str:
    return phrase_of(str(text))
