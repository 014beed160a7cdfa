"""Planning a judge run before it is launched: its units, the estimate of its calls, tokens and cost, the preview of
its first prompts, and the size of a pilot. Reads only; `judging.services` launches what is planned here."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from annotations.models import Campaign, Dataset, Item, Response
from judging.config import JudgeSettings
from judging.engine.registry import FLOWS, calls_per_unit_range, first_spec
from judging.engine.units import UnitKey, aspect_infos, build_contexts
from judging.llm import gateway
from judging.methods.prompts import detect_language
from judging.models import CachedCompletion
from judging.records import record_fields


class LaunchError(ValueError):
    pass


@dataclass(frozen=True)
class PlannedUnit:
    response_id: int
    other_response_id: int | None
    aspect_name: str
    sample: int
    pair_order: int


@dataclass
class Estimate:
    """Expected figures (every reply parses and carries log-probabilities) and the worst case (every fallback and
    re-ask the config allows); costs are None when litellm has no prices for the model."""

    units: int
    calls: int
    cached_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    aspects: list[str]
    calls_max: int = 0
    prompt_tokens_max: int = 0
    completion_tokens_max: int = 0
    cost_usd_max: float | None = None
    # The prompt language a run would use ("" when the config asks for per-item detection).
    language: str = ""

    @property
    def cost_known(self) -> bool:
        return self.cost_usd is not None

    def stored(self) -> dict[str, Any]:
        return record_fields(
            self,
            "calls calls_max cached_calls cost_usd cost_usd_max prompt_tokens prompt_tokens_max completion_tokens "
            "completion_tokens_max",
        )


def _scope_responses(
    dataset: Dataset,
    campaign: Campaign | None,
    limit: int | None,
    item: Item | None = None,
    response_ids: Collection[int] | None = None,
) -> list[tuple[int, int, int]]:
    """(response id, turn id, system position) of the answers in scope, in dataset order."""
    responses = Response.objects.filter(turn__item__dataset=dataset)
    if response_ids is not None:
        responses = responses.filter(pk__in=list(response_ids))
    if item is not None:
        responses = responses.filter(turn__item=item)
    if campaign is not None:
        responses = responses.filter(campaign_tasks__campaign=campaign).distinct()
    rows = list(
        responses.order_by("turn__item__position", "turn__index", "system__position", "id").values_list(
            "id", "turn_id", "system__position"
        )
    )
    return rows[:limit] if limit else rows


def _aspect_names(dataset: Dataset, cfg: JudgeSettings) -> list[str]:
    infos = aspect_infos(dataset.pk)
    available = list(infos)
    marks_spans = cfg.method == "error_spans"
    if cfg.method == "factscore":
        # One unit per answer scored as "factscore"; a rubric aspect named in the config gets the same
        # score too (its requests are identical, so the cache answers them), for `correlate`.
        extra = [a for a in (cfg.aspects or ()) if a != "factscore"]
        missing = [a for a in extra if a not in available]
        if missing:
            raise LaunchError(f"aspect(s) not in the dataset's rubric: {', '.join(missing)}")
        return ["factscore", *extra]
    if cfg.aspects:
        missing = [a for a in cfg.aspects if a not in available]
        if missing:
            raise LaunchError(f"aspect(s) not in the dataset's rubric: {', '.join(missing)}")
        mismatched = [a for a in cfg.aspects if (infos[a].span_scheme is not None) != marks_spans]
        if mismatched:
            raise LaunchError(_kind_mismatch(cfg.method, mismatched))
        return list(cfg.aspects)
    if not available:
        raise LaunchError("the dataset has no aspects to judge")
    # Without a list, a method judges the aspects of its kind: error spans the span aspects, the others the scales.
    fitting = [name for name in available if (infos[name].span_scheme is not None) == marks_spans]
    if not fitting:
        raise LaunchError(_kind_mismatch(cfg.method, available))
    return fitting


def _kind_mismatch(method: str, names: list[str]) -> str:
    if method == "error_spans":
        return f"the error_spans method marks errors on span aspects; not a span aspect: {', '.join(names)}"
    return f"the {method} method scores scale aspects; a span aspect needs the error_spans method: {', '.join(names)}"


def plan_units(
    *,
    dataset: Dataset,
    cfg: JudgeSettings,
    campaign: Campaign | None = None,
    limit: int | None = None,
    item: Item | None = None,
    response_ids: Collection[int] | None = None,
) -> list[PlannedUnit]:
    if cfg.method not in FLOWS:
        raise LaunchError(f"the {cfg.method} method is not available in this installation")
    aspects = _aspect_names(dataset, cfg)
    rows = _scope_responses(dataset, campaign, limit, item, response_ids)
    # A judge never scores an answer its own prompt shows as a rated example: that score would only echo the raters.
    shown = {exemplar.response_id for exemplar in cfg.exemplars}
    rows = [row for row in rows if row[0] not in shown]
    samples = cfg.samples
    units: list[PlannedUnit] = []
    if cfg.method != "pairwise":
        for response_id, _turn, _pos in rows:
            for aspect in aspects:
                for sample in range(samples):
                    units.append(PlannedUnit(response_id, None, aspect, sample, 0))
        return units
    by_turn: dict[int, list[int]] = {}
    for response_id, turn_id, _pos in rows:
        by_turn.setdefault(turn_id, []).append(response_id)
    baseline_ids: set[int] = set()
    if cfg.pairs == "baseline":
        baseline_ids = set(
            Response.objects.filter(turn__item__dataset=dataset, system__key=cfg.baseline).values_list("id", flat=True)
        )
        if not baseline_ids:
            raise LaunchError(f"baseline system {cfg.baseline!r} has no answers in this dataset")
    for answers in by_turn.values():
        for i, first in enumerate(answers):
            for second in answers[i + 1 :]:
                if baseline_ids and not ({first, second} & baseline_ids):
                    continue
                for aspect in aspects:
                    for sample in range(samples):
                        for order in (0, 1):
                            units.append(PlannedUnit(first, second, aspect, sample, order))
    return units


def prompt_language_of_run(*, cfg: JudgeSettings, units: list[PlannedUnit]) -> str:
    """The one language of a run's built-in prompts: the config's, or with `auto` the language of most questions
    in scope (Japanese when more than half of them contain Japanese script, else English; the answers decide
    only when no question has text). Blank when the config asks for per-item detection."""
    if cfg.language in ("en", "ja"):
        return cfg.language
    if cfg.language == "per_item":
        return ""
    response_ids = sorted({u.response_id for u in units} | {u.other_response_id for u in units if u.other_response_id})
    in_scope = Response.objects.filter(id__in=response_ids)
    questions = dict(in_scope.exclude(turn__prompt="").values_list("turn_id", "turn__prompt").distinct())
    texts = [q for q in questions.values() if q.strip()] or [
        text for text in in_scope.values_list("text", flat=True) if (text or "").strip()
    ]
    if not texts:
        return "en"
    japanese = sum(1 for text in texts if detect_language(text) == "ja")
    return "ja" if 2 * japanese > len(texts) else "en"


def first_specs(
    dataset: Dataset, cfg: JudgeSettings, units: list[PlannedUnit], language: str
) -> list[gateway.CallSpec | None]:
    if not cfg.uses_llm or not units:
        return [None] * len(units)
    keys = [
        UnitKey(i, u.response_id, u.other_response_id, u.aspect_name, u.sample, u.pair_order)
        for i, u in enumerate(units)
    ]
    contexts = build_contexts(keys, cfg=cfg, aspects=aspect_infos(dataset.pk), language=language)
    return [first_spec(contexts[i]) for i in range(len(units))]


def estimate_run(
    *,
    dataset: Dataset,
    cfg: JudgeSettings,
    campaign: Campaign | None = None,
    limit: int | None = None,
    launched_by: User | None = None,
) -> Estimate:
    """What a run launched by `launched_by` would cost; cached calls count only that launcher's own cache."""
    units = plan_units(dataset=dataset, cfg=cfg, campaign=campaign, limit=limit)
    language = prompt_language_of_run(cfg=cfg, units=units) if cfg.uses_llm else ""
    specs = first_specs(dataset, cfg, units, language)
    return estimate_of(dataset, cfg, units, specs, language, launched_by)


