"""Every dashboard table, built once from the report dicts and shown as HTML, CSV or JSON from the same rows.

A table is {"name", "title", "columns", "rows", "display"}: ``rows`` hold raw values (numbers stay numbers
for CSV/JSON; undefined statistics are None), ``display`` the same cells formatted for the page, with the
reason of an undefined value in place of the number.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any

from django.utils.translation import gettext as _

from annotations.datasets.exporting import csv_safe
from judging.analysis.wording import column_label, phrase
from judging.statistics.correlation import COEFFICIENTS, LEVELS
from judging.statistics.results import undefined

DIGITS = 3


def _value(cell: Any) -> Any:
    if isinstance(cell, dict) and "undefined" in cell:
        if "value" in cell:
            return cell["value"]
        if "low" in cell:
            return None if cell["low"] is None else [cell["low"], cell["high"]]
    return cell


def _display(cell: Any) -> dict[str, str]:
    """{"text": shown value, "why": reason when the statistic is undefined}."""
    if isinstance(cell, dict) and "undefined" in cell:
        if cell["undefined"]:
            return {"text": "—", "why": phrase(str(cell["undefined"]))}
        if "value" in cell:
            return {"text": f"{cell['value']:.{DIGITS}f}", "why": ""}
        return {"text": f"[{cell['low']:.{DIGITS}f}, {cell['high']:.{DIGITS}f}]", "why": ""}
    if isinstance(cell, bool):
        return {"text": phrase("yes" if cell else "no"), "why": ""}
    if isinstance(cell, float):
        return {"text": f"{cell:.{DIGITS}f}", "why": ""}
    if cell is None:
        return {"text": "—", "why": ""}
    return {"text": phrase(str(cell)) if isinstance(cell, str) else str(cell), "why": ""}


def _cells(row: dict[str, Any], keys: str) -> list[Any]:
    """The values of a report's row under `keys` (separated by white space), in that order: a table's cells."""
    return [row[key] for key in keys.split()]


def make_table(name: str, title: str, columns: list[str], cells: Iterable[list[Any]]) -> dict[str, Any]:
    cell_rows = list(cells)
    return {
        "name": name,
        "title": title,
        "columns": columns,
        "headers": [column_label(column) for column in columns],
        "rows": [[_value(cell) for cell in row] for row in cell_rows],
        "display": [[_display(cell) for cell in row] for row in cell_rows],
    }


def agreement_table(report: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for aspect, summary in report["aspects"].items():
        primary = {"ratio": "interval"}.get(summary["level"], summary["level"])
        icc = summary["icc"]
        rows.append(
            [
                aspect,
                summary["level"],
                summary["n_items"],
                summary["n_ratings"],
                summary["alpha"][primary],
                summary["alpha_ci95"],
                summary["alpha"]["nominal"],
                summary["alpha"]["ordinal"],
                summary["alpha"]["interval"],
                summary["fleiss_kappa"],
                summary["gwet_ac1"],
                icc["ICC1"],
                icc["ICC1k"],
                icc.get("ICC2"),
                icc.get("ICC3"),
                summary["percent_agreement"]["exact"],
                summary["percent_agreement"]["within_1"],
            ]
        )
    columns = ["aspect", "level", "answers", "ratings", "alpha (primary)", "alpha 95% CI", "alpha nominal"]
    columns += ["alpha ordinal", "alpha interval", "Fleiss kappa", "Gwet AC1", "ICC1", "ICC1k", "ICC2", "ICC3"]
    columns += ["exact agreement", "agreement ±1"]
    return make_table("agreement", _("Agreement per aspect"), columns, rows)


def preferences_table(report: dict[str, Any]) -> dict[str, Any]:
    rows = [
        [row["system"], row["shown"], row["chosen"], row["win_rate"], row["win_rate_ci95"], row["none_appropriate"]]
        for row in report["preferences"]["systems"]
    ]
    columns = ["system", "shown", "chosen", "win rate", "win rate 95% CI", "none appropriate (of its wins)"]
    return make_table("preferences", _("Preferred system"), columns, rows)


def preference_judges_table(report: dict[str, Any]) -> dict[str, Any]:
    rows = [
        [
            judge,
            aspect,
            row["n_pairs"],
            row["n_decided"],
            row["n_agree"],
            row["agreement"],
            row["agreement_ci95"],
            row["human_ties"],
            row["judge_ties"],
            row.get("vote_agreement", {}).get("with_ties", {}).get("agreement"),
            row.get("vote_agreement", {}).get("without_ties", {}).get("agreement"),
        ]
        for judge, by_aspect in report["preferences"]["judges"].items()
        for aspect, row in by_aspect.items()
    ]
    columns = ["judge", "aspect", "shared pairs", "decided pairs", "same preference", "agreement", "agreement 95% CI"]
    columns += ["human ties", "judge ties", "vote agreement with ties", "vote agreement without ties"]
    return make_table("preference-judges", _("Pairwise judges versus human preferences"), columns, rows)


def judges_table(judges: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [
        [judge["name"], judge["kind"], judge["n_scores"], judge["certification"], judge["version"] or ""]
        for judge in judges
    ]
    return make_table("judges", _("Judges"), ["judge", "kind", "scores", "certification", "version"], rows)


def raters_table(details: dict[str, Any]) -> dict[str, Any]:
    rows = [
        [
            *_cells(row, "rater count mean n_shared correlation_with_others mean_difference_from_others outlier"),
            ", ".join(row["flags"]),
        ]
        for row in details["raters"]
    ]
    columns = ["rater", "ratings", "mean", "shared answers", "r with others", "mean − others", "outlier", "flags"]
    return make_table("raters", _("Raters on %(aspect)s") % {"aspect": details["aspect"]}, columns, rows)


def disagreements_table(details: dict[str, Any]) -> dict[str, Any]:
    rows = [
        [
            row["item"],
            row["turn"],
            row["system"],
            row["range"],
            row["sd"],
            row["mean"],
            "; ".join(f"{rating['rater']}: {rating['value']:g}" for rating in row["ratings"]),
            row["prompt"],
            row["answer"],
        ]
        for row in details["disagreements"]
    ]
    columns = ["item", "turn", "system", "range", "sd", "mean", "ratings", "prompt", "answer"]
    return make_table(
        "disagreements", _("Most disagreed answers on %(aspect)s") % {"aspect": details["aspect"]}, columns, rows
    )


def distribution_table(details: dict[str, Any]) -> dict[str, Any]:
    rows = [[dist["aspect"], bar["label"], bar["count"]] for dist in details["distributions"] for bar in dist["bars"]]
    return make_table("distribution", _("Rating distributions"), ["aspect", "value", "ratings"], rows)


SPAN_REFERENCES = {"pooled": "all raters pooled", "consensus": "majority of the raters"}
MAJORITY_HAS_NO_CATEGORY = "the majority's characters carry no category"


def spans_table(details: dict[str, Any]) -> dict[str, Any]:
    """The judge's error spans against each rater's, all raters' pooled and the raters' majority."""
    report = details.get("spans") or {}
    entries: list[tuple[str, dict[str, Any]]] = []
    if report.get("available"):
        entries = [(row["rater"], row) for row in report["raters"]]
        entries += [(label, report[key]) for key, label in SPAN_REFERENCES.items()]
    rows = []
    for reference, figures in entries:
        character, span = figures["character"], figures["span"]
        category = figures.get("span_category")
        rows.append(
            [
                reference,
                figures["answers"],
                character["precision"],
                character["recall"],
                character["f1"],
                span["precision"],
                span["recall"],
                span["f1"],
                category["f1"] if category else undefined(MAJORITY_HAS_NO_CATEGORY),
            ]
        )
    columns = ["reference", "answers", "character precision", "character recall", "character F1"]
    columns += ["span precision", "span recall", "span F1", "span F1 with category"]
    return make_table(
        "spans",
        _("%(judge)s's error spans vs the raters' on %(aspect)s")
        % {"judge": details["judge"], "aspect": details["aspect"]},
        columns,
        rows,
    )


def levels_table(details: dict[str, Any]) -> dict[str, Any]:
    rows = []
    ceiling = details.get("ceiling", {})
    for level in LEVELS:
        entry = details["levels"].get(level)
        if not entry:
            continue
        row: list[Any] = [level, entry["n"], entry.get("n_groups"), entry.get("groups_skipped")]
        for name in COEFFICIENTS:
            row += [entry[name], entry["ci95"][name], ceiling.get(level, {}).get(name)]
        rows.append(row)
    columns = ["level", "n", "groups", "groups skipped"]
    for name in COEFFICIENTS:
        columns += [name, f"{name} 95% CI", f"{name} human ceiling"]
    return make_table(
        "levels",
        _("%(judge)s vs humans on %(aspect)s") % {"judge": details["judge"], "aspect": details["aspect"]},
        columns,
        rows,
    )


def alternative_table(details: dict[str, Any]) -> dict[str, Any]:
    alt = details["alternative_annotator"]
    rows = [_cells(row, "rater n rho_judge rho_human p_value p_adjusted rejected skipped") for row in alt["raters"]]
    columns = [
        "left-out rater",
        "answers",
        "judge advantage probability",
        "rater advantage probability",
        "p (one-sided)",
        "p (Benjamini-Yekutieli)",
        "rejected",
        "skipped because",
    ]
    return make_table("alternative", _("Alternative-annotator test, per left-out rater"), columns, rows)


def _rank_interval(row: dict[str, Any]) -> str | None:
    interval = row.get("rank_ci95")
    return f"{interval['best']}–{interval['worst']}" if interval else None


def ranking_table(name: str, title: str, report: dict[str, Any]) -> dict[str, Any]:
    """One ranking (Bradley–Terry or mean rating) with its intervals."""
    if report.get("model") == "mean_rating":
        columns = ["rank", "rank 95% interval", "system", "mean rating", "SE (bootstrap)", "mean 95% CI", "answers"]
        rows = [
            [row["rank"], _rank_interval(row), row["system"], row["strength"], row["se"], row["ci95"], row["n"]]
            for row in report["systems"]
        ]
    else:
        columns = [
            "rank",
            "rank 95% interval",
            "system",
            "log-strength",
            "SE",
            "log-strength 95% CI",
            "wins",
            "losses",
            "ties",
            "tie convention",
        ]
        convention = report.get("ties", {}).get("convention")
        rows = [
            [
                row["rank"],
                _rank_interval(row),
                row["system"],
                row["strength"],
                row["se"],
                row["ci95"],
                row["wins"],
                row["losses"],
                row["ties"],
                convention,
            ]
            for row in report["systems"]
        ]
    return make_table(name, title, columns, rows)


def systems_table(details: dict[str, Any]) -> dict[str, Any]:
    rows = [
        [row["system"], row["n"], row["human_mean"], row["human_rank"], row["judge_mean"], row["judge_rank"]]
        for row in details["per_system"]
    ]
    columns = ["system", "answers", "human mean", "human rank", "judge mean", "judge rank"]
    return make_table("systems", _("Per-system means and ranks"), columns, rows)


def confusion_table(details: dict[str, Any]) -> dict[str, Any]:
    confusion = details["confusion"]
    if confusion["undefined"]:
        return make_table(
            "confusion",
            _("Confusion matrix: undefined (%(reason)s)") % {"reason": phrase(str(confusion["undefined"]))},
            ["human \\ judge"],
            [],
        )
    labels = confusion["labels"]
    rows = [[label, *counts] for label, counts in zip(labels, confusion["matrix"], strict=True)]
    return make_table("confusion", _("Confusion matrix (rows: rounded human mean)"), ["human \\ judge", *labels], rows)


def bias_table(details: dict[str, Any]) -> dict[str, Any]:
    bias = details["bias"]
    position = bias["position_consistency"]
    self_pref = bias["self_preference"]
    rows = [
        ["Spearman(length, judge)", bias["length"]["judge"]],
        ["Spearman(length, human)", bias["length"]["human"]],
        ["length bias (judge − human)", bias["length"]["difference"]],
        ["position consistency", position["rate"]],
        [f"self-preference ({self_pref['family'] or 'unknown family'})", self_pref["value"]],
    ]
    return make_table("bias", _("Bias diagnostics"), ["diagnostic", "value"], rows)


def scatter_table(details: dict[str, Any]) -> dict[str, Any]:
    rows = [[point["system"], point["human"], point["judge"]] for point in details["scatter"]]
    return make_table("scatter", _("Judge vs human per answer"), ["system", "human mean", "judge"], rows)


def as_csv(table: dict[str, Any]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([csv_safe(column) for column in table["columns"]])
    for row in table["rows"]:
        writer.writerow([csv_safe(_csv_cell(cell)) for cell in row])
    return buffer.getvalue()


def _csv_cell(cell: Any) -> Any:
    if isinstance(cell, list):
        return " ".join(str(part) for part in cell)
    return "" if cell is None else cell


def as_json(table: dict[str, Any]) -> str:
    payload = {"title": table["title"], "columns": table["columns"], "rows": table["rows"]}
    return json.dumps(payload, ensure_ascii=False, allow_nan=False)


# ---------------------------------------------------------------- FActScore (from factscore_report, unchanged values)


def factscore_systems_table(report: dict[str, Any]) -> dict[str, Any]:
    rows = [
        _cells(
            row,
            "system factscore pct_responding facts_per_answer n_prompts n_responding n_scored n_refused n_no_facts "
            "n_failed",
        )
        for row in report["systems"]
    ]
    columns = ["system", "FActScore", "% responding", "facts per answer", "prompts", "responding", "scored answers"]
    columns += ["refused", "no checkable facts", "failed"]
    return make_table(
        "factscore-systems", _("FActScore per system (%(judge)s)") % {"judge": report["judge"]}, columns, rows
    )


def factscore_estimator_table(report: dict[str, Any]) -> dict[str, Any]:
    human = report["human"]
    rows = [
        _cells(row, "system n_answers human estimated error_points error_rate mark human_rank estimated_rank")
        for row in (human["estimator"]["systems"] if human else [])
    ]
    columns = ["system", "reviewed answers", "human FActScore", "estimated FActScore", "estimated − human (points)"]
    columns += ["error rate (points)", "mark (±5 points)", "human rank", "estimated rank"]
    return make_table("factscore-estimator", _("Estimator against the human reviews"), columns, rows)


def factscore_human_table(report: dict[str, Any]) -> dict[str, Any]:
    """Ranking agreement, mean error and the fact-label agreement (nominal alpha) in one row."""
    human = report["human"]
    rows = []
    if human:
        estimator, agreement = human["estimator"], human["agreement"]
        ranking = estimator["ranking_equal"]
        rows.append(
            [
                human["reviewed_answers"],
                ranking if ranking is not None else {"value": None, "undefined": "fewer than two systems to rank"},
                estimator["mean_error_rate"],
                agreement["level"],
                agreement["alpha"],
                agreement["ci95"],
                agreement["n_facts"],
                agreement["n_labels"],
            ]
        )
    columns = ["reviewed answers", "ranking equal", "mean error rate (points)", "level", "alpha on fact labels"]
    columns += ["alpha 95% CI", "facts", "labels"]
    return make_table("factscore-human", _("Ranking and fact-label agreement"), columns, rows)


FACTSCORE_TABLES = {
    "factscore-systems": factscore_systems_table,
    "factscore-estimator": factscore_estimator_table,
    "factscore-human": factscore_human_table,
}


def ppi_table(report: dict[str, Any], aspect: str) -> dict[str, Any]:
    """Prediction-powered system means and differences of one aspect beside the human-only ones."""
    entries = report["aspects"].get(aspect, {"systems": [], "differences": []})

    def once(cell: dict[str, Any], reason: str | None) -> dict[str, Any] | None:
        # A row undefined for one reason states it in its first cell only; the other cells show a dash.
        return None if reason and cell["undefined"] == reason else cell

    rows = []
    for entry in [*entries["systems"], *entries["differences"]]:
        reason = entry["undefined"]
        rows.append(
            [
                entry["system"] if "system" in entry else f"{entry['system_a']} − {entry['system_b']}",
                entry["n"],
                entry["n_total"],
                entry["ppi"]["estimate"],
                once(entry["ppi"]["interval"], reason),
                once(entry["human_only"]["estimate"], reason),
                once(entry["human_only"]["interval"], reason),
                once(entry["effective_n"], reason),
            ]
        )
    columns = ["system", "human-rated answers (n)", "answers (N)", "PPI estimate", "PPI 95% CI"]
    columns += ["human-only estimate", "human-only 95% CI", "effective n"]
    return make_table("ppi", _("Prediction-powered estimates"), columns, rows)
