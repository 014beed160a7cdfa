"""Writes of certification: reference sets, certificates, drift checks and teaching (versions: judging.versions).

Why one module of this size: certificates, drift checks and teachings are three evaluations of one kind. Each reads
the frozen reference ratings without the version's examples, launches runs through `judging.services`, is claimed
with the same conditional update and stamp, and is handed back by the one stale-evaluation reclaim at the end. Split
apart, that shared protocol would have to be imported back from wherever it landed by every part."""

from __future__ import annotations

import logging
import math
import secrets
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from annotations.models import Aspect, Campaign, Dataset, Rating, RatingOrigin, Response
from judging.certification.selectors import reference_ratings_for
from judging.enqueue import CERTIFICATE_EVALUATE, DRIFT_CHECK_EVALUATE, TEACHING_EVALUATE, run_task_enqueue
from judging.models import (
    ENDED_RUN_STATUSES,
    Certificate,
    CertificateStatus,
    DriftCheck,
    DriftCheckStatus,
    JudgeRun,
    JudgeScore,
    JudgeTeaching,
    JudgeVersion,
    ReferenceRating,
    ReferenceSet,
    RunStatus,
    TeachingDecision,
    TeachingStatus,
    settled_runs_q,
)
from judging.versions import provider_models_of_run

log = logging.getLogger(__name__)

# Methods whose score is one number per answer and aspect, which the alternative-annotator test compares with raters.
CERTIFIABLE_METHODS = ("single", "reference", "summarize_then_judge")
# The strictest margin the alternative-annotator test's authors suggest, the default on the judges page too.
DEFAULT_EPSILON = 0.1
DEFAULT_Q = 0.05
DRIFT_SAMPLE_SIZE = 20


class CertificationError(ValueError):
    """A request that cannot be carried out; the message names the problem."""


# ---------------------------------------------------------------- reference sets


@transaction.atomic
def reference_set_create(
    *, dataset: Dataset, name: str, owner: User | None, campaign: Campaign | None = None, origin: str = "all"
) -> ReferenceSet:
    """Name a reference set and freeze it: its ratings are copied now and never change afterwards.

    A campaign's set holds the ratings its annotators gave in its tasks (gold tasks left out); otherwise the set holds
    the dataset's ratings of the chosen origin (imported, made here, or all)."""
    name = name.strip()
    if not name or len(name) > 200:
        raise CertificationError("the reference set's name must have 1 to 200 characters")
    if ReferenceSet.objects.filter(dataset=dataset, name=name).exists():
        raise CertificationError(f"a reference set named {name!r} already exists in this dataset")
    if origin not in ("all", RatingOrigin.IMPORT, RatingOrigin.APP):
        raise CertificationError(f"origin must be all, import or app, not {origin!r}")
    ratings = Rating.objects.filter(response__turn__item__dataset=dataset, is_missing=False, value__isnull=False)
    if campaign is not None:
        if campaign.dataset_id != dataset.pk:
            raise CertificationError("the campaign belongs to another dataset")
        ratings = ratings.filter(
            origin=RatingOrigin.APP,
            aspect__in=campaign.aspects.all(),
            response__campaign_tasks__campaign=campaign,
            response__campaign_tasks__is_gold=False,
            rater__user__in=campaign.annotators.all(),
        ).distinct()
    elif origin != "all":
        ratings = ratings.filter(origin=origin)
    rows = list(ratings.values_list("response_id", "aspect__name", "aspect__level", "rater__pseudonym", "value"))
    if not rows:
        raise CertificationError("there are no human ratings in this scope to freeze")
    reference_set = ReferenceSet.objects.create(
        name=name, dataset=dataset, campaign=campaign, owner=owner, frozen_at=timezone.now()
    )
    ReferenceRating.objects.bulk_create(
        [
            ReferenceRating(
                reference_set=reference_set,
                response_id=response_id,
                aspect_name=aspect,
                aspect_level=level,
                rater_key=rater,
                value=value,
            )
            for response_id, aspect, level, rater, value in rows
            if value is not None  # the query asked for values; this says so to the type checker
        ],
        batch_size=2000,
    )
    return reference_set


