"""Six biographies, two systems, English and Japanese: the per-system numbers against a hand count.

The scripted provider decomposes each answer into the facts listed here and calls a fact true when it is
marked so. Every expected number below is worked out by hand from that script, not by the code under test.
"""

import pytest
from django.test import Client
from django.urls import reverse

from judging import services as engine
from judging.factscore.models import FactAnswer
from judging.factscore.selectors import factscore_report
from judging.models import RunStatus
from tests.conftest import CAST_PASSWORD
from tests.factories import DatasetFactory, ItemFactory, ResponseFactory, SystemFactory, TurnFactory
from tests.factscore.factories import factscore_config

pytestmark = pytest.mark.django_db

T, F = True, False

# (item, system) -> (answer, [(fact, true?)]); None as facts: the model's decomposition is unreadable.
BIOGRAPHIES: dict[tuple[str, str], tuple[str, list[tuple[str, bool]] | None]] = {
    ("ada", "alpha"): (
        "Ada Lovelace, born 1815 in London, wrote the first program and died in Paris.",
        [
            ("Ada was born in 1815.", T),
            ("Ada was born in London.", T),
            ("Ada died in Paris.", F),
            ("Ada wrote the first program.", T),
        ],
    ),
    ("ada", "beta"): ("Sorry, I don't know who that is.", []),
    ("turing", "alpha"): ("I'm sorry, I don't know", []),
    ("turing", "beta"): (
        "Alan Turing was born in 1912, worked at Bletchley Park and won a Nobel Prize.",
        [("Turing was born in 1912.", T), ("Turing worked at Bletchley Park.", T), ("Turing won a Nobel Prize.", F)],
    ),
    ("hopper", "alpha"): (
        "Grace Hopper was a US Navy admiral who invented the telephone.",
        [("Hopper was a US Navy admiral.", T), ("Hopper invented the telephone.", F)],
    ),
    ("hopper", "beta"): ("What a wonderful question to think about!", []),
    ("soseki", "alpha"): (
        "夏目漱石は1867年に江戸で生まれ、『吾輩は猫である』を書いた小説家です。",
        [("漱石は1867年に生まれた。", T), ("漱石は江戸で生まれた。", T), ("漱石は『吾輩は猫である』を書いた。", T)],
    ),
    ("soseki", "beta"): ("申し訳ありませんが、その人物についてはわかりません。", []),
    ("ryoma", "alpha"): ("坂本龍馬は土佐藩出身の志士で、薩長同盟を仲介しました。", None),
    ("ryoma", "beta"): (
        "坂本龍馬は1836年に土佐で生まれました。",
        [("龍馬は1836年に生まれた。", T), ("龍馬は土佐で生まれた。", T)],
    ),
    ("hokusai", "alpha"): (
        "葛飾北斎は浮世絵師で、富嶽三十六景を描き、京都で生まれ、1900年に亡くなり、90歳近くまで生きました。",
        [
            ("北斎は浮世絵師である。", T),
            ("北斎は京都で生まれた。", F),
            ("北斎は1900年に亡くなった。", F),
            ("北斎は富嶽三十六景を描いた。", T),
            ("北斎は90歳近くまで生きた。", T),
        ],
    ),
    ("hokusai", "beta"): ("葛飾北斎に関する情報はありません。", []),
}


def make_biographies(owner):  # type: ignore[no-untyped-def]
    dataset = DatasetFactory(owner=owner)
    systems = {key: SystemFactory(dataset=dataset, key=key, position=i) for i, key in enumerate(["alpha", "beta"])}
    for position, item_key in enumerate(["ada", "turing", "hopper", "soseki", "ryoma", "hokusai"]):
        item = ItemFactory(dataset=dataset, external_id=item_key, position=position)
        turn = TurnFactory(item=item, index=0, prompt=f"Tell me about {item_key}.", reference=None)
        for s, (system_key, system) in enumerate(systems.items()):
            ResponseFactory(turn=turn, system=system, position=s, text=BIOGRAPHIES[(item_key, system_key)][0])
    return dataset


