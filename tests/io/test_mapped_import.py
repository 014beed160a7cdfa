"""The mapped import: each ready-made mapping imports a small file written in its dataset's published layout, a
hand-written mapping reads CSV/TSV in wide and long layouts with judge scores and best-of-K choices, and bad rows
are refused with their row number and nothing written."""

import csv
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command

from annotations.datasets.exporting import iter_export_objects
from annotations.models import Dataset, Rating
from judging.analysis.reports import compute_preferences
from judging.models import JudgeScore, Judgment
from tests.io.helpers import row_counts, write_lines


def run(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("import_mapped", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, str(exc)
    return 0, out.getvalue() + err.getvalue()


def conversation(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    messages = []
    for prompt, answer in pairs:
        messages += [{"content": prompt, "role": "user"}, {"content": answer, "role": "assistant"}]
    return messages


def exported(name: str) -> list[dict[str, Any]]:
    return list(iter_export_objects(dataset=Dataset.objects.get(name=name)))


def imported(path: str, mapping: str, dataset: str) -> list[dict[str, Any]]:
    """The items of the dataset that importing the file through the mapping creates, as the export writes them."""
    code, output = run(path, "--mapping", mapping, "--dataset", dataset)
    assert code == 0, output
    return exported(dataset)


MESSAGE = pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())]))


# MT-Bench human judgments, as lmsys/mt_bench_human_judgments publishes them (features question_id int64, model_a,
# model_b, winner, judge strings, conversation_a/b lists of {content, role}, turn int64). Every row carries the whole
# two-turn conversation; "turn" says which turn the vote is about.
def mt_bench_rows() -> list[dict[str, Any]]:
    q81 = [
        ("Compose a travel blog post about Hawaii.", "{m} blog"),
        ("Rewrite it starting every sentence with A.", "{m} A"),
    ]
    q82 = [("Draft an email asking for feedback.", "{m} email"), ("Critique your email.", "{m} critique")]

    def conv(question: list[tuple[str, str]], model: str) -> list[dict[str, str]]:
        return conversation(*[(p, a.format(m=model)) for p, a in question])

    rows = []
    for qid, question, a, b, winner, judge, turn in [
        (81, q81, "gpt-4", "claude-v1", "model_a", "author_0", 1),
        (81, q81, "gpt-4", "claude-v1", "tie", "author_0", 2),
        (81, q81, "vicuna-13b-v1.2", "gpt-4", "model_b", "expert_3", 1),
        (82, q82, "alpaca-13b", "gpt-3.5-turbo", "model_b", "author_2", 2),
        (82, q82, "alpaca-13b", "gpt-3.5-turbo", "tie (inconsistent)", "gpt4_pair", 1),
    ]:
        rows.append(
            {
                "question_id": qid,
                "model_a": a,
                "model_b": b,
                "winner": winner,
                "judge": judge,
                "conversation_a": conv(question, a),
                "conversation_b": conv(question, b),
                "turn": turn,
            }
        )
    return rows