def _reference_response_ids(reference_set: ReferenceSet, *versions: JudgeVersion) -> list[int]:
    """The set's answers, less those the versions show as rated examples."""
    return sorted(set(reference_ratings_for(reference_set, *versions).values_list("response_id", flat=True)))


# ---------------------------------------------------------------- certificates


def fresh_config(version: JudgeVersion) -> dict[str, Any]:
    """The version's config, with the reply cache off: a certificate or a drift check must hear the provider now."""
    return {**version.config_snapshot, "cache": False}


def certificate_request(
    *,
    version: JudgeVersion,
    reference_set: ReferenceSet,
    requested_by: User | None,
    epsilon: float = DEFAULT_EPSILON,
    q: float = DEFAULT_Q,
) -> Certificate:
    """Run the version on the reference set (a normal judge run, on the workers); the certificate is evaluated when
    the run ends."""
    from judging.services import LaunchError, judge_run_launch  # noqa: PLC0415 - judging.services calls back here

    if not 0.0 <= epsilon < 1.0:
        raise CertificationError(f"epsilon must lie in [0, 1), not {epsilon}")
    if not 0.0 < q < 1.0:
        raise CertificationError(f"q must lie strictly between 0 and 1, not {q}")
    method = version.config_snapshot.get("method")
    if method not in CERTIFIABLE_METHODS:
        raise CertificationError(
            f"a {method} judge cannot be certified: the alternative-annotator test needs one score per answer "
            f"(methods {', '.join(CERTIFIABLE_METHODS)})"
        )
    with transaction.atomic():
        try:
            run = judge_run_launch(
                dataset=reference_set.dataset,
                config=fresh_config(version),
                launched_by=requested_by,
                response_ids=_reference_response_ids(reference_set, version),
                name=_free_name(reference_set.dataset, f"certify {version.short} on {reference_set.name}"),
            )
        except LaunchError as exc:
            raise CertificationError(str(exc)) from None
        return Certificate.objects.create(
            version=version,
            reference_set=reference_set,
            run=run,
            epsilon=epsilon,
            q=q,
            fingerprint=version.fingerprint,
            requested_by=requested_by,
        )


def _free_name(dataset: Dataset, base: str) -> str:
    from judging.services import free_run_name  # noqa: PLC0415 - judging.services calls back here

    return free_run_name(dataset, base[:190])


def _labels_and_scores(
    reference_set: ReferenceSet, run: JudgeRun, aspect: str, version: JudgeVersion
) -> tuple[Any, Any, int]:
    import numpy as np  # noqa: PLC0415 - only an evaluation needs it

    from judging.statistics.alt_test import Labels  # noqa: PLC0415 - numpy, see above

    rows = list(
        reference_ratings_for(reference_set, version)
        .filter(aspect_name=aspect)
        .values_list("response_id", "rater_key", "value")
        .order_by("pk")
    )
    answers = sorted({response_id for response_id, _, _ in rows})
    raters = sorted({rater for _, rater, _ in rows})
    answer_index = {response_id: i for i, response_id in enumerate(answers)}
    rater_index = {rater: i for i, rater in enumerate(raters)}
    labels = Labels(
        answer=np.asarray([answer_index[r] for r, _, _ in rows], dtype=np.int64),
        rater=np.asarray([rater_index[k] for _, k, _ in rows], dtype=np.int64),
        value=np.asarray([v for _, _, v in rows], dtype=np.float64),
        rater_labels=tuple(raters),
    )
    judge = np.full(len(answers), np.nan)
    for response_id, value in JudgeScore.objects.filter(
        judge_id=run.judge_id, aspect_name=aspect, response_id__in=answers
    ).values_list("response_id", "value"):
        judge[answer_index[response_id]] = value
    return labels, judge, len(answers)


