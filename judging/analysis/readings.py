"""Plain-language readings of the decision figures (the judge matrix, a campaign's planning line), in the reader's
language. The numbers come from ``judging.analysis.decisions``; this only words them."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _


def _number(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:+.{digits}f}"


def _interval(bounds: dict[str, Any]) -> str:
    if bounds.get("low") is None:
        return "—"
    return f"[{bounds['low']:+.3f}, {bounds['high']:+.3f}]"


def _p_value(value: float | None) -> str | None:
    if value is None:
        return None
    return "< 0.001" if value < 0.001 else f"= {value:.3f}"


def matrix_readings(matrix: dict[str, Any]) -> list[dict[str, Any]]:
    """Per aspect: the judges, the rows of cells ready to show, and one sentence that says what the marks mean."""
    aspects = []
    for aspect, entry in matrix["aspects"].items():
        rows = []
        findings = []
        for row in entry["rows"]:
            cells: list[dict[str, Any] | None] = []
            for column, cell in zip(entry["judges"], row["cells"], strict=True):
                if cell is None:
                    cells.append(None)
                    continue
                shown = {
                    "column": column,
                    "difference": _number(cell["difference"]["value"]),
                    "interval": _interval(cell["difference_ci95"]),
                    "n": cell["n"],
                    "p_holm": _p_value(cell["p_holm"]["value"]),
                    "undefined": cell["undefined"] or cell["p_holm"]["undefined"],
                    "better": cell["better"],
                }
                cells.append(shown)
                if cell["better"] == "row":
                    findings.append(
                        _(
                            "%(better)s tracks the humans better than %(worse)s: the difference of the correlations "
                            "is %(difference)s, 95%% CI %(interval)s, on %(n)s answers."
                        )
                        % {
                            "better": row["judge"],
                            "worse": column,
                            "difference": shown["difference"],
                            "interval": shown["interval"],
                            "n": cell["n"],
                        }
                    )
            rows.append({"judge": row["judge"], "r": entry["r"].get(row["judge"]), "cells": cells})
        if findings:
            reading = " ".join(findings)
        else:
            reading = _(
                "No pair of judges differs clearly on this aspect: after Holm's correction across the %(pairs)s "
                "pairs, no difference is significant at 0.05. The judges may still differ; these answers cannot tell."
            ) % {"pairs": entry["pairs"]}
        aspects.append({**entry, "aspect": aspect, "rows": rows, "reading": reading})
    return aspects


def plan_readings(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One sentence per aspect of a campaign's planning line, and its plain reading."""
    result = []
    for line in lines:
        values = {
            "aspect": line["label"],
            "answers": line["answers"],
            "raters": line["raters"],
            "half": f"{line['half_width']:.2f}",
            "icc": f"{line['icc']:.2f}",
            "target": f"{line['target_half_width']:.2f}",
            "needed": line["answers_for_target"],
        }
        if line["assumed"]:
            basis = _("assuming an ICC of %(icc)s, since the ratings so far do not give one") % values
        else:
            basis = _("at the ICC of %(icc)s observed so far") % values
        sentence = _(
            "%(aspect)s: %(answers)s answers with %(raters)s raters each give about ±%(half)s on the ICC "
            "(95%% interval, %(basis)s); ±%(target)s would take %(needed)s answers."
        ) % {**values, "basis": basis}
        reading = (
            _(
                "In plain words: the single-rater ICC this campaign reports will usually lie within ±%(half)s of the "
                "true value."
            )
            % values
        )
        result.append({**line, "sentence": sentence, "reading": reading})
    return result
