"""Teaching a judge version rated examples from a reference set, kept only when it then agrees better with the raters
on the answers it was not shown."""

from __future__ import annotations

import math
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from annotations.models import Aspect, Dataset, Response
from judging.certification.evaluations import (
    TEACHABLE_METHODS,
    CertificationError,
    evaluable_or_error,
    evaluation_claim,
    evaluation_run_launch,
    evaluation_store,
    fresh_config,
    probability_or_error,
)
from judging.certification.reference_sets import reference_response_ids
from judging.certification.selectors import reference_ratings_for
from judging.models import (
    JudgeRun,
    JudgeScore,
    JudgeTeaching,
    JudgeVersion,
    ReferenceSet,
    RunStatus,
    TeachingDecision,
    TeachingStatus,
    settled_runs_q,
)
from judging.statistics.results import undefined

DEFAULT_PER_LEVEL = 2
DEFAULT_TEACH_SEED = 0
DEFAULT_TEACH_ALPHA = 0.05
MAX_PER_LEVEL = 10


def _scale_levels(dataset: Dataset, aspect: str) -> list[float]:
    found = Aspect.objects.filter(dataset=dataset, name=aspect).values_list("min_value", "max_value").first()
    if found is None:
        return []
    low, high = math.ceil(found[0]), math.floor(found[1])
    return [float(level) for level in range(low, high + 1)]


def _taught_aspects(version: JudgeVersion, reference_set: ReferenceSet) -> list[str]:
    rated = sorted(set(reference_set.ratings.values_list("aspect_name", flat=True)))
    judged = version.config_snapshot.get("aspects")
    return [aspect for aspect in rated if judged is None or aspect in judged]


