"""Writes of the researcher's workspace: calibrating a judge, which saves its calibrated scores as a derived judge.

The reports (`reports`) only read; the command line and the dashboard's calibration form both call this service.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from django.db import transaction

from annotations.models import Dataset
from judging.analysis.reports import human_means, judge_or_raise, load_dataset_data, single_threaded_blas
from judging.analysis.selectors import AspectInfo, exclusions_json, judge_scores
from judging.models import Judge, JudgeKind, JudgeScore
from judging.statistics.calibration import AspectScale, apply_mate, fit_mate


class CalibrationError(ValueError):
    pass


def _scale(aspect: AspectInfo) -> AspectScale:
    return AspectScale(aspect.name, aspect.min_value, aspect.max_value, aspect.ideal)


@single_threaded_blas
def judge_calibrate(
    *,
    dataset: Dataset,
    judge_name: str,
    target: str,
    inputs: Sequence[str],
    name: str | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Fit LLM-MATE weights on the humans' per-aspect means and save the judge's calibrated scores
    for ``target`` as a derived judge (created, or replaced if a derived judge of that name exists)."""
    judge = judge_or_raise(dataset, judge_name)
    data = load_dataset_data(dataset)
    by_name = {aspect.name: aspect for aspect in data.aspects}
    unknown = [aspect for aspect in [target, *inputs] if aspect not in by_name]
    if unknown:
        raise CalibrationError(f"unknown aspect(s): {', '.join(unknown)}")
    if not inputs or target in inputs or len(set(inputs)) != len(inputs):
        raise CalibrationError("choose one or more distinct input aspects, different from the target")
    scores = judge_scores(judge, data.answers)
    missing = [aspect for aspect in inputs if aspect not in scores]
    if missing:
        raise CalibrationError(f"judge {judge.name!r} has no scores for: {', '.join(missing)}")
    input_scales = [_scale(by_name[aspect]) for aspect in inputs]
    target_scale = _scale(by_name[target])
    fit = fit_mate(
        {aspect: human_means(data, by_name[aspect]) for aspect in inputs},
        human_means(data, by_name[target]),
        input_scales=input_scales,
        target_scale=target_scale,
        seed=seed,
    )
    if fit["undefined"]:
        raise CalibrationError(fit["undefined"])
    derived_values = apply_mate(
        fit["weights"],
        {aspect: scores[aspect] for aspect in inputs},
        input_scales=input_scales,
        target_scale=target_scale,
    )
    derived_name = name or f"{judge.name} MATE {target}"
    params = {
        "source_judge": judge.name,
        "method": "llm-mate",
        "target": target,
        "inputs": list(inputs),
        "weights": fit["weights"],
        "heldout_pearson": fit["heldout_pearson"],
        "n_train": fit["n_train"],
        "n_test": fit["n_test"],
        "seed": seed,
    }
    with transaction.atomic():
        derived, created = Judge.objects.select_for_update().get_or_create(
            dataset=dataset, name=derived_name, defaults={"kind": JudgeKind.DERIVED, "params": params}
        )
        if not created:
            if derived.kind != JudgeKind.DERIVED:
                raise CalibrationError(f"a {derived.kind} judge is already named {derived_name!r}")
            derived.params = params
            derived.save(update_fields=["params"])
            JudgeScore.objects.filter(judge=derived).delete()
        rows = np.flatnonzero(np.isfinite(derived_values))
        JudgeScore.objects.bulk_create(
            [
                JudgeScore(
                    judge=derived,
                    response_id=int(data.answers.response_ids[row]),
                    aspect_name=target,
                    value=float(derived_values[row]),
                )
                for row in rows
            ],
            batch_size=5000,
        )
    # The humans' means leave out the excluded raters, as every statistic does; the result says whom.
    scope = exclusions_json(data.scope, data.ratings.excluded)
    return {"judge": derived_name, "created": created, "n_scores": int(rows.size), "scope": scope, **fit}
