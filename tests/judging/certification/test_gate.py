"""manage.py gate: each rule kind passes and fails as it should, exits 0 only when every rule passes, prints one line
per rule and writes the JSON report. Wilson's interval matches statsmodels."""

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from statsmodels.stats.proportion import proportion_confint

from annotations.datasets.importing import dataset_import
from annotations.models import Dataset
from annotations.rubrics.specs import parse_rubric
from judging.analysis.gate import FAIL, PASS, UNDEFINED, Certification, gate_evaluate, parse_rules
from judging.models import Judge, JudgeKind
from judging.statistics.preference import head_to_head_scores, wilson_interval, win_rate_against

RUBRIC = {"aspects": [{"name": "fluency", "min": 1, "max": 5}, {"name": "overall", "min": 1, "max": 5}]}


def build_dataset(name: str = "release") -> Dataset:
    """40 prompts answered by a, b and c. Fluency: three raters who always agree (alpha 1). Overall: three raters
    scoring at random (alpha near 0). Votes: a against b on every prompt (a wins 30, b 6, 4 ties); a against c on 30
    prompts (16 to 14)."""
    rng = np.random.default_rng(7)
    lines = []
    for i in range(40):
        responses: dict[str, Any] = {}
        for system in ("a", "b", "c"):
            fluent = int(rng.integers(1, 6))
            responses[system] = {
                "response": f"{system} answers {i}",
                "raters": ["r1", "r2", "r3"],
                "human_evals": {"fluency": [fluent] * 3, "overall": [int(v) for v in rng.integers(1, 6, size=3)]},
            }
        a_vs_b: dict[str, Any] = {"rater": "v1", "candidates": ["a", "b"]}
        if i < 30:
            a_vs_b["preferred"] = "a"
        elif i < 36:
            a_vs_b["preferred"] = "b"
        else:
            a_vs_b.update(preferred=None, tie=True)
        preferences = [a_vs_b]
        if i < 30:
            preferences.append({"rater": "v2", "candidates": ["c", "a"], "preferred": "a" if i < 16 else "c"})
        lines.append(
            {"id": f"p{i}", "turns": [{"prompt": f"prompt {i}", "responses": responses, "preferences": preferences}]}
        )
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    dataset = dataset_import(stream=io.BytesIO(body), name=name, rubric=parse_rubric(RUBRIC, source="t")).dataset
    Judge.objects.create(dataset=dataset, name="gpt-judge", kind=JudgeKind.IMPORTED)
    return dataset


def run_gate(tmp_path: Path, rules: str) -> tuple[int, str, dict[str, Any]]:
    path = tmp_path / "rules.toml"
    path.write_text(rules)
    report = tmp_path / "report.json"
    out = io.StringIO()
    code = 0
    try:
        call_command("gate", str(path), "--report", str(report), stdout=out)
    except CommandError as exc:
        code = exc.returncode
        out.write(str(exc))
    return code, out.getvalue(), json.loads(report.read_text()) if report.exists() else {}


def test_wilson_matches_statsmodels() -> None:
    # statsmodels 0.15.0: proportion_confint(27.5, 40, alpha=0.05, method="wilson")
    # printed (0.5328867716887667, 0.8092551278622507); 30/40 printed (0.5980603857923197, 0.858128813609037).
    for count, printed in (
        (27.5, (0.5328867716887667, 0.8092551278622507)),
        (30, (0.5980603857923197, 0.858128813609037)),
    ):
        got = wilson_interval(count / 40, 40)
        assert (got["low"], got["high"]) == pytest.approx(printed, abs=1e-12)
        assert (got["low"], got["high"]) == pytest.approx(proportion_confint(count, 40, method="wilson"), abs=1e-12)
    assert wilson_interval(0.5, 0)["undefined"] == "no votes"


def test_head_to_head_counts_ties_half_and_ignores_third_choices() -> None:
    prompts, scores = head_to_head_scores(
        [1, 1, 2, 3, 4],
        [["a", "b"], ["a", "b", "c"], ["b", "a"], ["a", "c"], ["a", "b"]],
        ["a", "c", None, "a", "b"],
        [False, False, True, False, False],
        system="a",
        baseline="b",
    )
    assert (prompts, scores) == ([1, 2, 4], [1.0, 0.5, 0.0])
    result = win_rate_against(prompts, scores, method="wilson")
    assert result["win_rate"]["value"] == 0.5 and (result["wins"], result["ties"], result["losses"]) == (1, 1, 1)