def write_parquet(path: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def _pairwise_schema(question_id: pa.DataType, *more: tuple[str, pa.DataType]) -> pa.Schema:
    """The published pairwise-preference layout both MT-Bench's human judgments and Chatbot Arena's conversations
    share, with its question id's type and the columns one of them adds."""
    return pa.schema(
        [
            ("question_id", question_id),
            ("model_a", pa.string()),
            ("model_b", pa.string()),
            ("winner", pa.string()),
            ("judge", pa.string()),
            ("conversation_a", MESSAGE),
            ("conversation_b", MESSAGE),
            ("turn", pa.int64()),
            *more,
        ]
    )


MT_BENCH_SCHEMA = _pairwise_schema(pa.int64())


@pytest.mark.django_db
def test_mt_bench_human_judgments(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "human-00000-of-00001.parquet", mt_bench_rows(), MT_BENCH_SCHEMA)
    items = imported(str(path), "mt-bench-human", "mtbench")
    assert [item["id"] for item in items] == ["81", "82"]
    first, second = items[0]["turns"]
    assert first["prompt"] == "Compose a travel blog post about Hawaii."
    assert second["prompt"] == "Rewrite it starting every sentence with A."
    assert list(second["responses"]) == ["gpt-4", "claude-v1", "vicuna-13b-v1.2"]
    assert second["responses"]["claude-v1"]["response"] == "claude-v1 A"
    assert first["preferences"] == [
        {"rater": "author_0", "candidates": ["gpt-4", "claude-v1"], "preferred": "gpt-4"},
        {"rater": "expert_3", "candidates": ["vicuna-13b-v1.2", "gpt-4"], "preferred": "gpt-4"},
    ]
    assert second["preferences"] == [
        {"rater": "author_0", "candidates": ["gpt-4", "claude-v1"], "preferred": None, "tie": True}
    ]
    # The gpt4_pair vote is the verdict of an imported judge, not a rater's preference.
    assert "preferences" not in items[1]["turns"][0]
    assert Judgment.objects.get(run__judge__name="gpt4_pair").score == 0.5
    summary = compute_preferences(Dataset.objects.get(name="mtbench"), n_resamples=50)
    # Three decided votes (gpt-4 twice, gpt-3.5-turbo once); the human tie has no preferred system.
    assert summary["n_preferences"] == 3 and summary["n_skipped"] == 1
    gpt4 = next(row for row in summary["systems"] if row["system"] == "gpt-4")
    assert (gpt4["shown"], gpt4["chosen"]) == (2, 2)


ARENA_SCHEMA = _pairwise_schema(
    pa.string(),
    ("anony", pa.bool_()),
    ("language", pa.string()),
    ("tstamp", pa.float64()),
)


def arena_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for qid, a, b, winner, turns in [
        ("58210e39b3fd4441a2bd4a518bb44c2d", "chatglm-6b", "koala-13b", "model_b", 1),
        ("2564acd09e3942fd97657d05282d4389", "oasst-pythia-12b", "alpaca-13b", "tie", 1),
        ("90bfd142157948aba01931726c888e7f", "koala-13b", "oasst-pythia-12b", "model_a", 2),
        ("a7c5accc53e649a3bc6b2e41d962ebc4", "vicuna-13b", "oasst-pythia-12b", "tie (bothbad)", 1),
    ]:
        pairs_a = [(f"{qid} question {t}", f"{a} says {t}") for t in range(1, turns + 1)]
        pairs_b = [(f"{qid} question {t}", f"{b} says {t}") for t in range(1, turns + 1)]
        rows.append(
            {
                "question_id": qid,
                "model_a": a,
                "model_b": b,
                "winner": winner,
                "judge": f"arena_user_{len(rows)}",
                "conversation_a": conversation(*pairs_a),
                "conversation_b": conversation(*pairs_b),
                "turn": turns,
                "anony": True,
                "language": "English",
                "tstamp": 1682351591.1322,
            }
        )
    return rows


@pytest.mark.django_db
def test_chatbot_arena_battles(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "train-00000-of-00001.parquet", arena_rows(), ARENA_SCHEMA)
    items = imported(str(path), "chatbot-arena", "arena")
    assert len(items) == 4
    two_turns = items[2]["turns"]
    assert len(two_turns) == 2 and "preferences" not in two_turns[0]
    assert two_turns[1]["preferences"][0]["preferred"] == "koala-13b"
    assert two_turns[1]["responses"]["oasst-pythia-12b"]["response"] == "oasst-pythia-12b says 2"
    assert items[1]["turns"][0]["preferences"][0] == {
        "rater": "arena_user_1",
        "candidates": ["oasst-pythia-12b", "alpaca-13b"],
        "preferred": None,
        "tie": True,
    }
    assert items[3]["turns"][0]["preferences"][0]["none_appropriate"] is True


@pytest.mark.django_db
def test_helpsteer2(tmp_path: Path) -> None:
    # nvidia/HelpSteer2 train.jsonl: prompt, response and five attributes scored 0-4, two responses per prompt.
    lines = [
        {
            "prompt": "c#",
            "response": "C# is a language.",
            "helpfulness": 3,
            "correctness": 4,
            "coherence": 4,
            "complexity": 2,
            "verbosity": 1,
        },
        {
            "prompt": "c#",
            "response": "C# is a note.",
            "helpfulness": 0,
            "correctness": 1,
            "coherence": 3,
            "complexity": 1,
            "verbosity": 1,
        },
        {
            "prompt": "bacillus subtilus",
            "response": "A bacterium.",
            "helpfulness": 4,
            "correctness": 4,
            "coherence": 4,
            "complexity": 1,
            "verbosity": 0,
        },
    ]
    path = write_lines(tmp_path / "train.jsonl", lines)
    items = imported(str(path), "helpsteer2", "hs2")
    assert [item["id"] for item in items] == ["item-1", "item-2"]
    answers = items[0]["turns"][0]["responses"]
    assert list(answers) == ["response_1", "response_2"]
    assert answers["response_2"]["human_evals"]["helpfulness"] == [0]
    assert answers["response_2"]["raters"] == ["helpsteer2"]
    dataset = Dataset.objects.get(name="hs2")
    assert {a.name: (a.min_value, a.max_value) for a in dataset.aspects.all()}["verbosity"] == (0, 4)
    assert Rating.objects.filter(response__turn__item__dataset=dataset).count() == 15


@pytest.mark.django_db
def test_summeval(tmp_path: Path) -> None:
    # Yale-LILY SummEval model_annotations.aligned.jsonl (no article text in this file).
    def marks(c: int, s: int, f: int, r: int) -> dict[str, int]:
        return {"coherence": c, "consistency": s, "fluency": f, "relevance": r}

    def summary(model_id: str, decoded: str, experts: list[dict[str, int]], turker: dict[str, int]) -> dict[str, Any]:
        """One model's summary of the same article, with its three experts' and five turkers' marks."""
        return {
            "id": "dm-test-8764fb95bfad8ee849274873a92fb8d6b400eee2",
            "decoded": decoded,
            "expert_annotations": experts,
            "turker_annotations": [turker] * 5,
            "references": ["Andros Townsend an 83rd minute sub in Tottenham 's draw with Burnley .", "crowd ref"],
            "model_id": model_id,
            "filepath": "cnndm/dailymail/stories/8764fb95bfad8ee849274873a92fb8d6b400eee2.story",
        }

    lines = [
        summary(
            "M11",
            "paul merson was brought on with only seven minutes remaining .",
            [marks(1, 1, 3, 2), marks(2, 5, 5, 3), marks(1, 1, 3, 2)],
            marks(3, 4, 4, 4),
        ),
        summary(
            "M13",
            "andros townsend scored the equaliser .",
            [marks(4, 5, 5, 4), marks(3, 5, 5, 4), marks(4, 5, 5, 3)],
            marks(3, 3, 3, 3),
        ),
    ]
    path = write_lines(tmp_path / "model_annotations.aligned.jsonl", lines)
    (item,) = imported(str(path), "summeval", "summeval")
    turn = item["turns"][0]
    assert turn["prompt"] == "dm-test-8764fb95bfad8ee849274873a92fb8d6b400eee2"
    assert turn["reference"].startswith("Andros Townsend an 83rd minute")
    assert turn["responses"]["M11"]["human_evals"]["consistency"] == [1, 5, 1]
    assert turn["responses"]["M13"]["raters"] == ["expert_1", "expert_2", "expert_3"]


MAPPING_TOML = """
item = "qid"
prompt = "question"
system = "model"
answer = "output"

[[ratings]]
layout = "long"
aspect = "criterion"
score = "score"
rater = "annotator"

[judges.gpt4o]
accuracy = "gpt4o_accuracy"
"""
RUBRIC_TOML = """
[rubric]
aspects = [{ name = "accuracy", min = 1, max = 5 }]
"""


def write_csv(path: Path, header: list[str], rows: list[list[Any]], delimiter: str = ",") -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)
    return path


