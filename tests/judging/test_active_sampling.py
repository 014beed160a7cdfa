"""Active human sampling in hybrid campaigns and the stopping rule: each task's probability of going to the humans
(stored, constrained, exported), the seeded draw, and a campaign that stops handing out tasks once its confidence
sequence answers the question (Celery eager, the fake provider on a real socket)."""

import csv
import io
import json
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse

from annotations.campaigns.answers import TaskAnswer
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.submissions import submission_create
from annotations.campaigns.tasks import task_candidates
from annotations.datasets.downloads import iter_export
from annotations.datasets.flat_export import iter_flat_rows
from annotations.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    Dataset,
    HumanSampling,
    Rating,
    RatingOrigin,
    SamplingStratum,
    StopRule,
    Task,
)
from judging.certification.certificates import certificate_evaluate
from judging.hybrid import services as hybrid
from judging.hybrid.sampling import confidence_bins, judge_uncertainty, sampling_plan
from judging.hybrid.selectors import active_estimates, stopping_evidence
from judging.hybrid.services import HybridError
from judging.models import Certificate, CertificateStatus, HybridApplyStatus
from judging.statistics.sequences import confidence_sequence
from tests.annotate.factories import make_campaign
from tests.fakeprovider import FakeProvider
from tests.judging.certification_data import true_score
from tests.judging.factories import make_dataset
from tests.judging.hybrid_data import HESITANT, SURE, sampling_and_stopping_set
from tests.judging.test_hybrid import DELTA, MIN_KEPT, TARGET, campaign_of, certified

pytestmark = pytest.mark.django_db

ITEMS = 60


def sampled_campaign(  # type: ignore[no-untyped-def]
    fake: FakeProvider, capture, annotators, policy: str, share: float, stratum: str = SamplingStratum.SYSTEM
) -> Campaign:
    dataset, certificate = certified(fake, capture, items=ITEMS)
    campaign = campaign_of(dataset, annotators)
    sampling_and_stopping_set(campaign, human_sampling=policy, human_share=share, sampling_stratum=stratum)
    calibration = hybrid.hybrid_calibrate(
        campaign=campaign, version=certificate.version, target=TARGET, delta=DELTA, min_kept=MIN_KEPT, user=None
    )
    with capture(execute=True):
        hybrid.hybrid_apply(calibration=calibration, user=None)
    calibration.refresh_from_db()
    assert calibration.apply_status == HybridApplyStatus.DONE, calibration.apply_note
    campaign.refresh_from_db()
    return campaign


def to_humans(campaign: Campaign) -> set[int]:
    return set(
        Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.FREE).values_list("task_id", flat=True)
    )