def _aspect_result(
    reference_set: ReferenceSet, run: JudgeRun, aspect: str, level: str, certificate: Certificate
) -> dict[str, Any]:
    from judging.statistics.alt_test import alt_test, metric_for_level  # noqa: PLC0415 - numpy and scipy

    labels, judge, n_answers = _labels_and_scores(reference_set, run, aspect, certificate.version)
    result = alt_test(labels, judge, epsilon=certificate.epsilon, q=certificate.q, metric=metric_for_level(level))
    passed = result["passed"]["value"]
    verdict = "undefined" if passed is None else ("passed" if passed else "failed")
    return {
        "n_answers": n_answers,
        "n_ratings": int(labels.value.size),
        "n_judged": int((judge == judge).sum()),
        "raters_tested": result["raters_tested"],
        "epsilon": certificate.epsilon,
        "q": certificate.q,
        "metric": result["metric"],
        "omega": result["winning_rate"]["value"],
        "rho": result["advantage_probability"]["value"],
        "verdict": verdict,
        "undefined": result["passed"]["undefined"],
        "raters": [
            {"rater": r["rater"], "n": r["n"], "rejected": r["rejected"], "skipped": r["skipped"]}
            for r in result["raters"]
        ],
    }


def certificate_evaluate(*, certificate_id: int) -> str:
    """Apply the alternative-annotator test per aspect once the certification run has ended. Safe twice: the first
    call claims the certificate (pending → evaluating); another finds nothing to claim."""
    claimed = Certificate.objects.filter(
        pk=certificate_id,
        status=CertificateStatus.PENDING,
        run__status__in=[RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.STOPPED_BUDGET],
    ).update(status=CertificateStatus.EVALUATING, evaluation_claimed_at=(claim := timezone.now()))
    if not claimed:
        return "not claimed"
    certificate = Certificate.objects.select_related("run", "version", "reference_set").get(pk=certificate_id)
    run = certificate.run
    assert run is not None  # the claim required its status
    status, reason, results = _evaluate(certificate, run)
    stored = Certificate.objects.filter(
        pk=certificate_id, status=CertificateStatus.EVALUATING, evaluation_claimed_at=claim
    ).update(status=status, reason=reason, results=results, certified_at=timezone.now())
    return status if stored else "claim lost"


def _evaluate(certificate: Certificate, run: JudgeRun) -> tuple[str, str, dict[str, Any]]:
    if run.status != RunStatus.SUCCEEDED:
        return CertificateStatus.UNDEFINED, f"the certification run ended {run.status}: {run.notes}".strip(), {}
    if run.version_id != certificate.version_id:
        now = run.version.provider_model if run.version is not None else run.version_problem
        return (
            CertificateStatus.UNDEFINED,
            f"the run did not reproduce version {certificate.version.short}: the provider now serves {now} "
            f"(version of the run: {run.version.short if run.version else 'none'}); certify that version instead",
            {},
        )
    levels = dict(
        certificate.reference_set.ratings.values_list("aspect_name", "aspect_level").distinct().order_by("aspect_name")
    )
    judged = set(JudgeScore.objects.filter(judge_id=run.judge_id).values_list("aspect_name", flat=True).distinct())
    results = {
        aspect: _aspect_result(certificate.reference_set, run, aspect, level, certificate)
        for aspect, level in levels.items()
        if aspect in judged
    }
    if not results:
        return CertificateStatus.UNDEFINED, "the judge scored no aspect that the reference set rates", {}
    verdicts = {row["verdict"] for row in results.values()}
    if "failed" in verdicts:
        failed = [a for a, row in results.items() if row["verdict"] == "failed"]
        return CertificateStatus.FAILED, f"fails the alternative-annotator test on {', '.join(failed)}", results
    if "undefined" in verdicts:
        why = "; ".join(f"{a}: {row['undefined']}" for a, row in results.items() if row["verdict"] == "undefined")
        return CertificateStatus.UNDEFINED, f"the test is undefined on {why}", results
    return CertificateStatus.PASSED, "passes the alternative-annotator test on every aspect", results