HEADER = ["qid", "question", "model", "output", "annotator", "criterion", "score", "gpt4o_accuracy"]
GOOD_ROWS = [
    ["q1", "2+2?", "a", "4", "w1", "accuracy", "5", "4.5"],
    ["q1", "2+2?", "a", "4", "w2", "accuracy", "4", "4.5"],
    ["q1", "2+2?", "b", "5", "w1", "accuracy", "1", "1.0"],
    ["q1", "2+2?", "b", "5", "w2", "accuracy", "NA", "1.0"],
    ["q2", "3+3?", "a", "6", "w1", "accuracy", "5", ""],
]


@pytest.mark.django_db
def test_long_csv_with_judge_scores_and_preview(tmp_path: Path) -> None:
    mapping = tmp_path / "mapping.toml"
    mapping.write_text(MAPPING_TOML)
    path = write_csv(tmp_path / "ratings.csv", HEADER, GOOD_ROWS)
    code, output = run(str(path), "--mapping", str(mapping), "--preview")
    assert code == 0, output
    preview = json.loads(output)
    assert (preview["items"], preview["ratings"], preview["judge_scores"]) == (2, 5, 2)
    assert preview["rubric"] == "inferred" and preview["aspects"][0]["name"] == "accuracy"
    assert Dataset.objects.count() == 0  # the preview writes nothing
    items = imported(str(path), str(mapping), "csv")
    assert items[0]["turns"][0]["responses"]["b"]["human_evals"] == {"accuracy": [1, "NA"]}
    assert JudgeScore.objects.filter(judge__name="gpt4o").count() == 2


