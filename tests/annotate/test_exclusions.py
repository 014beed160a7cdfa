"""Excluding a rater, revoking it, and reopening their slots so each task still gets N ratings that count."""

import csv
import io
import threading
import uuid

import pytest
from django.contrib.auth.models import User
from django.db import connections

from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.progress import campaign_progress
from annotations.datasets.exporting import FLAT_FIELDS, HISTORY_FIELDS
from annotations.datasets.flat_export import iter_flat_csv, iter_flat_rows
from annotations.models import Assignment, AssignmentStatus, Campaign, Rater, RaterExclusion
from annotations.quality.services import ExclusionError, rater_exclude, rater_exclusion_revoke, rater_slots_reopen
from annotations.services import rater_for_user
from tests.annotate.factories import full_answer, make_campaign, make_dataset, rate_all, submit_answer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rated(researcher, annotator1, annotator2):  # type: ignore[no-untyped-def]
    """Two tasks, two raters each, both rated by annotator1 and annotator2."""
    campaign = make_campaign(
        make_dataset(owner=researcher, items=2, systems=2), [annotator1, annotator2], raters_per_item=2
    )
    assert rate_all(campaign, annotator1) == 2
    assert rate_all(campaign, annotator2) == 2
    return campaign


def rater_of(campaign: Campaign, user: User) -> Rater:
    return Rater.objects.get(dataset=campaign.dataset, user=user)


def test_exclude_records_reason_and_refuses_a_second_one(rated, researcher, annotator1):  # type: ignore[no-untyped-def]
    rater = rater_of(rated, annotator1)
    exclusion = rater_exclude(rater=rater, reason="  straight-lining  ", by=researcher, campaign=rated)
    assert exclusion.reason == "straight-lining" and exclusion.excluded_by == researcher
    with pytest.raises(ExclusionError, match="already excluded"):
        rater_exclude(rater=rater, reason="again", by=researcher)
    assert RaterExclusion.objects.count() == 1
    assert Assignment.objects.filter(campaign=rated).count() == 4  # no reopening asked: no new slots
    assert rated.annotators.filter(pk=annotator1.pk).exists()


@pytest.mark.parametrize("reason", ["", "   ", "x" * 2001, "nul\x00", "lone \ud800 surrogate"])
def test_exclude_refuses_a_bad_reason_and_writes_nothing(rated, researcher, annotator1, reason):  # type: ignore[no-untyped-def]
    with pytest.raises(ExclusionError):
        rater_exclude(rater=rater_of(rated, annotator1), reason=reason, by=researcher, campaign=rated)
    assert not RaterExclusion.objects.exists()


def test_exclude_names_an_unpaired_surrogate_in_the_reason(rated, researcher, annotator1):  # type: ignore[no-untyped-def]
    with pytest.raises(ExclusionError, match=r"^The reason contains an unpaired surrogate\.$"):
        rater_exclude(rater=rater_of(rated, annotator1), reason="speeding \udc00", by=researcher, campaign=rated)
    assert not RaterExclusion.objects.exists()


def test_exclude_refuses_a_campaign_of_another_dataset(rated, researcher, annotator1):  # type: ignore[no-untyped-def]
    other = make_campaign(make_dataset("other", owner=researcher, items=1), [annotator1], name="other")
    with pytest.raises(ExclusionError, match="dataset"):
        rater_exclude(rater=rater_of(rated, annotator1), reason="r", by=researcher, campaign=other)
    assert not RaterExclusion.objects.exists()


def test_reopening_an_imported_rater_fails_whole(researcher):  # type: ignore[no-untyped-def]
    dataset = make_dataset(owner=researcher, items=1)
    campaign = make_campaign(dataset, [], name="c")
    imported = Rater.objects.create(dataset=dataset, external_id="r-imp", pseudonym="rater-imp")
    with pytest.raises(ExclusionError, match="imported"):
        rater_exclude(rater=imported, reason="r", by=researcher, campaign=campaign, reopen_slots=True)
    assert not RaterExclusion.objects.exists()  # all or nothing
    assert rater_exclude(rater=imported, reason="r", by=researcher).campaign is None


def test_reopen_adds_one_free_replacement_per_slot_and_is_idempotent(rated, researcher, annotator1, annotator3):  # type: ignore[no-untyped-def]
    exclusion = rater_exclude(
        rater=rater_of(rated, annotator1), reason="fast", by=researcher, campaign=rated, reopen_slots=True
    )
    replacements = list(Assignment.objects.filter(campaign=rated, replaces__isnull=False).order_by("task_position"))
    assert len(replacements) == 2
    for slot in replacements:
        assert slot.status == AssignmentStatus.FREE and slot.annotator_id is None and not slot.is_gold
        assert slot.slot == 3 and slot.slot_limit == 3 and slot.task_id == slot.replaces.task_id
        assert slot.replaces.annotator_id == annotator1.pk
    assert not rated.annotators.filter(pk=annotator1.pk).exists()  # out of the pool
    assert rater_slots_reopen(exclusion=exclusion) == 0  # again: nothing new
    assert Assignment.objects.filter(campaign=rated).count() == 6
    progress = campaign_progress(rated)
    assert [task.submitted for task in progress.tasks] == [1, 1] and progress.tasks_complete == 0