@pytest.mark.django_db
def test_win_rate_rule_passes_and_fails(tmp_path: Path) -> None:
    build_dataset()
    code, out, report = run_gate(
        tmp_path,
        'dataset = "release"\n'
        '[[rule]]\nkind = "win_rate"\nsystem = "a"\nbaseline = "b"\nmin_lower = 0.5\n'
        '[[rule]]\nkind = "win_rate"\nsystem = "a"\nbaseline = "b"\nmethod = "wilson"\n',
    )
    assert code == 0, out
    assert "PASS      rule 1 (win_rate): a vs b: win rate 0.800, 95% bootstrap interval" in out
    assert "30 wins, 4 ties, 6 losses in 40 votes on 40 prompts" in out
    wilson = report["rules"][1]["evidence"]["interval"]
    assert (wilson["low"], wilson["high"]) == pytest.approx(proportion_confint(32, 40, method="wilson"), abs=1e-12)
    assert report["passed"] is True and report["rules"][0]["evidence"]["n_votes"] == 40

    code, out, report = run_gate(
        tmp_path,
        'dataset = "release"\n[[rule]]\nkind = "win_rate"\nsystem = "a"\nbaseline = "c"\n'
        '[[rule]]\nkind = "win_rate"\nsystem = "b"\nbaseline = "c"\n',
    )
    assert code == 1
    assert "FAIL      rule 1 (win_rate): a vs c: win rate 0.533" in out and "not above 0.5" in out
    assert "UNDEFINED rule 2 (win_rate): b vs c: undefined: 0 wins, 0 ties, 0 losses in 0 votes" in out
    assert [r["outcome"] for r in report["rules"]] == [FAIL, UNDEFINED] and report["passed"] is False


@pytest.mark.django_db
def test_alpha_rule_passes_and_fails(tmp_path: Path) -> None:
    build_dataset()
    code, out, report = run_gate(
        tmp_path, 'dataset = "release"\n[[rule]]\nkind = "alpha"\naspect = "fluency"\nmin = 0.67\nmin_lower = 0.6\n'
    )
    assert code == 0, out
    assert "fluency: ordinal alpha 1.000, 95% interval [1.000, 1.000] (120 items, 360 ratings)" in out
    code, out, report = run_gate(
        tmp_path,
        'dataset = "release"\n[[rule]]\nkind = "alpha"\naspect = "overall"\nmin = 0.67\nmin_lower = 0.6\n'
        '[[rule]]\nkind = "alpha"\naspect = "style"\nmin = 0.5\n',
    )
    assert code == 1
    evidence = report["rules"][0]["evidence"]
    assert evidence["alpha"]["value"] < 0.67 and "alpha below 0.67" in report["rules"][0]["reason"]
    assert report["rules"][1]["reason"] == "no aspect 'style' (aspects: fluency, overall)"


@pytest.mark.django_db
def test_alpha_rule_fails_on_the_lower_bound_alone(tmp_path: Path) -> None:
    dataset = build_dataset()
    (outcome,) = gate_evaluate(
        {"release": dataset},
        [{"kind": "alpha", "aspect": "fluency", "min": 0.5, "min_lower": 1.0}],
        default_dataset="release",
    )
    assert outcome.outcome == FAIL and "lower bound not above 1" in outcome.reason


@pytest.mark.django_db
def test_judge_certified_rule(tmp_path: Path) -> None:
    dataset = build_dataset()
    code, out, _report = run_gate(
        tmp_path,
        'dataset = "release"\n[[rule]]\nkind = "judge_certified"\njudge = "gpt-judge"\naspects = ["fluency"]\n',
    )
    assert code == 1  # the judge scored no fluency: the test cannot be run, so the rule cannot pass
    assert (
        "UNDEFINED rule 1 (judge_certified): judge gpt-judge: fluency: undefined (judge 'gpt-judge' has no score" in out
    )
    rules = [{"kind": "judge_certified", "judge": "gpt-judge", "aspects": ["fluency", "overall"]}]

    def certifies(_dataset: Dataset, _judge: Judge, aspect: str) -> Certification:
        return Certification(PASS, "tracks the humans") if aspect != "" else Certification(FAIL, "")

    def refuses_overall(_dataset: Dataset, _judge: Judge, aspect: str) -> Certification:
        return Certification(FAIL, "loses to the humans") if aspect == "overall" else Certification(PASS, "ok")

    (passed,) = gate_evaluate({"release": dataset}, rules, default_dataset="release", certifier=certifies)
    assert passed.outcome == PASS
    (failed,) = gate_evaluate({"release": dataset}, rules, default_dataset="release", certifier=refuses_overall)
    assert failed.outcome == FAIL and "overall: fail (loses to the humans)" in failed.reason
    (unknown,) = gate_evaluate(
        {"release": dataset}, [{**rules[0], "judge": "nobody"}], default_dataset="release", certifier=certifies
    )
    assert unknown.outcome == FAIL and "no judge named 'nobody'" in unknown.reason


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('[[rule]]\nkind = "win_rate"\nsystem = "a"\nbaseline = "b"\n', "no dataset"),
        ('dataset = "d"\n[[rule]]\nkind = "speed"\n', "'kind' must be one of"),
        ('dataset = "d"\n[[rule]]\nkind = "alpha"\naspect = "x"\n', "'min' is required"),
        ('dataset = "d"\n[[rule]]\nkind = "win_rate"\nsystem = "a"\nbaseline = "b"\nmethod = "t"\n', "'method'"),
        ('dataset = "d"\n[[rule]]\nkind = "alpha"\naspect = "x"\nmin = "high"\n', "wrong type"),
        ("dataset = [", "neither valid JSON nor valid TOML"),
    ],
)
def test_bad_rules_files_are_named(text: str, fragment: str) -> None:
    from judging.analysis.gate import RulesError

    with pytest.raises(RulesError, match=fragment):
        parse_rules(text.encode(), origin="rules.toml")


