"""Judge versions: the version of a run, fixed when the run ends from the model names its replies carried.

A run whose replies named two or more provider models (the provider switched snapshots mid-run) is not split: it gets
no version and says why, so no per-version statistic and no certificate counts its scores, which mix two judges.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q

from annotations.models import Aspect, Response
from judging.enqueue import (
    CERTIFICATE_EVALUATE,
    DRIFT_CHECK_EVALUATE,
    HYBRID_FILL,
    TEACHING_EVALUATE,
    run_task_enqueue,
)
from judging.methods.fingerprint import fingerprint_material, fingerprint_of
from judging.methods.prompts import builtin_template
from judging.models import (
    Certificate,
    CertificateStatus,
    DriftCheck,
    DriftCheckStatus,
    HybridApplyStatus,
    HybridCalibration,
    JudgeExemplar,
    JudgeRun,
    JudgeScore,
    JudgeTeaching,
    JudgeVersion,
    Judgment,
    JudgmentStatus,
    TeachingStatus,
)

NO_PROVIDER_MODEL = "(no provider model)"


def provider_models_of_run(run: JudgeRun) -> set[str]:
    named = Judgment.objects.filter(run=run, status=JudgmentStatus.DONE).exclude(provider_model="")
    models: set[str] = set()
    for joined in named.values_list("provider_model", flat=True).distinct():
        models.update(part for part in joined.split(",") if part)
    return models


def _rubric(run: JudgeRun) -> list[dict[str, Any]]:
    judged = set(Judgment.objects.filter(run=run).values_list("aspect_name", flat=True).distinct())
    return [
        {
            "name": a.name,
            "label": a.label,
            "description": a.description,
            "min": a.min_value,
            "max": a.max_value,
            "ideal": a.ideal,
            "labels": a.labels or {},
            "translations": a.translations or {},
        }
        for a in Aspect.objects.filter(dataset_id=run.dataset_id, name__in=judged).order_by("name")
    ]


def _prompt_templates(run: JudgeRun) -> list[str]:
    cfg = run.judge_settings
    if cfg.prompt:
        return [cfg.prompt]
    languages = [run.prompt_language] if run.prompt_language else ["en", "ja"]
    templates = []
    for language in languages:
        try:
            templates.append(builtin_template(cfg.method, language))
        except KeyError:
            continue  # a method without a prompt of its own (a metric, G-Eval's own steps live in the config)
    return templates


def judge_run_assign_version(*, run_id: int) -> JudgeVersion | None:
    """Give an ended run its version (creating the version when its fingerprint is new), or record why it has none."""
    run = JudgeRun.objects.get(pk=run_id)
    models = provider_models_of_run(run)
    if len(models) > 1:
        problem = (
            f"the provider named {len(models)} models during this run ({', '.join(sorted(models))}); its scores mix "
            "them, so they belong to no version"
        )
        JudgeRun.objects.filter(pk=run_id).update(version=None, version_problem=problem)
        return None
    provider_model = next(iter(models)) if models else (NO_PROVIDER_MODEL if not run.judge_settings.uses_llm else "")
    if not provider_model:
        JudgeRun.objects.filter(pk=run_id).update(
            version=None, version_problem="no reply named a model: the run produced no judgment"
        )
        return None
    material = fingerprint_material(
        config=run.config_snapshot,
        provider_model=provider_model,
        rubric=_rubric(run),
        prompt_templates=_prompt_templates(run),
    )
    fingerprint = fingerprint_of(material)
    version = JudgeVersion.objects.filter(fingerprint=fingerprint).first()
    if version is None:
        try:
            with transaction.atomic():
                version = JudgeVersion.objects.create(
                    fingerprint=fingerprint,
                    config_name=run.judge_settings.name,
                    provider_model=provider_model,
                    material=material,
                    config_snapshot=run.config_snapshot,
                )
                _record_exemplars(version, run)
        except IntegrityError:  # another run of the same version ended at the same moment
            version = JudgeVersion.objects.get(fingerprint=fingerprint)
    shown = JudgeExemplar.objects.filter(version=version).values("response_id")
    scored_examples = JudgeScore.objects.filter(judge_id=run.judge_id, response_id__in=shown).count()
    if scored_examples:
        JudgeRun.objects.filter(pk=run_id).update(
            version=None,
            version_problem=f"the run scored {scored_examples} answer(s) that version {version.short} shows as rated "
            "examples, so its scores cannot count for that version",
        )
        return None
    JudgeRun.objects.filter(pk=run_id).update(version=version, version_problem="")
    return version


def _record_exemplars(version: JudgeVersion, run: JudgeRun) -> None:
    """A version's rated examples are fixed with it: the answers the database then keeps it from scoring."""
    exemplars = run.judge_settings.exemplars
    # An example whose answer was deleted since can no longer be scored by anyone.
    existing = set(Response.objects.filter(pk__in=[e.response_id for e in exemplars]).values_list("pk", flat=True))
    JudgeExemplar.objects.bulk_create(
        [
            JudgeExemplar(version=version, response_id=e.response_id, aspect_name=e.aspect, label=e.label)
            for e in exemplars
            if e.response_id in existing
        ]
    )


def judge_run_ended(*, run_id: int) -> None:
    """After a run ends: fix its version, then let its certificate, drift check or teaching be evaluated once
    committed."""
    judge_run_assign_version(run_id=run_id)
    certificate_id = Certificate.objects.filter(run_id=run_id, status=CertificateStatus.PENDING).values_list(
        "pk", flat=True
    )
    for pk in certificate_id:
        run_task_enqueue(CERTIFICATE_EVALUATE, pk, on_commit=True)
    check_ids = DriftCheck.objects.filter(run_id=run_id, status=DriftCheckStatus.RUNNING).values_list("pk", flat=True)
    for pk in check_ids:
        run_task_enqueue(DRIFT_CHECK_EVALUATE, pk, on_commit=True)
    teaching_ids = JudgeTeaching.objects.filter(
        Q(parent_run_id=run_id) | Q(taught_run_id=run_id), status=TeachingStatus.RUNNING
    ).values_list("pk", flat=True)
    for pk in teaching_ids:  # the task waits for the teaching's other run; whichever ends last is evaluated
        run_task_enqueue(TEACHING_EVALUATE, pk, on_commit=True)
    hybrid_ids = HybridCalibration.objects.filter(run_id=run_id, apply_status=HybridApplyStatus.RUNNING).values_list(
        "pk", flat=True
    )
    for pk in hybrid_ids:
        run_task_enqueue(HYBRID_FILL, pk, on_commit=True)
