"""Writes of adjudication: a campaign's rule, finding a task's dispute when its last counting rating arrives (and
again for a whole campaign), and recording an adjudicator's final values. Raw ratings are never touched."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from annotations.adjudication.selectors import (
    campaign_rule,
    disagreement,
    task_counting_answers,
)
from annotations.errors import RatingOutOfRange
from annotations.models import AdjudicatedSpan, Adjudication, AdjudicationRule, Campaign, Dispute, Task
from annotations.roles import adjudicator_grant
from annotations.rubrics.task_sheet import aspect_scale
from annotations.services import rating_value_from_token
from annotations.spans.answers import SpanAnswer, SpanAnswerInvalid, parse_span_answer
from annotations.text.storable import is_storable

MAX_REASON_CHARS = 10_000


class AdjudicationError(ValueError):
    """Refused input, with a message for the person who sent it."""


def adjudication_rule_set(
    *,
    campaign: Campaign,
    max_spread: float | None,
    preference_splits: bool,
    adjudicators: Iterable[User] = (),
    min_span_f1: float | None = None,
) -> AdjudicationRule | None:
    """Sets (or, with neither trigger, removes) the campaign's rule, giving the adjudicator role to the people it
    names. Disputes already found stay; run
    `campaign_disputes_find` to apply a changed rule to the tasks rated so far."""
    if max_spread is not None and (max_spread != max_spread or max_spread < 0):
        raise AdjudicationError(_("The spread must be a number of at least 0."))
    if min_span_f1 is not None and not 0 <= min_span_f1 <= 1:
        raise AdjudicationError(_("The span F1 must be a number from 0 to 1."))
    with transaction.atomic():
        if max_spread is None and not preference_splits and min_span_f1 is None:
            AdjudicationRule.objects.filter(campaign=campaign).delete()
            return None
        rule, _created = AdjudicationRule.objects.update_or_create(
            campaign=campaign,
            defaults={"max_spread": max_spread, "preference_splits": preference_splits, "min_span_f1": min_span_f1},
        )
        named = list(adjudicators)
        for person in named:
            adjudicator_grant(user=person)
        rule.adjudicators.set(named)
    return rule


def dispute_find(*, task_id: int, now: datetime | None = None) -> Dispute | None:
    """Looks at a task once it has its N counting ratings and records (or updates) its dispute. Under a lock on
        the task row, so the last two raters submitting at once find one dispute, not two or none. A settled dispute is
        left as it is; an open one whose raters came to agree (after corrections) or that lost a counting rating (an
    exclusion) is dropped."""
    with transaction.atomic():
        task = Task.objects.select_for_update().select_related("campaign").filter(pk=task_id).first()
        if task is None or task.is_gold:
            return None
        campaign = task.campaign
        rule = campaign_rule(campaign)
        if rule is None:
            return None
        existing = Dispute.objects.filter(task=task).first()
        if existing is not None and existing.resolved_at is not None:
            return existing
        answers = task_counting_answers(task=task, campaign=campaign)
        found = disagreement(answers=answers, rule=rule, ask_preference=campaign.ask_preference)
        # Fewer than N counting ratings (a rater was excluded since): the task waits for its replacement rating.
        if answers.submissions < campaign.raters_per_item or not found.disputed:
            if existing is not None:
                existing.delete()
            return None
        if existing is None:
            return Dispute.objects.create(
                task=task,
                campaign=campaign,
                spreads=found.spreads,
                preference_split=found.preference_split,
                found_at=now or timezone.now(),
            )
        existing.spreads = found.spreads
        existing.preference_split = found.preference_split
        existing.save(update_fields=["spreads", "preference_split"])
        return existing


def campaign_disputes_find(*, campaign: Campaign) -> int:
    """Applies the campaign's rule to every task rated so far (after the rule changed, or for a campaign that ran
    before it had one); returns how many open or settled disputes the campaign then has."""
    for task_id in Task.objects.filter(campaign=campaign, is_gold=False).values_list("pk", flat=True):
        dispute_find(task_id=task_id)
    return Dispute.objects.filter(campaign=campaign).count()


def dispute_resolve(
    *,
    dispute: Dispute,
    adjudicator: User,
    values: Mapping[tuple[int, int], Any],
    reason: str,
    preferred_response_id: int | None = None,
    none_appropriate: bool = False,
    now: datetime | None = None,
) -> Dispute:
    """Records the final value of every disputed (answer, aspect) of the task, as a scale token (on a span aspect,
    the final span set as the task form sends it, stored as its token and its AdjudicatedSpan rows, valued at its MQM
    score), and the final preference when it was split, with the adjudicator's reason. All or nothing; a settled
    dispute is not settled again."""
    reason = reason.strip()
    if not reason:
        raise AdjudicationError(_("Reason: say why these are the final values."))
    if len(reason) > MAX_REASON_CHARS or not is_storable(reason):
        raise AdjudicationError(_("Reason: keep it under 10,000 characters of plain text."))
    with transaction.atomic():
        locked = Dispute.objects.select_for_update().select_related("task", "campaign").get(pk=dispute.pk)
        if locked.resolved_at is not None:
            raise AdjudicationError(_("This dispute was settled already."))
        campaign = locked.campaign
        aspects = {aspect.pk: aspect for aspect in campaign.aspects.all()}
        wanted = {(entry["response_id"], entry["aspect_id"]) for entry in locked.spreads}
        if set(values) - wanted:
            raise AdjudicationError(_("The form holds values for answers or aspects that are not disputed."))
        rows = []
        final_spans: dict[tuple[int, int], SpanAnswer] = {}
        texts = dict(locked.task.responses.values_list("pk", "text"))
        for response_id, aspect_id in sorted(wanted):
            aspect = aspects.get(aspect_id)
            token = values.get((response_id, aspect_id))
            if aspect is None:
                continue
            if token is None or token == "":
                message = (
                    _("Mark the final errors of %(aspect)s of every disputed answer, or confirm it has none.")
                    if aspect.is_spans
                    else _("Choose a final value for %(aspect)s of every disputed answer.")
                )
                raise AdjudicationError(message % {"aspect": aspect.display_label})
            value: float
            raw: Any
            if aspect.is_spans:
                answer = _span_value(aspect=aspect, token=token, text=texts.get(response_id, ""))
                final_spans[(response_id, aspect_id)] = answer
                value, raw = answer.score(aspect.scheme, texts.get(response_id, "")), answer.token()
            else:
                value, raw = _scale_value(aspect=aspect, token=token)
            rows.append(
                Adjudication(
                    dispute=locked,
                    task=locked.task,
                    response_id=response_id,
                    aspect=aspect,
                    value=value,
                    raw=raw,
                    scale_min=aspect.min_value,
                    # A weighted error count has no ceiling: a span aspect's maximum is only the range shown.
                    scale_max=max(aspect.max_value, value) if aspect.is_spans else aspect.max_value,
                    adjudicator=adjudicator,
                )
            )
        if locked.preference_split:
            shown = set(locked.task.responses.values_list("pk", flat=True))
            if preferred_response_id is None and not none_appropriate:
                raise AdjudicationError(_("Preference: choose the final preferred answer."))
            if preferred_response_id is not None and preferred_response_id not in shown:
                raise AdjudicationError(_("Preference: choose one of the answers shown."))
            locked.preferred_response_id = None if none_appropriate else preferred_response_id
            locked.none_appropriate = none_appropriate
        for row in rows:
            row.save()
        AdjudicatedSpan.objects.bulk_create(
            AdjudicatedSpan(
                adjudication=row,
                position=position,
                start=marked.span.start or 0,  # located: checked by _span_value
                end=marked.span.end or 0,
                category=marked.span.category,
                severity=marked.span.severity,
                note=marked.note,
            )
            for row in rows
            if (row.response_id, row.aspect_id) in final_spans
            for position, marked in enumerate(final_spans[(row.response_id, row.aspect_id)].spans)
        )
        locked.reason = reason
        locked.resolved_by = adjudicator
        locked.resolved_at = max(now or timezone.now(), locked.found_at)
        locked.save(update_fields=["reason", "resolved_by", "resolved_at", "preferred_response", "none_appropriate"])
    return locked


def _span_value(*, aspect: Any, token: Any, text: str) -> SpanAnswer:
    """The adjudicator's final span set, checked against the answer text and the aspect's scheme as an annotator's
    is; every span must mark some text (an AdjudicatedSpan has offsets)."""
    try:
        answer = parse_span_answer(token, text=text, scheme=aspect.scheme)
    except SpanAnswerInvalid as exc:
        raise AdjudicationError(f"{aspect.display_label}: {exc}") from None
    if any(not marked.span.located for marked in answer.spans):
        raise AdjudicationError(
            _("%(aspect)s: every final error must mark some text.") % {"aspect": aspect.display_label}
        )
    return answer


def _scale_value(*, aspect: Any, token: Any) -> tuple[float, int | float]:
    """The value of a scale token and the token as a rating stores it. The adjudicator picks a value, so N/A is
    refused, and so is anything the annotators' form would not offer."""
    scale = aspect_scale(aspect, 1)
    try:
        number = float(token)
    except (TypeError, ValueError):
        raise AdjudicationError(
            _("%(aspect)s must be a value of its scale (%(range)s).")
            % {"aspect": aspect.display_label, "range": scale.range_text}
        ) from None
    allowed = (
        any(option.value == number for option in scale.options)
        if scale.is_discrete
        else aspect.min_value <= number <= aspect.max_value
    )
    if not allowed:
        raise AdjudicationError(
            _("%(aspect)s must be a value of its scale (%(range)s).")
            % {"aspect": aspect.display_label, "range": scale.range_text}
        )
    raw = int(number) if number.is_integer() else number
    try:
        value, is_missing = rating_value_from_token(aspect=aspect, raw=raw)
    except RatingOutOfRange as exc:
        raise AdjudicationError(str(exc)) from None
    if value is None or is_missing:
        raise AdjudicationError(_("%(aspect)s needs a value, not N/A.") % {"aspect": aspect.display_label})
    return value, raw