def estimate_of(
    dataset: Dataset,
    cfg: JudgeSettings,
    units: list[PlannedUnit],
    specs: list[gateway.CallSpec | None],
    language: str,
    launched_by: User | None,
) -> Estimate:
    aspects = _aspect_names(dataset, cfg)
    per_unit, per_unit_max = calls_per_unit_range(cfg)
    if per_unit == 0:
        return Estimate(len(units), 0, 0, 0, 0, 0.0, aspects, 0, 0, 0, 0.0)
    keys = [s.cache_key() for s in specs if s is not None]
    cached = 0
    if cfg.cache and keys:
        found: set[str] = set()
        for start in range(0, len(keys), 5000):
            found.update(
                CachedCompletion.objects.filter(owner=launched_by, key__in=keys[start : start + 5000]).values_list(
                    "key", flat=True
                )
            )
        cached = sum(1 for k in keys if k in found)
    # A unit with no first request is skipped by its method (e.g. no reference to grade against) and costs nothing.
    sent_units = sum(1 for spec in specs if spec is not None)
    uncached_units = sent_units - cached
    calls = uncached_units * per_unit
    sample = [s for s in specs if s is not None][:100]
    tokens_per_char = (
        sum(gateway.count_tokens(s.model, s.messages) for s in sample)
        / max(1, sum(len(m["content"]) for s in sample for m in s.messages))
        if sample
        else 0.3
    )
    prompt_chars = sum(
        len(m["content"]) for s, u in zip(specs, units, strict=True) if s is not None for m in s.messages
    )
    prompt_tokens_first = math.ceil(prompt_chars * tokens_per_char * (uncached_units / max(1, sent_units)))
    expected_completion = cfg.max_tokens or 200
    completion_tokens = calls * expected_completion
    # A second call (judging a summary) sends a prompt about as long as the summary plus the template.
    second_prompt = expected_completion + 400
    prompt_tokens = prompt_tokens_first + (uncached_units * (per_unit - 1) * second_prompt)
    cost = gateway.price_estimate(cfg.model or "", prompt_tokens, completion_tokens)
    # Every extra call of the worst case resends the scoring prompt (a re-ask adds the reply before it).
    scoring_prompt = second_prompt if per_unit > 1 else prompt_tokens_first / max(1, uncached_units)
    extra_calls = uncached_units * (per_unit_max - per_unit)
    reask_tokens = uncached_units * cfg.parse_retries * (expected_completion + 40)
    prompt_tokens_max = prompt_tokens + math.ceil(extra_calls * scoring_prompt) + reask_tokens
    calls_max = uncached_units * per_unit_max
    completion_tokens_max = calls_max * expected_completion
    cost_max = gateway.price_estimate(cfg.model or "", prompt_tokens_max, completion_tokens_max)
    return Estimate(
        units=len(units),
        calls=calls,
        cached_calls=cached * per_unit,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=cost,
        aspects=aspects,
        calls_max=calls_max,
        prompt_tokens_max=prompt_tokens_max,
        completion_tokens_max=completion_tokens_max,
        cost_usd_max=cost_max,
        language=language,
    )