def _choose_exemplars(
    version: JudgeVersion, reference_set: ReferenceSet, *, per_level: int, seed: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the config's exemplars, the selection record per aspect) from the set's ratings, by the pure rule."""
    from judging.statistics.exemplars import MIN_RATERS, select_exemplars  # noqa: PLC0415 - numpy

    exemplars: list[dict[str, Any]] = []
    record: dict[str, Any] = {}
    for aspect in _taught_aspects(version, reference_set):
        ratings: dict[int, list[float]] = {}
        for response_id, value in (
            reference_ratings_for(reference_set, version).filter(aspect_name=aspect).values_list("response_id", "value")
        ):
            ratings.setdefault(response_id, []).append(value)
        levels = _scale_levels(reference_set.dataset, aspect)
        if not levels:
            record[aspect] = {"chosen": [], "missing_levels": [], "skipped": "the dataset's rubric has no such aspect"}
            continue
        selection = select_exemplars(ratings, levels=levels, k=per_level, seed=seed)
        texts = {
            r.pk: (r.turn.prompt, r.text)
            for r in Response.objects.filter(pk__in=[c.response_id for c in selection.chosen]).select_related("turn")
        }
        record[aspect] = {
            "candidates": selection.candidates,
            "min_raters": MIN_RATERS,
            "missing_levels": selection.missing_levels,
            "chosen": [
                {
                    "response_id": c.response_id,
                    "label": c.label,
                    "n_raters": c.n_raters,
                    "spread": c.spread,
                    "unanimous": c.unanimous,
                }
                for c in selection.chosen
            ],
        }
        exemplars += [
            {
                "response_id": c.response_id,
                "aspect": aspect,
                "question": texts[c.response_id][0],
                "answer": texts[c.response_id][1],
                "label": c.label,
            }
            for c in selection.chosen
        ]
    return exemplars, record


def judge_version_teach(
    *,
    version: JudgeVersion,
    reference_set: ReferenceSet,
    requested_by: User | None,
    per_level: int = DEFAULT_PER_LEVEL,
    seed: int = DEFAULT_TEACH_SEED,
    alpha: float = DEFAULT_TEACH_ALPHA,
) -> JudgeTeaching:
    """Teach a version rated examples from the reference set: choose them (balanced across the scale, most agreed
    first), then judge the held-out answers (the set's answers less the examples) with the old version and with the
    taught one, on the workers. The comparison is made when both runs have ended (`judge_teaching_evaluate`)."""
    from judging.statistics.judge_comparison import MIN_UNITS  # noqa: PLC0415 - numpy

    if not 1 <= per_level <= MAX_PER_LEVEL:
        raise CertificationError(f"exemplars per level must lie between 1 and {MAX_PER_LEVEL}, not {per_level}")
    probability_or_error(alpha, "the significance level")
    evaluable_or_error(
        version,
        TEACHABLE_METHODS,
        refusal="taught rated examples: its prompt shows rated examples only in methods {methods}",
    )
    exemplars, record = _choose_exemplars(version, reference_set, per_level=per_level, seed=seed)
    if not exemplars:
        raise CertificationError(
            "no answer in the reference set was scored by at least two raters on an aspect this judge scores, so "
            "there is no agreement to choose rated examples by"
        )
    shown = {e["response_id"] for e in exemplars}
    held_out = [r for r in reference_response_ids(reference_set, version) if r not in shown]
    if len(held_out) < MIN_UNITS:
        raise CertificationError(
            f"only {len(held_out)} answer(s) of the reference set remain once the {len(shown)} examples are left "
            f"out; comparing the two versions needs at least {MIN_UNITS} held-out answers"
        )
    taught_config = {**fresh_config(version), "exemplars": exemplars}
    dataset = reference_set.dataset
    with transaction.atomic():
        parent_run = evaluation_run_launch(
            dataset=dataset,
            config=fresh_config(version),
            launched_by=requested_by,
            response_ids=held_out,
            name=f"teaching {version.short}: as it was",
        )
        taught_run = evaluation_run_launch(
            dataset=dataset,
            config=taught_config,
            launched_by=requested_by,
            response_ids=held_out,
            name=f"teaching {version.short}: with {len(exemplars)} examples",
        )
        return JudgeTeaching.objects.create(
            parent=version,
            reference_set=reference_set,
            per_level=per_level,
            seed=seed,
            alpha=alpha,
            selection=record,
            held_out=len(held_out),
            parent_run=parent_run,
            taught_run=taught_run,
            requested_by=requested_by,
        )


def judge_teaching_evaluate(*, teaching_id: int) -> str:
    """Compare the taught version with the old one on the held-out answers and keep it only when it is better.
    Safe twice: the first call claims the teaching (running → evaluating); another finds nothing to claim."""
    settled = JudgeRun.objects.filter(settled_runs_q())
    claim = evaluation_claim(
        JudgeTeaching.objects.filter(
            pk=teaching_id, status=TeachingStatus.RUNNING, parent_run__in=settled, taught_run__in=settled
        ),
        evaluating=TeachingStatus.EVALUATING,
    )
    if claim is None:
        return "not claimed"
    teaching = JudgeTeaching.objects.select_related(
        "parent", "reference_set", "parent_run", "taught_run", "taught_run__version", "parent_run__version"
    ).get(pk=teaching_id)
    decision, reason, evidence = _teaching_decision(teaching)
    taught_version = teaching.taught_run.version if teaching.taught_run is not None else None
    with transaction.atomic():
        stored = evaluation_store(
            JudgeTeaching.objects.filter(pk=teaching_id),
            evaluating=TeachingStatus.EVALUATING,
            claim=claim,
            status=TeachingStatus.DONE,
            decision=decision,
            reason=reason,
            evidence=evidence,
            taught_version=taught_version,
            finished_at=timezone.now(),
        )
        if not stored:
            return "claim lost"
        if taught_version is not None and taught_version.pk != teaching.parent_id:
            JudgeVersion.objects.filter(pk=taught_version.pk, parent__isnull=True).update(parent=teaching.parent)
    return decision


def _teaching_decision(teaching: JudgeTeaching) -> tuple[str, str, dict[str, Any]]:
    """(decision, reason, evidence per aspect) by the rule docs/statistics.md states: Williams's t, one-sided (the
    taught version agrees better with the raters' mean), Holm-adjusted over the aspects, every aspect significant."""
    from judging.statistics.judge_comparison import holm_adjust  # noqa: PLC0415 - numpy

    parent_run, taught_run = teaching.parent_run, teaching.taught_run
    if parent_run is None or taught_run is None:
        return TeachingDecision.UNDEFINED, "a run of the comparison was deleted, so the taught version is not kept", {}
    for label, run in (("old version's", parent_run), ("taught version's", taught_run)):
        if run.status != RunStatus.SUCCEEDED:
            return (
                TeachingDecision.UNDEFINED,
                f"the {label} run ended {run.status}: {run.notes}".strip() + "; the taught version is not kept",
                {},
            )
    if taught_run.version is None:
        return TeachingDecision.UNDEFINED, f"the taught run has no version: {taught_run.version_problem}", {}
    if parent_run.version_id != teaching.parent_id:
        now = parent_run.version.short if parent_run.version is not None else parent_run.version_problem
        return (
            TeachingDecision.UNDEFINED,
            f"the old version {teaching.parent.short} was not reproduced (its run is {now}), so the two runs do not "
            "compare the versions; the taught version is not kept",
            {},
        )
    evidence = {
        aspect: _compare_on_held_out(teaching, aspect)
        for aspect, row in sorted(teaching.selection.items())
        if row.get("chosen")
    }
    p_values = [row["p_one_sided"]["value"] for row in evidence.values()]
    for row, adjusted in zip(evidence.values(), holm_adjust(p_values), strict=True):
        row["p_holm"] = adjusted
    undefined_aspects = [a for a, row in evidence.items() if row["p_holm"] is None]
    if not evidence or undefined_aspects:
        why = "; ".join(f"{a}: {evidence[a]['undefined']}" for a in undefined_aspects) or "no aspect was compared"
        return (
            TeachingDecision.UNDEFINED,
            f"the comparison is undefined ({why}); the taught version is not kept",
            evidence,
        )
    summary = ", ".join(
        f"{a}: r {row['r_taught']['value']:.3f} vs {row['r_old']['value']:.3f}, t = {row['t']['value']:.3f}, "
        f"Holm p = {row['p_holm']:.4g}, n = {row['n']}"
        for a, row in evidence.items()
    )
    if all(row["p_holm"] < teaching.alpha for row in evidence.values()):
        return TeachingDecision.KEPT, f"better on every aspect at α = {teaching.alpha:g} ({summary})", evidence
    return (
        TeachingDecision.REJECTED,
        f"not significantly better on every aspect at α = {teaching.alpha:g} ({summary})",
        evidence,
    )


def _compare_on_held_out(teaching: JudgeTeaching, aspect: str) -> dict[str, Any]:
    """Williams's t for r(raters' mean, taught) > r(raters' mean, old) over the held-out answers both scored."""
    from judging.statistics.judge_comparison import ComparisonError, compare_judges  # noqa: PLC0415 - numpy

    assert teaching.parent_run is not None and teaching.taught_run is not None
    sums: dict[int, list[float]] = {}
    versions = (teaching.parent, teaching.taught_run.version)
    for response_id, value in (
        reference_ratings_for(teaching.reference_set, *versions)
        .filter(aspect_name=aspect)
        .values_list("response_id", "value")
    ):
        sums.setdefault(response_id, []).append(value)
    old = dict(
        JudgeScore.objects.filter(judge_id=teaching.parent_run.judge_id, aspect_name=aspect).values_list(
            "response_id", "value"
        )
    )
    taught = dict(
        JudgeScore.objects.filter(judge_id=teaching.taught_run.judge_id, aspect_name=aspect).values_list(
            "response_id", "value"
        )
    )
    paired = sorted(set(sums) & set(old) & set(taught))
    human = [sum(sums[r]) / len(sums[r]) for r in paired]
    try:
        result = compare_judges(human, [taught[r] for r in paired], [old[r] for r in paired], coefficient="pearson")
    except ComparisonError as exc:
        reason = str(exc)
        return {
            "n": len(paired),
            "r_taught": undefined(reason),
            "r_old": undefined(reason),
            "t": undefined(reason),
            "df": None,
            "p_one_sided": undefined(reason),
            "undefined": reason,
        }
    williams = result["williams"]
    return {
        "n": result["n"],
        "r_taught": result["r"][0],
        "r_old": result["r"][1],
        "r_between": result["r_between"],
        "difference": result["difference"],
        "difference_ci95": result["difference_ci95"],
        "t": williams["t"],
        "df": williams["df"],
        "p_one_sided": williams["p_one_sided"],
        "undefined": williams["p_one_sided"]["undefined"],
    }
