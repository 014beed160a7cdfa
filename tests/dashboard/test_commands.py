"""agreement / correlate / calibrate commands: stable JSON, reference values from the raw file, errors."""

from __future__ import annotations

import json
from typing import Any

import krippendorff
import numpy as np
import pytest
from django.core.management.base import CommandError
from scipy import stats
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from annotations.models import Dataset
from judging.models import Judge, JudgeKind, JudgeScore
from tests.commands import command_output as run
from tests.dashboard.conftest import ASPECTS, DATASET_NAME, JUDGE_NAME, reference_matrix, reference_pairs
from tests.stats.reference import AGREEMENT_SUMMARY_KEYS

pytestmark = pytest.mark.django_db

STAT_KEYS = {"value", "undefined"}
INTERVAL_KEYS = {"low", "high", "undefined"}


def calibrate_overall(inputs: str, *options: str) -> str:
    """``calibrate`` of the stats dataset's judge towards "overall" from the comma-separated input aspects."""
    return run(
        "calibrate",
        "--dataset",
        DATASET_NAME,
        "--judge",
        JUDGE_NAME,
        "--target",
        "overall",
        "--inputs",
        inputs,
        *options,
    )


def test_agreement_json_shape_and_reference_values(stats_dataset: Dataset, stats_jsonl: list[dict[str, Any]]) -> None:
    report = json.loads(run("agreement", DATASET_NAME, "--json"))
    assert report["dataset"] == DATASET_NAME
    assert list(report["aspects"]) == ASPECTS
    for aspect, summary in report["aspects"].items():
        assert set(summary) == AGREEMENT_SUMMARY_KEYS
        assert set(summary["alpha"]) == {"nominal", "ordinal", "interval"}
        assert set(summary["alpha_ci95"]) == INTERVAL_KEYS
        assert set(summary["fleiss_kappa"]) == STAT_KEYS
        assert set(summary["percent_agreement"]) == {"exact", "within_1"}
        # Positional raters (no "raters" list): only the one-way ICCs.
        assert set(summary["icc"]) == {"ICC1", "ICC1k"}
        matrix = reference_matrix(stats_jsonl, aspect)
        assert summary["n_ratings"] == int(np.sum(~np.isnan(matrix)))
        assert summary["n_items"] == int(np.sum(np.any(~np.isnan(matrix), axis=1)))
        for level in ("nominal", "ordinal", "interval"):
            expected = krippendorff.alpha(reliability_data=matrix.T, level_of_measurement=level)
            assert summary["alpha"][level]["value"] == pytest.approx(expected, abs=1e-9)
        complete = matrix[~np.any(np.isnan(matrix), axis=1)]
        if complete.shape[0] == matrix.shape[0]:
            table, _ = aggregate_raters(complete.astype(int))
            assert summary["fleiss_kappa"]["value"] == pytest.approx(fleiss_kappa(table), abs=1e-9)
        else:
            assert summary["fleiss_kappa"]["undefined"].startswith("unequal numbers of ratings per answer")


def test_agreement_text_output_and_help(stats_dataset: Dataset) -> None:
    text = run("agreement", DATASET_NAME)
    assert f"Agreement for dataset {DATASET_NAME}" in text
    for aspect in ASPECTS:
        assert aspect in text
    with pytest.raises(CommandError, match="no dataset named 'nope'"):
        run("agreement", "nope")


