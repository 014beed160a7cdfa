"""Judge versions and what certifies, watches and teaches them: reference sets and their frozen ratings,
certificates, drift checks, exemplars and teachings."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from annotations.models.parts import NewestFirst, known_choice, user_or_null
from judging.models.runs import run_or_null


class JudgeVersion(models.Model):
    """What produced a set of judge scores: the model as the provider names it in its replies, the prompt template,
    the rubric text, the method and the scoring options, hashed into a fingerprint. Any change is another version."""

    fingerprint = models.CharField(max_length=64, unique=True)
    config_name = models.CharField(max_length=150)
    provider_model = models.CharField(max_length=200)
    material = models.JSONField(help_text="Everything the fingerprint hashes, to show what differs between versions.")
    config_snapshot = models.JSONField(help_text="The config of the first run of this version, to run it again.")
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="children",
        help_text="The version this one was taught rated examples from, when it was made by teaching.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("judge version")
        verbose_name_plural = _("judge versions")
        ordering = ["config_name", "created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(fingerprint__regex=r"^[0-9a-f]{64}$"), name="judge_version_fingerprint_sha256"
            )
        ]

    def __str__(self) -> str:
        return f"{self.config_name} @ {self.provider_model} [{self.fingerprint[:12]}]"

    @property
    def short(self) -> str:
        return self.fingerprint[:12]


class ReferenceSet(NewestFirst):
    """Human ratings named as the yardstick for judges: a snapshot taken when named, so later edits of the ratings,
    new ratings or deleted ones never change what a certificate was measured against."""

    name = models.CharField(max_length=200)
    dataset = models.ForeignKey("annotations.Dataset", on_delete=models.CASCADE, related_name="reference_sets")
    campaign = models.ForeignKey(
        "annotations.Campaign", null=True, blank=True, on_delete=models.SET_NULL, related_name="reference_sets"
    )
    owner = user_or_null()
    frozen_at = models.DateTimeField()

    class Meta(NewestFirst.Meta):
        verbose_name = _("reference set")
        verbose_name_plural = _("reference sets")
        constraints = [
            models.UniqueConstraint(fields=["dataset", "name"], name="reference_set_name_unique_per_dataset")
        ]

    def __str__(self) -> str:
        return self.name


class FrozenRowError(RuntimeError):
    """A reference rating is a snapshot: it is written once, with its set, and never changed."""


class ReferenceRating(models.Model):
    """One human rating as it was when its reference set was named."""

    reference_set = models.ForeignKey(ReferenceSet, on_delete=models.CASCADE, related_name="ratings")
    response = models.ForeignKey("annotations.Response", on_delete=models.CASCADE, related_name="+")
    aspect_name = models.CharField(max_length=200)
    aspect_level = models.CharField(max_length=20)
    rater_key = models.CharField(max_length=220)
    value = models.FloatField()

    class Meta:
        verbose_name = _("reference rating")
        verbose_name_plural = _("reference ratings")
        constraints = [
            models.UniqueConstraint(
                fields=["reference_set", "response", "aspect_name", "rater_key"], name="one_reference_rating_per_unit"
            )
        ]

    def __str__(self) -> str:
        return f"{self.reference_set_id}: {self.rater_key} {self.aspect_name}={self.value}"

    def save(self, *args: object, **kwargs: object) -> None:
        if self.pk is not None:
            raise FrozenRowError("a reference rating is frozen with its set and cannot be changed")
        super().save(*args, **kwargs)  # type: ignore[arg-type]


class CertificateStatus(models.TextChoices):
    PENDING = "pending"
    EVALUATING = "evaluating"
    PASSED = "passed"
    FAILED = "failed"
    UNDEFINED = "undefined"
    SUSPENDED = "suspended"


class ClaimedEvaluation(NewestFirst):
    """An evaluation a worker claims once its runs have ended: a certificate, a drift check or a teaching. The claim
    stamp lets the stale-evaluation reclaim hand one back whose worker died, and an evaluation writes its result only
    while its own claim still holds."""

    evaluation_claimed_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a worker claimed the evaluation; one that has stayed claimed too long is handed to another.",
    )

    class Meta(NewestFirst.Meta):
        abstract = True


class Certificate(ClaimedEvaluation):
    """The alternative-annotator test of one judge version on a reference set, per aspect; the version counts as
    certified only while a certificate of it has passed and is not suspended."""

    version = models.ForeignKey(JudgeVersion, on_delete=models.CASCADE, related_name="certificates")
    reference_set = models.ForeignKey(ReferenceSet, on_delete=models.PROTECT, related_name="certificates")
    run = run_or_null("certificate")
    status = models.CharField(max_length=12, choices=CertificateStatus.choices, default=CertificateStatus.PENDING)
    epsilon = models.FloatField()
    q = models.FloatField()
    fingerprint = models.CharField(max_length=64, help_text="The version's fingerprint, kept with the verdict.")
    results = models.JSONField(default=dict, blank=True, help_text="Per aspect: n, ε, ω, ρ and the verdict.")
    reason = models.TextField(blank=True)
    requested_by = user_or_null("judge_certificates")
    certified_at = models.DateTimeField(null=True, blank=True)
    suspended_at = models.DateTimeField(null=True, blank=True)
    suspension_reason = models.TextField(blank=True)

    class Meta(ClaimedEvaluation.Meta):
        verbose_name = _("certificate")
        verbose_name_plural = _("certificates")
        constraints = [
            known_choice("status", CertificateStatus.values, "certificate_status_valid"),
            models.CheckConstraint(
                condition=~models.Q(status="suspended")
                | (models.Q(suspended_at__isnull=False) & ~models.Q(suspension_reason="")),
                name="suspended_certificate_has_reason",
            ),
            models.CheckConstraint(
                condition=models.Q(epsilon__gte=0) & models.Q(epsilon__lt=1) & models.Q(q__gt=0) & models.Q(q__lt=1),
                name="certificate_epsilon_q_in_range",
            ),
        ]

    def __str__(self) -> str:
        return f"certificate {self.pk} of {self.version}: {self.status}"


class DriftCheckStatus(models.TextChoices):
    """The way of an evaluation that launches runs: they run, then it is evaluated, then done."""

    RUNNING = "running"
    EVALUATING = "evaluating"
    DONE = "done"


# A teaching goes the way a drift check does: its runs, then its evaluation, then done.
TeachingStatus = DriftCheckStatus


class StagedEvaluation(ClaimedEvaluation):
    """An evaluation that launches runs and goes their way (a drift check, a teaching): when it is done, it says when
    it finished."""

    status = models.CharField(max_length=12, choices=DriftCheckStatus.choices, default=DriftCheckStatus.RUNNING)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta(ClaimedEvaluation.Meta):
        abstract = True


class DriftCheck(StagedEvaluation):
    """A re-judging of a seeded random sample of a certificate's reference set, compared with the certified scores."""

    certificate = models.ForeignKey(Certificate, on_delete=models.CASCADE, related_name="drift_checks")
    run = run_or_null("drift_check")
    seed = models.BigIntegerField()
    sample_size = models.PositiveIntegerField()
    drifted = models.BooleanField(null=True, blank=True)
    outcome = models.JSONField(default=dict, blank=True)

    class Meta(StagedEvaluation.Meta):
        verbose_name = _("drift check")
        verbose_name_plural = _("drift checks")
        constraints = [
            known_choice("status", DriftCheckStatus.values, "drift_status_valid"),
            models.UniqueConstraint(
                fields=["certificate"],
                condition=~models.Q(status="done"),
                name="one_open_drift_check_per_certificate",
            ),
        ]

    def __str__(self) -> str:
        return f"drift check {self.pk} of certificate {self.certificate_id}"


