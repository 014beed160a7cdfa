"""Release gates: rules on a dataset's statistics that pass or fail on intervals, not point values, for CI.

A rules file (TOML or JSON) lists rules of three kinds:

- ``win_rate``: system S beats baseline B, the lower bound of the interval of its win rate against B above a
  threshold (ties count half; the interval is a bootstrap over prompts or Wilson's);
- ``alpha``: Krippendorff's alpha on an aspect (at the aspect's level) at least X, the lower bound of its bootstrap
  interval above Y;
- ``judge_certified``: judge J certified on aspects A, B. Certification is asked through ``Certifier``. The built-in
  certifier reads the stored certificates of the judge run's version when it has any (certified only while a passed
  certificate stands, not when the last one failed or was suspended); a judge whose version was never put to
  certification (and an imported judge) is tested now by the alternative-annotator test on the dataset's ratings
  (default epsilon and q): certified where it passes, not where it fails, undefined where the test is.

Each rule ends ``pass``, ``fail`` or ``undefined`` (too little data for the figure it rests on) with a one-line
reason and its evidence; the gate passes only when every rule passes.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from annotations.models import Dataset, System
from judging.analysis.judge_reports import alt_test_report
from judging.analysis.preference_selectors import stats_preferences
from judging.analysis.reports import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, JudgeNotFound, ReportError, agreement_report
from judging.models import CertificateStatus, Judge, JudgeRun
from judging.statistics.agreement import primary_level
from judging.statistics.preference import WIN_RATE_METHODS, head_to_head_scores, win_rate_against

RULES_MAX_BYTES = 256 * 1024
PASS, FAIL, UNDEFINED = "pass", "fail", "undefined"


class RulesError(ValueError):
    """A rules file that cannot be used; the message names the rule and key."""


@dataclass(frozen=True)
class RuleOutcome:
    index: int
    kind: str
    outcome: str
    reason: str
    rule: dict[str, Any]
    evidence: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        return f"{self.outcome.upper():9} rule {self.index + 1} ({self.kind}): {self.reason}"

    def as_json(self) -> dict[str, Any]:
        return {
            "rule": self.index + 1,
            "kind": self.kind,
            "outcome": self.outcome,
            "reason": self.reason,
            "spec": self.rule,
            "evidence": self.evidence,
        }


@dataclass(frozen=True)
class Certification:
    """A certifier's answer for one judge and aspect: certified or not, or undefined with the reason."""

    outcome: str  # PASS (certified), FAIL (not certified) or UNDEFINED
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)


Certifier = Callable[[Dataset, Judge, str], Certification]


def alternative_annotator_certifier(dataset: Dataset, judge: Judge, aspect: str) -> Certification:
    """The certifier in force: the alternative-annotator test of the judge on this aspect, on every rating of the
    dataset (excluded raters left out), at the default epsilon and q."""
    try:
        result = alt_test_report(dataset, judge.name, aspect)["aspects"].get(aspect)
    except (JudgeNotFound, ReportError) as exc:
        return Certification(UNDEFINED, str(exc))
    if result is None:
        return Certification(UNDEFINED, f"the judge has no scores on {aspect!r}")
    evidence = {key: result[key] for key in ("epsilon", "q", "metric", "winning_rate", "advantage_probability")}
    passed = result["passed"]
    if passed["value"] is None:
        return Certification(UNDEFINED, f"alternative-annotator test undefined: {passed['undefined']}", evidence)
    omega = result["winning_rate"]["value"]
    verdict = "passes" if passed["value"] else "fails"
    reason = (
        f"{verdict} the alternative-annotator test: winning rate {omega:.2f} "
        f"(passes at 0.5 or more), epsilon {result['epsilon']:g}, q {result['q']:g}"
    )
    return Certification(PASS if passed["value"] else FAIL, reason, evidence)


