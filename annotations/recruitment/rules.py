"""Screening questions as a researcher writes them, and the rule that decides who passes.

Written one question per line: the question, then its choices, separated by "|"; a "*" before a choice marks it
as accepted, e.g. ``Are you a native English speaker? | *Yes | No``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext as _

MAX_QUESTIONS = 20
MAX_CHOICES = 12
MAX_TEXT_CHARS = 500


class ScreeningInvalid(ValueError):
    """Screening questions that cannot be used, with the line that is wrong."""


def parse_questions(text: str) -> list[dict[str, Any]]:
    questions = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split("|")]
        question, raw_choices = parts[0], [p for p in parts[1:] if p and p != "*"]
        if not question or len(raw_choices) < 2:
            raise ScreeningInvalid(
                _("Line %(n)d: write the question, then at least two choices, separated by “|”.") % {"n": number}
            )
        choices = [c.lstrip("*").strip() for c in raw_choices]
        accepted = [c.lstrip("*").strip() for c in raw_choices if c.startswith("*")]
        if not accepted:
            raise ScreeningInvalid(_("Line %(n)d: mark the accepted choices with “*”.") % {"n": number})
        if len(set(choices)) != len(choices):
            raise ScreeningInvalid(_("Line %(n)d: a choice appears twice.") % {"n": number})
        if len(choices) > MAX_CHOICES or any(len(t) > MAX_TEXT_CHARS for t in [question, *choices]):
            raise ScreeningInvalid(_("Line %(n)d is too long.") % {"n": number})
        questions.append({"text": question, "choices": choices, "accepted": accepted})
    if len(questions) > MAX_QUESTIONS:
        raise ScreeningInvalid(_("At most %(n)d screening questions.") % {"n": MAX_QUESTIONS})
    return questions


def questions_as_text(questions: list[dict[str, Any]]) -> str:
    return "\n".join(
        " | ".join([q["text"], *(("*" if c in q["accepted"] else "") + c for c in q["choices"])]) for q in questions
    )


def screening_passes(*, questions: list[dict[str, Any]], rule: str, answers: Mapping[int, str]) -> bool:
    """`answers` maps a question's index to the choice picked. Under "all" every question must get an accepted
    choice, under "any" at least one; an unanswered question or a choice that is not offered is not accepted."""
    accepted = [answers.get(i) in q["accepted"] for i, q in enumerate(questions)]
    if not accepted:
        return True
    return any(accepted) if rule == "any" else all(accepted)