def test_uncertainty_sampling_records_each_probability_and_sends_the_drawn_tasks_to_humans(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks, annotators
) -> None:  # type: ignore[no-untyped-def]
    campaign = sampled_campaign(
        fake_provider, django_capture_on_commit_callbacks, annotators, HumanSampling.UNCERTAINTY, 0.3
    )
    tasks = list(Task.objects.filter(campaign=campaign).prefetch_related("responses"))
    probability = {task.pk: task.human_probability for task in tasks}
    assert all(p is not None and 0 < p <= 1 for p in probability.values())
    # The budget is the expected number of human tasks: Σπ = 0.3 · 60.
    assert sum(probability.values()) == pytest.approx(0.3 * ITEMS)
    # The judge's spread is sqrt(p(1 − p)) over two adjacent scores: larger where it hesitates.
    hesitant = {t.pk for t in tasks if true_score(t.responses.get().pk) == 5}
    spread_sure, spread_hesitant = (SURE * (1 - SURE)) ** 0.5, (HESITANT * (1 - HESITANT)) ** 0.5
    share_sure = 0.9 * spread_sure / (len(hesitant) * spread_hesitant + (ITEMS - len(hesitant)) * spread_sure)
    expected_sure = 0.3 * ITEMS * (share_sure + 0.1 / ITEMS)
    for task_id, p in probability.items():
        if task_id in hesitant:
            assert p > expected_sure
        else:
            assert p == pytest.approx(expected_sure)
    drawn = to_humans(campaign)
    assert 0 < len(drawn) < ITEMS
    judged = set(
        Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.JUDGED).values_list("task_id", flat=True)
    )
    assert drawn | judged == set(probability) and not drawn & judged
    # The draw replays from the campaign's recorded seed.
    assert len(campaign.sampling_seed) == 32
    run = campaign.hybrid_calibrations.get().run
    spread = judge_uncertainty(run, [t.responses.get().pk for t in tasks], ["overall"])
    again = sampling_plan(
        campaign=campaign,
        tasks=tasks,
        uncertainty={t.pk: spread[t.responses.get().pk] for t in tasks},
        systems={t.pk: "llm_a" for t in tasks},
    )
    assert again.to_humans == drawn and again.probability == pytest.approx(probability)
    # Every export row of the campaign carries the probability of its task.
    by_response = {t.responses.get().pk: t.human_probability for t in tasks}
    objects = [json.loads(line) for line in iter_export(dataset=campaign.dataset, kind="judges-jsonl")]
    sampled = [
        (a["human_sampling"], a)
        for item in objects
        for turn in item["turns"]
        for a in turn["responses"].values()
        if "human_sampling" in a
    ]
    assert len(sampled) == ITEMS
    assert sorted(entry[0][0]["probability"] for entry in sampled) == pytest.approx(sorted(by_response.values()))
    judge_rows = [row for row in iter_flat_rows(dataset=campaign.dataset) if row["filled_by"] == "judge"]
    assert judge_rows and all(0 < row["human_probability"] <= 1 for row in judge_rows)
    header, *body = list(csv.reader(io.StringIO("".join(iter_export(dataset=campaign.dataset, kind="flat-csv")))))
    assert header[-1] == "human_probability"
    assert sum(1 for line in body if line[-3] == "judge" and line[-1]) == len(judge_rows)


def test_uniform_and_stratified_policies_give_their_probabilities(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks, annotators
) -> None:  # type: ignore[no-untyped-def]
    uniform = sampled_campaign(
        fake_provider, django_capture_on_commit_callbacks, annotators, HumanSampling.UNIFORM, 0.4
    )
    assert set(Task.objects.filter(campaign=uniform).values_list("human_probability", flat=True)) == {0.4}
    stratified = sampled_campaign(
        fake_provider, django_capture_on_commit_callbacks, annotators, HumanSampling.STRATIFIED, 0.25
    )
    # One system, one stratum: exactly round(0.25 · 60) = 15 tasks drawn, each with probability 15 / 60.
    assert set(Task.objects.filter(campaign=stratified).values_list("human_probability", flat=True)) == {0.25}
    assert len(to_humans(stratified)) == 15


def assert_probability_is_share_drawn_per_stratum(campaign: Campaign, expected: dict[int, str]) -> None:
    """Every task's stored stratum is the expected one, and its probability is n_k / N_k: the tasks drawn for the
    humans in its stratum over the stratum's size."""
    tasks = list(Task.objects.filter(campaign=campaign, is_gold=False))
    assert {task.pk: task.human_stratum for task in tasks} == expected
    drawn = to_humans(campaign)
    for name in set(expected.values()):
        members = [task for task in tasks if task.human_stratum == name]
        n_k = sum(task.pk in drawn for task in members)
        assert 1 <= n_k <= len(members)
        assert [task.human_probability for task in members] == pytest.approx([n_k / len(members)] * len(members))


