"""The factscore method run by the judge engine (Celery eager) against the scripted local provider."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from judging import services as engine
from judging.config import ConfigError, validate_config
from judging.factscore.models import AtomicFact, FactAnswer, FactVerdict
from judging.factscore.results import factscore_project
from judging.factscore.selectors import factscore_report, factscore_results_pending
from judging.models import JudgeRun, JudgeScore, Judgment, RunStatus
from tests.factories import DatasetFactory, ItemFactory, ResponseFactory, SystemFactory, TurnFactory
from tests.factscore.factories import factscore_config, make_fact_dataset, script_world
from tests.judging.factories import launch

pytestmark = pytest.mark.django_db


def scores_by_answer(run: JudgeRun, aspect: str = "factscore") -> dict[tuple[str, str], float]:
    return {
        (s.response.turn.item.external_id, s.response.system.key): s.value
        for s in JudgeScore.objects.filter(judge=run.judge, aspect_name=aspect).select_related(
            "response__turn__item", "response__system"
        )
    }


def test_config_validation_knows_factscore_options(world_provider) -> None:  # type: ignore[no-untyped-def]
    cfg = validate_config(factscore_config(world_provider), check_network=False)
    assert cfg.factscore is not None and cfg.factscore.k == 3 and cfg.factscore.knowledge == "auto"
    with pytest.raises(ConfigError, match=r"factscore\.k"):
        validate_config(factscore_config(world_provider, factscore={"k": 50}), check_network=False)
    with pytest.raises(ConfigError, match="only used by the factscore method"):
        validate_config(
            {"name": "x", "method": "single", "model": "openai/gpt-4o-mini", "factscore": {}}, check_network=False
        )


def test_run_decomposes_verifies_and_scores_every_answer(
    world, world_provider, eager, django_capture_on_commit_callbacks
):  # type: ignore[no-untyped-def]
    script_world(world)
    dataset = make_fact_dataset()
    run = launch(dataset, factscore_config(world_provider, aspects=["factuality"]), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED, run.notes
    # 5 decompositions (the refusal needs none) + 9 fact checks, each sent once although two
    # units per answer (factscore and factuality) walk through the same requests.
    assert world.requests.count("decompose") == 5
    assert world.requests.count("verify") == 9
    assert world_provider.snapshot()["calls"] == 14
    assert run.total == 12 and run.done == 12 and run.failed == 0

    expected = {
        ("curie", "alpha"): 1.0,
        ("lovelace", "alpha"): 0.5,
        ("rhine", "alpha"): 0.0,
        ("lovelace", "beta"): 1.0,
        ("rhine", "beta"): 1.0,
    }
    assert scores_by_answer(run) == pytest.approx(expected)
    assert scores_by_answer(run, "factuality") == pytest.approx(expected)

    refusal = FactAnswer.objects.get(run=run, response__system__key="beta", response__turn__item__external_id="curie")
    assert refusal.is_refusal and refusal.refusal_rule == "en_sorry" and refusal.score is None
    assert refusal.outcome == "refused" and refusal.error_kind == ""
    curie = FactAnswer.objects.get(run=run, response__system__key="alpha", response__turn__item__external_id="curie")
    assert curie.topic == "Marie Curie" and curie.n_facts == 3 and curie.n_supported == 3
    facts = list(AtomicFact.objects.filter(answer=curie).order_by("position"))
    assert [f.text for f in facts] == [
        "Marie Curie was born in Warsaw.",
        "Marie Curie was born in 1867.",
        "Marie Curie won the Nobel Prize in Chemistry in 1911.",
    ]
    verdict = FactVerdict.objects.get(fact=facts[0])
    assert verdict.label == "true" and verdict.source == "text" and verdict.raw_output == "True"
    # Evidence restricted to the topic's document, stored with its text for review.
    assert verdict.evidence and {e["title"] for e in verdict.evidence} == {"Marie Curie"}
    assert "Warsaw" in verdict.evidence[0]["text"]
    assert verdict.evidence_passage_ids == [e["key"] for e in verdict.evidence]
    assert len(verdict.request_key) == 64 and verdict.prompt_tokens > 0

    report = factscore_report(run)
    alpha, beta = report["systems"]
    assert alpha == {
        "system": "alpha",
        "n_prompts": 3,
        "n_responding": 3,
        "n_scored": 3,
        "n_refused": 0,
        "n_no_facts": 0,
        "n_failed": 0,
        "pct_responding": 100.0,
        "factscore": pytest.approx(0.5),
        "facts_per_answer": 2.0,
        "denominators": {"pct_responding": 3, "factscore": 3, "facts_per_answer": 3},
    }
    assert beta["factscore"] == 1.0
    assert beta["pct_responding"] == pytest.approx(200 / 3)
    assert beta["facts_per_answer"] == 1.5
    assert beta["n_refused"] == 1 and beta["denominators"] == {
        "pct_responding": 3,
        "factscore": 2,
        "facts_per_answer": 2,
    }
    assert report["human"] is None and report["unfinished_answers"] == 0
    # A refusal is no error: the run's summary lists neither errors nor parse errors.
    assert run.parse_errors == 0 and run.error_summary == {}


def test_identical_rerun_costs_no_call(world, world_provider, eager, django_capture_on_commit_callbacks):  # type: ignore[no-untyped-def]
    script_world(world)
    dataset = make_fact_dataset()
    first = launch(dataset, factscore_config(world_provider), django_capture_on_commit_callbacks)
    calls = world_provider.snapshot()["calls"]
    second = launch(dataset, factscore_config(world_provider), django_capture_on_commit_callbacks)
    assert world_provider.snapshot()["calls"] == calls == 14
    assert second.status == RunStatus.SUCCEEDED and second.calls == 0
    assert scores_by_answer(second) == scores_by_answer(first)


def test_logprobs_compare_true_and_false(world, world_provider, eager, django_capture_on_commit_callbacks):  # type: ignore[no-untyped-def]
    script_world(world)
    # The text says True, but the model put more mass on False: the probabilities decide.
    world.verdict_probabilities["Marie Curie was born in 1867."] = (0.45, 0.55)
    dataset = make_fact_dataset()
    world_provider.script(default={"logprobs": {"True": 1.0}})
    run = launch(dataset, factscore_config(world_provider, logprobs=True), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    verdict = FactVerdict.objects.get(fact__text="Marie Curie was born in 1867.", fact__answer__run=run)
    assert (verdict.label, verdict.source) == ("false", "logprobs")
    assert verdict.p_true == pytest.approx(0.45) and verdict.p_false == pytest.approx(0.55)
    assert scores_by_answer(run)[("curie", "alpha")] == pytest.approx(2 / 3)
    assert run.logprob_fallbacks == 0


def test_refusal_confirmation_by_llm(world, world_provider, eager, django_capture_on_commit_callbacks):  # type: ignore[no-untyped-def]
    script_world(world)
    refusal_text = "I'm sorry, but I cannot provide information about that person."
    world.confirmed_refusals.add(refusal_text)
    dataset = make_fact_dataset()
    run = launch(
        dataset,
        factscore_config(world_provider, factscore={"refusal_confirm": True}),
        django_capture_on_commit_callbacks,
    )
    # Every answer is put to the model, so it can also catch a refusal the rules missed.
    assert world.requests.count("confirm") == 6
    answer = FactAnswer.objects.get(run=run, response__text=refusal_text)
    assert answer.is_refusal and answer.refusal_confirmed_by == "llm" and answer.refusal_raw_output == "Yes"
    answered = FactAnswer.objects.filter(run=run).exclude(pk=answer.pk)
    assert {(a.outcome, a.refusal_confirmed_by) for a in answered} == {("scored", "llm")}


def test_japanese_run_with_japanese_corpus(world, world_provider, eager, django_capture_on_commit_callbacks):  # type: ignore[no-untyped-def]
    script_world(world, japanese=True)
    dataset = make_fact_dataset(japanese=True)
    run = launch(dataset, factscore_config(world_provider), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    assert scores_by_answer(run) == pytest.approx(
        {("fuji", "alpha"): 1.0, ("tower", "alpha"): 0.5, ("tower", "beta"): 1.0}
    )
    refusal = FactAnswer.objects.get(run=run, response__system__key="beta", response__turn__item__external_id="fuji")
    assert refusal.is_refusal and refusal.refusal_rule == "ja_moushiwake"
    verdict = FactVerdict.objects.get(fact__text="東京タワーの高さは400メートルである。", fact__answer__run=run)
    assert verdict.evidence[0]["title"] == "東京タワー" and "333メートル" in verdict.evidence[0]["text"]
    prompt = next(b for b in world_provider.recorded_bodies() if "原子的な事実" in b["messages"][0]["content"])
    assert "富士山" in prompt["messages"][0]["content"] or "東京タワー" in prompt["messages"][0]["content"]


def test_missing_corpus_fails_the_units_with_a_clear_error(
    world, world_provider, eager, django_capture_on_commit_callbacks
):  # type: ignore[no-untyped-def]
    script_world(world)
    dataset = make_fact_dataset(with_corpus=False)
    run = launch(dataset, factscore_config(world_provider), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.FAILED
    errors = set(Judgment.objects.filter(run=run, status="failed").values_list("error", flat=True))
    assert errors == {"the dataset has no knowledge corpus named 'wiki'"}


def test_factscore_report_command(world, world_provider, eager, django_capture_on_commit_callbacks):  # type: ignore[no-untyped-def]
    script_world(world)
    dataset = make_fact_dataset()
    run = launch(dataset, factscore_config(world_provider), django_capture_on_commit_callbacks)
    out = StringIO()
    call_command("factscore_report", "--dataset", dataset.name, "--judge", run.judge.name, "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert [row["system"] for row in data["systems"]] == ["alpha", "beta"]
    assert data["systems"][0]["factscore"] == pytest.approx(0.5)
    text = StringIO()
    call_command("factscore_report", "--dataset", dataset.name, "--judge", run.judge.name, "--answers", stdout=text)
    output = text.getvalue()
    rows = {line.split()[0]: line.split() for line in output.splitlines() if line.split()}
    assert rows["alpha"][1:4] == ["0.500", "100.0", "2.0"]
    assert rows["beta"][1:4] == ["1.000", "66.7", "1.5"]
    assert "en_sorry" in output
    with pytest.raises(Exception, match="no factscore judge run"):
        call_command("factscore_report", "--dataset", dataset.name, "--judge", "nope")


def test_per_answer_scores_are_exported_and_reproduce_the_system_score(  # type: ignore[no-untyped-def]
    world, world_provider, eager, django_capture_on_commit_callbacks
):
    from annotations.datasets.exporting import iter_export_lines

    script_world(world)
    dataset = make_fact_dataset()
    run = launch(dataset, factscore_config(world_provider), django_capture_on_commit_callbacks)
    by_system: dict[str, list[float]] = {}
    for line in iter_export_lines(dataset=dataset, include_judges=True):
        for system, answer in json.loads(line)["turns"][0]["responses"].items():
            score = answer.get("auto_evals", {}).get(run.judge.name, {}).get("factscore")
            if score is not None:
                by_system.setdefault(system, []).append(score)
    report = factscore_report(run)
    for row in report["systems"]:
        exported = by_system[row["system"]]
        assert sum(exported) / len(exported) == pytest.approx(row["factscore"])
        assert len(exported) == row["n_scored"]


def test_failed_verification_is_retried_from_the_cache_and_reprojected(  # type: ignore[no-untyped-def]
    world, world_provider, eager, django_capture_on_commit_callbacks
):
    script_world(world)
    dataset = make_fact_dataset()
    # The check of one fact is refused permanently (400) during the first run.
    # (The provider matches on the JSON of the messages, hence the escaped newline before the closing tag.)
    world_provider.script(rules=[{"match": "Ada Lovelace was born in 1815.\\n</fact-", "behaviour": {"status": 400}}])
    run = launch(dataset, factscore_config(world_provider), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.FAILED and run.failed == 1
    lovelace = FactAnswer.objects.get(
        run=run, response__system__key="alpha", response__turn__item__external_id="lovelace"
    )
    assert lovelace.stage == "failed" and "verification of fact 2" in lovelace.error
    assert FactVerdict.objects.filter(fact__answer=lovelace).count() == 1  # the first fact was checked
    # The failed answer stays in the per-system table, counted and named, never silently dropped.
    report = factscore_report(run, include_answers=True)
    alpha = report["systems"][0]
    assert report["unfinished_answers"] == 0
    assert (alpha["n_prompts"], alpha["n_failed"], alpha["n_scored"]) == (3, 1, 2)
    row = next(a for a in report["answers"] if a["answer_id"] == lovelace.pk)
    assert row["outcome"] == "failed" and "verification of fact 2" in row["error"]
    calls_before = world_provider.snapshot()["calls"]

    world_provider.script()
    with django_capture_on_commit_callbacks(execute=True):
        assert engine.judge_run_retry_failed(run=run) == 1
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert world_provider.snapshot()["calls"] == calls_before + 1  # only the refused check is sent again
    # The retry's scores were written with the answer projected again: nothing is left to project.
    assert not factscore_results_pending(run)
    lovelace.refresh_from_db()
    assert lovelace.stage == "done" and lovelace.score == 0.5
    assert FactVerdict.objects.filter(fact__answer=lovelace).count() == 2
    assert factscore_project(run=run) == 0  # nothing changed since


def test_the_checks_of_one_answer_run_side_by_side_within_max_concurrency(  # type: ignore[no-untyped-def]
    world, world_provider, eager, django_capture_on_commit_callbacks
):
    dataset = DatasetFactory()
    item = ItemFactory(dataset=dataset, external_id="one", position=0)
    turn = TurnFactory(item=item, index=0, prompt="Tell me about one person.", reference=None)
    answer = "One person did eight things."
    ResponseFactory(turn=turn, system=SystemFactory(dataset=dataset, key="alpha", position=0), position=0, text=answer)
    world.facts[answer] = [f"The person did thing {n}." for n in range(8)]
    world.true_facts.update(world.facts[answer][:6])
    world_provider.script(default={"latency": 0.2})
    cfg = factscore_config(
        world_provider, max_concurrency=4, factscore={"corpus": None, "topic": None, "knowledge": "item"}
    )
    run = launch(dataset, cfg, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    assert world.requests.count("verify") == 8
    # One answer alone: only its own checks can overlap, and never more than the run allows.
    assert world_provider.snapshot()["max_in_flight"] == 4
    assert scores_by_answer(run) == {("one", "alpha"): pytest.approx(6 / 8)}


def test_facts_cut_by_max_facts_are_recorded_and_shown(  # type: ignore[no-untyped-def]
    world, world_provider, eager, django_capture_on_commit_callbacks, researcher, client
):
    script_world(world)
    dataset = make_fact_dataset(owner=researcher)
    run = launch(
        dataset, factscore_config(world_provider, factscore={"max_facts": 2}), django_capture_on_commit_callbacks
    )
    curie = FactAnswer.objects.get(run=run, response__system__key="alpha", response__turn__item__external_id="curie")
    assert (curie.n_facts, curie.facts_found, curie.facts_dropped) == (2, 3, 1)
    assert curie.caps == [{"cap": "max_facts", "limit": 2, "dropped": 1}]
    assert curie.score == 1.0  # the two facts kept are both supported; the third was never checked
    report = factscore_report(run)
    # 3 + 2 + 1 (alpha) + 1 + 2 (beta) facts listed; curie lost one to the cap.
    assert report["facts_cut"] == {"answers_capped": 1, "facts_found": 9, "facts_dropped": 1, "repeated_facts": 0}
    client.force_login(researcher)
    html = client.get(reverse("factscore:report", args=[run.pk])).content.decode()
    assert 'data-cap="max_facts"' in html and "(of 3: 1 cut by max_facts at 2)" in html
    assert "1 of 9 facts were cut by a cap in 1 answer(s) and never verified." in html
