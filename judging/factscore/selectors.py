"""Reads for FActScore: scoped lookups, the per-system report, estimator evaluation, label agreement."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, QuerySet, Sum
from django.http import Http404

from annotations.selectors import datasets_for_user
from annotations.slots import slot_counts
from judging.factscore import scoring
from judging.factscore.models import (
    FACT_REVIEW_SLOTS,
    AtomicFact,
    FactAnswer,
    FactAnswerOutcome,
    FactAnswerStage,
    FactLabel,
    FactOrigin,
    FactReviewAssignment,
    FactReviewCampaign,
    FactReviewStatus,
    FactReviewTask,
    KnowledgeCorpus,
)
from judging.factscore.results import factscore_runs_unprojected
from judging.models import Judge, JudgeRun
from judging.statistics.agreement import alpha_bootstrap_ci, krippendorff_alpha, ratings_from_long

LABEL_CODES = {"supported": 0.0, "not_supported": 1.0, "irrelevant": 2.0}


# --- scope -----------------------------------------------------------------------------------------


def _require_researcher(user: Any) -> None:
    if not user.is_authenticated or not user.is_staff:
        raise PermissionDenied("researchers only")


def factscore_runs_for_user(user: Any) -> QuerySet[JudgeRun]:
    if not user.is_authenticated or not user.is_staff:
        return JudgeRun.objects.none()
    return (
        JudgeRun.objects.filter(method="factscore", dataset__in=datasets_for_user(user))
        .select_related("judge", "dataset")
        .order_by("-created_at")
    )


def factscore_run_for_user_or_404(user: Any, run_id: int) -> JudgeRun:
    """403 for non-researchers, 404 for a run outside the researcher's datasets or not a factscore run."""
    _require_researcher(user)
    run = factscore_runs_for_user(user).filter(pk=run_id).first()
    if run is None:
        raise Http404("no such factscore run")
    return run


def fact_answer_for_user_or_404(user: Any, answer_id: int) -> FactAnswer:
    _require_researcher(user)
    answer = (
        FactAnswer.objects.filter(pk=answer_id, run__in=factscore_runs_for_user(user))
        .select_related("run__judge", "response__system", "response__turn__item")
        .first()
    )
    if answer is None:
        raise Http404("no such answer")
    return answer


def factscore_run_by_judge_name(dataset: Any, judge_name: str) -> JudgeRun | None:
    judge = Judge.objects.filter(dataset=dataset, name=judge_name).first()
    if judge is None:
        return None
    return JudgeRun.objects.filter(judge=judge, method="factscore").select_related("judge", "dataset").first()


def factscore_results_pending(run: JudgeRun) -> bool:
    return factscore_runs_unprojected().filter(pk=run.pk).exists()


def corpora_for_dataset(dataset: Any) -> QuerySet[KnowledgeCorpus]:
    return KnowledgeCorpus.objects.filter(dataset=dataset).order_by("name")


def review_campaigns_for_annotator(user: Any) -> QuerySet[FactReviewCampaign]:
    if not user.is_authenticated:
        return FactReviewCampaign.objects.none()
    return FactReviewCampaign.objects.filter(annotators__pk=user.pk, is_active=True).order_by("name")


def review_campaign_for_annotator(user: Any, campaign_id: int) -> FactReviewCampaign:
    """404 for an unknown campaign, 403 for someone outside its pool (or an inactive campaign)."""
    campaign = FactReviewCampaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        raise Http404("no such review campaign")
    if not user.is_authenticated or not campaign.is_active or not campaign.annotators.filter(pk=user.pk).exists():
        raise Http404("no such review campaign")
    return campaign


def leased_review(*, campaign: FactReviewCampaign, task_id: int, user: Any) -> FactReviewAssignment:
    """The annotator's open slot on that task; 404 otherwise (never reveals other people's tasks)."""
    assignment = (
        FactReviewAssignment.objects.filter(
            campaign=campaign, task_id=task_id, annotator_id=user.pk, status=FactReviewStatus.LEASED
        )
        .select_related("task__answer__response__turn__item")
        .first()
    )
    if assignment is None:
        raise Http404("no open review of this answer")
    return assignment


def review_progress(*, campaign: FactReviewCampaign, user: Any) -> dict[str, int]:
    total = FactReviewTask.objects.filter(campaign=campaign).count()
    done = slot_counts(pool=FACT_REVIEW_SLOTS, campaign=campaign, user=user).done
    return {"done": done, "total": total}


