"""FActScore arithmetic (pure: no ORM, no I/O).

Definitions (FActScore, Min et al. 2023, §3.1 and §4.2):
- answer score f(y) = supported facts / all facts of the answer;
- system score = mean of f(y) over the prompts the system answered (refusals excluded), reported
  with the % of prompts answered and the mean number of facts per answered prompt;
- estimator error per system = estimated − human score in points (0–100); |error| is the error
  rate, marked "+" / "−" when the estimate is over / under the human score by more than 5 points;
- ranking agreement: the estimator orders the systems exactly as the humans do.

Our choices where the paper leaves room, applied identically to humans and estimators:
- an answered prompt with zero facts has no score (0/0): it counts as responding and in facts per
  answer (as 0) but not in the mean score;
- an answer whose work failed (the provider failed, or the decomposition was empty or unreadable)
  is not found to refuse: it counts among the prompts and as responding, never in the mean score,
  and not in facts per answer, whose count it lacks. Each denominator is reported with its number;
- a fact labelled Irrelevant by a human is dropped before scoring, as the annotators were told to
  remove such facts without verifying them; `irrelevant="unsupported"` counts them as failures;
- with several raters, each rater's own fact list (after splits, rewordings and additions) gives
  that rater's answer score, and the human answer score is the mean over raters.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judging.records import record_fields

SUPPORTED = "supported"
NOT_SUPPORTED = "not_supported"
IRRELEVANT = "irrelevant"
HUMAN_LABELS = (SUPPORTED, NOT_SUPPORTED, IRRELEVANT)
MARK_THRESHOLD_POINTS = 5.0


def answer_score(labels: Iterable[str | bool], *, irrelevant: str = "exclude") -> float | None:
    """Fraction of supported facts; None when no fact remains to be scored.

    Labels are booleans (an estimator's verdict) or human labels. An unknown verdict (None) never
    reaches here: the caller decides whether it counts as unsupported.
    """
    if irrelevant not in ("exclude", "unsupported"):
        raise ValueError("irrelevant must be 'exclude' or 'unsupported'")
    supported = total = 0
    for label in labels:
        if label == IRRELEVANT and irrelevant == "exclude":
            continue
        total += 1
        if label is True or label == SUPPORTED:
            supported += 1
    return supported / total if total else None


def human_answer_score(labels_by_rater: Sequence[Sequence[str]], *, irrelevant: str = "exclude") -> float | None:
    """Mean over raters of each rater's answer score; raters left with no scorable fact are skipped."""
    scores = [s for s in (answer_score(labels, irrelevant=irrelevant) for labels in labels_by_rater) if s is not None]
    return sum(scores) / len(scores) if scores else None


@dataclass(frozen=True)
class AnswerOutcome:
    system: str
    refused: bool
    n_facts: int  # facts found in the answer (0 for a refusal)
    score: float | None  # answer score, None when refused, failed or without scorable facts
    failed: bool = False  # the run could not score it (a provider failure, an unreadable decomposition)


@dataclass(frozen=True)
class SystemScore:
    system: str
    n_prompts: int
    n_responding: int
    n_scored: int
    pct_responding: float | None  # 0–100, of n_prompts
    factscore: float | None  # 0–1, mean over the n_scored answers
    facts_per_answer: float | None  # mean over the n_counted responding answers whose facts are known
    n_refused: int = 0
    n_no_facts: int = 0
    n_failed: int = 0
    n_counted: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            **record_fields(
                self,
                "system n_prompts n_responding n_scored n_refused n_no_facts n_failed pct_responding factscore "
                "facts_per_answer",
            ),
            "denominators": {
                "pct_responding": self.n_prompts,
                "factscore": self.n_scored,
                "facts_per_answer": self.n_counted,
            },
        }


