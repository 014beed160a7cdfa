"""The judging app's models, one module per concern; Django looks for an app's models here, so this package
exports them all. Judges, runs and judgments are `runs`; versions, reference sets, certificates, drift checks and
teachings are `certification`; hybrid calibrations are `hybrid`. FActScore's models live in their own package
because that sub-app is one."""

from judging.models.certification import (
    Certificate,
    CertificateStatus,
    ClaimedEvaluation,
    DriftCheck,
    DriftCheckStatus,
    FrozenRowError,
    JudgeExemplar,
    JudgeTeaching,
    JudgeVersion,
    ReferenceRating,
    ReferenceSet,
    TeachingDecision,
    TeachingStatus,
)
from judging.models.hybrid import (
    HybridApplyStatus,
    HybridCalibration,
)
from judging.models.runs import (
    ACTIVE_RUN_STATUSES,
    ENDED_RUN_STATUSES,
    RUN_STATUS_LABELS,
    CachedCompletion,
    Judge,
    JudgeConfig,
    JudgeKind,
    JudgeRun,
    JudgeScore,
    Judgment,
    JudgmentStatus,
    ProviderCallRecord,
    ProviderSend,
    RunStatus,
    WorkerPing,
    settled_runs_q,
)

__all__ = [
    "ACTIVE_RUN_STATUSES",
    "ENDED_RUN_STATUSES",
    "RUN_STATUS_LABELS",
    "CachedCompletion",
    "Certificate",
    "CertificateStatus",
    "ClaimedEvaluation",
    "DriftCheck",
    "DriftCheckStatus",
    "FrozenRowError",
    "HybridApplyStatus",
    "HybridCalibration",
    "Judge",
    "JudgeConfig",
    "JudgeExemplar",
    "JudgeKind",
    "JudgeRun",
    "JudgeScore",
    "JudgeTeaching",
    "JudgeVersion",
    "Judgment",
    "JudgmentStatus",
    "ProviderCallRecord",
    "ProviderSend",
    "ReferenceRating",
    "ReferenceSet",
    "RunStatus",
    "TeachingDecision",
    "TeachingStatus",
    "WorkerPing",
    "settled_runs_q",
]

from judging.factscore.models import *  # noqa: F403 - FActScore models belong to this app
