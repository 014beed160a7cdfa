"""Human fact review: assignment rules, edits that keep the original, and the estimator against humans."""

import krippendorff
import numpy as np
import pytest
from django.contrib.auth.models import User

from judging import services as engine
from judging.factscore import services
from judging.factscore.models import AtomicFact, FactLabel, FactOrigin, FactReviewAssignment, FactReviewCampaign
from judging.factscore.selectors import factscore_report
from tests.factscore.factories import factscore_config, make_fact_dataset, truth

pytestmark = pytest.mark.django_db


def review_all(campaign, user, decide) -> int:  # type: ignore[no-untyped-def]
    """Claim and submit until nothing is left; `decide(assignment, facts)` returns {fact id: label}."""
    done = 0
    while (assignment := services.fact_review_claim(campaign=campaign, user=user)) is not None:
        facts = services.reviewer_facts(assignment)
        services.fact_review_submit(assignment=assignment, user=user, labels=decide(assignment, facts), seconds_spent=3)
        done += 1
    return done


def test_campaign_has_one_task_per_answer_with_facts_and_n_slots(run, annotator1, annotator2) -> None:  # type: ignore[no-untyped-def]
    campaign = services.fact_review_campaign_create(
        name="review", run=run, raters_per_answer=2, annotators=[annotator1]
    )
    assert campaign.tasks.count() == 5  # the refusal has no facts to review
    assert FactReviewAssignment.objects.filter(campaign=campaign).count() == 10
    assert sorted(campaign.tasks.values_list("position", flat=True)) == list(range(5))
    with pytest.raises(services.NotInReviewPool):
        services.fact_review_claim(campaign=campaign, user=annotator2)
    with pytest.raises(services.ReviewError, match="this run already has a review campaign named 'review'"):
        services.fact_review_campaign_create(name="review", run=run)


def test_review_names_are_unique_per_run_so_another_researchers_names_stay_unknown(  # type: ignore[no-untyped-def]
    run, world_provider, django_capture_on_commit_callbacks
) -> None:
    other_owner = User.objects.create_user("researcher-b", is_staff=True)
    with django_capture_on_commit_callbacks(execute=True):
        theirs = engine.judge_run_launch(
            dataset=make_fact_dataset(owner=other_owner), config=factscore_config(world_provider), launched_by=None
        )
    services.fact_review_campaign_create(name="A-review", run=run, raters_per_answer=1)
    services.fact_review_campaign_create(name="A-review", run=theirs, raters_per_answer=1)
    with pytest.raises(services.ReviewError, match="this run already has"):
        services.fact_review_campaign_create(name="A-review", run=theirs, raters_per_answer=1)


def test_never_more_than_n_reviewers_and_never_twice_the_same(run, annotator1, annotator2, annotator3) -> None:  # type: ignore[no-untyped-def]
    campaign = services.fact_review_campaign_create(
        name="one-rater", run=run, raters_per_answer=1, annotators=[annotator1, annotator2, annotator3]
    )

    def all_supported(assignment, facts):  # type: ignore[no-untyped-def]
        return {fact.pk: "supported" for fact in facts}

    first = services.fact_review_claim(campaign=campaign, user=annotator1)
    assert services.fact_review_claim(campaign=campaign, user=annotator1).pk == first.pk  # resumes, no hoarding
    services.fact_review_submit(
        assignment=first, user=annotator1, labels=all_supported(first, services.reviewer_facts(first))
    )
    assert review_all(campaign, annotator2, all_supported) == 4
    assert services.fact_review_claim(campaign=campaign, user=annotator3) is None
    assert services.fact_review_claim(campaign=campaign, user=annotator1) is None


def test_submit_needs_every_fact_and_rejects_foreign_ids(run, annotator1) -> None:  # type: ignore[no-untyped-def]
    campaign = services.fact_review_campaign_create(
        name="strict", run=run, raters_per_answer=1, annotators=[annotator1]
    )
    assignment = services.fact_review_claim(campaign=campaign, user=annotator1)
    facts = services.reviewer_facts(assignment)
    foreign = AtomicFact.objects.exclude(answer=assignment.task.answer).first()
    with pytest.raises(services.ReviewError, match="not part of this task"):
        services.fact_review_submit(
            assignment=assignment,
            user=annotator1,
            labels={**{f.pk: "supported" for f in facts}, foreign.pk: "supported"},
        )
    if len(facts) > 1:
        with pytest.raises(services.ReviewError, match="no label yet"):
            services.fact_review_submit(assignment=assignment, user=annotator1, labels={facts[0].pk: "supported"})
    with pytest.raises(services.ReviewError, match="must be supported"):
        services.fact_review_submit(assignment=assignment, user=annotator1, labels={f.pk: "true" for f in facts})
    assert not FactLabel.objects.exists()


