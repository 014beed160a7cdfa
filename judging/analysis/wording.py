"""The words of the dashboard's tables in the reader's language.

Column names, diagnostic names and the reasons why a statistic is undefined stay English in the CSV and JSON
downloads (scripts key on them) and in the statistics code, which knows nothing of languages. Only the page shows
them translated, through ``column_label`` and ``phrase``; a text this module does not know is shown as it is.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from django.utils.translation import get_language, gettext_lazy, pgettext_lazy
from django.utils.translation import gettext as _

from judging.statistics.agreement import (
    OUTLIER_MAX_MEAN_SHIFT_SD,
    OUTLIER_MIN_CORRELATION,
    OUTLIER_MIN_OVERLAP,
    OUTLIER_RULE,
)

COLUMN_LABELS = {
    "aspect": gettext_lazy("aspect"),
    "level": gettext_lazy("level"),
    "answers": gettext_lazy("answers"),
    "ratings": gettext_lazy("ratings"),
    "alpha (primary)": gettext_lazy("alpha (primary)"),
    "alpha 95% CI": gettext_lazy("alpha 95% CI"),
    "alpha nominal": gettext_lazy("alpha nominal"),
    "alpha ordinal": gettext_lazy("alpha ordinal"),
    "alpha interval": gettext_lazy("alpha interval"),
    "exact agreement": gettext_lazy("exact agreement"),
    "agreement ±1": gettext_lazy("agreement ±1"),
    "system": gettext_lazy("system"),
    "shown": gettext_lazy("shown"),
    "chosen": gettext_lazy("chosen"),
    "win rate": gettext_lazy("win rate"),
    "win rate 95% CI": gettext_lazy("win rate 95% CI"),
    "none appropriate (of its wins)": gettext_lazy("none appropriate (of its wins)"),
    "judge": gettext_lazy("judge"),
    "shared pairs": gettext_lazy("shared pairs"),
    "decided pairs": gettext_lazy("decided pairs"),
    "same preference": gettext_lazy("same preference"),
    "agreement": gettext_lazy("agreement"),
    "agreement 95% CI": gettext_lazy("agreement 95% CI"),
    "human ties": gettext_lazy("human ties"),
    "judge ties": gettext_lazy("judge ties"),
    "kind": gettext_lazy("kind"),
    "scores": gettext_lazy("scores"),
    "rater": gettext_lazy("rater"),
    "mean": gettext_lazy("mean"),
    "shared answers": gettext_lazy("shared answers"),
    "r with others": gettext_lazy("r with others"),
    "mean − others": gettext_lazy("mean − others"),
    "outlier": gettext_lazy("outlier"),
    "flags": gettext_lazy("flags"),
    "item": gettext_lazy("item"),
    "turn": gettext_lazy("turn"),
    "range": gettext_lazy("range"),
    "prompt": gettext_lazy("prompt"),
    "answer": gettext_lazy("answer"),
    "value": gettext_lazy("value"),
    "groups": gettext_lazy("groups"),
    "groups skipped": gettext_lazy("groups skipped"),
    "left-out rater": gettext_lazy("left-out rater"),
    "judge advantage probability": gettext_lazy("judge advantage probability"),
    "rater advantage probability": gettext_lazy("rater advantage probability"),
    "p (one-sided)": gettext_lazy("p (one-sided)"),
    "p (Benjamini-Yekutieli)": gettext_lazy("p (Benjamini-Yekutieli)"),
    "rejected": gettext_lazy("rejected"),
    "skipped because": gettext_lazy("skipped because"),
    "rank": gettext_lazy("rank"),
    "rank 95% interval": gettext_lazy("rank 95% interval"),
    "mean rating": gettext_lazy("mean rating"),
    "SE (bootstrap)": gettext_lazy("SE (bootstrap)"),
    "mean 95% CI": gettext_lazy("mean 95% CI"),
    "log-strength": gettext_lazy("log-strength"),
    "SE": gettext_lazy("SE"),
    "log-strength 95% CI": gettext_lazy("log-strength 95% CI"),
    "wins": gettext_lazy("wins"),
    "losses": gettext_lazy("losses"),
    "ties": gettext_lazy("ties"),
    "tie convention": gettext_lazy("tie convention"),
    "vote agreement with ties": gettext_lazy("vote agreement with ties"),
    "vote agreement without ties": gettext_lazy("vote agreement without ties"),
    "human mean": gettext_lazy("human mean"),
    "human rank": gettext_lazy("human rank"),
    "judge mean": gettext_lazy("judge mean"),
    "judge rank": gettext_lazy("judge rank"),
    "human \\ judge": gettext_lazy("human \\ judge"),
    "diagnostic": gettext_lazy("diagnostic"),
    "% responding": gettext_lazy("responding (percent)"),
    "facts per answer": gettext_lazy("facts per answer"),
    "prompts": gettext_lazy("prompts"),
    "responding": gettext_lazy("responding"),
    "scored answers": gettext_lazy("scored answers"),
    "reviewed answers": gettext_lazy("reviewed answers"),
    "human FActScore": gettext_lazy("human FActScore"),
    "estimated FActScore": gettext_lazy("estimated FActScore"),
    "estimated − human (points)": gettext_lazy("estimated − human (points)"),
    "error rate (points)": gettext_lazy("error rate (points)"),
    "mark (±5 points)": gettext_lazy("mark (±5 points)"),
    "estimated rank": gettext_lazy("estimated rank"),
    "ranking equal": gettext_lazy("ranking equal"),
    "mean error rate (points)": gettext_lazy("mean error rate (points)"),
    "alpha on fact labels": gettext_lazy("alpha on fact labels"),
    "facts": gettext_lazy("facts"),
    "labels": gettext_lazy("labels"),
    "refused": gettext_lazy("refused"),
    "no checkable facts": gettext_lazy("no checkable facts"),
    "failed": gettext_lazy("failed"),
}

# Cell texts that are words rather than data: diagnostic names, rater flags, yes and no.
PHRASES = {
    "all raters pooled": gettext_lazy("all raters pooled"),
    "majority of the raters": gettext_lazy("majority of the raters"),
    "the majority's characters carry no category": gettext_lazy("the majority's characters carry no category"),
    "no characters marked by the candidate": gettext_lazy("the judge marked no character"),
    "no characters marked by the reference": gettext_lazy("the raters marked no character"),
    "no spans marked by the candidate": gettext_lazy("the judge marked no span"),
    "no spans marked by the reference": gettext_lazy("the raters marked no span"),
    "precision or recall is undefined": gettext_lazy("precision or recall is undefined"),
    "no answer has both the judge's spans and a rater's in this scope": gettext_lazy(
        "no answer has both the judge's spans and a rater's in this scope"
    ),
    "no answer the judge marked has spans from two or more raters": gettext_lazy(
        "no answer the judge marked has spans from two or more raters"
    ),
    "no answer was marked by two raters": gettext_lazy("no answer was marked by two raters"),
    "no pair of raters marked anything on the answers they share": gettext_lazy(
        "no pair of raters marked anything on the answers they share"
    ),
    "neither rater marked anything": gettext_lazy("neither rater marked anything"),
    "the rater answered no gold item that expects spans": gettext_lazy(
        "the rater answered no gold item that expects spans"
    ),
    "the rater marked nothing on their gold answers": gettext_lazy("the rater marked nothing on their gold answers"),
    "the gold expects no error on the rater's gold answers": gettext_lazy(
        "the gold expects no error on the rater's gold answers"
    ),
    "neither the rater nor the gold marks anything": gettext_lazy("neither the rater nor the gold marks anything"),
    "no rater marked any span": gettext_lazy("no rater marked any span"),
    "no expected disagreement": gettext_lazy("no expected disagreement"),
    "fewer than two answers to resample": gettext_lazy("fewer than two answers to resample"),
    "no bootstrap resample had a defined u-alpha": gettext_lazy("no bootstrap resample had a defined unitizing alpha"),
    "the answers have no characters": gettext_lazy("the answers have no characters"),
    "response": pgettext_lazy("correlation level", "response"),
    "per_prompt": gettext_lazy("per prompt"),
    "per_system": gettext_lazy("per system"),
    "yes": gettext_lazy("yes"),
    "no": gettext_lazy("no"),
    "low_correlation": gettext_lazy("low correlation"),
    "mean_shift": gettext_lazy("mean shift"),
    "Spearman(length, judge)": gettext_lazy("Spearman(length, judge)"),
    "Spearman(length, human)": gettext_lazy("Spearman(length, human)"),
    "length bias (judge − human)": gettext_lazy("length bias (judge − human)"),
    "position consistency": gettext_lazy("position consistency"),
    "unknown family": gettext_lazy("unknown family"),
    "chance agreement is 1": gettext_lazy("chance agreement is 1"),
    "constant input": gettext_lazy("constant input"),
    "every rating has the same value": gettext_lazy("every rating has the same value"),
    "every system is of the judge's family": gettext_lazy("every system is of the judge's family"),
    "fewer than 3 pairs": gettext_lazy("fewer than 3 pairs"),
    "fewer than two raters": gettext_lazy("fewer than two raters"),
    "no answer has two or more ratings": gettext_lazy("no answer has two or more ratings"),
    "no group has at least 3 answers with varying scores": gettext_lazy(
        "no group has at least 3 answers with varying scores"
    ),
    "no pairwise comparison judged in both orders": gettext_lazy("no pairwise comparison judged in both orders"),
    "no rater shares answers with others": gettext_lazy("no rater shares answers with others"),
    "no rater shares enough answers with others": gettext_lazy("no rater shares enough answers with others"),
    "no ratings": gettext_lazy("no ratings"),
    "no answers": gettext_lazy("no answers"),
    "no shared answers": gettext_lazy("no shared answers"),
    "no variance between answers": gettext_lazy("no variance between answers"),
    "no variation between values": gettext_lazy("no variation between values"),
    "not a finite number": gettext_lazy("not a finite number"),
    "not a pairwise judge": gettext_lazy("not a pairwise judge"),
    "not fitted": gettext_lazy("not fitted"),
    "one rating per answer": gettext_lazy("one rating per answer"),
    "the judge's model is unknown": gettext_lazy("the judge's model is unknown"),
    "no bootstrap resample had variation": gettext_lazy("no bootstrap resample had variation"),
    "no bootstrap resample was defined": gettext_lazy("no bootstrap resample was defined"),
    "reference": gettext_lazy("reference"),
    "never wins: its strength is not finite (minus infinity)": gettext_lazy(
        "never wins: its strength is not finite (minus infinity)"
    ),
    "never loses: its strength is not finite (plus infinity)": gettext_lazy(
        "never loses: its strength is not finite (plus infinity)"
    ),
    "never compared with a system that has a finite strength": gettext_lazy(
        "never compared with a system that has a finite strength"
    ),
    "the systems split into groups one of which never loses to the other: no strength is finite": gettext_lazy(
        "the systems split into groups one of which never loses to the other: no strength is finite"
    ),
    "no comparisons": gettext_lazy("no comparisons"),
    "no answer has a score": gettext_lazy("no answer has a score"),
    "no rater scored an answer that the judge and another rater also scored": gettext_lazy(
        "no rater scored an answer that the judge and another rater also scored"
    ),
    # The campaign's confidence sequences (judging.analysis.campaign_sequences, judging.statistics.sequences).
    "no ratings yet": gettext_lazy("no ratings yet"),
    "one value": gettext_lazy("one value"),
    "no prompt has ratings of both systems yet": gettext_lazy("no prompt has ratings of both systems yet"),
    "no human rating of an answer the judge scored yet": gettext_lazy(
        "no human rating of an answer the judge scored yet"
    ),
    "the running intersection is empty: the values are not consistent with one fixed mean": gettext_lazy(
        "the running intersection is empty: the values are not consistent with one fixed mean"
    ),
}

# The units two judges are compared on, as the comparison's reasons name them.
COMPARISON_UNITS = {
    "answer": pgettext_lazy("comparison unit", "answers"),
    "system": pgettext_lazy("comparison unit", "systems"),
    "prompt": pgettext_lazy("comparison unit", "prompts"),
}
CONSTANT_SCORES = {
    "the human": gettext_lazy("the human scores are constant over the %(n)s %(units)s, so no correlation exists"),
    "judge 1's": gettext_lazy("judge 1's scores are constant over the %(n)s %(units)s, so no correlation exists"),
    "judge 2's": gettext_lazy("judge 2's scores are constant over the %(n)s %(units)s, so no correlation exists"),
}
PHRASES["the three correlations leave no variance for Williams's t (a judge equals the other or the humans)"] = (
    gettext_lazy("the three correlations leave no variance for Williams's t (a judge equals the other or the humans)")
)

# Why a rater model, or one rater's reliability in it, is undefined (judging.statistics.rater_models).
PHRASES["one rater: a rater model needs at least two raters to compare"] = gettext_lazy(
    "one rater: a rater model needs at least two raters to compare"
)
PHRASES["every rating has the same label: there is nothing to tell raters apart"] = gettext_lazy(
    "every rating has the same label: there is nothing to tell raters apart"
)
PHRASES["every rating has the same value: there is nothing to tell raters apart"] = gettext_lazy(
    "every rating has the same value: there is nothing to tell raters apart"
)
PHRASES["no item has two ratings, so raters cannot be compared"] = gettext_lazy(
    "no item has two ratings, so raters cannot be compared"
)
PHRASES["the rater shares no item with another rater"] = gettext_lazy("the rater shares no item with another rater")

# The active-sampling panel's reason and the stopping rule's method (judging.statistics.active_ppi, hybrid selectors).
PHRASES["no uniform budget reaches the active interval's width on these estimates"] = gettext_lazy(
    "no uniform budget reaches the active interval's width on these estimates"
)
PHRASES["betting (Waudby-Smith & Ramdas 2024), 95%"] = gettext_lazy("betting (Waudby-Smith & Ramdas 2024), 95%")

# Why Davidson's tie parameter is undefined (judging.statistics.ranking).
PHRASES["no ties: the estimate of nu is 0 and the fit is Bradley-Terry's"] = gettext_lazy(
    "no ties: the estimate of nu is 0 and the fit is Bradley-Terry's"
)
PHRASES["every comparison is a tie: nu is not finite"] = gettext_lazy("every comparison is a tie: nu is not finite")
PHRASES["no strength is finite"] = gettext_lazy("no strength is finite")


def _too_few_units(match: re.Match[str]) -> str:
    return _(
        "fewer than %(min)s %(units)s have a human score and both judges' scores (%(n)s); comparing two judges "
        "needs at least %(min)s"
    ) % {"min": match["min"], "n": match["n"], "units": COMPARISON_UNITS[match["unit"]]}


def _constant_scores(match: re.Match[str]) -> str:
    return str(CONSTANT_SCORES[match["who"]]) % {"n": match["n"], "units": COMPARISON_UNITS[match["unit"]]}


# Texts with numbers or names in them.
PATTERNS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (
        re.compile(
            r"fewer than (?P<min>\d+) (?P<unit>answer|system)s have a human score and both judges' scores "
            r"\((?P<n>\d+)\); comparing two judges needs at least (?P=min)"
        ),
        _too_few_units,
    ),
    (
        re.compile(
            r"(?P<who>the human|judge 1's|judge 2's) scores are constant over the (?P<n>\d+) (?P<unit>answer|system)s, "
            r"so no correlation exists"
        ),
        _constant_scores,
    ),
    (
        re.compile(r"fewer than two answers were rated by all (?P<k>\d+) raters"),
        lambda m: _("fewer than two answers were rated by all %(k)s raters") % m.groupdict(),
    ),
    (
        re.compile(r"no system of the judge's family \((?P<family>[^)]*)\)"),
        lambda m: _("no system of the judge's family (%(family)s)") % m.groupdict(),
    ),
    (
        re.compile(r"unequal numbers of ratings per answer \((?P<low>\d+) to (?P<high>\d+)\)"),
        lambda m: _("unequal numbers of ratings per answer (%(low)s to %(high)s)") % m.groupdict(),
    ),
    (
        re.compile(r"self-preference \((?P<family>[^)]*)\)"),
        lambda m: _("self-preference (%(family)s)") % {"family": phrase(m["family"])},
    ),
    (
        re.compile(
            r"only (?P<n>\d+) answers scored by this rater, the judge and another rater; at least (?P<k>\d+) are needed"
        ),
        lambda m: (
            _("only %(n)s answers scored by this rater, the judge and another rater; at least %(k)s are needed")
            % m.groupdict()
        ),
    ),
    (
        re.compile(r"no rater has (?P<k>\d+) answers scored by the rater, the judge and another rater"),
        lambda m: _("no rater has %(k)s answers scored by the rater, the judge and another rater") % m.groupdict(),
    ),
    (
        re.compile(r"only (?P<n>\d+) systems are ranked by both with a finite strength; at least 3 are needed"),
        lambda m: (
            _("only %(n)s systems are ranked by both with a finite strength; at least 3 are needed") % m.groupdict()
        ),
    ),
    (
        re.compile(r"(?P<name>pearson|spearman|kendall) 95% CI"),
        lambda m: _("%(name)s 95%% CI") % m.groupdict(),
    ),
    (
        re.compile(r"(?P<name>pearson|spearman|kendall) human ceiling"),
        lambda m: _("%(name)s human ceiling") % m.groupdict(),
    ),
]


def phrase(text: str) -> str:
    """The reader's words for a known cell text or reason; anything else (data) unchanged."""
    return _phrase_in(text, get_language() or "")