def stored_certificate_certifier(dataset: Dataset, judge: Judge, aspect: str) -> Certification:
    """The certifier in force: the judge run version's stored certificates, or the test run now when it has none."""
    run = JudgeRun.objects.filter(judge=judge).select_related("version").first()
    version = run.version if run is not None else None
    certificates = list(version.certificates.order_by("-created_at")) if version is not None else []
    settled = [c for c in certificates if c.status not in (CertificateStatus.PENDING, CertificateStatus.EVALUATING)]
    if not settled:
        return alternative_annotator_certifier(dataset, judge, aspect)
    assert version is not None
    standing = next((c for c in settled if c.status == CertificateStatus.PASSED), settled[0])
    row = standing.results.get(aspect)
    evidence = {
        "certificate": standing.pk,
        "fingerprint": standing.fingerprint,
        "status": standing.status,
        "date": standing.certified_at.isoformat() if standing.certified_at else None,
        **({key: row[key] for key in ("n_answers", "epsilon", "q", "omega", "rho", "verdict")} if row else {}),
    }
    head = f"certificate {standing.pk} of version {version.short}"
    if standing.status == CertificateStatus.SUSPENDED:
        return Certification(FAIL, f"{head} is suspended: {standing.suspension_reason}", evidence)
    if row is None:
        return Certification(FAIL, f"{head} does not cover {aspect!r}", evidence)
    figures = f"omega {_fmt(row['omega'])}, rho {_fmt(row['rho'])}, epsilon {row['epsilon']:g}, n {row['n_answers']}"
    if standing.status == CertificateStatus.PASSED and row["verdict"] == "passed":
        return Certification(PASS, f"{head} passed ({figures})", evidence)
    if row["verdict"] == "undefined":
        return Certification(UNDEFINED, f"{head}: the test is undefined: {row['undefined']}", evidence)
    return Certification(FAIL, f"{head} {standing.status} ({row['verdict']} on {aspect}: {figures})", evidence)


_KINDS: dict[str, dict[str, tuple[type | tuple[type, ...], bool]]] = {
    # key: (type, required)
    "win_rate": {
        "kind": (str, True),
        "dataset": (str, False),
        "system": (str, True),
        "baseline": (str, True),
        "min_lower": ((int, float), False),
        "method": (str, False),
        "confidence": ((int, float), False),
        "min_votes": (int, False),
    },
    "alpha": {
        "kind": (str, True),
        "dataset": (str, False),
        "aspect": (str, True),
        "min": ((int, float), True),
        "min_lower": ((int, float), False),
    },
    "judge_certified": {
        "kind": (str, True),
        "dataset": (str, False),
        "judge": (str, True),
        "aspects": (list, True),
    },
}


