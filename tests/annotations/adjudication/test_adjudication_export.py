"""Adjudicated values export as `consensus` beside the raw ratings, which stay as they were: in the JSONL format
(per answer, and the settled preferences per turn), the flat layout (a last column) and the Parquet ratings."""

import csv
import io
import json
import uuid

import pytest
from django.contrib.auth.models import User

from annotations.adjudication.services import adjudication_rule_set, dispute_resolve
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.submissions import submission_create
from annotations.campaigns.tasks import task_candidates
from annotations.datasets.downloads import iter_export
from annotations.datasets.exporting import FLAT_FIELDS, HISTORY_FIELDS
from annotations.datasets.flat_export import iter_flat_rows
from annotations.datasets.parquet_export import parquet_bytes
from annotations.models import Campaign, Dispute, Response
from annotations.roles import adjudicator_grant
from tests.annotate.factories import full_answer, make_campaign, make_dataset

pytestmark = pytest.mark.django_db


LATER_COLUMNS = ["consensus", "filled_by", "judge_version"]


def rate_all(campaign: Campaign, user: User, *, value: float, prefer_position: int = 0) -> None:
    """Rates every task left for the user, preferring the answer at `prefer_position` in the dataset's order
    (candidate numbers are shuffled per rater, so a number would not say which answer)."""
    while (assignment := assignment_claim(campaign=campaign, user=user)) is not None:
        candidates = task_candidates(assignment=assignment, user_id=user.pk)
        positions = dict(
            Response.objects.filter(pk__in=[c.response_id for c in candidates]).values_list("pk", "position")
        )
        number = next(c.number for c in candidates if positions[c.response_id] == prefer_position)
        submission_create(
            campaign=campaign, task_id=assignment.task_id, user=user, idempotency_key=uuid.uuid4().hex,
            answer=full_answer(assignment, user, value=value, preference=number),
        )  # fmt: skip


@pytest.fixture
def settled(researcher, annotators):  # type: ignore[no-untyped-def]
    """One item of two answers, rated 0, 3 and 2 on factuality by three raters; the dispute settled at 2."""
    adjudicator = adjudicator_grant(user=User.objects.create_user("adjudicator1"))
    campaign = make_campaign(make_dataset(owner=researcher, items=1, systems=2), annotators, raters_per_item=3)
    adjudication_rule_set(campaign=campaign, max_spread=1, preference_splits=True, adjudicators=[adjudicator])
    for index, (user, value) in enumerate(zip(annotators, (0, 3, 2), strict=True)):
        rate_all(campaign, user, value=value, prefer_position=index % 2)
    dispute = Dispute.objects.get()
    assert dispute.preference_split
    values = {(e["response_id"], e["aspect_id"]): "2" for e in dispute.spreads}
    preferred = dispute.task.responses.order_by("position").last()
    assert preferred is not None
    dispute_resolve(
        dispute=dispute, adjudicator=adjudicator, values=values, reason="two of three near 2",
        preferred_response_id=preferred.pk,
    )  # fmt: skip
    dispute.refresh_from_db()
    assert dispute.preferred_response_id == preferred.pk
    return campaign, dispute


def test_jsonl_carries_consensus_beside_the_raw_ratings(settled):  # type: ignore[no-untyped-def]
    campaign, dispute = settled
    (line,) = list(iter_export(dataset=campaign.dataset, kind="jsonl"))
    item = json.loads(line)
    answers = item["turns"][0]["responses"]
    assert len(answers) == 2
    for answer in answers.values():
        assert answer["consensus"] == {"factuality": 2}
        assert sorted(answer["human_evals"]["factuality"]) == [0, 2, 3]  # raw ratings untouched
        assert len(answer["raters"]) == 3
    (settled_preference,) = item["turns"][0]["consensus_preferences"]
    assert settled_preference["campaign"] == campaign.name
    assert settled_preference["preferred"] == Response.objects.get(pk=dispute.preferred_response_id).system.key
    assert settled_preference["reason"] == "two of three near 2"
    assert len(item["turns"][0]["preferences"]) == 3  # the raters' own preferences stay


def test_flat_rows_have_consensus_before_who_filled_them_and_only_on_the_adjudicated_cells(settled):  # type: ignore[no-untyped-def]
    campaign, _ = settled
    rows = list(iter_flat_rows(dataset=campaign.dataset))
    # The columns added later (who filled the row, then the task's sampling probability) come after it, so readers
    # by position keep working.
    assert FLAT_FIELDS[-4:] == HISTORY_FIELDS[-4:] == [*LATER_COLUMNS, "human_probability"]
    assert all(list(row)[-4:-1] == LATER_COLUMNS for row in rows)
    factuality = [r for r in rows if r["kind"] == "rating" and r["aspect"] == "factuality"]
    assert len(factuality) == 6 and {r["consensus"] for r in factuality} == {2.0}
    assert sorted(r["value"] for r in factuality) == [0, 0, 2, 2, 3, 3]
    others = [r for r in rows if not (r["kind"] == "rating" and r["aspect"] == "factuality")]
    assert others and {r["consensus"] for r in others} == {None}


def test_flat_csv_and_history_have_the_consensus_column_before_who_filled_the_row(settled):  # type: ignore[no-untyped-def]
    campaign, _ = settled
    for kind in ("flat-csv", "flat-csv-history"):
        text = "".join(iter_export(dataset=campaign.dataset, kind=kind))
        reader = csv.DictReader(io.StringIO(text))
        assert reader.fieldnames is not None and reader.fieldnames[-4:-1] == LATER_COLUMNS
        assert {row["consensus"] for row in reader if row["aspect"] == "factuality"} == {"2.0"}


def test_parquet_ratings_have_a_consensus_column(settled):  # type: ignore[no-untyped-def]
    import pyarrow.parquet as pq

    campaign, _ = settled
    table = pq.read_table(io.BytesIO(parquet_bytes(dataset=campaign.dataset, table="ratings"))).to_pylist()
    assert {row["consensus"] for row in table if row["aspect"] == "factuality"} == {2.0}
    assert {row["consensus"] for row in table if row["aspect"] != "factuality"} == {None}


def test_no_consensus_key_without_adjudication(researcher, annotators):  # type: ignore[no-untyped-def]
    campaign = make_campaign(make_dataset(owner=researcher, items=1, systems=2), annotators, raters_per_item=3)
    for user, value in zip(annotators, (0, 3, 2), strict=True):
        rate_all(campaign, user, value=value)
    (line,) = list(iter_export(dataset=campaign.dataset, kind="jsonl"))
    item = json.loads(line)
    assert all("consensus" not in answer for answer in item["turns"][0]["responses"].values())
    assert "consensus_preferences" not in item["turns"][0]
