"""A mapping declares a pairwise judge: its votes import as an imported judge's verdicts (a pairwise run marked
imported, with its judgments and scores), never as a rater's preferences; the humans' ranking does not count them and
the judge's agreement with the humans, with and without ties, comes out of the product.

The agreement is Zheng et al. (2023, "Judging LLM-as-a-judge with MT-Bench and Chatbot Arena", section 4.2): over
every (judge vote, human vote) pair on the same question, the share that agree; with ties a tie agrees only with a
tie, without ties every pair in which either side is a tie is left out. The sample below is small enough to count
by hand (see ``test_agreement_with_and_without_ties_on_a_hand_counted_sample``).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from annotations.datasets.mapping import MappingError, parse_mapping
from annotations.models import Dataset, Rater
from judging.analysis.reports import compute_preferences
from judging.models import Judge, JudgeKind, JudgeScore, Judgment, JudgmentStatus
from tests.commands import command_json as _json
from tests.io.test_mapped_import import MT_BENCH_SCHEMA, conversation, write_parquet

Q81 = [("Compose a travel blog post about Hawaii.", "{m} blog"), ("Rewrite it starting with A.", "{m} A")]
Q82 = [("Draft an email asking for feedback.", "{m} email"), ("Critique your email.", "{m} critique")]

# (question, model_a, model_b, winner, judge, turn)
HUMAN_VOTES = [
    (81, "gpt-4", "claude-v1", "model_a", "author_0", 1),
    (81, "gpt-4", "claude-v1", "model_a", "expert_1", 1),
    (81, "gpt-4", "claude-v1", "tie", "expert_2", 1),
    (81, "gpt-4", "claude-v1", "model_b", "author_0", 2),
    (81, "gpt-4", "claude-v1", "tie", "expert_1", 2),
    (82, "alpaca-13b", "gpt-3.5-turbo", "model_b", "author_2", 1),
    (82, "alpaca-13b", "gpt-3.5-turbo", "model_a", "expert_5", 1),
]
JUDGE_VOTES = [
    (81, "gpt-4", "claude-v1", "model_a", "gpt4_pair", 1),
    (81, "gpt-4", "claude-v1", "tie (inconsistent)", "gpt4_pair", 2),
    # The other order of the pair: gpt-3.5-turbo wins again.
    (82, "gpt-3.5-turbo", "alpaca-13b", "model_a", "gpt4_pair", 1),
]


def _rows(votes: list[tuple[int, str, str, str, str, int]]) -> list[dict[str, Any]]:
    questions = {81: Q81, 82: Q82}

    def conv(qid: int, model: str) -> list[dict[str, str]]:
        return conversation(*[(p, a.format(m=model)) for p, a in questions[qid]])

    return [
        {
            "question_id": qid,
            "model_a": a,
            "model_b": b,
            "winner": winner,
            "judge": judge,
            "conversation_a": conv(qid, a),
            "conversation_b": conv(qid, b),
            "turn": turn,
        }
        for qid, a, b, winner, judge, turn in votes
    ]


def _import(tmp_path: Path, name: str, votes: list[tuple[int, str, str, str, str, int]]) -> Dataset:
    path = write_parquet(tmp_path / f"{name}.parquet", _rows(votes), MT_BENCH_SCHEMA)
    out = io.StringIO()
    call_command("import_mapped", str(path), "--mapping", "mt-bench-human", "--dataset", name, stdout=out)
    return Dataset.objects.get(name=name)


@pytest.mark.django_db
def test_judge_votes_become_an_imported_judge_not_a_rater(tmp_path: Path) -> None:
    dataset = _import(tmp_path, "mtbench", HUMAN_VOTES + JUDGE_VOTES)
    raters = {
        str(name)
        for pair in Rater.objects.filter(dataset=dataset).values_list("pseudonym", "external_id")
        for name in pair
    }
    assert "gpt4_pair" not in raters
    preference_raters = {
        entry["rater"]
        for item in dataset.items.all()
        for turn in item.turns.all()
        for entry in turn.source.get("preferences", [])
    }
    assert preference_raters == {"author_0", "expert_1", "expert_2", "author_2", "expert_5"}
    judge = Judge.objects.get(dataset=dataset, name="gpt4_pair")
    assert judge.kind == JudgeKind.IMPORTED
    assert judge.params["imported_verdicts"] is True and judge.run.notes == "imported verdicts: never run here"
    assert judge.run.method == "pairwise" and judge.run.judge_settings.model is None
    judgments = list(
        Judgment.objects.filter(run=judge.run)
        .order_by("id")
        .values_list(
            "response__system__key", "other_response__system__key", "aspect_name", "score", "verdict", "status"
        )
    )
    assert judgments == [
        ("gpt-4", "claude-v1", "overall", 1.0, "A", JudgmentStatus.DONE),
        ("gpt-4", "claude-v1", "overall", 0.5, "tie", JudgmentStatus.DONE),
        ("gpt-3.5-turbo", "alpaca-13b", "overall", 1.0, "A", JudgmentStatus.DONE),
    ]
    # Its scores are the win rates a pairwise run writes: gpt-4 won turn 1 and tied turn 2 of question 81.
    scores = dict(
        JudgeScore.objects.filter(judge=judge, response__turn__index=0).values_list("response__system__key", "value")
    )
    assert scores == {"gpt-4": 1.0, "claude-v1": 0.0, "gpt-3.5-turbo": 1.0, "alpaca-13b": 0.0}
    # The judge ranks like any pairwise judge.
    assert _json("ranking", "--dataset", "mtbench", "--source", "gpt4_pair", "--bootstrap", "100")["n_comparisons"] == 3


@pytest.mark.django_db
def test_the_humans_ranking_is_unchanged_by_the_judge_votes(tmp_path: Path) -> None:
    _import(tmp_path, "humans-only", HUMAN_VOTES)
    _import(tmp_path, "with-judge", HUMAN_VOTES + JUDGE_VOTES)
    alone = _json("ranking", "--dataset", "humans-only", "--bootstrap", "100")
    mixed = _json("ranking", "--dataset", "with-judge", "--bootstrap", "100")
    assert mixed["n_comparisons"] == alone["n_comparisons"] == len(HUMAN_VOTES)
    assert mixed["systems"] == alone["systems"]
    assert compute_preferences(Dataset.objects.get(name="with-judge"), n_resamples=50)["n_preferences"] == 5


@pytest.mark.django_db
def test_agreement_with_and_without_ties_on_a_hand_counted_sample(tmp_path: Path) -> None:
    _import(tmp_path, "mtbench", HUMAN_VOTES + JUDGE_VOTES)
    # Question 81, turn 1: the judge says gpt-4; humans gpt-4, gpt-4, tie: 2 of 3 agree with ties, 2 of 2 without.
    # Question 81, turn 2: the judge says tie; humans claude-v1, tie: 1 of 2 with ties, none counted without.
    # Question 82, turn 1: the judge says gpt-3.5-turbo; humans gpt-3.5-turbo, alpaca-13b: 1 of 2 either way.
    # With ties 4 of 7; without ties 3 of 4.
    report = _json("agreement", "mtbench")
    votes = report["preferences"]["judges"]["gpt4_pair"]["overall"]["vote_agreement"]
    assert votes["with_ties"] == {"n_vote_pairs": 7, "n_agree": 4, "agreement": {"value": 4 / 7, "undefined": None}}
    assert votes["without_ties"] == {"n_vote_pairs": 4, "n_agree": 3, "agreement": {"value": 0.75, "undefined": None}}
    text = io.StringIO()
    call_command("agreement", "mtbench", stdout=text)
    assert (
        "gpt4_pair / overall: vote agreement with the humans (Zheng et al. 2023): 0.571 (4 of 7 vote pairs) with "
        "ties, 0.750 (3 of 4 vote pairs) without" in text.getvalue()
    )


def test_judges_need_the_rater_column_they_are_values_of() -> None:
    base: dict[str, Any] = {
        "item": "q",
        "prompt": "p",
        "preferences": {"layout": "pair", "system_a": "a", "system_b": "b", "winner": "w", "judges": ["gpt4"]},
    }
    with pytest.raises(MappingError, match="judges are values of the rater column"):
        parse_mapping(base, name="t")
    mapping = parse_mapping({**base, "preferences": {**base["preferences"], "rater": "who"}}, name="t")
    assert mapping.preferences is not None
    assert (mapping.preferences.judges, mapping.preferences.judge_aspect) == (("gpt4",), "overall")


@pytest.mark.django_db
def test_a_judge_verdict_on_more_than_two_answers_is_refused_by_row(tmp_path: Path) -> None:
    path = tmp_path / "votes.csv"
    path.write_text("q,p,cands,pick,who,sys,ans\n1,hi,,,h,x,ax\n1,hi,,,h,y,ay\n1,hi,x|y|z,x,bot,z,az\n")
    mapping = tmp_path / "m.toml"
    mapping.write_text(
        'item = "q"\nprompt = "p"\nsystem = "sys"\nanswer = "ans"\noptional = ["cands", "pick", "who"]\n'
        '[preferences]\nlayout = "choice"\ncandidates = "cands"\npreferred = "pick"\nrater = "who"\n'
        'judges = ["bot"]\n'
    )
    with pytest.raises(CommandError, match="row 3: judge verdict on more than two answers"):
        call_command("import_mapped", str(path), "--mapping", str(mapping), "--dataset", "k", stdout=io.StringIO())
    assert not Dataset.objects.filter(name="k").exists()


@pytest.mark.django_db
def test_the_imported_judge_opens_on_every_page(tmp_path: Path, researcher) -> None:  # type: ignore[no-untyped-def]
    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse

    dataset = _import(tmp_path, "mtbench", HUMAN_VOTES + JUDGE_VOTES)
    dataset.owner = researcher
    dataset.save(update_fields=["owner"])
    client = Client()
    client.force_login(researcher)
    for name in ("dashboard-dataset", "dashboard-overview", "dashboard-judges", "dashboard-rankings"):
        page = client.get(reverse(name, args=[dataset.pk]), {"judge": "gpt4_pair"})
        assert page.status_code == 200, name
    admin = User.objects.create_superuser("root", "root@example.org", "pw-for-the-test-only")
    client.force_login(admin)
    run = Judge.objects.get(dataset=dataset, name="gpt4_pair").run
    assert client.get(reverse("admin:judging_judgerun_change", args=[run.pk])).status_code == 200
    assert client.get(reverse("admin:judging_judgerun_changelist")).status_code == 200