def system_scores(outcomes: Iterable[AnswerOutcome], systems: Sequence[str] | None = None) -> list[SystemScore]:
    """One row per system, in the given order (else first-seen order)."""
    grouped: dict[str, list[AnswerOutcome]] = defaultdict(list)
    order: list[str] = list(systems or [])
    for outcome in outcomes:
        if outcome.system not in grouped and outcome.system not in order:
            order.append(outcome.system)
        grouped[outcome.system].append(outcome)
    rows = []
    for system in order:
        answers = grouped.get(system, [])
        failed = [a for a in answers if a.failed]
        refused = [a for a in answers if a.refused and not a.failed]
        responding = [a for a in answers if a.failed or not a.refused]
        counted = [a for a in responding if not a.failed]
        scored = [a.score for a in counted if a.score is not None]
        rows.append(
            SystemScore(
                system=system,
                n_prompts=len(answers),
                n_responding=len(responding),
                n_scored=len(scored),
                pct_responding=100.0 * len(responding) / len(answers) if answers else None,
                factscore=sum(scored) / len(scored) if scored else None,
                facts_per_answer=sum(a.n_facts for a in counted) / len(counted) if counted else None,
                n_refused=len(refused),
                n_no_facts=len(counted) - len(scored),
                n_failed=len(failed),
                n_counted=len(counted),
            )
        )
    return rows


def competition_ranks(values: Mapping[str, float]) -> dict[str, int]:
    """1 = highest; ties share the best rank ("1224" ranking), so tied systems compare equal."""
    ordered = sorted(values.values(), reverse=True)
    return {key: ordered.index(value) + 1 for key, value in values.items()}


@dataclass(frozen=True)
class SystemComparison:
    system: str
    n_answers: int
    human: float  # 0–1
    estimated: float  # 0–1
    error_points: float  # estimated − human, in points (0–100 scale)
    error_rate: float  # |error_points|
    mark: str  # "+", "-" or ""
    human_rank: int
    estimated_rank: int

    def as_dict(self) -> dict[str, object]:
        return record_fields(
            self, "system n_answers human estimated error_points error_rate mark human_rank estimated_rank"
        )


@dataclass(frozen=True)
class EstimatorEvaluation:
    systems: list[SystemComparison]
    ranking_equal: bool | None  # None with fewer than two systems to rank
    mean_error_rate: float | None

    def as_dict(self) -> dict[str, object]:
        return {
            "systems": [row.as_dict() for row in self.systems],
            "ranking_equal": self.ranking_equal,
            "mean_error_rate": self.mean_error_rate,
        }


def error_mark(error_points: float, threshold: float = MARK_THRESHOLD_POINTS) -> str:
    # Rounded so that 65% vs 60% (5.000000000000004 in floats) is exactly 5 points, not "over 5".
    error_points = round(error_points, 9)
    if error_points > threshold:
        return "+"
    if error_points < -threshold:
        return "-"
    return ""


def evaluate_estimator(
    human: Mapping[Any, tuple[str, float | None]],
    estimated: Mapping[Any, tuple[str, float | None]],
    systems: Sequence[str] | None = None,
) -> EstimatorEvaluation:
    """Compare per-system FActScores on the answers both sides scored.

    `human` and `estimated` map an answer key to (system, answer score or None). Only answers with
    a score on both sides count, so neither side is averaged over answers the other never saw.
    """
    paired: dict[str, list[tuple[float, float]]] = defaultdict(list)
    order: list[str] = list(systems or [])
    for key, (system, human_score) in human.items():
        if key not in estimated:
            continue
        est_system, est_score = estimated[key]
        if human_score is None or est_score is None or est_system != system:
            continue
        if system not in order:
            order.append(system)
        paired[system].append((human_score, est_score))
    human_means: dict[str, float] = {}
    est_means: dict[str, float] = {}
    counts: dict[str, int] = {}
    for system in order:
        pairs = paired.get(system)
        if not pairs:
            continue
        counts[system] = len(pairs)
        human_means[system] = sum(h for h, _ in pairs) / len(pairs)
        est_means[system] = sum(e for _, e in pairs) / len(pairs)
    human_ranks = competition_ranks(human_means)
    est_ranks = competition_ranks(est_means)
    rows = []
    for system in human_means:
        error_points = 100.0 * (est_means[system] - human_means[system])
        rows.append(
            SystemComparison(
                system=system,
                n_answers=counts[system],
                human=human_means[system],
                estimated=est_means[system],
                error_points=error_points,
                error_rate=abs(error_points),
                mark=error_mark(error_points),
                human_rank=human_ranks[system],
                estimated_rank=est_ranks[system],
            )
        )
    ranking_equal = (human_ranks == est_ranks) if len(rows) >= 2 else None
    mean_error = sum(r.error_rate for r in rows) / len(rows) if rows else None
    return EstimatorEvaluation(systems=rows, ranking_equal=ranking_equal, mean_error_rate=mean_error)
