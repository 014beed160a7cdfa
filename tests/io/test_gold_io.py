"""The JSONL gold field: strict validation naming line and field, storage as GoldItem, an exact round trip, and
exports that leave out the ratings collected on gold items."""

import io
import json
from typing import Any

import pytest

from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.submissions import submission_create
from annotations.datasets.downloads import iter_export
from annotations.datasets.exporting import iter_export_lines
from annotations.datasets.flat_export import iter_flat_rows
from annotations.datasets.importing import dataset_import
from annotations.errors import DatasetImportError
from annotations.models import Campaign, GoldItem, GoldKind, Item, Rating, RatingOrigin, Task
from annotations.slots import slot_personal_lease
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS
from tests.annotate.factories import full_answer, lfqa_lines, make_campaign, make_dataset, submit_answer
from tests.io.helpers import assert_json_equal, row_counts

pytestmark = pytest.mark.django_db

GOLD = {"kind": "gold", "expected": {"sys_alpha": {"factuality": 3, "amount_info": 0}}, "tolerance": 0.5}
ATTENTION = {
    "kind": "attention",
    "expected": {"sys_beta": {"factuality": 2}},
    "tolerance": 0,
    "instruction": "Choose 2 for Factuality on this answer.",
}


def lines_with(gold: Any = None, attention: Any = None, *, items: int = 4) -> list[dict[str, Any]]:
    lines = lfqa_lines(items, systems=2)
    if gold is not None:
        lines[1]["gold"] = gold
    if attention is not None:
        lines[2]["gold"] = attention
    return lines


def test_gold_fields_are_stored_and_round_trip_exactly(researcher):
    lines = lines_with(GOLD, ATTENTION)
    dataset = make_dataset("golden", owner=researcher, lines=lines)
    gold = GoldItem.objects.get(item__external_id="q1", item__dataset=dataset)
    assert (gold.kind, gold.expected, gold.tolerance, gold.instruction) == (GoldKind.GOLD, GOLD["expected"], 0.5, "")
    assert gold.created_by == researcher
    check = GoldItem.objects.get(item__external_id="q2", item__dataset=dataset)
    assert check.kind == GoldKind.ATTENTION and check.instruction == ATTENTION["instruction"]
    assert "gold" not in Item.objects.get(dataset=dataset, external_id="q1").source
    exported = [json.loads(line) for line in iter_export_lines(dataset=dataset)]
    assert exported[1]["gold"] == GOLD and exported[2]["gold"] == ATTENTION and "gold" not in exported[0]
    copy = make_dataset("copy", owner=researcher, lines=exported)
    assert_json_equal([json.loads(line) for line in iter_export_lines(dataset=copy)], exported)
    assert_json_equal(exported, lines)


def test_tolerance_defaults_to_zero_and_is_written_back(researcher):
    dataset = make_dataset("d", owner=researcher, lines=lines_with({"kind": "gold", "expected": GOLD["expected"]}))
    assert GoldItem.objects.get(item__dataset=dataset).tolerance == 0
    exported = [json.loads(line) for line in iter_export_lines(dataset=dataset)]
    assert exported[1]["gold"] == {"kind": "gold", "expected": GOLD["expected"], "tolerance": 0}


BAD = [
    ("not-an-object", ["gold"], "a list", [1]),
    ("unknown-key", ["gold.weight"], "the key 'weight'", {**GOLD, "weight": 2}),
    ("unknown-kind", ["gold.kind"], "the string 'golden'", {**GOLD, "kind": "golden"}),
    ("no-expected", ["gold.expected"], "null", {"kind": "gold"}),
    ("empty-expected", ["gold.expected"], "an object", {"kind": "gold", "expected": {}}),
    (
        "unknown-system",
        ["gold.expected.sys_zeta"],
        "the system 'sys_zeta'",
        {"kind": "gold", "expected": {"sys_zeta": {"factuality": 1}}},
    ),
    (
        "unknown-aspect",
        ["gold.expected.sys_alpha.fluency"],
        "the aspect 'fluency'",
        {"kind": "gold", "expected": {"sys_alpha": {"fluency": 1}}},
    ),
    (
        "out-of-range",
        ["gold.expected.sys_alpha.factuality", "from 0 to 3"],
        "the number 4",
        {"kind": "gold", "expected": {"sys_alpha": {"factuality": 4}}},
    ),
    (
        "not-a-number",
        ["gold.expected.sys_alpha.factuality"],
        "the string 'NA'",
        {"kind": "gold", "expected": {"sys_alpha": {"factuality": "NA"}}},
    ),
    (
        "boolean-value",
        ["gold.expected.sys_alpha.factuality"],
        "a boolean",
        {"kind": "gold", "expected": {"sys_alpha": {"factuality": True}}},
    ),
    ("negative-tolerance", ["gold.tolerance"], "the number -1", {**GOLD, "tolerance": -1}),
    ("attention-without-instruction", ["gold.instruction"], "the string ''", {**ATTENTION, "instruction": ""}),
    ("instruction-on-gold", ["gold.instruction"], "the string 'Pick 3'", {**GOLD, "instruction": "Pick 3"}),
]