class JudgeExemplar(models.Model):
    """An answer shown to a judge version as a rated example. The database refuses any score of that version for
    the answer (a trigger on judge scores and on a run's version), so the example never counts in the version's
    certification or statistics."""

    version = models.ForeignKey(JudgeVersion, on_delete=models.CASCADE, related_name="exemplars")
    response = models.ForeignKey("annotations.Response", on_delete=models.CASCADE, related_name="+")
    aspect_name = models.CharField(max_length=200)
    label = models.FloatField(help_text="The raters' consensus score shown with the example.")

    class Meta:
        verbose_name = _("judge exemplar")
        verbose_name_plural = _("judge exemplars")
        constraints = [
            models.UniqueConstraint(
                fields=["version", "response", "aspect_name"], name="one_exemplar_per_answer_aspect"
            )
        ]

    def __str__(self) -> str:
        return f"exemplar {self.response_id} of {self.version_id}: {self.aspect_name}={self.label}"


class TeachingDecision(models.TextChoices):
    KEPT = "kept"
    REJECTED = "rejected"
    UNDEFINED = "undefined"


class JudgeTeaching(StagedEvaluation):
    """A judge version taught rated examples from a reference set: the old version and the taught one judged on the
    same held-out answers, and the judge-comparison test's decision whether the taught version is kept."""

    parent = models.ForeignKey(JudgeVersion, on_delete=models.CASCADE, related_name="teachings")
    reference_set = models.ForeignKey(ReferenceSet, on_delete=models.PROTECT, related_name="teachings")
    per_level = models.PositiveSmallIntegerField(help_text="Exemplars asked for per score level and aspect.")
    seed = models.BigIntegerField(help_text="Breaks ties between equally agreed answers.")
    alpha = models.FloatField(help_text="The significance level of the comparison.")
    selection = models.JSONField(
        default=dict, help_text="Per aspect: the exemplars chosen, their agreement, and the levels that had none."
    )
    held_out = models.PositiveIntegerField(help_text="Reference answers left after removing the exemplars.")
    parent_run = run_or_null("teaching_as_parent")
    taught_run = run_or_null("teaching_as_taught")
    taught_version = models.ForeignKey(
        JudgeVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="taught_by"
    )
    decision = models.CharField(max_length=10, choices=TeachingDecision.choices, blank=True)
    evidence = models.JSONField(default=dict, blank=True, help_text="Per aspect: n, both r, Williams's t and p.")
    reason = models.TextField(blank=True)
    requested_by = user_or_null("judge_teachings")

    class Meta(StagedEvaluation.Meta):
        verbose_name = _("judge teaching")
        verbose_name_plural = _("judge teachings")
        constraints = [
            known_choice("status", TeachingStatus.values, "teaching_status_valid"),
            models.CheckConstraint(
                condition=(
                    models.Q(status="done") & models.Q(decision__in=TeachingDecision.values) & ~models.Q(reason="")
                )
                | (~models.Q(status="done") & models.Q(decision="")),
                name="teaching_decided_when_done_with_reason",
            ),
            models.CheckConstraint(
                condition=models.Q(alpha__gt=0) & models.Q(alpha__lt=1) & models.Q(per_level__gte=1),
                name="teaching_alpha_and_per_level_in_range",
            ),
        ]

    def __str__(self) -> str:
        return f"teaching {self.pk} of {self.parent}: {self.decision or self.status}"