def parse_rules(raw: bytes, *, origin: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(settings, rules) from a TOML or JSON rules file: top-level ``dataset``/``owner`` defaults and ``[[rule]]``
    tables (a JSON object with a "rule" list)."""
    if len(raw) > RULES_MAX_BYTES:
        raise RulesError(f"{origin}: larger than {RULES_MAX_BYTES} bytes")
    try:
        text = raw.decode("utf-8-sig")
        data = json.loads(text) if text.lstrip().startswith("{") else tomllib.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RulesError(f"{origin}: neither valid JSON nor valid TOML ({exc})") from None
    if not isinstance(data, dict):
        raise RulesError(f"{origin}: expected a table with a 'rule' list")
    unknown = sorted(set(data) - {"dataset", "owner", "rule"})
    if unknown:
        raise RulesError(f"{origin}: unknown key {unknown[0]!r}; allowed: dataset, owner, rule")
    rules = data.get("rule")
    if not isinstance(rules, list) or not rules:
        raise RulesError(f"{origin}: 'rule' must be a non-empty list of rules ([[rule]] tables)")
    for index, rule in enumerate(rules):
        where = f"rule {index + 1}"
        if not isinstance(rule, dict) or rule.get("kind") not in _KINDS:
            raise RulesError(f"{where}: 'kind' must be one of {', '.join(_KINDS)}")
        spec = _KINDS[rule["kind"]]
        for key, value in rule.items():
            if key not in spec:
                raise RulesError(f"{where}: unknown key {key!r} for kind {rule['kind']}; allowed: {', '.join(spec)}")
            if not isinstance(value, spec[key][0]) or isinstance(value, bool):
                raise RulesError(f"{where}: {key!r} has the wrong type ({json.dumps(value)})")
        missing = [key for key, (_, required) in spec.items() if required and key not in rule]
        if missing:
            raise RulesError(f"{where}: {missing[0]!r} is required for kind {rule['kind']}")
        if rule.get("method", "bootstrap") not in WIN_RATE_METHODS:
            raise RulesError(f"{where}: 'method' must be one of {', '.join(WIN_RATE_METHODS)}")
        if not 0 < rule.get("confidence", 0.95) < 1:
            raise RulesError(f"{where}: 'confidence' must lie between 0 and 1")
        if rule["kind"] == "judge_certified" and (
            not rule["aspects"] or not all(isinstance(a, str) for a in rule["aspects"])
        ):
            raise RulesError(f"{where}: 'aspects' must be a non-empty list of aspect names")
        if rule["kind"] == "win_rate" and rule["system"] == rule["baseline"]:
            # Every vote of a system against itself is a tie, so its win rate is 0.5 by construction (or above it
            # with ties counted half); such a rule would pass or fail on nothing but the threshold.
            raise RulesError(
                f"{where}: 'system' and 'baseline' are both {rule['system']!r}; a system cannot be its own baseline"
            )
        if "dataset" not in rule and "dataset" not in data:
            raise RulesError(f"{where}: no dataset (give 'dataset' in the rule or at the top of the file)")
    return {k: data[k] for k in ("dataset", "owner") if k in data}, rules


def rules_check_systems(
    datasets: dict[str, Dataset], rules: list[dict[str, Any]], *, default_dataset: str | None = None
) -> None:
    """Refuse, naming it and the dataset's systems, a win-rate rule whose system or baseline the dataset does not
    have: a misspelt name would otherwise read as a lack of votes."""
    known: dict[str, list[str]] = {}
    for index, rule in enumerate(rules):
        if rule["kind"] != "win_rate":
            continue
        dataset = datasets[str(rule.get("dataset", default_dataset))]
        if dataset.name not in known:
            known[dataset.name] = list(System.objects.filter(dataset=dataset).values_list("key", flat=True))
        systems = known[dataset.name]
        for key in ("system", "baseline"):
            if rule[key] not in systems:
                raise RulesError(
                    f"rule {index + 1}: unknown {key} {rule[key]!r} on dataset {dataset.name!r} "
                    f"(systems: {', '.join(systems) or 'none'})"
                )


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def check_win_rate(dataset: Dataset, index: int, rule: dict[str, Any]) -> RuleOutcome:
    system, baseline = rule["system"], rule["baseline"]
    threshold = float(rule.get("min_lower", 0.5))
    method = rule.get("method", "bootstrap")
    confidence = float(rule.get("confidence", 0.95))
    rows = stats_preferences(dataset)
    prompts, scores = head_to_head_scores(
        rows.turn_ids, rows.candidates, rows.preferred, rows.tie, system=system, baseline=baseline
    )
    result = win_rate_against(
        prompts, scores, method=method, confidence=confidence, n_resamples=2000, seed=BOOTSTRAP_SEED
    )
    result["interval_method"] = (
        "percentile bootstrap over prompts, 2000 resamples, seed 0" if method == "bootstrap" else "Wilson score"
    )
    head = f"{system} vs {baseline}"
    counts = (
        f"{result['wins']} wins, {result['ties']} ties, {result['losses']} losses in {result['n_votes']} votes on "
        f"{result['n_prompts']} prompts"
    )
    min_votes = int(rule.get("min_votes", 1))
    if result["n_votes"] < max(min_votes, 1):
        reason = f"{head}: undefined: {counts}, fewer than {max(min_votes, 1)} votes"
        return RuleOutcome(index, "win_rate", UNDEFINED, reason, rule, result)
    low = result["interval"]["low"]
    if low is None:
        reason = f"{head}: undefined: {result['interval']['undefined']} ({counts})"
        return RuleOutcome(index, "win_rate", UNDEFINED, reason, rule, result)
    level = f"{round(confidence * 100):d}%"
    described = (
        f"{head}: win rate {_fmt(result['win_rate']['value'])}, {level} {method} interval "
        f"[{_fmt(low)}, {_fmt(result['interval']['high'])}] ({counts}); lower bound"
    )
    if low > threshold:
        return RuleOutcome(index, "win_rate", PASS, f"{described} {_fmt(low)} > {threshold:g}", rule, result)
    return RuleOutcome(index, "win_rate", FAIL, f"{described} {_fmt(low)} not above {threshold:g}", rule, result)


def check_alpha(dataset: Dataset, index: int, rule: dict[str, Any], report: dict[str, Any]) -> RuleOutcome:
    aspect = rule["aspect"]
    summary = report["aspects"].get(aspect)
    if summary is None:
        known = ", ".join(report["aspects"]) or "none"
        return RuleOutcome(index, "alpha", FAIL, f"no aspect {aspect!r} (aspects: {known})", rule)
    level = primary_level(summary["level"])
    alpha = summary["alpha"][level]
    ci = summary["alpha_ci95"]
    evidence = {
        "level": level,
        "alpha": alpha,
        "alpha_ci95": ci,
        "n_items": summary["n_items"],
        "n_ratings": summary["n_ratings"],
        "interval_method": f"percentile bootstrap over items, {BOOTSTRAP_RESAMPLES} resamples, seed {BOOTSTRAP_SEED}",
    }
    sample = f"{summary['n_items']} items, {summary['n_ratings']} ratings"
    if alpha["value"] is None:
        return RuleOutcome(
            index, "alpha", UNDEFINED, f"{aspect}: alpha undefined: {alpha['undefined']}", rule, evidence
        )
    minimum = float(rule["min"])
    floor = rule.get("min_lower")
    described = f"{aspect}: {level} alpha {_fmt(alpha['value'])}, 95% interval [{_fmt(ci['low'])}, {_fmt(ci['high'])}]"
    described += f" ({sample})"
    if alpha["value"] < minimum:
        return RuleOutcome(index, "alpha", FAIL, f"{described}; alpha below {minimum:g}", rule, evidence)
    if floor is not None:
        if ci["low"] is None:
            reason = f"{described}; interval undefined: {ci['undefined']}"
            return RuleOutcome(index, "alpha", UNDEFINED, reason, rule, evidence)
        if not ci["low"] > float(floor):
            return RuleOutcome(
                index, "alpha", FAIL, f"{described}; lower bound not above {float(floor):g}", rule, evidence
            )
        return RuleOutcome(
            index,
            "alpha",
            PASS,
            f"{described}; at least {minimum:g}, lower bound above {float(floor):g}",
            rule,
            evidence,
        )
    return RuleOutcome(index, "alpha", PASS, f"{described}; at least {minimum:g}", rule, evidence)


def check_judge_certified(dataset: Dataset, index: int, rule: dict[str, Any], certifier: Certifier) -> RuleOutcome:
    judge = Judge.objects.filter(dataset=dataset, name=rule["judge"]).first()
    if judge is None:
        return RuleOutcome(
            index, "judge_certified", FAIL, f"no judge named {rule['judge']!r} on {dataset.name!r}", rule
        )
    answers = {aspect: certifier(dataset, judge, aspect) for aspect in rule["aspects"]}
    evidence = {a: {"outcome": c.outcome, "reason": c.reason, **c.evidence} for a, c in answers.items()}
    parts = "; ".join(f"{a}: {c.outcome} ({c.reason})" for a, c in answers.items())
    outcomes = {c.outcome for c in answers.values()}
    outcome = FAIL if FAIL in outcomes else (UNDEFINED if UNDEFINED in outcomes else PASS)
    return RuleOutcome(index, "judge_certified", outcome, f"judge {judge.name}: {parts}", rule, evidence)


def gate_evaluate(
    datasets: dict[str, Dataset],
    rules: list[dict[str, Any]],
    *,
    default_dataset: str | None = None,
    certifier: Certifier = stored_certificate_certifier,
) -> list[RuleOutcome]:
    """Every rule's outcome, in order; ``datasets`` maps the names the rules use to the datasets. A rule naming a
    system its dataset does not have raises ``RulesError`` before any rule is evaluated."""
    rules_check_systems(datasets, rules, default_dataset=default_dataset)
    reports: dict[str, dict[str, Any]] = {}
    outcomes: list[RuleOutcome] = []
    for index, rule in enumerate(rules):
        name = rule.get("dataset", default_dataset)
        dataset = datasets[str(name)]
        if rule["kind"] == "win_rate":
            outcomes.append(check_win_rate(dataset, index, rule))
        elif rule["kind"] == "alpha":
            if dataset.name not in reports:
                reports[dataset.name] = agreement_report(dataset)
            outcomes.append(check_alpha(dataset, index, rule, reports[dataset.name]))
        else:
            outcomes.append(check_judge_certified(dataset, index, rule, certifier))
    return outcomes