def test_per_system_numbers_equal_the_hand_count(  # type: ignore[no-untyped-def]
    world, world_provider, eager, django_capture_on_commit_callbacks, researcher
):
    for answer, facts in BIOGRAPHIES.values():
        if facts is not None:  # an answer left out of the script gets an unreadable decomposition
            world.facts[answer] = [fact for fact, _ in facts]
            world.true_facts.update(fact for fact, true in facts if true)
    dataset = make_biographies(researcher)
    cfg = factscore_config(world_provider, factscore={"corpus": None, "topic": None, "knowledge": "item"})
    with django_capture_on_commit_callbacks(execute=True):
        run = engine.judge_run_launch(dataset=dataset, config=cfg, launched_by=None)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.notes

    # Four refusals (two English, two Japanese) are never decomposed: 12 - 4 = 8 decompositions, and
    # 4 + 2 + 3 + 5 (alpha) + 3 + 2 (beta) = 19 checks.
    assert world.requests.count("decompose") == 8 and world.requests.count("verify") == 19

    report = factscore_report(run, include_answers=True)
    alpha, beta = report["systems"]
    # alpha: ada 3/4, turing refused, hopper 1/2, soseki 3/3, ryoma failed, hokusai 3/5.
    assert alpha["n_prompts"] == 6 and alpha["n_refused"] == 1 and alpha["n_failed"] == 1
    assert alpha["n_no_facts"] == 0 and alpha["n_scored"] == 4 and alpha["n_responding"] == 5
    assert alpha["factscore"] == pytest.approx((0.75 + 0.5 + 1.0 + 0.6) / 4)  # 0.7125
    assert alpha["pct_responding"] == pytest.approx(100 * 5 / 6)  # 83.3: the failed answer responded
    assert alpha["facts_per_answer"] == pytest.approx((4 + 2 + 3 + 5) / 4)  # 3.5: ryoma's facts are unknown
    assert alpha["denominators"] == {"pct_responding": 6, "factscore": 4, "facts_per_answer": 4}
    # beta: ada refused, turing 2/3, hopper no facts, soseki refused, ryoma 2/2, hokusai refused.
    assert beta["n_prompts"] == 6 and beta["n_refused"] == 3 and beta["n_failed"] == 0
    assert beta["n_no_facts"] == 1 and beta["n_scored"] == 2 and beta["n_responding"] == 3
    assert beta["factscore"] == pytest.approx((2 / 3 + 1.0) / 2)  # 0.8333
    assert beta["pct_responding"] == pytest.approx(50.0)
    assert beta["facts_per_answer"] == pytest.approx((3 + 0 + 2) / 3)  # 1.667: hopper counts with 0 facts
    assert beta["denominators"] == {"pct_responding": 6, "factscore": 2, "facts_per_answer": 3}
    assert report["unfinished_answers"] == 0

    outcomes = {(row["item"], row["system"]): row["outcome"] for row in report["answers"]}
    assert len(outcomes) == 12
    assert {key for key, outcome in outcomes.items() if outcome == "refused"} == {
        ("turing", "alpha"),
        ("ada", "beta"),
        ("soseki", "beta"),
        ("hokusai", "beta"),
    }
    assert outcomes[("ryoma", "alpha")] == "failed" and outcomes[("hopper", "beta")] == "no_facts"
    failed = FactAnswer.objects.get(run=run, outcome="failed")
    assert failed.error_kind == "parse:facts" and failed.error == "decomposition: no list of facts found"
    # The run summary holds the unreadable decomposition, and neither refusals nor the answer without facts.
    assert run.parse_errors == 1 and run.error_summary == {"parse:facts": 1}

    # The report page shows every answer under its outcome, and each number with its denominator.
    client = Client()
    assert client.login(username=researcher.username, password=CAST_PASSWORD)
    html = client.get(reverse("factscore:report", args=[run.pk])).content.decode()
    assert html.count('data-outcome="refused"') == 4 and html.count('data-outcome="failed"') == 1
    assert 'data-outcome="no_facts"' in html and html.count('data-outcome="scored"') == 6
    assert "decomposition: no list of facts found" in html
    assert "5 of 6" in html and "3 of 6" in html and "over 4 scored" in html and "over 2 scored" in html