# Tables repeat the same cells (a system key on every scatter point): each text is worked out once per language.
@functools.lru_cache(maxsize=4096)
def _phrase_in(text: str, language: str) -> str:
    del language  # part of the key: the same text reads differently in each language
    if text == OUTLIER_RULE:
        return outlier_rule(OUTLIER_MIN_OVERLAP, OUTLIER_MIN_CORRELATION, OUTLIER_MAX_MEAN_SHIFT_SD)
    known = PHRASES.get(text)
    if known is not None:
        return str(known)
    for pattern, render in PATTERNS:
        match = pattern.fullmatch(text)
        if match:
            return render(match)
    if ", " in text:
        parts = text.split(", ")
        if all(part in PHRASES for part in parts):
            return _(", ").join(str(PHRASES[part]) for part in parts)
    return text


def column_label(column: object) -> str:
    if not isinstance(column, str):
        return str(column)
    known = COLUMN_LABELS.get(column)
    return str(known) if known is not None else phrase(column)


def outlier_rule(min_overlap: int, min_correlation: float, max_mean_shift_sd: float) -> str:
    return _(
        "flagged when, on at least %(overlap)s answers shared with other raters, the Pearson correlation with the "
        "mean of the other raters is below %(correlation)s, or the mean difference from the other raters exceeds "
        "%(shift)s standard deviations of all ratings of the aspect"
    ) % {"overlap": min_overlap, "correlation": min_correlation, "shift": max_mean_shift_sd}


