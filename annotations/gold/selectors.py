"""Reads for gold items and attention checks: which task of an annotator's queue is gold, and which gold task.

The rule: an annotator's tasks, counted in the order they were handed out, fall into blocks of round(1 / gold_rate);
in each block one position, drawn from the campaign's secret seed, the annotator and the block number, is a gold
task. So every annotator gets gold at the configured rate, at places they cannot predict, and a rerun of the same
campaign hands it out at the same places. When the annotator has had every gold task, or has no regular task left
(gold never keeps someone busy on its own), the position gets a regular task.
"""

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.utils.translation import get_language, ngettext
from django.utils.translation import gettext as _

from annotations.gold.rules import GoldSpan, SpanGoldVerdict, expected_span_pairs, span_gold_verdict
from annotations.models import Aspect, AspectKind, Campaign, GoldItem, GoldKind, Item, Rating, Response, Task
from annotations.roles import AnyUser
from annotations.slots import seeded_random
from annotations.slots.campaign_slots import tasks_open_to
from annotations.spans.answers import token_spans
from annotations.spans.error_spans import Span
from annotations.spans.schemes import SpanScheme


def gold_block_size(rate: float) -> int:
    """Tasks per block holding one gold task; 0 when the campaign hands out no gold."""
    if rate <= 0:
        return 0
    return max(1, round(1 / rate))


def gold_is_due(*, campaign: Campaign, user_id: int, handed_out: int) -> bool:
    """Whether the annotator's next task (they have had `handed_out` so far) is a gold position."""
    size = gold_block_size(campaign.gold_rate)
    if not size:
        return False
    block, place = divmod(handed_out, size)
    return place == seeded_random(campaign.shuffle_seed, "gold", user_id, block).randrange(size)


def gold_tasks_left(*, campaign: Campaign, user: AnyUser) -> int:
    """Gold tasks the annotator has never held or skipped: those they may still be handed."""
    return (
        Task.objects.filter(campaign=campaign, is_gold=True)
        .exclude(assignments__annotator_id=user.pk)
        .exclude(skips__annotator_id=user.pk)
        .count()
    )


def gold_still_due(*, campaign: Campaign, user_id: int, handed_out: int, regular_left: int, gold_left: int) -> int:
    """How many gold tasks the rule above will still hand the annotator, who has had `handed_out` tasks, if the
    `regular_left` regular tasks open to them now all come to them: the gold positions ahead, walked block by block,
    up to the one where no regular task is left (gold is never handed out then) or no gold task is."""
    size = gold_block_size(campaign.gold_rate)
    golds, position = 0, handed_out
    while size and regular_left > 0 and gold_left > 0:
        block = position // size
        gold_at = block * size + seeded_random(campaign.shuffle_seed, "gold", user_id, block).randrange(size)
        block_end = (block + 1) * size
        if position <= gold_at:
            regular_before = gold_at - position
            if regular_left <= regular_before:
                break
            golds, gold_left = golds + 1, gold_left - 1
            regular_left -= regular_before + (block_end - gold_at - 1)
        else:
            regular_left -= block_end - position
        position = block_end
    return golds


def gold_task_next(*, campaign: Campaign, user: AnyUser) -> Task | None:
    """The first gold task in hand-out order that the annotator has never held or skipped, and may still rate."""
    return (
        Task.objects.filter(campaign=campaign, is_gold=True)
        .filter(tasks_open_to(campaign=campaign, user_id=int(user.pk or 0)))
        .exclude(assignments__annotator_id=user.pk)
        .exclude(skips__annotator_id=user.pk)
        .order_by("position")
        .first()
    )


def gold_items_of_dataset(dataset_id: int) -> QuerySet[GoldItem]:
    return GoldItem.objects.filter(item__dataset_id=dataset_id).select_related("item").order_by("item__position")


def item_rating_count(item: Item) -> int:
    """The ratings of the item's answers, imported and collected: the statistics leave them all out while the item
    is gold (they measure raters then), and count them again once it is unmarked."""
    return Rating.objects.filter(response__turn__item=item).count()


def gold_for_item(item: Item) -> GoldItem | None:
    return GoldItem.objects.filter(item=item).first()