@pytest.mark.django_db
def test_wide_tsv_with_best_of_k(tmp_path: Path) -> None:
    mapping = tmp_path / "mapping.json"
    mapping.write_text(
        json.dumps(
            {
                "prompt": "prompt",
                "system": "system",
                "answer": "answer",
                "ratings": {"layout": "wide", "aspects": {"fluency": "flu", "overall": "ovr"}, "rater": "rater"},
                "preferences": {
                    "layout": "choice",
                    "candidates": "shown",
                    "preferred": "best",
                    "ties": ["="],
                    "rater": "rater",
                },
            }
        )
    )
    rows = [
        ["Hi", "x", "Hello", "r1", "5", "4", "", ""],
        ["Hi", "y", "Hey", "r1", "3", "3", "", ""],
        ["Hi", "z", "Yo", "r1", "2", "2", "x|y|z", "x"],
        ["Hi", "z", "Yo", "r2", "2", "", "x|y|z", "="],
    ]
    path = write_csv(
        tmp_path / "t.tsv", ["prompt", "system", "answer", "rater", "flu", "ovr", "shown", "best"], rows, "\t"
    )
    (item,) = imported(str(path), str(mapping), "tsv")
    turn = item["turns"][0]
    assert turn["responses"]["z"]["human_evals"] == {"fluency": [2, 2], "overall": [2, None]}
    assert [p.get("preferred") for p in turn["preferences"]] == ["x", None]
    assert turn["preferences"][1]["tie"] is True


BAD_CASES = [
    # (case, rows replacing GOOD_ROWS[3] (the 4th data row), fragments of the error)
    (
        "out-of-range",
        ["q1", "2+2?", "b", "5", "w2", "accuracy", "9", "1.0"],
        ["row 4", "score out of range", "human_evals.accuracy[1]", "found 9"],
    ),
    (
        "conflicting-answer",
        ["q1", "2+2?", "b", "five", "w2", "accuracy", "2", "1.0"],
        ["row 4", "conflicting answer", "row 3", "five"],
    ),
    (
        "duplicate-rating",
        ["q1", "2+2?", "b", "5", "w1", "accuracy", "2", "1.0"],
        ["row 4", "duplicate rating", "w1", "row 3"],
    ),
    ("nul", ["q1", "2+2?", "c", "bad\x00text", "w2", "accuracy", "2", "1.0"], ["row 4", "NUL"]),
    ("not-a-number", ["q1", "2+2?", "b", "5", "w2", "accuracy", "good", "1.0"], ["row 4", "invalid score", "good"]),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("case", "bad_row", "fragments"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_rows_are_refused_with_their_number(
    tmp_path: Path, case: str, bad_row: list[str], fragments: list[str]
) -> None:
    mapping = tmp_path / "mapping.toml"
    mapping.write_text(MAPPING_TOML + RUBRIC_TOML)
    rows = [*GOOD_ROWS[:3], bad_row, GOOD_ROWS[4]]
    path = write_csv(tmp_path / "ratings.csv", HEADER, rows)
    before = row_counts()
    code, message = run(str(path), "--mapping", str(mapping), "--dataset", case)
    assert code == 1
    for fragment in fragments:
        assert fragment in message, message
    assert "nothing was imported" in message
    assert row_counts() == before


@pytest.mark.django_db
def test_unknown_winner_and_missing_column(tmp_path: Path) -> None:
    rows = mt_bench_rows()
    rows[3]["winner"] = "model_c"
    path = write_parquet(tmp_path / "human.parquet", rows, MT_BENCH_SCHEMA)
    before = row_counts()
    code, message = run(str(path), "--mapping", "mt-bench-human", "--dataset", "bad")
    assert code == 1 and "row 4: unknown winner" in message and "model_c" in message, message
    no_judge = MT_BENCH_SCHEMA.remove(MT_BENCH_SCHEMA.get_field_index("judge"))
    path = write_parquet(
        tmp_path / "nojudge.parquet", [{k: v for k, v in r.items() if k != "judge"} for r in rows], no_judge
    )
    code, message = run(str(path), "--mapping", "mt-bench-human", "--dataset", "bad")
    assert code == 1 and "column not in the file" in message and "'judge'" in message, message
    assert row_counts() == before


@pytest.mark.django_db
def test_bad_mapping_is_named(tmp_path: Path) -> None:
    mapping = tmp_path / "m.toml"
    mapping.write_text('prompt = "p"\nsystem = "s"\n[[ratings]]\nlayout = "diagonal"\n')
    code, message = run(str(tmp_path / "x.csv"), "--mapping", str(mapping), "--dataset", "x")
    assert code == 1 and "ratings[0].layout" in message and "diagonal" in message
