import json
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotations.campaigns.answers import MISSING, TaskAnswer
from annotations.campaigns.claims import assignment_claim, assignment_skip
from annotations.campaigns.errors import CampaignError, SubmissionInvalid
from annotations.campaigns.progress import annotator_progress, campaign_progress
from annotations.campaigns.setup import campaign_annotator_remove, campaign_create
from annotations.campaigns.submissions import submission_create
from annotations.campaigns.tasks import candidate_order, task_candidates
from annotations.datasets.exporting import iter_export_lines
from annotations.models import Assignment, AssignmentStatus, Campaign, Rating, RatingOrigin, Submission, Task
from annotations.rubrics.task_sheet import aspect_scale
from annotations.slots import NotInPool, NotLeased
from tests.annotate.factories import full_answer, make_campaign, make_dataset, submit_answer

pytestmark = pytest.mark.django_db


def test_campaign_create_builds_tasks_and_exactly_n_slots(researcher, annotators):
    dataset = make_dataset(items=3, systems=4, turns=2, owner=researcher)
    campaign = campaign_create(
        name="c", dataset=dataset, raters_per_item=3, annotators=[a.username for a in annotators], created_by=researcher
    )
    assert campaign.tasks.count() == 6
    assert Assignment.objects.filter(campaign=campaign).count() == 18
    for task in campaign.tasks.all():
        assert task.responses.count() == 4
        assert sorted(task.assignments.values_list("slot", flat=True)) == [1, 2, 3]
    assert sorted(Task.objects.filter(campaign=campaign).values_list("position", flat=True)) == list(range(6))
    assert list(campaign.aspects.values_list("name", flat=True)) == ["factuality", "amount_info"]
    assert set(campaign.annotators.all()) == set(annotators)


def test_chunks_of_k_cover_every_answer_once(researcher, annotators):
    dataset = make_dataset(items=2, systems=4, owner=researcher)
    campaign = campaign_create(name="k", dataset=dataset, candidates_per_task=3, aspects=["factuality"])
    sizes = sorted(task.responses.count() for task in campaign.tasks.all())
    assert sizes == [1, 1, 3, 3]
    covered = [r for task in campaign.tasks.all() for r in task.responses.values_list("pk", flat=True)]
    assert len(covered) == len(set(covered)) == 8
    assert list(campaign.aspects.values_list("name", flat=True)) == ["factuality"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"aspects": ["nope"]}, "no aspect 'nope'"),
        ({"raters_per_item": 0}, "between 1 and 100"),
        ({"candidates_per_task": 0}, "candidates per task must be between 1 and 100"),
        ({"colour": "red"}, "unknown campaign options: colour"),
        ({"annotators": ["ghost"]}, "no user named 'ghost'"),
    ],
)
def test_campaign_create_refuses_bad_input(researcher, kwargs, message):
    dataset = make_dataset(owner=researcher)
    with pytest.raises(CampaignError, match=message):
        campaign_create(name="bad", dataset=dataset, **kwargs)
    assert not Campaign.objects.exists()


def test_db_refuses_a_slot_beyond_n(researcher, annotator1):
    campaign = make_campaign(make_dataset(owner=researcher), [annotator1], raters_per_item=2)
    task = campaign.tasks.first()
    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(campaign=campaign, task=task, task_position=task.position, slot=3, slot_limit=2)
    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(campaign=campaign, task=task, task_position=task.position, slot=2, slot_limit=2)


