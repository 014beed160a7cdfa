"""Reads for rater quality: per-rater measures of a campaign and the quality panel of its progress page; the rows
of the payment export are annotations/quality/payment_selectors.py. The rules themselves live in
annotations/quality/metrics.py; this module only loads the rows they need, in a fixed number of queries per campaign.

Raters are named by their pseudonym and user id everywhere, and the panel shows the researcher account names unless
they choose pseudonyms."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import formats
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _lazy
from django.utils.translation import ngettext

from annotations.gold.models import GoldItem, GoldKind
from annotations.gold.rules import expected_span_pairs, is_span_expectation, span_gold_verdict
from annotations.models import (
    AspectKind,
    Assignment,
    AssignmentStatus,
    Campaign,
    Rater,
    Rating,
    Response,
    Task,
)
from annotations.quality import metrics
from annotations.quality.models import RaterExclusion
from annotations.quality.rater_reliability import AspectReliability, ItemPosterior, rater_reliability
from annotations.recruitment.models import CrowdWorker, Platform
from annotations.spans.answers import token_spans
from annotations.spans.error_spans import Span

Pair = tuple[int, int]  # (response id, aspect id)


@dataclass(frozen=True)
class RaterQuality:
    """One row of the quality table. `rater_id`, `excluded`, `exclusion_reason` and `flag_reasons` are what the
    exclusion controls read."""

    rater_id: int
    pseudonym: str
    user_id: int
    account: str  # the username, which the researcher may choose to see instead of the pseudonym
    platform: str  # a Platform value for crowd workers, "" for account annotators
    submissions: int  # non-gold tasks submitted
    gold_passed: int
    gold_answered: int
    gold_in_order: str  # "P" for a passed gold task, "F" for a failed one, in the order they were submitted
    attention_passed: int
    attention_answered: int
    agreement: metrics.Agreement
    median_seconds: float | None
    straight: metrics.StraightLining
    flags: list[metrics.Flag]
    flag_reasons: list[str]
    excluded: bool
    exclusion_reason: str

    @property
    def flagged(self) -> bool:
        return bool(self.flags)

    @property
    def gold_accuracy(self) -> float | None:
        return self.gold_passed / self.gold_answered if self.gold_answered else None

    @property
    def platform_label(self) -> str:
        return str(Platform(self.platform).label) if self.platform else _("account")

    @property
    def agreement_note(self) -> str:
        if self.agreement.reason == "too_few":
            return _("too few shared answers")
        if self.agreement.reason == "no_variation":
            return _("no variation to correlate")
        return ""


def flag_text(flag: metrics.Flag) -> str:
    """A flag's reason in words, with the rater's figure and the threshold it crossed."""
    if flag.code == "gold":
        return _("gold accuracy %(value).0f%% is below %(bound).0f%%") % {
            "value": flag.value * 100,
            "bound": flag.bound * 100,
        }
    if flag.code == "attention":
        failed = int(flag.value)
        return ngettext("failed %(n)d attention check", "failed %(n)d attention checks", failed) % {"n": failed}
    if flag.code == "straight_lining":
        return _("one value everywhere in %(value).0f%% of submissions (flag at %(bound).0f%%)") % {
            "value": flag.value * 100,
            "bound": flag.bound * 100,
        }
    if flag.code == "speed":
        return _("median %(value).1f s per task, under a third of the campaign median (%(median).1f s)") % {
            "value": flag.value,
            "median": flag.reference if flag.reference is not None else flag.bound,
        }
    return _("agreement with the other raters %(value).2f is below %(bound).2f") % {
        "value": flag.value,
        "bound": flag.bound,
    }


@dataclass
class _CampaignRows:
    """What every quality measure of one campaign is computed from, loaded once."""

    submitted: Sequence[Mapping[str, Any]]
    task_responses: dict[int, list[int]]
    task_item: dict[int, int]
    system_of: dict[int, str]
    aspects: list[tuple[int, str]]
    rater_of_user: dict[int, tuple[int, str]]
    ratings: dict[tuple[int, int, int], float | None]  # (rater, response, aspect) -> value, None for N/A
    gold: dict[int, GoldItem]
    platform_of_user: dict[int, str] = field(default_factory=dict)
    account_of_user: dict[int, str] = field(default_factory=dict)
    # (rater, response, aspect) -> the spans marked, None when not answered; read only for gold expecting errors
    gold_spans_given: dict[tuple[int, int, int], list[Span] | None] = field(default_factory=dict)


def _campaign_rows(campaign: Campaign) -> _CampaignRows:
    submitted = list(
        Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.SUBMITTED)
        .order_by("submitted_at", "pk")
        .values("pk", "task_id", "annotator_id", "is_gold", "seconds_spent", "submitted_at", "leased_at")
    )
    task_responses: dict[int, list[int]] = defaultdict(list)
    for task_id, response_id in (
        Task.responses.through.objects.filter(task__campaign=campaign)
        .order_by("task_id", "response_id")
        .values_list("task_id", "response_id")
    ):
        task_responses[task_id].append(response_id)
    task_item = dict(Task.objects.filter(campaign=campaign).values_list("pk", "turn__item_id"))
    responses = Response.objects.filter(campaign_tasks__campaign=campaign)
    system_of = dict(responses.values_list("pk", "system__key"))
    aspects = list(campaign.aspects.order_by("position", "pk").values_list("pk", "name"))
    users = {row["annotator_id"] for row in submitted}
    raters = list(
        Rater.objects.filter(dataset_id=campaign.dataset_id, user_id__in=users).values_list(
            "pk", "user_id", "pseudonym", "user__username"
        )
    )
    rater_of_user = {user_id: (rater_id, pseudonym) for rater_id, user_id, pseudonym, _account in raters}
    account_of_user = {user_id: account for _rater_id, user_id, _pseudonym, account in raters}
    ratings = {
        (rater_id, response_id, aspect_id): None if is_missing else value
        for rater_id, response_id, aspect_id, value, is_missing in Rating.objects.filter(
            rater_id__in=[rater_id for rater_id, _ in rater_of_user.values()],
            response_id__in=responses.values("pk"),
            aspect_id__in=[aspect_id for aspect_id, _ in aspects],
        ).values_list("rater_id", "response_id", "aspect_id", "value", "is_missing")
    }
    gold_items = {task_item[row["task_id"]] for row in submitted if row["is_gold"]}
    gold = {gold.item_id: gold for gold in GoldItem.objects.filter(item_id__in=gold_items)}
    platform_of_user = dict(CrowdWorker.objects.filter(user_id__in=users).values_list("user_id", "link__platform"))
    gold_spans_given = _gold_spans_given(gold, task_item, task_responses, submitted, list(ratings))
    return _CampaignRows(
        submitted=submitted,
        task_responses=task_responses,
        task_item=task_item,
        system_of=system_of,
        aspects=aspects,
        rater_of_user=rater_of_user,
        ratings=ratings,
        gold=gold,
        platform_of_user=platform_of_user,
        account_of_user=account_of_user,
        gold_spans_given=gold_spans_given,
    )


def _gold_spans_given(
    gold: Mapping[int, GoldItem],
    task_item: Mapping[int, int],
    task_responses: Mapping[int, list[int]],
    submitted: Sequence[Mapping[str, Any]],
    rated: list[tuple[int, int, int]],
) -> dict[tuple[int, int, int], list[Span] | None]:
    """The marked spans of the gold answers whose gold expects errors; no query when no gold does."""
    if not any(
        is_span_expectation(value)
        for item in gold.values()
        for by_aspect in item.expected.values()
        if isinstance(by_aspect, dict)
        for value in by_aspect.values()
    ):
        return {}
    responses = {
        response_id
        for row in submitted
        if row["is_gold"] and task_item.get(row["task_id"]) in gold
        for response_id in task_responses.get(row["task_id"], [])
    }
    wanted = [key for key in rated if key[1] in responses]
    rows = Rating.objects.filter(
        rater_id__in={rater for rater, _r, _a in wanted},
        response_id__in=responses,
        aspect__kind=AspectKind.SPANS,
    ).values_list("rater_id", "response_id", "aspect_id", "raw", "is_missing")
    return {
        (rater_id, response_id, aspect_id): None if is_missing else token_spans(raw)
        for rater_id, response_id, aspect_id, raw, is_missing in rows
    }


def _submission_values(rows: _CampaignRows, rater_id: int, task_id: int) -> list[float | None]:
    values = []
    for response_id in rows.task_responses.get(task_id, []):
        for aspect_id, _name in rows.aspects:
            key = (rater_id, response_id, aspect_id)
            if key in rows.ratings:
                values.append(rows.ratings[key])
    return values


def _gold_verdict(rows: _CampaignRows, rater_id: int, task_id: int) -> tuple[str, bool] | None:
    """(kind, passed) of a submitted gold task, None when it measures nothing (no gold record, nothing shown
    that is expected)."""
    gold = rows.gold.get(rows.task_item.get(task_id, -1))
    if gold is None:
        return None
    shown = rows.task_responses.get(task_id, [])
    expected = metrics.expected_pairs(
        gold.expected, systems=[rows.system_of[r] for r in shown], aspects=[name for _, name in rows.aspects]
    )
    given = {
        (rows.system_of[response_id], name): rows.ratings.get((rater_id, response_id, aspect_id))
        for response_id in shown
        for aspect_id, name in rows.aspects
    }
    passed = metrics.gold_task_passes(expected=expected, given=given, tolerance=gold.tolerance)
    response_of = {rows.system_of[response_id]: response_id for response_id in shown}
    aspect_of = {name: aspect_id for aspect_id, name in rows.aspects}
    spans_passed = [
        span_gold_verdict(spans, rows.gold_spans_given.get((rater_id, response_of[system], aspect_of[aspect]))).passed
        for (system, aspect), spans in expected_span_pairs(
            gold.expected, systems=set(response_of), aspects=set(aspect_of)
        ).items()
    ]
    if spans_passed:
        passed = all(spans_passed) and passed is not False
    return None if passed is None else (gold.kind, passed)


@dataclass
class _Tally:
    submissions: int = 0
    gold_passed: int = 0
    gold_answered: int = 0
    gold_in_order: list[bool] = field(default_factory=list)
    attention_passed: int = 0
    attention_answered: int = 0
    seconds: list[float] = field(default_factory=list)
    shapes: list[list[float | None]] = field(default_factory=list)
    answered_pairs: set[Pair] = field(default_factory=set)


@dataclass(frozen=True)
class CampaignQuality:
    rows: list[RaterQuality]  # flagged first
    campaign_median_seconds: float | None
    gold_answers: list[tuple[datetime, bool]]  # (submitted at, passed) of every scored gold-item answer


def campaign_quality(campaign: Campaign) -> CampaignQuality:
    rows = _campaign_rows(campaign)
    tallies: dict[int, _Tally] = defaultdict(_Tally)
    gold_answers: list[tuple[datetime, bool]] = []
    all_seconds: list[float] = []
    for submission in rows.submitted:
        user_id = submission["annotator_id"]
        if user_id not in rows.rater_of_user:
            continue  # a submission stores ratings through the rater, so this is a task without any
        rater_id = rows.rater_of_user[user_id][0]
        tally = tallies[user_id]
        task_id = submission["task_id"]
        if submission["is_gold"]:
            verdict = _gold_verdict(rows, rater_id, task_id)
            if verdict is None:
                continue
            kind, passed = verdict
            if kind == GoldKind.ATTENTION:
                tally.attention_answered += 1
                tally.attention_passed += passed
            else:
                tally.gold_answered += 1
                tally.gold_passed += passed
                tally.gold_in_order.append(passed)
                gold_answers.append((submission["submitted_at"], passed))
            continue
        tally.submissions += 1
        if submission["seconds_spent"] is not None:
            tally.seconds.append(submission["seconds_spent"])
            all_seconds.append(submission["seconds_spent"])
        tally.shapes.append(_submission_values(rows, rater_id, task_id))
        tally.answered_pairs.update(
            (response_id, aspect_id)
            for response_id in rows.task_responses.get(task_id, [])
            for aspect_id, _name in rows.aspects
        )
    # Agreement is measured on the answers of non-gold tasks, among the raters who submitted them here.
    values_of_pair: dict[Pair, list[tuple[int, float]]] = defaultdict(list)
    for user_id, tally in tallies.items():
        rater_id = rows.rater_of_user[user_id][0]
        for response_id, aspect_id in tally.answered_pairs:
            value = rows.ratings.get((rater_id, response_id, aspect_id))
            if value is not None:
                values_of_pair[(response_id, aspect_id)].append((rater_id, value))
    campaign_median = metrics.median_or_none(all_seconds)
    raters = [rater_id for rater_id, _ in rows.rater_of_user.values()]
    exclusions = dict(
        RaterExclusion.objects.filter(rater_id__in=raters, revoked_at__isnull=True).values_list("rater_id", "reason")
    )
    own: dict[int, dict[tuple[int, str], float]] = defaultdict(dict)
    others: dict[int, dict[tuple[int, str], list[float]]] = defaultdict(dict)
    for (response_id, aspect_id), entries in values_of_pair.items():
        key = (response_id, str(aspect_id))
        for rater_id, value in entries:
            own[rater_id][key] = value
            # An excluded rater is measured like anyone, but is no reference for the others: a click-through
            # worker would otherwise pull every careful rater's agreement down.
            others[rater_id][key] = [other for rater, other in entries if rater != rater_id and rater not in exclusions]
    result = []
    for user_id, tally in tallies.items():
        rater_id, pseudonym = rows.rater_of_user[user_id]
        measures = metrics.Measures(
            gold_passed=tally.gold_passed,
            gold_answered=tally.gold_answered,
            attention_passed=tally.attention_passed,
            attention_answered=tally.attention_answered,
            agreement=metrics.rater_agreement(own[rater_id], others[rater_id]),
            median_seconds=metrics.median_or_none(tally.seconds),
            timed_submissions=len(tally.seconds),
            straight=metrics.straight_lining(tally.shapes),
        )
        found = metrics.flags(measures, campaign_median_seconds=campaign_median)
        result.append(
            RaterQuality(
                rater_id=rater_id,
                pseudonym=pseudonym,
                user_id=user_id,
                account=rows.account_of_user.get(user_id, ""),
                platform=rows.platform_of_user.get(user_id, ""),
                submissions=tally.submissions,
                gold_passed=tally.gold_passed,
                gold_answered=tally.gold_answered,
                gold_in_order="".join("P" if passed else "F" for passed in tally.gold_in_order),
                attention_passed=tally.attention_passed,
                attention_answered=tally.attention_answered,
                agreement=measures.agreement,
                median_seconds=measures.median_seconds,
                straight=measures.straight,
                flags=found,
                flag_reasons=[flag_text(flag) for flag in found],
                excluded=rater_id in exclusions,
                exclusion_reason=exclusions.get(rater_id, ""),
            )
        )
    result.sort(key=lambda row: (not row.flagged, row.pseudonym))
    return CampaignQuality(rows=result, campaign_median_seconds=campaign_median, gold_answers=gold_answers)


def rater_quality(campaign: Campaign) -> list[RaterQuality]:
    """Per rater who submitted in the campaign (account annotators and crowd workers alike), flagged ones first."""
    return campaign_quality(campaign).rows


# --- the panel on the progress page -----------------------------------------------------------------------------


@dataclass(frozen=True)
class AccuracyRow:
    label: str
    passed: int
    answered: int
    accuracy: float


# How the panel names raters: by account, like the annotators table above it, unless the researcher asks for the
# pseudonyms the exports use (to match a downloaded file, or to show the screen without account names).
RATER_NAMES_ACCOUNTS = "accounts"
RATER_NAMES_PSEUDONYMS = "pseudonyms"


def rater_names_choice(value: object) -> str:
    return RATER_NAMES_PSEUDONYMS if value == RATER_NAMES_PSEUDONYMS else RATER_NAMES_ACCOUNTS


@dataclass(frozen=True)
class QualityPanel:
    names: str  # RATER_NAMES_ACCOUNTS or RATER_NAMES_PSEUDONYMS
    rows: list[RaterQuality]
    flagged: list[RaterQuality]
    campaign_median_seconds: float | None
    chart: metrics.AccuracyChart | None
    accuracy_rows: list[AccuracyRow]
    per_day: bool
    thresholds: dict[str, float]
    reliability: ReliabilityTable
    posteriors: list[PosteriorTable] = field(default_factory=list)

    @property
    def posterior_cap(self) -> int:
        return POSTERIOR_ROWS_SHOWN


MODEL_NAMES = {"dawid-skene": "Dawid–Skene", "mace": "MACE", "severity": _lazy("rater severity")}


@dataclass(frozen=True)
class ReliabilityCell:
    value: float | None
    note: str  # why the value is undefined, or "" for a rater the model did not see on this aspect


@dataclass(frozen=True)
class ReliabilityTable:
    """The rater models' reliabilities beside gold and agreement: one column per aspect whose fit is defined, one
    row per panel rater the models saw (an excluded rater's ratings are left out of the fit, so they have none)."""

    columns: list[tuple[str, str]]  # (aspect, model name)
    rows: list[tuple[RaterQuality, list[ReliabilityCell]]]
    undefined: list[tuple[str, str, str]]  # (aspect, model name, reason)


def _reliability_table(rows: list[RaterQuality], fits: list[AspectReliability]) -> ReliabilityTable:
    defined = [fit for fit in fits if fit.undefined is None]
    table_rows = []
    for row in rows:
        if not any(row.pseudonym in fit.reliability for fit in defined):
            continue
        cells = [
            ReliabilityCell(value=fit.reliability.get(row.pseudonym), note=fit.reasons.get(row.pseudonym, ""))
            for fit in defined
        ]
        table_rows.append((row, cells))
    return ReliabilityTable(
        columns=[(fit.aspect, str(MODEL_NAMES[fit.model])) for fit in defined],
        rows=table_rows,
        undefined=[(fit.aspect, str(MODEL_NAMES[fit.model]), fit.undefined) for fit in fits if fit.undefined],
    )


# The panel shows this many answers per aspect; the CSV download holds them all.
POSTERIOR_ROWS_SHOWN = 20


@dataclass(frozen=True)
class PosteriorTable:
    """One aspect's posterior label per answer, as its rater model estimates it: the first POSTERIOR_ROWS_SHOWN
    answers in item order, and how many there are in all."""

    aspect: str
    model: str  # the model's display name
    categorical: bool  # a posterior label with its probability; else the severity model's expected score
    rows: list[ItemPosterior]
    total: int


def posterior_rows(fits: list[AspectReliability]) -> list[tuple[AspectReliability, list[ItemPosterior]]]:
    """Each defined fit with its answers in item order (item, turn, system), as the panel and the CSV list them."""
    return [
        (fit, sorted(fit.items, key=lambda row: (row.item, row.turn, row.system, row.response_id)))
        for fit in fits
        if fit.undefined is None
    ]


def _posterior_tables(fits: list[AspectReliability]) -> list[PosteriorTable]:
    return [
        PosteriorTable(
            aspect=fit.aspect,
            model=str(MODEL_NAMES[fit.model]),
            categorical=fit.model != "severity",
            rows=rows[:POSTERIOR_ROWS_SHOWN],
            total=len(rows),
        )
        for fit, rows in posterior_rows(fits)
    ]


def _bucket_label(start: datetime, width: timedelta) -> str:
    return formats.date_format(start, "m-d" if width == metrics.DAY else "m-d H:00")


def quality_panel(campaign: Campaign, *, names: str = RATER_NAMES_ACCOUNTS) -> QualityPanel:
    quality = campaign_quality(campaign)
    fits = rater_reliability(campaign)
    width, buckets = metrics.accuracy_over_time(quality.gold_answers)
    labels = [_bucket_label(bucket.start, width) for bucket in buckets]
    return QualityPanel(
        names=rater_names_choice(names),
        rows=quality.rows,
        flagged=[row for row in quality.rows if row.flagged],
        campaign_median_seconds=quality.campaign_median_seconds,
        chart=metrics.accuracy_chart(buckets, labels=labels) if buckets else None,
        accuracy_rows=[
            AccuracyRow(label=label, passed=b.passed, answered=b.answered, accuracy=b.accuracy)
            for label, b in zip(labels, buckets, strict=True)
        ],
        per_day=width == metrics.DAY,
        thresholds={"gold": metrics.GOLD_ACCURACY_BELOW * 100},
        reliability=_reliability_table(quality.rows, fits),
        posteriors=_posterior_tables(fits),
    )