def certificate_suspend(*, certificate_id: int, reason: str) -> bool:
    """Suspend a passed certificate; True when this call did it."""
    if not reason:
        raise CertificationError("a suspension needs its reason")
    return bool(
        Certificate.objects.filter(pk=certificate_id, status=CertificateStatus.PASSED).update(
            status=CertificateStatus.SUSPENDED, suspended_at=timezone.now(), suspension_reason=reason
        )
    )


# ---------------------------------------------------------------- drift


def drift_sample(response_ids: list[int], *, seed: int, size: int) -> list[int]:
    """A simple random sample without replacement of the reference answers, reproducible from its seed."""
    import numpy as np  # noqa: PLC0415 - only a drift check needs it

    ordered = sorted(response_ids)
    if len(ordered) <= size:
        return ordered
    chosen = np.random.default_rng(seed).choice(len(ordered), size=size, replace=False)
    return sorted(ordered[int(i)] for i in chosen)


def certificates_in_use() -> list[Certificate]:
    """Passed certificates of versions that have a run outside certification, drift checks and teaching (the version
    is used), each the newest passed one of its version and reference set."""
    used = (
        JudgeRun.objects.filter(
            version__isnull=False,
            certificate__isnull=True,
            drift_check__isnull=True,
            teaching_as_parent__isnull=True,
            teaching_as_taught__isnull=True,
        )
        .values_list("version_id", flat=True)
        .distinct()
    )
    return list(
        Certificate.objects.filter(status=CertificateStatus.PASSED, version_id__in=used)
        .select_related("version", "reference_set")
        .order_by("pk")
    )


def drift_checks_start(*, sample_size: int = DRIFT_SAMPLE_SIZE, seed: int | None = None) -> int:
    """Start a drift check for each certificate in use that has none open. Safe twice: a certificate has at most one
    open check (a database constraint). Returns how many started."""
    from judging.services import LaunchError, judge_run_launch  # noqa: PLC0415 - judging.services calls back here

    started = 0
    for certificate in certificates_in_use():
        if DriftCheck.objects.filter(certificate=certificate).exclude(status=DriftCheckStatus.DONE).exists():
            continue
        check_seed = secrets.randbits(48) if seed is None else seed
        sample = drift_sample(
            _reference_response_ids(certificate.reference_set, certificate.version), seed=check_seed, size=sample_size
        )
        try:
            with transaction.atomic():
                check = DriftCheck.objects.create(certificate=certificate, seed=check_seed, sample_size=len(sample))
                run = judge_run_launch(
                    dataset=certificate.reference_set.dataset,
                    config=fresh_config(certificate.version),
                    launched_by=certificate.requested_by,
                    response_ids=sample,
                    name=_free_name(certificate.reference_set.dataset, f"drift check {certificate.version.short}"),
                )
                DriftCheck.objects.filter(pk=check.pk).update(run=run)
        except IntegrityError:
            continue  # another beat started this certificate's check first
        except LaunchError as exc:
            log.warning("drift check of certificate %s not started: %s", certificate.pk, exc)
            continue
        started += 1
    return started


def drift_check_evaluate(*, check_id: int) -> str:
    """Compare the check's run with the certified scores; suspend the certificate when the provider names another
    model or the paired test finds the scores moved. Safe twice: claimed running → evaluating."""
    claimed = DriftCheck.objects.filter(
        pk=check_id,
        status=DriftCheckStatus.RUNNING,
        run__status__in=[RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.STOPPED_BUDGET],
    ).update(status=DriftCheckStatus.EVALUATING, evaluation_claimed_at=(claim := timezone.now()))
    if not claimed:
        return "not claimed"
    check = DriftCheck.objects.select_related("run", "run__version", "certificate", "certificate__version").get(
        pk=check_id
    )
    outcome, reason = _drift_outcome(check)
    with transaction.atomic():
        stored = DriftCheck.objects.filter(
            pk=check_id, status=DriftCheckStatus.EVALUATING, evaluation_claimed_at=claim
        ).update(status=DriftCheckStatus.DONE, drifted=reason is not None, outcome=outcome, finished_at=timezone.now())
        if not stored:
            return "claim lost"
        if reason is not None:
            certificate_suspend(certificate_id=check.certificate_id, reason=reason)
    return "drifted" if reason is not None else "steady"