def test_correlate_json_shape_and_scipy_values(stats_dataset: Dataset, stats_jsonl: list[dict[str, Any]]) -> None:
    report = json.loads(run("correlate", "--dataset", DATASET_NAME, "--judge", JUDGE_NAME, "--json"))
    assert report["dataset"] == DATASET_NAME
    assert report["judge"] == JUDGE_NAME
    assert list(report["aspects"]) == ASPECTS
    for aspect, levels in report["aspects"].items():
        assert list(levels) == ["response", "per_prompt", "per_system", "system"]
        for level, entry in levels.items():
            assert {"pearson", "spearman", "kendall", "n", "ci95", "ci95_analytic"} <= set(entry)
            assert set(entry["ci95"]) == {"pearson", "spearman", "kendall"}
            assert set(entry["ci95_analytic"]) == {"pearson", "spearman", "kendall"}
            for interval in entry["ci95_analytic"].values():
                assert set(interval) == INTERVAL_KEYS
            if level in ("per_prompt", "per_system"):
                assert {"n_groups", "groups_skipped"} <= set(entry)
                assert entry["ci95_analytic"]["pearson"]["undefined"]
        pairs = reference_pairs(stats_jsonl, aspect)
        human = np.array([p[2] for p in pairs])
        judge = np.array([p[3] for p in pairs])
        assert levels["response"]["n"] == len(pairs)
        assert levels["response"]["pearson"]["value"] == pytest.approx(stats.pearsonr(human, judge)[0], abs=1e-9)
        assert levels["response"]["kendall"]["value"] == pytest.approx(stats.kendalltau(human, judge)[0], abs=1e-9)
        # Fisher's z without bias adjustment: the interval scipy's pearsonr gives (the limits of R's cor.test).
        fisher = stats.pearsonr(human, judge).confidence_interval(0.95)
        analytic = levels["response"]["ci95_analytic"]["pearson"]
        assert (analytic["low"], analytic["high"]) == pytest.approx((fisher.low, fisher.high), abs=1e-9)
        systems = sorted({p[1] for p in pairs})
        per_system = []
        for system in systems:
            h = np.array([p[2] for p in pairs if p[1] == system])
            j = np.array([p[3] for p in pairs if p[1] == system])
            per_system.append(stats.spearmanr(h, j)[0])
        assert levels["per_system"]["spearman"]["value"] == pytest.approx(np.mean(per_system), abs=1e-9)
        assert levels["per_system"]["n_groups"] == len(systems)
        means_h = [np.mean([p[2] for p in pairs if p[1] == s]) for s in systems]
        means_j = [np.mean([p[3] for p in pairs if p[1] == s]) for s in systems]
        assert levels["system"]["pearson"]["value"] == pytest.approx(stats.pearsonr(means_h, means_j)[0], abs=1e-9)
        assert levels["system"]["n"] == len(systems)


def test_correlate_json_carries_the_judges_page_diagnostics(stats_dataset: Dataset) -> None:
    from judging.analysis.judge_reports import judge_details

    report = json.loads(run("correlate", "--dataset", DATASET_NAME, "--judge", JUDGE_NAME, "--json"))
    assert list(report["diagnostics"]) == ASPECTS
    for aspect, diagnostics in report["diagnostics"].items():
        assert set(diagnostics) == {"ceiling", "alternative_annotator", "bias"}
        assert set(diagnostics["bias"]) == {"length", "position_consistency", "self_preference"}
        page = json.loads(json.dumps(judge_details(stats_dataset, JUDGE_NAME, aspect)))
        for key in ("ceiling", "alternative_annotator", "bias"):
            assert diagnostics[key] == page[key], key
    # the length bias is the Spearman correlation of answer length with the judge's scores
    assert report["diagnostics"][ASPECTS[0]]["bias"]["length"]["judge"]["value"] is not None


def test_correlate_text_and_errors(stats_dataset: Dataset) -> None:
    text = run("correlate", "--dataset", DATASET_NAME, "--judge", JUDGE_NAME)
    assert f"Judge {JUDGE_NAME} versus humans" in text
    assert "per_system" in text
    with pytest.raises(CommandError, match="has no judge named 'ghost'"):
        run("correlate", "--dataset", DATASET_NAME, "--judge", "ghost")