@pytest.mark.parametrize(("fields", "found", "gold"), [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_invalid_gold_fields_are_refused_naming_line_and_field(researcher, fields, found, gold):
    before = row_counts()
    with pytest.raises(DatasetImportError) as caught:
        make_dataset("bad", owner=researcher, lines=lines_with(gold))
    message = str(caught.value)
    assert message.startswith(f"line 2, field {fields[0]}: invalid gold field")
    assert all(fragment in message for fragment in fields) and found in message
    assert row_counts() == before


def test_gold_field_checked_against_an_inferred_rubric(researcher):
    lines = lfqa_lines(3, systems=2)
    for line in lines:
        for answer in line["turns"][0]["responses"].values():
            answer["human_evals"] = {"clarity": [1, 5]}
    lines[0]["gold"] = {"kind": "gold", "expected": {"sys_alpha": {"clarity": 6}}}
    body = "\n".join(json.dumps(line) for line in lines).encode()
    with pytest.raises(DatasetImportError, match=r"line 1, field gold.expected.sys_alpha.clarity"):
        dataset_import(stream=io.BytesIO(body), name="inferred", owner=researcher)
    lines[0]["gold"]["expected"]["sys_alpha"]["clarity"] = 4
    body = "\n".join(json.dumps(line) for line in lines).encode()
    result = dataset_import(stream=io.BytesIO(body), name="inferred", owner=researcher)
    assert result.gold_items == 1


@pytest.fixture
def rated(researcher, annotator1, annotator2) -> Campaign:  # type: ignore[no-untyped-def]
    """A campaign with one regular task and one gold task submitted by annotator1, and imported ratings on the gold
    item."""
    lines = lines_with(GOLD, items=2)
    lines[1]["turns"][0]["responses"]["sys_alpha"]["human_evals"] = {"factuality": [3]}
    lines[1]["turns"][0]["responses"]["sys_alpha"]["raters"] = ["expert"]
    dataset = make_dataset("rated", owner=researcher, lines=lines)
    campaign = make_campaign(dataset, [annotator1, annotator2], raters_per_item=1)
    regular = assignment_claim(campaign=campaign, user=annotator1)
    assert regular is not None and not regular.is_gold
    submit_answer(campaign, regular, annotator1, "regular-0001", full_answer(regular, annotator1))
    gold_task = Task.objects.get(campaign=campaign, is_gold=True)
    gold = slot_personal_lease(pool=CAMPAIGN_SLOTS, campaign=campaign, task=gold_task, user=annotator1)
    gold.task = gold_task
    for key, value in (("gold-0001", 3), ("gold-0002", 1)):  # a correction, so the history has a version too
        submission_create(
            campaign=campaign,
            task_id=gold_task.pk,
            user=annotator1,
            idempotency_key=key,
            answer=full_answer(gold, annotator1, value=value),
        )
    return campaign


def test_exports_leave_out_ratings_collected_on_gold_items(rated):
    dataset = rated.dataset
    gold_item = Item.objects.get(dataset=dataset, gold__isnull=False)
    assert Rating.objects.filter(origin=RatingOrigin.APP, response__turn__item=gold_item).exists()
    exported = [json.loads(line) for line in iter_export_lines(dataset=dataset)]
    regular_line, gold_line = exported
    assert "preferences" in regular_line["turns"][0] and "preferences" not in gold_line["turns"][0]
    gold_answers = gold_line["turns"][0]["responses"]
    assert gold_answers["sys_alpha"]["human_evals"] == {"factuality": [3]}  # the imported rating stays
    assert gold_answers["sys_alpha"]["raters"] == ["expert"]
    assert "human_evals" not in gold_answers["sys_beta"]
    assert regular_line["turns"][0]["responses"]["sys_alpha"]["human_evals"]["factuality"] == [2]
    for history in (False, True):
        rows = list(iter_flat_rows(dataset=dataset, history=history))
        on_gold = [row for row in rows if row["item_id"] == gold_item.external_id]
        assert [(row["kind"], row["origin"], row["rater"]) for row in on_gold] == [("rating", "import", "expert")]
        assert any(row["item_id"] != gold_item.external_id and row["origin"] == "app" for row in rows)
    for kind in ("flat-csv", "flat-csv-history"):
        body = "".join(iter_export(dataset=dataset, kind=kind))
        assert [line.split(",")[5] for line in body.splitlines() if line.startswith(f"{gold_item.external_id},")] == [
            "import"
        ]
    judged = [json.loads(line) for line in iter_export(dataset=dataset, kind="judges-jsonl")]
    assert judged[1]["turns"][0]["responses"]["sys_alpha"]["human_evals"] == {"factuality": [3]}
