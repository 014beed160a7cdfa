"""The protocol that the three evaluations of a judge version share: certificates, drift checks and teachings.

Each runs the version afresh (reply cache off) on answers of a frozen reference set through an ordinary judge run.
When its runs have ended, one worker claims it with a conditional update and a stamp, and stores its outcome only
under that claim, so that a second delivery of the same message does nothing. The one stale-evaluation reclaim hands
back those whose worker died mid-evaluation and resends those whose message was lost."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from annotations.models import Dataset
from judging.enqueue import CERTIFICATE_EVALUATE, DRIFT_CHECK_EVALUATE, TEACHING_EVALUATE, run_task_enqueue
from judging.models import (
    ENDED_RUN_STATUSES,
    Certificate,
    CertificateStatus,
    DriftCheck,
    DriftCheckStatus,
    JudgeRun,
    JudgeTeaching,
    JudgeVersion,
    TeachingStatus,
)
from judging.services import LaunchError, free_run_name, judge_run_launch

# Methods whose score is one number per answer and aspect, which the alternative-annotator test compares with raters;
# an error-span judge's is its MQM score, compared with the raters' MQM scores.
CERTIFIABLE_METHODS = ("single", "reference", "summarize_then_judge", "error_spans")
# Methods whose prompt can show rated examples, which teaching adds.
TEACHABLE_METHODS = ("single", "reference", "summarize_then_judge")
# An evaluation takes seconds; one still claimed after this long belongs to a worker that died.
EVALUATION_LEASE_S = 600


class CertificationError(ValueError):
    """A request that cannot be carried out; the message names the problem."""


def evaluable_or_error(version: JudgeVersion, methods: tuple[str, ...], *, refusal: str) -> None:
    """Refuse a version whose method is not among `methods`: "a <method> judge cannot be " then `refusal`, in which
    {methods} names them."""
    method = version.config_snapshot.get("method")
    if method not in methods:
        raise CertificationError(f"a {method} judge cannot be " + refusal.format(methods=", ".join(methods)))


def probability_or_error(value: float, name: str) -> None:
    """Refuse a level or rate outside the open interval (0, 1)."""
    if not 0.0 < value < 1.0:
        raise CertificationError(f"{name} must lie strictly between 0 and 1, not {value}")


def fresh_config(version: JudgeVersion) -> dict[str, Any]:
    """The version's config, with the reply cache off: a certificate or a drift check must hear the provider now."""
    return {**version.config_snapshot, "cache": False}


def evaluation_run_launch(
    *, dataset: Dataset, config: dict[str, Any], launched_by: User | None, response_ids: list[int], name: str
) -> JudgeRun:
    """Launch one run of an evaluation under a name not yet taken in the dataset; a refusal is a CertificationError."""
    try:
        return judge_run_launch(
            dataset=dataset,
            config=config,
            launched_by=launched_by,
            response_ids=response_ids,
            name=free_run_name(dataset, name[:190]),
        )
    except LaunchError as exc:
        raise CertificationError(str(exc)) from None


def evaluation_claim(ready: QuerySet[Any], *, evaluating: str) -> datetime | None:
    """Claim the evaluation that `ready` finds (it filters on the waiting status and ended runs): the claim's stamp,
    or None when there was nothing to claim (not ready, or another worker has it)."""
    claim = timezone.now()
    return claim if ready.update(status=evaluating, evaluation_claimed_at=claim) else None


def evaluation_store(claimed: QuerySet[Any], *, evaluating: str, claim: datetime, **outcome: Any) -> bool:
    """Store an evaluation's outcome only while this worker's claim still holds; False when the claim was lost."""
    return bool(claimed.filter(status=evaluating, evaluation_claimed_at=claim).update(**outcome))


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