def test_calibrate_saves_derived_judge_that_correlate_reads(stats_dataset: Dataset) -> None:
    result = json.loads(calibrate_overall("factuality,fluency,relevance", "--name", "MATE Ξ", "--json"))
    assert set(result["weights"]) == {"factuality", "fluency", "relevance"}
    assert result["heldout_pearson"]["value"] is not None
    derived = Judge.objects.get(dataset=stats_dataset, name="MATE Ξ")
    assert derived.kind == JudgeKind.DERIVED
    assert derived.params["weights"] == result["weights"]
    assert JudgeScore.objects.filter(judge=derived, aspect_name="overall").count() == result["n_scores"] > 0
    report = json.loads(run("correlate", "--dataset", DATASET_NAME, "--judge", "MATE Ξ", "--json"))
    assert list(report["aspects"]) == ["overall"]
    # Re-running replaces the derived judge's scores instead of duplicating them.
    calibrate_overall("fluency", "--name", "MATE Ξ")
    derived.refresh_from_db()
    assert list(derived.params["weights"]) == ["fluency"]
    assert JudgeScore.objects.filter(judge=derived).count() == result["n_scores"]


def test_calibrate_rejects_bad_requests(stats_dataset: Dataset) -> None:
    with pytest.raises(CommandError, match="unknown aspect"):
        calibrate_overall("nonsense")
    with pytest.raises(CommandError, match="distinct input aspects"):
        calibrate_overall("overall")
    with pytest.raises(CommandError, match="imported judge is already named"):
        calibrate_overall("fluency", "--name", JUDGE_NAME)


@pytest.mark.parametrize("command", ["agreement", "correlate", "calibrate"])
def test_help(command: str) -> None:
    from django.core.management import load_command_class

    parser = load_command_class("judging", command).create_parser("manage.py", command)
    assert "--json" in parser.format_help()


def test_empty_dataset_reports_are_undefined_not_errors(researcher: Any) -> None:
    from tests.factories import AspectFactory, DatasetFactory, JudgeFactory, ResponseFactory

    dataset = DatasetFactory(name="empty Ξ", owner=researcher)
    AspectFactory(dataset=dataset, name="overall")
    JudgeFactory(dataset=dataset, name="idle judge")
    ResponseFactory(turn__item__dataset=dataset)
    report = json.loads(run("agreement", "empty Ξ", "--json"))
    summary = report["aspects"]["overall"]
    assert summary["n_ratings"] == 0
    assert summary["alpha"]["ordinal"] == {"value": None, "undefined": "no answer has two or more ratings"}
    assert json.loads(run("correlate", "--dataset", "empty Ξ", "--judge", "idle judge", "--json"))["aspects"] == {}
    assert "no scores for any aspect" in run("correlate", "--dataset", "empty Ξ", "--judge", "idle judge")


@pytest.mark.parametrize(("raters", "with_ids"), [(1, False), (100, True)])
def test_agreement_from_one_to_a_hundred_raters(raters: int, with_ids: bool, researcher: Any, tmp_path: Any) -> None:
    from annotations.datasets.importing import dataset_import
    from bench.datagen import generate_llm_jp_jsonl

    path = tmp_path / "many.jsonl"
    generate_llm_jp_jsonl(path, items=6, systems=3, raters=raters, seed=2, max_chars=80, with_rater_ids=with_ids)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    with open(path, "rb") as handle:
        dataset_import(stream=handle, name=f"raters {raters}", preset="llm-human-eval-jp", owner=researcher)
    report = json.loads(run("agreement", f"raters {raters}", "--json"))
    for aspect, summary in report["aspects"].items():
        matrix = reference_matrix(lines, aspect)
        if raters == 1:
            assert summary["alpha"]["interval"]["undefined"] == "no answer has two or more ratings"
            assert set(summary["icc"]) == {"ICC1", "ICC1k"}
            continue
        for level in ("nominal", "ordinal", "interval"):
            expected = krippendorff.alpha(reliability_data=matrix.T, level_of_measurement=level)
            assert summary["alpha"][level]["value"] == pytest.approx(expected, abs=1e-9)
        # Named raters: the two-way ICCs are reported (here computed on the answers every rater rated).
        assert {"ICC2", "ICC2k", "ICC3", "ICC3k"} <= set(summary["icc"])