# --- report ----------------------------------------------------------------------------------------


def _system_order(run: JudgeRun) -> list[str]:
    return list(run.dataset.systems.order_by("position", "id").values_list("key", flat=True))


def answer_outcomes(run: JudgeRun) -> tuple[list[scoring.AnswerOutcome], int]:
    """Every finished answer (scored, refused, without facts or failed) as scoring input, and how many
    answers are still pending."""
    outcomes = []
    unfinished = 0
    for outcome, n_facts, score, system in FactAnswer.objects.filter(run=run).values_list(
        "outcome", "n_facts", "score", "response__system__key"
    ):
        if outcome == FactAnswerOutcome.PENDING:
            unfinished += 1
            continue
        refused = outcome == FactAnswerOutcome.REFUSED
        outcomes.append(
            scoring.AnswerOutcome(
                system=system,
                refused=refused,
                n_facts=0 if refused else n_facts,
                score=score if outcome == FactAnswerOutcome.SCORED else None,
                failed=outcome == FactAnswerOutcome.FAILED,
            )
        )
    planned = run.judgments.filter(sample=0).values("response_id").distinct().count()
    unfinished += max(0, planned - FactAnswer.objects.filter(run=run).count())
    return outcomes, unfinished


def human_answer_scores(
    run: JudgeRun, campaign: FactReviewCampaign | None = None
) -> dict[int, tuple[str, float | None]]:
    """FactAnswer id -> (system, human FActScore) over submitted reviews (each reviewer's own fact list)."""
    assignments = FactReviewAssignment.objects.filter(campaign__run=run, status=FactReviewStatus.SUBMITTED)
    if campaign is not None:
        assignments = assignments.filter(campaign=campaign)
    by_assignment: dict[int, list[str]] = defaultdict(list)
    answer_of: dict[int, int] = {}
    for assignment_id, answer_id, label in FactLabel.objects.filter(assignment__in=assignments).values_list(
        "assignment_id", "assignment__task__answer_id", "label"
    ):
        by_assignment[assignment_id].append(label)
        answer_of[assignment_id] = answer_id
    per_answer: dict[int, list[list[str]]] = defaultdict(list)
    for assignment_id, labels in by_assignment.items():
        per_answer[answer_of[assignment_id]].append(labels)
    systems = dict(FactAnswer.objects.filter(pk__in=per_answer).values_list("pk", "response__system__key"))
    return {aid: (systems[aid], scoring.human_answer_score(lists)) for aid, lists in per_answer.items()}


def estimated_answer_scores(run: JudgeRun) -> dict[int, tuple[str, float | None]]:
    return {
        pk: (system, score)
        for pk, system, score in FactAnswer.objects.filter(run=run, stage=FactAnswerStage.DONE).values_list(
            "pk", "response__system__key", "score"
        )
    }


def fact_label_agreement(run: JudgeRun, campaign: FactReviewCampaign | None = None) -> dict[str, Any]:
    """Nominal Krippendorff's alpha on the labels of model facts (a split or reworded fact is missing
    for the reviewer who replaced it), with a unit bootstrap 95% CI."""
    labels = FactLabel.objects.filter(
        fact__origin=FactOrigin.MODEL, fact__answer__run=run, assignment__status=FactReviewStatus.SUBMITTED
    )
    if campaign is not None:
        labels = labels.filter(assignment__campaign=campaign)
    rows = list(labels.values_list("fact_id", "assignment__annotator_id", "label"))
    ratings = ratings_from_long(
        [r[0] for r in rows], [r[1] for r in rows], [LABEL_CODES[r[2]] for r in rows], raters_consistent=True
    )
    return {
        "level": "nominal",
        "alpha": krippendorff_alpha(ratings, "nominal"),
        "ci95": alpha_bootstrap_ci(ratings, "nominal", n_resamples=1000, seed=0),
        "n_facts": ratings.n_units,
        "n_labels": ratings.n_ratings,
    }