@pytest.mark.parametrize("stratum", [SamplingStratum.SYSTEM, SamplingStratum.ASPECT, SamplingStratum.CONFIDENCE])
def test_each_stratum_kind_draws_n_k_of_N_k_and_the_estimate_uses_the_same_strata(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks, annotators, stratum: str
) -> None:  # type: ignore[no-untyped-def]
    campaign = sampled_campaign(
        fake_provider, django_capture_on_commit_callbacks, annotators, HumanSampling.STRATIFIED, 0.25, stratum
    )
    tasks = list(Task.objects.filter(campaign=campaign).prefetch_related("responses"))
    hesitant = {t.pk for t in tasks if true_score(t.responses.get().pk) == 5}
    assert 0 < len(hesitant) < ITEMS
    expected = {
        # One system and one aspect in this campaign: one stratum; the judge's two levels of certainty: two bins,
        # the sure tasks in the lowest quartile bin and the hesitant ones in the highest.
        SamplingStratum.SYSTEM: {t.pk: "llm_a" for t in tasks},
        SamplingStratum.ASPECT: {t.pk: "overall" for t in tasks},
        SamplingStratum.CONFIDENCE: {t.pk: "q4" if t.pk in hesitant else "q1" for t in tasks},
    }[stratum]
    assert_probability_is_share_drawn_per_stratum(campaign, expected)
    assert len(to_humans(campaign)) == 15  # round(0.25 · 60), allocated over the strata
    # The estimate is stratified PPI over the very strata of the draw, once the drawn tasks are rated (each once,
    # through the submit path: the estimate reads the campaign's own ratings).
    drawn = to_humans(campaign)
    rated = 0
    while rate(campaign, annotators[0], f"stratum-key-{rated:04d}"):
        rated += 1
    assert rated == len(drawn)
    rows = active_estimates(campaign)
    assert [row.aspect for row in rows] == ["overall"] and rows[0].rated == rows[0].sent == 15
    result = rows[0].result
    assert result["design"] == "stratified" and result["undefined"] is None
    names = sorted(set(expected.values()))
    assert [s["name"] for s in result["strata"]] == names
    for name, row in zip(names, result["strata"], strict=True):
        members = [pk for pk, stratum_of in expected.items() if stratum_of == name]
        assert row["weight"] == pytest.approx(len(members) / ITEMS)
        assert row["n"] == len(drawn & set(members)) and row["n"] + row["n_judge_only"] == len(members)
    combined = sum(row["weight"] * row["estimate"]["value"] for row in result["strata"])
    assert result["active"]["estimate"]["value"] == pytest.approx(combined)