def test_replacement_goes_to_another_annotator_and_the_task_reaches_n(rated, researcher, annotator1, annotator3):  # type: ignore[no-untyped-def]
    rater_exclude(rater=rater_of(rated, annotator1), reason="fast", by=researcher, campaign=rated, reopen_slots=True)
    rated.annotators.add(annotator1)  # even back in the pool, they cannot take a replacement of their own task
    assert assignment_claim(campaign=rated, user=annotator1) is None
    rated.annotators.add(annotator3)
    assert rate_all(rated, annotator3) == 2
    taken = Assignment.objects.filter(campaign=rated, replaces__isnull=False)
    assert {slot.annotator_id for slot in taken} == {annotator3.pk}
    assert all(slot.status == AssignmentStatus.SUBMITTED for slot in taken)
    progress = campaign_progress(rated)
    assert [task.submitted for task in progress.tasks] == [2, 2] and progress.tasks_complete == 2


def test_revoke_keeps_the_record_and_deletes_only_untaken_replacements(rated, researcher, annotator1, annotator3):  # type: ignore[no-untyped-def]
    exclusion = rater_exclude(
        rater=rater_of(rated, annotator1), reason="fast", by=researcher, campaign=rated, reopen_slots=True
    )
    rated.annotators.add(annotator3)
    taken = assignment_claim(campaign=rated, user=annotator3)
    assert taken is not None and taken.replaces_id is not None
    revoked = rater_exclusion_revoke(exclusion=exclusion, by=researcher)
    assert revoked.revoked_at is not None and revoked.revoked_by == researcher
    left = Assignment.objects.filter(campaign=rated, replaces__isnull=False)
    assert [slot.pk for slot in left] == [taken.pk]  # the leased one stays, the free one is gone
    assert RaterExclusion.objects.filter(pk=exclusion.pk).exists()
    again = rater_exclusion_revoke(exclusion=exclusion, by=None)
    assert again.revoked_at == revoked.revoked_at and again.revoked_by == researcher
    # A new exclusion can be recorded once the old one is revoked.
    rater_exclude(rater=rater_of(rated, annotator1), reason="second look", by=researcher)
    assert RaterExclusion.objects.filter(revoked_at__isnull=True).count() == 1
    # The taken replacement, once submitted, makes N+1 ratings that count after the revocation.
    submit_answer(rated, taken, annotator3, uuid.uuid4().hex, full_answer(taken, annotator3))


def test_revoked_exclusion_cannot_reopen(rated, researcher, annotator1):  # type: ignore[no-untyped-def]
    exclusion = rater_exclude(rater=rater_of(rated, annotator1), reason="r", by=researcher, campaign=rated)
    rater_exclusion_revoke(exclusion=exclusion, by=researcher)
    with pytest.raises(ExclusionError, match="revoked"):
        rater_slots_reopen(exclusion=RaterExclusion.objects.get(pk=exclusion.pk))
    assert not Assignment.objects.filter(replaces__isnull=False).exists()


def test_concurrent_reopen_requests_add_one_replacement_per_slot(rated, researcher, annotator1):  # type: ignore[no-untyped-def]
    exclusion = rater_exclude(rater=rater_of(rated, annotator1), reason="r", by=researcher, campaign=rated)
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def reopen() -> None:
        try:
            barrier.wait()
            rater_slots_reopen(exclusion=RaterExclusion.objects.select_related("rater").get(pk=exclusion.pk))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=reopen) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    # SQLite may refuse a concurrent writer outright ("database is locked"); no request may add a second slot.
    assert all("locked" in str(error) for error in errors), errors
    assert len(errors) < 4
    replacements = Assignment.objects.filter(campaign=rated, replaces__isnull=False)
    assert replacements.count() == 2
    assert len({slot.replaces_id for slot in replacements}) == 2


def test_rater_for_user_is_the_rater_excluded(rated, annotator1):  # type: ignore[no-untyped-def]
    assert rater_for_user(dataset=rated.dataset, user=annotator1) == rater_of(rated, annotator1)


def test_a_positional_imported_rater_cannot_be_excluded(researcher):  # type: ignore[no-untyped-def]
    dataset = make_dataset(owner=researcher, items=1)
    positional = Rater.objects.create(dataset=dataset, external_id="#1", pseudonym="#1", is_positional=True)
    with pytest.raises(ExclusionError, match="not a person"):
        rater_exclude(rater=positional, reason="odd", by=researcher)
    assert not RaterExclusion.objects.exists()


def test_the_flat_exports_mark_the_rows_of_an_excluded_rater(rated, researcher, annotator1, annotator2):  # type: ignore[no-untyped-def]
    excluded = rater_of(rated, annotator1)
    rater_exclude(rater=excluded, reason="straight-lining", by=researcher, campaign=rated)
    kept = rater_of(rated, annotator2).pseudonym
    rows = list(iter_flat_rows(dataset=rated.dataset))
    assert {row["rater"] for row in rows} == {excluded.pseudonym, kept}
    assert all(row["rater_excluded"] is (row["rater"] == excluded.pseudonym) for row in rows)
    # New columns go last, so a script reading the older layout by position keeps working.
    # Just before the adjudicated value, which who filled the row and the sampling probability follow.
    assert FLAT_FIELDS[-5] == "rater_excluded" and HISTORY_FIELDS[-5] == "rater_excluded"
    table = list(csv.DictReader(io.StringIO("".join(iter_flat_csv(iter_flat_rows(dataset=rated.dataset))))))
    assert {(row["rater"], row["rater_excluded"]) for row in table} == {(excluded.pseudonym, "True"), (kept, "False")}
    # A revoked exclusion no longer marks anyone.
    rater_exclusion_revoke(exclusion=RaterExclusion.objects.get(), by=researcher)
    assert not any(row["rater_excluded"] for row in iter_flat_rows(dataset=rated.dataset, history=True))