def attention_instructions(*, task: Task, response_ids: list[int]) -> dict[int, str]:
    """An attention check's instruction by the response it applies to: the answers of the systems its expected
    values name, or every answer of the task when it names none. Empty for any other task."""
    check = (
        GoldItem.objects.filter(item__turns__pk=task.turn_id, kind=GoldKind.ATTENTION)
        .values_list("instruction", "expected")
        .first()
    )
    if check is None:
        return {}
    instruction, expected = check
    named = set(expected or {})
    systems = dict(Response.objects.filter(pk__in=response_ids).values_list("pk", "system__key"))
    return {pk: instruction for pk in response_ids if not named or systems.get(pk) in named}


def gold_item_handed_out(item: Item) -> bool:
    """Whether some campaign handed the item's gold task to anyone."""
    return Task.objects.filter(turn__item=item, is_gold=True, assignments__annotator__isnull=False).exists()


@dataclass(frozen=True)
class SpanGoldAnswer:
    """One rater's answer on a span aspect of a gold item, judged against the spans it expects."""

    rater: str
    system: str
    aspect: str
    verdict: SpanGoldVerdict
    reason: str


def _quote(text: str, span: GoldSpan, scheme: SpanScheme | None) -> str:
    language = get_language() or "en"
    category = scheme.label(span.category, language) if scheme else span.category
    severity = f", {scheme.label(span.severity, language) if scheme else span.severity}" if span.severity else ""
    return f"«{text[span.start : span.end]}» ({category}{severity})"


def span_gold_reason(verdict: SpanGoldVerdict, text: str, scheme: SpanScheme | None = None) -> str:
    """Why the answer passed or failed, in the researcher's language (categories and severities by the scheme's
    labels in that language)."""
    if not verdict.answered:
        return _("Not answered (N/A).")
    if verdict.expected == 0:
        if verdict.passed:
            return _("No error expected, and none marked.")
        return ngettext(
            "No error expected, but %(n)d error marked.", "No error expected, but %(n)d errors marked.", verdict.extra
        ) % {"n": verdict.extra}
    if verdict.passed:
        reason = ngettext(
            "The %(n)d expected error was found.", "All %(n)d expected errors were found.", verdict.expected
        ) % {"n": verdict.expected}
    else:
        reason = _("%(matched)d of %(n)d expected errors found; missing: %(missing)s.") % {
            "matched": verdict.matched,
            "n": verdict.expected,
            "missing": "; ".join(_quote(text, span, scheme) for span in verdict.missing),
        }
    if verdict.extra:
        reason += " " + ngettext(
            "%(n)d more error marked that the gold does not list.",
            "%(n)d more errors marked that the gold does not list.",
            verdict.extra,
        ) % {"n": verdict.extra}
    return reason


def _rater_spans(raw: Any, is_missing: bool) -> list[Span] | None:
    return None if is_missing or not isinstance(raw, dict) else token_spans(raw)


def span_gold_answers(item: Item) -> list[SpanGoldAnswer]:
    """Every rating of a span aspect that the item's gold expects spans for, judged by ``span_gold_verdict``, in the
    order of the systems, the aspects and the raters' pseudonyms."""
    gold = GoldItem.objects.filter(item=item).values_list("expected", flat=True).first()
    if not gold:
        return []
    aspects = {
        aspect.name: aspect
        for aspect in Aspect.objects.filter(dataset_id=item.dataset_id, kind=AspectKind.SPANS).order_by("position")
    }
    wanted = expected_span_pairs(gold, systems=set(gold), aspects=set(aspects))
    if not wanted:
        return []
    ratings = (
        Rating.objects.filter(response__turn__item=item, aspect__in=[aspects[name] for _s, name in wanted])
        .select_related("rater", "aspect", "response__system")
        .order_by("response__system__position", "aspect__position", "rater__pseudonym")
    )
    answers = []
    for rating in ratings:
        expected = wanted.get((rating.response.system.key, rating.aspect.name))
        if expected is None:
            continue
        verdict = span_gold_verdict(expected, _rater_spans(rating.raw, rating.is_missing))
        answers.append(
            SpanGoldAnswer(
                rater=rating.rater.pseudonym,
                system=rating.response.system.key,
                aspect=rating.aspect.display_label,
                verdict=verdict,
                reason=span_gold_reason(verdict, rating.response.text, rating.aspect.scheme),
            )
        )
    return answers