def test_the_stratified_plan_per_stratum_kind_on_two_systems_and_two_aspects(
    annotators,
) -> None:  # type: ignore[no-untyped-def]
    """The plan itself on a hand-made campaign of 40 tasks: two systems, two aspects, four levels of uncertainty, so
    every stratum kind cuts it differently; each stratum draws exactly n_k of its N_k tasks."""
    dataset = make_dataset(items=40)
    campaign = make_campaign(dataset, annotators, name="plan", raters_per_item=1)
    tasks = list(Task.objects.filter(campaign=campaign).order_by("position"))[:40]
    assert len(tasks) == 40
    systems = {t.pk: ("llm_a" if i % 2 else "llm_b") for i, t in enumerate(tasks)}
    # Uncertainty levels 0.1, 0.2, 0.3, 0.4 ten tasks each; the judge is less certain on "style" for a quarter.
    level = {t.pk: 0.1 * (1 + i // 10) for i, t in enumerate(tasks)}
    by_aspect = {
        t.pk: {"overall": level[t.pk], "style": level[t.pk] + (0.5 if i % 4 == 0 else -0.05)}
        for i, t in enumerate(tasks)
    }
    spread = {pk: max(values.values()) for pk, values in by_aspect.items()}
    expected = {
        SamplingStratum.SYSTEM: systems,
        SamplingStratum.ASPECT: {
            pk: ("style" if values["style"] > values["overall"] else "overall") for pk, values in by_aspect.items()
        },
        SamplingStratum.CONFIDENCE: confidence_bins(spread),
    }
    for kind, strata in expected.items():
        Campaign.objects.filter(pk=campaign.pk).update(
            human_sampling=HumanSampling.STRATIFIED, human_share=0.3, sampling_stratum=kind
        )
        campaign.refresh_from_db()
        plan = sampling_plan(
            campaign=campaign, tasks=tasks, uncertainty=spread, systems=systems, aspect_uncertainty=by_aspect
        )
        assert plan.stratum == strata
        assert len(set(strata.values())) >= 2
        assert len(plan.to_humans) == 12  # round(0.3 · 40)
        for name in set(strata.values()):
            members = [pk for pk, s in strata.items() if s == name]
            n_k = len(plan.to_humans & set(members))
            assert [plan.probability[pk] for pk in members] == pytest.approx([n_k / len(members)] * len(members))


def test_confidence_bins_are_the_lower_quartiles_with_ties_kept_together() -> None:
    # Eight distinct values: cut points at the 2nd, 4th and 6th smallest (2, 4, 6), two tasks per bin.
    assert confidence_bins({i: float(i) for i in range(1, 9)}) == {
        1: "q1",
        2: "q1",
        3: "q2",
        4: "q2",
        5: "q3",
        6: "q3",
        7: "q4",
        8: "q4",
    }
    # Equal uncertainties share a bin however many there are; one level gives one bin.
    assert set(confidence_bins({i: 0.3 for i in range(7)}).values()) == {"q1"}
    assert confidence_bins({1: 0.1, 2: 0.1, 3: 0.1, 4: 0.9}) == {1: "q1", 2: "q1", 3: "q1", 4: "q4"}


def test_the_database_refuses_a_probability_outside_0_to_1_and_the_policy_is_fixed_once_applied(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks, annotators
) -> None:  # type: ignore[no-untyped-def]
    campaign = sampled_campaign(
        fake_provider, django_capture_on_commit_callbacks, annotators, HumanSampling.UNIFORM, 1.0
    )
    task = Task.objects.filter(campaign=campaign).first()
    assert task is not None
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(IntegrityError), transaction.atomic():
            Task.objects.filter(pk=task.pk).update(human_probability=bad)
    with pytest.raises(IntegrityError), transaction.atomic():
        Campaign.objects.filter(pk=campaign.pk).update(human_share=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        Campaign.objects.filter(pk=campaign.pk).update(stop_rule=StopRule.WIDTH)  # no aspect, system or width
    with pytest.raises(IntegrityError), transaction.atomic():
        Campaign.objects.filter(pk=campaign.pk).update(stop_rule=StopRule.CERTIFIED)  # no aspect
    with pytest.raises(IntegrityError), transaction.atomic():
        Campaign.objects.filter(pk=campaign.pk).update(sampling_stratum="prompt")
    with pytest.raises(HybridError, match="strata must be one of"):
        sampling_and_stopping_set(campaign, sampling_stratum="prompt")
    with pytest.raises(HybridError, match="can no longer change"):
        sampling_and_stopping_set(campaign, human_sampling=HumanSampling.UNCERTAINTY)
    # Share 1: every task goes to the humans, none to the judge.
    assert len(to_humans(campaign)) == ITEMS


def rate(campaign: Campaign, user: Any, key: str) -> bool:
    """Claim and submit one task with its answer's true quality; False when the campaign hands out nothing."""
    slot = assignment_claim(campaign=campaign, user=user)
    if slot is None:
        return False
    numbers = [c.number for c in task_candidates(assignment=slot, user_id=user.pk)]
    value = float(true_score(slot.task.responses.get().pk))
    preference = numbers[0] if campaign.ask_preference else None
    submission_create(
        campaign=campaign,
        task_id=slot.task_id,
        user=user,
        idempotency_key=key,
        answer=TaskAnswer(ratings={(n, 1): value for n in numbers}, preference=preference),
    )
    return True


def test_a_met_stopping_rule_stops_the_claim_with_its_evidence(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks, annotators, researcher
) -> None:  # type: ignore[no-untyped-def]
    dataset, _certificate = certified(fake_provider, django_capture_on_commit_callbacks, items=ITEMS)
    campaign = make_campaign(
        dataset, annotators[:1], name="stopping", raters_per_item=1, rationale_required=False, ask_preference=False
    )
    aspect = campaign.aspects.get()
    width = 2.5
    with django_capture_on_commit_callbacks(execute=True):
        sampling_and_stopping_set(
            campaign, stop_rule=StopRule.WIDTH, stop_aspect_id=aspect.pk, stop_first="llm_a", stop_width=width
        )
    campaign.refresh_from_db()
    assert campaign.stopped_at is None  # no rating yet: nothing to decide
    submitted = 0
    for n in range(ITEMS):
        with django_capture_on_commit_callbacks(execute=True):
            if not rate(campaign, annotators[0], f"stop-key-{n:04d}"):
                break
        submitted += 1
    campaign.refresh_from_db()
    assert campaign.stopped_at is not None
    evidence = campaign.stop_evidence
    n = evidence["n"]
    assert 2 <= n == submitted < ITEMS
    # The evidence is the betting confidence sequence of the values rated, stopped at its first look narrow enough.
    rated = list(
        Rating.objects.filter(origin=RatingOrigin.APP, aspect=aspect)
        .order_by("created_at", "pk")
        .values_list("value", flat=True)
    )
    looks = confidence_sequence(rated, lower=1, upper=5)
    widths = [
        look["interval"]["high"] - look["interval"]["low"] for look in looks if look["interval"]["low"] is not None
    ]
    assert widths[-1] <= width < widths[-2]
    assert evidence["high"] - evidence["low"] == pytest.approx(widths[-1])
    assert evidence["met"] and evidence["stopped_at"] and evidence["looks"][-1][0] == n
    # Stopped: no new task for anyone, though free slots remain; the check is safe to run again.
    assert Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.FREE).count() == ITEMS - n
    assert assignment_claim(campaign=campaign, user=annotators[0]) is None
    stopped_at = campaign.stopped_at
    assert hybrid.campaign_stop_check(campaign_id=campaign.pk) == "nothing to check"
    campaign.refresh_from_db()
    assert campaign.stopped_at == stopped_at
    with pytest.raises(HybridError, match="already stopped"):
        sampling_and_stopping_set(campaign)
    # The researcher reading in Japanese gets the method in Japanese too.
    Dataset.objects.filter(pk=dataset.pk).update(owner=researcher)
    reader = Client(HTTP_ACCEPT_LANGUAGE="ja")
    reader.force_login(researcher)
    progress = reader.get(reverse("campaign-progress", args=[campaign.pk])).content.decode()
    assert 'id="stopping-met"' in progress and "ベッティング法（Waudby-Smith &amp; Ramdas 2024）、95%" in progress
    assert "betting (Waudby-Smith" not in progress


def test_the_judge_certified_on_the_aspect_stops_the_campaign_with_the_certificate_as_evidence(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks, annotators, researcher, client
) -> None:  # type: ignore[no-untyped-def]
    dataset, certificate = certified(fake_provider, django_capture_on_commit_callbacks, items=ITEMS)
    campaign = make_campaign(
        dataset, annotators, name="certified", raters_per_item=2, rationale_required=False, ask_preference=False
    )
    aspect = campaign.aspects.get()
    hybrid.hybrid_calibrate(
        campaign=campaign, version=certificate.version, target=TARGET, delta=DELTA, min_kept=MIN_KEPT, user=None
    )
    # The certificate is read again from pending: while it is pending or failed, the campaign runs on.
    Certificate.objects.filter(pk=certificate.pk).update(status=CertificateStatus.PENDING)
    with django_capture_on_commit_callbacks(execute=True):
        sampling_and_stopping_set(campaign, stop_rule=StopRule.CERTIFIED, stop_aspect_id=aspect.pk)
    campaign.refresh_from_db()
    assert (campaign.stop_rule, campaign.stop_first, campaign.stopped_at) == ("certified", "", None)
    Certificate.objects.filter(pk=certificate.pk).update(status=CertificateStatus.FAILED, reason="fails")
    assert hybrid.campaign_stop_check(campaign_id=campaign.pk) == "not met"
    with django_capture_on_commit_callbacks(execute=True):
        assert rate(campaign, annotators[0], "certified-key-0001")
    campaign.refresh_from_db()
    assert campaign.stopped_at is None
    # The certificate passes: its evaluation asks the waiting campaign to read it, and the campaign stops.
    Certificate.objects.filter(pk=certificate.pk).update(status=CertificateStatus.PENDING)
    with django_capture_on_commit_callbacks(execute=True):
        assert certificate_evaluate(certificate_id=certificate.pk) == CertificateStatus.PASSED
    campaign.refresh_from_db()
    assert campaign.stopped_at is not None
    evidence = campaign.stop_evidence
    certificate.refresh_from_db()
    test = certificate.results["overall"]
    assert evidence["met"] and evidence["certificate"] == certificate.pk
    assert evidence["certificate_status"] == CertificateStatus.PASSED
    assert evidence["n"] == test["n_answers"] > 0
    assert evidence["test"]["omega"] == test["omega"] and evidence["test"]["verdict"] == "passed"
    # Stopped: no task for anyone, though free slots remain; the check is safe to run again.
    assert Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.FREE).exists()
    assert assignment_claim(campaign=campaign, user=annotators[1]) is None
    stopped_at = campaign.stopped_at
    assert hybrid.campaign_stop_check(campaign_id=campaign.pk) == "nothing to check"
    campaign.refresh_from_db()
    assert campaign.stopped_at == stopped_at
    # The progress page and the annotators' page say why, with the certificate.
    Dataset.objects.filter(pk=dataset.pk).update(owner=researcher)
    client.force_login(researcher)
    progress = client.get(reverse("campaign-progress", args=[campaign.pk])).content.decode()
    assert 'id="stopping-met"' in progress and 'id="stopping-certificate"' in progress
    assert f"by certificate {certificate.pk} (tested on n = {test['n_answers']} answers)" in progress
    client.force_login(annotators[1])
    page = client.get(reverse("annotate-campaign", args=[campaign.pk])).content.decode()
    assert 'id="campaign-stopped"' in page and f"certificate {certificate.pk}, tested on" in page


def test_the_stopping_rule_reads_only_the_campaigns_own_ratings(annotators) -> None:  # type: ignore[no-untyped-def]
    """Every answer was rated in an earlier campaign of the dataset: those ratings are that campaign's, so a second
    campaign's rule has nothing to read yet (it must not stop before anyone rated in it)."""
    dataset = make_dataset(items=12, systems=1)
    settings: dict[str, Any] = {"raters_per_item": 1, "rationale_required": False, "ask_preference": False}
    first = make_campaign(dataset, annotators[:1], name="first", **settings)
    rated = 0
    while rate(first, annotators[0], f"first-key-{rated:04d}"):
        rated += 1
    assert rated == 12
    second = make_campaign(dataset, annotators[1:2], name="second", **settings)
    aspect = second.aspects.get()
    # Twelve ratings in [1, 5] would give an interval narrower than 3.9 long before the last.
    sampling_and_stopping_set(
        second, stop_rule=StopRule.WIDTH, stop_aspect_id=aspect.pk, stop_first="llm_a", stop_width=3.9
    )
    assert hybrid.campaign_stop_check(campaign_id=second.pk) == "not met"
    evidence = stopping_evidence(second)
    assert evidence is not None and evidence["n"] == 0
    assert rate(second, annotators[1], "second-key-0001")
    assert stopping_evidence(second)["n"] == 1  # type: ignore[index]