def factscore_report(run: JudgeRun, *, include_answers: bool = False) -> dict[str, Any]:
    """The per-system table, and the estimator against the humans when reviews exist (stable JSON)."""
    outcomes, unfinished = answer_outcomes(run)
    systems = scoring.system_scores(outcomes, _system_order(run))
    human = human_answer_scores(run)
    estimated = estimated_answer_scores(run)
    report: dict[str, Any] = {
        "dataset": run.dataset.name,
        "judge": run.judge.name,
        "run_id": run.pk,
        "status": run.status,
        # The facts and scores below lag the run's judgments until the worker has projected them.
        "results_pending": factscore_results_pending(run),
        "definitions": {
            "factscore": "mean of supported facts / all facts (0-1) over the scored answers (denominators.factscore)",
            "pct_responding": "answers not found to refuse, in % of all finished answers (denominators.pct_responding);"
            " failed answers count as responding",
            "facts_per_answer": "mean number of facts verified over the responding answers whose facts are known"
            " (denominators.facts_per_answer: scored and no-facts answers)",
            "outcomes": "each answer is scored, refused, no_facts (nothing checkable) or failed (error says why)",
            "caps": "facts_found = facts verified + facts_dropped by the parser cap (200) or max_facts",
            "error_points": "estimated - human FActScore, in points (0-100); mark +/- beyond 5 points",
        },
        "systems": [row.as_dict() for row in systems],
        "unfinished_answers": unfinished,
        "facts_cut": _facts_cut(run),
        "human": None,
    }
    if human:
        evaluation = scoring.evaluate_estimator(human, estimated, _system_order(run))
        report["human"] = {
            "reviewed_answers": len(human),
            "estimator": evaluation.as_dict(),
            "agreement": fact_label_agreement(run),
        }
    if include_answers:
        report["answers"] = [
            {
                "answer_id": row["pk"],
                "item": row["response__turn__item__external_id"],
                "turn": row["response__turn__index"],
                "system": row["response__system__key"],
                "stage": row["stage"],
                "outcome": row["outcome"],
                "error_kind": row["error_kind"],
                "error": row["error"],
                "refused": row["outcome"] == FactAnswerOutcome.REFUSED,
                "refusal_rule": row["refusal_rule"],
                "n_facts": row["n_facts"],
                "facts_found": row["facts_found"],
                "facts_dropped": row["facts_dropped"],
                "caps": row["caps"],
                "repeated_facts": row["repeated_facts"],
                "n_supported": row["n_supported"],
                "n_unknown": row["n_unknown"],
                "score": row["score"],
                "human_score": human.get(row["pk"], (None, None))[1],
            }
            for row in FactAnswer.objects.filter(run=run)
            .order_by("response__turn__item__position", "response__turn__index", "response__position")
            .values(
                "pk",
                "response__turn__item__external_id",
                "response__turn__index",
                "response__system__key",
                "stage",
                "outcome",
                "error_kind",
                "error",
                "refusal_rule",
                "n_facts",
                "facts_found",
                "facts_dropped",
                "caps",
                "repeated_facts",
                "n_supported",
                "n_unknown",
                "score",
            )
        ]
    return report


def _facts_cut(run: JudgeRun) -> dict[str, int]:
    """What the caps removed over the run, and the repeats kept, so no fact goes missing unsaid."""
    totals = FactAnswer.objects.filter(run=run).aggregate(
        answers_capped=Count("id", filter=Q(facts_dropped__gt=0)),
        facts_found=Sum("facts_found"),
        facts_dropped=Sum("facts_dropped"),
        repeated_facts=Sum("repeated_facts"),
    )
    return {name: int(value or 0) for name, value in totals.items()}


def answer_drilldown(answer: FactAnswer) -> dict[str, Any]:
    """Facts with the estimator's verdict and evidence, and every reviewer's label (pseudonymous)."""
    facts = list(
        AtomicFact.objects.filter(answer=answer)
        .select_related("verdict", "parent", "review_assignment")
        .order_by("position", "id")
    )
    reviewer_names: dict[int, str] = {}
    rows = []
    labels_by_fact: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for fact_id, assignment_id, label in FactLabel.objects.filter(
        fact__answer=answer, assignment__status=FactReviewStatus.SUBMITTED
    ).values_list("fact_id", "assignment_id", "label"):
        name = reviewer_names.setdefault(assignment_id, f"reviewer {len(reviewer_names) + 1}")
        labels_by_fact[fact_id].append((name, label))
    for fact in facts:
        verdict = getattr(fact, "verdict", None) if fact.origin == FactOrigin.MODEL else None
        rows.append({"fact": fact, "verdict": verdict, "labels": labels_by_fact.get(fact.pk, [])})
    return {"answer": answer, "facts": rows}