def _drift_outcome(check: DriftCheck) -> tuple[dict[str, Any], str | None]:
    """(the evidence, the reason to suspend or None)."""
    from judging.statistics.drift import drift_decision, signed_rank_p  # noqa: PLC0415 - scipy

    run, certificate = check.run, check.certificate
    assert run is not None
    outcome: dict[str, Any] = {"seed": check.seed, "sample_size": check.sample_size, "run": run.pk}
    if run.status != RunStatus.SUCCEEDED:
        outcome["undefined"] = f"the drift run ended {run.status}; the next check tries again"
        return outcome, None
    certified_model = certificate.version.provider_model
    models = sorted(provider_models_of_run(run))
    outcome["provider_models"] = models
    if models and models != [certified_model]:
        return outcome, (
            f"the provider now reports model {', '.join(models)} instead of the certified {certified_model} "
            f"(drift check {check.pk}, {timezone.now():%Y-%m-%d %H:%M} UTC)"
        )
    if run.version_id != certificate.version_id:
        return outcome, (
            f"the judge no longer has the certified fingerprint {certificate.version.short} (drift check {check.pk})"
        )
    if certificate.run is None:
        outcome["undefined"] = "the certification run was deleted, so there are no certified scores to compare with"
        return outcome, None
    certified_judge = certificate.run.judge_id
    per_aspect: dict[str, dict[str, Any]] = {}
    for aspect in sorted(set(certificate.results)):
        certified = dict(
            JudgeScore.objects.filter(judge_id=certified_judge, aspect_name=aspect).values_list("response_id", "value")
        )
        current = dict(
            JudgeScore.objects.filter(judge_id=run.judge_id, aspect_name=aspect).values_list("response_id", "value")
        )
        paired = sorted(set(certified) & set(current))
        per_aspect[aspect] = signed_rank_p([certified[r] for r in paired], [current[r] for r in paired])
    decision = drift_decision(per_aspect)
    outcome.update({"aspects": per_aspect, "decision": decision})
    if decision["drifted"]:
        moved = ", ".join(
            f"{a} (p = {per_aspect[a]['p_value']:.4g}, n = {per_aspect[a]['n']})" for a in decision["moved"]
        )
        return outcome, (
            f"scores moved beyond sampling error on {moved}: {decision['test']}, Bonferroni over "
            f"{decision['aspects_tested']} aspect(s) at α = {decision['alpha']:g} (drift check {check.pk})"
        )
    return outcome, None