def test_a_nul_character_in_a_fact_or_comment_is_refused(run, annotator1) -> None:  # type: ignore[no-untyped-def]
    campaign = services.fact_review_campaign_create(name="nul", run=run, raters_per_answer=1, annotators=[annotator1])
    assignment = services.fact_review_claim(campaign=campaign, user=annotator1)
    facts_before = AtomicFact.objects.count()
    with pytest.raises(services.ReviewError, match="NUL"):
        services.fact_review_edit(assignment=assignment, user=annotator1, operation="add", text="A fact.\x00")
    labels = {f.pk: "supported" for f in services.reviewer_facts(assignment)}
    with pytest.raises(services.ReviewError, match="NUL"):
        services.fact_review_submit(assignment=assignment, user=annotator1, labels=labels, comment="ok\x00")
    assert AtomicFact.objects.count() == facts_before and not FactLabel.objects.exists()


def test_a_lone_surrogate_in_a_review_is_refused_and_nothing_is_written(run, annotator1) -> None:  # type: ignore[no-untyped-def]
    lone = "\ud800"
    for name, guidelines in ((f"review {lone}", ""), ("review", f"read {lone}")):
        with pytest.raises(services.ReviewError, match="unpaired surrogate cannot be stored"):
            services.fact_review_campaign_create(
                name=name, run=run, raters_per_answer=1, annotators=[annotator1], guidelines=guidelines
            )
    assert not FactReviewCampaign.objects.exists()
    campaign = services.fact_review_campaign_create(name="ok", run=run, raters_per_answer=1, annotators=[annotator1])
    with pytest.raises(services.ReviewError, match="unpaired surrogate cannot be stored"):
        services.fact_review_campaign_update(
            campaign=campaign,
            name="ok",
            lease_minutes=30,
            show_evidence=True,
            annotators=[annotator1],
            guidelines=lone,
        )
    campaign.refresh_from_db()
    assert campaign.guidelines == ""
    assignment = services.fact_review_claim(campaign=campaign, user=annotator1)
    facts_before = AtomicFact.objects.count()
    with pytest.raises(services.ReviewError, match=r"^a fact cannot contain an unpaired surrogate$"):
        services.fact_review_edit(assignment=assignment, user=annotator1, operation="add", text=f"A fact {lone}.")
    labels = {f.pk: "supported" for f in services.reviewer_facts(assignment)}
    with pytest.raises(services.ReviewError, match=r"^the comment cannot contain an unpaired surrogate$"):
        services.fact_review_submit(assignment=assignment, user=annotator1, labels=labels, comment=f"ok {lone}")
    assert AtomicFact.objects.count() == facts_before and not FactLabel.objects.exists()


def test_split_reword_add_keep_the_original_and_stay_private(run, annotator1, annotator2) -> None:  # type: ignore[no-untyped-def]
    campaign = services.fact_review_campaign_create(
        name="edits", run=run, raters_per_answer=2, annotators=[annotator1, annotator2]
    )
    first = services.fact_review_claim(campaign=campaign, user=annotator1)
    original = services.reviewer_facts(first)[0]
    parts = services.fact_review_edit(
        assignment=first, user=annotator1, operation="split", fact_id=original.pk, text="Part one.\n\nPart two.\n"
    )
    assert [p.origin for p in parts] == [FactOrigin.SPLIT, FactOrigin.SPLIT]
    added = services.fact_review_edit(assignment=first, user=annotator1, operation="add", text="  A missed   fact. ")
    assert added[0].text == "A missed fact."
    mine = [f.text for f in services.reviewer_facts(first)]
    assert original.text not in mine and mine[:2] == ["Part one.", "Part two."] and mine[-1] == "A missed fact."
    original.refresh_from_db()
    assert original.origin == FactOrigin.MODEL and AtomicFact.objects.filter(pk=original.pk).exists()
    # Another reviewer of the same answer sees the model's list, not these edits.
    second = services.fact_review_claim(campaign=campaign, user=annotator2)
    if second.task_id == first.task_id:
        assert original.text in [f.text for f in services.reviewer_facts(second)]
        assert "Part one." not in [f.text for f in services.reviewer_facts(second)]
    reworded = services.fact_review_edit(
        assignment=first, user=annotator1, operation="reword", fact_id=original.pk, text="Better wording."
    )
    assert reworded[0].parent_id == original.pk
    assert "Part one." not in [f.text for f in services.reviewer_facts(first)]  # a new edit replaces the old
    services.fact_review_edit(assignment=first, user=annotator1, operation="undo", fact_id=original.pk)
    assert original.text in [f.text for f in services.reviewer_facts(first)]
    with pytest.raises(services.ReviewError, match="at least two"):
        services.fact_review_edit(assignment=first, user=annotator1, operation="split", fact_id=original.pk, text="x")
    with pytest.raises(services.ReviewNotLeased):
        services.fact_review_edit(assignment=first, user=annotator2, operation="add", text="intruder")


