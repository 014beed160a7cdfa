"""Where an error-span judge and the human raters mark the same errors: span agreement of the judge against each
rater, against all raters pooled, and against the raters' majority.

The judge's spans are its judgments' (the first sample of each answer); only the errors whose quote was placed in
the answer have offsets, so only they take part, and the page says how many were not placed. The human side is the
raters' spans in the page's scope of ratings. Its MQM scores, an aspect value like any other, are compared with the
judge's score by the correlation levels the page shows for every aspect.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from judging.analysis.selectors import Answers, AspectInfo, RatingRows, judge_error_spans
from judging.methods.error_spans import quote_placement, stored_spans
from judging.statistics.results import undefined
from judging.statistics.spans import (
    PrecisionRecall,
    SpanPair,
    character_agreement,
    majority_spans,
    span_agreement,
)


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
