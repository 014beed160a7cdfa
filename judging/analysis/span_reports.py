"""Where an error-span judge and the human raters mark the same errors: span agreement of the judge against each
rater, against all raters pooled, and against the raters' majority.

`rater_span_agreement_report` is the human side alone: how far the raters of a campaign agree with each other on
where the errors are (the campaign's span-agreement panel).

The judge's spans are its judgments' (the first sample of each answer); only the errors whose quote was placed in
the answer have offsets, so only they take part, and the page says how many were not placed. The human side is the
raters' spans in the page's scope of ratings. Its MQM scores, an aspect value like any other, are compared with the
judge's score by the correlation levels the page shows for every aspect.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np

from annotations.spans.error_spans import Span
from judging.analysis.selectors import Answers, AspectInfo, RatingRows, judge_error_spans
from judging.analysis.span_selectors import CampaignGoldSpans, CampaignSpans
from judging.methods.error_spans import quote_placement, stored_spans
from judging.statistics.results import undefined
from judging.statistics.spans import (
    PrecisionRecall,
    SpanPair,
    character_agreement,
    gold_agreement,
    majority_spans,
    merge_overlapping,
    pairwise_agreement,
    span_agreement,
)
from judging.statistics.unitizing import UnitizedItem, unitizing_alpha, unitizing_alpha_bootstrap_ci


def _figures(pairs: list[SpanPair], *, with_categories: bool = True) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "answers": len(pairs),
        "character": character_agreement(pairs),
        "span": span_agreement(pairs, matching="overlap"),
    }
    if with_categories:
        figures["span_category"] = span_agreement(pairs, matching="overlap", with_category=True)
    return figures


def _no_pairs(reason: str) -> PrecisionRecall:
    return {
        "precision": undefined(reason),
        "recall": undefined(reason),
        "f1": undefined(reason),
        "candidate_units": 0,
        "reference_units": 0,
    }


def span_agreement_report(judge_id: int, aspect: AspectInfo, answers: Answers, ratings: RatingRows) -> dict[str, Any]:
    """The judge's span agreement with the raters on one span aspect; ``available`` is False when the judge marked
    no spans on it (a judge that scores the aspect some other way)."""
    from annotations.selectors import human_error_spans  # noqa: PLC0415 - span aspects only

    stored = judge_error_spans(judge_id, aspect.name)
    if not stored:
        return {"available": False}
    placement = quote_placement(stored.values())
    rows = np.flatnonzero(ratings.aspect_id == aspect.id)
    in_scope = {
        (int(answers.response_ids[answer]), int(rater))
        for answer, rater in zip(ratings.answer[rows], ratings.rater_id[rows], strict=True)
    }
    lengths = dict(zip(answers.response_ids.tolist(), answers.lengths.tolist(), strict=True))
    judged = {
        response_id: [error.span for error in stored_spans(spans) if error.located]
        for response_id, spans in stored.items()
    }
    by_rater: dict[int, list[SpanPair]] = defaultdict(list)
    by_answer: dict[int, list[list[Any]]] = defaultdict(list)
    for (response_id, rater_id), spans in sorted(human_error_spans(aspect_id=aspect.id).items()):
        if response_id not in judged or (response_id, rater_id) not in in_scope:
            continue
        by_rater[rater_id].append(SpanPair(lengths[response_id], judged[response_id], spans))
        by_answer[response_id].append(spans)
    raters = [
        {"rater": ratings.rater_pseudonyms.get(rater_id, str(rater_id)), **_figures(pairs)}
        for rater_id, pairs in sorted(by_rater.items(), key=lambda item: ratings.rater_pseudonyms.get(item[0], ""))
    ]
    pooled = [pair for pairs in by_rater.values() for pair in pairs]
    consensus = [
        SpanPair(lengths[response_id], judged[response_id], majority_spans(annotations, lengths[response_id]))
        for response_id, annotations in sorted(by_answer.items())
        if len(annotations) >= 2
    ]
    report: dict[str, Any] = {
        "available": True,
        "judged_answers": len(judged),
        "quotes": {key.replace(" ", "_"): value for key, value in placement.items()},
        "raters": raters,
        "undefined": None if pooled else "no answer has both the judge's spans and a rater's in this scope",
    }
    report["pooled"] = {**_figures(pooled), "answers": len(by_answer)}
    if consensus:
        report["consensus"] = {**_figures(consensus, with_categories=False), "answers": len(consensus)}
    else:
        reason = "no answer the judge marked has spans from two or more raters"
        report["consensus"] = {"answers": 0, "character": _no_pairs(reason), "span": _no_pairs(reason)}
    return report


# The raters' span agreement: the conventions shown, in order (level, matching, category-aware).
PAIRWISE_CONVENTIONS: dict[str, tuple[str, str, bool]] = {
    "character": ("character", "overlap", False),
    "character_category": ("character", "overlap", True),
    "span_overlap": ("span", "overlap", False),
    "span_overlap_category": ("span", "overlap", True),
    "span_exact_category": ("span", "exact", True),
}
SPAN_BOOTSTRAP_RESAMPLES = 1000
SPAN_BOOTSTRAP_SEED = 0


def _positional_items(
    answers: dict[int, dict[str, list[Span]]], lengths: dict[int, int], *, with_category: bool
) -> tuple[list[UnitizedItem], int]:
    """The answers as unitizing alpha reads them, and how many answers with two or more raters were left out.

    Unitizing alpha compares every rater with every other on one continuum, so each answer needs the same number of
    raters: the most common number (of two or more; the larger on a tie) is kept, and the answers with another are
    left out. A campaign's N raters per task are different people on different answers; each answer's raters are
    numbered in pseudonym order, which changes nothing when the same raters marked every answer. Each rater's
    overlapping spans are merged first (`merge_overlapping`)."""
    counts = Counter(len(by_rater) for by_rater in answers.values() if len(by_rater) >= 2)
    if not counts:
        return [], 0
    size = max(counts, key=lambda n: (counts[n], n))
    items = [
        UnitizedItem(
            lengths[response_id],
            {
                f"#{position + 1}": merge_overlapping(answers[response_id][name], with_category=with_category)
                for position, name in enumerate(sorted(answers[response_id]))
            },
        )
        for response_id in sorted(answers)
        if len(answers[response_id]) == size
    ]
    return items, sum(counts.values()) - counts[size]


def _alpha(
    answers: dict[int, dict[str, list[Span]]],
    lengths: dict[int, int],
    *,
    with_category: bool,
    n_resamples: int,
    seed: int,
) -> dict[str, Any]:
    items, left_out = _positional_items(answers, lengths, with_category=with_category)
    raters = len(items[0].spans_by_rater) if items else 0
    if not items:
        reason = "no answer was marked by two raters"
        return {
            "alpha": undefined(reason),
            "interval": {"low": None, "high": None, "undefined": reason},
            "answers": 0,
            "raters": 0,
            "left_out": left_out,
        }
    return {
        "alpha": unitizing_alpha(items, with_category=with_category)["alpha"],
        "interval": unitizing_alpha_bootstrap_ci(
            items, with_category=with_category, n_resamples=n_resamples, seed=seed
        ),
        "answers": len(items),
        "raters": raters,
        "left_out": left_out,
    }


# Each rater against gold: the conventions shown, in order (level, category-aware); spans match by overlap and a
# gold category holds the categories under it.
GOLD_CONVENTIONS: dict[str, tuple[str, bool]] = {
    "character": ("character", False),
    "character_category": ("character", True),
    "span_overlap": ("span", False),
    "span_overlap_category": ("span", True),
}


def _gold_report(raters: set[str], answers: dict[str, list[Any]], expecting: bool) -> dict[str, Any]:
    """Each rater's precision, recall and F1 against the gold spans of the gold answers they gave (see
    `gold_agreement`); every rater of the aspect is listed, those who answered no such gold with undefined figures."""
    rows = []
    for rater in sorted(raters | set(answers)):
        pairs = [SpanPair(answer.length, answer.given, answer.expected) for answer in answers.get(rater, [])]
        conventions = {
            key: gold_agreement(pairs, level="character" if level == "character" else "span", with_category=category)
            for key, (level, category) in GOLD_CONVENTIONS.items()
        }
        rows.append({"rater": rater, "answers": len(pairs), "conventions": conventions})
    return {"expecting": expecting, "answers": sum(len(given) for given in answers.values()), "raters": rows}


def rater_span_agreement_report(
    spans: CampaignSpans,
    gold: CampaignGoldSpans | None = None,
    *,
    n_resamples: int = SPAN_BOOTSTRAP_RESAMPLES,
    seed: int = SPAN_BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Per span aspect of a campaign: the raters' pairwise precision, recall and F1 under each convention of
    `PAIRWISE_CONVENTIONS`, and unitizing alpha with and without categories, each with a bootstrap interval over
    answers; with ``gold``, each rater's precision, recall and F1 against the gold spans under each convention of
    `GOLD_CONVENTIONS`. The raters excluded now are not among the raters; the report names them."""
    aspects = []
    for aspect in spans.aspects:
        answers = spans.spans[aspect.id]
        items = [
            UnitizedItem(spans.lengths[response_id], by_rater) for response_id, by_rater in sorted(answers.items())
        ]
        pairwise: dict[str, Any] = {}
        for key, (level, matching, with_category) in PAIRWISE_CONVENTIONS.items():
            pairwise[key] = pairwise_agreement(
                items,
                level="character" if level == "character" else "span",
                matching="exact" if matching == "exact" else "overlap",
                with_category=with_category,
            )
        aspects.append(
            {
                "aspect": aspect.name,
                "label": aspect.label or aspect.name,
                "answers": sum(len(by_rater) >= 2 for by_rater in answers.values()),
                "raters": len({name for by_rater in answers.values() for name in by_rater}),
                "pairwise": pairwise,
                "alpha": {
                    "category": _alpha(answers, spans.lengths, with_category=True, n_resamples=n_resamples, seed=seed),
                    "whole": _alpha(answers, spans.lengths, with_category=False, n_resamples=n_resamples, seed=seed),
                },
                "gold": _gold_report(
                    {name for by_rater in answers.values() for name in by_rater},
                    gold.answers.get(aspect.id, {}) if gold else {},
                    expecting=gold is not None and aspect.id in gold.expecting,
                ),
            }
        )
    excluded = {rater.pseudonym: rater.reason for rater in spans.excluded}
    for rater in gold.excluded if gold else ():
        excluded.setdefault(rater.pseudonym, rater.reason)
    return {
        "aspects": aspects,
        "excluded": [{"rater": pseudonym, "reason": reason} for pseudonym, reason in sorted(excluded.items())],
        "bootstrap": {"resamples": n_resamples, "seed": seed, "unit": "answer"},
    }