def test_estimator_against_hand_computed_human_scores(run, annotator1, annotator2) -> None:  # type: ignore[no-untyped-def]
    campaign = services.fact_review_campaign_create(
        name="hand", run=run, raters_per_answer=2, annotators=[annotator1, annotator2]
    )
    curie_third = "Marie Curie won the Nobel Prize in Chemistry in 1911."
    alps = "The Rhine begins in the Swiss Alps."
    basel = "The Rhine passes Basel."

    def rater1(assignment, facts):  # type: ignore[no-untyped-def]
        texts = [f.text for f in facts]
        if alps in texts:  # splits the Alps fact in two and supports both
            original = next(f for f in facts if f.text == alps)
            services.fact_review_edit(
                assignment=assignment,
                user=annotator1,
                operation="split",
                fact_id=original.pk,
                text="The Rhine begins in Switzerland.\nThe Rhine begins in the Alps.",
            )
            facts = services.reviewer_facts(assignment)
            return {f.pk: "supported" for f in facts}
        return {f.pk: ("not_supported" if f.text == curie_third else truth(f.text)) for f in facts}

    def rater2(assignment, facts):  # type: ignore[no-untyped-def]
        return {f.pk: ("not_supported" if f.text == basel else truth(f.text)) for f in facts}

    assert review_all(campaign, annotator1, rater1) == 5
    assert review_all(campaign, annotator2, rater2) == 5

    report = factscore_report(run)
    human = report["human"]
    assert human["reviewed_answers"] == 5
    rows = {row["system"]: row for row in human["estimator"]["systems"]}
    # alpha: curie (2/3 + 3/3)/2 = 5/6, lovelace 1/2, rhine 0 -> 4/9; estimated (1 + 1/2 + 0)/3 = 1/2.
    assert rows["alpha"]["human"] == pytest.approx(4 / 9)
    assert rows["alpha"]["estimated"] == pytest.approx(0.5)
    assert rows["alpha"]["error_points"] == pytest.approx(100 * (0.5 - 4 / 9))
    assert rows["alpha"]["mark"] == "+"
    # beta: lovelace 1; rhine rater1 3/3 (after the split), rater2 1/2 -> 3/4; mean 7/8; estimated 1.
    assert rows["beta"]["human"] == pytest.approx(7 / 8)
    assert rows["beta"]["error_rate"] == pytest.approx(12.5)
    assert rows["beta"]["mark"] == "+"
    assert human["estimator"]["ranking_equal"] is True
    assert (rows["alpha"]["human_rank"], rows["beta"]["human_rank"]) == (2, 1)

    # Agreement on the model facts, with the split fact missing for rater 1: as the reference library computes.
    labels = FactLabel.objects.filter(fact__origin="model", assignment__status="submitted")
    facts = sorted({fact_id for fact_id in labels.values_list("fact_id", flat=True)})
    raters = [annotator1.pk, annotator2.pk]
    codes = {"supported": 0, "not_supported": 1, "irrelevant": 2}
    matrix = np.full((2, len(facts)), np.nan)
    for fact_id, annotator_id, label in labels.values_list("fact_id", "assignment__annotator_id", "label"):
        matrix[raters.index(annotator_id), facts.index(fact_id)] = codes[label]
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    assert human["agreement"]["alpha"]["value"] == pytest.approx(expected)
    assert human["agreement"]["n_facts"] == 9
    assert human["agreement"]["n_labels"] == 17  # rater 1 replaced one of the 9 model facts


def test_expired_lease_goes_to_someone_else_and_starts_clean(run, annotator1, annotator2) -> None:  # type: ignore[no-untyped-def]
    from datetime import timedelta

    from django.utils import timezone

    campaign = services.fact_review_campaign_create(
        name="lease", run=run, raters_per_answer=1, annotators=[annotator1, annotator2], lease_minutes=1
    )
    first = services.fact_review_claim(campaign=campaign, user=annotator1)
    services.fact_review_edit(assignment=first, user=annotator1, operation="add", text="Left behind.")
    later = timezone.now() + timedelta(minutes=5)
    taken = services.fact_review_claim(campaign=campaign, user=annotator2, now=later)
    assert taken.pk == first.pk and taken.annotator_id == annotator2.pk
    assert "Left behind." not in [f.text for f in services.reviewer_facts(taken)]
    with pytest.raises(services.ReviewNotLeased):
        services.fact_review_submit(assignment=first, user=annotator1, labels={})


def test_a_reviewer_taken_out_of_the_pool_loses_the_open_review(run, annotator1, annotator2) -> None:  # type: ignore[no-untyped-def]
    campaign = services.fact_review_campaign_create(
        name="pool", run=run, raters_per_answer=1, annotators=[annotator1, annotator2]
    )
    held = services.fact_review_claim(campaign=campaign, user=annotator1)
    campaign.annotators.remove(annotator1)
    labels = {fact.pk: "supported" for fact in services.reviewer_facts(held)}
    with pytest.raises(services.ReviewNotLeased):
        services.fact_review_submit(assignment=held, user=annotator1, labels=labels, seconds_spent=1)
    assert services.fact_review_leases_release_outside_pool(campaign=campaign) == 1
    assert services.fact_review_claim(campaign=campaign, user=annotator2).task_id == held.task_id