# ---------------------------------------------------------------- teaching from human ratings

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
    from judging.services import LaunchError, judge_run_launch  # noqa: PLC0415 - judging.services calls back here
    from judging.statistics.judge_comparison import MIN_UNITS  # noqa: PLC0415 - numpy

    if not 1 <= per_level <= MAX_PER_LEVEL:
        raise CertificationError(f"exemplars per level must lie between 1 and {MAX_PER_LEVEL}, not {per_level}")
    if not 0.0 < alpha < 1.0:
        raise CertificationError(f"the significance level must lie strictly between 0 and 1, not {alpha}")
    method = version.config_snapshot.get("method")
    if method not in CERTIFIABLE_METHODS:
        raise CertificationError(
            f"a {method} judge cannot be taught rated examples: its prompt scores one answer at a time only in "
            f"methods {', '.join(CERTIFIABLE_METHODS)}"
        )
    exemplars, record = _choose_exemplars(version, reference_set, per_level=per_level, seed=seed)
    if not exemplars:
        raise CertificationError(
            "no answer in the reference set was scored by at least two raters on an aspect this judge scores, so "
            "there is no agreement to choose rated examples by"
        )
    shown = {e["response_id"] for e in exemplars}
    held_out = [r for r in _reference_response_ids(reference_set, version) if r not in shown]
    if len(held_out) < MIN_UNITS:
        raise CertificationError(
            f"only {len(held_out)} answer(s) of the reference set remain once the {len(shown)} examples are left "
            f"out; comparing the two versions needs at least {MIN_UNITS} held-out answers"
        )
    taught_config = {**fresh_config(version), "exemplars": exemplars}
    dataset = reference_set.dataset
    with transaction.atomic():
        try:
            parent_run = judge_run_launch(
                dataset=dataset,
                config=fresh_config(version),
                launched_by=requested_by,
                response_ids=held_out,
                name=_free_name(dataset, f"teaching {version.short}: as it was"),
            )
            taught_run = judge_run_launch(
                dataset=dataset,
                config=taught_config,
                launched_by=requested_by,
                response_ids=held_out,
                name=_free_name(dataset, f"teaching {version.short}: with {len(exemplars)} examples"),
            )
        except LaunchError as exc:
            raise CertificationError(str(exc)) from None
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
    claimed = JudgeTeaching.objects.filter(
        pk=teaching_id,
        status=TeachingStatus.RUNNING,
        parent_run__in=settled,
        taught_run__in=settled,
    ).update(status=TeachingStatus.EVALUATING, evaluation_claimed_at=(claim := timezone.now()))
    if not claimed:
        return "not claimed"
    teaching = JudgeTeaching.objects.select_related(
        "parent", "reference_set", "parent_run", "taught_run", "taught_run__version", "parent_run__version"
    ).get(pk=teaching_id)
    decision, reason, evidence = _teaching_decision(teaching)
    taught_version = teaching.taught_run.version if teaching.taught_run is not None else None
    with transaction.atomic():
        stored = JudgeTeaching.objects.filter(
            pk=teaching_id, status=TeachingStatus.EVALUATING, evaluation_claimed_at=claim
        ).update(
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
    from judging.statistics.results import undefined  # noqa: PLC0415 - see above

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


# ---------------------------------------------------------------- recovery

# An evaluation takes seconds; one still claimed after this long belongs to a worker that died.
EVALUATION_LEASE_S = 600


def evaluations_reclaim_stale(*, older_than_s: float = EVALUATION_LEASE_S) -> int:
    """Hand back the certificates, drift checks and teachings whose evaluation was claimed more than ``older_than_s``
    seconds ago (their worker died mid-evaluation) and send their evaluation again; also resend the evaluation of
    those whose runs have ended but which nobody claimed (the message was lost). Safe twice: each hand-back is a
    conditional update on the claim it found, and the evaluation claims again. Returns how many were handed back."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    stale = Q(evaluation_claimed_at__lt=cutoff) | Q(evaluation_claimed_at__isnull=True)
    kinds: list[tuple[Any, str, str, str, Q]] = [
        (
            Certificate,
            CertificateStatus.EVALUATING,
            CertificateStatus.PENDING,
            CERTIFICATE_EVALUATE,
            Q(run__status__in=ENDED_RUN_STATUSES),
        ),
        (
            DriftCheck,
            DriftCheckStatus.EVALUATING,
            DriftCheckStatus.RUNNING,
            DRIFT_CHECK_EVALUATE,
            Q(run__status__in=ENDED_RUN_STATUSES),
        ),
        (
            JudgeTeaching,
            TeachingStatus.EVALUATING,
            TeachingStatus.RUNNING,
            TEACHING_EVALUATE,
            Q(parent_run__status__in=ENDED_RUN_STATUSES, taught_run__status__in=ENDED_RUN_STATUSES),
        ),
    ]
    handed_back = 0
    for model, evaluating, waiting, task, runs_ended in kinds:
        with transaction.atomic():
            for pk, claimed_at in model.objects.filter(stale, status=evaluating).values_list(
                "pk", "evaluation_claimed_at"
            ):
                if model.objects.filter(pk=pk, status=evaluating, evaluation_claimed_at=claimed_at).update(
                    status=waiting, evaluation_claimed_at=None
                ):
                    handed_back += 1
            for pk in model.objects.filter(runs_ended, status=waiting).values_list("pk", flat=True):
                run_task_enqueue(task, pk, on_commit=True)
    return handed_back