COLUMN_LABELS.update(
    {
        "reference": gettext_lazy("reference"),
        "character precision": gettext_lazy("character precision"),
        "character recall": gettext_lazy("character recall"),
        "character F1": gettext_lazy("character F1"),
        "span precision": gettext_lazy("span precision"),
        "span recall": gettext_lazy("span recall"),
        "span F1": gettext_lazy("span F1"),
        "span F1 with category": gettext_lazy("span F1 with category"),
        "human-rated answers (n)": gettext_lazy("human-rated answers (n)"),
        "answers (N)": gettext_lazy("answers (N)"),
        "PPI estimate": gettext_lazy("PPI estimate"),
        "PPI 95% CI": gettext_lazy("PPI 95% CI"),
        "human-only estimate": gettext_lazy("human-only estimate"),
        "human-only 95% CI": gettext_lazy("human-only 95% CI"),
        "effective n": gettext_lazy("effective n"),
    }
)


def _judge_missing(match: re.Match[str]) -> str:
    if match["what"] == "answers":
        text = _(
            "the judge has no score for %(k)s of the %(n)s answers; prediction-powered inference needs the judge on "
            "every one"
        )
    else:
        text = _(
            "the judge has no score for %(k)s of the %(n)s shared prompts; prediction-powered inference needs the "
            "judge on every one"
        )
    return text % match.groupdict()


PATTERNS.extend(
    [
        (
            re.compile(r"(?P<n>\d+) items have human scores; at least (?P<min>\d+) are needed for a CLT interval"),
            lambda m: (
                _("%(n)s items have human scores; at least %(min)s are needed for a CLT interval") % m.groupdict()
            ),
        ),
        (
            re.compile(
                r"the judge has no score for (?P<k>\d+) of the (?P<n>\d+) (?P<what>answers|shared prompts); "
                r"prediction-powered inference needs the judge on every one"
            ),
            _judge_missing,
        ),
        (
            re.compile(r"every item has a human score: there is no judge-only item for the judge to add"),
            lambda m: _("every item has a human score: there is no judge-only item for the judge to add"),
        ),
    ]
)