@dataclass(frozen=True)
class PromptPreview:
    aspect: str
    system_keys: tuple[str, ...]
    # None: the unit sends no request (the metric method, or an item the method skips such as one without a
    # reference for the reference method).
    messages: list[dict[str, str]] | None
    # The run's prompt language ("" when the config asks for per-item detection).
    language: str = ""
    language_chosen: str = ""


def prompt_preview(*, dataset: Dataset, cfg: JudgeSettings, item_number: int = 1) -> tuple[Item, list[PromptPreview]]:
    """The first request of each aspect on the first answer (or pair) of one item, built as a run builds it.

    Reads only: nothing is saved or sent."""
    item = Item.objects.filter(dataset=dataset).order_by("position", "id")[max(0, item_number - 1) :].first()
    if item is None:
        raise LaunchError(f"the dataset has no item number {item_number}")
    first_of_aspect: dict[str, PlannedUnit] = {}
    for unit in plan_units(dataset=dataset, cfg=cfg, item=item):
        if unit.sample == 0 and unit.pair_order == 0:
            first_of_aspect.setdefault(unit.aspect_name, unit)
    units = list(first_of_aspect.values())
    # The language the run would choose over the whole dataset, not over this item alone.
    language = prompt_language_of_run(cfg=cfg, units=plan_units(dataset=dataset, cfg=cfg)) if cfg.uses_llm else ""
    specs = first_specs(dataset, cfg, units, language)
    response_ids = {u.response_id for u in units} | {u.other_response_id for u in units if u.other_response_id}
    system_of = dict(Response.objects.filter(id__in=response_ids).values_list("id", "system__key"))
    return item, [
        PromptPreview(
            aspect=unit.aspect_name,
            system_keys=tuple(system_of[r] for r in (unit.response_id, unit.other_response_id) if r is not None),
            messages=list(spec.messages) if spec is not None else None,
            language=language,
            language_chosen=cfg.language,
        )
        for unit, spec in zip(units, specs, strict=True)
    ]


PILOT_UNITS = 5


def pilot_limit(*, dataset: Dataset, cfg: JudgeSettings, campaign: Campaign | None = None) -> int:
    """The fewest answers (in dataset order) whose units number at least PILOT_UNITS, or all of them."""
    answers = len(_scope_responses(dataset, campaign, None))
    for limit in range(1, answers + 1):
        if len(plan_units(dataset=dataset, cfg=cfg, campaign=campaign, limit=limit)) >= PILOT_UNITS:
            return limit
    return max(1, answers)