def test_db_refuses_the_same_annotator_twice_on_a_task(researcher, annotator1):
    campaign = make_campaign(make_dataset(owner=researcher), [annotator1], raters_per_item=2)
    first = assignment_claim(campaign=campaign, user=annotator1)
    other_slot = Assignment.objects.get(task=first.task, slot=2 if first.slot == 1 else 1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.filter(pk=other_slot.pk).update(
            annotator=annotator1, status=AssignmentStatus.SUBMITTED, submitted_at=timezone.now()
        )


def test_claim_order_resume_and_distinct_raters(researcher, annotators):
    a1, a2, a3 = annotators
    campaign = make_campaign(make_dataset(owner=researcher, items=3), annotators, raters_per_item=2)
    first = assignment_claim(campaign=campaign, user=a1)
    assert first.task.position == 0 and first.status == AssignmentStatus.LEASED
    assert assignment_claim(campaign=campaign, user=a1).pk == first.pk  # resumes
    second = assignment_claim(campaign=campaign, user=a2)
    assert second.task_id == first.task_id and second.pk != first.pk  # fills the front task first
    third = assignment_claim(campaign=campaign, user=a3)
    assert third.task.position == 1  # task at position 0 is full


def test_claim_runs_dry_without_exceeding_n(researcher, annotators):
    campaign = make_campaign(make_dataset(owner=researcher, items=2), annotators, raters_per_item=2)
    done = {a.pk: 0 for a in annotators}
    progress = True
    while progress:
        progress = False
        for user in annotators:
            assignment = assignment_claim(campaign=campaign, user=user)
            if assignment is None:
                continue
            submit_answer(
                campaign, assignment, user, f"submission-{assignment.pk}-{user.pk}", full_answer(assignment, user)
            )
            done[user.pk] += 1
            progress = True
    assert sum(done.values()) == 4
    for task in campaign.tasks.all():
        raters = list(task.assignments.filter(status=AssignmentStatus.SUBMITTED).values_list("annotator", flat=True))
        assert len(raters) == 2 == len(set(raters))
    assert annotator_progress(campaign=campaign, user=annotators[0]).available == 0


def test_expired_lease_goes_to_someone_else_and_the_first_holder_is_refused(researcher, annotator1, annotator2):
    campaign = make_campaign(make_dataset(owner=researcher, items=1), [annotator1, annotator2], raters_per_item=1)
    mine = assignment_claim(campaign=campaign, user=annotator1)
    assert assignment_claim(campaign=campaign, user=annotator2) is None  # the only slot is leased
    later = timezone.now() + timedelta(minutes=campaign.lease_minutes + 1)
    theirs = assignment_claim(campaign=campaign, user=annotator2, now=later)
    assert theirs is not None and theirs.pk == mine.pk and theirs.annotator_id == annotator2.pk
    with pytest.raises(NotLeased):
        submit_answer(campaign, mine, annotator1, "late-submit-1", full_answer(theirs, annotator1))


def test_expired_lease_still_held_can_be_submitted(researcher, annotator1):
    campaign = make_campaign(make_dataset(owner=researcher, items=1), [annotator1], raters_per_item=1)
    mine = assignment_claim(campaign=campaign, user=annotator1)
    later = timezone.now() + timedelta(hours=5)
    result = submit_answer(campaign, mine, annotator1, "slow-but-fine", full_answer(mine, annotator1), now=later)
    assert result.submission.seconds_spent >= 5 * 3600 - 5


def test_skip_records_reason_frees_slot_and_never_returns(researcher, annotator1, annotator2):
    campaign = make_campaign(make_dataset(owner=researcher, items=2), [annotator1, annotator2], raters_per_item=1)
    first = assignment_claim(campaign=campaign, user=annotator1)
    skip = assignment_skip(assignment=first, user=annotator1, reason="not_qualified", note="medical topic")
    assert skip.reason == "not_qualified" and skip.note == "medical topic"
    nxt = assignment_claim(campaign=campaign, user=annotator1)
    assert nxt.task_id != first.task_id
    other = assignment_claim(campaign=campaign, user=annotator2)
    assert other.task_id == first.task_id  # the freed slot is at the front again
    with pytest.raises(CampaignError):
        assignment_skip(assignment=nxt, user=annotator1, reason="because")


def test_removed_annotator_loses_access_and_their_lease(researcher, annotator1, annotator2):
    campaign = make_campaign(make_dataset(owner=researcher, items=1), [annotator1, annotator2], raters_per_item=1)
    mine = assignment_claim(campaign=campaign, user=annotator1)
    campaign_annotator_remove(campaign=campaign, user=annotator1)
    mine.refresh_from_db()
    assert mine.status == AssignmentStatus.FREE and mine.annotator is None
    with pytest.raises(NotInPool):
        assignment_claim(campaign=campaign, user=annotator1)
    with pytest.raises(NotInPool):
        submit_answer(campaign, mine, annotator1, "gone-0001", TaskAnswer(ratings={}))
    assert assignment_claim(campaign=campaign, user=annotator2).pk == mine.pk


def test_submission_stores_ratings_preference_and_server_time(researcher, annotator1):
    campaign = make_campaign(make_dataset(owner=researcher, items=1), [annotator1], raters_per_item=1)
    assignment = assignment_claim(campaign=campaign, user=annotator1)
    answer = full_answer(assignment, annotator1, value=3, preference=2)
    answer.none_appropriate = True
    answer.comment = "fine"
    moment = assignment.leased_at + timedelta(seconds=42)
    result = submit_answer(campaign, assignment, annotator1, "abcdefgh-1", answer, now=moment)
    submission = result.submission
    assert not result.replayed
    assert submission.seconds_spent == pytest.approx(42)
    assert submission.none_appropriate and submission.rationale == "clear and correct"
    candidates = task_candidates(assignment=assignment, user_id=annotator1.pk)
    assert submission.preferred_response_id == candidates[1].response_id
    ratings = Rating.objects.filter(origin=RatingOrigin.APP)
    assert ratings.count() == 8
    na = ratings.get(response_id=candidates[0].response_id, aspect__name="amount_info")
    assert na.is_missing and na.raw == "NA" and na.value is None
    fact = ratings.get(response_id=candidates[0].response_id, aspect__name="factuality")
    assert fact.raw == 3 and fact.value == 3.0 and fact.seconds_spent == pytest.approx(42)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED


def test_double_submit_is_idempotent(researcher, annotator1):
    campaign = make_campaign(make_dataset(owner=researcher, items=2), [annotator1], raters_per_item=1)
    assignment = assignment_claim(campaign=campaign, user=annotator1)
    kwargs = {"campaign": campaign, "task_id": assignment.task_id, "user": annotator1}
    first = submission_create(idempotency_key="same-key-1", answer=full_answer(assignment, annotator1), **kwargs)
    again = submission_create(idempotency_key="same-key-1", answer=full_answer(assignment, annotator1), **kwargs)
    other_key = submission_create(idempotency_key="other-key-2", answer=full_answer(assignment, annotator1), **kwargs)
    assert again.replayed and other_key.replayed
    assert again.submission.pk == first.submission.pk == other_key.submission.pk
    assert Submission.objects.count() == 1
    assert Rating.objects.filter(origin=RatingOrigin.APP).count() == 8


def test_someone_elses_key_is_refused(researcher, annotator1, annotator2):
    campaign = make_campaign(make_dataset(owner=researcher, items=1), [annotator1, annotator2], raters_per_item=2)
    a = assignment_claim(campaign=campaign, user=annotator1)
    submit_answer(campaign, a, annotator1, "k-annotator1", full_answer(a, annotator1))
    b = assignment_claim(campaign=campaign, user=annotator2)
    with pytest.raises(NotLeased):
        submit_answer(campaign, b, annotator2, "k-annotator1", full_answer(b, annotator2))


def test_invalid_submission_names_every_missing_field_and_writes_nothing(researcher, annotator1):
    campaign = make_campaign(make_dataset(owner=researcher, items=1), [annotator1], raters_per_item=1)
    assignment = assignment_claim(campaign=campaign, user=annotator1)
    answer = TaskAnswer(ratings={(1, 1): 2, (1, 2): 9, (2, 1): MISSING}, preference=None, rationale="  ")
    with pytest.raises(SubmissionInvalid) as caught:
        submit_answer(campaign, assignment, annotator1, "bad-bad-1", answer)
    fields = [p.field for p in caught.value.problems]
    assert fields == ["r-1-2", "r-2-1", "r-2-2", "r-3-1", "r-3-2", "r-4-1", "r-4-2", "preference", "rationale"]
    messages = " ".join(p.message for p in caught.value.problems)
    assert "Candidate 2: Factuality cannot be N/A" in messages
    assert "Amount Info must be within -1–1" in messages
    assert not Submission.objects.exists() and not Rating.objects.filter(origin=RatingOrigin.APP).exists()
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.LEASED


def test_optional_preference_and_rationale(researcher, annotator1):
    campaign = make_campaign(
        make_dataset(owner=researcher, items=1),
        [annotator1],
        raters_per_item=1,
        ask_preference=False,
        rationale_required=False,
    )
    assignment = assignment_claim(campaign=campaign, user=annotator1)
    answer = full_answer(assignment, annotator1)
    answer.preference = None
    answer.rationale = ""
    result = submission_create(
        campaign=campaign, task_id=assignment.task_id, user=annotator1, idempotency_key="no-pref-1", answer=answer
    )
    assert result.submission.preferred_response is None


def test_candidate_order_is_stable_per_annotator_and_differs_between_them():
    campaign = Campaign(shuffle_seed="fixed-seed")
    task = Task(pk=7)
    ids = list(range(100, 108))
    one = candidate_order(campaign=campaign, task=task, user_id=1, response_ids=ids)
    assert one == candidate_order(campaign=campaign, task=task, user_id=1, response_ids=list(reversed(ids)))
    orders = {tuple(candidate_order(campaign=campaign, task=task, user_id=u, response_ids=ids)) for u in range(1, 6)}
    assert len(orders) > 1 and sorted(one) == ids


def test_scale_options_keys_and_missing():
    from annotations.models import Aspect

    negative = Aspect(name="amount", min_value=-1, max_value=1, ideal=0, labels={"-1": "too little"}, missing=["NA"])
    scale = aspect_scale(negative, 1)
    # a digit never stands for another value: signed scales use "-", "0" and "+"
    assert [(o.token, o.key) for o in scale.options] == [("-1", "-"), ("0", "0"), ("1", "+")]
    assert scale.is_signed
    assert scale.options[0].label == "-1 · too little" and scale.allows_missing and scale.missing_token == "NA"
    jp = Aspect(name="fluency", min_value=1, max_value=5, ideal=5, missing=[None, "NA", 0])
    assert [o.key for o in aspect_scale(jp, 2).options] == ["1", "2", "3", "4", "5"]
    assert not aspect_scale(jp, 2).is_signed
    zero_based = Aspect(name="factuality", min_value=0, max_value=3, ideal=3, missing=[])
    assert [o.key for o in aspect_scale(zero_based, 2).options] == ["0", "1", "2", "3"]
    signed_wide = Aspect(name="bias", min_value=-2, max_value=2, ideal=0, missing=[])
    assert [o.key for o in aspect_scale(signed_wide, 2).options] == ["", "-", "0", "+", ""]
    ten = Aspect(name="overall", min_value=1, max_value=10, ideal=10, missing=[])
    assert [o.key for o in aspect_scale(ten, 2).options] == ["1", "2", "3", "4", "5", "6", "7", "8", "9", ""]
    wide = Aspect(name="score", min_value=0, max_value=100, ideal=100, missing=[])
    wide_scale = aspect_scale(wide, 3)
    assert not wide_scale.is_discrete and not wide_scale.allows_missing


def test_progress_and_export_show_app_ratings_as_pseudonymous_raters(researcher, annotator1, annotator2):
    dataset = make_dataset(owner=researcher, items=1)
    campaign = make_campaign(dataset, [annotator1, annotator2], raters_per_item=2)
    for user in (annotator1, annotator2):
        a = assignment_claim(campaign=campaign, user=user)
        submit_answer(
            campaign,
            a,
            user,
            f"export-{user.pk}-x",
            full_answer(a, user),
            now=a.leased_at + timedelta(seconds=10 if user == annotator1 else 30),
        )
    progress = campaign_progress(campaign)
    assert progress.tasks_complete == progress.tasks_total == 1
    by_name = {row.username: row for row in progress.annotators}
    assert by_name["annotator1"].done == 1 and by_name["annotator1"].median_seconds == pytest.approx(10)
    assert by_name["annotator2"].median_seconds == pytest.approx(30)
    line = json.loads(next(iter(iter_export_lines(dataset=dataset))))
    answer = next(iter(line["turns"][0]["responses"].values()))
    assert len(answer["raters"]) == 2
    assert all(r.startswith("annotator-") for r in answer["raters"])
    assert "annotator1" not in json.dumps(line) and "annotator2" not in json.dumps(line)
    assert len(answer["human_evals"]["factuality"]) == 2