@pytest.mark.django_db
def test_judge_certified_rule_runs_the_alternative_annotator_test(researcher) -> None:  # type: ignore[no-untyped-def]
    from tests.dashboard.decision_data import COPY_JUDGE, DATASET, RANDOM_JUDGE, make_decision_dataset

    dataset = make_decision_dataset(researcher)
    rules = [
        {"kind": "judge_certified", "judge": COPY_JUDGE, "aspects": ["overall"]},
        {"kind": "judge_certified", "judge": RANDOM_JUDGE, "aspects": ["overall"]},
    ]
    copy, random = gate_evaluate({DATASET: dataset}, rules, default_dataset=DATASET)
    assert copy.outcome == PASS and "passes the alternative-annotator test" in copy.reason
    assert random.outcome == FAIL and "fails the alternative-annotator test: winning rate 0.00" in random.reason
    assert copy.evidence["overall"]["winning_rate"]["value"] >= 0.5


@pytest.mark.django_db
def test_a_system_as_its_own_baseline_is_a_usage_error(tmp_path: Path) -> None:
    build_dataset()
    code, out, report = run_gate(
        tmp_path, 'dataset = "release"\n[[rule]]\nkind = "win_rate"\nsystem = "a"\nbaseline = "a"\nmin_lower = 0.4\n'
    )
    assert code == 2, out
    assert "rule 1: 'system' and 'baseline' are both 'a'; a system cannot be its own baseline" in out
    assert report == {}


@pytest.mark.django_db
@pytest.mark.parametrize(("system", "baseline", "named"), [("a", "a-v6", "baseline 'a-v6'"), ("z", "b", "system 'z'")])
def test_an_unknown_system_is_named_with_the_known_ones(tmp_path: Path, system: str, baseline: str, named: str) -> None:
    build_dataset()
    code, out, report = run_gate(
        tmp_path,
        'dataset = "release"\n[[rule]]\nkind = "alpha"\naspect = "fluency"\nmin = 0.5\n'
        f'[[rule]]\nkind = "win_rate"\nsystem = "{system}"\nbaseline = "{baseline}"\n',
    )
    assert code == 2, out
    assert f"rule 2: unknown {named} on dataset 'release' (systems: a, b, c)" in out
    assert "votes" not in out and report == {}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "text",
    [
        "dataset = [",
        'dataset = "release"\n[[rule]]\nkind = "speed"\n',
        'dataset = "no-such-dataset"\n[[rule]]\nkind = "alpha"\naspect = "fluency"\nmin = 0.5\n',
    ],
)
def test_malformed_rules_exit_2_and_a_failed_gate_exits_1(tmp_path: Path, text: str) -> None:
    build_dataset()
    code, out, report = run_gate(tmp_path, text)
    assert code == 2, out
    assert report == {}
    code, out, report = run_gate(
        tmp_path, 'dataset = "release"\n[[rule]]\nkind = "alpha"\naspect = "overall"\nmin = 1\n'
    )
    assert code == 1 and report["passed"] is False


def test_a_missing_rules_file_exits_2(tmp_path: Path) -> None:
    with pytest.raises(CommandError) as caught:
        call_command("gate", str(tmp_path / "absent.toml"), "--report", str(tmp_path / "r.json"))
    assert caught.value.returncode == 2 and "cannot read" in str(caught.value)


def test_the_documented_ci_workflow_sets_only_variables_the_app_reads() -> None:
    root = Path(__file__).resolve().parents[3]
    page = (root / "docs" / "gate.md").read_text(encoding="utf-8")
    workflow = page.split("```yaml", 1)[1].split("```", 1)[0]
    env_block = workflow.split("    env:\n", 1)[1].split("    steps:", 1)[0]
    names = [line.split(":", 1)[0].strip() for line in env_block.splitlines() if line.strip()]
    assert names, "the documented workflow sets no environment"
    read = (root / "evalsite" / "settings.py").read_text(encoding="utf-8")
    assert [name for name in names if f'"{name}"' not in read] == []
